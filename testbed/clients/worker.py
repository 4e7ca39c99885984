"""A workload client process: one producer or one consumer of the run.

`python -m testbed.clients.worker --config <run>/clients/<name>.json`

It records every operation in `history.jsonl` and pushes its counters to the supervisor
twice a second for the live display. SIGTERM ends it after the operation in flight, so
no invoke is left without its completion unless the process is killed.
"""
from __future__ import annotations

import argparse
import heapq
import itertools
import signal
import sys
import time
from pathlib import Path

from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_exponential

from broker.client import ClusterClient, ProduceResult
from broker.common.errors import RETRIABLE, Errors
from broker.common.lifetime import die_with_parent
from testbed.clients.client_config import (
    ClientConfig,
    ConsumerSettings,
    ProducerSettings,
)
from testbed.clients.history import History
from testbed.clients.stats import Stats

_stop = False


def _on_term(*_: object) -> None:
    global _stop
    _stop = True


#: how often a producer that follows its topic's partitions looks at the metadata again
#: (Kafka's producer has `metadata.max.age.ms` for this)
METADATA_MAX_AGE = 1.0


class PartitionCycle:
    """The partitions a producer sends to in turn: its own list, or, when it was given none,
    every partition of the topic as the metadata shows it, so that partitions an
    `add-partitions` fault adds (R40) take writes too."""

    def __init__(self, cfg: ClientConfig, client: ClusterClient) -> None:
        self.topic, self.client, self.follow = cfg.topic, client, cfg.follow_partitions
        self.partitions = cfg.partitions
        self.turn = 0
        self.looked = time.monotonic()

    def next(self) -> int:
        if self.follow and time.monotonic() - self.looked >= METADATA_MAX_AGE:
            self.looked = time.monotonic()
            self.client.refresh_metadata([self.topic])
            seen = tuple(sorted(p for t, p in self.client.leaders if t == self.topic))
            self.partitions = seen or self.partitions
        self.turn += 1
        return self.partitions[(self.turn - 1) % len(self.partitions)]


def run_producer(cfg: ClientConfig, p: ProducerSettings, client: ClusterClient, history: History,
                 stats: Stats) -> None:
    """One request at a time: each send, with its retries, completes before the next."""
    topic, acks, batch = cfg.topic, p.acks, p.batch
    partitions = PartitionCycle(cfg, client)
    interval = batch / p.rate if p.rate else 0.0
    process = cfg.process
    timeout = cfg.request_timeout
    pad = p.value_bytes
    seq = 0
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
        stop=stop_after_attempt(p.retries + 1),
        wait=wait_exponential(multiplier=p.retry_backoff, max=p.retry_backoff * 8),
        retry=retry_if_result(lambda r: r.error in RETRIABLE and not _stop),
        retry_error_callback=lambda state: state.outcome.result())
    while not _stop:
        if interval:
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)  # pacing the offered load, not synchronisation
            next_at = max(next_at + interval, time.monotonic() - 1.0)
        partition = partitions.next()
        values = [f"{process}:{seq + i}".ljust(pad, ".") for i in range(batch)]
        seq += batch
        retrying(attempt, partition, values)


def run_pipelined_producer(cfg: ClientConfig, p: ProducerSettings, client: ClusterClient, history: History,
                           stats: Stats) -> None:
    """Up to `in_flight` produce requests outstanding, as Kafka's producer with
    `max.in.flight.requests.per.connection` > 1 and no idempotence: a retried batch is sent
    again after the batches that followed it, so it can land behind them (reordering), and a
    timed-out batch that was appended is appended again (a duplicate). Retries wait as the
    one-at-a-time producer's do and take the next free slot before any new batch."""
    topic, acks, batch, limit = cfg.topic, p.acks, p.batch, p.in_flight
    interval = batch / p.rate if p.rate else 0.0
    retries: list[tuple[float, int, int, list[str], int]] = []  # heap: due, order, partition, values, attempt
    order = itertools.count()
    partitions = PartitionCycle(cfg, client)
    seq = 0
    next_at = time.monotonic()

    def start(partition: int, values: list[str], attempt: int) -> None:
        history.send_invoke(topic, partition, values, acks)
        stats.counts["sent"] += len(values)
        out = client.start_produce(topic, partition, values, acks, timeout=cfg.request_timeout, tag=attempt)
        if isinstance(out, ProduceResult):
            finish(partition, values, attempt, out)

    def finish(partition: int, values: list[str], attempt: int, r: ProduceResult) -> None:
        kind = history.send_complete(topic, partition, values, acks, r.error, r.base_offset, r.appended)
        stats.counts["acked" if kind == "ok" else "failed" if kind == "fail" else "info"] += len(values)
        stats.maybe_push()
        if r.error == Errors.NONE:
            return
        client.refresh_metadata([topic])
        if r.error in RETRIABLE and attempt <= p.retries and not _stop:
            backoff = min(p.retry_backoff * 2 ** (attempt - 1), p.retry_backoff * 8)
            heapq.heappush(retries, (time.monotonic() + backoff, next(order), partition, values, attempt + 1))

    while not _stop or client.produces_in_flight:
        now = time.monotonic()
        while not _stop and client.produces_in_flight < limit:
            if retries and retries[0][0] <= now:
                _, _, partition, values, attempt = heapq.heappop(retries)
                start(partition, values, attempt)
            elif not retries and next_at <= now:
                partition = partitions.next()
                values = [f"{cfg.process}:{seq + i}".ljust(p.value_bytes, ".") for i in range(batch)]
                seq += batch
                next_at = max(next_at + interval, now - 1.0)
                start(partition, values, 1)
            else:
                break
            now = time.monotonic()
        due = retries[0][0] if retries else next_at
        wait = min(max(0.0, due - now), 0.05) if not _stop and client.produces_in_flight < limit else 0.05
        if client.produces_in_flight:
            for pending, r in client.completions(wait):
                finish(pending.partition, pending.values, pending.tag, r)
        elif wait > 0:
            time.sleep(wait)  # pacing the offered load, not synchronisation


def run_consumer(cfg: ClientConfig, c: ConsumerSettings, client: ClusterClient, history: History,
                 stats: Stats) -> None:
    topic = cfg.topic
    offsets: dict[int, int] = {}
    for p in cfg.partitions:
        if c.from_ == "latest":
            r = client.fetch(topic, p, 0, max_wait=0)
            offsets[p] = max(0, r.high_watermark)
        else:
            offsets[p] = 0
    while not _stop:
        for p in cfg.partitions:
            invoked = time.monotonic_ns()
            r = client.fetch(topic, p, offsets[p], max_wait=c.max_wait)
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


#: how often a client asks whether its topic exists yet
TOPIC_POLL = 0.1


def _wait_for_topic(client: ClusterClient, topic: str) -> None:
    """A topic a `create-topic` fault makes later (R40): record nothing until the brokers'
    metadata has it, as a Kafka client waits for metadata before its first send."""
    while not _stop:
        client.refresh_metadata([topic])
        if any(t == topic for t, _ in client.leaders):
            return
        time.sleep(TOPIC_POLL)  # polling the metadata until the topic exists (or the run stops)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m testbed.clients.worker")
    ap.add_argument("--config", required=True, type=Path)
    args = ap.parse_args(argv)
    cfg = ClientConfig.load(args.config)
    die_with_parent(cfg.supervisor_pid)
    signal.signal(signal.SIGTERM, _on_term)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    client = ClusterClient(cfg.brokers, cfg.process, request_timeout=cfg.request_timeout)
    history = History(cfg.history, cfg.process)
    stats = Stats(cfg.stats_endpoint, cfg.process)
    try:
        _wait_for_topic(client, cfg.topic)
        if cfg.producer is not None and cfg.producer.in_flight > 1:
            run_pipelined_producer(cfg, cfg.producer, client, history, stats)
        elif cfg.producer is not None:
            run_producer(cfg, cfg.producer, client, history, stats)
        elif cfg.consumer is not None:
            run_consumer(cfg, cfg.consumer, client, history, stats)
    finally:
        stats.close()
        history.close()
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
