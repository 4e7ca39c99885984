"""Running a matrix: J cells at a time, each in its own supervisor process with its own run
directory (so its sockets, ports and data never meet another cell's), then one Spark job
over every cell, a summary per base topology, varied setting and fault schedule, and the
exit code.

`--deflake N` runs each failed cell again, up to N times, and judges each round in one job:
a cell that failed and then passed is flaky, one that failed every time failed. A cell whose
supervisor fails (its cluster did not start, or the run broke off) is unjudged, and the
matrix starts no further cell unless `--keep-going`.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path

import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)
from rich.table import Table
from rich.text import Text

from testbed.analysis.pipeline import analyze_runs
from testbed.analysis.verdict import RunVerdict, broken_expectations
from testbed.common.children import Children
from testbed.common.console import user_console
from testbed.common.words import counted
from testbed.config.cli_values import runs_dir_flag
from testbed.matrix.cells import Cell
from testbed.matrix.page import write_cells
from testbed.matrix.results import (CellResult, add_summary_columns, fit_labels, flaky_line, judged_loss,
                                    matrix_exit_code, met_line, no_leader_cell)

ROOT = Path(__file__).resolve().parents[2]
CELLS_DIR = ".cells"  # hidden: `find_runs` does not take the cells' topologies for runs


def run_matrix(cells: list[Cell], matrix_dir: Path, jobs: int = 1, time_scale: float = 1.0,
               deflake: int = 0, spark_master: str | None = None, console: Console | None = None,
               keep_going: bool = False, source: Path | None = None, seeds: int | None = None) -> int:
    """Run and judge `cells` under `matrix_dir` (one run directory per cell, named by its id);
    print the summary; return 0 when every cell met its expectation (a flaky cell met it on a
    later attempt and is listed apart), 1 when one failed every attempt, 2 when one could not
    be judged (with `keep_going`, which runs every cell even after one could not run, an
    unjudged cell counts as failed: 1). `source`, the matrix file or directory the cells came
    from, makes each failed cell's replay command, with the `--seeds` the cells were made with
    and the time scale they ran at."""
    console = console or user_console()
    matrix_dir.mkdir(parents=True, exist_ok=True)
    results = {c.id: CellResult(c) for c in cells}
    todo = list(cells)
    for attempt in range(deflake + 1):
        suffix = "" if attempt == 0 else f".retry{attempt}"
        runs, why_not = _run_cells(todo, matrix_dir, suffix, jobs, time_scale, console,
                                   "cells" if attempt == 0 else f"retry {attempt}", keep_going)
        ran = [runs[c.id] for c in todo if c.id not in why_not]
        if ran:
            console.print(f"judging {counted(len(ran), 'cell')} in one Spark job ...")
        judged = analyze_runs(ran, spark_master, summary_dir=matrix_dir / f"summary{suffix}") if ran else []
        verdicts = {v.run_dir.name: v for v in judged}
        for cell in todo:
            run = runs[cell.id]
            results[cell.id].verdicts.append(verdicts.get(run.name) or _not_run(run, why_not.get(cell.id, "")))
        if why_not and not keep_going:
            break
        todo = [c for c in todo if results[c.id].last.ok is False]
        if not todo:
            break
    write_cells(list(results.values()), matrix_dir / "summary", spark_master)
    again = (f" --seeds {seeds}" if seeds is not None else "") + (f" --time-scale {time_scale:g}" if time_scale != 1 else "")
    print_summary(console, list(results.values()), matrix_dir, source, again)
    return matrix_exit_code(list(results.values()), keep_going)


def _run_cells(cells: list[Cell], matrix_dir: Path, suffix: str, jobs: int, time_scale: float,
               console: Console, label: str, keep_going: bool) -> tuple[dict[str, Path], dict[str, str]]:
    """Each cell's run directory once its supervisor has exited, and why each cell that did
    not run to its end did not: its supervisor failed (it leaves what it wrote, unjudged), or,
    without `keep_going`, an earlier cell's did and the cell never started."""
    spec_dir = matrix_dir / CELLS_DIR
    spec_dir.mkdir(exist_ok=True)
    runs = {c.id: matrix_dir / f"{c.id}{suffix}" for c in cells}
    # both clocks, named: the time left alone read 0:00:00 after a 40 s matrix (trial34)
    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(),
               TextColumn("{task.fields[failed]} did not run to the end"), TimeElapsedColumn(),
               TextColumn("elapsed,"), TimeRemainingColumn(), TextColumn("left"))
    with Progress(*columns, console=console, transient=False) as progress, \
            ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="isrlab-cell") as pool:
        task = progress.add_task(label, total=len(cells), failed=0)
        stop = threading.Event()  # set by the worker whose cell failed, before its thread takes the next
        children = Children()

        def run(cell: Cell) -> int | None:
            if stop.is_set():
                return None  # taken by a thread before the failure above could cancel it
            code = _run_cell(cell, runs[cell.id], spec_dir, time_scale, children)
            if code is not None and code != 0 and not keep_going:
                stop.set()
            return code
        futures = {pool.submit(run, c): c for c in cells}
        try:
            return runs, _follow(futures, runs, spec_dir, progress, task, label, suffix, keep_going)
        except KeyboardInterrupt:  # Ctrl-C or SIGTERM: no cell starts, and those running stop their clusters
            stop.set()
            for f in futures:
                f.cancel()
            children.stop()
            raise


def _follow(futures: dict[Future, Cell], runs: dict[str, Path], spec_dir: Path, progress: Progress, task: TaskID,
            label: str, suffix: str, keep_going: bool) -> dict[str, str]:
    """Each cell's line as it ends, and why each that did not run to its end did not."""
    why_not: dict[str, str] = {}
    first_failure = ""
    for done in as_completed(futures):
        cell = futures[done]
        if done.cancelled():
            continue
        code = done.result()
        if code is None:
            why_not[cell.id] = _stopped_after(first_failure)
            progress.update(task, advance=1, failed=len(why_not))
            continue
        if code != 0:
            first_failure = first_failure or cell.id
            log = spec_dir / (runs[cell.id].name + ".log")
            why_not[cell.id] = f"its supervisor exited {code}: {_why_failed(log)} (see {log})"
            if not keep_going:
                stopped = [c for f, c in futures.items() if not f.cancelled() and f.cancel()]
                why_not |= {c.id: _stopped_after(cell.id) for c in stopped}
                if stopped:
                    progress.console.print(f"[yellow]{cell.id} could not run: starting no further cell "
                                           f"(--keep-going runs them)[/]")
        # a line per cell, above the bar on a terminal and alone in a CI log
        attempt = f" ({label})" if suffix else ""  # a --deflake round's run of a failed cell
        progress.console.print(f"{cell.id}{attempt}: {'ran' if code == 0 else f'its supervisor exited {code}'}")
        progress.update(task, advance=1, failed=len(why_not))
    return why_not


def _why_failed(log: Path) -> str:
    """What the cell's supervisor said as it failed, the last line of its log (`run failed:
    timed out after 0.1s waiting for ...`): the matrix said only that it had exited (trial37)."""
    try:
        with open(log, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = [line.strip() for line in f.read().decode("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        lines = []
    if lines and lines[-1].startswith(_FAILED):
        return lines[-1].removeprefix(_FAILED).strip()
    return "the cluster did not start or the run broke off"


#: how a supervisor's console says why its run failed (`experiment.runner`)
_FAILED = "run failed:"


def _stopped_after(failed: str) -> str:
    return f"not run: the matrix stopped after {failed} could not run (--keep-going runs every cell)"


def _run_cell(cell: Cell, run_dir: Path, spec_dir: Path, time_scale: float, children: Children) -> int | None:
    """The cell's supervisor's exit code; None when the matrix stopped before it started."""
    spec = spec_dir / f"{run_dir.name}.yaml"
    spec.write_text(yaml.safe_dump(cell.topology.to_dict(), sort_keys=False), encoding="utf-8")
    env = {**os.environ, "ISRLAB_MATRIX_PID": str(os.getpid())}
    with open(spec_dir / f"{run_dir.name}.log", "wb") as log:
        command = [sys.executable, "-m", "testbed.matrix.cell_main", str(spec.resolve()), str(run_dir.resolve()),
                   str(run_dir.resolve().parent.parent), str(time_scale)]  # the matrix's runs directory
        with children.started(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT) as proc:
            return None if proc is None else proc.wait()


def _not_run(run_dir: Path, why: str) -> RunVerdict:
    why = why or (f"the cell left no run to judge (see {run_dir.parent / CELLS_DIR / (run_dir.name + '.log')})")
    return RunVerdict(run_dir, None, {"problems": [f"{run_dir}: {why}"]})


def print_summary(console: Console, results: list[CellResult], matrix_dir: Path, source: Path | None = None,
                  again: str = "") -> None:
    """Per base topology and varied setting, and fault schedule: cells, those passed and
    unjudged, cells with acks=all loss, lost writes, the median (and most) partition-seconds without a
    leader of the judged cells, and the expectations
    that failed; then the flaky, failed and unjudged cells by name, each with its report (if
    it has one: a cell that never ran has none) and, given the matrix `source`, the command
    that runs it again (with `again`, the options that made and ran the cell: a replay
    without `--seeds` found no cell of that seed)."""
    groups: dict[tuple[str, str], list[CellResult]] = {}
    for r in results:
        setting = " ".join(part for part in (r.cell.topology.name, r.cell.setting) if part)
        groups.setdefault((setting, r.cell.schedule or "(its own)"), []).append(r)
    table = Table(title=f"matrix: {counted(len(results), 'cell')}")
    add_summary_columns(table, ("topology and setting", "faults"),
                        ("cells", "passed", "unjudged", "with loss", "lost writes"))
    for (setting, schedule), rs in groups.items():
        lost = [judged_loss(r.last) for r in rs]
        # of the judged cells: an unjudged one's 0.00 read as a cell that never lost its leader
        no_leader = [r.last.results.get("figures", {}).get("unavailable_s", {}).get("no-leader", 0.0) for r in rs
                     if r.last.whole]
        failed = sorted({name for r in rs for name, e in r.last.results.get("expect", {}).items()
                         if e["held"] is False})
        table.add_row(Text(setting), Text(schedule), str(len(rs)), str(sum(1 for r in rs if r.status == "passed")),
                      str(sum(1 for r in rs if r.status == "unjudged")), str(sum(1 for n in lost if n)),
                      str(sum(lost)), no_leader_cell(no_leader), ", ".join(failed))
    fit_labels(console, table, 2)
    console.print(table)
    for status, colour in (("flaky", "yellow"), ("failed", "red"), ("unjudged", "yellow")):
        for r in (r for r in results if r.status == status):
            report = r.last.run_dir / "report.html"
            why = flaky_line(r) if status == "flaky" else broken_expectations(r.last)
            console.print(f"[{colour}]{status}:[/] {escape(r.cell.id)}: {escape(why)}"
                          + (f"  report: {escape(str(report))}" if report.is_file() else ""),
                          highlight=False, soft_wrap=True, emoji=False)
            if source is not None and status != "flaky":
                console.print(f"  replay: python run.py matrix {shlex.quote(str(source))} --only "
                              f"{shlex.quote(r.cell.id)}{again}{runs_dir_flag(matrix_dir.parent)}", style="dim",
                              markup=False, highlight=False, soft_wrap=True, emoji=False)
    console.print(f"{met_line(results)}; run directories: {escape(str(matrix_dir))}", emoji=False)


def new_matrix_dir(runs_dir: Path, source: str, shard: tuple[int, int] | None,
                   clock: Callable[[], float] = time.time) -> Path:
    """`<runs-dir>/<UTC stamp>-matrix-<file stem>[-shardKofN]`."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(clock()))
    tail = f"-shard{shard[0]}of{shard[1]}" if shard else ""
    return runs_dir / f"{stamp}-matrix-{Path(source).stem}{tail}"
