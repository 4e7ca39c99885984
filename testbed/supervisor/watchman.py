"""A run's watchman: `python -m testbed.supervisor.watchman REGISTRY SUPERVISOR_PID`.

A SIGKILLed supervisor runs no clean-up. Its nodes and clients die with it (each asked the
kernel for that), but its tmpfs mounts, socket directory and network namespaces would stay
until the next isrlab command reaped them. The watchman is a small process of its own
session that waits for the supervisor to exit (a pidfd becomes readable then, zombie or
not) and reaps what the run's registry names at once. The supervisor's own scratch
directories (its rehearsal's synthetic run, its JVM's early log and scratch directory) go too, at once and again
once its JVM, told to stop by the kernel as the supervisor died, has had the time to (it may
still write in them as it stops). At the run's normal end the supervisor removes its
registry and stops the watchman (SIGTERM).
"""
from __future__ import annotations

import os
import select
import signal
import sys
import time
from pathlib import Path

from testbed.common.owned_dirs import reap_supervisor_scratch
from testbed.supervisor.processes import reap_registry

#: a JVM stops within half a second of its SIGTERM once up (README, "a killed supervisor");
#: its scratch is removed again after this long
JVM_STOP_S = 3.0


def main(argv: list[str]) -> int:
    registry, supervisor = Path(argv[0]), int(argv[1])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # the run ended as it should
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C is the supervisor's to handle
    try:
        exited = os.pidfd_open(supervisor)
    except ProcessLookupError:
        exited = None  # gone before the watchman looked
    if exited is not None:
        select.select([exited], [], [])
    reap_registry(registry)
    for delay in (0.0, JVM_STOP_S):
        time.sleep(delay)
        reap_supervisor_scratch(registry.parent)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
