"""The supervisor's control requests (`testbed/supervisor/control_client.py`): a request can
stop waiting once a condition holds, as a controlled shutdown does once the node's process
has exited (a node that exits on `shutdown` may take its answer with it: the supervisor then
waited out the whole timeout, 1 s of a run's end now and then)."""
from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import zmq

from testbed.supervisor.control_client import ControlClient


@pytest.fixture
def silent(tmp_path: Path) -> Iterator[tuple[zmq.Socket, str]]:
    """A node that takes requests and answers none, and its endpoint."""
    socket = zmq.Context.instance().socket(zmq.ROUTER)
    socket.setsockopt(zmq.LINGER, 0)
    endpoint = f"ipc://{tmp_path}/node.sock"
    socket.bind(endpoint)
    yield socket, endpoint
    socket.close()


def test_a_request_stops_waiting_once_its_condition_holds(silent: tuple[zmq.Socket, str]) -> None:
    node, endpoint = silent
    client = ControlClient("token")
    try:
        gone_at = time.monotonic() + 0.05
        start = time.monotonic()
        assert client.call(endpoint, "shutdown", timeout=5.0, until=lambda: time.monotonic() >= gone_at) is None
        assert time.monotonic() - start < 1.0
        assert node.poll(1000) and node.recv_multipart()  # the request did reach the node
        start = time.monotonic()
        assert client.call(endpoint, "status", timeout=0.2) is None  # without a condition: the timeout
        assert time.monotonic() - start >= 0.2
    finally:
        client.close()


def test_every_node_is_asked_at_once_so_a_dead_one_costs_one_timeout_not_one_each(tmp_path: Path) -> None:
    """`run.py status` asked the nodes one after another: a dead node's timeout fell between
    the others' answers, and the table mixed two moments (a follower's LEO past its leader's)."""
    import threading

    from broker.common.errors import Errors
    from broker.protocol.messages import ControlResponse
    from broker.wire.transport import Request, Transport

    live = {name: Transport(name, bind=f"ipc://{tmp_path}/{name}.sock") for name in ("broker-1", "broker-3")}
    stop = threading.Event()

    def serve(node: Transport) -> None:
        while not stop.is_set():
            for item in node.poll(0.02, time.monotonic):
                if isinstance(item, Request):
                    node.reply(item.handle, ControlResponse(Errors.NONE, {"node": node.name, "at": time.monotonic()}))
    threads = [threading.Thread(target=serve, args=(node,), daemon=True) for node in live.values()]
    for thread in threads:
        thread.start()
    client = ControlClient("token")
    try:
        start = time.monotonic()
        answers = client.call_all({name: f"ipc://{tmp_path}/{name}.sock" for name in ("broker-1", "broker-2",
                                                                                      "broker-3")},
                                  "status", timeout=2.0)
        assert answers["broker-2"] is None and [answers[b]["node"] for b in ("broker-1", "broker-3")] == [
            "broker-1", "broker-3"]
        # broker-3 was asked with broker-1, not after broker-2's timeout (2 s)
        assert abs(answers["broker-3"]["at"] - answers["broker-1"]["at"]) < 1.0
        assert time.monotonic() - start < 4.0  # one timeout for the dead broker-2, not one per node
    finally:
        stop.set()
        for thread in threads:
            thread.join()
        client.close()
        for node in live.values():
            node.close()


def test_a_node_still_starting_is_waited_for_briefly_and_the_others_in_full(tmp_path: Path) -> None:
    """A restarted process takes most of a second to start; every fault due meanwhile resolves
    its targets on a status, and waiting out the timeout for the new process held them back
    (a pause due 0.2 s after a restart fired 0.6 s late). A node that is not starting is
    still waited for in full."""
    import threading

    from broker.common.errors import Errors
    from broker.protocol.messages import ControlResponse
    from broker.wire.transport import Request, Transport

    late = Transport("broker-1", bind=f"ipc://{tmp_path}/broker-1.sock")  # answers after 1 s
    stop = threading.Event()

    def serve() -> None:
        time.sleep(1.0)
        while not stop.is_set():
            for item in late.poll(0.02, time.monotonic):
                if isinstance(item, Request):
                    late.reply(item.handle, ControlResponse(Errors.NONE, {"node": "broker-1"}))
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = ControlClient("token")
    endpoints = {"broker-1": f"ipc://{tmp_path}/broker-1.sock", "broker-2": f"ipc://{tmp_path}/broker-2.sock"}
    try:
        start = time.monotonic()
        answers = client.call_all(endpoints, "status", timeout=10.0, starting={"broker-1", "broker-2"},
                                  patience=0.05)
        assert answers == {"broker-1": None, "broker-2": None}
        assert time.monotonic() - start < 0.9  # the patience, not the timeout nor broker-1's second
        answers = client.call_all(endpoints, "status", timeout=10.0, starting={"broker-2"}, patience=0.05)
        assert answers == {"broker-1": {"node": "broker-1"}, "broker-2": None}  # broker-1 waited for in full
    finally:
        stop.set()
        thread.join()
        client.close()
        late.close()


def test_a_node_that_exits_while_asked_is_waited_for_no_longer(silent: tuple[zmq.Socket, str]) -> None:
    """trial27: a node whose controlled shutdown ended while a status asked it cost that
    status its whole timeout, and the faults due inside the shutdown's wait fired late."""
    _, endpoint = silent
    client = ControlClient("token")
    try:
        gone_at = time.monotonic() + 0.05
        start = time.monotonic()
        answers = client.call_all({"broker-1": endpoint}, "status", timeout=5.0,
                                  gone=lambda name: time.monotonic() >= gone_at)
        assert answers == {"broker-1": None} and time.monotonic() - start < 1.0
    finally:
        client.close()
