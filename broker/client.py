"""The producer and consumer library that workloads, the final reader and tests use.

Requests are synchronous (`produce`, `fetch`): one in flight, so every history record has
a clear invoke and completion. A producer that pipelines (`in_flight` > 1, Kafka's
`max.in.flight.requests.per.connection`) starts produces with `start_produce` and collects
their outcomes with `completions`; every outcome still belongs to one request.
"""
from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field

from broker.common.errors import Errors
from broker.common.record_batch import decode_batches, encode_record_set
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
    appended: bool = False  # the error may have come after the append (outcome unknown)
    leader: int = -1


@dataclass(eq=False)
class PendingProduce:
    """A produce request sent and not yet answered; `completions` hands it back with its outcome."""

    topic: str
    partition: int
    values: list[str]
    leader: int
    request_id: int
    tag: object = None  # the caller's own bookkeeping (the attempt number)


@dataclass
class FetchResult:
    error: Errors
    records: list[tuple[int, str]] = field(default_factory=list)
    high_watermark: int = -1
    leader: int = -1


class ClientState:
    """What a client knows (the brokers, the leaders it last saw) and how it builds requests
    and reads answers, without I/O: `ClusterClient` sends over ZeroMQ and waits, the
    simulation's client (`testbed/sim/clients.py`) sends on virtual time."""

    def __init__(self, brokers: dict[int, str], name: str, request_timeout: float) -> None:
        self.brokers = dict(brokers)
        self.name = name
        self.request_timeout = request_timeout
        self.leaders: dict[tuple[str, int], PartitionMetadata] = {}

    def take_metadata(self, answers: list[object]) -> MetadataResponse | None:
        """Keep the answer with the newest metadata of those the brokers gave."""
        best: MetadataResponse | None = None
        for resp in answers:
            if isinstance(resp, MetadataResponse) and resp.error == Errors.NONE:
                if best is None or resp.metadata_offset > best.metadata_offset:
                    best = resp
        if best is not None:
            for pm in best.partitions:
                self.leaders[(pm.topic, pm.partition)] = pm
            for broker_id, endpoint in best.endpoints.items():  # brokers that joined later (R38)
                self.brokers.setdefault(broker_id, endpoint)
        return best

    def known_leader(self, topic: str, partition: int) -> int:
        """The leader as last seen, -1 when none is known or it cannot be reached."""
        pm = self.leaders.get((topic, partition))
        return pm.leader if pm is not None and pm.leader in self.brokers else -1

    @staticmethod
    def _produce_request(topic: str, partition: int, values: list[str], acks: str, timeout: float) -> ProduceRequest:
        return ProduceRequest(topic, partition, ACKS[str(acks)], int(timeout * 1000),
                              encode_record_set([v.encode() for v in values]))

    def _produce_result(self, topic: str, partition: int, leader: int, resp: object | None) -> ProduceResult:
        if not isinstance(resp, ProduceResponse):
            self.leaders.pop((topic, partition), None)
            return ProduceResult(Errors.REQUEST_TIMED_OUT, appended=True, leader=leader)
        if resp.error in (Errors.NOT_LEADER_OR_FOLLOWER, Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_LEADER_EPOCH):
            self.leaders.pop((topic, partition), None)
        return ProduceResult(resp.error, resp.base_offset, resp.appended, leader)

    @staticmethod
    def _fetch_request(topic: str, partition: int, offset: int, max_wait: float, max_bytes: int) -> FetchRequest:
        return FetchRequest(replica_id=-1, max_wait_ms=int(max_wait * 1000),
                            partitions=[FetchPartition(topic, partition, offset, max_bytes=max_bytes)])

    def _fetch_result(self, topic: str, partition: int, offset: int, leader: int, resp: object | None) -> FetchResult:
        if not isinstance(resp, FetchResponse) or not resp.partitions:
            self.leaders.pop((topic, partition), None)
            return FetchResult(Errors.REQUEST_TIMED_OUT, leader=leader)
        r = resp.partitions[0]
        if r.error != Errors.NONE:
            self.leaders.pop((topic, partition), None)
            return FetchResult(r.error, high_watermark=r.high_watermark, leader=leader)
        records = [(o, v.decode("utf-8", "replace")) for o, _e, v in decode_batches(r.records)
                   if offset <= o < r.high_watermark]
        return FetchResult(Errors.NONE, records, r.high_watermark, leader)


class ClusterClient(ClientState):
    """Talks to the brokers of one run: metadata, produce, consume."""

    _ids = itertools.count()

    def __init__(self, brokers: dict[int, str], name: str = "client", request_timeout: float = 2.0) -> None:
        super().__init__(brokers, name, request_timeout)
        # Unique per process and object: a node's ROUTER hands an identity to its newest holder.
        self.transport = Transport(f"{name}-{os.getpid()}-{next(self._ids)}")
        self._pending: dict[int, PendingProduce] = {}  # request id -> produce started and unanswered
        self._stash: list[Response | Expired] = []  # outcomes of started produces read by `request`

    # ---------------------------------------------------------------- plumbing
    def request(self, broker_id: int, msg: object, timeout: float | None = None) -> object | None:
        """Send and wait for the answer; None when it did not come in time."""
        endpoint = self.brokers.get(broker_id)
        if endpoint is None:
            return None
        timeout = self.request_timeout if timeout is None else timeout
        rid = self.transport.request(endpoint, msg, timeout, time.monotonic(), dest_name=f"broker-{broker_id}")
        deadline = time.monotonic() + timeout + 0.05
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            answer: Response | Expired | None = None
            for item in self.transport.poll(left, time.monotonic):
                if isinstance(item, Response | Expired) and item.request_id == rid:
                    answer = item
                elif isinstance(item, Response | Expired) and item.request_id in self._pending:
                    self._stash.append(item)  # a pipelined produce's outcome: `completions` owns it
            if answer is not None:  # after the whole batch: an outcome behind it must not be lost
                return answer.msg if isinstance(answer, Response) else None

    def refresh_metadata(self, topics: list[str] | None = None) -> MetadataResponse | None:
        """Ask brokers in turn; keep the answer with the newest metadata."""
        return self.take_metadata([self.request(broker_id, MetadataRequest(topics),
                                                timeout=min(1.0, self.request_timeout))
                                   for broker_id in list(self.brokers)])

    def leader_of(self, topic: str, partition: int) -> int:
        """The partition's leader as last known, -1 when none is known or it cannot be reached."""
        pm = self.leaders.get((topic, partition))
        if pm is None or pm.leader < 0:
            self.refresh_metadata()
        return self.known_leader(topic, partition)

    # ---------------------------------------------------------------- produce / fetch
    def produce(self, topic: str, partition: int, values: list[str], acks: str = "all",
                timeout: float | None = None) -> ProduceResult:
        """One produce attempt to the current leader (R20); the caller decides on retries."""
        leader = self.leader_of(topic, partition)
        if leader < 0:
            return ProduceResult(Errors.NOT_LEADER_OR_FOLLOWER, leader=leader)
        timeout = self.request_timeout if timeout is None else timeout
        req = self._produce_request(topic, partition, values, acks, timeout)
        if not req.expects_response:
            self.transport.request(self.brokers[leader], req, timeout, time.monotonic(), dest_name=f"broker-{leader}")
            return ProduceResult(Errors.NONE, leader=leader, appended=True)
        return self._produce_result(topic, partition, leader, self.request(leader, req, timeout + 0.5))

    def start_produce(self, topic: str, partition: int, values: list[str], acks: str = "all",
                      timeout: float | None = None, tag: object = None) -> PendingProduce | ProduceResult:
        """Send one produce attempt without waiting (R20): its outcome comes out of
        `completions`. A result instead when there is nothing to wait for: no known leader,
        or acks=0."""
        leader = self.leader_of(topic, partition)
        if leader < 0:
            return ProduceResult(Errors.NOT_LEADER_OR_FOLLOWER, leader=leader)
        timeout = self.request_timeout if timeout is None else timeout
        req = self._produce_request(topic, partition, values, acks, timeout)
        rid = self.transport.request(self.brokers[leader], req, timeout + 0.5, time.monotonic(),
                                     dest_name=f"broker-{leader}")
        if not req.expects_response:
            return ProduceResult(Errors.NONE, leader=leader, appended=True)
        pending = PendingProduce(topic, partition, values, leader, rid, tag)
        self._pending[rid] = pending
        return pending

    def completions(self, timeout: float) -> list[tuple[PendingProduce, ProduceResult]]:
        """Outcomes of started produces, waiting up to `timeout` s for the first one; a produce
        whose answer did not come in time completes as a timeout (outcome unknown)."""
        items, self._stash = self._stash, []
        if not items and self._pending:
            items = self.transport.poll(timeout, time.monotonic)
        done = []
        for item in items:
            pending = self._pending.pop(item.request_id, None) if isinstance(item, Response | Expired) else None
            if pending is not None:
                resp = item.msg if isinstance(item, Response) else None
                done.append((pending, self._produce_result(pending.topic, pending.partition, pending.leader, resp)))
        return done

    @property
    def produces_in_flight(self) -> int:
        return len(self._pending)

    def fetch(self, topic: str, partition: int, offset: int, max_wait: float = 0.1,
              max_bytes: int = 1 << 20) -> FetchResult:
        """Read committed records from the leader (R21): only below its HWM."""
        leader = self.leader_of(topic, partition)
        if leader < 0:
            return FetchResult(Errors.NOT_LEADER_OR_FOLLOWER, leader=leader)
        req = self._fetch_request(topic, partition, offset, max_wait, max_bytes)
        return self._fetch_result(topic, partition, offset, leader,
                                  self.request(leader, req, max_wait + self.request_timeout))

    def close(self) -> None:
        self.transport.close()
