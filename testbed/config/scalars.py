"""Converters from one raw YAML value to its typed value, or ValueError saying what was expected.

They see the value only, never its key path: `Walker.field` adds the path to the message.
"""
from __future__ import annotations

import re
from collections.abc import Callable

from broker.common.record_batch import HEADER_SIZE
from testbed.config.specs import Expectation, FlushPolicy
from testbed.config.units import (
    parse_duration,
    parse_duration_range,
    parse_rate,
    parse_size,
)
from testbed.config.walker import describe, is_int

_EXPECTATION_RE = re.compile(r"^(==|>=|<=|>|<)?\s*([0-9]{1,18})\Z", re.ASCII)


#: The most of each thing one host's run can hold. Beyond them a topology is refused before
#: anything is laid out: a trillion partitions or brokers made `validate` itself hang for
#: minutes and take gigabytes, where a run could never start.
MAX_NODES = 100  # brokers, and controllers, of a cluster
MAX_NODE_ID = 2**31 - 1  # Kafka's broker and node ids are int32
MAX_PARTITIONS = 10_000  # of one topic, its add-partitions over the run included
MAX_CLIENTS = 1_000  # processes of one producers: or consumers: entry
MAX_BATCH = 100_000  # records of one produce request, and requests in flight
MAX_RETRIES = 2**31 - 1  # Kafka's `retries` is an int32, its default this maximum
MAX_SEED = 2**63 - 1  # a seed is a 64-bit number (and a history's LongType)
MIN_SEGMENT_BYTES = HEADER_SIZE  # a segment holds one batch's header at least (`segment_bytes`)


def integer(minimum: int, maximum: int | None = None) -> Callable[[object], int]:
    def convert(value: object) -> int:
        if not is_int(value):
            raise ValueError(f"expected an integer >= {minimum}, got {describe(value)}")
        if value < minimum:
            raise ValueError(f"{value} is too small (expected an integer >= {minimum})")
        if maximum is not None and value > maximum:
            raise ValueError(f"{describe(value).removeprefix('int ')} is too large "
                             f"(expected an integer from {minimum} to {maximum:,})")
        return value

    return convert


def boolean(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {describe(value)}")
    return value


def choice(*options: str) -> Callable[[object], str]:
    def convert(value: object) -> str:
        if value not in options:
            raise ValueError(f"{describe(value)} is not allowed (expected one of: {', '.join(options)})")
        return value  # type: ignore[return-value]

    return convert


def text(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {describe(value)}")
    return value


def pattern(regex: re.Pattern[str], what: str) -> Callable[[object], str]:
    def convert(value: object) -> str:
        if not isinstance(value, str) or not regex.match(value):
            raise ValueError(f"{describe(value)} is not {what}")
        return value

    return convert


def rack(value: object) -> str:
    # `rack: 1` is as natural as `rack: a`; racks are compared as names.
    if is_int(value):
        return str(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"expected a rack name, got {describe(value)}")
    return value


def positive_duration(value: object) -> float:
    seconds = parse_duration(value)
    if seconds <= 0:
        raise ValueError(f"{value!r} must be longer than zero")
    return seconds


def positive_range(value: object) -> tuple[float, float]:
    low, high = parse_duration_range(value)
    if low <= 0:
        raise ValueError(f"{value!r} must be longer than zero")
    return low, high


#: a percentage as netem writes one (`loss 5%`)
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")


def probability(value: object) -> float:
    """A probability: a number from 0 to 1, or a percentage string from 0% to 100%."""
    if isinstance(value, str) and (m := _PERCENT.fullmatch(value.strip())) and float(m[1]) <= 100:
        return float(m[1]) / 100
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 <= value <= 1:
        raise ValueError(f"expected a probability between 0 and 1 (e.g. 0.05) or a percentage (e.g. 5%), "
                         f"got {describe(value)}")
    return float(value)


def acks(value: object) -> str:
    normal = {"all": "all", "-1": "all", "1": "1", "0": "0"}
    key = str(value) if is_int(value) or isinstance(value, str) else None
    if key not in normal:
        raise ValueError(f"{describe(value)} is not allowed (expected one of: all, -1, 1, 0)")
    return normal[key]


def producer_rate(value: object) -> float | None:
    if value == "max":
        return None
    rate = parse_rate(value, also="`max` for no limit")  # `MAX` was told what a rate is, not that `max` is one
    if rate <= 0:
        raise ValueError(f"{value!r} must be above zero (or `max` for no limit)")
    return rate


def expectation(value: object) -> Expectation:
    if is_int(value):
        written = str(value)
    elif isinstance(value, str):
        written = value.strip()
    else:
        raise ValueError(f"expected a count such as 0, '>0' or '<=3', got {describe(value)}")
    match = _EXPECTATION_RE.match(written)
    if match is None:
        raise ValueError(f"{value!r} is not an expectation (expected N, ==N, >N, >=N, <N or <=N with N >= 0)")
    parsed = Expectation(match.group(1) or "==", int(match.group(2)))
    if parsed.op == "<" and parsed.value == 0:
        raise ValueError(f"{value!r} can never hold: a count is never below 0")
    return parsed


def segment_bytes(value: object) -> int:
    """At least one record batch's header: a segment holds whole batches (the log rolls when
    the next one would pass this size, never leaving a segment empty), so a smaller size is
    one no segment can keep to."""
    size = parse_size(value)
    if size < MIN_SEGMENT_BYTES:
        raise ValueError(f"{value!r} is smaller than the header of one record batch (expected at least "
                         f"{MIN_SEGMENT_BYTES}B)")
    return size


def rack_list(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"expected a non-empty list of rack names, got {describe(value)}")
    racks = tuple(rack(r) for r in value)
    if len(set(racks)) != len(racks):
        raise ValueError(f"{value} names a rack twice (expected distinct rack names)")
    return racks


def converged(value: object) -> Expectation:
    return Expectation("==", int(boolean(value)))


def names_from(options: tuple[str, ...], what: str) -> Callable[[object], tuple[str, ...]]:
    def convert(value: object) -> tuple[str, ...]:
        if not isinstance(value, list) or not value:
            raise ValueError(f"expected a non-empty list of {what} ({', '.join(options)}), got {describe(value)}")
        bad = [v for v in value if v not in options]
        if bad:
            raise ValueError(f"unknown {what} {', '.join(map(repr, bad))} (expected some of: {', '.join(options)})")
        return tuple(value)

    return convert


def flush(value: object) -> FlushPolicy:
    if value == "always":
        return FlushPolicy(always=True)
    if value == "on-roll":
        return FlushPolicy(on_roll=True)
    expected = "expected always, on-roll, or {messages: N, interval: D} with either or both keys"
    if not isinstance(value, dict) or not value:
        raise ValueError(f"{describe(value)} is not a flush policy ({expected})")
    unknown = [str(key) for key in value if key not in ("messages", "interval")]
    if unknown:
        raise ValueError(f"unknown key {', '.join(unknown)} ({expected})")
    try:
        messages = integer(1)(value["messages"]) if "messages" in value else None
    except ValueError as exc:
        raise ValueError(f"messages: {exc}") from None
    try:
        interval = positive_duration(value["interval"]) if "interval" in value else None
    except ValueError as exc:
        raise ValueError(f"interval: {exc}") from None
    return FlushPolicy(messages=messages, interval=interval)
