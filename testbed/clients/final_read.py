"""The final read (DESIGN section 7) of a run of processes: the loop of `loops.final_read`
carried out on the host's clock."""
from __future__ import annotations

import time
from typing import Callable

from broker.client import ClusterClient
from testbed.clients.history import History
from testbed.clients.loops import Clock
from testbed.clients.loops import final_read as final_read_steps


def final_read(client: ClusterClient, history: History, partitions: list[tuple[str, int]],
               deadline_s: float, now_fn: Callable[[], float]) -> dict[tuple[str, int], bool]:
    """Read every partition from offset 0 to its leader's HWM, as process `final-reader`;
    per partition, whether the read reached the end of the committed log."""
    return client.run(final_read_steps(client.steps, history, partitions, deadline_s, Clock(now_fn, time.monotonic_ns)))
