"""Durations, sizes and rates as people write them in topology files.

A topology says `250ms`, `1MiB` or `500/s`; everything downstream wants plain seconds, bytes
and records per second. Parsing goes through `Decimal` so that `format_*` can write a value
back in a form that parses to exactly the same float: the resolved topology a run leaves
behind must reproduce the run. Every parser raises `ValueError` with a message that says
what was expected, without the key path, which only the caller knows.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, localcontext

# Enough digits for any finite float, written out in full in any unit.
_PRECISION = 2000

_DURATION_UNITS: dict[str, Decimal] = {
    "s": Decimal(1),
    "m": Decimal(60),
    "ms": Decimal("0.001"),
    "us": Decimal("0.000001"),
}
_SIZE_UNITS: dict[str, int] = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10, "B": 1}
_RATE_UNITS: dict[str, Decimal] = {"s": Decimal(1), "m": Decimal(60)}

_NUMBER = r"([0-9]+(?:\.[0-9]+)?)"
_DURATION_RE = re.compile(rf"^{_NUMBER}\s*(us|ms|s|m)\Z", re.ASCII)
_SIZE_RE = re.compile(rf"^{_NUMBER}\s*(B|KiB|MiB|GiB)\Z", re.ASCII)
_BARE_RE = re.compile(rf"^{_NUMBER}\Z", re.ASCII)
_RATE_RE = re.compile(rf"^{_NUMBER}\s*/\s*(s|m)\Z", re.ASCII)


def _is_number(value: object) -> bool:
    # YAML gives `true` as a bool, and bool is an int subclass: it is never a number here.
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _plain(number: Decimal) -> str:
    """A decimal without exponent or trailing zeros: the form the parsers accept."""
    text = format(number, "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def parse_duration(value: object) -> float:
    """`250ms`, `5s`, `2m`, `1.5s`, `10us` -> seconds.

    A bare number is refused: `timeout: 5` is ambiguous between seconds and milliseconds, and
    Kafka's own settings use milliseconds, so guessing would be wrong half the time.
    """
    if _is_number(value) and not math.isfinite(value):  # "write nans" was no help
        raise ValueError(f"expected a duration such as 250ms or 5s, got {value}")
    if _is_number(value) or isinstance(value, str) and _BARE_RE.match(value.strip()):
        bare = str(value).strip()
        raise ValueError(f"{bare} is a bare number; a duration needs a unit: us, ms, s or m (write {bare}s, "
                         f"or {bare}ms: Kafka's own settings are in ms)")
    if not isinstance(value, str):
        raise ValueError(f"expected a duration such as 250ms or 5s, got {_describe(value)}")
    match = _DURATION_RE.match(value.strip())
    if match is None:
        raise ValueError(f"{value!r} is not a duration (expected a number and a unit: us, ms, s or m, e.g. 250ms)")
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        return _finite(float(Decimal(match.group(1)) * _DURATION_UNITS[match.group(2)]), "duration")


def format_duration(seconds: float) -> str:
    """The shortest whole number in some unit that parses back to exactly `seconds` (ties: seconds)."""
    if seconds < 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"cannot format {seconds!r} as a duration")
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        exact = Decimal(repr(float(seconds)))
        candidates = []
        for unit, size in _DURATION_UNITS.items():
            amount = exact / size
            if amount == amount.to_integral_value():
                candidates.append(f"{_plain(amount)}{unit}")
        if not candidates:
            return f"{_plain(exact / _DURATION_UNITS['us'])}us"
        return min(candidates, key=len)


def parse_duration_range(value: object) -> tuple[float, float]:
    """`300ms..600ms` -> (0.3, 0.6); a single duration is the range of one value."""
    if isinstance(value, str) and ".." in value:
        low_text, _, high_text = value.partition("..")
        low, high = parse_duration(low_text.strip()), parse_duration(high_text.strip())
        if low > high:
            raise ValueError(f"{value!r}: the low end is above the high end (expected low..high)")
        return low, high
    single = parse_duration(value)
    return single, single


def format_duration_range(bounds: tuple[float, float]) -> str:
    low, high = bounds
    return f"{format_duration(low)}..{format_duration(high)}"


def parse_size(value: object) -> int:
    """An int of bytes, or `512B`, `64KiB`, `1MiB`, `1.5GiB` (which must come to whole bytes).

    Decimal units (KB, MB) are refused rather than guessed: 1MB and 1MiB differ by 5%, enough
    to move a segment roll past the fault it was meant to precede.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected a size in bytes (an integer, or e.g. 64KiB, 1MiB), got {_describe(value)}")
    match = _SIZE_RE.match(value.strip())
    if match is None:
        raise ValueError(f"{value!r} is not a size (expected an integer of bytes or a number with B, KiB, MiB or GiB)")
    amount = Decimal(match.group(1)) * _SIZE_UNITS[match.group(2)]
    if amount != amount.to_integral_value():
        raise ValueError(f"{value!r} is not a whole number of bytes")
    return int(amount)


def format_size(size: int) -> str:
    """The largest binary unit that holds `size` exactly (1048576 -> `1MiB`)."""
    for unit, factor in _SIZE_UNITS.items():
        if size != 0 and size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


def parse_rate(value: object, also: str = "") -> float:
    """`500/s`, `30/m`, or a bare number of records per second; `also` names what else the
    caller takes, for the errors.

    A bare number is accepted here, unlike durations, because "per second" is the only reading
    anyone gives to `rate: 500`.
    """
    if _is_number(value):
        return _finite(float(value), "rate")
    if not isinstance(value, str):
        raise ValueError(f"expected a rate such as 500/s or 30/m{f', or {also}' if also else ''}, "
                         f"got {_describe(value)}")
    match = _RATE_RE.match(value.strip())
    if match is None:
        raise ValueError(f"{value!r} is not a rate (expected e.g. 500/s, 30/m{', ' if also else ' or '}a number "
                         f"per second{f', or {also}' if also else ''})")
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        return _finite(float(Decimal(match.group(1)) / _RATE_UNITS[match.group(2)]), "rate")


def _finite(number: float, what: str) -> float:
    """`number`, unless it is too large for a float (`inf`) or not a number (YAML's `.nan`):
    neither can be written back into the resolved topology a run leaves behind."""
    if not math.isfinite(number):
        raise ValueError(f"expected a finite {what}, got {'a number too large' if number == number else 'NaN'}")
    return number


def format_rate(per_second: float) -> str:
    with localcontext() as ctx:
        ctx.prec = _PRECISION
        return f"{_plain(Decimal(repr(float(per_second))))}/s"


def _describe(value: object) -> str:
    if value is None:
        return "nothing (null)"
    return f"{type(value).__name__} {value!r}"
