"""The suite's order (tests/conftest.py `longest_first`): each xdist worker's share of the
collection begins with its slow tests, longest first, the slow time split evenly, the tests
of one group together, and every test is kept exactly once."""
from __future__ import annotations

import pytest

from tests.conftest import longest_first


class _Item:
    def __init__(self, name: str, seconds: float = 0.0, group: str | None = None) -> None:
        self.name, self.seconds, self.group = name, seconds, group

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        if name != "slow" or not self.seconds:
            return None
        return (pytest.mark.slow(seconds=self.seconds, group=self.group) if self.group
                else pytest.mark.slow(seconds=self.seconds)).mark


def test_each_workers_share_begins_with_its_slow_tests_longest_first() -> None:
    items = [_Item(f"t{i}") for i in range(20)] + [_Item("a", 500), _Item("b", 200), _Item("c", 180),
                                                   _Item("d", 100)]
    ordered = longest_first(items, 2)
    assert sorted(i.name for i in ordered) == sorted(i.name for i in items)
    first, second = ordered[:12], ordered[12:]  # worksteal's split of 24 items in two
    # the 500 s test alone on one worker, the other three (480 s) on the other
    assert [i.name for i in first[:1]] == ["a"] and [i.name for i in second[:3]] == ["b", "c", "d"]
    assert all(i.seconds == 0 for i in first[1:] + second[3:])


def test_without_workers_the_slow_tests_come_first_and_without_slow_ones_nothing_moves() -> None:
    items = [_Item("x"), _Item("s", 50), _Item("y"), _Item("l", 90)]
    assert [i.name for i in longest_first(items, 1)] == ["l", "s", "x", "y"]
    plain = [_Item("x"), _Item("y")]
    assert longest_first(plain, 2) == plain


def test_the_tests_of_a_group_go_together_into_one_share_their_seconds_counted_once() -> None:
    """`slow(seconds=N, group=G)`: the tests of G share their runs (`test_protocol_modes`), so
    they are one unit of N seconds, not one worker's N each."""
    items = ([_Item(f"t{i}") for i in range(20)] + [_Item(f"g{i}", 240, "modes") for i in range(4)]
             + [_Item("a", 300), _Item("b", 100)])
    ordered = longest_first(items, 2)
    assert sorted(i.name for i in ordered) == sorted(i.name for i in items)
    first, second = ordered[:13], ordered[13:]
    assert [i.name for i in first[:1]] == ["a"] and [i.name for i in second[:5]] == ["g0", "g1", "g2", "g3", "b"]
