"""The metadata log of a single controller (R22): every record committed once it is on disk.

The controller logic sees only `append`/`read`/`committed_end`, so the Raft quorum can
replace this class without touching `broker/protocol/controller.py`.
"""
from __future__ import annotations

from pathlib import Path

import orjson

from broker.common.jsonl import read_jsonl


class SingleNodeMetadataLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        # a torn last line of a crashed controller was never committed
        self.records: list[dict] = read_jsonl(path, prefix_only=True)
        self.fd = path.open("ab")

    @property
    def committed_end(self) -> int:
        """Exclusive end of the committed log: a single node commits what it wrote."""
        return len(self.records)

    def append(self, records: list[dict]) -> int:
        """Appends and returns the new committed end."""
        self.fd.write(b"".join(orjson.dumps(r, option=orjson.OPT_APPEND_NEWLINE) for r in records))
        self.fd.flush()
        self.records.extend(records)
        return len(self.records)

    def read(self, offset: int, max_records: int) -> list[dict]:
        return self.records[max(0, offset):max(0, offset) + max_records]

    def close(self) -> None:
        self.fd.close()
