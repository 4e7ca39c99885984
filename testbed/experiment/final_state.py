"""The end of a run: the final state of every replica, as its broker reports it and as its
files hold it (DESIGN section 7, `final/`). Each file appears whole or not at all: a
supervisor killed while writing `logs.jsonl` left some brokers' logs and not others', which
the analysis read as replicas that diverged."""
from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import chain, count, groupby
from operator import itemgetter
from pathlib import Path

import orjson

from broker.common.jsonl import JsonlAppender
from broker.storage.layout import partition_dirs
from broker.storage.log import read_partition_values
from testbed.supervisor.admin import ClusterAdmin
from testbed.supervisor.cluster_status import ClusterStatus
from testbed.config.topology_spec import Topology


#: the bytes a JSON string holds as they are: printable ASCII but the quote and the backslash
_AS_IS = bytes(range(0x20, 0x7f)).replace(b'"', b"").replace(b"\\", b"")


def partitions_now(status: ClusterStatus, topology: Topology) -> list[tuple[str, int]]:
    """The partitions the final read reads: those the active controller has now (admin faults
    may have created, grown or deleted topics, R40: every one deleted leaves none to read),
    else, when none answered as active, the topology's."""
    if status.controller:
        return sorted((p.topic, p.partition) for p in status.partitions())
    return [(tp.name, p) for tp in topology.topics for p in range(tp.partitions)]


def record_final_state(cluster: ClusterAdmin) -> None:
    """After the final read: every replica as its broker reports it, then every node shut
    down under control, then every replica's log as its files hold it (`final/`)."""
    write_replicas(cluster.dir.final / "replicas.jsonl", cluster.status())
    cluster.stop_all()
    write_logs(cluster.dir.final / "logs.jsonl", {s.name: cluster.dir.data_dir(s.name) for s in cluster.brokers})


def write_replicas(path: Path, status: ClusterStatus) -> int:
    lines = [{"node": f"broker-{r.broker}", "topic": r.topic, "partition": r.partition, "leo": r.leo,
              "hwm": r.hwm, "leader_epoch": r.leader_epoch, "is_leader": r.role == "leader"}
             for r in sorted(status.replicas(), key=lambda r: (r.topic, r.partition, r.broker))]
    with _whole(path) as out:
        out.write_many(lines)
    return len(lines)


def write_logs(path: Path, data_dirs: dict[str, Path]) -> int:
    """Every record of every replica, read from the segment files without opening a log.

    A line is the JSON of `{"node", "topic", "partition", "offset", "leader_epoch", "value"}`
    as `JsonlAppender` writes a dict, put together from its replica's part, written once, and
    each record's numbers and value: a dict and its serialisation per record were a tenth of
    a simulated seed's time (22 ms of the quickstart's 240). A replica whose values are all
    printable ASCII without a quote or a backslash (the workload's) puts them between quotes
    as they are, which is their JSON, without decoding and serialising each: its lines are
    one format of the replica's offsets and values in a row (offset, value, offset, ...),
    each run of one epoch with the epoch in its lines, since a format and a generator step
    per line, and then the formatting of each number, were most of what was left. The log
    is read a batch at a time (`read_partition_values`): a batch's offsets are a range and
    its epoch is one, so that no tuple is made per record but where a value needs escapes."""
    n = 0
    with _whole(path) as out:
        for node, data_dir in sorted(data_dirs.items()):
            for topic, partition, d in partition_dirs(data_dir):
                head = orjson.dumps({"node": node, "topic": topic, "partition": partition})[:-1] + b',"offset":'
                batches = read_partition_values(d)
                values = list(chain.from_iterable(vs for _, _, vs in batches))
                if b"".join(values).translate(None, _AS_IS):  # some value needs escapes
                    out.write_lines(b"".join(b'%s%d,"leader_epoch":%d,"value":%s}\n'
                                             % (head, o, e, orjson.dumps(v.decode("utf-8", "replace")))
                                             for base, e, vs in batches for o, v in zip(count(base), vs)))
                else:  # every value is its own JSON string between quotes, as the workload's are
                    # the epoch is written into the lines of each run of batches in one epoch
                    # (a replica holds a few runs), so only offsets and values are formatted
                    lead = head.replace(b"%", b"%%") + b'%d,"leader_epoch":'
                    lines = b"".join((lead + b"%d" % epoch + b',"value":"%s"}\n') * sum(len(vs) for _, _, vs in run)
                                     for epoch, run in groupby(batches, key=itemgetter(1)))
                    parts: list = [None] * (2 * len(values))
                    parts[0::2] = chain.from_iterable(range(base, base + len(vs)) for base, _, vs in batches)
                    parts[1::2] = values
                    out.write_lines(lines % tuple(parts))
                n += len(values)
    return n


@contextmanager
def _whole(path: Path) -> Iterator[JsonlAppender]:
    """Write `path` beside it and rename it into place once complete."""
    part = path.with_name(path.name + ".part")
    part.unlink(missing_ok=True)
    out = JsonlAppender(part)
    try:
        yield out
    except BaseException:
        out.close()
        part.unlink(missing_ok=True)
        raise
    out.close()
    os.replace(part, path)
