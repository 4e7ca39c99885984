"""Checkpoint files and the leader-epoch cache (R5, R28)."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.storage import checkpoint
from broker.storage.durability import Durability, read_journal
from broker.storage.epoch_cache import LeaderEpochCache


@pytest.fixture
def durability(tmp_path: Path) -> Durability:
    (tmp_path / "data").mkdir()
    return Durability(tmp_path / "data", "simulated", 5.0, tmp_path / "journal.jsonl")


def test_offsets_round_trip_and_are_durable(tmp_path, durability):
    part = tmp_path / "data"
    checkpoint.write_high_watermark(part, 41, durability, now=1.0)
    checkpoint.write_recovery_point(part, 40, durability, now=1.0)
    assert checkpoint.read_high_watermark(part) == (41, None)
    assert checkpoint.read_recovery_point(part) == (40, None)
    journal = read_journal(tmp_path / "journal.jsonl")
    assert journal["high-watermark"].durable_length == len((part / "high-watermark").read_bytes())


def test_absent_checkpoints_give_defaults_without_a_problem(tmp_path):
    assert checkpoint.read_high_watermark(tmp_path) == (0, None)
    assert checkpoint.read_recovery_point(tmp_path) == (0, None)
    assert checkpoint.read_leader_epochs(tmp_path) == ([], None)


@pytest.mark.parametrize("garbage", [b"", b"0\n", b"0\nx\n", b"9\n5\n", b"0\n-3\n", b"\xff\xfe", b"0\n1\n2\n"])
def test_garbled_offset_checkpoint_gives_the_default_and_says_why(tmp_path, garbage):
    (tmp_path / "recovery-point").write_bytes(garbage)
    value, problem = checkpoint.read_recovery_point(tmp_path)
    assert value == 0
    assert "recovery-point" in problem


def test_leader_epochs_kafka_format(tmp_path, durability):
    part = tmp_path / "data"
    checkpoint.write_leader_epochs(part, [(1, 0), (3, 17)], durability, now=0.0)
    assert (part / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n3 17\n"
    assert checkpoint.read_leader_epochs(part) == ([(1, 0), (3, 17)], None)


@pytest.mark.parametrize("garbage", ["0\n3\n1 0\n", "0\n1\n1\n", "1\n0\n", "0\n2\n3 0\n1 5\n", "0\n1\n-1 0\n"])
def test_garbled_leader_epochs_give_empty(tmp_path, garbage):
    (tmp_path / "leader-epoch-checkpoint").write_text(garbage)
    entries, problem = checkpoint.read_leader_epochs(tmp_path)
    assert entries == []
    assert "leader-epoch-checkpoint" in problem


def test_clean_shutdown_round_trip_removes_the_marker(tmp_path, durability):
    """R28: the marker holds the broker epoch and is consumed at startup."""
    data_dir = tmp_path / "data"
    checkpoint.write_clean_shutdown(data_dir, 17, durability, now=3.0)
    assert checkpoint.take_clean_shutdown(data_dir, durability) == 17
    assert not (data_dir / "clean-shutdown").exists()
    assert "clean-shutdown" not in read_journal(tmp_path / "journal.jsonl")
    assert checkpoint.take_clean_shutdown(data_dir, durability) is None


@pytest.mark.parametrize("garbage", [b"{", b'{"version":0}', b'{"version":0,"broker_epoch":"7"}',
                                     b'{"version":5,"broker_epoch":7}', b"[]"])
def test_unreadable_clean_shutdown_is_an_unclean_restart(tmp_path, durability, garbage):
    (tmp_path / "data" / "clean-shutdown").write_bytes(garbage)
    assert checkpoint.take_clean_shutdown(tmp_path / "data", durability) is None
    assert not (tmp_path / "data" / "clean-shutdown").exists()


def test_epoch_cache_persists_on_assign_and_truncate(tmp_path, durability):
    """R5: the cache is checkpointed on every change and truncated with the log."""
    part = tmp_path / "data"
    cache, problem = LeaderEpochCache.load(part, durability)
    assert problem is None and cache.history.entries == []
    assert cache.assign(1, 0, now=0.0)
    assert cache.assign(2, 10, now=0.0)
    assert not cache.assign(1, 20, now=0.0)
    assert LeaderEpochCache.load(part, durability)[0].history.entries == [(1, 0), (2, 10)]
    cache.truncate_from_end(10, now=1.0)
    assert LeaderEpochCache.load(part, durability)[0].history.entries == [(1, 0)]


def test_epoch_cache_learns_newer_epochs_from_batches(tmp_path, durability):
    part = tmp_path / "data"
    cache, _ = LeaderEpochCache.load(part, durability)
    cache.assign(2, 0, now=0.0)
    assert cache.learn_from_batches([(1, 3), (2, 5), (4, 8), (4, 9), (5, 12)], now=0.0)
    assert cache.history.entries == [(2, 0), (4, 8), (5, 12)]
    assert LeaderEpochCache.load(part, durability)[0].history.entries == [(2, 0), (4, 8), (5, 12)]
    assert not cache.learn_from_batches([(5, 20)], now=0.0)


def test_garbled_epoch_checkpoint_loads_empty_with_problem(tmp_path, durability):
    (tmp_path / "data" / "leader-epoch-checkpoint").write_text("junk")
    cache, problem = LeaderEpochCache.load(tmp_path / "data", durability)
    assert cache.history.entries == [] and "garbled" in problem
