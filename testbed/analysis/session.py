"""The one Spark session of this process, built with settings that suit a 2-core machine.

The pipeline is always a Spark Connect client: of a shared server (`run.py spark up`,
`sc://...`), or of a Connect server started inside this process's own JVM, the driver of
`local[*]` or `--spark-master` (see `_embedded`). A JVM's start (10-15 s here) dominates a
small run's judgment, so every caller shares the session made by the first call.
"""
from __future__ import annotations

import os
import sys
import threading
import warnings
from collections.abc import Callable
from concurrent import futures
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
from py4j.protocol import Py4JError
from pyspark import SparkConf, SparkContext
from pyspark.errors import PySparkException
from pyspark.java_gateway import launch_gateway
from pyspark.sql import SparkSession, SQLContext

from testbed.analysis import jvm_command, jvm_parent, spark_server
from testbed.analysis.class_archive import ClassArchive, empty_conf_dir
from testbed.analysis.py4j_logging import quiet_py4j
from testbed.analysis.spark_settings import (CONNECT_SETTINGS, JVM_OPTIONS, LARGE_INPUT_JIT, SETTINGS, SMALL_INPUT_GC,
                                             SMALL_INPUT_JIT, SMALL_INPUT_SETTINGS, SPARK_CONF_DIR, USER_CONF_DIR)
from testbed.common import jvm_scratch
from testbed.config.cli_values import connect_server_accepts

if TYPE_CHECKING:  # imported where a session is made: the JVM's start does not wait for it
    from pyspark.sql.connect.session import SparkSession as RemoteSession

# A server that died mid-judgment: the client's retries say so on stderr as well as in the
# exception the verdict reports; the user's terminal gets the verdict's line only.
warnings.filterwarnings("ignore", category=UserWarning, module=r"pyspark\.sql\.connect\.client\.retries")

DEFAULT_MASTER = "local[*]"
#: The environment variable by which PySpark's functions choose between Connect and classic columns
CONNECT_MODE = "SPARK_CONNECT_MODE_ENABLED"
APP_NAME = "isrlab-analysis"
#: how long the sessions may take to stop before their JVM is killed under them (s)
SESSION_STOP_WAIT = 10.0

_session: RemoteSession | None = None  # the pipeline's session: a Spark Connect client
_driver: SparkSession | None = None  # the classic session of this process's own JVM, if it has one
_master: str | None = None
_url: str | None = None  # the Spark Connect server of `_session`
_others: list[RemoteSession] = []  # the sessions `new_session` made, stopped with `_session`
_archive: ClassArchive | None = None  # the class archive of this process's JVM (see `class_archive`)
_scratch: Path | None = None  # the temporary directory of this process's JVM (see `jvm_scratch`)
_lock = threading.Lock()  # the session may be started by `warm_up`'s thread and a caller at once
jvm_parent.install()  # this process's JVM dies with it (see `jvm_parent`), wherever its start is asked


def get_spark(master: str | None = None, log: Path | None = None, small_input: bool = True) -> RemoteSession:
    """The process's session; the first call chooses the master (`--spark-master`).

    Without a master, the Spark Connect server of `run.py spark up` when one is up (a warm
    JVM shared by every command), else an embedded `local[*]` session; a recorded server
    that is gone gives a one-line notice and the embedded session. `sc://host:port` as the
    master connects to that server. The settings are `spark_settings.SETTINGS`.

    `log`, when this call starts the embedded JVM, receives everything that JVM prints (the
    Java launcher's warnings, Spark's errors): the user's terminal shows isrlab's output
    only, and the JVM's stays with the run it served. Errors still reach the caller as
    exceptions.

    `small_input` says what the JVM this call may start will judge first: an input below
    `C1_INPUT_BYTES` (a run, a tree of runs, a sweep of a few hundred seeds) gets a JVM that
    compiles with C1 only (`spark_settings.SMALL_INPUT_JIT`), a larger one the tiered JIT
    with C2 for its hottest code only (`spark_settings.LARGE_INPUT_JIT`).
    """
    with _lock:
        return _get_spark(master, log, small_input)


def new_session() -> RemoteSession:
    """Another Spark Connect session on the process's server (the same JVM, as warm), with a
    lifetime of its own: stopping it ends its operations on the server at once, where an
    interrupted query still finishes its planning (up to 2 s of a rehearsal's, measured)."""
    with _lock:
        if _session is None or _url is None:
            raise RuntimeError("no Spark session to share a server with: call get_spark first")
        from pyspark.sql.connect.session import SparkSession as RemoteSession
        other = _with_retries(RemoteSession.builder.remote(_url).create(), _url)
        _others.append(other)
        return other


def started() -> bool:
    """This process has a session now (its own JVM, or a server's)."""
    with _lock:
        return _session is not None


def connect_url() -> str | None:
    """The Spark Connect URL of the process's session (its own JVM's server, or the server it
    talks to), None before the first `get_spark`. Another process given it as
    `--spark-master` judges on the same JVM, as warm as this one left it."""
    with _lock:
        return _url


def is_remote() -> bool:
    """The session is on a server this process did not start (`run.py spark up`, `sc://`):
    a warm JVM that other commands share."""
    return _master is not None and _master.startswith("sc://")


def jvm_alive() -> bool:
    """The JVM behind the session still runs (a failure may have killed it; the next
    `get_spark` after `stop_spark` then starts another)."""
    with _lock:
        if _driver is None:
            return True  # a server's failures are the server's: it may fail one command and serve the next
        proc = getattr(SparkContext._gateway, "proc", None)
    return proc is None or proc.poll() is None


def _get_spark(master: str | None, log: Path | None, small_input: bool) -> RemoteSession:
    global _session, _master, _url
    if _session is not None:
        if master is not None and master != _master:
            raise RuntimeError(f"a Spark session on {_master} is already running in this process; "
                               f"cannot switch to {master}")
        return _session
    wanted = master or _server_url() or DEFAULT_MASTER
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # nodes listen on loopback only (DESIGN 11)
    if wanted.startswith("sc://") and not connect_server_accepts(wanted):
        raise SparkUnreachable(f"--spark-master {wanted}: no Spark Connect server accepts a connection there")
    url = wanted if wanted.startswith("sc://") else _embedded(wanted, log, small_input)
    os.environ[CONNECT_MODE] = "1"  # pyspark.sql.functions builds Spark Connect columns from now on
    from pyspark.sql.connect.session import SparkSession as RemoteSession
    _session = _with_retries(RemoteSession.builder.remote(url).getOrCreate(), url)
    _master, _url = wanted, url
    return _session


def _with_retries(session: RemoteSession, url: str) -> RemoteSession:
    from testbed.analysis.connect_retries import WhileListening
    session.client.set_retry_policies([WhileListening(url)])
    return session


class SparkUnreachable(ConnectionError):
    """The Spark Connect server named by `--spark-master` does not accept a connection."""


def _embedded(master: str, log: Path | None, small_input: bool) -> str:
    """Start this process's own JVM (driver of `master`) with a Spark Connect server inside
    it on a loopback port the system picks, and return that server's URL.

    The pipeline then talks to its JVM as a Spark Connect client, as it does to a `run.py
    spark up` server: a DataFrame is built in Python and sent as one plan per action, where
    the classic API makes several py4j round trips for every column expression (about 25
    for `col("x") + lit(1)`, half a millisecond each on the reference machine); building the
    checks' plans took 5 s of a 20 s judgment that way."""
    global _driver, _archive, _scratch
    quiet_py4j()  # a JVM killed mid-command (a Ctrl-C as it starts) is the caller's to report
    java_options = f"{JVM_OPTIONS} {SMALL_INPUT_JIT} {SMALL_INPUT_GC}" if small_input else \
        f"{JVM_OPTIONS} {LARGE_INPUT_JIT}"
    if SparkContext._gateway is None:  # this start makes the JVM
        _archive = None
        jvm_scratch.remove(_scratch)
        _scratch = jvm_scratch.make()
        if USER_CONF_DIR is None:
            try:
                os.environ["SPARK_CONF_DIR"] = str(empty_conf_dir())
                _archive = ClassArchive()
            except OSError:  # no cache directory: Spark's settings from their own directory
                os.environ["SPARK_CONF_DIR"] = str(SPARK_CONF_DIR)
    if _archive is not None:
        java_options = f"{java_options} {_archive.java_options()}"
    if _scratch is not None:
        java_options = f"{java_options} {jvm_scratch.java_options(_scratch)}"
    settings = (*SETTINGS, *CONNECT_SETTINGS, *(SMALL_INPUT_SETTINGS if small_input else ()),
                *(jvm_scratch.settings(_scratch) if _scratch is not None else ()),
                *((("spark.driver.extraJavaOptions", java_options.strip()),) if java_options.strip() else ()))
    try:
        _driver = _start_driver(master, log, settings)
    except Exception:
        if not jvm_command.failed_from_record():
            raise
        _driver = _start_driver(master, log, settings)  # through spark-submit, which records again
    if (proc := getattr(SparkContext._gateway, "proc", None)) is not None:
        jvm_command.record(proc.pid)
    _driver.sparkContext.setLogLevel("ERROR")
    if _scratch is not None:  # the JVM removes it as it exits, as when this process is killed
        jvm = _driver._jvm
        jvm.org.apache.spark.util.ShutdownHookManager.registerShutdownDeleteDir(jvm.java.io.File(str(_scratch)))
    service = getattr(_driver._jvm.org.apache.spark.sql.connect.service, "SparkConnectService$")
    return f"sc://127.0.0.1:{getattr(service, 'MODULE$').localPort()}"


def _start_driver(master: str, log: Path | None, settings: tuple[tuple[str, str], ...]) -> SparkSession:
    """The classic session of this process's JVM, started now if there is none."""
    if log is not None and SparkContext._gateway is None:
        _launch_jvm(master, log, settings)
    os.environ.pop(CONNECT_MODE, None)  # else the builder would make a client, not a driver
    builder = SparkSession.builder.master(master).appName(APP_NAME)
    for key, value in settings:
        builder = builder.config(key, value)
    return builder.getOrCreate()


def _launch_jvm(master: str, log: Path, settings: tuple[tuple[str, str], ...]) -> None:
    """Start the JVM as PySpark would, with its stdout and stderr appended to `log`; the
    SparkContext made next adopts it. The JVM outlives a stopped session (PySpark keeps it
    for the next), so its output keeps going to `log` for the life of the process."""
    conf = (SparkConf(loadDefaults=False).setMaster(master).setAppName(APP_NAME)
            .setAll(settings))
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:  # the JVM has its own copy of the descriptor
        gateway = launch_gateway(conf, popen_kwargs={"stdout": out, "stderr": out})
    SparkContext._gateway = gateway
    SparkContext._jvm = gateway.jvm


def _server_url() -> str | None:
    """The URL of the server `run.py spark up` started, if it still answers."""
    info = spark_server.recorded()
    if info is None:
        return None
    if spark_server.answering(info):
        return info.url
    print(f"isrlab: the Spark server recorded in {spark_server.state_file()} ({info.url}) is gone or does not answer; "
          f"judging in an embedded session", file=sys.stderr)
    return None


#: Below this much JSONL a job's time is its fixed costs, not its rows (see `tune_for`).
SMALL_INPUT_BYTES = 64 << 20
#: Below this much JSONL the JVM compiles with C1 only (`spark_settings.SMALL_INPUT_JIT`).
#: The optimising compiler pays back only over millions of rows per query: the 300 seeds of
#: the held-out sim pairs (250 MB) cost the JVM 291 s of CPU with it, 124 s of them in its
#: compiler threads, and 161 s without it, executors included (99 s against 109); 1M
#: synthetic records (298 MB) were judged in 72.7 s with C1 against 77.5 s; 10M (3 GB) took
#: 468 s with C1 against 220 s (BENCHMARKS.md, the fourth and seventh sessions).
C1_INPUT_BYTES = 512 << 20

_SMALL = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN",
          "spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "1",
          "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "128"}  # Spark's default
_LARGE = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK",
          "spark.sql.adaptive.enabled": "true", "spark.sql.shuffle.partitions": "4",
          # the latency percentiles are one sketch per run, kind and second: past 128 of them
          # in a task Spark sorts every sample instead (a thousand seeds' figures: 19 -> 11 s CPU)
          "spark.sql.objectHashAggregate.sortBased.fallbackThreshold": "65536"}


def tune_for(spark: RemoteSession, input_bytes: int) -> bool:
    """Fit the session's SQL settings to the size of what it is about to judge.

    A run of a few megabytes is judged by dozens of small queries, each of which Spark would
    compile to Java (whole-stage and expression code generation, about 0.1-0.5 s a query on
    a cold JVM), re-plan adaptively between stages, and spread over 4 shuffle partitions of
    a few rows: interpreted, planned once, one partition, a small run is judged in about half
    the time (measured: 29 s -> 17 s warm for a 2.7 MB run). Millions of records need the
    opposite, so the settings follow the input; they are runtime settings of the one session.
    Returns whether the input is small.
    """
    small = input_bytes < SMALL_INPUT_BYTES
    for key, value in (_SMALL if small else _LARGE).items():
        spark.conf.set(key, value)
    return small


#: The CPU priority (nice value) of a JVM started while a cluster runs: the cluster under
#: test keeps the CPU its timeouts assume, and the JVM uses what is left.
WARM_UP_NICE = 10


def start_in_background(master: str | None = None, log: Path | None = None,
                        small_input: bool = True) -> threading.Thread:
    """Start the session (`get_spark`'s arguments) in a background thread, so that the JVM
    starts while the caller imports the pipeline and reads its input (a second or more of
    Python before its first `get_spark`, which then waits for this start and shares it)."""
    return _in_background("spark-start", lambda: get_spark(master, log, small_input))


def warm_up(rehearse: Callable[[], None], master: str | None = None, log: Path | None = None) -> threading.Thread:
    """Start the session in a background thread, then `rehearse` (judge a small run), so that
    when a run's workload ends the JVM is up and has compiled the pipeline's code: a cold JVM
    judges a small run in about twice the time a warm one does. The thread and the JVM it
    starts run at nice `WARM_UP_NICE` until `full_priority`. `get_spark` waits for the start
    if it is still under way. `log` is as for `get_spark`."""
    def start() -> None:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WARM_UP_NICE)  # inherited by the JVM
        get_spark(master, log)
        rehearse()
    return _in_background("spark-warm-up", start)


def _in_background(name: str, work: Callable[[], object]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except Exception:  # noqa: BLE001, S110 - the caller's own get_spark reports the failure
            pass
    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def full_priority() -> None:
    """Give the JVM the caller's CPU priority again (once the workload is over, nothing needs
    protecting from it). A nice value is a thread's, so each of the JVM's hundreds of threads
    gets it. Raising a priority needs CAP_SYS_NICE: without it the JVM stays nice, which
    costs nothing on an otherwise idle machine."""
    with _lock:
        if _driver is None:
            return
        proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        return
    renice(proc.pid, os.getpriority(os.PRIO_PROCESS, 0))


def renice(pid: int, nice: int) -> None:
    """Set the nice value of every thread of `pid` and of its descendants, where allowed."""
    try:
        launcher = psutil.Process(pid)
        threads = [t.id for p in [launcher, *launcher.children(recursive=True)] for t in p.threads()]
    except psutil.Error:
        return
    for tid in threads:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        except (ProcessLookupError, PermissionError):
            pass  # a thread that ended, or no right to raise a priority


def _stop_sessions(sessions: list, gone: bool) -> bool:
    """Stop each Spark Connect session, in a thread of its own that may take
    `SESSION_STOP_WAIT`; whether they all stopped in that time."""
    def stop_all() -> None:
        if gone:  # a release would be retried against a gone server, and so would the
            for each in sessions:  # clean-up at the process's exit of an unclosed client
                each.client.close()
            return
        _finish_releases(sessions)
        for each in sessions:
            try:
                each.stop()
            except (Py4JError, ConnectionError, PySparkException):
                pass  # the JVM died with the failure: there is nothing left to stop
    stopping = threading.Thread(target=stop_all, name="isrlab-stop-sessions", daemon=True)
    stopping.start()
    stopping.join(SESSION_STOP_WAIT)
    return not stopping.is_alive()


def _finish_releases(sessions: list) -> None:
    """Wait for the releases of `sessions`' finished executions that PySpark's client sends
    in the background (each execution's, in a pool of its own): one still under way when its
    session stopped reached a closed session, and the server logged an error with its stack
    trace in the run's `spark.log` (in 2 to 5 of 6 small scripts; none since)."""
    reattach = sys.modules.get("pyspark.sql.connect.client.reattach")
    if reattach is None:
        return  # no execution in this process
    ids = {getattr(getattr(each, "client", None), "_session_id", None) for each in sessions}
    releases = [release for each in list(getattr(reattach.ExecutePlanResponseReattachableIterator, "_instances", ()))
                if getattr(getattr(each, "_initial_request", None), "session_id", None) in ids
                for release in list(getattr(each, "release_futures", ()))]
    futures.wait(releases, timeout=RELEASE_WAIT)  # a few milliseconds; one retried against a dead JVM is left


#: How long `stop_spark` waits for the client's releases of finished executions (s)
RELEASE_WAIT = 1.0


def _forget(driver: SparkSession) -> None:
    """PySpark's own stop of `driver` on this side, its JVM killed already: the JVM's stop
    of its SparkContext (the Connect server's, the listener bus's and the block manager's
    ends, the local directories' removal by `rm` processes) is 0.1 s of work for a JVM killed
    next. A context without its Java side is a stopped one to PySpark (its
    `stop` then leaves the JVM alone, and `getOrCreate` makes a new context and session), so
    the next `get_spark` starts a new JVM, as after the full stop.

    The context's accumulator server (a socketserver nothing of isrlab's uses) ends in a
    thread of its own: its loop looks for the end every half second, and the wait was 0.2 s
    of a command on average. A TCP server leaves nothing once the process exits; one on a
    Unix socket (`spark.python.unix.domain.socket.enabled`) removes its file, so that one
    is waited for."""
    context = driver.sparkContext
    server = getattr(context, "_accumulatorServer", None)
    context._accumulatorServer = None
    context._jsc = None
    try:
        context.stop()  # the active context, on this side only
    except Exception:  # noqa: BLE001 - another PySpark's insides: the context is forgotten all the same
        SparkContext._active_spark_context = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None
    SQLContext._instantiatedContext = None
    if server is not None:
        if isinstance(server.server_address, str):
            server.shutdown()
        else:
            threading.Thread(target=server.shutdown, name="isrlab-accumulators-end", daemon=True).start()


def stop_spark() -> None:
    """Stop the session and its JVM, so that no process outlives the caller, nor its
    temporary files. After a failure the JVM may be gone already: the session is forgotten
    all the same, so the next `get_spark` starts a new one (a new JVM: PySpark would keep
    talking to the exited one). The JVM is killed once its sessions have stopped, or have had
    `SESSION_STOP_WAIT` to stop when it does not answer (stopped by SIGSTOP, or hung): py4j
    waits for an answer without a timeout, and a command that had printed its verdict never
    exited."""
    global _session, _driver, _master, _url, _scratch
    # Called as a Ctrl-C or SIGTERM unwinds the command: the judgment is abandoned, and the
    # JVM of this process is killed first, not after its sessions stopped, which waited for
    # the queries under way (6-9 s, trial38); a shared server is left to finish them.
    interrupted = isinstance(sys.exc_info()[1], KeyboardInterrupt)
    # Killed each time the wait runs out, not once: a start the first kill missed (the
    # thread not yet at its JVM's launch) would otherwise hold the lock to its end.
    while not _lock.acquire(timeout=START_WAIT):
        _kill_starting_jvm()
    try:
        session, driver, url = _session, _driver, _url
        _session, _driver, _master, _url = None, None, None, None
        own = getattr(SparkContext._gateway, "proc", None)
        if interrupted and own is not None and own.poll() is None:
            own.kill()
            own.wait()
        # A session `new_session` made is stopped first (a no-op if stopped already): a thread
        # still using it would otherwise retry its requests against a gone server for minutes,
        # and keep the process from exiting.
        others = _others[:]
        _others.clear()
        gone = (driver is None and url is not None and not connect_server_accepts(url, 2.0)  # died mid-judgment
                or own is not None and own.poll() is not None)
        stopped = _stop_sessions([each for each in (*others, session) if each is not None], gone)
        # this process's JVM: its driver's, or one whose start was cut short (`_kill_starting_jvm`)
        proc = getattr(SparkContext._gateway, "proc", None)
        if stopped and driver is not None and _archive is not None and proc is not None and proc.poll() is None:
            _archive.save(proc.pid)
        if proc is not None:
            # Killed, and waited for so that it is gone when the caller says so: with its
            # sessions stopped (and its classes saved) it has nothing left to finish, and its
            # own exit (at the end of its standard input, Spark's gateway's way out) ran
            # shutdown hooks for 0.3-0.5 s of every command, to remove the scratch directory
            # removed below. It keeps no performance-data file to leave (`JVM_OPTIONS`).
            proc.kill()
            proc.wait()
        if driver is not None:
            _forget(driver)
        gateway, SparkContext._gateway, SparkContext._jvm = SparkContext._gateway, None, None
        if gateway is not None:
            gateway.close()
        jvm_scratch.remove(_scratch)
        _scratch = None
    finally:
        _lock.release()


#: How long `stop_spark` waits for another thread's use of the session's lock before it takes
#: that thread to be starting the JVM (s)
START_WAIT = 1.0


def _kill_starting_jvm() -> None:
    """Kill the JVM another thread is starting: that thread holds the session's lock until
    the JVM answers, and the warm-up's start, at nice 10 on a loaded machine, took over a
    minute (a lab interrupted by Ctrl-C while its run's JVM started waited for all of it).
    Its start then fails, and the lock is free. The JVM is this process's child that
    PySpark's launcher started (`pyspark-shell`); a `run.py spark up` server is not a child."""
    for child in psutil.Process().children():
        try:
            if "pyspark-shell" in child.cmdline():
                child.kill()
        except psutil.Error:
            pass  # gone already
