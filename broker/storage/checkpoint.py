"""Small checkpoint files, each replaced atomically and durable at once (as Kafka fsyncs them).

Per partition directory: `high-watermark`, `recovery-point` and `leader-epoch-checkpoint`;
per broker data directory: `clean-shutdown` (R28). Text formats follow Kafka's: a version
line first, so a future format can be told apart from a garbled one.

Writers join their paths as strings (`_in`), not with pathlib: a checkpoint is written at
every flush, and pathlib's parsing of a joined path cost more than the write on tmpfs.

Readers never raise on bad content: a broker must start whatever a fault did to these
files. They return a safe default with a description of the problem for the caller to log
(0 for offsets, which makes recovery check every batch; an empty epoch history, which
recovery rebuilds from the batches; no clean-shutdown epoch, which makes the restart unclean).
"""
from __future__ import annotations

import os
from pathlib import Path

import orjson

from broker.storage.durability import Durability

HIGH_WATERMARK_FILE = "high-watermark"
RECOVERY_POINT_FILE = "recovery-point"
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"
_VERSION = 0


def _read_text(path: Path) -> tuple[list[str] | None, str | None]:
    """The file's lines, or None and why not (None, None: the file is absent)."""
    try:
        text = path.read_bytes().decode("ascii")
    except FileNotFoundError:
        return None, None
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"{path}: unreadable checkpoint ({exc})"
    return text.splitlines(), None


def _in(directory: Path | str, name: str) -> str:
    """`os.path.join(directory, name)` for a file name without a slash, as that join makes it,
    without the generality of posixpath's (a look at every part, for any number of them)."""
    d = os.fspath(directory)
    return d + name if not d or d.endswith("/") else d + "/" + name


def _write_offset(path: str, offset: int, durability: Durability, now: float) -> None:
    durability.write_atomic(path, f"{_VERSION}\n{offset}\n".encode(), now)


def _read_offset(path: Path) -> tuple[int, str | None]:
    lines, problem = _read_text(path)
    if lines is None:
        return 0, problem
    try:
        version, value = lines
        if int(version) != _VERSION or int(value) < 0:
            raise ValueError(f"version {version}, offset {value}")
        return int(value), None
    except ValueError as exc:
        return 0, f"{path}: garbled checkpoint, using 0 ({exc})"


def write_high_watermark(partition_dir: Path, hw: int, durability: Durability, now: float) -> None:
    _write_offset(_in(partition_dir, HIGH_WATERMARK_FILE), hw, durability, now)


def read_high_watermark(partition_dir: Path) -> tuple[int, str | None]:
    """(HW, problem); 0 when absent or garbled (R13 truncates to it in historic mode)."""
    return _read_offset(partition_dir / HIGH_WATERMARK_FILE)


def write_recovery_point(partition_dir: Path, offset: int, durability: Durability,
                         now: float) -> None:
    _write_offset(_in(partition_dir, RECOVERY_POINT_FILE), offset, durability, now)


def read_recovery_point(partition_dir: Path) -> tuple[int, str | None]:
    """(recovery point, problem); 0 when absent or garbled, so recovery checks everything."""
    return _read_offset(partition_dir / RECOVERY_POINT_FILE)


def write_leader_epochs(partition_dir: Path, entries: list[tuple[int, int]],
                        durability: Durability, now: float) -> None:
    """Kafka's leader-epoch-checkpoint: version, count, then `epoch start_offset` lines (R5)."""
    body = "".join(f"{epoch} {start}\n" for epoch, start in entries)
    durability.write_atomic(_in(partition_dir, LEADER_EPOCH_FILE),
                            f"{_VERSION}\n{len(entries)}\n{body}".encode(), now)


def read_leader_epochs(partition_dir: Path) -> tuple[list[tuple[int, int]], str | None]:
    """(entries, problem); empty when absent or garbled (recovery rebuilds it from batches)."""
    path = partition_dir / LEADER_EPOCH_FILE
    lines, problem = _read_text(path)
    if lines is None:
        return [], problem
    try:
        if len(lines) < 2 or int(lines[0]) != _VERSION or int(lines[1]) != len(lines) - 2:
            raise ValueError("bad version or count line")
        entries = []
        for line in lines[2:]:
            epoch_text, start_text = line.split()
            entries.append((int(epoch_text), int(start_text)))
        for (e1, s1), (e2, s2) in zip(entries, entries[1:]):
            if e2 <= e1 or s2 < s1:
                raise ValueError(f"entries out of order: ({e1}, {s1}) then ({e2}, {s2})")
        if entries and (entries[0][0] < 0 or entries[0][1] < 0):
            raise ValueError("negative epoch or offset")
        return entries, None
    except ValueError as exc:
        return [], f"{path}: garbled leader-epoch checkpoint, starting empty ({exc})"


def write_clean_shutdown(data_dir: Path, broker_epoch: int, durability: Durability,
                         now: float) -> None:
    """R28: the last act of a controlled shutdown, after every log was flushed."""
    data = orjson.dumps({"version": _VERSION, "broker_epoch": broker_epoch})
    durability.write_atomic(data_dir / CLEAN_SHUTDOWN_FILE, data, now)


def take_clean_shutdown(data_dir: Path, durability: Durability) -> int | None:
    """R28: the broker epoch of the previous clean shutdown, consuming the marker.

    The marker is removed (durably) before the broker registers, so that a crash of this
    incarnation is never mistaken for a clean shutdown. None when absent or unreadable:
    an unreadable marker is treated as an unclean restart, the safe side.
    """
    path = data_dir / CLEAN_SHUTDOWN_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    os.unlink(path)
    durability.removed(path)
    try:
        record = orjson.loads(raw)
        epoch = record["broker_epoch"]
        if record["version"] != _VERSION or not isinstance(epoch, int) or isinstance(epoch, bool):
            return None
        return epoch
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
