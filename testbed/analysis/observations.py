"""Frames derived from the run tables that several checks share: acknowledged sends, the
records every poll returned, each replica's committed prefix, and the final committed log
of each partition with whether the final read reached its end."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.ingest import Tables
from testbed.analysis.runinfo import ConfigTables

FINAL_READER = "final-reader"
PART = ["run_id", "topic", "partition"]


def broker_id(node: Column) -> Column:
    """`broker-2` -> 2 (events and final files name nodes, the controller names broker ids)."""
    return F.regexp_extract(node, r"^broker-(\d+)$", 1).cast("int")


def partition_changes(t: Tables) -> DataFrame:
    """The controller's committed partition changes (`partition-changed` events)."""
    return t.events.where(F.col("kind") == "partition-changed")


def acknowledged(t: Tables, served: bool = False) -> DataFrame:
    """Sends acknowledged with an offset (acks=0 acknowledges nothing); with `served`, with
    the broker that acknowledged each (`node`: what `without_deleted` reads)."""
    return (t.history.where((F.col("f") == "send") & (F.col("type") == "ok") & F.col("offset").isNotNull())
            .select(*PART, "process", "value", "acks", "offset", "time_ns", *(["node"] if served else [])))


def _deleted(t: Tables) -> DataFrame:
    """(run_id, topic, time_ns) of every deletion a `delete-topic` fault made (R40), at the last
    time whose records went with it: the fault's end, or just before the topic was made again
    if that came first. A delete waits until no broker holds a replica (or its timeout), so
    its end may come well after a re-creation, and the records of the topic made meanwhile are
    owed (a delete that timed out after 15 s excused 820 acknowledgements of the new topic).
    The re-creation is the controller's first `create` change of the topic after the deletion
    committed (its `topic-deleted` event, or a broker's deletion of its replica if the
    controller's record is missing), else after the fault's start. A delete whose end says
    it failed (the controller's answer lost, no `deleted` in its effect) deleted its topic
    if the events show it deleted after the fault began (as `runinfo.topic_faults_done`
    takes it): its records were owed before, and a run whose delete "did not answer" while
    the controller committed it counted the deleted topic's writes as lost."""
    lines = t.faults.where(F.col("do") == "delete-topic")
    started = Window.partitionBy("run_id", "origin").orderBy("seq").rowsBetween(Window.unboundedPreceding, 0)
    claimed = F.get_json_object("effect", "$.deleted")
    faults = (lines.withColumn("start_ns", F.last(F.when(F.col("phase") == "start", F.col("time_ns")), True)
                               .over(started))
              .where(F.col("phase") == "end")
              .select("run_id", F.coalesce(claimed, F.get_json_object("params", "$.topic")).alias("topic"),
                      claimed.isNotNull().alias("claimed"),
                      F.coalesce("start_ns", "time_ns").alias("start_ns"), F.col("time_ns").alias("end_ns"))
              .where(F.col("topic").isNotNull()))
    commits = (t.events.where((F.col("kind") == "topic-deleted")
                              | ((F.col("kind") == "replica-deleted") & (F.col("reason") == "topic-deleted")))
               .select("run_id", "topic", F.col("time_ns").alias("gone_ns")))
    creates = (partition_changes(t).where(F.col("reason") == "create")
               .select("run_id", "topic", F.col("time_ns").alias("made_ns")))
    key = ["run_id", "topic", "start_ns", "end_ns"]
    committed = (faults.join(commits, ["run_id", "topic"], "left").groupBy(*key, "claimed")
                 .agg(F.min(F.when(F.col("gone_ns") >= F.col("start_ns"), F.col("gone_ns"))).alias("gone_ns"))
                 # a delete whose end says it failed (its answer lost) deleted if the events say so
                 .where(F.col("claimed") | F.col("gone_ns").isNotNull())
                 .withColumn("gone_ns", F.coalesce("gone_ns", "start_ns")).drop("claimed"))
    remade = (committed.join(creates, ["run_id", "topic"], "left").groupBy(*key)
              .agg(F.min(F.when(F.col("made_ns") > F.col("gone_ns"), F.col("made_ns"))).alias("made_ns")))
    # a record at the re-creation's own time is of the new topic: the bound stops 1 ns before it
    return remade.select("run_id", "topic", F.least("end_ns", F.col("made_ns") - 1).alias("time_ns"))


def _served_deleted(t: Tables) -> DataFrame:
    """(run_id, topic, key "node/partition", served_ns): for each broker that deleted its
    replica of a deleted topic (R40), the last time its answers may have come from a making
    of the topic that is gone: until it made a replica of the topic again after its last
    such deletion (its first `became-leader`/`became-follower` since), for ever if it never
    did. A broker answers from the replica it holds, and it holds one making at a time, so
    an acknowledgement or a read it served until then went with a deleted topic, even
    after the name was made again elsewhere (a leader cut off from the controller serves
    its deleted topic until it hears)."""
    key = ["run_id", "node", "topic", "partition"]
    gone = (t.events.where((F.col("kind") == "replica-deleted") & (F.col("reason") == "topic-deleted"))
            .groupBy(*key).agg(F.max("time_ns").alias("gone_ns")))
    made = (t.events.where(F.col("kind").isin("became-leader", "became-follower"))
            .select(*key, F.col("time_ns").alias("made_ns")))
    return (gone.join(made, key, "left").groupBy(*key, "gone_ns")
            .agg(F.min(F.when(F.col("made_ns") > F.col("gone_ns"), F.col("made_ns"))).alias("served_ns"))
            .select("run_id", "topic", _served_key().alias("key"),
                    F.coalesce(F.col("served_ns") - 1, F.lit(_FOREVER)).alias("served_ns")))


_FOREVER = (1 << 63) - 1


def _served_key() -> Column:
    """A broker's replica of a partition as `deletions`' map names it: "broker-2/0"."""
    return F.concat_ws("/", F.col("node"), F.col("partition").cast("string"))


def deletions(t: Tables) -> DataFrame:
    """(run_id, topic, deleted_ns, served_ns) for each topic a run deleted: `deleted_ns`, the
    last time whose records a `delete-topic` fault deleted (R40, `_deleted`), everything of
    that topic recorded until then being gone with it; `served_ns`, a map from "node/
    partition" to the last time that broker's answers for the partition were of a deleted
    making (`_served_deleted`), for the records that name the broker that served them."""
    served = (_served_deleted(t).groupBy("run_id", "topic")
              .agg(F.map_from_entries(F.collect_list(F.struct("key", "served_ns"))).alias("served_ns")))
    return (_deleted(t).groupBy("run_id", "topic").agg(F.max("time_ns").alias("deleted_ns"))
            .join(served, ["run_id", "topic"], "left"))


def gone() -> Column:
    """Whether a record (joined with `deletions` on run_id and topic) went with a
    deleted topic: recorded by its deletion, or served by a broker from a making since
    deleted (the `node` that history records name; a record without one, or a run recorded
    before they did, has the time alone)."""
    served = F.col("served_ns")[_served_key()]
    return (F.coalesce(F.col("time_ns") <= F.col("deleted_ns"), F.lit(False))
            | F.coalesce(F.col("time_ns") <= served, F.lit(False)))


def making(rows: DataFrame, t: Tables) -> DataFrame:
    """`rows` (PART and time_ns) with `making`: how many times their topic had been deleted
    (R40) before the row's time. A topic made again under a name is another topic (Kafka
    gives it another topic id): its partitions start again at leader epoch 0 and offset 0,
    so epochs and offsets compare only within one making."""
    times = _deleted(t).groupBy("run_id", "topic").agg(F.collect_list("time_ns").alias("_deleted"))
    return (rows.join(F.broadcast(times), ["run_id", "topic"], "left")
            .withColumn("making", F.coalesce(F.size(F.filter("_deleted", lambda d: d < F.col("time_ns"))), F.lit(0)))
            .drop("_deleted"))


def without_deleted(rows: DataFrame, t: Tables) -> DataFrame:
    """`rows` (acknowledgements, polled records, each `served`: PART, time_ns and node) less
    those of a topic that a `delete-topic` fault deleted after them (R40, `_deleted`: never
    those of the topic made again under the name), or that a broker served from a deleted
    making (`gone`): deleting a topic deletes its data, so those values are not owed at the
    end, and a topic made again under that name starts its offsets over (what was read of
    the old one says nothing about the new one)."""
    d = deletions(t)
    joined = rows.join(F.broadcast(d), ["run_id", "topic"], "left")
    return joined.where(~gone()).drop("deleted_ns", "served_ns", "node")


def poll_records(t: Tables, served: bool = False) -> DataFrame:
    """One row per record a poll returned, in the order the process saw them; with `served`,
    with the broker that answered the poll (`node`, as `acknowledged`)."""
    node = ["node"] if served else []
    return (t.history.where((F.col("f") == "poll") & (F.col("type") == "ok"))
            .select(*PART, "process", "time_ns", "seq", *node, F.posexplode("records").alias("pos", "rec"))
            .select(*PART, "process", "time_ns", "seq", "pos",
                    F.col("rec")[0].cast("long").alias("offset"), F.col("rec")[1].alias("value"), *node))


def replica_logs(t: Tables) -> DataFrame:
    """Every record of every final replica's files, with that replica's final HWM, whether it
    leads, and `prefix`: the record is below its HWM, so that replica considers it committed.
    The replica table is tiny, so it is broadcast and the logs are never shuffled for it."""
    r = t.final_replicas.select("run_id", "node", "topic", "partition", "hwm", "is_leader")
    return (t.final_logs.join(F.broadcast(r), ["run_id", "node", "topic", "partition"])
            .select(*PART, "node", "offset", "value", "hwm", "is_leader",
                    (F.col("offset") < F.col("hwm")).alias("prefix")))


def replica_prefixes(logs: DataFrame) -> DataFrame:
    """Each replica's records below its own final HWM: what that replica considers committed."""
    return logs.where(F.col("prefix")).select(*PART, "node", "offset", "value", "is_leader")


def final_leaders(t: Tables) -> DataFrame:
    """Partitions with exactly one leader at the end, with that leader's node and HWM."""
    leaders = t.final_replicas.where(F.col("is_leader"))
    single = leaders.groupBy(*PART).count().where(F.col("count") == 1).drop("count")
    return leaders.join(single, PART).select(*PART, F.col("node").alias("leader_node"),
                                             F.col("hwm").alias("leader_hwm"))


def leader_files(t: Tables, logs: DataFrame) -> DataFrame:
    """The single final leader's own file records below its HWM: the committed log as the
    leader's disk holds it."""
    return (logs.join(F.broadcast(final_leaders(t)), PART)
            .where((F.col("node") == F.col("leader_node")) & F.col("prefix"))
            .select(*PART, "offset", "value"))


def committed_log(t: Tables, polls: DataFrame, logs: DataFrame) -> DataFrame:
    """The final committed log: what the final read returned, together with the final
    leader's own file records below its HWM (the same log read two ways, so most records
    appear twice; every consumer of this frame is indifferent to repeats)."""
    read = polls.where(F.col("process") == FINAL_READER).select(*PART, "offset", "value")
    return read.unionByName(leader_files(t, logs))


def partitions(t: Tables, config: ConfigTables) -> DataFrame:
    """Every partition of every run: the topology's, and any the records name."""
    declared = (config.topics.select("run_id", "topic", F.explode(F.sequence(F.lit(0), F.col("partitions") - 1))
                                     .alias("partition")))
    seen = t.history.select(*PART).union(t.final_replicas.select(*PART))
    return declared.union(seen).where(F.col("partition").isNotNull()).distinct()


def read_coverage(t: Tables, config: ConfigTables, polls: DataFrame, logs: DataFrame) -> DataFrame:
    """Per partition, whether the final read reached the end of the committed log: the final
    read returned every offset below the final leader's HWM, or the leader's own files hold
    every offset below it (a log holds each offset once, so a count says it). Without a
    single final leader it did not."""
    leaders = final_leaders(t)
    read_end = (polls.where(F.col("process") == FINAL_READER).groupBy(*PART)
                .agg((F.max("offset") + 1).alias("read_end")))
    file_count = leader_files(t, logs).groupBy(*PART).agg(F.count("*").alias("file_count"))
    return (partitions(t, config).join(leaders, PART, "left").join(read_end, PART, "left")
            .join(file_count, PART, "left")
            .select(*PART, "leader_hwm", F.coalesce(
                F.col("leader_hwm").isNotNull() & ((F.coalesce("read_end", F.lit(0)) >= F.col("leader_hwm"))
                                                   | (F.coalesce("file_count", F.lit(0)) >= F.col("leader_hwm"))),
                F.lit(False)).alias("reached_end")))


def run_bounds(t: Tables, config: ConfigTables) -> DataFrame:
    """Per run, in one pass over the record files: time 0 of every figure and sentence (`t0`:
    the start of the workload, the time 0 of the fault schedule, as `summary.json` records
    it; else the first recorded time), the end of the workload (`t_end`: the last client
    operation before the final read; the shutdown after it is not unavailability) and the
    last recorded time of all (`t_last`)."""
    workload = F.when(F.col("process") != FINAL_READER, F.col("time_ns"))
    final = F.when(F.col("process") == FINAL_READER, F.col("time_ns"))
    none = F.lit(None).cast("long")
    times = (t.history.select("run_id", "time_ns", workload.alias("w"), final.alias("f"))
             .unionByName(t.events.select("run_id", "time_ns", none.alias("w"), none.alias("f")))
             .unionByName(t.faults.select("run_id", "time_ns", none.alias("w"), none.alias("f"))))
    bounds = (times.groupBy("run_id")
              .agg(F.min("time_ns").alias("first"), F.max("time_ns").alias("t_last"), F.max("w").alias("w"),
                   F.min("f").alias("f"))
              .join(config.runs.select("run_id", "workload_start_ns", "duration_ns"), "run_id", "left")
              .withColumn("t0", F.coalesce("workload_start_ns", "first")))
    # the workload's end: its last client operation, or its scheduled end if that is later and
    # the run recorded on until then (a run whose clients stopped early, or a hand-written one
    # whose last fault follows its last operation), never past the final read
    scheduled = F.when(F.col("duration_ns").isNotNull(),  # (least() passes over a null: no topology, no end)
                       F.least(F.col("t0") + F.col("duration_ns"), F.coalesce("f", "t_last")))
    return bounds.select("run_id", "t0", F.coalesce(F.greatest("w", scheduled), "t_last").alias("t_end"), "t_last")


def seconds(col: str) -> Column:
    """A `time_ns` column as seconds since the run's start (needs the `t0` column)."""
    return F.round((F.col(col) - F.col("t0")) / 1e9, 3)
