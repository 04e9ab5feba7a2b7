"""Memory: peak device memory per rank against the device's capacity, where it sits on the cluster
(hosts × devices), how it moves over time, and the ranks near capacity or out of line with their stage.

Sources and definitions (MB = 10^6 B everywhere; ratios 0..1):

* MindSpore Insight ``memory_usage_summary_{rank}.json`` (../shared/research/mindinsight-cluster-profiling.md
  §2.5, §3.4): ``peak_mem`` and ``capacity`` in GiB, converted × 2^30 / 10^6. Peak = the graph memory
  planner's peak (static + tensors alive at the busiest node), capacity = the device's total memory.
  ``memory_usage_details_{rank}.json`` (when present) gives the memory in use per node in execution order:
  drawn over node index, not time. MindInsight's heat map shows peak / capacity per rank, as we do.
* Ascend ``memory_record.csv`` (../shared/research/ascend-profiler-output-and-msprof-analyze.md §2.7):
  peak = the maximum of the APP component's total reserved (the process-level figure npu-smi shows)
  when the rank has APP rows, else the maximum over components of total reserved (the source column
  says which). ``npu_module_mem.csv`` alone: peak = the largest sum over CANN modules at one sample time.
  The files carry no capacity: it comes from the ``device_memory_gb`` option (GB = 10^9 B) or stays unknown.
* PyTorch (Kineto) ``[memory]`` events with ``profile_memory=True``: peak = the maximum "Total Reserved"
  of the rank's accelerator device (any accelerator c10::DeviceType, ``model.ACCELERATOR_DEVICE_TYPES``:
  CUDA 1, HIP 6 on ROCm, XPU, HPU, ...; what the caching allocator holds, the figure nvidia-smi / amd-smi is
  closest to); capacity = ``deviceProperties.totalGlobalMem`` of that device. CPU (0) events are host memory.
* Capacity is never invented: data first, then ``device_memory_gb``, else null (and the ratio is null).
* Imbalance reference = the median peak of the rank's pipeline stage (all ranks when there are no stages):
  stages legitimately hold different activations, so only peers are compared.
"""

from __future__ import annotations

import math

from .. import charts as vl
import numpy as np
import pandas as pd

from .. import thresholds as th
from .. import fmt
from ..charts import (axis, band, cell_labels, fit, identity_color, in_unit, natural_key, scale_position, sequential,
                      stage_color, tip, to_spec)
from ..errors import Unavailable
from ..model import ByRank, Run
from ..model import ACCELERATOR_DEVICE_TYPES
from ..report import Analysis, Column, Figure, Finding, Table, View, count

ID = "memory"
TITLE = "Memory"
SOURCES = ("MindSpore Insight: memory_usage_summary_<rank>.json (profile_memory=True); Ascend: memory_record.csv / "
           "npu_module_mem.csv (profile_memory=True); PyTorch: [memory] events (profile_memory=True)")

# Thresholds live in reportgen/thresholds.py.
NEAR_CAPACITY_RATIO = th.MEMORY_NEAR_CAPACITY
IMBALANCE_RATIO = th.MEMORY_IMBALANCE

#: timeline budget: points per rank, rows in total, and ranks drawn (the highest and lowest peaks)
MAX_POINTS_PER_RANK = 300
MAX_CHART_ROWS = 20_000
MAX_LINE_RANKS = 64
#: rank strip (no host info): ranks per row
STRIP_WIDTH = 32


# --------------------------------------------------------------------------- per family


def _mindinsight(run: Run) -> dict:
    s = run.table("mi_memory_summary")
    s = s.groupby("rank", as_index=False).agg({"peak_mb": "max", "capacity_mb": "max", "static_mb": "max",
                                               "allocations": "max"})
    s["source"] = "memory_usage_summary peak_mem"
    series, marks = None, None
    lines = run.table("mi_memory_lines")
    if lines is not None:
        parts, mark_parts = [], []
        raw_marks = run.table("mi_memory_marks")
        marks_of = ByRank(raw_marks)
        for rank, g in lines.groupby("rank"):
            g = g.sort_values(["graph", "node_index"], kind="stable")
            parts.append(pd.DataFrame({"rank": rank, "x": np.arange(len(g), dtype=float), "mb": g["mb"].to_numpy()}))
            if raw_marks is not None:
                # x of a node = its position in the rank's concatenated graphs
                offset = g.groupby("graph", sort=False).size().cumsum().shift(fill_value=0)
                rm = marks_of[rank]
                for mk in rm.itertuples():
                    if mk.graph in offset.index:
                        mark_parts.append({"rank": rank, "x": float(offset[mk.graph] + mk.node_index), "mark": mk.mark})
        series = pd.concat(parts, ignore_index=True)
        marks = pd.DataFrame(mark_parts) if mark_parts else None
    return {"per_rank": s, "series": series, "marks": marks, "x_kind": "node",
            "capacity_source": "memory_usage_summary capacity",
            "peak_definition": "MindSpore memory planner peak (memory_usage_summary peak_mem)"}


def _ascend(run: Run) -> dict:
    mr = run.table("memory_record")
    mr = mr[mr["reserved_mb"].notna() & mr["rank"].notna()].reset_index(drop=True)
    # the APP rows of every rank at once; only ranks without APP rows look for their largest component
    chosen = (mr["component"].astype(str).str.upper() == "APP").to_numpy().copy()
    has_app = pd.Series(chosen).groupby(mr["rank"].to_numpy()).transform("any").to_numpy()
    sources = {}
    for rank, g in mr[~has_app].groupby("rank"):
        best = g.groupby("component")["reserved_mb"].max().idxmax()
        chosen[g.index[(g["component"] == best).to_numpy()]] = True
        sources[rank] = f"max over components of reserved ({best})"
    sel = mr[chosen].sort_values("rank", kind="stable")   # rank order, rows in file order (as a groupby)
    peak = sel.groupby("rank")["reserved_mb"].max()
    rows = pd.DataFrame({"rank": peak.index.to_numpy().astype(int), "peak_mb": peak.to_numpy(dtype=float),
                         "source": [sources.get(r, "APP reserved (process level)") for r in peak.index]})
    series = pd.DataFrame({"rank": sel["rank"].to_numpy().astype(int), "ts": sel["ts_ms"].to_numpy(),
                           "mb": sel["reserved_mb"].to_numpy()})
    return {"per_rank": rows, "series": series, "x_kind": "time",
            "capacity_source": None,
            "peak_definition": "maximum total reserved of the APP component (else the largest component)"}


def _module_mem(run: Run) -> dict:
    mm = run.table("module_mem")
    tot = mm.groupby(["rank", "ts_ms"], as_index=False)["reserved_mb"].sum()
    per = tot.groupby("rank", as_index=False)["reserved_mb"].max().rename(columns={"reserved_mb": "peak_mb"})
    per["source"] = "npu_module_mem (sum of modules)"
    return {"per_rank": per, "series": tot.rename(columns={"ts_ms": "ts", "reserved_mb": "mb"}), "x_kind": "time",
            "capacity_source": None, "peak_definition": "largest sum over CANN modules at one sample (npu_module_mem)"}


def _kineto(run: Run) -> dict:
    me = run.table("memory_events")
    dev_rows = me[me["device_type"].isin(list(ACCELERATOR_DEVICE_TYPES))]
    if dev_rows.empty:
        raise Unavailable("The trace's [memory] events are all host (CPU) memory: no device memory to analyse. "
                          "Profile with profile_memory=True and the accelerator activity (torch.profiler "
                          "ProfilerActivity.CUDA, also on ROCm).")
    device = dev_rows[dev_rows["reserved_mb"].notna()]
    if device.empty:
        raise Unavailable("The trace's device [memory] events carry no Total Reserved / Total Allocated (older "
                          "PyTorch, e.g. 2021 traces, wrote only the bytes of each allocation): the memory in use is "
                          "unknown. "
                          "Profile with a newer PyTorch and profile_memory=True.")
    props = run.table("device_properties")
    rows, parts = [], []
    props_of = ByRank(props)
    for rank, g in device.groupby("rank"):
        dev_peaks = g.groupby("device_id")["reserved_mb"].max()
        dev = dev_peaks.idxmax()
        sel = g[g["device_id"] == dev]
        cap = math.nan
        if props is not None:
            p = props_of[rank]
            p = p[p["total_memory_mb"].notna()]
            match = p[p["device_id"] == dev]
            if not match.empty:
                cap = float(match["total_memory_mb"].iloc[0])
            elif p["total_memory_mb"].nunique() == 1:
                cap = float(p["total_memory_mb"].iloc[0])  # every device of the rank is the same model
        kind = ACCELERATOR_DEVICE_TYPES[int(sel["device_type"].iloc[0])]
        rows.append({"rank": int(rank), "peak_mb": float(dev_peaks.max()), "capacity_mb": cap,
                     "source": f"{kind} device {int(dev)} total reserved", "trace_device": int(dev)})
        parts.append(pd.DataFrame({"rank": int(rank), "ts": sel["ts_ms"].to_numpy(), "mb": sel["reserved_mb"].to_numpy()}))
    return {"per_rank": pd.DataFrame(rows), "series": pd.concat(parts, ignore_index=True), "x_kind": "time",
            "capacity_source": "deviceProperties totalGlobalMem",
            "peak_definition": "maximum total reserved of the rank's accelerator device (caching allocator)"}


# --------------------------------------------------------------------------- analysis helpers


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
    if run.table("mi_memory_summary") is not None:
        d = _mindinsight(run)
    elif run.table("memory_record") is not None and run.table("memory_record")["reserved_mb"].notna().any():
        d = _ascend(run)
    elif run.table("module_mem") is not None:
        d = _module_mem(run)
    elif run.table("memory_events") is not None:
        d = _kineto(run)
    else:
        raise Unavailable(
            "No memory data in this run. MindSpore Insight: memory_usage_summary_<rank>.json (profile with "
            "profile_memory=True); Ascend: ASCEND_PROFILER_OUTPUT/memory_record.csv or npu_module_mem.csv "
            "(torch_npu profile_memory=True); PyTorch: [memory] events in the trace (profile_memory=True).")
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
    pr["peak_ratio"] = (pr["peak_mb"] / pr["capacity_mb"]).where(pr["capacity_mb"] > 0)
    pr["host"] = pr["rank"].map(lambda r: run.hosts.get(r))
    dev = pr["rank"].map(lambda r: run.devices.get(r))
    if "trace_device" in pr:
        dev = dev.where(dev.notna(), pr["trace_device"])
    pr["device"] = dev.map(_int_or_none).astype(object)
    pr["stage"] = pr["rank"].map(lambda r: _int_or_none(run.stage_of(r))).astype(object)
    pr = pr.sort_values("rank").reset_index(drop=True)
    contract = ["rank", "peak_mb", "capacity_mb", "peak_ratio", "source", "capacity_source", "host", "device", "stage"]
    pr = pr[contract + [c for c in ("static_mb", "allocations") if c in pr]]

    imb = imbalance(pr.assign(stage=pd.to_numeric(pr["stage"], errors="coerce")))
    near = pr[pr["peak_ratio"] > NEAR_CAPACITY_RATIO]
    off = imb[imb["deviation_ratio"].abs() > IMBALANCE_RATIO]

    # timeline, within budget
    series = d.get("series")
    timeline, trimmed, drawn = None, [], []
    if series is not None and not series.empty:
        s = series.copy()
        if "ts" in s:
            s["x"] = s["ts"] - s.groupby("rank")["ts"].transform("min")
            s = s.drop(columns="ts")
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
        "timeline_x": "node index (execution order)" if d["x_kind"] == "node" else "ms since the rank's first sample",
        "timeline_trimmed": trimmed,
    }
    return Analysis(metrics=metrics, tables={"per_rank": pr},
                    data={"timeline": timeline, "x_kind": d["x_kind"], "marks": d.get("marks"), "near": near, "off": off,
                          "hosts_known": bool(pr["host"].notna().all() and pr["device"].notna().all())})


# --------------------------------------------------------------------------- present


def present(a: Analysis) -> View:
    m, pr = a.metrics, a.tables["per_rank"]
    ratio_known = pr["peak_ratio"].notna().any()
    figures = [_grid(pr, ratio_known, a.data["hosts_known"])]
    tl = a.data.get("timeline")
    if tl is not None and not tl.empty:
        figures.append(_timeline(tl, pr, a.data["x_kind"], m["timeline_trimmed"], a.data.get("marks")))
    cols = [Column("rank", "Rank", "rank"), Column("host", "Host", "text"), Column("device", "Device", "int"),
            Column("stage", "Stage", "int"), Column("peak_mb", "Peak", "mb"),
            Column("capacity_mb", "Capacity", "mb"), Column("peak_ratio", "Peak / capacity", "ratio"),
            Column("source", "Peak from", "text"), Column("capacity_source", "Capacity from", "text")]
    if "static_mb" in pr:
        cols.insert(6, Column("static_mb", "Static", "mb"))
    tables = [Table.from_frame("memory-per-rank", "Peak memory per rank", pr, cols,
                               caption="MB = 10^6 bytes. Capacity is blank when neither the data nor the "
                                       "device_memory_gb option gives it.")]
    notes = []
    if not ratio_known:
        notes.append("The data does not say how much memory the devices have, so no peak / capacity ratio is "
                     "shown; pass the device memory (device_memory_gb, in GB = 10^9 B) to get it.")
    elif m["capacity_known_ranks"] < m["ranks"]:
        notes.append(f"Capacity is known for {m['capacity_known_ranks']} of {m['ranks']} ranks.")
    if m["ranks_without_data"]:
        notes.append(f"No memory data for ranks {_ranks_text(m['ranks_without_data'])}.")
    if a.data["x_kind"] == "node" and tl is not None and not tl.empty:
        notes.append("MindSpore's memory details are per graph node in execution order, not per time.")
    findings = _findings(a)
    summary = (f"Peak device memory per rank: largest {fmt.quantity(m['peak_mb_max'], 'mb')}, "
               f"mean {fmt.quantity(m['peak_mb_mean'], 'mb')}")
    if m["peak_ratio_max"] is not None:
        summary += f"; highest peak / capacity {fmt.percent(m['peak_ratio_max'])}"
    summary += f" (peak = {m['peak_definition']})."
    return View(summary=summary, figures=figures, tables=tables, findings=findings, notes=notes,
                controls=[])


def _ranks_text(ranks: list[int], limit: int = 20) -> str:
    txt = ", ".join(str(r) for r in ranks[:limit])
    return txt + (f" and {len(ranks) - limit} more" if len(ranks) > limit else "")


def _findings(a: Analysis) -> list[Finding]:
    out = []
    near, off = a.data["near"], a.data["off"]
    if not near.empty:
        worst = near.loc[near["peak_ratio"].idxmax()]
        ranks = sorted(int(r) for r in near["rank"])
        out.append(Finding(
            "memory_near_capacity", "high" if worst["peak_ratio"] >= 0.97 else "medium", ID,
            f"{count(len(ranks), 'rank')} {'peaks' if len(ranks) == 1 else 'peak'} above {fmt.percent(NEAR_CAPACITY_RATIO)} of device memory "
            f"({_ranks_text(ranks)}); highest rank {int(worst['rank'])} at {fmt.percent(worst['peak_ratio'])} "
            f"({fmt.quantity(worst['peak_mb'], 'mb')} of {fmt.quantity(worst['capacity_mb'], 'mb')}).",
            ranks=ranks, evidence={"metric": "peak_ratio", "value": float(worst["peak_ratio"]),
                                   "reference": NEAR_CAPACITY_RATIO, "peak_mb": float(worst["peak_mb"]),
                                   "capacity_mb": float(worst["capacity_mb"])},
            suggestion="Little headroom risks out-of-memory errors: use activation recomputation, a smaller "
                       "micro-batch, optimizer-state sharding (ZeRO / parallel optimizer) or more pipeline stages.",
            figure="memory-grid"))
    if not off.empty:
        worst = off.loc[off["deviation_ratio"].abs().idxmax()]
        ranks = sorted(int(r) for r in off["rank"])
        ref = "its stage's median" if a.metrics["imbalance_reference"] == "stage median" else "the median of all ranks"
        dev = float(worst["deviation_ratio"])
        out.append(Finding(
            "memory_imbalance", "medium" if abs(dev) > 0.5 else "low", ID,
            f"{count(len(ranks), 'rank')} {'differs' if len(ranks) == 1 else 'differ'} from {ref} peak by more than {fmt.percent(IMBALANCE_RATIO)} "
            f"({_ranks_text(ranks)}); largest: rank {int(worst['rank'])} peaks at "
            f"{fmt.quantity(worst['peak_mb'], 'mb')} against {fmt.quantity(worst['reference_mb'], 'mb')} "
            f"({fmt.percent(dev, signed=True)}).",
            ranks=ranks, evidence={"metric": "peak_mb", "value": float(worst["peak_mb"]),
                                   "reference": float(worst["reference_mb"]), "deviation_ratio": dev,
                                   "stage": None if pd.isna(worst["stage"]) else int(worst["stage"])},
            suggestion="Ranks doing the same work should need the same memory: check uneven layer or embedding "
                       "placement, uneven sequence lengths, or a leak on the outlying rank.",
            figure="memory-grid"))
    return out


#: Cells of the memory grid get their value written in them up to this many cells.
GRID_TEXT_MAX = 64


def _grid(pr: pd.DataFrame, ratio_known: bool, hosts_known: bool) -> Figure:
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
        color = vl.Color("peak_mb_u:Q", scale=sequential(), legend=vl.Legend(**axis("Peak", unit)))
    tooltip = [vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("host:N", title="Host"),
               vl.Tooltip("device:O", title="Device"), vl.Tooltip("stage:O", title="Stage"),
               tip("peak_mb_u", "Peak", unit), tip("capacity_mb_u", "Capacity", unit),
               tip("peak_ratio", "Peak / capacity", kind="ratio")]
    gap = vl.Scale(paddingInner=0.06)
    base = scale_position(in_unit(vl.Chart(df), factor, "peak_mb", "capacity_mb"), field, domain)
    n_hosts = df["host"].nunique() if hosts_known else 0
    if hosts_known:
        n_dev = df["device"].nunique()
        base = base.encode(x=vl.X("device:O", title="Device", scale=gap, axis=vl.Axis(labelAngle=0)),
                           y=vl.Y("host:N", title="Host", scale=gap, axis=vl.Axis(labelOverlap=True)))
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
        size = {"width": {"step": 44}, "height": {"step": band(rows, 28, 3, 600)}}
        caption = "The data does not say which host each rank ran on: one cell per rank, in rows of " \
                  f"{STRIP_WIDTH} ranks." if rows > 1 else \
                  "The data does not say which host each rank ran on: one cell per rank."
    chart = base.mark_rect().encode(color=color, tooltip=tooltip)
    if len(df) <= GRID_TEXT_MAX:
        chart = chart + cell_labels(base, text, tooltip)
    chart = chart.properties(**size)
    caption += " Colour = peak / capacity." if ratio_known else f" Colour = peak ({unit}; capacity unknown)."
    return Figure("memory-grid", "Peak memory across the cluster", to_spec(chart), caption=caption,
                  alt="Grid of devices coloured by peak memory")


def _timeline(tl: pd.DataFrame, pr: pd.DataFrame, x_kind: str, trimmed: list[str],
              marks: pd.DataFrame | None = None) -> Figure:
    df = tl.merge(pr[["rank", "stage"]].assign(stage=pd.to_numeric(pr["stage"], errors="coerce")), on="rank", how="left")
    unit, factor = fmt.unit_for("mb", df["mb"])
    if x_kind == "node":
        x_unit, x_factor, x_title = "", 1.0, "Node (execution order)"
    else:
        x_unit, x_factor = fmt.unit_for("ms", df["x"])
        x_title = fmt.header("Time since the rank's first sample", "ms", x_unit)
    many = df["rank"].nunique() > 10
    staged = df["stage"].notna().any() and df["stage"].nunique() > 1
    if staged:
        df["stage_key"] = df["stage"].map(lambda s: "none" if pd.isna(s) else str(int(s)))
        color = stage_color("stage_key", sorted(df["stage_key"].unique(), key=natural_key))
        how = "one line per rank, coloured by pipeline stage"
    else:
        color = identity_color("rank", sorted(df["rank"].unique()), "Rank", legend=not many)
        how = "one line per rank"
    x = vl.X("x_u:Q", title=x_title, axis=vl.Axis(format=fmt.D3_FORMAT))
    chart = in_unit(vl.Chart(df), factor, "mb").transform_calculate(x_u=f"datum.x / {float(x_factor)!r}").mark_line(
        strokeWidth=1, opacity=0.7 if many else 1).encode(
        x=x, y=vl.Y("mb_u:Q", axis=vl.Axis(**axis("Memory", unit))),
        color=color, detail="rank:N",
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("stage:O", title="Stage"),
                 tip("x_u", "Time" if x_kind == "time" else "Node", x_unit), tip("mb_u", "Memory", unit)])
    caption = f"The series each peak is taken from, {how}."
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
    return Figure("memory-timeline", "Memory over time per rank" if x_kind == "time" else
                  "Memory per graph node per rank", to_spec(fit(chart, 260)), caption=caption,
                  alt="Lines of memory in use per rank")
