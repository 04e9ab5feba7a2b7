"""The run model: what every reader produces and every section reads.

Units are fixed everywhere: time in milliseconds (``*_ms``), sizes in megabytes of
10^6 bytes (``*_mb``), bandwidth in GB/s (``*_gbps``), ratios as fractions 0..1.
Ranks are GLOBAL rank ids (never device ids, never group-local ids).

A reader fills ``Run.tables`` with the tables it can build; the documented columns of
each table are in :data:`TABLES`. A table that the source cannot provide is simply
absent (``run.table(name)`` returns ``None``), and the sections that need it say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

#: Every table a reader may provide: name -> {column: meaning (unit)}.
TABLES: dict[str, dict[str, str]] = {
    "ranks": {
        "rank": "global rank id",
        "host": "host name or IP the rank ran on (None when the data does not say)",
        "device_id": "device id on its host (None when unknown)",
        "stage": "pipeline stage, 1-based (None when not pipeline parallel)",
    },
    "step_trace": {
        "rank": "global rank id",
        "step": "step number as written by the profiler",
        "step_ms": "step time: end of previous step to end of this step (ms)",
        "step_interval_ms": "step interval: step start to forward start, i.e. waiting for data (ms)",
        "fp_bp_ms": "forward and backward propagation: forward start to backward end (ms)",
        "tail_ms": "step tail: backward end to step end, gradient aggregation and update (ms)",
        "start_ms": "step start on the device clock (ms, absolute)",
        "end_ms": "step end on the device clock (ms, absolute)",
    },
    "step_trace_avg": {
        "rank": "global rank id",
        "step_ms": "average step time as written by the profiler in its own average row (ms)",
        "step_interval_ms": "average step interval from the profiler's average row (ms)",
        "fp_bp_ms": "average forward+backward from the profiler's average row (ms)",
        "tail_ms": "average tail from the profiler's average row (ms)",
    },
    "step_ops": {
        "rank": "global rank id",
        "step": "step number",
        "op": "operator name as written in the step trace (untrusted text)",
        "stream": "stream id (None when the column naming has none)",
        "start_ms": "operator start on the device clock (ms, absolute)",
        "end_ms": "operator end on the device clock (ms, absolute)",
        "dur_ms": "operator duration (ms)",
    },
    "cluster_overlap": {
        "rank": "global rank id",
        "step": "step number (row order of the file, 1-based)",
        "computation_ms": "MindSpore 'computation_time' = step time minus pure communication (includes idle) (ms)",
        "comm_alone_ms": "pure communication: communication not overlapped by computation (ms)",
        "stage_ms": "stage time = step time minus pure receive (ms; pipeline only)",
        "receive_alone_ms": "pure receive time (ms; pipeline only)",
        "collective_comm_alone_ms": "pure communication excluding Receive operators (ms; pipeline only)",
    },
    "cluster_overlap_avg": {
        "rank": "global rank id",
        "computation_ms": "as cluster_overlap, from the file's average row (ms)",
        "comm_alone_ms": "as cluster_overlap, from the file's average row (ms)",
        "stage_ms": "as cluster_overlap, from the file's average row (ms)",
        "receive_alone_ms": "as cluster_overlap, from the file's average row (ms)",
        "collective_comm_alone_ms": "as cluster_overlap, from the file's average row (ms)",
    },
    "files": {
        "rank": "global rank id the file belongs to (None for run-wide files)",
        "kind": "recognised file kind, e.g. step_trace, hccl_raw, flops_summary",
        "path": "path of the file",
    },
}


@dataclass
class DataProblem:
    """Something in the input that was skipped or repaired; listed in the report and metrics."""

    path: str
    problem: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "problem": self.problem}


@dataclass
class Run:
    """One distributed training run, every rank, in fixed units."""

    name: str
    source_format: str  # mindinsight | ascend | kineto
    source_path: str
    layout: str = ""  # human description of how the data was found
    world_size: int | None = None
    ranks: list[int] = field(default_factory=list)  # ranks found in the data
    missing_ranks: list[int] = field(default_factory=list)  # expected but not found
    hosts: dict[int, str] = field(default_factory=dict)  # rank -> host, only where known
    devices: dict[int, int] = field(default_factory=dict)  # rank -> device id, only where known
    parallel: dict[str, Any] = field(default_factory=dict)  # mode, stages, dp, tp, pp (where known)
    steps: list[int] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    problems: list[DataProblem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    is_demo: bool = False

    def table(self, name: str) -> pd.DataFrame | None:
        df = self.tables.get(name)
        if df is None or df.empty:
            return None
        return df

    def problem(self, path: Any, problem: str) -> None:
        self.problems.append(DataProblem(str(path), problem))

    @property
    def stages(self) -> int | None:
        return self.parallel.get("stages")

    def stage_of(self, rank: int) -> int | None:
        """Pipeline stage (1-based) of a global rank, from the layout the data states.

        MindSpore assigns consecutive blocks of ``world_size / stages`` ranks to each stage
        (MindInsight ``cluster_analyser.py``: ``stage = rank // (rank_size / stage_num) + 1``).
        """
        stages = self.stages
        size = self.world_size
        if not stages or not size or stages < 1:
            return None
        per_stage = size / stages
        return int(rank // per_stage) + 1

    def host_of(self, rank: int) -> str | None:
        return self.hosts.get(rank)

    def ranks_table(self) -> pd.DataFrame:
        return pd.DataFrame(
            {
                "rank": self.ranks,
                "host": [self.hosts.get(r) for r in self.ranks],
                "device_id": [self.devices.get(r) for r in self.ranks],
                "stage": [self.stage_of(r) for r in self.ranks],
            }
        )
