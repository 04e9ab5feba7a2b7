"""Execution overview: not analysed by this version yet; the section says what it would read."""

from __future__ import annotations

from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, View
from ._pending import pending_reason

ID = "execution"
TITLE = "Execution overview"
SOURCES = "MindSpore Insight: ascend_timeline_display_<rank>.json; Ascend: trace_view.json; PyTorch: GPU kernels in the trace"


def analyze(run: Run, options=None) -> Analysis:
    raise Unavailable(pending_reason(run, "timeline_display", SOURCES))


def present(analysis: Analysis) -> View:  # pragma: no cover - analyze always raises for now
    return View()
