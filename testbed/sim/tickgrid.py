"""When a simulated node may tick: the grid of a node process's loop on virtual time.

`broker/node.py` ticks every `Node.TICK` from its start: each tick sets the next one TICK
after it, so the times are sums, TICK after TICK, and a process woken by SIGCONT after a
tick fell due ticks at once and every TICK from there. The simulated node ticks on the same
points, but only on those from its role's `next_tick_at` on; this keeps the points and
finds the first one at or after a deadline, adding TICK after TICK exactly as the process's
loop would, so that a simulated tick falls on the very float a ticked-every-point run used.
"""
from __future__ import annotations


class TickGrid:
    def __init__(self, origin: float, step: float) -> None:
        self.step = step
        self._next = origin + step  # the first point not passed yet
        self._memo: tuple[float, float, float] | None = None  # (first point, deadline, its point)

    def ticked(self, at: float) -> None:
        """A tick ran at `at` (a point, or a resume, where the grid starts again)."""
        self._next = at + self.step

    def first_point(self, now: float) -> float:
        """The first point at or after `now`: no tick can be scheduled sooner."""
        point = self._next
        while point < now:
            point += self.step
        self._next = point
        return point

    def point_from(self, due: float, now: float) -> float:
        """The first point at or after both `now` and `due` (points before `now` are past).
        Starts as `first_point(now)` does, written out: a node asks after most inputs."""
        point, step = self._next, self.step
        while point < now:
            point += step
        self._next = point
        if self._memo is not None and self._memo[0] == point and self._memo[1] == due:
            return self._memo[2]  # asked again with nothing changed, as after most inputs
        first = point
        while point < due:
            point += step
        self._memo = (first, due, point)
        return point

    def has_point_in(self, after: float, until: float) -> bool:
        """Whether a point falls in (after, until]: a tick fell due during a pause."""
        point = self._next
        while point <= after:
            point += self.step
        return point <= until
