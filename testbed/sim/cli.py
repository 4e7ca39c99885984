"""`python run.py sim TOPOLOGY [TOPOLOGY ...] [--seeds N] [--seed S] [--keep] [--jobs J] [--runs-dir D]`.

Runs each topology on virtual time once per seed, J worker processes at a time, each seed
into its own run directory in the real format; then judges every seed of every topology
in one Spark job and prints the matrix's summary (a row per topology), the speed, and for
every seed that failed or could not be judged the command that replays it. Several
topologies side by side are how an unsafe setting and its fix are compared. Exit 0 when
every seed met its topology's `expect:`, 1 when one did not, 2 when one could not be
judged or the input is wrong (then nothing runs).
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from threading import Lock

import yaml
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from testbed.analysis.cli import EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED
from testbed.analysis.verdict import RunVerdict, broken_expectations
from testbed.common.children import Children
from testbed.common.console import user_console
from testbed.common.words import counted
from testbed.config.cli_values import int_arg, path_arg, runs_dir_flag, spark_master_problem, unusable_dir
from testbed.config.loader import load_topology, read_yaml
from testbed.config.nemesis_section import never_firing
from testbed.config.parser import TopologyError, parse_topology
from testbed.config.scalars import MAX_SEED
from testbed.config.topology_spec import Topology
from testbed.matrix.results import add_summary_columns, fit_labels, judged_loss, no_leader_cell
from testbed.sim import scope
from testbed.sim.worker import PARENT_ENV, seed_dir

ROOT = Path(__file__).resolve().parents[2]
#: the sim's own files (the topologies the workers read, their logs): hidden from `find_runs`
SIM_FILES = ".sim"
#: worker processes at once
MAX_JOBS = 64
#: the most seeds one `sim` runs of each topology (its list of runs is made before any runs)
MAX_SIM_SEEDS = 1_000_000


@dataclass(frozen=True)
class Target:
    """One topology to simulate: as loaded (its own seed) and the file it came from."""
    topology: Topology
    source: Path


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python run.py sim", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("topologies", type=path_arg, nargs="+", metavar="TOPOLOGY", help="topology YAML files (schema v1)")
    ap.add_argument("--seeds", type=int_arg, help="run N seeds of each: 0..N-1, or S..S+N-1 with --seed S "
                                              "(default: each topology's own seed)")
    ap.add_argument("--seed", type=int_arg, help="run this one seed (replay a failing one); with --seeds N, the first of N")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data directories")
    ap.add_argument("--jobs", type=int_arg, default=1, help="worker processes at once (default 1)")
    ap.add_argument("--runs-dir", type=path_arg, default=Path("runs"), help="where the sim's directory goes")
    ap.add_argument("--spark-master", default=None, help="where the one analysis job runs (default local[*])")
    ap.add_argument("--no-judge", action="store_true", help="write the run directories only, judge nothing")
    return ap


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    console = user_console()
    problems = []
    if args.seeds is not None and not 1 <= args.seeds <= MAX_SIM_SEEDS:
        problems.append(f"--seeds {args.seeds}: expected a count from 1 to {MAX_SIM_SEEDS:,}")
    if args.seed is not None and not 0 <= args.seed <= MAX_SEED:
        problems.append(f"--seed {args.seed}: expected an integer from 0 to 2**63-1")
    if args.seed is not None and args.seeds is not None and args.seed + args.seeds - 1 > MAX_SEED >= args.seed:
        problems.append(f"--seed {args.seed} --seeds {args.seeds}: the last seed, {args.seed + args.seeds - 1}, "
                        f"is beyond 2**63-1")
    if not 1 <= args.jobs <= MAX_JOBS:
        problems.append(f"--jobs {args.jobs}: expected from 1 to {MAX_JOBS}")
    if not args.no_judge and (problem := spark_master_problem(args.spark_master)) is not None:
        problems.append(problem)  # before --runs-dir is made
    if problems:
        console.print("\n".join(problems), style="red", markup=False, soft_wrap=True)
        return EXIT_UNJUDGED
    try:
        targets = [Target(load_topology(path), path) for path in args.topologies]
        runs = [(t, seed) for t in targets for seed in _seeds_of(t.topology, args.seed, args.seeds)]
        _check(targets, runs)
    except TopologyError as e:
        console.print(str(e), style="red", markup=False, soft_wrap=True)
        return EXIT_UNJUDGED
    for t in targets:
        for note in [*scope.ignored(t.topology), *never_firing(t.topology)]:
            console.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    unusable = unusable_dir(args.runs_dir, "--runs-dir")
    if unusable is not None:
        console.print(unusable, style="red", markup=False, soft_wrap=True)
        return EXIT_UNJUDGED
    names = sorted({t.topology.name for t in targets})
    sim_dir = _new_sim_dir(args.runs_dir, names[0] if len(names) == 1 else f"{len(names)}-topologies")
    return run_sim(runs, sim_dir, args.jobs, args.keep, args.spark_master, judge=not args.no_judge, console=console)


def _seeds_of(topology: Topology, seed: int | None, seeds: int | None) -> list[int]:
    """`--seeds N` from 0, or from `--seed S` when both are given (DESIGN section 9 writes
    `--seeds 1000 [--seed S --keep]`); `--seed S` alone; else the topology's own seed."""
    if seeds is not None:
        return list(range(seed or 0, (seed or 0) + seeds))
    return [seed if seed is not None else topology.seed]


def _check(targets: list[Target], runs: list[tuple[Target, int]]) -> None:
    """Everything refused before anything runs: what the sim cannot model, two topologies of
    one name (their seeds' directories would meet), and each seed's topology (a seed
    decides placement, which faults that name replicas are checked against)."""
    errors = [line for t in targets for line in scope.refused(t.topology)]
    seen: dict[str, Path] = {}
    for t in targets:
        other = seen.setdefault(t.topology.name, t.source)
        if other is not t.source:
            again = "is given twice" if other.resolve() == t.source.resolve() else f"is also the name of {other}"
            errors.append(f"{t.source}: name: {t.topology.name!r} {again}; "
                          "each topology of one sim needs its own name")
    data = {t.source: read_yaml(t.source) for t in targets}
    failed: set[Path] = set()
    for t, seed in runs:
        if t.source in failed:
            continue
        try:
            parse_topology({**data[t.source], "seed": seed}, str(t.source))
        except TopologyError as e:
            errors.extend(f"(seed {seed}) {line}" for line in e.errors)
            failed.add(t.source)
    if errors:
        raise TopologyError(errors)


def _new_sim_dir(runs_dir: Path, name: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return runs_dir / f"{stamp}-sim-{name}"


def replay_command(source: Path, seed: int, runs_dir: Path | None = None) -> str:
    """The command that runs one seed again, into the sweep's own `--runs-dir` (the default
    `runs/` is left unsaid)."""
    return f"python run.py sim {shlex.quote(str(source))} --seed {seed} --keep{runs_dir_flag(runs_dir)}"


def run_sim(runs: list[tuple[Target, int]], sim_dir: Path, jobs: int = 1, keep: bool = False,
            spark_master: str | None = None, judge: bool = True, console: Console | None = None) -> int:
    """Run every (topology, seed), judge them all in one job, print the summary; the exit code."""
    console = console or user_console()
    files = sim_dir / SIM_FILES
    files.mkdir(parents=True, exist_ok=True)
    specs: dict[str, Path] = {}
    for t, _ in runs:
        spec = specs.setdefault(t.topology.name, files / f"{t.topology.name}.yaml")
        spec.write_text(yaml.safe_dump(t.topology.to_dict(), sort_keys=False), encoding="utf-8")
    sources = {t.topology.name: t.source for t, _ in runs}
    began = time.perf_counter()
    outcomes = _run_workers([(specs[t.topology.name], t.topology.name, seed) for t, seed in runs],
                            sim_dir, jobs, keep, console)
    wall = time.perf_counter() - began
    virtual = sum(o["virtual_s"] for o in outcomes)
    busy = sum(o["wall_s"] for o in outcomes)
    speed = (f"{virtual:.0f}s of virtual time, {virtual / busy:.0f}x real time in each worker" if busy
             else "no seed ran to its end")  # a worker that died reports no time
    seeds = counted(len(outcomes), "seed")
    console.print(f"{seeds} in {wall:.1f}s ({60 * len(outcomes) / wall:.0f} seeds/min with {jobs} "
                  f"job(s)); {speed}; run directories: {escape(str(sim_dir))}", highlight=False, soft_wrap=True,
                  emoji=False)
    ran = [o for o in outcomes if o["error"] is None]
    # A seed an internal error ended is judged too, as unjudged with that error (its results.json,
    # the summary's count); one whose worker died before it began has no directory to judge.
    cut_short = {Path(o["run_dir"]): o["error"] for o in outcomes
                 if o["error"] is not None and judge and (Path(o["run_dir"]) / "topology.yaml").is_file()}
    for o in outcomes:
        if o["error"] is not None and Path(o["run_dir"]) not in cut_short:
            console.print(f"[yellow]unjudged:[/] {escape(o['topology'])} seed {o['seed']}: {escape(o['error'])}  "
                          f"replay: {escape(replay_command(sources[o['topology']], o['seed'], sim_dir.parent))}",
                          highlight=False, soft_wrap=True, emoji=False)
    if not judge:
        return EXIT_UNJUDGED if len(ran) < len(outcomes) else EXIT_OK
    from testbed.analysis.pipeline import SummaryError, analyze_runs
    from testbed.analysis.session import stop_spark
    from testbed.analysis.terminal import print_verdict
    verdicts: list[RunVerdict] = []
    no_summary: str | None = None
    judged = [Path(o["run_dir"]) for o in ran] + list(cut_short)
    if judged:
        console.print(f"judging {counted(len(judged), 'seed')} in one Spark job ...")
        try:
            # A sweep's reader opens the reports of the seeds it names (failed, unjudged):
            # a thousand reports of passing seeds cost minutes of plotting for nobody.
            verdicts = analyze_runs(judged, spark_master,
                                    summary_dir=sim_dir / "summary" if len(judged) > 1 else None,
                                    reports="all" if len(judged) == 1 else "not-ok", cut_short=cut_short)
        except SummaryError as exc:  # every seed was judged: each is still named below
            verdicts, no_summary = exc.verdicts, str(exc)
        finally:
            stop_spark()
    if len(outcomes) == 1 and verdicts:
        print_verdict(console, verdicts[0])
        console.print(f"run directory: {escape(str(verdicts[0].run_dir))}", highlight=False, soft_wrap=True,
                      emoji=False)
    else:
        print_summary(console, verdicts, sources, [o["topology"] for o in outcomes
                                                   if o["error"] is not None and Path(o["run_dir"]) not in cut_short])
        if verdicts:
            reports = ("report.html in those named above (python run.py analyze <seed directory> writes any "
                       "other's)" if any(v.ok is not True for v in verdicts) else
                       "python run.py analyze <seed directory> writes a seed's report.html")
            summary = sim_dir / "summary" / "summary.html"  # none when the judgment failed
            console.print(f"results.json in every seed's directory; {reports}"
                          + (f"; summary: {escape(str(summary))}" if summary.is_file() else ""), highlight=False,
                          soft_wrap=True, emoji=False)
    if no_summary is not None:  # a tester's sweep said only this line, naming none of its failed seeds
        console.print(f"[red]no summary:[/] {escape(no_summary)}", highlight=False, soft_wrap=True, emoji=False)
    if len(ran) < len(outcomes) or any(v.ok is None for v in verdicts) or no_summary is not None:
        return EXIT_UNJUDGED
    return EXIT_OK if all(v.ok for v in verdicts) else EXIT_FAILED


def _run_workers(runs: list[tuple[Path, str, int]], sim_dir: Path, jobs: int, keep: bool,
                 console: Console) -> list[dict]:
    """The runs strided over `jobs` worker processes; each seed's outcome as it comes."""
    outcomes: list[dict] = []
    lock = Lock()
    # set and dict order of strings: the same in every process; and the worker's parent to die with
    env = {**os.environ, "PYTHONHASHSEED": "0", PARENT_ENV: str(os.getpid())}
    columns = (TextColumn("seeds"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    children = Children()
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("seeds", total=len(runs))

        def work(k: int) -> None:
            mine = runs[k::jobs]
            if not mine:
                return
            log = sim_dir / SIM_FILES / f"worker-{k}.log"
            command = [sys.executable, "-m", "testbed.sim.worker", str(sim_dir.resolve()),
                       *(arg for spec, _, seed in mine for arg in ("--run", str(spec.resolve()), str(seed))),
                       *(["--keep"] if keep else [])]
            seen = set()
            with open(log, "wb") as err, \
                    children.started(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err) as proc:
                if proc is None:  # the sweep was interrupted before this worker started
                    return
                assert proc.stdout is not None
                for line in proc.stdout:
                    o = json.loads(line)
                    if o.pop("internal", False):
                        o["error"] += f" (its traceback: {log})"
                    seen.add((o["topology"], o["seed"]))
                    with lock:
                        outcomes.append(o)
                        progress.update(task, advance=1)
                proc.wait()
            for _, name, seed in mine:
                if (name, seed) not in seen:  # the worker died: every seed it did not finish is unjudged
                    with lock:
                        outcomes.append({"topology": name, "seed": seed, "run_dir": str(seed_dir(sim_dir, name, seed)),
                                         "error": f"the worker exited {proc.returncode} (see {log})",
                                         "virtual_s": 0.0, "wall_s": 0.0})
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="isrlab-sim") as pool:
            try:
                list(pool.map(work, range(jobs)))
            except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the workers end their seeds, data removed, at once
                children.stop()
                raise
    return sorted(outcomes, key=lambda o: (o["topology"], o["seed"]))


def print_summary(console: Console, verdicts: list[RunVerdict], sources: dict[str, Path],
                  unbegun: Iterable[str] = ()) -> None:
    """The matrix's summary, a row per topology: seeds, passed, unjudged (`unbegun`: the
    topology of each seed whose worker died before it began, counted there), seeds with
    acks=all loss, lost writes, the median (and most) partition-seconds without a leader of the judged
    seeds, the expectations that failed; then every seed that failed or was not judged, with
    the command that replays it."""
    groups: dict[str, list[RunVerdict]] = {}
    for v in verdicts:
        groups.setdefault(v.run_dir.name.rsplit("-seed=", 1)[0], []).append(v)
    dead = Counter(unbegun)
    for name in dead:
        groups.setdefault(name, [])
    if not groups:
        return
    table = Table(title=f"sim: {len(verdicts) + sum(dead.values())} seeds")
    add_summary_columns(table, ("topology",), ("seeds", "passed", "unjudged", "with loss", "lost writes"))
    for name, vs in groups.items():
        lost = [judged_loss(v) for v in vs]
        no_leader = [v.results.get("figures", {}).get("unavailable_s", {}).get("no-leader", 0.0) for v in vs
                     if v.whole]
        failed = sorted({k for v in vs for k, e in v.results.get("expect", {}).items() if e["held"] is False})
        table.add_row(Text(name), str(len(vs) + dead[name]), str(sum(1 for v in vs if v.ok)),
                      str(sum(1 for v in vs if v.ok is None) + dead[name]), str(sum(1 for n in lost if n)),
                      str(sum(lost)), no_leader_cell(no_leader), ", ".join(failed))
    fit_labels(console, table, 1)
    console.print(table)
    for v in verdicts:
        if v.ok is not True:
            name, seed = v.run_dir.name.rsplit("-seed=", 1)
            word = "failed" if v.ok is False else "unjudged"
            console.print(f"[{'red' if v.ok is False else 'yellow'}]{word}:[/] {escape(name)} seed {seed}: "
                          f"{escape(broken_expectations(v))}  replay: "
                          f"{escape(replay_command(sources[name], int(seed), v.run_dir.parent.parent))}  "
                          f"report: {escape(str(v.run_dir / 'report.html'))}", highlight=False, soft_wrap=True,
                          emoji=False)
