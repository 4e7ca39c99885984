"""The end-of-run summary: what the clients did and whether their acknowledged values are
in the final committed logs. A count for the terminal, not the verdict: the checks and
their verdicts are the analysis pipeline's (`testbed/analysis/`)."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from broker.common.jsonl import read_jsonl


@dataclass
class Summary:
    operations: Counter = field(default_factory=Counter)  # (f, type) -> count
    acknowledged: dict[str, int] = field(default_factory=dict)  # acks -> values acknowledged
    in_final_logs: int = 0
    missing: dict[str, list[dict]] = field(default_factory=dict)  # acks -> acknowledged values missing
    unreadable_partitions: list[str] = field(default_factory=list)

    def missing_count(self, acks: str = "all") -> int:
        return len(self.missing.get(acks, []))

    def to_dict(self) -> dict:
        return {
            "operations": {f"{f}:{t}": n for (f, t), n in sorted(self.operations.items())},
            "acknowledged": self.acknowledged,
            "in_final_logs": self.in_final_logs,
            "missing": {k: len(v) for k, v in self.missing.items()},
            "missing_examples": {k: v[:20] for k, v in self.missing.items()},
            "unreadable_partitions": self.unreadable_partitions,
        }


def summarize(run_dir: Path) -> Summary:
    history = read_jsonl(run_dir / "history.jsonl")
    replicas = read_jsonl(run_dir / "final" / "replicas.jsonl")
    logs = read_jsonl(run_dir / "final" / "logs.jsonl")
    s = Summary()
    for op in history:
        s.operations[(op.get("f"), op.get("type"))] += 1
    leaders = {(r["topic"], r["partition"]): (r["node"], r["hwm"]) for r in replicas if r.get("is_leader")}
    committed: dict[tuple[str, int], dict[int, str]] = {}
    for rec in logs:
        key = (rec["topic"], rec["partition"])
        lead = leaders.get(key)
        if lead and rec["node"] == lead[0] and rec["offset"] < lead[1]:
            committed.setdefault(key, {})[rec["offset"]] = rec["value"]
    s.in_final_logs = sum(len(v) for v in committed.values())
    values_at = {key: set(v.values()) for key, v in committed.items()}
    acked: dict[str, list[dict]] = {}
    for op in history:
        if op.get("f") == "send" and op.get("type") == "ok":
            acked.setdefault(str(op.get("acks")), []).append(op)
    for acks, ops in acked.items():
        s.acknowledged[acks] = len(ops)
        s.missing[acks] = [
            {"topic": op["topic"], "partition": op["partition"], "value": op["value"], "offset": op.get("offset")}
            for op in ops if op["value"] not in values_at.get((op["topic"], op["partition"]), set())]
    s.unreadable_partitions = sorted(f"{t}/{p}" for (t, p) in set(
        (op["topic"], op["partition"]) for ops in acked.values() for op in ops) - set(leaders))
    return s
