"""Where the checks must look: at every record of a small input, at the few suspect ones of a
large input.

The checks over offsets and committed values (`offsets.suspects` and the checks it gates,
duplicates, lost writes, aborted reads) are exact and cheap on a few million rows, but each
is a grouping or a join of every record with every other. For a large input a first pass
narrows them, and can only over-include: `blocks` compares every replica's file, every
reader's records and the acknowledgements with the final leader's file a block of offsets
at a time, and the per-value aggregation (`values.by_value`, which the figures and the
nonmonotonic-sends check need anyway) says which values were acknowledged twice or failed.
The exact checks then read only the blocks where a source differs or an acknowledgement is
not plainly committed, the values that may be committed at two places, and the values with
a failed attempt; a clean ten-million-record run leaves them nothing to read.
"""
from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from testbed.analysis import blocks
from testbed.analysis.ingest import Tables
from testbed.analysis.observations import (
    PART,
    acknowledged,
    committed_log,
    deletions,
    poll_records,
    read_coverage,
    replica_logs,
    without_deleted,
)
from testbed.analysis.runinfo import ConfigTables
from testbed.analysis.values import VALUE, by_value, failed_values


@dataclass(frozen=True)
class Observed:
    """What the history and the final files say, whole (lazy frames over the run tables)."""

    acked: DataFrame  # acknowledgements (`observations.acknowledged`)
    polls: DataFrame  # polled records (`observations.poll_records`)
    logs: DataFrame  # final replicas' records (`observations.replica_logs`)
    committed: DataFrame  # the final committed log (`observations.committed_log`)
    deleted: DataFrame | None  # `observations.deletions`, if a run deletes a topic


@dataclass(frozen=True)
class Scope:
    """The rows the exact checks read; each frame is all of its kind for a small input."""

    acked: DataFrame
    polls: DataFrame
    logs: DataFrame
    duplicated: DataFrame | None  # the only values the duplicates check need look at (None: all)
    failed: DataFrame  # values with a failed attempt (`values.failed_values`)
    coverage: DataFrame  # `observations.read_coverage`
    values: DataFrame  # `values.by_value` of the history
    may_fail: bool = True  # some value has a failed attempt
    may_duplicate: bool = True  # some value is committed at two places
    narrow: bool = False  # the rows are a large input's suspect ones (`narrowed`)


def observe(t: Tables, config: ConfigTables) -> Observed:
    """The whole observations; a topic deleted (R40) takes its acknowledgements and reads along."""
    deleted = deletions(t) if config.deletes_topics else None
    if deleted is not None:
        acked, polls = without_deleted(acknowledged(t, True), t), without_deleted(poll_records(t, True), t)
    else:
        acked, polls = acknowledged(t), poll_records(t)
    logs = replica_logs(t)
    return Observed(acked, polls, logs, committed_log(t, polls, logs), deleted)


def whole(t: Tables, config: ConfigTables, o: Observed) -> Scope:
    """Every row: a small input's checks are cheaper than narrowing them."""
    v = by_value(t.history, o.deleted)
    return Scope(o.acked, o.polls, o.logs, None, failed_values(v), read_coverage(t, config, o.polls, o.logs), v)


def _only(frame: DataFrame, suspect: DataFrame) -> DataFrame:
    """The rows of `frame` in the `suspect` blocks (computed now); none without reading any
    when no block is suspect (a clean run's case)."""
    if suspect.isEmpty():
        return frame.limit(0)
    return blocks.within(frame, suspect).localCheckpoint()


def narrowed(t: Tables, o: Observed) -> Scope:
    """The suspect rows of a large input (see the module's docstring). Runs the narrowing
    passes now; the frames it returns are small and held by the session."""
    acked, polls, logs = o.acked, o.polls, o.logs
    prints = blocks.fingerprints(t, polls, acked).persist()
    compared = blocks.compare(t, prints).localCheckpoint()
    v = by_value(t.history, o.deleted).persist()
    suspect = compared.where(F.col("suspect")).select(*PART, "block").localCheckpoint()
    # A value committed at two places was acknowledged twice, or lies in a block whose
    # committed records were not each acknowledged once where they lie.
    duplicated = v.where(F.col("ok_n") > 1).select(*VALUE)
    unacked = compared.where(~F.col("acked_whole")).select(*PART, "block").localCheckpoint()
    if not unacked.isEmpty():
        near = committed_log(t, blocks.within(polls, unacked), blocks.within(logs, unacked))
        duplicated = duplicated.unionByName(near.select(*VALUE))
    duplicated = duplicated.distinct().localCheckpoint()
    failed = failed_values(v).localCheckpoint()
    coverage = blocks.coverage(t, prints, logs).localCheckpoint()
    prints.unpersist()
    return Scope(_only(acked, suspect), _only(polls, suspect), _only(logs, suspect), duplicated, failed, coverage,
                 v, may_fail=not failed.isEmpty(), may_duplicate=not duplicated.isEmpty(), narrow=True)
