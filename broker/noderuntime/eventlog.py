"""Appends a node's protocol events to the run's shared `events.jsonl`.

Every process of a run appends to one file through its own O_APPEND descriptor, one
`write` per line, so lines never interleave and a SIGKILLed node leaves every line whose
write returned (the page cache survives SIGKILL).
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import orjson


class JsonlAppender:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, obj: dict) -> None:
        os.write(self.fd, orjson.dumps(obj, option=orjson.OPT_APPEND_NEWLINE))

    def write_many(self, objs: list[dict]) -> None:
        if objs:
            os.write(self.fd, b"".join(orjson.dumps(o, option=orjson.OPT_APPEND_NEWLINE) for o in objs))

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class EventLog(JsonlAppender):
    def __init__(self, path: Path, node: str) -> None:
        super().__init__(path)
        self.node = node

    def record(self, kind: str, fields: dict[str, Any]) -> None:
        line = {"node": self.node, "time_ns": time.monotonic_ns(), "kind": kind}
        line.update(fields)
        self.write(line)
