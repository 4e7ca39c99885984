"""Whether the `spark up` server answers (`spark_server.answering`): a live pid and an open
port are not enough, since the kernel accepts a connection for a server that is stopped or
hung; such a server must count as gone (analyze then falls back, `spark status` exits 1),
not be waited on for ever. And `spark down` stops only a Spark Connect server: a record
naming another process leaves it alone."""
from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import psutil
import pytest

from testbed.analysis import spark_server
from testbed.analysis.spark_server import SERVER_CLASS, ServerInfo, answering
from testbed.common.pids import exited
from testbed.config.cli_values import connect_server_accepts, connect_server_refuses


def _process(*argv: str) -> subprocess.Popen:
    """A process of its own session whose command line holds `argv` (as the JVM's holds the
    server's class)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv], start_new_session=True)


@pytest.fixture
def server_process() -> Iterator[int]:
    """A process that `spark_server.running` takes for a server: until the child has exec'd,
    its command line is still pytest's (a CI run under load failed on that)."""
    proc = _process(SERVER_CLASS)
    deadline = time.monotonic() + 10
    while SERVER_CLASS not in " ".join(psutil.Process(proc.pid).cmdline()) and time.monotonic() < deadline:
        time.sleep(0.01)  # polling the exec against a deadline
    assert SERVER_CLASS in " ".join(psutil.Process(proc.pid).cmdline()), "the stand-in server never exec'd"
    yield proc.pid
    proc.kill()
    proc.wait()


def _listener(answer: bool, done: threading.Event) -> tuple[socket.socket, int]:
    """A port that accepts connections; it answers a greeting with bytes, or never, and
    holds the connection open (as a stopped process holds it) until `done`."""
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        if answer:
            conn.recv(64)
            conn.sendall(bytes([0, 0, 0, 4, 0, 0, 0, 0, 0]))  # an HTTP/2 SETTINGS frame
        done.wait(10)
        conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def test_a_server_that_answers_its_greeting_answers(server_process: int) -> None:
    done = threading.Event()
    server, port = _listener(answer=True, done=done)
    with server:
        try:
            assert answering(ServerInfo(server_process, port, "local[*]", "", 0.0), timeout=2.0)
        finally:
            done.set()


def test_a_server_that_accepts_but_never_answers_does_not_answer_within_the_timeout(server_process: int) -> None:
    done = threading.Event()
    server, port = _listener(answer=False, done=done)
    with server:
        try:
            start = time.monotonic()
            assert not answering(ServerInfo(server_process, port, "local[*]", "", 0.0), timeout=0.5)
            assert time.monotonic() - start < 2.5
        finally:
            done.set()


def test_a_listener_that_never_answers_is_no_spark_master() -> None:
    """`--spark-master sc://...` of a port that only accepts: a minute of gRPC retries, then
    the run's stored verdict was overwritten as unjudged."""
    done = threading.Event()
    server, port = _listener(answer=False, done=done)
    with server:
        try:
            assert not connect_server_accepts(f"sc://127.0.0.1:{port}", timeout=0.5)
        finally:
            done.set()
    done = threading.Event()
    server, port = _listener(answer=True, done=done)
    with server:
        try:
            assert connect_server_accepts(f"sc://127.0.0.1:{port}", timeout=2.0)
        finally:
            done.set()


class _Unavailable(grpc.RpcError):
    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.UNAVAILABLE


def test_a_transport_error_is_retried_while_the_server_listens_and_not_once_it_is_gone() -> None:
    """A JVM killed mid-judgment: every request after it (the judgment's threads, clearing the
    cache, stopping the sessions) waited out Spark's retries, 36 s in all before `analyze`
    said the runs could not be judged; 3 s now."""
    from testbed.analysis.connect_retries import WhileListening
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        url = f"sc://127.0.0.1:{listener.getsockname()[1]}"
        assert not connect_server_refuses(url)
        assert WhileListening(url).can_retry(_Unavailable())  # a busy or restarting server: tried again
    assert connect_server_refuses(url)  # the same port, closed
    assert not WhileListening(url).can_retry(_Unavailable())
    assert not WhileListening(url).can_retry(ValueError("not a transport error"))


@pytest.mark.parametrize("pid", ["another", 0])
def test_spark_down_stops_no_process_but_the_server(pid: object, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A record whose pid now names another process (here: one not a Spark Connect server),
    or pid 0 (which `killpg` reads as our own group), is stale: `down` removes it and signals
    nothing (it sent SIGTERM to whatever held the number)."""
    other = _process("not-a-server")
    try:
        state = tmp_path / "spark-server.json"
        monkeypatch.setenv("ISRLAB_SPARK_SERVER_FILE", str(state))
        recorded = other.pid if pid == "another" else 0
        state.write_text(json.dumps({"pid": recorded, "port": 1, "master": "local[*]", "log": "", "started": 0.0}))
        assert spark_server.down() == (ServerInfo(recorded, 1, "local[*]", "", 0.0), False)
        assert not state.exists() and not exited(other.pid)
    finally:
        other.kill()
        other.wait()


@pytest.mark.parametrize("record", ['{"pid": "123", "port": 4, "master": "local[*]", "log": "/x", "started": 0}',
                                    '{"pid": 5, "port": 0, "master": "local[*]", "log": "/x", "started": 0}',
                                    '{"pid": true, "port": 4, "master": "local[*]", "log": "/x", "started": 0}',
                                    "[1, 2]", "garbage{"])
def test_a_record_up_did_not_write_is_no_server_and_down_removes_it(record: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a tester: a pid written as a string made every command (analyze, spark
    up/down/status) fail with a TypeError until the file was deleted by hand."""
    state = tmp_path / "spark-server.json"
    monkeypatch.setenv("ISRLAB_SPARK_SERVER_FILE", str(state))
    state.write_text(record)
    assert spark_server.recorded() is None
    assert spark_server.down() is None and not state.exists()


def test_an_up_interrupted_while_its_server_starts_leaves_no_server(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a tester: Ctrl-C (or SIGKILL) of `spark up` while the JVM started left a
    server running that no record named, so `spark down` could not stop it. The server is on
    record from its start (what `down` finds after a SIGKILL), and an interrupted `up`
    stops it and removes the record."""
    state = tmp_path / "spark-server.json"
    monkeypatch.setenv("ISRLAB_SPARK_SERVER_FILE", str(state))
    started: list[subprocess.Popen] = []
    real = subprocess.Popen

    def popen(cmd: list[str], **kwargs: object) -> subprocess.Popen:  # the JVM, as a process that holds its class
        started.append(real([sys.executable, "-c", "import time; time.sleep(60)", *cmd], start_new_session=True))
        deadline = time.monotonic() + 10  # until it has exec'd: before, its command line is ours
        while SERVER_CLASS not in " ".join(psutil.Process(started[0].pid).cmdline()):
            assert time.monotonic() < deadline, "the stand-in server never started"
            time.sleep(0.01)
        return started[0]

    def interrupted(info: ServerInfo, timeout: float = 2.0) -> bool:
        assert spark_server.recorded() == info and spark_server.running(info), "not on record while it starts"
        raise KeyboardInterrupt
    monkeypatch.setattr(spark_server.subprocess, "Popen", popen)
    monkeypatch.setattr(spark_server, "answering", interrupted)
    try:
        with pytest.raises(KeyboardInterrupt):
            spark_server.up()
        started[0].wait(timeout=10)
        assert not state.exists()
    finally:
        for proc in started:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("master", ["garbage", "sc://127.0.0.1:1", "spark://127.0.0.1:1"])
def test_spark_up_refuses_a_master_it_cannot_run_on_before_a_jvm_starts(
        master: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Found by a tester: `spark up --master garbage` started a JVM, which then failed."""
    from testbed.analysis import spark_command
    monkeypatch.setenv("ISRLAB_SPARK_SERVER_FILE", str(tmp_path / "spark-server.json"))
    monkeypatch.setattr(spark_server, "up", lambda master: pytest.fail("a server was started"))
    assert spark_command.main(["up", "--master", master]) == 2
    assert capsys.readouterr().out.startswith("cannot start the Spark server: --master ")


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, SystemExit])
def test_an_up_interrupted_in_its_warm_up_stops_the_server_it_started(monkeypatch: pytest.MonkeyPatch,
                                                                      interrupt: type[BaseException]) -> None:
    """trial33: Ctrl-C in `spark up`'s warm-up said "everything it started is stopped" and
    left the server judging at 99 % CPU; only the wait for its port stopped it."""
    from testbed.analysis import pipeline, session, spark_command
    calls = []

    def warm(url: str, rounds: int) -> list[float]:
        raise interrupt()
    monkeypatch.setattr(pipeline, "warm_server", warm)
    monkeypatch.setattr(session, "stop_spark", lambda: calls.append("session stopped"))
    monkeypatch.setattr(spark_server, "down", lambda: calls.append("server down"))
    info = ServerInfo(1, 15002, "local[*]", "/tmp/x.log", 0.0)
    with pytest.raises(interrupt):
        spark_command._warm_up(info, 2)
    assert calls[:2] == ["session stopped", "server down"], calls
