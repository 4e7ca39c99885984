"""The record batch: the unit that is appended, replicated and checksummed (R4).

Layout (big-endian), the same on disk and on the wire, so a fetch returns file bytes
without decoding them:

    base_offset   int64
    length        int32   bytes after this field
    crc           uint32  CRC-32C of every byte after this field
    leader_epoch  int32
    count         int32
    records       count x (int32 length, bytes value)

The leader receives the body (`count` + records, a "record set") from the producer and
stamps base offset, leader epoch and CRC in one pass; followers append the bytes as they
arrive. Recovery recomputes the CRC and checks that base offsets are contiguous.
"""
from __future__ import annotations

import struct
from itertools import repeat
from typing import NamedTuple

import google_crc32c

HEADER = struct.Struct(">qiIii")  # base_offset, length, crc, leader_epoch, count
HEADER_SIZE = HEADER.size  # 24
_PREFIX = struct.Struct(">qi")  # base_offset, length
_LEN = struct.Struct(">i")
_EPOCH_COUNT = struct.Struct(">ii")
#: builds a named tuple from its values as its class's call does, without the call's Python frame
_tuple_new = tuple.__new__
#: bytes covered by `length` that precede the records: crc, leader_epoch, count
_FIXED_AFTER_LENGTH = 12


class CorruptBatch(ValueError):
    """A batch whose bytes do not check out; recovery truncates at its start."""


class BatchInfo(NamedTuple):
    """One batch a scan found. A named tuple: immutable as a frozen dataclass, and built at
    half its cost (a scan makes one per batch, on every fetch a follower appends), or at a
    fifth by `tuple.__new__` itself (`scan_batches`), without the class's generated `__new__`
    in between. As a named tuple it equals (and sorts like) a plain tuple of the same values:
    nothing compares it with another type."""

    base_offset: int
    count: int
    leader_epoch: int
    position: int  # byte position in the buffer it was scanned from
    size: int  # total bytes of the batch, header included

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.count


def encode_record_set(values: list[bytes]) -> bytes:
    """The body a producer sends: count, then each value with its length."""
    parts = [_LEN.pack(len(values))]
    for v in values:
        parts.append(_LEN.pack(len(v)))
        parts.append(v)
    return b"".join(parts)


def record_set_count(record_set: bytes) -> int:
    """Number of records in a producer's record set; raises CorruptBatch if malformed.

    A set whose values all have one length (a producer's batch of numbered values, but
    where the numbers gain a digit) is checked by one `struct` unpack (`_same_length_values`),
    which holds exactly when the walk below finds the set well-formed with those lengths;
    any other set is walked record by record (once a produce, on the leader)."""
    if len(record_set) < 4:
        raise CorruptBatch("record set shorter than its count")
    (count,) = _LEN.unpack_from(record_set, 0)
    if _same_length_values(record_set, 4, count, len(record_set) - 4) is not None:
        return count
    pos = 4
    for _ in range(count):
        if pos + 4 > len(record_set):
            raise CorruptBatch("record set truncated")
        (n,) = _LEN.unpack_from(record_set, pos)
        if n < 0:
            raise CorruptBatch("negative record length")
        pos += 4 + n
    if count <= 0 or pos != len(record_set):
        raise CorruptBatch("record set length does not match its records")
    return count


def stamp_batch(base_offset: int, leader_epoch: int, record_set: bytes) -> bytes:
    """Wrap a validated record set into a batch at `base_offset` in `leader_epoch`."""
    tail = struct.pack(">i", leader_epoch) + record_set
    crc = google_crc32c.value(tail)
    return _PREFIX.pack(base_offset, 4 + len(tail)) + struct.pack(">I", crc) + tail


def build_batch(base_offset: int, leader_epoch: int, values: list[bytes]) -> bytes:
    return stamp_batch(base_offset, leader_epoch, encode_record_set(values))


def scan_batches(buf: bytes | memoryview, start: int = 0, check_crc: bool = True,
                 expect_offset: int | None = None) -> tuple[list[BatchInfo], str | None]:
    """Walk the batches of `buf` from `start`.

    Returns the valid batches and, if the walk stopped before the end of the buffer, why
    (a torn header, a bad CRC, a gap in offsets). The caller truncates at the end of the
    last valid batch. Never raises on bad bytes.
    """
    out: list[BatchInfo] = []
    pos = start
    n = len(buf)
    expected = expect_offset
    while pos < n:
        if pos + HEADER_SIZE > n:
            return out, f"torn header at byte {pos}"
        base_offset, length, crc, epoch, count = HEADER.unpack_from(buf, pos)
        size = 12 + length
        if length < _FIXED_AFTER_LENGTH or pos + size > n:
            return out, f"torn batch at byte {pos} (length {length})"
        if count <= 0 or base_offset < 0:
            return out, f"bad batch header at byte {pos}"
        if expected is not None and base_offset != expected:
            return out, f"offset gap at byte {pos}: expected {expected}, found {base_offset}"
        if check_crc and google_crc32c.value(bytes(buf[pos + 16:pos + size])) != crc:
            return out, f"CRC mismatch in batch at offset {base_offset} (byte {pos})"
        out.append(_tuple_new(BatchInfo, (base_offset, count, epoch, pos, size)))  # (BatchInfo(...), see there)
        expected = base_offset + count
        pos += size
    return out, None


def batch_records(buf: bytes | memoryview, infos: list[BatchInfo]) -> list[tuple[int, int, bytes]]:
    """(offset, leader_epoch, value) for each record of the well-formed batches `infos` of
    `buf` (as `scan_batches` found them). A batch whose values all have one length (a
    producer's batch of its numbered values, but where the numbers gain a digit) is taken
    apart by one `struct` unpack and its tuples made by `zip`: a loop step, an unpack and a
    slice per record were most of reading a replica's final log and of a consumer's fetch.
    Any other batch is walked record by record, which gives the same tuples."""
    data = buf if type(buf) is bytes else bytes(buf)
    unpack = _LEN.unpack_from
    out: list[tuple[int, int, bytes]] = []
    for info in infos:
        offset, epoch, count = info.base_offset, info.leader_epoch, info.count
        pos = info.position + HEADER_SIZE
        values = _same_length_values(data, pos, count, info.size - HEADER_SIZE)
        if values is not None:
            out.extend(zip(range(offset, offset + count), repeat(epoch, count), values))
            continue
        for i in range(count):
            (n,) = unpack(data, pos)
            pos += 4
            out.append((offset + i, epoch, data[pos:pos + n]))
            pos += n
    return out


#: `_same_length_values`' layouts, by (count, value length): a run's batches have few shapes
_SAME_LENGTH: dict[tuple[int, int], struct.Struct] = {}
#: the most records `_same_length_values` lays out at once (more are walked): a layout is a
#: format of two items a record, kept for the process
_SAME_LENGTH_MAX_COUNT = 1024


def _same_length_values(data: bytes, pos: int, count: int, size: int) -> tuple[bytes, ...] | None:
    """The values of the `count` records in the `size` bytes of `data` from `pos` when they
    all have the first one's length and fill those bytes exactly, else None (walk them)."""
    if count <= 0 or count > _SAME_LENGTH_MAX_COUNT or size < 4:
        return None
    (n,) = _LEN.unpack_from(data, pos)
    if n < 0 or size != count * (4 + n):
        return None
    layout = _SAME_LENGTH.get((count, n))
    if layout is None:
        if len(_SAME_LENGTH) >= 4096:  # (a bound, for a process that reads many shapes)
            _SAME_LENGTH.clear()
        layout = _SAME_LENGTH[(count, n)] = struct.Struct(">" + f"i{n}s" * count)
    fields = layout.unpack_from(data, pos)
    return fields[1::2] if fields[0::2] == (n,) * count else None


def batch_values(buf: bytes | memoryview, infos: list[BatchInfo]) -> list[tuple[int, int, tuple[bytes, ...]]]:
    """(base offset, leader epoch, values) for each of the well-formed batches `infos` of `buf`:
    `batch_records`' records a batch at a time, for a reader that needs no tuple per record
    (the final dump of every replica's log, 12,000 records a quickstart seed)."""
    data = buf if type(buf) is bytes else bytes(buf)
    unpack = _LEN.unpack_from
    out: list[tuple[int, int, tuple[bytes, ...]]] = []
    for info in infos:
        pos = info.position + HEADER_SIZE
        values = _same_length_values(data, pos, info.count, info.size - HEADER_SIZE)
        if values is None:
            walked = []
            for _ in range(info.count):
                (n,) = unpack(data, pos)
                pos += 4
                walked.append(data[pos:pos + n])
                pos += n
            values = tuple(walked)
        out.append((info.base_offset, info.leader_epoch, values))
    return out


def decode_batches(buf: bytes | memoryview) -> list[tuple[int, int, bytes]]:
    """(offset, leader_epoch, value) for every record of the valid batches in `buf`."""
    infos, _ = scan_batches(buf, check_crc=False)
    return batch_records(buf, infos)


def decode_batch_values(buf: bytes | memoryview) -> list[tuple[int, int, tuple[bytes, ...]]]:
    """`decode_batches`' records a batch at a time: (base offset, leader epoch, values)."""
    infos, _ = scan_batches(buf, check_crc=False)
    return batch_values(buf, infos)
