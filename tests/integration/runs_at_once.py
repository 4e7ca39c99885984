"""Several runs of a test at once, each in a supervisor process of its own, as the matrix runs
its cells side by side.

A test that compares settings (safe against unsafe, one backend against the other) used to
run its clusters one after the other: the pair's wall time was twice a run's, while its
node processes each use under a second of CPU. Run together, the pair costs one run's
time; the protocol modes' module runs all its tests' runs four at a time. Each run gets a process of its own because a supervisor owns its node processes and
clock; the process is spawned, not forked, since the test worker holds a JVM and threads
that a fork would copy half-way.
"""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rich.console import Console

from testbed.experiment.runner import Outcome, run_cluster
from testbed.topology import Topology


def _run_quietly(topology: Topology, runs_dir: Path, time_scale: float, run_dir: Path | None) -> Outcome:
    return run_cluster(topology, runs_dir=runs_dir, time_scale=time_scale, console=Console(quiet=True),
                       run_dir=run_dir)


def run_clusters(topologies: list[Topology], runs_dir: Path, time_scale: float,
                 run_dirs: list[Path | None] | None = None, at_once: int | None = None) -> list[Outcome]:
    """`run_cluster` of every topology, `at_once` at a time (default: all), each in a process
    of its own; the outcomes in the topologies' order."""
    run_dirs = run_dirs or [None] * len(topologies)
    with ProcessPoolExecutor(max_workers=min(at_once or len(topologies), len(topologies)),
                             mp_context=multiprocessing.get_context("spawn"), max_tasks_per_child=1) as pool:
        futures = [pool.submit(_run_quietly, t, runs_dir, time_scale, d) for t, d in zip(topologies, run_dirs)]
        return [f.result() for f in futures]
