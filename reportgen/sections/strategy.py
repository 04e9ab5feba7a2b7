"""Parallel strategy: not analysed by this version yet; the section says what it would read."""

from __future__ import annotations

from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, View
from ._pending import pending_reason

ID = "strategy"
TITLE = "Parallel strategy"
SOURCES = "MindSpore Insight: parallel_strategy_<rank>.json and profiler_info_<rank>.json; Ascend: profiler_metadata.json (parallel_group_info); PyTorch: distributedInfo/pg_config in the trace"


def analyze(run: Run, options=None) -> Analysis:
    raise Unavailable(pending_reason(run, "parallel_strategy", SOURCES))


def present(analysis: Analysis) -> View:  # pragma: no cover - analyze always raises for now
    return View()
