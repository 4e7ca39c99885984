"""A run's watchman removes its supervisor's scratch directories once the supervisor is
SIGKILLed (its JVM's too), also one its JVM writes again as it stops (README, "a killed supervisor"):
before, they stayed until the next run."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from testbed.common import jvm_scratch, owned_dirs
from testbed.common.pids import start_time

#: what a JVM told to stop by the kernel may do: write its log again once the watchman's
#: first pass removed its directory (argv: the directory, a file to say it did)
_STOPPING_JVM = """
import os, sys, time
log, said = sys.argv[1], sys.argv[2]
deadline = time.monotonic() + 30
while time.monotonic() < deadline and os.path.isdir(log):
    time.sleep(0.01)
os.makedirs(log, exist_ok=True)
open(os.path.join(log, "spark.log"), "w").write("stopping")
open(said, "w").write("rewrote")
"""


def _wait_gone(paths: list[Path], seconds: float) -> list[Path]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(p.exists() for p in paths):
        time.sleep(0.05)  # polling the directories against a deadline
    return [p for p in paths if p.exists()]


def test_the_watchman_removes_the_scratch_of_a_killed_supervisor_after_its_jvm_stops(tmp_path: Path) -> None:
    supervisor = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    live = tmp_path / "runs" / ".live"
    live.mkdir(parents=True)
    registry = live / "run.json"
    registry.write_text(json.dumps({"supervisor_pid": supervisor.pid,
                                    "supervisor_create_time": start_time(supervisor.pid),
                                    "sock_dir": str(tmp_path / "sock"), "processes": [], "mounts": [], "netns": []}))
    early = live / f"{owned_dirs.EARLY_LOG_PREFIX}{supervisor.pid}-abc"
    rehearsal = Path(tempfile.gettempdir()) / f"{owned_dirs.REHEARSAL_PREFIX}{supervisor.pid}-abc"
    gateway = Path(tempfile.gettempdir()) / f"{owned_dirs.GATEWAY_PREFIX}{supervisor.pid}-abc"  # (trial29)
    other = live / f"{owned_dirs.EARLY_LOG_PREFIX}{os.getpid()}-abc"  # a live owner's: kept
    for d in (early, rehearsal, gateway, other):
        d.mkdir()
    jvm_scratch.ROOT.mkdir(parents=True, exist_ok=True)  # the JVM's own, Spark's hooks leave it (trial27)
    scratch = Path(tempfile.mkdtemp(prefix="jvm-", dir=jvm_scratch.ROOT))
    jvm_scratch.own(scratch, supervisor.pid)
    watchman = subprocess.Popen([sys.executable, "-m", "testbed.supervisor.watchman", str(registry),
                                 str(supervisor.pid)])
    said = tmp_path / "rewrote"
    jvm = subprocess.Popen([sys.executable, "-c", _STOPPING_JVM, str(early), str(said)])
    try:
        supervisor.send_signal(signal.SIGKILL)
        supervisor.wait()
        assert jvm.wait(timeout=30) == 0 and said.exists()  # the first pass came, and the log again
        assert _wait_gone([registry, early, rehearsal, gateway, scratch], 20.0) == []
        assert watchman.wait(timeout=20) == 0
        assert other.is_dir()
    finally:
        for p in (supervisor, watchman, jvm):
            if p.poll() is None:
                p.kill()
        for d in (early, rehearsal, gateway, other, scratch):
            subprocess.run(["rm", "-rf", str(d)], check=False)
