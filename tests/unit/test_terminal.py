"""What `run.py analyze` prints for a tree of runs (`testbed/analysis/cli.py`): a run that
could not be judged says why in the terminal, not only in its results.json."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console

from testbed.analysis.cli import _print_tree
from testbed.analysis.terminal import print_verdict
from testbed.analysis.verdict import RunVerdict


def test_a_tree_names_why_each_unjudged_run_was_not_judged() -> None:
    console = Console(record=True, width=200)
    why = "runs/r2/history.jsonl: line 501: is not valid JSON of the expected types"
    _print_tree(console, [RunVerdict(Path("runs/r1"), True, {"checks": {}, "expect": {}, "problems": []}),
                          RunVerdict(Path("runs/r2"), None, {"checks": {}, "expect": {}, "problems": [why]})], None)
    text = console.export_text()
    assert f"not judged: r2: {why}" in text and "not judged: r1" not in text


def test_a_tree_without_a_summary_prints_its_runs_only(tmp_path: Path) -> None:
    """A failed judgment writes no summary: the table of runs says why, and no summary is read
    (reading it raised Spark's path-not-found and exited 1, which means an expectation failed)."""
    console = Console(width=200, record=True)
    _print_tree(console, [RunVerdict(Path("runs/r1"), None, {"checks": {}, "expect": {}, "problems": ["why"]}),
                          RunVerdict(Path("runs/r2"), None, {"checks": {}, "expect": {}, "problems": ["why"]})],
                tmp_path / "summary")
    assert "not judged: r1: why" in console.export_text()


def test_a_tree_names_each_failed_run_whole_in_a_narrow_log() -> None:
    """In a CI log (80 columns) the table cut run ids to 15 characters, and a failed run had
    no line of its own: four runs of one topology could not be told apart."""
    console = Console(record=True, width=80)
    run_id = "20261126T155258Z-matrix-m1/elr-clean-recovery-elr=false-lrs-seed=1"
    failed = RunVerdict(Path("runs") / run_id, False, {
        "checks": {"lost_writes": {"count": 355}}, "problems": [],
        "expect": {"lost_writes": {"expected": "0", "observed": 355, "held": False},
                   "log_divergence": {"expected": "0", "observed": 0, "held": True}}}, id=run_id)
    _print_tree(console, [failed, RunVerdict(Path("runs/ok"), True, {"checks": {}, "expect": {}, "problems": []})],
                None)
    lines = [line for line in console.export_text().splitlines() if line.startswith("failed:")]
    assert lines == [f"failed: {run_id}: lost_writes 355 (expected 0)  report: runs/{run_id}/report.html"]


def test_run_ids_and_paths_print_as_named() -> None:
    """DESIGN 7: a run id is the user's name. Found by a tester: rich read `seed:fire:` as an
    emoji, `a:b` followed by a colon as another, and `[bold red]shout` as markup, in the table,
    the verdict's title and the report's path."""
    names = ("seed:fire:", "[bold red]shout", "a:b")
    console = Console(record=True, width=200)
    results = {"checks": {"lost_writes": {"count": 1}}, "problems": [],
               "expect": {"lost_writes": {"expected": "0", "observed": 1, "held": False}}}
    verdicts = [RunVerdict(Path("runs") / name, False, results) for name in names]
    _print_tree(console, verdicts, None)
    for v in verdicts:
        print_verdict(console, v)
    text = console.export_text()
    for name in names:
        assert f"│ {name} " in text  # its row of the table of runs
        assert f"failed: {name}: lost_writes 1 (expected 0)  report: runs/{name}/report.html" in text
        assert f"verdict: {name}" in text
        # the expectation that failed, as the matrix names a failed cell's (trial34: only the table said it)
        assert f"FAILED: lost_writes 1 (expected 0)  report: runs/{name}/report.html" in text


def test_a_verdicts_report_path_and_problems_keep_whole_lines_in_a_narrow_log() -> None:
    """Found by `bench`: a run directory's path longer than the 80 columns of a pipe came out
    cut in two (`...three-faults-s` / `0/report.html`), so a user could not paste it and the
    bench read a directory that does not exist."""
    console = Console(record=True, width=80)
    run_dir = Path("/tmp/isrlab-bench-abcdefgh/20261129T092000.123456Z-three-faults-s0")
    problem = f"{run_dir}/history.jsonl: line 501: is not valid JSON of the expected types"
    print_verdict(console, RunVerdict(run_dir, None, {"checks": {}, "expect": {}, "problems": [problem]}))
    lines = console.export_text().splitlines()
    assert f"UNJUDGED  report: {run_dir}/report.html" in lines
    assert f"not judged: {problem}" in lines


def test_an_unjudged_runs_figures_and_empty_loss_list_read_as_nothing_proven(tmp_path: Path) -> None:
    """Found by a tester: an unjudged run printed its fault-less availability as a figure, and
    its report said "No lost or inconsistent write.", which reads as a pass. Its counts already
    prove nothing (no cause lines); its figures and its empty loss list now say the same."""
    from testbed.analysis.report import render
    from testbed.analysis.runinfo import load_run_info
    from tests.unit.analysis_fixtures import RunBuilder
    figures = {"unavailable_s": {"no-leader": 0.0, "no-acks-all": 17.639}}
    unjudged = RunVerdict(tmp_path / "r", None, {"checks": {}, "expect": {}, "problems": ["why"], "figures": figures})
    judged = RunVerdict(tmp_path / "r", True, {"checks": {}, "expect": {}, "problems": [], "figures": figures})
    console = Console(record=True, width=200)
    print_verdict(console, unjudged)
    assert "partition-seconds" not in console.export_text()
    print_verdict(console, judged)
    assert "partition-seconds without a leader: 0.0, without acks=all service: 17.639" in console.export_text()
    info = load_run_info(RunBuilder(tmp_path, "r").write())
    assert "No lost or inconsistent write." not in render(info, unjudged, None)
    assert "proves nothing either way" in render(info, unjudged, None)
    assert "No lost or inconsistent write." in render(info, judged, None)
    assert "virtual clock" not in render(info, judged, None)  # a run of processes: its times are wall time


def test_a_run_that_broke_as_its_expect_wants_says_so_beside_its_ok(tmp_path: Path) -> None:
    """trial26: a lab's part that breaks a rule (`lost_writes: ">0"`) printed a bare green OK
    beside 350 lost writes, which read as a pass of the protocol; trial36: so did the report's
    headline."""
    console = Console(record=True, width=200)
    broke = {"checks": {"lost_writes": {"count": 350}}, "problems": [],
             "expect": {"lost_writes": {"expected": ">0", "observed": 350, "held": True},
                        "log_divergence": {"expected": "0", "observed": 0, "held": True}}}
    print_verdict(console, RunVerdict(Path("runs/bug"), True, broke))
    held = {"checks": {}, "problems": [], "expect": {"lost_writes": {"expected": "<=3", "observed": 0, "held": True}}}
    print_verdict(console, RunVerdict(Path("runs/fix"), True, held))
    lines = console.export_text().splitlines()
    assert "OK (it broke as its expect: wants: lost_writes 350)  report: runs/bug/report.html" in lines
    assert "OK  report: runs/fix/report.html" in lines
    from testbed.analysis.report import render
    from testbed.analysis.runinfo import load_run_info
    from tests.unit.analysis_fixtures import RunBuilder
    info = load_run_info(RunBuilder(tmp_path, "bug").write())
    assert "<span class='ok'>OK</span> (it broke as its expect: wants: lost_writes 350)</h1>" in \
        render(info, RunVerdict(tmp_path / "bug", True, {**broke, "figures": {}, "converged": True}), None)


def test_a_fix_that_left_values_unreached_is_not_said_to_have_broken() -> None:
    """trial34: lab 9's fix (no unclean election: the partition stays without a leader) ended
    "OK (it broke as its expect: wants: unseen 805)": a student read the fix as a failure."""
    console = Console(record=True, width=300)
    unseen = {"expected": ">0", "observed": 805, "held": True}
    fix = {"checks": {}, "problems": [], "expect": {"lost_writes": {"expected": "0", "observed": 0, "held": True},
                                                    "unseen": unseen}}
    print_verdict(console, RunVerdict(Path("runs/fix"), True, fix))
    both = {"checks": {}, "problems": [], "expect": {
        "lost_writes": {"expected": ">0", "observed": 3, "held": True}, "unseen": unseen}}
    print_verdict(console, RunVerdict(Path("runs/both"), True, both))
    lines = console.export_text().splitlines()
    assert ("OK (as its expect: wants, unseen 805: acknowledged values the final read could not reach, none "
            "proven lost)  report: runs/fix/report.html") in lines, lines
    assert ("OK (it broke as its expect: wants: lost_writes 3; and unseen 805: acknowledged values the final read "
            "could not reach, none proven lost)  report: runs/both/report.html") in lines, lines


def test_an_unjudged_runs_table_shows_no_count() -> None:
    """trial32: `lost_writes │ 0 │ 0 │ UNJUDGED` (its faults.jsonl gone) read as "none lost", and
    a killed run's table showed `unseen 660` beside UNJUDGED rows; its results.json keeps them."""
    from testbed.analysis.report import _verdicts
    results = {"ok": None, "checks": {"lost_writes": {"count": 0}, "unseen": {"count": 660}}, "converged": True,
               "problems": ["why"], "expect": {"lost_writes": {"expected": "0", "observed": 0, "held": None}}}
    console = Console(record=True, width=200)
    print_verdict(console, RunVerdict(Path("runs/r"), None, results))
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:4]]
            for line in console.export_text().splitlines() if line.count("│") >= 4}
    assert rows["lost_writes"] == ["", "0"] and rows["unseen"] == ["", ""] and rows["converged"] == ["", ""], rows
    html = _verdicts(results)
    assert "<td>lost_writes</td><td></td><td>0</td>" in html and "<td>unseen</td><td></td>" in html, html
    judged = {**results, "ok": True, "problems": [],
              "expect": {"lost_writes": {"expected": "0", "observed": 0, "held": True}}}
    assert "<td>lost_writes</td><td>0</td><td>0</td>" in _verdicts(judged)


def test_a_fault_that_failed_is_named_under_the_verdict(tmp_path: Path) -> None:
    """trial32: a `create-topic` the controller refused (a broker down, RF 3 unplaceable) ended
    in a plain OK; only the live progress and the report's administration table had it."""
    import json
    lines = [{"do": "create-topic", "origin": "faults[2]", "phase": "start", "effect": {}},
             {"do": "create-topic", "origin": "faults[2]", "phase": "end",
              "effect": {"error": "create-topic pay: INVALID_REPLICATION_FACTOR"}},
             {"do": "kill", "origin": "faults[3]", "phase": "end", "effect": {"killed": ["broker-1"]}}]
    # (a line that is no mapping, and a torn last one, are passed over)
    (tmp_path / "faults.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + '["error"]\n{"do": "ki')
    console = Console(record=True, width=200)
    print_verdict(console, RunVerdict(tmp_path, True, {"checks": {}, "expect": {}, "problems": []}))
    text = console.export_text()
    assert "fault failed: faults[2] create-topic: create-topic pay: INVALID_REPLICATION_FACTOR" in text, text
    assert text.count("fault failed") == 1


def test_a_tree_holding_one_run_gets_its_summary_and_a_run_given_itself_none(tmp_path: Path) -> None:
    """trial33: `analyze runs/` wrote `runs/summary/` with two runs inside and none with one."""
    from testbed.analysis.cli import _tree_of_one
    run = (tmp_path / "runs" / "r1").resolve()
    assert _tree_of_one([tmp_path / "runs"], [run]) == tmp_path / "runs" / "summary"
    assert _tree_of_one([run], [run]) is None


def test_a_window_under_a_millisecond_reads_as_such_not_as_none() -> None:
    """trial34: `audit/0 no-acks-all 11.243 11.243 0.0` in the report's Unavailability table."""
    from testbed.analysis.report import _figures
    windows = [{"topic": "audit", "partition": 0, "kind": "no-acks-all", "start_s": 11.243, "end_s": 11.243},
               {"topic": "audit", "partition": 0, "kind": "no-leader", "start_s": 4.016, "end_s": 4.575}]
    html = _figures({"figures": {"availability": windows, "faults": []}})
    assert "<td>11.243</td><td>11.243</td><td>&lt;0.001</td>" in html and "<td>0.559</td>" in html, html


def test_a_killed_run_that_failed_from_its_records_gets_one_line_in_a_tree() -> None:
    """trial37: a run cut short whose records broke `leader_conflicts: 0` for good printed
    `not judged: ...` and `failed: ...`, two lines that disagree, in a tree; alone, its cut is
    said as what was not judged whole beside its FAILED."""
    why = "runs/cut/final/replicas.jsonl is missing or empty: the run did not reach its end"
    results = {"checks": {"leader_conflicts": {"count": 1}}, "problems": [why],
               "expect": {"leader_conflicts": {"expected": "0", "observed": 1, "held": False},
                          "lost_writes": {"expected": "0", "observed": None, "held": None}}}
    console = Console(record=True, width=300)
    _print_tree(console, [RunVerdict(Path("runs/cut"), False, results)], None)
    lines = [line for line in console.export_text().splitlines() if line.startswith(("failed:", "not judged"))]
    assert lines == [f"failed: cut: leader_conflicts 1 (expected 0); not judged whole: {why}  "
                     f"report: runs/cut/report.html"]
    console = Console(record=True, width=300)
    print_verdict(console, RunVerdict(Path("runs/cut"), False, results))
    text = console.export_text()
    assert f"not judged whole: {why}" in text and "FAILED: leader_conflicts 1 (expected 0)" in text


def test_the_report_shows_every_other_check_that_found_something(tmp_path: Path) -> None:
    """trial37: the report listed the first of the other checks with findings and no more (the
    list of the checks a killed run's records stand by was overwritten by the first's examples)."""
    from testbed.analysis.report import render
    from testbed.analysis.runinfo import load_run_info
    from tests.unit.analysis_fixtures import RunBuilder
    info = load_run_info(RunBuilder(tmp_path, "r").write())
    checks = {"duplicates": {"count": 2, "examples": [{"topic": "orders", "value": "p1-7"}]},
              "leader_conflicts": {"count": 1, "examples": [{"topic": "orders", "partition": 0, "leader_epoch": 0,
                                                             "leaders": [1, 2]}]}}
    page = render(info, RunVerdict(tmp_path / "r", False, {"checks": checks, "expect": {}, "problems": [],
                                                           "figures": {}, "converged": True}), None)
    assert "<h3>duplicates: 2 (the first 1)</h3>" in page and "<h3>leader_conflicts: 1</h3>" in page


def test_the_terminal_names_another_checks_first_finding_and_says_converged_in_words() -> None:
    """trial37: a leader conflict was a bare count in the terminal (its partition, epoch and
    brokers only in results.json), `converged │ 1` read as a count, and one lost value was
    `at offsets 2`."""
    from testbed.analysis.terminal import cause_line
    results = {"converged": True, "problems": [], "expect": {},
               "checks": {"leader_conflicts": {"count": 1, "examples": [
                   {"topic": "orders", "partition": 0, "leader_epoch": 0, "leaders": [1, 2]}]},
                   "duplicates": {"count": 3, "examples": [{"topic": "orders", "value": "p-1", "times": 2}]}}}
    console = Console(record=True, width=200)
    print_verdict(console, RunVerdict(Path("runs/c"), False, results))
    lines = console.export_text().splitlines()
    assert "leader_conflicts: topic orders, partition 0, leader_epoch 0, leaders [1, 2]" in lines
    assert "duplicates: topic orders, value p-1, times 2 (the first of 3; the report shows more)" in lines
    assert any(line.startswith("│ converged") and "│   yes │" in line for line in lines), lines
    group = {"count": 1, "topic": "orders", "partition": 0, "offsets": [[2, 2]], "cause": "when ..."}
    assert cause_line("lost_writes", group) == "1 value of orders/0 at offset 2 lost when ..."
    assert cause_line("lost_writes", {**group, "count": 2, "offsets": [[2, 3]]}).startswith("2 values of orders/0 at offsets 2-3")


def test_the_report_lists_the_faults_that_did_not_act(tmp_path: Path) -> None:
    """trial38: a nemesis partition skipped by max_down, and a fault that failed, were said on
    the terminal and nowhere in the report, whose recovery table lists the faults applied."""
    from testbed.analysis.runinfo import faults_not_acted, load_run_info
    from tests.unit.analysis_fixtures import T0, RunBuilder, S
    r = RunBuilder(tmp_path, "r")
    r.fault(T0 + 2 * S, "partition", None, [], {"shape": "halves", "max_down": 1}, {"skipped": "max_down"},
            origin="faults[0].nemesis#1")
    r.fault(T0 + 3 * S, "delete-topic", None, [], {"topic": "nope"}, {"error": "UNKNOWN_TOPIC_OR_PARTITION"},
            origin="faults[1]")
    d = r.write()
    rows = faults_not_acted(d, T0)
    assert [(do, origin) for _, do, origin, _ in rows] == [("partition", "faults[0].nemesis#1"),
                                                          ("delete-topic", "faults[1]")]
    assert rows[0][3].startswith("skipped (max_down") and rows[1][3] == "UNKNOWN_TOPIC_OR_PARTITION"
    from testbed.analysis.report import _not_acted
    page = _not_acted(load_run_info(d))
    assert "<h3>Faults that did not act</h3>" in page and "faults[0].nemesis#1" in page and "UNKNOWN_TOPIC" in page
    assert _not_acted(load_run_info(RunBuilder(tmp_path, "clean").write())) == ""
