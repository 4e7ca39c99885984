"""The cells of a matrix: every base x combination of varied values x fault schedule x seed,
each a whole topology checked by the topology parser, with an id that names what it varies
(`rack-outage-elr=false-unclean_recovery=none-outage-seed=2`)."""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import itertools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from testbed.common.words import counted
from testbed.config.loader import matrix_file_problem, read_yaml
from testbed.config.parser import TopologyError, parse_topology
from testbed.config import scalars
from testbed.config.specs import DEFAULT_EXPECT
from testbed.config.topology_spec import Topology
from testbed.config.walker import describe, is_digits
from testbed.matrix.cell_errors import Failed, Settings, explain, first_and_alike, quoted, same, shown
from testbed.matrix.spec import (
    SCHEDULE_KEY,
    SEED_KEY,
    TOPOLOGY_KEY,
    MatrixError,
    MatrixSpec,
    hashable,
    read_matrix,
    short_names,
)

#: `DEFAULT_EXPECT` as a topology's `expect:` block says it
_DEFAULTS = {name: e.value if e.op == "==" else str(e) for name, e in DEFAULT_EXPECT.items()}


@dataclass(frozen=True)
class Cell:
    id: str
    settings: tuple[tuple[str, Any], ...]  # the varied keys and this cell's values
    setting: str  # the same as the id shows them: `elr=false, unclean_recovery=none`
    schedule: str | None  # the fault schedule's name; None: the base's own faults
    seed: int
    topology: Topology

    def selectors(self) -> dict[str, Any]:
        return _selectors(self.settings, self.schedule, self.seed, self.topology.name)


def _selectors(settings: tuple[tuple[str, Any], ...], schedule: str | None, seed: int,
               topology: str | None) -> dict[str, Any]:
    """What `when:` and `--only` can name: varied keys, `faults`, `seed` and `topology`."""
    return dict(settings) | {SCHEDULE_KEY: schedule, SEED_KEY: seed, TOPOLOGY_KEY: topology}


_ANY_CELL = "(cell \N{REPLACEMENT CHARACTER}, "  # a note's cell, taken out to find the notes alike


def cell_notes(cells: list[Cell]) -> list[str]:
    """The notes of the cells (valid, but will not do what it seems to: `validate`'s `note:`
    lines of a topology), each said once with the first cell that has it and how many more
    do. trial34: a matrix crossing `unclean_leader_election: true` with `unclean_recovery:
    manual` ran the legacy election in silence; a topology of the same cell says why."""
    shared: dict[str, list[str]] = {}
    for cell in cells:
        for note in cell.topology.notes:
            shared.setdefault(note.replace(f"(cell {cell.id}, ", _ANY_CELL, 1), []).append(cell.id)
    return [note.replace(_ANY_CELL, f"({first_and_alike(ids)}, ", 1) for note, ids in shared.items()]


def repeated_ids(cells: list[Cell]) -> list[str]:
    """Cell ids that two cells share (two bases of one name, two matrix files alike)."""
    return sorted(i for i, n in Counter(c.id for c in cells).items() if n > 1)


def expand_file(path: Path, seeds: int | None = None) -> list[Cell]:
    """The cells of the matrix file `path` (`seeds` as `--seeds`); raises MatrixError with the
    file's every problem at once, its `expect:` rules' and its cells' together (a tester fixed
    a file in three rounds: two rule errors, then the cells' five)."""
    spec, errors = read_matrix(path)
    if spec is None:
        raise MatrixError(errors or [f"{path}: invalid matrix"])
    try:
        cells = expand(spec.with_seed_count(seeds) if seeds else spec)
    except MatrixError as exc:
        errors += [e for e in exc.errors if e not in errors]
    if errors:
        raise MatrixError(errors)
    return cells


def expand(spec: MatrixSpec) -> list[Cell]:
    """Every cell of `spec`, in a fixed order (bases, then varied values in file order, then
    schedules, then seeds); raises MatrixError naming the matrix file, the part of the
    matrix (or the cell) and the topology key for every error of a cell whose topology is
    invalid, each error once (`cell_errors.explain`)."""
    cells: list[Cell] = []
    errors: list[str] = []
    keys = [key for key, _ in spec.vary]
    labels = _labels(keys)
    schedules: list[tuple[str | None, tuple[Any, ...] | None]] = list(spec.schedules) or [(None, None)]
    names: list[str] = []
    alike: list[str] = []  # values listed twice, which also give two cells one id
    for base in spec.bases:
        try:
            data = read_yaml(base)
        except TopologyError as exc:
            errors.extend(f"{spec.source}: base: {e}" for e in exc.errors)
            continue
        if not isinstance(data, dict):
            errors.append(f"{spec.source}: base: {base}: expected a topology (a mapping), got {describe(data)}")
            continue
        if (problem := matrix_file_problem(data)) is not None:
            errors.append(f"{spec.source}: base: {base}: {problem}: a base is a topology file (a matrix's bases can "
                          f"be listed: base: [a, b])")
            continue
        name = str(data.get("name", base.stem))
        names.append(name)
        ours: list[Cell] = []
        failed: list[Failed] = []
        for values in itertools.product(*(v for _, v in spec.vary)):
            settings = tuple(zip(keys, values, strict=True))
            for schedule, faults in schedules:
                for seed in spec.seeds if spec.seeds is not None else (data.get("seed", 0),):
                    shown_values = [f"{labels[k]}={shown(v)}" for k, v in settings]
                    parts = [name, *shown_values, *([schedule] if schedule else []), f"seed={seed}"]
                    cell_id = _fit("-".join(parts).replace("/", "_"))  # a directory's name: `rate=100/s` -> `rate=100_s`
                    source = f"{spec.source} (cell {cell_id}, base {base})"
                    try:
                        cell_data = _cell_data(data, settings, faults, seed, spec, schedule, source, name)
                        topology = parse_topology(cell_data, source)
                    except TopologyError as exc:
                        failed.append(Failed(cell_id, settings, schedule, tuple(_tail(e, source) for e in exc.errors)))
                        continue
                    ours.append(Cell(cell_id, settings, ", ".join(shown_values), schedule, seed, topology))
        if failed:
            errors.extend(explain(spec, base, failed, len(ours) + len(failed), _alone(spec, base, data)))
        alike.extend(_one_setting_twice(spec, ours))
        cells.extend(ours)
    errors.extend(alike)
    seeds = sorted({c.seed for c in cells})
    for rule in spec.rules:
        wanted = dict(rule.when).get(TOPOLOGY_KEY)
        if wanted is not None and names and wanted not in names:
            errors.append(f"{spec.source}: {rule.path}.when.topology: {wanted!r} is the name of no base "
                          f"({', '.join(names)})")
        seed = dict(rule.when).get(SEED_KEY)
        if spec.seeds is None and seed is not None and cells and seed not in seeds:  # the bases' own seeds
            errors.append(f"{spec.source}: {rule.path}.when.seed: {seed} is the seed of no cell (without seeds: "
                          f"each base's own: {', '.join(map(str, seeds))})")
    errors = list(dict.fromkeys(errors))
    twice = repeated_ids(cells)
    if twice and not alike:  # a value listed twice says why
        errors.append(f"{spec.source}: two cells would have the same id ({', '.join(twice[:3])}): two bases' "
                      f"topologies share a name (give them different names), or varied values differ only "
                      f"where an id has _ for / (a directory's name has no /)")
    if errors:
        raise MatrixError(errors)
    return cells


def _tail(error: str, source: str) -> str:
    """An error of a cell without the cell's source: `key path: what was expected`."""
    return error[len(source) + 2:] if error.startswith(f"{source}: ") else error


def _alone(spec: MatrixSpec, base: Path, data: dict[str, Any]) -> Callable[[Settings, str | None], list[str]]:
    """The errors (as `_tail` gives them) of `base` with only some settings or one schedule
    applied, for `explain` to pin a cell's error on the part of the matrix that gives it."""
    schedules = dict(spec.schedules)
    source = f"{spec.source} (base {base})"

    def errors(settings: Settings, schedule: str | None) -> list[str]:
        # a matrix with schedules replaces the base's faults in every cell: a value is held
        # against no faults here (a base's fault past a varied `duration` is in no cell)
        faults = schedules[schedule] if schedule is not None else (() if spec.schedules else None)
        try:
            parse_topology(_cell_data(data, settings, faults, data.get("seed", 0), None, schedule, source), source)
        except TopologyError as exc:
            return [_tail(e, source) for e in exc.errors]
        return []
    return errors


def _one_setting_twice(spec: MatrixSpec, cells: list[Cell]) -> list[str]:
    """Two values of a varied key that the topology reads as one setting (`1` and `"1"`,
    `all` and `-1` for acks, `1s` and `1000ms`): their cells would run the same topology
    twice (and `1` and `"1"` give one id). Found by comparing the topologies of cells that
    differ in that key alone."""
    out = []
    for i, (key, values) in enumerate(spec.vary):
        pairs = len(values) * (len(values) - 1) // 2
        decided: set[tuple[object, object]] = set()  # each pair of values is compared once
        groups: dict[tuple[Any, ...], list[Cell]] = {}  # cells alike but for this key
        for cell in cells:
            if len(decided) == pairs:
                break
            alike = groups.setdefault(
                (tuple(hashable(v) for k, v in cell.settings if k != key), cell.schedule, cell.seed), [])
            value = cell.settings[i][1]
            for twin in alike:
                pair = (hashable(twin.settings[i][1]), hashable(value))
                if pair not in decided:
                    decided.add(pair)
                    if _bare(twin.topology) == _bare(cell.topology):
                        both = f"{quoted(twin.settings[i][1], values)} and {quoted(value, values)}"
                        out.append(f"{spec.source}: vary.{key}: lists a value twice: {both} are one setting as the "
                                   f"topology reads them (their cells would run the same topology)")
            alike.append(cell)
    return out


def _bare(topology: Topology) -> Topology:
    """What a cell runs, without what names or judges it."""
    return dataclasses.replace(topology, source="", expect={})


#: The longest cell id kept whole (bytes): a cell's id names its run directory and the files
#: `<id>.retry1.yaml` beside it, and a file's name has at most 255 bytes
MAX_ID_BYTES = 160


def _fit(cell_id: str) -> str:
    """`cell_id`, or when too long for a file's name its head and a digest of the whole (ids
    that differ stay apart; long varied values made a traceback from the file system)."""
    raw = cell_id.encode()
    if len(raw) <= MAX_ID_BYTES:
        return cell_id
    head = raw[:MAX_ID_BYTES - 13].decode("utf-8", "ignore")
    return f"{head}-{hashlib.sha256(raw).hexdigest()[:12]}"


def _cell_data(base: dict[str, Any], settings: tuple[tuple[str, Any], ...], faults: tuple[Any, ...] | None,
               seed: int, spec: MatrixSpec | None, schedule: str | None, source: str,
               name: str | None = None) -> dict[str, Any]:
    data = copy.deepcopy(base)
    unset: list[str] = []  # a varied key the base has no place for: said with the cell's other errors
    for key, value in settings:
        try:
            _set_dotted(data, key, value, source)
        except TopologyError as exc:
            unset.extend(exc.errors)
    if faults is not None:
        data["faults"] = copy.deepcopy(list(faults))
    data["seed"] = seed
    selectors = _selectors(settings, schedule, seed, name)
    for rule in spec.rules if spec is not None else ():
        if all(same(selectors.get(k), v) for k, v in rule.when):
            # a matching rule's expectations replace the base's for the checks it names; a base
            # without `expect:` has the defaults, which a rule naming other checks keeps
            kept = dict(data.get("expect") or _DEFAULTS)
            if _admits_loss(rule.expect) and "inconsistent_offsets" not in rule.expect:
                kept.pop("inconsistent_offsets", None)
            data["expect"] = {**kept, **copy.deepcopy(rule.expect)}
    if unset:  # the rest of the cell is checked too: a tester's second varied key's error came a round later
        try:
            parse_topology(data, source)
        except TopologyError as exc:
            unset.extend(exc.errors)
        raise TopologyError(unset)
    return data


def _admits_loss(expect: dict[str, Any]) -> bool:
    """Whether a rule's `lost_writes` allows a loss (`">0"`, `"<=3"`). Such a rule does not
    keep the base's (or the defaults') `inconsistent_offsets`: a lost write whose offset the
    log later gave to another value is an inconsistent offset too, so beside DESIGN's own rule
    `{when: {protocol.elr: false}, expect: {lost_writes: ">0"}}` the kept
    `inconsistent_offsets: 0` failed the cell that lost 405 writes (trial34). A rule naming
    both keeps its own. A value that is no expectation is the cell's parser's to name."""
    if "lost_writes" not in expect:
        return False
    try:
        wanted = scalars.expectation(expect["lost_writes"])
    except ValueError:
        return False
    return any(wanted.holds(n) for n in {1, max(wanted.value, 1)})  # (a positive count it admits)


def _set_dotted(data: dict[str, Any], key: str, value: Any, source: str) -> None:
    """`topics.0.placement` -> data["topics"][0]["placement"] = value; a missing mapping on
    the way is made (`protocol:` absent from the base), a missing list entry is an error."""
    node: Any = data
    parts = key.split(".")
    for i, part in enumerate(parts):
        where, last = ".".join(parts[:i + 1]), i == len(parts) - 1
        if isinstance(node, list) and is_digits(part) and int(part) < len(node):
            if last:
                node[int(part)] = value
            node = node[int(part)]
        elif isinstance(node, list):
            raise TopologyError([f"{source}: vary: {key}: the base has no {where} "
                               f"(its list has {counted(len(node), 'entry', 'entries')})"])
        elif isinstance(node, dict):
            if last:
                node[part] = value
            elif part not in node and is_digits(parts[i + 1]):  # an entry of a list the base does not have
                raise TopologyError([f"{source}: vary: {key}: the base has no {where} (a list: give it in the base "
                                     f"to vary its entries)"])
            node = node.setdefault(part, {})
        else:
            raise TopologyError([f"{source}: vary: {key}: {'.'.join(parts[:i])} is not a mapping or list in the base"])


def _labels(keys: list[str]) -> dict[str, str]:
    """The name of each varied key in cell ids: its last part (`elr`), or the whole key when
    two varied keys end alike (`topics.0.placement`, `topics.1.placement`)."""
    short = {key: tail for tail, key in short_names(keys).items()}
    return {key: short.get(key, key) for key in keys}


def select(cells: list[Cell], only: str | None = None, shard: tuple[int, int] | None = None) -> list[Cell]:
    """`--only` (`key=value,...` over varied keys, `faults` and `seed`; or a part of the cell
    id) and `--shard K/N` (the K-th of N shares, by position: every host computes the same
    cells, so N hosts running K = 1..N run each cell once)."""
    out = cells
    if only:
        out = [c for c in out if _matches(c, only)]
    if shard is not None:
        k, n = shard
        out = [c for i, c in enumerate(out) if i % n == k - 1]
    return out


def _matches(cell: Cell, only: str) -> bool:
    if only == cell.id:  # an id holds `=`: one copied from a summary selects its cell, not a key
        return True
    if "=" not in only:
        return only in cell.id or only in cell.setting
    selectors = {k: shown(v) for k, v in cell.selectors().items()} | {
        k.split(".")[-1]: shown(v) for k, v in cell.settings}
    terms = [(key.strip(), value.strip()) for key, _, value in (t.partition("=") for t in only.split(","))]
    if any(key not in selectors for key, _ in terms):  # a piece of an id (`tiny-elr=true`), not key=value
        return only in cell.id or only in cell.setting
    # a value as the setting shows it (`rate=100/s`) or as the id spells it (`rate=100_s`)
    return all(value in (selectors[key], selectors[key].replace("/", "_")) for key, value in terms)


def parse_shard(text: str) -> tuple[int, int]:
    """`K/N` with 1 <= K <= N."""
    k, sep, n = text.partition("/")
    if not sep or not is_digits(k) or not is_digits(n) or not 1 <= int(k) <= int(n):
        raise ValueError(f"--shard {text!r}: expected K/N with 1 <= K <= N (e.g. 2/4)")
    return int(k), int(n)
