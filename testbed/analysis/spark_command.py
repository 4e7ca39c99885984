"""`python run.py spark up | down | status [--master M]`: the shared Spark Connect server
(`spark_server`). `up` when one is up says so and exits 0; `down` when none is up says so
and exits 0; `status` exits 0 when a server answers, 1 otherwise."""
from __future__ import annotations

import argparse
import time

from testbed.analysis import spark_server


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python run.py spark", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("action", choices=("up", "down", "status"))
    ap.add_argument("--master", default="local[*]", help="the server's Spark master (default local[*])")
    args = ap.parse_args(argv)
    if args.action == "up":
        try:
            info, started = spark_server.up(args.master)
        except RuntimeError as exc:
            print(f"cannot start the Spark server: {exc}")
            return 1
        what = "started" if started else "already up"
        print(f"Spark Connect server {what}: {info.url} (pid {info.pid}, {info.master}, log {info.log}); "
              f"runs and `analyze` use it until `python run.py spark down`")
        return 0
    if args.action == "down":
        info = spark_server.down()
        print("no Spark server is up" if info is None else f"Spark Connect server {info.url} (pid {info.pid}) stopped")
        return 0
    info = spark_server.recorded()
    if info is None:
        print("no Spark server is up")
        return 1
    if not spark_server.answering(info):
        print(f"the Spark server recorded at {info.url} (pid {info.pid}) is gone; "
              f"`python run.py spark up` starts a new one")
        return 1
    print(f"Spark Connect server up: {info.url} (pid {info.pid}, {info.master}, "
          f"up {time.time() - info.started:.0f} s, log {info.log})")
    return 0
