"""`python run.py lab list` and `python run.py lab N [--step] [--runs-dir D] [--time-scale F]`:
the guide, each part run with the live view and judged, then the guide's questions with the
answers each part's run gave. Exit 0 when every part met its `expect:`, as for a run."""
from __future__ import annotations

import argparse
import sys
import termios
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from faults.schedule import ScheduledFault
from testbed.common.console import user_console
from testbed.labs.catalog import Lab, LabError, Part, all_labs, find_lab
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.config.cli_values import float_arg, path_arg, spark_master_problem, time_scale_problem, unusable_dir

if TYPE_CHECKING:  # the runner imports the pipeline: `lab list` should not wait for it
    from testbed.experiment.runner import BeforeFault


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python run.py lab", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("lab", help="`list`, or a lab by number (3) or name (03-follower-failure), or the path of a "
                                "lab's directory (your own)")
    ap.add_argument("--step", action="store_true",
                    help="pause before each fault, show the cluster, and wait for Enter (on a terminal only)")
    ap.add_argument("--runs-dir", type=path_arg, default=Path("runs"), help="where run directories go (default runs/)")
    ap.add_argument("--time-scale", type=float_arg, default=1.0, help="as for a run (use >1 on a slow machine)")
    ap.add_argument("--spark-master", default=None, help="as for a run")
    args = ap.parse_args(argv)
    if (problem := time_scale_problem(args.time_scale) or spark_master_problem(args.spark_master)) is not None:
        print(problem, file=sys.stderr)
        return 2
    console = user_console()
    try:
        if args.lab == "list":
            return list_labs(console)
        lab = find_lab(args.lab)
    except LabError as exc:
        print(exc, file=sys.stderr)
        return 2
    if (unusable := unusable_dir(args.runs_dir, "--runs-dir")) is not None:
        print(unusable, file=sys.stderr)
        return 2
    from testbed.analysis.session import stop_spark
    try:  # Ctrl-C reaches run.py's one line and exit 130, as from every command
        return run_lab(lab, console, args.runs_dir, args.time_scale, args.spark_master, args.step)
    finally:
        stop_spark()


def list_labs(console: Console) -> int:
    labs = all_labs()
    table = Table(title="isrlab labs (python run.py lab N)", title_justify="left")
    for col in ("lab", "title", "rule", "runs"):
        table.add_column(col, overflow="fold")
    for lab in labs:
        table.add_row(str(lab.number), lab.title, lab.rule, " | ".join(p.label for p in lab.parts))
    console.print(table)
    return 0


def run_lab(lab: Lab, console: Console, runs_dir: Path, time_scale: float, spark_master: str | None,
            step: bool) -> int:
    """The guide, every part run and judged, the answers; the exit code of the worst part."""
    from testbed.analysis.report import LAB_GUIDE
    from testbed.experiment.runner import run_experiment
    from testbed.labs.answers import RunRecords
    from testbed.labs.guide import answers, intro, part_markdown
    from testbed.supervisor.run_dir import new_run_id
    console.print(intro(lab))
    interactive = step and sys.stdin.isatty()
    if step and not interactive:
        console.print("[yellow]--step needs a terminal on standard input: the lab runs unattended[/]")
    if interactive:
        console.print("[yellow]--step pauses the schedule, not the cluster: its timeouts go on while you read, "
                      "so a lab about a race of timeouts may differ from its guide; every time shown counts the "
                      "pauses, as the report's do[/]")
    runs, codes = [], []
    unjudged: list[tuple[Part, Path]] = []
    for i, part in enumerate(lab.parts):
        console.rule(f"part {i + 1} of {len(lab.parts)}: {part.label}")
        if interactive:
            console.input("press Enter to start the run ")
        run_dir = runs_dir / new_run_id(part.topology.name, part.topology.seed)
        run_dir.mkdir(parents=True)
        (run_dir / LAB_GUIDE).write_text(part_markdown(lab, i), encoding="utf-8")
        outcome = run_experiment(part.topology, runs_dir, time_scale, console=console, run_dir=run_dir,
                                 spark_master=spark_master, before_fault=_pause(console) if interactive else None)
        codes.append(outcome.exit_code)
        if outcome.verdict is not None and outcome.verdict.whole:
            runs.append((part, RunRecords.load(outcome.run_dir)))
        else:
            unjudged.append((part, outcome.run_dir))
    console.rule("questions, and what the runs answered")
    console.print(answers(lab, runs))
    for part, run in runs:
        console.print(f"{part.label}: report [bold]{escape(str(run.run_dir / 'report.html'))}[/]", emoji=False,
                      soft_wrap=True)
    for part, run_dir in unjudged:  # a tester's questions came back with no answer and no word why
        console.print(f"[yellow]{escape(part.label)}: not judged[/] (see above), so the answers above leave it out; "
                      f"`python run.py analyze {escape(str(run_dir))}` judges it again", highlight=False, soft_wrap=True,
                      emoji=False)
    return max(codes)


def _pause(console: Console) -> BeforeFault:
    """Before each fault: the cluster as it stands, the fault about to fire, and Enter."""
    from testbed.supervisor.cluster_view import cluster_view

    def before(status: ClusterStatus, faults: list[ScheduledFault]) -> None:
        console.print(cluster_view(status, "the cluster now", []))
        what = "; ".join(f"{f.do} {f.target}" if f.target else f.do for f in faults)
        _forget_typed_ahead()
        console.input(f"next at {faults[0].at:g}s: [bold]{what}[/]; press Enter to fire ")
    return before


def _forget_typed_ahead() -> None:
    """Enter pressed before the prompt showed would fire its fault unread (trial31): what the
    terminal holds unread is dropped first."""
    try:
        termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (OSError, ValueError, termios.error):
        pass  # not a terminal after all: nothing typed ahead to drop
