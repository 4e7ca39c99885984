"""The offsets worth a closer look, found in one aggregation over every claim about an offset.

Most checks compare what several sources say one offset of a partition holds: the
acknowledgements, the polls, the replicas' files and the final committed log. In a run
without anomalies they all agree at every offset, so one shuffle keyed by offset, keeping
only the smallest and largest value each group of sources gave, proves most offsets clean
(min == max means one value). The checks then examine only the offsets that are not (a
handful, broadcast), instead of joining millions of rows with millions of rows each.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from testbed.analysis.ingest import Tables
from testbed.analysis.observations import FINAL_READER, PART, final_leaders

KEY = [*PART, "offset"]
#: what each flag of `suspects` means; each names the checks that must look at its offsets
FLAGS = ("disagree", "replaced", "diverges", "unsure_ack")


def _differ(lo: str, hi: str) -> Column:
    return F.coalesce(F.col(lo) != F.col(hi), F.lit(False))


def suspects(t: Tables, acked: DataFrame, polls: DataFrame, logs: DataFrame) -> DataFrame:
    """(PART, offset, *FLAGS) for every offset with at least one flag:

    - `disagree`: acks=all acknowledgements, polls and replicas' committed prefixes name two
      values (the rows of `inconsistent_offsets`);
    - `replaced`: polls and the final committed log name two values (`committed_regressions`
      can only occur there);
    - `diverges`: the replicas' files hold two values, or not every final replica holds the
      offset (`log_divergence` can only occur there);
    - `unsure_ack`: an acknowledgement whose value the final committed log does not plainly
      hold at that offset (a lost or unseen write can only be among those).
    """
    leaders = final_leaders(t).select(*PART, "leader_node")
    replicas = t.final_replicas.groupBy(*PART).agg(F.count("*").alias("n_replicas"))
    no = F.lit(False)
    rows = (acked.select(*KEY, "value", (F.col("acks") == "all").alias("obs"), no.alias("reg"), no.alias("com"),
                         F.lit(True).alias("ack"), no.alias("log"))
            .unionByName(polls.select(*KEY, "value", F.lit(True).alias("obs"), F.lit(True).alias("reg"),
                                      (F.col("process") == FINAL_READER).alias("com"), no.alias("ack"),
                                      no.alias("log")))
            .unionByName(logs.join(F.broadcast(leaders), PART, "left")
                         .select(*KEY, "value", F.col("prefix").alias("obs"),
                                 (F.col("prefix") & (F.col("node") == F.col("leader_node"))).alias("reg"),
                                 F.coalesce(F.col("prefix") & (F.col("node") == F.col("leader_node")), no)
                                 .alias("com"),
                                 no.alias("ack"), F.lit(True).alias("log"))))
    aggs = [agg for name in ("obs", "reg", "com", "ack", "log")
            for agg in (F.min(F.when(F.col(name), F.col("value"))).alias(f"{name}_lo"),
                        F.max(F.when(F.col(name), F.col("value"))).alias(f"{name}_hi"))]
    facts = rows.groupBy(*KEY).agg(*aggs, F.sum(F.col("log").cast("int")).alias("log_n"))
    plain_ack = ((F.col("ack_lo") == F.col("ack_hi")) & (F.col("com_lo") == F.col("com_hi"))
                 & (F.col("ack_lo") == F.col("com_lo")))
    flagged = (facts.join(F.broadcast(replicas), PART, "left")
               .select(*KEY, _differ("obs_lo", "obs_hi").alias("disagree"),
                       _differ("reg_lo", "reg_hi").alias("replaced"),
                       (_differ("log_lo", "log_hi") | ((F.col("log_n") > 0)
                                                      & ~F.col("log_n").eqNullSafe(F.col("n_replicas"))))
                       .alias("diverges"),
                       (F.col("ack_lo").isNotNull() & ~F.coalesce(plain_ack, no)).alias("unsure_ack")))
    return flagged.where(F.col("disagree") | F.col("replaced") | F.col("diverges") | F.col("unsure_ack"))


def only(frame: DataFrame, found: DataFrame, flag: str) -> DataFrame:
    """The rows of `frame` at the offsets `found` flags with `flag` (a small set, broadcast)."""
    return frame.join(F.broadcast(found.where(F.col(flag)).select(*KEY)), KEY)
