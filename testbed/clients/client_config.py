"""A workload client's configuration, `<run>/clients/<name>.json`: built once by the
supervisor from the topology's `workload:` section, read once by the client process."""
from __future__ import annotations

import json
import signal
from dataclasses import asdict, dataclass
from pathlib import Path

#: the supervisor's go to a client that runs: the workload's time 0 (Jepsen opens every
#: client before its generator starts; a client process takes 0.2 s to start, 4 s on a
#: loaded machine, and a fault `at: 1s` found no write sent)
START = signal.SIGUSR1


@dataclass(frozen=True)
class ProducerSettings:
    acks: str  # "all" | "1" | "0"
    rate: float | None  # records/s; None: as fast as the cluster answers
    batch: int
    retries: int
    retry_backoff: float  # seconds, scaled
    value_bytes: int = 0  # benchmarks pad values to a record size
    in_flight: int = 1  # produce requests outstanding at once (max.in.flight.requests.per.connection)


@dataclass(frozen=True)
class ConsumerSettings:
    from_: str  # "earliest" | "latest"
    max_wait: float  # the long-poll wait of each fetch, seconds, scaled


@dataclass(frozen=True)
class ClientConfig:
    process: str  # producer-0 | consumer-1: the `process` of its history records
    topic: str
    partitions: tuple[int, ...]
    brokers: dict[int, str]  # broker id -> endpoint
    history: Path
    supervisor_pid: int
    stats_endpoint: str | None
    request_timeout: float  # seconds, scaled
    producer: ProducerSettings | None = None
    consumer: ConsumerSettings | None = None
    #: a producer given no partitions of its own, or a consumer of a topic that topic faults
    #: change: it follows the topic's partitions as they grow or shrink (R40)
    follow_partitions: bool = False
    #: (i, count): consumer i of the `count` that share a topic reads the partitions p with
    #: p mod count == i, those added later included
    share_of: tuple[int, int] = (0, 1)
    #: `backend: netns`: the clients' network namespace, joined before any socket opens
    netns: str | None = None
    #: once running, the client says so to the supervisor and waits for its go (`START`),
    #: sent at the workload's time 0; else (no supervisor listens) it starts at once
    wait_for_go: bool = False

    def to_json(self) -> str:
        d = asdict(self)
        d["history"] = str(self.history)
        return json.dumps(d, indent=1)

    @classmethod
    def load(cls, path: Path) -> "ClientConfig":
        d = json.loads(Path(path).read_text())
        d["history"] = Path(d["history"])
        d["partitions"] = tuple(d["partitions"])
        d["share_of"] = tuple(d["share_of"])
        d["brokers"] = {int(k): v for k, v in d["brokers"].items()}
        d["producer"] = ProducerSettings(**d["producer"]) if d["producer"] else None
        d["consumer"] = ConsumerSettings(**d["consumer"]) if d["consumer"] else None
        return cls(**d)
