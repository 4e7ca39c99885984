"""Live progress while a run works: client counters pushed by the workload processes and
the cluster's leaders and ISR sizes, redrawn twice a second with rich (plain lines when
the output is not a terminal, as in CI)."""
from __future__ import annotations

import time
from collections import Counter

import zmq
from rich.console import Console
from rich.live import Live
from rich.table import Table

from testbed.status import ClusterStatus


class StatsInbox:
    """The PULL socket the workload processes push their counters to."""

    def __init__(self, endpoint: str) -> None:
        self.sock = zmq.Context.instance().socket(zmq.PULL)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind(endpoint)
        self.endpoint = endpoint
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

    def totals(self) -> Counter:
        c: Counter = Counter()
        for m in self.latest.values():
            for k in ("sent", "acked", "failed", "info", "polled"):
                c[k] += int(m.get(k, 0))
        return c

    def close(self) -> None:
        self.sock.close(linger=0)


def render(elapsed: float, duration: float, totals: Counter, status: ClusterStatus | None) -> Table:
    t = Table(title=f"isrlab  {elapsed:5.1f}s / {duration:.0f}s", show_header=True, expand=False)
    for col in ("sent", "acked", "failed", "info", "polled", "leaders", "ISR sizes", "under-replicated"):
        t.add_column(col, justify="right")
    leaders, isr, under = "-", "-", "-"
    if status is not None and status.controller:
        parts = status.partitions()
        per_broker = Counter(p.leader for p in parts)
        leaders = " ".join(f"{'none' if b < 0 else 'b' + str(b)}:{n}" for b, n in sorted(per_broker.items()))
        sizes = Counter(len(p.isr) for p in parts)
        isr = " ".join(f"{k}x{n}" for k, n in sorted(sizes.items(), reverse=True))
        under = str(sum(1 for p in parts if len(p.isr) < len(p.replicas)))
    t.add_row(*(str(totals[k]) for k in ("sent", "acked", "failed", "info", "polled")), leaders, isr, under)
    return t


class Monitor:
    def __init__(self, console: Console, duration: float) -> None:
        self.console = console
        self.duration = duration
        self.start = time.monotonic()
        self.live: Live | None = None
        self.next_line = 0.0

    def __enter__(self) -> "Monitor":
        if self.console.is_terminal:
            self.live = Live(console=self.console, refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def update(self, totals: Counter, status: ClusterStatus | None) -> None:
        elapsed = time.monotonic() - self.start
        if self.live is not None:
            self.live.update(render(elapsed, self.duration, totals, status))
        elif time.monotonic() >= self.next_line:
            self.next_line = time.monotonic() + 2.0
            self.console.print(render(elapsed, self.duration, totals, status))

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)
