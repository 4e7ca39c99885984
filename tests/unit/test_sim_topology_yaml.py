"""A simulated seed writes its topology.yaml with libyaml's emitter (`FAST_SAFE_DUMPER`), a run of
processes with PyYAML's own: the bytes must be the same, for every topology of the tree and
for values that make an emitter quote, escape or fold."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from testbed.config.loader import load_topology
from testbed.config.loader import FAST_SAFE_DUMPER

ROOT = Path(__file__).resolve().parents[2]
TOPOLOGIES = sorted(p for p in (ROOT / "topologies").rglob("*.yaml") if "matrix" not in p.parts)


@pytest.mark.parametrize("path", TOPOLOGIES, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_topology_dumps_to_the_same_bytes_with_either_emitter(path: Path) -> None:
    data = load_topology(path).to_dict()
    assert yaml.dump(data, Dumper=FAST_SAFE_DUMPER, sort_keys=False) == yaml.safe_dump(data, sort_keys=False)


@pytest.mark.parametrize("value", [
    "plain", "", " leading and trailing ", "a: colon", "# hash", "'single' and \"double\"", "back\\slash",
    "tab\there", "new\nline", "ünïcödé ✓", "yes", "null", "1e3", "0x1f", "-", "* star", "& anchor",
    "word " * 40, "x" * 300, "a line that is long enough to be folded by the emitter at its best width " * 3,
])
def test_awkward_values_dump_to_the_same_bytes_with_either_emitter(value: str) -> None:
    data = {"name": "t", "description": value, "nested": [{"k": value, "n": 1.5, "b": True, "none": None}]}
    assert yaml.dump(data, Dumper=FAST_SAFE_DUMPER, sort_keys=False) == yaml.safe_dump(data, sort_keys=False)
