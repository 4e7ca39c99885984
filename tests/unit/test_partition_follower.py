"""The follower side of Partition: R7, R10-R13, role transitions."""
from __future__ import annotations

import json

from broker.common.errors import Errors
from broker.common.record_batch import build_batch
from broker.protocol.messages import (
    DivergingEpoch,
    FetchPartition,
    FetchPartitionResult,
)
from broker.protocol.outputs import AppendBatches, AssignEpoch, Truncate
from broker.protocol.partition import PartitionConfig
from tests.unit.partition_harness import (
    TOPIC,
    Replica,
    apply_record,
    build_log,
    fetch_round,
    produce,
    record,
)

EPOCH_MODE = PartitionConfig(min_insync_replicas=1, replica_lag_max=10.0)
HW_MODE = PartitionConfig(min_insync_replicas=1, replica_lag_max=10.0, truncation="high-watermark")


def follower_of(leader_epoch: int = 2, cfg: PartitionConfig = EPOCH_MODE, log=None,
                high_watermark: int = 0) -> Replica:
    f = Replica(2, cfg, log, high_watermark)
    apply_record([f], record(1, leader_epoch, leader_epoch, [1, 2], [1, 2]))
    return f


def result(**kw) -> FetchPartitionResult:
    return FetchPartitionResult(TOPIC, 0, **kw)


def test_R7_fetch_partition_fields():
    f = follower_of(2, log=build_log([(1, "a"), (1, "b")]))
    assert f.p.fetch_partition() == FetchPartition(TOPIC, 0, 2, 1, 2)
    assert f.events_of("became-follower") == [
        {"topic": TOPIC, "partition": 0, "leader": 1, "leader_epoch": 2, "leo": 2, "hwm": 0}]


def test_R7_R13_high_watermark_mode_sends_no_last_fetched_epoch():
    f = follower_of(2, HW_MODE, build_log([(1, "a")]), high_watermark=1)
    assert f.p.fetch_partition().last_fetched_epoch == -1


def test_R12_append_learns_epochs_and_takes_min_of_leader_hwm_and_leo():
    f = follower_of(3)
    batches = build_batch(0, 1, [b"a"]) + build_batch(1, 2, [b"b", b"c"])
    out = f.run(f.p.on_fetch_result(result(high_watermark=10, log_end_offset=10,
                                           leader_epoch=3, records=batches), 0.0))
    assert out.disk == [AppendBatches(TOPIC, 0, batches, 3), AssignEpoch(TOPIC, 0, 1, 0),
                        AssignEpoch(TOPIC, 0, 2, 1)]
    assert f.p.log_end_offset == 3 and f.p.high_watermark == 3
    f.run(f.p.on_fetch_result(result(high_watermark=2, leader_epoch=3), 0.0))
    assert f.p.high_watermark == 2  # a new leader's HWM may lag: the follower's goes back


def test_R12_hwm_goes_backwards_after_truncation():
    f = follower_of(3, log=build_log([(1, "a"), (1, "b"), (2, "x"), (2, "y")]), high_watermark=3)
    f.run(f.p.on_fetch_result(result(leader_epoch=3, high_watermark=2, log_end_offset=2,
                                     diverging_epoch=DivergingEpoch(1, 2)), 0.0))
    assert f.p.log_end_offset == 2 and f.p.high_watermark == 2
    assert f.events_of("truncated") == [{"topic": TOPIC, "partition": 0, "reason": "diverging-epoch",
                                         "leader_epoch": 3, "from": 4, "to": 2}]


def test_R12_only_the_valid_prefix_is_appended():
    f = follower_of(2)
    good = build_batch(0, 1, [b"a"])
    bad = bytearray(build_batch(1, 1, [b"b"]))
    bad[-1] ^= 0xFF
    out = f.run(f.p.on_fetch_result(result(leader_epoch=2, high_watermark=2,
                                           records=good + bytes(bad)), 0.0))
    assert out.disk[0] == AppendBatches(TOPIC, 0, good, 1)
    assert f.p.log_end_offset == 1 and f.p.needs_backoff
    assert f.events_of("fetch-corrupt")[0]["offset"] == 1


def test_R12_batches_not_at_the_leo_are_refused():
    f = follower_of(2, log=build_log([(1, "a")]))
    out = f.run(f.p.on_fetch_result(result(leader_epoch=2, records=build_batch(5, 1, [b"z"])), 0.0))
    assert not out.disk and f.p.log_end_offset == 1


def test_R8_errors_back_off_without_disk_ops():
    for error in (Errors.FENCED_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER,
                  Errors.UNKNOWN_LEADER_EPOCH, Errors.OFFSET_OUT_OF_RANGE):
        f = follower_of(2, log=build_log([(1, "a")]))
        out = f.run(f.p.on_fetch_result(result(error=error, leader_epoch=2, log_end_offset=0), 0.0))
        assert not out.disk and f.p.needs_backoff, error
        f.run(f.p.on_fetch_result(result(leader_epoch=2, high_watermark=0), 0.0))
        assert not f.p.needs_backoff


def test_R10_stale_result_of_an_older_epoch_is_ignored():
    f = follower_of(3, log=build_log([(1, "a"), (1, "b")]))
    out = f.run(f.p.on_fetch_result(result(leader_epoch=2, diverging_epoch=DivergingEpoch(1, 0)), 0.0))
    assert not out and f.p.log_end_offset == 2


def test_R13_becoming_follower_truncates_to_hwm_in_high_watermark_mode():
    f = follower_of(2, HW_MODE, build_log([(1, "a"), (1, "b"), (1, "c")]), high_watermark=1)
    assert f.p.log_end_offset == 1
    assert f.events_of("truncated") == [{"topic": TOPIC, "partition": 0, "reason": "high-watermark",
                                         "leader_epoch": 2, "from": 3, "to": 1}]
    g = follower_of(2, EPOCH_MODE, build_log([(1, "a"), (1, "b"), (1, "c")]), high_watermark=1)
    assert g.p.log_end_offset == 3 and not g.events_of("truncated")


def _seed_004(cfg: PartitionConfig) -> Replica:
    """Seed 004, "High watermark truncation followed by immediate leader election":
    B (1) leads, A (2) fetched m2 but its HWM does not cover it; A restarts, B fails, A leads."""
    b, a = Replica(1, cfg), Replica(2, cfg)
    apply_record([b, a], record(1, 1, 1, [1, 2], [1, 2]))
    produce(b, ["m1"], acks=1)
    fetch_round(b, a)
    produce(b, ["m2"], acks=1)
    fetch_round(b, a)  # A has m1, m2; its HWM is 1
    a.run(a.p.tick(10.0))  # the HWM checkpoint
    assert (a.p.log_end_offset, a.p.high_watermark, a.log.hwm_checkpoint) == (2, 1, 1)
    a = a.restart(cfg)
    apply_record([a], record(1, 1, 1, [1, 2], [1, 2]))  # A rejoins as follower
    apply_record([a], record(2, 2, 2, [2], [1, 2]))  # B fails, A is elected
    assert a.p.role == "leader"
    return a


def test_R13_high_watermark_truncation_loses_acknowledged_m2():
    a = _seed_004(HW_MODE)
    assert [v for _o, _e, v in a.values()] == ["m1"]
    assert a.events_of("truncated")[0]["reason"] == "high-watermark"


def test_R13_leader_epoch_truncation_keeps_m2():
    a = _seed_004(EPOCH_MODE)
    assert [v for _o, _e, v in a.values()] == ["m1", "m2"]


def test_R13_double_power_loss_diverges_only_in_high_watermark_mode():
    for cfg, expect in ((HW_MODE, ["m1", "m2"]), (EPOCH_MODE, ["m1", "m3"])):
        b = Replica(1, cfg, build_log([(1, "m1")]))  # lost m2 in the power loss
        a = Replica(2, cfg, build_log([(1, "m1"), (1, "m2")]), high_watermark=2)
        apply_record([b, a], record(1, 2, 2, [1, 2], [1, 2]))
        produce(b, ["m3"], acks=1)
        for _ in range(3):
            fetch_round(b, a)
        assert [v for _o, _e, v in a.values()] == expect, cfg.truncation
    assert [v for _o, _e, v in b.values()] == ["m1", "m3"]


def test_R13_out_of_range_follower_cuts_back_to_leader_leo_in_high_watermark_mode():
    f = follower_of(2, HW_MODE, build_log([(1, "a"), (1, "b"), (1, "c")]), high_watermark=3)
    f.run(f.p.on_fetch_result(result(error=Errors.OFFSET_OUT_OF_RANGE, leader_epoch=2,
                                     log_end_offset=1, high_watermark=1), 0.0))
    assert f.p.log_end_offset == 1 and not f.p.needs_backoff
    assert f.events_of("truncated")[-1]["reason"] == "offset-out-of-range"


def test_R14_leader_becoming_follower_keeps_log_and_stops_serving():
    leader = Replica(1, EPOCH_MODE)
    apply_record([leader], record(1, 1, 1, [1, 2], [1, 2]))
    produce(leader, ["a"], acks=1)
    out = leader.run(leader.p.on_partition_record(record(2, 2, 2, [2], [1, 2]), {}, set(), 0.0))
    assert leader.p.role == "follower" and not [op for op in out.disk if isinstance(op, Truncate)]
    assert leader.p.fetch_partition() == FetchPartition(TOPIC, 0, 1, 1, 2)


def test_R3_removed_replica_has_no_role_and_ignores_results():
    f = follower_of(2, log=build_log([(1, "a")]))
    apply_record([f], record(1, 3, 3, [1, 3], [1, 3]))
    assert f.p.role == "none" and f.p.fetch_partition() is None
    assert not f.p.on_fetch_result(result(leader_epoch=3, records=build_batch(1, 1, [b"b"])), 0.0)


def test_R2_older_records_are_ignored_and_describe_is_json():
    f = follower_of(3)
    apply_record([f], record(3, 2, 2, [1, 2], [1, 2]))
    assert f.p.leader_id == 1 and f.p.leader_epoch == 3
    json.dumps(f.p.describe())
