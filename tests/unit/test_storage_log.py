"""PartitionLog: appends, reads, truncation, flush policies (R4, R5)."""
from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.common.record_batch import (
    CorruptBatch,
    build_batch,
    decode_batches,
    encode_record_set,
    scan_batches,
)
from broker.storage.durability import Durability
from broker.storage.flush import FlushPolicy
from broker.storage.log import OffsetOutOfRange, PartitionLog, read_partition_dir, read_partition_values


def durability_for(tmp_path: Path, writeback: float = 5.0) -> Durability:
    return Durability(tmp_path / "data", "simulated", writeback, tmp_path / "journal.jsonl")


def open_log(tmp_path: Path, policy: FlushPolicy = FlushPolicy(), segment_bytes: int = 1 << 20,
             durability: Durability | None = None, now: float = 0.0) -> PartitionLog:
    d = durability or durability_for(tmp_path)
    log, _ = PartitionLog.open(tmp_path / "data", "orders", 0, segment_bytes, policy, d, now)
    return log


def values(n: int, start: int) -> list[bytes]:
    return [b"value-%04d" % (start + i) for i in range(n)]


def fill(log: PartitionLog, batches: int, per_batch: int = 3, epoch: int = 1, now: float = 0.0) -> None:
    for _ in range(batches):
        leo = log.log_end_offset
        log.append_record_set(leo, epoch, encode_record_set(values(per_batch, leo)), now)


def records(raw: bytes) -> list[tuple[int, int, bytes]]:
    return list(decode_batches(raw))


def segment_files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "data" / "orders-0").glob("*.log"))


def test_new_log_is_empty(tmp_path):
    log = open_log(tmp_path)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point, log.hw_checkpoint) == (0, 0, 0, 0)
    assert log.read(0, 1000, 10) == b""
    assert segment_files(tmp_path) == ["00000000000000000000.log"]


def test_append_and_read_across_segment_rolls(tmp_path):
    log = open_log(tmp_path, segment_bytes=140)
    fill(log, 30, per_batch=3, epoch=2)
    assert log.log_end_offset == 90
    files = segment_files(tmp_path)
    assert len(files) > 5
    assert files[1] == "%020d.log" % 6  # 140 bytes hold two batches of three records (66 bytes each)
    everything = records(log.read(0, 1 << 20, 90))
    assert [(o, v) for o, _, v in everything] == [(i, b"value-%04d" % i) for i in range(90)]
    assert {e for _, e, _ in everything} == {2}
    assert read_partition_dir(tmp_path / "data" / "orders-0") == everything


def test_read_at_an_offset_inside_a_batch_starts_with_that_batch(tmp_path):
    log = open_log(tmp_path, segment_bytes=140)
    fill(log, 10, per_batch=3)
    for offset in range(30):
        first = records(log.read(offset, 1, 30))
        assert [o for o, _, _ in first] == [offset - offset % 3 + i for i in range(3)]


def test_read_honours_upper_and_max_bytes(tmp_path):
    log = open_log(tmp_path, segment_bytes=140)
    fill(log, 10, per_batch=3)
    batch_size = len(build_batch(0, 1, values(3, 0)))
    # upper: only batches whose base offset is below it (upper inside a batch keeps that batch)
    assert [o for o, _, _ in records(log.read(0, 1 << 20, 7))][-1] == 8
    assert [o for o, _, _ in records(log.read(0, 1 << 20, 6))][-1] == 5
    assert log.read(6, 1 << 20, 6) == b""
    # max_bytes: never exceeded, except that one batch always comes back
    assert len(log.read(0, batch_size * 4 + 5, 30)) == batch_size * 4
    assert len(log.read(0, 1, 30)) == batch_size
    assert len(log.read(3, 0, 30)) == batch_size
    # spans segments with what the budget allows
    assert records(log.read(3, batch_size * 3, 30))[0][0] == 3
    assert len(log.read(3, batch_size * 3, 30)) == batch_size * 3


def test_read_outside_the_log_is_out_of_range(tmp_path):
    log = open_log(tmp_path)
    fill(log, 2)
    assert log.read(6, 100, 6) == b""
    with pytest.raises(OffsetOutOfRange) as exc:
        log.read(7, 100, 7)
    assert (exc.value.log_start_offset, exc.value.log_end_offset) == (0, 6)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100, 7)


def test_leader_append_checks_base_offset_and_record_set(tmp_path):
    log = open_log(tmp_path)
    fill(log, 1)
    with pytest.raises(ValueError, match="LEO is 3"):
        log.append_record_set(4, 1, encode_record_set([b"x"]), 0.0)
    with pytest.raises(CorruptBatch):
        log.append_record_set(3, 1, b"\x00\x00\x00\x02\x00\x00", 0.0)
    assert log.log_end_offset == 3
    assert len(records(log.read(0, 1 << 20, 3))) == 3


def test_follower_append_copies_the_leader_bytes_and_learns_epochs(tmp_path):
    leader = open_log(tmp_path / "leader")
    fill(leader, 2, epoch=1)
    fill(leader, 2, epoch=3)
    follower = open_log(tmp_path / "follower")
    raw = leader.read(0, 1 << 20, leader.log_end_offset)
    assert follower.append_batches(raw, 0.0) == 12
    assert follower.read(0, 1 << 20, 12) == raw
    assert follower.epochs.entries == [(1, 0), (3, 6)]
    assert follower.append_batches(b"", 0.0) == 12


def test_follower_append_of_batches_the_replica_scanned_is_the_append_that_scans_them(tmp_path):
    leader = open_log(tmp_path / "leader")
    fill(leader, 2, epoch=1)
    fill(leader, 2, epoch=3)
    raw = leader.read(0, 1 << 20, leader.log_end_offset)
    scanned, problem = scan_batches(raw, expect_offset=0)
    assert problem is None
    by_scan, told = open_log(tmp_path / "a"), open_log(tmp_path / "b")
    assert told.append_batches(raw, 0.0, scanned) == by_scan.append_batches(raw, 0.0) == 12
    assert told.read(0, 1 << 20, 12) == by_scan.read(0, 1 << 20, 12) == raw
    assert told.epochs.entries == by_scan.epochs.entries == [(1, 0), (3, 6)]
    with pytest.raises(CorruptBatch, match="expected 12, found 0"):
        told.append_batches(raw, 0.0, scanned)  # not at the log's end
    assert told.log_end_offset == 12


def test_follower_append_rejects_a_corrupt_batch_and_appends_nothing(tmp_path):
    log = open_log(tmp_path)
    good = build_batch(0, 1, [b"a"]) + build_batch(1, 1, [b"b"])
    bad = bytearray(good + build_batch(2, 1, [b"c"]))
    bad[-1] ^= 0x40
    with pytest.raises(CorruptBatch, match="CRC"):
        log.append_batches(bytes(bad), 0.0)
    assert log.log_end_offset == 0
    assert (tmp_path / "data" / "orders-0" / "00000000000000000000.log").stat().st_size == 0
    assert log.epochs.entries == []


def test_follower_append_rejects_an_offset_gap(tmp_path):
    log = open_log(tmp_path)
    log.append_batches(build_batch(0, 1, [b"a"]), 0.0)
    with pytest.raises(CorruptBatch, match="expected 1, found 2"):
        log.append_batches(build_batch(2, 1, [b"c"]), 0.0)
    with pytest.raises(CorruptBatch, match="offset gap"):
        log.append_batches(build_batch(1, 1, [b"b"]) + build_batch(3, 1, [b"d"]), 0.0)
    assert log.log_end_offset == 1


def test_truncate_inside_a_segment_at_or_below_the_offset(tmp_path):
    log = open_log(tmp_path)
    fill(log, 5, per_batch=3)  # batches at 0, 3, 6, 9, 12
    assert log.truncate_to(9, 0.0) == 9  # a batch boundary
    assert log.truncate_to(7, 0.0) == 6  # inside the batch at 6: cut before it
    assert log.truncate_to(100, 0.0) == 6  # beyond the LEO: nothing to do
    assert [o for o, _, _ in records(log.read(0, 1 << 20, 100))] == list(range(6))
    fill(log, 1)
    assert log.log_end_offset == 9
    assert records(log.read(6, 1 << 20, 9))[0] == (6, 1, b"value-0006")


def test_truncate_across_segments_with_epoch_cache_and_recovery_point(tmp_path):
    log = open_log(tmp_path, segment_bytes=140)
    log.assign_epoch(1, 0, 0.0)
    fill(log, 6, epoch=1)
    log.assign_epoch(2, 18, 0.0)
    fill(log, 6, epoch=2)
    log.assign_epoch(3, 36, 0.0)
    fill(log, 4, epoch=3)
    log.flush(1.0)
    assert log.recovery_point == 48
    before = segment_files(tmp_path)
    assert log.truncate_to(13, 2.0) == 12
    after = segment_files(tmp_path)
    assert after == [f for f in before if int(f[:20]) <= 12]
    assert log.epochs.entries == [(1, 0)]
    assert log.recovery_point == 12
    log.close()
    reopened = open_log(tmp_path)
    assert (reopened.log_end_offset, reopened.recovery_point, reopened.epochs.entries) == (12, 12, [(1, 0)])


def test_truncate_to_a_segment_base_empties_that_segment(tmp_path):
    log = open_log(tmp_path, segment_bytes=140)
    fill(log, 4)  # segments at 0 and 6
    assert log.truncate_to(6, 0.0) == 6
    assert segment_files(tmp_path) == ["%020d.log" % 0, "%020d.log" % 6]
    fill(log, 1)
    assert [o for o, _, _ in records(log.read(0, 1 << 20, 9))] == list(range(9))


def test_truncate_to_zero(tmp_path):
    log = open_log(tmp_path, segment_bytes=140)
    log.assign_epoch(1, 0, 0.0)
    fill(log, 6)
    assert log.truncate_to(0, 0.0) == 0
    assert segment_files(tmp_path) == ["%020d.log" % 0]
    assert log.epochs.entries == []
    with pytest.raises(ValueError):
        log.truncate_to(-1, 0.0)


def test_reopen_after_clean_close_keeps_everything(tmp_path):
    d = durability_for(tmp_path)
    log = open_log(tmp_path, segment_bytes=140, durability=d)
    log.assign_epoch(4, 0, 0.0)
    fill(log, 7, epoch=4)
    log.checkpoint_hw(15, 0.0)
    log.flush(0.0)
    log.close()
    reopened, report = PartitionLog.open(tmp_path / "data", "orders", 0, 140, FlushPolicy(), d, 1.0)
    assert (report.valid_to, report.dropped_bytes, report.reason, report.checkpoint_problems) == (21, 0, None, ())
    assert (reopened.log_end_offset, reopened.hw_checkpoint, reopened.epochs.entries) == (21, 15, [(4, 0)])
    fill(reopened, 1, epoch=4)
    assert len(records(reopened.read(0, 1 << 20, 24))) == 24


def test_read_partition_dir_changes_nothing_and_stops_at_a_bad_batch(tmp_path):
    log = open_log(tmp_path, segment_bytes=140)
    fill(log, 6)
    log.close()
    directory = tmp_path / "data" / "orders-0"
    first = directory / ("%020d.log" % 0)
    raw = bytearray(first.read_bytes())
    infos, _ = scan_batches(bytes(raw))
    raw[infos[1].position + 30] ^= 1
    first.write_bytes(bytes(raw))
    snapshot = {p.name: p.read_bytes() for p in directory.iterdir()}
    assert [o for o, _, _ in read_partition_dir(directory)] == [0, 1, 2]
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == snapshot


# ---------------------------------------------------------------- flush policies on the log
def test_flush_always_makes_every_append_durable(tmp_path):
    d = durability_for(tmp_path)
    log = open_log(tmp_path, FlushPolicy(always=True), durability=d)
    segment = tmp_path / "data" / "orders-0" / ("%020d.log" % 0)
    for i in range(3):
        fill(log, 1, now=float(i))
        assert d.durable_length(segment) == segment.stat().st_size
        assert log.recovery_point == log.log_end_offset


def test_flush_every_n_messages(tmp_path):
    d = durability_for(tmp_path)
    log = open_log(tmp_path, FlushPolicy(messages=7), durability=d)
    segment = tmp_path / "data" / "orders-0" / ("%020d.log" % 0)
    fill(log, 2, per_batch=3)
    assert d.durable_length(segment) is None and log.recovery_point == 0
    fill(log, 1, per_batch=3)  # 9 unflushed >= 7
    assert d.durable_length(segment) == segment.stat().st_size and log.recovery_point == 9
    fill(log, 2, per_batch=3)
    assert log.recovery_point == 9


def test_flush_every_interval_on_tick(tmp_path):
    d = durability_for(tmp_path, writeback=100.0)
    log = open_log(tmp_path, FlushPolicy(interval=1.0), durability=d, now=10.0)
    fill(log, 1, now=10.2)
    log.tick(10.9)
    assert log.recovery_point == 0
    log.tick(11.0)
    assert log.recovery_point == 3
    fill(log, 1, now=11.5)
    log.tick(11.9)
    assert log.recovery_point == 3
    fill(log, 1, now=12.0)  # an append after the interval flushes too
    assert log.recovery_point == 9


def test_flush_on_roll(tmp_path):
    d = durability_for(tmp_path)
    log = open_log(tmp_path, FlushPolicy(on_roll=True), segment_bytes=140, durability=d)
    fill(log, 2)
    assert log.recovery_point == 0
    fill(log, 1)  # the third batch does not fit: roll, flush
    assert log.recovery_point == 9
    first = tmp_path / "data" / "orders-0" / ("%020d.log" % 0)
    assert d.durable_length(first) == first.stat().st_size


def test_explicit_flush_with_nothing_new_writes_nothing(tmp_path):
    log = open_log(tmp_path)
    fill(log, 1)
    log.flush(1.0)
    journal = (tmp_path / "journal.jsonl").read_bytes()
    log.flush(2.0)
    log.checkpoint_hw(0, 2.0)
    assert (tmp_path / "journal.jsonl").read_bytes() == journal


# ---------------------------------------------------------------- a model-based check
operation = st.one_of(
    st.tuples(st.just("append"), st.integers(1, 5), st.integers(1, 40)),
    st.tuples(st.just("truncate"), st.integers(0, 60), st.just(0)),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(operation, max_size=25), probe=st.integers(0, 80), budget=st.integers(0, 400))
def test_log_matches_a_list_model(tmp_path_factory, ops, probe, budget):
    tmp_path = tmp_path_factory.mktemp("model")
    log = open_log(tmp_path, segment_bytes=150)
    model: list[list[bytes]] = []  # batches of values
    for kind, a, b in ops:
        if kind == "append":
            leo = log.log_end_offset
            batch = [bytes([65 + (leo + i) % 26]) * b for i in range(a)]
            log.append_record_set(leo, 1, encode_record_set(batch), 0.0)
            model.append(batch)
        else:
            kept, end = [], 0
            for batch in model:
                if end + len(batch) > a:
                    break
                kept.append(batch)
                end += len(batch)
            model = kept
            assert log.truncate_to(a, 0.0) == min(end, sum(map(len, model)))
    flat = [v for batch in model for v in batch]
    starts = [sum(map(len, model[:i])) for i in range(len(model))]
    assert log.log_end_offset == len(flat)
    assert [v for _, _, v in records(log.read(0, 1 << 30, len(flat)))] == flat
    if probe > len(flat):
        with pytest.raises(OffsetOutOfRange):
            log.read(probe, budget, len(flat))
    elif probe < len(flat):
        raw = log.read(probe, budget, len(flat))
        got = records(raw)
        holder = max(s for s in starts if s <= probe)
        assert got[0][0] == holder
        assert [v for _, _, v in got] == flat[holder:holder + len(got)]
        returned_batches = len(scan_batches(raw)[0])
        assert len(raw) <= budget or returned_batches == 1
    log.close()
    by_record = read_partition_dir(tmp_path / "data" / "orders-0")
    assert [v for _, _, v in by_record] == flat
    # the same records a batch at a time, as the final dump of the logs reads them
    assert [(base + i, e, v) for base, e, vs in read_partition_values(tmp_path / "data" / "orders-0")
            for i, v in enumerate(vs)] == by_record
