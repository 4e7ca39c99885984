"""Every test process ignores a Spark server a developer may have up (`run.py spark up`):
judgments in tests use their own sessions, unless a test starts its own server."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

DEFAULT_MATRIX = Path(__file__).resolve().parents[1] / "topologies" / "matrix" / "ci.yaml"

os.environ["ISRLAB_SPARK_SERVER_FILE"] = str(Path(tempfile.gettempdir()) / f"isrlab-tests-{os.getpid()}" / "none.json")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--matrix", default=str(DEFAULT_MATRIX),
                     help="the matrix file (or directory) whose cells `pytest -m matrix` runs "
                          "(default topologies/matrix/ci.yaml)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The matrix's cells are tests only when asked for (`-m matrix`): the suite's own run
    (`pytest -n auto`) does not run the CI matrix."""
    if "matrix" in (config.option.markexpr or ""):
        return
    kept = [item for item in items if item.get_closest_marker("matrix") is None]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept
