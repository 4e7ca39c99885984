"""The controller role over its real store (fsynced files in a temporary directory): Raft
messages whose metadata cannot be applied are dropped before Raft stores them (R22: a node
never crashes on a malformed message), a controller restarts from its snapshot, and a new
leader records the events of the records it inherits that may have none (DESIGN 7)."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.noderuntime.config import NodeConfig, StorageSettings
from broker.noderuntime.controller_role import ControllerRole
from broker.protocol.messages import (
    AppendEntriesRequest,
    AppendEntriesResponse,
    InstallSnapshotRequest,
    RaftEntry,
    VoteRequest,
    VoteResponse,
)
from broker.protocol.metadata_image import MetadataImage
from broker.protocol.outputs import Outputs, Send
from broker.protocol.raft import LEADER, LEADER_CHANGE
from broker.protocol.records import RegisterBrokerRecord, to_dict
from broker.protocol.settings import ProtocolSettings, Timeouts


def role(tmp_path: Path, node_id: int = 2, voters: tuple[int, ...] = (1, 2, 3), snapshot_every: int = 1000
         ) -> ControllerRole:
    return ControllerRole(NodeConfig(
        name=f"controller-{node_id}", kind="controller", id=node_id, rack=None, run_dir=tmp_path,
        data_dir=tmp_path / f"controller-{node_id}", endpoint="ipc://unused", control_endpoint="ipc://unused",
        token="t", supervisor_pid=0, peers={}, controller_ids=list(voters), timeouts=Timeouts(),
        protocol=ProtocolSettings(), storage=StorageSettings(), metadata_snapshot_records=snapshot_every))


LEADER_ENTRY = RaftEntry(1, {"type": LEADER_CHANGE, "leader": 1, "term": 1})


@pytest.mark.parametrize("msg", [
    AppendEntriesRequest(1, 1, -1, 0, [LEADER_ENTRY, RaftEntry(1, {"type": "no-such-record"})], 2),
    AppendEntriesRequest(1, 1, -1, 0, [RaftEntry(1, {"type": "partition", "topic": "t"})], 1),
    InstallSnapshotRequest(1, 1, 5, 1, {"image": {"offset": 4}}),
    InstallSnapshotRequest(1, 1, 5, 1, {"digest": 0, "image": MetadataImage().to_state()}),  # offset -1, not 4
])
def test_r22_raft_messages_whose_metadata_cannot_be_applied_are_dropped_not_stored(tmp_path: Path, msg) -> None:
    r = role(tmp_path)
    r.start(0.0)
    out = r.on_request(object(), msg, 0.1)
    assert not out.messages and not out.disk and r.malformed == 1
    assert r.raft.log_end == 0 and r.raft.commit_end == 0 and r.raft.term == 0
    r.close()


def test_r22_a_controller_applies_a_valid_snapshot_and_restarts_from_it(tmp_path: Path) -> None:
    r = role(tmp_path)
    r.start(0.0)
    image = MetadataImage()
    image.offset = 4
    out = r.on_request(object(), InstallSnapshotRequest(1, 1, 5, 1, {"image": image.to_state(), "digest": 7}), 0.1)
    for op in out.disk:
        r.persist(op, 0.1)
    assert r.applied == 5 and r.digest == 7 and r.controller.log_end_offset == 5 and r.malformed == 0
    r.close()
    again = role(tmp_path)
    assert again.raft.log_start == 5 and again.applied == 5 and again.digest == 7
    again.close()


def _persisted(r: ControllerRole, out: Outputs, now: float) -> Outputs:
    for op in out.disk:
        r.persist(op, now)
    return out


def _vote_requests(out: Outputs) -> list[VoteRequest]:
    return [m.message for m in out.messages if isinstance(m, Send) and isinstance(m.message, VoteRequest)]


def test_r22_a_restarted_voter_elected_before_it_hears_a_leader_records_what_its_voters_did_not_know_committed(
        tmp_path: Path) -> None:
    """Voter 2 holds three registrations from leader 1 and knows the first two committed;
    restarted, it knows none committed, and is elected (with voter 3's vote) before it hears
    any leader. Voter 3 knew the first two committed, so leader 1 recorded their events; the
    third may have been committed without its event (leader 1 died before it saw the
    commit), so the new leader records it, and only it, when it commits it again. It used to
    record nothing: it had known no leader since its start."""
    r = role(tmp_path)
    r.start(0.0)
    registrations = [RaftEntry(1, to_dict(RegisterBrokerRecord(b, b, f"incarnation-{b}", None, True)))
                     for b in (1, 2, 3)]
    _persisted(r, r.on_request(object(), AppendEntriesRequest(1, 1, -1, 0, [LEADER_ENTRY, *registrations], 3),
                               0.1), 0.1)
    assert r.raft.commit_end == 3
    r.close()

    again = role(tmp_path)
    again.start(0.0)
    assert again.raft.commit_end == 0 and again.raft.log_end == 4
    [pre_vote, _] = _vote_requests(_persisted(again, again.tick(100.0), 100.0))
    assert pre_vote.pre_vote
    out = _persisted(again, again.on_response(("raft", 3), VoteResponse(pre_vote.term, 3, True, True), 100.0), 100.0)
    [vote, _] = _vote_requests(out)
    events = _persisted(again, again.on_response(("raft", 3), VoteResponse(vote.term, 3, True, False, commit_end=3),
                                                 100.0), 100.0).events
    assert again.raft.role == LEADER and again.raft.elected_commit_end == 3
    events += _persisted(again, again.on_response(("raft", 3), AppendEntriesResponse(vote.term, 3, True, 5), 100.0),
                         100.0).events
    assert again.raft.commit_end == 5 and again.active
    recorded = [(e.kind, e.fields["broker_id"], e.fields["metadata_offset"]) for e in events
                if "metadata_offset" in e.fields]
    assert recorded == [("registered", 3, 3)]
    again.close()
