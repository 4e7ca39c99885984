"""Names of run-directory files that one layer writes and another reads (the experiment writes,
the analysis reads), kept here so that neither imports the other for a name."""
from __future__ import annotations

#: the workload's time 0 (`{"workload_start_ns": ...}`), written as the workload begins: a run
#: whose supervisor was killed writes no summary.json, and was judged on a clock starting at
#: the cluster's first event, 0.5 s before the workload (trial31)
STARTED = "clients/started.json"

#: the files of a run's `final/` whose sizes, as the run wrote them, `summary.json` keeps
#: (`final_bytes`): a log cut at a line's end still reads as whole lines, so only its size
#: tells the judgment that it was changed after the run
FINAL_FILES = ("replicas.jsonl", "logs.jsonl")

#: `summary.json`'s `clock` in a run of the deterministic simulation: its times are the
#: event loop's, so the report says none of them is wall time
VIRTUAL_CLOCK = "virtual"

#: a run's directory of its judgment (its Parquet tables, the JVM's log): a judgment holds a lock
#: on it while under way (`analysis.pipeline._sole_judgment`), which `run.py status` reads
ANALYSIS_DIR = "analysis"
