"""Reader for Ascend profiler output of torch_npu (``*_ascend_pt``) and MindSpore 2.x (``*_ascend_ms``).

Format facts, formulas and traps: ../shared/research/ascend-profiler-output-and-msprof-analyze.md.

* Discovery: every directory at any depth whose name ends in ``ascend_pt`` / ``ascend_ms`` (or that
  holds an ``ASCEND_PROFILER_OUTPUT`` folder). The rank comes from ``profiler_info_{rank}.json``
  (the device id is NOT the rank); MindSpore CPU output carries it only in ``FRAMEWORK/*_{rank}``
  file suffixes. Two folders for one rank: the newest (time stamp in the name, else modification
  time) wins, and a data problem says so.
* World size and expected ranks: ``profiler_metadata.json`` ``distributed_args.world_size``, else the
  union of every rank's ``parallel_group_info``.
* Everything is parsed by header name, never by position. Units become ms / MB (10^6 B) / GB/s.
* Times (model doc, "Time base"): parsers give absolute times as exact int ns (``*_ns``: CSV / JSON µs text via
  :mod:`reportgen.timebase`, DB ns integers); the run origin is the earliest of them over the tables read at once
  (trace_view.json, communication.json, the DB), or, when only the lazily parsed CSVs carry times, the earliest
  of their first rows; every table, lazy ones when parsed, gets ``*_ms`` relative to it.
* Communication op names end in ``@<hash>`` where hash = HCCL ``double_hash`` of the group key; the
  map back to the group comes from hashing every ``parallel_group_info`` key. Matrix links use
  group-local indices; they are mapped to global ranks through the group's sorted ``global_ranks``.
* When the text files are absent the same facts come from the DB export (:mod:`.ascend_db`).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pandas as pd

from ..errors import InputError
from ._files import read_text as _read_text
from ..model import Run
from ..timebase import abs_columns, column_ns, origin, to_ns, to_rel_ms

US_PER_MS = 1000.0
#: torch_npu writes memory "MB" as bytes / 1024**2 (values are multiples of 1/64 MiB): to MB of 10^6 B.
MIB_TO_MB = 1.048576
#: operator_memory "Size(KB)" is bytes / 1024 (KiB): to MB of 10^6 B.
KIB_TO_MB = 1.024e-3

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
_PROF_DIR = re.compile(r"ascend_(pt|ms)$")
_INFO = re.compile(r"^profiler_info_(\d+)\.json$")
_MAX_DEPTH = 10

#: step id of step_trace_time rows written without one (no profiler schedule); never left in the run model
NO_STEP_ID = -1
#: step_trace_time.csv header -> step_time column (ms after /1000)
STEP_TIME_COLUMNS = {
    "Computing": "computing_ms",
    "Communication(Not Overlapped)": "comm_not_overlapped_ms",
    "Overlapped": "overlapped_ms",
    "Communication": "comm_ms",
    "Free": "free_ms",
    "Stage": "stage_ms",
    "Bubble": "bubble_ms",
    "Communication(Not Overlapped and Exclude Receive)": "comm_not_overlapped_exclude_receive_ms",
    "Preparing": "preparing_ms",
}
STEP_TIME_ORDER = ["rank", "step", "step_ms"] + list(STEP_TIME_COLUMNS.values())

TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
P2P_PREFIXES = ("hcom_send", "hcom_receive", "hcom_batchsendrecv")


def double_hash(text: str) -> int:
    """HCCL's group hash (the ``@`` suffix of op names): two 32-bit polynomial rolling hashes
    over the code points (multipliers 29 and 131), the first in the high 32 bits.
    Verified: ``group_name_19`` -> 3985310405473756128 on the 4-rank MindSpeed fixture."""
    h1 = h2 = 0
    for ch in text:
        h1 = (h1 * 29 + ord(ch)) & 0xFFFFFFFF
        h2 = (h2 * 131 + ord(ch)) & 0xFFFFFFFF
    return (h1 << 32) | h2


def group_kind(name: str) -> str:
    """Group kind from the framework's group name (MindSpeed/Megatron ``parallel_group_info``)."""
    n = (name or "").lower()
    if n in ("default_group", "hccl_world_group", "world"):
        return "world"
    if n.startswith("pp") or n == "pipeline":
        return "pp"
    if n.startswith("tp") or n == "tensor":
        return "tp"
    if n in ("cp",) or n.startswith("cp_"):
        return "cp"
    if n.startswith(("ep", "exp", "moe")):
        return "ep"
    if n.startswith("dp"):
        return "dp"
    return "other"


# --------------------------------------------------------------------------- small file helpers




def _read_json(path: Path, exact: bool = False):
    """A JSON file; ``exact``: float literals come back as their text (times parsed with timebase.to_ns)."""
    text = _read_text(path)
    if not text.strip():
        raise InputError(path, "empty file")
    try:
        return json.loads(text, parse_float=str) if exact else json.loads(text)
    except ValueError as exc:
        raise InputError(path, f"invalid JSON ({exc.msg} at line {exc.lineno}; truncated?)") from None


def _num(value) -> float:
    """Numbers as the Ascend CSVs write them: trailing tabs, ``N/A``, empty cells."""
    if value is None:
        return math.nan
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if text in ("", "N/A", "NA", "None", "-"):
        return math.nan
    try:
        return float(text)
    except ValueError:
        return math.nan


def _read_csv(path: Path, problems: list, usecols: Callable[[str], bool] | None = None) -> pd.DataFrame:
    """A CSV as strings (by header name), tolerant of a truncated last line."""
    text = _read_text(path)
    try:
        df = pd.read_csv(io.StringIO(text), dtype=str, keep_default_na=False, on_bad_lines="skip",
                         usecols=usecols, engine="c")
    except pd.errors.EmptyDataError:
        raise InputError(path, "empty file") from None
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(path, f"not a readable CSV ({str(exc).splitlines()[0][:120]})") from None
    df.columns = [c.strip() for c in df.columns]
    lines = text.count("\n") + (0 if text.endswith("\n") else 1) - 1
    if lines > len(df) and not text.endswith("\n"):
        problems.append((str(path), f"{lines - len(df)} malformed or truncated line(s) skipped"))
    return df


def _col(df: pd.DataFrame, *names: str) -> str | None:
    for n in names:
        if n in df.columns:
            return n
    return None


def _floats(series: pd.Series) -> pd.Series:
    return pd.to_numeric(series.astype(str).str.strip().replace({"N/A": "", "NA": ""}), errors="coerce")


# --------------------------------------------------------------------------- text parsers


def parse_step_trace_time(path: Path, rank: int, problems: list) -> pd.DataFrame:
    """``step_trace_time.csv``: one row per step (µs) -> step_time rows (ms).

    Optional ``Device_id`` and ``Preparing`` columns; ``Step`` may be empty (no schedule): step
    :data:`NO_STEP_ID` here, made the whole-trace step 0 by :func:`whole_trace_steps` once every rank is read.
    ``step_ms`` = Computing + Communication(Not Overlapped) + Free, the device end-to-end time
    (identity verified on the fixtures: equals Stage + Bubble to < 1 µs).
    """
    df = _read_csv(path, problems)
    missing = [c for c in ("Computing", "Communication(Not Overlapped)", "Free") if c not in df.columns]
    if missing:
        raise InputError(path, f"not a step_trace_time.csv: missing column(s) {', '.join(missing)}")
    step_col = _col(df, "Step", "Step Id")
    steps = _floats(df[step_col]) if step_col else pd.Series([math.nan] * len(df))
    if steps.isna().any():
        problems.append((str(path), "rows without a step number (no profiler schedule) are counted as step 0"))
    out = pd.DataFrame({"rank": [rank] * len(df), "step": steps.fillna(NO_STEP_ID).astype(int).to_numpy()})
    for src, dst in STEP_TIME_COLUMNS.items():
        out[dst] = _floats(df[src]).to_numpy() / US_PER_MS if src in df.columns else math.nan
    out["step_ms"] = out["computing_ms"] + out["comm_not_overlapped_ms"] + out["free_ms"]
    return out[STEP_TIME_ORDER]


def _op_type(op: str) -> str:
    m = re.match(r"^hcom_([A-Za-z]+)", op)
    return (m.group(1) if m else op.split("-")[0]).lower()


def parse_communication(path: Path, rank: int, problems: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``communication.json`` -> (comm_ops_raw, comm_bandwidth_raw) with ``group_hash`` columns.

    Times are in ms already; sizes in MB (10^6 B); ``Total Op Info`` entries are skipped (they are
    sums we recompute). SDMA is HCCS+PCIE+SIO aggregated: kept as its own transport row.
    """
    doc = _read_json(path, exact=True)
    if not isinstance(doc, dict):
        raise InputError(path, "expected a JSON object keyed by step")
    ops, bws = [], []
    for step_key, kinds in doc.items():
        m = re.match(r"^step(\d*)$", str(step_key))
        if not m or not isinstance(kinds, dict):
            problems.append((str(path), f"entry {str(step_key)[:40]!r} is not a step; skipped"))
            continue
        step = int(m.group(1)) if m.group(1) else 0
        for kind, entries in kinds.items():
            if not isinstance(entries, dict):
                continue
            for key, info in entries.items():
                if key.startswith("Total Op Info") or not isinstance(info, dict):
                    continue
                op, _, ghash = key.partition("@")
                t = info.get("Communication Time Info") or {}
                ops.append((rank, step, kind, op, _op_type(op), ghash,
                            to_ns(t.get("Start Timestamp(us)")), _num(t.get("Elapse Time(ms)")),
                            _num(t.get("Transit Time(ms)")), _num(t.get("Wait Time(ms)")),
                            _num(t.get("Synchronization Time(ms)")), _num(t.get("Idle Time(ms)"))))
                for transport, b in (info.get("Communication Bandwidth Info") or {}).items():
                    if not isinstance(b, dict):
                        continue
                    size, time = _num(b.get("Transit Size(MB)")), _num(b.get("Transit Time(ms)"))
                    if not (size or time):
                        continue
                    bws.append((rank, step, kind, op, ghash, transport, size, time,
                                _num(b.get("Bandwidth(GB/s)")), _num(b.get("Large Packet Ratio"))))
    ops_df = pd.DataFrame(ops, columns=["rank", "step", "kind", "op", "op_type", "group_hash", "start_ns",
                                        "elapse_ms", "transit_ms", "wait_ms", "sync_ms", "idle_ms"])
    ops_df["start_ns"] = ops_df["start_ns"].astype("Int64")
    bw_df = pd.DataFrame(bws, columns=["rank", "step", "kind", "op", "group_hash", "transport", "size_mb",
                                       "time_ms", "bandwidth_gbps", "large_packet_ratio"])
    return ops_df, bw_df


def parse_matrix(path: Path, rank: int, problems: list) -> pd.DataFrame:
    """``communication_matrix.json`` -> comm_matrix_raw rows with GROUP-LOCAL ``src_local``/``dst_local``."""
    doc = _read_json(path)
    if not isinstance(doc, dict):
        raise InputError(path, "expected a JSON object keyed by step")
    rows = []
    for step_key, kinds in doc.items():
        m = re.match(r"^step(\d*)$", str(step_key))
        if not m or not isinstance(kinds, dict):
            continue
        step = int(m.group(1)) if m.group(1) else 0
        for kind, entries in kinds.items():
            if not isinstance(entries, dict):
                continue
            for key, links in entries.items():
                if not isinstance(links, dict):
                    continue
                name, _, ghash = key.partition("@")
                op_type, _, stat = name.rpartition("-")
                for link, v in links.items():
                    src, _, dst = str(link).partition("-")
                    if not (src.isdigit() and dst.isdigit()) or not isinstance(v, dict):
                        continue
                    src_i, dst_i = int(src), int(dst)
                    if dst_i == 4294967295:  # "local": the other end is the source
                        dst_i = src_i
                    rows.append((rank, step, kind, op_type.lower(), stat, ghash, src_i, dst_i,
                                 str(v.get("Transport Type", "")), _num(v.get("Transit Size(MB)")),
                                 _num(v.get("Transit Time(ms)")), _num(v.get("Bandwidth(GB/s)")),
                                 str(v.get("Op Name", ""))))
    return pd.DataFrame(rows, columns=["rank", "step", "kind", "op_type", "stat", "group_hash", "src_local",
                                       "dst_local", "transport", "size_mb", "time_ms", "bandwidth_gbps", "op_name"])


def parse_kernel_details(path: Path, rank: int, problems: list) -> pd.DataFrame:
    wanted = {"Step Id", "Name", "Type", "Accelerator Core", "Stream ID", "Start Time(us)", "Duration(us)",
              "Input Shapes", "Output Shapes"}
    df = _read_csv(path, problems, usecols=lambda c: c.strip() in wanted)
    if "Name" not in df.columns or "Duration(us)" not in df.columns:
        raise InputError(path, "not a kernel_details.csv: missing Name or Duration(us)")
    n = len(df)
    return pd.DataFrame({
        "rank": [rank] * n,
        "step": _floats(df["Step Id"]) if "Step Id" in df else math.nan,
        "name": df["Name"],
        "type": df["Type"] if "Type" in df else "",
        "core": df["Accelerator Core"] if "Accelerator Core" in df else "",
        "stream": _floats(df["Stream ID"]) if "Stream ID" in df else math.nan,
        "start_ns": column_ns(df["Start Time(us)"]) if "Start Time(us)" in df else pd.NA,
        "dur_ms": _floats(df["Duration(us)"]) / US_PER_MS,
        "input_shapes": df["Input Shapes"].str.strip('"') if "Input Shapes" in df else "",
        "output_shapes": df["Output Shapes"].str.strip('"') if "Output Shapes" in df else "",
    })


def parse_op_statistic(path: Path, rank: int, problems: list) -> pd.DataFrame:
    df = _read_csv(path, problems)
    need = ["OP Type", "Count", "Total Time(us)"]
    if any(c not in df.columns for c in need):
        raise InputError(path, "not an op_statistic.csv: missing OP Type/Count/Total Time(us)")
    return pd.DataFrame({
        "rank": [rank] * len(df),
        "op_type": df["OP Type"],
        "core": df["Core Type"] if "Core Type" in df else "",
        "count": _floats(df["Count"]),
        "total_ms": _floats(df["Total Time(us)"]) / US_PER_MS,
        "avg_ms": _floats(df["Avg Time(us)"]) / US_PER_MS if "Avg Time(us)" in df else math.nan,
        "min_ms": _floats(df["Min Time(us)"]) / US_PER_MS if "Min Time(us)" in df else math.nan,
        "max_ms": _floats(df["Max Time(us)"]) / US_PER_MS if "Max Time(us)" in df else math.nan,
    })


def parse_memory_record(path: Path, rank: int, problems: list) -> pd.DataFrame:
    df = _read_csv(path, problems)
    if "Component" not in df.columns or "Total Reserved(MB)" not in df.columns:
        raise InputError(path, "not a memory_record.csv: missing Component/Total Reserved(MB)")
    def mib(col):
        return _floats(df[col]) * MIB_TO_MB if col in df.columns else math.nan
    return pd.DataFrame({
        "rank": [rank] * len(df), "component": df["Component"],
        "ts_ns": column_ns(df["Timestamp(us)"]),
        "allocated_mb": mib("Total Allocated(MB)"), "reserved_mb": mib("Total Reserved(MB)"),
        "active_mb": mib("Total Active(MB)"),
    })


def parse_npu_module_mem(path: Path, rank: int, problems: list) -> pd.DataFrame:
    df = _read_csv(path, problems)
    if "Component" not in df.columns or "Total Reserved(MB)" not in df.columns:
        raise InputError(path, "not an npu_module_mem.csv: missing Component/Total Reserved(MB)")
    return pd.DataFrame({"rank": [rank] * len(df), "component": df["Component"],
                         "ts_ns": column_ns(df["Timestamp(us)"]),
                         "reserved_mb": _floats(df["Total Reserved(MB)"]) * MIB_TO_MB})


def parse_operator_memory(path: Path, rank: int, problems: list) -> pd.DataFrame:
    df = _read_csv(path, problems)
    if "Name" not in df.columns or "Size(KB)" not in df.columns:
        raise InputError(path, "not an operator_memory.csv: missing Name/Size(KB)")
    return pd.DataFrame({
        "rank": [rank] * len(df), "name": df["Name"],
        "size_mb": _floats(df["Size(KB)"]) * KIB_TO_MB,
        "alloc_ns": column_ns(df["Allocation Time(us)"]) if "Allocation Time(us)" in df else pd.NA,
        "release_ns": column_ns(df["Release Time(us)"]) if "Release Time(us)" in df else pd.NA,
        "duration_ms": _floats(df["Duration(us)"]) / US_PER_MS if "Duration(us)" in df else math.nan,
    })


#: Tables parsed only when a section asks for them (large per-rank CSVs).
LAZY_TABLES = {"kernels", "op_stats", "memory_record", "module_mem", "operator_memory"}
#: the absolute-time column of each lazily parsed file (its first rows fix the run origin when nothing else has one)
LAZY_TIME_COLUMNS = {"kernels": "Start Time(us)", "memory_record": "Timestamp(us)", "module_mem": "Timestamp(us)",
                     "operator_memory": "Allocation Time(us)"}


def _first_times_ns(path: Path, table: str, rows: int = 64) -> pd.Series | None:
    """Exact ns of the time column in the first rows of a lazily parsed CSV (None if it has none)."""
    col = LAZY_TIME_COLUMNS.get(table)
    if col is None:
        return None
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False, nrows=rows, on_bad_lines="skip",
                         encoding="utf-8-sig", encoding_errors="replace")
    except (OSError, ValueError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return None
    df.columns = [c.strip() for c in df.columns]
    return column_ns(df[col]) if col in df.columns else None

#: ASCEND_PROFILER_OUTPUT file -> (table, parser). communication files are handled separately.
TEXT_FILES = {
    "step_trace_time.csv": ("step_time", parse_step_trace_time),
    "kernel_details.csv": ("kernels", parse_kernel_details),
    "op_statistic.csv": ("op_stats", parse_op_statistic),
    "memory_record.csv": ("memory_record", parse_memory_record),
    "npu_module_mem.csv": ("module_mem", parse_npu_module_mem),
    "operator_memory.csv": ("operator_memory", parse_operator_memory),
}


# --------------------------------------------------------------------------- discovery


@dataclass
class RankDir:
    path: Path
    rank: int | None
    rank_source: str
    framework: str  # torch_npu | mindspore
    stamp: str = ""
    info: dict = field(default_factory=dict)

    @property
    def output(self) -> Path:
        return self.path / OUTPUT_DIR


def _walk_prof_dirs(root: Path) -> list[Path]:
    found = []
    root_depth = len(root.parts)
    for dirpath, dirnames, _files in os.walk(root):
        p = Path(dirpath)
        if len(p.parts) - root_depth > _MAX_DEPTH:
            dirnames[:] = []
            continue
        if _PROF_DIR.search(p.name) or OUTPUT_DIR in dirnames:
            found.append(p)
            dirnames[:] = []  # a profiler dir does not nest another one
        else:
            dirnames.sort()
    return sorted(found)


def detect(root: Path) -> bool:
    return bool(_walk_prof_dirs(root))


def _host_from_name(path: Path) -> str | None:
    """torch_npu / MindSpore name their directory ``{hostname}_{pid}_{timestamp}_ascend_{pt|ms}``."""
    parts = path.name.split("_")
    if len(parts) >= 5 and parts[-3].isdigit() and len(parts[-3]) >= 8 and parts[-4].isdigit():
        return "_".join(parts[:-4]) or None
    return None


def _stamp(path: Path) -> str:
    parts = path.name.split("_")
    if len(parts) >= 3 and parts[-3].isdigit() and len(parts[-3]) >= 8:
        return parts[-3]
    try:
        return f"mtime:{int(path.stat().st_mtime_ns):020d}"
    except OSError:
        return ""


def _rank_dir(path: Path, problems: list) -> RankDir:
    framework = "mindspore" if path.name.endswith("ascend_ms") else "torch_npu"
    info, rank, source = {}, None, ""
    infos = sorted(p for p in path.glob("profiler_info*.json") if p.is_file())
    for p in infos:
        m = _INFO.match(p.name)
        try:
            info = _read_json(p) if not info else info
        except InputError as exc:
            problems.append((exc.path, exc.problem))
        if m:
            rank, source = int(m.group(1)), p.name
            break
    if rank is None and isinstance(info, dict) and str(info.get("rank_id", "")).strip().lstrip("-").isdigit():
        value = int(str(info["rank_id"]).strip())
        if value >= 0:
            rank, source = value, "rank_id in profiler_info.json"
    if rank is None:
        from .ascend_trace import rank_from_framework

        value = rank_from_framework(path)
        if value is not None:
            rank, source = value, "FRAMEWORK/ file suffix"
    if isinstance(info, dict) and "MindSpore" in json.dumps(info)[:4000]:
        framework = "mindspore"
    return RankDir(path, rank, source, framework, _stamp(path), info if isinstance(info, dict) else {})


# --------------------------------------------------------------------------- the reader


def choose_rank_dirs(root: Path, problems: list) -> dict[int, RankDir]:
    """One profiler directory per rank (module doc, "Discovery"); raises :class:`InputError` when none is usable."""
    dirs = [_rank_dir(p, problems) for p in _walk_prof_dirs(root)]
    if not dirs:
        raise InputError(root, "no *_ascend_pt / *_ascend_ms profiler directory found")
    if len(dirs) == 1 and dirs[0].rank is None:
        dirs[0].rank, dirs[0].rank_source = 0, "single profiler directory without a rank (taken as rank 0)"
    chosen: dict[int, RankDir] = {}
    for d in dirs:
        if d.rank is None:
            problems.append((str(d.path), "no rank found (no profiler_info_<rank>.json, no rank_id, no FRAMEWORK "
                                          "suffix); directory skipped"))
            continue
        other = chosen.get(d.rank)
        if other is None:
            chosen[d.rank] = d
            continue
        newer, older = (d, other) if d.stamp > other.stamp else (other, d)
        chosen[d.rank] = newer
        problems.append((str(older.path), f"rank {d.rank} also in {newer.path.name}, which is newer and was used; "
                                          f"this directory was skipped"))
    if not chosen:
        raise InputError(root, "profiler directories found, but none says which rank it is")
    return chosen


def read(root: Path, progress: Callable[[int, int], None] | None = None) -> Run:
    root = Path(root)
    problems: list[tuple[str, str]] = []
    chosen = choose_rank_dirs(root, problems)

    frameworks = {d.framework for d in chosen.values()}
    run = Run(name=root.resolve().name or str(root), source_format="ascend", source_path=str(root),
              layout=f"{'/'.join(sorted(frameworks))} Ascend profiler output: {len(chosen)} rank director"
                     f"{'y' if len(chosen) == 1 else 'ies'} (*_ascend_pt / *_ascend_ms)")

    # metadata: distributed args and the union of every rank's process groups
    dist_args: dict = {}
    group_info: dict[str, dict] = {}
    for rank, d in sorted(chosen.items()):
        meta_path = d.path / "profiler_metadata.json"
        if meta_path.is_file():
            try:
                meta = _read_json(meta_path)
            except InputError as exc:
                problems.append((exc.path, exc.problem + "; metadata ignored"))
                meta = {}
            if isinstance(meta, dict):
                _merge_metadata(meta.get("distributed_args"), meta.get("parallel_group_info"), dist_args, group_info)

    # per-rank files
    tables: dict[str, list] = {}
    files = []
    total = len(chosen)
    for n, (rank, d) in enumerate(sorted(chosen.items()), start=1):
        if progress:
            progress(n, total)
        _read_rank(d, rank, tables, files, problems)
        host = _host_from_name(d.path)
        if host:
            run.hosts[rank] = host
    lazy: dict[str, list] = {}
    for table, path, parser, rank in tables.pop("_lazy", []):
        lazy.setdefault(table, []).append((path, parser, rank))
    eager = [df for parts in tables.values() for df in parts if df is not None]
    t0 = origin(*(c for df in eager for c in abs_columns(df)))
    if t0 is None:  # absolute times only in the lazily parsed files: their first ones fix the origin
        t0 = origin(*(_first_times_ns(path, table) for table, items in lazy.items() for path, _p, _r in items))
    run.time_origin_ns = t0 if t0 is not None else 0
    for name, parts in tables.items():
        tables[name] = [to_rel_ms(df, run.time_origin_ns) if df is not None else None for df in parts]
    for table, items in lazy.items():
        run.loaders[table] = _lazy_loader(run, items, tables.pop(table, []))
    for name, parts in tables.items():
        parts = [p for p in parts if p is not None and not p.empty]
        if parts:
            run.tables[name] = pd.concat(parts, ignore_index=True)
    meta_rows = run.tables.pop("metadata", None)
    if meta_rows is not None:  # DB exports keep profiler_metadata.json in their META_DATA table
        for _, row in meta_rows.iterrows():
            try:
                value = json.loads(row["value"]) if isinstance(row["value"], str) else row["value"]
            except ValueError:
                continue
            if row["name"] == "distributed_args":
                _merge_metadata(value, None, dist_args, group_info)
            elif row["name"] == "parallel_group_info":
                _merge_metadata(None, value, dist_args, group_info)

    if "comm_bandwidth" in run.tables:
        run.tables["comm_bandwidth"] = sdma_remainder(run.tables["comm_bandwidth"])
    by_hash = _layout(run, chosen, dist_args, group_info, problems, root)
    _resolve_groups(run, by_hash, problems)
    have = set(run.tables["step_time"]["rank"]) if "step_time" in run.tables else set()
    if "trace_steps" in run.tables and "overlap_intervals" in run.tables:
        todo = run.tables["trace_steps"][~run.tables["trace_steps"]["rank"].isin(have)]
        if not todo.empty:
            derived = derive_step_time(todo, run.tables["overlap_intervals"], run.tables.get("hccl_ops"))
            if not derived.empty:
                run.tables["step_time"] = pd.concat([run.tables.get("step_time"), derived], ignore_index=True) \
                    if have else derived
                run.notes.append("Step times of rank(s) " + ", ".join(map(str, sorted(derived["rank"].unique()))) +
                                 " were derived from trace_view.json (Overlap Analysis), as torch_npu derives "
                                 "step_trace_time.csv; that file was absent.")
    if "step_time" in run.tables:
        whole_trace_steps(run)
        st = run.tables["step_time"].sort_values(["rank", "step"]).reset_index(drop=True)
        run.tables["step_time"] = st
        run.steps = sorted(st["step"].unique().tolist())
    run.tables["files"] = pd.DataFrame(files, columns=["rank", "kind", "path"])
    for path, problem in problems:
        run.problem(path, problem)
    return run


def whole_trace_steps(run: Run) -> None:
    """Step ids of ``step_time``: rows the profiler wrote without a step id (no schedule; :data:`NO_STEP_ID`) are the
    whole-trace window, step 0 (the key communication.json gives them too). ``run.step_source`` is ``whole_trace``
    when no row has an id, else ``markers``."""
    st = run.tables["step_time"]
    none = st["step"] == NO_STEP_ID
    run.step_source = "whole_trace" if none.all() else "markers"
    if none.any():
        run.tables["step_time"] = st.assign(step=st["step"].where(~none, 0))


def _merge_metadata(args, groups, dist_args: dict, group_info: dict) -> None:
    if isinstance(args, dict) and not dist_args:
        dist_args.update(args)
    if isinstance(groups, dict):
        for key, g in groups.items():
            if isinstance(g, dict) and isinstance(g.get("global_ranks"), list):
                group_info.setdefault(str(key), g)


def _layout(run: Run, chosen: dict, dist_args: dict, group_info: dict, problems: list, root: Path) -> dict:
    """Groups, world size, missing ranks, parallel sizes and pipeline stages; returns {hash: group row}."""
    groups = pd.DataFrame(
        [{"group": k, "name": str(g.get("group_name", "")), "kind": group_kind(str(g.get("group_name", ""))),
          "ranks": sorted(int(r) for r in g["global_ranks"]), "hash": str(double_hash(k))}
         for k, g in sorted(group_info.items())],
        columns=["group", "name", "kind", "ranks", "hash"])
    run.tables["groups"] = groups
    world = dist_args.get("world_size")
    expected: set[int] = set(range(int(world))) if isinstance(world, int) and world > 0 else set()
    for ranks in groups["ranks"]:
        expected.update(ranks)
    run.ranks = sorted(chosen)
    run.world_size = int(world) if isinstance(world, int) and world > 0 else (max(expected) + 1 if expected else None)
    run.missing_ranks = sorted(expected - set(chosen))

    par = {}
    for short, key in (("tp", "tensor_model"), ("pp", "pipeline_model"), ("dp", "data"), ("cp", "context"),
                       ("ep", "expert_model")):
        if isinstance(dist_args.get(f"{key}_parallel_size"), int):
            par[short] = dist_args[f"{key}_parallel_size"]
    stage_of: dict[int, int] = {}
    for row in groups.itertuples():
        if row.kind == "pp" and len(row.ranks) > 1:
            for i, r in enumerate(row.ranks):  # a rank's position in its pp group is its stage
                stage_of[r] = i + 1
    pp = par.get("pp") or (max(stage_of.values()) if stage_of else None)
    if pp:
        par["stages"] = pp
    if par:
        par["mode"] = "pipeline-parallel" if (pp or 1) > 1 else ("model-parallel" if par.get("tp", 1) > 1
                                                                  else "data-parallel")
    run.parallel = par
    run.stage_map = stage_of if stage_of and (pp or 1) > 1 else {}
    if (pp or 1) > 1 and not stage_of:
        problems.append((str(root), f"pipeline size {pp} but no pp groups in profiler_metadata.json: stages unknown"))
    return {row.hash: row for row in groups.itertuples()}


def _lazy_loader(run: Run, items: list, eager_parts: list):
    """Parse these files when first asked for; their problems join the run's data problems."""

    def load() -> pd.DataFrame | None:
        problems: list = []
        parts = [p for p in eager_parts if p is not None and not p.empty]
        for path, parser, rank in items:
            df = _guarded(path, problems, parser, rank, problems)
            if df is not None and not df.empty:
                parts.append(to_rel_ms(df, run.time_origin_ns))
        for path, problem in problems:
            run.problem(path, problem)
        return pd.concat(parts, ignore_index=True) if parts else None

    return load


def _guarded(path: Path, problems: list, fn, *args):
    """Run one file's parser; bad content becomes a data problem, never a crash of the whole run."""
    try:
        return fn(path, *args)
    except InputError as exc:
        problems.append((exc.path or str(path), exc.problem + "; file skipped"))
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        problems.append((str(path), f"unexpected content ({type(exc).__name__}: {str(exc)[:120]}); file skipped"))
    return None


def _read_rank(d: RankDir, rank: int, tables: dict, files: list, problems: list) -> None:
    out = d.output
    present = {p.name: p for p in out.iterdir()} if out.is_dir() else {}

    def add(name, df):
        if df is not None:
            tables.setdefault(name, []).append(df)

    for fname, (table, parser) in TEXT_FILES.items():
        p = present.get(fname)
        if p is None:
            continue
        files.append((rank, table, str(p)))
        if table in LAZY_TABLES:
            tables.setdefault("_lazy", []).append((table, p, parser, rank))
        else:
            add(table, _guarded(p, problems, parser, rank, problems))
    p = present.get("communication.json")
    if p is not None:
        files.append((rank, "communication", str(p)))
        both = _guarded(p, problems, parse_communication, rank, problems)
        if both is not None:
            add("comm_ops", both[0])
            add("comm_bandwidth", both[1])
    p = present.get("communication_matrix.json")
    if p is not None:
        files.append((rank, "communication_matrix", str(p)))
        add("comm_matrix", _guarded(p, problems, parse_matrix, rank, problems))
    p = present.get("trace_view.json")
    if p is not None:
        files.append((rank, "trace_view", str(p)))
        from .ascend_trace import read_trace_view

        for name, df in (_guarded(p, problems, read_trace_view, rank, problems) or {}).items():
            add(name, df)
    dbs = [q for n, q in present.items() if n.endswith(".db") or n.endswith(".dat")]
    if dbs:
        for q in dbs:
            files.append((rank, "db", str(q)))
        # what the DB export provides when the text file that carries it is absent
        counterpart = {"step_time": "step_trace_time.csv", "comm_ops": "communication.json",
                       "comm_bandwidth": "communication.json", "comm_matrix": "communication_matrix.json",
                       "kernels": "kernel_details.csv", "memory_record": "memory_record.csv",
                       "module_mem": "npu_module_mem.csv", "operator_memory": "operator_memory.csv",
                       "trace_steps": "trace_view.json", "overlap_intervals": "trace_view.json",
                       "hccl_ops": "trace_view.json", "device_ops": "trace_view.json",
                       "metadata": "../profiler_metadata.json"}
        wanted = {t for t, f in counterpart.items() if not (out / f).exists()}
        # the trace-level tables and the metadata live only in the profiler DB (ascend_*_profiler_N.db,
        # msprof_*.db): without one, asking for them would only list them as missing
        if not any("profiler" in q.name or q.name.startswith("msprof") for q in dbs):
            wanted -= {"trace_steps", "overlap_intervals", "hccl_ops", "device_ops", "metadata", "kernels",
                       "memory_record", "module_mem", "operator_memory"}
        if wanted:
            from .ascend_db import read_db_rank

            for name, df in read_db_rank(d.path, rank, wanted, problems).items():
                add(name, df)


def derive_step_time(steps: pd.DataFrame, intervals: pd.DataFrame, hccl: pd.DataFrame | None) -> pd.DataFrame:
    """step_time rows from the trace's Overlap Analysis intervals, torch_npu's way
    (``_trace_step_time_parser.py``): an interval belongs to the step in which it starts; each column is
    the sum of its kind's durations; Overlapped = Communication - Not Overlapped; Bubble = Σ hcom_receive
    ops; Stage = (last end - first start of the step's intervals) - Bubble; Preparing = first computing or
    communication start - step start. Used when step_trace_time.csv is absent."""
    rows = []
    kinds = {"computing": "computing_ms", "communication": "comm_ms", "comm_not_overlapped": "comm_not_overlapped_ms",
             "free": "free_ms"}
    for st in steps.itertuples():
        iv = intervals[(intervals["rank"] == st.rank) & (intervals["start_ms"] >= st.start_ms)
                       & (intervals["start_ms"] < st.end_ms)]
        if iv.empty:
            continue
        dur = (iv["end_ms"] - iv["start_ms"]).groupby(iv["kind"]).sum()
        row = {"rank": st.rank, "step": st.step, **{col: float(dur.get(k, 0.0)) for k, col in kinds.items()}}
        bubble = 0.0
        if hccl is not None:
            h = hccl[(hccl["rank"] == st.rank) & (hccl["start_ms"] >= st.start_ms) & (hccl["start_ms"] < st.end_ms)]
            bubble = float(h.loc[h["op"].str.lower().str.startswith("hcom_receive"), "dur_ms"].sum())
        work = iv[iv["kind"].isin(["computing", "communication"])]
        row.update(
            overlapped_ms=row["comm_ms"] - row["comm_not_overlapped_ms"], bubble_ms=bubble,
            stage_ms=float(iv["end_ms"].max() - iv["start_ms"].min()) - bubble,
            comm_not_overlapped_exclude_receive_ms=max(row["comm_not_overlapped_ms"] - bubble, 0.0),
            preparing_ms=float(work["start_ms"].min() - st.start_ms) if not work.empty else math.nan)
        row["step_ms"] = row["computing_ms"] + row["comm_not_overlapped_ms"] + row["free_ms"]
        rows.append(row)
    return pd.DataFrame(rows, columns=STEP_TIME_ORDER)


def sdma_remainder(bw: pd.DataFrame) -> pd.DataFrame:
    """Keep each byte once: the profiler's SDMA entry is the aggregate of HCCS + PCIE + SIO (+ links of
    unknown type), so it is replaced by what it holds beyond those three, and dropped when that is nothing.
    Afterwards the transports of one op can be summed."""
    if bw.empty:
        return bw
    keys = ["rank", "step", "kind", "op", "group_hash" if "group_hash" in bw.columns else "group"]
    links = (bw[bw["transport"].isin(["HCCS", "PCIE", "SIO"])].groupby(keys)[["size_mb", "time_ms"]].sum()
             .rename(columns={"size_mb": "size_mb_links", "time_ms": "time_ms_links"}).reset_index())
    sdma = bw[bw["transport"] == "SDMA"].merge(links, on=keys, how="left")
    sdma[["size_mb_links", "time_ms_links"]] = sdma[["size_mb_links", "time_ms_links"]].fillna(0.0)
    sdma["size_mb"] = sdma["size_mb"] - sdma["size_mb_links"]
    sdma["time_ms"] = sdma["time_ms"] - sdma["time_ms_links"]
    sdma = sdma[sdma["size_mb"] > 1e-9 * (sdma["size_mb"] + sdma["size_mb_links"]).clip(lower=1e-12)]
    sdma = sdma.assign(bandwidth_gbps=(sdma["size_mb"] / sdma["time_ms"]).where(sdma["time_ms"] > 0))
    rest = bw[bw["transport"] != "SDMA"]
    return pd.concat([rest, sdma[bw.columns]], ignore_index=True)


def _resolve_groups(run: Run, by_hash: dict, problems: list) -> None:
    """Group hashes -> group keys; matrix links group-local -> global ranks."""
    for name in ("comm_ops", "comm_bandwidth"):
        df = run.tables.get(name)
        if df is not None:
            df["group"] = [by_hash[h].group if h in by_hash else h for h in df["group_hash"]]
            run.tables[name] = df.drop(columns=["group_hash"])
    m = run.tables.get("comm_matrix")
    if m is None:
        return
    src, dst, keep = [], [], []
    dropped: dict[str, int] = {}
    # self-links i-i reported by rank R tell that local i is R in that group (msprof-analyze's fallback)
    self_map: dict[tuple[str, int], int] = {}
    for row in m[m["src_local"] == m["dst_local"]].itertuples():
        self_map.setdefault((row.group_hash, row.src_local), row.rank)
    for row in m.itertuples():
        g = by_hash.get(row.group_hash)
        if g is not None and row.src_local < len(g.ranks) and row.dst_local < len(g.ranks):
            s, t = g.ranks[row.src_local], g.ranks[row.dst_local]
        else:
            s, t = self_map.get((row.group_hash, row.src_local)), self_map.get((row.group_hash, row.dst_local))
        if s is None or t is None:
            dropped[row.group_hash] = dropped.get(row.group_hash, 0) + 1
            keep.append(False)
            src.append(-1)
            dst.append(-1)
        else:
            keep.append(True)
            src.append(int(s))
            dst.append(int(t))
    m = m.assign(src_rank=src, dst_rank=dst)[keep]
    for h, count in dropped.items():
        problems.append(("communication_matrix.json", f"{count} link entr{'y' if count == 1 else 'ies'} of group "
                         f"{h} dropped: the group's members are not in profiler_metadata.json and no rank "
                         f"reported a self-link for those indices"))
    m["group"] = [by_hash[h].group if h in by_hash else h for h in m["group_hash"]]
    run.tables["comm_matrix"] = m.drop(columns=["group_hash", "src_local", "dst_local"])[
        ["rank", "step", "kind", "op_type", "stat", "group", "src_rank", "dst_rank", "transport", "size_mb",
         "time_ms", "bandwidth_gbps", "op_name"]].reset_index(drop=True)
