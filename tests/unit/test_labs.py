"""The labs (issue 12): the catalog checks every guide and topology before anything starts,
with errors naming file and key; `lab 99` lists the labs; the answers come from a run's
records (hand-made here); the guide renders for the terminal and the report; the live view
draws LEO and HWM bars."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from testbed.labs.answers import FACTS, RunRecords, answer
from testbed.labs.catalog import LABS_DIR, LabError, all_labs, find_lab, lab_dirs, load_lab
from testbed.labs.guide import answers, intro, part_markdown
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.cluster_view import MIN_BAR, bar, cluster_view, faults_in_force
from tests.unit.analysis_fixtures import T0, RunBuilder, S

ROOT = Path(__file__).resolve().parents[2]
FRONT = {
    "title": "A follower's failure and the ISR",
    "rule": "R9: a follower that stops fetching leaves the ISR",
    "parts": [{"topology": "t.yaml", "label": "a paused follower"}],
    "predict": "What happens to the HWM while the follower is paused?",
    "questions": [{"ask": "When did the ISR shrink?", "answer": ["isr_changes"]},
                  {"ask": "Was anything lost?", "answer": ["lost_writes", "acknowledged"]}],
}
TOPOLOGY = {
    "name": "lab-t", "seed": 1, "duration": "3s",
    "cluster": {"controllers": 1, "brokers": [{"id": 1, "rack": "a"}, {"id": 2, "rack": "b"}, {"id": 3, "rack": "c"}]},
    "topics": [{"name": "orders", "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2}],
    "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all", "rate": "50/s"}]},
    "expect": {"lost_writes": 0},
}


def make_lab(root: Path, name: str = "03-follower", front: dict | None = None, body: str = "## About\n\nText.\n",
             topology: dict | None = None) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "t.yaml").write_text(yaml.safe_dump(topology or TOPOLOGY), encoding="utf-8")
    (d / "guide.md").write_text("---\n" + yaml.safe_dump(front or FRONT, sort_keys=False) + "---\n" + body,
                                encoding="utf-8")
    return d


def test_a_lab_is_its_guide_and_its_checked_topologies(tmp_path: Path) -> None:
    lab = load_lab(make_lab(tmp_path))
    assert (lab.number, lab.slug, lab.title) == (3, "follower", FRONT["title"])
    assert [p.topology.name for p in lab.parts] == ["lab-t"] and lab.parts[0].label == "a paused follower"
    assert [q.facts for q in lab.questions] == [("isr_changes",), ("lost_writes", "acknowledged")]
    assert lab.body == "## About\n\nText.\n"
    assert find_lab("3", tmp_path) == lab == find_lab("03-follower", tmp_path)


@pytest.mark.parametrize("change, expected", [
    ({"title": ""}, "guide.md: title: expected a non-empty string"),
    ({"colour": "red"}, "guide.md: colour: unknown key"),
    ({"parts": []}, "guide.md: parts: expected a non-empty list"),
    ({"parts": [{"topology": "t.yaml"}]}, "guide.md: parts[0]: expected {topology: a file relative to the lab"),
    ({"parts": [{"topology": "missing.yaml", "label": "x"}]}, "guide.md: parts[0].topology: "),
    ({"questions": [{"ask": "?", "answer": ["lost_everything"]}]},
     "guide.md: questions[0].answer: unknown fact lost_everything (expected: acknowledged, "),
    ({"questions": [{"ask": "?", "answer": []}]}, "guide.md: questions[0].answer: expected a non-empty list"),
    ({"questions": "why?"}, "guide.md: questions: expected a non-empty list"),
])
def test_a_bad_guide_names_the_file_and_the_key(tmp_path: Path, change: dict, expected: str) -> None:
    with pytest.raises(LabError) as exc:
        load_lab(make_lab(tmp_path, front={**FRONT, **change}))
    assert expected in str(exc.value) and str(tmp_path / "03-follower" / "guide.md") in str(exc.value)


def test_a_lab_whose_topology_is_invalid_is_an_error_with_the_topologys_key(tmp_path: Path) -> None:
    with pytest.raises(LabError) as exc:
        load_lab(make_lab(tmp_path, topology={**TOPOLOGY, "duration": "forever"}))
    assert "parts[0].topology: " in str(exc.value) and "t.yaml: duration" in str(exc.value)


@pytest.mark.parametrize("text, expected", [
    ("## no front matter\n", "expected YAML front matter between '---' lines"),
    ("---\ntitle: x\n", "the front matter's closing '---' is missing"),
    ("---\ntitle: x\ntitle: y\n---\n", "line 3, column 1: invalid YAML: duplicate key 'title' (first given on line 2)"),
    ("---\n- a list\n---\n", "the front matter must be a mapping"),
])
def test_a_guide_without_valid_front_matter_is_an_error(tmp_path: Path, text: str, expected: str) -> None:
    d = make_lab(tmp_path)
    (d / "guide.md").write_text(text, encoding="utf-8")
    with pytest.raises(LabError, match=re.escape(expected)):
        load_lab(d)


def test_an_unknown_lab_is_an_error_that_lists_the_labs(tmp_path: Path) -> None:
    make_lab(tmp_path, "01-healthy")
    make_lab(tmp_path, "02-acks")
    (tmp_path / "notes").mkdir()  # not a lab: no NN- prefix
    assert [d.name for d in lab_dirs(tmp_path)] == ["01-healthy", "02-acks"]
    for which in ("99", "foo"):
        with pytest.raises(LabError) as exc:
            find_lab(which, tmp_path)
        message = str(exc.value)
        assert f"no lab {which!r}" in message and "01  healthy" in message and "02  acks" in message


def test_a_lab_outside_the_shipped_ones_is_found_by_its_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A teacher's own lab, as `validate` takes it: by its directory or its guide.md (trial39:
    `validate` said ok, `lab` said "no lab"). A shipped lab's number or name comes first."""
    mine = make_lab(tmp_path / "mine", "14-acks1-crash")
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    make_lab(shipped, "01-healthy")
    for which in (str(mine), str(mine / "guide.md")):
        assert find_lab(which, shipped).directory == mine
    monkeypatch.chdir(tmp_path / "mine")
    assert find_lab("14-acks1-crash", shipped).directory.resolve() == mine.resolve()  # a relative path
    assert find_lab("01", shipped).directory == shipped / "01-healthy"
    with pytest.raises(LabError, match=r"no lab 'nothere' \(a lab is given by number, by name, or by the path of "):
        find_lab("nothere", shipped)


def test_lab_99_on_the_command_line_exits_2_and_lists_the_shipped_labs() -> None:
    out = subprocess.run([sys.executable, "run.py", "lab", "99"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert out.returncode == 2 and "no lab '99'" in out.stderr and out.stdout == ""
    assert all(d.name[:2] in out.stderr for d in lab_dirs())


def test_the_shipped_labs_are_thirteen_valid_labs_in_order() -> None:
    """Issue 12: at least 13 labs, each guide and topology valid, and each part expects
    something of its run (so `pytest -m labs` can fail)."""
    labs = all_labs()
    assert len(labs) >= 13 and [lab.number for lab in labs] == list(range(1, len(labs) + 1))
    for lab in labs:
        assert lab.questions and lab.parts, lab.name
        for part in lab.parts:
            assert part.topology.expect, f"{lab.name}: {part.path} has no expect: block"
    out = subprocess.run([sys.executable, "run.py", "lab", "list"], cwd=ROOT, capture_output=True, text=True,
                         check=False, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin",
                                           "PYTHONDONTWRITEBYTECODE": "1"})  # (else its bytecode lands in the tree)
    assert out.returncode == 0, out.stderr
    assert all(lab.title[:20] in out.stdout for lab in labs)
    assert LABS_DIR == ROOT / "topologies" / "labs"


def _run(tmp_path: Path) -> Path:
    """A hand-made run: broker 1 leads, broker 3 leaves the ISR at 1 s, broker 2 is elected
    at 2 s after truncating, one acks=all write is lost to it, and a client saw
    NOT_ENOUGH_REPLICAS."""
    b = RunBuilder(tmp_path, "run")
    b.events += [
        b.change(T0 + S, leader=1, epoch=0, isr=[1, 2], reason="isr-shrink"),
        {"node": "broker-2", "time_ns": T0 + 2 * S - 10, "kind": "truncated", "topic": "orders", "partition": 0,
         "reason": "high-watermark", "leader_epoch": 0, "from": 5, "to": 3},
        b.change(T0 + 2 * S, leader=2, epoch=1, isr=[2], reason="election"),
    ]
    b.history.append({"process": "producer-0", "type": "fail", "f": "send", "topic": "orders", "partition": 0,
                      "value": "v9", "acks": "all", "error": "NOT_ENOUGH_REPLICAS", "time_ns": T0 + 3 * S})
    b.write()
    run = b.dir
    (run / "summary.json").write_text(json.dumps({"operations": {"send:ok": 5, "send:fail": 1},
                                                  "acknowledged": {"all": 5}}))
    cause = "when broker 2 was elected at leader epoch 1 with LEO 3"
    (run / "results.json").write_text(json.dumps({"ok": True, "checks": {
        "lost_writes": {"count": 2, "unattributed": 0, "examples": [
            {"topic": "orders", "partition": 0, "offset": 3, "value": "v3"},
            {"topic": "orders", "partition": 0, "offset": 4, "value": "v4"}],
            "causes": [{"topic": "orders", "partition": 0, "count": 2, "cause": cause, "offsets": [[3, 4]]}]},
        "log_divergence": {"count": 1, "examples": [{"topic": "orders", "partition": 0, "node_a": "broker-1",
                                                     "node_b": "broker-2", "offset": 3, "value_a": "v3",
                                                     "value_b": "x3", "offsets": 2, "bound": 5}]}},
        "figures": {"unavailable_s": {"no-leader": 0.5, "no-acks-all": 1.25}, "availability": []}}))
    return run


def test_r32_an_unclean_recovery_answer_names_the_log_infos_it_chose_from(tmp_path: Path) -> None:
    """Lab 10 asks which broker was elected "and from which log infos": the answer says them
    (a tester's answer named only the broker and its epoch), or the operator's choice."""
    run = _run(tmp_path)
    infos = [{"broker": 3, "broker_epoch": 9, "last_written_epoch": 1, "leo": 705},
             {"broker": 1, "broker_epoch": 8, "last_written_epoch": -1, "leo": 0}]
    with open(run / "events.jsonl", "a") as events:
        for epoch, answers, at in ((2, infos, T0 + 2.4 * S), (3, [], T0 + 2.8 * S)):  # before the last operation
            leader, mode = (3, "balanced") if answers else (2, "manual")
            events.write(json.dumps({"time_ns": int(at), "node": "controller-1", "kind": "unclean-recovery",
                                     "topic": "orders", "partition": 0, "mode": mode, "leader": leader,
                                     "leader_epoch": epoch, "log_infos": answers}) + "\n")
            events.write(json.dumps({**RunBuilder.change(int(at), leader=leader, epoch=epoch, isr=[leader],
                                                         reason="unclean-recovery"), "partition_epoch": epoch + 1})
                         + "\n")
    assert FACTS["elections"](RunRecords.load(run))[1:] == [
        "2.40s orders/0: broker 3 leads at leader epoch 2 (unclean-recovery; ISR [3], ELR []); balanced, from the log "
        "infos: broker 1 epoch -1 LEO 0, broker 3 epoch 1 LEO 705",
        "2.80s orders/0: broker 2 leads at leader epoch 3 (unclean-recovery; ISR [2], ELR []); manual: the operator's "
        "choice"]


def test_the_answers_are_the_runs_numbers(tmp_path: Path) -> None:
    run = RunRecords.load(_run(tmp_path))
    assert FACTS["lost_writes"](run) == [
        "2 acknowledged acks=all writes lost, e.g. v3 (at orders/0 offset 3), v4 (at orders/0 offset 4)",
        "2 values of orders/0 at offsets 3-4 lost when broker 2 was elected at leader epoch 1 with LEO 3"]
    assert FACTS["lost_writes_acks1"](run) == ["no acks=1 write was lost"]
    assert FACTS["elections"](run) == ["2.00s orders/0: broker 2 leads at leader epoch 1 (election; ISR [2], ELR [])"]
    assert FACTS["isr_changes"](run) == ["1.00s orders/0: ISR shrinks [1, 2, 3] -> [1, 2] (isr-shrink)",
                                         "2.00s orders/0: ISR shrinks [1, 2] -> [2] (election)"]
    with open(run.run_dir / "events.jsonl", "a") as events:  # R29: an unclean restart moves an ELR member on
        events.write(json.dumps({**RunBuilder.change(T0 + 3 * S, leader=2, epoch=1, isr=[2], reason="isr-shrink",
                                                     elr=[3]), "partition_epoch": 2}) + "\n")
        events.write(json.dumps({**RunBuilder.change(T0 + 4 * S, leader=2, epoch=1, isr=[2], reason="unclean-exclusion"),
                                 "last_known_elr": [3], "partition_epoch": 3}) + "\n")
    assert FACTS["isr_changes"](RunRecords.load(run.run_dir))[2:] == [
        "3.00s orders/0: ELR grows [] -> [3] (isr-shrink)",
        "4.00s orders/0: ELR shrinks [3] -> [], LastKnownELR grows [] -> [3] (unclean-exclusion)"]
    assert FACTS["truncations"](run) == [
        "2.00s broker-2 truncated orders/0 from offset 5 to 3 (high-watermark, leader epoch 0)"]
    assert FACTS["errors"](run) == ["1 send operations (acks=all) answered NOT_ENOUGH_REPLICAS"]
    assert FACTS["divergence"](run) == ["orders/0: brokers broker-1 and broker-2 first differ at offset 3 "
                                        "(v3 against x3), 2 offsets in all below 5"]
    assert FACTS["acknowledged"](run) == [
        "acknowledged writes: acks=all: 5; sends that failed: 1, with an unknown outcome (timed out): 0"]
    assert FACTS["unavailability"](run)[0] == ("partition-seconds without a leader: 0.5, without acks=all "
                                               "service: 1.25")
    assert FACTS["controllers"](run) == ["0.00s controller-1 became the active controller in term 1"]
    # with the ISR the controller last committed (lab 1 asks for it: trial36)
    assert FACTS["final_state"](run) == ["orders/0: leader broker-1, ISR [2]; broker-1 LEO 5 HWM 5, broker-2 LEO 5 "
                                         "HWM 5, broker-3 LEO 5 HWM 5"]
    assert FACTS["placement"](run) == ["every partition's replicas span as many racks as they can"]
    assert answer(run, ["errors", "truncations"]) == FACTS["errors"](run) + FACTS["truncations"](run)


def test_a_change_a_new_leader_records_again_is_not_a_change_again(tmp_path: Path) -> None:
    """DESIGN 7: controller 2, elected, records again the two changes controller 1 had
    recorded (it cannot know it did); read in order, the copies would say broker 1 led again
    at 2.5 s and broker 2 after it. The answers keep each record's first event, as the
    analysis's ingest does."""
    run_dir = _run(tmp_path)
    lines = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    changes = [e for e in lines if e["kind"] == "partition-changed"]
    for offset, e in enumerate(changes):
        e["metadata_offset"] = offset
    copies = [{**e, "node": "controller-2", "time_ns": T0 + int(2.5 * S)} for e in changes]
    (run_dir / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [*lines, *copies]))
    assert FACTS["elections"](RunRecords.load(run_dir)) == [
        "2.00s orders/0: broker 2 leads at leader epoch 1 (election; ISR [2], ELR [])"]


def test_the_leadership_churn_of_the_runs_own_shutdown_is_not_an_answer(tmp_path: Path) -> None:
    """After the final read the supervisor shuts the cluster down; the elections that causes
    are not what the lab's faults did."""
    run_dir = _run(tmp_path)
    last = max(json.loads(line)["time_ns"] for line in (run_dir / "history.jsonl").read_text().splitlines())
    with open(run_dir / "events.jsonl", "a") as f:
        f.write(json.dumps({"node": "controller-1", "time_ns": last + S, "kind": "partition-changed",
                            "topic": "orders", "partition": 0, "leader": 3, "leader_epoch": 2, "isr": [3],
                            "elr": [], "reason": "controlled-shutdown"}) + "\n")
    assert all("controlled-shutdown" not in line for line in FACTS["elections"](RunRecords.load(run_dir)))


def test_a_run_with_nothing_to_report_says_so(tmp_path: Path) -> None:
    b = RunBuilder(tmp_path, "clean")
    b.write()
    run = RunRecords.load(b.dir)
    for name in ("elections", "isr_changes", "truncations", "errors", "divergence"):
        [line] = FACTS[name](run)
        assert line.startswith(("no ", "the ")), (name, line)


def test_the_guide_renders_with_the_prediction_and_the_answers_per_part(tmp_path: Path) -> None:
    lab = load_lab(make_lab(tmp_path))
    console = Console(record=True, width=140)
    console.print(intro(lab))
    run = RunRecords.load(_run(tmp_path))
    console.print(answers(lab, [(lab.parts[0], run)]))
    text = console.export_text()
    for piece in ("Lab 3: A follower's failure and the ISR", "Rule: R9", "About", "Before you run: predict",
                  "What happens to the HWM", "1. When did the ISR shrink?", "a paused follower:",
                  "ISR shrinks [1, 2, 3] -> [1, 2]", "2 acknowledged acks=all writes lost"):
        assert piece in text, piece
    md = part_markdown(lab, 0)
    assert md.startswith("# Lab 3: A follower's failure and the ISR\n") and "Part 1 of 1: **a paused follower**" in md
    assert "- When did the ISR shrink?" in md


def test_the_report_of_a_lab_run_shows_its_guide_as_html_without_raw_html(tmp_path: Path) -> None:
    from testbed.analysis.report import LAB_GUIDE, render
    from testbed.analysis.runinfo import load_run_info
    from testbed.analysis.verdict import RunVerdict
    run_dir = _run(tmp_path)
    (run_dir / LAB_GUIDE).write_text("# Lab 3: title\n\n## The rule\n\nR9 <script>x</script>\n", encoding="utf-8")
    page = render(load_run_info(run_dir), RunVerdict(run_dir, None, {"problems": [], "checks": {}, "expect": {}}),
                  None)
    assert "<div class='lab'><h1>Lab 3: title</h1>" in page and "<h2>The rule</h2>" in page
    assert "<script>" not in page and "&lt;script&gt;" in page


def _status(leo: dict[int, tuple[int, int] | None], isr: list[int]) -> ClusterStatus:
    part = {"topic": "orders", "partition": 0, "leader": 1, "leader_epoch": 2, "partition_epoch": 5,
            "replicas": [1, 2, 3], "isr": isr, "elr": [3] if 3 not in isr else [], "last_known_elr": []}
    brokers = {b: None if v is None else {"partitions": [{"topic": "orders", "partition": 0, "leader_epoch": 2,
                                                          "role": "leader" if b == 1 else "follower",
                                                          "leo": v[0], "hwm": v[1]}]}
               for b, v in leo.items()}
    return ClusterStatus.of({"controller-1": {"active": True, "partitions": [part]}}, brokers)


def test_the_live_view_draws_leo_and_hwm_bars_and_the_faults() -> None:
    assert bar(100, 50, 100).plain == "█" * 15 + "▒" * 15
    assert bar(50, 50, 100).plain == "█" * 15 + "·" * 15
    assert bar(0, 0, 0).plain == "·" * 30
    console = Console(record=True, width=200)
    console.print(cluster_view(_status({1: (100, 60), 2: (60, 60), 3: None}, [1, 2]), "run-x",
                               ["pause broker:3 -> broker-3"]))
    text = console.export_text()
    assert "orders/0" in text and "[1, 2]" in text and "[3]" in text
    assert "broker-1 leader" in text and "100 / 60" in text and "60 / 60" in text
    assert "down or silent" in text and "not answering: broker-3" in text
    assert "faults in force: pause broker:3 -> broker-3" in text


def test_the_live_view_keeps_every_field_whole_on_an_80_column_terminal() -> None:
    """The bars give way to the fields: a student's default terminal shows the ISR, the
    ELR and each replica's LEO / HWM whole, the bars narrower."""
    status = _status({1: (123456, 120000), 2: (120000, 120000), 3: (90000, 90000)}, [1, 2])
    console = Console(record=True, width=80)
    console.print(cluster_view(status, "20261126T062758.265864Z-quickstart-s0", []))
    lines = console.export_text().splitlines()
    assert all(len(line.rstrip()) <= 80 for line in lines)
    text = "\n".join(lines)
    for whole in ("orders/0  leader 1  epoch 2  ISR [1, 2]  ELR [3]  LastKnownELR []", "broker-3 out of ISR",
                  "123456 / 120000", "90000 / 90000"):
        assert whole in text, whole
    narrow = Console(record=True, width=40)
    narrow.print(cluster_view(status, "run-x", []))
    bars = [line for line in narrow.export_text().splitlines() if "█" in line and "broker-" in line]
    assert len(bars) == 3 and all(line.count("█") + line.count("▒") + line.count("·") == MIN_BAR for line in bars)


def _fault(origin: str, do: str, target: str | None, resolved: list[str], **effect: object) -> dict:
    return {"do": do, "target": target, "resolved": resolved, "origin": origin, "phase": "end", "effect": effect}


def test_the_faults_in_force_are_those_not_yet_undone() -> None:
    """A kill until its node restarts, a pause until each paused node resumes, a partition
    until a heal names it; a failed fault and an election are never in force."""
    records = [
        _fault("faults[0]", "pause", "followers-of orders/0", ["broker-2", "broker-3"]),
        _fault("faults[1]", "kill", "leader-of orders/0", ["broker-1"]),
        _fault("faults[2]", "partition", None, [], groups=[["broker-1"], ["broker-2"]]),
        _fault("faults[3]", "kill", "broker:9", [], error="unknown target 'broker:9'"),
        _fault("faults[4]", "elect-preferred", None, []),
        _fault("faults[5]", "resume", "broker:2", ["broker-2"]),
        _fault("faults[6]", "disk-loss", "broker:3", ["broker-3"]),
        {**_fault("faults[11]", "slow", None, []), "params": {"delay": 0.05, "loss": 0.1, "from": "rack:a"}},
    ]
    assert faults_in_force(records) == ["pause followers-of orders/0 -> broker-3",
                                        "kill leader-of orders/0 -> broker-1", "partition broker-1 | broker-2",
                                        "disk-loss broker:3 -> broker-3", "slow from rack:a (delay 50ms, loss 0.1)"]
    records += [_fault("faults[7]", "heal", None, [], healed=["faults[2]", "faults[11]"]),
                _fault("faults[8]", "restart", "stopped", ["broker-1", "broker-3"]),
                _fault("faults[9]", "resume", "paused", ["broker-3"])]
    assert faults_in_force(records) == []
    start = {**_fault("faults[10]", "kill", "broker:2", ["broker-2"]), "phase": "start"}
    assert faults_in_force([start]) == [], "a fault is in force from its end record on"


def test_a_part_that_could_not_be_judged_is_named_under_the_answers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by a tester: when a lab's Spark went away, its questions came back with no answer
    and no word why."""
    import testbed.experiment.runner as runner
    from testbed.labs.cli import run_lab

    def unjudged(topology: object, runs_dir: Path, *args: object, run_dir: Path, **kwargs: object) -> runner.Outcome:
        return runner.Outcome(run_dir, True, None, 2, None)
    monkeypatch.setattr(runner, "run_experiment", unjudged)
    console = Console(record=True, width=300)
    lab = find_lab("3")
    assert run_lab(lab, console, tmp_path, 1.0, None, step=False) == 2
    text = console.export_text()
    for part in lab.parts:
        assert f"{part.label}: not judged (see above)" in text
    assert "python run.py analyze" in text


def test_the_live_view_says_a_removed_broker_is_removed_not_unanswering() -> None:
    """trial34: `status --watch` called broker 2, which a remove-broker had taken out (R39),
    "not answering"."""
    from testbed.supervisor.cluster_view import removed_brokers
    records = [{"do": "remove-broker", "phase": "start", "resolved": ["broker-3"], "effect": {}},
               {"do": "remove-broker", "phase": "end", "resolved": ["broker-3"], "effect": {"removed": "broker:3"}},
               {"do": "remove-broker", "phase": "end", "resolved": ["broker-2"], "effect": {"error": "refused"}}]
    assert removed_brokers(records) == frozenset({"broker-3"})
    console = Console(record=True, width=200)
    console.print(cluster_view(_status({1: (10, 10), 2: None, 3: None}, [1]), "run-x", [], removed_brokers(records)))
    text = console.export_text()
    assert "removed (R39): broker-3" in text and "not answering: broker-2" in text and "broker-2, broker-3" not in text


def test_a_process_fault_that_changed_nothing_is_not_in_force() -> None:
    """trial38: a pause that found its broker dead (`unchanged`) stayed in force in `status
    --watch` after the resume, which found nothing paused to resume."""
    records = [_fault("faults[0]", "kill", "broker:2", ["broker-2"]),
               _fault("faults[1]", "pause", "broker:2", ["broker-2"], unchanged={"broker-2": "not running"}),
               _fault("faults[2]", "pause", "followers-of orders/0", ["broker-2", "broker-3"],
                      unchanged={"broker-2": "not running"}),
               _fault("faults[3]", "resume", "paused", [])]
    assert faults_in_force(records) == ["kill broker:2 -> broker-2", "pause followers-of orders/0 -> broker-3"]
