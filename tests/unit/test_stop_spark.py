"""`stop_spark` leaves no JVM behind when it returns, and the JVM leaves by itself: Spark's
gateway exits at the end of its standard input, so stopping it closes that pipe and waits
(a JVM merely told to stop lived on, and waiting for it without closing the pipe cost every
command the whole `JVM_EXIT_WAIT` before the JVM was killed)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
from pyspark import SparkContext
from testbed.analysis.session import get_spark, stop_spark
get_spark()
proc = SparkContext._gateway.proc
stop_spark()
print(proc.returncode)
"""


def test_the_jvm_has_exited_by_itself_when_stop_spark_returns() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "0", done.stdout  # exited (0), not killed (-9) nor running
