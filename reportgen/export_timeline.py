"""The merged timeline: every rank of the run in one Chrome trace event file (``--timeline merged.json[.gz]``) that
Perfetto (ui.perfetto.dev, the trace processor) and chrome://tracing open; MindSpore Insight's timeline download
merges ranks the same way (../shared/research/mindinsight-cluster-profiling.md, timeline and Marey view).

Format (the Trace Event Format's JSON object form): ``{"traceEvents": [...], "displayTimeUnit": "ms",
"otherData": {...}}``. One process per rank (``pid`` = the global rank, named ``rank N (host)`` by a ``process_name``
metadata event, sorted by rank), threads named by ``thread_name`` events:

* tid 0 ``Steps``: one complete event (``ph: "X"``) per step window (:func:`reportgen.timeline.step_windows`);
* ``summary`` (default): tids 1-3 ``Computation``, ``Communication (not overlapped)``, ``Free``: the step's device
  time split as the overlap analysis splits it (the union of compute intervals; communication minus computation;
  the window minus both), measured on the run's device timeline (:mod:`reportgen.timeline`);
* ``detail``: one thread per device stream / communication plane of the device timeline (``stream`` of the
  ``device_timeline`` table: CUDA streams, Ascend streams and HCCL planes, CPU threads), every operation as a
  complete event with its kind in ``cat``.

Clocks: per step, each rank is shifted so that the first communication operation common to the exported ranks ends
when it ends on the first exported rank (the Marey view's rule, :func:`reportgen.sections.execution._align_group`),
and its step starts where that rank's does. ``otherData.alignment_ms[rank][step]`` states every shift (ms added to
the rank's own clock); events outside every step take the rank's median shift. ``ts`` / ``dur`` are microseconds.

No subgraph (graph id) filter or merge, unlike MindSpore Insight's download (seed S2 "subgraphs", "merge multiple
subgraphs"): there the graph ids are the model ids of the raw msprof timeline files (``msprof_<dev>_<model>_<iter>
.json``), which reportgen does not read (raw ``PROF_*`` directories are refused), and no exported output it reads
names a graph per operation (the fixtures' raw msprof data has one model id per device); ``--timeline-steps`` and
``--ranks`` are the filters.

Written rank by rank to a temporary file beside the target and renamed at the end: memory holds one rank's events,
and a failed write leaves no half-written file.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from .intervals import difference, union
from .model import Run
from .timeline import DERIVED_WINDOWS, derived_windows, step_windows

DETAILS = ("summary", "detail")
_SUMMARY_THREADS = [(1, "Computation", "compute"), (2, "Communication (not overlapped)", "communication"),
                    (3, "Free", "free")]


def _alignment(tl: pd.DataFrame | None, windows: pd.DataFrame, ranks: list[int]) -> dict[int, dict[int, float]]:
    """rank -> step -> shift (ms) to add to the rank's clock (module docstring)."""
    from .sections.execution import _align_group, match_names, occurrence_keys

    shift: dict[int, dict[int, float]] = {r: {} for r in ranks}
    w = windows[windows["rank"].isin(ranks)]
    for step, ws in w.groupby("step"):
        start = ws.drop_duplicates("rank").set_index("rank")["start_ms"]
        present = [r for r in ranks if r in start.index]
        if not present:
            continue
        ref = present[0]
        offsets = {r: 0.0 for r in present}
        if tl is not None:
            c = tl[(tl["step"] == step) & tl["rank"].isin(present) & tl["kind"].isin(["communication", "receive"])]
            if not c.empty:
                c = c.sort_values(["rank", "start_ms"], kind="stable")
                c = c.assign(start=c["start_ms"] - c["rank"].map(start), end=c["end_ms"] - c["rank"].map(start),
                             kind="communication")
                c["key"] = occurrence_keys(match_names(c["name"]), [c["rank"]])
                offsets, _ = _align_group(c, present)
        for r in present:
            shift[r][int(step)] = float(start[ref] - start[r] + offsets.get(r, 0.0))
    return shift


def _comm_ops_rows(run: Run) -> pd.DataFrame | None:
    """Without a device timeline: the communication operations the files time (``comm_ops``: e.g. Ascend
    communication.json), as device-timeline rows on one 'Communication ops' stream."""
    c = run.table("comm_ops")
    if c is None or "start_ms" not in c or c.empty:
        return None
    return pd.DataFrame({"rank": c["rank"].astype(int), "step": c["step"].astype(int), "start_ms": c["start_ms"],
                         "end_ms": c["start_ms"] + c["elapse_ms"], "kind": "communication",
                         "name": c["op"].astype(str), "stream": "Communication ops", "source": "comm_ops"})


def _events_of(rank: int, host: str | None, windows: pd.DataFrame, tl: pd.DataFrame | None, shift: dict[int, float],
               detail: str) -> list[dict[str, Any]]:
    """The events of one rank (metadata first)."""
    default = float(np.median(list(shift.values()))) if shift else 0.0
    label = f"rank {rank}" + (f" ({host})" if host else "")
    ev: list[dict[str, Any]] = [
        {"ph": "M", "pid": rank, "tid": 0, "name": "process_name", "args": {"name": label}},
        {"ph": "M", "pid": rank, "tid": 0, "name": "process_sort_index", "args": {"sort_index": rank}},
        {"ph": "M", "pid": rank, "tid": 0, "name": "thread_name", "args": {"name": "Steps"}}]

    def x(tid, name, cat, start_ms, end_ms, step, args=None):
        s = shift.get(step, default)
        e = {"ph": "X", "pid": rank, "tid": tid, "name": name, "cat": cat, "ts": round((start_ms + s) * 1000.0, 3),
             "dur": round(max(0.0, end_ms - start_ms) * 1000.0, 3)}
        if args:
            e["args"] = args
        ev.append(e)

    w = windows[windows["rank"] == rank].sort_values("start_ms")
    for step, s, e in zip(w["step"].astype(int), w["start_ms"], w["end_ms"]):
        x(0, f"step {step}", "step", float(s), float(e), step, {"step": step, "step_ms": round(float(e - s), 6)})
    mine = tl[tl["rank"] == rank] if tl is not None else None
    if detail == "summary":
        for tid, name, _ in _SUMMARY_THREADS:
            ev.append({"ph": "M", "pid": rank, "tid": tid, "name": "thread_name", "args": {"name": name}})
        for step, s, e in zip(w["step"].astype(int), w["start_ms"].astype(float), w["end_ms"].astype(float)):
            ops = mine[mine["step"] == step] if mine is not None else None
            comp = union(*_iv(ops, ["compute"])) if ops is not None else (np.zeros(0), np.zeros(0))
            comm = union(*_iv(ops, ["communication", "receive"])) if ops is not None else (np.zeros(0), np.zeros(0))
            exposed = difference(comm, comp)
            busy = union(np.concatenate([comp[0], comm[0]]), np.concatenate([comp[1], comm[1]]))
            free = difference((np.array([s]), np.array([e])), busy)
            for (tid, name, cat), (a, b) in zip(_SUMMARY_THREADS, (comp, exposed, free)):
                for lo, hi in zip(a, b):
                    lo, hi = max(float(lo), s), min(float(hi), e)
                    if hi > lo:
                        x(tid, name, cat, lo, hi, step)
    elif mine is not None and not mine.empty:
        streams = sorted(mine["stream"].astype(str).unique(), key=_stream_key)
        tid_of = {st: i + 1 for i, st in enumerate(streams)}
        for st in streams:
            ev.append({"ph": "M", "pid": rank, "tid": tid_of[st], "name": "thread_name", "args": {"name": st}})
        for name, kind, st, s, e, step in zip(mine["name"].astype(str), mine["kind"].astype(str),
                                              mine["stream"].astype(str), mine["start_ms"].astype(float),
                                              mine["end_ms"].astype(float), mine["step"].astype(int)):
            x(tid_of[st], name, kind, s, e, step)
    return ev


def _stream_key(name: str):
    digits = "".join(ch for ch in name if ch.isdigit())
    return (name.rstrip("0123456789"), int(digits) if digits else -1, name)


def _iv(ops: pd.DataFrame, kinds: list[str]) -> tuple[np.ndarray, np.ndarray]:
    o = ops[ops["kind"].isin(kinds)]
    return o["start_ms"].to_numpy(dtype=float), o["end_ms"].to_numpy(dtype=float)


def write(run: Run, path: str | os.PathLike, ranks: list[int] | None = None, detail: str = "summary",
          steps: list[int] | None = None) -> dict:
    """Write the merged timeline of ``ranks`` (default: every rank) and ``steps`` (default: every step; else only
    those steps' windows and the operations inside them) to ``path`` (gzip when it ends in ``.gz``); return what
    was written (for the metrics file and the page)."""
    if detail not in DETAILS:
        raise ValueError(f"detail must be one of {DETAILS}")
    windows, windows_source = step_windows(run, derived=False), "profiler step markers / step trace"
    if windows is None or windows.empty:
        windows, windows_source = derived_windows(run), DERIVED_WINDOWS
    if windows is None or windows.empty:
        raise LookupError("no step windows in this run (step markers such as ProfilerStep, a step trace, or a "
                          "timeline's Steps blocks)")
    want = sorted(int(r) for r in run.ranks) if not ranks else [int(r) for r in ranks if r in set(run.ranks)]
    if not want:
        raise LookupError(f"none of the ranks {ranks} is in this run")
    if steps:
        windows = windows[windows["step"].isin({int(s) for s in steps})]
        if windows.empty:
            raise LookupError(f"none of the steps {steps} is in this run")
    tl = run.table("device_timeline")
    partial = tl is None
    if partial:  # no device timeline: the communication ops the files time (no computation spans to draw)
        tl = _comm_ops_rows(run)
    if steps and tl is not None:  # the chosen steps' operations only (not those outside every step)
        tl = tl[tl["step"].isin(set(windows["step"].tolist()))]
    shift = _alignment(tl, windows, want)
    # every timestamp >= 0 (the viewers' clock starts at 0): one constant added to every shift when one would not be
    lowest = []
    for r in want:
        if not shift[r]:
            continue
        w = windows[windows["rank"] == r]
        lowest.append(float(w["start_ms"].min()) + min(shift[r].values()))
        if tl is not None:
            t = tl.loc[tl["rank"] == r, "start_ms"]
            if len(t):
                lowest.append(float(t.min()) + min(shift[r].values()))
    if lowest and min(lowest) < 0:
        lift = -min(lowest)
        shift = {r: {s: v + lift for s, v in sh.items()} for r, sh in shift.items()}
    path = Path(path)
    from .render import atomic_binary

    events = 0
    with atomic_binary(path) as raw:
        out = gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) if path.name.endswith(".gz") else raw
        try:
            out.write(b'{"traceEvents":[\n')
            first = True
            for r in want:
                ev = _events_of(r, run.host_of(r), windows, tl, shift[r], "detail" if partial else detail)
                events += len(ev)
                chunk = ",\n".join(json.dumps(e, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
                                   for e in ev)
                out.write(((",\n" if not first else "") + chunk).encode("utf-8"))
                first = False
            meta = {"generator": "reportgen", "detail": detail, "ranks": want, "time_unit": "us",
                    "steps_selected": sorted(int(x) for x in windows["step"].unique()) if steps else "all",
                    "steps": windows_source,
                    "operations": ("the communication operations only (no device timeline in the files: "
                                   "trace_view.json or a profiler DB gives computation)") if partial else
                                  "the run's device timeline",
                    "alignment": "per step: the first communication op common to the exported ranks ends together "
                                 "(the Marey view's rule); without one, the steps start together (ms added to each "
                                 "rank's clock)",
                    "alignment_ms": {str(r): {str(s): round(v, 6) for s, v in shift[r].items()} for r in want}}
            out.write(('\n],"displayTimeUnit":"ms","otherData":' + json.dumps(meta, separators=(",", ":"))
                       + "}\n").encode("utf-8"))
        finally:
            if out is not raw:
                out.close()
    return {"path": str(path), "file": path.name, "ranks": len(want), "events": events,
            "detail": "communication operations only (no device timeline)" if partial else detail,
            "steps_source": windows_source, "bytes": path.stat().st_size,
            "steps": sorted(int(x) for x in windows["step"].unique()) if steps else "all"}
