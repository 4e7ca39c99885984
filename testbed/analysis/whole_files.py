"""Files that a reader sees whole or not at all: the verdict (results.json), the report and
the Spark server's record. Written beside their place and renamed over it, so that a full
disk or a killed writer leaves the old file, never a cut one (a full disk left 4 KB of
invalid JSON as a run's results.json). Not made durable: a crash of the machine may lose
the new file, which the next judgment writes again."""
from __future__ import annotations

import os
from pathlib import Path


def write_whole(path: Path, data: bytes) -> None:
    """Replace `path` by `data` in one rename; on failure the part written goes too."""
    part = path.with_name(f".{path.name}.{os.getpid()}.part")
    try:
        part.write_bytes(data)
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
