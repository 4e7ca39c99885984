"""The materialised metadata: what the metadata log says after its records, in log order (R3).

The controller replays every record it appends into its own image, and each broker replays
the records it fetches into its own; both then decide on the image, never on the deltas, so
a broker that sees several changes at once lands on the same state as one that saw each.

A record that names an unknown broker or topic, or a stale broker epoch, is not applied:
`apply` returns False for it so the caller can count it. Such a record cannot come from a
correct controller; refusing it keeps one bad record from corrupting the image.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from broker.common.errors import Errors
from broker.protocol.messages import MetadataResponse, PartitionMetadata
from broker.protocol.records import (
    BadRecord,
    BrokerRegistrationChangeRecord,
    LeaderChangeRecord,
    MetadataRecord,
    PartitionCountRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    from_dict,
    to_dict,
)


@dataclass
class BrokerRegistration:
    """One broker's current registration (R23): the session `broker_epoch` names."""
    broker_id: int
    broker_epoch: int
    incarnation_id: str
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    clean: bool
    registered_offset: int  # the metadata offset of its RegisterBrokerRecord (R24: unfence)
    endpoint: str = ""


class OutOfOrderRecord(ValueError):
    """A record offered at an offset not above the last applied one: the caller replays wrong."""


class MetadataImage:
    def __init__(self) -> None:
        self.offset = -1
        self.brokers: dict[int, BrokerRegistration] = {}
        self.topics: dict[str, TopicRecord] = {}
        #: each topic's id: the offset of the TopicRecord that made it. A name deleted and made
        #: again is another topic (Kafka's topic ids, KIP-516), which a broker that missed the
        #: deletion (its log compacted into a snapshot) can only tell by this.
        self.topic_ids: dict[str, int] = {}
        self.partitions: dict[tuple[str, int], PartitionRecord] = {}

    # ------------------------------------------------------------------ replay
    def apply(self, offset: int, record: MetadataRecord) -> bool:
        """Apply `record`, found at `offset` of the metadata log (R3).

        Returns False, changing nothing but the offset, when the record names an unknown
        broker or topic, a partition outside its topic, a broker epoch that is not the
        broker's current one, or a partition count that does not grow the topic. Raises
        OutOfOrderRecord when `offset` is not above `self.offset`.
        """
        if offset <= self.offset:
            raise OutOfOrderRecord(f"metadata record at offset {offset}, image already at {self.offset}")
        self.offset = offset
        if isinstance(record, RegisterBrokerRecord):
            self.brokers[record.broker_id] = BrokerRegistration(
                broker_id=record.broker_id, broker_epoch=record.broker_epoch,
                incarnation_id=record.incarnation_id, rack=record.rack, fenced=record.fenced,
                in_controlled_shutdown=False, clean=record.clean, registered_offset=offset,
                endpoint=record.endpoint)
            return True
        if isinstance(record, BrokerRegistrationChangeRecord):
            broker = self.brokers.get(record.broker_id)
            if broker is None or broker.broker_epoch != record.broker_epoch:
                return False
            if record.fenced is not None:
                broker.fenced = record.fenced
            if record.in_controlled_shutdown is not None:
                broker.in_controlled_shutdown = record.in_controlled_shutdown
            return True
        if isinstance(record, UnregisterBrokerRecord):
            return self._unregister_broker(record.broker_id, record.broker_epoch)
        if isinstance(record, TopicRecord):
            if record.name in self.topics:
                return False
            self.topics[record.name] = record
            self.topic_ids[record.name] = offset
            return True
        if isinstance(record, LeaderChangeRecord):
            return True
        if isinstance(record, PartitionRecord):
            topic = self.topics.get(record.topic)
            if topic is None or not 0 <= record.partition < topic.partitions:
                return False
            self.partitions[(record.topic, record.partition)] = record
            return True
        if isinstance(record, RemoveTopicRecord):
            return self._remove_topic(record.name)
        if isinstance(record, PartitionCountRecord):
            return self._grow_topic(record.name, record.partitions)
        return False

    def _unregister_broker(self, broker_id: int, broker_epoch: int) -> bool:
        """R39: the registration goes, but only the one the record names: a record for an earlier
        epoch must not remove the broker's newer registration."""
        broker = self.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            return False
        del self.brokers[broker_id]
        return True

    def _remove_topic(self, name: str) -> bool:
        """R40: the topic and every partition of it go at once, so that the name is free for a
        new topic whose partitions start over (epochs from 0)."""
        topic = self.topics.pop(name, None)
        if topic is None:
            return False
        del self.topic_ids[name]
        for index in range(topic.partitions):
            self.partitions.pop((name, index), None)
        return True

    def _grow_topic(self, name: str, partitions: int) -> bool:
        """R40: partitions are only ever added; their PartitionRecords come after this record."""
        topic = self.topics.get(name)
        if topic is None or partitions <= topic.partitions:
            return False
        self.topics[name] = replace(topic, partitions=partitions)
        return True

    # ------------------------------------------------------------------ snapshots
    def to_state(self) -> dict[str, Any]:
        """The whole image as plain data (a metadata snapshot, KIP-630): what replaying the
        log up to `offset` built, so that a controller or broker can start from it."""
        return {"offset": self.offset,
                "brokers": [asdict(b) for _, b in sorted(self.brokers.items())],
                "topics": [to_dict(t) for _, t in sorted(self.topics.items())],
                "topic_ids": dict(sorted(self.topic_ids.items())),
                "partitions": [to_dict(p) for _, p in sorted(self.partitions.items())]}

    @classmethod
    def from_state(cls, state: Any) -> MetadataImage:
        """The image `to_state` described; raises BadRecord for anything else."""
        image = cls()
        try:
            image.offset = int(state["offset"])
            for b in state["brokers"]:
                image.brokers[int(b["broker_id"])] = BrokerRegistration(**b)
            for t in state["topics"]:
                topic = from_dict(t)
                if not isinstance(topic, TopicRecord):
                    raise BadRecord(f"a topic of the snapshot is a {type(topic).__name__}")
                image.topics[topic.name] = topic
            image.topic_ids = {str(name): int(topic_id) for name, topic_id in state["topic_ids"].items()}
            if image.topic_ids.keys() != image.topics.keys():
                raise BadRecord("the snapshot's topic ids are not those of its topics")
            for p in state["partitions"]:
                partition = from_dict(p)
                if not isinstance(partition, PartitionRecord):
                    raise BadRecord(f"a partition of the snapshot is a {type(partition).__name__}")
                image.partitions[(partition.topic, partition.partition)] = partition
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise BadRecord(f"malformed metadata snapshot: {e!r}") from None
        return image

    # ------------------------------------------------------------------ queries
    def partition(self, topic: str, partition: int) -> PartitionRecord | None:
        return self.partitions.get((topic, partition))

    def partitions_of(self, topic: str) -> list[PartitionRecord]:
        topic_record = self.topics.get(topic)
        if topic_record is None:
            return []
        found = (self.partitions.get((topic, p)) for p in range(topic_record.partitions))
        return [record for record in found if record is not None]

    def endpoint_of(self, broker_id: int) -> str | None:
        """Where the broker registered to take requests; None when unknown or not said."""
        reg = self.brokers.get(broker_id)
        return reg.endpoint if reg is not None and reg.endpoint else None

    def endpoints(self) -> dict[int, str]:
        """Where each registered broker takes requests (those that said)."""
        return {b.broker_id: b.endpoint for _, b in sorted(self.brokers.items()) if b.endpoint}

    def unfenced_brokers(self) -> list[int]:
        return sorted(b.broker_id for b in self.brokers.values() if not b.fenced)

    def broker_epoch(self, broker_id: int) -> int:
        """The broker's current epoch, -1 when it is not registered (never was, or was unregistered)."""
        broker = self.brokers.get(broker_id)
        return broker.broker_epoch if broker is not None else -1

    def min_insync_replicas(self, topic: str) -> int:
        return self.topics[topic].min_insync_replicas


def partition_metadata(p: PartitionRecord) -> PartitionMetadata:
    return PartitionMetadata(topic=p.topic, partition=p.partition, leader=p.leader,
                             leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
                             replicas=list(p.replicas), isr=list(p.isr), elr=list(p.elr),
                             last_known_elr=list(p.last_known_elr), adding=list(p.adding),
                             removing=list(p.removing))


def partition_view(p: PartitionRecord) -> dict[str, Any]:
    """`asdict(partition_metadata(p))`, made at once: the controller's status lists every
    partition so, and the simulation's waits ask for a status every 50 ms of virtual time,
    where `asdict`'s field-by-field deep copy cost more than the rest of the status."""
    return {"topic": p.topic, "partition": p.partition, "leader": p.leader, "leader_epoch": p.leader_epoch,
            "partition_epoch": p.partition_epoch, "replicas": list(p.replicas), "isr": list(p.isr),
            "elr": list(p.elr), "last_known_elr": list(p.last_known_elr), "adding": list(p.adding),
            "removing": list(p.removing)}


def build_metadata_response(image: MetadataImage, topics: list[str] | None,
                            controller_id: int) -> MetadataResponse:
    """What a client needs to find leaders, from either the controller's or a broker's image.

    `topics=None` asks for every topic. A requested topic the image does not know sets
    UNKNOWN_TOPIC_OR_PARTITION while the known ones are still described, so a client that
    created a topic a moment ago learns it is not there yet rather than that it has no
    partitions.
    """
    names = sorted(image.topics) if topics is None else topics
    error = Errors.NONE
    partitions: list[PartitionMetadata] = []
    for name in names:
        if name not in image.topics:
            error = Errors.UNKNOWN_TOPIC_OR_PARTITION
            continue
        partitions.extend(partition_metadata(p) for p in image.partitions_of(name))
    return MetadataResponse(error=error, controller_id=controller_id,
                            brokers=image.unfenced_brokers(), partitions=partitions,
                            metadata_offset=image.offset, endpoints=image.endpoints())
