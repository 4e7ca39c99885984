"""A real run judged by the pipeline: a short quickstart-like cluster under acks=all with no
fault must come out clean on every check, with a report and the figures."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.analysis import analyze_runs
from testbed.experiment import run_experiment
from testbed.topology import CHECK_NAMES, parse_topology
from tests.integration.conftest import TIME_SCALE, topology_dict
from tests.unit.analysis_fixtures import spark  # noqa: F401  (the shared session fixture)

pytestmark = pytest.mark.integration


def test_a_real_clean_run_is_judged_clean(tmp_path: Path, spark: object) -> None:  # noqa: F811
    topo = parse_topology(topology_dict(partitions=2, duration="3s"), "test")
    out = run_experiment(topo, runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    assert out.exit_code == 0, f"run failed, see {out.run_dir}"
    [verdict] = analyze_runs([out.run_dir])
    checks = verdict.results["checks"]
    assert verdict.ok is True, verdict.results["problems"]
    assert {n: checks[n]["count"] for n in CHECK_NAMES} == dict.fromkeys(CHECK_NAMES, 0)
    assert verdict.results["converged"] is True
    series = verdict.results["figures"]["series"]
    assert sum(s["records"] for s in series if s["f"] == "send") == out.summary.acknowledged["all"]
    assert (out.run_dir / "report.html").stat().st_size > 10_000
