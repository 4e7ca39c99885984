"""Figures of a live cluster: time to ready, failovers, throughput, produce latency and the
memory of an idle broker. Each function returns its measurements; nothing is asserted."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import psutil

from broker.client import ClusterClient
from broker.common.errors import Errors
from broker.common.jsonl import read_jsonl
from broker.wire.linkfilter import CLIENTS
from testbed.clients.stats import StatsInbox
from testbed.supervisor.cluster import Cluster
from testbed.supervisor.netns import NetnsNetwork
from testbed.supervisor.processes import Registry
from testbed.config.parser import parse_topology
from testbed.config.topology_spec import Topology

RECORD_BYTES = 100
#: The partition whose leader the failover figures take down.
TOPIC, PARTITION = "bench", 0


def topology(partitions: int = 6, producers: int = 1, batch: int = 1, controllers: int = 1, brokers: int = 3,
             in_flight: int = 1, backend: str = "userspace") -> Topology:
    return parse_topology({
        "name": "bench", "seed": 1, "duration": "10s", "network": {"backend": backend},
        "cluster": {"controllers": controllers, "brokers": {"count": brokers, "racks": ["a", "b", "c"]}},
        "topics": [{"name": TOPIC, "partitions": partitions, "replication_factor": 3,
                    "min_insync_replicas": 2, "flush": {"messages": 10000, "interval": "1s"}}],
        "workload": {"producers": [{"count": producers, "topic": TOPIC, "acks": "all", "rate": "max",
                                    "batch": batch, "retries": 3, "in_flight": in_flight}]},
    }, "bench")


def ready(runs: Path, repeat: int, controllers: int = 1, brokers: int = 3) -> list[float]:
    """Seconds from start to every one of 24 partitions led, over `repeat` cold starts."""
    out = []
    topo = topology(24, controllers=controllers, brokers=brokers)
    for _ in range(repeat):
        c = Cluster(topo, runs_dir=runs)
        try:
            t0 = time.monotonic()
            c.start()
            out.append(time.monotonic() - t0)
        finally:
            c.close()
    return out


def controller_failover(runs: Path, kills: int) -> list[float]:
    """Kill the active controller `kills` times; each time, the seconds until another one
    has committed a record (its term's first entry), seen through the control sockets."""
    out = []
    with Cluster(topology(6, controllers=3), runs_dir=runs) as c:
        for _ in range(kills):
            s = c.wait_until(lambda s: s.controller is not None and all(s.quorum.values()), timeout=10,
                             what="an active controller and every voter up")
            old, end = s.controller["node"], s.controller["quorum"]["commit_end"]
            t0 = time.monotonic()
            c.kill_node(old)
            c.wait_until(lambda s: s.controller is not None and s.controller["node"] != old
                         and s.controller["quorum"]["commit_end"] > end, timeout=10, what="a new active controller")
            out.append(time.monotonic() - t0)
            c.restart_node(old)
    return out


def leader_failover(runs: Path, repeat: int, controlled: bool) -> list[float]:
    """Seconds from taking the leader of bench/0 down (SIGKILL, or a controlled shutdown) to
    the first acks=all write that a new leader acknowledges. The writer asks for metadata
    with a 50 ms timeout and writes as soon as it names another leader."""
    out = []
    with Cluster(topology(6), runs_dir=runs) as c:
        writer = ClusterClient(c.broker_endpoints(), "bench-failover", request_timeout=0.05)
        try:
            for i in range(repeat):
                s = c.wait_until(lambda s: s.fully_replicated(), timeout=30, what="every ISR full")
                old = s.partition(TOPIC, PARTITION).leader
                name = f"broker-{old}"
                t0 = time.monotonic()
                if controlled:
                    stopping = threading.Thread(target=c.shutdown_node, args=(name,), daemon=True)
                    stopping.start()
                else:
                    c.kill_node(name)
                out.append(_first_write_elsewhere(writer, old, f"failover-{i}", t0))
                if controlled:
                    stopping.join()
                c.restart_node(name)
        finally:
            writer.close()
    return out


def _first_write_elsewhere(writer: ClusterClient, old: int, value: str, t0: float) -> float:
    while time.monotonic() - t0 < 60:
        writer.refresh_metadata([TOPIC])
        leader = writer.leader_of(TOPIC, PARTITION)
        if leader not in (-1, old):
            r = writer.produce(TOPIC, PARTITION, [value], "all", timeout=1.0)
            if r.error == Errors.NONE and r.leader != old:
                return time.monotonic() - t0
    raise RuntimeError(f"no leader other than broker {old} acknowledged a write within 60 s")


def throughput(runs: Path, repeat: int, window: float, producers: int, batch: int, in_flight: int = 1,
               backend: str = "userspace") -> list[float]:
    """Acknowledged records/s of acks=all producers at full speed, over `repeat` windows."""
    rates = []
    with Cluster(topology(6, producers, batch, in_flight=in_flight, backend=backend), runs_dir=runs) as c:
        inbox = StatsInbox(f"ipc://{c.dir.socket_dir()}/stats.sock")
        try:
            c.start_clients(inbox.endpoint, value_bytes=RECORD_BYTES)
            c.start_workload(inbox)
            _drain_for(inbox, 2.0)  # warm-up
            for _ in range(repeat):
                inbox.drain()
                a0, t0 = inbox.totals()["acked"], time.monotonic()
                _drain_for(inbox, window)
                rates.append((inbox.totals()["acked"] - a0) / (time.monotonic() - t0))
        finally:
            c.stop_clients(timeout=5)
            inbox.close()
    return rates


def _drain_for(inbox: StatsInbox, seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        inbox.drain()
        time.sleep(min(0.1, max(0.0, until - time.monotonic())))  # the measurement window itself


def produce_latency(runs: Path, rounds: int, sends: int) -> list[list[float]]:
    """Per round, the seconds from send to acknowledgement of `sends` acks=all single-record
    writes made one at a time (after a warm-up of a tenth as many)."""
    out: list[list[float]] = []
    with Cluster(topology(6), runs_dir=runs) as c:
        client = c.client()
        timed = _timer(client)
        for i in range(sends // 10):
            timed(f"warm{i}")
        for r in range(rounds):
            out.append([x for x in (timed(f"x{r}-{i}") for i in range(sends)) if x is not None])
    return out


def _timer(client: ClusterClient) -> Callable[[str], float | None]:
    def timed(value: str) -> float | None:
        t0 = time.perf_counter()
        r = client.produce(TOPIC, PARTITION, [value], "all")
        return time.perf_counter() - t0 if r.error == Errors.NONE else None
    return timed


def idle_broker_rss(runs: Path, settle: float = 3.0) -> list[float]:
    """MB of resident memory of each broker of a cluster that has been idle for `settle` s."""
    with Cluster(topology(24), runs_dir=runs) as c:
        time.sleep(settle)  # idle on purpose: what a broker holds when nothing happens
        return [psutil.Process(c.pid(f"broker-{b.id}")).memory_info().rss / 1e6 for b in c.topology.cluster.brokers]


def netns_setup(runs: Path, repeat: int, brokers: int = 6) -> list[float]:
    """Seconds to make the namespaces, veth pairs, bridge and addresses of 1 controller,
    `brokers` brokers and the clients (DESIGN section 5), over `repeat` setups."""
    out = []
    names = ["controller-1", *(f"broker-{i}" for i in range(1, brokers + 1)), CLIENTS]
    for i in range(repeat):
        registry = Registry(runs, f"netns-setup-{i}", runs / "sock")
        registry.start_watchman()  # a bench killed mid-setup leaves no namespace until the next run
        network = NetnsNetwork(runs / f"netns-setup-{i}", registry.add_netns)
        try:
            t0 = time.monotonic()
            network.create(names)
            out.append(time.monotonic() - t0)
        finally:
            network.remove()
            registry.remove()
    return out


def workload_latency(runs: Path, window: float, backend: str) -> list[float]:
    """Seconds from invoke to acknowledgement of every acks=all send of one workload producer
    (its own process: in the clients' namespace on netns), batch 1, one request in flight,
    over `window` s after a second's warm-up, read from the run's history."""
    with Cluster(topology(6, producers=1, batch=1, backend=backend), runs_dir=runs) as c:
        c.start_clients(None)
        time.sleep(1.0 + window)  # the workload runs on its own; its history is the measurement
        c.stop_clients(timeout=5)
        invoked: dict[str, int] = {}
        out = []
        start = None
        for rec in read_jsonl(c.dir.history):
            if rec.get("f") != "send":
                continue
            start = rec["time_ns"] if start is None else start
            if rec["type"] == "invoke":
                invoked[rec["value"]] = rec["time_ns"]
            elif rec["type"] == "ok" and rec["time_ns"] - start > 1e9 and rec["value"] in invoked:
                out.append((rec["time_ns"] - invoked[rec["value"]]) / 1e9)
        return out
