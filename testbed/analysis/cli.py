"""`python run.py analyze runs/<id> | runs/ [--spark-master URL] [--summary-dir DIR]`:
re-judge stored runs. Exit 0 when every expectation of every run held, 1 when one did not,
2 when a run could not be judged."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from testbed.analysis.places import default_summary_dir, jvm_log_for, warehouse_for
from testbed.analysis.run_dirs import IngestError, find_runs, input_bytes, is_run, refusal
from testbed.analysis.session import C1_INPUT_BYTES, SparkUnreachable, get_spark, start_in_background, stop_spark
from testbed.common.console import user_console
from testbed.common.words import counted
from testbed.config.cli_values import path_arg, spark_master_problem, unusable_dir

if TYPE_CHECKING:
    from testbed.analysis.verdict import RunVerdict

EXIT_OK, EXIT_FAILED, EXIT_UNJUDGED = 0, 1, 2


def exit_code(verdicts: list[RunVerdict]) -> int:
    if any(v.ok is None for v in verdicts):
        return EXIT_UNJUDGED
    return EXIT_OK if all(v.ok for v in verdicts) else EXIT_FAILED


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python run.py analyze", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="+", type=path_arg, help="run directories, or directories holding runs")
    ap.add_argument("--spark-master", default=None,
                    help="local[N], spark://host:port, ... (default: embedded local[*])")
    ap.add_argument("--summary-dir", type=path_arg, default=None,
                    help="where the summary of several runs goes (default: <common parent>/summary)")
    args = ap.parse_args(argv)
    console = user_console()
    if (problem := spark_master_problem(args.spark_master)) is not None:
        console.print(f"[red]cannot analyze:[/] {escape(problem)}", highlight=False, soft_wrap=True, emoji=False)
        return EXIT_UNJUDGED
    try:
        runs = find_runs(args.paths)
        summary_dir = args.summary_dir or (default_summary_dir(runs) if len(runs) > 1 else
                                           _tree_of_one(args.paths, runs))
        if summary_dir is not None and (unusable := unusable_dir(summary_dir, "--summary-dir")
                                        or _a_run(summary_dir)) is not None:
            console.print(unusable, style="red", markup=False, soft_wrap=True, emoji=False)
            return EXIT_UNJUDGED
        if refusal(runs) is None:  # else `analyze_runs` refuses them, and nothing is written
            # the JVM starts while the pipeline is imported (a second or more of Python)
            start_in_background(args.spark_master, jvm_log_for(warehouse_for(runs, summary_dir)),
                                small_input=input_bytes(runs) < C1_INPUT_BYTES)
        return _judge(console, args.paths, args.spark_master, summary_dir)
    except (IngestError, SparkUnreachable) as exc:  # the second: a server gone since the check above
        console.print(f"[red]cannot analyze:[/] {escape(str(exc))}", highlight=False, soft_wrap=True, emoji=False)
        return EXIT_UNJUDGED
    finally:
        stop_spark()


def _a_run(summary_dir: Path) -> str | None:
    """Why `--summary-dir` may not be a run's directory: the summary's tables and log went in
    among that run's records (trial35), which a later `analyze` of it would read beside them."""
    if is_run(summary_dir):
        return (f"--summary-dir {summary_dir}: a run's directory (it holds history.jsonl or topology.yaml); "
                f"give the summary a directory of its own")
    return None


def _judge(console: Console, paths: list[Path], spark_master: str | None, summary_dir: Path | None) -> int:
    from testbed.analysis.pipeline import SummaryError, analyze_runs
    from testbed.analysis.terminal import print_verdict
    try:
        verdicts = analyze_runs(paths, spark_master, summary_dir)
    except SummaryError as exc:
        _print_tree(console, exc.verdicts, None)
        console.print(f"[red]no summary:[/] {escape(str(exc))}", highlight=False, soft_wrap=True, emoji=False)
        return EXIT_UNJUDGED
    if len(verdicts) == 1:
        print_verdict(console, verdicts[0])
        _print_summary(console, summary_dir)
    else:
        _print_tree(console, verdicts, summary_dir)
    return exit_code(verdicts)


def _tree_of_one(paths: list[Path], runs: list[Path]) -> Path | None:
    """`<tree>/summary` when the one path given is a directory holding one run, not the run
    (trial33: `analyze runs/` wrote a summary with two runs inside and none with one)."""
    if len(paths) == 1 and len(runs) == 1 and paths[0].resolve() != runs[0]:
        return paths[0] / "summary"
    return None


def _print_tree(console: Console, verdicts: list[RunVerdict], summary_dir: Path | None) -> None:
    from testbed.analysis.terminal import verdict_word
    from testbed.analysis.verdict import broken_expectations
    runs = Table(title=counted(len(verdicts), "run"))
    for col in ("run", "verdict", "lost_writes", "lost_writes_acks1", "failed expectations"):
        runs.add_column(col)
    for v in verdicts:
        checks = v.results.get("checks", {})
        failed = [k for k, e in v.results.get("expect", {}).items() if e["held"] is False]
        counts = [str(checks.get(name, {}).get("count", "")) if v.whole else "—"  # no partial verdict
                  for name in ("lost_writes", "lost_writes_acks1")]
        runs.add_row(Text(v.run_id), verdict_word(v.ok), *counts, ", ".join(failed))
    console.print(runs)
    # the table cuts run ids to fit the terminal (80 columns in a CI log): each run that did
    # not pass is named whole, on a line of its own
    for v in verdicts:
        problems = v.results.get("problems", [])
        if v.ok is False:  # a killed run's records broke an expectation for good: one line, not two that disagree
            whole = f"; not judged whole: {'; '.join(problems)}" if problems else ""
            console.print(f"[red]failed:[/] {escape(v.run_id)}: {escape(broken_expectations(v))}{escape(whole)}  "
                          f"report: {escape(str(v.run_dir / 'report.html'))}", highlight=False, soft_wrap=True,
                          emoji=False)
            continue
        for problem in problems:
            console.print(f"[yellow]not judged:[/] {escape(v.run_id)}: {escape(problem)}", highlight=False,
                          soft_wrap=True, emoji=False)
    _print_summary(console, summary_dir)


def _print_summary(console: Console, summary_dir: Path | None) -> None:
    from testbed.analysis.ingest import hadoop_path
    from testbed.analysis.readable_paths import readable
    if summary_dir is None or not (summary_dir / "summary.parquet").exists():
        return  # none was written: the judgment failed, and every run says why above
    summary = get_spark().read.parquet(hadoop_path(readable(summary_dir / "summary.parquet"))).collect()
    console.print("summary per topology and protocol setting:")
    for row in summary:  # a line each: eleven columns of a table fit no 80-column log
        # a group without a run judged whole has no loss nor windows to tell (trial36: "0.0
        # partition-s without a leader" beside "1 not judged" read as measured)
        told = (f"{row['runs_with_loss']} with loss ({row['lost_writes'] or 0} acks=all and "
                f"{row['lost_writes_acks1'] or 0} acks=1 writes lost), {row['no_leader_s']} partition-s without a "
                f"leader, {row['no_acks_all_s']} without acks=all service" if row["no_leader_s"] is not None
                else "no run judged whole, so no loss or window without service to tell")
        console.print(f"  {escape(row['topology'])} ({escape(row['protocol'])}): {counted(row['runs'], 'run')}, "
                      f"{row['failed']} failed, {row['unjudged']} not judged, {told}", highlight=False,
                      soft_wrap=True, emoji=False)
    console.print(f"summary: {escape(str(summary_dir / 'summary.html'))} and "
                  f"{escape(str(summary_dir / 'summary.parquet'))}", soft_wrap=True, emoji=False)
