"""R39: a removed broker's replicas are reassigned first, *then* it shuts down. Found by a
tester (trial25 F1): a remove-broker planned moves onto a broker an add-broker had started
but that had not registered yet; the controller refused each ("no broker [6]"), and the
removal shut its broker down all the same, still a replica of six partitions, which stayed
under-replicated for good (the run never converged). The plan now counts only registered
brokers, and a broker still holding a replica after its rounds stays, with the error."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from broker.protocol.rebalance import RebalanceError
from testbed.config.specs import NodeSpec
from testbed.supervisor.admin import ClusterAdmin, ClusterError
from testbed.supervisor.cluster_status import ClusterStatus


def status(registered: list[int]) -> ClusterStatus:
    partition = {"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 0, "partition_epoch": 0,
                 "replicas": [1, 2, 3], "isr": [1, 2, 3]}
    controller = {"node": "controller-1", "active": True, "partitions": [partition], "topic_ids": {"t": 1},
                  "brokers": [{"broker_id": b, "fenced": False} for b in registered]}
    return ClusterStatus.of({"controller-1": controller}, {})


class _Admin(ClusterAdmin):
    """Brokers 1-5 started; the controller knows `registered` and refuses every reassignment."""

    def __init__(self, registered: list[int]) -> None:  # noqa: D107 - only what decommission_broker reads
        self.brokers = [NodeSpec("broker", b, None) for b in (1, 2, 3, 4, 5)]
        self.removed: set[str] = set()
        self.leaving: set[int] = set()
        self.now = status(registered)
        self.asked: list[tuple[str, list[int]]] = []
        self.shut_down: list[str] = []

    def scaled(self, seconds: float) -> float:
        return seconds

    def wait_until(self, predicate: Callable[[ClusterStatus], bool], timeout: float,
                   what: str = "the condition") -> ClusterStatus:
        if predicate(self.now):
            return self.now
        raise ClusterError(f"timed out after {timeout}s waiting for {what}")

    def alter_reassignment(self, partition: str, replicas: list[int]) -> dict:
        self.asked.append((partition, replicas))
        return {"accepted": False, "error": "INVALID_REPLICA_ASSIGNMENT", "message": "refused"}

    def shutdown_node(self, name: str, timeout: float | None = None) -> bool:
        self.shut_down.append(name)
        return True


def test_r39_a_broker_whose_moves_are_refused_is_not_shut_down() -> None:
    admin = _Admin(registered=[1, 2, 3, 4, 5])
    with pytest.raises(ClusterError, match="broker 2 still holds replicas of t/0 after the rebalance .*stays in the cluster"):
        admin.decommission_broker(2)
    assert admin.asked and all(2 not in replicas for _, replicas in admin.asked)
    assert admin.shut_down == [] and admin.removed == set() and admin.leaving == set()


def test_r34_r39_a_broker_not_registered_yet_is_no_member_of_the_plan() -> None:
    admin = _Admin(registered=[1, 2, 3, 5])  # broker 4 started (an add-broker's) but has not registered
    plan = admin.begin_rebalance(leaving=frozenset({2}))
    assert [replicas for _, replicas in admin.asked] == [[1, 5, 3]]
    assert plan.refused == {"t/0": "INVALID_REPLICA_ASSIGNMENT: refused"}


def test_r39_with_too_few_registered_brokers_left_the_removal_is_refused_before_any_move() -> None:
    admin = _Admin(registered=[1, 2, 3])  # 4 and 5 started, neither registered: two would stay
    with pytest.raises(RebalanceError, match="3 replicas but only 2 brokers would stay"):
        admin.decommission_broker(2)
    assert admin.asked == [] and admin.shut_down == []
