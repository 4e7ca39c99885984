"""Reading a topology file: YAML that refuses duplicate keys, then `parse_topology`.

PyYAML lets the last of two equal keys win without a word, which would run a topology other
than the one the user reads; so duplicates are errors here, with the line of each.
"""
from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Any

import yaml

from testbed.config.parser import TopologyError, parse_topology
from testbed.config.topology_spec import Topology

#: libyaml's scanner and emitter under PyYAML's own safe constructor and representer, where
#: PyYAML was built with it: the same values and bytes as `yaml.safe_load` and
#: `yaml.safe_dump`, ten times faster. For the files isrlab writes and reads back in bulk (a
#: sim seed's topology.yaml, a judged run's); a user's topology keeps the strict pure loader.
FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
FAST_SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


#: the longest file isrlab reads as YAML (the longest shipped one is a few KiB)
MAX_FILE_BYTES = 16 * 2**20
#: the keys only a matrix file has (`testbed.matrix.spec`): a topology never has them
MATRIX_ONLY_KEYS = frozenset({"base", "vary", "seeds"})


def matrix_file_problem(data: object) -> str | None:
    """What a file's data is when it is a matrix file given where a topology is expected (its
    keys read as a topology's unknown ones, and every topology key as missing); None for any
    other data."""
    keys = sorted(MATRIX_ONLY_KEYS.intersection(data)) if isinstance(data, dict) and "cluster" not in data else []
    return f"a matrix file (it has {', '.join(f'{k}:' for k in keys)}), not a topology" if keys else None


def load_topology(path: str | Path, seed: int | None = None) -> Topology:
    """Read, parse and validate a topology file; `seed` (from `--seed`) replaces the file's."""
    source = str(path)
    data = read_yaml(path)
    if (problem := matrix_file_problem(data)) is not None:
        raise TopologyError([f"{source}: {problem}: run its cells with `python run.py matrix {source}`"])
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise TopologyError([f"{source}: seed: --seed {seed!r} is not a non-negative integer"])
        if isinstance(data, dict):
            # the seed decides placement, which faults naming replicas are checked against
            data = {**data, "seed": seed}
    return parse_topology(data, source)


def read_yaml(path: str | Path) -> Any:
    """The YAML data of a file isrlab reads (a topology, a matrix, a fault schedule), with
    duplicate keys refused; every error names the file (and the line where YAML knows it)."""
    source = str(path)
    try:
        kind = os.stat(path).st_mode  # before opening: opening a FIFO waits for a writer
        if stat.S_ISDIR(kind):
            raise TopologyError([f"{source}: a directory, not a file (expected a YAML file)"])
        if not stat.S_ISREG(kind):  # a FIFO waited for ever, /dev/zero was read until memory ran out
            raise TopologyError([f"{source}: not a regular file (expected a YAML file)"])
        with open(path, "rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
        if len(data) > MAX_FILE_BYTES:
            raise TopologyError([f"{source}: larger than {MAX_FILE_BYTES // 2**20} MiB, no topology, matrix or "
                                 f"fault schedule is that long"])
        text = data.decode("utf-8")
    except FileNotFoundError:
        raise TopologyError([f"{source}: no such file"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TopologyError([f"{source}: cannot read the file ({exc})"]) from None
    return parse_yaml(text, source)


def parse_yaml(text: str, source: str) -> Any:
    """YAML text with duplicate keys refused (`read_yaml` without the file: a lab guide's
    front matter); every error names `source`."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        raise TopologyError([_yaml_error(source, exc)]) from None
    except yaml.reader.ReaderError as exc:  # PyYAML's own text spans two lines and counts characters
        raise TopologyError([_character_error(source, text, exc)]) from None
    except yaml.YAMLError as exc:
        raise TopologyError([f"{source}: invalid YAML: {exc}"]) from None
    except RecursionError:
        raise TopologyError([f"{source}: invalid YAML: lists or mappings nested too deeply to read"]) from None
    except ValueError as exc:  # a value YAML types but Python refuses: 2026-13-45, a number of 5,000 digits
        why = ("a number of more than 4,300 digits, too long to read" if "integer string conversion" in str(exc)
               else f"a value that cannot be read ({exc})")
        raise TopologyError([f"{source}: invalid YAML: {why}"]) from None


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys, which PyYAML would silently let the last win."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the base class reports it with its line
                continue
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first given on line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def _yaml_error(source: str, exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    problem = exc.problem or exc.context or "syntax error"
    context = f" ({exc.context})" if exc.context and exc.problem else ""
    return f"{source}: {where}invalid YAML: {problem}{context}"



def _character_error(source: str, text: str, exc: yaml.reader.ReaderError) -> str:
    before = text[:exc.position]
    line, column = before.count("\n") + 1, exc.position - (before.rfind("\n") + 1) + 1
    character = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
    return (f"{source}: line {line}, column {column}: invalid YAML: the character U+{character:04X} is not "
            f"allowed (YAML allows no control character but tab and line ends: is this a binary file?)")


# Integers as YAML 1.2 reads them, which is what "numbers of the digits 0-9" means: PyYAML reads
# YAML 1.1, where `010` is 8, `0x10` 16, `1_000` 1000 and `1:30` 90, each without a word. Those
# forms stay strings here, so validate names them; an integer is read in base 10. (Floats keep
# YAML 1.1's forms: the writer of a run's topology.yaml quotes by them.)
_INT = "tag:yaml.org,2002:int"
_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != _INT]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()}
_StrictLoader.add_implicit_resolver(_INT, re.compile(r"^[-+]?[0-9]+$"), list("-+0123456789"))
_StrictLoader.add_constructor(_INT, lambda loader, node: int(loader.construct_scalar(node), 10))
