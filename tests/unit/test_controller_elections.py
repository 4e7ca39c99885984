"""The controller elections a run reports (`analysis.controllers`, R22), each with the fault
it followed: trial39's quorum runs told a failover nowhere but in events.jsonl."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console

from testbed.analysis.controllers import controller_elections
from testbed.analysis.terminal import print_verdict
from testbed.analysis.verdict import RunVerdict


def _elected(t: float, node: str, term: int) -> dict:
    return {"t": t, "node": node, "term": term}


def _fault(at_s: float, do: str, target: str | None, resolved: list[str], groups: list | None = None) -> dict:
    return {"at_s": at_s, "do": do, "target": target, "resolved": resolved, "groups": groups}


def test_each_election_after_the_first_names_the_fault_on_a_controller_before_it() -> None:
    elected = [_elected(0.1, "controller-1", 1), _elected(2.43, "controller-2", 2),
               _elected(5.44, "controller-3", 3), _elected(8.49, "controller-2", 4), _elected(12.0, "controller-2", 5)]
    faults = [_fault(2.0, "kill", "active-controller", ["controller-1"]),
              _fault(4.9, "kill", "broker:1", ["broker-1"]),  # a later fault, on no controller
              _fault(5.0, "pause", "active-controller", ["controller-2"]),
              _fault(5.2, "kill", "broker:2", ["broker-2"]),
              _fault(8.0, "partition", None, [], [["controller-3"], ["brokers", "controller-1", "controller-2"]]),
              _fault(11.0, "kill", "broker:3", ["broker-3"])]
    assert controller_elections(elected, faults) == [
        {"at_s": 2.43, "node": "controller-2", "term": 2, "after": "kill active-controller", "after_s": 0.43},
        {"at_s": 5.44, "node": "controller-3", "term": 3, "after": "pause active-controller", "after_s": 0.44},
        {"at_s": 8.49, "node": "controller-2", "term": 4, "after": "partition", "after_s": 0.49},
        {"at_s": 12.0, "node": "controller-2", "term": 5, "after": "kill broker:3", "after_s": 1.0}]
    assert controller_elections(elected[:1], faults) == []
    assert controller_elections([_elected(0.1, "controller-1", 1), _elected(3.0, "controller-1", 2)], [])[0][
        "after"] is None


def test_the_terminal_says_each_election_after_the_verdict() -> None:
    figures = {"unavailable_s": {"no-leader": 0.5, "no-acks-all": 0.6}, "controller_elections": [
        {"at_s": 2.43, "node": "controller-2", "term": 2, "after": "kill active-controller", "after_s": 0.43}]}
    verdict = RunVerdict(Path("/runs/r"), True, {"ok": True, "checks": {}, "expect": {}, "figures": figures,
                                                 "converged": True, "problems": []})
    console = Console(record=True, width=200)
    print_verdict(console, verdict)
    assert ("controller elections: controller-2 (term 2) at 2.43s, 0.43s after kill active-controller"
            in console.export_text())
