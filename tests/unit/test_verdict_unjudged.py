"""An unjudged run has no partial verdict: its counts are shown, but no expectation is said
to hold or fail (a new user saw `lost_writes 550 | 0 | FAILED` beside "not judged"), and
the reason says what is missing when the run never reached its end."""
from __future__ import annotations

from pathlib import Path

from testbed.analysis.job import RunData
from testbed.analysis.runinfo import RunInfo
from testbed.analysis.verdict import judge
from testbed.matrix.results import broken_expectations


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
    [problem] = judge(info, _data(False), None).results["problems"]
    assert problem.startswith("the cluster did not converge")
