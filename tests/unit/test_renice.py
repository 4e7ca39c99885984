"""`session.renice`: a nice value belongs to a thread, so a JVM started while a cluster runs
(nice, see `session.warm_up`) gets its priority back only if every one of its threads does."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from testbed.analysis.session import renice

CHILD = """
import os, threading, time
os.nice(10)
for _ in range(3):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
print("ready", flush=True)
time.sleep(60)
"""


def _nice_values(pid: int) -> list[int]:
    return [os.getpriority(os.PRIO_PROCESS, int(tid)) for tid in os.listdir(f"/proc/{pid}/task")]


@pytest.mark.skipif(os.geteuid() != 0, reason="raising a priority needs CAP_SYS_NICE")
def test_renice_gives_every_thread_of_a_process_the_priority() -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert _nice_values(child.pid) == [10] * 4  # the main thread and the three it started
        renice(child.pid, 0)
        assert _nice_values(child.pid) == [0] * 4
    finally:
        child.kill()
        child.wait()


def test_renice_of_a_process_that_is_gone_does_nothing() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # reaped: the pid names no process now
    renice(child.pid, 0)  # no error
