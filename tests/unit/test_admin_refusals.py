"""How an admin fault the controller refused is recorded (DESIGN section 6: the reason is
its `error`, and the run goes on). A preferred election (R36) whose preferred replicas lead
already did what it was asked: those partitions are no error, nor part of one."""
from __future__ import annotations

from pathlib import Path

from broker.common.jsonl import read_jsonl
from faults.injector import FaultInjector
from faults.schedule import ScheduledFault
from faults.targets import ClusterView

NOT_NEEDED = "ELECTION_NOT_NEEDED: broker 1, the preferred replica, leads already"
NOT_AVAILABLE = "PREFERRED_LEADER_NOT_AVAILABLE: the preferred replica, broker 2, is not in the ISR [3] or cannot lead"


class _Controller:
    """The part of a cluster an election fault drives: the controller's answer is given."""

    def __init__(self, refused: dict[str, str]) -> None:
        self.refused = refused
        self.while_waiting = lambda: None
        self.stopped: set[str] = set()
        self.paused: set[str] = set()
        self.removed: set[str] = set()

    def view(self) -> ClusterView:
        return ClusterView({f"broker-{i}": None for i in (1, 2, 3)}, {"controller-1": None}, "controller-1",
                           frozenset(), frozenset(), {}, {}, {})

    def elect_preferred_leaders(self, partition: str | None) -> dict:
        return {"elected": [], "refused": dict(self.refused)}

    def elect_leader(self, partition: str, broker: int) -> dict:
        return {"elected": [], "refused": dict(self.refused)}


def _effect(tmp_path: Path, do: str, refused: dict[str, str], **params: object) -> dict:
    injector = FaultInjector(_Controller(refused), [], seed=1, record=tmp_path / "faults.jsonl")  # type: ignore[arg-type]
    target = "broker:1" if do == "elect" else None
    injector.fire(ScheduledFault(0.0, do, target, dict(params), "faults[0]"))
    [end] = [r for r in read_jsonl(tmp_path / "faults.jsonl") if r["phase"] == "end"]
    return end["effect"]


def test_r36_a_preferred_election_with_nothing_to_do_is_no_error(tmp_path: Path) -> None:
    effect = _effect(tmp_path, "elect-preferred", {"t/0": NOT_NEEDED, "t/1": NOT_NEEDED})
    assert "error" not in effect and effect["refused"]["t/0"] == NOT_NEEDED


def test_r36_a_preferred_elections_error_names_only_the_partitions_it_failed(tmp_path: Path) -> None:
    """trial27: the error of an elect-preferred of every partition listed each partition
    whose preferred replica leads already beside the one it could not elect."""
    effect = _effect(tmp_path, "elect-preferred", {"t/0": NOT_NEEDED, "t/1": NOT_AVAILABLE, "t/2": NOT_NEEDED})
    assert effect["error"] == f"t/1: {NOT_AVAILABLE}"
    assert set(effect["refused"]) == {"t/0", "t/1", "t/2"}  # the controller's whole answer is kept


def test_r32_a_manual_election_of_a_led_partition_is_an_error(tmp_path: Path) -> None:
    effect = _effect(tmp_path, "elect", {"t/0": NOT_NEEDED}, partition="t/0")
    assert effect["error"] == f"t/0: {NOT_NEEDED}"
