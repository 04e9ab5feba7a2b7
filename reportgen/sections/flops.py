"""FLOPs: per-rank floating-point work and rate, its balance across ranks and pipeline stages, MFU where the
peak is known.

Reads only the canonical FLOPs tables (columns in model.TABLES): ``op_flops`` (one row per counted op, filled by
each reader with the formulas of :mod:`reportgen.flopcount`, or the profiler's own per-op counts) and
``rank_flops`` (a profiler's own per-rank totals and rates). Definitions:

* FLOPs of a rank: ``rank_flops.flops`` when the run has it (the profiler's own count), else Σ ``op_flops.flops``
  of the rank (ops not counted, FLOPs NaN, add nothing; their ``note`` says why and the metrics count them).
* FLOP/s (:func:`reportgen.flopcount.device_rate`) = FLOPs / DEVICE time, never a CPU span: from ``op_flops`` the
  FLOPs of the ops in the profiled steps (``step_time`` rows; an op of unknown step, NaN, counts as in them) / Σ
  ``step_time.step_ms`` of the rank (the device step time every section uses); from ``rank_flops`` the profiler's
  own rate (flops_summary_<rank>.json: a mean of per-op rates or Σ op rates / Σ op durations: not per wall-clock
  second, so no MFU is derived from it; its own utilisation, ``utilization_ratio``, is shown instead).
  A rate above the device's peak (or, peak unknown, :data:`reportgen.flopcount.MAX_PLAUSIBLE_FLOPS_PER_S`) is not
  shown: it is listed as a data problem and its rank's rate is NaN.
* ``ratio_to_max`` = FLOPs / max over ranks = the seed's ``FLOPs_norm``.
* MFU = FLOP/s / peak, peak from ``options["peak_tflops"]`` or from the device name (:data:`PEAK_TFLOPS`,
  table ``device_properties``); not computed from a profiler's own rate, nor without a peak.
* Findings (seed rules, the seed's ``parallel_proposer.py``, research §3.8): ``flops_per_s_low`` a rank
  whose FLOP/s is more than 20% below the mean of the ranks; ``stage_flops_imbalance`` a pipeline stage whose
  FLOPs per rank (Σ FLOPs of its ranks / its ranks) is more than 20% above the mean over stages.
"""

from __future__ import annotations

import math
import re

from .. import charts as vl
import pandas as pd

from .. import flopcount as fc
from .. import thresholds as th
from ..frames import agg
from .. import fmt, palette
from ..charts import (axis, band, cell_labels, fit, in_unit, natural_key, scale_position, sequential, stage_color,
                      tip, to_spec)
from ..errors import Unavailable
from ..model import Run
from ..report import natural_sorted, rank_ranges, Analysis, Column, Control, Figure, Finding, Table, View
from . import needs_reason, with_sources

ID = "flops"
TITLE = "FLOPs"

# Thresholds (to move into reportgen/thresholds.py).
#: A rank whose FLOP/s is more than this fraction below the mean over ranks computes slowly
#: (seed rule ``flops_per_second``: p = (mean - F)/mean > 0.2).
FLOPS_BELOW_MEAN = th.FLOPS_BELOW_MEAN  # reportgen/thresholds.py
#: A pipeline stage whose FLOPs per rank exceed the mean over stages by more than this fraction carries too
#: much work (seed rule ``pipeline_parallel_flops``: p = stage/mean - 1 > 0.2).
STAGE_FLOPS_ABOVE_MEAN = th.STAGE_FLOPS_ABOVE_MEAN  # reportgen/thresholds.py
#: Severity of both rules by the relative gap p: high from 0.5, medium from 0.35, else low (ours; the seed
#: has no severity).
SEVERITY_HIGH_GAP = th.FLOPS_SEVERITY_HIGH_GAP
SEVERITY_MEDIUM_GAP = th.FLOPS_SEVERITY_MEDIUM_GAP

#: Dense 16-bit (BF16/FP16) tensor-core peak, TFLOP/s, by device-name pattern (first match wins). Sources:
#: NVIDIA A100 datasheet (312 dense BF16), H100 datasheet (SXM 989, PCIe 756 dense BF16), V100 datasheet
#: (125 FP16 tensor), A10 datasheet (125 dense FP16 tensor), L4 datasheet (121 dense FP16 = 242 sparse / 2); AMD
#: Instinct MI300X / MI325X datasheets (1307.4 dense FP16/BF16), MI250X (383), MI250 (362.1).
PEAK_TFLOPS: list[tuple[str, float]] = [
    (r"H100.*PCIe", 756.0), (r"H100", 989.0), (r"A100", 312.0), (r"V100", 125.0), (r"\bA10\b", 125.0),
    (r"\bL4\b", 121.0), (r"MI300X|MI325X", 1307.4), (r"MI250X", 383.0), (r"MI250", 362.1),
]

#: any one of these tables will do (runner: "unavailable: needs op_flops or rank_flops")
NEEDS = (("op_flops", "rank_flops"),)

#: op_flops.method values that are counted from shapes by reportgen (an estimate), not by the profiler
ESTIMATED = (fc.MATMUL, fc.CONVOLUTION, fc.ATTENTION)


#: Operators per rank the per-rank operator chart keeps (largest FLOPs first); the rest of the rank's counted operators
#: are one "other operators" bar (the page budget: top-N per rank, the rest aggregated)
RANK_TOP_OPS = 12
#: label of that bar
OTHER_OPS = "other operators"


def rank_top_ops(ops: pd.DataFrame, ranks=None, n: int = RANK_TOP_OPS) -> pd.DataFrame:
    """rank, op, flops, calls (when known) of the ``n`` operators with the most FLOPs of each rank (of ``ranks``;
    None: every rank), and one row ``OTHER_OPS`` per rank summing the rest (its ``others`` = how many operators it
    holds; 0 on the kept rows)."""
    o = ops[ops["flops"].notna()]
    if ranks is not None:
        o = o[o["rank"].isin(list(ranks))]
    o = o.sort_values(["rank", "flops", "op"], ascending=[True, False, True], kind="stable")
    keep = o.groupby("rank").cumcount() < n
    cols = ["rank", "op", "flops"] + (["calls"] if "calls" in o else [])
    top = o.loc[keep, cols].assign(others=0)
    rest = o[~keep]
    if not rest.empty:
        named = {"flops": ("flops", "sum"), "others": ("flops", "size")}
        if "calls" in rest:
            named["calls"] = ("calls", "sum")
        r = agg(rest.groupby("rank"), **named).reset_index().assign(op=OTHER_OPS)
        top = pd.concat([top, r[top.columns]], ignore_index=True)
    top["rank"] = top["rank"].astype(int)
    return top.sort_values(["rank", "flops"], ascending=[True, False], kind="stable").reset_index(drop=True)


def severity(gap: float) -> str:
    return "high" if gap >= SEVERITY_HIGH_GAP else "medium" if gap >= SEVERITY_MEDIUM_GAP else "low"


def counted_ops(ops: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rows of ``op_flops`` that carry FLOPs (not NaN): what the totals, the per-step FLOPs and the drill-down's
    cumulative line add up."""
    return None if ops is None else ops[ops["flops"].notna()]


def _not_counted(ops: pd.DataFrame, counted: bool = False) -> dict:
    """{note: {op type: rows}} of the ops that count nothing (FLOPs NaN or, no kernel launched, 0); ``counted``: of
    the ops counted with a caveat in their note instead."""
    out: dict = {}
    nothing = ops["flops"].isna() | ops["note"].eq(fc.NO_KERNEL)
    x = ops[ops["note"].astype(str).ne("") & (~nothing if counted else nothing)]
    for (note, typ), n in x.groupby(["note", "type"]).size().items():
        out.setdefault(str(note), {})[str(typ)] = int(n)
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def _from_ops(run: Run, ops: pd.DataFrame, options=None) -> dict:
    counted = counted_ops(ops)
    if counted.empty or not (counted["flops"] > 0).any():
        why = _not_counted(ops)
        raise Unavailable("No op has a FLOP count: " + ("; ".join(
            f"{note}: {', '.join(f'{t} x{n}' for t, n in types.items())}" for note, types in why.items())
            or "no counted op") + ". Sources: " + with_sources(options, ["op_flops", "rank_flops"]) + ".")
    steps = run.table("step_time")
    ranks = pd.Index(sorted(ops["rank"].unique()), name="rank")
    g = counted.groupby("rank")["flops"]
    per_rank = pd.DataFrame({"rank": ranks.astype(int), "flops": g.sum().reindex(ranks, fill_value=0.0).to_numpy(),
                             "wall_ms": math.nan, "flops_per_s": math.nan,
                             "ops_counted": g.size().reindex(ranks, fill_value=0).to_numpy()})
    step_table = None
    if steps is not None:
        # an op of unknown step but with a start is from the profiled window: in the steps; an op with neither
        # (a per-op summary of the profiler) is not placed in time and gives no rate
        timed = counted["step"].isna() & counted["start_ms"].notna()
        placed = counted.loc[counted["step"].notna() | timed, "rank"].unique()
        known = counted[counted["step"].notna()].groupby(["rank", "step"])["flops"].sum()
        unknown = counted[timed].groupby("rank")["flops"].sum()
        st = steps[steps["rank"].isin(placed)][["rank", "step", "step_ms"]].sort_values(["rank", "step"])
        st = st.assign(flops=known.reindex(pd.MultiIndex.from_arrays([st["rank"], st["step"].astype(float)]))
                       .fillna(0.0).to_numpy())
        extra = unknown.reindex(st["rank"]).fillna(0.0).to_numpy()
        in_steps = st.groupby("rank")["flops"].sum() + unknown.reindex(st["rank"].unique()).fillna(0.0).to_numpy()
        wall = st.groupby("rank")["step_ms"].sum()
        per_rank["wall_ms"] = wall.reindex(ranks).to_numpy()
        per_rank["flops_per_s"] = [fc.device_rate(f, w) for f, w in
                                   zip(in_steps.reindex(ranks).to_numpy(), per_rank["wall_ms"].to_numpy())]
        # per step only where every counted op has its step (or the rank profiled one step)
        steps_n = st.groupby("rank")["step"].transform("size").to_numpy()
        ok = (extra == 0) | (steps_n == 1)
        st = st.assign(flops=st["flops"].to_numpy() + extra)[ok]
        if not st.empty:
            step_table = pd.DataFrame({"rank": st["rank"].astype(int).to_numpy(),
                                       "step": st["step"].astype(int).to_numpy(), "flops": st["flops"].to_numpy(),
                                       "step_ms": st["step_ms"].to_numpy(),
                                       "flops_per_s": [fc.device_rate(f, t) for f, t in zip(st["flops"],
                                                                                              st["step_ms"])]})
    by_type = agg(counted.groupby(["rank", "type"]), calls=("flops", "size"), flops=("flops", "sum"),
                  time_ms=("dur_ms", "sum"), timed=("dur_ms", "count")).reset_index()
    by_type["time_ms"] = by_type["time_ms"].where(by_type.pop("timed") > 0)
    own_rate = "flops_per_s" in counted and counted["flops_per_s"].notna().any()
    if own_rate:  # the profiler's own per-op rates do not add up over ops: every op on its own
        c = counted.rename(columns={"name": "op"})
        by_op = c[[k for k in ("rank", "op", "flops", "flops_per_s", "utilization_pct") if k in c]]
    else:
        by_op = by_type.rename(columns={"type": "op"})
        if by_op["time_ms"].notna().any():
            by_op["flops_per_s"] = [fc.device_rate(f, t) for f, t in zip(by_op["flops"], by_op["time_ms"])]
        else:
            by_op = by_op.drop(columns="time_ms")
    by_op = by_op.sort_values(["rank", "flops"], ascending=[True, False]).reset_index(drop=True)
    methods = sorted(counted["method"].astype(str).unique())
    estimate = all(m in ESTIMATED for m in methods)
    padded = counted[counted["note"] == fc.PADDED]
    meta = {"flops_source": ("estimated from op shapes: " if estimate else "") + ", ".join(methods),
            "flops_estimate": estimate, "methods": methods,
            "ops_counted": sorted(counted["type"].astype(str).unique().tolist()),
            "ops_not_counted": _not_counted(ops),
            "ops_counted_with_caveat": _not_counted(ops, counted=True),
            "ops_without_shapes": int((ops["note"] == "shapes not readable").sum()),
            "ops_no_kernel": int((ops["note"] == fc.NO_KERNEL).sum()),
            "ops_padded_channels": int(len(padded)),
            "flops_padded_channels_ratio": float(padded["flops"].sum() / counted["flops"].sum())
            if len(padded) else 0.0,
            "flops_per_s_basis": "FLOPs of the ops in the profiled steps / the steps' device time (step_time)"}
    if not per_rank["flops_per_s"].notna().any():
        placed = counted["step"].notna() | counted["start_ms"].notna()
        meta["flops_per_s_basis"] = "not computed: " + (
            "the run has no device step time (step_time)" if steps is None
            else "the counted ops have neither a step nor a start time" if not placed.any()
            else "the profiled steps have no device time")
    return {"per_rank": per_rank, "ops": by_op, "per_rank_step": step_table, "meta": meta, "profiler_rate": False}


def _from_ranks(run: Run, rf: pd.DataFrame) -> dict:
    per_rank = rf[[c for c in ("rank", "flops", "flops_per_s", "utilization_ratio", "vec_utilization_ratio",
                               "cube_flops", "vec_flops", "cube_flops_per_s", "vec_flops_per_s", "generation")
                        if c in rf]].copy()
    meta = {"flops_source": "the profiler's own per-rank counts (" + ", ".join(
                sorted(rf["method"].astype(str).unique())) + ")" if "method" in rf else "the profiler's own counts",
            "flops_estimate": False,
            "flops_per_s_basis": "; ".join(sorted(rf["rate_basis"].dropna().astype(str).unique()))
            if "rate_basis" in rf else "the profiler's own rate"}
    if "generation" in rf:
        meta["generations"] = sorted(rf["generation"].dropna().unique().tolist())
    ops = run.table("op_flops")
    by_op = None
    if ops is not None:
        c = counted_ops(ops).rename(columns={"name": "op"})
        by_op = c[[k for k in ("rank", "op", "flops", "flops_per_s", "utilization_pct") if k in c]] \
            .sort_values(["rank", "flops"], ascending=[True, False])
    return {"per_rank": per_rank, "ops": by_op, "per_rank_step": None, "meta": meta, "profiler_rate": True}


# --------------------------------------------------------------------------- analyze


def _peak(run: Run, options) -> tuple[float | None, str]:
    """Peak FLOP/s and where it came from ("" when unknown)."""
    opt = options.get("peak_tflops") if options is not None else None
    if opt:
        try:
            return float(opt) * 1e12, f"option peak_tflops = {fmt.number(float(opt))}"
        except (TypeError, ValueError):
            pass
    props = run.table("device_properties")
    if props is not None:
        names = props["name"].dropna().astype(str).unique().tolist()
        for pat, tf in PEAK_TFLOPS:
            if names and all(re.search(pat, n) for n in names):
                return tf * 1e12, f"{names[0]}: {fmt.number(tf)} TFLOP/s dense BF16/FP16 (datasheet)"
    return None, ""


def stage_table(per_rank: pd.DataFrame) -> pd.DataFrame:
    """Per stage: Σ FLOPs, ranks, FLOPs per rank (seed: Σ / ranks per stage) and its gap to the mean over stages."""
    s = per_rank.dropna(subset=["stage"])
    if s.empty:
        return pd.DataFrame()
    g = agg(s.groupby("stage"), flops_sum=("flops", "sum"), ranks=("rank", "size"),
            flops_per_s_mean=("flops_per_s", "mean")).reset_index()
    g["stage"] = g["stage"].astype(int)
    g["flops_per_rank"] = g["flops_sum"] / g["ranks"]
    mean = g["flops_per_rank"].mean()
    g["above_stage_mean_ratio"] = g["flops_per_rank"] / mean - 1 if mean > 0 else math.nan
    return g


def _refuse_implausible(run: Run, df: pd.DataFrame, bound: float, what: str) -> dict:
    """Rates above ``bound`` become NaN and a data problem (module doc); returns {rank: refused rate}."""
    bad = df["flops_per_s"] > bound
    if not bad.any():
        return {}
    refused = {int(r): float(v) for r, v in zip(df.loc[bad, "rank"], df.loc[bad, "flops_per_s"])}
    df.loc[bad, "flops_per_s"] = math.nan
    run.problem("FLOPs", f"{what}: FLOP rate above a plausible device peak ({fmt.quantity(bound, 'flops')}) on "
                         f"rank(s) {rank_ranges(sorted(refused))} (largest {fmt.quantity(max(refused.values()), 'flops')}):"
                         " not shown; the counted FLOPs or the device time are wrong")
    return refused


def refocus(run: Run, a: Analysis, options=None) -> None:
    """The per-operator chart of one rank (control ``flops_rank``) holds the ranks the page's findings name too
    (reportgen/focus.py), beside the extremes and the median rank it holds at scale."""
    from .. import focus
    ro, ops = a.data.get("rank_ops"), a.data.get("ops")
    if ro is None or ops is None or ops.empty:
        return
    have = set(int(r) for r in ro["rank"].unique())
    want = [r for r in focus.of(a).ranks_in(ops["rank"].unique()) if r not in have]
    if want:
        a.data["rank_ops"] = pd.concat([ro, rank_top_ops(ops, want)], ignore_index=True)


def analyze(run: Run, options=None) -> Analysis:
    rf, ops = run.table("rank_flops"), run.table("op_flops")
    if rf is not None:
        d = _from_ranks(run, rf)
    elif ops is not None:
        d = _from_ops(run, ops, options)
    else:
        raise Unavailable(needs_reason(None, ["op_flops or rank_flops"], options))
    per_rank = d["per_rank"]
    fmax = per_rank["flops"].max()
    per_rank["ratio_to_max"] = per_rank["flops"] / fmax if fmax and fmax > 0 else math.nan
    peak, peak_source = (None, "") if d["profiler_rate"] else _peak(run, options)
    bound = peak or fc.MAX_PLAUSIBLE_FLOPS_PER_S
    refused = _refuse_implausible(run, per_rank, bound, "per rank")
    if d.get("per_rank_step") is not None:
        _refuse_implausible(run, d["per_rank_step"], bound, "per step")
    if d.get("ops") is not None and "flops_per_s" in d["ops"]:
        _refuse_implausible(run, d["ops"], bound, "per operator")
    per_rank["mfu_ratio"] = per_rank["flops_per_s"] / peak if peak else math.nan
    per_rank["stage"] = per_rank["rank"].map(lambda r: run.stage_of(int(r)))
    per_rank["host"] = per_rank["rank"].map(lambda r: run.hosts.get(int(r)))
    per_rank["device_id"] = per_rank["rank"].map(lambda r: run.devices.get(int(r)))
    front = ["rank", "flops", "flops_per_s", "ratio_to_max", "mfu_ratio", "stage", "host", "device_id"]
    per_rank = per_rank[front + [c for c in per_rank.columns if c not in front]]

    fps = per_rank["flops_per_s"].dropna()
    mean_fps = float(fps.mean()) if len(fps) else math.nan
    per_rank["below_mean_flops_per_s_ratio"] = (mean_fps - per_rank["flops_per_s"]) / mean_fps \
        if mean_fps and mean_fps > 0 else math.nan
    # the same gap signed as people read it: negative below the mean, positive above (the page's column; a
    # "below mean" of -146% read as a wrong sign)
    per_rank["flops_per_s_vs_mean_ratio"] = -per_rank["below_mean_flops_per_s_ratio"]
    stages = stage_table(per_rank)
    tables = {"per_rank": per_rank}
    if not stages.empty:
        tables["per_stage"] = stages
    if d.get("per_rank_step") is not None:
        tables["per_rank_step"] = d["per_rank_step"]
    if d.get("ops") is not None:
        tables["ops"] = d["ops"]
    metrics = {**d["meta"],
               "flops_total": float(per_rank["flops"].sum()), "flops_per_rank_mean": float(per_rank["flops"].mean()),
               "flops_per_s_mean": mean_fps,
               "peak_flops_per_s": peak, "peak_source": peak_source or None,
               "mfu_ratio_mean": float(per_rank["mfu_ratio"].mean()) if peak else None,
               "threshold_flops_below_mean_ratio": FLOPS_BELOW_MEAN,
               "threshold_stage_flops_above_mean_ratio": STAGE_FLOPS_ABOVE_MEAN}
    if refused:
        metrics["flops_per_s_refused"] = {str(k): v for k, v in refused.items()}
    if d["profiler_rate"]:
        metrics["mfu_note"] = ("not computed: the profiler's FLOPs/FLOPS are not per wall-clock second; see "
                               "utilization_ratio (the profiler's own share of the AI Core peak)")
    elif not peak:
        metrics["mfu_note"] = "not computed: peak unknown (pass peak_tflops, or a trace naming a known device)"
    if d.get("ops") is not None and not d["ops"].empty:
        shown = th.ranks_shown(per_rank.set_index("rank")["flops"])
        a_rank_ops = rank_top_ops(d["ops"], shown)
    else:
        a_rank_ops = None
    a = Analysis(metrics=metrics, tables=tables,
                 data={"rank_ops": a_rank_ops, "ops": d.get("ops"),
                       "hosts_known": bool(run.hosts) and all(run.hosts.get(int(r)) for r in per_rank["rank"])
                       and all(run.devices.get(int(r)) is not None for r in per_rank["rank"]),
                       "missing_ranks": list(run.missing_ranks)})
    a.findings = findings(a)
    return a


# --------------------------------------------------------------------------- findings


def findings(a: Analysis) -> list[Finding]:
    out = []
    pr = a.tables["per_rank"]
    gaps = pr.dropna(subset=["below_mean_flops_per_s_ratio"]).sort_values("below_mean_flops_per_s_ratio",
                                                                          ascending=False)
    low = gaps[gaps["below_mean_flops_per_s_ratio"] > FLOPS_BELOW_MEAN]
    if not low.empty:
        w = low.iloc[0]
        p = float(w["below_mean_flops_per_s_ratio"])
        others = f" (also ranks {', '.join(str(int(r)) for r in low['rank'].iloc[1:])})" if len(low) > 1 else ""
        out.append(Finding(
            "flops_per_s_low", severity(p), ID,
            f"Rank {int(w['rank'])} computes at {fmt.quantity(w['flops_per_s'], 'flops')}, {fmt.percent(p)} below "
            f"the mean of the ranks ({fmt.quantity(a.metrics['flops_per_s_mean'], 'flops')}; guideline "
            f"{fmt.percent(FLOPS_BELOW_MEAN)}){others}.",
            ranks=[int(r) for r in low["rank"]],
            evidence={"metric": "flops_per_s", "value": float(w["flops_per_s"]),
                      "reference": a.metrics["flops_per_s_mean"], "below_mean_ratio": p},
            suggestion="Check the slow rank's device (clock, thermal throttling, other jobs) and whether its "
                       "operators differ from the other ranks' (shapes, data types, fallback kernels).",
            figure="flops-bars"))
    st = a.tables.get("per_stage")
    if st is not None and len(st) > 1:
        w = st.sort_values("above_stage_mean_ratio", ascending=False).iloc[0]
        p = float(w["above_stage_mean_ratio"])
        if p > STAGE_FLOPS_ABOVE_MEAN:
            ranks = pr[pr["stage"] == w["stage"]]["rank"].astype(int).tolist()
            out.append(Finding(
                "stage_flops_imbalance", severity(p), ID,
                f"Pipeline stage {int(w['stage'])} does {fmt.quantity(w['flops_per_rank'], 'flop')} per rank, "
                f"{fmt.percent(p)} above the mean over stages ({fmt.quantity(st['flops_per_rank'].mean(), 'flop')}; "
                f"guideline {fmt.percent(STAGE_FLOPS_ABOVE_MEAN)}): the stages are unbalanced.",
                ranks=ranks,
                evidence={"metric": "flops_per_rank", "value": float(w["flops_per_rank"]),
                          "reference": float(st["flops_per_rank"].mean()), "above_mean_ratio": p,
                          "stage": int(w["stage"])},
                suggestion="Move layers from this stage to the lighter ones (pipeline stage boundaries / "
                           "pipeline_stage of the cells) so every stage does about the same work.",
                figure="flops-stages"))
    return out


# --------------------------------------------------------------------------- present


#: The FLOPs grid writes each cell's share in it up to this many cells in a row.
GRID_TEXT_MAX = 32
#: Above thresholds.PAGE_RANKS_ALL ranks the grid draws every rank in rows of this many (4096 ranks: 64 x 64 cells)
#: instead of hosts x devices or one row (512 hosts were 14,000 px tall; 4096 ranks in a row 16,500 px wide)
GRID_ROW_RANKS = 64


def _grid(pr: pd.DataFrame, hosts_known: bool) -> Figure:
    df = pr[["rank", "flops", "flops_per_s", "ratio_to_max", "stage", "host", "device_id"]].copy()
    df["stage_key"] = df["stage"].map(lambda s: "" if pd.isna(s) else str(int(s)))
    df["host"] = df["host"].fillna("").astype(str)
    f_unit, f_factor = fmt.unit_for("flop", df["flops"])
    r_unit, r_factor = fmt.unit_for("flops", df["flops_per_s"])
    tips = [vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("host:N", title="Host"),
            vl.Tooltip("stage_key:N", title="Stage"), tip("flops_u", "FLOPs", f_unit),
            tip("flops_per_s_u", "Throughput", r_unit), tip("ratio_to_max", "FLOPs / max", kind="ratio")]
    color = vl.Color("ratio_to_max:Q", scale=sequential([0, 1]),
                      legend=vl.Legend(**axis("FLOPs / max", kind="ratio")))
    gap = vl.Scale(paddingInner=0.06)
    wrapped = len(df) > th.PAGE_RANKS_ALL
    if wrapped:
        df["col"] = df["rank"].astype(int) % GRID_ROW_RANKS
        df["row"] = df["rank"].astype(int) // GRID_ROW_RANKS * GRID_ROW_RANKS
        ticks = list(range(0, GRID_ROW_RANKS, 8))
        x = vl.X("col:O", title="Rank - the row's first rank", scale=gap,
                 axis=vl.Axis(labelAngle=0, values=ticks))
        y = vl.Y("row:O", title="First rank of the row", scale=gap, axis=vl.Axis(labelOverlap=True))
        title, n = f"ranks in rows of {GRID_ROW_RANKS}", GRID_ROW_RANKS
    elif hosts_known:
        x = vl.X("device_id:O", title="Device", scale=gap, axis=vl.Axis(labelAngle=0))
        y, title = vl.Y("host:N", title="Host", scale=gap, sort=natural_sorted(df["host"].dropna())), \
            "hosts × devices"
        n = max(1, df["device_id"].nunique())
    else:
        x = vl.X("rank:O", title="Rank", scale=gap, axis=vl.Axis(labelOverlap=True, labelAngle=0))
        y, title = None, "ranks"
        n = max(1, len(df))
    base = scale_position(in_unit(vl.Chart(df), f_factor, "flops").transform_calculate(
        flops_per_s_u=f"datum.flops_per_s / {float(r_factor)!r}"), "ratio_to_max", [0, 1]).encode(
        x=x, **({"y": y} if y is not None else {}))
    chart = base.mark_rect().encode(color=color, tooltip=tips)
    if n <= GRID_TEXT_MAX:
        chart = chart + cell_labels(base, vl.Text("ratio_to_max:Q", format=fmt.D3_PCT), tips)
    rows = df["row"].nunique() if wrapped else 0
    chart = chart.properties(width={"step": band(n, 48)},
                             height={"step": max(4, min(16, 900 // rows))} if wrapped
                             else 40 if not hosts_known else {"step": 28})
    return Figure("flops-grid", f"FLOPs of each rank relative to the busiest ({title})", to_spec(chart),
                  caption="Colour = FLOPs / the largest FLOPs of any rank (the seed's FLOPs_norm)."
                          + (f" {len(df):,} ranks: every rank is drawn, {GRID_ROW_RANKS} to a row (the tooltip "
                             "names its host)." if wrapped else "" if hosts_known
                             else " Hosts are not known for every rank, so ranks are shown in a row."),
                  alt="Heat map of each rank's FLOPs relative to the maximum")


def _bars(pr: pd.DataFrame, mean: float) -> Figure:
    df = pr[["rank", "flops_per_s", "stage"]].copy()
    df["stage_key"] = df["stage"].map(lambda s: "none" if pd.isna(s) else str(int(s)))
    unit, factor = fmt.unit_for("flops", df["flops_per_s"])
    staged = (df["stage_key"] != "none").any()
    bars = in_unit(vl.Chart(df), factor, "flops_per_s").mark_bar(
        **({} if staged else {"color": palette.ROLE["compute"]})).encode(
        x=vl.X("rank:O", title="Rank", axis=vl.Axis(labelOverlap=True, labelAngle=0)),
        y=vl.Y("flops_per_s_u:Q", axis=vl.Axis(**axis("Throughput", unit))),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("stage_key:N", title="Stage"),
                 tip("flops_per_s_u", "Throughput", unit)])
    if staged:
        bars = bars.encode(color=stage_color("stage_key", sorted(df["stage_key"].unique(), key=natural_key)))
    lines = pd.DataFrame({"y": [mean / factor, mean * (1 - FLOPS_BELOW_MEAN) / factor],
                          "what": ["mean", f"{FLOPS_BELOW_MEAN * 100:.0f}% below mean"]})
    rules = vl.Chart(lines).mark_rule(strokeDash=[4, 3]).encode(
        y="y:Q", tooltip=[vl.Tooltip("what:N", title="Line"), tip("y", "Throughput", unit)])
    return Figure("flops-bars", "FLOP/s per rank", to_spec(fit(bars + rules, 240)),
                  caption="Dashed lines: the mean over ranks and the seed rule's limit (20% below it).",
                  alt="Bar chart of FLOP/s per rank with the mean")


def _stage_chart(st: pd.DataFrame) -> Figure:
    df = st.copy()
    unit, factor = fmt.unit_for("flop", df["flops_per_rank"])
    df["mean_u"] = df["flops_per_rank"].mean() / factor
    df["stage_key"] = df["stage"].map(lambda s: str(int(s)))
    s_unit, s_factor = fmt.unit_for("flop", df["flops_sum"])
    bars = in_unit(vl.Chart(df), factor, "flops_per_rank").transform_calculate(
        flops_sum_u=f"datum.flops_sum / {float(s_factor)!r}").mark_bar().encode(
        x=vl.X("stage_key:O", title="Stage", sort=sorted(df["stage_key"], key=natural_key),
                axis=vl.Axis(labelAngle=0)),
        y=vl.Y("flops_per_rank_u:Q", axis=vl.Axis(**axis("FLOPs per rank", unit))),
        color=stage_color("stage_key", sorted(df["stage_key"], key=natural_key), legend=False),
        tooltip=[vl.Tooltip("stage_key:N", title="Stage"), vl.Tooltip("ranks:Q", title="Ranks", format=fmt.D3_INT),
                 tip("flops_sum_u", "Σ FLOPs", s_unit), tip("flops_per_rank_u", "FLOPs per rank", unit),
                 vl.Tooltip("above_stage_mean_ratio:Q", title="vs mean of stages", format=fmt.D3_PCT_SIGNED)])
    rule = vl.Chart(df).mark_rule(strokeDash=[4, 3]).encode(y="mean(mean_u):Q")
    chart = (bars + rule).properties(width={"step": band(len(df), 60, 8)}, height=220)
    return Figure("flops-stages", "FLOPs per rank of each pipeline stage", to_spec(chart),
                  caption="Σ FLOPs of the stage's ranks / its ranks; dashed: mean over stages.",
                  alt="Bar chart of FLOPs per rank by pipeline stage")


#: the per-rank operator chart's filter on the rank control (``flops_rank``: a rank id, data, never code)
RANK_FILTER = "datum.rank == flops_rank"


def _rank_ops_chart(ro: pd.DataFrame, default: int, est: bool) -> Figure:
    """Bars of the operators' FLOPs of the rank chosen in the control (the seed's click on a device of the grid)."""
    df = ro.copy()
    unit, factor = fmt.unit_for("flop", df["flops"])
    tips = [vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("op:N", title="Operator"),
            tip("flops_u", "FLOPs" + (", estimate" if est else ""), unit)]
    if "calls" in df:
        tips.append(vl.Tooltip("calls:Q", title="Calls", format=fmt.D3_INT))
    tips.append(vl.Tooltip("others:Q", title="Operators in the bar (other operators)", format=fmt.D3_INT))
    chart = in_unit(vl.Chart(df), factor, "flops").transform_filter(RANK_FILTER).mark_bar(
        color=palette.ROLE["compute"]).encode(
        y=vl.Y("op:N", title=None, sort="-x", axis=vl.Axis(labelLimit=320)),
        x=vl.X("flops_u:Q", axis=vl.Axis(**axis("FLOPs", unit))), tooltip=tips).add_params(
        vl.param(name="flops_rank", value=default))
    caption = (f"The operators of the rank chosen in 'Rank (operator FLOPs)' or clicked in the grid above, most FLOPs "
               f"first: the {RANK_TOP_OPS} largest of each rank, the rest summed in '{OTHER_OPS}'.")
    return Figure("flops-rank-ops", "FLOPs per operator of one rank", to_spec(fit(chart, {"step": 16})),
                  caption=caption,
                  static_caption=caption.replace("chosen in 'Rank (operator FLOPs)' or clicked in the grid above",
                                                 f"with the most FLOPs (rank {default})"),
                  alt="Bars of FLOPs per operator of one rank")


def _cube_vec_chart(pr: pd.DataFrame) -> Figure:
    """Stacked bars per rank: the profiler's cube and vector FLOPs (``rank_flops.cube_flops`` / ``vec_flops``)."""
    rows = []
    for part, col in (("Cube", "cube_flops"), ("Vector", "vec_flops")):
        x = pr[["rank", col, f"{col}_per_s"] if f"{col}_per_s" in pr else ["rank", col]].rename(
            columns={col: "flops", f"{col}_per_s": "flops_per_s"})
        rows.append(x.assign(unit=part))
    df = pd.concat(rows, ignore_index=True)
    if "flops_per_s" not in df:
        df["flops_per_s"] = math.nan
    df = df[df["flops"].notna()]
    unit, factor = fmt.unit_for("flop", df["flops"])
    r_unit, r_factor = fmt.unit_for("flops", df["flops_per_s"])
    chart = in_unit(vl.Chart(df), factor, "flops").transform_calculate(
        flops_per_s_u=f"datum.flops_per_s / {float(r_factor)!r}").mark_bar().encode(
        x=vl.X("rank:O", title="Rank", axis=vl.Axis(labelOverlap=True, labelAngle=0)),
        y=vl.Y("flops_u:Q", stack="zero", axis=vl.Axis(**axis("FLOPs", unit))),
        color=vl.Color("unit:N", title="Unit", legend=vl.Legend(orient="bottom"), scale=vl.Scale(
            domain=["Cube", "Vector"], range=[palette.ROLE["compute"], palette.ROLE["compute_range"]])),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("unit:N", title="Unit"),
                 tip("flops_u", "FLOPs", unit), tip("flops_per_s_u", "Profiler rate", r_unit)])
    return Figure("flops-cube-vec", "Cube and vector FLOPs per rank", to_spec(fit(chart, 220)),
                  caption="The profiler's own split (flops_summary cube_FLOPs / vec_FLOPs): the cube unit does "
                          "matrix multiplications, the vector unit element-wise work.",
                  alt="Stacked bars of cube and vector FLOPs per rank")


_ranges = rank_ranges


def present(a: Analysis) -> View:
    m = a.metrics
    pr = a.tables["per_rank"]
    est = m.get("flops_estimate")
    figures = [_grid(pr, a.data["hosts_known"])]
    controls = []
    ro = a.data.get("rank_ops")
    if ro is not None and not ro.empty:
        flops_of = pr.set_index("rank")["flops"]
        ranks = sorted(int(r) for r in ro["rank"].unique())
        default = max(ranks, key=lambda r: (flops_of.get(r, 0.0), -r))
        controls.append(Control("flops_rank", "Rank (operator FLOPs)",
                                [(r, f"rank {r} ({fmt.quantity(float(flops_of.get(r, math.nan)), 'flop')})")
                                 for r in ranks], default))
        figures[0].spec["usermeta"] = {**figures[0].spec.get("usermeta", {}),
                                       "rg_click": {"field": "rank", "signal": "flops_rank"}}
        figures[0].caption += " Click a cell to see its rank's operators below."
        figures.append(_rank_ops_chart(ro, default, est))
        if len(ranks) < len(pr):
            figures[-1].caption += (f" It holds {len(ranks)} of the {len(pr):,} ranks (above {th.PAGE_RANKS_ALL} "
                                    f"ranks: the {th.PAGE_RANKS_EXTREMES} with the most and the least FLOPs, the "
                                    "median rank and the ranks findings name; a click on another rank's cell changes nothing); the per-operator "
                                    "table holds the others (filter it by rank).")
    split = [c for c in ("cube_flops", "vec_flops") if c in pr and pr[c].notna().any()]
    if split:
        shown = th.ranks_shown(pr.set_index("rank")["flops"], vl.named_ranks(a))
        figures.append(_cube_vec_chart(pr if shown is None else pr[pr["rank"].isin(shown)]))
        if shown is not None:
            figures[-1].caption += " " + th.ranks_shown_note(shown, len(pr), "FLOPs")
    if pr["flops_per_s"].notna().any():
        figures.append(_bars(pr, m["flops_per_s_mean"]))
    if "per_stage" in a.tables and len(a.tables["per_stage"]) > 1:
        figures.append(_stage_chart(a.tables["per_stage"]))
    cols = [Column("rank", "Rank", "rank"), Column("stage", "Stage", "int"), Column("host", "Host", "text"),
            Column("device_id", "Device", "int"),
            Column("flops", "FLOPs" + (", estimate" if est else ""), "flop"),
            Column("flops_per_s", "Rate", "flops"), Column("ratio_to_max", "FLOPs / max", "ratio"),
            Column("flops_per_s_vs_mean_ratio", "Rate vs mean", "ratio",
                   help="(rate - mean rate) / mean rate: negative below the mean, positive above")]
    if "utilization_ratio" in pr and pr["utilization_ratio"].notna().any():
        cols.append(Column("utilization_ratio", "Utilisation (profiler)", "ratio",
                           help="The profiler's own FLOPS utilisation (of the cube where it splits cube and vector) as "
                                "a fraction"))
    if pr["mfu_ratio"].notna().any():
        cols.append(Column("mfu_ratio", "MFU", "ratio", help=f"FLOP/s / peak ({m['peak_source']})"))
    for c, lbl, k, hlp in (("cube_flops", "Cube FLOPs", "flop", "the profiler's cube_FLOPs"),
                           ("vec_flops", "Vector FLOPs", "flop", "the profiler's vec_FLOPs"),
                           ("cube_flops_per_s", "Cube rate", "flops", "the profiler's cube_FLOPS"),
                           ("vec_flops_per_s", "Vector rate", "flops", "the profiler's vec_FLOPS"),
                           ("vec_utilization_ratio", "Vector utilisation", "ratio",
                            "the profiler's vec_FLOPS_Utilization as a fraction")):
        if c in pr and pr[c].notna().any():
            cols.append(Column(c, lbl, k, help=hlp))
    if "generation" in pr:
        cols.append(Column("generation", "File generation", "text"))
    tables = [Table.from_frame("flops-per-rank", "Per rank", pr, cols,
                               caption=f"FLOP/s: {m['flops_per_s_basis']}.")]
    if "per_stage" in a.tables:
        tables.append(Table.from_frame(
            "flops-per-stage", "Per pipeline stage", a.tables["per_stage"],
            [Column("stage", "Stage", "int"), Column("ranks", "Ranks", "int"),
             Column("flops_sum", "Σ FLOPs", "flop"), Column("flops_per_rank", "FLOPs per rank", "flop"),
             Column("above_stage_mean_ratio", "vs mean of stages", "ratio"),
             Column("flops_per_s_mean", "Mean rate", "flops")],
            caption="FLOPs per rank = Σ FLOPs of the stage's ranks / the ranks with data (the seed rule divides by "
                    "world size / stages; the same when no rank is missing)."))
    if "per_rank_step" in a.tables:
        tables.append(Table.from_frame(
            "flops-per-rank-step", "Per rank and profiled step", a.tables["per_rank_step"],
            [Column("rank", "Rank", "rank"), Column("step", "Step", "int"),
             Column("flops", "FLOPs" + (", estimate" if est else ""), "flop"),
             Column("step_ms", "Step time", "ms"), Column("flops_per_s", "Rate", "flops")]))
    if "ops" in a.tables:
        o = a.tables["ops"]
        ocols = [Column("rank", "Rank", "rank"), Column("op", "Operator", "text"),
                 Column("flops", "FLOPs" + (", estimate" if est else ""), "flop")]
        ocols += [Column(c, lbl, k) for c, lbl, k in (("calls", "Calls", "int"), ("time_ms", "Device time", "ms"),
                                                       ("flops_per_s", "Rate", "flops"),
                                                       ("utilization_pct", "Utilisation", "pct")) if c in o]
        tables.append(Table.from_frame("flops-ops", "Per operator", o, ocols))
    notes = []
    formulas = {fc.MATMUL: "2·M·N·K per matmul",
                fc.CONVOLUTION: "2·N·C_out·output size·C_in/groups·kernel size per convolution and per backprop",
                fc.ATTENTION: "the two matmuls of attention (QKᵀ, PV; backward twice the forward for PyTorch's ops, "
                              f"{fc.FLASH_BACKWARD_FACTOR:g}× for FlashAttention kernels, which recompute QKᵀ)"}
    if est:
        notes.append(f"FLOPs are an ESTIMATE from the op shapes, counting {', '.join(m['ops_counted'])}: "
                     + "; ".join(formulas[x] for x in m["methods"] if x in formulas)
                     + ". Element-wise and vector ops are not counted.")
    if not math.isfinite(m["flops_per_s_mean"]) and m.get("flops_per_s_basis", "").startswith("not computed"):
        notes.append("FLOP/s " + m["flops_per_s_basis"] + ".")
    for note, types in m.get("ops_counted_with_caveat", {}).items():
        if note != fc.PADDED:
            notes.append(f"Counted with a caveat ({note}): " + ", ".join(f"{t} ×{n}" for t, n in types.items()) + ".")
    for note, types in m.get("ops_not_counted", {}).items():
        listed = ", ".join(f"{t} ×{n}" for t, n in types.items())
        notes.append(f"Counted once, in the op inside them: {listed}." if note == fc.NESTED
                     else f"Not counted ({note}): {listed}.")
    if m.get("ops_padded_channels"):
        notes.append(f"{m['ops_padded_channels']} kernel(s), {fmt.percent(m['flops_padded_channels_ratio'])} of the "
                     "FLOPs, read their channels from a C0-padded device format (NC1HWC0 / FRACTAL_Z): counted as the "
                     "cube computes them, an upper bound of the model's FLOPs when a channel count is not a "
                     "multiple of 8 (float32) or 16 (float16).")
    if m.get("mfu_note"):  # the option's name on the command line
        notes.append("MFU " + m["mfu_note"].replace("pass peak_tflops", "pass --peak-tflops, the TFLOP/s of one "
                                                    "device,") + ".")
    elif m.get("peak_source"):
        notes.append(f"MFU uses the peak {m['peak_source']}; a float32 model measured against a 16-bit peak shows "
                     "a low MFU by construction.")
    if a.data["missing_ranks"]:
        notes.append(f"{len(a.data['missing_ranks'])} rank(s) without data: {_ranges(a.data['missing_ranks'])}.")
    pr_max = pr.loc[pr["flops"].idxmax()]
    summary = (f"{'Estimated ' if est else ''}FLOPs per rank average {fmt.quantity(m['flops_per_rank_mean'], 'flop')} "
               f"(largest on rank {int(pr_max['rank'])}, smallest at {fmt.percent(pr['ratio_to_max'].min())} of it); "
               f"mean rate {fmt.quantity(m['flops_per_s_mean'], 'flops')}"
               + (f", MFU {fmt.percent(m['mfu_ratio_mean'])}" if m.get("mfu_ratio_mean") is not None else "") + ".")
    if m.get("flops_per_s_refused"):
        notes.append("FLOP rate not shown for rank(s) " + ", ".join(m["flops_per_s_refused"]) + ": above a plausible "
                     "device peak (listed as a data problem).")
    if split and "vec_flops" in pr and pr["vec_flops"].notna().any() and (pr["vec_flops"].fillna(0) == 0).all():
        notes.append("The profiler counts no vector FLOPs on any rank (vec_FLOPs 0): all counted work is on the cube.")
    return View(summary=summary, figures=figures, tables=tables, notes=notes, controls=controls)
