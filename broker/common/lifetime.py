"""No child process of a run outlives its supervisor.

Node and client processes call `die_with_parent` first thing: the kernel SIGKILLs them
when the supervisor dies (PR_SET_PDEATHSIG), and the parent check closes the race of a
supervisor that died before the prctl. Nodes also watch their parent pid in their loop,
and the supervisor's registry (`testbed/supervisor/processes.py`) reaps the rest.
"""
from __future__ import annotations

import ctypes
import logging
import os
import signal

PR_SET_PDEATHSIG = 1
log = logging.getLogger("isrlab.lifetime")


def die_with_parent(expected_parent: int, sig: signal.Signals = signal.SIGKILL) -> None:
    """Ask the kernel to send `sig` (SIGKILL unless the caller cleans up on another) when the
    supervisor dies; exit if it already has."""
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, sig)
    except OSError:
        log.warning("prctl(PR_SET_PDEATHSIG) unavailable; relying on the parent watchdog")
    if expected_parent and os.getppid() != expected_parent:
        os._exit(3)
