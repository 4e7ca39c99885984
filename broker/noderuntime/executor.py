"""The one order in which a node carries out what its role returns, for every executor.

A node process (`broker/node.py`) and the deterministic simulation (`testbed/sim/`) differ
in their clock, their network and their disk's medium, never in this order: make durable
(the role's `persist`), then send, then record the events, then stop if asked. What a disk
operation triggers (a metadata commit) is carried out next, in the same order, never from
inside another. Keeping it in one place is what lets a simulated seed stand for a real run.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from broker.protocol.outputs import Outputs, Send


class Role(Protocol):
    """What an executor needs of a role: inputs in, `Outputs` back, and the I/O it delegates."""

    def start(self, now: float) -> Outputs: ...
    def tick(self, now: float) -> Outputs: ...
    def next_tick_at(self, now: float) -> float:
        """When `tick` next has something to do (a tick before then changes nothing):
        -inf for the next tick, inf for none until an input."""
    def on_request(self, handle: Any, msg: Any, now: float) -> Outputs: ...
    def on_response(self, correlation: Any, msg: Any, now: float) -> Outputs: ...
    def begin_shutdown(self, now: float) -> Outputs: ...
    def persist(self, op: Any, now: float) -> Outputs | None:
        """Carry out one disk operation; what it triggers (None: nothing)."""
    def body(self, message: Any) -> Any: ...
    def status(self) -> dict: ...
    def close(self) -> None: ...
    def endpoint_of(self, broker_id: int) -> str | None: ...


class Effects(Protocol):
    """How one executor sends, answers, records and stops."""

    def send(self, m: Send) -> None: ...
    def reply(self, ctx: Any, body: Any) -> None: ...
    def record(self, kind: str, fields: dict) -> None: ...
    def stop(self, code: int) -> None: ...


def carry_out(out: Outputs, role: Role, now_fn: Callable[[], float], effects: Effects) -> None:
    """Carry out `out` (disk, then send, then record, then stop), then what it triggered."""
    pending = [out]
    for out in pending:  # what a disk operation triggers joins the end of the list, in turn
        if out.disk:  # (the clock is read for the disk alone, which most outputs leave alone)
            now = now_fn()
            for op in out.disk:
                triggered = role.persist(op, now)
                if triggered:
                    pending.append(triggered)
        for m in out.messages:
            if isinstance(m, Send):
                effects.send(m)
            else:
                effects.reply(m.ctx, role.body(m.message))
        for ev in out.events:
            effects.record(ev.kind, ev.fields)
        if out.stop is not None:
            effects.stop(out.stop)
