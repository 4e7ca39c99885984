"""`pids.exited`: the one answer to "is that process still the one that ran?" that the run
registry, the Spark server's record and the JVM scratch directories all ask."""
from __future__ import annotations

import os
import subprocess
import sys

from testbed.common.pids import exited, start_time


def test_a_running_process_has_not_exited_and_a_reused_number_is_another_process() -> None:
    me = os.getpid()
    started = start_time(me)
    assert started is not None
    assert not exited(me) and not exited(me, started)
    assert exited(me, started - 5.0), "a pid whose start time differs now names another process"


def test_a_zombie_has_exited_and_a_reaped_process_too() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet waited for: a zombie
    assert exited(child.pid)
    child.wait()
    assert exited(child.pid) and start_time(child.pid) is None
