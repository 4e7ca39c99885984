"""Joining the network namespace a run made for this process (DESIGN section 5, netns).

A node or client of a `backend: netns` run calls `enter` first thing, before any socket
exists: the namespace of a thread is where the sockets it (or a thread it starts, such as
ZeroMQ's I/O threads) opens live. Python 3.11 has no `os.setns`, hence libc.
"""
from __future__ import annotations

import ctypes
import os

CLONE_NEWNET = 0x40000000
#: where `ip netns add NAME` keeps a namespace open (a bind mount of its nsfs file)
NETNS_DIR = "/run/netns"


def enter(name: str) -> None:
    """Move the calling thread into the named network namespace; OSError naming it if not."""
    path = os.path.join(NETNS_DIR, name)
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        if libc.setns(fd, CLONE_NEWNET) != 0:
            errno = ctypes.get_errno()
            raise OSError(errno, f"setns({path}): {os.strerror(errno)}")
    finally:
        os.close(fd)
