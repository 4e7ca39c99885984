"""`--spark-master` is checked before a command starts anything: a master Spark does not
know, or a Spark Connect URL where nothing listens, is one line and exit 2 with the run
directories untouched (a closed port kept `analyze` retrying for ten minutes, and a
judgment that did fail wrote an unjudged results.json over the run's verdict)."""
from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from testbed.config.cli_values import connect_server_accepts, spark_master_problem
from tests.unit.analysis_fixtures import RunBuilder

ROOT = Path(__file__).resolve().parents[2]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[4,2]", "local-cluster[2,1,1024]",
                                    "yarn", "k8s://https://api:6443", None])
def test_spark_s_own_masters_are_left_to_spark(master: str | None) -> None:
    assert spark_master_problem(master) is None


def test_a_standalone_master_is_refused_where_nothing_accepts_a_connection() -> None:
    """Found by a tester: `spark://127.0.0.1:1` took 66 s to fail, overwrote the run's
    verdict with an unjudged one, and its JVM outlived the command."""
    port = _closed_port()
    assert spark_master_problem(f"spark://127.0.0.1:{port}").startswith(
        f"--spark-master spark://127.0.0.1:{port}: no Spark master accepts a connection there in 2 s")
    with socket.create_server(("127.0.0.1", 0)) as listener:  # a master of a standalone cluster, as far as TCP goes
        alive = listener.getsockname()[1]
        assert spark_master_problem(f"spark://127.0.0.1:{alive}") is None
        assert spark_master_problem(f"spark://127.0.0.1:{port},127.0.0.1:{alive}") is None  # one of its masters


@pytest.mark.parametrize("master", ["banana", "local[x]", "local[]", "sc:", "spark:/x", "LOCAL"])
def test_a_master_spark_does_not_know_is_refused_saying_what_is_expected(master: str) -> None:
    problem = spark_master_problem(master)
    assert problem is not None and problem.startswith(f"--spark-master {master!r}: expected local, local[N]")


def _answering_listener(delay: float = 0.0) -> socket.socket:
    """A port that answers every HTTP/2 greeting with a SETTINGS frame, as a gRPC server does,
    `delay` seconds after it came."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conn.recv(64)
            time.sleep(delay)
            conn.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return listener


def test_a_connect_url_is_refused_when_nothing_answers_there() -> None:
    port = _closed_port()
    assert spark_master_problem(f"sc://127.0.0.1:{port}") == (
        f"--spark-master sc://127.0.0.1:{port}: no Spark Connect server answers there (the connection was "
        f"refused, or nothing answered HTTP/2 within 10 s)")
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, answers nothing
        assert not connect_server_accepts(f"sc://127.0.0.1:{silent.getsockname()[1]}", timeout=0.5)
    with _answering_listener() as listener:
        port = listener.getsockname()[1]
        assert spark_master_problem(f"sc://127.0.0.1:{port}/;use_ssl=false") is None
        assert connect_server_accepts(f"sc://127.0.0.1:{port}")
        assert not connect_server_accepts("sc://127.0.0.1:notaport")
        assert not connect_server_accepts("sc://127.0.0.1:99999")


def test_a_connect_server_slow_to_answer_is_not_called_silent() -> None:
    """A live server's JVM starved of CPU answers late: at a 2 s wait a CI run three times the
    usual length had `sim` refuse its tests' warm server."""
    with _answering_listener(delay=3.0) as listener:
        assert spark_master_problem(f"sc://127.0.0.1:{listener.getsockname()[1]}") is None


@pytest.mark.parametrize("master", ["local[0]", "local[2,0]", "local-cluster[0,1,1024]", "local[99999999999]"])
def test_a_local_master_of_no_threads_is_refused(master: str) -> None:
    assert spark_master_problem(master) == (
        f"--spark-master {master}: its numbers (threads, workers, cores, MB) must be from 1 to 1,000,000")


def test_analyze_with_an_unreachable_server_changes_nothing_and_exits_2(tmp_path: Path) -> None:
    run = RunBuilder(tmp_path, "r").write()
    before = sorted(p.name for p in run.rglob("*"))
    started = time.monotonic()
    done = subprocess.run([sys.executable, "run.py", "analyze", str(run), "--spark-master",
                           f"sc://127.0.0.1:{_closed_port()}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "no Spark Connect server answers there" in done.stdout
    assert sorted(p.name for p in run.rglob("*")) == before
    assert time.monotonic() - started < 60


GONE = """
import socket, threading, time
from testbed.analysis import session
listener = socket.create_server(("127.0.0.1", 0))
def greet():  # answers the greeting the master check sends, as a gRPC server would
    conn, _ = listener.accept()
    conn.recv(64)
    conn.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))
    conn.close()
threading.Thread(target=greet, daemon=True).start()
session.get_spark(f"sc://127.0.0.1:{listener.getsockname()[1]}")
listener.close()
started = time.monotonic()
session.stop_spark()
print(round(time.monotonic() - started, 1), session.started())
"""


def test_stop_spark_does_not_wait_on_a_server_that_is_gone() -> None:
    """A session on a server that went away is dropped, not released: the release was retried
    for ten minutes (Spark's client default), so `analyze` hung after its verdict. In a
    process of its own: a test worker's session may be up."""
    begun = time.monotonic()
    done = subprocess.run([sys.executable, "-c", GONE], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seconds, started = done.stdout.split()
    assert float(seconds) < 10 and started == "False", done.stdout
    assert time.monotonic() - begun < 30, "the process's exit retried a release against the gone server"
