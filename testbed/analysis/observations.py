"""Frames derived from the run tables that several checks share: acknowledged sends, the
records every poll returned, each replica's committed prefix, and the final committed log
of each partition with whether the final read reached its end."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from testbed.analysis.ingest import Tables
from testbed.analysis.runinfo import ConfigTables

FINAL_READER = "final-reader"
PART = ["run_id", "topic", "partition"]


def broker_id(node: Column) -> Column:
    """`broker-2` -> 2 (events and final files name nodes, the controller names broker ids)."""
    return F.regexp_extract(node, r"^broker-(\d+)$", 1).cast("int")


def acknowledged(t: Tables) -> DataFrame:
    """Sends acknowledged with an offset (acks=0 acknowledges nothing)."""
    return (t.history.where((F.col("f") == "send") & (F.col("type") == "ok") & F.col("offset").isNotNull())
            .select(*PART, "process", "value", "acks", "offset", "time_ns"))


def poll_records(t: Tables) -> DataFrame:
    """One row per record a poll returned, in the order the process saw them."""
    return (t.history.where((F.col("f") == "poll") & (F.col("type") == "ok"))
            .select(*PART, "process", "time_ns", "seq", F.posexplode("records").alias("pos", "rec"))
            .select(*PART, "process", "time_ns", "seq", "pos",
                    F.col("rec")[0].cast("long").alias("offset"), F.col("rec")[1].alias("value")))


def replica_prefixes(t: Tables) -> DataFrame:
    """Each replica's records below its own final HWM: what that replica considers committed."""
    r = t.final_replicas.select("run_id", "node", "topic", "partition", "hwm", "is_leader")
    return (t.final_logs.join(r, ["run_id", "node", "topic", "partition"])
            .where(F.col("offset") < F.col("hwm"))
            .select(*PART, "node", "offset", "value", "is_leader"))


def final_leaders(t: Tables) -> DataFrame:
    """Partitions with exactly one leader at the end, with that leader's node and HWM."""
    leaders = t.final_replicas.where(F.col("is_leader"))
    single = leaders.groupBy(*PART).count().where(F.col("count") == 1).drop("count")
    return leaders.join(single, PART).select(*PART, F.col("node").alias("leader_node"),
                                             F.col("hwm").alias("leader_hwm"))


def committed_log(t: Tables, polls: DataFrame) -> DataFrame:
    """The final committed log: what the final read returned, together with the final
    leader's own file records below its HWM (the same log read two ways)."""
    read = polls.where(F.col("process") == FINAL_READER).select(*PART, "offset", "value")
    leaders = final_leaders(t)
    from_files = (t.final_logs.join(leaders, PART)
                  .where((F.col("node") == F.col("leader_node")) & (F.col("offset") < F.col("leader_hwm")))
                  .select(*PART, "offset", "value"))
    return read.unionByName(from_files).distinct()


def partitions(t: Tables, config: ConfigTables) -> DataFrame:
    """Every partition of every run: the topology's, and any the records name."""
    declared = (config.topics.select("run_id", "topic", F.explode(F.sequence(F.lit(0), F.col("partitions") - 1))
                                     .alias("partition")))
    seen = t.history.select(*PART).union(t.final_replicas.select(*PART))
    return declared.union(seen).where(F.col("partition").isNotNull()).distinct()


def read_coverage(t: Tables, config: ConfigTables, polls: DataFrame) -> DataFrame:
    """Per partition, whether the final read reached the end of the committed log: the final
    read returned every offset below the final leader's HWM, or the leader's own files hold
    every offset below it. Without a single final leader it did not."""
    leaders = final_leaders(t)
    read_end = (polls.where(F.col("process") == FINAL_READER).groupBy(*PART)
                .agg((F.max("offset") + 1).alias("read_end")))
    file_count = (t.final_logs.join(leaders, PART)
                  .where((F.col("node") == F.col("leader_node")) & (F.col("offset") < F.col("leader_hwm")))
                  .groupBy(*PART).agg(F.countDistinct("offset").alias("file_count")))
    return (partitions(t, config).join(leaders, PART, "left").join(read_end, PART, "left")
            .join(file_count, PART, "left")
            .select(*PART, "leader_hwm", F.coalesce(
                F.col("leader_hwm").isNotNull() & ((F.coalesce("read_end", F.lit(0)) >= F.col("leader_hwm"))
                                                   | (F.coalesce("file_count", F.lit(0)) >= F.col("leader_hwm"))),
                F.lit(False)).alias("reached_end")))


def run_start(t: Tables) -> DataFrame:
    """Per run, the first time anything was recorded: time 0 of every figure and sentence."""
    return (t.history.select("run_id", "time_ns").unionByName(t.events.select("run_id", "time_ns"))
            .groupBy("run_id").agg(F.min("time_ns").alias("t0")))


def seconds(col: str) -> Column:
    """A `time_ns` column as seconds since the run's start (needs the `t0` column)."""
    return F.round((F.col(col) - F.col("t0")) / 1e9, 3)
