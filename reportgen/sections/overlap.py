"""Computation / communication overlap: not analysed by this version yet; the section says what it would read."""

from ._pending import pending

ID = "overlap"
TITLE = "Computation / communication overlap"
SOURCES = "MindSpore Insight: ascend_cluster_analyse_<mode>_<stages>_<size>_<rank>.csv; Ascend: step_trace_time.csv; PyTorch: GPU kernels with NCCL kernels in the trace"

analyze, present = pending("cluster_analyse", SOURCES)
