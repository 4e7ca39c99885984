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

    def wants(self) -> str:
        return f"`{self.name}` present"


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

    def wants(self) -> str:
        return f"`{self.name}` {'one of ' + ', '.join(self.values) if len(self.values) > 1 else '= ' + self.values[0]}"


@dataclass(frozen=True)
class Other:
    """The field holds something other than `value` (null when the field is)."""

    name: str
    value: str

    def sql(self) -> str:
        return f"{self.name} <> '{self.value}'"

    def arrow(self) -> pc.Expression:
        return pc.field(self.name) != self.value

    def wants(self) -> str:
        return f"`{self.name}` not {self.value}"


@dataclass(frozen=True)
class Prefix:
    """The field's text starts with `prefix` (null when the field is)."""

    name: str
    prefix: str

    def sql(self) -> str:
        return f"{self.name} LIKE '{self.prefix}%'"

    def arrow(self) -> pc.Expression:
        return pc.starts_with(pc.field(self.name), pattern=self.prefix)

    def wants(self) -> str:
        return f"`{self.name}` starting {self.prefix}"


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


Rule = Present | OneOf | Other | Prefix | AllOf | AnyOf


def unmet(rule: Rule, line: dict) -> list[str]:
    """What of `rule` the fields of one line (as JSON gives them, strings compared as the
    readers compare them) do not hold, in words: for the message that names a line that does
    not match (a tester read `acks: '-1'` as a field missing, from the SQL predicate quoted)."""
    if isinstance(rule, AllOf):
        return [why for term in rule.terms for why in unmet(term, line)]
    if isinstance(rule, AnyOf):  # the nearest alternative's wants: the fewest missed, the most met
        each = sorted(((unmet(term, line), -_met(term, line)) for term in rule.terms), key=lambda u: (len(u[0]), u[1]))
        if not each[0][0]:
            return []
        if (len(each[0][0]), each[0][1]) < (len(each[1][0]), each[1][1]):
            return each[0][0]
        return [", or ".join(_wanted(term) for term in rule.terms)]
    value = line.get(rule.name)
    held = {Present: lambda: value is not None,
            OneOf: lambda: value is not None and str(value) in rule.values,
            Other: lambda: value is not None and str(value) != rule.value,
            Prefix: lambda: isinstance(value, str) and value.startswith(rule.prefix)}[type(rule)]()
    if held:
        return []
    return [f"{rule.wants()} ({'missing' if value is None else f'it is {value!r}'})"]


def _met(rule: Rule, line: dict) -> int:
    """How many of `rule`'s terms the line holds (a term of several counts as one each)."""
    if isinstance(rule, AllOf):
        return sum(_met(term, line) for term in rule.terms)
    return int(not unmet(rule, line))


def _wanted(rule: Rule) -> str:
    if isinstance(rule, AllOf | AnyOf):
        return f"({', '.join(_wanted(t) for t in rule.terms)}, all of them)" if isinstance(rule, AllOf) else \
            f"({', or '.join(_wanted(t) for t in rule.terms)})"
    return rule.wants()


def present(*names: str) -> tuple[Present, ...]:
    """Each of `names` is present."""
    return tuple(Present(n) for n in names)
