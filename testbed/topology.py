"""Topology files (DESIGN section 6, schema v1) parsed once, at the edge, into frozen specs.

The one import path for the rest of the code; the work is done in `testbed.config`, a module
per section, so this name stays put while those modules change.
"""
from faults.fault_spec import (
    FAULT_ACTIONS,
    LOSS_MODES,
    NEMESIS_ACTIONS,
    PARTITION_SHAPES,
    FaultSpec,
    NemesisSpec,
)
from testbed.config.features import FEATURE_NAMES, not_yet_acted_on
from testbed.config.loader import load_topology
from testbed.config.nemesis_section import never_firing
from testbed.config.parser import TopologyError, parse_topology
from testbed.config.references import TARGET_GRAMMAR
from testbed.config.specs import (
    CHECK_NAMES,
    EXPECT_KEYS,
    ClusterSpec,
    ConsumerSpec,
    Expectation,
    FlushPolicy,
    NetworkSpec,
    NodeSpec,
    ProducerSpec,
    ProtocolSpec,
    StorageSpec,
    Timing,
    TopicSpec,
    WorkloadSpec,
)
from testbed.config.topology_spec import Topology

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
    "never_firing",
    "not_yet_acted_on",
    "parse_topology",
]
