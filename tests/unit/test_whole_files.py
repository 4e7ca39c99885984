"""A verdict file is replaced whole or not at all (`testbed.analysis.whole_files`): a tester's
full disk left 4 KB of invalid JSON as a run's results.json."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from testbed.analysis import whole_files
from testbed.analysis.whole_files import write_whole


def test_a_write_that_fails_leaves_the_old_file_and_no_part(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "results.json"
    target.write_text('{"ok": true}')

    def full(src: object, dst: object) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(whole_files.os, "replace", full)
    with pytest.raises(OSError):
        write_whole(target, b'{"ok": false, "checks": {}}')
    assert target.read_text() == '{"ok": true}' and sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]


def test_a_write_replaces_the_file(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("old")
    write_whole(target, b"new")
    assert target.read_text() == "new" and sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]
