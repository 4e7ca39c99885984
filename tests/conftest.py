"""Every test process ignores a Spark server a developer may have up (`run.py spark up`):
judgments in tests use their own sessions, unless a test starts its own server."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

os.environ["ISRLAB_SPARK_SERVER_FILE"] = str(Path(tempfile.gettempdir()) / f"isrlab-tests-{os.getpid()}" / "none.json")
