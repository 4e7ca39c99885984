"""The errors of a matrix's invalid cells, each said once, with the part of the matrix it
belongs to.

Only whole cells are judged: a varied value or a schedule may be wrong on the base alone and
right beside another value (`replication_factor: 1` with `min_insync_replicas: 1`, a fault
at 15 s with `duration: 20s`), so nothing is refused for what it does alone. But an error
that every cell of a base has, or every cell holding one value or one schedule, is said once
with that (the base, the key, the value, the schedule) rather than once per cell; any other
is said with the first cell that has it and how many more do.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.common.words import counted
from testbed.config.walker import yaml_value
from testbed.matrix.spec import MatrixSpec

Settings = tuple[tuple[str, Any], ...]


@dataclass(frozen=True)
class Failed:
    """One invalid cell: what it varies, its schedule, and its errors as `key path: what was
    expected`, without the cell's own source (which differs from cell to cell)."""

    id: str
    settings: Settings
    schedule: str | None
    errors: tuple[str, ...]


def explain(spec: MatrixSpec, base: Path, failed: list[Failed], cells: int,
            alone: Callable[[Settings, str | None], list[str]]) -> list[str]:
    """Every error of the invalid cells of `base` (`cells` cells in all, valid or not),
    each once. `alone(settings, schedule)` gives the errors of the base with only those
    applied: an error a cell has is pinned on a part of the matrix only when that part
    alone gives it and every cell holding that part has it."""
    # by position: two values that show alike (`2`, `"2"`) give two cells one id (refused too)
    left = [list(f.errors) for f in failed]
    out: list[str] = []

    def claim(errors: list[str], holds: Callable[[Failed], bool], expected: int, label: str) -> None:
        for error in errors:
            holders = [k for k, f in enumerate(failed) if holds(f) and error in left[k]]
            if len(holders) == expected:
                for k in holders:
                    left[k].remove(error)
                out.append(f"{label}: {error}")

    claim(alone((), None), lambda f: True, cells, f"{spec.source} (base {base})")
    for key, values in spec.vary:
        each = [alone(((key, value),), None) for value in values]
        if len(values) > 1:  # every value gives it: the key itself is wrong
            claim([e for e in each[0] if all(e in found for found in each)], lambda f: True, cells,
                  f"{spec.source} (vary {key}, base {base})")
        for value, found in zip(values, each, strict=True):
            claim(found, lambda f, k=key, v=value: same(dict(f.settings)[k], v), cells // len(values),
                  f"{spec.source} (vary {key}={quoted(value, values)}, base {base})")
    files = dict(spec.schedule_files)
    for name, _ in spec.schedules:
        for error in alone((), name):
            claim([error], lambda f, s=name: f.schedule == s, cells // len(spec.schedules),
                  _label(spec, files, name, error, f"base {base}", f"faults {name}, base {base}"))
    shared: dict[str, list[Failed]] = {}
    for f, errors in zip(failed, left, strict=True):
        for error in dict.fromkeys(errors):
            shared.setdefault(error, []).append(f)
    for error, holders in shared.items():
        where = f"{first_and_alike([h.id for h in holders])}, base {base}"
        out.append(f"{_label(spec, files, holders[0].schedule, error, where, where)}: {error}")
    return list(dict.fromkeys(out))


def first_and_alike(ids: list[str]) -> str:
    """`cell X and 2 other cells alike`: what many cells share, said once with the first."""
    others = len(ids) - 1
    return f"cell {ids[0]}" + (f" and {counted(others, 'other cell')} alike" if others else "")


def _label(spec: MatrixSpec, files: dict[str, Path], schedule: str | None, error: str, in_file: str,
           in_matrix: str) -> str:
    """Where an error is: an error of a fault entry is in the schedule's file when the
    schedule is one (the matrix only names it), any other in the matrix."""
    if schedule in files and error.startswith("faults["):
        return f"{files[schedule]} (faults.{schedule} of {spec.source}, {in_file})"
    return f"{spec.source} ({in_matrix})"


def shown(value: Any) -> str:
    """A value as YAML writes it (`false`, `3`, `balanced`), and `none` for nothing."""
    return "none" if value is None else yaml_value(value)


def same(actual: Any, wanted: Any) -> bool:
    """YAML's `1` and `true` are equal in Python; a value is told apart by its type too."""
    return type(actual) is type(wanted) and actual == wanted


def quoted(value: Any, values: tuple[Any, ...]) -> str:
    """`value` as the matrix writes it, a string quoted where another of `values` shows
    alike (`'1'` beside `1`)."""
    text = shown(value)
    alike = any(shown(v) == text and not same(v, value) for v in values)
    return repr(value) if alike and isinstance(value, str) else text
