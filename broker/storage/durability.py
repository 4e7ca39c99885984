"""The durability model (DESIGN section 4): for every file, the length a power loss keeps.

The testbed kills processes, never the kernel, so a SIGKILL alone loses nothing: the page
cache survives. To inject the loss of the page cache (`lossy-crash`), each node keeps a
journal of what its disk really holds: which files exist durably and how many of their
bytes. `apply_power_loss` replays that journal on the files after the node is dead.

Bytes become durable in three ways, as on a real host:
- `flush` (fsync): everything written so far; with `fsync: real` the system call is made too;
- the OS writeback: bytes that have been dirty for `writeback` seconds (`tick`);
- `write_atomic` (checkpoint files): durable at once, as Kafka fsyncs its checkpoints.

Metadata changes (create is the exception, see below) are modelled as durable at once:
a truncation or a removal is never undone by a power loss. Undoing them would resurrect
records the protocol already repaired away, a failure outside what the testbed injects;
with `fsync: real` the model is kept honest by fsyncing the file or its directory.
A created file, in contrast, disappears on power loss until it is first made durable.

The journal is JSON Lines, appended with one `os.write` on an O_APPEND descriptor. Each
line is the whole state of one file after a change (`durable` is null while the file was
never made durable), so the last line about a path wins and a reader needs no replay
logic. Lines are written only when the durable state changes, never per append, which
keeps the hot path free of JSON.
"""
from __future__ import annotations

import math
import os
import random
from collections import deque
from dataclasses import dataclass
from pathlib import Path

import orjson

from broker.common import record_batch as batch_format

FSYNC_MODES = ("real", "simulated")
LOSS_MODES = ("unsynced", "partial", "torn")
#: Writes closer together than writeback / this share one writeback deadline (the first
#: one's), as the kernel dates an inode's dirty pages from when it first became dirty.
#: It bounds the deque of a file that is appended to thousands of times a second.
_WRITEBACK_RESOLUTION = 100
#: path components that a relative path's normal form would drop or resolve (`Durability._relative`)
_NOT_PLAIN = frozenset({"", ".", ".."})


@dataclass(frozen=True)
class JournalEntry:
    """What the journal says about one file: what a power loss keeps, and its last size."""

    durable_length: int | None  # None: never made durable, a power loss deletes it
    last_known_length: int


class _FileState:
    __slots__ = ("rel", "length", "durable", "pending")

    def __init__(self, rel: str, length: int, durable: int | None) -> None:
        self.rel = rel
        self.length = length
        self.durable = durable
        self.pending: deque[tuple[float, int]] = deque()  # (written at, length then)


class Durability:
    """One per node: every file the storage layer writes is reported here."""

    def __init__(self, root: Path, fsync: str, writeback: float, journal_path: Path) -> None:
        if fsync not in FSYNC_MODES:
            raise ValueError(f"fsync must be one of {FSYNC_MODES}, got {fsync!r}")
        if writeback < 0:
            raise ValueError(f"writeback must be >= 0 seconds, got {writeback}")
        self.root = Path(root)
        self._prefix = os.path.join(self.root, "")  # the root and a slash, as `_relative` looks for
        self.real = fsync == "real"
        self.writeback = writeback
        self.journal_path = Path(journal_path)
        self._coalesce = writeback / _WRITEBACK_RESOLUTION
        self._files: dict[str, _FileState] = {}  # by path relative to root
        self._aliases: dict[Path | str, _FileState] = {}  # by the caller's spelling, a cache
        #: files with bytes not yet durable, in the order they became dirty (a dict, not a set of
        #: objects hashed by address, so that writeback runs in the same order in every run)
        self._dirty: dict[_FileState, None] = {}
        self._load_and_compact()
        self._journal_fd = os.open(self.journal_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    # ---------------------------------------------------------------- the journal
    def _load_and_compact(self) -> None:
        """Resume the model of a restarted node, rewriting its journal one line per file.

        A file the journal knows but the disk no longer has (deleted by a power loss or a
        disk loss) is forgotten. Compaction keeps the journal proportional to the files.
        """
        if not self.journal_path.exists():
            self.journal_path.parent.mkdir(parents=True, exist_ok=True)
            return
        lines = []
        for rel, entry in read_journal(self.journal_path).items():
            full = self.root / rel
            try:
                size = full.stat().st_size
            except FileNotFoundError:
                continue
            durable = None if entry.durable_length is None else min(entry.durable_length, size)
            self._files[rel] = _FileState(rel, size, durable)
            lines.append(_line("load", rel, durable, size))
        tmp = self.journal_path.with_name(self.journal_path.name + ".tmp")
        tmp.write_bytes(b"".join(lines))
        os.replace(tmp, self.journal_path)

    def _log(self, op: str, f: _FileState, now: float | None = None) -> None:
        os.write(self._journal_fd, _line(op, f.rel, f.durable, f.length, now))

    def _relative(self, path: Path | str) -> str:
        """`os.path.relpath(path, root)`, without its cost where `path` is spelled as the storage
        code spells it, the root then plain names: relpath makes both paths absolute and
        normal first, some 30,000 instructions for every file a node makes."""
        p = os.fspath(path)
        if p.startswith(self._prefix):
            rest = p[len(self._prefix):]
            if all(part not in _NOT_PLAIN for part in rest.split("/")):
                return rest
        return os.path.relpath(p, self.root)

    def _find(self, path: Path | str) -> _FileState | None:
        """The state of a file however the caller spells its path (absolute or not)."""
        f = self._aliases.get(path)
        if f is None:
            f = self._files.get(self._relative(path))
            if f is not None:
                self._aliases[path] = f
        return f

    def _state(self, path: Path | str) -> _FileState:
        f = self._find(path)
        if f is None:
            raise KeyError(f"{path}: not tracked by the durability model "
                           "(call created() or opened() first)")
        return f

    def _track(self, path: Path | str, length: int, durable: int | None, rel: str | None = None) -> _FileState:
        """A new state for the file at `path` (`rel`: its path relative to root, when known)."""
        if rel is None:
            rel = self._relative(path)
        old = self._files.get(rel)
        if old is not None:
            self._dirty.pop(old, None)
            self._aliases.clear()
        f = _FileState(rel, length, durable)
        self._files[rel] = f
        self._aliases[path] = f  # (the caller's next look, a checkpoint's next write, finds it as spelled)
        return f

    # ---------------------------------------------------------------- events from the storage layer
    def created(self, path: Path | str) -> None:
        """A new empty file: it exists only in the page cache until first made durable."""
        self._log("create", self._track(path, 0, None))

    def opened(self, path: Path | str, length: int, now: float) -> None:
        """A file found on disk by a restarting node.

        Bytes beyond the journal's durable length are still in the page cache; their write
        time died with the previous process, so their writeback clock starts now, which can
        only overstate a later loss, never hide one. A file the journal never heard of (the
        node died between creating it and journaling it) is treated as never durable.
        """
        f = self._find(path)
        if f is None:
            f = self._track(path, length, None)
            self._log("create", f, now)
        f.length = length
        if f.durable is not None and f.durable > length:
            f.durable = length
            self._log("open", f, now)
        f.pending.clear()
        if f.durable is None or length > f.durable:
            f.pending.append((now, length))
            self._dirty[f] = None

    def wrote(self, path: Path | str, length: int, now: float) -> None:
        """Bytes reached the page cache; `length` is the file's new total length. Hot path."""
        f = self._aliases.get(path) or self._state(path)
        f.length = length
        pending = f.pending
        if pending and now - pending[-1][0] < self._coalesce:
            pending[-1] = (pending[-1][0], length)
        else:
            pending.append((now, length))
            self._dirty[f] = None

    def truncated(self, path: Path | str, length: int, fd: int | None = None) -> None:
        """The file was cut to `length`; durable at once (module docstring)."""
        f = self._state(path)
        if self.real:
            self._fsync_file(path, fd)
        f.length = length
        if f.durable is not None and f.durable > length:
            f.durable = length
        if f.pending:
            f.pending = deque((t, min(n, length)) for t, n in f.pending)
        self._log("truncate", f)

    def removed(self, path: Path | str) -> None:
        """The file was unlinked; durable at once (module docstring)."""
        f = self._files.pop(self._relative(path), None)
        if f is None:
            return
        self._aliases.clear()
        self._dirty.pop(f, None)
        if self.real:
            _fsync_dir(Path(path).parent)
        os.write(self._journal_fd, orjson.dumps({"op": "remove", "path": f.rel}) + b"\n")

    def flush(self, path: Path | str, now: float, fd: int | None = None) -> None:
        """fsync: the file's current length and its existence become durable."""
        f = self._state(path)
        if self.real:
            self._fsync_file(path, fd)
            if f.durable is None:
                _fsync_dir(Path(path).parent)
        f.pending.clear()
        self._dirty.pop(f, None)
        if f.durable != f.length:
            f.durable = f.length
            self._log("flush", f, now)

    def writeback_due(self) -> float:
        """When `tick` will next make bytes durable (inf: nothing is dirty)."""
        due = math.inf  # (comparisons, not min() over a generator with a default: see BrokerRole.storage_due)
        for f in self._dirty:
            if f.pending:
                at = f.pending[0][0] + self.writeback
                if at < due:
                    due = at
        return due

    def tick(self, now: float) -> None:
        """The OS writeback: bytes dirty for at least `writeback` seconds become durable."""
        writeback = self.writeback
        for f in list(self._dirty):
            pending = f.pending
            written = None
            while pending and pending[0][0] + writeback <= now:
                written = pending.popleft()[1]
            if not pending:
                self._dirty.pop(f, None)
            if written is not None and (f.durable is None or written > f.durable):
                f.durable = written
                self._log("writeback", f, now)

    def write_atomic(self, path: Path | str, data: bytes, now: float) -> None:
        """Replace a small file (a checkpoint) so that it is durable at once: tmp, fsync, rename.
        The paths are strings: a checkpoint is written at every flush, and pathlib's parsing
        of each spelling cost more than the system calls on tmpfs."""
        path = os.fspath(path)
        tmp = path + ".tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            write_all(fd, data)
            if self.real:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        if self.real:
            _fsync_dir(Path(path).parent)
        f = self._aliases.get(path)
        if f is None:  # (`_find`, or else `_track`, with one relpath for both: a checkpoint's first write)
            rel = self._relative(path)
            f = self._files.get(rel) or self._track(path, 0, None, rel)
            self._aliases[path] = f
        f.length = f.durable = len(data)
        f.pending.clear()
        self._dirty.pop(f, None)
        self._log("atomic", f, now)

    def durable_length(self, path: Path | str) -> int | None:
        """What a power loss now would keep of the file (None: the file would disappear)."""
        f = self._find(path)
        return None if f is None else f.durable

    def close(self) -> None:
        os.close(self._journal_fd)

    def _fsync_file(self, path: Path | str, fd: int | None) -> None:
        if fd is not None:
            os.fsync(fd)
            return
        own = os.open(path, os.O_RDONLY)
        try:
            os.fsync(own)
        finally:
            os.close(own)


def _line(op: str, rel: str, durable: int | None, length: int, now: float | None = None) -> bytes:
    record = {"op": op, "path": rel, "durable": durable, "len": length}
    if now is not None:
        record["t"] = round(now, 6)
    return orjson.dumps(record) + b"\n"


def write_all(fd: int, data: bytes | memoryview) -> None:
    """os.write until every byte is written (a regular file may take a short write). The
    first write takes `data` as it is: a view of it is made only for a short write's rest
    (every append and checkpoint writes here, and almost none is short)."""
    written = os.write(fd, data)
    if written < len(data):
        view = memoryview(data)[written:]
        while view:
            view = view[os.write(fd, view):]


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_journal(journal_path: Path) -> dict[str, JournalEntry]:
    """The last known state of every file a node's journal mentions (paths relative to root).

    A SIGKILL can cut the journal inside its last line; that line never returned from its
    write, so it is ignored. A garbled line elsewhere is a real corruption and raises.
    """
    out: dict[str, JournalEntry] = {}
    lines = Path(journal_path).read_bytes().split(b"\n")
    # After split, the last element is the text after the final newline: empty, or torn.
    for number, raw in enumerate(lines[:-1], start=1):
        if not raw:
            continue
        try:
            record = orjson.loads(raw)
            path = record["path"]
            if record.get("op") == "remove":
                out.pop(path, None)
            else:
                out[path] = JournalEntry(record["durable"], record["len"])
        except (orjson.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"{journal_path}:{number}: bad durability journal line: {exc}") from exc
    return out


def apply_power_loss(root: Path, journal_path: Path, mode: str,
                     rng: random.Random) -> dict[str, dict]:
    """Make the files under `root` look as a power loss would leave them (DESIGN section 4).

    - `unsynced`: each file cut to its durable length;
    - `partial`: cut at a random point of its non-durable tail (some of it was written back);
    - `torn`: the tail is kept but one byte inside one of its batches is flipped, so the
      batch's CRC fails (files ending in `.log`; any other file is cut as `unsynced`, and
      so is a `.log` file whose tail holds no whole batch to tear);
    - in every mode a file never made durable is deleted.

    Returns, per file, {"before", "after", "action": "cut|torn|deleted|kept"}. The journal
    is brought up to date (what is on disk after a power loss is, by definition, durable),
    so a second power loss before any flush cuts nothing more.
    """
    if mode not in LOSS_MODES:
        raise ValueError(f"power loss mode must be one of {LOSS_MODES}, got {mode!r}")
    root = Path(root)
    effects: dict[str, dict] = {}
    lines: list[bytes] = []
    for rel, entry in sorted(read_journal(journal_path).items()):
        full = root / rel
        try:
            before = full.stat().st_size
        except FileNotFoundError:
            continue
        if entry.durable_length is None:
            full.unlink()
            effects[rel] = {"before": before, "after": 0, "action": "deleted"}
            lines.append(orjson.dumps({"op": "remove", "path": rel}) + b"\n")
            continue
        durable = min(entry.durable_length, before)
        if durable == before:
            effects[rel] = {"before": before, "after": before, "action": "kept"}
            continue
        action = "cut"
        after = durable
        if mode == "partial":
            after = rng.randint(durable, before - 1)
        elif mode == "torn" and rel.endswith(".log") and _tear_tail(full, durable, rng):
            action, after = "torn", before
        if action == "cut":
            os.truncate(full, after)
        effects[rel] = {"before": before, "after": after, "action": action}
        lines.append(_line("power-loss", rel, after, after))
    if lines:
        with open(journal_path, "ab") as journal:
            journal.write(b"".join(lines))
    return effects


def make_all_durable(root: Path, journal_path: Path) -> None:
    """Record every file the journal knows under `root` as durable at its length: what the
    kernel's writeback did for a node that stopped writing long enough ago, though the node,
    stopped or paused, could not record it itself."""
    lines = []
    for rel, entry in sorted(read_journal(journal_path).items()):
        try:
            size = (Path(root) / rel).stat().st_size
        except FileNotFoundError:
            continue
        if entry.durable_length != size:
            lines.append(_line("written-back", rel, size, size))
    if lines:
        with open(journal_path, "ab") as journal:
            journal.write(b"".join(lines))


def _tear_tail(path: Path, durable: int, rng: random.Random) -> bool:
    """Flip one CRC-covered byte of a batch that reaches past `durable`; False if none does."""
    data = bytearray(path.read_bytes())
    infos, _ = batch_format.scan_batches(data, check_crc=False)
    candidates = [b for b in infos if b.position + b.size > durable]
    if not candidates:
        return False
    victim = rng.choice(candidates)
    # The CRC covers everything from the leader epoch on (byte 16 of the batch).
    first = max(durable, victim.position + 16)
    at = rng.randint(first, victim.position + victim.size - 1)
    data[at] ^= rng.randint(1, 255)
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(data[at:at + 1])
    return True
