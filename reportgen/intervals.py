"""Interval arithmetic and the GPU time metrics built on it (one place for every formula).

Definitions follow HTA 0.5.0 (../shared/research/kineto-traces-and-hta.md §1.1-1.2), with our
conventions by default: float µs (no rounding) and the whole trace (the last step is kept).
``hta_compat=True`` applies HTA's two conventions so its numbers can be reproduced exactly:
``ts = ceil(ts)``, ``end = floor(ts + dur)`` in µs, and — when there are >= 2 ProfilerSteps — only
GPU work launched (by correlation) before the start of the last step.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

def union(starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged intervals (touching intervals merge)."""
    if len(starts) == 0:
        return np.empty(0), np.empty(0)
    order = np.argsort(starts, kind="stable")
    s, e = starts[order], ends[order]
    run_end = np.maximum.accumulate(e)
    new = np.empty(len(s), dtype=bool)
    new[0] = True
    new[1:] = s[1:] > run_end[:-1]
    idx = np.flatnonzero(new)
    ms = s[idx]
    me = np.maximum.reduceat(e, idx)
    return ms, me


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




def gpu_time_metrics(gpu: pd.DataFrame, steps: pd.DataFrame | None = None, launches: pd.DataFrame | None = None,
                     hta_compat: bool = False) -> dict:
    """Temporal breakdown and comm/comp overlap of one rank's GPU ops (``gpu`` in ms, run-model units).

    kernel span = last end - first start of all GPU ops (kernels, comm kernels, memcpy, memset);
    idle = span - |U(all)|; compute = |U(compute kernels)|; non-compute = span - compute - idle;
    overlap = |U(comm) ∩ U(compute)| / |U(comm)| (HTA ``comp_comm_overlap_pctg``). Ratios are 0..1.
    """
    g = gpu
    if hta_compat:
        if steps is not None and steps["step"].nunique() >= 2:
            last = steps["start_ms"].max()
            if launches is not None and not launches.empty:
                kept = set(launches.loc[launches["start_ms"] < last, "correlation"])
                g = g[g["correlation"].isin(kept)]
            else:  # no launch events: approximate "launched before" by "started before"
                g = g[g["start_ms"] < last]
        # on the file's own µs values (the ms columns cannot round-trip them exactly)
        ts = np.ceil(g["ts_us"].to_numpy())
        end = np.floor((g["ts_us"] + g["dur_us"]).to_numpy())
        g = g.assign(start_ms=ts / 1e3, dur_ms=(end - ts) / 1e3)
    if g.empty:
        return {}
    s = g["start_ms"].to_numpy()
    e = (g["start_ms"] + g["dur_ms"]).to_numpy()
    alls = union(s, e)
    comp_mask = (g["kind"] == "kernel").to_numpy()
    comm_mask = (g["kind"] == "comm").to_numpy()
    comp = union(s[comp_mask], e[comp_mask])
    comm = union(s[comm_mask], e[comm_mask])
    span = float(alls[1].max() - alls[0].min())
    busy = length(*alls)
    compute = length(*comp)
    idle = span - busy
    comm_len = length(*comm)
    overlap = length(*intersect(comm, comp))
    return {
        "kernel_span_ms": span, "idle_ms": idle, "compute_ms": compute, "non_compute_ms": span - compute - idle,
        "idle_ratio": idle / span if span else math.nan, "compute_ratio": compute / span if span else math.nan,
        "non_compute_ratio": (span - compute - idle) / span if span else math.nan,
        "comm_kernel_ms": comm_len, "comm_comp_overlap_ms": overlap,
        "comm_comp_overlap_ratio": overlap / comm_len if comm_len else math.nan,
    }
