"""Trajectory: step interval, forward+backward and tail per rank and step.

Definitions (MindSpore step trace, ``step_trace_parser.py``; MindInsight 2.3.1 cluster
step-trace page, ../shared/research/mindinsight-cluster-profiling.md §2.1, §3.1):

* step interval = forward start - step start: the device waits for data;
* forward+backward = backward end - forward start;
* tail = step end - backward end: gradient aggregation (AllReduce) and parameter update;
* step time = step end - previous step end (= the three above).

Averages: when every rank's file ships its own average row (MindInsight's ``-`` row) we use
it, as MindInsight does, and say so; on real data it differs from the mean of the shipped
step rows (the rows were trimmed after the average was written). Otherwise the average is
the mean over steps.
"""

from __future__ import annotations

import math

import altair as alt
import pandas as pd

from .. import thresholds as th
from ..charts import to_spec
from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, Column, Control, Figure, Finding, Table, View

ID = "trajectory"
TITLE = "Step trajectory"

PHASES = [
    ("step_interval_ms", "Step interval (data wait)"),
    ("fp_bp_ms", "Forward + backward"),
    ("tail_ms", "Tail (gradient sync + update)"),
]
METRICS = ["step_ms", "step_interval_ms", "fp_bp_ms", "tail_ms"]
METRIC_LABELS = {"step_ms": "Step time", **dict(PHASES)}

#: Budget for rows embedded in one chart (see ../shared/research/offline-html-report.md §2.2).
MAX_CHART_ROWS = 20_000


def analyze(run: Run, options=None) -> Analysis:
    st = run.table("step_trace")
    if st is None:
        raise Unavailable(
            "No step trace in this run. MindSpore Insight writes step_trace_raw_<rank>_detail_time.csv "
            "when profiling is on with the step trace (training trace) enabled; Ascend output has "
            "step_trace_time.csv; PyTorch traces need ProfilerStep#N markers (torch.profiler with schedule + step())."
        )
    info = run.ranks_table()[["rank", "host", "stage"]]
    per_rank_step = st[["rank", "step"] + METRICS].copy()

    computed = per_rank_step.groupby("rank", as_index=False)[METRICS].mean()
    file_avg = run.table("step_trace_avg")
    ranks = sorted(per_rank_step["rank"].unique())
    if file_avg is not None and set(ranks) <= set(file_avg["rank"]):
        per_rank = file_avg[file_avg["rank"].isin(ranks)][["rank"] + METRICS].reset_index(drop=True)
        average_source = "file"
    else:
        per_rank = computed
        average_source = "computed"
    both = per_rank.merge(computed, on="rank", suffixes=("", "_mean"))
    with_steps = both["step_ms_mean"] > 0
    avg_diff = float(((both["step_ms"] - both["step_ms_mean"]).abs() / both["step_ms_mean"])[with_steps].max()) \
        if with_steps.any() else 0.0

    per_rank = per_rank.merge(info, on="rank", how="left")
    per_rank_step = per_rank_step.merge(info, on="rank", how="left")

    mean_interval = float(per_rank["step_interval_ms"].mean())
    per_rank["step_interval_vs_mean_ratio"] = (
        per_rank["step_interval_ms"] / mean_interval - 1 if mean_interval > 0 else 0.0)
    step_median = float(per_rank["step_ms"].median())

    metrics = {
        "average_source": average_source,
        "ranks": len(ranks),
        "steps": int(per_rank_step["step"].nunique()),
        "step_ms_mean": float(per_rank["step_ms"].mean()),
        "step_ms_median": step_median,
        "step_ms_min": float(per_rank["step_ms"].min()),
        "step_ms_max": float(per_rank["step_ms"].max()),
        "step_ms_spread_ratio": float((per_rank["step_ms"].max() - per_rank["step_ms"].min()) / step_median)
        if step_median > 0 else 0.0,
        "step_interval_ms_mean": mean_interval,
        "fp_bp_ms_mean": float(per_rank["fp_bp_ms"].mean()),
        "tail_ms_mean": float(per_rank["tail_ms"].mean()),
        "slowest_rank": int(per_rank.loc[per_rank["step_ms"].idxmax(), "rank"]),
        "file_average_vs_step_mean_max_diff_ratio": avg_diff,
        "thresholds": {k: v for k, v in th.as_dict().items()
                       if k.startswith(("step_interval", "fp_bp", "severity"))},
    }
    ranks_without = sorted(set(run.ranks) - set(ranks))
    if ranks_without:
        metrics["ranks_without_step_trace"] = ranks_without

    data = {
        "slow_hosts": _slow_hosts(per_rank, mean_interval),
        "step_ops": _op_summary(run.table("step_ops")),
        "step_median": step_median,
    }
    covered = {r for h in data["slow_hosts"] for r in h["ranks"]}
    data["slow_ranks"] = _slow_step_interval(per_rank, mean_interval, covered)
    data["slow_fp_bp"] = _slow_fp_bp(per_rank)

    tables = {
        "per_rank_step": per_rank_step[["rank", "step"] + METRICS + ["host", "stage"]],
        "per_rank": per_rank[["rank"] + METRICS + ["step_interval_vs_mean_ratio", "host", "stage"]],
    }
    return Analysis(metrics=metrics, tables=tables, data=data)


def _slow_hosts(per_rank: pd.DataFrame, mean_interval: float) -> list[dict]:
    """Hosts whose ranks' mean step interval exceeds the mean of all ranks by the seed threshold."""
    known = per_rank.dropna(subset=["host"])
    if mean_interval <= 0 or known["host"].nunique() < 2:
        return []
    out = []
    for host, grp in known.groupby("host", sort=True):
        value = float(grp["step_interval_ms"].mean())
        if value > (1 + th.STEP_INTERVAL_ABOVE_MEAN) * mean_interval and len(grp) > 1 \
                and (grp["step_interval_ms"] > (1 + th.STEP_INTERVAL_ABOVE_MEAN) * mean_interval).all():
            out.append({"host": host, "ranks": sorted(int(r) for r in grp["rank"]), "value": value,
                        "reference": mean_interval, "step_ms": float(grp["step_ms"].mean())})
    return out


def _slow_step_interval(per_rank: pd.DataFrame, mean_interval: float, covered: set[int]) -> list[dict]:
    """Seed rule ``step_interval``: s_r / mean(s) - 1 > 0.2 (MindInsight reports the worst rank only)."""
    if mean_interval <= 0:
        return []
    limit = (1 + th.STEP_INTERVAL_ABOVE_MEAN) * mean_interval
    slow = per_rank[(per_rank["step_interval_ms"] > limit) & ~per_rank["rank"].isin(covered)]
    slow = slow.sort_values("step_interval_ms", ascending=False)
    return [{"rank": int(r.rank), "value": float(r.step_interval_ms), "reference": mean_interval,
             "percent": float((r.step_interval_ms / mean_interval - 1) * 100), "step_ms": float(r.step_ms),
             "host": r.host if isinstance(r.host, str) else None} for r in slow.itertuples()]


def _slow_fp_bp(per_rank: pd.DataFrame) -> list[dict]:
    """Forward+backward outliers: above the median of the other ranks of the same stage by the threshold.

    Stages legitimately differ in pipeline parallel, so ranks are only compared with their
    stage peers; a leave-one-out median keeps one slow rank from raising its own reference.
    """
    out = []
    groups = per_rank.groupby(per_rank["stage"].fillna(0)) if per_rank["stage"].notna().any() else [(0, per_rank)]
    for _stage, grp in groups:
        if len(grp) < 2:
            continue
        values = grp.set_index("rank")["fp_bp_ms"]
        for rank, value in values.items():
            ref = float(values.drop(rank).median())
            if ref > 0 and value > (1 + th.FP_BP_ABOVE_STAGE_PEERS) * ref:
                row = grp[grp["rank"] == rank].iloc[0]
                out.append({"rank": int(rank), "value": float(value), "reference": ref,
                            "percent": float((value / ref - 1) * 100), "step_ms": float(row["step_ms"]),
                            "stage": None if pd.isna(row["stage"]) else int(row["stage"])})
    return sorted(out, key=lambda d: -d["percent"])


def _op_summary(ops: pd.DataFrame | None) -> pd.DataFrame | None:
    """Communication operators on the step timeline: mean duration per rank, then across ranks."""
    if ops is None:
        return None
    per_rank = ops.groupby(["op", "rank"], as_index=False)["dur_ms"].mean()
    g = per_rank.groupby("op")
    out = pd.DataFrame({
        "ranks": g["rank"].nunique(),
        "mean_ms": g["dur_ms"].mean(),
        "max_ms": g["dur_ms"].max(),
        "max_rank": per_rank.loc[g["dur_ms"].idxmax(), ["op", "rank"]].set_index("op")["rank"],
    }).reset_index()
    out["max_vs_mean_ratio"] = out["max_ms"] / out["mean_ms"] - 1
    return out.sort_values("max_ms", ascending=False).reset_index(drop=True)


# --------------------------------------------------------------------------- present


def present(a: Analysis) -> View:
    m, d = a.metrics, a.data
    per_rank = a.tables["per_rank"]
    per_rank_step = a.tables["per_rank_step"]
    steps = sorted(per_rank_step["step"].unique().tolist())
    n_ranks = len(per_rank)

    # step choices: the average plus as many steps as the chart budget allows (evenly spaced)
    max_steps = max(1, MAX_CHART_ROWS // max(1, n_ranks * len(PHASES)) - 1)
    shown_steps = steps if len(steps) <= max_steps else \
        [steps[round(i * (len(steps) - 1) / (max_steps - 1))] for i in range(max_steps)] if max_steps > 1 else [steps[0]]
    shown_steps = sorted(set(shown_steps))
    avg_label = "Average (file '-' row)" if m["average_source"] == "file" else "Average (mean of steps)"
    controls = [
        Control("step", "Step", [("avg", avg_label)] + [(str(s), f"Step {s}") for s in shown_steps], "avg"),
        Control("sort_by", "Sort ranks by", [("rank", "Rank id")] + [(k, METRIC_LABELS[k]) for k in METRICS], "rank"),
        Control("heat_metric", "Heatmap shows", [(k, METRIC_LABELS[k]) for k in METRICS], "step_ms"),
    ]
    notes = []
    if len(shown_steps) < len(steps):
        notes.append(f"The step selector offers {len(shown_steps)} of {len(steps)} steps (evenly spaced) to keep the "
                     f"file small; every step is in the per-rank-step table and its CSV.")
    if m["average_source"] == "file" and m["file_average_vs_step_mean_max_diff_ratio"] < 5e-4:
        notes.append("Averages are the profiler's own average rows ('-'); here they equal the mean of the step rows.")
    elif m["average_source"] == "file":
        notes.append(
            "Averages are the profiler's own average rows ('-'), as MindInsight shows them. They differ from the "
            f"mean of the step rows in this data by up to {m['file_average_vs_step_mean_max_diff_ratio'] * 100:.2f}% "
            "(step time), because the profiler averaged over steps that were not all kept.")
    if m.get("ranks_without_step_trace"):
        notes.append("Ranks without a step trace: " + ", ".join(map(str, m["ranks_without_step_trace"])))

    figures = [_bars(per_rank, per_rank_step, shown_steps), _heatmap(per_rank_step)]
    findings = _findings(m, d)

    cols = [Column("rank", "Rank", "rank"), Column("host", "Host", "text"), Column("stage", "Stage", "int"),
            Column("step_ms", "Step (ms)", "ms"), Column("step_interval_ms", "Step interval (ms)", "ms"),
            Column("fp_bp_ms", "Forward+backward (ms)", "ms"), Column("tail_ms", "Tail (ms)", "ms")]
    tables = [
        Table.from_frame("trajectory-per-rank", "Per rank (" + avg_label.lower() + ")", per_rank,
                         cols + [Column("step_interval_vs_mean_ratio", "Interval vs mean", "ratio")]),
        Table.from_frame("trajectory-per-rank-step", "Per rank and step", per_rank_step,
                         cols[:3] + [Column("step", "Step", "int")] + cols[3:]),
    ]
    ops = d.get("step_ops")
    if ops is not None and not ops.empty:
        tables.append(Table.from_frame(
            "trajectory-step-ops", "Communication operators on the step timeline (mean over steps)", ops,
            [Column("op", "Operator", "text"), Column("ranks", "Ranks", "int"), Column("mean_ms", "Mean (ms)", "ms"),
             Column("max_ms", "Max (ms)", "ms"), Column("max_rank", "Rank of max", "rank"),
             Column("max_vs_mean_ratio", "Max vs mean", "ratio")],
            caption="From the operator columns of the step trace; the slowest first.", max_html_rows=50))

    summary = (f"{m['ranks']} ranks, {m['steps']} steps. Median step time {m['step_ms_median']:.4f} ms "
               f"(spread {m['step_ms_spread_ratio'] * 100:.2f}% of the median); mean step interval "
               f"{m['step_interval_ms_mean']:.4f} ms, forward+backward {m['fp_bp_ms_mean']:.4f} ms, "
               f"tail {m['tail_ms_mean']:.4f} ms.")
    return View(summary=summary, figures=figures, tables=tables, findings=findings, controls=controls, notes=notes)


def _findings(m: dict, d: dict) -> list[Finding]:
    out = []
    step = d["step_median"] or 1.0
    pct = int(th.STEP_INTERVAL_ABOVE_MEAN * 100)
    for h in d["slow_hosts"]:
        share = (h["value"] - h["reference"]) / step
        out.append(Finding(
            "slow_host", th.severity(share), ID,
            f"Host {h['host']}: its {len(h['ranks'])} ranks wait {h['value']:.4f} ms per step for data on average, "
            f"{(h['value'] / h['reference'] - 1) * 100:.2f}% above the mean of all ranks ({h['reference']:.4f} ms).",
            ranks=h["ranks"],
            evidence={"metric": "step_interval_ms", "value": h["value"], "reference": h["reference"], "host": h["host"],
                      "share_of_step_ratio": share},
            suggestion="Check the data pipeline on this host: CPU load, disk or network storage, dataset workers.",
            figure="trajectory-bars"))
    slow = d["slow_ranks"]
    if slow:
        w = slow[0]
        share = (w["value"] - w["reference"]) / step
        others = [s["rank"] for s in slow[1:]]
        extra = f" Also above {pct}%: rank{'s' if len(others) > 1 else ''} {', '.join(map(str, others[:20]))}" \
                f"{' …' if len(others) > 20 else ''}." if others else ""
        out.append(Finding(
            "slow_step_interval", th.severity(share), ID,
            f"Step interval of rank {w['rank']} is {w['value']:.4f} ms, {w['percent']:.2f}% above the mean of ranks "
            f"({w['reference']:.4f} ms): it waits longer for input data.{extra}",
            ranks=[s["rank"] for s in slow],
            evidence={"metric": "step_interval_ms", "value": w["value"], "reference": w["reference"],
                      "share_of_step_ratio": share},
            suggestion="Raise dataset parallelism or prefetch on that rank's host; check its data loading path.",
            figure="trajectory-bars"))
    slow = d["slow_fp_bp"]
    if slow:
        w = slow[0]
        share = (w["value"] - w["reference"]) / step
        others = [s["rank"] for s in slow[1:]]
        stage = f" of stage {w['stage']}" if w.get("stage") else ""
        extra = f" Also slow: rank{'s' if len(others) > 1 else ''} {', '.join(map(str, others[:20]))}." if others else ""
        out.append(Finding(
            "slow_device_compute", th.severity(share), ID,
            f"Forward+backward of rank {w['rank']} takes {w['value']:.4f} ms, {w['percent']:.2f}% above the median "
            f"of the other ranks{stage} ({w['reference']:.4f} ms).{extra}",
            ranks=[s["rank"] for s in slow],
            evidence={"metric": "fp_bp_ms", "value": w["value"], "reference": w["reference"],
                      "share_of_step_ratio": share},
            suggestion="Look at this device's operators (frequency throttling, a slower card, uneven shapes).",
            figure="trajectory-heatmap"))
    return out


def _chart_rows(per_rank: pd.DataFrame, per_rank_step: pd.DataFrame, shown_steps: list) -> pd.DataFrame:
    avg = per_rank.assign(step_key="avg")
    per = per_rank_step[per_rank_step["step"].isin(shown_steps)].assign(step_key=lambda x: x["step"].astype(str))
    cols = ["rank", "host", "stage", "step_key"] + METRICS
    wide = pd.concat([avg[cols], per[cols]], ignore_index=True)
    wide["host"] = wide["host"].fillna("")
    parts = []
    for order, (key, label) in enumerate(PHASES):  # long format: one row per rank, step and phase
        parts.append(wide.assign(ms=wide[key], phase=label, order=order))
    return pd.concat(parts, ignore_index=True)


def _bars(per_rank: pd.DataFrame, per_rank_step: pd.DataFrame, shown_steps: list) -> Figure:
    rows = _chart_rows(per_rank, per_rank_step, shown_steps)
    n = max(1, len(per_rank))
    step_param = alt.param(name="step", value="avg")
    sort_param = alt.param(name="sort_by", value="rank")
    chart = (
        alt.Chart(rows)
        .transform_filter("datum.step_key == step")
        .transform_calculate(sort_value="sort_by == 'rank' ? -datum.rank : datum[sort_by]")
        .mark_bar()
        .encode(
            x=alt.X("rank:O", title="Rank",
                    sort=alt.EncodingSortField(field="sort_value", op="max", order="descending"),
                    axis=alt.Axis(labelOverlap=True)),
            y=alt.Y("ms:Q", title="Time (ms)", stack="zero"),
            color=alt.Color("phase:N", title=None, sort=[label for _, label in PHASES],
                            legend=alt.Legend(orient="top")),
            order=alt.Order("order:Q"),
            tooltip=[alt.Tooltip("rank:O", title="Rank"), alt.Tooltip("host:N", title="Host"),
                     alt.Tooltip("stage:O", title="Stage"), alt.Tooltip("phase:N", title="Phase"),
                     alt.Tooltip("ms:Q", title="ms", format=".4f"),
                     alt.Tooltip("step_ms:Q", title="Step (ms)", format=".4f")],
        )
        .add_params(step_param, sort_param)
        .properties(width={"step": max(2, min(28, 900 // n))}, height=280)
    )
    return Figure("trajectory-bars", "Step time per rank: interval, forward+backward, tail", to_spec(chart),
                  caption="Stacked per rank for the selected step (or the average). Sort with the control above.",
                  alt="Stacked bar chart of step interval, forward+backward and tail time for each rank")


def _heatmap(per_rank_step: pd.DataFrame) -> Figure:
    df = per_rank_step[["rank", "step", "host"] + METRICS].copy()
    df["host"] = df["host"].fillna("")
    ranks = sorted(df["rank"].unique())
    steps = df["step"].nunique()
    caption = "Each cell is one rank in one step; colour = the chosen time. Darker is slower."
    y_field, y_title = "rank", "Rank"
    if len(ranks) * steps > MAX_CHART_ROWS:
        per_bin = math.ceil(len(ranks) * steps / MAX_CHART_ROWS)
        df["rank_bin"] = (df["rank"] // per_bin) * per_bin
        df = df.groupby(["rank_bin", "step"], as_index=False)[METRICS].max()
        df["rank"] = df["rank_bin"]
        df["host"] = ""
        y_title = f"Rank (groups of {per_bin}, max shown)"
        caption += f" Ranks are grouped by {per_bin} to keep the file small; each cell shows the group's maximum."
    metric_param = alt.param(name="heat_metric", value="step_ms")
    chart = (
        alt.Chart(df)
        .transform_calculate(value="datum[heat_metric]")
        .mark_rect()
        .encode(
            x=alt.X("step:O", title="Step"),
            y=alt.Y(f"{y_field}:O", title=y_title, axis=alt.Axis(labelOverlap=True)),
            color=alt.Color("value:Q", title="ms", scale=alt.Scale(scheme="orangered")),
            tooltip=[alt.Tooltip("rank:O", title="Rank"), alt.Tooltip("step:O", title="Step"),
                     alt.Tooltip("host:N", title="Host"), alt.Tooltip("value:Q", title="ms", format=".4f")]
            + [alt.Tooltip(f"{k}:Q", title=METRIC_LABELS[k], format=".4f") for k in METRICS],
        )
        .add_params(metric_param)
        .properties(width={"step": max(4, min(40, 800 // max(1, steps)))},
                    height={"step": max(2, min(16, 600 // max(1, len(ranks))))})
    )
    return Figure("trajectory-heatmap", "Rank × step heatmap", to_spec(chart), caption=caption,
                  alt="Heatmap of time per rank and step")

