"""Thread pools whose exit waits for their work, except when the command is interrupted.

`with ThreadPoolExecutor()` waits for every task at its exit, whatever ended the block. An
interrupt (Ctrl-C, SIGTERM) reaches the main thread only, so a judgment interrupted while a
pool ran Spark queries beside it waited for them to finish: 6-9 s without a word, the JVM
busy (trial38). On an interrupt the pool's queued tasks are cancelled and its running ones
abandoned: the command's clean-up (`session.stop_spark`) kills the JVM they wait on, which
ends them.
"""
from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager


@contextmanager
def thread_pool(max_workers: int, name: str) -> Iterator[ThreadPoolExecutor]:
    """A `ThreadPoolExecutor` of `max_workers` threads named `name`, as `with` gives one,
    but not waited for on a KeyboardInterrupt."""
    pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix=name)
    try:
        yield pool
    except KeyboardInterrupt:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    except BaseException:
        pool.shutdown()
        raise
    pool.shutdown()
