"""Hypothesis strategies for the wire messages, built from their annotations.

One builder serves the codec tests (any value the codec must carry) and the state-machine
fuzz tests (values close to what a real peer sends): they differ only in the strategies
for plain types and for a few named fields.
"""
from __future__ import annotations

import types
import typing
from dataclasses import fields, is_dataclass

from hypothesis import strategies as st

from broker.protocol import messages

Simple = dict[typing.Any, st.SearchStrategy]


def strategy_for(hint: typing.Any, simple: Simple, by_name: dict[str, st.SearchStrategy],
                 name: str = "") -> st.SearchStrategy:
    """A strategy for one messages.py annotation (the codec's typing rules)."""
    if name in by_name:
        return by_name[name]
    if hint in simple:
        return simple[hint]
    if isinstance(hint, type) and is_dataclass(hint):
        return message_strategy(hint, simple, by_name)
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):
        inner = next(a for a in args if a is not type(None))
        return st.none() | strategy_for(inner, simple, by_name, name)
    if origin is list:
        return st.lists(strategy_for(args[0], simple, by_name), max_size=4)
    if origin is dict:
        return st.dictionaries(strategy_for(args[0], simple, by_name), strategy_for(args[1], simple, by_name),
                               max_size=3)
    raise AssertionError(f"no strategy for {hint!r}")


def message_strategy(cls: type, simple: Simple, by_name: dict[str, st.SearchStrategy] | None = None
                     ) -> st.SearchStrategy:
    by_name = by_name or {}
    hints = typing.get_type_hints(cls, vars(messages))
    return st.builds(cls, **{f.name: strategy_for(hints[f.name], simple, by_name, f.name) for f in fields(cls)})


def any_message(simple: Simple, by_name: dict[str, st.SearchStrategy] | None = None) -> st.SearchStrategy:
    return st.one_of([message_strategy(cls, simple, by_name) for cls in messages.MESSAGE_TYPES])
