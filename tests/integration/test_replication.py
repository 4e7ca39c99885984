"""Replication with real broker processes: healthy runs, killed followers and leaders.

Rules: R17/R18 (ISR shrink and expand), R20 (acks=all), R25 (election from the ISR on
fencing), I1 (no acknowledged acks=all write lost), I3 (replicas agree below the HWM).
"""
from __future__ import annotations

import pytest

from broker.common.errors import Errors
from broker.storage.log import read_partition_dir
from testbed.supervisor.cluster import Cluster

pytestmark = pytest.mark.integration


def produce_n(c: Cluster, partition: int, n: int, prefix: str, batch: int = 5) -> dict[int, str]:
    """acks=all sends until n values are acknowledged; returns offset -> value acknowledged."""
    acked: dict[int, str] = {}
    seq = 0
    attempts = 0
    while len(acked) < n:
        attempts += 1
        assert attempts < 400, f"could not get {n} acknowledgements, have {len(acked)}"
        values = [f"{prefix}:{seq + i}" for i in range(batch)]
        seq += batch
        r = c.produce("orders", partition, values, acks="all")
        if r.error == Errors.NONE:
            acked.update({r.base_offset + i: v for i, v in enumerate(values)})
        else:
            c.client().refresh_metadata()
    return acked


def committed_logs(c: Cluster, partition: int) -> dict[str, dict[int, str]]:
    """Each broker's log of orders/<partition>, read from its files after a controlled stop."""
    c.stop_all()
    out = {}
    for spec in c.topology.cluster.brokers:
        d = c.dir.data_dir(spec.name) / f"orders-{partition}"
        if d.exists():
            out[spec.name] = {o: v.decode() for o, _e, v in read_partition_dir(d)}
    return out


@pytest.mark.parametrize("transport", ["ipc", "tcp"])
def test_healthy_replication_all_replicas_equal(make_cluster, transport: str) -> None:
    """Both transports of DESIGN section 2: ipc:// in the run directory, tcp://127.0.0.1."""
    c = make_cluster(partitions=2, network={"transport": transport})
    assert all(cfg.endpoint.startswith(f"{transport}://") for cfg in c.configs.values())
    acked = produce_n(c, 0, 50, "h")
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(10), what="replicas level")
    logs = committed_logs(c, 0)
    assert len(logs) == 3
    for name, log in logs.items():
        for off, v in acked.items():
            assert log.get(off) == v, f"{name} lacks offset {off}"
    assert len({tuple(sorted(log.items())) for log in logs.values()}) == 1  # I3


def test_killed_follower_leaves_isr_and_rejoins(make_cluster) -> None:
    """R17: a dead follower is shrunk out of the ISR; R18: after restart it catches up and rejoins."""
    c = make_cluster(partitions=1)
    p = c.status().partition("orders", 0)
    follower = next(b for b in p.replicas if b != p.leader)
    c.kill(f"broker-{follower}")
    s = c.wait_until(lambda s: follower not in s.partition("orders", 0).isr, timeout=c.scaled(10),
                     what=f"broker {follower} out of the ISR")
    assert s.partition("orders", 0).leader == p.leader
    acked = produce_n(c, 0, 20, "f")  # MinISR 2 still holds with two replicas
    c.restart(f"broker-{follower}")
    c.wait_until(lambda s: sorted(s.partition("orders", 0).isr) == sorted(p.replicas), timeout=c.scaled(15),
                 what=f"broker {follower} back in the ISR")
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(10), what="replicas level")
    logs = committed_logs(c, 0)
    assert all(logs[f"broker-{follower}"].get(o) == v for o, v in acked.items())


def test_killed_leader_replaced_from_isr_without_loss(make_cluster) -> None:
    """R25: fencing the dead leader elects an ISR member; I1: no acknowledged acks=all value is lost."""
    c = make_cluster(partitions=1)
    before = c.status().partition("orders", 0)
    acked = produce_n(c, 0, 40, "a")
    c.kill(f"broker-{before.leader}")
    s = c.wait_until(lambda s: s.partition("orders", 0).leader not in (-1, before.leader),
                     timeout=c.scaled(10), what="a new leader")
    after = s.partition("orders", 0)
    assert after.leader in before.isr
    assert after.leader_epoch > before.leader_epoch  # R2
    acked.update(produce_n(c, 0, 20, "b"))
    c.restart(f"broker-{before.leader}")
    c.wait_until(lambda s: s.fully_replicated(), timeout=c.scaled(20), what="convergence")
    logs = committed_logs(c, 0)
    for name, log in logs.items():
        missing = [v for o, v in acked.items() if log.get(o) != v]
        assert not missing, f"{name} lost acknowledged values {missing[:5]}"


def test_status_command_does_not_disturb_the_running_supervisor(make_cluster, tmp_path, capsys) -> None:
    """`run.py status` talks to the same control sockets; each client has its own identity,
    so the supervisor keeps getting its answers."""
    from testbed.supervisor.status_command import print_status
    c = make_cluster(partitions=2)
    assert print_status(tmp_path / "runs") == 0
    assert "orders/1" in capsys.readouterr().out
    s = c.status()
    assert s.controller is not None and all(body is not None for body in s.brokers.values())
    assert s.all_led()
