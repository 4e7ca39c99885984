"""The follower side of replication: fetch sessions grouped by leader broker.

Like Kafka's `ReplicaFetcherManager` with one `ReplicaFetcherThread` per source broker
(seed 002 section 2.2.1): every follower partition of this broker is fetched from its
leader's broker, one FetchRequest carrying all partitions led there, and at most one request
in flight per leader broker. Pure: the runtime sends what `build_requests` returns and hands
back each response, or None on a timeout or transport error.
"""
from __future__ import annotations

import math
from bisect import insort

from broker.common.errors import Errors
from broker.protocol.messages import FetchRequest, FetchResponse
from broker.protocol.outputs import Outputs, Send
from broker.protocol.partition import Partition

PartitionKey = tuple[str, int]
#: looked up once: an attribute of an Enum class goes through its metaclass's `__getattr__`
#: hook on every lookup (Python 3.11), and every fetch answer is checked
_NONE = Errors.NONE


class FetcherManager:
    """Which follower partitions to fetch, from whom, and when.

    `backoff`: seconds to wait after a failed request (whole leader) or a partition-level
    error (that partition only, as Kafka delays a failed partition and keeps fetching the
    rest). `request_timeout_ms` is added to the long-poll wait for each request's timeout.
    """

    def __init__(self, local_broker_id: int, backoff: float = 0.1,
                 request_timeout_ms: int = 2000) -> None:
        self.local_broker_id = local_broker_id
        self.backoff = backoff
        self.request_timeout_ms = request_timeout_ms
        self._broker_epoch = -1
        self._partitions: dict[PartitionKey, Partition] = {}
        #: leader broker -> {partition: the leader epoch its fetch was sent in}
        self._in_flight: dict[int, dict[PartitionKey, int]] = {}
        self._leader_backoff_until: dict[int, float] = {}
        self._partition_backoff_until: dict[PartitionKey, float] = {}
        #: the keys of `_partitions` in order, for sessions that list their partitions sorted
        self._order: list[PartitionKey] = []
        #: `leaders()` and `next_tick_at()`, kept until a call here changes them (None: to be
        #: worked out): a partition's leader moves only with a metadata record, after which the
        #: broker calls `assign` or `remove`, and the broker asks after every input (reading
        #: `next_tick_due` itself, as it reads a partition's, and calling only when it is None)
        self._sessions: dict[int, list[PartitionKey]] | None = None
        self.next_tick_due: float | None = None

    def set_broker_epoch(self, epoch: int) -> None:
        """R7: every fetch carries the broker epoch; none is sent before registration."""
        self._broker_epoch = epoch
        self.next_tick_due = None

    def assign(self, partition: Partition) -> None:
        """Fetch for `partition` (after it became a follower), from the leader it names now:
        called again after every metadata record that leaves it a follower, whose leader may
        have moved."""
        key = (partition.topic, partition.partition)
        if key not in self._partitions:
            insort(self._order, key)
        self._partitions[key] = partition
        self._partition_backoff_until.pop(key, None)
        self._sessions = self.next_tick_due = None

    def remove(self, topic: str, partition: int) -> None:
        """Stop fetching (the replica became leader or left the replica set, 002 2.2.3).

        A fetch in flight no longer speaks for the replica: its answer is ignored, also once a
        replica made again under the key (a topic deleted and created again, a replica moved
        away and back) is fetched for in the same leader epoch, which the answer's check alone
        cannot tell from the one it was sent for (Kafka matches an answer to the fetch state it
        was sent for: the topic id and the fetch offset)."""
        key = (topic, partition)
        for sent in self._in_flight.values():
            sent.pop(key, None)
        if self._partitions.pop(key, None) is not None:
            self._order.remove(key)
        self._partition_backoff_until.pop(key, None)
        self._sessions = self.next_tick_due = None

    def leaders(self) -> dict[int, list[PartitionKey]]:
        """Fetch sessions: leader broker -> the partitions fetched from it (a copy)."""
        return {leader_id: list(keys) for leader_id, keys in self._kept_sessions().items()}

    def _kept_sessions(self) -> dict[int, list[PartitionKey]]:
        """The sessions, grouped again only after `assign` or `remove`: `build_requests` runs
        after every fetch answer, when the partitions' leaders have not moved."""
        sessions = self._sessions
        if sessions is None:
            sessions = self._sessions = {}
            for key in self._order:
                p = self._partitions[key]
                if p.fetching:
                    sessions.setdefault(p.leader_id, []).append(key)
        return sessions

    def build_requests(self, now: float, max_wait_ms: int) -> list[Send]:
        """One FetchRequest per leader broker with nothing in flight and no backoff."""
        if self._broker_epoch < 0:
            return []
        sends = []
        for leader_id, keys in self._kept_sessions().items():
            if leader_id in self._in_flight or now < self._leader_backoff_until.get(leader_id, 0.0):
                continue
            fetches = []
            sent: dict[PartitionKey, int] = {}
            for key in keys:
                if now < self._partition_backoff_until.get(key, 0.0):
                    continue
                partition = self._partitions[key]
                fp = partition.fetch_partition()
                if fp is not None:
                    fetches.append(fp)
                    sent[key] = partition.leader_epoch
            if not fetches:
                continue
            self._in_flight[leader_id] = sent
            self.next_tick_due = None
            # (by position: replica_id, broker_epoch, max_wait_ms, min_bytes, partitions; and the
            # Send's correlation and timeout_ms: a keyword call of a dataclass is the slow path
            # of a call on Python 3.11, and a follower fetches after every answer)
            request = FetchRequest(self.local_broker_id, self._broker_epoch, max_wait_ms, 1, fetches)
            sends.append(Send(leader_id, request, ("fetch", leader_id), max_wait_ms + self.request_timeout_ms))
        return sends

    def next_tick_at(self) -> float:
        """When `build_requests` next has a request to send: the end of the backoffs of the
        first session with nothing in flight (-inf: at once, inf: not until an input). Kept
        until a call here changes the sessions, what is in flight or a backoff; the broker asks
        after every input, most of which do not reach the fetchers."""
        due = self.next_tick_due
        if due is None:
            due = self.next_tick_due = self._work_out_next_tick()
        return due

    def _work_out_next_tick(self) -> float:
        """`next_tick_at` from the partitions, what is in flight and the backoffs as they are."""
        due = math.inf
        if self._broker_epoch < 0:
            return due
        in_flight = self._in_flight
        for key, partition in self._partitions.items():
            leader_id = partition.leader_id  # (first: a fetch in flight settles it, as it mostly is)
            if leader_id not in in_flight and partition.fetching:
                at = max(self._leader_backoff_until.get(leader_id, -math.inf),
                         self._partition_backoff_until.get(key, -math.inf))
                if at < due:
                    due = at
        return due

    def in_flight(self, leader_id: int) -> bool:
        return leader_id in self._in_flight

    def on_response(self, leader_id: int, resp: FetchResponse | None, now: float) -> Outputs:
        """Dispatch each partition's result; None (timeout, transport error) or a
        request-level error backs off the whole leader broker.

        A result for a partition that moved to another leader, or to another leader epoch,
        since the request left is stale and ignored."""
        out = Outputs()
        sent = self._in_flight.pop(leader_id, None)
        if sent is None:
            return out
        self.next_tick_due = None
        if resp is None or resp.error != _NONE:
            self._leader_backoff_until[leader_id] = now + self.backoff
            return out
        for result in resp.partitions:
            key = (result.topic, result.partition)
            partition = self._partitions.get(key)
            if (partition is None or key not in sent or partition.leader_id != leader_id
                    or partition.leader_epoch != sent[key]):
                continue
            partition.on_fetch_result(result, now, out)
            if partition.needs_backoff:
                self._partition_backoff_until[key] = now + self.backoff
        return out
