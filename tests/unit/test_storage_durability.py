"""The durability model (DESIGN section 4): journal, writeback, power loss on real files."""
from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from broker.common.record_batch import build_batch, scan_batches
from broker.storage.durability import (
    Durability,
    JournalEntry,
    apply_power_loss,
    read_journal,
)


def make(tmp_path: Path, fsync: str = "simulated", writeback: float = 5.0) -> Durability:
    return Durability(tmp_path / "data", fsync, writeback, tmp_path / "journal.jsonl")


def write(d: Durability, path: Path, data: bytes, now: float) -> None:
    """Append to a file as the log does, reporting it to the model."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        d.created(path)
    with open(path, "ab") as f:
        f.write(data)
    d.wrote(path, path.stat().st_size, now)


def test_created_file_is_not_durable_until_flushed(tmp_path):
    d = make(tmp_path)
    f = tmp_path / "data" / "a.log"
    write(d, f, b"x" * 10, now=0.0)
    assert d.durable_length(f) is None
    d.flush(f, now=1.0)
    assert d.durable_length(f) == 10
    write(d, f, b"y" * 5, now=2.0)
    assert d.durable_length(f) == 10
    d.flush(f, now=3.0)
    assert d.durable_length(f) == 15
    assert read_journal(tmp_path / "journal.jsonl") == {"a.log": JournalEntry(15, 15)}


def test_writeback_makes_old_bytes_durable_and_not_new_ones(tmp_path):
    d = make(tmp_path, writeback=5.0)
    f = tmp_path / "data" / "a.log"
    write(d, f, b"x" * 100, now=0.0)
    write(d, f, b"x" * 100, now=3.0)
    d.tick(4.9)
    assert d.durable_length(f) is None
    d.tick(5.0)  # the first 100 bytes are 5 s old: written back, the file now exists durably
    assert d.durable_length(f) == 100
    d.tick(7.9)
    assert d.durable_length(f) == 100
    d.tick(8.0)
    assert d.durable_length(f) == 200
    journal = read_journal(tmp_path / "journal.jsonl")
    assert journal["a.log"] == JournalEntry(200, 200)


def test_flush_clears_pending_writeback(tmp_path):
    d = make(tmp_path, writeback=1.0)
    f = tmp_path / "data" / "a.log"
    write(d, f, b"x" * 10, now=0.0)
    d.flush(f, now=0.5)
    lines_before = (tmp_path / "journal.jsonl").read_bytes().count(b"\n")
    d.tick(10.0)
    assert d.durable_length(f) == 10
    assert (tmp_path / "journal.jsonl").read_bytes().count(b"\n") == lines_before


def test_truncate_lowers_durable_length_and_pending_writeback(tmp_path):
    d = make(tmp_path, writeback=5.0)
    f = tmp_path / "data" / "a.log"
    write(d, f, b"x" * 100, now=0.0)
    d.flush(f, now=0.0)
    write(d, f, b"x" * 100, now=1.0)
    os.truncate(f, 50)
    d.truncated(f, 50)
    assert d.durable_length(f) == 50
    write(d, f, b"z" * 30, now=2.0)  # bytes 50..80 are new: written at t=2
    d.tick(6.0)  # the write of t=1 is old enough, but it was cut back to 50
    assert d.durable_length(f) == 50
    d.tick(7.0)
    assert d.durable_length(f) == 80
    assert read_journal(tmp_path / "journal.jsonl")["a.log"] == JournalEntry(80, 80)


def test_removed_file_leaves_the_journal(tmp_path):
    d = make(tmp_path)
    f = tmp_path / "data" / "a.log"
    write(d, f, b"x", now=0.0)
    d.flush(f, now=0.0)
    f.unlink()
    d.removed(f)
    assert d.durable_length(f) is None
    assert read_journal(tmp_path / "journal.jsonl") == {}


def test_write_atomic_is_durable_at_once(tmp_path):
    d = make(tmp_path)
    (tmp_path / "data").mkdir()
    f = tmp_path / "data" / "cp"
    d.write_atomic(f, b"0\n42\n", now=1.0)
    assert f.read_bytes() == b"0\n42\n"
    assert d.durable_length(f) == 5
    assert not f.with_name("cp.tmp").exists()
    d.write_atomic(f, b"0\n7\n", now=2.0)
    assert read_journal(tmp_path / "journal.jsonl") == {"cp": JournalEntry(4, 4)}


def test_read_journal_ignores_a_torn_last_line(tmp_path):
    d = make(tmp_path)
    f = tmp_path / "data" / "a.log"
    write(d, f, b"x" * 10, now=0.0)
    d.flush(f, now=0.0)
    d.close()
    journal = tmp_path / "journal.jsonl"
    with open(journal, "ab") as j:
        j.write(b'{"op":"flush","path":"a.log","dur')
    assert read_journal(journal) == {"a.log": JournalEntry(10, 10)}


def test_read_journal_rejects_garbage_in_the_middle(tmp_path):
    journal = tmp_path / "journal.jsonl"
    journal.write_bytes(b'{"op":"create","path":"a","durable":null,"len":0}\nnot json\n')
    with pytest.raises(ValueError, match="journal.jsonl:2"):
        read_journal(journal)


def test_restarted_node_resumes_the_model(tmp_path):
    d = make(tmp_path, writeback=5.0)
    f = tmp_path / "data" / "a.log"
    write(d, f, b"x" * 10, now=0.0)
    d.flush(f, now=0.0)
    write(d, f, b"y" * 10, now=1.0)
    d.close()  # SIGKILL: the page cache keeps 20 bytes, 10 of them durable
    d2 = make(tmp_path, writeback=5.0)
    assert d2.durable_length(f) == 10
    d2.opened(f, 20, now=100.0)  # writeback clock of the unknown-age tail starts now
    d2.tick(104.0)
    assert d2.durable_length(f) == 10
    d2.tick(105.0)
    assert d2.durable_length(f) == 20
    # the journal was compacted to one line per file, then appended to
    lines = (tmp_path / "journal.jsonl").read_bytes().splitlines()
    assert len(lines) == 2


def test_real_fsync_calls_os_fsync(tmp_path, monkeypatch):
    calls = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append(fd) or real_fsync(fd))
    d = make(tmp_path, fsync="real")
    f = tmp_path / "data" / "a.log"
    write(d, f, b"x", now=0.0)
    d.flush(f, now=0.0)  # the file, and its directory because the file is new
    assert len(calls) == 2
    write(d, f, b"x", now=0.0)
    d.flush(f, now=0.0)
    assert len(calls) == 3
    d.write_atomic(tmp_path / "data" / "cp", b"1", now=0.0)  # tmp file and directory
    assert len(calls) == 5


def test_simulated_fsync_makes_no_syscall(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(os, "fsync", calls.append)
    d = make(tmp_path)
    f = tmp_path / "data" / "a.log"
    write(d, f, b"x", now=0.0)
    d.flush(f, now=0.0)
    d.write_atomic(tmp_path / "data" / "cp", b"1", now=0.0)
    assert calls == []
    assert d.durable_length(f) == 1


def test_bad_settings_are_refused(tmp_path):
    with pytest.raises(ValueError, match="fsync"):
        Durability(tmp_path, "sometimes", 5.0, tmp_path / "j")
    with pytest.raises(ValueError, match="writeback"):
        Durability(tmp_path, "real", -1.0, tmp_path / "j")


# ---------------------------------------------------------------- power loss
def batches(first_offset: int, n: int) -> bytes:
    return b"".join(build_batch(first_offset + i, 1, [b"v%d" % (first_offset + i)]) for i in range(n))


def prepared(tmp_path: Path) -> tuple[Durability, Path, Path, int, int]:
    """A log file with 5 durable batches then 5 more in the page cache, and a never-flushed file."""
    d = make(tmp_path)
    durable_file = tmp_path / "data" / "p-0" / "00000000000000000000.log"
    write(d, durable_file, batches(0, 5), now=0.0)
    d.flush(durable_file, now=0.0)
    durable = durable_file.stat().st_size
    write(d, durable_file, batches(5, 5), now=1.0)
    fresh = tmp_path / "data" / "p-0" / "00000000000000000010.log"
    write(d, fresh, batches(10, 1), now=1.0)
    d.close()
    return d, durable_file, fresh, durable, durable_file.stat().st_size


def test_power_loss_unsynced_cuts_to_durable_length(tmp_path):
    _, f, fresh, durable, full = prepared(tmp_path)
    effect = apply_power_loss(tmp_path / "data", tmp_path / "journal.jsonl", "unsynced", random.Random(1))
    assert f.stat().st_size == durable
    assert not fresh.exists()
    assert effect == {
        "p-0/00000000000000000000.log": {"before": full, "after": durable, "action": "cut"},
        "p-0/00000000000000000010.log": {"before": len(batches(10, 1)), "after": 0, "action": "deleted"},
    }


def test_power_loss_partial_cuts_inside_the_tail_reproducibly(tmp_path):
    cuts = []
    for run in ("a", "b"):
        _, f, fresh, durable, full = prepared(tmp_path / run)
        effect = apply_power_loss(tmp_path / run / "data", tmp_path / run / "journal.jsonl", "partial",
                                  random.Random(42))
        after = f.stat().st_size
        assert durable <= after < full
        assert effect["p-0/00000000000000000000.log"] == {"before": full, "after": after, "action": "cut"}
        assert not fresh.exists()
        cuts.append(after)
    assert cuts[0] == cuts[1]


def test_power_loss_torn_keeps_length_and_breaks_one_tail_batch(tmp_path):
    _, f, fresh, durable, full = prepared(tmp_path)
    original = f.read_bytes()
    effect = apply_power_loss(tmp_path / "data", tmp_path / "journal.jsonl", "torn", random.Random(3))
    torn = f.read_bytes()
    assert effect["p-0/00000000000000000000.log"] == {"before": full, "after": full, "action": "torn"}
    assert len(torn) == full
    assert torn[:durable] == original[:durable]
    assert sum(a != b for a, b in zip(original, torn)) == 1
    valid, problem = scan_batches(torn)
    assert "CRC" in problem
    assert valid[-1].position + valid[-1].size >= durable
    assert not fresh.exists()


def test_power_loss_torn_falls_back_to_cut_for_other_files(tmp_path):
    d = make(tmp_path)
    f = tmp_path / "data" / "notes.txt"
    write(d, f, b"abc", now=0.0)
    d.flush(f, now=0.0)
    write(d, f, b"def", now=0.0)
    effect = apply_power_loss(tmp_path / "data", tmp_path / "journal.jsonl", "torn", random.Random(0))
    assert effect["notes.txt"] == {"before": 6, "after": 3, "action": "cut"}


def test_power_loss_updates_the_journal_so_a_second_loss_cuts_nothing(tmp_path):
    _, f, _, _, _ = prepared(tmp_path)
    apply_power_loss(tmp_path / "data", tmp_path / "journal.jsonl", "partial", random.Random(5))
    size = f.stat().st_size
    effect = apply_power_loss(tmp_path / "data", tmp_path / "journal.jsonl", "unsynced", random.Random(5))
    assert f.stat().st_size == size
    assert effect == {"p-0/00000000000000000000.log": {"before": size, "after": size, "action": "kept"}}


def test_power_loss_refuses_an_unknown_mode(tmp_path):
    with pytest.raises(ValueError, match="power loss mode"):
        apply_power_loss(tmp_path, tmp_path / "j", "meteor", random.Random(0))


def test_paths_are_matched_however_they_are_spelled(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d = Durability(Path("data"), "simulated", 5.0, Path("journal.jsonl"))
    f = tmp_path / "data" / "a.log"
    write(d, f, b"x" * 10, now=0.0)
    d.flush(Path("data/a.log"), now=0.0)
    assert d.durable_length("data/./a.log") == 10
    d.close()
    d2 = Durability(tmp_path / "data", "simulated", 5.0, tmp_path / "journal.jsonl")
    d2.opened(Path("data/a.log"), 10, now=1.0)
    assert d2.durable_length(f) == 10


def test_a_file_the_journal_never_heard_of_is_not_durable(tmp_path):
    d = make(tmp_path)
    f = tmp_path / "data" / "orphan.log"
    f.parent.mkdir()
    f.write_bytes(b"abc")  # created, then SIGKILL before the journal line
    d.opened(f, 3, now=0.0)
    assert d.durable_length(f) is None
    d.tick(5.0)
    assert d.durable_length(f) == 3
