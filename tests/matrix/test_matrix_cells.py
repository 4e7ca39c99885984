"""`pytest -m matrix -n auto [--matrix FILE]`: each cell of a matrix as one test, with the
cell's id as the test's (`test_matrix[rack-outage-elr=false-seed=3]`). A cell is run as
`run.py matrix` runs it and judged on its own (one Spark session per xdist worker); its
failure message is the verdict line and the path of its report."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.analysis.pipeline import analyze_runs
from testbed.analysis.verdict import broken_expectations
from testbed.experiment.runner import run_cluster
from testbed.matrix.cells import Cell
from testbed.matrix.cli import load_cells
from tests.integration.conftest import TIME_SCALE


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "cell" in metafunc.fixturenames:
        wanted = "matrix" in (metafunc.config.option.markexpr or "")  # else the cells are deselected anyway
        cells = load_cells(Path(metafunc.config.getoption("--matrix"))) if wanted else []
        metafunc.parametrize("cell", cells, ids=[c.id for c in cells])


@pytest.mark.matrix
def test_matrix(cell: Cell, tmp_path: Path) -> None:
    outcome = run_cluster(cell.topology, runs_dir=tmp_path, time_scale=TIME_SCALE, run_dir=tmp_path / cell.id)
    assert outcome.counts is not None, f"{cell.id}: the run did not complete (see {outcome.run_dir})"
    [verdict] = analyze_runs([outcome.run_dir])
    assert verdict.ok, f"{cell.id}: {broken_expectations(verdict)}  report: {verdict.run_dir / 'report.html'}"
