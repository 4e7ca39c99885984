"""isrlab's per-user cache directory, shared by what it keeps between runs (the analysis
JVM's class archive and command, the node processes' bytecode)."""
from __future__ import annotations

import os
from pathlib import Path


def isrlab_cache() -> Path:
    """`$XDG_CACHE_HOME/isrlab`, else `~/.cache/isrlab`."""
    return Path(os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")) / "isrlab"


def keep_newest(directory: Path, pattern: str, keep: int) -> None:
    """Remove all but the `keep` files of `directory` matching `pattern` that were modified
    last: a cache keyed by software (a CI clone per run makes keys of its own) stays bounded."""
    found = []
    for path in directory.glob(pattern):
        try:
            found.append((path.stat().st_mtime, path))
        except OSError:
            continue  # removed meanwhile
    for _, path in sorted(found, reverse=True)[keep:]:
        path.unlink(missing_ok=True)
