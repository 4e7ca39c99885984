"""Where a seed's data directories live: in memory (tmpfs) when the host has room there.

A simulated node's disk is the storage code's own files (segments, checkpoints, the
durability journal), and a seed writes, renames and removes hundreds of them. On a disk
filesystem each checkpoint's rename waits on the device (ext4 starts writing back a file
that replaces another by rename), which cost a quickstart seed more wall time than its
protocol. On tmpfs the same system calls touch only memory, and the files mean what they
meant: what a power loss keeps is decided by the durability journal, never by the medium
(DESIGN section 4), which is why the sim already ignores `storage.medium`.

The run directory's `data` is a symbolic link to the seed's scratch directory, so every
path the nodes, the fault injector and the final read use is the one a run of processes
uses. `--keep` moves the files into the run directory at the end; without it they go.
A worker ended mid-seed (its `run.py sim` killed) removes its scratch directory and the link;
one killed itself leaves the directory behind, and the next worker reaps it.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from testbed.common import owned_dirs

#: the memory filesystem every Linux host mounts
MEMORY = Path("/dev/shm")
#: below this much free memory filesystem a seed keeps its data in the run directory (a
#: container's /dev/shm may be 64 MiB, which a long seed could fill)
ROOM = 512 * 1024 * 1024
_PREFIX = "isrlab-sim-"


def memory_has_room() -> bool:
    try:
        return MEMORY.is_dir() and os.access(MEMORY, os.W_OK) and shutil.disk_usage(MEMORY).free >= ROOM
    except OSError:
        return False


def place_data(data: Path) -> None:
    """Make `data` (a run directory's `data`, not yet created) a link to a fresh scratch
    directory in memory; leave it to be created as a plain directory when there is no room,
    or as it is when it exists already."""
    if data.exists() or data.is_symlink() or not memory_has_room():
        return
    scratch = owned_dirs.make(_PREFIX, MEMORY)
    data.parent.mkdir(parents=True, exist_ok=True)
    data.symlink_to(scratch, target_is_directory=True)


def release_data(data: Path, keep: bool) -> None:
    """At the seed's end: its data moved into the run directory (`keep`), or removed."""
    if not data.is_symlink():
        if not keep:
            shutil.rmtree(data, ignore_errors=True)
        return
    scratch = data.readlink()
    data.unlink()
    if keep:
        shutil.move(scratch, data)
    else:
        shutil.rmtree(scratch, ignore_errors=True)


def remove_mine(sim_dir: Path) -> None:
    """Remove this process's scratch directories (it is about to exit mid-seed), and the links
    to them in `sim_dir`'s run directories, which would point nowhere (trial36's killed sweep
    kept its last seed's `data` link to a directory gone)."""
    mine = f"{_PREFIX}{os.getpid()}-"
    try:
        links = [seed / "data" for seed in sim_dir.iterdir()]  # not a glob: a glob skips a link that dangles
    except OSError:
        links = []
    for link in links:
        try:
            if link.is_symlink() and link.readlink().name.startswith(mine):
                link.unlink()
        except OSError:
            continue  # gone meanwhile, or not ours to remove: the scratch directory goes all the same
    owned_dirs.remove_own(_PREFIX, MEMORY)


def reap_orphans() -> None:
    """Remove the scratch directories of workers that are gone (killed mid-seed)."""
    owned_dirs.reap(_PREFIX, MEMORY)
