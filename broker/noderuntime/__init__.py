"""The I/O side of a node, split by job: configuration, event records, and each role's disk and log handling."""
