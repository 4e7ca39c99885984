"""The Python API (DESIGN section 9) checks what it is given before it acts, as a topology's
`faults:` entry is checked, and a stopped cluster refuses further calls. Found by a new user:
a bad loss mode SIGKILLed its broker before the error, a typo in `acks` recorded an operation
that left the whole run unjudged, calls after `finish()` appended to the judged history, and a
reused run directory picked up the old run's metadata."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from testbed import Cluster
from testbed.supervisor.cluster import ClusterError
from tests.integration.conftest import TIME_SCALE, topology_dict
from tests.unit.analysis_fixtures import spark  # noqa: F401  (the fixture)

pytestmark = pytest.mark.integration


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_bad_arguments_change_nothing_and_a_stopped_cluster_refuses_calls(
        tmp_path: Path, spark: object) -> None:  # noqa: F811 - `finish()` judges in the worker's session
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(topology_dict(partitions=1)))
    run_dir = tmp_path / "run"
    with Cluster.from_yaml(path, run_dir=run_dir, time_scale=TIME_SCALE) as c:
        before = len(_lines(run_dir / "history.jsonl"))
        # the last two: a tester's partition 7 of a one-partition topic was recorded as a failed send
        for bad in ({"acks": "bogus"}, {"values": [1, 2]}, {"partition": "0"}, {"partition": 7}, {"topic": "nope"}):
            args = {"topic": "orders", "partition": 0, "values": ["v"], "acks": "all"} | bad
            with pytest.raises(ValueError, match="Cluster.produce: "):
                c.produce(args["topic"], args["partition"], args["values"], args["acks"])
        assert len(_lines(run_dir / "history.jsonl")) == before  # nothing recorded
        with pytest.raises(ClusterError, match=r"fault\.loss: 'nope' is not allowed"):
            c.fault("lossy-crash", target="broker:1", loss="nope")
        with pytest.raises(ClusterError, match=r"fault\.target: 'broker:9': there is no broker 9"):
            c.fault("kill", target="broker:9")
        with pytest.raises(ClusterError, match=r"at='2s': a fault of the API acts now"):
            c.fault("kill", target="broker:1", at="2s")
        # what it takes, without the `at` it refuses and the `do` it takes apart (trial38)
        with pytest.raises(ClusterError, match=r"Cluster\.fault: delay: not a parameter of kill \(it takes: target\)$"):
            c.fault("kill", target="broker:1", delay="1s")
        with pytest.raises(ClusterError, match=r"bogus: not a parameter of heal \(it takes: none\)$"):
            c.fault("heal", bogus=1)
        with pytest.raises(ClusterError, match=r"no node 'broker-9' \(nodes: "):
            c.kill("broker-9")
        with pytest.raises(ClusterError, match=r"partition 'orders-0': expected TOPIC/P"):
            c.reassign("orders-0", [1, 2, 3])
        with pytest.raises(ClusterError, match=r"no node 'broker-9' \(nodes: "):
            c.remove_broker(9)
        assert c.stopped == set() and _lines(run_dir / "faults.jsonl") == []  # nothing acted
        slow = c.fault("slow", delay="20ms")  # as YAML spells it, and a number as seconds
        assert slow["params"]["delay"] == pytest.approx(0.02) and "error" not in slow["effect"]
        assert c.fault("slow", delay=0.01)["params"]["delay"] == pytest.approx(0.01)
        c.fault("heal")
        # the API's kill and restart are the faults of those names: recorded, so the judgment
        # sees them (unrecorded, a killed leader's outage read as 1 ms without a leader; trial23)
        pid = c.kill("broker-3")
        # a shortcut that would leave its node as it is says so, as restart of a running one
        # did, and records nothing (trial38: kill twice, pause of a dead one returned a pid)
        recorded = _lines(run_dir / "faults.jsonl")
        for call, why in ((c.kill, "broker-3 is not running"), (c.pause, "broker-3 is not running"),
                          (c.resume, "broker-3 is not running")):
            with pytest.raises(ClusterError, match=why):
                call("broker-3")
        with pytest.raises(ClusterError, match="resume broker-1: broker-1 is not paused"):
            c.resume("broker-1")
        with pytest.raises(ClusterError, match="restart broker-1: broker-1 is running"):
            c.restart("broker-1")
        assert _lines(run_dir / "faults.jsonl") == recorded
        c.pause("broker-1")
        with pytest.raises(ClusterError, match="pause broker-1: broker-1 is paused already"):
            c.pause("broker-1")
        c.resume("broker-1")
        assert c.restart("broker-3") != pid
        acted = [(r["do"], r["target"], r["origin"][:4], r["effect"]) for r in _lines(run_dir / "faults.jsonl")
                 if r["phase"] == "end" and r["do"] in ("kill", "restart")]
        assert acted == [("kill", "broker:3", "api[", {"killed": {"broker-3": pid}}),
                         ("restart", "broker:3", "api[", {"restarted": {"broker-3": c.pid("broker-3")}})]
        assert c.produce("orders", 0, ["a"], acks="all").error.name == "NONE"
        # acks as a topology spells it (trial33: `acks=1` was refused, "got 1" beside "'1'")
        assert c.produce("orders", 0, ["b"], acks=1).error.name == "NONE"
        assert c.produce("orders", 0, ["c"], acks=-1).error.name == "NONE"
        sent = [(r["value"], r["acks"]) for r in _lines(run_dir / "history.jsonl")
                if r["process"] == "api" and r["type"] == "ok"]
        assert sent[-2:] == [("b", "1"), ("c", "all")], sent
        # a value sent before, or twice at once: judged a duplicate and a send gone backwards (trial35)
        for reused in (["a"], ["d", "d"]):
            with pytest.raises(ValueError, match="values must be unique in a run"):
                c.produce("orders", 0, reused)
        # after the leader's kill and a wait for the next, the send goes to the next (trial35:
        # to the dead one, from the client's cache, an outcome-unknown timeout)
        # (broker 3, restarted above, back in the ISR first: with it still out, the ISR left by
        # the kill held the new leader alone, below MinISR, and the send was refused; ci116)
        c.wait_until(lambda s: len(s.partition("orders", 0).isr) == 3, timeout=15 * TIME_SCALE)
        leader = c.status().partition("orders", 0).leader
        c.kill(f"broker-{leader}")
        c.wait_until(lambda s: s.partition("orders", 0).leader not in (-1, leader), timeout=15 * TIME_SCALE)
        assert c.produce("orders", 0, ["e"]).error.name == "NONE"
        c.restart(f"broker-{leader}")
        assert c.finish().ok is True
        judged = (run_dir / "history.jsonl").read_text()
        for call in (lambda: c.produce("orders", 0, ["late"]), lambda: c.fault("kill", target="broker:1"),
                     lambda: c.kill("broker-1"), lambda: c.pause("broker-1"), lambda: c.add_broker(9, rack="a"),
                     c.rebalance, c.status, c.finish):
            with pytest.raises(ClusterError, match="has stopped"):
                call()
        assert (run_dir / "history.jsonl").read_text() == judged
        assert not (run_dir / "nodes" / "broker-9.json").exists()  # no process started after the end
    with pytest.raises(ClusterError, match="already holds a run"), Cluster.from_yaml(path, run_dir=run_dir):
        pass


def test_r38_r40_the_apis_admin_calls_are_recorded_and_a_topic_it_deleted_owes_nothing(
        tmp_path: Path, spark: object) -> None:  # noqa: F811 - `finish()` judges in the worker's session
    """`add_broker`, `reassign` and `elect_preferred` of the API are the fault actions of those
    names, in faults.jsonl with an `api[N]` origin (trial23: none of them was recorded). And a
    topic the API's `fault("delete-topic")` deleted and made again is judged as a scheduled
    one is (R40): the judgment took a run whose topology schedules no deletion for one that
    deletes nothing, and found 2 lost writes, 2 leader conflicts, an inconsistent offset and
    a send going backwards, all across the two lives of `orders`."""
    path = tmp_path / "x.yaml"
    path.write_text(yaml.safe_dump(topology_dict(partitions=1)))
    run_dir = tmp_path / "run"
    with Cluster.from_yaml(path, run_dir=run_dir, time_scale=TIME_SCALE) as c:
        assert c.add_broker(4, rack="d") == "broker-4"
        # refused before it acts (R38, R39), nothing recorded (trial35: only the controller refused
        # a second add_broker(4), and its failed fault went to faults.jsonl and the report)
        with pytest.raises(ClusterError, match=r"broker 4 is in use at this moment"):
            c.add_broker(4, rack="d")
        with pytest.raises(ClusterError, match=r"broker 9 is not in the cluster at this moment"):
            c.fault("remove-broker", target="broker:9")
        # and R40's (trial38: the controller refused these, each recorded as a failed fault)
        with pytest.raises(ClusterError, match=r"fault\.topic: no topic 'nope' at this moment \(topics then: orders\)"):
            c.fault("delete-topic", topic="nope")
        with pytest.raises(ClusterError, match=r"no topic 'nope' at this moment"):
            c.fault("add-partitions", topic="nope", count=2)
        with pytest.raises(ClusterError, match=r"replication_factor: 9 is more than the 4 brokers in the cluster"):
            c.fault("create-topic", topic={"name": "big", "partitions": 1, "replication_factor": 9})
        with pytest.raises(ClusterError, match=r"topic 'orders' exists at this moment"):
            c.fault("create-topic", topic={"name": "orders", "partitions": 1, "replication_factor": 3})
        assert c.reassign("orders/0", [4, 1, 2])["accepted"] is True
        c.wait_until(lambda s: s.partition("orders", 0).replicas == [4, 1, 2], timeout=c.scaled(20),
                     what="the move to brokers 4, 1, 2")
        assert c.elect_preferred("orders/0")["elected"] == ["orders/0"]
        assert c.produce("orders", 0, ["a", "b"], acks="all").error.name == "NONE"
        assert "error" not in c.fault("delete-topic", topic="orders")["effect"]
        made = c.fault("create-topic", topic={"name": "orders", "partitions": 1, "replication_factor": 3,
                                             "min_insync_replicas": 2, "assignment": {0: [1, 2, 3]},
                                             "placement": "explicit"})
        assert "error" not in made["effect"], made
        c.client().refresh_metadata()
        assert c.produce("orders", 0, ["c"], acks="all").error.name == "NONE"
        verdict = c.finish()
    ends = [(r["do"], r["origin"][:4]) for r in _lines(run_dir / "faults.jsonl") if r["phase"] == "end"]
    assert ends == [("add-broker", "api["), ("reassign", "api["), ("elect-preferred", "api["),
                    ("delete-topic", "api["), ("create-topic", "api[")]
    checks = verdict.results["checks"]
    assert {k: v["count"] for k, v in checks.items() if v.get("count")} == {}
    assert verdict.ok is True
