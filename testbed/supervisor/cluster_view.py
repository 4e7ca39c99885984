"""The live view of a running cluster (`run.py status --watch`, a lab's `--step` pause): per
partition the leader, leader epoch, ISR, ELR and LastKnownELR, and each replica's LEO and HWM
as bars on the scale of the partition's longest log, with the faults fired so far. A student
watches the HWM stop while a follower is paused, the follower leave the ISR, the truncation
shorten a bar."""
from __future__ import annotations

from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from broker.common.jsonl import read_jsonl
from broker.noderuntime.config import NodeConfig
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.control_client import ControlClient

BAR = 30  # characters for the longest log of a partition
RECENT_FAULTS = 4


def read_status(run_dir: Path, timeout: float = 0.3) -> ClusterStatus | None:
    """The cluster of a running run, asked over the nodes' control sockets with the run's
    token (read from its node configs); None when the run has no nodes (yet)."""
    configs = [NodeConfig.load(p) for p in sorted((run_dir / "nodes").glob("*.json"))]
    if not configs:
        return None
    client = ControlClient(configs[0].token)
    try:
        return ClusterStatus.of(
            {c.name: client.call(c.control_endpoint, "status", timeout=timeout) for c in configs
             if c.kind == "controller"},
            {c.id: client.call(c.control_endpoint, "status", timeout=timeout) for c in configs if c.kind == "broker"})
    finally:
        client.close()


def recent_faults(run_dir: Path, count: int = RECENT_FAULTS) -> list[str]:
    """The last faults fired, as `do target -> nodes` lines (from the run's faults.jsonl)."""
    ends = [r for r in read_jsonl(run_dir / "faults.jsonl") if r.get("phase") == "end"]
    return [" ".join(filter(None, (r.get("do"), r.get("target"), "->", ", ".join(r.get("resolved") or []) or "-")))
            for r in ends[-count:]]


def bar(leo: int, hwm: int, longest: int) -> Text:
    """`████▒▒··`: committed records (below the HWM), records above it, and the rest of the
    partition's longest log."""
    scale = BAR / max(longest, 1)
    committed = round(min(hwm, leo) * scale)
    above = max(0, round(leo * scale) - committed)
    text = Text("█" * committed, style="green")
    text.append("▒" * above, style="yellow")
    text.append("·" * max(0, BAR - committed - above), style="dim")
    return text


def cluster_view(status: ClusterStatus, title: str, faults: list[str]) -> Group:
    """The frame of the live view."""
    table = Table(title=title, title_justify="left", expand=False)
    for col in ("partition", "leader", "epoch", "ISR", "ELR", "LastKnownELR", "replica", "LEO / HWM", ""):
        table.add_column(col, no_wrap=True)
    for p in status.partitions():
        replicas = {b: status.replica(b, p.topic, p.partition) for b in p.replicas}
        longest = max((r.leo for r in replicas.values() if r), default=0)
        for i, (broker, r) in enumerate(replicas.items()):
            head = ([f"{p.topic}/{p.partition}", str(p.leader) if p.leader >= 0 else "none", str(p.leader_epoch),
                     str(p.isr), str(p.elr), str(p.last_known_elr)] if i == 0 else [""] * 6)
            if r is None:
                table.add_row(*head, f"broker-{broker}", Text("down or silent", style="red"), "")
                continue
            mark = " leader" if r.role == "leader" else "" if broker in p.isr else " out of ISR"
            table.add_row(*head, f"broker-{broker}{mark}", bar(r.leo, r.hwm, longest), f"{r.leo} / {r.hwm}")
    lines = Text("faults fired: " + ("; ".join(faults) if faults else "none"), style="magenta")
    down = [f"broker-{b}" for b, body in sorted(status.brokers.items()) if body is None]
    down += [name for name, body in sorted(status.quorum.items()) if body is None]
    if down:
        lines.append("\nnot answering: " + ", ".join(down), style="red")
    return Group(table, lines)
