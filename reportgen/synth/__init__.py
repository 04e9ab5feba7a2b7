"""Synthetic, format-valid profiler output with known ground truth (demo data and tests).

One generator per input family, each with injectable anomalies (``anomalies`` in the returned ground truth):
MindSpore Insight cluster layout (:mod:`.mindinsight`), torch_npu Ascend text export (:mod:`.ascend`) and PyTorch
Kineto traces (:mod:`.kineto`).
"""

from reportgen.synth.ascend import AscendSpec, write_ascend_run
from reportgen.synth.kineto import KinetoSpec, write_kineto_run
from reportgen.synth.mindinsight import TICKS_PER_MS, MindInsightSpec, write_mindinsight_run

__all__ = ["MindInsightSpec", "write_mindinsight_run", "TICKS_PER_MS", "AscendSpec", "write_ascend_run", "KinetoSpec",
           "write_kineto_run"]
