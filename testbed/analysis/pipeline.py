"""`analyze_runs`: one Spark job over one run or a tree of runs, then the files it leaves
(results.json and report.html in each run, a summary for several runs)."""
from __future__ import annotations

import fcntl
import json
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Literal

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql.connect.session import SparkSession as RemoteSession

from testbed.analysis.ingest import Ahead, ingest, parse_ahead, run_ids
from testbed.analysis.job import RunData, run_job
from testbed.analysis.places import default_summary_dir, jvm_log_for, warehouse_for
from testbed.analysis.report import write_reports
from testbed.analysis.run_dirs import IngestError, find_runs, input_bytes, refusal
from testbed.analysis.runinfo import RunInfo, config_tables, load_run_info
from testbed.analysis.session import (C1_INPUT_BYTES, get_spark, is_remote, jvm_alive, new_session, stop_spark,
                                      tune_for)
from testbed.analysis.summary import remove_summary, write_summary
from testbed.analysis.synth import write_synthetic_run
from testbed.analysis.verdict import RunVerdict, judge
from testbed.analysis.whole_files import write_whole
from testbed.common import owned_dirs


#: Up to this much JSONL a table Arrow's reader read whole reaches Spark as its rows, not as
#: Parquet files (`ingest`): the quickstart's run is 1.5 MB, a lab's or a matrix cell's a few
HANDED_OVER_BYTES = 16 << 20
#: One judgment at a time per process: jobs share the session's cache, which each clears at its end.
_judging = threading.Lock()
REHEARSAL_RECORDS = 2000
_rehearsal_lock = threading.Lock()
_rehearsal: RemoteSession | None = None  # the session of the rehearsal under way
_rehearsed = False  # this process has begun a rehearsal, or a judgment made one pointless


def rehearse(spark_master: str | None = None) -> None:
    """Judge a small synthetic run, once per process, so that the JVM has loaded and compiled
    the pipeline's code before a real run needs it (see `session.warm_up`). The rehearsal has
    a session of its own, which a real judgment stops (`end_rehearsal`) instead of waiting
    for it. A Spark Connect server needs none: it stays warm between commands."""
    global _rehearsal, _rehearsed
    get_spark(spark_master)
    with _rehearsal_lock:
        if _rehearsed or is_remote():
            return
        _rehearsed = True
        _rehearsal = spark = new_session()
    try:
        with owned_dirs.scratch(owned_dirs.REHEARSAL_PREFIX) as tmp:
            run = write_synthetic_run(tmp, REHEARSAL_RECORDS)
            _judge(spark, {run.name: load_run_info(run)}, warehouse_for([run], None), input_bytes([run]))
    finally:
        end_rehearsal()


def end_rehearsal() -> None:
    """Stop the rehearsal if one is under way: its session ends on the server with its
    queries, and its thread's next call fails. A rehearsal not begun yet never begins. The
    stop is not waited for (the server's release of a session in its checks took 0.3 s of
    the verdict's time): the judgment that ends it goes on at once."""
    global _rehearsal, _rehearsed
    with _rehearsal_lock:
        spark, _rehearsal, _rehearsed = _rehearsal, None, True
    if spark is not None:
        threading.Thread(target=_stop_quietly, args=(spark,), name="isrlab-end-rehearsal", daemon=True).start()


def _stop_quietly(spark: RemoteSession) -> None:
    try:
        spark.stop()
    except Exception:  # noqa: BLE001, S110 - a session that cannot be stopped is stopped
        pass


def warm_server(url: str, rounds: int) -> list[float]:
    """Judge a small synthetic run `rounds` times on the Spark Connect server at `url` (one
    `run.py spark up` has just started), so that the first real judgment finds the server's
    JVM compiled. A server keeps the full tiered JIT (it also judges large inputs), whose
    compilers take several judgments to settle: the quickstart's run took 18 s on a new
    server, 6-7 s after three rounds, 3.7-4 s once settled. Returns each round's seconds."""
    spark = get_spark(url)
    times = []
    with _judging, owned_dirs.scratch("isrlab-warm-up-") as tmp:
        run = write_synthetic_run(tmp, REHEARSAL_RECORDS)
        infos = {run.name: load_run_info(run)}
        for _ in range(rounds):
            start = time.perf_counter()
            _judge(spark, infos, warehouse_for([run], None), input_bytes([run]))
            times.append(time.perf_counter() - start)
    return times


#: which runs get a `report.html`: every one, or those that did not pass (a sweep of seeds)
Reports = Literal["all", "not-ok"]


def analyze_runs(paths: list[Path], spark_master: str | None = None, summary_dir: Path | None = None,
                 reports: Reports = "all", cut_short: Mapping[Path, str] | None = None) -> list[RunVerdict]:
    """Judge every run under `paths` in one Spark job (see `_analyze`)."""
    end_rehearsal()
    with _judging:
        return _analyze(paths, spark_master, summary_dir, reports, cut_short or {})


def _analyze(paths: list[Path], spark_master: str | None, summary_dir: Path | None,
             reports: Reports = "all", cut_short: Mapping[Path, str] | None = None) -> list[RunVerdict]:
    """Judge every run under `paths` in one Spark job; write `results.json` into each run
    directory, `report.html` into each (`reports` "all") or only into those that did not
    pass ("not-ok": a sweep of a thousand seeds reads those), and for more than one run a
    summary into `summary_dir` (default: `<common parent>/summary`; one run gets one when
    `summary_dir` is given, as a matrix round of one cell does). Raises IngestError
    when no run can be found, and `session.SparkUnreachable` when the Spark Connect server
    named as the master accepts no connection: both before anything is written.

    A Spark failure (a job that fails, a JVM that dies) leaves every run unjudged with the
    reason in its results.json, never a partial verdict. When the JVM itself is gone the
    session is dropped, so the next call starts a new one.

    `cut_short`: runs that stopped before their end, with why (a sim seed that an internal
    error ended): their records are not read, and each is unjudged with that reason, in its
    results.json and in the summary's count, like any run that could not be judged."""
    runs = find_runs([Path(p) for p in paths])
    if (refused := refusal(runs)) is not None:
        raise refused
    infos = {rid: load_run_info(run, rid) for run, rid in run_ids(runs).items()}
    short = {Path(p).resolve(): why for p, why in (cut_short or {}).items()}
    stopped = {rid: short[info.run_dir] for rid, info in infos.items() if info.run_dir in short}
    read = {rid: info for rid, info in infos.items() if rid not in stopped}
    failed = None
    try:
        warehouse = warehouse_for(runs, summary_dir)
        size = input_bytes([info.run_dir for info in read.values()])
        ahead = parse_ahead([info.run_dir for info in read.values()]) if size < HANDED_OVER_BYTES else {}
        spark = get_spark(spark_master, log=jvm_log_for(warehouse), small_input=size < C1_INPUT_BYTES)
        with _sole_judgment(warehouse):
            data, rejected = _judge(spark, read, warehouse, size, ahead) if read else ({}, {})
        rejected |= stopped
    except (PySparkException, Py4JError, ConnectionError) as exc:  # the last: a JVM killed as it started
        failed = f"the Spark job failed, so the run was not judged: {spark_failure(exc)}"
        data, rejected = {}, dict.fromkeys(infos, failed) | stopped
        if not jvm_alive() or not isinstance(exc, PySparkException | Py4JJavaError):  # the JVM is gone
            stop_spark()
    verdicts = []
    for rid, info in infos.items():
        verdict = judge(info, data.get(rid), rejected.get(rid))
        write_whole(info.run_dir / "results.json", json.dumps(verdict.results, indent=1, default=str).encode())
        verdicts.append(verdict)
    write_reports([(info, verdict, data.get(rid)) for (rid, info), verdict in zip(infos.items(), verdicts)
                   if reports == "all" or verdict.ok is not True])
    if len(verdicts) > 1 or summary_dir is not None:  # a matrix's round of one cell too
        target = summary_dir or default_summary_dir(runs)
        if failed is not None:
            remove_summary(target)
            return verdicts
        try:
            write_summary(spark, infos, verdicts, target)
        except (PySparkException, Py4JError, ConnectionError) as exc:
            if not jvm_alive() or not isinstance(exc, PySparkException | Py4JJavaError):
                stop_spark()
            remove_summary(target)
            raise SummaryError(verdicts, f"every run was judged (each run's results.json), but the summary in "
                                         f"{target} could not be written: {spark_failure(exc)}") from None
    return verdicts


class SummaryError(RuntimeError):
    """The runs were judged and their verdicts written; the Spark job of their summary failed."""

    def __init__(self, verdicts: list[RunVerdict], message: str) -> None:
        super().__init__(message)
        self.verdicts = verdicts


@contextmanager
def _sole_judgment(warehouse: Path) -> Iterator[None]:
    """One judgment at a time fills and reads a warehouse: two `analyze` of one run at once
    replaced each other's tables, and the first failed reading files the second had removed.
    A judgment that finds another under way says so and waits for it. The lock is the
    warehouse's directory itself, so no lock file is left beside it."""
    warehouse.parent.mkdir(parents=True, exist_ok=True)
    lock = os.open(warehouse.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"isrlab: another judgment is filling {warehouse}; waiting for it to end", file=sys.stderr, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield
    finally:
        os.close(lock)  # and with it the lock


def _judge(spark: RemoteSession, infos: dict[str, RunInfo], warehouse: Path,
           size: int, ahead: Ahead | None = None) -> tuple[dict[str, RunData], dict[str, str]]:
    """The Spark part of a judgment: each judged run's data, and why each other run was not."""
    small = tune_for(spark, size)
    tables, rejected = ingest(spark, {info.run_dir: rid for rid, info in infos.items()}, warehouse,
                              size < HANDED_OVER_BYTES, ahead)
    judged = [rid for rid in infos if rid not in rejected]
    data = run_job(tables, config_tables(spark, [infos[r] for r in judged]), judged, small) if judged else {}
    return data, rejected


def spark_failure(exc: BaseException) -> str:
    """The first line of a Spark error (the JVM's stack trace stays out of results.json), or
    its first three when the first only announces the rest (a gRPC error's
    "<_MultiThreadedRendezvous of RPC that terminated with:", its status and details below)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [type(exc).__name__]
    head = " ".join(lines[:3]) if lines[0].endswith(":") else lines[0]
    return f"{type(exc).__name__}: {head[:400]}"



__all__ = ["IngestError", "SummaryError", "analyze_runs"]
