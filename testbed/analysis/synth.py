"""A synthetic run directory of N history records in the formats of DESIGN section 7: a
clean run whose size is set by the history, for the pipeline's benchmark (`run.py bench`) and
its rehearsal while a cluster runs (`pipeline.rehearse`)."""
from __future__ import annotations

from pathlib import Path

import yaml


_PARTITIONS = 6
_BATCH = 10
_POLL = 500


def _topology() -> dict:
    return {
        "name": "synthetic", "seed": 0, "duration": "20s",
        "cluster": {"controllers": 1, "brokers": [{"id": i, "rack": r} for i, r in ((1, "a"), (2, "b"), (3, "c"))]},
        "topics": [{"name": "orders", "partitions": _PARTITIONS, "replication_factor": 3, "min_insync_replicas": 2}],
        "workload": {"producers": [{"count": 2, "topic": "orders", "acks": "all"}],
                     "consumers": [{"count": 1, "topic": "orders"}]},
    }


def write_synthetic_run(root: Path, n_records: int, name: str = "synthetic-run") -> Path:
    """A clean run of about `n_records` history records (sends in batches of 10, each value
    invoked and acknowledged, plus the polls that read them), its events and final files."""
    run = root / name
    (run / "final").mkdir(parents=True)
    (run / "topology.yaml").write_text(yaml.safe_dump(_topology()))
    values = max(1, n_records // 2 - n_records // (2 * _POLL) - 1)
    per_partition = [values // _PARTITIONS + (1 if p < values % _PARTITIONS else 0) for p in range(_PARTITIONS)]
    t0 = 1_000_000_000
    events = [f'{{"node":"controller-1","time_ns":{t0},"kind":"controller-elected","controller_id":1,"term":1}}\n']
    replicas = []
    for p in range(_PARTITIONS):
        leader = 1 + p % 3
        isr = [leader] + [b for b in (1, 2, 3) if b != leader]
        events.append(f'{{"node":"controller-1","time_ns":{t0 + 10 + p},"kind":"partition-changed","topic":"orders",'
                      f'"partition":{p},"leader":{leader},"leader_epoch":0,"partition_epoch":0,"isr":{isr},'
                      f'"elr":[],"last_known_elr":[],"replicas":{isr},"reason":"create"}}\n')
        events.append(f'{{"node":"broker-{leader}","time_ns":{t0 + 20 + p},"kind":"became-leader","topic":"orders",'
                      f'"partition":{p},"leader_epoch":0,"partition_epoch":0,"isr":{isr},"elr":[],'
                      f'"last_known_elr":[],"leo":0,"hwm":0}}\n')
        for b in (1, 2, 3):
            n = per_partition[p]
            replicas.append(f'{{"node":"broker-{b}","topic":"orders","partition":{p},"leo":{n},"hwm":{n},'
                            f'"leader_epoch":0,"is_leader":{"true" if b == leader else "false"}}}\n')
    (run / "events.jsonl").write_text("".join(events))
    (run / "faults.jsonl").write_text("")
    (run / "final" / "replicas.jsonl").write_text("".join(replicas))
    with (run / "history.jsonl").open("w") as h, (run / "final" / "logs.jsonl").open("w") as logs:
        for p in range(_PARTITIONS):
            _write_partition(h, logs, p, per_partition[p], t0 + 1_000_000)
    return run


def _write_partition(h, logs, p: int, n: int, t0: int) -> None:
    """Sends of batches of 10 values at 1 ms per batch, a poll of every 500 records, the final read."""
    send = '{{"process":"producer-{w}","type":"{k}","f":"send","topic":"orders","partition":{p},' \
           '"value":"p{p}-{o}","acks":"all"{off},"time_ns":{t}}}\n'
    for start in range(0, n, _BATCH):
        t = t0 + start * 100_000
        batch = range(start, min(n, start + _BATCH))
        h.write("".join(send.format(w=p % 2, k="invoke", p=p, o=o, off="", t=t) for o in batch))
        h.write("".join(send.format(w=p % 2, k="ok", p=p, o=o, off=f',"offset":{o}', t=t + 400_000) for o in batch))
        logs.write("".join(f'{{"node":"broker-{b}","topic":"orders","partition":{p},"offset":{o},'
                           f'"leader_epoch":0,"value":"p{p}-{o}"}}\n' for b in (1, 2, 3) for o in batch))
    for process, shift in (("consumer-0", 1_000_000), ("final-reader", 10 ** 12)):
        for start in range(0, n, _POLL):
            t = t0 + start * 100_000 + shift
            records = ",".join(f'[{o},"p{p}-{o}"]' for o in range(start, min(n, start + _POLL)))
            h.write(f'{{"process":"{process}","type":"invoke","f":"poll","topic":"orders","partition":{p},'
                    f'"offset":{start},"time_ns":{t}}}\n')
            h.write(f'{{"process":"{process}","type":"ok","f":"poll","topic":"orders","partition":{p},'
                    f'"records":[{records}],"time_ns":{t + 50_000}}}\n')
