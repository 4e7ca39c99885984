"""Storage faults on a stopped broker's files (DESIGN section 4), and tmpfs data directories.

`lossy_crash_files` and `disk_loss` act on the files of a node that is already dead: a
power loss or a lost disk happens to the machine, not to the process, so the runtime
SIGKILLs first and calls these after `waitpid` (a live process could rewrite what was cut).
They return the effect for `faults.jsonl` (DESIGN section 7).

`medium: tmpfs` puts each data directory on its own tmpfs mount, so a matrix of runs costs
no disk I/O. Mounting needs root; without it the caller warns and uses a plain directory,
which the durability model treats the same. A run registers its mounts, so that the next
supervisor unmounts those of one that was killed (`testbed.supervisor.processes`); they
carry the source name `isrlab`, so that a leak check finds any left in /proc/mounts
(`isrlab_mounts`).
"""
from __future__ import annotations

import ctypes
import logging
import os
import random
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from broker.storage.durability import apply_power_loss, make_all_durable
from broker.storage.layout import journal_path

log = logging.getLogger("isrlab.faults")
MOUNT_SOURCE = "isrlab"
# /proc/mounts writes a space, tab, newline or backslash in a path as \ooo (octal).
_OCTAL_ESCAPE = re.compile(r"\\([0-7]{3})")


def lossy_crash_files(data_dir: Path, mode: str, rng: random.Random, written_back: bool = False) -> dict:
    """Apply a power loss (`unsynced`, `partial` or `torn`) to a dead broker's data directory;
    `written_back`: the broker had been stopped or paused for the OS writeback's delay or
    longer, so the kernel wrote back every byte it had written, and nothing is lost.

    Returns what the loss changed, per file (relative to `data_dir`):
    {"before", "after", "action": "cut" | "torn" | "deleted"}; files it left whole are not
    listed, so a record stays short with hundreds of fully flushed files.

    A broker without a journal never opened its storage: it died while its process was
    starting (restarted after a disk loss, or added and not started yet). Its storage writes
    nothing before the journal exists, so the loss has nothing to cut.
    """
    journal = journal_path(Path(data_dir))
    if not journal.exists():
        return {}
    if written_back:
        make_all_durable(Path(data_dir), journal)
        return {}
    effects = apply_power_loss(Path(data_dir), journal, mode, rng)
    return {path: e for path, e in effects.items() if e["action"] != "kept"}


def disk_loss(data_dir: Path) -> dict:
    """Wipe a dead broker's data directory and its durability journal: a new, empty disk.

    The directory itself stays (it may be a tmpfs mount point); the journal goes too, as it
    describes a disk that no longer exists. Returns {"entries", "files", "bytes", "journal"}:
    the top-level names removed, how many files and bytes, and whether a journal was removed.
    """
    data_dir = Path(data_dir)
    entries = sorted(data_dir.iterdir()) if data_dir.exists() else []
    files = size = 0
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            inner = [p for p in entry.rglob("*") if p.is_symlink() or not p.is_dir()]
            files += len(inner)
            size += sum(p.lstat().st_size for p in inner)
            shutil.rmtree(entry)
        else:
            files += 1
            size += entry.lstat().st_size
            entry.unlink()
    journal = journal_path(data_dir)
    had_journal = journal.exists()
    if had_journal:
        journal.unlink()
    return {"entries": [e.name for e in entries], "files": files, "bytes": size, "journal": had_journal}


def unmount(path: Path) -> bool:
    """Unmount `path`; False if it is not a mount point. A busy mount (a process that still
    has files open) is detached lazily rather than left behind. RuntimeError if both fail."""
    path = Path(path)
    if not os.path.ismount(path):
        return False
    for args in (["umount", str(path)], ["umount", "--lazy", str(path)]):
        done = subprocess.run(args, capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return True
    raise RuntimeError(f"cannot unmount {path}: {done.stderr.strip()}")


def isrlab_mounts(under: Path) -> list[Path]:
    """Every tmpfs this package mounted below `under` (from /proc/mounts), deepest first: what
    the tests' leak checks look for after a run, a killed one included."""
    root = Path(under).resolve()
    found = []
    for line in Path("/proc/mounts").read_text().splitlines():
        source, target, fstype = line.split()[:3]
        point = Path(_OCTAL_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), target))
        if source == MOUNT_SOURCE and fstype == "tmpfs" and point.is_relative_to(root):
            found.append(point)
    return sorted(found, key=lambda p: len(p.parts), reverse=True)


try:  # resolved once: the mount is a system call of the supervisor's own
    _libc_mount: Callable[..., int] | None = ctypes.CDLL("libc.so.6", use_errno=True).mount
except (OSError, AttributeError):
    _libc_mount = None


def _mount_tmpfs(path: Path) -> str | None:
    """mount(2) a tmpfs at `path`; why it failed, or None. A system call, not mount(8): a
    supervisor SIGKILLed while it mounts has then either mounted or not by the time it is
    dead, when its watchman reaps the mounts its registry names. A mount(8) child lived on,
    mounted after the reaping, and left the mount for good."""
    if _libc_mount is None:
        return "mount(2) is not available here"
    if _libc_mount(MOUNT_SOURCE.encode(), str(path).encode(), b"tmpfs", 0, b"mode=0755") != 0:
        return os.strerror(ctypes.get_errno())
    return None


class TmpfsMounts:
    """The tmpfs mounts of one run; `unmount_all` removes every one of them."""

    def __init__(self) -> None:
        self.mounted: list[Path] = []

    def mount(self, path: Path) -> bool:
        """Mount a fresh tmpfs at `path` (created if missing). False when not root or when
        mount fails (logged with its reason); the caller then warns and uses the directory."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        if os.geteuid() != 0:
            return False
        problem = _mount_tmpfs(path)
        if problem is not None:
            log.warning("mount -t tmpfs at %s failed: %s", path, problem)
            return False
        self.mounted.append(path)
        return True

    def unmount_all(self, keep: bool = False) -> None:
        """Unmount every mount, newest first; every one is tried before a failure is raised.
        With `keep` (`--keep-data`) each mount's files are copied out first and put back in
        its directory once it is unmounted: what the brokers wrote stays in the run."""
        failures = []
        while self.mounted:
            path = self.mounted.pop()
            kept = path.with_name(path.name + ".kept") if keep else None
            try:
                if kept is not None:
                    shutil.rmtree(kept, ignore_errors=True)
                    shutil.copytree(path, kept, symlinks=True)
            except OSError as exc:  # the files are lost, the mount is not left behind
                failures.append(f"cannot keep the files of {path}: {exc}")
                kept = None
            try:
                unmount(path)
                for entry in kept.iterdir() if kept is not None else ():
                    shutil.move(entry, path / entry.name)
            except (RuntimeError, OSError) as exc:
                failures.append(str(exc))
            finally:
                if kept is not None:
                    shutil.rmtree(kept, ignore_errors=True)
        if failures:
            raise RuntimeError("; ".join(failures))
