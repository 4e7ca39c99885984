"""A node's protocol events, appended to the run's shared `events.jsonl` (DESIGN section 7)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from broker.common.jsonl import JsonlAppender


class EventLog(JsonlAppender):
    def __init__(self, path: Path, node: str) -> None:
        super().__init__(path)
        self.node = node

    def record(self, kind: str, fields: dict[str, Any]) -> None:
        line = {"node": self.node, "time_ns": time.monotonic_ns(), "kind": kind}
        line.update(fields)
        self.write(line)
