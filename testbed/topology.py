"""Topology files (DESIGN section 6, schema v1) parsed once, at the edge, into frozen specs.

The one import path for the rest of the code; the work is done in `testbed.topo`, a module per
job, so this name stays put while those modules change.
"""
from testbed.topo.faults import FAULT_ACTIONS, LOSS_MODES, PARTITION_SHAPES
from testbed.topo.features import FEATURE_NAMES, not_yet_acted_on
from testbed.topo.load import load_topology
from testbed.topo.model import Topology
from testbed.topo.nemesis import NEMESIS_ACTIONS
from testbed.topo.parse import TopologyError, parse_topology
from testbed.topo.refs import TARGET_GRAMMAR
from testbed.topo.sections import (
    CHECK_NAMES,
    EXPECT_KEYS,
    ClusterSpec,
    ConsumerSpec,
    Expectation,
    FaultSpec,
    FlushPolicy,
    NemesisSpec,
    NetworkSpec,
    NodeSpec,
    ProducerSpec,
    ProtocolSpec,
    StorageSpec,
    Timing,
    TopicSpec,
    WorkloadSpec,
)

__all__ = [
    "CHECK_NAMES",
    "EXPECT_KEYS",
    "FAULT_ACTIONS",
    "FEATURE_NAMES",
    "LOSS_MODES",
    "NEMESIS_ACTIONS",
    "PARTITION_SHAPES",
    "TARGET_GRAMMAR",
    "ClusterSpec",
    "ConsumerSpec",
    "Expectation",
    "FaultSpec",
    "FlushPolicy",
    "NemesisSpec",
    "NetworkSpec",
    "NodeSpec",
    "ProducerSpec",
    "ProtocolSpec",
    "StorageSpec",
    "Timing",
    "TopicSpec",
    "Topology",
    "TopologyError",
    "WorkloadSpec",
    "load_topology",
    "not_yet_acted_on",
    "parse_topology",
]
