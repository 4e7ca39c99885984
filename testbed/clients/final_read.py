"""The final read (DESIGN section 7): after convergence, every partition read through its
leader from offset 0 to its HWM and recorded as polls of process `final-reader`."""
from __future__ import annotations

import time
from typing import Callable

from broker.client import ClusterClient
from broker.common.errors import Errors
from testbed.clients.history import History


def final_read(client: ClusterClient, history: History, partitions: list[tuple[str, int]],
               deadline_s: float, now_fn: Callable[[], float]) -> dict[tuple[str, int], bool]:
    """Read every partition from offset 0 to its leader's HWM, as process `final-reader`.

    Returns, per partition, whether the read reached the end of the committed log; a
    partition that could not be read to its end makes missing values `unseen`, not lost.
    """
    complete: dict[tuple[str, int], bool] = {}
    for topic, p in partitions:
        offset, done = 0, False
        while now_fn() < deadline_s:
            invoked = time.monotonic_ns()
            r = client.fetch(topic, p, offset, max_wait=0)
            if r.error != Errors.NONE:
                time.sleep(0.05)  # retry pacing while the partition has no reachable leader
                client.refresh_metadata([topic])
                continue
            if r.records:
                history.poll(topic, p, offset, invoked, r.records)
                offset = r.records[-1][0] + 1
            if offset >= r.high_watermark:
                done = True
                break
        complete[(topic, p)] = done
    return complete
