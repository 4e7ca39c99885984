"""MetadataImage (R3) and the metadata response built from it."""
from dataclasses import asdict

import pytest

from broker.common.errors import Errors
from broker.protocol.broker import BrokerConfig, BrokerState
from broker.protocol.metadata_image import (
    MetadataImage,
    OutOfOrderRecord,
    build_metadata_response,
    partition_metadata,
    partition_view,
)
from broker.protocol.messages import MetadataFetchResponse
from broker.protocol.outputs import PersistMetadataSnapshot
from broker.protocol.records import (
    BadRecord,
    BrokerRegistrationChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    from_dict,
    to_dict,
)


def _image() -> MetadataImage:
    image = MetadataImage()
    records = [
        RegisterBrokerRecord(broker_id=1, broker_epoch=0, incarnation_id="a", rack="r1", clean=True),
        RegisterBrokerRecord(broker_id=2, broker_epoch=1, incarnation_id="b", rack=None, clean=False),
        BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, fenced=False),
        TopicRecord(name="t", partitions=2, replication_factor=2, min_insync_replicas=1),
        PartitionRecord(topic="t", partition=0, replicas=[1, 2], isr=[1, 2], leader=1),
        PartitionRecord(topic="t", partition=1, replicas=[2, 1], isr=[2, 1], leader=2),
    ]
    for offset, record in enumerate(records):
        assert image.apply(offset, from_dict(to_dict(record)))
    return image


def test_r3_image_materialises_records_in_log_order():
    """R3: brokers act on the materialised result; the later PartitionRecord wins."""
    image = _image()
    assert image.offset == 5
    assert image.unfenced_brokers() == [1]
    assert image.brokers[2].registered_offset == 1 and image.brokers[2].clean is False
    assert image.broker_epoch(2) == 1 and image.broker_epoch(9) == -1
    image.apply(6, PartitionRecord(topic="t", partition=0, replicas=[1, 2], isr=[1], leader=1,
                                   partition_epoch=1, reason="isr-shrink"))
    assert image.partition("t", 0).isr == [1]
    assert [p.partition for p in image.partitions_of("t")] == [0, 1]
    assert image.partitions_of("nope") == []


def test_r3_records_naming_unknown_things_are_refused_and_counted():
    """R3: unknown broker, stale broker epoch, unknown topic, partition out of range -> False, offset moves."""
    image = _image()
    refused = [
        BrokerRegistrationChangeRecord(broker_id=7, broker_epoch=0, fenced=False),
        BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=0, fenced=False),
        PartitionRecord(topic="nope", partition=0, replicas=[1], isr=[1]),
        PartitionRecord(topic="t", partition=5, replicas=[1], isr=[1]),
        TopicRecord(name="t", partitions=9, replication_factor=1, min_insync_replicas=1),
    ]
    assert [image.apply(10 + i, r) for i, r in enumerate(refused)] == [False] * 5
    assert image.offset == 14 and image.brokers[2].fenced and image.topics["t"].partitions == 2


def test_r3_out_of_order_offset_raises():
    """R3: records apply in log order; replaying an old offset is the caller's bug."""
    image = _image()
    with pytest.raises(OutOfOrderRecord):
        image.apply(5, TopicRecord(name="u", partitions=1, replication_factor=1, min_insync_replicas=1))


def test_r23_reregistration_replaces_the_broker_and_clears_shutdown_state():
    """R23: a new RegisterBrokerRecord is a new session: new epoch, fenced, not shutting down."""
    image = _image()
    image.apply(6, BrokerRegistrationChangeRecord(broker_id=1, broker_epoch=0, in_controlled_shutdown=True))
    image.apply(7, RegisterBrokerRecord(broker_id=1, broker_epoch=7, incarnation_id="c", rack="r1", clean=True))
    b = image.brokers[1]
    assert (b.broker_epoch, b.fenced, b.in_controlled_shutdown, b.registered_offset) == (7, True, False, 7)


def test_metadata_response_lists_unfenced_brokers_and_requested_partitions():
    """Clients find leaders from the image; an unknown topic is reported, known ones still described."""
    image = _image()
    response = build_metadata_response(image, None, controller_id=100)
    assert (response.error, response.controller_id, response.brokers, response.metadata_offset) == (
        Errors.NONE, 100, [1], 5)
    assert [(p.partition, p.leader, p.isr) for p in response.partitions] == [(0, 1, [1, 2]), (1, 2, [2, 1])]
    partial = build_metadata_response(image, ["t", "nope"], controller_id=100)
    assert partial.error == Errors.UNKNOWN_TOPIC_OR_PARTITION and len(partial.partitions) == 2


def test_r22_a_snapshot_of_the_image_rebuilds_the_same_image():
    """A metadata snapshot (KIP-630) is the image as plain data: loading it gives back the
    image the records built, registration offsets included (R24 unfences on them)."""
    image = _image()
    again = MetadataImage.from_state(image.to_state())
    assert again.to_state() == image.to_state() and again.offset == 5
    assert again.brokers[2].registered_offset == 1 and again.partition("t", 1).leader == 2
    again.apply(6, PartitionRecord(topic="t", partition=1, replicas=[2, 1], isr=[2], leader=2))
    assert again.partition("t", 1).isr == [2]


@pytest.mark.parametrize("state", [None, {}, {"offset": "x"}, {"offset": 1, "brokers": [{"broker_id": 1}],
                                                                  "topics": [], "partitions": []},
                                   {"offset": 1, "brokers": [], "topics": [{"type": "partition"}], "partitions": []}])
def test_a_malformed_snapshot_is_refused(state):
    with pytest.raises(BadRecord):
        MetadataImage.from_state(state)


def test_r22_a_broker_below_the_log_start_loads_the_snapshot_and_refuses_a_malformed_one():
    """A broker whose fetch offset the controller compacted away gets the snapshot and the
    records after it; a malformed snapshot is counted and changes nothing."""
    broker = BrokerState(BrokerConfig(broker_id=1, rack=None, incarnation_id="i"), {}, -1)
    bad = MetadataFetchResponse(snapshot={"end": 6, "image": {"offset": 5}, "digest": 1}, base_offset=6)
    assert not broker._on_metadata(bad, 0.0).disk and broker.malformed_metadata == 1 and broker.image.offset == -1
    snapshot = {"end": 6, "image": _image().to_state(), "digest": 42}
    follow = to_dict(PartitionRecord(topic="t", partition=0, replicas=[1, 2], isr=[1], leader=1))
    out = broker._on_metadata(MetadataFetchResponse(records=[follow], base_offset=6, high_watermark=7,
                                                    snapshot=snapshot), 0.0)
    assert out.disk[0] == PersistMetadataSnapshot(snapshot)
    assert broker.image.offset == 6 and broker.image.partition("t", 0).isr == [1] and broker.caught_up


def test_a_partition_view_is_its_metadata_as_a_dict() -> None:
    """`partition_view` stands for `asdict(partition_metadata(p))` in the controller's status."""
    p = PartitionRecord("t", 2, [1, 2, 3], [1, 2], 1, 4, 7, elr=[3], last_known_elr=[3], adding=[3], removing=[4])
    assert partition_view(p) == asdict(partition_metadata(p))
    assert list(partition_view(p)) == list(asdict(partition_metadata(p)))


def test_to_dict_is_asdict_with_the_type() -> None:
    """`to_dict` copies most records field by field; what it gives is `asdict`'s, in its order."""
    for rec in (PartitionRecord("t", 1, [1, 2], [1], 2, 3, 4, elr=[3], removing=[5], reason="x"),
                TopicRecord("t", 3, 3, 2, {"flush": {"messages": 1}}), TopicRecord("t", 3, 3, 2),
                RegisterBrokerRecord(1, 2, "abc", None, True), BrokerRegistrationChangeRecord(1, 2)):
        d = to_dict(rec)
        assert d == {**asdict(rec), "type": d["type"]} and list(d) == [*asdict(rec), "type"]
