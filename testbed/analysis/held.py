"""Frames computed once and held by the session (`localCheckpoint`), several at once.

Spark Connect sends a frame's whole plan with every request, and the server analyses all of
it again: a small run's judgment spent 7.3 s of its 8.5 s in Spark's rules, 5.7 s of it the
analyzer, because every check and figure carried the run tables, observations, bounds and
spans once more. A held frame is a reference to computed rows, so what is built on it is
analysed from there. Each hold is a request that waits for its rows; the holds of a round
are independent, so they are asked for at once.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame
from pyspark.sql.connect.session import SparkSession as RemoteSession

from testbed.common.pools import thread_pool

#: How many holds are asked for at once: the server computes them on its two cores meanwhile
HOLDERS = 4


@contextmanager
def use_session(session: RemoteSession) -> Iterator[None]:
    """Make `session` this thread's active one while the block runs. PySpark gives the frame a
    checkpoint returns to the thread's *active* session, not to the checkpointed frame's: a
    rehearsal, with a session of its own, got frames of the pipeline's session and failed at
    its first join (SESSION_NOT_SAME)."""
    local = RemoteSession._active_session
    before = getattr(local, "session", None)
    local.session = session
    try:
        yield
    finally:
        local.session = before


def held(frame: DataFrame) -> DataFrame:
    """`frame` computed now and held by its own session."""
    with use_session(frame.sparkSession):
        return frame.localCheckpoint()


def hold(frames: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """Each of `frames` held (`held`), all asked for at once; the same keys."""
    if len(frames) <= 1:
        return {name: held(frame) for name, frame in frames.items()}
    with thread_pool(min(HOLDERS, len(frames)), "isrlab-hold") as pool:
        return dict(zip(frames, pool.map(held, frames.values())))
