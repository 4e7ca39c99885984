"""Availability and performance figures of DESIGN section 8, computed in the Spark job:
per-partition windows without a leader and without acks=all service, per-fault recovery
times, and per-second throughput and latency of sends and polls."""
from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.ingest import Tables
from testbed.analysis.observations import FINAL_READER, PART, acknowledged, broker_id, partition_changes, seconds
from testbed.analysis.runinfo import ConfigTables
from testbed.analysis.values import producer_key, send_latencies


#: Windows of one partition and kind closer than this are one window: an ISR that flaps (a
#: follower out and back in every few milliseconds) is one outage to a reader, not a hundred.
MERGE_GAP_NS = 100_000_000


#: how much earlier than the controller's event of a change a broker's event of acting on it
#: may be recorded: the controller records a committed change after it answers and sends it
#: (a broker applied one 0.9 ms before the controller's event on processes)
RECORDED_LATE_NS = 100_000_000


#: faults that leave a node up in name only: the controller still names it leader until its
#: session expires, but it serves nobody (a controlled `shutdown` moves its leaderships first)
_DOWN = ("kill", "lossy-crash", "disk-loss", "pause")
#: those of them whose node comes back as a new process: it leads again only once it acts as
#: leader, not at its restart (its metadata may name another leader that has not heard yet)
_RESTARTS = ("kill", "lossy-crash", "disk-loss")


def availability_windows(t: Tables, config: ConfigTables, bounds: DataFrame, spans: DataFrame) -> DataFrame:
    """Windows (start_s, end_s) per partition without a leader (`no-leader`) and without
    acks=all service (`no-acks-all`: no leader, or |ISR| < min(MinISR, replicas) so acks=all
    is refused, R20, or an ISR member down so the HWM waits for it, R15),
    from the controller's committed partition changes and from the faults (`spans`) that
    took a node down or cut links: a killed or paused leader leads nothing from the fault
    until the controller elects another (its session expires first) or the node is back, and
    a killed or paused follower holds every acks=all write until it leaves the ISR (R17,
    which needs an active controller) or is back; so does a follower that a partition of any
    shape keeps from its leader (a leader cut off from its followers still has its clients:
    its partition has a leader, without acks=all service), and so does a leader its clients
    cannot reach (a partition naming `clients`). A change takes effect when the broker that
    must act on it hears of it (`_in_effect`); a partition just created has no leader until
    its first leader heard (a paused one: until it resumes), and a deleted one (R40) no state
    after its deletion. Windows that overlap or are less than `MERGE_GAP_NS` apart are merged."""
    changes = (partition_changes(t)
               .join(config.topics.select("run_id", "topic", "min_isr"), ["run_id", "topic"])
               .join(bounds, "run_id")
               .select(*PART, "time_ns", "partition_epoch", "t0", "t_end", "leader", "leader_epoch", "isr", "node",
                       "metadata_offset", "reason",
                       (F.col("leader").isNull() | (F.col("leader") < 0)).alias("no_leader"),
                       # R20: acks=all is refused below min(MinISR, the partition's replica count)
                       (F.col("leader").isNull() | (F.col("leader") < 0)
                        | (F.size("isr") < F.least(F.col("min_isr"), F.size("replicas"))))
                       .alias("no_acks_all")))
    # changes committed in one batch share a time: the partition epoch orders a partition's (a
    # fence and the election after it, in the other line order, made a leaderless window)
    order = Window.partitionBy(*PART).orderBy("time_ns", "partition_epoch")
    apart = _kept_apart(spans)
    batches = _metadata_batches(t.events)
    deposed = _deposed(changes, order, batches)
    changes, unled = _in_effect(changes, order, apart, t.events, batches)
    if config.deletes_topics:
        changes = _ended_by_deletion(changes, t.events, "time_ns", "until")
    windows = [unled.withColumn("kind", F.lit(kind)) for kind in ("no-leader", "no-acks-all")]
    for flag, kind in (("no_leader", "no-leader"), ("no_acks_all", "no-acks-all")):
        edge = (F.col(flag) != F.coalesce(F.lag(flag).over(order), F.lit(False))).cast("int")
        windows.append(changes.withColumn("edge", edge)
                       .withColumn("island", F.sum("edge").over(order.rowsBetween(Window.unboundedPreceding, 0)))
                       .where(F.col(flag))
                       .groupBy(*PART, "island", "t0")
                       .agg(F.min("time_ns").alias("start_ns"), F.max("until").alias("end_ns"))
                       .where(F.col("end_ns") > F.col("start_ns"))  # a state its own batch replaced lasted no time
                       .drop("island").withColumn("kind", F.lit(kind)))
    # a killed or paused leader leads nothing until the controller elects another; a broker
    # isolated by a record without its groups (an older run's) is such a leader for acks=all
    # only: it still has its clients, but no follower fetches from it
    cut = F.col("do") == "partition"
    ungrouped = cut & (F.col("shape") == "isolate") & F.col("groups").isNull()
    down = (spans.where(F.col("do").isin(*_DOWN) | ungrouped)
            .select("run_id", F.explode("resolved").alias("node"), F.col("start_ns").alias("down_ns"),
                    F.col("end_ns").alias("up_ns"), (~cut).alias("leads_nothing"),
                    F.col("do").isin(*_RESTARTS).alias("restarts"))
            .select("run_id", broker_id(F.col("node")).alias("leader"), "down_ns", "up_ns", "leads_nothing", "restarts")
            .where(F.col("leader").isNotNull()))
    # a paused leader leads again as it resumes; a killed one's new process leads again only
    # when it acts as leader (a change elected another meanwhile, or the controller reelects it)
    led_again = (t.events.where(F.col("kind") == "became-leader")
                 .select("run_id", "topic", "partition", broker_id(F.col("node")).alias("leader"),
                         F.col("time_ns").alias("led_ns")))
    key = [*PART, "leader", "down_ns", "up_ns"]
    led_while_down = (changes.join(down, ["run_id", "leader"])
                      .where(F.col("time_ns") < F.col("up_ns"))  # (led before it was back)
                      .join(led_again, ["run_id", "topic", "partition", "leader"], "left")
                      .groupBy(*key, "t0", "time_ns", "until", "leads_nothing", "restarts")
                      .agg(F.min(F.when(F.col("led_ns") >= F.col("up_ns"), F.col("led_ns"))).alias("led_ns"))
                      .select(*PART, "t0", "leads_nothing", F.greatest("time_ns", "down_ns").alias("start_ns"),
                              F.least("until", F.when(F.col("restarts"), F.coalesce("led_ns", "until"))
                                      .otherwise(F.col("up_ns"))).alias("end_ns"))
                      .where(F.col("start_ns") < F.col("end_ns")))
    leaderless = led_while_down.where(F.col("leads_nothing")).drop("leads_nothing")
    windows += [leaderless.withColumn("kind", F.lit("no-leader")),
                led_while_down.drop("leads_nothing").withColumn("kind", F.lit("no-acks-all"))]
    # a follower in the ISR that is down, or that a partition keeps from its leader (either
    # way: a fetch is a request and its answer), holds every acks=all write until it leaves
    # the ISR (R15, R17) or is back
    brokers_apart = (apart.select("run_id", broker_id(F.col("member")).alias("member"),
                                  broker_id(F.col("peer")).alias("peer"), "down_ns", "up_ns")
                     .where(F.col("member").isNotNull() & F.col("peer").isNotNull()))
    out_of_reach = (down.select("run_id", F.col("leader").alias("member"), F.lit(None).cast("int").alias("peer"),
                                "down_ns", "up_ns")
                    .unionByName(brokers_apart))  # peer None: from every node
    held = (changes.select(*PART, "time_ns", "t0", "until", "leader", F.explode("isr").alias("member"))
            .where(F.col("member") != F.col("leader"))
            .join(out_of_reach, ["run_id", "member"])
            .where(F.col("peer").isNull() | (F.col("peer") == F.col("leader")))
            .select(*PART, "t0", F.greatest("time_ns", "down_ns").alias("start_ns"),
                    F.least("until", "up_ns").alias("end_ns"))
            .where(F.col("start_ns") < F.col("end_ns")))
    windows.append(held.withColumn("kind", F.lit("no-acks-all")))
    # a leader replaced out of the controller's reach, up and unaware, takes its clients'
    # writes, but its ISR followers, told, fetch from another: its HWM stalls (R15) until it
    # hears; down meanwhile, it serves nobody (above)
    start, downed = F.col("start_ns"), F.col("down_ns")
    unaware = (deposed.join(down.select("run_id", F.col("leader").alias("old"), "down_ns", "up_ns"),
                            ["run_id", "old"], "left")
               .groupBy(*PART, "t0", "old", "start_ns", "heard_ns")
               .agg(F.max(((downed <= start) & (F.col("up_ns") > start)).cast("int")).alias("was_down"),
                    F.min(F.when(downed > start, downed)).alias("down_ns"))
               .where(F.coalesce("was_down", F.lit(0)) == 0)
               .select(*PART, "t0", "old", "start_ns", F.least("heard_ns", "down_ns").alias("end_ns"))
               .where(F.col("start_ns") < F.col("end_ns")))
    windows.append(_until_served_elsewhere(unaware, t).withColumn("kind", F.lit("no-acks-all")))
    # a leader its clients cannot reach (a partition naming `clients`) serves none of them
    unreached = (changes.where(~F.col("no_leader"))
                 .select(*PART, "time_ns", "t0", "until",
                         F.concat(F.lit("broker-"), F.col("leader").cast("string")).alias("peer"))
                 .join(apart.where(F.col("member") == "clients"), ["run_id", "peer"])
                 .select(*PART, "t0", F.greatest("time_ns", "down_ns").alias("start_ns"),
                         F.least("until", "up_ns").alias("end_ns"))
                 .where(F.col("start_ns") < F.col("end_ns")))
    windows.append(unreached.withColumn("kind", F.lit("no-acks-all")))
    windows = reduce(DataFrame.unionByName, windows)
    if config.deletes_topics:
        windows = _ended_by_deletion(windows, t.events, "start_ns", "end_ns")
    return (_merge_close(windows)
            .select(*PART, "kind", seconds("start_ns").alias("start_s"), seconds("end_ns").alias("end_s")))


def _until_served_elsewhere(unaware: DataFrame, t: Tables) -> DataFrame:
    """The windows of leaders deposed unaware (PART, t0, old, start_ns, end_ns), each ended
    by the first acks=all write another broker acknowledged on its partition within it: the
    window is the clients' that are still at the old leader, and from then on they write to
    the new one (trial33: three partitions counted 1.4 s each without acks=all service while
    their new leaders acknowledged 160-180 acks=all writes, and the unaware leader had no
    client left). A run whose records name no acknowledging broker keeps the whole window."""
    served = (acknowledged(t, served=True).where((F.col("acks") == "all") & F.col("node").isNotNull())
              .select(*PART, "node", F.col("time_ns").alias("served_ns"))
              .join(F.broadcast(unaware.select(*PART, "old", "start_ns", "end_ns")), PART)
              .where((F.col("node") != F.concat(F.lit("broker-"), F.col("old").cast("string")))
                     & (F.col("served_ns") > F.col("start_ns")) & (F.col("served_ns") < F.col("end_ns")))
              .groupBy(*PART, "start_ns").agg(F.min("served_ns").alias("served_ns")))
    return (unaware.join(served, [*PART, "start_ns"], "left")
            .select(*PART, "t0", "start_ns", F.coalesce("served_ns", "end_ns").alias("end_ns")))


def _in_effect(changes: DataFrame, order: Window, apart: DataFrame, events: DataFrame,
               batches: DataFrame) -> tuple[DataFrame, DataFrame]:
    """The controller's changes on the timeline of the brokers that act on them: each from
    `time_ns` (re-timed) `until` the next takes effect. A change takes effect when the broker
    that must act on it hears of it: its new leader, or for a change that leaves no leader,
    the leader before it (a leader out of the controller's reach serves its clients with the
    ISR it had). It hears at its `became-leader` at the change's leader epoch (or its
    `became-follower`, for a change that leaves no leader), else at the first metadata batch
    it applied that holds the change's record (a `metadata-applied` event with `from`: a
    partition's heal does not mean the broker heard, its metadata fetch may be lost with the
    cut). A run without these (an older one) has the change take effect at the end of a
    partition that keeps that broker from the controller at its commit, else at its commit.
    A change that a later one, taking effect sooner, replaces never takes effect.

    Also the windows (PART, t0, start_ns, end_ns) of partitions created (R40, or at the run's
    start) and not yet led: from the creation's commit until it or a change after it took
    effect. Before, such a partition had no window (a topic made again kept its deleted
    making's last state meanwhile)."""
    before = F.lag("leader").over(order)
    learner = F.when(F.col("leader") >= 0, F.col("leader")).otherwise(before)
    told = (F.when((F.col("leader") >= 0) & ~F.coalesce(F.col("leader") == before, F.lit(False)), F.lit("became-leader"))
            .when((F.col("leader") < 0) & (before >= 0), F.lit("became-follower")))
    key = [*PART, "time_ns", "partition_epoch"]
    rows = (changes.withColumn("learner", F.concat(F.lit("broker-"), learner.cast("string")))
            .withColumn("told", told))
    acted = (events.where(F.col("kind").isin("became-leader", "became-follower"))
             .select("run_id", "topic", "partition", F.col("node").alias("learner"), F.col("kind").alias("told"),
                     F.col("time_ns").alias("acted_ns"), F.col("leader_epoch").alias("acted_epoch")))
    heard_by_event = (rows.where(F.col("told").isNotNull()).select(*key, "learner", "told", "leader_epoch")
                      .join(acted, ["run_id", "topic", "partition", "learner", "told"])
                      .where((F.col("acted_ns") >= F.col("time_ns") - RECORDED_LATE_NS)
                             & F.when(F.col("told") == "became-leader", F.col("acted_epoch") == F.col("leader_epoch"))
                             .otherwise(F.col("acted_epoch") >= F.col("leader_epoch")))
                      .groupBy(*key).agg(F.min("acted_ns").alias("acted_ns")))
    heard_by_metadata = _first_applied(rows, F.col("learner"), key, batches, "applied_ns")
    heard_after_cut = (rows.select(*key, F.col("learner").alias("member"), F.col("node").alias("peer"))
                       .join(apart, ["run_id", "member", "peer"])
                       .where((F.col("down_ns") <= F.col("time_ns")) & (F.col("time_ns") < F.col("up_ns")))
                       .groupBy(*key).agg(F.max("up_ns").alias("heard_ns")))
    later = (Window.partitionBy(*PART).orderBy("committed_ns", "partition_epoch")
             .rowsBetween(1, Window.unboundedFollowing))
    timed = (rows.join(heard_by_event, key, "left").join(heard_by_metadata, key, "left")
             .join(heard_after_cut, key, "left")
             .withColumnRenamed("time_ns", "committed_ns")
             .withColumn("time_ns", F.coalesce("acted_ns", "applied_ns", "heard_ns", "committed_ns"))
             .withColumn("until", F.least(F.coalesce(F.min("time_ns").over(later), F.col("t_end")), F.col("t_end"))))
    unled = (timed.where(F.col("reason") == "create")
             .select(*PART, "t0", F.greatest("committed_ns", "t0").alias("start_ns"),
                     F.least("time_ns", "until").alias("end_ns"))
             .where(F.col("start_ns") < F.col("end_ns")))
    return (timed.where(F.col("time_ns") < F.col("until"))
            .drop("learner", "told", "acted_ns", "applied_ns", "heard_ns", "committed_ns", "metadata_offset", "reason"),
            unled)


def _ended_by_deletion(frame: DataFrame, events: DataFrame, start: str, end: str) -> DataFrame:
    """`frame` (states, or windows, of partitions: `start` to `end`) each ended at its topic's
    first deletion after its start (the controller's `topic-deleted` event, R40): a deleted
    partition is neither led nor leaderless. Its last state lasted until the name was made
    again or the run's end (a pause after the deletion held its old ISR's acks=all), and a
    deposed leader out of the controller's reach made a window through the 9 s the topic
    did not exist."""
    gone = (events.where(F.col("kind") == "topic-deleted").groupBy("run_id", "topic")
            .agg(F.collect_list("time_ns").alias("_gone")))
    first = F.array_min(F.filter("_gone", lambda g: g > F.col(start)))
    return (frame.join(F.broadcast(gone), ["run_id", "topic"], "left")
            .withColumn(end, F.least(end, F.coalesce(first, F.col(end))))
            .where(F.col(start) < F.col(end)).drop("_gone"))


def _metadata_batches(events: DataFrame) -> DataFrame:
    """(run_id, node, applied_from, applied_to, applied_ns): each metadata batch a broker
    applied (its `metadata-applied` event with `from`; none in an older run)."""
    return (events.where((F.col("kind") == "metadata-applied") & F.col("from").isNotNull())
            .select("run_id", "node", F.col("from").alias("applied_from"), F.col("offset").alias("applied_to"),
                    F.col("time_ns").alias("applied_ns")))


def _first_applied(rows: DataFrame, node: Column, key: list[str], batches: DataFrame, name: str) -> DataFrame:
    """(`key`, `name`): for each `key` of `rows` (with its `metadata_offset`), when the broker
    `node` names first applied the batch holding the record at that offset (of several rows
    of one key, the first of their brokers)."""
    offset = [] if "metadata_offset" in key else ["metadata_offset"]
    return (rows.select(*key, *offset, node.alias("node")).join(batches, ["run_id", "node"])
            .where(F.col("metadata_offset").between(F.col("applied_from"), F.col("applied_to")))
            .groupBy(*key).agg(F.min("applied_ns").alias(name)))


def _deposed(changes: DataFrame, order: Window, batches: DataFrame) -> DataFrame:
    """(partition, t0, old, start_ns, heard_ns) for each leader a change replaced (`old`)
    whose ISR followers applied the change (the first of them at `start_ns`) before the old
    leader did (`heard_ns`): they fetch from the new leader then, and it, still leading in
    its own view, can acknowledge no acks=all write (a leader cut from the controller alone
    had none from its followers' hearing until its own, 1.7 s, and no window). From the
    brokers' `metadata-applied` events with `from` (none in an older run: no window)."""
    key = [*PART, "metadata_offset"]
    # (a topic made again replaced no leader: its `create` is not a change of leader, R40)
    replaced = (changes.select(*PART, "t0", "t_end", "metadata_offset", "leader", "reason",
                               F.lag("leader").over(order).alias("old"),
                               F.lag("isr").over(order).alias("old_isr"))
                .where((F.col("old") >= 0) & (F.col("leader") != F.col("old")) & F.col("metadata_offset").isNotNull()
                       & ~F.coalesce(F.col("reason") == "create", F.lit(False))))

    def broker(column: str) -> Column:
        return F.concat(F.lit("broker-"), F.col(column).cast("string"))

    followers = replaced.select(*key, F.explode("old_isr").alias("member"), "old").where(F.col("member") != F.col("old"))
    return (replaced.join(_first_applied(followers, broker("member"), key, batches, "start_ns"), key)
            .join(_first_applied(replaced, broker("old"), key, batches, "heard_ns"), key, "left")
            # (unaware to the end, or till the workload's end: the controlled shutdowns after it
            # move leaders too)
            .select(*PART, "t0", "old", "start_ns",
                    F.least(F.coalesce("heard_ns", "t_end"), "t_end").alias("heard_ns"))
            .where(F.col("start_ns") < F.col("heard_ns")))


def _kept_apart(spans: DataFrame) -> DataFrame:
    """(run_id, member, peer, down_ns, up_ns): each pair of nodes (by name) a partition kept
    from exchanging messages, both ways round, while it held: two nodes in no group together
    (any shape but one-way, as applied), or the two ends of a one-way cut."""
    groups = F.col("groups")
    nodes = F.array_distinct(F.flatten(groups))

    def pair(a: Column, b: Column) -> Column:
        return F.struct(a.alias("member"), b.alias("peer"))

    def together(a: Column, b: Column) -> Column:
        return F.exists(groups, lambda g: F.array_contains(g, a) & F.array_contains(g, b))

    one_way = F.flatten(F.flatten(F.transform(groups[0], lambda a: F.transform(
        groups[1], lambda b: F.array(pair(a, b), pair(b, a))))))
    apart = F.flatten(F.transform(nodes, lambda a: F.transform(F.filter(nodes, lambda b: ~together(a, b)),
                                                               lambda b: pair(a, b))))
    return (spans.where((F.col("do") == "partition") & groups.isNotNull())
            .select("run_id", F.explode(F.when(F.col("shape") == "one-way", one_way).otherwise(apart)).alias("p"),
                    F.col("start_ns").alias("down_ns"), F.col("end_ns").alias("up_ns"))
            .select("run_id", F.col("p.member").alias("member"), F.col("p.peer").alias("peer"), "down_ns", "up_ns")
            .where(F.col("member") != F.col("peer")))


def _merge_close(windows: DataFrame) -> DataFrame:
    """Windows (PART, kind, t0, start_ns, end_ns) with every run of windows that overlap or are
    less than `MERGE_GAP_NS` apart made one (a window inside an earlier one joins it, and so
    does one that starts before the end of any window before it)."""
    order = Window.partitionBy(*PART, "kind").orderBy("start_ns", "end_ns")
    gap = F.col("start_ns") - F.max("end_ns").over(order.rowsBetween(Window.unboundedPreceding, -1))
    starts = F.coalesce((gap >= MERGE_GAP_NS).cast("int"), F.lit(1))
    return (windows.withColumn("group", F.sum(starts).over(order.rowsBetween(Window.unboundedPreceding, 0)))
            .groupBy(*PART, "kind", "t0", "group")
            .agg(F.min("start_ns").alias("start_ns"), F.max("end_ns").alias("end_ns")))


def fault_recovery(t: Tables, acks: DataFrame, spans: DataFrame, bounds: DataFrame) -> DataFrame:
    """For each applied fault (`faultspans.fault_spans`): the time until every partition took
    an acks=all write sent after the fault again, before the next fault (null when one did
    not: a partition without one was passed over, and a write in flight as the fault began,
    acknowledged 8 ms later by the cluster it cut off, read as a recovery: trial31; one after
    the next fault counted that fault's recovery too, where the report says both columns stop
    at the next fault: trial35), and until every
    partition's ISR was full again (0 when no ISR shrank before the next fault; null when one
    had not recovered by then); a partition's `shape` and `groups` as applied. "Every
    partition" is every one with an acks=all write in the run that existed when the fault
    began and was not deleted before the next (`_owed_partitions`: partitions an
    `add-partitions` made later counted against every earlier fault, whose recovery read
    "not recovered" in every admin run: trial39). `acks` are `values.acknowledgements`."""
    starts = (spans.join(bounds, "run_id")
              .select("run_id", "do", "target", "resolved", "shape", "groups", F.col("start_ns").alias("fault_ns"),
                      F.col("end_ns").alias("undo_ns"), "t0", "t_end"))
    nxt = Window.partitionBy("run_id").orderBy("fault_ns")
    starts = starts.withColumn("next_ns", F.coalesce(F.lead("fault_ns").over(nxt), F.col("t_end")))
    acks = acks.where(F.col("acks") == "all").select("run_id", "pp", "sent_ns", "ack_ns")
    owed = _owed_partitions(t, acks, starts.select("run_id", "fault_ns", "next_ns"))
    written = owed.groupBy("run_id", "fault_ns").agg(F.count("pp").alias("written"))
    first_ack = (acks.join(F.broadcast(starts.select("run_id", "fault_ns", "next_ns")), "run_id")
                 .where((F.col("sent_ns") > F.col("fault_ns")) & (F.col("ack_ns") <= F.col("next_ns")))
                 .join(owed, ["run_id", "fault_ns", "pp"])
                 .groupBy("run_id", "fault_ns", "pp").agg(F.min("ack_ns").alias("ack_ns"))
                 .groupBy("run_id", "fault_ns").agg(F.max("ack_ns").alias("last_first_ns"), F.count("pp").alias("took"))
                 .join(written, ["run_id", "fault_ns"])
                 .select("run_id", "fault_ns",
                         F.when(F.col("took") == F.col("written"), F.col("last_first_ns")).alias("all_acked_ns")))
    changes = (partition_changes(t)
               .select(*PART, F.col("time_ns").alias("change_ns"), (F.size("isr") == F.size("replicas")).alias("full")))
    inside = starts.join(changes, "run_id").where((F.col("change_ns") > F.col("fault_ns"))
                                                  & (F.col("change_ns") < F.col("next_ns")))
    per_partition = (inside.groupBy("run_id", "fault_ns", "topic", "partition")
                     .agg(F.max(F.when(~F.col("full"), F.col("change_ns"))).alias("last_short"),
                          F.max(F.when(F.col("full"), F.col("change_ns"))).alias("last_full"))
                     .withColumn("full_ns", F.when(F.col("last_short").isNull(), F.lit(0))
                                 .when(F.col("last_full") > F.col("last_short"), F.col("last_full"))))
    full = (per_partition.groupBy("run_id", "fault_ns")
            .agg(F.max(F.when(F.col("full_ns") > 0, F.col("full_ns"))).alias("full_isr_ns"),
                 F.max(F.col("full_ns").isNull().cast("int")).alias("unrecovered")))
    return (starts.join(first_ack, ["run_id", "fault_ns"], "left").join(full, ["run_id", "fault_ns"], "left")
            .select("run_id", "do", "target", "resolved", "shape", "groups", seconds("fault_ns").alias("at_s"),
                    seconds("undo_ns").alias("until_s"),
                    F.round((F.col("all_acked_ns") - F.col("fault_ns")) / 1e9, 3).alias("to_first_ack_s"),
                    F.when(F.col("unrecovered") == 1, F.lit(None))
                    .otherwise(F.round(F.greatest(F.coalesce("full_isr_ns", "fault_ns") - F.col("fault_ns"),
                                                  F.lit(0)) / 1e9, 3)).alias("to_full_isr_s")))


def _owed_partitions(t: Tables, acks: DataFrame, faults: DataFrame) -> DataFrame:
    """(run_id, fault_ns, pp): the partitions with an acks=all write in the run (`acks`) that a
    fault of `faults` (run_id, fault_ns, next_ns) owes a recovery: made (the controller's
    `create` change) before it began, their topic not deleted from then until the next
    fault (R40). A partition with no `create` change recorded is owed by every fault."""
    made = (partition_changes(t).where(F.col("reason") == "create")
            .groupBy("run_id", "topic", "partition").agg(F.collect_list("time_ns").alias("made")))
    gone = (t.events.where(F.col("kind") == "topic-deleted").groupBy("run_id", "topic")
            .agg(F.collect_list("time_ns").alias("gone")))
    lives = (made.join(gone, ["run_id", "topic"], "left")
             .select("run_id", producer_key("run_id", "topic", "partition").alias("pp"), "made", "gone"))
    written = acks.select("run_id", "pp").distinct().join(lives, ["run_id", "pp"], "left")
    since = F.array_max(F.filter("made", lambda m: m <= F.col("fault_ns")))  # its last making before the fault
    deleted_meanwhile = F.exists(F.coalesce("gone", F.array().cast("array<long>")),
                                 lambda g: (g > since) & (g <= F.col("next_ns")))
    return (written.join(F.broadcast(faults), "run_id")
            .where(F.col("made").isNull() | (since.isNotNull() & ~deleted_meanwhile))
            .select("run_id", "fault_ns", "pp"))


def _latencies(t: Tables, v: DataFrame, eager: bool) -> DataFrame:
    """Each completed operation with its latency: a completion paired with the invoke just
    before it of the same process (and, for sends, the same value: `values.send_latencies`
    over the values `v`). Polls are few (one per batch of records), so a window over them
    is cheap."""
    h = (t.history.where(F.col("process") != FINAL_READER)  # the final read is not workload
         .select("run_id", "process", "f", "type", "value", "time_ns", "seq", "records"))
    poll_order = Window.partitionBy("run_id", "process").orderBy("seq")
    polls = (h.where(F.col("f") == "poll")
             .withColumn("prev_type", F.lag("type").over(poll_order))
             .withColumn("invoked", F.lag("time_ns").over(poll_order))
             .where((F.col("type") == "ok") & (F.col("prev_type") == "invoke"))
             .select("run_id", "f", "type", "time_ns", "invoked", F.size("records").alias("n")))
    return send_latencies(v, t.history, eager).unionByName(polls)


def throughput_latency(t: Tables, v: DataFrame, bounds: DataFrame, eager: bool = False) -> DataFrame:
    """Per run, operation kind and second: records acknowledged (sends) or returned (polls)
    per second, failed or indeterminate sends, and p50/p99 latency in milliseconds. `v` is
    `values.by_value`, `eager` as for `values.send_latencies`."""
    ops = _latencies(t, v, eager).join(bounds, "run_id")
    latency_ms = (F.col("time_ns") - F.col("invoked")) / 1e6
    ok = F.col("type") == "ok"
    return (ops.withColumn("second", F.floor((F.col("time_ns") - F.col("t0")) / 1e9).cast("int"))
            .groupBy("run_id", "f", "second")
            .agg(F.sum(F.when(ok, F.col("n")).otherwise(0)).alias("records"),
                 F.sum(F.when(~ok, 1).otherwise(0)).alias("not_ok"),
                 F.percentile_approx(F.when(ok, latency_ms), [0.5, 0.99]).alias("p"))
            .select("run_id", "f", "second", "records", "not_ok", F.col("p")[0].alias("p50_ms"),
                    F.col("p")[1].alias("p99_ms")))
