"""The faults that fall due while a simulated controlled shutdown waits fire at their own
times, as from the process cluster's wait (README: a seed's schedule fires at the same
times on both). Found by a tester: a paused broker's shutdown at 1.5 s waits for a node
that cannot exit; the kill due at 3 s fired at 3.017 s on processes, and at 8.001 s (the
workload's end, where the wait gave up) in the sim."""
from __future__ import annotations

from pathlib import Path

from broker.common.jsonl import read_jsonl
from testbed.sim.run import run_seed
from testbed.topology import parse_topology
from tests.unit.host_clock import host_clock_forbidden

RECORD_FILES = ("topology.yaml", "history.jsonl", "events.jsonl", "faults.jsonl", "final/logs.jsonl",
                "final/replicas.jsonl", "summary.json")

PAUSED_SHUTDOWN = {
    "name": "paused-shutdown", "seed": 1, "duration": "8s",
    "cluster": {"controllers": 1, "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]},
    "topics": [{"name": "orders", "partitions": 6, "replication_factor": 3, "min_insync_replicas": 2,
                "placement": "rack-aware"}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "200/s", "batch": 10}]},
    "faults": [{"at": "1s", "do": "pause", "target": "broker:1"},
               {"at": "1500ms", "do": "shutdown", "target": "broker:1"},
               {"at": "3s", "do": "kill", "target": "broker:2"},
               {"at": "4s", "do": "restart"},
               {"at": "5s", "do": "resume"}],
    "expect": {"lost_writes": 0},
}


def _fired(run_dir: Path) -> dict[tuple[str, str], tuple[float, list[str], dict]]:
    """(origin, phase) -> (seconds after the first fault's start, resolved, effect)."""
    records = read_jsonl(run_dir / "faults.jsonl")
    first = records[0]["time_ns"]  # the pause, at 1 s
    return {(r["origin"], r["phase"]): ((r["time_ns"] - first) / 1e9 + 1.0, r["resolved"], r["effect"])
            for r in records}


def test_a_fault_due_while_a_shutdown_waits_fires_at_its_own_time(tmp_path: Path) -> None:
    topology = parse_topology(PAUSED_SHUTDOWN, "paused-shutdown")
    with host_clock_forbidden():
        outcome = run_seed(topology, tmp_path / "a")
    assert outcome.error is None
    fired = _fired(tmp_path / "a")
    assert fired["faults[2]", "start"][:2] == (3.0, ["broker-2"]), "the kill did not fire at 3 s, inside the wait"
    assert fired["faults[2]", "end"][2] == {"killed": {"broker-2": 1}}
    # the paused broker cannot exit: its shutdown gives up at the workload's end, 8 s, and is killed
    assert fired["faults[1]", "end"][0] == 8.0
    assert fired["faults[1]", "end"][2]["clean"] == {"broker-1": False}
    # the restart of the node shutting down waits for the shutdown, then restarts it; the resume
    # after it finds nothing paused (the process the restart started was never paused)
    assert fired["faults[3]", "end"][1:] == (["broker-1", "broker-2"], {"restarted": {"broker-1": 2, "broker-2": 2}})
    assert fired["faults[4]", "end"][1:] == ([], {"resumed": {}})

    assert run_seed(topology, tmp_path / "b").error is None
    for name in RECORD_FILES:  # the seed replays to the byte
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
