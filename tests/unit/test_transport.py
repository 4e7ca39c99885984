"""The ZeroMQ transport with real sockets (ipc in tmp_path, tcp on 127.0.0.1 port 0).

No sleeps: every wait is a poll loop with a deadline (`pump`).
"""
from __future__ import annotations

import os
import socket
import time

import msgpack
import pytest
import zmq

from broker.common.errors import Errors
from broker.protocol.messages import (
    MESSAGE_TYPES,
    ErrorResponse,
    FetchPartitionResult,
    FetchResponse,
    MetadataRequest,
    ProduceRequest,
    ProduceResponse,
)
from broker.wire.codec import VERSION, decode, encode
from broker.wire.linkfilter import LinkFilter, LinkRule, LinkTable
from broker.wire.transport import Expired, Request, Response, Transport

now = time.monotonic
WAIT = 5.0  # the longest any test waits for something that must happen


@pytest.fixture(params=["ipc", "tcp"])
def bind(request, tmp_path):
    return f"ipc://{tmp_path}/server.sock" if request.param == "ipc" else "tcp://127.0.0.1:0"


@pytest.fixture
def pair(bind):
    server = Transport("server", bind=bind, link_filter=LinkFilter())
    client = Transport("client", link_filter=LinkFilter())
    yield client, server
    client.close()
    server.close()


@pytest.fixture
def raw(pair):
    """A bare DEALER connected to the pair's server, speaking (or garbling) the codec by hand."""
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(pair[1].endpoint)
    yield sock
    sock.close(linger=0)


def pump(transports, until, on_item=lambda t, item: None, limit=WAIT):
    """Poll every transport in turn until `until()` holds; fail after `limit` seconds."""
    end = now() + limit
    while not until():
        assert now() < end, "condition not reached in time"
        for t in transports:
            for item in t.poll(0.002, now):
                on_item(t, item)


class Collect:
    """Remembers what each transport received; the server answers every request unless held."""

    def __init__(self, server, answer=True):
        self.server, self.answer = server, answer
        self.requests, self.responses, self.expired = [], [], []

    def __call__(self, t, item):
        if type(item) is Request:
            assert t is self.server
            self.requests.append(item)
            if self.answer:
                t.reply(item.handle, ProduceResponse(item.msg.topic, item.msg.partition, base_offset=item.msg.partition))
        elif type(item) is Response:
            self.responses.append(item)
        else:
            assert type(item) is Expired
            self.expired.append(item.request_id)


def produce(partition=0, records=b"rec"):
    return ProduceRequest("orders", partition, -1, 1000, records)


def test_request_response_round_trip(pair):
    client, server = pair
    round_trip(client, server)
    assert client.counters()["sent"] == 1 and server.counters()["sent"] == 1


def round_trip(client, server):
    rid = client.request(server.endpoint, produce(3, b"\x00payload" * 100), 2.0, now(), "server")
    seen = Collect(server)
    pump([client, server], lambda: seen.responses, seen)
    [req] = seen.requests
    assert req.source == "client" and req.handle.source == "client" and req.handle.request_id == rid
    assert bytes(req.msg.records) == b"\x00payload" * 100
    [resp] = seen.responses
    assert resp.request_id == rid and resp.msg == ProduceResponse("orders", 3, base_offset=3)
    assert client.pending() == 0 and client.next_deadline() is None


def test_tcp_port_zero_exposes_the_bound_port(tmp_path):
    t = Transport("n", bind="tcp://127.0.0.1:0")
    try:
        assert t.endpoint.startswith("tcp://127.0.0.1:") and not t.endpoint.endswith(":0")
    finally:
        t.close()


def test_many_concurrent_requests_are_matched_by_id(pair):
    client, server = pair
    expected = {client.request(server.endpoint, produce(i), 5.0, now(), "server"): i for i in range(500)}
    assert len(expected) == 500 and client.pending() == 500
    seen = Collect(server)
    pump([client, server], lambda: len(seen.responses) == 500, seen)
    assert {r.request_id: r.msg.base_offset for r in seen.responses} == expected
    assert client.pending() == 0


def test_record_frames_of_a_fetch_response_arrive_intact(pair):
    client, server = pair
    big = os.urandom(200_000)  # above ZeroMQ's copy threshold: sent and received zero-copy
    client.request(server.endpoint, MetadataRequest(), 2.0, now(), "server")
    got = []

    def on_item(t, item):
        if type(item) is Request:
            t.reply(item.handle, FetchResponse(partitions=[
                FetchPartitionResult("t", 0, records=big), FetchPartitionResult("t", 1, records=b"")]))
        else:
            got.append(item)
    pump([client, server], lambda: got, on_item)
    parts = got[0].msg.partitions
    assert bytes(parts[0].records) == big and bytes(parts[1].records) == b""


def test_timeout_gives_expired_and_a_late_response_is_dropped_and_counted(pair):
    client, server = pair
    seen = Collect(server, answer=False)
    rid = client.request(server.endpoint, produce(), 0.05, now(), "server")
    assert client.next_deadline() is not None
    pump([client, server], lambda: seen.expired, seen)
    assert seen.expired == [rid] and client.pending() == 0
    [req] = seen.requests
    server.reply(req.handle, ProduceResponse("orders", 0))
    pump([client, server], lambda: client.counters()["late"] == 1, seen)
    assert seen.responses == [] and client.counters()["expired"] == 1


@pytest.mark.parametrize("endpoint", ["ipc", "tcp"])
def test_a_peer_that_does_not_exist_expires_without_hanging(endpoint, tmp_path):
    client = Transport("client")
    # A loopback port held bound but not listening: connections to it are refused, and no
    # other test running beside this one can take it meanwhile (a port probed and released
    # could be, and then the requests were delivered).
    with socket.socket() as reserved:
        reserved.bind(("127.0.0.1", 0))
        try:
            target = (f"ipc://{tmp_path}/nobody.sock" if endpoint == "ipc"
                      else f"tcp://127.0.0.1:{reserved.getsockname()[1]}")
            rids = [client.request(target, produce(), 0.1, now(), "nobody") for _ in range(3)]
            seen = Collect(None)
            start = now()
            pump([client], lambda: len(seen.expired) == 3, seen)
            assert sorted(seen.expired) == rids and now() - start < 1.0
            assert client.pending() == 0 and client.next_deadline() is None
            assert client.counters()["sent"] == 0
        finally:
            client.close()


def test_requests_sent_before_the_peer_binds_are_delivered_when_it_comes_up(tmp_path):
    endpoint = f"ipc://{tmp_path}/late.sock"
    client = Transport("client")
    rids = [client.request(endpoint, produce(i), 5.0, now(), "server") for i in range(5)]
    server = Transport("server", bind=endpoint)
    try:
        seen = Collect(server)
        pump([client, server], lambda: len(seen.responses) == 5, seen)
        assert [r.request_id for r in seen.responses] == rids  # order kept
    finally:
        client.close()
        server.close()


def test_malformed_requests_are_counted_answered_when_possible_and_harmless(pair, raw):
    client, server = pair
    raw.send(b"\xc1garbage")  # no readable request id: counted, not answered
    bad_field = [VERSION, MESSAGE_TYPES.index(ProduceRequest), 77, "raw", "orders", "zero", -1, 10, 1]
    raw.send_multipart([msgpack.packb(bad_field), b"rec"])
    raw.send_multipart([msgpack.packb([VERSION, 999, 78, "raw"])])
    pump([server], lambda: server.counters()["malformed"] == 3)
    answers = []
    end = now() + WAIT
    while len(answers) < 2 and now() < end:
        if raw.poll(10):
            answers.append(decode(raw.recv_multipart()))
    assert [(a.request_id, a.source, type(a.msg)) for a in answers] == [
        (77, "server", ErrorResponse), (78, "server", ErrorResponse)]
    assert answers[0].msg.error is Errors.INVALID_REQUEST
    assert answers[0].msg.message == "ProduceRequest.partition: expected int, got str"
    assert answers[1].msg.message == "unknown message type 999"
    round_trip(client, server)  # the transport keeps working


def test_a_malformed_response_is_counted_and_its_request_expires(tmp_path):
    endpoint = f"ipc://{tmp_path}/raw.sock"
    raw = zmq.Context.instance().socket(zmq.ROUTER)
    raw.setsockopt(zmq.LINGER, 0)
    raw.bind(endpoint)
    client = Transport("client")
    try:
        rid = client.request(endpoint, produce(), 0.2, now(), "raw")
        pump([client], lambda: raw.poll(0))  # the client sends once its connection is up
        identity, _header = raw.recv_multipart()  # small records ride in the header
        assert identity == b"client"
        raw.send_multipart([identity, b"junk"])
        seen = Collect(None)
        pump([client], lambda: seen.expired, seen)
        assert seen.expired == [rid] and client.counters()["malformed"] == 1
    finally:
        client.close()
        raw.close(linger=0)


def _cut(transport, src, dst, seq=1, **rule):
    assert transport.link_filter.update(LinkTable(seq, {(src, dst): LinkRule(**rule)}))


@pytest.mark.parametrize("where, src, dst", [
    ("client", "client", "server"),  # request dropped by the sender
    ("server", "client", "server"),  # request dropped by the receiver
    ("server", "server", "client"),  # reply dropped by the sender
    ("client", "server", "client"),  # reply dropped by the receiver
])
def test_link_filter_drop_in_each_direction(pair, where, src, dst):
    client, server = pair
    _cut(client if where == "client" else server, src, dst, drop=True)
    seen = Collect(server)
    rid = client.request(server.endpoint, produce(), 0.1, now(), "server")
    pump([client, server], lambda: seen.expired, seen)
    assert seen.expired == [rid] and seen.responses == []
    holder = client if where == "client" else server
    assert holder.counters()["filtered"] == 1
    assert holder.link_filter.counters()[(src, dst)]["dropped"] == 1
    assert len(seen.requests) == (0 if src == "client" else 1)


def test_healing_the_link_restores_traffic(pair):
    client, server = pair
    _cut(client, "client", "server", drop=True)
    _cut(client, "client", "server", seq=2)  # a newer table without the cut
    seen = Collect(server)
    rid = client.request(server.endpoint, produce(), 2.0, now(), "server")
    pump([client, server], lambda: seen.responses, seen)
    assert [r.request_id for r in seen.responses] == [rid] and seen.expired == []
    assert client.counters()["filtered"] == 0


def test_delay_holds_requests_and_replies(pair):
    client, server = pair
    _cut(client, "client", "server", delay=0.08)
    _cut(server, "server", "client", delay=0.05)
    seen = Collect(server)
    start = now()
    client.request(server.endpoint, produce(), 2.0, start, "server")
    assert client.next_deadline() == pytest.approx(start + 0.08)
    pump([client, server], lambda: seen.requests, seen)
    assert now() - start >= 0.08
    pump([client, server], lambda: seen.responses, seen)
    assert now() - start >= 0.13
    assert client.link_filter.counters()[("client", "server")]["delayed"] == 1
    assert server.link_filter.counters()[("server", "client")]["delayed"] == 1


def test_duplicate_sends_twice_and_the_second_answer_is_late(pair):
    client, server = pair
    _cut(client, "client", "server", duplicate=1.0)
    seen = Collect(server)
    rid = client.request(server.endpoint, produce(), 2.0, now(), "server")
    pump([client, server], lambda: client.counters()["late"] == 1, seen)
    assert [r.handle.request_id for r in seen.requests] == [rid, rid]
    assert [r.request_id for r in seen.responses] == [rid]
    assert client.link_filter.counters()[("client", "server")]["duplicated"] == 1


def test_close_removes_the_ipc_socket_file(tmp_path):
    path = tmp_path / "node.sock"
    t = Transport("node", bind=f"ipc://{path}")
    assert t.endpoint == f"ipc://{path}" and path.exists()
    t.request(f"ipc://{tmp_path}/peer.sock", produce(), 1.0, now(), "peer")
    t.close()
    assert not path.exists()


def test_reply_without_a_router_is_a_programming_error():
    t = Transport("client")
    try:
        with pytest.raises(RuntimeError):
            t.reply(None, ProduceResponse("t", 0))
    finally:
        t.close()


def test_encode_is_what_travels(pair, raw):
    """A raw DEALER speaking the codec directly is served like any transport."""
    client, server = pair
    raw.send_multipart(encode(produce(9), 5, "raw"))
    seen = Collect(server)
    pump([server], lambda: seen.requests, seen)
    assert raw.poll(int(WAIT * 1000))
    answer = decode(raw.recv_multipart())
    assert (answer.request_id, answer.source, answer.msg.base_offset) == (5, "server", 9)


# ------------------------------------------------------------------ a peer that goes away (fail_fast)
def _served_and_held(client, server, n=2):
    """`n` requests the server received and holds unanswered, with a deadline far away."""
    rids = [client.request(server.endpoint, produce(i), 30.0, now(), "server") for i in range(n)]
    seen = Collect(server, answer=False)
    pump([client, server], lambda: len(seen.requests) == n, seen)
    return rids


@pytest.mark.parametrize("bind", ["ipc", "tcp"], indirect=True)
def test_a_client_sees_its_unanswered_requests_fail_when_the_peer_goes_away(bind):
    """A killed broker closes its connections: the client's requests to it come out as
    Expired at once, not at their 30 s deadline, and so does a request sent while it is
    gone; once a server is back on the endpoint, requests are answered again."""
    server = Transport("server", bind=bind)
    client = Transport("client", fail_fast=True)
    endpoint = server.endpoint
    try:
        rids = _served_and_held(client, server)
        server.close()
        seen = Collect(None)
        pump([client], lambda: len(seen.expired) == 2, seen)
        assert sorted(seen.expired) == sorted(rids) and client.pending() == 0
        assert client.counters()["peer_lost"] == 1
        gone = client.request(endpoint, produce(), 30.0, now(), "server")
        pump([client], lambda: gone in seen.expired, seen)
        server = Transport("server", bind=endpoint)
        seen = Collect(server)
        rid = None

        def answered():
            nonlocal rid  # resent until the connection is back and the request goes out
            if rid is None or rid in seen.expired:
                rid = client.request(endpoint, produce(7), 30.0, now(), "server")
            return any(r.request_id == rid for r in seen.responses)
        pump([client, server], answered, seen)
    finally:
        client.close()
        server.close()


def test_a_silent_peer_that_keeps_its_connection_is_waited_for_until_the_deadline(pair):
    """A paused or cut-off broker keeps its connection: a fail_fast client's request to it
    waits for its deadline, as every request did before."""
    _, server = pair
    client = Transport("client", fail_fast=True)
    try:
        [rid] = _served_and_held(client, server, 1)
        start = now()
        seen = Collect(server, answer=False)
        client.request(server.endpoint, produce(), 0.3, start, "server")
        pump([client, server], lambda: len(seen.expired) == 1, seen)
        assert now() - start >= 0.3 and rid not in seen.expired
    finally:
        client.close()


def test_a_node_does_not_fail_fast(pair):
    """A node's requests keep their deadlines when the peer goes away: their timing is the
    protocol's (a follower's fetch, a broker's heartbeat)."""
    client, server = pair
    rids = _served_and_held(client, server)
    server.close()
    seen = Collect(None)
    end = now() + 0.3
    pump([client], lambda: now() >= end, seen)
    assert seen.expired == [] and client.pending() == 2 and "peer_lost" in client.counters()
    assert sorted(rids) == sorted(client._pending)
