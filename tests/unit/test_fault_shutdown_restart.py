"""A `restart` that falls due while a controlled shutdown of its node is under way (the
shutdown's wait lets due faults fire, `FaultInjector.while_waiting`): found by a tester on
processes, where a restart 100 ms after a shutdown found the node still running, restarted
nothing, and left it down for the rest of the run (exit 0, the whole cluster down later)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.common.jsonl import read_jsonl
from faults.injector import FaultInjector
from faults.schedule import ScheduledFault
from faults.targets import ClusterView


class _SlowShutdowns:
    """The part of a cluster the injector drives here: a controlled shutdown takes 0.5 s of
    the schedule's clock, and lets due faults fire while it waits, as processes do."""

    def __init__(self) -> None:
        self.clock = 0.0
        self.stopped: set[str] = set()
        self.paused: set[str] = set()
        self.removed: set[str] = set()
        self.restarted: list[str] = []
        self.while_waiting = lambda: None

    def view(self) -> ClusterView:
        return ClusterView({f"broker-{i}": None for i in (1, 2, 3)}, {"controller-1": None}, "controller-1",
                           frozenset(self.stopped), frozenset(self.paused), {}, {}, {})

    def shutdown_node(self, name: str, timeout: float | None = None) -> bool:
        for _ in range(5):  # the node is still running while its shutdown waits
            self.clock += 0.1
            self.while_waiting()
        self.stopped.add(name)
        return True

    def shutdown_ended(self, name: str) -> bool:
        return name in self.stopped  # still running until its shutdown's wait ends

    def restart_node(self, name: str) -> int:
        self.stopped.discard(name)
        self.restarted.append(name)
        return 2


def run_schedule(cluster: Any, schedule: list[ScheduledFault], record: Path) -> list[tuple[str, dict]]:
    """Fire `schedule` as the runner does (what is due now, then `cluster.clock` moves on by
    50 ms) against a stand-in cluster whose waits move its clock; (origin, effect) of each
    fault's end, in the order they ended."""
    injector = FaultInjector(cluster, schedule, seed=1, record=record)
    injector.elapsed = lambda: cluster.clock
    while injector.pending:
        injector.fire_due(cluster.clock)
        cluster.clock += 0.05
    return [(r["origin"], r["effect"]) for r in read_jsonl(record) if r["phase"] == "end"]


def test_a_restart_due_during_its_nodes_shutdown_restarts_it_once_the_shutdown_ends(tmp_path: Path) -> None:
    cluster = _SlowShutdowns()
    schedule = [ScheduledFault(1.0, "shutdown", "broker:1", {}, "faults[0]"),
                ScheduledFault(1.1, "restart", None, {}, "faults[1]"),
                ScheduledFault(2.0, "shutdown", "broker:2", {}, "faults[2]"),
                ScheduledFault(2.1, "restart", "broker:2", {}, "faults[3]")]
    ends = run_schedule(cluster, schedule, tmp_path / "faults.jsonl")
    assert ends == [("faults[0]", {"clean": {"broker-1": True}}), ("faults[1]", {"restarted": {"broker-1": 2}}),
                    ("faults[2]", {"clean": {"broker-2": True}}), ("faults[3]", {"restarted": {"broker-2": 2}})]
    assert cluster.stopped == set() and cluster.restarted == ["broker-1", "broker-2"]


class _ExitsThenWaits(_SlowShutdowns):
    """The node exits 0.2 s into its controlled shutdown, but the shutdown's wait looks again
    only 2 s later: it is inside the wait of a fault fired meanwhile that needs the node back
    (a remove-broker whose moves need it), as the executors' waits nest."""

    def __init__(self) -> None:
        super().__init__()
        self.exited: set[str] = set()
        self.restarted_at: dict[str, float] = {}

    def shutdown_node(self, name: str, timeout: float | None = None) -> bool:
        for step in range(20):
            self.clock += 0.1
            if step == 1:
                self.exited.add(name)
            self.while_waiting()
        if name not in self.restarted_at:
            self.stopped.add(name)
        return True

    def shutdown_ended(self, name: str) -> bool:
        if name in self.exited and name not in self.restarted_at:
            self.stopped.add(name)
        return name in self.stopped

    def restart_node(self, name: str) -> int:
        self.restarted_at[name] = self.clock
        return super().restart_node(name)


def test_a_restart_due_inside_a_wait_nested_in_its_nodes_shutdown_restarts_it_once_it_has_exited(
        tmp_path: Path) -> None:
    """trial25 t8 seeds 39, 68 and 79: a remove-broker fired inside a leader's controlled
    shutdown waited for moves that needed the shut-down broker; its restart, due 0.25 s after
    the shutdown, was held until the shutdown's wait ended, and that wait looked again only
    when the remove-broker's had: both waited to the workload's end, and every fault after
    them with them. The restart now fires once the node has exited."""
    cluster = _ExitsThenWaits()
    schedule = [ScheduledFault(1.0, "shutdown", "broker:1", {}, "faults[0]"),
                ScheduledFault(1.3, "restart", "broker:1", {}, "faults[1]")]
    ends = run_schedule(cluster, schedule, tmp_path / "faults.jsonl")
    assert ends == [("faults[1]", {"restarted": {"broker-1": 2}}), ("faults[0]", {"clean": {"broker-1": True}})]
    assert abs(cluster.restarted_at["broker-1"] - 1.3) < 0.11 and cluster.stopped == set()
