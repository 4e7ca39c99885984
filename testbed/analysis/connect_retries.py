"""How a Spark Connect client of the pipeline retries a request after a transport error.
Apart from `session` because it needs PySpark's Connect client, whose import (pandas,
pyarrow, grpc) takes a second that the JVM's start should not wait for."""
from __future__ import annotations

from pyspark.sql.connect.client.retries import DefaultPolicy

from testbed.config.cli_values import connect_server_refuses

#: How often a request to the Spark Connect server is tried again after a transport error:
#: Spark's default tolerates a server gone for ten minutes (15 tries, backoff x4 from 50 ms),
#: so a judgment on a server that died waited ten minutes to say so, and so did `stop_spark`;
#: 5 tries wait about 17 s in all.
RETRIES = 5


class WhileListening(DefaultPolicy):
    """Spark's retries of a transport error, `RETRIES` times, while the server still
    listens: a JVM killed mid-judgment refuses connections at once, and each request made
    after (the judgment's, its threads', clearing the cache, stopping) waited out the
    retries: the command took 36 s to say that the runs could not be judged."""

    def __init__(self, url: str) -> None:
        super().__init__(max_retries=RETRIES)
        self._url = url

    def can_retry(self, e: BaseException) -> bool:
        return super().can_retry(e) and not connect_server_refuses(self._url)
