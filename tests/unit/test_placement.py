"""R34 placement and I9, against the rule of seed 003."""
import contextlib
import io
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.protocol.placement import (
    PlacementError,
    place_rack_aware,
    place_round_robin,
    rack_alternated,
    round_robin_start,
)


def _seed_with_start(n: int, start: tuple[int, int]) -> int:
    return next(s for s in range(10_000) if round_robin_start(n, s) == start)


def test_r34_round_robin_matches_seed_003_example():
    """R34, seed 003: "we assign the ith partition to the (i mod n)th broker ... The jth replica of
    partition k will be assigned to broker (i + j + k) mod n" -- p0..p14 on broker-0..broker-4, and
    "if broker-0 goes down, partitions p0, p1, and p2 [its partitions] can be served from all remaining 4 brokers"."""
    seed = _seed_with_start(5, (0, 0))
    assignment = place_round_robin(15, 3, [0, 1, 2, 3, 4], seed)
    for p, replicas in assignment.items():
        i, k = p % 5, p // 5
        assert replicas == [i, (i + 1 + k) % 5, (i + 2 + k) % 5]
    survivors = {assignment[p][1] for p in (0, 5, 10)} | {assignment[p][2] for p in (0, 5, 10)}
    assert survivors == {1, 2, 3, 4}


@pytest.mark.parametrize("seed", range(20))
def test_r34_round_robin_rule_holds_from_the_seeded_start(seed):
    """R34: first replica on (start + p) mod n, the j-th at Kafka's shift 1 + (k + j) mod (n - 1)."""
    brokers = [10, 11, 12, 13, 14, 15]
    start, shift = round_robin_start(6, seed)
    for p, replicas in place_round_robin(20, 3, brokers, seed).items():
        first = (start + p) % 6
        k = shift + p // 6
        assert replicas == [brokers[first]] + [brokers[(first + 1 + (k + j) % 5) % 6] for j in range(2)]


def test_r34_round_robin_is_deterministic_given_the_seed():
    """R34: deterministic given the seed, and the seed matters."""
    assert place_round_robin(12, 3, [3, 1, 2, 4], 7) == place_round_robin(12, 3, [1, 2, 3, 4], 7)
    assert len({str(place_round_robin(12, 3, [1, 2, 3, 4], s)) for s in range(10)}) > 1


def test_r34_rf_above_broker_count_is_refused():
    """R34: a replica set needs distinct brokers."""
    with pytest.raises(PlacementError):
        place_round_robin(3, 4, [1, 2, 3], 0)
    with pytest.raises(PlacementError):
        place_rack_aware(3, 4, {1: "a", 2: "b", 3: "c"}, 0)


def test_r34_rack_alternated_list_takes_one_broker_per_rack_in_turn():
    """R34: "builds a rack-alternated broker list (one broker per rack in turn)"."""
    racks = {1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "a"}
    assert rack_alternated(racks) == [1, 3, 5, 2, 4, 6]


cluster = st.dictionaries(st.integers(0, 40), st.sampled_from(["a", "b", "c", "d", None]), min_size=1, max_size=12)


@settings(max_examples=300, deadline=None)
@given(cluster, st.integers(1, 30), st.integers(1, 5), st.integers(0, 2**32))
def test_i9_rack_aware_spans_min_rf_racks_and_spreads_leaders(brokers, partitions, rf, seed):
    """I9 / R34: every partition spans min(RF, racks) racks, on distinct brokers; leaders differ by <= 1."""
    rf = min(rf, len(brokers))
    racks = len(set(brokers.values()))
    assignment = place_rack_aware(partitions, rf, brokers, seed)
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == rf == len(set(replicas))
        assert len({brokers[b] for b in replicas}) == min(rf, racks)
    leaders = Counter(replicas[0] for replicas in assignment.values())
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1
    assert assignment == place_rack_aware(partitions, rf, brokers, seed)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=1, max_size=10, unique=True), st.integers(1, 30),
       st.integers(1, 5), st.integers(0, 2**32))
def test_r34_round_robin_distinct_replicas_and_even_leaders(brokers, partitions, rf, seed):
    """R34 round-robin: distinct replicas per partition; preferred leaders differ by at most one."""
    rf = min(rf, len(brokers))
    assignment = place_round_robin(partitions, rf, brokers, seed)
    assert all(len(set(r)) == rf for r in assignment.values())
    leaders = Counter(r[0] for r in assignment.values())
    counts = [leaders.get(b, 0) for b in brokers]
    assert max(counts) - min(counts) <= 1


#: Brokers, racks and topic names chosen so that anything hash-ordered (a set of rack or topic
#: names) would change the result between interpreters; `None` is the rackless "rack".
_RACKS = {7: "rack-x", 3: "rack-y", 11: None, 5: "rack-x", 2: "zz", 13: "rack-y", 8: "aa", 1: None}

#: Every placement path, printed as JSON: the two placers (and the rack-alternated list) for a
#: few seeds, and the controller creating topics of both placements (R40).
_PLACEMENT_SCRIPT = r"""
import json
from broker.protocol.controller import Controller, ControllerConfig
from broker.protocol.messages import BrokerHeartbeatRequest, BrokerRegistrationRequest, CreateTopicsRequest, NewTopic
from broker.protocol.placement import place_rack_aware, place_round_robin, rack_alternated

racks = RACKS
seeds = (0, 1, 2**31 + 5)
out = {
    "round_robin": {str(s): place_round_robin(17, 3, list(racks), s) for s in seeds},
    "rack_aware": {str(s): place_rack_aware(17, 3, racks, s) for s in seeds},
    "rack_alternated": rack_alternated(racks),
}
c = Controller(1, ControllerConfig(session_timeout=10.0, placement_seed=42))
for b, rack in racks.items():
    c.on_request("reg", BrokerRegistrationRequest(b, f"inc-{b}", rack), 0.0)
    c.on_committed(c.log_end_offset)
for b in racks:
    c.on_request("hb", BrokerHeartbeatRequest(b, c.image.broker_epoch(b), c.log_end_offset), 0.1)
    c.on_committed(c.log_end_offset)
topics = [NewTopic(f"{name}-{placement}", 9, 3, 2, placement)
          for name in ("orders", "payments", "e-\u00fc", "x") for placement in ("rack-aware", "round-robin")]
c.on_request("create", CreateTopicsRequest(topics), 0.2)
c.on_committed(c.log_end_offset)
out["controller"] = {f"{t}/{p}": [r.replicas, r.leader] for (t, p), r in sorted(c.image.partitions.items())}
assert len(out["controller"]) == 9 * len(topics), out["controller"]
print(json.dumps(out, sort_keys=True))
""".replace("RACKS", repr(_RACKS))


def _placement_in_fresh_process(hash_seed: str) -> str:
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-c", _PLACEMENT_SCRIPT], cwd=root, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_r34_placement_is_identical_across_processes_with_different_hash_seeds():
    """R34: "Both are deterministic given the seed" -- across runs, not only within one process:
    `place_round_robin`, `place_rack_aware` (and its rack-alternated list) and the controller's
    topic placement (R40; its seed derives from `placement_seed` and the topic name) print the
    same assignments in interpreters started with different PYTHONHASHSEED values, and in this one."""
    runs = {seed: _placement_in_fresh_process(seed) for seed in ("0", "1", "2718281828")}
    assert len(set(runs.values())) == 1, runs
    here = io.StringIO()
    with contextlib.redirect_stdout(here):
        exec(_PLACEMENT_SCRIPT, {})  # noqa: S102 -- the same script, in this process
    assert here.getvalue() == runs["0"]
    result = json.loads(runs["0"])
    assert set(result) == {"round_robin", "rack_aware", "rack_alternated", "controller"}
    assert result["rack_aware"]["0"] == {str(p): r for p, r in place_rack_aware(17, 3, _RACKS, 0).items()}


def test_r34_the_rack_blind_scenario_is_placed_alike_at_every_seed():
    from testbed.config.references import initial_replicas
    from testbed.topology import load_topology

    t = load_topology(Path(__file__).resolve().parents[2] / "topologies" / "scenarios" / "rack-outage-rack-blind.yaml")
    assert {seed: initial_replicas(t.cluster, t.topics, seed)["orders/0"] for seed in range(13)} == \
        dict.fromkeys(range(13), (1, 2))
