"""Request/response messaging over ZeroMQ for nodes and clients (DESIGN section 2).

A node binds one ROUTER at its endpoint; it reaches each peer endpoint through one DEALER
whose identity is the node's name (created on first use). Requests carry an id unique per
transport and a deadline; responses carry the id back. Nothing waits on a dead peer:
DEALERs use ZMQ_IMMEDIATE, so a message to a peer that is not connected is held here
(not queued inside ZeroMQ) and retried when the connection comes up, until its deadline;
every send is non-blocking; a request whose deadline passes comes out of `poll` as
`Expired`, and a response that arrives after that is dropped and counted.

A client's transport (`fail_fast`) also watches each DEALER's connection, as a Kafka
client does its TCP connections: when a peer it was connected to goes away (its process
died, the ipc or TCP connection closed), the requests it left unanswered come out as
`Expired` at once instead of at their deadlines, and so does every request to it until
the connection is back. A paused or cut-off peer keeps its connection: its requests wait
for their deadlines, as before. Nodes do not fail fast: their requests' timing is part
of the protocol under test.

The transport owns no clock: `request` takes `now`, `poll` takes the clock function,
so a node drives it from its own event loop. Every message in and out goes through the
`LinkFilter` (the userspace network faults of DESIGN section 5): the sender applies
drop, loss, delay and duplication, the receiver applies drop.

Malformed input never escapes as an exception: a request that cannot be decoded is
answered with ErrorResponse(INVALID_REQUEST) when its request id is readable, and every
malformed message is counted (`counters()["malformed"]`).
"""
from __future__ import annotations

import heapq
import itertools
import os
import random
import struct
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable

import zmq

from broker.common.errors import Errors
from broker.protocol.messages import ErrorResponse
from broker.wire.codec import DecodeError, decode, encode
from broker.wire.linkfilter import LinkFilter, Verdict

#: Messages a socket may queue per peer before sends fail with EAGAIN: a deep enough
#: pipeline for replication, small enough that a stuck peer cannot eat the memory.
HWM = 10_000
#: At most this many messages are read from one socket per `poll`, so a flooding peer
#: cannot keep `poll` from returning (what is left is read by the next call).
MAX_DRAIN = 4096
#: How often a DEALER retries the connection to a peer that is down.
RECONNECT_IVL_MS = 50
RECONNECT_IVL_MAX_MS = 500

_IPC = "ipc://"
# Plain ints: the enum forms cost an enum operation on every `&` and `|` of the hot path.
_POLLIN, _POLLOUT = int(zmq.POLLIN), int(zmq.POLLOUT)
_NOBLOCK, _SNDMORE, _RCVMORE, _EVENTS = int(zmq.NOBLOCK), int(zmq.SNDMORE), int(zmq.RCVMORE), int(zmq.EVENTS)
_CONNECTED, _DISCONNECTED = int(zmq.EVENT_CONNECTED), int(zmq.EVENT_DISCONNECTED)
# A monitor event's first frame: its 16-bit id and 32-bit value (libzmq's zmq_socket_monitor).
# Read here, not by zmq.utils.monitor, whose import pulls in asyncio and ssl: about 55 ms
# of `python -X importtime` in every node and client process.
_EVENT_ID = struct.Struct("=H")


@dataclass(slots=True)
class ReplyHandle:
    """Where the answer to one received request goes."""
    identity: bytes  # the requester's ROUTER identity (its name)
    request_id: int
    source: str


@dataclass(slots=True)
class Request:
    handle: ReplyHandle
    source: str
    msg: Any


@dataclass(slots=True)
class Response:
    request_id: int
    msg: Any


@dataclass(slots=True)
class Expired:
    request_id: int


Incoming = Request | Response | Expired


class Transport:
    """One ROUTER (when `bind` is given) plus one DEALER per peer endpoint."""

    def __init__(self, name: str, bind: str | None = None, link_filter: LinkFilter | None = None,
                 context: zmq.Context | None = None, also_bind: str | None = None, fail_fast: bool = False) -> None:
        self.name = name
        self.fail_fast = fail_fast
        self.link_filter = link_filter
        self.endpoint: str | None = None
        #: a second endpoint of the same ROUTER (the supervisor's ipc way in, when the node
        #: talks TCP inside a network namespace): one socket, one identity table, one loop
        self.also_endpoint: str | None = None
        self._identity = name.encode()
        self._ctx = context if context is not None else zmq.Context.instance()
        #: Seeded from the name: a node's loss/jitter draws repeat from run to run.
        self._rng = random.Random(f"isrlab-link:{name}")
        self._ids = itertools.count(1)
        self._pending: dict[int, float] = {}  # request id -> deadline
        self._deadlines: list[tuple[float, int]] = []  # heap; entries of answered ids linger
        self._delayed: list[tuple[float, int, zmq.Socket, list, int]] = []  # heap of held sends
        self._delay_seq = itertools.count()
        self._dealers: dict[str, zmq.Socket] = {}
        self._backlog: dict[zmq.Socket, deque[tuple[int, list]]] = {}  # unsent for want of a peer
        # fail_fast only: each DEALER's connection monitor, the DEALERs whose peer went away
        # and has not come back, and the DEALER each unanswered request went out on
        self._monitors: dict[zmq.Socket, zmq.Socket] = {}  # monitor -> its DEALER
        self._lost: set[zmq.Socket] = set()
        self._via: dict[int, zmq.Socket] = {}
        self._now_fn: Callable[[], float] | None = None
        self._counts = dict.fromkeys(
            ("sent", "received", "malformed", "late", "expired", "filtered", "send_failed", "peer_lost"), 0)
        self._poller = zmq.Poller()
        self._router: zmq.Socket | None = None
        if bind is not None:
            self._router = self._bind(bind, also_bind)
            self._poller.register(self._router, _POLLIN)

    def _bind(self, bind: str, also_bind: str | None) -> zmq.Socket:
        router = self._ctx.socket(zmq.ROUTER)
        router.setsockopt(zmq.LINGER, 0)
        router.setsockopt(zmq.SNDHWM, HWM)
        router.setsockopt(zmq.RCVHWM, HWM)
        # Replies to a peer that is gone fail loudly (EHOSTUNREACH, counted) instead of
        # vanishing; a restarted peer reusing its name takes its identity over.
        router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        router.setsockopt(zmq.ROUTER_HANDOVER, 1)
        try:
            router.bind(bind)
            self.endpoint = router.getsockopt_string(zmq.LAST_ENDPOINT)
            if also_bind is not None:
                router.bind(also_bind)
                self.also_endpoint = router.getsockopt_string(zmq.LAST_ENDPOINT)
        except zmq.ZMQError:
            router.close(linger=0)
            raise
        return router

    # ------------------------------------------------------------------ sending
    def request(self, endpoint: str, msg: Any, timeout: float, now: float,
                dest_name: str | None = None) -> int:
        """Send `msg` to `endpoint`; its answer (or Expired) comes out of `poll` under the id returned."""
        request_id = next(self._ids)
        deadline = now + timeout
        self._pending[request_id] = deadline
        heapq.heappush(self._deadlines, (deadline, request_id))
        dealer = self._dealers.get(endpoint)
        if dealer is None:
            dealer = self._connect(endpoint)
        if self.fail_fast:
            if dealer in self._lost:  # the peer went away: the next `poll` says so, nothing is sent
                self._pending[request_id] = now
                heapq.heappush(self._deadlines, (now, request_id))
                return request_id
            self._via[request_id] = dealer
        frames = encode(msg, request_id, self.name)
        if self.link_filter is not None and dest_name is not None:
            verdict = self.link_filter.decide(self.name, dest_name, self._rng)
            if verdict.copies != 1 or verdict.delay:
                self._apply(verdict, dealer, frames, request_id, now)
                return request_id
        self._send_request(dealer, frames, request_id)
        return request_id

    def reply(self, handle: ReplyHandle, msg: Any) -> None:
        """Answer a request that `poll` returned."""
        if self._router is None:
            raise RuntimeError(f"transport {self.name} has no ROUTER: it cannot receive requests")
        frames = encode(msg, handle.request_id, self.name)
        frames.insert(0, handle.identity)
        if self.link_filter is not None:
            verdict = self.link_filter.decide(self.name, handle.source, self._rng)
            if verdict.copies != 1 or verdict.delay:
                now = self._now_fn() if verdict.delay else 0.0
                self._apply(verdict, self._router, frames, 0, now)
                return
        self._send_reply(frames)

    def _apply(self, verdict: Verdict, sock: zmq.Socket, frames: list, request_id: int, now: float) -> None:
        """Carry out a filter verdict other than plain delivery: drop, hold, or copy."""
        if verdict.copies == 0:
            self._counts["filtered"] += 1
            return
        for _ in range(verdict.copies):
            if verdict.delay:
                heapq.heappush(self._delayed,
                               (now + verdict.delay, next(self._delay_seq), sock, frames, request_id))
            else:
                self._send(sock, frames, request_id)

    def _send(self, sock: zmq.Socket, frames: list, request_id: int) -> None:
        """A reply if `sock` is the ROUTER, else a request on that DEALER."""
        if sock is self._router:
            self._send_reply(frames)
        else:
            self._send_request(sock, frames, request_id)

    def _send_request(self, dealer: zmq.Socket, frames: list, request_id: int) -> None:
        backlog = self._backlog.get(dealer)
        if backlog:  # keep the order: this one goes after those already waiting
            backlog.append((request_id, frames))
            return
        try:
            _send_frames(dealer, frames)
        except zmq.Again:  # no connection to the peer (yet), or its queue is full
            self._hold(dealer, request_id, frames)
            return
        self._counts["sent"] += 1

    def _send_reply(self, frames: list) -> None:
        try:
            _send_frames(self._router, frames)
        except zmq.ZMQError:  # EAGAIN (peer's queue full) or EHOSTUNREACH (peer gone)
            self._counts["send_failed"] += 1  # the requester will time out
            return
        self._counts["sent"] += 1

    def _hold(self, dealer: zmq.Socket, request_id: int, frames: list) -> None:
        self._backlog[dealer] = deque([(request_id, frames)])
        self._poller.modify(dealer, _POLLIN | _POLLOUT)

    def _connect(self, endpoint: str) -> zmq.Socket:
        dealer = self._ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.IDENTITY, self._identity)
        dealer.setsockopt(zmq.LINGER, 0)
        dealer.setsockopt(zmq.SNDHWM, HWM)
        dealer.setsockopt(zmq.RCVHWM, HWM)
        dealer.setsockopt(zmq.IMMEDIATE, 1)
        dealer.setsockopt(zmq.RECONNECT_IVL, RECONNECT_IVL_MS)
        dealer.setsockopt(zmq.RECONNECT_IVL_MAX, RECONNECT_IVL_MAX_MS)
        if self.fail_fast:
            monitor = dealer.get_monitor_socket(_CONNECTED | _DISCONNECTED)
            self._monitors[monitor] = dealer
            self._poller.register(monitor, _POLLIN)
        dealer.connect(endpoint)
        self._dealers[endpoint] = dealer
        self._poller.register(dealer, _POLLIN)
        return dealer

    def _flush_backlog(self, dealer: zmq.Socket) -> None:
        backlog = self._backlog[dealer]
        pending = self._pending
        while backlog:
            request_id, frames = backlog[0]
            if request_id not in pending:  # expired while waiting: never send it
                backlog.popleft()
                continue
            try:
                _send_frames(dealer, frames)
            except zmq.Again:
                return
            backlog.popleft()
            self._counts["sent"] += 1
        del self._backlog[dealer]
        self._poller.modify(dealer, _POLLIN)

    # ------------------------------------------------------------------ receiving
    def poll(self, timeout: float, now_fn: Callable[[], float]) -> list[Incoming]:
        """Wait up to `timeout` s (less if a deadline or held send falls due) and return all that arrived."""
        self._now_fn = now_fn
        now = now_fn()
        due = self.next_deadline()
        if due is not None:
            timeout = min(timeout, max(0.0, due - now))
        out: list[Incoming] = []
        events = self._poller.poll(max(0, int(timeout * 1000 + 0.999)) if timeout > 0 else 0)
        for sock, flags in events:
            if flags & _POLLIN:
                if sock is self._router:
                    self._drain_router(out)
                elif sock in self._monitors:
                    self._connection_events(sock, out)
                else:
                    self._drain_dealer(sock, out)
            if flags & _POLLOUT and sock in self._backlog:
                self._flush_backlog(sock)
        now = now_fn()
        if self._delayed and self._delayed[0][0] <= now:
            self._send_due(now)
        if self._deadlines and self._deadlines[0][0] <= now:
            self._expire(now, out)
        return out

    def _drain_router(self, out: list[Incoming]) -> None:
        router = self._router
        for _ in range(MAX_DRAIN):
            frames = _recv(router, 2)
            if frames is None:
                return
            self._counts["received"] += 1
            if len(frames) < 2:
                self._counts["malformed"] += 1  # an identity and nothing else: no one to answer
                continue
            identity = frames[0]
            decoded = decode(frames[1:])
            if type(decoded) is DecodeError:
                self._malformed_request(identity, decoded)
                continue
            source = decoded.source
            if self.link_filter is not None and not self.link_filter.admits(source, self.name):
                self._counts["filtered"] += 1
                continue
            out.append(Request(ReplyHandle(identity, decoded.request_id, source), source, decoded.msg))

    def _malformed_request(self, identity: bytes, error: DecodeError) -> None:
        self._counts["malformed"] += 1
        if error.request_id is None:
            return
        handle = ReplyHandle(identity, error.request_id, error.source or "")
        if error.source is not None and self.link_filter is not None \
                and not self.link_filter.admits(error.source, self.name):
            self._counts["filtered"] += 1
            return
        self.reply(handle, ErrorResponse(Errors.INVALID_REQUEST, error.reason))

    def _drain_dealer(self, dealer: zmq.Socket, out: list[Incoming]) -> None:
        pending = self._pending
        for _ in range(MAX_DRAIN):
            frames = _recv(dealer, 1)
            if frames is None:
                return
            self._counts["received"] += 1
            decoded = decode(frames)
            if type(decoded) is DecodeError:
                self._counts["malformed"] += 1  # a response we cannot read: its request times out
                continue
            if self.link_filter is not None and not self.link_filter.admits(decoded.source, self.name):
                self._counts["filtered"] += 1
                continue
            if pending.pop(decoded.request_id, None) is None:
                self._counts["late"] += 1  # expired already, or a duplicate of one answered
                continue
            if self._via:
                self._via.pop(decoded.request_id, None)
            out.append(Response(decoded.request_id, decoded.msg))

    def _connection_events(self, monitor: zmq.Socket, out: list[Incoming]) -> None:
        """A DEALER's connection came up or went away (`fail_fast`). When it went away, the
        answers that arrived before are read first; the requests still unanswered on it, held
        ones included, then expire at once: their peer cannot answer them any more."""
        dealer = self._monitors[monitor]
        while monitor.getsockopt(_EVENTS) & _POLLIN:
            event = _EVENT_ID.unpack_from(monitor.recv_multipart(_NOBLOCK)[0])[0]
            if event == _CONNECTED:
                self._lost.discard(dealer)
            elif event == _DISCONNECTED:
                self._drain_dealer(dealer, out)
                self._lost.add(dealer)
                self._counts["peer_lost"] += 1
                gone = [rid for rid, via in self._via.items() if via is dealer]
                for rid in gone:
                    del self._via[rid]
                    if self._pending.pop(rid, None) is not None:
                        self._counts["expired"] += 1
                        out.append(Expired(rid))
                if self._backlog.pop(dealer, None) is not None:
                    self._poller.modify(dealer, _POLLIN)

    def _send_due(self, now: float) -> None:
        delayed = self._delayed
        while delayed and delayed[0][0] <= now:
            _, _, sock, frames, request_id = heapq.heappop(delayed)
            self._send(sock, frames, request_id)

    def _expire(self, now: float, out: list[Incoming]) -> None:
        deadlines, pending = self._deadlines, self._pending
        expired = len(out)
        while deadlines and deadlines[0][0] <= now:
            deadline, request_id = heapq.heappop(deadlines)
            if pending.get(request_id) == deadline:
                del pending[request_id]
                if self._via:
                    self._via.pop(request_id, None)
                self._counts["expired"] += 1
                out.append(Expired(request_id))
        if len(out) == expired:
            return
        for dealer in list(self._backlog):  # forget held requests that can no longer matter
            backlog = self._backlog[dealer]
            backlog = deque(entry for entry in backlog if entry[0] in pending)
            if backlog:
                self._backlog[dealer] = backlog
            else:
                del self._backlog[dealer]
                self._poller.modify(dealer, _POLLIN)

    # ------------------------------------------------------------------ state
    def next_deadline(self) -> float | None:
        """The earliest time at which `poll` has something to do without any input."""
        deadlines, pending = self._deadlines, self._pending
        while deadlines and pending.get(deadlines[0][1]) != deadlines[0][0]:
            heapq.heappop(deadlines)  # answered: drop the stale heap entry
        first = deadlines[0][0] if deadlines else None
        if self._delayed and (first is None or self._delayed[0][0] < first):
            return self._delayed[0][0]
        return first

    def pending(self) -> int:
        """Requests sent and neither answered nor expired yet."""
        return len(self._pending)

    def counters(self) -> dict[str, int]:
        """Messages sent, received, malformed, late, expired, filtered and failed sends, and
        (`fail_fast`) how many times a connected peer went away."""
        return dict(self._counts)

    def close(self) -> None:
        """Close every socket at once (linger 0) and remove the ipc socket files bound here."""
        for monitor, dealer in self._monitors.items():
            dealer.disable_monitor()
            monitor.close(linger=0)
        self._monitors.clear()
        self._lost.clear()
        self._via.clear()
        for dealer in self._dealers.values():
            dealer.close(linger=0)
        self._dealers.clear()
        self._backlog.clear()
        self._delayed.clear()
        if self._router is not None:
            self._router.close(linger=0)
            self._router = None
            for endpoint in (self.endpoint, self.also_endpoint):
                if endpoint is not None and endpoint.startswith(_IPC):
                    try:
                        os.unlink(endpoint[len(_IPC):])
                    except FileNotFoundError:
                        pass  # libzmq removed it itself when the listener closed


def _recv(sock: zmq.Socket, copied: int) -> list | None:
    """One whole message, or None if none is waiting.

    The first `copied` frames (identity, header) are small and read as bytes; the rest
    are record frames, read without a copy (zmq.Frame, decoded to a memoryview). An empty
    queue is seen in the socket's events, not from a failed read (an exception each time).
    """
    if not sock.getsockopt(_EVENTS) & _POLLIN:
        return None
    try:
        frames = [sock.recv(_NOBLOCK)]
    except zmq.Again:
        return None
    while sock.getsockopt(_RCVMORE):
        frames.append(sock.recv() if len(frames) < copied else sock.recv(copy=False))
    return frames


def _send_frames(sock: zmq.Socket, frames: list) -> None:
    """`send_multipart(frames, NOBLOCK, copy=False)` with int flags: the whole message or,
    when the first frame cannot go (zmq.Again), nothing (ZeroMQ sends multipart atomically)."""
    last = len(frames) - 1
    for i, frame in enumerate(frames):
        sock.send(frame, _NOBLOCK if i == last else _NOBLOCK | _SNDMORE, copy=False)
