"""An unjudged run has no partial verdict: its counts are shown, but no expectation is said
to hold or fail (a new user saw `lost_writes 550 | 0 | FAILED` beside "not judged"), and
the reason says what is missing when the run never reached its end."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.analysis.job import RunData
from testbed.analysis.runinfo import RunInfo, load_run_info
from testbed.analysis.verdict import broken_expectations, judge
from testbed.config.specs import Expectation
from tests.unit.analysis_fixtures import T0, RunBuilder, S


def _data(converged: bool) -> RunData:
    return RunData(checks={"lost_writes": {"count": 550, "examples": []}}, converged=converged)


def test_a_run_without_its_topology_holds_no_expectation(tmp_path: Path) -> None:
    info = RunInfo(tmp_path, None, f"{tmp_path / 'topology.yaml'}: missing", None)
    verdict = judge(info, _data(True), None)
    assert verdict.ok is None
    assert verdict.results["expect"]["lost_writes"] == {"expected": "0", "observed": 550, "held": None}
    assert broken_expectations(verdict) == f"{tmp_path / 'topology.yaml'}: missing"


def test_a_run_cut_short_says_its_final_state_is_missing(tmp_path: Path) -> None:
    info = RunInfo(tmp_path, None, None, None)
    [problem] = judge(info, _data(False), None).results["problems"]
    assert problem.startswith(f"{tmp_path / 'final' / 'replicas.jsonl'} is missing or empty: the run did not reach "
                              f"its end")
    (tmp_path / "final").mkdir()
    (tmp_path / "final" / "replicas.jsonl").write_text('{"node": "broker-1"}\n')
    [problem] = judge(info, _data(True), None).results["problems"]
    assert problem == (f"{tmp_path / 'final' / 'logs.jsonl'} is missing: the run stopped after recording its "
                       f"replicas and before their logs, so what survived cannot be told")
    (tmp_path / "final" / "logs.jsonl").write_text("")
    [problem] = judge(info, _data(False), None).results["problems"]
    assert problem.startswith("the cluster did not converge")
    assert judge(info, _data(True), None).results["problems"] == []


def test_the_final_files_appear_whole_or_not_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A supervisor killed while it wrote `final/logs.jsonl` left some brokers' logs and not
    others', which the analysis read as log divergence: the file is written beside and
    renamed once complete."""
    from testbed.experiment import final_state

    data = tmp_path / "data"
    for broker in ("broker-1", "broker-2"):
        (data / broker / "orders-0").mkdir(parents=True)
    target = tmp_path / "final" / "logs.jsonl"
    calls = []

    def second_fails(d: Path) -> list:
        calls.append(d)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the supervisor stopped between two brokers
        return [(0, 0, (b"v0",))]
    with monkeypatch.context() as m:
        m.setattr(final_state, "read_partition_values", second_fails)
        with pytest.raises(KeyboardInterrupt):
            final_state.write_logs(target, {b: data / b for b in ("broker-1", "broker-2")})
    assert len(calls) == 2 and not target.exists() and list(target.parent.iterdir()) == []
    assert final_state.write_logs(target, {b: data / b for b in ("broker-1", "broker-2")}) == 0
    assert target.read_text() == "" and [p.name for p in target.parent.iterdir()] == ["logs.jsonl"]


def test_a_grpc_failure_keeps_its_status_and_details_as_the_reason() -> None:
    """Found by a tester: every JVM or server death was reported as
    "SparkConnectGrpcException: <_MultiThreadedRendezvous of RPC that terminated with:"."""
    from testbed.analysis.pipeline import spark_failure

    class SparkConnectGrpcException(Exception):
        pass
    grpc = SparkConnectGrpcException('<_MultiThreadedRendezvous of RPC that terminated with:\n'
                                     '\tstatus = StatusCode.UNAVAILABLE\n\tdetails = "Connection refused"\n\tdebug = x')
    assert spark_failure(grpc) == ('SparkConnectGrpcException: <_MultiThreadedRendezvous of RPC that terminated '
                                   'with: status = StatusCode.UNAVAILABLE details = "Connection refused"')
    assert spark_failure(ValueError("a job failed\nat line 2")) == "ValueError: a job failed"


def test_an_emptied_faults_file_or_final_logs_removed_after_the_run_leave_it_unjudged(tmp_path: Path) -> None:
    """Found by a tester: a finished run whose topology schedules faults, its `faults.jsonl`
    emptied, was judged passed with the availability of a run without faults. Every fault
    a run fires writes its lines, so a finished run's empty file was emptied after it; and
    final logs removed from a finished run were said to be a run stopped before them."""
    r = RunBuilder(tmp_path, "emptied")
    r.topology["faults"] = [{"at": "1s", "do": "kill", "target": "broker:2"}]
    r.fault(T0 + S, "kill", "broker:2", ["broker-2"])
    run = r.write()
    (run / "summary.json").write_text(f'{{"workload_start_ns": {T0}}}')  # what a run writes at its end
    assert judge(load_run_info(run), _data(True), None).results["problems"] == []
    (run / "faults.jsonl").write_text("")
    [problem] = judge(load_run_info(run), _data(True), None).results["problems"]
    assert problem == (f"{run / 'faults.jsonl'} holds no line, but the topology schedules 1 fault(s) and the run "
                       f"reached its end (its summary.json), which fires every one of them: the file was emptied "
                       f"after the run, so what they did cannot be told, nor what they caused")
    (run / "faults.jsonl").unlink()
    (run / "final" / "logs.jsonl").unlink()
    problems = judge(load_run_info(run), _data(True), None).results["problems"]
    assert f"{run / 'final' / 'logs.jsonl'} is missing, though the run reached its end" in problems[0]


def test_a_damaged_line_quoted_in_a_reason_reaches_the_terminal_as_text() -> None:
    """Found by a tester: garbage in faults.jsonl was quoted byte for byte, a NUL and an escape
    sequence with it, into the terminal (and `grep` called results.json binary)."""
    from testbed.analysis.ingest import printable
    assert printable('{"do": \x00 "kill"\x1b[31m\tx\ufffdé') == '{"do": \\x00 "kill"\\x1b[31m\\tx\ufffdé'


def test_a_final_log_cut_at_a_line_end_after_the_run_is_not_judged(tmp_path: Path) -> None:
    """A tester's `final/logs.jsonl` cut at a line's end still held whole lines, and was
    judged FAILED for log divergence: the run's summary.json keeps the size of each file of
    `final/` as it wrote them, and a file of another size was changed after the run."""
    from testbed.experiment.counts import Counts, write_summary

    final = tmp_path / "final"
    final.mkdir()
    (final / "replicas.jsonl").write_text('{"node": "broker-1"}\n')
    lines = [f'{{"node": "broker-{b}", "offset": {o}}}\n' for b in (1, 2) for o in range(3)]
    (final / "logs.jsonl").write_text("".join(lines))
    write_summary(tmp_path, Counts(), T0)
    assert load_run_info(tmp_path).final_bytes == {"replicas.jsonl": 21, "logs.jsonl": len("".join(lines))}

    def changed() -> list[str]:  # the run has no topology.yaml: that is a problem of its own
        return [p for p in judge(load_run_info(tmp_path), _data(True), None).results["problems"]
                if "changed after the run" in p]
    assert changed() == []
    (final / "logs.jsonl").write_text("".join(lines[:-2]))
    [problem] = changed()
    assert problem == (f"{final / 'logs.jsonl'} is {len(''.join(lines[:-2]))} bytes where the run wrote "
                       f"{len(''.join(lines))} as it ended ({tmp_path / 'summary.json'}): the file was changed "
                       f"after the run, so what survived cannot be told")


def test_final_bytes_of_another_shape_are_ignored(tmp_path: Path) -> None:
    """An older run, or a hand-made one, has no `final_bytes`, or garbage there: nothing is
    compared, as before."""
    import json

    for garbage in ([1, 2], {"logs.jsonl": "12", "replicas.jsonl": True, "other": 3}):
        (tmp_path / "summary.json").write_text(json.dumps({"final_bytes": garbage}))
        assert load_run_info(tmp_path).final_bytes == {}


def _cut_short(tmp_path: Path, counts: dict[str, int]) -> tuple[RunInfo, RunData]:
    """A run whose supervisor was killed: its records end, it has no final state and no
    summary.json; the job counted `counts` from what it recorded."""
    d = RunBuilder(tmp_path, "killed").write()
    for name in ("replicas.jsonl", "logs.jsonl"):
        (d / "final" / name).unlink()
    data = RunData(checks={name: {"count": n, "examples": []} for name, n in counts.items()}, converged=False)
    return load_run_info(d), data


def test_a_killed_run_fails_on_what_its_records_alone_prove(tmp_path: Path) -> None:
    """DESIGN section 7: a killed supervisor leaves an analysable prefix. Two leaders in one
    epoch (I4) found in it are in the whole run, whatever its rest held: the run fails on
    them; its lost writes, which need the final state, stay unjudged (trial36: every count of
    a killed run was blank, its prefix judged for nothing)."""
    info, data = _cut_short(tmp_path, {"lost_writes": 550, "leader_conflicts": 2, "poll_skips": 0})
    verdict = judge(info, data, None)
    assert verdict.ok is False and not verdict.whole
    assert verdict.results["expect"]["leader_conflicts"] == {"expected": "0", "observed": 2, "held": False}
    assert verdict.results["expect"]["lost_writes"]["held"] is None
    assert broken_expectations(verdict) == "leader_conflicts 2 (expected 0)"
    assert "leader_conflicts" in verdict.results["counted_from_records"]
    assert "lost_writes" not in verdict.results["counted_from_records"]
    [problem] = verdict.results["problems"]
    assert "the run did not reach its end" in problem
    assert verdict.results["converged"] is None  # not known without its final state (trial37: false)

    from rich.console import Console

    from testbed.analysis.terminal import print_verdict
    console = Console(record=True, width=200)
    print_verdict(console, verdict)
    text = console.export_text()
    assert [[c.strip() for c in line.split("│")[1:3]] for line in text.splitlines()
            if "leader_conflicts" in line and "│" in line] == [["leader_conflicts", "2"]]
    assert not [line for line in text.splitlines() if "lost_writes " in line and "550" in line]
    assert "counted all the same: nonmonotonic_polls, poll_skips" in text
    assert "FAILED: leader_conflicts 2 (expected 0)" in text


def test_a_killed_run_whose_records_break_nothing_for_good_is_unjudged(tmp_path: Path) -> None:
    """None found in the prefix proves nothing of the rest, and neither does a count below an
    expectation that wants more (a lab's `">0"`): unjudged, as before."""
    info, data = _cut_short(tmp_path, {"lost_writes": 550, "leader_conflicts": 0})
    assert judge(info, data, None).ok is None
    info = RunInfo(**{**info.__dict__, "topology": info.topology.__class__(
        **{**info.topology.__dict__, "expect": {"leader_conflicts": Expectation(">", 0)}})})
    assert judge(info, data, None).ok is None
    # records that cannot be trusted (a malformed line) prove nothing either
    info, data = _cut_short(tmp_path / "again", {"leader_conflicts": 2})
    verdict = judge(info, data, "history.jsonl line 3: not JSON")
    assert verdict.ok is None and "counted_from_records" not in verdict.results


def test_a_run_killed_between_its_final_files_says_so_once(tmp_path: Path) -> None:
    """trial36: a run killed after `final/replicas.jsonl` and before `final/logs.jsonl` was
    unjudged twice over: the logs missing, and "holds no record of 18 replica(s)"."""
    info, data = _cut_short(tmp_path, {"lost_writes": 0})
    (info.run_dir / "final" / "replicas.jsonl").write_text('{"node": "broker-1"}\n')
    data.short_logs, data.converged = 18, True
    [problem] = judge(info, data, None).results["problems"]
    assert problem.startswith(f"{info.run_dir / 'final' / 'logs.jsonl'} is missing: the run stopped after")


def test_an_expected_convergence_is_said_as_true_or_false_not_a_count(tmp_path: Path) -> None:
    """trial39: lab 9's fix, `converged: false`, read `converged | no | 0 | OK`, and results.json
    `{"expected": "0", "observed": 0}`: a count beside a yes or no."""
    d = RunBuilder(tmp_path, "lab", expect={"lost_writes": 0, "converged": False}).write()
    verdict = judge(load_run_info(d), RunData(checks={"lost_writes": {"count": 0, "examples": []}}, converged=False),
                    None)
    assert verdict.ok is True, verdict.results
    assert verdict.results["expect"]["converged"] == {"expected": "false", "observed": False, "held": True}
    failed = judge(load_run_info(d), RunData(checks={"lost_writes": {"count": 0, "examples": []}}, converged=True),
                   None)
    assert failed.ok is False and broken_expectations(failed) == "converged true (expected false)"

    from rich.console import Console

    from testbed.analysis.terminal import print_verdict
    console = Console(record=True, width=200)
    print_verdict(console, verdict)
    assert [[c.strip() for c in line.split("│")[1:4]] for line in console.export_text().splitlines()
            if line.startswith("│ converged")] == [["converged", "no", "false"]]
