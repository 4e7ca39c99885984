"""A simulation worker process:
`python -m testbed.sim.worker SIM_DIR --run TOPOLOGY SEED [--run TOPOLOGY SEED ...] [--keep]`.

Runs each (topology, seed) in turn in `SIM_DIR/<name>-seed=<seed>/` and prints one JSON line per seed
(what became of it) for `run.py sim` to follow. Started with PYTHONHASHSEED=0, so that the
iteration order of every set and dict of strings, and with it every byte of a run, is
the same in every process (`cli.py` sets it). It dies with the `run.py sim` that started it.
"""
from __future__ import annotations

import argparse
import functools
import gc
import json
import os
import signal
import sys
import time
import traceback
from pathlib import Path

import yaml

from broker.common.lifetime import die_with_parent
from testbed.sim.run import run_seed
from testbed.sim.scratch import reap_orphans, remove_mine
from testbed.config.parser import parse_topology

#: the pid of the `run.py sim` that started the worker, which it dies with
PARENT_ENV = "ISRLAB_SIM_PID"


def seed_dir(sim_dir: Path, name: str, seed: int) -> Path:
    return sim_dir / f"{name}-seed={seed}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.sim.worker")
    ap.add_argument("sim_dir", type=Path)
    ap.add_argument("--run", nargs=2, action="append", required=True, metavar=("TOPOLOGY", "SEED"))
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)
    # A killed `run.py sim` leaves no worker running, nor the seed's data in memory: the
    # worker is sent SIGTERM, and removes its scratch directories before it exits.
    signal.signal(signal.SIGTERM, functools.partial(_die, args.sim_dir))
    die_with_parent(int(os.environ.get(PARENT_ENV, "0")), signal.SIGTERM)
    reap_orphans()  # the data of a worker killed mid-seed
    # The modules' objects, most of the process's, live as long as it does: frozen, the
    # collector's full passes during a seed no longer walk them all (-1.3 % of a quickstart
    # seed's instructions). Nothing a seed writes depends on when the collector runs.
    gc.freeze()
    for path, seed_text in args.run:
        seed = int(seed_text)
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
        topology = parse_topology({**data, "seed": seed}, path)  # checked by `run.py sim` first
        run_dir = seed_dir(args.sim_dir, topology.name, seed)
        began = time.perf_counter()  # the worker's own speed, for the summary; never seen by the run
        line: dict = {"topology": topology.name, "seed": seed, "run_dir": str(run_dir)}
        try:
            outcome = run_seed(topology, run_dir, keep_data=args.keep)
            line |= {"error": outcome.error, "virtual_s": outcome.virtual_seconds}
        except Exception as exc:  # noqa: BLE001 - a defect met by one seed: the seed says so, the next ones run
            traceback.print_exc()  # into the worker's log, which `run.py sim` names
            line |= {"error": f"an internal error of the simulation ended the seed: {type(exc).__name__}: {exc}",
                     "virtual_s": 0.0, "internal": True}
        print(json.dumps(line | {"wall_s": time.perf_counter() - began}), flush=True)
    return 0


def _die(sim_dir: Path, signum: int, frame: object) -> None:
    """Exit at once, the seed's data removed. Not by unwinding the seed: the signal may land
    in its clean-up, or before its `try`, and leave the data behind (1 kill in 4 did)."""
    remove_mine(sim_dir)
    os._exit(128 + signum)


if __name__ == "__main__":
    sys.exit(main())
