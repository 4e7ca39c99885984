"""Scratch directories named for the process that owns them.

A process killed with SIGKILL runs no cleanup, so a scratch directory it made would stay
for ever (a run's rehearsal of the pipeline left 300 KB in /tmp each time its supervisor
was killed). Each directory made here carries its owner's pid in its name, and the next
process to make one with the same prefix removes those whose owner is gone: nothing
outlives its owner past the next invocation.
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from testbed.common import jvm_scratch
from testbed.common.pids import exited

#: a run's rehearsal of the pipeline: a synthetic run in the system's temporary directory
REHEARSAL_PREFIX = "isrlab-rehearsal-"
#: the directory of `<runs>/.live/` holding a JVM's log until its run has a directory
EARLY_LOG_PREFIX = "jvm-log-"
#: PySpark's directory of a starting JVM's connection file (`jvm_parent._OwnedTemp`)
GATEWAY_PREFIX = "isrlab-gateway-"


def make(prefix: str, parent: Path | None = None) -> Path:
    """A new directory `<parent>/<prefix><pid>-<random>` (parent: the system's temporary
    directory), after reaping those of `prefix` whose owner is gone."""
    reap(prefix, parent)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=parent))


@contextmanager
def scratch(prefix: str, parent: Path | None = None) -> Iterator[Path]:
    """`make`, removed again at the block's end."""
    path = make(prefix, parent)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def reap(prefix: str, parent: Path | None = None) -> None:
    """Remove the directories of `prefix` in `parent` whose owning process is gone."""
    for d, owner in _owned(prefix, parent):
        if exited(owner):
            shutil.rmtree(d, ignore_errors=True)


def remove_own(prefix: str, parent: Path | None = None) -> None:
    """Remove this process's directories of `prefix` in `parent` (it is about to exit)."""
    for d, owner in _owned(prefix, parent):
        if owner == os.getpid():
            shutil.rmtree(d, ignore_errors=True)


def _owned(prefix: str, parent: Path | None) -> Iterator[tuple[Path, int]]:
    """Each directory of `prefix` in `parent` with the pid of its owner."""
    where = Path(parent if parent is not None else tempfile.gettempdir())
    owned = re.compile(rf"{re.escape(prefix)}(\d+)-")
    for d in where.glob(f"{prefix}*") if where.is_dir() else []:
        owner = owned.match(d.name)
        if owner is not None and d.is_dir():
            yield d, int(owner.group(1))


def reap_supervisor_scratch(live: Path) -> None:
    """Remove the scratch directories of a run's supervisors that are gone: their rehearsals'
    (in the temporary directory), their JVMs' early logs (in `live`, `<runs>/.live`),
    connection files (`GATEWAY_PREFIX`) and own directories (`jvm_scratch`)."""
    reap(REHEARSAL_PREFIX)
    reap(GATEWAY_PREFIX)
    reap(EARLY_LOG_PREFIX, live)
    jvm_scratch.sweep()

