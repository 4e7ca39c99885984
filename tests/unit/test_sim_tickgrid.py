"""The simulated node's tick grid (`testbed/sim/tickgrid.py`): the points a node process's
loop ticks on, TICK after TICK from the start or a resume, and the first of them from a
deadline on."""
from __future__ import annotations

import math

from testbed.sim.tickgrid import TickGrid


def _points(origin: float, step: float, n: int) -> list[float]:
    """What a process's loop ticks on: each tick sets the next one step after it."""
    out, t = [], origin
    for _ in range(n):
        t += step
        out.append(t)
    return out


def test_the_first_point_from_a_deadline_is_the_one_ticking_every_point_reaches():
    grid = TickGrid(1000.0, 0.005)
    points = _points(1000.0, 0.005, 400)
    for now, due in [(1000.0, -math.inf), (1000.001, 1000.1), (1000.1, 1000.1), (1000.3, 1000.31), (1001.0, 1001.5)]:
        assert grid.point_from(due, now) == min(p for p in points if p >= now and p >= due)
        assert grid.point_from(due, now) == min(p for p in points if p >= now and p >= due)  # asked again


def test_a_resume_starts_the_grid_again_and_a_pause_over_a_point_missed_a_tick():
    grid = TickGrid(1000.0, 0.005)
    assert grid.has_point_in(1000.001, 1000.007) and not grid.has_point_in(1000.006, 1000.009)
    grid.ticked(1000.2)
    assert grid.point_from(-math.inf, 1000.2001) == 1000.2 + 0.005


def test_no_point_falls_before_the_first_point_from_now():
    """What lets a node with a tick on that point skip asking its role (`SimNode._schedule_tick`)."""
    grid = TickGrid(1000.0, 0.005)
    points = _points(1000.0, 0.005, 400)
    for now in (1000.0, 1000.0049, 1000.005, 1000.3001, 1001.2):
        first = grid.first_point(now)
        assert first == min(p for p in points if p >= now)
        for due in (-math.inf, now, now + 0.0123):
            assert grid.point_from(due, now) >= first
