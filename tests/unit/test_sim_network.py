"""The simulated network hands the replication path's messages over as the objects sent
(`testbed/sim/network.py`, HANDED_OVER): the codec would give the receiver an equal object,
field for field and type for type, so leaving it out changes nothing a node can see.
Checked on every such message of seeds that take faults (elections, truncations, fenced and
restarted brokers), and a duplicated message still arrives as two objects of its own."""
from __future__ import annotations

import random
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

import pytest

from broker.protocol.messages import ProduceRequest
from broker.wire.codec import decode, encode
from broker.wire.linkfilter import LinkFilter, LinkRule, LinkTable
from testbed.sim.loop import Loop
from testbed.sim.network import HANDED_OVER, ReplyHandle, SimNetwork
from testbed.sim.run import run_seed
from testbed.topology import parse_topology
from tests.unit.test_sim import FAULT_TOUR


def _same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down."""
    if type(a) is not type(b):
        return False
    if is_dataclass(a):
        return all(_same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    if type(a) is list:
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if type(a) is dict:
        return list(a) == list(b) and all(_same(k, j) and _same(a[k], b[j]) for k, j in zip(a, b))
    return a == b


def _frames(msg: Any, rid: int, src: str) -> list[bytes]:
    return [bytes(fr) for fr in encode(msg, rid, src)]


def test_every_message_handed_over_is_what_the_codec_would_deliver(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """At its send, the codec would deliver an equal object; at its arrival, it is still what
    was sent (no sender changed it in between: it owns no part of it once sent)."""
    seen: dict[str, int] = {}
    sent: dict[int, tuple[Any, list[bytes]]] = {}  # id -> (the object, kept alive; its encoding at the send)
    arrived = 0
    transmit, receive = SimNetwork._transmit, SimNetwork._receive

    def checked(self: SimNetwork, src: str, dst: str, rid: int, msg: Any, is_reply: bool) -> None:
        if type(msg) in HANDED_OVER:
            decoded = decode(encode(msg, rid, src))
            assert _same(decoded.msg, msg), f"{src} -> {dst}: the codec would deliver {decoded.msg}, not {msg}"
            seen[type(msg).__name__] = seen.get(type(msg).__name__, 0) + 1
            sent[id(msg)] = (msg, _frames(msg, rid, src))
        transmit(self, src, dst, rid, msg, is_reply)

    def unchanged(self: SimNetwork, src: str, dst: str, rid: int, payload: Any, is_reply: bool) -> None:
        nonlocal arrived
        if type(payload) in HANDED_OVER:
            assert _frames(payload, rid, src) == sent[id(payload)][1], f"{src} -> {dst}: changed in flight: {payload}"
            arrived += 1
        receive(self, src, dst, rid, payload, is_reply)
    monkeypatch.setattr(SimNetwork, "_transmit", checked)
    monkeypatch.setattr(SimNetwork, "_receive", unchanged)
    outcome = run_seed(parse_topology(FAULT_TOUR, "tour"), tmp_path / "run")
    assert outcome.error is None and outcome.converged
    assert set(seen) == {t.__name__ for t in HANDED_OVER}, f"not every type was sent: {seen}"
    assert arrived > len(HANDED_OVER), "the handed-over messages were checked on arrival"


class _Receiver:
    name = "b"
    up = True
    paused = False

    def __init__(self) -> None:
        self.got: list[Any] = []

    def deliver(self, fn: Any, *args: Any) -> None:
        fn(*args)

    def on_request(self, handle: ReplyHandle, msg: Any) -> None:
        self.got.append(msg)


def test_a_duplicated_message_arrives_as_two_objects() -> None:
    loop = Loop()
    net = SimNetwork(loop, random.Random(1))
    receiver = _Receiver()
    net.attach(receiver)
    net.filters["a"] = LinkFilter(LinkTable(1, {("a", "b"): LinkRule(duplicate=1.0)}))
    msg = ProduceRequest("orders", 0, -1, 1000, b"records")
    net.request("a", "b", msg, 1.0, lambda _: None)
    loop.run_until(loop.now + 0.5)
    first, second = receiver.got
    assert first == second == msg
    assert first is not second and msg is not first and msg is not second


class _Client:
    """A requester: records when each answer came and what it was."""

    up = True
    paused = False

    def __init__(self, name: str, loop: Loop) -> None:
        self.name, self.loop = name, loop
        self.answers: list[tuple[float, Any]] = []

    def deliver(self, fn: Any, *args: Any) -> None:
        fn(*args)

    def on_answer(self, answer: Any) -> None:
        self.answers.append((self.loop.now, answer))


def _sent_and_held(net: SimNetwork, loop: Loop, node: _Receiver, client: _Client, fail_fast: bool) -> float:
    answered = len(client.answers)
    net.request(client.name, node.name, ProduceRequest("orders", 0, -1, 1000, b"r"), 30.0, client.on_answer,
                fail_fast=fail_fast)
    sent = loop.now
    loop.run_until(loop.now + 0.01)
    assert len(node.got) == 1 and len(client.answers) == answered  # arrived, unanswered
    return sent


def test_a_clients_requests_fail_one_hop_after_the_node_dies_and_until_it_starts_again() -> None:
    """As a client's transport sees its DEALER's connection close (Transport.fail_fast): the
    request the dead node held fails one hop after the death, not at its 30 s deadline; a
    request sent while the node is down fails one hop after it is sent; once the node has
    started again, requests reach it."""
    loop = Loop()
    net = SimNetwork(loop, random.Random(1))
    node, client = _Receiver(), _Client("producer-0", loop)
    net.attach(node)
    net.attach(client)
    _sent_and_held(net, loop, node, client, fail_fast=True)
    node.up = False
    died = loop.now
    net.went_down(node.name)
    loop.run_until(loop.now + 0.01)
    [(when, answer)] = client.answers
    assert answer is None and died < when <= died + 0.001
    sent = loop.now
    net.request(client.name, node.name, ProduceRequest("orders", 0, -1, 1000, b"r"), 30.0, client.on_answer,
                fail_fast=True)
    loop.run_until(loop.now + 0.01)
    assert client.answers[1][1] is None and sent < client.answers[1][0] <= sent + 0.001
    node.up = True
    node.got.clear()
    net.came_up(node.name)
    _sent_and_held(net, loop, node, client, fail_fast=True)


def test_a_nodes_requests_keep_their_deadline_when_the_peer_dies() -> None:
    """A node does not fail fast: its request to a peer that died times out at its deadline."""
    loop = Loop()
    net = SimNetwork(loop, random.Random(1))
    node, requester = _Receiver(), _Client("broker-1", loop)
    net.attach(node)
    net.attach(requester)
    sent = _sent_and_held(net, loop, node, requester, fail_fast=False)
    node.up = False
    net.went_down(node.name)
    loop.run_until(sent + 29.0)
    assert requester.answers == []
    loop.run_until(sent + 31.0)
    assert [a for _, a in requester.answers] == [None] and requester.answers[0][0] >= sent + 29.9


def test_requests_time_out_at_their_deadlines_in_the_order_sent_whatever_their_timeouts() -> None:
    """Unanswered requests of several timeouts, sent over time, time out each at its deadline,
    in (deadline, order sent) order; answered ones never do."""
    loop = Loop()
    net = SimNetwork(loop, random.Random(3))
    handles: list[ReplyHandle] = []

    class Holder(_Receiver):
        def on_request(self, handle: ReplyHandle, msg: Any) -> None:
            handles.append(handle)

    node, requester = Holder(), _Client("broker-1", loop)
    net.attach(node)
    net.attach(requester)
    rng = random.Random(5)
    timed_out: list[tuple[float, int]] = []
    deadlines: list[tuple[float, int]] = []
    for i in range(60):
        timeout = rng.choice([0.25, 0.5, 1.0, 2.5])
        net.request(requester.name, node.name, ProduceRequest("orders", 0, -1, 1000, b"r"), timeout,
                    lambda tag, answer: timed_out.append((loop.now, tag)) if answer is None else None, i)
        deadlines.append((loop.now + timeout, i))
        loop.run_until(loop.now + rng.choice([0.0, 0.01, 0.3]))
        if handles and rng.random() < 0.3:  # the node answers one of the requests it holds
            net.reply(node.name, handles.pop(rng.randrange(len(handles))), ProduceRequest("orders", 0, -1, 0, b""))
    loop.run_until(loop.now + 5.0)
    answered = {tag for tag in range(60)} - {tag for _, tag in timed_out}
    assert timed_out == sorted(d for d in deadlines if d[1] not in answered)
    assert len(answered) > 5 and len(timed_out) > 20
