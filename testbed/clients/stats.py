"""The clients' live counters: each client process pushes its totals to the supervisor twice
a second over a ZeroMQ PUSH socket, and the supervisor's inbox keeps the latest per client
for the live display. Best effort on both sides: a busy supervisor misses a push, the next
one carries the totals."""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection
from typing import Protocol

import zmq

COUNTERS = ("sent", "acked", "failed", "info", "polled")


class Counts(Protocol):
    """What a client loop counts into (`testbed/clients/loops.py`)."""

    counts: dict[str, int]

    def maybe_push(self, force: bool = False) -> None: ...


class Tally:
    """Counters kept and never pushed: a client with no live display (the simulation's)."""

    def __init__(self) -> None:
        self.counts = {k: 0 for k in COUNTERS}

    def maybe_push(self, force: bool = False) -> None:
        """Nobody listens."""


class Stats:
    """A client's side: its counters and the socket it pushes them on."""

    def __init__(self, endpoint: str | None, process: str) -> None:
        self.counts = {k: 0 for k in COUNTERS}
        self.process = process
        self.sock = None
        if endpoint:
            self.sock = zmq.Context.instance().socket(zmq.PUSH)
            self.sock.setsockopt(zmq.LINGER, 0)
            self.sock.setsockopt(zmq.SNDHWM, 10)
            self.sock.connect(endpoint)
        self.next_push = 0.0

    def maybe_push(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.sock is not None and (force or now >= self.next_push):
            self.next_push = now + 0.5
            try:
                self.sock.send_json({"process": self.process, **self.counts}, zmq.NOBLOCK)
            except zmq.Again:
                pass  # the supervisor is busy: the next push carries the totals

    def close(self) -> None:
        self.maybe_push(force=True)
        if self.sock is not None:
            self.sock.close(linger=200)


class StatsInbox:
    """The supervisor's side: the PULL socket the clients push to."""

    def __init__(self, endpoint: str) -> None:
        self.sock = zmq.Context.instance().socket(zmq.PULL)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(endpoint)
        #: the bound endpoint (a tcp port 0 becomes the port the kernel chose)
        self.endpoint = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.latest: dict[str, dict] = {}

    def drain(self) -> None:
        while True:
            try:
                msg = self.sock.recv_json(zmq.NOBLOCK)
            except zmq.Again:
                return
            except ValueError:
                continue  # not JSON: ignore, a client only ever sends JSON
            if isinstance(msg, dict) and "process" in msg:
                self.latest[str(msg["process"])] = msg

    def wait_for(self, names: Collection[str], timeout: float,
                 exited: Callable[[], Collection[str]] = frozenset) -> list[str]:
        """Wait until every client of `names` has pushed (it runs: its imports made, its
        sockets open), has exited, or `timeout` s have passed; returns those that did neither.
        A client process takes 0.2 s to start on an idle machine and 4 s on a loaded one."""
        deadline = time.monotonic() + timeout
        while True:
            self.drain()
            missing = [n for n in names if n not in self.latest and n not in exited()]
            if not missing or (left := deadline - time.monotonic()) <= 0:
                return missing
            self.sock.poll(min(50, int(left * 1000) + 1))

    def totals(self) -> Counter:
        c: Counter = Counter()
        for m in self.latest.values():
            for k in COUNTERS:
                c[k] += int(m.get(k, 0))
        return c

    def close(self) -> None:
        self.sock.close(linger=0)
