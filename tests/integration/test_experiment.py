"""The whole product as a user runs it: `run.py` end to end, validate, dry run, and a
supervisor killed mid-run taking its nodes with it."""
from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil
import pytest
import yaml

import run
from broker.common.jsonl import read_jsonl
from testbed.analysis.runinfo import load_run_info
from testbed.common import owned_dirs
from testbed.common.run_files import STARTED
from testbed.experiment.runner import run_cluster, run_experiment
from testbed.supervisor.cluster import Cluster
from testbed.topology import parse_topology
from tests.integration.conftest import TIME_SCALE, committed_duplicates, topology_dict

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_healthy_run_writes_the_run_directory(tmp_path: Path) -> None:
    topo = parse_topology(topology_dict(partitions=3, duration="3s"), "test")
    out = run_experiment(topo, runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    assert out.exit_code == 0, f"run failed, see {out.run_dir}"
    d = out.run_dir
    for f in ("topology.yaml", "history.jsonl", "events.jsonl", "final/logs.jsonl",
              "final/replicas.jsonl", "metrics.jsonl", "nodes/broker-1.log", "nodes/controller-1.log"):
        assert (d / f).exists(), f
    history = read_jsonl(d / "history.jsonl")
    acked = [h for h in history if h["f"] == "send" and h["type"] == "ok"]
    assert acked and all("offset" in h for h in acked)
    assert any(h["process"] == "final-reader" for h in history)
    assert any(h["f"] == "poll" and h["process"].startswith("consumer-") for h in history)
    assert out.verdict is not None and out.verdict.results["checks"]["lost_writes"]["count"] == 0
    assert len(read_jsonl(d / "final/replicas.jsonl")) == 9
    kinds = {e["kind"] for e in read_jsonl(d / "events.jsonl")}
    assert {"registered", "became-leader", "became-follower", "partition-changed"} <= kinds
    resolved = yaml.safe_load((d / "topology.yaml").read_text())
    assert resolved["timing"]["session_timeout"] == "800ms"
    scaled = (d / "topology.yaml").read_text().startswith(f"# run with --time-scale {TIME_SCALE:g}:")
    assert scaled == (TIME_SCALE != 1)  # what a scaled run's times mean, said where its topology is
    assert not (d / "data").exists()  # removed without --keep-data
    assert not list((tmp_path / "runs" / ".live").glob(f"{owned_dirs.EARLY_LOG_PREFIX}*")), "the JVM's early log was not settled"


def test_cli_validate_and_dry_run(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ncluster: {brokers: [{id: 1}]}\ntopics: [{name: t, partitions: 1, replication_factor: 2}]\n")
    r = subprocess.run([sys.executable, "run.py", "validate", str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 1
    assert "topics[0].replication_factor" in r.stderr and str(bad) in r.stderr
    r = subprocess.run([sys.executable, "run.py", "topologies/kill-leader.yaml", "--dry-run"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "leader-of orders/0" in r.stdout and "# fault schedule" in r.stdout
    assert "held to the defaults" not in r.stdout  # it states its own expect: block
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(topology_dict(partitions=1)))
    r = subprocess.run([sys.executable, "run.py", str(plain), "--dry-run"], cwd=ROOT, capture_output=True, text=True)
    assert "held to the defaults, lost_writes: 0, inconsistent_offsets: 0" in r.stdout, r.stdout
    assert "time-scale" not in r.stdout
    r = subprocess.run([sys.executable, "run.py", str(plain), "--dry-run", "--time-scale", "3"], cwd=ROOT,
                       capture_output=True, text=True)
    assert r.stdout.startswith("# --time-scale 3: every time here"), r.stdout
    r = subprocess.run([sys.executable, "run.py", str(bad)], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 2 and "replication_factor" in r.stderr


def test_faulted_run_with_a_nemesis_converges_without_loss(tmp_path: Path) -> None:
    faults = [{"at": "1s", "do": "kill", "target": "leader-of orders/0"},
              {"at": "2500ms", "do": "restart"},
              {"nemesis": {"from": "500ms", "until": "4s", "every": "700ms..1s", "do": ["pause", "kill"],
                           "target": ["random-broker"], "max_down": 1}}]
    topo = parse_topology(topology_dict(partitions=2, duration="5s", faults=faults), "test")
    out = run_experiment(topo, runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    assert out.exit_code == 0, f"run failed, see {out.run_dir}"
    lines = read_jsonl(out.run_dir / "faults.jsonl")
    ends = [f for f in lines if f["phase"] == "end"]
    assert len([f for f in lines if f["phase"] == "start"]) == len(ends)
    kill = next(f for f in ends if f["origin"] == "faults[0]")
    assert kill["resolved"] and kill["effect"]["killed"]
    fired = [f for f in ends if f["origin"].startswith("faults[2].nemesis#") and not f["origin"].endswith(".undo")
             and "skipped" not in f["effect"]]
    assert fired, "the nemesis fired nothing"
    # Every fault the nemesis fired was undone: by its own undo, or (when the workload ended
    # first) by the final restart/resume, which must then name the nodes it took down.
    undone = {f["params"]["undo_of"] for f in ends if f["origin"].endswith(".undo")}
    final = {n for f in ends if f["origin"] == "final-heal" for n in f["resolved"]}
    for f in fired:
        assert f["origin"] in undone or set(f["resolved"]) <= final, f"nemesis fault never undone: {f}"
    assert out.verdict is not None and out.verdict.results["checks"]["lost_writes"]["count"] == 0


def _start_run(topo: Path, runs: Path, stderr: int) -> subprocess.Popen:
    """`python run.py <topo>` as a user starts it, its output read as it comes."""
    return subprocess.Popen([sys.executable, "run.py", str(topo), "--runs-dir", str(runs),
                             "--time-scale", str(TIME_SCALE)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=stderr, text=True)


def _read_until(proc: subprocess.Popen, seen: Callable[[str], bool], never: str) -> None:
    """Read `proc`'s output up to the first line `seen` accepts; fail with `never` at its end."""
    assert proc.stdout is not None
    for line in proc.stdout:
        if seen(line):
            return
    pytest.fail(never)


def test_nodes_die_with_a_killed_supervisor(tmp_path: Path) -> None:
    """Issue 3's guarantee: a SIGKILLed supervisor with a paused node and tmpfs mounts
    leaves no process that survives 2 s, and its mounts and sockets go with it (its
    watchman), not only at the next invocation."""
    topo = tmp_path / "t.yaml"
    medium = "tmpfs" if os.geteuid() == 0 else "disk"
    topo.write_text(yaml.safe_dump(topology_dict(partitions=1, duration="60s", storage={"medium": medium},
                                                 faults=[{"at": "0s", "do": "pause", "target": "broker:2"}])))
    runs = tmp_path / "runs"
    sup = _start_run(topo, runs, subprocess.STDOUT)
    try:
        _read_until(sup, lambda line: "fault" in line and "pause" in line, "the run never reached its first fault")
        reg = next((runs / ".live").glob("*.json"))
        registry_text = reg.read_text()
        pids = [p["pid"] for p in json.loads(registry_text)["processes"]]
        assert len(pids) >= 4
        scratch = [*runs.glob(f".live/{owned_dirs.EARLY_LOG_PREFIX}{sup.pid}-*"),
                   *Path(tempfile.gettempdir()).glob(f"{owned_dirs.REHEARSAL_PREFIX}{sup.pid}-*")]
        assert scratch, "the run's JVM has no early log directory"
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait()
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie" for p in pids):
            time.sleep(0.02)  # polling the process table against a deadline
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
        assert not alive, f"processes outlived the supervisor by 2 s: {alive}"
    finally:
        if sup.poll() is None:
            sup.kill()
    registered = json.loads(registry_text)
    mounts = registered["mounts"]
    assert (medium == "tmpfs") == bool(mounts)
    # the run's watchman reaps at once, no later command needed
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and reg.exists():
        time.sleep(0.05)  # polling the registry against a deadline
    assert not reg.exists(), "the killed run was not reaped by its watchman"
    with open("/proc/mounts") as f:
        table = f.read()
    assert not [m for m in mounts if f" {m} " in table], "a tmpfs mount outlived the run"
    assert not list(Path(registered["sock_dir"]).glob("*.sock")), "socket files outlived the run"
    # and the supervisor's scratch (its JVM's early log, its rehearsal's run), once its JVM stopped
    deadline = time.monotonic() + 10.0
    while time.monotonic() < deadline and any(d.exists() for d in scratch):
        time.sleep(0.05)  # polling the directories against a deadline
    assert not [d for d in scratch if d.exists()], "the supervisor's scratch outlived it"
    assert run.main(["status", "--runs-dir", str(runs)]) == 1  # no run in progress, nothing left to reap


def test_a_supervisor_killed_before_its_cluster_starts_leaves_no_run_directory(tmp_path: Path) -> None:
    """SIGKILL in a run's first second, while its JVM starts and before its cluster does: a
    run directory holding only `analysis/spark.log` was left for good. The JVM's log is in an
    owned directory of `runs/.live/` until the run ends, and the next run's warm-up removes
    what a killed supervisor left there (`testbed/experiment/warm_up.py`)."""
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump(topology_dict(partitions=1, duration="60s")))
    runs = tmp_path / "runs"
    sup = _start_run(topo, runs, subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 30 * TIME_SCALE
        while time.monotonic() < deadline and not list(runs.glob(f".live/{owned_dirs.EARLY_LOG_PREFIX}*/spark.log")):
            time.sleep(0.01)  # the JVM's start: polled against a deadline
        early = list(runs.glob(f".live/{owned_dirs.EARLY_LOG_PREFIX}*"))
        assert early, "the run never started its JVM"
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait()
    finally:
        if sup.poll() is None:
            sup.kill()
    # a directory of the run, if its cluster began in the meantime, is the cluster's, never a log alone
    assert all((d / "topology.yaml").exists() for d in runs.iterdir() if not d.name.startswith(".")), \
        [sorted(p.name for p in d.rglob("*")) for d in runs.iterdir()]
    owned_dirs.make(owned_dirs.EARLY_LOG_PREFIX, runs / ".live")  # what the next run's warm-up does first
    assert not any(d.exists() for d in early)


def _javas(pid: int) -> list[int]:
    """The JVMs among a process's descendants."""
    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True) if c.name() == "java"]
    except psutil.NoSuchProcess:
        return []


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"),
                                                  (signal.SIGTERM, 143, "terminated (SIGTERM)")])
def test_ctrl_c_during_a_run_stops_it_with_one_line_and_exit_130(tmp_path: Path, sig: int, code: int,
                                                                  word: str) -> None:
    """Ctrl-C (SIGINT) mid-run: the cluster and the analysis JVM are stopped before the exit,
    the terminal gets one line (no traceback), and the exit code is 130 (README, exit codes).
    SIGTERM, a CI job's timeout, alike with 143: it killed the supervisor before its finally
    blocks, and a matrix ended so said nothing."""
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump(topology_dict(partitions=1, duration="60s")))
    runs = tmp_path / "runs"
    sup = _start_run(topo, runs, subprocess.PIPE)
    try:
        _read_until(sup, lambda line: "cluster ready" in line, "the run never started its cluster")
        pids = [p["pid"] for r in (runs / ".live").glob("*.json") for p in json.loads(r.read_text())["processes"]]
        deadline = time.monotonic() + 60 * TIME_SCALE
        while time.monotonic() < deadline and not _javas(sup.pid):
            time.sleep(0.1)  # the analysis JVM starts beside the cluster: polled against a deadline
        pids += _javas(sup.pid)
        _interrupt(sup, sig, code, word, pids)
        assert not list((runs / ".live").glob("*.json")), "the run stayed registered as running"
    finally:
        if sup.poll() is None:
            sup.kill()


def _interrupt(sup: subprocess.Popen, sig: int, code: int, word: str, pids: list[int]) -> None:
    """Send `sig` to a run: it exits `code` with its one line (`isrlab: WORD; ...`) and no
    traceback, and none of `pids` (its nodes, its JVM) outlives it."""
    sup.send_signal(sig)
    try:
        _, err = sup.communicate(timeout=60 * TIME_SCALE)
    except subprocess.TimeoutExpired:  # once in many CI runs: where it hangs, for the next engineer
        sup.send_signal(signal.SIGUSR1)  # run.py prints every thread's stack (faulthandler)
        try:
            _, err = sup.communicate(timeout=5)
        except subprocess.TimeoutExpired as still:
            err = (still.stderr or b"").decode(errors="replace") if isinstance(still.stderr, bytes) else still.stderr or ""
        pytest.fail(f"no exit {60 * TIME_SCALE:g} s after {signal.Signals(sig).name}; its threads:\n{err[-8000:]}")
    assert sup.returncode == code, err
    assert "Traceback" not in err and f"isrlab: {word}; everything it started is stopped" in err, err
    alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    assert pids and not alive, f"processes outlived the interrupted run: {alive}"


def test_an_interrupt_while_the_run_is_judged_kills_its_jvm_and_leaves_nothing(tmp_path: Path) -> None:
    """trial38: Ctrl-C or SIGTERM while the run was judged waited for the queries under way
    beside the checks (a pool's exit waits for its tasks), 6-9 s of a busy JVM and a silent
    terminal. The judgment is abandoned: the JVM is killed first, every process is gone, and
    the one line and 143 follow."""
    topo = tmp_path / "t.yaml"
    topo.write_text(yaml.safe_dump(topology_dict(partitions=1, duration="2s")))
    runs = tmp_path / "runs"
    sup = _start_run(topo, runs, subprocess.PIPE)
    try:
        _read_until(sup, lambda line: "judging the run" in line, "the run was never judged")
        _interrupt(sup, signal.SIGTERM, 143, "terminated (SIGTERM)", _javas(sup.pid))
    finally:
        if sup.poll() is None:
            sup.kill()


def test_pipelined_producer_overlaps_requests_and_the_checks_count_what_it_causes(tmp_path: Path) -> None:
    """`in_flight: 5` keeps up to five produce requests outstanding; with a leader killed under
    it, retries may reorder and duplicate values (Kafka without idempotence). Whatever happened,
    `duplicates` and `nonmonotonic_sends` count what the files show, computed here apart."""
    workload = {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "max", "batch": 2,
                               "in_flight": 5, "partitions": [0]}]}
    faults = [{"at": "1500ms", "do": "kill", "target": "leader-of orders/0"}, {"at": "2500ms", "do": "restart"}]
    topo = parse_topology(topology_dict(partitions=1, duration="4s", workload=workload, faults=faults), "test")
    out = run_experiment(topo, runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    assert out.verdict is not None, f"run not judged, see {out.run_dir}"
    history = [h for h in read_jsonl(out.run_dir / "history.jsonl") if h["f"] == "send"]
    outstanding = most = 0
    for h in history:
        outstanding += 1 if h["type"] == "invoke" else -1
        most = max(most, outstanding)
    assert outstanding == 0, "every invoke has its completion"
    assert most > 2, f"at most {most} values in flight: the producer did not pipeline"  # batch 2: > one request
    checks = out.verdict.results["checks"]
    assert checks["lost_writes"]["count"] == 0
    assert checks["duplicates"]["count"] == committed_duplicates(out.run_dir)
    first_sent: dict[str, int] = {}
    for h in history:
        if h["type"] == "invoke":
            first_sent.setdefault(h["value"], h["time_ns"])
    acked = sorted((first_sent[h["value"]], h["offset"]) for h in history if h["type"] == "ok")
    backwards = sum(b[1] <= a[1] for a, b in itertools.pairwise(acked))
    assert checks["nonmonotonic_sends"]["count"] == backwards


def _hold_clients(monkeypatch: pytest.MonkeyPatch, seconds: float, names: tuple[str, ...] | None = None) -> list[int]:
    """Stop the clients (or those of `names`) as they are spawned and resume them `seconds`
    after the cluster's start has ended; returns the list the moment of the resume goes into."""
    resumed: list[int] = []
    spawn, begin = Cluster.start_clients, Cluster.start_workload
    held: list[int] = []

    def spawn_held(self: Cluster, *args: object, **kwargs: object) -> list[str]:
        started = spawn(self, *args, **kwargs)
        held.extend(p.pid for n, p in self.client_procs.items() if names is None or n in names)
        for pid in held:
            os.kill(pid, signal.SIGSTOP)
        return started

    def resume() -> None:
        resumed.append(time.monotonic_ns())
        for pid in held:
            os.kill(pid, signal.SIGCONT)

    def begin_held(self: Cluster, *args: object, **kwargs: object) -> int:
        timer = threading.Timer(seconds, resume)
        timer.daemon = True
        timer.start()
        return begin(self, *args, **kwargs)
    monkeypatch.setattr(Cluster, "start_clients", spawn_held)
    monkeypatch.setattr(Cluster, "start_workload", begin_held)
    return resumed


def test_the_schedules_time_0_is_when_every_client_runs_not_when_it_was_spawned(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A client process takes 0.2 s to start on an idle machine and took 4 s on a loaded one:
    R30's run then crashed its leader before the producer's first send, and lost nothing to
    show. The clients here are held stopped until 1.5 s after the cluster's start; the
    workload's time 0 (summary.json's `workload_start_ns`) follows their resume, and no
    fault and no client record comes before it."""
    resumed = _hold_clients(monkeypatch, 1.5)
    faults = [{"at": "200ms", "do": "pause", "target": "leader-of orders/0"}, {"at": "400ms", "do": "resume"}]
    topo = parse_topology(topology_dict(partitions=1, duration="1s", faults=faults), "test")
    out = run_cluster(topo, runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    summary = json.loads((out.run_dir / "summary.json").read_text())
    start = summary["workload_start_ns"]
    assert resumed and start > resumed[0], f"time 0 {start} came before the clients ran ({resumed})"
    assert json.loads((out.run_dir / STARTED).read_text()) == {"workload_start_ns": start, "time_scale": TIME_SCALE}  # said at once too
    # its end, which the report's "workload ended" line is drawn at, is its scaled duration on
    assert summary["workload_end_ns"] - start >= 1e9 * TIME_SCALE
    assert load_run_info(out.run_dir).workload_seconds == (summary["workload_end_ns"] - start) / 1e9
    fired = [f["time_ns"] for f in read_jsonl(out.run_dir / "faults.jsonl")]
    assert fired and min(fired) > resumed[0], "a fault fired while the clients were not running yet"
    assert out.counts is not None and out.counts.acknowledged, f"no write acknowledged, see {out.run_dir}"
    # each client begins at its go, given after time 0 was taken: no record precedes it
    assert min(h["time_ns"] for h in read_jsonl(out.run_dir / "history.jsonl")) > start


def test_a_client_not_running_by_the_deadline_joins_when_it_runs_and_the_run_says_so(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """trial31: a producer stopped past the supervisor's wait never got its go, and nothing in
    the run directory said the workload judged was half the topology's. Here the wait is cut
    to 0.2 s (before the time scale) and producer-0 held 2 s: the consumer begins at time 0,
    the producer when it runs, and summary.json's `clients_late` says when."""
    from testbed.supervisor import cluster
    monkeypatch.setattr(cluster, "CLIENT_START_WAIT", 0.2)
    resumed = _hold_clients(monkeypatch, 2.0, ("producer-0",))
    topo = parse_topology(topology_dict(partitions=1, duration="2s"), "test")
    out = run_cluster(topo, runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
    summary = json.loads((out.run_dir / "summary.json").read_text())
    start = summary["workload_start_ns"]
    assert resumed and start < resumed[0], "the supervisor waited for the held producer"
    joined = summary["clients_late"]["producer-0"]
    assert joined is not None and joined >= (resumed[0] - start) / 1e9
    sends = [h for h in read_jsonl(out.run_dir / "history.jsonl") if h["process"] == "producer-0"]
    assert sends and min(h["time_ns"] for h in sends) >= start + joined * 1e9 - 1e6
    assert load_run_info(out.run_dir).clients_late == {"producer-0": joined}
