"""`python run.py bench`: every figure of DESIGN section 10 this build can measure, each over
several measurements (min, median, max), compared with its target; a table, or `--json`.

Figures are measured and written down (BENCHMARKS.md), never asserted by a test. The groups
(`--only`): ready, failover, throughput, latency, rss, e2e (the quickstart and a 20 s run with
three faults from the command line, a cold `analyze` of the quickstart's run, and the same on a
`run.py spark up` server), pipeline
(synthetic histories), sim (the deterministic simulation's speed), netns (the netns backend
against userspace; root, ip and nft, else skipped with the reason).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from rich.table import Table

from testbed.analysis import class_archive
from testbed.analysis.spark_command import WARM_UP_ROUNDS
from testbed.bench import cluster_figures as cf
from testbed.bench import e2e
from testbed.bench import sim as sim_bench
from testbed.bench.figures import Figure, percentile
from testbed.common import owned_dirs
from testbed.common.console import user_console
from testbed.config.cli_values import float_arg, int_arg, range_problem, spark_master_problem
from testbed.config.scalars import MAX_BATCH, MAX_CLIENTS
from testbed.supervisor.netns import requirements_missing

GROUPS = ("ready", "failover", "throughput", "latency", "rss", "e2e", "pipeline", "sim", "netns")


def _args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python run.py bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--repeat", type=int_arg, default=3, help="measurements per figure (default 3)")
    ap.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated groups of {', '.join(GROUPS)}")
    ap.add_argument("--window", type=float_arg, default=3.0, help="seconds per throughput measurement")
    ap.add_argument("--producers", type=int_arg, default=2)
    ap.add_argument("--batch", type=int_arg, default=500)
    ap.add_argument("--latency-sends", type=int_arg, default=1000, help="acks=all sends timed one at a time, per round")
    ap.add_argument("--e2e-repeat", type=int_arg, default=1, help="quickstart and three-faults runs each (about 80 s a pair with their analyses)")
    ap.add_argument("--pipeline-records", type=_record_counts, default="1000000",
                    help="history records of the synthetic runs the pipeline judges, comma-separated (0 skips)")
    ap.add_argument("--sim-seeds", type=int_arg, default=1000,
                    help="quickstart seeds `run.py sim` runs and judges for the sim's figure (default 1000, "
                         "about 5 minutes; fewer are extrapolated to 1,000, 0 skips it)")
    ap.add_argument("--spark-master", default="local[2]")
    args = ap.parse_args(argv)
    unknown = set(args.only.split(",")) - set(GROUPS)
    if unknown:
        ap.error(f"--only: unknown group(s) {', '.join(repr(u) for u in sorted(unknown))} "
                 f"(groups: {', '.join(GROUPS)})")
    bounds = (("--repeat", args.repeat, 1, 100), ("--e2e-repeat", args.e2e_repeat, 1, 100),
              ("--window", args.window, 0.1, 3600), ("--producers", args.producers, 1, MAX_CLIENTS),
              ("--batch", args.batch, 1, MAX_BATCH), ("--latency-sends", args.latency_sends, 1, 1_000_000),
              ("--sim-seeds", args.sim_seeds, 0, 1_000_000))
    for problem in (range_problem(*b) for b in bounds):
        if problem is not None:
            ap.error(problem)
    if (problem := spark_master_problem(args.spark_master)) is not None:
        ap.error(problem)
    return args


def _record_counts(text: str) -> list[int]:
    """`--pipeline-records 1000000,10000000`: each a count of history records, 0 to skip."""
    counts = [int_arg(part) for part in text.split(",")]
    if any(not 0 <= c <= 100_000_000 for c in counts):
        raise argparse.ArgumentTypeError(f"{text!r}: expected counts from 0 to 100,000,000")
    return counts


def measure(args: argparse.Namespace, runs: Path) -> list[Figure]:
    only, n = set(args.only.split(",")), args.repeat
    timing = cf.topology().timing
    figures: list[Figure] = []
    if "ready" in only:
        figures.append(Figure("ready_s", "cluster ready", "s", cf.ready(runs, n),
                              "1 controller + 3 brokers, 24 partitions RF 3"))
        figures.append(Figure("ready_quorum_s", "cluster ready, quorum", "s", cf.ready(runs, n, 3, 6),
                              "3 controllers + 6 brokers, 24 partitions RF 3", ("<=", 1.5)))
    if "failover" in only:
        figures.append(Figure("leader_failover_kill_s", "leader failover, SIGKILL", "s",
                              cf.leader_failover(runs, max(n, 5), controlled=False),
                              f"SIGKILL of the leader to the first acks=all write a new leader acknowledges, "
                              f"session_timeout {timing.session_timeout:g} s", ("<=", timing.session_timeout + 0.1)))
        figures.append(Figure("leader_failover_controlled_s", "leader failover, controlled shutdown", "s",
                              cf.leader_failover(runs, max(n, 5), controlled=True),
                              "controlled shutdown of the leader to the first write a new leader acknowledges",
                              ("<=", 0.1)))
        high = timing.controller_election_timeout[1]
        figures.append(Figure("controller_failover_s", "controller failover", "s",
                              cf.controller_failover(runs, max(10, n)),
                              f"SIGKILL of the active controller to the next committed record, election timeout "
                              f"max {high:g} s", ("<=", high + 0.2)))
    if "throughput" in only:
        rates = cf.throughput(runs, n, args.window, args.producers, args.batch)
        figures.append(Figure("throughput_records_per_s", "acks=all throughput", "records/s", rates,
                              f"RF 3, {cf.RECORD_BYTES}-byte records, batch {args.batch}, {args.producers} "
                              f"producers, history recorded", (">=", 150_000)))
        figures.append(Figure("throughput_mb_per_s", "acks=all throughput", "MB/s",
                              [r * cf.RECORD_BYTES / 1e6 for r in rates], "the same"))
        figures.append(Figure("throughput_batch1_records_per_s", "acks=all throughput, batch 1", "records/s",
                              cf.throughput(runs, n, args.window, 4, 1), "RF 3, 4 producers, one request in flight "
                              "each, history recorded", (">=", 4000)))
        figures.append(Figure("throughput_in_flight5_records_per_s", "acks=all throughput, in_flight 5", "records/s",
                              cf.throughput(runs, n, args.window, 2, 10, in_flight=5),
                              "RF 3, batch 10, 2 producers with 5 requests in flight each"))
    if "latency" in only:
        rounds = cf.produce_latency(runs, n, args.latency_sends)
        setup = f"acks=all RF 3, 1 record a request, one at a time, {args.latency_sends} sends a round"
        figures.append(Figure("produce_latency_p50_ms", "acks=all produce latency p50", "ms",
                              [1000 * percentile(r, 0.5) for r in rounds], setup, ("<=", 1.0)))
        figures.append(Figure("produce_latency_p99_ms", "acks=all produce latency p99", "ms",
                              [1000 * percentile(r, 0.99) for r in rounds], setup, ("<=", 5.0)))
    if "rss" in only:
        figures.append(Figure("idle_broker_rss_mb", "RSS of an idle broker", "MB", cf.idle_broker_rss(runs),
                              "each broker of 1 controller + 3 brokers, 24 partitions, idle 3 s", ("<=", 40)))
    if "e2e" in only:
        figures += _e2e(runs, args.e2e_repeat)
    if "pipeline" in only:
        for records in (r for r in args.pipeline_records if r > 0):
            figures.append(Figure(f"pipeline_{records}_s", f"pipeline, {records:,} records", "s",
                                  [e2e.pipeline(records, args.spark_master)],
                                  f"synthetic clean run, {args.spark_master}, warm session; target: the linear "
                                  f"share of 60 s for 10M", ("<=", 60 * records / 10_000_000)))
    if "sim" in only:
        figures += _sim(n, args.sim_seeds)
    if "netns" in only:
        figures += _netns(runs, n, args.window)
    return figures


def _netns(runs: Path, repeat: int, window: float) -> list[Figure]:
    missing = requirements_missing()
    if missing:
        print(f"bench: netns group skipped: it needs {' and '.join(missing)}", file=sys.stderr)
        return []
    figures = [Figure("netns_setup_s", "netns setup, 1 controller + 6 brokers", "s", cf.netns_setup(runs, repeat),
                      "namespaces, veth pairs on one bridge and addresses for 7 nodes and the clients")]
    for backend in ("netns", "userspace"):
        figures.append(Figure(f"throughput_in_flight5_{backend}_records_per_s", f"acks=all throughput, {backend}",
                              "records/s", cf.throughput(runs, repeat, window, 2, 10, in_flight=5, backend=backend),
                              "RF 3, batch 10, 2 producers with 5 requests in flight each"))
    for backend in ("netns", "userspace"):
        rounds = [cf.workload_latency(runs, window, backend) for _ in range(repeat)]
        setup = "one workload producer, acks=all RF 3, batch 1, one request in flight, from its history"
        figures.append(Figure(f"workload_latency_p50_{backend}_ms", f"workload produce latency p50, {backend}", "ms",
                              [1000 * percentile(r, 0.5) for r in rounds], setup))
        figures.append(Figure(f"workload_latency_p99_{backend}_ms", f"workload produce latency p99, {backend}", "ms",
                              [1000 * percentile(r, 0.99) for r in rounds], setup))
    return figures


def _sim(repeat: int, seeds: int) -> list[Figure]:
    figures = [Figure("sim_speedup_x", "sim speed-up over real time", "x", sim_bench.speedup(max(repeat, 5)),
                      "one seed of the quickstart (3 brokers, 1 controller, 6 partitions, 2 producers) in one "
                      "process: virtual seconds per wall second", (">=", 100))]
    if seeds <= 0:
        return figures
    total = sim_bench.seeds_run_and_judged(seeds)
    return [*figures,
            Figure("sim_seeds_per_min", "sim seeds run and judged", "seeds/min", [60 * seeds / total],
                   f"python run.py sim topologies/quickstart.yaml --seeds {seeds} --jobs 2, one Spark job"),
            Figure("sim_1000_seeds_min", "sim, 1,000 seeds run and judged", "min", [1000 / (60 * seeds / total)],
                   "measured" if seeds == 1000 else f"extrapolated linearly from {seeds} seeds (a Spark job's fixed "
                   "costs make that an overestimate)", ("<=", 10))]


def _e2e(runs: Path, repeat: int) -> list[Figure]:
    # A JVM of its own per command, even while the user has a `spark up` server (whose figures follow)
    own = {**os.environ, "ISRLAB_SPARK_SERVER_FILE": str(runs / "no-spark-server.json")}
    if not class_archive.recorded():  # a new machine's first JVM records it: once, not what a user meets after
        e2e.quickstart(runs, own)
    quick = [e2e.quickstart(runs, own) for _ in range(repeat)]
    faulted = [e2e.experiment(e2e.THREE_FAULTS, runs, own) for _ in range(repeat)]
    cold = [e2e.analyze_cold(q.run_dir, own) for q in quick]
    server = e2e.on_server([q.run_dir for q in quick], runs)
    return [Figure("quickstart_wall_s", "quickstart end to end", "s", [q.wall_s for q in quick],
                   "python run.py topologies/quickstart.yaml (10 s workload)", ("<=", 22.0)),
            Figure("verdict_after_workload_s", "verdict after the workload", "s",
                   [q.verdict_after_workload_s for q in quick],
                   "the quickstart's last workload operation to its verdict, JVM start included", ("<=", 8.0)),
            Figure("three_faults_wall_s", "20 s run with 3 faults end to end", "s", [f.wall_s for f in faulted],
                   "python run.py topologies/three-faults.yaml (20 s workload, 3 faults, judged)", ("<=", 35.0)),
            Figure("three_faults_verdict_s", "verdict after the workload, 3 faults", "s",
                   [f.verdict_after_workload_s for f in faulted],
                   "the same runs' last workload operation to their verdict", ("<=", 8.0)),
            Figure("analyze_cold_s", "analyze of a small run, cold", "s", cold,
                   "python run.py analyze <the quickstart's run>", ("<=", 10.0)),
            Figure("spark_up_s", "spark up, warm-up included", "s", [server.up_s],
                   f"python run.py spark up: the server's start and its {WARM_UP_ROUNDS} judgments of a synthetic "
                   f"run"),
            Figure("analyze_server_s", "analyze of a small run, server up", "s", server.analyze_s,
                   "python run.py analyze <the quickstart's run>, a new process, on the server just started",
                   ("<=", 10.0)),
            Figure("verdict_after_workload_server_s", "verdict after the workload, server up", "s",
                   [q.verdict_after_workload_s for q in server.quickstarts],
                   "the quickstart judged on that server (no JVM of its own)", ("<=", 8.0)),
            Figure("quickstart_wall_server_s", "quickstart end to end, server up", "s",
                   [q.wall_s for q in server.quickstarts], "the same runs", ("<=", 22.0))]


def _table(figures: list[Figure]) -> Table:
    t = Table(title="isrlab bench")
    for col in ("figure", "unit", "min", "median", "max", "target", "met"):
        t.add_column(col, justify="right" if col in ("min", "median", "max") else "left")
    for f in figures:
        fmt = (lambda x: f"{x:,.0f}") if (f.median or 0) >= 100 else (lambda x: f"{x:.3g}")
        met = {True: "[green]yes[/]", False: "[red]no[/]", None: ""}[f.met]
        target = "" if f.target is None else f"{f.target[0]} {f.target[1]:g}"
        t.add_row(f.label, f.unit, fmt(min(f.runs)), fmt(f.median), fmt(max(f.runs)), target, met)
    return t


def main(argv: list[str]) -> int:
    args = _args(argv)
    with owned_dirs.scratch("isrlab-bench-") as tmp:  # a SIGKILLed bench's, 210 MB, went by the next (trial29)
        figures = measure(args, tmp)
    if args.json:
        print(json.dumps({f.name: f.to_json() for f in figures}, indent=1))
    else:
        console = user_console()
        console.print(_table(figures))
        for f in figures:
            console.print(f"[dim]{f.label} ({f.unit}): {f.setup}[/]")
    return 0
