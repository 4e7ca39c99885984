"""Log recovery at restart with real processes: a torn or corrupted tail is cut at the first
bad batch (DESIGN section 4, R4) and the replica catches up from the leader again."""
from __future__ import annotations

import os

import pytest

from broker.common.jsonl import read_jsonl
from tests.integration.test_replication import committed_logs, produce_n

pytestmark = pytest.mark.integration


def _segment(c, broker: int) -> str:
    d = c.dir.data_dir(f"broker-{broker}") / "orders-0"
    segs = sorted(p for p in os.listdir(d) if p.endswith(".log"))
    return str(d / segs[-1])


@pytest.mark.parametrize("damage", ["flip", "cut"])
def test_restart_recovers_from_damaged_tail(make_cluster, damage: str) -> None:
    # No flush during the test: the recovery point stays at 0, so recovery checks every batch.
    c = make_cluster(partitions=1, topics=[{"name": "orders", "partitions": 1, "replication_factor": 3,
                                            "min_insync_replicas": 2, "flush": {"messages": 1000000}}])
    acked = produce_n(c, 0, 30, "r", batch=3)
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(10), what="replicas level")
    status = c.status()
    p = status.partition("orders", 0)
    victim = next(b for b in p.replicas if b != p.leader)
    leo = status.replica(victim, "orders", 0).leo
    c.kill(f"broker-{victim}")
    path = _segment(c, victim)
    size = os.path.getsize(path)
    with open(path, "r+b") as f:
        if damage == "flip":
            f.seek(size - 3)
            b = f.read(1)
            f.seek(size - 3)
            f.write(bytes([b[0] ^ 0xFF]))
        else:
            f.truncate(size - 5)
    c.restart(f"broker-{victim}")
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(20), what="the damaged replica caught up")
    recovered = [e for e in read_jsonl(c.dir.events)
                 if e["kind"] == "recovered" and e["node"] == f"broker-{victim}" and e["topic"] == "orders"]
    assert recovered, "the restarted broker recorded no recovery"
    assert recovered[-1]["dropped_bytes"] > 0
    assert recovered[-1]["valid_to"] < leo
    logs = committed_logs(c, 0)
    assert all(logs[f"broker-{victim}"].get(o) == v for o, v in acked.items())
