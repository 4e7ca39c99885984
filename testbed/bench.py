"""`python run.py bench`: the figures of DESIGN section 10 that this build can measure.

- ready: seconds from start to "every partition led" for 1 controller + 3 brokers and
  24 partitions RF 3, and for 3 controllers + 6 brokers (the median of --repeat cold starts);
- controller failover: seconds from SIGKILL of the active controller to the next committed
  metadata record (a new leader's first entry), over at least 10 kills;
- throughput: acks=all RF 3 records/s and MB/s of 100-byte records, batched, with the
  full history recorded (the median of --repeat windows);
- produce latency: acks=all RF 3, one record per request, one request at a time, from send
  to acknowledgement (p50 and p99 over --latency-sends sends after a warm-up).

Figures are measured and printed, never asserted.
"""
from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from broker.common.errors import Errors
from testbed.clients.stats import StatsInbox
from testbed.supervisor.cluster import Cluster
from testbed.topology import parse_topology

RECORD_BYTES = 100


def _topology(partitions: int, producers: int, batch: int, controllers: int = 1, brokers: int = 3) -> dict:
    return {
        "name": "bench", "seed": 1, "duration": "10s",
        "cluster": {"controllers": controllers, "brokers": {"count": brokers, "racks": ["a", "b", "c"]}},
        "topics": [{"name": "bench", "partitions": partitions, "replication_factor": 3,
                    "min_insync_replicas": 2, "flush": {"messages": 10000, "interval": "1s"}}],
        "workload": {"producers": [{"count": producers, "topic": "bench", "acks": "all", "rate": "max",
                                    "batch": batch, "retries": 3}]},
    }


def bench_ready(runs: Path, repeat: int, controllers: int = 1, brokers: int = 3) -> list[float]:
    out = []
    topo = parse_topology(_topology(24, 1, 1, controllers, brokers), "bench")
    for _ in range(repeat):
        c = Cluster(topo, runs_dir=runs)
        try:
            t0 = time.monotonic()
            c.start()
            out.append(time.monotonic() - t0)
        finally:
            c.close()
    return out


def bench_controller_failover(runs: Path, kills: int) -> list[float]:
    """Kill the active controller `kills` times; each time, the seconds until another one
    has committed a record (its term's first entry), seen through the control sockets."""
    out = []
    with Cluster(parse_topology(_topology(6, 1, 1, controllers=3), "bench"), runs_dir=runs) as c:
        for _ in range(kills):
            s = c.wait_until(lambda s: s.controller is not None and all(s.quorum.values()), timeout=10,
                             what="an active controller and every voter up")
            old, end = s.controller["node"], s.controller["quorum"]["commit_end"]
            t0 = time.monotonic()
            c.kill(old)
            c.wait_until(lambda s: s.controller is not None and s.controller["node"] != old
                         and s.controller["quorum"]["commit_end"] > end, timeout=10, what="a new active controller")
            out.append(time.monotonic() - t0)
            c.restart(old)
    return out


def bench_throughput(runs: Path, repeat: int, window: float, producers: int, batch: int) -> list[float]:
    topo = parse_topology(_topology(6, producers, batch), "bench")
    rates = []
    with Cluster(topo, runs_dir=runs) as c:
        inbox = StatsInbox(f"ipc://{c.dir.socket_dir()}/stats.sock")
        try:
            c.start_clients(inbox.endpoint, value_bytes=RECORD_BYTES)
            warm_until = time.monotonic() + 2.0
            while time.monotonic() < warm_until:
                inbox.drain()
                time.sleep(0.1)  # warm-up pacing
            for _ in range(repeat):
                inbox.drain()
                a0, t0 = inbox.totals()["acked"], time.monotonic()
                time.sleep(window)  # the measurement window itself
                inbox.drain()
                rates.append((inbox.totals()["acked"] - a0) / (time.monotonic() - t0))
        finally:
            c.stop_clients(timeout=5)
            inbox.close()
    return rates


def bench_produce_latency(runs: Path, sends: int) -> list[float]:
    """Seconds from send to acknowledgement of acks=all single-record writes, one at a time."""
    topo = parse_topology(_topology(6, 1, 1), "bench")
    out = []
    with Cluster(topo, runs_dir=runs) as c:
        client = c.client()
        for i in range(sends + sends // 10):
            t0 = time.perf_counter()
            r = client.produce("bench", 0, [f"x{i}"], "all")
            if i >= sends // 10 and r.error == Errors.NONE:  # the first tenth warms the path up
                out.append(time.perf_counter() - t0)
    return out


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_pipeline_figure(n_records: int, master: str) -> float | None:
    if n_records <= 0:
        return None
    from testbed.analysis.session import stop_spark
    from testbed.analysis.synth import bench_pipeline
    try:
        return bench_pipeline(n_records, master)
    finally:
        stop_spark()


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python run.py bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--repeat", type=int, default=3, help="measurements per figure (the median is reported)")
    ap.add_argument("--window", type=float, default=3.0, help="seconds per throughput measurement")
    ap.add_argument("--producers", type=int, default=2)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--latency-sends", type=int, default=2000, help="acks=all sends timed one at a time")
    ap.add_argument("--pipeline-records", type=int, default=1_000_000,
                    help="history records of the synthetic run the pipeline judges (0 skips it)")
    ap.add_argument("--spark-master", default="local[2]")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="isrlab-bench-") as tmp:
        runs = Path(tmp)
        ready = bench_ready(runs, args.repeat)
        ready_quorum = bench_ready(runs, args.repeat, controllers=3, brokers=6)
        failover = bench_controller_failover(runs, max(10, args.repeat))
        rates = bench_throughput(runs, args.repeat, args.window, args.producers, args.batch)
        rates_batch1 = bench_throughput(runs, args.repeat, args.window, 4, 1)
        latency = bench_produce_latency(runs, args.latency_sends)
    pipeline = bench_pipeline_figure(args.pipeline_records, args.spark_master)
    figures = {
        "ready_s": {"median": statistics.median(ready), "runs": ready,
                    "setup": "1 controller + 3 brokers, 24 partitions RF 3"},
        "ready_quorum_s": {"median": statistics.median(ready_quorum), "runs": ready_quorum,
                           "setup": "3 controllers + 6 brokers, 24 partitions RF 3"},
        "controller_failover_s": {"median": statistics.median(failover), "runs": failover,
                                  "setup": "SIGKILL of the active controller to the next committed record, "
                                           "3 controllers, election timeout 300-600 ms"},
        "throughput_records_per_s": {"median": statistics.median(rates), "runs": rates,
                                     "setup": f"acks=all RF 3, {RECORD_BYTES}-byte records, batch {args.batch}, "
                                              f"{args.producers} producers, history recorded"},
        "throughput_mb_per_s": {"median": statistics.median(rates) * RECORD_BYTES / 1e6},
        "throughput_batch1_records_per_s": {"median": statistics.median(rates_batch1), "runs": rates_batch1,
                                            "setup": "acks=all RF 3, batch 1, 4 producers, history recorded"},
        "produce_latency_ms": {"p50": 1000 * _percentile(latency, 0.5), "p99": 1000 * _percentile(latency, 0.99),
                               "sends": len(latency),
                               "setup": "acks=all RF 3, 1 record per request, one request in flight"},
    }
    if pipeline is not None:
        figures["pipeline_s"] = {"median": pipeline, "runs": [pipeline],
                                 "setup": f"{args.pipeline_records} history records, {args.spark_master}, warm session"}
    if args.json:
        print(json.dumps(figures, indent=1))
        return 0
    t = Table(title="isrlab bench")
    for col in ("figure", "median", "runs", "setup"):
        t.add_column(col)
    t.add_row("cluster ready (s)", f"{figures['ready_s']['median']:.3f}",
              " ".join(f"{x:.3f}" for x in ready), figures["ready_s"]["setup"])
    for key, label in (("ready_quorum_s", "cluster ready, quorum (s)"), ("controller_failover_s",
                                                                        "controller failover (s)")):
        runs_ = figures[key]["runs"]
        t.add_row(label, f"{figures[key]['median']:.3f}", f"min {min(runs_):.3f} max {max(runs_):.3f}",
                  figures[key]["setup"])
    t.add_row("acks=all throughput (records/s)", f"{figures['throughput_records_per_s']['median']:.0f}",
              " ".join(f"{x:.0f}" for x in rates), figures["throughput_records_per_s"]["setup"])
    t.add_row("acks=all throughput (MB/s)", f"{figures['throughput_mb_per_s']['median']:.2f}", "", "")
    t.add_row("acks=all throughput, batch 1 (records/s)",
              f"{figures['throughput_batch1_records_per_s']['median']:.0f}",
              " ".join(f"{x:.0f}" for x in rates_batch1), figures["throughput_batch1_records_per_s"]["setup"])
    lat = figures["produce_latency_ms"]
    t.add_row("acks=all produce latency (ms)", f"p50 {lat['p50']:.2f}", f"p99 {lat['p99']:.2f}", lat["setup"])
    if pipeline is not None:
        t.add_row("pipeline (s)", f"{pipeline:.1f}", "", figures["pipeline_s"]["setup"])
    Console().print(t)
    return 0
