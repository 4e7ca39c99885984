"""Deterministic simulation (`python run.py sim`): the protocol code of `broker/protocol/`
and its runtime adapters on virtual time, with a simulated network and simulated clients,
every random choice drawn from the seed (FoundationDB's and TigerBeetle's way; Apache
Kafka's `RaftEventSimulationTest` does it for Raft alone).

What differs from a run of processes is only the executor (`node.py`, one event loop for
every node instead of one process each), the network (`network.py`, messages as scheduled
events) and the time (`loop.py`, a virtual clock); the roles, the storage code with its
durability journal, the fault injector, the targets, the schedule, the run directory's
format and the Spark checks are the very same.
"""
