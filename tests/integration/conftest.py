"""Real clusters for integration tests.

Every wait is a condition with a deadline; deadlines and protocol timeouts scale with
ISRLAB_TIME_SCALE (default 3: a 2-core CI machine runs several clusters at once under
pytest-xdist).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Iterator

import pytest

from broker.common.jsonl import read_jsonl
from testbed.supervisor.cluster import Cluster
from testbed.topology import parse_topology

TIME_SCALE = float(os.environ.get("ISRLAB_TIME_SCALE", "3"))


def topology_dict(partitions: int = 2, brokers: int = 3, min_isr: int = 2, **overrides: object) -> dict:
    d = {
        "name": "itest", "seed": 3, "duration": "5s",
        "timing": {"heartbeat_interval": "100ms", "session_timeout": "800ms", "replica_lag_max": "1s",
                   "fetch_max_wait": "50ms"},
        "cluster": {"controllers": 1, "brokers": [{"id": i, "rack": "abc"[(i - 1) % 3]} for i in range(1, brokers + 1)]},
        "topics": [{"name": "orders", "partitions": partitions, "replication_factor": min(3, brokers),
                    "min_insync_replicas": min_isr, "flush": {"messages": 1000, "interval": "1s"}}],
        "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "100/s", "batch": 5}],
                     "consumers": [{"count": 1, "topic": "orders"}]},
    }
    d.update(overrides)
    return d


def committed_duplicates(run_dir: Path) -> int:
    """Values at more than one place of the final committed logs, read from the run's own
    files apart from Spark: each final leader's records below its HWM. A producer without
    idempotence appends a value twice when it retries a send that timed out after the
    append (Kafka does the same), so a run with a leader killed under load may have some."""
    replicas = read_jsonl(run_dir / "final/replicas.jsonl")
    hwm = {(r["node"], r["topic"], r["partition"]): r["hwm"] for r in replicas if r["is_leader"]}
    placed: dict[str, set] = {}
    for rec in read_jsonl(run_dir / "final/logs.jsonl"):
        key = (rec["node"], rec["topic"], rec["partition"])
        if key in hwm and rec["offset"] < hwm[key]:
            placed.setdefault(rec["value"], set()).add(key[1:] + (rec["offset"],))
    return sum(len(at) > 1 for at in placed.values())


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator:
    made: list[Cluster] = []

    def make(**kw: object) -> Cluster:
        c = Cluster(parse_topology(topology_dict(**kw), "test"), run_dir=tmp_path / f"run{len(made)}",
                    runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
        made.append(c)
        c.start()
        return c

    yield make
    for c in made:
        c.close()
