"""The subprocesses a command's worker threads run (a matrix's cells, a sweep's workers),
stopped when the command is interrupted.

Ctrl-C and SIGTERM reach the command as a KeyboardInterrupt in its main thread only, and a
thread pool's exit waits for every thread it ran: a matrix sent SIGTERM went on starting
cells to its last. Ctrl-C from a terminal also reaches the children (one process group);
SIGTERM from a CI job's timeout, or `kill`, reaches the command alone, so it passes SIGTERM
on: each child stops what it started, as on Ctrl-C, and its thread returns.
"""
from __future__ import annotations

import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any


class Children:
    """Start the children through `started`, and the main thread calls `stop` on its way out
    of an interrupt."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: set[subprocess.Popen] = set()
        self._stopping = False

    @contextmanager
    def started(self, command: Sequence[str], **kwargs: Any) -> Iterator[subprocess.Popen | None]:
        """The child started, for the block's length, or None once the command is stopping (a
        thread that took its next cell as the interrupt came starts none)."""
        with self._lock:
            proc = None if self._stopping else subprocess.Popen(command, **kwargs)
            if proc is not None:
                self._running.add(proc)
        try:
            yield proc
        finally:
            if proc is not None:
                with self._lock:
                    self._running.discard(proc)

    def stop(self) -> None:
        """SIGTERM to every child running; none starts after."""
        with self._lock:
            self._stopping = True
            for proc in self._running:
                proc.send_signal(signal.SIGTERM)  # nothing, for a child that has exited
