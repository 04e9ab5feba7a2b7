"""Reader for the MindSpore Insight cluster layout (MindInsight 1.x - 2.3, MindSpore <= 2.3).

Format facts (file names, columns, units, quirks): ../shared/research/mindinsight-cluster-profiling.md.

Two layouts are found:

* **flat** (MindInsight >= 1.5): one folder holding every rank's files, keyed by GLOBAL rank:
  the run directory itself, or its newest ``profiler*`` sub-directory by name (MindInsight's
  ``validate_and_normalize_profiler_path`` sorts the names and takes the last).
* **legacy** (MindInsight <= 1.4): a rank table (the first ``*.json`` with a ``server_list``,
  any name, usually ``hccl.json``), ``host_ips_mapping.txt`` (``<host ip> <mapped name>`` per
  line) and ``cluster_profiler/<mapped name>/profiler/`` whose files are keyed by DEVICE id;
  (host, device id) -> global rank comes from the rank table.

Step trace values are system-counter ticks of 10 ns: ``ms = ticks / 1e5``
(MindInsight ``PER_MS_SYSCNT = 100000``); absolute ones (start/end points) are read exactly as
``ticks x 10`` ns and, like the timeline's times, made relative to the run origin (the earliest of them;
model doc, "Time base").
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from ..errors import InputError
from ._files import read_text as _read_text
from ..model import Run
from ..timebase import abs_columns, origin, to_ns, to_rel_ms

#: 10 ns system-counter ticks per millisecond.
TICKS_PER_MS = 1e5
NS_PER_TICK = 10

#: Recognised per-rank files: kind -> pattern whose last group is the rank (device id in legacy).
FILE_PATTERNS: dict[str, re.Pattern] = {
    "step_trace": re.compile(r"^step_trace_raw_(\d+)_detail_time\.csv$"),
    "cluster_analyse": re.compile(r"^(?:ascend|gpu)_cluster_analyse_([a-z]+-parallel)_(\d+)_(\d+)_(\d+)\.csv$"),
    "hccl_raw": re.compile(r"^hccl_raw_(\d+)\.csv$"),
    "flops_summary": re.compile(r"^flops_summary_(\d+)\.json$"),
    "flops_detail": re.compile(r"^flops_(\d+)\.txt$"),
    "flops_scope": re.compile(r"^flops_scope_(\d+)\.json$"),
    "memory_usage_summary": re.compile(r"^memory_usage_summary_(\d+)\.json$"),
    "memory_usage_details": re.compile(r"^memory_usage_details_(\d+)\.json$"),
    "parallel_strategy": re.compile(r"^parallel_strategy_(\d+)\.json$"),
    "profiler_info": re.compile(r"^profiler_info_(\d+)\.json$"),
    "timeline_display": re.compile(r"^(?:ascend|gpu)_timeline_display_(\d+)\.json$"),
    "timeline_summary": re.compile(r"^(?:ascend|gpu)_timeline_summary_(\d+)\.json$"),
    "op_intermediate_detail": re.compile(r"^aicore_intermediate_(\d+)_detail\.csv$"),
    "op_intermediate_type": re.compile(r"^aicore_intermediate_(\d+)_type\.csv$"),
    "framework_raw": re.compile(r"^framework_raw_(\d+)\.csv$"),
}

_BASE_COLUMNS = (
    "step_num", "start_point", "end_point", "total", "fp_point", "bp_point",
    "iteration_interval", "fp_and_bp", "tail",
)

#: ascend_cluster_analyse column name -> run-model column (both header generations).
_OVERLAP_COLUMNS = {
    "computation_time": "computation_ms",
    "computation": "computation_ms",
    "communication_alone_time": "comm_alone_ms",
    "stage_time": "stage_ms",
    "receive_alone_time": "receive_alone_ms",
    "collective_communication_alone_time": "collective_comm_alone_ms",
    "collective_communication_time": "collective_comm_alone_ms",
}

_STREAM = re.compile(r"^stream_(\d+)_")

#: file kind -> "module:function" parsing one file into {table: DataFrame}; the function takes
#: (path, rank, problems). Modules are imported lazily; a missing module means the kind is only listed.
EXTRA_PARSERS = {
    "memory_usage_summary": "reportgen.readers.mindinsight_memory:parse_memory_summary",
    "memory_usage_details": "reportgen.readers.mindinsight_memory:parse_memory_details",
    "flops_summary": "reportgen.readers.mindinsight_flops:parse_flops_summary",
    "flops_detail": "reportgen.readers.mindinsight_flops:parse_flops_detail",
    "parallel_strategy": "reportgen.readers.mindinsight_strategy:parse_parallel_strategy",
    "timeline_display": "reportgen.readers.mindinsight_timeline:parse_timeline_display",
}


def _extra_parser(kind: str):
    target = EXTRA_PARSERS.get(kind)
    if not target:
        return None
    import importlib

    module, _, name = target.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


@dataclass
class FoundFile:
    kind: str
    path: Path
    key: int  # rank (flat) or device id (legacy), from the file name
    rank: int | None = None
    meta: dict = field(default_factory=dict)


# --------------------------------------------------------------------------- discovery


def _classify(path: Path) -> FoundFile | None:
    for kind, pat in FILE_PATTERNS.items():
        m = pat.match(path.name)
        if m:
            meta = {}
            if kind == "cluster_analyse":
                meta = {"mode": m.group(1), "stages": int(m.group(2)), "world_size": int(m.group(3))}
            return FoundFile(kind, path, int(m.group(m.lastindex)), meta=meta)
    return None


def _scan(folder: Path) -> list[FoundFile]:
    found = []
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError:
        return found
    for p in entries:
        if p.is_file():
            f = _classify(p)
            if f:
                found.append(f)
    return found


def detect(root: Path) -> bool:
    """True when ``root`` looks like MindSpore Insight cluster output (either layout)."""
    try:
        return _flat_folder(root) is not None or (root / "cluster_profiler").is_dir()
    except OSError:
        return False


def _flat_folder(root: Path) -> Path | None:
    if _scan(root):
        return root
    subs = sorted((p for p in root.iterdir() if p.is_dir() and p.name.startswith("profiler")), key=lambda p: p.name)
    for sub in reversed(subs):
        if _scan(sub):
            return sub
    return None


def _legacy_rank_table(root: Path) -> Path | None:
    if not (root / "cluster_profiler").is_dir():
        return None
    for p in sorted(root.glob("*.json"), key=lambda p: p.name):
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("server_list"), list):
            return p
    return None


# --------------------------------------------------------------------------- parsing




def _num(text: str) -> float:
    text = text.strip()
    if text == "":
        return math.nan
    return float(text)


@dataclass
class StepTrace:
    rows: list[dict]  # per step: durations in ms, start_ns / end_ns exact (absolute ticks x 10)
    average: dict | None  # the file's own average row, ms
    ops: list[tuple]  # (step, op, stream, start_ns, end_ns, dur_ms)


def parse_step_trace(path: Path, problems: list[tuple[str, str]]) -> StepTrace:
    """Parse ``step_trace_raw_{rank}_detail_time.csv`` completely.

    Columns by name (never position): the nine base columns, then communication-op column
    triples in either naming generation — ``<op>, <op>_start_point, <op>_end_point`` (MindSpore
    >= 1.x, duration first) or ``stream_S_parallel_K_start_point, ..._end_point, stream_S_parallel_K``
    (older, duration last). Rows: one per step, then the average row (``step_num`` ``-``; in some
    old files a last row with ``step_num`` 0). An op whose start and end are both 0 did not run
    in that step.
    """
    text = _read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise InputError(path, "empty file") from None
    index = {h: i for i, h in enumerate(header) if h}
    missing = [c for c in _BASE_COLUMNS if c not in index]
    if missing:
        raise InputError(path, f"not a step trace: missing column(s) {', '.join(missing)}")
    op_cols = []
    for h, i in index.items():
        if h.endswith("_start_point") and h not in ("start_point",):
            base = h[: -len("_start_point")]
            if base in index and base + "_end_point" in index and base not in _BASE_COLUMNS:
                m = _STREAM.match(base)
                op_cols.append((base, int(m.group(1)) if m else None, i, index[base + "_end_point"], index[base]))
    raw_rows = [r for r in reader if any(c.strip() for c in r)]
    rows, ops, average = [], [], None
    seen = set()
    base_idx = [index[c] for c in _BASE_COLUMNS]
    for n, r in enumerate(raw_rows, start=2):
        last = n == len(raw_rows) + 1
        if len(r) <= max(base_idx):
            problems.append((str(path), f"line {n}: truncated row ({len(r)} of {len(header)} fields) skipped"))
            continue
        step_text = r[index["step_num"]].strip()
        try:
            vals = {c: _num(r[index[c]]) for c in _BASE_COLUMNS[1:]}
        except ValueError:
            problems.append((str(path), f"line {n}: non-numeric value skipped"))
            continue
        ms = {
            "step_ms": vals["total"] / TICKS_PER_MS,
            "step_interval_ms": vals["iteration_interval"] / TICKS_PER_MS,
            "fp_bp_ms": vals["fp_and_bp"] / TICKS_PER_MS,
            "tail_ms": vals["tail"] / TICKS_PER_MS,
            "start_ns": to_ns(r[index["start_point"]], NS_PER_TICK),
            "end_ns": to_ns(r[index["end_point"]], NS_PER_TICK),
        }
        if step_text == "-" or (last and step_text == "0"):
            average = ms
            continue
        if not step_text.isdigit():
            problems.append((str(path), f"line {n}: step number {step_text[:20]!r} not understood, row skipped"))
            continue
        step = int(step_text)
        if step in seen:
            problems.append((str(path), f"line {n}: step {step} appears again; the first row was kept"))
            continue
        seen.add(step)
        ms["step"] = step
        rows.append(ms)
        for name, stream, i_start, i_end, i_dur in op_cols:
            if max(i_start, i_end, i_dur) >= len(r):
                continue
            try:
                start, end, dur = _num(r[i_start]), _num(r[i_end]), _num(r[i_dur])
            except ValueError:
                continue
            if math.isnan(start) or math.isnan(end) or (start == 0 and end == 0):
                continue
            if math.isnan(dur):
                dur = end - start
            ops.append((step, name, stream, to_ns(r[i_start], NS_PER_TICK), to_ns(r[i_end], NS_PER_TICK),
                        dur / TICKS_PER_MS))
    if not rows and average is None:
        raise InputError(path, "no step rows")
    return StepTrace(rows, average, ops)


def parse_cluster_analyse(path: Path, problems: list[tuple[str, str]]) -> tuple[list[dict], dict | None]:
    """Parse ``ascend_cluster_analyse_{mode}_{stages}_{size}_{rank}.csv`` (values in ms).

    One row per step in file order (MindInsight selects steps by row index), the last row is
    the average over steps. A file with a single row is both step 1 and the average.
    """
    text = _read_text(path)
    rows = [r for r in csv.reader(io.StringIO(text, newline="")) if any(c.strip() for c in r)]
    if not rows:
        raise InputError(path, "empty file")
    header = [h.strip() for h in rows[0]]
    cols = {i: _OVERLAP_COLUMNS[h] for i, h in enumerate(header) if h in _OVERLAP_COLUMNS}
    if not cols:
        problems.append((str(path), f"header {','.join(header)[:80]!r} has no computation/communication columns; ignored"))
        return [], None
    values = []
    for n, r in enumerate(rows[1:], start=2):
        try:
            values.append({name: _num(r[i]) if i < len(r) else math.nan for i, name in cols.items()})
        except ValueError:
            problems.append((str(path), f"line {n}: non-numeric value, row skipped"))
    if not values:
        return [], None
    if len(values) == 1:
        steps, avg = values, values[0]
    else:
        steps, avg = values[:-1], values[-1]
    out = [dict(v, step=i + 1) for i, v in enumerate(steps)]
    return out, dict(avg)


def parse_profiler_info(path: Path) -> dict:
    try:
        doc = json.loads(_read_text(path))
    except ValueError as exc:
        raise InputError(path, f"invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict):
        raise InputError(path, "expected a JSON object")
    return doc


# --------------------------------------------------------------------------- legacy layout


@dataclass
class RankTable:
    path: Path
    rank_of: dict[tuple[str, int], int]  # (server_id, device_id) -> rank
    world_size: int


def parse_rank_table(path: Path) -> RankTable:
    """HCCL rank table (``hccl.json``): ``server_list[].device[] = {device_id, device_ip, rank_id}``."""
    try:
        doc = json.loads(_read_text(path))
    except ValueError as exc:
        raise InputError(path, f"invalid JSON ({exc.msg} at line {exc.lineno})") from None
    rank_of: dict[tuple[str, int], int] = {}
    for server in doc.get("server_list") or []:
        sid = str(server.get("server_id", ""))
        for dev in server.get("device") or []:
            try:
                rank_of[(sid, int(dev["device_id"]))] = int(dev["rank_id"])
            except (KeyError, TypeError, ValueError):
                raise InputError(path, f"rank table entry of server {sid!r} lacks a numeric device_id/rank_id") from None
    if not rank_of:
        raise InputError(path, "rank table lists no devices")
    return RankTable(path, rank_of, len(rank_of))


def parse_host_mapping(path: Path) -> dict[str, str]:
    """``host_ips_mapping.txt``: one ``<host ip> <mapped name>`` pair per line -> {mapped: ip}."""
    mapping: dict[str, str] = {}
    for line in _read_text(path).splitlines():
        parts = line.split()
        if len(parts) >= 2:
            mapping[parts[1]] = parts[0]
    return mapping


# --------------------------------------------------------------------------- the reader


def read(root: Path, progress: Callable[[int, int], None] | None = None) -> Run:
    root = Path(root)
    problems: list[tuple[str, str]] = []
    hosts: dict[int, str] = {}
    devices: dict[int, int] = {}
    expected: set[int] | None = None
    world_size: int | None = None

    rank_table_path = _legacy_rank_table(root)
    if rank_table_path is not None:
        table = parse_rank_table(rank_table_path)
        world_size = table.world_size
        expected = set(table.rank_of.values())
        mapping_path = root / "host_ips_mapping.txt"
        mapped_to_ip = parse_host_mapping(mapping_path) if mapping_path.is_file() else {}
        files: list[FoundFile] = []
        for host_dir in sorted((root / "cluster_profiler").iterdir(), key=lambda p: p.name):
            if not host_dir.is_dir():
                continue
            folder = host_dir / "profiler" if (host_dir / "profiler").is_dir() else host_dir
            ip = mapped_to_ip.get(host_dir.name, host_dir.name)
            for f in _scan(folder):
                rank = table.rank_of.get((ip, f.key))
                if rank is None:
                    problems.append((str(f.path), f"device {f.key} of host {host_dir.name} is not in the rank table; skipped"))
                    continue
                f.rank = rank
                hosts[rank] = host_dir.name
                devices[rank] = f.key
                files.append(f)
        layout = (f"legacy MindInsight layout: rank table {rank_table_path.name}, "
                  f"host_ips_mapping.txt, cluster_profiler/<host>/profiler/ keyed by device id")
        if not mapped_to_ip:
            problems.append((str(mapping_path), "host_ips_mapping.txt missing; host folders were matched to rank-table server ids by name"))
    elif (root / "cluster_profiler").is_dir() and _flat_folder(root) is None:
        raise InputError(root / "cluster_profiler", "legacy layout without a rank table: expected a *.json with a "
                                                    "server_list (hccl.json) beside it to map device ids to ranks")
    else:
        folder = _flat_folder(root)
        if folder is None:
            raise InputError(root, "no MindSpore Insight profiler files found (expected step_trace_raw_<rank>_detail_time.csv "
                                   "or other per-rank files here or in a profiler*/ sub-directory)")
        files = _scan(folder)
        for f in files:
            f.rank = f.key
        rel = "." if folder == root else folder.name
        layout = f"MindInsight cluster layout (all ranks in {rel}/, files keyed by rank)"

    run = Run(name=root.resolve().name or str(root), source_format="mindinsight", source_path=str(root), layout=layout)
    run.hosts = hosts
    run.devices = devices

    # parallel layout from the cluster_analyse file name (mode, stage count, world size)
    ca = [f for f in files if f.kind == "cluster_analyse"]
    if ca:
        meta = ca[0].meta
        run.parallel = {"mode": meta["mode"], "stages": meta["stages"]}
        if meta["stages"] > 1:
            run.parallel["pp"] = meta["stages"]
        world_size = world_size or meta["world_size"]
        if any(f.meta != meta for f in ca):
            problems.append((str(ca[0].path.parent), "ascend_cluster_analyse_* file names disagree on mode/stages/size; the first was used"))

    total = len(files)
    step_rows, avg_rows, op_rows, ov_rows, ov_avg_rows = [], [], [], [], []
    hccl: dict[str, list] = {}
    generations: set[str] = set()
    for n, f in enumerate(files, start=1):
        if progress:
            progress(n, total)
        try:
            if f.kind == "step_trace":
                st = parse_step_trace(f.path, problems)
                step_rows.extend(dict(r, rank=f.rank) for r in st.rows)
                if st.average is not None:
                    avg_rows.append(dict(st.average, rank=f.rank))
                else:
                    problems.append((str(f.path), "no average row ('-'); the average is computed from the step rows"))
                op_rows.extend((f.rank,) + o for o in st.ops)
            elif f.kind == "cluster_analyse":
                rows, avg = parse_cluster_analyse(f.path, problems)
                ov_rows.extend(dict(r, rank=f.rank) for r in rows)
                if avg is not None:
                    ov_avg_rows.append(dict(avg, rank=f.rank))
            elif f.kind == "hccl_raw":
                from .mindinsight_hccl import parse_hccl_raw

                parsed = parse_hccl_raw(f.path, f.rank, problems)
                generations.add(parsed["generation"])
                for name, df in parsed["tables"].items():
                    hccl.setdefault("mi_" + name.replace("comm_rank", "comm_rank"), []).append(df)
            elif _extra_parser(f.kind) is not None:
                for name, df in (_extra_parser(f.kind)(f.path, f.rank, problems) or {}).items():
                    hccl.setdefault(name, []).append(df)
            elif f.kind == "profiler_info":
                info = parse_profiler_info(f.path)
                if world_size is None and str(info.get("rank_size", "")).isdigit():
                    world_size = int(info["rank_size"])
                stage_num = info.get("stage_num")
                if "stages" not in run.parallel and isinstance(stage_num, int) and stage_num >= 1:
                    run.parallel["stages"] = stage_num
                if info.get("parallel_mode"):
                    run.parallel.setdefault("framework_mode", str(info["parallel_mode"]))
        except InputError as exc:
            problems.append((exc.path or str(f.path), exc.problem + "; file skipped"))

    found_ranks = sorted({f.rank for f in files if f.rank is not None})
    stages = run.parallel.get("stages")
    if stages and world_size and stages >= 1:
        # MindSpore assigns consecutive blocks of world_size / stages ranks to each stage
        # (MindInsight cluster_analyser.py: stage = rank // (rank_size / stage_num) + 1).
        per_stage = world_size / stages
        run.stage_map = {r: int(r // per_stage) + 1 for r in found_ranks}
    if not found_ranks:
        raise InputError(root, "no per-rank profiler files found")

    run.ranks = found_ranks
    run.world_size = world_size
    if expected is None and world_size:
        expected = set(range(world_size))
    run.missing_ranks = sorted(expected - set(found_ranks)) if expected else []

    if step_rows:
        df = pd.DataFrame(step_rows)[["rank", "step", "step_ms", "step_interval_ms", "fp_bp_ms", "tail_ms", "start_ns", "end_ns"]]
        run.tables["step_trace"] = df.sort_values(["rank", "step"], kind="stable").reset_index(drop=True)
        run.steps = sorted(df["step"].unique().tolist())
        run.step_source = "markers"
    if avg_rows:
        run.tables["step_trace_avg"] = (
            pd.DataFrame(avg_rows)[["rank", "step_ms", "step_interval_ms", "fp_bp_ms", "tail_ms"]]
            .sort_values("rank").reset_index(drop=True))
    if op_rows:
        run.tables["step_ops"] = pd.DataFrame(op_rows, columns=["rank", "step", "op", "stream", "start_ns", "end_ns", "dur_ms"])
    ov_cols = ["computation_ms", "comm_alone_ms", "stage_ms", "receive_alone_ms", "collective_comm_alone_ms"]
    if ov_rows:
        df = pd.DataFrame(ov_rows)
        run.tables["cluster_overlap"] = df.reindex(columns=["rank", "step"] + ov_cols).sort_values(["rank", "step"]).reset_index(drop=True)
    if ov_avg_rows:
        run.tables["cluster_overlap_avg"] = pd.DataFrame(ov_avg_rows).reindex(columns=["rank"] + ov_cols).sort_values("rank").reset_index(drop=True)
    for name, parts in hccl.items():
        parts = [p for p in parts if p is not None and not p.empty]
        if parts:
            run.tables[name] = pd.concat(parts, ignore_index=True)
    if generations:
        run.notes.append("hccl_raw unit generation: " + " and ".join(sorted(generations)) +
                         " (MindSpore <=2.1 writes ms / KB / KB/s; 2.2+ writes µs costs and GB/s; all shown in "
                         "ms / MB / GB/s)")
        if len(generations) > 1:
            run.problem(str(root), "hccl_raw files of both unit generations in one run; each was converted on its own")
    # one origin for every absolute time (step trace ticks, timeline µs): model doc, "Time base"
    t0 = origin(*(c for df in run.tables.values() for c in abs_columns(df)))
    run.time_origin_ns = t0 if t0 is not None else 0
    for name, df in run.tables.items():
        if abs_columns(df):
            run.tables[name] = to_rel_ms(df, run.time_origin_ns)
    run.tables["files"] = pd.DataFrame(
        [{"rank": f.rank, "kind": f.kind, "path": str(f.path)} for f in files], columns=["rank", "kind", "path"])
    for path, problem in problems:
        run.problem(path, problem)
    return run


def recognised_kinds(run: Run) -> dict[str, int]:
    """How many files of each recognised kind the run has (for 'unavailable' reasons)."""
    files = run.tables.get("files")
    if files is None or files.empty:
        return {}
    return files.groupby("kind").size().to_dict()
