"""Whether the `spark up` server answers (`spark_server.answering`): a live pid and an open
port are not enough, since the kernel accepts a connection for a server that is stopped or
hung; such a server must count as gone (analyze then falls back, `spark status` exits 1),
not be waited on for ever."""
from __future__ import annotations

import os
import socket
import threading
import time

from testbed.analysis.spark_server import ServerInfo, answering


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


def test_a_server_that_answers_its_greeting_answers() -> None:
    done = threading.Event()
    server, port = _listener(answer=True, done=done)
    with server:
        try:
            assert answering(ServerInfo(os.getpid(), port, "local[*]", "", 0.0), timeout=2.0)
        finally:
            done.set()


def test_a_server_that_accepts_but_never_answers_does_not_answer_within_the_timeout() -> None:
    done = threading.Event()
    server, port = _listener(answer=False, done=done)
    with server:
        try:
            start = time.monotonic()
            assert not answering(ServerInfo(os.getpid(), port, "local[*]", "", 0.0), timeout=0.5)
            assert time.monotonic() - start < 2.5
        finally:
            done.set()
