"""Virtual time never reads the wall clock (issue 13): a simulated seed run inside
`host_clock_forbidden` fails at its first look at the host's clock."""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

#: every `time` function a simulation could read the host's clock or wait on it with
CLOCK_FUNCTIONS = ("time", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time_ns", "sleep")


def _wall_clock(*_: object) -> float:
    raise AssertionError("the simulation read the host's clock")


@contextmanager
def host_clock_forbidden() -> Iterator[None]:
    """Every function of `CLOCK_FUNCTIONS` raises inside the block."""
    with pytest.MonkeyPatch.context() as patch:
        for name in CLOCK_FUNCTIONS:
            patch.setattr(time, name, _wall_clock)
        yield
