"""A node's configuration, written by the supervisor as `<run>/nodes/<name>.json`.

Built once from the topology by the supervisor and parsed once here into typed objects
(STYLE: configuration is parsed at the edge): the protocol settings and every timeout
(already multiplied by the run's `--time-scale`) in the protocol's own types, so neither
role reads a raw value or repeats a default.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from broker.common.names import broker_name
from broker.protocol.settings import ProtocolSettings, Timeouts
from broker.storage.flush import FlushPolicy


@dataclass(frozen=True)
class StorageSettings:
    fsync: str = "simulated"  # real | simulated (DESIGN section 4)
    writeback: float = 5.0  # seconds, scaled
    segment_bytes: int = 1 << 20


@dataclass
class NodeConfig:
    name: str  # broker-1 | controller-1
    kind: str  # broker | controller
    id: int
    rack: str | None
    run_dir: Path
    data_dir: Path
    endpoint: str
    control_endpoint: str
    token: str
    supervisor_pid: int
    #: node name -> endpoint, every node of the cluster (itself included)
    peers: dict[str, str]
    controller_ids: list[int]  # the voters of the controller quorum (R22)
    timeouts: Timeouts
    protocol: ProtocolSettings
    storage: StorageSettings
    #: topic -> its flush policy
    flush: dict[str, FlushPolicy] = field(default_factory=dict)
    placement_seed: int = 0
    #: a controller snapshots its metadata log every this many applied records
    metadata_snapshot_records: int = 1000
    #: `backend: netns`: the network namespace the node joins before opening a socket, and
    #: the ipc endpoint its ROUTER also binds, for the supervisor outside the namespaces
    netns: str | None = None
    local_endpoint: str | None = None

    def peer_name(self, destination: Any) -> str | None:
        """Protocol destinations are broker ids or node names."""
        if isinstance(destination, int):
            return broker_name(destination)
        if isinstance(destination, str) and destination in self.peers:
            return destination
        return None

    def to_json(self) -> str:
        d = asdict(self)
        d["run_dir"] = str(self.run_dir)
        d["data_dir"] = str(self.data_dir)
        return json.dumps(d, indent=1, sort_keys=True)

    @classmethod
    def load(cls, path: Path) -> "NodeConfig":
        d = json.loads(Path(path).read_text())
        d["run_dir"] = Path(d["run_dir"])
        d["data_dir"] = Path(d["data_dir"])
        t = d["timeouts"]
        t["controller_election_timeout"] = tuple(t["controller_election_timeout"])
        d["timeouts"] = Timeouts(**t)
        d["protocol"] = ProtocolSettings(**d["protocol"])
        d["storage"] = StorageSettings(**d["storage"])
        d["flush"] = {topic: FlushPolicy(**policy) for topic, policy in d["flush"].items()}
        return cls(**d)
