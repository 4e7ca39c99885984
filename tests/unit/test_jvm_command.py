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
from testbed.common.jvm_scratch import ROOT as SCRATCH_ROOT

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


#: Three starts in one process (each JVM's start is 15-40 s of CPU): the first through
#: spark-submit, which is recorded; the second from the record; then the record is made stale
#: (a command that exits at once) and the third start finds it so, forgets it, and goes
#: through spark-submit again, which records it again. Prints each start and each record.
SCRIPT = """
import json, sys
from pathlib import Path
from pyspark import SparkContext
import testbed.analysis.jvm_command as jvm_command
from testbed.analysis import session

cache = Path(sys.argv[1])
jvm_command.cache_dir = lambda: cache
starts, records = [], []
for n in (3, 4, 5):
    if n == 5:  # the record, under the key of this start, now names a command that exits at once
        [path] = cache.glob("*.json")
        path.write_text(json.dumps({"command": ["/bin/false"], "env": {}}))
    count = session.get_spark().range(n).count()
    proc = SparkContext._gateway.proc
    command = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\\0")
    starts.append({"count": count, "from_record": jvm_command._last.from_record,
                   "command": [arg.decode().replace(str(session._scratch), "SCRATCH") for arg in command]})
    session.stop_spark()
    records.append({p.name: p.read_text() for p in cache.glob("*.json")})
print(json.dumps({"starts": starts, "records": records}))
"""


@pytest.fixture(scope="module")
def three_starts(tmp_path_factory: pytest.TempPathFactory) -> dict:
    cache = tmp_path_factory.mktemp("jvm-command") / "cache"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(cache)], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


#: the tests of the one process run on one worker (`conftest.longest_first`), which runs it once
THREE_STARTS = pytest.mark.slow(seconds=45, group="jvm-command-three-starts")


@THREE_STARTS
def test_the_second_start_runs_the_jvm_spark_submit_built_for_the_first(three_starts: dict) -> None:
    first, second, _ = three_starts["starts"]
    assert (first["count"], second["count"]) == (3, 4)
    assert (first["from_record"], second["from_record"]) == (False, True)
    assert first["command"] == second["command"]  # the same JVM, with its own scratch directory
    assert "org.apache.spark.deploy.SparkSubmit" in first["command"] and first["command"][0].endswith("java")
    [record] = three_starts["records"][0].values()
    assert str(SCRATCH_ROOT) not in record and jvm_command._SCRATCH in record


@THREE_STARTS
def test_a_stale_record_is_forgotten_and_the_jvm_started_through_spark_submit(three_starts: dict) -> None:
    *_, third = three_starts["starts"]
    assert third["count"] == 5
    assert third["from_record"] is False  # the stale record failed, and spark-submit started it
    assert third["command"] == three_starts["starts"][0]["command"]
    assert three_starts["records"][2] == three_starts["records"][0]  # recorded again, as the first start did
