"""What the terminal shows while a run works: client counters pushed by the workload
processes and the cluster's leaders and ISR sizes, redrawn twice a second with rich (plain
lines when the output is not a terminal, as in CI), each fault as it fires, and the counts
of operations at the end."""
from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager

from rich import box
from rich.console import Console
from rich.live import Live
from rich.table import Table

from faults.injector import FINAL_HEAL
from testbed.config.units import format_duration
from testbed.experiment.counts import Counts
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.cluster_view import partition_sides


def render(elapsed: float, duration: float, totals: Counter, status: ClusterStatus | None) -> Table:
    t = Table(title=f"isrlab  {elapsed:5.1f}s / {duration:.0f}s", show_header=True, expand=False, box=box.SIMPLE_HEAD,
              collapse_padding=True, pad_edge=False)
    # no vertical rules and headers of two lines: on an 80-column terminal "under-replicated"
    # and the rules took the width that three brokers' leaders needed ("b3:2" wrapped to a
    # second row); with more brokers the leaders wrap, and the counts stay whole
    for col in ("sent", "acked", "failed", "info", "polled", "leaders", "ISR\nsizes", "under-\nreplicated"):
        t.add_column(col, justify="right", no_wrap=col != "leaders", min_width=9 if col == "leaders" else None)
    leaders, isr, under = "-", "-", "-"
    if status is not None and status.controller:
        parts = status.partitions()
        per_broker = Counter(p.leader for p in parts)
        leaders = " ".join(f"{'none' if b < 0 else 'b' + str(b)}:{n}" for b, n in sorted(per_broker.items()))
        sizes = Counter(len(p.isr) for p in parts)
        isr = " ".join(f"{k}x{n}" for k, n in sorted(sizes.items(), reverse=True))
        under = str(sum(1 for p in parts if len(p.isr) < len(p.replicas)))
    t.add_row(*(str(totals[k]) for k in ("sent", "acked", "failed", "info", "polled")), leaders, isr, under)
    return t


class Monitor:
    def __init__(self, console: Console, duration: float) -> None:
        self.console = console
        self.duration = duration
        self.start = time.monotonic()
        self.live: Live | None = None
        self.next_line = 0.0

    def __enter__(self) -> "Monitor":
        if self.console.is_terminal:
            self.live = Live(console=self.console, refresh_per_second=4, transient=False)
            self.live.__enter__()
        return self

    def update(self, totals: Counter, status: ClusterStatus | None) -> None:
        elapsed = time.monotonic() - self.start
        if self.live is not None:
            self.live.update(render(elapsed, self.duration, totals, status))
        elif time.monotonic() >= self.next_line:
            self.next_line = time.monotonic() + 2.0
            self.console.print(render(elapsed, self.duration, totals, status))

    def __exit__(self, *exc: object) -> None:
        if self.live is not None:
            self.live.__exit__(None, None, None)

    @contextmanager
    def suspended(self) -> Iterator[None]:
        """The live display stopped (a lab's `--step` prompt writes and reads the terminal),
        then resumed; the workload runs that much longer, and its clock counts the pause, as
        the fault lines, the answers and the report do (trial31: 7.8 s beside a fault printed
        at 3.01 s; trial34: the fault lines on the schedule's clock read the failover wrong)."""
        if self.live is not None:
            self.live.stop()
        stopped = time.monotonic()
        try:
            yield
        finally:
            self.duration += time.monotonic() - stopped
            if self.live is not None:
                self.live.start()


def describe_fault(rec: dict, elapsed: float, on_schedule: float | None = None) -> str:
    """The line of a fault's end `elapsed` seconds into the workload; `on_schedule`, where the
    schedule was then when pauses (--step) set the two clocks apart."""
    effect = rec.get("effect", {})
    note = ""
    if effect.get("error") is not None:
        note = f" [red]{effect['error']}[/]"
    elif effect.get("accepted") and effect.get("message"):
        note = f" {effect['message']}"
    elif "skipped" in effect:
        note = f" [yellow](skipped: {effect['skipped']})[/]"
    elif (sides := partition_sides(rec)) is not None:
        note = " " + sides
    rebalance = effect.get("rebalance")
    refused = rebalance.get("refused") if isinstance(rebalance, dict) else None
    if refused:  # an add-broker or remove-broker whose rebalance could not make every move
        note += f" [yellow]({len(refused)} of its moves refused: " + "; ".join(
            f"{p} {why.split(':')[0]}" for p, why in sorted(refused.items())) + ")[/]"
    if effect.get("bridged"):  # a node in two groups: a broad name put it there (trial28: `clients` beside a leader)
        note += (f" [yellow](bridged: {', '.join(effect['bridged'])} in more than one group, cut off from "
                 f"none of them)[/]")
    if effect.get("slowed_by"):  # the netns backend without netem
        note += f" [yellow](slowed by {effect['slowed_by']})[/]"
    if effect.get("shutdown") is False:  # a remove-broker whose broker did not leave under control
        note += " [yellow](not clean: its controlled shutdown timed out and it was killed)[/]"
    killed = [n for n, clean in (effect.get("clean") or {}).items() if clean is False]
    if killed:  # R37's controlled shutdown did not finish in time: the node was killed instead
        why = ("the workload ended during its controlled shutdown" if effect.get("gave_up")
               else "its controlled shutdown timed out")
        note += f" [yellow](not clean: {', '.join(killed)} killed when {why})[/]"
    if effect.get("unchanged"):  # nodes it found as it would leave them (a kill of a node down)
        note += " [yellow](unchanged: " + ", ".join(f"{n} {why}" for n, why in effect["unchanged"].items()) + ")[/]"
    if effect.get("caveats"):
        note += "".join(f"\n  [yellow]caveat:[/] {c}" for c in effect["caveats"])
    target = f" {rec['target']}" if rec.get("target") else ""
    on = f" -> {', '.join(rec['resolved']) or '-'}" if rec.get("target") or rec.get("resolved") else ""
    if rec["do"] == "slow":  # what it does to which links, as a partition's line names its sides
        note = _slowed(rec) + note
    if rec.get("origin") == FINAL_HEAL:  # not the schedule's: the end of the run's own heal
        note += " (the end of the run's heal)"
    if on_schedule is not None:
        note += f" [dim](at {on_schedule:.2f}s of the schedule, after {elapsed - on_schedule:.2f}s of pauses)[/]"
    return f"[magenta]{elapsed:6.2f}s fault[/] {rec['do']}{target}{_admin_params(rec)}{on}{note}"


#: the parameters that say what an admin fault without a target acted on, as the report names them
_ADMIN_PARAMS = ("topic", "partition", "count", "replicas", "broker")


def _admin_params(rec: dict) -> str:
    params = rec.get("params") or {}
    shown = []
    for key in _ADMIN_PARAMS:
        value = params.get(key)
        if isinstance(value, dict):  # create-topic's topic, add-broker's broker
            value = value.get("name", value.get("id"))
        if value is not None:
            shown.append(f"{key} {value}")
    return f" ({', '.join(shown)})" if shown else ""


def _slowed(rec: dict) -> str:
    """` delay 300ms, jitter 200ms, duplicate 10% (broker-1 <-> clients)`: trial34's line said
    only `slow`."""
    params, effect = rec.get("params") or {}, rec.get("effect") or {}
    shown = [f"{key} {format_duration(params[key])}" for key in ("delay", "jitter") if key in params]
    shown += [f"{key} {params[key]:.0%}" for key in ("loss", "duplicate") if key in params]
    # an end the fault did not name is every node: listed, a whole-cluster slow named every
    # node twice and wrapped (trial38)
    ends = [", ".join(effect[key]) if key in params else "every node" for key in ("from", "to") if key in effect]
    links = "" if len(ends) < 2 else " (every link between nodes)" if ends == ["every node"] * 2 else \
        f" ({ends[0]} <-> {ends[1]})"
    return (" " + ", ".join(shown) if shown else "") + links


def did_nothing(rec: dict) -> bool:
    """An undo that found nothing to undo: the final heal's `restart` with nothing stopped, the
    `heal` of a nemesis partition that was skipped (max_down)."""
    effect = rec.get("effect") or {}
    return bool(effect) and "error" not in effect and not any(effect.values())


def print_counts(console: Console, c: Counts, converged: bool) -> None:
    ops = Table(title="operations")
    ops.add_column("f")
    for t in ("invoke", "ok", "fail", "info"):
        ops.add_column(t, justify="right")
    for f in sorted({f for f, _ in c.operations}):
        ops.add_row(f, *(str(c.operations.get((f, t), 0)) for t in ("invoke", "ok", "fail", "info")))
    console.print(ops)
    # an acks=0 send is ok once sent: nothing acknowledged it, so it is counted apart (trial28
    # read "acknowledged: acks=0: 1535"; trial38 still read it under "values acknowledged")
    acked = ", ".join(f"acks={acks}: {n}" for acks, n in sorted(c.acknowledged.items()) if acks != "0") or "none"
    sent = f"; sent with acks=0 (never acknowledged): {c.acknowledged['0']}" if c.acknowledged.get("0") else ""
    console.print(f"values acknowledged: {acked}{sent}; converged: {'yes' if converged else 'no'}")
