"""The environment of node and client processes (`testbed/supervisor/processes.py`,
`child_env`): under PYTHONDONTWRITEBYTECODE each one compiled every module it imports from
source at every start (0.36 s of CPU to import `broker.node`, 0.22 s from bytecode), so the
children keep their bytecode in isrlab's cache instead, never beside the user's sources."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from testbed.supervisor import processes


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    return tmp_path / "cache" / "isrlab" / "pycache"


def test_without_bytecode_beside_the_sources_children_keep_it_in_the_cache(
        cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    env = processes.child_env()
    assert "PYTHONDONTWRITEBYTECODE" not in env and env["PYTHONPYCACHEPREFIX"] == str(cache)
    assert env["PYTHONUNBUFFERED"] == "1"


def test_a_users_own_bytecode_settings_are_left_as_they_are(cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    assert "PYTHONPYCACHEPREFIX" not in processes.child_env()  # Python's own __pycache__ beside the sources
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/somewhere/else")
    env = processes.child_env()
    assert env["PYTHONDONTWRITEBYTECODE"] == "1" and env["PYTHONPYCACHEPREFIX"] == "/somewhere/else"


def test_a_spawned_child_writes_its_bytecode_in_the_cache_and_not_in_the_tree(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    src = tmp_path / "src"
    src.mkdir()
    (src / "mod.py").write_text("VALUE = 1\n")
    proc = processes.spawn(["-c", "import mod"], tmp_path / "child.log", cwd=src)
    assert proc.wait(timeout=60) == 0, (tmp_path / "child.log").read_text()
    assert not (src / "__pycache__").exists()
    assert [p.name for p in cache.rglob("mod.*.pyc")] == [f"mod.{sys.implementation.cache_tag}.pyc"]
