"""Deleting a topic and adding partitions to one (R40, Kafka's DeleteTopics and CreatePartitions),
on the pure pieces: the image's records (R3), the controller's decisions (R22, R34), and a
broker that applies them from its metadata fetches (R35's replica deletion, R20 held produces)."""
from __future__ import annotations

from broker.common.errors import Errors
from broker.common.record_batch import encode_record_set
from broker.protocol.broker import BrokerConfig, BrokerState, LocalReplica
from broker.protocol.epochs import EpochHistory
from broker.protocol.messages import (
    MESSAGE_TYPES,
    AlterPartitionReassignmentsRequest,
    AlterPartitionRequest,
    BrokerRegistrationResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    InstallSnapshotRequest,
    IsrMember,
    MetadataFetchResponse,
    ProduceRequest,
    ProduceResponse,
)
from broker.protocol.metadata_image import MetadataImage
from broker.protocol.outputs import (
    AppendMetadata,
    DeletePartition,
    Outputs,
    PersistMetadata,
    PersistMetadataSnapshot,
    Reply,
    Send,
)
from broker.protocol.placement import place_topic
from broker.protocol.records import (
    DIGEST_INTERVAL,
    BrokerRegistrationChangeRecord,
    PartitionCountRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    from_dict,
    to_dict,
)
from broker.wire.codec import decode, encode
from tests.unit.test_controller import Harness, cluster
from tests.unit.test_recovery_and_reassignment import answer, log_info_requests, outage, unfence_all

ACKS_ALL = -1


# ============================================================================ records and messages
def test_r22_new_records_round_trip_under_their_type_names():
    """R22: the metadata log carries records as dicts; the two new ones keep Kafka's vocabulary."""
    remove, grow = RemoveTopicRecord(name="t"), PartitionCountRecord(name="t", partitions=4)
    assert to_dict(remove) == {"name": "t", "type": "remove-topic"}
    assert to_dict(grow) == {"name": "t", "partitions": 4, "type": "partition-count"}
    assert from_dict(to_dict(remove)) == remove and from_dict(to_dict(grow)) == grow


def test_new_messages_take_new_type_ids_and_cross_the_wire():
    """The admin messages come after every existing type: ids already on the wire do not move."""
    assert MESSAGE_TYPES.index(InstallSnapshotRequest) == 29
    assert MESSAGE_TYPES[30:34] == (DeleteTopicsRequest, DeleteTopicsResponse, CreatePartitionsRequest,
                                    CreatePartitionsResponse)
    for msg in (DeleteTopicsRequest(["a", "b"]), DeleteTopicsResponse({"a": Errors.NONE.value}),
                CreatePartitionsRequest("a", 6), CreatePartitionsResponse(Errors.INVALID_PARTITIONS, "3 -> 2")):
        assert decode(encode(msg, 7, "client")).msg == msg


# ============================================================================ the image (R3)
def _image() -> MetadataImage:
    """Broker 1; topics t (2 partitions) and u (1)."""
    image = MetadataImage()
    records = [
        RegisterBrokerRecord(broker_id=1, broker_epoch=0, incarnation_id="a", rack=None, clean=True),
        TopicRecord(name="t", partitions=2, replication_factor=1, min_insync_replicas=1),
        PartitionRecord(topic="t", partition=0, replicas=[1], isr=[1], leader=1, leader_epoch=3),
        PartitionRecord(topic="t", partition=1, replicas=[1], isr=[1], leader=1),
        TopicRecord(name="u", partitions=1, replication_factor=1, min_insync_replicas=1),
        PartitionRecord(topic="u", partition=0, replicas=[1], isr=[1], leader=1),
    ]
    for offset, record in enumerate(records):
        assert image.apply(offset, record)
    return image


def test_r3_remove_topic_drops_the_topic_and_every_partition_of_it_only():
    """R3, R40: a RemoveTopicRecord of a known topic removes it and its partitions; an unknown
    topic is refused (False), the offset still moves."""
    image = _image()
    assert image.apply(6, RemoveTopicRecord(name="t"))
    assert sorted(image.topics) == ["u"] and sorted(image.partitions) == [("u", 0)]
    assert image.partitions_of("t") == []
    assert not image.apply(7, RemoveTopicRecord(name="t")) and not image.apply(8, RemoveTopicRecord(name="nope"))
    assert image.offset == 8 and sorted(image.partitions) == [("u", 0)]


def test_r3_partition_count_only_grows_a_known_topic():
    """R3, R40: PartitionCountRecord raises the topic's count, and only then are PartitionRecords
    of the new indexes accepted; a count not larger, or an unknown topic, is refused."""
    image = _image()
    before = image.topics["t"]
    assert not image.apply(6, PartitionRecord(topic="t", partition=2, replicas=[1], isr=[1], leader=1))
    refused = [PartitionCountRecord(name="t", partitions=2), PartitionCountRecord(name="t", partitions=1),
               PartitionCountRecord(name="nope", partitions=5)]
    assert [image.apply(7 + i, r) for i, r in enumerate(refused)] == [False] * 3
    assert image.topics["t"].partitions == 2 and "nope" not in image.topics
    assert image.apply(10, PartitionCountRecord(name="t", partitions=3))
    assert image.apply(11, PartitionRecord(topic="t", partition=2, replicas=[1], isr=[1], leader=1))
    assert image.topics["t"].partitions == 3 and before.partitions == 2  # replaced, not changed in place
    assert image.topics["t"].replication_factor == before.replication_factor
    assert [p.partition for p in image.partitions_of("t")] == [0, 1, 2]


def test_r22_snapshot_round_trip_after_a_deletion_and_a_growth():
    """R22 (KIP-630 snapshots): the image after both new records is what its snapshot rebuilds."""
    image = _image()
    image.apply(6, RemoveTopicRecord(name="u"))
    image.apply(7, PartitionCountRecord(name="t", partitions=3))
    image.apply(8, PartitionRecord(topic="t", partition=2, replicas=[1], isr=[1], leader=1))
    again = MetadataImage.from_state(image.to_state())
    assert again.to_state() == image.to_state()
    assert "u" not in again.topics and again.topics["t"].partitions == 3 and again.partition("t", 2).leader == 1


def test_r40_a_deleted_topic_can_be_created_again_from_scratch():
    """R40: after a deletion the name is free; the new topic's partitions start over (epoch 0),
    with its own partition count, and none of the old partitions comes back."""
    image = _image()
    image.apply(6, RemoveTopicRecord(name="t"))
    assert image.apply(7, TopicRecord(name="t", partitions=1, replication_factor=1, min_insync_replicas=1))
    assert image.partitions_of("t") == []
    assert image.apply(8, PartitionRecord(topic="t", partition=0, replicas=[1], isr=[1], leader=1))
    assert image.partition("t", 0).leader_epoch == 0
    assert not image.apply(9, PartitionRecord(topic="t", partition=1, replicas=[1], isr=[1], leader=1))


# ============================================================================ the controller (R22, R40)
def appended(out: Outputs) -> list:
    return [r for op in out.disk if isinstance(op, AppendMetadata) for r in op.records]


def two_partitions(**config) -> Harness:
    """Brokers 1-3 up; t/0 on [1, 2, 3] (led by 1), t/1 on [2, 1, 3] (led by 2), MinISR 2."""
    h = cluster(3, **config)
    assert h.create(partitions=2, placement="explicit", assignment={0: [1, 2, 3], 1: [2, 1, 3]}) == "NONE"
    return h


def test_r40_delete_topics_removes_known_topics_and_reports_unknown_ones():
    """R40: a known topic leaves the metadata in one RemoveTopicRecord, with a `topic-deleted`
    event; an unknown one answers UNKNOWN_TOPIC_OR_PARTITION and appends nothing."""
    h = two_partitions()
    resp = h.call(DeleteTopicsRequest(["t", "nope", "t"]))
    assert isinstance(resp, DeleteTopicsResponse)
    assert resp.errors == {"t": "NONE", "nope": "UNKNOWN_TOPIC_OR_PARTITION"}
    assert appended(h.outputs[-1]) == [RemoveTopicRecord(name="t")]
    assert "t" not in h.controller.image.topics and h.controller.image.partitions == {}
    assert h.events("topic-deleted") == [{"topic": "t", "partitions": 2}]
    end = h.controller.log_end_offset
    assert h.call(DeleteTopicsRequest(["t"])).errors == {"t": "UNKNOWN_TOPIC_OR_PARTITION"}
    assert h.controller.log_end_offset == end and not appended(h.outputs[-1])


def test_r22_admin_answers_and_events_wait_for_the_commit():
    """R22: the DeleteTopics and CreatePartitions answers (and `topic-deleted`) are released only
    once the records they rest on are committed; the controller's image has them at once."""
    h = two_partitions()
    c = h.controller
    out = c.on_request("delete", DeleteTopicsRequest(["t"]), h.now)
    assert appended(out) == [RemoveTopicRecord(name="t")] and not out.messages and not out.events
    assert "t" not in c.image.topics
    assert not c.on_committed(c.log_end_offset - 1)
    released = c.on_committed(c.log_end_offset)
    assert [m.ctx for m in released.messages] == ["delete"] and [e.kind for e in released.events] == ["topic-deleted"]
    assert h.create(partitions=1) == "NONE"
    out = c.on_request("grow", CreatePartitionsRequest("t", 2), h.now)
    assert isinstance(appended(out)[0], PartitionCountRecord) and not out.messages
    [reply] = c.on_committed(c.log_end_offset).messages
    assert reply.ctx == "grow" and reply.message.error == Errors.NONE


def test_r34_r40_added_partitions_are_placed_rack_aware_on_live_brokers_with_the_topic_rf():
    """R40: the new partitions continue the topic's ids and are placed as R34 places a new topic
    (rack-aware, even for a topic created round-robin) on the brokers up now, keeping its RF;
    each starts with its replicas as ISR and the first as leader."""
    h = Harness()
    h.start([1, 2, 3, 4], racks={1: "a", 2: "b", 3: "a", 4: "b"})
    assert h.create(partitions=2, rf=2, min_isr=1, placement="round-robin") == "NONE"
    h.heartbeat(4, want_fence=True)
    old = [h.part("t", p) for p in (0, 1)]
    resp = h.call(CreatePartitionsRequest("t", 5))
    assert isinstance(resp, CreatePartitionsResponse) and resp.error == Errors.NONE, resp
    records = appended(h.outputs[-1])
    assert records[0] == PartitionCountRecord(name="t", partitions=5)
    assert [(r.topic, r.partition) for r in records[1:]] == [("t", 2), ("t", 3), ("t", 4)]
    racks = {1: "a", 2: "b", 3: "a"}  # the brokers up
    expected = place_topic("rack-aware", "t", 5, 2, racks, h.controller.config.placement_seed)
    for p in (2, 3, 4):
        part = h.part("t", p)
        assert part.replicas == expected[p] and 4 not in part.replicas and len(part.replicas) == 2
        assert {racks[r] for r in part.replicas} == {"a", "b"}  # I9
        assert (part.leader, part.isr, part.leader_epoch, part.reason) == (part.replicas[0], part.replicas, 0, "create")
    assert [h.part("t", p) for p in (0, 1)] == old and h.controller.image.topics["t"].partitions == 5
    assert [e["partition"] for e in h.events("partition-changed") if e["reason"] == "create"][-3:] == [2, 3, 4]


def test_r40_create_partitions_refusals_append_nothing():
    """R40: an unknown topic (UNKNOWN_TOPIC_OR_PARTITION), a count not above the current one
    (INVALID_PARTITIONS, saying both counts), and too few brokers up for the topic's RF so that
    a new partition would have no live replica (INVALID_REPLICATION_FACTOR, as a new topic)."""
    h = two_partitions()
    end = h.controller.log_end_offset
    unknown = h.call(CreatePartitionsRequest("nope", 3))
    same, fewer = h.call(CreatePartitionsRequest("t", 2)), h.call(CreatePartitionsRequest("t", 1))
    assert unknown.error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert (same.error, fewer.error) == (Errors.INVALID_PARTITIONS, Errors.INVALID_PARTITIONS)
    assert "has 2 partitions, asked for 1" in fewer.message and "asked for 2" in same.message
    assert h.controller.log_end_offset == end
    h.heartbeat(3, want_fence=True)
    end = h.controller.log_end_offset
    short = h.call(CreatePartitionsRequest("t", 3))
    assert short.error == Errors.INVALID_REPLICATION_FACTOR
    assert h.controller.log_end_offset == end and h.controller.image.topics["t"].partitions == 2


def test_r40_after_a_deletion_fencing_elections_and_reassignment_see_no_partition_of_it():
    """R22, R25, R35, R36: once the topic is gone (mid-reassignment), fencing changes no partition,
    a preferred election finds none, and requests naming its partitions are answered
    UNKNOWN_TOPIC_OR_PARTITION."""
    h = two_partitions()
    h.register(4)
    h.heartbeat(4)
    assert h.call(AlterPartitionReassignmentsRequest("t", 0, [1, 2, 4])).error == Errors.NONE
    assert h.part().adding == [4]
    h.call(DeleteTopicsRequest(["t"]))
    h.heartbeat(1, want_fence=True)
    assert [type(r) for r in appended(h.outputs[-1])] == [BrokerRegistrationChangeRecord]
    h.tick(0.5)
    assert h.call(ElectLeadersRequest("preferred")).errors == {}
    assert h.call(AlterPartitionReassignmentsRequest("t", 0, [1, 2, 3])).error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    alter = AlterPartitionRequest(2, h.epoch(2), "t", 0, 0, 1, [IsrMember(2, h.epoch(2))])
    assert h.call(alter).error == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert h.controller.image.partitions == {}


def test_r32_r40_deleting_a_topic_ends_its_unclean_recovery():
    """R32, R40: a balanced search for t/0's best log ends with the topic: a late answer counts
    for nothing, nothing more is asked, and t created again is a new partition led at once."""
    h = cluster(unclean_recovery="balanced")
    outage(h)
    assert log_info_requests(h.tick(101.0))
    assert h.controller.recovery.searching() == [("t", 0)]
    h.call(DeleteTopicsRequest(["t"]))
    assert h.controller.recovery.searching() == []
    unfence_all(h)
    answer(h, 2, 0, 12)
    assert not log_info_requests(h.tick(101.2)) and h.events("unclean-recovery") == []
    assert h.create(placement="explicit", assignment={0: [1, 2, 3]}) == "NONE"
    assert not log_info_requests(h.tick(101.4))  # within the brokers' sessions
    p = h.part()
    assert (p.leader, p.isr, p.leader_epoch, p.last_known_elr) == (1, [1, 2, 3], 0, [])


# ============================================================================ a broker (R22, R35, R40)
def metadata_log(h: Harness) -> list[dict]:
    """The controller's metadata log so far, as the dicts a MetadataFetchResponse carries."""
    by_offset = {op.base_offset + i: to_dict(r) for out in h.outputs for op in out.disk
                 if isinstance(op, AppendMetadata) for i, r in enumerate(op.records)}
    assert sorted(by_offset) == list(range(len(by_offset)))
    return [by_offset[o] for o in range(len(by_offset))]


def feed(b: BrokerState, h: Harness, now: float) -> Outputs:
    """Hand the broker every committed record it has not fetched yet (R22)."""
    log = metadata_log(h)
    start = b.image.offset + 1
    return b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, log[start:], start, len(log), 100), now)


def broker_1(h: Harness, local: dict | None = None, persisted: list | None = None) -> BrokerState:
    """Broker 1, registered with its epoch at the controller and caught up with its log."""
    b = BrokerState(BrokerConfig(1, None, "inc-1"), local or {}, -1, metadata_records=persisted)
    b.tick(0.0)
    b.on_response(("register",), BrokerRegistrationResponse(Errors.NONE, h.epoch(1)), 0.0)
    feed(b, h, 0.1)
    assert b.caught_up
    return b


def replies(out: Outputs) -> dict:
    return {m.ctx: m.message for m in out.messages if isinstance(m, Reply)}


def produce(b: BrokerState, ctx: str, now: float, partition: int = 0, acks: int = ACKS_ALL) -> Outputs:
    return b.on_request(ctx, ProduceRequest("t", partition, acks, 30_000, encode_record_set([b"v"])), now)


def test_r35_r40_a_removed_topic_closes_every_local_replica_and_deletes_its_log():
    """R40 (R35's replica deletion): the RemoveTopicRecord arrives in a metadata fetch; the leader
    replica answers its held acks=all produce as on a step-down (R20: outcome unknown), a parked
    fetch completes with UNKNOWN_TOPIC_OR_PARTITION, both replicas are dropped and their logs
    deleted before the record is kept, and the fetcher forgets the followed partition."""
    h = two_partitions()
    b = broker_1(h)
    assert (b.partitions[("t", 0)].role, b.partitions[("t", 1)].role) == ("leader", "follower")
    assert b.fetchers.leaders() == {2: [("t", 1)]}
    assert not replies(produce(b, "held", 1.0))  # acks=all waits for the followers (R20)
    parked = FetchRequest(-1, max_wait_ms=10_000, partitions=[FetchPartition("t", 0, 0)])
    assert not replies(b.on_request("parked", parked, 1.0)) and b.parked
    sent = [m for m in b.tick(1.1).messages if isinstance(m, Send) and m.correlation[0] == "fetch"]
    assert [s.destination for s in sent] == [2]

    h.call(DeleteTopicsRequest(["t"]))
    out = feed(b, h, 2.0)

    assert b.partitions == {} and b.fetchers.leaders() == {} and b.parked == []
    deletes = [op for op in out.disk if isinstance(op, DeletePartition)]
    assert deletes == [DeletePartition("t", 0), DeletePartition("t", 1)]
    assert out.disk.index(deletes[-1]) < next(i for i, op in enumerate(out.disk) if isinstance(op, PersistMetadata))
    assert [e.fields for e in out.events if e.kind == "replica-deleted"] == [
        {"topic": "t", "partition": 0, "reason": "topic-deleted"},
        {"topic": "t", "partition": 1, "reason": "topic-deleted"}]
    answered = replies(out)
    held = answered["held"]
    assert isinstance(held, ProduceResponse) and (held.error, held.appended) == (Errors.NOT_LEADER_OR_FOLLOWER, True)
    assert isinstance(answered["parked"], FetchResponse)  # nothing to read: the response as it is
    assert [r.error for r in answered["parked"].partitions] == [Errors.UNKNOWN_TOPIC_OR_PARTITION]
    late = FetchResponse(partitions=[FetchPartitionResult("t", 1, high_watermark=0, log_end_offset=0)])
    assert not b.on_response(sent[0].correlation, late, 2.1).disk  # the fetch in flight is ignored
    assert not [m for m in b.tick(2.2).messages if isinstance(m, Send) and m.correlation[0] == "fetch"]
    assert replies(produce(b, "after", 2.3))["after"].error == Errors.UNKNOWN_TOPIC_OR_PARTITION


def test_r40_a_topic_deleted_and_created_again_in_one_fetch_starts_from_empty_replicas():
    """R40: the old replica is deleted when the RemoveTopicRecord is applied, not with the
    fetch's final image, so the topic created again under the same name gets a new replica
    with an empty log, and its log is deleted before anything is written to the new one."""
    h = two_partitions()
    b = broker_1(h)
    produce(b, "written", 1.0, acks=1)
    assert b.partitions[("t", 0)].log_end_offset == 1
    h.call(DeleteTopicsRequest(["t"]))
    assert h.create(partitions=1, placement="explicit", assignment={0: [2, 1, 3]}) == "NONE"
    out = feed(b, h, 2.0)
    assert [op for op in out.disk if isinstance(op, DeletePartition)] == [DeletePartition("t", 0),
                                                                          DeletePartition("t", 1)]
    p = b.partitions[("t", 0)]
    assert (p.log_end_offset, p.role, p.leader_id, p.leader_epoch) == (0, "follower", 2, 0)
    assert sorted(b.partitions) == [("t", 0)] and b.fetchers.leaders() == {2: [("t", 0)]}


def test_r40_a_broker_that_restarted_deletes_the_logs_of_a_topic_removed_meanwhile():
    """R40: a broker that was down when the topic was deleted finds its logs on disk, made no
    replica of them yet (not caught up), and deletes them as it applies the RemoveTopicRecord."""
    h = two_partitions()
    persisted = list(enumerate(metadata_log(h)))
    h.call(DeleteTopicsRequest(["t"]))
    local = {("t", 0): LocalReplica(5, 5, EpochHistory([(0, 0)])), ("t", 1): LocalReplica(2, 2, EpochHistory())}
    b = BrokerState(BrokerConfig(1, None, "inc-1b"), local, -1, metadata_records=persisted)
    assert "t" in b.image.topics and b.partitions == {}
    b.tick(0.0)
    b.on_response(("register",), BrokerRegistrationResponse(Errors.NONE, h.epoch(1)), 0.0)
    out = feed(b, h, 0.1)
    assert [op for op in out.disk if isinstance(op, DeletePartition)] == [DeletePartition("t", 0),
                                                                          DeletePartition("t", 1)]
    assert b.local == {} and b.partitions == {} and b.caught_up


def test_r22_r40_a_snapshot_without_the_topic_deletes_its_replicas_first():
    """R22, R40: a broker behind the controller's compacted log gets a snapshot that no longer
    has the topic: its replicas are closed and their logs deleted before the snapshot is kept."""
    h = two_partitions()
    b = broker_1(h)
    h.call(DeleteTopicsRequest(["t"]))
    end = h.controller.log_end_offset
    snapshot = {"end": end, "image": h.controller.image.to_state(), "digest": 7}
    out = b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, [], end, end, 100, snapshot), 2.0)
    assert [type(op) for op in out.disk] == [DeletePartition, DeletePartition, PersistMetadataSnapshot]
    assert b.partitions == {} and b.fetchers.leaders() == {}


def test_r22_r40_a_snapshot_of_the_topic_made_again_deletes_the_replicas_of_the_old_one():
    """R22, R40 (KIP-516 topic ids): a broker cut off while its topic was deleted and made again
    under the same name gets a snapshot that holds the name, with another id. Found by a
    tester: the broker kept its log of the deleted topic, joined the new one's ISR after a
    truncation to the common epoch-0 prefix, and led it with the old values (730 acks=all
    writes lost). Its replicas are deleted, and the new topic's start empty."""
    h = two_partitions()
    b = broker_1(h)
    produce(b, "old", 1.0, acks=1)
    assert b.partitions[("t", 0)].log_end_offset == 1
    old_id = h.controller.image.topic_ids["t"]
    h.call(DeleteTopicsRequest(["t"]))
    assert h.create(partitions=1, placement="explicit", assignment={0: [2, 1, 3]}) == "NONE"
    assert h.controller.image.topic_ids["t"] != old_id
    end = h.controller.log_end_offset
    snapshot = {"end": end, "image": h.controller.image.to_state(), "digest": 7}
    out = b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, [], end, end, 100, snapshot), 2.0)
    assert [op for op in out.disk if isinstance(op, DeletePartition)] == [DeletePartition("t", 0),
                                                                          DeletePartition("t", 1)]
    p = b.partitions[("t", 0)]
    assert (p.log_end_offset, p.role, p.leader_id) == (0, "follower", 2)
    assert sorted(b.partitions) == [("t", 0)]


def test_r22_r40_a_restarted_broker_deletes_its_logs_of_a_topic_made_again_in_a_snapshot():
    """R22, R40: the same for a broker that was down meanwhile: the logs recovery found belong
    to the topic its stored metadata names, so the snapshot's other id for the name deletes
    them before any replica adopts them."""
    h = two_partitions()
    persisted = list(enumerate(metadata_log(h)))
    h.call(DeleteTopicsRequest(["t"]))
    assert h.create(partitions=2, placement="explicit", assignment={0: [1, 2, 3], 1: [1, 2, 3]}) == "NONE"
    local = {("t", 0): LocalReplica(5, 5, EpochHistory([(0, 0)])), ("t", 1): LocalReplica(2, 2, EpochHistory())}
    b = BrokerState(BrokerConfig(1, None, "inc-1b"), local, -1, metadata_records=persisted)
    b.tick(0.0)
    b.on_response(("register",), BrokerRegistrationResponse(Errors.NONE, h.epoch(1)), 0.0)
    end = h.controller.log_end_offset
    snapshot = {"end": end, "image": h.controller.image.to_state(), "digest": 7}
    out = b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, [], end, end, end, snapshot), 0.1)
    assert [op for op in out.disk if isinstance(op, DeletePartition)] == [DeletePartition("t", 0),
                                                                          DeletePartition("t", 1)]
    assert b.caught_up and {k: p.log_end_offset for k, p in b.partitions.items()} == {("t", 0): 0, ("t", 1): 0}


def test_r22_a_snapshot_keeps_the_replicas_of_a_topic_it_still_holds():
    """R22: the same id in the snapshot: nothing is deleted (the log compacted, nothing else)."""
    h = two_partitions()
    b = broker_1(h)
    produce(b, "kept", 1.0, acks=1)
    end = h.controller.log_end_offset
    snapshot = {"end": end, "image": h.controller.image.to_state(), "digest": 7}
    b.image.offset = -1  # behind the snapshot, as after compaction
    out = b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, [], end, end, 100, snapshot), 2.0)
    assert not [op for op in out.disk if isinstance(op, DeletePartition)]
    assert b.partitions[("t", 0)].log_end_offset == 1


def test_r40_a_broker_leads_and_follows_the_partitions_added_to_its_topic():
    """R40: after PartitionCountRecord and the new PartitionRecords, the broker holds a replica of
    each new partition it is named in, leader or follower as the records say, and fetches the
    followed ones from their leaders; a produce to a new partition it leads is taken."""
    h = cluster(3)
    assert h.create(partitions=1, placement="explicit", assignment={0: [1, 2, 3]}) == "NONE"
    b = broker_1(h)
    assert h.call(CreatePartitionsRequest("t", 4)).error == Errors.NONE
    feed(b, h, 1.0)
    roles = {p: b.partitions[("t", p)].role for p in (1, 2, 3)}
    leaders = {p: h.part("t", p).leader for p in (1, 2, 3)}
    assert sorted(leaders.values()) == [1, 2, 3]  # R34: leaders spread over the brokers
    assert roles == {p: "leader" if leaders[p] == 1 else "follower" for p in (1, 2, 3)}
    assert b.fetchers.leaders() == {leaders[p]: [("t", p)] for p in (1, 2, 3) if leaders[p] != 1}
    mine = next(p for p in (1, 2, 3) if leaders[p] == 1)
    assert replies(produce(b, "new", 1.1, partition=mine, acks=1))["new"].error == Errors.NONE


def _fetch(b: BrokerState, ctx: str, replica: int, epoch: int, offset: int, now: float) -> dict:
    req = FetchRequest(replica, epoch, 10_000, 1, [FetchPartition("t", 0, offset)])
    return replies(b.on_request(ctx, req, now))


def test_r11_r12_a_parked_follower_fetch_waits_for_data_and_a_consumer_s_for_the_hwm():
    """Kafka's delayed fetch: a follower's parked fetch completes when the leader's LEO passes
    its fetch offset (new records to copy), a consumer's when the HWM does (new records it may
    read); a follower learns a new HWM with its next records or at its long poll's end (R12),
    not in a response of its own, which would double the fetches of every acks=all write."""
    h = two_partitions()
    b = broker_1(h)
    assert replies(produce(b, "p0", 1.0, acks=1))["p0"].error == Errors.NONE
    for follower in (2, 3):  # both copy offset 0 at once
        got = _fetch(b, f"copy{follower}", follower, h.epoch(follower), 0, 1.1)[f"copy{follower}"]
        assert [r.error for r in got.response.partitions] == [Errors.NONE] and got.reads[0] is not None
    assert not _fetch(b, "f3", 3, h.epoch(3), 1, 1.2)  # nothing new for 3: parked
    assert not _fetch(b, "consumer", -1, -1, 0, 1.2)  # HWM 0: nothing readable yet
    answered = _fetch(b, "f2", 2, h.epoch(2), 1, 1.3)  # 2 reports LEO 1: HWM 0 -> 1
    assert b.partitions[("t", 0)].high_watermark == 1
    assert set(answered) == {"consumer"}, answered  # the follower's fetches stay parked
    assert answered["consumer"].reads[0] is not None
    out = replies(produce(b, "p1", 1.4, acks=1))  # LEO 1 -> 2: both followers have data to copy
    assert {"f2", "f3"} <= set(out)
    assert [r.high_watermark for r in out["f3"].response.partitions] == [1]


def test_r22_a_broker_records_when_it_applied_each_metadata_batch():
    """DESIGN 8: a change committed out of a broker's reach takes effect when that broker
    applies it, so every applied batch (or snapshot) is a `metadata-applied` event with its
    first (`from`) and last offset. Offsets every DIGEST_INTERVAL records inside a batch keep
    their own event (I8's digests), once: the batch's own when it ends there; a batch with
    nothing new records nothing."""
    h = two_partitions()
    log = metadata_log(h)
    assert len(log) > DIGEST_INTERVAL
    b = BrokerState(BrokerConfig(1, None, "inc-1"), {}, -1)
    b.tick(0.0)
    b.on_response(("register",), BrokerRegistrationResponse(Errors.NONE, h.epoch(1)), 0.0)

    def applied(out: Outputs) -> list[dict]:
        return [e.fields for e in out.events if e.kind == "metadata-applied"]

    end = DIGEST_INTERVAL - 1  # a batch that ends on a digest's offset
    first = applied(b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, log[:end + 1], 0, len(log), 100), 0.1))
    assert first == [{"offset": end, "digest": first[0]["digest"], "from": 0}]
    rest = applied(b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, log, 0, len(log), 100), 0.2))
    assert [(e.get("from"), e["offset"]) for e in rest] == (
        [(None, o) for o in range(2 * DIGEST_INTERVAL - 1, len(log) - 1, DIGEST_INTERVAL)] + [(end + 1, len(log) - 1)])
    assert applied(b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, log, 0, len(log), 100), 0.3)) == []
    h.call(DeleteTopicsRequest(["t"]))
    snap_end = h.controller.log_end_offset
    snapshot = {"end": snap_end, "image": h.controller.image.to_state(), "digest": 7}
    out = b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, [], snap_end, snap_end, 100, snapshot), 0.4)
    assert applied(out) == [{"offset": snap_end - 1, "digest": 7, "from": len(log)}]
