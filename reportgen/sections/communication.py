"""Communication: per rank (time, wait, wait ratio), per operator, per link (global ranks), with the
seed's slow-link rule.

Sources and definitions:

* Ascend ``communication.json`` / ``communication_matrix.json`` (../shared/research/
  ascend-profiler-output-and-msprof-analyze.md §2.2-2.3): per op Elapse, Transit, Wait, Synchronization,
  Idle (master plane); sizes per transport (all planes). Per rank and group the sums equal
  msprof-analyze's ``cluster_communication.json`` "Total Op Info"; wait ratio = wait / (wait + transit)
  (CANN's formula). Links from the matrix's ``total`` entries, summed over the ranks that report them
  and over steps, keyed by GLOBAL ranks; bandwidth = size / time.
* MindSpore Insight ``hccl_raw_*`` (../shared/research/mindinsight-cluster-profiling.md §2.3, §3.3):
  communication_cost and wait_cost per rank and step (both unit generations normalised by the reader);
  link src/dst are the HCCL group's LOCAL ranks and the file does not say which group: they are shown
  as such (``src_local``/``dst_local``), never passed off as global ranks.
* PyTorch traces: collectives matched across the ranks of their group by order (the n-th collective of
  the same kind in the same group); transit = the shortest duration among the group's ranks (the time
  the transfer itself needs once everyone has arrived), wait = own duration - transit. algbw = bytes /
  duration; busbw = algbw × factor (all_reduce 2(n-1)/n; all_gather, reduce_scatter, all_to_all (n-1)/n;
  others 1), the nccl-tests convention.
* Slow link (seed rule ``cluster_link``, MindInsight helper): per transport type, a link whose bandwidth
  is more than 20% below the mean bandwidth of that type's links (self links excluded).
"""

from __future__ import annotations

import math
from typing import Any

from .. import charts as vl
import numpy as np
import pandas as pd

from .. import thresholds as th
from .. import fmt, palette
from ..charts import (axis, band, cell_labels, fit, fit_concat, in_unit, metric_switch, natural_key, role_color,
                      scale_position, sequential, tip, to_spec)
from .. import facts
from ..errors import Unavailable
from ..timeline import assign_steps
from ..model import Run
from ..report import Analysis, Column, Control, EvidenceView, Figure, Finding, Table, View, natural_order

ID = "communication"
TITLE = "Communication"

#: beyond this many ranks the adjacency matrix is drawn in blocks of ranks
MATRIX_MAX_SIDE = 128
BUSBW_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "allreduce": lambda n: 2 * (n - 1) / n,
                "all_gather": lambda n: (n - 1) / n, "allgather": lambda n: (n - 1) / n,
                "reduce_scatter": lambda n: (n - 1) / n, "reducescatter": lambda n: (n - 1) / n,
                "all_to_all": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n}


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests bus bandwidth factor for a collective over n ranks."""
    f = BUSBW_FACTOR.get((collective or "").lower())
    return f(n) if f and n > 0 else 1.0


# --------------------------------------------------------------------------- per family


def _ascend(run: Run) -> dict:
    ops = run.table("comm_ops")
    bw = run.table("comm_bandwidth")
    sizes = None
    if bw is not None:
        sizes = bw.groupby(["rank", "step", "op"], as_index=False)[["size_mb", "time_ms"]].sum()
    o = ops.copy()
    if sizes is not None:
        o = o.merge(sizes.rename(columns={"time_ms": "link_time_ms"}), on=["rank", "step", "op"], how="left")
    else:
        o["size_mb"], o["link_time_ms"] = math.nan, math.nan
    o["bandwidth_gbps"] = (o["size_mb"] / o["link_time_ms"]).where(o["link_time_ms"] > 0)
    ops_out = o[["rank", "op", "group", "step", "kind", "op_type", "elapse_ms", "transit_ms", "wait_ms", "sync_ms",
                 "idle_ms", "size_mb", "bandwidth_gbps"]]
    prs = o.groupby(["rank", "step"], as_index=False)[["elapse_ms", "transit_ms", "wait_ms", "sync_ms"]].sum() \
        .rename(columns={"elapse_ms": "comm_ms"})
    links = None
    m = run.table("comm_matrix")
    if m is not None:
        tot = m[m["stat"] == "total"]
        links = tot.groupby(["group", "src_rank", "dst_rank", "transport"], as_index=False)[["size_mb", "time_ms"]].sum()
        links["bandwidth_gbps"] = (links["size_mb"] / links["time_ms"]).where(links["time_ms"] > 0)
    return {"ops": ops_out, "per_rank_step": prs, "links": links, "avg_source": "computed",
            "wait_formula": "wait / (wait + transit)",
            "links_steps": max(1, int(m["step"].nunique())) if m is not None else 1}


def _mindinsight(run: Run) -> dict:
    prs = run.table("comm_rank_step")
    avg = run.table("mi_comm_rank_avg")
    ops = run.table("mi_comm_ops")
    out = {"per_rank_step": prs.copy(), "avg_source": "computed", "wait_formula": "wait / (communication + wait)"}
    if avg is not None:
        out["per_rank_avg"] = avg[["rank", "comm_ms", "wait_ms"]].copy()
        out["avg_source"] = "file"
    if ops is not None:
        o = ops.copy()
        for col in ("group", "elapse_ms", "transit_ms", "size_mb", "bandwidth_gbps"):
            if col not in o:
                o[col] = None if col == "group" else math.nan
        o["elapse_ms"] = o["comm_ms"]
        out["ops"] = o[["rank", "op", "group", "step", "elapse_ms", "transit_ms", "wait_ms", "size_mb", "bandwidth_gbps"]]
    links = run.table("mi_links")
    if links is not None:
        lk = links[links["op"].isna()]
        sel = lk[lk["step"] == -1] if (lk["step"] == -1).any() else lk
        out["links_local"] = sel[["rank", "src_local", "dst_local", "transport", "time_ms", "size_mb",
                                  "bandwidth_gbps"]].reset_index(drop=True)
    return out


_NCCL_OP = [("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
            ("alltoall", "all_to_all"), ("sendrecv", "send_recv"), ("broadcast", "broadcast"), ("reduce", "reduce"),
            ("send", "send"), ("recv", "recv")]


def _kernel_collectives(run: Run) -> pd.DataFrame:
    """Communication kernels as collectives when the trace has no collective args on them (older PyTorch, ROCm)."""
    g = run.table("gpu_ops")
    if g is None:
        return pd.DataFrame()
    k = g[g["kind"] == "comm"]
    low = k["name"].str.lower().str.replace("_", "", regex=False)
    coll = pd.Series("other", index=k.index)
    for key, name in reversed(_NCCL_OP):
        coll[low.str.contains(key, regex=False)] = name
    return pd.DataFrame({"rank": k["rank"], "source": "gpu_kernel", "name": k["name"], "collective": coll,
                         "group_ranks": "", "group_name": "stream " + k["stream"].astype(str), "group_size": -1,
                         "in_mb": math.nan, "out_mb": math.nan, "start_ms": k["start_ms"], "dur_ms": k["dur_ms"]})


def _p2p_transit(sel: pd.DataFrame) -> None:
    """Point-to-point kernels with known peers: transit = the shorter of the send kernel and its matching receive
    kernel (the n-th send from a to b with the n-th receive on b from a, :func:`reportgen.p2p.issue_index`), so a receive that
    waited for a late sender is not counted as transfer time. The n-th receives of the two ranks of a pipeline pair
    are transfers in opposite directions: their minimum (the collectives' rule) says nothing. In place; a send or
    receive without its other half keeps no transit (NaN)."""
    if "dst_rank" not in sel or "src_rank" not in sel:
        return
    is_send, is_recv = sel["collective"] == "send", sel["collective"] == "recv"
    known = (is_send & (sel["dst_rank"] >= 0)) | (is_recv & (sel["src_rank"] >= 0))
    if not known.any():
        return
    p = sel[known]
    src = np.where(p["collective"] == "send", p["rank"], p["src_rank"]).astype(np.int64)
    dst = np.where(p["collective"] == "send", p["dst_rank"], p["rank"]).astype(np.int64)
    from ..p2p import issue_index

    p = p.assign(_src=src, _dst=dst)
    p["_n"] = issue_index(p, ["_src", "_dst", "collective"])
    both = p.groupby(["_src", "_dst", "_n"])["dur_ms"].agg(["min", "count"])
    p = p.join(both, on=["_src", "_dst", "_n"])
    sel.loc[p.index, "transit_ms"] = p["min"].where(p["count"] == 2)


def _kineto(run: Run) -> dict:
    coll = run.table("collectives")
    coll = coll if coll is not None else pd.DataFrame(columns=["source"])
    sel = coll[coll["source"] == "gpu_kernel"]
    source = "NCCL kernels with collective args"
    if sel.empty:
        sel, source = _kernel_collectives(run), "communication kernels (no collective args in this trace)"
    if sel.empty:
        for src, label in (("gloo", "gloo operations"), ("record_param_comms", "record_param_comms CPU ops")):
            sel = coll[coll["source"] == src]
            if not sel.empty:
                source = label
                break
    if sel.empty:
        raise Unavailable(
            "This PyTorch trace records no communication: no NCCL/RCCL kernels (nor kernels matching a "
            "--comm-pattern), no gloo operations and no record_param_comms ops. A single-process run has none; for "
            "a distributed run, profile every rank with the CUDA activity (NCCL kernels) or CPU activity (gloo).")
    sel = sel.copy()
    if "in_mb" not in sel or sel["in_mb"].isna().all():
        sel["in_mb"] = math.nan
        sel["out_mb"] = math.nan
    key = sel["group_ranks"].where(sel["group_ranks"].astype(str) != "", sel.get("group_name", ""))
    sel["group"] = key.astype(str)
    sel = sel.sort_values(["rank", "start_ms"])
    sel["n"] = sel.groupby(["rank", "group", "collective"]).cumcount()
    inst = sel.groupby(["group", "collective", "n"])["dur_ms"].agg(["min", "count"]).rename(
        columns={"min": "transit_ms", "count": "ranks_seen"})
    sel = sel.join(inst, on=["group", "collective", "n"])
    partial = (sel["group_size"] > 0) & (sel["ranks_seen"] < sel["group_size"])
    sel.loc[partial, "transit_ms"] = math.nan  # not every rank of the group is in the run: no fair minimum
    _p2p_transit(sel)
    sel["wait_ms"] = sel["dur_ms"] - sel["transit_ms"]
    sel["size_mb"] = sel[["in_mb", "out_mb"]].max(axis=1)
    n = sel["group_size"].where(sel["group_size"] > 0, sel["ranks_seen"])
    sel["bandwidth_gbps"] = (sel["size_mb"] / sel["dur_ms"]).where(sel["dur_ms"] > 0)  # MB/ms = GB/s
    factor: dict = {}  # a handful of (collective, group size) pairs among many ops
    sel["busbw_gbps"] = sel["bandwidth_gbps"] * [
        factor[ck] if ck in factor else factor.setdefault(ck, busbw_factor(ck[0], int(ck[1])))
        for ck in zip(sel["collective"], n)]
    steps = run.table("trace_steps")
    sel["step"] = assign_steps(sel, steps)  # the rank's step window holding the op's start; -1 outside every step
    ops = sel.rename(columns={"collective": "op_type"}).assign(op=sel["name"], elapse_ms=sel["dur_ms"])
    ops_out = ops[["rank", "op", "group", "step", "op_type", "elapse_ms", "transit_ms", "wait_ms", "size_mb",
                   "bandwidth_gbps", "busbw_gbps"]]
    prs = ops.groupby(["rank", "step"], as_index=False)[["elapse_ms", "transit_ms", "wait_ms"]].sum().rename(
        columns={"elapse_ms": "comm_ms"})
    # per-pair p2p links (send/recv matched by order, transfer = the shorter of the two kernels), when the trace
    # names the peers; NCCL collectives carry no per-link data
    return {"ops": ops_out, "per_rank_step": prs, "links": run.table("p2p_links"),
            "links_steps": max(1, len(run.steps)), "avg_source": "computed",
            "wait_formula": "wait / (wait + transit)", "kineto_source": source,
            "sizes_known": bool(sel["size_mb"].notna().any())}


def analyze(run: Run, options=None) -> Analysis:
    if run.table("comm_ops") is not None and "elapse_ms" in run.table("comm_ops"):  # per-op elapse (not MindInsight's)
        d = _ascend(run)
    elif run.table("comm_rank_step") is not None:
        d = _mindinsight(run)
    elif run.table("collectives") is not None or run.table("gpu_ops") is not None:
        d = _kineto(run)
    else:
        raise Unavailable(
            "No communication data in this run. MindSpore Insight: hccl_raw_<rank>.csv (profile with communication "
            "data); Ascend: communication.json / communication_matrix.json (profiler_level Level1 or higher); "
            "PyTorch: NCCL kernels, gloo or record_param_comms events in the trace.")
    prs = d["per_rank_step"]
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
    file_avg = d.pop("per_rank_avg", None)
    if "transit_ms" in per_rank and per_rank["transit_ms"].notna().any():
        per_rank["wait_ratio"] = (per_rank["wait_ms"] / (per_rank["wait_ms"] + per_rank["transit_ms"])).where(
            (per_rank["wait_ms"] + per_rank["transit_ms"]) > 0)
    else:
        per_rank["wait_ratio"] = (per_rank["wait_ms"] / (per_rank["comm_ms"] + per_rank["wait_ms"])).where(
            (per_rank["comm_ms"] + per_rank["wait_ms"]) > 0)
    per_rank["stage"] = per_rank["rank"].map(run.stage_of)
    tables = {"per_rank": per_rank, "per_rank_step": prs}
    if file_avg is not None:
        tables["per_rank_file_average"] = file_avg  # MindInsight's hccl_raw average row, a reference only
    if d.get("ops") is not None:
        tables["ops"] = d["ops"]
    links = d.get("links")
    if links is not None and not links.empty:
        tables["links"] = links
    if d.get("links_local") is not None:
        tables["links_local"] = d["links_local"]
    link_ops = _link_ops(run)
    if link_ops is not None and not link_ops.empty:
        tables["link_ops"] = link_ops
    slow = _slow_links(links if links is not None else d.get("links_local"), d.get("links_steps", 1))
    metrics = {
        **extra_meta, "avg_source": "computed", "wait_ratio_formula": d["wait_formula"],
        "comm_ms_mean": float(per_rank["comm_ms"].mean()), "wait_ms_mean": float(per_rank["wait_ms"].mean()),
        "slow_link_threshold_ratio": th.LINK_BELOW_TYPE_MEAN,
    }
    if d.get("kineto_source"):
        metrics["collective_source"] = d["kineto_source"]
    outliers = transit_outliers(d.get("ops")) if run.source_format == "ascend" else []
    metrics["transit_outlier_ops"] = len(outliers)
    return Analysis(metrics=metrics, tables=tables, data={"slow_links": slow, "local_links": "links_local" in tables,
                                                          "op_sizes": operation_sizes(run, d.get("ops")),
                                                          "ranks": run.ranks, "transit_outliers": outliers,
                                                          "family": run.source_format,
                                                          "ops_steps": int(d["ops"]["step"].nunique())
                                                          if d.get("ops") is not None else 1,
                                                          "groups": _group_options(run, options)})


#: process groups the communication section's Group control offers (the largest first); the domains section has all
GROUP_OPTIONS = 64
#: the charts' filter on the Group control (``comm_group``: "all" or a list of ranks, data, never code)
GROUP_FILTER = "!isArray(comm_group) || indexof(comm_group, datum.rank) >= 0"
#: the same for a link: both ends in the group
GROUP_LINK_FILTER = ("!isArray(comm_group) || (indexof(comm_group, datum.src_rank) >= 0 && "
                     "indexof(comm_group, datum.dst_rank) >= 0)")


def _group_options(run: Run, options) -> list[tuple[Any, str]]:
    """The Group control's options: every process group of 2+ ranks that is not the whole run (strategy section's
    groups; the largest first, then by key), as (sorted ranks, label)."""
    from . import analysis_of
    try:
        groups = analysis_of("strategy", run, options).tables["groups"]
    except Unavailable:
        return []
    world = len(run.ranks)
    rows = [(sorted(int(r) for r in rs), str(g), str(n), str(k)) for g, n, k, rs in
            zip(groups["group"], groups["name"], groups["kind"], groups["ranks"]) if 2 <= len(rs) < max(world, 3)]
    rows.sort(key=lambda x: (-len(x[0]), natural_key(x[1])))
    seen, out = set(), []
    for ranks, g, n, k in rows:
        if tuple(ranks) in seen:
            continue
        seen.add(tuple(ranks))
        label = f"{g}" + (f" '{n}'" if n and n != g else "") + f" · {k} · {len(ranks)} ranks"
        out.append((ranks, label))
    return out[:GROUP_OPTIONS]


#: links shown in the per-link box plots (the busiest by total time)
BOX_LINKS = 30

#: the classes of operations the small-packet rule judges, each with its size limit (MB), in the order shown
SIZE_CLASSES = (("intra-node (HCCS/PCIE/SIO/SDMA)", th.SMALL_PACKET_SDMA_MB), ("RDMA", th.SMALL_PACKET_RDMA_MB),
                ("collective messages", th.SMALL_PACKET_RDMA_MB))


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
    part of the same operation, not a small one of their own; RDMA apart; LOCAL left out); without them (PyTorch,
    MindSpore), each collective's message size (class "collective messages", no transport known). Columns: rank,
    step, op, cls, limit_mb, size_mb, time_ms; only operations that move data."""
    limits = dict(SIZE_CLASSES)
    bw = run.table("comm_bandwidth")
    if bw is not None and not bw.empty:
        x = bw[(bw["size_mb"] > 0) & (bw["transport"] != "LOCAL")]
        x = x.assign(cls=x["transport"].map(lambda t: "RDMA" if t == "RDMA" else SIZE_CLASSES[0][0])) \
            .groupby(["rank", "step", "op", "cls"], as_index=False)[["size_mb", "time_ms"]].sum()
    elif ops is not None and "size_mb" in ops and ops["size_mb"].notna().any():
        g = ops[ops["size_mb"] > 0]
        x = pd.DataFrame({"rank": g["rank"], "step": g["step"], "op": g["op"], "cls": "collective messages",
                          "size_mb": g["size_mb"], "time_ms": g["elapse_ms"]})
    else:
        return None
    if x.empty:
        return None
    x["limit_mb"] = x["cls"].map(limits)
    return x[["rank", "step", "op", "cls", "limit_mb", "size_mb", "time_ms"]].reset_index(drop=True)


def _link_ops(run: Run) -> pd.DataFrame | None:
    """One row per operator on a link, for the per-link distributions of time, size and bandwidth."""
    m = run.table("comm_matrix")
    if m is not None:
        x = m[(m["stat"] != "total") & (m["src_rank"] != m["dst_rank"])]
        link = x["src_rank"].astype(str) + "→" + x["dst_rank"].astype(str) + " " + x["transport"]
        df = pd.DataFrame({"link": link, "op": x["op_name"], "time_ms": x["time_ms"], "size_mb": x["size_mb"]})
    else:
        lk = run.table("mi_links")
        if lk is None:
            return None
        x = lk[lk["op"].notna() & (lk["step"] >= 0) & (lk["src_local"] != lk["dst_local"])]
        link = ("rank " + x["rank"].astype(str) + ": " + x["src_local"].astype(str) + "→" + x["dst_local"].astype(str)
                + " " + x["transport"])
        df = pd.DataFrame({"link": link, "op": x["op"], "time_ms": x["time_ms"], "size_mb": x["size_mb"]})
    df = df[df["time_ms"] > 0]
    if df.empty:
        return None
    df["bandwidth_gbps"] = df["size_mb"] / df["time_ms"]
    busiest = df.groupby("link")["time_ms"].sum().nlargest(BOX_LINKS).index
    return df[df["link"].isin(busiest)].reset_index(drop=True)


def transit_outliers(ops: pd.DataFrame | None) -> list[dict]:
    """Per operator instance across the ranks that ran it: a rank whose transit time is above
    median + 3 x MAD (scaled to σ, 1.4826) of the group's transit times, and above it by at least 0.1 ms,
    moved its share of the data slowly — its link is suspect. Needs >= 3 ranks and a transit time per rank
    (Ascend: master-plane transit; PyTorch traces have one transit per instance by construction)."""
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
    ``steps``: how many steps the links table sums (Ascend matrix totals: all profiled steps; MindInsight: the
    per-step average row, 1); the excess time per step is what the link cost beyond the transport's mean."""
    if links is None or links.empty:
        return []
    src = "src_rank" if "src_rank" in links else "src_local"
    dst = "dst_rank" if "dst_rank" in links else "dst_local"
    lk = links[(links[src] != links[dst]) & links["bandwidth_gbps"].notna() & (links["transport"] != "LOCAL")
               & (links["size_mb"] >= th.LINK_MIN_MB)]
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
                        "local": src == "src_local", "group": worst.get("group"),
                        "reported_by": int(worst["rank"]) if "rank" in worst else None,
                        "excess_ms_per_step": max(0.0, float(worst["time_ms"]) - float(worst["size_mb"]) / mean)
                        / steps if mean > 0 else 0.0})
    return out


# --------------------------------------------------------------------------- present


#: The link charts' metric (each chart titles the chosen metric with its unit).
LINK_METRIC_CONTROL = Control("link_metric", "Link metric", [("time_ms", "Time"), ("size_mb", "Size"),
                                                             ("bandwidth_gbps", "Bandwidth")], "bandwidth_gbps")


def present(a: Analysis) -> View:
    m, t = a.metrics, a.tables
    per_rank, prs = t["per_rank"], t["per_rank_step"]
    findings = _findings(a)
    comm_ms = per_rank.set_index("rank")["comm_ms"]
    shown = th.ranks_shown(comm_ms, vl.finding_ranks(findings))
    warm = set(m.get("warmup_steps") or [])
    if shown is None:
        figures = [_rank_bars(per_rank, prs)]
    else:  # many ranks: the bars draw the extremes, the median and the findings' ranks; a histogram every rank
        figures = [_rank_bars(per_rank[per_rank["rank"].isin(shown)], prs[prs["rank"].isin(shown)]),
                   vl.rank_distribution("communication-distribution", comm_ms, shown, "Communication time",
                                        "average over the steps in scope" if warm else "average over the steps")]
    controls = [Control("step", "Step", [("avg", "Average (steps in scope)" if warm else "Average")] +
                        [(str(s), facts.step_label(s, warm))
                         for s in sorted(prs["step"].unique())], "avg")]
    links = t.get("links")
    if links is not None:
        grouped = bool(a.data.get("groups"))
        figures.append(_matrix(links, "src_rank", "dst_rank", "Rank", grouped))
        figures.append(_graph(per_rank, links, grouped))
        controls.append(LINK_METRIC_CONTROL)
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
    tables = [Table.from_frame("communication-per-rank", "Per rank", per_rank,
                               [Column("rank", "Rank", "rank"), Column("stage", "Stage", "int"),
                                Column("comm_ms", "Communication", "ms"), Column("wait_ms", "Wait", "ms"),
                                Column("wait_ratio", "Wait ratio", "ratio")])]
    ops = t.get("ops")
    if ops is not None:
        top = ops.sort_values("elapse_ms", ascending=False)
        cols = [Column("rank", "Rank", "rank"), Column("op", "Operator", "text"), Column("group", "Group", "text"),
                Column("step", "Step", "int"), Column("elapse_ms", "Elapse", "ms"),
                Column("transit_ms", "Transit", "ms"), Column("wait_ms", "Wait", "ms"),
                Column("size_mb", "Size", "mb"), Column("bandwidth_gbps", "Bandwidth", "gbps")]
        if "busbw_gbps" in ops:
            cols.append(Column("busbw_gbps", "Bus bandwidth", "gbps"))
        if "sync_ms" in ops:
            cols.insert(7, Column("sync_ms", "Synchronisation", "ms"))
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
                    "profiler wrote it."))
    if "links_local" in t:
        tables.append(Table.from_frame(
            "communication-links-local", "Links as the profiler wrote them (group-local ranks)", t["links_local"],
            [Column("rank", "Reported by rank", "rank"), Column("src_local", "Source (local)", "int"),
             Column("dst_local", "Destination (local)", "int"), Column("transport", "Transport", "text"),
             Column("time_ms", "Time", "ms"), Column("size_mb", "Size", "mb"),
             Column("bandwidth_gbps", "Bandwidth", "gbps")],
            caption="MindSpore's hccl_raw files give each link's ends as ranks inside its communication group and do "
                    "not say which group; they cannot be turned into global ranks, so they are shown as written."))
    notes = []
    if a.data.get("family") == "ascend":
        notes.append("Ascend times (elapse, transit, wait) come from each operator's master plane only, while sizes "
                     "count every plane: a wait ratio near 100% with data moved means the master stream only "
                     "waited while other planes transferred.")
    if m.get("collective_source"):
        notes.append(f"Collectives from {m['collective_source']}, matched across the ranks of their group by "
                     "order; transit = the shortest duration among those ranks, wait = the rest.")
    if shown is not None:  # many ranks: the bars draw the extremes, the median and the findings' ranks
        notes.append(vl.rank_cut_note(shown, len(per_rank), "communication time", "Per rank"))
    # MindInsight's communication time excludes the waiting (its ratio is wait / (communication + wait)); the
    # others' communication time holds it (wait / (wait + transit))
    apart = "(communication + wait)" in m["wait_ratio_formula"]
    summary = (f"Mean communication time per rank {fmt.ms(m['comm_ms_mean'])} per step, "
               f"{'and waiting' if apart else 'of which waiting'} {fmt.ms(m['wait_ms_mean'])} "
               f"{'besides it ' if apart else ''}(wait ratio = {m['wait_ratio_formula']}).")
    if m.get("steps_left_out"):
        left = ["outside every step" if x == -1 else str(x) for x in m["steps_left_out"]]
        notes.append(f"Communication of steps the run's step data lacks ({', '.join(left)}) is in the operator table "
                     "but left out of the per-rank and per-step numbers, so every section covers the same steps.")
    if "per_rank_file_average" in t:
        notes.append("The hccl_raw files' own average rows are kept as the table 'profiler average row'; per-rank "
                     "numbers here average the steps in scope, like every other section.")
        tables.append(Table.from_frame("communication-file-average", "Profiler average row (hccl_raw)",
                                       t["per_rank_file_average"], [Column("rank", "Rank", "rank"),
                                                                    Column("comm_ms", "Communication", "ms"),
                                                                    Column("wait_ms", "Wait", "ms")]))
    return View(summary=summary, figures=figures, tables=tables, findings=findings, controls=controls, notes=notes,
                ranks_drawn=list(shown or []))


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
        ends = "group-local ranks" if s["local"] else "ranks"
        out.append(Finding(
            "slow_link", "medium" if s["percent"] < 50 else "high", ID,
            f"The {s['transport']} link between {ends} {s['src']} → {s['dst']} runs at "
            f"{fmt.quantity(s['value'], 'gbps')}, "
            f"{fmt.quantity(s['percent'], 'pct')} below the mean of {s['transport']} links "
            f"({fmt.quantity(s['reference'], 'gbps')})"
            + (f", reported by rank {s['reported_by']}." if s["local"] and s["reported_by"] is not None else "."),
            # group-local ends are not global ranks: name the (global) rank whose file reported the link
            ranks=([s["reported_by"]] if s["reported_by"] is not None else []) if s["local"] else [s["src"], s["dst"]],
            links=[] if s["local"] else [[s["src"], s["dst"]]],
            evidence={"metric": "bandwidth_gbps", "value": s["value"], "reference": s["reference"],
                      "transport": s["transport"], "reported_by_rank": s["reported_by"],
                      # time beyond what the link's bytes take at its transport's mean bandwidth (MB / GB/s = ms)
                      "excess_ms_per_step": s["excess_ms_per_step"]},
            suggestion="Check that link's cabling / NIC / switch port and its HCCL or NCCL transport settings.",
            view=EvidenceView("communication-matrix" if not s["local"] else "communication-link-boxes"
                              if "link_ops" in a.tables else "communication-links-local",
                              {"link_metric": "bandwidth_gbps"})))
    return out


#: Communication and wait get their own y scale when one series' largest value is this many times the other's:
#: on one linear axis a 2 ms bar next to 1000 ms ones is invisible.
SEPARATE_SCALES_RATIO = 10.0


def _rank_bars(per_rank: pd.DataFrame, prs: pd.DataFrame) -> Figure:
    avg = per_rank.assign(step_key="avg")[["rank", "step_key", "comm_ms", "wait_ms"]]
    per = prs.assign(step_key=prs["step"].astype(str))[["rank", "step_key", "comm_ms", "wait_ms"]]
    wide = pd.concat([avg, per], ignore_index=True)
    top = {c: float(wide[c].abs().max()) if wide[c].notna().any() else 0.0 for c in ("comm_ms", "wait_ms")}
    hi, lo = max(top.values()), min(top.values())
    separate = lo > 0 and hi / lo >= SEPARATE_SCALES_RATIO
    shared_unit = fmt.unit_for("ms", pd.concat([wide["comm_ms"], wide["wait_ms"]]))
    base = vl.Chart(wide).transform_filter("datum.step_key == step").transform_filter(GROUP_FILTER)
    rows = []
    for i, (col, label, role) in enumerate((("comm_ms", "Communication", "comm"), ("wait_ms", "Wait", "wait"))):
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


#: The link matrix writes each cell's value in it up to this many ranks a side.
MATRIX_TEXT_MAX_SIDE = 16


def _link_metrics(df: pd.DataFrame) -> dict:
    """{column: (label, fmt kind, values)} of the link metrics the 'Link metric' control switches."""
    return {"time_ms": ("Time", "ms", df["time_ms"]), "size_mb": ("Size", "mb", df["size_mb"]),
            "bandwidth_gbps": ("Bandwidth", "gbps", df["bandwidth_gbps"])}


def _matrix(links: pd.DataFrame, src: str, dst: str, title: str, grouped: bool = False) -> Figure:
    lk = links.groupby([src, dst], as_index=False)[["size_mb", "time_ms"]].sum()
    lk["bandwidth_gbps"] = (lk["size_mb"] / lk["time_ms"]).where(lk["time_ms"] > 0)
    side = int(max(lk[src].max(), lk[dst].max())) + 1 if not lk.empty else 1
    caption = "Source rank (rows) to destination rank (columns); switch the metric above."
    if side > MATRIX_MAX_SIDE:
        block = math.ceil(side / MATRIX_MAX_SIDE)
        lk[src], lk[dst] = (lk[src] // block) * block, (lk[dst] // block) * block
        lk = lk.groupby([src, dst], as_index=False)[["size_mb", "time_ms"]].sum()
        lk["bandwidth_gbps"] = (lk["size_mb"] / lk["time_ms"]).where(lk["time_ms"] > 0)
        caption += f" Ranks are drawn in blocks of {block} (sums; bandwidth = size/time of the block)."
    shown = min(side, MATRIX_MAX_SIDE)
    cell = band(shown, 48, 3, 640)
    value, units = metric_switch("link_metric", _link_metrics(lk))
    text = shown <= MATRIX_TEXT_MAX_SIDE
    blocked = side > MATRIX_MAX_SIDE
    src_data = vl.Chart(lk) if blocked or src != "src_rank" else vl.Chart(lk).transform_filter(GROUP_LINK_FILTER)
    base = scale_position(src_data.transform_calculate(value=value), "value").encode(
        x=vl.X(f"{dst}:O", title=f"Destination {title.lower()}", axis=vl.Axis(labelOverlap=True, labelAngle=0)),
        y=vl.Y(f"{src}:O", title=f"Source {title.lower()}", axis=vl.Axis(labelOverlap=True)))
    tips = [vl.Tooltip(f"{src}:O", title="Source"), vl.Tooltip(f"{dst}:O", title="Destination"),
            tip("time_ms", "Time", "ms"), tip("size_mb", "Size", "MB"), tip("bandwidth_gbps", "Bandwidth", "GB/s")]
    chart = base.mark_rect().encode(
        color=vl.Color("value:Q", scale=sequential(), legend=vl.Legend(title=None, format=fmt.D3_FORMAT)),
        tooltip=tips)
    if text:
        chart = chart + cell_labels(base, vl.Text("value:Q", format=fmt.D3_SHORT), tips, 10 if cell >= 36 else 8)
    params = [vl.param(name="link_metric", value="bandwidth_gbps"), units]
    if not blocked and src == "src_rank":
        params.append(vl.param(name="comm_group", value="all"))
        caption += " The process group chosen above keeps its own links." if grouped else ""
    chart = chart.add_params(*params).properties(
        width={"step": cell}, height={"step": cell},
        title=vl.TitleParams(text={"expr": "link_metric_units[link_metric][0]"}, anchor="start", fontSize=12))
    if text:
        caption += " Each cell shows its value in the unit of the title."
    return Figure("communication-matrix", "Link matrix", to_spec(chart), caption=caption,
                  alt="Adjacency matrix of links between ranks")


def _boxes(link_ops: pd.DataFrame) -> Figure:
    value, units = metric_switch("link_metric", _link_metrics(link_ops))
    links = sorted(link_ops["link"].unique(), key=natural_key)
    chart = (
        vl.Chart(link_ops).transform_calculate(value=value)
        .mark_boxplot(extent=1.5, color=palette.ROLE["comm"], size=12)
        .encode(y=vl.Y("link:N", title="Link", sort=links, axis=vl.Axis(labelLimit=240)),
                x=vl.X("value:Q", title=None, axis=vl.Axis(format=fmt.D3_FORMAT)))
        .add_params(vl.param(name="link_metric", value="bandwidth_gbps"), units)
        .properties(title=vl.TitleParams(text={"expr": "link_metric_units[link_metric][0]"}, anchor="start",
                                          fontSize=12)))
    return Figure("communication-link-boxes", "Per-link spread of operator time, size and bandwidth",
                  to_spec(fit(chart, {"step": 20})),
                  caption=f"One box per link (the {BOX_LINKS} busiest): quartiles, whiskers at 1.5 × IQR, outliers as "
                          "dots; switch the metric with 'Link metric'.", alt="Box plots per link")


#: Graph nodes sit on the unit circle, their labels on this radius.
LABEL_RADIUS = 1.15


def _graph(per_rank: pd.DataFrame, links: pd.DataFrame, grouped: bool = False) -> Figure:
    """Node-link graph, laid out in Python on a circle (deterministic); drawn with Vega-Lite rules and circles."""
    ranks = sorted(set(per_rank["rank"]) | set(links["src_rank"]) | set(links["dst_rank"]))
    angle = {r: 2 * math.pi * i / max(1, len(ranks)) for i, r in enumerate(ranks)}
    pos = {r: (math.cos(a), math.sin(a)) for r, a in angle.items()}
    pr = per_rank.set_index("rank")
    nodes = pd.DataFrame({"rank": ranks, "x": [pos[r][0] for r in ranks], "y": [pos[r][1] for r in ranks],
                          # labels just outside the circle, away from the node and its edges
                          "lx": [LABEL_RADIUS * pos[r][0] for r in ranks],
                          "ly": [LABEL_RADIUS * pos[r][1] for r in ranks]})
    nodes["comm_ms"] = [float(pr["comm_ms"].get(r, 0.0)) if r in pr.index else 0.0 for r in ranks]
    nodes["wait_ms"] = [float(pr["wait_ms"].get(r, 0.0)) if r in pr.index else 0.0 for r in ranks]
    total = nodes["comm_ms"] + nodes["wait_ms"]
    nodes["wait_share"] = (nodes["wait_ms"] / total).where(total > 0)
    e = links[links["src_rank"] != links["dst_rank"]].groupby(["src_rank", "dst_rank"], as_index=False)[
        ["size_mb", "time_ms"]].sum()
    e["x"], e["y"] = e["src_rank"].map(lambda r: pos[r][0]), e["src_rank"].map(lambda r: pos[r][1])
    e["x2"], e["y2"] = e["dst_rank"].map(lambda r: pos[r][0]), e["dst_rank"].map(lambda r: pos[r][1])
    size_unit, size_f = fmt.unit_for("mb", e["size_mb"])
    time_unit, time_f = fmt.unit_for("ms", nodes["comm_ms"])
    hidden = vl.Axis(labels=False, ticks=False, grid=False, domain=False, title=None)
    extent = vl.Scale(domain=[-LABEL_RADIUS - 0.1, LABEL_RADIUS + 0.1])
    x, y = vl.X("x:Q", axis=hidden, scale=extent), vl.Y("y:Q", axis=hidden, scale=extent)
    edges = in_unit(vl.Chart(e).transform_filter(GROUP_LINK_FILTER), size_f, "size_mb").mark_rule(
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
                      legend=vl.Legend(**axis("Communication", time_unit), symbolFillColor=palette.ROLE["comm"])),
        color=vl.Color("wait_share:Q", scale=vl.Scale(scheme=palette.SEQUENTIAL_ON_BACKGROUND, domain=[0, 1]),
                        legend=vl.Legend(**axis("Waiting share", kind="ratio"))),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), tip("comm_ms_u", "Communication", time_unit),
                 tip("wait_ms_u", "Wait", time_unit), tip("wait_share", "Waiting share", kind="ratio")])
    labels = vl.Chart(nodes).transform_filter(GROUP_FILTER).mark_text(fontSize=11).encode(
        x=vl.X("lx:Q", axis=hidden, scale=extent),
                                                            y=vl.Y("ly:Q", axis=hidden, scale=extent), text="rank:O")
    side = 420 if len(ranks) <= 16 else 560
    chart = (edges + points + (labels if len(ranks) <= 64 else points)).properties(width=side, height=side) \
        .add_params(vl.param(name="comm_group", value="all"))
    return Figure("communication-graph", "Who talks to whom", to_spec(chart),
                  caption="Node size = communication time; colour = share of waiting in communication + waiting "
                          "(light ranks mostly wait); edge width = bytes moved."
                          + (" The process group chosen above keeps its ranks and links." if grouped else ""),
                  alt="Node-link graph of ranks and links")
