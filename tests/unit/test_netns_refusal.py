"""Issue 14's bad input: `backend: netns` on a machine that cannot make namespaces is refused
by `validate` and by the run, naming the file, the key and what is missing; nothing starts."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

import run
from testbed.supervisor import netns
from testbed.topology import load_topology

TOPOLOGY = Path(__file__).resolve().parents[2] / "topologies" / "netns.yaml"


@pytest.fixture
def bare_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(netns.shutil, "which", lambda tool: None if tool == "nft" else f"/usr/sbin/{tool}")


def test_what_is_missing_is_named(bare_machine: None) -> None:
    missing = netns.requirements_missing()
    assert len(missing) == 2 and missing[0].startswith("root") and "`nft`" in missing[1] and "nftables" in missing[1]
    topology = load_topology(TOPOLOGY)
    message = netns.refusal(topology)
    assert message is not None and message.startswith(f"{TOPOLOGY}: network.backend: netns cannot run here: it needs root")
    assert "backend: userspace" in message
    assert netns.refusal(dataclasses.replace(topology, network=dataclasses.replace(topology.network,
                                                                                   backend="userspace"))) is None


def test_validate_and_the_run_refuse_it_and_start_nothing(bare_machine: None, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    runs = tmp_path / "runs"
    assert run.main(["validate", str(TOPOLOGY)]) == 1
    err = capsys.readouterr().err
    assert f"{TOPOLOGY}: network.backend: netns cannot run here: it needs root" in err and "`nft`" in err
    assert run.main([str(TOPOLOGY), "--runs-dir", str(runs)]) == 2
    assert f"{TOPOLOGY}: network.backend: netns cannot run here: it needs root" in capsys.readouterr().err
    assert not runs.exists()


def test_the_userspace_twin_of_the_same_file_is_not_refused(bare_machine: None, tmp_path: Path) -> None:
    data = yaml.safe_load(TOPOLOGY.read_text())
    data["network"] = {"backend": "userspace"}
    twin = tmp_path / "twin.yaml"
    twin.write_text(yaml.safe_dump(data))
    assert run.main(["validate", str(twin)]) == 0


def test_a_dry_run_still_shows_the_schedule(bare_machine: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert run.main([str(TOPOLOGY), "--dry-run"]) == 0
    assert "partition" in capsys.readouterr().out
