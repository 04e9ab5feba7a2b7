"""Reader for MindSpore CPU profiler output: ``*_ascend_ms`` directories without any Ascend device data.

Format facts: ../shared/research/generated-runs.md §4. MindSpore's profiler on CPU writes the Ascend layout
(``<host>_<pid>_<timestamp>_ascend_ms``) but none of the device files (no step_trace_time.csv, kernel_details.csv,
communication.json, .db, no step markers). What it has, per rank:

* ``FRAMEWORK/cpu_op_execute_timestamp_<rank>.txt``: one line per op, ``<full name>;<type>;<start ns>,<dur ms>,<tid>
  <start ns>,<dur ms>,<tid> ...`` — every execution of every host op, collectives included (``Default/AllReduce-op0``
  in graph mode, ``AllReduce`` in PyNative). ``ASCEND_PROFILER_OUTPUT/trace_view.json`` is written from it (the
  same ops, ts in µs strings, 37 ns later on every op of the fixtures) and is not read.
* ``FRAMEWORK/cpu_ms_memory_record_<rank>.txt``: ``Timestamp(ns),Total Allocated(Byte),Total Reserved(Byte),
  Total Active(Byte)``.

Rank: the ``_<rank>`` suffix of the FRAMEWORK files (the directory name holds the pid, not the rank; the msrun
worker logs say the same rank for that pid); the host is the directory name's ``<host>`` part
(:func:`.ascend.choose_rank_dirs`). Times are parsed exactly into integer ns (``<dur ms>`` as a decimal string) and
made relative to the run's earliest op start or memory sample (:func:`reportgen.model.rel_ms`).

Steps (``run.step_source = "repeated_ops"``): the op sequence repeats once per step, so the number of steps N is
the N >= 2 that divides the execution counts of the most ops (ties: the larger N; an op run once at start-up does
not count); an op executed k·N times has k executions per step, and its i-th execution (in time order, from 0)
belongs to step i // k + 1. Step n's window runs from the first start to the last end of the executions that belong
to it (so the host time between two steps, Python and the data feed, is outside every step). N < 2 gives one window
over the whole trace, step 0 (``whole_trace``).

Tables: ``device_ops`` (every op execution; stream ``CPU OP Thread <tid>``), ``trace_steps``, ``comm_ops`` (the
executions whose op type is a collective or p2p op: elapse = duration; transit / wait / sync / idle are not in
the data, NaN; the group is not written either, ""), ``memory_record`` (component ``MindSpore``, MB of 10^6 B).
``step_time`` and ``device_timeline`` are measured on the timeline (:mod:`reportgen.timeline`).

Values are strict (issue 14): an execution whose start is not a whole non-negative number of ns, whose duration
is not a plain number, is negative or over a day, or which ends beyond the int64 ns range is skipped, as is a
memory sample with a value that is not a plain non-negative number; each kind is listed with its line. Both
files end every line with a line break: in a file that does not, the cut last entry (last memory line) is
skipped.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from .. import limits
from ..errors import InputError
from ..frames import text_where
from ..limits import Rejects, as_int, finite_ms, finite_value, strict_float
from ..model import Run, rel_ms
from ..timeline import RECEIVE, assign_steps, op_type
from . import ascend
from .ascend_trace import cpu_op_class
from ._files import read_text

OPS_FILE = re.compile(r"^cpu_op_execute_timestamp_([0-9]+)\.txt$")
_INT64_MAX = (1 << 63) - 1
MEMORY_FILE = "cpu_ms_memory_record_{rank}.txt"
_DEVICE_FILES = ("step_trace_time.csv", "kernel_details.csv", "communication.json", "op_statistic.csv")
_P2P = re.compile(r"Send|Receive", re.IGNORECASE)


def _ops_file(d: Path) -> Path | None:
    fw = d / "FRAMEWORK"
    try:
        found = sorted(p for p in fw.iterdir() if OPS_FILE.match(p.name) and p.is_file())
    except OSError:
        return None
    return found[0] if found else None


def is_cpu_dir(d: Path) -> bool:
    out = d / ascend.OUTPUT_DIR
    if not d.name.endswith("ascend_ms") or _ops_file(d) is None:
        return False
    if any((out / f).exists() for f in _DEVICE_FILES):
        return False
    try:
        return not any(p.suffix in (".db", ".dat") for p in out.iterdir())
    except OSError:
        return True


def detect(root: Path) -> bool:
    dirs = ascend.walk_prof_dirs(Path(root))
    return bool(dirs) and all(is_cpu_dir(d) for d in dirs)


def decimal_ns(text: str, unit_ns: int) -> int:
    """A decimal number of ``unit_ns`` ns written as text (``"0.005537"`` ms) -> int ns, exactly (half-even)."""
    return int((Decimal(text.strip()) * unit_ns).to_integral_value())


def _execution(item: str) -> tuple[tuple | None, str, str]:
    """One ``<start ns>,<dur ms>[,<tid>]`` entry -> ((tid, start_ns, dur_ns), "", "") or (None, field, reason)."""
    f = item.split(",")
    if len(f) not in (2, 3):
        return None, "entry", "not <start ns>,<dur ms>,<tid>"
    start = as_int(f[0]) if f[0].strip().isdigit() else None
    if start is None or start > _INT64_MAX:
        return None, "start", "not a whole number of ns in the int64 range"
    dur = strict_float(f[1])
    reason = "not a number" if dur is None else finite_ms(dur)
    if reason:
        return None, "duration", reason
    dur_ns = decimal_ns(f[1], 1_000_000)
    if start + dur_ns > _INT64_MAX:
        return None, "duration", "ends beyond the int64 ns range"
    tid = f[2].strip() if len(f) > 2 else "0"
    return (limits.cap_text(tid, 64), start, dur_ns), "", ""


def parse_ops(path: Path, rank: int, problems: list) -> pd.DataFrame:
    """``cpu_op_execute_timestamp_<rank>.txt`` -> rank, name, type, tid, start_ns, dur_ns (one row per execution)."""
    rows = []
    rejects = Rejects()
    text = read_text(path)
    lines = text.splitlines()
    cut = len(lines) if lines and not text.endswith(("\n", "\r")) else None
    for n, line in enumerate(lines, start=1):
        parts = line.strip().split(";")
        if len(parts) < 3 or not parts[0]:
            if line.strip():
                rejects.add(path, n, "line", "not <name>;<type>;<executions>")
            continue
        items = parts[2].split()
        if n == cut and not line.endswith((" ", "\t")) and items:
            rejects.add(path, n, "last entry", "cut short (the file does not end with a line break)",
                        action="value skipped")
            items = items[:-1]
        name, typ = limits.cap_text(parts[0]), limits.cap_text(parts[1], 256)
        for item in items:
            ex, field, reason = _execution(item)
            if ex is None:
                rejects.add(path, n, f"execution {field}", reason, action="value skipped")
            else:
                rows.append((name, typ, *ex))
    rejects.flush(lambda p, t: problems.append((p, t)))
    if not rows:
        raise InputError(path, "no op executions in the file")
    df = pd.DataFrame(rows, columns=["name", "type", "tid", "start_ns", "dur_ns"])
    df.insert(0, "rank", rank)
    return df.sort_values("start_ns", kind="stable").reset_index(drop=True)


def parse_memory(path: Path, rank: int, problems: list) -> pd.DataFrame:
    """``cpu_ms_memory_record_<rank>.txt`` -> rank, ts_ns, allocated / reserved / active bytes."""
    rows = []
    rejects = Rejects()
    text = read_text(path)
    lines = text.splitlines()
    head = [h.strip() for h in lines[0].split(",")] if lines else []
    cut = len(lines) if len(lines) > 1 and not text.endswith(("\n", "\r")) else None
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        f = line.strip().split(",")
        if n == cut or len(f) != 4:
            rejects.add(path, n, "last line" if n == cut else "row", "truncated (the file does not end with a line "
                        "break)" if n == cut else "not 4 fields")
            continue
        ts = as_int(f[0]) if f[0].strip().isdigit() else None
        if ts is None or ts > _INT64_MAX:
            rejects.add(path, n, f"column '{head[0] if head else 'Timestamp(ns)'}'", "not a whole number of ns in the "
                                                                                    "int64 range")
            continue
        vals = [strict_float(x) for x in f[1:]]
        why = next(((i, "not a number" if v is None else finite_value(v)) for i, v in enumerate(vals, start=1)
                    if v is None or finite_value(v)), None)
        if why:
            col = head[why[0]] if len(head) > why[0] else f"field {why[0] + 1}"
            rejects.add(path, n, f"column '{limits.cap_text(col, 40)}'", why[1])
            continue
        rows.append((ts, *vals))
    rejects.flush(lambda p, t: problems.append((p, t)))
    df = pd.DataFrame(rows, columns=["ts_ns", "allocated", "reserved", "active"])
    df.insert(0, "rank", rank)
    return df


def step_count(counts: list[int]) -> int:
    """The number of steps N from the ops' execution counts (module doc, "Steps"): the N >= 2 that divides the
    counts of the most ops (ties: the larger N, i.e. each op once per step rather than twice); 1 when none does."""
    freq = Counter(counts)
    candidates = {d for c in freq if c >= 2 for d in range(2, math.isqrt(c) + 1) if c % d == 0}
    candidates |= {c // d for c in freq if c >= 2 for d in range(1, math.isqrt(c) + 1) if c % d == 0}
    best = max(candidates, key=lambda n: (sum(k for c, k in freq.items() if c % n == 0), n), default=1)
    return best if best >= 2 else 1


def repeated_steps(ops: pd.DataFrame) -> tuple[int, pd.DataFrame]:
    """(N, windows rank, step, start_ns, end_ns) of one rank's ops (module doc, "Steps")."""
    counts = ops.groupby("name")["start_ns"].transform("size")
    n = step_count(ops.groupby("name").size().tolist())
    rank = int(ops["rank"].iloc[0])
    end = ops["start_ns"] + ops["dur_ns"]
    if n < 2:
        return 1, pd.DataFrame({"rank": [rank], "step": [0], "start_ns": [int(ops["start_ns"].min())],
                                "end_ns": [int(end.max())]})
    sel = ops[counts % n == 0]
    k = counts[sel.index] // n
    step = sel.groupby("name").cumcount() // k + 1
    w = pd.DataFrame({"step": step, "start_ns": sel["start_ns"], "end_ns": end[sel.index]}).groupby("step").agg(
        start_ns=("start_ns", "min"), end_ns=("end_ns", "max")).reset_index()
    w.insert(0, "rank", rank)
    return n, w


def read(root: Path, progress: Callable[[int, int], None] | None = None) -> Run:
    root = Path(root)
    problems: list[tuple[str, str]] = []
    chosen = ascend.choose_rank_dirs(root, problems)
    run = Run(name=root.resolve().name or str(root), source_format="mindspore_cpu", source_path=str(root),
              framework="mindspore", device="cpu",
              layout=f"MindSpore CPU profiler output: {len(chosen)} rank director{'y' if len(chosen) == 1 else 'ies'} "
                     "(*_ascend_ms with FRAMEWORK/cpu_op_execute_timestamp_<rank>.txt, no device data)")
    if getattr(chosen, "windows", None):  # several profiling windows (readers/windows.py)
        run.windows, _ = list(chosen.windows), run.notes.append(chosen.note)
    ops, mem, wins, files, counts = [], [], [], [], {}
    for i, (rank, d) in enumerate(sorted(chosen.items()), start=1):
        if progress:
            progress(i, len(chosen))
        host = ascend._host_from_name(d.path)
        if host:
            run.hosts[rank] = host
        path = _ops_file(d.path)
        if path is None:
            problems.append((str(d.path), "no FRAMEWORK/cpu_op_execute_timestamp_<rank>.txt; directory skipped"))
            continue
        files.append((rank, "cpu_op_execute_timestamp", str(path)))
        o = ascend._guarded(path, problems, parse_ops, rank, problems)
        if o is None:
            continue
        ops.append(o)
        counts[rank], w = repeated_steps(o)
        wins.append(w)
        mpath = d.path / "FRAMEWORK" / MEMORY_FILE.format(rank=rank)
        if mpath.is_file():
            files.append((rank, "cpu_ms_memory_record", str(mpath)))
            m = ascend._guarded(mpath, problems, parse_memory, rank, problems)
            if m is not None and not m.empty:
                mem.append(m)
    if not ops:
        raise InputError(root, problems[0][1] if problems else "no MindSpore CPU op timestamps")
    ops_df = pd.concat(ops, ignore_index=True)
    win = pd.concat(wins, ignore_index=True)
    mem_df = pd.concat(mem, ignore_index=True) if mem else None
    run.time_origin_ns = int(min([ops_df["start_ns"].min()] + ([mem_df["ts_ns"].min()] if mem_df is not None else [])))
    if len(set(counts.values())) > 1:
        problems.append((str(root), "ranks repeat their op sequence a different number of times: " +
                         ", ".join(f"rank {r}: {n}" for r, n in sorted(counts.items())) + " steps"))
    run.ranks = sorted(int(r) for r in ops_df["rank"].unique())
    run.step_source = "repeated_ops" if max(counts.values()) >= 2 else "whole_trace"
    run.step_definition = ("CPU run: a step is the window of one repetition of the op sequence (first start to last "
                           "end, module doc of readers/mindspore_cpu.py); computing, communication not overlapped and "
                           "free partition it on the CPU op timeline. There is no preparing time: the host work "
                           "between steps is outside every step.")

    origin = run.time_origin_ns
    start = rel_ms(ops_df["start_ns"], origin)
    dur = ops_df["dur_ns"] / 1e6
    run.tables["device_ops"] = pd.DataFrame({"rank": ops_df["rank"], "name": ops_df["name"],
                                             "stream": "CPU OP Thread " + ops_df["tid"].astype(str),
                                             "start_ms": start, "dur_ms": dur,
                                             "op_class": cpu_op_class(ops_df["name"])})
    steps = pd.DataFrame({"rank": win["rank"], "step": win["step"], "start_ms": rel_ms(win["start_ns"], origin),
                          "end_ms": rel_ms(win["end_ns"], origin)})
    run.tables["trace_steps"] = steps
    run.steps = sorted(int(s) for s in steps["step"].unique())

    typ = op_type(ops_df["name"])
    comm = run.tables["device_ops"]["op_class"].to_numpy() == "communication"  # one rule: cpu_op_class
    if comm.any():
        c = pd.DataFrame({"rank": ops_df["rank"][comm], "start_ms": start[comm]})
        t = typ[comm]
        run.tables["comm_ops"] = pd.DataFrame({
            "rank": c["rank"], "step": assign_steps(c, steps),
            "kind": text_where(t.str.contains(_P2P), "p2p", "collective"),
            "op": ops_df["name"][comm], "op_type": np.where(t.str.contains(RECEIVE), "receive", t.str.lower()),
            "group": "", "start_ms": c["start_ms"], "elapse_ms": dur[comm], "transit_ms": math.nan,
            "wait_ms": math.nan, "sync_ms": math.nan, "idle_ms": math.nan}).reset_index(drop=True)
    if mem_df is not None:
        run.tables["memory_record"] = pd.DataFrame({
            "rank": mem_df["rank"], "component": "MindSpore", "ts_ms": rel_ms(mem_df["ts_ns"], origin),
            "allocated_mb": mem_df["allocated"] / 1e6, "reserved_mb": mem_df["reserved"] / 1e6,
            "active_mb": mem_df["active"] / 1e6})
        # the memory of the device MindSpore trains on, here the CPU: its allocator's pool (total reserved)
        run.tables["memory_samples"] = pd.DataFrame({
            "rank": mem_df["rank"].astype(int), "ts_ms": rel_ms(mem_df["ts_ns"], origin), "kind": "device",
            "device_id": math.nan, "series": "MindSpore CPU memory pool total reserved",
            "allocated_mb": mem_df["allocated"] / 1e6, "reserved_mb": mem_df["reserved"] / 1e6,
            "active_mb": mem_df["active"] / 1e6, "capacity_mb": math.nan})
    run.tables["files"] = pd.DataFrame(files, columns=["rank", "kind", "path"])
    for path, problem in problems:
        run.problem(path, problem)
    return run
