"""Every test process ignores a Spark server a developer may have up (`run.py spark up`):
judgments in tests use their own sessions, unless a test starts its own server; and it has
its own index of runs in progress (`processes.INDEX`)."""
from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

DEFAULT_MATRIX = Path(__file__).resolve().parents[1] / "topologies" / "matrix" / "ci.yaml"
ON_REQUEST = ("matrix", "labs")  # markers of tests that run only when `-m` names them

PROCESS_DIR = Path(tempfile.gettempdir()) / f"isrlab-tests-{os.getpid()}"  # removed when the process ends
os.environ["ISRLAB_SPARK_SERVER_FILE"] = str(PROCESS_DIR / "none.json")
# Each test process reaps only the dead runs it made: a test that kills a supervisor reads
# what it left behind before reaping it, and another worker's run must not reap it first.
os.environ["ISRLAB_LIVE_INDEX"] = str(PROCESS_DIR / "live")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--matrix", default=str(DEFAULT_MATRIX),
                     help="the matrix file (or directory) whose cells `pytest -m matrix` runs "
                          "(default topologies/matrix/ci.yaml)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The matrix's cells and the labs' runs are tests only when asked for (`-m matrix`,
    `-m labs`): the suite's own run (`pytest -n auto`) runs neither whole (it runs a share of
    each as integration tests)."""
    asked = config.option.markexpr or ""
    skipped = [m for m in ON_REQUEST if m not in asked]
    kept = [item for item in items if not any(item.get_closest_marker(m) for m in skipped)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
    items[:] = longest_first(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))


def _seconds(item: pytest.Item) -> float:
    marker = item.get_closest_marker("slow")
    return float(marker.kwargs.get("seconds", 0)) if marker is not None else 0.0


def _group(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("slow")
    return marker.kwargs.get("group") if marker is not None else None


def longest_first(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """`items` with the `slow` tests at the head of each worker's share, longest first, each
    given to the share with the least slow time so far. `--dist worksteal` hands worker k
    the k-th of `workers` consecutive shares and lets an idle worker take the back half of a
    busy one's queue: the longest test, where collection put it, began late on one worker,
    and the other was left idle for its last eight minutes (a CI run on a slow day). Tests
    of one `slow(group=...)` share their runs (`test_protocol_modes.judged_runs`): they go
    together into one share, their `seconds` counted once."""
    slow = [item for item in items if _seconds(item) > 0]
    units: dict[object, list[pytest.Item]] = {}
    for item in slow:
        units.setdefault(_group(item) or item, []).append(item)
    if not units:
        return items
    rest = iter([item for item in items if _seconds(item) == 0])
    heads: list[list[pytest.Item]] = [[] for _ in range(max(1, workers))]
    loads = [0.0] * len(heads)
    for unit in sorted(units.values(), key=lambda u: max(map(_seconds, u)), reverse=True):
        k = loads.index(min(loads))
        heads[k] += unit
        loads[k] += max(map(_seconds, unit))
    ordered: list[pytest.Item] = []
    left = len(items)
    for k, head in enumerate(heads):
        share = left // (len(heads) - k)  # as worksteal splits what is left among the idle
        left -= share
        ordered += head + list(itertools.islice(rest, max(0, share - len(head))))
    return ordered + list(rest)


#: judges the pipeline's small synthetic run and stops, so that its JVM's classes are saved
RECORD_CLASSES = ("from testbed.analysis.pipeline import rehearse; from testbed.analysis.session import stop_spark; "
                  "rehearse(); stop_spark()")
_recorder: subprocess.Popen | None = None


def pytest_configure(config: pytest.Config) -> None:
    """A parallel run (`-n`) on a machine without the analysis JVM's class archive (a CI
    clone: its new venv is a new archive key) records one first, in a process of its own.
    The first JVM to start records it and saves it when its session stops: that was a
    worker's session, which stops at the suite's end, so no JVM of the suite mapped the
    archive (a cold `analyze` of a tiny run: 49 s of CPU without, 37-48 with, on a slow hour)
    and the worker's last test waited for the dump (120 s, cut short, in one CI run). Here the
    recorder holds the recording lock before the workers start (their JVMs start without an
    archive meanwhile, as any other process's would) and saves within a minute or two."""
    global _recorder
    if hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None):
        return
    from testbed.analysis import class_archive
    from testbed.analysis.spark_settings import USER_CONF_DIR
    if USER_CONF_DIR is not None or class_archive.recorded():  # (a user's own Spark settings: no archive)
        return
    lock = class_archive.recording_lock()
    if lock is None:
        return
    _recorder = subprocess.Popen([sys.executable, "-c", RECORD_CLASSES], cwd=Path(__file__).resolve().parents[1],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while _recorder.poll() is None and time.monotonic() < deadline and not _holds(lock, _recorder.pid):
        time.sleep(0.05)


def _holds(lock: Path, pid: int) -> bool:
    try:
        return lock.read_text() == str(pid)
    except OSError:
        return False


def pytest_unconfigure(config: pytest.Config) -> None:
    if _recorder is not None and _recorder.poll() is None:
        _recorder.kill()  # a suite shorter than the recording: its JVM exits with its standard input
        _recorder.wait()
    shutil.rmtree(PROCESS_DIR, ignore_errors=True)
