"""A workload client process: one producer or one consumer of the run.

`python -m testbed.workload --config <run>/clients/<name>.json`

It records every operation in `history.jsonl` and pushes its counters to the supervisor
twice a second for the live display. SIGTERM ends it after the operation in flight, so
no invoke is left without its completion unless the process is killed.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from pathlib import Path

import zmq
from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_exponential

from broker.client import ClusterClient, ProduceResult
from broker.common.errors import RETRIABLE, Errors
from broker.common.lifetime import die_with_parent
from testbed.history import History

_stop = False


def _on_term(*_: object) -> None:
    global _stop
    _stop = True


class Stats:
    def __init__(self, endpoint: str | None, process: str) -> None:
        self.counts = {"sent": 0, "acked": 0, "failed": 0, "info": 0, "polled": 0}
        self.process = process
        self.sock = None
        if endpoint:
            self.sock = zmq.Context.instance().socket(zmq.PUSH)
            self.sock.setsockopt(zmq.LINGER, 0)
            self.sock.setsockopt(zmq.SNDHWM, 10)
            self.sock.connect(endpoint)
        self.next_push = 0.0

    def maybe_push(self, force: bool = False) -> None:
        now = time.monotonic()
        if self.sock is not None and (force or now >= self.next_push):
            self.next_push = now + 0.5
            try:
                self.sock.send_json({"process": self.process, **self.counts}, zmq.NOBLOCK)
            except zmq.Again:
                pass  # the supervisor is busy: the next push carries the totals

    def close(self) -> None:
        self.maybe_push(force=True)
        if self.sock is not None:
            self.sock.close(linger=200)


def run_producer(cfg: dict, client: ClusterClient, history: History, stats: Stats) -> None:
    topic, acks, batch = cfg["topic"], cfg["acks"], cfg["batch"]
    partitions = cfg["partitions"]
    rate = cfg.get("rate")
    interval = batch / rate if rate else 0.0
    process = cfg["process"]
    timeout = cfg["request_timeout"]
    pad = int(cfg.get("value_bytes", 0))  # benchmarks pad values to a record size
    seq = 0
    turn = 0
    next_at = time.monotonic()

    def attempt(partition: int, values: list[str]) -> ProduceResult:
        history.send_invoke(topic, partition, values, acks)
        stats.counts["sent"] += len(values)
        r = client.produce(topic, partition, values, acks, timeout=timeout)
        kind = history.send_complete(topic, partition, values, acks, r.error, r.base_offset, r.appended)
        stats.counts["acked" if kind == "ok" else "failed" if kind == "fail" else "info"] += len(values)
        stats.maybe_push()
        if r.error != Errors.NONE:
            client.refresh_metadata([topic])
        return r

    retrying = Retrying(
        stop=stop_after_attempt(cfg["retries"] + 1),
        wait=wait_exponential(multiplier=cfg["retry_backoff"], max=cfg["retry_backoff"] * 8),
        retry=retry_if_result(lambda r: r.error in RETRIABLE and not _stop),
        retry_error_callback=lambda state: state.outcome.result())
    while not _stop:
        if interval:
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing the offered load, not synchronisation
            next_at = max(next_at + interval, time.monotonic() - 1.0)
        partition = partitions[turn % len(partitions)]
        turn += 1
        values = [f"{process}:{seq + i}".ljust(pad, ".") for i in range(batch)]
        seq += batch
        retrying(attempt, partition, values)


def run_consumer(cfg: dict, client: ClusterClient, history: History, stats: Stats) -> None:
    topic = cfg["topic"]
    offsets: dict[int, int] = {}
    for p in cfg["partitions"]:
        if cfg["from"] == "latest":
            r = client.fetch(topic, p, 0, max_wait=0)
            offsets[p] = max(0, r.high_watermark)
        else:
            offsets[p] = 0
    while not _stop:
        for p in cfg["partitions"]:
            invoked = time.monotonic_ns()
            r = client.fetch(topic, p, offsets[p], max_wait=cfg["max_wait"])
            if r.error == Errors.NONE and r.records:
                history.poll(topic, p, offsets[p], invoked, r.records)
                offsets[p] = r.records[-1][0] + 1
                stats.counts["polled"] += len(r.records)
            elif r.error == Errors.OFFSET_OUT_OF_RANGE:
                # The committed log moved below our position (possible only after loss): re-read from 0.
                offsets[p] = 0
            stats.maybe_push()
            if _stop:
                break


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.workload")
    ap.add_argument("--config", required=True, type=Path)
    args = ap.parse_args(argv)
    cfg = json.loads(args.config.read_text())
    die_with_parent(cfg["supervisor_pid"])
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    brokers = {int(k): v for k, v in cfg["brokers"].items()}
    client = ClusterClient(brokers, cfg["process"], request_timeout=cfg["request_timeout"])
    history = History(Path(cfg["history"]), cfg["process"])
    stats = Stats(cfg.get("stats_endpoint"), cfg["process"])
    try:
        client.refresh_metadata([cfg["topic"]])
        if cfg["role"] == "producer":
            run_producer(cfg, client, history, stats)
        else:
            run_consumer(cfg, client, history, stats)
    finally:
        stats.close()
        history.close()
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
