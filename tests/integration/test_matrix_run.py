"""A matrix run end to end (issue 11): cells as real clusters two at a time, each in its own
run directory, judged in one Spark job; a cell that misses its expectation is run again by
`--deflake` and reported failed, the exit code says so, and the summary files link every
cell's report. A killed matrix leaves no cell running."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from rich.console import Console

from testbed.matrix.cells import expand_file
from testbed.matrix.runner import run_matrix
from tests.integration.conftest import TIME_SCALE, topology_dict
from tests.unit.analysis_fixtures import spark, warm_master  # noqa: F401  (the fixtures)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow(seconds=115)
def test_cells_run_in_parallel_are_judged_together_and_a_failing_cell_is_retried(
        tmp_path: Path, spark: object) -> None:  # noqa: F811 - judged in the worker's session, not a JVM of its own
    base = topology_dict(partitions=1, duration="2s", expect={"lost_writes": 0})
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base), encoding="utf-8")
    # No fault runs, so nothing is lost: the rule that wants loss for elr=false cannot hold.
    (tmp_path / "m.yaml").write_text(yaml.safe_dump({
        "base": "base.yaml", "vary": {"protocol.elr": [True, False]}, "seeds": [3, 4],
        "expect": [{"when": {"protocol.elr": False}, "expect": {"lost_writes": ">0"}}]}), encoding="utf-8")
    cells = expand_file(tmp_path / "m.yaml")
    console = Console(record=True, width=200)
    code = run_matrix(cells, tmp_path / "matrix", jobs=2, time_scale=TIME_SCALE, deflake=1, console=console)
    out = console.export_text()
    assert code == 1, out
    dirs = [tmp_path / "matrix" / c.id for c in cells]
    assert [d.name for d in dirs] == ["itest-elr=true-seed=3", "itest-elr=true-seed=4",
                                      "itest-elr=false-seed=3", "itest-elr=false-seed=4"]
    results = [json.loads((d / "results.json").read_text()) for d in dirs]
    assert [r["ok"] for r in results] == [True, True, False, False]
    assert results[2]["expect"]["lost_writes"] == {"expected": ">0", "observed": 0, "held": False}
    for ok_dir, bad_dir in ((dirs[0], dirs[2]), (dirs[1], dirs[3])):
        retry = json.loads((tmp_path / "matrix" / f"{bad_dir.name}.retry1" / "results.json").read_text())
        assert retry["ok"] is False, "the failed cell ran again, under the same expectations"
        assert not (tmp_path / "matrix" / f"{ok_dir.name}.retry1").exists()
        assert f"failed: {bad_dir.name}.retry1" not in out and f"failed: {bad_dir.name}:" in out
    rows = [[c.strip() for c in line.split("│")] for line in out.splitlines() if "itest elr=" in line]
    assert rows == [["itest elr=true", "(its own)", "2", "2", "0", "0", "0", "0.00", ""],
                    ["itest elr=false", "(its own)", "2", "0", "0", "0", "0", "0.00", "lost_writes"]], out
    assert "2 of 4 cells met their expectations" in out
    page = (tmp_path / "matrix" / "summary" / "cells.html").read_text()
    assert f"href='../{dirs[2].name}.retry1/report.html'" in page and f"href='../{dirs[0].name}/report.html'" in page
    assert (tmp_path / "matrix" / "summary" / "cells.parquet").is_dir()


#: `.ci/run`'s share of topologies/matrix/ci.yaml (issue 11): the rack outage under rack-blind
#: placement (acks=all loss expected, `placement_violations` found) and its fix, rack-aware
#: placement (no loss), one seed each; the README gives the same command.
CI_SUBSET = ["--only", "rack-outage", "--seeds", "1", "--jobs", "2"]


@pytest.mark.slow(seconds=225)
def test_the_ci_subset_of_the_ci_matrix_meets_its_expectations(tmp_path: Path, warm_master: str) -> None:  # noqa: F811
    """`run.py matrix topologies/matrix/ci.yaml` on the CI subset, as a user runs it: exit 0,
    and the summary shows the loss of the unsafe setting beside its fix."""
    out = subprocess.run([sys.executable, "run.py", "matrix", "topologies/matrix/ci.yaml", *CI_SUBSET,
                          "--runs-dir", str(tmp_path), "--time-scale", str(TIME_SCALE), "--spark-master", warm_master],
                         cwd=ROOT, capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"})
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    [matrix] = tmp_path.glob("*-matrix-ci")
    blind, aware = (json.loads((matrix / f"rack-outage-rack-{p}-seed=0" / "results.json").read_text())
                    for p in ("blind", "aware"))
    assert blind["ok"] and blind["checks"]["lost_writes"]["count"] > 0
    assert blind["checks"]["placement_violations"]["count"] > 0
    assert aware["ok"] and aware["checks"]["lost_writes"]["count"] == 0
    assert "2 of 2 cells met their expectations" in out.stdout


@pytest.mark.parametrize("sig", ["SIGKILL", "SIGTERM"])
def test_a_killed_matrix_leaves_no_cell_behind(tmp_path: Path, sig: str) -> None:
    """The guarantee of a single run, for a matrix: SIGKILL of `run.py matrix` while two
    cells run stops both cells' supervisors and every node of theirs, and unregisters them.
    SIGTERM (a CI job's timeout) alike, and then no further cell starts, and the matrix says
    so in a line and exits 143: its pool had waited for the cells, and started the third."""
    base = topology_dict(partitions=1, duration="60s")
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base), encoding="utf-8")
    (tmp_path / "m.yaml").write_text(yaml.safe_dump({"base": "base.yaml", "seeds": 3}), encoding="utf-8")
    runs = tmp_path / "runs"
    matrix = subprocess.Popen([sys.executable, "run.py", "matrix", str(tmp_path / "m.yaml"), "--jobs", "2",
                               "--runs-dir", str(runs), "--time-scale", str(TIME_SCALE)], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60 * TIME_SCALE
        registered: list[dict] = []
        while time.monotonic() < deadline and len(registered) < 2:
            registered = [json.loads(f.read_text()) for f in (runs / ".live").glob("*.json")] \
                if (runs / ".live").is_dir() else []
            registered = [r for r in registered if len(r["processes"]) >= 4]  # every node and client started
            time.sleep(0.1)  # polling the registry against a deadline
        assert len(registered) == 2, "the two cells never both ran"
        pids = [r["supervisor_pid"] for r in registered] + [p["pid"] for r in registered for p in r["processes"]]
        os.kill(matrix.pid, signal.Signals[sig])
        _, err = matrix.communicate(timeout=60 * TIME_SCALE)
        if sig == "SIGTERM":
            assert matrix.returncode == 143, err
            assert "isrlab: terminated (SIGTERM); everything it started is stopped" in err, err
            logs = sorted(runs.glob("*/.cells/*.log"))
            assert len(logs) == 2, f"a cell started after the SIGTERM: {logs}"
            assert all("the cell was stopped with its matrix" in log.read_text() for log in logs)
        deadline = time.monotonic() + 10 * TIME_SCALE
        while time.monotonic() < deadline and _alive(pids):
            time.sleep(0.05)  # polling the process table against a deadline
        assert not _alive(pids), f"processes outlived the matrix: {_alive(pids)}"
        assert not list((runs / ".live").glob("*.json")), "a cell stayed registered as running"
    finally:
        if matrix.poll() is None:
            matrix.kill()


def _alive(pids: list[int]) -> list[int]:
    out = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                out.append(pid)
        except psutil.NoSuchProcess:
            pass
    return out
