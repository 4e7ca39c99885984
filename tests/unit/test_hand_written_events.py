"""Events as a hand-written run may give them, from DESIGN section 7's text alone, which names
no field for who registered or who was elected: a registration recorded by the broker itself
(`"node": "broker-3"`) and an election by the controller itself (`"node": "controller-2"`)
count as theirs; a registration that names nobody leaves the run unjudged with its line, and
what the line lacks is said in words. A
tester's run of each was judged OK with unclean_exclusion and metadata_divergence at 0
(trial24: `"broker": 3` on the controller's line, and two elections of term 1 by node)."""
from __future__ import annotations

from pathlib import Path

from testbed.analysis.line_rules import unmet
from testbed.analysis.pipeline import analyze_runs
from testbed.analysis.schemas import RECORD_FILES
from tests.unit.analysis_fixtures import S, T0, RunBuilder, spark  # noqa: F401  (the fixture)

MS = S // 1000


def _unclean_by_node(root: Path, registered: dict) -> Path:
    """As test_analysis's `unclean`: broker 3 restarts unclean and is put back in the ISR by an
    election, not by its leader; and a second controller is elected in term 1."""
    r = RunBuilder(root, registered["node"] + ("-named" if "broker_id" in registered else ""))
    r.events += [{"time_ns": T0 + 3 * S, "kind": "registered", "broker_epoch": 9, "clean": False, **registered},
                 RunBuilder.change(T0 + 3 * S + 10, leader=1, epoch=0, isr=[1, 2], reason="unclean-exclusion"),
                 RunBuilder.change(T0 + 3 * S + 20, leader=1, epoch=1, isr=[1, 2, 3], reason="election"),
                 {"node": "controller-2", "time_ns": T0 + 3 * S + 30, "kind": "controller-elected", "term": 1}]
    return r.write()


def test_a_registration_and_an_election_recorded_by_their_own_node_are_theirs(
        tmp_path: Path, spark: object) -> None:  # noqa: F811
    by_broker = _unclean_by_node(tmp_path, {"node": "broker-3"})
    nobody = _unclean_by_node(tmp_path, {"node": "controller-1", "broker": 3})
    minus_one = RunBuilder(tmp_path, "acks-minus-one")
    minus_one.send("v5", 5, at=T0 + 3 * S, acks="-1")
    minus_one = minus_one.write()
    misspelt = RunBuilder(tmp_path, "misspelt-expect", expect={"lost_write": 0}).write()
    verdicts = {v.run_dir: v for v in analyze_runs([by_broker, nobody, minus_one, misspelt])}
    judged = verdicts[by_broker].results["checks"]
    assert (judged["unclean_exclusion"]["count"], judged["metadata_divergence"]["count"]) == (1, 1)
    refused = verdicts[nobody]
    assert refused.ok is None
    assert any("events.jsonl: line 7: does not hold what a line of events.jsonl needs: `kind` not registered, "
               "or `broker_id` present, or `node` starting broker-" in p for p in refused.results["problems"]), \
        refused.results["problems"]
    # said in words, not as the SQL predicate the reader evaluates (which read as a field missing)
    assert any("does not hold what a line of history.jsonl needs: `acks` one of all, 1, 0 (it is '-1')" in p
               for p in verdicts[minus_one].results["problems"]), verdicts[minus_one].results["problems"]
    # a topology that cannot be read leaves convergence unknown, not false (the run converged)
    unread = verdicts[misspelt]
    assert unread.ok is None and unread.results["converged"] is None, unread.results
    assert any("expect.lost_write" in p for p in unread.results["problems"]), unread.results["problems"]


def test_what_a_line_misses_is_said_of_its_nearest_form() -> None:
    """A history line is a send or a poll: what it misses is said of the form it is nearest
    (a send's `acks`, not every term of both forms), and of both where neither is nearer."""
    history = RECORD_FILES[0].rule
    send = {"process": "p", "time_ns": 1, "type": "ok", "f": "send", "topic": "t", "partition": 0, "value": "v"}
    assert unmet(history, {**send, "acks": "all", "offset": 3}) == []
    assert unmet(history, {**send, "acks": "-1", "offset": 3}) == ["`acks` one of all, 1, 0 (it is '-1')"]
    assert unmet(history, {**send, "acks": "all"}) == ["`type` not ok, or `acks` = 0, or `offset` present"]
    assert unmet(history, {"time_ns": 1, "type": "ok", "f": "poll", "topic": "t", "partition": 0,
                           "records": []}) == ["`process` present (missing)"]


def test_a_leader_killed_after_the_last_client_operation_leaves_its_window(
        tmp_path: Path, spark: object) -> None:  # noqa: F811
    """A run's windows end at its workload's end, which was its last client operation: a
    hand-written run whose leader is killed at 2.5 s, after its last operation at 2 s, and
    replaced at 3 s, had no window at all ("0.0 partition-s", trial24). The workload's end is
    now its scheduled end where the run recorded on until then, never past the final read."""
    r = RunBuilder(tmp_path, "killed-after-the-last-operation")
    r.topology["faults"] = [{"at": "2.5s", "do": "kill", "target": "broker:1"}]
    r.fault(T0 + 2500 * MS, "kill", "broker:1", ["broker-1"], effect={"killed": {"broker-1": 7}})
    r.events += [RunBuilder.change(T0 + 3 * S, leader=2, epoch=1, isr=[2, 3], reason="election"),
                 {"node": "broker-2", "time_ns": T0 + 3 * S + 10 * MS, "kind": "became-leader", "topic": "orders",
                  "partition": 0, "leader_epoch": 1, "partition_epoch": 1, "isr": [2, 3]}]
    r.replicas = {node: {**rep, "leader_epoch": 1, "is_leader": node == "broker-2"} for node, rep in r.replicas.items()}
    [verdict] = analyze_runs([r.write()])
    assert [(w["kind"], w["start_s"], w["end_s"]) for w in verdict.results["figures"]["availability"]
            if w["kind"] == "no-leader"] == [("no-leader", 2.5, 3.01)], verdict.results["figures"]["availability"]
