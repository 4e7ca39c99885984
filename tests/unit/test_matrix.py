"""The matrix file (DESIGN section 9, issue 11): its checks name file and key, its cells are
every base x varied values x schedule x seed with readable ids, rules set expectations,
`--only` and `--shard` select, and the exit code follows the cells' attempts."""
from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from testbed.analysis.verdict import RunVerdict
from testbed.config.specs import Expectation
from testbed.config.specs import DEFAULT_EXPECT
from testbed.matrix.cells import MAX_ID_BYTES, expand_file, parse_shard, select
from testbed.matrix.cli import load_cells
from testbed.matrix.results import CellResult, matrix_exit_code
from testbed.matrix.spec import MatrixError

ROOT = Path(__file__).resolve().parents[2]
BASE = {
    "name": "tiny", "seed": 5, "duration": "3s",
    "cluster": {"controllers": 1, "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]},
    "protocol": {"elr": True},
    "topics": [{"name": "orders", "partitions": 2, "replication_factor": 3, "min_insync_replicas": 2}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "50/s"}]},
    "faults": [{"at": "1s", "do": "kill", "target": "leader-of orders/0"}],
    "expect": {"lost_writes": 0, "duplicates": 0},
}


def write(tmp_path: Path, matrix: object, base: dict | None = None, name: str = "m.yaml") -> Path:
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(base or BASE), encoding="utf-8")
    path = tmp_path / name
    path.write_text(matrix if isinstance(matrix, str) else yaml.safe_dump(matrix, sort_keys=False), encoding="utf-8")
    return path


def errors_of(path: Path) -> str:
    """What `validate` and `matrix` say of the file (`expand_file`)."""
    with pytest.raises(MatrixError) as exc:
        expand_file(path)
    return str(exc.value)


def test_a_files_rule_errors_and_cell_errors_are_told_at_once(tmp_path: Path) -> None:
    """A tester's file with two errors in its `expect:` rule and five in its cells got the two
    first, and the five only once those were fixed (and one of the rule's, a base's name, in a
    third round): every error now comes in one pass."""
    path = write(tmp_path, {"base": "base.yaml",
                            "vary": {"protocol.elr": [True, "maybe"], "workload.producers.0.rate": ["50/s", "1/parsec"]},
                            "faults": {"late": [{"at": "9s", "do": "kill", "target": "broker:3"}]},
                            "expect": [{"when": {"elr": "perhaps", "topology": "nope"}, "expect": {"lost_writes": ">0"}}]})
    text = errors_of(path)
    for where in ("expect[0].when.elr: perhaps is none of the matrix's values",
                  "protocol.elr: expected true or false, got 'maybe'", "'1/parsec' is not a rate",
                  "faults[0].at: 9s is after the end of the run", "expect[0].when.topology: 'nope' is the name of no base"):
        assert where in text, f"{where!r} missing from:\n{text}"


@pytest.mark.parametrize(("matrix", "wanted"), [
    ({"base": "base.yaml", "vary": {"protocol.elr": [True, 3]}, "seeds": "two"},
     ["seeds: expected a count", "(vary protocol.elr=3, base {base}): protocol.elr: expected true or false"]),
    ({"base": "base.yaml", "faults": {"boom": [{"at": "1s", "do": "explode", "target": "broker:1"}],
                                      "missing": "nofile.yaml"}},
     ["faults.missing: {dir}/nofile.yaml: no such file", "(faults boom, base {base}): faults[0].do: 'explode'"]),
    ({"base": "base.yaml", "vary": {"protocol.elrr": [True, False], "topics.5.placement": ["rack-aware"]}},
     ["(vary protocol.elrr, base {base}): protocol.elrr: unknown key",
      "(vary topics.5.placement=rack-aware, base {base}): vary: topics.5.placement: the base has no topics.5"]),
])
def test_a_files_structural_errors_and_its_cells_errors_are_told_at_once(
        tmp_path: Path, matrix: dict, wanted: list[str]) -> None:
    """trial26: a bad `seeds:`, a missing schedule file or a varied key the base has no place
    for was said alone, and the cells' errors (a bad value, a bad fault, a second varied key)
    only once it was fixed."""
    text = errors_of(write(tmp_path, matrix))
    for where in wanted:
        where = where.format(base=tmp_path / "base.yaml", dir=tmp_path)
        assert where in text, f"{where!r} missing from:\n{text}"


def test_a_mapping_is_varied_by_its_own_keys_and_the_error_says_how(tmp_path: Path) -> None:
    """A tester varied a flush policy as whole mappings and was told only "expected scalar
    values": the error names the way that works, and that way makes the mapping's cells."""
    bad = write(tmp_path, {"base": "base.yaml", "vary": {"topics.0.flush": ["always", {"messages": 100}]}})
    assert (f"{bad}: vary.topics.0.flush: expected scalar values (a number, a string, true/false); a mapping is "
            f"varied by its own keys, e.g. topics.0.flush.messages: [1, 100]") in errors_of(bad)
    good = write(tmp_path, {"base": "base.yaml", "vary": {"topics.0.flush.messages": [1, 100]}}, name="good.yaml")
    assert [c.topology.topics[0].flush.messages for c in expand_file(good)] == [1, 100]


def test_cells_are_the_product_in_file_order_with_ids_naming_what_varies(tmp_path: Path) -> None:
    path = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False],
                                                          "protocol.unclean_recovery": ["none", "balanced"]},
                            "faults": {"kill": [{"at": "1s", "do": "kill", "target": "leader-of orders/0"}],
                                       "pause": [{"at": "1s", "do": "pause", "target": "followers-of orders/0"}]},
                            "seeds": 2})
    cells = expand_file(path)
    assert len(cells) == 2 * 2 * 2 * 2
    assert cells[0].id == "tiny-elr=true-unclean_recovery=none-kill-seed=0"
    assert cells[-1].id == "tiny-elr=false-unclean_recovery=balanced-pause-seed=1"
    assert len({c.id for c in cells}) == len(cells)
    last = cells[-1].topology
    assert (last.protocol.elr, last.protocol.unclean_recovery, last.seed) == (False, "balanced", 1)
    assert [f.do for f in last.faults] == ["pause"]  # the schedule replaces the base's faults
    assert cells[-1].setting == "elr=false, unclean_recovery=balanced"


def test_without_schedules_or_seeds_a_cell_keeps_the_bases_faults_and_seed(tmp_path: Path) -> None:
    cells = expand_file(write(tmp_path, {"base": "base.yaml", "vary": {"topics.0.placement":
                                                                               ["rack-aware", "round-robin"]}}))
    assert [c.id for c in cells] == ["tiny-placement=rack-aware-seed=5", "tiny-placement=round-robin-seed=5"]
    assert [f.do for f in cells[0].topology.faults] == ["kill"]
    assert cells[1].topology.topics[0].placement == "round-robin"


def test_keys_ending_alike_are_named_whole_in_ids(tmp_path: Path) -> None:
    base = {**BASE, "topics": BASE["topics"] + [{**BASE["topics"][0], "name": "audit"}]}
    cells = expand_file(write(tmp_path, {"base": "base.yaml", "vary": {
        "topics.0.placement": ["rack-aware"], "topics.1.placement": ["round-robin"]}}, base))
    assert cells[0].id == "tiny-topics.0.placement=rack-aware-topics.1.placement=round-robin-seed=5"


def test_rules_replace_the_bases_expectations_for_the_checks_they_name(tmp_path: Path) -> None:
    path = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
                            "faults": {"kill": [{"at": "1s", "do": "kill", "target": "leader-of orders/0"}],
                                       "none": []},
                            "expect": [{"when": {"protocol.elr": False}, "expect": {"lost_writes": ">0"}},
                                       {"when": {"protocol.elr": False, "faults": "none"},
                                        "expect": {"lost_writes": 0}}]})
    by_id = {c.id: c.topology.expect for c in expand_file(path)}
    assert by_id["tiny-elr=true-kill-seed=5"] == {"lost_writes": Expectation("==", 0),
                                                   "duplicates": Expectation("==", 0)}  # no rule: the base's
    assert by_id["tiny-elr=false-kill-seed=5"] == {"lost_writes": Expectation(">", 0),
                                                    "duplicates": Expectation("==", 0)}
    assert by_id["tiny-elr=false-none-seed=5"]["lost_writes"] == Expectation("==", 0)  # the later rule wins


def test_a_rule_names_a_varied_key_as_cell_ids_and_only_do(tmp_path: Path) -> None:
    """`when: {elr: false}` as `--only elr=false` and the id `tiny-elr=false-...` name it; a
    new user's rule written so was refused. A key named both ways, or a last part two varied
    keys share (their ids name them whole), is an error."""
    path = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
                            "expect": [{"when": {"elr": False}, "expect": {"lost_writes": ">0"}}]})
    by_id = {c.id: c.topology.expect["lost_writes"] for c in expand_file(path)}
    assert by_id == {"tiny-elr=true-seed=5": Expectation("==", 0), "tiny-elr=false-seed=5": Expectation(">", 0)}
    twice = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
                             "expect": [{"when": {"protocol.elr": True, "elr": False}, "expect": {"lost_writes": 0}}]},
                  name="twice.yaml")
    assert f"{twice}: expect[0].when.elr: names protocol.elr twice (as protocol.elr and as elr): give it once" \
        in errors_of(twice)
    other_way = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
                                 "expect": [{"when": {"elr": True, "protocol.elr": False},
                                             "expect": {"lost_writes": 0}}]}, name="other-way.yaml")
    assert (f"{other_way}: expect[0].when.protocol.elr: names protocol.elr twice (as elr and as protocol.elr): "
            f"give it once") in errors_of(other_way)
    wrong = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
                             "expect": [{"when": {"elr": "maybe"}, "expect": {"lost_writes": 0}}]}, name="wrong.yaml")
    assert (f"{wrong}: expect[0].when.elr: maybe is none of the matrix's values for protocol.elr (true, false)"
            in errors_of(wrong))  # the key as the file writes it
    base = {**BASE, "topics": BASE["topics"] + [{**BASE["topics"][0], "name": "audit"}]}
    alike = write(tmp_path, {"base": "base.yaml", "vary": {"topics.0.placement": ["rack-aware"],
                                                          "topics.1.placement": ["round-robin"]},
                             "expect": [{"when": {"placement": "rack-aware"}, "expect": {"lost_writes": 0}}]},
                  base, name="alike.yaml")
    assert (f"{alike}: expect[0].when.placement: unknown key (expected one of: topics.0.placement, "
            f"topics.1.placement, faults, seed, topology)") in errors_of(alike)


def test_a_rule_on_a_base_without_expectations_keeps_the_defaults_it_does_not_name(tmp_path: Path) -> None:
    """A base without `expect:` is held to the defaults; a rule naming another check adds it to
    them (a new user's rule `{duplicates: 0}` dropped them: a cell with 380 lost writes passed)."""
    base = {k: v for k, v in BASE.items() if k != "expect"}
    path = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
                            "expect": [{"when": {"protocol.elr": False}, "expect": {"duplicates": 0}}]}, base)
    by_id = {c.id: c.topology.expect for c in expand_file(path)}
    assert by_id["tiny-elr=true-seed=5"] == {}  # no rule: the run's defaults apply (`DEFAULT_EXPECT`)
    assert by_id["tiny-elr=false-seed=5"] == {**DEFAULT_EXPECT, "duplicates": Expectation("==", 0)}


def test_a_rule_that_admits_lost_writes_does_not_keep_the_bases_inconsistent_offsets(tmp_path: Path) -> None:
    """trial34: DESIGN's own rule `{when: {protocol.elr: false}, expect: {lost_writes: ">0"}}`
    kept the base's `inconsistent_offsets: 0`, and the cell that lost 405 writes failed on the
    offsets those writes had held, which later writes took. A rule that admits lost writes
    keeps the base's other checks but that one, unless it names it; a guard keeps them all."""
    base = {**BASE, "expect": {"lost_writes": 0, "inconsistent_offsets": 0, "placement_violations": 0}}
    path = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
                            "faults": {"kill": [{"at": "1s", "do": "kill", "target": "leader-of orders/0"}],
                                       "none": []},
                            "expect": [{"when": {"protocol.elr": False, "faults": "kill"},
                                        "expect": {"lost_writes": ">0"}},
                                       {"when": {"protocol.elr": False, "faults": "none"},
                                        "expect": {"lost_writes": "<=3", "inconsistent_offsets": "<=3"}},
                                       {"when": {"protocol.elr": True}, "expect": {"duplicates": 0}}]}, base)
    by_id = {c.id: c.topology.expect for c in expand_file(path)}
    assert by_id["tiny-elr=false-kill-seed=5"] == {"lost_writes": Expectation(">", 0),
                                                   "placement_violations": Expectation("==", 0)}
    assert by_id["tiny-elr=false-none-seed=5"]["inconsistent_offsets"] == Expectation("<=", 3)  # its own
    assert by_id["tiny-elr=true-kill-seed=5"] == {name: Expectation("==", 0) for name in (
        "lost_writes", "inconsistent_offsets", "placement_violations", "duplicates")}


def test_rules_and_only_select_a_base_by_its_topology_name(tmp_path: Path) -> None:
    (tmp_path / "other.yaml").write_text(yaml.safe_dump({**BASE, "name": "other"}), encoding="utf-8")
    path = write(tmp_path, {"base": ["base.yaml", "other.yaml"], "vary": {"protocol.elr": [True, False]},
                            "expect": [{"when": {"topology": "other", "protocol.elr": False},
                                        "expect": {"lost_writes": ">0"}}]})
    cells = expand_file(path)
    wants_loss = [c.id for c in cells if c.topology.expect["lost_writes"] == Expectation(">", 0)]
    assert wants_loss == ["other-elr=false-seed=5"]
    assert [c.id for c in select(cells, "topology=other,elr=true")] == ["other-elr=true-seed=5"]
    bad = write(tmp_path, {"base": "base.yaml", "expect": [{"when": {"topology": "nope"},
                                                            "expect": {"lost_writes": 0}}]}, name="bad.yaml")
    assert f"{bad}: expect[0].when.topology: 'nope' is the name of no base (tiny)" in errors_of(bad)


def test_schedules_from_files_relative_to_the_matrix(tmp_path: Path) -> None:
    (tmp_path / "schedules").mkdir()
    (tmp_path / "schedules" / "outage.yaml").write_text(yaml.safe_dump(
        {"faults": [{"at": "1s", "do": "pause", "target": "leader-of orders/1"}]}), encoding="utf-8")
    cells = expand_file(write(tmp_path, {"base": "base.yaml", "faults": {"outage": "schedules/outage.yaml"}}))
    assert [(c.id, [f.target for f in c.topology.faults]) for c in cells] == [
        ("tiny-outage-seed=5", ["leader-of orders/1"])]


def test_a_base_path_is_looked_up_beside_the_matrix_then_from_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DESIGN section 9's example: `base: topologies/rack-outage.yaml` in topologies/matrix/ci.yaml."""
    matrix_dir = tmp_path / "topologies" / "matrix"
    matrix_dir.mkdir(parents=True)
    (tmp_path / "topologies" / "tiny.yaml").write_text(yaml.safe_dump(BASE), encoding="utf-8")
    (matrix_dir / "ci.yaml").write_text(yaml.safe_dump({"base": "topologies/tiny.yaml", "seeds": 1}), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert [c.id for c in expand_file(matrix_dir / "ci.yaml")] == ["tiny-seed=0"]
    monkeypatch.chdir(tmp_path / "topologies")
    with pytest.raises(MatrixError, match=r"base: topologies/tiny.yaml: no such file, beside the matrix file"):
        expand_file(matrix_dir / "ci.yaml")
    # in the matrix's own directory both places are one file, named once (trial37: twice, as two)
    monkeypatch.chdir(matrix_dir)
    with pytest.raises(MatrixError) as info:
        expand_file(matrix_dir / "ci.yaml")
    assert f"base: topologies/tiny.yaml: no such file ({matrix_dir / 'topologies' / 'tiny.yaml'})" in str(info.value)


@pytest.mark.parametrize(("matrix", "expected"), [
    ("", "m.yaml: the file is empty"),
    ("base: base.yaml\nbase: base.yaml\n", "m.yaml: line 2, column 1: invalid YAML: duplicate key 'base'"),
    ({"vary": {}}, "m.yaml: base: required key missing"),
    ({"base": "nope.yaml"}, "m.yaml: base: " ),
    ({"base": "base.yaml", "bogus": 1}, "m.yaml: bogus: unknown key"),
    ({"base": "base.yaml", "vary": {"protocol.elr": []}}, "m.yaml: vary.protocol.elr: expected a non-empty list"),
    ({"base": "base.yaml", "vary": {"protocol.elr": [True, True]}}, "m.yaml: vary.protocol.elr: lists a value twice: true"),
    ({"base": "base.yaml", "vary": {"seed": [1, 2]}}, "m.yaml: vary.seed: seed is set by the matrix's own seed key"),
    ({"base": "base.yaml", "faults": {"a/b": []}}, "m.yaml: faults.a/b: expected a schedule name"),
    ({"base": "base.yaml", "faults": {"x": "missing.yaml"}}, "m.yaml: faults.x: "),
    ({"base": "base.yaml", "seeds": 0}, "m.yaml: seeds: expected a count from 1 to 10,000"),
    ({"base": "base.yaml", "seeds": [1, 1]}, "m.yaml: seeds: lists a seed twice: 1"),
    ({"base": "base.yaml", "seeds": [1, -2, "x"]}, "m.yaml: seeds[1]: expected an integer seed from 0 to 2**63-1, got int -2"),
    ({"base": "base.yaml", "expect": [{"when": {}, "expect": {"lost_wrties": 0}}]},
     "m.yaml: expect[0].expect.lost_wrties: unknown check (expected one of: lost_writes, "),
    ({"base": "base.yaml", "seeds": "three"}, "m.yaml: seeds: expected a count"),
    ({"base": "base.yaml", "expect": [{"when": {}, "expect": {"lost_writes": ">zero"}}]},
     "m.yaml: expect[0].expect.lost_writes: '>zero' is not an expectation"),
    ({"base": "base.yaml", "vary": {"protocol.elr": [True]}, "expect": [{"when": {"protocol.elr": "no"},
                                                                           "expect": {"lost_writes": 0}}]},
     "m.yaml: expect[0].when.protocol.elr: no is none of the matrix's values for protocol.elr (true)"),
    ({"base": "base.yaml", "expect": [{"when": {"protocol.elr": True}, "expect": {"lost_writes": 0}}]},
     "m.yaml: expect[0].when.protocol.elr: unknown key (expected one of: faults, seed, topology)"),
    ({"base": "base.yaml", "expect": [{"when": {}}]}, "m.yaml: expect[0].expect: required key missing"),
    ({"base": "base.yaml", "expect": [{"when": {"seed": 7}, "expect": {"lost_writes": 0}}]},
     "m.yaml: expect[0].when.seed: 7 is the seed of no cell (without seeds: each base's own: 5)"),
    ({"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
      "expect": [{"when": {"protocol.elr": "false"}, "expect": {"lost_writes": 0}}]},
     "m.yaml: expect[0].when.protocol.elr: 'false' (a string) is none of the matrix's values for protocol.elr "
     "(true, false)"),
    ({"base": "base.yaml", "expect": [{"when": {"faults": "kill"}, "expect": {"lost_writes": 0}}]},
     "m.yaml: expect[0].when.faults: kill: the matrix has no faults to select (it names none)"),
    ({"name": "t", "cluster": {}, "topics": []},
     "m.yaml: a topology, not a matrix file (a matrix names its topologies in base:)"),
    # Found by fuzzing `validate`: a traceback, a hang, and a schedule dropped without a word.
    ({"base": "base.yaml", "vary": {"protocol.elr": [True]},
      "expect": [{"when": {"protocol.elr": [True]}, "expect": {"lost_writes": 0}}]},
     "m.yaml: expect[0].when.protocol.elr: [True] is none of the matrix's values for protocol.elr (true)"),
    ({"base": "base.yaml", "seeds": 2**70},
     "m.yaml: seeds: expected a count from 1 to 10,000 or a list of seeds, got int 1180591620717411303424"),
    ({"base": "base.yaml", "faults": {"outage": None, "kill": [{"at": "1s", "do": "kill", "target": "broker:1"}]}},
     "m.yaml: faults.outage: expected a list of faults (as in a topology's faults:) or a file holding one, "
     "got nothing (null)"),
])
def test_a_malformed_matrix_names_the_file_and_the_key(tmp_path: Path, matrix: object, expected: str) -> None:
    text = errors_of(write(tmp_path, matrix))
    assert expected.replace("m.yaml", str(tmp_path / "m.yaml")) in text, text


@pytest.mark.parametrize("expect", [{"lost_wirtes": 0}, {"lost_writes": "lots"}])
def test_a_rules_wrong_check_or_value_is_said_once(tmp_path: Path, expect: dict) -> None:
    """trial26: the rule's error, then again in every cell the rule matched, as the cell's."""
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
                                      "expect": [{"when": {"elr": True}, "expect": expect}]}))
    [name] = expect
    assert text.count(f".{name}:") == 1 and f"expect[0].expect.{name}: " in text, text


def test_a_base_that_is_no_topology_is_named_with_the_matrix_file(tmp_path: Path) -> None:
    (tmp_path / "list.yaml").write_text("- a\n- b\n", encoding="utf-8")
    (tmp_path / "broken.yaml").write_text("name: [\n", encoding="utf-8")
    text = errors_of(write(tmp_path, {"base": ["list.yaml", "broken.yaml"]}))
    assert f"{tmp_path / 'm.yaml'}: base: {tmp_path / 'list.yaml'}: expected a topology (a mapping), got a list of 2" \
        in text, text
    assert f"{tmp_path / 'm.yaml'}: base: {tmp_path / 'broken.yaml'}: line " in text, text


def test_a_base_that_is_a_matrix_file_is_said_so_once(tmp_path: Path) -> None:
    """trial26: its keys read as a topology's unknown ones, and every topology key as missing."""
    (tmp_path / "inner.yaml").write_text("base: base.yaml\nseeds: [1]\n", encoding="utf-8")
    text = errors_of(write(tmp_path, {"base": "inner.yaml"}))
    assert text.strip() == (f"{tmp_path / 'm.yaml'}: base: {tmp_path / 'inner.yaml'}: a matrix file (it has base:, "
                            f"seeds:), not a topology: a base is a topology file (a matrix's bases can be listed: "
                            f"base: [a, b])"), text


@pytest.mark.parametrize(("vary", "expected"), [
    ({"protocol.elr": [True, 3]}, "(vary protocol.elr=3, base {base}): protocol.elr: expected true or false"),
    ({"protocol.unclean_recovery": ["sometimes"]}, "(vary protocol.unclean_recovery=sometimes, base {base}): "
                                                   "protocol.unclean_recovery: 'sometimes' is not allowed"),
    ({"topics.3.placement": ["rack-aware"]}, "vary: topics.3.placement: the base has no topics.3"),
    ({"workload.consumers.0.from": ["latest"]}, "vary: workload.consumers.0.from: the base has no workload.consumers "
                                                "(a list: give it in the base to vary its entries)"),
    ({"duration.x": [1]}, "vary: duration.x: duration is not a mapping or list in the base"),
    ({"bogus.key": [1, 2, 3]}, "(vary bogus.key, base {base}): bogus: unknown key"),
])
def test_a_varied_value_the_topology_refuses_is_named_once_with_its_key(tmp_path: Path, vary: dict,
                                                                        expected: str) -> None:
    fencing = {"protocol.fencing": ["kraft", "zookeeper"]}
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {**vary, **fencing}}))
    assert expected.format(base=tmp_path / "base.yaml") in text, text
    assert text.count("\n") == 0, "one error, not one per cell that holds the value"


def test_a_varied_value_is_held_against_the_schedules_that_replace_the_bases_faults(tmp_path: Path) -> None:
    """A tester's matrix varied `duration` to 2s over a base whose faults fire at 3s, with
    schedules of its own: no cell runs the base's faults, yet every value was refused for
    them. A value the cells' schedule does not fit is still named, with the cell."""
    base = {**BASE, "faults": [{"at": "2500ms", "do": "kill", "target": "broker:1"}]}
    early = {"early": [{"at": "1s", "do": "kill", "target": "broker:1"}, {"at": "1500ms", "do": "restart"}]}
    cells = expand_file(write(tmp_path, {"base": "base.yaml", "vary": {"duration": ["2s"]}, "faults": early},
                                     base))
    assert [c.id for c in cells] == ["tiny-duration=2s-early-seed=5"]
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {"duration": ["2s", "1200ms"]}, "faults": early},
                           base))
    assert text == (f"{tmp_path / 'm.yaml'} (cell tiny-duration=1200ms-early-seed=5, base {tmp_path / 'base.yaml'}): "
                    f"faults[1].at: 1500ms is after the end of the run (duration 1200ms)"), text


def test_only_selects_by_value_or_id_and_shards_split_the_cells_exactly(tmp_path: Path) -> None:
    cells = expand_file(write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
                                                "seeds": 5}))
    assert [c.id for c in select(cells, "elr=false,seed=3")] == ["tiny-elr=false-seed=3"]
    assert [c.id for c in select(cells, "protocol.elr=true,seed=0")] == ["tiny-elr=true-seed=0"]
    assert len(select(cells, "elr=true")) == 5 and len(select(cells, "seed=4")) == 2
    # a cell's id as the summary prints it selects that cell (its `=` read as a key selected none)
    assert [c.id for c in select(cells, "tiny-elr=false-seed=3")] == ["tiny-elr=false-seed=3"]
    # so does a piece of one: `tiny-elr` is no key, so the text is a piece of an id
    assert len(select(cells, "tiny-elr=false")) == 5 and select(cells, "nokey=1") == []
    shards = [select(cells, shard=(k, 3)) for k in (1, 2, 3)]
    assert sorted(c.id for s in shards for c in s) == sorted(c.id for c in cells)
    assert {len(s) for s in shards} == {3, 4}
    again = expand_file(tmp_path / "m.yaml")  # another host computes the same shares
    assert [c.id for c in select(again, shard=(2, 3))] == [c.id for c in shards[1]]
    for bad in ("0/3", "4/3", "1", "a/b"):
        with pytest.raises(ValueError, match="expected K/N"):
            parse_shard(bad)


def test_a_value_with_a_slash_gives_an_id_that_is_one_directory_name(tmp_path: Path) -> None:
    """`rate: 100/s` is a valid value; a cell id is a directory's name (cells with a `/` in it
    shared one spec file and ran each other's topology)."""
    cells = expand_file(write(tmp_path, {"base": "base.yaml",
                                                "vary": {"workload.producers.0.rate": ["100/s", "300/s"]}}))
    assert [c.id for c in cells] == ["tiny-rate=100_s-seed=5", "tiny-rate=300_s-seed=5"]
    assert cells[0].setting == "rate=100/s" and cells[0].topology.workload.producers[0].rate == 100
    assert [c.id for c in select(cells, "rate=100/s")] == [cells[0].id]
    assert [c.id for c in select(cells, "rate=100_s")] == [cells[0].id]  # as the id spells it
    assert [c.id for c in select(cells, "300/s")] == [cells[1].id]


def test_a_cell_id_too_long_for_a_file_name_is_cut_and_made_unique(tmp_path: Path) -> None:
    """Long varied values made ids longer than a file's name may be (a traceback when the cell's
    spec file was written): an id is cut and ends in a digest of the whole."""
    long = ["x" * 300, "x" * 299 + "y"]
    cells = expand_file(write(tmp_path, {"base": "base.yaml", "vary": {"description": long}}))
    ids = [c.id for c in cells]
    assert len(set(ids)) == 2 and all(len(i.encode()) <= MAX_ID_BYTES for i in ids)
    assert all(i.startswith("tiny-description=xxxx") for i in ids)
    assert [c.topology.description for c in cells] == long


def test_a_share_with_no_cell_passes_empty_and_an_unmatched_only_is_an_error(tmp_path: Path) -> None:
    """A CI job with more shards than cells passes its empty share (exit 0)."""
    path = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]}})
    out = subprocess.run([sys.executable, "run.py", "matrix", str(path), "--dry-run", "--shard", "3/3"],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0 and "holds no cell" in out.stdout, out.stderr
    out = subprocess.run([sys.executable, "run.py", "matrix", str(path), "--dry-run", "--only", "seed=77"],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "no cell matches" in out.stderr


def test_a_directory_of_matrices_and_seed_counts(tmp_path: Path) -> None:
    write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]}}, name="a.yaml")
    write(tmp_path, {"base": "base.yaml", "faults": {"calm": []}}, name="b.yaml")
    assert [c.id for c in load_cells(tmp_path, seeds=2)] == [
        "tiny-elr=true-seed=0", "tiny-elr=true-seed=1", "tiny-elr=false-seed=0", "tiny-elr=false-seed=1",
        "tiny-calm-seed=0", "tiny-calm-seed=1"]
    write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [False]}}, name="c.yaml")
    with pytest.raises(MatrixError, match=r": a.yaml and c.yaml both give cells the ids tiny-elr=false-seed=0, "
                                          r"tiny-elr=false-seed=1 \(a cell's run directory is named by its id"):
        load_cells(tmp_path, seeds=2)


def verdict(ok: bool | None) -> RunVerdict:
    return RunVerdict(Path("r"), ok, {})


@pytest.mark.parametrize(("attempts", "status", "code"), [
    ([[True], [True]], ["passed", "passed"], 0),
    ([[True], [False, True]], ["passed", "flaky"], 0),
    ([[True], [False, False]], ["passed", "failed"], 1),
    ([[False], [None]], ["failed", "unjudged"], 2),
    ([[True], [None]], ["passed", "unjudged"], 2),
])
def test_a_cell_that_passed_on_a_retry_is_flaky_and_only_cells_failing_every_time_fail(
        tmp_path: Path, attempts: list, status: list, code: int) -> None:
    [cell] = expand_file(write(tmp_path, {"base": "base.yaml"}))
    results = [CellResult(cell, [verdict(ok) for ok in oks]) for oks in attempts]
    assert [r.status for r in results] == status
    assert matrix_exit_code(results) == code


def _judged(run_dir: Path, ok: bool, lost: int, no_leader: float, broken: bool = False) -> RunVerdict:
    """A hand-made judged cell: its lost writes, its seconds without a leader, and whether its
    lost_writes expectation held."""
    expect = {"lost_writes": {"expected": ">0" if broken else "0", "observed": lost, "held": not broken}}
    return RunVerdict(run_dir, ok, {"checks": {"lost_writes": {"count": lost}, "duplicates": {"count": 0}},
                                    "expect": expect, "figures": {"unavailable_s": {"no-leader": no_leader}}})


def test_the_summary_groups_cells_by_setting_and_schedule_and_the_page_links_each_report(tmp_path: Path) -> None:
    """Issue 11: per setting and fault schedule, the cells, those with loss, the lost writes,
    the median (and most) seconds without a leader and the broken expectations; then the failed and
    flaky cells by name; the page is a cells x checks table linking each cell's report, a
    broken expectation in red."""
    from rich.console import Console

    from testbed.matrix.page import _page
    from testbed.matrix.runner import print_summary
    path = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]}, "seeds": [1, 2],
                            "faults": {"kill": [{"at": "1s", "do": "kill", "target": "leader-of orders/0"}]}})
    cells = {c.id: c for c in expand_file(path)}
    runs = tmp_path / "matrix"
    results = [
        CellResult(cells["tiny-elr=true-kill-seed=1"], [_judged(runs / "a", True, 0, 1.0)]),
        CellResult(cells["tiny-elr=true-kill-seed=2"], [_judged(runs / "b", True, 0, 3.0)]),
        CellResult(cells["tiny-elr=false-kill-seed=1"], [_judged(runs / "c", False, 7, 2.0, broken=True)]),
        CellResult(cells["tiny-elr=false-kill-seed=2"], [_judged(runs / "d", False, 4, 0.5, broken=True),
                                                         _judged(runs / "d.retry1", True, 0, 0.5)]),
    ]
    for name in ("c", "d.retry1"):  # b and d never wrote one (a cell that never ran has none)
        (runs / name).mkdir(parents=True)
        (runs / name / "report.html").write_text("<html></html>")
    console = Console(record=True, width=250)
    print_summary(console, results, runs, source=path)
    text = console.export_text()
    rows = [[cell.strip() for cell in line.split("│")] for line in text.splitlines() if "tiny elr=" in line]
    # the median and, beside it, the most: a median alone hid one seed's long window (trial36)
    assert rows == [["tiny elr=true", "kill", "2", "2", "0", "0", "0", "2.00 (3.00)", ""],
                    ["tiny elr=false", "kill", "2", "0", "0", "1", "7", "1.25 (2.00)", "lost_writes"]], text
    assert f"failed: tiny-elr=false-kill-seed=1: lost_writes 7 (expected >0)  report: {runs}/c/report.html" in text
    assert f"  replay: python run.py matrix {path} --only tiny-elr=false-kill-seed=1 --runs-dir {tmp_path}" in text
    # trial34: the flaky line named nothing, and the count left the flaky cell out unsaid
    assert ("flaky: tiny-elr=false-kill-seed=2: failed on attempt 1: lost_writes 4 (expected >0); met them on "
            "attempt 2  report: ") in text and "d.retry1/report.html" in text
    assert "2 of 4 cells met their expectations, and 1 more only on a retry (flaky)" in text
    assert text.count("replay:") == 1  # a flaky cell passed on its retry: nothing to replay
    assert "2 of 4 cells met their expectations" in text
    page = _page(results, runs / "summary")
    assert "<h1>isrlab matrix: 2 of 4 cells met their expectations, and 1 more only on a retry (flaky)</h1>" in page
    assert "<a href='../c/report.html'>tiny-elr=false-kill-seed=1</a>" in page
    assert "<a href='../d.retry1/report.html'>tiny-elr=false-kill-seed=2</a>" in page
    assert page.count("style='background:#fdd' title='expected &gt;0'>7<") == 1


@pytest.mark.parametrize("keep_going", [False, True])
def test_a_cell_that_cannot_run_is_unjudged_and_stops_the_matrix_unless_keep_going(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_going: bool) -> None:
    """Issue 11, bad input: a cell whose supervisor fails (its cluster did not start) is
    unjudged, never passed; no further cell starts (exit 2) unless --keep-going, which runs
    the rest and counts the cell as failed (exit 1). The cells here are the scheduling's:
    their supervisors and the Spark job are stand-ins."""
    from rich.console import Console

    from testbed.matrix import runner
    cells = expand_file(write(tmp_path, {"base": "base.yaml", "seeds": [1, 2, 3]}))
    started: list[str] = []

    def supervisor(cell, run_dir: Path, spec_dir: Path, time_scale: float, children: object) -> int:  # noqa: ANN001
        started.append(cell.id)
        return 3 if cell.seed == 1 else 0

    monkeypatch.setattr(runner, "_run_cell", supervisor)
    monkeypatch.setattr(runner, "analyze_runs", lambda runs, *_, **__: [RunVerdict(r, True, {}) for r in runs])
    monkeypatch.setattr(runner, "write_cells", lambda *_: None)
    console = Console(record=True, width=300)
    code = runner.run_matrix(cells, tmp_path / "m", jobs=1, console=console, keep_going=keep_going)
    out = console.export_text()
    assert code == (1 if keep_going else 2), out
    assert started == ([c.id for c in cells] if keep_going else [cells[0].id])
    assert "unjudged: tiny-seed=1: " in out and "its supervisor exited 3" in out
    # trial26: the row counted the unjudged cell as none and its median 0.00 as judged
    [row] = [[cell.strip() for cell in line.split("│")] for line in out.splitlines() if line.startswith("tiny ")]
    assert row[2:5] == (["3", "2", "1"] if keep_going else ["3", "0", "3"]), out
    assert row[7] == ("0.00" if keep_going else "-"), out
    if keep_going:
        assert "2 of 3 cells met their expectations" in out
    else:
        assert "unjudged: tiny-seed=2: " in out and "the matrix stopped after tiny-seed=1 could not run" in out
        assert "0 of 3 cells met their expectations" in out


def test_a_failed_cells_replay_carries_the_seeds_and_time_scale_it_was_made_and_run_with(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """trial26: `--seeds 3` made a cell of seed 2 that failed, and its replay without
    `--seeds` found no such cell (the file's seeds are 0 and 1); nor did it say the time scale
    it ran at. The replay, run, selects the same cell."""
    from rich.console import Console

    from testbed.matrix import runner
    path = write(tmp_path, {"base": "base.yaml", "seeds": 2})
    cells = [c for c in expand_file(path, seeds=3) if c.seed == 2]
    monkeypatch.setattr(runner, "_run_cell", lambda *_: 0)
    monkeypatch.setattr(runner, "analyze_runs", lambda runs, *_, **__: [RunVerdict(r, False, {}) for r in runs])
    monkeypatch.setattr(runner, "write_cells", lambda *_: None)
    console = Console(record=True, width=300)
    assert runner.run_matrix(cells, tmp_path / "m", console=console, source=path, seeds=3, time_scale=2.5) == 1
    [replay] = [line.strip() for line in console.export_text().splitlines() if "replay:" in line]
    assert replay == f"replay: python run.py matrix {path} --only tiny-seed=2 --seeds 3 --time-scale 2.5 --runs-dir {tmp_path}"
    argv = shlex.split(replay.removeprefix("replay: python run.py "))
    out = subprocess.run([sys.executable, "run.py", *argv, "--dry-run"], cwd=ROOT, capture_output=True, text=True,
                         check=False)
    assert out.returncode == 0 and out.stdout.split("\t")[0] == "tiny-seed=2", out


def test_dry_run_lists_every_cell_and_a_bad_matrix_exits_2(tmp_path: Path) -> None:
    path = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]}, "seeds": [3, 9]})
    out = subprocess.run([sys.executable, "run.py", "matrix", str(path), "--dry-run", "--only", "seed=9"],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["tiny-elr=true-seed=9\tseed=9", "tiny-elr=false-seed=9\tseed=9"]
    bad = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": ["yes"]}}, name="bad.yaml")
    out = subprocess.run([sys.executable, "run.py", "matrix", str(bad), "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 2 and f"{bad} (vary protocol.elr=yes" in out.stderr and out.stdout == ""
    for args in (["--jobs", "0"], ["--shard", "3/2"], ["--seeds", "0"]):
        out = subprocess.run([sys.executable, "run.py", "matrix", str(path), "--dry-run", *args], cwd=ROOT,
                             capture_output=True, text=True, check=False)
        assert out.returncode == 2 and out.stderr.strip(), args


@pytest.mark.parametrize("name", ["ci.yaml", "example.yaml"])
def test_shipped_matrices_expand(name: str) -> None:
    assert expand_file(ROOT / "topologies" / "matrix" / name)


def test_the_ci_matrix_covers_every_fault_action_and_protocol_setting() -> None:
    """Issue 11: at least 24 cells, every fault action, every value of every protocol
    setting, each unsafe setting in a cell that expects the loss it causes."""
    from faults.fault_spec import FAULT_ACTIONS
    cells = expand_file(ROOT / "topologies" / "matrix" / "ci.yaml")
    assert len(cells) >= 24
    actions = {f.do for c in cells for f in c.topology.faults}
    assert set(FAULT_ACTIONS) - actions == set()
    protocols = [c.topology.protocol for c in cells]
    assert {p.truncation for p in protocols} == {"high-watermark", "leader-epoch"}
    assert {p.elr for p in protocols} == {True, False}
    assert {p.unclean_leader_election for p in protocols} == {True, False}
    assert {p.unclean_recovery for p in protocols} == {"none", "proactive", "balanced", "manual"}
    assert {p.fencing for p in protocols} == {"kraft", "zookeeper"}
    assert {t.placement for c in cells for t in c.topology.topics} >= {"rack-aware", "round-robin", "explicit"}
    wants_loss = {c.topology.name for c in cells if c.topology.expect.get("lost_writes") == Expectation(">", 0)}
    assert {"seed004-hw-truncation", "last-replica-standing", "legacy-unclean-election",
            "rack-outage-rack-blind"} <= wants_loss


def test_validate_checks_a_matrix_file_with_every_cell_and_run_points_a_matrix_to_matrix(tmp_path: Path) -> None:
    good = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]}, "seeds": 2})
    bad = write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [3]}}, name="bad.yaml")
    out = subprocess.run([sys.executable, "run.py", "validate", str(good), str(bad)], cwd=ROOT,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 1
    assert f"{good}: ok (a matrix of 4 cells)" in out.stdout
    assert f"{bad} (vary protocol.elr=3, base {tmp_path / 'base.yaml'}): protocol.elr: expected true or false" in out.stderr
    out = subprocess.run([sys.executable, "run.py", str(good)], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 2
    assert f"{good}: a matrix file (it has base:, seeds:, vary:), not a topology: run its cells with " \
           f"`python run.py matrix {good}`" in out.stderr
    # a matrix that forgot its base: is still told it is one, and what it lacks
    baseless = write(tmp_path, {"vary": {"protocol.elr": [True, False]}, "seeds": 2}, name="baseless.yaml")
    out = subprocess.run([sys.executable, "run.py", "validate", str(baseless)], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    assert out.returncode == 1 and out.stderr.strip() == f"{baseless}: base: required key missing", out.stderr


def _late(at: str, target: str) -> dict:
    return {"late": [{"at": at, "do": "kill", "target": target}]}


@pytest.mark.parametrize(("matrix", "ids"), [
    # each value or schedule is wrong on the base alone (minISR 2, 3 s, brokers 1-3, 2 partitions),
    # and every cell is valid: only the cells are judged
    ({"vary": {"topics.0.replication_factor": [1, 2], "topics.0.min_insync_replicas": [1]}},
     ["tiny-replication_factor=1-min_insync_replicas=1-seed=5",
      "tiny-replication_factor=2-min_insync_replicas=1-seed=5"]),
    ({"vary": {"duration": ["20s", "30s"]}, "faults": _late("15s", "broker:1")},
     ["tiny-duration=20s-late-seed=5", "tiny-duration=30s-late-seed=5"]),
    ({"vary": {"cluster.brokers": [4, 5]}, "faults": _late("1s", "broker:4")},
     ["tiny-brokers=4-late-seed=5", "tiny-brokers=5-late-seed=5"]),
    ({"vary": {"topics.0.partitions": [6, 8]}, "faults": _late("1s", "leader-of orders/5")},
     ["tiny-partitions=6-late-seed=5", "tiny-partitions=8-late-seed=5"]),
])
def test_values_and_schedules_that_only_work_together_are_judged_in_their_cells(
        tmp_path: Path, matrix: dict, ids: list[str]) -> None:
    """Found by an audit: each varied value and each schedule was held against the base alone
    first, so a matrix whose every cell is valid was refused."""
    assert [c.id for c in expand_file(write(tmp_path, {"base": "base.yaml", **matrix}))] == ids


def test_a_cell_that_is_invalid_is_named_with_its_key_and_an_error_of_many_cells_is_said_once(
        tmp_path: Path) -> None:
    """Only some combinations are wrong: the first cell that has each error is named (with how
    many more have it), not every cell, and not a value that is right in other cells."""
    m = tmp_path / "m.yaml"
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {"topics.0.replication_factor": [1, 3],
                                                                      "topics.0.min_insync_replicas": [1, 2]},
                                      "seeds": 3}))
    assert text == (f"{m} (cell tiny-replication_factor=1-min_insync_replicas=2-seed=0 and 2 other cells alike, base "
                    f"{tmp_path / 'base.yaml'}): topics[0].min_insync_replicas: 2 is larger than replication_factor "
                    f"(1)"), text
    # wrong in every cell holding a value: said once, of the value
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {"topics.0.replication_factor": [3, 4],
                                                                      "protocol.elr": [True, False]}, "seeds": 3}))
    assert text == (f"{m} (vary topics.0.replication_factor=4, base {tmp_path / 'base.yaml'}): "
                    f"topics[0].replication_factor: 4 is larger than the number of brokers (3)"), text
    # wrong in every cell: the base's own error, said once
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]}},
                           {**BASE, "duration": "500ms"}))
    assert text == (f"{m} (base {tmp_path / 'base.yaml'}): faults[0].at: 1s is after the end of the run "
                    f"(duration 500ms)"), text


def test_an_error_in_a_schedule_file_names_that_file_and_the_matrix(tmp_path: Path) -> None:
    """Found by an audit: an error inside `faults: {k: file.yaml}` named the matrix and
    `faults[1].do`, which the matrix does not have."""
    (tmp_path / "sched.yaml").write_text(yaml.safe_dump([{"at": "1s", "do": "kill", "target": "broker:1"},
                                                         {"at": "2s", "do": "kil"}]), encoding="utf-8")
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, False]},
                                      "faults": {"k": "sched.yaml"}}))
    assert text.startswith(f"{tmp_path / 'sched.yaml'} (faults.k of {tmp_path / 'm.yaml'}, base "
                           f"{tmp_path / 'base.yaml'}): faults[1].do: 'kil' is not allowed"), text
    assert text.count("\n") == 0
    # a cell's error in it, found only with a varied value, names the file and the cell
    (tmp_path / "late.yaml").write_text(yaml.safe_dump({"faults": [{"at": "2s", "do": "kill", "target": "broker:1"}]}),
                                        encoding="utf-8")
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {"duration": ["1s", "3s"]},
                                      "faults": {"late": "late.yaml"}}))
    assert text == (f"{tmp_path / 'late.yaml'} (faults.late of {tmp_path / 'm.yaml'}, cell "
                    f"tiny-duration=1s-late-seed=5, base {tmp_path / 'base.yaml'}): faults[0].at: 2s is after the end "
                    f"of the run (duration 1s)"), text


@pytest.mark.parametrize(("schedule", "expected"), [
    ({"faults": [], "extra": 1}, "extra: unknown key (a schedule file holds a list of faults, or a mapping whose only "
                                 "key is faults:)"),
    ({"fault": []}, "faults: required key missing (a schedule file holds a list of faults, or a mapping whose only "
                    "key is faults:)"),
    (BASE, "a topology, not a schedule file"),
    ({"faults": None}, "faults: expected a list of faults, got nothing (null)"),
    ("kill", "expected a list of faults, or a mapping whose only key is faults:, got 'kill'"),
])
def test_a_schedule_file_holds_faults_and_nothing_else(tmp_path: Path, schedule: object, expected: str) -> None:
    """Found by an audit: `{faults: [], extra: 1}`, and a whole topology, were taken as
    schedules with their other keys dropped without a word."""
    (tmp_path / "sched.yaml").write_text(yaml.safe_dump(schedule), encoding="utf-8")
    text = errors_of(write(tmp_path, {"base": "base.yaml", "faults": {"k": "sched.yaml"}}))
    assert f"{tmp_path / 'sched.yaml'} (faults.k of {tmp_path / 'm.yaml'}): {expected}" in text, text


def test_a_directory_as_a_base_is_said_to_be_one(tmp_path: Path) -> None:
    (tmp_path / "topologies").mkdir()
    text = errors_of(write(tmp_path, {"base": "topologies"}))
    assert text == f"{tmp_path / 'm.yaml'}: base: topologies: a directory, not a file (expected a topology file)", text


def test_varied_values_that_are_one_setting_once_read_are_a_value_listed_twice(tmp_path: Path) -> None:
    """Found by an audit: `acks: [1, "1", all, -1]` was refused as two cells sharing an id,
    blamed on bases' names or a `/` in a value: 1 and "1" are one setting, as are all and -1."""
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {"workload.producers.0.acks": [1, "1", "all", -1]}}))
    m = tmp_path / "m.yaml"
    assert text.splitlines() == [
        f"{m}: vary.workload.producers.0.acks: lists a value twice: 1 and '1' are one setting as the topology reads "
        f"them (their cells would run the same topology)",
        f"{m}: vary.workload.producers.0.acks: lists a value twice: all and -1 are one setting as the topology reads "
        f"them (their cells would run the same topology)"], text
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {"duration": ["3s", "3000ms"],
                                                                      "protocol.elr": [True, False]}, "seeds": 2}))
    assert text == (f"{m}: vary.duration: lists a value twice: 3s and 3000ms are one setting as the topology reads "
                    f"them (their cells would run the same topology)"), text


def test_a_bad_value_showing_like_a_good_one_beside_another_error_is_said_with_its_quotes(tmp_path: Path) -> None:
    """Found by a tester: `partitions: [2, "2"]` beside any other error ended `matrix` and
    `validate` in a traceback (the two cells share the id `partitions=2`, and the error
    claimed for one was removed from both), and the error read `partitions=2`, naming neither."""
    m = tmp_path / "m.yaml"
    text = errors_of(write(tmp_path, {"base": "base.yaml",
                                      "vary": {"topics.0.partitions": [2, "2"], "protocol.nonsense": ["a"]}}))
    lines = text.splitlines()
    assert len(lines) == 2, text
    assert lines[0].startswith(f"{m} (vary topics.0.partitions='2', base ") and \
        lines[0].endswith("topics[0].partitions: expected an integer >= 1, got '2'"), text
    assert lines[1].startswith(f"{m} (vary protocol.nonsense=a, base ") and \
        "protocol.nonsense: unknown key" in lines[1], text


def test_a_deflake_round_names_itself_and_one_cell_is_one_cell(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """trial33: `--deflake` printed a failed cell's second run as "c: ran", like its first, and
    a matrix of one cell ended "0 of 1 cells met their expectations". The supervisor and the
    Spark job are stand-ins: the first attempt fails its expectation, the retry too."""
    from rich.console import Console

    from testbed.matrix import runner
    [cell] = expand_file(write(tmp_path, {"base": "base.yaml", "seeds": [1]}))
    monkeypatch.setattr(runner, "_run_cell", lambda *_: 0)
    failed = {"expect": {"lost_writes": {"observed": 3, "expected": "0", "held": False}}}
    monkeypatch.setattr(runner, "analyze_runs", lambda runs, *_, **__: [RunVerdict(r, False, failed) for r in runs])
    monkeypatch.setattr(runner, "write_cells", lambda *_: None)
    console = Console(record=True, width=300)
    assert runner.run_matrix([cell], tmp_path / "m", deflake=1, console=console) == 1
    out = console.export_text()
    assert f"{cell.id}: ran" in out and f"{cell.id} (retry 1): ran" in out, out
    assert "0 of 1 cell met its expectations" in out, out


def test_the_cells_notes_are_said_once_each_by_validate_and_the_dry_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """trial34: crossing `unclean_leader_election` with `unclean_recovery` gave cells whose
    recovery mode R31 pre-empts; a topology of such a cell gets a `validate` note, the matrix
    said nothing and ran the legacy election in silence."""
    import run
    path = write(tmp_path, {"base": "base.yaml", "seeds": [1, 2],
                            "vary": {"protocol.unclean_leader_election": [False, True],
                                     "protocol.unclean_recovery": ["balanced", "manual"]}})
    assert run.main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    notes = [line for line in out.splitlines() if line.startswith("note: ")]
    assert len(notes) == 2, out
    assert all("unclean_leader_election=true" in n and "and 1 other cell alike, base " in n and "base.yaml): "
               "protocol.unclean_recovery: " in n for n in notes), notes
    assert run.main(["matrix", str(path), "--dry-run"]) == 0
    assert [line for line in capsys.readouterr().err.splitlines() if line.startswith("note: ")] == notes


def test_the_cells_summary_starts_its_jvm_with_a_log_not_the_terminal(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """trial37: a matrix whose cells all failed to start judged none, so the summary's write
    started the JVM, and the Java launcher's warning reached the terminal."""
    from unittest.mock import MagicMock

    from testbed.matrix import page
    started: list[dict] = []

    def get_spark(master: str | None = None, **kwargs: object) -> MagicMock:
        started.append(kwargs)
        return MagicMock()
    monkeypatch.setattr(page, "get_spark", get_spark)
    [cell] = expand_file(write(tmp_path, {"base": "base.yaml", "seeds": [1]}))
    page.write_cells([CellResult(cell, [RunVerdict(tmp_path / "r", None, {"problems": ["not run"]})])],
                     tmp_path / "summary")
    assert started == [{"log": tmp_path / "summary" / "spark.log"}]


def test_a_rule_naming_a_varied_key_whose_values_are_in_error_is_not_also_an_unknown_key(tmp_path: Path) -> None:
    """trial37: `vary: {protocol.elr: [true, true]}` with a rule `when: {protocol.elr: false}`
    was told its duplicate value, and then that protocol.elr is an unknown key of the rule."""
    text = errors_of(write(tmp_path, {"base": "base.yaml", "vary": {"protocol.elr": [True, True]},
                                      "expect": [{"when": {"protocol.elr": False}, "expect": {"lost_writes": 0}}]}))
    assert "vary.protocol.elr: lists a value twice: true" in text and "unknown key" not in text, text


def test_a_cell_whose_supervisor_failed_is_told_with_what_its_supervisor_said(tmp_path: Path) -> None:
    """trial37: the matrix said only that the supervisor exited 1 and where its log was, whose
    last line said why in one line (the cluster's start timed out at --time-scale 0.01)."""
    from testbed.matrix.runner import _why_failed
    log = tmp_path / "c.log"
    log.write_text("starting 9 processes\n" + "x" * 5000 + "\nrun failed: timed out after 0.1s waiting for all "
                   "6 brokers (try a larger one)\n\n")
    assert _why_failed(log) == "timed out after 0.1s waiting for all 6 brokers (try a larger one)"
    log.write_text("Traceback (most recent call last):\nValueError: x\n")
    assert _why_failed(log) == "the cluster did not start or the run broke off"
    assert _why_failed(tmp_path / "none.log") == "the cluster did not start or the run broke off"


def test_the_last_line_counts_the_cells_that_passed_by_breaking_as_their_expect_wants(tmp_path: Path) -> None:
    """trial37: a rack-blind cell that lost 300 writes, as its `lost_writes: ">0"` wants, was
    `passed 1` like the clean one; a single run says `OK (it broke as its expect: wants: ...)`."""
    from testbed.matrix.results import met_line
    cells = expand_file(write(tmp_path, {"base": "base.yaml", "seeds": [1, 2]}))
    broke = RunVerdict(tmp_path / "a", True, {"expect": {"lost_writes": {"expected": ">0", "observed": 300,
                                                                         "held": True}}})
    clean = RunVerdict(tmp_path / "b", True, {"expect": {"lost_writes": {"expected": "0", "observed": 0,
                                                                        "held": True}}})
    results = [CellResult(cells[0], [broke]), CellResult(cells[1], [clean])]
    assert met_line(results) == "2 of 2 cells met their expectations (1 of them by breaking as its expect: wants)"
    assert met_line(results[1:]) == "1 of 1 cell met its expectations"
