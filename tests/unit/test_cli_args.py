"""Command-line values are refused before a command starts anything, each in one line that
says which argument and what it takes (found by trying every command's flags with empty,
foreign-script, endless and out-of-range values)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

import run

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = str(ROOT / "topologies" / "quickstart.yaml")
MATRIX = str(ROOT / "topologies" / "matrix" / "example.yaml")


@pytest.mark.parametrize(("argv", "said"), [
    (["analyze", ""], "argument paths: an empty path"),  # Path("") is ".": it judged every run under it
    ([QUICKSTART, "--runs-dir", "", "--dry-run"], "argument --runs-dir: an empty path"),
    ([QUICKSTART, "--seed", "\u0661\u0662", "--dry-run"], "'\u0661\u0662': expected a whole number of the digits 0-9"),
    ([QUICKSTART, "--seed", "1_000", "--dry-run"], "expected a whole number of the digits 0-9"),
    ([QUICKSTART, "--time-scale", "\uff11.\uff15", "--dry-run"], "expected a number of the digits 0-9"),
    ([QUICKSTART, "--time-scale", "1e30", "--dry-run"], "--time-scale must be a number from 0.01 to 1000"),
    (["matrix", MATRIX, "--dry-run", "--jobs", "1000000"], "--jobs must be from 1 to 64"),
    (["matrix", MATRIX, "--dry-run", "--deflake", "1000"], "--deflake must be from 0 to 100"),
    (["matrix", MATRIX, "--dry-run", "--only", "="], "--only must be a selector"),
    (["sim", QUICKSTART, "--seed", str(2**63 - 1), "--seeds", "3"], "is beyond 2**63-1"),
    (["bench", "--only", "pipeline", "--pipeline-records", "abc"], "argument --pipeline-records: 'abc'"),
    (["bench", "--only", "pipeline", "--window", "nan"], "--window nan: expected a number from 0.1"),
    (["valdate", QUICKSTART], "did you mean `python run.py validate`?"),
])
def test_a_bad_value_is_one_line_naming_the_argument(argv: list[str], said: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(argv) == 2
    captured = capsys.readouterr()
    assert said in captured.out + captured.err, captured.out + captured.err


def _exit_code(argv: list[str]) -> int:
    """What `python run.py ARGV` exits with (argparse's refusals exit by SystemExit)."""
    try:
        return run.main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_a_fifo_given_as_a_topology_is_refused_without_opening_it(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Opening a FIFO waits for a writer: `validate` and a run hung for ever."""
    fifo = tmp_path / "t.yaml"
    os.mkfifo(fifo)
    assert run.main(["validate", str(fifo)]) == 1
    captured = capsys.readouterr()
    assert f"{fifo}: not a regular file" in captured.out + captured.err


@pytest.mark.parametrize("word, guess", [("frobnicate", None), ("valdate", "validate"), ("analyse", "analyze")])
def test_a_word_that_is_no_command_and_no_file_names_the_commands(word: str, guess: str | None, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A mistyped command read as a topology file said only `frobnicate: no such file`
    (trial23); a missing file named as a file still says so."""
    monkeypatch.chdir(tmp_path)
    assert run.main([word]) == 2
    said = capsys.readouterr().err
    assert f"{word!r} is neither a command nor a file" in said and "commands: validate, status" in said
    assert (f"did you mean `python run.py {guess}`" in said) if guess else "did you mean" not in said
    assert run.main(["nope.yaml"]) == 2
    assert "nope.yaml: no such file" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "said"), [
    (["-h"], "usage: python run.py [-h] [--version]"),
    (["--help"], "Other commands: validate, status"),
    (["help"], "positional arguments:"),
    (["help", "matrix"], "usage: python run.py matrix"),
    (["--version"], "isrlab 0.1.0"),
])
def test_the_help_a_new_user_asks_for_is_given(argv: list[str], said: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """`python run.py --help` answered "'--help' is neither a command nor a file", exit 2."""
    assert _exit_code(argv) == 0
    captured = capsys.readouterr()
    assert said in captured.out and "neither a command" not in captured.err


def test_the_runs_options_may_come_before_its_topology(capsys: pytest.CaptureFixture[str]) -> None:
    """`python run.py --seed 77 --dry-run x.yaml` was read as a command named --seed."""
    assert _exit_code(["--seed", "77", "--dry-run", QUICKSTART]) == 0
    assert "seed: 77" in capsys.readouterr().out


def test_help_for_no_command_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    assert _exit_code(["help", "frobnicate"]) == 2
    assert "no command 'frobnicate' (commands: validate" in capsys.readouterr().err


def test_status_says_what_it_reaped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    """trial34: after a kill -9 of a supervisor and its watchman, `status` removed the run's
    mounts and registry in silence and said only "no run is in progress"."""
    from testbed.supervisor import processes
    monkeypatch.setattr(processes, "reap_leftovers",
                        lambda runs_dir: [processes.Reaped("20261201T000000Z-killed-s1", False),
                                          processes.Reaped("20261201T000001Z-husk-s1", True)])
    assert _exit_code(["status", "--runs-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert ("reaped what run 20261201T000000Z-killed-s1 left (its supervisor and its watchman were killed): its "
            "processes, sockets, mounts and namespaces are gone; its run directory stays\n") in captured.err
    assert ("reaped what run 20261201T000001Z-husk-s1 left (its supervisor and its watchman were killed): its "
            "processes, sockets, mounts and namespaces are gone; its run directory, made before any node of it "
            "started, held no run and is removed\n") in captured.err
    assert "no run is in progress" in captured.out


def test_a_summary_dir_that_is_a_run_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """trial35: `analyze ... --summary-dir <a run>` wrote the summary's tables and log in among
    that run's records."""
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "topology.yaml").write_text("name: x\n")
    assert _exit_code(["analyze", str(tmp_path / "a"), str(tmp_path / "b"), "--summary-dir", str(tmp_path / "a")]) == 2
    assert (f"--summary-dir {tmp_path / 'a'}: a run's directory (it holds history.jsonl or topology.yaml)"
            in capsys.readouterr().out)
    assert not (tmp_path / "a" / "summary.html").exists()


def test_validate_names_both_kinds_an_empty_file_could_be(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """validate takes topologies and matrices: an empty file was told only a topology's keys (trial36)."""
    empty = tmp_path / "m.yaml"
    empty.write_text("# nothing yet\n")
    assert run.main(["validate", str(empty)]) == 1
    said = capsys.readouterr().err
    assert f"{empty}: the file is empty" in said and "name, cluster.brokers and topics" in said and "at least base" in said


def test_a_nul_byte_is_named_with_its_line_and_column_on_one_line(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """PyYAML's own message spans two lines and counts characters of the whole file (trial36)."""
    binary = tmp_path / "t.yaml"
    binary.write_bytes(b"name: x\ntopics:\x00 []\n")
    assert run.main(["validate", str(binary)]) == 1
    said = capsys.readouterr().err.strip()
    assert said == (f"{binary}: line 2, column 8: invalid YAML: the character U+0000 is not allowed "
                    f"(YAML allows no control character but tab and line ends: is this a binary file?)")


def test_validate_checks_a_lab_by_its_directory_or_its_guide(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A teacher writing a lab checks it before a class: its guide was read as one YAML document."""
    hw = ROOT / "topologies" / "labs" / "06-hw-truncation"
    assert run.main(["validate", str(hw), str(hw / "guide.md")]) == 0
    assert capsys.readouterr().out.count(": ok (a lab of 2 parts)") == 2
    lab = tmp_path / "01-mine"
    lab.mkdir()
    (lab / "a.yaml").write_text(Path(QUICKSTART).read_text())
    (lab / "guide.md").write_text("---\ntitle: mine\nrule: R1\nparts:\n  - topology: a.yaml\n    label: bug\n"
                                  "  - topology: b.yaml\n    label: fix\npredict: what?\nquestions: []\n---\nbody\n")
    assert run.main(["validate", str(lab)]) == 1
    assert f"{lab / 'guide.md'}: parts[1].topology: {lab / 'b.yaml'}: no such file" in capsys.readouterr().err
    assert run.main(["validate", str(tmp_path)]) == 1
    assert "a directory, not a file (expected a YAML file, or a lab's directory with a guide.md)" in capsys.readouterr().err
