"""Every test process ignores a Spark server a developer may have up (`run.py spark up`):
judgments in tests use their own sessions, unless a test starts its own server; and it has
its own index of runs in progress (`processes.INDEX`)."""
from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

DEFAULT_MATRIX = Path(__file__).resolve().parents[1] / "topologies" / "matrix" / "ci.yaml"
ON_REQUEST = ("matrix", "labs")  # markers of tests that run only when `-m` names them

PROCESS_DIR = Path(tempfile.gettempdir()) / f"isrlab-tests-{os.getpid()}"  # removed when the process ends
os.environ["ISRLAB_SPARK_SERVER_FILE"] = str(PROCESS_DIR / "none.json")
# Each test process reaps only the dead runs it made: a test that kills a supervisor reads
# what it left behind before reaping it, and another worker's run must not reap it first.
os.environ["ISRLAB_LIVE_INDEX"] = str(PROCESS_DIR / "live")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--matrix", default=str(DEFAULT_MATRIX),
                     help="the matrix file (or directory) whose cells `pytest -m matrix` runs "
                          "(default topologies/matrix/ci.yaml)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The matrix's cells and the labs' runs are tests only when asked for (`-m matrix`,
    `-m labs`): the suite's own run (`pytest -n auto`) runs neither whole (it runs a share of
    each as integration tests)."""
    asked = config.option.markexpr or ""
    skipped = [m for m in ON_REQUEST if m not in asked]
    kept = [item for item in items if not any(item.get_closest_marker(m) for m in skipped)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(PROCESS_DIR, ignore_errors=True)
