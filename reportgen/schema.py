"""The canonical schema: every table a reader fills (or registers as a lazy loader) and a section reads.

Like Perfetto trace-processor's table definitions: one place that says, for each table, what it holds and, for each
column, its dtype, unit, whether it may be null and what it means. :data:`reportgen.model.TABLES` is derived from
it, and :func:`check` holds a run to it (``tests/test_schema.py`` checks every fixture family, the demo and the
synthetic generators).

Column fields:

* ``dtype``: ``int64`` (any integer dtype; a nullable int64 column may be float64 holding whole numbers and NaN,
  as pandas stores it, or objects holding ints and None), ``float64`` (any float dtype; integers are accepted: a
  float column that happens to hold whole numbers), ``str`` (pandas text, or object holding str), ``bool``,
  ``list`` (object holding lists / tuples), ``object`` (anything).
* ``unit``: one of :data:`UNITS`; ``none`` for ids, names and enums. Time columns follow the model's time base
  (:mod:`reportgen.model`): absolute times are ms relative to the run origin, durations are ms; ``*_ns`` columns
  are integer ns on the profiler's clock (kept for HTA's whole-µs conventions only).
* ``nullable``: whether missing values (None / NaN) are part of the contract; the doc says why.
* ``ext``: a family extension column: documented and optional (only some families or file versions write it), so a
  table without it is still canonical. Core columns (``ext=False``) are required whenever the table exists.

Rules :func:`check` applies: unknown tables, missing core columns, dtype mismatches, nulls in non-nullable
columns, negative durations (the columns of :data:`DURATIONS` and ``end_ms < start_ms``), ``rank`` values not among
``run.ranks``. Tables that a loader would build (``run.loaders``) are loaded and checked too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

#: units a column may declare
UNITS = ("ns", "ms", "MB", "GB/s", "ratio", "percent", "count", "FLOP", "MFLOP", "GFLOP", "FLOP/s", "none")
DTYPES = ("int64", "float64", "str", "bool", "list", "object")
#: the one vocabulary of operation classes (``op_class`` of ``device_timeline``, ``kernels``, ``op_stats``,
#: ``device_ops``): decided once per family at the reader edge (reportgen/readers/ascend.py :func:`op_class`,
#: reportgen/timeline.py for the families whose tables say it themselves)
OP_CLASSES = ("compute", "communication", "wait", "memcpy", "other")
#: columns that are lengths of time and never negative
DURATIONS = frozenset({"dur_ms", "dur_ns", "elapse_ms", "duration_ms", "step_ms", "time_ms", "total_ms", "avg_ms",
                       "min_ms", "max_ms"})


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str
    unit: str
    doc: str
    nullable: bool = False
    ext: bool = False

    def __post_init__(self):
        assert self.dtype in DTYPES, self.dtype
        assert self.unit in UNITS, self.unit


@dataclass(frozen=True)
class Table:
    name: str
    doc: str
    columns: tuple[Column, ...] = field(default_factory=tuple)

    def column(self, name: str) -> Column | None:
        return next((c for c in self.columns if c.name == name), None)

    @property
    def required(self) -> list[str]:
        return [c.name for c in self.columns if not c.ext]


def C(name, dtype, unit, doc, nullable=False, ext=False) -> Column:  # noqa: N802 - a table row, read as a row
    return Column(name, dtype, unit, doc, nullable, ext)


RANK = C("rank", "int64", "none", "global rank id (never a device id or a group-local index)")


def _t(name: str, doc: str, *columns: Column) -> Table:
    return Table(name, doc, tuple(columns))


_BREAKDOWN_AVG = "as cluster_overlap, from the file's average row"

SCHEMA: tuple[Table, ...] = (
    # ------------------------------------------------------------------ every family
    _t("files", "Recognised input files, one row per file.",
       C("rank", "int64", "none", "global rank the file belongs to (NaN / None for run-wide files)", nullable=True),
       C("kind", "str", "none", "recognised file kind, e.g. step_trace, hccl_raw, flops_summary"),
       C("path", "str", "none", "path of the file")),
    _t("groups", "Process groups: the union of every rank's group list.",
       C("group", "str", "none", "process-group key (profiler_metadata parallel_group_info key, e.g. group_name_19; "
                                 "Kineto: the pg name)"),
       C("name", "str", "none", "framework name of the group (dp, tp, pp, mp, dp_cp, default_group, ...)"),
       C("kind", "str", "none", "dp | tp | pp | cp | ep | world | other"),
       C("ranks", "list", "none", "sorted global ranks of the group (list of int)"),
       C("hash", "str", "none", "HCCL group hash as a decimal string (the @suffix of op names; '' when none)")),
    _t("device_timeline",
       "One device timeline per run, built in reportgen/timeline.py from the families' tables (lazy).",
       RANK,
       C("step", "int64", "none", "step the interval starts in (-1 outside every step)"),
       C("start_ms", "float64", "ms", "start (ms, relative to the run origin)"),
       C("end_ms", "float64", "ms", "end (ms, relative to the run origin)"),
       C("kind", "str", "none", "compute | communication | receive | memcpy | wait | other: op_class, with a p2p "
                                "receive told apart from other communication (receive is communication)"),
       C("op_class", "str", "none", "compute | communication | wait | memcpy | other, decided once per family at "
                                    "the reader edge (schema.OP_CLASSES)"),
       C("name", "str", "none", "op / kernel name (untrusted text)"),
       C("stream", "str", "none", "stream, plane or thread lane (text)"),
       C("source", "str", "none", "trace (recorded intervals) | derived (e.g. MindInsight FP/BP span minus its "
                                  "communication ops)")),
    _t("trace_steps", "Step windows from step markers (ProfilerStep#N, Ascend STEP_TIME, whole-trace windows).",
       RANK, C("step", "int64", "none", "step number from ProfilerStep#N (0: whole-trace window)"),
       C("start_ms", "float64", "ms", "step start (ms from the run origin)"),
       C("end_ms", "float64", "ms", "step end (ms from the run origin)")),
    _t("step_time", "Per rank and step: the device breakdown (Ascend step_trace_time.csv; else measured on the "
                    "device timeline, reportgen/timeline.py).",
       RANK, C("step", "int64", "none", "step number (ProfilerStep id; 0 for the whole-trace window)"),
       C("step_ms", "float64", "ms", "device end-to-end time of the step = computing + comm not overlapped + free"),
       C("computing_ms", "float64", "ms", "union of compute time; NaN until the device timeline measures it "
                                          "(Kineto CPU-only ranks without compute stay NaN)", nullable=True),
       C("comm_not_overlapped_ms", "float64", "ms", "communication not overlapped by computation", nullable=True),
       C("overlapped_ms", "float64", "ms", "communication overlapped by computation", nullable=True),
       C("comm_ms", "float64", "ms", "communication busy time: union of communication op time (shown as "
                                    "comm_busy_ms)", nullable=True),
       C("free_ms", "float64", "ms", "device time with neither computation nor communication", nullable=True),
       C("stage_ms", "float64", "ms", "step span without bubble (NaN: not written / no receive)", nullable=True),
       C("bubble_ms", "float64", "ms", "receive time as the profiler counts it (torch_npu: hcom_receive only)",
         nullable=True),
       C("comm_not_overlapped_exclude_receive_ms", "float64", "ms", "comm not overlapped minus bubble",
         nullable=True),
       C("preparing_ms", "float64", "ms", "step start to first device op (NaN when the column is absent)",
         nullable=True),
       C("other_ms", "float64", "ms", "Kineto: step time not in communication kernels (before the timeline "
                                      "measures computing)", nullable=True, ext=True)),
    # ------------------------------------------------------------------ MindSpore Insight (step trace, cluster)
    _t("step_trace", "MindInsight step_trace_raw: per rank and step.",
       RANK, C("step", "int64", "none", "step number as written by the profiler"),
       C("step_ms", "float64", "ms", "step time: end of previous step to end of this step"),
       C("step_interval_ms", "float64", "ms", "step interval: step start to forward start (waiting for data)"),
       C("fp_bp_ms", "float64", "ms", "forward and backward: forward start to backward end"),
       C("tail_ms", "float64", "ms", "step tail: backward end to step end (gradient aggregation and update)"),
       C("start_ms", "float64", "ms", "step start on the device clock (ms from the run origin)"),
       C("end_ms", "float64", "ms", "step end on the device clock (ms from the run origin)")),
    _t("step_trace_avg", "MindInsight step trace: the profiler's own average row per rank.",
       RANK, C("step_ms", "float64", "ms", "average step time"),
       C("step_interval_ms", "float64", "ms", "average step interval"),
       C("fp_bp_ms", "float64", "ms", "average forward+backward"), C("tail_ms", "float64", "ms", "average tail")),
    _t("step_ops", "MindInsight step trace: the communication ops of each step.",
       RANK, C("step", "int64", "none", "step number"),
       C("op", "str", "none", "operator name as written in the step trace (untrusted text)"),
       C("stream", "int64", "none", "stream id"),
       C("start_ms", "float64", "ms", "operator start (ms from the run origin)"),
       C("end_ms", "float64", "ms", "operator end (ms from the run origin)"),
       C("dur_ms", "float64", "ms", "operator duration"),
       C("op_type", "str", "none", "operator type, the <Type> of stream_<s>_<i>_<Type>-op<N> (the reader's rule)",
         ext=True)),
    _t("cluster_overlap", "MindInsight cluster_analyse: per rank and step.",
       RANK, C("step", "int64", "none", "step number (row order of the file, 1-based)"),
       C("computation_ms", "float64", "ms", "MindSpore computation_time = step time minus pure communication "
                                            "(includes idle)"),
       C("comm_alone_ms", "float64", "ms", "pure communication: not overlapped by computation"),
       C("stage_ms", "float64", "ms", "step time minus pure receive (pipeline only)", nullable=True),
       C("receive_alone_ms", "float64", "ms", "pure receive time (pipeline only)", nullable=True),
       C("collective_comm_alone_ms", "float64", "ms", "pure communication excluding Receive (pipeline only)",
         nullable=True)),
    _t("cluster_overlap_avg", "MindInsight cluster_analyse: the file's average row per rank.",
       RANK, C("computation_ms", "float64", "ms", _BREAKDOWN_AVG), C("comm_alone_ms", "float64", "ms", _BREAKDOWN_AVG),
       C("stage_ms", "float64", "ms", _BREAKDOWN_AVG, nullable=True),
       C("receive_alone_ms", "float64", "ms", _BREAKDOWN_AVG, nullable=True),
       C("collective_comm_alone_ms", "float64", "ms", _BREAKDOWN_AVG, nullable=True)),
    _t("rank_table", "MindInsight legacy layout: the rank table file's bytes (the claim of the world size is "
                     "parsed from it when the run is assembled).",
       C("byte", "int64", "none", "one byte of the file (uint8)")),
    _t("mi_comm_rank_step", "MindInsight hccl_raw: communication and wait cost per rank and step, as the profiler "
                            "sums them (canonical form: comm_rank_step, readers/comm.py).",
       RANK, C("step", "int64", "none", "step number"),
       C("comm_ms", "float64", "ms", "communication cost of the step (the profiler's sum over its operators)"),
       C("wait_ms", "float64", "ms", "wait cost of the step")),
    _t("mi_comm_rank_avg", "MindInsight hccl_raw: the file's '-' row per rank.",
       RANK, C("comm_ms", "float64", "ms", "communication cost"), C("wait_ms", "float64", "ms", "wait cost"),
       C("avg_kind", "str", "none", "mean (MindSpore <= 2.1) | last step (2.2+): what the row is")),
    _t("mi_comm_ops", "MindInsight hccl_raw: per step and operator.",
       RANK, C("step", "int64", "none", "step number"),
       C("op", "str", "none", "operator name (untrusted text)"),
       C("comm_ms", "float64", "ms", "communication cost"), C("wait_ms", "float64", "ms", "wait cost")),
    _t("mi_links", "MindInsight hccl_raw: per step, operator and link (group-local ends).",
       RANK, C("step", "int64", "none", "step number (-1: the file's '-' row)"),
       C("op", "object", "none", "operator name; None on the '-' rows, which have no operator", nullable=True),
       C("src_local", "int64", "none", "group-local source rank"),
       C("dst_local", "int64", "none", "group-local destination rank"),
       C("transport", "str", "none", "SDMA | RDMA | LOCAL ..."),
       C("time_ms", "float64", "ms", "transit time"), C("size_mb", "float64", "MB", "transit size"),
       C("bandwidth_gbps", "float64", "GB/s", "bandwidth as written"),
       C("bandwidth_sizetime_gbps", "float64", "GB/s", "size / time"),
       C("rdma_wait_ms", "float64", "ms", "RDMA wait (NaN: not an RDMA link / not written)", nullable=True)),
    _t("mi_timeline_ops", "MindInsight timeline display files: device operators.",
       RANK, C("name", "str", "none", "operator name (untrusted text)"),
       C("kind", "str", "none", "computation | communication (the thread / process says which)"),
       C("stream", "int64", "none", "stream id (tid)"),
       C("start_ms", "float64", "ms", "start (ms from the run origin)"), C("dur_ms", "float64", "ms", "duration")),
    _t("mi_timeline_steps", "MindInsight timeline display files: the Steps block windows.",
       RANK, C("step", "int64", "none", "step number"),
       C("start_ms", "float64", "ms", "step start"), C("end_ms", "float64", "ms", "step end")),
    _t("mi_flops", "MindInsight flops_summary: per rank.",
       RANK, C("flops", "float64", "FLOP", "FLOPs of the profiled window (NaN: the file's value was refused, named in the data problems)", nullable=True),
       C("flops_per_s", "float64", "FLOP/s", "FLOPS (NaN: the file's value was refused, named in the data problems)", nullable=True),
       C("utilization_ratio", "float64", "ratio", "FLOPS / peak (NaN: the file's value was refused, named in the data problems)", nullable=True),
       C("cube_flops", "float64", "FLOP", "cube FLOPs (newer generations only)", nullable=True),
       C("vec_flops", "float64", "FLOP", "vector FLOPs (newer generations only)", nullable=True),
       C("vec_utilization_ratio", "float64", "ratio", "vector utilisation (newer generations only)", nullable=True),
       C("cube_flops_per_s", "float64", "FLOP/s", "cube FLOPS (newer generations only)", nullable=True),
       C("vec_flops_per_s", "float64", "FLOP/s", "vector FLOPS (newer generations only)", nullable=True),
       C("generation", "str", "none", "file generation (ms1, ms2)")),
    _t("mi_flops_ops", "MindInsight flops_{rank}.txt: per operator.",
       RANK, C("op", "str", "none", "operator name (untrusted text)"),
       C("mflops", "float64", "MFLOP", "MFLOPs"), C("gflops", "float64", "GFLOP", "GFLOPS as written"),
       C("utilization_pct", "float64", "percent", "utilisation as written (0..100)"),
       C("flops", "float64", "FLOP", "FLOPs"),
       *(C(f"{k}_{p}", "float64", u, f"{k} of the {p} unit (newer files)", nullable=True, ext=True)
         for p in ("cube", "vec") for k, u in (("mflops", "MFLOP"), ("gflops", "GFLOP"), ("utilization_pct",
                                                                                          "percent")))),
    _t("mi_memory_summary", "MindInsight memory_usage_summary: per rank.",
       RANK, C("capacity_mb", "float64", "MB", "device capacity (NaN: the file's value was refused, named in the data problems)", nullable=True),
       C("peak_mb", "float64", "MB", "peak in use (NaN: the file's value was refused, named in the data problems)", nullable=True),
       C("static_mb", "float64", "MB", "static memory (NaN: the file's value was refused, named in the data problems)", nullable=True),
       C("allocations", "float64", "count", "allocations (NaN: the file's value was refused, named in the data problems)", nullable=True)),
    _t("mi_memory_lines", "MindInsight memory_usage_detail: memory in use per graph node.",
       RANK, C("graph", "object", "none", "graph id as written"), C("node_index", "int64", "none", "node index"),
       C("mb", "float64", "MB", "memory in use after the node")),
    _t("mi_memory_marks", "MindInsight memory_usage_detail: forward start / backward end node of each graph.",
       RANK, C("graph", "object", "none", "graph id as written"), C("mark", "str", "none", "which mark"),
       C("node_index", "int64", "none", "node index")),
    _t("strategy_ops", "Graph operators with their parallel strategy, per rank (MindInsight parallel_strategy_<rank>"
                       ".json graph summaries: reportgen/readers/mindinsight_strategy.py).",
       RANK, C("stage_id", "int64", "none", "pipeline stage id (0-based, as written)"),
       *(C(c, "str", "none", doc) for c, doc in (
           ("node_id", "1-based position of the operator in execution (topological) order, as text"),
           ("node", "the graph's own node name (untrusted text)"),
           ("name", "operator full name (untrusted text)"), ("type", "operator type as written (untrusted text)"),
           ("scope", "namespace of the operator, '/'-separated (untrusted text)"),
           ("instance_type", "parallel role the reader recognised: Redistribution | GradientAggregation | ''"),
           ("parallel_shard", "shard strategy (in_strategy) as written, '' when none"),
           ("parallel_group", "communication group as written, '' when none"),
           ("parallel_group_rank", "group ranks as written, '' when none"),
           ("inputs", "inputs: positions (node_id) of operators or constant names, comma-separated"),
           ("op_class", "compute | communication (of OP_CLASSES), decided by the reader from the operator type"),
           ("p2p", "send | receive | '': a pipeline point-to-point operator (one half of a strategy_pairs row)"),
           ("phase", "forward | backward | recompute: the part of the training graph, decided by the reader from "
                     "the scope")))),
    _t("strategy_pairs", "Pipeline Send / Receive operators with their peer and tag, per rank (MindInsight "
                         "parallel strategy; the section matches them).",
       RANK, C("kind", "str", "none", "send | receive"), C("node", "str", "none", "node id"),
       C("name", "str", "none", "operator name"), C("peer_rank", "int64", "none", "peer rank as written"),
       C("sr_tag", "object", "none", "sr_tag as written", nullable=True)),
    _t("minddata_ops", "MindSpore dataset pipeline: per operation.",
       RANK, C("op_id", "int64", "none", "op id"), C("op_type", "str", "none", "operation (untrusted text)"),
       C("num_workers", "int64", "count", "workers"),
       C("queue_avg", "float64", "count", "average output queue size (NaN: no output queue)", nullable=True),
       C("queue_capacity", "float64", "count", "output queue capacity (NaN: no output queue)", nullable=True),
       C("queue_usage", "float64", "ratio", "average size / capacity (NaN: no output queue)", nullable=True),
       C("parent_id", "float64", "none", "parent op id (NaN: the root)", nullable=True),
       C("children", "str", "none", "child op ids, comma separated"),
       C("queue_empty_ratio", "float64", "ratio", "share of samples with an empty queue (summary file)",
         nullable=True, ext=True),
       C("avg_cpu_pct", "float64", "percent", "CPU use, percent of one core (summary / cpu file)", nullable=True,
         ext=True),
       C("cpu_per_worker_pct", "float64", "percent", "CPU use per worker (summary / cpu file)", nullable=True,
         ext=True)),
    _t("minddata_summary", "MindSpore dataset pipeline summary: per rank.",
       RANK, C("source", "str", "none", "file name"),
       C("batch_time_ms", "object", "ms", "per batch time (None: not measured)", nullable=True),
       C("pipeline_time_ms", "object", "ms", "per pipeline time (None: not measured)", nullable=True),
       C("push_time_ms", "object", "ms", "per push-queue time (None: not measured)", nullable=True),
       C("ms_bottleneck", "object", "none", "MindSpore's bottleneck warning (text)", nullable=True),
       C("ms_suggestion", "object", "none", "MindSpore's suggestion (text)", nullable=True),
       C("ms_details", "object", "none", "MindSpore's analysis details (text)", nullable=True)),
    _t("minddata_queue", "MindSpore device / iterator queue profile: per rank (None where the file has no batch).",
       RANK, C("source", "str", "none", "device queue | dataset iterator"),
       C("batches", "int64", "count", "batches after the first"),
       C("capacity", "object", "count", "queue capacity", nullable=True),
       C("size_mean", "object", "count", "mean queue size when a batch was taken", nullable=True),
       C("empty_ratio", "object", "ratio", "share of batches that found the queue empty", nullable=True),
       C("pipeline_time_ms", "object", "ms", "mean time to get a batch from the pipeline", nullable=True),
       C("push_time_ms", "object", "ms", "mean time to push it to the device", nullable=True),
       C("batch_time_ms", "object", "ms", "mean time of the whole batch", nullable=True)),
    _t("minddata_queue_steps", "MindSpore data queue (device, GetNext) and host queue (device_queue_profiling) size "
                               "per rank, queue and step (MindInsight's step gap).",
       RANK, C("queue", "str", "none", "data (the device's queue GetNext takes from) | host (host-to-device queue)"),
       C("step", "int64", "count", "step (data: the record's order from 1; host: the batch)"),
       C("size", "int64", "count", "queue size when the batch was taken"),
       C("capacity", "object", "count", "queue capacity (host queue only)", nullable=True)),
    _t("minddata_stages", "MindSpore dataset.csv: per operation and stage.",
       RANK, C("operation", "str", "none", "operation"), C("stage", "str", "none", "stage"),
       C("occurrences", "int64", "count", "occurrences"), C("avg_ms", "float64", "ms", "mean time"),
       C("total_ms", "float64", "ms", "total time"), C("info", "str", "none", "info as written")),
    # ------------------------------------------------------------------ Ascend (text export and DB)
    _t("comm_ops", "Communication ops per rank and step, filled by every family (reportgen/readers/comm.py says what "
                   "each family puts in it, written once): Ascend communication.json / CommAnalyzerTime (Level0: the "
                   "HCCL ops of trace_view.json / COMMUNICATION_OP), MindSpore Insight hccl_raw, MindSpore CPU host "
                   "collectives, PyTorch c10d / NCCL / gloo events.",
       RANK, C("step", "int64", "none", "step number (0: whole trace; -1: outside every step)"),
       C("kind", "str", "none", "collective | p2p"),
       C("op", "str", "none", "communication op name without the @group suffix (untrusted text)"),
       C("op_type", "str", "none", "allreduce, allgather, reducescatter, alltoall, broadcast, reduce, send, receive, "
                                   "batchsendrecv, barrier, other (reportgen.commtypes.OP_TYPES)"),
       C("group", "str", "none", "group key shared by the ranks of the process group when known, else the group "
                                 "hash; '' / None when the files do not say", nullable=True),
       C("start_ms", "float64", "ms", "op start, local clock (ms from the run origin; absent when the files give "
                                      "none, e.g. hccl_raw)", ext=True),
       C("elapse_ms", "float64", "ms", "op duration"),
       C("transit_ms", "float64", "ms", "transfer time (Ascend: master plane; NaN where the family has none)",
         nullable=True),
       C("wait_ms", "float64", "ms", "wait time (NaN where the family has none)", nullable=True),
       C("sync_ms", "float64", "ms", "synchronisation time (NaN where the family has none)", nullable=True),
       C("idle_ms", "float64", "ms", "idle time (NaN where the family has none)", nullable=True),
       C("size_mb", "float64", "MB", "bytes moved by the op", nullable=True, ext=True),
       C("bandwidth_gbps", "float64", "GB/s", "size / duration", nullable=True, ext=True),
       C("busbw_gbps", "float64", "GB/s", "bus bandwidth, nccl-tests convention", nullable=True, ext=True),
       C("peer_rank", "int64", "none", "GLOBAL peer of a send / receive (-1 unknown)", ext=True)),
    _t("comm_rank_step", "A profiler's own per-rank, per-step communication totals (MindSpore Insight hccl_raw).",
       RANK, C("step", "int64", "none", "step number"),
       C("elapse_ms", "float64", "ms", "the profiler's own per-step communication op time (hccl_raw: communication "
                                      "+ wait)"),
       C("transit_ms", "float64", "ms", "transfer time (hccl_raw communication_cost)", nullable=True),
       C("wait_ms", "float64", "ms", "wait time (hccl_raw wait_cost)", nullable=True)),
    _t("comm_rank_avg", "As comm_rank_step, from the file's own average row.",
       RANK, C("elapse_ms", "float64", "ms", "as comm_rank_step, from the file's own average row"),
       C("transit_ms", "float64", "ms", "as comm_rank_step, from the file's own average row", nullable=True),
       C("wait_ms", "float64", "ms", "as comm_rank_step, from the file's own average row", nullable=True)),
    _t("comm_links_local", "Links in GROUP-LOCAL indices, when the files do not say which group (hccl_raw).",
       C("rank", "int64", "none", "global rank id of the file that reported the link"),
       C("step", "int64", "none", "step number (-1: the file's average row)"),
       C("op", "str", "none", "operator the entry belongs to (None: the step's own link entry)", nullable=True),
       C("src_local", "int64", "none", "source as a group-local index"),
       C("dst_local", "int64", "none", "destination as a group-local index"),
       C("transport", "str", "none", "transport as written"),
       C("time_ms", "float64", "ms", "transit time", nullable=True),
       C("size_mb", "float64", "MB", "transit size", nullable=True),
       C("bandwidth_gbps", "float64", "GB/s", "bandwidth as written", nullable=True),
       C("bandwidth_sizetime_gbps", "float64", "GB/s", "size / time (differs from the written bandwidth for <= 2.1 "
                                                      "step-level rows)", nullable=True, ext=True),
       C("rdma_wait_ms", "float64", "ms", "RDMA wait time as written", nullable=True, ext=True)),
    _t("comm_bandwidth", "Ascend communication.json: per op and transport.",
       RANK, C("step", "int64", "none", "step number"), C("kind", "str", "none", "collective | p2p"),
       C("op", "str", "none", "communication op name"),
       C("group", "str", "none", "group key when known, else the group hash"),
       C("transport", "str", "none", "RDMA | HCCS | PCIE | SIO | SDMA (SDMA rows hold only what it carries beyond "
                                     "HCCS+PCIE+SIO: the transports of an op can be summed)"),
       C("size_mb", "float64", "MB", "transit size"), C("time_ms", "float64", "ms", "transit time"),
       C("bandwidth_gbps", "float64", "GB/s", "bandwidth as written by the profiler"),
       C("large_packet_ratio", "float64", "ratio", "share of large packets")),
    _t("comm_matrix", "Ascend communication_matrix.json: per link, with GLOBAL ends.",
       C("rank", "int64", "none", "global rank of the file that reported the link"),
       C("step", "int64", "none", "step number"), C("kind", "str", "none", "collective | p2p"),
       C("op_type", "str", "none", "op type, lower case"),
       C("stat", "str", "none", "top1 | middle | bottom1 | bottom2 | bottom3 | total"),
       C("group", "str", "none", "group key when known, else the group hash"),
       C("src_rank", "int64", "none", "GLOBAL source rank"), C("dst_rank", "int64", "none", "GLOBAL destination rank"),
       C("transport", "str", "none", "HCCS | PCIE | RDMA | LOCAL | SIO | SDMA"),
       C("size_mb", "float64", "MB", "transit size"), C("time_ms", "float64", "ms", "transit time"),
       C("bandwidth_gbps", "float64", "GB/s", "bandwidth"),
       C("op_name", "str", "none", "the op the entry comes from (untrusted text)")),
    _t("kernels", "Ascend kernel_details.csv / DB TASK+COMPUTE_TASK_INFO (+ COMMUNICATION_OP as HCCL rows): every "
                  "device task with its op_class (reportgen/readers/ascend.py op_class).",
       RANK, C("step", "float64", "none", "step number (NaN when the profiler wrote none / outside every step)",
               nullable=True),
       C("name", "str", "none", "kernel name (untrusted text)"), C("type", "str", "none", "op type ('N/A' at Level0)"),
       C("core", "str", "none", "accelerator core (AI_CORE, AI_VECTOR_CORE, MIX_AIC, AI_CPU, HCCL, COMMUNICATION, "
                                "N/A, ...)"),
       C("stream", "float64", "none", "stream id (NaN when unknown: HCCL rows, Level0 text)", nullable=True),
       C("start_ms", "float64", "ms", "start (ms from the run origin)"), C("dur_ms", "float64", "ms", "duration"),
       C("op_class", "str", "none", "compute | communication | wait | memcpy | other (schema.OP_CLASSES)"),
       C("input_shapes", "str", "none", "device shapes of the inputs as written ('32,1,224,224,8;121,4,16,8;64'; "
                                        "untrusted text)", ext=True),
       C("output_shapes", "str", "none", "device shapes of the outputs as written (untrusted text)", ext=True),
       C("input_formats", "str", "none", "device formats of the inputs ('NC1HWC0;FRACTAL_Z;NCHW'; untrusted text)",
         ext=True),
       C("output_formats", "str", "none", "device formats of the outputs (untrusted text)", ext=True),
       *(C(n, "float64", "ratio", f"AI Core PMU {d} (kernel_details.csv, aic_metrics=PipeUtilization; NaN where not "
                                   "measured)", nullable=True, ext=True)
         for n, d in (("aic_mac_ratio", "cube (MAC) pipe busy share"), ("aic_mte2_ratio", "cube core MTE2 share"),
                      ("aiv_vec_ratio", "vector pipe busy share"), ("aiv_mte2_ratio", "vector core MTE2 share"),
                      ("cube_util_ratio", "cube utilisation (cube_utilization(%) / 100)")))),
    _t("l2_cache", "Ascend l2_cache.csv (l2_cache=True): L2 cache hit and victim rate of each device task.",
       RANK, C("stream", "float64", "none", "stream id", nullable=True),
       C("task", "float64", "none", "task id (with the stream, the kernel's key in kernel_details.csv)",
         nullable=True),
       C("name", "str", "none", "op name (untrusted text)"),
       C("type", "str", "none", "op type from kernel_details.csv by (stream, task); '' when unknown"),
       C("hit_ratio", "float64", "ratio", "L2 hit rate (NaN where the profiler wrote N/A)", nullable=True),
       C("victim_ratio", "float64", "ratio", "L2 victim rate: share of accesses that evicted a line", nullable=True)),
    _t("host_api", "Ascend api_statistic.csv: host time per CANN API (the CANN layer's own summary).",
       RANK, C("level", "str", "none", "runtime | acl | node | model ... (untrusted text)"),
       C("api", "str", "none", "API name (untrusted text)"), C("count", "float64", "count", "calls"),
       C("total_ms", "float64", "ms", "summed host time"), C("avg_ms", "float64", "ms", "mean", nullable=True),
       C("max_ms", "float64", "ms", "longest call", nullable=True)),
    _t("op_stats", "Ascend op_statistic.csv: per op type and core.",
       RANK, C("op_type", "str", "none", "op type"), C("core", "str", "none", "core type"),
       C("count", "float64", "count", "calls"), C("total_ms", "float64", "ms", "total time"),
       C("avg_ms", "float64", "ms", "mean time", nullable=True), C("min_ms", "float64", "ms", "shortest",
                                                                   nullable=True),
       C("max_ms", "float64", "ms", "longest", nullable=True),
       C("op_class", "str", "none", "compute | communication | wait | memcpy | other (schema.OP_CLASSES)")),
    _t("memory_record", "Ascend memory_record.csv / DB MEMORY_RECORD; MindSpore CPU memory.",
       RANK, C("component", "str", "none", "APP | PTA | PTA+GE | GE | WORKSPACE | MindSpore ... (untrusted text)"),
       C("ts_ms", "float64", "ms", "sample time (ms from the run origin)"),
       C("allocated_mb", "float64", "MB", "total allocated (NaN when absent)", nullable=True),
       C("reserved_mb", "float64", "MB", "total reserved"),
       C("active_mb", "float64", "MB", "total active (NaN when absent)", nullable=True)),
    # ---- every family's memory, canonical (the memory section reads only these)
    _t("memory_samples", "Memory over time of every family: the family's rule for which of its records is the memory "
       "in use is written once in its reader (Ascend APP component, PyTorch accelerator device types, MindSpore "
       "CPU memory pool).",
       RANK, C("ts_ms", "float64", "ms", "sample time (ms from the run origin)"),
       C("kind", "str", "none", "device | host: memory of the device the framework trains on, or host (CPU) memory"),
       C("device_id", "float64", "none", "device the series belongs to (NaN when the data names none)", nullable=True),
       C("series", "str", "none", "what the series is, as its reader chose it (e.g. 'CUDA device 0 total reserved', "
         "'host (CPU) total allocated')"),
       C("allocated_mb", "float64", "MB", "total allocated (NaN when absent)", nullable=True),
       C("reserved_mb", "float64", "MB", "total reserved (NaN when absent): the peak is its maximum (a host series "
         "whose reserved never rises above 0, an allocator that caches nothing, peaks at allocated_mb instead)",
         nullable=True),
       C("active_mb", "float64", "MB", "total active (NaN when absent)", nullable=True),
       C("capacity_mb", "float64", "MB", "the device's memory when the data states it (NaN when unknown)",
         nullable=True),
       C("capacity_source", "str", "none", "where capacity_mb comes from (None when unknown)", nullable=True,
         ext=True),
       C("detail_only", "bool", "none", "True: a series drawn in the memory detail only, never the peak (e.g. "
         "Ascend's framework allocator PTA / GE under the process-level APP series); absent = False", ext=True)),
    _t("memory_peaks", "A profiler's own peak per rank, when it writes one instead of samples (MindSpore memory "
       "planner's memory_usage_summary).",
       RANK, C("peak_mb", "float64", "MB", "the profiler's own peak of the rank"),
       C("capacity_mb", "float64", "MB", "device memory as the profiler writes it (NaN when unknown)", nullable=True),
       C("static_mb", "float64", "MB", "static memory (NaN when unknown)", nullable=True),
       C("allocations", "float64", "count", "allocations counted by the profiler (NaN when unknown)", nullable=True),
       C("series", "str", "none", "what the peak is (e.g. 'memory_usage_summary peak_mem')"),
       C("capacity_source", "str", "none", "where the capacity comes from", nullable=True),
       C("definition", "str", "none", "the definition of the peak, one text for the run", nullable=True)),
    _t("memory_nodes", "Memory in use per graph node in execution order (MindSpore memory_usage_details).",
       RANK, C("graph", "str", "none", "graph id (untrusted text)"),
       C("node_index", "int64", "count", "node position in its graph's execution order"),
       C("mb", "float64", "MB", "memory in use at that node")),
    _t("memory_node_marks", "Marks on the node axis of memory_nodes (forward start, backward end).",
       RANK, C("graph", "str", "none", "graph id (untrusted text)"),
       C("node_index", "int64", "count", "node position in its graph's execution order"),
       C("mark", "str", "none", "what happens at that node (forward start, backward end)")),
    _t("module_mem", "Ascend npu_module_mem.csv / DB NPU_MODULE_MEM.",
       RANK, C("component", "str", "none", "CANN module (untrusted text)"),
       C("ts_ms", "float64", "ms", "sample time (ms from the run origin)"),
       C("reserved_mb", "float64", "MB", "total reserved")),
    _t("operator_memory", "Ascend operator_memory.csv / DB OP_MEMORY: one row per allocation (the memory section's "
       "operator tables and what is alive at the allocated peak).",
       RANK, C("name", "str", "none", "operator (untrusted text)"),
       C("size_mb", "float64", "MB", "allocation size (MB, 10^6 B; the file's KB are 10^3 B)"),
       C("alloc_ms", "float64", "ms", "allocation time (ms from the run origin)"),
       C("release_ms", "float64", "ms", "release time (NaN when released after the window)", nullable=True),
       C("duration_ms", "float64", "ms", "lifetime (NaN when released after the window)", nullable=True)),
    _t("overlap_intervals", "Ascend trace_view.json Overlap Analysis / DB OVERLAP_ANALYSIS.",
       RANK, C("kind", "str", "none", "computing | communication | comm_not_overlapped | free"),
       C("start_ms", "float64", "ms", "interval start"), C("end_ms", "float64", "ms", "interval end")),
    _t("hccl_ops", "Ascend trace_view.json HCCL large ops / DB COMMUNICATION_OP.",
       RANK, C("op", "str", "none", "large HCCL op name (hcom_allReduce__586_0_1; untrusted text)"),
       C("lane", "str", "none", "HCCL group lane (Group N Communication; DB: the group name)"),
       C("start_ms", "float64", "ms", "start"), C("dur_ms", "float64", "ms", "duration")),
    _t("device_ops", "Ascend trace_view.json Ascend Hardware tasks / DB TASK (synchronisation tasks left out); "
                     "MindSpore CPU: the CPU OP kernels.",
       RANK, C("name", "str", "none", "device task / CPU op name (untrusted text)"),
       C("stream", "str", "none", "stream or thread lane"),
       C("start_ms", "float64", "ms", "start"), C("dur_ms", "float64", "ms", "duration"),
       C("op_class", "str", "none", "compute | communication | wait | memcpy | other (schema.OP_CLASSES)"),
       C("launch_delay_ms", "float64", "ms", "device start - host launch of the task (trace_view.json HostToDevice "
                                             "flows; NaN: no flow)", nullable=True, ext=True)),
    # ------------------------------------------------------------------ PyTorch Kineto
    _t("gpu_ops", "Kineto: device kernels, copies and sets.",
       RANK, C("name", "str", "none", "kernel name (untrusted text)"),
       C("kind", "str", "none", "kernel | comm | memcpy | memset (the Kineto rule: comm = NCCL/RCCL/HCCL kernels)"),
       C("stream", "int64", "none", "stream id"), C("start_ms", "float64", "ms", "start"),
       C("dur_ms", "float64", "ms", "duration"), C("end_ms", "float64", "ms", "end"),
       C("correlation", "int64", "none", "correlation id (-1: none)"),
       C("ts_ns", "int64", "ns", "start on the file's clock (HTA conventions only)"),
       C("dur_ns", "int64", "ns", "duration (HTA conventions only)"),
       C("launch_ts_ns", "int64", "ns", "the earliest runtime call with its correlation (int64 max: none)",
         ext=True)),
    _t("hta_events", "Kineto: what else HTA 0.5 reads (marks, runtime calls), for its whole-µs conventions.",
       C("role", "str", "none", "mark | runtime | ..."), C("name", "str", "none", "event name"),
       C("stream", "int64", "none", "stream id (-1: none)"), C("correlation", "int64", "none", "correlation (-1)"),
       C("ts_ns", "int64", "ns", "start on the file's clock"), C("dur_ns", "int64", "ns", "duration"), RANK,
       C("launch_ts_ns", "int64", "ns", "launch time (int64 max: none)", ext=True)),
    _t("cpu_ops", "Kineto: CPU ops (aten::...), with their input dims for FLOPs.",
       RANK, C("name", "str", "none", "CPU op name (untrusted text)"), C("tid", "str", "none", "thread id"),
       C("input_dims", "str", "none", "input dims as written (JSON text)"),
       C("input_types", "str", "none", "input types as written (JSON text)"),
       C("start_ms", "float64", "ms", "start"), C("dur_ms", "float64", "ms", "duration"),
       C("end_ms", "float64", "ms", "end"),
       C("kernel_launches", "int64", "count", "runtime launch calls on the op's thread within its span whose "
                                              "correlation has a device kernel (-1: the trace has no device kernels)",
         ext=True),
       C("profiler_flops", "float64", "FLOP", "the op's own flops arg (profile(with_flops=True); NaN without)",
         nullable=True, ext=True)),
    _t("host_ops", "Kineto: the main thread's top-level CPU op spans.",
       RANK, C("name", "str", "none", "CPU op name (untrusted text)"),
       C("tid", "str", "none", "thread id as written (the main thread: the one with the ProfilerStep spans)"),
       C("start_ms", "float64", "ms", "start"), C("dur_ms", "float64", "ms", "duration"),
       C("end_ms", "float64", "ms", "end")),
    _t("collectives", "Kineto: collective calls (c10d record_param_comms, NCCL kernels with args, gloo spans).",
       RANK, C("source", "str", "none", "c10d | gpu_kernel | gloo"), C("name", "str", "none", "event name"),
       C("tid", "str", "none", "thread id"), C("collective", "str", "none", "collective name (allreduce, recv, ...)"),
       C("in_nelems", "int64", "count", "input elements (-1: not written)"),
       C("out_nelems", "int64", "count", "output elements (-1: not written)"),
       C("dtype", "str", "none", "element type ('' when not written)"),
       C("elem_bytes", "float64", "none", "bytes per element (NaN: unknown dtype)", nullable=True),
       C("group_name", "str", "none", "pg name ('' when not written)"),
       C("group_desc", "str", "none", "pg description ('')"), C("group_ranks", "str", "none", "pg ranks ('')"),
       C("group_size", "int64", "count", "pg size (-1)"), C("seq", "int64", "none", "sequence number (-1)"),
       C("src_rank", "int64", "none", "p2p source (global; -1: none). gloo / c10d recv: mapped from peer_local "
                                    "at run assembly (readers.kineto.global_peers)"),
       C("dst_rank", "int64", "none", "p2p destination (global; -1: none). gloo / c10d send: mapped from "
                                    "peer_local at run assembly"),
       C("peer_local", "int64", "none", "GROUP-LOCAL peer of a c10d::send / c10d::recv_ op (Concrete Inputs[2]) "
                                      "and of the gloo:send / gloo:recv span it precedes on its thread (-1: none)",
         ext=True),
       C("start_ms", "float64", "ms", "start"), C("dur_ms", "float64", "ms", "duration"),
       C("end_ms", "float64", "ms", "end"),
       C("in_mb", "float64", "MB", "input size (NaN: unknown dtype)", nullable=True),
       C("out_mb", "float64", "MB", "output size (NaN: unknown dtype)", nullable=True)),
    _t("memory_events", "Kineto [memory] events.",
       RANK, C("ts_ms", "float64", "ms", "sample time"), C("device_type", "int64", "none", "device type (0 CPU)"),
       C("device_id", "int64", "none", "device id (-1: host)"),
       C("allocated_mb", "float64", "MB", "total allocated (NaN: the file's value was refused, named in the data problems)", nullable=True),
       C("reserved_mb", "float64", "MB", "total reserved (NaN: the file's value was refused, named in the data problems)", nullable=True)),
    _t("device_properties", "Kineto deviceProperties (implausible values left empty).",
       RANK, C("device_id", "int64", "none", "device id"), C("name", "str", "none", "device name"),
       C("total_memory_mb", "float64", "MB", "capacity", nullable=True),
       C("sm_count", "int64", "count", "SMs", nullable=True),
       C("compute_capability", "str", "none", "compute capability", nullable=True)),
    _t("user_ranges", "User ranges (record_function / NVTX: Kineto user_annotation, device side gpu_user_annotation; "
                      "Ascend mstx ranges) per rank, side and name, summed over the trace (the profiler's step marks "
                      "and collective spans left out; names past readers' cap summed as '(other ranges)').",
       RANK, C("side", "str", "none", "host (the CPU span) | device (the span on the device's timeline)"),
       C("name", "str", "none", "range name (untrusted text)"), C("count", "int64", "count", "occurrences"),
       C("total_ms", "float64", "ms", "summed duration"), C("max_ms", "float64", "ms", "longest occurrence"),
       C("first_ms", "float64", "ms", "start of the first occurrence")),
    _t("user_range_spans", "Each occurrence of a user range (as in user_ranges; up to the reader's cap per rank, a rank "
                           "past it has none): the span, for the ranges' own time without the collectives inside.",
       RANK, C("side", "str", "none", "host | device (as in user_ranges)"),
       C("name", "str", "none", "range name (untrusted text)"),
       C("start_ms", "float64", "ms", "start"), C("dur_ms", "float64", "ms", "duration")),
    _t("op_type_steps", "Per rank, step and operator type: calls and summed time (MindSpore dynamic_shape_info_<rank>"
                        ".json: the per-iteration op time of a dynamic-shape network; types past the reader's cap "
                        "summed as '(other types)').",
       RANK, C("step", "int64", "none", "step number"), C("op_type", "str", "none", "operator type (untrusted text)"),
       C("count", "int64", "count", "calls in the step"), C("total_ms", "float64", "ms", "summed duration")),
    _t("host_cpu", "The host's CPU utilisation per rank and scope, mean over the profiler's samples (MindSpore "
                   "minddata_cpu_utilization_<rank>.json: device_info for the machine, process_info for the "
                   "training process).",
       RANK, C("scope", "str", "none", "machine (the whole host) | process (the training process's share of the "
                                       "host; user and sys only)"),
       C("samples", "int64", "count", "samples"),
       C("user_ratio", "float64", "ratio", "user time share (NaN: not written)", nullable=True),
       C("sys_ratio", "float64", "ratio", "system time share", nullable=True),
       C("io_ratio", "float64", "ratio", "I/O wait share (NaN on process rows)", nullable=True),
       C("idle_ratio", "float64", "ratio", "idle share (NaN on process rows)", nullable=True),
       C("processors", "float64", "count", "CPU processors of the host (NaN: not written)", nullable=True)),
    _t("hbm", "HBM bandwidth samples per rank (Ascend profiler DB table HBM; sample times left out).",
       RANK, C("hbm_id", "int64", "none", "HBM instance (-1: not written)"),
       C("direction", "str", "none", "read | write (as written, lower case)"),
       C("sample", "int64", "none", "sample ordinal (the rows of one sample time share it)"),
       C("bandwidth_gbps", "float64", "GB/s", "bandwidth of the HBM in that direction (1e9 B/s)")),
    _t("llc", "LLC (last-level cache) samples per rank (Ascend profiler DB table LLC; sample times left out).",
       RANK, C("llc_id", "int64", "none", "LLC instance (-1: not written)"),
       C("mode", "str", "none", "read | write (the profiled mode, as written, lower case)"),
       C("hit_ratio", "float64", "ratio", "hit rate"),
       C("throughput_gbps", "float64", "GB/s", "throughput (1e9 B/s; NaN: not written)", nullable=True)),
    _t("dataloader", "enumerate(DataLoader) spans (Kineto, torch_npu trace_view.json).",
       RANK, C("step", "int64", "none", "ProfilerStep the span starts in (-1 outside every step)"),
       C("name", "str", "none", "span name (untrusted text)"),
       C("start_ms", "float64", "ms", "start"), C("dur_ms", "float64", "ms", "duration")),
    # ---- FLOPs (every family; formulas in reportgen/flopcount.py, filled at the reader edge)
    _t("op_flops", "FLOPs per op of every family, counted at the reader edge (reportgen/flopcount.py).",
       RANK, C("step", "float64", "none", "step the op belongs to (NaN when unknown, -1 outside every step)",
               nullable=True),
       C("name", "str", "none", "op / kernel name (untrusted text)"),
       C("type", "str", "none", "op type (aten op name, Ascend op type, the op's type in a per-op FLOPs file)"),
       C("flops", "float64", "FLOP", "floating-point operations (a multiply-add is 2; NaN = not counted, note says "
                                     "why; 0 = no FLOPs, e.g. no device kernel launched)", nullable=True),
       C("method", "str", "none", "matmul | convolution | attention (formulas from shapes) | profiler (the trace's "
                                  "own flops) | framework summary (a profiler's per-op FLOPs file)"),
       C("note", "str", "none", "why the op is not counted or what its count assumes ('' = nothing to say)",
         nullable=True),
       C("start_ms", "float64", "ms", "start (device kernel start, or the host op's start where the device time "
                                      "is unknown; NaN when the source has no time)", nullable=True),
       C("dur_ms", "float64", "ms", "device duration of the op (NaN when unknown)", nullable=True),
       C("flops_per_s", "float64", "FLOP/s", "the profiler's own rate of the op", nullable=True, ext=True),
       C("utilization_pct", "float64", "percent", "the profiler's own utilisation of the op (as written)",
         nullable=True, ext=True)),
    _t("rank_flops", "A profiler's own FLOPs per rank (MindSpore flops_summary).",
       RANK, C("flops", "float64", "FLOP", "the profiler's own FLOPs of the rank (NaN when the file's value was "
                                           "refused: a data problem names it)", nullable=True),
       C("flops_per_s", "float64", "FLOP/s", "the profiler's own rate (see rate_basis)", nullable=True),
       C("utilization_ratio", "float64", "ratio", "the profiler's own utilisation of the peak (NaN when absent)",
         nullable=True),
       C("method", "str", "none", "framework summary"),
       C("rate_basis", "str", "none", "what flops_per_s is, in words", nullable=True),
       C("cube_flops", "float64", "FLOP", "cube part of flops", nullable=True, ext=True),
       C("vec_flops", "float64", "FLOP", "vector part of flops", nullable=True, ext=True),
       C("vec_utilization_ratio", "float64", "ratio", "vector utilisation", nullable=True, ext=True),
       C("cube_flops_per_s", "float64", "FLOP/s", "cube part of flops_per_s (the profiler's own rate)",
         nullable=True, ext=True),
       C("vec_flops_per_s", "float64", "FLOP/s", "vector part of flops_per_s (the profiler's own rate)",
         nullable=True, ext=True),
       C("generation", "str", "none", "the file generation the values come from", nullable=True, ext=True)),
    _t("p2p_links", "Kineto: send/recv NCCL kernels (CPU-only traces: gloo send/recv spans with a mapped peer) "
                    "matched per directed pair of global ranks.",
       C("group", "str", "none", "process group of the send/recv (its ranks, else its name)"),
       C("src_rank", "int64", "none", "GLOBAL sending rank"), C("dst_rank", "int64", "none", "GLOBAL receiving rank"),
       C("transport", "str", "none", "intra-host | inter-host | p2p"), C("ops", "int64", "count", "pairs seen"),
       C("matched", "int64", "count", "pairs with both kernels"), C("size_mb", "float64", "MB", "bytes sent"),
       C("time_ms", "float64", "ms", "per pair the shorter kernel, summed (NaN for gloo spans: no transfer time)",
         nullable=True),
       C("bandwidth_gbps", "float64", "GB/s", "size / time", nullable=True)),
)

BY_NAME: dict[str, Table] = {t.name: t for t in SCHEMA}


def tables_doc() -> dict[str, dict[str, str]]:
    """``{table: {column: "doc (unit)"}}``: :data:`reportgen.model.TABLES`."""
    return {t.name: {c.name: c.doc + (f" ({c.unit})" if c.unit != "none" else "") for c in t.columns}
            for t in SCHEMA}


# --------------------------------------------------------------------------- check


def _dtype_problem(s: pd.Series, col: Column) -> str | None:
    dt = s.dtype
    kind = getattr(dt, "kind", "O")
    values = s.dropna()
    if col.dtype == "int64":
        if kind in "iu":
            return None
        if kind == "f" and col.nullable and np.all(np.mod(values.to_numpy(dtype=float), 1) == 0):
            return None
        if kind == "O" and col.nullable and all(isinstance(v, (int, np.integer)) and not isinstance(v, bool)
                                                for v in pd.unique(values.to_numpy())):
            return None  # ints and None, kept as objects
        return f"dtype {dt}, expected int64"
    if col.dtype == "float64":
        return None if kind in "fiu" else f"dtype {dt}, expected float64"
    if col.dtype == "bool":
        return None if kind == "b" else f"dtype {dt}, expected bool"
    if col.dtype == "str":
        if isinstance(dt, pd.StringDtype):
            return None
        if kind == "O":  # object: every value text (checked once per distinct value)
            bad = [v for v in pd.unique(values.to_numpy()) if not isinstance(v, str)]
            return None if not bad else f"value(s) not text (first {bad[0]!r:.40})"
        return f"dtype {dt}, expected str"
    if col.dtype == "list":
        if kind != "O":
            return f"dtype {dt}, expected list"
        bad = [v for v in values if not isinstance(v, (list, tuple))]
        return None if not bad else f"{len(bad)} value(s) not a list"
    return None


def check_table(name: str, df: pd.DataFrame, ranks=None) -> list[str]:
    """Problems of one table against the schema (empty: canonical)."""
    t = BY_NAME.get(name)
    if t is None:
        return [f"{name}: unknown table (not in reportgen.schema)"]
    out = []
    missing = [c for c in t.required if c not in df.columns]
    if missing:
        out.append(f"{name}: missing required column(s) {', '.join(missing)}")
    for c in df.columns:
        col = t.column(c)
        if col is None:
            out.append(f"{name}.{c}: unknown column (not in reportgen.schema)")
            continue
        s = df[c]
        why = _dtype_problem(s, col)
        if why:
            out.append(f"{name}.{c}: {why}")
        if not col.nullable:
            n = int(s.isna().sum())
            if n:
                out.append(f"{name}.{c}: {n} null value(s) in a non-nullable column")
        if c in DURATIONS and s.dtype.kind in "fiu":
            n = int((s < 0).sum())
            if n:
                out.append(f"{name}.{c}: {n} negative duration(s)")
    if {"start_ms", "end_ms"} <= set(df.columns) and df["start_ms"].dtype.kind in "fiu" \
            and df["end_ms"].dtype.kind in "fiu":
        n = int((df["end_ms"] < df["start_ms"]).sum())
        if n:
            out.append(f"{name}: {n} row(s) with end_ms < start_ms")
    if "op_class" in df.columns:
        bad = set(df["op_class"].dropna().unique()) - set(OP_CLASSES)
        if bad:
            out.append(f"{name}.op_class: values outside {'/'.join(OP_CLASSES)}: {sorted(map(str, bad))[:5]}")
    if ranks is not None and "rank" in df.columns and not df.empty:
        r = pd.to_numeric(df["rank"], errors="coerce").dropna()
        alien = sorted(set(r.astype(np.int64).tolist()) - set(ranks))
        if alien:
            out.append(f"{name}.rank: {len(alien)} rank(s) not among run.ranks (first {alien[:5]})")
    return out


def check(run) -> list[str]:
    """Every table of ``run`` (lazy loaders included: they are loaded) against :data:`SCHEMA`: a list of problems,
    empty when the run is canonical."""
    for name in list(run.loaders):
        run.table(name)
    ranks = {int(r) for r in run.ranks}
    out = []
    for name, df in run.tables.items():
        if df is None:
            continue
        out.extend(check_table(name, df, ranks))
    return out
