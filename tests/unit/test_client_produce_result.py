"""A produce's outcome as the client hands it to its caller (`StepClient.produce_result`):
`appended` says the records are in the leader's log, certainly (success) or perhaps (an error
that came after the append, R20). The Python API's `produce` returned `appended=False` for a
write the cluster had acknowledged (trial33)."""
from __future__ import annotations

from broker.client import StepClient
from broker.common.errors import Errors
from broker.protocol.messages import ProduceResponse


def client() -> StepClient:
    return StepClient({1: "ipc:///nowhere"}, "test", request_timeout=1.0)


def test_an_acknowledged_write_reads_as_appended() -> None:
    r = client().produce_result("orders", 0, 1, ProduceResponse("orders", 0, Errors.NONE, base_offset=7))
    assert (r.error, r.base_offset, r.appended, r.leader) == (Errors.NONE, 7, True, 1)


def test_an_error_after_the_append_is_appended_and_one_before_it_is_not() -> None:
    after = ProduceResponse("orders", 0, Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, appended=True)
    before = ProduceResponse("orders", 0, Errors.NOT_ENOUGH_REPLICAS)
    assert client().produce_result("orders", 0, 1, after).appended
    assert not client().produce_result("orders", 0, 1, before).appended


def test_no_answer_in_time_is_an_unknown_outcome() -> None:
    r = client().produce_result("orders", 0, 1, None)
    assert (r.error, r.appended) == (Errors.REQUEST_TIMED_OUT, True)
