"""A run's watchman: `python -m testbed.supervisor.watchman REGISTRY SUPERVISOR_PID`.

A SIGKILLed supervisor runs no clean-up. Its nodes and clients die with it (each asked the
kernel for that), but its tmpfs mounts, socket directory and network namespaces would stay
until the next isrlab command reaped them. The watchman is a small process of its own
session that waits for the supervisor to exit (a pidfd becomes readable then, zombie or
not) and reaps what the run's registry names at once. At the run's normal end the
supervisor removes its registry and stops the watchman (SIGTERM).
"""
from __future__ import annotations

import os
import select
import signal
import sys
from pathlib import Path

from testbed.supervisor.processes import reap_registry


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
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
