"""The leader-epoch history of one replica (R5, R6), as pure data.

Kafka keeps it in `LeaderEpochFileCache`; here the logic lives in the protocol package so
that the replica state machine and the storage layer (which only persists it, see
`broker/storage/epoch_cache.py`) answer `end_offset_for` with one piece of code.
"""
from __future__ import annotations

from dataclasses import dataclass, field

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass
class EpochHistory:
    """Ordered (epoch, start offset) pairs: epoch -> first offset written in that epoch."""

    entries: list[tuple[int, int]] = field(default_factory=list)

    @property
    def latest_epoch(self) -> int:
        return self.entries[-1][0] if self.entries else UNDEFINED_EPOCH

    def last_written_epoch(self, log_end_offset: int) -> int:
        """The epoch of the last record below `log_end_offset` (R32's log info), -1 if none: an
        epoch that starts at the LEO holds no record yet."""
        written = [epoch for epoch, start in self.entries if start < log_end_offset]
        return written[-1] if written else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` (R5). Returns True if it changed.

        An epoch lower than the latest, or a start offset below the latest start, is ignored:
        the cache only grows at its end. Re-assigning the latest epoch is a no-op.
        """
        if self.entries:
            last_epoch, last_start = self.entries[-1]
            if epoch <= last_epoch or start_offset < last_start:
                return False
            # An empty epoch (no record written in it) is replaced by the new one.
            if start_offset == last_start:
                self.entries.pop()
        self.entries.append((epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop every epoch that starts at or after `end_offset` (truncation of the log, R5)."""
        self.entries = [(e, s) for e, s in self.entries if s < end_offset]

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """R6: (epoch, end offset) for a requested epoch.

        - the latest epoch: (epoch, LEO);
        - otherwise the largest epoch <= requested, ending at the start of the next epoch;
        - no epoch <= requested: (requested epoch, start of the first epoch above it);
        - an empty history: (UNDEFINED_EPOCH, UNDEFINED_OFFSET).
        """
        if not self.entries or epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        latest = self.entries[-1][0]  # (`latest_epoch`, without its call: asked on every fetch)
        if epoch == latest:
            return epoch, log_end_offset
        if epoch > latest:
            # An epoch newer than anything this replica knows: its whole log is below it.
            return latest, log_end_offset
        floor = None
        for i, (e, _start) in enumerate(self.entries):
            if e > epoch:
                if floor is None:
                    return epoch, self.entries[i][1]
                return self.entries[floor][0], self.entries[i][1]
            floor = i
        # unreachable: epoch < latest means some entry is above it
        raise AssertionError("epoch history out of order")

    def copy(self) -> "EpochHistory":
        return EpochHistory(list(self.entries))
