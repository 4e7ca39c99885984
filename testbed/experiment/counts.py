"""What the clients did, counted for the terminal and `summary.json`: operations by kind and
outcome, and values acknowledged per acks setting. Whether anything acknowledged was lost is
not counted here: that is the pipeline's `lost_writes`, the one definition of loss."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from broker.common.jsonl import read_jsonl


@dataclass
class Counts:
    operations: Counter = field(default_factory=Counter)  # (f, type) -> count
    acknowledged: dict[str, int] = field(default_factory=dict)  # acks -> values acknowledged

    def to_dict(self) -> dict:
        return {
            "operations": {f"{f}:{t}": n for (f, t), n in sorted(self.operations.items())},
            "acknowledged": self.acknowledged,
        }


def count_operations(run_dir: Path) -> Counts:
    c = Counts()
    for op in read_jsonl(run_dir / "history.jsonl"):
        c.operations[(op.get("f"), op.get("type"))] += 1
        if op.get("f") == "send" and op.get("type") == "ok":
            acks = str(op.get("acks"))
            c.acknowledged[acks] = c.acknowledged.get(acks, 0) + 1
    return c
