"""Kafka's UnifiedLog for one partition directory `<data_dir>/<topic>-<partition>/`.

The log is a list of segments named by their base offset. It owns the three
per-partition checkpoints: the recovery point (everything below it was flushed, so
recovery trusts it), the HW checkpoint, and the leader-epoch cache (R5).

Recovery at open follows Kafka's LogLoader: batches below the recovery point are only
parsed (to rebuild the in-memory index), batches from the recovery point on have their
CRC and offset continuity checked, and the log is cut at the first bad batch. Like Kafka,
this trusts what was flushed: a corruption below the recovery point is not detected.

isrlab has no retention yet, so the log always starts at offset 0; a first segment
missing after a power loss is a hole, and recovery drops everything after a hole.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from broker.common.record_batch import (
    BatchInfo,
    CorruptBatch,
    batch_records,
    batch_values,
    record_set_count,
    scan_batches,
    stamp_batch,
)
from broker.protocol.epochs import EpochHistory
from broker.storage import checkpoint
from broker.storage.durability import Durability
from broker.storage.epoch_cache import LeaderEpochCache
from broker.storage.flush import FlushPolicy
from broker.storage.layout import partition_dir_name
from broker.storage.segment import Segment, parse_segment_name


class OffsetOutOfRange(ValueError):
    """A read outside [log start, LEO]; the runtime answers OFFSET_OUT_OF_RANGE."""

    def __init__(self, partition: str, offset: int, log_start: int, log_end: int) -> None:
        super().__init__(f"{partition}: offset {offset} outside [{log_start}, {log_end}]")
        self.offset = offset
        self.log_start_offset = log_start
        self.log_end_offset = log_end


@dataclass(frozen=True)
class RecoveryReport:
    """What recovery at open did; the runtime records it as the `recovered` event."""

    valid_to: int  # the LEO after recovery
    dropped_bytes: int
    reason: str | None  # why recovery cut the log, None when nothing was cut
    checkpoint_problems: tuple[str, ...] = ()  # garbled checkpoints replaced by defaults


class PartitionLog:
    def __init__(self, directory: Path, name: str, segment_bytes: int, flush_policy: FlushPolicy,
                 durability: Durability, segments: list[Segment], epoch_cache: LeaderEpochCache,
                 recovery_point: int, hw_checkpoint: int, now: float) -> None:
        self._dir = directory
        self._name = name
        self._segment_bytes = segment_bytes
        self._policy = flush_policy
        self._durability = durability
        self._segments = segments
        self._bases = [s.base_offset for s in segments]
        self._epoch_cache = epoch_cache
        self._leo = segments[-1].next_offset
        self._rp = recovery_point
        self._hw = hw_checkpoint
        self._last_flush = now

    # ---------------------------------------------------------------- opening and recovery
    @classmethod
    def open(cls, data_dir: Path, topic: str, partition: int, segment_bytes: int,
             flush_policy: FlushPolicy, durability: Durability,
             now: float) -> tuple["PartitionLog", RecoveryReport]:
        """Open (creating if needed) and recover the log of one partition."""
        name = partition_dir_name(topic, partition)
        directory = Path(data_dir) / name
        directory.mkdir(parents=True, exist_ok=True)
        recovery_point, rp_problem = checkpoint.read_recovery_point(directory)
        hw, hw_problem = checkpoint.read_high_watermark(directory)
        cache, epoch_problem = LeaderEpochCache.load(directory, durability)
        segments, epoch_starts, dropped, reason = _recover_segments(
            directory, recovery_point, durability, now)
        if not segments:
            segments = [Segment.create(directory, 0, durability)]
        leo = segments[-1].next_offset
        cache.truncate_from_end(leo, now)
        cache.learn_from_batches(epoch_starts, now)
        if recovery_point > leo:
            recovery_point = leo
            checkpoint.write_recovery_point(directory, leo, durability, now)
        log = cls(directory, name, segment_bytes, flush_policy, durability, segments, cache,
                  recovery_point, hw, now)
        problems = tuple(p for p in (rp_problem, hw_problem, epoch_problem) if p is not None)
        return log, RecoveryReport(leo, dropped, reason, problems)

    # ---------------------------------------------------------------- state
    @property
    def log_start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def epochs(self) -> EpochHistory:
        """The live epoch history (R5, R6); change it only through this log."""
        return self._epoch_cache.history

    @property
    def hw_checkpoint(self) -> int:
        """The HW as last checkpointed: read at open (0 if none), then as written."""
        return self._hw

    @property
    def recovery_point(self) -> int:
        return self._rp

    @property
    def directory(self) -> Path:
        return self._dir

    # ---------------------------------------------------------------- appends
    def append_record_set(self, base_offset: int, leader_epoch: int, record_set: bytes,
                          now: float, count: int | None = None) -> int:
        """Leader append (R4): stamp the producer's record set as one batch; returns the LEO.

        `count`: its records, as `record_set_count` found them when the replica checked the
        set (every produce: `AppendRecords.count`), so that the log need not walk the records
        again; None: the log counts (and checks) them."""
        if base_offset != self._leo:
            raise ValueError(f"{self._name}: leader append at {base_offset} but LEO is {self._leo}")
        if count is None:
            count = record_set_count(record_set)
        data = stamp_batch(base_offset, leader_epoch, record_set)
        rolled = self._maybe_roll(len(data))
        segment = self._segments[-1]
        segment.append(data, base_offset, base_offset + count)
        self._durability.wrote(segment.path, segment.size, now)
        self._leo = base_offset + count
        self._apply_flush_policy(rolled, now)
        return self._leo

    def append_batches(self, raw: bytes | memoryview, now: float, scanned: list[BatchInfo] | None = None) -> int:
        """Follower append of whole batches fetched from the leader; returns the LEO.

        All or nothing: a bad CRC or a gap in offsets raises CorruptBatch before any byte
        is written. Epochs newer than the cache's latest are learnt from the batches, as
        Kafka's follower does (R5). `scanned`: what `scan_batches` found in exactly `raw`,
        CRCs checked, when the replica did that already (every fetched append); the log then
        checks only that they start at its LEO, instead of reading every batch again.
        """
        if not raw:
            return self._leo
        if scanned is None:
            batches, problem = scan_batches(raw, expect_offset=self._leo)
        else:
            batches = scanned
            found = batches[0].base_offset if batches else None
            problem = None if found == self._leo else f"offset gap: expected {self._leo}, found {found}"
        if problem is not None:
            raise CorruptBatch(f"{self._name}: follower append at LEO {self._leo}: {problem}")
        self._epoch_cache.learn_from_batches(((b.leader_epoch, b.base_offset) for b in batches), now)
        rolled = self._maybe_roll(len(raw))
        segment = self._segments[-1]
        segment.append_scanned(raw, batches)
        self._durability.wrote(segment.path, segment.size, now)
        last = batches[-1]
        self._leo = last.base_offset + last.count  # (`next_offset`, without the property's call)
        self._apply_flush_policy(rolled, now)
        return self._leo

    def _maybe_roll(self, incoming: int) -> bool:
        """Start a new segment when the active one would exceed segment_bytes (never empty)."""
        active = self._segments[-1]
        if active.size == 0 or active.size + incoming <= self._segment_bytes:
            return False
        self._segments.append(Segment.create(self._dir, self._leo, self._durability))
        self._bases.append(self._leo)
        return True

    def _apply_flush_policy(self, rolled: bool, now: float) -> None:
        if self._policy.should_flush(self._leo - self._rp, self._last_flush, now, rolled):
            self.flush(now)

    # ---------------------------------------------------------------- reads
    def read(self, offset: int, max_bytes: int, upper: int) -> bytes:
        """Whole batches from the one holding `offset`, each with base offset < `upper`.

        Stops before `max_bytes` would be exceeded, but returns at least one batch if one
        qualifies, so a consumer always makes progress. May span segments.
        """
        if offset < self.log_start_offset or offset > self._leo:
            raise OffsetOutOfRange(self._name, offset, self.log_start_offset, self._leo)
        if offset == self._leo:
            return b""
        parts = []
        budget = max_bytes
        i = bisect_right(self._bases, offset) - 1
        first = i
        while i < len(self._segments):
            segment = self._segments[i]
            j = segment.batch_index(offset) if i == first else 0
            start = segment.start_of(j)
            below_upper = bisect_left(segment.offsets, upper, j)
            fitting = bisect_right(segment.ends, start + budget, j)
            end_index = below_upper if below_upper < fitting else fitting  # (not min(): it parses keywords on 3.11)
            if end_index <= j:
                if i == first and below_upper > j:
                    end_index = j + 1
                else:
                    break
            data = segment.pread(start, segment.ends[end_index - 1])
            parts.append(data)
            budget -= len(data)
            if end_index < len(segment.offsets):
                break
            i += 1
        return parts[0] if len(parts) == 1 else b"".join(parts)

    # ---------------------------------------------------------------- truncation, epochs, checkpoints
    def truncate_to(self, offset: int, now: float) -> int:
        """Cut the log at the batch boundary at or below `offset` (R10, R13); returns the LEO.

        The epoch cache is truncated with it (R5), and a recovery point above the new LEO is
        lowered and persisted before anything new is appended, so that bytes appended over
        the cut are CRC-checked by a later recovery.
        """
        if offset < self.log_start_offset:
            raise ValueError(f"{self._name}: truncation to {offset} below log start "
                             f"{self.log_start_offset}")
        if offset >= self._leo:
            # Nothing to cut, but an empty epoch at the end (a former leader's term with no
            # records) still leaves the cache, as the replica state machine drops it.
            self._epoch_cache.truncate_from_end(self._leo, now)
            return self._leo
        i = bisect_right(self._bases, offset) - 1
        for later in self._segments[i + 1:]:
            later.delete(self._durability)
        del self._segments[i + 1:]
        del self._bases[i + 1:]
        segment = self._segments[i]
        segment.truncate_batches(segment.batch_index(offset), self._durability)
        self._leo = segment.next_offset
        self._epoch_cache.truncate_from_end(self._leo, now)
        if self._rp > self._leo:
            self._rp = self._leo
            checkpoint.write_recovery_point(self._dir, self._rp, self._durability, now)
        return self._leo

    def assign_epoch(self, epoch: int, start_offset: int, now: float) -> bool:
        """R5: record (and persist) that `epoch` starts at `start_offset`."""
        return self._epoch_cache.assign(epoch, start_offset, now)

    def checkpoint_hw(self, hw: int, now: float) -> None:
        """Persist the HW (Kafka's replication-offset checkpoint); skipped when unchanged."""
        if hw != self._hw:
            checkpoint.write_high_watermark(self._dir, hw, self._durability, now)
            self._hw = hw

    # ---------------------------------------------------------------- flushing
    def flush(self, now: float) -> None:
        """Make every appended byte durable, then move the recovery point to the LEO.

        The order matters: a recovery point persisted ahead of durable bytes would let
        recovery trust bytes a power loss tore.
        """
        i = max(bisect_right(self._bases, self._rp) - 1, 0)
        for segment in self._segments[i:]:
            if segment.flushed_size != segment.size:
                self._durability.flush(segment.path, now, segment.fd)
                segment.flushed_size = segment.size
        self._last_flush = now
        if self._rp != self._leo:
            self._rp = self._leo
            checkpoint.write_recovery_point(self._dir, self._rp, self._durability, now)

    def flush_due(self) -> float:
        """When `tick` will flush (the interval policy), -inf for at once, inf for never."""
        return self._policy.due(self._leo - self._rp, self._last_flush)

    def tick(self, now: float) -> None:
        """Time passes: the interval flush policy may fire."""
        self._apply_flush_policy(False, now)

    def close(self) -> None:
        """Release file handles. Does not flush: a controlled shutdown calls flush first."""
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        """The replica left the partition (R35): close it and remove its directory."""
        self.close()
        for path in sorted(self._dir.iterdir()):
            path.unlink()
            self._durability.removed(path)
        self._dir.rmdir()


def _recover_segments(directory: Path, recovery_point: int, durability: Durability,
                      now: float) -> tuple[list[Segment], list[tuple[int, int]], int, str | None]:
    """Validate the segment files in order; cut at the first bad batch, delete what follows.

    Returns the kept segments, the (epoch, start offset) changes seen in their batches,
    the bytes dropped, and why recovery cut (None when it did not).
    """
    segments: list[Segment] = []
    epoch_starts: list[tuple[int, int]] = []
    dropped = 0
    reason: str | None = None
    expect = 0
    for base, path in _segment_files(directory):
        if reason is None and base != expect:
            reason = f"{path.name}: segment starts at {base}, expected {expect}"
        if reason is not None:
            dropped += path.stat().st_size
            path.unlink()
            durability.removed(path)
            continue
        batches, problem = _scan_segment(path.read_bytes(), base, recovery_point)
        segment, cut = Segment.reopen(path, base, batches, durability, now)
        segments.append(segment)
        dropped += cut
        if problem is not None:
            reason = f"{path.name}: {problem}"
        expect = segment.next_offset
        last_epoch = epoch_starts[-1][0] if epoch_starts else None
        for b in batches:
            if b.leader_epoch != last_epoch:
                epoch_starts.append((b.leader_epoch, b.base_offset))
                last_epoch = b.leader_epoch
    return segments, epoch_starts, dropped, reason


def _scan_segment(data: bytes, base: int, recovery_point: int) -> tuple[list[BatchInfo], str | None]:
    """Batches of one segment: parsed below the recovery point, CRC-checked from it on."""
    batches, problem = scan_batches(data, check_crc=False, expect_offset=base)
    first_unflushed = bisect_left(batches, recovery_point, key=lambda b: b.base_offset)
    if first_unflushed < len(batches):
        start = batches[first_unflushed]
        checked, problem = scan_batches(data, start.position, check_crc=True,
                                        expect_offset=start.base_offset)
        batches = batches[:first_unflushed] + checked
    return batches, problem


def _segment_files(directory: Path) -> list[tuple[int, Path]]:
    found = []
    for path in directory.iterdir():
        base = parse_segment_name(path.name)
        if base is not None:
            found.append((base, path))
    return sorted(found)


def read_partition_dir(path: Path) -> list[tuple[int, int, bytes]]:
    """(offset, leader epoch, value) of every record on disk, stopping at the first bad batch.

    Reads the files as they are, without recovery and without changing anything: used
    after a run to dump each replica's final log.
    """
    out: list[tuple[int, int, bytes]] = []
    for data, batches in _partition_segments(Path(path)):
        out.extend(batch_records(data, batches))
    return out


def read_partition_values(path: Path) -> list[tuple[int, int, tuple[bytes, ...]]]:
    """(base offset, leader epoch, values) of every batch on disk: `read_partition_dir`'s
    records a batch at a time (`batch_values`), for the final dump of the logs."""
    out: list[tuple[int, int, tuple[bytes, ...]]] = []
    for data, batches in _partition_segments(Path(path)):
        out.extend(batch_values(data, batches))
    return out


def _partition_segments(path: Path) -> Iterator[tuple[bytes, list[BatchInfo]]]:
    """Each segment file's bytes and its well-formed batches, in offset order, stopping at the
    first bad batch (the segment that holds it is the last, with the batches before it)."""
    expect = 0
    for base, segment_path in _segment_files(path):
        if base != expect:
            break
        data = segment_path.read_bytes()
        batches, problem = scan_batches(data, expect_offset=base)
        yield data, batches
        if problem is not None:
            break
        if batches:
            expect = batches[-1].next_offset
