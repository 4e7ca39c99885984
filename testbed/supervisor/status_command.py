"""`run.py status [--watch]`: leaders, ISR, ELR, HWM/LEO of the cluster running now, asked
over the nodes' control sockets with the run's token (read from its node configs); with
`--watch`, the live view of `cluster_view` redrawn several times a second."""
from __future__ import annotations

import json
import os
import time
from contextlib import nullcontext
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from broker.common.jsonl import read_jsonl
from testbed.common.console import user_console
from testbed.common.run_files import ANALYSIS_DIR
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.cluster_view import cluster_view, faults_in_force, read_status, removed_brokers, run_clock
from testbed.supervisor.processes import running_runs


def print_status(runs_dir: Path) -> int:
    console = user_console()
    live = running_runs(runs_dir)
    if not live:
        console.print(Text(f"no run is in progress (under {runs_dir}/ or any runs directory of this machine)"
                           + _judged_now(runs_dir)))
        return 1
    for run_dir in map(_run_dir, live):
        status = read_status(run_dir, timeout=1.0)
        if status is None:
            continue
        console.print(partition_table(status, _title(run_dir)))
        console.print(quorum_table(status, removed_brokers(read_jsonl(run_dir / "faults.jsonl"))))
    return 0


def partition_table(status: ClusterStatus, title: str) -> Table:
    """Each partition as the controller has it, with its leader's HWM and every replica's
    LEO. A leader that does not answer (killed, paused, before the controller fences it) is
    marked so: its row read as a live leader with an unknown HWM (trial26)."""
    table = Table(title=Text(title))
    for col in ("partition", "leader", "epoch", "ISR", "ELR", "HWM", "LEO per replica"):
        table.add_column(col)
    for p in status.partitions():
        lead = status.replica(p.leader, p.topic, p.partition) if p.leader >= 0 else None
        silent = p.leader >= 0 and status.brokers.get(p.leader) is None
        leos = " ".join(f"{b}:{r.leo}" for b in p.replicas if (r := status.replica(b, p.topic, p.partition)))
        table.add_row(f"{p.topic}/{p.partition}", f"{p.leader}{' (down or silent)' if silent else ''}",
                      str(p.leader_epoch), str(p.isr), str(p.elr), str(lead.hwm) if lead else "-", leos)
    return table


def watch_status(runs_dir: Path, period: float = 0.25, frames: int | None = None,
                 console: Console | None = None) -> int:
    """`status --watch`: the live view of the runs in progress, redrawn every `period`
    seconds until Ctrl-C, until no run is in progress any more, or after `frames` frames."""
    console = console or user_console()
    if not running_runs(runs_dir):
        console.print(Text(f"no run is in progress (under {runs_dir}/ or any runs directory of this machine)"
                           + _judged_now(runs_dir)))
        return 1
    gone = Text(f"no run is in progress any more (under {runs_dir}/ or any runs directory of this machine)")
    drawn = 0
    # on a terminal a Live view redrawn in place; elsewhere each frame printed (a Live printed
    # only its last there: trial33's `--frames 3` in a pipe showed one)
    with Live(console=console, auto_refresh=False, transient=False) if console.is_terminal else nullcontext() as live:
        def show(frame: Group | Text) -> None:
            if live is None:
                console.print(frame)
            else:
                live.update(frame, refresh=True)
        try:
            while frames is None or drawn < frames:
                view = _view(runs_dir)
                show(view if view is not None else gone)
                if view is None:
                    break
                drawn += 1
                time.sleep(period)  # the redraw period of a live view
        except KeyboardInterrupt:
            pass
    return 0


def _view(runs_dir: Path) -> Group | None:
    """One frame of the runs in progress; None when there is none any more."""
    runs = [_run_dir(r) for r in running_runs(runs_dir)]
    if not runs:
        return None
    views = []
    for run_dir in runs:
        status = read_status(run_dir)
        records = read_jsonl(run_dir / "faults.jsonl")
        views.append(cluster_view(status, _title(run_dir), faults_in_force(records), removed_brokers(records))
                     if status is not None
                     else Text(f"{run_dir.name}: starting"))
    return Group(*views)


def _judged_now(runs_dir: Path, locks: Path = Path("/proc/locks")) -> str:
    """`; being judged now: NAME, ...` for the runs of `runs_dir` whose judgment is under way
    (their `analysis/` directory is locked by it), else nothing: a run's registry goes with its
    cluster, and `status` said "no run is in progress" while its run.py judged for 15 s more
    (trial38). Read from the kernel's table of locks: taking the lock to look would make a
    judgment starting that instant wait, and say so on its terminal."""
    try:
        table = locks.read_text()
    except OSError:
        return ""
    held = set()
    for line in table.splitlines():  # `1: FLOCK  ADVISORY  WRITE 2433 fe:00:2146712 0 EOF`
        fields = line.split()
        if len(fields) > 5 and fields[1] == "FLOCK":
            held.add(tuple(fields[5].split(":")))
    judged = []
    for run_dir in sorted(runs_dir.iterdir()) if runs_dir.is_dir() else []:
        try:
            st = (run_dir / ANALYSIS_DIR).stat()
        except OSError:  # no judgment yet, or not a run's directory
            continue
        if (f"{os.major(st.st_dev):02x}", f"{os.minor(st.st_dev):02x}", str(st.st_ino)) in held:
            judged.append(run_dir.name)
    return f"; being judged now (its cluster has stopped): {', '.join(judged)}" if judged else ""


def _title(run_dir: Path) -> str:
    """The run's name, and where it is on its workload's clock."""
    clock = run_clock(run_dir)
    return f"{run_dir.name}, {clock}" if clock else run_dir.name


def _run_dir(registration: Path) -> Path:
    return Path(json.loads(registration.read_text()).get("run_dir", ""))


def quorum_table(status: ClusterStatus, removed: frozenset[str] = frozenset()) -> Table:
    """The controller quorum (R22): each voter's role, term, log start (its snapshot's end),
    log end and commit end, and each broker's applied metadata offset. A broker that does not
    answer is marked as a voter is (trial38: a killed broker's row read as a live one's), or
    as removed (R39) when a `remove-broker` took it out."""
    table = Table(title="metadata quorum")
    for col in ("node", "role", "term", "leader", "snapshot", "log end", "commit end / applied"):
        table.add_column(col)
    for name, body in sorted(status.quorum.items()):
        q = (body or {}).get("quorum")
        if q is None:
            table.add_row(name, "down or silent", "-", "-", "-", "-", "-")
            continue
        role = q["role"] + (" (active)" if body.get("active") else "")
        table.add_row(name, role, str(q["term"]), str(q["leader_id"]), str(q.get("log_start", 0)),
                      str(q["log_end"]), str(q["commit_end"]))
    for broker, body in sorted(status.brokers.items()):
        name = f"broker-{broker}"
        if body is None:
            table.add_row(name, "removed (R39)" if name in removed else "broker, down or silent", "-", "-", "-", "-",
                          "-")
        else:
            table.add_row(name, "broker", "-", "-", "-", "-", str(body.get("metadata_offset", -1) + 1))
    return table
