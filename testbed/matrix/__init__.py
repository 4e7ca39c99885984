"""The CI fault matrix (DESIGN section 9): a matrix file's cells, run in parallel and judged in one job."""
