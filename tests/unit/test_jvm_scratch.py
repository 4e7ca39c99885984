"""A JVM's scratch directory outlives no owner: `jvm_scratch.sweep` removes those whose
owning process is gone (a JVM killed with SIGKILL runs no shutdown hook of its own)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.common import jvm_scratch


@pytest.fixture()
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(jvm_scratch, "ROOT", tmp_path / "jvm")
    return tmp_path / "jvm"


def test_a_directory_whose_owner_is_gone_is_removed_by_the_next_one(root: Path) -> None:
    dead = jvm_scratch.make()
    (dead / "blockmgr-1").mkdir()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    jvm_scratch.own(dead, child.pid)
    child.wait()
    mine = jvm_scratch.make()
    assert not dead.exists()
    assert mine.exists() and mine.parent == root


def test_a_live_owner_keeps_its_directory(root: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = jvm_scratch.make()
        jvm_scratch.own(kept, child.pid)
        assert jvm_scratch.sweep() == []
        assert kept.exists()
    finally:
        child.kill()
        child.wait()
    assert jvm_scratch.sweep() == [kept]


def test_a_zombie_owner_is_gone(root: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    path = jvm_scratch.make()
    jvm_scratch.own(path, child.pid)
    deadline = time.monotonic() + 30
    while not _zombie(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)  # until it has exited (not waited for: a zombie)
    try:
        assert jvm_scratch.sweep() == [path]
    finally:
        child.wait()


def test_a_directory_not_yet_owned_is_left_for_a_while(root: Path) -> None:
    fresh = jvm_scratch.make()
    (fresh / "owner").unlink()  # its starter has not written it yet
    assert jvm_scratch.sweep() == []
    old = time.time() - jvm_scratch.UNOWNED_GRACE_S - 1
    os.utime(fresh, (old, old))
    assert jvm_scratch.sweep() == [fresh]


def _zombie(pid: int) -> bool:
    import psutil
    return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
