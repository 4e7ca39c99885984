"""`testbed.common.pools.thread_pool`: a pool's exit waits for its work, but not on an
interrupt (trial38: a judgment interrupted while its figures' queries ran beside it waited
6-9 s for them, the JVM busy and the terminal silent)."""
from __future__ import annotations

import threading

import pytest

from testbed.common.pools import thread_pool


def test_an_interrupt_leaves_the_running_task_and_cancels_the_queued_ones() -> None:
    release = threading.Event()
    with pytest.raises(KeyboardInterrupt):
        with thread_pool(1, "test-pool") as pool:
            running = pool.submit(release.wait)
            queued = pool.submit(lambda: None)
            raise KeyboardInterrupt
    assert not running.done(), "the pool's exit waited for its running task"
    assert queued.cancelled()
    release.set()
    assert running.result(timeout=30) is True


def test_any_other_end_waits_for_every_task() -> None:
    release = threading.Event()
    threading.Timer(0.05, release.set).start()  # the task ends on its own, the pool waits for it
    with pytest.raises(ValueError):
        with thread_pool(2, "test-pool") as pool:
            task = pool.submit(release.wait)
            raise ValueError
    assert task.done() and task.result() is True
    with thread_pool(2, "test-pool") as pool:
        tasks = [pool.submit(lambda n=n: n * n) for n in range(5)]
    assert [t.result(timeout=0) for t in tasks] == [0, 1, 4, 9, 16]


def test_stop_spark_in_an_interrupt_kills_its_own_jvm_before_its_sessions_stop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The other half of trial38's fix: a session's stop waits for its queries under way (up
    to `SESSION_STOP_WAIT`); as an interrupt unwinds the command, this process's JVM is
    killed first and its sessions' clients are closed, not stopped."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from pyspark import SparkContext

    from testbed.analysis import session
    jvm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    closed: list[str] = []
    busy = SimpleNamespace(stop=lambda: threading.Event().wait(),  # a stop that waits for queries that never end
                           client=SimpleNamespace(close=lambda: closed.append("client")))
    monkeypatch.setattr(SparkContext, "_gateway", SimpleNamespace(proc=jvm, close=lambda: None))
    monkeypatch.setattr(SparkContext, "_jvm", None)
    monkeypatch.setattr(session, "_session", busy)
    monkeypatch.setattr(session, "_driver", None)
    monkeypatch.setattr(session, "_url", None)
    monkeypatch.setattr(session, "_scratch", None)
    monkeypatch.setattr(session, "SESSION_STOP_WAIT", 2.0)  # waited for, the stop is given up on, and never closed
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            session.stop_spark()
        assert jvm.poll() is not None, "the JVM was not killed"
        assert closed == ["client"]
    finally:
        jvm.kill()
        jvm.wait()
