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
