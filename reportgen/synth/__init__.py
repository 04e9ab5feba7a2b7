"""Synthetic, format-valid profiler output with known ground truth (demo data and tests)."""

from reportgen.synth.mindinsight import TICKS_PER_MS, MindInsightSpec, write_mindinsight_run

__all__ = ["MindInsightSpec", "write_mindinsight_run", "TICKS_PER_MS"]
