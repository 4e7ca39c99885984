"""The fault schedule: explicit faults, seeded nemesis expansion, undo pairing, --dry-run text."""
from __future__ import annotations

import itertools
from typing import Any

import pytest

from faults.schedule import (
    NEMESIS_SLOW,
    UNDO_ACTIONS,
    ScheduledFault,
    build_schedule,
    fault_rng,
    from_nemesis,
)
from testbed.topology import NEMESIS_ACTIONS, Topology, parse_topology


def topology(faults: list[dict[str, Any]], seed: int = 7, duration: str = "30s") -> Topology:
    return parse_topology({
        "name": "t",
        "seed": seed,
        "duration": duration,
        "cluster": {"brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]},
        "topics": [{"name": "orders", "partitions": 3, "replication_factor": 3}],
        "faults": faults,
    }, "t.yaml")


NEMESIS = {"nemesis": {"from": "2s", "until": "25s", "every": "2s..4s",
                       "do": list(NEMESIS_ACTIONS), "target": ["random-broker", "leader-of any", "broker:2"],
                       "max_down": 1}}


def nemesis_faults(schedule: list[ScheduledFault]) -> list[ScheduledFault]:
    return [f for f in schedule if from_nemesis(f.origin) and not f.origin.endswith(".undo")]


def test_explicit_faults_keep_their_time_target_params_and_topology_index():
    t = topology([
        {"at": "5s", "do": "kill", "target": "leader-of orders/0"},
        {"at": "8s", "do": "restart"},
        {"at": "10s", "do": "partition", "groups": [["rack:a"], ["rack:b", "controllers"]]},
        {"at": "18s", "do": "lossy-crash", "target": "rack:b", "loss": "torn"},
    ])
    assert build_schedule(t) == [
        ScheduledFault(5.0, "kill", "leader-of orders/0", {}, "faults[0]"),
        ScheduledFault(8.0, "restart", "stopped", {}, "faults[1]"),
        ScheduledFault(10.0, "partition", None, {"groups": (("rack:a",), ("rack:b", "controllers"))}, "faults[2]"),
        ScheduledFault(18.0, "lossy-crash", "rack:b", {"loss": "torn"}, "faults[3]"),
    ]


def test_same_topology_and_seed_give_an_identical_schedule():
    t = topology([{"at": "3s", "do": "kill", "target": "broker:1"}, NEMESIS])
    first = build_schedule(t)
    assert first == build_schedule(topology([{"at": "3s", "do": "kill", "target": "broker:1"}, NEMESIS]))
    assert first == build_schedule(t)


def test_a_different_seed_gives_a_different_schedule():
    t = topology([NEMESIS])
    assert build_schedule(t) != build_schedule(t, seed=8)
    assert build_schedule(t, seed=8) == build_schedule(topology([NEMESIS], seed=8))


def test_a_nemesis_block_is_independent_of_the_faults_around_it():
    alone = build_schedule(topology([NEMESIS]))
    crowded = build_schedule(topology([{"at": "1s", "do": "kill", "target": "broker:3"}, NEMESIS,
                                       {"nemesis": {**NEMESIS["nemesis"], "from": "3s"}}]))

    def drawn(faults: list[ScheduledFault]) -> list[tuple[Any, ...]]:  # without the origins, which name the entry
        return [(f.at, f.do, f.target, {k: v for k, v in f.params.items() if k != "undo_of"}) for f in faults]
    assert drawn([f for f in crowded if f.origin.startswith("faults[1].nemesis#")]) == drawn(alone)


def test_nemesis_times_are_drawn_from_every_within_from_until():
    schedule = build_schedule(topology([NEMESIS]))
    times = [f.at for f in nemesis_faults(schedule)]
    assert times[0] == 2.0
    assert all(2.0 <= b - a <= 4.0 for a, b in itertools.pairwise(times))
    assert times[-1] < 25.0 and times[-1] + 4.0 >= 25.0
    assert [f.origin for f in nemesis_faults(schedule)] == [f"faults[0].nemesis#{i}" for i in range(len(times))]


def test_every_undoable_nemesis_fault_is_undone_before_the_next_one():
    schedule = build_schedule(topology([NEMESIS]))
    faults = nemesis_faults(schedule)
    undos = {f.params["undo_of"]: f for f in schedule if f.origin.endswith(".undo")}
    for fault, following in zip(faults, [*faults[1:], None]):
        undo = undos.pop(fault.origin, None)
        if fault.do == "elect-preferred":
            assert undo is None
            continue
        assert undo is not None and undo.origin == fault.origin + ".undo"
        assert undo.target is None and undo.params == {"undo_of": fault.origin}
        assert fault.at < undo.at < (following.at if following else 25.0)
    assert undos == {}


@pytest.mark.parametrize("action, do, undo", [
    ("kill", "kill", "restart"), ("lossy-crash", "lossy-crash", "restart"),
    ("disk-loss", "disk-loss", "restart"), ("shutdown", "shutdown", "restart"), ("pause", "pause", "resume"),
    ("partition-halves", "partition", "heal"), ("partition-isolate", "partition", "heal"),
    ("partition-bridge", "partition", "heal"), ("slow", "slow", "heal"),
])
def test_each_nemesis_action_maps_to_a_fault_and_its_undo(action, do, undo):
    t = topology([{"nemesis": {"from": "1s", "until": "9s", "every": "2s..3s", "do": [action],
                               "target": ["broker:2"], "max_down": 2}}])
    schedule = build_schedule(t)
    faults = nemesis_faults(schedule)
    assert faults and {f.do for f in faults} == {do}
    assert {f.do for f in schedule if f.origin.endswith(".undo")} == {undo} == {UNDO_ACTIONS[action]}
    first = faults[0]
    if action.startswith("partition-"):
        shape = action.removeprefix("partition-")
        assert first.params == {"shape": shape, "max_down": 2}
        assert first.target == ("broker:2" if shape == "isolate" else None)
    elif action == "slow":
        assert (first.target, first.params) == (None, {"from": "broker:2", **NEMESIS_SLOW})
    elif action == "lossy-crash":
        assert first.target == "broker:2" and first.params["max_down"] == 2
        assert first.params["loss"] in ("unsynced", "partial", "torn")
    else:
        assert (first.target, first.params) == ("broker:2", {"max_down": 2})


def test_elect_preferred_has_no_target_and_no_undo():
    t = topology([{"nemesis": {"from": "1s", "until": "9s", "every": "2s..3s", "do": ["elect-preferred"]}}])
    schedule = build_schedule(t)
    assert schedule and all((f.do, f.target, f.params) == ("elect-preferred", None, {}) for f in schedule)


def test_lossy_crash_loss_modes_and_targets_are_drawn_from_the_lists():
    t = topology([{"nemesis": {"from": "0s", "until": "30s", "every": "250ms..500ms", "do": ["lossy-crash", "kill"],
                               "target": ["broker:1", "random-broker"]}}])
    faults = nemesis_faults(build_schedule(t))
    assert {f.do for f in faults} == {"lossy-crash", "kill"}
    assert {f.target for f in faults} == {"broker:1", "random-broker"}
    assert {f.params["loss"] for f in faults if f.do == "lossy-crash"} == {"unsynced", "partial", "torn"}


def test_schedule_is_sorted_by_time_and_stable_on_ties():
    t = topology([
        {"at": "4s", "do": "heal"},
        {"at": "2s", "do": "kill", "target": "broker:1"},
        {"at": "2s", "do": "kill", "target": "broker:2"},
        {"nemesis": {"from": "2s", "until": "3s", "every": "5s..6s", "do": ["kill"], "target": ["broker:3"]}},
    ])
    schedule = build_schedule(t)
    assert [(f.at, f.target or f.do) for f in schedule] == [
        (2.0, "broker:1"), (2.0, "broker:2"), (2.0, "broker:3"), (2.5, "restart"), (4.0, "heal"),
    ]


def test_fault_rng_depends_only_on_seed_and_origin():
    assert fault_rng(7, "faults[2].nemesis#3").random() == fault_rng(7, "faults[2].nemesis#3").random()
    assert fault_rng(7, "faults[2].nemesis#3").random() != fault_rng(7, "faults[2].nemesis#4").random()
    assert fault_rng(7, "faults[1]").random() != fault_rng(8, "faults[1]").random()
