"""isrlab's per-user cache directory, shared by what it keeps between runs (the analysis
JVM's class archive, the node processes' bytecode)."""
from __future__ import annotations

import os
from pathlib import Path


def isrlab_cache() -> Path:
    """`$XDG_CACHE_HOME/isrlab`, else `~/.cache/isrlab`."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "isrlab"
