"""A sweep whose summary Spark could not write still names every seed that failed or could
not be judged, with the command that replays it (README, The simulation). Found by a tester:
its JVM went away while the summary was written, and the sweep printed one line, naming none
of its 34 unjudged seeds."""
from __future__ import annotations

from pathlib import Path

import pytest

import run
import testbed.analysis.pipeline as pipeline
from testbed.analysis.verdict import RunVerdict

ROOT = Path(__file__).resolve().parents[2]


def test_a_sweep_whose_summary_failed_names_its_failed_and_unjudged_seeds(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def judged_without_summary(paths: list[Path], *args: object, **kwargs: object) -> list[RunVerdict]:
        failed = RunVerdict(paths[0], False, {"expect": {"lost_writes": {"observed": 3, "expected": 0,
                                                                         "held": False}}})
        unjudged = RunVerdict(paths[1], None, {"problems": ["the cluster did not converge"]})
        raise pipeline.SummaryError([failed, unjudged], "every run was judged (each run's results.json), but "
                                                        "the summary could not be written: gone")
    monkeypatch.setattr(pipeline, "analyze_runs", judged_without_summary)
    code = run.main(["sim", str(ROOT / "topologies" / "quickstart.yaml"), "--seeds", "2",
                     "--runs-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == run.EXIT_UNJUDGED
    assert "failed: quickstart seed 0: lost_writes 3 (expected 0)  replay:" in out
    assert "unjudged: quickstart seed 1: the cluster did not converge  replay:" in out
    assert "no summary: every run was judged" in out
