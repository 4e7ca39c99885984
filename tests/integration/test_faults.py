"""Every fault action on real processes and real files, fired through the same runner a
run uses, with what it resolved to and what it did recorded in faults.jsonl."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.common.errors import Errors
from broker.common.jsonl import read_jsonl
from broker.protocol.messages import PartitionMetadata
from faults.injector import FaultInjector
from faults.schedule import ScheduledFault
from testbed.supervisor.cluster import Cluster
from tests.integration.test_replication import committed_logs, produce_n

pytestmark = pytest.mark.integration


def fire(c: Cluster, do: str, target: str | None = None, **params: object) -> dict:
    return c.fault(do, target, **params)


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


def test_one_way_partition_from_leader_to_controller_fences_it(make_cluster) -> None:
    """DESIGN's `shape: one-way`: the leader's heartbeats are dropped, the controller's
    messages still reach it; R24 fences it and R25 elects another leader."""
    c = make_cluster(partitions=1)
    old = c.status().partition("orders", 0)
    end = fire(c, "partition", None, shape="one-way", **{"from": "leader-of orders/0", "to": "controllers"})
    assert end["effect"]["groups"] == [[f"broker-{old.leader}"], ["controller-1"]]
    c.wait_until(lambda s: s.partition("orders", 0).leader not in (-1, old.leader), timeout=c.scaled(10),
                 what="the one-way-partitioned leader replaced")
    healed = fire(c, "heal")
    dropped = healed["effect"]["dropped_by_link"]
    assert dropped.get(f"broker-{old.leader}->controller-1", {}).get("dropped", 0) > 0
    assert not any(k.startswith("controller-1->") for k in dropped), dropped  # the other direction flowed
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(20), what="convergence after heal")


def test_slow_links_delay_messages(make_cluster) -> None:
    c = make_cluster(partitions=1)
    fire(c, "slow", None, **{"from": "brokers", "to": "brokers", "delay": 0.02})
    produce_n(c, 0, 10, "s")
    healed = fire(c, "heal")
    assert sum(v.get("delayed", 0) for v in healed["effect"]["dropped_by_link"].values()) > 0


def test_rack_target_and_group_partition(make_cluster) -> None:
    """`rack:a` resolves to the brokers of rack a; groups of targets cut exactly those links."""
    c = make_cluster(partitions=1)
    end = fire(c, "partition", None, groups=[["rack:a"], ["rack:b", "rack:c", "controllers"]])
    assert end["effect"]["groups"] == [["broker-1"], ["broker-2", "broker-3", "controller-1"]]
    assert end["effect"]["isolated"] == ["broker-1"]
    c.wait_until(lambda s: s.registered_brokers()[1]["fenced"], timeout=c.scaled(10), what="broker 1 fenced")
    fire(c, "heal")
    c.wait_until(lambda s: not s.registered_brokers()[1]["fenced"] and s.fully_replicated(),
                 timeout=c.scaled(20), what="broker 1 back")


def test_a_node_restarted_inside_a_partition_starts_with_the_link_table(make_cluster) -> None:
    """A restarted process holds the partition's rules from its first message, as a simulated
    node does: it is not sent them once it answers (which let it talk across the partition
    until then, and held the later faults of the schedule back)."""
    c = make_cluster(partitions=1)
    fire(c, "partition", "broker:2", shape="isolate")
    fire(c, "kill", "broker:2")
    fire(c, "restart", "broker:2")
    assert "broker-2" not in c._links_pending
    s = c.wait_until(lambda s: s.brokers.get(2) is not None, timeout=c.scaled(10), what="broker 2 answering")
    assert s.brokers[2]["link_seq"] == c.link_table.seq >= 0
    fire(c, "heal")
    c.wait_until(lambda s: not s.registered_brokers()[2]["fenced"] and s.fully_replicated(),
                 timeout=c.scaled(20), what="broker 2 back")


def test_killed_controller_restarts_from_its_metadata_log(make_cluster) -> None:
    """R22: the controller's state is its committed log; after a restart it replays it and
    the cluster carries on with the same brokers, partitions and epochs."""
    c = make_cluster(partitions=2)
    before = c.status()
    end = fire(c, "kill", "active-controller")
    assert end["resolved"] == ["controller-1"]
    fire(c, "restart")
    s = c.wait_until(lambda s: s.controller is not None and s.fully_replicated(), timeout=c.scaled(15),
                     what="the controller back with every partition led")
    for p in before.partitions():
        q = s.partition(p.topic, p.partition)
        assert q.leader_epoch >= p.leader_epoch and q.partition_epoch >= p.partition_epoch
    assert produce_n(c, 0, 5, "after-controller-restart")


def test_slow_during_a_partition_keeps_the_partition(make_cluster) -> None:
    """Network faults compose: a slow fired while a broker is isolated leaves it isolated,
    and undoing one layer (a nemesis undo) leaves the other in force."""
    c = make_cluster(partitions=1)
    runner = FaultInjector(c, [], seed=1, record=c.dir.faults)
    try:
        runner.fire(ScheduledFault(0.0, "partition", "broker:1", {"shape": "isolate"}, "faults[0].nemesis#0"))
        runner.fire(ScheduledFault(0.0, "slow", None, {"delay": 0.01}, "faults[1]"))
        c.wait_until(lambda s: s.registered_brokers()[1]["fenced"], timeout=c.scaled(10),
                     what="broker 1 fenced while also slowed")
        undone = runner.fire(ScheduledFault(0.0, "heal", None, {"undo_of": "faults[0].nemesis#0"},
                                            "faults[0].nemesis#0.undo"))
        assert undone["effect"]["healed"] == ["faults[0].nemesis#0"]
        assert runner.layers.origins() == ["faults[1]"]
        c.wait_until(lambda s: not s.registered_brokers()[1]["fenced"], timeout=c.scaled(15),
                     what="broker 1 back after its partition alone was undone")
        healed = runner.fire(ScheduledFault(0.0, "heal", None, {}, "faults[2]"))
        assert healed["effect"]["healed"] == ["faults[1]"] and not runner.layers
    finally:
        runner.close()
