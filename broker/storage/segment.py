"""One segment file of a partition log and its in-memory batch index (Kafka's LogSegment).

The file holds whole batches back to back. The index is two parallel arrays, the base
offset of every batch and the file position where it ends, so that finding the batch
holding an offset, or the last batch that fits a byte budget, is a bisect, and a read is
one `os.pread` of contiguous bytes. The descriptor stays open for the segment's life.
"""
from __future__ import annotations

import os
from array import array
from bisect import bisect_right
from pathlib import Path

from broker.common.record_batch import BatchInfo
from broker.storage.durability import Durability, write_all

SUFFIX = ".log"
_NAME_DIGITS = 20


def segment_name(base_offset: int) -> str:
    return f"{base_offset:0{_NAME_DIGITS}d}{SUFFIX}"


def parse_segment_name(name: str) -> int | None:
    """The base offset a segment file is named after, None for any other file."""
    stem = name[:-len(SUFFIX)]
    if name.endswith(SUFFIX) and len(stem) == _NAME_DIGITS and stem.isdigit():
        return int(stem)
    return None


class Segment:
    __slots__ = ("base_offset", "path", "fd", "size", "flushed_size", "offsets", "ends",
                 "next_offset")

    def __init__(self, base_offset: int, path: Path, fd: int) -> None:
        self.base_offset = base_offset
        self.path = path
        self.fd = fd
        self.size = 0
        self.flushed_size = 0
        self.offsets = array("q")  # base offset of each batch
        self.ends = array("q")  # file position just after each batch
        self.next_offset = base_offset

    @classmethod
    def create(cls, partition_dir: Path, base_offset: int, durability: Durability) -> "Segment":
        path = partition_dir / segment_name(base_offset)
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_TRUNC, 0o644)
        durability.created(path)
        segment = cls(base_offset, path, fd)
        segment.flushed_size = -1  # the first flush must make the file's existence durable
        return segment

    @classmethod
    def reopen(cls, path: Path, base_offset: int, batches: list[BatchInfo],
               durability: Durability, now: float) -> tuple["Segment", int]:
        """An existing file of which recovery kept `batches`; anything after them is cut.

        Returns the segment and the number of bytes cut.
        """
        fd = os.open(path, os.O_RDWR | os.O_APPEND)
        segment = cls(base_offset, path, fd)
        found = os.fstat(fd).st_size
        durability.opened(path, found, now)
        valid_end = batches[-1].position + batches[-1].size if batches else 0
        if found > valid_end:
            os.ftruncate(fd, valid_end)
            durability.truncated(path, valid_end, fd)
        segment.size = valid_end
        durable = durability.durable_length(path)
        segment.flushed_size = -1 if durable is None else durable
        for info in batches:
            segment.offsets.append(info.base_offset)
            segment.ends.append(info.position + info.size)
        if batches:
            segment.next_offset = batches[-1].next_offset
        return segment, found - valid_end

    def append(self, data: bytes | memoryview, base_offset: int, next_offset: int) -> None:
        """Append one batch. Hot path of the leader."""
        write_all(self.fd, data)
        self.size += len(data)
        self.offsets.append(base_offset)
        self.ends.append(self.size)
        self.next_offset = next_offset

    def append_scanned(self, data: bytes | memoryview, batches: list[BatchInfo]) -> None:
        """Append batches validated by scan_batches over exactly `data`."""
        write_all(self.fd, data)
        start = self.size
        for info in batches:
            self.offsets.append(info.base_offset)
            self.ends.append(start + info.position + info.size)
        self.size += len(data)
        last = batches[-1]
        self.next_offset = last.base_offset + last.count  # (`BatchInfo.next_offset`, without the property's call)

    def batch_index(self, offset: int) -> int:
        """Index of the batch holding `offset` (the caller knows the segment holds it)."""
        return bisect_right(self.offsets, offset) - 1

    def start_of(self, index: int) -> int:
        return self.ends[index - 1] if index else 0

    def pread(self, start: int, end: int) -> bytes:
        data = os.pread(self.fd, end - start, start)
        if len(data) != end - start:
            raise OSError(f"{self.path}: short read at {start}: {len(data)} of {end - start} "
                          "bytes (file changed behind the log's back)")
        return data

    def truncate_batches(self, keep: int, durability: Durability) -> int:
        """Keep the first `keep` batches; returns the bytes cut."""
        position = self.start_of(keep)
        cut = self.size - position
        os.ftruncate(self.fd, position)
        durability.truncated(self.path, position, self.fd)
        if keep < len(self.offsets):
            self.next_offset = self.offsets[keep]
        del self.offsets[keep:]
        del self.ends[keep:]
        self.size = position
        self.flushed_size = min(self.flushed_size, position)
        return cut

    def close(self) -> None:
        os.close(self.fd)

    def delete(self, durability: Durability) -> None:
        self.close()
        os.unlink(self.path)
        durability.removed(self.path)
