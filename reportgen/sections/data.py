"""Data pipeline: how long each rank waits for input per step, and (MindSpore) which operation of the dataset
pipeline holds it back.

Sources and definitions:

* Waiting per rank and step: the trajectory section's step interval (MindSpore Insight: the step trace's
  iteration interval, "reading data from the data queue") or preparing time (Ascend / PyTorch: step start to the
  first device operation); PyTorch also ``enumerate(DataLoader)...__next__`` spans (table ``dataloader``), summed
  per rank and step. Share = mean wait / mean step, per rank, over the steps in scope.
* MindSpore dataset pipeline (``minddata_pipeline_raw_{rank}.csv``, reportgen/readers/minddata.py): per operation
  its workers and output-queue usage (average size / capacity); its input queue is its children's output queues
  (the fullest counts; a source operation, without children, reads its input itself and counts as full). The
  bottleneck (MindInsight's rule): an operation whose input queue is full and whose output queue is empty, here input usage >= :data:`~reportgen.thresholds.QUEUE_FULL` and output usage <=
  :data:`~reportgen.thresholds.QUEUE_EMPTY` (thresholds ours: the seed states the rule, not numbers). It produces
  more slowly than the operations before it deliver and the ones after it consume.
"""

from __future__ import annotations

import pandas as pd

from .. import charts as vl
from .. import facts, fmt, palette
from .. import thresholds as th
from ..charts import to_spec
from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, Column, Figure, Finding, Table, View, count, rank_ranges
from . import analysis_of

ID = "data"
TITLE = "Data pipeline"

#: suggestion per kind of bottleneck operation (op_type contains the key, case-insensitive)
ADVICE = [
    ("map", "raise num_parallel_workers of this map operation (and python_multiprocessing for Python "
            "transforms), or move the transform to the device (dataset.vision on Ascend)"),
    ("batch", "raise num_parallel_workers of batch, or simplify per_batch_map"),
    ("shuffle", "lower the shuffle buffer_size or shuffle at the source (shuffle=True of the dataset)"),
    ("dataset", "read faster at the source: convert the data to MindRecord, raise num_parallel_workers of the "
                "dataset, check the storage throughput"),
]
PREFETCH = "and raise the prefetch depth (mindspore.dataset.config.set_prefetch_size)"


def _advice(op_type: str, source: bool = False) -> str:
    """The parameter to change for a bottleneck operation (a source operation reads the data: ADVICE's 'dataset')."""
    low = op_type.lower()
    if source:
        low = "dataset"
    return next((a for k, a in ADVICE if k in low), "raise num_parallel_workers of this operation") + " " + PREFETCH


def waits(run: Run, options, F) -> tuple[pd.DataFrame | None, str]:
    """Per rank and step the input wait (ms) and which measure it is."""
    try:
        tr = analysis_of("trajectory", run, options).tables.get("per_rank_step")
    except Unavailable:
        tr = None
    dl = run.table("dataloader")
    if dl is not None and not dl.empty:
        d = dl.groupby(["rank", "step"], as_index=False)["dur_ms"].sum().rename(columns={"dur_ms": "wait_ms"})
        d = F.in_scope(d) if F is not None else d
        return d, "DataLoader __next__ (enumerate(DataLoader) spans)"
    if tr is not None:
        for col, label in (("step_interval_ms", "step interval"), ("preparing_ms", "preparing time")):
            if col in tr and tr[col].notna().any():
                d = tr[["rank", "step", col]].rename(columns={col: "wait_ms"}).dropna()
                d = F.in_scope(d) if F is not None else d
                return d, label
    return None, ""


def bottlenecks(ops: pd.DataFrame) -> pd.DataFrame:
    """``ops`` with ``input_usage`` (the fullest child queue) and ``bottleneck`` (the rule of the module doc)."""
    usage = ops.set_index(["rank", "op_id"])["queue_usage"]
    inp = []
    for r, ch in zip(ops["rank"], ops["children"]):
        kids = [int(c) for c in str(ch).split(",") if c]
        vals = [usage.get((r, k)) for k in kids]
        vals = [v for v in vals if v is not None and v == v]
        inp.append(max(vals) if vals else None)
    out = ops.assign(input_usage=pd.to_numeric(pd.Series(inp, index=ops.index, dtype="float64")))
    leaf = out["children"].astype(str).str.strip() == ""  # a source reads its data itself: its input is at hand
    out["bottleneck"] = ((out["input_usage"] >= th.QUEUE_FULL) | leaf) & (out["queue_usage"] <= th.QUEUE_EMPTY)
    return out


def analyze(run: Run, options=None) -> Analysis:
    F = facts.of(run, options)
    w, measure = waits(run, options, F)
    ops = run.table("minddata_ops")
    if (w is None or w.empty) and ops is None:
        raise Unavailable(
            "No input-wait times and no dataset pipeline profile in this run. MindSpore: profile with "
            "data_process=True while the script uses mindspore.dataset (minddata_pipeline_raw_<rank>.csv); MindSpore "
            "Insight: the step trace's step interval; Ascend: step_trace_time.csv (Preparing); PyTorch: the trace's "
            "CPU activity with enumerate(DataLoader) spans and ProfilerStep markers.")
    tables, metrics, data = {}, {"wait_measure": measure, "threshold_queue_full_ratio": th.QUEUE_FULL,
                                 "threshold_queue_empty_ratio": th.QUEUE_EMPTY,
                                 "threshold_wait_share_ratio": th.DATA_WAIT_SHARE}, {}
    if w is not None and not w.empty:
        per = w.groupby("rank", as_index=False)["wait_ms"].mean()
        if F is not None:
            per = per.merge(F.per_rank[["rank", "step_ms"]], on="rank", how="left")
            per["wait_share_ratio"] = (per["wait_ms"] / per["step_ms"]).where(per["step_ms"] > 0)
        tables["per_rank"] = per.sort_values(["wait_ms", "rank"], ascending=[False, True]).reset_index(drop=True)
        tables["per_rank_step"] = w
        metrics["wait_ms_mean"] = float(per["wait_ms"].mean())
        if "wait_share_ratio" in per:
            metrics["wait_share_ratio_mean"] = float(per["wait_share_ratio"].mean())
    if ops is not None:
        b = bottlenecks(ops)
        tables["pipeline_ops"] = b
        hit = b[b["bottleneck"]]
        metrics["bottleneck_ops"] = int(len(hit))
        data["bottlenecks"] = hit
    return Analysis(metrics=metrics, tables=tables, data=data)


def present(a: Analysis) -> View:
    m, t = a.metrics, a.tables
    figures, tables, parts = [], [], []
    if "per_rank" in t:
        pr = t["per_rank"]
        parts.append(f"ranks wait {fmt.ms(m['wait_ms_mean'])} per step for input ({m['wait_measure']})"
                     + (f", {fmt.percent(m['wait_share_ratio_mean'])} of the step" if "wait_share_ratio_mean" in m
                        else ""))
        cols = [Column("rank", "Rank", "rank"), Column("wait_ms", "Waiting for input per step", "ms")]
        if "wait_share_ratio" in pr:
            cols += [Column("step_ms", "Step", "ms"), Column("wait_share_ratio", "Share of the step", "ratio")]
        tables.append(Table.from_frame("data-ranks", "Waiting for input per rank", pr, cols,
                                       caption=f"Mean over the steps in scope of the {m['wait_measure']}; the longest "
                                               "first."))
        figures.append(_bars(pr.sort_values("rank").head(128)))
    if "pipeline_ops" in t:
        po = t["pipeline_ops"].assign(bottleneck=t["pipeline_ops"]["bottleneck"].map({True: "yes", False: ""}))
        hit = t["pipeline_ops"][t["pipeline_ops"]["bottleneck"]]
        if hit.empty:
            parts.append("no dataset operation holds the pipeline back (no input queue full with its output empty)")
        else:
            by = hit.groupby("op_type", sort=False)["rank"].nunique()
            parts.append("; ".join(f"the dataset operation {op} holds the pipeline back on {count(int(n), 'rank')}"
                                   for op, n in by.items()) + " (input queue full, output queue empty)")
        tables.append(Table.from_frame(
            "data-pipeline", "MindSpore dataset pipeline: operations and their queues", po,
            [Column("rank", "Rank", "rank"), Column("op_id", "Op id", "int"), Column("op_type", "Operation", "text"),
             Column("num_workers", "Workers", "int"), Column("input_usage", "Input queue usage", "ratio"),
             Column("queue_usage", "Output queue usage", "ratio"), Column("queue_capacity", "Queue capacity", "int"),
             Column("bottleneck", "Bottleneck", "text")],
            caption=f"Queue usage = average size / capacity. Bottleneck: input usage >= {th.QUEUE_FULL:.0%} and "
                    f"output usage <= {th.QUEUE_EMPTY:.0%} (MindInsight's rule; the thresholds are ours)."))
    summary = ("; ".join(parts) + ".") if parts else ""
    notes = [] if "pipeline_ops" in t else [
        "No dataset pipeline profile in the run. MindSpore writes minddata_pipeline_raw_<rank>.csv when profiling "
        "with data_process=True while the script uses mindspore.dataset; with it this section names the pipeline "
        "operation that holds the input back. PyTorch DataLoader workers are not in the trace's events."]
    return View(summary=summary[0].upper() + summary[1:] if summary else "", figures=figures, tables=tables,
                findings=_findings(a), notes=notes)


def _bars(pr: pd.DataFrame) -> Figure:
    unit, factor = fmt.unit_for("ms", pr["wait_ms"])
    chart = vl.in_unit(vl.Chart(pr[["rank", "wait_ms"]]), factor, "wait_ms").mark_bar(
        color=palette.ROLE["data_wait"]).encode(
        x=vl.X("rank:O", title="Rank", axis=vl.Axis(labelAngle=0, labelOverlap=True)),
        y=vl.Y("wait_ms_u:Q", axis=vl.Axis(**vl.axis("Waiting for input", unit))),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.tip("wait_ms_u", "Waiting for input", unit)])
    return Figure("data-waits", "Waiting for input per rank", to_spec(vl.fit(chart, 200)),
                  caption="Mean per step over the steps in scope (the first 128 ranks; the table has every rank).",
                  alt="Bars of input waiting time per rank")


def _findings(a: Analysis) -> list[Finding]:
    hit = a.data.get("bottlenecks")
    if hit is None or hit.empty:
        return []
    m = a.metrics
    out = []
    share = m.get("wait_share_ratio_mean")
    for op_type, g in list(hit.groupby("op_type", sort=False))[:4]:
        ranks = sorted(int(r) for r in g["rank"].unique())
        r0 = g.iloc[0]
        waiting = "" if share is None else (
            f" The ranks wait {fmt.percent(share)} of the step for input: the pipeline limits the training."
            if share > th.DATA_WAIT_SHARE else
            f" The ranks wait only {fmt.percent(share)} of the step for input: it does not limit the training now, "
            "but it will if the device gets faster.")
        out.append(Finding(
            "data_pipeline_bottleneck", "medium", ID,
            f"The dataset operation {op_type} (op {int(r0['op_id'])}, {int(r0['num_workers']) if pd.notna(r0['num_workers']) else '?'} "
            f"workers) holds the input pipeline back on {count(len(ranks), 'rank')} ({rank_ranges(ranks)[:80]}): "
            + (f"its input queue is {fmt.percent(r0['input_usage'])} full and its output queue "
               f"{fmt.percent(r0['queue_usage'])}." if pd.notna(r0["input_usage"]) else
               f"it reads the data itself and its output queue is {fmt.percent(r0['queue_usage'])} full.")
            + waiting,
            ranks=ranks[:1000],
            evidence={"metric": "output_queue_usage_ratio", "value": float(r0["queue_usage"]),
                      "reference": th.QUEUE_EMPTY,
                      "input_queue_usage_ratio": float(r0["input_usage"]) if pd.notna(r0["input_usage"]) else None,
                      "share_of_step_ratio": float(share) if share is not None else None},
            suggestion=_advice(str(op_type), source=bool(pd.isna(r0["input_usage"]) and not str(r0["children"]).strip()))
            + ".", figure="data-waits" if "per_rank" in a.tables else None))
    return out
