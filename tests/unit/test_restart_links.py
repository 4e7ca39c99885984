"""A node started again (restart, add-broker) gets the supervisor's link table only when a
link rule is in force: a new process starts with none, and pushing the table waits for the
process to answer (260-800 ms a node measured, up to 1.6 s for a restart of three), which
held every later fault of the schedule back."""
from __future__ import annotations

from broker.wire.linkfilter import LinkRule, LinkTable
from testbed.supervisor.cluster import Cluster


class _Pushes(Cluster):
    def __init__(self, table: LinkTable) -> None:  # noqa: D107 - only what `_push_links_to_new` reads
        self.link_table = table
        self._links_pending: set[str] = set()
        self.synced: list[set[str]] = []

    def sync_links(self) -> dict[str, bool]:
        self.synced.append(set(self._links_pending))
        return {}


def test_a_new_process_is_sent_the_table_only_while_a_rule_is_in_force() -> None:
    healed = _Pushes(LinkTable(4, {}))
    healed._push_links_to_new("broker-2")
    assert healed.synced == [] and healed._links_pending == set()
    cut = _Pushes(LinkTable(5, {("broker-1", "broker-2"): LinkRule(drop=True)}))
    cut._push_links_to_new("broker-2")
    assert cut.synced == [{"broker-2"}]
