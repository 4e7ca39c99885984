"""Target resolution against hand-built cluster views: every target form of DESIGN section 6;
and one run on virtual time, a leader killed while no controller is active."""
from __future__ import annotations

import dataclasses
import random
from pathlib import Path

import pytest

from broker.common.jsonl import read_jsonl
from faults.targets import ClusterView, TargetError, resolve
from testbed.sim.run import run_seed
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.topology import parse_topology

BROKERS = {"broker-1": "a", "broker-2": "b", "broker-3": "a", "broker-4": "c"}
CONTROLLERS = dict.fromkeys(("controller-1", "controller-2", "controller-3"))


def view(**changes) -> ClusterView:
    base = ClusterView(
        brokers=dict(BROKERS),
        controllers=dict(CONTROLLERS),
        active_controller="controller-2",
        stopped=frozenset(),
        paused=frozenset(),
        leaders={("orders", 0): "broker-1", ("orders", 1): "broker-2", ("orders", 2): None},
        isr={("orders", 0): ("broker-1", "broker-3"), ("orders", 1): ("broker-2", "broker-4", "broker-1"),
             ("orders", 2): ()},
        replicas={("orders", 0): ("broker-3", "broker-1", "broker-4"),
                  ("orders", 1): ("broker-2", "broker-4", "broker-1"),
                  ("orders", 2): ("broker-4", "broker-3", "broker-2")},
    )
    return dataclasses.replace(base, **changes)


def rng() -> random.Random:
    return random.Random(3)


@pytest.mark.parametrize("target, expected", [
    ("broker:3", ["broker-3"]),
    ("controller:2", ["controller-2"]),
    ("active-controller", ["controller-2"]),
    ("leader-of orders/0", ["broker-1"]),
    ("leader-of orders/2", []),
    ("leader-of other/0", []),
    ("followers-of orders/0", ["broker-3", "broker-4"]),
    ("followers-of orders/2", ["broker-4", "broker-3", "broker-2"]),
    ("isr-of orders/1", ["broker-2", "broker-4", "broker-1"]),
    ("isr-of orders/2", []),
    ("rack:a", ["broker-1", "broker-3"]),
    ("rack:z", []),
    ("controllers", list(CONTROLLERS)),
    ("brokers", list(BROKERS)),
    ("clients", ["clients"]),
])
def test_named_targets(target, expected):
    assert resolve(target, view(), rng()) == expected


def test_a_rack_is_every_node_in_it_a_controller_with_a_rack_too():
    """DESIGN 6 gives controllers a rack (`controllers: [{id, rack}]`), and `rack:a` is a rack
    losing power: its controller went on running (a tester's rack outage)."""
    v = view(controllers={"controller-1": None, "controller-2": "a", "controller-3": "c"})
    assert resolve("rack:a", v, rng()) == ["controller-2", "broker-1", "broker-3"]
    assert resolve("rack:c", v, rng()) == ["controller-3", "broker-4"]


def test_stopped_and_paused_list_those_nodes_in_topology_order():
    v = view(stopped=frozenset({"broker-4", "controller-1", "broker-2"}), paused=frozenset({"broker-3"}))
    assert resolve("stopped", v, rng()) == ["controller-1", "broker-2", "broker-4"]
    assert resolve("paused", v, rng()) == ["broker-3"]
    assert resolve("stopped", view(), rng()) == [] == resolve("paused", view(), rng())


def test_named_targets_include_nodes_that_are_down():
    v = view(stopped=frozenset({"broker-1"}), paused=frozenset({"broker-3"}))
    assert resolve("broker:1", v, rng()) == ["broker-1"]
    assert resolve("rack:a", v, rng()) == ["broker-1", "broker-3"]
    assert resolve("leader-of orders/0", v, rng()) == ["broker-1"]


def test_no_active_controller_resolves_to_nothing():
    assert resolve("active-controller", view(active_controller=None), rng()) == []


@pytest.mark.parametrize("target, pool", [
    ("random-broker", set(BROKERS)),
    ("random-controller", set(CONTROLLERS)),
    ("leader-of any", {"broker-1", "broker-2"}),
])
def test_random_targets_pick_one_node_that_is_up_and_cover_the_pool(target, pool):
    r = random.Random(0)
    picks = [resolve(target, view(), r) for _ in range(200)]
    assert all(len(p) == 1 for p in picks)
    assert {p[0] for p in picks} == pool


@pytest.mark.parametrize("target, down, pool", [
    ("random-broker", {"broker-1", "broker-2"}, {"broker-3", "broker-4"}),
    ("random-controller", {"controller-1", "controller-3"}, {"controller-2"}),
    ("leader-of any", {"broker-1"}, {"broker-2"}),
])
def test_random_targets_never_pick_a_stopped_or_paused_node(target, down, pool):
    first, *rest = sorted(down)
    v = view(stopped=frozenset({first}), paused=frozenset(rest))
    r = random.Random(0)
    assert {resolve(target, v, r)[0] for _ in range(100)} == pool


def test_random_targets_with_nothing_up_resolve_to_nothing():
    v = view(stopped=frozenset(BROKERS) | frozenset(CONTROLLERS))
    for target in ("random-broker", "random-controller", "leader-of any"):
        assert resolve(target, v, rng()) == []


def test_random_targets_are_reproducible_from_the_rng():
    assert [resolve("random-broker", view(), random.Random(5)) for _ in range(3)] == \
        [resolve("random-broker", view(), random.Random(5))] * 3


@pytest.mark.parametrize("target", [
    "broker", "broker:x", "broker:9", "controller:7", "leader-of", "leader-of orders", "leader-of orders/x",
    "isr-of  orders/0", "rack:", "everyone", "",
])
def test_malformed_targets_raise(target):
    with pytest.raises(TargetError):
        resolve(target, view(), rng())


def test_the_status_snapshot_builds_the_view():
    status = ClusterStatus(
        controller={"node": "controller-1", "partitions": [
            {"topic": "orders", "partition": 0, "leader": 2, "leader_epoch": 3, "partition_epoch": 5,
             "replicas": [1, 2, 3], "isr": [2, 3]},
            {"topic": "orders", "partition": 1, "leader": -1, "leader_epoch": 4, "partition_epoch": 6,
             "replicas": [3, 1, 2], "isr": []},
        ]},
        brokers={1: None, 2: {}, 3: {}},
    )
    v = status.view(
        brokers={"broker-1": "a", "broker-2": "b", "broker-3": None},
        controllers={"controller-1": "c"},
        stopped={"broker-1"},
        paused=[],
    )
    assert v == ClusterView(
        brokers={"broker-1": "a", "broker-2": "b", "broker-3": None},
        controllers={"controller-1": "c"},
        active_controller="controller-1",
        stopped=frozenset({"broker-1"}),
        paused=frozenset(),
        leaders={("orders", 0): "broker-2", ("orders", 1): None},
        isr={("orders", 0): ("broker-2", "broker-3"), ("orders", 1): ()},
        replicas={("orders", 0): ("broker-1", "broker-2", "broker-3"),
                  ("orders", 1): ("broker-3", "broker-1", "broker-2")},
    )
    assert resolve("followers-of orders/0", v, rng()) == ["broker-1", "broker-3"]


def test_a_snapshot_without_a_controller_knows_no_partitions():
    v = ClusterStatus(None, {1: None}).view({"broker-1": None}, {"controller-1": None}, {"controller-1"}, ())
    assert v.active_controller is None and v.leaders == {} and v.isr == {} and v.replicas == {}
    assert resolve("leader-of orders/0", v, rng()) == []


def _replica(topic: str, partition: int, role: str, leader: int, leader_epoch: int, partition_epoch: int,
             isr: list[int]) -> dict:
    return {"topic": topic, "partition": partition, "role": role, "leader": leader, "leader_epoch": leader_epoch,
            "partition_epoch": partition_epoch, "replicas": [1, 2, 3], "isr": isr, "leo": 5, "hwm": 5}


def test_without_an_active_controller_a_partition_is_as_the_brokers_last_applied_it():
    """DESIGN 6: `leader-of T/P` is whoever leads it when the fault fires. With every controller
    down the partitions keep their leaders, but the view knew no partition and the target named
    nobody: a tester's kill of a leader, a pause and a shutdown, each with the quorum down, did
    nothing and the run passed. Now each partition is as the answering brokers describe it, from
    the newest state one applied: broker 3, cut off, still leads orders/0 at leader epoch 1 in
    its own view, but brokers 1 and 2 applied leader epoch 2 (broker 1 the leader)."""
    status = ClusterStatus(None, {
        1: {"partitions": [_replica("orders", 0, "leader", 1, 2, 4, [1, 2]),
                           _replica("orders", 1, "follower", 2, 0, 0, [2, 1, 3])]},
        2: {"partitions": [_replica("orders", 0, "follower", 1, 2, 4, [1, 2]),
                           _replica("orders", 1, "leader", 2, 0, 0, [2, 1, 3])]},
        3: {"partitions": [_replica("orders", 0, "leader", 3, 1, 2, [3, 1, 2])]},
    })
    v = status.view({"broker-1": None, "broker-2": None, "broker-3": None}, {"controller-1": None},
                    {"controller-1"}, ())
    assert v.active_controller is None
    assert v.leaders == {("orders", 0): "broker-1", ("orders", 1): "broker-2"}
    assert resolve("leader-of orders/0", v, rng()) == ["broker-1"]
    assert resolve("isr-of orders/1", v, rng()) == ["broker-2", "broker-1", "broker-3"]


LEADER_KILLED_WITH_THE_QUORUM_DOWN = {
    "name": "leader-without-controller", "seed": 0, "duration": "4s",
    "cluster": {"controllers": 1, "brokers": 3},
    "topics": [{"name": "orders", "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2,
                "placement": "explicit", "assignment": {0: [2, 3, 1]}}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "100/s", "batch": 5}]},
    "faults": [{"at": "1s", "do": "kill", "target": "controller:1"},
               {"at": "1.5s", "do": "kill", "target": "leader-of orders/0"},
               {"at": "2.5s", "do": "restart", "target": "stopped"}],
}


def test_a_leader_killed_while_no_controller_is_active_is_killed(tmp_path: Path) -> None:
    """The whole on virtual time: the only controller is down when `leader-of orders/0` fires;
    broker 2 leads it, as every broker's metadata says, and is the one killed."""
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(LEADER_KILLED_WITH_THE_QUORUM_DOWN, "leader-without-controller"), run)
    assert outcome.error is None
    kill = [f for f in read_jsonl(run / "faults.jsonl")
            if f["origin"] == "faults[1]" and f["phase"] == "end"]
    assert [(f["resolved"], sorted(f["effect"].get("killed", {}))) for f in kill] == [(["broker-2"], ["broker-2"])]
