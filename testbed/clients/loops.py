"""The workload's loops, written once for a process and for the simulation: a producer one
request at a time, a pipelining producer, a consumer, and the final read. Each is a
generator of client steps (`broker.client`: what it waits for) with its clock handed in,
so a process carries it out on the host's clock over ZeroMQ (`ClusterClient.run`) and the
simulation on virtual time (`testbed/sim/clients.py`).

Every operation is recorded in the run's history (DESIGN section 7) and counted for the
live display; a `Stop` (SIGTERM) lets the operation in flight complete.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from broker.client import Collect, ProduceResult, Sleep, Start, StepClient, Steps
from broker.common.errors import RETRIABLE, Errors
from testbed.clients.client_config import (
    ClientConfig,
    ConsumerSettings,
    ProducerSettings,
)
from testbed.clients.history import History
from testbed.clients.stats import Counts

#: how often a producer that follows its topic's partitions looks at the metadata again
#: (Kafka's producer has `metadata.max.age.ms` for this)
METADATA_MAX_AGE = 1.0
#: how often a client asks whether its topic exists yet
TOPIC_POLL = 0.1
#: how long the final read waits before asking again a partition that has no reachable leader
FINAL_READ_RETRY = 0.05
#: builds a step from its values as its class's call does (a named tuple's generated `__new__`
#: is a Python function that calls this), at a fifth of the cost: for a producer's pacing
_tuple_new = tuple.__new__


@dataclass
class Stop:
    """A client's SIGTERM: the loops ask it at the points where they may end, so the
    operation in flight completes and is recorded."""
    requested: bool = False

    def __bool__(self) -> bool:
        return self.requested


@dataclass
class Clock:
    """The clock a loop reads: seconds for pacing, nanoseconds for the history."""
    seconds: Callable[[], float]
    ns: Callable[[], int]


@dataclass
class PartitionCycle:
    """The partitions a producer sends to in turn: its own list, or, when it was given none,
    every partition of the topic as the newest metadata lists it, looked at every
    `METADATA_MAX_AGE`: partitions an `add-partitions` fault adds (R40) take writes too, and
    a partition that is gone (its topic deleted and made again with fewer) takes none. While
    the metadata describes no such topic (deleted, not made again) the producer keeps its
    last partitions: its sends fail with UNKNOWN_TOPIC_OR_PARTITION and are recorded."""
    cfg: ClientConfig
    client: StepClient
    clock: Clock
    turn: int = 0
    looked: float = field(default=0.0)
    partitions: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        self.partitions = self.cfg.partitions
        self.looked = self.clock.seconds()

    def next(self) -> Steps:
        if self.cfg.follow_partitions and self.clock.seconds() - self.looked >= METADATA_MAX_AGE:
            self.looked = self.clock.seconds()
            yield from self.client.refresh_metadata([self.cfg.topic])
            self.partitions = self.client.partitions_of(self.cfg.topic) or self.partitions
        self.turn += 1
        return self.partitions[(self.turn - 1) % len(self.partitions)]


def wait_for_topic(client: StepClient, topic: str, stop: Stop) -> Steps:
    """A topic a `create-topic` fault makes later (R40): record nothing until the brokers'
    metadata has it, as a Kafka client waits for metadata before its first send."""
    while not stop:
        yield from client.refresh_metadata([topic])
        if any(t == topic for t, _ in client.leaders):
            return
        yield Sleep(TOPIC_POLL)


def _backoff(p: ProducerSettings, attempt: int) -> float:
    """The wait before retrying after failed attempt `attempt` (1, 2, ...): doubling from
    `retry_backoff` up to 8 times it, as tenacity's `wait_exponential(multiplier, max)`."""
    return min(p.retry_backoff * 2 ** (attempt - 1), p.retry_backoff * 8)


def _values(process: str, seq: int, p: ProducerSettings) -> list[str]:
    return [f"{process}:{seq + i}".ljust(p.value_bytes, ".") for i in range(p.batch)]


def _complete(history: History, stats: Counts, topic: str, partition: int, values: list[str], acks: str,
              r: ProduceResult) -> None:
    kind = history.send_complete(topic, partition, values, acks, r.error, r.base_offset, r.appended, r.leader)
    stats.counts["acked" if kind == "ok" else "failed" if kind == "fail" else "info"] += len(values)
    stats.maybe_push()


def producer(cfg: ClientConfig, p: ProducerSettings, client: StepClient, history: History, stats: Counts,
             clock: Clock, stop: Stop) -> Steps:
    """One request at a time: each send, with its retries, completes before the next."""
    yield from wait_for_topic(client, cfg.topic, stop)
    topic, acks = cfg.topic, p.acks
    partitions = PartitionCycle(cfg, client, clock)
    interval = p.batch / p.rate if p.rate else 0.0
    seq = 0
    next_at = clock.seconds()
    while not stop:
        if interval:
            delay = next_at - clock.seconds()
            if delay > 0:
                yield _tuple_new(Sleep, (delay,))  # pacing the offered load (Sleep(delay), see _tuple_new)
            next_at = max(next_at + interval, clock.seconds() - 1.0)
        partition = yield from partitions.next()
        values = _values(cfg.process, seq, p)
        seq += p.batch
        attempt = 1
        while True:
            history.send_invoke(topic, partition, values, acks)
            stats.counts["sent"] += len(values)
            r = yield from client.produce(topic, partition, values, acks, cfg.request_timeout)
            _complete(history, stats, topic, partition, values, acks, r)
            if r.error in RETRIABLE and not stop and attempt <= p.retries:
                yield Sleep(_backoff(p, attempt))
                # The leader as of the retry, not of the failure: a new one is elected meanwhile
                # (a killed leader's requests fail at once, before the controller has moved it).
                yield from client.refresh_metadata([topic])
                attempt += 1
                continue
            if r.error != Errors.NONE:
                yield from client.refresh_metadata([topic])
            break


def pipelined_producer(cfg: ClientConfig, p: ProducerSettings, client: StepClient, history: History,
                       stats: Counts, clock: Clock, stop: Stop) -> Steps:
    """Up to `in_flight` produce requests outstanding, as Kafka's producer with
    `max.in.flight.requests.per.connection` > 1 and no idempotence: a retried batch is sent
    again after the batches that followed it, so it can land behind them (reordering), and a
    timed-out batch that was appended is appended again (a duplicate). Retries wait as the
    one-at-a-time producer's do and take the next free slot before any new batch."""
    yield from wait_for_topic(client, cfg.topic, stop)
    topic, acks, limit = cfg.topic, p.acks, p.in_flight
    interval = p.batch / p.rate if p.rate else 0.0
    # sorted: due, order, partition, values, attempt, metadata refreshes made when it failed
    retries: list[tuple[float, int, int, list[str], int, int]] = []
    in_flight: dict[int, tuple[int, int, list[str], int]] = {}  # tag -> leader, partition, values, attempt
    partitions = PartitionCycle(cfg, client, clock)
    counter = {"order": 0, "tag": 0, "refreshes": 0}
    seq = 0
    next_at = clock.seconds()

    def refresh() -> Steps:
        counter["refreshes"] += 1
        yield from client.refresh_metadata([topic])

    def finish(partition: int, values: list[str], attempt: int, r: ProduceResult) -> Steps:
        _complete(history, stats, topic, partition, values, acks, r)
        if r.error == Errors.NONE:
            return
        if r.error in RETRIABLE and attempt <= p.retries and not stop:
            counter["order"] += 1
            retries.append((clock.seconds() + _backoff(p, attempt), counter["order"], partition, values, attempt + 1,
                            counter["refreshes"]))
            retries.sort()
        else:
            yield from refresh()

    def start(partition: int, values: list[str], attempt: int) -> Steps:
        history.send_invoke(topic, partition, values, acks)
        stats.counts["sent"] += len(values)
        leader = yield from client.leader_of(topic, partition)
        if leader < 0:
            yield from finish(partition, values, attempt, ProduceResult(client.no_leader_error(topic), leader=leader))
            return
        req = client.produce_request(topic, partition, values, acks, cfg.request_timeout)
        if not req.expects_response:
            yield Start(client.brokers[leader], req, cfg.request_timeout + 0.5, None)
            yield from finish(partition, values, attempt, ProduceResult(Errors.NONE, leader=leader, appended=True))
            return
        counter["tag"] += 1
        in_flight[counter["tag"]] = (leader, partition, values, attempt)
        yield Start(client.brokers[leader], req, cfg.request_timeout + 0.5, counter["tag"])

    while not stop or in_flight:
        now = clock.seconds()
        while not stop and len(in_flight) < limit:
            if retries and retries[0][0] <= now:
                _, _, partition, values, attempt, refreshes = retries.pop(0)
                if refreshes == counter["refreshes"]:  # none since it failed: the leader as of now
                    yield from refresh()
                yield from start(partition, values, attempt)
            elif not retries and next_at <= now:
                partition = yield from partitions.next()
                values = _values(cfg.process, seq, p)
                seq += p.batch
                next_at = max(next_at + interval, now - 1.0)
                yield from start(partition, values, 1)
            else:
                break
            now = clock.seconds()
        due = retries[0][0] if retries else next_at
        wait = min(max(0.0, due - now), 0.05) if not stop and len(in_flight) < limit else 0.05
        if in_flight:
            for tag, resp in (yield Collect(wait)):
                if tag in in_flight:
                    leader, partition, values, attempt = in_flight.pop(tag)
                    yield from finish(partition, values, attempt, client.produce_result(topic, partition, leader, resp))
        elif wait > 0:
            yield Sleep(wait)  # pacing the offered load


def consumer(cfg: ClientConfig, c: ConsumerSettings, client: StepClient, history: History, stats: Counts,
             clock: Clock, stop: Stop) -> Steps:
    """Each of the consumer's partitions polled in turn from where it left off. A consumer
    of a topic whose partitions change during the run (`follow_partitions`) takes its share
    of the topic's partitions as the newest metadata lists them, looked at every
    `METADATA_MAX_AGE`, as a subscribed Kafka consumer is assigned partitions an
    `add-partitions` adds (R40); each new one is read from `from_` like the first ones.
    A round whose every fetch failed (no leader known, the topic deleted) is followed by a
    wait of one long poll, as a fetch that found nothing would have waited: a Kafka consumer
    backs off its metadata requests so (`retry.backoff.ms`), and this one asked every broker
    for metadata hundreds of times a second while a deleted topic's partitions had no leader."""
    yield from wait_for_topic(client, cfg.topic, stop)
    topic = cfg.topic
    offsets: dict[int, int] = {}
    mine = cfg.partitions
    looked = clock.seconds()
    yield from _start_positions(client, c, topic, mine, offsets)
    while not stop:
        if cfg.follow_partitions and clock.seconds() - looked >= METADATA_MAX_AGE:
            looked = clock.seconds()
            yield from client.refresh_metadata([topic])
            listed = client.partitions_of(topic)
            if listed:  # a deleted topic keeps its last partitions: their polls fail and are retried
                mine = tuple(p for p in listed if p % cfg.share_of[1] == cfg.share_of[0])
                yield from _start_positions(client, c, topic, [p for p in mine if p not in offsets], offsets)
        if not mine:
            yield Sleep(METADATA_MAX_AGE)
            continue
        answered = False
        for p in mine:
            invoked = clock.ns()
            r = yield from client.fetch(topic, p, offsets[p], max_wait=c.max_wait)
            answered = answered or r.error == Errors.NONE
            if r.error == Errors.NONE and r.records:
                history.poll(topic, p, offsets[p], invoked, r.records, r.leader)
                offsets[p] = r.records[-1][0] + 1
                stats.counts["polled"] += len(r.records)
            elif r.error == Errors.OFFSET_OUT_OF_RANGE:
                # The committed log moved below our position (possible only after loss): reset as
                # Kafka's auto.offset.reset says, to the log's start for `earliest`, to its HWM
                # for `latest` (trial28: a `latest` consumer re-read the partition from 0).
                offsets[p] = max(0, r.high_watermark) if c.from_ == "latest" else 0
            stats.maybe_push()
            if stop:
                break
        if not answered and not stop:
            yield Sleep(c.max_wait)


def _start_positions(client: StepClient, c: ConsumerSettings, topic: str, partitions: Iterable[int],
                     offsets: dict[int, int]) -> Steps:
    """Where the consumer starts reading each of `partitions`: 0, or the HWM for `latest`."""
    for p in partitions:
        if c.from_ == "latest":
            r = yield from client.fetch(topic, p, 0, max_wait=0)
            offsets[p] = max(0, r.high_watermark)
        else:
            offsets[p] = 0


def final_read(client: StepClient, history: History, partitions: list[tuple[str, int]], deadline: float,
               clock: Clock) -> Steps:
    """The final read (DESIGN section 7): every partition read through its leader from offset
    0 to its HWM, as process `final-reader`. Returns, per partition, whether the read reached
    the end of the committed log; a partition that could not be read to its end makes
    missing values `unseen`, not lost. An empty partition's read is a poll that returned
    nothing: a run without producers has a history too, and is judged."""
    complete: dict[tuple[str, int], bool] = {}
    for topic, p in partitions:
        offset, done = 0, False
        while clock.seconds() < deadline:
            invoked = clock.ns()
            r = yield from client.fetch(topic, p, offset, max_wait=0)
            if r.error != Errors.NONE:
                yield Sleep(FINAL_READ_RETRY)  # while the partition has no reachable leader
                yield from client.refresh_metadata([topic])
                continue
            if r.records or r.high_watermark == 0:  # an empty partition is read too: an empty poll
                history.poll(topic, p, offset, invoked, r.records, r.leader)
            if r.records:
                offset = r.records[-1][0] + 1
            if offset >= r.high_watermark:
                done = True
                break
        complete[(topic, p)] = done
    return complete


def client_loop(cfg: ClientConfig, client: StepClient, history: History, stats: Counts, clock: Clock,
                stop: Stop) -> Steps:
    """The loop a client's configuration asks for: a producer (pipelining with `in_flight` >
    1) or a consumer."""
    if cfg.producer is not None and cfg.producer.in_flight > 1:
        return pipelined_producer(cfg, cfg.producer, client, history, stats, clock, stop)
    if cfg.producer is not None:
        return producer(cfg, cfg.producer, client, history, stats, clock, stop)
    assert cfg.consumer is not None, f"{cfg.process}: neither a producer nor a consumer"
    return consumer(cfg, cfg.consumer, client, history, stats, clock, stop)
