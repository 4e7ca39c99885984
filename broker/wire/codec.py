"""Messages to ZeroMQ frames and back: pure, no sockets (the h11 half of `broker/wire/`).

Frame 0 is a msgpack header, one flat list::

    [VERSION, type_id, request_id, source, field_1, field_2, ...]

with the message's dataclass fields in declaration order; a nested dataclass is the list
of its own fields, an `Errors` travels as its string, `None` stays `None`. A `bytes` field
named `records` of more than `INLINE_RECORDS` bytes rides as a frame of its own and the
header holds that frame's index (a FetchResponse with N such partitions carries N record
frames), so bulk record data crosses the wire without a copy into or out of msgpack; a
smaller one rides in the header as msgpack bin, since every extra frame costs a ZeroMQ
send and receive (about 15 us each), more than copying a few kilobytes.

`decode` never raises: whatever arrives (garbage, wrong types, wrong field counts,
unknown type ids or error names, out-of-range frame indexes) becomes a `DecodeError`,
with the request id and source filled in when the header got that far, so that the
receiver can still answer with an ErrorResponse (DESIGN section 11). Every field is
checked against its annotation, so a handler never sees a str where an int is declared.

Record frames decode to the very object that was received: `bytes` stays `bytes`, a
`memoryview` or a zero-copy `zmq.Frame` becomes a read-only `memoryview` (bytes-like,
no copy). Per-type plans are built once at import: this is the replication hot path.
"""
from __future__ import annotations

import types
import typing
from dataclasses import dataclass, fields, is_dataclass
from operator import attrgetter
from typing import Any, Callable, Sequence

import msgpack

from broker.common.errors import Errors
from broker.protocol import messages
from broker.protocol.messages import MESSAGE_TYPES, NESTED

VERSION = 1
#: `records` values up to this many bytes travel inside the header, larger ones as frames.
INLINE_RECORDS = 4096
#: Header slots before the message's fields: version, type id, request id, source.
_PREAMBLE = 4

#: A frame as handed to `decode`: bytes, a memoryview, or anything with the buffer
#: protocol (a `zmq.Frame` received with copy=False).
FrameLike = Any


@dataclass(slots=True)
class Decoded:
    msg: Any
    request_id: int
    source: str


@dataclass(slots=True)
class DecodeError:
    """Why a message could not be decoded, and as much of its header as was readable."""
    reason: str
    request_id: int | None = None
    source: str | None = None


class _Invalid(Exception):
    """Raised inside the validators only; `decode` turns it into a DecodeError."""

    def __init__(self, detail: str, path: tuple[str, ...] = ()) -> None:
        super().__init__(detail)
        self.detail = detail
        self.path = path

    def under(self, step: str) -> _Invalid:
        self.path = (step, *self.path)
        return self


_ERRORS_BY_VALUE = {e.value: e for e in Errors}

# A validator takes the decoded header value and the frames, returns the typed value.
_Check = Callable[[Any, Sequence[FrameLike]], Any]
# An encoder takes a field value and the frame list it may append to.
_Encode = Callable[[Any, list], Any]


def _type_error(expected: str, value: Any) -> _Invalid:
    return _Invalid(f"expected {expected}, got {type(value).__name__}")


def _check_int(v: Any, frames: Sequence[FrameLike]) -> int:
    if type(v) is int:
        return v
    raise _type_error("int", v)


def _check_str(v: Any, frames: Sequence[FrameLike]) -> str:
    if type(v) is str:
        return v
    raise _type_error("str", v)


def _check_bool(v: Any, frames: Sequence[FrameLike]) -> bool:
    if type(v) is bool:
        return v
    raise _type_error("bool", v)


def _check_float(v: Any, frames: Sequence[FrameLike]) -> float:
    if type(v) is float or type(v) is int:
        return float(v)
    raise _type_error("float", v)


def _check_errors(v: Any, frames: Sequence[FrameLike]) -> Errors:
    if type(v) is str:
        err = _ERRORS_BY_VALUE.get(v)
        if err is not None:
            return err
        raise _Invalid(f"unknown error code {v[:64]!r}")
    raise _type_error("error code (str)", v)


def _check_any_dict(v: Any, frames: Sequence[FrameLike]) -> dict:
    if type(v) is dict:
        return v
    raise _type_error("dict", v)


def _check_record_frame(v: Any, frames: Sequence[FrameLike]) -> bytes | memoryview:
    if type(v) is bytes:
        return v  # inline
    if type(v) is not int:
        raise _type_error("records (bytes) or a record frame index (int)", v)
    if not 1 <= v < len(frames):
        raise _Invalid(f"record frame index {v} out of range (message has {len(frames)} frames)")
    frame = frames[v]
    if type(frame) is bytes or type(frame) is memoryview:
        return frame
    try:
        return memoryview(frame)
    except TypeError:
        raise _Invalid(f"record frame {v} is a {type(frame).__name__}, not bytes") from None


def _optional(inner: _Check) -> _Check:
    def check(v: Any, frames: Sequence[FrameLike]) -> Any:
        return None if v is None else inner(v, frames)
    return check


def _list_of(inner: _Check) -> _Check:
    def check(v: Any, frames: Sequence[FrameLike]) -> list:
        if type(v) is not list:
            raise _type_error("list", v)
        out = []
        for i, item in enumerate(v):
            try:
                out.append(inner(item, frames))
            except _Invalid as e:
                raise e.under(f"[{i}]") from None
        return out
    return check


def _dict_of(key: _Check, value: _Check) -> _Check:
    def check(v: Any, frames: Sequence[FrameLike]) -> dict:
        if type(v) is not dict:
            raise _type_error("dict", v)
        out = {}
        for k, item in v.items():
            try:
                out[key(k, frames)] = value(item, frames)
            except _Invalid as e:
                raise e.under(f"[{str(k)[:32]!r}]") from None
        return out
    return check


class _Plan:
    """What the codec knows about one dataclass, computed once from its annotations."""

    __slots__ = ("cls", "name", "type_id", "names", "get", "encoders", "checks")

    def __init__(self, cls: type, type_id: int | None) -> None:
        self.cls = cls
        self.name = cls.__name__
        self.type_id = type_id
        self.names = tuple(f.name for f in fields(cls))
        self.get = _getter(self.names)
        #: (index, encoder) for the fields that are not msgpack-ready as they are
        self.encoders: tuple[tuple[int, _Encode], ...] = ()
        self.checks: tuple[_Check, ...] = ()

    def build(self, plans: dict[type, _Plan]) -> None:
        hints = typing.get_type_hints(self.cls, vars(messages))
        encoders = []
        checks = []
        for i, name in enumerate(self.names):
            check, encoder = _compile(hints[name], name, plans, f"{self.name}.{name}")
            checks.append(check)
            if encoder is not None:
                encoders.append((i, encoder))
        self.encoders = tuple(encoders)
        self.checks = tuple(checks)

    def encode_fields(self, msg: Any, frames: list) -> list:
        values = list(self.get(msg))
        for i, encoder in self.encoders:
            values[i] = encoder(values[i], frames)
        return values

    def decode_fields(self, values: list, start: int, frames: Sequence[FrameLike]) -> Any:
        if len(values) - start != len(self.names):
            raise _Invalid(f"expected {len(self.names)} fields, got {len(values) - start}")
        args = []
        i = start
        for name, check in zip(self.names, self.checks):
            try:
                args.append(check(values[i], frames))
            except _Invalid as e:
                raise e.under(name) from None
            i += 1
        try:
            return self.cls(*args)
        except (TypeError, ValueError) as e:  # a message type that validates in __init__
            raise _Invalid(f"{self.name} rejected its fields: {e}") from None


def _getter(names: tuple[str, ...]) -> Callable[[Any], tuple]:
    if len(names) > 1:
        return attrgetter(*names)
    if len(names) == 1:
        one = attrgetter(names[0])
        return lambda obj: (one(obj),)
    return lambda obj: ()


def _encode_record_frame(value: Any, frames: list) -> int | bytes | memoryview:
    if len(value) <= INLINE_RECORDS:
        return value
    frames.append(value)
    return len(frames) - 1


def _compile(hint: Any, name: str, plans: dict[type, _Plan], where: str) -> tuple[_Check, _Encode | None]:
    """The validator and (when the value needs one) the encoder for an annotation."""
    if hint is bytes:
        if name != "records":
            raise TypeError(f"{where}: only a bytes field named 'records' can travel (as a frame)")
        return _check_record_frame, _encode_record_frame
    simple = {int: _check_int, str: _check_str, bool: _check_bool, float: _check_float,
              Errors: _check_errors, dict: _check_any_dict}
    if hint in simple:
        return simple[hint], None
    if isinstance(hint, type) and is_dataclass(hint):
        plan = plans[hint]

        def check_nested(v: Any, frames: Sequence[FrameLike]) -> Any:
            if type(v) is not list:
                raise _type_error(f"{plan.name} (list)", v)
            return plan.decode_fields(v, 0, frames)
        return check_nested, plan.encode_fields
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (types.UnionType, typing.Union) and len(args) == 2 and type(None) in args:
        inner = args[0] if args[1] is type(None) else args[1]
        check, encoder = _compile(inner, name, plans, where)
        if encoder is None:
            return _optional(check), None
        return _optional(check), (lambda v, frames: None if v is None else encoder(v, frames))
    if origin is list and len(args) == 1:
        check, encoder = _compile(args[0], name, plans, where)
        if encoder is None:
            return _list_of(check), None
        return _list_of(check), (lambda v, frames: [encoder(item, frames) for item in v])
    if origin is dict and len(args) == 2:
        key_check, key_enc = _compile(args[0], name, plans, where)
        value_check, value_enc = _compile(args[1], name, plans, where)
        if key_enc is not None or value_enc is not None:
            raise TypeError(f"{where}: dict keys and values must be msgpack-ready types")
        return _dict_of(key_check, value_check), None
    raise TypeError(f"{where}: the codec has no rule for annotation {hint!r}")


def _build_plans() -> tuple[dict[type, _Plan], tuple[_Plan, ...]]:
    plans: dict[type, _Plan] = {cls: _Plan(cls, None) for cls in NESTED}
    for type_id, cls in enumerate(MESSAGE_TYPES):
        plans[cls] = _Plan(cls, type_id)
    for plan in plans.values():
        plan.build(plans)
    return plans, tuple(plans[cls] for cls in MESSAGE_TYPES)


_PLANS, _BY_TYPE_ID = _build_plans()


def _reject_ext(code: int, data: bytes) -> Any:
    raise ValueError(f"msgpack extension type {code} is not used on the wire")


def encode(msg: Any, request_id: int, source: str) -> list[bytes | memoryview]:
    """Frames for `msg`: the header, then each `records` value as it is (no copy).

    Raises TypeError for an object that is not one of MESSAGE_TYPES: that is a bug in
    the sender, not bad input from the network.
    """
    plan = _PLANS.get(type(msg))
    if plan is None or plan.type_id is None:
        raise TypeError(f"not a top-level wire message: {type(msg).__name__}")
    frames: list = [b""]
    frames[0] = msgpack.packb([VERSION, plan.type_id, request_id, source,
                               *plan.encode_fields(msg, frames)])
    return frames


def decode(frames: list[FrameLike]) -> Decoded | DecodeError:
    """The message in `frames`, or a DecodeError saying why not; never raises."""
    if type(frames) is not list and type(frames) is not tuple:
        return DecodeError(f"frames must be a list, got {type(frames).__name__}")
    if not frames:
        return DecodeError("no frames")
    try:
        header = msgpack.unpackb(frames[0], raw=False, strict_map_key=False, ext_hook=_reject_ext)
    except (ValueError, TypeError) as e:
        return DecodeError(f"header is not msgpack: {type(e).__name__}: {str(e)[:120]}")
    if type(header) is not list or len(header) < _PREAMBLE:
        return DecodeError(f"header must be a list of at least {_PREAMBLE} items")
    version, type_id, request_id, source = header[0], header[1], header[2], header[3]
    request_id = request_id if type(request_id) is int else None
    source = source if type(source) is str else None
    if request_id is None:
        return DecodeError("request id is not an int", None, source)
    if source is None:
        return DecodeError("source is not a str", request_id, None)
    if version != VERSION or type(version) is not int:
        return DecodeError(f"unsupported wire version {str(version)[:32]}", request_id, source)
    if type(type_id) is not int or not 0 <= type_id < len(_BY_TYPE_ID):
        return DecodeError(f"unknown message type {str(type_id)[:32]}", request_id, source)
    plan = _BY_TYPE_ID[type_id]
    try:
        msg = plan.decode_fields(header, _PREAMBLE, frames)
    except _Invalid as e:
        where = ".".join((plan.name, *e.path)).replace(".[", "[")
        return DecodeError(f"{where}: {e.detail}", request_id, source)
    return Decoded(msg, request_id, source)
