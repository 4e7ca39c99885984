"""The supervisor's own waits inside a fault let the faults due meanwhile fire
(`Cluster.while_waiting`, the injector's): a controlled shutdown that cannot finish (no
controller quorum to move its leaderships) and an admin request retried while no controller
is active held the schedule back 10 s each (a new user's restarts fired 8 s late, and a 3 s
outage became 22 ms). They give up once the workload's time is up (`WorkloadEnded`), so
that the end of the run's heal is not held back by what it would let finish."""
from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import zmq

from broker.common.jsonl import read_jsonl
from faults.injector import FaultInjector, WorkloadEnded
from faults.schedule import ScheduledFault
from faults.targets import ClusterView
from testbed.supervisor.cluster import Cluster, ClusterError
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.control_client import ControlClient


def _pump(timeout: float, until: Callable[[], bool]) -> None:
    if not until():
        time.sleep(min(timeout, 0.005))


_SILENT = SimpleNamespace(send=lambda *args, **kwargs: None, pump=_pump)


class _Waits(Cluster):
    def __init__(self, proc: subprocess.Popen) -> None:  # noqa: D107 - only what the waits read
        self.procs = {"broker-3": proc}
        self.configs = {"broker-3": SimpleNamespace(control_endpoint="ipc:///nowhere")}
        self.control = _SILENT  # the node does not answer
        self.stopped: set[str] = set()
        self._in_shutdown: set[str] = set()
        self.paused: set[str] = set()
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


def test_a_paused_nodes_shutdown_lets_the_faults_due_in_its_first_second_fire(tmp_path: Path) -> None:
    """trial27's t9 (pause broker 2 at 7 s, shut it down at 8 s, elect-preferred at 8.5 s):
    the shutdown waited for the paused node's answer for the request's whole timeout before
    its first look, and the elect-preferred fired at 9.03 s. The request is now sent without
    waiting for its answer: the looks begin at once. Here over a real control client and a
    socket that takes the request and never answers, as a stopped process's does."""
    silent = zmq.Context.instance().socket(zmq.ROUTER)
    silent.bind(f"ipc://{tmp_path}/control.sock")
    node = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    waits = _Waits(node)
    waits.scaled = lambda seconds: seconds * 5  # type: ignore[method-assign]  # the request's timeout 5 s
    waits.configs["broker-3"] = SimpleNamespace(control_endpoint=f"ipc://{tmp_path}/control.sock")
    waits.control = ControlClient("token")
    begun = time.monotonic()
    first: list[float] = []
    waits.while_waiting = lambda: first.append(time.monotonic() - begun) if not first else None
    try:
        assert waits.shutdown_node("broker-3", timeout=1.0) is False  # killed at its timeout
    finally:
        waits.control.close()
        silent.close(linger=0)
    assert node.returncode is not None and "broker-3" in waits.stopped
    assert first and first[0] < 2.5, f"the first look came {first[0]:.2f} s in: it waited for the answer"


def test_a_request_asked_again_lets_due_faults_fire_between_the_asks() -> None:
    waits = _Waits(subprocess.Popen([sys.executable, "-c", "pass"]))
    answers = iter([None, None, "answer"])
    assert waits.retry_while(lambda: next(answers), lambda a: a is None, timeout=5) == "answer"
    assert waits.looks == 2
    waits.procs["broker-3"].wait()


class _NoController(_Waits):
    """A cluster whose controller never answers: a wait for one never succeeds."""

    def __init__(self, proc: subprocess.Popen, run_dir: Path) -> None:
        super().__init__(proc)
        self.dir = SimpleNamespace(root=run_dir)
        self.removed: set[str] = set()

    def status(self, timeout: float = 0.5) -> ClusterStatus:
        return ClusterStatus.of({"controller-1": None}, {3: None})

    def view(self) -> ClusterView:
        return ClusterView({"broker-3": None}, {"controller-1": None}, None, frozenset(), frozenset(), {}, {}, {})


@pytest.fixture
def sleeping_node() -> Iterator[subprocess.Popen]:
    """A node process that never exits by itself; gone after the test, whatever it did."""
    node = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield node
    node.kill()
    node.wait()


def _workload_of(injector: FaultInjector, seconds: float) -> None:
    """The runner's part: the schedule's clock running, and the workload's length."""
    begun = time.monotonic()
    injector.elapsed = lambda: time.monotonic() - begun
    injector.duration = seconds


def test_a_faults_wait_that_never_succeeds_gives_up_when_the_workload_ends(
        tmp_path: Path, sleeping_node: subprocess.Popen) -> None:
    """Found by a tester: an add-broker whose moves needed a paused broker waited out its 60 s
    timeout, and the end of the run's heal, which resumes that broker, came only after it
    (`63.1s / 9s`). A fault's wait now gives up once the workload's time is up."""
    cluster = _NoController(sleeping_node, tmp_path)
    injector = FaultInjector(cluster, [], seed=1, record=tmp_path / "faults.jsonl")
    _workload_of(injector, 0.3)
    begun = time.monotonic()
    end = injector.fire(ScheduledFault(0.0, "delete-topic", None, {"topic": "orders"}, "faults[0]"))
    # trial34: "the end of the run heals and converges" read as if the request would be made then
    assert end["effect"] == {"error": "delete-topic: the workload ended while it waited; no active controller "
                                      "took the request, so it was not made (the end of the run does not make it)"}
    assert time.monotonic() - begun < 2.0, "the wait ran on past the workload's end"
    injector.elapsed = None  # the workload is over: the end of the run's waits are not cut
    with pytest.raises(RuntimeError, match="timed out after 0.2s"):
        cluster.wait_until(lambda s: s.controller is not None, timeout=0.2)


def test_a_fault_that_begins_at_the_workloads_end_keeps_its_own_timeout(
        tmp_path: Path, sleeping_node: subprocess.Popen) -> None:
    """A fault due at the end itself (or held back until then) is not cut at its first look:
    a `shutdown` due at the end would be killed at once, never clean."""
    cluster = _NoController(sleeping_node, tmp_path)
    cluster.scaled = lambda seconds: seconds / 20  # type: ignore[method-assign]  # its 10 s wait in 0.5 s
    injector = FaultInjector(cluster, [], seed=1, record=tmp_path / "faults.jsonl")
    _workload_of(injector, 0.0)  # the workload's time is up as the fault begins
    end = injector.fire(ScheduledFault(0.0, "delete-topic", None, {"topic": "orders"}, "faults[0]"))
    assert "timed out after" in end["effect"]["error"] and "workload ended" not in end["effect"]["error"]


def test_a_shutdown_cut_by_the_workloads_end_kills_its_node_and_says_why(
        tmp_path: Path, sleeping_node: subprocess.Popen) -> None:
    """A controlled shutdown still waiting when the workload ends is killed, as at its
    timeout, and counted stopped (the heal restarts it); its effect says it gave up, and is no
    `error`, which would tell the analysis that the node was never taken down."""
    cluster = _NoController(sleeping_node, tmp_path)
    injector = FaultInjector(cluster, [], seed=1, record=tmp_path / "faults.jsonl")
    _workload_of(injector, 0.3)
    end = injector.fire(ScheduledFault(0.0, "shutdown", "broker:3", {}, "faults[0]"))
    assert end["effect"] == {"clean": {"broker-3": False}, "gave_up": "shutdown: the workload ended while it "
                                                                       "waited; the end of the run heals and converges"}
    assert sleeping_node.poll() is not None and cluster.stopped == {"broker-3"}
    assert [r["phase"] for r in read_jsonl(tmp_path / "faults.jsonl")] == ["start", "end"]


def test_a_cut_shutdown_outside_the_injector_raises_after_stopping_its_node(sleeping_node: subprocess.Popen) -> None:
    waits = _Waits(sleeping_node)

    def workload_over() -> None:
        raise WorkloadEnded()
    waits.while_waiting = workload_over
    with pytest.raises(WorkloadEnded):
        waits.shutdown_node("broker-3", timeout=10)
    assert sleeping_node.poll() is not None and "broker-3" in waits.stopped


def test_a_wait_for_a_partition_no_controller_holds_looks_again_and_says_so_at_its_timeout(
        tmp_path: Path, sleeping_node: subprocess.Popen) -> None:
    """trial35: `c.wait_until(lambda s: s.partition("orders", 0).leader ...)` right after a kill
    of the active controller ended at once in `KeyError 'orders/0 is unknown to the
    controller'`: the wait now looks again until its timeout, and says what it last missed."""
    cluster = _NoController(sleeping_node, tmp_path)
    begun = time.monotonic()
    with pytest.raises(ClusterError, match=r"timed out after 0\.3s waiting for the condition; it last found no "
                                           r"orders/0: no active controller answered"):
        cluster.wait_until(lambda s: s.partition("orders", 0).leader >= 0, timeout=0.3)
    assert time.monotonic() - begun >= 0.3 and cluster.looks >= 3
