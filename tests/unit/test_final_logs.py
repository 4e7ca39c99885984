"""`final/logs.jsonl` puts each record's line together from its parts (final_state.write_logs):
the very bytes of the record's dict as JsonlAppender writes it, whether its replica's values
are written between quotes as they are (printable ASCII without a quote or a backslash) or
each serialised (any other value: escapes, non-ASCII, bytes that are not UTF-8)."""
from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from testbed.experiment import final_state


def _batches(records: list[tuple[int, int, bytes]]) -> list[tuple[int, int, tuple[bytes, ...]]]:
    """`records` as `read_partition_values` gives them: batches of up to two records of one epoch."""
    out: list[tuple[int, int, tuple[bytes, ...]]] = []
    for o, e, v in records:
        if out and out[-1][1] == e and len(out[-1][2]) < 2:
            out[-1] = (out[-1][0], e, (*out[-1][2], v))
        else:
            out.append((o, e, (v,)))
    return out


@pytest.mark.parametrize("values", [
    [b"producer-0:1.....", b"producer-1:2 ~!#$%&'()*+,-./:;<=>?@[]^_`{|}"],
    [b"plain", b'a "quoted" value'],
    [b"plain", b"back\\slash"],
    [b"plain", b"new\nline\x00\x1f\x7f"],
    [b"plain", "caf\u00e9".encode()],
    [b"plain", b"\xff not utf-8"],
])
def test_a_replicas_lines_are_the_bytes_of_their_dicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       values: list[bytes]) -> None:
    data = tmp_path / "data"
    (data / "broker-1" / "orders-3").mkdir(parents=True)
    records = [(7 + i, 2, v) for i, v in enumerate(values)]
    monkeypatch.setattr(final_state, "read_partition_values", lambda d: _batches(records))
    target = tmp_path / "logs.jsonl"
    assert final_state.write_logs(target, {"broker-1": data / "broker-1"}) == len(values)
    assert target.read_bytes() == b"".join(
        orjson.dumps({"node": "broker-1", "topic": "orders", "partition": 3, "offset": o, "leader_epoch": e,
                      "value": v.decode("utf-8", "replace")}, option=orjson.OPT_APPEND_NEWLINE)
        for o, e, v in records)


def test_a_percent_sign_in_the_replicas_part_is_written_as_it_is(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The replica's part of a line goes into the one format of its lines: a `%` in it (a topic's
    name) must come out as itself, not as a conversion."""
    data = tmp_path / "data"
    (data / "broker-1" / "or%d%sers-0").mkdir(parents=True)
    records = [(i, 1, b"v%d" % i) for i in range(3)]
    monkeypatch.setattr(final_state, "read_partition_values", lambda d: _batches(records))
    target = tmp_path / "logs.jsonl"
    assert final_state.write_logs(target, {"broker-1": data / "broker-1"}) == 3
    assert target.read_bytes() == b"".join(
        orjson.dumps({"node": "broker-1", "topic": "or%d%sers", "partition": 0, "offset": o, "leader_epoch": e,
                      "value": v.decode()}, option=orjson.OPT_APPEND_NEWLINE)
        for o, e, v in records)


def test_a_replica_of_several_epochs_writes_each_records_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run of records in one epoch is written with that epoch (the lines put it in their
    literal part): every line says its own record's epoch, however the runs fall."""
    data = tmp_path / "data"
    (data / "broker-2" / "orders-1").mkdir(parents=True)
    records = [(o, e, b"v%d" % o) for o, e in enumerate([0, 0, 3, 3, 3, 12, 0, 12])]
    monkeypatch.setattr(final_state, "read_partition_values", lambda d: _batches(records))
    target = tmp_path / "logs.jsonl"
    assert final_state.write_logs(target, {"broker-2": data / "broker-2"}) == len(records)
    assert target.read_bytes() == b"".join(
        orjson.dumps({"node": "broker-2", "topic": "orders", "partition": 1, "offset": o, "leader_epoch": e,
                      "value": v.decode()}, option=orjson.OPT_APPEND_NEWLINE)
        for o, e, v in records)
