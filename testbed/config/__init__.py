"""The pieces of `testbed.topology`, one job per module; import from `testbed.topology`.

Kept out of the public path so callers depend on one stable name while these modules split
and merge as the schema grows (DESIGN section 6).
"""
