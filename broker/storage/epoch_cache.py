"""Kafka's LeaderEpochFileCache: the replica's epoch history, persisted on every change (R5).

The logic (`assign`, `truncate_from_end`, `end_offset_for`) lives in
`broker/protocol/epochs.py` so the pure replica state machine uses the same code; this
module only keeps the checkpoint file in step with it.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from broker.protocol.epochs import EpochHistory
from broker.storage import checkpoint
from broker.storage.durability import Durability


class LeaderEpochCache:
    def __init__(self, partition_dir: Path, durability: Durability, history: EpochHistory) -> None:
        self._dir = partition_dir
        self._durability = durability
        self.history = history

    @classmethod
    def load(cls, partition_dir: Path, durability: Durability) -> tuple["LeaderEpochCache", str | None]:
        """The cache as checkpointed, and the problem if the checkpoint was garbled."""
        entries, problem = checkpoint.read_leader_epochs(partition_dir)
        return cls(partition_dir, durability, EpochHistory(entries)), problem

    def assign(self, epoch: int, start_offset: int, now: float) -> bool:
        """R5: epoch -> first offset written in it; persisted before the caller goes on."""
        changed = self.history.assign(epoch, start_offset)
        if changed:
            self._persist(now)
        return changed

    def learn_from_batches(self, batches: Iterable[tuple[int, int]], now: float) -> bool:
        """Assign every (leader epoch, base offset) newer than the latest known epoch (R5).

        A follower learns epochs from the batches it fetches, and recovery from the batches
        it keeps (Kafka's LogSegment.recover), so a lost or garbled checkpoint is rebuilt.
        Persisted once, however many epochs were learnt.
        """
        changed = False
        for epoch, base_offset in batches:
            if epoch > self.history.latest_epoch:
                changed = self.history.assign(epoch, base_offset) or changed
        if changed:
            self._persist(now)
        return changed

    def truncate_from_end(self, end_offset: int, now: float) -> bool:
        """R5: the cache is truncated together with the log."""
        before = len(self.history.entries)
        self.history.truncate_from_end(end_offset)
        changed = len(self.history.entries) != before
        if changed:
            self._persist(now)
        return changed

    def _persist(self, now: float) -> None:
        checkpoint.write_leader_epochs(self._dir, self.history.entries, self._durability, now)
