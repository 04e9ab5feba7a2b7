"""The input families, one registered :class:`Family` object each: the only place that names them.

A family says

* ``name`` (the ``--format`` value, the ``.reduced`` manifest's ``family``) and ``label`` (for messages);
* ``found(survey, others)``: the data :func:`reportgen.readers.survey` recorded for it (paths; empty: absent),
  ``noun``: what one / several of them are called ("2 runs: ..."); ``others`` says whether another family was
  found too (a family whose only evidence is weak may then step back);
* ``read(root, progress, jobs, comm_patterns)``: the reader's own one-process read;
* when it can be read in parts (:mod:`reportgen.engine`: a process pool, Dask, ``.reduced`` files):
  ``units(root, ranks)`` (the units of work of a run directory, in the reader's order), ``reduce(unit,
  comm_patterns) -> Part`` (runs on a worker), ``assemble(root, parts) -> Run``, ``unit_name(unit)`` (a path for
  messages), ``is_rank_unit(unit)`` (not a cluster-wide unit) and ``check_part(meta, tables)`` (a part loaded from an untrusted file has the reader's shape);
* ``file_units``: a single file given to ``reportgen reduce`` is one of its units; ``directory_ranks``: a run
  directory is reduced whole, ``--ranks`` picking its ranks;
* ``shares_data_with``: families detected from the same data (never reported as "also holds" one another);
* ``gives``: per canonical table (or ``table.column``) the family can fill, which of its files / profiler options
  give it (one short text each): the provenance the runner names when a section lacks the table
  (:func:`provenance`, handed to the sections by the caller through ``Options``: sections never import readers);
* hooks run by :func:`reportgen.readers.read_run`: ``check_choice(survey)`` (refuse an ambiguous choice),
  ``after_read(run, survey)`` (data read beside the family's own, e.g. the dataset pipeline) and
  ``unread(run, survey)`` (its own data found and not read).

Every family-specific rule of the engine and of the dispatch lives here or in the family's reader.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from ..engine import Part
from ..errors import InputError
from ..limits import cap_text
from ..model import Run
from . import ascend, kineto, minddata, mindinsight, mindspore_cpu
from .kineto_decode import DecodedTrace


def _none(*_args) -> None:
    return None


def _always(*_args) -> bool:
    return True


@dataclass(frozen=True)
class Family:
    """One input family (module doc)."""

    name: str
    label: str
    found: Callable[[Any, bool], list[Path]]
    noun: tuple[str, str]
    read: Callable[..., Run]
    units: Callable[[Path, set[int] | None], list] | None = None
    reduce: Callable[[Any, tuple[str, ...]], Part] | None = None
    assemble: Callable[[Path, list[Part]], Run] | None = None
    unit_name: Callable[[Any], str] = str
    is_rank_unit: Callable[[Any], bool] = _always  # a unit of one rank (not a cluster-wide unit)
    check_part: Callable[[dict, dict], None] = _none
    file_units: bool = False
    directory_ranks: bool = False
    check_choice: Callable[[Any], None] = _none
    after_read: Callable[[Run, Any], None] = _none
    unread: Callable[[Run, Any], None] = _none
    #: families found from the same data (the same rank directories): never "also holds" one another
    shares_data_with: tuple[str, ...] = ()
    #: per canonical table (or ``table.column``): the family's files / profiler options that give it
    gives: dict[str, str] = field(default_factory=dict)

    @property
    def reducible(self) -> bool:
        """Read in parts by the engine (the pool, Dask, ``.reduced`` files)."""
        return self.units is not None


# --------------------------------------------------------------------------- PyTorch Kineto


def _kineto_read(root: Path, progress=None, jobs=None, comm_patterns=()) -> Run:
    return kineto.read(root, progress=progress, jobs=jobs, comm_patterns=comm_patterns)


def _kineto_units(root: Path, ranks=None) -> list[str]:
    return [str(p) for p in kineto.find_traces(Path(root))]


def _kineto_reduce(unit: str, comm_patterns: tuple[str, ...]) -> Part:
    path, decoded, problems = kineto.decode_job((unit, tuple(comm_patterns)))
    if decoded is None:
        return Part("kineto", path, {"decoded": False}, {}, problems)
    return Part("kineto", path, {"decoded": True, "meta": decoded.meta}, decoded.pop_frames(), problems)


def _kineto_assemble(root: Path, parts: list[Part]) -> Run:
    results, lists = [], {}
    for p in parts:
        decoded = DecodedTrace.from_frames(p.meta.get("meta") or {}, p.tables) if p.meta.get("decoded") else None
        kineto.share_group_lists(decoded, lists)
        results.append((p.source, decoded, [tuple(x) for x in p.problems]))
    del lists
    return kineto.assemble(Path(root), [Path(p.source) for p in parts], results)


def _kineto_found(s, others: bool) -> list[Path]:
    return s.traces


# --------------------------------------------------------------------------- Ascend (and MindSpore CPU)


def _ascend_read(root: Path, progress=None, jobs=None, comm_patterns=()) -> Run:
    return ascend.read(root, progress=progress, jobs=jobs)


def _ascend_units(root: Path, ranks=None) -> list[str]:
    return [str(p) for p in ascend.walk_prof_dirs(Path(root))]


def _ascend_reduce(unit: str, comm_patterns: tuple[str, ...]) -> Part:
    meta, tables = ascend.reduce_dir(Path(unit))
    return Part("ascend", unit, meta, tables, [])


def _ascend_assemble(root: Path, parts: list[Part]) -> Run:
    return ascend.assemble_parts(Path(root), [(p.meta, p.tables) for p in parts])


def _ascend_found(s, others: bool) -> list[Path]:
    return s.ascend_dirs if s.ascend_dirs and not s.cpu_only else []


def _cpu_found(s, others: bool) -> list[Path]:
    return s.ascend_dirs if s.ascend_dirs and s.cpu_only else []


def _cpu_read(root: Path, progress=None, jobs=None, comm_patterns=()) -> Run:
    return mindspore_cpu.read(root, progress=progress)


def _dataset_pipeline(run: Run, s) -> None:
    """MindSpore's dataset pipeline profiles found in and beside the rank directories (readers/minddata.py)."""
    minddata.attach(run, s.minddata, None)


# --------------------------------------------------------------------------- MindSpore Insight


def _mi_read(root: Path, progress=None, jobs=None, comm_patterns=()) -> Run:
    return mindinsight.read(root, progress=progress)


def _mi_units(root: Path, ranks=None) -> list[tuple]:
    """The cluster part (layout, problems, the legacy rank table's text: found by discovery, carried as it is),
    then one unit per rank (of ``ranks`` when given); none for a directory of .reduced files only."""
    if not mindinsight.detect(Path(root)):
        return []
    d = mindinsight.discover(Path(root))
    return [("cluster", str(root), *mindinsight.cluster_part(d))] + [
        ("rank", *u) for u in mindinsight.rank_units(d, ranks)]


def _mi_reduce(unit: tuple, comm_patterns: tuple[str, ...]) -> Part:
    if unit[0] == "cluster":
        return Part("mindinsight", *unit[1:])
    files, host, device = unit[1:]
    return Part("mindinsight", str(files[0].path), *mindinsight.rank_part(files, host, device))


def _mi_assemble(root: Path, parts: list[Part]) -> Run:
    return mindinsight.assemble(Path(root), [(p.source, p.meta, p.tables, p.problems) for p in parts])


def _mi_is_rank_unit(unit: tuple) -> bool:
    return unit[0] == "rank"


def _mi_unit_name(unit: tuple) -> str:
    return unit[1] if unit[0] == "cluster" else str(unit[1][0].path)


def _mi_found(s, others: bool) -> list[Path]:
    return s.mi_runs_found(others)


def rel(root: Path, p: Path) -> str:
    """``p`` relative to ``root`` for messages ("." for the root itself), bounded."""
    try:
        out = p.relative_to(root).as_posix()
    except ValueError:
        out = str(p)
    return cap_text(out or ".", 200)


def _mi_default_runs(s) -> list[Path] | None:
    """The MindInsight run the reader reads from the root (the root itself, or its newest ``profiler*``
    sub-directory by name, as MindInsight does; or the legacy layout at the root), as a one-item list, when
    every other run found is also the root or one of its ``profiler*`` sub-directories; None otherwise
    (runs nested elsewhere: the user has to pick one)."""
    root, runs = s.root, s.mi_runs
    if not runs:
        return [s.mi_top] if s.mi_top is not None else None
    if any(p != root and not (p.parent == root and p.name.startswith("profiler")) for p in runs):
        return None
    if root in runs:
        return [root]
    return [s.mi_flat] if s.mi_flat is not None else [max(runs, key=lambda p: p.name)]


def _mi_check_choice(s) -> None:
    """MindInsight reads one run folder: refuse when several are found (except the documented newest
    ``profiler*`` rule) or when the only one is deeper than the reader looks."""
    if _mi_default_runs(s) is not None:
        return
    runs = s.mi_runs
    listed = ", ".join(rel(s.root, p) for p in runs[:5]) + (f", … ({len(runs)} in all)" if len(runs) > 5 else "")
    if len(runs) == 1:
        raise InputError(s.root, f"the MindSpore Insight output is in the sub-directory {listed}; give that "
                                 "directory")
    raise InputError(s.root, f"holds {len(runs)} MindSpore Insight runs ({listed}); pick one: give its "
                             "sub-directory")


def _mi_after_read(run: Run, s) -> None:
    """The dataset pipeline profiles, and those of a legacy layout's rank folders."""
    legacy = [r for r in s.mi_runs if (r / "cluster_profiler").is_dir()]
    minddata.attach(run, s.minddata, minddata.legacy_files(run, legacy) if legacy else None)


def _mi_unread(run: Run, s) -> None:
    chosen = _mi_default_runs(s) or []
    for p in (p for p in s.mi_runs if p not in chosen):
        run.problem(p, "another MindSpore Insight run; not read (reportgen reads the run directory itself, "
                       "else its newest profiler*/ sub-directory by name, as MindInsight does; give this "
                       "directory to read it)")



# --------------------------------------------------------------------------- provenance: which files give a table

#: the MindSpore dataset pipeline profiles (read beside the rank directories of the MindSpore families:
#: readers/minddata.py), profiled with data_process=True while the script uses mindspore.dataset
_MINDDATA = {
    "minddata_ops": "minddata_pipeline_raw_<rank>.csv (profile with data_process=True)",
    "minddata_summary": "minddata_pipeline_summary_<rank>.json or .csv (data_process=True)",
    "minddata_queue": "device_queue_profiling_<rank>.txt or dataset_iterator_profiling_<rank>.txt "
                      "(data_process=True)",
    "minddata_queue_steps": "minddata_aicpu_<rank>.txt (the data queue) and device_queue_profiling_<rank>.txt "
                            "(the host queue) (data_process=True)",
    "minddata_stages": "dataset.csv (dataset_<rank>.csv in the MindSpore Insight layout; data_process=True)",
    "host_cpu": "minddata_cpu_utilization_<rank>.json (data_process=True)",
}

_MI_GIVES = {
    "step_trace.step_interval_ms": "the step trace's step interval (step_trace_raw_<rank>_detail_time.csv)",
    "step_trace": "step_trace_raw_<rank>_detail_time.csv (profile with the step trace (training trace) enabled)",
    "device_timeline": "the timeline display files or the step trace's op columns",
    "step_ops": "the op columns of step_trace_raw_<rank>_detail_time.csv (the step trace)",
    "comm_rank_step": "hccl_raw_<rank>.csv (profile with communication data)",
    "comm_ops": "hccl_raw_<rank>.csv (profile with communication data)",
    "cluster_overlap": "ascend_cluster_analyse_<mode>_<stages>_<size>_<rank>.csv (written for model / pipeline "
                       "parallel runs)",
    "op_flops": "flops_<rank>.txt (FLOPs collection)",
    "rank_flops": "flops_summary_<rank>.json (FLOPs collection)",
    "memory_peaks": "memory_usage_summary_<rank>.json (profile_memory=True)",
    "op_type_steps": "dynamic_shape_info_<rank>.json (a dynamic-shape network profiled)",
    "strategy_ops": "parallel_strategy_<rank>.json with profiler_info_<rank>.json (a semi_auto_parallel / "
                    "auto_parallel / data_parallel graph-mode job)",
    **_MINDDATA,
}

_ASCEND_GIVES = {
    "step_time.preparing_ms": "the Preparing column of step_trace_time.csv",
    "step_time": "ASCEND_PROFILER_OUTPUT/step_trace_time.csv or the profiler DB (a profiler schedule and step(); "
                 "any profiler level)",
    "kernels": "kernel_details.csv or the profiler DB (profiler_level Level1 or higher)",
    "device_timeline": "trace_view.json, the profiler DB, or kernel_details.csv with communication.json",
    "comm_ops": "communication.json / communication_matrix.json or the profiler DB (profiler_level Level1 or higher)",
    "comm_bandwidth": "communication.json or the profiler DB (profiler_level Level1 or higher)",
    "overlap_intervals": "trace_view.json or the profiler DB",
    "dataloader": "the dataloader spans of trace_view.json (torch_npu)",
    "hbm": "the profiler DB (ascend_pytorch_profiler_<rank>.db; profile with sys_io / HBM sampling on)",
    "llc": "the profiler DB (ascend_pytorch_profiler_<rank>.db; profile with LLC sampling on)",
    "op_flops": "kernel_details.csv or the profiler DB with Input Shapes (profile with record_shapes=True: MatMul, "
                "BatchMatMul, GroupedMatmul, Conv2D and its backprops)",
    "memory_samples": "memory_record.csv / npu_module_mem.csv (profile_memory=True)",
    "groups": "profiler_metadata.json with parallel_group_info (a profiler of distributed training that records "
              "its process groups)",
    "device_ops.launch_delay_ms": "the HostToDevice flow events of trace_view.json (torch_npu, profiler_level Level1 "
                                  "or higher)",
    "host_api": "ASCEND_PROFILER_OUTPUT/api_statistic.csv (profiler_level Level1 or higher)",
    "l2_cache": "ASCEND_PROFILER_OUTPUT/l2_cache.csv (experimental_config l2_cache=True)",
    "kernels.cube_util_ratio": "kernel_details.csv with the AI Core PMU columns (aic_metrics=PipeUtilization)",
    "kernels.aic_mac_ratio": "kernel_details.csv with the AI Core PMU columns (aic_metrics=PipeUtilization)",
    **_MINDDATA,
}

_CPU_GIVES = {
    "step_time": "the op sequence of FRAMEWORK/cpu_op_execute_timestamp_<rank>.txt, repeated once per step (no step "
                 "markers: the repeats are the steps)",
    "trace_steps": "the op sequence of FRAMEWORK/cpu_op_execute_timestamp_<rank>.txt, repeated once per step",
    "device_timeline": "FRAMEWORK/cpu_op_execute_timestamp_<rank>.txt (every host op execution)",
    "comm_ops": "the communication CPU ops of FRAMEWORK/cpu_op_execute_timestamp_<rank>.txt (durations only)",
    "memory_samples": "FRAMEWORK/cpu_ms_memory_record_<rank>.txt (profile_memory=True)",
    **_MINDDATA,
}

_KINETO_GIVES = {
    "step_time.preparing_ms": "ProfilerStep#N markers and GPU kernels (step start to the step's first kernel)",
    "step_time": "ProfilerStep#N markers (torch.profiler with schedule + step()); the computing / communication / "
                 "free split from GPU kernels and NCCL kernels (or gloo spans)",
    "step_time.comm_not_overlapped_ms": "GPU kernels and NCCL kernels in the trace, with ProfilerStep#N markers (a "
                                        "CPU-only trace has no device timeline to measure overlap on)",
    "step_time.free_ms": "GPU kernels with ProfilerStep#N markers (a CPU-only trace has no device timeline)",
    "trace_steps": "ProfilerStep#N markers (torch.profiler with schedule + step())",
    "collectives": "the collective and point-to-point records of the trace (record_param_comms / NCCL kernels)",
    "device_timeline": "GPU kernels (or CPU ops) with ProfilerStep markers",
    "comm_ops": "NCCL/RCCL kernels (or kernels matching a --comm-pattern), gloo or record_param_comms events in the "
                "trace of every rank",
    "dataloader": "enumerate(DataLoader) spans with ProfilerStep markers (the trace's CPU activity)",
    "op_flops": "a trace recorded with record_shapes=True (aten mm/addmm/bmm/baddbmm/matmul/linear/conv ops)",
    "memory_samples": "[memory] events (profile_memory=True)",
    "groups": "the trace's distributedInfo with pg_config",
    "user_ranges": "record_function / NVTX ranges in the trace (user_annotation, gpu_user_annotation)",
    "user_range_spans": "record_function / NVTX ranges in the trace (user_annotation, gpu_user_annotation)",
    "gpu_ops.launch_ts_ns": "GPU kernels with their runtime launch calls (cuda_runtime events with correlation ids)",
}

# --------------------------------------------------------------------------- the registry

#: every family, in detection order
FAMILIES: tuple[Family, ...] = (
    Family("mindinsight", "MindSpore Insight", _mi_found, ("run", "runs"), _mi_read, units=_mi_units,
           reduce=_mi_reduce, assemble=_mi_assemble, unit_name=_mi_unit_name, is_rank_unit=_mi_is_rank_unit, check_part=mindinsight.check_part,
           directory_ranks=True, check_choice=_mi_check_choice, after_read=_mi_after_read, unread=_mi_unread,
           gives=_MI_GIVES),
    Family("mindspore_cpu", "MindSpore CPU", _cpu_found, ("rank directories", "rank directories"), _cpu_read,
           after_read=_dataset_pipeline, shares_data_with=("ascend",), gives=_CPU_GIVES),
    Family("ascend", "Ascend", _ascend_found, ("rank directories", "rank directories"), _ascend_read,
           units=_ascend_units, reduce=_ascend_reduce, assemble=_ascend_assemble, after_read=_dataset_pipeline,
           shares_data_with=("mindspore_cpu",), gives=_ASCEND_GIVES),
    Family("kineto", "PyTorch Kineto", _kineto_found, ("traces", "traces"), _kineto_read, units=_kineto_units,
           reduce=_kineto_reduce, assemble=_kineto_assemble, file_units=True, gives=_KINETO_GIVES),
)
BY_NAME: dict[str, Family] = {f.name: f for f in FAMILIES}
#: the families the engine reads in parts, by name
REDUCIBLE: dict[str, Family] = {f.name: f for f in FAMILIES if f.reducible}
#: the values of ``--format``
FORMATS: tuple[str, ...] = tuple(BY_NAME)
LABELS: dict[str, str] = {f.name: f.label for f in FAMILIES}


def get(name: str) -> Family:
    """The family called ``name`` (KeyError when none is)."""
    return BY_NAME[name]


def provenance(item: str, first: str | None = None) -> str:
    """Which files / profiler options give ``item`` (a canonical table or ``table.column``), by family:
    ``"Ascend: communication.json ...; PyTorch Kineto: NCCL/RCCL kernels ..."`` ("" when no family declares it).

    Every family that can give it is listed, the run's own family (``first``) first: the user learns what to turn
    on in the profiler they used, and what another profiler of the same training would give (an Ascend run may be
    profiled by either framework's profiler). A ``table.column`` item a family does not declare falls back to its
    declaration of the table; families that declare the same text are named together."""
    table = item.partition(".")[0]
    by_text: dict[str, list[str]] = {}  # families that say the same (the dataset pipeline profiles) are named once
    for f in sorted(FAMILIES, key=lambda f: f.name != first):
        text = f.gives.get(item) or f.gives.get(table)
        if text:
            by_text.setdefault(text, []).append(f.label)
    return "; ".join(f"{', '.join(labels)}: {text}" for text, labels in by_text.items())


#: the words that name a framework's API, keyed by what a section needs to say (``Run.framework``: the training
#: script's framework as the reader found it); a section keeps the logic and falls back to plain words without them
FRAMEWORK_HINTS: dict[str, dict[str, str]] = {
    "mindspore": {
        # the dataset pipeline (reportgen/sections/data.py): the parameter to change per kind of bottleneck operation
        "data.map": "raise num_parallel_workers of this map operation (and python_multiprocessing for Python "
                    "transforms), or move the transform to the device (dataset.vision on Ascend)",
        "data.batch": "raise num_parallel_workers of batch, or simplify per_batch_map",
        "data.shuffle": "lower the shuffle buffer_size or shuffle at the source (shuffle=True of the dataset)",
        "data.source": "read faster at the source: convert the data to MindRecord, raise num_parallel_workers of "
                       "the dataset, check the storage throughput",
        "data.workers": "raise num_parallel_workers of this operation",
        "data.workers_of": "raise num_parallel_workers of",
        "data.prefetch": "raise the prefetch depth (mindspore.dataset.config.set_prefetch_size)",
        # a framework that writes a dataset pipeline profile (minddata_* tables): how to turn it on
        "data.pipeline_profile": "profile with data_process=True while the script uses mindspore.dataset",
    },
    "pytorch": {
        "data.workers": "raise num_workers of the DataLoader",
        "data.workers_of": "raise num_workers of the DataLoader that feeds",
        # a note of the data section: what the profile cannot show of the framework's input pipeline
        "data.unseen_workers": "PyTorch DataLoader worker processes are not in the trace's events: the wait of the "
                               "main process for each batch (enumerate(DataLoader) __next__) is what the trace shows.",
        "data.prefetch": "raise the DataLoader's prefetch_factor (with pin_memory=True)",
    },
}


def hints(framework: str) -> dict[str, str]:
    """The framework's hint texts (:data:`FRAMEWORK_HINTS`); a mixed or unknown framework gets none."""
    return dict(FRAMEWORK_HINTS.get(framework or "", {}))


def own_provenance(item: str, family: str | None) -> str:
    """What ``family``'s own files give ``item`` (its declaration alone, no label; "" when it declares none): for a
    note about the run, which speaks of the profiler the user ran."""
    f = BY_NAME.get(family or "")
    return "" if f is None else f.gives.get(item) or f.gives.get(item.partition(".")[0]) or ""


def section_context(run: Run) -> dict[str, Any]:
    """What the code that runs the sections hands them from the registry (``Options(values, **context)``): the
    provenance of a table, the run's own family first (:func:`provenance`), its own family's alone
    (:func:`own_provenance`), and the framework's hint texts."""
    first = getattr(run, "source_format", None)
    return {"provenance": lambda item: provenance(item, first),
            "own_provenance": lambda item: own_provenance(item, first),
            "hints": hints(getattr(run, "framework", ""))}
