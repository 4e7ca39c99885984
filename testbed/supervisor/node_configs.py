"""Every node's configuration for one run, built once from the topology (STYLE: parsed at
the edge) in the types the node reads: `broker.noderuntime.config.NodeConfig`."""
from __future__ import annotations

import dataclasses
import os
import socket
from pathlib import Path

from broker.noderuntime.config import NodeConfig, StorageSettings
from broker.protocol.settings import Timeouts
from testbed.supervisor.netns import NetnsNetwork
from testbed.supervisor.run_dir import RunDir
from testbed.config.specs import NodeSpec, Timing
from testbed.config.topology_spec import Topology


def node_timeouts(timing: Timing) -> Timeouts:
    """The node's timeouts: the topology's `timing:`, Kafka's defaults for the rest."""
    return Timeouts(**{f.name: getattr(timing, f.name) for f in dataclasses.fields(timing)})


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _endpoints(nodes: list[NodeSpec], run_dir: RunDir, tcp: bool,
               network: NetnsNetwork | None) -> dict[str, tuple[str, str, str | None]]:
    """Each node's (request, control, local) endpoints: ipc sockets in the run, or loopback
    ports; on netns its address in its namespace, with the ipc sockets kept for the
    supervisor (control, and `local`, a second endpoint of the request socket)."""
    sockdir: Path = run_dir.socket_dir()
    if tcp and network is None:
        return {n.name: (f"tcp://127.0.0.1:{_free_port()}", f"tcp://127.0.0.1:{_free_port()}", None) for n in nodes}
    out: dict[str, tuple[str, str, str | None]] = {}
    for n in nodes:
        ipc, control = f"ipc://{sockdir}/{n.name}.sock", f"ipc://{sockdir}/{n.name}.control.sock"
        out[n.name] = (ipc, control, None) if network is None else (network.endpoint(n.name), control, ipc)
    return out


def build_node_configs(topology: Topology, nodes: list[NodeSpec], run_dir: RunDir, token: str,
                       time_scale: float, network: NetnsNetwork | None = None) -> dict[str, NodeConfig]:
    """`network`: the run's namespaces on the netns backend, where each node joins its own and
    also binds an ipc endpoint for the supervisor, which stays outside them."""
    t = topology
    endpoints = _endpoints(nodes, run_dir, t.network.transport == "tcp", network)
    peers = {name: ep[0] for name, ep in endpoints.items()}
    timeouts = node_timeouts(t.timing).scaled(time_scale)
    storage = StorageSettings(fsync=t.storage.fsync, writeback=t.storage.writeback * time_scale,
                              segment_bytes=t.storage.segment_bytes)
    flush = {tp.name: tp.flush for tp in t.topics}
    controller_ids = [c.id for c in t.cluster.controllers]
    return {spec.name: NodeConfig(
        name=spec.name, kind=spec.kind, id=spec.id, rack=spec.rack, run_dir=run_dir.root.resolve(),
        data_dir=run_dir.data_dir(spec.name).resolve(), endpoint=endpoints[spec.name][0],
        control_endpoint=endpoints[spec.name][1], token=token, supervisor_pid=os.getpid(), peers=peers,
        controller_ids=controller_ids, timeouts=timeouts, protocol=t.protocol, storage=storage, flush=flush,
        placement_seed=t.seed, metadata_snapshot_records=t.cluster.metadata_snapshot_records,
        netns=network.namespace(spec.name) if network is not None else None,
        local_endpoint=endpoints[spec.name][2]) for spec in nodes}
