"""One matrix cell in its own process: `python -m testbed.matrix.cell_main CELL.yaml RUN_DIR
RUNS_DIR TIME_SCALE`. The cluster runs as `run.py` would run it, unjudged (the matrix judges
every cell in one Spark job). The process is the cell's supervisor: it dies with the matrix
(PR_SET_PDEATHSIG, SIGTERM) and then stops its cluster on the way out, as on Ctrl-C. It
registers its processes in RUNS_DIR/.live, the user's runs directory, so that a later
`run.py` there reaps what a killed cell left."""
from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from types import FrameType


def main(argv: list[str]) -> int:
    from broker.common.lifetime import die_with_parent
    cell, run_dir, runs_dir, time_scale = Path(argv[0]), Path(argv[1]), Path(argv[2]), float(argv[3])
    die_with_parent(int(os.environ.get("ISRLAB_MATRIX_PID", "0")), signal.SIGTERM)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)  # a terminal's Ctrl-C, then the matrix's SIGTERM: one stop
    from rich.console import Console

    from testbed.experiment.runner import run_cluster
    from testbed.config.loader import load_topology
    outcome = run_cluster(load_topology(cell), runs_dir=runs_dir, time_scale=time_scale,
                          console=Console(force_terminal=False, width=120), run_dir=run_dir)
    return 0 if outcome.counts is not None else 1


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """The first SIGTERM or SIGINT stops the cell as Ctrl-C would; the stopping itself
    (killing the nodes, unmounting, unregistering) is not to be cut short by another: a
    terminal's Ctrl-C reaches the cell, and the matrix it also reached passes SIGTERM on."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except KeyboardInterrupt:  # the matrix stopped: the cluster is down, the cell's log says so in a line
        print("the cell was stopped with its matrix", file=sys.stderr)
        sys.exit(130)
