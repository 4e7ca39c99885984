"""Where a judgment puts its tables, its JVM's output and a tree's summary: known from the
run paths alone, before the pipeline is imported (the JVM's log is needed to start it)."""
from __future__ import annotations

import os
from pathlib import Path

from testbed.common.run_files import ANALYSIS_DIR


def default_summary_dir(runs: list[Path]) -> Path:
    """Where the summary of several runs goes unless `--summary-dir` says: `<common parent>/summary`."""
    return Path(os.path.commonpath([str(r) for r in runs])) / "summary"


def warehouse_for(runs: list[Path], summary_dir: Path | None) -> Path:
    """Where the Parquet tables go: the summary directory of a tree, else the run's own
    `analysis/` directory (or that of the runs' common parent)."""
    if summary_dir is not None:
        return summary_dir / "tables"
    if len(runs) == 1:
        return runs[0] / ANALYSIS_DIR / "tables"
    return Path(os.path.commonpath([str(r) for r in runs])) / ANALYSIS_DIR / "tables"


def jvm_log_for(warehouse: Path) -> Path:
    """Where an embedded JVM started to fill `warehouse` writes its own output: beside it
    (`<run>/analysis/spark.log` for one run)."""
    return warehouse.parent / "spark.log"
