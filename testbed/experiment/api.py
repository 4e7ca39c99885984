"""`from testbed import Cluster`: the step-by-step Python API of DESIGN section 9.

The supervisor's `Cluster` (start, produce, faults, waits, admin) and the end a run of
`python run.py` has: `finish` heals, converges, reads every partition to its end, records
the final state and judges the run with the pipeline. It lives here, above both the
supervisor and the analysis, because it is the one place that joins them.
"""
from __future__ import annotations

from testbed.analysis.pipeline import analyze_runs
from testbed.analysis.session import started, stop_spark
from testbed.analysis.verdict import RunVerdict
from testbed.common.console import user_console
from testbed.experiment.runner import end_of_run, write_counts
from testbed.supervisor.cluster import Cluster as SupervisedCluster


class Cluster(SupervisedCluster):
    def finish(self, spark_master: str | None = None) -> RunVerdict:
        """Heal, converge, final read, pipeline: the run ends as `python run.py` ends one
        (every fault in force undone, the nodes shut down under control, `final/`,
        `summary.json`, `results.json` and `report.html` written) and its verdict is
        returned (`ok`: every expectation held; None: it could not be judged). An analysis
        JVM it starts is stopped again; one the process had already is left to its owner."""
        self.ensure_open()
        assert self.injector is not None, "start the cluster first"
        self.stop_clients(timeout=self.scaled(5.0))
        self.injector.undo_all()
        end_of_run(self, self.topology, user_console(stderr=True))  # a cluster that never converges says so
        self.close()
        write_counts(self.dir.root)
        had_spark = started()
        try:
            return analyze_runs([self.dir.root], spark_master)[0]
        finally:
            if not had_spark:
                stop_spark()
