"""R38 and R39: the rebalance plan (broker/protocol/rebalance.py) against its promises: balanced
replica and leader counts, rack spread kept, every partition on distinct brokers, and as few
replica moves as possible, checked against a brute-force optimum on small clusters."""
from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from broker.protocol.placement import place_topic
from broker.protocol.rebalance import Partition, Plan, RebalanceError, plan_rebalance

RACKS3 = {1: "a", 2: "b", 3: "c"}


def _topic(name: str, partitions: int, rf: int, brokers: dict[int, str | None],
           placement: str = "rack-aware") -> dict[Partition, list[int]]:
    return {(name, p): r for p, r in place_topic(placement, name, partitions, rf, brokers, 7).items()}


def _spread(replicas: list[int], racks: dict[int, str | None]) -> int:
    return len({racks[b] for b in replicas})


def _assert_balanced(plan: Plan, before: dict[Partition, list[int]], brokers: dict[int, str | None],
                     leaving: frozenset[int] = frozenset()) -> None:
    staying = [b for b in brokers if b not in leaving]
    replicas = Counter(b for r in plan.target.values() for b in r)
    leaders = Counter(r[0] for r in plan.target.values())
    total = sum(len(r) for r in before.values())
    assert plan.balanced
    assert set(replicas) <= set(staying)
    assert {replicas[b] for b in staying} <= {total // len(staying), -(-total // len(staying))}, replicas
    mean = len(before) / len(staying)
    assert all(abs(leaders[b] - mean) < 1 for b in staying), leaders
    for p, r in plan.target.items():
        assert len(r) == len(set(r)) == len(before[p]), (p, r)
    # the moves are exactly what differs between before and the target
    assert sum(len(set(plan.target[p]) - set(before[p])) for p in before) == len(plan.moves)
    for m in plan.moves:
        assert m.source in before[m.partition] and m.source not in plan.target[m.partition]
        assert m.dest in plan.target[m.partition] and m.dest not in before[m.partition]


def test_r38_adding_one_broker_to_three_moves_exactly_the_lower_bound() -> None:
    """The closing note's figure: 24 partitions RF 3 on 3 brokers, broker 4 joins (its own
    rack). Each broker holds 24 replicas and must end with 18, so 18 replicas move, no more."""
    before = _topic("orders", 24, 3, RACKS3)
    brokers = {**RACKS3, 4: "d"}
    plan = plan_rebalance(before, brokers)
    _assert_balanced(plan, before, brokers)
    assert plan.lower_bound == 18 and len(plan.moves) == 18
    assert all(m.dest == 4 for m in plan.moves)
    for p, r in plan.target.items():  # R34's rack spread kept: three racks for every partition
        assert _spread(r, brokers) == _spread(before[p], brokers) == 3


def test_r35_r38_a_partition_whose_reassignment_runs_is_left_as_it_is() -> None:
    """A rebalance while another's moves run (an add-broker inside a remove-broker's wait):
    the partitions being reassigned keep their replicas and their leader (R35: one
    reassignment of a partition at a time), and the new broker takes its share of the rest."""
    before = _topic("orders", 12, 3, RACKS3)
    brokers = {**RACKS3, 4: "d"}
    fixed = frozenset(sorted(before)[:4])
    plan = plan_rebalance(before, brokers, fixed=fixed)
    assert all(plan.target[p] == before[p] for p in fixed)
    assert not {m.partition for m in plan.moves} & fixed and plan.moves
    assert all(m.dest == 4 for m in plan.moves)
    assert plan_rebalance(before, brokers).moves != plan.moves  # unfixed, it would have moved some of them


def test_r38_adding_two_brokers_moves_the_lower_bound_and_plans_are_recorded_as_data() -> None:
    before = _topic("orders", 24, 3, RACKS3)
    brokers = {**RACKS3, 4: "d", 5: None}
    plan = plan_rebalance(before, brokers)
    _assert_balanced(plan, before, brokers)
    assert plan.lower_bound == 28 and len(plan.moves) == 28  # 72 replicas: 15, 15, 14, 14, 14
    d = plan.to_dict()
    assert d["replicas_moved"] == 28 and d["lower_bound"] == 28 and d["balanced"] is True
    assert len(d["target"]) == 24 and {m["to"] for m in d["moves"]} == {4, 5}


def test_r38_rack_spread_wins_over_balance_and_the_plan_says_so() -> None:
    """Broker 4 joins rack a of a three-rack cluster whose partitions each span all three
    racks: only broker 1's replicas can move to it without narrowing a partition's spread, so
    brokers 2 and 3 keep all 24 and the plan is marked unbalanced rather than breaking R34."""
    before = _topic("orders", 24, 3, RACKS3)
    brokers = {**RACKS3, 4: "a"}
    plan = plan_rebalance(before, brokers)
    assert not plan.balanced
    assert plan.moves and all(m.source == 1 and m.dest == 4 for m in plan.moves)
    assert all(_spread(r, brokers) == 3 for r in plan.target.values())
    held = Counter(b for r in plan.target.values() for b in r)
    assert held[2] == held[3] == 24 and held[1] == held[4] == 12  # rack a's share evened out between its two


def test_r38_within_one_of_the_mean_where_racks_forbid_floor_to_ceiling() -> None:
    """trial39: broker 4 joins rack a of three brokers holding all four RF 3 partitions (a
    mean of 3 replicas each). Only broker 1's replicas may move to it; 3 each is impossible,
    but 2, 4, 4, 2 is within one of the mean (R38) with two moves. The plan stopped after one
    (broker 4 held 1) and said unbalanced."""
    before = {("orders", 0): [1, 3, 2], ("orders", 1): [3, 1, 2], ("orders", 2): [1, 2, 3], ("orders", 3): [2, 1, 3]}
    brokers = {**RACKS3, 4: "a"}
    plan = plan_rebalance(before, brokers)
    held = Counter(b for r in plan.target.values() for b in r)
    assert dict(held) == {1: 2, 2: 4, 3: 4, 4: 2}
    assert plan.balanced and len(plan.moves) == plan.lower_bound == 2
    assert all(m.source == 1 and m.dest == 4 for m in plan.moves)
    assert Counter(r[0] for r in plan.target.values()) == Counter({1: 1, 2: 1, 3: 1, 4: 1})


def test_r38_a_balanced_cluster_needs_no_move() -> None:
    before = _topic("orders", 12, 3, RACKS3) | _topic("audit", 6, 2, RACKS3)
    plan = plan_rebalance(before, RACKS3)
    assert plan.moves == [] and plan.lower_bound == 0 and plan.changed(before) == {}


def test_r38_leaders_balanced_by_reordering_replicas_in_place() -> None:
    """Every partition led by broker 1: the plan moves no data and spreads the preferred
    leaders by reordering replicas each partition already has."""
    before = {("t", p): [1, 2, 3] for p in range(6)}
    plan = plan_rebalance(before, RACKS3)
    _assert_balanced(plan, before, RACKS3)
    assert plan.moves == []
    assert Counter(r[0] for r in plan.target.values()) == {1: 2, 2: 2, 3: 2}
    assert len(plan.leaders_changed) == 4


def test_r39_removing_a_broker_moves_each_of_its_replicas_once_keeping_racks() -> None:
    brokers = {1: "a", 2: "b", 3: "c", 4: "a", 5: "b", 6: "c", 7: "c"}
    before = _topic("orders", 12, 3, brokers)
    held = sum(3 in r for r in before.values())
    plan = plan_rebalance(before, brokers, leaving=frozenset({3}))
    _assert_balanced(plan, before, brokers, leaving=frozenset({3}))
    assert all(3 not in r for r in plan.target.values())
    assert len(plan.moves) == plan.lower_bound >= held
    for p, r in plan.target.items():  # broker 3's replicas stayed in rack c (brokers 6 and 7)
        assert _spread(r, brokers) == _spread(before[p], brokers), (p, r)


def test_r39_removal_refused_when_a_partition_would_lose_its_replication_factor() -> None:
    before = _topic("orders", 4, 3, RACKS3)
    with pytest.raises(RebalanceError, match="3 replicas but only 2 brokers would stay"):
        plan_rebalance(before, RACKS3, leaving=frozenset({2}))
    with pytest.raises(RebalanceError, match=r"brokers \[9\]"):
        plan_rebalance({("t", 0): [1, 9]}, RACKS3)


# ---------------------------------------------------------------- against a brute-force optimum
def _band(total: int, brokers: int, r38: bool) -> tuple[int, int]:
    """floor..ceil of the mean, or R38's "within one of the mean" (wider when it is whole)."""
    lo, hi = total // brokers, -(-total // brokers)
    return (lo - 1, hi + 1) if r38 and lo == hi else (lo, hi)


def _leaders_can_balance(sets: tuple[tuple[int, ...], ...], staying: list[int], r38: bool) -> bool:
    lo, hi = _band(len(sets), len(staying), r38)
    for choice in itertools.product(*sets):
        c = Counter(choice)
        if all(lo <= c[b] <= hi for b in staying):
            return True
    return False


def _optimum(before: dict[Partition, list[int]], brokers: dict[int, str | None],
             leaving: frozenset[int], r38: bool = False) -> int | None:
    """The fewest replica moves of any balanced assignment that keeps every partition's rack
    spread (or, for a leaving broker's partitions, the widest spread the others allow);
    balanced is floor..ceil of the mean, or with `r38` within one of it."""
    staying = sorted(b for b in brokers if b not in leaving)
    parts = sorted(before)
    total = sum(len(r) for r in before.values())
    lo, hi = _band(total, len(staying), r38)
    options = []
    for p in parts:
        old = set(before[p])
        sets = [s for s in itertools.combinations(staying, len(before[p]))]
        need = _spread(before[p], brokers) if not (old & leaving) else \
            max(_spread(list(s), brokers) for s in sets if old - leaving <= set(s))
        options.append([s for s in sets if _spread(list(s), brokers) >= need])
    best = None
    for sets in itertools.product(*options):
        c = Counter(b for s in sets for b in s)
        if not all(lo <= c[b] <= hi for b in staying):
            continue
        cost = sum(len(set(s) - set(before[p])) for p, s in zip(parts, sets, strict=True))
        if (best is None or cost < best) and _leaders_can_balance(sets, staying, r38):
            best = cost
    return best


#: Seed 397 (one of 800 tried) is the case where moving a replica to another rack first, while a
#: broker of its own rack could take it, left a later replica nowhere to go without narrowing a
#: rack spread (5 moves where 4 suffice): chains now prefer a broker of the giver's rack.
@pytest.mark.parametrize("seed", [*range(60), 397])
def test_r38_r39_moves_match_a_brute_force_optimum_on_small_clusters(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([3, 4])
    racks = {b: rng.choice("ab") for b in range(1, n + 1)}
    rf = rng.choice([2, 3]) if n > 3 else 2
    before = _topic("t", rng.choice([3, 4, 5]), rf, racks, rng.choice(["rack-aware", "round-robin"]))
    if seed % 3 == 2:  # a broker leaves
        brokers, leaving = racks, frozenset({rng.choice(sorted(racks))})
        if n - 1 < rf:
            return
    else:  # one or two brokers join
        brokers = racks | {b: rng.choice("abc") for b in range(n + 1, n + 1 + rng.choice([1, 2]))}
        leaving = frozenset()
    plan = plan_rebalance(before, brokers, leaving)
    best = _optimum(before, brokers, leaving)
    if best is None:  # racks make floor..ceil impossible: R38's band, if they allow it, never a narrower spread
        for p, r in plan.target.items():
            if not set(before[p]) & leaving:
                assert _spread(r, brokers) >= _spread(before[p], brokers), (p, before[p], r)
        staying = [b for b in brokers if b not in leaving]
        held = Counter(b for r in plan.target.values() for b in r)
        lo, hi = _band(sum(len(r) for r in before.values()), len(staying), r38=True)
        reachable = _optimum(before, brokers, leaving, r38=True) is not None
        assert plan.balanced == reachable, (before, brokers, leaving, plan)  # trial39: reachable, said impossible
        if reachable:
            assert all(lo <= held[b] <= hi for b in staying), held
        return
    _assert_balanced(plan, before, brokers, leaving)
    assert len(plan.moves) == best, (before, brokers, leaving, plan.moves)
