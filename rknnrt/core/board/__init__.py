"""The board estimate: what a board's profiler and performance queries would report.

Owns RKNN_QUERY_PERF_DETAIL / PERF_RUN timing: the vendor's fused layers of a graph (`layers.py`;
the CPU layers of a segmented model: `segment_layers.py`), the per-SoC constants and costs
(`soc_costs.py`), profiling on the host and the board view (`perf.py`, the door) and the table's
text (`table.py`; a segmented model's: `segmented_table.py`).
"""
