"""Checks over what clients observed (DESIGN section 8, Jepsen's meanings): lost writes,
unseen values, duplicates, inconsistent offsets, nonmonotonic polls, poll skips, committed
regressions, aborted reads and internal poll skips (nonmonotonic sends are in `values`). Each returns one row per anomaly, with `run_id` and the fields of
its example; the count of a check is its number of rows."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.ingest import Tables
from testbed.analysis.observations import PART, making


def missing_acknowledged(acked: DataFrame, committed: DataFrame, coverage: DataFrame) -> DataFrame:
    """Acknowledged values absent from the final committed log of their partition, one row per
    value, with `reached_end` telling lost (the final read reached the end) from unseen."""
    first_ack = (acked.groupBy(*PART, "value", "acks")
                 .agg(F.min("time_ns").alias("time_ns"), F.min("offset").alias("offset")))
    return (first_ack.join(committed.select(*PART, "value"), [*PART, "value"], "left_anti")
            .join(coverage.select(*PART, "reached_end"), PART, "left")
            .withColumn("reached_end", F.coalesce("reached_end", F.lit(False))))


def lost(missing: DataFrame, acks: str) -> DataFrame:
    return missing.where(F.col("reached_end") & (F.col("acks") == acks)).drop("reached_end")


def unseen(missing: DataFrame) -> DataFrame:
    """Not proven lost: the final read never reached the end of that partition's committed log."""
    return missing.where(~F.col("reached_end") & (F.col("acks") != "0")).drop("reached_end")


def duplicates(committed: DataFrame) -> DataFrame:
    """A value at more than one offset of the final committed logs (a retried send appended
    twice). A cheap min/max pass finds such values first; only they are gathered in full."""
    placed = F.struct("topic", "partition", "offset")
    several = (committed.groupBy("run_id", "value").agg(F.min(placed).alias("lo"), F.max(placed).alias("hi"))
               .where(F.col("lo") != F.col("hi")).select("run_id", "value"))
    return (committed.join(F.broadcast(several), ["run_id", "value"])
            .groupBy("run_id", "value")
            .agg(F.sort_array(F.collect_set(placed)).alias("at"))
            .select("run_id", "value", "at", F.col("at")[0]["topic"].alias("topic"),
                    F.col("at")[0]["partition"].alias("partition"), F.col("at")[0]["offset"].alias("offset")))


def observations(acked: DataFrame, polls: DataFrame, prefixes: DataFrame) -> DataFrame:
    """Every claim "offset o of P holds v" with its time: acks=all acknowledgements (acks=1
    promises nothing about the committed log, its losses are `lost_writes_acks1`), every
    record a poll returned, and every replica's committed prefix (time unknown: the end)."""
    return (acked.where(F.col("acks") == "all")
            .select(*PART, "offset", "value", F.concat(F.lit("ack:"), "process").alias("source"), "time_ns")
            .unionByName(polls.select(*PART, "offset", "value", F.col("process").alias("source"), "time_ns"))
            .unionByName(prefixes.select(*PART, "offset", "value", F.col("node").alias("source"),
                                         F.lit(None).cast("long").alias("time_ns"))))


def acked_past_the_end(unsure: DataFrame, committed: DataFrame, leaders: DataFrame) -> DataFrame:
    """Observations (as `observations` gives them) of acks=all acknowledgements at or past
    the end of the final committed log (the final leader's HWM, `leaders`: `final_leaders`)
    whose value the log holds elsewhere, each beside a valueless one from the log's end: the
    offset was committed and the log no longer has it (I1 wants the value at its
    acknowledged offset; a tester's ack moved past the end was flagged by nothing). A value
    the log does not hold at all is a lost write, counted there. `unsure` holds the
    acknowledgements `offsets.suspects` flagged `unsure_ack`, among which every such one is."""
    past = (unsure.where(F.col("acks") == "all")
            .join(F.broadcast(leaders.select(*PART, "leader_hwm")), PART)
            .where(F.col("offset") >= F.col("leader_hwm"))
            .join(committed.select(*PART, "value"), [*PART, "value"], "left_semi"))
    return (past.select(*PART, "offset", "value", F.concat(F.lit("ack:"), "process").alias("source"), "time_ns")
            .unionByName(past.select(*PART, "offset", F.lit(None).cast("string").alias("value"),
                                     F.format_string("final-log-end:%d", "leader_hwm").alias("source"),
                                     F.lit(None).cast("long").alias("time_ns"))))


def inconsistent_offsets(obs: DataFrame) -> DataFrame:
    """Offsets for which two observations disagree on the value (`obs` holds only the
    offsets `offsets.suspects` flagged `disagree`, and those of `acked_past_the_end`);
    `time_ns` is the first observation of that offset, after which attribution looks for
    what replaced it."""
    return (obs.groupBy(*PART, "offset")
            .agg(F.sort_array(F.collect_set("value")).alias("values"),
                 F.slice(F.sort_array(F.collect_set("source")), 1, 10).alias("sources"),
                 F.min("time_ns").alias("time_ns")))


def _step(prev: Column, offset: Column, within_poll: bool) -> Column:
    return F.struct(prev.alias("prev_offset"), offset.alias("offset"), F.lit(within_poll).alias("within_poll"))


def poll_steps(history: DataFrame, t: Tables | None = None) -> DataFrame:
    """Each step from one record to the next that a process saw on a partition, in the order
    it saw them, where the next offset was not the previous one plus one. Offsets are
    dense, so only such a step can go backwards or skip. Only the step between consecutive
    polls needs their order, so the window sorts polls, not records. Inside a poll, nearly
    every poll returns consecutive offsets: a record-by-record comparison with the poll's
    first offset (plain arithmetic) finds the few that do not, and only those are compared
    step by step with array functions (which Spark interprets, record by record). With the
    run tables `t` of runs that delete topics (R40), the polls of one making of a topic are
    compared only with each other: one made again starts its offsets again at 0."""
    key = [*PART, "process", "seq"]
    polls = (history.where((F.col("f") == "poll") & (F.col("type") == "ok") & (F.size("records") > 0))
             .select(*key, "time_ns", "records", F.col("records")[0][0].cast("long").alias("first"),
                     F.element_at("records", -1)[0].cast("long").alias("last")))
    uneven = (polls.select(*key, "first", F.posexplode("records").alias("pos", "rec"))
              .where(~F.col("rec")[0].cast("long").eqNullSafe(F.col("first") + F.col("pos")))
              .select(*key).distinct())
    offsets = F.transform("records", lambda r: r[0].cast("long"))
    inside = (polls.join(F.broadcast(uneven), key).select(*PART, "process", "time_ns", offsets.alias("o"))
              .select(*PART, "process", "time_ns", F.explode(F.filter(
                  F.zip_with(F.slice("o", 1, F.size("o") - 1), F.slice("o", 2, F.size("o") - 1),
                             lambda a, b: _step(a, b, True)),
                  lambda s: s["offset"] != s["prev_offset"] + 1)).alias("s")))
    order = Window.partitionBy("run_id", "process", "topic", "partition", "making").orderBy("seq")
    polls = making(polls, t) if t is not None else polls.withColumn("making", F.lit(0))
    between = (polls.select(*PART, "process", "time_ns", "first", F.lag("last").over(order).alias("before"))
               .where(F.col("first") != F.col("before") + 1)
               .select(*PART, "process", "time_ns", _step(F.col("before"), F.col("first"), False).alias("s")))
    return (inside.unionByName(between)
            .select(*PART, "process", "time_ns", "s.prev_offset", "s.offset", "s.within_poll"))


def nonmonotonic_polls(steps: DataFrame) -> DataFrame:
    """A process that read an offset at or below one it had already read."""
    return steps.where(F.col("offset") <= F.col("prev_offset")).drop("within_poll")


def poll_skips(steps: DataFrame) -> DataFrame:
    """A process whose next record was not the next offset: offsets are dense (no compaction,
    no transaction markers), so every offset between was committed and skipped."""
    return (steps.where(F.col("offset") > F.col("prev_offset") + 1)
            .withColumn("skipped", F.col("offset") - F.col("prev_offset") - 1).drop("within_poll"))


def internal_poll_skips(steps: DataFrame) -> DataFrame:
    """A gap inside the records one poll returned (Jepsen's internal skip): the broker itself
    served a log with a hole, whatever the consumer did between polls."""
    return (steps.where(F.col("within_poll") & (F.col("offset") > F.col("prev_offset") + 1))
            .withColumn("skipped", F.col("offset") - F.col("prev_offset") - 1).drop("within_poll"))


def aborted_reads(history: DataFrame, polls: DataFrame, committed: DataFrame, failed: DataFrame) -> DataFrame:
    """Jepsen's G1a: a value whose every send attempt failed (`fail`: certainly not appended)
    that a consumer read or the final committed log holds. A value retried after a `fail` and
    then acknowledged, or left `info`, may be present by right, so only all-`fail` values count.
    `failed` (run_id, value) are the values with a failed attempt (`values.failed_values`):
    few, so every frame is cut to them before it is grouped or joined."""
    few = F.broadcast(failed)
    sends = (history.where((F.col("f") == "send") & F.col("type").isin("ok", "fail", "info"))
             .join(few, ["run_id", "value"]))
    every_failed = (sends.groupBy("run_id", "value")
                    .agg(F.min(F.when(F.col("type") == "fail", 1).otherwise(0)).alias("all_failed"),
                         F.first("process").alias("process"), F.min("time_ns").alias("failed_ns"))
                    .where(F.col("all_failed") == 1).drop("all_failed"))
    seen = (polls.join(few, ["run_id", "value"]).select(*PART, "offset", "value", F.col("process").alias("seen_by"))
            .unionByName(committed.join(few, ["run_id", "value"])
                         .select(*PART, "offset", "value", F.lit("final committed log").alias("seen_by"))))
    return (seen.join(every_failed, ["run_id", "value"])
            .groupBy(*PART, "value", "process")
            .agg(F.min("offset").alias("offset"), F.min("failed_ns").alias("time_ns"),
                 F.sort_array(F.collect_set("seen_by")).alias("seen_by")))


def committed_regressions(polls: DataFrame, committed: DataFrame) -> DataFrame:
    """A value a consumer read (so it was committed) that a later read, or the final committed
    log, shows replaced at that offset, or that the final committed log no longer reaches
    (`later_value` null: the log ends before it, I5). Both frames hold only the offsets
    `offsets.suspects` flagged `replaced`."""
    reads = polls.select(*PART, "offset", "value", "process", "time_ns")
    later = (polls.select(*PART, "offset", F.col("value").alias("later_value"), F.col("process").alias("seen_by"),
                          F.col("time_ns").alias("later_ns"))
             .unionByName(committed.select(*PART, "offset", F.col("value").alias("later_value"),
                                           F.lit("final committed log").alias("seen_by"),
                                           F.lit(None).cast("long").alias("later_ns"))))
    replaced = (reads.join(later, [*PART, "offset"])
                .where((F.col("later_value") != F.col("value"))
                       & (F.col("later_ns").isNull() | (F.col("later_ns") > F.col("time_ns")))))
    gone = (reads.join(committed.select(*PART, "offset"), [*PART, "offset"], "left_anti")
            .select(*reads.columns, F.lit(None).cast("string").alias("later_value"),
                    F.lit("final committed log, which ends before this offset").alias("seen_by"),
                    F.lit(None).cast("long").alias("later_ns")))
    joined = replaced.unionByName(gone)
    return (joined.groupBy(*PART, "offset", "value")
            .agg(F.min("time_ns").alias("time_ns"), F.first("process").alias("read_by"),
                 F.first("later_value").alias("later_value"), F.first("seen_by").alias("seen_by")))
