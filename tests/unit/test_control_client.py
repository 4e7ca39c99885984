"""The supervisor's control requests (`testbed/supervisor/control_client.py`): a request can
stop waiting once a condition holds, as a controlled shutdown does once the node's process
has exited (a node that exits on `shutdown` may take its answer with it: the supervisor then
waited out the whole timeout, 1 s of a run's end now and then)."""
from __future__ import annotations

import time
from pathlib import Path

import zmq

from testbed.supervisor.control_client import ControlClient


def test_a_request_stops_waiting_once_its_condition_holds(tmp_path: Path) -> None:
    silent = zmq.Context.instance().socket(zmq.ROUTER)  # takes requests, answers none
    silent.setsockopt(zmq.LINGER, 0)
    endpoint = f"ipc://{tmp_path}/node.sock"
    silent.bind(endpoint)
    client = ControlClient("token")
    try:
        gone_at = time.monotonic() + 0.05
        start = time.monotonic()
        assert client.call(endpoint, "shutdown", timeout=5.0, until=lambda: time.monotonic() >= gone_at) is None
        assert time.monotonic() - start < 1.0
        assert silent.poll(1000) and silent.recv_multipart()  # the request did reach the node
        start = time.monotonic()
        assert client.call(endpoint, "status", timeout=0.2) is None  # without a condition: the timeout
        assert time.monotonic() - start >= 0.2
    finally:
        client.close()
        silent.close()
