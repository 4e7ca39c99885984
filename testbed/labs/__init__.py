"""The teaching labs (DESIGN section 9, `topologies/labs/`): a guide, runs that break one
rule and then fix it, and the answers the runs give."""
