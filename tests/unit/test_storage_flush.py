"""Flush policies (seed 001, section 5: every write, every N messages, every N ms, on roll)."""
from __future__ import annotations

import pytest

from broker.storage.flush import FlushPolicy


def test_default_policy_never_flushes():
    assert not FlushPolicy().should_flush(10**6, last_flush=0.0, now=10**6, rolled=True)


def test_always_flushes_after_every_append():
    p = FlushPolicy(always=True)
    assert p.should_flush(1, last_flush=0.0, now=0.0, rolled=False)
    assert not p.should_flush(0, last_flush=0.0, now=0.0, rolled=False)


def test_every_n_messages():
    p = FlushPolicy(messages=3)
    assert not p.should_flush(2, last_flush=0.0, now=100.0, rolled=False)
    assert p.should_flush(3, last_flush=0.0, now=0.0, rolled=False)


def test_every_interval():
    p = FlushPolicy(interval=1.0)
    assert not p.should_flush(5, last_flush=10.0, now=10.99, rolled=False)
    assert p.should_flush(5, last_flush=10.0, now=11.0, rolled=False)
    assert not p.should_flush(0, last_flush=10.0, now=20.0, rolled=False)


def test_on_roll():
    p = FlushPolicy(on_roll=True)
    assert p.should_flush(1, last_flush=0.0, now=0.0, rolled=True)
    assert not p.should_flush(10**6, last_flush=0.0, now=10**6, rolled=False)


@pytest.mark.parametrize("policy", [
    FlushPolicy(),
    FlushPolicy(always=True),
    FlushPolicy(on_roll=True, messages=1000, interval=1.0),
])
def test_dict_round_trip(policy):
    assert FlushPolicy.from_dict(policy.to_dict()) == policy


def test_from_dict_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ValueError, match="unknown keys \\['ms'\\]"):
        FlushPolicy.from_dict({"ms": 5})
    with pytest.raises(ValueError, match="messages"):
        FlushPolicy.from_dict({"messages": 0})
    with pytest.raises(ValueError, match="interval"):
        FlushPolicy.from_dict({"interval": -1.0})
