"""The workload's clients on virtual time: producers, consumers and the final read.

Each client is a generator that yields what it waits for (`Call`: a request and its
answer; `Start`/`Collect`: pipelined produces; `Sleep`) and a `ClientTask` drives it on
the loop. The requests are built and the answers read by the same `ClientState` as the
process clients' (`broker/client.py`), and the loops follow `testbed/clients/worker.py`
step for step: the same pacing, the same retries with the same exponential backoff, the
same history records, and a stop that lets the operation in flight complete.
"""
from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Any

from broker.client import ClientState, FetchResult, ProduceResult
from broker.common.errors import RETRIABLE, Errors
from broker.protocol.messages import MetadataRequest
from testbed.clients.client_config import ClientConfig, ConsumerSettings, ProducerSettings
from testbed.clients.history import History
from testbed.clients.worker import METADATA_MAX_AGE, TOPIC_POLL
from testbed.sim.loop import Loop
from testbed.sim.network import ReplyHandle, SimNetwork


@dataclass(frozen=True)
class Call:
    """Send `msg` to `endpoint`; resumed with the answer, or None at `timeout`."""
    endpoint: str
    msg: Any
    timeout: float


@dataclass(frozen=True)
class Start:
    """Send without waiting (a pipelined produce, or acks=0); its answer goes to `Collect`."""
    endpoint: str
    msg: Any
    timeout: float
    tag: Any


@dataclass(frozen=True)
class Collect:
    """Resumed with [(tag, answer or None)] of started requests, waiting up to `wait`."""
    wait: float


@dataclass(frozen=True)
class Sleep:
    seconds: float


Step = Generator[Any, Any, Any]


class ClientTask:
    """Drives one client generator on the loop; an endpoint of the network (it serves none)."""

    def __init__(self, name: str, loop: Loop, net: SimNetwork) -> None:
        self.name = name
        self.loop = loop
        self.net = net
        self.done = False
        self._gen: Step | None = None
        self._started: list[tuple[Any, Any]] = []  # answers of `Start`ed requests, not yet collected
        self._collecting = 0  # > 0: the generator waits in a Collect (its id)
        self._waits = 0
        net.attach(self)

    @property
    def up(self) -> bool:
        return not self.done

    def deliver(self, fn: Callable[[], None]) -> None:
        fn()

    def on_request(self, handle: ReplyHandle, msg: Any) -> None:
        """Clients serve nothing."""

    def run(self, gen: Step) -> None:
        self._gen = gen
        self.loop.after(0.0, self._resume, None)

    def kill(self) -> None:
        if not self.done:
            self.done = True
            if self._gen is not None:
                self._gen.close()

    def _resume(self, value: Any) -> None:
        if self.done or self._gen is None:
            return
        try:
            cmd = self._gen.send(value)
        except StopIteration:
            self.done = True
            return
        if isinstance(cmd, Call):
            self.net.request(self.name, cmd.endpoint, cmd.msg, cmd.timeout, self._resume)
        elif isinstance(cmd, Sleep):
            self.loop.after(cmd.seconds, self._resume, None)
        elif isinstance(cmd, Start):
            tag = cmd.tag
            self.net.request(self.name, cmd.endpoint, cmd.msg, cmd.timeout, lambda m: self._completed(tag, m))
            self.loop.after(0.0, self._resume, None)
        elif isinstance(cmd, Collect):
            if self._started:
                self.loop.after(0.0, self._collect, None)
            else:
                self._waits += 1
                self._collecting = self._waits
                self.loop.after(cmd.wait, self._collect, self._waits)
        else:
            raise TypeError(f"{self.name}: a client yielded {cmd!r}")

    def _completed(self, tag: Any, msg: Any) -> None:
        if self.done:
            return
        self._started.append((tag, msg))
        if self._collecting:
            self._collecting = 0
            self.loop.after(0.0, self._collect, None)

    def _collect(self, wait: int | None) -> None:
        if wait is not None and wait != self._collecting:
            return  # a completion came first and resumed the generator already
        self._collecting = 0
        got, self._started = self._started, []
        self._resume(got)


class SimClusterClient(ClientState):
    """`broker.client.ClusterClient` as generator steps (yield from each call)."""

    def request(self, broker_id: int, msg: Any, timeout: float | None = None) -> Step:
        endpoint = self.brokers.get(broker_id)
        if endpoint is None:
            return None
        return (yield Call(endpoint, msg, self.request_timeout if timeout is None else timeout))

    def refresh_metadata(self, topics: list[str] | None = None) -> Step:
        answers = []
        for broker_id in list(self.brokers):
            answers.append((yield from self.request(broker_id, MetadataRequest(topics),
                                                    min(1.0, self.request_timeout))))
        return self.take_metadata(answers)

    def leader_of(self, topic: str, partition: int) -> Step:
        pm = self.leaders.get((topic, partition))
        if pm is None or pm.leader < 0:
            yield from self.refresh_metadata()
        return self.known_leader(topic, partition)

    def produce(self, topic: str, partition: int, values: list[str], acks: str, timeout: float) -> Step:
        leader = yield from self.leader_of(topic, partition)
        if leader < 0:
            return ProduceResult(Errors.NOT_LEADER_OR_FOLLOWER, leader=leader)
        req = self._produce_request(topic, partition, values, acks, timeout)
        if not req.expects_response:
            yield Start(self.brokers[leader], req, timeout, None)
            return ProduceResult(Errors.NONE, leader=leader, appended=True)
        resp = yield from self.request(leader, req, timeout + 0.5)
        return self._produce_result(topic, partition, leader, resp)

    def fetch(self, topic: str, partition: int, offset: int, max_wait: float = 0.1,
              max_bytes: int = 1 << 20) -> Step:
        leader = yield from self.leader_of(topic, partition)
        if leader < 0:
            return FetchResult(Errors.NOT_LEADER_OR_FOLLOWER, leader=leader)
        req = self._fetch_request(topic, partition, offset, max_wait, max_bytes)
        resp = yield from self.request(leader, req, max_wait + self.request_timeout)
        return self._fetch_result(topic, partition, offset, leader, resp)


@dataclass
class Stop:
    """The SIGTERM of a client process: asked at the same points as worker.py's `_stop`."""
    requested: bool = False

    def __bool__(self) -> bool:
        return self.requested


@dataclass
class _PartitionCycle:
    """worker.PartitionCycle on virtual time."""
    cfg: ClientConfig
    client: SimClusterClient
    clock: Callable[[], float]
    turn: int = 0
    looked: float = 0.0
    partitions: tuple[int, ...] = field(default_factory=tuple)

    def next(self) -> Step:
        if not self.partitions:
            self.partitions, self.looked = self.cfg.partitions, self.clock()
        if self.cfg.follow_partitions and self.clock() - self.looked >= METADATA_MAX_AGE:
            self.looked = self.clock()
            yield from self.client.refresh_metadata([self.cfg.topic])
            seen = tuple(sorted(p for t, p in self.client.leaders if t == self.cfg.topic))
            self.partitions = seen or self.partitions
        self.turn += 1
        return self.partitions[(self.turn - 1) % len(self.partitions)]


def wait_for_topic(client: SimClusterClient, topic: str, stop: Stop) -> Step:
    while not stop:
        yield from client.refresh_metadata([topic])
        if any(t == topic for t, _ in client.leaders):
            return
        yield Sleep(TOPIC_POLL)


def _values(process: str, seq: int, p: ProducerSettings) -> list[str]:
    return [f"{process}:{seq + i}".ljust(p.value_bytes, ".") for i in range(p.batch)]


def producer(cfg: ClientConfig, p: ProducerSettings, client: SimClusterClient, history: History,
             clock: Callable[[], float], stop: Stop) -> Step:
    """worker.run_producer: one request at a time, each send with its retries."""
    yield from wait_for_topic(client, cfg.topic, stop)
    topic, acks = cfg.topic, p.acks
    partitions = _PartitionCycle(cfg, client, clock)
    interval = p.batch / p.rate if p.rate else 0.0
    seq = 0
    next_at = clock()
    while not stop:
        if interval:
            delay = next_at - clock()
            if delay > 0:
                yield Sleep(delay)
            next_at = max(next_at + interval, clock() - 1.0)
        partition = yield from partitions.next()
        values = _values(cfg.process, seq, p)
        seq += p.batch
        attempt = 1
        while True:
            history.send_invoke(topic, partition, values, acks)
            r = yield from client.produce(topic, partition, values, acks, cfg.request_timeout)
            history.send_complete(topic, partition, values, acks, r.error, r.base_offset, r.appended)
            if r.error != Errors.NONE:
                yield from client.refresh_metadata([topic])
            if r.error in RETRIABLE and not stop and attempt <= p.retries:
                # tenacity's wait_exponential(multiplier=backoff, max=8 x backoff)
                yield Sleep(min(p.retry_backoff * 2 ** (attempt - 1), p.retry_backoff * 8))
                attempt += 1
                continue
            break


def pipelined_producer(cfg: ClientConfig, p: ProducerSettings, client: SimClusterClient, history: History,
                       clock: Callable[[], float], stop: Stop) -> Step:
    """worker.run_pipelined_producer: up to `in_flight` produces outstanding; a retried
    batch goes out after those sent meanwhile (reordering), a timed-out one that was
    appended is appended again (a duplicate)."""
    yield from wait_for_topic(client, cfg.topic, stop)
    topic, acks, limit = cfg.topic, p.acks, p.in_flight
    interval = p.batch / p.rate if p.rate else 0.0
    retries: list[tuple[float, int, int, list[str], int]] = []  # due, order, partition, values, attempt
    order = 0
    partitions = _PartitionCycle(cfg, client, clock)
    in_flight: dict[int, tuple[int, int, list[str], int]] = {}  # tag -> leader, partition, values, attempt
    seq = 0
    next_at = clock()
    tags = 0

    def finish(partition: int, values: list[str], attempt: int, r: ProduceResult) -> Step:
        nonlocal order
        history.send_complete(topic, partition, values, acks, r.error, r.base_offset, r.appended)
        if r.error == Errors.NONE:
            return
        yield from client.refresh_metadata([topic])
        if r.error in RETRIABLE and attempt <= p.retries and not stop:
            backoff = min(p.retry_backoff * 2 ** (attempt - 1), p.retry_backoff * 8)
            order += 1
            retries.append((clock() + backoff, order, partition, values, attempt + 1))
            retries.sort()

    def start(partition: int, values: list[str], attempt: int) -> Step:
        nonlocal tags
        history.send_invoke(topic, partition, values, acks)
        leader = yield from client.leader_of(topic, partition)
        if leader < 0:
            yield from finish(partition, values, attempt, ProduceResult(Errors.NOT_LEADER_OR_FOLLOWER, leader=leader))
            return
        req = client._produce_request(topic, partition, values, acks, cfg.request_timeout)
        tags += 1
        if not req.expects_response:
            yield Start(client.brokers[leader], req, cfg.request_timeout + 0.5, None)
            yield from finish(partition, values, attempt, ProduceResult(Errors.NONE, leader=leader, appended=True))
            return
        in_flight[tags] = (leader, partition, values, attempt)
        yield Start(client.brokers[leader], req, cfg.request_timeout + 0.5, tags)

    while not stop or in_flight:
        now = clock()
        while not stop and len(in_flight) < limit:
            if retries and retries[0][0] <= now:
                _, _, partition, values, attempt = retries.pop(0)
                yield from start(partition, values, attempt)
            elif not retries and next_at <= now:
                partition = yield from partitions.next()
                values = _values(cfg.process, seq, p)
                seq += p.batch
                next_at = max(next_at + interval, now - 1.0)
                yield from start(partition, values, 1)
            else:
                break
            now = clock()
        due = retries[0][0] if retries else next_at
        wait = min(max(0.0, due - now), 0.05) if not stop and len(in_flight) < limit else 0.05
        if in_flight:
            for tag, resp in (yield Collect(wait)):
                if tag is None or tag not in in_flight:
                    continue
                leader, partition, values, attempt = in_flight.pop(tag)
                yield from finish(partition, values, attempt,
                                  client._produce_result(topic, partition, leader, resp))
        elif wait > 0:
            yield Sleep(wait)


def consumer(cfg: ClientConfig, c: ConsumerSettings, client: SimClusterClient, history: History,
             clock_ns: Callable[[], int], stop: Stop) -> Step:
    """worker.run_consumer."""
    yield from wait_for_topic(client, cfg.topic, stop)
    topic = cfg.topic
    offsets: dict[int, int] = {}
    for p in cfg.partitions:
        if c.from_ == "latest":
            r = yield from client.fetch(topic, p, 0, max_wait=0)
            offsets[p] = max(0, r.high_watermark)
        else:
            offsets[p] = 0
    while not stop:
        for p in cfg.partitions:
            invoked = clock_ns()
            r = yield from client.fetch(topic, p, offsets[p], max_wait=c.max_wait)
            if r.error == Errors.NONE and r.records:
                history.poll(topic, p, offsets[p], invoked, r.records)
                offsets[p] = r.records[-1][0] + 1
            elif r.error == Errors.OFFSET_OUT_OF_RANGE:
                offsets[p] = 0
            if stop:
                break


def final_read(client: SimClusterClient, history: History, partitions: list[tuple[str, int]], deadline: float,
               clock: Callable[[], float], clock_ns: Callable[[], int], complete: dict) -> Step:
    """testbed.clients.final_read on virtual time; `complete` gets, per partition, whether
    the read reached the end of the committed log."""
    for topic, p in partitions:
        offset, done = 0, False
        while clock() < deadline:
            invoked = clock_ns()
            r = yield from client.fetch(topic, p, offset, max_wait=0)
            if r.error != Errors.NONE:
                yield Sleep(0.05)
                yield from client.refresh_metadata([topic])
                continue
            if r.records:
                history.poll(topic, p, offset, invoked, r.records)
                offset = r.records[-1][0] + 1
            if offset >= r.high_watermark:
                done = True
                break
        complete[(topic, p)] = done
