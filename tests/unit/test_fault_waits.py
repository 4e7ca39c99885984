"""A fault that waits (a remove-broker for its reassignments) does not hold the schedule
back: the faults that fall due meanwhile fire from inside its wait, at their own times
(`FaultInjector.while_waiting`), on virtual time as on processes. Found by a new user: a
remove-broker whose moves needed a broker that a later `restart` brings back waited out its
60 s, the workload ran 62 s instead of 10, and the faults after it never fired."""
from __future__ import annotations

import json
from pathlib import Path

from broker.common.jsonl import read_jsonl
from testbed.experiment.progress import describe_fault, did_nothing
from testbed.sim.run import run_seed
from testbed.topology import parse_topology

BLOCK = {
    "name": "block", "seed": 1, "duration": "10s",
    "cluster": {"controllers": 1, "brokers": {"count": 4, "racks": ["a", "b"]}},
    "topics": [{"name": "orders", "partitions": 4, "replication_factor": 3, "min_insync_replicas": 2}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "100/s", "batch": 5}]},
    "faults": [{"at": "1s", "do": "kill", "target": "broker:4"},
               {"at": "2s", "do": "remove-broker", "target": "broker:1"},
               {"at": "3s", "do": "restart"},
               {"at": "5s", "do": "add-partitions", "topic": "orders", "count": 2}],
}


def test_faults_due_while_one_waits_fire_at_their_own_time(tmp_path: Path) -> None:
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(BLOCK, "block"), run)
    assert outcome.error is None and outcome.converged
    t0 = json.loads((run / "summary.json").read_text())["workload_start_ns"]
    lines = [(r["origin"], r["do"], r["phase"], (r["time_ns"] - t0) / 1e9, r.get("effect", {}))
             for r in read_jsonl(run / "faults.jsonl")]
    # every line has DESIGN section 7's keys, a start's effect still empty
    design = {"time_ns", "do", "target", "resolved", "params", "phase", "effect"}
    assert all(design <= r.keys() for r in read_jsonl(run / "faults.jsonl"))
    assert {json.dumps(effect) for _, _, phase, _, effect in lines if phase == "start"} == {"{}"}
    starts = {(origin, do): at for origin, do, phase, at, _ in lines if phase == "start"}
    ends = {(origin, do): (at, effect) for origin, do, phase, at, effect in lines if phase == "end"}
    # the restart at 3s fired inside the remove-broker's wait, which it let finish
    assert 3.0 <= starts[("faults[2]", "restart")] < 3.1
    assert ends[("faults[2]", "restart")][1] == {"restarted": {"broker-4": 2}}
    removed_at, removed = ends[("faults[1]", "remove-broker")]
    assert 3.0 < removed_at < 5.0 and "error" not in removed
    assert 5.0 <= starts[("faults[3]", "add-partitions")] < 5.1
    assert ends[("faults[3]", "add-partitions")][1] == {"topic": "orders", "partitions": [4, 5]}
    assert outcome.virtual_seconds < 20, "the workload kept to its 10 s"


def test_a_fault_line_names_what_an_admin_fault_acted_on_and_an_empty_undo_is_not_shown() -> None:
    add = {"do": "add-partitions", "target": None, "resolved": [], "params": {"topic": "orders", "count": 2},
           "effect": {"topic": "orders", "partitions": [4, 5]}}
    assert describe_fault(add, 5.0).endswith("fault[/] add-partitions (topic orders, count 2)")
    kill = {"do": "kill", "target": "broker:4", "resolved": ["broker-4"], "params": {}, "effect": {"killed": {}}}
    assert describe_fault(kill, 1.0).endswith("kill broker:4 -> broker-4")
    shutdown = {"do": "shutdown", "target": "broker:3", "resolved": ["broker-3"], "params": {},
                "effect": {"clean": {"broker-3": False}}}
    assert describe_fault(shutdown, 3.0).endswith("(not clean: broker-3 killed when its controlled shutdown timed out)[/]")
    assert "not clean" not in describe_fault({**shutdown, "effect": {"clean": {"broker-3": True}}}, 3.0)
    assert did_nothing({"do": "restart", "effect": {"restarted": {}}})
    assert not did_nothing({"do": "restart", "effect": {"restarted": {"broker-4": 2}}})
    assert not did_nothing({"do": "restart", "effect": {"error": "x"}})
