"""Cluster administration in real processes (issue 15): a broker added while the cluster
serves acks=all writes registers with its endpoint, so every broker, controller and client
that started before it can reach it (R38), and a rebalance moves replicas and leadership to
it by reassignment (R35) and preferred election (R36) without losing a write."""
from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from broker.common.errors import Errors
from broker.common.jsonl import read_jsonl
from broker.common.names import broker_name
from broker.protocol.rebalance import RebalanceError
from testbed.experiment.runner import run_cluster
from testbed.supervisor.cluster import Cluster, ClusterError
from testbed.topology import parse_topology
from tests.integration.conftest import TIME_SCALE, topology_dict

pytestmark = pytest.mark.integration


def _read_all(c: Cluster, topic: str, partition: int) -> list[str]:
    """Every committed value of one partition, read through the client from its leader."""
    values: list[str] = []
    offset = 0
    deadline = time.monotonic() + c.scaled(10)
    while time.monotonic() < deadline:
        r = c.client().fetch(topic, partition, offset)  # waits up to 0.1 s at the leader
        if r.error != Errors.NONE:
            continue
        values += [v for _, v in r.records]
        offset = r.records[-1][0] + 1 if r.records else offset
        if offset >= r.high_watermark:
            return values
    raise AssertionError(f"{topic}/{partition}: the final read did not reach the HWM")


def _produce(c: Cluster, partition: int, values: list[str]) -> None:
    """A producer's retries: NOT_LEADER_OR_FOLLOWER proves nothing was appended (the client
    forgets the stale leader and asks the metadata again), any other error fails the test."""
    deadline = time.monotonic() + c.scaled(10)
    while (r := c.produce("orders", partition, values, acks="all")).error == Errors.NOT_LEADER_OR_FOLLOWER:
        assert time.monotonic() < deadline, f"orders/{partition}: no leader took the write"
        c.client().refresh_metadata()
    assert r.error == Errors.NONE, r


def test_r38_an_added_broker_takes_its_share_by_rebalance_and_nothing_is_lost(make_cluster, tmp_path: Path) -> None:
    c: Cluster = make_cluster(partitions=6)
    written = {p: [f"before-{p}-{i}" for i in range(5)] for p in range(6)}
    for p, values in written.items():
        assert c.produce("orders", p, values, acks="all").error == Errors.NONE
    with pytest.raises(ClusterError, match="broker 2 is in use at this moment"):
        c.add_broker(2, "b")
    assert c.add_broker(4, "d") == "broker-4"
    plan = c.rebalance()
    # 18 replicas on 3 brokers become 4 or 5 on each of 4: broker 4 takes 4, the lower bound
    assert plan["balanced"] and plan["refused"] == {}
    assert plan["replicas_moved"] == plan["lower_bound"] == 4
    status = c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(30), what="convergence")
    final = {(p.topic, p.partition): p for p in status.partitions()}
    for name, replicas in plan["target"].items():
        topic, index = name.split("/")
        assert final[(topic, int(index))].replicas == replicas, name
    held = Counter(b for p in final.values() for b in p.replicas)
    assert set(held.values()) <= {4, 5} and held[4] >= 4
    assert any(p.leader == 4 for p in final.values()), "the new broker leads nothing"
    # Clients that started before broker 4 reach it: writes to partitions it leads succeed.
    for p in range(6):
        more = [f"after-{p}-{i}" for i in range(5)]
        _produce(c, p, more)
        written[p] += more
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(30), what="convergence")
    for p, values in written.items():
        assert _read_all(c, "orders", p) == values, f"orders/{p}"


def test_r35_r38_two_brokers_join_and_a_leader_killed_mid_rebalance_loses_nothing(make_cluster) -> None:
    """Two brokers join and one rebalance gives them their share. Its plan is handed over
    before the first move (R38); with its moves under way, the leader of a moving partition
    is SIGKILLed and writes go on. The reassignment
    outlives the failover (the new leader keeps adding the target replicas, R35), the killed
    broker restarts and catches up, every move completes to the plan's target and every
    acknowledged write is read back."""
    c: Cluster = make_cluster(partitions=6)
    written = {p: [f"before-{p}-{i}" for i in range(5)] for p in range(6)}
    for p, values in written.items():
        _produce(c, p, values)
    assert c.add_broker(4, "d") == "broker-4" and c.add_broker(5, "e") == "broker-5"
    recorded: list[dict] = []
    progress = c.begin_rebalance(on_plan=recorded.append)
    assert recorded == [progress.plan] and progress.moving and progress.refused == {}
    (topic, index), _ = sorted(progress.moving.items())[0]
    victim = broker_name(c.status().partition(topic, index).leader)
    c.kill(victim)
    gone = int(victim.split("-")[1])
    # a write with the victim still in the ISR waits for it and may time out with an unknown
    # outcome (R20); once fenced it leaves every ISR (R25) and acks=all writes go on
    c.wait_until(lambda s: all(gone not in p.isr and p.leader != gone for p in s.partitions()),
                 timeout=c.scaled(15), what=f"{victim} fenced out of every ISR")
    c.client().refresh_metadata()
    for p in range(6):
        more = [f"during-{p}-{i}" for i in range(5)]
        _produce(c, p, more)
        written[p] += more
    c.restart(victim)
    result = c.complete_rebalance(progress)
    # 18 replicas over 5 brokers: 3 or 4 each, so brokers 1-3 give 6 and the newcomers take 3 each
    assert result["refused"] == {} and result["replicas_moved"] == result["lower_bound"] == 6
    status = c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(30), what="convergence")
    final = {f"{p.topic}/{p.partition}": p.replicas for p in status.partitions()}
    assert final == result["target"]
    assert Counter(b for r in final.values() for b in r) == {1: 4, 2: 4, 3: 4, 4: 3, 5: 3}
    for p, values in written.items():
        assert _read_all(c, "orders", p) == values, f"orders/{p}"


def test_r39_a_removed_broker_hands_every_replica_over_first_and_nothing_is_lost(make_cluster) -> None:
    c: Cluster = make_cluster(partitions=4, brokers=4)
    written = {p: [f"before-{p}-{i}" for i in range(5)] for p in range(4)}
    for p, values in written.items():
        _produce(c, p, values)
    with pytest.raises(RebalanceError, match="only 2 brokers would stay"):
        c.rebalance(leaving=frozenset({1, 2}))  # RF 3 cannot stay on two brokers: nothing moves
    before = {(p.topic, p.partition): p.replicas for p in c.status().partitions()}
    held = sum(4 in r for r in before.values())
    out = c.remove_broker(4)
    assert out["shutdown"] is True and out["balanced"] and out["refused"] == {}
    assert out["unregistered"] is True and 4 not in c.status().registered_brokers()  # R39: unregistered
    assert out["replicas_moved"] == held > 0
    status = c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(30), what="convergence")
    assert all(4 not in p.replicas and 4 not in p.isr for p in status.partitions())
    again = c.rebalance()  # the departed broker is no longer a member: nothing moves back to it
    assert again["replicas_moved"] == 0 and all(4 not in r for r in again["target"].values())
    c.client().refresh_metadata()  # as a producer does when the cluster changed under it
    for p in range(4):
        more = [f"after-{p}-{i}" for i in range(5)]
        _produce(c, p, more)
        written[p] += more
    for p, values in written.items():
        assert _read_all(c, "orders", p) == values, f"orders/{p}"


def test_r38_r39_add_and_remove_broker_as_fault_actions_under_a_workload(tmp_path: Path) -> None:
    """The topology's admin commands: broker 4 joins at 1 s and takes its share, broker 1
    leaves at 3 s, while a producer writes with acks=all. Each plan is in faults.jsonl, the
    final read finds every acknowledged value, and the removed broker is not restarted by the
    final heal."""
    faults = [{"at": "1s", "do": "add-broker", "broker": {"id": 4, "rack": "d"}},
              {"at": "3s", "do": "remove-broker", "target": "broker:1"}]
    topo = parse_topology(topology_dict(partitions=6, duration="5s", faults=faults), "test")
    out = run_cluster(topo, runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    assert out.converged and out.counts is not None, f"run failed, see {out.run_dir}"
    ends = {f["do"]: f["effect"] for f in read_jsonl(out.run_dir / "faults.jsonl") if f["phase"] == "end"}
    added, removed = ends["add-broker"], ends["remove-broker"]
    assert "error" not in added and "error" not in removed, (added, removed)
    assert added["added"] == "broker-4" and added["rebalance"]["balanced"]
    assert added["rebalance"]["replicas_moved"] == added["rebalance"]["lower_bound"] == 4
    assert removed["rebalance"]["shutdown"] is True and removed["rebalance"]["balanced"]
    assert removed["rebalance"]["unregistered"] is True
    # R38: each plan is on record (a `rebalance` start line) before its first move
    lines = read_jsonl(out.run_dir / "faults.jsonl")
    plans = [f for f in lines if f["do"] == "rebalance" and f["phase"] == "start"]
    assert [p["params"]["plan"]["moves"] for p in plans] == [added["rebalance"]["moves"],
                                                             removed["rebalance"]["moves"]]
    moves = [e["time_ns"] for e in read_jsonl(out.run_dir / "events.jsonl")
             if e["kind"] == "partition-changed" and e.get("reason") == "reassign"]
    assert moves and plans[0]["time_ns"] < min(moves)
    replicas = read_jsonl(out.run_dir / "final/replicas.jsonl")
    assert {r["node"] for r in replicas} == {"broker-2", "broker-3", "broker-4"}
    assert Counter(r["node"] for r in replicas) == {"broker-2": 6, "broker-3": 6, "broker-4": 6}
    assert "broker-1" not in ends["restart"].get("restarted", {})
    history = read_jsonl(out.run_dir / "history.jsonl")
    acked = {h["value"] for h in history if h["f"] == "send" and h["type"] == "ok" and h["process"] != "final-reader"}
    read = {v for h in history if h["process"] == "final-reader" and h["type"] == "ok" for _, v in h["records"]}
    assert acked and acked <= read, f"{len(acked - read)} acknowledged values missing from the final read"


def test_r40_topics_created_grown_and_deleted_as_fault_actions_under_a_workload(tmp_path: Path) -> None:
    """The topic admin commands while producers write with acks=all: `later` is created at
    1 s (its producer waits for it), `orders` grows from 4 to 6 partitions at 2 s (its
    producer, given no partitions of its own, writes to the new ones too), `doomed`
    is deleted at 3 s. Every broker closes doomed's replicas and deletes their logs; its
    producer's later sends fail with UNKNOWN_TOPIC_OR_PARTITION (never acknowledged, never
    counted as lost); every value acknowledged on the topics that remain is read at the end."""
    doomed = {"name": "doomed", "partitions": 2, "replication_factor": 3, "min_insync_replicas": 2}
    faults = [{"at": "1s", "do": "create-topic", "topic": {"name": "later", "partitions": 3, "replication_factor": 3}},
              {"at": "2s", "do": "add-partitions", "topic": "orders", "count": 2},
              {"at": "3s", "do": "delete-topic", "topic": "doomed"}]
    producers = [{"count": 1, "topic": t, "acks": "all", "rate": "100/s", "batch": 2}
                 for t in ("orders", "later", "doomed")]
    d = topology_dict(partitions=4, duration="5s", faults=faults, workload={"producers": producers})
    d["topics"].append(doomed)
    out = run_cluster(parse_topology(d, "test"), runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    assert out.converged and out.counts is not None, f"run failed, see {out.run_dir}"
    ends = {f["do"]: f["effect"] for f in read_jsonl(out.run_dir / "faults.jsonl") if f["phase"] == "end"}
    assert ends["create-topic"] == {"created": "later", "partitions": 3}
    assert ends["add-partitions"] == {"topic": "orders", "partitions": [4, 5]}
    assert ends["delete-topic"] == {"deleted": "doomed", "partitions": 2}
    replicas = read_jsonl(out.run_dir / "final/replicas.jsonl")
    held = Counter(r["topic"] for r in replicas)
    assert held == {"orders": 6 * 3, "later": 3 * 3}, held  # doomed: no replica anywhere
    logs = Counter(r["topic"] for r in read_jsonl(out.run_dir / "final/logs.jsonl"))
    assert "doomed" not in logs and logs["later"] > 0, logs  # the files read at the end: no doomed log is left
    history = read_jsonl(out.run_dir / "history.jsonl")
    sends = [h for h in history if h["f"] == "send" and h["process"] != "final-reader"]
    deleted_at = next(f["time_ns"] for f in read_jsonl(out.run_dir / "faults.jsonl")
                      if f["do"] == "delete-topic" and f["phase"] == "end")
    # the sends invoked after the deletion ended (one request in flight: each completion
    # follows its own invokes); one invoked before may end `info` after it, its leader's
    # replica closed while it waited for the HWM (a CI run's two)
    after, invoked = [], 0
    for h in sends:
        if h.get("topic") != "doomed":
            continue
        if h["type"] == "invoke":
            invoked = h["time_ns"]
        elif invoked > deleted_at:
            after.append(h)
    assert after and all(h["type"] == "fail" for h in after), Counter(h["type"] for h in after)
    assert Counter(h["error"] for h in after).most_common(1)[0][0] == Errors.UNKNOWN_TOPIC_OR_PARTITION.value
    acked = {(h["topic"], h["value"]) for h in sends if h["type"] == "ok" and h["topic"] != "doomed"}
    assert {t for t, _ in acked} == {"orders", "later"}
    # the producer was given no partitions: it follows the topic's as they grow
    assert {h["partition"] for h in sends if h["type"] == "ok" and h["topic"] == "orders"} == set(range(6))
    read = {(h["topic"], v) for h in history if h["process"] == "final-reader" and h["type"] == "ok"
            for _, v in h["records"]}
    assert acked <= read, f"{len(acked - read)} acknowledged values missing from the final read"


def test_r39_a_fault_due_while_a_remove_broker_waits_fires_at_its_time_on_processes(tmp_path: Path) -> None:
    """On processes as in the sim (tests/unit/test_fault_waits.py): broker 4 is killed at
    1 s, broker 1's removal at 2 s must move replicas onto broker 4, and the restart at 3 s
    that brings it back fires from inside the removal's wait, which then completes; the
    add-partitions at 4 s fires after it. Before, the removal waited out its 60 s and the
    add-partitions never fired."""
    faults = [{"at": "1s", "do": "kill", "target": "broker:4"},
              {"at": "2s", "do": "remove-broker", "target": "broker:1"},
              {"at": "3s", "do": "restart"},
              {"at": "4s", "do": "add-partitions", "topic": "orders", "count": 2}]
    d = topology_dict(partitions=4, duration="6s", faults=faults, seed=1,
                      cluster={"controllers": 1, "brokers": {"count": 4, "racks": ["a", "b"]}})
    out = run_cluster(parse_topology(d, "test"), runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    assert out.converged and out.counts is not None, f"run failed, see {out.run_dir}"
    lines = read_jsonl(out.run_dir / "faults.jsonl")
    at = {(f["origin"], f["phase"]): f for f in lines if f["do"] != "rebalance"}
    removed = at[("faults[1]", "end")]["effect"]
    assert "error" not in removed, removed
    assert any(m["to"] == 4 for m in removed["rebalance"]["moves"]), "the removal needed broker 4"
    assert at[("faults[2]", "start")]["time_ns"] < at[("faults[1]", "end")]["time_ns"], \
        "the restart fired while the removal waited"
    assert at[("faults[2]", "end")]["effect"]["restarted"].keys() == {"broker-4"}
    grown = at[("faults[3]", "end")]["effect"]
    assert grown == {"topic": "orders", "partitions": [4, 5]}, grown
