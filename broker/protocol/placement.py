"""Replica placement for new topics (R34), Kafka's StripedReplicaPlacer / AdminUtils rule.

Seed 003 ("Replica placements"): partition i's first (preferred) replica goes on broker
i mod n, and "the jth replica of partition k [the k-th partition whose first replica is on
broker i] will be assigned to broker (i + j + k) mod n", so that when a broker fails the
partitions it led are served by all survivors, not by one neighbour. Kafka implements the k
shift as `1 + (shift + j) mod (n - 1)` brokers after the first replica, which equals the
seed's `j + k` while `j + k < n` and never lands on the first replica's broker again; isrlab
uses Kafka's form. Kafka draws the start index and the initial shift at random so that all
topics do not lead on the same broker; here both derive from `seed`, so a run replays.
"""
from __future__ import annotations

import random
import zlib
from collections import defaultdict


class PlacementError(ValueError):
    """The cluster cannot hold the topic as asked (R34): too few brokers for the RF."""


def round_robin_start(brokers: int, seed: int) -> tuple[int, int]:
    """(start index, initial replica shift) for `brokers` brokers: Kafka's two random draws, seeded."""
    rng = random.Random(seed)
    return rng.randrange(brokers), rng.randrange(brokers)


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    """Seed 003's (i + j + k) mod n, in Kafka's form that never returns `first` itself."""
    return (first + 1 + (shift + j) % (n - 1)) % n


def _check(partitions: int, rf: int, brokers: int) -> None:
    if partitions < 1:
        raise PlacementError(f"a topic needs at least one partition, got {partitions}")
    if not 1 <= rf <= brokers:
        raise PlacementError(f"replication factor {rf} with {brokers} brokers")


def place_round_robin(partitions: int, rf: int, brokers: list[int], seed: int) -> dict[int, list[int]]:
    """R34 `round-robin`: the seed-003 rule over `brokers` sorted by id."""
    ordered = sorted(brokers)
    n = len(ordered)
    _check(partitions, rf, n)
    start, shift = round_robin_start(n, seed)
    assignment: dict[int, list[int]] = {}
    for p in range(partitions):
        k = shift + p // n  # the k of seed 003: one more for each round over the brokers
        first = (start + p) % n
        assignment[p] = [ordered[first]] + [ordered[_replica_index(first, k, j, n)] for j in range(rf - 1)]
    return assignment


def rack_alternated(brokers: dict[int, str | None]) -> list[int]:
    """Brokers ordered one per rack in turn: racks sorted, brokers sorted inside each rack.

    Brokers without a rack form one rack of their own, as they share an unknown failure domain.
    """
    by_rack: dict[str, list[int]] = defaultdict(list)
    for broker, rack in sorted(brokers.items()):
        by_rack["" if rack is None else f"rack:{rack}"].append(broker)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    depth = max((len(c) for c in columns), default=0)
    return [column[i] for i in range(depth) for column in columns if i < len(column)]


def place_rack_aware(partitions: int, rf: int, brokers: dict[int, str | None], seed: int) -> dict[int, list[int]]:
    """R34 `rack-aware` (Kafka's assignReplicasToBrokersRackAware), I9.

    Walks the rack-alternated list from each partition's first replica with the seed-003
    shift and takes a broker only if its rack holds no replica of the partition yet (or
    every rack does) and the broker holds none (or every broker does). Each partition thus
    spans min(RF, racks) racks, and first replicas step through the list one by one, so
    leader counts differ by at most one.
    """
    arranged = rack_alternated(brokers)
    n = len(arranged)
    _check(partitions, rf, n)
    rack_of = {b: brokers[b] for b in arranged}
    racks = len(set(rack_of.values()))
    start, shift = round_robin_start(n, seed)
    assignment: dict[int, list[int]] = {}
    for p in range(partitions):
        k = (shift + p // n) * racks
        first = (start + p) % n
        replicas = [arranged[first]]
        used_racks = {rack_of[arranged[first]]}
        j = 0
        while len(replicas) < rf:  # ends: rf <= n, and _replica_index visits every other broker
            broker = arranged[_replica_index(first, k, j, n)]
            j += 1
            if rack_of[broker] in used_racks and len(used_racks) < racks:
                continue
            if broker in replicas:
                continue
            replicas.append(broker)
            used_racks.add(rack_of[broker])
        assignment[p] = replicas
    return assignment


def place_topic(placement: str, name: str, partitions: int, rf: int, brokers: dict[int, str | None],
                placement_seed: int) -> dict[int, list[int]]:
    """A new topic's assignment under `rack-aware` or `round-robin` on `brokers` (id -> rack),
    seeded from the run's seed and the topic's name: the controller places topics with it,
    and the topology's validator computes the same assignment to check faults that name
    replicas."""
    seed = zlib.crc32(f"{placement_seed}/{name}".encode())
    if placement == "rack-aware":
        return place_rack_aware(partitions, rf, brokers, seed)
    if placement == "round-robin":
        return place_round_robin(partitions, rf, sorted(brokers), seed)
    raise PlacementError(f"unknown placement {placement!r} (rack-aware | round-robin)")
