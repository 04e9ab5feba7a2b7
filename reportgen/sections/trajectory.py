"""Trajectory: where each rank's step time goes, per rank and step.

The seed's step trace, step_trace_raw_<rank>_detail_time.csv (``step_trace_parser.py``; the seed's cluster
step-trace page, research notes on the seed's cluster pages §2.1, §3.1):

* step interval = forward start - step start: the device waits for data;
* forward+backward = backward end - forward start;
* tail = step end - backward end: gradient aggregation (AllReduce) and parameter update;
* step time = step end - previous step end (= the three above).

The NPU profiler's ``step_trace_time.csv`` (PyTorch or graph-mode framework 2.x; research notes on
msprof-analyze §2.1): step time = Computing + Communication(Not
Overlapped) + Free (the device end-to-end time); Preparing (step start to the first device op) plays
the part of the step interval.

Averages: when every rank's file ships its own average row (the seed's ``-`` row) we use
it, as the seed does, and say so; on real data it differs from the mean of the shipped
step rows (the rows were trimmed after the average was written). Otherwise the average is
the mean over steps.
"""

from __future__ import annotations

from .. import labels as L

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .. import charts as vl
from .. import thresholds as th
from .. import fmt, palette
from ..charts import MEDIAN_CAPTION, WARMUP_CAPTION, median_heatmap, stacked_parts, to_spec
from .. import facts, focus
from ..focus import keep_sample
from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, Column, Control, EvidenceView, Figure, Finding, Table, View, count, natural_key
from . import needs_reason

ID = "trajectory"
TITLE = "Step trajectory"


@dataclass(frozen=True)
class Source:
    """How the run's step table splits a step: chosen by the columns the run HAS (never by its family)."""

    table: str
    avg_table: str | None
    phases: tuple  # ((column, label), ...) stacked in this order; they add up to step_ms
    compute: str  # the device-work metric compared with stage peers
    compute_label: str


#: step_trace with step interval / forward+backward / tail (module doc)
STEP_PHASES = Source(
    "step_trace", "step_trace_avg",
    (("step_interval_ms", L.label("step_interval_ms")), ("fp_bp_ms", "Forward + backward"),
     ("tail_ms", "Tail (gradient sync + update)")),
    "fp_bp_ms", "forward+backward")
#: step_time partitioned into computing / communication not overlapped / free (the device timeline's partition)
DEVICE_PARTS = Source(
    "step_time", None,
    tuple((k, L.label(k)) for k in ("computing_ms", "comm_not_overlapped_ms", "free_ms")),
    "computing_ms", "computing")
#: step_time with only collectives / everything else (no device timeline)
COLLECTIVE_PARTS = Source(
    "step_time", None,
    (("comm_ms", "Collectives (gloo, any thread)"), ("other_ms", "Everything else")),
    "other_ms", "non-collective")
SPLITS = (STEP_PHASES, DEVICE_PARTS, COLLECTIVE_PARTS)
#: what the section reads: a per-step table (its parts as the columns say, :data:`SPLITS`; the files that give
#: them: the family registry's provenance, in the runner's reason)
NEEDS = (("step_trace", "step_time"),)

#: the trajectory's finding about a rank that waits for input longer than the others, per input-wait measure
#: (reportgen/facts.py WAIT_MEASURES)
WAIT_FINDING = {"step interval": "slow_step_interval", "preparing time": "slow_preparing",
                "DataLoader wait": "slow_input_wait"}
WAIT_LABEL = {"step interval": "step interval", "preparing time": "preparing time (step start to first device op)",
              "DataLoader wait": "DataLoader wait (enumerate(DataLoader) __next__ per step)"}


#: Budget for rows embedded in one chart (see ../shared/research/offline-html-report.md §2.2).
MAX_CHART_ROWS = 20_000


def _source(run: Run, options=None) -> Source:
    for src in SPLITS:
        df = run.table(src.table)
        if df is not None and all(df[k].notna().any() for k, _ in src.phases if k in df.columns) \
                and all(k in df.columns for k, _ in src.phases):
            return src
    raise Unavailable("No per-step timing in this run: " + needs_reason(None, ["step_trace or step_time"], options)
                      + ".")


def metrics_of(src: Source, wait: str | None = None) -> list[str]:
    cols = ["step_ms"] + [k for k, _ in src.phases]
    return cols + ([wait] if wait and wait not in cols else [])


def labels_of(src: Source, wait: str | None = None, wait_measure: str = "") -> dict[str, str]:
    labels = {"step_ms": L.label("step_ms"), **dict(src.phases)}
    if wait and wait not in labels:
        labels[wait] = WAIT_LABEL.get(wait_measure, wait_measure).capitalize()
    return labels


def analyze(run: Run, options=None) -> Analysis:
    src = _source(run, options)
    F = facts.of(run, options)
    W = facts.input_wait(run, options)  # THE input-wait measure of the run (facts), under its name
    wait = W.column if W is not None else None
    st = run.table(src.table)
    if wait is not None:  # the measure's per rank and step values (the same numbers the data section shows)
        st = st.drop(columns=[wait], errors="ignore").merge(
            W.per_rank_step[["rank", "step", "wait_ms"]].rename(columns={"wait_ms": wait}), on=["rank", "step"],
            how="left")
    # a column the source lacks is left out
    metrics_cols = [c for c in metrics_of(src, wait) if c in st and st[c].notna().any()]
    if wait not in metrics_cols:
        wait = None
    info = run.ranks_table()[["rank", "host", "stage"]]
    # the steps listed are the run's (reportgen/facts.py); averages are over the steps in scope
    per_rank_step = F.listed(st)[["rank", "step"] + metrics_cols].copy()
    per_rank_step["warmup"] = per_rank_step["step"].isin(F.warmup_steps)
    per_rank = F.per_rank_mean(st, metrics_cols)
    ranks = sorted(per_rank["rank"].unique())
    # the profiler's own average row (the seed's '-' row): kept as a reference table, never the headline (it averages
    # steps that were not shipped, the warm-up step included)
    file_avg = run.table(src.avg_table) if src.avg_table else None
    avg_diff = math.nan
    if file_avg is not None and set(ranks) <= set(file_avg["rank"]):
        file_avg = file_avg[file_avg["rank"].isin(ranks)][["rank"] + metrics_cols].reset_index(drop=True)
        both = file_avg.merge(per_rank, on="rank", suffixes=("", "_mean"))
        with_steps = both["step_ms_mean"] > 0
        avg_diff = float(((both["step_ms"] - both["step_ms_mean"]).abs() / both["step_ms_mean"])[with_steps].max()) \
            if with_steps.any() else 0.0
    else:
        file_avg = None

    per_rank = per_rank.merge(info, on="rank", how="left")
    per_rank_step = per_rank_step.merge(info, on="rank", how="left")

    wait_mean = float(per_rank[wait].mean()) if wait and per_rank[wait].notna().any() else math.nan
    per_rank["wait_vs_mean_ratio"] = per_rank[wait] / wait_mean - 1 if wait and wait_mean > 0 else math.nan
    step_median = F.step_ms_median

    metrics = {
        "average_source": "computed",
        "average_steps": "steps in scope (warm-up steps left out)" if F.warmup_steps and not F.include_warmup
        else "every step listed",
        "ranks": len(ranks),
        "steps": len(F.steps),
        "steps_listed": list(F.steps_all),
        "warmup_steps": list(F.warmup_steps),
        "step_ms_mean": F.step_ms_mean,
        "step_ms_median": step_median,
        "step_ms_min": float(per_rank["step_ms"].min()),
        "step_ms_max": float(per_rank["step_ms"].max()),
        "step_ms_spread_ratio": float((per_rank["step_ms"].max() - per_rank["step_ms"].min()) / step_median)
        if step_median > 0 else 0.0,
        **{f"{c}_mean": float(per_rank[c].mean()) for c in metrics_cols[1:]},
        "slowest_rank": F.slowest_rank,
        "fastest_rank": F.fastest_rank,
        "median_rank": F.median_rank,
        "file_average_vs_step_mean_max_diff_ratio": avg_diff,
        "wait_metric": wait or "",
        "wait_measure": W.measure if wait else "",
        "compute_metric": src.compute,
        "thresholds": {k: v for k, v in th.as_dict().items()
                       if k.startswith(("step_interval", "fp_bp", "severity", "min_excess"))},
    }
    ranks_without = sorted(set(run.ranks) - set(ranks))
    if ranks_without:
        metrics["ranks_without_step_data"] = ranks_without

    data = {
        "source": src,
        "wait": wait,
        "wait_measure": W.measure if wait else "",
        "step_definition": run.step_definition,
        "columns": metrics_cols,
        "slow_hosts": _slow_hosts(per_rank, wait, wait_mean),
        "step_ops": _op_summary(run.table("step_ops"), F),
        "step_median": step_median,
    }
    covered = {r for h in data["slow_hosts"] for r in h["ranks"]}
    data["slow_ranks"] = _slow_wait(per_rank, wait, wait_mean, covered)
    data["slow_compute"] = _slow_compute(per_rank, src)

    tables = {
        "per_rank_step": per_rank_step[["rank", "step"] + metrics_cols + ["host", "stage", "warmup"]],
        "per_rank": per_rank[["rank"] + metrics_cols + ["wait_vs_mean_ratio", "host", "stage"]],
    }
    if file_avg is not None:
        tables["per_rank_file_average"] = file_avg
    a = Analysis(metrics=metrics, tables=tables, data=data)
    a.findings = _findings(metrics, data, src)
    return a


def _slow_hosts(per_rank: pd.DataFrame, wait: str | None, mean_wait: float) -> list[dict]:
    """Hosts all of whose ranks wait more than the seed threshold above the mean of all ranks."""
    known = per_rank.dropna(subset=["host"])
    if wait is None or not mean_wait > 0 or known["host"].nunique() < 2:
        return []
    limit = (1 + th.STEP_INTERVAL_ABOVE_MEAN) * mean_wait
    out = []
    for host, grp in sorted(known.groupby("host", sort=False), key=lambda hg: natural_key(hg[0])):
        floor = mean_wait + th.MIN_EXCESS_SHARE * per_rank["step_ms"].median()
        if len(grp) > 1 and (grp[wait] > max(limit, floor)).all():
            out.append({"host": host, "ranks": sorted(int(r) for r in grp["rank"]),
                        "value": float(grp[wait].mean()), "reference": mean_wait,
                        "step_ms": float(grp["step_ms"].mean())})
    return out


def _slow_wait(per_rank: pd.DataFrame, wait: str | None, mean_wait: float, covered: set[int]) -> list[dict]:
    """Seed rule ``step_interval`` on the run's input-wait measure (facts.input_wait): s_r / mean(s) - 1 > 0.2
    (the seed reports the worst rank only)."""
    if wait is None or not mean_wait > 0:
        return []
    limit = (1 + th.STEP_INTERVAL_ABOVE_MEAN) * mean_wait
    floor = mean_wait + th.MIN_EXCESS_SHARE * per_rank["step_ms"].median()
    slow = per_rank[(per_rank[wait] > max(limit, floor)) & ~per_rank["rank"].isin(covered)]
    slow = slow.sort_values(wait, ascending=False)
    return [{"rank": int(r["rank"]), "value": float(r[wait]), "reference": mean_wait,
             "percent": float((r[wait] / mean_wait - 1) * 100), "step_ms": float(r["step_ms"]),
             "host": r["host"] if isinstance(r["host"], str) else None} for _, r in slow.iterrows()]


def _slow_compute(per_rank: pd.DataFrame, src: Source) -> list[dict]:
    """Device-work outliers: above the median of the other ranks of the same stage by the threshold.

    Stages legitimately differ in pipeline parallel, so ranks are only compared with their
    stage peers; a leave-one-out median keeps one slow rank from raising its own reference.
    """
    out = []
    groups = per_rank.groupby(per_rank["stage"].fillna(0)) if per_rank["stage"].notna().any() else [(0, per_rank)]
    for _stage, grp in groups:
        if len(grp) < 2:
            continue
        values = grp[src.compute].to_numpy(dtype=float)
        refs = _leave_one_out_median(values)
        step_median = float(grp["step_ms"].median())
        limit = np.maximum((1 + th.FP_BP_ABOVE_STAGE_PEERS) * refs, refs + th.MIN_EXCESS_SHARE * step_median)
        with np.errstate(invalid="ignore"):
            slow = np.flatnonzero((refs > 0) & (values > limit))
        for i in slow:
            row = grp.iloc[i]
            value, ref = values[i], float(refs[i])
            out.append({"rank": int(row["rank"]), "value": float(value), "reference": ref,
                        "percent": float((value / ref - 1) * 100), "step_ms": float(row["step_ms"]),
                        "stage": None if pd.isna(row["stage"]) else int(row["stage"])})
    return sorted(out, key=lambda d: -d["percent"])


def _leave_one_out_median(values: np.ndarray) -> np.ndarray:
    """Per element: the median of the OTHER elements, NaN left out (as pandas' ``Series.median``; the mean of the
    two middle values for an even count); NaN for a NaN element or when no other value is left. One sort instead
    of a median per element (``values.drop(i).median()`` was quadratic in the ranks of a stage)."""
    out = np.full(len(values), np.nan)
    ok = ~np.isnan(values)
    a = np.sort(values[ok])
    n = len(a) - 1  # values left once one is dropped
    if n < 1:
        return out
    k = np.searchsorted(a, values[ok])  # one occurrence of the dropped value (which one does not matter)

    def left(j: int) -> np.ndarray:  # the j-th smallest of the values left
        return np.where(j < k, a[j], a[j + 1])

    out[ok] = left(n // 2) if n % 2 else (left(n // 2 - 1) + left(n // 2)) / 2
    return out


def _op_summary(ops: pd.DataFrame | None, F) -> pd.DataFrame | None:
    """Communication operators on the step timeline: mean duration per rank over the steps in scope (facts:
    warm-up steps left out, as every average of the report), then across ranks."""
    if ops is None:
        return None
    if "step" in ops and F is not None:
        ops = F.in_scope(ops)
        if ops.empty:
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
    src: Source = d["source"]
    cols_m = d["columns"]
    labels = labels_of(src, d.get("wait"), d.get("wait_measure", ""))
    per_rank = a.tables["per_rank"]
    per_rank_step = a.tables["per_rank_step"]
    steps = sorted(per_rank_step["step"].unique().tolist())
    n_ranks = len(per_rank)

    step_ms = per_rank.set_index("rank")["step_ms"]
    named = vl.named_ranks(a)
    shown = th.ranks_shown(step_ms, named)
    # step choices: the average plus as many steps as the chart budget allows for the ranks the bars draw (evenly
    # spaced)
    max_steps = max(1, MAX_CHART_ROWS // max(1, (len(shown) if shown is not None else n_ranks)
                                              * len(src.phases)) - 1)
    # (the page's default step and the steps findings cite always among them: reportgen/focus.py)
    shown_steps = keep_sample(steps, max_steps, focus.of(a).steps_to_keep())
    warm = set(m.get("warmup_steps") or [])
    avg_label = "Average (steps in scope)" if warm and m["steps"] < len(steps) else "Average (mean of steps)"
    controls = [
        Control("step", "Step", [("avg", avg_label)] + [(str(s), facts.step_label(s, warm))
                                                         for s in shown_steps], "avg"),
        Control("sort_by", "Sort ranks by", [("rank", "Rank id")] + [(k, labels[k]) for k in cols_m], "rank"),
        Control("heat_metric", "Heatmap shows", [(k, labels[k]) for k in cols_m], "step_ms"),
    ]
    notes = []
    if len(shown_steps) < len(steps):
        notes.append(f"The step selector offers {len(shown_steps)} of {len(steps)} steps (evenly spaced, with the page's "
                     f"default step and every step a finding cites) to keep the "
                     f"file small; every step is in the per-rank-step table and its CSV as far as the page has room "
                     f"(the table says how many rows it left out).")
    if warm and m["steps"] < len(steps):
        notes.append(f"Warm-up step{'s' if len(warm) > 1 else ''} {', '.join(map(str, sorted(warm)))}: left out of the "
                     f"averages, the ranking of ranks and the heatmap's colour scale (the first step took more than "
                     f"{fmt.number(th.WARMUP_STEP_FACTOR)}x the later steps); reportgen --include-warmup keeps them.")
    diff = m.get("file_average_vs_step_mean_max_diff_ratio")
    if diff is not None and not math.isnan(diff):
        notes.append(
            "The profiler also wrote its own average row ('-', the table 'profiler average row'); the seed shows "
            f"that row. It differs from the mean of the steps in scope by up to {fmt.percent(diff)} (step time): "
            "the profiler averaged steps that were not all kept, warm-up included.")
    if d.get("step_definition"):  # the reader's definition of its step time (Run.step_definition)
        notes.append(d["step_definition"])
    if d.get("wait"):
        notes.append(f"Input wait: the run's {d['wait_measure']} (reportgen/facts.py input_wait), the measure the data "
                     "section and the advisor's data rules read too.")
    if m.get("ranks_without_step_data"):
        notes.append("Ranks without per-step timing: " + ", ".join(map(str, m["ranks_without_step_data"])))

    per_rank_title = "Per rank (" + avg_label.lower() + ")"
    if shown is None:
        figures = [_bars(per_rank, per_rank_step, shown_steps, src, cols_m)]
    else:  # many ranks: the bars draw the extremes, the median and the findings' ranks; a histogram every rank
        notes.append(vl.rank_cut_note(shown, len(per_rank), "step time", per_rank_title))
        figures = [_bars(per_rank[per_rank["rank"].isin(shown)], per_rank_step[per_rank_step["rank"].isin(shown)],
                         shown_steps, src, cols_m),
                   vl.rank_distribution("trajectory-distribution", step_ms, shown, labels["step_ms"],
                                        avg_label.lower())]
    figures.append(_heatmap(per_rank_step, labels, cols_m, keep=named))

    cols = [Column("rank", "Rank", "rank"), Column("host", "Host", "text"), Column("stage", "Stage", "int")] + \
        [Column(k, labels[k], "ms") for k in cols_m]
    tables = [
        Table.from_frame("trajectory-per-rank", per_rank_title, per_rank,
                         cols + [Column("wait_vs_mean_ratio", f"{(d.get('wait_measure') or 'input wait').capitalize()} "
                                        "vs mean", "ratio")]),
        Table.from_frame("trajectory-per-rank-step", "Per rank and step", per_rank_step,
                         cols[:3] + [Column("step", "Step", "int")] + cols[3:]),
    ]
    ops = d.get("step_ops")
    if ops is not None and not ops.empty:
        tables.append(Table.from_frame(
            "trajectory-step-ops", "Communication operators on the step timeline (mean over the steps in scope)", ops,
            [Column("op", "Operator", "text"), Column("ranks", "Ranks", "int"), Column("mean_ms", "Mean", "ms"),
             Column("max_ms", "Max", "ms"), Column("max_rank", "Rank of max", "rank"),
             Column("max_vs_mean_ratio", "Max vs mean", "ratio")],
            caption="From the operator columns of the step trace; the slowest first.", max_html_rows=50))
    if "per_rank_file_average" in a.tables:
        fa = a.tables["per_rank_file_average"].merge(per_rank[["rank", "host", "stage"]], on="rank", how="left")
        tables.append(Table.from_frame("trajectory-file-average", "Profiler average row ('-', as the seed shows it)",
                                       fa, cols, caption="The profiler's own averages over the whole profiled run; "
                                       "reference only."))

    parts = ", ".join(f"{labels[k].lower()} {fmt.ms(m[k + '_mean'])}" for k in cols_m[1:])
    summary = (f"{count(m['ranks'], 'rank')}, {count(m['steps'], 'step')}"
               + (f" (warm-up step {', '.join(map(str, sorted(warm)))} left out)" if warm and m["steps"] < len(steps)
                  else "") + f". Median step time {fmt.ms(m['step_ms_median'])} "
               f"(spread {fmt.percent(m['step_ms_spread_ratio'])} of the median); mean {parts}.")
    return View(summary=summary, figures=figures, tables=tables, controls=controls, notes=notes,
                ranks_drawn=list(shown or []))


def _findings(m: dict, d: dict, src: Source) -> list[Finding]:
    out = []
    step = d["step_median"] or 1.0
    pct = int(th.STEP_INTERVAL_ABOVE_MEAN * 100)
    wait, label = d.get("wait"), WAIT_LABEL.get(d.get("wait_measure"), d.get("wait_measure"))
    for h in d["slow_hosts"]:
        share = (h["value"] - h["reference"]) / step
        out.append(Finding(
            "slow_host", th.severity(share), ID,
            f"Host {h['host']}: the {label} of its {len(h['ranks'])} ranks is {fmt.ms(h['value'])} per step "
            f"on "
            f"average, {fmt.percent(h['value'] / h['reference'] - 1)} above the mean of all ranks "
            f"({fmt.ms(h['reference'])}).",
            ranks=h["ranks"],
            evidence={"metric": wait, "value": h["value"], "reference": h["reference"], "host": h["host"],
                      "share_of_step_ratio": share},
            suggestion="Check the data pipeline and host load on this host: CPU, disk or network storage, "
                       "dataset workers.",
            view=metric_view(wait)))
    slow = d["slow_ranks"]
    if slow:
        w = slow[0]
        share = (w["value"] - w["reference"]) / step
        others = [x["rank"] for x in slow[1:]]
        extra = f" Also above {pct}%: rank{'s' if len(others) > 1 else ''} {', '.join(map(str, others[:20]))}" \
                f"{' …' if len(others) > 20 else ''}." if others else ""
        out.append(Finding(
            WAIT_FINDING.get(d.get("wait_measure"), "slow_input_wait"), th.severity(share), ID,
            f"The {label} of rank {w['rank']} is {fmt.ms(w['value'])}, {fmt.quantity(w['percent'], 'pct')} "
            f"above the mean of "
            f"ranks ({fmt.ms(w['reference'])}): it waits longer before its step's work starts.{extra}",
            ranks=[x["rank"] for x in slow],
            evidence={"metric": wait, "value": w["value"], "reference": w["reference"],
                      "share_of_step_ratio": share},
            suggestion="Raise dataset parallelism or prefetch on that rank's host; check its data loading path "
                       "and host-side work before the first device op.",
            view=metric_view(wait)))
    slow = d["slow_compute"]
    if slow:
        w = slow[0]
        share = (w["value"] - w["reference"]) / step
        others = [x["rank"] for x in slow[1:]]
        stage = f" of stage {w['stage']}" if w.get("stage") else ""
        extra = f" Also slow: rank{'s' if len(others) > 1 else ''} {', '.join(map(str, others[:20]))}." if others else ""
        out.append(Finding(
            "slow_device_compute", th.severity(share), ID,
            f"The {src.compute_label} time of rank {w['rank']} is {fmt.ms(w['value'])}, "
            f"{fmt.quantity(w['percent'], 'pct')} above the "
            f"median of the other ranks{stage} ({fmt.ms(w['reference'])}).{extra}",
            ranks=[x["rank"] for x in slow],
            evidence={"metric": src.compute, "value": w["value"], "reference": w["reference"],
                      "share_of_step_ratio": share},
            suggestion="Look at this device's operators (frequency throttling, a slower card, uneven shapes).",
            view=metric_view(src.compute)))
    return out


def metric_view(col: str) -> EvidenceView:
    """A finding about one per-rank time: the heatmap showing it (every rank and step, its own colour scale, so a
    step interval is not a sliver of a stacked bar) and the bars sorted by it."""
    return EvidenceView("trajectory-heatmap", {"heat_metric": col, "sort_by": col})


def _chart_rows(per_rank: pd.DataFrame, per_rank_step: pd.DataFrame, shown_steps: list, src: Source,
                cols_m: list[str]) -> pd.DataFrame:
    avg = per_rank.assign(step_key="avg")
    per = per_rank_step[per_rank_step["step"].isin(shown_steps)].assign(step_key=lambda x: x["step"].astype(str))
    cols = ["rank", "host", "stage", "step_key"] + cols_m
    wide = pd.concat([avg[cols], per[cols]], ignore_index=True)
    wide["host"] = wide["host"].fillna("")
    parts = []
    for order, (key, label) in enumerate(src.phases):  # long format: one row per rank, step and phase
        parts.append(wide.assign(ms=wide[key], phase=label, order=order))
    return pd.concat(parts, ignore_index=True)


def _bars(per_rank: pd.DataFrame, per_rank_step: pd.DataFrame, shown_steps: list, src: Source,
          cols_m: list[str]) -> Figure:
    rows = _chart_rows(per_rank, per_rank_step, shown_steps, src, cols_m)
    unit, factor = fmt.unit_for("ms", rows["step_ms"])
    base = (vl.Chart(rows)
            .transform_filter("datum.step_key == step")
            .transform_calculate(sort_value="sort_by == 'rank' ? -datum.rank : datum[sort_by]"))
    x = vl.X("rank:O", title="Rank", sort=vl.EncodingSortField(field="sort_value", op="max", order="descending"),
              axis=vl.Axis(labelAngle=0))
    tips = [vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("host:N", title="Host"),
            vl.Tooltip("stage:O", title="Stage")]
    chart = stacked_parts(base, palette.column_parts(src.phases), x, unit, factor, tips).add_params(
        vl.param(name="step", value="avg"), vl.param(name="sort_by", value="rank"))
    title = "Step time per rank: " + ", ".join(label.split(" (")[0].lower() for _, label in src.phases)
    return Figure("trajectory-bars", title, to_spec(chart),
                  caption="Stacked per rank for the selected step (or the average). Sort with the control above.",
                  alt="Stacked bar chart of the parts of the step time for each rank")


def _heatmap(per_rank_step: pd.DataFrame, labels: dict[str, str], cols_m: list[str], keep=()) -> Figure:
    """Rank × step heatmap; beyond ``vl.HEATMAP_MAX_RANK_ROWS`` ranks, consecutive ranks are grouped (the group's
    maximum), the ``keep`` ranks (those findings name) each in a row of their own (``vl.bin_ranks``)."""
    df = per_rank_step[["rank", "step", "host", "warmup"] + cols_m].copy()
    df["host"] = df["host"].fillna("")
    caption = "Each cell is one rank in one step; colour = the chosen time."
    y_title = "Rank"
    df, per_bin = vl.bin_ranks(df, cols_m, keep=keep)
    if per_bin > 1:
        df.loc[df["ranks"].str.contains("–"), "host"] = ""
        y_title = f"Rank (groups of up to {per_bin}, max shown)"
        caption += (f" Ranks are grouped by up to {per_bin} consecutive ranks so the chart stays readable; each cell "
                    "shows the group's maximum, and the ranks the findings name keep a row of their own.")
    caption += MEDIAN_CAPTION
    if df["warmup"].any() and not df["warmup"].all():
        caption += WARMUP_CAPTION
    metrics = {"step_ms": labels["step_ms"], **{k: labels[k] for k in cols_m if k != "step_ms"}}
    chart = median_heatmap(df, metrics, param="heat_metric", y_title=y_title, reference="step_ms",
                           tooltip=[vl.Tooltip("host:N", title="Host")])
    return Figure("trajectory-heatmap", "Rank × step heatmap", to_spec(chart), caption=caption,
                  alt="Heatmap of time per rank and step")
