"""Figures of the product as a user meets it: the quickstart and a 20 s run with three faults
from the command line, the verdict's delay after the workload, `run.py analyze` from a cold
command, and the pipeline on synthetic histories of millions of records."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from broker.common.jsonl import read_jsonl
from testbed.common import owned_dirs

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "topologies" / "quickstart.yaml"
#: DESIGN section 10's "20 s experiment with 3 faults, end to end including the pipeline"
THREE_FAULTS = ROOT / "topologies" / "three-faults.yaml"


@dataclass
class CommandRun:
    wall_s: float  # the command, start to exit
    verdict_after_workload_s: float  # the last workload operation to the verdict's report line
    run_dir: Path


def quickstart(runs: Path, env: dict[str, str] | None = None) -> CommandRun:
    """`python run.py topologies/quickstart.yaml` (see `experiment`)."""
    return experiment(QUICKSTART, runs, env)


def experiment(topology: Path, runs: Path, env: dict[str, str] | None = None) -> CommandRun:
    """`python run.py TOPOLOGY` as a user types it (in `env`, default this process's), which
    must meet its `expect:`. Its output is read line by line: the moment the report's path
    is printed is compared with the last operation of its workload in history.jsonl (both
    CLOCK_MONOTONIC, shared by every process)."""
    env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, str(ROOT / "run.py"), str(topology), "--runs-dir", str(runs)],
                            cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    verdict_ns = None
    lines = []
    try:
        for line in proc.stdout:
            lines.append(line)
            if "report:" in line and verdict_ns is None:
                verdict_ns = time.monotonic_ns()
        proc.wait()
    except KeyboardInterrupt:  # the bench stopped by SIGTERM (a terminal's Ctrl-C reaches the run too)
        proc.send_signal(signal.SIGTERM)  # the run stops its cluster and its JVM, as on Ctrl-C
        proc.wait()
        raise
    wall = time.monotonic() - t0
    run_dir = next((Path(line.split("run directory:", 1)[1].strip()) for line in lines
                    if "run directory:" in line), None)
    if proc.returncode != 0 or verdict_ns is None or run_dir is None or not run_dir.is_dir():
        raise RuntimeError(f"{topology.name} exited {proc.returncode}:\n{''.join(lines[-20:])}")
    workload_end = max(h["time_ns"] for h in read_jsonl(run_dir / "history.jsonl")
                       if h["process"] not in ("final-reader", "api"))
    return CommandRun(wall, (verdict_ns - workload_end) / 1e9, run_dir)


def analyze_cold(run_dir: Path, env: dict[str, str] | None = None) -> float:
    """Seconds of `python run.py analyze <run>` from a new process (a JVM started for it, or
    the server the `env`'s `ISRLAB_SPARK_SERVER_FILE` records)."""
    return _command_s(["analyze", str(run_dir)], env)


@dataclass
class ServerFigures:
    up_s: float  # `run.py spark up`, its warm-up included
    analyze_s: list[float]  # `run.py analyze` of each run, a new process each
    quickstarts: list[CommandRun]  # the quickstart judged on the server


def on_server(run_dirs: list[Path], runs: Path) -> ServerFigures:
    """`python run.py spark up` with its warm-up, then on that server `analyze` of each run
    from a new process, and as many quickstarts; the server is the bench's own, and goes."""
    with owned_dirs.scratch("isrlab-bench-server-") as tmp:
        env = {**os.environ, "ISRLAB_SPARK_SERVER_FILE": str(tmp / "server.json")}
        try:
            up = _command_s(["spark", "up"], env)
            analyses = [analyze_cold(run, env) for run in run_dirs]
            return ServerFigures(up, analyses, [quickstart(runs, env) for _ in run_dirs])
        finally:
            _command_s(["spark", "down"], env)


def _command_s(args: list[str], env: dict[str, str] | None) -> float:
    """Seconds of `python run.py ARGS`, which must exit 0."""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, str(ROOT / "run.py"), *args], cwd=ROOT, env=env,
                       capture_output=True, text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"run.py {' '.join(args)} exited {r.returncode}: {r.stdout[-2000:]}{r.stderr[-2000:]}")
    return time.monotonic() - t0


def pipeline(n_records: int, master: str) -> float:
    """Seconds the pipeline takes to judge a synthetic clean run of `n_records` history
    records, in a session started beforehand (its start is paid once, outside the figure)."""
    from testbed.analysis.pipeline import analyze_runs
    from testbed.analysis.session import C1_INPUT_BYTES, get_spark, stop_spark
    from testbed.analysis.synth import write_synthetic_run
    try:
        with owned_dirs.scratch("isrlab-pipeline-bench-") as tmp:
            run = write_synthetic_run(tmp, n_records)
            size = sum(f.stat().st_size for f in run.rglob("*.jsonl"))
            get_spark(master, small_input=size < C1_INPUT_BYTES)  # the JIT a judgment of this size gets
            start = time.perf_counter()
            [verdict] = analyze_runs([run], master)
            elapsed = time.perf_counter() - start
        if verdict.ok is not True:
            raise RuntimeError(f"the synthetic clean run was not judged clean: {verdict.results.get('problems')}")
        return elapsed
    finally:
        stop_spark()
