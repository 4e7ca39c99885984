"""isrlab command line (DESIGN section 9). Thin: parses arguments and calls `testbed`.

    python run.py topologies/quickstart.yaml [--seed N] [--time-scale F] [--keep-data] [--runs-dir D] [--dry-run]
    python run.py validate FILE [FILE ...]   (a topology, a matrix, or a lab's directory or guide.md)
    python run.py status [--runs-dir D] [--watch [--frames N]]
    python run.py analyze runs/<id> | runs/ [--spark-master URL]
    python run.py bench [--json] [--repeat N] [--only GROUPS]
    python run.py spark up | down | status
    python run.py matrix FILE_OR_DIR [--jobs J] [--seeds N] [--only SEL] [--deflake N] [--shard K/N] [--keep-going]
                         [--runs-dir D] [--time-scale F] [--spark-master URL] [--dry-run]
    python run.py lab list | N [--step] [--runs-dir D] [--time-scale F]
    python run.py sim FILE [--seeds N | --seed S] [--keep] [--jobs J] [--runs-dir D] [--no-judge]
"""
from __future__ import annotations

import argparse
import difflib
import errno
import faulthandler
import gc
import os
import signal
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

if sys.version_info < (3, 11):  # before any import that needs a newer Python fails obscurely
    print(f"isrlab needs Python 3.11 or newer; this is {sys.version.split()[0]} ({sys.executable})", file=sys.stderr)
    sys.exit(2)  # judged nothing (README, "Exit codes"): not 1, which says an expectation failed

from testbed.config.cli_values import float_arg, int_arg, joined_negative_numbers, path_arg

#: the exit code of a command stopped by Ctrl-C (SIGINT), as a shell reports one
EXIT_INTERRUPTED = 130
#: the exit code of a command stopped by SIGTERM (a CI job's timeout, `kill`), as a shell
#: reports one
EXIT_TERMINATED = 143
#: the exit code of a command whose output's reader went away (`| head`), as a shell reports
#: one that SIGPIPE ended
EXIT_BROKEN_PIPE = 141
#: the exit code of a command that judged nothing (README, "Exit codes"); an internal error's too
EXIT_UNJUDGED = 2
COMMANDS = ("validate", "status", "bench", "analyze", "spark", "matrix", "lab", "sim")


def _run_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="python run.py", description="Run one isrlab experiment.",
                                 epilog="Other commands: " + ", ".join(COMMANDS) + " (python run.py CMD --help)")
    ap.add_argument("topology", type=path_arg, help="a topology YAML file (schema v1)")
    ap.add_argument("--version", action="version", version=f"isrlab {_version()}")
    ap.add_argument("--seed", type=int_arg, help="override the topology's seed")
    ap.add_argument("--time-scale", type=float_arg, default=1.0,
                    help="multiply every protocol timeout and wait, 0.01 to 1000 (use >1 on a slow or loaded "
                         "machine)")
    ap.add_argument("--keep-data", action="store_true", help="keep the brokers' data directories after the run")
    ap.add_argument("--runs-dir", type=path_arg, default=Path("runs"), help="where run directories go (default runs/)")
    ap.add_argument("--dry-run", action="store_true", help="print the resolved topology and fault schedule; start nothing")
    ap.add_argument("--spark-master", default=None,
                    help="where the analysis job runs: local[N], spark://host:port, ... (default embedded local[*])")
    return ap


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("isrlab")
    except PackageNotFoundError:  # run from a checkout that was never installed
        return "(not installed)"


def cmd_help(argv: list[str]) -> int:
    """`python run.py help [CMD]`: the word a user tries after `-h`, answered like `CMD --help`."""
    if argv and argv[0] in COMMANDS:
        return _handler(argv[0])(["--help"])
    _run_parser().print_help()
    if argv:
        print(f"\npython run.py: no command {argv[0]!r} (commands: {', '.join(COMMANDS)})", file=sys.stderr)
        return EXIT_UNJUDGED
    return 0


def cmd_run(argv: list[str]) -> int:
    from testbed.common.console import user_console
    from testbed.topology import TopologyError, load_topology
    args = _run_parser().parse_args(argv)
    from testbed.config.cli_values import spark_master_problem, time_scale_problem, unusable_dir
    if (problem := time_scale_problem(args.time_scale) or spark_master_problem(args.spark_master)) is not None:
        print(problem, file=sys.stderr)
        return 2
    try:
        topology = load_topology(args.topology, seed=args.seed)
    except TopologyError as e:
        print(e, file=sys.stderr)
        return 2
    if args.dry_run:
        from testbed.experiment.dry_run import describe
        print(describe(topology, args.time_scale))
        return 0
    from testbed.supervisor.netns import refusal
    if (refused := refusal(topology) or unusable_dir(args.runs_dir, "--runs-dir")) is not None:
        print(refused, file=sys.stderr)
        return 2
    from testbed.analysis.session import stop_spark
    from testbed.experiment.warm_up import warm_up_for
    from testbed.supervisor.run_dir import new_run_id
    run_dir = args.runs_dir / new_run_id(topology.name, topology.seed)
    warm_up_for(run_dir, args.spark_master)  # the JVM starts while the runner is imported
    from testbed.experiment.runner import run_experiment
    try:
        return run_experiment(topology, runs_dir=args.runs_dir, time_scale=args.time_scale,
                              keep_data=args.keep_data, console=user_console(), run_dir=run_dir,
                              spark_master=args.spark_master).exit_code
    finally:
        stop_spark()


def cmd_validate(argv: list[str]) -> int:
    from testbed.common.words import counted
    from testbed.supervisor.netns import refusal
    from testbed.topology import TopologyError, load_topology, never_firing
    from testbed.matrix.cells import cell_notes, expand_file
    from testbed.matrix.spec import MatrixError, is_matrix_file
    from testbed.config.loader import read_yaml
    from testbed.labs.catalog import GUIDE, LabError, load_lab
    ap = argparse.ArgumentParser(prog="python run.py validate",
                                 description="Check topologies against schema v1, matrix files with every cell, "
                                             "and labs (a lab's directory or its guide.md) with every part.")
    ap.add_argument("files", nargs="+", type=path_arg)
    args = ap.parse_args(argv)
    code = 0
    for f in args.files:
        if (lab := f if (f / GUIDE).is_file() else f.parent if f.name == GUIDE and f.is_file() else None) is not None:
            try:
                parts = load_lab(lab).parts
            except LabError as e:
                print(e, file=sys.stderr)
                code = 1
                continue
            print(f"{f}: ok (a lab of {counted(len(parts), 'part')})")
            continue
        if f.is_dir():
            print(f"{f}: a directory, not a file (expected a YAML file, or a lab's directory with a {GUIDE})",
                  file=sys.stderr)
            code = 1
            continue
        try:
            empty = f.is_file() and read_yaml(f) is None
        except TopologyError:
            empty = False  # what is wrong is told below, by the topology's or the matrix's reading
        if empty:  # neither a topology nor a matrix, and validate takes both
            print(f"{f}: the file is empty (expected a topology, a mapping with at least name, cluster.brokers "
                  f"and topics; or a matrix, a mapping with at least base)", file=sys.stderr)
            code = 1
            continue
        if f.is_file() and is_matrix_file(f):
            try:
                cells = expand_file(f)
            except MatrixError as e:
                print(e, file=sys.stderr)
                code = 1
                continue
            print(f"{f}: ok (a matrix of {counted(len(cells), 'cell')})")
            for note in cell_notes(cells):
                print(f"note: {note}")
            continue
        try:
            topology = load_topology(f)
        except TopologyError as e:
            print(e, file=sys.stderr)
            code = 1
            continue
        if (refused := refusal(topology)) is not None:
            print(refused, file=sys.stderr)
            code = 1
            continue
        print(f"{f}: ok")
        for note in never_firing(topology):
            print(f"note: {note}")
    return code


def cmd_status(argv: list[str]) -> int:
    from testbed.supervisor.status_command import print_status, watch_status
    ap = argparse.ArgumentParser(prog="python run.py status", description="Leaders, ISR, ELR, HWM/LEO of the running cluster.")
    ap.add_argument("--runs-dir", type=path_arg, default=Path("runs"))
    ap.add_argument("--watch", action="store_true",
                    help="a live view, redrawn 4 times a second: per partition leader, epoch, ISR, ELR, "
                         "LastKnownELR, and LEO/HWM bars per replica, with the faults fired (Ctrl-C ends it)")
    ap.add_argument("--frames", type=int_arg, default=None, help="with --watch: stop after N frames")
    args = ap.parse_args(argv)
    if args.frames is not None and (not args.watch or args.frames < 1):
        print("--frames needs --watch and a count >= 1", file=sys.stderr)
        return 2
    from testbed.supervisor.processes import reap_leftovers
    for run in reap_leftovers(args.runs_dir):  # what a killed supervisor left: every invocation reaps it
        print(f"reaped what run {run.run_id} left (its supervisor and its watchman were killed): its processes, "
              f"sockets, mounts and namespaces are gone; "
              + ("its run directory, made before any node of it started, held no run and is removed"
                 if run.run_dir_removed else "its run directory stays"), file=sys.stderr)
    return watch_status(args.runs_dir, frames=args.frames) if args.watch else print_status(args.runs_dir)


def cmd_lab(argv: list[str]) -> int:
    from testbed.labs.cli import main as lab_main
    return lab_main(argv)


def cmd_analyze(argv: list[str]) -> int:
    from testbed.analysis.cli import main as analyze_main
    return analyze_main(argv)


def cmd_bench(argv: list[str]) -> int:
    from testbed.bench.cli import main as bench_main
    return bench_main(argv)


def cmd_spark(argv: list[str]) -> int:
    from testbed.analysis.spark_command import main as spark_main
    return spark_main(argv)


def cmd_matrix(argv: list[str]) -> int:
    from testbed.matrix.cli import main as matrix_main
    return matrix_main(argv)


def cmd_sim(argv: list[str]) -> int:
    from testbed.sim.cli import main as sim_main
    return sim_main(argv)


#: isrlab's own top-level packages: a missing module of any other is a missing dependency
_OWN_PACKAGES = frozenset({"testbed", "broker", "faults", "topologies"})
#: What a full, read-only or failing disk raises: not isrlab's defect, so no traceback
_MACHINE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EIO})


def _handler(cmd: str) -> Callable[[list[str]], int]:
    """`cmd_<cmd>` of a command, looked up when called (a test replaces one)."""
    return globals()[f"cmd_{cmd}"]


def main(argv: list[str] | None = None) -> int:
    argv = joined_negative_numbers(list(sys.argv[1:] if argv is None else argv))
    if not argv:
        _run_parser().print_help()
        return 2
    cmd = argv[0]
    try:
        if cmd in COMMANDS:
            return _handler(cmd)(argv[1:])
        if cmd == "help":
            return cmd_help(argv[1:])
        if cmd.startswith("-"):  # -h, --version, or the run's options before its topology: its parser reads them
            return cmd_run(argv)
        close = difflib.get_close_matches(cmd, COMMANDS, n=1, cutoff=0.7)
        if not Path(cmd).exists() and (close or ("/" not in cmd and not Path(cmd).suffix)):
            # (a word that looks like no file, `frobnicate`, read as a missing topology file)
            guess = f"; did you mean `python run.py {close[0]}`?" if close else ""
            print(f"python run.py: {cmd!r} is neither a command nor a file{guess} (commands: {', '.join(COMMANDS)}; "
                  f"or give a topology file)", file=sys.stderr)
            return EXIT_UNJUDGED
        return cmd_run(argv)
    except KeyboardInterrupt as exc:  # what the command started was stopped on the way out (its finally blocks)
        terminated = isinstance(exc, Terminated)
        print(f"isrlab: {'terminated (SIGTERM)' if terminated else 'interrupted'}; everything it started is stopped",
              file=sys.stderr)
        return EXIT_TERMINATED if terminated else EXIT_INTERRUPTED
    except BrokenPipeError:  # the output's reader went away (`| head`): stop as a shell tool would
        os.dup2(os.open(os.devnull, os.O_WRONLY), 1)  # standard output: else the exit's flush fails again
        return EXIT_BROKEN_PIPE
    except ModuleNotFoundError as exc:
        if exc.name and exc.name.partition(".")[0] not in _OWN_PACKAGES:  # the installation's, not a defect
            print(f"isrlab: the Python package {exc.name.partition('.')[0]!r} is not installed for "
                  f"{sys.executable}: install isrlab and its dependencies first (README, \"Install and run\": "
                  f"pip install -e .)", file=sys.stderr)
            return EXIT_UNJUDGED
        return _internal_error()
    except Exception as exc:  # noqa: BLE001 - a defect of isrlab's own: never exit 1, which says an expectation failed
        pipeline = sys.modules.get("testbed.analysis.pipeline")  # loaded if anything was judged
        if pipeline is not None and isinstance(exc, pipeline.SummaryError):  # a Spark failure after the verdicts
            print(f"isrlab: {exc}", file=sys.stderr)
            return EXIT_UNJUDGED
        if isinstance(exc, OSError) and exc.errno in _MACHINE_ERRNOS:  # the machine's, not a defect
            print(f"isrlab: {exc.strerror}: {exc.filename or ''}; the command stopped there (what it wrote "
                  f"before stands), and everything it started is stopped", file=sys.stderr)
            return EXIT_UNJUDGED
        return _internal_error()


class Terminated(KeyboardInterrupt):
    """SIGTERM: the command stops as Ctrl-C stops it, and says so. A matrix a CI job's timeout
    ended printed nothing, and a run's supervisor died before its finally blocks, leaving the
    watchman to reap its cluster."""


def _terminate(signum: int, frame: object) -> None:
    signal.signal(signal.SIGTERM, _terminate_now)
    raise Terminated


def _terminate_now(signum: int, frame: object) -> None:
    """A second SIGTERM ends the command at once, and says so (trial38: it ended without a
    line); the watchman of each run stops what the first one's cleanup had not."""
    os.write(2, b"isrlab: terminated again (SIGTERM); stopped at once: each run's watchman stops what is left\n")
    os._exit(EXIT_TERMINATED)


def _internal_error() -> int:
    traceback.print_exc()
    print("isrlab: an internal error stopped the command (the traceback above is a defect to report); "
          "nothing was judged, and everything it started is stopped", file=sys.stderr)
    return EXIT_UNJUDGED


if __name__ == "__main__":
    # `kill -USR1 <pid>` prints every thread's stack on stderr: a command that hangs says where
    # (the command's own process only: a caller of `main`, pytest's capture say, may have no file)
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    signal.signal(signal.SIGTERM, _terminate)  # the command's own process only, as above
    code = main()
    # Every command has stopped what it started in its own finally blocks (nodes, sockets and
    # their files, mounts, namespaces, the analysis JVM); what is left is memory the process
    # hands back as it exits. The interpreter's last garbage collection walked all of it
    # (PySpark's, pyarrow's, gRPC's and the pipeline's objects): 0.2 s of every command, 0.04 s
    # with the objects frozen, which it skips.
    gc.freeze()
    sys.exit(code)
