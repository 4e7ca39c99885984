"""The live view of a running cluster (`run.py status --watch`, a lab's `--step` pause): per
partition the leader, leader epoch, ISR, ELR and LastKnownELR, and each replica's LEO and HWM
as bars on the scale of the partition's longest log, with the faults in force. A student
watches the HWM stop while a follower is paused, the follower leave the ISR, the truncation
shorten a bar."""
from __future__ import annotations

from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from broker.noderuntime.config import NodeConfig
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.control_client import ControlClient

BAR = 30  # characters for the longest log of a partition


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
        if do in _UNDONE_BY or do in _NETWORK:
            held[r["origin"]] = (r, nodes)
        elif do == "heal":
            for origin in r.get("effect", {}).get("healed", []):
                held.pop(origin, None)
        for origin, (rec, left) in list(held.items()):
            if _UNDONE_BY.get(rec["do"]) == do:
                left -= nodes
                if not left:
                    del held[origin]
    return [" ".join(filter(None, (rec["do"], rec.get("target"), "->", ", ".join(sorted(left)) or "-")))
            for rec, left in held.values()]


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
    lines = Text("faults in force: " + ("; ".join(faults) if faults else "none"), style="magenta")
    down = [f"broker-{b}" for b, body in sorted(status.brokers.items()) if body is None]
    down += [name for name, body in sorted(status.quorum.items()) if body is None]
    if down:
        lines.append("\nnot answering: " + ", ".join(down), style="red")
    return Group(table, lines)
