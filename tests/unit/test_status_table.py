"""`run.py status`'s tables: the partitions (`status_command.partition_table`) and the
metadata quorum (`quorum_table`), under a title with the run's clock (`cluster_view.run_clock`)."""
from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

from rich.console import Console

from testbed.common.run_files import STARTED
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.supervisor.cluster_view import run_clock
from testbed.supervisor.status_command import _judged_now, partition_table, quorum_table


def _replica(role: str, leo: int, hwm: int) -> dict:
    return {"topic": "orders", "partition": 0, "role": role, "leader_epoch": 1, "leo": leo, "hwm": hwm}


def test_a_leader_that_does_not_answer_is_marked_down_or_silent() -> None:
    """trial26: a killed leader, before the controller fenced it, read as a live leader whose
    HWM was unknown ("-")."""
    partition = {"topic": "orders", "partition": 0, "leader": 2, "leader_epoch": 1, "partition_epoch": 1,
                 "replicas": [1, 2, 3], "isr": [1, 2, 3]}
    quorum = {"controller-1": {"active": True, "partitions": [partition]}}
    console = Console(width=200, record=True)
    console.print(partition_table(ClusterStatus.of(quorum, {1: {"partitions": [_replica("follower", 7, 5)]},
                                                            2: None, 3: {"partitions": [_replica("follower", 7, 5)]}}),
                                  "run"))
    console.print(partition_table(ClusterStatus.of(quorum, {1: None, 2: {"partitions": [_replica("leader", 9, 7)]},
                                                            3: None}), "run"))
    rows = [line.split("│")[1:-1] for line in console.export_text().splitlines() if "orders/0" in line]
    assert [cell.strip() for cell in rows[0]] == ["orders/0", "2 (down or silent)", "1", "[1, 2, 3]", "[]", "-",
                                                  "1:7 3:7"]
    assert [cell.strip() for cell in rows[1]] == ["orders/0", "2", "1", "[1, 2, 3]", "[]", "7", "2:9"]


def test_a_broker_that_does_not_answer_is_marked_in_the_quorum_table_and_a_removed_one_so() -> None:
    """trial38: a killed broker's row read `broker | - | ... | -`, as a live broker's with no
    applied offset; `--watch` said "not answering". A broker a remove-broker took out is
    removed (R39), not down."""
    quorum = {"controller-1": {"active": True, "partitions": [],
                               "quorum": {"role": "leader", "term": 2, "leader_id": 1, "log_end": 40,
                                          "commit_end": 40}}}
    console = Console(width=200, record=True)
    console.print(quorum_table(ClusterStatus.of(quorum, {1: {"metadata_offset": 39}, 2: None, 4: None}),
                               frozenset({"broker-4"})))
    rows = {cells[0]: cells[1:] for line in console.export_text().splitlines()
            if len(cells := [c.strip() for c in line.split("│")[1:-1]]) == 7}
    assert rows["broker-1"] == ["broker", "-", "-", "-", "-", "40"]
    assert rows["broker-2"] == ["broker, down or silent", "-", "-", "-", "-", "-"]
    assert rows["broker-4"] == ["removed (R39)", "-", "-", "-", "-", "-"]
    assert rows["controller-1"][:2] == ["leader (active)", "2"]


def test_the_status_title_says_where_the_run_is_on_its_workloads_clock(tmp_path: Path) -> None:
    """trial38: the live view had no clock. From the workload's time 0 (clients/started.json,
    the monotonic clock every process shares) and the topology's duration, --time-scale
    included as the run's own progress line counts it."""
    (tmp_path / "clients").mkdir()
    (tmp_path / "topology.yaml").write_text("name: t\nduration: 10s\n")
    assert run_clock(tmp_path) == ""  # the workload has not started
    (tmp_path / STARTED).write_text(json.dumps({"workload_start_ns": 1_000_000_000_000, "time_scale": 2.0}))
    assert run_clock(tmp_path, now_ns=1_012_340_000_000) == "at 12.3s of its 20s workload"
    assert run_clock(tmp_path, now_ns=1_021_000_000_000) == (
        "its 20s workload has ended: healing, converging, the final read")
    (tmp_path / STARTED).write_text(json.dumps({"workload_start_ns": 1_000_000_000_000}))  # a run before the scale
    assert run_clock(tmp_path, now_ns=1_002_000_000_000) == "at 2.0s of its 10s workload"
    (tmp_path / "topology.yaml").write_text("name: [\n")
    assert run_clock(tmp_path) == ""


def test_status_names_a_run_being_judged_after_its_cluster_stopped(tmp_path: Path) -> None:
    """trial38: `status` said "no run is in progress" while the run.py judged for 15 s more.
    A judgment holds a lock on the run's analysis/ directory (`pipeline._sole_judgment`);
    `status` reads the kernel's table of locks, and takes none."""
    runs = tmp_path / "runs"
    (runs / "r1" / "analysis").mkdir(parents=True)
    (runs / "r2" / "analysis").mkdir(parents=True)
    (runs / "notes.txt").write_text("not a run")
    assert _judged_now(runs) == ""
    fd = os.open(runs / "r2" / "analysis", os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        assert _judged_now(runs) == "; being judged now (its cluster has stopped): r2"
    finally:
        os.close(fd)
    assert _judged_now(runs) == ""
    assert _judged_now(runs, tmp_path / "no-such-table") == ""
