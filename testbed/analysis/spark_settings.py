"""The Spark settings of every session isrlab makes, embedded or as a Connect server.

No UI (it costs a port and a thread pool for nothing here), 4 shuffle partitions (the
default 200 turns every small aggregation into 200 tasks), 4 GiB of driver memory, and a
short history of jobs, stages and SQL executions: even without the UI the driver keeps up
to 1,000 of each (and 100,000 tasks), and a process that judges run after run (a test
worker, a matrix, a long-lived server) ran out of heap on that history alone.
"""
from __future__ import annotations

import os
from pathlib import Path

#: Spark's configuration directory unless the user has one: its log4j2.properties keeps the
#: JVM to errors, so the user's terminal shows the verdict, not Spark's notices
SPARK_CONF_DIR = Path(__file__).with_name("spark_conf")
LOG4J2_PROPERTIES = SPARK_CONF_DIR / "log4j2.properties"
#: The user's own Spark configuration directory, if any, as this process found it (isrlab's
#: own JVM then reads it, and starts without a class archive: see `class_archive`)
USER_CONF_DIR = os.environ.get("SPARK_CONF_DIR")

SETTINGS: tuple[tuple[str, str], ...] = (
    ("spark.ui.enabled", "false"),
    ("spark.ui.showConsoleProgress", "false"),
    ("spark.sql.shuffle.partitions", "4"),
    ("spark.default.parallelism", "4"),
    ("spark.driver.memory", "4g"),
    ("spark.sql.ui.retainedExecutions", "20"),
    ("spark.ui.retainedJobs", "50"),
    ("spark.ui.retainedStages", "100"),
    ("spark.ui.retainedTasks", "2000"),
    ("spark.sql.session.timeZone", "UTC"),
    ("spark.sql.ansi.enabled", "false"),
    # The resolved plans a Spark Connect session keeps (`job.resolve`): a judgment asks about
    # a few dozen frames whose plans later ones share.
    ("spark.connect.session.planCache.maxSize", "256"),
    # The checks join the same tables many times; inferring filters from constraints over
    # such plans grows exponentially and exhausts the driver's heap for a tiny input.
    ("spark.sql.constraintPropagation.enabled", "false"),
)

#: The driver memory of a `run.py spark up` server, which judges whatever runs it is handed,
#: run after run, in one JVM (local mode: its executors and caches share that heap): a sim
#: sweep of 150 seeds of three controllers (2.2 M history records, 243 MB) failed on a 4 GiB
#: server in 3 of 7 judgments (Java heap space while serializing a task, or a broadcast it
#: could not build: every seed unjudged) and passed in an embedded JVM of 4 GiB started for
#: it; with 8 GiB it passed 2 of 2, its heap grown to all 8 (5.8 in use). G1 commits the heap
#: as it is used: a server that judged only small runs holds 2-3 GiB.
SERVER_DRIVER_MEMORY = "8g"

#: The JIT of a JVM started to judge a small input (see `session.get_spark`). Such a judgment
#: is dozens of small queries, each new code to the JVM, over a few thousand rows: the
#: optimising compiler (C2) spent half the JVM's CPU compiling code that then ran for
#: milliseconds (measured on the quickstart's run: C2 threads 9-13 s of 25-32 s of JVM CPU,
#: on two cores). C1 alone compiles cheaply; with room for its code (the default 240 MB cache
#: filled and its sweeper then ate the gain) a cold judgment went from 58-62 s to 36-40 s and
#: a warm one stayed at 11-14 s. Millions of records per query want C2's faster code, so a
#: JVM started for an input above `session.C1_INPUT_BYTES` keeps the tiered JIT
#: (`LARGE_INPUT_JIT`).
SMALL_INPUT_JIT = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=512m"

#: The JIT of a JVM started to judge a large input: tiered, with the thresholds at which a
#: method goes on to the optimising compiler (C2, tier 4) ten times the JVM's. The loops that
#: run for every row (the JSON parser, the Parquet writer, the generated operators) cross
#: them within seconds and run C2's code, three times C1's speed on the ingest's parse; the
#: planner's and the scheduler's code, warm but not hot, stays with C1 instead of keeping
#: C2's two threads busy beside the executors on two cores. 10M synthetic records (3 GB):
#: 122 and 114 s against 128 and 129 s with the JVM's thresholds, interleaved, the JVM's CPU
#: 216-231 s against 245-247 s (2026-11-28, twelfth session).
LARGE_INPUT_JIT = ("-XX:Tier4InvocationThreshold=50000 -XX:Tier4MinInvocationThreshold=6000 "
                   "-XX:Tier4CompileThreshold=150000 -XX:Tier4BackEdgeThreshold=400000")

#: The garbage collector of a JVM started to judge a small input: the parallel collector
#: with a 2 GiB initial heap (committed as it is touched). G1, the JVM's choice on this
#: machine, runs concurrent threads and barriers on every reference store that pay off for
#: large heaps and short pauses; a judgment of a few megabytes wants neither. A cold
#: `analyze` of the quickstart's run: 16.7-19.2 s (8 runs) with G1, 14.7-16.5 s (5) with this
#: (2026-11-28, eleventh session; -Xmn1g on top, and the serial collector, were slower).
SMALL_INPUT_GC = "-XX:+UseParallelGC -Xms2g"

#: The Spark settings of a JVM started to judge a small input. Spark sizes its memory pages
#: (hash aggregations, sorts, the hash tables of broadcast joins) from the execution memory
#: over the cores: 64 MB here. A small judgment builds dozens of such tables over a few rows,
#: each a zeroed 64 MB array that the block manager keeps until the cleaner notices its
#: broadcast is gone: one cold `analyze` of the quickstart's run held 1.1 GB of them (its
#: live heap after a collection), and its collector copied and compacted them. With 2 MB
#: pages it holds 150-180 MB, collects 10 times instead of 14, and takes 12.6-13.8 s instead
#: of 13.6-14.4 s (2026-11-28, eleventh session; 1 MB pages measured the same). A row larger
#: than a page gets a page of its own size.
SMALL_INPUT_SETTINGS: tuple[tuple[str, str], ...] = (("spark.buffer.pageSize", "2m"),)

#: Options of every JVM isrlab starts: no performance-data file in /tmp/hsperfdata_<user>
#: (nothing here reads it; `jcmd` attaches by pid without it), so a JVM ended by SIGKILL, as
#: `session.stop_spark` ends its own, leaves nothing there.
JVM_OPTIONS = "-XX:-UsePerfData"

#: What makes a JVM isrlab starts for itself serve Spark Connect too (see `session._embedded`):
#: the plugin starts the server with the driver, on a loopback port the system picks.
CONNECT_SETTINGS: tuple[tuple[str, str], ...] = (
    ("spark.plugins", "org.apache.spark.sql.connect.SparkConnectPlugin"),
    ("spark.connect.grpc.binding.address", "127.0.0.1"),
    ("spark.connect.grpc.binding.port", "0"),
)
