"""`python run.py spark up | down | status [--master M]`: the shared Spark Connect server
(`spark_server`). `up` starts one and judges a small synthetic run on it `--warm-up` times
(default 3, about 30 s) so that the first real judgment finds it compiled; when one is up it
says so and exits 0. `down` when none is up says so and exits 0; `status` exits 0 when a
server answers, 1 otherwise."""
from __future__ import annotations

import argparse
import time

from testbed.analysis import spark_server
from testbed.common.words import counted
from testbed.config.cli_values import int_arg, spark_master_problem

#: Judgments of a synthetic run a new server makes before `up` returns (see `pipeline.warm_server`)
WARM_UP_ROUNDS = 3


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python run.py spark", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("up", "down", "status"))
    ap.add_argument("--master", default="local[*]", help="the server's Spark master (default local[*])")
    ap.add_argument("--warm-up", type=int_arg, default=WARM_UP_ROUNDS, metavar="N",
                    help=f"judgments of a small synthetic run on a server `up` starts (default {WARM_UP_ROUNDS}, "
                         f"0 for none)")
    args = ap.parse_args(argv)
    if args.warm_up < 0:
        ap.error(f"--warm-up: {args.warm_up} is negative (expected an integer >= 0)")
    if args.action == "up":
        if (problem := _master_problem(args.master)) is not None:
            print(f"cannot start the Spark server: {problem}")
            return 2
        try:
            info, started = spark_server.up(args.master)
        except RuntimeError as exc:
            print(f"cannot start the Spark server: {exc}")
            return 1
        what = "started" if started else "already up"
        print(f"Spark Connect server {what}: {info.url} (pid {info.pid}, {info.master}, log {info.log}); "
              f"runs and `analyze` use it until `python run.py spark down`", flush=True)
        if not started and info.master != args.master:
            print(f"its master is {info.master}, not --master {args.master}: `python run.py spark down` first "
                  f"to start one on {args.master}")
        return _warm_up(info, args.warm_up) if started and args.warm_up else 0
    if args.action == "down":
        stopped = spark_server.down()
        if stopped is None:
            print("no Spark server is up")
        else:
            info, running = stopped
            print(f"Spark Connect server {info.url} (pid {info.pid}) "
                  f"{'stopped' if running else 'was already gone: its record and scratch files removed'}")
        return 0
    info = spark_server.recorded()
    if info is None:
        print("no Spark server is up")
        return 1
    if not spark_server.answering(info):
        state = "runs but does not answer (starting, stopped or hung)" if spark_server.running(info) else "is gone"
        print(f"the Spark server recorded at {info.url} (pid {info.pid}) {state}; "
              f"`python run.py spark down` stops what is left of it, `python run.py spark up` starts a new one")
        return 1
    print(f"Spark Connect server up: {info.url} (pid {info.pid}, {info.master}, "
          f"up {time.time() - info.started:.0f} s, log {info.log})")
    return 0


def _master_problem(master: str) -> str | None:
    """Why a server cannot run on `master`, checked before a JVM starts (a master Spark does
    not know started one, which then failed)."""
    if master.startswith("sc://"):
        return f"--master {master}: the URL of a Spark Connect server, not a Spark master (local[*], local[N], spark://...)"
    problem = spark_master_problem(master)
    return None if problem is None else problem.replace("--spark-master", "--master", 1)


def _warm_up(info: spark_server.ServerInfo, rounds: int) -> int:
    """Judge the synthetic run on the server `up` started; 1 when it cannot (the server stays up)."""
    from pyspark.errors import PySparkException  # the pipeline's imports: not for `status` or `down`

    from testbed.analysis.pipeline import warm_server
    from testbed.analysis.session import stop_spark
    print(f"warming it up: a small synthetic run judged {counted(rounds, 'time')} ...", flush=True)
    try:
        times = warm_server(info.url, rounds)
    except PySparkException as exc:
        print(f"the server is up but could not judge the synthetic run (see {info.log}): "
              f"{str(exc).strip().splitlines()[0][:300]}")
        return 1
    except BaseException:  # Ctrl-C or SIGTERM: the warm-up is `up`'s, and an interrupted `up` stops its server
        stop_spark()  # (its session first: it would retry against the stopped server)
        spark_server.down()  # (trial33: the server ran on at 99 % CPU after "everything it started is stopped")
        raise
    finally:
        stop_spark()
    print(f"warmed up: {', '.join(f'{t:.1f} s' for t in times)}")
    return 0
