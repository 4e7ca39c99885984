"""Virtual time: one heap of timed callbacks, run in (time, order of scheduling) order.

Nothing in a simulation reads the host's clock: every `now` a role, a client, the fault
injector or a record sees is `Loop.clock()`, which moves only when the next event is
taken off the heap. Two events at the same instant run in the order they were scheduled,
so a seed replays to the byte.
"""
from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from typing import Any

#: virtual time starts here (seconds), so that no timestamp of a run is 0
EPOCH = 1000.0


class Loop:
    def __init__(self) -> None:
        self.now = EPOCH
        self._heap: list[tuple[float, int, Callable[..., Any], tuple]] = []
        self._order = itertools.count()

    def clock(self) -> float:
        return self.now

    def clock_ns(self) -> int:
        return int(round(self.now * 1e9))

    def at(self, when: float, fn: Callable[..., Any], *args: Any) -> None:
        now = self.now  # (a comparison, not max(), which parses keyword arguments on Python 3.11)
        heapq.heappush(self._heap, (now if now > when else when, next(self._order), fn, args))

    def after(self, delay: float, fn: Callable[..., Any], *args: Any) -> None:
        self.at(self.now + delay, fn, *args)

    def run_until(self, deadline: float, done: Callable[[], bool] | None = None, poll: float = 0.01) -> bool:
        """Run events up to `deadline` (virtual seconds), or until `done()` holds, asked
        every `poll` seconds of virtual time as a supervisor polls; then the clock stands
        at the deadline, or where `done` held. Returns whether `done` held (True without).
        This is the simulation's innermost loop: it takes each event off the heap itself."""
        heap, pop = self._heap, heapq.heappop
        if done is None:  # the loop below with nothing to ask: the workload's run, most events
            while heap and not heap[0][0] > deadline:
                when, _, fn, args = pop(heap)
                self.now = when
                fn(*args)
            self.now = max(self.now, deadline)
            return True
        next_check = self.now
        while True:
            if self.now >= next_check:
                if done():
                    return True
                next_check = self.now + poll
            nxt = heap[0][0] if heap else None
            if nxt is None or nxt > deadline:
                self.now = max(self.now, deadline)
                return done()
            if poll > 0 and nxt > next_check:
                self.at(next_check, _nothing)  # wake up to ask again at the poll's time
            when, _, fn, args = pop(heap)  # the next event, in (time, order of scheduling) order
            self.now = when
            fn(*args)


def _nothing() -> None:
    """An event that only moves the clock (a poll's wake-up)."""
