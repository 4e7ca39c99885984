"""`run.py status`: leaders, ISR, ELR, HWM/LEO of the cluster running now, asked over the
nodes' control sockets with the run's token (read from its node configs)."""
from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console
from rich.table import Table

from broker.noderuntime.config import NodeConfig
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.control_client import ControlClient
from testbed.supervisor.processes import running_runs


def print_status(runs_dir: Path) -> int:
    console = Console()
    live = running_runs(runs_dir)
    if not live:
        console.print(f"no run is in progress under {runs_dir}/")
        return 1
    for reg in live:
        run_dir = Path(json.loads(reg.read_text()).get("run_dir", ""))
        configs = [NodeConfig.load(p) for p in sorted((run_dir / "nodes").glob("*.json"))]
        if not configs:
            continue
        client = ControlClient(configs[0].token)
        status = ClusterStatus.of(
            {c.name: client.call(c.control_endpoint, "status") for c in configs if c.kind == "controller"},
            {c.id: client.call(c.control_endpoint, "status") for c in configs if c.kind == "broker"})
        client.close()
        table = Table(title=f"{run_dir.name}")
        for col in ("partition", "leader", "epoch", "ISR", "ELR", "HWM", "LEO per replica"):
            table.add_column(col)
        for p in status.partitions():
            lead = status.replica(p.leader, p.topic, p.partition) if p.leader >= 0 else None
            leos = " ".join(f"{b}:{r.leo}" for b in p.replicas if (r := status.replica(b, p.topic, p.partition)))
            table.add_row(f"{p.topic}/{p.partition}", str(p.leader), str(p.leader_epoch), str(p.isr), str(p.elr),
                          str(lead.hwm) if lead else "-", leos)
        console.print(table)
        console.print(quorum_table(status))
    return 0


def quorum_table(status: ClusterStatus) -> Table:
    """The controller quorum (R22): each voter's role, term, log start (its snapshot's end),
    log end and commit end, and each broker's applied metadata offset."""
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
        applied = "-" if body is None else str(body.get("metadata_offset", -1) + 1)
        table.add_row(f"broker-{broker}", "broker", "-", "-", "-", "-", applied)
    return table
