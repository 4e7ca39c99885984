"""A node never crashes on a malformed frame: it answers with an error, counts it and keeps
serving (DESIGN section 11)."""
from __future__ import annotations

import time

import pytest
import zmq

from broker.common.errors import Errors
from broker.protocol.messages import ErrorResponse
from broker.wire.codec import Decoded, decode

pytestmark = pytest.mark.integration


def test_malformed_frames_are_answered_and_counted(make_cluster) -> None:
    c = make_cluster(partitions=1)
    endpoint = c.configs["broker-1"].endpoint
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.IDENTITY, b"fuzzer")
    sock.connect(endpoint)
    garbage = [[b"\x00garbage"], [b"\x95\x01\x00\x07\xa3abc\x01"], [b"\x91", b"extra"], [b""]]
    try:
        for frames in garbage:
            sock.send_multipart(frames)
        # Every malformed frame is counted; a readable request id gets an ErrorResponse.
        c.wait_until(lambda s: (s.brokers[1] or {}).get("transport", {}).get("malformed", 0) >= len(garbage),
                     timeout=c.scaled(5), what="the malformed frames counted")
        replies = []
        deadline = time.monotonic() + c.scaled(2)
        while time.monotonic() < deadline and not replies:
            if sock.poll(50):
                replies.append(decode(sock.recv_multipart()))
        # The second frame's header is readable up to its request id (7): it must be answered.
        assert replies, "no ErrorResponse for a malformed request whose id was readable"
        for r in replies:
            assert isinstance(r, Decoded) and isinstance(r.msg, ErrorResponse)
            assert r.msg.error == Errors.INVALID_REQUEST
    finally:
        sock.close()
    assert c.procs["broker-1"].poll() is None, "the broker died on a malformed frame"
    r = c.produce("orders", 0, ["after-garbage"], acks="all")
    assert r.error == Errors.NONE
