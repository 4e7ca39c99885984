"""Every value sent, in one aggregation keyed by (run, value): when it was first sent, how its
send ended, whether and where it was acknowledged, and whether an attempt failed.

Why one pass: the checks and figures that read sends each needed a grouping or a join of
their own over every send of the history (the acknowledgements joined with their first
invocation, the invocations paired with their completions, the failed sends grouped by
value), and on ten million records each such shuffle cost 20-40 s of CPU. Grouped once, with
only fixed-width aggregates (a minimum of a string would make Spark sort every row instead
of hashing it), the rest derive from the grouped rows.

A value sent by one producer to one partition and acknowledged at most once is *regular*:
its facts are exact from the aggregation. Anything else (a value retried, acknowledged
twice, sent by two producers, or acknowledged before its topic was deleted) is rare, and
the derived frames read its raw records again, as the checks always did.
"""
from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.observations import PART, gone

VALUE = ["run_id", "value"]
#: how a send ended, as a number (a string would not aggregate in a hash table)
_TYPE_CODE = {"ok": 0, "fail": 1, "info": 2}
_ACKS_CODE = {"0": 0, "1": 1, "all": 2}


def _code(col: Column, codes: dict[str, int]) -> Column:
    """A string of `codes` as its number (a CASE: a map literal is looked up by hashing)."""
    (text, number), *rest = codes.items()
    cases = F.when(col == text, F.lit(number))
    for text, number in rest:
        cases = cases.when(col == text, F.lit(number))
    return cases


def _decode(col: Column, codes: dict[str, int]) -> Column:
    return F.create_map(*[F.lit(x) for kv in codes.items() for x in reversed(kv)])[col]


def producer_key(*cols: str) -> Column:
    """A number that names one producer's sends to one partition (for grouping, never shown)."""
    return F.xxhash64(*cols)


def by_value(history: DataFrame, deleted: DataFrame | None = None) -> DataFrame:
    """One row per (run_id, value) sent:

    - `ops`, `inv_seq`, `sent_ns` (first invocation), `done_seq`, `done_ns`, `done_code` (the
      last completion: exact when there is one), `fails` (attempts that certainly failed);
    - `ok_n`, `ok_lo`, `ok_ns`, `acks_code`: its acknowledgements with an offset (the first);
      `ok_gone`: those of a topic deleted after them (`deleted`: `observations.deletions`);
    - `pk_lo`, `pk_hi`: the producer and partition of its sends (one producer and partition
      when equal), `pp`: the partition of its (first) acknowledgement.
    """
    s = history.where(F.col("f") == "send")
    went = F.lit(False)
    if deleted is not None:
        s = s.join(F.broadcast(deleted), ["run_id", "topic"], "left")
        went = gone()
    invoke, done = F.col("type") == "invoke", F.col("type") != "invoke"
    ok = (F.col("type") == "ok") & F.col("offset").isNotNull()
    rows = s.select(*VALUE, invoke.alias("inv"), done.alias("done"), ok.alias("ok"), went.alias("gone"),
                    _code(F.col("type"), _TYPE_CODE).alias("type_code"),
                    _code(F.col("acks"), _ACKS_CODE).alias("acks_code"), "seq", "time_ns", "offset",
                    producer_key("run_id", "process", "topic", "partition").alias("pk"),
                    F.when(ok, producer_key("run_id", "topic", "partition")).alias("pp"))

    def over(cond: str, col: str) -> Column:
        return F.when(F.col(cond), F.col(col))
    return rows.groupBy(*VALUE).agg(
        F.count("*").alias("ops"),
        F.min(over("inv", "seq")).alias("inv_seq"), F.min(over("inv", "time_ns")).alias("sent_ns"),
        F.max(over("done", "seq")).alias("done_seq"), F.max(over("done", "time_ns")).alias("done_ns"),
        F.max(over("done", "type_code")).alias("done_code"),
        F.count(F.when(F.col("type_code") == _TYPE_CODE["fail"], 1)).alias("fails"),
        F.count(F.when(F.col("ok"), 1)).alias("ok_n"), F.count(F.when(F.col("ok") & F.col("gone"), 1)).alias("ok_gone"),
        F.min(over("ok", "offset")).alias("ok_lo"), F.min(over("ok", "time_ns")).alias("ok_ns"),
        F.max(over("ok", "acks_code")).alias("acks_code"),
        F.min("pk").alias("pk_lo"), F.max("pk").alias("pk_hi"), F.min("pp").alias("pp"))


def _one_producer() -> Column:
    return F.col("pk_lo") == F.col("pk_hi")


def _irregular_acks() -> Column:
    """The value's acknowledgements need its raw records: more than one, a topic deleted after
    one, or sends from two producers or to two partitions."""
    return (F.col("ok_n") > 0) & ((F.col("ok_n") > 1) | (F.col("ok_gone") > 0) | ~_one_producer())


def _raw(history: DataFrame, values: DataFrame, eager: bool) -> DataFrame | None:
    """The send records of `values` (run_id, value; few), read again; with `eager`, the
    values are found now and None stands for none, so a large input is not read again for
    nothing."""
    if eager:
        values = values.select(*VALUE).localCheckpoint()
        if values.isEmpty():
            return None
    return history.where(F.col("f") == "send").join(F.broadcast(values.select(*VALUE).distinct()), VALUE)


def acknowledgements(v: DataFrame, history: DataFrame, deleted: DataFrame | None = None,
                     eager: bool = False) -> DataFrame:
    """Every acknowledgement with an offset, as (run_id, value, pk, pp, sent_ns, sent_seq,
    offset, ack_ns, acks): `sent_ns` is the value's first invocation by its producer (its
    acknowledgement when none was recorded) and `sent_seq` that record's place in the file,
    `pk` its producer's partition, `pp` the partition. An acknowledgement of a topic deleted
    after it is left out (`deleted`, R40)."""
    regular = (v.where((F.col("ok_n") > 0) & ~_irregular_acks())
               .select(*VALUE, F.col("pk_lo").alias("pk"), "pp", F.coalesce("sent_ns", "ok_ns").alias("sent_ns"),
                       F.coalesce("inv_seq", "done_seq").alias("sent_seq"),
                       F.col("ok_lo").alias("offset"), F.col("ok_ns").alias("ack_ns"),
                       _decode(F.col("acks_code"), _ACKS_CODE).alias("acks")))
    raw = _raw(history, v.where(_irregular_acks()), eager)
    if raw is None:
        return regular
    if deleted is not None:
        raw = raw.join(F.broadcast(deleted), ["run_id", "topic"], "left")
        raw = raw.where(~gone() | (F.col("type") != "ok"))
    key = ["run_id", "process", "topic", "partition", "value"]
    first_sent = Window.partitionBy(*key)
    invoked = F.col("type") == "invoke"
    irregular = (raw.withColumn("first_ns", F.min(F.when(invoked, F.col("time_ns"))).over(first_sent))
                 .withColumn("first_seq", F.min(F.when(invoked, F.col("seq"))).over(first_sent))
                 .where((F.col("type") == "ok") & F.col("offset").isNotNull())
                 .select(*VALUE, producer_key("run_id", "process", "topic", "partition").alias("pk"),
                         producer_key("run_id", "topic", "partition").alias("pp"),
                         F.coalesce("first_ns", "time_ns").alias("sent_ns"),
                         F.coalesce("first_seq", "seq").alias("sent_seq"), "offset",
                         F.col("time_ns").alias("ack_ns"), "acks"))
    return regular.unionByName(irregular)


def sends_backwards(acks: DataFrame) -> DataFrame:
    """One producer's acknowledged offsets on one partition going backwards, in the order it
    first sent the values: a retried batch that landed behind batches sent after it (Kafka's
    reordering with more than one request in flight and no idempotence), or a leader that lost
    what it acknowledged. With one request in flight the send order is the acknowledgement
    order, and a retry keeps the place of its first attempt. Sends of one instant are in the
    order of their records: a simulated producer with several requests in flight sends them
    all at one virtual instant, and ordered by their offsets they could never go backwards
    (trial28: 66 steps reported of 451). `acks` is `acknowledgements`; the rows name the run,
    value, offset and time only (see `nonmonotonic_sends`)."""
    order = Window.partitionBy("pk").orderBy("sent_ns", "sent_seq", "offset")
    return (acks.select("pk", *VALUE, "sent_ns", "sent_seq", "offset", "ack_ns")
            .withColumn("prev_offset", F.lag("offset").over(order))
            .withColumn("prev_value", F.lag("value").over(order))
            .where(F.col("offset") <= F.col("prev_offset"))
            .select(*VALUE, "offset", "prev_value", "prev_offset", F.col("ack_ns").alias("time_ns")))


def nonmonotonic_sends(back: DataFrame, history: DataFrame) -> DataFrame:
    """The rows of `sends_backwards` with the topic, partition and producer of each, read back
    from the acknowledgement's record (the few anomalies: broadcast)."""
    named = (history.where((F.col("f") == "send") & (F.col("type") == "ok"))
             .join(F.broadcast(back.select(*VALUE, "offset", "time_ns")), [*VALUE, "offset", "time_ns"])
             .select(*VALUE, "offset", "time_ns", "topic", "partition", "process").distinct())
    return (back.join(named, [*VALUE, "offset", "time_ns"])
            .select(*PART, "process", "value", "offset", "prev_value", "prev_offset", "time_ns"))


def _pair(a: Column, b: Column) -> Column:
    """An operation and the next one of the same process and value."""
    return F.struct(a["type"].alias("prev_type"), a["time_ns"].alias("invoked"), b["type"].alias("type"),
                    b["time_ns"].alias("time_ns"))


def send_latencies(v: DataFrame, history: DataFrame, eager: bool = False) -> DataFrame:
    """(run_id, f, type, time_ns, invoked, n) per completed send of the workload: its completion
    paired with the invocation just before it of the same process and value. A value sent
    once is one invocation and one completion, paired by the aggregation; a value sent more
    than once (retries reuse values) is paired from its records in order. The final read
    sends nothing, so every send is workload. `eager`: as for `_raw`."""
    simple = (F.col("ops") == 2) & (F.col("done_seq") > F.col("inv_seq")) & _one_producer()
    single = (v.where(simple)
              .select("run_id", _decode(F.col("done_code"), _TYPE_CODE).alias("type"), F.col("done_ns").alias("time_ns"),
                      F.col("sent_ns").alias("invoked")))
    key = ["run_id", "process", "value"]
    ordered = F.array_sort(F.collect_list(F.struct("seq", "type", "time_ns"))).alias("o")
    raw = _raw(history, v.where((F.col("ops") > 2) | ((F.col("ops") == 2) & ~_one_producer())), eager)
    if raw is not None:
        several = (raw.groupBy(*key).agg(ordered)
                   .where(F.size("o") > 1)
                   .select("run_id", F.explode(F.filter(
                       F.zip_with(F.slice("o", 1, F.size("o") - 1), F.slice("o", 2, F.size("o") - 1), _pair),
                       lambda p: (p["prev_type"] == "invoke") & (p["type"] != "invoke"))).alias("p"))
                   .select("run_id", "p.type", "p.time_ns", "p.invoked"))
        single = single.unionByName(several)
    return single.select("run_id", F.lit("send").alias("f"), "type", "time_ns", "invoked", F.lit(1).alias("n"))


def failed_values(v: DataFrame) -> DataFrame:
    """(run_id, value) of every value with a send that certainly failed: the only values an
    aborted read can be of."""
    return v.where(F.col("fails") > 0).select(*VALUE)

