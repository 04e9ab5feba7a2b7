"""Operators across every rank: which op types and operators cost the most over the cluster, on which execution
unit (engine), and which rank is slow in which op type (issue 27 point 1; seed rows #45, #46, #71-#74).

Every number comes from :mod:`reportgen.opstats` (the one place for operator rows and their statistics): the rows
of every rank (the source chosen per rank there), without communication and waits (the communication section has
them; its per-type table here is ``comm_type_ops``). A row without a type (CPU-only traces: name only) takes its name
as its type.

Tables (all of them carry ``rank`` where they are per rank: filter any rank):

* ``types``: per op type over the cluster (:func:`reportgen.opstats.cluster_stats`): total, share, count, how many
  ranks run it, the per-rank totals' min / median / max, the rank with the max and the spread (max - median) /
  median, the engine of most of its time;
* ``rank_type_ops``: per (rank, type, engine) count / total / mean / min / max / std (sample) / share of the rank
  and time per step (total / the rank's steps with rows) — the op_statistic.csv / compute_op_sum of every rank;
* ``rank_name_ops``: per rank its :data:`TOP_NAMES` operators by total plus one ``others`` row;
* ``type_name_ops``: per op type its operators over the cluster (the "click a type -> its operators" view);
* ``rank_engine_ops``: per (rank, engine) time and share of the rank (AI Core / AI Vector / AI CPU / host ...);
  named like a per-operator table so the JSON budget cuts it (ranks x engines rows: 1.2 MB at 4096 ranks);
* ``comm_type_ops``: per (rank, communication op type) count / total / mean / min / max (hccl_sum);
* ``flops_types``: where ``op_flops`` exists, FLOPs and FLOP/s per op type (FLOPs / the duration of the ops
  counted with one).

The JSON and the page cut the per-operator tables (names ending in ``ops``) by the page budget (the longest rows
first; reportgen/document.py, render.fit_table_data); ``types`` does not grow with ranks or operators.
"""

from __future__ import annotations

from .. import labels as L

import numpy as np
import pandas as pd

from .. import charts as vl
from .. import facts, fmt, opstats
from ..frames import agg
from .. import thresholds as th
from ..charts import axis, fit, identity_color, tip, to_spec
from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, Column, Figure, Table, View, count
from . import with_sources

ID = "operators"
TITLE = "Operators across every rank"
#: the operator tables the registry names files for; a run with device ops (gpu_ops, cpu_ops) has a device_timeline,
#: and analyze raises Unavailable when reportgen.opstats finds no rows in any of its sources
NEEDS = (("kernels", "device_timeline", "step_ops"),)

#: op types drawn in the share chart (the rest summed as "others") and in the type x rank heatmap
TOP_TYPES = 20
HEAT_TYPES = 12
#: operators kept per rank in rank_name_ops (plus one "others" row), and per type in the type selector chart
TOP_NAMES = 10


#: the tables that give computation operator rows (named in the reason when a run has none)
OP_SOURCES = ("kernels", "op_stats", "gpu_ops", "cpu_ops", "device_timeline")


def _rows(run: Run, options=None) -> pd.DataFrame:
    """The computation operator rows of every rank (:func:`reportgen.opstats.compute_rows`); Unavailable when the run
    has none (no source, or only communication ops: the step trace's, which the communication section shows)."""
    rows = opstats.op_rows(run)
    if rows.empty:
        raise Unavailable("no operator rows in this run: needs " + with_sources(options, OP_SOURCES))
    w = opstats.compute_rows(rows).copy()
    if w.empty:
        kinds = ", ".join(sorted({str(x) for x in rows["type"].dropna().unique()})[:6])
        raise Unavailable(
            f"no computation operator data: this run's operator rows are only communication ops ({kinds}; the "
            "communication section shows them, and a rank that waits longer in one is not slow). Per-operator "
            "data needs " + with_sources(options, OP_SOURCES))
    w["type"] = w["type"].where(w["type"].notna(), w["name"]).fillna("")
    w["name"] = w["name"].where(w["name"].notna(), w["type"])
    return w


def top_per_rank(per: pd.DataFrame, n: int = TOP_NAMES) -> pd.DataFrame:
    """``per`` (rank, name, count, total_ms, min_ms, max_ms, share_ratio; sorted by rank then total descending) ->
    the first ``n`` rows of each rank plus one ``others`` row per rank summing the rest (vectorised)."""
    pos = per.groupby("rank", sort=False).cumcount()
    top, rest = per[pos < n], per[pos >= n]
    if rest.empty:
        return top.reset_index(drop=True)
    o = agg(rest.groupby("rank", sort=False), count=("count", "sum"), total_ms=("total_ms", "sum"),
            min_ms=("min_ms", "min"), max_ms=("max_ms", "max"), share_ratio=("share_ratio", "sum")).reset_index()
    o["name"] = "others"
    o["mean_ms"] = o["total_ms"] / o["count"].where(o["count"] > 0)
    out = pd.concat([top, o], ignore_index=True)
    out["_o"] = out["name"].eq("others").astype(int)
    out = out.sort_values(["rank", "_o", "total_ms"], ascending=[True, True, False], kind="stable")
    return out.drop(columns="_o").reset_index(drop=True)


def _flops_types(run: Run) -> pd.DataFrame | None:
    """type, ops, flops, dur_ms, flops_per_s over the counted ``op_flops`` rows (FLOPs > 0); FLOP/s = the type's
    FLOPs / the summed device duration of its counted ops with one (NaN when none has a duration)."""
    f = run.table("op_flops")
    if f is None:
        return None
    f = f[pd.to_numeric(f["flops"], errors="coerce") > 0]
    if f.empty:
        return None
    timed = f["dur_ms"].notna() & (f["dur_ms"] > 0)
    g = agg(f.assign(_t=f["dur_ms"].where(timed), _ft=f["flops"].where(timed)).groupby("type"),
            ops=("flops", "size"), flops=("flops", "sum"), dur_ms=("_t", "sum"), _ft=("_ft", "sum")).reset_index()
    g["flops_per_s"] = np.where(g["dur_ms"] > 0, g["_ft"] / (g["dur_ms"] / 1e3), np.nan)
    g.loc[g["dur_ms"] <= 0, "dur_ms"] = np.nan
    return g.drop(columns="_ft").sort_values("flops", ascending=False, kind="stable").reset_index(drop=True)


def _ranks_per_type_name(w: pd.DataFrame, type_names: pd.DataFrame, codes: dict) -> list[int]:
    """For each (type, name) row of ``type_names``: how many ranks of ``w`` have it (pandas' ``nunique`` of the rank
    per (type, name) group, a row missing either not counted), from the key codes (``opstats.key_codes``) rather than
    a grouping by two text columns of every row."""
    if "type" not in codes or "name" not in codes:
        nr = w.groupby(["type", "name"])["rank"].nunique()
        return [int(nr.get((t, n), 0)) for t, n in zip(type_names["type"], type_names["name"])]
    (tc, tv), (nc, nv) = codes["type"], codes["name"]
    named = (w["type"].notna() & w["name"].notna() & w["rank"].notna()).to_numpy()
    pair = tc[named].astype(np.int64) * max(len(nv), 1) + nc[named]
    seen = pd.DataFrame({"pair": pair, "rank": w["rank"].to_numpy()[named]}).drop_duplicates()
    per_pair = seen["pair"].value_counts()
    t_of, n_of = {v: i for i, v in enumerate(tv)}, {v: i for i, v in enumerate(nv)}
    return [int(per_pair.get(t_of[t] * max(len(nv), 1) + n_of[n], 0)) if t in t_of and n in n_of else 0
            for t, n in zip(type_names["type"], type_names["name"])]


def analyze(run: Run, options=None) -> Analysis:
    w = _rows(run, options)
    ranks = sorted(int(r) for r in w["rank"].unique())
    F = facts.of(run, options)
    scope = None
    if F is not None:  # the page's steps in scope (reportgen/facts.py): warm-up steps left out as everywhere else
        sw = opstats.scope_rows(w, F.steps)
        if not sw.empty and ((sw["step"] >= 0).any() or not (w["step"] >= 0).any()):
            scope = list(F.steps)
            w = sw
    steps = opstats.steps_per_rank(w, no_step=len(F.steps_all) if F is not None else 1)
    comm_types = sorted({str(x) for x in w.loc[w["op_class"].isin(opstats.LEFT_OUT), "type"].unique()})
    codes = opstats.key_codes(w, ("type", "name", "engine", "source"))  # factorised once for the five tables
    rank_type = opstats.summarize(w, ("rank", "type", "engine"), codes)
    rank_type["per_step_ms"] = rank_type["total_ms"] / rank_type["rank"].map(steps).to_numpy()
    per_rt = opstats.summarize(w, ("rank", "type"), codes)
    types = opstats.cluster_stats(per_rt, "type", ranks)
    eng = w.groupby(["type", "engine"])["dur_ms"].sum().reset_index().sort_values(
        ["type", "dur_ms"], ascending=[True, False], kind="stable").drop_duplicates("type")
    types["engine"] = types["type"].map(dict(zip(eng["type"], eng["engine"]))).to_numpy()
    types["max_rank_per_step_ms"] = types["rank_max_ms"] / types["max_rank"].map(steps).to_numpy()
    names = top_per_rank(opstats.summarize(w, ("rank", "name"), codes))
    type_names = opstats.summarize(w, ("type", "name"), codes)
    type_names["ranks"] = _ranks_per_type_name(w, type_names, codes)
    type_names["share_of_type_ratio"] = type_names["total_ms"] / type_names["type"].map(
        type_names.groupby("type")["total_ms"].sum()).to_numpy()
    engines = opstats.summarize(w, ("rank", "engine"), codes)
    tables = {"types": types, "rank_type_ops": rank_type, "rank_name_ops": names, "type_name_ops": type_names,
              "rank_engine_ops": engines[["rank", "engine", "count", "total_ms", "share_ratio"]]}
    comm = opstats.comm_summary(run, scope)
    if comm is not None:
        tables["comm_type_ops"] = comm
    ft = _flops_types(run)
    if ft is not None:
        tables["flops_types"] = ft
    rows = opstats.op_rows(run)
    src = rows.groupby("source")["rank"].nunique()
    top = types.iloc[0] if len(types) else None
    metrics = {
        "ranks": len(ranks), "op_types": int(len(types)),
        "operators": int(len(np.unique(codes["name"][0][w["name"].notna().to_numpy()]))) if "name" in codes
        else int(w["name"].nunique()),
        "op_rows": int(len(w)), "sources": {str(k): int(v) for k, v in src.items()},
        "left_out_rows": int(len(rows) - len(w)),
        "top_type": None if top is None else str(top["type"]),
        "top_type_share_ratio": None if top is None else float(top["share_ratio"]),
        "engines": {str(k): float(v) for k, v in w.groupby("engine")["dur_ms"].sum().items()},
        "steps_in_scope": scope,
        "per_step_definition": "per rank: its op time in the steps in scope (reportgen/facts.py: warm-up left out "
                               "unless --include-warmup) / the number of those steps with op rows; op_statistic rows "
                               "(no step) / the steps profiled",
        "std_definition": "sample standard deviation (ddof 1), as HTA kernel_breakdown and msprof-analyze "
                          "compute_op_sum; empty for one call or pre-aggregated op_statistic rows",
    }
    data = {"steps": {int(k): int(v) for k, v in steps.items()}, "comm_types": comm_types}
    return Analysis(metrics=metrics, tables=tables, data=data)


# --------------------------------------------------------------------------- figures


def _share_figure(types: pd.DataFrame, type_names: pd.DataFrame, engines: list[str],
                  rank_type: pd.DataFrame | None = None) -> Figure:
    """Top TOP_TYPES op types by total (the rest as 'others'), coloured by engine; clicking a bar picks the type whose
    operators the chart below lists (the top TOP_NAMES of the type over the cluster)."""
    top = types.iloc[:TOP_TYPES][["type", "total_ms", "share_ratio", "count", "ranks", "engine", "max_rank",
                                  "spread_ratio"]].copy()
    rest = types.iloc[TOP_TYPES:]
    if not rest.empty:
        top = pd.concat([top, pd.DataFrame([{"type": "others", "total_ms": rest["total_ms"].sum(),
                                             "share_ratio": rest["share_ratio"].sum(), "count": rest["count"].sum(),
                                             "ranks": (int(rank_type.loc[rank_type["type"].isin(set(rest["type"])),
                                                                         "rank"].nunique())
                                                       if rank_type is not None else None),
                                             "engine": "(several)", "max_rank": None,
                                             "spread_ratio": None}])], ignore_index=True)
    top["total_ms"] = top["total_ms"].astype(float).round(4)
    top["share_ratio"] = top["share_ratio"].astype(float).round(5)
    unit, factor = fmt.unit_for("ms", top["total_ms"])
    order = top["type"].tolist()
    first = order[0]
    pick = {"name": "op_type_pick", "select": {"type": "point", "fields": ["type"], "toggle": False},
            "value": [{"type": first}]}
    bars = vl.in_unit(vl.Chart(top), factor, "total_ms").mark_bar(cursor="pointer").encode(
        y=vl.Y("type:N", sort=order, title="Op type", axis=vl.Axis(labelLimit=240)),
        x=vl.X("total_ms_u:Q", axis=vl.Axis(**axis("Total time, all ranks", unit))),
        color=identity_color("engine", [e for e in engines + ["(several)"] if e in set(top["engine"])], "Engine"),
        opacity={"condition": {"param": "op_type_pick", "value": 1.0}, "value": 0.45},
        tooltip=[vl.Tooltip("type:N", title="Op type"), vl.Tooltip("engine:N", title="Engine"),
                 tip("total_ms_u", "Total", unit), tip("share_ratio", "Share of all op time", kind="ratio"),
                 vl.Tooltip("count:Q", title="Calls", format=fmt.D3_INT), vl.Tooltip("ranks:Q", title="Ranks"),
                 vl.Tooltip("max_rank:O", title="Rank with the most"),
                 tip("spread_ratio", "Spread: most rank above the median rank", kind="ratio")],
    ).add_params(pick).properties(width="container", height={"step": 16})
    tn = type_names[type_names["type"].isin(order)]
    tn = tn.groupby("type", sort=False).head(TOP_NAMES)[["type", "name", "count", "total_ms", "mean_ms",
                                                          "share_of_type_ratio", "ranks"]].copy()
    for c in ("total_ms", "mean_ms", "share_of_type_ratio"):
        tn[c] = tn[c].astype(float).round(5)
    n_unit, n_factor = fmt.unit_for("ms", tn["total_ms"])
    ops = vl.in_unit(vl.Chart(tn), n_factor, "total_ms").transform_filter({"param": "op_type_pick"}).mark_bar(
        color="#7f7f7f").encode(
        y=vl.Y("name:N", sort="-x", title=None, axis=vl.Axis(labelLimit=240)),
        x=vl.X("total_ms_u:Q", axis=vl.Axis(**axis("Total time, all ranks", n_unit))),
        tooltip=[vl.Tooltip("type:N", title="Op type"), vl.Tooltip("name:N", title="Operator"),
                 tip("total_ms_u", "Total", n_unit), tip("share_of_type_ratio", "Share of the type", kind="ratio"),
                 vl.Tooltip("count:Q", title="Calls", format=fmt.D3_INT), vl.Tooltip("ranks:Q", title="Ranks")],
    ).properties(width="container", height={"step": 16},
                 title={"text": "Operators of the picked type", "anchor": "start", "fontSize": 12})
    chart = vl.fit_concat(vl.vconcat(bars, ops))
    return Figure("operators-types", "Op types over every rank: share and their operators", to_spec(chart),
                  caption=f"The {min(TOP_TYPES, len(types))} op types with the most time summed over all ranks"
                          + (f" (the other {len(rest)} as 'others')" if not rest.empty else "")
                          + ", coloured by the engine (execution unit) of most of their time. Click a type to list "
                          f"its top {TOP_NAMES} operators below (first: {first}); the table 'Operators per op type' "
                          "has every operator of every type (filter its Type column).",
                  alt="Bar chart of the op types with the most total time over every rank, and their operators",
                  static_caption=f"The {min(TOP_TYPES, len(types))} op types with the most time summed over all ranks,"
                                 f" coloured by engine; below, the top operators of {first}.")


def _heat_figure(rank_type: pd.DataFrame, types: pd.DataFrame, shown: list[int] | None,
                 comm_types=()) -> Figure | None:
    """Op type x rank: time per step of each (rank, type) over the median rank's of the type (1 = the median rank;
    absent = 0). Communication op types (``comm_types``) are never drawn: a rank that waits longer in one is not
    slow (the communication section ranks who waits for whom)."""
    top = [x for x in types["type"] if x not in set(comm_types)][:HEAT_TYPES]
    if not top:
        return None
    d = rank_type[rank_type["type"].isin(top)].groupby(["rank", "type"], sort=False)["per_step_ms"].sum()
    d = d.unstack(fill_value=0.0).reindex(columns=top, fill_value=0.0)
    med = d.median(axis=0)
    if shown is not None:
        d = d.loc[[r for r in shown if r in d.index]]
    long = d.stack().rename("per_step_ms").reset_index()
    long["ratio"] = long["per_step_ms"] / long["type"].map(med).where(lambda s: s > 0).to_numpy()
    long["per_step_ms"] = long["per_step_ms"].astype(float).round(4)
    long["ratio"] = long["ratio"].astype(float).round(4)
    unit, factor = fmt.unit_for("ms", long["per_step_ms"])
    n = long["rank"].nunique()
    hi = float(np.nanmax(long["ratio"].to_numpy())) if long["ratio"].notna().any() else 2.0
    span = max(0.2, min(1.0, abs(hi - 1.0)))
    chart = vl.in_unit(vl.Chart(long), factor, "per_step_ms").mark_rect().encode(
        x=vl.X("rank:O", title="Rank", axis=vl.Axis(labelOverlap=True, labels=n <= 128)),
        y=vl.Y("type:N", sort=top, title="Op type", axis=vl.Axis(labelLimit=220)),
        color=vl.Color("ratio:Q", scale=vl.diverging([1.0 - span, 1.0, 1.0 + span]),
                       legend=vl.Legend(title="Over median rank", format=".2f")),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("type:N", title="Op type"),
                 tip("per_step_ms_u", "Time per step", unit),
                 vl.Tooltip("ratio:Q", title="Over the median rank", format=fmt.D3_FORMAT)],
    ).properties(width=max(200, min(vl.PLOT_MAX_WIDTH, 18 * n)), height={"step": 18})
    return Figure("operators-rank-heat", "Which rank is slow in which op type", to_spec(chart),
                  caption=f"The {len(top)} op types with the most time (rows) on each rank (columns): time per step "
                          "over the median rank's time per step of that type (1 = the median rank; red above, blue "
                          "below; a rank without the type is 0). A rank that is slow in one type stands out in its "
                          "row; the table 'Per rank and op type' has every rank and type.",
                  alt="Heatmap of op type time per step on each rank relative to the median rank")


def _engine_figure(engines: pd.DataFrame, shown: list[int] | None, order: list[str]) -> Figure | None:
    e = engines if shown is None else engines[engines["rank"].isin(shown)]
    if e.empty:
        return None
    e = e[["rank", "engine", "total_ms", "share_ratio"]].copy()
    e["total_ms"] = e["total_ms"].astype(float).round(4)
    e["share_ratio"] = e["share_ratio"].astype(float).round(5)
    unit, factor = fmt.unit_for("ms", e["total_ms"])
    order = [x for x in order if x in set(e["engine"])]
    e["o"] = e["engine"].map({x: i for i, x in enumerate(order)})
    n = e["rank"].nunique()
    chart = vl.in_unit(vl.Chart(e), factor, "total_ms").mark_bar().encode(
        x=vl.X("rank:O", title="Rank", axis=vl.Axis(labelOverlap=True, labels=n <= 128)),
        y=vl.Y("share_ratio:Q", stack="normalize", axis=vl.Axis(**axis("Share of the rank's op time", kind="ratio"))),
        color=identity_color("engine", order, "Engine"),
        order=vl.Order("o:Q"),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("engine:N", title="Engine"),
                 tip("total_ms_u", "Time", unit), tip("share_ratio", "Share of the rank", kind="ratio")],
    )
    return Figure("operators-engines", "Engine split per rank", to_spec(fit(chart, 220)),
                  caption="Per rank, the share of its operator time on each engine (execution unit: AI Core, AI Vector "
                          "Core, MIX_AIC, AI CPU on NPUs; kernel / memcpy / memset on GPUs; host for CPU ops).",
                  alt="Stacked bars of each rank's operator time per engine")


# --------------------------------------------------------------------------- view


def present(a: Analysis) -> View:
    m, t = a.metrics, a.tables
    types, rank_type = t["types"], t["rank_type_ops"]
    per_rank = rank_type.groupby("rank")["per_step_ms"].sum()
    named = list(dict.fromkeys([int(r) for r in types["max_rank"].iloc[:HEAT_TYPES]] + vl.named_ranks(a)))
    shown = th.ranks_shown(per_rank, named=named)
    engines = [k for k, _ in sorted(m["engines"].items(), key=lambda kv: -kv[1])]
    figures = [_share_figure(types, t["type_name_ops"], engines, rank_type)]
    heat = _heat_figure(rank_type, types, shown, a.data.get("comm_types", ()))
    for f in (heat, _engine_figure(t["rank_engine_ops"], shown, engines)):
        if f is not None:
            figures.append(f)
    stat = [Column("count", "Calls", "int"), Column("total_ms", "Total", "ms"), Column("mean_ms", "Mean", "ms", unit_with="call"),
            Column("min_ms", "Min", "ms", unit_with="call"), Column("max_ms", "Max", "ms", unit_with="call"),
            Column("std_ms", "Std", "ms", unit_with="call", help="sample standard deviation (ddof 1), as HTA and msprof-analyze; empty "
                                               "for one call or a profiler's pre-aggregated row")]
    # the two widest tables leave out Min (it fits an A4 page in print; the metrics JSON keeps every column)
    narrow = [c for c in stat if c.key != "min_ms"]
    tables = [
        Table.from_frame("operators-types-table", "Op types over every rank", types,
                         [Column("type", "Op type", "text"), Column("engine", "Engine", "text"),
                          Column("total_ms", "Total", "ms"), Column("share_ratio", "Share", "ratio"),
                          Column("count", "Calls", "int"), Column("ranks", "Ranks", "int"),
                          Column("rank_min_ms", "Least rank", "ms", unit_with="rank"),
                          Column("rank_median_ms", "Median rank", "ms", unit_with="rank"),
                          Column("rank_max_ms", "Most rank", "ms", unit_with="rank"), Column("max_rank", "Rank with the most", "rank"),
                          Column("spread_ratio", "Spread", "ratio",
                                 help="(most rank - median rank) / median rank, of the per-rank totals")],
                         caption="One row per op type, the most time first. Least / median / most rank: the "
                                 "per-rank totals of the type (a rank without it counts 0)."),
        Table.from_frame("operators-rank-types", "Per rank and op type", rank_type,
                         [Column("rank", "Rank", "rank"), Column("type", "Op type", "text"),
                          Column("engine", "Engine", "text")] + narrow
                         + [Column("share_ratio", "Share of rank", "ratio"),
                            Column("per_step_ms", "Per step", "ms", help="total in the steps in scope / the rank's steps in scope "
                                                                     "with operators (warm-up left out)")],
                         caption="Every (rank, op type, engine): the op_statistic / compute_op_sum view of every rank "
                                 "(min: in the metrics JSON). Filter the Rank column to see one rank."),
        Table.from_frame("operators-rank-names", "Top operators per rank", t["rank_name_ops"],
                         [Column("rank", "Rank", "rank"), Column("name", "Operator", "text")] + stat[:5]
                         + [Column("share_ratio", "Share of rank", "ratio")],
                         caption=f"Per rank its {TOP_NAMES} operators with the most time plus one 'others' row."),
        Table.from_frame("operators-type-names", "Operators per op type", t["type_name_ops"],
                         [Column("type", "Op type", "text"), Column("name", "Operator", "text")]
                         + [c for c in narrow if c.key != "std_ms"]
                         + [Column("share_of_type_ratio", "Share of type", "ratio"), Column("ranks", "Ranks", "int")],
                         caption="Every operator of every op type over all ranks (filter the Op type column: the "
                                 "static form of clicking a type). Min and std: in the metrics JSON."),
        Table.from_frame("operators-rank-engines", "Engine time per rank", t["rank_engine_ops"],
                         [Column("rank", "Rank", "rank"), Column("engine", "Engine", "text"),
                          Column("count", "Calls", "int"), Column("total_ms", "Total", "ms"),
                          Column("share_ratio", "Share of rank", "ratio")]),
    ]
    if "comm_type_ops" in t:
        tables.append(Table.from_frame(
            "operators-comm-types", "Communication op types per rank", t["comm_type_ops"],
            [Column("rank", "Rank", "rank"), Column("op_type", "Op type", "text")] + stat[:5]
            + [Column("share_ratio", "Share of rank", "ratio"),
               Column("per_step_ms", "Per step", "ms", help="communication op time per step: summed over a rank's "
                                                           "op types, the communication section's value")],
            caption="Per rank and communication op type (as msprof-analyze hccl_sum), over the steps in scope: op "
                    "durations as the communication section reads them."))
    if "flops_types" in t:
        tables.append(Table.from_frame(
            "operators-flops-types", "FLOPs per op type", t["flops_types"],
            [Column("type", "Op type", "text"), Column("ops", "Counted ops", "int"), Column("flops", "FLOPs", "flop"),
             Column("dur_ms", "Time of the timed ops", "ms"), Column("flops_per_s", L.label("flops_per_s"), "flops")],
            caption="FLOPs of the ops counted with one (the FLOPs section's counts), all ranks; FLOP/s = FLOPs of "
                    "the ops with a device duration / that duration."))
    src = ", ".join(f"{k} ({count(v, 'rank')})" for k, v in sorted(m["sources"].items()))
    notes = [f"Every rank is here: each per-rank table has a Rank column (type a rank id in its filter) and the "
             f"metrics JSON keeps the rows its budget allows, the longest first. Operator rows from: {src}."
             + (f" {m['left_out_rows']:,} communication and wait rows are left out (the communication section has "
                "them; the per-type communication table below sums them)." if m["left_out_rows"] else "")]
    if "cpu_ops" in m["sources"]:
        notes.append("Host CPU ops nest (an op's time includes the ops it calls, e.g. aten::linear holds aten::matmul "
                     "holds aten::mm): the times of nested types overlap, so their shares add up past the time spent.")
    if shown is not None:
        notes.append(th.ranks_shown_note(shown, m["ranks"], "operator time per step"))
    top = m.get("top_type")
    summary = (f"{count(m['op_types'], 'op type')} and {count(m['operators'], 'operator')} over "
               f"{count(m['ranks'], 'rank')}" + (f"; {top} takes the most time ({fmt.percent(m['top_type_share_ratio'])})."
                                                 if top else "."))
    return View(summary=summary, figures=figures, tables=tables, notes=notes, ranks_drawn=shown or [])
