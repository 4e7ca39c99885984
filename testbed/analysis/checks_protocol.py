"""Protocol invariants (PROTOCOL.md I2-I9) from `events.jsonl`, `final/` and the topology.
Each returns one row per violation with `run_id` and the fields of its example."""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.ingest import Tables
from testbed.analysis.observations import PART, broker_id, making, partition_changes
from testbed.analysis.runinfo import ConfigTables

#: `partition-changed` events write -1 as the leader of a leaderless partition (DESIGN 7)
NO_LEADER = -1


def log_divergence(t: Tables, logs: DataFrame) -> DataFrame:
    """I3 and I2 on the final replicas: two replicas that differ below the smaller of their
    HWMs, or a final leader missing a record another replica holds as committed (for a pair
    with the leader the bound is the other replica's HWM). One row per diverging pair.
    `logs` holds the replicas' records at the offsets `offsets.suspects` flagged `diverges`:
    where every replica holds the same value no pair can differ."""
    r = t.final_replicas.select(*PART, "node", "hwm", "is_leader")
    a, b = r.alias("a"), r.alias("b")
    pairs = (a.join(b, [F.col(f"a.{c}") == F.col(f"b.{c}") for c in PART] + [F.col("a.node") < F.col("b.node")])
             .select(*[F.col(f"a.{c}").alias(c) for c in PART], F.col("a.node").alias("node_a"),
                     F.col("b.node").alias("node_b"),
                     F.when(F.col("a.is_leader"), F.col("b.hwm")).when(F.col("b.is_leader"), F.col("a.hwm"))
                     .otherwise(F.least("a.hwm", "b.hwm")).alias("bound")))
    logs = logs.select(*PART, "node", "offset", "value")
    side_a = (pairs.join(logs.withColumnRenamed("node", "node_a").withColumnRenamed("value", "value_a"),
                         [*PART, "node_a"]).where(F.col("offset") < F.col("bound")))
    side_b = (pairs.join(logs.withColumnRenamed("node", "node_b").withColumnRenamed("value", "value_b"),
                         [*PART, "node_b"]).where(F.col("offset") < F.col("bound")))
    keys = [*PART, "node_a", "node_b", "bound", "offset"]
    both = side_a.select(*keys, "value_a").join(side_b.select(*keys, "value_b"), keys, "full_outer")
    differing = both.where(~F.col("value_a").eqNullSafe(F.col("value_b")))
    return (differing.groupBy(*PART, "node_a", "node_b", "bound")
            .agg(F.min(F.struct("offset", "value_a", "value_b")).alias("first"), F.count("*").alias("offsets"))
            .select(*PART, "node_a", "node_b", "bound", F.col("first.offset").alias("offset"),
                    F.col("first.value_a").alias("value_a"), F.col("first.value_b").alias("value_b"), "offsets"))


def leader_conflicts(t: Tables, deletes_topics: bool = False) -> DataFrame:
    """I4: two brokers leading one partition in one leader epoch, by the brokers' own
    `became-leader` events or by the controller's `partition-changed` records; within one
    making of a topic (a topic deleted and made again starts again at epoch 0)."""
    by_broker = (t.events.where(F.col("kind") == "became-leader")
                 .select(*PART, "time_ns", "leader_epoch", broker_id(F.col("node")).alias("leader")))
    by_controller = (partition_changes(t).where(F.col("leader").isNotNull() & (F.col("leader") != NO_LEADER))
                     .select(*PART, "time_ns", "leader_epoch", "leader"))
    leaders = by_broker.unionByName(by_controller)
    key = [*PART, "leader_epoch"]
    if deletes_topics:
        leaders, key = making(leaders, t), [*key, "making"]
    return (leaders.groupBy(*key)
            .agg(F.sort_array(F.collect_set("leader")).alias("leaders"))
            .where(F.size("leaders") > 1).drop("making"))


def elr_violations(t: Tables, config: ConfigTables) -> DataFrame:
    """I6 on every committed partition change: ELR within the replicas, disjoint from the
    ISR, and empty while |ISR| >= MinISR."""
    c = partition_changes(t).join(config.topics.select("run_id", "topic", "min_isr"), ["run_id", "topic"])
    outside = F.size(F.array_except("elr", "replicas")) > 0
    inside = F.arrays_overlap("elr", "isr")
    needless = (F.size("elr") > 0) & (F.size("isr") >= F.col("min_isr"))
    return (c.where(outside | inside | needless)
            .select(*PART, "time_ns", "leader_epoch", "partition_epoch", "isr", "elr", "replicas", "min_isr", "reason",
                    F.concat_ws(", ", F.when(outside, F.lit("ELR member outside the replicas")),
                                F.when(inside, F.lit("ELR member inside the ISR")),
                                F.when(needless, F.lit("non-empty ELR with |ISR| >= MinISR"))).alias("breaks")))


def placement_violations(t: Tables, config: ConfigTables) -> DataFrame:
    """I9: a replica set (any the partition had) spanning fewer racks than min(RF, racks). A
    broker's rack is the topology's, or the one it registered with (a broker the Python API
    added is in no schedule: it counted as rackless, a false violation). While a reassignment
    moves replicas (R35) the set judged is its target: the replicas less those `removing`
    (the target and the leaving replicas together are no placement: a move within a rack of
    an RF 2 topic over three racks read as three replicas on two racks).

    `racks` are those the placement had when the set was made (`_racks_then`): after the only
    broker of a rack is removed (R39), every set spans one rack fewer, and counting the
    topology's racks flagged every partition the removal moved. A set is judged when its
    members change (a new order of the same brokers is no new placement), and only if it
    spans fewer racks than the set it replaced, or is a partition's first: a rebalance that
    moves one replica of a set placed on two racks while the third rack's broker was being
    removed keeps its spread (R38) once a broker of that rack is added, and cannot mend it
    with one move."""
    placed = F.array_except("replicas", F.coalesce("removing", F.array().cast("array<int>")))
    changes = (partition_changes(t).groupBy(*PART, "partition_epoch", placed.alias("replicas"))
               .agg(F.min("time_ns").alias("made_ns")))  # each controller writes the change: the first is its commit
    members = F.array_sort("replicas")
    made = (changes.withColumn("before", F.lag("replicas").over(Window.partitionBy(*PART)
                                                                 .orderBy("made_ns", "partition_epoch")))
            .where(F.col("before").isNull() | (F.array_sort("before") != members)))
    registered = (t.events.where((F.col("kind") == "registered") & F.col("rack").isNotNull())
                  .select("run_id", "broker_id", "rack"))
    racks = (config.brokers.select("run_id", "broker_id", "rack").unionByName(registered)
             .dropDuplicates(["run_id", "broker_id"]))
    rack_of = (racks.groupBy("run_id").agg(F.map_from_entries(F.collect_list(F.struct("broker_id", "rack")))
                                           .alias("rack_of")))

    def spanned(replicas: str) -> Column:
        return F.size(F.array_distinct(F.filter(F.transform(replicas, lambda b: F.col("rack_of")[b]),
                                                lambda r: r.isNotNull())))
    short = (made.join(rack_of, "run_id", "left").join(config.runs.select("run_id", "n_racks"), "run_id")
             .select(*PART, "replicas", "made_ns", "n_racks", spanned("replicas").alias("racks_spanned"),
                     F.when(F.col("before").isNotNull(), spanned("before")).alias("spanned_before"))
             .where((F.col("racks_spanned") < F.least(F.size("replicas"), F.col("n_racks")))
                    & (F.col("spanned_before").isNull() | (F.col("racks_spanned") < F.col("spanned_before")))))
    return (short.join(_racks_then(t, config, racks, short), [*PART, "replicas", "made_ns"], "left")
            .withColumn("racks", F.least("n_racks", F.coalesce("racks_then", F.lit(0))))
            .where(F.col("racks_spanned") < F.least(F.size("replicas"), F.col("racks")))
            .groupBy(*PART).agg(F.first("replicas").alias("replicas"), F.min("racks_spanned").alias("racks_spanned"),
                                F.first("racks").alias("racks")))


def _racks_then(t: Tables, config: ConfigTables, racks: DataFrame, short: DataFrame) -> DataFrame:
    """(PART, replicas, made_ns, racks_then): the racks of the brokers a set made at `made_ns`
    could be placed on: the topology's brokers, a broker added since it registered, less each
    broker a `remove-broker` was taking out then (R39: from the removal's start, for good once
    it was removed; a removal refused gave its broker back at its end). A broker that is down
    is still the cluster's: a set placed while a rack's every broker was down (R40 places on
    the brokers that can lead) counts, as its partition then loses more to a rack outage.
    Only for the sets that span too few of the topology's racks, which a clean run has none of."""
    joined = (t.events.where(F.col("kind") == "registered").groupBy("run_id", "broker_id")
              .agg(F.min("time_ns").alias("joined_ns")))
    topology = config.brokers.where(~F.col("added")).select("run_id", "broker_id", F.lit(True).alias("from_start"))
    members = (racks.join(topology, ["run_id", "broker_id"], "left").join(joined, ["run_id", "broker_id"], "left")
               .select("run_id", "broker_id", "rack",
                       F.when(F.col("from_start").isNull(), F.col("joined_ns")).alias("joined_ns")))
    # one removal per origin: its start line, and its end line unless the supervisor was killed
    # meanwhile (then it takes its broker out for good)
    end = F.col("phase") == "end"
    out = (t.faults.where((F.col("do") == "remove-broker") & F.col("target").startswith("broker:"))
           .groupBy("run_id", "origin", "target")
           .agg(F.min("time_ns").alias("from_ns"), F.max(F.when(end, F.col("time_ns"))).alias("end_ns"),
                F.max(end & F.get_json_object("effect", "$.removed").isNotNull()).alias("removed"))
           .select(F.col("run_id").alias("out_run"),
                   F.expr("try_cast(substring(target, 8) as int)").alias("out_id"), "from_ns",
                   F.when(~F.col("removed"), F.col("end_ns")).alias("until_ns")))
    cands = short.select(*PART, "replicas", "made_ns").distinct()
    live = (cands.join(members, "run_id")
            .where(F.col("joined_ns").isNull() | (F.col("joined_ns") <= F.col("made_ns")))
            .join(out, (F.col("run_id") == F.col("out_run")) & (F.col("broker_id") == F.col("out_id"))
                  & (F.col("from_ns") <= F.col("made_ns"))
                  & (F.col("until_ns").isNull() | (F.col("made_ns") < F.col("until_ns"))), "left_anti"))
    return live.groupBy(*PART, "replicas", "made_ns").agg(F.countDistinct("rack").alias("racks_then"))


def unclean_exclusion(t: Tables, config: ConfigTables) -> DataFrame:
    """I7 (R29, with elr and kraft fencing): after a broker registers unclean, the first
    committed change that makes it leader, ISR or ELR member of a partition must be the
    leader adding it back once caught up (`isr-expand`) or an explicit unclean choice; and a
    partition where it was a member when it registered must see a change (the exclusion) before
    its next registration. One row per (partition, unclean registration) broken; a membership
    kept from before the registration shows at the registration's time, with the change that
    gave it.

    The controller writes a registration and the exclusions it causes in one batch, so they
    may share a time: ties go by line order (one controller writes both, in commit order; a
    fence committed just before the registration in that batch is not after it), and changes
    that tie go by partition epoch."""
    regs = (t.events.where(F.col("kind") == "registered")
            .join(config.runs.where(F.col("elr") & F.col("kraft")).select("run_id"), "run_id")
            .withColumn("until", F.lead("time_ns").over(Window.partitionBy("run_id", "broker_id")
                                                        .orderBy("time_ns", "seq")))
            .where(~F.col("clean"))
            .select("run_id", "broker_id", F.col("time_ns").alias("registered_ns"), F.col("seq").alias("reg_seq"),
                    "until"))
    member = (F.array_contains("isr", F.col("broker_id")) | F.array_contains("elr", F.col("broker_id"))
              | (F.col("leader") == F.col("broker_id")))
    changes = partition_changes(t).select(*PART, "time_ns", "seq", "partition_epoch", "leader", "leader_epoch", "isr",
                                          "elr", "reason")
    joined = regs.join(changes, "run_id")
    after = (F.col("time_ns") > F.col("registered_ns")) | ((F.col("time_ns") == F.col("registered_ns"))
                                                           & (F.col("seq") > F.col("reg_seq")))
    within = joined.where(after & (F.col("until").isNull() | (F.col("time_ns") < F.col("until"))))
    reg = [*PART, "broker_id", "registered_ns"]
    first = Window.partitionBy(*reg).orderBy("time_ns", "partition_epoch")
    fields = ["leader", "leader_epoch", "isr", "elr", "reason"]
    readmitted = (within.where(member).withColumn("n", F.row_number().over(first)).where(F.col("n") == 1)
                  # a partition created after the registration starts empty on every replica: nothing
                  # to be unclean about
                  .where(~F.col("reason").isin("isr-expand", "unclean-election", "unclean-recovery", "create"))
                  .select(*reg, "time_ns", *fields))
    last = Window.partitionBy(*reg).orderBy(F.desc("time_ns"), F.desc("partition_epoch"))
    deleted = (t.events.where(F.col("kind") == "topic-deleted")
               .select(F.col("run_id").alias("d_run"), F.col("topic").alias("d_topic"), F.col("time_ns").alias("d_ns")))
    since = ((F.col("d_run") == F.col("run_id")) & (F.col("d_topic") == F.col("topic"))
             & F.col("d_ns").between(F.col("time_ns"), F.col("registered_ns")))
    kept = (joined.where(~after).withColumn("n", F.row_number().over(last)).where((F.col("n") == 1) & member)
            .join(deleted, since, "left_anti")  # a topic deleted since holds no replica to exclude (R40)
            .join(within.select(*reg).distinct(), reg, "left_anti")
            .select(*reg, F.col("registered_ns").alias("time_ns"), *fields))
    return readmitted.unionByName(kept)


def metadata_divergence(t: Tables) -> DataFrame:
    """I8 and Raft election safety from the records: two controllers elected in one term, and
    a broker whose metadata log is not a prefix of the committed one, seen as a different
    digest at an offset where both recorded theirs (every DIGEST_INTERVAL records)."""
    leaders = (t.events.where(F.col("kind") == "controller-elected").groupBy("run_id", "term")
               .agg(F.sort_array(F.collect_set("controller_id")).alias("controllers"))
               .where(F.size("controllers") > 1)
               .select("run_id", F.lit("two controllers elected in one term").alias("problem"),
                       F.format_string("term %d: controllers %s", "term",
                                       F.concat_ws(", ", F.col("controllers").cast("array<string>"))).alias("detail")))
    digests = (t.events.where(F.col("kind") == "metadata-committed")
               .groupBy("run_id", "offset").agg(F.min("digest").alias("committed"),
                                                F.countDistinct("digest").alias("versions")))
    committed = digests.select("run_id", "offset", "committed")
    controllers = (digests.where(F.col("versions") > 1).groupBy("run_id").agg(F.min("offset").alias("offset"))
                   .select("run_id", F.lit("controllers committed different metadata logs").alias("problem"),
                           F.format_string("their digests differ at offset %d", "offset").alias("detail")))
    applied = (t.events.where(F.col("kind") == "metadata-applied")
               .select("run_id", "node", "offset", F.col("digest").alias("applied")))
    brokers = (applied.join(committed, ["run_id", "offset"])
               .where(F.col("applied") != F.col("committed"))
               .groupBy("run_id", "node").agg(F.min("offset").alias("offset"))
               .select("run_id", F.lit("a broker's metadata log is not a prefix of the committed one").alias("problem"),
                       F.format_string("%s diverges by offset %d", "node", "offset").alias("detail")))
    return leaders.unionByName(controllers).unionByName(brokers)
