"""A lab end to end, as a student runs it (issue 12): `python run.py lab 12 --step` with no
terminal on standard input runs unattended, shows the guide and the prediction, runs and
judges its part, and answers the guide's questions from the run (the election in a new
leader epoch, the acks=1 writes the zombie leader took and lost, its truncation); the run's
report starts with the guide. Every lab's every part is `pytest -m labs` (tests/labs/)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.integration.conftest import TIME_SCALE

ROOT = Path(__file__).resolve().parents[2]


def test_a_lab_runs_unattended_and_answers_its_questions_from_the_run(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "run.py", "lab", "12", "--step", "--runs-dir", str(tmp_path),
                          "--time-scale", str(TIME_SCALE)], cwd=ROOT, stdin=subprocess.DEVNULL,
                         capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"})
    text = out.stdout
    assert out.returncode == 0, text[-5000:] + out.stderr[-2000:]
    for piece in ("Lab 12: A zombie leader behind a network partition", "Before you run: predict",
                  "--step needs a terminal on standard input: the lab runs unattended",
                  "questions, and what the runs answered", "1. When was a new leader elected",
                  "leads at leader epoch 1", "acknowledged acks=1 writes lost", "no acks=all write was lost",
                  "broker-1 truncated orders/0 from offset"):
        assert piece in text, piece
    [run] = [d for d in tmp_path.iterdir() if d.is_dir() and (d / "results.json").is_file()]
    assert f"report {run / 'report.html'}".replace(" ", "") in text.replace(" ", "").replace("\n", "")
    report = (run / "report.html").read_text()
    assert "<div class='lab'><h1>Lab 12: A zombie leader" in report and "Part 1 of 1" in report
