"""`python run.py matrix FILE_OR_DIR [--jobs J] [--seeds N] [--only SEL] [--deflake N]
[--shard K/N] [--keep-going] [--runs-dir D] [--time-scale F] [--spark-master URL] [--dry-run]`: every cell of a matrix (a directory:
of every matrix file in it), run J at a time and judged in one Spark job. Exit 0 when every
cell met its expectation, 1 when one did not, 2 when one could not be judged (its cluster did
not start: no further cell starts unless --keep-going, which counts it as failed) or the
matrix is invalid."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from testbed.common.console import user_console
from testbed.common.words import counted
from testbed.matrix.cells import Cell, cell_notes, expand_file, parse_shard, select
from testbed.matrix.spec import MAX_SEEDS, MatrixError, is_matrix_file
from testbed.config.cli_values import float_arg, int_arg, path_arg, spark_master_problem, time_scale_problem, unusable_dir


#: cells run at once on one host (each is a cluster of processes)
MAX_JOBS = 64
#: runs of a failed cell again
MAX_DEFLAKE = 100


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python run.py matrix", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("matrix", type=path_arg, help="a matrix YAML file, or a directory of them")
    ap.add_argument("--jobs", type=int_arg, default=1, help="cells run at a time (default 1)")
    ap.add_argument("--seeds", type=int_arg, default=None, help="seeds 0..N-1 instead of the file's seeds")
    ap.add_argument("--only", default=None,
                    help="cells whose values match key=value[,key=value] (varied keys, faults, seed), "
                         "or whose id contains the text")
    ap.add_argument("--deflake", type=int_arg, default=0, help="run each failed cell again up to N times")
    ap.add_argument("--shard", default=None, help="K/N: run the K-th of N deterministic shares of the cells")
    ap.add_argument("--keep-going", action="store_true",
                    help="run every cell even after one could not run (it then counts as failed: exit 1)")
    ap.add_argument("--runs-dir", type=path_arg, default=Path("runs"), help="where the matrix's directory goes")
    ap.add_argument("--time-scale", type=float_arg, default=1.0, help="as for a single run")
    ap.add_argument("--spark-master", default=None, help="where the one analysis job runs (default embedded)")
    ap.add_argument("--dry-run", action="store_true", help="list every cell (id and seed); run nothing")
    args = ap.parse_args(argv)
    problems = [f"--{name} must be {rule}" for name, bad, rule in (
        ("jobs", not 1 <= args.jobs <= MAX_JOBS, f"from 1 to {MAX_JOBS}"),
        ("seeds", args.seeds is not None and not 1 <= args.seeds <= MAX_SEEDS, f"from 1 to {MAX_SEEDS:,}"),
        ("deflake", not 0 <= args.deflake <= MAX_DEFLAKE, f"from 0 to {MAX_DEFLAKE}"),
        ("only", args.only is not None and not args.only.strip("=, "), "a selector (key=value or a piece of a cell id)"),
    ) if bad]
    if (problem := time_scale_problem(args.time_scale)) is not None:
        problems.append(problem)
    if (problem := spark_master_problem(args.spark_master)) is not None:
        problems.append(problem)
    try:
        shard = parse_shard(args.shard) if args.shard else None
    except ValueError as exc:
        problems.append(str(exc))
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    try:
        every = load_cells(args.matrix, args.seeds)
    except MatrixError as exc:
        print(exc, file=sys.stderr)
        return 2
    chosen = select(every, args.only)
    cells = select(chosen, shard=shard)
    if not cells and chosen:
        print(f"{args.matrix}: share {args.shard} holds no cell (fewer cells than shares): nothing to run")
        return 0  # a CI job with more shards than cells passes its empty share
    if not cells:
        keys = sorted({key for c in every for key in c.selectors()} | {k.split(".")[-1] for c in every
                                                                         for k, _ in c.settings})
        print(f"{args.matrix}: no cell matches" + (f" --only {args.only} (it takes key=value[,key=value] over "
                                                  f"{', '.join(keys)}, or a piece of a cell id)"
                                                  if args.only else ""), file=sys.stderr)
        return 2
    notes = [f"note: {note}" for note in cell_notes(cells)]  # as a run says a topology's
    if args.dry_run:
        for cell in cells:
            print(f"{cell.id}\tseed={cell.seed}")
        print("\n".join([counted(len(cells), "cell"), *notes]), file=sys.stderr)
        return 0
    if notes:
        print("\n".join(notes))
    if (unusable := unusable_dir(args.runs_dir, "--runs-dir")) is not None:
        print(unusable, file=sys.stderr)
        return 2
    from testbed.analysis.session import stop_spark
    from testbed.matrix.runner import new_matrix_dir, run_matrix
    try:
        return run_matrix(cells, new_matrix_dir(args.runs_dir, str(args.matrix), shard), args.jobs,
                          args.time_scale, args.deflake, args.spark_master, user_console(), args.keep_going,
                          source=args.matrix, seeds=args.seeds)
    finally:
        stop_spark()


def load_cells(path: Path, seeds: int | None = None) -> list[Cell]:
    """The cells of a matrix file, or of every matrix file in a directory (in name order: a
    `*.yaml` with a `base:` key; the topologies and schedules beside them are not matrices);
    `seeds` as `--seeds`."""
    files = sorted(f for f in path.glob("*.yaml") if is_matrix_file(f)) if path.is_dir() else [path]
    if not files:
        raise MatrixError([f"{path}: a directory without matrix files (*.yaml)"])
    cells: list[Cell] = []
    errors: list[str] = []
    source: dict[str, Path] = {}  # the file of each cell id seen
    shared: dict[tuple[str, str], list[str]] = {}  # two files -> the ids both give
    for file in files:
        try:
            found = expand_file(file, seeds)
        except MatrixError as exc:
            errors.extend(exc.errors)
            continue
        for cell in found:
            if cell.id in source:
                shared.setdefault((source[cell.id].name, file.name), []).append(cell.id)
            source.setdefault(cell.id, file)
        cells.extend(found)
    errors += [f"{path}: {a} and {b} both give cells the ids {', '.join(ids[:3])}{' ...' if len(ids) > 3 else ''} "
               f"(a cell's run directory is named by its id: give their base topologies different names)"
               for (a, b), ids in shared.items()]
    if errors:
        raise MatrixError(errors)
    return cells

