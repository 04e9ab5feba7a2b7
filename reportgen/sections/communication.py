"""Communication: per rank (communication op time, busy time, wait, wait ratio), per operator, per link (global
ranks), who waited for whom, with the seed's slow-link rule. The section reads the canonical communication tables
(``comm_ops``, ``comm_rank_step``, ``comm_bandwidth``, ``comm_matrix``, ``p2p_links``, ``comm_links_local``; what each
family puts in them is written once, in reportgen/readers/comm.py) and decides on what the run HAS, never on which
family it came from.

Definitions:

* **Communication op time** ``comm_op_ms`` = the sum of the operations' durations; **communication busy time**
  ``comm_busy_ms`` = the union of their intervals on the rank's timeline (where the operations have start times).
  Over several streams the first exceeds the second. Both in reportgen/facts.py (:func:`~reportgen.facts.comm_op_ms`,
  :func:`~reportgen.facts.comm_busy_ms`), per rank and step, averaged over the steps in scope.
* Wait ratio = wait / (wait + transit) (CANN's formula; for hccl_raw_<rank>.csv, whose transit is the
  communication cost, it is the seed's wait / (communication + wait)); shown only where both exist.
* Per rank and group the sums of communication.json (or the profiler DB) equal msprof-analyze's
  ``cluster_communication.json`` "Total Op Info" (research notes on msprof-analyze §2.2-2.3). Links from the
  communication matrix's ``total`` entries, summed over the ranks that report them and over steps, keyed by GLOBAL
  ranks (else the trace's point-to-point links); bandwidth = size / time. Links whose ends the files give only as
  group-local indices (hccl_raw, research notes on the seed's cluster pages §2.3) are placed on global ranks where
  exactly one of the run's process groups fits them (:func:`map_local_links`); the others are shown as written,
  never passed off as global ranks.
* Per operation type and link: fastest / median / slowest instance (:func:`link_op_extremes`); small collectives
  per type (:func:`small_collectives`); large-packet ratio per operation (:func:`large_packets`).
* Who waited for whom: :func:`reportgen.facts.entries` / :func:`~reportgen.facts.p2p_entries` /
  :func:`~reportgen.facts.rank_waits`.
* Slow link (seed rule ``cluster_link``, the seed's cluster helper): per transport type, a link whose bandwidth
  is more than 20% below the mean bandwidth of that type's links (self links excluded). Bandwidth = size / time
  everywhere (the seed reads hccl_raw's written bandwidth, which for the older generation is a step's SUM of
  per-operator bandwidths, several times size / time: shown apart as "Bandwidth as written", :func:`_local_links`).
* Transit outliers (msprof-analyze): where operations have a transit time per rank and a group
  (:func:`transit_outliers`).
"""

from __future__ import annotations

from .. import labels as L

import math
from typing import Any

from .. import charts as vl
import numpy as np
import pandas as pd

from .. import thresholds as th
from ..frames import agg
from .. import fmt, palette
from ..charts import (axis, band, cell_labels, fit, fit_concat, in_unit, metric_switch, natural_key, role_color,
                      scale_position, sequential, tip, to_spec)
from .. import facts
from ..errors import Unavailable
from ..commtypes import P2P_TYPES, canonical_op_type
from ..commtypes import busbw_factor as _busbw_factor
from ..model import Run
from ..report import Analysis, Column, Control, EvidenceView, Figure, Finding, Table, View, count, natural_order
from . import needs_reason

ID = "communication"
TITLE = "Communication"

#: beyond this many ranks the adjacency matrix is drawn in blocks of ranks
MATRIX_MAX_SIDE = 128
#: the nccl-tests bus bandwidth factor (one definition, in the readers' communication normalisation)
busbw_factor = _busbw_factor


# --------------------------------------------------------------------------- analyze

#: the canonical tables this section reads (the runner says ``unavailable: needs ...`` without them)
NEEDS = (("comm_ops", "comm_rank_step"),)

#: per (rank, step) columns this section sums from the operations, besides the two named times
_SUMMED = ("transit_ms", "wait_ms", "sync_ms")


def _ops_with_sizes(run: Run, ops: pd.DataFrame | None) -> pd.DataFrame | None:
    """The operations with ``size_mb`` and ``bandwidth_gbps``: as the ops table has them, else from the
    per-transport rows (``comm_bandwidth``: Σ size / Σ transit time over the op's transports)."""
    if ops is None:
        return None
    o = ops.copy(deep=False)  # columns are added, never written in place: the run's arrays, not a copy of each
    bw = run.table("comm_bandwidth")
    if ("size_mb" not in o or o["size_mb"].isna().all()) and bw is not None:
        sizes = bw.groupby(["rank", "step", "op"], as_index=False)[["size_mb", "time_ms"]].sum()
        o = o.drop(columns=["size_mb", "bandwidth_gbps"], errors="ignore").merge(
            sizes.rename(columns={"time_ms": "link_time_ms"}), on=["rank", "step", "op"], how="left")
        o["bandwidth_gbps"] = (o["size_mb"] / o["link_time_ms"]).where(o["link_time_ms"] > 0)
    for col in ("size_mb", "bandwidth_gbps"):
        if col not in o:
            o[col] = math.nan
    lp = large_packets(bw)
    if lp is not None:
        o = o.merge(lp, on=["rank", "step", "op"], how="left")
    cols = ["rank", "op", "group", "step", "kind", "op_type", "start_ms", "elapse_ms", "transit_ms", "wait_ms",
            "sync_ms", "idle_ms", "size_mb", "bandwidth_gbps", "busbw_gbps", "large_packet_ratio",
            "large_packet_transport"]
    keep = [c for c in cols if c in o and (c in ("rank", "op", "group", "step", "elapse_ms", "transit_ms", "wait_ms",
                                                  "size_mb", "bandwidth_gbps") or o[c].notna().any())]
    out = o[keep]
    out.attrs = dict(ops.attrs)
    return out


def large_packets(bw: pd.DataFrame | None) -> pd.DataFrame | None:
    """Per (rank, step, op): the large-packet ratio of the transport that moved the op's most bytes (LOCAL left out)
    and that transport. Large Packet Ratio (communication.json, msprof-analyze; research notes on the NPU profiler
    output §2.2) = packets larger than the transport's threshold (RDMA 0.5 MB, HCCS / PCIE / SIO 32 MB) / packets;
    a low ratio means many small packets (latency-bound). None when the files give no ratio."""
    if bw is None or "large_packet_ratio" not in bw or bw["large_packet_ratio"].isna().all():
        return None
    x = bw[(bw["transport"] != "LOCAL") & bw["large_packet_ratio"].notna() & (bw["size_mb"] > 0)]
    if x.empty:
        return None
    x = x.sort_values("size_mb", ascending=False, kind="stable").drop_duplicates(["rank", "step", "op"])
    return x[["rank", "step", "op", "large_packet_ratio", "transport"]].rename(
        columns={"transport": "large_packet_transport"}).reset_index(drop=True)


def per_rank_step(ops: pd.DataFrame | None, totals: pd.DataFrame | None) -> pd.DataFrame:
    """Per (rank, step): ``comm_op_ms`` (:func:`reportgen.facts.comm_op_ms`), ``comm_busy_ms``
    (:func:`reportgen.facts.comm_busy_ms`, where the operations have start times) and the sums of transit, wait and
    synchronisation (NaN where no operation has one). Where the profiler writes its own per-step totals
    (``comm_rank_step``) those are the op time, transit and wait."""
    if totals is not None:
        prs = totals[["rank", "step"]].copy()
        prs["comm_op_ms"] = totals["elapse_ms"]
        for col in ("transit_ms", "wait_ms"):
            if col in totals:
                prs[col] = totals[col]
    else:
        prs = facts.comm_op_ms(ops)
        extra = [c for c in _SUMMED if c in ops]
        if extra:
            prs = prs.merge(ops.groupby(["rank", "step"], as_index=False)[extra].sum(min_count=1),
                            on=["rank", "step"], how="left")
    busy = facts.comm_busy_ms(ops) if ops is not None else None
    if busy is not None:
        prs = prs.merge(busy, on=["rank", "step"], how="left")
    keep = [c for c in prs.columns if c in ("rank", "step", "comm_op_ms") or prs[c].notna().any()]
    return prs[keep]


def wait_ratio(wait: pd.Series, transit: pd.Series) -> pd.Series:
    """Wait ratio = wait / (wait + transit) (CANN's formula; on hccl_raw_<rank>.csv, whose transit is the
    communication cost, the seed's wait / (communication + wait)); NaN without both."""
    total = wait + transit
    return (wait / total).where(total > 0)


#: what the wait ratio is, as the metrics file states it
WAIT_RATIO_FORMULA = "wait / (wait + transit)"


def analyze(run: Run, options=None) -> Analysis:
    raw = run.table("comm_ops")
    totals = run.table("comm_rank_step")
    ops = _ops_with_sizes(run, raw)
    if ops is None and totals is None:
        raise Unavailable("No communication data in this run: " + needs_reason(None, ["comm_ops or comm_rank_step"],
                                                                               options) + ".")
    prs = per_rank_step(ops, totals)
    F = facts.of(run, options)
    ms_cols = [c for c in prs.columns if c.endswith("_ms")]
    extra_meta = {}
    if F is not None:
        # the run's steps (reportgen/facts.py): per-step rows of other steps (work outside every step, an hccl_raw
        # step the step trace lacks) are left out and counted; averages are over the steps in scope
        left = sorted(int(x) for x in set(prs["step"]) - set(F.steps_all))
        if left:
            extra_meta["steps_left_out"] = left
        prs = F.listed(prs).copy()
        prs["warmup"] = prs["step"].isin(F.warmup_steps)
        per_rank = F.per_rank_mean(prs, ms_cols)
        extra_meta.update(steps=len(F.steps), warmup_steps=list(F.warmup_steps))
    else:
        inside = prs[prs["step"] != -1] if (prs["step"] != -1).any() else prs
        per_rank = inside.groupby("rank", as_index=False)[ms_cols].mean()
    if "wait_ms" not in per_rank:  # a key of the metrics contract: null where the data has no wait, never absent
        per_rank["wait_ms"] = math.nan
    if "transit_ms" in per_rank and per_rank["wait_ms"].notna().any():
        per_rank["wait_ratio"] = facts.guard_ratio(wait_ratio(per_rank["wait_ms"], per_rank["transit_ms"]),
                                                   "communication wait ratio", run)
    else:
        per_rank["wait_ratio"] = math.nan
    per_rank["stage"] = per_rank["rank"].map(run.stage_of)
    tables = {"per_rank": per_rank, "per_rank_step": prs}
    avg = run.table("comm_rank_avg")
    if avg is not None:  # the profiler's own average row, a reference only
        tables["per_rank_file_average"] = avg[["rank"]].assign(comm_op_ms=avg["elapse_ms"],
                                                               transit_ms=avg["transit_ms"], wait_ms=avg["wait_ms"])
    if ops is not None:
        tables["ops"] = ops.drop(columns=["start_ms"], errors="ignore")
    metrics: dict[str, Any] = {}
    mapped, map_info = None, {}
    if run.table("comm_matrix") is None:  # group-local ends: to global ranks where the run's groups say how
        mapped, map_info = map_local_links(run.table("comm_links_local"), _strategy_groups(run, options))
        if map_info:
            metrics["links_mapped"] = {**map_info, "method": "map_local_links: the reporting rank's process group "
                                                             "whose members fit the file's group-local indices"}
    links, links_steps = _links(run, F, mapped)
    if links is not None and not links.empty:
        tables["links"] = links
    local = _place_local(_local_links(run), mapped)
    if local is not None:
        tables["links_local"] = local
    link_ops, extremes = _link_ops(run, mapped)
    if link_ops is not None and not link_ops.empty:
        tables["link_ops"] = link_ops
    if extremes is not None and not extremes.empty:
        # a per-link table (name ending in "links"): the metrics JSON may cut it to its slowest rows at many ranks
        tables["op_type_links"] = extremes
    # local links come from the files' per-step average row: one step. The seed's rule reads those rows as written
    # (the seed's cluster_link helper), also where the operators' links could be placed on global ranks; its finding
    # then opens those rows (the table of the files' links), where its number is (one link, one number)
    slow = _slow_links(local, 1) if local is not None else _slow_links(links, links_steps)
    metrics.update({
        **extra_meta, "avg_source": "computed", "wait_ratio_formula": WAIT_RATIO_FORMULA,
        "comm_op_ms_mean": float(per_rank["comm_op_ms"].mean()),
        "wait_ms_mean": float(per_rank["wait_ms"].mean()) if "wait_ms" in per_rank else math.nan,
        "slow_link_threshold_ratio": th.LINK_BELOW_TYPE_MEAN,
        "definitions": {"comm_op_ms": facts.COMM_OP_DEFINITION, "comm_busy_ms": facts.COMM_BUSY_DEFINITION,
                        "comm_ms": "the metrics contract's key for comm_op_ms in tables.per_rank (metrics-json.md; "
                                   "same values)"},
    })
    if "comm_busy_ms" in per_rank:
        metrics["comm_busy_ms_mean"] = float(per_rank["comm_busy_ms"].mean())
    if raw is not None and raw.attrs.get("source"):
        metrics["collective_source"] = raw.attrs["source"]
    transit = transit_applicable(ops)
    outliers = transit_outliers(ops) if transit else []
    if transit:
        metrics["transit_outlier_ops"] = len(outliers)
    waits = facts.rank_waits(run, options)
    if waits is not None:
        tables["rank_waits"] = waits
        clocks = facts.clocks(run)
        metrics["waits"] = {"definition": "waited_ms: time this rank waited for the last rank to enter each collective "
                                          "call (and for the peer of each point-to-point transfer); late_ms: time the "
                                          "other ranks waited for this rank; totals over the steps in scope",
                            "clocks_comparable": clocks["comparable"], "clocks_basis": clocks["basis"],
                            "collective_calls": clocks["calls"],
                            "end_spread_ms_median": clocks["end_spread_ms"]}
    spread = op_rank_spread(raw, facts.entries(run))
    if spread is not None and not spread.empty:
        tables["op_rank_spread"] = spread
    small = small_collectives(ops, _op_bytes(run, ops, a_sizes := operation_sizes(run, ops)),
                              F.steps if F is not None else None)
    if small is not None and not small.empty:
        tables["small_collectives"] = small
        metrics["small_collectives"] = {"limit_mb": SMALL_COLLECTIVE_MB, "definition": SMALL_COLLECTIVE_DEFINITION,
                                        "by_type": small.to_dict(orient="records")}
    a = Analysis(metrics=metrics, tables=tables, data={
        "slow_links": slow, "local_links": "links_local" in tables, "op_sizes": a_sizes,
        "ranks": run.ranks, "transit_outliers": outliers, "transit_applicable": transit,
        "note": raw.attrs.get("note") if raw is not None else None,
        "ops_steps": int(ops["step"].nunique()) if ops is not None else 1, "groups": _group_options(run, options),
        # the run's median step (facts), for the sentence saying sums over operations can exceed it; not a metric
        # of this section (the summary has it)
        "step_ms_median": F.step_ms_median if F is not None else None})
    a.findings = _findings(a)
    return a


#: the op-type spread table keeps this many (op type, group) rows (the most uneven first); its figure draws fewer
OP_SPREAD_ROWS = 200
OP_SPREAD_FIGURE_ROWS = 16


def op_rank_spread(ops: pd.DataFrame | None, entries: pd.DataFrame | None) -> pd.DataFrame | None:
    """Per communication op type and group (seed S4 "communication duration": each card's time per comm op, its
    distribution): every rank's median call duration (``elapse_ms`` of its calls of that op type in that group),
    then over the ranks min / q1 / median / q3 / max of those medians, ``slowest_rank`` (the highest median; ties:
    the lower rank id) and ``slow_ratio`` = max / median over ranks (1 = even; a rank whose calls are slow stands
    out). ``max_call_ms`` / ``max_call_rank``: the single longest call. Who entered each call last comes from
    :func:`reportgen.facts.entries` (never recomputed here): ``last_rank`` = the rank that entered last most often,
    ``last_share_ratio`` its share of the calls, ``last_wait_ms_mean`` = mean over calls of the longest wait the
    last rank caused (max of ``wait_ms`` per call). None without per-call durations."""
    if ops is None or ops.empty or "elapse_ms" not in ops or "op_type" not in ops:
        return None
    o = ops.dropna(subset=["elapse_ms"])
    o = o.assign(group=o["group"].fillna("").astype(str) if "group" in o else "",
                 op_type=o["op_type"].fillna("").astype(str))
    if o.empty:
        return None
    keys = ["op_type", "group"]
    per_rank = o.groupby(keys + ["rank"], as_index=False)["elapse_ms"].median()
    by = per_rank.groupby(keys, sort=True)
    g = by["elapse_ms"]
    out = agg(by, ranks=("elapse_ms", "size"), min_ms=("elapse_ms", "min"), median_ms=("elapse_ms", "median"),
              max_ms=("elapse_ms", "max")).reset_index()
    out["q1_ms"] = g.quantile(0.25).to_numpy()
    out["q3_ms"] = g.quantile(0.75).to_numpy()
    out["ranks"] = out["ranks"].astype("int64")
    slow = per_rank.sort_values(keys + ["elapse_ms", "rank"], ascending=[True, True, False, True]) \
        .drop_duplicates(keys).set_index(keys)["rank"]
    cols = keys + ["elapse_ms", "rank"]
    top = o[cols].sort_values(cols, ascending=[True, True, False, True]).drop_duplicates(keys).set_index(keys)
    idx = pd.MultiIndex.from_frame(out[keys])
    out["calls"] = o.groupby(keys).size().reindex(idx).to_numpy().astype("int64")
    out["slowest_rank"] = slow.reindex(idx).to_numpy().astype("int64")
    out["slow_ratio"] = (out["max_ms"] / out["median_ms"]).where(out["median_ms"] > 0)
    out["max_call_ms"] = top["elapse_ms"].reindex(idx).to_numpy()
    out["max_call_rank"] = top["rank"].reindex(idx).to_numpy().astype("int64")
    out["last_rank"], out["last_share_ratio"], out["last_wait_ms_mean"] = None, math.nan, math.nan
    if entries is not None and not entries.empty:
        e = entries.assign(group=entries["group"].astype(str), op_type=entries["op_type"].astype(str))
        per_call = agg(e.groupby(keys + ["step", "op", "call"]), last_rank=("last_rank", "first"),
                       wait=("wait_ms", "max")).reset_index()
        n = per_call.groupby(keys).size().rename("n")
        counts = per_call.groupby(keys + ["last_rank"]).size().rename("k").reset_index()
        best = counts.sort_values(keys + ["k", "last_rank"], ascending=[True, True, False, True]) \
            .drop_duplicates(keys).set_index(keys)
        out["last_rank"] = best["last_rank"].reindex(idx).to_numpy()
        out["last_share_ratio"] = (best["k"] / n).reindex(idx).to_numpy()
        out["last_wait_ms_mean"] = per_call.groupby(keys)["wait"].mean().reindex(idx).to_numpy()
    out = out[["op_type", "group", "ranks", "calls", "min_ms", "q1_ms", "median_ms", "q3_ms", "max_ms",
               "slowest_rank", "slow_ratio", "max_call_ms", "max_call_rank", "last_rank", "last_share_ratio",
               "last_wait_ms_mean"]]
    out["last_rank"] = out["last_rank"].astype("Int64")
    out = out.sort_values(["slow_ratio", "median_ms"], ascending=[False, False], na_position="last", kind="stable")
    return out.head(OP_SPREAD_ROWS).reset_index(drop=True)


def transit_applicable(ops: pd.DataFrame | None) -> bool:
    """The transit outlier rule needs a transit time per rank and operation and the operation's group (which ranks
    ran the same instance): it applies when some operation has both."""
    if ops is None or "transit_ms" not in ops or "group" not in ops:
        return False
    g = ops["group"]
    return bool((ops["transit_ms"].notna() & g.notna() & (g.astype(str) != "") & (g.astype(str) != "None")).any())


def _links(run: Run, F, mapped: pd.DataFrame | None = None) -> tuple[pd.DataFrame | None, int]:
    """Links between GLOBAL ranks and how many steps they sum: the communication matrix's ``total`` entries summed
    over the ranks that report them and over steps, else the group-local links mapped to global ranks
    (:func:`map_local_links`; each rank's file reports the links it takes part in, summed the same way), else the
    point-to-point links of the trace; bandwidth = size / time."""
    m = run.table("comm_matrix")
    if m is not None:
        tot = m[m["stat"] == "total"]
        links = tot.groupby(["group", "src_rank", "dst_rank", "transport"], as_index=False)[["size_mb", "time_ms"]].sum()
        links["bandwidth_gbps"] = (links["size_mb"] / links["time_ms"]).where(links["time_ms"] > 0)
        return links, max(1, int(m["step"].nunique()))
    if mapped is not None and mapped["mapped"].any():
        sel, steps = _link_rows(mapped)
        sel = sel[sel["mapped"]]
        links = sel.groupby(["group", "src_rank", "dst_rank", "transport"], as_index=False)[["size_mb", "time_ms"]].sum()
        links["bandwidth_gbps"] = (links["size_mb"] / links["time_ms"]).where(links["time_ms"] > 0)
        return links, steps
    links = run.table("p2p_links")
    return links, max(1, len(run.steps))


def _link_rows(lk: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The group-local link rows one links table sums, and how many steps: the operators' entries (where the files
    have them, else the steps' own entries, which sum the operators), of the file's average row when it has one
    (one step), else of every step."""
    lk = lk[lk["op"].notna()] if lk["op"].notna().any() else lk
    if (lk["step"] == -1).any():
        return lk[lk["step"] == -1], 1
    return lk, max(1, int(lk["step"].nunique()))


def _local_links(run: Run) -> pd.DataFrame | None:
    """Links whose ends are group-local indices (``comm_links_local``): the per-link rows of the file's average
    row when it has them, else every step's. ``bandwidth_gbps`` = size / time, the quantity the links table and the
    matrix show; ``profiler_bandwidth_gbps`` = the bandwidth the file writes (converted to GB/s), which for the older
    hccl_raw generation is the SUM of the step's per-operator bandwidths, not size / time
    (research notes on the seed's cluster pages §3.3: "step bandwidth = Σ of per-op bandwidths"), so it runs several
    times above it (one step of 8 operators on a link: about 8x). Both are named apart wherever shown."""
    lk = run.table("comm_links_local")
    if lk is None:
        return None
    lk = lk[lk["op"].isna()]
    sel = lk[lk["step"] == -1] if (lk["step"] == -1).any() else lk
    out = sel[["rank", "src_local", "dst_local", "transport", "time_ms", "size_mb"]].reset_index(drop=True)
    written = sel["bandwidth_gbps"].to_numpy(dtype=float)
    out["bandwidth_gbps"] = (out["size_mb"] / out["time_ms"]).where(out["time_ms"] > 0)
    out["profiler_bandwidth_gbps"] = written
    ceiling = out["transport"].map(th.link_ceiling_gbps).astype(float)
    out["written_impossible"] = (out["profiler_bandwidth_gbps"] > ceiling).fillna(False).astype(bool)
    return out


def _place_local(local: pd.DataFrame | None, mapped: pd.DataFrame | None) -> pd.DataFrame | None:
    """The steps' own group-local link rows with ``global_src`` / ``global_dst``: the global ends of that rank's
    operator entries with the same local ends and transport (:func:`map_local_links`) when they all map to one
    pair; NaN otherwise (a step's entry sums the operators of every group, so it is placed only through them)."""
    if local is None or local.empty or mapped is None:
        return local
    # the operators' entries; without them (a file without operator entries) the steps' own, mapped as they are
    op = mapped[mapped["op"].notna()] if mapped["op"].notna().any() else mapped
    key = ["rank", "src_local", "dst_local", "transport"]
    if op.empty:
        return local.assign(global_src=math.nan, global_dst=math.nan)
    g = op.assign(_pair=np.where(op["mapped"], op["src_rank"].astype(str) + ">" + op["dst_rank"].astype(str), "?")) \
        .groupby(key)["_pair"].agg(lambda s: s.iloc[0] if s.nunique() == 1 and s.iloc[0] != "?" else "?")
    pair = local.join(g, on=key)["_pair"].fillna("?")
    parts = pair.where(pair != "?", "-1>-1").str.split(">", expand=True)
    ends = {k: parts[i].astype(float).replace(-1.0, math.nan).to_numpy() for i, k in enumerate(("src", "dst"))}
    return local.assign(global_src=ends["src"], global_dst=ends["dst"])


#: process groups the communication section's Group control offers (the largest first); the domains section has all
GROUP_OPTIONS = 64
#: the charts' filter on the Group control (``comm_group``: "all" or a list of ranks, data, never code)
GROUP_FILTER = "!isArray(comm_group) || indexof(comm_group, datum.rank) >= 0"
#: the same for a link: both ends in the group
GROUP_LINK_FILTER = ("!isArray(comm_group) || (indexof(comm_group, datum.src_rank) >= 0 && "
                     "indexof(comm_group, datum.dst_rank) >= 0)")


def _strategy_groups(run: Run, options) -> pd.DataFrame | None:
    """The strategy section's process groups (group, name, kind, ranks), None without them."""
    from . import analysis_of
    try:
        return analysis_of("strategy", run, options).tables["groups"]
    except Unavailable:
        return None


def _group_options(run: Run, options) -> list[tuple[Any, str]]:
    """The Group control's options: every process group of 2+ ranks that is not the whole run (strategy section's
    groups; the largest first, then by key), as (sorted ranks, label)."""
    groups = _strategy_groups(run, options)
    if groups is None:
        return []
    world = len(run.ranks)
    rows = [(sorted(int(r) for r in rs), str(g), str(n), str(k)) for g, n, k, rs in
            zip(groups["group"], groups["name"], groups["kind"], groups["ranks"]) if 2 <= len(rs) < max(world, 3)]
    rows.sort(key=lambda x: (-len(x[0]), natural_key(x[1])))
    # one option per member set (the control filters by ranks), named after EVERY group with those members: a pp and
    # an embedding group of the same ranks are two groups, both named (seed #89)
    same: dict[tuple, list[tuple[str, str, str]]] = {}
    for ranks, g, n, k in rows:
        same.setdefault(tuple(ranks), []).append((g, n, k))
    out = []
    for ranks, named in same.items():
        kinds = list(dict.fromkeys(k for _g, _n, k in named))
        label = " = ".join(f"{g}" + (f" '{n}'" if n and n != g else "") for g, n, _k in named)
        out.append((list(ranks), f"{label} · {' / '.join(kinds)} · {len(ranks)} ranks"))
    return out[:GROUP_OPTIONS]


#: links shown in the per-link box plots (the busiest by total time)
BOX_LINKS = 30

#: the classes of operations the small-packet rule judges, each with its size limit (MB), in the order shown
SIZE_CLASSES = (("intra-node (HCCS/PCIE/SIO/SDMA)", th.SMALL_PACKET_SDMA_MB), ("RDMA", th.SMALL_PACKET_RDMA_MB),
                ("collective messages", th.SMALL_PACKET_RDMA_MB))
#: each class of SIZE_CLASSES as a sentence names its operations (a class label is not a noun phrase: "the collective
#: messages communication operations" read as a wording bug)
SIZE_CLASS_OPS = {"intra-node (HCCS/PCIE/SIO/SDMA)": "intra-node (HCCS/PCIE/SIO/SDMA) communication operations",
                  "RDMA": "RDMA communication operations",
                  "collective messages": "collective operations (no transport recorded)"}


SIZES_FIGURE = "communication-sizes"
#: bins of the sizes chart per decade of size (log scale)
SIZE_BINS_PER_DECADE = 4


def _sizes_chart(sizes: pd.DataFrame) -> Figure:
    """How many operations move how many bytes (log bins), per class, the small-packet limit marked."""
    unit, factor = fmt.unit_for("mb", sizes["size_mb"])
    parts, notes = [], []
    for kind, limit in SIZE_CLASSES:
        g = sizes[sizes["cls"] == kind]
        if g.empty:
            continue
        k = np.floor(np.log10(g["size_mb"].to_numpy(float)) * SIZE_BINS_PER_DECADE)
        below = g["size_mb"].to_numpy(float) < limit
        b = pd.DataFrame({"k": k, "part": np.where(below, f"below {fmt.quantity(limit, 'mb')}",
                                                    f"{fmt.quantity(limit, 'mb')} or more")})
        b = b.groupby(["k", "part"], as_index=False).size().rename(columns={"size": "operations"})
        b["lo"] = 10 ** (b["k"] / SIZE_BINS_PER_DECADE) / factor
        b["hi"] = 10 ** ((b["k"] + 1) / SIZE_BINS_PER_DECADE) / factor
        title = (f"{kind}: {len(g):,} operations, {fmt.percent(below.mean())} below "
                 f"{fmt.quantity(limit, 'mb')}")
        x = vl.X("lo:Q", scale=vl.Scale(type="log"), axis=vl.Axis(**axis("Operation size, log scale", unit)))
        small, large = f"below {fmt.quantity(limit, 'mb')}", f"{fmt.quantity(limit, 'mb')} or more"
        bars = vl.Chart(b).mark_bar().encode(
            x=x, x2="hi:Q", y=vl.Y("operations:Q", stack="zero", axis=vl.Axis(**axis("Operations", "count"))),
            color=role_color("part", [(small, "comm"), (large, "other")]),
            tooltip=[tip("lo", "From", unit), tip("hi", "To", unit),
                     vl.Tooltip("part:N", title="Size"), vl.Tooltip("operations:Q", title="Operations",
                                                                      format=fmt.D3_INT)])
        rule = vl.Chart(pd.DataFrame({"x": [limit / factor]})).mark_rule(strokeDash=[4, 3]).encode(x="x:Q")
        parts.append(vl.layer(bars, rule).properties(title=title, width="container", height=150))
        notes.append(f"{kind} against {fmt.quantity(limit, 'mb')}")
    chart = (fit_concat(vl.vconcat(*parts).resolve_scale(color="independent")) if len(parts) > 1
             else fit(parts[0], 150))
    return Figure(SIZES_FIGURE, "Operation sizes", to_spec(chart),
                  caption="How many communication operations move how much data (bins of a quarter decade); dashed: "
                          "the small-packet limit (" + "; ".join(notes) + "). Operations below it are latency-bound.",
                  alt="Histogram of communication operation sizes")


def operation_sizes(run: Run, ops: pd.DataFrame | None) -> pd.DataFrame | None:
    """Bytes moved per communication operation, as the small-packet rule judges them (advisor.rule_small_packets)
    and the sizes chart shows them: per (rank, step, op) and class from the per-transport rows (``comm_bandwidth``;
    the intra-node transports summed: SDMA rows hold only the remainder beyond HCCS + PCIE + SIO, so they are a
    part of the same operation, not a small one of their own; RDMA apart; LOCAL left out); without them
    (torch.profiler traces, hccl_raw_<rank>.csv, cpu_op_execute_timestamp_<rank>.txt), each collective's message
    size (class "collective messages", no transport known). Columns: rank, step, op, cls, limit_mb, size_mb,
    time_ms; only operations that move data."""
    limits = dict(SIZE_CLASSES)
    bw = run.table("comm_bandwidth")
    if bw is not None and not bw.empty:
        x = bw[(bw["size_mb"] > 0) & (bw["transport"] != "LOCAL")]
        x = x.assign(cls=x["transport"].map(lambda t: "RDMA" if t == "RDMA" else SIZE_CLASSES[0][0])) \
            .groupby(["rank", "step", "op", "cls"], as_index=False)[["size_mb", "time_ms"]].sum()
    elif ops is not None and "size_mb" in ops and ops["size_mb"].notna().any():
        moved = (ops["size_mb"] > 0).to_numpy()
        g = ops if moved.all() else ops[moved]  # every op moves data (the usual case): the ops' own arrays, no copy
        x = pd.DataFrame(copy=False, data={"rank": g["rank"], "step": g["step"], "op": g["op"],
                                           "cls": "collective messages", "size_mb": g["size_mb"],
                                           "time_ms": g["elapse_ms"]})
    else:
        return None
    if x.empty:
        return None
    x["limit_mb"] = x["cls"].map(limits)
    return x[["rank", "step", "op", "cls", "limit_mb", "size_mb", "time_ms"]].reset_index(drop=True)


#: a collective below this size is "small" for the fusion table (the small-packet rule's RDMA limit)
SMALL_COLLECTIVE_MB = th.SMALL_PACKET_RDMA_MB
SMALL_COLLECTIVE_DEFINITION = ("per collective type, over the steps in scope: calls per rank and step, those below the "
                               "limit (bytes the rank moves in the call: its transports', else its links', else its "
                               "message size) and their operation time per rank and step")


def _op_bytes(run: Run, ops: pd.DataFrame | None, sizes: pd.DataFrame | None) -> pd.DataFrame | None:
    """Bytes each operation moves on its rank, per (rank, step, op): the per-transport rows (the small-packet rule's
    :func:`operation_sizes`, classes summed), else the operator's link entries (hccl_raw: Σ size over its links)."""
    if sizes is not None and not sizes.empty:
        return sizes.groupby(["rank", "step", "op"], as_index=False)["size_mb"].sum()
    lk = run.table("comm_links_local")
    if lk is None or ops is None:
        return None
    x = lk[lk["op"].notna() & (lk["step"] >= 0)]
    return x.groupby(["rank", "step", "op"], as_index=False)["size_mb"].sum() if not x.empty else None


def small_collectives(ops: pd.DataFrame | None, sizes: pd.DataFrame | None, steps=None) -> pd.DataFrame | None:
    """Seed #64 (the seed's ``all_reduce_fusion_config``: many small AllReduces that fusion would merge): per collective
    type over the steps in scope (``steps``; else every step >= 0), the calls per rank and step, the calls that move
    less than :data:`SMALL_COLLECTIVE_MB` per rank and step, their operation time (ms) per rank and step and the
    median size. ``sizes``: bytes per (rank, step, op) (:func:`_op_bytes`); operations without a size are counted,
    never as small."""
    if ops is None or sizes is None or "kind" not in ops:
        return None
    o = ops[(ops["kind"] == "collective") & (ops["step"] >= 0)]
    if steps is not None:
        o = o[o["step"].isin(list(steps))]
    if o.empty:
        return None
    o = o.drop(columns=["size_mb"], errors="ignore").merge(sizes, on=["rank", "step", "op"], how="left")
    pairs = max(1, len(o[["rank", "step"]].drop_duplicates()))
    o = o.assign(small=o["size_mb"] < SMALL_COLLECTIVE_MB)
    o["small_ms"] = o["elapse_ms"].where(o["small"], 0.0)
    g = o.groupby("op_type")
    out = pd.DataFrame({"calls_per_step": g.size() / pairs, "small_calls_per_step": g["small"].sum() / pairs,
                        "small_ms_per_step": g["small_ms"].sum() / pairs, "ms_per_step": g["elapse_ms"].sum() / pairs,
                        "median_size_mb": g["size_mb"].median()}).reset_index()
    return out.sort_values(["small_ms_per_step", "op_type"], ascending=[False, True], kind="stable") \
        .reset_index(drop=True)


def _link_ops(run: Run, mapped: pd.DataFrame | None = None) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """One row per operator on a link (the :data:`BOX_LINKS` busiest links), for the per-link distributions of time,
    size and bandwidth and the operator-link table; and per operation type and link the fastest, median and slowest
    instance (:func:`link_op_extremes`, every link). Links between global ranks where the files or the mapping
    (:func:`map_local_links`) give them, else "rank r: a→b" in the reporting rank's group-local indices."""
    m = run.table("comm_matrix")
    if m is not None:
        x = m[(m["stat"] != "total") & (m["src_rank"] != m["dst_rank"])]
        link = x["src_rank"].astype(str) + "→" + x["dst_rank"].astype(str) + " " + x["transport"]
        df = pd.DataFrame({"link": link, "rank": x["rank"], "step": x["step"], "op": x["op_name"],
                           "op_type": x["op_type"], "group": x["group"], "stat": x["stat"], "time_ms": x["time_ms"],
                           "size_mb": x["size_mb"]})
    else:
        lk = mapped if mapped is not None else run.table("comm_links_local")
        if lk is None:
            return None, None
        x = lk[lk["op"].notna() & (lk["step"] >= 0) & (lk["src_local"] != lk["dst_local"])]
        local = ("rank " + x["rank"].astype(str) + ": " + x["src_local"].astype(str) + "→" + x["dst_local"].astype(str)
                 + " " + x["transport"] + " (group-local)")
        if "mapped" in x:
            glob = x["src_rank"].astype(str) + "→" + x["dst_rank"].astype(str) + " " + x["transport"]
            link = glob.where(x["mapped"], local)
            group = x["group"]
        else:
            link, group = local, None
        types = {o: canonical_op_type(o) for o in pd.unique(x["op"])}
        df = pd.DataFrame({"link": link, "rank": x["rank"], "step": x["step"], "op": x["op"],
                           "op_type": x["op"].map(types), "group": group, "time_ms": x["time_ms"],
                           "size_mb": x["size_mb"]})
    df = df[df["time_ms"] > 0]
    if df.empty:
        return None, None
    df = df.assign(bandwidth_gbps=df["size_mb"] / df["time_ms"]).reset_index(drop=True)
    extremes = link_op_extremes(df)
    busiest = df.groupby("link")["time_ms"].sum().nlargest(BOX_LINKS).index
    return df[df["link"].isin(busiest)].reset_index(drop=True), extremes


def link_op_extremes(df: pd.DataFrame) -> pd.DataFrame:
    """Per operation type and link, msprof-analyze's top1 / middle / bottom idea (research notes on msprof-analyze
    §2.3: the communication matrix keeps the slowest, the median and the fastest instance of each op type): the
    number of instances, the fastest (shortest time) and the slowest one with their operator, step and bandwidth,
    and the median time. Input: one row per operator instance on a link (link, op, op_type, step, time_ms,
    size_mb, bandwidth_gbps)."""
    d = df.sort_values(["op_type", "link", "time_ms"], kind="stable")
    g = d.groupby(["op_type", "link"], sort=False)
    first, last = g.head(1).set_index(["op_type", "link"]), g.tail(1).set_index(["op_type", "link"])
    out = agg(g, instances=("time_ms", "size"), median_ms=("time_ms", "median"))
    for tag, rows in (("fastest", first), ("slowest", last)):
        out[f"{tag}_ms"] = rows["time_ms"]
        out[f"{tag}_op"] = rows["op"]
        out[f"{tag}_step"] = rows["step"]
        out[f"{tag}_gbps"] = rows["bandwidth_gbps"]
    out = out.reset_index()
    out["slowest_over_fastest"] = (out["slowest_ms"] / out["fastest_ms"]).where(out["fastest_ms"] > 0)
    return out.sort_values(["slowest_ms", "op_type", "link"], ascending=[False, True, True],
                           kind="stable").reset_index(drop=True)


def transit_outliers(ops: pd.DataFrame | None) -> list[dict]:
    """Per operator instance across the ranks that ran it: a rank whose transit time is above
    median + 3 x MAD (scaled to σ, 1.4826) of the group's transit times, and above it by at least 0.1 ms,
    moved its share of the data slowly — its link is suspect. Needs >= 3 ranks and a transit time per rank
    (communication.json / the profiler DB: master-plane transit; PyTorch traces have one transit per instance by
    construction)."""
    if ops is None or ops.empty or "transit_ms" not in ops:
        return []
    o = ops.dropna(subset=["transit_ms"])
    if o.empty:
        return []
    # vectorised over all instances at once (one groupby per statistic, not one Python loop per instance)
    g = o.groupby(["group", "step", "op"], dropna=False, sort=True)
    gid = g.ngroup().to_numpy()
    x = o["transit_ms"].astype(float)
    med = g["transit_ms"].transform("median").astype(float)
    mad = 1.4826 * (x - med).abs().groupby(gid).transform("median")
    limit = med + np.maximum(3 * mad, 0.1)
    keep = ((g["rank"].transform("nunique") >= 3) & (x > limit)).to_numpy()
    order = np.argsort(gid[keep], kind="stable")   # the groupby order (sorted keys), rows in table order
    sel = o[keep].iloc[order]
    return [{"rank": int(r), "group": grp, "step": int(st), "op": op, "value": float(v), "reference": float(m)}
            for r, grp, st, op, v, m in zip(sel["rank"], sel["group"], sel["step"], sel["op"],
                                            x[keep].iloc[order], med[keep].iloc[order])]


def _slowest_first(links: pd.DataFrame) -> pd.DataFrame:
    """``links`` by bandwidth relative to the median of its transport, lowest first (links without a bandwidth
    last): a table of 40,000 links that the page must cut keeps, and lists first, the ones a reader looks for."""
    bw = links["bandwidth_gbps"].astype(float)
    rel = bw / bw.groupby(links["transport"].astype(str)).transform("median")
    order = natural_order(links.assign(_rel=rel.fillna(np.inf)), ["group", "src_rank", "dst_rank"])
    return order.sort_values("_rel", kind="stable").drop(columns="_rel")


def _slow_links(links: pd.DataFrame | None, steps: int = 1) -> list[dict]:
    """Seed rule: per transport, links more than 20% below the mean bandwidth of that transport (worst first).
    ``steps``: how many steps the links table sums (communication_matrix.json totals: all profiled steps;
    hccl_raw_<rank>.csv: the per-step average row, 1); the excess time per step is what the link cost beyond the
    transport's mean. Bandwidth = size / time (``bandwidth_gbps``). Where the rows also carry the file's written
    bandwidth (``profiler_bandwidth_gbps``, :func:`_local_links`), ``seed`` is the seed's own reading of the same
    transport's links on that number (its cluster_link helper: worst link, its written bandwidth, the transport's
    mean of it and the percent below), kept for comparison with the seed, never shown as "the" bandwidth."""
    if links is None or links.empty:
        return []
    src = "src_rank" if "src_rank" in links else "src_local"
    dst = "dst_rank" if "dst_rank" in links else "dst_local"
    lk = _judged_links(links, src, dst)
    out = []
    for transport, grp in lk.groupby("transport"):
        if len(grp) < 2:
            continue
        mean = float(grp["bandwidth_gbps"].mean())
        worst = grp.loc[grp["bandwidth_gbps"].idxmin()]
        below = (mean - worst["bandwidth_gbps"]) / mean if mean > 0 else 0.0
        if below > th.LINK_BELOW_TYPE_MEAN:
            out.append({"transport": transport, "src": int(worst[src]), "dst": int(worst[dst]),
                        "value": float(worst["bandwidth_gbps"]), "reference": mean, "percent": below * 100,
                        "written_gbps": (float(worst["profiler_bandwidth_gbps"])
                                         if pd.notna(worst.get("profiler_bandwidth_gbps", math.nan)) else None),
                        "local": src == "src_local", "group": worst.get("group"),
                        "global": ([int(worst["global_src"]), int(worst["global_dst"])]
                                   if pd.notna(worst.get("global_src", math.nan)) else None),
                        "reported_by": int(worst["rank"]) if "rank" in worst else None,
                        "excess_ms_per_step": max(0.0, float(worst["time_ms"]) - float(worst["size_mb"]) / mean)
                        / steps if mean > 0 else 0.0, "seed": _seed_reading(grp, src, dst)})
    return out


def _impossible_note(local: pd.DataFrame) -> str:
    """The caption's sentence on written bandwidths faster than any link of their transport (issue 28): which figure
    the report uses, and why the other cannot be a bandwidth."""
    bad = local[local["written_impossible"]] if "written_impossible" in local else local.iloc[0:0]
    if bad.empty:
        return " Bandwidth is size / time everywhere on the page; 'Bandwidth as written' is shown, never used."
    worst = bad.loc[bad["profiler_bandwidth_gbps"].idxmax()]
    cls = th.TRANSPORT_CLASS.get(str(worst["transport"]).upper())
    return (f" Bandwidth is size / time everywhere on the page; 'Bandwidth as written' is shown, never used: "
            f"{count(len(bad), 'entry', 'entries')} write a figure faster than any {cls} link "
            f"({fmt.quantity(float(th.link_ceiling_gbps(worst['transport'])), 'gbps')}; up to "
            f"{fmt.quantity(float(worst['profiler_bandwidth_gbps']), 'gbps')} over {worst['transport']}), which no "
            "link can carry: the file sums its operators' bandwidths.")


def _judged_links(links: pd.DataFrame, src: str, dst: str) -> pd.DataFrame:
    """The links the slow-link rule compares: between two ranks, with a bandwidth no faster than the fastest link of
    its transport (:func:`reportgen.thresholds.link_ceiling_gbps`: above it, size / time is not a bandwidth), not
    LOCAL, at least ``th.LINK_MIN_MB``."""
    ceiling = links["transport"].map(th.link_ceiling_gbps).astype(float)
    possible = ~(links["bandwidth_gbps"] > ceiling)
    return links[(links[src] != links[dst]) & links["bandwidth_gbps"].notna() & (links["transport"] != "LOCAL")
                 & (links["size_mb"] >= th.LINK_MIN_MB) & possible]


def _seed_reading(grp: pd.DataFrame, src: str, dst: str) -> dict | None:
    """The seed's cluster_link reading of one transport's links on the file's WRITTEN bandwidth (older generation:
    a step's sum of per-operator bandwidths, not size / time): the worst link, its written bandwidth, the mean of
    the written bandwidths and how far below it the worst one is (%). None without written bandwidths."""
    if "profiler_bandwidth_gbps" not in grp:
        return None
    w = grp["profiler_bandwidth_gbps"].astype(float)
    if w.isna().any() or len(w) < 2:
        return None
    mean = float(w.mean())
    worst = grp.loc[w.idxmin()]
    return {"src": int(worst[src]), "dst": int(worst[dst]), "profiler_bandwidth_gbps": float(w.min()),
            "profiler_mean_gbps": mean, "percent": (mean - float(w.min())) / mean * 100 if mean > 0 else 0.0}


# --------------------------------------------------------------------------- group-local links -> global ranks

#: why a reporting rank's links stayed group-local (the notes and the JSON say it)
MAP_AMBIGUOUS = "more than one process group of the rank fits its local indices"
MAP_NONE = "no process group of the rank fits its local indices"


def _op_class(ops: pd.Series) -> pd.Series:
    """Per link row: "p2p" (Send / Receive operators), "collective" (any other operator) or "any" (the step's own
    link entry, which sums the operators of every group)."""
    uniq = {o: ("p2p" if canonical_op_type(o) in P2P_TYPES else "collective") for o in pd.unique(ops.dropna())}
    return ops.map(uniq).astype(object).fillna("any")  # all-NaN rows map to float: no str fill on float


def map_local_links(local: pd.DataFrame | None, groups: pd.DataFrame | None) -> tuple[pd.DataFrame | None, dict]:
    """Links given with GROUP-LOCAL ends (``comm_links_local``: hccl_raw's ``"<src>-<dst>"`` keys, research notes on
    the seed's cluster pages §2.3) mapped to GLOBAL ranks through the run's process groups (the strategy section's
    ``groups``: the strategy files, the rank table's stage layout, or pipeline groups derived from the stages).

    Per reporting rank and operator (the file does not name the group, so it is inferred):

    * the rank's own local index: every link a rank reports has the rank at one of its ends, so it is a value shared
      by every link's {src, dst} (a self link ``i-i`` fixes it);
    * candidate groups: the rank's groups with more members than the highest local index; for Send / Receive
      operators the pipeline (``pp``) groups, for other operators the other groups (the step's own link entry, which
      mixes operators, any group); and the rank must sit at its own local index in the group (members sorted);
    * exactly one candidate (groups with the same members count once): local index i -> the group's i-th member.
      Otherwise the rows stay group-local (``map_status`` says why), never guessed.

    Returns (the rows with ``src_rank``, ``dst_rank``, ``group`` and ``mapped`` added, {"mapped": rows,
    "local": rows, "reasons": {why: rows}}); (None, {}) without local links or groups."""
    if local is None or local.empty or groups is None or groups.empty:
        return None, {}
    x = local.reset_index(drop=True).copy()
    x["_cls"] = _op_class(x["op"])
    x["_op"] = x["op"].astype(object).where(x["op"].notna(), "")
    src, dst = x["src_local"].to_numpy(np.int64), x["dst_local"].to_numpy(np.int64)
    g = x.groupby(["rank", "_op"], sort=False)
    first_a, first_b = g["src_local"].transform("first").to_numpy(), g["dst_local"].transform("first").to_numpy()
    x["_a_ok"] = (src == first_a) | (dst == first_a)
    x["_b_ok"] = (src == first_b) | (dst == first_b)
    x["_hi"] = np.maximum(src, dst)
    keys = agg(g, cls=("_cls", "first"), hi=("_hi", "max"), a=("src_local", "first"), b=("dst_local", "first"),
               a_ok=("_a_ok", "all"), b_ok=("_b_ok", "all")).reset_index()
    by_rank: dict[int, list[tuple[str, str, tuple]]] = {}
    seen: set = set()
    for key, kind, ranks in zip(groups["group"].astype(str), groups["kind"].astype(str), groups["ranks"]):
        members = tuple(sorted(int(r) for r in ranks))
        if (kind == "pp", members) in seen:
            continue
        seen.add((kind == "pp", members))
        for r in members:
            by_rank.setdefault(r, []).append((key, kind, members))
    cache: dict = {}
    chosen, reason = [], []
    for rank, cls, hi, a, b, a_ok, b_ok in zip(keys["rank"], keys["cls"], keys["hi"], keys["a"], keys["b"],
                                               keys["a_ok"], keys["b_ok"]):
        sig = (int(rank), cls, int(hi), int(a) if a_ok else -1, int(b) if b_ok else -1)
        if sig not in cache:
            own = {i for i in sig[3:] if i >= 0}
            fits = {}
            for gkey, kind, members in by_rank.get(sig[0], []):
                if cls != "any" and (kind == "pp") != (cls == "p2p"):
                    continue
                if len(members) > sig[2] and members.index(sig[0]) in own:
                    fits.setdefault(members, gkey)
            cache[sig] = ((next(iter(fits.items()))[::-1], None) if len(fits) == 1
                          else (None, MAP_AMBIGUOUS if fits else MAP_NONE))
        got, why = cache[sig]
        chosen.append(got)
        reason.append(why)
    gkeys = sorted({c[0] for c in chosen if c}, key=natural_key)
    gid = {k: i for i, k in enumerate(gkeys)}
    members_of = {c[0]: c[1] for c in chosen if c}
    keys["_g"] = [gid[c[0]] if c else -1 for c in chosen]
    keys["_why"] = reason
    x = x.merge(keys[["rank", "_op", "_g", "_why"]], on=["rank", "_op"], how="left")
    # local index -> global rank through one flat array of every chosen group's members (vectorised)
    flat = np.array([r for k in gkeys for r in members_of[k]] + [-1], dtype=np.int64)
    sizes = np.array([len(members_of[k]) for k in gkeys] + [0], dtype=np.int64)
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    gi = x["_g"].to_numpy(np.int64)
    ok = gi >= 0
    for end in ("src", "dst"):
        loc = x[f"{end}_local"].to_numpy(np.int64)
        inside = ok & (loc < sizes[gi])
        x[f"{end}_rank"] = np.where(inside, flat[np.where(inside, start[gi] + loc, len(flat) - 1)], -1)
    x["group"] = pd.Series(np.array(gkeys + [None], dtype=object)[gi], dtype=object)
    x["mapped"] = ok
    x["map_status"] = x["_why"].where(~ok, "mapped")
    # counted over the operators' entries where the files have them (the steps' own entries sum those of every group)
    cnt = x["op"].notna().to_numpy() if x["op"].notna().any() else np.ones(len(x), dtype=bool)
    info = {"mapped": int((ok & cnt).sum()), "local": int((~ok & cnt).sum()),
            "reasons": {str(k): int(v) for k, v in x.loc[~ok & cnt, "_why"].value_counts().items()}}
    return x.drop(columns=["_cls", "_op", "_a_ok", "_b_ok", "_hi", "_g", "_why"]), info


# --------------------------------------------------------------------------- present


#: the two communication times, named the same wherever they are shown (reportgen/facts.py defines them)
OP_LABEL = "Communication op time (sum)"
#: the same on a chart axis, legend or tooltip (the unit is added in parentheses there)
OP_AXIS = "Communication op time"
BUSY_LABEL = "Communication busy (union)"

#: The link charts' metric (each chart titles the chosen metric with its unit).
LINK_METRIC_CONTROL = Control("link_metric", "Link metric", [("time_ms", "Time"), ("size_mb", "Size"),
                                                             ("bandwidth_gbps", "Bandwidth")], "bandwidth_gbps")


def present(a: Analysis) -> View:
    m, t = a.metrics, a.tables
    per_rank, prs = t["per_rank"], t["per_rank_step"]
    findings = a.findings
    comm_ms = per_rank.set_index("rank")["comm_op_ms"]
    shown = th.ranks_shown(comm_ms, vl.named_ranks(a))
    warm = set(m.get("warmup_steps") or [])
    if shown is None:
        figures = [_rank_bars(per_rank, prs)]
    else:  # many ranks: the bars draw the extremes, the median and the findings' ranks; a histogram every rank
        figures = [_rank_bars(per_rank[per_rank["rank"].isin(shown)], prs[prs["rank"].isin(shown)]),
                   vl.rank_distribution("communication-distribution", comm_ms, shown, OP_AXIS,
                                        "average over the steps in scope" if warm else "average over the steps")]
    controls = [Control("step", "Step", [("avg", "Average (steps in scope)" if warm else "Average")] +
                        [(str(s), facts.step_label(s, warm))
                         for s in sorted(prs["step"].unique())], "avg")]
    links = t.get("links")
    if links is not None:
        grouped = bool(a.data.get("groups"))
        figures.append(_matrix(links, "src_rank", "dst_rank", "Rank", grouped))
        figures.append(_graph(per_rank, links, grouped, shown))
        controls.append(LINK_METRIC_CONTROL)
        transports = matrix_transports(links)
        if transports:
            controls.append(Control("link_transport", "Transport", [("all", "All")] + [(x, x) for x in transports],
                                    "all"))
    if "link_ops" in t:
        figures.append(_boxes(t["link_ops"]))
        if not any(c.signal == "link_metric" for c in controls):
            controls.append(LINK_METRIC_CONTROL)
    groups = a.data.get("groups") or []
    if groups:
        controls.append(Control("comm_group", "Process group", [("all", "All ranks")] + groups, "all",
                                rank_sets=True))
    sizes = a.data.get("op_sizes")
    if sizes is not None and not sizes.empty:
        figures.append(_sizes_chart(sizes))
    cols = [Column("rank", "Rank", "rank"), Column("stage", "Stage", "int"), Column("comm_op_ms", OP_LABEL, "ms")]
    if "comm_busy_ms" in per_rank:
        cols.append(Column("comm_busy_ms", BUSY_LABEL, "ms"))
    cols += [Column(c, label, kind) for c, label, kind in (("transit_ms", "Transit", "ms"), ("wait_ms", "Wait", "ms"),
                                                            ("wait_ratio", "Wait ratio", "ratio"))
             if c in per_rank and per_rank[c].notna().any()]
    tables = [Table.from_frame("communication-per-rank", "Per rank", per_rank, cols)]
    if "rank_waits" in t:
        tables.append(_waits_table(t["rank_waits"], m.get("waits") or {}))
    ops = t.get("ops")
    if ops is not None:
        top = ops.sort_values("elapse_ms", ascending=False)
        cols = [Column("rank", "Rank", "rank"), Column("op", "Operator", "text"), L.group_column(top),
                Column("step", "Step", "int"), Column("elapse_ms", "Duration", "ms"),
                Column("transit_ms", "Transit", "ms"), Column("wait_ms", "Wait", "ms"),
                Column("size_mb", "Size", "mb"), Column("bandwidth_gbps", "Bandwidth", "gbps")]
        if "busbw_gbps" in ops:
            cols.append(Column("busbw_gbps", "Bus bandwidth", "gbps"))
        if "sync_ms" in ops:
            cols.insert(7, Column("sync_ms", "Synchronisation", "ms"))
        if "idle_ms" in ops:
            cols.insert(cols.index(next(x for x in cols if x.key == "wait_ms")) + 1,
                        Column("idle_ms", "Idle", "ms", help="elapse - transit - wait (communication.json)"))
        if "large_packet_ratio" in ops:
            cols += [Column("large_packet_ratio", "Large packets", "ratio",
                            help="share of packets above the transport's threshold (RDMA 0.5 MB, HCCS/PCIE/SIO 32 MB)"),
                     Column("large_packet_transport", "Large packets on", "text")]
        tables.append(Table.from_frame("communication-ops", "Operators (longest first)", top, cols, max_html_rows=100))
    if links is not None:
        many = len(links) > th.PAGE_TABLE_ROWS
        tables.append(Table.from_frame(
            "communication-links", "Links (global ranks; summed over operators and steps"
            + ("; the slowest for their transport first)" if many else ")"),
            _slowest_first(links) if many else natural_order(links, ["group", "src_rank", "dst_rank"]),
            [Column("group", "Group", "text"), Column("src_rank", "Source", "rank"), Column("dst_rank", "Destination", "rank"),
             Column("transport", "Transport", "text"), Column("size_mb", "Size", "mb"), Column("time_ms", "Time", "ms"),
             Column("bandwidth_gbps", "Bandwidth", "gbps")],
            caption="One row per link of each communication group; the transport (HCCS, RDMA, PCIE, LOCAL...) as the "
                    "profiler wrote it; bandwidth = size / time."
                    + (" A row whose source is its destination is the rank's copies within itself, as the profiler "
                       "records them (not traffic between ranks)." if self_links(links, "src_rank", "dst_rank").any()
                       else "")))
    if "op_rank_spread" in t:
        sp = t["op_rank_spread"]
        figures.append(_op_spread(sp.head(OP_SPREAD_FIGURE_ROWS), len(sp)))
        tables.append(Table.from_frame(
            "communication-op-spread-table", "Call durations per op type and group, across ranks", sp,
            [Column("op_type", "Op type", "text"), L.group_column(sp), Column("ranks", "Ranks", "int"),
             Column("calls", "Calls", "int"), Column("median_ms", "Median over ranks", "ms"),
             Column("max_ms", "Slowest rank's median", "ms"), Column("slowest_rank", "Slowest rank", "rank"),
             Column("slow_ratio", "Slowest / median", "float"), Column("max_call_ms", "Longest call", "ms"),
             Column("max_call_rank", "On rank", "rank"), Column("last_rank", "Entered last most often", "rank"),
             Column("last_share_ratio", "Of the calls", "ratio"),
             Column("last_wait_ms_mean", "Others waited for the last (mean per call)", "ms")],
            caption="Each rank's median call duration per op type and group; over the ranks the median and the "
                    "slowest rank (slowest / median: 1 = even). Who entered each call last: the per-call entry "
                    "times (the waits table's source). The most uneven first."))
    if "link_ops" in t:
        tables.append(_link_ops_table(t["link_ops"]))
    if "small_collectives" in t:
        tables.append(Table.from_frame(
            "communication-small-collectives", "Small collectives (fusion)", t["small_collectives"],
            [Column("op_type", "Collective", "text"), Column("calls_per_step", "Calls per rank and step", "float"),
             Column("small_calls_per_step", f"Below {fmt.quantity(SMALL_COLLECTIVE_MB, 'mb')} per rank and step",
                    "float"),
             Column("small_ms_per_step", "Their time per rank and step", "ms"),
             Column("ms_per_step", "All calls' time per rank and step", "ms"),
             Column("median_size_mb", "Median size", "mb")],
            caption="Many small collectives are latency-bound: fusing them (all_reduce_fusion_config / "
                    "comm_fusion, DDP bucket_cap_mb) makes fewer, larger calls. Sizes are the bytes the rank "
                    "moves in the call."))
    if "op_type_links" in t:
        tables.append(Table.from_frame(
            "communication-link-extremes", "Fastest and slowest instance per operation type and link",
            t["op_type_links"],
            [Column("op_type", "Operation type", "text"), Column("link", "Link", "text"),
             Column("instances", "Instances", "int"), Column("fastest_ms", "Fastest", "ms"),
             Column("median_ms", "Median", "ms"), Column("slowest_ms", "Slowest", "ms"),
             Column("slowest_over_fastest", "Slowest / fastest", "float"),
             Column("fastest_op", "Fastest operator", "text"), Column("fastest_step", "Fastest step", "int"),
             Column("fastest_gbps", "Fastest bandwidth", "gbps"),
             Column("slowest_op", "Slowest operator", "text"), Column("slowest_step", "Slowest step", "int"),
             Column("slowest_gbps", "Slowest bandwidth", "gbps")],
            caption="Per operation type and link, every instance the files record on the "
                    f"{t['op_type_links']['link'].nunique():,} links with per-operator rows (on a large run, the "
                    "busiest links only: the reader keeps per-operator rows for them) (msprof-analyze keeps the slowest, "
                    "the median and the fastest one: top1 / middle / bottom): a slowest far above the median on one "
                    "link only points at that link; on every link, at the ranks' arrival."))
    mapped_info = m.get("links_mapped") or {}
    if "links_local" in t:
        local_caption = ("The files give each link's ends as ranks inside its communication group and do not say which "
                         "group; they cannot be turned into global ranks, so they are shown as written.")
        if mapped_info:
            local_caption = ("Each step's own link entries as the files write them (the seed's slow-link rule reads "
                             "these, with bandwidth = size / time; 'Bandwidth as written' is the file's own figure, "
                             "which for the older hccl_raw generation is the sum of the operators' bandwidths). "
                             "An entry sums the operators of every group, so it gets global ends only where that "
                             "rank's operator entries with the same local ends all map to one pair.")
        tables.append(Table.from_frame(
            "communication-links-local", "Links as the profiler wrote them (group-local ranks)",
            t["links_local"].assign(written_impossible=t["links_local"]["written_impossible"].map(
                {True: "yes: faster than any link", False: ""})) if "written_impossible" in t["links_local"]
            else t["links_local"],
            [Column("rank", "Reported by rank", "rank"), Column("src_local", "Source (local)", "int"),
             Column("dst_local", "Destination (local)", "int")]
            # the global ends next to the local ones: the ranks a finding names are in view with its row
            + [Column(f"global_{e}", f"{label} (global)", "rank") for e, label in (("src", "Source"),
                                                                                   ("dst", "Destination"))
               if f"global_{e}" in t["links_local"]]
            + [Column("transport", "Transport", "text"),
             Column("time_ms", "Time", "ms"), Column("size_mb", "Size", "mb"),
             Column("bandwidth_gbps", "Bandwidth", "gbps", help="size / time, as in the links table and the matrix"),
             Column("profiler_bandwidth_gbps", "Bandwidth as written (not used)", "gbps",
                    help="the file's own bandwidth in GB/s; the older hccl_raw generation writes a step's as the sum "
                         "of its operators' bandwidths, so it can be several times size / time"),
             Column("written_impossible", "Written bandwidth impossible", "text",
                    help="the written figure is faster than the fastest link of its transport exists")],
            caption=local_caption + _impossible_note(t["links_local"])))
    notes = []
    if a.data.get("note"):
        notes.append(a.data["note"])
    if mapped_info.get("mapped"):
        notes.append(f"The files give link ends as group-local indices without naming the group: {mapped_info['mapped']:,} "
                     "link entries were placed on global ranks through the run's process groups (the reporting rank's "
                     "only group whose members fit the indices: pipeline groups for Send / Receive, the others for "
                     "collectives)" + (f"; {mapped_info['local']:,} stayed group-local (no single group fits them: "
                                       "links_mapped in the JSON says why) and are left out of the matrix and the graph."
                                       if mapped_info.get("local") else "."))
    notes.append(f"{OP_LABEL} = the sum of the operations' durations"
                 + (f"; {BUSY_LABEL.lower()} = the time at least one of them ran (the union of their intervals on the "
                    "rank's timeline): with several communication streams the sum exceeds it." if "comm_busy_ms" in
                    per_rank else "; the operations have no start times here, so no busy time (union) is given."))
    if shown is not None:  # many ranks: the bars draw the extremes, the median and the findings' ranks
        notes.append(vl.rank_cut_note(shown, len(per_rank), "communication op time", "Per rank"))
    wait = m.get("wait_ms_mean")
    summary = (f"Mean {OP_LABEL.lower()} per rank {fmt.ms(m['comm_op_ms_mean'])} per step"
               + (f" (busy {fmt.ms(m['comm_busy_ms_mean'])})" if m.get("comm_busy_ms_mean") is not None else "")
               + (f", of which waiting {fmt.ms(wait)} (wait ratio = {m['wait_ratio_formula']})."
                  if wait is not None and not math.isnan(wait) else "; this data has no wait times."))
    step = a.data.get("step_ms_median")
    top = per_rank.sort_values(["comm_op_ms", "rank"], ascending=[False, True]).iloc[0] if len(per_rank) else None
    if step and top is not None and float(top["comm_op_ms"]) > step:
        # sums over operations that overlap: more than the step, never read as the time communication holds it
        summary += (f" These are sums over operations, which overlap (several streams or receives waiting at once), "
                    f"so they can exceed the step (rank {int(top['rank'])}: {fmt.ms(float(top['comm_op_ms']))} in a "
                    f"{fmt.ms(step)} step). The share of the step communication holds is the overlap section's "
                    "exposed communication.")
    if m.get("steps_left_out"):
        left = ["outside every step" if x == -1 else str(x) for x in m["steps_left_out"]]
        notes.append(f"Communication of steps the run's step data lacks ({', '.join(left)}) is in the operator table "
                     "but left out of the per-rank and per-step numbers, so every section covers the same steps.")
    if "per_rank_file_average" in t:
        notes.append("The files' own average rows are kept as the table 'profiler average row'; per-rank numbers "
                     "here average the steps in scope, like every other section.")
        tables.append(Table.from_frame("communication-file-average", "Profiler average row",
                                       t["per_rank_file_average"], [Column("rank", "Rank", "rank"),
                                                                    Column("comm_op_ms", OP_LABEL, "ms"),
                                                                    Column("transit_ms", "Transit", "ms"),
                                                                    Column("wait_ms", "Wait", "ms")]))
    return View(summary=summary, figures=figures, tables=tables, controls=controls, notes=notes,
                ranks_drawn=list(shown or []))


#: operator-link rows the page lists (the longest; the JSON keeps the per-link rows of the busiest links)
LINK_OP_ROWS = 2000


def _link_ops_table(lo: pd.DataFrame) -> Table:
    """Seed #32's per-operator link rows: one row per operator instance on a link, longest first."""
    top = lo.sort_values(["time_ms", "link"], ascending=[False, True], kind="stable").head(LINK_OP_ROWS)
    cols = [Column("link", "Link", "text"), Column("op", "Operator", "text"), Column("op_type", "Type", "text"),
            L.group_column(top), Column("rank", "Reported by rank", "rank"), Column("step", "Step", "int"),
            Column("time_ms", "Time", "ms"), Column("size_mb", "Size", "mb"),
            Column("bandwidth_gbps", "Bandwidth", "gbps")]
    if "stat" in lo:
        cols.insert(3, Column("stat", "Instance", "text", help="msprof-analyze: top1 = slowest, middle, bottom = "
                                                              "fastest of the op type"))
    left = len(lo) - len(top)
    return Table.from_frame(
        "communication-link-ops", "Operators on each link (longest first)", top, cols,
        caption=f"The links' operator entries of the {BOX_LINKS} busiest links (filter by link, operator, type, group "
                "or step)" + (f"; the {len(top):,} longest of {len(lo):,} are listed, the JSON has all." if left else
                              "."))


def _waits_table(w: pd.DataFrame, meta: dict) -> Table:
    caption = ("Per rank, over the steps in scope: the time it waited for the last rank to enter each collective call "
               "(and for the peer of each point-to-point transfer), and the time the other ranks waited for it. "
               "Entry times are each rank's operation starts.")
    if meta.get("clocks_comparable") is False:
        caption += (" The ranks' clocks do not look comparable here (collective ends spread "
                    f"{fmt.ms(meta.get('end_spread_ms_median'))} in the median call): read these waits with care.")
    return Table.from_frame("communication-waits", "Who waited for whom (per rank)",
                            w.sort_values(["late_ms", "rank"], ascending=[False, True], kind="stable"),
                            [Column("rank", "Rank", "rank"), Column("waited_ms", L.label("waited_ms"), "ms"),
                             Column("late_ms", "Others waited for it", "ms"), Column("calls", "Collective calls", "int"),
                             Column("last_calls", "Entered last", "int")], caption=caption)


def _findings(a: Analysis) -> list[Finding]:
    out = []
    outl = a.data.get("transit_outliers") or []
    if outl:
        by_rank: dict[int, list] = {}
        for x in outl:
            by_rank.setdefault(x["rank"], []).append(x)
        rank, items = max(by_rank.items(), key=lambda kv: len(kv[1]))
        worst = max(items, key=lambda x: x["value"] - x["reference"])
        out.append(Finding(
            "slow_link_transit", "medium", ID,
            f"Rank {rank} needed clearly longer transfer (transit) time than the other ranks of the group in "
            f"{len(items)} operator(s); worst {worst['op']}: {fmt.ms(worst['value'])} against a median of "
            f"{fmt.ms(worst['reference'])}.",
            ranks=[rank], evidence={"metric": "transit_ms", "value": worst["value"], "reference": worst["reference"],
                                    "operators": len(items), "group": worst["group"],
                                    "excess_ms_per_step": sum(x["value"] - x["reference"] for x in items)
                                    / max(1, a.data.get("ops_steps") or 1)},
            suggestion="Look at this rank's links in the matrix and the links table (transport, bandwidth).",
            view=EvidenceView("communication-matrix", {"link_metric": "time_ms"}) if "links" in a.tables
            else EvidenceView("communication-ranks")))
    for s in a.data["slow_links"]:
        ends = f"{'group-local ranks' if s['local'] else 'ranks'} {s['src']} → {s['dst']}"
        glob = s.get("global")
        if glob:  # a group-local link its rank's operator entries place on global ranks
            ends = f"ranks {glob[0]} → {glob[1]} (group-local {s['src']} → {s['dst']})"
        out.append(Finding(
            "slow_link", "medium" if s["percent"] < 50 else "high", ID,
            f"The {s['transport']} link between {ends} runs at "
            f"{fmt.quantity(s['value'], 'gbps')} (size / time), "
            f"{fmt.quantity(s['percent'], 'pct')} below the mean of {s['transport']} links "
            f"({fmt.quantity(s['reference'], 'gbps')})"
            + (f", reported by rank {s['reported_by']}." if s["local"] and s["reported_by"] is not None else "."),
            # group-local ends are not global ranks: name the (global) rank whose file reported the link
            ranks=([s["reported_by"]] if s["reported_by"] is not None else []) if s["local"] else [s["src"], s["dst"]],
            links=[glob] if glob else [] if s["local"] else [[s["src"], s["dst"]]],
            evidence={"metric": "bandwidth_gbps", "value": s["value"], "reference": s["reference"],
                      "definition": "size / time of the link (the links table's and the matrix's bandwidth)",
                      **({"profiler_bandwidth_gbps": s["written_gbps"]} if s.get("written_gbps") is not None else {}),
                      # the seed's reading on the file's written bandwidth (a different quantity, named apart)
                      **({"seed_rule_on_written_bandwidth": s["seed"]} if s.get("seed") else {}),
                      "transport": s["transport"], "reported_by_rank": s["reported_by"],
                      # time beyond what the link's bytes take at its transport's mean bandwidth (MB / GB/s = ms)
                      "excess_ms_per_step": s["excess_ms_per_step"]},
            suggestion="Check that link's cabling / NIC / switch port and its HCCL or NCCL transport settings.",
            view=EvidenceView("communication-matrix", {"link_metric": "bandwidth_gbps", **(
                {"link_transport": s["transport"]} if "links" in a.tables
                and s["transport"] in matrix_transports(a.tables["links"]) else {})})
            if not s["local"] and not _matrix_blocked(a.tables.get("links"))
            # a matrix in blocks of ranks draws no single link: the links table, filtered to the link's row
            else EvidenceView("communication-links", {}, rows={
                "group": s.get("group"), "src_rank": s["src"], "dst_rank": s["dst"], "transport": s["transport"]})
            if not s["local"]
            # the rule read the files' own link rows: their table, filtered to the row the sentence quotes
            else EvidenceView("communication-links-local", {}, rows={
                "rank": s["reported_by"], "src_local": s["src"], "dst_local": s["dst"],
                "transport": s["transport"]})))
    return out


#: Communication and wait get their own y scale when one series' largest value is this many times the other's:
#: on one linear axis a 2 ms bar next to 1000 ms ones is invisible.
SEPARATE_SCALES_RATIO = 10.0


def _op_spread(sp: pd.DataFrame, total: int) -> Figure:
    """Per op type and group a box of the ranks' median call durations (whisker min-max, box q1-q3, tick median)
    and the slowest rank's point, named in the tooltip."""
    unit, factor = fmt.unit_for("ms", sp["max_ms"])
    df = sp.assign(label=[f"{o} · {g}" if g else o for o, g in zip(sp["op_type"], sp["group"].astype(str))])
    for c in ("min_ms", "q1_ms", "median_ms", "q3_ms", "max_ms"):
        df[c + "_u"] = df[c] / factor
    df = df[["label", "op_type", "group", "ranks", "slowest_rank", "slow_ratio", "last_rank",
             "min_ms_u", "q1_ms_u", "median_ms_u", "q3_ms_u", "max_ms_u"]]
    y = vl.Y("label:N", title=None, sort=None)
    base = vl.Chart(df)
    tips = [vl.Tooltip("op_type:N", title="Op type"), vl.Tooltip("group:N", title="Group"),
            vl.Tooltip("ranks:Q", title="Ranks", format=",d"), tip("median_ms_u", "Median over ranks", unit),
            tip("max_ms_u", "Slowest rank's median", unit), vl.Tooltip("slowest_rank:O", title="Slowest rank"),
            vl.Tooltip("slow_ratio:Q", title="Slowest / median", format=",.3~g"),
            vl.Tooltip("last_rank:O", title="Entered last most often")]
    whisker = base.mark_rule(color=palette.ROLE["comm"]).encode(
        y=y, x=vl.X("min_ms_u:Q", axis=vl.Axis(**axis("Median call duration per rank", unit))), x2="max_ms_u:Q",
        tooltip=tips)
    box = base.mark_bar(color=palette.ROLE["comm_overlapped"], size=12).encode(y=y, x="q1_ms_u:Q", x2="q3_ms_u:Q",
                                                                               tooltip=tips)
    med = base.mark_tick(color=palette.ROLE["comm"], thickness=2, size=14).encode(y=y, x="median_ms_u:Q",
                                                                                  tooltip=tips)
    slow = base.mark_point(color=palette.ROLE["wait"], filled=True, opacity=1, size=60).encode(y=y, x="max_ms_u:Q",
                                                                                   tooltip=tips)
    chart = vl.fit(whisker + box + med + slow, max(80, 26 * len(df)))
    more = f" The {len(df)} most uneven of {total}; the table has them all." if total > len(df) else ""
    return Figure("communication-op-spread", "Call durations per op type across ranks", to_spec(chart),
                  caption="Per op type and group, each rank's median call duration: the line spans the fastest to "
                          "the slowest rank, the box the middle half, the tick the median; the red point is the "
                          "slowest rank (named in the tooltip, with the rank that entered the calls last most often)."
                          + more,
                  alt="Boxes of the ranks' median call duration per communication op type and group")


def _rank_bars(per_rank: pd.DataFrame, prs: pd.DataFrame) -> Figure:
    per_rank, prs = (df if "wait_ms" in df else df.assign(wait_ms=math.nan) for df in (per_rank, prs))
    avg = per_rank.assign(step_key="avg")[["rank", "step_key", "comm_op_ms", "wait_ms"]]
    per = prs.assign(step_key=prs["step"].astype(str))[["rank", "step_key", "comm_op_ms", "wait_ms"]]
    wide = pd.concat([avg, per], ignore_index=True)
    top = {c: float(wide[c].abs().max()) if wide[c].notna().any() else 0.0 for c in ("comm_op_ms", "wait_ms")}
    hi, lo = max(top.values()), min(top.values())
    separate = lo > 0 and hi / lo >= SEPARATE_SCALES_RATIO
    shared_unit = fmt.unit_for("ms", pd.concat([wide["comm_op_ms"], wide["wait_ms"]]))
    base = vl.Chart(wide).transform_filter("datum.step_key == step").transform_filter(GROUP_FILTER)
    rows = []
    for i, (col, label, role) in enumerate((("comm_op_ms", OP_AXIS, "comm"), ("wait_ms", "Wait", "wait"))):
        unit, factor = fmt.unit_for("ms", wide[col]) if separate else shared_unit
        last = i == 1
        rows.append(in_unit(base, factor, col).mark_bar(color=palette.ROLE[role]).encode(
            x=vl.X("rank:O", title="Rank" if last else None,
                    axis=vl.Axis(labelOverlap=True, labelAngle=0, labels=last, ticks=last)),
            y=vl.Y(f"{col}_u:Q", axis=vl.Axis(**axis(label, unit))),
            tooltip=[vl.Tooltip("rank:O", title="Rank"), tip(f"{col}_u", label, unit)],
        ).properties(width="container", height=150 if separate else 120))
    chart = fit_concat(vl.vconcat(*rows, spacing=6).add_params(vl.param(name="step", value="avg"),
                                                               vl.param(name="comm_group", value="all"))
                       .resolve_scale(y="independent" if separate else "shared"))
    how = ("each on its own scale (one is over " f"{SEPARATE_SCALES_RATIO:g}× the other)" if separate
           else "on the same scale")
    return Figure("communication-ranks", "Communication and waiting time per rank", to_spec(chart),
                  caption=f"Communication (top) and waiting (bottom) per rank, {how}, for the selected step or the "
                          "average, and the ranks of the selected process group.",
                  alt="Bars of communication and wait time per rank")


#: Widest plot area (px) of the link matrix: with its axis and colour legend (~95 px) it fits the printed page's
#: 692 px box (a 16-rank matrix at 640 px drew 734 px and was cut on paper).
MATRIX_PLOT_MAX = 576
#: The link matrix writes each cell's value in it up to this many ranks a side.
MATRIX_TEXT_MAX_SIDE = 16


def _link_metrics(df: pd.DataFrame) -> dict:
    """{column: (label, fmt kind, values)} of the link metrics the 'Link metric' control switches."""
    return {"time_ms": ("Time", "ms", df["time_ms"]), "size_mb": ("Size", "mb", df["size_mb"]),
            "bandwidth_gbps": ("Bandwidth", "gbps", df["bandwidth_gbps"])}


def matrix_transports(links: pd.DataFrame) -> list[str]:
    """The transports the matrix's Transport control offers (seed #89's transport view): those of the links, in
    natural order, when there are two or more; else none (the control would have one choice). Self links
    (:func:`self_links`) are not counted: a transport view shows rank-to-rank links (a transport whose only links are
    self links, like on-chip LOCAL copies, would show an empty matrix)."""
    if "transport" not in links:
        return []
    if "src_rank" in links and "dst_rank" in links:
        links = links[~self_links(links, "src_rank", "dst_rank")]
    ts = sorted({str(t) for t in links["transport"].dropna()}, key=natural_key)
    return ts if len(ts) > 1 else []


def _matrix_cells(links: pd.DataFrame, src: str, dst: str, block: int, transports: list[str]) -> pd.DataFrame:
    """Matrix cells: Σ size and time per (source, destination) (blocks of ``block`` ranks), bandwidth = size / time;
    with ``transports``, one set of cells per transport (``transport``) and one over all of them ("all")."""
    lk = links.assign(**{src: (links[src] // block) * block, dst: (links[dst] // block) * block})
    parts = [lk.groupby([src, dst], as_index=False)[["size_mb", "time_ms"]].sum().assign(transport="all")]
    if transports:  # a transport's view: its rank-to-rank links (self links only in "all")
        lk = lk[~self_links(links, src, dst)]
        parts.append(lk.assign(transport=lk["transport"].astype(str)).groupby(
            [src, dst, "transport"], as_index=False)[["size_mb", "time_ms"]].sum())
    out = pd.concat(parts, ignore_index=True)
    out["bandwidth_gbps"] = (out["size_mb"] / out["time_ms"]).where(out["time_ms"] > 0)
    out["self_link"] = (out[src] == out[dst]) if block == 1 else False
    return out


def self_links(links: pd.DataFrame, src: str, dst: str) -> pd.Series:
    """Per link row: source == destination. The profilers write such links themselves (they are not an artefact of
    the group-local -> global mapping): hccl_raw's ``"i-i"`` SDMA entries are a rank's copies within its own memory
    (an HCCL Memcpy whose peer is the rank itself; research notes on the seed's cluster pages §2.3:
    the pp2x4 cluster fixture writes "0-0"), the NPU communication matrix has LOCAL on-chip links. They move no data
    between ranks, so the matrix draws them grey, off the colour scale of the rank-to-rank links."""
    return links[src] == links[dst]


#: the matrix's transport filter (``link_transport``: "all" or a transport name, data)
TRANSPORT_FILTER = "datum.transport == link_transport"


def _matrix_blocked(links: pd.DataFrame | None) -> bool:
    """Whether the link matrix draws ranks in blocks (more than MATRIX_MAX_SIDE ranks a side): no single link."""
    if links is None or links.empty or "src_rank" not in links:
        return False
    return int(max(links["src_rank"].max(), links["dst_rank"].max())) + 1 > MATRIX_MAX_SIDE


def _matrix(links: pd.DataFrame, src: str, dst: str, title: str, grouped: bool = False) -> Figure:
    side = int(max(links[src].max(), links[dst].max())) + 1 if not links.empty else 1
    transports = matrix_transports(links)
    block = math.ceil(side / MATRIX_MAX_SIDE) if side > MATRIX_MAX_SIDE else 1
    own = self_links(links, src, dst)
    if block > 1:  # a diagonal block mixes self links with links between its ranks: left out
        links = links[~own]
    lk = _matrix_cells(links, src, dst, block, transports)
    caption = "Source rank (rows) to destination rank (columns); switch the metric above."
    if own.any():
        caption += (" A rank's links to itself (its own copies the profiler records as links, e.g. on-chip / local "
                    + ("SDMA copies) are left out of the blocks." if block > 1 else
                       "SDMA copies) are the grey diagonal cells, kept off the colour scale."))
    if transports:
        caption += (" The Transport control keeps one transport's links (All: every transport summed"
                    + ("; self links only in All)." if self_links(links, src, dst).any() else ")."))
    if side > MATRIX_MAX_SIDE:
        caption += f" Ranks are drawn in blocks of {block} (sums; bandwidth = size/time of the block)."
    shown = min(side, MATRIX_MAX_SIDE)
    cell = band(shown, 48, 3, MATRIX_PLOT_MAX)
    value, units = metric_switch("link_metric", _link_metrics(lk))
    text = shown <= MATRIX_TEXT_MAX_SIDE
    blocked = side > MATRIX_MAX_SIDE
    grouped_filter = not blocked and src == "src_rank"
    src_data = vl.Chart(lk).transform_filter(TRANSPORT_FILTER)
    if grouped_filter:
        src_data = src_data.transform_filter(GROUP_LINK_FILTER)
    # the colour scale (and the ink on it) spans the rank-to-rank links only; self links get a fixed grey (pos 1:
    # dark ink)
    # the axes keep every rank (of the chosen process group) whichever transport is shown: the matrix keeps its
    # shape, and a transport with no link in the group shows an empty grid with a note rather than nothing
    ranks = sorted({int(v) for v in lk[src]} | {int(v) for v in lk[dst]})
    domain = vl.Scale(domain={"expr": "isArray(comm_group) ? comm_group : matrix_ranks"} if grouped_filter
                      else ranks)
    base = scale_position(src_data.transform_calculate(value=value)
                          .transform_calculate(scaled="datum.self_link ? null : datum.value"), "scaled") \
        .transform_calculate(pos="datum.self_link ? 1 : datum.pos").encode(
        x=vl.X(f"{dst}:O", title=f"Destination {title.lower()}", scale=domain,
               axis=vl.Axis(labelOverlap=True, labelAngle=0)),
        y=vl.Y(f"{src}:O", title=f"Source {title.lower()}", scale=domain, axis=vl.Axis(labelOverlap=True)))
    tips = [vl.Tooltip(f"{src}:O", title="Source"), vl.Tooltip(f"{dst}:O", title="Destination"),
            vl.Tooltip("transport:N", title="Transport"),
            tip("time_ms", "Time", "ms"), tip("size_mb", "Size", "MB"), tip("bandwidth_gbps", "Bandwidth", "GB/s")]
    chart = base.transform_filter("!datum.self_link").mark_rect().encode(
        color=vl.Color("value:Q", scale=sequential(), legend=vl.Legend(title=None, format=fmt.D3_FORMAT)),
        tooltip=tips)
    if lk["self_link"].any():
        chart = chart + base.transform_filter("datum.self_link").mark_rect(color=palette.ROLE["other"]).encode(
            tooltip=tips + [vl.Tooltip("self_link:N", title="Link to itself")])
    if text:
        chart = chart + cell_labels(base, vl.Text("value:Q", format=fmt.D3_SHORT), tips, 10 if cell >= 36 else 8)
    if transports or (grouped_filter and grouped):
        # a transport and a process group can leave no link (SDMA inside a cross-host group): say so in the plot
        # (counted over every row: an aggregate of no rows gives no row to draw)
        shown_test = TRANSPORT_FILTER + (f" && ({GROUP_LINK_FILTER})" if grouped_filter else "")
        chart = chart + vl.Chart(lk).transform_calculate(shown=f"({shown_test}) ? 1 : 0") \
            .transform({"aggregate": [{"op": "sum", "field": "shown", "as": "links"}]}) \
            .transform_filter("datum.links == 0") \
            .mark_text(align="left", baseline="top", fontSize=12) \
            .encode(x=vl.value(0), y=vl.value({"expr": "height + 38"}),
                    text=vl.value("No link of the chosen transport between these ranks"))
    params = [vl.param(name="link_metric", value="bandwidth_gbps"), units,
              vl.param(name="link_transport", value="all")]
    if grouped_filter:
        params += [vl.param(name="comm_group", value="all"), vl.param(name="matrix_ranks", value=ranks)]
        caption += " The process group chosen above keeps its own links." if grouped else ""
    chart = chart.add_params(*params).properties(
        width={"step": cell}, height={"step": cell},
        title=vl.TitleParams(text={"expr": "link_metric_units[link_metric][0]"}, anchor="start", fontSize=12))
    if text:
        caption += " Each cell shows its value in the unit of the title."
    return Figure("communication-matrix", "Link matrix", to_spec(chart), caption=caption,
                  alt="Adjacency matrix of links between ranks")


def _boxes(link_ops: pd.DataFrame) -> Figure:
    metrics = _link_metrics(link_ops)
    value, units = metric_switch("link_metric", metrics)
    links = sorted(link_ops["link"].unique(), key=natural_key)
    # the x domain per metric, given (0 .. largest value in the metric's unit): a data-driven domain would take the
    # extent of every layer of the box plot, and its outlier layer is empty for a metric without outliers (Vega
    # warns "Infinite extent")
    extent = {}
    for col, (_, _, vals) in metrics.items():
        v = pd.to_numeric(vals, errors="coerce").to_numpy(float) / units["value"][col][1]
        v = v[np.isfinite(v)]
        extent[col] = [min(0.0, float(v.min())) if len(v) else 0.0, float(v.max()) if len(v) and v.max() > 0 else 1.0]
    box = (
        vl.Chart(link_ops).transform_calculate(value=value)
        .mark_boxplot(extent=1.5, color=palette.ROLE["comm"], size=12)
        .encode(y=vl.Y("link:N", title="Link", sort=links, axis=vl.Axis(labelLimit=240)),
                x=vl.X("value:Q", title=None, axis=vl.Axis(format=fmt.D3_FORMAT),
                       scale=vl.Scale(domain={"expr": "link_metric_extent[link_metric]"}, nice=True))))
    # the params sit on a one-layer wrapper, not on the boxplot: Vega-Lite warns "Selection not supported for
    # boxplot yet" for any params on a boxplot unit (also plain variables like these)
    chart = (
        vl.layer(box).add_params(vl.param(name="link_metric", value="bandwidth_gbps"), units,
                                 vl.param(name="link_metric_extent", value=extent))
        .properties(title=vl.TitleParams(text={"expr": "link_metric_units[link_metric][0]"}, anchor="start",
                                          fontSize=12)))
    return Figure("communication-link-boxes", "Per-link spread of operator time, size and bandwidth",
                  to_spec(fit(chart, {"step": 20})),
                  caption=f"One box per link (the {BOX_LINKS} busiest): quartiles, whiskers at 1.5 × IQR, outliers as "
                          "dots; switch the metric with 'Link metric'.", alt="Box plots per link")


#: Graph nodes sit on the unit circle, their labels on this radius.
LABEL_RADIUS = 1.15


def _graph(per_rank: pd.DataFrame, links: pd.DataFrame, grouped: bool = False,
           shown: "list[int] | None" = None) -> Figure:
    """Node-link graph, laid out in Python on a circle (deterministic); drawn with Vega-Lite rules and circles.
    ``shown``: the ranks the per-rank charts draw (thresholds.ranks_shown, above PAGE_RANKS_ALL ranks): with every
    group chosen, the graph draws only the links with an end among them (1,024 ranks: 8,960 links, a solid disc that
    took 0.2-0.4 s to draw); a process group chosen draws all of its links."""
    ranks = sorted(set(per_rank["rank"]) | set(links["src_rank"]) | set(links["dst_rank"]))
    angle = {r: 2 * math.pi * i / max(1, len(ranks)) for i, r in enumerate(ranks)}
    pos = {r: (math.cos(a), math.sin(a)) for r, a in angle.items()}
    pr = per_rank.set_index("rank")
    nodes = pd.DataFrame({"rank": ranks, "x": [pos[r][0] for r in ranks], "y": [pos[r][1] for r in ranks],
                          # labels just outside the circle, away from the node and its edges
                          "lx": [LABEL_RADIUS * pos[r][0] for r in ranks],
                          "ly": [LABEL_RADIUS * pos[r][1] for r in ranks]})
    nodes["comm_ms"] = [float(pr["comm_op_ms"].get(r, 0.0)) if r in pr.index else 0.0 for r in ranks]
    nodes["wait_ms"] = [float(pr["wait_ms"].get(r, 0.0)) if r in pr.index and "wait_ms" in pr else 0.0
                        for r in ranks]
    nodes["wait_share"] = [float(pr["wait_ratio"].get(r, math.nan)) if r in pr.index else math.nan for r in ranks]
    e = links[links["src_rank"] != links["dst_rank"]].groupby(["src_rank", "dst_rank"], as_index=False)[
        ["size_mb", "time_ms"]].sum()
    e["x"], e["y"] = e["src_rank"].map(lambda r: pos[r][0]), e["src_rank"].map(lambda r: pos[r][1])
    e["x2"], e["y2"] = e["dst_rank"].map(lambda r: pos[r][0]), e["dst_rank"].map(lambda r: pos[r][1])
    link_filter, focus_note = GROUP_LINK_FILTER, ""
    if shown is not None:
        touch = e["src_rank"].isin(set(shown)) | e["dst_rank"].isin(set(shown))
        focus_note = (f" {len(ranks):,} ranks: with every group, the graph draws the {int(touch.sum()):,} of "
                      f"{len(e):,} links with an end among the {len(shown)} ranks the per-rank charts draw"
                      + ("; a process group chosen, all of its links." if grouped else "."))
        if grouped:  # a group chosen in the page draws all of its links: they stay in the data
            e["focus"] = touch
            link_filter = ("isArray(comm_group) ? (indexof(comm_group, datum.src_rank) >= 0 && "
                           "indexof(comm_group, datum.dst_rank) >= 0) : datum.focus")
        else:
            e = e[touch]
    size_unit, size_f = fmt.unit_for("mb", e["size_mb"])
    time_unit, time_f = fmt.unit_for("ms", nodes["comm_ms"])
    hidden = vl.Axis(labels=False, ticks=False, grid=False, domain=False, title=None)
    extent = vl.Scale(domain=[-LABEL_RADIUS - 0.1, LABEL_RADIUS + 0.1])
    x, y = vl.X("x:Q", axis=hidden, scale=extent), vl.Y("y:Q", axis=hidden, scale=extent)
    edges = in_unit(vl.Chart(e).transform_filter(link_filter), size_f, "size_mb").mark_rule(
        opacity=0.6, color=palette.ROLE["comm"]).encode(
        x=x, y=y, x2="x2:Q", y2="y2:Q",
        strokeWidth=vl.StrokeWidth("size_mb_u:Q", scale=vl.Scale(range=[0.5, 6]),
                                    legend=vl.Legend(**axis("Size", size_unit))),
        tooltip=[vl.Tooltip("src_rank:O", title="Source"), vl.Tooltip("dst_rank:O", title="Destination"),
                 tip("size_mb_u", "Size", size_unit), tip("time_ms", "Time", "ms")])
    points = in_unit(vl.Chart(nodes).transform_filter(GROUP_FILTER), time_f, "comm_ms", "wait_ms").mark_circle(
        opacity=0.95).encode(
        x=x, y=y,
        size=vl.Size("comm_ms_u:Q", scale=vl.Scale(range=[40, 600]),
                      legend=vl.Legend(**axis(OP_AXIS, time_unit), symbolFillColor=palette.ROLE["comm"])),
        color=vl.Color("wait_share:Q", scale=vl.Scale(scheme=palette.SEQUENTIAL_ON_BACKGROUND, domain=[0, 1]),
                        legend=vl.Legend(**axis("Waiting share", kind="ratio"))),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), tip("comm_ms_u", OP_AXIS, time_unit),
                 tip("wait_ms_u", "Wait", time_unit), tip("wait_share", "Waiting share", kind="ratio")])
    labels = vl.Chart(nodes).transform_filter(GROUP_FILTER).mark_text(fontSize=11).encode(
        x=vl.X("lx:Q", axis=hidden, scale=extent),
                                                            y=vl.Y("ly:Q", axis=hidden, scale=extent), text="rank:O")
    side = 420 if len(ranks) <= 16 else 560
    # rank labels up to 64 ranks (beyond, they overlap: the tooltips name the ranks); the nodes were drawn twice there
    chart = (edges + points + labels if len(ranks) <= 64 else edges + points).properties(width=side, height=side) \
        .add_params(vl.param(name="comm_group", value="all"))
    return Figure("communication-graph", "Who talks to whom", to_spec(chart),
                  caption="Node size = communication op time; colour = wait ratio, wait / (wait + transit) "
                          "(light ranks mostly wait); edge width = bytes moved."
                          + (" The process group chosen above keeps its ranks and links." if grouped else "")
                          + focus_note,
                  alt="Node-link graph of ranks and links")
