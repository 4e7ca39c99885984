"""The pieces of `testbed.topology`, one job per module. Outside the package (users,
`run.py`) import from `testbed.topology`; the testbed's own packages import the module here
that they need, since the facade sits in the `testbed` package itself, beside the API
(`from testbed import Cluster`), which leads down to them.

Kept out of the public path so callers depend on one stable name while these modules split
and merge as the schema grows (DESIGN section 6).
"""
