"""A scratch directory of its own for every JVM isrlab starts, removed even after a SIGKILL.

Spark puts its driver's and block manager's directories, Spark Connect's artifact directory
and the native libraries it unpacks (lz4, snappy) in the JVM's temporary directory, and
removes them in shutdown hooks. A JVM killed with SIGKILL (by a reaper, an OOM kill, a test
of a failure mid-judgment) runs none, and `/tmp` gathered one such set per killed JVM. So
each JVM gets `java.io.tmpdir` and `spark.local.dir` in a directory of its own under
`ROOT`, with the process that owns it written inside (the Python process whose JVM it is,
or a `spark up` server's JVM). Its owner removes it once the JVM has exited, and every new
one those whose owner is gone, and so does a run's watchman once its supervisor is killed
(the JVM's shutdown hooks empty it of Spark's directories, not of itself: a SIGKILLed
supervisor's stayed until the next JVM started). It lives in `testbed.common` for that
watchman, which is the supervisor's, not the analysis's.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

from testbed.common.pids import exited, start_time

#: The parent of every JVM's scratch directory (one per user)
ROOT = Path(tempfile.gettempdir()) / f"isrlab-jvm-{os.getuid()}"
#: A directory whose owner was never written (its starter died first) is left this long (s)
UNOWNED_GRACE_S = 600.0
_OWNER = "owner"


def make() -> Path:
    """A new scratch directory, owned by this process until `own` names its JVM; those of
    owners that are gone are removed first."""
    sweep()
    ROOT.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="jvm-", dir=ROOT))
    own(path, os.getpid())
    return path


def own(path: Path, pid: int) -> None:
    """Say that `path` lives as long as process `pid` (a server that outlives its starter)."""
    started = start_time(pid) or 0.0
    (path / _OWNER).write_text(f"{pid} {started!r}\n")


def settings(path: Path) -> tuple[tuple[str, str], ...]:
    """The Spark settings that put the JVM's scratch files in `path`."""
    return (("spark.local.dir", str(path)),)


def java_options(path: Path) -> str:
    """The JVM option that puts its temporary files (artifacts, unpacked libraries) in `path`."""
    return f"-Djava.io.tmpdir={path}"


def remove(path: Path | None) -> None:
    """Remove `path` (once its JVM has exited)."""
    if path is not None:
        shutil.rmtree(path, ignore_errors=True)


def sweep() -> list[Path]:
    """Remove the scratch directories whose owner is gone; returns them."""
    removed = []
    for path in sorted(ROOT.glob("jvm-*")) if ROOT.is_dir() else []:
        if not _owned(path):
            remove(path)
            removed.append(path)
    return removed


def _owned(path: Path) -> bool:
    try:
        pid, started = (path / _OWNER).read_text().split()
        return not exited(int(pid), float(started))
    except FileNotFoundError:
        try:
            return time.time() - path.stat().st_mtime < UNOWNED_GRACE_S
        except FileNotFoundError:
            return False
    except (OSError, ValueError):
        return False
