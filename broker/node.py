"""The node runtime: one OS process per broker or controller, and its one loop.

`python -m broker.node --config <run>/nodes/<name>.json`

The loop is the node's single executor. It feeds the role (a pure state machine behind a
thin adapter, `broker/noderuntime/`) its inputs: ticks, requests, responses, timeouts and
the supervisor's control requests. It wakes every `TICK` (the control socket is read then)
and ticks the role when the role's `next_tick_at` has come, so a tick with nothing to do
costs the node no work. Every `Outputs` that comes back is carried out here and
nowhere else, in the order `broker/noderuntime/executor.py` keeps for every executor (the
simulation's too): make durable, then send, then record, then stop. A request to a peer
that has no address fails on the next turn of the loop, as a timeout would.

A node dies with its supervisor (PR_SET_PDEATHSIG plus a parent watchdog), answers only the
supervisor's token on its control socket, and never crashes on a malformed message (the
transport answers it with an error and counts it).
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from broker.common import netns
from broker.common.errors import Errors
from broker.common.lifetime import die_with_parent
from broker.noderuntime.broker_role import BrokerRole
from broker.noderuntime.config import NodeConfig
from broker.noderuntime.controller_role import ControllerRole
from broker.noderuntime.eventlog import EventLog
from broker.noderuntime.executor import Role, carry_out
from broker.protocol.messages import ControlRequest, ControlResponse, ErrorResponse
from broker.protocol.outputs import Outputs, Send
from broker.wire.linkfilter import LinkFilter, LinkTable
from broker.wire.transport import Expired, Request, Response, Transport

log = logging.getLogger("isrlab.node")
#: the request timeout of a Send that names none
DEFAULT_REQUEST_TIMEOUT = 2.0


class Node:
    TICK = 0.005

    def __init__(self, cfg: NodeConfig, links: LinkTable | None = None) -> None:
        self.cfg = cfg
        self.events = EventLog(cfg.run_dir / "events.jsonl", cfg.name)
        self.link_filter = LinkFilter(links)
        self.transport = Transport(cfg.name, bind=cfg.endpoint, link_filter=self.link_filter,
                                   also_bind=cfg.local_endpoint)
        self.control = Transport(f"{cfg.name}/control", bind=cfg.control_endpoint)
        self.role: Role = BrokerRole(cfg) if cfg.kind == "broker" else ControllerRole(cfg)
        #: request id -> the correlation the role gave its Send
        self.correlations: dict[int, Any] = {}
        #: correlations of Sends that had nowhere to go: failed on the next turn
        self.undeliverable: list[Any] = []
        self.exit_code: int | None = None

    # ---------------------------------------------------------------- the executor
    def execute(self, out: Outputs) -> None:
        carry_out(out, self.role, time.monotonic, self)

    def reply(self, ctx: Any, body: Any) -> None:
        self.transport.reply(ctx, body)

    def record(self, kind: str, fields: dict) -> None:
        self.events.record(kind, fields)

    def stop(self, code: int) -> None:
        if self.exit_code is None:
            self.exit_code = code

    def send(self, m: Send) -> None:
        name = self.cfg.peer_name(m.destination)
        endpoint = self.cfg.peers.get(name) if name else None
        if endpoint is None and isinstance(m.destination, int):  # a broker that joined later (R38)
            endpoint = self.role.endpoint_of(m.destination)
        if endpoint is None:
            self.undeliverable.append(m.correlation)
            return
        timeout = (m.timeout_ms / 1000.0) if m.timeout_ms else DEFAULT_REQUEST_TIMEOUT
        rid = self.transport.request(endpoint, m.message, timeout, time.monotonic(), dest_name=name)
        self.correlations[rid] = m.correlation

    # ---------------------------------------------------------------- the loop
    def run(self) -> int:
        self.execute(self.role.start(time.monotonic()))
        next_tick = 0.0
        while self.exit_code is None:
            now = time.monotonic()
            if self.undeliverable:
                failed, self.undeliverable = self.undeliverable, []
                for correlation in failed:
                    self.execute(self.role.on_response(correlation, None, now))
            if now >= next_tick:
                if self.role.next_tick_at(now) <= now:  # else the tick would have nothing to do
                    self.execute(self.role.tick(now))
                next_tick = now + self.TICK
            deadline = now if self.undeliverable else next_tick
            nd = self.transport.next_deadline()
            if nd is not None:
                deadline = min(deadline, nd)
            for item in self.transport.poll(max(0.0, deadline - time.monotonic()), time.monotonic):
                self._dispatch(item)
            for item in self.control.poll(0.0, time.monotonic):
                if isinstance(item, Request):
                    self._on_control(item)
            if self.cfg.supervisor_pid and os.getppid() != self.cfg.supervisor_pid:
                log.error("supervisor %d is gone; exiting", self.cfg.supervisor_pid)
                self.exit_code = 3
        self.close()
        return self.exit_code

    def _dispatch(self, item: Any) -> None:
        now = time.monotonic()
        if isinstance(item, Request):
            self.execute(self.role.on_request(item.handle, item.msg, now))
        elif isinstance(item, (Response, Expired)):
            correlation = self.correlations.pop(item.request_id, None)
            if correlation is not None:
                msg = item.msg if isinstance(item, Response) else None
                self.execute(self.role.on_response(correlation, msg, now))

    # ---------------------------------------------------------------- the supervisor's control socket
    def _on_control(self, item: Request) -> None:
        msg = item.msg
        if not isinstance(msg, ControlRequest) or msg.token != self.cfg.token:
            self.control.reply(item.handle, ErrorResponse(Errors.UNAUTHORIZED, "bad control token"))
            return
        try:
            body = self._control_op(msg.op, msg.args)
            self.control.reply(item.handle, ControlResponse(Errors.NONE, body))
        except (KeyError, ValueError, TypeError) as e:
            self.control.reply(item.handle, ControlResponse(Errors.INVALID_REQUEST, {"message": str(e)}))

    def _control_op(self, op: str, args: dict) -> dict:
        if op == "status":
            body = self.role.status()
            body["transport"] = self.transport.counters()
            body["links"] = {f"{src}->{dst}": c for (src, dst), c in self.link_filter.counters().items()}
            body["link_seq"] = self.link_filter.table.seq  # the link table it holds (-1: none yet)
            body["pid"] = os.getpid()
            return body
        if op == "links":
            table = LinkTable.from_dict(args["table"])
            return {"applied": self.link_filter.update(table)}
        if op == "shutdown":
            self.execute(self.role.begin_shutdown(time.monotonic()))
            return {"accepted": True}
        raise ValueError(f"unknown control op {op!r}")

    def finish(self, code: int) -> None:
        """SIGTERM: leave the loop at its next turn."""
        self.exit_code = code

    def close(self) -> None:
        self.role.close()
        self.transport.close()
        self.control.close()
        self.events.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m broker.node")
    ap.add_argument("--config", required=True, type=Path)
    ap.add_argument("--links", type=Path, help="the link table to start with (a rule is in force)")
    args = ap.parse_args(argv)
    cfg = NodeConfig.load(args.config)
    links = LinkTable.from_dict(json.loads(args.links.read_text())) if args.links is not None else None
    die_with_parent(cfg.supervisor_pid)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format=f"%(asctime)s {cfg.name} %(levelname)s %(message)s")
    if cfg.netns is not None:
        try:
            netns.enter(cfg.netns)
        except OSError as e:
            log.error("cannot join network namespace %s: %s", cfg.netns, e)
            return 71
    node = Node(cfg, links)
    signal.signal(signal.SIGTERM, lambda *_: node.finish(0))
    try:
        return node.run()
    except Exception:  # the log must say why a node died; the supervisor sees the exit code
        log.error("node crashed:\n%s", traceback.format_exc())
        return 70


if __name__ == "__main__":
    sys.exit(main())
