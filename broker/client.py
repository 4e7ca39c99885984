"""The producer and consumer library that workloads, the final reader and tests use.

A client's requests are written once, as steps (`StepClient`): generators that yield what
they wait for (`Call`: a request and its answer; `CallEach`: requests to several brokers at
once; `Start` and `Collect`: requests kept in flight; `Sleep`) and are resumed with the
outcome. `ClusterClient` carries the steps out over ZeroMQ on the host's clock and offers
them as plain calls (`produce`, `fetch`): one request in flight, so every history record has
a clear invoke and completion. The deterministic simulation (`testbed/sim/`) carries the
same steps out on virtual time.

A producer that pipelines (`in_flight` > 1, Kafka's `max.in.flight.requests.per.connection`)
starts requests with `Start` and collects their outcomes with `Collect`; every outcome
still belongs to one request.
"""
from __future__ import annotations

import itertools
import os
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from broker.common.errors import Errors
from broker.common.record_batch import decode_batch_values, encode_record_set
from broker.protocol.messages import (
    ACKS,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    PartitionMetadata,
    ProduceRequest,
    ProduceResponse,
)
from broker.wire.transport import Expired, Response, Transport


@dataclass
class ProduceResult:
    error: Errors
    base_offset: int = -1
    #: the records were appended: always on success; on an error, that it came after the append
    #: (outcome unknown, R20)
    appended: bool = False
    leader: int = -1


@dataclass
class FetchResult:
    error: Errors
    records: list[tuple[int, str]] = field(default_factory=list)
    high_watermark: int = -1
    leader: int = -1


# ------------------------------------------------------------------ what a client waits for
# (named tuples: immutable, and made at half a frozen dataclass's cost, one per request; each
# equals a plain tuple of the same values, and so a step of another class with the same
# values: the executors tell them apart by isinstance, never by comparing)
class Call(NamedTuple):
    """Send `msg` to `endpoint`; resumed with the answer, or None at `timeout`."""
    endpoint: str
    msg: Any
    timeout: float


class CallEach(NamedTuple):
    """Send each (endpoint, message) of `calls` at once; resumed with their answers in that
    order (None where none came) when all have come, at `timeout`, or `settle` s after the
    first answer: a broker that cannot answer (paused, cut off) holds the others' answers
    only that long, not its whole timeout."""
    calls: tuple[tuple[str, Any], ...]
    timeout: float
    settle: float


class Start(NamedTuple):
    """Send without waiting (a pipelined produce, or acks=0); its answer goes to a `Collect`,
    none for the tag None (an acks=0 send is never answered)."""
    endpoint: str
    msg: Any
    timeout: float
    tag: Any


class Collect(NamedTuple):
    """Resumed with [(tag, answer or None)] of started requests, waiting up to `wait` s for
    the first; a request not answered in its time completes as None (outcome unknown)."""
    wait: float


class Sleep(NamedTuple):
    seconds: float


Command = Call | CallEach | Start | Collect | Sleep
#: builds a step from its values as its class's call does (a named tuple's generated `__new__`
#: is a Python function that calls this), at a fifth of the cost, for the steps made most
_tuple_new = tuple.__new__
Steps = Generator[Command, Any, Any]


#: how many metadata refreshes a broker that left a request unanswered is left out of: 1, 2, 4 ... up
#: to this many while it stays silent (see `StepClient.refresh_metadata`)
MAX_SILENT_SKIPS = 8
#: the metadata answers a refresh takes: those that know every topic asked about, and those
#: that know some of them not to exist (deleted, or not made yet: R40)
_METADATA_ANSWERS = (Errors.NONE, Errors.UNKNOWN_TOPIC_OR_PARTITION)
#: how long a metadata refresh waits for the other brokers' answers after the first, as a
#: share of the request timeout (50 ms at the default 2 s)
METADATA_SETTLE = 0.025


class StepClient:
    """What a client knows (the brokers, the leaders it last saw), and its requests as steps
    (`yield from` each one)."""

    def __init__(self, brokers: dict[int, str], name: str, request_timeout: float) -> None:
        self.brokers = dict(brokers)
        self.name = name
        self.request_timeout = request_timeout
        self.leaders: dict[tuple[str, int], PartitionMetadata] = {}
        #: topic -> (the metadata offset of the answer, its partitions): each topic's partitions as
        #: the newest metadata answer that described it lists them. `leaders` only ever gains
        #: partitions (a send to one the answer no longer lists goes to its old leader and is
        #: answered UNKNOWN_TOPIC_OR_PARTITION); this is what a partitioner chooses among.
        self._topic_partitions: dict[str, tuple[int, tuple[int, ...]]] = {}
        #: the newest metadata offset an answer was taken from: an older answer (a broker whose
        #: metadata lags, cut off from the controller) is never taken after it
        self._metadata_offset = -1
        #: topics the newest answer that was asked about them did not know (deleted, R40)
        self._absent: set[str] = set()
        self._silent: dict[int, int] = {}  # broker -> requests it left unanswered in a row
        self._skips: dict[int, int] = {}  # broker -> refreshes it is still left out of

    def request(self, broker_id: int, msg: Any, timeout: float | None = None) -> Steps:
        """The answer; None when it did not come in time or the broker is unknown. A broker
        that leaves a request unanswered is left out of the next metadata refreshes
        (`refresh_metadata`) until it answers again."""
        endpoint = self.brokers.get(broker_id)
        if endpoint is None:
            return None
        # (Call(...) by tuple.__new__ itself, without the class call's Python frame: every request)
        answer = yield _tuple_new(Call, (endpoint, msg, self.request_timeout if timeout is None else timeout))
        self._heard(broker_id, answer)
        return answer

    def _heard(self, broker_id: int, answer: Any) -> None:
        """Count a request `broker_id` left unanswered (None), or forget its silence."""
        if answer is None:
            silent = self._silent[broker_id] = self._silent.get(broker_id, 0) + 1
            self._skips[broker_id] = min(2 ** (silent - 1), MAX_SILENT_SKIPS)
        else:
            self._silent.pop(broker_id, None)
            self._skips.pop(broker_id, None)

    def refresh_metadata(self, topics: list[str] | None = None) -> Steps:
        """Ask brokers at once; keep the answer with the newest metadata.

        The brokers are asked together (`CallEach`), and the answers that came within
        `METADATA_SETTLE` of the first one count: a paused broker used to hold every refresh,
        and so the producer's sends behind it, for its 1 s timeout, one broker after another.

        A broker that left a request unanswered (dead, paused, cut off) would cost every
        refresh its whole timeout, and a producer refreshes every second: it is left out of
        the next 1, 2, 4 ... `MAX_SILENT_SKIPS` refreshes while it stays silent, as a Kafka
        client sends no metadata request to a node in its reconnect backoff (all are asked
        when all are silent).
        A broker the newest metadata no longer lists (removed, R39) is forgotten; one that
        joined (R38) is learnt.

        An answer older than one taken before is not taken (as a Kafka client refuses a
        partition's metadata of an older leader epoch, KIP-320), and an answer that the topic
        is unknown counts as metadata: a topic deleted (R40) has no leader left to send to.
        Before, only answers that knew every topic asked about counted, so once a topic was
        deleted the one broker whose metadata lagged (cut off from the controller) won every
        refresh, and the producers went back to its deposed leader for the whole cut."""
        asked = [b for b in self.brokers if not self._skips.get(b)] or list(self.brokers)
        for broker_id in self.brokers:
            if broker_id not in asked:
                self._skips[broker_id] -= 1
        # (a request each: a message sent is no longer its sender's, as on the wire)
        answers = yield CallEach(tuple((self.brokers[b], MetadataRequest(topics)) for b in asked),
                                 min(1.0, self.request_timeout), self.request_timeout * METADATA_SETTLE)
        best: MetadataResponse | None = None
        for broker_id, resp in zip(asked, answers):
            self._heard(broker_id, resp)
            if isinstance(resp, MetadataResponse) and resp.error in _METADATA_ANSWERS:
                if best is None or resp.metadata_offset > best.metadata_offset:
                    best = resp
        if best is not None and best.metadata_offset < self._metadata_offset:
            best = None
        if best is not None:
            self._metadata_offset = best.metadata_offset
            listed: dict[str, list[int]] = {}
            for pm in best.partitions:
                self.leaders[(pm.topic, pm.partition)] = pm
                listed.setdefault(pm.topic, []).append(pm.partition)
            self._absent -= set(listed)
            for topic in set(topics or ()) - set(listed):  # unknown at this offset: deleted
                self._absent.add(topic)
                for key in [k for k in self.leaders if k[0] == topic]:
                    del self.leaders[key]
            for topic, partitions in listed.items():
                # never from an answer older than the one it was taken from: a broker whose
                # metadata lags may still describe a topic as it was before an `add-partitions`
                # or before it was deleted and made again
                if best.metadata_offset >= self._topic_partitions.get(topic, (-1, ()))[0]:
                    self._topic_partitions[topic] = (best.metadata_offset, tuple(sorted(partitions)))
            for broker_id, endpoint in best.endpoints.items():  # brokers that joined later (R38)
                self.brokers.setdefault(broker_id, endpoint)
            for broker_id in [b for b in self.brokers if best.endpoints and b not in best.endpoints]:
                del self.brokers[broker_id]
                self._silent.pop(broker_id, None)
                self._skips.pop(broker_id, None)
        return best if best is not None and best.error == Errors.NONE else None

    def no_leader_error(self, topic: str) -> Errors:
        """Why a request to `topic` has nowhere to go: its topic is gone, or no leader is known."""
        return Errors.UNKNOWN_TOPIC_OR_PARTITION if topic in self._absent else Errors.NOT_LEADER_OR_FOLLOWER

    def partitions_of(self, topic: str) -> tuple[int, ...]:
        """The topic's partitions as the newest metadata answer that described it lists them
        (every partition of the topic, led or not); () when no answer has described it yet.
        A topic deleted and made again with fewer partitions has fewer here, as a Kafka
        producer's partitioner takes the partition count of its current metadata."""
        return self._topic_partitions.get(topic, (-1, ()))[1]

    def leader_of(self, topic: str, partition: int) -> Steps:
        """The partition's leader as last known, -1 when none is known or it cannot be reached."""
        pm = self.leaders.get((topic, partition))
        if pm is None or pm.leader < 0:
            yield from self.refresh_metadata()
            pm = self.leaders.get((topic, partition))
        return pm.leader if pm is not None and pm.leader in self.brokers else -1

    def produce(self, topic: str, partition: int, values: list[str], acks: str = "all",
                timeout: float | None = None) -> Steps:
        """One produce attempt to the current leader (R20); the caller decides on retries."""
        leader = yield from self.leader_of(topic, partition)
        if leader < 0:
            return ProduceResult(self.no_leader_error(topic), leader=leader)
        timeout = self.request_timeout if timeout is None else timeout
        req = self.produce_request(topic, partition, values, acks, timeout)
        if not req.expects_response:
            yield Start(self.brokers[leader], req, timeout, None)
            return ProduceResult(Errors.NONE, leader=leader, appended=True)
        return self.produce_result(topic, partition, leader, (yield from self.request(leader, req, timeout + 0.5)))

    def fetch(self, topic: str, partition: int, offset: int, max_wait: float = 0.1,
              max_bytes: int = 1 << 20) -> Steps:
        """Read committed records from the leader (R21): only below its HWM."""
        leader = yield from self.leader_of(topic, partition)
        if leader < 0:
            return FetchResult(self.no_leader_error(topic), leader=leader)
        # (by position: a consumer's replica_id -1, no broker epoch, min_bytes 1; the partition's
        # last fetched and current leader epoch -1: a keyword call of a dataclass is the slow
        # path of a call on Python 3.11, and a consumer fetches in a loop)
        req = FetchRequest(-1, -1, int(max_wait * 1000), 1,
                           [FetchPartition(topic, partition, offset, -1, -1, max_bytes)])
        resp = yield from self.request(leader, req, max_wait + self.request_timeout)
        if not isinstance(resp, FetchResponse) or not resp.partitions:
            self.leaders.pop((topic, partition), None)
            return FetchResult(Errors.REQUEST_TIMED_OUT, leader=leader)
        r = resp.partitions[0]
        if r.error != Errors.NONE:
            self.leaders.pop((topic, partition), None)
            return FetchResult(r.error, high_watermark=r.high_watermark, leader=leader)
        return FetchResult(Errors.NONE, _readable(r.records, offset, r.high_watermark), r.high_watermark, leader)

    @staticmethod
    def produce_request(topic: str, partition: int, values: list[str], acks: str, timeout: float) -> ProduceRequest:
        return ProduceRequest(topic, partition, ACKS[str(acks)], int(timeout * 1000),
                              encode_record_set([v.encode() for v in values]))

    def produce_result(self, topic: str, partition: int, leader: int, resp: object | None) -> ProduceResult:
        """A produce's outcome from its answer (None: none came in time, outcome unknown)."""
        if not isinstance(resp, ProduceResponse):
            self.leaders.pop((topic, partition), None)
            return ProduceResult(Errors.REQUEST_TIMED_OUT, appended=True, leader=leader)
        if resp.error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH):
            self.leaders.pop((topic, partition), None)
        return ProduceResult(resp.error, resp.base_offset, resp.appended or resp.error == Errors.NONE, leader)


def _readable(records: bytes, offset: int, high_watermark: int) -> list[tuple[int, str]]:
    """(offset, value) of the fetched records from `offset` up to the HWM, decoded: the
    slice of each batch's values in that range, with its offsets (a consumer reads every
    record of a run, and a tuple and two comparisons per record were most of this)."""
    out: list[tuple[int, str]] = []
    for base, _epoch, values in decode_batch_values(records):
        lo = offset - base if offset > base else 0
        taken = values[lo:high_watermark - base] if high_watermark > base else ()
        if taken:
            try:  # (valid UTF-8, as every value is: decoded by `map`, equal to the "replace" decoding)
                texts = list(map(bytes.decode, taken))
            except UnicodeDecodeError:
                texts = [v.decode("utf-8", "replace") for v in taken]
            out.extend(zip(range(base + lo, base + lo + len(taken)), texts))
    return out


class ClusterClient:
    """Talks to the brokers of one run over ZeroMQ: the steps carried out on the host's clock."""

    _ids = itertools.count()

    def __init__(self, brokers: dict[int, str], name: str = "client", request_timeout: float = 2.0) -> None:
        self.steps = StepClient(brokers, name, request_timeout)
        # Unique per process and object: a node's ROUTER hands an identity to its newest holder.
        # A request to a broker whose process went away fails at once, not at its timeout
        # (`Transport.fail_fast`): the producer is back to its metadata and retries then.
        self.transport = Transport(f"{name}-{os.getpid()}-{next(self._ids)}", fail_fast=True)
        self._started: dict[int, Any] = {}  # request id -> the tag of a request started and unanswered
        self._stash: list[Response | Expired] = []  # outcomes of started requests read while waiting on a Call

    @property
    def brokers(self) -> dict[int, str]:
        return self.steps.brokers

    @property
    def leaders(self) -> dict[tuple[str, int], PartitionMetadata]:
        return self.steps.leaders

    @property
    def in_flight(self) -> int:
        """Started requests not answered yet."""
        return len(self._started)

    # ---------------------------------------------------------------- the executor of steps
    def run(self, steps: Steps) -> Any:
        """Carry `steps` out to the end; what they return."""
        value = None
        while True:
            try:
                command = steps.send(value)
            except StopIteration as done:
                return done.value
            value = self.perform(command)

    def perform(self, command: Command) -> Any:
        if isinstance(command, Call):
            return self._call(command.endpoint, command.msg, command.timeout)
        if isinstance(command, CallEach):
            return self._call_each(command.calls, command.timeout, command.settle)
        if isinstance(command, Start):
            rid = self.transport.request(command.endpoint, command.msg, command.timeout, time.monotonic())
            if command.tag is not None:
                self._started[rid] = command.tag
            return None
        if isinstance(command, Collect):
            return self._collect(command.wait)
        if isinstance(command, Sleep):
            if command.seconds > 0:
                time.sleep(command.seconds)  # what the steps asked for: pacing, backoff
            return None
        raise TypeError(f"not a client step: {command!r}")

    def _call(self, endpoint: str, msg: Any, timeout: float) -> Any:
        return self._call_each(((endpoint, msg),), timeout, timeout)[0]

    def _call_each(self, calls: tuple[tuple[str, Any], ...], timeout: float, settle: float) -> list[Any]:
        """The answers to `calls` (None where none came), read until all came, `timeout`
        passed, or `settle` after the first answer; the outcomes of started requests read
        meanwhile are kept for their `Collect`, a batch read whole (an outcome behind an
        answer must not be lost)."""
        now = time.monotonic()
        waiting = {self.transport.request(endpoint, msg, timeout, now): i for i, (endpoint, msg) in enumerate(calls)}
        answers: list[Any] = [None] * len(calls)
        deadline = now + timeout + 0.05
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            for item in self.transport.poll(left, time.monotonic):
                if not isinstance(item, Response | Expired):
                    continue
                i = waiting.pop(item.request_id, None)
                if i is not None:
                    if isinstance(item, Response):
                        answers[i] = item.msg
                        deadline = min(deadline, time.monotonic() + settle)
                elif item.request_id in self._started:
                    self._stash.append(item)  # a started request's outcome: a Collect owns it
        return answers

    def _collect(self, wait: float) -> list[tuple[Any, Any]]:
        items, self._stash = self._stash, []
        if not items and self._started:
            items = self.transport.poll(wait, time.monotonic)
        done = []
        for item in items:
            if isinstance(item, Response | Expired) and item.request_id in self._started:
                done.append((self._started.pop(item.request_id), item.msg if isinstance(item, Response) else None))
        return done

    # ---------------------------------------------------------------- the steps as plain calls
    def request(self, broker_id: int, msg: object, timeout: float | None = None) -> object | None:
        """Send and wait for the answer; None when it did not come in time."""
        return self.run(self.steps.request(broker_id, msg, timeout))

    def refresh_metadata(self, topics: list[str] | None = None) -> MetadataResponse | None:
        return self.run(self.steps.refresh_metadata(topics))

    def leader_of(self, topic: str, partition: int) -> int:
        return self.run(self.steps.leader_of(topic, partition))

    def produce(self, topic: str, partition: int, values: list[str], acks: str = "all",
                timeout: float | None = None) -> ProduceResult:
        return self.run(self.steps.produce(topic, partition, values, acks, timeout))

    def fetch(self, topic: str, partition: int, offset: int, max_wait: float = 0.1,
              max_bytes: int = 1 << 20) -> FetchResult:
        return self.run(self.steps.fetch(topic, partition, offset, max_wait, max_bytes))

    def close(self) -> None:
        self.transport.close()
