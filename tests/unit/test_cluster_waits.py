"""The supervisor's own waits inside a fault let the faults due meanwhile fire
(`Cluster.while_waiting`, the injector's): a controlled shutdown that cannot finish (no
controller quorum to move its leaderships) and an admin request retried while no controller
is active held the schedule back 10 s each (a new user's restarts fired 8 s late, and a 3 s
outage became 22 ms)."""
from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

from testbed.supervisor.cluster import Cluster


class _Waits(Cluster):
    def __init__(self, proc: subprocess.Popen) -> None:  # noqa: D107 - only what the waits read
        self.procs = {"broker-3": proc}
        self.configs = {"broker-3": SimpleNamespace(control_endpoint="ipc:///nowhere")}
        self.control = SimpleNamespace(call=lambda *args, **kwargs: None)  # the node does not answer
        self.stopped: set[str] = set()
        self.looks = 0
        self.while_waiting = self._look

    def _look(self) -> None:
        self.looks += 1

    def scaled(self, seconds: float) -> float:
        return seconds


def test_a_controlled_shutdown_waiting_for_its_node_lets_due_faults_fire() -> None:
    node = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(0.5)"])
    waits = _Waits(node)
    assert waits.shutdown_node("broker-3", timeout=10) is True  # it exited by itself, status 0
    assert waits.looks >= 3 and "broker-3" in waits.stopped


def test_a_controlled_shutdown_that_times_out_is_a_kill_and_still_let_faults_fire() -> None:
    node = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    waits = _Waits(node)
    assert waits.shutdown_node("broker-3", timeout=0.5) is False
    assert node.returncode is not None and waits.looks >= 3


def test_a_request_asked_again_lets_due_faults_fire_between_the_asks() -> None:
    waits = _Waits(subprocess.Popen([sys.executable, "-c", "pass"]))
    answers = iter([None, None, "answer"])
    assert waits.retry_while(lambda: next(answers), lambda a: a is None, timeout=5) == "answer"
    assert waits.looks == 2
    waits.procs["broker-3"].wait()
