"""The Spark job over the ingested tables: every check, with attribution of losses, the
convergence of each run and the figures; returns plain per-run data for the verdicts."""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis import checks_history as H
from testbed.analysis import checks_protocol as P
from testbed.analysis import figures
from testbed.analysis.attribution import attribute
from testbed.analysis.ingest import Tables
from testbed.analysis.observations import (
    PART,
    acknowledged,
    committed_log,
    partitions,
    poll_records,
    read_coverage,
    replica_prefixes,
    run_start,
    seconds,
)
from testbed.analysis.runinfo import ConfigTables
from testbed.topology import CHECK_NAMES

MAX_EXAMPLES = 20
ATTRIBUTED = ("lost_writes", "lost_writes_acks1", "inconsistent_offsets")


@dataclass
class RunData:
    """What the job found for one run, as plain data."""

    checks: dict[str, dict] = field(default_factory=dict)  # name -> {"count", "examples", ...}
    converged: bool = False
    figures: dict = field(default_factory=dict)
    timeline: dict = field(default_factory=dict)  # what the report plots


def check_frames(t: Tables, config: ConfigTables) -> dict[str, DataFrame]:
    """Every check of DESIGN section 8 as a frame of anomalies, losses with their causes."""
    acked = acknowledged(t).persist()
    polls = poll_records(t).persist()
    committed = committed_log(t, polls).persist()
    missing = H.missing_acknowledged(acked, committed, read_coverage(t, config, polls)).persist()
    starts = run_start(t).persist()
    prefixes = replica_prefixes(t).persist()
    frames = {
        "lost_writes": attribute(H.lost(missing, "all"), t, starts, "lost"),
        "lost_writes_acks1": attribute(H.lost(missing, "1"), t, starts, "lost"),
        "unseen": H.unseen(missing),
        "duplicates": H.duplicates(committed),
        "inconsistent_offsets": attribute(H.inconsistent_offsets(H.observations(acked, polls, prefixes)), t,
                                          starts, "overwritten"),
        "nonmonotonic_polls": H.nonmonotonic_polls(polls),
        "poll_skips": H.poll_skips(polls),
        "committed_regressions": H.committed_regressions(polls, committed),
        "log_divergence": P.log_divergence(t, prefixes),
        "leader_conflicts": P.leader_conflicts(t),
        "unclean_exclusion": P.unclean_exclusion(t, config),
        "placement_violations": P.placement_violations(t, config),
        "elr_violations": P.elr_violations(t, config),
        "metadata_divergence": P.metadata_divergence(t),
    }
    assert tuple(frames) == CHECK_NAMES, "every check name of the topology schema has a frame"
    return frames


def _examples(name: str, frame: DataFrame, starts: DataFrame) -> DataFrame:
    """(run_id, count, unattributed, examples as JSON) of one check: one small Spark job per
    check keeps each plan small enough for the optimizer."""
    cols = [c for c in frame.columns if c not in ("run_id", "attributed")]
    if "time_ns" in frame.columns:
        frame = frame.join(starts, "run_id", "left").withColumn("time_s", seconds("time_ns")).drop("t0")
        cols = [c for c in cols if c != "time_ns"] + ["time_s"]
    unattributed = (~F.col("attributed")).cast("int") if "attributed" in frame.columns else F.lit(0)
    order = [F.col(c) for c in ("topic", "partition", "offset", "time_s") if c in frame.columns]
    rank = Window.partitionBy("run_id").orderBy(*order, *[F.col(c).cast("string") for c in cols])
    return (frame.withColumn("n", F.row_number().over(rank))
            .groupBy("run_id")
            .agg(F.count("*").alias("count"), F.sum(unattributed).alias("unattributed"),
                 F.collect_list(F.when(F.col("n") <= MAX_EXAMPLES,
                                       F.struct("n", F.to_json(F.struct(*cols)).alias("example"))))
                 .alias("examples")))


def convergence(t: Tables, config: ConfigTables) -> DataFrame:
    """Per run: every partition has one leader and RF replicas, all at the same LEO, with the
    leader's HWM there (the state the supervisor waits for before the final read; a
    follower learns the last HWM on its next fetch, so its own may trail)."""
    reps = (t.final_replicas.groupBy(*PART)
            .agg(F.sum(F.col("is_leader").cast("int")).alias("leaders"), F.count("*").alias("n"),
                 F.min("leo").alias("lo"), F.max("leo").alias("hi"),
                 F.max(F.when(F.col("is_leader"), F.col("hwm"))).alias("leader_hwm")))
    ok = ((F.col("leaders") == 1) & (F.col("n") == F.col("rf")) & (F.col("lo") == F.col("hi"))
          & (F.col("leader_hwm") == F.col("hi")))
    return (partitions(t, config).join(config.topics.select("run_id", "topic", "rf"), ["run_id", "topic"], "left")
            .join(reps, PART, "left")
            .groupBy("run_id").agg(F.min(F.coalesce(ok, F.lit(False)).cast("int")).alias("converged")))


def run_job(t: Tables, config: ConfigTables, run_ids: list[str]) -> dict[str, RunData]:
    """Every check, the convergence and the figures of `run_ids`. The small tables that every
    check reads are cached for the job, and the cache is dropped at its end."""
    out = {rid: RunData() for rid in run_ids}
    t = replace(t, events=t.events.persist(), final_replicas=t.final_replicas.persist(),
                faults=t.faults.persist())
    try:
        _run_checks(t, config, out)
    finally:
        t.events.sparkSession.catalog.clearCache()
    return out


def _run_checks(t: Tables, config: ConfigTables, out: dict[str, RunData]) -> None:
    starts = run_start(t)
    for name, frame in check_frames(t, config).items():
        for row in _examples(name, frame, starts).collect():
            examples = [json.loads(e["example"]) for e in sorted(row["examples"], key=lambda e: e["n"])]
            entry = {"count": row["count"], "examples": examples}
            if name in ATTRIBUTED:
                entry["unattributed"] = row["unattributed"]
            out[row["run_id"]].checks[name] = entry
    for data in out.values():
        for name in CHECK_NAMES:
            data.checks.setdefault(name, {"count": 0, "examples": []} | (
                {"unattributed": 0} if name in ATTRIBUTED else {}))
    for row in convergence(t, config).collect():
        out[row["run_id"]].converged = bool(row["converged"])
    bounds = figures.run_bounds(t).persist()
    _collect_figures(t, config, bounds, out)


def _by_run(frame: DataFrame, out: dict[str, RunData], key: str, into: str) -> None:
    for row in frame.collect():
        d = row.asDict(recursive=True)
        getattr(out[d.pop("run_id")], into).setdefault(key, []).append(d)


def _collect_figures(t: Tables, config: ConfigTables, bounds: DataFrame, out: dict[str, RunData]) -> None:
    windows = figures.availability_windows(t, config, bounds).orderBy("run_id", "topic", "partition", "start_s")
    _by_run(windows, out, "availability", "figures")
    _by_run(figures.fault_recovery(t, bounds), out, "faults", "figures")
    _by_run(figures.throughput_latency(t, bounds), out, "series", "figures")
    for data in out.values():
        data.figures.setdefault("availability", [])
        data.figures.setdefault("faults", [])
        data.figures.setdefault("series", [])
        unavailable: dict[str, float] = {}
        for w in data.figures["availability"]:
            unavailable[w["kind"]] = round(unavailable.get(w["kind"], 0.0) + w["end_s"] - w["start_s"], 3)
        data.figures["unavailable_s"] = {"no-leader": unavailable.get("no-leader", 0.0),
                                         "no-acks-all": unavailable.get("no-acks-all", 0.0)}
    states = (t.events.where(F.col("kind").isin("partition-changed", "hwm-advanced", "became-leader",
                                                "became-follower", "truncated"))
              .join(bounds, "run_id")
              .select("run_id", "kind", "node", "topic", "partition", seconds("time_ns").alias("t"), "leader",
                      "isr", "elr", "replicas", "hwm", "reason", "from", "to")
              .orderBy("run_id", "t"))
    _by_run(states, out, "events", "timeline")
    faults = (t.faults.join(bounds, "run_id")
              .select("run_id", "do", "target", "resolved", "phase", seconds("time_ns").alias("t")).orderBy("run_id", "t"))
    _by_run(faults, out, "faults", "timeline")
    for data in out.values():
        data.timeline.setdefault("events", [])
        data.timeline.setdefault("faults", [])
