"""Unregistering a removed broker (R39's last step, Kafka's UnregisterBroker of KIP-631), on the pure
pieces: the record and the image (R3, R23), the controller's refusals and decision (R22, R24, R37,
R39), and brokers that apply the record from their metadata fetches."""
from __future__ import annotations

from broker.common.errors import Errors
from broker.protocol.broker import BrokerConfig, BrokerState
from broker.protocol.controller import Controller, ControllerConfig
from broker.protocol.messages import (
    MESSAGE_TYPES,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    FetchPartition,
    FetchRequest,
    IsrMember,
    ProduceResponse,
    UnregisterBrokerRequest,
    UnregisterBrokerResponse,
)
from broker.protocol.metadata_image import MetadataImage, build_metadata_response
from broker.protocol.outputs import Send
from broker.protocol.records import (
    BrokerRegistrationChangeRecord,
    RegisterBrokerRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    from_dict,
    to_dict,
)
from broker.wire.codec import decode, encode
from tests.unit.test_controller import TIMEOUT, Harness, cluster
from tests.unit.test_topic_admin import appended, broker_1, feed, produce, replies

ACKS_ALL = -1


# ============================================================================ record and messages
def test_r39_unregister_record_round_trips_under_kafkas_name():
    """R22, R39: the metadata log carries the record as a dict named after Kafka's UnregisterBrokerRecord."""
    record = UnregisterBrokerRecord(broker_id=4, broker_epoch=7)
    assert to_dict(record) == {"broker_id": 4, "broker_epoch": 7, "type": "unregister-broker"}
    assert from_dict(to_dict(record)) == record


def test_r39_unregister_messages_take_new_type_ids_and_cross_the_wire():
    """R39: UnregisterBroker comes after every existing message type: ids already on the wire do not move."""
    assert MESSAGE_TYPES.index(CreatePartitionsResponse) == 33
    assert MESSAGE_TYPES[34:] == (UnregisterBrokerRequest, UnregisterBrokerResponse)
    for msg in (UnregisterBrokerRequest(4), UnregisterBrokerResponse(Errors.BROKER_ID_NOT_REGISTERED, "no broker 4")):
        assert decode(encode(msg, 3, "admin")).msg == msg


# ============================================================================ the image (R3, R23)
def _image() -> MetadataImage:
    """Brokers 1 (epoch 0, unfenced, endpoint e1) and 2 (epoch 1, fenced, endpoint e2); topic t."""
    image = MetadataImage()
    records = [
        RegisterBrokerRecord(broker_id=1, broker_epoch=0, incarnation_id="a", rack="r1", clean=True, endpoint="e1"),
        RegisterBrokerRecord(broker_id=2, broker_epoch=1, incarnation_id="b", rack="r2", clean=True, endpoint="e2"),
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=False),
        TopicRecord(name="t", partitions=1, replication_factor=1, min_insync_replicas=1),
    ]
    for offset, record in enumerate(records):
        assert image.apply(offset, record)
    return image


def test_r39_unregister_with_the_current_epoch_removes_the_registration():
    """R39: the record naming the broker's current epoch removes it: no epoch, no endpoint, not listed."""
    image = _image()
    assert image.apply(4, UnregisterBrokerRecord(broker_id=2, broker_epoch=1))
    assert sorted(image.brokers) == [1] and image.broker_epoch(2) == -1
    assert image.endpoints() == {1: "e1"} and image.endpoint_of(2) is None


def test_r39_unregister_with_a_stale_epoch_or_unknown_broker_is_refused_and_changes_nothing():
    """R3, R39: a record naming another epoch of the broker (or no registered broker) is refused."""
    image = _image()
    before = image.to_state()
    assert not image.apply(4, UnregisterBrokerRecord(broker_id=2, broker_epoch=0))
    assert not image.apply(5, UnregisterBrokerRecord(broker_id=9, broker_epoch=1))
    after = image.to_state()
    assert after.pop("offset") == 5 and before.pop("offset") == 3
    assert after == before


def test_r23_r39_a_broker_registered_again_after_unregistering_gets_a_new_epoch_an_old_record_cannot_remove():
    """R23, R39: a new process of the id registers again with the offset of its record as epoch, never
    the old one; the unregistration of the old epoch, replayed, leaves the new registration alone."""
    image = _image()
    assert image.apply(4, UnregisterBrokerRecord(broker_id=2, broker_epoch=1))
    assert image.apply(5, RegisterBrokerRecord(broker_id=2, broker_epoch=5, incarnation_id="c", rack="r2",
                                               clean=False))
    b = image.brokers[2]
    assert (b.broker_epoch, b.registered_offset, b.fenced, b.incarnation_id) == (5, 5, True, "c")
    assert not image.apply(6, UnregisterBrokerRecord(broker_id=2, broker_epoch=1))
    assert image.broker_epoch(2) == 5


def test_r22_r39_a_snapshot_after_an_unregistration_rebuilds_the_image_without_the_broker():
    """R22, R39: the snapshot (KIP-630) of an image without the broker loads to the same image,
    and a registration applied after it takes the next offset as a new epoch."""
    image = _image()
    image.apply(4, UnregisterBrokerRecord(broker_id=2, broker_epoch=1))
    again = MetadataImage.from_state(image.to_state())
    assert again.to_state() == image.to_state() and 2 not in again.brokers and again.offset == 4
    assert again.apply(5, RegisterBrokerRecord(broker_id=2, broker_epoch=5, incarnation_id="c", rack=None,
                                               clean=False))
    assert again.broker_epoch(2) == 5


# ============================================================================ the controller (R22, R39)
def shut_down(h: Harness, broker: int) -> None:
    """R37: the broker asks to shut down, the others apply the change, and it is let go (fenced)."""
    h.heartbeat(broker, want_shutdown=True)
    for other in h.controller.image.unfenced_brokers():
        if other != broker:
            h.heartbeat(other)
    assert h.heartbeat(broker, want_shutdown=True).should_shut_down
    assert h.controller.image.brokers[broker].fenced


def moved_off_4() -> Harness:
    """Brokers 1-4; t/0 on [1, 2, 4] reassigned to [1, 2, 3] (R35): 4 holds no replica any more."""
    h = cluster(4)
    assert h.create(placement="explicit", assignment={0: [1, 2, 4]}) == "NONE"
    assert h.call(AlterPartitionReassignmentsRequest("t", 0, [1, 2, 3])).error == Errors.NONE
    assert h.alter([1, 2, 4, 3]).error == Errors.NONE  # 3 caught up: the reassignment completes
    assert h.part().replicas == [1, 2, 3]
    return h


def unregister(h: Harness, broker: int) -> UnregisterBrokerResponse:
    """Ask the controller to unregister `broker`; every refusal is checked to have appended nothing."""
    end = h.controller.log_end_offset
    reply = h.call(UnregisterBrokerRequest(broker))
    assert isinstance(reply, UnregisterBrokerResponse)
    if reply.error != Errors.NONE:
        assert h.controller.log_end_offset == end and not appended(h.outputs[-1])  # a refusal appends nothing
    return reply


def test_r39_unregistering_an_unknown_broker_is_refused():
    """R39: only a registered broker can be unregistered."""
    h = cluster(3)
    reply = unregister(h, 9)
    assert (reply.error, reply.message) == (Errors.BROKER_ID_NOT_REGISTERED, "broker 9 is not registered")


def test_r24_r39_a_running_broker_is_not_unregistered():
    """R39 unregisters a broker that is gone: one that is unfenced (R24), or fenced but still
    heartbeating, must be shut down first (R37), else it would simply register again; once its
    session lapsed it is unregistered and its session ends."""
    h = cluster(3)
    reply = unregister(h, 3)
    assert reply.error == Errors.INVALID_REQUEST
    assert reply.message == "broker 3 is still running (unfenced): it must be shut down first (R37)"
    assert h.heartbeat(3, want_fence=True).is_fenced
    assert h.heartbeat(3, want_fence=True).is_fenced  # fenced, and its session lives on
    reply = unregister(h, 3)
    assert reply.error == Errors.INVALID_REQUEST and "(fenced but still heartbeating)" in reply.message
    assert 3 in h.controller.image.brokers
    h.now += TIMEOUT  # no heartbeat since: gone, though no tick has ended its session yet
    assert h.controller.heartbeats.has_session(3)
    assert unregister(h, 3).error == Errors.NONE and not h.controller.heartbeats.has_session(3)


def test_r39_a_broker_that_is_still_a_replica_is_not_unregistered_and_the_partition_is_named():
    """R39: its replicas are reassigned away first, also those of a reassignment still under way
    (the broker is among the replicas leaving)."""
    h = cluster(4)
    assert h.create(placement="explicit", assignment={0: [1, 2, 4]}) == "NONE"
    shut_down(h, 4)
    reply = unregister(h, 4)
    assert reply.error == Errors.INVALID_REPLICA_ASSIGNMENT
    assert reply.message == ("broker 4 is still a replica of t/0 (replicas [1, 2, 4]): "
                             "its replicas must be reassigned away first (R39)")
    assert h.call(AlterPartitionReassignmentsRequest("t", 0, [1, 2, 3])).error == Errors.NONE
    assert h.part().removing == [4]
    reply = unregister(h, 4)
    assert reply.error == Errors.INVALID_REPLICA_ASSIGNMENT and "t/0 (replicas [1, 2, 3, 4])" in reply.message


def test_r37_r39_a_shut_down_broker_without_replicas_is_unregistered_with_its_current_epoch():
    """R39: reassigned away (R35), shut down under control (R37), then unregistered: one record with
    its epoch, a `broker-unregistered` event, no partition touched, gone from the status and metadata."""
    h = moved_off_4()
    shut_down(h, 4)
    epoch, partitions = h.epoch(4), dict(h.controller.image.partitions)
    reply = unregister(h, 4)
    assert (reply.error, reply.message) == (Errors.NONE, f"broker 4 (epoch {epoch}) unregistered")
    assert appended(h.outputs[-1]) == [UnregisterBrokerRecord(broker_id=4, broker_epoch=epoch)]
    assert h.events("broker-unregistered") == [{"broker_id": 4, "broker_epoch": epoch}]
    assert h.controller.image.partitions == partitions
    assert [b["broker_id"] for b in h.controller.describe()["brokers"]] == [1, 2, 3]
    assert 4 not in build_metadata_response(h.controller.image, None, 100).endpoints
    assert not h.controller.heartbeats.has_session(4)


def test_r22_r39_the_answer_and_event_wait_for_the_commit():
    """R22: the UnregisterBroker answer and `broker-unregistered` are released only once the
    record is committed; the controller's own image has it at once."""
    h = moved_off_4()
    shut_down(h, 4)
    c = h.controller
    out = c.on_request("unregister", UnregisterBrokerRequest(4), h.now)
    assert [type(r) for r in appended(out)] == [UnregisterBrokerRecord] and not out.messages and not out.events
    assert 4 not in c.image.brokers
    assert not c.on_committed(c.log_end_offset - 1).messages
    released = c.on_committed(c.log_end_offset)
    assert [m.ctx for m in released.messages] == ["unregister"]
    assert [e.kind for e in released.events] == ["broker-unregistered"]


def test_r24_r39_an_unregistered_broker_stays_gone_heartbeats_refused_ticks_add_nothing():
    """R24, R39: a heartbeat of the old epoch is answered as for a broker never registered
    (BROKER_ID_NOT_REGISTERED, no session), later ticks neither fence nor resurrect it, and a
    second UnregisterBroker is refused."""
    h = moved_off_4()
    shut_down(h, 4)
    epoch = h.epoch(4)
    unregister(h, 4)
    reply = h.call(BrokerHeartbeatRequest(4, epoch, h.controller.image.offset))
    assert isinstance(reply, BrokerHeartbeatResponse) and reply.error == Errors.BROKER_ID_NOT_REGISTERED
    assert not h.controller.heartbeats.has_session(4)
    end = h.controller.log_end_offset
    for b in (1, 2, 3):
        h.heartbeat(b)
    h.tick(h.now + TIMEOUT / 2)
    assert h.controller.log_end_offset == end and 4 not in h.controller.image.brokers
    assert unregister(h, 4).error == Errors.BROKER_ID_NOT_REGISTERED


def test_r23_r39_the_id_registers_again_at_once_with_a_new_epoch():
    """R23, R39: a new broker process with the id is admitted at once (no old session to wait
    for) with a new, higher epoch: the unregistered epoch is never reused."""
    h = moved_off_4()
    shut_down(h, 4)
    old = h.epoch(4)
    unregister(h, 4)
    reply = h.register(4, "a-new-process", previous=old)
    assert reply.error == Errors.NONE and reply.broker_epoch > old
    assert reply.broker_epoch == h.controller.log_end_offset - 1
    assert h.events("registered")[-1]["clean"] is False  # R28: its old epoch is no registration's now


def complete_move_to_3(h: Harness, topic: str) -> None:
    """R35: the leader of `topic`/0 adds broker 3 to the ISR, which completes its move to [1, 2, 3]."""
    p = h.part(topic)
    members = [IsrMember(b, h.epoch(b)) for b in [*p.isr, 3]]
    reply = h.call(AlterPartitionRequest(p.leader, h.epoch(p.leader), topic, 0, p.leader_epoch, p.partition_epoch,
                                         members))
    assert reply.error == Errors.NONE and h.part(topic).replicas == [1, 2, 3]


def test_r34_r40_no_new_replica_is_placed_on_an_unregistered_broker():
    """R39: once unregistered, the broker is no candidate for R34/R40 placement, for an explicit
    assignment, for added partitions or for a reassignment target, though while it was only
    fenced an explicit assignment and a reassignment could still name it."""
    h = moved_off_4()
    shut_down(h, 4)
    assert h.create("before", rf=3, placement="explicit", assignment={0: [1, 2, 4]}) == "NONE"
    assert h.call(AlterPartitionReassignmentsRequest("before", 0, [1, 2, 3])).error == Errors.NONE
    complete_move_to_3(h, "before")
    assert unregister(h, 4).error == Errors.NONE
    assert h.create("explicit", rf=3, placement="explicit", assignment={0: [1, 2, 4]}) == "INVALID_REQUEST"
    for placement in ("round-robin", "rack-aware"):
        assert h.create(placement, partitions=6, rf=3, placement=placement) == "NONE"
    assert h.call(CreatePartitionsRequest("round-robin", 9)).error == Errors.NONE
    reply = h.call(AlterPartitionReassignmentsRequest("t", 0, [1, 2, 4]))
    assert reply.error == Errors.INVALID_REPLICA_ASSIGNMENT and "(no broker [4])" in reply.message
    assert len(h.controller.image.partitions) == 1 + 1 + 6 + 9
    assert all(4 not in p.replicas for p in h.controller.image.partitions.values())


def test_r22_r39_a_controller_replaying_the_log_or_loading_a_snapshot_never_reuses_the_epoch():
    """R22, R23, R39: a controller that replays the log, or starts from a snapshot taken after the
    unregistration, has no broker 4 and gives the next registration of 4 a higher epoch."""
    h = moved_off_4()
    shut_down(h, 4)
    old = h.epoch(4)
    unregister(h, 4)
    records = [(a.base_offset + i, r) for out in h.outputs for a in out.disk for i, r in enumerate(a.records)]
    replayed = Controller(100, ControllerConfig(session_timeout=TIMEOUT))
    assert all(replayed.replay(o, r) for o, r in records)
    snapshotted = Controller(100, ControllerConfig(session_timeout=TIMEOUT))
    snapshotted.load_snapshot(MetadataImage.from_state(h.controller.image.to_state()))
    for c in (replayed, snapshotted):
        assert c.describe()["brokers"] == h.controller.describe()["brokers"] and 4 not in c.image.brokers
        out = c.on_request("r", BrokerRegistrationRequest(4, "new", None), 100.0)
        out.extend(c.on_committed(c.log_end_offset))
        (reply,) = out.messages
        assert reply.message.error == Errors.NONE and reply.message.broker_epoch > old


# ============================================================================ brokers
def test_r18_r20_r39_a_leader_applying_the_unregistration_still_acknowledges_produces():
    """R39 on a broker: the record is a broker change (R18 re-reads epochs and fencing); the
    leader of t/0 on [1, 2] keeps taking acks=all produces, acknowledged once follower 2 fetched."""
    h = cluster(3)
    assert h.create(placement="explicit", rf=2, assignment={0: [1, 2]}) == "NONE"
    shut_down(h, 3)
    b = broker_1(h)
    assert unregister(h, 3).error == Errors.NONE
    feed(b, h, 1.0)
    assert b.image.broker_epoch(3) == -1 and b.malformed_metadata == 0
    assert not replies(produce(b, "held", 1.1))  # acks=all waits for follower 2 (R20)
    fetch = FetchRequest(2, h.epoch(2), partitions=[FetchPartition("t", 0, 1, 0, h.part().leader_epoch)])
    answered = replies(b.on_request("fetch", fetch, 1.2))
    held = answered["held"]
    assert isinstance(held, ProduceResponse) and (held.error, held.base_offset) == (Errors.NONE, 0)


def test_r24_r39_a_still_running_broker_that_sees_its_own_unregistration_registers_again():
    """R39: a broker cut off long enough to be fenced (R24) and unregistered, yet still running,
    applies its own unregistration like any record (nothing special, no crash); its heartbeat is
    then refused with BROKER_ID_NOT_REGISTERED and it registers again, with a new epoch."""
    h = cluster(3)
    assert h.create(placement="explicit", rf=2, min_isr=1, assignment={0: [1, 2]}) == "NONE"
    b3 = BrokerState(BrokerConfig(3, None, "inc-3"), {}, -1)
    b3.tick(0.0)
    b3.on_response(("register",), BrokerRegistrationResponse(Errors.NONE, h.epoch(3)), 0.0)
    feed(b3, h, 0.1)
    old = b3.broker_epoch
    h.now = 0.5
    h.heartbeat(1)
    h.heartbeat(2)
    h.tick(1.2)  # broker 3's session expired: fenced (R24)
    assert unregister(h, 3).error == Errors.NONE
    out = feed(b3, h, 1.3)
    assert b3.image.broker_epoch(3) == -1 and b3.partitions == {}
    assert {e.kind for e in out.events} <= {"metadata-applied"}
    [heartbeat] = [m for m in b3.tick(1.4).messages if isinstance(m.message, BrokerHeartbeatRequest)]
    refused = h.call(heartbeat.message)
    assert refused.error == Errors.BROKER_ID_NOT_REGISTERED
    b3.on_response(heartbeat.correlation, refused, 1.5)
    assert b3.broker_epoch == -1
    [registration] = [m for m in b3.tick(1.6).messages if isinstance(m, Send)
                      and isinstance(m.message, BrokerRegistrationRequest)]
    again = h.call(registration.message)
    assert again.error == Errors.NONE and again.broker_epoch > old
