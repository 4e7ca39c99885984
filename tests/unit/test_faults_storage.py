"""Storage faults on real PartitionLog directories, then recovery; tmpfs mounts (as root)."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from broker.common.record_batch import encode_record_set, scan_batches
from broker.storage.checkpoint import write_clean_shutdown
from broker.storage.durability import Durability
from broker.storage.flush import FlushPolicy
from broker.storage.layout import journal_path
from broker.storage.log import PartitionLog, read_partition_dir
from faults import storage
from faults.storage import (
    TmpfsMounts,
    disk_loss,
    isrlab_mounts,
    lossy_crash_files,
    unmount,
)

BATCH = 66  # one batch of three 10-byte values
SEGMENT = f"orders-0/{0:020d}.log"


def durability(data_dir: Path) -> Durability:
    return Durability(data_dir, "simulated", 5.0, journal_path(data_dir))


def open_log(data_dir: Path, d: Durability, partition: int = 0) -> tuple[PartitionLog, object]:
    return PartitionLog.open(data_dir, "orders", partition, 1 << 20, FlushPolicy(), d, 0.0)


def fill(log: PartitionLog, batches: int) -> None:
    for _ in range(batches):
        leo = log.log_end_offset
        log.append_record_set(leo, 1, encode_record_set([b"value-%04d" % (leo + i) for i in range(3)]), 1.0)


def crashed_broker(tmp_path: Path, flushed: int, unflushed: int) -> Path:
    """A broker data dir: orders-0 flushed after `flushed` batches then appended to, and
    orders-1 never flushed; the process then 'SIGKILLed' (nothing closed or flushed)."""
    data_dir = tmp_path / "broker-1"
    d = durability(data_dir)
    log, _ = open_log(data_dir, d)
    log.assign_epoch(1, 0, 0.0)
    fill(log, flushed)
    log.flush(0.5)
    fill(log, unflushed)
    fill(open_log(data_dir, d, partition=1)[0], 1)
    return data_dir


def recovered(data_dir: Path):
    return open_log(data_dir, durability(data_dir))


def test_unsynced_cuts_each_file_to_its_durable_length(tmp_path):
    data_dir = crashed_broker(tmp_path, flushed=2, unflushed=3)
    effect = lossy_crash_files(data_dir, "unsynced", random.Random(0))
    assert effect == {
        SEGMENT: {"before": 5 * BATCH, "after": 2 * BATCH, "action": "cut"},
        f"orders-1/{0:020d}.log": {"before": BATCH, "after": 0, "action": "deleted"},
    }
    assert "orders-0/recovery-point" not in effect  # the checkpoints are durable at once: kept
    _, report = recovered(data_dir)
    assert (report.valid_to, report.dropped_bytes, report.reason) == (6, 0, None)
    assert [o for o, _, _ in read_partition_dir(data_dir / "orders-0")] == list(range(6))


@pytest.mark.parametrize("seed", range(6))
def test_partial_cuts_inside_the_tail_and_recovery_drops_the_broken_batch(tmp_path, seed):
    data_dir = crashed_broker(tmp_path, flushed=2, unflushed=3)
    effect = lossy_crash_files(data_dir, "partial", random.Random(seed))
    after = effect[SEGMENT]["after"]
    assert 2 * BATCH <= after < 5 * BATCH
    assert effect[SEGMENT]["action"] == "cut"
    whole = after // BATCH
    _, report = recovered(data_dir)
    assert (report.valid_to, report.dropped_bytes) == (3 * whole, after - whole * BATCH)
    assert (report.reason is None) == (after % BATCH == 0)
    assert (data_dir / SEGMENT).stat().st_size == whole * BATCH


@pytest.mark.parametrize("seed", range(6))
def test_torn_keeps_the_length_and_recovery_drops_the_torn_batch_by_crc(tmp_path, seed):
    data_dir = crashed_broker(tmp_path, flushed=2, unflushed=3)
    before = (data_dir / SEGMENT).read_bytes()
    effect = lossy_crash_files(data_dir, "torn", random.Random(seed))
    assert effect[SEGMENT] == {"before": 5 * BATCH, "after": 5 * BATCH, "action": "torn"}
    after = (data_dir / SEGMENT).read_bytes()
    (flipped,) = [i for i in range(len(before)) if before[i] != after[i]]
    assert flipped >= 2 * BATCH  # never inside the durable part
    torn = next(b for b in scan_batches(before)[0] if b.position <= flipped < b.position + b.size)
    _, report = recovered(data_dir)
    assert "CRC" in report.reason
    assert (report.valid_to, report.dropped_bytes) == (torn.base_offset, 5 * BATCH - torn.position)
    assert [o for o, _, _ in read_partition_dir(data_dir / "orders-0")] == list(range(torn.base_offset))


def test_a_power_loss_after_the_writeback_delay_keeps_every_byte_and_so_does_the_next(tmp_path):
    """A broker stopped (or paused) the OS writeback's delay or longer before the power loss:
    the kernel wrote back what it could not record itself, so nothing is cut, and the journal
    says so, so that a second power loss before any new write cuts nothing either."""
    data_dir = crashed_broker(tmp_path, flushed=1, unflushed=3)
    assert lossy_crash_files(data_dir, "unsynced", random.Random(0), written_back=True) == {}
    assert lossy_crash_files(data_dir, "unsynced", random.Random(0)) == {}
    log, report = recovered(data_dir)
    assert (log.log_end_offset, report.dropped_bytes) == (12, 0)


def test_lossy_crash_is_reproducible_from_the_rng(tmp_path):
    effects = [lossy_crash_files(crashed_broker(tmp_path / str(i), 1, 4), "partial", random.Random(9))
               for i in range(2)]
    assert effects[0] == effects[1]


@pytest.mark.parametrize("mode", ["unsynced", "partial", "torn"])
def test_lossy_crash_of_a_broker_that_never_opened_its_storage_cuts_nothing(tmp_path, mode):
    """A broker killed while its process starts (after a disk loss, its directory is empty and
    it has no journal yet) is a valid target: the power loss finds nothing to cut, and the
    storage it opens next is empty and whole."""
    data_dir = crashed_broker(tmp_path, flushed=1, unflushed=1)
    disk_loss(data_dir)
    assert lossy_crash_files(data_dir, mode, random.Random(0)) == {}
    assert lossy_crash_files(tmp_path / "broker-9", mode, random.Random(0)) == {}  # never started
    log, report = recovered(data_dir)
    assert (log.log_end_offset, report.dropped_bytes) == (0, 0)


def test_disk_loss_empties_the_directory_and_removes_the_journal(tmp_path):
    data_dir = crashed_broker(tmp_path, flushed=2, unflushed=1)
    write_clean_shutdown(data_dir, 7, durability(data_dir), 2.0)
    entries = sorted(p.name for p in data_dir.iterdir())
    sizes = [p.stat().st_size for p in data_dir.rglob("*") if p.is_file()]
    assert {"orders-0", "orders-1"} <= set(entries) and len(entries) == 3  # and the marker
    assert disk_loss(data_dir) == {"entries": entries, "files": len(sizes), "bytes": sum(sizes), "journal": True}
    assert data_dir.is_dir() and list(data_dir.iterdir()) == []
    assert not journal_path(data_dir).exists()
    log, report = recovered(data_dir)
    assert (log.log_end_offset, report.dropped_bytes) == (0, 0)


def test_disk_loss_of_a_directory_that_never_existed(tmp_path):
    assert disk_loss(tmp_path / "broker-2") == {"entries": [], "files": 0, "bytes": 0, "journal": False}


def test_mount_without_root_falls_back_to_a_plain_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(storage.os, "geteuid", lambda: 1000)
    mounts = TmpfsMounts()
    assert mounts.mount(tmp_path / "data" / "broker-1") is False
    assert (tmp_path / "data" / "broker-1").is_dir() and mounts.mounted == []
    assert unmount(tmp_path / "data" / "broker-1") is False


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@needs_root
def test_tmpfs_mount_and_unmount_all(tmp_path):
    mounts = TmpfsMounts()
    paths = [tmp_path / "run" / "broker-1", tmp_path / "run" / "broker-2"]
    try:
        assert all(mounts.mount(p) for p in paths)
        assert all(os.path.ismount(p) for p in paths)
        assert sorted(isrlab_mounts(tmp_path)) == sorted(paths)
        (paths[0] / "segment.log").write_bytes(b"x" * 100)
        mounts.unmount_all()
        assert mounts.mounted == []
        assert not any(os.path.ismount(p) for p in paths)
        assert not (paths[0] / "segment.log").exists()  # it lived in memory only
        assert isrlab_mounts(tmp_path) == []
    finally:
        for p in paths:
            unmount(p)


@needs_root
def test_unmount_all_keeping_the_files_puts_them_back_in_the_plain_directory(tmp_path):
    """`--keep-data` on `medium: tmpfs`: the brokers' files outlive their mounts (they were
    lost with the mount before)."""
    mounts = TmpfsMounts()
    path = tmp_path / "run" / "broker-1"
    try:
        assert mounts.mount(path)
        (path / "orders-0").mkdir()
        (path / "orders-0" / "00000000000000000000.log").write_bytes(b"records")
        (path.parent / "broker-1.kept").mkdir()  # what a killed predecessor may have left
        mounts.unmount_all(keep=True)
        assert not os.path.ismount(path) and isrlab_mounts(tmp_path) == []
        assert (path / "orders-0" / "00000000000000000000.log").read_bytes() == b"records"
        assert not (path.parent / "broker-1.kept").exists()
    finally:
        unmount(path)


@needs_root
def test_a_busy_mount_is_detached_lazily(tmp_path):
    mounts = TmpfsMounts()
    path = tmp_path / "busy"
    try:
        assert mounts.mount(path)
        with open(path / "open-file", "wb") as held:  # a plain umount now fails: target is busy
            held.write(b"still open")
            assert unmount(path) is True
        assert not os.path.ismount(path)
    finally:
        unmount(path)


@needs_root
def test_disk_loss_on_a_tmpfs_keeps_the_mount(tmp_path):
    mounts = TmpfsMounts()
    data_dir = tmp_path / "broker-1"
    try:
        assert mounts.mount(data_dir)
        d = durability(data_dir)
        log, _ = open_log(data_dir, d)
        fill(log, 2)
        log.flush(1.0)
        effect = disk_loss(data_dir)
        assert effect["files"] >= 1 and effect["journal"]
        assert os.path.ismount(data_dir) and list(data_dir.iterdir()) == []
    finally:
        mounts.unmount_all()
