"""The layers point down (STYLE.md), checked by import-linter against the contracts in
pyproject.toml: testbed -> faults -> the node runtime -> wire and storage -> protocol ->
common; the analysis never imports the system under test; no two sibling modules or
packages import each other, anywhere. A failure prints the offending import chain."""
from __future__ import annotations

import os
from pathlib import Path

from importlinter.cli import lint_imports

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_contract_is_kept(capsys) -> None:
    cwd = os.getcwd()
    os.chdir(ROOT)  # import-linter finds the packages from the working directory
    try:
        code = lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True)
    finally:
        os.chdir(cwd)
    report = capsys.readouterr().out
    assert code == 0, report
    assert report.count("KEPT") == 4, report
