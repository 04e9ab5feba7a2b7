"""Communication: not analysed by this version yet; the section says what it would read."""

from __future__ import annotations

from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, View
from ._pending import pending_reason

ID = "communication"
TITLE = "Communication"
SOURCES = "MindSpore Insight: hccl_raw_<rank>.csv (profile with HCCL/communication data on); Ascend: communication.json and communication_matrix.json; PyTorch: NCCL/gloo collectives in the trace"


def analyze(run: Run, options=None) -> Analysis:
    raise Unavailable(pending_reason(run, "hccl_raw", SOURCES))


def present(analysis: Analysis) -> View:  # pragma: no cover - analyze always raises for now
    return View()
