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

import orjson

from broker.common.errors import DEFINITE_PRODUCE_FAILURES, Errors
from broker.common.jsonl import JsonlAppender


#: How an error is written in history.jsonl where its name differs from the protocol's: DESIGN
#: section 7 writes a client's request timeout as "TIMEOUT" (the protocol's REQUEST_TIMED_OUT)
HISTORY_ERROR = {Errors.REQUEST_TIMED_OUT: "TIMEOUT"}


def _literal(part: bytes) -> bytes:
    """`part` as it must stand in a format to come out as itself (a `%` in a name or a value)."""
    return part.replace(b"%", b"%%")


def completion_type(error: Errors, appended: bool) -> str:
    """ok, fail (the record was certainly not appended) or info (outcome unknown)."""
    if error == Errors.NONE:
        return "ok"
    if error in DEFINITE_PRODUCE_FAILURES and not appended:
        return "fail"
    return "info"


class History:
    def __init__(self, path: Path, process: str, clock_ns: Callable[[], int] = time.monotonic_ns,
                 observe: Callable[[str, str, int, str | None], None] | None = None,
                 out: JsonlAppender | None = None) -> None:
        """`observe(f, type, records, acks)` sees every group of records of one kind as it is
        written: the simulation, whose clients all write from one process, counts them there
        instead of reading the file back. `out`: an appender of `path` that other writers
        share and its owner closes (the simulation's clients write one buffer); by default one
        of its own."""
        self.out = out if out is not None else JsonlAppender(path)
        self._owns_out = out is None
        self.process = process
        self.clock_ns = clock_ns  # the host's one clock; the simulation's virtual one
        self.observe = observe
        #: the literal part of a send record before its value, by (type, topic, partition)
        self._leads: dict[tuple[str, str, int], bytes] = {}

    def _sends(self, kind: str, topic: str, partition: int, values: list[str], acks: str,
               tail: bytes, base_offset: int | None = None) -> None:
        """One send record a value, as `JsonlAppender` writes the dict of `send_invoke` or
        `send_complete`: the part before the value made once, then each value and its tail
        (what follows the value: the same bytes for every value, but the offset of each,
        `base_offset` + i, where `tail` holds a `%d`). The lines are one format of the values
        (and offsets) in a row: a dict and its serialisation per value were most of a
        simulated client's time (10 values a batch), and a format and a generator step per
        value most of what was left."""
        lead = self._leads.get((kind, topic, partition))
        if lead is None:  # (the same for every send of one kind to one partition: made once)
            head = orjson.dumps({"process": self.process, "type": kind, "f": "send", "topic": topic,
                                 "partition": partition})[:-1] + b',"value":'
            lead = self._leads[(kind, topic, partition)] = _literal(head) + b"%s"
        n = len(values)
        if base_offset is None:
            fields: tuple = tuple(map(orjson.dumps, values))
        else:
            parts: list = [None] * (2 * n)
            parts[0::2] = map(orjson.dumps, values)
            parts[1::2] = range(base_offset, base_offset + n)
            fields = tuple(parts)
        self.out.write_lines((lead + tail) * n % fields)
        if self.observe is not None:
            self.observe("send", kind, len(values), acks)

    def send_invoke(self, topic: str, partition: int, values: list[str], acks: str) -> int:
        t = self.clock_ns()
        self._sends("invoke", topic, partition, values, acks,
                    _literal(b',"acks":%s,"time_ns":%d}\n' % (orjson.dumps(acks), t)))
        return t

    def send_complete(self, topic: str, partition: int, values: list[str], acks: str,
                      error: Errors, base_offset: int, appended: bool, node: int = -1) -> str:
        """`node`: the broker that acknowledged, written on an `ok` record as its events name
        it: which making of a topic deleted and made again took the write (R40) follows from
        that broker's own deletions, not from the time."""
        t = self.clock_ns()
        kind = completion_type(error, appended)
        acks_json = orjson.dumps(acks)
        served = b',"node":"broker-%d"' % node if node >= 0 else b""
        if kind == "ok" and base_offset >= 0:
            self._sends(kind, topic, partition, values, acks,
                        _literal(b',"acks":%s,"offset":' % acks_json) + b'%d'
                        + _literal(served + b',"time_ns":%d}\n' % t), base_offset)
        elif kind != "ok":
            self._sends(kind, topic, partition, values, acks, _literal(
                b',"acks":%s,"error":%s,"time_ns":%d}\n'
                % (acks_json, orjson.dumps(HISTORY_ERROR.get(error, error.value)), t)))
        else:
            self._sends(kind, topic, partition, values, acks,
                        _literal(b',"acks":%s%s,"time_ns":%d}\n' % (acks_json, served, t)))
        return kind

    def poll(self, topic: str, partition: int, offset: int, invoked_ns: int,
             records: list[tuple[int, str]], node: int = -1) -> None:
        """The poll's records go as they are: orjson writes a tuple as the array a list makes,
        without a list made per record (the quickstart's consumer reads 12,000 a seed).
        `node`: the broker that answered, as on an acknowledged send."""
        t = self.clock_ns()
        done: dict = {"process": self.process, "type": "ok", "f": "poll", "topic": topic,
                      "partition": partition, "records": records}
        if node >= 0:
            done["node"] = f"broker-{node}"
        done["time_ns"] = t
        self.out.write_many([
            {"process": self.process, "type": "invoke", "f": "poll", "topic": topic,
             "partition": partition, "offset": offset, "time_ns": invoked_ns},
            done,
        ])
        if self.observe is not None:
            self.observe("poll", "invoke", 1, None)
            self.observe("poll", "ok", 1, None)

    def close(self) -> None:
        if self._owns_out:
            self.out.close()
