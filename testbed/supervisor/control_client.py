"""The supervisor's side of the nodes' control sockets (status, links, shutdown)."""
from __future__ import annotations

import itertools
import os
import time

from broker.common.errors import Errors
from broker.protocol.messages import ControlRequest, ControlResponse
from broker.wire.transport import Expired, Response, Transport


class ControlClient:
    _ids = itertools.count()

    def __init__(self, token: str) -> None:
        self.token = token
        # A node's ROUTER hands an identity over to its newest holder: every client needs
        # its own, or `run.py status` would steal the running supervisor's replies.
        self.transport = Transport(f"supervisor-{os.getpid()}-{next(self._ids)}")

    def request(self, endpoint: str, msg: object, timeout: float = 1.0) -> object | None:
        """Any request (control or admin); None if no answer came in time."""
        rid = self.transport.request(endpoint, msg, timeout, time.monotonic())
        deadline = time.monotonic() + timeout + 0.05
        while (left := deadline - time.monotonic()) > 0:
            for item in self.transport.poll(left, time.monotonic):
                if isinstance(item, Response) and item.request_id == rid:
                    return item.msg
                if isinstance(item, Expired) and item.request_id == rid:
                    return None
        return None

    def call(self, endpoint: str, op: str, args: dict | None = None, timeout: float = 1.0) -> dict | None:
        """The node's answer body, or None if it did not answer in time (dead, paused, busy)."""
        msg = self.request(endpoint, ControlRequest(self.token, op, args or {}), timeout)
        if isinstance(msg, ControlResponse) and msg.error == Errors.NONE:
            return msg.body
        return None

    def close(self) -> None:
        self.transport.close()
