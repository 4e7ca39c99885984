"""Client operations as Jepsen-style history records (DESIGN section 7).

One operation per record value: a batch of 10 values is 10 `invoke` lines and 10
completions that share their times. Lines are appended with one `write` per batch to the
run's shared `history.jsonl` (O_APPEND), so processes never interleave inside a line and a
killed process leaves every line it wrote.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from broker.common.errors import DEFINITE_PRODUCE_FAILURES, Errors
from broker.common.jsonl import JsonlAppender


#: How an error is written in history.jsonl where its name differs from the protocol's: DESIGN
#: section 7 writes a client's request timeout as "TIMEOUT" (the protocol's REQUEST_TIMED_OUT)
HISTORY_ERROR = {Errors.REQUEST_TIMED_OUT: "TIMEOUT"}


def completion_type(error: Errors, appended: bool) -> str:
    """ok, fail (the record was certainly not appended) or info (outcome unknown)."""
    if error == Errors.NONE:
        return "ok"
    if error in DEFINITE_PRODUCE_FAILURES and not appended:
        return "fail"
    return "info"


class History:
    def __init__(self, path: Path, process: str, clock_ns: Callable[[], int] = time.monotonic_ns,
                 observe: Callable[[list[dict[str, Any]]], None] | None = None,
                 out: JsonlAppender | None = None) -> None:
        """`observe` sees every record as it is written: the simulation, whose clients all
        write from one process, counts them there instead of reading the file back. `out`: an
        appender of `path` that other writers share and its owner closes (the simulation's
        clients write one buffer); by default one of its own."""
        self.out = out if out is not None else JsonlAppender(path)
        self._owns_out = out is None
        self.process = process
        self.clock_ns = clock_ns  # the host's one clock; the simulation's virtual one
        self.observe = observe

    def _write(self, records: list[dict[str, Any]]) -> None:
        self.out.write_many(records)
        if self.observe is not None:
            self.observe(records)

    def send_invoke(self, topic: str, partition: int, values: list[str], acks: str) -> int:
        t = self.clock_ns()
        self._write([
            {"process": self.process, "type": "invoke", "f": "send", "topic": topic,
             "partition": partition, "value": v, "acks": acks, "time_ns": t} for v in values])
        return t

    def send_complete(self, topic: str, partition: int, values: list[str], acks: str,
                      error: Errors, base_offset: int, appended: bool) -> str:
        t = self.clock_ns()
        kind = completion_type(error, appended)
        lines = []
        for i, v in enumerate(values):
            line = {"process": self.process, "type": kind, "f": "send", "topic": topic,
                    "partition": partition, "value": v, "acks": acks}
            if kind == "ok" and base_offset >= 0:
                line["offset"] = base_offset + i
            elif kind != "ok":
                line["error"] = HISTORY_ERROR.get(error, error.value)
            line["time_ns"] = t
            lines.append(line)
        self._write(lines)
        return kind

    def poll(self, topic: str, partition: int, offset: int, invoked_ns: int,
             records: list[tuple[int, str]]) -> None:
        t = self.clock_ns()
        self._write([
            {"process": self.process, "type": "invoke", "f": "poll", "topic": topic,
             "partition": partition, "offset": offset, "time_ns": invoked_ns},
            {"process": self.process, "type": "ok", "f": "poll", "topic": topic,
             "partition": partition, "records": [[o, v] for o, v in records], "time_ns": t},
        ])

    def close(self) -> None:
        if self._owns_out:
            self.out.close()
