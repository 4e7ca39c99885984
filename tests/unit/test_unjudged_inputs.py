"""Inputs `analyze` cannot judge say why, never a verdict: a run whose history is empty
(a new user's emptied history.jsonl was judged, OK under the default expectations, while
the final logs held 1,690 values), and a path that is a file."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.analysis.ingest import IngestError, find_runs
from testbed.analysis.pipeline import analyze_runs
from tests.unit.analysis_fixtures import RunBuilder, spark  # noqa: F401  (the fixture)


def test_a_run_with_an_empty_history_is_not_judged(tmp_path: Path, spark: object) -> None:  # noqa: F811
    d = RunBuilder(tmp_path, "emptied").write()
    (d / "history.jsonl").write_text("")
    [verdict] = analyze_runs([d])
    assert verdict.ok is None
    assert any("history.jsonl: empty (no operation was recorded)" in p for p in verdict.results["problems"])


def test_a_file_given_as_a_run_is_named_as_a_file(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(IngestError, match="notes.txt: a file, not a directory"):
        find_runs([tmp_path / "notes.txt"])


def test_two_sweeps_with_one_run_name_are_refused_with_how_to_judge_them(tmp_path: Path) -> None:
    """Two sim sweeps of one topology hold seed directories of one name; a run's id is its
    directory's name, so one judgment cannot hold both: the error says how to judge them."""
    for sweep in ("20261126T063702Z-sim-mix5", "20261126T063724Z-sim-mix5"):
        RunBuilder(tmp_path / sweep, "mix5-seed=1").write()
    with pytest.raises(IngestError, match=r"two runs share the id 'mix5-seed=1'.*judge them apart, e\.g\. "
                                          r"`python run.py analyze .*20261126T063702Z-sim-mix5`"):
        find_runs([tmp_path])
