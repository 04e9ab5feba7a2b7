"""Execution overview: not analysed by this version yet; the section says what it would read."""

from ._pending import pending

ID = "execution"
TITLE = "Execution overview"
SOURCES = "MindSpore Insight: ascend_timeline_display_<rank>.json; Ascend: trace_view.json; PyTorch: GPU kernels in the trace"

analyze, present = pending(("timeline_display", "trace_view"), SOURCES)
