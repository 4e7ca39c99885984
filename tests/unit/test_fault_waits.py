"""A fault that waits (a remove-broker for its reassignments) does not hold the schedule
back: the faults that fall due meanwhile fire from inside its wait, at their own times
(`FaultInjector.while_waiting`), on virtual time as on processes. Found by a new user: a
remove-broker whose moves needed a broker that a later `restart` brings back waited out its
60 s, the workload ran 62 s instead of 10, and the faults after it never fired."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from broker.common.jsonl import read_jsonl
from testbed.experiment.progress import describe_fault, did_nothing
from testbed.supervisor.cluster_view import faults_in_force
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


ADD_DURING_REMOVE = {
    "name": "rm-add", "seed": 1, "duration": "12s", "timing": {"session_timeout": "600ms"},
    "cluster": {"controllers": 1, "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"},
                                               {"id": 4, "rack": "a"}]},
    "topics": [{"name": "orders", "partitions": 4, "replication_factor": 3, "min_insync_replicas": 2,
                "placement": "explicit", "assignment": {0: [4, 2, 3], 1: [2, 3, 4], 2: [3, 4, 2], 3: [1, 2, 3]}}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "200/s", "batch": 5}]},
    "faults": [{"at": "1500ms", "do": "pause", "target": "broker:1"},
               {"at": "2s", "do": "remove-broker", "target": "broker:4"},
               {"at": "3s", "do": "add-broker", "broker": {"id": 5, "rack": "c"}},
               {"at": "6s", "do": "resume"}],
}


def test_an_add_broker_inside_a_remove_brokers_wait_plans_around_it(tmp_path: Path) -> None:
    """R38/R39 (found by a new user): an add-broker that fires while a remove-broker's moves
    wait (their new replica, broker 1, is paused) plans from the partitions' target replica
    sets, without the leaving broker 4, and leaves the partitions whose reassignment is in
    progress as they go (R35); its own move waits for the resume due at 6 s, which fires at
    its time from inside both waits."""
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(ADD_DURING_REMOVE, "rm-add"), run)
    assert outcome.error is None and outcome.converged
    t0 = json.loads((run / "summary.json").read_text())["workload_start_ns"]
    lines = read_jsonl(run / "faults.jsonl")
    [plan] = [r["params"]["plan"] for r in lines if r["do"] == "rebalance" and r["phase"] == "start"
              and r["origin"] == "faults[2]"]
    assert all(len(replicas) == 3 and 4 not in replicas for replicas in plan["target"].values()), plan
    assert {m["partition"] for m in plan["moves"]} <= {"orders/3"}, "moved a partition whose reassignment runs"
    [added] = [r["effect"] for r in lines if r["do"] == "add-broker" and r["phase"] == "end"]
    assert "error" not in added and not added["rebalance"]["refused"] and added["rebalance"]["moves"]
    [resume] = [r for r in lines if r["do"] == "resume" and r["phase"] == "start"]
    assert 6.0 <= (resume["time_ns"] - t0) / 1e9 < 6.1


ADD_ONTO_PAUSED = {
    "name": "add-paused", "seed": 19, "duration": "9s",
    "cluster": {"controllers": 1, "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]},
    "topics": [{"name": "orders", "partitions": 6, "replication_factor": 3, "min_insync_replicas": 2}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "200/s", "batch": 5}]},
    "faults": [{"at": "1s", "do": "pause", "target": "broker:3"},
               {"at": "2s", "do": "add-broker", "broker": {"id": 4, "rack": "d"}}],
}


def test_a_wait_that_only_the_end_of_the_runs_heal_lets_finish_gives_up_when_the_workload_ends(
        tmp_path: Path) -> None:
    """Found by a tester, on processes and here alike: an add-broker whose rebalance moved
    replicas onto broker 3, paused for the rest of the workload, waited out its 60 s before
    the end of the run's heal resumed broker 3 (`63.1s / 9s`). Its wait gives up at the
    workload's end with an error that says so; the heal then lets the moves complete."""
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(ADD_ONTO_PAUSED, "add-paused"), run)
    assert outcome.error is None and outcome.converged
    t0 = json.loads((run / "summary.json").read_text())["workload_start_ns"]
    lines = read_jsonl(run / "faults.jsonl")
    [added] = [r for r in lines if r["do"] == "add-broker" and r["phase"] == "end"]
    # the broker started and stays added (the analysis reads its rack from `added`); its rebalance gave up
    assert added["effect"] == {"added": "broker-4", "error": "add-broker: the workload ended while it waited; "
                                                             "the end of the run heals and converges"}
    assert 9.0 <= (added["time_ns"] - t0) / 1e9 < 9.1
    [resumed] = [r for r in lines if r["origin"] == "final-heal" and r["phase"] == "end"]
    assert resumed["effect"] == {"resumed": {"broker-3": 1}} and resumed["time_ns"] < t0 + 9.5e9
    held = Counter(r["node"] for r in read_jsonl(run / "final" / "replicas.jsonl"))
    assert held["broker-4"] == 4 and sum(held.values()) == 18, "the moves did not complete after the heal"


def test_a_delete_topic_whose_wait_the_workloads_end_cut_still_says_the_topic_was_deleted(tmp_path: Path) -> None:
    """Committed, a deletion's data is gone whatever its wait says: broker 3, cut off, keeps
    its replicas of `audit` to the workload's end, and the effect still names the deleted
    topic (which the analysis goes by) beside the error."""
    topology = {**NO_CONTROLLER, "duration": "9s",
                "topics": [*NO_CONTROLLER["topics"],
                           {"name": "audit", "partitions": 2, "replication_factor": 3, "min_insync_replicas": 2}],
                "faults": [{"at": "7s", "do": "partition", "shape": "isolate", "target": "broker:3"},
                           {"at": "8s", "do": "delete-topic", "topic": "audit"}]}
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(topology, "no-ctl"), run)
    assert outcome.error is None and outcome.converged
    [deleted] = [r["effect"] for r in read_jsonl(run / "faults.jsonl")
                 if r["do"] == "delete-topic" and r["phase"] == "end"]
    assert deleted == {"deleted": "audit", "partitions": 2, "error": "delete-topic audit: the workload ended while it "
                                                                      "waited; the end of the run heals and converges"}


def test_a_controlled_shutdown_still_waiting_at_the_workloads_end_is_killed_then(tmp_path: Path) -> None:
    """Its controller paused, broker 1's controlled shutdown cannot move its leaderships: it
    waited its 10 s past the workload's end; it is now killed at the end, as at its timeout,
    and says so, and the end of the run's heal restarts it."""
    topology = {**NO_CONTROLLER, "duration": "5s",
                "faults": [{"at": "3s", "do": "pause", "target": "controller:1"},
                           {"at": "4s", "do": "shutdown", "target": "broker:1"}]}
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(topology, "no-ctl"), run)
    assert outcome.error is None and outcome.converged
    t0 = json.loads((run / "summary.json").read_text())["workload_start_ns"]
    ends = {(r["origin"], r["do"]): r for r in read_jsonl(run / "faults.jsonl") if r["phase"] == "end"}
    shutdown = ends[("faults[1]", "shutdown")]
    assert shutdown["effect"] == {"clean": {"broker-1": False},
                                  "gave_up": "shutdown: the workload ended while it waited; "
                                             "the end of the run heals and converges"}
    assert 5.0 <= (shutdown["time_ns"] - t0) / 1e9 < 5.1
    assert ends[("final-heal", "restart")]["effect"] == {"restarted": {"broker-1": 2}}


NO_CONTROLLER = {
    "name": "no-ctl", "seed": 1, "duration": "10s",
    "cluster": {"controllers": 1, "brokers": {"count": 4, "racks": ["a", "b"]}},
    "topics": [{"name": "orders", "partitions": 4, "replication_factor": 3, "min_insync_replicas": 2}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "100/s", "batch": 5}]},
}


def _removed(faults: list[dict], tmp_path: Path) -> tuple[dict, list[dict]]:
    run = tmp_path / "run"
    outcome = run_seed(parse_topology({**NO_CONTROLLER, "faults": faults}, "no-ctl"), run)
    assert outcome.error is None and outcome.converged
    lines = read_jsonl(run / "faults.jsonl")
    [removed] = [r["effect"] for r in lines if r["do"] == "remove-broker" and r["phase"] == "end"]
    return removed, lines


def test_r39_a_controller_killed_while_a_remove_brokers_moves_wait_is_waited_for(tmp_path: Path) -> None:
    """R39 (found by a tester, on processes): the active controller killed while a
    remove-broker's moves waited (their new replica, broker 4, down) left the status without
    partitions, and the wait's look at `orders/0` raised KeyError: the run died with a
    traceback. A look with no active controller is now "not yet"; the moves complete once
    the controller and broker 4 are back."""
    removed, _ = _removed([{"at": "1s", "do": "kill", "target": "broker:4"},
                           {"at": "2s", "do": "remove-broker", "target": "broker:1"},
                           {"at": "2500ms", "do": "kill", "target": "controller:1"},
                           {"at": "3s", "do": "restart", "target": "broker:4"},
                           {"at": "4s", "do": "restart", "target": "controller:1"}], tmp_path)
    assert "error" not in removed and removed["rebalance"]["replicas_moved"] == 3
    assert removed["rebalance"]["shutdown"] and removed["rebalance"]["unregistered"]


def test_r39_a_remove_broker_with_no_active_controller_waits_for_one_to_plan(tmp_path: Path) -> None:
    """R39: a remove-broker that fired while no controller was active planned from a status
    without partitions: it moved nothing, then shut its broker down with every replica it
    held (the cluster never converged). It now waits for an active controller (the restart
    due at 3 s fires inside that wait) and moves broker 1's three replicas first."""
    removed, lines = _removed([{"at": "1s", "do": "kill", "target": "controller:1"},
                               {"at": "2s", "do": "remove-broker", "target": "broker:1"},
                               {"at": "3s", "do": "restart", "target": "controller:1"}], tmp_path)
    [plan] = [r["params"]["plan"] for r in lines if r["do"] == "rebalance" and r["phase"] == "start"]
    assert len(plan["target"]) == 4 and all(1 not in replicas for replicas in plan["target"].values())
    assert removed["rebalance"]["replicas_moved"] == 3 and removed["rebalance"]["unregistered"]


def test_r39_a_removed_broker_is_not_restarted_by_the_undo_of_a_kill_before_its_removal(tmp_path: Path) -> None:
    """R39 (found by a tester): the nemesis killed broker 1, a remove-broker took it out while
    it was down, and the kill's own undo restarted it: it registered anew, the partitions
    added later were placed on it, and the supervisor, which counted it removed, waited out
    their leadership (add-partitions timed out, the run did not converge)."""
    topology = {**NO_CONTROLLER, "seed": 0,
                "faults": [{"nemesis": {"from": "2s", "until": "5s", "every": "3s..3s", "do": ["kill"],
                                        "target": ["broker:1"], "max_down": 1}},
                           {"at": "2.1s", "do": "remove-broker", "target": "broker:1"},
                           {"at": "6s", "do": "add-partitions", "topic": "orders", "count": 4}]}
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(topology, "no-ctl"), run)
    assert outcome.error is None and outcome.converged
    ends = {(r["origin"], r["do"]): r["effect"] for r in read_jsonl(run / "faults.jsonl") if r["phase"] == "end"}
    assert ends[("faults[0].nemesis#0", "kill")] == {"killed": {"broker-1": 1}}
    assert ends[("faults[0].nemesis#0.undo", "restart")] == {"restarted": {}}
    assert ends[("faults[2]", "add-partitions")] == {"topic": "orders", "partitions": [4, 5, 6, 7]}
    registered = [e for e in read_jsonl(run / "events.jsonl") if e["kind"] == "broker-registered" and e["node"] == "broker-1"]
    assert len(registered) == 1, "broker 1 registered again after its removal"


def test_an_admin_request_asked_again_on_virtual_time_lets_due_faults_fire(tmp_path: Path) -> None:
    """Found by a tester: in the simulation, an elect-preferred asked again while no
    controller was active (two of three paused) held the schedule back: the resume due at
    3.5 s fired at 12.65 s, after the workload, where on processes it fires from inside the
    wait (`retry_while` now lets due faults fire between its asks, as the process cluster's)."""
    topology = {"name": "asked-again", "seed": 0, "duration": "8s",
                "cluster": {"controllers": 3, "brokers": {"count": 3, "racks": ["a", "b", "c"]}},
                "topics": [{"name": "orders", "partitions": 3, "replication_factor": 3, "min_insync_replicas": 2}],
                "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "100/s", "batch": 5}]},
                "faults": [{"at": "2s", "do": "pause", "target": "controller:1"},
                           {"at": "2s", "do": "pause", "target": "controller:2"},
                           {"at": "2.5s", "do": "elect-preferred"}, {"at": "3.5s", "do": "resume"}]}
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(topology, "asked-again"), run)
    assert outcome.error is None and outcome.converged
    t0 = json.loads((run / "summary.json").read_text())["workload_start_ns"]
    at = {(r["do"], r["phase"]): (r["time_ns"] - t0) / 1e9 for r in read_jsonl(run / "faults.jsonl")}
    assert 3.5 <= at[("resume", "start")] < 3.6
    assert at[("elect-preferred", "end")] < 4.0


def test_a_partitions_line_says_which_nodes_it_bridged() -> None:
    """trial28: `groups: [[leader-of orders/0, clients], [controllers, brokers]]` put the leader
    in both groups; only faults.jsonl said so, and the user who meant to isolate the leader
    cut the clients off the other brokers instead."""
    groups = [["broker-3", "clients"], ["broker-1", "broker-2", "broker-3", "controller-1"]]
    rec = {"do": "partition", "target": None, "resolved": [], "params": {},
           "effect": {"groups": groups, "isolated": [], "bridged": ["broker-3"]}}
    assert describe_fault(rec, 2.0).endswith(
        "broker-3,clients | broker-1,broker-2,broker-3,controller-1 [yellow](bridged: broker-3 in more than one "
        "group, cut off from none of them)[/]")


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
    removed = {"do": "remove-broker", "target": "broker:2", "resolved": ["broker-2"], "params": {},
               "effect": {"shutdown": False, "unregistered": True}}  # a tester's line did not say so
    assert describe_fault(removed, 14.2).endswith("(not clean: its controlled shutdown timed out and it was killed)[/]")
    assert "not clean" not in describe_fault({**removed, "effect": {"shutdown": True, "unregistered": True}}, 3.0)
    cut = {**shutdown, "effect": {"clean": {"broker-3": False}, "gave_up": "shutdown: the workload ended"}}
    assert describe_fault(cut, 9.0).endswith("killed when the workload ended during its controlled shutdown)[/]")
    added = {"do": "add-broker", "target": None, "resolved": [], "params": {"broker": {"id": 5, "rack": "c"}},
             "effect": {"added": "broker-5", "rebalance": {"refused": {"orders/0": "REASSIGNMENT_IN_PROGRESS: x"}}}}
    assert describe_fault(added, 3.0).endswith("(1 of its moves refused: orders/0 REASSIGNMENT_IN_PROGRESS)[/]")
    assert did_nothing({"do": "restart", "effect": {"restarted": {}}})
    assert not did_nothing({"do": "restart", "effect": {"restarted": {"broker-4": 2}}})
    assert not did_nothing({"do": "restart", "effect": {"error": "x"}})


def test_a_one_way_cut_reads_as_one_way_and_a_partition_as_its_groups() -> None:
    """A tester's one-way cut printed `broker-1 | controller-1`, as a partition in two prints."""
    cut = {"do": "partition", "target": None, "resolved": [], "params": {"shape": "one-way", "from": "broker:1",
                                                                          "to": "controller"},
           "effect": {"groups": [["broker-1"], ["controller-1"]], "isolated": []}}
    assert describe_fault(cut, 2.0).endswith(" broker-1 cut off from sending to controller-1 (one way)")
    halves = {**cut, "params": {"shape": "halves"}, "effect": {"groups": [["broker-1", "broker-2"], ["broker-3"]]}}
    assert describe_fault(halves, 2.0).endswith(" broker-1,broker-2 | broker-3")
    assert faults_in_force([{**cut, "phase": "end", "origin": "faults[0]"}]) == [
        "partition broker-1 cut off from sending to controller-1 (one way)"]


def test_a_fault_line_says_what_a_slow_does_the_heals_origin_and_the_schedules_time_after_pauses() -> None:
    """trial34: `2.04s fault slow` named no link and no delay; the end of the run's restart
    read as a scheduled fault; and under `lab --step` a kill at 6.93 s on the records' (and the
    answers') clock printed at 3.01 s, the schedule's, so a 0.57 s failover read 4.5 s."""
    slow = {"do": "slow", "target": None, "resolved": [], "origin": "faults[0]",
            "params": {"delay": 0.3, "jitter": 0.2, "duplicate": 0.1, "from": "leader-of orders/0", "to": "clients"},
            "effect": {"from": ["broker-1"], "to": ["clients"]}}
    assert describe_fault(slow, 2.04).endswith("slow delay 300ms, jitter 200ms, duplicate 10% (broker-1 <-> clients)")
    # an end not named is every node, not each listed (trial38: a whole-cluster slow wrapped)
    nodes = ["broker-1", "broker-2", "broker-3", "controller-1"]
    everywhere = {**slow, "params": {"delay": 0.02}, "effect": {"from": nodes, "to": nodes}}
    assert describe_fault(everywhere, 2.04).endswith("slow delay 20ms (every link between nodes)")
    one_end = {**slow, "params": {"delay": 0.02, "to": "broker:1"}, "effect": {"from": nodes, "to": ["broker-1"]}}
    assert describe_fault(one_end, 2.04).endswith("slow delay 20ms (every node <-> broker-1)")
    heal = {"do": "restart", "target": "stopped", "resolved": ["broker-2"], "params": {}, "origin": "final-heal",
            "effect": {"restarted": {"broker-2": 3}}}
    assert describe_fault(heal, 9.28).endswith("restart stopped -> broker-2 (the end of the run's heal)")
    kill = {"do": "kill", "target": "leader-of orders/0", "resolved": ["broker-2"], "params": {}, "origin": "faults[0]",
            "effect": {"killed": {"broker-2": 9}}}
    line = describe_fault(kill, 6.93, on_schedule=3.01)
    assert line.startswith("[magenta]  6.93s fault[/] kill") and "(at 3.01s of the schedule, after 3.92s of pauses)" in line
