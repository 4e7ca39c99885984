"""The directories a command writes into (`--runs-dir`, `--summary-dir`), checked before it
starts anything."""
from __future__ import annotations

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
