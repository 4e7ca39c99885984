"""What the supervisor says when a run does not converge: each partition that kept it from
converging, and why (a new user's `unclean_recovery: manual` run without an `elect` for one
of its partitions waited out the convergence with no word of which)."""
from __future__ import annotations

from pathlib import Path

from broker.common.jsonl import read_jsonl
from testbed.config.loader import load_topology
from testbed.experiment.final_state import partitions_now
from testbed.sim.run import run_seed
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.topology import parse_topology

QUICKSTART = Path(__file__).resolve().parents[2] / "topologies" / "quickstart.yaml"


def _partition(p: int, leader: int, isr: list[int], epoch: int = 3) -> dict:
    return {"topic": "pay", "partition": p, "leader": leader, "leader_epoch": epoch, "partition_epoch": 5,
            "replicas": [1, 2, 3], "isr": isr}


def _replica(p: int, role: str, leo: int, hwm: int, epoch: int = 3) -> dict:
    return {"topic": "pay", "partition": p, "role": role, "leader_epoch": epoch, "leo": leo, "hwm": hwm}


def test_each_partition_that_keeps_the_cluster_from_converging_is_named_with_why() -> None:
    status = ClusterStatus(
        controller={"node": "controller-1", "partitions": [
            _partition(4, 1, [1, 2, 3]),  # broker 3 behind
            _partition(0, 1, [1, 2, 3]),  # converged
            _partition(1, -1, []),  # no leader
            _partition(2, 2, [2, 3]),  # ISR short
            _partition(3, 3, [1, 2, 3], epoch=4),  # its leader has not taken epoch 4 yet
            _partition(5, 1, [1, 2, 3]),  # the leader's HWM behind
        ]},
        brokers={1: {"partitions": [_replica(0, "leader", 9, 9), _replica(4, "leader", 9, 9),
                                    _replica(5, "leader", 9, 7), _replica(2, "follower", 9, 9)]},
                 2: {"partitions": [_replica(0, "follower", 9, 9), _replica(4, "follower", 9, 9),
                                    _replica(5, "follower", 9, 7), _replica(2, "leader", 9, 9)]},
                 3: {"partitions": [_replica(0, "follower", 9, 9), _replica(4, "follower", 8, 8),
                                    _replica(5, "follower", 9, 7), _replica(3, "leader", 9, 9)]}},
    )
    assert not status.fully_replicated()
    assert status.unconverged() == [
        "pay/1: no leader (ISR [])",
        "pay/2: ISR [2, 3] of replicas [1, 2, 3]",
        "pay/3: broker 3 does not lead it at leader epoch 4 yet",
        "pay/4: broker 3 at LEO 8, the leader's 9",
        "pay/5: the leader's HWM 7 below its LEO 9",
    ]


def test_a_status_without_an_active_controller_says_so() -> None:
    assert ClusterStatus(None, {1: None}).unconverged() == ["no controller answered as active"]
    # every topic deleted (R40): nothing left to replicate
    assert ClusterStatus({"active": True, "partitions": []}, {1: {"partitions": []}}).unconverged() == []


def test_the_final_read_reads_no_topic_when_every_one_was_deleted() -> None:
    """R40: the active controller's partitions, none when every topic was deleted (the read
    of the topology's deleted topic waited out its 20 s); the topology's only when no
    controller answered as active."""
    topology = load_topology(QUICKSTART)
    assert partitions_now(ClusterStatus({"active": True, "partitions": []}, {}), topology) == []
    assert partitions_now(ClusterStatus(None, {}), topology) == [
        (t.name, p) for t in topology.topics for p in range(t.partitions)]



def test_a_broker_still_holding_a_replica_the_controller_no_longer_assigns_it_has_not_converged() -> None:
    """R40, R35: brokers 1 and 2, cut off from the controller while `pay` was deleted and made
    again on broker 3 alone, still lead the old topic's partitions after the heal until they
    hear. The controller's own partitions were converged, so the wait ended there, and the
    final files held two leaders of `pay/0`: the run was unjudged, or the old replicas'
    records read as lost writes. A replica of a partition the controller no longer lists,
    of a topic id it no longer has, or moved away from its broker keeps the run waiting."""
    def mine(p: int, role: str, topic_id: int) -> dict:
        return {**_replica(p, role, 9, 9), "topic_id": topic_id}
    status = ClusterStatus(
        controller={"node": "controller-1", "topic_ids": {"pay": 8}, "partitions": [
            {**_partition(0, 3, [3]), "replicas": [3]}, {**_partition(1, 3, [3], epoch=0), "replicas": [3]}]},
        brokers={1: {"partitions": [mine(0, "leader", 5), mine(2, "leader", 5)]},
                 2: {"partitions": [mine(1, "follower", 8)]},
                 3: {"partitions": [mine(0, "leader", 8), {**mine(1, "leader", 8), "leader_epoch": 0}]}},
    )
    assert status.unconverged() == [
        "pay/0: broker 1 still holds a replica of a deleted topic",
        "pay/1: broker 2 still holds a replica the controller moved away",
        "pay/2: broker 1 still holds a replica of a deleted topic",
    ]
    # every topic deleted: a broker that has not heard yet holds the last replicas
    assert ClusterStatus({"active": True, "partitions": []}, {1: {"partitions": [mine(0, "leader", 5)]}}
                         ).unconverged() == ["pay/0: broker 1 still holds a replica of a deleted topic"]


REMADE_ELSEWHERE = {
    "name": "remade-elsewhere", "seed": 0, "duration": "5s",
    "cluster": {"controllers": 1, "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]},
    "topics": [{"name": "orders", "partitions": 2, "replication_factor": 2, "min_insync_replicas": 1,
                "placement": "explicit", "assignment": {0: [1, 2], 1: [2, 1]}}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "100/s", "batch": 5}]},
    "faults": [{"at": "1s", "do": "partition", "groups": [["broker:1", "broker:2"], ["controller:1", "broker:3"]]},
               {"at": "1.3s", "do": "delete-topic", "topic": "orders"},
               {"at": "2s", "do": "create-topic", "topic": {
                   "name": "orders", "partitions": 2, "replication_factor": 1, "min_insync_replicas": 1,
                   "placement": "explicit", "assignment": {0: [3], 1: [3]}}}],
}


def test_the_final_state_waits_for_the_brokers_that_held_the_deleted_topic(tmp_path: Path) -> None:
    """The scenario above on virtual time: the delete waits out the workload (brokers 1 and 2
    cannot hear), the end of the run heals, and the final replicas are broker 3's alone,
    each broker that held the old topic having deleted its replicas first."""
    run = tmp_path / "run"
    outcome = run_seed(parse_topology(REMADE_ELSEWHERE, "remade-elsewhere"), run)
    assert outcome.error is None and outcome.converged
    assert {(r["node"], r["partition"]) for r in read_jsonl(run / "final" / "replicas.jsonl")} == {
        ("broker-3", 0), ("broker-3", 1)}
    deleted = {e["node"] for e in read_jsonl(run / "events.jsonl")
               if e["kind"] == "replica-deleted" and e.get("reason") == "topic-deleted"}
    assert deleted == {"broker-1", "broker-2"}
