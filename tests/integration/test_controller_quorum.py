"""The controller quorum (R22-R24) on real processes: three controllers, a Raft log each.

The active controller killed, paused and isolated in turn under an acks=all workload: a new
one is elected each time, no broker is fenced by the failover alone, nothing acknowledged is
lost, and every controller and broker ends with the same committed metadata log. A majority
down freezes the metadata (no fencing) until it is back; a controller that lost its disk
rejoins empty and catches up from the leader. With a short snapshot interval, the log is
compacted and a controller or broker that lost its disk is brought up by a snapshot.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from broker.common.jsonl import read_jsonl
from broker.noderuntime.quorum_store import LOG_FILE, SNAPSHOT_FILE
from broker.storage.layout import METADATA_COPY_FILE, METADATA_SNAPSHOT_FILE
from testbed.analysis.pipeline import analyze_runs
from testbed.experiment.runner import run_cluster
from testbed.supervisor.cluster import Cluster
from testbed.topology import parse_topology
from tests.integration.conftest import TIME_SCALE, topology_dict
from tests.unit.analysis_fixtures import spark  # noqa: F401  (the shared session fixture)

pytestmark = pytest.mark.integration


def quorum_topology(**overrides: object) -> dict:
    d = topology_dict(partitions=2, **overrides)
    d["cluster"]["controllers"] = 3
    return d


def controller_log(data: Path, name: str) -> list:
    """The [term, record] entries of a controller's metadata log, from its base on."""
    return controller_log_lines(data, name)[1:]


def controller_log_lines(data: Path, name: str) -> list:
    """The lines of a controller's metadata log: the header {"base"}, then the entries."""
    return [json.loads(line) for line in (data / name / LOG_FILE).read_text().splitlines()]


def test_the_active_controller_killed_paused_and_isolated_is_replaced_without_fencing_or_loss(
        tmp_path: Path, spark: object) -> None:  # noqa: F811
    faults = [{"at": "1s", "do": "kill", "target": "active-controller"},
              {"at": "2s", "do": "restart", "target": "stopped"},
              {"at": "3s", "do": "pause", "target": "active-controller"},
              {"at": "4s", "do": "resume", "target": "paused"},
              {"at": "5s", "do": "partition", "shape": "isolate", "target": "active-controller"},
              {"at": "6s", "do": "heal"}]
    topo = parse_topology(quorum_topology(duration="7s", faults=faults), "quorum")
    out = run_cluster(topo, runs_dir=tmp_path / "runs", time_scale=TIME_SCALE, keep_data=True,
                      console=Console(quiet=True))
    assert out.counts is not None and out.counts.acknowledged["all"] > 0, out.run_dir
    [verdict] = analyze_runs([out.run_dir])
    assert verdict.results["converged"] is True and verdict.results["checks"]["lost_writes"]["count"] == 0
    assert verdict.results["checks"]["metadata_divergence"]["count"] == 0
    events = read_jsonl(out.run_dir / "events.jsonl")
    elected = [(e["term"], e["node"]) for e in events if e["kind"] == "controller-elected"]
    terms = [t for t, _ in elected]
    assert len(elected) >= 4 and terms == sorted(set(terms)), elected  # one leader per term, each new
    resolved = [f["resolved"] for f in read_jsonl(out.run_dir / "faults.jsonl")
                if f["phase"] == "end" and f["origin"] in ("faults[0]", "faults[2]", "faults[4]")]
    assert all(r and r[0].startswith("controller-") for r in resolved), resolved
    assert len({r[0] for r in resolved}) >= 2, "every fault hit the same controller: it was not re-resolved"
    shutdown = min(e["time_ns"] for e in events if e["kind"] == "controlled-shutdown")
    fenced = [e for e in events if e["kind"] == "fenced" and e["time_ns"] < shutdown]
    assert not fenced, f"a controller failover fenced brokers: {fenced}"
    # no committed metadata record lost or applied twice: one log, everywhere
    data = out.run_dir / "data"
    logs = {n: controller_log(data, n) for n in ("controller-1", "controller-2", "controller-3")}
    longest = max(logs.values(), key=len)
    for name, log in logs.items():
        assert log == longest[:len(log)], f"{name}'s metadata log diverges"
    for broker in ("broker-1", "broker-2", "broker-3"):
        copy = [json.loads(line) for line in (data / broker / METADATA_COPY_FILE).read_text().splitlines()]
        assert [o for o, _ in copy] == list(range(len(copy))), f"{broker} applied a record twice or skipped one"
        assert [r for _, r in copy] == [r for _, r in longest[:len(copy)]], f"{broker}'s copy is not a prefix (I8)"


def test_a_majority_of_controllers_down_freezes_metadata_until_one_returns(make_quorum) -> None:
    c = make_quorum()
    active = c.status().controller["node"]
    others = [s.name for s in c.controllers() if s.name != active]
    c.kill(active)
    c.kill(others[0])
    c.pause("broker-3")  # past session_timeout: with a quorum it would be fenced
    c.wait_until(lambda s: s.controller is None, timeout=c.scaled(5), what="no active controller")
    c.wait_until(lambda s: all(b is None or not b.get("active") for b in s.quorum.values()),
                 timeout=c.scaled(3), what="the survivor stays follower")
    c.restart(others[0])
    s = c.wait_until(lambda s: s.controller is not None and s.registered_brokers().get(3, {}).get("fenced"),
                     timeout=c.scaled(15), what="a new active controller fences the paused broker")
    assert s.controller["node"] != active
    c.resume("broker-3")
    c.restart(active)
    c.wait_until(lambda s: s.controller is not None and not s.registered_brokers()[3]["fenced"]
                 and s.fully_replicated(), timeout=c.scaled(20), what="the cluster whole again")


def test_a_controller_that_lost_its_disk_rejoins_empty_and_catches_up(make_quorum) -> None:
    c = make_quorum()
    active = c.status().controller["node"]
    victim = next(s.name for s in c.controllers() if s.name != active)
    effect = c.fault("disk-loss", f"controller:{victim.split('-')[1]}")["effect"]
    assert effect["removed"][victim]["files"] > 0
    assert "forgot its Raft vote" in effect["caveats"][0], "the run must say what a voter's disk loss risks"
    assert not (c.data_dir(victim) / LOG_FILE).exists()
    c.restart(victim)
    c.produce("orders", 0, ["after"], acks="all")

    def caught_up(s) -> bool:
        q = {n: (b or {}).get("quorum") for n, b in s.quorum.items()}
        return bool(q[victim]) and q[victim]["commit_end"] == q[active]["commit_end"] > 0
    c.wait_until(caught_up, timeout=c.scaled(10), what=f"{victim} caught up")
    assert controller_log(c.dir.data, victim) == controller_log(c.dir.data, active)


def test_r22_compacted_metadata_log_brings_up_an_emptied_controller_and_broker_by_snapshot(make_quorum) -> None:
    """R22 (KIP-630): every 8 records a controller snapshots its state and drops the log
    below; a controller and a broker that lost their disks fetch from offset 0, below every
    log's start, so they are brought up by the active controller's snapshot, then the log."""
    c = make_quorum(metadata_snapshot_records=8)
    active = c.status().controller["node"]
    for _ in range(2):  # fencing, unfencing and ISR changes: more metadata records
        c.kill("broker-3")
        c.wait_until(lambda s: 3 not in s.partition("orders", 0).isr, timeout=c.scaled(10), what="broker-3 out")
        c.restart("broker-3")
        c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(15), what="broker-3 back in every ISR")
    assert (c.data_dir(active) / SNAPSHOT_FILE).exists()
    assert controller_log_lines(c.dir.data, active)[0]["base"] > 0, "the active controller's log was not compacted"

    victim = next(s.name for s in c.controllers() if s.name != active)
    c.fault("disk-loss", f"controller:{victim.split('-')[1]}")
    c.restart(victim)
    c.fault("disk-loss", "broker:2")
    c.restart("broker-2")
    c.produce("orders", 0, ["after"], acks="all")

    def caught_up(s) -> bool:
        q = {n: (b or {}).get("quorum") for n, b in s.quorum.items()}
        return bool(q[victim]) and q[victim]["commit_end"] == q[active]["commit_end"] > 0 and s.fully_replicated()
    c.wait_until(caught_up, timeout=c.scaled(15), what=f"{victim} and broker-2 caught up")
    assert json.loads((c.data_dir(victim) / SNAPSHOT_FILE).read_text())["end"] > 0
    assert (c.data_dir("broker-2") / METADATA_SNAPSHOT_FILE).exists()
    events = read_jsonl(c.dir.root / "events.jsonl")
    assert any(e["kind"] == "metadata-snapshot" and e["how"] == "installed" and e["node"] == victim for e in events)
    # the restarted active controller resumes from its own snapshot and log
    c.kill(active)
    c.restart(active)
    c.produce("orders", 1, ["after-restart"], acks="all")
    c.wait_until(lambda s: s.controller is not None and all(
                     b and b["quorum"]["commit_end"] == s.controller["quorum"]["commit_end"] for b in s.quorum.values()),
                 timeout=c.scaled(15), what="every controller at the same commit end")


@pytest.fixture
def make_quorum(tmp_path: Path):
    made: list[Cluster] = []

    def make(**cluster: object) -> Cluster:
        d = quorum_topology()
        d["cluster"].update(cluster)
        c = Cluster(parse_topology(d, "quorum"), run_dir=tmp_path / f"run{len(made)}",
                    runs_dir=tmp_path / "runs", time_scale=TIME_SCALE)
        made.append(c)
        c.start()
        return c

    yield make
    for c in made:
        c.close()
