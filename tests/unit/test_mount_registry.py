"""A broker's tmpfs is in the run's registry before it is mounted, and the mount is a system
call of the supervisor's own: a tester's supervisor, SIGKILLed while it mounted, left a
mount that neither its watchman nor `status` nor a later run removed (registered only once
mount(8) had returned, and a mount(8) child could finish after the reaping)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import faults.storage as storage
from testbed.config.specs import NodeSpec
from testbed.supervisor.cluster import Cluster
from testbed.supervisor.processes import Registry
from testbed.supervisor.run_dir import RunDir


class _Mounts:
    def __init__(self, registry: Registry, works: bool) -> None:
        self.registry, self.works, self.seen = registry, works, []

    def mount(self, path: Path) -> bool:
        self.seen.append(list(self.registry.data["mounts"]))  # what a reaper would find now
        return self.works


class _Mounting(Cluster):
    def __init__(self, root: Path, works: bool) -> None:  # noqa: D107 - only what `_mount_data_dir` reads
        self.dir = RunDir(root / "run")
        self.registry = Registry(root, "run", root / "sock")
        self.mounts = _Mounts(self.registry, works)
        self.warnings: list[str] = []


@pytest.mark.parametrize("works", [True, False])
def test_the_mount_is_registered_before_it_is_made_and_forgotten_if_it_fails(tmp_path: Path, works: bool) -> None:
    cluster = _Mounting(tmp_path, works)
    try:
        broker = NodeSpec("broker", 1)
        data = str(cluster.dir.data_dir("broker-1"))
        assert cluster._mount_data_dir(broker) is works
        assert cluster.mounts.seen == [[data]]
        assert json.loads(cluster.registry.path.read_text())["mounts"] == ([data] if works else [])
        assert bool(cluster.warnings) is not works
    finally:  # else this test process's index names a run in progress: `status` would show it
        cluster.registry.remove()


def test_tmpfs_is_mounted_by_the_system_call_not_a_mount_child(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    calls = []
    monkeypatch.setattr(storage.os, "geteuid", lambda: 0)
    monkeypatch.setattr(storage, "_libc_mount", lambda *args: calls.append(args) or 0)
    monkeypatch.setattr(storage.subprocess, "run", lambda *a, **k: pytest.fail(f"a child process: {a}"))
    mounts = storage.TmpfsMounts()
    assert mounts.mount(tmp_path / "b1")
    assert calls == [(b"isrlab", str(tmp_path / "b1").encode(), b"tmpfs", 0, b"mode=0755")]
    assert mounts.mounted == [tmp_path / "b1"]
