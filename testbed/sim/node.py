"""One simulated node: a broker or controller role driven on virtual time.

It is to the simulation what `broker/node.py` is to a process: the role's single executor,
carrying out every `Outputs` in the one order of `broker/noderuntime/executor.py`, ticking
on a `Node.TICK` grid, failing a request to a peer it cannot name on the next turn. What a
signal does to a process is done to this object: a kill drops the role where it stands
(its files keep what was written, as the page cache would), a pause holds every delivery
and tick until the resume, a restart builds a new role from the files once the process
would have started (`BOOT`).

Ticks fall where a process's would (`tickgrid.py`). Only the ticks the role says would
change nothing (before its `next_tick_at`) are left out: after each input and each tick the
node asks the role when it next needs one and schedules the first grid point from then, so
an idle cluster costs events only when something is due.
"""
from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

from broker.node import DEFAULT_REQUEST_TIMEOUT, Node
from broker.noderuntime.broker_role import BrokerRole
from broker.noderuntime.config import NodeConfig
from broker.noderuntime.controller_role import ControllerRole
from broker.noderuntime.eventlog import EventLog
from broker.noderuntime.executor import Role, carry_out
from broker.protocol.outputs import Outputs, Send
from testbed.sim.loop import Loop
from testbed.sim.network import ReplyHandle, SimNetwork
from testbed.sim.tickgrid import TickGrid


#: How long a node started during a run (a restart, an added broker) takes to come up, in
#: virtual seconds: a process's interpreter, imports and log recovery before its role sends
#: or answers anything, drawn per start from the node's own seeded rng. A broker process
#: restarted on the idle 2-core machine registered 0.21-0.27 s after its restart, on a
#: tester's loaded one 0.6 s; the sim's, up at once, 0.01 s. Up at once, the sim's restarted
#: brokers all answered proactive unclean recovery's first round (R32) and it elected the
#: broker with the whole log, where processes elected the first one back, with the least.
BOOT = (0.2, 0.6)


class SimNode:
    def __init__(self, cfg: NodeConfig, loop: Loop, net: SimNetwork, events: EventLog, rng: random.Random,
                 boot_rng: random.Random) -> None:
        self.name = cfg.name
        self.cfg = cfg
        self.loop = loop
        self.net = net
        self.events = events
        self.rng = rng  # incarnation ids
        self.role: Role | None = None
        #: the process runs (its role exists): kept with `role` by `start` and `kill`, an
        #: attribute and not a property since the network reads it twice per message
        self.up = False
        #: started and not up yet: the process is starting (`BOOT`)
        self.booting = False
        self._boot_rng = boot_rng  # its own: the draws of `rng` stay those of a run without restarts
        self._boot_token = 0
        self._boot_at_resume = False  # the start fell due while the process was paused
        self.incarnation = 0
        self.paused = False
        self.exit_code: int | None = None
        self._held: list[tuple[Callable[..., None], tuple]] = []
        self._grid = TickGrid(0.0, Node.TICK)
        self._tick_at = math.inf  # when the scheduled tick falls (inf: none)
        self._tick_token = 0  # tells the scheduled tick from ones scheduled before it
        #: what the role's `next_tick_at` said since its last input (None: not asked since); the
        #: role's answer changes only with an input, so a tick needs not ask it again
        self._told: float | None = None
        self._paused_at = 0.0
        #: `cfg.peer_name` of each destination sent to: the configuration's, so fixed
        self._peer_names: dict[Any, str | None] = {}

    @property
    def started(self) -> bool:
        """The process exists: up, or starting (`BOOT`), as a live pid is on processes."""
        return self.up or self.booting

    # ------------------------------------------------------------------ lifecycle (the signals)
    def start(self, boot: bool = False) -> None:
        """Start (or restart) from the node's files: a new incarnation, up at once, or with
        `boot` once the process would have started (`BOOT`)."""
        self.incarnation += 1
        self.exit_code = None
        self.paused = False
        self._held.clear()
        if boot:
            self.booting = True
            self._boot_token += 1
            self.loop.after(self._boot_rng.uniform(*BOOT), self._booted, self._boot_token)
            return
        self._up()

    def _booted(self, token: int) -> None:
        if token != self._boot_token:
            return  # killed while it started
        if self.paused:  # SIGSTOP held the start: it goes on at the resume
            self._boot_at_resume = True
            return
        self._up()

    def _up(self) -> None:
        self.booting = self._boot_at_resume = False
        self.net.attach(self)
        self.net.came_up(self.name)
        if self.cfg.kind == "broker":
            self.role = BrokerRole(self.cfg, clock=self.loop.clock, incarnation_id=f"{self.rng.getrandbits(64):016x}")
        else:
            self.role = ControllerRole(self.cfg)
        self.up = True
        self._grid = TickGrid(self.loop.now, Node.TICK)
        self._cancel_tick()
        self.execute(self.role.start(self.loop.now))

    def kill(self) -> None:
        """SIGKILL: the role is gone; what it wrote stays in its files."""
        if self.role is not None:
            self.role.close()
        self.role = None
        self.up = False
        self.booting = self._boot_at_resume = False
        self._boot_token += 1
        self.paused = False
        self._held.clear()
        self._cancel_tick()
        self.net.went_down(self.name)

    def pause(self) -> None:
        if not self.paused:
            self.paused = True
            self._paused_at = self.loop.now

    def resume(self) -> None:
        """SIGCONT: what arrived meanwhile is handled in order, then the loop ticks again:
        at once if a tick fell due during the pause, as a process's loop finds its next
        tick overdue, and every TICK from there."""
        self.paused = False
        if self._boot_at_resume:
            self._up()
            return
        missed = self._grid.has_point_in(self._paused_at, self.loop.now)
        held, self._held = self._held, []
        for fn, args in held:
            if self.role is None or self.paused:
                return
            fn(*args)
        if missed and self.role is not None and not self.paused:
            self._cancel_tick()  # the grid starts again from here
            self._run_tick(self.loop.now)
        else:
            self._schedule_tick()

    def begin_shutdown(self) -> None:
        if self.role is not None:
            self.execute(self.role.begin_shutdown(self.loop.now))

    # ------------------------------------------------------------------ inputs
    def deliver(self, fn: Callable[..., None], *args: Any) -> None:
        if self.paused:
            self._held.append((fn, args))
        else:
            fn(*args)

    def _schedule_tick(self) -> None:
        """Schedule the first grid point at or after the role's `next_tick_at`, unless a
        tick is scheduled earlier already (one that falls too early finds nothing due and
        schedules again)."""
        role = self.role
        if role is None or self.paused:
            return  # a paused node is scheduled again by its resume
        now = self.loop.now
        # the scheduled tick falls on the first grid point from now: nothing can be due sooner,
        # so the role need not be asked (a quarter of the asks in a quickstart seed)
        if self._tick_at == self._grid.first_point(now):
            return
        due = self._told = role.next_tick_at(now)
        self._schedule_tick_for(due, now)

    def _schedule_tick_for(self, due: float, now: float) -> None:
        """Schedule the first grid point at or after `due`, the role's `next_tick_at(now)`."""
        if due == math.inf:
            return
        at = self._grid.point_from(due, now)
        if at < self._tick_at:
            self._tick_at = at
            self._tick_token += 1
            self.loop.at(at, self._tick, self._tick_token)

    def _cancel_tick(self) -> None:
        self._tick_at = math.inf
        self._tick_token += 1

    def _tick(self, token: int) -> None:
        if token != self._tick_token:
            return  # rescheduled or cancelled
        self._tick_at = math.inf
        if not self.paused:  # else the resume ticks
            self._run_tick(self.loop.now)

    def _run_tick(self, now: float) -> None:
        """A tick of the grid at `now`: the role's, if anything is due; the next from here."""
        assert self.role is not None
        self._grid.ticked(now)
        due = self._told if self._told is not None else self.role.next_tick_at(now)
        if due <= now:
            self.execute(self.role.tick(now))
        else:  # nothing due after all: the next tick from here, without asking the role again
            self._schedule_tick_for(due, now)

    def on_request(self, handle: ReplyHandle, msg: Any) -> None:
        if self.role is not None:
            self.execute(self.role.on_request(handle, msg, self.loop.now))

    def _on_answer(self, incarnation: int, correlation: Any, msg: Any) -> None:
        if self.role is not None and incarnation == self.incarnation:
            self.execute(self.role.on_response(correlation, msg, self.loop.now))

    # ------------------------------------------------------------------ the executor's effects
    def execute(self, out: Outputs) -> None:
        """Carry out `out`, then schedule the tick the role's new state needs."""
        self._told = None  # (every input to the role ends here, its disk operations with it)
        if self.role is not None:
            carry_out(out, self.role, self.loop.clock, self)
            self._schedule_tick()

    def send(self, m: Send) -> None:
        assert self.role is not None
        try:
            name = self._peer_names[m.destination]
        except KeyError:
            name = self._peer_names[m.destination] = self.cfg.peer_name(m.destination)
        if name is None and isinstance(m.destination, int):  # a broker that joined later (R38)
            name = self.role.endpoint_of(m.destination)
        incarnation = self.incarnation
        if name is None:  # nowhere to go: fails on the next turn, as in a node process
            self.loop.after(0.0, self.deliver, self._on_answer, incarnation, m.correlation, None)
            return
        timeout = (m.timeout_ms / 1000.0) if m.timeout_ms else DEFAULT_REQUEST_TIMEOUT
        self.net.request(self.name, name, m.message, timeout, self._on_answer, incarnation, m.correlation)

    def reply(self, ctx: Any, body: Any) -> None:
        self.net.reply(self.name, ctx, body)

    def record(self, kind: str, fields: dict) -> None:
        self.events.record(kind, fields)

    def stop(self, code: int) -> None:
        """The role finished a controlled shutdown: the process exits."""
        if self.exit_code is None:
            self.exit_code = code
            self.loop.after(0.0, self._exit, self.incarnation)

    def _exit(self, incarnation: int) -> None:
        if incarnation == self.incarnation and self.role is not None:
            self.kill()  # what is left of a process that exited: its files

    def status(self) -> dict | None:
        """The control socket's `status` body; None for a node that is down or paused."""
        if self.role is None or self.paused:
            return None
        body = self.role.status()
        f = self.net.filters.get(self.name)
        body["links"] = {f"{s}->{d}": c for (s, d), c in f.counters().items()} if f is not None else {}
        body["link_seq"] = f.table.seq if f is not None else -1
        return body
