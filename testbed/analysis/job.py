"""The Spark job over the ingested tables: every check, with attribution of losses, the
convergence of each run and the figures; returns plain per-run data for the verdicts.

Each Spark action has a fixed cost (planning, scheduling, a scan of its inputs), so the job
makes few: one aggregation finds the offsets worth a closer look (`offsets.suspects`), one
job counts every check and gathers its examples, and checks that the first pass proved
empty (no lost write, no disagreement...) are neither planned nor attributed. A large input
is first narrowed to its suspect records (`scope`): rows, not actions, are its cost.
"""
from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field, fields, replace
from functools import reduce

from pyspark.sql import DataFrame, Row, Window
from pyspark.sql import functions as F

from testbed.analysis import checks_history as H
from testbed.analysis import checks_protocol as P
from testbed.analysis import figures
from testbed.analysis.attribution import attribute
from testbed.analysis.controllers import controller_elections
from testbed.analysis.faultspans import fault_spans
from testbed.analysis.held import hold
from testbed.analysis.ingest import Tables
from testbed.analysis.observations import (PART, committed_log, final_leaders, partitions, replica_prefixes, run_bounds,
                                          seconds)
from testbed.analysis.offsets import FLAGS, only, suspects
from testbed.analysis.runinfo import ConfigTables
from testbed.analysis.scope import Observed, Scope, narrowed, observe, whole
from testbed.analysis.values import VALUE, acknowledgements, nonmonotonic_sends, sends_backwards
from testbed.common.pools import thread_pool
from testbed.config.specs import CHECK_NAMES

MAX_EXAMPLES = 20
ATTRIBUTED = ("lost_writes", "lost_writes_acks1", "inconsistent_offsets")
#: the faults.jsonl actions that change the cluster's membership or topics (R38-R40), as the
#: report lists them; `rebalance` is the line pair a membership change writes for its plan
ADMIN_ACTIONS = ("add-broker", "remove-broker", "rebalance", "create-topic", "delete-topic", "add-partitions")


@dataclass
class RunData:
    """What the job found for one run, as plain data."""

    checks: dict[str, dict] = field(default_factory=dict)  # name -> {"count", "examples", ...}
    converged: bool = False
    #: what kept each partition that did not converge from it ("pay/1: no leader"), in order
    unconverged: list[str] = field(default_factory=list)
    #: replicas with records (LEO > 0 in final/replicas.jsonl) and none in final/logs.jsonl
    short_logs: int = 0
    #: replicas whose lines in final/logs.jsonl miss or repeat an offset between their first and last
    holed_logs: int = 0
    #: the lines of history.jsonl
    history_lines: int = 0
    figures: dict = field(default_factory=dict)
    timeline: dict = field(default_factory=dict)  # what the report plots


def check_frames(t: Tables, config: ConfigTables, o: Observed, scope: Scope, starts: DataFrame,
                 spans: DataFrame) -> dict[str, DataFrame]:
    """The checks of DESIGN section 8 that may find something, as frames of anomalies, losses
    with their causes, reading the rows `scope` names. A check left out found nothing:
    `offsets.suspects` proved that no offset could hold one of its anomalies, or the
    narrowing of a large input (`scope`) that no value could."""
    found = suspects(t, scope.acked, scope.polls, scope.logs).persist()
    # The flags are counted while the checks every run gets are planned: neither waits for the other.
    with thread_pool(1, "isrlab-flags") as pool:
        counted = pool.submit(lambda: found.agg(*[F.sum(F.col(f).cast("int")).alias(f) for f in FLAGS]).first())
        frames = _unflagged_frames(t, config, o, scope, starts, spans)
        columns_of(frames.values())  # each frame keeps its schema: `_run_checks` asks again for nothing
        any_ = {f: bool(counted.result()[f]) for f in FLAGS}
    near = committed_log(t, scope.polls, scope.logs)  # the committed log at every offset `found` names
    # The frames attribution starts from are held (computed now, both at once): `attribute`
    # joins its rows four times, and Spark Connect sends and analyses a plan as a tree, so
    # each use would carry the whole lineage of acked, polls, logs and committed again (see
    # `_run_checks`).
    pending = {}
    obs = []
    if any_["unsure_ack"]:
        unsure = only(scope.acked, found, "unsure_ack")
        committed = of_values(o.committed, unsure)
        pending["missing"] = H.missing_acknowledged(unsure, committed, scope.coverage)
        obs.append(H.acked_past_the_end(unsure, committed, final_leaders(t)))
    if any_["disagree"]:
        obs.append(H.observations(only(scope.acked, found, "disagree"), only(scope.polls, found, "disagree"),
                                  replica_prefixes(only(scope.logs, found, "disagree"))))
    if obs:
        pending["inconsistent"] = H.inconsistent_offsets(reduce(DataFrame.unionByName, obs))
    starting = hold(pending)
    if "missing" in starting:
        missing = starting["missing"]
        frames["lost_writes"] = attribute(H.lost(missing, "all"), t, spans, starts, config.runs, "lost")
        frames["lost_writes_acks1"] = attribute(H.lost(missing, "1"), t, spans, starts, config.runs, "lost")
        frames["unseen"] = H.unseen(missing)
    if "inconsistent" in starting:
        frames["inconsistent_offsets"] = attribute(starting["inconsistent"], t, spans, starts, config.runs,
                                                   "overwritten")
    if any_["replaced"]:
        frames["committed_regressions"] = H.committed_regressions(only(scope.polls, found, "replaced"),
                                                                  only(near, found, "replaced"))
    if any_["diverges"]:
        frames["log_divergence"] = P.log_divergence(t, only(scope.logs, found, "diverges"))
    assert set(frames) <= set(CHECK_NAMES), "every frame is a check of the topology schema"
    return frames


def _unflagged_frames(t: Tables, config: ConfigTables, o: Observed, scope: Scope, starts: DataFrame,
                      spans: DataFrame) -> dict[str, DataFrame]:
    """The checks that `offsets.suspects` does not gate, as frames (see `check_frames`)."""
    steps = H.poll_steps(t.history, t if config.deletes_topics else None)
    if scope.narrow:  # three checks read the steps: a large input's few, computed once
        steps = steps.localCheckpoint()
    resolve(scope.acked, scope.polls, scope.logs, o.committed, steps, starts, spans, config.topics)
    frames = {
        "nonmonotonic_polls": H.nonmonotonic_polls(steps),
        "poll_skips": H.poll_skips(steps),
        "internal_poll_skips": H.internal_poll_skips(steps),
        "leader_conflicts": P.leader_conflicts(t, config.deletes_topics),
        "unclean_exclusion": P.unclean_exclusion(t, config),
        "placement_violations": P.placement_violations(t, config),
        "elr_violations": P.elr_violations(t, config),
        "metadata_divergence": P.metadata_divergence(t),
    }
    back = sends_backwards(acknowledgements(scope.values, t.history, o.deleted, eager=scope.narrow))
    if scope.narrow:  # a large input: the window's few rows now, and no name lookup for none
        back = back.localCheckpoint()
    if not scope.narrow or not back.isEmpty():
        frames["nonmonotonic_sends"] = nonmonotonic_sends(back, t.history)
    if scope.may_duplicate:
        frames["duplicates"] = H.duplicates(of_values(o.committed, scope.duplicated))
    if scope.may_fail:
        frames["aborted_reads"] = H.aborted_reads(t.history, o.polls, o.committed, scope.failed)
    return frames


def of_values(rows: DataFrame, values: DataFrame | None) -> DataFrame:
    """The rows of `rows` whose (run_id, value) is one of `values` (few, broadcast); all of them
    for None."""
    if values is None:
        return rows
    return rows.join(F.broadcast(values.select(*VALUE).distinct()), VALUE)


def resolve(*frames: DataFrame) -> None:
    """Have the server resolve each frame's plan now, once: Spark Connect keeps the resolved
    plan of every frame a client asked about (`spark.connect.session.planCache.maxSize`),
    and every check built on these frames then finds them resolved instead of resolving the
    shared part of its plan again (about 2 s of a small run's checks)."""
    columns_of(frames)


#: How many plans the server is asked to resolve at once (`columns_of`)
RESOLVERS = 4


def columns_of(frames: Iterable[DataFrame]) -> list[list[str]]:
    """Each frame's columns. Each is a round trip in which the server resolves the frame's
    whole plan (20-300 ms for a check's); asked one after another, the checks' took 1.5 s
    of a small run's judgment, several at once a third of that."""
    with thread_pool(RESOLVERS, "isrlab-resolve") as pool:
        return list(pool.map(lambda frame: frame.columns, frames))


def _examples(name: str, frame: DataFrame, columns: list[str], starts: DataFrame) -> DataFrame:
    """(check, run_id, count, unattributed, examples as JSON) of one check, to be unioned
    with the others' into one job; `columns` are the frame's (`columns_of`)."""
    cols = [c for c in columns if c not in ("run_id", "attributed", "why")]
    if "time_ns" in columns:
        frame = frame.join(starts, "run_id", "left").withColumn("time_s", seconds("time_ns")).drop("t0")
        cols = [c for c in cols if c != "time_ns"] + ["time_s"]
    unattributed = (~F.col("attributed")).cast("int") if "attributed" in columns else F.lit(0)
    order = [F.col(c) for c in ("topic", "partition", "offset", "time_s") if c in cols]
    rank = Window.partitionBy("run_id").orderBy(*order, *[F.col(c).cast("string") for c in cols])
    return (frame.withColumn("n", F.row_number().over(rank))
            .groupBy("run_id")
            .agg(F.count("*").alias("count"), F.sum(unattributed).alias("unattributed"),
                 F.collect_list(F.when(F.col("n") <= MAX_EXAMPLES,
                                       F.struct("n", F.to_json(F.struct(*cols)).alias("example"))))
                 .alias("examples"))
            .select(F.lit(name).alias("check"), "*"))


def _collect_cause_groups(attributed: dict[str, DataFrame]) -> list[Row]:
    """The rows of every attributed check's cause groups (`_cause_groups`), in order."""
    groups = reduce(DataFrame.unionByName, [_cause_groups(n, f) for n, f in attributed.items()])
    return groups.orderBy("check", "run_id", "topic", "partition", F.col("offsets")[0][0]).collect()


def _cause_groups(name: str, frame: DataFrame) -> DataFrame:
    """(check, run_id, topic, partition, cause, count, offset ranges) of an attributed check:
    one row per election, truncation or crash that explains its anomalies on one partition,
    with the offsets as ranges of consecutive offsets (gaps and islands)."""
    g = ["run_id", "topic", "partition", "why"]
    island = F.col("offset") - F.row_number().over(Window.partitionBy(*g).orderBy("offset"))
    ranges = (frame.select(*g, "offset").distinct().withColumn("island", island)
              .groupBy(*g, "island").agg(F.min("offset").alias("lo"), F.max("offset").alias("hi"))
              .groupBy(*g).agg(F.sort_array(F.collect_list(F.array("lo", "hi"))).alias("offsets")))
    return (frame.groupBy(*g).agg(F.count("*").alias("count")).join(ranges, g)
            .select(F.lit(name).alias("check"), "run_id", "topic", "partition", F.col("why").alias("cause"),
                    "count", "offsets"))


def convergence(t: Tables, config: ConfigTables) -> DataFrame:
    """Per run: every partition of a topic that still exists has one leader and as many
    replicas as the controller last committed (the topic's RF unless a reassignment changed it),
    all at the same LEO, with the leader's HWM there (the state the supervisor waits for
    before the final read; a follower learns the last HWM on its next fetch, so its own may
    trail); how many replicas with records (LEO > 0) have none in the final logs (a final
    file that lost a broker's lines, which the checks would read as divergence), and how many
    miss or repeat an offset inside their lines (lines cut out: read as divergence too); and
    the lines of each run's history, to hold against the count its summary.json made."""
    reps = (t.final_replicas.groupBy(*PART)
            .agg(F.sum(F.col("is_leader").cast("int")).alias("leaders"), F.count("*").alias("n"),
                 F.min("leo").alias("lo"), F.max("leo").alias("hi"),
                 F.max(F.when(F.col("is_leader"), F.col("hwm"))).alias("leader_hwm")))
    # the replica set the controller last committed: a reassignment may have changed its size
    # (R35); changes of one batch share a time, and the partition epoch orders them
    replicas_now = (t.events.where(F.col("kind") == "partition-changed").groupBy(*PART)
                    .agg(F.max_by(F.size("replicas"), F.struct("time_ns", "partition_epoch")).alias("replicas_now")))
    set_ = F.coalesce("replicas_now", "rf")
    ok = ((F.col("leaders") == 1) & (F.col("n") == set_) & (F.col("lo") == F.col("hi"))
          & (F.col("leader_hwm") == F.col("hi")))
    # what kept a partition from converging, for the run's message (the first that holds)
    why = (F.when(F.col("n").isNull(), F.lit("no replica in final/replicas.jsonl"))
           .when(F.col("leaders") == 0, F.lit("no leader"))
           .when(F.col("leaders") > 1, F.format_string("%d leaders", "leaders"))
           .when(F.col("n") != set_, F.format_string("%d replicas where the controller set %d", "n", set_))
           .when(F.col("lo") != F.col("hi"), F.format_string("replicas at LEOs %d to %d", "lo", "hi"))
           .otherwise(F.format_string("the leader's HWM %d below the LEO %d", "leader_hwm", "hi")))
    failed = F.when(~F.coalesce(ok, F.lit(False)), F.struct("topic", "partition", why.alias("why")))
    topics = config.topics.select("run_id", "topic", "rf", "gone", F.col("partitions").alias("n_partitions"))
    replica = [*PART, "node"]
    held = t.final_logs.groupBy(*replica).agg(F.count("*").alias("held"), F.min("offset").alias("first"),
                                              F.max("offset").alias("last"))
    short = (t.final_replicas.join(held, replica, "left").where(F.col("held").isNull() & (F.col("leo") > 0))
             .groupBy("run_id").agg(F.count("*").alias("short_logs")))
    # a log read from its files holds each offset once, from its first to its last
    holed = (held.where(F.col("held") != F.col("last") - F.col("first") + 1)
             .groupBy("run_id").agg(F.count("*").alias("holed_logs")))
    lines = t.history.groupBy("run_id").agg(F.count("*").alias("history_lines"))
    states = (partitions(t, config).join(topics, ["run_id", "topic"], "left")
              .where(~F.coalesce("gone", F.lit(False)))  # a topic deleted for good has no final state (R40)
              # a partition of an earlier making of a topic made again with fewer is gone with it
              .where(F.col("n_partitions").isNull() | (F.col("partition") < F.col("n_partitions")))
              .join(reps, PART, "left").join(replicas_now, PART, "left")
              .groupBy("run_id").agg(F.min(F.coalesce(ok, F.lit(False)).cast("int")).alias("converged"),
                                     F.transform(F.sort_array(F.collect_list(failed)),
                                                 lambda p: F.format_string("%s/%d: %s", p["topic"], p["partition"],
                                                                           p["why"])).alias("unconverged")))
    # a run whose every topic was deleted for good has no partition left: converged, with nothing
    # to replicate (without its row, it read as unconverged, with an empty history)
    return (lines.join(states, "run_id", "left")
            .select("run_id", "history_lines", F.coalesce("converged", F.lit(1)).alias("converged"),
                    F.coalesce("unconverged", F.array().cast("array<string>")).alias("unconverged"))
            .join(short, "run_id", "left").join(holed, "run_id", "left"))


def run_job(t: Tables, config: ConfigTables, run_ids: list[str], small: bool = False,
            narrow: bool | None = None) -> dict[str, RunData]:
    """Every check, the convergence and the figures of `run_ids`. A `small` input is held
    whole, and then what its checks share (`_held_tables`, `_held_shared`): the session
    releases a held frame when its last reference here is gone. A large one caches the small
    tables that every check reads, drops that cache at the job's end, and is first narrowed
    to its suspect records (`scope.narrowed`; `narrow` chooses whatever the size, for the
    tests that hold both ways to one verdict)."""
    out = {rid: RunData() for rid in run_ids}
    narrow = not small if narrow is None else narrow
    spark = t.events.sparkSession
    try:
        if small:
            t = _held_tables(t)
        else:
            t = replace(t, events=t.events.persist(), final_replicas=t.final_replicas.persist(),
                        faults=t.faults.persist())
        bounds = run_bounds(t, config)
        spans = fault_spans(t, bounds)
        o = observe(t, config)
        if small:
            bounds, spans, o, scope = _held_shared(t, config, bounds, spans, o, narrow)
        else:
            bounds, spans = bounds.persist(), spans.persist()
            scope = narrowed(t, o) if narrow else whole(t, config, o)
        # The figures, the convergence and the checks fill different fields of `out`; the
        # first two run while the checks' are planned and run, so the driver's share of each
        # overlaps the others' (the convergence after the checks was 0.4-0.7 s of a small
        # judgment's path).
        with thread_pool(2, "isrlab-figures") as pool:
            figures_done = pool.submit(_collect_figures, t, config, scope, bounds, spans, out)
            converged = pool.submit(lambda: convergence(t, config).collect())
            _run_checks(t, config, o, scope, bounds, spans, out)
            for row in converged.result():
                out[row["run_id"]].converged = bool(row["converged"])
                out[row["run_id"]].unconverged = list(row["unconverged"] or [])
                out[row["run_id"]].short_logs = row["short_logs"] or 0
                out[row["run_id"]].holed_logs = row["holed_logs"] or 0
                out[row["run_id"]].history_lines = row["history_lines"] or 0
            figures_done.result()
    finally:
        spark.catalog.clearCache()
    return out


def _held_tables(t: Tables) -> Tables:
    """A small input's run tables, each in one partition, held by the session (`held`): its
    plans then read computed rows in one task per table, instead of a task per few Parquet
    files (a tree of 21 small runs ran 465 tasks in the checks' one action) and the scan's
    plan in every request."""
    return replace(t, **hold({f.name: getattr(t, f.name).coalesce(1) for f in fields(t)}))


def _held_shared(t: Tables, config: ConfigTables, bounds: DataFrame, spans: DataFrame, o: Observed,
                 narrow: bool) -> tuple[DataFrame, DataFrame, Observed, Scope]:
    """What a small input's checks and figures share, held in one round (`held.hold`): the
    bounds, the spans, the observations and, for every row's scope, the values, their
    failures and the read coverage. Built on the held tables, each is a few rows whose plan
    every check carried again (rule time of a warm judgment of the quickstart's run: 7.3 s
    without the holds, 3.4 s with them)."""
    scope = None if narrow else whole(t, config, o)
    shared = {"bounds": bounds, "spans": spans, "acked": o.acked, "polls": o.polls, "logs": o.logs,
              "committed": o.committed}
    if o.deleted is not None:
        shared["deleted"] = o.deleted
    if scope is not None:
        shared |= {"values": scope.values, "failed": scope.failed, "coverage": scope.coverage}
    h = hold(shared)
    o = Observed(h["acked"], h["polls"], h["logs"], h["committed"], h.get("deleted"))
    if scope is None:
        return h["bounds"], h["spans"], o, narrowed(t, o)
    scope = replace(scope, acked=o.acked, polls=o.polls, logs=o.logs, values=h["values"], failed=h["failed"],
                    coverage=h["coverage"])
    return h["bounds"], h["spans"], o, scope


def _run_checks(t: Tables, config: ConfigTables, o: Observed, scope: Scope, bounds: DataFrame,
                spans: DataFrame, out: dict[str, RunData]) -> None:
    starts = bounds.select("run_id", "t0")
    checks = check_frames(t, config, o, scope, starts, spans)
    # An attributed check is read twice (its examples, its cause groups) and its plan is the
    # largest of all: analysing it took 1.5-4 s per use on a run with losses. Checkpointed,
    # each use reads a small computed table (a run of 835 lost writes judged in 22-25 s warm
    # instead of 33-58 s, with `check_frames`' checkpoints).
    attributed = hold({name: checks[name] for name in ATTRIBUTED if name in checks})
    inputs = {name: attributed.get(name, frame) for name, frame in checks.items()}
    frames = [_examples(name, frame, columns, starts)
              for (name, frame), columns in zip(inputs.items(), columns_of(inputs.values()))]
    # The cause groups' action runs beside the examples' (a run with losses: 1-1.5 s each)
    with thread_pool(1, "isrlab-causes") as pool:
        causes = pool.submit(_collect_cause_groups, attributed) if attributed else None
        counted_rows = reduce(DataFrame.unionByName, frames).collect()
        grouped = causes.result() if causes is not None else []
    for row in counted_rows:
        name = row["check"]
        examples = [json.loads(e["example"]) for e in sorted(row["examples"], key=lambda e: e["n"])]
        entry = {"count": row["count"], "examples": examples}
        if name in ATTRIBUTED:
            entry["unattributed"] = row["unattributed"]
        out[row["run_id"]].checks[name] = entry
    for row in grouped:
        group = {k: row[k] for k in ("topic", "partition", "count", "cause")}
        group["offsets"] = [list(r) for r in row["offsets"]]
        out[row["run_id"]].checks[row["check"]].setdefault("causes", []).append(group)
    for data in out.values():
        for name in CHECK_NAMES:
            data.checks.setdefault(name, {"count": 0, "examples": []} | (
                {"unattributed": 0} if name in ATTRIBUTED else {}))
            if name in ATTRIBUTED:
                data.checks[name].setdefault("causes", [])


def _collect_figures(t: Tables, config: ConfigTables, scope: Scope, bounds: DataFrame, spans: DataFrame,
                     out: dict[str, RunData]) -> None:
    """Every figure and timeline of every run in one action: each frame's rows as JSON, in
    one union (a collect per frame cost about as much again in planning and scheduling),
    put in order here."""
    states = (t.events.where(F.col("kind").isin("partition-changed", "hwm-advanced", "became-leader",
                                                "became-follower", "truncated"))
              .join(bounds, "run_id")
              .select("run_id", "kind", "node", "topic", "partition", seconds("time_ns").alias("t"), "leader",
                      "isr", "elr", "replicas", "hwm", "reason", "from", "to", "time_ns", "seq"))
    bands = (spans.join(bounds, "run_id")
             .select("run_id", "do", "target", "resolved", "shape", "groups", seconds("start_ns").alias("start"),
                     seconds("end_ns").alias("end"), "undone"))
    admin = (t.faults.where(F.col("do").isin(*ADMIN_ACTIONS) & (F.col("phase") == "end")).join(bounds, "run_id")
             .select("run_id", "seq", "do", "target", seconds("time_ns").alias("t"), "params", "effect", "origin"))
    elected = (t.events.where(F.col("kind") == "controller-elected").join(bounds, "run_id")
               .select("run_id", seconds("time_ns").alias("t"), "node", "term", "time_ns"))
    parts = {("figures", "availability"): (figures.availability_windows(t, config, bounds, spans),
                                           ("topic", "partition", "start_s")),
             ("figures", "faults"): (figures.fault_recovery(
                 t, acknowledgements(scope.values, t.history, eager=scope.narrow), spans, bounds), ("at_s",)),
             ("figures", "series"): (figures.throughput_latency(t, scope.values, bounds, scope.narrow),
                                     ("f", "second")),
             # by the time itself, not `t` to the millisecond: two changes 19 us apart came back
             # in the wrong order and the overview named the fenced leader (trial31)
             ("timeline", "events"): (states, ("time_ns", "seq")),
             ("timeline", "faults"): (bands, ("start",)),
             ("timeline", "admin"): (admin, ("seq",)),  # in the order they were written
             ("timeline", "controllers"): (elected, ("time_ns", "term"))}
    rows = reduce(DataFrame.unionByName, [
        frame.select("run_id", F.lit(into).alias("into"), F.lit(key).alias("key"),
                     F.to_json(F.struct("*"), {"ignoreNullFields": "false"}).alias("row"))
        for (into, key), (frame, _) in parts.items()]).collect()
    for data in out.values():
        for into, key in parts:
            getattr(data, into)[key] = []
    for row in rows:
        entry = json.loads(row["row"])
        del entry["run_id"]
        getattr(out[row["run_id"]], row["into"])[row["key"]].append(entry)
    for data in out.values():
        for (into, key), (_, order) in parts.items():
            getattr(data, into)[key].sort(key=lambda e, order=order: [(e[k] is None, e[k]) for k in order])
        unavailable: dict[str, float] = {}
        for w in data.figures["availability"]:
            unavailable[w["kind"]] = round(unavailable.get(w["kind"], 0.0) + w["end_s"] - w["start_s"], 3)
        data.figures["unavailable_s"] = {"no-leader": unavailable.get("no-leader", 0.0),
                                         "no-acks-all": unavailable.get("no-acks-all", 0.0)}
        data.figures["controller_elections"] = controller_elections(data.timeline.pop("controllers"),
                                                                    data.figures["faults"])
