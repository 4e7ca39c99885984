"""What a record line must hold, written once and read two ways: as the Spark SQL predicate
Spark's reader evaluates in the ingest (and a mismatch's message quotes), and as the Arrow
expression the fast reader (`arrow_ingest`) evaluates on the rows it parsed. Two texts of one
rule would drift; a rule judged differently by the two readers would judge a run by the
reader that happened to take its file.

Null is false in both: a rule is read as `coalesce(rule, false)`, and no rule negates a
term that may be null, so SQL's and Arrow's three-valued logic give the same verdict.
"""
from __future__ import annotations

import operator
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from typing import ClassVar

import pyarrow.compute as pc


@dataclass(frozen=True)
class Present:
    """The field is in the line and not null."""

    name: str

    def sql(self) -> str:
        return f"{self.name} IS NOT NULL"

    def arrow(self) -> pc.Expression:
        return pc.field(self.name).is_valid()


@dataclass(frozen=True)
class OneOf:
    """The field holds one of `values`."""

    name: str
    values: tuple[str, ...]

    def sql(self) -> str:
        if len(self.values) == 1:
            return f"{self.name} = '{self.values[0]}'"
        return f"{self.name} IN ({', '.join(repr(v) for v in self.values)})"

    def arrow(self) -> pc.Expression:
        return pc.field(self.name).isin(list(self.values))


@dataclass(frozen=True)
class Other:
    """The field holds something other than `value` (null when the field is)."""

    name: str
    value: str

    def sql(self) -> str:
        return f"{self.name} <> '{self.value}'"

    def arrow(self) -> pc.Expression:
        return pc.field(self.name) != self.value


@dataclass(frozen=True)
class _Terms:
    """Terms joined by one connective; a term joined by the other is parenthesised."""

    terms: tuple[Rule, ...]
    word: ClassVar[str]
    join: ClassVar[Callable[[pc.Expression, pc.Expression], pc.Expression]]

    def sql(self) -> str:
        return f" {self.word} ".join(f"({t.sql()})" if isinstance(t, _Terms) and t.word != self.word else t.sql()
                                     for t in self.terms)

    def arrow(self) -> pc.Expression:
        return reduce(type(self).join, (t.arrow() for t in self.terms))


class AllOf(_Terms):
    """Every term holds."""

    word, join = "AND", operator.and_


class AnyOf(_Terms):
    """One term at least holds."""

    word, join = "OR", operator.or_


Rule = Present | OneOf | Other | AllOf | AnyOf


def present(*names: str) -> tuple[Present, ...]:
    """Each of `names` is present."""
    return tuple(Present(n) for n in names)
