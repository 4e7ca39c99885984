"""The follower side of replication: fetch sessions grouped by leader broker.

Like Kafka's `ReplicaFetcherManager` with one `ReplicaFetcherThread` per source broker
(seed 002 section 2.2.1): every follower partition of this broker is fetched from its
leader's broker, one FetchRequest carrying all partitions led there, and at most one request
in flight per leader broker. Pure: the runtime sends what `build_requests` returns and hands
back each response, or None on a timeout or transport error.

A fetch in flight whose answer could no longer change anything is abandoned, and the next one
to that broker leaves at once: when none of its partitions is still fetched from that broker
in the leader epoch it was sent in, or when that broker registered again (a new process,
which never got the request). Kafka gets the same from a fetcher thread shut down once idle
and from the connection that breaks when its broker dies; a ZeroMQ request to a dead process
only times out, two seconds later, and meanwhile the replicas that follow the restarted broker
fetched nothing (a new leader's first acks=all write waited for it: 0.65-0.8 s of a failover).
Each fetch's correlation carries its number, so a late answer to an abandoned one is ignored.
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
        #: leader broker -> (the fetch's correlation, that broker's broker epoch when it was sent,
        #: {partition: the leader epoch its fetch was sent in})
        self._in_flight: dict[int, tuple[tuple, int, dict[PartitionKey, int]]] = {}
        self._fetches_sent = 0
        #: every registered broker's broker epoch, from the metadata (`update_brokers`)
        self._leader_broker_epochs: dict[int, int] = {}
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
        for _, _, sent in self._in_flight.values():
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
            self._abandon_answerless()
        return sessions

    def _abandon_answerless(self) -> None:
        """Forget each fetch in flight none of whose partitions is still fetched from the broker
        it went to, in the leader epoch it was sent in: its answer would be ignored in full."""
        partitions = self._partitions
        for leader_id, (_, _, sent) in list(self._in_flight.items()):
            for key, leader_epoch in sent.items():
                p = partitions.get(key)
                if p is not None and p.fetching and p.leader_id == leader_id and p.leader_epoch == leader_epoch:
                    break
            else:
                del self._in_flight[leader_id]

    def update_brokers(self, broker_epochs: dict[int, int]) -> None:
        """A newer image of the brokers: a fetch in flight to a broker that registered again
        since (a new broker epoch: a new process) is forgotten, and the next leaves at once."""
        self._leader_broker_epochs = dict(broker_epochs)
        for leader_id, (_, sent_to_epoch, _) in list(self._in_flight.items()):
            if broker_epochs.get(leader_id, -1) != sent_to_epoch:
                del self._in_flight[leader_id]
                self.next_tick_due = None

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
            self._fetches_sent += 1
            correlation = ("fetch", leader_id, self._fetches_sent)
            self._in_flight[leader_id] = (correlation, self._leader_broker_epochs.get(leader_id, -1), sent)
            self.next_tick_due = None
            # (by position: replica_id, broker_epoch, max_wait_ms, min_bytes, partitions; and the
            # Send's correlation and timeout_ms: a keyword call of a dataclass is the slow path
            # of a call on Python 3.11, and a follower fetches after every answer)
            request = FetchRequest(self.local_broker_id, self._broker_epoch, max_wait_ms, 1, fetches)
            sends.append(Send(leader_id, request, correlation, max_wait_ms + self.request_timeout_ms))
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
        self._kept_sessions()  # (which abandons what a change since left without an answer to wait for)
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

    def on_response(self, correlation: tuple, resp: FetchResponse | None, now: float) -> Outputs:
        """Dispatch each partition's result of the fetch `correlation` names (the one its Send
        carried); None (timeout, transport error) or a request-level error backs off the whole
        leader broker. The answer to a fetch abandoned since is ignored.

        A result for a partition that moved to another leader, or to another leader epoch,
        since the request left is stale and ignored."""
        out = Outputs()
        leader_id = correlation[1] if len(correlation) == 3 else None
        flight = self._in_flight.get(leader_id)
        if flight is None or flight[0] != correlation:
            return out
        del self._in_flight[leader_id]
        sent = flight[2]
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
