"""One experiment from start to verdict: `python run.py topologies/x.yaml`.

start the cluster -> run the workload for `duration` with live progress while the fault
injector fires the schedule -> stop the clients -> undo the faults -> converge (every
partition led, ISR full, replicas level) -> final read -> final replica states ->
controlled shutdown -> final logs from the files -> counts -> the pipeline's verdict.
"""
from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

from faults.schedule import ScheduledFault, build_schedule
from testbed.analysis.cli import EXIT_UNJUDGED, exit_code
from testbed.analysis.session import connect_url, full_priority, is_remote
from testbed.clients.final_read import final_read
from testbed.clients.history import History
from testbed.common.console import user_console
from testbed.common.run_files import STARTED
from testbed.experiment.counts import Counts, count_operations, write_summary
from testbed.experiment.final_state import partitions_now, record_final_state
from testbed.experiment.progress import Monitor, describe_fault, did_nothing, print_counts
from testbed.experiment.warm_up import settle_log, warm_up_for
from testbed.supervisor.cluster import Cluster, ClusterError
from testbed.supervisor.client_configs import CLIENT_START_WAIT
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.netns import refusal as netns_refusal
from testbed.supervisor.run_dir import new_run_id
from testbed.config.features import not_yet_acted_on
from testbed.config.nemesis_section import never_firing
from testbed.config.topology_spec import Topology

if TYPE_CHECKING:
    from testbed.analysis.verdict import RunVerdict

#: Topology features this build acts on (the rest are reported as not yet acted on).
SUPPORTED: frozenset[str] = frozenset({
    "faults", "expect", "elr:false", "placement:explicit", "fsync:real", "medium:tmpfs",
    "truncation:high-watermark", "fencing:zookeeper", "unclean-leader-election",  # tests/integration/test_protocol_modes.py
    "unclean-recovery:none", "unclean-recovery:proactive", "unclean-recovery:manual",
    "controller-quorum",  # tests/integration/test_controller_quorum.py
    "network:netns",  # tests/integration/test_netns.py
})


@dataclass
class Outcome:
    run_dir: Path
    converged: bool
    counts: Counts | None
    exit_code: int
    verdict: RunVerdict | None = None


#: Called with the cluster's status and the faults about to fire (those due at one moment),
#: when a lab runs `--step`; the run's clock (the schedule and the workload's end) stands
#: still while it returns.
BeforeFault = Callable[[ClusterStatus, list[ScheduledFault]], None]


def run_experiment(topology: Topology, runs_dir: Path = Path("runs"), time_scale: float = 1.0,
                   keep_data: bool = False, console: Console | None = None,
                   run_dir: Path | None = None, spark_master: str | None = None,
                   before_fault: BeforeFault | None = None) -> Outcome:
    """Run the topology, then judge it (the whole of `python run.py x.yaml`)."""
    console = console or user_console()
    run_dir = run_dir or runs_dir / new_run_id(topology.name, topology.seed)
    # The JVM starts, and rehearses the pipeline, while the cluster runs (at a low priority);
    # what it prints goes to the run's analysis/spark.log once the run has ended.
    warm_up_for(run_dir, spark_master)
    try:
        outcome = run_cluster(topology, runs_dir, time_scale, keep_data, console, run_dir, before_fault)
    finally:
        settle_log(run_dir)
    full_priority()
    if outcome.counts is None:
        return outcome
    # on a shared server (`run.py spark up`) it says so: trial38 could tell only by the run's
    # missing analysis/spark.log (the warm-up has chosen the session by now, or is choosing it)
    where = f", on the Spark server {connect_url()}" if is_remote() else ""
    console.print(f"judging the run (PySpark{escape(where)}) ...", emoji=False)
    # imported here, not with this module: the pipeline's imports (PySpark's Connect client,
    # pandas, the report's plotting) cost a second the cluster's start would wait for, and
    # the warm-up's thread has made them while the cluster ran
    from testbed.analysis.pipeline import analyze_runs
    from testbed.analysis.terminal import print_verdict
    verdict = analyze_runs([outcome.run_dir], spark_master)[0]
    print_verdict(console, verdict)
    console.print(f"run directory: {escape(str(outcome.run_dir))}", emoji=False, soft_wrap=True)
    return Outcome(outcome.run_dir, outcome.converged, outcome.counts, exit_code([verdict]), verdict)


def run_cluster(topology: Topology, runs_dir: Path = Path("runs"), time_scale: float = 1.0,
                keep_data: bool = False, console: Console | None = None,
                run_dir: Path | None = None, before_fault: BeforeFault | None = None) -> Outcome:
    """Everything up to the verdict: the run directory complete, not judged yet (so that
    several runs can be judged in one Spark job). `exit_code` is EXIT_UNJUDGED until judged."""
    console = console or user_console()
    for note in never_firing(topology):
        console.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    for note in not_yet_acted_on(topology, SUPPORTED):
        console.print(f"[yellow]not yet acted on:[/] {note}")
    if (refused := netns_refusal(topology)) is not None:
        console.print(f"[red]refused:[/] {refused}")
        return Outcome(run_dir or runs_dir / new_run_id(topology.name, topology.seed), False, None, EXIT_UNJUDGED)
    cluster = Cluster(topology, run_dir=run_dir, runs_dir=runs_dir, time_scale=time_scale, keep_data=keep_data)
    converged = False
    workload_ns = workload_end_ns = None
    try:
        t0 = time.monotonic()
        cluster.start(workload=True)
        console.print(f"cluster ready in {time.monotonic() - t0:.2f}s: {len(topology.cluster.brokers)} brokers, "
                      f"{(n := sum(tp.partitions for tp in topology.topics))} partition{'s' * (n != 1)} led  "
                      f"[dim]({cluster.dir.root})[/]")
        inbox = cluster.inbox
        assert inbox is not None
        for w in cluster.warnings:
            console.print(f"[yellow]warning:[/] {w}")
        injector = cluster.injector
        assert injector is not None
        injector.load(build_schedule(topology))
        try:
            # Time 0 of the schedule is when every client runs, not when it was spawned: on a
            # loaded machine a client took 4 s to start, and a fault `at: 1s` found no write.
            workload_ns = cluster.start_workload()
            late = list(cluster.late_clients)
            start = workload_ns / 1e9
            (cluster.dir.root / STARTED).write_text(json.dumps({"workload_start_ns": workload_ns,
                                                                "time_scale": time_scale}))
            if late:
                one = len(late) == 1
                console.print(f"[yellow]warning:[/] {', '.join(late)} {'is' if one else 'are'} not running "
                              f"{cluster.scaled(CLIENT_START_WAIT):g} s after {'its' if one else 'their'} start: "
                              f"the workload starts without {'it' if one else 'them'} (summary.json's "
                              f"clients_late says when {'it joins' if one else 'each joins'}, if ever)")
            end = start + topology.duration * time_scale
            injector.elapsed = lambda: (time.monotonic() - start) / time_scale
            injector.duration = topology.duration  # a fault's wait gives up then, for the heal below

            paused = 0.0  # the schedule's pauses so far (--step), which the records' clock counts

            def said(rec: dict) -> str:
                """A fault's line, at its end on the records' clock: the report's and a lab's
                answers' (trial34: with --step's pauses left out, a kill at 6.93 s showed at
                3.01 s and the failover after it read 4.5 s), and where the schedule was then."""
                ended = rec["time_ns"] / 1e9 - start  # on the schedule's clock: start moves on at a pause
                return describe_fault(rec, ended + paused, ended if paused else None)
            next_display = 0.0
            with Monitor(console, topology.duration * time_scale) as mon:
                while (now := time.monotonic()) < end:
                    if before_fault is not None and (
                            due := [f for f in injector.pending if f.at <= (now - start) / time_scale]):
                        with mon.suspended():
                            before_fault(cluster.status(timeout=0.5), due)
                        waited = time.monotonic() - now
                        start, end, now, paused = start + waited, end + waited, now + waited, paused + waited
                    for rec in injector.fire_due((now - start) / time_scale):
                        if rec["params"].get("undo_of") and did_nothing(rec):
                            continue  # the undo of a nemesis fault that was skipped (max_down)
                        console.print(said(rec))
                    next_fault = None if injector.next_at() is None else start + injector.next_at() * time_scale
                    if now >= next_display:
                        next_display = now + 0.5
                        inbox.drain()  # a node that does not answer (starting again) holds no fault back
                        for name in cluster.release_late():
                            console.print(f"[yellow]warning:[/] {name} runs now, {cluster.late_clients[name]:g} s "
                                          f"into the workload: it joins it")
                        wait = 0.2 if next_fault is None else min(0.2, max(0.02, next_fault - time.monotonic()))
                        mon.update(inbox.totals(), cluster.status(timeout=wait))
                    wake = [end, next_display]
                    if next_fault is not None:
                        wake.append(next_fault)
                    time.sleep(max(0.0, min(wake) - time.monotonic()))  # until the next fault or redraw
                # A fault that waited up to the workload's end, where its wait gave up (a
                # remove-broker whose moves never completed), held back those due after it: they
                # fire now, late, not never; and so do those due at the end itself.
                workload_end_ns = time.monotonic_ns()
                for rec in injector.fire_overdue(topology.duration):
                    console.print(said(rec))
                injector.elapsed = None
                cluster.stop_clients(timeout=cluster.scaled(5.0))
                inbox.drain()
                mon.update(inbox.totals(), cluster.status(timeout=0.2))
            undone = injector.undo_all()
            for rec in undone.values():
                if rec is not None and not did_nothing(rec):
                    console.print(said(rec))
        finally:
            cluster.stop_clients(timeout=0.1)
        converged = end_of_run(cluster, topology, console)
    except ClusterError as e:
        # a tester's --time-scale 0.01: the start's 0.1 s wait was the only hint of the cause
        hint = (f" (--time-scale {time_scale:g} shortens every timeout and deadline alike, this wait's too; "
                f"a cluster of processes needs about 1 s to start: try a larger one)" if time_scale < 0.1 else "")
        console.print(f"[red]run failed:[/] {escape(str(e))}{hint}", soft_wrap=True, emoji=False)  # e names the run dir
        return Outcome(cluster.dir.root, False, None, EXIT_UNJUDGED)
    finally:
        cluster.close()
        if not keep_data:
            shutil.rmtree(cluster.dir.data, ignore_errors=True)
    counts = write_counts(cluster.dir.root, workload_ns, workload_end_ns, cluster.late_clients)
    print_counts(console, counts, converged)
    return Outcome(cluster.dir.root, converged, counts, EXIT_UNJUDGED)


def end_of_run(cluster: Cluster, topology: Topology, console: Console) -> bool:
    """What follows a run's workload once its faults are undone (Jepsen's final read): wait
    for convergence, read every partition to its end as `final-reader`, record the replicas,
    shut every node down under control and record their logs from the files (`final/`).
    Returns whether the cluster converged (a run that did not is judged unjudged)."""
    converged = False
    try:
        cluster.wait_until(lambda s: s.fully_replicated(), timeout=cluster.scaled(30),
                           what="convergence (every partition led, ISR full, replicas level)")
        converged = True
    except ClusterError as e:
        console.print(f"[red]{escape(str(e))}[/]", emoji=False)
        for line in _unconverged(cluster, topology):
            console.print(f"[red]  {escape(line)}[/]", emoji=False)
    reader = History(cluster.dir.history, "final-reader")
    final_read(cluster.client(), reader, partitions_now(cluster.status(), topology),
               time.monotonic() + cluster.scaled(20), time.monotonic)
    reader.close()
    record_final_state(cluster)
    return converged


def _unconverged(cluster: Cluster, topology: Topology, most: int = 8) -> list[str]:
    """The partitions that kept the cluster from converging, as the status shows them now;
    under `unclean_recovery: manual`, a leaderless one waits for the operator (R32)."""
    try:
        status = cluster.status()
    except ClusterError:
        return []
    lines = status.unconverged()
    out = lines[:most] + ([f"and {len(lines) - most} more"] if len(lines) > most else [])
    if topology.protocol.unclean_recovery == "manual" and any(p.leader < 0 for p in status.partitions()):
        out.append("under unclean_recovery: manual a partition whose ISR and ELR are gone has no leader until "
                   "an `elect` fault names one (R32)")
    return out


def write_counts(run_dir: Path, workload_start_ns: int | None = None, workload_end_ns: int | None = None,
                 clients_late: dict[str, float | None] | None = None) -> Counts:
    """The run's operation counts, read back from its history, into `summary.json`, with the
    moments its workload started (time 0 of its fault schedule, and so of every time the
    analysis reports; `time_ns` clock) and ended, and the clients late at its start
    (`counts.write_summary`)."""
    counts = count_operations(run_dir)
    write_summary(run_dir, counts, workload_start_ns, workload_end_ns, clients_late)
    return counts


