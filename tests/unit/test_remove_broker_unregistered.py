"""R39: a remove-broker whose broker shut down but that the controller would not unregister
(it still named the broker a replica) said so only inside its rebalance's record
(`unregister_error`), beside `removed`, with no `error`: the report read it as done. The
fault's end now has the error too; the broker is still out of the cluster (`removed`)."""
from __future__ import annotations

from pathlib import Path

from broker.common.jsonl import read_jsonl
from faults.schedule import ScheduledFault
from faults.targets import ClusterView
from tests.unit.test_fault_shutdown_restart import run_schedule


class _Refusing:
    """A cluster whose controller refuses to unregister the broker a removal shut down."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.stopped: set[str] = set()
        self.paused: set[str] = set()
        self.removed: set[str] = set()
        self.while_waiting = lambda: None

    def view(self) -> ClusterView:
        return ClusterView({f"broker-{i}": None for i in (1, 2, 3, 4)}, {"controller-1": None}, "controller-1",
                           frozenset(self.stopped), frozenset(self.paused), {}, {}, {})

    def decommission_broker(self, broker_id: int, on_plan: object = None) -> dict:
        self.removed.add(f"broker-{broker_id}")
        return {"moves": [], "refused": {}, "elected": [], "shutdown": True, "unregistered": False,
                "unregister_error": "INVALID_REPLICA_ASSIGNMENT: broker 2 is still a replica of orders/0"}


def test_r39_a_removal_the_controller_would_not_unregister_ends_with_the_error(tmp_path: Path) -> None:
    ends = run_schedule(_Refusing(), [ScheduledFault(1.0, "remove-broker", "broker:2", {}, "faults[0]")],
                        tmp_path / "faults.jsonl")
    [(origin, effect)] = ends
    assert origin == "faults[0]" and effect["removed"] == "broker:2"
    assert effect["error"] == ("remove-broker: not unregistered: INVALID_REPLICA_ASSIGNMENT: broker 2 is still a "
                               "replica of orders/0")
    assert [r["do"] for r in read_jsonl(tmp_path / "faults.jsonl")] == ["remove-broker", "remove-broker"]
