"""Operator rows and their statistics for EVERY rank: the one place (issue 27 point 1).

* :func:`op_rows` — one DataFrame of the operator rows of every rank (cached on the run), columns
  :data:`ROW_COLUMNS`. The source is chosen PER RANK, the first of :data:`SOURCES` that has rows for that rank
  (the drill-down's rule, reportgen/sections/drilldown.py, now defined here once):

  ``kernels`` (kernel_details.csv / profiler DB; name, type, engine = ``core``) > ``op_stats`` (op_statistic.csv:
  per type and core, ALREADY AGGREGATED: one row per (type, core) with ``count`` > 1, ``dur_ms`` = the total,
  ``min_ms`` / ``max_ms`` as written, no name, no step) > ``gpu_ops`` (Kineto device ops; type = engine = ``kind``:
  kernel / comm / memcpy / memset) > ``cpu_ops`` (CPU-only Kineto traces; name only, engine ``host``) >
  ``device_timeline`` recorded compute intervals (host ops of cpu_op_execute_timestamp, timeline display files;
  type = ``<Type>`` of ``.../<Type>-op<N>``, engine ``device``; ``HOST_CPU`` when the lane says so) >
  ``step_ops`` (the MindInsight step trace's communication ops; engine ``comm``).

  Every event row has ``count`` = 1 and ``min_ms`` = ``max_ms`` = ``dur_ms``. ``step`` is the table's own step
  where it has one, else the step window (:func:`reportgen.timeline.step_windows`) holding the op's start, -1 when
  none / unknown. ``op_class`` is the family's class (schema.OP_CLASSES).
* :func:`work_rows` — the rows without communication and waits (:data:`LEFT_OUT`), per rank; a rank whose rows are
  all left out keeps them all (the step trace has only communication ops). ``cpu_ops`` rows are all kept (the
  drill-down's rule: every op of a CPU-only trace, ``c10d::`` ones classed communication).
* :func:`op_summary` — count, total_ms, mean_ms, min_ms, max_ms, std_ms, share_ratio per ``by`` group.
  ``std_ms`` is the SAMPLE standard deviation (ddof = 1, pandas' default), as HTA's ``kernel_breakdown`` (its
  ``stddev``: pandas ``groupby(...).std()``); NaN for a group of one call or a group holding pre-aggregated
  ``op_stats`` rows (the file has no spread). ``share_ratio`` = total of the group / total of the rank's rows
  (all rows passed; :func:`work_rows` by default).
* :func:`cluster_summary` — per type (or name, engine) across ranks: total, count, the per-rank totals' min /
  median / max (a rank with rows but none of that type counts as 0), the rank with the max, and the spread
  ``(max - median) / median`` (the outlier's excess over the typical rank).
* :func:`comm_summary` — per (rank, op_type) count / total / mean / min / max of ``comm_ops.elapse_ms``: the
  msprof-analyze ``hccl_sum`` equivalent (its per-rank, per-op-type stats of communication op durations).

Functions take the ``Run`` and never name a section; sections read these.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .frames import agg
from .model import Run
from .timeline import assign_steps, gpu_op_class, host_op_class, op_type, step_windows

#: columns of :func:`op_rows`
ROW_COLUMNS = ["rank", "step", "name", "type", "engine", "op_class", "start_ms", "dur_ms", "count", "min_ms",
               "max_ms", "source"]
#: sources in order of preference, per rank
SOURCES = ("kernels", "op_stats", "gpu_ops", "cpu_ops", "device_timeline", "step_ops")
#: op classes left out of :func:`work_rows`: communication has its own section, a wait is time spent on nothing
LEFT_OUT = ("communication", "wait")
STAT_COLUMNS = ["count", "total_ms", "mean_ms", "min_ms", "max_ms", "std_ms", "share_ratio"]


def _frame(rank, step, name, typ, engine, op_class, start, dur, source, count=None, mn=None, mx=None):
    """The rows of one source. Columns the source table already holds are its arrays, not copies: read-only views
    (a write through this frame raises), shared on the rule that a run's tables are never written in place once the
    reader has made them. An event row's ``min_ms`` / ``max_ms`` are its ``dur_ms`` array and its ``count`` of 1 takes
    no memory per row (a read-only broadcast). At 1,024 generated Kineto ranks the rows held 86 MiB beside the device
    ops, 28 MiB now (issue 30; with pandas 3: pandas 2 copies them again when ``op_rows`` selects its columns)."""
    n = len(rank)
    dur = np.asarray(dur, dtype=float)
    out = pd.DataFrame(copy=False, data={
        "rank": np.asarray(rank, dtype=np.int64),
        "step": np.asarray(step, dtype=np.int64) if step is not None else np.full(n, -1, np.int64),
        "name": np.asarray(name, dtype=object) if name is not None else np.full(n, None, object),
        "type": np.asarray(typ, dtype=object) if typ is not None else np.full(n, None, object),
        "engine": np.asarray(engine, dtype=object) if not isinstance(engine, str) else engine,
        "op_class": np.asarray(op_class, dtype=object) if not isinstance(op_class, str) else op_class,
        "start_ms": np.asarray(start, dtype=float) if start is not None else np.full(n, np.nan),
        "dur_ms": dur,
        "count": np.asarray(count, dtype=np.int64) if count is not None else np.broadcast_to(np.int64(1), n),
        "min_ms": np.asarray(mn, dtype=float) if mn is not None else dur,
        "max_ms": np.asarray(mx, dtype=float) if mx is not None else dur,
        "source": source,
    })
    return out


def _steps_of(d: pd.DataFrame, col: str | None, windows) -> np.ndarray:
    if col is not None and col in d:
        s = pd.to_numeric(d[col], errors="coerce")
        return s.fillna(-1).astype(np.int64).to_numpy()
    if "start_ms" in d and windows is not None:
        return assign_steps(d, windows)
    return np.full(len(d), -1, np.int64)


def _from(run: Run, name: str, d: pd.DataFrame, windows) -> pd.DataFrame | None:
    """The rows of source ``name`` (``d``: its rows of the ranks it serves)."""
    if name == "kernels":
        d = d.dropna(subset=["dur_ms"])
        return _frame(d["rank"], _steps_of(d, "step", None), d["name"].astype(str), d["type"].astype(str),
                      d["core"].astype(str), d["op_class"], d["start_ms"], d["dur_ms"], name)
    if name == "op_stats":
        return _frame(d["rank"], None, None, d["op_type"].astype(str), d["core"].astype(str), d["op_class"], None,
                      d["total_ms"].astype(float), name, count=d["count"].fillna(0).astype(np.int64),
                      mn=d["min_ms"] if "min_ms" in d else np.full(len(d), np.nan),
                      mx=d["max_ms"] if "max_ms" in d else np.full(len(d), np.nan))
    if name == "gpu_ops":
        d = d.dropna(subset=["dur_ms"])
        kind = d["kind"].astype(str)
        return _frame(d["rank"], _steps_of(d, None, windows), d["name"].astype(str), kind, kind,
                      gpu_op_class(d["kind"]).to_numpy(), d["start_ms"], d["dur_ms"], name)
    if name == "cpu_ops":
        d = d.dropna(subset=["dur_ms"])
        return _frame(d["rank"], _steps_of(d, None, windows), d["name"].astype(str), None, "host",
                      host_op_class(d["name"]), d["start_ms"], d["dur_ms"], name)
    if name == "device_timeline":
        d = d[(d["kind"] == "compute") & (d["source"] == "trace")]
        if d.empty:
            return None
        lane = d["stream"].astype(str).str.upper()
        engine = np.where(lane.str.contains("HOST_CPU|CPU OP|HOST", regex=True).to_numpy(), "HOST_CPU", "device")
        return _frame(d["rank"], _steps_of(d, "step", None), d["name"].astype(str), op_type(d["name"]).to_numpy(),
                      engine, d["op_class"], d["start_ms"], (d["end_ms"] - d["start_ms"]).to_numpy(), name)
    if name == "step_ops":
        d = d.dropna(subset=["dur_ms"])
        typ = d["op_type"].astype(str) if "op_type" in d else None
        return _frame(d["rank"], _steps_of(d, "step", None), d["op"].astype(str), typ, "comm", "communication",
                      d["start_ms"], d["dur_ms"], name)
    return None


#: where :func:`op_rows` keeps its rows on the run (released by reportgen/sections once their readers are analysed:
#: sections.RELEASE_AFTER)
ROWS_CACHE = "_opstats_cache"


def op_rows(run: Run) -> pd.DataFrame:
    """Operator rows of every rank (module doc), cached on the run; empty frame (the columns) when no source."""
    cache = run.__dict__.setdefault(ROWS_CACHE, {})
    if "rows" in cache:
        return cache["rows"]
    parts, served = [], np.array([], dtype=np.int64)
    windows = None
    want = np.asarray(sorted(int(r) for r in run.ranks), dtype=np.int64)
    for name in SOURCES:
        if len(want) and np.isin(want, served).all():
            break  # every rank served: later sources (the device timeline is built on demand) are not read
        t = run.table(name)
        if t is None or t.empty:
            continue
        t = t[~t["rank"].isin(served)]
        if t.empty:
            continue
        if name in ("gpu_ops", "cpu_ops") and windows is None:
            windows = step_windows(run)
        f = _from(run, name, t, windows)
        if f is None or f.empty:
            continue
        parts.append(f)
        served = np.union1d(served, f["rank"].unique())
    if len(parts) == 1:  # one source serves every rank (the common case): its frame, not a concatenated copy
        out = parts[0][ROW_COLUMNS]
    elif parts:
        out = pd.concat(parts, ignore_index=True)[ROW_COLUMNS]
    else:
        out = _frame([], None, None, None, "", "", None, [], "")[ROW_COLUMNS]
    cache["rows"] = out
    return out


def work_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` without :data:`LEFT_OUT` classes, per rank; a rank with nothing else keeps all its rows; ``cpu_ops``
    rows all stay (module doc)."""
    out = rows["op_class"].isin(LEFT_OUT).to_numpy() & (rows["source"] != "cpu_ops").to_numpy()
    has_work = pd.Series(~out).groupby(rows["rank"].to_numpy()).any()
    keep = ~out | ~rows["rank"].map(has_work).fillna(False).to_numpy(dtype=bool)
    return rows[keep]


def compute_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """``rows`` without :data:`LEFT_OUT` classes on EVERY rank (no fallback: a rank whose rows are all communication
    keeps none); ``cpu_ops`` rows all stay (:func:`work_rows`). Empty when the run has only communication ops (the
    MindInsight step trace): then there is no operator data to rank ranks or types by."""
    out = rows["op_class"].isin(LEFT_OUT).to_numpy() & (rows["source"] != "cpu_ops").to_numpy()
    return rows[~out]


def scope_rows(rows: pd.DataFrame, steps) -> pd.DataFrame:
    """``rows`` in the steps in scope (``steps``: reportgen.facts.RunFacts.steps; None = every row): rows of another
    step (warm-up, outside the step trace) are left out; rows with no step (-1: pre-aggregated op_statistic rows, ops
    outside every step window) stay, as the profiler wrote them."""
    if steps is None:
        return rows
    keep = (rows["step"] < 0).to_numpy() | rows["step"].isin(list(steps)).to_numpy()
    return rows[keep]


def left_out_note(rows: pd.DataFrame, rank: int) -> str:
    """What :func:`work_rows` leaves out of ``rank`` (the drill-down's source label); '' when nothing."""
    r = rows[rows["rank"] == rank]
    if r.empty:
        return ""
    out = r["op_class"].isin(LEFT_OUT) & (r["source"] != "cpu_ops")
    if not out.any() or out.all():
        return ""
    waits = int((r["op_class"] == "wait").sum())
    return "communication kernels left out" + (f", {waits:,} waits" if waits else "")


def _text_key(col: pd.Series) -> pd.Series:
    """A text group key as :func:`summarize` groups it: None (no type / no name) is ''."""
    if (col.dtype == object or pd.api.types.is_string_dtype(col.dtype)) and col.isna().any():
        return col.fillna("")
    return col


def key_codes(rows: pd.DataFrame, columns) -> dict:
    """column -> (codes, values) of the text keys of ``rows`` as :func:`summarize` groups them (:func:`_text_key`), for
    a caller that summarises one table by several keys: each text column is factorised once, not once per call (a
    text key of a million rows costs most of a grouping)."""
    out = {}
    for c in columns:
        col = rows[c]
        if pd.api.types.is_string_dtype(col.dtype) and (
                col.dtype != object or pd.api.types.infer_dtype(col, skipna=True) in ("string", "empty")):
            out[c] = pd.factorize(_text_key(col), sort=False)  # (texts only: other values keep pandas' own keys)
    return out


def summarize(rows: pd.DataFrame, by=("rank", "type"), codes: dict | None = None) -> pd.DataFrame:
    """Statistics of ``rows`` per ``by`` group (module doc): ``by`` columns + :data:`STAT_COLUMNS`; share of the
    group's rank total when ``rank`` is in ``by``, else of the whole. ``codes``: :func:`key_codes` of ``rows`` (the
    same groups, in the same order: codes number the values in order of first appearance)."""
    by = [by] if isinstance(by, str) else list(by)
    if rows.empty:
        return pd.DataFrame(columns=by + STAT_COLUMNS)
    codes = codes or {}
    if "source" in codes:  # (a text comparison per row, five times for one table)
        source, values = codes["source"]
        agg_rows = np.isin(source, np.flatnonzero(np.asarray(values, dtype=object) == "op_stats"))
    else:
        agg_rows = (rows["source"] == "op_stats").to_numpy()
    d = rows.assign(_agg=agg_rows)
    keys = []
    for c in by:  # None keys (no type / no name) group as ''
        if c in codes:
            if len(codes[c][0]) != len(d):
                raise ValueError(f"summarize: the codes of {c!r} are not those of these rows")
            keys.append(pd.Series(codes[c][0], index=d.index, name=c))
        else:
            d[c] = _text_key(d[c])
            keys.append(c)
    g = d.groupby(keys, sort=False, dropna=False)
    out = agg(g, count=("count", "sum"), total_ms=("dur_ms", "sum"), min_ms=("min_ms", "min"),
              max_ms=("max_ms", "max"), std_ms=("dur_ms", "std"), _agg=("_agg", "any")).reset_index()
    for c in by:
        if c in codes:
            out[c] = codes[c][1].take(out[c].to_numpy())
    count = out["count"].astype(np.int64).to_numpy()
    total = out["total_ms"].to_numpy()
    if "rank" in by:
        tot = out.groupby("rank")["total_ms"].transform("sum").to_numpy()
    else:
        tot = np.full(len(out), float(out["total_ms"].sum()))
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = total / np.where(count > 0, count, np.nan)
        share = total / np.where(tot > 0, tot, np.nan)
    out = pd.DataFrame({**{c: out[c].array for c in by}, "count": count, "total_ms": total, "mean_ms": mean,
                        "min_ms": out["min_ms"].array, "max_ms": out["max_ms"].array,
                        "std_ms": np.where(out["_agg"].to_numpy(dtype=bool), np.nan, out["std_ms"].to_numpy()),
                        "share_ratio": share})  # the columns at once (one at a time: ~0.1 ms each)
    out = out.sort_values(by[:1] + ["total_ms"], ascending=[True, False], kind="stable") if by[0] == "rank" else \
        out.sort_values("total_ms", ascending=False, kind="stable")
    return out.reset_index(drop=True)


def op_summary(run: Run, by=("rank", "type"), work_only: bool = True) -> pd.DataFrame:
    """:func:`summarize` of :func:`op_rows` (:func:`work_rows` when ``work_only``)."""
    rows = op_rows(run)
    return summarize(work_rows(rows) if work_only else rows, by)


def cluster_stats(per_rank: pd.DataFrame, key: str, ranks) -> pd.DataFrame:
    """``per_rank`` (rank, ``key``, total_ms, count) -> per ``key``: total_ms, count, ranks (with the key),
    rank_min_ms / rank_median_ms / rank_max_ms of the per-rank totals over ``ranks`` (absent = 0), max_rank,
    spread_ratio = (max - median) / median (NaN when the median is 0)."""
    cols = [key, "total_ms", "count", "ranks", "rank_min_ms", "rank_median_ms", "rank_max_ms", "max_rank",
            "spread_ratio", "share_ratio"]
    if per_rank.empty:
        return pd.DataFrame(columns=cols)
    ranks = np.asarray(sorted(set(int(r) for r in ranks)), dtype=np.int64)
    keys, v = _key_by_rank(per_rank, key, ranks)
    out = pd.DataFrame({key: keys, "total_ms": v.sum(axis=1)})
    cnt = per_rank.groupby(key)["count"].sum()
    nr = per_rank[per_rank["total_ms"] > 0].groupby(key)["rank"].nunique()
    out["count"] = out[key].map(cnt).fillna(0).astype(np.int64).to_numpy()
    out["ranks"] = out[key].map(nr).fillna(0).astype(np.int64).to_numpy()
    out["rank_min_ms"] = v.min(axis=1)
    med = np.median(v, axis=1)
    out["rank_median_ms"] = med
    out["rank_max_ms"] = v.max(axis=1)
    out["max_rank"] = ranks[v.argmax(axis=1)]
    with np.errstate(divide="ignore", invalid="ignore"):
        out["spread_ratio"] = np.where(med > 0, (out["rank_max_ms"] - med) / med, np.nan)
    whole = float(out["total_ms"].sum())
    out["share_ratio"] = out["total_ms"] / whole if whole > 0 else np.nan
    return out.sort_values("total_ms", ascending=False, kind="stable").reset_index(drop=True)[cols]


def _key_by_rank(per_rank: pd.DataFrame, key: str, ranks: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the sorted keys, keys x ``ranks`` matrix of ``total_ms``; 0 where a rank has no row): the pivot table of
    ``per_rank`` summed per key and rank, placed directly when each (key, rank) has one row (a summary's rows)."""
    k, r = per_rank[key], per_rank["rank"]
    if not (k.isna().any() or r.isna().any() or per_rank.duplicated([key, "rank"]).any()):
        codes, uniques = pd.factorize(k, sort=True)
        rank_of = r.to_numpy(dtype=np.int64)
        col = np.searchsorted(ranks, rank_of)
        ok = (col < len(ranks)) & (ranks[np.minimum(col, len(ranks) - 1)] == rank_of) if len(ranks) else \
            np.zeros(len(rank_of), dtype=bool)
        total = per_rank["total_ms"].to_numpy(dtype=float)
        v = np.zeros((len(uniques), len(ranks)))
        v[codes[ok], col[ok]] = np.where(np.isnan(total), 0.0, total + 0.0)[ok]  # a sum of one: NaN 0, -0.0 0.0
        return uniques.to_numpy(), v
    piv = per_rank.pivot_table(index=key, columns="rank", values="total_ms", aggfunc="sum", fill_value=0.0)
    piv = piv.reindex(columns=ranks, fill_value=0.0)
    return piv.index.to_numpy(), piv.to_numpy(dtype=float)


def cluster_summary(run: Run, by: str = "type", work_only: bool = True) -> pd.DataFrame:
    """Per ``by`` (type | name | engine) across ranks (:func:`cluster_stats`); the ranks are those with rows."""
    rows = op_rows(run)
    rows = work_rows(rows) if work_only else rows
    per_rank = summarize(rows, ("rank", by))
    return cluster_stats(per_rank, by, rows["rank"].unique())


COMM_COLUMNS = ["rank", "op_type", "count", "total_ms", "mean_ms", "min_ms", "max_ms", "share_ratio", "per_step_ms"]


def comm_summary(run: Run, steps=None) -> pd.DataFrame | None:
    """Per (rank, op_type) of ``comm_ops`` in the steps in scope (``steps``, as :func:`scope_rows`; None = every
    row): count, total / mean / min / max of ``elapse_ms``, the share of the rank's communication op time
    (msprof-analyze ``hccl_sum``) and ``per_step_ms`` = total / the rank's steps in scope with communication ops,
    so a rank's ``per_step_ms`` summed over its op types is the communication section's **communication op time**
    of that rank (reportgen.facts.comm_op_ms averaged over the same steps); None without ``comm_ops``."""
    c = run.table("comm_ops")
    if c is None or c.empty:
        return None
    c = c.dropna(subset=["elapse_ms"])
    if steps is not None and "step" in c:
        c = c[c["step"].isin(list(steps))]
        if c.empty:
            return None
    g = agg(c.groupby(["rank", "op_type"], sort=True), count=("elapse_ms", "size"), total_ms=("elapse_ms", "sum"),
            min_ms=("elapse_ms", "min"), max_ms=("elapse_ms", "max"))
    g = g.reset_index()
    g["mean_ms"] = g["total_ms"] / g["count"]
    tot = g.groupby("rank")["total_ms"].transform("sum")
    g["share_ratio"] = g["total_ms"] / tot.where(tot > 0)
    if "step" in c:
        ns = c[c["step"] >= 0].groupby("rank")["step"].nunique()
        g["per_step_ms"] = g["total_ms"] / g["rank"].map(ns).where(lambda s: s > 0).to_numpy()
    else:
        g["per_step_ms"] = np.nan
    return g.sort_values(["rank", "total_ms"], ascending=[True, False], kind="stable").reset_index(drop=True)[
        COMM_COLUMNS]


def steps_per_rank(rows: pd.DataFrame, no_step: int = 1) -> pd.Series:
    """rank -> number of distinct steps (>= 0) its rows fall in, for per-step averages (pass rows already cut to the
    steps in scope, :func:`scope_rows`: then the rank's steps in scope with rows, as
    ``reportgen.facts.RunFacts.per_rank_mean`` averages per-step rows). A rank whose rows have no step at all
    (op_statistic) gets ``no_step`` (the run's profiled steps, 1 without step facts)."""
    s = rows[rows["step"] >= 0].groupby("rank")["step"].nunique()
    return s.reindex(rows["rank"].unique(), fill_value=0).replace(0, max(1, int(no_step)))
