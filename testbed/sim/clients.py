"""The workload's clients on virtual time: `ClientTask` carries out a client loop's steps
(`broker.client`: Call, CallEach, Start, Collect, Sleep) on the loop and the simulated network, as
`ClusterClient.run` carries them out over ZeroMQ. The loops themselves, the requests they
build and the answers they read are the process clients' own (`testbed/clients/loops.py`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.client import Call, CallEach, Collect, Sleep, Start, Steps
from testbed.sim.loop import Loop
from testbed.sim.network import ReplyHandle, SimNetwork


class ClientTask:
    """Drives one client generator on the loop; an endpoint of the network (it serves none)."""

    #: a client is never paused: what reaches it runs at once
    paused = False

    def __init__(self, name: str, loop: Loop, net: SimNetwork) -> None:
        self.name = name
        self.loop = loop
        self.net = net
        #: the generator runs, and messages reach it: an attribute, read by the network per message
        self.up = True
        self._gen: Steps | None = None
        self._started: list[tuple[Any, Any]] = []  # answers of `Start`ed requests, not yet collected
        self._collecting = 0  # > 0: the generator waits in a Collect (its id)
        self._waits = 0
        #: the `CallEach` under way: its number (answers of an earlier one are ignored), its
        #: answers so far, how many are still to come, its settle time, whether that is running
        self._each = 0
        self._answers: list[Any] = []
        self._unanswered = 0
        self._settle = 0.0
        self._settling = False
        net.attach(self)

    @property
    def done(self) -> bool:
        """The generator ended, or the task was killed."""
        return not self.up

    def deliver(self, fn: Callable[..., None], *args: Any) -> None:
        fn(*args)

    def on_request(self, handle: ReplyHandle, msg: Any) -> None:
        """Clients serve nothing."""

    def run(self, gen: Steps) -> None:
        self._gen = gen
        self.loop.after(0.0, self._resume, None)

    def kill(self) -> None:
        if self.up:
            self.up = False
            if self._gen is not None:
                self._gen.close()

    def _resume(self, value: Any) -> None:
        if not self.up or self._gen is None:
            return
        try:
            cmd = self._gen.send(value)
        except StopIteration:
            self.up = False
            return
        if isinstance(cmd, Call):
            self.net.request(self.name, cmd.endpoint, cmd.msg, cmd.timeout, self._resume, fail_fast=True)
        elif isinstance(cmd, CallEach):
            self._each += 1
            self._answers, self._unanswered = [None] * len(cmd.calls), len(cmd.calls)
            self._settle, self._settling = cmd.settle, False
            if not cmd.calls:
                self.loop.after(0.0, self._each_done, self._each)
            for i, (endpoint, msg) in enumerate(cmd.calls):
                self.net.request(self.name, endpoint, msg, cmd.timeout, self._answered, self._each, i, fail_fast=True)
        elif isinstance(cmd, Sleep):
            self.loop.after(cmd.seconds, self._resume, None)
        elif isinstance(cmd, Start):
            self.net.request(self.name, cmd.endpoint, cmd.msg, cmd.timeout, self._completed, cmd.tag, fail_fast=True)
            self.loop.after(0.0, self._resume, None)
        elif isinstance(cmd, Collect):
            if self._started:
                self.loop.after(0.0, self._collect, None)
            else:
                self._waits += 1
                self._collecting = self._waits
                self.loop.after(cmd.wait, self._collect, self._waits)
        else:
            raise TypeError(f"{self.name}: a client yielded {cmd!r}")

    def _answered(self, each: int, i: int, msg: Any) -> None:
        """One answer (None: none in time) of `CallEach` number `each`."""
        if not self.up or each != self._each:
            return
        self._answers[i] = msg
        self._unanswered -= 1
        if not self._unanswered:
            self._each_done(each)
        elif msg is not None and not self._settling:
            self._settling = True
            self.loop.after(self._settle, self._each_done, each)

    def _each_done(self, each: int) -> None:
        if each != self._each:
            return  # every answer came before the settle time ended, or it is an older CallEach
        self._each += 1  # what still comes of it is ignored
        self._resume(self._answers)

    def _completed(self, tag: Any, msg: Any) -> None:
        if not self.up or tag is None:
            return  # nobody collects an acks=0 send's timeout
        self._started.append((tag, msg))
        if self._collecting:
            self._collecting = 0
            self.loop.after(0.0, self._collect, None)

    def _collect(self, wait: int | None) -> None:
        if wait is not None and wait != self._collecting:
            return  # a completion came first and resumed the generator already
        self._collecting = 0
        got, self._started = self._started, []
        self._resume(got)
