"""Computation / communication overlap: not analysed by this version yet; the section says what it would read."""

from __future__ import annotations

from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, View
from ._pending import pending_reason

ID = "overlap"
TITLE = "Computation / communication overlap"
SOURCES = "MindSpore Insight: ascend_cluster_analyse_<mode>_<stages>_<size>_<rank>.csv; Ascend: step_trace_time.csv; PyTorch: GPU kernels with NCCL kernels in the trace"


def analyze(run: Run, options=None) -> Analysis:
    raise Unavailable(pending_reason(run, "cluster_analyse", SOURCES))


def present(analysis: Analysis) -> View:  # pragma: no cover - analyze always raises for now
    return View()
