"""The JVM's command recorded from spark-submit's first start and run directly after
(`jvm_command`): the same JVM without the launcher, and a record that no longer starts one
forgotten for a start through spark-submit."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import testbed.analysis.jvm_command as jvm_command
from testbed.analysis.jvm_scratch import ROOT as SCRATCH_ROOT

ROOT = Path(__file__).resolve().parents[2]


def _spark_home(tmp_path: Path) -> Path:
    """A stand-in for PySpark's directory: the scripts and jars the key reads."""
    home = tmp_path / "pyspark"
    (home / "bin").mkdir(parents=True)
    (home / "jars").mkdir()
    (home / "conf").mkdir()
    for script in ("spark-submit", "spark-class", "load-spark-env.sh"):
        (home / "bin" / script).write_text(f"# {script}\n")
    (home / "jars" / "spark-core.jar").write_bytes(b"x" * 10)
    return home


def test_the_key_follows_what_spark_submit_reads_and_not_the_scratch_directory(tmp_path: Path) -> None:
    home = _spark_home(tmp_path)
    scratch = f"{SCRATCH_ROOT}/jvm-abc123"
    command = [str(home / "bin" / "spark-submit"), "--conf", f"spark.local.dir={scratch}", "pyspark-shell"]
    env = {"PATH": "/usr/bin", "SPARK_HOME": str(home), "TERM": "xterm", "_PYSPARK_DRIVER_CONN_INFO_PATH": "/tmp/a"}

    def key(command: list[str] = command, env: dict[str, str] = env) -> str:
        return jvm_command._key(jvm_command._placed(command, jvm_command._scratch_in(command)), env)
    same = key()
    # read by neither (the last: what PySpark's first context puts in the environment)
    assert key(env=env | {"TERM": "dumb", "_PYSPARK_DRIVER_CONN_INFO_PATH": "/tmp/b", "SPARK_BUFFER_SIZE": "65536"}) == same
    other_scratch = [arg.replace("abc123", "zzz999") for arg in command]
    assert key(command=other_scratch) == same
    assert key(command=[*command[:-1], "--conf", "spark.driver.memory=8g", "pyspark-shell"]) != same
    assert key(env=env | {"SPARK_LOCAL_IP": "127.0.0.1"}) != same
    assert key(env=env | {"JAVA_HOME": "/opt/jdk"}) != same
    (home / "conf" / "spark-defaults.conf").write_text("spark.driver.memory 2g\n")
    assert key() != same
    (home / "conf" / "spark-defaults.conf").unlink()
    (home / "jars" / "spark-sql.jar").write_bytes(b"y")
    assert key() != same


def test_only_a_jvm_that_exited_on_its_own_from_a_record_forgets_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """An exit status says the record did not start a JVM; a signal (a Ctrl-C as the JVM
    started, `session._kill_starting_jvm`) says nothing of the record, so nothing is retried."""
    monkeypatch.setattr(jvm_command, "cache_dir", lambda: tmp_path)
    record = tmp_path / "k.json"
    for argv, from_record, forgotten in ((["false"], True, True), (["sleep", "30"], True, False),
                                         (["false"], False, False)):
        record.write_text("{}")
        monkeypatch.setattr(jvm_command, "_last", jvm_command._Start("k", {}, None, from_record=from_record))
        proc = subprocess.Popen(argv)
        jvm_command.started(proc)
        if argv[0] == "sleep":
            proc.kill()
        proc.wait()
        assert jvm_command.failed_from_record() is forgotten, argv
        assert record.exists() is not forgotten


SCRIPT = """
import json, sys
from pathlib import Path
from pyspark import SparkContext
import testbed.analysis.jvm_command as jvm_command
from testbed.analysis import session

cache = Path(sys.argv[1])
jvm_command.cache_dir = lambda: cache
if sys.argv[2] == "stale":  # a record, under the key of this start, whose command exits at once
    jvm_command._key = lambda command, env: "stale"
    cache.mkdir(parents=True, exist_ok=True)
    (cache / "stale.json").write_text(json.dumps({"command": ["/bin/false"], "env": {}}))
starts = []
for n in (3, 4):
    count = session.get_spark().range(n).count()
    proc = SparkContext._gateway.proc
    command = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\\0")
    starts.append({"count": count, "from_record": jvm_command._last.from_record,
                   "command": [arg.decode().replace(str(session._scratch), "SCRATCH") for arg in command]})
    session.stop_spark()
print(json.dumps(starts))
"""


def _starts(tmp_path: Path, how: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "cache"), how], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_second_start_runs_the_jvm_spark_submit_built_for_the_first(tmp_path: Path) -> None:
    first, second = _starts(tmp_path, "fresh")
    assert (first["count"], second["count"]) == (3, 4)
    assert (first["from_record"], second["from_record"]) == (False, True)
    assert first["command"] == second["command"]  # the same JVM, with its own scratch directory
    assert "org.apache.spark.deploy.SparkSubmit" in first["command"] and first["command"][0].endswith("java")
    records = list((tmp_path / "cache").glob("*.json"))
    assert len(records) == 1
    text = records[0].read_text()
    assert str(SCRATCH_ROOT) not in text and jvm_command._SCRATCH in text


def test_a_stale_record_is_forgotten_and_the_jvm_started_through_spark_submit(tmp_path: Path) -> None:
    first, second = _starts(tmp_path, "stale")
    assert (first["count"], second["count"]) == (3, 4)
    assert (first["from_record"], second["from_record"]) == (False, True)  # recorded again, then run
    record = json.loads((tmp_path / "cache" / "stale.json").read_text())
    assert record["command"][0].endswith("java")
