"""Interval arithmetic and the GPU time metrics built on it (one place for every formula).

Definitions follow HTA 0.5.0 (../shared/research/kineto-traces-and-hta.md §1.1-1.2). :func:`gpu_time_metrics`
uses our conventions: exact times, the whole trace (the last step is kept), our kernel classification.
:func:`hta_gpu_time_metrics` reproduces HTA's printed numbers: whole-µs rounding (``ts = ceil(ts)``,
``end = floor(ts + dur)``), with >= 2 ProfilerSteps only GPU work launched (by correlation) before the start
of the last step, every row with a ``stream`` arg as GPU work, and HTA's own kernel classes by name.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from .frames import agg, positions_by


def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged intervals (touching intervals merge), the same whatever the order of the rows.

    Sorted by start; a new interval begins where a start is after every end before it (HTA's
    ``merge_kernel_intervals``). Where an interval ends before it starts (HTA's whole-µs rounding of a sub-µs op:
    ``ceil(ts) > floor(ts + dur)``) the result would depend on the order of equal starts, which HTA leaves to an
    unstable sort: here the longer interval comes first, so such an op inside another one that starts in the same µs
    adds nothing, and one alone (a gap before and after it) stays an interval of negative length, as in HTA."""
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    # equal starts ordered by end, the longest first (without an interval that ends before it starts, any order of
    # equal starts gives the same union: the cheaper sort)
    order = np.lexsort((-ends, starts)) if (ends < starts).any() else np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    ms = s[idx]
    me = np.maximum.reduceat(e, idx)
    return ms, me


def union_length_by(df: pd.DataFrame, keys: list[str], start: str = "start_ms", end: str = "end_ms") -> pd.DataFrame:
    """Per ``keys``: the length of the union of the rows' intervals ``[start, end]`` (column ``length``) and the
    number of rows (``rows``). Exact, vectorised: sorted by start within each key, a row adds
    ``max(0, end - max(start, the largest end before it))``."""
    o = df[list(dict.fromkeys([*keys, start, end]))].sort_values(list(keys) + [start], kind="stable")  # (what it reads)
    before = o.groupby(list(keys), sort=False)[end].cummax().groupby([o[k] for k in keys], sort=False).shift(1)
    lo = np.maximum(o[start].to_numpy(float), before.fillna(-np.inf).to_numpy(float))
    add = np.clip(o[end].to_numpy(float) - lo, 0, None)
    return agg(o.assign(length=add).groupby(list(keys)), length=("length", "sum"), rows=("length", "size")).reset_index()


def length(s: np.ndarray, e: np.ndarray) -> float:
    return float((e - s).sum()) if len(s) else 0.0


def intersect(a: tuple, b: tuple) -> tuple[np.ndarray, np.ndarray]:
    """Intersection of two merged (sorted, disjoint) interval lists, vectorised.

    Each interval of ``a`` can only meet the run of ``b`` intervals between the first one ending after
    its start and the last one starting before its end; those pairs are enumerated with numpy."""
    (as_, ae), (bs, be) = a, b
    if len(as_) == 0 or len(bs) == 0:
        return np.empty(0), np.empty(0)
    lo_idx = np.searchsorted(be, as_, side="right")  # first b ending after a starts
    hi_idx = np.searchsorted(bs, ae, side="left")  # first b starting at or after a ends
    counts = np.maximum(hi_idx - lo_idx, 0)
    if counts.sum() == 0:
        return np.empty(0), np.empty(0)
    ai = np.repeat(np.arange(len(as_)), counts)
    offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
    bi = np.repeat(lo_idx, counts) + offsets
    s = np.maximum(as_[ai], bs[bi])
    e = np.minimum(ae[ai], be[bi])
    keep = s < e
    return s[keep], e[keep]


def covered(merged: tuple, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """For each window [start, end): how much of it the merged (sorted, disjoint) intervals cover. Vectorised with
    the cumulative covered length C(t): covered = C(end) - C(start)."""
    ms, me = merged
    if len(ms) == 0:
        return np.zeros(len(starts))
    before = np.concatenate([[0.0], np.cumsum(me - ms)])  # covered length before interval i starts

    def cum(t: np.ndarray) -> np.ndarray:
        i = np.searchsorted(ms, t, side="right")  # intervals starting at or before t
        part = np.where(i > 0, np.clip(t - ms[np.maximum(i - 1, 0)], 0, (me - ms)[np.maximum(i - 1, 0)]), 0.0)
        return before[np.maximum(i - 1, 0)] * (i > 0) + part

    return cum(np.asarray(ends, float)) - cum(np.asarray(starts, float))


def difference(a: tuple, b: tuple) -> tuple[np.ndarray, np.ndarray]:
    """``a`` minus ``b`` for merged (sorted, disjoint) interval lists: ``a`` intersected with the gaps of ``b``."""
    bs, be = b
    gaps = (np.concatenate([[-np.inf], be]), np.concatenate([bs, [np.inf]]))
    keep = gaps[0] < gaps[1]
    return intersect(a, (gaps[0][keep], gaps[1][keep]))


def clip(iv: tuple, lo: float, hi: float) -> tuple[np.ndarray, np.ndarray]:
    s, e = iv
    keep = (e > lo) & (s < hi)
    return np.clip(s[keep], lo, hi), np.clip(e[keep], lo, hi)


def clipped_lengths(iv: tuple, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """``length(*clip(iv, lo[k], hi[k]))`` for every window k, the same floats, for a merged (sorted, disjoint) list
    ``iv`` (what :func:`union`, :func:`intersect` and :func:`difference` give): the intervals a window keeps are a run
    of the list (found by binary search for all windows at once), only its first and last are clipped, and each
    window's lengths are summed as :func:`length` sums them. Another list (NaN times, not sorted): window by window
    with :func:`clip`; likewise a window whose ends are not finite or that ends before it starts."""
    s, e = iv
    lo, hi = np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)
    out = np.zeros(len(lo))
    if len(s) == 0 or len(lo) == 0:
        return out
    simple = np.isfinite(lo) & np.isfinite(hi) & (lo <= hi)
    if not (np.isfinite(s).all() and np.isfinite(e).all() and (s[1:] > e[:-1]).all() and (e >= s).all()):
        simple[:] = False
    for k in np.flatnonzero(~simple):
        out[k] = length(*clip(iv, lo[k], hi[k]))
    first = np.searchsorted(e, lo, side="right")  # the first interval ending after the window starts
    end = np.searchsorted(s, hi, side="left")  # past the last interval starting before the window ends
    d = e - s
    for k in np.flatnonzero(simple & (end > first)):
        i, j = first[k], end[k]
        seg = d[i:j].copy()
        seg[0] = min(e[i], hi[k]) - max(s[i], lo[k])
        if j - i > 1:
            seg[-1] = min(e[j - 1], hi[k]) - s[j - 1]
        out[k] = float(seg.sum())
    return out




def _temporal(s: np.ndarray, e: np.ndarray, comp_mask: np.ndarray, comm_mask: np.ndarray) -> dict:
    """HTA's temporal breakdown on intervals [s, e) (any unit; the values come back in it).

    kernel span = last end - first start of the merged intervals; idle = span - |U(all)|; compute = |U(compute)|;
    non-compute = span - compute - idle. Ratios are 0..1 of the span."""
    alls = union(s, e)
    comp = union(s[comp_mask], e[comp_mask])
    span = float(alls[1][-1] - alls[0][0])
    idle = span - length(*alls)
    compute = length(*comp)
    return {"kernel_span": span, "idle": idle, "compute": compute, "non_compute": span - compute - idle,
            "idle_ratio": idle / span if span else math.nan, "compute_ratio": compute / span if span else math.nan,
            "non_compute_ratio": (span - compute - idle) / span if span else math.nan}


def gpu_time_metrics(gpu: pd.DataFrame) -> dict:
    """Temporal breakdown and comm/comp overlap of one rank's GPU ops (``gpu`` in ms, run-model units; our
    conventions: exact times, the whole trace, our kernel classification ``kind``).

    kernel span = last end - first start of all GPU ops (kernels, comm kernels, memcpy, memset);
    idle = span - |U(all)|; compute = |U(compute kernels)|; non-compute = span - compute - idle;
    overlap = |U(comm) ∩ U(compute)| / |U(comm)| (HTA ``comp_comm_overlap_pctg``). Ratios are 0..1.
    """
    if gpu.empty:
        return {}
    s = gpu["start_ms"].to_numpy()
    e = gpu["end_ms"].to_numpy() if "end_ms" in gpu else (gpu["start_ms"] + gpu["dur_ms"]).to_numpy()
    return _gpu_time(s, e, (gpu["kind"] == "kernel").to_numpy(), (gpu["kind"] == "comm").to_numpy())


def _gpu_time(s: np.ndarray, e: np.ndarray, comp_mask: np.ndarray, comm_mask: np.ndarray) -> dict:
    """:func:`gpu_time_metrics` of one rank's rows as arrays (start, end, compute and comm masks; not empty)."""
    t = _temporal(s, e, comp_mask, comm_mask)
    comm = union(s[comm_mask], e[comm_mask])
    comm_len = length(*comm)
    overlap = length(*intersect(comm, union(s[comp_mask], e[comp_mask])))
    return {"kernel_span_ms": t["kernel_span"], "idle_ms": t["idle"], "compute_ms": t["compute"],
            "non_compute_ms": t["non_compute"], "idle_ratio": t["idle_ratio"], "compute_ratio": t["compute_ratio"],
            "non_compute_ratio": t["non_compute_ratio"], "comm_kernel_ms": comm_len, "comm_comp_overlap_ms": overlap,
            "comm_comp_overlap_ratio": overlap / comm_len if comm_len else math.nan}


# ---- HTA 0.5.0's conventions (research §1.0-1.2), reproduced exactly; the spec is hta/common/trace.py,
# trace_parser.py, utils/utils.py and analyzers/{breakdown,communication}_analysis.py of that release.

#: HTA 0.5 kernel classes by name (``hta/utils/utils.py``): communication only by NCCL's name; compute is
#: everything that is not NCCL, not a memcpy/memset and not a sync. So DeepEP, custom all-reduce and RCCL
#: kernels are HTA *compute*, whatever reportgen's own ``kind`` says.
HTA_COMM = re.compile(r"^nccl.*Kernel")
HTA_NOT_COMPUTE = re.compile(r"(^nccl.*Kernel)|(.*(Memcpy)|(Memset))|(.*Sync)")
#: GPU-side sync rows that HTA keeps with the GPU kernels even without a stream
HTA_DEVICE_SYNC = ("Event Sync", "Context Sync")
_NO_LAUNCH = np.iinfo(np.int64).max  # = readers.kineto_decode.NO_LAUNCH (no call has the row's correlation)


def hta_profiler_steps(names) -> int:
    """How many distinct ``ProfilerStep`` names HTA's symbol table holds (its last-step filter needs >= 2)."""
    return len({n for n in names if "ProfilerStep" in n})


def hta_gpu_time_metrics(gpu: pd.DataFrame, events: pd.DataFrame | None = None,
                         drop_last_step: bool = False) -> dict:
    """One rank's temporal breakdown and overlap exactly as HTA 0.5.0 prints them (ms; ratios 0..1).

    ``gpu``: the rank's ``gpu_ops`` (name, stream, correlation, ts_ns, dur_ns on the file's clock); ``events``:
    its ``hta_events`` (kineto_decode: launches, other rows with a stream, ProfilerStep marks). HTA's rules:

    * times: ``ts = ceil(ts)``, ``end = floor(ts + dur)`` in whole µs (computed here from the exact ns, in
      integers; HTA does it on floats, which can differ by 1 µs for epoch times);
    * GPU work = every row with ``stream != -1``: our GPU ops plus the ``gpu`` events (Triton launchers, syncs);
    * ``drop_last_step`` (HTA: >= 2 distinct ProfilerStep names over all ranks): rows with ``stream >= 0`` and
      ``correlation >= 0`` (and Event/Context Sync) are kept when their correlation belongs to a CPU row (any
      other row) starting before the last ProfilerStep start of the rank; CPU rows when they start before it.
      The runtime/driver calls among those CPU rows come as ``launch_ts_ns`` (the earliest call with the row's
      correlation) on ``gpu`` and ``events``, or as ``launch`` rows of ``events``;
    * classes by kernel name (:data:`HTA_COMM`, :data:`HTA_NOT_COMPUTE`); span = end of the last merged
      interval - start of the first; overlap = HTA's +1/-1 (comm), +2/-2 (compute) sweep over the merged
      intervals, time where the sum is 3, over Σ merged comm lengths.
    """
    return _hta_time(_hta_arrays(gpu, events, drop_last_step), drop_last_step)


def _hta_arrays(gpu: pd.DataFrame, events: pd.DataFrame | None, drop_last_step: bool, by_rank: bool = False) -> dict:
    """What :func:`_hta_time` reads, as arrays, from ``gpu_ops`` and ``hta_events`` rows (one rank's, or every rank's:
    ``by_rank``, each array of rows with its rank in ``rank``, ``marks_rank``, ``other_rank`` for
    :func:`gpu_time_by_rank`):
    the GPU work rows (the GPU ops, then the ``gpu`` events) with whole-µs times and HTA's classes; with
    ``drop_last_step``, the step marks' starts and the other (CPU) events' starts and correlations (a mark's: -1).
    A GPU op name that is not text is classed as its text (the former per-rank code raised: no overlap section).
    """
    launch_col = "launch_ts_ns" in gpu or (events is not None and "launch_ts_ns" in events)
    h = events if events is not None else pd.DataFrame(columns=["role", "name", "stream", "correlation", "ts_ns",
                                                                "dur_ns"])
    role = h["role"].to_numpy(dtype=object)
    parts = [gpu]
    if (role == "gpu").any():
        parts.append(h.loc[role == "gpu"])

    def col(name: str, fill=None) -> np.ndarray:
        return np.concatenate([p[name].to_numpy(np.int64) if name in p else np.full(len(p), fill, dtype=np.int64)
                               for p in parts])

    ts_ns = col("ts_ns")
    end_ns = np.concatenate([(p["ts_ns"] + p["dur_ns"]).to_numpy(np.int64) for p in parts])
    names = np.concatenate([p["name"].to_numpy(dtype=object) for p in parts])
    # few distinct names among many rows: each matched once (a name that is not text is matched as its text)
    codes, uniq = pd.factorize(names, use_na_sentinel=False)
    text = [n if isinstance(n, str) else str(n) for n in uniq]
    out = {"ts": -((-ts_ns) // 1000), "end": end_ns // 1000,  # ceil, floor: whole µs
           "stream": col("stream"), "corr": col("correlation"),
           "launch": col("launch_ts_ns", _NO_LAUNCH) if launch_col else None,
           "comm": np.array([bool(HTA_COMM.match(n)) for n in text], dtype=bool)[codes],
           "comp": np.array([not HTA_NOT_COMPUTE.match(n) for n in text], dtype=bool)[codes],
           "sync": np.array([n in HTA_DEVICE_SYNC for n in uniq], dtype=bool)[codes],
           "marks": None, "other_ts": None, "other_corr": None}
    del ts_ns, end_ns, names, codes
    marks, other = role == "mark", role != "gpu"
    if drop_last_step:  # the step marks and the CPU events: read only for the last-step rule (as HTA does)
        ev_ts = -((-h["ts_ns"].to_numpy(np.int64)) // 1000)
        out.update(marks=ev_ts[marks], other_ts=ev_ts[other],
                   other_corr=np.where(marks[other], -1, h["correlation"].to_numpy(np.int64)[other]))
    if by_rank:
        out["rank"] = np.concatenate([p["rank"].to_numpy() for p in parts])
        ev_rank = h["rank"].to_numpy() if events is not None else np.zeros(0)  # events of no rank: a KeyError
        out["marks_rank"], out["other_rank"] = ev_rank[marks], ev_rank[other]
    return out


#: the arrays of :func:`_hta_arrays` with a value per GPU work row, per step mark, per other event
_HTA_ROWS = ("ts", "end", "stream", "corr", "launch", "comm", "comp", "sync")
_HTA_MARKS = ("marks",)
_HTA_OTHER = ("other_ts", "other_corr")


def _hta_time(a: dict, drop_last: bool) -> dict:
    """:func:`hta_gpu_time_metrics` of one rank's arrays (:func:`_hta_arrays`)."""
    ts, end, stream, corr = a["ts"], a["end"], a["stream"], a["corr"]
    keep = np.ones(len(ts), dtype=bool)
    if drop_last:
        if len(a["marks"]) == 0:  # no step on this rank: HTA's comparison with NaN keeps nothing
            return {}
        last = int(a["marks"].max())
        gpu_row = ((stream >= 0) & (corr >= 0)) | a["sync"]
        cpu_ts = np.concatenate([ts[~gpu_row], a["other_ts"]])
        cpu_corr = np.concatenate([corr[~gpu_row], a["other_corr"]])
        kept = np.isin(corr, np.unique(cpu_corr[cpu_ts < last]))
        if a["launch"] is not None:  # the runtime/driver calls, as the earliest one's ts per correlation (kineto_decode)
            kept |= -((-a["launch"]) // 1000) < last
        keep = np.where(gpu_row, kept, ts < last)
    keep &= stream != -1
    if not keep.any():
        return {}
    return _hta_numbers(ts[keep], end[keep], a["comp"][keep], a["comm"][keep])


def _hta_numbers(ts: np.ndarray, end: np.ndarray, comp_mask: np.ndarray, comm_mask: np.ndarray) -> dict:
    """HTA's temporal breakdown and overlap (ms, ratios) of the GPU work rows it keeps, in whole µs."""
    t = _temporal(ts, end, comp_mask, comm_mask)
    comm, comp = union(ts[comm_mask], end[comm_mask]), union(ts[comp_mask], end[comp_mask])
    comm_len = length(*comm)
    overlap = _hta_sweep_overlap(comm, comp)
    out = {k: v for k, v in t.items() if k.endswith("_ratio")}
    out.update({f"{k}_ms": t[k] / 1e3 for k in ("kernel_span", "idle", "compute", "non_compute")})
    out.update(comm_kernel_ms=comm_len / 1e3, comm_comp_overlap_ms=overlap / 1e3,
               comm_comp_overlap_ratio=overlap / comm_len if comm_len else math.nan)
    return out


def gpu_time_by_rank(gpu: pd.DataFrame, events: pd.DataFrame | None, drop_last: bool) -> list[tuple]:
    """``(rank, gpu_time_metrics, hta_gpu_time_metrics)`` for every rank of the run's ``gpu_ops`` (rank order; HTA's
    {} without ``ts_ns``): the numbers the two functions give on each rank's rows (and its ``hta_events``), with
    every column read once and each rank's rows taken from arrays by position (a frame per rank cost ~5 ms: seconds
    at 1,024 ranks)."""
    gpu = gpu[gpu["rank"].notna()]
    if gpu.empty:
        return []
    s = gpu["start_ms"].to_numpy()
    e = gpu["end_ms"].to_numpy() if "end_ms" in gpu else (gpu["start_ms"] + gpu["dur_ms"]).to_numpy()
    comp, comm = (gpu["kind"] == "kernel").to_numpy(), (gpu["kind"] == "comm").to_numpy()
    rows_of = positions_by(gpu["rank"].to_numpy())
    hta = _hta_arrays(gpu, events, drop_last, by_rank=True) if "ts_ns" in gpu else None
    if hta is not None:
        h_rows, h_marks, h_other = (positions_by(hta[k]) for k in ("rank", "marks_rank", "other_rank"))
        none = np.zeros(0, dtype=np.intp)
    out = []
    for r in sorted(rows_of):
        rows = rows_of[r]
        ours = _gpu_time(s[rows], e[rows], comp[rows], comm[rows])
        theirs = {}
        if hta is not None:
            one = {}
            for names, at in ((_HTA_ROWS, h_rows.get(r, none)), (_HTA_MARKS, h_marks.get(r, none)),
                              (_HTA_OTHER, h_other.get(r, none))):
                one.update({n: None if hta[n] is None else hta[n][at] for n in names})
            theirs = _hta_time(one, drop_last)
        out.append((r, ours, theirs))
    return out


def _hta_sweep_overlap(comm: tuple, comp: tuple) -> float:
    """HTA's overlap time: sweep +1/-1 at merged comm starts/ends, +2/-2 at compute ones; sum the segments after
    a point where the running total is 3. (Equals |comm ∩ comp| unless a merged interval has end < start, which
    whole-µs rounding makes for sub-µs kernels.)"""
    times = np.concatenate([comm[0], comm[1], comp[0], comp[1]])
    if len(times) < 2:
        return 0.0
    delta = np.concatenate([np.full(len(comm[0]), 1), np.full(len(comm[1]), -1), np.full(len(comp[0]), 2),
                            np.full(len(comp[1]), -2)])
    order = np.argsort(times, kind="stable")
    t, running = times[order], np.cumsum(delta[order])
    seg = t[1:] - t[:-1]
    return float(seg[running[:-1] == 3].sum())


def _maybe_same_rows(d: pd.DataFrame, cols: list[str]) -> np.ndarray | None:
    """Rows of ``d`` that may equal another row on the numeric columns ``cols`` (a superset of pandas'
    ``duplicated(keep=False)``: equal rows get one 64-bit hash; 0.0 and -0.0 are one value, as are all NaNs), by one
    integer column instead of a grouping by four (1.26 M rows: 0.36 s); None when a column is not numeric."""
    h = np.zeros(len(d), dtype=np.uint64)
    for c in cols:
        a = d[c].to_numpy()
        if a.dtype.kind == "f":
            a = np.where(np.isnan(a), np.nan, a + 0.0).astype(np.float64).view(np.uint64)  # (-0.0 + 0.0 is 0.0)
        elif a.dtype.kind in "iub":
            a = a.astype(np.int64).view(np.uint64)
        else:
            return None
        h = h * np.uint64(0x9E3779B97F4A7C15) + (a ^ (a >> np.uint64(29)))  # (wraps: a hash)
    return pd.Series(h).duplicated(keep=False).to_numpy()


def repeats_on_one_stream(df: pd.DataFrame, stream: str = "stream") -> tuple[pd.DataFrame, dict[int, int]]:
    """Device work written twice on one stream of one rank (a broken or merged trace: the same kernel, copy or set
    with the same name, start and duration twice) counted twice: 219.9 ms of GEMM in a 117.7 ms step (issue 29).
    Every repeat after the first is dropped. Items that only overlap are kept as written: on Hopper and Blackwell a
    kernel may start before the one before it on its stream ends (programmatic dependent launch; a real B200 trace,
    tracelens b200 eager, has 10 such on stream 7, and HTA counts them as written), and Ascend files round starts and
    durations (a MemSet 0.26 us before the end of the OnesLike before it). Rows without a stream are left.

    ``df`` has ``rank``, ``stream``, ``name``, a start (``start_ns`` or ``start_ms``) and ``dur_ms``. Returns the
    table (``df`` itself when nothing repeats) and {rank: repeats dropped}."""
    if df is None or df.empty:
        return df, {}
    start = "start_ns" if "start_ns" in df.columns else "start_ms"
    if not {"rank", stream, "name", start, "dur_ms"} <= set(df.columns):
        return df, {}
    has = df[stream].notna()
    if not has.any():
        return df, {}
    d = df.loc[has, ["rank", stream, "name", start, "dur_ms"]]
    # a repeat has the rank, stream, start and duration of an earlier row: the rows that share those with another
    # row first, then the names among them only (hashing every row's name was most of the cost)
    cols = ["rank", stream, start, "dur_ms"]
    candidate = _maybe_same_rows(d, cols)
    if candidate is not None:  # only rows whose numbers hash alike can repeat: the exact test on them alone
        if not candidate.any():
            return df, {}
        d = d[candidate]
    maybe = d[cols].duplicated(keep=False).to_numpy()
    if not maybe.any():
        return df, {}
    d = d[maybe]
    repeat = d.duplicated(keep="first")
    if not repeat.any():
        return df, {}
    out = df.drop(index=d.index[repeat])
    return out, {int(r): int(n) for r, n in d.loc[repeat, "rank"].value_counts().items()}
