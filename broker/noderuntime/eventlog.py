"""A node's protocol events, appended to the run's shared `events.jsonl` (DESIGN section 7)."""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.common.jsonl import JsonlAppender


class EventLog:
    def __init__(self, path: Path, node: str, clock_ns: Callable[[], int] = time.monotonic_ns,
                 out: JsonlAppender | None = None) -> None:
        """`out`: an appender of `path` that other writers share and its owner closes (the
        simulation's nodes write one file from one process); by default one of its own."""
        self.out = out if out is not None else JsonlAppender(path)
        self._owns_out = out is None
        self.node = node
        self.clock_ns = clock_ns  # the host's one clock; the simulation's virtual one

    def record(self, kind: str, fields: dict[str, Any]) -> None:
        line = {"node": self.node, "time_ns": self.clock_ns(), "kind": kind}
        line.update(fields)
        self.out.write(line)

    def close(self) -> None:
        if self._owns_out:
            self.out.close()
