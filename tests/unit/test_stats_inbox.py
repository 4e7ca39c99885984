"""The supervisor's inbox of client counters, and its wait for the clients to run (the
workload's time 0)."""
from __future__ import annotations

from pathlib import Path

from testbed.clients.stats import Stats, StatsInbox


def test_the_wait_ends_when_every_client_has_pushed_or_exited_and_names_the_others(tmp_path: Path) -> None:
    inbox = StatsInbox(f"ipc://{tmp_path}/stats.sock")
    producer = Stats(inbox.endpoint, "producer-0")
    try:
        producer.maybe_push(force=True)
        assert inbox.wait_for(["producer-0"], timeout=10.0) == []
        assert inbox.wait_for(["producer-0", "consumer-0"], timeout=1.0, exited=lambda: {"consumer-0"}) == []
        assert inbox.wait_for(["producer-0", "consumer-0"], timeout=0.2) == ["consumer-0"]
        assert inbox.totals()["sent"] == 0  # a first push says "running" and counts nothing
    finally:
        producer.close()
        inbox.close()
