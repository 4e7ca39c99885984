"""Counts said in words: `1 cell`, `2 cells`. Every message that counts something says its
noun so, and `0 of 1 cells` or `1 more causes` (new users' findings) come from no copy."""
from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` and its noun, singular for exactly one (`plural` where adding an s is wrong)."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
