"""The workload's client processes for one run, as configurations: built once from the
topology's `workload:` section (the supervisor starts one process per configuration)."""
from __future__ import annotations

import os
from pathlib import Path

from testbed.clients.client_config import (
    ClientConfig,
    ConsumerSettings,
    ProducerSettings,
)
from testbed.config.topology_spec import TOPIC_ACTIONS, Topology, fault_topic

#: a client's request timeout, its first retry backoff and a consumer's long-poll wait,
#: before --time-scale
CLIENT_REQUEST_TIMEOUT = 2.0
RETRY_BACKOFF = 0.05
CONSUMER_MAX_WAIT = 0.1
#: how long the supervisor waits for every client to run before the workload's time 0
#: (`StatsInbox.wait_for`), before --time-scale; one not running by then gets its go once it
#: runs (`Cluster.release_late`)
CLIENT_START_WAIT = 30.0


def build_client_configs(t: Topology, brokers: dict[int, str], history: Path, stats_endpoint: str | None,
                         time_scale: float, value_bytes: int = 0, netns: str | None = None
                         ) -> dict[str, ClientConfig]:
    """producer-0, producer-1, ... over the topic's partitions (or those named); consumers
    split a topic's partitions among themselves (partition p to consumer p mod count).
    `netns`: the clients' namespace on the netns backend."""
    common = {"brokers": dict(brokers), "history": history, "supervisor_pid": os.getpid(),
              "stats_endpoint": stats_endpoint, "request_timeout": CLIENT_REQUEST_TIMEOUT * time_scale,
              "netns": netns, "wait_for_go": stats_endpoint is not None}
    out: dict[str, ClientConfig] = {}
    for spec in t.workload.producers:
        parts = tuple(spec.partitions) if spec.partitions else tuple(range(t.first_partitions(spec.topic)))
        settings = ProducerSettings(acks=spec.acks, rate=spec.rate, batch=spec.batch, retries=spec.retries,
                                    retry_backoff=RETRY_BACKOFF * time_scale, value_bytes=value_bytes,
                                    in_flight=spec.in_flight)
        for _ in range(spec.count):
            name = f"producer-{sum(1 for n in out if n.startswith('producer-'))}"
            out[name] = ClientConfig(process=name, topic=spec.topic, partitions=parts, producer=settings,
                                     follow_partitions=not spec.partitions, **common)
    consumers = 0
    for spec in t.workload.consumers:
        total = t.first_partitions(spec.topic)
        settings_c = ConsumerSettings(from_=spec.from_, max_wait=CONSUMER_MAX_WAIT * time_scale)
        follow = _changed_by_faults(t, spec.topic)
        for i in range(spec.count):
            name = f"consumer-{consumers}"
            consumers += 1
            parts = tuple(p for p in range(total) if p % spec.count == i)
            if parts or follow:  # a follower with no share yet may get one from an add-partitions
                out[name] = ClientConfig(process=name, topic=spec.topic, partitions=parts, consumer=settings_c,
                                         follow_partitions=follow, share_of=(i, spec.count), **common)
    return out


def _changed_by_faults(t: Topology, topic: str) -> bool:
    """Whether a topic fault (R40) changes the topic's partitions during the run: only then do
    its consumers look at the metadata for them (a request a second they need not make else)."""
    return any(getattr(f, "do", None) in TOPIC_ACTIONS and fault_topic(f.do, f.params) == topic for f in t.faults)
