"""The active controller's logic, Kafka's QuorumController + ReplicationControlManager (R22-R39).

Every decision is a metadata record. The controller applies each record it generates to its
own image at once (as QuorumController replays what it appends), so the next decision sees it,
and hands the records to the runtime in `AppendMetadata` (in `Outputs.disk`). Whatever depends
on those records being durable (replies to requests, events) is held until the runtime says,
with `on_committed`, that the log is committed past them: with the single-node log right after
the append, with a Raft quorum after the quorum commit. The log itself is the runtime's
business, so Raft can replace it without touching this module.

Unclean recovery (R32) and reassignment (R35) will enter as new request/timer handlers that
produce PartitionRecords through `partition_change`, like the handlers here.
"""
from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Any

from broker.common.errors import Errors
from broker.protocol import partition_change
from broker.protocol.heartbeats import BrokerHeartbeatManager
from broker.protocol.messages import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    AlterPartitionRequest,
    AlterPartitionResponse,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ErrorResponse,
    GetReplicaLogInfoResponse,
    MetadataResponse,
    NewTopic,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from broker.protocol.metadata_image import (
    MetadataImage,
    build_metadata_response,
    partition_view,
)
from broker.protocol.outputs import AppendMetadata, Event, Outputs, Reply
from broker.protocol.partition_change import BrokerStates, ElectionPolicy
from broker.protocol.placement import (
    PlacementError,
    place_topic,
)
from broker.protocol.records import (
    NO_LEADER,
    BrokerRegistrationChangeRecord,
    MetadataRecord,
    PartitionCountRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
)
from broker.protocol.settings import (
    FENCING_MODES,
    UNCLEAN_RECOVERY_MODES,
    ProtocolSettings,
    Timeouts,
)
from broker.protocol.unclean_recovery import Decision, UncleanRecovery

PLACEMENTS = ("rack-aware", "round-robin", "explicit")


@dataclass
class ControllerConfig:
    session_timeout: float  # seconds (R24)
    elr: bool = True  # R27; False: Last Replica Standing (R30)
    unclean_leader_election: bool = False  # R31
    fencing: str = "kraft"  # R13a: "zookeeper" misses a restart faster than session_timeout
    placement_seed: int = 0  # R34: start index and shift of every topic derive from it
    unclean_recovery: str = "none"  # R32: none | proactive | balanced | manual
    unclean_recovery_timeout: float = 2.0  # R32: seconds a log-info round waits

    @classmethod
    def from_settings(cls, timeouts: Timeouts, protocol: ProtocolSettings, placement_seed: int) -> "ControllerConfig":
        return cls(session_timeout=timeouts.session_timeout, elr=protocol.elr,
                   unclean_leader_election=protocol.unclean_leader_election, fencing=protocol.fencing,
                   placement_seed=placement_seed, unclean_recovery=protocol.unclean_recovery,
                   unclean_recovery_timeout=timeouts.unclean_recovery_timeout)

    def __post_init__(self) -> None:
        if self.unclean_recovery not in UNCLEAN_RECOVERY_MODES:
            raise ValueError(f"unclean_recovery must be one of {UNCLEAN_RECOVERY_MODES}, got {self.unclean_recovery!r}")
        if self.fencing not in FENCING_MODES:
            raise ValueError(f"fencing must be one of {FENCING_MODES}, got {self.fencing!r}")
        if self.session_timeout <= 0:
            raise ValueError(f"session_timeout must be positive, got {self.session_timeout}")


def record_events(record: MetadataRecord, offset: int) -> list[Event]:
    """The events of a committed record at `offset` of the metadata log (DESIGN 7: the
    controller's view after each committed change). Each carries `metadata_offset`: a record
    appended by an active controller that saw it committed but died before its followers
    heard of the commit is committed again by the next leader, which records it again (it
    cannot know the first did), and the analysis keeps the first event of each offset."""
    if isinstance(record, PartitionRecord):
        # A reassignment in progress (R35) also names the replicas joining and leaving, as
        # Kafka's PartitionRecord does: the replicas are then the target and the leaving
        # ones, and the placement under judgment is the target's (I9).
        moving = {"adding": list(record.adding), "removing": list(record.removing)} \
            if record.adding or record.removing else {}
        return [Event("partition-changed", dict(
            topic=record.topic, partition=record.partition, leader=record.leader, leader_epoch=record.leader_epoch,
            partition_epoch=record.partition_epoch, isr=list(record.isr), elr=list(record.elr),
            last_known_elr=list(record.last_known_elr), replicas=list(record.replicas), reason=record.reason,
            **moving, metadata_offset=offset))]
    if isinstance(record, RegisterBrokerRecord):
        return [Event("registered", dict(broker_id=record.broker_id, broker_epoch=record.broker_epoch,
                                         clean=record.clean, incarnation_id=record.incarnation_id,
                                         rack=record.rack, metadata_offset=offset))]
    if isinstance(record, BrokerRegistrationChangeRecord) and record.fenced is not None:
        return [Event("fenced" if record.fenced else "unfenced",
                      dict(broker_id=record.broker_id, broker_epoch=record.broker_epoch, metadata_offset=offset))]
    if isinstance(record, BrokerRegistrationChangeRecord) and record.in_controlled_shutdown:
        return [Event("controlled-shutdown", dict(broker_id=record.broker_id, metadata_offset=offset))]
    return []


class _Batch:
    """The records one input produces, applied to the image as they are made."""

    def __init__(self, controller: "Controller") -> None:
        self._controller = controller
        self.base_offset = controller.log_end_offset
        self.records: list[MetadataRecord] = []
        self.events: list[Event] = []

    def append(self, record: MetadataRecord) -> int:
        """Apply `record` at the next offset and return that offset."""
        controller = self._controller
        offset = controller.log_end_offset
        if not controller.image.apply(offset, record):
            raise RuntimeError(f"controller generated a record its own image refuses: {record}")
        controller.log_end_offset += 1
        self.records.append(record)
        self.events.extend(record_events(record, offset))
        return offset

    def event(self, kind: str, **fields: Any) -> None:
        self.events.append(Event(kind, fields))


class Controller:
    def __init__(self, node_id: int, config: ControllerConfig) -> None:
        self.node_id = node_id
        self.config = config
        self.image = MetadataImage()
        self.log_end_offset = 0  # the offset the next appended record gets
        self.committed_offset = 0  # exclusive end of the committed log
        self.heartbeats = BrokerHeartbeatManager(config.session_timeout)
        self._policy = ElectionPolicy(elr=config.elr, unclean_leader_election=config.unclean_leader_election)
        self._held: list[tuple[int, Reply | Event]] = []  # (log end it waits for, what to release)
        self.recovery = UncleanRecovery(config.unclean_recovery, config.unclean_recovery_timeout)

    # ================================================================== inputs
    def on_request(self, ctx: object, msg: object, now: float) -> Outputs:
        """Answer one request; the answer is released once the records it rests on are committed.

        `msg` is as the codec decoded it: every field has its declared type."""
        batch = _Batch(self)
        if isinstance(msg, BrokerRegistrationRequest):
            answer: object = self._register(batch, msg, now)
        elif isinstance(msg, BrokerHeartbeatRequest):
            answer = self._heartbeat(batch, msg, now)
        elif isinstance(msg, AlterPartitionRequest):
            answer = self._alter_partition(batch, msg)
        elif isinstance(msg, CreateTopicsRequest):
            answer = self._create_topics(batch, msg)
        elif isinstance(msg, DeleteTopicsRequest):
            answer = self._delete_topics(batch, msg)
        elif isinstance(msg, CreatePartitionsRequest):
            answer = self._create_partitions(batch, msg)
        elif isinstance(msg, ElectLeadersRequest):
            answer = self._elect_leaders(batch, msg)
        elif isinstance(msg, AlterPartitionReassignmentsRequest):
            answer = self._reassign(batch, msg)
        elif isinstance(msg, UnregisterBrokerRequest):
            answer = self._unregister(batch, msg.broker_id, now)
        else:
            answer = ErrorResponse(Errors.INVALID_REQUEST, f"the controller does not serve {type(msg).__name__}")
        return self._finish(batch, [Reply(ctx, answer)])

    def tick(self, now: float) -> Outputs:
        """R24: fence every broker whose session expired, with R25 for its partitions, in one batch."""
        batch = _Batch(self)
        for broker_id in self.heartbeats.expired(now):
            registration = self.image.brokers.get(broker_id)
            if registration is not None and not registration.fenced:
                self._fence(batch, broker_id, "fence")
            self.heartbeats.end_session(broker_id)
        for registration in self.image.brokers.values():
            # Unfenced brokers known only from replayed records get a fresh session, as Kafka
            # gives every broker when a controller becomes active.
            if not registration.fenced and not self.heartbeats.has_session(registration.broker_id):
                self.heartbeats.touch(registration.broker_id, now)
        sends, decisions = self.recovery.tick(now, self.image, self._states())
        for decision in decisions:
            self._recover(batch, decision)
        if self.config.unclean_recovery == "manual":
            self._append_changes(batch, [
                partition_change.awaiting_operator(p) for p in self._partitions_where(
                    lambda p: p.leader == NO_LEADER and not p.isr and not p.elr
                    and p.reason != partition_change.MANUAL_ELECTION_REQUIRED)])
        out = self._finish(batch, [])
        out.messages.extend(sends)
        return out

    def next_tick_at(self) -> float:
        """When `tick` next has something to do: the first broker session to expire (R24), a
        session to give, and while a partition has no leader, every tick (unclean recovery,
        R32, and the manual mode's wait for an operator look at it each time). A tick before
        then changes nothing."""
        for b in self.image.brokers.values():
            if not b.fenced and not self.heartbeats.has_session(b.broker_id):
                return -math.inf
        if self.config.unclean_recovery != "none" and not self.recovery.idle(self.image):
            return -math.inf
        return self.heartbeats.next_expiry()

    def on_response(self, correlation: tuple, msg: object, now: float) -> Outputs:
        """The answer to a request of the controller's own (`msg` None: it timed out)."""
        if correlation[0] == "log-info":
            _, topic, partition, broker, number = correlation
            self.recovery.on_log_info(topic, partition, broker, number,
                                      msg if isinstance(msg, GetReplicaLogInfoResponse) else None)
        return Outputs()

    def on_committed(self, offset: int) -> Outputs:
        """The metadata log is committed up to `offset` (exclusive): release what waited for it."""
        self.committed_offset = max(self.committed_offset, min(offset, self.log_end_offset))
        return self._release(Outputs())

    def replay(self, offset: int, record: MetadataRecord) -> bool:
        """Apply a committed record this controller did not generate (log reload, Raft follower)."""
        applied = self.image.apply(offset, record)
        self.log_end_offset = max(self.log_end_offset, offset + 1)
        self.committed_offset = max(self.committed_offset, offset + 1)
        return applied

    def load_snapshot(self, image: MetadataImage) -> None:
        """Start from a snapshot's image (a follower's or a restarted controller's state):
        the log below `image.offset + 1` is committed and applied."""
        self.image = image
        self.log_end_offset = self.committed_offset = image.offset + 1

    # ================================================================== views
    def metadata_response(self, topics: list[str] | None) -> MetadataResponse:
        return build_metadata_response(self.image, topics, self.node_id)

    def describe(self) -> dict:
        """The controller's view for the supervisor's status, JSON-able."""
        return {
            "node_id": self.node_id,
            "log_end_offset": self.log_end_offset,
            "committed_offset": self.committed_offset,
            "brokers": [
                {"broker_id": b.broker_id, "broker_epoch": b.broker_epoch, "rack": b.rack,
                 "fenced": b.fenced, "in_controlled_shutdown": b.in_controlled_shutdown, "clean": b.clean}
                for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id)],
            "partitions": [partition_view(p) for _, p in sorted(self.image.partitions.items())],
            "topic_ids": dict(sorted(self.image.topic_ids.items())),
        }

    # ================================================================== output plumbing
    def _finish(self, batch: _Batch, replies: list[Reply]) -> Outputs:
        out = Outputs()
        if batch.records:
            out.disk.append(AppendMetadata(batch.records, batch.base_offset))  # type: ignore[arg-type]
        self._held.extend((self.log_end_offset, item) for item in [*batch.events, *replies])
        return self._release(out)

    def resign(self, leader_id: int) -> list[Reply]:
        """Leadership lost: every answer held for a commit this controller will not see is
        NOT_CONTROLLER now, naming the leader it knows, so that its asker turns to the new
        active controller at once (Kafka fails a resigning controller's pending operations so).
        Dropped, they left an admin request to time out and its fault to do nothing: a
        tester's create-topic under a controller cut off from its quorum."""
        replies = [Reply(item.ctx, ErrorResponse(Errors.NOT_CONTROLLER, "the controller lost its leadership "
                                                 "before the request was committed", leader_id))
                   for _, item in self._held if isinstance(item, Reply)]
        self._held = []
        return replies

    def _release(self, out: Outputs) -> Outputs:
        waiting = []
        for end, item in self._held:
            if end > self.committed_offset:
                waiting.append((end, item))
            elif isinstance(item, Reply):
                out.messages.append(item)
            else:
                out.events.append(item)
        self._held = waiting
        return out

    def _states(self) -> BrokerStates:
        return BrokerStates.of(self.image)

    def _min_isr(self, part: PartitionRecord) -> int:
        return self.image.min_insync_replicas(part.topic)

    def _append_changes(self, batch: _Batch, changes: list[PartitionRecord | None]) -> None:
        for change in changes:
            if change is not None:
                batch.append(change)

    # ================================================================== brokers
    def _register(self, batch: _Batch, msg: BrokerRegistrationRequest, now: float) -> BrokerRegistrationResponse:
        """R23 registration, R28 clean flag, R29 Unclean Exclusion, R13a zookeeper fencing."""
        old = self.image.brokers.get(msg.broker_id)
        if old is not None and old.incarnation_id == msg.incarnation_id:
            self.heartbeats.touch(msg.broker_id, now)  # R23: a retried registration keeps its epoch
            return BrokerRegistrationResponse(broker_epoch=old.broker_epoch)
        kraft = self.config.fencing == "kraft"
        if old is not None and kraft:
            if self.heartbeats.is_live(msg.broker_id, now):
                return BrokerRegistrationResponse(error=Errors.DUPLICATE_BROKER_REGISTRATION)
            if not old.fenced:  # the session lapsed before a tick noticed: fence it first (R24, R25)
                self._fence(batch, msg.broker_id, "fence")
        clean = msg.previous_broker_epoch == self.image.broker_epoch(msg.broker_id)  # R28
        # R13a: the ZooKeeper-era controller never saw the restart, so the broker stays as it was.
        fenced = True if kraft or old is None else old.fenced
        epoch = self.log_end_offset
        batch.append(RegisterBrokerRecord(broker_id=msg.broker_id, broker_epoch=epoch,
                                          incarnation_id=msg.incarnation_id, rack=msg.rack,
                                          clean=clean, fenced=fenced, endpoint=msg.endpoint))
        self.heartbeats.end_session(msg.broker_id)
        self.heartbeats.touch(msg.broker_id, now)
        if not clean and self.config.elr and kraft:
            states = self._states()
            self._append_changes(batch, [
                partition_change.exclude_unclean(p, msg.broker_id, min_isr=self._min_isr(p),
                                                 policy=self._policy, brokers=states)
                for p in self._partitions_where(lambda p: msg.broker_id in p.isr or msg.broker_id in p.elr)])
        return BrokerRegistrationResponse(broker_epoch=epoch)

    def _heartbeat(self, batch: _Batch, msg: BrokerHeartbeatRequest, now: float) -> BrokerHeartbeatResponse:
        """R24 session and unfencing, R37 controlled shutdown."""
        registration = self.image.brokers.get(msg.broker_id)
        if registration is None:
            return BrokerHeartbeatResponse(error=Errors.BROKER_ID_NOT_REGISTERED)
        if msg.broker_epoch != registration.broker_epoch:
            return BrokerHeartbeatResponse(error=Errors.STALE_BROKER_EPOCH)
        broker_id = msg.broker_id
        self.heartbeats.touch(broker_id, now, msg.current_metadata_offset)
        caught_up = msg.current_metadata_offset >= registration.registered_offset
        should_shut_down = False
        if msg.want_shutdown:
            should_shut_down = self._controlled_shutdown(batch, broker_id)
        elif msg.want_fence and not registration.fenced:
            self._fence(batch, broker_id, "fence")
        elif registration.fenced and caught_up and not msg.want_fence and not registration.in_controlled_shutdown:
            self._unfence(batch, broker_id)
        # (by position: error NONE, fenced, caught up, shut down; a keyword call of a dataclass is
        # the slow path of a call on Python 3.11, and every heartbeat of every broker ends here)
        return BrokerHeartbeatResponse(Errors.NONE, self.image.brokers[broker_id].fenced, caught_up,
                                       should_shut_down)

    def _controlled_shutdown(self, batch: _Batch, broker_id: int) -> bool:
        """R37: move the broker's leaderships and ISR memberships away (R25); True once it may stop.

        It may stop when it leads nothing and every active broker applied those changes; the
        controller then fences it, so the next incarnation can register at once.
        """
        registration = self.image.brokers[broker_id]
        if registration.fenced:
            return True
        if not self.heartbeats.in_controlled_shutdown(broker_id):
            self._begin_controlled_shutdown(batch, broker_id)
        if self._partitions_where(lambda p: p.leader == broker_id):
            return False
        active = [b for b in self.image.unfenced_brokers() if not self.image.brokers[b].in_controlled_shutdown]
        if not self.heartbeats.may_shut_down(broker_id, active):
            return False
        self._fence(batch, broker_id, "controlled-shutdown")
        return True

    def _begin_controlled_shutdown(self, batch: _Batch, broker_id: int) -> None:
        """R37's first step on this controller: flag the broker, move its work away (R25), and
        remember the offset every active broker must reach before it may stop.

        A controller that became active during the shutdown finds the flag in the log already.
        As Kafka's, it carries on rather than starting over: no second flag record, a move of
        whatever the broker still holds (a failover may have committed only part of the first
        controller's batch), and the wait for the log end it found."""
        registration = self.image.brokers[broker_id]
        if not registration.in_controlled_shutdown:
            batch.append(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=registration.broker_epoch,
                                                        in_controlled_shutdown=True))
        self._remove_from_partitions(batch, broker_id, "controlled-shutdown")
        self.heartbeats.begin_controlled_shutdown(broker_id, self.log_end_offset - 1)

    def _unregister(self, batch: _Batch, broker_id: int, now: float) -> UnregisterBrokerResponse:
        """R39's last step: forget a removed broker. Refused while it still runs (a fenced broker
        that heartbeats would register again at once) and while it is a replica of anything
        (R39 moves its replicas away first): its registration alone goes, no partition changes."""
        error, message = self._unregister_refusal(broker_id, now)
        if error is not Errors.NONE:
            return UnregisterBrokerResponse(error, message)
        epoch = self.image.brokers[broker_id].broker_epoch
        batch.append(UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch))
        self.heartbeats.end_session(broker_id)
        batch.event("broker-unregistered", broker_id=broker_id, broker_epoch=epoch)
        return UnregisterBrokerResponse(Errors.NONE, f"broker {broker_id} (epoch {epoch}) unregistered")

    def _unregister_refusal(self, broker_id: int, now: float) -> tuple[Errors, str]:
        """Why the broker may not be unregistered now, in R39's order; (NONE, "") when it may."""
        registration = self.image.brokers.get(broker_id)
        if registration is None:
            return Errors.BROKER_ID_NOT_REGISTERED, f"broker {broker_id} is not registered"
        if not registration.fenced or self.heartbeats.is_live(broker_id, now):
            state = "fenced but still heartbeating" if registration.fenced else "unfenced"
            return Errors.INVALID_REQUEST, (
                f"broker {broker_id} is still running ({state}): it must be shut down first (R37)")
        held = self._partitions_where(lambda p: broker_id in p.replicas)
        if held:
            p = held[0]
            return Errors.INVALID_REPLICA_ASSIGNMENT, (
                f"broker {broker_id} is still a replica of {p.topic}/{p.partition} (replicas {p.replicas}): "
                f"its replicas must be reassigned away first (R39)")
        return Errors.NONE, ""

    def _fence(self, batch: _Batch, broker_id: int, reason: str) -> None:
        """R24 fencing with R25 for every partition the broker leads or is in the ISR of."""
        epoch = self.image.brokers[broker_id].broker_epoch
        batch.append(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, fenced=True))
        self._remove_from_partitions(batch, broker_id, reason)
        self.heartbeats.end_session(broker_id)

    def _remove_from_partitions(self, batch: _Batch, broker_id: int, reason: str) -> None:
        states = self._states()
        self._append_changes(batch, [
            partition_change.remove_broker(p, broker_id, min_isr=self._min_isr(p), policy=self._policy,
                                           brokers=states, reason=reason)
            for p in self._partitions_where(lambda p: p.leader == broker_id or broker_id in p.isr)])

    def _unfence(self, batch: _Batch, broker_id: int) -> None:
        """R24 unfencing; the broker may be the candidate a leaderless partition waits for (R30, R31)."""
        epoch = self.image.brokers[broker_id].broker_epoch
        batch.append(BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, fenced=False))
        states = self._states()
        self._append_changes(batch, [
            partition_change.elect_leader(p, min_isr=self._min_isr(p), policy=self._policy, brokers=states)
            for p in self._partitions_where(lambda p: p.leader == NO_LEADER and broker_id in p.replicas)])

    def _partitions_where(self, wanted: typing.Callable[[PartitionRecord], bool]) -> list[PartitionRecord]:
        return [p for _, p in sorted(self.image.partitions.items()) if wanted(p)]

    # ================================================================== partitions
    def _alter_partition(self, batch: _Batch, msg: AlterPartitionRequest) -> AlterPartitionResponse:
        """R19: validate the leader's proposal, in the rule's order, then R27 via partition_change."""
        part = self.image.partition(msg.topic, msg.partition)
        error = Errors.UNKNOWN_TOPIC_OR_PARTITION if part is None else self._alter_partition_error(msg, part)
        if part is None or error is not Errors.NONE:
            return AlterPartitionResponse(topic=msg.topic, partition=msg.partition, error=error)
        change = partition_change.alter_isr(part, [m.broker_id for m in msg.new_isr], min_isr=self._min_isr(part),
                                            policy=self._policy, brokers=self._states())
        if change is not None:
            batch.append(change)
            part = change
            done = partition_change.complete_reassignment(part, min_isr=self._min_isr(part), policy=self._policy,
                                                          brokers=self._states())
            if done is not None:  # R35: the last target replica joined the ISR
                batch.append(done)
        return AlterPartitionResponse(topic=part.topic, partition=part.partition, leader_id=part.leader,
                                      leader_epoch=part.leader_epoch, partition_epoch=part.partition_epoch,
                                      isr=list(part.isr))

    def _alter_partition_error(self, msg: AlterPartitionRequest, part: PartitionRecord) -> Errors:
        if self.image.broker_epoch(msg.broker_id) != msg.broker_epoch:
            return Errors.STALE_BROKER_EPOCH
        if msg.leader_epoch < part.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if msg.leader_epoch > part.leader_epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        if msg.partition_epoch != part.partition_epoch:
            return Errors.INVALID_UPDATE_VERSION
        if msg.broker_id != part.leader:
            return Errors.NOT_LEADER_OR_FOLLOWER
        members = [m.broker_id for m in msg.new_isr]
        if len(set(members)) != len(members) or not set(members) <= set(part.replicas) or part.leader not in members:
            return Errors.INVALID_REQUEST
        for member in msg.new_isr:
            registration = self.image.brokers.get(member.broker_id)
            if (registration is None or registration.fenced or registration.in_controlled_shutdown
                    or registration.broker_epoch != member.broker_epoch):
                return Errors.INELIGIBLE_REPLICA
        return Errors.NONE

    def _recover(self, batch: _Batch, decision: Decision) -> None:
        """R32: elect the chosen log, and record the answers it was chosen from."""
        part = decision.partition
        record = partition_change.unclean_recovery(part, decision.leader)
        batch.append(record)
        batch.event("unclean-recovery", topic=part.topic, partition=part.partition, mode=decision.mode,
                    leader=decision.leader, leader_epoch=record.leader_epoch,
                    log_infos=[a.to_dict() for a in decision.answers])

    def _elect_leaders(self, batch: _Batch, msg: ElectLeadersRequest) -> ElectLeadersResponse:
        """R36 preferred elections, or the operator's unclean choice (R32 `manual`, `elect`)."""
        response = ElectLeadersResponse()
        if msg.election_type not in ("preferred", "unclean"):
            response.errors["*"] = Errors.INVALID_REQUEST.value
            response.reasons["*"] = f"unknown election type {msg.election_type!r} (preferred | unclean)"
            return response
        if msg.partitions is None:
            keys = sorted(self.image.partitions)
        else:
            keys = [(tp.topic, tp.partition) for tp in msg.partitions]
        for topic, partition in keys:
            name = f"{topic}/{partition}"
            part = self.image.partition(topic, partition)
            if part is None:
                error, reason = Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}"
            elif msg.election_type == "preferred":
                error, reason = self._elect_preferred(batch, part)
            else:
                error, reason = self._elect_unclean(batch, part, msg.broker_id)
            response.errors[name] = error.value
            if reason:
                response.reasons[name] = reason
        return response

    def _elect_preferred(self, batch: _Batch, part: PartitionRecord) -> tuple[Errors, str]:
        preferred = part.replicas[0]
        if part.leader == preferred:
            return Errors.ELECTION_NOT_NEEDED, f"broker {preferred}, the preferred replica, leads already"
        change = partition_change.elect_preferred(part, self._states())
        if change is None:
            return Errors.PREFERRED_LEADER_NOT_AVAILABLE, (
                f"the preferred replica, broker {preferred}, is not in the ISR {part.isr} or cannot lead")
        batch.append(change)
        return Errors.NONE, ""

    def _elect_unclean(self, batch: _Batch, part: PartitionRecord, broker: int) -> tuple[Errors, str]:
        if broker not in part.replicas:
            return Errors.INVALID_REQUEST, f"broker {broker} is not a replica of {part.topic}/{part.partition} " \
                                           f"(replicas {part.replicas})"
        if part.leader != NO_LEADER:
            return Errors.ELECTION_NOT_NEEDED, f"broker {part.leader} leads {part.topic}/{part.partition}"
        if not self._states().can_lead(broker):
            return Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"broker {broker} is fenced or shutting down"
        self._recover(batch, Decision(part, broker, "manual", ()))
        return Errors.NONE, ""

    def _reassign(self, batch: _Batch, msg: AlterPartitionReassignmentsRequest) -> AlterPartitionReassignmentsResponse:
        """R35: start moving a partition to `msg.replicas`; it completes as they join the ISR."""
        part = self.image.partition(msg.topic, msg.partition)
        name = f"{msg.topic}/{msg.partition}"
        if part is None:
            return AlterPartitionReassignmentsResponse(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {name}")
        target = list(msg.replicas)
        unknown = [b for b in target if b not in self.image.brokers]
        if not target or len(set(target)) != len(target) or unknown:
            return AlterPartitionReassignmentsResponse(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"{target}: expected distinct registered brokers" + (f" (no broker {unknown})" if unknown else ""))
        if part.adding or part.removing:
            return AlterPartitionReassignmentsResponse(
                Errors.REASSIGNMENT_IN_PROGRESS, f"{name} is moving to {partition_change.reassignment_target(part)}")
        if target == part.replicas:
            return AlterPartitionReassignmentsResponse(Errors.NONE, f"{name} is on {target} already")
        grown = partition_change.begin_reassignment(part, target)
        batch.append(grown)
        done = partition_change.complete_reassignment(grown, min_isr=self._min_isr(grown), policy=self._policy,
                                                      brokers=self._states())
        if done is not None:  # every target replica is in the ISR already (a shrink or reorder)
            batch.append(done)
        return AlterPartitionReassignmentsResponse(Errors.NONE, f"{name}: {part.replicas} -> {target}")

    def _create_topics(self, batch: _Batch, msg: CreateTopicsRequest) -> CreateTopicsResponse:
        """Create each topic: R34 placement on the brokers that are up (R40), then one
        PartitionRecord per partition, its ISR the replicas that are up."""
        errors: dict[str, str] = {}
        for spec in msg.topics:
            error, topic, assignment = self._plan_topic(spec)
            if topic is not None and assignment is not None:
                parts = self._initial_partitions(topic.name, range(topic.partitions), assignment)
                if parts is None:
                    error = Errors.INVALID_REPLICA_ASSIGNMENT
                else:
                    batch.append(topic)
                    for part in parts:
                        batch.append(part)
            errors[spec.name] = error.value
        return CreateTopicsResponse(errors=errors)

    def _initial_partitions(self, topic: str, indexes: range, assignment: dict[int, list[int]]
                            ) -> list[PartitionRecord] | None:
        """One PartitionRecord per new partition, its ISR the replicas that are up (R40); None
        when some partition has no replica up, so that nothing of the topic is appended."""
        states = self._states()
        parts = [partition_change.initial_partition(topic, p, assignment[p], states) for p in indexes]
        placed = [part for part in parts if part is not None]
        return placed if len(placed) == len(parts) else None

    def _live_racks(self) -> dict[int, str | None]:
        """R40: the brokers a new partition may be placed on (those that can lead now), with their racks."""
        states = self._states()
        return {b.broker_id: b.rack for b in self.image.brokers.values() if states.can_lead(b.broker_id)}

    def _delete_topics(self, batch: _Batch, msg: DeleteTopicsRequest) -> DeleteTopicsResponse:
        """R40: each topic leaves the metadata in one record, its partitions with it; every broker
        then closes its replicas and deletes their logs as it applies that record."""
        errors: dict[str, str] = {}
        for name in dict.fromkeys(msg.topics):  # a name given twice is deleted once
            topic = self.image.topics.get(name)
            if topic is None:
                errors[name] = Errors.UNKNOWN_TOPIC_OR_PARTITION.value
                continue
            batch.append(RemoveTopicRecord(name=name))
            self.recovery.forget(name)
            batch.event("topic-deleted", topic=name, partitions=topic.partitions)
            errors[name] = Errors.NONE.value
        return DeleteTopicsResponse(errors=errors)

    def _create_partitions(self, batch: _Batch, msg: CreatePartitionsRequest) -> CreatePartitionsResponse:
        """R40: grow the topic to `msg.count` partitions. The new ones continue its partition ids
        and are placed as R34 places a new topic's partitions (rack-aware, whatever the topic was
        created with) on the brokers that can lead now, with the topic's replication factor."""
        topic = self.image.topics.get(msg.topic)
        if topic is None:
            return CreatePartitionsResponse(Errors.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {msg.topic}")
        current = topic.partitions
        if msg.count <= current:
            return CreatePartitionsResponse(
                Errors.INVALID_PARTITIONS,
                f"topic {msg.topic} has {current} partitions, asked for {msg.count}: partitions can only be added")
        try:
            assignment = place_topic("rack-aware", topic.name, msg.count, topic.replication_factor,
                                     self._live_racks(), self.config.placement_seed)
        except PlacementError as e:
            return CreatePartitionsResponse(Errors.INVALID_REPLICATION_FACTOR, str(e))
        parts = self._initial_partitions(topic.name, range(current, msg.count), assignment)
        if parts is None:
            return CreatePartitionsResponse(Errors.INVALID_REPLICA_ASSIGNMENT, "a new partition has no replica up")
        batch.append(PartitionCountRecord(name=topic.name, partitions=msg.count))
        for part in parts:
            batch.append(part)
        return CreatePartitionsResponse(Errors.NONE, f"{topic.name}: {current} -> {msg.count} partitions")

    def _plan_topic(self, spec: NewTopic) -> tuple[Errors, TopicRecord | None, dict[int, list[int]] | None]:
        name, partitions, rf = spec.name, spec.partitions, spec.replication_factor
        min_isr, placement, config = spec.min_insync_replicas, spec.placement, spec.config
        if not (name and partitions >= 1 and min_isr >= 1 and placement in PLACEMENTS):
            return Errors.INVALID_REQUEST, None, None
        if rf < 1:
            return Errors.INVALID_REPLICATION_FACTOR, None, None
        if name in self.image.topics:
            return Errors.TOPIC_ALREADY_EXISTS, None, None
        if placement == "explicit":
            assignment = _explicit_assignment(spec.assignment, partitions, rf, set(self.image.brokers))
            if assignment is None:
                return Errors.INVALID_REQUEST, None, None
        else:
            try:
                seed = self.config.placement_seed if spec.placement_seed is None else spec.placement_seed
                assignment = place_topic(placement, name, partitions, rf, self._live_racks(), seed)
            except PlacementError:
                return Errors.INVALID_REPLICATION_FACTOR, None, None
        topic = TopicRecord(name=name, partitions=partitions, replication_factor=rf,
                            min_insync_replicas=min_isr, config=dict(config))
        return Errors.NONE, topic, assignment


def _explicit_assignment(raw: dict[str, list[int]] | None, partitions: int, rf: int,
                         registered: set[int]) -> dict[int, list[int]] | None:
    """`placement: explicit`: one list of `rf` distinct registered brokers per partition 0..n-1, or None."""
    if raw is None:
        return None
    assignment: dict[int, list[int]] = {}
    for key, replicas in raw.items():
        if not (key.isascii() and key.isdigit() and len(replicas) == rf and all(r in registered for r in replicas)
                and len(set(replicas)) == rf):
            return None
        assignment[int(key)] = list(replicas)
    return assignment if set(assignment) == set(range(partitions)) else None
