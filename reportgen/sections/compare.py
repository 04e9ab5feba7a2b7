"""Rank comparison: an abnormal rank beside a normal one, the first step of the current NPU profiling workflow for
a computation problem (research notes on msprof-analyze: compare an abnormal card with a normal one; msprof-analyze
``compare_tools``).

Sources and definitions:

* The pair (:func:`default_pair`): ``--compare-ranks A,B``; else A = the rank of the diagnosis' first cause
  (reportgen/diagnosis.py, as the ``waits`` section lists them; a stage cause left out), or without one the rank with
  the most compute time per step (the one the others wait for: synchronous steps end together, so the longest step
  is often a rank that waited; without operation times, the facts' slowest rank, reportgen/facts.py); B = the
  median rank of A's pipeline stage by the same measure (by step time when no other rank of the stage has operation
  times): ranks of different stages are never paired while A's stage has another rank (they run other layers).
  Without stages, the median of the other ranks.
* Operators: the run's device timeline (:mod:`reportgen.timeline`, every family; the NPU profiler's text export
  without trace_view.json: ``kernels``, where a communication row inside an earlier one of its rank, the task of an
  op the table lists too, is left to that op) in the steps in scope. Per rank: count and total time per step, and the
  mean time, by operation type (:func:`reportgen.timeline.op_type`) and by operation name; kind = the timeline's
  (``op_class``, with receive told apart from communication; ``kernels``: its ``op_class``). The class is decided
  once per family at the reader edge (:mod:`reportgen.schema`, ``op_class``): the compute time that chooses the pair
  is the time of ``op_class == compute`` only (an NPU wait, HCCL stream task or copy is never computation).
* Delta = A - B (ms per step); share of the step difference explained = delta / (step A - step B), when A's step is
  longer. The shares of all types but the waits add up to the part of the difference the device operations explain
  (time outside any operation, free time, is the rest; a wait runs beside the work it waits for, so it is not added).
* Communication: the communication section's operations per type: time (elapse), transit and wait per step.
* Memory: the memory section's peak per rank.
* Any other pair: the chart embeds the type totals of at most :data:`PAIR_RANKS` ranks (every rank up to that
  count; else the ranks the findings name, the fastest / median / slowest and the default pair) and two controls
  choose A and B among them.
"""

from __future__ import annotations

from .. import labels as L
from ..frames import agg

import numpy as np
import pandas as pd

from .. import charts as vl
from .. import facts, fmt, palette
from ..charts import to_spec
from ..errors import Unavailable
from ..focus import keep_sample
from ..model import Run
from ..report import Analysis, Column, Control, Figure, Table, View, count, rank_ranges
from ..timeline import DERIVED_NAME, op_type
from . import analysis_of, needs_reason

ID = "compare"
TITLE = "Rank comparison"
#: the device operations (reportgen.schema): the device timeline, else the NPU kernels (kernel_details.csv)
NEEDS = (("device_timeline", "kernels"),)

#: ranks whose type totals the page embeds for the any-pair chart
PAIR_RANKS = 64
#: operation types drawn in the chart (the largest |delta| of the default pair first, then the largest totals)
CHART_TYPES = 20
#: operations listed by name (the largest |delta| first); the JSON keeps the same
TOP_OPS = 30
#: steps that differ by less than this share end together (synchronous training): no share of the difference
SYNC_SHARE = 0.01


def _ops(run: Run, F) -> pd.DataFrame | None:
    """rank, kind, op_class, name, dur of the device operations in the steps in scope: the device timeline, else
    ``kernels``; the class is the reader's (``op_class``), never decided here."""
    tl = run.table("device_timeline")
    if tl is not None and not tl.empty:
        o = tl[tl["step"].isin(F.steps)]
        o = o.assign(dur=o["end_ms"] - o["start_ms"])[["rank", "kind", "op_class", "name", "dur"]]
    else:
        k = run.table("kernels")
        if k is None or k.empty or "step" not in k:
            return None
        k = k[k["step"].isin(F.steps)]
        o = pd.DataFrame({"rank": k["rank"], "kind": k["op_class"], "op_class": k["op_class"], "name": k["name"],
                          "dur": k["dur_ms"]})
        o = o.drop(index=_nested(k[k["op_class"] == "communication"]))
    if o.empty:
        return None
    names = o["name"].fillna("").astype(str)  # pandas' str dtype keeps a missing name missing
    uniq = pd.Series(names.unique(), dtype=object).astype(str)
    o = o.assign(name=names, type=names.map(dict(zip(uniq, _types(uniq)))))
    return o


def _nested(c: pd.DataFrame) -> pd.Index:
    """Index of the rows of ``c`` (rank, start_ms, dur_ms) that lie inside an earlier row of the same rank: the tasks
    of a communication op that the table also lists as an op of its own (a kernel_details.csv holds the HCCL
    op and its stream's tasks), so that their time is counted once, in the op."""
    if c.empty:
        return c.index
    c = c.assign(_end=c["start_ms"] + c["dur_ms"]).sort_values(["rank", "start_ms", "_end"],
                                                                ascending=[True, True, False], kind="stable")
    prev = c.groupby("rank")["_end"].cummax().groupby(c["rank"]).shift()
    return c.index[(c["_end"] <= prev).to_numpy()]


#: per-instance parts of an operation name: the step trace's stream prefix (``stream_25_5_``) and HCCL's instance
#: suffix (``hcom_allReduce__170_1_1``)
_INSTANCE = [(r"^stream_\d+_\d+_", ""), (r"__\d+_\d+_\d+$", "")]


def _types(names: pd.Series) -> pd.Series:
    """The operation type of each name (:func:`reportgen.timeline.op_type`, then the per-instance parts removed), so
    that one type gathers every instance."""
    t = op_type(names)
    for pat, rep in _INSTANCE:
        t = t.str.replace(pat, rep, regex=True)
    return t.where(names != DERIVED_NAME, DERIVED_NAME)  # "FP/BP minus communication" is a name, not a path


def _first_cause(causes, have: set[int]) -> dict | None:
    """The diagnosis' first cause (reportgen/diagnosis.py, as the ``waits`` section lists them: most severe first)
    that names a rank with operation times; a stage cause is left out (it is about the stages, and the pair is made
    inside one stage)."""
    for c in causes or []:
        if c.get("kind") != "stage" and any(int(r) in have for r in c.get("ranks") or []):
            return c
    return None


def default_pair(run: Run, F, options, compute: pd.Series | None = None,
                 causes: list[dict] | None = None) -> tuple[int, int, str]:
    """(A, B, why the pair was chosen). ``compute``: per rank the compute time per step (device operations);
    ``causes``: the diagnosis' causes (``waits`` section metrics).

    A = the first rank of the diagnosis' first cause that has operation times, else the rank with the most
    computation per step (the facts' slowest rank without operation times). B = the median rank of A's pipeline
    stage (issue 27 #87: ranks of different stages run different layers, so they are never paired while A's stage
    has another rank): by computation among the stage's ranks with operation times, else by step time among the
    stage's other ranks (B then has no operation columns: its step and communication still compare); the median of
    the other ranks when the run has no stages or A is alone in its stage."""
    want = options.get("compare_ranks") if options is not None else None
    all_ranks = sorted(int(r) for r in F.per_rank["rank"])
    ranks = all_ranks
    have = set(int(x) for x in compute.index) if compute is not None else set(all_ranks)
    if compute is not None and not want:  # A is drawn from the ranks whose operations the files hold
        ranks = [r for r in ranks if r in have] or ranks
    if want:
        a, b = (int(x) for x in want)
        missing = [r for r in (a, b) if r not in all_ranks]
        if missing:
            raise Unavailable(f"--compare-ranks {a},{b}: rank {missing[0]} has no step time in this run (ranks "
                              f"{all_ranks[0]}-{all_ranks[-1]})")
        return a, b, "--compare-ranks"
    # synchronous steps end together on every rank, so the longest step is often a rank that waited: the rank with
    # the most computation is the one the others wait for (the facts' slowest rank without operation times)
    pr = F.per_rank.set_index("rank")["step_ms"]
    measure, what = pr, "step time"
    if compute is not None and len(compute.reindex(ranks).dropna()) == len(ranks) and compute.max() > 0:
        measure, what = compute.reindex(ranks), "computation"
    cause = _first_cause(causes, set(ranks))
    if cause is not None:
        slow = next(int(r) for r in cause["ranks"] if int(r) in set(ranks))  # the first it names (a link: its sender)
        where = (f" on link {cause['link'][0]}→{cause['link'][1]}" if cause.get("link") else "")
        why_a = f"the rank of the diagnosis' first cause ({cause['kind']}{where})"
    else:
        slow = int(F.slowest_rank) if measure is pr else int(sorted(ranks, key=lambda r: (-float(measure[r]), r))[0])
        why_a = f"the rank with the most {what} per step"
    stage = run.stage_of(slow)
    if stage is not None and stage == stage:  # NaN: no stage
        same = [r for r in all_ranks if r != slow and run.stage_of(r) == stage]
        with_ops = [r for r in same if r in have and r in set(ranks)]
        if with_ops:
            order = sorted(with_ops, key=lambda r: (float(measure.get(r, pr[r])), r))
            return slow, order[(len(order) - 1) // 2], \
                f"{why_a} and the median rank of its pipeline stage ({stage}) by {what}"
        if same:
            order = sorted(same, key=lambda r: (float(pr[r]), r))
            return slow, order[(len(order) - 1) // 2], \
                (f"{why_a} and the median rank of its pipeline stage ({stage}) by step time (no other rank of the "
                 f"stage has operation times; a rank of another stage runs other layers, so it is not paired)")
    peers = [r for r in ranks if r != slow] or [r for r in all_ranks if r != slow]
    if not peers:
        raise Unavailable("The run has one rank: there is no other rank to compare it with.")
    order = sorted(peers, key=lambda r: (float(measure.get(r, pr[r])), r))
    return slow, order[(len(order) - 1) // 2], (
        f"{why_a} and the median of the other ranks by {what}"
        + (f" (rank {slow} is the only rank of stage {stage})" if stage is not None and stage == stage else ""))


def pair_table(per: pd.DataFrame, a: int, b: int, keys: list[str], step_diff: float) -> pd.DataFrame:
    """``per`` (rank, keys..., count, total_ms, mean_ms: per step) of ranks a and b side by side, with the delta and
    the share of the step difference it explains."""
    pa = per[per["rank"] == a].drop(columns="rank").set_index(keys)
    pb = per[per["rank"] == b].drop(columns="rank").set_index(keys)
    t = pa.add_prefix("a_").join(pb.add_prefix("b_"), how="outer").reset_index()
    for c in ("count", "total_ms"):
        t[f"a_{c}"] = t[f"a_{c}"].fillna(0.0)
        t[f"b_{c}"] = t[f"b_{c}"].fillna(0.0)
    t["delta_ms"] = t["a_total_ms"] - t["b_total_ms"]
    t["explained_ratio"] = t["delta_ms"] / step_diff if step_diff > 0 else np.nan
    return t.assign(order=t["delta_ms"].abs()).sort_values(["order"] + keys, ascending=[False] + [True] * len(keys),
                                                           kind="stable").drop(columns="order").reset_index(drop=True)


def _per(o: pd.DataFrame, keys: list[str], steps: int) -> pd.DataFrame:
    out = agg(o.groupby(["rank"] + keys), count=("dur", "size"), total_ms=("dur", "sum"), mean_ms=("dur", "mean")
              ).reset_index()
    out["count"] = out["count"] / steps
    out["total_ms"] = out["total_ms"] / steps
    return out


def analyze(run: Run, options=None) -> Analysis:
    F = facts.of(run, options)
    if F is None or F.per_rank.empty:
        raise Unavailable("No step times in this run, so no slowest or median rank to compare (see the trajectory "
                          "section for the files that give step times).")
    ops = _ops(run, F)
    if ops is None:
        raise Unavailable("No device operations in the steps in scope: "
                          + needs_reason(None, ["device_timeline or kernels"], options) + ".")
    steps = max(1, len(F.steps))
    compute = ops[ops["op_class"] == "compute"].groupby("rank")["dur"].sum() / steps
    try:
        causes = analysis_of("waits", run, options).metrics.get("causes")
    except Unavailable:
        causes = None
    a, b, how = default_pair(run, F, options, compute, causes)
    # B's record must cover what A's does: a rank whose timeline holds its communication only (its files give no
    # operator times, only the collectives' records) has no computation to set against A's, so it explains no
    # share of the difference
    has_compute = set(int(r) for r in ops.loc[ops["op_class"] == "compute", "rank"].unique())
    b_has_ops = bool((ops["rank"] == b).any()) and (b in has_compute or a not in has_compute)
    without = sorted(set(int(r) for r in F.per_rank["rank"]) - set(int(r) for r in ops["rank"].unique()))
    pr = F.per_rank.set_index("rank")["step_ms"]
    step_a, step_b = float(pr[a]), float(pr[b])
    diff = step_a - step_b
    # synchronous steps end together on every rank: a step difference under SYNC_SHARE of the step explains nothing,
    # the pair differs in where its time goes (more computation on one, more waiting on the other)
    synchronous = abs(diff) < SYNC_SHARE * max(step_a, step_b)
    by_type = _per(ops, ["kind", "type"], steps)
    # by name: read for the pair only, so made of their rows (a pair without rows: of every rank's, whose empty cut
    # keeps the columns' types)
    pair = ops[(ops["rank"] == a) | (ops["rank"] == b)]
    by_name = _per(pair if len(pair) else ops, ["kind", "name"], steps)
    denom = 0.0 if synchronous or not b_has_ops else diff  # B without operations: no share of the difference
    types = pair_table(by_type[by_type["rank"].isin([a, b])], a, b, ["kind", "type"], denom)
    names = pair_table(by_name[by_name["rank"].isin([a, b])], a, b, ["kind", "name"], denom).head(TOP_OPS)
    tables = {"types": types, "top_ops": names}
    metrics = {"rank_a": a, "rank_b": b, "pair_source": how, "step_ms_a": step_a, "step_ms_b": step_b,
               "step_diff_ms": diff, "steps": steps,
               # waits run beside the work they wait for (their time is in other operations too): not summed
               "explained_ratio": float(types.loc[types["kind"] != "wait", "delta_ms"].sum() / diff)
               if diff > 0 and not synchronous and b_has_ops else None,
               "b_has_operations": b_has_ops,
               "synchronous": bool(synchronous),
               "delta_by_kind_ms": {str(k): float(v) for k, v in types.groupby("kind")["delta_ms"].sum().items()},
               "stage_a": run.stage_of(a), "stage_b": run.stage_of(b),
               "ranks_without_operations": without[:1000]}
    try:
        comm = analysis_of("communication", run, options).tables.get("ops")
    except Unavailable:
        comm = None
    if comm is not None and not comm.empty and "op_type" in comm:
        c = comm[comm["rank"].isin([a, b]) & comm["step"].isin(F.steps)]
        cols = [x for x in ("elapse_ms", "transit_ms", "wait_ms") if x in c]
        per = c.groupby(["rank", "op_type"])[cols].sum().div(steps).reset_index()
        per = per.assign(count=c.groupby(["rank", "op_type"]).size().div(steps).to_numpy())
        ca, cb = (per[per["rank"] == r].drop(columns="rank").set_index("op_type") for r in (a, b))
        ct = ca.add_prefix("a_").join(cb.add_prefix("b_"), how="outer").reset_index()
        ct["delta_ms"] = ct.get("a_elapse_ms", 0).fillna(0) - ct.get("b_elapse_ms", 0).fillna(0)
        tables["comm"] = ct.sort_values("delta_ms", key=np.abs, ascending=False).reset_index(drop=True)
    # the any-pair chart: type totals of up to PAIR_RANKS ranks
    all_ranks = sorted(int(r) for r in pr.index)
    if len(all_ranks) <= PAIR_RANKS:
        embed = all_ranks
    else:
        keep = [a, b, int(F.fastest_rank), int(F.median_rank), int(F.slowest_rank)]
        embed = keep_sample(all_ranks, PAIR_RANKS, keep)  # the pair and the fastest / median / slowest always
    multi = set(by_type.groupby("type")["kind"].nunique().loc[lambda s: s > 1].index)
    top = list(dict.fromkeys(_label(multi, t, k) for t, k in zip(types["type"].head(CHART_TYPES),
                                                                 types["kind"].head(CHART_TYPES))))
    return Analysis(metrics=metrics, tables=tables,
                    data={"chart": _chart_rows(by_type, embed, multi, top), "embed": embed, "types_order": top,
                          "pr": pr, "measure": compute if compute.reindex(all_ranks).notna().all() else pr,
                          "stages": {int(r): run.stage_of(int(r)) for r in embed},
                          "by_type": by_type, "multi": multi, "keep": [a, b]})


def finish(run: Run, analysis: Analysis, options=None) -> None:
    """What the comparison reads of the memory section (the pair's memory peaks), added once every other section is
    analysed (the memory section may be analysed in the other process; reportgen/sections/__init__.py)."""
    a, b = analysis.metrics["rank_a"], analysis.metrics["rank_b"]
    try:
        mem = analysis_of("memory", run, options).tables["per_rank"].set_index("rank")
    except Unavailable:
        return
    if a in mem.index and b in mem.index:
        analysis.metrics.update(peak_mb_a=float(mem.at[a, "peak_mb"]), peak_mb_b=float(mem.at[b, "peak_mb"]))


def _label(multi, t, k) -> str:
    return f"{t} ({k})" if t in multi else t  # one type, several kinds: one bar each


def _chart_rows(by_type: pd.DataFrame, embed: list[int], multi, top: list[str]) -> pd.DataFrame:
    rows = by_type[by_type["rank"].isin(embed)]
    rows = rows.assign(type=[_label(multi, t, k) for t, k in zip(rows["type"], rows["kind"])])
    return rows[rows["type"].isin(top)]


def refocus(run: Run, a: Analysis, options=None) -> None:
    """The any-pair chart and its two rank controls offer the ranks the page's findings name too (a straggler
    finding's comparison link sets them; reportgen/focus.py)."""
    from .. import focus
    d = a.data
    if "by_type" not in d:
        return
    all_ranks = sorted(int(r) for r in d["pr"].index)
    want = [r for r in focus.of(a).ranks_in(all_ranks) if r not in set(d["embed"])]
    if not want:
        return
    # the ranks it holds stay (a finding's comparison pair was chosen among them): the named ranks are added
    d["embed"] = sorted(set(d["embed"]) | set(want))
    d["chart"] = _chart_rows(d["by_type"], d["embed"], d["multi"], d["types_order"])
    d["stages"] = {int(r): run.stage_of(int(r)) for r in d["embed"]}


def present(a: Analysis) -> View:
    m, t = a.metrics, a.tables
    A, B = m["rank_a"], m["rank_b"]
    diff = m["step_diff_ms"]
    summary = (f"Rank {A} ({fmt.ms(m['step_ms_a'])} per step) beside rank {B} ({fmt.ms(m['step_ms_b'])}), "
               f"{m['pair_source']}: ")
    if m.get("b_has_operations") is False:
        summary += (f"{fmt.ms(abs(diff))} {'longer' if diff >= 0 else 'shorter'}; rank {B} has no computation "
                    "operator times in the files, so the computation below is rank A's alone.")
    elif m["synchronous"]:
        kinds = m["delta_by_kind_ms"]
        parts = [f"{fmt.ms(abs(v))} {'more' if v > 0 else 'less'} {k}" for k, v in
                 sorted(kinds.items(), key=lambda kv: -abs(kv[1])) if abs(v) >= 0.001 * m["step_ms_b"]][:3]
        summary += (f"their steps end together (synchronous), so the difference is in where the time goes: rank {A} "
                    f"has " + (", ".join(parts) if parts else "the same time in every kind of operation") + ".")
    else:
        summary += (f"{fmt.ms(abs(diff))} {'longer' if diff >= 0 else 'shorter'}"
                    + (f", {fmt.percent(m['explained_ratio'])} of it in the device operations below" if
                       m.get("explained_ratio") is not None else "") + ".")
    share_help = f"delta / the step difference ({fmt.ms(diff)})"
    ab = f"A = rank {A}, B = rank {B}; per step over the steps in scope, the largest differences first."
    types = t["types"].assign(counts=[f"{fmt.number(x)} / {fmt.number(y)}" for x, y in
                                      zip(t["types"]["a_count"], t["types"]["b_count"])])
    tables = [Table.from_frame(
        "compare-types", f"Operation types: rank {A} (A) vs rank {B} (B)", types,
        [Column("type", "Type", "text"), Column("kind", "Kind", "text"),
         Column("a_total_ms", "A time", "ms"), Column("b_total_ms", "B time", "ms"), Column("delta_ms", "Delta", "ms"),
         Column("explained_ratio", "Share", "ratio", help=share_help),
         Column("counts", "Count A / B", "text", help="operations per step")],
        caption=ab + " A count that differs means a different graph or schedule; the same count with more time means "
                     "slower operations (the JSON has the mean time of each)."),
        Table.from_frame(
        "compare-ops", f"Operations by name: A vs B (the {TOP_OPS} largest differences)", t["top_ops"],
        [Column("name", "Operation", "text"), Column("kind", "Kind", "text"),
         Column("a_total_ms", "A time", "ms"), Column("b_total_ms", "B time", "ms"), Column("delta_ms", "Delta", "ms"),
         Column("explained_ratio", "Share", "ratio", help=share_help)], caption=ab)]
    if "comm" in t:
        c = t["comm"]
        cols = [Column("op_type", "Operation", "text")]
        for p in ("a", "b"):
            cols += [Column(f"{p}_{x}", f"{p.upper()} {label}", "ms") for x, label in
                     (("elapse_ms", "time"), ("transit_ms", "transit"), ("wait_ms", "wait")) if f"{p}_{x}" in c]
        cols.append(Column("delta_ms", L.label("delta_ms"), "ms"))
        tables.append(Table.from_frame(
            "compare-comm", "Communication: A vs B", c, cols,
            caption=f"A = rank {A}, B = rank {B}; per step. More wait on the normal rank and less on the abnormal one: "
                    "the abnormal rank arrives late (it is slow elsewhere); more transit: its links are slow."))
    notes = []
    if m.get("b_has_operations") is False:
        notes.append(f"Rank {B} has no computation operator times in the files: its computation columns are 0 and no "
                     "share of the step difference is computed; its step time and communication compare.")
    if m.get("ranks_without_operations"):
        notes.append(f"{count(len(m['ranks_without_operations']), 'rank')} have no operation times in the files "
                     f"({rank_ranges(m['ranks_without_operations'])[:80]}): the default pair is chosen among the others.")
    if m.get("peak_mb_a") is not None:
        notes.append(f"Memory peak: rank {A} {fmt.quantity(m['peak_mb_a'], 'mb')}, rank {B} "
                     f"{fmt.quantity(m['peak_mb_b'], 'mb')} (memory section).")
    figures, controls = [], []
    fig = _chart(a)
    if fig is not None:
        figures.append(fig[0])
        controls += fig[1]
    return View(summary=summary, figures=figures, tables=tables, controls=controls, notes=notes)


def _chart(a: Analysis):
    d = a.data
    rows = d["chart"]
    if rows.empty:
        return None
    A, B = a.metrics["rank_a"], a.metrics["rank_b"]
    unit, factor = fmt.unit_for("ms", rows["total_ms"])
    data = rows[["rank", "type", "kind", "count", "total_ms", "mean_ms"]]
    chart = vl.in_unit(vl.Chart(data), factor, "total_ms", "mean_ms").transform_filter(
        "datum.rank == rank_a || datum.rank == rank_b").transform_calculate(
        side="datum.rank == rank_a ? 'A' : 'B'").mark_bar().encode(
        # no axis title: long type names would run into it (the caption names the axis)
        y=vl.Y("type:N", title=None, sort=d["types_order"], axis=vl.Axis(labelLimit=320)),
        yOffset=vl.field("side:N", scale=vl.Scale(domain=["A", "B"])),
        x=vl.X("total_ms_u:Q", axis=vl.Axis(**vl.axis("Time per step", unit))),
        color=vl.Color("side:N", title="Rank", scale=vl.Scale(domain=["A", "B"], range=[palette.ROLE["comm"],
                                                                                      palette.ROLE["compute"]])),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("type:N", title="Type"),
                 vl.Tooltip("kind:N", title="Kind"), vl.Tooltip("count:Q", title="Count per step",
                                                                  format=fmt.D3_FORMAT),
                 vl.tip("total_ms_u", "Time per step", unit), vl.tip("mean_ms_u", "Mean", unit)]).add_params(
        vl.param(name="rank_a", value=A), vl.param(name="rank_b", value=B))
    chart = vl.fit(chart, {"step": 11})
    opts = [(int(r), f"rank {int(r)} ({fmt.ms(float(d['pr'][r]))})") for r in d["embed"]]
    controls = [Control("rank_a", "Rank A", opts, A), Control("rank_b", "Rank B", opts, B)]
    n = len(d["embed"])
    total = len(d["pr"])
    caption = (f"Time per step (x) of the {len(d['types_order'])} operation types (y) that differ most between the "
               f"default pair, for the two ranks chosen above (A orange, B blue)."
               + (f" The page holds {n} of the {total:,} ranks for this chart (the ranks the findings name, the "
                  "fastest, median and slowest, and an even sample); the tables are for the default pair."
                  if n < total else " The tables are for the default pair."))
    static = (f"Time per step (x) of the {len(d['types_order'])} operation types (y) that differ most between rank "
              f"{A} (A, orange) and rank {B} (B, blue), the default pair; the tables are for the same pair.")
    return Figure("compare-chart", "Two ranks side by side, by operation type", to_spec(chart), caption=caption,
                  static_caption=static, alt="Grouped bars of operation-type time for two ranks"), controls
