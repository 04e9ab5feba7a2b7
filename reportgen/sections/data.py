"""Data pipeline: how long each rank waits for input per step, and (from the dataset profiler's files) which
operation of the dataset pipeline holds it back.

Sources and definitions:

* Waiting per rank and step: the trajectory section's step interval (step_trace_raw_<rank>_detail_time.csv: the
  step trace's iteration interval, "reading data from the data queue") or preparing time (step_trace_time.csv's
  Preparing column, or a trace's ProfilerStep markers: step start to the first device operation); PyTorch also
  ``enumerate(DataLoader)...__next__`` spans (table ``dataloader``), summed per rank and step. Share = mean wait /
  mean step, per rank, over the steps in scope.
* The dataset profiler's pipeline (``minddata_pipeline_raw_{rank}.csv``, reportgen/readers/minddata.py): per
  operation its workers and output-queue usage (average size / capacity); its input queue is its children's output
  queues (the fullest counts; a source operation, without children, reads its input itself and counts as full).
  The bottleneck (the seed's rule): an operation whose input queue is full and whose output queue is empty, here
  input usage >= :data:`~reportgen.thresholds.QUEUE_FULL` and output usage <=
  :data:`~reportgen.thresholds.QUEUE_EMPTY` (thresholds ours: the seed states the rule, not numbers). It produces
  more slowly than the operations before it deliver and the ones after it consume.
* The dataset profiler's pipeline summary (``minddata_pipeline_summary_{rank}.json|csv``): each operation's CPU
  (user + sys, share of one core) per worker. An operation whose workers each use more than
  :data:`~reportgen.thresholds.MINDDATA_CPU_PER_WORKER` of a core is CPU-bound: more workers help (the dataset
  profiler's BottleneckAnalyzer rule and threshold; operations that run in one thread by design, such as Shuffle or
  Repeat, are left out as it does). The summary's own verdict (``bottleneck_warning`` /
  ``bottleneck_suggestion``) is shown as written, beside ours.
* Device queue (``device_queue_profiling_{rank}.txt``, else ``dataset_iterator_profiling_{rank}.txt``): per rank the
  batches, the queue's capacity and mean size when a batch was taken, the share of batches that found it empty
  (the device waited for the host) and the mean times to get a batch from the pipeline, to push it and per batch.
  More than :data:`~reportgen.thresholds.DEVICE_QUEUE_EMPTY` empty (the dataset profiler's DeviceQueue rule) is a
  finding.
* ``dataset.csv``: the dataset profiler's per-stage times of the dataset operations, as written (occurrences x
  average = total).
* Step gap (the seed's data preparation page, S2): per rank and step the data queue's size (the device's
  queue GetNext takes from: ``minddata_aicpu_{rank}.txt``) and the host queue's (``device_queue_profiling``), table
  ``minddata_queue_steps``; the three-way verdict per rank is :func:`queue_verdicts` (the seed's rule).
"""

from __future__ import annotations

from .. import labels as L

import pandas as pd

from .. import charts as vl
from .. import facts, fmt, palette
from .. import thresholds as th
from ..charts import to_spec
from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, Column, Control, Figure, Finding, Table, View, count, rank_ranges
from . import analysis_of, hint, needs_reason, sources

ID = "data"
TITLE = "Data pipeline"
#: an input-wait measure (reportgen/facts.py input_wait: DataLoader spans, else preparing time, else the step
#: interval, with the step times) or a dataset pipeline profile
NEEDS = (("dataloader", "step_time", "step_trace", "minddata_ops", "minddata_queue", "minddata_summary",
          "minddata_stages", "minddata_queue_steps"),)
#: the step-gap chart draws this many ranks (those with a verdict first) and steps per rank and queue at the most
QUEUE_CHART_RANKS = 8
QUEUE_CHART_STEPS = 300
#: the verdicts of :func:`queue_verdicts`
VERDICT_PROCESSING, VERDICT_TRANSFER, VERDICT_NONE, VERDICT_UNKNOWN = (
    "data processing", "transfer", "none", "data queue empties (no host queue to tell why)")
#: suggestion per kind of bottleneck operation (op_type contains the key, case-insensitive): the hint key whose text
#: (the framework's API words, from the family registry through ``Options.hints``) names the parameter to change,
#: and the plain words without one
ADVICE = [
    ("map", "data.map", "add workers to this map operation or move the transform to the device"),
    ("batch", "data.batch", "add workers to the batch operation or simplify its per-batch function"),
    ("shuffle", "data.shuffle", "lower the shuffle buffer or shuffle at the source"),
    ("dataset", "data.source", "read faster at the source: a faster data format, more reader workers, the storage "
                               "throughput"),
]
#: the hint keys the section says (looked up once, in analyze, and kept with the analysis for its findings)
HINTS = {"data.map", "data.batch", "data.shuffle", "data.source", "data.prefetch", "data.pipeline_profile",
         "data.workers", "data.workers_of", "data.unseen_workers"}


def _hint(a: Analysis, key: str, default: str) -> str:
    return (a.data.get("hints") or {}).get(key) or default


def _advice(a: Analysis, op_type: str, source: bool = False) -> str:
    """The parameter to change for a bottleneck operation (a source operation reads the data: ADVICE's 'dataset'),
    then the prefetch depth."""
    low = op_type.lower()
    if source:
        low = "dataset"
    what = next((_hint(a, key, plain) for k, key, plain in ADVICE if k in low),
                _hint(a, "data.workers", "add workers to this operation"))
    return what + " and " + _hint(a, "data.prefetch", "raise the input pipeline's prefetch depth")


def waits(run: Run, options=None) -> facts.InputWait | None:
    """The run's input-wait measure (reportgen/facts.py :func:`~reportgen.facts.input_wait`: DataLoader wait, else
    preparing time, else step interval; per rank and step). The section shows that one measure under its name."""
    return facts.input_wait(run, options)


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


def queue_verdicts(steps: pd.DataFrame) -> pd.DataFrame:
    """Per rank of ``minddata_queue_steps``: the data and host queues' steps, empty steps and mean sizes, and the
    step gap's verdict, the seed's rule (its MinddataAnalyser.analyse_queue_summary, S2 "step gap"):

    * with both queues: when the data queue was empty on more than one step (the training waited for data; one step
      is left to the start), the host queue empty on more than HOST_QUEUE_EMPTY of its steps means the data
      processing is too slow (``data processing``), else the host has the data and the transfer to the device is the
      bottleneck (``transfer``);
    * with the host queue only: empty on more than HOST_QUEUE_EMPTY of its steps (and on more than one step: ours,
      as for the data queue, so a profile of the first batch only, which includes the pipeline's start, is no
      verdict) means ``data processing``;
    * with the data queue only and it empty on more than one step: the cause is unknown (VERDICT_UNKNOWN);
    * else ``none`` (data preparation does not hold the step back)."""
    rows = []
    for rank, g in steps.groupby("rank", sort=True):
        d, h = g[g["queue"] == "data"]["size"], g[g["queue"] == "host"]["size"]
        d_empty, h_empty = int((d == 0).sum()), int((h == 0).sum())
        h_ratio = h_empty / len(h) if len(h) else None
        if len(d) and d_empty > 1:
            verdict = VERDICT_UNKNOWN if h_ratio is None else \
                VERDICT_PROCESSING if h_ratio > th.HOST_QUEUE_EMPTY else VERDICT_TRANSFER
        elif not len(d) and h_ratio is not None and h_ratio > th.HOST_QUEUE_EMPTY and h_empty > 1:
            verdict = VERDICT_PROCESSING
        else:
            verdict = VERDICT_NONE
        rows.append({"rank": int(rank), "data_steps": int(len(d)), "data_empty_steps": d_empty,
                     "data_size_mean": float(d.mean()) if len(d) else None, "host_steps": int(len(h)),
                     "host_empty_ratio": h_ratio, "host_size_mean": float(h.mean()) if len(h) else None,
                     "verdict": verdict})
    return pd.DataFrame(rows)


#: the dataset pipeline's operations that run in one thread by design (BottleneckAnalyzer.non_multithreaded_ops):
#: their CPU per worker says nothing about workers
SINGLE_THREADED = {"Barrier", "Concat", "EpochCtrl", "Rename", "Repeat", "Shuffle", "Skip", "Take", "Zip"}
#: each part of the section: (its analysis table, the canonical table it reads, what it shows) (the notes of a run
#: without it name the files that give the table: the runner's provenance)
PARTS = [
    ("pipeline_ops", "minddata_ops", "the operations and their queues"),
    ("profiler_summary", "minddata_summary", "CPU per worker, the dataset profiler's own verdict"),
    ("device_queue", "minddata_queue", "the device queue per batch"),
    ("stages", "minddata_stages", "per-stage times"),
]


def framework(run: Run) -> str:
    """The framework of the training script as the reader found it (``Run.framework``): which framework's input
    pipeline files the section can ask for (its hint texts come with the options)."""
    return run.framework or ""


def analyze(run: Run, options=None) -> Analysis:
    W = waits(run, options)
    ops = run.table("minddata_ops")
    queue, summary, stages = run.table("minddata_queue"), run.table("minddata_summary"), run.table("minddata_stages")
    if W is None and all(x is None for x in (ops, queue, summary, stages)):
        raise Unavailable("No input-wait times and no dataset pipeline profile in this run: "
                          + needs_reason(None, [" or ".join(NEEDS[0])], options) + ".")
    tables, metrics, data = {}, {"framework": framework(run), "threshold_queue_full_ratio": th.QUEUE_FULL,
                                 "threshold_queue_empty_ratio": th.QUEUE_EMPTY,
                                 "threshold_wait_share_ratio": th.DATA_WAIT_SHARE}, {}
    data["hints"] = {k: hint(options, k) for k in HINTS if hint(options, k)}
    # the dataset pipeline profile's parts the run lacks, with the files that give them (a framework that writes
    # such a profile: its hints say how to turn it on; another framework's run has none to miss)
    data["missing_parts"] = [f"{what} ({sources(options, table, own=True)})" if sources(options, table, own=True)
                             else what for key, table, what in PARTS if run.table(table) is None]
    if W is not None:
        metrics["wait_measure"] = W.measure
        metrics["wait_definition"] = W.definition
        per = W.per_rank
        tables["per_rank"] = per.sort_values(["wait_ms", "rank"], ascending=[False, True]).reset_index(drop=True)
        tables["per_rank_step"] = W.per_rank_step[W.per_rank_step["in_scope"]][["rank", "step", "wait_ms"]] \
            .reset_index(drop=True)
        metrics["wait_ms_mean"] = float(per["wait_ms"].mean())
        metrics["wait_share_ratio_mean"] = W.share_mean
    else:
        metrics["wait_measure"] = ""
    metrics["threshold_cpu_per_worker_ratio"] = th.MINDDATA_CPU_PER_WORKER
    metrics["threshold_device_queue_empty_ratio"] = th.DEVICE_QUEUE_EMPTY
    if ops is not None:
        b = bottlenecks(ops)
        if "cpu_per_worker_pct" in b:
            b["cpu_per_worker_ratio"] = b.pop("cpu_per_worker_pct") / 100.0
            b["cpu_cores"] = b.pop("avg_cpu_pct") / 100.0  # cores busy (user + sys): may exceed 1, not a ratio
            b["cpu_bound"] = (b["cpu_per_worker_ratio"] > th.MINDDATA_CPU_PER_WORKER) & \
                ~b["op_type"].astype(str).isin(SINGLE_THREADED)
            metrics["cpu_bound_ops"] = int(b["cpu_bound"].sum())
            data["cpu_bound"] = b[b["cpu_bound"]]
        tables["pipeline_ops"] = b
        hit = b[b["bottleneck"]]
        metrics["bottleneck_ops"] = int(len(hit))
        data["bottlenecks"] = hit
    if queue is not None:
        q = queue.sort_values(["empty_ratio", "rank"], ascending=[False, True], na_position="last")
        tables["device_queue"] = q.reset_index(drop=True)
        metrics["queue_empty_ratio_mean"] = float(q["empty_ratio"].mean()) if q["empty_ratio"].notna().any() else None
        data["queue_empty"] = q[q["empty_ratio"] > th.DEVICE_QUEUE_EMPTY]
    qsteps = run.table("minddata_queue_steps")
    if qsteps is not None and not qsteps.empty:
        v = queue_verdicts(qsteps)
        tables["queue_verdict"] = v
        metrics["threshold_host_queue_empty_ratio"] = th.HOST_QUEUE_EMPTY
        metrics["queue_processing_ranks"] = int((v["verdict"] == VERDICT_PROCESSING).sum())
        metrics["queue_transfer_ranks"] = int((v["verdict"] == VERDICT_TRANSFER).sum())
        shown = v.assign(hit=v["verdict"] != VERDICT_NONE).sort_values(["hit", "rank"], ascending=[False, True])
        keep = shown["rank"].head(QUEUE_CHART_RANKS).tolist()
        q = qsteps[qsteps["rank"].isin(keep)].sort_values(["rank", "queue", "step"])
        data["queue_steps"] = q.groupby(["rank", "queue"], sort=False).head(QUEUE_CHART_STEPS).reset_index(drop=True)
        data["queue_ranks"] = keep
    if summary is not None:
        tables["profiler_summary"] = summary
        metrics["profiler_bottleneck_ranks"] = int((summary["ms_bottleneck"].astype(str) != "").sum())
    if stages is not None:
        tables["stages"] = stages
    a = Analysis(metrics=metrics, tables=tables, data=data)
    a.findings = _findings(a)
    return a


def present(a: Analysis) -> View:
    m, t = a.metrics, a.tables
    figures, tables, parts = [], [], []
    if "per_rank" in t:
        pr = t["per_rank"]
        parts.append(f"ranks wait {fmt.ms(m['wait_ms_mean'])} per step for input ({m['wait_measure']})"
                     + (f", {fmt.percent(m['wait_share_ratio_mean'])} of the step"
                        if m.get("wait_share_ratio_mean") == m.get("wait_share_ratio_mean") else ""))
        cols = [Column("rank", "Rank", "rank"), Column("wait_ms", f"Waiting for input per step ({m['wait_measure']})",
                                                         "ms")]
        if "wait_share_ratio" in pr:
            cols += [Column("step_ms", L.label("step_ms"), "ms"), Column("wait_share_ratio", "Share of the step", "ratio")]
        tables.append(Table.from_frame("data-ranks", "Waiting for input per rank", pr, cols,
                                       caption=f"Mean over the steps in scope of the {m['wait_measure']}; the longest "
                                               "first."))
        figures.append(_bars(pr.sort_values("rank").head(128)))
    if "pipeline_ops" in t:
        raw = t["pipeline_ops"]
        po = raw.assign(bottleneck=raw["bottleneck"].map({True: "yes", False: ""}))
        if "cpu_bound" in po:
            po["cpu_bound"] = po["cpu_bound"].map({True: "yes", False: ""})
        hit = raw[raw["bottleneck"]]
        if hit.empty:
            parts.append("no dataset operation holds the pipeline back (no input queue full with its output empty)")
        else:
            by = hit.groupby("op_type", sort=False)["rank"].nunique()
            parts.append("; ".join(f"the dataset operation {op} holds the pipeline back on {count(int(n), 'rank')}"
                                   for op, n in by.items()) + " (input queue full, output queue empty)")
        cpu = "cpu_bound" in raw
        if cpu and raw["cpu_bound"].any():
            by = raw[raw["cpu_bound"]].groupby("op_type", sort=False)["rank"].nunique()
            parts.append("; ".join(f"{op} is CPU-bound on {count(int(n), 'rank')}" for op, n in by.items())
                         + f" (each worker above {th.MINDDATA_CPU_PER_WORKER:.0%} of a core)")
        cols = [Column("rank", "Rank", "rank"), Column("op_id", "Op id", "int"), Column("op_type", "Operation", "text"),
                Column("num_workers", "Workers", "int"), Column("input_usage", "Input queue usage", "ratio"),
                Column("queue_usage", "Output queue usage", "ratio"), Column("queue_capacity", "Queue capacity", "int")]
        if cpu:
            cols += [Column("queue_empty_ratio", "Output queue empty (share of samples)", "ratio"),
                     Column("cpu_cores", "CPU of all workers (cores)", "count"),
                     Column("cpu_per_worker_ratio", "CPU per worker (of a core)", "ratio"),
                     Column("cpu_bound", "CPU-bound", "text")]
        cols.append(Column("bottleneck", "Bottleneck", "text"))
        tables.append(Table.from_frame(
            "data-pipeline", "Dataset pipeline: operations and their queues", po, cols,
            caption=f"Queue usage = average size / capacity. Bottleneck: input usage >= {th.QUEUE_FULL:.0%} and "
                    f"output usage <= {th.QUEUE_EMPTY:.0%} (the seed's rule; the thresholds are ours)."
                    + (f" CPU from the pipeline summary (user + sys, 100% = one core); CPU-bound: each worker above "
                       f"{th.MINDDATA_CPU_PER_WORKER:.0%} of a core (the dataset profiler's rule; single-threaded "
                       "operations such as Shuffle left out)." if cpu else "")))
    if "device_queue" in t:
        q = t["device_queue"]
        if m.get("queue_empty_ratio_mean") is not None:
            parts.append(f"batches find the device queue empty {fmt.percent(m['queue_empty_ratio_mean'])} of the time "
                         "(mean over ranks)")
        tables.append(Table.from_frame(
            "data-queue", "Device queue per rank", q,
            [Column("rank", "Rank", "rank"), Column("source", "Queue", "text"), Column("batches", "Batches", "int"),
             Column("capacity", "Capacity", "int"), Column("size_mean", "Mean size when taken", "count"),
             Column("empty_ratio", "Batches that found it empty", "ratio"),
             Column("pipeline_time_ms", "Get from pipeline (mean)", "ms"),
             Column("push_time_ms", "Push to device (mean)", "ms"), Column("batch_time_ms", "Per batch (mean)", "ms")],
            caption="From device_queue_profiling_<rank>.txt (the host-to-device queue; dataset_iterator_profiling "
                    "otherwise); the first batch is left out, as the dataset profiler does. An empty queue means the "
                    f"device waited for the host; more than {th.DEVICE_QUEUE_EMPTY:.0%} of the batches is a finding "
                    "(the dataset profiler's rule). The emptiest first."))
        figures.append(_queue_bars(q.sort_values("rank").head(128)))
    controls = []
    if "queue_verdict" in t:
        v = t["queue_verdict"]
        said = [f"{vd} on {count(int(n), 'rank')}" for vd, n in v["verdict"].value_counts().items()]
        parts.append("step gap (data and host queues): " + ", ".join(said))
        tables.append(Table.from_frame(
            "data-queue-verdict", "Step gap: data and host queue per rank", v,
            [Column("rank", "Rank", "rank"), Column("data_steps", "Data queue steps", "int"),
             Column("data_empty_steps", "Data queue empty (steps)", "int"),
             Column("data_size_mean", "Data queue mean size", "count"),
             Column("host_steps", "Host queue steps", "int"),
             Column("host_empty_ratio", "Host queue empty (share of steps)", "ratio"),
             Column("host_size_mean", "Host queue mean size", "count"), Column("verdict", "Bottleneck", "text")],
            caption="Data queue: the device's queue the training takes each step's batch from (minddata_aicpu_<rank>"
                    ".txt); host queue: the host-to-device queue (device_queue_profiling_<rank>.txt), every batch. "
                    "The seed's rule: the data queue empty on more than one step means the step waited for data; "
                    f"then a host queue empty on more than {th.HOST_QUEUE_EMPTY:.0%} of its steps means the data "
                    "processing is too slow, else the transfer to the device is. Host queue alone: empty on more "
                    f"than {th.HOST_QUEUE_EMPTY:.0%} of its steps (and on more than one) = data processing."))
        ranks = a.data.get("queue_ranks") or []
        if ranks:
            figures.append(_queue_steps(a.data["queue_steps"], ranks, len(v)))
            if len(ranks) > 1:
                controls.append(Control("queue_rank", "Rank (step gap)", [(r, f"Rank {r}") for r in ranks], ranks[0]))
    if "profiler_summary" in t:
        tables.append(Table.from_frame(
            "data-profiler", "The dataset profiler's own pipeline analysis per rank", t["profiler_summary"],
            [Column("rank", "Rank", "rank"), Column("batch_time_ms", "Per batch", "ms"),
             Column("pipeline_time_ms", "Per pipeline get", "ms"), Column("push_time_ms", "Per queue push", "ms"),
             Column("ms_bottleneck", "Profiler's bottleneck", "text"),
             Column("ms_suggestion", "Profiler's suggestion", "text"),
             Column("ms_details", "Profiler's details", "text"), Column("source", "File", "text")],
            caption="As written in minddata_pipeline_summary_<rank>.json (or .csv) by the dataset profiler's "
                    "analyzer; its rule is CPU per worker and queue usage, ours is in the tables above."))
    if "stages" in t:
        tables.append(Table.from_frame(
            "data-stages", "Dataset stages (dataset.csv)", t["stages"],
            [Column("rank", "Rank", "rank"), Column("operation", "Operation", "text"), Column("stage", "Stage", "text"),
             Column("occurrences", "Occurrences", "int"), Column("avg_ms", "Mean", "ms"),
             Column("total_ms", "Total", "ms"), Column("info", "Custom info", "text")],
            caption="As written by the dataset profiler; total = occurrences x mean."))
    summary = ("; ".join(parts) + ".") if parts else ""
    missing = a.data.get("missing_parts") or []
    profile = _hint(a, "data.pipeline_profile", "")
    notes = []
    if missing and profile:  # a framework that writes a dataset pipeline profile: another one has none to miss
        notes.append("Not in the run: " + "; ".join(missing) + ". To get them, " + profile
                     + " (the operations' queues name the operation that holds the input back; the summary adds "
                       "CPU per worker; the device queue shows whether the device waited for the host).")
    if _hint(a, "data.unseen_workers", ""):  # the framework's input workers are not in its profile
        notes.append(_hint(a, "data.unseen_workers", ""))
    return View(summary=summary[0].upper() + summary[1:] if summary else "", figures=figures, tables=tables,
                notes=notes, controls=controls)


def _queue_steps(q: pd.DataFrame, ranks: list[int], total: int) -> Figure:
    """Lines of the data and host queues' size per step for the rank the ``queue_rank`` control picks."""
    df = q[["rank", "queue", "step", "size"]].assign(queue=q["queue"].map({"data": "Data queue (device)",
                                                                           "host": "Host queue"}))
    chart = vl.Chart(df).transform_filter("toString(datum.rank) == toString(queue_rank)").mark_line(
        point=True).encode(
        x=vl.X("step:Q", title="Step", axis=vl.Axis(tickMinStep=1, format="d")),
        y=vl.Y("size:Q", title="Queue size when the batch was taken"),
        color=vl.role_color("queue", [("Data queue (device)", "data_wait"), ("Host queue", "compute")],
                            title="Queue"),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("queue:N", title="Queue"),
                 vl.Tooltip("step:Q", title="Step", format=",d"), vl.Tooltip("size:Q", title="Size", format=",d")])
    chart = chart.add_params(vl.param(name="queue_rank", value=ranks[0]))
    more = f" {len(ranks)} of {total} ranks (those with a bottleneck first); the table has every rank." \
        if total > len(ranks) else ""
    return Figure("data-queue-steps", "Step gap: data and host queue size per step", to_spec(vl.fit(chart, 220)),
                  caption="A data queue at 0 means the step waited for data; a host queue at 0 means the data "
                          "processing is too slow; a large host queue with a small data queue means the transfer to "
                          f"the device is the bottleneck (the seed's reading). The first {QUEUE_CHART_STEPS} steps "
                          "of the rank chosen above." + more,
                  alt="Lines of the data queue and host queue size per step")


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


def _queue_bars(q: pd.DataFrame) -> Figure:
    chart = vl.Chart(q[["rank", "empty_ratio"]].dropna()).mark_bar(color=palette.ROLE["data_wait"]).encode(
        x=vl.X("rank:O", title="Rank", axis=vl.Axis(labelAngle=0, labelOverlap=True)),
        y=vl.Y("empty_ratio:Q", title="Batches that found the device queue empty", axis=vl.Axis(format="%"),
               scale=vl.Scale(domain=[0, 1])),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("empty_ratio:Q", title="Empty", format=fmt.D3_PCT)])
    rule = vl.Chart(pd.DataFrame({"y": [th.DEVICE_QUEUE_EMPTY]})).mark_rule(strokeDash=[4, 3]).encode(y="y:Q")
    return Figure("data-queue-empty", "Batches that found the device queue empty, per rank",
                  to_spec(vl.fit(chart + rule, 200)),
                  caption=f"The dashed line is {th.DEVICE_QUEUE_EMPTY:.0%} (the dataset profiler's rule). The first "
                          "128 ranks; the table has every rank.",
                  alt="Bars of the share of batches that found the device queue empty, per rank")


def _findings(a: Analysis) -> list[Finding]:
    out = _cpu_findings(a) + _queue_findings(a)
    hit = a.data.get("bottlenecks")
    if hit is None or hit.empty:
        return out
    m = a.metrics
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
            + _cpu_note(r0) + waiting,
            ranks=ranks[:1000],
            evidence={"metric": "output_queue_usage_ratio", "value": float(r0["queue_usage"]),
                      "reference": th.QUEUE_EMPTY,
                      "input_queue_usage_ratio": float(r0["input_usage"]) if pd.notna(r0["input_usage"]) else None,
                      "share_of_step_ratio": float(share) if share is not None else None},
            suggestion=_capital(_advice(a, str(op_type), source=bool(pd.isna(r0["input_usage"])
                                                                  and not str(r0["children"]).strip()))) + ".",
            figure="data-waits" if "per_rank" in a.tables else None))
    return out


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]


def _cpu_note(row) -> str:
    """What the pipeline summary says of a bottleneck operation's CPU (nothing without a summary)."""
    v = row.get("cpu_per_worker_ratio") if hasattr(row, "get") else None
    if v is None or pd.isna(v):
        return ""
    busy = "CPU-bound: more workers help" if v > th.MINDDATA_CPU_PER_WORKER else \
        "not CPU-bound: more workers alone may not help (look at I/O and the prefetch depth)"
    return f" Each of its workers uses {fmt.percent(v)} of a core ({busy})."


def _waiting(a: Analysis) -> str:
    share = a.metrics.get("wait_share_ratio_mean")
    if share is None:
        return ""
    return (f" The ranks wait {fmt.percent(share)} of the step for input: the pipeline limits the training."
            if share > th.DATA_WAIT_SHARE else
            f" The ranks wait only {fmt.percent(share)} of the step for input: it does not limit the training now.")


def _cpu_findings(a: Analysis) -> list[Finding]:
    """``data_op_cpu_bound``: an operation whose workers each use more than MINDDATA_CPU_PER_WORKER of a core."""
    hit = a.data.get("cpu_bound")
    if hit is None or hit.empty:
        return []
    out = []
    share = a.metrics.get("wait_share_ratio_mean")
    queue_rule = a.data.get("bottlenecks")
    named = set() if queue_rule is None else set(queue_rule["op_type"])  # said once, in data_pipeline_bottleneck
    for op_type, g in list(hit.groupby("op_type", sort=False))[:4]:
        if op_type in named:
            continue
        ranks = sorted(int(r) for r in g["rank"].unique())
        worst = g.sort_values("cpu_per_worker_ratio", ascending=False).iloc[0]
        workers = int(worst["num_workers"]) if pd.notna(worst["num_workers"]) else None
        out.append(Finding(
            "data_op_cpu_bound", "medium" if share is None or share > th.DATA_WAIT_SHARE else "low", ID,
            f"The dataset operation {op_type} (op {int(worst['op_id'])}) is CPU-bound on {count(len(ranks), 'rank')} "
            f"({rank_ranges(ranks)[:80]}): each of its {workers if workers is not None else '?'} workers uses "
            f"{fmt.percent(worst['cpu_per_worker_ratio'])} of a core (above {th.MINDDATA_CPU_PER_WORKER:.0%})."
            + _waiting(a),
            ranks=ranks[:1000],
            evidence={"metric": "cpu_per_worker_ratio", "value": float(worst["cpu_per_worker_ratio"]),
                      "reference": th.MINDDATA_CPU_PER_WORKER, "num_workers": workers,
                      "share_of_step_ratio": float(share) if share is not None else None},
            suggestion=_capital(_hint(a, "data.workers_of", "add workers to") + f" {op_type}"
                                + (f" above {workers}" if workers else ""))
            + " (the host has to have the cores: check the other processes on it), or move the transform to the "
              "device.", figure=None))
    return out


def _queue_findings(a: Analysis) -> list[Finding]:
    """``data_queue_empty``: ranks whose device queue was empty for more than DEVICE_QUEUE_EMPTY of the batches."""
    hit = a.data.get("queue_empty")
    if hit is None or hit.empty:
        return []
    ranks = sorted(int(r) for r in hit["rank"])
    worst = hit.iloc[0]
    culprit = a.data.get("bottlenecks")
    cpu = a.data.get("cpu_bound")
    named = next((str(d.iloc[0]["op_type"]) for d in (culprit, cpu) if d is not None and not d.empty), None)
    return [Finding(
        "data_queue_empty", "high" if (a.metrics.get("wait_share_ratio_mean") or 0) > th.DATA_WAIT_SHARE else "medium",
        ID,
        f"The device found its input queue empty in {fmt.percent(worst['empty_ratio'])} of the batches on rank "
        f"{int(worst['rank'])}" + (f" and above {th.DEVICE_QUEUE_EMPTY:.0%} on {count(len(ranks), 'rank')} "
                                   f"({rank_ranges(ranks)[:80]})" if len(ranks) > 1 else "")
        + ": the host's dataset pipeline does not keep up with the device." + _waiting(a),
        ranks=ranks[:1000],
        evidence={"metric": "device_queue_empty_ratio", "value": float(worst["empty_ratio"]),
                  "reference": th.DEVICE_QUEUE_EMPTY},
        suggestion=(f"Speed up {named} first (the operation named above), then " if named else
                    "Find the slow dataset operation ("
                    + _hint(a, "data.pipeline_profile", "profile the dataset pipeline") + " for its operations' "
                    "queues), then ")
        + _hint(a, "data.prefetch", "raise the input pipeline's prefetch depth") + " so the queue holds more batches.",
        figure="data-queue-empty")]

