"""What the clients did, counted for the terminal and `summary.json`: operations by kind and
outcome, and values acknowledged per acks setting. Whether anything acknowledged was lost is
not counted here: that is the pipeline's `lost_writes`, the one definition of loss."""
from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from broker.common.jsonl import read_jsonl
from testbed.common.run_files import FINAL_FILES


#: the (f, type) of a record that acknowledges a value
_ACKNOWLEDGED = ("send", "ok")


@dataclass
class Counts:
    operations: Counter = field(default_factory=Counter)  # (f, type) -> count
    acknowledged: dict[str, int] = field(default_factory=dict)  # acks -> values acknowledged

    def to_dict(self) -> dict:
        return {
            "operations": {f"{f}:{t}": n for (f, t), n in sorted(self.operations.items())},
            "acknowledged": self.acknowledged,
        }

    def add(self, ops: list[dict[str, Any]]) -> None:
        """Count history records, in the order they were written."""
        operations, acknowledged = self.operations, self.acknowledged
        for op in ops:
            kind = (op.get("f"), op.get("type"))
            operations[kind] += 1
            if kind == _ACKNOWLEDGED:
                acks = str(op.get("acks"))
                acknowledged[acks] = acknowledged.get(acks, 0) + 1

    def count(self, f: str, type_: str, records: int, acks: str | None) -> None:
        """Count `records` history records of one (f, type) and acks, as `add` counts them:
        what `History` tells its observer as it writes them."""
        if not records:
            return
        self.operations[(f, type_)] += records
        if (f, type_) == _ACKNOWLEDGED:
            key = str(acks)
            self.acknowledged[key] = self.acknowledged.get(key, 0) + records


def count_operations(run_dir: Path) -> Counts:
    """The counts of a run's history file (written by many processes)."""
    c = Counts()
    c.add(read_jsonl(run_dir / "history.jsonl"))
    return c


def write_summary(run_dir: Path, counts: Counts, workload_start_ns: int | None,
                  workload_end_ns: int | None = None, clients_late: dict[str, float | None] | None = None,
                  clock: str | None = None) -> None:
    """`summary.json`: the counts, and the moments the workload started and ended when there
    was one (the start is time 0 of the fault schedule, on the records' `time_ns` clock: the
    analysis reports every time from it; the end is `duration` later times `--time-scale`,
    and the pauses of a `--step` lab); and, only when a client was not running at time 0,
    `clients_late`: the seconds after it each such client joined (null: never); and
    `final_bytes`, the size of each file of `final/` as the run wrote it: a log cut at a
    line's end, or rid of a replica's lines, reads as whole lines and was judged as the
    cluster's divergence; against this size it is a change made after the run; and `clock`,
    `virtual` for a run of the deterministic simulation, whose every time is the loop's."""
    final = {name: (run_dir / "final" / name).stat().st_size for name in FINAL_FILES
             if (run_dir / "final" / name).is_file()}
    bounds = {k: v for k, v in (("workload_start_ns", workload_start_ns), ("workload_end_ns", workload_end_ns),
                                ("clients_late", clients_late or None), ("final_bytes", final or None),
                                ("clock", clock))
              if v is not None}
    (run_dir / "summary.json").write_text(json.dumps(counts.to_dict() | bounds, indent=1))
