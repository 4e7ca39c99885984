"""`python run.py spark up | down | status`: one long-lived local Spark Connect server that
runs, labs, the matrix and `analyze` share.

A judgment in a new JVM pays the JVM's start (about 15 s here) and then runs its first jobs
cold (about twice as slow as warm); a server that stays up pays both once. While a server is
up, every judgment without `--spark-master` goes to it; when it is gone, judging falls back
to an embedded session with a one-line notice. The server listens on 127.0.0.1 only, runs in
its own session (it outlives the command that started it, by design) and `down` stops it.
Its state lives in `ISRLAB_SPARK_SERVER_FILE` (default `/tmp/isrlab-<uid>/spark-server.json`).
"""
from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

from testbed.analysis.spark_settings import (
    JVM_OPTIONS,
    SERVER_DRIVER_MEMORY,
    SETTINGS,
    SPARK_CONF_DIR,
    USER_CONF_DIR,
)
from testbed.analysis.whole_files import write_whole
from testbed.common import jvm_scratch
from testbed.common.pids import exited
from testbed.config.cli_values import http2_answers

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT = 120.0


@dataclass(frozen=True)
class ServerInfo:
    pid: int
    port: int
    master: str
    log: str
    started: float  # time.time()

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


def state_file() -> Path:
    default = Path(f"/tmp/isrlab-{os.getuid()}") / "spark-server.json"
    return Path(os.environ.get("ISRLAB_SPARK_SERVER_FILE", default))


def recorded() -> ServerInfo | None:
    """The server `up` recorded, whether or not it still runs; None for no record, or for one
    that is not a record `up` writes (not JSON, a field missing or of another type)."""
    try:
        info = ServerInfo(**json.loads(state_file().read_text()))
    except (OSError, ValueError, TypeError):
        return None
    typed = (type(info.pid) is int and type(info.port) is int and 0 < info.port < 65536  # `is`: not a bool
             and type(info.started) in (int, float) and isinstance(info.master, str) and isinstance(info.log, str))
    return info if typed else None


@contextmanager
def _exclusive() -> Iterator[Path]:
    """The record's directory made, and `up` and `down` one at a time: two `up` at once
    started two servers, of which the record named one."""
    path = state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield path


def answering(info: ServerInfo, timeout: float = 2.0) -> bool:
    """Its process lives and its gRPC port answers an HTTP/2 greeting within `timeout`. The
    kernel accepts a connection for a server that is stopped (SIGSTOP) or hung, which then
    answers nothing: a connection alone let `analyze` wait on such a server for ever."""
    return running(info) and http2_answers("127.0.0.1", info.port, timeout)


def running(info: ServerInfo) -> bool:
    """The recorded process runs and is a Spark Connect server: a record whose pid the
    system gave to another process since (or a pid of 0, which `killpg` reads as our own
    group) names nothing to stop; `down` sent SIGTERM to whatever held the number."""
    if info.pid <= 1 or exited(info.pid):
        return False
    try:
        return SERVER_CLASS in " ".join(psutil.Process(info.pid).cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def up(master: str = "local[*]") -> tuple[ServerInfo, bool]:
    """Start a server unless one is up; returns it and whether this call started it. The
    server is on record from its start, so that `down` finds one whose `up` was killed while
    it started; an `up` interrupted otherwise stops it on the way out."""
    with _exclusive() as path:
        info = recorded()
        if info is not None and answering(info):
            return info, False
        if info is not None:
            _stop(info)  # recorded but not answering: whatever is left of it goes
        log = path.with_suffix(".log")
        port = _free_port()
        import pyspark
        submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        scratch = jvm_scratch.make()
        confs = [*((k, v) for k, v in SETTINGS if k != "spark.driver.memory"),
                 ("spark.driver.memory", SERVER_DRIVER_MEMORY), *jvm_scratch.settings(scratch),
                 ("spark.connect.grpc.binding.address", "127.0.0.1"), ("spark.connect.grpc.binding.port", str(port))]
        cmd = ["bash", str(submit), "--class", SERVER_CLASS, "--name", "isrlab Spark Connect server",
               "--master", master, "--driver-java-options",
               f"{JVM_OPTIONS} {jvm_scratch.java_options(scratch)}",
               *[arg for k, v in confs for arg in ("--conf", f"{k}={v}")]]
        env = {**os.environ, "SPARK_CONF_DIR": USER_CONF_DIR or str(SPARK_CONF_DIR),
               "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_CONNECT_MODE": "0"}
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                    start_new_session=True)
        jvm_scratch.own(scratch, proc.pid)  # spark-submit execs the JVM: one process, one start time
        info = ServerInfo(proc.pid, port, master, str(log), time.time())
        write_whole(path, json.dumps(asdict(info)).encode())  # whole: a reader never sees half a record
        try:
            deadline = time.monotonic() + START_TIMEOUT
            while not answering(info):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the Spark Connect server did not start (see {log})")
                time.sleep(0.2)  # polling a port that opens once the JVM is up
        except BaseException:  # a failed start, Ctrl-C or SIGTERM: no server outlives an `up` that did not end
            _stop(info)
            path.unlink(missing_ok=True)
            raise
        return info, True


def down() -> tuple[ServerInfo, bool] | None:
    """Stop the recorded server (its whole process group); returns it and whether it was still
    running (a killed server leaves only its record), None when there was none (a record
    that is not one `up` writes is removed)."""
    with _exclusive() as path:
        info = recorded()
        if info is None:
            path.unlink(missing_ok=True)
            return None
        alive = running(info)
        if alive:
            _stop(info)
        else:
            jvm_scratch.sweep()  # what a killed server left
        path.unlink(missing_ok=True)
        return info, alive


def _stop(info: ServerInfo) -> None:
    """SIGTERM to the server's process group, SIGKILL if it has not exited 15 s later; then
    its scratch directory goes (a killed JVM leaves its temporary files)."""
    for sig, wait in ((signal.SIGTERM, 15.0), (signal.SIGKILL, 5.0)):
        if not running(info):
            break
        try:
            os.killpg(info.pid, sig)
        except (ProcessLookupError, PermissionError):
            break
        deadline = time.monotonic() + wait
        while not exited(info.pid) and time.monotonic() < deadline:
            time.sleep(0.1)  # polling: the server is not our child, so it cannot be waited for
    jvm_scratch.sweep()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
