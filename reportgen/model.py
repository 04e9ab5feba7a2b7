"""The run model: what every reader produces and every section reads.

Units are fixed everywhere: time in milliseconds (``*_ms``), sizes in megabytes of
10^6 bytes (``*_mb``), bandwidth in GB/s (``*_gbps``), ratios as fractions 0..1 (``*_ratio``); the few MindSpore
columns that keep the file's percent are named ``*_pct`` (0..100). Each column's unit is in :mod:`reportgen.schema`.
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

A reader fills ``Run.tables`` with the tables it can build; every table, its columns, their dtypes, units and
nullability are in the canonical schema :mod:`reportgen.schema` (:data:`TABLES` is derived from it), and
:func:`reportgen.schema.check` holds a run to it. A table that the source cannot provide is simply
absent (``run.table(name)`` returns ``None``), and the sections that need it say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pandas as pd

#: ``memory_events.device_type`` values that are accelerator (device) memory: the accelerator entries of
#: c10::DeviceType (c10/core/DeviceType.h). CPU (0) is host memory; MKLDNN/IDEEP/Meta/Lazy hold no device memory.
ACCELERATOR_DEVICE_TYPES: dict[int, str] = {
    1: "CUDA", 6: "HIP", 7: "FPGA", 8: "MAIA", 9: "XLA", 10: "Vulkan", 11: "Metal", 12: "XPU", 13: "MPS", 15: "HPU",
    16: "VE", 18: "IPU", 19: "MTIA", 20: "PrivateUse1"}

from .schema import tables_doc

#: Every table a reader may provide: name -> {column: meaning (unit)}, derived from the canonical schema
#: (:mod:`reportgen.schema`: dtypes, units, nullability, extension columns and :func:`reportgen.schema.check`).
TABLES: dict[str, dict[str, str]] = tables_doc()


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


#: tables of device work on streams: work written twice on one stream is dropped once (Run.table)
ONE_STREAM_TABLES = ("gpu_ops", "kernels", "device_ops")


@dataclass
class Run:
    """One distributed training run, every rank, in fixed units."""

    name: str
    source_format: str  # mindinsight | ascend | mindspore_cpu | kineto (the reader family; sections never read it)
    source_path: str
    layout: str = ""
    #: the framework of the training script, as the reader knows it from the data: pytorch | mindspore | mixed
    #: (ranks of both) | "" (unknown). Sections read this, never the family, to say which framework's files or
    #: options would give what is missing.
    framework: str = ""
    #: the kind of device the ranks ran on, as the reader knows it from the data: npu (Ascend) | gpu (CUDA / ROCm) |
    #: cpu | "" (unknown). Advice naming one platform's feature (CUDA graphs, HCCL options) reads this, never the
    #: reader family (reportgen/sections/advisor.py: platform_text).
    device: str = ""
    #: how the reader measured the step time and its parts (``step_time`` / ``step_trace``), one sentence the
    #: trajectory shows: the family's definition written down once, in its reader ("" when it needs none)
    step_definition: str = ""
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
    #: the profiling windows found when a rank has several profiler outputs (readers/windows.py: number, name,
    #: ranks, steps, start_s, duration_s, where, read, how_to_pick); empty when each rank has one
    windows: list[dict] = field(default_factory=list)
    is_demo: bool = False
    #: tables parsed only when a section first asks for them (large files no section may need)
    loaders: dict[str, Callable[[], pd.DataFrame | None]] = field(default_factory=dict)
    #: tables of stream work whose repeats were already dropped (:meth:`table`)
    settled: set = field(default_factory=set, repr=False)

    def table(self, name: str) -> pd.DataFrame | None:
        if name not in self.tables and name in self.loaders:
            df = self.loaders.pop(name)()
            if df is not None:
                self.tables[name] = df
        if name in ONE_STREAM_TABLES and name not in self.settled and self.tables.get(name) is not None:
            self._settle(name)
        df = self.tables.get(name)
        if df is None or df.empty:
            return None
        return df

    def _settle(self, name: str) -> None:
        """Work written twice on one stream (a broken or merged trace) dropped once, the same way for every family
        (:func:`reportgen.intervals.repeats_on_one_stream`), and named in the data problems."""
        from .intervals import repeats_on_one_stream

        self.settled.add(name)
        df, stats = repeats_on_one_stream(self.tables[name])
        if not stats:
            return
        self.tables[name] = df
        for rank, dropped in sorted(stats.items())[:20]:
            self.problem(f"rank {rank}", f"{name}: {dropped} item{'s' if dropped != 1 else ''} written twice on one "
                                         "stream (same name, start and duration: a broken or merged trace?); the "
                                         "repeats were dropped")
        if len(stats) > 20:
            self.problem("(run)", f"{name}: {len(stats) - 20} more ranks with work written twice on one stream")

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
