"""The controller role over its real store (fsynced files in a temporary directory): Raft
messages whose metadata cannot be applied are dropped before Raft stores them (R22: a node
never crashes on a malformed message), and a controller restarts from its snapshot."""
from __future__ import annotations

from pathlib import Path

import pytest

from broker.noderuntime.config import NodeConfig, StorageSettings
from broker.noderuntime.controller_role import ControllerRole
from broker.protocol.messages import AppendEntriesRequest, InstallSnapshotRequest, RaftEntry
from broker.protocol.metadata_image import MetadataImage
from broker.protocol.raft import LEADER_CHANGE
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
