"""The offsets worth a closer look, found in one aggregation over every claim about an offset.

Most checks compare what several sources say one offset of a partition holds: the
acknowledgements, the polls, the replicas' files and the final committed log. In a run
without anomalies they all agree at every offset, so one shuffle keyed by offset, keeping
only the smallest and largest value each group of sources gave, proves most offsets clean
(min == max means one value). The checks then examine only the offsets that are not (a
handful, broadcast), instead of joining millions of rows with millions of rows each.

The smallest and largest are taken of two fingerprints of each value (64-bit xxHash and
32-bit Murmur3), not of the strings: Spark aggregates fixed-width numbers in a hash table
but falls back to sorting every row for the minimum of a string (on a million-record run
the sort was most of this pass). Two different values at one offset look alike only if both
fingerprints collide, about one chance in 2^96; the checks then compare the strings of the
flagged offsets exactly.
"""
from __future__ import annotations

from functools import reduce

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from testbed.analysis.ingest import Tables
from testbed.analysis.observations import FINAL_READER, PART, final_leaders

KEY = [*PART, "offset"]
#: what each flag of `suspects` means; each names the checks that must look at its offsets
FLAGS = ("disagree", "replaced", "diverges", "unsure_ack")
#: the groups of sources whose values are compared: observations, reads, the committed log,
#: acknowledgements, the replicas' files
NAMES = ("obs", "reg", "com", "ack", "log")


#: the two fingerprints of a value that stand for it in the per-offset aggregation
_PRINTS = (F.xxhash64, F.hash)


def _differ(name: str) -> Column:
    """The group `name` of sources named two values at the offset."""
    return reduce(Column.__or__, [F.coalesce(F.col(f"{name}_lo{i}") != F.col(f"{name}_hi{i}"), F.lit(False))
                                  for i in range(len(_PRINTS))])


def _one(name: str) -> Column:
    """The group `name` named exactly one value (null when it named none)."""
    return reduce(Column.__and__, [F.col(f"{name}_lo{i}") == F.col(f"{name}_hi{i}") for i in range(len(_PRINTS))])


def _same(a: str, b: str) -> Column:
    """The groups `a` and `b` named the same smallest value."""
    return reduce(Column.__and__, [F.col(f"{a}_lo{i}") == F.col(f"{b}_lo{i}") for i in range(len(_PRINTS))])


def suspects(t: Tables, acked: DataFrame, polls: DataFrame, logs: DataFrame) -> DataFrame:
    """(PART, offset, *FLAGS) for every offset with at least one flag:

    - `disagree`: acks=all acknowledgements, polls and replicas' committed prefixes name two
      values (the rows of `inconsistent_offsets`);
    - `replaced`: polls and the final committed log name two values, or a poll read an offset
      at or past the committed log's end, the final leader's HWM (`committed_regressions` can
      only occur there);
    - `diverges`: the replicas' files hold two values, or not every final replica holds the
      offset (`log_divergence` can only occur there);
    - `unsure_ack`: an acknowledgement whose value the final committed log does not plainly
      hold at that offset (a lost or unseen write can only be among those).
    """
    leaders = final_leaders(t)
    replicas = (t.final_replicas.groupBy(*PART).agg(F.count("*").alias("n_replicas"))
                .join(leaders.select(*PART, "leader_hwm"), PART, "left"))
    no = F.lit(False)
    rows = (acked.select(*KEY, "value", (F.col("acks") == "all").alias("obs"), no.alias("reg"), no.alias("com"),
                         F.lit(True).alias("ack"), no.alias("log"))
            .unionByName(polls.select(*KEY, "value", F.lit(True).alias("obs"), F.lit(True).alias("reg"),
                                      (F.col("process") == FINAL_READER).alias("com"), no.alias("ack"),
                                      no.alias("log")))
            .unionByName(logs.join(F.broadcast(leaders.select(*PART, "leader_node")), PART, "left")
                         .select(*KEY, "value", F.col("prefix").alias("obs"),
                                 (F.col("prefix") & (F.col("node") == F.col("leader_node"))).alias("reg"),
                                 F.coalesce(F.col("prefix") & (F.col("node") == F.col("leader_node")), no)
                                 .alias("com"),
                                 no.alias("ack"), F.lit(True).alias("log"))))
    rows = rows.select(*KEY, *NAMES, *[F.when(F.col("value").isNotNull(), fp("value")).alias(f"v{i}")
                                       for i, fp in enumerate(_PRINTS)])
    aggs = [agg for name in NAMES for i in range(len(_PRINTS))
            for agg in (F.min(F.when(F.col(name), F.col(f"v{i}"))).alias(f"{name}_lo{i}"),
                        F.max(F.when(F.col(name), F.col(f"v{i}"))).alias(f"{name}_hi{i}"))]
    facts = rows.groupBy(*KEY).agg(*aggs, F.sum(F.col("log").cast("int")).alias("log_n"))
    plain_ack = _one("ack") & _one("com") & _same("ack", "com")
    flagged = (facts.join(F.broadcast(replicas), PART, "left")
               .select(*KEY, _differ("obs").alias("disagree"),
                       (_differ("reg") | F.coalesce(F.col("reg_lo0").isNotNull()
                                                    & (F.col("offset") >= F.col("leader_hwm")), no))
                       .alias("replaced"),
                       (_differ("log") | ((F.col("log_n") > 0) & ~F.col("log_n").eqNullSafe(F.col("n_replicas"))))
                       .alias("diverges"),
                       (F.col("ack_lo0").isNotNull() & ~F.coalesce(plain_ack, no)).alias("unsure_ack")))
    return flagged.where(F.col("disagree") | F.col("replaced") | F.col("diverges") | F.col("unsure_ack"))


def only(frame: DataFrame, found: DataFrame, flag: str) -> DataFrame:
    """The rows of `frame` at the offsets `found` flags with `flag` (a small set, broadcast)."""
    return frame.join(F.broadcast(found.where(F.col(flag)).select(*KEY)), KEY)
