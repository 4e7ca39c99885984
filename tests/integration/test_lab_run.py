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

import pytest

from tests.integration.conftest import TIME_SCALE
from tests.unit.analysis_fixtures import spark, warm_master  # noqa: F401  (the fixtures)

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow(seconds=205)
def test_a_lab_runs_unattended_and_answers_its_questions_from_the_run(tmp_path: Path, warm_master: str) -> None:  # noqa: F811
    out = subprocess.run([sys.executable, "run.py", "lab", "12", "--step", "--runs-dir", str(tmp_path),
                          "--time-scale", str(TIME_SCALE), "--spark-master", warm_master], cwd=ROOT,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False, env={**os.environ, "COLUMNS": "200"})
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


def test_ctrl_c_during_a_lab_stops_its_cluster_and_leaves_nothing(tmp_path: Path) -> None:
    """Issue 12, bad input: Ctrl-C (SIGINT) while a lab's part runs stops that cluster as for
    any run: exit 130, no node process left, nothing registered as running."""
    import json
    import signal
    import time

    import psutil
    lab = subprocess.Popen([sys.executable, "run.py", "lab", "3", "--runs-dir", str(tmp_path), "--time-scale",
                            str(TIME_SCALE)], cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60 * TIME_SCALE
        pids: list[int] = []
        while time.monotonic() < deadline and len(pids) < 5:
            regs = list((tmp_path / ".live").glob("*.json")) if (tmp_path / ".live").is_dir() else []
            pids = [p["pid"] for r in regs for p in json.loads(r.read_text())["processes"]]
            time.sleep(0.1)  # polling the registry against a deadline
        assert len(pids) >= 5, "the lab's cluster never started"
        lab.send_signal(signal.SIGINT)
        # read on while it stops: a pipe nobody drains blocks the lab's last lines, and its exit
        # (a CI run under load waited the whole 90 s here)
        _, rest = lab.communicate(timeout=30 * TIME_SCALE)
        assert lab.returncode == 130, rest[-3000:].decode(errors="replace")
        # the line every command ends an interrupt with (the lab said its own on standard output)
        assert b"isrlab: interrupted; everything it started is stopped" in rest, rest[-3000:]
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        assert not alive, f"processes outlived the interrupted lab: {alive}"
        assert not list((tmp_path / ".live").glob("*.json")), "the run stayed registered as running"
    finally:
        if lab.poll() is None:
            lab.kill()


def test_step_on_a_terminal_shows_the_cluster_and_fires_each_fault_on_enter(tmp_path: Path) -> None:
    """`lab 3 --step` with a terminal on standard input: before the run and before each fault
    it waits for Enter, showing the cluster (leader, ISR, LEO/HWM) and the fault to come;
    the fault fires only after Enter. Interrupted at the second fault's prompt."""
    import os
    import pty
    import select
    import signal
    import time
    master, slave = pty.openpty()
    lab = subprocess.Popen([sys.executable, "run.py", "lab", "3", "--step", "--runs-dir", str(tmp_path),
                            "--time-scale", str(TIME_SCALE)], cwd=ROOT, stdin=slave, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, env={**os.environ, "COLUMNS": "200"})
    os.close(slave)
    out = [""]

    def read_until(text: str, after: int = 0) -> int:
        """Read the lab's output until `text` appears past position `after`; its position."""
        assert lab.stdout is not None
        deadline = time.monotonic() + 60 * TIME_SCALE
        while (at := out[0].find(text, after)) < 0 and time.monotonic() < deadline:
            if select.select([lab.stdout], [], [], 1.0)[0]:
                chunk = os.read(lab.stdout.fileno(), 65536).decode(errors="replace")
                assert chunk, f"the lab ended before {text!r}: {out[0][-3000:]}"
                out[0] += chunk
        assert at >= 0, f"no {text!r} in time: {out[0][-3000:]}"
        return at

    try:
        read_until("press Enter to start the run")
        os.write(master, b"\n")
        first = read_until("press Enter to fire")
        view = out[0][:first]
        assert "the cluster now" in view and "orders/0" in view and "LEO / HWM" in view and "[1, 2, 3]" in view
        assert "next at 2s: partition" in out[0][first - 200:first]
        assert "fault partition" not in out[0][first:], "the fault fired before Enter"
        os.write(master, b"\n")
        second = read_until("press Enter to fire", first + 1)  # the heal's prompt
        assert "fault partition" in out[0][first:second], "the fault did not fire after Enter"
        # its time on the records' clock, the answers', and where the schedule was (trial34)
        assert "of the schedule, after" in out[0][first:second], out[0][first:second]
        lab.send_signal(signal.SIGINT)
        # read on while it stops: a pipe nobody drains blocks the lab's last lines, and its exit
        # (a CI run under load waited the whole 90 s here)
        _, rest = lab.communicate(timeout=30 * TIME_SCALE)
        assert lab.returncode == 130, rest[-3000:].decode(errors="replace")
    finally:
        os.close(master)
        if lab.poll() is None:
            lab.kill()
