"""Per-rank drill-down for the execution section (a helper module, not a registered section).

* ``rank_blocks``: per rank, its share of the busiest rank's FLOPs (``flops_ratio``) and FLOPS
  (``flops_per_s_ratio``), from :func:`reportgen.sections.flops.analyze`, and its peak memory over device
  capacity (``peak_memory_ratio``, null when the capacity is unknown), from
  :func:`reportgen.sections.memory.analyze`; plus the pipeline stage.
* ``chosen_ranks``: the run's slowest, fastest and median rank (reportgen/facts.py), plus the ranks the user asked
  for (option ``ranks``), at most ``MAX_CHOSEN``.
* ``top_operators``: per operator name and per operator type, count / total / mean / max time and share of
  the rank's total, top ``TOP_N`` by total time plus an "others" row. Communication and waits (``op_class``
  communication / wait, decided once per family at the reader edge: :mod:`reportgen.schema`; ``gpu_ops`` by
  :func:`reportgen.timeline.gpu_op_class`) are left out, so the tops and shares are of the device's own work
  (communication has its own section); the step trace (step_trace_raw_<rank>_detail_time.csv) only has
  communication ops, so they stay. Each bar is coloured by the op class of its rows (the class of most of its
  time). Sources in order of preference: ``kernels`` (kernel_details.csv or the profiler DB; name, type) or
  ``op_stats`` (op_statistic.csv; type only), a torch.profiler trace's ``gpu_ops`` (name, kind) or ``cpu_ops``
  (CPU-only traces; name only), the ``device_timeline``'s recorded compute intervals (the host ops of
  cpu_op_execute_timestamp_<rank>.txt, the timeline display files; type = ``<Type>`` of ``.../<Type>-op<N>``),
  the step trace's ``step_ops`` (its communication ops; type = the reader's ``op_type``).
  The rows and the choice of source per rank are :func:`reportgen.opstats.op_rows` (one definition).

* ``rank_step_lines``: per chosen rank, over ONE step (the first step of the Marey view when the rank has it,
  else the rank's first step; windows from :func:`reportgen.timeline.step_windows`), memory
  in use (MB: :func:`memory_series`, the memory section's in-use line of the rank,
  :func:`reportgen.sections.memory.in_use_series`: the allocated of the device series whose allocated peaks highest,
  else the series of the reserved peak; the host series on a run with host memory only; so the line's highest point
  over the whole run is the rank's allocated peak; which records are memory in use is each family's rule, written
  once in its reader;
  a run with only a profiler's own peak, ``memory_peaks``, has no line) and cumulative FLOPs (the canonical
  ``op_flops`` rows with FLOPs and a start, :func:`reportgen.sections.flops.counted_ops`, counted by op start like
  the FLOPs section), x = ms from the step start, at most ``MAX_LINE_POINTS`` per rank
  and metric (max per bin for memory, last per bin for the monotonic cumulative FLOPs).

``extend_analysis`` / ``extend_view`` are what ``execution.analyze`` / ``execution.present`` call.
"""

from __future__ import annotations

import math

import numpy as np

from .. import charts as vl
import pandas as pd

from .. import fmt, palette
from ..frames import agg
from ..charts import PLOT_MAX_WIDTH, axis, fit, fit_concat, in_unit, role_color, sequential, tip, to_spec
from ..errors import Unavailable
from .. import facts, opstats
from ..model import Run
from ..report import Analysis, Column, Control, Figure, Table
from ..timeline import positions_by_rank, step_windows

# No NEEDS: the drill-down is a part of the execution section, which declares the tables it reads.
#: operators / types kept per rank and level (plus one "others" row)
TOP_N = 15
#: at most this many ranks are drilled into
MAX_CHOSEN = 12
#: at most this many points per rank and metric in rank_step_lines
MAX_LINE_POINTS = 300
LINE_COLUMNS = ["rank", "metric", "t_ms", "value"]

BLOCKS = [("flops_ratio", "FLOPs / busiest rank"), ("flops_per_s_ratio", "FLOPS / fastest rank"),
          ("peak_memory_ratio", "Peak memory / capacity")]
OPS_COLUMNS = ["rank", "role", "level", "name", "count", "total_ms", "mean_ms", "max_ms", "share_ratio"]


def _get(options, key, default=None):
    return options.get(key, default) if options is not None else default


def _stage(run: Run, r: int):
    s = run.stage_of(int(r))
    return None if s is None or (isinstance(s, float) and math.isnan(s)) else int(s)


# --------------------------------------------------------------------------- rank blocks


def rank_blocks(run: Run, options=None) -> pd.DataFrame | None:
    """rank, stage, flops_ratio, flops_per_s_ratio, peak_memory_ratio (whichever the data allows)."""
    from . import analysis_of  # late: keeps execution importable on its own
    parts = []
    try:
        pr = analysis_of("flops", run, options).tables["per_rank"]
        f = pd.DataFrame({"rank": pr["rank"].astype(int)})
        for col, out in (("flops", "flops_ratio"), ("flops_per_s", "flops_per_s_ratio")):
            if col in pr:
                v = pd.to_numeric(pr[col], errors="coerce")
                mx = v.max()
                f[out] = (v / mx).to_numpy() if mx and mx > 0 else math.nan
        parts.append(f)
    except Unavailable:
        pass
    try:
        pr = analysis_of("memory", run, options).tables["per_rank"]
        parts.append(pd.DataFrame({"rank": pr["rank"].astype(int), "peak_mb": pr["peak_mb"].astype(float),
                                   "peak_memory_ratio": pr["peak_ratio"].astype(float)}))
    except Unavailable:
        pass
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out.merge(p, on="rank", how="outer")
    out = out.drop_duplicates("rank")
    out["stage"] = out["rank"].map(lambda r: _stage(run, r)).astype(object)
    out = out.sort_values("rank").reset_index(drop=True)
    cols = ["rank", "stage"] + [c for c, _ in BLOCKS if c in out] + (["peak_mb"] if "peak_mb" in out else [])
    return out[cols]


def lane_order(run: Run, ranks) -> list[int]:
    """Ranks ordered like the Marey lanes: stage (unknown last), then rank."""
    return sorted((int(r) for r in ranks), key=lambda r: (_stage(run, r) is None, _stage(run, r) or 0, r))


def blocks_figure(blocks: pd.DataFrame, order: list[int]) -> Figure | None:
    """Heat strips; the data is one short row per rank (folded into blocks in Vega) to stay small at 1000s of
    ranks: r = rank, s = stage, o = lane position, one key per block with its share."""
    keys = {"flops_ratio": "f", "flops_per_s_ratio": "p", "peak_memory_ratio": "m"}
    shown = [(col, label) for col, label in BLOCKS if col in blocks and blocks[col].notna().any()]
    if not shown:
        return None
    pos = {r: i for i, r in enumerate(order)}
    rows = []
    for rec in blocks.to_dict(orient="records"):
        r = int(rec["rank"])
        st = rec.get("stage")
        row = {"r": r, "s": None if st is None or pd.isna(st) else int(st), "o": pos.get(r, len(pos) + r)}
        for col, _ in shown:
            v = rec.get(col)
            row[keys[col]] = None if v is None or pd.isna(v) else round(float(v), 4)
        rows.append(row)
    df = pd.DataFrame(rows)
    labels = {keys[c]: label for c, label in shown}
    block_expr = " : ".join(f"datum.key == '{k}' ? '{lab}'" for k, lab in labels.items()) + " : datum.key"
    n = len(df)
    chart = vl.Chart(df).transform_fold(list(labels), as_=["key", "share"]).transform_filter(
        "isValid(datum.share)").transform_calculate(
        block=block_expr,
        lane="isValid(datum.s) ? 'stage ' + datum.s + ' · rank ' + datum.r : 'rank ' + datum.r",
    ).mark_rect().encode(
        x=vl.X("lane:O", sort=vl.EncodingSortField(field="o", op="min"),
                scale=vl.Scale(paddingInner=0.06 if n <= 128 else 0),
                title="Rank (sorted by stage, then rank)", axis=vl.Axis(labelOverlap=True, labels=n <= 128)),
        y=vl.Y("block:N", sort=[lab for _, lab in shown], title=None, scale=vl.Scale(paddingInner=0.1)),
        color=vl.Color("share:Q", scale=sequential([0, 1]), legend=vl.Legend(**axis("Share", kind="ratio"))),
        tooltip=[vl.Tooltip("r:O", title="Rank"), vl.Tooltip("s:O", title="Stage"),
                 vl.Tooltip("block:N", title="Block"), tip("share", "Share", kind="ratio")],
    ).properties(width=max(200, min(PLOT_MAX_WIDTH, 24 * n)), height=26 * len(shown))
    missing = [label for col, label in BLOCKS if (col, label) not in shown]
    caption = ("One cell per rank and block, ranks in the order of the Marey lanes (stage, then rank); colour = "
               "share (legend). FLOPs and FLOPS are relative to the largest rank; peak memory is relative to the "
               "device capacity." + (f" Not available in this run: {', '.join(missing)}." if missing else ""))
    return Figure("execution-rank-blocks", "Per-rank FLOPs, FLOPS and memory", to_spec(chart), caption=caption,
                  alt="Heat strips of FLOPs share, FLOPS share and peak memory share per rank")


# --------------------------------------------------------------------------- chosen ranks


def chosen_ranks(run: Run, step_table: pd.DataFrame | None = None, options=None) -> dict[int, str]:
    """{rank: role}: the run's slowest, fastest and median rank (reportgen/facts.py), then the asked-for ranks
    (option ``ranks``). ``step_table`` is ignored (kept for callers)."""
    out: dict[int, str] = {}

    def add(r, role):
        r = int(r)
        if r in out:
            if role not in out[r].split(", "):
                out[r] += ", " + role
        elif len(out) < MAX_CHOSEN:
            out[r] = role

    F = facts.of(run, options)  # one definition of slowest / fastest / median rank for the whole report
    if F is not None and F.slowest_rank is not None:
        add(F.slowest_rank, "slowest")
        add(F.fastest_rank, "fastest")
        add(F.median_rank, "median")
    asked = _get(options, "ranks") or []
    if isinstance(asked, (int, str)):
        asked = [asked]
    known = set(int(r) for r in run.ranks)
    for r in asked:
        try:
            r = int(r)
        except (TypeError, ValueError):
            continue
        if r in known:
            add(r, "asked for")
    return out


# --------------------------------------------------------------------------- top operators


def _summarise(df: pd.DataFrame, key: str, level: str) -> pd.DataFrame:
    """df: key column, count, total_ms, max_ms (op_class) -> top TOP_N by total plus 'others'; ``attrs["classes"]``:
    name -> the op class of most of its time."""
    g = agg(df.groupby(key, dropna=False), count=("count", "sum"), total_ms=("total_ms", "sum"),
            max_ms=("max_ms", "max"))
    names = g.index.to_series().astype(str).tolist()
    total = float(g["total_ms"].sum())
    tot = g["total_ms"].to_numpy()
    if np.isnan(tot).any():  # pandas' order (NaN last)
        order = pd.DataFrame({"t": tot, "n": names}).sort_values(["t", "n"], ascending=[False, True],
                                                                 kind="stable").index.to_numpy()
    else:  # by total, largest first, then by name (each name is one group: no tie left)
        order = np.array(sorted(range(len(names)), key=lambda i: (-tot[i], names[i])), dtype=np.int64)
    top, rest = order[:TOP_N], order[TOP_N:]
    count = g["count"].to_numpy()[top].tolist()
    total_ms = tot[top].tolist()
    max_ms = g["max_ms"].to_numpy()[top].tolist()
    names = [names[i] for i in top]
    if len(rest):
        r = g.iloc[rest]
        names.append("others")
        count.append(r["count"].sum())
        total_ms.append(r["total_ms"].sum())
        max_ms.append(r["max_ms"].max())
    count = np.asarray(count).astype(int)
    total_ms = np.asarray(total_ms, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = total_ms / np.where(count > 0, count, np.nan)
    out = pd.DataFrame({"level": level, "name": names, "count": count, "total_ms": total_ms, "mean_ms": mean,
                        "max_ms": np.asarray(max_ms, dtype=float),
                        "share_ratio": total_ms / total if total > 0 else math.nan})
    if "op_class" in df:
        out.attrs["classes"] = _main_class(df[key].astype(str), df["op_class"], df["total_ms"])
    return out


def _main_class(keys: pd.Series, classes: pd.Series, ms: pd.Series) -> dict:
    """key -> the class of most of its time (``ms`` summed per key and class; ties: the first class in sort order; a
    NaN total only when the key has nothing else), keys in sort order."""
    sums = ms.groupby([keys, classes]).sum()
    out: dict = {}
    best: dict = {}
    for (k, c), v in zip(sums.index, sums.to_numpy().tolist()):
        rank = (v == v, v)  # NaN sorts last
        if k not in best or rank > best[k]:
            best[k], out[k] = rank, c
    return out


def _source(run: Run, rank: int) -> tuple[pd.DataFrame | None, str]:
    """Per-rank rows with name / type, count, total_ms, max_ms, op_class and the source name: the rank's rows of
    :func:`reportgen.opstats.op_rows` (the one choice of source per rank) without communication and waits
    (:func:`reportgen.opstats.work_rows`)."""
    rows = opstats.op_rows(run)
    r = rows[rows["rank"] == rank]
    if r.empty:
        return None, ""
    source = str(r["source"].iloc[0])
    what = opstats.left_out_note(r, rank)
    r = opstats.work_rows(r)
    e = pd.DataFrame({"count": r["count"].to_numpy(), "total_ms": r["dur_ms"].to_numpy(dtype=float),
                      "max_ms": r["max_ms"].to_numpy(dtype=float), "op_class": r["op_class"].to_numpy()})
    if r["name"].notna().any():
        e.insert(0, "name", r["name"].astype(str).to_numpy())
    if r["type"].notna().any():
        e.insert(0, "type", r["type"].astype(str).to_numpy())
    if source == "op_stats":
        what = what.replace(" kernels", "")
    elif source == "device_timeline":
        what = "compute intervals"
    return e, (f"{source} ({what})" if what else source)


def top_operators(run: Run, rank: int) -> pd.DataFrame | None:
    """level ('operator' | 'type'), name, count, total_ms, mean_ms, max_ms, share_ratio (top TOP_N + others)."""
    e, source = _source(run, int(rank))
    if e is None or e.empty:
        return None
    parts = []
    if "name" in e:
        parts.append(_summarise(e, "name", "operator"))
    if "type" in e:
        parts.append(_summarise(e, "type", "type"))
    classes = {p["level"].iloc[0]: p.attrs.get("classes", {}) for p in parts if not p.empty}
    out = pd.concat(parts, ignore_index=True)
    out.attrs["source"] = source
    out.attrs["classes"] = classes
    return out


# --------------------------------------------------------------------------- lines over one step


def step_window(run: Run, rank: int, preferred=None) -> tuple[int, float, float] | None:
    """(step, start_ms, end_ms) of the rank: the first of ``preferred`` steps it has, else its first step."""
    ts = step_windows(run)
    if ts is None:
        return None
    t = ts[ts["rank"] == rank].dropna(subset=["start_ms", "end_ms"]).sort_values(["step", "start_ms"])
    if t.empty:
        return None
    for s in preferred or []:
        hit = t[t["step"] == s]
        if not hit.empty:
            row = hit.iloc[0]
            break
    else:
        row = t.iloc[0]
    return int(row["step"]), float(row["start_ms"]), float(row["end_ms"])


def downsample(t: pd.Series, v: pd.Series, how: str, span: float, n: int = MAX_LINE_POINTS) -> pd.DataFrame:
    """t_ms, value with at most n points: equal-width time bins over [0, span], keeping per bin the row with the
    max value (``how="max"``) or the last row (``how="last"``)."""
    d = pd.DataFrame({"t_ms": t.to_numpy(dtype=float), "value": v.to_numpy(dtype=float)}).reset_index(drop=True)
    if len(d) <= n:
        return d
    width = (span if span > 0 else float(d["t_ms"].max()) or 1.0) / n
    b = (d["t_ms"] // width).clip(0, n - 1).astype(int)
    keep = d.groupby(b)["value"].idxmax() if how == "max" else d.groupby(b).tail(1).index
    return d.loc[sorted(keep)].reset_index(drop=True)


def memory_series(run: Run) -> pd.DataFrame | None:
    """rank, ts_ms, mb: the memory IN USE of each rank, :func:`reportgen.sections.memory.in_use_series` (the one
    definition: the allocator's allocated where the data has it, e.g. a framework allocator rather than a flat
    process-level reserved line; else the series the memory section takes its reserved peak from; the host series on a run with
    host memory only); None when the run has no usable samples."""
    from .memory import in_use_series  # late: keeps execution importable on its own
    s = in_use_series(run.table("memory_samples"))
    if s is None:
        return None
    return pd.DataFrame({"rank": s["rank"].astype(int).to_numpy(), "ts_ms": s["ts_ms"].astype(float).to_numpy(),
                         "mb": s["mb"].astype(float).to_numpy()})


def memory_line(run: Run, rank: int, start: float, end: float,
                series: pd.DataFrame | None = None) -> pd.DataFrame | None:
    """t_ms, value (MB in use) over [start, end): the level at the step start (last record before it) then
    every record inside the window. ``series``: :func:`memory_series` of the run (computed when not given)."""
    series = memory_series(run) if series is None else series
    if series is None:
        return None
    m = series[series["rank"] == rank]
    if m.empty:
        return None
    m = m.sort_values("ts_ms", kind="stable")
    inside = m[(m["ts_ms"] >= start) & (m["ts_ms"] < end)]
    before = m[m["ts_ms"] < start]
    if inside.empty and before.empty:
        return None
    if not before.empty:
        inside = pd.concat([pd.DataFrame({"ts_ms": [start], "mb": [before["mb"].iloc[-1]]}), inside])
    return _to_step_end(downsample(inside["ts_ms"] - start, inside["mb"], "max", end - start), end - start)


def _to_step_end(d: pd.DataFrame, span: float) -> pd.DataFrame:
    """``d`` (t_ms, value) with its last value held to the step end, so the x-axis is the whole step (a line that
    stops at 5 ms of a 119 ms step read as a 5 ms step)."""
    if d.empty or not span > float(d["t_ms"].iloc[-1]):
        return d
    return pd.concat([d, pd.DataFrame({"t_ms": [float(span)], "value": [float(d["value"].iloc[-1])]})],
                     ignore_index=True)


def _flops_events(run: Run, rank: int) -> pd.DataFrame | None:
    """start_ms, flops of the counted ops of the rank: the canonical ``op_flops`` rows with FLOPs and a start
    (:func:`reportgen.sections.flops.counted_ops`)."""
    from .flops import counted_ops  # late: keeps execution importable on its own
    ops = counted_ops(run.table("op_flops"))
    if ops is None:
        return None
    ops = ops[(ops["rank"] == rank) & ops["start_ms"].notna()]
    if ops.empty:
        return None
    return pd.DataFrame({"start_ms": ops["start_ms"].astype(float).to_numpy(),
                         "flops": ops["flops"].astype(float).to_numpy()})


def flops_line(run: Run, rank: int, start: float, end: float) -> pd.DataFrame | None:
    """t_ms, value (cumulative FLOPs of the ops starting in [start, end), from 0 at the step start)."""
    e = _flops_events(run, rank)
    if e is None:
        return None
    e = e[(e["start_ms"] >= start) & (e["start_ms"] < end)].sort_values("start_ms", kind="stable")
    if e.empty:
        return None
    t = pd.concat([pd.Series([0.0]), e["start_ms"] - start], ignore_index=True)
    v = pd.concat([pd.Series([0.0]), e["flops"].cumsum()], ignore_index=True)
    return _to_step_end(downsample(t, v, "last", end - start), end - start)


def rank_step_lines(run: Run, ranks, preferred_steps=None) -> tuple[pd.DataFrame | None, dict]:
    """(rank, metric, t_ms, value rows; {rank: step used}) for the ranks the data allows."""
    parts, used = [], {}
    mem = memory_series(run)
    if mem is None:
        mem = pd.DataFrame({"rank": pd.Series(dtype="int64"), "ts_ms": pd.Series(dtype=float),
                            "mb": pd.Series(dtype=float)})
    for r in ranks:
        r = int(r)
        w = step_window(run, r, preferred_steps)
        if w is None:
            continue
        step, start, end = w
        got = False
        for metric, fn in (("memory_mb", lambda *a: memory_line(*a, series=mem)), ("flops_cumulative", flops_line)):
            d = fn(run, r, start, end)
            if d is not None and not d.empty:
                parts.append(d.assign(rank=r, metric=metric))
                got = True
        if got:
            used[str(r)] = step
    if not parts:
        return None, used
    return pd.concat(parts, ignore_index=True)[LINE_COLUMNS], used


#: what the memory line is, for captions (definition: reportgen.sections.memory.in_use_series)
MEMORY_LINE_NOTE = ("Memory in use = the allocator's allocated memory where the data has it (the framework "
                    "allocator, not a flat process-level reserved line), else the reserved series of the memory "
                    "section's peak; its top is the rank's allocated peak, not the reserved peak.")


def _lines_figure(rank: int, role: str, step, lines: pd.DataFrame) -> Figure | None:
    labels = {"memory_mb": ("Memory in use", "mb", "memory"),
              "flops_cumulative": ("Cumulative FLOPs", "flop", "compute")}
    t_unit, t_factor = fmt.unit_for("ms", lines["t_ms"])
    charts = []
    for metric, (title, kind, role_) in labels.items():
        d = lines[lines["metric"] == metric][["t_ms", "value"]].astype(float).round(4)
        if d.empty:
            continue
        unit, factor = fmt.unit_for(kind, d["value"])
        charts.append(in_unit(vl.Chart(d), factor, "value").transform_calculate(
            t_u=f"datum.t_ms / {float(t_factor)!r}").mark_line(
            color=palette.ROLE[role_], interpolate="step-after" if metric == "memory_mb" else "linear").encode(
            x=vl.X("t_u:Q", axis=vl.Axis(**axis("Time from the step start", t_unit))),
            y=vl.Y("value_u:Q", axis=vl.Axis(**axis(title, unit))),
            tooltip=[tip("t_u", "Time", t_unit), tip("value_u", title, unit)],
        ).properties(width="container", height=110))
    if not charts:
        return None
    chart = fit_concat(vl.vconcat(*charts).resolve_scale(x="shared")) if len(charts) > 1 else fit(charts[0], 110)
    what = " and ".join(labels[m][0].lower() for m in labels if (lines["metric"] == m).any())
    return Figure(f"drill-rank-{rank}-lines", f"Rank {rank} ({role}): memory and FLOPs over step {step}",
                  to_spec(chart),
                  caption=f"{what.capitalize()} over step {step} of rank {rank}, x = time from the step start "
                          f"(at most {MAX_LINE_POINTS} points per line: the max per time bin for memory, the "
                          f"last for cumulative FLOPs). {MEMORY_LINE_NOTE} An operation's FLOPs count at its start (PyTorch traces: its "
                          "launch on the host, which runs ahead of the device: the line rises early in the step).",
                  alt=f"Line charts of {what} over one step on rank {rank}")


# --------------------------------------------------------------------------- execution hooks


def extend_analysis(run: Run, options, metrics: dict, tables: dict, data: dict) -> None:
    """Called at the end of ``execution.analyze``: adds rank_blocks, drilldown_ops and their metrics."""
    blocks = rank_blocks(run, options)
    if blocks is not None and not blocks.empty:
        tables["rank_blocks"] = blocks
        data["rank_block_order"] = lane_order(run, blocks["rank"])
    chosen = chosen_ranks(run, tables.get("time_overview"), options)
    parts, sources, classes = [], {}, {}
    for r, role in chosen.items():
        t = top_operators(run, r)
        if t is None:
            continue
        sources[str(r)] = t.attrs.get("source", "")
        classes[str(r)] = t.attrs.get("classes", {})
        parts.append(t.assign(rank=r, role=role))
    data["drilldown_classes"] = classes  # level -> name -> op class, for the bar colours
    metrics["drilldown_ranks"] = {str(r): role for r, role in chosen.items()}
    metrics["drilldown_sources"] = sources
    if parts:
        tables["drilldown_ops"] = pd.concat(parts, ignore_index=True)[OPS_COLUMNS]
    lines, used = rank_step_lines(run, chosen, metrics.get("marey_steps_shown"))
    metrics["drilldown_line_steps"] = used
    if lines is not None:
        tables["rank_step_lines"] = lines
    extend_picker(run, options, metrics, tables, data)


#: op class -> (legend label, palette role) of the bars
_CLASS_LABEL = {"compute": ("Computation", "compute"), "communication": ("Communication", "comm"),
                "memcpy": ("Memory copy", "memcpy"), "wait": ("Wait", "wait"), "other": ("Other", "other")}


def _rank_figure(rank: int, role: str, ops: pd.DataFrame, classes: dict | None = None) -> Figure:
    level = "type" if (ops["level"] == "type").any() else "operator"
    df = ops[(ops["level"] == level) & (ops["name"] != "others")][["name", "count", "total_ms", "mean_ms",
                                                                   "share_ratio"]].copy()
    for c in ("total_ms", "mean_ms", "share_ratio"):
        df[c] = df[c].astype(float).round(4)
    what = "operator types" if level == "type" else "operators"
    of = (classes or {}).get(level, {})
    df["kind"] = df["name"].map(lambda n: _CLASS_LABEL.get(of.get(n, "other"), _CLASS_LABEL["other"])[0])
    kinds = [(label, r) for label, r in _CLASS_LABEL.values() if label in set(df["kind"])]
    unit, factor = fmt.unit_for("ms", df["total_ms"])
    m_unit, m_factor = fmt.unit_for("ms", df["mean_ms"])
    chart = in_unit(vl.Chart(df), factor, "total_ms").transform_calculate(
        mean_ms_u=f"datum.mean_ms / {float(m_factor)!r}").mark_bar().encode(
        y=vl.Y("name:N", sort=df["name"].tolist(), title=what.capitalize(), axis=vl.Axis(labelLimit=320)),
        x=vl.X("total_ms_u:Q", axis=vl.Axis(**axis("Total time", unit))),
        color=role_color("kind", kinds, title="Op class"),
        tooltip=[vl.Tooltip("name:N", title="Name"), vl.Tooltip("kind:N", title="Kind"),
                 vl.Tooltip("count:Q", title="Count", format=fmt.D3_INT),
                 tip("total_ms_u", "Total", unit), tip("mean_ms_u", "Mean", m_unit),
                 tip("share_ratio", "Share of rank", kind="ratio")],
    )
    chart = fit(chart, {"step": 18})
    return Figure(f"drill-rank-{rank}", f"Rank {rank} ({role}): top operators", to_spec(chart),
                  caption=f"The {len(df)} {what} with the largest total time on rank {rank}; the rest are in the "
                          "'others' row of the table below.",
                  alt=f"Top {what} by total time on rank {rank}")


def extend_view(a: Analysis, figures: list, tables: list, controls: list | None = None) -> None:
    """Called at the end of ``execution.present``: rank-block strips after the Marey figure, the rank picker
    (:func:`picker_figure`, its control added to ``controls``), one bar chart and one table per chosen rank."""
    blocks = a.tables.get("rank_blocks")
    if blocks is not None:
        fig = blocks_figure(blocks, a.data.get("rank_block_order") or lane_order_fallback(blocks))
        if fig is not None:
            ids = [f.id for f in figures]
            at = ids.index("execution-marey") + 1 if "execution-marey" in ids else len(figures)
            figures.insert(at, fig)
    picker = picker_figure(a) if controls is not None else None
    if picker is not None:
        figures.append(picker[0])
        controls.append(picker[1])
    ops = a.tables.get("drilldown_ops")
    lines = a.tables.get("rank_step_lines")
    roles = a.metrics.get("drilldown_ranks", {})
    steps = a.metrics.get("drilldown_line_steps", {})
    sources = a.metrics.get("drilldown_sources", {})
    ranks = list(dict.fromkeys((ops["rank"].tolist() if ops is not None else [])
                               + (lines["rank"].tolist() if lines is not None else [])))
    for r in ranks:
        role = roles.get(str(r), "")
        lines_fig = None
        if lines is not None and (lines["rank"] == r).any():
            lines_fig = _lines_figure(int(r), role, steps.get(str(r)), lines[lines["rank"] == r])
        if ops is None or not (ops["rank"] == r).any():
            if lines_fig is not None:
                figures.append(lines_fig)
            continue
        o = ops[ops["rank"] == r]
        role = o["role"].iloc[0]
        figures.append(_rank_figure(int(r), role, o, a.data.get("drilldown_classes", {}).get(str(r))))
        if lines_fig is not None:
            figures.append(lines_fig)
        tables.append(Table.from_frame(
            f"drill-rank-{r}-table", f"Rank {r} ({role}): top operators", o,
            [Column("level", "Level", "text"), Column("name", "Name", "text"), Column("count", "Count", "int"),
             Column("total_ms", "Total", "ms"), Column("mean_ms", "Mean", "ms", unit_with="call"),
             Column("max_ms", "Max", "ms", unit_with="call"), Column("share_ratio", "Share of rank", "ratio")],
            caption=f"Top {TOP_N} per level by total time plus 'others'; source: {sources.get(str(r), '')}."))


def lane_order_fallback(blocks: pd.DataFrame) -> list[int]:
    st = blocks.set_index("rank")["stage"]
    return sorted((int(r) for r in blocks["rank"]),
                  key=lambda r: (pd.isna(st.get(r)), 0 if pd.isna(st.get(r)) else int(st.get(r)), r))


# --------------------------------------------------------------------------- every rank: the rank picker
#
# Page budget (issue 27 #21 / #70: a detail view for EVERY device): per rank, the top PICK_TOP operation types plus
# one "others" row, the step breakdown (the mean of each part over the steps in scope: one row per rank) and the
# memory / cumulative FLOPs lines over one step at a resolution that shrinks with the rank count, so that the
# lines of all ranks together hold at most PICK_LINE_BUDGET points (at 4096 ranks: PICK_MIN_POINTS per line).

#: operation types (else names) kept per rank for the picker, plus one "others" row (fewer past PICK_OPS_BUDGET)
PICK_TOP = 8
#: operation rows of every rank together: past it each rank keeps fewer types (at least PICK_MIN_TOP)
PICK_OPS_BUDGET = 20_000
PICK_MIN_TOP = 3
#: points of the lines of every rank together (both metrics)
PICK_LINE_BUDGET = 30_000
#: fewer points per rank and metric than this and the picker has no lines (the three chosen ranks keep theirs)
PICK_MIN_POINTS = 12
#: the signal of the rank picker (a section control); rank cells of the page's tables link to #rank-N, which sets it
PICK_SIGNAL = "drill_rank"
PICK_FIGURE = "drill-rank-any"
#: what a panel of the picker shows for a rank without its data
NO_RANK_DATA = "(no data for this rank)"
PICK_OPS_COLUMNS = ["rank", "name", "total_ms", "count", "share_ratio"]


def top_per_rank(n_ranks: int) -> int:
    """Operation types kept per rank: :data:`PICK_TOP`, fewer when the ranks' rows (top + others) would pass
    :data:`PICK_OPS_BUDGET`, never fewer than :data:`PICK_MIN_TOP`."""
    return int(max(PICK_MIN_TOP, min(PICK_TOP, PICK_OPS_BUDGET // max(1, n_ranks) - 1)))


def every_rank_ops(run: Run) -> tuple[pd.DataFrame | None, dict]:
    """(rank, name, total_ms, count, share_ratio rows: per rank its top :func:`top_per_rank` operation types by
    total time over the whole run plus an "others" row; {name: op class of most of its time}). The rows are
    :func:`reportgen.opstats.op_rows` without communication and waits (:func:`reportgen.opstats.work_rows`), keyed
    by operation type, by name where the source has no type; shares of the rank's total (the tops and shares of the
    three chosen ranks' tables, at type level)."""
    rows = opstats.op_rows(run)
    if rows.empty:
        return None, {}
    rows = opstats.work_rows(rows[["rank", "type", "name", "op_class", "dur_ms", "count", "source"]])  # (what it reads)
    key = rows["type"].where(rows["type"].notna() & (rows["type"].astype(str) != ""), rows["name"])
    d = pd.DataFrame({"rank": rows["rank"].to_numpy(), "name": key.fillna("").astype(str).to_numpy(),
                      "op_class": rows["op_class"].astype(str).to_numpy(),
                      "dur_ms": rows["dur_ms"].to_numpy(dtype=float), "count": rows["count"].to_numpy()})
    finite = np.isfinite(d["dur_ms"].to_numpy())
    if not finite.all():
        d = d[finite]
    if d.empty:
        return None, {}
    g = agg(d.groupby(["rank", "name"], sort=False), total_ms=("dur_ms", "sum"), count=("count", "sum")).reset_index()
    g = g.sort_values(["rank", "total_ms", "name"], ascending=[True, False, True], kind="stable")
    pos = g.groupby("rank").cumcount()
    k = top_per_rank(g["rank"].nunique())
    top, rest = g[pos < k], g[pos >= k]
    if not rest.empty:
        others = agg(rest.groupby("rank"), total_ms=("total_ms", "sum"), count=("count", "sum")).reset_index()
        top = pd.concat([top, others.assign(name="others")], ignore_index=True)
    tot = g.groupby("rank")["total_ms"].sum()
    top = top.assign(share_ratio=top["total_ms"] / top["rank"].map(tot).where(lambda s: s > 0))
    top["count"] = top["count"].astype(np.int64)
    top = top.sort_values(["rank", "total_ms"], ascending=[True, False], kind="stable").reset_index(drop=True)
    cls = d.groupby(["name", "op_class"])["dur_ms"].sum().reset_index().sort_values(
        ["name", "dur_ms"], ascending=[True, False], kind="stable").drop_duplicates("name")
    return top[PICK_OPS_COLUMNS], dict(zip(cls["name"], cls["op_class"]))


def every_rank_parts(run: Run, options=None) -> tuple[pd.DataFrame | None, list]:
    """(rank + the step parts' columns, [(column, label)]): each rank's step breakdown, the mean of each part over
    the steps in scope, as the trajectory section splits a step (its ``per_rank`` table and source phases: the
    parts add up to the step)."""
    from . import analysis_of  # late: keeps execution importable on its own
    try:
        t = analysis_of("trajectory", run, options)
    except Unavailable:
        return None, []
    phases = [(c, label) for c, label in t.data["source"].phases if c in t.tables["per_rank"]]
    if not phases:
        return None, []
    pr = t.tables["per_rank"]
    out = pd.DataFrame({"rank": pr["rank"].astype(int).to_numpy()})
    for c, _ in phases:
        out[c] = pd.to_numeric(pr[c], errors="coerce").to_numpy()
    return out, phases


def points_per_line(n_ranks: int) -> int:
    """Points per rank and metric of the picker's lines: :data:`PICK_LINE_BUDGET` shared by every rank's two lines,
    at most :data:`MAX_LINE_POINTS`; 0 (no lines) below :data:`PICK_MIN_POINTS`."""
    n = int(min(MAX_LINE_POINTS, PICK_LINE_BUDGET // max(1, 2 * n_ranks)))
    return n if n >= PICK_MIN_POINTS else 0


def every_rank_lines(run: Run, ranks, preferred_steps=None) -> tuple[pd.DataFrame | None, dict, int]:
    """(rank, metric, t_ms, value rows of every rank, as :func:`rank_step_lines` but with
    :func:`points_per_line` points per line; {rank: step used}; the points per line). Each table is sorted and split
    by rank once and each rank's lines are made from arrays (:func:`_line_arrays`): linear in the run, a few numpy
    calls per rank (pandas calls per rank were seconds at 1,024 ranks)."""
    ranks = [int(r) for r in ranks]
    n = points_per_line(len(ranks))
    ts = step_windows(run) if n else None
    if ts is None:
        return None, {}, n
    ts = ts.dropna(subset=["start_ms", "end_ms"]).sort_values(["rank", "step", "start_ms"], kind="stable")
    wins = _columns_by_rank(ts, "step", "start_ms", "end_ms")
    mem = memory_series(run)
    mem_of = {}
    if mem is not None:  # each rank's rows by time (a stable sort)
        mem_of = _columns_by_rank(mem.iloc[np.lexsort((mem["ts_ms"].to_numpy(float), mem["rank"].to_numpy()))],
                                  "ts_ms", "mb")
    from .flops import counted_ops  # late: keeps execution importable on its own
    fl = counted_ops(run.table("op_flops"))
    fl = fl[fl["start_ms"].notna()] if fl is not None else None
    fl_of = {}
    if fl is not None and not fl.empty:
        fl_of = _columns_by_rank(fl.iloc[np.lexsort((fl["start_ms"].to_numpy(float), fl["rank"].to_numpy()))],
                                 "start_ms", "flops")
    cols: dict[str, list] = {"rank": [], "metric": [], "t_ms": [], "value": []}
    used = {}
    for r in ranks:
        w = wins.get(r)
        if w is None:
            continue
        steps, starts, ends = w
        i = next((int(np.flatnonzero(steps == s)[0]) for s in (preferred_steps or []) if (steps == s).any()), 0)
        step, start, end = int(steps[i]), float(starts[i]), float(ends[i])
        got = False
        if r in mem_of:
            t, mb = mem_of[r]
            inside = (t >= start) & (t < end)
            before = np.flatnonzero(t < start)
            tt, vv = t[inside] - start, mb[inside]
            if len(before):  # the level at the step start: the last record before it
                tt, vv = np.r_[start - start, tt], np.r_[mb[before[-1]], vv]
            if len(tt):
                got |= _line_arrays(cols, r, "memory_mb", tt, vv, "max", end - start, n)
        if r in fl_of:
            t, flops = fl_of[r]
            inside = (t >= start) & (t < end)
            if inside.any():
                tt = np.r_[0.0, t[inside] - start]
                vv = np.r_[0.0, _cumsum(flops[inside])]
                got |= _line_arrays(cols, r, "flops_cumulative", tt, vv, "last", end - start, n)
        if got:
            used[str(r)] = step
    if not cols["rank"]:
        return None, used, n
    sizes = [len(t) for t in cols["t_ms"]]
    out = pd.DataFrame({"rank": np.repeat(np.array(cols["rank"], dtype=np.int64), sizes),
                        "metric": pd.Series(np.repeat(np.array(cols["metric"], dtype=object), sizes).tolist()),
                        "t_ms": np.concatenate(cols["t_ms"]), "value": np.concatenate(cols["value"])})
    return out[LINE_COLUMNS], used, n


def _cumsum(values: np.ndarray) -> np.ndarray:
    """``pd.Series(values, dtype=float).cumsum()`` on an array: NaN stays NaN and adds nothing to the later sums
    (pandas sums the values with NaN taken as 0, then puts the NaN back: the same additions in the same order)."""
    v = np.asarray(values, dtype=float)
    nan = np.isnan(v)
    with np.errstate(invalid="ignore", over="ignore"):  # inf + -inf: NaN, an overflow: inf, as pandas gives them
        out = np.cumsum(np.where(nan, 0.0, v))
    out[nan] = np.nan
    return out


def _columns_by_rank(df: pd.DataFrame, *columns: str) -> dict:
    """{rank: (arrays of ``columns`` of its rows, in table order)}, the table split once
    (:func:`reportgen.timeline.positions_by_rank`; a row without a rank is in no rank's)."""
    arrays = [df[c].to_numpy(dtype=float) if df[c].dtype.kind == "f" else df[c].to_numpy() for c in columns]
    return {r: tuple(x[pos] for x in arrays) for r, pos in positions_by_rank(df).items()}


def _line_arrays(cols: dict, rank: int, metric: str, t: np.ndarray, v: np.ndarray, how: str, span: float,
                 n: int) -> bool:
    """One rank's line appended to ``cols``: ``_to_step_end(downsample(t, v, how, span, n), span)`` on arrays (the
    pandas functions themselves when a time or value is not finite); False when it has no point."""
    t, v = np.asarray(t, dtype=float), np.asarray(v, dtype=float)
    if not (np.isfinite(t).all() and np.isfinite(v).all()):
        d = _to_step_end(downsample(pd.Series(t), pd.Series(v), how, span, n), span)
        t, v = d["t_ms"].to_numpy(float), d["value"].to_numpy(float)
    else:
        if len(t) > n:
            width = (span if span > 0 else float(t.max()) or 1.0) / n
            b = np.clip(t // width, 0, n - 1).astype(int)
            pos = np.arange(len(t))
            # per bin: the first row of the largest value ("max", pandas' idxmax) or the last row ("last")
            order = np.lexsort((pos, -v, b)) if how == "max" else np.lexsort((-pos, b))
            first = np.r_[True, b[order][1:] != b[order][:-1]]
            keep = np.sort(order[first])
            t, v = t[keep], v[keep]
        if len(t) and span > float(t[-1]):
            t, v = np.r_[t, float(span)], np.r_[v, float(v[-1])]
    if not len(t):
        return False
    cols["rank"].append(rank)
    cols["metric"].append(metric)
    cols["t_ms"].append(t)
    cols["value"].append(v)
    return True


def picker_default(F, ranks: list[int], ops: pd.DataFrame | None) -> int:
    """The rank the picker opens on: the slowest rank (facts), or - when that rank has no operation rows and others
    have (a rank whose files hold its communication only) - the slowest of the ranks with operation rows, so that
    the figure opens on a rank it can show; the first rank without step times."""
    with_ops = set(int(r) for r in ops["rank"]) if ops is not None else set()
    if F is None or F.slowest_rank is None:
        return min(with_ops) if with_ops else ranks[0]
    slowest = int(F.slowest_rank)
    if not with_ops or slowest in with_ops:
        return slowest
    pr = F.per_rank[F.per_rank["rank"].isin(with_ops)]
    if pr.empty:
        return min(with_ops)
    return int(pr.sort_values(["step_ms", "rank"], ascending=[False, True], kind="stable")["rank"].iloc[0])


def extend_picker(run: Run, options, metrics: dict, tables: dict, data: dict) -> None:
    """The rank picker's data (in ``data``: the page's, not the metrics JSON's, which has every rank's operation
    types in the operators section): every rank's top operation types, step breakdown and lines (budget above)."""
    F = facts.of(run, options)
    ranks = sorted(int(r) for r in run.ranks)
    if not ranks:
        return
    ops, classes = every_rank_ops(run)
    if ops is not None:
        data["rank_detail_ops"] = ops
        data["rank_detail_classes"] = classes
    parts, phases = every_rank_parts(run, options)
    if parts is not None:
        data["rank_detail_parts"] = parts
        data["rank_detail_phases"] = phases
    lines, used, n = every_rank_lines(run, ranks, metrics.get("marey_steps_shown"))
    if lines is not None:
        data["rank_detail_lines"] = lines
        data["rank_detail_line_steps"] = used
    if ops is None and parts is None and lines is None:
        return
    metrics["rank_detail"] = {"ranks": len(ranks), "top_types_per_rank": top_per_rank(len(ranks)),
                              "line_points_per_rank_and_metric": n if lines is not None else 0}
    data["rank_detail_default"] = picker_default(F, ranks, ops)
    roles = metrics.get("drilldown_ranks") or {}
    data["rank_detail_options"] = [(r, f"Rank {r}" + (f" ({roles[str(r)]})" if str(r) in roles else "")
                                    + (f", stage {_stage(run, r)}" if _stage(run, r) is not None else ""))
                                   for r in ranks]


def _js_str(text: str) -> str:
    """``text`` as a Vega expression string literal (JSON's quoting is valid there)."""
    import json
    return json.dumps(str(text))


def _js_list(items) -> str:
    import json
    return json.dumps([str(x) for x in items])


def _sig4(v) -> float | None:
    """``v`` to 4 significant digits (the page shows 4), None for NaN: the picker's rows stay short."""
    return None if v is None or pd.isna(v) else fmt.round_sig(float(v))


def picker_figure(a: Analysis) -> tuple[Figure, Control] | None:
    """One figure for any rank, chosen with the control (signal :data:`PICK_SIGNAL`): its step breakdown beside
    the median rank's, its top operation types, its memory and cumulative FLOPs over one step. Rows are short (page
    budget): ``r`` = rank; the breakdown one row per rank (its parts folded in Vega), the types' share of the rank
    computed in Vega from the rank's rows (top + others = the rank's total)."""
    ops, parts = a.data.get("rank_detail_ops"), a.data.get("rank_detail_parts")
    lines = a.data.get("rank_detail_lines")
    options = a.data.get("rank_detail_options")
    if not options or (ops is None and parts is None and lines is None):
        return None
    sig = PICK_SIGNAL
    picked = f"datum.r == {sig}"
    charts, what = [], []
    if parts is not None:
        phases = a.data["rank_detail_phases"]
        keys = [f"p{i}" for i in range(len(phases))]
        unit, factor = fmt.unit_for("ms", parts[[c for c, _ in phases]].to_numpy().ravel())
        rows = [{"r": int(rec["rank"]), **{k: _sig4(rec[c] / factor) for k, (c, _) in zip(keys, phases)}}
                for rec in parts.to_dict(orient="records")]
        rows.append({"r": -1, **{k: _sig4(float(parts[c].median()) / factor) for k, (c, _) in zip(keys, phases)}})
        label_expr = " : ".join(f"datum.k == '{k}' ? {_js_str(lab)}" for k, (_, lab) in zip(keys, phases)) + " : ''"
        charts.append(vl.Chart(pd.DataFrame(rows)).transform_filter(f"{picked} || datum.r == -1")
                      .transform_fold(keys, as_=["k", "ms_u"])
                      .transform_calculate(who="datum.r == -1 ? 'Median of ranks' : 'Rank ' + datum.r",
                                           part=label_expr, order="indexof(" + repr(keys).replace("'", '"')
                                           + ", datum.k)")
                      .mark_bar().encode(
            y=vl.Y("who:N", title=None, sort={"field": "r", "order": "descending"}),
            x=vl.X("ms_u:Q", stack="zero", axis=vl.Axis(**axis("Mean step time", unit))),
            color=role_color("part", palette.column_parts(phases), title="Part of the step"),
            order=vl.field("order:Q"),
            tooltip=[vl.Tooltip("who:N", title="Rank"), vl.Tooltip("part:N", title="Part"), tip("ms_u", "Time", unit)],
        ).properties(width="container", height=60))
        what.append("its step breakdown (mean over the steps in scope) beside the median of every rank's parts")
    if ops is not None:
        cls = a.data.get("rank_detail_classes") or {}
        unit, factor = fmt.unit_for("ms", ops["total_ms"])
        d = pd.DataFrame({"r": ops["rank"].astype(int).to_numpy(), "n": ops["name"].astype(str).to_numpy(),
                          "t": [_sig4(v / factor) for v in ops["total_ms"].astype(float)]})
        # a rank without operation rows shows one row that says so (an empty chart: nothing drawn, console warnings)
        lack = sorted({int(r) for r, _ in options} - set(d["r"]))
        if lack:
            d = pd.concat([d, pd.DataFrame({"r": lack, "n": NO_RANK_DATA, "t": 0.0})], ignore_index=True)
        kinds = {n: _CLASS_LABEL.get(cls.get(n, "other"), _CLASS_LABEL["other"])[0] for n in d["n"].unique()}
        kinds["others"] = _CLASS_LABEL["other"][0]
        present_kinds = [(label, r) for label, r in _CLASS_LABEL.values() if label in set(kinds.values())]
        by_kind = {}
        for n, k in kinds.items():
            by_kind.setdefault(k, []).append(n)
        default_kind = max(by_kind, key=lambda k: len(by_kind[k]))
        kind_expr = " : ".join(f"indexof({_js_list(ns)}, datum.n) >= 0 ? {_js_str(k)}" for k, ns in by_kind.items()
                               if k != default_kind) + (" : " if len(by_kind) > 1 else "") + _js_str(default_kind)
        charts.append(vl.Chart(d).transform_filter(picked).transform_joinaggregate(rank_t="sum(t)")
                      .transform_calculate(share="datum.rank_t > 0 ? datum.t / datum.rank_t : null", kind=kind_expr)
                      .mark_bar().encode(
            y=vl.Y("n:N", title="Operation types", sort={"field": "t", "order": "descending"},
                   axis=vl.Axis(labelLimit=320)),
            x=vl.X("t:Q", axis=vl.Axis(**axis("Total time over the run", unit))),
            color=role_color("kind", present_kinds, title="Op class"),
            tooltip=[vl.Tooltip("n:N", title="Type"), vl.Tooltip("kind:N", title="Kind"),
                     tip("t", "Total", unit), tip("share", "Share of rank", kind="ratio")],
        ).properties(width="container", height={"step": 16}))
        k = (a.metrics.get("rank_detail") or {}).get("top_types_per_rank", PICK_TOP)
        what.append(f"its {k} operation types with the most time (communication and waits left out where the rank "
                    "has other work) and the rest as 'others'")
    if lines is not None:
        t_unit, t_factor = fmt.unit_for("ms", lines["t_ms"])
        for metric, (title, kind, role_) in {"memory_mb": ("Memory in use", "mb", "memory"),
                                             "flops_cumulative": ("Cumulative FLOPs", "flop", "compute")}.items():
            x = lines[lines["metric"] == metric]
            if x.empty:
                continue
            unit, factor = fmt.unit_for(kind, x["value"])
            d = pd.DataFrame({"r": x["rank"].astype(int).to_numpy(),
                              "x": [_sig4(v / t_factor) for v in x["t_ms"].astype(float)],
                              "y": [_sig4(v / factor) for v in x["value"].astype(float)]})
            # a rank without this line: one point at 0 (keeps the scales finite) and a text that says so
            lack = sorted({int(r) for r, _ in options} - set(d["r"]))
            if lack:
                d = pd.concat([d.assign(e=0), pd.DataFrame({"r": lack, "x": 0.0, "y": 0.0, "e": 1})],
                              ignore_index=True)
            line = vl.Chart(d).transform_filter(picked).mark_line(
                color=palette.ROLE[role_], interpolate="step-after" if metric == "memory_mb" else "linear").encode(
                x=vl.X("x:Q", axis=vl.Axis(**axis("Time from the step start", t_unit))),
                y=vl.Y("y:Q", axis=vl.Axis(**axis(title, unit))),
                tooltip=[tip("x", "Time", t_unit), tip("y", title, unit)],
            )
            if lack:
                line = line + vl.Chart(d).transform_filter(f"{picked} && datum.e == 1").mark_text(
                    align="left", baseline="top").encode(x=vl.value(6), y=vl.value(6),
                                                         text=vl.value(NO_RANK_DATA))
            charts.append(line.properties(width="container", height=90))
            what.append({"memory_mb": "memory in use", "flops_cumulative": "cumulative FLOPs"}[metric] + " over one step")
    if not charts:
        return None
    default = a.data.get("rank_detail_default")
    chart = vl.vconcat(*charts).resolve_scale(color="independent", x="independent").add_params(
        vl.param(name=sig, value=default))
    chart = fit_concat(chart)
    m = a.metrics.get("rank_detail") or {}
    n = m.get("line_points_per_rank_and_metric")
    caption = (f"Any rank, chosen with the 'Rank' control above (or a rank number in any table of the page): "
               + "; ".join(what) + "."
               + (f" The lines of every rank are kept at {n} points each (max per time bin for memory, last for "
                  "FLOPs), over the first step of the Marey view (or the rank's first step). " + MEMORY_LINE_NOTE
                  if lines is not None else "")
               + (f" At {m.get('ranks', 0):,} ranks the page holds no lines for every rank (page budget)."
                  if lines is None and a.tables.get("rank_step_lines") is not None else "")
               + " The slowest, fastest and median ranks have the full detail below.")
    title = ", ".join(t for t, have in (("step breakdown", parts is not None), ("top operation types", ops is not None),
                                        ("memory and FLOPs over a step", lines is not None)) if have)
    # the static page draws the default rank: its caption says which, and what each panel shows
    static = (f"Rank {default} (the slowest rank with operation data): " + "; ".join(what) + "."
              + (f" The lines are kept at {n} points each, over the first step of the Marey view (or the rank's "
                 "first step). " + MEMORY_LINE_NOTE if lines is not None else "")
              + " The slowest, fastest and median ranks have the full detail below.")
    fig = Figure(PICK_FIGURE, f"Any rank: {title}", to_spec(chart),
                 caption=caption, static_caption=static,
                 alt="Step breakdown, top operation types and lines of the chosen rank")
    control = Control(sig, "Rank", [(r, label) for r, label in options], default)
    return fig, control
