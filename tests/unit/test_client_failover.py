"""How soon a producer writes again after its partition's leader is SIGKILLed, on virtual
time (the simulation carries the workload's real loops and the clients' fail-fast
connections; `broker/wire/transport.py`, `testbed/sim/network.py`).

A Kafka producer whose leader dies sees the connection reset, asks for metadata, and sends
the batch to the new leader once the controller has elected one. Before the clients failed
fast, the batch in flight waited out the 2 s request timeout (the producer's longest gap
between acks: 2.5 s), and a retry then went to the leader known at the failure, not at the
retry (1.2 s)."""
from __future__ import annotations

from pathlib import Path

from broker.common.jsonl import read_jsonl
from testbed.sim.run import run_seed
from testbed.supervisor.client_configs import RETRY_BACKOFF
from testbed.topology import parse_topology

KILL_AT = 2.0
TOPOLOGY = {
    "name": "kill-leader-failover", "seed": 0, "duration": "5s",
    "cluster": {"controllers": 1, "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]},
    "topics": [{"name": "orders", "partitions": 3, "replication_factor": 3, "min_insync_replicas": 2}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "200/s", "batch": 5,
                                "partitions": [0]}]},
    "faults": [{"at": f"{KILL_AT}s", "do": "kill", "target": "leader-of orders/0"}],
}


def test_a_producer_writes_to_the_new_leader_within_one_retry_of_its_election(tmp_path: Path) -> None:
    """The send in flight to the killed leader completes at once as `info`, and the
    producer's acks resume within one retry backoff (at most 8 x `retry_backoff`) of the
    controller's election of a new leader."""
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(TOPOLOGY, "kill-leader-failover"), run)
    assert outcome.error is None and outcome.converged
    kill = next(f for f in read_jsonl(run / "faults.jsonl") if f["do"] == "kill")["time_ns"]
    elected = min(e["time_ns"] for e in read_jsonl(run / "events.jsonl")
                  if e["kind"] == "partition-changed" and e.get("partition") == 0 and e["time_ns"] > kill
                  and e.get("leader", -1) >= 0)
    sends = [op for op in read_jsonl(run / "history.jsonl") if op["f"] == "send" and op["time_ns"] > kill]
    first_info = min(op["time_ns"] for op in sends if op["type"] == "info")
    first_ack = min(op["time_ns"] for op in sends if op["type"] == "ok")
    assert first_info - kill < 0.01e9, "the send in flight failed when the connection closed, not at its timeout"
    assert elected < first_ack <= elected + (8 * RETRY_BACKOFF + 0.05) * 1e9, \
        f"acks resumed {(first_ack - elected) / 1e9:.3f} s after the election"
