"""R40: `delete-topic` waits until the deleted topic is gone from the controller and from every
broker; a topic made again under the name meanwhile (a fault that fired inside the wait) is
another topic, told by its id (KIP-516). Found by a tester: the wait took the new topic's
replicas for the old one's and ran out its 15 s, holding every later fault back."""
from __future__ import annotations

from collections.abc import Callable

from broker.protocol.messages import DeleteTopicsResponse
from testbed.supervisor.admin import ClusterAdmin, ClusterError
from testbed.supervisor.cluster_status import ClusterStatus

PARTITION = {"topic": "t", "partition": 0, "leader": 1, "leader_epoch": 0, "partition_epoch": 0,
             "replicas": [1, 2], "isr": [1, 2]}


def status(topic_id: int | None, replica_ids: list[int | None]) -> ClusterStatus:
    controller = {"node": "controller-1", "active": True, "brokers": [],
                  "partitions": [PARTITION] if topic_id is not None else [],
                  "topic_ids": {"t": topic_id} if topic_id is not None else {}}
    brokers = {b: {"partitions": [{"topic": "t", "partition": 0, "role": "follower", "leader_epoch": 0,
                                   "leo": 0, "hwm": 0, "topic_id": rid}]}
               for b, rid in enumerate(replica_ids, start=1)}
    return ClusterStatus.of({"controller-1": controller}, brokers)


class _Admin(ClusterAdmin):
    """The statuses a wait sees, one per look; the first is the one before the request."""

    def __init__(self, statuses: list[ClusterStatus]) -> None:  # noqa: D107 - only what delete_topic reads
        self.statuses = statuses

    def scaled(self, seconds: float) -> float:
        return seconds

    def wait_until(self, predicate: Callable[[ClusterStatus], bool], timeout: float,
                   what: str = "the condition") -> ClusterStatus:
        for s in self.statuses:
            if predicate(s):
                return s
        raise ClusterError(f"timed out after {timeout}s waiting for {what}")

    def _admin(self, request: object) -> object:
        return DeleteTopicsResponse({"t": "NONE"})


def test_r40_the_wait_ends_when_only_the_topic_made_again_is_left() -> None:
    before = status(7, [7, 7])
    made_again = status(12, [12, 12])
    assert _Admin([before, made_again]).delete_topic("t", timeout=1) == {"deleted": "t", "partitions": 1}


def test_r40_a_broker_still_holding_the_deleted_topic_keeps_the_wait() -> None:
    before = status(7, [7, 7])
    one_behind = status(12, [12, 7])  # broker 2 has not heard of the deletion yet
    unknown = status(12, [12, None])  # a log recovery found, made for no topic the broker knows
    done = _Admin([before, one_behind, unknown]).delete_topic("t", timeout=1)
    assert done["deleted"] == "t" and "timed out" in done["error"]
