"""JSON Lines files, the one way isrlab writes and reads them.

Every record file of a run (history, events, faults, metrics, the final logs) and every
node's own logs of JSON (the metadata log and its broker copies) is one JSON object (or
array) a line. Writers append through their own O_APPEND descriptor with one `write` per
call, so lines of several processes never interleave and a SIGKILLed writer leaves every
line whose `write` returned (the page cache survives SIGKILL). The only damage a reader
can meet is a line cut short by a killed writer; `read_jsonl` says what to do with it.
A simulated seed, whose writers are all in one process, buffers its history and events
(`JsonlBuffer`): a seed cut short is never judged.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

#: one line each; a mapping keyed by numbers (a topic's `assignment: {0: [1, 2, 3]}` in a
#: create-topic fault's parameters) is written with its keys as strings, as JSON must
_OPTIONS = orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS


class JsonlAppender:
    """Appends JSON lines to one file, creating it (and its directory) if needed."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, obj: Any) -> None:
        os.write(self.fd, orjson.dumps(obj, option=_OPTIONS))

    def write_many(self, objs: list[Any]) -> None:
        if objs:
            os.write(self.fd, b"".join(orjson.dumps(o, option=_OPTIONS) for o in objs))

    def write_lines(self, data: bytes) -> None:
        """Lines already serialised, each ending in a newline, in one `write`."""
        if data:
            os.write(self.fd, data)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


class JsonlBuffer(JsonlAppender):
    """The same lines as `JsonlAppender`, held in memory and written a megabyte at a time.

    For a file that a single process alone writes and nothing reads before it is closed: the
    simulation's history and events, which every client and node of a seed writes in one
    process, in one order, sharing one buffer per file. A `write` per batch was 1,500 system
    calls a quickstart seed. Lines not yet written are lost if the process dies first, which
    a record file of a run of processes must never risk (module docstring): not for those."""

    #: pending bytes that are written at once
    LIMIT = 1 << 20

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self._parts: list[bytes] = []
        self._size = 0

    def write(self, obj: Any) -> None:
        self._add(orjson.dumps(obj, option=_OPTIONS))

    def write_many(self, objs: list[Any]) -> None:
        if objs:
            self._add(b"".join(orjson.dumps(o, option=_OPTIONS) for o in objs))

    def write_lines(self, data: bytes) -> None:
        if data:
            self._add(data)

    def _add(self, data: bytes) -> None:
        self._parts.append(data)
        self._size += len(data)
        if self._size >= self.LIMIT:
            self.flush()

    def flush(self) -> None:
        """Write every pending line (a regular file may take a short write: until all is)."""
        view = memoryview(b"".join(self._parts))
        self._parts, self._size = [], 0
        while view:
            view = view[os.write(self.fd, view):]

    def close(self) -> None:
        if self.fd >= 0:
            self.flush()
        super().close()


def read_jsonl(path: Path, prefix_only: bool = False) -> list[Any]:
    """Every line of `path` that parses; [] when the file does not exist.

    A file many processes append to (history, events) can hold a torn line of a killed
    writer with good lines of others after it: those are kept (`prefix_only=False`). A log
    with one writer (the metadata log, a broker's copy of it) is trusted only up to its
    first torn line (`prefix_only=True`): what follows is not known to have been written
    in order, and is fetched or rebuilt instead.
    """
    out: list[Any] = []
    if not path.exists():
        return out
    for line in path.read_bytes().splitlines():
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            if prefix_only:
                break
    return out
