"""The codec alone: round trips of every message type and fuzzing of `decode`."""
from __future__ import annotations

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.common.errors import Errors
from broker.protocol import messages
from broker.protocol.messages import (
    MESSAGE_TYPES,
    BrokerHeartbeatRequest,
    DivergingEpoch,
    ErrorResponse,
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchResponse,
    ProduceRequest,
)
from broker.wire.codec import INLINE_RECORDS, VERSION, Decoded, DecodeError, decode, encode
from tests.unit.message_strategies import any_message
from tests.unit.message_strategies import message_strategy as shared_message_strategy

INT64 = st.integers(-(2**63), 2**63 - 1)
JSONISH = st.recursive(
    st.none() | st.booleans() | INT64 | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)


SIMPLE = {int: INT64, str: st.text(max_size=16), bool: st.booleans(), bytes: st.binary(max_size=64),
          Errors: st.sampled_from(list(Errors)), float: st.floats(allow_nan=False),
          dict: st.dictionaries(st.text(max_size=8), JSONISH, max_size=3)}


def message_strategy(cls: type) -> st.SearchStrategy:
    return shared_message_strategy(cls, SIMPLE)


ANY_MESSAGE = any_message(SIMPLE)


@pytest.mark.parametrize("cls", MESSAGE_TYPES, ids=lambda c: c.__name__)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), request_id=INT64, source=st.text(max_size=16))
def test_every_message_type_round_trips(cls, data, request_id, source):
    msg = data.draw(message_strategy(cls))
    result = decode(encode(msg, request_id, source))
    assert result == Decoded(msg, request_id, source)
    assert type(result.msg) is cls


BIG = INLINE_RECORDS + 1


def test_large_records_ride_as_their_own_frames_not_in_the_header():
    payload_a, payload_b = b"\xffA" * BIG, b"\xfeB" * BIG
    msg = FetchResponse(partitions=[
        FetchPartitionResult("t", 0, records=payload_a),
        FetchPartitionResult("t", 1, diverging_epoch=DivergingEpoch(3, 9), records=payload_b),
    ])
    frames = encode(msg, 1, "b1")
    assert frames[1] is payload_a and frames[2] is payload_b
    assert payload_a not in frames[0] and payload_b not in frames[0]
    header = msgpack.unpackb(frames[0], strict_map_key=False)
    assert header[:4] == [VERSION, MESSAGE_TYPES.index(FetchResponse), 1, "b1"]
    assert decode(frames).msg == msg


def test_small_records_ride_inside_the_header_one_frame_in_all():
    """A frame costs a ZeroMQ send and receive: a 100-byte record does not get one."""
    small, big = b"s" * INLINE_RECORDS, b"b" * BIG
    msg = FetchResponse(partitions=[FetchPartitionResult("t", 0, records=small),
                                    FetchPartitionResult("t", 1, records=big)])
    frames = encode(msg, 1, "b1")
    assert len(frames) == 2 and frames[1] is big and small in frames[0]
    assert decode(frames).msg == msg
    inline = encode(ProduceRequest("t", 0, -1, 100, memoryview(b"abc")), 5, "p")
    assert len(inline) == 1 and decode(inline).msg.records == b"abc"


def test_memoryview_record_frames_decode_without_copy():
    frames = encode(ProduceRequest("t", 0, -1, 100, b"a" * BIG), 5, "p")
    frames[1] = memoryview(bytearray(b"x" * BIG))
    result = decode(frames)
    assert result.msg.records is frames[1]
    assert result.msg.records == b"x" * BIG


@settings(max_examples=500)
@given(st.lists(st.binary(max_size=64), max_size=4))
def test_decode_of_arbitrary_frames_never_raises(frames):
    assert isinstance(decode(frames), (Decoded, DecodeError))


@settings(max_examples=500)
@given(st.lists(JSONISH | st.binary(max_size=8), max_size=12), st.lists(st.binary(max_size=8), max_size=3))
def test_decode_of_arbitrary_msgpack_headers_never_raises(header, rest):
    assert isinstance(decode([msgpack.packb(header), *rest]), (Decoded, DecodeError))


@settings(max_examples=300)
@given(ANY_MESSAGE, st.data())
def test_decode_of_mutated_valid_headers_never_raises(msg, data):
    """Replace one header item by something else: valid, or a DecodeError with the id."""
    frames = encode(msg, 42, "src")
    header = msgpack.unpackb(frames[0], strict_map_key=False)
    i = data.draw(st.integers(4, max(4, len(header) - 1)))
    if i < len(header):
        header[i] = data.draw(JSONISH | st.binary(max_size=4))
    result = decode([msgpack.packb(header), *frames[1:]])
    if type(result) is DecodeError:
        assert (result.request_id, result.source) == (42, "src")


def test_decode_never_raises_on_non_list_or_non_buffer_input():
    for garbage in (None, 5, "frames", [], [None], [5], ["str"], [object()], (b"\x90",)):
        assert type(decode(garbage)) is DecodeError


def header_of(msg, request_id=7, source="b1"):
    return msgpack.unpackb(encode(msg, request_id, source)[0], strict_map_key=False)


def decode_header(header, *rest):
    return decode([msgpack.packb(header), *rest])


@pytest.mark.parametrize("mutate, reason", [
    (lambda h: h.__setitem__(4, "1"), "FetchRequest.replica_id: expected int, got str"),
    (lambda h: h.__setitem__(4, True), "FetchRequest.replica_id: expected int, got bool"),
    (lambda h: h.__setitem__(8, [["t", 0, "41", -1, -1, 1, -1]]),
     "FetchRequest.partitions[0].fetch_offset: expected int, got str"),
    (lambda h: h.__setitem__(8, [["t", 0, 41]]), "FetchRequest.partitions[0]: expected 7 fields, got 3"),
    (lambda h: h.pop(), "FetchRequest: expected 5 fields, got 4"),
    (lambda h: h.append(1), "FetchRequest: expected 5 fields, got 6"),
    (lambda h: h.__setitem__(1, 99), "unknown message type 99"),
    (lambda h: h.__setitem__(1, "0"), "unknown message type 0"),
    (lambda h: h.__setitem__(0, 2), "unsupported wire version 2"),
])
def test_malformed_headers_give_a_reason_and_keep_id_and_source(mutate, reason):
    header = header_of(FetchRequest(1, partitions=[FetchPartition("t", 0, 41)]))
    mutate(header)
    assert decode_header(header) == DecodeError(reason, 7, "b1")


def test_unknown_error_code_is_a_decode_error():
    header = header_of(ErrorResponse(Errors.NONE, "x"))
    header[4] = "NO_SUCH_ERROR"
    assert decode_header(header) == DecodeError("ErrorResponse.error: unknown error code 'NO_SUCH_ERROR'", 7, "b1")


def test_record_frame_index_out_of_range_or_wrong_type():
    header = header_of(ProduceRequest("t", 0, -1, 100, b"a" * BIG))
    assert decode_header(header).reason == (
        "ProduceRequest.records: record frame index 1 out of range (message has 1 frames)")
    assert decode_header(header, b"abc").msg.records == b"abc"
    header[8] = 0  # frame 0 is the header itself
    assert "out of range" in decode_header(header, b"abc").reason
    header[8] = "abc"
    assert decode_header(header).reason == (
        "ProduceRequest.records: expected records (bytes) or a record frame index (int), got str")
    header[8] = 1
    assert "not bytes" in decode([msgpack.packb(header), "a str frame"]).reason


def test_unreadable_header_parts_are_none():
    assert decode_header([VERSION, 0, "7", "b1", 1, 1, 0, 1, []]) == DecodeError("request id is not an int", None, "b1")
    assert decode_header([VERSION, 0, 7, None]) == DecodeError("source is not a str", 7, None)
    assert decode_header({"a": 1}).request_id is None
    assert decode([b"\xc1"]).reason.startswith("header is not msgpack")
    assert decode([msgpack.packb([1, 2]) + b"x"]).reason.startswith("header is not msgpack")


def test_msgpack_extension_types_are_refused():
    header = header_of(BrokerHeartbeatRequest(1, 2, 3))
    packed = msgpack.packb(header[:-1] + [msgpack.ExtType(5, b"x")])
    assert decode([packed]).reason.startswith("header is not msgpack")


def test_optional_and_typed_dict_fields_are_checked():
    header = header_of(messages.CreateTopicsResponse({"orders": "NONE"}))
    header[4] = {"orders": 3}
    assert decode_header(header).reason == "CreateTopicsResponse.errors['orders']: expected str, got int"
    header = header_of(messages.MetadataRequest(None))
    assert decode_header(header).msg == messages.MetadataRequest(None)
    header[4] = ["a", 1]
    assert decode_header(header).reason == "MetadataRequest.topics[1]: expected str, got int"


def test_encode_refuses_what_is_not_a_top_level_message():
    with pytest.raises(TypeError):
        encode(FetchPartition("t", 0, 0), 1, "x")
    with pytest.raises(TypeError):
        encode({"not": "a message"}, 1, "x")
