"""Figures of the deterministic simulation (issue 13, DESIGN section 10): how much faster
than real time one worker runs a quickstart-sized topology, and how long many seeds take to
run and be judged from the command line."""
from __future__ import annotations

import dataclasses
import gc
import subprocess
import sys
import time
from pathlib import Path

from testbed.sim.run import run_seed
from testbed.common import owned_dirs
from testbed.config.loader import load_topology

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "topologies" / "quickstart.yaml"


def speedup(runs: int) -> list[float]:
    """Virtual seconds per wall second of one seed of the quickstart (3 brokers, 1
    controller, 6 partitions, 2 producers), in this process, per seed."""
    topology = load_topology(QUICKSTART)
    gc.freeze()  # as a worker does before its seeds (testbed/sim/worker.py)
    out = []
    with owned_dirs.scratch("isrlab-sim-bench-") as tmp:
        for seed in range(runs):
            start = time.perf_counter()
            outcome = run_seed(dataclasses.replace(topology, seed=seed), tmp / f"s{seed}")
            if outcome.error is not None:
                raise RuntimeError(f"quickstart seed {seed} did not run: {outcome.error}")
            out.append(outcome.virtual_seconds / (time.perf_counter() - start))
    return out


def seeds_run_and_judged(seeds: int, jobs: int = 2) -> float:
    """Seconds of `python run.py sim topologies/quickstart.yaml --seeds N --jobs J`, run and
    judged in one Spark job, from the command line."""
    with owned_dirs.scratch("isrlab-sim-bench-") as tmp:
        start = time.perf_counter()
        r = subprocess.run([sys.executable, str(ROOT / "run.py"), "sim", str(QUICKSTART), "--seeds", str(seeds),
                            "--jobs", str(jobs), "--runs-dir", tmp], cwd=ROOT, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
    if r.returncode != 0:
        raise RuntimeError(f"run.py sim exited {r.returncode}: {r.stdout[-2000:]}{r.stderr[-2000:]}")
    return elapsed
