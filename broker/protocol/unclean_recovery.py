"""Unclean recovery (R32, seed 001 section 5.3, KIP-966): the controller's search for the best
log when no clean leader candidate is left.

Pure and driven by the controller: each `tick` looks at the image and says whom to ask for
their log info (GetReplicaLogInfo) and which partitions are decided; `on_log_info` takes the
answers. The modes:
- `balanced` triggers when ISR and ELR are both empty, asks every LastKnownELR member and
  waits for all of them, then elects the highest (last written epoch, LEO); the MinISR
  recovery quorum of section 5.3.2 holds a complete log if any member kept one;
- `proactive` also triggers when candidates exist but are all fenced (not merely shutting down
  under control, whose logs are whole and who come back as candidates), asks every
  replica, and elects the best answer that came within `unclean_recovery_timeout`, for
  availability above all: at once when every replica answered and the best answer's broker
  can lead, else at the timeout the best answer of a broker that can lead then (the best log
  answered 0.35 s into a 2 s timeout, its broker still fenced, and an empty one was elected
  at once: 785 writes lost). The timeout runs from a round's first answer: replicas that are
  all down answer nothing, and a round timed from the search's start elected the first
  broker back the moment it answered, its log empty, the complete one half a second away;
- `manual` elects nothing: the partition waits for an operator's `elect` (the controller
  records once that it waits);
- `none` waits for a clean candidate.
An answer counts only for the registration it came from: a broker that restarts after
answering may have lost its log, so it is asked again, as is one that registered again after
it was asked (the request went to a process that is gone, and waiting for its timeout let
the search end without it); and only for the search that asked
(its number is in the request's correlation): an answer delayed past the search's decision
describes a log that has followed the elected leader since. Every decision carries the answers
it was made from, so the run's records show each unclean recovery as a potential data loss
with the log infos behind it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from broker.common.errors import Errors
from broker.protocol.messages import GetReplicaLogInfoRequest, GetReplicaLogInfoResponse
from broker.protocol.metadata_image import MetadataImage
from broker.protocol.outputs import Send
from broker.protocol.partition_change import BrokerStates
from broker.protocol.records import NO_LEADER, PartitionRecord

RECOVERING_MODES = ("balanced", "proactive")
PartitionKey = tuple[str, int]


@dataclass(frozen=True)
class LogInfo:
    broker_id: int
    broker_epoch: int
    last_written_epoch: int
    log_end_offset: int

    def to_dict(self) -> dict:
        return {"broker": self.broker_id, "broker_epoch": self.broker_epoch,
                "last_written_epoch": self.last_written_epoch, "leo": self.log_end_offset}


@dataclass(frozen=True)
class Decision:
    """Elect `leader` for `partition`, chosen from `answers` (R32)."""
    partition: PartitionRecord
    leader: int
    mode: str
    answers: tuple[LogInfo, ...]


@dataclass
class _Search:
    number: int  # which search of the controller's this is (answers name it)
    candidates: tuple[int, ...]
    #: proactive: decide with what came by then (it runs from the round's first answer);
    #: balanced: re-ask the silent by then
    deadline: float
    answers: dict[int, LogInfo] = field(default_factory=dict)
    #: requests in flight: broker -> its broker epoch when asked
    asked: dict[int, int] = field(default_factory=dict)


def candidates(part: PartitionRecord, mode: str, brokers: BrokerStates) -> tuple[int, ...] | None:
    """Whom `mode` asks about `part` now, or None when it needs no recovery (R32)."""
    if part.leader != NO_LEADER or mode not in RECOVERING_MODES:
        return None
    clean = [r for r in (*part.isr, *part.elr)]
    if mode == "balanced":
        if clean or not part.last_known_elr:
            return None
        return tuple(part.last_known_elr)
    if clean and any(r in brokers.unfenced for r in clean):
        return None  # R32: all fenced. One in a controlled shutdown keeps its log: it is no reason
    return tuple(part.replicas)  # to elect another (a tester's proactive recovery lost 200 writes so)


def best(answers: list[LogInfo], replicas: list[int]) -> LogInfo:
    """The highest (last written epoch, LEO); ties go to the earlier replica (the preferred)."""
    order = {b: i for i, b in enumerate(replicas)}
    return max(answers, key=lambda a: (a.last_written_epoch, a.log_end_offset, -order.get(a.broker_id, 0)))


class UncleanRecovery:
    def __init__(self, mode: str, timeout: float) -> None:
        self.mode = mode
        self.timeout = timeout
        self._searches: dict[PartitionKey, _Search] = {}
        self._searches_begun = 0

    def searching(self) -> list[PartitionKey]:
        return sorted(self._searches)

    def idle(self, image: MetadataImage) -> bool:
        """Whether `tick` has nothing to do: no search under way, no partition without a
        leader (the only ones `candidates` may name)."""
        if self._searches:
            return False
        for p in image.partitions.values():
            if p.leader == NO_LEADER:
                return False
        return True

    def forget(self, topic: str) -> None:
        """The topic was deleted (R40): its searches end now, so that answers about its old logs
        never count for a topic created again under the same name."""
        for key in [k for k in self._searches if k[0] == topic]:
            del self._searches[key]

    def tick(self, now: float, image: MetadataImage, brokers: BrokerStates) -> tuple[list[Send], list[Decision]]:
        sends: list[Send] = []
        decisions: list[Decision] = []
        wanted = {}
        for key, part in sorted(image.partitions.items()):
            who = candidates(part, self.mode, brokers)
            if who is not None:
                wanted[key] = (part, who)
        for key in list(self._searches):
            if key not in wanted:
                del self._searches[key]
        for key, (part, who) in wanted.items():
            search = self._searches.get(key)
            if search is None:
                self._searches_begun += 1
                search = self._searches[key] = _Search(self._searches_begun, who, now + self.timeout)
            elif search.candidates != who:  # the same search, among other candidates
                search = self._searches[key] = _Search(
                    search.number, who, now + self.timeout, {b: a for b, a in search.answers.items() if b in who},
                    {b: e for b, e in search.asked.items() if b in who})
            # an answer from an earlier registration of its broker no longer describes its log,
            # and a request to one is not waited for
            search.answers = {b: a for b, a in search.answers.items() if a.broker_epoch == image.broker_epoch(b)}
            search.asked = {b: e for b, e in search.asked.items() if e == image.broker_epoch(b)}
            if self.mode == "proactive" and not search.answers:
                search.deadline = now + self.timeout  # a round begins with its first answer
            decision = self._decide(part, search, brokers, now)
            if decision is not None:
                decisions.append(decision)
                del self._searches[key]
                continue
            if now >= search.deadline:
                search.deadline = now + self.timeout
                if self.mode == "proactive":
                    search.answers.clear()  # a new round: the best answer within the next timeout
            for b in who:
                if b not in search.answers and b not in search.asked:
                    search.asked[b] = image.broker_epoch(b)
                    sends.append(Send(b, GetReplicaLogInfoRequest(part.topic, part.partition),
                                      correlation=("log-info", part.topic, part.partition, b, search.number),
                                      timeout_ms=max(1, int(self.timeout * 1000))))
        return sends, decisions

    def _decide(self, part: PartitionRecord, search: _Search, brokers: BrokerStates, now: float) -> Decision | None:
        answers = [search.answers[b] for b in search.candidates if b in search.answers]
        chosen = best(answers, part.replicas) if answers and len(answers) == len(search.candidates) else None
        if chosen is None or not brokers.can_lead(chosen.broker_id):
            # both wait for every candidate's answer and for the best log's broker to be unfenced:
            # balanced for as long as it takes (section 5.3.2), proactive until its timeout, when
            # it takes the best answer of a broker that can lead then
            if self.mode == "balanced" or now < search.deadline:
                return None
            eligible = [a for a in answers if brokers.can_lead(a.broker_id)]
            if not eligible:
                return None
            chosen = best(eligible, part.replicas)
        return Decision(part, chosen.broker_id, self.mode, tuple(answers))

    def on_log_info(self, topic: str, partition: int, broker: int, number: int,
                    resp: GetReplicaLogInfoResponse | None) -> None:
        """An answer (or None: a timeout) to a request `tick` asked for in search `number`."""
        search = self._searches.get((topic, partition))
        if search is None or search.number != number:
            return
        search.asked.pop(broker, None)
        if (resp is not None and resp.error == Errors.NONE and resp.broker_id == broker
                and resp.topic == topic and resp.partition == partition and broker in search.candidates):
            search.answers[broker] = LogInfo(broker, resp.broker_epoch, resp.last_written_epoch, resp.log_end_offset)
