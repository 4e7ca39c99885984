"""Every fault action on real processes and real files, fired through the same runner a
run uses, with what it resolved to and what it did recorded in faults.jsonl."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.protocol.errors import Errors
from broker.wire.messages import PartitionMetadata
from faults.schedule import ScheduledFault
from testbed.cluster import Cluster
from testbed.faultrunner import FaultRunner
from testbed.summary import read_jsonl
from tests.integration.test_replication import committed_logs, produce_n

pytestmark = pytest.mark.integration


def fire(c: Cluster, do: str, target: str | None = None, **params: object) -> dict:
    runner = FaultRunner(c, [], seed=1)
    try:
        return runner.fire(ScheduledFault(0.0, do, target, dict(params), "test"))
    finally:
        runner.close()


def events(c: Cluster, kind: str, node: str | None = None) -> list[dict]:
    return [e for e in read_jsonl(c.dir.events) if e["kind"] == kind and (node is None or e["node"] == node)]


def test_kill_and_restart_resolve_targets_when_they_fire(make_cluster) -> None:
    c = make_cluster(partitions=1)
    leader = c.status().partition("orders", 0).leader
    end = fire(c, "kill", "leader-of orders/0")
    assert end["resolved"] == [f"broker-{leader}"]
    assert end["effect"]["killed"][f"broker-{leader}"] > 0
    c.wait_until(lambda s: s.partition("orders", 0).leader not in (-1, leader), timeout=c.scaled(10),
                 what="a new leader")
    end = fire(c, "restart", "stopped")
    assert end["resolved"] == [f"broker-{leader}"]
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(15), what="convergence")
    lines = read_jsonl(c.dir.faults)
    assert [(line["do"], line["phase"]) for line in lines] == [
        ("kill", "start"), ("kill", "end"), ("restart", "start"), ("restart", "end")]


def test_pause_past_session_timeout_fences_then_resume_rejoins(make_cluster) -> None:
    """R24: a SIGSTOPped broker stops heartbeating and is fenced; R18: it rejoins after SIGCONT."""
    c = make_cluster(partitions=1)
    p = c.status().partition("orders", 0)
    follower = next(b for b in p.replicas if b != p.leader)
    fire(c, "pause", f"broker:{follower}")
    c.wait_until(lambda s: s.registered_brokers()[follower]["fenced"] and follower not in s.partition("orders", 0).isr,
                 timeout=c.scaled(10), what="the paused broker fenced and out of the ISR")
    end = fire(c, "resume")  # default target: paused
    assert end["resolved"] == [f"broker-{follower}"]
    c.wait_until(lambda s: sorted(s.partition("orders", 0).isr) == sorted(p.replicas), timeout=c.scaled(15),
                 what="the resumed broker back in the ISR")


def test_controlled_shutdown_leaves_clean_marker_and_registers_clean(make_cluster) -> None:
    """R37 + R28: leadership moves first, the marker holds the broker epoch, the restart is clean."""
    c = make_cluster(partitions=1)
    leader = c.status().partition("orders", 0).leader
    end = fire(c, "shutdown", f"broker:{leader}")
    assert end["effect"]["clean"] == {f"broker-{leader}": True}
    s = c.status()
    assert s.partition("orders", 0).leader not in (-1, leader)
    assert (c.dir.data_dir(f"broker-{leader}") / "clean-shutdown").exists()
    fire(c, "restart")
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(15), what="convergence")
    regs = [e for e in events(c, "registered") if e["broker_id"] == leader]
    assert regs[-1]["clean"] is True
    assert not (c.dir.data_dir(f"broker-{leader}") / "clean-shutdown").exists()


@pytest.mark.parametrize("loss", ["unsynced", "partial", "torn"])
def test_lossy_crash_cuts_unsynced_tails_and_recovery_drops_them(make_cluster, loss: str) -> None:
    """DESIGN section 4: SIGKILL, then the durability journal applied to the files."""
    # Acks=all sends of 3 reach followers batch by batch; a flush every 20 messages and a
    # writeback far away leave a durable prefix and a non-durable tail of whole batches.
    c = make_cluster(partitions=1, storage={"writeback": "10m"},
                     topics=[{"name": "orders", "partitions": 1, "replication_factor": 3,
                              "min_insync_replicas": 2, "flush": {"messages": 20}}])
    produce_n(c, 0, 30, "l", batch=3)
    p = c.status().partition("orders", 0)
    victim = next(b for b in p.replicas if b != p.leader)
    end = fire(c, "lossy-crash", f"broker:{victim}", loss=loss)
    files = end["effect"]["files"][f"broker-{victim}"]
    segs = {k: v for k, v in files.items() if k.endswith(".log")}
    assert segs, files
    if loss == "torn":
        assert any(v["action"] == "torn" for v in segs.values()), segs
    else:
        assert any(0 < v["after"] < v["before"] for v in segs.values()), segs
    fire(c, "restart")
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(20), what="the crashed replica caught up")
    if loss == "torn":
        rec = [e for e in events(c, "recovered", f"broker-{victim}") if e["topic"] == "orders"]
        assert rec and rec[-1]["dropped_bytes"] > 0


def test_disk_loss_empties_the_replica_and_it_refills(make_cluster) -> None:
    c = make_cluster(partitions=1)
    acked = produce_n(c, 0, 20, "d")
    p = c.status().partition("orders", 0)
    victim = next(b for b in p.replicas if b != p.leader)
    end = fire(c, "disk-loss", f"broker:{victim}")
    assert end["effect"]["removed"][f"broker-{victim}"]
    assert not (c.dir.data_dir(f"broker-{victim}") / "orders-0").exists()
    fire(c, "restart")
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(20), what="the emptied replica refilled")
    logs = committed_logs(c, 0)
    assert all(logs[f"broker-{victim}"].get(o) == v for o, v in acked.items())


def test_isolated_leader_is_replaced_and_cannot_acknowledge(make_cluster) -> None:
    """A partitioned leader is fenced (R24), a new leader elected (R25), and the old leader's
    acks=all writes are never acknowledged: its followers left it, so its HWM cannot move (R15)."""
    c = make_cluster(partitions=1)
    old = c.status().partition("orders", 0)
    end = fire(c, "partition", "leader-of orders/0", shape="isolate")
    assert end["effect"]["isolated"] == [f"broker-{old.leader}"]
    s = c.wait_until(lambda s: s.partition("orders", 0).leader not in (-1, old.leader), timeout=c.scaled(10),
                     what="a leader outside the isolated broker")
    assert s.partition("orders", 0).leader_epoch > old.leader_epoch
    # Straight to the old leader, as a client with stale metadata would.
    client = c.client()
    client.leaders[("orders", 0)] = PartitionMetadata("orders", 0, old.leader, old.leader_epoch, 0, old.replicas, old.isr)
    r = client.produce("orders", 0, ["stale-leader-write"], acks="all", timeout=c.scaled(1))
    assert r.error != Errors.NONE, "an isolated leader acknowledged an acks=all write"
    healed = fire(c, "heal")
    assert any(v.get("dropped", 0) > 0 for v in healed["effect"]["dropped_by_link"].values())
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(20), what="convergence after heal")
    # R10: the old leader truncated its unacknowledged suffix when it followed the new epoch.
    logs = committed_logs(c, 0)
    assert all("stale-leader-write" not in log.values() for log in logs.values())
    assert len({tuple(sorted(log.items())) for log in logs.values()}) == 1


def test_tmpfs_medium_mounts_and_unmounts(make_cluster) -> None:
    if os.geteuid() != 0:
        pytest.skip("tmpfs mounts need root")
    c = make_cluster(partitions=1, storage={"medium": "tmpfs"})
    d = c.dir.data_dir("broker-1").resolve()
    assert _mounted(d), "no tmpfs at the broker's data directory"
    c.close()
    assert not _mounted(d)


def _mounted(path: Path) -> bool:
    with open("/proc/mounts") as f:
        return any(line.split()[1] == str(path) for line in f)
