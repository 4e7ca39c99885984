"""R35: a reassignment the controller accepted is recorded without an `error` in its effect
(an effect with one is a fault that failed, DESIGN section 6; a tester's accepted reassign
read `"error": "NONE"`), and a refused one with the controller's error and reason. Run in
the sim, whose admin code is the processes' (`testbed/supervisor/admin.py`)."""
from __future__ import annotations

from pathlib import Path

from broker.common.jsonl import read_jsonl
from testbed.sim.run import run_seed
from testbed.topology import parse_topology

TOPOLOGY = {
    "name": "reassign-effect", "seed": 1, "duration": "3s",
    "cluster": {"controllers": 1, "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"},
                                              {"id": 3, "rack": "c"}, {"id": 4, "rack": "d"}]},
    "topics": [{"name": "t", "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2,
                "placement": "explicit", "assignment": {0: [1, 2, 3]}}],
    "workload": {"producers": [{"count": 1, "topic": "t", "acks": "all", "rate": "50/s"}]},
    "faults": [{"at": "1s", "do": "reassign", "partition": "t/0", "replicas": [4, 1, 2]},
               {"at": "1s", "do": "reassign", "partition": "t/0", "replicas": [1, 2, 3]}],
}


def test_r35_an_accepted_reassignment_has_no_error_and_a_refused_one_says_why(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    outcome = run_seed(parse_topology(TOPOLOGY, "reassign-effect"), run_dir)
    assert outcome.error is None and outcome.converged
    accepted, refused = [r["effect"] for r in read_jsonl(run_dir / "faults.jsonl")
                         if r["do"] == "reassign" and r["phase"] == "end"]
    assert accepted == {"accepted": True, "message": "t/0: [1, 2, 3] -> [4, 1, 2]"}
    # the second, while the first is under way: one reassignment of a partition at a time (R35)
    assert refused == {"accepted": False, "error": "REASSIGNMENT_IN_PROGRESS: t/0 is moving to [4, 1, 2]",
                       "message": "t/0 is moving to [4, 1, 2]"}
