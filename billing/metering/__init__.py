"""Measuring GPU-seconds inside the TSDB. Pure: builds PromQL/MetricsQL and shapes answers; no Django.

`usage.measure(...)` is the entry point (see its module docstring for the exact contract);
`promql` holds the query text and the derivation of why it is exact; `source.UsageSource` is the seam the
collector measures through (`source.PromQLUsageSource` wraps `usage.measure_report`).
"""
