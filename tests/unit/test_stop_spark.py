"""`stop_spark` leaves no JVM behind when it returns, nor any file of it: once its sessions
have stopped the JVM has nothing left to finish, so it is killed and waited for (its own
exit ran shutdown hooks for 0.3-0.5 s of every command), and it keeps no performance-data
file in /tmp/hsperfdata_<user> that a killed JVM would leave there."""
from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.unit.jvm_sessions import GROUP

ROOT = Path(__file__).resolve().parents[2]


@GROUP
def test_the_jvm_is_gone_when_stop_spark_returns_and_leaves_no_perf_data(two_sessions: dict) -> None:
    for each in (two_sessions["small"], two_sessions["large"]):
        assert (each["returncode"], each["perf_data"]) == (-9, False), each  # killed once stopped, no file left


@GROUP
def test_the_jvm_leaves_no_temporary_files_and_a_session_can_start_again(two_sessions: dict) -> None:
    """Spark's scratch files (its block manager's, the artifacts, unpacked native libraries)
    are in the JVM's own directory, gone with the JVM; a second `get_spark` in the process
    starts a new JVM (it went on talking to the exited one: the Python API's second
    `finish()` failed with a refused connection)."""
    for each in (two_sessions["small"], two_sessions["large"]):
        assert each["sizes"] == [3, 4, 5, 6, 7, 8], each
        assert (each["block_manager"], each["scratch_left"]) == (True, False), each


@GROUP
def test_the_clients_releases_of_finished_executions_reach_the_session_before_it_stops(two_sessions: dict) -> None:
    """PySpark's client releases each finished execution in the background; a release still
    under way when the session stopped reached a closed session, and the JVM logged an error
    with its stack trace in the run's `spark.log` (in 2 to 5 of 6 small scripts before)."""
    assert two_sessions["releases"] == 0, two_sessions["log"].read_text()[-3000:]


KILLED = """
import os
from testbed.analysis import session
session.get_spark().range(3).count()
print(session._scratch, flush=True)
os.kill(os.getpid(), 9)
"""


def test_a_killed_process_leaves_no_temporary_files_of_its_jvm() -> None:
    """SIGKILL of the Python process: its JVM exits at the end of its standard input and
    removes its scratch directory on the way out (nothing else would until another JVM starts)."""
    done = subprocess.run([sys.executable, "-c", KILLED], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == -9, done.stderr[-2000:]
    scratch = Path(done.stdout.strip().splitlines()[-1])
    deadline = time.monotonic() + 60
    while scratch.exists() and time.monotonic() < deadline:
        time.sleep(0.1)  # the JVM's exit after its standard input closed
    assert not scratch.exists()


class _Stuck:
    """A session whose stop never returns, as one of a SIGSTOPped JVM's (py4j has no timeout)."""

    def __init__(self) -> None:
        self.release = threading.Event()

    def stop(self) -> None:
        self.release.wait()


def test_sessions_that_do_not_stop_in_time_are_left_to_the_kill(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a tester: with the JVM stopped (SIGSTOP), `analyze` printed its verdict and
    then never exited, its session's stop waiting on the JVM's answer. The sessions get
    `SESSION_STOP_WAIT`; when they have not stopped by then, `stop_spark` kills the JVM
    under them instead of waiting."""
    from testbed.analysis import session
    monkeypatch.setattr(session, "SESSION_STOP_WAIT", 0.2)
    stuck = _Stuck()
    start = time.monotonic()
    try:
        assert session._stop_sessions([stuck], gone=False) is False
        assert time.monotonic() - start < 2
    finally:
        stuck.release.set()
    stopped = _Stuck()
    stopped.release.set()  # a session that stops at once
    assert session._stop_sessions([stopped], gone=False) is True


STARTING = """
import os, signal, threading, time
import psutil
from testbed.analysis import session
failed = []
def start():
    try:
        session.get_spark()
    except Exception as exc:
        failed.append(type(exc).__name__)
starter = threading.Thread(target=start, daemon=True)
starter.start()
deadline = time.monotonic() + 120
jvm = None
while jvm is None and time.monotonic() < deadline:
    jvm = next((c for c in psutil.Process().children() if "pyspark-shell" in c.cmdline()), None)
    time.sleep(0.01)
os.kill(jvm.pid, signal.SIGSTOP)  # a start that does not end: the lock stays taken
scratch = session._scratch
session.stop_spark()
starter.join(60)
print(starter.is_alive(), bool(failed), jvm.is_running(), scratch is not None and scratch.exists(),
      session.started())
"""


def test_stop_spark_cuts_short_a_start_under_way_in_another_thread() -> None:
    """Found in CI under load: Ctrl-C of a lab while the warm-up thread was still starting its
    JVM (at nice 10, over a minute) waited for the whole start, since the starting thread
    holds the session's lock until the JVM answers; the lab did not exit in 90 s. Here the
    JVM of the start is stopped (SIGSTOP), so that start never ends by itself: `stop_spark`
    kills that JVM, the start fails, and nothing of it is left (no JVM, no scratch files)."""
    done = subprocess.run([sys.executable, "-c", STARTING], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False True False False False", done.stdout
