"""FLOPs: not analysed by this version yet; the section says what it would read."""

from ._pending import pending

ID = "flops"
TITLE = "FLOPs"
SOURCES = "MindSpore Insight: flops_summary_<rank>.json; Ascend: kernel_details.csv with PMU columns (aic_metrics); PyTorch: record_shapes=True"

analyze, present = pending(("flops_summary", "kernels"), SOURCES)
