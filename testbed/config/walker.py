"""Walking raw YAML data while collecting every error instead of stopping at the first.

A user who fixes one typo per run of `run.py validate` gives up, so each error is recorded as
`<file>: <key.path>: <what was wrong and what was expected>` and the walk goes on. A value that
failed is replaced by INVALID, so checks that depend on it are skipped rather than reported twice.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any


class _Invalid:
    """Marks a value that failed validation (its error is already recorded)."""


INVALID: Any = _Invalid()
_ABSENT: Any = object()


def valid(*values: object) -> bool:
    return not any(v is INVALID for v in values)


def join(path: str, key: object) -> str:
    if is_int(key):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else str(key)


def is_digits(text: str) -> bool:
    """`text` is a plain decimal number of at most 9 digits: `str.isdigit` is true of `²` and
    of other scripts' digits, which `int` refuses or reads, and a number of thousands of
    digits is no id, index or count of this program."""
    return text.isascii() and text.isdigit() and len(text) <= 9


def describe(value: object) -> str:
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    if isinstance(value, str):  # its own length, not its quotes' too (a 101-character name read as 103)
        return _shortened(repr(value), len(value))
    return f"{type(value).__name__} {_shortened(repr(value))}"


#: a value quoted in an error is cut to this many characters (a whole file read as one
#: string, a number of a thousand digits)
_SHOWN = 80


def _shortened(text: str, length: int | None = None) -> str:
    return text if len(text) <= _SHOWN else \
        f"{text[:_SHOWN - 15]}... ({len(text) if length is None else length} characters)"


def yaml_value(value: object) -> str:
    """A value as YAML spells it (`true`, `null`, `300ms`), for messages about YAML files."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Walker:
    """The errors of one topology so far, and the checks every section makes of its raw data."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.errors: list[str] = []
        self.notes: list[str] = []  # what is valid but will not do what it seems to (`Topology.notes`)

    def error(self, path: str, message: str) -> None:
        self.errors.append(f"{self.source}: {path}: {message}" if path else f"{self.source}: {message}")

    def note(self, path: str, message: str) -> None:
        self.notes.append(f"{self.source}: {path}: {message}")

    def mapping(
        self, value: object, path: str, allowed: Iterable[str], required: Iterable[str] = (), what: str = ""
    ) -> dict[Any, Any] | None:
        allowed = tuple(allowed)
        if not isinstance(value, dict):
            self.error(path, f"expected a mapping{what}, got {describe(value)}")
            return None
        for key in value:
            if key not in allowed:
                self.error(join(path, key), f"unknown key (expected one of: {', '.join(allowed)})")
        for key in required:
            if key not in value:
                self.error(join(path, key), "required key missing")
        return value

    def field(self, m: dict[Any, Any], key: str, path: str, convert: Callable[[object], Any], default: Any = _ABSENT) -> Any:
        """`convert(m[key])`, `default` if the key is absent, INVALID if either fails."""
        if key not in m:
            return INVALID if default is _ABSENT else default
        try:
            return convert(m[key])
        except ValueError as exc:
            self.error(join(path, key), str(exc))
            return INVALID

    def sequence(self, value: object, path: str, what: str, min_len: int = 0) -> list[Any] | None:
        if not isinstance(value, list):
            self.error(path, f"expected a list of {what}, got {describe(value)}")
            return None
        if len(value) < min_len:
            self.error(path, f"expected at least {min_len} {what}, got {describe(value)}")
            return None
        return value
