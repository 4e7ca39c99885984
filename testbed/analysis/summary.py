"""The summary of a tree of runs: per topology and protocol setting, the runs, the runs
with loss, the lost writes and the unavailability, as Parquet and HTML."""
from __future__ import annotations

import html
import shutil
from pathlib import Path

from pyspark.sql import functions as F
from pyspark.sql.connect.session import SparkSession
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from testbed.analysis.runinfo import RunInfo
from testbed.analysis.verdict import RunVerdict

_RUNS = StructType([
    StructField("run_id", StringType()), StructField("topology", StringType()),
    StructField("protocol", StringType()), StructField("ok", BooleanType()),
    StructField("lost_writes", LongType()), StructField("lost_writes_acks1", LongType()),
    StructField("no_leader_s", DoubleType()), StructField("no_acks_all_s", DoubleType()),
    StructField("whole", BooleanType()),
])


def write_summary(spark: SparkSession, infos: dict[str, RunInfo], verdicts: list[RunVerdict],
                  target: Path) -> list[dict]:
    """Write `target/summary.parquet` and `target/summary.html`; return the summary rows."""
    rows = []
    for v in verdicts:
        info = infos[v.run_id]
        checks = v.results.get("checks", {})
        unavailable = v.results.get("figures", {}).get("unavailable_s", {})
        rows.append((info.run_id, info.topology.name if info.topology else "unknown", info.protocol_setting, v.ok,
                     checks.get("lost_writes", {}).get("count"), checks.get("lost_writes_acks1", {}).get("count"),
                     float(unavailable.get("no-leader", 0.0)), float(unavailable.get("no-acks-all", 0.0)), v.whole))
    runs = spark.createDataFrame(rows, _RUNS)
    # the loss and the unavailability of runs judged whole only: an unjudged run's missing values
    # may be unavailability, and its figures are those of records that did not end or cannot be
    # read (a run failed on its records alone, `verdict.RECORD_CHECKS`, too); a group without
    # one has none (null), not 0.0, which read as measured (trial36)
    judged = F.col("whole")
    lost, lost1 = (F.when(judged, F.col(c)) for c in ("lost_writes", "lost_writes_acks1"))
    no_leader, no_acks_all = (F.sum(F.when(judged, F.col(c))) for c in ("no_leader_s", "no_acks_all_s"))
    loss = F.coalesce(lost, F.lit(0)) + F.coalesce(lost1, F.lit(0))
    summary = (runs.groupBy("topology", "protocol")
               .agg(F.count("*").alias("runs"), F.sum((loss > 0).cast("int")).alias("runs_with_loss"),
                    F.sum(lost).alias("lost_writes"), F.sum(lost1).alias("lost_writes_acks1"),
                    F.sum(F.col("ok").isNull().cast("int")).alias("unjudged"),
                    # `ok` null == False is null: a group of unjudged runs has 0 failed, not null
                    F.sum(F.coalesce(F.col("ok") == F.lit(False), F.lit(False)).cast("int")).alias("failed"),
                    F.round(no_leader, 3).alias("no_leader_s"), F.round(no_acks_all, 3).alias("no_acks_all_s"))
               .orderBy("topology", "protocol"))
    target.mkdir(parents=True, exist_ok=True)
    summary.write.mode("overwrite").parquet(str(target / "summary.parquet"))
    out = [r.asDict() for r in summary.collect()]
    header = list(summary.columns)
    body = "".join("<tr>" + "".join(f"<td>{'—' if r[c] is None else html.escape(str(r[c]))}</td>" for c in header)
                   + "</tr>" for r in out)
    (target / "summary.html").write_text(
        "<!doctype html><html><head><meta charset='utf-8'><title>isrlab summary</title><style>"
        "td,th{border:1px solid #ccc;padding:3px 8px}table{border-collapse:collapse}</style></head><body>"
        f"<h1>isrlab summary of {len(verdicts)} runs</h1><table><tr>"
        + "".join(f"<th>{html.escape(c)}</th>" for c in header) + f"</tr>{body}</table></body></html>",
        encoding="utf-8")
    return out


def remove_summary(target: Path) -> None:
    """Remove the summary in `target`: a judgment that failed writes none, and an earlier
    judgment's would contradict the runs' results.json, which now say they were not judged
    (and `run.py analyze` printed it, reading it through a Spark that was gone)."""
    shutil.rmtree(target / "summary.parquet", ignore_errors=True)
    (target / "summary.html").unlink(missing_ok=True)
