"""Memory: peak device memory per rank (host memory on a run that has only that) against the capacity, where it
sits on the cluster (hosts × devices), how it moves over time, and the ranks near capacity or out of line with
their stage.

Sources and definitions (MB = 10^6 B everywhere; ratios 0..1). The section reads only canonical tables
(model.TABLES); which record of a family is "the memory in use" is that family's rule, written once in its reader:

* ``memory_samples`` (rank, ts_ms, kind device|host, device_id, series, allocated / reserved / active MB,
  capacity_mb): peak = the maximum total reserved of the rank's device series (the device whose reserved peaks
  highest when a rank has several), named 'Reserved peak (process)' where it is a process-level series
  (:func:`peak_label`); the timeline and every other memory-over-time line draw the memory in use
  (:func:`in_use_series`: allocated, whose top is the allocated peak) on the run clock. A run with no device samples but host ones
  (a CPU run, where host memory IS the memory) is analysed the same way on its host series, every title, axis and
  finding saying "host memory"; a host series whose total reserved never rises above 0 (an allocator that caches
  nothing) peaks at its total allocated. With both kinds, device memory is the subject. The APP-component rule of
  memory_record.csv / npu_module_mem.csv, the accelerator device types and deviceProperties capacity of a
  torch.profiler trace's [memory] events and the memory pool of cpu_ms_memory_record_<rank>.txt: each is written
  once, in the reader of those files (reportgen/readers/).
* ``memory_peaks`` (rank, peak_mb, capacity_mb, static_mb, ...): a profiler that writes its own peak per rank
  instead of samples (the graph-mode framework's memory planner's ``memory_usage_summary_<rank>.json``,
  research notes on the seed's cluster pages §2.5, §3.4); its per-node series (``memory_nodes``, memory
  in use per graph node in execution order) is drawn over node index, not time.
* Peak / capacity goes through :func:`reportgen.facts.share` (a peak above the capacity is a data problem, not shown).
* Capacity is never invented: data first, then ``device_memory_gb``, else null (and the ratio is null). For host
  memory the machine's RAM is not in the data: only the option gives it.
* Memory detail (one rank at a time, a selector over every rank up to :data:`MAX_DETAIL_RANKS`): every counter
  (allocated / reserved / active) of every series of the subject kind, detail-only series included (a reader's
  framework allocator under a process-level peak series, the reader says which); host series of a device run in
  their own chart, never in the peak. The allocated peak (:func:`peak_times`), the operator allocations alive at it
  (:func:`alive_at`) and per operator name (:func:`operator_summary`, top-N per rank + the rest, :func:`top_with_rest`)
  from ``operator_memory``.
* Imbalance reference = the median peak of the rank's pipeline stage (all ranks when there are no stages):
  stages legitimately hold different activations, so only peers are compared.
"""

from __future__ import annotations

import json

import math
import re
import weakref

from .. import charts as vl
import numpy as np
import pandas as pd

from .. import thresholds as th
from .. import fmt
from ..charts import (axis, band, cell_labels, fit, identity_color, in_unit, natural_key, scale_position, sequential,
                      stage_color, tip, to_spec)
from ..errors import Unavailable
from ..model import ByRank, Run
from .. import facts
from .. import palette
from ..timeline import per_value, step_windows
from ..report import Analysis, Column, Control, Figure, Finding, Table, View, count, natural_sorted
from . import needs_reason

ID = "memory"
TITLE = "Memory"
#: the canonical memory tables (model.TABLES): samples over time, or the profiler's own peak per rank
NEEDS = (("memory_samples", "memory_peaks"),)

# Thresholds live in reportgen/thresholds.py.
NEAR_CAPACITY_RATIO = th.MEMORY_NEAR_CAPACITY
IMBALANCE_RATIO = th.MEMORY_IMBALANCE
IMBALANCE_MIN_MB = th.MEMORY_IMBALANCE_MIN_MB

#: timeline budget: points per rank, rows in total, and ranks drawn (the highest and lowest peaks). The total is what
#: the browser draws as one line chart with a tooltip per point: 10,240 points took 150-330 ms in headless Chromium
#: (bench/page.py, 1,024 ranks), 3,400 took 70 ms; 6,000 keeps 300 points per line up to 20 ranks and ~94 at 64
MAX_POINTS_PER_RANK = 300
MAX_CHART_ROWS = 6_000
MAX_LINE_RANKS = 64
#: rank strip (no host info): ranks per row
STRIP_WIDTH = 32


# --------------------------------------------------------------------------- what the run has


def _node_series(run: Run) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """Memory per graph node in execution order (``memory_nodes``, marks from ``memory_node_marks``): x = the
    node's position in the rank's concatenated graphs."""
    lines = run.table("memory_nodes")
    if lines is None:
        return None, None
    parts, mark_parts = [], []
    raw_marks = run.table("memory_node_marks")
    marks_of = ByRank(raw_marks)
    for rank, g in lines.groupby("rank"):
        g = g.sort_values(["graph", "node_index"], kind="stable")
        parts.append(pd.DataFrame({"rank": rank, "x": np.arange(len(g), dtype=float), "mb": g["mb"].to_numpy()}))
        if raw_marks is not None:
            offset = g.groupby("graph", sort=False).size().cumsum().shift(fill_value=0)
            for mk in marks_of[rank].itertuples():
                if mk.graph in offset.index:
                    mark_parts.append({"rank": rank, "x": float(offset[mk.graph] + mk.node_index), "mark": mk.mark})
    return pd.concat(parts, ignore_index=True), (pd.DataFrame(mark_parts) if mark_parts else None)


def _from_peaks(run: Run) -> dict:
    """The profiler's own peak per rank (canonical ``memory_peaks``) and, when it has them, its per-node series."""
    s = run.table("memory_peaks")
    per = s.groupby("rank", as_index=False).agg({"peak_mb": "max", "capacity_mb": "max", "static_mb": "max",
                                                 "allocations": "max", "series": "first", "capacity_source": "first"})
    series, marks = _node_series(run)
    return {"per_rank": per.rename(columns={"series": "source"}), "series": series, "marks": marks, "x_kind": "node",
            "capacity_source": str(per["capacity_source"].dropna().iloc[0]) if per["capacity_source"].notna().any()
            else None, "peak_definition": str(s["definition"].dropna().iloc[0]) if "definition" in s and
            s["definition"].notna().any() else "the profiler's own peak per rank"}


def _from_samples(run: Run, options=None) -> dict:
    """Peak per rank from the canonical ``memory_samples``: the series of the rank whose total peaks highest (a rank
    may have several devices), the peak its maximum, capacity as the data states it. The subject is device memory
    when the run has any; a run with host memory only (a CPU run: host memory IS its memory) is analysed on its
    host series. Device series peak at their total reserved; a host series at its total reserved too, or, when that
    never rises above 0 (an allocator that caches nothing, the reader names the series 'total allocated'), at its
    total allocated."""
    ms = _peak_rows(run.table("memory_samples"))
    kind = "device" if (ms["kind"] == "device").any() else "host"
    rows = ms[ms["kind"] == kind].copy()
    if rows.empty:
        raise Unavailable("The run's memory samples are neither device nor host memory: no memory to analyse. "
                          + needs_reason(None, ["memory_samples or memory_peaks"], options) + ".")
    key = rows["device_id"].fillna(-1.0)
    if kind == "device":
        rows["mb"] = rows["reserved_mb"]
        used = {}
    else:  # per series: reserved when it ever holds memory, else allocated
        group = [rows["rank"], key, rows["series"]]
        reserves = rows.groupby(group)["reserved_mb"].transform("max") > 0
        rows["mb"] = rows["reserved_mb"].where(reserves, rows["allocated_mb"])
        used = {"reserved": bool(reserves.any()), "allocated": bool((~reserves).any())}
    rows = rows[rows["mb"].notna()]
    if rows.empty:
        if kind == "device":
            raise Unavailable("The run's device memory samples carry no total reserved (older PyTorch, e.g. 2021 "
                              "traces, wrote only the bytes of each allocation): the memory in use is unknown. "
                              "Profile with a newer profiler and profile_memory=True.")
        raise Unavailable("The run's memory samples are host memory only and carry neither a total reserved nor a "
                          "total allocated: the memory in use is unknown.")
    key = rows["device_id"].fillna(-1.0)
    peaks = rows.groupby([rows["rank"], key, rows["series"]])["mb"].max().reset_index()
    peaks.columns = ["rank", "dev", "series", "peak_mb"]
    best = peaks.sort_values(["rank", "peak_mb"], ascending=[True, False], kind="stable").drop_duplicates("rank")
    sel = rows.assign(dev=key).merge(best[["rank", "dev", "series"]], on=["rank", "dev", "series"])
    cap = sel.groupby("rank")["capacity_mb"].max()
    cap_src = sel["capacity_source"].dropna() if "capacity_source" in sel else pd.Series(dtype=object)
    per = pd.DataFrame({"rank": best["rank"].astype(int).to_numpy(), "peak_mb": best["peak_mb"].to_numpy(float),
                        "capacity_mb": best["rank"].map(cap).to_numpy(float), "source": best["series"].to_numpy()})
    if (best["dev"] >= 0).any():
        per["trace_device"] = np.where(best["dev"] >= 0, best["dev"], np.nan)
    series = pd.DataFrame({"rank": sel["rank"].astype(int).to_numpy(), "ts": sel["ts_ms"].to_numpy(),
                           "mb": sel["mb"].to_numpy()})
    if kind == "device":
        definition = ("maximum total reserved of each rank's device memory series (the series per rank in "
                      "'Peak from')")
    else:
        total = ("reserved (total allocated for a series that reserves nothing)" if used["allocated"] else
                 "reserved") if used["reserved"] else "allocated (the host allocator reserves nothing)"
        definition = (f"maximum total {total} of each rank's host memory series (the series per rank in 'Peak "
                      "from'): the run's samples are host memory only")
    return {"per_rank": per, "series": series, "x_kind": "time", "kind": kind,
            "capacity_source": str(cap_src.iloc[0]) if len(cap_src) else None, "peak_definition": definition}


def peak_label(run: Run, d: dict) -> str:
    """The name of the section's peak per rank wherever it is shown: 'Reserved peak (process)' when it is the
    maximum reserved of a process-level series above the reader's framework-allocator detail series (what the
    process holds, the capacity-relevant number), 'Reserved peak' for another device series'
    reserved, else 'Peak' (a host series, a profiler's own peak). The allocated peak is named 'Allocated peak'."""
    if d.get("x_kind") != "time" or d.get("kind", "device") != "device":
        return "Peak"
    ms = run.table("memory_samples")
    process = ms is not None and "detail_only" in ms and bool(ms["detail_only"].fillna(False).astype(bool).any())
    return "Reserved peak (process)" if process else "Reserved peak"


def _peak_rows(ms: pd.DataFrame) -> pd.DataFrame:
    """The peak candidates of ``memory_samples``: every row but the reader's detail-only series."""
    if "detail_only" not in ms:
        return ms
    return ms[~ms["detail_only"].fillna(False).astype(bool).to_numpy()]


# --------------------------------------------------------------------------- memory detail (per rank)

#: detail budget: ranks the selector lists (render.MAX_OPTIONS), chart rows in total, points per line
MAX_DETAIL_RANKS = 1000
MAX_DETAIL_ROWS = 30_000
MAX_DETAIL_POINTS = 400
MIN_DETAIL_POINTS = 8
#: operator tables: rows per rank (top-N by size, the rest aggregated into one row), fewer at many ranks so that the
#: page keeps every rank (th.PAGE_TABLE rows budget)
MAX_OPS_PER_RANK = 20
MIN_OPS_PER_RANK = 1
OPS_ROWS_TOTAL = 8_000
#: operator names per rank in the "held at the peak" chart
MAX_HOLDERS_PER_RANK = 15
#: step boundaries drawn on the detail chart: at most this many rules per rank, and in total (evenly sampled steps)
MAX_STEP_RULES_PER_RANK = 200
MIN_STEP_RULES_PER_RANK = 2
STEP_RULES_TOTAL = 4_000
#: the counters a memory sample may carry, in drawing order
MEASURES = (("allocated_mb", "allocated"), ("reserved_mb", "reserved"), ("active_mb", "active"))


def step_rules(windows: pd.DataFrame | None, lines: pd.DataFrame, ranks: list[int]) -> tuple[pd.DataFrame | None, bool]:
    """The step boundaries of the detail ranks (:func:`reportgen.timeline.step_windows`, run clock, the clock of
    ``memory_samples``): rank, step, x (the step's start, ms) for the steps that overlap the rank's drawn memory
    samples; at most :data:`MAX_STEP_RULES_PER_RANK` per rank (fewer at many ranks, evenly sampled). Returns the rules
    (None when there are none) and whether steps were sampled."""
    if windows is None or windows.empty or lines is None or lines.empty:
        return None, False
    w = windows[windows["rank"].isin(ranks)].dropna(subset=["start_ms", "end_ms"])
    span = lines.groupby("rank")["x"].agg(["min", "max"])
    w = w.join(span, on="rank", how="inner")
    w = w[(w["end_ms"] >= w["min"]) & (w["start_ms"] <= w["max"])]
    if w.empty:
        return None, False
    w = w.sort_values(["rank", "start_ms", "step"]).drop_duplicates(["rank", "step"])
    per = per_rank_budget(int(w["rank"].nunique()), STEP_RULES_TOTAL, MAX_STEP_RULES_PER_RANK,
                          MIN_STEP_RULES_PER_RANK)
    pos = w.groupby("rank").cumcount()
    n = w.groupby("rank")["step"].transform("size")
    # evenly spaced picks: row i kept when it is the first of its share of n / per rows
    keep = (n <= per) | ((pos * per) // n != ((pos - 1) * per) // n) | (pos == 0)
    out = pd.DataFrame({"rank": w["rank"].astype(int), "step": w["step"].astype(str),
                        "x": w["start_ms"].astype(float).round(3)})[keep.to_numpy()]
    return out.reset_index(drop=True), bool((n > per).any())


def per_rank_budget(ranks: int, total: int, most: int, least: int) -> int:
    """Rows (or points) per rank so that ``ranks`` ranks fit ``total``, between ``least`` and ``most``."""
    return int(max(least, min(most, total // max(1, ranks))))


def detail_lines(ms: pd.DataFrame, kind: str) -> pd.DataFrame:
    """Every counter of every ``memory_samples`` series of ``kind`` as lines per rank: rank, x (ms, run clock),
    series, counter (allocated | reserved | active), mb. Active equal to allocated at every sample of a (rank, series)
    is left out (the allocated line is it). Detail-only series (the framework allocator under a process-level
    peak series) are included; a counter with no value, or never above 0, in a (rank, series) is left out."""
    rows = ms[ms["kind"] == kind]
    parts = []
    for col, name in MEASURES:
        if col not in rows:
            continue
        v = rows[col].astype(float)
        keep = v.notna() & (v.groupby([rows["rank"], rows["series"]]).transform("max") > 0)
        if col == "active_mb" and "allocated_mb" in rows:  # active equal to allocated all along: one line, not two
            same = (v - rows["allocated_mb"].astype(float)).abs().fillna(np.inf) <= 1e-9
            keep &= ~same.groupby([rows["rank"], rows["series"]]).transform("all")
        if not keep.any():
            continue
        r = rows[keep]
        parts.append(pd.DataFrame({"rank": r["rank"].astype(int).to_numpy(), "x": r["ts_ms"].to_numpy(float),
                                   "series": r["series"].astype(str).to_numpy(), "counter": name,
                                   "mb": v[keep].to_numpy()}))
    if not parts:
        return pd.DataFrame(columns=["rank", "x", "series", "counter", "mb"])
    return pd.concat(parts, ignore_index=True)


def line_ids(lines: pd.DataFrame) -> np.ndarray:
    """One code per distinct (rank, series, counter) of ``lines``, numbered in order of first appearance (a missing
    value is a value), combined level by level (a MultiIndex's factorize made a tuple per row: 1 s at 1M rows)."""
    gid = np.zeros(len(lines), dtype=np.int64)
    for c in ("rank", "series", "counter"):
        codes, uniques = pd.factorize(lines[c].to_numpy(), use_na_sentinel=False)
        gid = pd.factorize(gid * len(uniques) + codes)[0]
    return gid


def downsample_lines(lines: pd.DataFrame, max_points: int, gid: np.ndarray | None = None) -> pd.DataFrame:
    """:func:`downsample` per (rank, series, counter): at most ``max_points`` rows per line, each x bin keeping its
    largest value (peaks survive). ``gid``: :func:`line_ids` of ``lines`` when the caller has them."""
    if lines.empty:
        return lines
    keys = [lines["rank"].to_numpy(), lines["series"].to_numpy(), lines["counter"].to_numpy()]
    if gid is None:
        gid = line_ids(lines)
    first = np.unique(gid, return_index=True)[1]  # each line's first row
    d = downsample(pd.DataFrame({"rank": gid, "x": lines["x"].to_numpy(), "mb": lines["mb"].to_numpy()}),
                   max_points)
    g = d["rank"].to_numpy()
    rank, series, counter = (k[first][g] for k in keys)  # each line's key, per row
    rank = rank.astype(np.int64) if rank.dtype.kind in "iu" else [int(r) for r in rank]  # int() of another: as it was
    return pd.DataFrame({"rank": rank, "x": d["x"].to_numpy(), "series": series, "counter": counter,
                         "mb": d["mb"].to_numpy()})


def subject_kind(ms: pd.DataFrame) -> str:
    """The kind of memory the section analyses: device when the run has any device samples, else host."""
    return "device" if (ms["kind"] == "device").any() else "host"


def _line_name(series: pd.Series, counter: str) -> np.ndarray:
    """'<series> · <counter>', or the series' own name when it already says the counter; a name that ends with
    another counter ('... memory pool total reserved') drops it first ('... memory pool · allocated')."""
    other = "reserved" if counter == "allocated" else "allocated"

    def name(names: pd.Series) -> np.ndarray:  # per distinct series: a few series over many samples
        names = names.astype(str)
        base = names.str.replace(rf"\s*(total\s+)?{other}$", "", regex=True, case=False)
        return np.where(names.str.lower().str.contains(counter), names, base + " · " + counter)

    return per_value(series, name).to_numpy()


def in_use_series(ms: pd.DataFrame | None, kind: str | None = None) -> pd.DataFrame | None:
    """The memory IN USE over time, one line per rank: rank, ts_ms (run clock: ms from the run origin), mb, series
    (what the line is, e.g. 'PTA+GE allocator (framework) · allocated'), counter (allocated | reserved).
    Definition (the one place): the
    ``allocated_mb`` of the rank's ``memory_samples`` series of ``kind`` (default :func:`subject_kind`) whose
    allocated peaks highest, detail-only series included (a framework allocator, which moves with the forward /
    backward passes, under a flat process-level reserved series); its maximum is the ALLOCATED
    PEAK (:func:`peak_times`). A rank whose series carry no allocated falls back to the series its reserved peak
    is taken from (:func:`_from_samples`, counter 'reserved'). Every memory-over-time line of the page (this
    section's timeline, the drill-down / Marey lines: ``drilldown.memory_series``) draws this line; the reserved
    peak (capacity-relevant) stays the section's peak per rank. None: no usable samples."""
    if ms is None or ms.empty:
        return None
    kind = kind or subject_kind(ms)
    ref, memo = _IN_USE.get(id(ms), (None, None))
    if ref is None or ref() is not ms:  # the run's samples table (one object per run); its lines, once per kind
        memo = {}
        _IN_USE.clear()
        _IN_USE[id(ms)] = (weakref.ref(ms), memo)
    if kind not in memo:
        memo[kind] = _in_use_series(ms, kind)
    return memo[kind]


#: id(samples table) -> (weak reference to it, {kind: in_use_series}): the page draws the line in three places
_IN_USE: dict = {}


def _in_use_series(ms: pd.DataFrame, kind: str) -> pd.DataFrame | None:
    """:func:`in_use_series`, computed."""
    rows = ms[ms["kind"] == kind]
    parts = []
    if "allocated_mb" in rows:
        a = rows[rows["allocated_mb"].notna()]
        a = a[a.groupby(["rank", "series"])["allocated_mb"].transform("max") > 0]
        if not a.empty:
            best = a.groupby(["rank", "series"])["allocated_mb"].max().reset_index()
            best = best.sort_values(["rank", "allocated_mb"], ascending=[True, False], kind="stable")
            sel = a.merge(best.drop_duplicates("rank")[["rank", "series"]], on=["rank", "series"])
            parts.append(pd.DataFrame({"rank": sel["rank"].astype(int).to_numpy(),
                                       "ts_ms": sel["ts_ms"].to_numpy(float), "mb": sel["allocated_mb"].to_numpy(float),
                                       "series": _line_name(sel["series"], "allocated"), "counter": "allocated"}))
    done = set(parts[0]["rank"].tolist()) if parts else set()
    r = _peak_rows(rows)
    r = r[~r["rank"].isin(done) & r["reserved_mb"].notna()] if "reserved_mb" in r else r.iloc[0:0]
    if not r.empty:
        key = r["device_id"].fillna(-1.0)
        peaks = r.groupby([r["rank"], key, r["series"]])["reserved_mb"].max().reset_index()
        peaks.columns = ["rank", "dev", "series", "peak"]
        best = peaks.sort_values(["rank", "peak"], ascending=[True, False], kind="stable").drop_duplicates("rank")
        sel = r.assign(dev=key).merge(best[["rank", "dev", "series"]], on=["rank", "dev", "series"])
        parts.append(pd.DataFrame({"rank": sel["rank"].astype(int).to_numpy(), "ts_ms": sel["ts_ms"].to_numpy(float),
                                   "mb": sel["reserved_mb"].to_numpy(float),
                                   "series": _line_name(sel["series"], "reserved"), "counter": "reserved"}))
    if not parts:
        return None
    out = pd.concat(parts, ignore_index=True).dropna(subset=["ts_ms", "mb"])
    return out.sort_values(["rank", "ts_ms"], kind="stable").reset_index(drop=True) if not out.empty else None


def peak_times(ms: pd.DataFrame | None, ops: pd.DataFrame | None, kind: str = "device") -> pd.DataFrame:
    """The time of each rank's memory peak the allocations are checked against: rank, peak_ms, peak_at_mb,
    peak_from. Definition: the sample where the rank's allocated memory (``allocated_mb`` of its series of ``kind``
    with the highest allocated, detail series included: what the operator allocations add up to) is largest, the
    first such sample; a rank without allocated samples: the time the operator allocations alive together are
    largest (a sweep over ``alloc_ms`` +size / ``release_ms`` -size, releases first at equal times; an allocation
    without a release is alive to the end), as MindStudio Insight's memory view reads operator_memory."""
    out = []
    done = set()
    line = in_use_series(ms, kind) if ms is not None and "allocated_mb" in ms else None
    if line is not None:
        line = line[line["counter"] == "allocated"]
        if not line.empty:
            top = line.loc[line.groupby("rank")["mb"].idxmax()]
            out.append(pd.DataFrame({"rank": top["rank"].astype(int).to_numpy(), "peak_ms": top["ts_ms"].to_numpy(),
                                     "peak_at_mb": top["mb"].to_numpy(float), "peak_from": top["series"].to_numpy()}))
            done = set(out[0]["rank"].tolist())
    if ops is not None and not ops.empty:
        o = ops[ops["alloc_ms"].notna() & ~ops["rank"].isin(done)]
        if not o.empty:
            ev = pd.concat([pd.DataFrame({"rank": o["rank"].to_numpy(), "t": o["alloc_ms"].to_numpy(),
                                          "d": o["size_mb"].to_numpy(float), "o": 1}),
                            pd.DataFrame({"rank": o["rank"].to_numpy(), "t": o["release_ms"].to_numpy(),
                                          "d": -o["size_mb"].to_numpy(float), "o": 0}).dropna(subset=["t"])],
                           ignore_index=True).sort_values(["rank", "t", "o"], kind="stable").reset_index(drop=True)
            ev["live"] = ev.groupby("rank")["d"].cumsum()
            top = ev.loc[ev.groupby("rank")["live"].idxmax()]
            out.append(pd.DataFrame({"rank": top["rank"].astype(int).to_numpy(), "peak_ms": top["t"].to_numpy(),
                                     "peak_at_mb": top["live"].to_numpy(float),
                                     "peak_from": "operator allocations alive together"}))
    if not out:
        return pd.DataFrame(columns=["rank", "peak_ms", "peak_at_mb", "peak_from"])
    return pd.concat(out, ignore_index=True).sort_values("rank").reset_index(drop=True)


def alive_at(ops: pd.DataFrame, times: pd.DataFrame) -> pd.DataFrame:
    """The operator allocations alive at each rank's peak time (``times``: rank, peak_ms): allocated at or before it
    and released after it (no release: alive to the end of the window), largest first per rank; ``share`` = the
    allocation's size / the rank's total alive at that time."""
    o = ops.merge(times[["rank", "peak_ms"]], on="rank")
    live = (o["alloc_ms"] <= o["peak_ms"]) & (o["release_ms"].isna() | (o["release_ms"] > o["peak_ms"]))
    o = o[live.to_numpy()].copy()
    o["share"] = o["size_mb"] / o.groupby("rank")["size_mb"].transform("sum")
    return o.sort_values(["rank", "size_mb", "alloc_ms"], ascending=[True, False, True], kind="stable").reset_index(
        drop=True)


def top_with_rest(df: pd.DataFrame, by: str, n: int, agg: dict, label: str = "name") -> pd.DataFrame:
    """The ``n`` rows of each rank with the largest ``by``, then one row per rank aggregating the rest (``agg``:
    column -> sum | max), its ``label`` saying how many rows it stands for."""
    d = df.sort_values(["rank", by, label], ascending=[True, False, True], kind="stable")
    pos = d.groupby("rank").cumcount()
    top, rest = d[pos < n], d[pos >= n]
    if rest.empty:
        return top.reset_index(drop=True)
    r = rest.groupby("rank").agg(agg).reset_index()
    counts = rest.groupby("rank").size()
    r[label] = r["rank"].map(lambda k: f"(other {int(counts[k])} operators)")
    return pd.concat([top, r], ignore_index=True).sort_values("rank", kind="stable").reset_index(drop=True)


def operator_summary(ops: pd.DataFrame) -> pd.DataFrame:
    """Per rank and operator name: allocations (count), total_mb (sum of sizes), max_mb (largest single allocation),
    longest_ms (longest lifetime, release - allocation as the file writes it; NaN when none was released in the
    window), mean_ms (mean lifetime of the released ones)."""
    g = ops.groupby(["rank", "name"], sort=False)
    return pd.DataFrame({"allocations": g.size(), "total_mb": g["size_mb"].sum(), "max_mb": g["size_mb"].max(),
                         "longest_ms": g["duration_ms"].max(), "mean_ms": g["duration_ms"].mean()}).reset_index()


def _detail(run: Run, d: dict, pr: pd.DataFrame) -> dict:
    """The per-rank detail: lines of every counter (device / host), peak times, operator allocations."""
    out: dict = {"notes": []}
    order = pr.sort_values(["peak_mb", "rank"], ascending=[False, True])["rank"].astype(int).tolist()
    ranks = order[:MAX_DETAIL_RANKS]
    out["detail_ranks"] = ranks
    if len(order) > MAX_DETAIL_RANKS:
        out["notes"].append(f"The memory detail charts hold the {MAX_DETAIL_RANKS} ranks with the highest peaks of "
                            f"{len(order):,}; the tables below hold every rank.")
    ms = run.table("memory_samples") if d["x_kind"] == "time" else None
    if d["x_kind"] == "node" and d.get("series") is not None:
        lines = d["series"].assign(series="memory per graph node", counter="in use")[
            ["rank", "x", "series", "counter", "mb"]]
        host_lines = None
    elif ms is not None:
        lines = detail_lines(ms, d.get("kind", "device"))
        host_lines = detail_lines(ms, "host") if d.get("kind", "device") == "device" else None
    else:
        lines, host_lines = None, None

    def fit_lines(df):
        if df is None or df.empty:
            return None
        df = df[df["rank"].isin(ranks)]
        gid = line_ids(df)  # the lines, once for their count, their sizes and the downsampling
        named = df[["rank", "series", "counter"]].notna().all(axis=1).to_numpy()  # (a line missing a key: not counted)
        sizes = np.bincount(gid[named])
        sizes = sizes[sizes > 0]
        per = per_rank_budget(len(sizes), MAX_DETAIL_ROWS, MAX_DETAIL_POINTS, MIN_DETAIL_POINTS)
        cut = bool((sizes > per).any())
        d = downsample_lines(df, per, gid)
        # chart data, not the numbers of record (those are in the tables and the JSON): 1 µs and 1 kB are enough
        d["x"], d["mb"] = d["x"].round(3), d["mb"].round(3)
        return d, (per if cut else None)

    for key, df in (("detail", lines), ("host_detail", host_lines)):
        fitted = fit_lines(df)
        out[key], out[key + "_points"] = fitted if fitted else (None, None)
    if d["x_kind"] == "time" and out.get("detail") is not None:
        out["steps"], out["steps_sampled"] = step_rules(step_windows(run), out["detail"], ranks)
    ops = run.table("operator_memory")
    if ops is not None and not ops.empty:
        ops = ops[ops["size_mb"].notna()]
    times = peak_times(ms, ops, d.get("kind", "device")) if d["x_kind"] == "time" else pd.DataFrame(
        columns=["rank", "peak_ms", "peak_at_mb", "peak_from"])
    out["peak_times"] = times
    if ops is None or ops.empty:
        return out
    n_ranks = int(ops["rank"].nunique())
    n = per_rank_budget(n_ranks, OPS_ROWS_TOTAL, MAX_OPS_PER_RANK, MIN_OPS_PER_RANK)
    summary = operator_summary(ops)
    out["ops"] = top_with_rest(summary, "total_mb", n, {"allocations": "sum", "total_mb": "sum", "max_mb": "max",
                                                        "longest_ms": "max", "mean_ms": "mean"})
    out["ops_per_rank"] = n
    out["ops_total"] = summary.groupby("rank").size()
    if not times.empty:
        alive = alive_at(ops, times)
        held = alive.groupby(["rank", "name"], as_index=False).agg(mb=("size_mb", "sum"), n=("size_mb", "size"))
        held = held.sort_values(["rank", "mb", "name"], ascending=[True, False, True], kind="stable")
        top = held.drop_duplicates("rank").set_index("rank")
        out["alive_all"] = alive.groupby("rank").agg(alive_allocations=("size_mb", "size"),
                                                     alive_mb=("size_mb", "sum")).reset_index()
        out["alive_all"]["top_holder"] = out["alive_all"]["rank"].map(top["name"])
        out["alive_all"]["top_holder_mb"] = out["alive_all"]["rank"].map(top["mb"])
        alive["release_ms"] = alive["release_ms"].astype(float)
        out["alive"] = alive.groupby("rank").head(n).reset_index(drop=True)[
            ["rank", "name", "size_mb", "share", "alloc_ms", "release_ms", "duration_ms"]]
        held = held[held["rank"].isin(ranks)]
        shown = held.groupby("rank").head(per_rank_budget(len(ranks), OPS_ROWS_TOTAL, MAX_HOLDERS_PER_RANK, 3))
        out["holders"] = with_unlisted(shown, held, times).assign(mb=lambda h: h["mb"].round(3))
    return out


# --------------------------------------------------------------------------- analysis helpers

#: the holders chart's rows for what the listed operators do not hold at the peak
OTHER_HOLDERS = "(other operators)"
UNATTRIBUTED = "(no operator allocation recorded)"


def with_unlisted(shown: pd.DataFrame, held: pd.DataFrame, times: pd.DataFrame) -> pd.DataFrame:
    """The holders of the peak (rank, name, mb, n) completed so that each rank's bars add up to its memory at the
    peak (``times.peak_at_mb``, the line the peak is read on): the operators not listed, summed, and the memory no
    operator allocation alive then accounts for (the framework's own, workspaces, the allocator's cache; never
    negative)."""
    parts = [shown]
    listed = shown.groupby("rank")["mb"].sum()
    alive = held.groupby("rank")["mb"].sum()
    rest = (alive - listed.reindex(alive.index).fillna(0.0))
    rest = rest[rest > 1e-6]
    if not rest.empty:
        left = held.groupby("rank").size().sub(shown.groupby("rank").size(), fill_value=0)
        parts.append(pd.DataFrame({"rank": rest.index, "name": OTHER_HOLDERS, "mb": rest.to_numpy(),
                                   "n": left.reindex(rest.index).astype(int).to_numpy()}))
    at = times.dropna(subset=["peak_at_mb"]).set_index("rank")["peak_at_mb"] if "peak_at_mb" in times else None
    if at is not None:
        gap = (at.reindex(alive.index) - alive).dropna()
        gap = gap[gap > 1e-6]
        if not gap.empty:
            parts.append(pd.DataFrame({"rank": gap.index, "name": UNATTRIBUTED, "mb": gap.to_numpy(), "n": 0}))
    return pd.concat(parts, ignore_index=True)



def downsample(series: pd.DataFrame, max_points: int) -> pd.DataFrame:
    """At most ``max_points`` rows per rank: x is cut into equal bins and each bin keeps its largest value
    (peaks survive). ``series``: rank, x, mb."""
    if series.empty:
        return series
    s = series.sort_values(["rank", "x"], kind="stable").reset_index(drop=True)
    counts = s.groupby("rank")["x"].transform("size")
    if (counts <= max_points).all():
        return s
    lo = s.groupby("rank")["x"].transform("min")
    hi = s.groupby("rank")["x"].transform("max")
    span = (hi - lo).where(hi > lo, 1.0)
    b = np.minimum(((s["x"] - lo) / span * max_points).astype(int), max_points - 1)
    b = b.where(counts > max_points, s.groupby("rank").cumcount())
    keep = s.assign(_b=b.to_numpy()).groupby(["rank", "_b"])["mb"].idxmax()
    return s.loc[np.sort(keep.to_numpy())].reset_index(drop=True)


def _int_or_none(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA else int(v)


def imbalance(per_rank: pd.DataFrame) -> pd.DataFrame:
    """Reference median and relative deviation per rank (stage peers, or all ranks without stages)."""
    pr = per_rank.copy()
    key = pr["stage"] if pr["stage"].notna().any() else pd.Series(0, index=pr.index)
    key = key.fillna(-1)
    pr["reference_mb"] = pr.groupby(key)["peak_mb"].transform("median")
    pr["peers"] = pr.groupby(key)["peak_mb"].transform("size")
    pr["deviation_ratio"] = ((pr["peak_mb"] - pr["reference_mb"]) / pr["reference_mb"]).where(pr["reference_mb"] > 0)
    return pr


def analyze(run: Run, options=None) -> Analysis:
    get = options.get if options is not None else (lambda k, d=None: d)
    if run.table("memory_peaks") is not None:
        d = _from_peaks(run)
    elif run.table("memory_samples") is not None:
        d = _from_samples(run, options)
    else:
        raise Unavailable("No memory data in this run: " + needs_reason(None, ["memory_samples or memory_peaks"],
                                                                        options) + ".")
    pr = d["per_rank"].copy()
    pr["rank"] = pr["rank"].astype(int)
    if "capacity_mb" not in pr:
        pr["capacity_mb"] = math.nan
    pr["capacity_mb"] = pr["capacity_mb"].astype(float)
    pr["capacity_source"] = np.where(pr["capacity_mb"].notna(), d["capacity_source"] or "data", None)
    opt_gb = get("device_memory_gb")
    try:
        opt_mb = float(opt_gb) * 1e3 if opt_gb is not None else math.nan
    except (TypeError, ValueError):
        opt_mb = math.nan
    if not (opt_mb > 0):
        opt_mb = math.nan
    fill = pr["capacity_mb"].isna() & (not math.isnan(opt_mb))
    pr.loc[fill, "capacity_mb"] = opt_mb
    pr.loc[fill, "capacity_source"] = "option device_memory_gb"
    pr["host"] = pr["rank"].map(lambda r: run.hosts.get(r))
    dev = pr["rank"].map(lambda r: run.devices.get(r))
    if "trace_device" in pr:
        dev = dev.where(dev.notna(), pr["trace_device"])
    kind = d.get("kind", "device")
    pr["peak_ratio"] = facts.share(pr["peak_mb"], pr["capacity_mb"], f"peak memory / {kind} capacity", run)
    pr["device"] = dev.map(_int_or_none).astype(object)
    pr["stage"] = pr["rank"].map(lambda r: _int_or_none(run.stage_of(r))).astype(object)
    pr = pr.sort_values("rank").reset_index(drop=True)
    contract = ["rank", "peak_mb", "capacity_mb", "peak_ratio", "source", "capacity_source", "host", "device", "stage"]
    pr = pr[contract + [c for c in ("static_mb", "allocations") if c in pr]]

    imb = imbalance(pr.assign(stage=pd.to_numeric(pr["stage"], errors="coerce")))
    near = pr[pr["peak_ratio"] > NEAR_CAPACITY_RATIO]
    off = imb[(imb["deviation_ratio"].abs() > IMBALANCE_RATIO)
              & ((imb["peak_mb"] - imb["reference_mb"]).abs() > IMBALANCE_MIN_MB)]

    # timeline, within budget
    series = d.get("series")
    line_names = []
    if d["x_kind"] == "time":  # the memory in use (allocated where the data has it), on the run clock
        line = in_use_series(run.table("memory_samples"), kind)
        series = None if line is None else line.rename(columns={"ts_ms": "x"})
        line_names = [] if line is None else sorted(line["series"].unique().tolist())
    timeline, trimmed, drawn = None, [], []
    if series is not None and not series.empty:
        s = series.copy()
        ranks = pr["rank"].tolist()
        drawn = ranks
        if len(ranks) > MAX_LINE_RANKS:
            order = pr.sort_values(["peak_mb", "rank"], ascending=[False, True])["rank"].tolist()
            hi = MAX_LINE_RANKS * 3 // 4
            drawn = sorted(set(order[:hi]) | set(order[-(MAX_LINE_RANKS - hi):]))
            trimmed.append(f"lines for {len(drawn)} of {len(ranks)} ranks (the {hi} highest and "
                           f"{MAX_LINE_RANKS - hi} lowest peaks)")
        s = s[s["rank"].isin(drawn)]
        per = max(2, min(MAX_POINTS_PER_RANK, MAX_CHART_ROWS // max(1, len(drawn))))
        before = s.groupby("rank").size()
        timeline = downsample(s[["rank", "x", "mb"]], per)
        if (before > per).any():
            trimmed.append(f"at most {per} points per rank (largest value of each time bin kept, so peaks stay)")

    known = pr["peak_ratio"].notna()
    metrics = {
        "memory_kind": kind,
        "peak_definition": d["peak_definition"],
        "peak_sources": sorted(pr["source"].unique().tolist()),
        "capacity_known_ranks": int(pr["capacity_mb"].notna().sum()),
        "capacity_sources": sorted(x for x in pr["capacity_source"].dropna().unique().tolist()),
        "ranks": int(len(pr)),
        "ranks_without_data": sorted(int(r) for r in set(run.ranks) - set(pr["rank"])),
        "peak_mb_max": float(pr["peak_mb"].max()),
        "peak_mb_mean": float(pr["peak_mb"].mean()),
        "peak_ratio_max": float(pr.loc[known, "peak_ratio"].max()) if known.any() else None,
        "imbalance_reference": "stage median" if pr["stage"].notna().any() else "median of all ranks",
        "near_capacity_threshold_ratio": NEAR_CAPACITY_RATIO,
        "imbalance_threshold_ratio": IMBALANCE_RATIO,
        "imbalance_min_mb": IMBALANCE_MIN_MB,
        "timeline_x": "node index (execution order)" if d["x_kind"] == "node" else "ms from the run origin (run clock)",
        "timeline_series": line_names,
        "timeline_trimmed": trimmed,
    }
    det = _detail(run, d, pr)
    tables = {"per_rank": pr}
    if not det["peak_times"].empty:
        t = det["peak_times"]
        tables["per_rank"] = pr = pr.merge(t[["rank", "peak_at_mb", "peak_ms"]].rename(
            columns={"peak_at_mb": "alloc_peak_mb", "peak_ms": "alloc_peak_ms"}), on="rank", how="left")
        metrics["allocation_peak_definition"] = str(t["peak_from"].iloc[0])
    if "alive_all" in det:
        tables["per_rank"] = pr = pr.merge(det["alive_all"], on="rank", how="left")
        tables["alive_at_peak"] = det["alive"]
        metrics["alive_at_peak_rows_per_rank"] = det["ops_per_rank"]
    if "ops" in det:
        tables["operator_memory"] = det["ops"]
        metrics["operator_rows_per_rank"] = det["ops_per_rank"]
        metrics["operators_per_rank_max"] = int(det["ops_total"].max())
    metrics["peak_label"] = peak_label(run, d)
    metrics["detail_ranks"] = len(det["detail_ranks"])
    metrics["host_series"] = det.get("host_detail") is not None
    a = Analysis(metrics=metrics, tables=tables,
                 data={"detail": det, "timeline": timeline, "x_kind": d["x_kind"], "marks": d.get("marks"), "near": near, "off": off,
                       "hosts_known": bool(pr["host"].notna().all() and pr["device"].notna().all())})
    a.findings = _findings(a)
    return a


# --------------------------------------------------------------------------- present


def present(a: Analysis) -> View:
    m, pr = a.metrics, a.tables["per_rank"]
    host = m.get("memory_kind") == "host"
    ratio_known = pr["peak_ratio"].notna().any()
    figures = [_grid(pr, ratio_known, a.data["hosts_known"], host, m.get("peak_label", "Peak"))]
    tl = a.data.get("timeline")
    if tl is not None and not tl.empty:
        figures.append(_timeline(tl, pr, a.data["x_kind"], m["timeline_trimmed"], a.data.get("marks"), host,
                                 m.get("timeline_series"), m.get("peak_label", "Peak")))
    det = a.data.get("detail") or {}
    controls = []
    detail_figs = _detail_figures(a, det, host)
    if detail_figs:
        figures += detail_figs
        ranks = det["detail_ranks"]
        peak = pr.set_index("rank")["peak_mb"]
        controls.append(Control("mem_rank", "Rank (memory detail)",
                                [(int(r), f"rank {int(r)} ({fmt.quantity(float(peak[r]), 'mb')})") for r in ranks],
                                int(ranks[0])))
    cols = [Column("rank", "Rank", "rank"), Column("host", "Host", "text"), Column("device", "Device", "int"),
            Column("stage", "Stage", "int"), Column("peak_mb", m.get("peak_label", "Peak"), "mb",
                                                    help="peak = " + m["peak_definition"]),
            Column("capacity_mb", "Capacity", "mb"), Column("peak_ratio", "Peak / capacity", "ratio"),
            Column("source", "Peak from", "text"), Column("capacity_source", "Capacity from", "text")]
    if "static_mb" in pr:
        cols.insert(6, Column("static_mb", "Static", "mb"))
    if "alloc_peak_ms" in pr:
        same = (pr["alloc_peak_mb"] - pr["peak_mb"]).abs().fillna(1).lt(1e-9).all()  # host: one peak, said once
        if pr["alloc_peak_mb"].notna().any() and not same:
            cols.append(Column("alloc_peak_mb", "Allocated peak", "mb",
                               help="the largest allocated memory of the rank (" +
                                    str(m.get("allocation_peak_definition", "")) + ")"))
        cols.append(Column("alloc_peak_ms", "Allocated peak at", "ms",
                           help="run clock: the sample where the rank's allocated memory is largest"))
    if "alive_mb" in pr:
        cols += [Column("alive_mb", "Held by operators at the allocated peak", "mb",
                        help="the operator allocations alive at the allocated peak (operator_memory); the rest of the "
                             "allocated peak is memory the operator table does not list (e.g. allocated before the "
                             "profiled window: weights, optimizer state)"),
                 Column("alive_allocations", "Allocations alive", "int"),
                 Column("top_holder", "Largest holder (operator)", "text",
                        help="the operator whose allocations alive at the peak add up to the most"),
                 Column("top_holder_mb", "Its allocations alive", "mb")]
    tables = [Table.from_frame("memory-per-rank", "Peak host memory per rank" if host else "Peak memory per rank",
                               pr, cols,
                               caption="MB = 10^6 bytes. Capacity is blank when neither the data nor the "
                                       "device_memory_gb option gives it." +
                                       (f" {m.get('peak_label', 'Peak')} = what the process holds (compare with "
                                        "capacity); allocated peak = the allocator's memory in use at its largest "
                                        "(the top of the memory-in-use lines); the operators alive then hold part of "
                                        "it." if "alloc_peak_mb" in pr and pr["alloc_peak_mb"].notna().any()
                                        and m.get("peak_label", "Peak") != "Peak" else "") +
                                       (" Pick a rank in 'Rank (memory detail)' to see its memory over time and what "
                                        "holds it at its peak." if controls else ""))]
    tables += _operator_tables(a)
    notes = list(det.get("notes") or [])
    if host:
        notes.append("The run's memory samples are all host (CPU) memory: host memory is the memory shown here, as "
                     "the framework's allocator counts it (not the process's whole resident memory).")
    if not ratio_known:
        notes.append("The data does not say how much memory the host has (its RAM is not in the trace), so no "
                     "peak / capacity ratio is shown; pass it as device_memory_gb (in GB = 10^9 B) to get it."
                     if host else
                     "The data does not say how much memory the devices have, so no peak / capacity ratio is "
                     "shown; pass the device memory (device_memory_gb, in GB = 10^9 B) to get it.")
    elif m["capacity_known_ranks"] < m["ranks"]:
        notes.append(f"Capacity is known for {m['capacity_known_ranks']} of {m['ranks']} ranks.")
    if m["ranks_without_data"]:
        notes.append(f"No memory data for ranks {_ranks_text(m['ranks_without_data'])}.")
    if a.data["x_kind"] == "node" and tl is not None and not tl.empty:
        notes.append("The profiler's memory details are per graph node in execution order, not per time.")
    label = m.get("peak_label", "Peak")
    summary = (f"Peak device memory per rank, {label.lower()}: largest" if label != "Peak" else
               f"Peak {'host' if host else 'device'} memory per rank: largest")
    summary = (f"{summary} {fmt.quantity(m['peak_mb_max'], 'mb')}, "
               f"mean {fmt.quantity(m['peak_mb_mean'], 'mb')}")
    if m["peak_ratio_max"] is not None:
        summary += f"; highest peak / capacity {fmt.percent(m['peak_ratio_max'])}"
    summary += f" (peak = {m['peak_definition']})."
    if label != "Peak" and "alloc_peak_mb" in pr and pr["alloc_peak_mb"].notna().any():
        summary += (f" Allocated peak (the allocator's memory in use at its largest): largest "
                    f"{fmt.quantity(float(pr['alloc_peak_mb'].max()), 'mb')}.")
    return View(summary=summary, figures=figures, tables=tables, notes=notes, controls=controls)


#: counter -> colour (memory in use in the memory colour, what the allocator keeps in grey, active in light grey)
COUNTER_COLORS = {"allocated": palette.ROLE["memory"], "in use": palette.ROLE["memory"],
                  "reserved": palette.ROLE["free"], "active": palette.ROLE["other"]}
#: one dash pattern per series of a rank
SERIES_DASHES = [[1, 0], [6, 3], [2, 2], [8, 3, 2, 3], [1, 3]]

#: the detail charts' filter on the rank control (``mem_rank``: a rank id, data, never code)
RANK_FILTER = "datum.rank == mem_rank"


def _detail_figures(a: Analysis, det: dict, host: bool) -> list[Figure]:
    """Memory over time (or per graph node) of the rank chosen in the section's rank control: every counter the
    data has (allocated / reserved / active of each series), the allocated peak and forward / backward marks; the
    host memory of that rank in its own chart; the operator allocations alive at the rank's peak."""
    out = []
    ranks = det.get("detail_ranks") or []
    if not ranks:
        return out
    default = int(ranks[0])
    node = a.data["x_kind"] == "node"
    times = det.get("peak_times")
    for key, fid, title, what in (("detail", "memory-detail",
                                   "Memory per graph node of one rank" if node else
                                   "Host memory over time of one rank" if host else "Memory over time of one rank",
                                   "Host memory" if host else "Memory"),
                                  ("host_detail", "memory-host", "Host memory over time of one rank",
                                   "Host memory")):
        df = det.get(key)
        if df is None or df.empty:
            continue
        unit, factor = fmt.unit_for("mb", df["mb"])
        if node:
            x_unit, x_factor, x_title = "", 1.0, "Node (execution order)"
        else:
            x_unit, x_factor = fmt.unit_for("ms", df["x"])
            x_title = fmt.header("Time on the run clock", "ms", x_unit)
        with_alloc = set(df.loc[df["counter"].isin(["allocated", "in use"]), "series"])
        series = sorted(df["series"].unique(), key=lambda v: (v not in with_alloc, natural_key(v)))
        counters = [c for c in COUNTER_COLORS if c in set(df["counter"])]
        chart = in_unit(vl.Chart(df), factor, "mb").transform_filter(RANK_FILTER).transform_calculate(
            x_u=f"datum.x / {float(x_factor)!r}").mark_line(strokeWidth=1.2, interpolate="step-after").encode(
            x=vl.X("x_u:Q", title=x_title, axis=vl.Axis(format=fmt.D3_FORMAT), scale=vl.Scale(zero=False, nice=False)),
            y=vl.Y("mb_u:Q", axis=vl.Axis(**axis(what, unit))),
            color=vl.Color("counter:N", title="Counter", scale=vl.Scale(
                domain=counters, range=[COUNTER_COLORS[c] for c in counters]), legend=vl.Legend(orient="bottom")),
            strokeDash=vl.field("series:N", title="Series", scale=vl.Scale(
                domain=series, range=SERIES_DASHES[:len(series)] or [[1, 0]]),
                legend=vl.Legend(orient="bottom", labelLimit=360)),
            tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("series:N", title="Series"),
                     vl.Tooltip("counter:N", title="Counter"),
                     tip("x_u", "Node" if node else "Time", x_unit), tip("mb_u", what, unit)])
        # zoom / pan in x (drag, wheel); double-click resets (as the Marey view)
        chart = chart.add_params(vl.selection_interval(bind="scales", encodings=["x"],
                                                       name=fid.replace("-", "_") + "_zoom"))
        layers = [chart]
        caption = (f"{what} in use after each graph node of the rank chosen in 'Rank (memory detail)', in "
                   "execution order (the profiler's memory planner)." if node else
                   f"{what} of the rank chosen in 'Rank (memory detail)', every counter the data has "
                   "(allocated / reserved / active of each series; active is not drawn where it equals "
                   "allocated).")
        if key == "detail" and times is not None and not times.empty and not node:
            t = times[times["rank"].isin(ranks)][["rank", "peak_ms", "peak_at_mb"]]
            layers.append(in_unit(vl.Chart(t), factor, "peak_at_mb").transform_filter(RANK_FILTER).transform_calculate(
                x_u=f"datum.peak_ms / {float(x_factor)!r}").mark_rule(color=palette.ROLE["memory"], strokeDash=[4, 3],
                                                        strokeWidth=1.5).encode(
                x="x_u:Q", tooltip=[vl.Tooltip("rank:O", title="Rank"), tip("x_u", "Allocated peak at", x_unit),
                                    tip("peak_at_mb_u", "Allocated at the peak", unit)]))
            caption += " The dashed vertical line is the allocated peak" + (
                " the operator allocations below are read at." if det.get("holders") is not None else ".")
        steps = det.get("steps")
        if key == "detail" and steps is not None and not steps.empty and not node:
            layers.append(vl.Chart(steps).transform_filter(RANK_FILTER).transform_calculate(
                x_u=f"datum.x / {float(x_factor)!r}").mark_rule(color=palette.ROLE["free"], strokeWidth=1.5,
                                                                   opacity=0.9, clip=True).encode(
                x="x_u:Q", tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("step:N", title="Step starts"),
                                    tip("x_u", "At", x_unit)]))
            caption += (" Solid grey vertical lines are step starts" +
                        (" (evenly sampled steps)." if det.get("steps_sampled") else "."))
        marks = a.data.get("marks")
        if key == "detail" and node and marks is not None and not marks.empty:
            m = marks[marks["rank"].isin(ranks)]
            layers.append(vl.Chart(m).transform_filter(RANK_FILTER).mark_rule(strokeDash=[4, 3], opacity=0.6).encode(
                x="x:Q", tooltip=[vl.Tooltip("mark:N", title="Mark"), vl.Tooltip("x:Q", title="Node")]))
            caption += " Dashed lines mark forward start and backward end of each graph."
        points = det.get(key + "_points")
        if points:
            caption += f" At most {points} points per line (the largest value of each bin kept, so peaks stay)."
        if key == "host_detail":
            caption += " Host memory is never part of the device peak or its ratio."
        static = caption.replace("chosen in 'Rank (memory detail)'", f"with the highest peak (rank {default})")
        caption += f" Drag or scroll to zoom {'along the nodes' if node else 'in time'}, double-click to reset."
        spec = vl.layer(*layers).add_params(vl.param(name="mem_rank", value=default)) if len(layers) > 1 else \
            chart.add_params(vl.param(name="mem_rank", value=default))
        out.append(Figure(fid, title, to_spec(fit(spec, 260)), caption=caption,
                          static_caption=static,
                          alt=f"Lines of {what.lower()} of one rank"))
    held = det.get("holders")
    if held is not None and not held.empty:
        unit, factor = fmt.unit_for("mb", held["mb"])
        unlisted = f"indexof({json.dumps([OTHER_HOLDERS, UNATTRIBUTED])}, datum.name) >= 0"
        chart = in_unit(vl.Chart(held), factor, "mb").transform_filter(RANK_FILTER).mark_bar().encode(
            color=vl.condition(unlisted, vl.value(palette.ROLE["other"]), vl.value(palette.ROLE["memory"])),
            y=vl.Y("name:N", title=None, sort="-x", axis=vl.Axis(labelLimit=320)),
            x=vl.X("mb_u:Q", axis=vl.Axis(**axis("Alive at the peak", unit))),
            tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("name:N", title="Operator"),
                     tip("mb_u", "Alive at the peak", unit),
                     vl.Tooltip("n:Q", title="Allocations", format=fmt.D3_FORMAT)]).add_params(
            vl.param(name="mem_rank", value=default))
        caption = ("What holds memory at the allocated peak of the rank chosen in 'Rank (memory detail)': the "
                   "operator allocations alive then, summed per operator name, largest first; in grey, the "
                   "operators not listed and the memory no recorded operator allocation accounts for (the framework's "
                   "own, workspaces, the allocator's blocks), so that the bars add up to the memory in use at the "
                   "peak.")
        out.append(Figure("memory-holders", "What holds memory at the peak", to_spec(fit(chart, {"step": 16})),
                          caption=caption,
                          static_caption=caption.replace("chosen in 'Rank (memory detail)'",
                                                         f"with the highest peak (rank {default})"),
                          alt="Bars of memory held per operator at the peak of one rank"))
    return out


def _operator_tables(a: Analysis) -> list[Table]:
    """The allocations alive at each rank's peak (largest first) and the allocations per operator name."""
    out = []
    t, m = a.tables, a.metrics
    if "alive_at_peak" in t:
        out.append(Table.from_frame(
            "memory-alive", "Allocations alive at each rank's allocated peak", t["alive_at_peak"],
            [Column("rank", "Rank", "rank"), Column("name", "Operator", "text"), Column("size_mb", "Size", "mb"),
             Column("share", "Share of alive", "ratio"), Column("alloc_ms", "Allocated at", "ms"),
             Column("release_ms", "Released at", "ms"), Column("duration_ms", "Lifetime", "ms")],
            caption=f"The {m['alive_at_peak_rows_per_rank']} largest operator allocations of each rank alive at its "
                    "peak (allocated at or before it, released after it or never within the window); share = size / "
                    "all allocations alive then. Times on the run clock; a blank release: not released in the "
                    "profiled window."))
    if "operator_memory" in t:
        out.append(Table.from_frame(
            "memory-operators", "Allocations per operator", t["operator_memory"],
            [Column("rank", "Rank", "rank"), Column("name", "Operator", "text"),
             Column("allocations", "Allocations", "int"), Column("total_mb", "Total size", "mb"),
             Column("max_mb", "Largest", "mb"), Column("longest_ms", "Longest lifetime", "ms"),
             Column("mean_ms", "Mean lifetime", "ms")],
            caption=f"Per rank the {m['operator_rows_per_rank']} operators allocating the most in total, the rest "
                    "in one '(other N operators)' row; lifetime = release - allocation as the profiler writes it."))
    return out


def _ranks_text(ranks: list[int], limit: int = 20) -> str:
    txt = ", ".join(str(r) for r in ranks[:limit])
    return txt + (f" and {len(ranks) - limit} more" if len(ranks) > limit else "")


def _findings(a: Analysis) -> list[Finding]:
    """``memory_near_capacity``: peak / capacity > :data:`NEAR_CAPACITY_RATIO` (capacity only where the data or the
    device_memory_gb option gives it: never invented, so host memory without that option never fires).
    ``memory_imbalance``: |peak - reference| / reference > :data:`IMBALANCE_RATIO` (reportgen.thresholds
    ``MEMORY_IMBALANCE``, 20 %) AND |peak - reference| > :data:`IMBALANCE_MIN_MB` (``MEMORY_IMBALANCE_MIN_MB``,
    64 MB), reference = the median peak of the rank's pipeline stage (of all ranks without stages). Same test for
    device and host memory. Noise measured on five clean CPU runs (gloo, host memory only: 4 ranks dp2 x tp2 three
    times, 8 ranks dp2 x pp2 x tp2 twice): host peaks 12-26 MB, a rank at most 11.8 % (2.9 MB) from its stage
    median (12.6 %, 3.2 MB, over the eight runs with another injected problem), under both bounds. A rank holding
    an extra 1.5 GiB buffer through each step (the same 4-rank run) peaks at 1.633 GB against a 21.38 MB median,
    +7541 %. The finding names the worst rank (the one furthest above the reference, else the one furthest
    below), its peak and the reference in message and evidence, the memory kind, and, under ``cause``, that rank
    as the memory cause for the diagnosis."""
    out = []
    near, off = a.data["near"], a.data["off"]
    kind = a.metrics.get("memory_kind", "device")
    if not near.empty:
        worst = near.loc[near["peak_ratio"].idxmax()]
        ranks = sorted(int(r) for r in near["rank"])
        out.append(Finding(
            "memory_near_capacity", "high" if worst["peak_ratio"] >= 0.97 else "medium", ID,
            f"{count(len(ranks), 'rank')} {'peaks' if len(ranks) == 1 else 'peak'} above "
            f"{fmt.percent(NEAR_CAPACITY_RATIO)} of {kind} memory "
            f"({_ranks_text(ranks)}); highest rank {int(worst['rank'])} at {fmt.percent(worst['peak_ratio'])} "
            f"({fmt.quantity(worst['peak_mb'], 'mb')} of {fmt.quantity(worst['capacity_mb'], 'mb')}).",
            ranks=ranks, evidence={"metric": "peak_ratio", "value": float(worst["peak_ratio"]),
                                   "reference": NEAR_CAPACITY_RATIO, "peak_mb": float(worst["peak_mb"]),
                                   "capacity_mb": float(worst["capacity_mb"]),
                                   "memory": kind},
            suggestion="Little headroom risks out-of-memory errors: use activation recomputation, a smaller "
                       "micro-batch, optimizer-state sharding (ZeRO / parallel optimizer) or more pipeline stages.",
            figure="memory-grid"))
    if not off.empty:
        above = off[off["deviation_ratio"] > 0]
        pick = above if not above.empty else off
        worst = pick.loc[pick["deviation_ratio"].abs().idxmax()]
        ranks = sorted(int(r) for r in off["rank"])
        ref = "its stage's median peak" if a.metrics["imbalance_reference"] == "stage median" else \
            "the median peak of all ranks"
        dev = float(worst["deviation_ratio"])
        stage = None if pd.isna(worst["stage"]) else int(worst["stage"])
        out.append(Finding(
            "memory_imbalance", "medium" if abs(dev) > 0.5 else "low", ID,
            f"{count(len(ranks), 'rank')} {'differs' if len(ranks) == 1 else 'differ'} from {ref} by more than "
            f"{fmt.percent(IMBALANCE_RATIO)} "
            f"({_ranks_text(ranks)}); largest: rank {int(worst['rank'])} peaks at "
            f"{fmt.quantity(worst['peak_mb'], 'mb')} of {kind} memory against "
            f"{fmt.quantity(worst['reference_mb'], 'mb')} "
            f"({fmt.percent(dev, signed=True)}).",
            ranks=ranks, evidence={"metric": "peak_mb", "value": float(worst["peak_mb"]),
                                   "reference": float(worst["reference_mb"]), "deviation_ratio": dev,
                                   "stage": stage, "memory": kind,
                                   "cause": {"kind": "memory", "ranks": [int(worst["rank"])], "link": None,
                                             "stage": None}},
            suggestion="Ranks doing the same work should need the same memory: check uneven layer or embedding "
                       "placement, uneven sequence lengths, or a leak on the outlying rank."
                       + (" Host memory here is what the framework's allocator holds on the CPU: look for tensors "
                          "or buffers the outlying rank keeps alive across steps." if kind == "host" else ""),
            figure="memory-grid"))
    return out


#: Cells of the memory grid get their value written in them up to this many cells.
GRID_TEXT_MAX = 64


def _grid(pr: pd.DataFrame, ratio_known: bool, hosts_known: bool, host: bool = False, label: str = "Peak") -> Figure:
    """Peak per rank on the cluster (host memory titled as such when that is the run's memory)."""
    peak = "Peak host memory" if host else label
    # legend and tooltip titles end in "(unit)": 'Reserved peak (process)' -> 'Reserved peak, process (GB)'
    # (fmt.header would write 'Reserved peak (process, GB)')
    peak = re.sub(r"^(.*) \((.*)\)$", r"\1, \2", peak)
    df = pr[["rank", "host", "device", "stage", "peak_mb", "capacity_mb", "peak_ratio"]].copy()
    df["device"] = pd.to_numeric(df["device"], errors="coerce")
    df["stage"] = pd.to_numeric(df["stage"], errors="coerce")
    unit, factor = fmt.unit_for("mb", df["peak_mb"])
    if ratio_known:
        field, domain, text = "peak_ratio", [0, 1], vl.Text("peak_ratio:Q", format=fmt.D3_PCT)
        color = vl.Color("peak_ratio:Q", scale=sequential([0, 1]), legend=vl.Legend(**axis("Peak / capacity",
                                                                                                kind="ratio")))
    else:
        field, domain, text = "peak_mb_u", None, vl.Text("peak_mb_u:Q", format=fmt.D3_SHORT)
        color = vl.Color("peak_mb_u:Q", scale=sequential(), legend=vl.Legend(**axis(peak, unit)))
    tooltip = [vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("host:N", title="Host"),
               vl.Tooltip("device:O", title="Device"), vl.Tooltip("stage:O", title="Stage"),
               tip("peak_mb_u", peak, unit), tip("capacity_mb_u", "Capacity", unit),
               tip("peak_ratio", "Peak / capacity", kind="ratio")]
    gap = vl.Scale(paddingInner=0.06)
    base = scale_position(in_unit(vl.Chart(df), factor, "peak_mb", "capacity_mb"), field, domain)
    n_hosts = df["host"].nunique() if hosts_known else 0
    if hosts_known:
        n_dev = df["device"].nunique()
        base = base.encode(x=vl.X("device:O", title="Device", scale=gap, axis=vl.Axis(labelAngle=0)),
                           y=vl.Y("host:N", title="Host", scale=gap, axis=vl.Axis(labelOverlap=True),
                                  sort=natural_sorted(df["host"].dropna())))
        size = {"width": {"step": band(n_dev, 48, 8, 640)}, "height": {"step": band(n_hosts, 28, 3, 600)}}
        caption = "One cell per device, hosts as rows."
    else:
        df["row"] = df["rank"] // STRIP_WIDTH * STRIP_WIDTH
        df["col"] = df["rank"] % STRIP_WIDTH
        rows = df["row"].nunique()
        base = base.encode(x=vl.X("col:O", title="Rank (+ row start)" if rows > 1 else "Rank", scale=gap,
                                   axis=vl.Axis(labelAngle=0)),
                           y=vl.Y("row:O", title="Rank row start" if rows > 1 else None, scale=gap,
                                   axis=vl.Axis(labelOverlap=True) if rows > 1 else None))
        # the strip fits the page's plot width (a 32-rank row of 44 px cells was 1,658 px and cut its last columns)
        size = {"width": {"step": band(int(df["col"].nunique()), 44, 8)},
                "height": {"step": band(rows, 28, 3, 600)}}
        why = ("The data does not say which device of its host each rank is" if df["host"].notna().all()
               else "The data does not say which host each rank ran on")
        caption = f"{why}: one cell per rank, in rows of {STRIP_WIDTH} ranks." if rows > 1 else \
                  f"{why}: one cell per rank."
    chart = base.mark_rect().encode(color=color, tooltip=tooltip)
    if len(df) <= GRID_TEXT_MAX:
        chart = chart + cell_labels(base, text, tooltip)
    chart = chart.properties(**size)
    what = "peak host memory" if host else "peak"
    caption += f" Colour = {what} / capacity." if ratio_known else f" Colour = {what} ({unit}; capacity unknown)."
    return Figure("memory-grid", "Peak host memory across the cluster" if host else "Peak memory across the cluster",
                  to_spec(chart), caption=caption,
                  alt="Grid of ranks coloured by peak host memory" if host else
                  "Grid of devices coloured by peak memory")


def _timeline(tl: pd.DataFrame, pr: pd.DataFrame, x_kind: str, trimmed: list[str],
              marks: pd.DataFrame | None = None, host: bool = False, names: list[str] | None = None,
              label: str = "Peak") -> Figure:
    df = tl.merge(pr[["rank", "stage"]].assign(stage=pd.to_numeric(pr["stage"], errors="coerce")), on="rank", how="left")
    unit, factor = fmt.unit_for("mb", df["mb"])
    if x_kind == "node":
        x_unit, x_factor, x_title = "", 1.0, "Node (execution order)"
    else:
        x_unit, x_factor = fmt.unit_for("ms", df["x"])
        x_title = fmt.header("Time on the run clock", "ms", x_unit)
    many = df["rank"].nunique() > 10
    staged = df["stage"].notna().any() and df["stage"].nunique() > 1
    if staged:
        df["stage_key"] = df["stage"].map(lambda s: "none" if pd.isna(s) else str(int(s)))
        color = stage_color("stage_key", sorted(df["stage_key"].unique(), key=natural_key))
        how = "one line per rank, coloured by pipeline stage"
    else:
        color = identity_color("rank", sorted(df["rank"].unique()), "Rank", legend=not many)
        how = "one line per rank"
    x = vl.X("x_u:Q", title=x_title, axis=vl.Axis(format=fmt.D3_FORMAT), scale=vl.Scale(nice=False, zero=False))
    chart = in_unit(vl.Chart(df), factor, "mb").transform_calculate(x_u=f"datum.x / {float(x_factor)!r}").mark_line(
        strokeWidth=1, opacity=0.7 if many else 1).encode(
        x=x, y=vl.Y("mb_u:Q", axis=vl.Axis(**axis("Host memory" if host else "Memory", unit))),
        color=color, detail="rank:N",
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("stage:O", title="Stage"),
                 tip("x_u", "Time" if x_kind == "time" else "Node", x_unit),
                 tip("mb_u", "Host memory" if host else "Memory", unit)])
    if x_kind == "time":
        caption = (f"{'Host memory' if host else 'Memory'} in use, {how}, on the run clock (time from the run "
                   "origin, as the Marey view): " + "; ".join((names or [])[:4]) + ("; ..." if len(names or []) > 4 else "")
                   + "." + (f" Allocated where the data has it (it moves with the passes); the {label.lower()} in the "
                            "table is what the process holds." if label != "Peak" else ""))
    else:
        caption = f"The {'host memory ' if host else ''}series each peak is taken from, {how}."
    if marks is not None and not marks.empty:
        m = marks[marks["rank"].isin(df["rank"].unique())].drop_duplicates(["x", "mark"])
        rules = vl.Chart(m).transform_calculate(x_u=f"datum.x / {float(x_factor)!r}").mark_rule(
            strokeDash=[4, 3], opacity=0.6).encode(
            x="x_u:Q",
            tooltip=[vl.Tooltip("mark:N", title="Mark"), vl.Tooltip("rank:O", title="Rank"),
                     vl.Tooltip("x:Q", title="Node")])
        chart = vl.layer(chart, rules)
        caption += " Dashed lines mark forward start and backward end of each graph."
    if trimmed:
        caption += " Trimmed to stay small: " + "; ".join(trimmed) + "."
    title = "Memory in use over time per rank" if x_kind == "time" else "Memory per graph node per rank"
    return Figure("memory-timeline", "Host " + title.lower() if host else title, to_spec(fit(chart, 260)),
                  caption=caption, alt=f"Lines of {'host ' if host else ''}memory in use per rank")
