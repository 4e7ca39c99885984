"""The JVM started for a small input judges with what a small judgment wants, and one started
for a large input keeps Spark's and the JVM's defaults but for the thresholds of its
optimising compiler: the settings are read back from the running JVM (`jvm_sessions`).
Why these settings: `testbed/analysis/spark_settings.py` and BENCHMARKS.md, 2026-11-28."""
from __future__ import annotations

from tests.unit.jvm_sessions import GROUP


@GROUP
def test_a_small_inputs_jvm_has_small_memory_pages_and_the_parallel_collector(two_sessions: dict) -> None:
    small = two_sessions["small"]
    assert small["page"] == "2m", small
    assert small["collectors"] == ["PS MarkSweep", "PS Scavenge"], small
    assert small["jit"][0] == "1", small  # C1 only


@GROUP
def test_a_large_inputs_jvm_keeps_sparks_pages_and_collector_and_a_tiered_jit(two_sessions: dict) -> None:
    large = two_sessions["large"]
    assert large["page"] == "unset", large  # Spark's own choice from the memory and cores
    assert "PS Scavenge" not in large["collectors"], large
    assert large["jit"] == ["4", "50000"], large  # tiered, C2 for the hottest code only (the JVM's 5000)
