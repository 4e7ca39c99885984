"""How long a run's workload ran, in the report's seconds (its "workload ended" line): a run
at `--time-scale 3` ran its `duration: 5s` for 15 s, and the line was drawn at 5 s, in the
middle of the workload."""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from testbed.analysis.runinfo import load_run_info
from testbed.common.run_files import STARTED
from tests.unit.analysis_fixtures import topology

T0 = 1_000_000_000_000


def _run(tmp_path: Path, summary: dict | None) -> Path:
    (tmp_path / "topology.yaml").write_text(yaml.safe_dump(topology()))
    if summary is not None:
        (tmp_path / "summary.json").write_text(json.dumps(summary))
    return tmp_path


def test_the_workload_ran_from_its_start_to_its_end_as_summary_json_has_them(tmp_path: Path) -> None:
    run = _run(tmp_path, {"operations": {}, "workload_start_ns": T0, "workload_end_ns": T0 + 15_000_000_000})
    assert load_run_info(run).workload_seconds == 15.0


def test_without_its_end_the_workload_ran_the_topologys_duration(tmp_path: Path) -> None:
    assert load_run_info(_run(tmp_path, {"operations": {}, "workload_start_ns": T0})).workload_seconds == 5.0
    (tmp_path / "summary.json").unlink()
    assert load_run_info(tmp_path).workload_seconds == 5.0
    (tmp_path / "summary.json").write_text(json.dumps({"workload_start_ns": T0, "workload_end_ns": "late"}))
    assert load_run_info(tmp_path).workload_seconds == 5.0


def test_the_clients_late_at_time_0_are_read_from_summary_json_and_garbage_is_none(tmp_path: Path) -> None:
    run = _run(tmp_path, {"workload_start_ns": T0, "clients_late": {"producer-1": 17.2, "consumer-0": None,
                                                                     "producer-2": "soon"}})
    assert load_run_info(run).clients_late == {"producer-1": 17.2, "consumer-0": None, "producer-2": None}
    (tmp_path / "summary.json").write_text(json.dumps({"clients_late": ["producer-1"]}))
    assert load_run_info(tmp_path).clients_late == {}


def test_a_run_that_never_ended_counts_from_the_time_0_it_wrote_as_its_workload_began(tmp_path: Path) -> None:
    """trial31: a run whose supervisor was killed has no summary.json; it was judged on a clock
    from the cluster's first event, and its kill at 3 s read 3.483 s."""
    run = _run(tmp_path, None)
    (run / "clients").mkdir()
    (run / STARTED).write_text(json.dumps({"workload_start_ns": T0}))
    assert load_run_info(run).workload_start_ns == T0
    (run / "summary.json").write_text(json.dumps({"operations": {}}))  # it ended: its summary says all
    assert load_run_info(run).workload_start_ns is None
    (run / "summary.json").unlink()
    (run / STARTED).write_text("{")  # torn as the supervisor died
    assert load_run_info(run).workload_start_ns is None
