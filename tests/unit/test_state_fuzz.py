"""A node never crashes on a malformed or stale message (DESIGN section 11).

The codec already turns undecodable frames into errors; these properties go one step
further: well-typed but hostile, stale or nonsensical messages (unknown partitions, old
epochs, negative offsets, garbage record sets, responses nobody asked for) are fed to a
broker and a controller that are in a realistic state, and neither may raise.
"""
from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.common.errors import Errors
from broker.common.record_batch import build_batch, encode_record_set
from broker.protocol.broker import BrokerConfig, BrokerState
from broker.protocol.controller import Controller, ControllerConfig
from broker.protocol.messages import (
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
    CreateTopicsRequest,
    MetadataFetchResponse,
    NewTopic,
)
from broker.protocol.outputs import AppendMetadata, Outputs
from broker.protocol.records import to_dict
from broker.protocol.settings import Timeouts
from tests.unit.message_strategies import any_message

SMALL_INT = st.integers(-3, 40)
TOPIC = st.sampled_from(["orders", "nope", ""])
RECORDS = st.one_of(st.binary(max_size=40), st.just(encode_record_set([b"a", b"bc"])),
                    st.just(build_batch(0, 0, [b"x"])), st.just(build_batch(5, 9, [b"y", b"z"])))


NEAR_VALID = {int: SMALL_INT, str: st.sampled_from(["orders", "x", "broker-1"]), bool: st.booleans(),
              bytes: st.binary(max_size=16), Errors: st.sampled_from(list(Errors)), float: st.floats(0, 10),
              dict: st.dictionaries(st.sampled_from(["name", "partitions", "type"]), SMALL_INT | TOPIC, max_size=3)}
#: values close to what a real peer sends, so the handlers get past their first check
ANY = any_message(NEAR_VALID, {"topic": TOPIC, "records": RECORDS})


def controller_with_topic() -> tuple[Controller, list[dict]]:
    """A controller with brokers 1-3 registered and unfenced and topic `orders` created."""
    c = Controller(1, ControllerConfig(session_timeout=1.0))
    log: list[dict] = []

    def step(out: Outputs) -> None:
        for op in out.disk:
            if isinstance(op, AppendMetadata):
                log.extend(to_dict(r) for r in op.records)
        c.on_committed(c.log_end_offset)

    epochs = {}
    for b in (1, 2, 3):
        step(c.on_request(("reg", b), BrokerRegistrationRequest(b, f"inc-{b}", "abc"[b - 1]), 0.0))
        epochs[b] = c.image.broker_epoch(b)
    for b in (1, 2, 3):
        step(c.on_request(("hb", b), BrokerHeartbeatRequest(b, epochs[b], c.log_end_offset), 0.1))
    step(c.on_request("create", CreateTopicsRequest([NewTopic("orders", 3, 3, min_insync_replicas=2)]), 0.2))
    assert len(c.image.partitions) == 3
    return c, log


def broker_with_metadata() -> BrokerState:
    """Broker 1, registered and caught up: leader of some partitions, follower of others."""
    _c, log = controller_with_topic()
    timeouts = Timeouts(heartbeat_interval=0.1, session_timeout=1.0, replica_lag_max=1.0, fetch_max_wait=0.05)
    b = BrokerState(BrokerConfig(1, "a", "inc", timeouts), {}, -1)
    b.tick(0.0)
    b.on_response(("register",), BrokerRegistrationResponse(Errors.NONE, 0), 0.0)
    b.on_response(("metadata",), MetadataFetchResponse(Errors.NONE, log, 0, len(log), 1), 0.1)
    assert b.caught_up and {p.role for p in b.partitions.values()} >= {"leader"}
    return b


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ANY, min_size=1, max_size=6))
def test_broker_survives_any_request_sequence(msgs: list) -> None:
    b = broker_with_metadata()
    now = 1.0
    for i, m in enumerate(msgs):
        now += 0.05
        assert isinstance(b.on_request(("ctx", i), m, now), Outputs)
        assert isinstance(b.tick(now), Outputs)


CORRELATIONS = st.sampled_from([("register",), ("heartbeat",), ("metadata",), ("fetch", 2), ("fetch", 9),
                                ("alter-partition", "orders", 0), ("alter-partition", "nope", 7), ("bogus",)])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(CORRELATIONS, st.none() | ANY), min_size=1, max_size=6))
def test_broker_survives_any_response_sequence(responses: list) -> None:
    """Late, duplicated or mismatched responses (and timeouts, None) are absorbed."""
    b = broker_with_metadata()
    now = 1.0
    for corr, m in responses:
        now += 0.05
        assert isinstance(b.on_response(corr, m, now), Outputs)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ANY, min_size=1, max_size=6))
def test_controller_survives_any_request_sequence(msgs: list) -> None:
    c, _log = controller_with_topic()
    now = 0.5
    for i, m in enumerate(msgs):
        now += 0.05
        out = c.on_request(("ctx", i), m, now)
        assert isinstance(out, Outputs)
        c.on_committed(c.log_end_offset)
        c.tick(now)
