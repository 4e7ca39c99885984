"""Whether a process recorded earlier is still the one running.

A pid alone is not a process: after an exit the kernel hands the number out again, so a
record keeps the process's start time too. An exited process that nobody has waited for
yet (a zombie) has exited all the same: a supervisor or server killed while its parent
looks away stays one until that parent does.
"""
from __future__ import annotations

import psutil

#: how far apart two readings of one process's start time may be (s)
START_TIME_SLACK = 0.01


def start_time(pid: int) -> float | None:
    """When process `pid` started, or None when there is none (or it may not be looked at)."""
    try:
        return psutil.Process(pid).create_time()
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return None


def exited(pid: int, started: float | None = None) -> bool:
    """Process `pid` (the one that started at `started`, if given) is gone or a zombie."""
    try:
        proc = psutil.Process(pid)
        if started is not None and abs(proc.create_time() - started) >= START_TIME_SLACK:
            return True  # its number now belongs to another process
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False  # another user's process: it runs
