"""Log recovery at open, alone and after the power losses of the durability model (R4, R5)."""
from __future__ import annotations

import random
from pathlib import Path

from broker.common.record_batch import decode_batches, encode_record_set, scan_batches
from broker.storage.durability import Durability, apply_power_loss
from broker.storage.flush import FlushPolicy
from broker.storage.log import PartitionLog, read_partition_dir

SEGMENT_BYTES = 140  # two batches of three 10-byte values per segment


def durability_for(tmp_path: Path) -> Durability:
    return Durability(tmp_path / "data", "simulated", 5.0, tmp_path / "journal.jsonl")


def open_log(tmp_path: Path, d: Durability, now: float = 0.0, policy: FlushPolicy = FlushPolicy()):
    return PartitionLog.open(tmp_path / "data", "orders", 0, SEGMENT_BYTES, policy, d, now)


def fill(log: PartitionLog, batches: int, epoch: int = 1, now: float = 0.0) -> None:
    for _ in range(batches):
        leo = log.log_end_offset
        log.append_record_set(leo, epoch, encode_record_set([b"value-%04d" % (leo + i) for i in range(3)]), now)


def segment(tmp_path: Path, base: int) -> Path:
    return tmp_path / "data" / "orders-0" / ("%020d.log" % base)


def flip(path: Path, batch_index: int, byte_in_batch: int = 30) -> None:
    """Flip one byte inside a record value: only the CRC can tell."""
    raw = bytearray(path.read_bytes())
    infos, _ = scan_batches(bytes(raw))
    raw[infos[batch_index].position + byte_in_batch] ^= 0x01
    path.write_bytes(bytes(raw))


def crashed_log(tmp_path: Path, flushed_batches: int, unflushed_batches: int) -> Durability:
    """A log flushed after `flushed_batches`, then appended to, then SIGKILLed (no close)."""
    d = durability_for(tmp_path)
    log, _ = open_log(tmp_path, d)
    log.assign_epoch(1, 0, 0.0)
    fill(log, flushed_batches, epoch=1)
    log.flush(0.5)
    log.assign_epoch(2, log.log_end_offset, 0.5)
    fill(log, unflushed_batches, epoch=2, now=1.0)
    return d


def test_torn_tail_is_cut_at_the_last_whole_batch(tmp_path):
    d = crashed_log(tmp_path, flushed_batches=1, unflushed_batches=1)
    f = segment(tmp_path, 0)
    full = f.stat().st_size
    with open(f, "r+b") as fh:
        fh.truncate(full - 10)
    log, report = open_log(tmp_path, d, now=2.0)
    assert (report.valid_to, report.dropped_bytes) == (3, 66 - 10)
    assert "torn batch" in report.reason
    assert f.stat().st_size == 66
    assert log.epochs.entries == [(1, 0)]  # the epoch cache is truncated with the log (R5)
    fill(log, 1, epoch=2)
    assert [o for o, _, _ in decode_batches(log.read(0, 1 << 20, 6))] == list(range(6))


def test_flipped_byte_above_the_recovery_point_truncates_there_and_drops_later_segments(tmp_path):
    d = crashed_log(tmp_path, flushed_batches=1, unflushed_batches=5)  # segments at 0, 6, 12
    flip(segment(tmp_path, 6), batch_index=0)
    sizes = sum(p.stat().st_size for p in (tmp_path / "data" / "orders-0").glob("*.log"))
    log, report = open_log(tmp_path, d, now=2.0)
    assert report.valid_to == 6
    assert "CRC mismatch in batch at offset 6" in report.reason
    assert report.dropped_bytes == sizes - 2 * 66
    assert not segment(tmp_path, 12).exists()
    assert segment(tmp_path, 6).stat().st_size == 0
    assert log.log_end_offset == 6 and log.epochs.entries == [(1, 0), (2, 3)]
    assert log.recovery_point == 3


def test_corruption_below_the_recovery_point_is_not_detected(tmp_path):
    """Like Kafka's LogLoader, recovery trusts flushed data: below the recovery point it only
    parses the batches to rebuild the index and never recomputes a CRC. A bit flip there
    (invisible to anything but the CRC) survives recovery and is served as is."""
    d = crashed_log(tmp_path, flushed_batches=4, unflushed_batches=1)
    flip(segment(tmp_path, 0), batch_index=1)
    log, report = open_log(tmp_path, d, now=2.0)
    assert (report.valid_to, report.dropped_bytes, report.reason) == (15, 0, None)
    values = [v for _, _, v in decode_batches(log.read(0, 1 << 20, 15))]
    assert len(values) == 15 and b"value-0003" not in values


def test_a_missing_middle_segment_is_a_hole(tmp_path):
    d = crashed_log(tmp_path, flushed_batches=6, unflushed_batches=0)  # segments at 0, 6, 12
    segment(tmp_path, 6).unlink()
    _, report = open_log(tmp_path, d, now=2.0)
    assert report.valid_to == 6
    assert "expected 6" in report.reason
    assert not segment(tmp_path, 12).exists()


def test_garbled_checkpoints_are_reported_and_epochs_rebuilt_from_batches(tmp_path):
    d = crashed_log(tmp_path, flushed_batches=2, unflushed_batches=2)
    part = tmp_path / "data" / "orders-0"
    (part / "leader-epoch-checkpoint").write_text("garbage")
    (part / "recovery-point").write_text("9\nx\n")
    log, report = open_log(tmp_path, d, now=2.0)
    assert report.valid_to == 12 and report.reason is None
    assert len(report.checkpoint_problems) == 2
    assert log.recovery_point == 0
    assert log.epochs.entries == [(1, 0), (2, 6)]


# ---------------------------------------------------------------- after a power loss
def test_unsynced_power_loss_keeps_exactly_the_flushed_log(tmp_path):
    crashed_log(tmp_path, flushed_batches=3, unflushed_batches=4)
    effect = apply_power_loss(tmp_path / "data", tmp_path / "journal.jsonl", "unsynced", random.Random(0))
    assert effect["orders-0/%020d.log" % 12]["action"] == "deleted"  # rolled after the flush
    log, report = open_log(tmp_path, durability_for(tmp_path), now=2.0)
    assert (report.valid_to, report.dropped_bytes, report.reason) == (9, 0, None)
    assert log.epochs.entries == [(1, 0)]


def test_partial_power_loss_recovers_a_prefix(tmp_path):
    crashed_log(tmp_path, flushed_batches=1, unflushed_batches=1)
    effect = apply_power_loss(tmp_path / "data", tmp_path / "journal.jsonl", "partial", random.Random(7))
    after = effect["orders-0/%020d.log" % 0]["after"]
    assert 66 <= after < 132
    log, report = open_log(tmp_path, durability_for(tmp_path), now=2.0)
    assert (report.valid_to, report.dropped_bytes) == (3, after - 66)
    assert [v for _, _, v in decode_batches(log.read(0, 1 << 20, 3))] == [b"value-0000", b"value-0001", b"value-0002"]


def test_torn_power_loss_drops_the_torn_batch_and_everything_after(tmp_path):
    crashed_log(tmp_path, flushed_batches=1, unflushed_batches=1)
    f = segment(tmp_path, 0)
    effect = apply_power_loss(tmp_path / "data", tmp_path / "journal.jsonl", "torn", random.Random(11))
    assert effect["orders-0/%020d.log" % 0] == {"before": 132, "after": 132, "action": "torn"}
    log, report = open_log(tmp_path, durability_for(tmp_path), now=2.0)
    assert (report.valid_to, report.dropped_bytes) == (3, 66)
    assert "CRC" in report.reason
    assert f.stat().st_size == 66
    assert log.epochs.entries == [(1, 0)]


def test_torn_power_loss_across_segments(tmp_path):
    for seed in range(8):
        root = tmp_path / str(seed)
        crashed_log(root, flushed_batches=3, unflushed_batches=5)
        effect = apply_power_loss(root / "data", root / "journal.jsonl", "torn", random.Random(seed))
        log, report = open_log(root, durability_for(root), now=2.0)
        torn = [e for e in effect.values() if e["action"] == "torn"]
        assert len(torn) == 1 and report.reason is not None
        assert 9 <= report.valid_to < 24 and report.valid_to % 3 == 0
        assert [o for o, _, _ in read_partition_dir(root / "data" / "orders-0")] == list(range(report.valid_to))


def test_never_durable_log_disappears(tmp_path):
    d = durability_for(tmp_path)
    log, _ = open_log(tmp_path, d)
    fill(log, 2)
    effect = apply_power_loss(tmp_path / "data", tmp_path / "journal.jsonl", "unsynced", random.Random(0))
    assert effect == {"orders-0/%020d.log" % 0: {"before": 132, "after": 0, "action": "deleted"}}
    log, report = open_log(tmp_path, durability_for(tmp_path), now=2.0)
    assert (report.valid_to, report.dropped_bytes) == (0, 0)
    assert log.log_end_offset == 0 and segment(tmp_path, 0).exists()


def test_writeback_protects_old_appends_from_power_loss(tmp_path):
    d = durability_for(tmp_path)
    log, _ = open_log(tmp_path, d)
    fill(log, 1, now=0.0)
    fill(log, 1, now=3.0)
    d.tick(6.0)  # the first batch is 6 s old, the second 3 s
    apply_power_loss(tmp_path / "data", tmp_path / "journal.jsonl", "unsynced", random.Random(0))
    _, report = open_log(tmp_path, durability_for(tmp_path), now=7.0)
    assert report.valid_to == 3


def test_restart_after_sigkill_alone_loses_nothing(tmp_path):
    crashed_log(tmp_path, flushed_batches=1, unflushed_batches=3)
    log, report = open_log(tmp_path, durability_for(tmp_path), now=2.0)
    assert (report.valid_to, report.dropped_bytes, report.reason) == (12, 0, None)
    assert log.recovery_point == 3
    assert log.epochs.entries == [(1, 0), (2, 3)]
