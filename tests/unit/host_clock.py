"""Virtual time never reads the wall clock (issue 13): a simulated seed run inside
`host_clock_forbidden` fails at its first look at the host's clock.

Only the thread that runs the seed is forbidden the clock (a simulation is one thread): a
test worker's other threads, py4j's among them when the worker holds a Spark session,
sleep and read the clock as before. Patched for every thread, py4j's worker thread failed
in its `time.sleep` and pytest reported the exception as a warning of this test."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

#: every `time` function a simulation could read the host's clock or wait on it with
CLOCK_FUNCTIONS = ("time", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time_ns", "sleep")


def _forbidden_in(thread: int, real: Callable[..., Any]) -> Callable[..., Any]:
    def clock(*args: object) -> Any:
        if threading.get_ident() == thread:
            raise AssertionError("the simulation read the host's clock")
        return real(*args)
    return clock


@contextmanager
def host_clock_forbidden() -> Iterator[None]:
    """Every function of `CLOCK_FUNCTIONS` raises inside the block, in the calling thread."""
    me = threading.get_ident()
    with pytest.MonkeyPatch.context() as patch:
        for name in CLOCK_FUNCTIONS:
            patch.setattr(time, name, _forbidden_in(me, getattr(time, name)))
        yield
