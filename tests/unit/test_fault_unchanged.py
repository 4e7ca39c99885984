"""A process action that finds a node as it would leave it says so in its effect
(`unchanged`) and its line: trial35's kill of a node killed before recorded `killed {}` and
printed as done, and a restart of a running node printed nothing of what it did not do."""
from __future__ import annotations

from pathlib import Path

from faults.schedule import ScheduledFault
from testbed.experiment.progress import describe_fault
from tests.unit.test_fault_shutdown_restart import _SlowShutdowns, run_schedule


class _Processes(_SlowShutdowns):
    def kill_node(self, name: str) -> int:
        self.stopped.add(name)
        return 7

    def pause_node(self, name: str) -> int:
        self.paused.add(name)
        return 7

    def resume_node(self, name: str) -> int:
        self.paused.discard(name)
        return 7


def test_a_kill_of_a_node_down_and_a_restart_of_a_running_one_say_what_they_left(tmp_path: Path) -> None:
    cluster = _Processes()
    schedule = [ScheduledFault(1.0, "kill", "broker:1", {}, "faults[0]"),
                ScheduledFault(1.5, "kill", "broker:1", {}, "faults[1]"),
                ScheduledFault(2.0, "restart", "broker:2", {}, "faults[2]"),
                ScheduledFault(2.5, "pause", "broker:3", {}, "faults[3]"),
                ScheduledFault(3.0, "pause", "broker:3", {}, "faults[4]"),
                ScheduledFault(3.5, "resume", "broker:2", {}, "faults[5]"),
                ScheduledFault(4.0, "restart", "broker:1", {}, "faults[6]")]
    ends = dict(run_schedule(cluster, schedule, tmp_path / "faults.jsonl"))
    assert ends["faults[0]"] == {"killed": {"broker-1": 7}}
    assert ends["faults[1]"] == {"killed": {}, "unchanged": {"broker-1": "not running"}}
    assert ends["faults[2]"] == {"restarted": {}, "unchanged": {"broker-2": "running already"}}
    assert ends["faults[4]"] == {"paused": {}, "unchanged": {"broker-3": "paused already"}}
    assert ends["faults[5]"] == {"resumed": {}, "unchanged": {"broker-2": "not paused"}}
    assert ends["faults[6]"] == {"restarted": {"broker-1": 2}}
    line = describe_fault({"do": "kill", "target": "broker:1", "resolved": ["broker-1"], "params": {},
                           "effect": ends["faults[1]"]}, 1.5)
    assert line.endswith("kill broker:1 -> broker-1 [yellow](unchanged: broker-1 not running)[/]")
