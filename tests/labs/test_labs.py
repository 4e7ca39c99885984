"""`pytest -m labs [-n auto]`: every part of every lab under topologies/labs/ run as
`run.py lab` runs it and judged against its `expect:` (issue 12), one test per part, named
by lab and part (`test_lab[06-hw-truncation-part1]`); a failure's message is the broken
expectations and the report's path. Every guide and topology is checked without running
it by `tests/unit/test_labs.py`, in the suite's own run."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.analysis.pipeline import analyze_runs
from testbed.analysis.verdict import broken_expectations
from testbed.experiment.runner import run_cluster
from testbed.labs.catalog import Part, all_labs
from tests.integration.conftest import TIME_SCALE


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "part" in metafunc.fixturenames:
        wanted = "labs" in (metafunc.config.option.markexpr or "")  # else deselected anyway
        labs = all_labs() if wanted else []
        parts = [(f"{lab.name}-part{i}", p) for lab in labs for i, p in enumerate(lab.parts, 1)]
        metafunc.parametrize("part", [p for _, p in parts], ids=[name for name, _ in parts])


@pytest.mark.labs
def test_lab(part: Part, tmp_path: Path) -> None:
    outcome = run_cluster(part.topology, runs_dir=tmp_path, time_scale=TIME_SCALE, run_dir=tmp_path / "run")
    assert outcome.counts is not None, f"{part.label}: the run did not complete (see {outcome.run_dir})"
    [verdict] = analyze_runs([outcome.run_dir])
    assert verdict.ok, f"{part.label}: {broken_expectations(verdict)}  report: {verdict.run_dir / 'report.html'}"
