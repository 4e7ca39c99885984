"""The observed answers to a lab's questions, from one judged run directory: the pipeline's
verdict (`results.json`: lost writes with their causes, divergence, placement,
unavailability), the counts (`summary.json`) and the records themselves (`events.jsonl` for
elections, ISR changes, truncations and controller elections; `history.jsonl` for the errors
clients saw; `final/replicas.jsonl` for the end state).

Each fact is a few plain sentences with the numbers in them, so that a student compares
them with the prediction; a fact with nothing to report says so ("none"), never nothing.
"""
from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.common.jsonl import read_jsonl
from testbed.analysis.runinfo import workload_start
from testbed.analysis.terminal import cause_line

#: at most this many lines per fact: a lab's answer, not a log
MAX_LINES = 8


def once_per_record(events: list[dict]) -> list[dict]:
    """The events, each controller record's once, the first recorded (as the analysis's
    ingest keeps them): a new leader records again the records it inherits that an earlier
    leader may have recorded, and an old state recorded again later would read as a change."""
    def time(e: dict) -> int:
        t = e.get("time_ns")
        return t if isinstance(t, int) else 0

    first: dict[int, dict] = {}
    for e in events:
        offset = e.get("metadata_offset")
        if isinstance(offset, int) and (offset not in first or time(e) < time(first[offset])):
            first[offset] = e
    return [e for e in events if not isinstance(e.get("metadata_offset"), int) or first[e["metadata_offset"]] is e]


@dataclass
class RunRecords:
    """What the facts read from a run directory."""

    run_dir: Path
    results: dict = field(default_factory=dict)
    counts: dict = field(default_factory=dict)
    events: list[dict] = field(default_factory=list)
    errors: Counter = field(default_factory=Counter)  # (f, acks, error) -> client operations
    replicas: list[dict] = field(default_factory=list)
    t0: int = 0  # time 0 of the pipeline's figures: the workload's start, else the first recorded time

    @classmethod
    def load(cls, run_dir: Path) -> RunRecords:
        def read(name: str) -> dict:
            path = run_dir / name
            return json.loads(path.read_text()) if path.is_file() else {}
        events = once_per_record(read_jsonl(run_dir / "events.jsonl"))
        history = read_jsonl(run_dir / "history.jsonl")
        faults = read_jsonl(run_dir / "faults.jsonl")
        times = [r["time_ns"] for r in (*events, *history, *faults) if isinstance(r.get("time_ns"), int)]
        errors = Counter((r.get("f"), str(r.get("acks", "-")), r["error"]) for r in history
                         if r.get("type") in ("fail", "info") and r.get("error"))
        # After the final read the supervisor shuts the cluster down: the elections and ISR
        # changes that causes are not what the run's faults did.
        stop = max((r["time_ns"] for r in history if isinstance(r.get("time_ns"), int)), default=None)
        if stop is not None:
            events = [e for e in events if e.get("time_ns", 0) <= stop]
        start = workload_start(run_dir)
        return cls(run_dir, read("results.json"), read("summary.json"), events, errors,
                   read_jsonl(run_dir / "final" / "replicas.jsonl"), min(times, default=0) if start is None else start)

    def at(self, time_ns: int) -> str:
        return f"{(time_ns - self.t0) / 1e9:.2f}s"

    def check(self, name: str) -> dict:
        return self.results.get("checks", {}).get(name) or {"count": 0, "examples": []}


def _partition(r: dict) -> str:
    return f"{r.get('topic')}/{r.get('partition')}"


def _capped(lines: list[str], more: str = "more") -> list[str]:
    if len(lines) <= MAX_LINES:
        return lines
    return [*lines[:MAX_LINES], f"... and {len(lines) - MAX_LINES} {more}"]


def acknowledged(run: RunRecords) -> list[str]:
    ops = run.counts.get("operations", {})
    acked = run.counts.get("acknowledged", {})
    by_acks = ", ".join(f"acks={k}: {v}" for k, v in sorted(acked.items()) if k != "0") or "none"
    lines = [f"acknowledged writes: {by_acks}; sends that failed: {ops.get('send:fail', 0)}, "
             f"with an unknown outcome (timed out): {ops.get('send:info', 0)}"]
    if acked.get("0"):  # R20: acks=0 gets no answer, so nothing of it is acknowledged
        lines.append(f"sent with acks=0 (no answer, so never acknowledged): {acked['0']}")
    return lines


def _lost(run: RunRecords, check: str, what: str) -> list[str]:
    c = run.check(check)
    if not c["count"]:
        return [f"no {what} write was lost"]
    values = ", ".join(f"{e.get('value')} (at {_partition(e)} offset {e.get('offset')})"
                       for e in c["examples"][:5])
    lines = [f"{c['count']} acknowledged {what} writes lost, e.g. {values}"]
    lines += _capped([cause_line(check, cause) for cause in c.get("causes", [])], "more causes (see the report)")
    if c.get("unattributed"):
        lines.append(f"{c['unattributed']} of them with no cause found in the records")
    return lines


def lost_writes(run: RunRecords) -> list[str]:
    return _lost(run, "lost_writes", "acks=all")


def lost_writes_acks1(run: RunRecords) -> list[str]:
    return _lost(run, "lost_writes_acks1", "acks=1")


def divergence(run: RunRecords) -> list[str]:
    c = run.check("log_divergence")
    if not c["count"]:
        return ["no two replicas differ below their high watermarks: the logs agree"]
    return _capped([f"{_partition(e)}: brokers {e.get('node_a')} and {e.get('node_b')} first differ at offset "
                     f"{e.get('offset')} ({e.get('value_a')} against {e.get('value_b')}), "
                     f"{e.get('offsets')} offsets in all below {e.get('bound')}" for e in c["examples"]])


def _changes(run: RunRecords, field: str) -> Iterator[tuple[dict, str, Any, Any]]:
    """(event, partition, before, after) for each `partition-changed` event that changes
    `field` of its partition; a partition's first event (its creation) sets it."""
    last: dict[str, Any] = {}
    for e in run.events:
        if e.get("kind") != "partition-changed":
            continue
        key, value = _partition(e), e.get(field)
        before = last.get(key)
        last[key] = value
        same = sorted(before) == sorted(value) if isinstance(value, list) and before is not None else before == value
        if before is not None and not same:
            yield e, key, before, value


def elections(run: RunRecords) -> list[str]:
    """Each leader change, with the log infos an unclean recovery decided on (R32)."""
    lines = []
    recoveries = _recoveries(run)
    for e, key, _, leader in _changes(run, "leader"):
        who = "no leader" if leader is None or leader < 0 else f"broker {leader} leads"
        chose = recoveries.get((key, e.get("leader_epoch"))) if e.get("reason") == "unclean-recovery" else None
        lines.append(f"{run.at(e['time_ns'])} {key}: {who} at leader epoch {e.get('leader_epoch')} "
                     f"({e.get('reason')}; ISR {e.get('isr')}, ELR {e.get('elr', [])})"
                     + (f"; {chose}" if chose else ""))
    return _capped(lines, "leader changes") or ["no leader changed: every partition kept its first leader"]


def _recoveries(run: RunRecords) -> dict[tuple[str, Any], str]:
    """(partition, leader epoch) -> what each unclean recovery chose from: the log infos it
    had (broker, last written epoch, LEO), or the operator's choice (`manual`)."""
    out = {}
    for e in run.events:
        if e.get("kind") != "unclean-recovery":
            continue
        infos = ", ".join(f"broker {i.get('broker')} epoch {i.get('last_written_epoch')} LEO {i.get('leo')}"
                          for i in sorted(e.get("log_infos") or [], key=lambda i: i.get("broker", 0)))
        out[(_partition(e), e.get("leader_epoch"))] = (f"{e.get('mode')}, from the log infos: {infos}" if infos
                                                       else f"{e.get('mode')}: the operator's choice")
    return out


_SETS = (("isr", "ISR"), ("elr", "ELR"), ("last_known_elr", "LastKnownELR"))


def isr_changes(run: RunRecords) -> list[str]:
    """Each committed change of a partition's ISR, ELR or LastKnownELR (R25-R29), with its reason."""
    lines = []
    last: dict[str, dict[str, list]] = {}
    for e in run.events:
        if e.get("kind") != "partition-changed":
            continue
        key = _partition(e)
        now = {f: sorted(e.get(f) or []) for f, _ in _SETS}
        before = last.get(key)
        last[key] = now
        if before is None:
            continue  # its creation
        said = []
        for f, name in _SETS:
            if now[f] != before[f]:
                verb = ("shrinks" if len(now[f]) < len(before[f]) else "grows" if len(now[f]) > len(before[f])
                        else "changes")
                said.append(f"{name} {verb} {before[f]} -> {now[f]}")
        if said:
            lines.append(f"{run.at(e['time_ns'])} {key}: {', '.join(said)} ({e.get('reason')})")
    return _capped(lines, "ISR and ELR changes") or ["no ISR or ELR change"]


def truncations(run: RunRecords) -> list[str]:
    lines = [f"{run.at(e['time_ns'])} {e.get('node')} truncated {_partition(e)} from offset {e.get('from')} "
             f"to {e.get('to')} ({e.get('reason')}, leader epoch {e.get('leader_epoch')})"
             for e in run.events if e.get("kind") == "truncated"]
    return _capped(lines, "truncations") or ["no replica truncated its log"]


def errors(run: RunRecords) -> list[str]:
    lines = [f"{n} {f} operations (acks={acks}) answered {code}" for (f, acks, code), n in run.errors.most_common()]
    return _capped(lines, "kinds of error") or ["no client operation failed"]


def unavailability(run: RunRecords) -> list[str]:
    figures = run.results.get("figures", {})
    total = figures.get("unavailable_s", {})
    lines = [f"partition-seconds without a leader: {total.get('no-leader', 0.0)}, "
             f"without acks=all service: {total.get('no-acks-all', 0.0)}"]
    lines += _capped([f"{_partition(w)} {w['kind']} from {w['start_s']}s to {w['end_s']}s"
                      for w in figures.get("availability", [])], "more windows (see the report)")
    return lines


def placement(run: RunRecords) -> list[str]:
    c = run.check("placement_violations")
    if not c["count"]:
        return ["every partition's replicas span as many racks as they can"]
    return _capped([f"{_partition(e)}: replicas {e.get('replicas')} span {e.get('racks_spanned')} of "
                    f"{e.get('racks')} racks" for e in c["examples"]])


def controllers(run: RunRecords) -> list[str]:
    lines = [f"{run.at(e['time_ns'])} {e.get('node')} became the active controller in term {e.get('term')}"
             for e in run.events if e.get("kind") == "controller-elected"]
    return _capped(lines, "elections") or ["no controller election was recorded"]


def final_state(run: RunRecords) -> list[str]:
    """Each partition's leader and ISR at the end (lab 1 asks for both: trial36 found no ISR),
    the ISR as the controller last committed it, and each replica's LEO and HWM."""
    by_partition: dict[str, list[dict]] = {}
    for r in run.replicas:
        by_partition.setdefault(_partition(r), []).append(r)
    isr: dict[str, list] = {}
    for e in sorted((e for e in run.events if e.get("kind") == "partition-changed"),
                    key=lambda e: (e.get("time_ns", 0), e.get("partition_epoch", 0))):
        isr[_partition(e)] = sorted(e.get("isr") or [])
    lines = []
    for key, reps in sorted(by_partition.items()):
        leader = next((r for r in reps if r.get("is_leader")), None)
        each = ", ".join(f"{r.get('node')} LEO {r.get('leo')} HWM {r.get('hwm')}" for r in reps)
        lines.append(f"{key}: leader {leader.get('node') if leader else 'none'}"
                     + (f", ISR {isr[key]}" if key in isr else "") + f"; {each}")
    return _capped(lines, "partitions") or ["no final replica state was recorded"]


#: fact name -> what it says; the names a guide's `answer:` lists may use
FACTS: dict[str, Callable[[RunRecords], list[str]]] = {
    "acknowledged": acknowledged,
    "lost_writes": lost_writes,
    "lost_writes_acks1": lost_writes_acks1,
    "divergence": divergence,
    "elections": elections,
    "isr_changes": isr_changes,
    "truncations": truncations,
    "errors": errors,
    "unavailability": unavailability,
    "placement": placement,
    "controllers": controllers,
    "final_state": final_state,
}


def answer(run: RunRecords, facts: tuple[str, ...] | list[str]) -> list[str]:
    """The lines that answer a question from one run: each fact's, in the order asked."""
    return [line for name in facts for line in FACTS[name](run)]
