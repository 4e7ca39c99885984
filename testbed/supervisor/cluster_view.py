"""The live view of a running cluster (`run.py status --watch`, a lab's `--step` pause): per
partition the leader, leader epoch, ISR, ELR and LastKnownELR, and each replica's LEO and HWM
as bars on the scale of the partition's longest log, with the faults in force. A student
watches the HWM stop while a follower is paused, the follower leave the ISR, the truncation
shorten a bar."""
from __future__ import annotations

import json
import time
from pathlib import Path

import yaml
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from broker.noderuntime.config import NodeConfig
from testbed.common.run_files import STARTED
from testbed.config.units import format_duration, parse_duration
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.control_client import ControlClient

BAR = 30  # characters for the longest log of a partition, when the terminal has room
MIN_BAR = 8  # ... and at the least, on a narrow terminal
INDENT, GAP = 2, 2  # a replica's line under its partition's; between its fields


def read_status(run_dir: Path, timeout: float = 0.3) -> ClusterStatus | None:
    """The cluster of a running run, asked over the nodes' control sockets with the run's
    token (read from its node configs); None when the run has no nodes (yet)."""
    configs = [NodeConfig.load(p) for p in sorted((run_dir / "nodes").glob("*.json"))]
    if not configs:
        return None
    client = ControlClient(configs[0].token)
    try:  # every node at once: one moment, whichever of them is dead or paused
        answers = client.call_all({(c.kind, c.name): c.control_endpoint for c in configs}, "status", timeout=timeout)
        return ClusterStatus.of({c.name: answers[(c.kind, c.name)] for c in configs if c.kind == "controller"},
                                {c.id: answers[(c.kind, c.name)] for c in configs if c.kind == "broker"})
    finally:
        client.close()


#: fault actions that hold until undone, and the action that undoes each (per node)
_UNDONE_BY = {"kill": "restart", "lossy-crash": "restart", "disk-loss": "restart", "shutdown": "restart",
              "pause": "resume"}
_NETWORK = ("partition", "slow")  # until a `heal` names them


def faults_in_force(records: list[dict]) -> list[str]:
    """The faults of a run's faults.jsonl still in force, as `do target -> nodes` lines: a
    kill, crash, disk loss or shutdown until its nodes restart, a pause until they resume, a
    partition or slow link until a heal; a fault that failed or acts at once (an election, a
    reassignment, an admin command) is not in force."""
    held: dict[str, tuple[dict, set[str]]] = {}  # origin -> (its end record, nodes still affected)
    for r in (r for r in records if r.get("phase") == "end" and "error" not in r.get("effect", {})):
        do, nodes = r.get("do"), set(r.get("resolved") or [])
        # a node it found as it would leave it (`unchanged`: a pause of a node down) is not
        # held by it: trial38's pause of a dead broker stayed in force after its resume
        acted = nodes - set((r.get("effect") or {}).get("unchanged") or {})
        if do in _UNDONE_BY and acted or do in _NETWORK:
            held[r["origin"]] = (r, acted if do in _UNDONE_BY else nodes)
        elif do == "heal":
            for origin in r.get("effect", {}).get("healed", []):
                held.pop(origin, None)
        for origin, (rec, left) in list(held.items()):
            if _UNDONE_BY.get(rec["do"]) == do:
                left -= nodes
                if not left:
                    del held[origin]
    return [_in_force(rec, left) for rec, left in held.values()]


def partition_sides(rec: dict) -> str | None:
    """The sides of a `partition` fault's end record as applied (`a,b | c`), or a one-way
    cut's ends (what the first sends the second is dropped, the other way still goes);
    None for a record without them."""
    groups = (rec.get("effect") or {}).get("groups")
    if rec.get("do") != "partition" or not groups:
        return None
    if (rec.get("params") or {}).get("shape") == "one-way":
        src, dst = groups
        return f"{','.join(src)} cut off from sending to {','.join(dst)} (one way)"
    return " | ".join(",".join(g) for g in groups)


def _in_force(rec: dict, left: set[str]) -> str:
    """`do target -> nodes`; a partition without a target shows its sides, a slow link what
    it slows (every link, or those from/to what it names) and by how much."""
    sides = partition_sides(rec)
    if not left and sides is not None:
        return "partition " + sides
    if left or rec.get("do") != "slow":
        return " ".join(filter(None, (rec["do"], rec.get("target"), "->", ", ".join(sorted(left)) or "-")))
    params = rec.get("params") or {}
    ends = " ".join(f"{end} {params[end]}" for end in ("from", "to") if params.get(end))
    how = ", ".join([*(f"{key} {format_duration(params[key])}" for key in ("delay", "jitter") if params.get(key)),
                     *(f"{key} {params[key]:g}" for key in ("loss", "duplicate") if params.get(key))])
    return " ".join(filter(None, ("slow", ends or "every link", f"({how})" if how else "")))


def bar(leo: int, hwm: int, longest: int, width: int = BAR) -> Text:
    """`████▒▒··`: committed records (below the HWM), records above it, and the rest of the
    partition's longest log, in `width` characters."""
    scale = width / max(longest, 1)
    committed = round(min(hwm, leo) * scale)
    above = max(0, round(leo * scale) - committed)
    text = Text("█" * committed, style="green")
    text.append("▒" * above, style="yellow")
    text.append("·" * max(0, width - committed - above), style="dim")
    return text


class ClusterView:
    """The frame of the live view: a line per partition (leader, leader epoch, ISR, ELR,
    LastKnownELR), under it a line per replica (its bar, LEO / HWM), then the faults in
    force. It is laid out when drawn: the bars take what the terminal's width leaves (`BAR`
    down to `MIN_BAR` characters), so that an 80-column terminal shows every field whole."""

    def __init__(self, status: ClusterStatus, title: str, faults: list[str],
                 removed: frozenset[str] = frozenset()) -> None:
        self.status, self.title, self.faults, self.removed = status, title, faults, removed

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows = []  # (partition line, [(replica, leo, hwm) or (replica, None, None)], longest log)
        for p in self.status.partitions():
            replicas = {b: self.status.replica(b, p.topic, p.partition) for b in p.replicas}
            head = Text(f"{p.topic}/{p.partition}", style="bold")
            head.append(f"  leader {p.leader if p.leader >= 0 else 'none'}  epoch {p.leader_epoch}  ISR {p.isr}  "
                        f"ELR {p.elr}  LastKnownELR {p.last_known_elr}")
            lines = []
            for broker, r in replicas.items():
                if r is None:
                    lines.append((f"broker-{broker}", None, None))
                    continue
                mark = " leader" if r.role == "leader" else "" if broker in p.isr else " out of ISR"
                lines.append((f"broker-{broker}{mark}", r.leo, r.hwm))
            rows.append((head, lines, max((r.leo for r in replicas.values() if r), default=0)))
        names = max((len(n) for _, lines, _ in rows for n, _, _ in lines), default=0)
        numbers = max((len(f"{leo} / {hwm}") for _, lines, _ in rows for _, leo, hwm in lines if leo is not None),
                      default=0)
        width = max(MIN_BAR, min(BAR, options.max_width - INDENT - names - numbers - 2 * GAP))
        yield Text(self.title, style="bold")
        legend = Text("LEO / HWM of each replica; its log: ", style="dim")
        legend.append("█", style="green").append(" committed, ", style="dim")
        legend.append("▒", style="yellow").append(" above the HWM", style="dim")
        yield legend
        for head, lines, longest in rows:
            yield head
            grid = Table.grid(padding=(0, GAP))
            grid.add_column(min_width=names + INDENT)
            grid.add_column(min_width=width)
            grid.add_column()
            for name, leo, hwm in lines:
                if leo is None:
                    grid.add_row(" " * INDENT + name, Text("down or silent", style="red"), "")
                else:
                    grid.add_row(" " * INDENT + name, bar(leo, hwm, longest, width), f"{leo} / {hwm}")
            yield grid
        yield self._lines()

    def _lines(self) -> Text:
        lines = Text("faults in force: " + ("; ".join(self.faults) if self.faults else "none"), style="magenta")
        down = [f"broker-{b}" for b, body in sorted(self.status.brokers.items()) if body is None]
        down += [name for name, body in sorted(self.status.quorum.items()) if body is None]
        if gone := [name for name in down if name in self.removed]:  # out of the cluster on purpose
            lines.append("\nremoved (R39): " + ", ".join(gone), style="dim")
        if down := [name for name in down if name not in self.removed]:
            lines.append("\nnot answering: " + ", ".join(down), style="red")
        return lines


def run_clock(run_dir: Path, now_ns: int | None = None) -> str:
    """Where a run in progress is on its workload's clock, from its time 0 (`STARTED`, the
    monotonic clock every process of the machine shares) and its topology's duration:
    `at 12.3s of 20s`, or that the workload has ended (healing, converging, the final read);
    empty before the workload starts and for a run of the Python API, which has no schedule
    (trial38: the live view had no clock)."""
    try:
        started = json.loads((run_dir / STARTED).read_text(encoding="utf-8"))
        start, scale = int(started["workload_start_ns"]), float(started.get("time_scale", 1.0))
        duration = parse_duration(yaml.safe_load((run_dir / "topology.yaml").read_text(encoding="utf-8"))["duration"])
    except (OSError, ValueError, KeyError, TypeError, yaml.YAMLError):
        return ""
    elapsed = ((time.monotonic_ns() if now_ns is None else now_ns) - start) / 1e9
    lasts = duration * scale  # as the run's progress line counts it: wall seconds, --time-scale included
    if elapsed > lasts:
        return f"its {lasts:g}s workload has ended: healing, converging, the final read"
    return f"at {max(elapsed, 0.0):.1f}s of its {lasts:g}s workload"


def removed_brokers(records: list[dict]) -> frozenset[str]:
    """The brokers a `remove-broker` of a run's faults.jsonl took out of the cluster for good
    (R39): trial34's `status --watch` called one "not answering"."""
    return frozenset(node for r in records if r.get("do") == "remove-broker" and r.get("phase") == "end"
                     and (r.get("effect") or {}).get("removed") for node in r.get("resolved") or [])


def cluster_view(status: ClusterStatus, title: str, faults: list[str],
                 removed: frozenset[str] = frozenset()) -> ClusterView:
    """The frame of the live view (see `ClusterView`)."""
    return ClusterView(status, title, faults, removed)
