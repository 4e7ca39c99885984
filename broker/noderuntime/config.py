"""A node's configuration, written by the supervisor as `<run>/nodes/<name>.json`.

Parsed once here into a typed object (STYLE: configuration is parsed at the edge); the
timeouts in it are already multiplied by the run's `--time-scale`.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


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
    controller: str  # the name of the active controller
    timing: dict[str, float]  # seconds, scaled
    protocol: dict[str, Any]
    storage: dict[str, Any]  # fsync, writeback (s), segment_bytes
    #: topic -> {"flush": FlushPolicy.to_dict()}
    topics: dict[str, dict] = field(default_factory=dict)
    placement_seed: int = 0

    def peer_name(self, destination: Any) -> str | None:
        """Protocol destinations are broker ids or the word "controller"."""
        if destination == "controller":
            return self.controller
        if isinstance(destination, int):
            return f"broker-{destination}"
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
        return cls(**d)
