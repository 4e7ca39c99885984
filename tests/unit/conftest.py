"""Fixtures of several modules, defined once so that each runs once per test process (a
fixture imported into two modules is two fixtures)."""
from tests.unit.jvm_sessions import two_sessions  # noqa: F401
