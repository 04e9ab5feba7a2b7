"""Memory: not analysed by this version yet; the section says what it would read."""

from __future__ import annotations

from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, View
from ._pending import pending_reason

ID = "memory"
TITLE = "Memory"
SOURCES = "MindSpore Insight: memory_usage_summary_<rank>.json (profile_memory=True); Ascend: memory_record.csv / npu_module_mem.csv; PyTorch: profile_memory=True"


def analyze(run: Run, options=None) -> Analysis:
    raise Unavailable(pending_reason(run, "memory_usage_summary", SOURCES))


def present(analysis: Analysis) -> View:  # pragma: no cover - analyze always raises for now
    return View()
