"""A matrix file (DESIGN section 9): base topologies, the values to vary, named fault
schedules, seeds, and expectation rules, read and checked before any cell exists.

Every error names the matrix file and the key, as a topology's do; a cell's topology is
then checked by the topology parser itself (see `cells.expand`), so a varied value of the
wrong type is reported with the topology key it lands on.
"""
from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.config import scalars
from testbed.config.loader import MATRIX_ONLY_KEYS, read_yaml
from testbed.config.parser import TopologyError
from testbed.config.specs import EXPECT_KEYS
from testbed.config.walker import Walker, describe, is_int, join, yaml_value

MATRIX_KEYS = ("base", "vary", "faults", "seeds", "expect")
#: the most seeds one matrix runs of each cell (the cells are expanded before any runs)
MAX_SEEDS = 10_000
#: `when:` may select the fault schedule, the seed and the base (by its topology's name) too,
#: not only varied keys
SCHEDULE_KEY, SEED_KEY, TOPOLOGY_KEY = "faults", "seed", "topology"


class MatrixError(TopologyError):
    """Every problem found in one matrix file, each naming the file and the key."""


@dataclass(frozen=True)
class ExpectRule:
    """`{when: {...}, expect: {...}}`: the expectations (topology `expect:` form, checked per
    cell) of every cell whose varied values, schedule and seed match `when`."""

    when: tuple[tuple[str, Any], ...]
    expect: dict[str, Any]
    path: str  # `expect[i]`, for the errors found once the bases are read (an unknown topology name)


@dataclass(frozen=True)
class MatrixSpec:
    source: str
    bases: tuple[Path, ...]
    vary: tuple[tuple[str, tuple[Any, ...]], ...]  # dotted topology key -> its values, in file order
    schedules: tuple[tuple[str, tuple[Any, ...]], ...]  # name -> raw fault entries; () = each base's own
    seeds: tuple[int, ...] | None  # None: each base's own seed
    rules: tuple[ExpectRule, ...]
    #: name -> the file of each schedule given as one, which its errors name
    schedule_files: tuple[tuple[str, Path], ...] = ()

    def with_seed_count(self, n: int) -> MatrixSpec:
        """`--seeds N`: seeds 0..N-1 instead of the file's."""
        return dataclasses.replace(self, seeds=tuple(range(n)))


def read_matrix(path: str | Path) -> tuple[MatrixSpec | None, list[str]]:
    """A matrix file and its problems. The spec comes with its problems, made of the parts
    that parsed (a bad `seeds:` leaves each base's own seed, a schedule file that is missing
    leaves the other schedules), so that the cells it makes are checked too and a file's
    every error is told at once, not in rounds (`cells.expand_file`; a tester fixed a file in
    three rounds). None when it has no cells to make."""
    try:
        data = read_yaml(path)
    except TopologyError as exc:
        return None, list(exc.errors)
    if isinstance(data, dict) and "base" not in data and {"cluster", "topics", "workload"} & set(data):
        return None, [f"{path}: a topology, not a matrix file (a matrix names its topologies in base:): "
                      f"run it with `python run.py {path}`, or make it a matrix's base"]
    w = Walker(str(path))
    spec = _parse(w, data, Path(path).parent)
    return spec, list(w.errors)


def is_matrix_file(file: Path) -> bool:
    """A YAML file with a `base:`, `vary:` or `seeds:` key is a matrix; topologies and
    schedules have none. A file that does not parse counts as one, so that loading it says
    what is wrong."""
    try:
        data = read_yaml(file)
    except TopologyError:
        return True
    return isinstance(data, dict) and not MATRIX_ONLY_KEYS.isdisjoint(data)


def _parse(w: Walker, data: object, here: Path) -> MatrixSpec | None:
    if data is None:
        w.error("", "the file is empty (expected a mapping with at least base)")
        return None
    m = w.mapping(data, "", MATRIX_KEYS, required=("base",), what=f" (keys: {', '.join(MATRIX_KEYS)})")
    if m is None:
        return None
    bases = _bases(w, m.get("base"), here) if "base" in m else ()
    vary = _vary(w, m.get("vary", {}))
    schedules, files = _schedules(w, m.get("faults", {}), here)
    seeds = _seeds(w, m["seeds"]) if "seeds" in m else None
    # a varied key whose values are in error is still varied: a rule naming it is not also an
    # unknown key (trial37); its values unknown (None), a rule's value for it is not checked
    broken = {key: None for key in (m.get("vary") if isinstance(m.get("vary"), dict) else {})
              if isinstance(key, str) and key not in dict(vary)}
    selectable = broken | {key: values for key, values in vary} | {
        SCHEDULE_KEY: tuple(name for name, _ in schedules), SEED_KEY: seeds, TOPOLOGY_KEY: None}
    partial = bool(w.errors)  # the cells are made of what parsed: their errors are told too, not in a second round
    rules = _rules(w, m.get("expect", []), selectable)
    if partial and "faults" in m and not schedules:
        return None  # every cell would run its base's own faults, whose errors are beside the point
    return MatrixSpec(w.source, bases, vary, schedules, seeds, rules, files)


def _bases(w: Walker, value: object, here: Path) -> tuple[Path, ...]:
    items = value if isinstance(value, list) else [value]
    if not items:
        w.error("base", "expected a topology file or a list of them, got an empty list")
    out = []
    for i, item in enumerate(items):
        path = f"base[{i}]" if isinstance(value, list) else "base"
        if not isinstance(item, str) or not item:
            w.error(path, f"expected the path of a topology file, got {describe(item)}")
            continue
        file = locate(here, item)
        if file is None and any(d.is_dir() for d in (here / item, Path(item))):
            w.error(path, f"{item}: a directory, not a file (expected a topology file)")
            continue
        if file is None:
            beside, cwd = (here / item).absolute(), Path(item).absolute()
            w.error(path, f"{item}: no such file ({cwd})" if beside == cwd else  # the matrix is in the working directory
                    f"{item}: no such file, beside the matrix file ({here / item}) or in the working directory ({cwd})")
            continue
        out.append(file)
    names = [p.resolve() for p in out]
    if len(set(names)) != len(names):
        w.error("base", "names one topology file twice")
    return tuple(out)


def locate(here: Path, name: str) -> Path | None:
    """The file a matrix names: beside the matrix file (`../rack-outage.yaml`), else from the
    working directory (DESIGN section 9's `base: topologies/rack-outage.yaml` in
    `topologies/matrix/ci.yaml`, run from the project's root)."""
    for file in (here / name, Path(name).absolute()):
        if file.is_file():
            return file
    return None


def _vary(w: Walker, value: object) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    if not isinstance(value, dict):
        w.error("vary", f"expected a mapping of dotted topology keys to lists of values, got {describe(value)}")
        return ()
    out = []
    for key, values in value.items():
        path = join("vary", key)
        if not isinstance(key, str) or not all(key.split(".")):
            w.error(path, "expected a dotted topology key such as protocol.elr or topics.0.placement")
            continue
        if key.split(".")[0] in ("seed", "faults", "expect"):
            w.error(path, f"{key.split('.')[0]} is set by the matrix's own {key.split('.')[0]} key, not varied")
            continue
        if not isinstance(values, list) or not values:
            w.error(path, f"expected a non-empty list of values, got {describe(values)}")
            continue
        if any(isinstance(v, dict | list) for v in values):
            w.error(path, "expected scalar values (a number, a string, true/false); a mapping is varied by its "
                          "own keys, e.g. topics.0.flush.messages: [1, 100]")
            continue
        if len(set(map(hashable, values))) != len(values):
            seen: set[object] = set()
            twice = [v for v in values if hashable(v) in seen or seen.add(hashable(v))]
            w.error(path, f"lists a value twice: {', '.join(dict.fromkeys(map(yaml_value, twice)))}")
            continue
        out.append((key, tuple(values)))
    return tuple(out)


def _schedules(w: Walker, value: object, here: Path) -> tuple[tuple[tuple[str, tuple[Any, ...]], ...],
                                                             tuple[tuple[str, Path], ...]]:
    """The named schedules, and the file of each one given as a file."""
    if not isinstance(value, dict):
        w.error("faults", f"expected a mapping of schedule names to fault lists or files, got {describe(value)}")
        return (), ()
    out, files = [], []
    for name, entries in value.items():
        path = join("faults", name)
        if not isinstance(name, str) or not name or any(c in name for c in "/= "):
            w.error(path, "expected a schedule name without '/', '=' or spaces (it is part of each cell's id)")
            continue
        if isinstance(entries, str):
            file = locate(here, entries) or here / entries
            entries = _schedule_file(w, path, file)
            if entries is _UNREADABLE:
                continue
            files.append((name, file))
        elif not isinstance(entries, list):  # null too: a topology's `faults:` is refused alike
            w.error(path, f"expected a list of faults (as in a topology's faults:) or a file holding one, "
                          f"got {describe(entries)}")
            continue
        out.append((name, tuple(entries)))
    return tuple(out), tuple(files)


#: a schedule file that could not be read (its errors are reported already)
_UNREADABLE = object()
#: what a schedule file may hold, for the errors of one that holds something else
_SCHEDULE_FILE = "a list of faults, or a mapping whose only key is faults:"


def _schedule_file(w: Walker, path: str, file: Path) -> Any:
    """A schedule file holds a list of faults, or a mapping whose only key, `faults:`, is
    one: any other key would be dropped without a word (a whole topology given as a
    schedule ran with the base's cluster and topics, not its own)."""
    try:
        data = read_yaml(file)
    except TopologyError as exc:
        for message in exc.errors:
            w.error(path, message)
        return _UNREADABLE
    where = f"{file} ({path} of {w.source})"
    entries, key = data, ""
    if isinstance(data, dict) and {"cluster", "topics"} & set(data):  # one line, not one per key
        w.errors.append(f"{where}: a topology, not a schedule file (a schedule file holds {_SCHEDULE_FILE}): "
                        f"give the topology as a base, or a file of its faults as the schedule")
        return _UNREADABLE
    if isinstance(data, dict):
        unknown = [k for k in data if k != "faults"]
        for k in unknown:
            w.errors.append(f"{where}: {k}: unknown key (a schedule file holds {_SCHEDULE_FILE})")
        if "faults" not in data:
            w.errors.append(f"{where}: faults: required key missing (a schedule file holds {_SCHEDULE_FILE})")
        if unknown or "faults" not in data:
            return _UNREADABLE
        entries, key = data["faults"], "faults: "
    if not isinstance(entries, list):
        w.errors.append(f"{where}: {key}expected {'a list of faults' if key else _SCHEDULE_FILE}, "
                        f"got {describe(entries)}")
        return _UNREADABLE
    return entries


def _seeds(w: Walker, value: object) -> tuple[int, ...] | None:
    if is_int(value):
        if not 1 <= value <= MAX_SEEDS:
            w.error("seeds", f"expected a count from 1 to {MAX_SEEDS:,} or a list of seeds, got {describe(value)}")
            return None
        return tuple(range(value))
    if isinstance(value, list) and value and all(is_int(s) and 0 <= s <= scalars.MAX_SEED for s in value):
        twice = sorted({s for s in value if value.count(s) > 1})
        if twice:
            w.error("seeds", f"lists a seed twice: {', '.join(map(str, twice))}")
            return None
        return tuple(value)
    if isinstance(value, list) and value:
        for i, s in enumerate(value):
            if not (is_int(s) and 0 <= s <= scalars.MAX_SEED):
                w.error(f"seeds[{i}]", f"expected an integer seed from 0 to 2**63-1, got {describe(s)}")
        return None
    w.error("seeds", f"expected a count (>= 1) or a non-empty list of non-negative integers, got {describe(value)}")
    return None


def _rules(w: Walker, value: object, selectable: dict[str, Any]) -> tuple[ExpectRule, ...]:
    items = w.sequence(value, "expect", "rules ({when: {...}, expect: {...}})")
    if items is None:
        return ()
    out = []
    for i, item in enumerate(items):
        path = f"expect[{i}]"
        m = w.mapping(item, path, ("when", "expect"), required=("when", "expect"))
        if m is None or "when" not in m or "expect" not in m:
            continue
        whole, written = _full_keys(w, m["when"], join(path, "when"), selectable)
        when = w.mapping(whole, join(path, "when"), (*selectable, *short_names(selectable)))
        if not isinstance(m["expect"], dict):
            w.error(join(path, "expect"), f"expected a mapping of checks to expectations, got {describe(m['expect'])}")
            continue
        valid = {}  # what the cells take: a wrong check is said once, here, not again in every cell
        for name in m["expect"]:
            if name not in EXPECT_KEYS:
                w.error(join(join(path, "expect"), str(name)),
                        f"unknown check (expected one of: {', '.join(EXPECT_KEYS)})")
                continue
            before = len(w.errors)  # the value as a topology's expect: reads it, named where the rule has it
            w.field(m["expect"], name, join(path, "expect"), scalars.converged if name == "converged" else scalars.expectation)
            if len(w.errors) == before:
                valid[name] = m["expect"][name]
        if when is None:
            continue
        for key, wanted in when.items():
            known = selectable.get(key)
            if key in selectable and known is not None and hashable(wanted) not in set(map(hashable, known)):
                w.error(join(join(path, "when"), written.get(key, key)), _not_a_value(key, wanted, known))
        out.append(ExpectRule(tuple(when.items()), valid, path))
    return tuple(out)


def short_names(selectable: Iterable[str]) -> dict[str, str]:
    """The varied keys that cell ids name by their last part (`elr` for `protocol.elr`): those
    whose last part no other varied key shares. `when:` and `--only` take either name."""
    varied = [key for key in selectable if key not in (SCHEDULE_KEY, SEED_KEY, TOPOLOGY_KEY)]
    tails = [key.split(".")[-1] for key in varied]
    return {tail: key for key, tail in zip(varied, tails, strict=True) if tails.count(tail) == 1 and tail != key}


def _full_keys(w: Walker, when: object, path: str, selectable: dict[str, Any]) -> tuple[object, dict[Any, Any]]:
    """`when:` with each varied key named by its short name (`short_names`) as its whole key,
    and each whole key as the file writes it (for the errors); one named both ways is an
    error."""
    if not isinstance(when, dict):
        return when, {}
    short = short_names(selectable)
    out: dict[Any, Any] = {}
    written: dict[Any, Any] = {}
    for key, value in when.items():
        full = short.get(key, key) if isinstance(key, str) and key not in selectable else key
        if full in out:
            w.error(join(path, str(key)), f"names {full} twice (as {written[full]} and as {key}): give it once")
            continue
        out[full], written[full] = value, key
    return out, written


def _not_a_value(key: str, wanted: object, known: tuple[object, ...]) -> str:
    if not known:  # `faults` without schedules
        return f"{yaml_value(wanted)}: the matrix has no {key} to select (it names none)"
    shown = f"{yaml_value(wanted)!r} (a string)" if isinstance(wanted, str) and any(
        not isinstance(k, str) and yaml_value(k) == wanted for k in known) else yaml_value(wanted)
    return f"{shown} is none of the matrix's values for {key} ({', '.join(map(yaml_value, known))})"


def hashable(value: object) -> object:
    """YAML's `1` and `true` compare equal in Python; a value is told apart by its type too.
    A list or mapping (a varied assignment, a `when:` written as a list) by its JSON text."""
    if isinstance(value, list | dict):
        return (type(value).__name__, json.dumps(value, sort_keys=True, default=repr))
    return (type(value).__name__, value)
