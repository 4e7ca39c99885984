"""Where a broker keeps what, inside and beside its data directory (DESIGN section 4).

One owner for these names: the broker writes them, and the supervisor reads them after a
run (final logs) or damages them as a fault (power loss, disk loss).
"""
from __future__ import annotations

import re
from pathlib import Path

#: one directory per partition replica: `<topic>-<partition>`
PARTITION_DIR = re.compile(r"^(?P<topic>.+)-(?P<partition>\d+)$")
#: the broker's persistent copy of the metadata log (R22), one `[offset, record]` a line
METADATA_COPY_FILE = "__cluster_metadata.jsonl"
#: the broker's copy of the controller's last metadata snapshot, when its log was compacted
METADATA_SNAPSHOT_FILE = "__cluster_metadata.snapshot.json"


def partition_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def partition_dirs(data_dir: Path) -> list[tuple[str, int, Path]]:
    """(topic, partition, directory) of every partition replica under `data_dir`, sorted."""
    found = []
    for d in sorted(data_dir.iterdir()) if data_dir.is_dir() else []:
        m = PARTITION_DIR.match(d.name)
        if d.is_dir() and m:
            found.append((m["topic"], int(m["partition"]), d))
    return found


def journal_path(data_dir: Path) -> Path:
    """The durability journal lives beside the data directory: a tmpfs mount of the data
    directory does not hide it, and disk-loss removes it explicitly (faults/storage.py)."""
    return data_dir.with_name(data_dir.name + ".journal")
