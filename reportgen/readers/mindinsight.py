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

Bad input (issue 14): every number is parsed strictly (:func:`reportgen.limits.strict_float`); a row with a
refused cell (not a number, NaN/inf, negative, over a day, a timestamp beyond int64 ns), a truncated row and a
last line cut short are skipped and listed per file, line and column (:class:`reportgen.limits.Rejects`).
Rank and device ids in file names and fields are checked (:func:`reportgen.limits.rank_id`); two files of one
kind for one rank (``step_trace_raw_00_*`` beside ``step_trace_raw_0_*``) are a data problem and the name
without leading zeros is read. World-size and stage claims are checked against the ranks found
(:func:`reportgen.limits.world_size`); nothing is allocated from a claim.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple

import pandas as pd

from .. import limits
from ..errors import InputError
from ..frames import column_cells, frame_of_plain_rows, records, stack_rows
from ..limits import Rejects, as_int, finite_ms, strict_float
from ._files import CONTENT_ERRORS, read_csv, read_json, read_text as _read_text
from ..model import Run
from ..timebase import abs_columns, origin, to_ns, to_rel_ms

#: 10 ns system-counter ticks per millisecond.
TICKS_PER_MS = 1e5
NS_PER_TICK = 10
#: the highest step number taken as one (a larger step_num is not a step count)
MAX_STEP = 2**31 - 1
#: missing ranks listed one by one up to this many; more are a count in a data problem
_MAX_TICKS = ((1 << 63) - 1) // NS_PER_TICK  # a time point whose ns fit int64
_MAX_DUR_TICKS = limits.MAX_DURATION_MS * TICKS_PER_MS

# Rank groups take any digits (and a minus sign) so that a bad id in a file name is named, not ignored.
_ID = r"(-?\d+)"
#: Recognised per-rank files: kind -> pattern whose last group is the rank (device id in legacy).
FILE_PATTERNS: dict[str, re.Pattern] = {
    "step_trace": re.compile(rf"^step_trace_raw_{_ID}_detail_time\.csv$"),
    "cluster_analyse": re.compile(rf"^(?:ascend|gpu)_cluster_analyse_([a-z]+-parallel)_(\d+)_(\d+)_{_ID}\.csv$"),
    "hccl_raw": re.compile(rf"^hccl_raw_{_ID}\.csv$"),
    "flops_summary": re.compile(rf"^flops_summary_{_ID}\.json$"),
    "flops_detail": re.compile(rf"^flops_{_ID}\.txt$"),
    "flops_scope": re.compile(rf"^flops_scope_{_ID}\.json$"),
    "memory_usage_summary": re.compile(rf"^memory_usage_summary_{_ID}\.json$"),
    "memory_usage_details": re.compile(rf"^memory_usage_details_{_ID}\.json$"),
    "parallel_strategy": re.compile(rf"^parallel_strategy_{_ID}\.json$"),
    "profiler_info": re.compile(rf"^profiler_info_{_ID}\.json$"),
    "timeline_display": re.compile(rf"^(?:ascend|gpu)_timeline_display_{_ID}\.json$"),
    "timeline_summary": re.compile(rf"^(?:ascend|gpu)_timeline_summary_{_ID}\.json$"),
    "op_intermediate_detail": re.compile(rf"^aicore_intermediate_{_ID}_detail\.csv$"),
    "op_intermediate_type": re.compile(rf"^aicore_intermediate_{_ID}_type\.csv$"),
    "framework_raw": re.compile(rf"^framework_raw_{_ID}\.csv$"),
    "dynamic_shape": re.compile(rf"^dynamic_shape_info_{_ID}\.json$"),
}

_BASE_COLUMNS = (
    "step_num", "start_point", "end_point", "total", "fp_point", "bp_point",
    "iteration_interval", "fp_and_bp", "tail",
)
_TIME_POINTS = ("start_point", "end_point", "fp_point", "bp_point")  # absolute ticks
_DURATIONS = ("total", "iteration_interval", "fp_and_bp", "tail")  # ticks

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



def step_op_type(ops: pd.Series) -> pd.Series:
    """The operator type of the step trace's op columns: ``stream_<s>_<i>_<Type>-op<N>`` -> ``<Type>`` (the
    family's naming rule, written once here; ``step_ops.op_type``). Each distinct name is rewritten once (a run
    repeats its few op names on every rank and step: 614,400 rows of ~20 names at 1,024 ranks x 30 steps)."""
    names = ops.astype(str)
    codes, uniques = pd.factorize(names)  # (a missing name: code -1, given back missing by take)
    types = (pd.Series(uniques).str.replace(r"^stream_\d+_\d+_", "", regex=True)
             .str.replace(r"-op\d+$", "", regex=True))
    return pd.Series(types.array.take(codes, allow_fill=True), index=names.index, name=names.name)

#: file kind -> "module:function" parsing one file into {table: DataFrame} (or {table: [row dict]}: the one-row
#: summaries, made into one frame for all ranks); the function takes (path, rank, problems). Modules are imported lazily; a missing module means the kind is only listed.
EXTRA_PARSERS = {
    "memory_usage_summary": "reportgen.readers.mindinsight_memory:memory_summary_rows",
    "memory_usage_details": "reportgen.readers.mindinsight_memory:parse_memory_details",
    "flops_summary": "reportgen.readers.mindinsight_flops:flops_summary_rows",
    "flops_detail": "reportgen.readers.mindinsight_flops:parse_flops_detail",
    "parallel_strategy": "reportgen.readers.mindinsight_strategy:parse_parallel_strategy",
    "timeline_display": "reportgen.readers.mindinsight_timeline:parse_timeline_display",
    "dynamic_shape": "reportgen.readers.mindinsight:parse_dynamic_shape",
}


#: hccl_raw tables (:mod:`reportgen.readers.mindinsight_hccl` names) stored under a canonical name that sections of
#: every family read (:mod:`reportgen.schema`); the others keep the family prefix ``mi_`` (their canonical forms,
#: ``comm_ops`` / ``comm_rank_step`` / ``comm_rank_avg`` / ``comm_links_local``, are made by readers/comm.py)
HCCL_CANONICAL: dict[str, str] = {}
#: canonical tables the extra parsers write (no family prefix)
CANONICAL_TABLES = frozenset({*HCCL_CANONICAL.values(), "strategy_ops", "strategy_pairs", "op_type_steps"})


#: operator types kept per rank in op_type_steps (the most time; the rest summed as "(other types)")
MAX_DYNAMIC_TYPES = 50


def parse_dynamic_shape(path, rank: int, problems: list) -> dict[str, pd.DataFrame]:
    """``dynamic_shape_info_{rank}.json`` (MindSpore's dynamic-shape profile: ``operator`` = {step: [{step, op_side,
    op_type, op_name, dur (us), shape_info}]}) -> ``op_type_steps``: per step and operator type the calls and summed
    time (the per-iteration op time of a dynamic-shape network; the kernel part of the file is not read)."""
    from ._files import read_json

    try:
        d = read_json(path)
    except InputError as exc:
        problems.append((str(path), exc.problem + "; file skipped"))
        return {}
    ops = d.get("operator") if isinstance(d, dict) else None
    if not isinstance(ops, dict):
        problems.append((str(path), "no operator object (not a dynamic shape profile); file skipped"))
        return {}
    rows, bad = [], 0
    for key, items in list(ops.items())[:100_000]:
        for it in items if isinstance(items, list) else []:
            step = limits.as_int(it.get("step", key)) if isinstance(it, dict) else None
            dur = it.get("dur") if isinstance(it, dict) else None
            if step is None or isinstance(dur, bool) or not isinstance(dur, (int, float)) or not 0 <= dur < 8.64e10:
                bad += 1
                continue
            rows.append((step, limits.cap_text(str(it.get("op_type", "")), 200), dur / 1000.0))
    if bad:
        problems.append((str(path), f"{bad} operator record(s) without a step or a duration skipped"))
    if not rows:
        return {}
    df = pd.DataFrame(rows, columns=["step", "op_type", "dur_ms"])
    top = df.groupby("op_type")["dur_ms"].sum().nlargest(MAX_DYNAMIC_TYPES).index
    df.loc[~df["op_type"].isin(top), "op_type"] = "(other types)"
    out = df.groupby(["step", "op_type"], as_index=False).agg(count=("dur_ms", "size"), total_ms=("dur_ms", "sum"))
    out.insert(0, "rank", rank)
    out["step"] = out["step"].astype("int64")
    out["count"] = out["count"].astype("int64")
    return {"op_type_steps": out}


def _hccl_table(name: str) -> str:
    """The run's table name of hccl_raw table ``name``."""
    return HCCL_CANONICAL.get(name, "mi_" + name)


def _hccl_name(table: str) -> str:
    """The hccl_raw table name of the run's table ``table`` (inverse of :func:`_hccl_table`)."""
    return next((h for h, t in HCCL_CANONICAL.items() if t == table), table[len("mi_"):])


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


class Problems(list):
    """The reader's ``(path, problem)`` list, bounded whatever the input: past ``10 x MAX_PROBLEMS`` entries
    further problems are only counted (``unlisted``), as :meth:`Run.problem` does."""

    unlisted = 0

    def append(self, item) -> None:
        if len(self) < 10 * limits.MAX_PROBLEMS:
            super().append(item)
        else:
            self.unlisted += 1

    def add(self, path, problem: str) -> None:
        self.append((str(path), problem))


@dataclass
class FoundFile:
    kind: str
    path: Path
    key: int | None  # rank (flat) or device id (legacy), from the file name; None when not a valid id
    rank: int | None = None
    meta: dict = field(default_factory=dict)
    key_text: str = ""  # the id as written in the name
    rank_from: str = "the file name"  # where the rank comes from


# --------------------------------------------------------------------------- discovery


def classify(path: Path) -> FoundFile | None:
    for kind, pat in FILE_PATTERNS.items():
        m = pat.match(path.name)
        if m:
            meta = {}
            if kind == "cluster_analyse":
                meta = {"mode": m.group(1), "stages": m.group(2), "world_size": m.group(3)}
            text = m.group(m.lastindex)
            key = as_int(text) if text.isascii() else None
            return FoundFile(kind, path, key if key is not None and 0 <= key < limits.MAX_RANKS else None,
                             meta=meta, key_text=text)
    return None


def scan(folder: Path) -> list[FoundFile]:
    found = []
    try:
        entries = sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError:
        return found
    for p in entries:
        if p.is_file():
            f = classify(p)
            if f:
                found.append(f)
    return found


def _checked(files: list[FoundFile], problems: Problems, what: str = "rank id") -> list[FoundFile]:
    """The files whose id (from the name) is a valid rank/device number, one per kind and id.

    A bad id is named and the file ignored. Two files of one kind for one id (``step_trace_raw_0_*`` and
    ``step_trace_raw_00_*``) are a data problem: the one whose name writes the id without leading zeros is
    read, else the first by name."""
    ok = []
    for f in files:
        if f.key is None:
            limits.rank_id(f.key_text, f.path, problems.add, what=f"{what} in the file name")
        else:
            ok.append(f)
    chosen: dict[tuple[str, int], FoundFile] = {}
    for f in ok:
        first = chosen.get((f.kind, f.key))
        if first is None:
            chosen[(f.kind, f.key)] = f
        elif f.key_text == str(f.key) and first.key_text != str(first.key):
            chosen[(f.kind, f.key)] = f
    for f in ok:
        win = chosen[(f.kind, f.key)]
        if win is not f:
            why = "its name writes the id without leading zeros" if win.key_text == str(win.key) and \
                f.key_text != str(f.key) else "the first by name"
            problems.add(f.path, f"duplicate: a second {f.kind} file for {what.split()[0]} {f.key}: {win.path.name} is read "
                                 f"({why}); this file skipped")
    return [f for f in ok if chosen[(f.kind, f.key)] is f]


def detect(root: Path) -> bool:
    """True when ``root`` looks like MindSpore Insight cluster output (either layout)."""
    try:
        return flat_folder(root) is not None or (root / "cluster_profiler").is_dir()
    except OSError:
        return False


def flat_folder(root: Path) -> Path | None:
    if scan(root):
        return root
    subs = sorted((p for p in root.iterdir() if p.is_dir() and p.name.startswith("profiler")), key=lambda p: p.name)
    for sub in reversed(subs):
        if scan(sub):
            return sub
    return None


def _legacy_rank_table(root: Path) -> tuple[Path | None, InputError | None]:
    """(the rank table, None), or (None, why the likeliest candidate could not be used): the first ``*.json``
    beside ``cluster_profiler/`` holding a ``server_list``; a broken ``hccl*.json`` is the one to name."""
    if not (root / "cluster_profiler").is_dir():
        return None, None
    broken = None
    for p in sorted(root.glob("*.json"), key=lambda p: p.name):
        try:
            doc = read_json(p)
        except InputError as exc:
            if broken is None or (p.name.startswith("hccl") and not Path(broken.path).name.startswith("hccl")):
                broken = exc
            continue
        if isinstance(doc, dict) and "server_list" in doc:
            return p, None
        if p.name.startswith("hccl") and (broken is None or not Path(broken.path).name.startswith("hccl")):
            broken = InputError(p, f"not a rank table: {_json_kind(doc)} without a server_list")
    return None, broken


# --------------------------------------------------------------------------- parsing


def _json_kind(v) -> str:
    """What a JSON value is, with its article: "an object", "a list", ..."""
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(v), "a number")


def _cell_reason(text: str) -> str:
    """Why a cell that is not a strict number is refused."""
    return "missing" if not text.strip() else "not a number"


def _consistent(a: float, b: float) -> bool:
    """Two tick values that must agree (a written duration and its end - start): within 2 ticks (the file's
    own rounding of averages) or 1e-6 relative. A cut cell (a prefix) is off by a factor of 10 or more."""
    return abs(a - b) <= max(2.0, 1e-6 * abs(b))


@dataclass
class StepTrace:
    rows: list[dict]  # per step: durations in ms, start_ns / end_ns exact (absolute ticks x 10)
    average: dict | None  # the file's own average row, ms
    ops: list[tuple]  # (step, op, stream, start_ns, end_ns, dur_ms)


def _step_values(r: list[str], index: dict[str, int]) -> tuple[dict | None, str, str]:
    """The base columns of one row in ticks (durations) and exact ns (time points): (values, "", "") or
    (None, column, reason) for the first refused cell."""
    vals: dict = {}
    for c in _BASE_COLUMNS[1:]:
        text = r[index[c]]
        v = strict_float(text)
        if v is None:
            return None, c, _cell_reason(text)
        if c in _DURATIONS:
            reason = finite_ms(v / TICKS_PER_MS)
        else:
            reason = finite_ms(v, limit=math.inf)
            if reason is None and to_ns(text, NS_PER_TICK) is None:
                reason = "beyond the int64 ns range"
        if reason:
            return None, c, reason
        vals[c] = v
    return vals, "", ""


def _op_value(r: list[str], i_start: int, i_end: int, i_dur: int) -> tuple[tuple | None, tuple | None]:
    """One communication op of a row: ((start_ns, end_ns, dur_ticks), None), (None, None) when it did not run
    (empty or 0/0), or (None, (index of the refused cell, reason))."""
    ts, te, td = r[i_start], r[i_end], r[i_dur]
    if ts.isascii() and ts.isdigit() and te.isascii() and te.isdigit() and td.isascii() and td.isdigit():
        start, end, dur = int(ts), int(te), int(td)  # the usual op, fast: whole ticks
        if start == 0 and end == 0:
            return None, None
        if start <= end <= _MAX_TICKS and dur <= _MAX_DUR_TICKS:
            return (start * NS_PER_TICK, end * NS_PER_TICK, float(dur)), None
    if not (ts.strip() or te.strip()):
        return None, None
    start, end = strict_float(ts), strict_float(te)
    for i, text, v in ((i_start, ts, start), (i_end, te, end)):
        if v is None:
            return None, (i, _cell_reason(text))
        reason = finite_ms(v, limit=math.inf)
        if reason:
            return None, (i, reason)
    if start == 0 and end == 0:
        return None, None
    start_ns, end_ns = to_ns(ts, NS_PER_TICK), to_ns(te, NS_PER_TICK)
    if start_ns is None or end_ns is None:
        return None, (i_start if start_ns is None else i_end, "beyond the int64 ns range")
    if end < start:
        return None, (i_end, "ends before it starts")
    dur = end - start if not td.strip() else strict_float(td)
    if dur is None:
        return None, (i_dur, "not a number")
    reason = finite_ms(dur / TICKS_PER_MS)
    if reason:
        return None, (i_dur, reason)
    return (start_ns, end_ns, dur), None


def parse_step_trace(path: Path, problems: list[tuple[str, str]]) -> StepTrace:
    """Parse ``step_trace_raw_{rank}_detail_time.csv`` completely.

    Columns by name (never position): the nine base columns, then communication-op column
    triples in either naming generation — ``<op>, <op>_start_point, <op>_end_point`` (MindSpore
    >= 1.x, duration first) or ``stream_S_parallel_K_start_point, ..._end_point, stream_S_parallel_K``
    (older, duration last). Rows: one per step, then the average row (``step_num`` ``-``; in some
    old files a last row with ``step_num`` 0). An op whose start and end are both 0 did not run
    in that step.

    Strict (issue 14): a row with a refused base cell, a truncated row, and a last line cut short are
    skipped; a refused op cell drops that op of that step. MindSpore ends every row with a line break, so a
    file that does not is cut: its last row is read only when its cells agree with each other (total =
    end - start, fp_and_bp = bp - fp, tail = end - bp, each op's duration = its end - start), which a
    cut (prefix) last cell does not.
    """
    rejects = Rejects()
    table = read_csv(path)
    header = table.header
    index: dict[str, int] = {}
    for i, h in enumerate(header):
        if h:
            index.setdefault(h, i)
    missing = [c for c in _BASE_COLUMNS if c not in index]
    if missing:
        raise InputError(path, f"not a step trace: missing column(s) {', '.join(missing)}")
    dups = table.duplicates()
    base_dups = [d for d in dups if d in _BASE_COLUMNS]
    if base_dups:
        raise InputError(path, f"column(s) {', '.join(base_dups)} named twice in the header (which one holds the "
                               f"value is unknown)")
    op_cols = []
    for h, i in index.items():
        if h.endswith("_start_point") and h not in ("start_point",):
            base = h[: -len("_start_point")]
            if base in index and base + "_end_point" in index and base not in _BASE_COLUMNS:
                if {base, h, base + "_end_point"} & set(dups):
                    continue
                m = _STREAM.match(base)
                op_cols.append((limits.cap_text(base), int(m.group(1)) if m and m.group(1).isascii() else None,
                                i, index[base + "_end_point"], index[base]))
    if dups and len(dups) != len(base_dups):
        problems.append((str(path), f"op column(s) {', '.join(d for d in dups if d not in _BASE_COLUMNS)[:200]} "
                                    f"named twice in the header; those ops ignored"))
    rows, ops, average = [], [], None
    seen = set()
    last_line = table.rows[-1][0] if table.rows else None
    base_end = max(index[c] for c in _BASE_COLUMNS)
    for n, r in table.rows:
        last = n == last_line
        vals, col, reason = _step_values(r, index) if len(r) > base_end else (None, "", "")
        if reason:
            rejects.add(path, n, f"column '{col}'", reason)
            continue
        shape = table.shape_problem(n, r)
        if shape:
            rejects.add(path, n, *shape)
            continue
        step_text = r[index["step_num"]].strip()
        is_avg = step_text == "-" or (last and step_text == "0")
        step = None
        if not is_avg:
            step = as_int(step_text) if step_text.isascii() and step_text.isdigit() else None
            if step is None or step > MAX_STEP:
                rejects.add(path, n, "column 'step_num'", f"not a step number (0..{MAX_STEP})")
                continue
        row_ops, bad_ops = [], []
        check_cut = last and not table.complete
        for name, stream, i_start, i_end, i_dur in (op_cols if not is_avg or check_cut else ()):
            op, bad = _op_value(r, i_start, i_end, i_dur)
            if bad:
                bad_ops.append((f"column '{header[bad[0]]}'", bad[1]))
            elif op is not None:
                row_ops.append((name, stream, *op))
        if check_cut and (bad_ops or not _row_consistent(vals, row_ops)):
            rejects.add(path, n, "last line", "truncated (no line break at the end of the file, and its cells "
                                              "disagree: the last one is cut)")
            continue
        for column, reason in bad_ops:
            rejects.add(path, n, column, reason, action="value skipped")
        ms = {
            "step_ms": vals["total"] / TICKS_PER_MS,
            "step_interval_ms": vals["iteration_interval"] / TICKS_PER_MS,
            "fp_bp_ms": vals["fp_and_bp"] / TICKS_PER_MS,
            "tail_ms": vals["tail"] / TICKS_PER_MS,
            "start_ns": to_ns(r[index["start_point"]], NS_PER_TICK),
            "end_ns": to_ns(r[index["end_point"]], NS_PER_TICK),
        }
        if is_avg:
            average = ms
            continue
        if step in seen:
            problems.append((str(path), f"line {n}: step {step} appears again; the first row was kept"))
            continue
        seen.add(step)
        ms["step"] = step
        rows.append(ms)
        ops.extend((step, name, stream, s_ns, e_ns, dur / TICKS_PER_MS) for name, stream, s_ns, e_ns, dur in row_ops)
    rejects.flush(lambda p, t: problems.append((p, t)))
    if not rows and average is None:
        raise InputError(path, "no step rows" + (" left (see the rows skipped)" if table.rows else ""))
    return StepTrace(rows, average, ops)


def _row_consistent(vals: dict, row_ops: list[tuple]) -> bool:
    """The identities of a step trace row (see :func:`parse_step_trace`); a check with a 0 time point (a
    point not recorded) is left out."""
    s, e, fp, bp = (vals[c] for c in _TIME_POINTS)
    checks = [(vals["total"], e - s, (s, e)), (vals["fp_and_bp"], bp - fp, (fp, bp)), (vals["tail"], e - bp, (e, bp))]
    checks += [(dur, (e_ns - s_ns) / NS_PER_TICK, (s_ns, e_ns)) for _n, _st, s_ns, e_ns, dur in row_ops]
    return all(_consistent(a, b) for a, b, points in checks if all(points))


def parse_cluster_analyse(path: Path, problems: list[tuple[str, str]]) -> tuple[list[dict], dict | None]:
    """Parse ``ascend_cluster_analyse_{mode}_{stages}_{size}_{rank}.csv`` (values in ms).

    One row per step in file order (MindInsight selects steps by row index), the last row is
    the average over steps. A file with a single row is both step 1 and the average. A refused row keeps
    its place: the steps after it keep their numbers.
    """
    table = read_csv(path)
    header = table.header
    cols = {i: _OVERLAP_COLUMNS[h] for i, h in enumerate(header) if h in _OVERLAP_COLUMNS}
    if not cols:
        problems.append((str(path), f"header {','.join(header)[:80]!r} has no computation/communication columns; ignored"))
        return [], None
    named = list(cols.values())
    dups = sorted({c for c in named if named.count(c) > 1})
    if dups:
        names = [h for h in header if h in _OVERLAP_COLUMNS and _OVERLAP_COLUMNS[h] in dups]
        raise InputError(path, f"column(s) {', '.join(names)} give the same value twice in the header (which one "
                               f"holds it is unknown)")
    rejects = Rejects()
    values: list[dict | None] = []
    for n, r in table.rows:
        shape = table.shape_problem(n, r)
        if shape:
            rejects.add(path, n, *shape)
            values.append(None)
            continue
        row = {}
        for i, name in cols.items():
            v = strict_float(r[i])
            reason = _cell_reason(r[i]) if v is None else finite_ms(v)
            if reason:
                rejects.add(path, n, f"column '{header[i]}'", reason)
                row = None
                break
            row[name] = v
        values.append(row)
    if not table.complete and len(values) >= 2 and values[-1] is not None:
        # MindSpore ends these files with a line break except when it writes a single row (mi_run_4): a last row
        # after step rows with none may be cut anywhere, even inside the range of the steps ("6.4857" -> "6")
        why = "its average lies outside the range of the steps: a cut value" if not _within_steps(values) else \
            "so its last cell may be cut; not used"
        rejects.add(path, table.rows[-1][0], "last line", f"truncated (no line break at the end of the file, {why})")
        values[-1] = None
    rejects.flush(lambda p, t: problems.append((p, t)))
    if not values:
        return [], None
    steps, avg = (values, values[0]) if len(values) == 1 else (values[:-1], values[-1])
    out = [dict(v, step=i + 1) for i, v in enumerate(steps) if v is not None]
    return out, (dict(avg) if avg is not None else None)


def _within_steps(values: list[dict | None]) -> bool:
    """True when the last row (the average) lies within the range of the step rows in every column (1e-4 ms
    slack for its rounding): a cut last cell (a prefix, 10x smaller or more) usually does not."""
    steps = [v for v in values[:-1] if v is not None]
    if not steps:
        return True
    return all(min(v[k] for v in steps) - 1e-4 <= x <= max(v[k] for v in steps) + 1e-4 for k, x in values[-1].items())


def parse_profiler_info(path: Path) -> dict:
    doc = read_json(path)
    if not isinstance(doc, dict):
        raise InputError(path, f"expected a JSON object, not {_json_kind(doc)}")
    return doc


# --------------------------------------------------------------------------- legacy layout


@dataclass
class RankTable:
    path: Path
    rank_of: dict[tuple[str, int], int]  # (server_id, device_id) -> rank
    world_size: int


def parse_rank_table(path: Path, problems: list | None = None, text: str | None = None) -> RankTable:
    """HCCL rank table (``hccl.json``): ``server_list[].device[] = {device_id, device_ip, rank_id}``.

    The table itself must be a JSON object with a ``server_list`` list (else :class:`InputError`). An entry of
    the wrong shape, a device or rank id that is not a number in ``0..MAX_RANKS-1``, a rank id beyond the
    devices the table lists, a device listed twice and a rank given to two devices are data problems (the first
    entry is used); the table must keep one device. Its world size is the number of devices it lists."""
    own: list = []  # the first problem and how many there were

    def add(p, text: str) -> None:
        own[:] = [own[0] if own else text, (own[1] if own else 0) + 1]
        if problems is not None:
            problems.append((str(p), text))

    doc = read_json(path) if text is None else _loads(path, text)
    if not isinstance(doc, dict) or "server_list" not in doc:
        raise InputError(path, f"not a rank table: expected a JSON object with a server_list, found "
                               f"{_json_kind(doc)}{'' if not isinstance(doc, dict) else ' without one'}")
    servers = doc["server_list"]
    if not isinstance(servers, list):
        raise InputError(path, f"server_list is {_json_kind(servers)}, not a list of servers")
    rank_of: dict[tuple[str, int], int] = {}
    owner: dict[int, tuple[str, int]] = {}
    listed = sum(len(sv["device"]) for sv in servers if isinstance(sv, dict) and isinstance(sv.get("device"), list))
    for i, server in enumerate(servers):
        where = f"server_list[{i}]"
        if not isinstance(server, dict):
            add(path, f"{where} is {_json_kind(server)}, not a server object; ignored")
            continue
        sid = server.get("server_id")
        if isinstance(sid, bool) or not isinstance(sid, (str, int)):
            add(path, f"{where}.server_id is {'missing' if sid is None else _json_kind(sid)}; server ignored")
            continue
        sid = limits.cap_text(str(sid).strip(), 256)
        devices = server.get("device")
        if not isinstance(devices, list):
            add(path, f"{where}.device is {'missing' if devices is None else _json_kind(devices)}, not a "
                      f"list; server {sid!r} ignored")
            continue
        for j, dev in enumerate(devices):
            w = f"{where}.device[{j}]"
            if not isinstance(dev, dict):
                add(path, f"{w} is {_json_kind(dev)}, not a device object; ignored")
                continue
            device = limits.rank_id(dev.get("device_id"), path, add, what=f"{w}.device_id")
            rank = limits.rank_id(dev.get("rank_id"), path, add, what=f"{w}.rank_id") if device is not None else None
            if device is None or rank is None:
                continue
            if rank >= listed:
                add(path, f"{w}.rank_id {rank} is outside 0..{listed - 1} (the table lists {listed} devices); ignored")
                continue
            if (sid, device) in rank_of:
                add(path, f"{w}: device {device} of server {sid!r} is listed again; its first entry (rank "
                          f"{rank_of[(sid, device)]}) is used")
                continue
            if rank in owner:
                s0, d0 = owner[rank]
                add(path, f"{w}: rank {rank} is given to device {d0} of server {s0!r} and again to device {device} "
                          f"of server {sid!r}; the first is used, this device ignored")
                continue
            rank_of[(sid, device)] = rank
            owner[rank] = (sid, device)
    if not rank_of:
        why = f": {own[0]}" + (f" (and {own[1] - 1} more problems)" if own[1] > 1 else "") if own else ""
        raise InputError(path, f"rank table lists no usable device (server_list[].device[] with numeric device_id "
                               f"and rank_id){why}")
    return RankTable(path, rank_of, listed)


def _loads(path: Path, text: str):
    """JSON ``text`` (the file at ``path`` read earlier, or carried in a .reduced file), as :func:`read_json`."""
    from ._files import loads

    return loads(text, path)


def parse_host_mapping(path: Path) -> dict[str, str]:
    """``host_ips_mapping.txt``: one ``<host ip> <mapped name>`` pair per line -> {mapped: ip}. A name mapped to
    two IPs, or an IP to two names, makes which host folder holds which devices unknown: :class:`InputError` naming
    both lines (before, the last line won and one host's devices became another's ranks: issue 29)."""
    mapping: dict[str, str] = {}
    line_of: dict[tuple[str, str], int] = {}
    for n, line in enumerate(_read_text(path).splitlines(), start=1):
        parts = line.split()
        if len(parts) < 2:
            continue
        ip, name = limits.cap_text(parts[0], 256), limits.cap_text(parts[1], 256)
        for key, other in ((("name", name), mapping.get(name)), (("ip", ip), next(
                (m for m, i in mapping.items() if i == ip), None))):
            if other is not None and (key[0] == "name" and other != ip or key[0] == "ip" and other != name):
                first = line_of[key]
                what = (f"maps two IPs ({other}, {ip}) to the host name {name!r}" if key[0] == "name"
                        else f"maps the IP {ip} to two host names ({other!r}, {name!r})")
                raise InputError(path, f"{what} (lines {first} and {n}): which host folder holds which devices is "
                                       "unknown")
        mapping[name] = ip
        line_of.setdefault(("name", name), n)
        line_of.setdefault(("ip", ip), n)
    return mapping


# --------------------------------------------------------------------------- the reader


def _stage_count(text, world: int | None, path, problems: Problems) -> int | None:
    """A stage count claimed by ``path`` (file name or profiler_info), checked against the world size."""
    n = as_int(text)
    if n is None or not 1 <= n <= limits.MAX_RANKS or (world and (n > world or world % n)):
        size = f" of the world size {world}" if world else ""
        problems.add(path, f"stage count {limits.cap_text(repr(text), 40)} is not a whole divisor{size}; "
                           f"no stages assumed")
        return None
    return n


#: which world-size claim is used when several files make one
_CLAIM_ORDER = "a rank table is preferred to the cluster_analyse file name, and that to profiler_info's rank_size"


def _check_info(f: FoundFile, info: dict, run: Run, problems: Problems) -> None:
    """profiler_info's own rank and parallel mode, checked (the rank of the file is its name's)."""
    if "rank_id" in info and f.rank is not None:
        rank = limits.rank_id(info["rank_id"], f.path, problems.add, what="rank_id")
        if rank is not None and rank != f.rank:
            problems.add(f.path, f"rank_id {rank} differs from the rank {f.rank} of {f.rank_from}; that is used")
    mode = info.get("parallel_mode")
    if isinstance(mode, str) and mode:
        run.parallel.setdefault("framework_mode", limits.cap_text(mode, 80))
    elif mode:
        problems.add(f.path, f"parallel_mode is {_json_kind(mode)}, not text; ignored")


def _read_file(f: FoundFile, problems: Problems, out: dict) -> None:
    """Parse one per-rank file into ``out`` (lists of rows / tables by name)."""
    if f.kind == "step_trace":
        st = parse_step_trace(f.path, problems)
        out["step_rows"].extend(dict(r, rank=f.rank) for r in st.rows)
        if st.average is not None:
            out["avg_rows"].append(dict(st.average, rank=f.rank))
        else:
            problems.add(f.path, "no average row ('-'); the average is computed from the step rows")
        out["op_rows"].extend((f.rank,) + o for o in st.ops)
    elif f.kind == "cluster_analyse":
        rows, avg = parse_cluster_analyse(f.path, problems)
        out["ov_rows"].extend(dict(r, rank=f.rank) for r in rows)
        if avg is not None:
            out["ov_avg_rows"].append(dict(avg, rank=f.rank))
    elif f.kind == "hccl_raw":
        from .mindinsight_hccl import parse_hccl_columns

        parsed = parse_hccl_columns(f.path, f.rank, problems)
        if parsed["columns"]:
            out["generations"].add(parsed["generation"])
        for name, cols in parsed["columns"].items():  # columns: one frame per table for all ranks (read())
            out["tables"].setdefault(_hccl_table(name), []).append(cols)
    elif _extra_parser(f.kind) is not None:
        for name, df in (_extra_parser(f.kind)(f.path, f.rank, problems) or {}).items():
            out["tables"].setdefault(name, []).append(df)
    elif f.kind == "profiler_info":
        out["info"].append((f, parse_profiler_info(f.path)))


def _legacy_files(root: Path, table: RankTable, problems: Problems, hosts: dict, devices: dict) -> list[FoundFile]:
    mapping_path = root / "host_ips_mapping.txt"
    mapped_to_ip: dict[str, str] = {}
    bad_mapping = False
    if mapping_path.is_file():
        try:
            mapped_to_ip = parse_host_mapping(mapping_path)
        except InputError as exc:
            problems.add(exc.path or mapping_path, exc.problem + "; the file was ignored, host folders were "
                                                                 "matched to rank-table server ids by name")
            mapped_to_ip = {}
            bad_mapping = True
    if not mapped_to_ip and not bad_mapping:
        problems.add(mapping_path, "host_ips_mapping.txt missing or empty; host folders were matched to rank-table "
                                   "server ids by name")
    files: list[FoundFile] = []
    for host_dir in sorted((root / "cluster_profiler").iterdir(), key=lambda p: p.name):
        if not host_dir.is_dir():
            continue
        folder = host_dir / "profiler" if (host_dir / "profiler").is_dir() else host_dir
        ip = mapped_to_ip.get(host_dir.name, host_dir.name)
        for f in _checked(scan(folder), problems, what="device id"):
            rank = table.rank_of.get((ip, f.key))
            if rank is None:
                problems.add(f.path, f"device {f.key} of host {limits.cap_text(host_dir.name, 256)} is not in the "
                                     f"rank table; skipped")
                continue
            if hosts.get(rank, host_dir.name) != host_dir.name:
                problems.add(f.path, f"rank {rank} already has files in cluster_profiler/{hosts[rank]}/ (the rank "
                                     f"table maps both host folders to one server); this file skipped")
                continue
            f.rank = rank
            f.rank_from = f"the rank table (device {f.key})"
            hosts[rank] = host_dir.name
            devices[rank] = f.key
            files.append(f)
    return files


# --------------------------------------------------------------------------- the reader: discover, parts, assemble
#
# read() is three steps, as in reportgen/engine.py: discover() (the layout, the legacy rank table, which file is
# which rank's), one part per rank (rank_part: that rank's files parsed, the part linear in data) and a cluster
# part (cluster_part: the discovery's problems and the rank table's text), and assemble() (what needs every rank).
# The engine runs the rank parts elsewhere (a process pool, Dask workers, `reportgen reduce` on each node) and
# calls the same assemble(), so every path gives the same run.

#: the rank table carried in a cluster part (a .reduced file) is at most this many bytes
MAX_CLUSTER_FILE_BYTES = 16 << 20
#: profiler_info keys the reader uses (the rest of the file is not carried)
_INFO_KEYS = ("rank_id", "parallel_mode", "rank_size", "stage_num")
_OP_COLUMNS = ["rank", "step", "op", "stream", "start_ns", "end_ns", "dur_ms"]
#: per-file row lists of a rank part, kept as tables named "<file index>.<name>"
_ROW_LISTS = ("step_rows", "avg_rows", "ov_rows", "ov_avg_rows")


@dataclass
class Discovery:
    layout: str
    files: list[FoundFile]
    problems: Problems
    hosts: dict[int, str]
    devices: dict[int, int]
    rank_table: tuple[str, str] | None = None  # (path, text) of the legacy rank table: parsed in assemble()


def discover(root: Path) -> Discovery:
    """The layout of ``root`` and its per-rank files with their ranks (the legacy rank table is read here to
    map device ids to ranks; its own problems are listed when it is parsed again in :func:`assemble`)."""
    root = Path(root)
    problems = Problems()
    hosts: dict[int, str] = {}
    devices: dict[int, int] = {}
    rank_table = None
    rank_table_path, broken = _legacy_rank_table(root)
    if rank_table_path is not None:
        text = _read_text(rank_table_path)
        if len(text) > MAX_CLUSTER_FILE_BYTES:
            raise InputError(rank_table_path, f"a rank table of {len(text):,} characters (at most "
                                              f"{MAX_CLUSTER_FILE_BYTES:,})")
        table = parse_rank_table(rank_table_path, text=text)
        rank_table = (str(rank_table_path), text)
        files = _legacy_files(root, table, problems, hosts, devices)
        layout = (f"legacy MindInsight layout: rank table {rank_table_path.name}, "
                  f"host_ips_mapping.txt, cluster_profiler/<host>/profiler/ keyed by device id")
    elif (root / "cluster_profiler").is_dir() and flat_folder(root) is None:
        if broken is not None:
            raise InputError(broken.path, f"{broken.problem}: the rank table cannot be read, so the device ids of "
                                          f"cluster_profiler/ cannot be mapped to ranks")
        raise InputError(root / "cluster_profiler", "legacy layout without a rank table: expected a *.json with a "
                                                    "server_list (hccl.json) beside it to map device ids to ranks")
    else:
        folder = flat_folder(root)
        if folder is None:
            raise InputError(root, "no MindSpore Insight profiler files found (expected step_trace_raw_<rank>_detail_time.csv "
                                   "or other per-rank files here or in a profiler*/ sub-directory)")
        files = _checked(scan(folder), problems)
        for f in files:
            f.rank = f.key
        rel = "." if folder == root else folder.name
        layout = f"MindInsight cluster layout (all ranks in {rel}/, files keyed by rank)"
    return Discovery(layout, files, problems, hosts, devices, rank_table)


def rank_units(d: Discovery, ranks=None) -> list[tuple]:
    """One unit per rank (of ``ranks`` when given): (its files in discovery order, host, device)."""
    by_rank: dict[int, list[FoundFile]] = {}
    for f in d.files:
        if ranks is None or f.rank in ranks:
            by_rank.setdefault(f.rank, []).append(f)
    return [(by_rank[r], d.hosts.get(r), d.devices.get(r)) for r in sorted(by_rank)]


def cluster_part(d: Discovery) -> tuple[dict, dict[str, pd.DataFrame], list]:
    """(meta, tables, problems) of the discovery: its layout and problems, the rank table's text as bytes."""
    import numpy as np

    meta = {"mi": "cluster", "layout": d.layout, "unlisted": d.problems.unlisted,
            "rank_table": d.rank_table[0] if d.rank_table else None}
    tables = {}
    if d.rank_table:
        tables["rank_table"] = pd.DataFrame({"byte": np.frombuffer(d.rank_table[1].encode(), dtype=np.uint8)})
    return meta, tables, list(d.problems)


def _as_columns(cols: dict) -> tuple[pd.DataFrame, dict]:
    """An hccl column dict as a frame, and how to give it back (:func:`_from_columns`)."""
    kinds = {k: "list" if isinstance(v, list) else "object" if v.dtype == object else "array" for k, v in cols.items()}
    return pd.DataFrame({k: pd.Series(v, dtype=object) if kinds[k] == "object" else v
                         for k, v in cols.items()}), kinds


def _objects(s: pd.Series):
    arr = s.to_numpy(dtype=object, copy=True)
    arr[pd.isna(arr)] = None
    return arr


class _Rows(NamedTuple):
    """A rank's table made of a file's rows (:func:`rank_part`), to be made one frame with the other ranks'."""
    df: "pd.DataFrame | _RowList"


class _RowList(NamedTuple):
    """A table of rows that :func:`rank_part` did not make a frame (``frames=False``): the rows, and the columns of
    tuple rows."""
    rows: list
    columns: list | None = None

    def frame(self) -> pd.DataFrame:
        """The frame :func:`rank_part` makes of the rows (``frames=True``, the shipped parts)."""
        return pd.DataFrame(self.rows, columns=self.columns)


def _records(part: "pd.DataFrame | _RowList") -> list[dict]:
    df = part.frame() if isinstance(part, _RowList) else part
    return records(df, list(df.columns))


def _row_table(parts: list, ops: bool = False) -> pd.DataFrame | None:
    """One frame of the rows of every rank's table of a row list (``ops``: the op rows, by :data:`_OP_COLUMNS`), as
    ``pd.DataFrame`` makes it of all their rows (``df.to_dict("records")`` / ``itertuples`` of each, in order); None
    when there are none. A part may be its rows (:class:`_RowList`): ``frames.frame_of_plain_rows`` when they all
    are and it can, else each made a frame as :func:`rank_part` makes it; then ``frames.stack_rows`` when the parts
    allow it, else the rows themselves."""
    columns = _OP_COLUMNS if ops else None
    if parts and all(isinstance(p, _RowList) for p in parts):
        whole = frame_of_plain_rows([p.rows for p in parts], columns)
        if whole is not None:
            return whole
    parts = [p.frame() if isinstance(p, _RowList) else p for p in parts]
    stacked = stack_rows(parts, columns)
    if stacked is not None:
        return stacked
    if ops:
        rows = [t for df in parts for t in zip(*(column_cells(df[c]) for c in _OP_COLUMNS))]
        return pd.DataFrame(rows, columns=_OP_COLUMNS) if rows else None
    rows = [r for df in parts for r in records(df, list(df.columns))]
    return pd.DataFrame(rows) if rows else None


def _from_columns(df: pd.DataFrame, kinds: dict) -> dict:
    return {k: df[k].tolist() if kind == "list" else _objects(df[k]) if kind == "object" else df[k].to_numpy()
            for k, kind in kinds.items()}


def rank_part(files: list[FoundFile], host: str | None = None, device: int | None = None, frames: bool = True
              ) -> tuple[dict, dict[str, pd.DataFrame], list]:
    """(meta, tables, problems) of one rank's files: each file parsed as :func:`read` always did, its rows kept
    as tables named ``<file index>.<name>``; meta says per file what it is and how many problems it had.
    ``frames=False`` (:func:`read`, the part going straight to :func:`assemble`): a table of rows is kept as its
    rows (:class:`_RowList`), which assemble makes into a frame of every rank's at once when it can."""
    def table(rows: list, columns: list | None = None):
        part = _RowList(rows, columns)
        return part.frame() if frames else part

    problems = Problems()
    tables: dict[str, pd.DataFrame] = {}
    metas = []
    for i, f in enumerate(files):
        listed, unlisted = len(problems), problems.unlisted
        out = {"step_rows": [], "avg_rows": [], "op_rows": [], "ov_rows": [], "ov_avg_rows": [], "tables": {},
               "generations": set(), "info": []}
        try:
            _read_file(f, problems, out)
        except InputError as exc:
            problems.add(exc.path or f.path, exc.problem + "; file skipped")
        except CONTENT_ERRORS as exc:
            problems.add(f.path, f"unexpected content ({type(exc).__name__}: {limits.cap_text(str(exc), 120)}); "
                                 f"file skipped")
        fm = {"kind": f.kind, "path": str(f.path), "key": f.key, "key_text": f.key_text, "rank": f.rank,
              "rank_from": f.rank_from, "meta": f.meta, "problems": len(problems) - listed,
              "unlisted": problems.unlisted - unlisted, "generation": next(iter(out["generations"]), None),
              "columns": {}, "rows": []}
        for name in _ROW_LISTS:
            if out[name]:
                tables[f"{i}.{name}"] = table(out[name])
        if out["op_rows"]:
            tables[f"{i}.op_rows"] = table(out["op_rows"], _OP_COLUMNS)
        for name, parts in out["tables"].items():
            for p in parts:  # one per file
                if isinstance(p, dict):
                    tables[f"{i}.t.{name}"], fm["columns"][name] = _as_columns(p)
                elif isinstance(p, list):
                    tables[f"{i}.t.{name}"] = table(p)
                    fm["rows"].append(name)
                elif p is not None:
                    tables[f"{i}.t.{name}"] = p
        if out["info"]:
            fm["info"] = {k: v for k, v in out["info"][0][1].items() if k in _INFO_KEYS}
        metas.append(fm)
    return {"mi": "rank", "rank": files[0].rank if files else None, "host": host, "device": device,
            "files": metas}, tables, list(problems)


def check_part(meta: dict, tables: dict) -> None:
    """A part from an untrusted .reduced file has the shape :func:`assemble` reads (else ValueError, why)."""
    kind = meta.get("mi")
    if kind == "cluster":
        if not isinstance(meta.get("layout"), str) or set(tables) - {"rank_table"}:
            raise ValueError("a MindInsight cluster part without its layout, or with other tables")
        t = tables.get("rank_table")
        if t is not None:
            if list(t.columns) != ["byte"] or str(t["byte"].dtype) != "uint8" or not isinstance(
                    meta.get("rank_table"), str):
                raise ValueError("the carried rank table is not a byte column with its path")
            if len(t) > MAX_CLUSTER_FILE_BYTES:
                raise ValueError(f"the carried rank table has {len(t):,} bytes (at most {MAX_CLUSTER_FILE_BYTES:,})")
        return
    if kind != "rank":
        raise ValueError("not a MindInsight part (rank or cluster)")
    files = meta.get("files")
    if not isinstance(files, list) or not isinstance(meta.get("rank"), int) or not 0 <= meta["rank"] < limits.MAX_RANKS:
        raise ValueError("a MindInsight rank part without its rank or files")
    for fm in files:
        if not isinstance(fm, dict) or fm.get("kind") not in FILE_PATTERNS or fm.get("rank") != meta["rank"] \
                or not isinstance(fm.get("path"), str) or not isinstance(fm.get("problems"), int):
            raise ValueError("a MindInsight file entry of another shape")
    for name in tables:
        i, _, what = name.partition(".")
        if not (i.isdigit() and int(i) < len(files)) or not (
                what in _ROW_LISTS or what == "op_rows" or what.startswith("t.mi_") or
                what.startswith("t.") and what[2:] in CANONICAL_TABLES):
            raise ValueError(f"table {limits.cap_text(name, 80)} is not a MindInsight table")


def assemble(root: Path, parts: list[tuple[str, dict, dict, list]]) -> Run:
    """The run from cluster and rank parts ``(source, meta, tables, problems)``, whatever ran them: what needs
    every rank (world size, stages, missing ranks, the run origin, one table per name), files taken in the
    order :func:`read` always read them (host folder, then name)."""
    root = Path(root)
    problems = Problems()
    clusters = [p for p in parts if p[1].get("mi") == "cluster"]
    if not clusters:
        raise InputError(root, "no MindSpore Insight layout (a rank part without its cluster part)")
    claim = None  # (claimed world size, the file claiming it)
    first = clusters[0][1]
    rank_table = clusters[0][2].get("rank_table")
    if rank_table is not None:
        path = Path(first["rank_table"])
        text = rank_table["byte"].to_numpy(dtype="uint8").tobytes().decode("utf-8", errors="replace")
        claim = (parse_rank_table(path, problems, text=text).world_size, path)
    seen_problems = set()
    for _source, meta, _tables, found in clusters:
        for item in map(tuple, found):
            if len(clusters) == 1 or item not in seen_problems:  # nodes that read one directory say it once
                seen_problems.add(item)
                problems.append(item)
        problems.unlisted += meta.get("unlisted", 0)
        if meta.get("layout") != first["layout"]:
            problems.add(_source, f"another layout ({limits.cap_text(meta.get('layout'), 120)}); the ranks are "
                                  f"read as given, the run is named after the first ({first['layout']})")
    run = Run(name=root.resolve().name or str(root), source_format="mindinsight", source_path=str(root),
              framework="mindspore",
              layout=first["layout"])
    # the device from the files' own names (ascend_* / gpu_* cluster analyses and timelines), else from the hccl
    # files MindSpore writes on Ascend only
    names = [Path(fm["path"]).name for _s, meta, _t, _f in parts if meta.get("mi") == "rank" for fm in meta["files"]]
    kinds = {("gpu" if n.startswith("gpu_") else "npu") for n in names
             if n.startswith(("gpu_", "ascend_")) or n.startswith("hccl_raw_")}
    run.device = kinds.pop() if len(kinds) == 1 else ""
    hosts: dict[int, str] = {}
    devices: dict[int, int] = {}
    # every file of every rank, in the reader's order; a rank given twice is read from its first part
    entries, owner = [], {}
    for source, meta, tables, found in parts:
        if meta.get("mi") != "rank":
            continue
        rank = meta["rank"]
        if owner.setdefault(rank, source) != source:
            problems.add(source, f"rank {rank} is also in {owner[rank]}; that one is read")
            continue
        at = 0
        for i, fm in enumerate(meta["files"]):
            f = FoundFile(fm["kind"], Path(fm["path"]), fm["key"], rank, fm["meta"], fm["key_text"], fm["rank_from"])
            entries.append(((meta.get("host") or "", f.path.name), f, i, fm, tables, found[at:at + fm["problems"]],
                            meta))
            at += fm["problems"]
    entries.sort(key=lambda e: e[0])
    files = [e[1] for e in entries]

    # parallel layout from the cluster_analyse file name (mode, stage count, world size)
    stages_claim = None
    ca = [f for f in files if f.kind == "cluster_analyse"]
    if ca:
        meta = ca[0].meta
        run.parallel = {"mode": meta["mode"]}
        stages_claim = (meta["stages"], ca[0].path)
        if claim is None:
            claim = (meta["world_size"], ca[0].path)
        if any(f.meta != meta for f in ca):
            problems.add(ca[0].path.parent, "ascend_cluster_analyse_* file names disagree on mode/stages/size; the "
                                            f"first ({ca[0].path.name}) was used")

    out = {"step_rows": [], "avg_rows": [], "op_rows": [], "ov_rows": [], "ov_avg_rows": [], "tables": {},
           "generations": set(), "info": []}
    for _key, f, i, fm, tables, found, meta in entries:
        if meta.get("host") is not None:
            hosts.setdefault(f.rank, meta["host"])
            devices.setdefault(f.rank, meta["device"])
        for item in found:
            problems.append(tuple(item))
        problems.unlisted += fm.get("unlisted", 0)
        for name in (*_ROW_LISTS, "op_rows"):  # each rank's rows, made one frame of all below (_row_table)
            df = tables.get(f"{i}.{name}")
            if df is not None:
                out[name].append(df)
        for key, df in tables.items():
            prefix = f"{i}.t."
            if not key.startswith(prefix):
                continue
            name = key[len(prefix):]
            kinds = fm["columns"].get(name)
            part = _from_columns(df, kinds) if kinds else _Rows(df) if name in fm["rows"] else df
            out["tables"].setdefault(name, []).append(part)
        if fm.get("generation"):
            out["generations"].add(fm["generation"])
        if "info" in fm:
            out["info"].append((f, fm["info"]))
    run.hosts = hosts
    run.devices = devices
    for f, info in out["info"]:
        if claim is None and "rank_size" in info:
            claim = (info["rank_size"], f.path)
        if stages_claim is None and "stage_num" in info:
            stages_claim = (info["stage_num"], f.path)
        _check_info(f, info, run, problems)

    found_ranks = sorted({f.rank for f in files if f.rank is not None})
    if not found_ranks:
        first = f"; first problem: {problems[0][0]}: {problems[0][1]}" if problems else ""
        raise InputError(root, f"no usable per-rank profiler files found{first}")
    world_size = limits.world_size(claim[0], found_ranks, claim[1], problems.add) if claim else None
    for f, info in out["info"]:
        size = as_int(info.get("rank_size"))
        if "rank_size" not in info or claim is None or f.path == claim[1]:
            continue
        shown = limits.cap_text(repr(info["rank_size"]), 40)
        if size is None or not 1 <= size <= limits.MAX_RANKS:
            problems.add(f.path, f"rank_size {shown} is not a usable rank count (1..{limits.MAX_RANKS}); ignored")
        elif size != world_size:
            problems.add(f.path, f"rank_size {shown} differs from the world size {world_size} used (from "
                                 f"{Path(claim[1]).name}; {_CLAIM_ORDER})")
    stages = _stage_count(stages_claim[0], world_size, stages_claim[1], problems) if stages_claim else None
    if stages:
        run.parallel["stages"] = stages
        if ca and stages > 1:
            run.parallel["pp"] = stages
    if stages and world_size:
        # MindSpore assigns consecutive blocks of world_size / stages ranks to each stage
        # (MindInsight cluster_analyser.py: stage = rank // (rank_size / stage_num) + 1).
        per_stage = world_size // stages
        run.stage_map = {r: r // per_stage + 1 for r in found_ranks}

    run.ranks = found_ranks
    run.world_size = world_size
    found = set(found_ranks)
    if world_size:
        run.missing_ranks, n_missing = limits.missing_ranks(world_size, found)
        if n_missing:
            problems.add(claim[1], f"{n_missing} of the {world_size} ranks have no files; too many to list them")

    step_df, avg_df, ov_df, ov_avg_df = (_row_table(out[n]) for n in _ROW_LISTS)
    ops_df, generations = _row_table(out["op_rows"], True), out["generations"]
    if step_df is not None:
        df = step_df[["rank", "step", "step_ms", "step_interval_ms", "fp_bp_ms", "tail_ms", "start_ns", "end_ns"]]
        run.tables["step_trace"] = df.sort_values(["rank", "step"], kind="stable").reset_index(drop=True)
        run.steps = sorted(df["step"].unique().tolist())
        run.step_source = "markers"
    if avg_df is not None:
        run.tables["step_trace_avg"] = (
            avg_df[["rank", "step_ms", "step_interval_ms", "fp_bp_ms", "tail_ms"]]
            .sort_values("rank").reset_index(drop=True))
    if ops_df is not None:
        run.tables["step_ops"] = ops_df.assign(op_type=step_op_type(ops_df["op"]))
    ov_cols = ["computation_ms", "comm_alone_ms", "stage_ms", "receive_alone_ms", "collective_comm_alone_ms"]
    if ov_df is not None:
        run.tables["cluster_overlap"] = ov_df.reindex(columns=["rank", "step"] + ov_cols).sort_values(["rank", "step"]).reset_index(drop=True)
    if ov_avg_df is not None:
        run.tables["cluster_overlap_avg"] = ov_avg_df.reindex(columns=["rank"] + ov_cols).sort_values("rank").reset_index(drop=True)
    for name, parts in out["tables"].items():
        if parts and isinstance(parts[0], dict):  # hccl_raw columns of every rank
            from .mindinsight_hccl import frame

            run.tables[name] = frame(_hccl_name(name), parts)
            continue
        if parts and isinstance(parts[0], _Rows):  # rows of every rank (one-row summaries)
            if all(isinstance(p, _Rows) for p in parts):
                df = _row_table([p.df for p in parts])
            else:  # (another part among them, as the rows were always read: iterated as it is)
                rows = [r for p in parts for r in (_records(p.df) if isinstance(p, _Rows) else p)]
                df = pd.DataFrame(rows) if rows else None
            if df is not None:
                run.tables[name] = df
            continue
        parts = [p for p in parts if p is not None and not p.empty]
        if parts:
            run.tables[name] = pd.concat(parts, ignore_index=True)
    if generations:
        run.notes.append("hccl_raw unit generation: " + " and ".join(sorted(generations)) +
                         " (MindSpore <=2.1 writes ms / KB / KB/s; 2.2+ writes µs costs and GB/s; all shown in "
                         "ms / MB / GB/s)")
        if len(generations) > 1:
            problems.add(root, "hccl_raw files of both unit generations in one run; each was converted on its own")
    # one origin for every absolute time (step trace ticks, timeline µs): model doc, "Time base"
    t0 = origin(*(c for df in run.tables.values() for c in abs_columns(df)))
    run.time_origin_ns = t0 if t0 is not None else 0
    for name, df in run.tables.items():
        if abs_columns(df):
            run.tables[name] = to_rel_ms(df, run.time_origin_ns)
    summary = run.tables.get("mi_memory_summary")
    if summary is not None and not summary.empty:  # the memory planner's own peak per rank (canonical memory_peaks)
        peaks = summary.groupby("rank", as_index=False).agg(
            {"peak_mb": "max", "capacity_mb": "max", "static_mb": "max", "allocations": "max"})
        run.tables["memory_peaks"] = peaks.assign(
            series="memory_usage_summary peak_mem", capacity_source="memory_usage_summary capacity",
            definition="MindSpore memory planner peak (memory_usage_summary peak_mem)")
    # the memory in use per graph node in execution order, and the graphs' forward / backward marks (canonical names
    # of the same frames: memory_nodes, memory_node_marks)
    for canonical, own in (("memory_nodes", "mi_memory_lines"), ("memory_node_marks", "mi_memory_marks")):
        if own in run.tables:
            run.tables[canonical] = run.tables[own]
    from .mindinsight_flops import canonical

    canonical(run)  # rank_flops / op_flops, the canonical FLOPs tables
    from .comm import mindinsight_tables

    mindinsight_tables(run)  # the canonical communication tables (readers/comm.py)
    run.tables["files"] = pd.DataFrame(
        [{"rank": f.rank, "kind": f.kind, "path": str(f.path)} for f in files], columns=["rank", "kind", "path"])
    for path, problem in problems:
        run.problem(path, problem)
    run.problems_unlisted = getattr(run, "problems_unlisted", 0) + problems.unlisted
    return run




def read(root: Path, progress: Callable[[int, int], None] | None = None) -> Run:
    """The run of ``root``: :func:`discover`, each rank's part (:func:`rank_part`), :func:`assemble`."""
    d = discover(root)
    units = rank_units(d)
    parts = [(str(root), *cluster_part(d))]
    for n, unit in enumerate(units, start=1):
        if progress:
            progress(n, len(units))
        parts.append((str(unit[0][0].path), *rank_part(*unit, frames=False)))
    return assemble(root, parts)


def recognised_kinds(run: Run) -> dict[str, int]:
    """How many files of each recognised kind the run has (for 'unavailable' reasons)."""
    files = run.tables.get("files")
    if files is None or files.empty:
        return {}
    return files.groupby("kind").size().to_dict()
