"""Replacing a small file so that a crash leaves the old content or the new, never a mix or
nothing: the quorum's term, vote, log and snapshot, a broker's metadata snapshot."""
from __future__ import annotations

import os
from pathlib import Path


def replace_durably(path: Path, data: bytes) -> None:
    """Write `data` beside `path`, fsync it, rename it over `path`, fsync the directory (the
    rename is durable only once its directory is)."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
