"""Overlap: computation vs communication per rank and step, pure (exposed) communication,
pure receive and stage time for pipeline parallel, grouped by stage.

Sources and definitions:

* ``step_trace_time.csv`` (research notes on msprof-analyze §2.1):
  Computing, Communication, Communication(Not Overlapped), Overlapped, Free, Stage, Bubble,
  Communication(Not Overlapped and Exclude Receive), Preparing — as written. Stage rows are the
  element-wise maximum over the stage's ranks, per step (msprof-analyze ``cluster_step_trace_time.csv``).
  **Departure:** the NPU profiler's Bubble counts only ``hcom_receive`` ops, so pipelines built on
  ``batch_isend_irecv`` (Megatron / MindSpeed: ``hcom_batchSendRecv``) get Bubble = 0. We also show
  ``receive_incl_batch_ms`` = Σ elapse of the step's p2p receive and batchSendRecv ops (from the canonical
  ``comm_ops``: communication.json on NPUs; on torch.profiler traces the NCCL Send/Recv and SendRecv kernels) and the
  stage time and exposed collective time derived from it, wherever the run has batched send/receive operations.
* ``comm_busy_ms`` ("Communication busy (union)"): the step breakdown's union of communication time on the rank's
  timeline (reportgen/facts.py ``COMM_BUSY_DEFINITION``); the communication section's ``comm_op_ms`` is the sum of
  the operations' durations and exceeds it when operations overlap (several streams).
* A share outside 0..1 is a data problem (:func:`reportgen.facts.guard_ratio`), never shown.
* ``*cluster_analyse_*`` files read by the seed (research notes on the seed's cluster pages §3.2):
  computation_time (= step - pure communication, so it includes idle time), communication_alone_time
  (pure communication), stage_time, receive_alone_time (pure receive), collective_communication_alone_time.
  The file's last row is its average (the graph-mode framework 2.0+ leaves step 1 out of it); we use it as the
  seed does.
* Communication share (the seed's helper, ``parallel_analyser.py``), the same for every family:
  Σ pure communication / (Σ computation + Σ pure communication) over ranks, where computation =
  step - pure communication; between stages: Σ pure receive / the same denominator; within a stage:
  Σ pure collective communication / Σ (computation + pure communication) of the stage's ranks.
"""

from __future__ import annotations

from .. import labels as L

import math

from .. import charts as vl
import pandas as pd

from .. import thresholds as th
from .. import fmt, palette
from ..charts import MEDIAN_CAPTION, WARMUP_CAPTION, median_heatmap, stacked_parts, to_spec
from .. import facts
from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, Column, Control, EvidenceView, Figure, Finding, Table, View
from . import needs_reason

ID = "overlap"
TITLE = "Computation / communication overlap"

DEVICE_COLS = ["computing_ms", "comm_ms", "comm_not_overlapped_ms", "overlapped_ms", "free_ms", "stage_ms",
               "bubble_ms", "comm_not_overlapped_exclude_receive_ms", "preparing_ms"]
MI_COLS = ["computation_incl_free_ms", "comm_not_overlapped_ms", "stage_ms", "receive_only_ms",
           "comm_not_overlapped_exclude_receive_ms"]
MAX_CHART_ROWS = 20_000

#: the canonical tables this section reads (the runner says ``unavailable: needs ...`` without them)
NEEDS = (("step_time.comm_not_overlapped_ms", "cluster_overlap"),)


def _receive_incl_batch(run: Run) -> pd.DataFrame | None:
    """Σ elapse of p2p receive and batched send/receive ops (``comm_ops`` op_type receive / batchsendrecv) per rank
    and step (our Bubble, incl. batchSendRecv); None when the run has no batched send/receive operation (then the
    step breakdown's bubble misses nothing and stays the one receive column)."""
    ops = run.table("comm_ops")
    if ops is None:
        return None
    p2p = ops[(ops["kind"] == "p2p") & ops["op_type"].isin(["receive", "batchsendrecv"])]
    if not (p2p["op_type"] == "batchsendrecv").any():  # nothing the step breakdown's bubble leaves out
        return None
    return p2p.groupby(["rank", "step"], as_index=False)["elapse_ms"].sum().rename(
        columns={"elapse_ms": "receive_incl_batch_ms"})


def _device(run: Run, F) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """From a measured device breakdown (``step_time``: computing, communication, not overlapped, free per step)."""
    st = run.table("step_time")
    rows = st[["rank", "step", "step_ms"] + DEVICE_COLS].rename(columns={"comm_ms": "comm_busy_ms"})
    recv = _receive_incl_batch(run)
    if recv is not None:
        rows = rows.merge(recv, on=["rank", "step"], how="left")
        rows["receive_incl_batch_ms"] = rows["receive_incl_batch_ms"].fillna(0.0)
        rows["stage_incl_batch_ms"] = rows["step_ms"] - rows["receive_incl_batch_ms"]
        rows["comm_not_overlapped_exclude_receive_incl_batch_ms"] = (
            rows["comm_not_overlapped_ms"] - rows["receive_incl_batch_ms"]).clip(lower=0)
    rows["receive_only_ms"] = rows["bubble_ms"]
    rows["computation_incl_free_ms"] = rows["step_ms"] - rows["comm_not_overlapped_ms"]
    cols = [c for c in rows.columns if c not in ("rank", "step")]
    return rows, _per_rank(rows, cols, F), {"breakdown": "device", "average_source": "computed"}


def _per_rank(rows: pd.DataFrame, cols: list[str], F) -> pd.DataFrame:
    """Per rank: the mean over the run's steps in scope (reportgen/facts.py); every step when the run has none."""
    if F is None:
        return rows.groupby("rank", as_index=False)[cols].mean()
    return F.per_rank_mean(rows, cols)


def _computation_incl_idle(run: Run, F) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """From the profiler's own overlap analysis (``cluster_overlap``), whose computation is step - pure
    communication (idle included)."""
    ov = run.table("cluster_overlap")
    rename = {"computation_ms": "computation_incl_free_ms", "comm_alone_ms": "comm_not_overlapped_ms",
              "receive_alone_ms": "receive_only_ms", "collective_comm_alone_ms": "comm_not_overlapped_exclude_receive_ms"}
    rows = ov.rename(columns=rename)[["rank", "step"] + MI_COLS].copy()
    rows["step_ms"] = rows["computation_incl_free_ms"] + rows["comm_not_overlapped_ms"]
    meta = {"breakdown": "computation_incl_idle", "average_source": "computed"}
    avg = run.table("cluster_overlap_avg")
    if avg is not None and set(rows["rank"]) <= set(avg["rank"]):
        # the file's own average row: the seed's helper rates come from it; kept as a reference, never the headline
        ref = avg.rename(columns=rename)[["rank"] + MI_COLS].copy()
        ref["stage"] = ref["rank"].map(run.stage_of)
        ref["step_ms"] = ref["computation_incl_free_ms"] + ref["comm_not_overlapped_ms"]
        st_avg = run.table("step_trace_avg")
        if st_avg is not None:
            ref = ref.merge(st_avg[["rank", "step_interval_ms"]], on="rank", how="left")
        meta["file_average_rates"] = {**comm_shares(ref), "within_stage": within_stage_shares(ref)}
        meta["file_average_table"] = ref
    # the seed shows the step interval beside these (model / pipeline parallel view)
    st = run.table("step_trace")
    if st is not None:
        rows = rows.merge(st[["rank", "step", "step_interval_ms"]], on=["rank", "step"], how="left")
    cols = [c for c in rows.columns if c not in ("rank", "step")]
    return rows, _per_rank(rows, cols, F), meta


def _receive_cols(per_rank: pd.DataFrame) -> tuple[str, str]:
    """(receive, collective-only) columns: ours incl. batchSendRecv when present, else the source's."""
    if "receive_incl_batch_ms" in per_rank:
        return "receive_incl_batch_ms", "comm_not_overlapped_exclude_receive_incl_batch_ms"
    return "receive_only_ms", "comm_not_overlapped_exclude_receive_ms"


def comm_shares(per_rank: pd.DataFrame, run: Run | None = None) -> dict:
    """The seed's helper rates on per-rank averages (see the module docstring): THE run-wide shares of the step.

    Each is Σ over ranks of the part / Σ over ranks of (computation incl. free + exposed communication), the step
    as the breakdown splits it (the seed's helper rates; a ratio of sums, so a rank's share weighs by its step).
    ``comm_share_ratio`` is the exposed communication share the summary, the advisor and every finding quote;
    ``computing_share_ratio`` and ``free_share_ratio`` the same formula on computing and free time (when the
    breakdown has them). One formula for the page: the summary copies these, never re-derives them (issue 28).
    A share outside 0-100 % (a clock-resolution artefact) is NaN and said as a data problem (facts.share)."""
    comp = per_rank["computation_incl_free_ms"].sum()
    comm = per_rank["comm_not_overlapped_ms"].sum()
    denom = comp + comm
    out = {"comm_share_ratio": float(facts.share(comm, denom, "exposed communication share", run)),
           "computation_incl_free_share_ratio": float(facts.share(comp, denom, "computation share", run))}
    for key, col, quantity in (("computing_share_ratio", "computing_ms", "computing share"),
                               ("free_share_ratio", "free_ms", "free share")):
        if col in per_rank and per_rank[col].notna().any():
            v = float(facts.share(per_rank[col].sum(), denom, quantity, run))
            if v == v:
                out[key] = v
    recv, _ = _receive_cols(per_rank)
    if recv in per_rank and per_rank[recv].notna().any():
        out["between_stage_share_ratio"] = float(per_rank[recv].sum() / denom) if denom > 0 else math.nan
        out["between_stage_receive_column"] = recv
    return out


def _stage_shares(per_rank: pd.DataFrame, col: str) -> list[dict]:
    """Per stage: Σ col / Σ (computation + pure communication) over the stage's ranks (the helper's denominator)."""
    out = []
    if "stage" not in per_rank or per_rank["stage"].isna().all() or col not in per_rank:
        return out
    for stage, grp in per_rank.groupby("stage"):
        denom = (grp["computation_incl_free_ms"] + grp["comm_not_overlapped_ms"]).sum()
        out.append({"stage": int(stage), "ranks": sorted(int(r) for r in grp["rank"]),
                    "share": float(grp[col].sum() / denom) if denom > 0 else math.nan})
    return out


def within_stage_shares(per_rank: pd.DataFrame) -> list[dict]:
    _, coll = _receive_cols(per_rank)
    return [{"stage": x["stage"], "ranks": x["ranks"], "within_stage_share_ratio": x["share"]}
            for x in _stage_shares(per_rank, coll)]


def most_receive_stage(per_rank: pd.DataFrame) -> dict | None:
    """The stage whose ranks spend the largest share of their time in receives (the one the bubble hits most)."""
    recv, _ = _receive_cols(per_rank)
    if recv not in per_rank or not per_rank[recv].notna().any():
        return None
    shares = [x for x in _stage_shares(per_rank, recv) if not math.isnan(x["share"])]
    return max(shares, key=lambda x: x["share"], default=None)


def stage_rows(rows: pd.DataFrame, value_cols: list[str]) -> pd.DataFrame:
    """Stage rows: the element-wise maximum over the stage's ranks, per step (msprof-analyze's rule)."""
    if rows["stage"].isna().all():
        return pd.DataFrame()
    g = rows.dropna(subset=["stage"]).groupby(["stage", "step"])
    out = g[value_cols].max().reset_index()
    out["ranks"] = g["rank"].apply(lambda r: ", ".join(str(int(x)) for x in sorted(r))).to_numpy()
    out["stage"] = out["stage"].astype(int)
    return out


def analyze(run: Run, options=None) -> Analysis:
    st = run.table("step_time")
    F = facts.of(run, options)
    if st is not None and "comm_not_overlapped_ms" in st and st["comm_not_overlapped_ms"].notna().any():
        rows, per_rank, meta = _device(run, F)
    elif run.table("cluster_overlap") is not None:
        rows, per_rank, meta = _computation_incl_idle(run, F)
    else:
        raise Unavailable("No per-step breakdown of computation and communication in this run: "
                          + needs_reason(None, ["step_time.comm_not_overlapped_ms or cluster_overlap"], options) + ".")
    if F is not None:  # the steps listed are the run's; a step only this source has is left out (and said)
        extra = sorted(set(rows["step"]) - set(F.steps_all))
        rows = F.listed(rows).copy()
        rows["warmup"] = rows["step"].isin(F.warmup_steps)
        if extra:
            meta["steps_left_out"] = [int(x) for x in extra]
        meta["warmup_steps"] = list(F.warmup_steps)
    stage_of = {r: run.stage_of(r) for r in run.ranks}
    for df in (rows, per_rank):
        df["stage"] = df["rank"].map(stage_of)
    value_cols = [c for c in rows.columns if c.endswith("_ms")]
    per_rank["pure_comm_ratio"] = per_rank["comm_not_overlapped_ms"] / (
        per_rank["computation_incl_free_ms"] + per_rank["comm_not_overlapped_ms"])
    stages = stage_rows(rows, value_cols)
    shares = comm_shares(per_rank, run)
    within = within_stage_shares(per_rank)
    metrics = {**meta, **shares, "ranks": int(per_rank["rank"].nunique()),
               "steps": len(F.steps) if F is not None else int(rows["step"].nunique()), "within_stage": within,
               "pure_comm_ms_mean": float(per_rank["comm_not_overlapped_ms"].mean()),
               "threshold_comm_share_ratio": th.COMM_SHARE}
    if "bubble_ms" in rows and rows["bubble_ms"].notna().any():
        metrics["bubble_source"] = ("bubble_ms as the step breakdown gives it counts plain receive operations only; "
                                    "receive_incl_batch_ms adds batched send/receive operations") \
            if "receive_incl_batch_ms" in rows else "the step breakdown"
    metrics["definitions"] = {"comm_busy_ms": facts.COMM_BUSY_DEFINITION}
    contract = ["rank", "computing_ms", "comm_busy_ms", "comm_not_overlapped_ms", "overlapped_ms", "free_ms",
                "receive_only_ms", "stage_ms", "comm_not_overlapped_exclude_receive_ms", "stage"]
    per_rank_out = per_rank.reindex(columns=contract + [c for c in per_rank.columns if c not in contract])
    tables = {"per_rank": per_rank_out, "per_rank_step": rows}
    if "file_average_table" in metrics:  # the seed's own average row, a reference (what its pages show)
        tables["per_rank_file_average"] = metrics.pop("file_average_table")
    if not stages.empty:
        tables["per_stage_step"] = stages
    gpu_time = _gpu_time(run)
    if gpu_time is not None:
        tables["gpu_time"] = gpu_time
        metrics["gpu_time_definition"] = ("whole trace, exact times, reportgen's kernel classes; *_hta columns "
                                          "reproduce HTA 0.5 (whole-µs rounding, work of the last ProfilerStep "
                                          "dropped, HTA's own kernel classes: only NCCL kernels are communication)")
    per_rank_out["pure_comm_ratio"] = facts.guard_ratio(per_rank_out["pure_comm_ratio"],
                                                        "pure communication share", run)
    data = {"pipeline": bool(run.stage_map) and (run.parallel.get("stages") or 1) > 1,
            "most_receive": most_receive_stage(per_rank)}
    a = Analysis(metrics=metrics, tables=tables, data=data)
    a.findings = _findings(metrics, {**data, "framework": run.framework}, per_rank_out)
    return a


def _gpu_time(run: Run) -> pd.DataFrame | None:
    """Per-rank GPU temporal breakdown and comm/comp overlap (HTA's formulas; reportgen/intervals.py): our
    columns with our conventions and kernel classes, the ``*_hta`` ones exactly as HTA 0.5 prints them."""
    from ..intervals import gpu_time_by_rank, hta_profiler_steps

    gpu = run.table("gpu_ops")
    if gpu is None:
        return None
    events = run.table("hta_events")
    drop_last = events is not None and hta_profiler_steps(events.loc[events["role"] == "mark", "name"]) >= 2
    rows = []
    for rank, ours, hta in gpu_time_by_rank(gpu, events, drop_last):
        row = {"rank": int(rank), **ours}
        row.update({f"{k.removesuffix('_ratio')}_hta_ratio": v for k, v in hta.items() if k.endswith("_ratio")})
        rows.append(row)
    out = pd.DataFrame(rows)
    for col in [c for c in out.columns if c.endswith("_ratio")]:  # a share outside 0..1 is a data problem
        out[col] = facts.guard_ratio(out[col], f"GPU time {col}", run)
    return out


# --------------------------------------------------------------------------- present


def present(a: Analysis) -> View:
    m = a.metrics
    per_rank, rows = a.tables["per_rank"], a.tables["per_rank_step"]
    device = m["breakdown"] == "device"
    if device:
        phases = [(k, L.label(k)) for k in ("computing_ms", "comm_not_overlapped_ms", "free_ms")]
    elif a.data["pipeline"]:
        phases = [("computation_incl_free_ms", L.COMPUTATION_INCL_FREE), ("receive_only_ms", "Pure receive"),
                  ("comm_not_overlapped_exclude_receive_ms", "Pure collective communication")]
    else:
        phases = [("computation_incl_free_ms", L.COMPUTATION_INCL_FREE),
                  ("comm_not_overlapped_ms", "Pure communication")]
    steps = sorted(rows["step"].unique().tolist())
    warm = set(m.get("warmup_steps") or [])
    avg_label = "Average (steps in scope)" if warm and m["steps"] < len(steps) else "Average (mean of steps)"
    stage_values = sorted(int(s) for s in per_rank["stage"].dropna().unique())
    controls = [Control("step", "Step", [("avg", avg_label)] + [(str(s), facts.step_label(s, warm))
                                                         for s in steps], "avg")]
    if stage_values:
        controls.append(Control("stage_sel", "Stage", [("all", "All stages")] +
                                [(str(s), f"Stage {s}") for s in stage_values], "all"))
    labels = {**{k: L.label(k) for k in ("computing_ms", "comm_busy_ms", "comm_not_overlapped_ms", "overlapped_ms",
                                          "free_ms", "preparing_ms", "computation_incl_free_ms", "step_interval_ms",
                                          "step_ms")},
              "stage_ms": "Stage", "bubble_ms": "Bubble (profiler)",
              "receive_only_ms": "Pure receive", "comm_not_overlapped_exclude_receive_ms": "Comm. not overlapped excl. receive",
              "receive_incl_batch_ms": "Receive incl. batchSendRecv (ours)", "stage_incl_batch_ms": "Stage (ours)",
              "comm_not_overlapped_exclude_receive_incl_batch_ms": "Comm. not overlapped excl. receive (ours)"}
    # column groups (a band over the header): the pipeline's receive / bubble columns, which its findings cite,
    # come right after rank and stage when the run is a pipeline
    pipe_keys = ["bubble_ms", "receive_only_ms", "receive_incl_batch_ms", "stage_ms", "stage_incl_batch_ms",
                 "comm_not_overlapped_exclude_receive_ms", "comm_not_overlapped_exclude_receive_incl_batch_ms"]
    total_keys = ["step_interval_ms", "step_ms"]
    if not a.data["pipeline"]:  # one stage: the receives are p2p traffic (e.g. a tensor-parallel ring), no bubble
        labels.update(NO_PIPELINE_LABELS)
    groups = {k: "Pipeline: receive and bubble" if a.data["pipeline"] else "Point-to-point receive"
              for k in pipe_keys}
    groups.update({k: "Step" for k in total_keys})
    order = [k for k in labels if k not in pipe_keys + total_keys]
    order = (pipe_keys + order if stage_values else order + pipe_keys) + total_keys
    present_cols = [c for c in order if c in per_rank.columns and per_rank[c].notna().any()]
    heat_cols = [c for c in heat_metrics(per_rank) if c in rows and rows[c].notna().any()]
    controls.append(Control("overlap_metric", "Heatmap shows", [(c, labels[c]) for c in heat_cols],
                            "comm_not_overlapped_ms"))
    findings = a.findings
    by = "step_ms" if "step_ms" in per_rank and per_rank["step_ms"].notna().any() else "comm_not_overlapped_ms"
    by_values = per_rank.set_index("rank")[by]
    named = vl.named_ranks(a)
    shown = th.ranks_shown(by_values, named)
    if shown is None:
        figures = [_bars(per_rank, rows, phases, bool(stage_values))]
    else:  # many ranks: the bars draw the extremes, the median and the findings' ranks; a histogram every rank
        figures = [_bars(per_rank[per_rank["rank"].isin(shown)], rows[rows["rank"].isin(shown)], phases,
                         bool(stage_values)),
                   vl.rank_distribution("overlap-distribution", by_values, shown,
                                        "Step time" if by == "step_ms" else "Communication not overlapped",
                                        avg_label.lower())]
    figures.append(_heat(rows, heat_cols, labels, keep=named))
    per_rank_title = f"Per rank ({avg_label.lower()})"
    cols = [Column("rank", "Rank", "rank"), Column("stage", "Stage", "int")] + \
        [Column(c, labels[c], "ms", group=groups.get(c, "Step breakdown")) for c in present_cols] + \
        [Column("pure_comm_ratio", "Pure comm share", "ratio", group="Step")]
    tables = [Table.from_frame("overlap-per-rank", per_rank_title, per_rank, cols),
              Table.from_frame("overlap-per-rank-step", "Per rank and step", rows,
                               cols[:2] + [Column("step", "Step", "int")] + cols[2:-1])]
    if "per_stage_step" in a.tables:
        st = a.tables["per_stage_step"]
        # a cell lists its ranks as ranges ('0-255', fmt.rank_ranges), as every table of the page does: 256 ids in
        # one cell made a 2,037 px row (the metrics JSON keeps msprof-analyze's list)
        st = st.assign(ranks=st["ranks"].map(lambda t: fmt.rank_ranges(int(x) for x in str(t).split(",")
                                                                         if x.strip().lstrip("-").isdigit())))
        tables.append(Table.from_frame(
            "overlap-per-stage", "Per stage and step (maximum over the stage's ranks)", st,
            [Column("stage", "Stage", "int"), Column("ranks", "Ranks", "text"), Column("step", "Step", "int")] +
            [c for c in cols[2:-1] if c.key in st.columns],
            caption="As msprof-analyze's stage rows: each value is the largest among the stage's ranks."))
    if "gpu_time" in a.tables:
        gt = a.tables["gpu_time"]
        tables.append(Table.from_frame(
            "overlap-gpu-time", "GPU time over the whole trace (HTA's temporal breakdown and overlap)", gt,
            [Column("rank", "Rank", "rank"), Column("kernel_span_ms", "GPU span", "ms"),
             Column("idle_ratio", "Idle", "ratio"), Column("compute_ratio", "Compute", "ratio"),
             Column("non_compute_ratio", "Non-compute", "ratio"),
             Column("comm_comp_overlap_ratio", "Comm overlapped by compute", "ratio"),
             Column("idle_hta_ratio", "Idle (HTA conventions)", "ratio"),
             Column("comm_comp_overlap_hta_ratio", "Overlap (HTA conventions)", "ratio")],
            caption="Ours: float µs over the whole trace. HTA 0.5 rounds every kernel to whole µs and drops the work "
                    "of the last ProfilerStep; its numbers are shown beside ours so neither is hidden."))
    notes = []
    if "receive_incl_batch_ms" in per_rank and "bubble_ms" in per_rank and per_rank["bubble_ms"].notna().any():
        notes.append("Bubble is the step breakdown's own column: it counts only plain receive operations, so a "
                     "pipeline built on batched send/receive (batch_isend_irecv: HCCL batchSendRecv, NCCL SendRecv) "
                     "shows Bubble 0. The columns marked (ours) count batched send/receive as receive time too; both "
                     "are shown.")
    if "comm_busy_ms" in present_cols:
        notes.append("Communication busy (union) = the time at least one communication operation ran on the rank; "
                     "the communication section's op time (sum) adds up overlapping operations and can exceed it.")
    if not device:
        notes.append("This data's computation time is step time minus pure communication, so it includes idle time.")
    ref = m.get("file_average_rates")
    if ref:
        notes.append("The profiler's own tools compute these rates from the file's average row (which may leave "
                     f"the first step out): communication share {fmt.percent(ref['comm_share_ratio'])} there. Ours "
                     "average the steps in scope, like every other section.")
    if m.get("steps_left_out"):
        notes.append(f"Steps {', '.join(map(str, m['steps_left_out']))} of this data have no step time in the run's "
                     f"step data: left out so that every section covers the same steps.")
    if shown is not None:  # many ranks: the bars draw the extremes, the median and the findings' ranks
        notes.append(vl.rank_cut_note(shown, len(per_rank), "step time" if by == "step_ms" else "exposed "
                                      "communication", per_rank_title))
    within = ", ".join(f"stage {w['stage']} {fmt.percent(w['within_stage_share_ratio'])}" for w in m["within_stage"])
    summary = (f"Pure (exposed) communication is {fmt.percent(m['comm_share_ratio'])} of computation + pure "
               f"communication over all ranks" +
               (f"; {'receive between stages' if a.data['pipeline'] else 'p2p receive (no pipeline stages)'} "
                f"{fmt.percent(m['between_stage_share_ratio'])}"
                if m.get("between_stage_share_ratio")
                is not None and not math.isnan(m["between_stage_share_ratio"]) else "") +
               (f"; within stages: {within}" if within else "") + ".")
    return View(summary=summary, figures=figures, tables=tables, controls=controls, notes=notes,
                ranks_drawn=list(shown or []))


#: column labels on a run without pipeline stages (issue 27 #28): the profiler's Bubble / Stage columns and the
#: receive time there are point-to-point traffic (a tensor-parallel ring, a send/recv exchange), not a bubble
NO_PIPELINE_LABELS = {"bubble_ms": "P2P receive (profiler's Bubble)", "receive_only_ms": "Pure p2p receive",
                      "receive_incl_batch_ms": "P2P receive incl. batchSendRecv (ours)",
                      "stage_ms": "Step excl. receive (profiler's Stage)",
                      "stage_incl_batch_ms": "Step excl. receive (ours)"}


def _findings(m: dict, data: dict, per_rank: pd.DataFrame) -> list[Finding]:
    out = []
    t = th.COMM_SHARE
    recv, coll = _receive_cols(per_rank)  # what the heatmap shows for the bubble and for collectives in a stage
    share = m.get("comm_share_ratio")
    if share is not None and not math.isnan(share) and share > t and not data["pipeline"]:
        out.append(Finding(
            "comm_share", th.severity(share - t), ID,
            f"Pure (not overlapped) communication takes {fmt.percent(share)} of the step over all ranks, above the "
            f"{fmt.percent(t)} guideline.",
            evidence={"metric": "comm_share_ratio", "value": share, "reference": t},
            suggestion="Overlap gradient communication with backward computation (bucket / fusion sizes: "
                       + L.FUSION_OPTION.get(data.get("framework") or "", L.FUSION_OPTION[""])
                       + "), or reduce the data-parallel traffic.",
            view=EvidenceView("overlap-heatmap", {"overlap_metric": "comm_not_overlapped_ms"})))
    between = m.get("between_stage_share_ratio")
    if data["pipeline"] and between is not None and not math.isnan(between) and between > t:
        most = data.get("most_receive") or {}
        where = (f" Stage {most['stage']} waits most: {fmt.percent(most['share'])} of its time in receives."
                 if most else "")
        out.append(Finding(
            "pipeline_between_stage", th.severity(between - t), ID,
            f"Receive time between pipeline stages is {fmt.percent(between)} of the step over all ranks, above "
            f"the {fmt.percent(t)} guideline: the pipeline bubble is large.{where}",
            ranks=most.get("ranks", []),
            evidence={"metric": "between_stage_share_ratio", "value": between, "reference": t,
                      "stage": most.get("stage")},
            suggestion="Balance the layers between stages and raise the number of micro-batches.",
            view=EvidenceView("overlap-heatmap", {"overlap_metric": recv, **_stage_signal(most.get("stage"))})))
    if data["pipeline"]:
        worst = max(m["within_stage"], key=lambda w: w["within_stage_share_ratio"], default=None)
        if worst and worst["within_stage_share_ratio"] > t:
            v = worst["within_stage_share_ratio"]
            out.append(Finding(
                "pipeline_within_stage", th.severity(v - t), ID,
                f"Pure collective communication inside stage {worst['stage']} is {fmt.percent(v)} of its time, above "
                f"the {fmt.percent(t)} guideline.",
                ranks=worst["ranks"], evidence={"metric": "within_stage_share_ratio", "value": v, "reference": t,
                                                "stage": worst["stage"]},
                suggestion="Revisit the operator sharding inside the stage (model-parallel splits that need large "
                           "collectives) or overlap them with computation.",
                view=EvidenceView("overlap-heatmap", {"overlap_metric": coll, **_stage_signal(worst["stage"])})))
    return out


def _stage_signal(stage) -> dict:
    """The stage control's value for a finding about one stage (the bars then show that stage)."""
    return {} if stage is None or (isinstance(stage, float) and math.isnan(stage)) else {"stage_sel": str(int(stage))}


def _bars(per_rank: pd.DataFrame, rows: pd.DataFrame, phases: list, staged: bool) -> Figure:
    keys = [k for k, _ in phases]
    avg = per_rank.assign(step_key="avg")
    per = rows.assign(step_key=rows["step"].astype(str))
    cols = ["rank", "stage", "step_key", "step_ms"] + keys
    wide = pd.concat([avg[cols], per[cols]], ignore_index=True)
    wide["stage_key"] = wide["stage"].map(lambda s: "" if pd.isna(s) else str(int(s)))
    long = pd.concat([wide.assign(ms=wide[k], phase=label, order=i) for i, (k, label) in enumerate(phases)],
                     ignore_index=True).drop(columns=keys + ["stage"])
    unit, factor = fmt.unit_for("ms", wide["step_ms"])
    params = [vl.param(name="step", value="avg")]
    base = vl.Chart(long).transform_filter("datum.step_key == step")
    if staged:
        params.append(vl.param(name="stage_sel", value="all"))
        base = base.transform_filter("stage_sel == 'all' || datum.stage_key == stage_sel")
    chart = stacked_parts(base, palette.column_parts(phases),
                          vl.X("rank:O", title="Rank", axis=vl.Axis(labelAngle=0)), unit, factor,
                          [vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("stage_key:N", title="Stage")],
                          height=260).add_params(*params)
    return Figure("overlap-bars", "Where each rank's step goes: computation vs exposed communication", to_spec(chart),
                  caption="Stacked per rank for the selected step (or the average) and stage.",
                  alt="Stacked bars of computation and exposed communication per rank")


def heat_metrics(per_rank: pd.DataFrame) -> list[str]:
    """The columns the heatmap can show (control ``overlap_metric``): exposed communication first (the default),
    then the receive and collective-only parts of it, computation and free time, where the source has them."""
    recv, coll = _receive_cols(per_rank)
    return [c for c in ("comm_not_overlapped_ms", recv, coll, "computing_ms", "computation_incl_free_ms", "free_ms")
            if c in per_rank]


def _heat(rows: pd.DataFrame, cols: list[str], labels: dict[str, str], keep=()) -> Figure:
    keep_cols = cols + (["step_ms"] if "step_ms" in rows and "step_ms" not in cols else [])
    df = rows[["rank", "step"] + keep_cols].assign(warmup=rows["warmup"] if "warmup" in rows else False)
    title = "Rank"
    df, per_bin = vl.bin_ranks(df, keep_cols, keep=keep)
    if per_bin > 1:
        title = f"Rank (groups of up to {per_bin}, max shown; named ranks alone)"
    caption = ("Communication not overlapped by computation by default; 'Heatmap shows' picks its receive and "
               "collective parts, computation or free time." + MEDIAN_CAPTION)
    if df["warmup"].any() and not df["warmup"].all():
        caption += WARMUP_CAPTION
    chart = median_heatmap(df, {c: labels[c] for c in cols}, param="overlap_metric", y_title=title,
                           reference="step_ms" if "step_ms" in df else None, legend_title="Time")
    return Figure("overlap-heatmap", "Rank × step heatmap: exposed communication and its parts", to_spec(chart),
                  caption=caption,
                  alt="Heatmap of exposed communication per rank and step")
