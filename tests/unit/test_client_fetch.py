"""A consumer's fetch takes the records from its offset up to the HWM out of the fetched
batches a batch at a time (`broker.client._readable`): the same (offset, value) pairs as
looking at every decoded record, whatever the batches, the offsets and a cut-off tail."""
from __future__ import annotations

import random

from broker.client import _readable
from broker.common.record_batch import build_batch, decode_batches


def test_the_readable_records_are_those_of_a_record_by_record_look() -> None:
    rng = random.Random(7)
    for _ in range(3000):
        buf, offset = b"", rng.randrange(0, 50)
        for _batch in range(rng.randrange(0, 5)):
            n = rng.randrange(1, 6)
            values = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 4))) if rng.random() < 0.3
                      else b"v%d" % (offset + i) for i in range(n)]
            buf += build_batch(offset, rng.randrange(5), values)
            offset += n
        if buf and rng.random() < 0.2:
            buf = buf[:rng.randrange(len(buf))]  # a torn tail: only whole batches count
        start, hwm = rng.randrange(0, 70), rng.randrange(-1, 70)
        assert _readable(buf, start, hwm) == [(o, v.decode("utf-8", "replace"))
                                              for o, _e, v in decode_batches(buf) if start <= o < hwm]
