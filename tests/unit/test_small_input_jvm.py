"""The JVM started for a small input judges with what a small judgment wants, and one started
for a large input keeps Spark's and the JVM's defaults but for the thresholds of its
optimising compiler: the settings are read back from the running JVM (the page size its
SparkContext's configuration holds, from which Spark's memory manager sizes its pages; its
collectors; its JIT's flags), not from isrlab's constants.
Why these settings: `testbed/analysis/spark_settings.py` and BENCHMARKS.md, 2026-11-28."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import sys
from testbed.analysis import session
session.get_spark(small_input=sys.argv[1] == "small").range(3).count()
jvm = session._driver._jvm
page = session._driver.sparkContext.getConf().get("spark.buffer.pageSize", "unset")
collectors = sorted(b.getName() for b in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans())
hotspot = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
    jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
jit = ",".join(hotspot.getVMOption(name).getValue() for name in ("TieredStopAtLevel", "Tier4InvocationThreshold"))
session.stop_spark()
print(page + "|" + ",".join(collectors) + "|" + jit)
"""


@pytest.mark.parametrize("size", ["small", "large"])
def test_a_small_inputs_jvm_has_small_memory_pages_and_the_parallel_collector(size: str) -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT, size], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    page, collectors, jit = done.stdout.strip().splitlines()[-1].split("|")
    if size == "small":
        assert page == "2m", done.stdout
        assert collectors == "PS MarkSweep,PS Scavenge", done.stdout
        assert jit.split(",")[0] == "1", done.stdout  # C1 only
    else:
        assert page == "unset", done.stdout  # Spark's own choice from the memory and cores
        assert "PS Scavenge" not in collectors, done.stdout
        assert jit == "4,50000", done.stdout  # tiered, C2 for the hottest code only (the JVM's 5000)
