"""The controller's Raft store over real files: what it saved is what a restart reads (R22),
and a replaced file is never left half-written or beside a stray temporary file."""
from __future__ import annotations

from pathlib import Path

from broker.common.files import replace_durably
from broker.noderuntime.quorum_store import QuorumStore
from broker.protocol.messages import RaftEntry
from broker.protocol.raft import RaftSnapshot


def test_term_vote_log_and_snapshot_survive_a_restart(tmp_path: Path) -> None:
    store = QuorumStore(tmp_path)
    assert store.hard_state() == (0, -1)
    store.save_hard_state(3, 2)
    store.save_entries(0, [RaftEntry(1, {"a": 1}), RaftEntry(2, {"b": 2}), RaftEntry(3, {"c": 3})])
    store.save_entries(2, [RaftEntry(3, {"d": 4})])  # a new leader's entry replaces the suffix
    store.close()
    again = QuorumStore(tmp_path)
    assert again.hard_state() == (3, 2)
    assert [e.record for e in again.entries] == [{"a": 1}, {"b": 2}, {"d": 4}]
    again.save_snapshot(RaftSnapshot(2, 2, {"image": "x"}), [RaftEntry(3, {"d": 4})])
    again.close()
    third = QuorumStore(tmp_path)
    assert third.snapshot == RaftSnapshot(2, 2, {"image": "x"}) and third.base == 2
    assert [e.record for e in third.entries] == [{"d": 4}]
    third.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["metadata-snapshot.json", "metadata.jsonl",
                                                           "quorum-state.json"]


def test_replace_durably_replaces_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "state.json"
    replace_durably(target, b"old")
    replace_durably(target, b"new contents")
    assert target.read_bytes() == b"new contents"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]
