"""Paths that Spark's readers can list.

A reader expands a path as a glob pattern whenever it holds a glob character (`hadoop_path`
escapes those of a name, and the escape is one), and Hadoop's globber then rebuilds each of
its components as a relative path, where a colon reads as a URI scheme: the read fails with
"Relative path in absolute URI". A colon alone is never globbed, and glob characters alone
are escaped, but a tree named `nightly [2026-11-26 10:00]` has both. Such a path is read
through a symlink named by a hash of it, in one directory per user under the system's
temporary directory: links are a few bytes, shared by every process and the local Spark
server alike, and the dangling ones are removed whenever a new one is made.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

#: the links' directory (one per user)
ROOT = Path(tempfile.gettempdir()) / f"isrlab-links-{os.getuid()}"
_GLOB_CHARACTERS = frozenset("\\[]{}*?")


def needs_link(path: Path) -> bool:
    """Whether a reader fails to list `path`: a colon and a glob character in it."""
    text = str(path)
    return ":" in text and not _GLOB_CHARACTERS.isdisjoint(text)


def readable(path: Path) -> Path:
    """`path`, or a link to it with neither a colon nor a glob character in its own path."""
    return link_to(path) if needs_link(path) else path


def link_to(path: Path) -> Path:
    """A symlink to `path` (made absolute; it exists), named by its hash; made if missing."""
    target = path.absolute()
    link = ROOT / hashlib.sha256(os.fsencode(target)).hexdigest()[:32]
    if os.path.islink(link) and os.readlink(link) == str(target):
        return link
    ROOT.mkdir(mode=0o700, parents=True, exist_ok=True)
    _remove_dangling()
    try:
        os.symlink(target, link)
    except FileExistsError:  # another process made it at the same moment: the same target, by its name
        pass
    return link


def _remove_dangling() -> None:
    for entry in os.scandir(ROOT):
        if entry.is_symlink() and not os.path.exists(entry.path):
            Path(entry.path).unlink(missing_ok=True)
