"""Multi-query sliding-window aggregation (issue 13)."""
