"""The JVM's command line as spark-submit built it, kept to start the next JVM without it.

PySpark starts its JVM by running `bin/spark-submit`: two bash scripts (with their
`dirname`s and a `ps`) and a launcher JVM (`org.apache.spark.launcher.Main`) that turns the
arguments into the real command, which the script then execs in its own place: 0.25-0.45 s
of every cold command on the reference machine before the JVM that judges starts. That
command follows from the arguments, the environment and the installed files alone, so the
first start records what its JVM was given (`/proc/<pid>/cmdline`, and the variables the
scripts added to its environment) under a key of those inputs (`_key`), and a start with the
same key runs that command directly. What differs from one start to the next, the JVM's
scratch directory (`jvm_scratch`), is kept as a placeholder. A JVM started from a record
that exits on its own before it answers (a record gone stale in a way the key missed) has
its record forgotten, and the start goes through spark-submit again (`session._embedded`).
"""
from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
from pathlib import Path

from testbed.common.jvm_scratch import ROOT as SCRATCH_ROOT
from testbed.analysis.whole_files import write_whole
from testbed.common.cache import isrlab_cache, keep_newest

#: Stands for the start's scratch directory in a record
_SCRATCH = "@ISRLAB_JVM_SCRATCH@"
_SCRATCH_PATH = re.compile(re.escape(str(SCRATCH_ROOT)) + r"/jvm-[A-Za-z0-9_]+")
#: The variables spark-submit's scripts and launcher read, by prefix
_READ = ("SPARK_", "PYSPARK_", "HADOOP_", "YARN_", "JAVA_", "_JAVA_", "SCALA_")
#: Variables of those prefixes that are not: PySpark's connection file for this start, and
#: what its first context puts in the process's environment for its Python workers (a second
#: start in one process would not find the first's record otherwise); bash's last command
_PER_START = {"_PYSPARK_DRIVER_CONN_INFO_PATH", "SPARK_AUTH_SOCKET_TIMEOUT", "SPARK_BUFFER_SIZE", "_"}
#: How many records a cache keeps: those most recently written
KEEP = 16


class _Start:
    """The start under way: its key, whether it ran a record, and its process."""

    def __init__(self, key: str, passed: dict[str, str], scratch: str | None, from_record: bool) -> None:
        self.key, self.passed, self.scratch, self.from_record = key, passed, scratch, from_record
        self.proc: subprocess.Popen | None = None


_last: _Start | None = None


def cache_dir() -> Path:
    return isrlab_cache() / "jvm-command"


def swap(command: list[str], env: dict[str, str] | None) -> tuple[list[str], dict[str, str] | None]:
    """The command and environment to start PySpark's JVM with: those of the record for
    `command` (spark-submit's) and `env`, if there is one, else the same."""
    global _last
    _last = None
    if env is None or not command or not command[0].endswith("spark-submit"):
        return command, env
    scratch = _scratch_in(command)
    try:
        key = _key(_placed(command, scratch), env)
        found = _read(key)
    except Exception:  # noqa: BLE001 - no cache, no home: the start is spark-submit's, as without records
        return command, env
    _last = _Start(key, env, scratch, from_record=found is not None)
    if found is None:
        return command, env
    java, added = found
    return _unplaced(java, scratch), env | dict(zip(added, _unplaced(list(added.values()), scratch)))


def _read(key: str) -> tuple[list[str], dict[str, str]] | None:
    """The record of `key`, if there is a usable one."""
    try:
        record = json.loads((cache_dir() / f"{key}.json").read_text())
        java, added = record["command"], record["env"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not (isinstance(java, list) and java and all(isinstance(a, str) for a in java) and isinstance(added, dict)
            and all(isinstance(v, str) for v in added.values()) and Path(java[0]).exists()):
        return None
    return java, added


def started(proc: subprocess.Popen) -> None:
    """The process `swap`'s command runs in."""
    if _last is not None:
        _last.proc = proc


def record(pid: int) -> None:
    """Keep the command JVM `pid` runs, if it is the one just started through spark-submit
    (it execs the real command in its own process)."""
    start = _last
    if start is None or start.from_record or start.proc is None or start.proc.pid != pid:
        return
    try:
        command = [arg.decode() for arg in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]]
        environ = dict(line.decode().split("=", 1) for line in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
                       if b"=" in line)
        if not command or command[0].endswith("spark-submit") or "org.apache.spark.deploy.SparkSubmit" not in command:
            return  # not (yet) the JVM: the scripts had not exec'd it
        added = {k: v for k, v in environ.items() if k not in _PER_START and start.passed.get(k) != v}
        cache_dir().mkdir(parents=True, exist_ok=True)
        write_whole(cache_dir() / f"{start.key}.json",
                    json.dumps({"command": _placed(command, start.scratch),
                                "env": dict(zip(added, _placed(list(added.values()), start.scratch)))}).encode())
        keep_newest(cache_dir(), "*.json", KEEP)  # the records written last
    except Exception:  # noqa: BLE001 - nothing kept: the next start goes through spark-submit again
        pass


def failed_from_record() -> bool:
    """Whether the start just made ran a record and its JVM exited on its own (an exit status,
    not a signal: a JVM killed as it started, by a Ctrl-C, is not a stale record). The record
    is forgotten then."""
    start = _last
    if start is None or not start.from_record or start.proc is None:
        return False
    code = start.proc.poll()
    if code is None or code <= 0:
        return False
    try:
        (cache_dir() / f"{start.key}.json").unlink(missing_ok=True)
    except OSError:
        pass  # a cache that cannot be written: the retry goes through spark-submit all the same
    return True


def _scratch_in(command: list[str]) -> str | None:
    found = {m.group(0) for arg in command for m in _SCRATCH_PATH.finditer(arg)}
    return found.pop() if len(found) == 1 else None


def _placed(args: list[str], scratch: str | None) -> list[str]:
    return args if scratch is None else [arg.replace(scratch, _SCRATCH) for arg in args]


def _unplaced(args: list[str], scratch: str | None) -> list[str]:
    return [arg.replace(_SCRATCH, scratch) for arg in args] if scratch is not None else args


def _key(command: list[str], env: dict[str, str]) -> str:
    """What the command spark-submit builds follows from: its arguments, the variables its
    scripts and launcher read, the `java` they run, Spark's scripts and jars (names and
    sizes: the class path names a jar) and the configuration files they read."""
    h = hashlib.sha256()
    for arg in command:
        h.update(arg.encode() + b"\0")
    for name in sorted(env):
        if name.startswith(_READ) and name not in _PER_START:
            h.update(f"{name}={env[name]}\0".encode())
    h.update(f"java={shutil.which('java', path=env.get('PATH'))}\0".encode())
    home = Path(command[0]).parent.parent
    conf = Path(env.get("SPARK_CONF_DIR") or home / "conf")
    for path in (home / "bin" / "spark-submit", home / "bin" / "spark-class", home / "bin" / "load-spark-env.sh",
                 conf / "spark-defaults.conf", conf / "spark-env.sh"):
        h.update(str(path).encode() + b"\0")
        if path.is_file():
            h.update(path.read_bytes())
    jars = home / "jars"
    for jar in sorted(jars.iterdir()) if jars.is_dir() else ():
        h.update(f"{jar.name}:{jar.stat().st_size}\0".encode())
    return h.hexdigest()[:16]
