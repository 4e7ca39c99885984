"""The supervisor's side of the nodes' control sockets (status, links, shutdown)."""
from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Collection
from typing import TypeVar

from broker.common.errors import Errors
from broker.protocol.messages import ControlRequest, ControlResponse
from broker.wire.transport import Expired, Response, Transport


#: how often a request with an `until` condition asks it (s)
UNTIL_POLL = 0.01
#: how long `call_all` waits for a node that has not answered since it was started (s)
STARTING_PATIENCE = 0.05
K = TypeVar("K")


class ControlClient:
    _ids = itertools.count()

    def __init__(self, token: str) -> None:
        self.token = token
        # A node's ROUTER hands an identity over to its newest holder: every client needs
        # its own, or `run.py status` would steal the running supervisor's replies.
        self.transport = Transport(f"supervisor-{os.getpid()}-{next(self._ids)}")

    def request(self, endpoint: str, msg: object, timeout: float = 1.0,
                until: Callable[[], bool] | None = None) -> object | None:
        """Any request (control or admin); None if no answer came in time, or once `until()`
        holds (asked every `UNTIL_POLL` s): a node that exits on a `shutdown` may take its
        answer with it, and waiting out the timeout then cost a run's end a second."""
        rid = self.transport.request(endpoint, msg, timeout, time.monotonic())
        deadline = time.monotonic() + timeout + 0.05
        while (left := deadline - time.monotonic()) > 0:
            if until is not None:
                if until():
                    return None
                left = min(left, UNTIL_POLL)
            for item in self.transport.poll(left, time.monotonic):
                if isinstance(item, Response) and item.request_id == rid:
                    return item.msg
                if isinstance(item, Expired) and item.request_id == rid:
                    return None
        return None

    def call(self, endpoint: str, op: str, args: dict | None = None, timeout: float = 1.0,
             until: Callable[[], bool] | None = None) -> dict | None:
        """The node's answer body, or None if it did not answer in time (dead, paused, busy)
        or `until()` came to hold first."""
        msg = self.request(endpoint, ControlRequest(self.token, op, args or {}), timeout, until)
        if isinstance(msg, ControlResponse) and msg.error == Errors.NONE:
            return msg.body
        return None

    def send(self, endpoint: str, op: str, args: dict | None = None, timeout: float = 1.0) -> None:
        """A control request whose answer nobody waits for: a `shutdown`, whose waiter watches
        the node's process instead. A paused node answers nothing, and waiting out the answer
        held every fault due in that second (trial27's t9: an elect-preferred due 0.5 s after
        the shutdown of a paused broker fired 1 s after it). The answer, or its expiry, is
        dropped by whichever poll reads it (`pump`, or another request's)."""
        self.transport.request(endpoint, ControlRequest(self.token, op, args or {}), timeout, time.monotonic())

    def pump(self, timeout: float, until: Callable[[], bool]) -> None:
        """Run the transport for `timeout` s, or until `until()` holds (asked every
        `UNTIL_POLL` s), reading nothing: a request `send` left held for its connection (a
        node that has just started) goes out only while the transport is polled."""
        deadline = time.monotonic() + timeout
        while not until() and (left := deadline - time.monotonic()) > 0:
            self.transport.poll(min(left, UNTIL_POLL), time.monotonic)

    def call_all(self, endpoints: dict[K, str], op: str, timeout: float = 1.0,
                 starting: Collection[K] = (), patience: float = STARTING_PATIENCE,
                 gone: Callable[[K], bool] | None = None) -> dict[K, dict | None]:
        """`call` of every node at once: one moment's answers. Asked one after another, a
        dead node's timeout fell between the others' answers, and `run.py status` showed a
        follower's log end past its leader's. The nodes in `starting` (processes that have
        not answered since they were started) are waited for at most `patience` s: a process
        takes most of a second to start, and waiting out `timeout` for it held back every
        fault the schedule had due meanwhile (each resolves its targets on a status). A node
        for which `gone(key)` comes to hold (asked every `UNTIL_POLL` s: its process exited
        while it was asked, at the end of its controlled shutdown) is waited for no longer."""
        msg = ControlRequest(self.token, op, {})
        now = time.monotonic()
        rids = {self.transport.request(endpoint, msg, timeout, now): key for key, endpoint in endpoints.items()}
        out: dict[K, dict | None] = dict.fromkeys(endpoints.keys())
        deadline, soon = now + timeout + 0.05, now + min(timeout, patience)
        while rids:
            if gone is not None:
                rids = {rid: key for rid, key in rids.items() if not gone(key)}
                if not rids:
                    break
            until = soon if all(key in starting for key in rids.values()) else deadline
            if (left := until - time.monotonic()) <= 0:
                break
            if gone is not None:
                left = min(left, UNTIL_POLL)
            for item in self.transport.poll(left, time.monotonic):
                if isinstance(item, Response | Expired) and item.request_id in rids:
                    key = rids.pop(item.request_id)
                    if isinstance(item, Response) and isinstance(item.msg, ControlResponse) \
                            and item.msg.error == Errors.NONE:
                        out[key] = item.msg.body
        return out

    def close(self) -> None:
        self.transport.close()
