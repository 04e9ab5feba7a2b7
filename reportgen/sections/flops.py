"""FLOPs: not analysed by this version yet; the section says what it would read."""

from __future__ import annotations

from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, View
from ._pending import pending_reason

ID = "flops"
TITLE = "FLOPs"
SOURCES = "MindSpore Insight: flops_summary_<rank>.json; Ascend: kernel_details.csv with PMU columns (aic_metrics); PyTorch: record_shapes=True"


def analyze(run: Run, options=None) -> Analysis:
    raise Unavailable(pending_reason(run, "flops_summary", SOURCES))


def present(analysis: Analysis) -> View:  # pragma: no cover - analyze always raises for now
    return View()
