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
