"""Parallel strategy: not analysed by this version yet; the section says what it would read."""

from ._pending import pending

ID = "strategy"
TITLE = "Parallel strategy"
SOURCES = "MindSpore Insight: parallel_strategy_<rank>.json and profiler_info_<rank>.json; Ascend: profiler_metadata.json (parallel_group_info); PyTorch: distributedInfo/pg_config in the trace"

analyze, present = pending(("parallel_strategy", "profiler_info"), SOURCES)
