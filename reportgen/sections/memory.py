"""Memory: not analysed by this version yet; the section says what it would read."""

from ._pending import pending

ID = "memory"
TITLE = "Memory"
SOURCES = "MindSpore Insight: memory_usage_summary_<rank>.json (profile_memory=True); Ascend: memory_record.csv / npu_module_mem.csv; PyTorch: profile_memory=True"

analyze, present = pending(("memory_usage_summary", "memory_record", "module_mem", "operator_memory"), SOURCES)
