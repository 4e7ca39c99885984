"""The node runtime: one OS process per broker or controller.

`python -m broker.node --config <run>/nodes/<name>.json`

Everything the pure state machines ask for happens here, in their order (disk, then
messages, then events): the event loop, the timers, the ZeroMQ sockets, the logs on disk
and the records of `events.jsonl`. A node dies with its supervisor (PR_SET_PDEATHSIG plus a
parent watchdog), answers only the supervisor's token on its control socket, and never
crashes on a malformed message (the transport answers it with an error and counts it).
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from broker.common.errors import Errors
from broker.common.lifetime import die_with_parent
from broker.noderuntime.broker_io import BrokerIO
from broker.noderuntime.config import NodeConfig
from broker.noderuntime.controller_io import ControllerIO
from broker.noderuntime.eventlog import EventLog
from broker.protocol.messages import ControlRequest, ControlResponse, ErrorResponse
from broker.wire.linkfilter import LinkFilter, LinkTable
from broker.wire.transport import Expired, Request, Response, Transport

log = logging.getLogger("isrlab.node")


class Node:
    """The event loop shared by both roles; the role object does the role's I/O."""

    TICK = 0.005

    def __init__(self, cfg: NodeConfig) -> None:
        self.cfg = cfg
        self.events = EventLog(cfg.run_dir / "events.jsonl", cfg.name)
        self.link_filter = LinkFilter()
        self.transport = Transport(cfg.name, bind=cfg.endpoint, link_filter=self.link_filter)
        self.control = Transport(f"{cfg.name}/control", bind=cfg.control_endpoint)
        self.correlations: dict[int, Any] = {}
        self.role: BrokerIO | ControllerIO
        if cfg.kind == "broker":
            self.role = BrokerIO(cfg, self)
        else:
            self.role = ControllerIO(cfg, self)
        self.exit_code: int | None = None

    # ---------------------------------------------------------------- sending
    def send(self, destination: Any, message: Any, correlation: Any, timeout_ms: int | None) -> None:
        name = self.cfg.peer_name(destination)
        endpoint = self.cfg.peers.get(name) if name else None
        timeout = (timeout_ms or 2000) / 1000.0
        if endpoint is None:
            # An unknown destination is a timeout the state machine already handles.
            self.role.on_response(correlation, None, time.monotonic())
            return
        rid = self.transport.request(endpoint, message, timeout, time.monotonic(), dest_name=name)
        self.correlations[rid] = correlation

    def reply(self, handle: Any, message: Any) -> None:
        self.transport.reply(handle, message)

    # ---------------------------------------------------------------- loop
    def run(self) -> int:
        next_tick = 0.0
        while self.exit_code is None:
            now = time.monotonic()
            if now >= next_tick:
                self.role.tick(now)
                next_tick = now + self.TICK
            deadline = next_tick
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
            self.role.on_request(item.handle, item.msg, now)
        elif isinstance(item, Response):
            corr = self.correlations.pop(item.request_id, None)
            if corr is not None:
                self.role.on_response(corr, item.msg, now)
        elif isinstance(item, Expired):
            corr = self.correlations.pop(item.request_id, None)
            if corr is not None:
                self.role.on_response(corr, None, now)

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
            body["pid"] = os.getpid()
            return body
        if op == "links":
            table = LinkTable.from_dict(args["table"])
            return {"applied": self.link_filter.update(table)}
        if op == "shutdown":
            self.role.begin_shutdown(time.monotonic())
            return {"accepted": True}
        raise ValueError(f"unknown control op {op!r}")

    def finish(self, code: int) -> None:
        self.exit_code = code

    def close(self) -> None:
        self.role.close()
        self.transport.close()
        self.control.close()
        self.events.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m broker.node")
    ap.add_argument("--config", required=True, type=Path)
    args = ap.parse_args(argv)
    cfg = NodeConfig.load(args.config)
    die_with_parent(cfg.supervisor_pid)
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr,
        format=f"%(asctime)s {cfg.name} %(levelname)s %(message)s")
    node = Node(cfg)
    signal.signal(signal.SIGTERM, lambda *_: node.finish(0))
    try:
        return node.run()
    except Exception:  # the log must say why a node died; the supervisor sees the exit code
        log.error("node crashed:\n%s", traceback.format_exc())
        return 70


if __name__ == "__main__":
    sys.exit(main())
