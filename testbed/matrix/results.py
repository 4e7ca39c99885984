"""What became of each cell: its judged attempts, and from them its status and the matrix's
exit code."""
from __future__ import annotations

from dataclasses import dataclass, field

from testbed.analysis.cli import EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED
from testbed.analysis.verdict import RunVerdict
from testbed.matrix.cells import Cell


@dataclass
class CellResult:
    """A cell's attempts, first to last (each judged)."""

    cell: Cell
    verdicts: list[RunVerdict] = field(default_factory=list)

    @property
    def last(self) -> RunVerdict:
        return self.verdicts[-1]

    @property
    def status(self) -> str:
        """passed / failed (every attempt) / flaky (failed, then passed) / unjudged."""
        oks = [v.ok for v in self.verdicts]
        if oks[-1] is None:
            return "unjudged"
        if oks[-1]:
            return "flaky" if False in oks else "passed"
        return "failed"


def check_count(verdict: RunVerdict, check: str) -> int | None:
    """The count a check found in a judged cell (None when the cell was not judged)."""
    entry = verdict.results.get("checks", {}).get(check)
    return None if entry is None else int(entry["count"])


def matrix_exit_code(results: list[CellResult], keep_going: bool = False) -> int:
    """0 when every cell met its expectation, 1 when one failed, 2 when one was not judged
    (1 under `--keep-going`: the matrix ran to its end, and an unjudged cell did not pass)."""
    statuses = {r.status for r in results}
    if "unjudged" in statuses and not keep_going:
        return EXIT_UNJUDGED
    return EXIT_FAILED if statuses & {"failed", "unjudged"} else EXIT_OK
