"""Issue 10: Spark's JVM does not print on the user's terminal. An embedded JVM started with
a log (`run.py` gives it the run's `analysis/spark.log`) writes its launcher warnings and
Spark's messages there, while a Spark error still reaches the caller as an exception."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.integration

_SCRIPT = """
import sys
from pathlib import Path
from pyspark.errors import AnalysisException
from testbed.analysis.session import get_spark, stop_spark
spark = get_spark("local[1]", log=Path(sys.argv[1]))
print("rows", spark.range(3).count())
try:
    spark.read.parquet(sys.argv[2]).count()
except AnalysisException as exc:
    print("error reached the caller:", "PATH_NOT_FOUND" in str(exc))
stop_spark()
"""


def test_the_embedded_jvm_writes_its_output_to_the_log_not_the_terminal(tmp_path: Path) -> None:
    log = tmp_path / "run" / "analysis" / "spark.log"
    r = subprocess.run([sys.executable, "-c", _SCRIPT, str(log), str(tmp_path / "missing.parquet")],
                       cwd=ROOT, capture_output=True, text=True, timeout=240, check=False)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["rows 3", "error reached the caller: True"]
    assert r.stderr == "", f"the JVM printed on the terminal: {r.stderr[:500]}"
    # Java 17 prints this for every Spark 4 JVM (Spark adds the vector module to its options).
    assert "jdk.incubator.vector" in log.read_text()
