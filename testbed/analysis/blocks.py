"""The replicas' files and the reads, compared with the final leader's file a block of offsets
at a time, so that a large run's per-offset checks only look where something differs.

Most records of a large run are copies of one log: each replica's file, each consumer's
reads and the final read all repeat the final leader's file. Grouping tens of millions of
records by offset to compare them cost most of a judgment's time (ten million history
records: about a minute of CPU for that grouping alone). Instead, each source's records
are summed per block of `BLOCK` offsets into a multiset fingerprint (count, first and last
offset, and the wrapping sums of two hashes of each (offset, value) record), an aggregation
to a key per few dozen records that Spark combines before its shuffle. Two sources hold the same
records in a block exactly when their fingerprints agree, but for a collision of both
hashes (about one chance in 2^96); a block where every source agrees with the leader's file
can hold no anomaly of the offset checks (DESIGN section 8), and the checks read only the
other blocks' records.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from testbed.analysis.ingest import Tables
from testbed.analysis.observations import FINAL_READER, PART, final_leaders, leader_files

#: offsets per block: a consumer that stopped reading in the middle of a block makes it
#: suspect, so blocks are small enough for that to cost the checks little (a run of a few
#: thousand records per partition is only a few blocks)
BLOCK = 64
_PRINT = ["n", "lo", "hi", "s1", "s2"]  # a block's fingerprint


def block_of(offset: Column) -> Column:
    return F.floor(offset / BLOCK).cast("long")


def _sums(rows: DataFrame, kind: str, who: str) -> DataFrame:
    return (rows.select(*PART, F.lit(kind).alias("kind"), F.col(who).alias("who"),
                        block_of(F.col("offset")).alias("block"), "offset",
                        F.xxhash64("offset", "value").alias("h1"), F.hash("offset", "value").cast("long").alias("h2"))
            .groupBy(*PART, "kind", "who", "block")
            .agg(F.count("*").alias("n"), F.min("offset").alias("lo"), F.max("offset").alias("hi"),
                 F.sum("h1").alias("s1"), F.sum("h2").alias("s2")))


def fingerprints(t: Tables, polls: DataFrame, acked: DataFrame) -> DataFrame:
    """(PART, kind, who, block, n, lo, hi, s1, s2) per block of each final replica's file
    (`kind` file, `who` the node), of each process's reads (`kind` read, `who` the
    process) and of the acknowledgements (`kind` ack, `who` acks). The files are summed
    before they are matched with the final replicas (a join of every record with the
    replica table cost as much as the sums)."""
    replicas = t.final_replicas.select(*PART, F.col("node").alias("who"), F.lit("file").alias("kind"))
    files = _sums(t.final_logs, "file", "node").join(F.broadcast(replicas), [*PART, "kind", "who"])
    return (files.unionByName(_sums(polls, "read", "process"))
            .unionByName(_sums(acked.withColumn("who", F.lit("acks")), "ack", "who")))


def compare(t: Tables, prints: DataFrame) -> DataFrame:
    """(PART, block, suspect, final_read_whole, acked_whole) per block any source holds.

    `suspect` when a source's records there differ from the final leader's file, or a final
    replica lacks the block the leader holds, or the partition has no single final leader,
    or an acknowledgement there may not be plainly committed (the acknowledgements equal the
    leader's records, but these are not all committed: above the leader's HWM, and the
    final read did not return them). `final_read_whole` when the final read returned
    exactly the leader's records there, `acked_whole` when every committed record there was
    acknowledged once, where it lies (the acknowledgements equal the leader's records, all
    committed)."""
    leaders = final_leaders(t).select(*PART, "leader_node", "leader_hwm")
    replicas = t.final_replicas.groupBy(*PART).agg(F.count("*").alias("n_replicas"))
    lead = (prints.join(F.broadcast(leaders), PART)
            .where((F.col("kind") == "file") & (F.col("who") == F.col("leader_node")))
            .select(*PART, "block", "leader_hwm", *[F.col(c).alias(f"l_{c}") for c in _PRINT]))
    agree = F.lit(True)
    for c in _PRINT:
        agree = agree & F.coalesce(F.col(c) == F.col(f"l_{c}"), F.lit(False))

    def agreeing(kind: str, who: str | None = None) -> Column:
        return F.max((F.col("agree") & (F.col("kind") == kind)
                      & (F.col("who") == who if who else F.lit(True))).cast("int"))
    others = (prints.join(F.broadcast(leaders.select(*PART, "leader_node")), PART, "left")
              .where(~((F.col("kind") == "file") & F.col("who").eqNullSafe(F.col("leader_node"))))
              .join(lead.drop("leader_hwm"), [*PART, "block"], "left")
              .withColumn("agree", agree)
              .groupBy(*PART, "block")
              .agg(F.min(F.col("agree").cast("int")).alias("all_agree"),
                   F.sum((F.col("agree") & (F.col("kind") == "file")).cast("int")).alias("files_agreeing"),
                   agreeing("read", FINAL_READER).alias("final_read"), agreeing("ack").alias("acked"),
                   F.max((F.col("kind") == "ack").cast("int")).alias("acks")))
    blocks = (prints.select(*PART, "block").distinct()
              .join(lead, [*PART, "block"], "left").join(others, [*PART, "block"], "left")
              .join(F.broadcast(replicas), PART, "left"))
    final_read_whole = F.coalesce(F.col("final_read") == 1, F.lit(False))
    committed_whole = final_read_whole | F.coalesce(F.col("l_hi") < F.col("leader_hwm"), F.lit(False))
    suspect = (F.col("l_n").isNull() | ~F.coalesce(F.col("all_agree") == 1, F.lit(True))
               | ~F.coalesce(F.col("files_agreeing"), F.lit(0)).eqNullSafe(F.col("n_replicas") - 1)
               | (F.coalesce(F.col("acks") == 1, F.lit(False)) & ~committed_whole))
    return blocks.select(*PART, "block", suspect.alias("suspect"), final_read_whole.alias("final_read_whole"),
                         (F.coalesce(F.col("acked") == 1, F.lit(False)) & committed_whole).alias("acked_whole"))


def coverage(t: Tables, prints: DataFrame, logs: DataFrame) -> DataFrame:
    """`observations.read_coverage` from the fingerprints: per partition with a single final
    leader, whether the final read reached the end of the committed log (it returned every
    offset below the leader's HWM, or the leader's files hold every offset below it). A
    partition without one did not, and needs no row to say so. The leader's files are
    counted (from `logs`, `observations.replica_logs`) only for the partitions whose final
    read stopped short, if any: a complete final read needs no count."""
    leaders = final_leaders(t)
    read_end = (prints.where((F.col("kind") == "read") & (F.col("who") == FINAL_READER))
                .groupBy(*PART).agg((F.max("hi") + 1).alias("read_end")))
    reached = leaders.join(read_end, PART, "left").select(
        *PART, "leader_hwm", (F.coalesce("read_end", F.lit(0)) >= F.col("leader_hwm")).alias("read_all")).localCheckpoint()
    short = reached.where(~F.col("read_all")).select(*PART)
    if short.isEmpty():
        return reached.select(*PART, "leader_hwm", F.col("read_all").alias("reached_end"))
    file_count = (leader_files(t, logs.join(F.broadcast(short), PART))
                  .groupBy(*PART).agg(F.count("*").alias("file_count")))
    return (reached.join(file_count, PART, "left")
            .select(*PART, "leader_hwm", (F.col("read_all") | F.coalesce(
                F.coalesce("file_count", F.lit(0)) >= F.col("leader_hwm"), F.lit(False))).alias("reached_end")))


def within(frame: DataFrame, blocks: DataFrame) -> DataFrame:
    """The rows of `frame` (PART, offset, ...) in `blocks` (PART, block; few, broadcast)."""
    return (frame.withColumn("_block", block_of(F.col("offset")))
            .join(F.broadcast(blocks.select(*PART, F.col("block").alias("_block"))), [*PART, "_block"])
            .drop("_block"))
