"""The simulated network: requests and replies as events on virtual time.

A receiver never shares an object with its sender: a message is encoded by the wire codec
when it is sent and decoded when it arrives, as between processes, except the message types
of `HANDED_OVER`, which are built afresh for one request or answer and never touched by their
sender again, and which the codec would only copy: those arrive as the object sent. A
message takes
a latency drawn from the seed (a loopback hop), and messages on one link arrive in the
order they were sent, as on one ZeroMQ connection; the link table's rules act as in the
nodes' transports (`broker/wire/linkfilter.py`): the sender's filter drops, loses, delays
(with jitter, which may reorder) and duplicates, the receiver's drops what a partition
cuts. A message to a node that is down is lost; one to a paused node waits in its socket
until it resumes. A request unanswered by its deadline completes as a timeout, seen by a
paused requester only when it resumes, as its transport would. A client's requests fail
fast (`Transport.fail_fast`): once a client has reached a node, the node's death fails the
client's requests to it one hop later, and so every request the client sends it until the
node starts again (its DEALER reconnects). Which incarnation of a
node an answer is for is the node's business (`node.py`): the network only delivers.
"""
from __future__ import annotations

import itertools
import math
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from broker.protocol.messages import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    FetchRequest,
    FetchResponse,
    MetadataFetchRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from broker.wire.codec import Decoded, decode, encode
from broker.wire.linkfilter import DELIVER, LinkFilter
from testbed.sim.loop import Loop

#: one hop on loopback, seconds (uniform); a ZeroMQ round trip here is about 0.1 ms
LATENCY = (0.00004, 0.00012)
_LEAST, _SPREAD = LATENCY[0], LATENCY[1] - LATENCY[0]
#: The messages of the replication path and of the brokers' sessions, which are nine in ten
#: of a run's: each is built for one request or answer (by a client, the follower fetcher, a
#: partition, the broker, the controller's heartbeat handling) and its sender keeps no part of
#: it that it changes later, so the object sent is the one the codec would rebuild (same
#: fields, same types; tests/unit/test_sim_network.py). Not here: what carries state its
#: sender keeps, the controller's metadata records (MetadataFetchResponse) and Raft's entries
#: and snapshots, and the rarer admin requests. A duplicated message is always encoded, so
#: that each copy is its own object.
HANDED_OVER = frozenset({ProduceRequest, ProduceResponse, FetchRequest, FetchResponse, BrokerHeartbeatRequest,
                         BrokerHeartbeatResponse, MetadataFetchRequest, MetadataRequest, MetadataResponse})


class Endpoint(Protocol):
    """Something messages reach: a node or a client."""

    name: str
    #: messages reach it (a node's process runs, a client has not ended)
    up: bool
    #: what arrives waits, in order, for `deliver` to run it at the resume (a paused node)
    paused: bool

    def deliver(self, fn: Callable[..., None], *args: Any) -> None:
        """Run `fn(*args)` now, or when the endpoint can (a paused node holds it)."""

    def on_request(self, handle: "ReplyHandle", msg: Any) -> None: ...


@dataclass(slots=True)
class ReplyHandle:
    """Where the answer to one received request goes (as the transport's; not frozen, which
    would triple the cost of the one made per request)."""
    request_id: int
    source: str  # the requester's name


@dataclass(slots=True)
class _Pending:
    requester: str
    #: the requester's own, called as on_answer(*context, answer); it ignores what a later
    #: incarnation of its node gets
    on_answer: Callable[..., None]
    context: tuple
    #: a client's request, which fails as soon as the requester's connection to it is gone
    fail_fast: bool = False
    destination: str = ""


class SimNetwork:
    def __init__(self, loop: Loop, rng: random.Random) -> None:
        self.loop = loop
        self.rng = rng
        self.endpoints: dict[str, Endpoint] = {}
        #: the link filter of every cluster node (clients have none, as in the real runs)
        self.filters: dict[str, LinkFilter] = {}
        self._pending: dict[int, _Pending] = {}
        #: (deadline, request id) of every request sent, the answered ones among them until a
        #: sweep passes (one loop event per sweep, not one per request), in one queue per
        #: timeout: a queue's deadlines, now + its timeout, come in the order of the requests,
        #: so that a request costs an append and a sweep a look at each queue's first, not a
        #: heap of every request in flight (a quickstart seed sends 3,100, with a few timeouts)
        self._deadlines: dict[float, deque[tuple[float, int]]] = {}
        self._sweep_at = math.inf
        self._ids = itertools.count(1)
        self._last: dict[tuple[str, str], float] = {}
        #: node -> the fail-fast requesters connected to it (one of their requests reached it
        #: up), and those whose connection to it went with its death, until it starts again
        self._connected: dict[str, set[str]] = {}
        self._lost: dict[str, set[str]] = {}

    def attach(self, endpoint: Endpoint) -> None:
        self.endpoints[endpoint.name] = endpoint

    # ------------------------------------------------------------------ sending
    def request(self, source: str, destination: str, msg: Any, timeout: float,
                on_answer: Callable[..., None], *context: Any, fail_fast: bool = False) -> None:
        """Send `msg`; `on_answer(*context, answer)` gets the answer, or None at `timeout`
        (a `fail_fast` requester's sooner, when its connection to the node is gone)."""
        rid = next(self._ids)
        self._pending[rid] = _Pending(source, on_answer, context, fail_fast, destination)
        deadline = self.loop.now + timeout
        queue = self._deadlines.get(timeout)
        if queue is None:
            queue = self._deadlines[timeout] = deque()
        queue.append((deadline, rid))
        if deadline < self._sweep_at:
            self._sweep_at = deadline
            self.loop.at(deadline, self._sweep, deadline)
        if fail_fast and source in self._lost.get(destination, ()):
            self._refuse(rid)
            return
        self._transmit(source, destination, rid, msg, False)

    def went_down(self, node: str) -> None:
        """`node` died: every fail-fast requester connected to it loses its connection, and
        their requests to it fail one hop from now."""
        connected = self._connected.pop(node, None)
        if not connected:
            return
        self._lost.setdefault(node, set()).update(connected)
        for rid, p in self._pending.items():
            if p.fail_fast and p.destination == node and p.requester in connected:
                self._refuse(rid)

    def came_up(self, node: str) -> None:
        """`node` (re)started: the requesters' connections to it are back."""
        self._lost.pop(node, None)

    def _refuse(self, rid: int) -> None:
        self.loop.at(self.loop.now + self._hop(), self._expire, rid)

    def _hop(self) -> float:
        """One hop's latency: `rng.uniform(*LATENCY)`, the very float, without its call."""
        return _LEAST + _SPREAD * self.rng.random()

    def reply(self, source: str, handle: ReplyHandle, msg: Any) -> None:
        self._transmit(source, handle.source, handle.request_id, msg, True)

    def _transmit(self, src: str, dst: str, rid: int, msg: Any, is_reply: bool) -> None:
        f = self.filters.get(src)
        verdict = DELIVER if f is None or f.passes_all else f.decide(src, dst, self.rng)
        if verdict is DELIVER:  # one copy, undelayed: nine messages in ten, without the loop below
            if type(msg) not in HANDED_OVER:
                msg = [bytes(fr) for fr in encode(msg, rid, src)]
            when = self.loop.now + (_LEAST + _SPREAD * self.rng.random())  # the hop, inline
            link = (src, dst)
            last = self._last.get(link, 0.0)  # one connection keeps its order
            if last > when:
                when = last
            self._last[link] = when
            self.loop.at(when, self._receive, src, dst, rid, msg, is_reply)
            return
        if verdict.copies == 1 and type(msg) in HANDED_OVER:
            payload: Any = msg
        else:
            payload = [bytes(fr) for fr in encode(msg, rid, src)]
        for _ in range(verdict.copies):
            when = self.loop.now + self._hop()
            if verdict.delay:
                when += verdict.delay  # a slowed link: held apart, may overtake or be overtaken
            else:
                last = self._last.get((src, dst), 0.0)  # one connection keeps its order
                if last > when:
                    when = last
                self._last[(src, dst)] = when
            self.loop.at(when, self._receive, src, dst, rid, payload, is_reply)

    # ------------------------------------------------------------------ arriving
    def _receive(self, src: str, dst: str, rid: int, payload: Any, is_reply: bool) -> None:
        """A message arrives at `dst` (the loop's event for it): lost to a node that is down,
        held by a paused one until its resume (which runs this again), else received.
        `payload`: the message handed over, or its frames (a list) to decode."""
        endpoint = self.endpoints.get(dst)
        if endpoint is None or not endpoint.up:
            return  # lost, as to a dead process (or it died while the message waited for its resume)
        if endpoint.paused:
            endpoint.deliver(self._receive, src, dst, rid, payload, is_reply)
            return
        f = self.filters.get(dst)
        if f is not None and not f.passes_all and not f.admits(src, dst):
            return  # cut by a partition (the filter counts it)
        msg = payload
        if type(payload) is list:
            decoded = decode(payload)
            if not isinstance(decoded, Decoded):  # our own encoding: never expected, never fatal
                return
            msg = decoded.msg
        if is_reply:  # (`_answer`, written out: half the messages are answers)
            p = self._pending.pop(rid, None)
            if p is not None:  # else answered already, or timed out
                p.on_answer(*p.context, msg)
        else:
            p = self._pending.get(rid)
            if p is not None and p.fail_fast:
                self._connected.setdefault(dst, set()).add(src)
            endpoint.on_request(ReplyHandle(rid, src), msg)

    def _answer(self, rid: int, msg: Any) -> None:
        p = self._pending.pop(rid, None)
        if p is not None:  # else answered already, or timed out
            p.on_answer(*p.context, msg)

    def _sweep(self, at: float) -> None:
        """Time out the requests whose deadline has come, in the order they were sent (of
        (deadline, request id), as one heap of them would give them), and wake again at the
        next deadline of one still unanswered."""
        if at != self._sweep_at:
            return  # an earlier sweep was scheduled after this one
        now = self.loop.now
        while True:
            first = self._first_unanswered()
            if first is None or first[0][0] > now:
                break
            _, rid = first.popleft()
            self._expire(rid)  # (which may send, and so append, before the next look)
        for timeout in [t for t, queue in self._deadlines.items() if not queue]:
            del self._deadlines[timeout]
        self._sweep_at = first[0][0] if first is not None else math.inf
        if first is not None:
            self.loop.at(self._sweep_at, self._sweep, self._sweep_at)

    def _first_unanswered(self) -> deque[tuple[float, int]] | None:
        """The queue whose first request is the first unanswered one, in (deadline, request
        id) order, once the answered ones before each queue's first are dropped; None if none."""
        pending, first = self._pending, None
        for queue in self._deadlines.values():
            while queue and queue[0][1] not in pending:
                queue.popleft()  # answered (or expired) already: nothing to do
            if queue and (first is None or queue[0] < first[0]):
                first = queue
        return first

    def _expire(self, rid: int) -> None:
        p = self._pending.get(rid)
        if p is None:
            return
        requester = self.endpoints.get(p.requester)
        if requester is None or not requester.up:
            self._pending.pop(rid, None)
            return
        requester.deliver(self._time_out, rid, p)

    def _time_out(self, rid: int, p: _Pending) -> None:
        """The requester sees its request time out (at once, or when it resumes)."""
        if self._pending.get(rid) is p:
            self._answer(rid, None)
