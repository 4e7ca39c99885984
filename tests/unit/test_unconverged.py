"""What the supervisor says when a run does not converge: each partition that kept it from
converging, and why (a new user's `unclean_recovery: manual` run without an `elect` for one
of its partitions waited out the convergence with no word of which)."""
from __future__ import annotations

from pathlib import Path

from testbed.config.loader import load_topology
from testbed.experiment.final_state import partitions_now
from testbed.supervisor.cluster_status import ClusterStatus

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

