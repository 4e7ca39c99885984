"""A controller's durable Raft state: the term and vote, and the metadata log (R22).

Whatever the brokers' `fsync` setting, every write here is made durable with a real fsync
before the node sends anything that rests on it (as KRaft does): a vote or an acknowledged
entry that a crash could forget would break Raft's safety. The log is one JSON line per
entry, `[term, record]`, after a header line `{"base": index of the first entry}`; the
term and vote, and the snapshot of the log below `base` (`{"end", "last_term", "state"}`),
are small JSON files each replaced atomically. A snapshot is written before the log loses
its prefix, so a crash between the two leaves a log that starts below the snapshot's end,
and its entries below the end are ignored.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from broker.common.files import replace_durably
from broker.common.jsonl import read_jsonl
from broker.protocol.messages import RaftEntry
from broker.protocol.raft import RaftSnapshot

STATE_FILE = "quorum-state.json"
LOG_FILE = "metadata.jsonl"
SNAPSHOT_FILE = "metadata-snapshot.json"


class QuorumStore:
    def __init__(self, data_dir: Path) -> None:
        data_dir.mkdir(parents=True, exist_ok=True)
        self.dir = data_dir
        self.state_path = data_dir / STATE_FILE
        self.log_path = data_dir / LOG_FILE
        self.snapshot_path = data_dir / SNAPSHOT_FILE
        self.snapshot = self._read_snapshot()
        self.base = self.snapshot.end if self.snapshot is not None else 0
        # a torn last line of a crashed controller was never acknowledged to anyone
        lines = read_jsonl(self.log_path, prefix_only=True)
        base = lines[0]["base"] if lines and isinstance(lines[0], dict) and isinstance(lines[0].get("base"), int) else 0
        entries = [RaftEntry(int(t), r) for t, r in (line for line in lines if isinstance(line, list) and len(line) == 2)]
        #: the entries from `base` on
        self.entries = entries[self.base - base:] if base <= self.base else []
        self._fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._rewrite(self.entries)  # drop any torn tail and compacted prefix for good

    def _read_snapshot(self) -> RaftSnapshot | None:
        if not self.snapshot_path.exists():
            return None
        d = json.loads(self.snapshot_path.read_text())  # written atomically: whole or absent
        return RaftSnapshot(int(d["end"]), int(d["last_term"]), d["state"])

    def hard_state(self) -> tuple[int, int]:
        """(term, voted_for); (0, -1) for a controller that never voted."""
        if not self.state_path.exists():
            return 0, -1
        try:
            d = json.loads(self.state_path.read_text())
            return int(d["term"]), int(d["voted_for"])
        except (ValueError, KeyError, TypeError):
            return 0, -1

    def save_hard_state(self, term: int, voted_for: int) -> None:
        replace_durably(self.state_path, json.dumps({"term": term, "voted_for": voted_for}).encode())

    def save_snapshot(self, snapshot: RaftSnapshot, entries: list[RaftEntry]) -> None:
        """The snapshot, then a log of exactly `entries` from `snapshot.end` on."""
        replace_durably(self.snapshot_path, json.dumps(
            {"end": snapshot.end, "last_term": snapshot.last_term, "state": snapshot.state}).encode())
        self.snapshot, self.base = snapshot, snapshot.end
        self._rewrite(list(entries))

    def save_entries(self, first: int, entries: list[RaftEntry]) -> None:
        """The log holds `entries` from index `first` on (a suffix after them is dropped)."""
        if first < self.base + len(self.entries):
            self._rewrite(self.entries[:max(0, first - self.base)] + list(entries))
            return
        self.entries.extend(entries)
        os.write(self._fd, b"".join(_line(e) for e in entries))
        os.fsync(self._fd)

    def _rewrite(self, entries: list[RaftEntry]) -> None:
        replace_durably(self.log_path, json.dumps({"base": self.base}).encode() + b"\n"
                        + b"".join(_line(e) for e in entries))
        os.close(self._fd)
        self._fd = os.open(self.log_path, os.O_WRONLY | os.O_APPEND, 0o644)
        self.entries = list(entries)

    def close(self) -> None:
        os.close(self._fd)


#: `json.dumps(..., separators=(",", ":"))` makes this encoder anew for each call (it keeps
#: nothing between calls): one for every entry the controller appends
_COMPACT = json.JSONEncoder(separators=(",", ":"))


def _line(e: RaftEntry) -> bytes:
    return (_COMPACT.encode([e.term, e.record]) + "\n").encode()

