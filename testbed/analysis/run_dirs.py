"""Which run directories a judgment reads, and whether it may write into them: asked before
the Spark session starts, so a command refuses bad input before it imports the pipeline or
writes anything, and starts its JVM meanwhile (`analysis.cli`)."""
from __future__ import annotations

import os
import re
from pathlib import Path

#: the record files of a run the ingest reads, by table (`schemas.RECORD_FILES` gives each
#: its format): named here without the formats, whose import (Arrow's compute functions)
#: would delay a cold `analyze`'s JVM, which starts once the runs are found
RECORD_PATHS: dict[str, str] = {"history": "history.jsonl", "events": "events.jsonl", "faults": "faults.jsonl",
                                "final_logs": "final/logs.jsonl", "final_replicas": "final/replicas.jsonl"}


class IngestError(ValueError):
    """A record file that does not match its format, or a tree of runs that cannot be read."""


#: a directory holding either is a run, given itself or found in a tree alike (a run whose
#: topology.yaml is gone is found, and judged unjudged, not left out of its tree's verdict)
_RUN_MARKS = ("history.jsonl", "topology.yaml")


def is_run(path: Path) -> bool:
    return any((path / name).is_file() for name in _RUN_MARKS)


def _natural(path: Path) -> list[str | int]:
    """`path`'s order among runs with its numbers read as numbers: a sweep's seed-2 before
    its seed-10 (trial35: seed=1, 10, 11, ..., 2 in a tree's listing)."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def find_runs(paths: list[Path]) -> list[Path]:
    """Run directories under `paths`: a path holding `history.jsonl` or `topology.yaml` is a run,
    any other directory is searched for runs (hidden directories such as `.live` are skipped)."""
    runs: list[Path] = []
    for path in paths:
        if not path.is_dir():
            raise IngestError(f"{path}: no such run directory" if not path.exists() else
                              f"{path}: a file, not a directory (expected a run directory or a directory holding runs)")
        if is_run(path):
            runs.append(path.resolve())
            continue
        found = sorted({p.parent.resolve() for name in _RUN_MARKS for p in path.rglob(name)
                        if not any(part.startswith(".") for part in p.relative_to(path).parts)}, key=_natural)
        if not found:
            raise IngestError(f"{path}: neither a run directory (no history.jsonl or topology.yaml) "
                              f"nor a directory holding runs")
        runs.extend(found)
    return list(dict.fromkeys(runs))


def unwritable(run: Path) -> str | None:
    """Why a judgment could not write what it writes into `run` (its tables, results.json,
    report.html), asked before anything is written: a read-only run directory or an
    immutable verdict was found after the tables had been rewritten."""
    for path in (run, run / "analysis", run / "analysis" / "tables", run / "results.json", run / "report.html"):
        if path.exists() and not os.access(path, os.W_OK | (os.X_OK if path.is_dir() else 0)):
            return f"{path}: not writable (a judgment writes its tables, results.json and report.html in the run directory)"
    return None


def refusal(runs: list[Path]) -> IngestError | None:
    """The error that refuses `runs` because some cannot take a verdict (`unwritable`), if any."""
    if why := [w for run in runs if (w := unwritable(run)) is not None]:
        return IngestError("; ".join(why[:5]) + (f"; and {len(why) - 5} more" if len(why) > 5 else ""))
    return None


def input_bytes(runs: list[Path]) -> int:
    """The size of the runs' record files (what `session.tune_for` and the JIT choice go by)."""
    return sum((run / path).stat().st_size for run in runs for path in RECORD_PATHS.values() if (run / path).is_file())
