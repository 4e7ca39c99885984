"""FetcherManager: fetch sessions per leader broker (seed 002 section 2.2.1, R7, R10)."""
from __future__ import annotations

import math

from broker.common.errors import Errors
from broker.common.record_batch import build_batch
from broker.protocol.epochs import EpochHistory
from broker.protocol.fetcher import FetcherManager
from broker.protocol.messages import DivergingEpoch, FetchPartitionResult, FetchResponse
from broker.protocol.outputs import Send
from broker.protocol.partition import Partition, PartitionConfig
from broker.protocol.records import PartitionRecord

CONFIG = PartitionConfig(min_insync_replicas=1, replica_lag_max=10.0)
EPOCHS = {1: 101, 2: 102, 3: 103}


def follower(topic: str, leader: int, leader_epoch: int = 1, leo: int = 0) -> Partition:
    history = EpochHistory([(1, 0)] if leo else [])
    p = Partition(topic, 0, 3, CONFIG, leo, 0, history)
    p.on_partition_record(PartitionRecord(topic, 0, [leader, 3], [leader, 3], leader,
                                          leader_epoch, leader_epoch), EPOCHS, {1, 2, 3}, 0.0)
    return p


def manager(*partitions: Partition) -> FetcherManager:
    m = FetcherManager(3, backoff=0.5)
    m.set_broker_epoch(103)
    for p in partitions:
        m.assign(p)
    return m


def sent_by_leader(sends: list[Send]) -> dict[int, tuple]:
    """The correlation of each fetch `sends` holds, by the leader broker it went to."""
    return {s.destination: s.correlation for s in sends}


def ok(topic: str, leader_epoch: int = 1, **kw) -> FetchPartitionResult:
    return FetchPartitionResult(topic, 0, leader_epoch=leader_epoch, **kw)


def test_R7_one_request_per_leader_grouping_its_partitions():
    m = manager(follower("a", 1), follower("b", 2), follower("c", 1))
    sends = m.build_requests(0.0, 500)
    by_leader = {s.destination: s for s in sends}
    assert set(by_leader) == {1, 2}
    assert [fp.topic for fp in by_leader[1].message.partitions] == ["a", "c"]
    req = by_leader[2].message
    assert (req.replica_id, req.broker_epoch, req.max_wait_ms) == (3, 103, 500)
    assert by_leader[1].correlation[:2] == ("fetch", 1)
    assert by_leader[1].timeout_ms == 500 + m.request_timeout_ms


def test_R7_one_request_in_flight_per_leader():
    m = manager(follower("a", 1))
    (send,) = m.build_requests(0.0, 500)
    assert m.build_requests(0.1, 500) == [] and m.in_flight(1)
    m.on_response(send.correlation, FetchResponse(partitions=[ok("a", high_watermark=0)]), 0.2)
    assert len(m.build_requests(0.2, 500)) == 1


def test_R7_no_fetch_before_registration():
    m = FetcherManager(3)
    m.assign(follower("a", 1))
    assert m.build_requests(0.0, 500) == []


def test_R7_failed_request_backs_off_that_leader_only():
    m = manager(follower("a", 1), follower("b", 2))
    sent = sent_by_leader(m.build_requests(0.0, 500))
    m.on_response(sent[1], None, 1.0)
    m.on_response(sent[2], FetchResponse(partitions=[ok("b", high_watermark=0)]), 1.0)
    sent = sent_by_leader(m.build_requests(1.2, 500))
    assert list(sent) == [2]
    m.on_response(sent[2], FetchResponse(partitions=[ok("b", high_watermark=0)]), 1.2)
    assert sorted(s.destination for s in m.build_requests(1.5, 500)) == [1, 2]


def test_R8_partition_error_backs_off_that_partition_only():
    a, c = follower("a", 1), follower("c", 1)
    m = manager(a, c)
    sent = sent_by_leader(m.build_requests(0.0, 500))
    m.on_response(sent[1], FetchResponse(partitions=[ok("a", error=Errors.FENCED_LEADER_EPOCH),
                                               ok("c", high_watermark=0)]), 1.0)
    [send] = m.build_requests(1.1, 500)
    assert [fp.topic for fp in send.message.partitions] == ["c"]


def test_R10_results_are_dispatched_to_partitions():
    a = follower("a", 1, leo=2)
    m = manager(a)
    sent = sent_by_leader(m.build_requests(0.0, 500))
    out = m.on_response(sent[1], FetchResponse(partitions=[
        ok("a", 1, high_watermark=1, diverging_epoch=DivergingEpoch(1, 1))]), 0.1)
    assert a.log_end_offset == 1 and [e.kind for e in out.events] == ["truncated"]


def test_R3_partition_moved_to_another_leader_meanwhile_is_ignored():
    a = follower("a", 1)
    m = manager(a)
    sent = sent_by_leader(m.build_requests(0.0, 500))
    a.on_partition_record(PartitionRecord("a", 0, [1, 2, 3], [2, 3], 2, 2, 2), EPOCHS,
                          {1, 2, 3}, 0.1)
    m.assign(a)  # as the broker does after every record that leaves a replica a follower
    out = m.on_response(sent[1], FetchResponse(partitions=[
        ok("a", 1, high_watermark=1, records=build_batch(0, 1, [b"x"]))]), 0.2)
    assert not out and a.log_end_offset == 0
    assert [s.destination for s in m.build_requests(0.3, 500)] == [2]


def test_R3_same_leader_new_epoch_while_in_flight_is_ignored():
    a = follower("a", 1)
    m = manager(a)
    sent = sent_by_leader(m.build_requests(0.0, 500))
    a.on_partition_record(PartitionRecord("a", 0, [1, 3], [1, 3], 1, 2, 2), EPOCHS, {1, 3}, 0.1)
    out = m.on_response(sent[1], FetchResponse(partitions=[
        ok("a", 1, high_watermark=1, records=build_batch(0, 1, [b"x"]))]), 0.2)
    assert not out and a.log_end_offset == 0


def test_R14_removed_partition_is_not_fetched():
    m = manager(follower("a", 1))
    m.remove("a", 0)
    assert m.build_requests(0.0, 500) == []


def test_R7_a_fetch_whose_partitions_all_moved_away_is_abandoned_and_the_next_leaves_at_once():
    """Follower a's fetch is in flight to broker 1 when a moves to broker 2, then back to broker
    1 (its leader killed and restarted: the request went to a process that is gone). The fetch
    in flight speaks for nothing any more, so the next fetch to broker 1 leaves at once, where it
    waited for the dead request's timeout (`request_timeout_ms` past the long poll, 2 s) and a
    new leader's acks=all write with it; the late answer to the abandoned fetch is ignored."""
    a = follower("a", 1)
    m = manager(a)
    first = sent_by_leader(m.build_requests(0.0, 500))
    a.on_partition_record(PartitionRecord("a", 0, [1, 2, 3], [2, 3], 2, 2, 2), EPOCHS, {2, 3}, 0.1)
    m.assign(a)
    assert list(sent_by_leader(m.build_requests(0.1, 500))) == [2] and not m.in_flight(1)
    a.on_partition_record(PartitionRecord("a", 0, [1, 2, 3], [1, 3], 1, 3, 3), EPOCHS, {1, 3}, 0.2)
    m.assign(a)
    assert m.next_tick_at() == -math.inf
    (again,) = m.build_requests(0.2, 500)
    assert again.destination == 1 and again.correlation != first[1]
    late = m.on_response(first[1], FetchResponse(partitions=[
        ok("a", 3, high_watermark=1, records=build_batch(0, 3, [b"x"]))]), 0.3)
    assert not late and a.log_end_offset == 0 and m.in_flight(1)
    m.on_response(again.correlation, FetchResponse(partitions=[
        ok("a", 3, high_watermark=1, records=build_batch(0, 3, [b"x"]))]), 0.3)
    assert a.log_end_offset == 1 and not m.in_flight(1)


def test_R7_a_fetch_to_a_broker_that_registered_again_is_abandoned():
    """Broker 1 leads a throughout, but was restarted: it registered again with a new broker
    epoch, and the process the fetch in flight went to is gone. The fetch is abandoned; a change
    of the brokers that leaves broker 1's epoch as it was (another broker fenced, broker 1
    paused) keeps it, since its answer may still come."""
    a, b = follower("a", 1), follower("b", 2)
    m = manager(a, b)
    m.update_brokers(EPOCHS)
    first = sent_by_leader(m.build_requests(0.0, 500))
    m.update_brokers({**EPOCHS, 3: 203})
    assert m.in_flight(1) and m.in_flight(2) and m.build_requests(0.1, 500) == []
    m.update_brokers({**EPOCHS, 1: 201, 3: 203})
    assert not m.in_flight(1) and m.in_flight(2)
    assert m.next_tick_at() == -math.inf
    (again,) = m.build_requests(0.2, 500)
    assert again.destination == 1 and again.correlation != first[1]
    assert not m.on_response(first[1], None, 2.5) and m.in_flight(1)  # the abandoned one's timeout
    m.on_response(again.correlation, FetchResponse(partitions=[ok("a", high_watermark=0)]), 2.6)
    assert [s.destination for s in m.build_requests(2.6, 500)] == [1]  # and no backoff from it
