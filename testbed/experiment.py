"""One experiment from start to finish: `python run.py topologies/x.yaml`.

start the cluster -> run the workload for `duration` with live progress -> stop the
clients -> converge (every partition led, ISR full, replicas level) -> final read ->
final replica states -> controlled shutdown -> final logs from the files -> summary.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import zmq
from rich.console import Console
from rich.table import Table

from faults.schedule import build_schedule
from testbed.analysis import RunVerdict, analyze_runs, print_verdict
from testbed.analysis.cli import EXIT_UNJUDGED, exit_code
from testbed.cluster import Cluster, ClusterError
from testbed.faultrunner import UNSUPPORTED, FaultRunner
from testbed.finalize import final_read, write_logs, write_replicas
from testbed.history import History
from testbed.monitor import Monitor, StatsInbox
from testbed.procs import spawn
from testbed.summary import Summary, summarize
from testbed.topology import FaultSpec, Topology, not_yet_acted_on

#: Topology features this build acts on (the rest are reported as not yet acted on).
SUPPORTED: frozenset[str] = frozenset({"faults", "expect", "elr:false", "placement:explicit", "fsync:real",
                                       "medium:tmpfs"})


@dataclass
class Outcome:
    run_dir: Path
    converged: bool
    summary: Summary | None
    exit_code: int
    verdict: RunVerdict | None = None


class Workload:
    """The producer and consumer processes of a run."""

    def __init__(self, cluster: Cluster, stats_endpoint: str, value_bytes: int = 0) -> None:
        self.cluster = cluster
        self.stats_endpoint = stats_endpoint
        self.value_bytes = value_bytes
        #: the cluster's own record of its client processes (metrics sampling, close)
        self.procs: dict[str, subprocess.Popen] = cluster.client_procs

    def start(self) -> None:
        c = self.cluster
        t = c.topology
        brokers = {str(k): v for k, v in c.broker_endpoints().items()}
        common = {"brokers": brokers, "history": str(c.dir.history.resolve()), "supervisor_pid": os.getpid(),
                  "stats_endpoint": self.stats_endpoint, "request_timeout": c.scaled(2.0)}
        n = 0
        for spec in t.workload.producers:
            parts = list(spec.partitions) if spec.partitions else list(range(t.topic(spec.topic).partitions))
            for _ in range(spec.count):
                name = f"producer-{n}"
                n += 1
                self._start(name, {**common, "role": "producer", "process": name, "topic": spec.topic,
                                   "acks": spec.acks, "rate": spec.rate, "batch": spec.batch,
                                   "retries": spec.retries, "partitions": parts,
                                   "retry_backoff": c.scaled(0.05), "value_bytes": self.value_bytes})
        n = 0
        for spec in t.workload.consumers:
            total = t.topic(spec.topic).partitions
            for i in range(spec.count):
                name = f"consumer-{n}"
                n += 1
                parts = [p for p in range(total) if p % spec.count == i]
                if parts:
                    self._start(name, {**common, "role": "consumer", "process": name, "topic": spec.topic,
                                       "from": spec.from_, "partitions": parts, "max_wait": c.scaled(0.1)})

    def _start(self, name: str, cfg: dict) -> None:
        path = self.cluster.dir.clients / f"{name}.json"
        path.write_text(json.dumps(cfg, indent=1))
        proc = spawn(["-m", "testbed.workload", "--config", str(path)], self.cluster.dir.clients / f"{name}.log")
        self.procs[name] = proc
        assert self.cluster.registry is not None
        self.cluster.registry.add_process(proc.pid)

    def stop(self, timeout: float) -> None:
        """SIGTERM: each client finishes its operation in flight and records its completion."""
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        deadline = time.monotonic() + timeout
        for p in self.procs.values():
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def run_experiment(topology: Topology, runs_dir: Path = Path("runs"), time_scale: float = 1.0,
                   keep_data: bool = False, console: Console | None = None,
                   run_dir: Path | None = None, spark_master: str | None = None) -> Outcome:
    console = console or Console()
    for note in not_yet_acted_on(topology, SUPPORTED):
        console.print(f"[yellow]not yet acted on:[/] {note}")
    for f in topology.faults:
        actions = {f.do} if isinstance(f, FaultSpec) else set(f.do)
        for do in sorted(actions & UNSUPPORTED):
            console.print(f"[yellow]not yet acted on:[/] fault action `{do}` (recorded in faults.jsonl as not acted on)")
    cluster = Cluster(topology, run_dir=run_dir, runs_dir=runs_dir, time_scale=time_scale)
    converged = False
    try:
        t0 = time.monotonic()
        cluster.start()
        console.print(f"cluster ready in {time.monotonic() - t0:.2f}s: {len(topology.cluster.brokers)} brokers, "
                      f"{sum(tp.partitions for tp in topology.topics)} partitions led  "
                      f"[dim]({cluster.dir.root})[/]")
        sock = cluster.dir.socket_dir()
        inbox = StatsInbox(f"ipc://{sock}/stats.sock" if topology.network.transport != "tcp"
                           else "tcp://127.0.0.1:0")
        if inbox.endpoint.endswith(":0"):
            inbox.endpoint = inbox.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        for w in cluster.warnings:
            console.print(f"[yellow]warning:[/] {w}")
        workload = Workload(cluster, inbox.endpoint)
        runner = FaultRunner(cluster, build_schedule(topology), topology.seed)
        try:
            workload.start()
            start = time.monotonic()
            end = start + topology.duration * time_scale
            next_display = 0.0
            with Monitor(console, topology.duration * time_scale) as mon:
                while (now := time.monotonic()) < end:
                    for rec in runner.fire_due((now - start) / time_scale):
                        console.print(describe_fault(rec, now - start))
                    if now >= next_display:
                        next_display = now + 0.5
                        inbox.drain()
                        mon.update(inbox.totals(), cluster.status(timeout=0.2))
                    wake = [end, next_display]
                    if runner.next_at() is not None:
                        wake.append(start + runner.next_at() * time_scale)
                    time.sleep(max(0.0, min(wake) - time.monotonic()))  # until the next fault or redraw
                workload.stop(timeout=cluster.scaled(5.0))
                inbox.drain()
                mon.update(inbox.totals(), cluster.status(timeout=0.2))
            undone = runner.undo_all()
            for rec in undone.values():
                if rec is not None:
                    console.print(describe_fault(rec, time.monotonic() - start))
        finally:
            workload.stop(timeout=0.1)
            inbox.close()
            runner.close()
        try:
            cluster.wait_until(lambda s: s.fully_replicated(), timeout=cluster.scaled(30),
                               what="convergence (every partition led, ISR full, replicas level)")
            converged = True
        except ClusterError as e:
            console.print(f"[red]{e}[/]")
        partitions = [(tp.name, p) for tp in topology.topics for p in range(tp.partitions)]
        reader = History(cluster.dir.history, "final-reader")
        final_read(cluster.client(), reader, partitions, time.monotonic() + cluster.scaled(20), time.monotonic)
        reader.close()
        write_replicas(cluster.dir.final / "replicas.jsonl", cluster.status())
        cluster.stop_all()
        write_logs(cluster.dir.final / "logs.jsonl",
                   {s.name: cluster.dir.data_dir(s.name) for s in topology.cluster.brokers})
    except ClusterError as e:
        console.print(f"[red]run failed:[/] {e}")
        return Outcome(cluster.dir.root, False, None, EXIT_UNJUDGED)
    finally:
        cluster.close()
        if not keep_data:
            shutil.rmtree(cluster.dir.data, ignore_errors=True)
    summary = summarize(cluster.dir.root)
    (cluster.dir.root / "summary.json").write_text(json.dumps(summary.to_dict(), indent=1))
    print_summary(console, summary, converged)
    console.print("judging the run (PySpark) ...")
    verdict = analyze_runs([cluster.dir.root], spark_master)[0]
    print_verdict(console, verdict)
    console.print(f"run directory: {cluster.dir.root}")
    return Outcome(cluster.dir.root, converged, summary, exit_code([verdict]), verdict)


def describe_fault(rec: dict, elapsed: float) -> str:
    effect = rec.get("effect", {})
    note = ""
    if "error" in effect:
        note = f" [red]{effect['error']}[/]"
    elif "skipped" in effect:
        note = f" [yellow](skipped: {effect['skipped']})[/]"
    elif "groups" in effect:
        note = " " + " | ".join(",".join(g) for g in effect["groups"])
    target = f" {rec['target']}" if rec.get("target") else ""
    return f"[magenta]{elapsed:6.2f}s fault[/] {rec['do']}{target} -> {', '.join(rec['resolved']) or '-'}{note}"


def print_summary(console: Console, s: Summary, converged: bool) -> None:
    ops = Table(title="operations")
    ops.add_column("f")
    for t in ("invoke", "ok", "fail", "info"):
        ops.add_column(t, justify="right")
    for f in sorted({f for f, _ in s.operations}):
        ops.add_row(f, *(str(s.operations.get((f, t), 0)) for t in ("invoke", "ok", "fail", "info")))
    console.print(ops)
    vals = Table(title="acknowledged values")
    for col in ("acks", "acknowledged", "missing from final committed logs"):
        vals.add_column(col, justify="right")
    for acks in sorted(s.acknowledged):
        vals.add_row(acks, str(s.acknowledged[acks]), str(s.missing_count(acks)))
    console.print(vals)
    console.print(f"values in the final committed logs: {s.in_final_logs}; converged: {converged}")
    for acks, missing in s.missing.items():
        for m in missing[:5]:
            console.print(f"[red]missing (acks={acks}):[/] {m['value']} at {m['topic']}/{m['partition']} offset {m['offset']}")
    console.print("[dim]A count of acknowledged values; the verdict below is the pipeline's.[/]")
