"""Hand-made run directories for the analysis pipeline's tests, and the shared Spark session.

`RunBuilder` writes the files of DESIGN section 7 for a cluster of three brokers (racks a,
b, c), one topic `orders` with one partition at RF=3, MinISR=2, that is clean until a test
adds an anomaly. Times are nanoseconds from T0.
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

T0 = 1_000_000_000
S = 1_000_000_000  # one second in ns


def topology(expect: dict | None = None, racks: tuple[str, ...] = ("a", "b", "c")) -> dict:
    t = {
        "name": "handmade", "seed": 1, "duration": "5s",
        "cluster": {"controllers": 1, "brokers": [{"id": i + 1, "rack": r} for i, r in enumerate(racks)]},
        "topics": [{"name": "orders", "partitions": 1, "replication_factor": 3, "min_insync_replicas": 2,
                    "placement": "explicit", "assignment": {0: [1, 2, 3]}}],
        "workload": {"producers": [{"count": 1, "topic": "orders", "acks": "all"}],
                     "consumers": [{"count": 1, "topic": "orders"}]},
    }
    if expect is not None:
        t["expect"] = expect
    return t


class RunBuilder:
    """A clean run of five values v0..v4 at offsets 0..4, led by broker 1 throughout."""

    def __init__(self, root: Path, name: str, values: int = 5, **topology_kw: object) -> None:
        self.dir = root / name
        self.topology = topology(**topology_kw)
        n = values
        vals = [f"v{i}" for i in range(n)]
        self.history: list[dict] = []
        self.events: list[dict] = [
            {"node": "controller-1", "time_ns": T0, "kind": "controller-elected", "controller_id": 1, "term": 1},
            *({"node": "controller-1", "time_ns": T0 + i, "kind": "registered", "broker_id": i, "broker_epoch": i,
               "clean": True, "incarnation_id": f"inc{i}"} for i in (1, 2, 3)),
            self.change(T0 + 10, leader=1, epoch=0, isr=[1, 2, 3], reason="create"),
            # (led as it is made: a partition not led yet has no leader, `figures._in_effect`)
            {"node": "broker-1", "time_ns": T0 + 10, "kind": "became-leader", "topic": "orders", "partition": 0,
             "leader_epoch": 0, "partition_epoch": 0, "isr": [1, 2, 3], "elr": [], "last_known_elr": [],
             "leo": 0, "hwm": 0},
        ]
        self.faults: list[dict] = []
        for i, v in enumerate(vals):
            self.send(v, offset=i, at=T0 + S + i * 1000)
        self.poll("consumer-0", [(i, v) for i, v in enumerate(vals)], at=T0 + 2 * S)
        self.poll("final-reader", [(i, v) for i, v in enumerate(vals)], at=T0 + 4 * S)
        self.logs = {node: list(enumerate(vals)) for node in ("broker-1", "broker-2", "broker-3")}
        self.replicas = {node: {"leo": n, "hwm": n, "is_leader": node == "broker-1", "leader_epoch": 0}
                         for node in self.logs}

    def extend_log(self, records: list[tuple[int, str]]) -> None:
        """Every replica's log grows by `records` (its LEO and HWM level at the new end), and the
        final read returns the whole committed log."""
        for node in self.logs:
            self.logs[node] += records
            self.replicas[node].update(leo=len(self.logs[node]), hwm=len(self.logs[node]))
        self.history = [h for h in self.history if h["process"] != "final-reader"]
        self.poll("final-reader", self.logs["broker-1"], at=T0 + 4 * S)

    def fence_over_to(self, at: int, leader: int, leo: int) -> None:
        """The controller fences broker 1 and elects `leader` (ISR it and 3) at leader epoch 1;
        the new leader, with LEO `leo`, says so 200 ns later and leads at the end."""
        self.events += [RunBuilder.change(at, leader=leader, epoch=1, isr=[leader, 3], reason="fence"),
                        {"node": f"broker-{leader}", "time_ns": at + 200, "kind": "became-leader", "topic": "orders",
                         "partition": 0, "leader_epoch": 1, "partition_epoch": 1, "isr": [leader, 3], "elr": [],
                         "last_known_elr": [], "leo": leo, "hwm": leo}]
        for node, replica in self.replicas.items():
            replica["is_leader"] = node == f"broker-{leader}"

    @staticmethod
    def change(at: int, leader: int, epoch: int, isr: list[int], reason: str, elr: list[int] | None = None,
               replicas: list[int] | None = None) -> dict:
        return {"node": "controller-1", "time_ns": at, "kind": "partition-changed", "topic": "orders",
                "partition": 0, "leader": leader, "leader_epoch": epoch, "partition_epoch": epoch, "isr": isr,
                "elr": elr or [], "last_known_elr": [], "replicas": replicas or [1, 2, 3], "reason": reason}

    def send(self, value: str, offset: int | None, at: int, acks: str = "all", outcome: str = "ok",
             process: str = "producer-0", node: str | None = None) -> None:
        """`node`: the broker that acknowledged, on the `ok` record (runs recorded before
        clients wrote it have none)."""
        base = {"process": process, "f": "send", "topic": "orders", "partition": 0, "value": value, "acks": acks}
        self.history.append({**base, "type": "invoke", "time_ns": at})
        done = {**base, "type": outcome, "time_ns": at + 500}
        if outcome == "ok":
            done["offset"] = offset
            if node is not None:
                done["node"] = node
        else:
            done["error"] = "TIMEOUT"
        self.history.append(done)

    def fault(self, at: int, do: str, target: str | None, resolved: list[str], params: dict | None = None,
              effect: dict | None = None, origin: str = "faults[0]") -> None:
        """The `start` and `end` lines the fault runner writes for one action, 1 ms apart."""
        base = {"do": do, "target": target, "resolved": resolved, "params": params or {}, "origin": origin}
        self.faults += [{"time_ns": at, **base, "phase": "start"},
                        {"time_ns": at + 1_000_000, **base, "phase": "end", "effect": effect or {}}]

    def kill_and_restart(self, target: str, node: str, at: int, back: int, pids: tuple[int, int] = (7, 8),
                         back_target: str | None = None) -> None:
        """A kill of `target` (resolved to `node`) at `at` and a restart at `back`: in the
        topology's schedule (as `faults[0]` and `faults[1]`) and in faults.jsonl."""
        back_target = back_target or target
        self.topology["faults"] = [{"at": f"{(at - T0) / S:g}s", "do": "kill", "target": target},
                                   {"at": f"{(back - T0) / S:g}s", "do": "restart", "target": back_target},
                                   *self.topology.get("faults", [])]
        self.fault(at, "kill", target, [node], effect={"killed": {node: pids[0]}})
        self.fault(back, "restart", back_target, [node], effect={"restarted": {node: pids[1]}}, origin="faults[1]")

    def poll(self, process: str, records: list[tuple[int, str]], at: int, node: str | None = None) -> None:
        base = {"process": process, "f": "poll", "topic": "orders", "partition": 0}
        self.history.append({**base, "type": "invoke", "offset": records[0][0], "time_ns": at})
        done = {**base, "type": "ok", "records": [list(r) for r in records], "time_ns": at + 100}
        if node is not None:
            done["node"] = node
        self.history.append(done)

    def write(self) -> Path:
        self.dir.mkdir(parents=True)
        (self.dir / "final").mkdir()
        (self.dir / "topology.yaml").write_text(yaml.safe_dump(self.topology))
        self._jsonl("history.jsonl", self.history)
        self._jsonl("events.jsonl", sorted(self.events, key=lambda e: e["time_ns"]))
        self._jsonl("faults.jsonl", self.faults)
        self._jsonl("final/logs.jsonl", [
            {"node": node, "topic": "orders", "partition": 0, "offset": o, "leader_epoch": 0, "value": v}
            for node, recs in sorted(self.logs.items()) for o, v in recs])
        self._jsonl("final/replicas.jsonl", [
            {"node": node, "topic": "orders", "partition": 0, **r} for node, r in sorted(self.replicas.items())])
        return self.dir

    def _jsonl(self, name: str, rows: list[dict]) -> None:
        (self.dir / name).write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    """One local Spark session per test worker, stopped (with its JVM) at the end. A test
    that judged in process before the first use of this one (a matrix run, on the default
    master: the longest tests start first) left a session of its own: it is stopped, and
    every later judgment of the worker is on this one."""
    from testbed.analysis.session import get_spark, stop_spark

    try:
        session = get_spark("local[2]")
    except RuntimeError:  # "a Spark session on local[*] is already running in this process"
        stop_spark()
        session = get_spark("local[2]")
    yield session
    stop_spark()


@pytest.fixture
def warm_master(spark: object) -> str:  # noqa: F811 - the worker's session, whose JVM it names
    """`--spark-master` for a `run.py` a test starts: the Spark Connect server inside this
    worker's own JVM, already warm, where the command would start, rehearse on and judge
    in a JVM of its own (a new JVM's start and first judgment of a small run: about 45 s of
    CPU, against 15-17 s warm; BENCHMARKS.md, eighth session). Tests of the embedded path itself (its
    JVM, its output, its start in the background) do not take it. A test that stopped the
    worker's session leaves the next to start another: the URL is the one of now."""
    from testbed.analysis.session import connect_url, get_spark
    get_spark()
    url = connect_url()
    assert url is not None and url.startswith("sc://"), url
    return url
