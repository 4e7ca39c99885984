"""Each fault as the span during which it was in force, from `faults.jsonl`.

A `faults.jsonl` line pair (`start`, `end`) records one action; its `end` line is written
once the action was applied, with what it did. A fault is an action that disrupts (a kill,
a pause, a partition...) and did something: an `effect` with `skipped` (max_down) or
`error`, or a kill, pause or shutdown that took no node, means nothing happened, so it is neither a band in the report nor a cause of a
loss. Its span ends at its undo: the first later restart of a node it took down, resume
of a node it paused, heal (without `undo_of`: of every layer) after a partition or slow
link, or the line that names it in `params.undo_of` (a nemesis undo, of its own fault
only), whichever came first; with no undo, at the run's end.
"""
from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from testbed.analysis.ingest import Tables

#: what undoes each disrupting action (DESIGN section 6)
UNDONE_BY: dict[str, str] = {
    "kill": "restart", "lossy-crash": "restart", "disk-loss": "restart", "shutdown": "restart",
    "pause": "resume", "partition": "heal", "slow": "heal",
}


#: the effect's map of the nodes each action took down (DESIGN section 6's actions on nodes;
#: a lossy crash or disk loss of a node already down still cuts its files)
_TAKES = {"kill": "killed", "pause": "paused", "shutdown": "clean"}


def applied(t: Tables) -> DataFrame:
    """Every action that did something, at the time it started: its `end` line (with the
    effect) paired with the `start` line just before it of the same origin and action;
    `applied_ns` is its `end` line's time, once it had done what it did."""
    lines = t.faults.select("run_id", "seq", "time_ns", "do", "target", "resolved", "phase", "effect",
                            F.coalesce(F.col("origin"), F.lit("")).alias("origin"),
                            F.get_json_object("params", "$.undo_of").alias("undo_of"),
                            F.get_json_object("params", "$.loss").alias("loss"),
                            F.get_json_object("params", "$.shape").alias("shape"),
                            F.from_json(F.get_json_object("effect", "$.groups"), "array<array<string>>")
                            .alias("groups"),
                            # a power loss's brokers whose every byte the OS had written back: it cut nothing
                            F.from_json(F.get_json_object("effect", "$.written_back"), "array<string>")
                            .alias("written_back"))
    started = Window.partitionBy("run_id", "origin", "do").orderBy("seq")
    # a kill, pause or shutdown of nodes that were all down already took none (`"paused": {}`):
    # its undo resolves to none either, and it read as in force to the run's end (trial31)
    took = F.get_json_object("effect", F.concat(F.lit("$."), F.element_at(F.create_map(
        *[F.lit(x) for kv in _TAKES.items() for x in kv]), F.col("do"))))
    did_nothing = (F.get_json_object("effect", "$.skipped").isNotNull()
                   | F.get_json_object("effect", "$.error").isNotNull()
                   | (F.col("do").isin(*_TAKES) & (took == "{}")))  # (an effect without the map: not known)
    return (lines.withColumn("start_ns", F.last(F.when(F.col("phase") == "start", F.col("time_ns")), True)
                             .over(started.rowsBetween(Window.unboundedPreceding, 0)))
            .where((F.col("phase") == "end") & ~F.coalesce(did_nothing, F.lit(False)))
            .select("run_id", "seq", F.coalesce("start_ns", "time_ns").alias("start_ns"),
                    F.col("time_ns").alias("applied_ns"), "do", "target", "resolved", "origin", "undo_of", "loss",
                    "shape", "groups", "written_back"))


def fault_spans(t: Tables, bounds: DataFrame) -> DataFrame:
    """(run_id, do, target, resolved, loss, shape, groups, written_back, start_ns, applied_ns,
    end_ns, undone) per applied fault (`groups`: a partition's, as applied; `written_back`: a
    lossy crash's brokers that lost nothing; `applied_ns`: when it had done what it did);
    `bounds` gives each run's `t_last`, the end of a fault never undone."""
    acts = applied(t)
    undone_by = F.create_map(*[F.lit(x) for kv in UNDONE_BY.items() for x in kv])
    faults = (acts.where(F.col("do").isin(*UNDONE_BY))
              .withColumn("undo_do", undone_by[F.col("do")]))
    undos = acts.select("run_id", F.col("seq").alias("u_seq"), F.col("start_ns").alias("u_ns"),
                        F.col("do").alias("u_do"), F.col("resolved").alias("u_resolved"),
                        F.col("undo_of").alias("u_of"))
    # a heal without `undo_of` removes every layer, a nemesis undo its own only; a restart or
    # resume undoes what took any node it names down
    heal = F.col("u_do") == "heal"
    undoes = (F.col("u_seq") > F.col("seq")) & (
        (F.col("u_of") == F.col("origin"))
        | ((F.col("u_do") == F.col("undo_do"))
           & F.when(heal, F.col("u_of").isNull()).otherwise(F.arrays_overlap("u_resolved", "resolved"))))
    first_undo = (faults.join(undos, "run_id", "left").where(undoes)
                  .groupBy("run_id", "seq").agg(F.min("u_ns").alias("undo_ns")))
    return (faults.join(first_undo, ["run_id", "seq"], "left").join(bounds.select("run_id", "t_last"), "run_id")
            .select("run_id", "do", "target", "resolved", "loss", "shape", "groups", "written_back", "start_ns",
                    "applied_ns", F.coalesce("undo_ns", F.greatest("t_last", "start_ns")).alias("end_ns"),
                    F.col("undo_ns").isNotNull().alias("undone")))
