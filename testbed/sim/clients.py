"""The workload's clients on virtual time: `ClientTask` carries out a client loop's steps
(`broker.client`: Call, Start, Collect, Sleep) on the loop and the simulated network, as
`ClusterClient.run` carries them out over ZeroMQ. The loops themselves, the requests they
build and the answers they read are the process clients' own (`testbed/clients/loops.py`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from broker.client import Call, Collect, Sleep, Start, Steps
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
