"""Communication domains: the run seen one process group at a time, as the current NPU profiling tools organise
their analysis (msprof-analyze's communication groups, MindStudio Insight's communication domains; research notes
on msprof-analyze §3.3-3.4).

Sources and definitions:

* Groups: the strategy section's ``groups`` table (profiler_metadata.json's ``parallel_group_info``, PyTorch
  ``pg_config``, the stage blocks of parallel_strategy_<rank>.json or the cluster analysis files, marked as
  derived). Groups of one rank are counted, not shown (nothing to compare).
* Member shares (every family): the ``step_time`` breakdown averaged over the run's steps in scope
  (reportgen/facts.py): computation only = computing - overlapped, communication overlapped, communication not
  overlapped (exposed), free. They add up to the member's step time (``step_time.step_ms`` = computing +
  comm not overlapped + free); ``unaccounted_ms`` is the rest when a source's step is not that sum.
* Spread of a part within a group = (max - min over the members of the part's mean ms) / mean step of the members,
  the msprof-analyze advisor's slow-rank rule (``thresholds.SLOW_RANK_SPREAD``, 5 %) applied inside the group.
* Verdict (one per group, the first that holds):
  ``computation``: the computation-only spread is above the threshold and at least the free spread — the worst
  member is the one with the most computation (the others wait for it in this group's collectives);
  ``scheduling``: the free spread is above the threshold — the worst member is the one with the most free time
  (its device idles: host-bound, data loading, launch gaps);
  ``communication``: the members' exposed communication is above ``thresholds.COMM_SHARE`` of their step — the
  worst member is the one with the most exposed communication;
  ``balanced`` otherwise.
* The group's own operations (communication section's ``ops``, matched by group key, ranks list or name): per member
  and step the count and time of its operations; per operation type the count and the distribution of their time
  (median, p90, max) and the median transit bandwidth (size / transit time) of operations >= ``thresholds.LINK_MIN_MB``. Links: the
  communication section's ``links`` of the group (slowest link by bandwidth).
* Slow fabric (advisor rule): a group whose median bandwidth for an operation type is more than
  ``thresholds.LINK_BELOW_TYPE_MEAN`` below the median of the groups of the same kind, size and operation type.
* Layout check: a ``tp`` group whose members are on more than one host (tensor parallelism across the network).
"""

from __future__ import annotations

from .. import labels as L

import math

import numpy as np
import pandas as pd

from .. import charts as vl
from .. import facts, fmt, focus
from ..frames import agg
from .. import thresholds as th
from ..charts import to_spec
from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, Column, Control, EvidenceView, Figure, Finding, Table, View, count, rank_ranges
from . import analysis_of, needs_reason

ID = "domains"
TITLE = "Communication domains"

#: the canonical tables this section reads (the runner says ``unavailable: needs ...`` without them); groups come
#: from the strategy section or, failing that, the world
NEEDS = (("step_time", "cluster_overlap"),)

#: member parts, in stacking order: (column, label, palette role)
PARTS = [("compute_only_ms", "Computation only", "compute"),
         ("overlapped_ms", L.label("overlapped_ms"), "comm_overlapped"),
         ("comm_not_overlapped_ms", L.label("comm_not_overlapped_ms"), "comm"),
         ("free_ms", L.label("free_ms"), "free")]
#: the parts when free and overlapped time are not measured (a computation that includes idle time)
_MI_PARTS = [("compute_only_ms", L.COMPUTATION_INCL_FREE, "compute"), PARTS[2]]
VERDICT_ORDER = {"computation": 0, "scheduling": 1, "communication": 2, "balanced": 3}
#: groups the member chart offers (the worst verdicts first); the tables and the JSON have every group
CHART_GROUPS = 64
#: members drawn per group in the chart (the ones the verdict looks at first); the member table has all
CHART_MEMBERS = 64
#: findings of one rule listed one by one; beyond, one finding sums up the rest
MAX_FINDINGS = 8


def _group_key_map(groups: pd.DataFrame) -> dict[str, int]:
    """Every text an op's ``group`` column may hold for a group (its key, its ranks list as Python and as a comma
    list, its name when no other group shares it) -> the group's row position."""
    out: dict[str, int] = {}
    names = groups["name"].astype(str).value_counts()
    for i, (key, name, ranks) in enumerate(zip(groups["group"].astype(str), groups["name"].astype(str),
                                              groups["ranks"])):
        for k in (key, str(list(ranks)), ",".join(map(str, ranks))):
            out.setdefault(k, i)
        if name and names.get(name, 0) == 1:
            out.setdefault(name, i)
    return out


def same_members(groups: pd.DataFrame) -> pd.Series:
    """Per group (row position): the other groups with exactly the same members, named (``group_name_19 'pp'``),
    "" when none. Groups are never merged: a pp group and an embedding group of the same ranks are two process groups
    with two names (seed #89; MindStudio Insight lists both). At most :data:`~reportgen.fmt.LISTED` are named, then
    "and N more"."""
    key = groups["ranks"].map(lambda rs: tuple(sorted(int(r) for r in rs)))
    names = _gnames(groups)
    by: dict[tuple, list[int]] = {}
    for i, k in enumerate(key):
        by.setdefault(k, []).append(i)
    out = []
    for i, k in enumerate(key):
        same = by[k]
        first = [names[j] for j in same[:fmt.LISTED + 1] if j != i][:fmt.LISTED]
        out.append(fmt.listed(first, len(same) - 1))
    return pd.Series(out, dtype=object)


def _derived_groups(run: Run) -> pd.DataFrame | None:
    """Without any group data (the strategy section unavailable): the world."""
    ranks = sorted(int(r) for r in run.ranks)
    if len(ranks) < 2:
        return None
    return pd.DataFrame([{"group": "world", "name": "world", "kind": "world", "ranks": ranks}])


def member_parts(run: Run, options) -> tuple[pd.DataFrame | None, bool]:
    """Per rank: mean step and its parts (ms) over the steps in scope, from the overlap section's per-rank table
    (the facts' steps), and ``unaccounted_ms``; second value: whether free and overlapped time are measured
    (the profiler's own cluster analysis, table ``cluster_overlap``, has computation including idle time, and no
    overlap)."""
    try:
        per = analysis_of("overlap", run, options).tables["per_rank"].copy()
    except Unavailable:
        return None, False
    full = all(c in per and per[c].notna().any() for c in ("computing_ms", "free_ms"))
    if not full:
        if "computation_incl_free_ms" not in per:
            return None, False
        per["computing_ms"] = per["computation_incl_free_ms"]
        per["free_ms"] = math.nan
        per["overlapped_ms"] = math.nan
    per = per.dropna(subset=["step_ms", "computing_ms", "comm_not_overlapped_ms"])
    if per.empty:
        return None, False
    if full:
        per["overlapped_ms"] = per["overlapped_ms"].fillna(0.0).clip(lower=0.0) if "overlapped_ms" in per else 0.0
    per["compute_only_ms"] = (per["computing_ms"] - per["overlapped_ms"].fillna(0.0)).clip(lower=0.0)
    total = per[[c for c, _, _ in PARTS]].sum(axis=1, min_count=1)
    rest = per["step_ms"] - total
    # float noise of a sum (1e-14 ms) is not time: below a nanosecond per step it is 0
    per["unaccounted_ms"] = rest.where(rest.abs() >= 1e-6, 0.0)
    for c, _, _ in PARTS:
        per[c.replace("_ms", "_share")] = facts.share(per[c], per["step_ms"], f"member {c.replace('_ms', '')} share",
                                                      run)
    keep = ["rank", "step_ms", "computing_ms", "unaccounted_ms"] + [c for c, _, _ in PARTS] + \
        [c.replace("_ms", "_share") for c, _, _ in PARTS]
    return per[keep].reset_index(drop=True), full


def _argmax_rank(df: pd.DataFrame, by: list[str], col: str) -> pd.Series:
    """Per ``by`` group of ``df``: the rank of the row with the largest ``col`` (ties: the smallest rank)."""
    d = df.sort_values([col, "rank"], ascending=[False, True], kind="stable")
    return d.drop_duplicates(by).set_index(by)["rank"]


def verdicts(mem: pd.DataFrame, links: pd.DataFrame | None, own: pd.Series | None = None) -> pd.DataFrame:
    """Per group (``gi``) of ``mem`` (one row per group and member: parts, ``stage``), the verdict of the module
    docstring, vectorised over the groups. Members of different pipeline stages run different layers, so the
    computation and free spreads are taken within each stage (the largest); the difference between the stages'
    mean computation is ``stage_computation_spread``. ``links``: per group its slowest link (``gi``, ``src``,
    ``dst``, ``slowest_gbps``, ``median_gbps``). ``own``: per group the share of the step its own operations take
    without waiting (transit; else their time), when the group's operations are known: the exposed-communication
    verdict needs them above the threshold too (members that wait in another group's collectives, for a straggler
    there, are not this group's communication problem)."""
    step = mem.groupby("gi")["step_ms"].mean()
    m = mem.assign(stage_key=mem["stage"].fillna(-1))
    staged = mem["stage"].notna().groupby(mem["gi"]).all() & (mem.groupby("gi")["stage"].nunique() > 1)
    # within a stage when the group spans stages, else over the group (stage_key is one value then)
    by_stage = m.groupby(["gi", "stage_key"])
    cols = ["computing_ms", "free_ms", "comm_not_overlapped_ms", "step_ms"]
    rng = (by_stage[cols].max() - by_stage[cols].min()).div(step, level="gi", axis=0)
    spread = rng.groupby(level="gi").max()
    stage_mean = by_stage["computing_ms"].mean()
    stage_spread = ((stage_mean.groupby(level="gi").max() - stage_mean.groupby(level="gi").min()) / step) \
        .where(staged, 0.0).fillna(0.0)
    exposed = mem.groupby("gi")["comm_not_overlapped_ms"].mean() / step
    comp = spread["computing_ms"].fillna(0.0)
    free = spread["free_ms"].fillna(0.0)  # not measured (computation incl. idle): no scheduling verdict
    out = pd.DataFrame({"step_ms_mean": step, "computation_spread_ratio": comp,
                        "free_spread_ratio": spread["free_ms"],  # NaN where free time is not measured
                        "stage_computation_spread_ratio": stage_spread,
                        "exposed_spread_ratio": spread["comm_not_overlapped_ms"],
                        "step_spread_ratio": spread["step_ms"], "exposed_comm_share_ratio": exposed,
                        "stages": mem.groupby("gi")["stage"].nunique()})
    slow_link = pd.Series(False, index=out.index)
    if links is not None and not links.empty:
        lk = links.set_index("gi")
        below = lk["slowest_gbps"] < (1 - th.LINK_BELOW_TYPE_MEAN) * lk["median_gbps"]
        slow_link = (below & (lk["median_gbps"] > 0)).reindex(out.index, fill_value=False)
    t = th.SLOW_RANK_SPREAD
    own_share = own.reindex(out.index) if own is not None else pd.Series(np.nan, index=out.index)
    out["own_comm_share_ratio"] = own_share
    comm_bound = (exposed > th.COMM_SHARE) & (own_share.isna() | (own_share > th.COMM_SHARE))
    cases = [(comp > t) & (comp >= free), free > t, slow_link, stage_spread > t, comm_bound]
    kinds = [("computation", "straggler", "computing_ms"), ("scheduling", "idle member", "free_ms"),
             ("communication", "slow link", ""), ("computation", "stage imbalance", "computing_ms"),
             ("communication", "exposed communication", "comm_not_overlapped_ms")]
    choice = np.select([c.to_numpy() for c in cases], list(range(len(kinds))), default=len(kinds))
    table = kinds + [("balanced", "", "")]
    out["verdict"] = [table[i][0] for i in choice]
    out["verdict_detail"] = [table[i][1] for i in choice]
    out["verdict_metric"] = [table[i][2] for i in choice]
    # the worst member: within the stage whose spread decided (straggler, idle member), else over the group
    worst = pd.Series(np.nan, index=out.index, dtype="float64")
    for detail, col in (("straggler", "computing_ms"), ("idle member", "free_ms")):
        gis = out.index[out["verdict_detail"] == detail]
        if len(gis):
            r = rng.loc[rng.index.get_level_values("gi").isin(gis), col]
            pick = r.groupby(level="gi").idxmax()  # (gi, stage_key) of the widest stage
            sub = m.set_index(["gi", "stage_key"]).loc[list(pick)].reset_index()
            worst.loc[gis] = _argmax_rank(sub, ["gi"], col).reindex(gis).to_numpy()
    for detail, col in (("stage imbalance", "computing_ms"), ("exposed communication", "comm_not_overlapped_ms")):
        gis = out.index[out["verdict_detail"] == detail]
        if len(gis):
            worst.loc[gis] = _argmax_rank(mem[mem["gi"].isin(gis)], ["gi"], col).reindex(gis).to_numpy()
    gis = out.index[out["verdict_detail"] == "slow link"]
    if len(gis):
        worst.loc[gis] = links.set_index("gi")["src"].reindex(gis).to_numpy()
    out["worst_rank"] = worst.astype("Int64")
    # the number behind the verdict, in one column
    measure = pd.Series(np.nan, index=out.index)
    for detail, col in (("straggler", "computation_spread_ratio"), ("idle member", "free_spread_ratio"),
                        ("stage imbalance", "stage_computation_spread_ratio"),
                        ("exposed communication", "exposed_comm_share_ratio")):
        sel = out["verdict_detail"] == detail
        measure[sel] = out.loc[sel, col]
    if links is not None and not links.empty:
        lk = links.set_index("gi")
        below = (1 - lk["slowest_gbps"] / lk["median_gbps"]).reindex(out.index)
        sel = out["verdict_detail"] == "slow link"
        measure[sel] = below[sel]
    out["verdict_value_ratio"] = measure
    return out


def _group_ops(ops: pd.DataFrame | None, keymap: dict[str, int], steps: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per (group row, rank): ops and time per step; per (group row, op_type): count and time distribution)."""
    if ops is None or ops.empty or "group" not in ops:
        return pd.DataFrame(columns=["gi", "rank", "group_ops", "group_op_ms"]), pd.DataFrame()
    gi = ops["group"].astype(str).map(keymap)
    o = ops.assign(gi=gi)[gi.notna()]
    if o.empty:
        return pd.DataFrame(columns=["gi", "rank", "group_ops", "group_op_ms"]), pd.DataFrame()
    o = o.assign(gi=o["gi"].astype(int))
    per = agg(o.groupby(["gi", "rank"]), group_ops=("elapse_ms", "size"),
              group_op_ms=("elapse_ms", "sum")).reset_index()
    per["group_ops"] = per["group_ops"] / steps
    per["group_op_ms"] = per["group_op_ms"] / steps
    if "transit_ms" in o and (o["transit_ms"] > 0).any():  # the group's own work, without waiting (0 = not measured)
        tr = o.groupby(["gi", "rank"])["transit_ms"].sum(min_count=1) / steps
        per["group_transit_ms"] = tr.reindex(pd.MultiIndex.from_frame(per[["gi", "rank"]])).to_numpy()
    # bandwidth on the transit time (the op's time without waiting for its peers: an op that waited for a straggler
    # is not slow fabric), operations of at least LINK_MIN_MB only
    if "size_mb" in o and "transit_ms" in o:
        ok = (o["size_mb"] >= th.LINK_MIN_MB) & (o["transit_ms"] > 0)
        o = o.assign(bw=(o["size_mb"] / o["transit_ms"]).where(ok))
    else:
        o = o.assign(bw=math.nan)
    g = o.groupby(["gi", "op_type"])
    dist = g["elapse_ms"].agg(ops="size", total_ms="sum", median_ms="median",
                              p90_ms=lambda s: float(np.percentile(s, 90)), max_ms="max").reset_index()
    dist["median_bandwidth_gbps"] = g["bw"].median().to_numpy()
    if "wait_ms" in o:
        dist["wait_ms"] = g["wait_ms"].sum().to_numpy()
    return per, dist


def _slow_fabric(domains: pd.DataFrame, dist: pd.DataFrame) -> list[dict]:
    """Groups whose median bandwidth for an op type is > LINK_BELOW_TYPE_MEAN below the same kind/size/type median."""
    if dist.empty or dist["median_bandwidth_gbps"].isna().all():
        return []
    d = dist.dropna(subset=["median_bandwidth_gbps"]).merge(domains[["gi", "kind", "size"]], on="gi")
    by = d.groupby(["kind", "size", "op_type"], sort=True)["median_bandwidth_gbps"]
    d = d.assign(_ref=by.transform("median"), _n=by.transform("size"))
    # a median of two says nothing about which one is slow
    slow = d[(d["_n"] >= 3) & (d["_ref"] > 0)
             & (d["median_bandwidth_gbps"] < (1 - th.LINK_BELOW_TYPE_MEAN) * d["_ref"])]
    slow = slow.sort_values(["kind", "size", "op_type"], kind="stable")
    return [{"gi": int(gi), "op_type": str(op), "bandwidth_gbps": float(bw), "reference_gbps": float(ref),
             "groups_compared": int(n)}
            for gi, op, bw, ref, n in zip(slow["gi"], slow["op_type"], slow["median_bandwidth_gbps"], slow["_ref"],
                                          slow["_n"])]


def analyze(run: Run, options=None) -> Analysis:
    try:
        strategy = analysis_of("strategy", run, options)
        groups = strategy.tables["groups"].reset_index(drop=True)
        source = strategy.metrics.get("groups_source", "groups table")
    except Unavailable as exc:
        groups = _derived_groups(run)
        if groups is None:
            raise Unavailable("No process groups in this run, so no communication domains. " + exc.reason) from None
        source = "derived: the world (the files name no process groups)"
    F = facts.of(run, options)
    parts, full = member_parts(run, options)
    if parts is None:
        raise Unavailable("No per-rank breakdown of the step into computation, communication and free time: "
                          + needs_reason(None, ["step_time or cluster_overlap"], options) + ".")
    present_ranks = set(parts["rank"])
    sizes = groups["ranks"].map(len)
    covered = groups["ranks"].map(lambda rs: sum(r in present_ranks for r in rs))
    keep = (sizes >= 2) & (covered >= 2)
    try:
        comm = analysis_of("communication", run, options)
    except Unavailable:
        comm = None
    keymap = _group_key_map(groups)
    steps = len(F.steps) if F is not None else max(1, len(run.steps))
    ops = comm.tables.get("ops") if comm is not None else None
    if ops is not None and F is not None and "step" in ops:
        ops = ops[ops["step"].isin(F.steps)]
    op_per, dist = _group_ops(ops, keymap, max(1, steps))
    links = comm.tables.get("links") if comm is not None else None
    host_of = {int(r): run.host_of(int(r)) for r in present_ranks}
    stage_of = {int(r): run.stage_of(int(r)) for r in present_ranks}
    kept = np.flatnonzero(keep.to_numpy())
    # one row per (group, member with data)
    lens = np.array([len(r) for r in groups["ranks"].iloc[kept]], dtype=np.int64)
    mem = pd.DataFrame({"gi": np.repeat(kept, lens),
                        "rank": np.concatenate([np.asarray(r, dtype=np.int64) for r in groups["ranks"].iloc[kept]])
                        if len(kept) else np.zeros(0, np.int64)})
    mem = mem[mem["rank"].isin(present_ranks)].merge(parts, on="rank", how="left")
    if mem.empty:
        raise Unavailable(
            "No process group of two or more ranks has step-time data in this run (" +
            count(int((sizes < 2).sum()), "group") + " of one rank). A domain needs at least two members.")
    mem["stage"] = mem["rank"].map(stage_of)
    lk = None
    if links is not None and "group" in links and not links.empty:
        lk = links.assign(gi=links["group"].astype(str).map(keymap))
        lk = lk[lk["gi"].isin(kept) & (lk["src_rank"] != lk["dst_rank"]) & (lk["size_mb"] >= th.LINK_MIN_MB)]
        if not lk.empty:
            lk = lk.assign(gi=lk["gi"].astype(int))
            med = lk.groupby("gi")["bandwidth_gbps"].median()
            n = lk.groupby("gi").size()
            sl = lk.sort_values(["bandwidth_gbps", "src_rank", "dst_rank"]).drop_duplicates("gi").set_index("gi")
            lk = pd.DataFrame({"gi": sl.index, "src": sl["src_rank"].astype(int).to_numpy(),
                               "dst": sl["dst_rank"].astype(int).to_numpy(),
                               "slowest_gbps": sl["bandwidth_gbps"].to_numpy(),
                               "median_gbps": med.reindex(sl.index).to_numpy(), "links": n.reindex(sl.index).to_numpy()})
        else:
            lk = None
    own = None
    if not op_per.empty:
        col = "group_transit_ms" if "group_transit_ms" in op_per and op_per["group_transit_ms"].notna().any() \
            else "group_op_ms"
        own_ms = op_per.groupby("gi")[col].mean()
        own = own_ms / mem.groupby("gi")["step_ms"].mean().reindex(own_ms.index)
    v = verdicts(mem, lk, own)
    g = groups.iloc[v.index]
    hosts = mem.assign(host=mem["rank"].map(host_of)).dropna(subset=["host"]).groupby("gi")["host"].nunique()
    domains = pd.DataFrame({"gi": v.index.astype(int), "group": g["group"].astype(str).to_numpy(),
                            "name": g["name"].astype(str).to_numpy(), "kind": g["kind"].astype(str).to_numpy(),
                            "size": g["ranks"].map(len).to_numpy(),
                            "members_with_data": mem.groupby("gi").size().reindex(v.index).to_numpy(),
                            "hosts": hosts.reindex(v.index, fill_value=0).to_numpy()})
    domains["same_members"] = same_members(groups).reindex(v.index).to_numpy()
    v = v.reset_index(drop=True)
    domains = pd.concat([domains, v[["verdict", "verdict_detail", "worst_rank", "verdict_value_ratio",
                                     "verdict_metric", "step_ms_mean", "stages", "computation_spread_ratio",
                                     "free_spread_ratio", "stage_computation_spread_ratio", "exposed_spread_ratio",
                                     "step_spread_ratio", "exposed_comm_share_ratio",
                                     "own_comm_share_ratio"]]], axis=1)
    if lk is not None:
        li = lk.set_index("gi")
        domains["links"] = li["links"].reindex(domains["gi"]).to_numpy()
        domains["slowest_link"] = [f"{int(a)}-{int(b)}" if pd.notna(a) else None for a, b in
                                   zip(li["src"].reindex(domains["gi"]), li["dst"].reindex(domains["gi"]))]
        domains["slowest_link_gbps"] = li["slowest_gbps"].reindex(domains["gi"]).to_numpy()
        domains["median_link_gbps"] = li["median_gbps"].reindex(domains["gi"]).to_numpy()
    mem = mem.assign(group=domains.set_index("gi")["group"].reindex(mem["gi"]).to_numpy(),
                     kind=domains.set_index("gi")["kind"].reindex(mem["gi"]).to_numpy())
    if not op_per.empty:
        mem = mem.merge(op_per, on=["gi", "rank"], how="left")
        tot = op_per.groupby("gi", as_index=False)[["group_ops", "group_op_ms"]].mean()
        domains = domains.merge(tot.rename(columns={"group_ops": "group_ops_per_member",
                                                    "group_op_ms": "group_op_ms_per_member"}), on="gi", how="left")
    domains["order"] = domains["verdict"].map(VERDICT_ORDER)
    domains = domains.sort_values(["order", "step_spread_ratio", "gi"], ascending=[True, False, True]) \
        .drop(columns="order").reset_index(drop=True)
    fabric = _slow_fabric(domains, dist)
    spanning = [int(x) for x in domains.loc[(domains["kind"] == "tp") & (domains["hosts"] > 1), "gi"]]
    counts = domains["verdict"].value_counts()
    metrics = {"groups": int(len(domains)), "groups_single_rank": int((sizes < 2).sum()),
               "groups_without_data": int(((sizes >= 2) & (covered < 2)).sum()),
               "verdicts": {k: int(counts.get(k, 0)) for k in VERDICT_ORDER},
               "steps": steps, "threshold_spread_ratio": th.SLOW_RANK_SPREAD,
               "threshold_comm_share_ratio": th.COMM_SHARE, "threshold_fabric_below_ratio": th.LINK_BELOW_TYPE_MEAN,
               "groups_source": source,
               "group_ops_matched": bool(not op_per.empty),
               "parts_measured": [label for _, label, _ in (PARTS if full else _MI_PARTS)]}
    # the JSON keeps each rank's parts once (``parts``) and per group only its members and what is the group's own
    # (its operations); the page's member table joins them again (members(a))
    member_cols = ["gi", "group", "rank"] + [c for c in ("group_ops", "group_op_ms", "group_transit_ms") if c in mem]
    part_cols = [c for c in parts.columns]
    tables = {"domains": domains, "parts": parts.assign(stage=parts["rank"].map(stage_of))[part_cols + ["stage"]],
              "members": mem[member_cols]}
    if not dist.empty:
        tables["op_types"] = dist.merge(domains[["gi", "group", "name", "kind"]], on="gi")
    a = Analysis(metrics=metrics, tables=tables, data={"slow_fabric": fabric, "tp_spanning_hosts": spanning,
                                                       "hosts": host_of, "full": full})
    a.findings = _findings(a)
    return a


# --------------------------------------------------------------------------- present

def _gname(r) -> str:
    """``group_name_19 'pp'``, ``2 'mesh_pp'``: the key and, when it says more, the framework's name."""
    name = str(r["name"]) if r["name"] and r["name"] != r["group"] else ""
    return f"{r['group']}" + (f" '{name}'" if name else "")


def _gnames(d: pd.DataFrame) -> list[str]:
    """:func:`_gname` of every row of ``d`` (without a Series per row: a run can name 10^4 groups)."""
    return [f"{g}" + (f" '{n}'" if n and n != g else "") for g, n in zip(d["group"], d["name"])]


def _label(r) -> str:
    name = r["name"] if r["name"] and r["name"] != r["group"] else ""
    return f"{r['group']}" + (f" ({name})" if name else "") + f" · {r['kind']} · {r['size']} ranks"


def _labels(d: pd.DataFrame) -> list[str]:
    """:func:`_label` of every row of ``d``."""
    return [f"{g}" + (f" ({n})" if n and n != g else "") + f" · {k} · {z} ranks"
            for g, n, k, z in zip(d["group"], d["name"], d["kind"], d["size"])]


def present(a: Analysis) -> View:
    m, t = a.metrics, a.tables
    d = t["domains"]
    details = d["verdict_detail"].replace("", "balanced").value_counts()
    words = [("straggler", "with a computation straggler"), ("idle member", "with an idle member (scheduling)"),
             ("slow link", "with a slow link"), ("stage imbalance", "whose pipeline stages compute unevenly"),
             ("exposed communication", "dominated by exposed communication"), ("balanced", "balanced")]
    summary = (f"{count(m['groups'], 'process group')} of two or more ranks: "
               + ", ".join(f"{int(details[k])} {w}" for k, w in words if details.get(k, 0))
               + (f"; {count(m['groups_single_rank'], 'group')} of one rank not shown" if m["groups_single_rank"] else "")
               + ".")
    d = d.assign(label=_labels(d),
                 worst=d["worst_rank"].map(lambda x: "" if pd.isna(x) else int(x)))
    cols = [L.group_column(d), Column("name", "Name", "text"), Column("kind", "Kind", "text"),
            Column("size", "Size", "int"),
            Column("same_members", "Same members as", "text",
                   help="other process groups of exactly these ranks (each is its own group, with its own name)"),
            Column("verdict", "Verdict", "text"),
            Column("verdict_detail", "Detail", "text"), Column("worst_rank", "Worst member", "rank"),
            Column("verdict_value_ratio", "Measure", "ratio",
                   help="the number behind the verdict: the computation, free or stage spread / the mean step, the "
                        "slowest link's shortfall from the median link, or the exposed communication share"),
            Column("exposed_comm_share_ratio", "Exposed communication", "ratio",
                   help="mean not-overlapped communication of the members (all their groups) / their mean step"),
            Column("own_comm_share_ratio", "Own communication", "ratio",
                   help="the group's own operations without waiting (transit) per member and step / the step")]
    if "group_op_ms_per_member" in d:
        cols += [Column("group_ops_per_member", "Group ops per step", "float"),
                 Column("group_op_ms_per_member", "Group op time per step", "ms")]
    if "slowest_link_gbps" in d:
        cols += [Column("slowest_link", "Slowest link", "text"),
                 Column("slowest_link_gbps", "Slowest link bandwidth", "gbps"),
                 Column("median_link_gbps", "Median link bandwidth", "gbps")]
    tables = [Table.from_frame(
        "domains-groups", "Process groups (communication domains)", d, cols,
        caption="One row per process group of two or more ranks, the worst verdicts first. Spreads are "
                f"(max - min) over the members / their mean step; a spread above {th.SLOW_RANK_SPREAD:.0%} names a "
                f"computation or scheduling problem; exposed communication above {th.COMM_SHARE:.0%} a communication "
                f"one when the group's own operations (without waiting) also take more than {th.COMM_SHARE:.0%} of "
                "the step. Measure = the number behind the verdict.")]
    mem = members(a)
    parts = _parts(a)
    mcols = [L.group_column(mem), Column("kind", "Kind", "text"), Column("rank", "Rank", "rank"),
             Column("step_ms", L.label("step_ms"), "ms")] + [Column(c, label, "ms") for c, label, _ in parts] + \
            [Column(c.replace("_ms", "_share"), f"{label} share", "ratio") for c, label, _ in parts]
    if "group_op_ms" in mem:
        mcols += [Column("group_ops", "Group ops per step", "float"),
                  Column("group_op_ms", "Group op time per step", "ms")]
    tables.append(Table.from_frame(
        "domains-member-parts", "Members of each group: where the step goes", mem, mcols,
        caption="Means over the steps in scope. The parts add up to the step." + (
            "" if a.data["full"] else " The run's per-step breakdown (a cluster analysis) counts idle time as "
            "computation and does not measure overlap: free time and overlapped communication are not in the data, "
            "so no scheduling verdict is possible.")))
    if "op_types" in t:
        ot = t["op_types"]
        tables.append(Table.from_frame(
            "domains-ops", "Each group's operations by type", ot,
            [L.group_column(ot), Column("kind", "Kind", "text"), Column("op_type", "Operation", "text"),
             Column("ops", "Count", "int"), Column("total_ms", "Total", "ms"), Column("median_ms", "Median", "ms"),
             Column("p90_ms", "p90", "ms"), Column("max_ms", "Max", "ms"),
             Column("median_bandwidth_gbps", "Median transit bandwidth", "gbps")],
            caption=f"Operations of the steps in scope, every member; bandwidth of operations of at least "
                    f"{th.LINK_MIN_MB:g} MB."))
    figures, controls = [], []
    fo = focus.of(a)
    own = [f.view.signals.get("domain") for f in a.findings if f.view is not None and "domain" in f.view.signals]
    fig = _members_figure(d, mem, parts, keep_groups=[*own, *fo.values("domain")],
                          keep_ranks=[*vl.named_ranks(a)])
    if fig is not None:
        figures.append(fig[0])
        controls.append(fig[1])
    return View(summary=summary, figures=figures, tables=tables, controls=controls)


def members(a: Analysis) -> pd.DataFrame:
    """One row per group and member with the member's parts (the ``members`` table joined to ``parts``)."""
    t = a.tables
    out = t["members"].merge(t["parts"], on="rank", how="left")
    return out.assign(kind=t["domains"].set_index("gi")["kind"].reindex(out["gi"]).to_numpy())


def _parts(a: Analysis) -> list[tuple[str, str, str]]:
    """The parts this run measures (module docstring); without free time, computation includes it."""
    return PARTS if a.data["full"] else _MI_PARTS


def _members_figure(d: pd.DataFrame, mem: pd.DataFrame, parts: list, keep_groups=(), keep_ranks=()):
    """The member chart and its control. The control's values are the groups' own ids (``group``, the id the
    findings cite), so a finding's link sets it by value. It offers the :data:`CHART_GROUPS` groups with the worst
    verdicts and every group of ``keep_groups`` (those findings link to); each group draws at most
    :data:`CHART_MEMBERS` members, those with the most time in the verdict's part and the ``keep_ranks`` (ranks
    findings name)."""
    keep_groups = {str(g) for g in keep_groups}
    shown = d[(np.arange(len(d)) < CHART_GROUPS) | d["group"].astype(str).isin(keep_groups).to_numpy()]
    keep_ranks = {int(r) for r in keep_ranks}
    rows = []
    for _, g in shown.iterrows():
        mm = mem[mem["gi"] == g["gi"]]
        if len(mm) > CHART_MEMBERS:
            col = g["verdict_metric"] or "comm_not_overlapped_ms"
            named = mm["rank"].isin(keep_ranks | ({int(g["worst_rank"])} if pd.notna(g["worst_rank"]) else set()))
            top = mm[~named].sort_values([col, "rank"], ascending=[False, True]).head(
                max(0, CHART_MEMBERS - int(named.sum())))
            mm = pd.concat([mm[named], top]).sort_values("rank")
        for order, (c, label, _) in enumerate(parts):
            rows.append(mm[["gi", "rank", "step_ms"]].assign(ms=mm[c], phase=label, order=order,
                                                            group=str(g["group"])))
    if not rows:
        return None
    long = pd.concat(rows, ignore_index=True)
    worst = {int(g): (int(w) if pd.notna(w) else -1) for g, w in zip(d["gi"], d["worst_rank"])}
    long["worst"] = long["rank"].to_numpy() == long["gi"].map(worst).to_numpy()
    unit, factor = fmt.unit_for("ms", long["step_ms"])
    first = str(shown.iloc[0]["group"])
    base = vl.Chart(long).transform_filter("datum.group == domain")
    chart = vl.stacked_parts(base, [(label, role) for _, label, role in parts],
                             vl.X("rank:O", title="Member (rank)", axis=vl.Axis(labelAngle=0)), unit, factor,
                             [vl.Tooltip("rank:O", title="Rank")], height=240).add_params(
        vl.param(name="domain", value=first))
    control = Control("domain", "Group", [(str(g), f"{lab} — {v}") for g, lab, v in
                                          zip(shown["group"], _labels(shown), shown["verdict"])], first)
    more = len(d) - len(shown)
    caption = ("The members of the chosen group, their step split into "
               + ", ".join(label.lower() for _, label, _ in parts) + " (means over the steps in scope)."
               + (f" The chart offers the {len(shown)} groups with the worst verdicts and those the findings name; "
                  f"the tables below have all "
                  f"{len(d):,} (filter them by group), as far as the page has room." if more > 0 else "")
               + (f" Groups of more than {CHART_MEMBERS} ranks draw the {CHART_MEMBERS} members with the most time "
                  f"in the verdict's part, the worst member and the ranks the findings name first." if (mem.groupby('gi').size() > CHART_MEMBERS).any() else ""))
    return (Figure("domains-members", "Where each member's step goes, per process group", to_spec(chart),
                   caption=caption, alt="Stacked bars per member of a process group"), control)


def _view(group) -> EvidenceView:
    """The member chart set to the finding's group (its id, the control's value)."""
    return EvidenceView("domains-members", {"domain": str(group)})


def _group_share(r) -> float | None:
    """The group's own operations per member and step / the members' step (None when its ops are not known)."""
    v = r.get("group_op_ms_per_member")
    return float(v) / float(r["step_ms_mean"]) if v is not None and pd.notna(v) and r["step_ms_mean"] > 0 else None


def _findings(a: Analysis) -> list[Finding]:
    """Findings from the groups the data names (not the world group, not groups derived from stages: the overlap
    section's rules already judge all ranks). Time at stake (``share_of_step_ratio``): a straggler or idle member:
    its spread; a slow link: the group's op time x (1 - slowest / median link); exposed communication: the smaller
    of the exposed share and the group's op share; slow fabric: the op type's time x (1 - bandwidth / reference)."""
    d, data = a.tables["domains"], a.data
    out: list[Finding] = []
    named = d if "derived" not in str(a.metrics["groups_source"]) else d.iloc[0:0]
    named = named[named["kind"] != "world"]
    bad = named[named["verdict_detail"].isin(["straggler", "idle member"])]
    by_rank = list(bad.groupby("worst_rank", sort=False))
    for rank, g in by_rank[:MAX_FINDINGS]:
        r = g.iloc[0]
        kind = r["verdict"]
        spread = float(r["computation_spread_ratio"] if kind == "computation" else r["free_spread_ratio"])
        names = ", ".join(f"{_gname(x)} ({x['kind']})" for _, x in g.head(4).iterrows()) + \
            (f" and {len(g) - 4} more" if len(g) > 4 else "")
        what = "computes longer" if kind == "computation" else "idles longer (free time)"
        out.append(Finding(
            "group_slow_member", "medium", ID,
            f"Rank {int(rank)} {what} than the other members of {count(len(g), 'process group')} ({names}): the "
            f"{'computation' if kind == 'computation' else 'free-time'} spread in its group is "
            f"{fmt.percent(spread)} of the step ({kind} problem).",
            ranks=[int(rank)], evidence={"metric": "computation_spread_ratio" if kind == "computation"
                                         else "free_spread_ratio", "value": spread,
                                         "reference": th.SLOW_RANK_SPREAD, "group": str(r["group"]),
                                         "share_of_step_ratio": spread},
            suggestion=("Compare this rank with a normal member of its group (its operators, its device and host): "
                        "the others wait for it in the group's collectives." if kind == "computation" else
                        "Find what keeps this rank's device idle: data loading, host-side work between kernels, "
                        "synchronisation or launch gaps (the trajectory and execution sections)."),
            view=_view(r["group"]), share_of_step=spread))
    if len(by_rank) > MAX_FINDINGS:
        rest = pd.concat([g for _, g in by_rank[MAX_FINDINGS:]])
        spread = float(rest[["computation_spread_ratio", "free_spread_ratio"]].max(axis=1).max())
        out.append(Finding(
            "group_slow_member", "medium", ID,
            f"{count(rest['worst_rank'].nunique(), 'more rank')} are the worst member of "
            f"{count(len(rest), 'more group')} (largest spread {fmt.percent(spread)} of the step); the table "
            "'Process groups' lists them.",
            ranks=[int(x) for x in rest["worst_rank"].unique()[:1000]],
            evidence={"metric": "groups", "value": int(len(rest)), "reference": 0, "share_of_step_ratio": spread},
            suggestion="Filter the table 'Process groups' on the verdict to see each group and its worst member.",
            view=_view(rest.iloc[0]["group"]), share_of_step=spread))
    for _, r in named[named["verdict_detail"] == "slow link"].head(MAX_FINDINGS).iterrows():
        src, dst = (int(x) for x in str(r["slowest_link"]).split("-"))
        below = 1 - r["slowest_link_gbps"] / r["median_link_gbps"]
        gs = _group_share(r)
        share = gs * below if gs is not None else None
        out.append(Finding(
            "group_slow_link", "medium", ID,
            f"Link {src} → {dst} of group {_gname(r)} ({r['kind']}) carries {fmt.quantity(r['slowest_link_gbps'], 'gbps')}, "
            f"{fmt.percent(below)} below the median of the group's links ({fmt.quantity(r['median_link_gbps'], 'gbps')}); "
            "the group's operations wait for it.",
            ranks=[src, dst], links=[[src, dst]],
            evidence={"metric": "slowest_link_gbps", "value": float(r["slowest_link_gbps"]),
                      "reference": float(r["median_link_gbps"]), "group": str(r["group"]),
                      "share_of_step_ratio": share},
            suggestion="Check this link's path (NIC, cable, switch port, HCCS lane) and the link table of the "
                       "communication section; the group's other links show what it should reach.",
            view=_view(r["group"]), share_of_step=share))
    comm = named[named["verdict_detail"] == "exposed communication"]
    if not comm.empty:
        worst = comm.sort_values("exposed_comm_share_ratio", ascending=False).iloc[0]
        gs = _group_share(worst)
        share = float(worst["exposed_comm_share_ratio"]) if gs is None else min(gs, float(worst["exposed_comm_share_ratio"]))
        out.append(Finding(
            "group_exposed_comm", "low", ID,
            f"{count(len(comm), 'process group')} {'is' if len(comm) == 1 else 'are'} balanced but "
            f"communication-bound: in {_gname(worst)} ({worst['kind']}) the members spend "
            f"{fmt.percent(worst['exposed_comm_share_ratio'])} of their step in exposed communication (all their "
            f"groups' operations)" + (f"; this group's own operations take {fmt.ms(worst['group_op_ms_per_member'])} "
                                      f"per member and step." if gs is not None else "."),
            ranks=[int(worst["worst_rank"])] if pd.notna(worst["worst_rank"]) else [],
            evidence={"metric": "exposed_comm_share_ratio", "value": float(worst["exposed_comm_share_ratio"]),
                      "reference": th.COMM_SHARE, "group": str(worst["group"]), "share_of_step_ratio": share},
            suggestion="Overlap this group's communication with computation (bucketing, prefetching, a different "
                       "schedule) or shrink it (fewer or larger messages, a smaller group).",
            view=_view(worst["group"]), share_of_step=share))
    by_gi = d.set_index(d["gi"].astype(int), drop=False)
    ops = a.tables.get("op_types")
    for f in data["slow_fabric"][:MAX_FINDINGS]:
        r = by_gi.loc[f["gi"]]
        below = 1 - f["bandwidth_gbps"] / f["reference_gbps"]
        share = None
        if ops is not None and r["step_ms_mean"] > 0:
            t = ops[(ops["gi"] == f["gi"]) & (ops["op_type"] == f["op_type"])]["total_ms"].sum()
            share = float(t) / max(1, int(r["members_with_data"])) / max(1, a.metrics["steps"]) / \
                float(r["step_ms_mean"]) * below
        out.append(Finding(
            "group_slow_fabric", "medium", ID,
            f"{f['op_type']} in group {_gname(r)} ({r['kind']}, {r['size']} ranks) reaches "
            f"{fmt.quantity(f['bandwidth_gbps'], 'gbps')}, {fmt.percent(below)} below the median of the {f['groups_compared']} "
            f"{r['kind']} groups of that size ({fmt.quantity(f['reference_gbps'], 'gbps')}), on the same operation's transit time.",
            evidence={"metric": "median_bandwidth_gbps", "value": f["bandwidth_gbps"],
                      "reference": f["reference_gbps"], "group": str(r["group"]), "share_of_step_ratio": share},
            ranks=[int(x) for x in a.tables["members"].loc[a.tables["members"]["gi"] == f["gi"], "rank"].head(64)],
            suggestion="The same operation is slower on this group's links: check its links (communication section) "
                       "and the network path between its members (a degraded NIC, cable or switch port).",
            view=_view(r["group"]), share_of_step=share))
    spanning = [by_gi.loc[g] for g in data["tp_spanning_hosts"] if g in by_gi.index]
    if spanning:
        r = spanning[0]
        members = a.tables["members"].loc[a.tables["members"]["gi"] == r["gi"], "rank"]
        out.append(Finding(
            "group_layout_spans_hosts", "low", ID,
            f"{count(len(spanning), 'tensor-parallel group')} span{'s' if len(spanning) == 1 else ''} hosts (e.g. "
            f"{_gname(r)}: ranks {rank_ranges(list(members))[:120]} on {r['hosts']} hosts): tensor parallelism "
            "exchanges activations every layer and needs the intra-node links.",
            evidence={"metric": "tp_groups_spanning_hosts", "value": len(spanning), "reference": 0},
            suggestion="Order the ranks so that each tensor-parallel group sits on one host (tp innermost in the "
                       "rank order) or reduce tp to the devices of a host.",
            view=_view(r["group"])))
    return out
