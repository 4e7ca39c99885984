"""`run.py status --watch` against a running cluster (issue 12): the live view shows each
partition's leader, epoch and ISR with LEO/HWM bars, and it changes when a fault fires (the
fault is listed, the paused follower stops answering and leaves the ISR)."""
from __future__ import annotations

from pathlib import Path

import pytest
from rich.console import Console

from testbed.supervisor.status_command import watch_status

pytestmark = pytest.mark.integration


def frame(runs_dir: Path) -> str:
    console = Console(record=True, width=200, force_terminal=False)
    assert watch_status(runs_dir, period=0.0, frames=1, console=console) == 0
    return console.export_text()


def test_the_live_view_changes_when_a_fault_fires(make_cluster) -> None:  # noqa: ANN001 - the fixture
    c = make_cluster(partitions=1)
    runs_dir = c.runs_dir
    before = frame(runs_dir)
    assert before.endswith("faults in force: none\n"), "a frame printed to a file or pipe ends its line"
    assert "orders/0" in before and "[1, 2, 3]" in before and "faults in force: none" in before, before
    assert " / " in before and "broker-2" in before  # a LEO / HWM column per replica
    piped = Console(record=True, width=200, force_terminal=False)  # trial33: `--frames 3` in a pipe printed one
    assert watch_status(runs_dir, period=0.0, frames=3, console=piped) == 0
    assert piped.export_text().count("faults in force: ") == 3
    p = c.status().partition("orders", 0)
    follower = next(b for b in p.replicas if b != p.leader)
    c.fault("pause", target=f"broker:{follower}")
    c.wait_until(lambda s: follower not in s.partition("orders", 0).isr, timeout=c.scaled(15),
                 what=f"broker {follower} out of the ISR")
    after = frame(runs_dir)
    assert f"faults in force: pause broker:{follower} -> broker-{follower}" in after, after
    assert "down or silent" in after and f"not answering: broker-{follower}" in after
    isr = sorted(b for b in (1, 2, 3) if b != follower)
    assert str(isr) in after
    c.fault("resume", target=f"broker:{follower}")
    assert "faults in force: none" in frame(runs_dir), "the resume ended the pause"


def test_status_watch_without_a_run_says_so(tmp_path: Path) -> None:
    console = Console(record=True, width=200)
    assert watch_status(tmp_path, frames=1, console=console) == 1
    assert "no run is in progress" in console.export_text()


def test_a_step_pause_before_a_fault_holds_the_runs_clock(tmp_path: Path) -> None:
    """`lab N --step`: before each fault the runner shows the cluster and waits; the schedule
    and the workload's end move by the wait, so the fault fires on the cluster the student
    looked at, at its time in the run's own clock."""
    import json
    import time

    from testbed.config.parser import parse_topology
    from testbed.experiment.runner import run_cluster
    from tests.integration.conftest import TIME_SCALE, topology_dict
    topology = parse_topology(topology_dict(partitions=1, duration="3s", faults=[
        {"at": "1s", "do": "pause", "target": "broker:3"}, {"at": "2s", "do": "resume", "target": "broker:3"}]), "t")
    seen: list[tuple[str, list[int], float]] = []
    wait = 2.0

    def before(status, faults) -> None:  # noqa: ANN001 - runner.BeforeFault
        [fault] = faults
        seen.append((fault.do, status.partition("orders", 0).isr, time.monotonic()))
        time.sleep(wait)  # the student looking at the cluster

    outcome = run_cluster(topology, runs_dir=tmp_path, time_scale=TIME_SCALE, run_dir=tmp_path / "run",
                          console=Console(width=200), before_fault=before)
    assert outcome.counts is not None
    assert [(do, isr) for do, isr, _ in seen] == [("pause", [1, 2, 3]), ("resume", seen[1][1])]
    fired = [json.loads(line) for line in (tmp_path / "run" / "faults.jsonl").read_text().splitlines()]
    starts = {r["do"]: r["time_ns"] / 1e9 for r in fired if r["phase"] == "start"}
    # the resume fires a scaled second after the pause plus the second pause's wait
    assert starts["resume"] - starts["pause"] >= TIME_SCALE * 1.0 + wait - 0.1
