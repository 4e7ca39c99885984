"""Checks that a name in one section refers to something another section defines.

A reference into a section that is itself broken cannot be checked, so `Known` holds None there
and the reference passes: the broken section has its own error, and one mistake is one error.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from broker.protocol.placement import PlacementError, place_topic
from testbed.config.walker import INVALID, describe, is_digits, is_int

TARGET_GRAMMAR = (
    "broker:N, controller:N, rack:X, leader-of TOPIC/P, leader-of any, followers-of TOPIC/P, "
    "isr-of TOPIC/P, active-controller, random-broker, random-controller, controllers, brokers, "
    "clients, stopped, paused"
)
_TARGET_WORDS = frozenset(
    {
        "leader-of any",
        "active-controller",
        "random-broker",
        "random-controller",
        "controllers",
        "brokers",
        "clients",
        "stopped",
        "paused",
    }
)
_PARTITION_TARGET_RE = re.compile(r"^(leader-of|followers-of|isr-of) (\S+)\Z", re.ASCII)
_TOPIC_PARTITION_RE = re.compile(r"^([A-Za-z0-9._-]+)/([0-9]{1,9})\Z")
#: the targets that name one node (a link from one to itself is no link)
_ONE_NODE_RE = re.compile(r"(broker|controller):[0-9]{1,9}|leader-of \S+|active-controller", re.ASCII)


def topic_named(text: str) -> str | None:
    """The topic of `TOPIC/P` or of a partition target (`leader-of TOPIC/P`); None for others."""
    named = partition_named(text)
    return None if named is None else named[0]


def partition_named(text: str) -> tuple[str, int] | None:
    """The topic and partition of `TOPIC/P` or of a partition target (`leader-of TOPIC/P`)."""
    partition = _PARTITION_TARGET_RE.match(text)
    match = _TOPIC_PARTITION_RE.match(partition.group(2) if partition else text)
    return (match.group(1), int(match.group(2))) if match else None


def names_one_node(target: str) -> bool:
    """The target resolves to one node at most (`broker:2`, `leader-of orders/0`), not a group."""
    return _ONE_NODE_RE.fullmatch(target) is not None


@dataclass(frozen=True)
class Known:
    """What other sections defined, for cross-references; None where that section is broken."""

    broker_ids: tuple[int, ...] | None
    controller_ids: tuple[int, ...] | None
    topics: dict[str, int | None] | None  # name -> partitions (None if that count is broken)
    #: "topic/P" -> its replicas when the run starts (the placement the controller will make);
    #: None when the cluster or topics are broken
    replicas: dict[str, tuple[int, ...]] | None = None
    #: topic -> replication factor, for admin commands that change the broker set (R39)
    replication: dict[str, int] | None = None
    #: topic -> min.insync.replicas, of the topics the run starts with
    min_isr: dict[str, int] | None = None
    #: the brokers of `broker_ids` that `add-broker` faults add (R38), not there at the start
    added_brokers: frozenset[int] = frozenset()
    #: the racks of the controllers that have one: a `rack:` target names those nodes too
    controller_racks: frozenset[str] = frozenset()
    #: topic -> partitions when the run starts (`topics` also counts those admin faults make
    #: later); None when the topics are broken
    initial_partitions: dict[str, int] | None = None
    #: broker id -> its rack (None: no rack), those `add-broker` faults add included; None
    #: when the cluster is broken
    broker_racks: dict[int, str | None] | None = None

    @property
    def racks(self) -> frozenset[str] | None:
        """The brokers' racks; None when the cluster is broken."""
        if self.broker_racks is None:
            return None
        return frozenset(r for r in self.broker_racks.values() if r is not None)


#: what a disk-loss of the only controller does instead (`faults.injector`): the note a
#: topology gets where one may strike it
ONLY_CONTROLLER_KEPT = ("a disk-loss of the only controller keeps its data directory (its log is all the metadata "
                        "there is: nothing could rebuild it) and acts as a kill; its effect says `kept`. Give the "
                        "cluster 3 controllers to lose a controller's disk")


def may_name_only_controller(target: str | None, known: Known) -> bool:
    """Whether `target` may resolve to the cluster's one controller, when it has one."""
    if target is None or known.controller_ids is None or len(known.controller_ids) != 1:
        return False
    return (target in ("controllers", "active-controller", "random-controller", f"controller:{known.controller_ids[0]}")
            or target.startswith("rack:") and target[len("rack:"):] in known.controller_racks)


def known_from(cluster: Any, topics: Any, raw_topics: object, seed: int | None) -> Known:
    """What the cluster and topics sections defined; either may be INVALID (and `seed` None)."""
    controller_racks: frozenset[str] = frozenset()
    broker_racks: dict[int, str | None] | None = None
    if cluster is INVALID:
        broker_ids = controller_ids = None
    else:
        broker_ids = tuple(b.id for b in cluster.brokers)
        broker_racks = {b.id: b.rack for b in cluster.brokers}
        controller_ids = tuple(c.id for c in cluster.controllers)
        controller_racks = frozenset(c.rack for c in cluster.controllers if c.rack is not None)
    if topics is not INVALID:
        replicas = None if cluster is INVALID or seed is None else initial_replicas(cluster, topics, seed)
        return Known(broker_ids, controller_ids, {t.name: t.partitions for t in topics}, replicas,
                     {t.name: t.replication_factor for t in topics}, {t.name: t.min_insync_replicas for t in topics},
                     controller_racks=controller_racks,
                     initial_partitions={t.name: t.partitions for t in topics}, broker_racks=broker_racks)
    # Topics are broken, but names that did parse still let references be checked, as long
    # as every entry's name parsed (else an unknown name may be the broken one).
    names: dict[str, int | None] = {}
    for entry in raw_topics if isinstance(raw_topics, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            return Known(broker_ids, controller_ids, None, controller_racks=controller_racks,
                         broker_racks=broker_racks)
        count = entry.get("partitions", 1)
        names[entry["name"]] = count if is_int(count) and count >= 1 else None
    return Known(broker_ids, controller_ids, names or None, controller_racks=controller_racks,
                 broker_racks=broker_racks)


def with_added_brokers(known: Known, raw_faults: object) -> Known:
    """`known` with the brokers the run's `add-broker` faults add (R38) and their racks, so
    that faults may name them; whether each is in the cluster when it is named is checked in
    firing order by the faults section."""
    if known.broker_ids is None or not isinstance(raw_faults, list):
        return known
    added = [e["broker"] for e in raw_faults if isinstance(e, dict) and e.get("do") == "add-broker"
             and isinstance(e.get("broker"), dict) and is_int(e["broker"].get("id"))]
    ids = tuple(dict.fromkeys([*known.broker_ids, *(b["id"] for b in added)]))
    broker_racks = known.broker_racks
    if broker_racks is not None:
        broker_racks = {**{b["id"]: b["rack"] if isinstance(b.get("rack"), str) else None for b in added},
                        **broker_racks}
    return dataclasses.replace(known, broker_ids=ids, broker_racks=broker_racks,
                               added_brokers=frozenset(b["id"] for b in added) - set(known.broker_ids))


def with_created_topics(known: Known, raw_faults: object) -> Known:
    """`known` with the topics the run's `create-topic` faults make and the partitions its
    `add-partitions` faults add, so that clients and faults may name them: a topic made
    again after its deletion counts its most partitions. Whether each topic and partition
    exists when it is named is checked in firing order by the faults section."""
    if known.topics is None or not isinstance(raw_faults, list):
        return known
    topics = dict(known.topics)
    entries = [e for e in raw_faults if isinstance(e, dict)]
    for entry in entries:
        spec = entry.get("topic")
        if entry.get("do") == "create-topic" and isinstance(spec, dict) and isinstance(spec.get("name"), str):
            count = spec.get("partitions", 1)
            count = count if is_int(count) and count >= 1 else None
            name = spec["name"]
            if name not in topics:
                topics[name] = count
            elif topics[name] is not None:
                topics[name] = None if count is None else max(topics[name], count)
    for entry in entries:
        name, count = entry.get("topic"), entry.get("count")
        if entry.get("do") == "add-partitions" and isinstance(name, str) and topics.get(name) is not None \
                and is_int(count) and count >= 1:
            topics[name] += count
    return dataclasses.replace(known, topics=topics)


def initial_replicas(cluster: Any, topics: Any, seed: int) -> dict[str, tuple[int, ...]] | None:
    """Every partition's replicas as the controller will place them (R34), every broker up."""
    racks = {b.id: b.rack for b in cluster.brokers}
    out: dict[str, tuple[int, ...]] = {}
    for t in topics:
        try:
            assignment = t.assignment or place_topic(t.placement, t.name, t.partitions, t.replication_factor, racks,
                                                     seed if t.placement_seed is None else t.placement_seed)
        except PlacementError:
            return None  # the topics section reports it
        out.update({f"{t.name}/{p}": tuple(r) for p, r in assignment.items()})
    return out


def replica_list_problem(replicas: object, broker_ids: set[int] | None) -> str | None:
    if not isinstance(replicas, list) or not replicas:
        return f"expected a non-empty list of broker ids, got {describe(replicas)}"
    if bad := [r for r in replicas if not is_int(r)]:
        return (f"expected broker ids (integers, e.g. [1, 2, 3]), got {', '.join(map(repr, bad))} "
                f"in {replicas}")
    if len(set(replicas)) != len(replicas):
        return f"{replicas} names a broker twice (expected distinct broker ids)"
    if broker_ids is not None:
        unknown = [r for r in replicas if r not in broker_ids]
        if unknown:
            return f"no broker {', '.join(map(str, unknown))} (brokers: {', '.join(map(str, sorted(broker_ids)))})"
    return None


def partition_list_problem(value: object, partitions: int | None) -> str | None:
    if not isinstance(value, list) or not value or not all(is_int(p) for p in value):
        return f"expected a non-empty list of partition numbers, got {describe(value)}"
    if len(set(value)) != len(value):
        return f"{value} names a partition twice"
    if partitions is not None:
        outside = [p for p in value if not 0 <= p < partitions]
        if outside:
            return f"no partition {', '.join(map(str, outside))} (the topic has partitions 0..{partitions - 1})"
    return None


def topic_partition_problem(text: str, known: Known, shown: str | None = None) -> str | None:
    """None if `text` is TOPIC/P naming a partition that exists (or can't be checked);
    `shown` is the selector as written, where that is more than TOPIC/P (`leader-of T/P`)."""
    shown = text if shown is None else shown
    match = _TOPIC_PARTITION_RE.match(text)
    if match is None:
        return f"{text!r} is not TOPIC/PARTITION (e.g. orders/0)"
    topic, partition = match.group(1), int(match.group(2))
    if known.topics is None:
        return None
    if topic not in known.topics:
        return f"unknown topic {topic!r} in {shown!r} (topics: {', '.join(known.topics)})"
    count = known.topics[topic]
    if count is not None and partition >= count:
        return f"{shown!r}: topic {topic} has partitions 0..{count - 1}"
    return None


def target_problem(target: object, known: Known) -> str | None:
    """None if `target` follows the target grammar (DESIGN 6) and names things that exist."""
    if not isinstance(target, str):
        return f"expected a target ({TARGET_GRAMMAR}), got {describe(target)}"
    if target in _TARGET_WORDS:
        return None
    kind, colon, rest = target.partition(":")
    if colon and kind in ("broker", "controller"):
        if not is_digits(rest):
            return f"{target!r}: expected {kind}:N with N a {kind} id"
        ids = known.broker_ids if kind == "broker" else known.controller_ids
        if ids is not None and int(rest) not in ids:
            return f"{target!r}: there is no {kind} {rest} ({kind} ids: {', '.join(map(str, ids))})"
        return None
    if colon and kind == "rack":
        if known.racks is not None and rest not in known.racks | known.controller_racks:
            racks = ", ".join(sorted(known.racks | known.controller_racks)) or "no node has a rack"
            return f"{target!r}: no node is in rack {rest!r} (racks: {racks})"
        return None
    match = _PARTITION_TARGET_RE.match(target)
    if match is not None:
        return topic_partition_problem(match.group(2), known, shown=target)
    return f"unknown target {target!r} (expected one of: {TARGET_GRAMMAR})"
