"""A node started again (restart, add-broker) while a link rule is in force starts with the
supervisor's link table on its command line, as a simulated node does. Pushing the table
once the process answered waited for its start (260-800 ms a node measured, up to 1.6 s
for a restart of three), held every later fault of the schedule back, and let the new
process talk across a partition until then."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from broker.wire.linkfilter import LinkRule, LinkTable
from testbed.supervisor import cluster as cluster_module
from testbed.supervisor.cluster import Cluster
from testbed.supervisor.run_dir import RunDir


class _Spawns(Cluster):
    def __init__(self, table: LinkTable, root: Path) -> None:  # noqa: D107 - only what `_spawn` reads
        self.link_table = table
        self.dir = RunDir(root)
        self.dir.nodes.mkdir(parents=True)
        self.procs: dict = {}
        self.stopped: set[str] = {"broker-2"}
        self.paused: set[str] = set()
        self.registry = _Registry()
        self._starting: dict[str, float] = {}


class _Registry:
    def add_process(self, pid: int) -> None:
        pass


class _Proc:
    pid = 4242


def _spawned_args(monkeypatch: pytest.MonkeyPatch, table: LinkTable, root: Path) -> list[str]:
    calls: list[list[str]] = []
    monkeypatch.setattr(cluster_module, "spawn", lambda args, log: calls.append(args) or _Proc())
    c = _Spawns(table, root)
    c._spawn("broker-2")
    assert c.procs["broker-2"].pid == 4242 and "broker-2" not in c.stopped
    [args] = calls
    return args


def test_a_new_process_starts_with_the_table_while_a_rule_is_in_force(monkeypatch, tmp_path) -> None:
    table = LinkTable(5, {("broker-1", "broker-2"): LinkRule(drop=True)})
    args = _spawned_args(monkeypatch, table, tmp_path)
    path = Path(args[args.index("--links") + 1])
    assert LinkTable.from_dict(json.loads(path.read_text())) == table


def test_a_new_process_starts_without_one_when_no_rule_is_in_force(monkeypatch, tmp_path) -> None:
    args = _spawned_args(monkeypatch, LinkTable(4, {}), tmp_path)
    assert "--links" not in args
