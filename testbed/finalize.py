"""The end of a run: the final read through the leaders, and the final state of every
replica read straight from the files (DESIGN section 7, `final/`)."""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from broker.client import ClusterClient
from broker.common.errors import Errors
from broker.common.jsonl import JsonlAppender
from broker.storage.layout import partition_dirs
from broker.storage.log import read_partition_dir
from testbed.history import History
from testbed.status import ClusterStatus


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


def write_replicas(path: Path, status: ClusterStatus) -> int:
    out = JsonlAppender(path)
    lines = [{"node": f"broker-{r.broker}", "topic": r.topic, "partition": r.partition, "leo": r.leo,
              "hwm": r.hwm, "leader_epoch": r.leader_epoch, "is_leader": r.role == "leader"}
             for r in sorted(status.replicas(), key=lambda r: (r.topic, r.partition, r.broker))]
    out.write_many(lines)
    out.close()
    return len(lines)


def write_logs(path: Path, data_dirs: dict[str, Path]) -> int:
    """Every record of every replica, read from the segment files without opening a log."""
    out = JsonlAppender(path)
    n = 0
    for node, data_dir in sorted(data_dirs.items()):
        for topic, partition, d in partition_dirs(data_dir):
            lines = [{"node": node, "topic": topic, "partition": partition, "offset": o,
                      "leader_epoch": e, "value": v.decode("utf-8", "replace")}
                     for o, e, v in read_partition_dir(d)]
            out.write_many(lines)
            n += len(lines)
    out.close()
    return n
