"""The analysis JVM's start and its rehearsal while a run's cluster runs (`session.warm_up`),
begun by `run.py x.yaml` before it imports the runner and the pipeline: the JVM then starts
about 0.7 s sooner, and the rehearsal with it."""
from __future__ import annotations

from pathlib import Path

from testbed.analysis.places import jvm_log_for, warehouse_for
from testbed.analysis.session import warm_up

_warmed: Path | None = None  # the run the last warm-up was begun for


def warm_up_for(run_dir: Path, spark_master: str | None) -> None:
    """Begin the warm-up for the run that will be written to `run_dir` (its JVM's output goes
    to the run's analysis/spark.log), once per run: the command's early call and the
    runner's own are one warm-up."""
    global _warmed
    if run_dir == _warmed:
        return
    _warmed = run_dir
    warm_up(lambda: _rehearse(spark_master), spark_master, log=jvm_log_for(warehouse_for([run_dir], None)))


def _rehearse(spark_master: str | None) -> None:
    from testbed.analysis.pipeline import rehearse
    rehearse(spark_master)
