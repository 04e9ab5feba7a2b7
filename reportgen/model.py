"""The run model: what every reader produces and every section reads.

Units are fixed everywhere: time in milliseconds (``*_ms``), sizes in megabytes of
10^6 bytes (``*_mb``), bandwidth in GB/s (``*_gbps``), ratios as fractions 0..1.
Ranks are GLOBAL rank ids (never device ids, never group-local ids).

Time base. Readers parse every timestamp exactly into integer nanoseconds (never through a float
of the absolute value: an epoch time of ~1.7e15 µs held as a float resolves only 0.25 µs). The run's
origin ``Run.time_origin_ns`` is the earliest such integer, and every absolute time column
(``start_ms``, ``end_ms``, ``ts_ms``, ``alloc_ms``, ``release_ms``) holds
``(t_ns - time_origin_ns) / 1e6``, made by :func:`rel_ms` and nowhere else. Equal instants therefore
give equal floats, order is kept, and shifting every input timestamp by a constant changes only the
origin, never a number. Durations (``*_ms`` that are lengths) are ``dur_ns / 1e6``.

Steps. ``Run.step_source`` says where the steps come from: ``markers`` (ProfilerStep#N, Ascend step
ids, MindInsight step_num), ``repeated_ops`` (the n-th occurrence of a repeated op sequence, when no
marker exists), or ``whole_trace`` (no marker and no repetition: one window over the whole trace,
HTA's default; its step id is 0). Work outside every step is never a step of its own: readers may
keep it with step ``-1`` in event tables, and :mod:`reportgen.facts` leaves it out of every per-step
number. Which steps are in scope, which are warm-up, per-rank step time and the slowest / median /
fastest rank are computed once in :mod:`reportgen.facts` and read by every section.

A reader fills ``Run.tables`` with the tables it can build; the documented columns of
each table are in :data:`TABLES`. A table that the source cannot provide is simply
absent (``run.table(name)`` returns ``None``), and the sections that need it say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
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
        "start_ms": "step start on the device clock (ms from the run origin)",
        "end_ms": "step end on the device clock (ms from the run origin)",
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
        "start_ms": "operator start on the device clock (ms from the run origin)",
        "end_ms": "operator end on the device clock (ms from the run origin)",
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
    # ---- Ascend (torch_npu / MindSpore 2.x ASCEND_PROFILER_OUTPUT), also filled from DB exports
    "step_time": {
        "rank": "global rank id",
        "step": "step number (ProfilerStep id; -1 when the profiler wrote none)",
        "step_ms": "device end-to-end time of the step = computing + comm not overlapped + free (ms)",
        "computing_ms": "union of compute kernel time (ms)",
        "comm_not_overlapped_ms": "communication not overlapped by computation (ms)",
        "overlapped_ms": "communication overlapped by computation (ms)",
        "comm_ms": "communication busy time: union of communication op time (ms; shown as comm_busy_ms)",
        "free_ms": "device time with neither computation nor communication (ms)",
        "stage_ms": "step span without bubble, as the profiler wrote it (ms)",
        "bubble_ms": "receive time as the profiler counts it (ms; torch_npu: hcom_receive only)",
        "comm_not_overlapped_exclude_receive_ms": "comm not overlapped minus bubble (ms)",
        "preparing_ms": "step start to first device op (ms; NaN when the column is absent)",
    },
    "groups": {
        "group": "process-group key (profiler_metadata parallel_group_info key, e.g. group_name_19)",
        "name": "framework name of the group (dp, tp, pp, mp, dp_cp, default_group, ...)",
        "kind": "dp | tp | pp | cp | ep | world | other",
        "ranks": "sorted global ranks of the group (list of int)",
        "hash": "HCCL group hash as a decimal string (the @suffix of op names)",
    },
    # every family fills comm_ops (reportgen/readers/comm.py: what each family puts in it, written once)
    "comm_ops": {
        "rank": "global rank id",
        "step": "step number (-1 outside every step)",
        "kind": "collective | p2p",
        "op": "communication op name without the @group suffix (untrusted text)",
        "op_type": "allreduce, allgather, reducescatter, alltoall, broadcast, reduce, send, receive, batchsendrecv, "
                   "barrier, other (readers.comm.OP_TYPES)",
        "group": "group key shared by the ranks of the process group when known, else the group hash ('' / None: "
                 "the files do not say)",
        "start_ms": "op start, local clock (ms from the run origin; the column is absent when the files give none)",
        "elapse_ms": "op duration (ms)",
        "transit_ms": "transfer time (ms; Ascend: master plane; NaN where the family has none)",
        "wait_ms": "wait time (ms; NaN where the family has none)",
        "sync_ms": "synchronisation time (ms; NaN where the family has none)",
        "idle_ms": "idle time (ms; NaN where the family has none)",
        "size_mb": "optional: bytes moved by the op (MB)",
        "bandwidth_gbps": "optional: size / duration (GB/s)",
        "busbw_gbps": "optional: bus bandwidth, nccl-tests convention (GB/s)",
        "peer_rank": "optional: GLOBAL peer of a send / receive (-1 unknown)",
    },
    "comm_rank_step": {
        "rank": "global rank id",
        "step": "step number",
        "elapse_ms": "the profiler's own per-step communication op time (ms; hccl_raw: communication + wait)",
        "transit_ms": "transfer time (ms; hccl_raw communication_cost)",
        "wait_ms": "wait time (ms; hccl_raw wait_cost)",
    },
    "comm_rank_avg": {
        "rank": "global rank id",
        "elapse_ms": "as comm_rank_step, from the file's own average row (ms)",
        "transit_ms": "as comm_rank_step, from the file's own average row (ms)",
        "wait_ms": "as comm_rank_step, from the file's own average row (ms)",
    },
    "comm_links_local": {
        "rank": "global rank id of the file that reported the link",
        "step": "step number (-1: the file's average row)",
        "op": "operator the entry belongs to (None: the step's own link entry)",
        "src_local": "source as a GROUP-LOCAL index (the files do not say which group)",
        "dst_local": "destination as a group-local index",
        "transport": "transport as written",
        "time_ms": "transit time (ms)",
        "size_mb": "transit size (MB)",
        "bandwidth_gbps": "bandwidth as written (GB/s)",
    },
    "comm_bandwidth": {
        "rank": "global rank id",
        "step": "step number",
        "kind": "collective | p2p",
        "op": "communication op name",
        "group": "group key when known, else the group hash",
        "transport": "RDMA | HCCS | PCIE | SIO | SDMA; the profiler's SDMA entry aggregates HCCS+PCIE+SIO, so SDMA "
                     "rows here hold only what it carries beyond them: the transports of an op can be summed",
        "size_mb": "transit size (MB)",
        "time_ms": "transit time (ms)",
        "bandwidth_gbps": "bandwidth as written by the profiler (GB/s)",
        "large_packet_ratio": "share of large packets (0..1)",
    },
    "comm_matrix": {
        "rank": "global rank id of the file that reported the link",
        "step": "step number",
        "kind": "collective | p2p",
        "op_type": "op type, lower case (allreduce, batchsendrecv, ...)",
        "stat": "top1 | middle | bottom1 | bottom2 | bottom3 | total",
        "group": "group key when known, else the group hash",
        "src_rank": "GLOBAL source rank (mapped from the group-local index)",
        "dst_rank": "GLOBAL destination rank",
        "transport": "HCCS | PCIE | RDMA | LOCAL | SIO | SDMA",
        "size_mb": "transit size (MB)",
        "time_ms": "transit time (ms)",
        "bandwidth_gbps": "bandwidth (GB/s)",
        "op_name": "the op the entry comes from (untrusted text)",
    },
    "kernels": {
        "rank": "global rank id",
        "step": "step number (NaN when unknown)",
        "name": "kernel name (untrusted text)",
        "type": "op type",
        "core": "accelerator core (AI_CORE, AI_VECTOR_CORE, MIX_AIC, AI_CPU, COMMUNICATION, ...)",
        "stream": "stream id (NaN when unknown)",
        "start_ms": "start, local clock (ms from the run origin)",
        "dur_ms": "duration (ms)",
    },
    "op_stats": {
        "rank": "global rank id",
        "op_type": "op type",
        "core": "core type",
        "count": "calls",
        "total_ms": "total time (ms)",
        "avg_ms": "mean time (ms)",
        "min_ms": "shortest (ms)",
        "max_ms": "longest (ms)",
    },
    "memory_record": {
        "rank": "global rank id",
        "component": "APP | PTA | PTA+GE | GE | WORKSPACE | MindSpore ... (untrusted text)",
        "ts_ms": "sample time, local clock (ms from the run origin)",
        "allocated_mb": "total allocated (MB; NaN when absent)",
        "reserved_mb": "total reserved (MB)",
        "active_mb": "total active (MB; NaN when absent)",
    },
    "module_mem": {
        "rank": "global rank id",
        "component": "CANN module (untrusted text)",
        "ts_ms": "sample time, local clock (ms from the run origin)",
        "reserved_mb": "total reserved (MB)",
    },
    "operator_memory": {
        "rank": "global rank id",
        "name": "operator (untrusted text)",
        "size_mb": "allocation size (MB, 10^6 B; the file's KB are 10^3 B)",
        "alloc_ms": "allocation time, local clock (ms from the run origin)",
        "release_ms": "release time (ms; NaN when released after the window)",
        "duration_ms": "lifetime (ms)",
    },
    # ---- from trace_view.json (streamed) or the DB's TASK / OVERLAP_ANALYSIS / COMMUNICATION_OP tables
    "trace_steps": {
        "rank": "global rank id",
        "step": "step number from ProfilerStep#N",
        "start_ms": "step start (ms from the run origin)",
        "end_ms": "step end (ms from the run origin)",
    },
    "overlap_intervals": {
        "rank": "global rank id",
        "kind": "computing | communication | comm_not_overlapped | free",
        "start_ms": "interval start (ms from the run origin)",
        "end_ms": "interval end (ms from the run origin)",
    },
    "hccl_ops": {
        "rank": "global rank id",
        "op": "large HCCL op name (hcom_allReduce__586_0_1; untrusted text)",
        "lane": "HCCL group lane as the trace names it (Group N Communication)",
        "start_ms": "start (ms from the run origin)",
        "dur_ms": "duration (ms)",
    },
    "device_ops": {
        "rank": "global rank id",
        "name": "device kernel / CPU op name (untrusted text)",
        "stream": "stream or thread lane",
        "start_ms": "start (ms from the run origin)",
        "dur_ms": "duration (ms)",
    },
    # ---- every family: one device timeline (reportgen/timeline.py builds it from the tables above)
    "device_timeline": {
        "rank": "global rank id",
        "step": "step the interval starts in (-1 outside every step)",
        "start_ms": "start (ms, relative to the run origin)",
        "end_ms": "end (ms, relative to the run origin)",
        "kind": "compute | communication | receive | memcpy",
        "name": "op / kernel name (untrusted text)",
        "stream": "stream, plane or thread lane (text)",
        "source": "trace (recorded intervals) | derived (e.g. MindInsight FP/BP span minus its communication ops)",
    },
    # ---- PyTorch Kineto traces
    "host_ops": {
        "rank": "global rank id",
        "name": "CPU op name (untrusted text)",
        "tid": "thread id as written (the main thread: the one with the ProfilerStep spans)",
        "start_ms": "start (ms)",
        "dur_ms": "duration (ms)",
    },
    "dataloader": {
        "rank": "global rank id",
        "step": "ProfilerStep the span starts in (-1 outside every step)",
        "name": "enumerate(DataLoader)#...__next__ span name (untrusted text)",
        "start_ms": "start (ms from the run origin)",
        "dur_ms": "duration (ms)",
    },
    "p2p_links": {
        "group": "process group of the send/recv (its ranks, else its name)",
        "src_rank": "GLOBAL sending rank (Dst Rank / Src Rank args of the NCCL p2p kernels)",
        "dst_rank": "GLOBAL receiving rank",
        "transport": "intra-host | inter-host (hosts known) | p2p",
        "ops": "send/recv pairs seen",
        "matched": "pairs with both the send and the recv kernel",
        "size_mb": "bytes sent over matched pairs (MB)",
        "time_ms": "transfer time: per pair the shorter of the two kernels, summed (ms)",
        "bandwidth_gbps": "size / time (GB/s)",
    },
    "files": {
        "rank": "global rank id the file belongs to (None for run-wide files)",
        "kind": "recognised file kind, e.g. step_trace, hccl_raw, flops_summary",
        "path": "path of the file",
    },
}


def rel_ms(t_ns, origin_ns: int):
    """Integer-ns absolute times (int, numpy int64 array or Series) -> ms relative to ``origin_ns``.

    The only place absolute time becomes a float (module doc, "Time base"). The subtraction is done in
    integers, so the result does not depend on where the clock's zero is."""
    if isinstance(t_ns, (pd.Series, pd.Index)):
        return (t_ns.astype("int64") - int(origin_ns)) / 1e6
    if isinstance(t_ns, np.ndarray):
        return (t_ns.astype(np.int64) - np.int64(origin_ns)) / 1e6
    return (int(t_ns) - int(origin_ns)) / 1e6


def share_text(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with each text column holding one object per distinct value (in place; returned).

    Readers that stack per-rank frames get a new string per cell from the csv module and the JSON decoders, and
    op names, groups, transports and kernel types repeat in every step of every rank: at 1024 Ascend ranks the
    communication tables held ~500 MB of duplicate strings. Values, dtypes and order are unchanged."""
    text = [c for c, t in df.dtypes.items() if t == object or isinstance(t, pd.StringDtype)]
    for col in text:
        values = df[col]
        codes, uniques = pd.factorize(values, use_na_sentinel=False)
        if 2 * len(uniques) <= len(values):  # mostly distinct values (op names with counters): nothing to gain
            df[col] = uniques.array.take(codes) if isinstance(values.dtype, pd.StringDtype) else \
                pd.Series(np.asarray(uniques, dtype=object)[codes], index=df.index, dtype=object)
    return df


class ByRank:
    """The rows of ``df`` one rank at a time, ``df`` split once: ``df[df["rank"] == r]`` in a loop over the ranks
    reads every row once per rank (ranks x rows: at 4096 Kineto ranks, tens of seconds per such loop). ``by[r]``
    has the rows, order and index that filter gives; a rank without rows gives ``df``'s empty frame, and every rank
    gives None when ``df`` is None."""

    def __init__(self, df: pd.DataFrame | None, column: str = "rank"):
        self._empty = None if df is None else df.iloc[:0]
        self._groups = {} if df is None or df.empty else dict(iter(df.groupby(column, sort=False)))

    def __getitem__(self, rank) -> pd.DataFrame | None:
        return self._groups.get(rank, self._empty)


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
    layout: str = ""
    #: integer ns on the readers' clock that every absolute ``*_ms`` column is relative to (module doc)
    time_origin_ns: int = 0
    #: markers | repeated_ops | whole_trace (module doc); "" when the run has no per-step data
    step_source: str = ""  # human description of how the data was found
    world_size: int | None = None
    ranks: list[int] = field(default_factory=list)  # ranks found in the data
    missing_ranks: list[int] = field(default_factory=list)  # expected but not found
    hosts: dict[int, str] = field(default_factory=dict)  # rank -> host, only where known
    devices: dict[int, int] = field(default_factory=dict)  # rank -> device id, only where known
    parallel: dict[str, Any] = field(default_factory=dict)  # mode, stages, dp, tp, pp (where known)
    stage_map: dict[int, int] = field(default_factory=dict)  # rank -> pipeline stage (1-based), from the data
    steps: list[int] = field(default_factory=list)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    problems: list[DataProblem] = field(default_factory=list)
    problems_unlisted: int = 0  # data problems counted but not kept (Run.problem)
    notes: list[str] = field(default_factory=list)
    is_demo: bool = False
    #: tables parsed only when a section first asks for them (large files no section may need)
    loaders: dict[str, Callable[[], pd.DataFrame | None]] = field(default_factory=dict)

    def table(self, name: str) -> pd.DataFrame | None:
        if name not in self.tables and name in self.loaders:
            df = self.loaders.pop(name)()
            if df is not None:
                self.tables[name] = df
        df = self.tables.get(name)
        if df is None or df.empty:
            return None
        return df

    def problem(self, path: Any, problem: str) -> None:
        """Record a data problem. Memory stays bounded whatever the input: past 10x what the report lists
        (:data:`reportgen.limits.MAX_PROBLEMS`), further problems are only counted."""
        from .limits import MAX_PROBLEMS, cap_text

        if len(self.problems) < 10 * MAX_PROBLEMS:
            self.problems.append(DataProblem(cap_text(str(path), 1024), cap_text(problem, 2048)))
        else:
            self.problems_unlisted += 1

    @property
    def stages(self) -> int | None:
        return self.parallel.get("stages")

    def stage_of(self, rank: int) -> int | None:
        """Pipeline stage (1-based) of a global rank, as the reader derived it from the data."""
        return self.stage_map.get(rank)

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
