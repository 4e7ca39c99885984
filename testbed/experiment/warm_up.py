"""The analysis JVM's start and its rehearsal while a run's cluster runs (`session.warm_up`),
begun by `run.py x.yaml` before it imports the runner and the pipeline: the JVM then starts
about 0.7 s sooner, and the rehearsal with it.

The JVM starts before the run has a directory, and its output needs a file at once. That
file is first in a directory of `<runs>/.live/` owned by this process (`owned_dirs`), and
moves into the run directory (`analysis/spark.log`) when the run ends (`settle_log`): a
supervisor killed in its first seconds used to leave a run directory holding nothing but
that log. What a killed one leaves in `.live/` the next run's warm-up removes.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from testbed.analysis.places import jvm_log_for, warehouse_for
from testbed.analysis.session import warm_up
from testbed.common import owned_dirs

_warmed: Path | None = None  # the run the last warm-up was begun for
_early: Path | None = None  # the owned directory holding its JVM's log until `settle_log`


def early_log_dir(run_dir: Path) -> Path:
    """Where the owned directories of the JVM logs of runs beside `run_dir` are made."""
    return run_dir.parent / ".live"


def warm_up_for(run_dir: Path, spark_master: str | None) -> None:
    """Begin the warm-up for the run that will be written to `run_dir`, once per run: the
    command's early call and the runner's own are one warm-up. The JVM's output goes to an
    owned directory until `settle_log` moves it into the run directory."""
    global _warmed, _early
    if run_dir == _warmed:
        return
    _warmed = run_dir
    live = early_log_dir(run_dir)
    live.mkdir(parents=True, exist_ok=True)
    _early = owned_dirs.make(owned_dirs.EARLY_LOG_PREFIX, live)
    warm_up(lambda: _rehearse(spark_master), spark_master, log=_early / "spark.log")


def settle_log(run_dir: Path) -> None:
    """Move the JVM's log of the warm-up for `run_dir` into it (`analysis/spark.log`), if the
    run has a directory, and remove the owned one. The JVM goes on writing to the file it
    opened: a rename within a filesystem moves the file, not the JVM's handle on it."""
    global _early
    if _warmed != run_dir or _early is None:
        return
    early, _early = _early, None
    log = early / "spark.log"
    if log.exists() and run_dir.is_dir():
        target = jvm_log_for(warehouse_for([run_dir], None))
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(log, target)
    shutil.rmtree(early, ignore_errors=True)


def _rehearse(spark_master: str | None) -> None:
    from testbed.analysis.pipeline import rehearse
    rehearse(spark_master)
