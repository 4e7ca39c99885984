"""A paused node's controlled shutdown times out (a stopped process cannot exit) and kills
it: found by a tester on processes (pause broker 1, shut it down, kill broker 2, restart,
resume). The supervisor counted broker 1 stopped but left it in `paused`, so the restart
started a new broker-1 and the `resume` then resolved to ['broker-1'] and "resumed" that
process, which was never paused (and the final heal resumed it again). A node killed, or
started anew, is never paused, as a plain kill already counted it and as the sim does."""
from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from broker.common.jsonl import read_jsonl
from broker.wire.linkfilter import LinkTable
from faults.injector import FaultInjector
from faults.schedule import ScheduledFault
from faults.targets import ClusterView
from testbed.supervisor import cluster as cluster_module
from testbed.supervisor.cluster import Cluster
from testbed.supervisor.run_dir import RunDir


class _Proc:
    """A node process that never exits by itself (a SIGSTOPped one does not); SIGKILL ends it."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if timeout is None:
                raise AssertionError("a wait for ever on a process that never exits")
            raise subprocess.TimeoutExpired("broker", timeout)
        return self.returncode

    def kill(self) -> None:
        self.returncode = -9


class _Fakes(Cluster):
    """The supervisor's process control over fake processes: signals and spawns faked."""

    def __init__(self, root: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: D107 - only what faults read
        self.closed = False
        self.dir = RunDir(root)
        self.dir.nodes.mkdir(parents=True)
        self.pids = iter(range(100, 200))
        self.procs: dict = {f"broker-{i}": _Proc(next(self.pids)) for i in (1, 2, 3)}
        self.configs = {n: SimpleNamespace(control_endpoint=f"ipc:///{n}") for n in self.procs}
        self.control = SimpleNamespace(send=lambda *args, **kwargs: None,  # a paused node does not answer
                                       pump=lambda timeout, until: None)
        self.registry = SimpleNamespace(add_process=lambda pid: None)
        self.stopped: set[str] = set()
        self.paused: set[str] = set()
        self.removed: set[str] = set()
        self._in_shutdown: set[str] = set()
        self.link_table = LinkTable(0, {})
        self._links_pending: set[str] = set()
        self._starting: dict[str, float] = {}
        self.while_waiting = None
        self.signals: list[tuple[str, int]] = []
        by_pid = lambda pid: next(p for p in self.procs.values() if p.pid == pid)  # noqa: E731
        monkeypatch.setattr(cluster_module, "sigstop", lambda pid: self.signals.append(("STOP", pid)))
        monkeypatch.setattr(cluster_module, "sigcont", lambda pid: self.signals.append(("CONT", pid)))
        monkeypatch.setattr(cluster_module, "sigkill", lambda pid: by_pid(pid).kill())
        monkeypatch.setattr(cluster_module, "spawn", lambda args, log: _Proc(next(self.pids)))

    def scaled(self, seconds: float) -> float:
        return seconds / 100  # the shutdown's 10 s timeout in 0.1 s

    def view(self) -> ClusterView:
        return ClusterView({n: None for n in self.procs}, {}, None, frozenset(self.stopped),
                           frozenset(self.paused), {}, {}, {})


def test_a_paused_nodes_shutdown_that_times_out_leaves_it_stopped_and_not_paused(tmp_path, monkeypatch) -> None:
    cluster = _Fakes(tmp_path, monkeypatch)
    cluster.pause_node("broker-1")
    assert cluster.shutdown_node("broker-1") is False  # killed at its timeout
    assert cluster.procs["broker-1"].returncode == -9
    assert cluster.stopped == {"broker-1"} and cluster.paused == set()


def test_a_new_process_is_never_paused(tmp_path, monkeypatch) -> None:
    cluster = _Fakes(tmp_path, monkeypatch)
    cluster.stopped.add("broker-2")
    cluster.paused.add("broker-2")  # however it came to be left there
    cluster.restart_node("broker-2")
    assert cluster.paused == set() and cluster.stopped == set()


def test_a_resume_after_a_paused_nodes_shutdown_and_restart_resumes_nothing(tmp_path, monkeypatch) -> None:
    """The tester's schedule, fault after fault: the resume resolves to [], as in the sim."""
    cluster = _Fakes(tmp_path, monkeypatch)
    schedule = [ScheduledFault(1.0, "pause", "broker:1", {}, "faults[0]"),
                ScheduledFault(1.5, "shutdown", "broker:1", {}, "faults[1]"),
                ScheduledFault(3.0, "kill", "broker:2", {}, "faults[2]"),
                ScheduledFault(4.0, "restart", None, {}, "faults[3]"),
                ScheduledFault(5.0, "resume", None, {}, "faults[4]")]
    injector = FaultInjector(cluster, schedule, seed=1, record=tmp_path / "faults.jsonl")
    injector.fire_due(5.0)
    ends = {r["origin"]: (r["resolved"], r["effect"]) for r in read_jsonl(tmp_path / "faults.jsonl")
            if r["phase"] == "end"}
    assert ends["faults[1]"] == (["broker-1"], {"clean": {"broker-1": False}})
    assert ends["faults[3]"][0] == ["broker-1", "broker-2"]
    assert ends["faults[4]"] == ([], {"resumed": {}})
    assert [s for s, _ in cluster.signals] == ["STOP"]  # no SIGCONT to the new broker-1
    assert injector.undo_all()["resume"] is None


def test_a_node_that_exits_in_its_shutdown_is_restarted_from_inside_the_wait_and_left_running(
        tmp_path, monkeypatch) -> None:
    """A restart fired inside a wait nested in a node's controlled shutdown (trial25 t8 seed
    39, on processes): the node has exited, so it counts stopped (`shutdown_ended`) and the
    restart starts it; a nested wait's look finds no crash in its exit; the shutdown, when it
    looks, ends clean and leaves the new process running."""
    cluster = _Fakes(tmp_path, monkeypatch)
    old = cluster.procs["broker-1"]
    looks: list[str] = []

    def meanwhile() -> None:  # the injector's `while_waiting`, at the shutdown's first look
        if looks:
            return
        old.returncode = 0  # the node exits cleanly, as a controlled shutdown ends
        cluster._check_processes()  # a nested wait's look: no crash
        looks.append("restart" if cluster.shutdown_ended("broker-1") else "held")
        cluster.restart_node("broker-1")
    cluster.while_waiting = meanwhile
    assert cluster.shutdown_node("broker-1") is True and looks == ["restart"]
    assert cluster.procs["broker-1"] is not old and cluster.procs["broker-1"].poll() is None
    assert cluster.stopped == set() and cluster.paused == set()


def test_a_status_does_not_ask_a_node_whose_process_has_exited(tmp_path, monkeypatch) -> None:
    """trial27: inside a controlled shutdown's wait the node had exited but was not yet
    counted stopped, and every status (each fault due meanwhile resolves its targets on one,
    a remove-broker plans on one) waited the whole timeout for its answer: a restart due at
    3.3 s fired at 4.07 s."""
    from testbed.config.specs import NodeSpec

    cluster = _Fakes(tmp_path, monkeypatch)
    cluster.topology = SimpleNamespace(cluster=SimpleNamespace(controllers=()))
    cluster.brokers = [NodeSpec("broker", i, None) for i in (1, 2, 3)]
    asked: list[str] = []
    cluster.control = SimpleNamespace(call_all=lambda names, *args, **kwargs: asked.extend(names) or {})
    cluster.procs["broker-2"].returncode = 0  # its controlled shutdown has ended; its wait has not looked yet
    cluster.status()
    assert asked == ["broker-1", "broker-3"]
