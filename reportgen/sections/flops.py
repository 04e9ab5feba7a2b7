"""FLOPs: per-rank floating-point work and rate, its balance across ranks and pipeline stages, MFU where the
peak is known.

Sources and definitions:

* MindSpore Insight ``flops_summary_<rank>.json`` (../shared/research/mindinsight-cluster-profiling.md §2.4,
  §3.5; reader ``readers/mindinsight_flops.py``): FLOPs = ``FLOPs`` or ``cube_FLOPs + vec_FLOPs`` (MFLOPs,
  here plain counts), FLOPS = ``FLOPS`` or ``cube_FLOPS + vec_FLOPS`` (GFLOPS, here FLOP/s). The profiler's
  FLOPs sum the unique AI Core ops (PMU counters) and its FLOPS is a mean of per-op rates (MindSpore <= 2.0)
  or Σ op rates / Σ op durations (2.2/2.3): neither is "FLOPs per wall-clock second", so no MFU is derived
  from them; the profiler's own utilisation (``FLOPS_Utilization``, % of the AI Core peak) is shown instead.
  ``ratio_to_max`` = FLOPs / max over ranks = MindInsight's ``FLOPs_norm``.
* PyTorch traces recorded with ``record_shapes=True`` (table ``cpu_ops``): FLOPs ESTIMATED from ``Input Dims``
  of aten::mm / addmm / bmm / baddbmm (2·M·N·K; the bias add of addmm/baddbmm is not counted, as in torch),
  matmul / linear (2·batch·M·N·K), convolutions (2·N·C_out·spatial_out·C_in/groups·kernel; the output size is
  not in the trace, so the forward assumes stride 1 and "same" padding, i.e. spatial_out = spatial_in;
  ``convolution_backward`` is exact from grad_output and counts grad-input + grad-weight = 2 forward passes).
  Nested ops are counted once: a counted op that contains another counted op on the same thread (aten::linear
  -> aten::addmm, aten::matmul -> aten::mm) is dropped and only the innermost op counts. Element-wise ops
  (mul, add, torch counts them as one FLOP per element) and attention kernels (SDPA) are not counted.
* FLOP/s (every family) = FLOPs / DEVICE time (:func:`device_rate`), never a CPU span: the host enqueues work
  long before the device runs it (asynchronous launches, CUDA-graph replay), so the span of the CPU ops can be a
  small fraction of the device time (one MI300X trace gave 7,676 TFLOP/s that way). PyTorch: the FLOPs of the ops
  launched in the run's step windows / the windows' total length, the windows being the ProfilerStep spans on the
  common clock (the windows the device timeline is cut by in overlap and trajectory) or, without markers, the
  whole-trace window from the first to the last GPU op (HTA's kernel span; every op counts; a CPU-only trace has
  no other device: its first to last event). Ascend: MatMul FLOPs / Σ device step time (step_trace_time).
  MindSpore Insight: the profiler's own FLOPS (above).
* Ascend (torch_npu / MindSpore 2.x ``ASCEND_PROFILER_OUTPUT``): kernel_details.csv PMU columns (aic_mac_ratio,
  ...) are utilisation ratios, not FLOP counts: without ``flops_summary`` files there is nothing to count.
* MFU (PyTorch only) = FLOP/s / peak, peak from ``options["peak_tflops"]`` or from the device name
  (:data:`PEAK_TFLOPS`); not computed otherwise.
* Findings (seed rules, MindInsight 2.3.1 ``parallel_proposer.py``, research §3.8): ``flops_per_s_low`` a rank
  whose FLOP/s is more than 20% below the mean of the ranks; ``stage_flops_imbalance`` a pipeline stage whose
  FLOPs per rank (Σ FLOPs of its ranks / its ranks) is more than 20% above the mean over stages.
"""

from __future__ import annotations

import json
import math
import re

from .. import charts as vl
import numpy as np
import pandas as pd

from .. import thresholds as th
from .. import fmt, palette
from ..charts import (axis, band, cell_labels, fit, in_unit, natural_key, scale_position, sequential, stage_color,
                      tip, to_spec)
from ..errors import Unavailable
from ..model import ByRank, Run
from ..timeline import per_value
from ..report import rank_ranges, Analysis, Column, Figure, Finding, Table, View

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

MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"}
_CONV = re.compile(r"^aten::(conv|_conv|convolution|cudnn_conv|mkldnn_conv|miopen_conv|slow_conv|thnn_conv)")

SOURCES = ("MindSpore Insight: flops_summary_<rank>.json (profiler with aicore_metrics / FLOPs collection); "
           "PyTorch: a trace recorded with record_shapes=True (FLOPs are then estimated from the shapes of "
           "aten::mm/addmm/bmm/baddbmm/matmul/linear/conv ops); Ascend: kernel_details.csv PMU columns are "
           "utilisation ratios, not FLOP counts, so Ascend data gives FLOPs only through MindSpore's "
           "flops_summary files")


def severity(gap: float) -> str:
    return "high" if gap >= SEVERITY_HIGH_GAP else "medium" if gap >= SEVERITY_MEDIUM_GAP else "low"


# --------------------------------------------------------------------------- shape-based estimate


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


def op_flops(name: str, dims) -> float:
    """Estimated FLOPs of one aten op from its ``Input Dims`` (list of shapes); NaN when not computable."""
    try:
        d = [x if isinstance(x, list) else [] for x in dims]
        if name == "aten::mm" and len(d[0]) == 2 and len(d[1]) == 2:
            return 2.0 * d[0][0] * d[0][1] * d[1][1]
        if name == "aten::addmm" and len(d[1]) == 2 and len(d[2]) == 2:
            return 2.0 * d[1][0] * d[1][1] * d[2][1]
        if name == "aten::bmm" and len(d[0]) == 3 and len(d[1]) == 3:
            return 2.0 * d[0][0] * d[0][1] * d[0][2] * d[1][2]
        if name == "aten::baddbmm" and len(d[1]) == 3 and len(d[2]) == 3:
            return 2.0 * d[1][0] * d[1][1] * d[1][2] * d[2][2]
        if name == "aten::linear" and len(d[0]) >= 1 and len(d[1]) == 2:
            return 2.0 * _prod(d[0][:-1]) * d[1][1] * d[1][0]
        if name == "aten::matmul" and d[0] and d[1]:
            a, b = d[0], d[1]
            m, k = (1, a[0]) if len(a) == 1 else (a[-2], a[-1])
            n = 1 if len(b) == 1 else b[-1]
            ba, bb = a[:-2], b[:-2]
            width = max(len(ba), len(bb))
            ba, bb = [1] * (width - len(ba)) + list(ba), [1] * (width - len(bb)) + list(bb)
            return 2.0 * _prod(max(x, y) for x, y in zip(ba, bb)) * m * k * n
        if _CONV.match(name):
            if "backward" in name:  # [grad_output, input, weight, ...]: grad-input + grad-weight
                go, w = d[0], d[2]
                if len(go) >= 3 and len(w) == len(go):
                    return 2 * 2.0 * go[0] * go[1] * _prod(go[2:]) * _prod(w[1:])
                return math.nan
            x, w = d[0], d[1]
            if len(x) >= 3 and len(w) == len(x):
                if "transpose" in name:  # weight [C_in, C_out/groups, *k]: work per input position
                    return 2.0 * x[0] * _prod(x[2:]) * w[0] * _prod(w[1:])
                return 2.0 * x[0] * w[0] * _prod(x[2:]) * _prod(w[1:])  # assumes spatial_out = spatial_in
            return math.nan
    except (IndexError, TypeError, ValueError):
        return math.nan
    return math.nan


def _counted(name: str) -> bool:
    return name in MATMUL or bool(_CONV.match(name))


def estimate_ops(cpu_ops: pd.DataFrame) -> pd.DataFrame:
    """Counted ops with ``flops`` and ``innermost`` (False for an op containing another counted op on its thread)."""
    ops = cpu_ops[cpu_ops["name"].map(_counted)].copy()
    if ops.empty:
        return ops.assign(flops=[], innermost=[])
    cache: dict[tuple[str, str], float] = {}

    def flops_of(name: str, text) -> float:
        key = (name, str(text))
        if key not in cache:
            try:
                dims = json.loads(text) if isinstance(text, str) else text
            except ValueError:
                dims = None
            cache[key] = op_flops(name, dims) if isinstance(dims, list) else math.nan
        return cache[key]

    ops["flops"] = [flops_of(n, t) for n, t in zip(ops["name"], ops["input_dims"])]
    if "end_ms" not in ops:
        ops["end_ms"] = ops["start_ms"] + ops["dur_ms"]
    # start/end come from exact integer times through one monotone map (model.rel_ms), so equal instants are
    # equal floats and the nesting test needs no tolerance: a child ending in the same ns as its parent nests
    ops = ops.sort_values(["rank", "tid", "start_ms", "end_ms"], ascending=[True, True, True, False])
    end = ops["end_ms"].to_numpy()
    start = ops["start_ms"].to_numpy()
    same = (ops["rank"].to_numpy()[1:] == ops["rank"].to_numpy()[:-1]) & \
        (ops["tid"].astype(str).to_numpy()[1:] == ops["tid"].astype(str).to_numpy()[:-1])
    contains_next = same & (start[1:] < end[:-1]) & (end[1:] <= end[:-1])
    ops["innermost"] = ~np.append(contains_next, False)
    return ops.reset_index(drop=True)


def device_rate(flops: float, device_ms: float) -> float:
    """FLOP/s = FLOPs / device time in seconds (the module docstring's definition); NaN without device time."""
    return flops / (device_ms / 1e3) if device_ms and device_ms > 0 else math.nan


def _kineto(run: Run) -> dict:
    ops = estimate_ops(run.table("cpu_ops"))
    if ops.empty or not ops["flops"].notna().any():
        raise Unavailable(
            "The PyTorch trace has no aten::mm/addmm/bmm/baddbmm/matmul/linear/conv ops with shapes: record the "
            "trace with record_shapes=True (torch.profiler.profile(record_shapes=True)) to get FLOPs estimates. "
            f"Other sources: {SOURCES}.")
    inner = ops[ops["innermost"]]
    uncomputed = int(inner["flops"].isna().sum())
    steps = run.table("trace_steps")
    whole = run.step_source == "whole_trace"
    basis = "whole-trace window (first to last GPU op; CPU-only: first to last event)" if whole \
        else "ProfilerStep windows"
    rows, step_rows = [], []
    inner_of, steps_of = ByRank(inner), ByRank(steps)
    for rank in sorted(ops["rank"].unique()):
        o = inner_of[rank]
        total = float(o["flops"].sum())
        st = steps_of[rank].sort_values("start_ms") if steps is not None else None
        in_steps, wall_ms = math.nan, math.nan
        if st is not None and not st.empty:
            wall_ms = float((st["end_ms"] - st["start_ms"]).sum())
            if whole:  # one window over the whole trace: every op is in it, even one launched before the first kernel
                per = pd.Series({int(st["step"].iloc[0]): total})
            else:
                idx = np.searchsorted(st["start_ms"].to_numpy(), o["start_ms"].to_numpy(), side="right") - 1
                ok = idx >= 0
                ok[ok] &= o["start_ms"].to_numpy()[ok] < st["end_ms"].to_numpy()[idx[ok]]
                per = pd.DataFrame({"step": st["step"].to_numpy()[idx[ok]], "flops": o["flops"].to_numpy()[ok]}) \
                    .groupby("step")["flops"].sum()
            in_steps = float(per.sum())
            for s in st.itertuples():
                f = float(per.get(s.step, 0.0))
                step_rows.append({"rank": int(rank), "step": int(s.step), "flops": f, "step_ms": s.end_ms - s.start_ms,
                                  "flops_per_s": device_rate(f, s.end_ms - s.start_ms)})
        rows.append({"rank": int(rank), "flops": total, "wall_ms": wall_ms, "time_basis": basis,
                     "flops_per_s": device_rate(in_steps, wall_ms), "ops_counted": int(o["flops"].notna().sum())})
    per_rank = pd.DataFrame(rows)
    by_op = inner.groupby(["rank", "name"], as_index=False).agg(calls=("flops", "size"), flops=("flops", "sum"),
                                                                 time_ms=("dur_ms", "sum"))
    by_op = by_op.rename(columns={"name": "op"}).sort_values(["rank", "flops"], ascending=[True, False])
    outer = ops[~ops["innermost"]].groupby("name").size().to_dict()
    return {"per_rank": per_rank, "ops": by_op, "per_rank_step": pd.DataFrame(step_rows) if step_rows else None,
            "meta": {"flops_source": "estimated from PyTorch op shapes (Input Dims)",
                     "flops_estimate": True,
                     "ops_counted": sorted(inner["name"].unique().tolist()),
                     "ops_skipped_as_nested": {k: int(v) for k, v in sorted(outer.items())},
                     "ops_without_shapes": uncomputed,
                     "flops_per_s_basis": f"FLOPs launched in the {basis} / their length on the device clock"}}


_ASCEND_MATMUL = re.compile(r"matmul", re.I)


def ascend_matmul_flops(input_shapes: str, output_shapes: str) -> float:
    """2·M·N·K of one MatMul kernel from kernel_details shapes ("m,k;k,n" -> "m,n", batch dims allowed):
    K = |A| / (|out| / N), so FLOPs = 2 · |A| · N. NaN when the shapes are not readable."""
    try:
        a = [int(x) for x in str(input_shapes).split(";")[0].split(",") if x.strip()]
        out = [int(x) for x in str(output_shapes).split(";")[0].split(",") if x.strip()]
    except ValueError:
        return math.nan
    if len(a) < 2 or len(out) < 2:
        return math.nan
    return 2.0 * _prod(a) * out[-1]


def _ascend(run: Run) -> dict:
    k = run.table("kernels")
    if k is None or "input_shapes" not in k:
        raise Unavailable("No FLOPs data: the Ascend run has no kernel_details.csv with Input Shapes "
                          f"(profile with record_shapes=True). Sources: {SOURCES}.")
    matmul = per_value(k["type"].astype(str), lambda t: t.str.contains(_ASCEND_MATMUL))  # once per distinct type
    mm = k[matmul & (k["core"] != "COMMUNICATION")].copy()
    memo: dict = {}   # a model repeats a few shapes thousands of times
    mm["flops"] = [memo[io] if io in memo else memo.setdefault(io, ascend_matmul_flops(*io))
                   for io in zip(mm["input_shapes"], mm["output_shapes"])]
    if not mm["flops"].notna().any():
        raise Unavailable("No FLOPs data: kernel_details.csv has no MatMul kernels with readable shapes. "
                          f"Sources: {SOURCES}.")
    steps = run.table("step_time")
    rows = []
    st_of = ByRank(steps)
    for rank, o in mm.groupby("rank"):
        total = float(o["flops"].sum())
        st = st_of[rank]
        wall_ms = float(st["step_ms"].sum()) if st is not None and not st.empty else math.nan
        rows.append({"rank": int(rank), "flops": total, "wall_ms": wall_ms, "flops_per_s": device_rate(total, wall_ms),
                     "ops_counted": int(o["flops"].notna().sum())})
    by_op = mm.groupby(["rank", "type"], as_index=False).agg(calls=("flops", "size"), flops=("flops", "sum"),
                                                              time_ms=("dur_ms", "sum"))
    return {"per_rank": pd.DataFrame(rows), "ops": by_op.rename(columns={"type": "op"}), "per_rank_step": None,
            "meta": {"flops_source": "estimated from kernel_details.csv MatMul shapes (2·M·N·K); attention and "
                                     "vector kernels are not counted", "flops_estimate": True,
                     "flops_per_s_basis": "FLOPs / device step time (step_trace_time)"}}


def _mindinsight(run: Run) -> dict:
    mi = run.table("mi_flops").drop_duplicates("rank", keep="first").sort_values("rank").reset_index(drop=True)
    per_rank = mi[[c for c in ("rank", "flops", "flops_per_s", "utilization_ratio", "vec_utilization_ratio",
                               "cube_flops", "vec_flops", "generation") if c in mi]].copy()
    out = {"per_rank": per_rank, "ops": None, "per_rank_step": None,
           "meta": {"flops_source": "MindSpore Insight flops_summary (AI Core PMU counters)", "flops_estimate": False,
                    "generations": sorted(mi["generation"].dropna().unique().tolist()),
                    "flops_per_s_basis": "profiler FLOPS: mean of per-op rates (MindSpore <= 2.0) or Σ op rates / "
                                         "Σ op durations (2.2/2.3)"}}
    det = run.table("mi_flops_ops")
    if det is not None:
        o = det.rename(columns={"mflops": "mflops"})
        o = o.assign(flops=o["mflops"] * 1e6, flops_per_s=o["gflops"] * 1e9)
        out["ops"] = o[["rank", "op", "flops", "flops_per_s", "utilization_pct"]] \
            .sort_values(["rank", "flops"], ascending=[True, False])
    return out


# --------------------------------------------------------------------------- analyze


def _peak(run: Run, options) -> tuple[float | None, str]:
    """Peak FLOP/s and where it came from ("" when unknown)."""
    opt = options.get("peak_tflops") if options is not None else None
    if opt:
        try:
            return float(opt) * 1e12, f"option peak_tflops = {float(opt):g}"
        except (TypeError, ValueError):
            pass
    props = run.table("device_properties")
    if props is not None:
        names = props["name"].dropna().astype(str).unique().tolist()
        for pat, tf in PEAK_TFLOPS:
            if names and all(re.search(pat, n) for n in names):
                return tf * 1e12, f"{names[0]}: {tf:g} TFLOP/s dense BF16/FP16 (datasheet)"
    return None, ""


def stage_table(per_rank: pd.DataFrame) -> pd.DataFrame:
    """Per stage: Σ FLOPs, ranks, FLOPs per rank (seed: Σ / ranks per stage) and its gap to the mean over stages."""
    s = per_rank.dropna(subset=["stage"])
    if s.empty:
        return pd.DataFrame()
    g = s.groupby("stage").agg(flops_sum=("flops", "sum"), ranks=("rank", "size"),
                               flops_per_s_mean=("flops_per_s", "mean")).reset_index()
    g["stage"] = g["stage"].astype(int)
    g["flops_per_rank"] = g["flops_sum"] / g["ranks"]
    mean = g["flops_per_rank"].mean()
    g["above_stage_mean_ratio"] = g["flops_per_rank"] / mean - 1 if mean > 0 else math.nan
    return g


def analyze(run: Run, options=None) -> Analysis:
    if run.table("mi_flops") is not None:
        d = _mindinsight(run)
    elif run.table("cpu_ops") is not None:
        d = _kineto(run)
    elif run.source_format == "ascend":
        d = _ascend(run)
    else:
        where = {"ascend": "This Ascend run has no flops_summary files (kernel_details.csv PMU columns are not "
                           "FLOP counts). ",
                 "kineto": "This PyTorch trace has no shape-annotated matmul/conv ops. "}.get(run.source_format, "")
        raise Unavailable(f"No FLOPs data in this run. {where}Sources: {SOURCES}.")
    per_rank = d["per_rank"]
    fmax = per_rank["flops"].max()
    per_rank["ratio_to_max"] = per_rank["flops"] / fmax if fmax and fmax > 0 else math.nan
    peak, peak_source = (None, "") if run.table("mi_flops") is not None else _peak(run, options)
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
    stages = stage_table(per_rank)
    tables = {"per_rank": per_rank}
    if not stages.empty:
        tables["per_stage"] = stages
    if d.get("per_rank_step") is not None:
        tables["per_rank_step"] = d["per_rank_step"]
    if d.get("ops") is not None:
        tables["ops"] = d["ops"]
    metrics = {**d["meta"], "family": run.source_format,
               "flops_total": float(per_rank["flops"].sum()), "flops_per_rank_mean": float(per_rank["flops"].mean()),
               "flops_per_s_mean": mean_fps,
               "peak_flops_per_s": peak, "peak_source": peak_source or None,
               "mfu_ratio_mean": float(per_rank["mfu_ratio"].mean()) if peak else None,
               "threshold_flops_below_mean_ratio": FLOPS_BELOW_MEAN,
               "threshold_stage_flops_above_mean_ratio": STAGE_FLOPS_ABOVE_MEAN}
    if run.table("mi_flops") is not None:
        metrics["mfu_note"] = ("not computed: the profiler's FLOPs/FLOPS are not per wall-clock second; see "
                               "utilization_ratio (the profiler's own share of the AI Core peak)")
    elif not peak:
        metrics["mfu_note"] = "not computed: peak unknown (pass peak_tflops, or a trace naming a known device)"
    return Analysis(metrics=metrics, tables=tables,
                    data={"hosts_known": bool(run.hosts) and all(run.hosts.get(int(r)) for r in per_rank["rank"])
                          and all(run.devices.get(int(r)) is not None for r in per_rank["rank"]),
                          "missing_ranks": list(run.missing_ranks)})


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
        y, title = vl.Y("host:N", title="Host", scale=gap), "hosts × devices"
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
                  caption="Colour = FLOPs / the largest FLOPs of any rank (MindInsight's FLOPs_norm)."
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
                 vl.Tooltip("above_stage_mean_ratio:Q", title="vs mean of stages", format="+" + fmt.D3_PCT)])
    rule = vl.Chart(df).mark_rule(strokeDash=[4, 3]).encode(y="mean(mean_u):Q")
    chart = (bars + rule).properties(width={"step": band(len(df), 60, 8)}, height=220)
    return Figure("flops-stages", "FLOPs per rank of each pipeline stage", to_spec(chart),
                  caption="Σ FLOPs of the stage's ranks / its ranks; dashed: mean over stages.",
                  alt="Bar chart of FLOPs per rank by pipeline stage")


_ranges = rank_ranges


def present(a: Analysis) -> View:
    m = a.metrics
    pr = a.tables["per_rank"]
    est = m.get("flops_estimate")
    figures = [_grid(pr, a.data["hosts_known"]), _bars(pr, m["flops_per_s_mean"])]
    if "per_stage" in a.tables and len(a.tables["per_stage"]) > 1:
        figures.append(_stage_chart(a.tables["per_stage"]))
    cols = [Column("rank", "Rank", "rank"), Column("stage", "Stage", "int"), Column("host", "Host", "text"),
            Column("device_id", "Device", "int"),
            Column("flops", "FLOPs" + (", estimate" if est else ""), "flop"),
            Column("flops_per_s", "Rate", "flops"), Column("ratio_to_max", "FLOPs / max", "ratio"),
            Column("below_mean_flops_per_s_ratio", "Rate below mean", "ratio")]
    if "utilization_ratio" in pr and pr["utilization_ratio"].notna().any():
        cols.append(Column("utilization_ratio", "Utilisation (profiler)", "ratio",
                           help="The profiler's FLOPS_Utilization (cube for MindSpore 2.0) as a fraction"))
    if pr["mfu_ratio"].notna().any():
        cols.append(Column("mfu_ratio", "MFU", "ratio", help=f"FLOP/s / peak ({m['peak_source']})"))
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
            caption="FLOPs per rank = Σ FLOPs of the stage's ranks / the ranks with data (MindInsight divides by "
                    "world size / stages; the same when no rank is missing)."))
    if "per_rank_step" in a.tables:
        tables.append(Table.from_frame(
            "flops-per-rank-step", "Per rank and profiled step", a.tables["per_rank_step"],
            [Column("rank", "Rank", "rank"), Column("step", "Step", "int"), Column("flops", "FLOPs, estimate", "flop"),
             Column("step_ms", "Step time", "ms"), Column("flops_per_s", "Rate", "flops")]))
    if "ops" in a.tables:
        o = a.tables["ops"]
        ocols = [Column("rank", "Rank", "rank"), Column("op", "Operator", "text"),
                 Column("flops", "FLOPs" + (", estimate" if est else ""), "flop")]
        ocols += [Column(c, lbl, k) for c, lbl, k in (("calls", "Calls", "int"), ("time_ms", "CPU time", "ms"),
                                                       ("flops_per_s", "Rate", "flops"),
                                                       ("utilization_pct", "Utilisation", "pct")) if c in o]
        tables.append(Table.from_frame("flops-ops", "Per operator", o, ocols))
    notes = []
    if est and m.get("family") == "ascend":
        notes.append("FLOPs are an ESTIMATE: 2·M·N·K of every MatMul kernel in kernel_details.csv, from its input and "
                     "output shapes; attention and vector kernels are not counted. FLOP/s = FLOPs / device step time.")
    elif est:
        nested = ", ".join(f"{k} ×{v}" for k, v in m["ops_skipped_as_nested"].items()) or "none"
        notes.append(f"FLOPs are an ESTIMATE from the op shapes in the trace, counting {', '.join(m['ops_counted'])} "
                     f"(2·M·N·K for matmuls; convolutions assume stride 1 and 'same' padding). Ops containing "
                     f"another counted op on the same thread are not counted again (skipped: {nested}). "
                     "Element-wise ops and attention kernels are not counted.")
        if m["ops_without_shapes"]:
            notes.append(f"{m['ops_without_shapes']} counted op(s) had no usable shapes and count as 0.")
    if m.get("mfu_note"):
        notes.append("MFU " + m["mfu_note"] + ".")
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
    return View(summary=summary, figures=figures, tables=tables, findings=findings(a), notes=notes)
