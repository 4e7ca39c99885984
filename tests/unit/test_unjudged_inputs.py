"""Inputs `analyze` cannot judge say why, never a verdict: a run whose history is empty
(a new user's emptied history.jsonl was judged, OK under the default expectations, while
the final logs held 1,690 values), and a path that is a file."""
from __future__ import annotations

from pathlib import Path

import pytest

from testbed.analysis.ingest import ingest, run_ids
from testbed.analysis.run_dirs import IngestError, find_runs
from testbed.analysis.pipeline import analyze_runs
from tests.unit.analysis_fixtures import RunBuilder, spark  # noqa: F401  (the fixture)


def test_a_run_with_an_empty_history_is_not_judged(tmp_path: Path, spark: object) -> None:  # noqa: F811
    d = RunBuilder(tmp_path, "emptied").write()
    (d / "history.jsonl").write_text("")
    [verdict] = analyze_runs([d])
    assert verdict.ok is None
    assert any("history.jsonl: empty (no operation was recorded)" in p for p in verdict.results["problems"])


def test_a_run_with_empty_events_is_not_judged(tmp_path: Path, spark: object) -> None:  # noqa: F811
    """Every run records events (the controller's election at least); an emptied events.jsonl
    was judged OK where a missing one was refused."""
    d = RunBuilder(tmp_path, "no-events").write()
    (d / "events.jsonl").write_text("")
    [verdict] = analyze_runs([d])
    assert verdict.ok is None
    assert any("events.jsonl: empty (no event was recorded)" in p for p in verdict.results["problems"])


def test_a_file_given_as_a_run_is_named_as_a_file(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(IngestError, match="notes.txt: a file, not a directory"):
        find_runs([tmp_path / "notes.txt"])


def test_two_sweeps_with_one_run_name_are_judged_together_each_by_its_own_records(
        tmp_path: Path, spark: object) -> None:  # noqa: F811
    """Two sim sweeps of one topology hold seed directories of one name; `analyze runs/` of
    both judges each by its own files, under an id that tells them apart (it refused the
    tree before): the second sweep's seed lost v5, the first's did not."""
    first, second = "20261126T063702Z-sim-mix5", "20261126T063724Z-sim-mix5"
    RunBuilder(tmp_path / first, "mix5-seed=1").write()
    lossy = RunBuilder(tmp_path / second, "mix5-seed=1")
    lossy.send("v5", 5, at=lossy.history[-1]["time_ns"] - 10)  # acknowledged, never in a log
    lossy.write()
    RunBuilder(tmp_path / second, "mix5-seed=2").write()
    assert run_ids(find_runs([tmp_path])) == {
        tmp_path / first / "mix5-seed=1": f"{first}/mix5-seed=1",
        tmp_path / second / "mix5-seed=1": f"{second}/mix5-seed=1",
        tmp_path / second / "mix5-seed=2": f"{second}/mix5-seed=2"}
    verdicts = {v.run_id: v for v in analyze_runs([tmp_path])}
    assert sorted(verdicts) == [f"{first}/mix5-seed=1", f"{second}/mix5-seed=1", f"{second}/mix5-seed=2"]
    assert verdicts[f"{first}/mix5-seed=1"].ok is True
    assert verdicts[f"{second}/mix5-seed=2"].ok is True
    lost = verdicts[f"{second}/mix5-seed=1"]
    assert lost.ok is False and lost.run_dir == tmp_path / second / "mix5-seed=1"
    assert [x["value"] for x in lost.results["checks"]["lost_writes"]["examples"]] == ["v5"]
    assert (tmp_path / "summary" / "summary.html").is_file()


def test_one_run_name_in_one_tree_keeps_its_name_as_its_id(tmp_path: Path) -> None:
    runs = [RunBuilder(tmp_path / sweep, name).write() for sweep, name in (("a", "x-seed=1"), ("a", "x-seed=2"))]
    assert run_ids(runs) == {runs[0]: "x-seed=1", runs[1]: "x-seed=2"}


def test_run_directories_named_like_path_patterns_are_judged(tmp_path: Path, spark: object) -> None:  # noqa: F811
    """Spark's readers take a path as a pattern: a matrix cell varied over a value with
    brackets (`description=a[1]`) matched no file and left the tree unjudged, and a sibling
    with a colon in its name broke the listing."""
    pattern = RunBuilder(tmp_path / "tree", "cell-description=a[1]-seed=0").write()
    RunBuilder(tmp_path / "tree", "colon:run").write()
    verdicts = {v.run_id: v.ok for v in analyze_runs([tmp_path / "tree"])}
    assert verdicts == {"cell-description=a[1]-seed=0": True, "colon:run": True}
    assert [v.ok for v in analyze_runs([pattern])] == [True]


def test_paths_with_a_colon_and_a_pattern_character_are_judged_each_as_its_own(
        tmp_path: Path, spark: object) -> None:  # noqa: F811
    """Found by a tester: Hadoop's globber reads a colon in a component as a URI scheme, so a
    tree named `nightly [2026-11-26 10:00]`, or a run named `a:b[1]`, failed every run of its
    judgment with "Relative path in absolute URI". Such paths are read through links, and
    each line is still given to its own run: the lossy run alone fails."""
    tree = tmp_path / "nightly [2026-11-26 10:00]"
    RunBuilder(tree, "a:b[1]").write()
    lossy = RunBuilder(tree, "c?:d")
    lossy.send("v5", 5, at=lossy.history[-1]["time_ns"] - 10)  # acknowledged, never in a log
    lossy.write()
    RunBuilder(tree, "plain").write()
    verdicts = {v.run_id: v for v in analyze_runs([tree])}
    assert {rid: v.ok for rid, v in verdicts.items()} == {"a:b[1]": True, "c?:d": False, "plain": True}
    assert [x["value"] for x in verdicts["c?:d"].results["checks"]["lost_writes"]["examples"]] == ["v5"]
    [alone] = analyze_runs([tree / "c?:d"])
    assert alone.ok is False and alone.results["checks"]["lost_writes"]["count"] == 1


def test_final_logs_torn_or_without_a_replica_leave_the_run_unjudged(tmp_path: Path, spark: object) -> None:  # noqa: F811
    """The final files are written whole and renamed into place: a torn line there is not a
    writer killed mid-line, and logs with fewer records than a replica's LEO are only part of
    them (both were read as log divergence: a new user's cut files gave FAILED, exit 1). A
    replica's log shorter than its LEO is a check's matter (the `unseen` run of test_analysis)."""
    torn = RunBuilder(tmp_path, "torn-final").write()
    logs = (torn / "final" / "logs.jsonl").read_bytes()
    (torn / "final" / "logs.jsonl").write_bytes(logs[: int(len(logs) * 0.6) + 20])
    short = RunBuilder(tmp_path, "short-final").write()  # broker-3's lines gone, whole lines
    kept = [line for line in (short / "final" / "logs.jsonl").read_text().splitlines(keepends=True)
            if '"broker-3"' not in line]
    (short / "final" / "logs.jsonl").write_text("".join(kept))
    verdicts = {v.run_id: v for v in analyze_runs([tmp_path])}
    assert verdicts["torn-final"].ok is None and verdicts["short-final"].ok is None
    assert any("final/logs.jsonl: line " in p and "is not valid JSON" in p
               for p in verdicts["torn-final"].results["problems"])
    assert verdicts["short-final"].results["problems"] == [
        f"{short / 'final' / 'logs.jsonl'} holds no record of 1 replica(s) whose LEO in final/replicas.jsonl is "
        f"above 0: the final logs are incomplete, so what survived cannot be told"]


def test_a_record_file_gone_since_the_last_judgment_leaves_no_table_behind(
        tmp_path: Path, spark: object) -> None:  # noqa: F811
    """`analysis/tables/` is the judgment's own: a run ingested with its faults.jsonl, then
    again without it, kept the first ingest's faults table beside the second's."""
    builder = RunBuilder(tmp_path, "refaulted")
    builder.fault(builder.history[0]["time_ns"], "pause", "broker:2", ["broker-2"])
    d = builder.write()
    tables = d / "analysis" / "tables"
    ingest(spark, {d: "refaulted"}, tables)
    assert (tables / "faults").is_dir()
    (d / "faults.jsonl").unlink()
    _, rejected = ingest(spark, {d: "refaulted"}, tables)
    assert not (tables / "faults").exists()
    assert (tables / "history").is_dir() and rejected == {}


def test_a_run_without_its_topology_is_found_in_a_tree_as_when_given_alone(tmp_path: Path) -> None:
    """A tree's run whose topology.yaml was deleted was left out of the tree's verdict (exit 0),
    where given alone it was found and not judged (exit 2)."""
    RunBuilder(tmp_path, "good").write()
    bare = RunBuilder(tmp_path, "no-topology").write()
    (bare / "topology.yaml").unlink()
    assert find_runs([tmp_path]) == [(tmp_path / "good").resolve(), bare.resolve()]
    assert find_runs([bare]) == [bare.resolve()]


def test_a_tree_lists_its_runs_with_their_numbers_in_order(tmp_path: Path) -> None:
    """trial35: a sweep's seeds were listed seed=1, seed=10, seed=11, ..., seed=2."""
    for seed in (2, 10, 1, 11):
        (tmp_path / "sweep" / f"mix-seed={seed}").mkdir(parents=True)
        (tmp_path / "sweep" / f"mix-seed={seed}" / "history.jsonl").write_text("")
    assert [p.name for p in find_runs([tmp_path])] == ["mix-seed=1", "mix-seed=2", "mix-seed=10", "mix-seed=11"]


def test_a_line_of_a_mistyped_field_names_that_field(tmp_path: Path, spark: object) -> None:  # noqa: F811
    """trial37: `"offset": "one"` in a line of nine fields was told only as `not valid JSON of
    the expected types`."""
    d = RunBuilder(tmp_path, "mistyped").write()
    lines = (d / "history.jsonl").read_text().splitlines()
    lines[3] = lines[3].replace('"time_ns": ', '"time_ns": true, "x": ').replace('"partition": 0', '"partition": [0]')
    (d / "history.jsonl").write_text("\n".join(lines) + "\n")
    [verdict] = analyze_runs([d])
    assert verdict.ok is None
    [problem] = [p for p in verdict.results["problems"] if "line 4:" in p]
    assert ("is not valid JSON of the expected types (partition is a list, expected an integer; "
            "time_ns is true or false, expected an integer)") in problem, problem
