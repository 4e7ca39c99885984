"""Where the analysis JVM a run starts in the background writes its output
(`testbed/experiment/warm_up.py`): in an owned directory of `<runs>/.live/` while the run has
no directory, then in the run's `analysis/spark.log`. A supervisor killed in its first
seconds left a run directory holding only that log (the process test is
`tests/integration/test_experiment.py`)."""
from __future__ import annotations

from pathlib import Path

import pytest

import testbed.experiment.warm_up as warm_up
from testbed.common import owned_dirs


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The logs the JVM was started with; a stand-in JVM writes its first line to each."""
    logs: list[Path] = []

    def start(rehearse: object, master: str | None, log: Path) -> None:
        log.parent.mkdir(parents=True, exist_ok=True)
        log.write_text("the JVM starts\n")
        logs.append(log)
    monkeypatch.setattr(warm_up, "warm_up", start)
    monkeypatch.setattr(warm_up, "_warmed", None)
    monkeypatch.setattr(warm_up, "_early", None)
    return logs


def test_the_log_moves_into_the_run_directory_when_the_run_ends_and_the_jvm_writes_on(
        tmp_path: Path, started: list[Path]) -> None:
    runs = tmp_path / "runs"
    run_dir = runs / "r1"
    warm_up.warm_up_for(run_dir, None)
    warm_up.warm_up_for(run_dir, None)  # the runner's call after the command's: one warm-up
    [log] = started
    assert log.parent.parent == runs / ".live" and log.parent.name.startswith(owned_dirs.EARLY_LOG_PREFIX)
    assert [p.name for p in runs.iterdir()] == [".live"], "a run directory before the run made one"
    with open(log, "a") as jvm:  # the JVM's handle stays open across the move
        run_dir.mkdir()
        warm_up.settle_log(run_dir)
        jvm.write("and goes on\n")
    assert (run_dir / "analysis" / "spark.log").read_text() == "the JVM starts\nand goes on\n"
    assert not list((runs / ".live").iterdir())


def test_a_run_that_made_no_directory_leaves_none_and_no_log(tmp_path: Path, started: list[Path]) -> None:
    run_dir = tmp_path / "runs" / "refused"
    warm_up.warm_up_for(run_dir, None)
    warm_up.settle_log(run_dir)
    assert not run_dir.exists() and not list((tmp_path / "runs" / ".live").iterdir())
    warm_up.settle_log(run_dir)  # a second settle has nothing left to do


def test_the_next_warm_up_removes_the_log_a_killed_supervisor_left(tmp_path: Path, started: list[Path]) -> None:
    live = tmp_path / "runs" / ".live"
    (dead := live / f"{owned_dirs.EARLY_LOG_PREFIX}999999999-x").mkdir(parents=True)  # no such pid
    (dead / "spark.log").write_text("a killed supervisor's JVM\n")
    warm_up.warm_up_for(tmp_path / "runs" / "next", None)
    assert not dead.exists() and len(started) == 1 and started[0].exists()
