"""A workload client process: one producer or one consumer of the run.

`python -m testbed.clients.worker --config <run>/clients/<name>.json`

It runs its loop (`testbed/clients/loops.py`, shared with the simulation) on the host's
clock over ZeroMQ, records every operation in `history.jsonl` and pushes its counters to
the supervisor twice a second for the live display; its first push says it runs, and it
waits for the supervisor's go (SIGUSR1) to begin. SIGTERM ends it after the operation in
flight, so no invoke is left without its completion unless the process is killed.
"""
from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from broker.client import ClusterClient
from broker.common import netns
from broker.common.lifetime import die_with_parent
from testbed.clients.client_config import START, ClientConfig
from testbed.clients.history import History
from testbed.clients.loops import Clock, Stop, client_loop
from testbed.clients.stats import Stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.clients.worker")
    ap.add_argument("--config", required=True, type=Path)
    args = ap.parse_args(argv)
    signal.pthread_sigmask(signal.SIG_BLOCK, {START})  # held for sigtimedwait: it may come at once
    cfg = ClientConfig.load(args.config)
    die_with_parent(cfg.supervisor_pid)
    if cfg.netns is not None:
        try:
            netns.enter(cfg.netns)
        except OSError as e:
            print(f"{cfg.process}: cannot join network namespace {cfg.netns}: {e}", file=sys.stderr)
            return 71
    stop = Stop()
    signal.signal(signal.SIGTERM, lambda *_: setattr(stop, "requested", True))
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    client = ClusterClient(cfg.brokers, cfg.process, request_timeout=cfg.request_timeout)
    history = History(cfg.history, cfg.process)
    stats = Stats(cfg.stats_endpoint, cfg.process)
    if cfg.wait_for_go:
        stats.maybe_push(force=True)  # "running"
        while not stop.requested and signal.sigtimedwait({START}, 0.5) is None:
            stats.maybe_push()  # the go comes at the workload's time 0, once every client runs
    try:
        client.run(client_loop(cfg, client.steps, history, stats, Clock(time.monotonic, time.monotonic_ns), stop))
    finally:
        stats.close()
        history.close()
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
