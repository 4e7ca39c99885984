"""The client library with requests in flight (`in_flight` > 1): a synchronous request made
meanwhile never swallows the outcome of a pipelined produce that arrives in the same batch
as its own answer, even behind it."""
from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from broker.client import CallEach, ClusterClient, Collect, Start
from broker.common.errors import Errors
from broker.protocol.messages import MetadataRequest, MetadataResponse, PartitionMetadata, ProduceRequest, ProduceResponse
from broker.wire.transport import Request, Response, Transport

PM = PartitionMetadata("t", 0, 1, 0, 0, [1], [1])


def _answer(server: Transport, held: list[Request]) -> None:
    """The fake broker: the metadata answer, then the produce's, back to back."""
    for req in sorted(held, key=lambda r: isinstance(r.msg, ProduceRequest)):
        server.reply(req.handle, ProduceResponse("t", 0, Errors.NONE, base_offset=7)
                     if isinstance(req.msg, ProduceRequest) else MetadataResponse(Errors.NONE, partitions=[PM]))


def test_a_produce_answered_behind_a_metadata_answer_still_completes(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    server = Transport("broker-1", bind=f"ipc://{tmp_path}/b1.sock")
    client = ClusterClient({1: server.endpoint}, "pipelining", request_timeout=5.0)
    client.leaders[("t", 0)] = PM
    real_poll = client.transport.poll

    def one_batch(timeout: float, now_fn):  # both answers in one batch, the metadata first
        held: list[Request] = []
        got: list[Response] = []
        deadline = time.monotonic() + 5
        while len(got) < 2:
            assert time.monotonic() < deadline, "the exchange did not complete"
            got += [i for i in real_poll(0.01, now_fn) if isinstance(i, Response)]  # sends what waits too
            held += [i for i in server.poll(0.01, time.monotonic) if isinstance(i, Request)]
            if len(held) == 2:
                _answer(server, held)
                held = []
        monkeypatch.setattr(client.transport, "poll", real_poll)
        return sorted(got, key=lambda r: isinstance(r.msg, ProduceResponse))

    try:
        produce = client.steps.produce_request("t", 0, ["v"], "all", timeout=5.0)
        client.perform(Start(server.endpoint, produce, 5.5, "the produce"))
        assert client.in_flight == 1
        monkeypatch.setattr(client.transport, "poll", one_batch)
        assert isinstance(client.request(1, MetadataRequest(["t"])), MetadataResponse)
        [(tag, answer)] = client.perform(Collect(5.0))
        assert tag == "the produce" and isinstance(answer, ProduceResponse) and answer.base_offset == 7
        assert client.in_flight == 0
    finally:
        client.close()
        server.close()


def test_call_each_returns_after_the_settle_time_without_the_silent_broker(tmp_path: Path) -> None:
    """A metadata refresh's `CallEach` on ZeroMQ: broker 1 answers, broker 2 never does (as
    if paused). It resumes with broker 1's answer and None for broker 2 once the settle time
    after the first answer has passed, far before its timeout, and a pipelined produce's
    outcome read meanwhile is left for the next `Collect`."""
    answering = Transport("broker-1", bind=f"ipc://{tmp_path}/b1.sock")
    silent = Transport("broker-2", bind=f"ipc://{tmp_path}/b2.sock")
    client = ClusterClient({1: answering.endpoint, 2: silent.endpoint}, "call-each", request_timeout=5.0)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            for req in answering.poll(0.01, time.monotonic):
                if isinstance(req, Request):
                    answering.reply(req.handle, ProduceResponse("t", 0, Errors.NONE, base_offset=3)
                                    if isinstance(req.msg, ProduceRequest) else MetadataResponse(Errors.NONE, partitions=[PM]))
    server = threading.Thread(target=serve)
    server.start()
    try:
        produce = client.steps.produce_request("t", 0, ["v"], "all", timeout=5.0)
        client.perform(Start(answering.endpoint, produce, 5.5, "the produce"))
        started = time.monotonic()
        answers = client.perform(CallEach(((answering.endpoint, MetadataRequest(["t"])),
                                           (silent.endpoint, MetadataRequest(["t"]))), 60.0, 0.05))
        assert time.monotonic() - started < 30, "it waited for the silent broker's timeout"
        assert isinstance(answers[0], MetadataResponse) and answers[1] is None
        collected = client.perform(Collect(5.0))
        assert [tag for tag, _ in collected] == ["the produce"] and collected[0][1].base_offset == 3
    finally:
        stop.set()
        server.join()
        client.close()
        answering.close()
        silent.close()
