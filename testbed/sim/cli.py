"""`python run.py sim TOPOLOGY [--seeds N | --seed S] [--keep] [--jobs J] [--runs-dir D]`.

Runs the topology on virtual time once per seed, J worker processes at a time, each seed
into its own run directory in the real format; then judges every seed in one Spark job
and prints the matrix's summary, the speed, and for every seed that failed or could not
be judged the command that replays it. Exit 0 when every seed met the topology's `expect:`,
1 when one did not, 2 when one could not be judged or the input is wrong.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Lock

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from testbed.analysis.cli import EXIT_FAILED, EXIT_OK, EXIT_UNJUDGED
from testbed.analysis.verdict import RunVerdict
from testbed.config.loader import read_yaml
from testbed.matrix.results import broken_expectations, check_count
from testbed.sim import scope
from testbed.sim.worker import seed_dir
from testbed.topology import Topology, TopologyError, load_topology, parse_topology

ROOT = Path(__file__).resolve().parents[2]
#: the sim's own files (the topology the workers read, their logs): hidden from `find_runs`
SIM_FILES = ".sim"


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python run.py sim", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("topology", type=Path, help="a topology YAML file (schema v1)")
    which = ap.add_mutually_exclusive_group()
    which.add_argument("--seeds", type=int, help="run seeds 0..N-1 (default: the topology's own seed)")
    which.add_argument("--seed", type=int, help="run this one seed (replay a failing one)")
    ap.add_argument("--keep", action="store_true", help="keep the brokers' data directories")
    ap.add_argument("--jobs", type=int, default=1, help="worker processes at once (default 1)")
    ap.add_argument("--runs-dir", type=Path, default=Path("runs"), help="where the sim's directory goes")
    ap.add_argument("--spark-master", default=None, help="where the one analysis job runs (default local[*])")
    ap.add_argument("--no-judge", action="store_true", help="write the run directories only, judge nothing")
    return ap


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    problems = []
    if args.seeds is not None and args.seeds < 1:
        problems.append(f"--seeds {args.seeds}: expected a count of at least 1")
    if args.seed is not None and args.seed < 0:
        problems.append(f"--seed {args.seed}: expected a non-negative integer")
    if args.jobs < 1:
        problems.append(f"--jobs {args.jobs}: expected at least 1")
    if problems:
        console.print("\n".join(problems), style="red", markup=False, soft_wrap=True)
        return EXIT_UNJUDGED
    try:
        topology = load_topology(args.topology)
        seeds = [args.seed] if args.seed is not None else (
            list(range(args.seeds)) if args.seeds is not None else [topology.seed])
        _check_seeds(args.topology, seeds)
    except TopologyError as e:
        console.print(str(e), style="red", markup=False, soft_wrap=True)
        return EXIT_UNJUDGED
    refusals = scope.refused(topology)
    if refusals:
        console.print("\n".join(refusals), style="red", markup=False, soft_wrap=True)
        return EXIT_UNJUDGED
    for note in scope.ignored(topology):
        console.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    sim_dir = _new_sim_dir(args.runs_dir, topology.name)
    return run_sim(topology, args.topology, seeds, sim_dir, args.jobs, args.keep, args.spark_master,
                   judge=not args.no_judge, console=console)


def _check_seeds(path: Path, seeds: list[int]) -> None:
    """Every seed's topology is checked before anything runs (a seed decides placement, which
    faults that name replicas are checked against)."""
    data = read_yaml(path)
    errors: list[str] = []
    for seed in seeds:
        try:
            parse_topology({**data, "seed": seed}, str(path))
        except TopologyError as e:
            errors.extend(f"(seed {seed}) {line}" for line in e.errors)
            break
    if errors:
        raise TopologyError(errors)


def _new_sim_dir(runs_dir: Path, name: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return runs_dir / f"{stamp}-sim-{name}"


def replay_command(source: Path, seed: int) -> str:
    return f"python run.py sim {source} --seed {seed} --keep"


def run_sim(topology: Topology, source: Path, seeds: list[int], sim_dir: Path, jobs: int = 1, keep: bool = False,
            spark_master: str | None = None, judge: bool = True, console: Console | None = None) -> int:
    """Run every seed, judge them in one job, print the summary; the exit code."""
    console = console or Console()
    files = sim_dir / SIM_FILES
    files.mkdir(parents=True, exist_ok=True)
    spec = files / "topology.yaml"
    spec.write_text(yaml.safe_dump(topology.to_dict(), sort_keys=False), encoding="utf-8")
    began = time.perf_counter()
    outcomes = _run_workers(spec, sim_dir, seeds, jobs, keep, console, topology.name)
    wall = time.perf_counter() - began
    ran = [o for o in outcomes if o["error"] is None]
    virtual = sum(o["virtual_s"] for o in outcomes)
    busy = sum(o["wall_s"] for o in outcomes)
    console.print(f"{len(outcomes)} seeds in {wall:.1f}s ({60 * len(outcomes) / wall:.0f} seeds/min with {jobs} "
                  f"job(s)); {virtual:.0f}s of virtual time at {virtual / busy if busy else 0:.0f}x real time per "
                  f"worker; run directories: {sim_dir}", highlight=False)
    for o in outcomes:
        if o["error"] is not None:
            console.print(f"[yellow]unjudged:[/] seed {o['seed']}: {o['error']}  replay: "
                          f"{replay_command(source, o['seed'])}", highlight=False, soft_wrap=True)
    if not judge:
        return EXIT_UNJUDGED if len(ran) < len(outcomes) else EXIT_OK
    from testbed.analysis.pipeline import analyze_runs
    from testbed.analysis.session import stop_spark
    from testbed.analysis.terminal import print_verdict
    verdicts: list[RunVerdict] = []
    if ran:
        console.print(f"judging {len(ran)} seeds in one Spark job ...")
        try:
            verdicts = analyze_runs([Path(o["run_dir"]) for o in ran], spark_master,
                                    summary_dir=sim_dir / "summary" if len(ran) > 1 else None)
        finally:
            stop_spark()
    if len(outcomes) == 1 and verdicts:
        print_verdict(console, verdicts[0])
        console.print(f"run directory: {verdicts[0].run_dir}")
    else:
        print_summary(console, topology, verdicts, source)
    if len(ran) < len(outcomes) or any(v.ok is None for v in verdicts):
        return EXIT_UNJUDGED
    return EXIT_OK if all(v.ok for v in verdicts) else EXIT_FAILED


def _run_workers(spec: Path, sim_dir: Path, seeds: list[int], jobs: int, keep: bool,
                 console: Console, name: str) -> list[dict]:
    """The seeds strided over `jobs` worker processes; each seed's outcome as it comes."""
    outcomes: list[dict] = []
    lock = Lock()
    env = {**os.environ, "PYTHONHASHSEED": "0"}  # set and dict order of strings: the same in every process
    columns = (TextColumn("seeds"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("seeds", total=len(seeds))

        def work(k: int) -> None:
            mine = seeds[k::jobs]
            if not mine:
                return
            log = sim_dir / SIM_FILES / f"worker-{k}.log"
            command = [sys.executable, "-m", "testbed.sim.worker", str(spec.resolve()), str(sim_dir.resolve()),
                       *map(str, mine), *(["--keep"] if keep else [])]
            with open(log, "wb") as err:
                proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=err)
                assert proc.stdout is not None
                seen = set()
                for line in proc.stdout:
                    o = json.loads(line)
                    seen.add(o["seed"])
                    with lock:
                        outcomes.append(o)
                        progress.update(task, advance=1)
                proc.wait()
            for seed in mine:
                if seed not in seen:  # the worker died: every seed it did not finish is unjudged
                    with lock:
                        outcomes.append({"seed": seed, "run_dir": str(seed_dir(sim_dir, name, seed)),
                                         "error": f"the worker exited {proc.returncode} (see {log})",
                                         "converged": False, "virtual_s": 0.0, "wall_s": 0.0, "steps": 0})
        with ThreadPoolExecutor(max_workers=jobs, thread_name_prefix="isrlab-sim") as pool:
            list(pool.map(work, range(jobs)))
    return sorted(outcomes, key=lambda o: o["seed"])


def print_summary(console: Console, topology: Topology, verdicts: list[RunVerdict], source: Path) -> None:
    """The matrix's summary for one topology and setting: seeds, seeds with acks=all loss, lost
    writes, the median partition-seconds without a leader, the expectations that failed; then
    every seed that failed or was not judged, with the command that replays it."""
    if not verdicts:
        return
    lost = [check_count(v, "lost_writes") or 0 for v in verdicts]
    no_leader = [v.results.get("figures", {}).get("unavailable_s", {}).get("no-leader", 0.0) for v in verdicts]
    failed = sorted({name for v in verdicts for name, e in v.results.get("expect", {}).items() if e["held"] is False})
    table = Table(title=f"sim: {len(verdicts)} seeds of {topology.name}")
    for col in ("seeds", "passed", "with loss", "lost writes", "median no-leader s", "failed expectations"):
        table.add_column(col, justify="right" if col != "failed expectations" else "left", overflow="fold")
    table.add_row(str(len(verdicts)), str(sum(1 for v in verdicts if v.ok)), str(sum(1 for n in lost if n)),
                  str(sum(lost)), f"{statistics.median(no_leader):.2f}", ", ".join(failed))
    console.print(table)
    for v in verdicts:
        if v.ok is not True:
            seed = int(v.run_dir.name.rsplit("=", 1)[1])
            word = "failed" if v.ok is False else "unjudged"
            console.print(f"[{'red' if v.ok is False else 'yellow'}]{word}:[/] seed {seed}: {broken_expectations(v)}"
                          f"  replay: {replay_command(source, seed)}  report: {v.run_dir / 'report.html'}",
                          highlight=False, soft_wrap=True)
