"""What became of each cell: its judged attempts, and from them its status and the matrix's
exit code."""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from rich.cells import cell_len
from rich.console import Console
from rich.table import Column, Table

from testbed.analysis.cli import EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED
from testbed.analysis.verdict import RunVerdict, broken_expectations, wanted_breaks
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
    """The count a check found in a cell (None when the check did not run: the cell left no
    run, or none Spark could read); an unjudged cell's counts are shown, not held to anything."""
    entry = verdict.results.get("checks", {}).get(check)
    return None if entry is None else int(entry["count"])


def judged_loss(verdict: RunVerdict) -> int:
    """The acks=all writes a judged run lost, for a summary's totals: 0 for a run not judged,
    whose missing values may be unavailability (a cluster that did not converge), not loss."""
    return (check_count(verdict, "lost_writes") or 0) if verdict.whole else 0


def met_line(results: list[CellResult]) -> str:
    """"2 of 4 cells met their expectations"; of a single cell, "0 of 1 cell met its ...";
    and the flaky ones apart, which met them only on a retry (trial34: "0 of 2 cells met
    their expectations" of a matrix that exited 0, its one failed cell flaky)."""
    passed = sum(1 for r in results if r.status == "passed")
    flaky = sum(1 for r in results if r.status == "flaky")
    # a cell that passed by breaking a rule its expect: wants broken (a lab's bug): said apart,
    # as a single run says it beside its OK (trial37: "passed 1" beside 300 lost writes)
    broke = sum(1 for r in results if r.status == "passed" and wanted_breaks(r.last)[0])
    return (f"{passed} of {len(results)} " + ("cell met its expectations" if len(results) == 1
                                              else "cells met their expectations")
            + (f" ({broke} of them by breaking as {'its' if broke == 1 else 'their'} expect: wants)" if broke else "")
            + (f", and {flaky} more only on a retry (flaky)" if flaky else ""))


def flaky_line(result: CellResult) -> str:
    """What a flaky cell did: `failed on attempt 1: lost_writes 4 (expected 0); met them on
    attempt 2` (trial34: its line named nothing, as its last attempt broke nothing)."""
    failed = [(i, v) for i, v in enumerate(result.verdicts, 1) if v.ok is False]
    first, verdict = failed[0]
    return f"failed on attempt {first}: {broken_expectations(verdict)}; met them on attempt {len(result.verdicts)}"


def matrix_exit_code(results: list[CellResult], keep_going: bool = False) -> int:
    """0 when every cell met its expectation, 1 when one failed, 2 when one was not judged
    (1 under `--keep-going`: the matrix ran to its end, and an unjudged cell did not pass)."""
    statuses = {r.status for r in results}
    if "unjudged" in statuses and not keep_going:
        return EXIT_UNJUDGED
    return EXIT_FAILED if statuses & {"failed", "unjudged"} else EXIT_OK


def add_summary_columns(table: Table, labels: tuple[str, ...], counts: tuple[str, ...]) -> None:
    """The columns of a matrix's or a sweep's summary: `labels`, `counts`, the median and the
    longest partition-seconds without a leader (`no_leader_cell`) and the failed expectations. A count keeps its number
    on one line and its header a word a line; `fit_labels` then widens the labels. The
    table has no outer edge: that is four more letters of a name on an 80-column terminal."""
    table.show_edge = table.pad_edge = False
    for col in labels:
        table.add_column(col, overflow="fold")
    for col in counts:
        table.add_column(col.replace(" ", "\n"), justify="right", no_wrap=True)
    # "0.60 (12.34)" goes on two lines where the labels need the room
    table.add_column("no-leader s median (max)".replace(" ", "\n"), justify="right")
    table.add_column("failed\nexpectations", overflow="fold")


def no_leader_cell(seconds: list[float]) -> str:
    """The median partition-seconds without a leader of a group's judged runs, and the most:
    a median alone hid the one seed of ten whose leaderless window was long (trial36)."""
    if not seconds:
        return "-"
    median, most = statistics.median(seconds), max(seconds)
    return f"{median:.2f}" if len(seconds) == 1 or f"{median:.2f}" == f"{most:.2f}" else f"{median:.2f} ({most:.2f})"


def fit_labels(console: Console, table: Table, labels: int) -> None:
    """Give the first `labels` columns of `table`, once its rows are in, the room the
    terminal has left beside the counts and a few letters of the expectations, each up to its
    longest text, so that an 80-column terminal shows whole names ("kill-le|ader" before);
    the expectations fold in what remains."""
    def width(column: Column, words: bool = False) -> int:
        texts = [str(cell) for cell in (column.header, *column.cells)]
        parts = [w for text in texts for w in (text.split() if words else text.splitlines())]
        return max(map(cell_len, parts), default=0)

    gaps = 3 * (len(table.columns) - 1) + (4 if table.show_edge else 0) + (2 if table.pad_edge else 0)
    room = (console.width - gaps - sum(width(c, not c.no_wrap) for c in table.columns[labels:-1])
            - min(width(table.columns[-1], True), LABEL_MIN))
    for i, column in enumerate(table.columns[:labels]):  # a set width: rich does not narrow it
        column.width = max(LABEL_MIN, min(width(column), room // (labels - i)))
        room -= column.width


#: the narrowest a label is set, however narrow the terminal; the room kept for the expectations
LABEL_MIN = 8
