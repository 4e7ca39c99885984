"""One seed of a simulation, from the cluster's start to a complete run directory.

The same phases as a run of processes (`testbed/experiment/runner.py`), on virtual time:
start the cluster, run the workload for `duration` while the injector fires the schedule,
stop the clients, undo the faults, converge, read every partition, record the replicas'
final state, shut every node down under control, read the logs from their files. What it
leaves is a run directory in the format the pipeline judges (DESIGN section 7), with
`time_ns` on the virtual clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from broker.client import StepClient
from faults.schedule import build_schedule
from testbed.clients.loops import final_read
from testbed.common.run_files import VIRTUAL_CLOCK
from testbed.experiment.counts import Counts, write_summary
from testbed.experiment.final_state import partitions_now, record_final_state
from testbed.sim.clients import ClientTask
from testbed.sim.cluster import SimCluster
from testbed.sim.scratch import place_data, release_data
from testbed.supervisor.admin import ClusterError
from testbed.supervisor.run_dir import RunDir
from testbed.config.topology_spec import Topology

#: waits after the workload, in virtual seconds (a run of processes scales them by --time-scale)
STOP_CLIENTS = 5.0
CONVERGE = 30.0
FINAL_READ = 20.0


@dataclass
class SeedOutcome:
    converged: bool
    counts: Counts | None
    error: str | None  # why the seed could not run to its end (unjudged)
    virtual_seconds: float


def run_seed(topology: Topology, run_dir: Path, keep_data: bool = False) -> SeedOutcome:
    """Run `topology` (its seed already set) in `run_dir`; never raises for the cluster's sake."""
    place_data(RunDir(run_dir).data)
    cluster = SimCluster(topology, RunDir(run_dir))
    loop = cluster.loop
    begin = loop.now
    converged = False
    workload_ns = workload_end_ns = None
    try:
        cluster.start()
        injector = cluster.injector
        assert injector is not None
        injector.load(build_schedule(topology))
        cluster.start_clients()
        start, workload_ns = loop.now, loop.clock_ns()
        cluster.workload_start = start
        injector.elapsed = lambda: loop.now - start
        injector.duration = topology.duration
        while (due := injector.next_at()) is not None and due < topology.duration:
            loop.run_until(start + due)
            injector.fire_due(due)  # its own time: start + due - start may round below it
        loop.run_until(start + topology.duration)
        workload_end_ns = loop.clock_ns()
        injector.fire_overdue(topology.duration)  # as processes do: those due at the end itself
        injector.elapsed = None
        cluster.workload_start = None
        cluster.stop_clients(STOP_CLIENTS)
        injector.undo_all()
        try:
            cluster.wait_until(lambda s: s.fully_replicated(), timeout=CONVERGE,
                               what="convergence (every partition led, ISR full, replicas level)")
            converged = True
        except ClusterError:
            pass
        reader = ClientTask("final-reader", loop, cluster.net)
        reader.run(final_read(StepClient(cluster.broker_endpoints(), "final-reader", 2.0),
                              cluster.history("final-reader"), partitions_now(cluster.status(), topology),
                              loop.now + FINAL_READ, cluster.clock))
        loop.run_until(loop.now + FINAL_READ + 5.0, lambda: reader.done, poll=0.0)
        reader.kill()
        record_final_state(cluster)
    except ClusterError as e:
        return SeedOutcome(False, None, str(e), loop.now - begin)
    finally:
        cluster.close()
        release_data(cluster.dir.data, keep_data)
    counts = cluster.counts
    write_summary(run_dir, counts, workload_ns, workload_end_ns, clock=VIRTUAL_CLOCK)
    return SeedOutcome(converged, counts, None, loop.now - begin)
