"""One process that starts two embedded sessions of the analysis JVM, one after the other,
and prints what each left: the tests of `stop_spark` and of the small-input JVM's settings
read it. Each JVM's start is 15-40 s of CPU; one process for five tests spares four starts.

The first session is a small input's (`get_spark`'s default), the second a large one's. Each
runs six small jobs under changed settings, reads its settings back from the running JVM (the
page size its SparkContext's configuration holds, its collectors, its JIT's flags: not
isrlab's constants), and stops."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = """
import getpass, json, os, sys, tempfile
from pathlib import Path
from pyspark import SparkContext
from testbed.analysis import session
log = Path(sys.argv[1])
rounds = []
for small_input in (True, False):
    spark = session.get_spark(log=log, small_input=small_input)
    sizes = []
    for n in range(6):
        spark.conf.set("spark.sql.shuffle.partitions", str(n + 1))
        sizes.append(len(spark.range(n + 3).collect()))
    jvm = session._driver._jvm
    page = session._driver.sparkContext.getConf().get("spark.buffer.pageSize", "unset")
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    hotspot = jvm.java.lang.management.ManagementFactory.getPlatformMXBean(
        jvm.java.lang.Class.forName("com.sun.management.HotSpotDiagnosticMXBean"))
    proc = SparkContext._gateway.proc
    perf_data = os.path.join(tempfile.gettempdir(), f"hsperfdata_{getpass.getuser()}", str(proc.pid))
    scratch = session._scratch
    files = sorted(os.listdir(scratch))
    each = {"page": page, "collectors": sorted(b.getName() for b in beans),
            "jit": [hotspot.getVMOption(name).getValue() for name in ("TieredStopAtLevel", "Tier4InvocationThreshold")]}
    session.stop_spark()
    rounds.append({**each, "sizes": sizes, "returncode": proc.returncode, "perf_data": os.path.exists(perf_data),
                   "block_manager": any(f.startswith("blockmgr-") for f in files), "scratch_left": scratch.exists()})
print(json.dumps({"small": rounds[0], "large": rounds[1], "releases": log.read_text().count("releaseExecute")}))
"""
#: the mark of every test that reads `two_sessions`: they run on one worker (`conftest.longest_first`),
#: which runs the process once
GROUP = pytest.mark.slow(seconds=60, group="jvm-two-sessions")


@pytest.fixture(scope="session")
def two_sessions(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What the two sessions left, by `small` and `large`, and `releases`: how often the JVM's
    log (`log`) names a release of an execution."""
    log = tmp_path_factory.mktemp("two-sessions") / "spark.log"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(log)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "log": log}
