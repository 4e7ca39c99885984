"""One broker's protocol state: its lifecycle with the controller and its partition replicas.

This is the pure heart of a broker process: `broker/node.py` feeds it requests, responses,
timeouts and ticks and carries out the `Outputs` it returns. It owns
- registration, heartbeats and controlled shutdown towards the controller (R23, R24, R37);
- the broker's copy of the metadata log, applied in order to a `MetadataImage` (R3, R22);
- the partition replicas and the follower fetchers (R7-R21, in `partition.py`/`fetcher.py`);
- Kafka's "purgatory": fetches parked until there is something to return (long polling).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from broker.common.errors import Errors
from broker.common.names import node_name
from broker.protocol.epochs import EpochHistory
from broker.protocol.fetcher import FetcherManager
from broker.protocol.messages import (
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    ErrorResponse,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    GetReplicaLogInfoRequest,
    GetReplicaLogInfoResponse,
    MetadataFetchRequest,
    MetadataFetchResponse,
    MetadataRequest,
    ProduceRequest,
    ProduceResponse,
)
from broker.protocol.metadata_image import MetadataImage, build_metadata_response
from broker.protocol.outputs import (
    CleanShutdown,
    DeletePartition,
    Outputs,
    PersistMetadata,
    PersistMetadataSnapshot,
    Reply,
    Send,
)
from broker.protocol.partition import Partition, PartitionConfig, ReadSpec
from broker.protocol.records import (
    DIGEST_INTERVAL,
    BadRecord,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    chain_digest,
    from_dict,
)
from broker.protocol.settings import ProtocolSettings, Timeouts

#: the destination the pure pieces give a controller request; `_route` names the controller
CONTROLLER = "controller"
#: correlations of the requests that go to the active controller
_CONTROLLER_REQUESTS = frozenset({"register", "heartbeat", "metadata", "alter-partition"})
#: looked up once for the fetch path: an attribute of an Enum class goes through its
#: metaclass's `__getattr__` hook on every lookup (Python 3.11)
_NONE = Errors.NONE


@dataclass(frozen=True)
class BrokerConfig:
    broker_id: int
    rack: str | None
    incarnation_id: str
    timeouts: Timeouts = Timeouts()
    protocol: ProtocolSettings = ProtocolSettings()
    controller_ids: tuple[int, ...] = (1,)  # the controller quorum's voters (R22)
    endpoint: str = ""  # where this broker takes requests, registered with it


@dataclass
class LocalReplica:
    """What the broker's disk holds for one partition at start: the recovered log."""
    log_end_offset: int
    high_watermark: int
    epochs: EpochHistory
    log_start_offset: int = 0


@dataclass
class PendingFetch:
    """A fetch response whose record bytes the runtime still has to read from the logs (a
    fetch with nothing to read, most of a steady term's, is answered with its `FetchResponse`
    as it is: there is nothing to fill in)."""
    response: FetchResponse
    reads: list[ReadSpec | None]


@dataclass
class _Parked:
    ctx: Any
    request: FetchRequest
    deadline: float
    #: a follower's fetch, which waits for a leader's LEO to move; else a consumer's, for its HWM
    follower: bool
    #: per partition: its key, and the offset whose move completes the fetch as told when
    #: parked (the log end offset for a follower, the high watermark for a consumer)
    seen: list[tuple[tuple[str, int], int]] = field(default_factory=list)


class BrokerState:
    """The broker's protocol state machine (see module docstring)."""

    def __init__(self, config: BrokerConfig, local: dict[tuple[str, int], LocalReplica],
                 previous_broker_epoch: int,
                 metadata_records: list[tuple[int, dict]] | None = None,
                 metadata_snapshot: dict | None = None) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.image = MetadataImage()
        self.broker_epoch = -1
        self.previous_broker_epoch = previous_broker_epoch
        self.fenced = True
        self.state = "registering"  # registering | running | shutting-down | stopped
        self.want_shutdown = False
        self.local = dict(local)
        self.partitions: dict[tuple[str, int], Partition] = {}
        t = config.timeouts
        self.fetchers = FetcherManager(self.broker_id, backoff=t.fetch_backoff,
                                       request_timeout_ms=self._ms(t.fetch_request_timeout))
        #: a follower fetch's long-poll wait, in the request's milliseconds (the timeouts are
        #: frozen): worked out once, not on every fetch answer and tick that fetches again
        self._fetch_max_wait_ms = self._ms(t.fetch_max_wait)
        #: a heartbeat's timeout (short enough that a broker finds a new active controller
        #: within its session), a metadata fetch's long-poll wait (a heartbeat interval) and
        #: its timeout, in milliseconds: worked out once, as the fetch's wait
        self._heartbeat_timeout_ms = self._ms(max(t.heartbeat_interval, t.session_timeout / 3))
        self._metadata_wait_ms = self._ms(t.heartbeat_interval)
        self._metadata_timeout_ms = self._ms(t.heartbeat_interval + t.controller_request_timeout)
        self.parked: list[_Parked] = []
        #: the first of the partitions' `next_tick_at`, kept while each keeps its own (None: to be
        #: worked out): every call that may reset a partition's kept time resets this one too.
        #: The node asks after every input, and most leave every partition's time as it was
        #: (a follower's fetch at the LEO, a consumer's fetch, a heartbeat's answer)
        self._partitions_due: float | None = None
        self._registration_in_flight = False
        self._heartbeat_in_flight = False
        self._metadata_fetch_in_flight = False
        #: the number of the metadata fetch sent last (its correlation's): only its answer ends
        #: the fetch in flight, not that of one abandoned with its controller
        self._metadata_fetch_sent = 0
        self._next_heartbeat = 0.0
        self._next_registration = 0.0
        self.malformed_metadata = 0
        #: False until the first metadata fetch reached the controller's committed end: a
        #: restarted broker must not act on its stale copy of the metadata log.
        self.caught_up = False
        self._controller_index = 0
        self._metadata_digest = 0  # I8: the digest of the metadata log applied so far
        if metadata_snapshot is not None:
            self._load_snapshot(metadata_snapshot)
        for offset, rec in metadata_records or []:
            if offset <= self.image.offset:
                continue
            self._apply_record(offset, rec)
            self._metadata_digest = chain_digest(self._metadata_digest, rec)
        self.fetchers.update_brokers(self._broker_epochs())
        #: the topic id each held log was made for (`MetadataImage.topic_ids`): a log on disk
        #: belongs to the topic its broker's stored image names (a replica is made from the
        #: image, and a deletion deletes the logs before its record is stored); None unknown
        self._replica_topic_ids: dict[tuple[str, int], int | None] = {
            key: self.image.topic_ids.get(key[0]) for key in self.local}

    # ------------------------------------------------------------------ the active controller
    @property
    def controller_id(self) -> int:
        """The controller this broker believes active: its controller requests go there."""
        return self.config.controller_ids[self._controller_index]

    def _route(self, out: Outputs) -> Outputs:
        """Address every controller request to the controller believed active, and note in its
        correlation which one that was (so only its failure moves the belief on)."""
        for m in out.messages:
            if isinstance(m, Send) and m.destination == CONTROLLER:
                m.destination = node_name("controller", self.controller_id)
                m.correlation = (*m.correlation, self.controller_id)
        return out

    def _controller_failed(self, correlation: tuple, msg: Any) -> bool:
        """A controller request timed out or was refused by a controller that is not active:
        try the leader it named, else the next voter; whether the belief moved."""
        if correlation[-1] != self.controller_id:
            return False  # an answer from a controller we no longer believe in
        hint = msg.leader_id if isinstance(msg, ErrorResponse) else -1
        ids = self.config.controller_ids
        before = self._controller_index
        self._controller_index = ids.index(hint) if hint in ids and hint != self.controller_id \
            else (self._controller_index + 1) % len(ids)
        return self._controller_index != before

    def _abandon_controller_requests(self, now: float) -> Outputs:
        """The broker turned to another controller: the metadata fetch and the AlterPartitions
        in flight went to the one it turned from, which will not answer them, or only as a
        controller that is not active (one killed or cut off loses them, one that resigned
        drops its parked fetches), so each goes again to the controller now believed active
        at once, not when its own timeout ends (0.7 s for the fetch, 5 s for a proposal, during
        which the leader's ISR could not change). Kafka's broker does likewise: its Raft client
        forgets the fetch in flight to an old leader, and its broker-to-controller channel
        sends a request again to the new controller."""
        self._metadata_fetch_in_flight = False
        out = Outputs()
        for p in self.partitions.values():
            out.extend(p.controller_lost(now))
        if out:
            self._partitions_due = None
        return out

    # ------------------------------------------------------------------ time
    def tick(self, now: float) -> Outputs:
        return self._route(self._tick(now))

    def _tick(self, now: float) -> Outputs:
        out = Outputs()
        t = self.config.timeouts
        if self.state == "stopped":
            return out
        if self.broker_epoch < 0:
            if not self._registration_in_flight and now >= self._next_registration:
                self._registration_in_flight = True
                out.messages.append(Send(CONTROLLER, BrokerRegistrationRequest(
                    self.broker_id, self.config.incarnation_id, self.config.rack,
                    self.previous_broker_epoch, self.config.endpoint), correlation=("register",),
                    timeout_ms=self._ms(t.controller_request_timeout)))
            return out
        if not self._heartbeat_in_flight and now >= self._next_heartbeat:
            self._heartbeat_in_flight = True
            self._next_heartbeat = now + t.heartbeat_interval
            # (by position: want_fence False, as the default; the Send's correlation and timeout)
            out.messages.append(Send(CONTROLLER, BrokerHeartbeatRequest(
                self.broker_id, self.broker_epoch, self.image.offset, False, self.want_shutdown),
                ("heartbeat",), self._heartbeat_timeout_ms))
        if not self._metadata_fetch_in_flight:
            self._metadata_fetch_in_flight = True
            self._metadata_fetch_sent += 1
            # (by position: the wait; the Send's correlation and timeout: a keyword call of a
            # dataclass is the slow path on Python 3.11)
            out.messages.append(Send(CONTROLLER, MetadataFetchRequest(
                self.broker_id, self.image.offset + 1, self._metadata_wait_ms),
                ("metadata", self._metadata_fetch_sent), self._metadata_timeout_ms))
        # only what is due: a partition, the fetchers or a parked fetch ticked before its
        # `next_tick_at` has nothing to do (and what changes a parked fetch's answer is an
        # input, which completes it at once)
        for p in self.partitions.values():
            at = p.next_tick_due  # (kept since the last input, as `next_tick_at` reads it)
            if at is None:
                at = p.next_tick_at(now)
            if at <= now:
                self._partitions_due = None
                out.extend(p.tick(now))
        at = self.fetchers.next_tick_due  # (kept since the last change, as `next_tick_at` reads it)
        if at is None:
            at = self.fetchers.next_tick_at()
        if at <= now:
            out.messages.extend(self.fetchers.build_requests(now, self._fetch_max_wait_ms))
        for parked in self.parked:
            if parked.deadline <= now:
                self._complete_parked(now, out, False, False)  # (a tick moves neither LEO nor HWM)
                break
        return out

    def next_tick_at(self, now: float) -> float:
        """When `tick` next has something to do; a tick before then changes nothing, so a
        runtime need not tick earlier (-inf: at the next tick, inf: not until an input).
        What it waits for: a registration to retry or a heartbeat to send (R23, R24), a
        metadata fetch to send once the last one is answered (R3), and the partitions', the
        fetchers' and the parked fetches' own times."""
        if self.state == "stopped":
            return math.inf
        if self.broker_epoch < 0:
            return math.inf if self._registration_in_flight else self._next_registration
        if not self._metadata_fetch_in_flight:
            return -math.inf
        due = math.inf if self._heartbeat_in_flight else self._next_heartbeat
        at = self._partitions_due
        if at is None:
            at = math.inf
            for p in self.partitions.values():  # (comparisons, not min(): see `_ms`)
                mine = p.next_tick_due
                if mine is None:
                    mine = p.next_tick_at(now)
                if mine < at:
                    at = mine
            self._partitions_due = at
        if at < due:
            due = at
        at = self.fetchers.next_tick_due
        if at is None:
            at = self.fetchers.next_tick_at()
        if at < due:
            due = at
        for parked in self.parked:  # what changes a parked fetch's answer completes it at once
            if parked.deadline < due:
                due = parked.deadline
        return due

    # ------------------------------------------------------------------ responses to our requests
    def on_response(self, correlation: tuple, msg: Any, now: float) -> Outputs:
        """`msg` is None when the request timed out or could not be sent."""
        turned = False
        if correlation[0] in _CONTROLLER_REQUESTS and (
                msg is None or isinstance(msg, ErrorResponse) and msg.error == Errors.NOT_CONTROLLER):
            turned = self._controller_failed(correlation, msg)
        out = self._on_response(correlation, msg, now)
        if turned:
            out.extend(self._abandon_controller_requests(now))
        return self._route(out)

    def _on_response(self, correlation: tuple, msg: Any, now: float) -> Outputs:
        kind = correlation[0]
        if kind == "register":
            return self._on_registration(msg, now)
        if kind == "heartbeat":
            return self._on_heartbeat(msg, now)
        if kind == "metadata":
            if correlation[1:2] == (self._metadata_fetch_sent,):
                self._metadata_fetch_in_flight = False
            # an answer to a fetch abandoned with its controller holds committed records all
            # the same, and is applied; it does not end the fetch in flight
            return self._on_metadata(msg, now)
        if kind == "fetch":
            self._partitions_due = None  # (its partitions take their results)
            out = self.fetchers.on_response(correlation, msg if isinstance(msg, FetchResponse) else None, now)
            # the next fetch leaves now, as Kafka's fetcher thread loops, not on the next tick: an
            # acks=all write waits for the follower fetch that follows the one that carried it
            out.messages.extend(self.fetchers.build_requests(now, self._fetch_max_wait_ms))
            return self._complete_parked(now, out, False, False)  # (nor does a fetch answer)
        if kind == "alter-partition":
            p = self.partitions.get((correlation[1], correlation[2]))
            if p is None:
                return Outputs()
            resp = msg if isinstance(msg, AlterPartitionResponse) else None
            self._partitions_due = None
            return self._complete_parked(now, p.on_alter_partition_response(resp, now, correlation[3]))
        return Outputs()

    def _on_registration(self, msg: Any, now: float) -> Outputs:
        self._registration_in_flight = False
        out = Outputs()
        if isinstance(msg, BrokerRegistrationResponse) and msg.error == _NONE:
            self.broker_epoch = msg.broker_epoch
            self.state = "running"
            self.fetchers.set_broker_epoch(msg.broker_epoch)
            self._partitions_due = None
            for p in self.partitions.values():
                p.set_local_broker_epoch(msg.broker_epoch)
            self._next_heartbeat = now
            out.event("broker-registered", broker_epoch=msg.broker_epoch,
                      previous_broker_epoch=self.previous_broker_epoch)
        else:
            # DUPLICATE_BROKER_REGISTRATION while our old session lives (R23), or no answer.
            self._next_registration = now + self.config.timeouts.heartbeat_interval
        return out

    def _on_heartbeat(self, msg: Any, now: float) -> Outputs:
        self._heartbeat_in_flight = False
        out = Outputs()
        if not isinstance(msg, BrokerHeartbeatResponse):
            return out
        if msg.error in (Errors.STALE_BROKER_EPOCH, Errors.BROKER_ID_NOT_REGISTERED):
            # The controller no longer knows this epoch: register again (new broker epoch).
            self.broker_epoch = -1
            self.previous_broker_epoch = -1
            self.fenced = True
            return out
        if msg.error != _NONE:
            return out
        if msg.is_fenced != self.fenced:
            self.fenced = msg.is_fenced
            out.event("broker-fenced" if msg.is_fenced else "broker-unfenced",
                      broker_epoch=self.broker_epoch)
        if msg.should_shut_down and self.want_shutdown and self.state != "stopped":
            out.extend(self._finish_controlled_shutdown())
        return out

    def _finish_controlled_shutdown(self) -> Outputs:
        """R28, R37: the controller let us go: make everything durable, leave the
        clean-shutdown marker with our broker epoch, and stop."""
        self.state = "stopped"
        out = Outputs(stop=0)
        out.disk.append(CleanShutdown(self.broker_epoch,
                                      {key: p.high_watermark for key, p in sorted(self.partitions.items())}))
        out.event("shutdown-approved", broker_epoch=self.broker_epoch)
        out.event("clean-shutdown", broker_epoch=self.broker_epoch)
        return out

    def _on_metadata(self, msg: Any, now: float) -> Outputs:
        out = Outputs()
        if not isinstance(msg, MetadataFetchResponse) or msg.error != _NONE:
            return out
        changed: list[tuple[str, int]] = []
        brokers_changed = False
        heard_from = self.image.offset + 1
        if msg.snapshot is not None and self._snapshot_end(msg.snapshot) - 1 > self.image.offset:
            if not self._load_snapshot(msg.snapshot):
                return out
            # replicas of topics deleted in the compacted log go first, as after a RemoveTopicRecord,
            # also those of a name deleted and made again there: another topic, by its id
            out.extend(self._delete_replicas({k for k in self._held_keys() if self._deleted_topic(k)}))
            out.disk.append(PersistMetadataSnapshot(msg.snapshot))
            changed, brokers_changed = list(self.image.partitions), True
        fresh: list[tuple[int, dict]] = []
        for i, raw in enumerate(msg.records):
            offset = msg.base_offset + i
            if offset <= self.image.offset:
                continue
            fresh.append((offset, raw))
            rec = self._apply_record(offset, raw)
            self._metadata_digest = chain_digest(self._metadata_digest, raw)
            if (offset + 1) % DIGEST_INTERVAL == 0 and offset != msg.base_offset + len(msg.records) - 1:
                out.event("metadata-applied", offset=offset, digest=self._metadata_digest)
            if isinstance(rec, PartitionRecord):
                changed.append((rec.topic, rec.partition))
            elif isinstance(rec, RemoveTopicRecord):
                # at once, not with the batch's result: a topic created again under the same name
                # later in the batch starts from new, empty replicas
                changed = [key for key in changed if key[0] != rec.name]
                out.extend(self._delete_replicas({k for k in self._held_keys() if k[0] == rec.name}))
            elif rec is not None:
                brokers_changed = True
        # the logs of deleted replicas are gone before the records that deleted them are kept
        if fresh:
            out.disk.append(PersistMetadata(fresh))
        heard_to = fresh[-1][0] if fresh else self.image.offset
        if heard_to >= heard_from:
            # when this broker heard of every record it applied (`from` marks such an event: the
            # others, every DIGEST_INTERVAL records within a batch, are for I8 alone), which is
            # when a change the controller committed out of its reach took effect (availability)
            out.event("metadata-applied", offset=heard_to, digest=self._metadata_digest,
                      **{"from": heard_from})
        # R3: act on the materialised result once per batch, not on each delta.
        targets = set(changed)
        if brokers_changed:
            # R18 needs current broker epochs and fencing for every replica this broker leads.
            epochs, eligible = self._broker_epochs(), self._eligible()
            self._partitions_due = None
            for p in self.partitions.values():
                p.update_brokers(epochs, eligible)
            self.fetchers.update_brokers(epochs)
        if not self.caught_up:
            if self.image.offset + 1 < msg.high_watermark:
                return out
            self.caught_up = True
            out.event("metadata-caught-up", offset=self.image.offset)
            targets = {k for k, r in self.image.partitions.items() if self.broker_id in r.replicas}
        for key in sorted(targets):
            out.extend(self._reconcile(key, now))
        return self._complete_parked(now, out)

    @staticmethod
    def _snapshot_end(snapshot: dict) -> int:
        end = snapshot.get("end")
        return end if isinstance(end, int) else -1

    def _load_snapshot(self, snapshot: dict) -> bool:
        """Start the image over from a metadata snapshot (the controller compacted the log
        below what this broker had); False, changing nothing, for a malformed one."""
        try:
            image = MetadataImage.from_state(snapshot.get("image"))
            digest = int(snapshot.get("digest"))
        except (BadRecord, TypeError, ValueError):
            self.malformed_metadata += 1
            return False
        if image.offset != self._snapshot_end(snapshot) - 1:
            self.malformed_metadata += 1
            return False
        self.image, self._metadata_digest = image, digest
        return True

    def _apply_record(self, offset: int, raw: Any) -> MetadataRecord | None:
        """The record, once applied to the image; None for a malformed one (counted) or one
        the image refused, which changed nothing to act on."""
        try:
            rec = from_dict(raw)
        except BadRecord:
            self.malformed_metadata += 1
            return None
        return rec if self.image.apply(offset, rec) else None

    def _held_keys(self) -> set[tuple[str, int]]:
        """Every partition this broker holds a log of: its replicas, and what recovery found on
        disk that no replica was made of yet (before the metadata caught up)."""
        return {*self.partitions, *self.local}

    def _deleted_topic(self, key: tuple[str, int]) -> bool:
        """The topic this broker holds the partition `key` of is no longer in the image: its
        name is gone, or now names a topic of another id (R40)."""
        made_for = self._replica_topic_ids.get(key)
        return key[0] not in self.image.topics or (made_for is not None and made_for != self.image.topic_ids[key[0]])

    def _delete_replicas(self, keys: set[tuple[str, int]]) -> Outputs:
        """R40: the topic of these replicas was deleted. Each closes (held produces fail as on a
        step-down), is no longer fetched and deletes its log, also one recovery found on disk
        that no replica was made of yet (a broker that restarted while the topic was deleted)."""
        out = Outputs()
        self._partitions_due = None
        for key in sorted(keys):
            p = self.partitions.pop(key, None)
            if p is not None:
                out.extend(p.close())
                self.fetchers.remove(*key)
            self.local.pop(key, None)
            self._replica_topic_ids.pop(key, None)
            out.disk.append(DeletePartition(*key))
            out.event("replica-deleted", topic=key[0], partition=key[1], reason="topic-deleted")
        return out

    def _reconcile(self, key: tuple[str, int], now: float) -> Outputs:
        """Bring one local replica in line with the image (R3, R14)."""
        self._partitions_due = None
        rec = self.image.partitions.get(key)
        p = self.partitions.get(key)
        if rec is None:
            return Outputs()
        if p is None:
            if self.broker_id not in rec.replicas:
                return Outputs()
            p = self._create_partition(key)
        out = p.on_partition_record(rec, self._broker_epochs(), self._eligible(), now)
        if p.role == "follower" and p.leader_id >= 0:
            self.fetchers.assign(p)
        else:
            self.fetchers.remove(*key)
        if self.broker_id not in rec.replicas:  # R35: a reassignment moved the partition away
            del self.partitions[key]
            self._replica_topic_ids.pop(key, None)
            out.disk.append(DeletePartition(*key))
            out.event("replica-deleted", topic=key[0], partition=key[1], leader_epoch=rec.leader_epoch,
                      replicas=list(rec.replicas), reason="reassigned")
        return out

    def _create_partition(self, key: tuple[str, int]) -> Partition:
        topic, index = key
        local = self.local.pop(key, None) or LocalReplica(0, 0, EpochHistory())
        t = self.image.topics.get(topic)
        cfg = PartitionConfig.from_settings(t.min_insync_replicas if t else 1,
                                            self.config.timeouts, self.config.protocol)
        topic_id = self.image.topic_ids.get(topic)
        p = Partition(topic, index, self.broker_id, cfg, local.log_end_offset,
                      local.high_watermark, local.epochs, local.log_start_offset,
                      -1 if topic_id is None else topic_id)
        if self.broker_epoch >= 0:
            p.set_local_broker_epoch(self.broker_epoch)
        self.partitions[key] = p
        self._replica_topic_ids[key] = topic_id
        return p

    def _broker_epochs(self) -> dict[int, int]:
        return {b.broker_id: b.broker_epoch for b in self.image.brokers.values()}

    def _eligible(self) -> set[int]:
        return {b.broker_id for b in self.image.brokers.values()
                if not b.fenced and not b.in_controlled_shutdown}

    # ------------------------------------------------------------------ requests from others
    def on_request(self, ctx: Any, msg: Any, now: float) -> Outputs:
        return self._route(self._on_request(ctx, msg, now))

    def _on_request(self, ctx: Any, msg: Any, now: float) -> Outputs:
        if isinstance(msg, ProduceRequest):
            return self._on_produce(ctx, msg, now)
        if isinstance(msg, FetchRequest):
            return self._on_fetch(ctx, msg, now)
        if isinstance(msg, MetadataRequest):
            out = Outputs()
            out.messages.append(Reply(ctx, build_metadata_response(self.image, msg.topics, -1)))
            return out
        if isinstance(msg, GetReplicaLogInfoRequest):
            out = Outputs()
            out.messages.append(Reply(ctx, self._log_info(msg)))
            return out
        out = Outputs()
        out.messages.append(Reply(ctx, ErrorResponse(Errors.INVALID_REQUEST,
                                                     f"{type(msg).__name__} is not served by a broker")))
        return out

    def _log_info(self, req: GetReplicaLogInfoRequest) -> GetReplicaLogInfoResponse:
        """R32: this replica's last written epoch and LEO, from the live replica or, when the
        metadata made none, from what recovery found on disk (nothing: an empty log). Not
        before the metadata caught up, as a KRaft broker serves no request until then: the log
        may still change as it applies the metadata (a tester's sim seed: a restarted broker
        answered LEO 805, then truncated to its HWM 5 as a follower, `truncation:
        high-watermark`, and was elected on the 805)."""
        key = (req.topic, req.partition)
        if self.broker_epoch < 0 or not self.caught_up:
            return GetReplicaLogInfoResponse(req.topic, req.partition, Errors.BROKER_NOT_AVAILABLE,
                                             broker_id=self.broker_id)
        p = self.partitions.get(key)
        local = self.local.get(key)
        if p is not None:
            epochs, leo = p.epochs, p.log_end_offset
        elif local is not None:
            epochs, leo = local.epochs, local.log_end_offset
        else:
            epochs, leo = EpochHistory(), 0
        return GetReplicaLogInfoResponse(req.topic, req.partition, _NONE, broker_id=self.broker_id,
                                         broker_epoch=self.broker_epoch,
                                         last_written_epoch=epochs.last_written_epoch(leo), log_end_offset=leo)

    def _on_produce(self, ctx: Any, req: ProduceRequest, now: float) -> Outputs:
        p = self.partitions.get((req.topic, req.partition))
        if p is None or self.state not in ("running", "shutting-down") or not self.caught_up:
            out = Outputs()
            known = (req.topic, req.partition) in self.image.partitions
            err = Errors.NOT_LEADER_OR_FOLLOWER if known else Errors.UNKNOWN_TOPIC_OR_PARTITION
            if req.expects_response:
                out.messages.append(Reply(ctx, ProduceResponse(req.topic, req.partition, err)))
            return out
        self._partitions_due = None
        return self._complete_parked(now, p.on_produce(req, ctx, now))

    def _on_fetch(self, ctx: Any, req: FetchRequest, now: float) -> Outputs:
        out = Outputs()
        results, reads, interesting = self._read_fetch(req, now, out, req.max_wait_ms <= 0)
        follower = req.replica_id >= 0  # (a fetch moves no LEO; only a follower's may move an HWM)
        if interesting or req.max_wait_ms <= 0:
            # (records to read: a PendingFetch the runtime fills in; none: the response as it is)
            response = FetchResponse(_NONE, results)
            out.messages.append(Reply(ctx, response if reads is None else PendingFetch(response, reads)))
            # A follower fetch can advance the HWM: other parked fetches may now complete.
            return self._complete_parked(now, out, False, follower)
        # parked: every partition is led here and answered without error (else the fetch would
        # be worth answering), so each result would have said the leader's LEO and HWM
        partitions = self.partitions
        seen = []
        for fp in req.partitions:
            key = (fp.topic, fp.partition)
            p = partitions[key]
            seen.append((key, p.log_end_offset if follower else p.high_watermark))
        self.parked.append(_Parked(ctx, req, now + req.max_wait_ms / 1000.0, follower, seen))
        return self._complete_parked(now, out, False, follower)

    def _read_fetch(self, req: FetchRequest, now: float, out: Outputs, answer: bool
                    ) -> tuple[list[FetchPartitionResult], list[ReadSpec | None] | None, bool]:
        """Each partition's result and what to read for it, and whether the fetch is worth
        answering now; the reads are None when there is nothing to read for any partition.

        A follower's fetch at the LEO has nothing to send: its result (`fetch_result`) is made
        at once when the fetch is answered whatever it finds (`answer`: a parked fetch's look,
        a fetch that may not wait), else only once the fetch turns out worth answering, after
        the look at every partition (which changes no LEO, nor the HWM of a partition whose
        follower fetched at its LEO). A fetch that is parked keeps none: its results are left
        None, made for nothing (1,200 follower fetches a quickstart seed)."""
        results: list = []
        reads: list[ReadSpec | None] = []
        interesting = to_read = False
        at_leo: list[Partition] = []  # the partitions whose result is not made yet, in order
        replica_id, partitions = req.replica_id, self.partitions
        for fp in req.partitions:
            p = partitions.get((fp.topic, fp.partition))
            if p is None:
                known = (fp.topic, fp.partition) in self.image.partitions
                err = Errors.NOT_LEADER_OR_FOLLOWER if known else Errors.UNKNOWN_TOPIC_OR_PARTITION
                results.append(FetchPartitionResult(fp.topic, fp.partition, err))
                reads.append(None)
                interesting = True
                continue
            if replica_id >= 0:
                result, read = p.follower_fetch(replica_id, req.broker_epoch, fp, now, out)
                if p.next_tick_due is None:  # (most keep it: at the LEO, in a full ISR)
                    self._partitions_due = None
                if result is None:  # at the LEO: nothing to send, no error
                    if answer:
                        result = p.fetch_result()
                    else:
                        at_leo.append(p)
                        results.append(None)
                        reads.append(None)
                        continue
            else:
                result, read = p.on_consumer_fetch(fp)
            results.append(result)
            reads.append(read)
            if read is not None:
                interesting = to_read = True
            elif result.error is not _NONE or result.diverging_epoch is not None:
                interesting = True
        if at_leo and interesting:  # answered after all: the results left out, in order
            made = iter(at_leo)
            results = [next(made).fetch_result() if r is None else r for r in results]
        return results, reads if to_read else None, interesting

    def _complete_parked(self, now: float, out: Outputs, leo_moved: bool = True, hwm_moved: bool = True) -> Outputs:
        """Answer parked fetches that now have something for their fetcher (see `_changed_since`),
        an error, or timed out; the answers go into `out` (after what it holds), returned.

        `leo_moved`, `hwm_moved` (by position on the fetch path: a keyword call is the slow path
        of a call on Python 3.11): whether the input may have moved a LEO, an HWM of a replica
        this broker leads (a role or the partitions held change only with metadata, which
        passes both). A parked fetch holds only partitions led here, each as it was when last
        looked at, since every input that changes a leader ends here: one whose offset cannot
        have moved (a follower's waits on the LEO, a consumer's on the HWM) is answered only
        at its wait's end, without a look. A fetch answer or a tick moves neither (a fetch
        answer changes only follower replicas), a fetch no LEO: they are a quickstart seed's
        1,600, 300 and 2,000 inputs, most with two fetches parked."""
        if not self.parked:
            return out
        still: list[_Parked] = []
        for parked in self.parked:
            looks = leo_moved if parked.follower else hwm_moved
            if now >= parked.deadline or looks and self._changed_since(parked):
                results, reads, _ = self._read_fetch(parked.request, now, out, True)
                response = FetchResponse(_NONE, results)
                out.messages.append(Reply(parked.ctx, response if reads is None else PendingFetch(response, reads)))
            else:
                still.append(parked)
        self.parked = still
        return out

    def _changed_since(self, parked: _Parked) -> bool:
        """Kafka's delayed fetch: a follower's fetch is worth answering once the leader's LEO
        moved (records to copy), a consumer's once the HWM moved (records it may read). A
        follower learns a new HWM with its next records or at its long poll's end (R12); an
        answer for the HWM alone would double the fetches every acks=all write costs."""
        follower, partitions = parked.follower, self.partitions
        for key, offset in parked.seen:
            p = partitions.get(key)
            if p is None or p.role != "leader" or offset != (p.log_end_offset if follower else p.high_watermark):
                return True
        return False

    # ------------------------------------------------------------------ lifecycle
    def begin_controlled_shutdown(self, now: float) -> Outputs:
        """R37: ask the controller, in the next heartbeats, to move our leaderships away."""
        self.want_shutdown = True
        self.state = "shutting-down" if self.state != "stopped" else self.state
        self._next_heartbeat = 0.0
        return self.tick(now)

    def describe(self) -> dict:
        return {
            "broker_id": self.broker_id,
            "broker_epoch": self.broker_epoch,
            "state": self.state,
            "fenced": self.fenced,
            "metadata_offset": self.image.offset,
            "partitions": [{**p.describe(), "topic_id": self._replica_topic_ids.get(key)}
                           for key, p in sorted(self.partitions.items())],
        }

    @staticmethod
    def _ms(seconds: float) -> int:
        ms = int(seconds * 1000)
        return ms if ms > 1 else 1  # (not max(), which parses keyword arguments on Python 3.11)
