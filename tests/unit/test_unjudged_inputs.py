"""Inputs `analyze` cannot judge say why, never a verdict: a run whose history is empty
(a new user's emptied history.jsonl was judged, OK under the default expectations, while
the final logs held 1,690 values), and a path that is a file."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import run
from tests.unit.analysis_fixtures import RunBuilder, spark  # noqa: F401  (the fixture)


def test_a_run_with_an_empty_history_is_not_judged(tmp_path: Path, spark: object) -> None:  # noqa: F811
    d = RunBuilder(tmp_path, "emptied").write()
    (d / "history.jsonl").write_text("")
    assert run.main(["analyze", str(d)]) == 2
    results = json.loads((d / "results.json").read_text())
    assert results["ok"] is None
    assert any("history.jsonl: empty (no operation was recorded)" in p for p in results["problems"]), results


def test_a_file_given_as_a_run_is_named_as_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("x")
    assert run.main(["analyze", str(tmp_path / "notes.txt")]) == 2
    assert "notes.txt: a file, not a directory" in " ".join(capsys.readouterr().out.split())
