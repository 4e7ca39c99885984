"""Carries out a run's fault schedule on the real cluster and records it in `faults.jsonl`.

The schedule is plain data made from the topology and the seed (`faults/schedule.py`);
this module is the nemesis's `invoke!`: at each fault's time it resolves the target
against the cluster as it is at that moment (`faults/targets.py`), acts on processes,
files or the link table, and records a `start` and an `end` line with what the target
resolved to and what the fault did. After the workload it undoes everything still in
force (heal, resume, restart) so that a loss is never mistaken for unavailability.
"""
from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

from broker.noderuntime.eventlog import JsonlAppender
from faults import network
from faults.schedule import ScheduledFault
from faults.storage import disk_loss, lossy_crash_files
from faults.targets import ClusterView, TargetError, resolve
from testbed.cluster import Cluster

#: actions that take nodes down, counted against a nemesis's max_down
_DOWN_ACTIONS = frozenset({"kill", "pause", "shutdown", "lossy-crash", "disk-loss", "partition"})
#: actions whose behaviour arrives with later issues (reassignment, preferred and manual elections)
UNSUPPORTED = frozenset({"reassign", "elect-preferred", "elect"})


@dataclass
class FaultRunner:
    cluster: Cluster
    schedule: list[ScheduledFault]
    seed: int
    max_down: dict[str, int] = field(default_factory=dict)  # nemesis origin prefix -> max_down

    def __post_init__(self) -> None:
        self.out = JsonlAppender(self.cluster.dir.faults)
        self.rng = random.Random(f"isrlab-faults:{self.seed}")
        self.pending = sorted(self.schedule, key=lambda f: f.at)
        self.done: dict[str, list[str]] = {}  # origin -> nodes it acted on
        self.isolated: set[str] = set()
        self.seq = 0
        self.fired = 0

    # ------------------------------------------------------------------ schedule
    def next_at(self) -> float | None:
        return self.pending[0].at if self.pending else None

    def fire_due(self, elapsed: float) -> list[dict]:
        """Fire every fault whose time has come; returns their end records."""
        ends = []
        while self.pending and self.pending[0].at <= elapsed:
            ends.append(self.fire(self.pending.pop(0)))
        return ends

    # ------------------------------------------------------------------ one fault
    def _view(self) -> ClusterView:
        c = self.cluster
        return ClusterView.from_status(
            c.status(timeout=c.scaled(0.3)),
            brokers={s.name: s.rack for s in c.topology.cluster.brokers},
            controllers=[s.name for s in c.topology.cluster.controllers],
            stopped=frozenset(c.stopped), paused=frozenset(c.paused))

    def _resolve(self, target: str | None, view: ClusterView) -> list[str]:
        if target is None:
            return []
        return resolve(target, view, self.rng)

    def fire(self, f: ScheduledFault) -> dict:
        view = self._view()
        undo_of = f.params.get("undo_of")
        try:
            if undo_of is not None:
                resolved = list(self.done.pop(undo_of, []))
            else:
                resolved = self._resolve(f.target, view)
        except TargetError as e:
            resolved, error = [], str(e)
        else:
            error = None
        params = {k: v for k, v in f.params.items()}
        base = {"do": f.do, "target": f.target, "resolved": resolved, "params": params, "origin": f.origin}
        self._record({**base, "phase": "start"})
        if error is not None:
            effect: dict[str, Any] = {"error": error}
        elif f.do in UNSUPPORTED:
            effect = {"error": f"`{f.do}` is not acted on in this build"}
        elif self._exceeds_max_down(f, resolved):
            effect = {"skipped": "max_down"}
        else:
            effect = self._apply(f, resolved, view)
            if f.origin.startswith("nemesis") and undo_of is None and resolved:
                self.done[f.origin] = list(resolved) if f.do != "partition" else effect.get("isolated", resolved)
        self.fired += 1
        end = {**base, "phase": "end", "effect": effect}
        self._record(end)
        return end

    def _exceeds_max_down(self, f: ScheduledFault, resolved: list[str]) -> bool:
        if f.do not in _DOWN_ACTIONS or "undo_of" in f.params:
            return False
        limit = next((m for origin, m in self.max_down.items() if f.origin.startswith(origin)), None)
        if limit is None:
            return False
        c = self.cluster
        down = set(c.stopped) | set(c.paused) | self.isolated
        return len(down | set(resolved)) > limit

    def _record(self, line: dict) -> None:
        self.out.write({"time_ns": time.monotonic_ns(), **line})

    # ------------------------------------------------------------------ actions
    def _apply(self, f: ScheduledFault, nodes: list[str], view: ClusterView) -> dict[str, Any]:
        c = self.cluster
        do = f.do
        up = [n for n in nodes if n not in c.stopped]
        if do == "kill":
            return {"killed": {n: c.kill(n) for n in up}}
        if do == "pause":
            return {"paused": {n: c.pause(n) for n in up if n not in c.paused}}
        if do == "resume":
            return {"resumed": {n: c.resume(n) for n in nodes if n in c.paused}}
        if do == "restart":
            return {"restarted": {n: c.restart(n) for n in nodes if n in c.stopped}}
        if do == "shutdown":
            return {"clean": {n: c.shutdown_node(n) for n in up}}
        if do == "lossy-crash":
            effect: dict[str, Any] = {"killed": {}, "files": {}}
            for n in up:
                if not n.startswith("broker-"):
                    effect["killed"][n] = c.kill(n)
                    continue
                effect["killed"][n] = c.kill(n)
                effect["files"][n] = lossy_crash_files(c.dir.data_dir(n), f.params["loss"], self.rng)
            return effect
        if do == "disk-loss":
            effect = {"killed": {}, "removed": {}}
            for n in up:
                effect["killed"][n] = c.kill(n)
                if n.startswith("broker-"):
                    effect["removed"][n] = disk_loss(c.dir.data_dir(n))
            return effect
        if do in ("partition", "slow", "heal"):
            return self._network(f, nodes, view)
        raise ValueError(f"unknown fault action {do!r}")

    def _network(self, f: ScheduledFault, nodes: list[str], view: ClusterView) -> dict[str, Any]:
        c = self.cluster
        all_nodes = [s.name for s in c.nodes()]
        self.seq += 1
        p = f.params
        if f.do == "heal":
            counters = c.link_counters()
            table = network.heal_table(self.seq)
            self.isolated.clear()
            c.push_links(table)
            return {"dropped_by_link": counters}
        if f.do == "slow":
            src = self._targets(p.get("from"), view) or all_nodes
            dst = self._targets(p.get("to"), view) or all_nodes
            table = network.slow_table(src, dst, p.get("delay", 0.0), p.get("jitter", 0.0),
                                       p.get("loss", 0.0), p.get("duplicate", 0.0), self.seq)
            c.push_links(table)
            return {"table": table.to_dict()}
        shape = p.get("shape")
        if shape == "one-way":
            src, dst = self._targets(p["from"], view), self._targets(p["to"], view)
            table = network.one_way_table(src, dst, all_nodes, self.seq)
            isolated: list[str] = []
            groups: list[list[str]] = [src, dst]
        else:
            if "groups" in p:
                groups = [sorted({n for member in g for n in self._targets(member, view)}) for g in p["groups"]]
            else:
                groups = network.shape_groups(shape, all_nodes, nodes, self.rng)
            table = network.partition_table(groups, all_nodes, self.seq)
            smallest = min(groups, key=len) if groups else []
            isolated = [n for n in smallest if n != "clients"]
        self.isolated |= set(isolated)
        acked = c.push_links(table)
        return {"groups": groups, "isolated": isolated, "table": table.to_dict(), "pushed": acked}

    def _targets(self, spec: Any, view: ClusterView) -> list[str]:
        if spec is None:
            return []
        specs = spec if isinstance(spec, list) else [spec]
        out: list[str] = []
        for s in specs:
            out.extend(self._resolve(str(s), view))
        return out

    # ------------------------------------------------------------------ the end of the workload
    def undo_all(self) -> dict:
        """Heal the network, resume paused nodes, restart stopped ones (DESIGN section 6)."""
        c = self.cluster
        self.pending.clear()
        healed = self.fire(ScheduledFault(0.0, "heal", None, {}, "final-heal"))
        resumed = self.fire(ScheduledFault(0.0, "resume", "paused", {}, "final-heal")) if c.paused else None
        restarted = self.fire(ScheduledFault(0.0, "restart", "stopped", {}, "final-heal")) if c.stopped else None
        return {"heal": healed, "resume": resumed, "restart": restarted}

    def close(self) -> None:
        self.out.close()
