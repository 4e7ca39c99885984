"""The end of a run: the final state of every replica, as its broker reports it and as its
files hold it (DESIGN section 7, `final/`)."""
from __future__ import annotations

from pathlib import Path

from broker.common.jsonl import JsonlAppender
from broker.storage.layout import partition_dirs
from broker.storage.log import read_partition_dir
from testbed.supervisor.admin import ClusterAdmin
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.topology import Topology


def partitions_now(status: ClusterStatus, topology: Topology) -> list[tuple[str, int]]:
    """The partitions the final read reads: those the controller has now (admin faults may
    have created, grown or deleted topics, R40), else the topology's."""
    return sorted((p.topic, p.partition) for p in status.partitions()) or [
        (tp.name, p) for tp in topology.topics for p in range(tp.partitions)]


def record_final_state(cluster: ClusterAdmin) -> None:
    """After the final read: every replica as its broker reports it, then every node shut
    down under control, then every replica's log as its files hold it (`final/`)."""
    write_replicas(cluster.dir.final / "replicas.jsonl", cluster.status())
    cluster.stop_all()
    write_logs(cluster.dir.final / "logs.jsonl", {s.name: cluster.dir.data_dir(s.name) for s in cluster.brokers})


def write_replicas(path: Path, status: ClusterStatus) -> int:
    out = JsonlAppender(path)
    lines = [{"node": f"broker-{r.broker}", "topic": r.topic, "partition": r.partition, "leo": r.leo,
              "hwm": r.hwm, "leader_epoch": r.leader_epoch, "is_leader": r.role == "leader"}
             for r in sorted(status.replicas(), key=lambda r: (r.topic, r.partition, r.broker))]
    out.write_many(lines)
    out.close()
    return len(lines)


def write_logs(path: Path, data_dirs: dict[str, Path]) -> int:
    """Every record of every replica, read from the segment files without opening a log."""
    out = JsonlAppender(path)
    n = 0
    for node, data_dir in sorted(data_dirs.items()):
        for topic, partition, d in partition_dirs(data_dir):
            lines = [{"node": node, "topic": topic, "partition": partition, "offset": o,
                      "leader_epoch": e, "value": v.decode("utf-8", "replace")}
                     for o, e, v in read_partition_dir(d)]
            out.write_many(lines)
            n += len(lines)
    out.close()
    return n
