"""Command-line values several commands take (`--time-scale`, `--runs-dir`,
`--summary-dir`), checked before a command starts anything: one line and exit 2, not a
traceback after the cluster started."""
from __future__ import annotations

import math
import os
from pathlib import Path


def unusable_dir(path: Path, flag: str) -> str | None:
    """Why `path` (the value of `flag`) cannot hold what a command writes, made if missing;
    None when it can. Asked before anything starts, so that a runs directory under a file
    or without write permission is one line, not a traceback after the cluster started."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"{flag} {path}: cannot be made ({exc.strerror or exc})"
    if not os.access(path, os.W_OK | os.X_OK):
        return f"{flag} {path}: not writable"
    return None


def time_scale_problem(value: float) -> str | None:
    """Why `--time-scale` cannot be `value` (it multiplies every protocol timeout); None when
    it can."""
    if not math.isfinite(value) or value <= 0:
        return f"--time-scale must be a finite number > 0, got {value}"
    return None
