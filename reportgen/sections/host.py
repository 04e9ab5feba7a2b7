"""Host side and scheduling: what the host (the training script, the framework, the runtime) spends and makes the
device wait for. Each part reads its own canonical table and says "not in this run" when the run lacks it.

Sources and definitions:

* User ranges (table ``user_ranges``: ``record_function`` / NVTX ranges, mstx ranges): per rank and name the count,
  total, mean (= total / count) and longest occurrence. A range that holds a collective includes the wait for the
  other ranks (the waiting rank's range is the long one), so where the run has each occurrence's span
  (``user_range_spans``) and the collective spans (``comm_ops``: start_ms + elapse_ms per rank) a range's own time =
  its duration - its overlap with the union of the rank's collective spans, and the spread is ranked on the own
  time (ours). The rank spread of a name is the largest per-rank mean (own time per occurrence) over the median of
  the per-rank means (1 = every rank alike); the slowest rank is the one with that largest mean. HTA's
  ``get_gpu_user_annotation_breakdown`` is the peer (sum / max / mean per name; the HTA research notes §1.4); the
  rank spread is ours.
* Launch delay (table ``gpu_ops`` with ``launch_ts_ns``: the runtime call with the kernel's correlation id): the
  device start of a kernel minus the start of its launch call (ns on one clock). HTA's
  ``get_cuda_kernel_launch_stats`` subtracts the call's end instead (``max(0, gpu.ts - (cpu.ts + cpu.dur))``): ours
  is larger by the call's duration. Per rank the median, p90 and largest. Host-bound idle: per rank and stream the
  kernels in start order, the gap before each kernel = its start - the previous kernel's end on that stream; the gap
  is host-bound when the launch call started after the previous kernel ended (the stream had drained: the device
  waited for the host), HTA's ``host_wait`` rule of ``get_idle_time_breakdown`` (§1.5). Kernels that start together
  on a stream: the gap before them is host-bound when the earliest of their launches came after the drain (HTA takes
  them in its sort's order). Share = host-bound gaps / all gaps, summed over the rank's streams.
* All-to-all balance (table ``comm_ops``, ``op_type == "alltoall"`` with ``size_mb``): per rank and step the bytes
  sent by all-to-all ops; per step the imbalance = max over ranks / mean over ranks (1 = balanced); the run's
  imbalance is the largest of its steps. The peer is msprof-analyze's ``ep_load_balance`` recipe (expert-parallel
  MoE load: tokens per expert and rank); the all-to-all bytes carry the same imbalance when each token's bytes are
  equal.
* AI Core PMU per op type (``kernels`` with ``cube_util_ratio`` / ``aic_*`` / ``aiv_*``, kernel_details.csv with
  aic_metrics=PipeUtilization): per op type the duration-weighted mean of each ratio over the kernels that ran on
  that core (the ``aic_*`` ratios over kernels not on the vector core, ``aiv_*`` over kernels not on the cube core:
  the profiler writes 0 for the core a kernel did not use).
* L2 cache per op type and per rank (``l2_cache``: l2_cache.csv, l2_cache=True): the mean over the tasks of the
  profiler's hit rate and victim rate (the share of accesses that evicted a line), unweighted, each over the tasks
  where it was measured; per op type also the spread of the per-rank means (largest - smallest). MindStudio
  Insight's "AI Core metrics / L2 cache" view lists the same two rates per task.
* Host API time (``host_api``: api_statistic.csv, the CANN layer's own summary): the APIs with the most host time,
  per rank, as written.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .. import charts as vl
from .. import diagnosis, fmt, palette
from ..charts import to_spec
from ..errors import Unavailable
from ..focus import keep_sample
from ..model import Run
from ..report import Analysis, Column, Figure, Finding, Table, View
from ..frames import agg, positions_by
from . import needs_reason, sources

ID = "host"
TITLE = "Host side and scheduling"
#: any one part's table (each part's own requirement is in PARTS)
NEEDS = (("user_ranges", "gpu_ops.launch_ts_ns", "device_ops.launch_delay_ms", "comm_ops.size_mb", "kernels.cube_util_ratio",
          "kernels.aic_mac_ratio", "l2_cache", "host_api", "op_type_steps", "host_cpu", "hbm", "llc"),)
#: each part: (key, the table or column it reads, what it shows)
PARTS = [
    ("ranges", "user_ranges", "user ranges (record_function / NVTX / mstx) per rank"),
    ("launch", "gpu_ops.launch_ts_ns or device_ops.launch_delay_ms", "launch delay and host-bound device idle time"),
    ("alltoall", "comm_ops.size_mb", "all-to-all (MoE expert) load balance"),
    ("pmu", "kernels.cube_util_ratio", "AI Core PMU utilisation per op type"),
    ("l2", "l2_cache", "L2 cache hit and victim rate per op type"),
    ("api", "host_api", "host API (CANN) time"),
    ("dynamic", "op_type_steps", "per-iteration op time by operator type (dynamic shape)"),
    ("cpu", "host_cpu", "the host's CPU utilisation"),
    ("memory_bw", "hbm or llc", "HBM bandwidth and LLC hit rate per rank"),
]
#: operator types drawn in the per-iteration chart
CHART_TYPES = 8
#: names of user ranges shown (the most total time over all ranks); rows of the per-rank table
TOP_RANGES = 30
MAX_RANGE_ROWS = 3000
#: ranks in a chart (the tables have every rank)
CHART_RANKS = 128
#: APIs per rank in the host API table
TOP_APIS = 10
#: (no finding on the user ranges' spread: in clean runs a range that holds a collective differs 2x between ranks,
#: the waiting rank's; the heatmap and the table show the spread, the diagnosis names slow ranks)
#: an all-to-all step imbalance (max / mean over ranks) above this is a finding (ours; msprof-analyze's recipe
#: shows the load and sets no threshold)
ALLTOALL_IMBALANCE = 1.5
#: int64 max: a gpu op without a launch call (the readers' NO_LAUNCH, schema gpu_ops.launch_ts_ns)
NO_LAUNCH = np.iinfo(np.int64).max


def comm_overlap(spans: pd.DataFrame, comm: pd.DataFrame) -> pd.DataFrame:
    """Per rank, side and name of ``spans`` (rank, side, name, start_ms, dur_ms): comm_ms = the summed overlap of
    its occurrences with the union of the rank's collective spans ``comm`` (rank, start_ms, dur_ms), module doc.
    Ranks without collectives overlap 0."""
    spans = spans[spans["rank"].notna()]
    if spans.empty:
        return pd.DataFrame(columns=["side", "name", "rank", "comm_ms"])
    # each rank's rows as slices of arrays sorted once (ranks in order of appearance, each rank's rows in their
    # order: the rows a split by rank gives, in its order); a frame per rank cost ~2 ms, seconds at 1,024 ranks
    codes, uniq = pd.factorize(spans["rank"])
    a_all = spans["start_ms"].to_numpy(float)
    b_all = a_all + spans["dur_ms"].to_numpy(float)
    ov = np.zeros(len(spans))
    comm = comm[comm["rank"].notna()]
    comm_of = positions_by(comm["rank"].to_numpy())  # each rank's collective spans, looked up by equality
    c_start, c_dur = comm["start_ms"].to_numpy(float), comm["dur_ms"].to_numpy(float)
    for code, rows in positions_by(codes).items():
        c = comm_of.get(uniq[code])
        if c is not None:
            cs = c_start[c]
            ce = cs + np.maximum(c_dur[c], 0.0)
            o = np.argsort(cs, kind="stable")
            cs, ce = cs[o], np.maximum.accumulate(ce[o])
            new = np.r_[True, cs[1:] > ce[:-1]]  # a span starting after every earlier one ended opens a block
            ms, me = cs[new], np.r_[ce[np.flatnonzero(new)[1:] - 1], ce[-1]]
            cum = np.r_[0.0, np.cumsum(me - ms)]

            def covered(t):  # union time in [-inf, t]
                i = np.searchsorted(ms, t, side="right")  # blocks starting at or before t
                part = np.where(i > 0, np.minimum(t, me[np.maximum(i - 1, 0)]) - ms[np.maximum(i - 1, 0)], 0.0)
                return cum[np.maximum(i - 1, 0)] * (i > 0) + np.maximum(part, 0.0)
            ov[rows] = np.maximum(covered(b_all[rows]) - covered(a_all[rows]), 0.0)
    order = np.argsort(codes, kind="stable")
    out = pd.DataFrame({"rank": spans["rank"].to_numpy()[order], "side": spans["side"].to_numpy()[order],
                        "name": spans["name"].to_numpy()[order], "comm_ms": ov[order]})
    return out.groupby(["side", "name", "rank"], sort=False, as_index=False)["comm_ms"].sum()


def user_ranges(df: pd.DataFrame, overlap: pd.DataFrame | None = None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per rank, side and name: count, total_ms, mean_ms, max_ms, comm_ms, own_ms, own_mean_ms; per side and name:
    ranks, total_ms, the per-rank own means' median and max, the slowest rank, spread = max / median), module doc.
    ``overlap`` (:func:`comm_overlap`): the collective time inside; without it (or for a rank it lacks) the own time
    is the whole time."""
    per = agg(df.groupby(["side", "name", "rank"], sort=False),
              count=("count", "sum"), total_ms=("total_ms", "sum"), max_ms=("max_ms", "max")).reset_index()
    per["mean_ms"] = per["total_ms"] / per["count"].where(per["count"] > 0)
    if overlap is not None and not overlap.empty:
        per = per.merge(overlap[["side", "name", "rank", "comm_ms"]], on=["side", "name", "rank"], how="left")
    else:
        per["comm_ms"] = np.nan
    per["own_ms"] = per["total_ms"] - per["comm_ms"].fillna(0.0).clip(upper=per["total_ms"])
    per["own_mean_ms"] = per["own_ms"] / per["count"].where(per["count"] > 0)
    g = per.groupby(["side", "name"], sort=False)
    by = agg(g, ranks=("rank", "nunique"), count=("count", "sum"), total_ms=("total_ms", "sum"),
             comm_ms=("comm_ms", "sum"), median_mean_ms=("own_mean_ms", "median"),
             max_mean_ms=("own_mean_ms", "max")).reset_index()
    slow = per.loc[g["own_mean_ms"].idxmax().dropna().astype(int), ["side", "name", "rank"]]
    by = by.merge(slow.rename(columns={"rank": "slowest_rank"}), on=["side", "name"], how="left")
    by["spread_ratio"] = by["max_mean_ms"] / by["median_mean_ms"].where(by["median_mean_ms"] > 0)
    # the time the slowest rank spends in the range beyond the median rank's mean (its occurrences x the difference)
    occ = per.set_index(["side", "name", "rank"])["count"]
    n = [occ.get((s, nm, r), 0) for s, nm, r in zip(by["side"], by["name"], by["slowest_rank"])]
    by["excess_ms"] = (by["max_mean_ms"] - by["median_mean_ms"]) * np.asarray(n, dtype=float)
    by = by.sort_values(["total_ms", "name"], ascending=[False, True]).reset_index(drop=True)
    return per, by


def launches(run: Run) -> pd.DataFrame | None:
    """The device tasks with a launch: rank, stream, start_ms, end_ms, delay_ms (device start - host launch, >= 0),
    from ``gpu_ops.launch_ts_ns`` or ``device_ops.launch_delay_ms``; None without any."""
    gpu = run.table("gpu_ops")
    if gpu is not None and "launch_ts_ns" in gpu:
        g = gpu[gpu["launch_ts_ns"].to_numpy(np.int64) != NO_LAUNCH]
        if not g.empty:
            delay = (g["ts_ns"].to_numpy(np.int64) - g["launch_ts_ns"].to_numpy(np.int64)) / 1e6
            # the stream numbers as they are: launch_stats orders them by their texts
            return pd.DataFrame({"rank": g["rank"].to_numpy(), "stream": g["stream"].to_numpy(),
                                 "start_ms": g["start_ms"].to_numpy(float), "end_ms": g["end_ms"].to_numpy(float),
                                 "delay_ms": np.maximum(delay, 0.0)})
    dev = run.table("device_ops")
    if dev is not None and "launch_delay_ms" in dev and dev["launch_delay_ms"].notna().any():
        d = dev[dev["launch_delay_ms"].notna()]
        return pd.DataFrame({"rank": d["rank"].to_numpy(), "stream": d["stream"].astype(str).to_numpy(),
                             "start_ms": d["start_ms"].to_numpy(float),
                             "end_ms": (d["start_ms"] + d["dur_ms"]).to_numpy(float),
                             "delay_ms": np.maximum(d["launch_delay_ms"].to_numpy(float), 0.0)})
    return None


def launch_stats(tasks: pd.DataFrame) -> pd.DataFrame:
    """Per rank: tasks with a launch, median / p90 / max launch delay, idle, host-bound idle and its share (module
    doc) of ``tasks`` (:func:`launches`: rank, stream, start_ms, end_ms, delay_ms)."""
    # rows by rank, stream and start; tasks that start together on a stream, the one launched first (the longest
    # delay) first, so the gap before them is host-bound when even that launch came after the stream drained,
    # whatever the order the trace lists them in
    dtype = tasks["stream"].dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "iu":  # (numpy integers: none missing)
        # stream numbers (gpu_ops): ordered by their texts ("10" before "7") through the distinct values, and a
        # numeric sort (a text per row of a million-row table cost more than the rest of this function)
        s_code, s_uniq = pd.factorize(tasks["stream"])
        texts = [str(u) for u in s_uniq]
        lex = np.empty(len(texts), dtype=np.int64)
        lex[sorted(range(len(texts)), key=texts.__getitem__)] = np.arange(len(texts))
        order = np.lexsort((-tasks["delay_ms"].to_numpy(float), tasks["start_ms"].to_numpy(float), lex[s_code],
                            tasks["rank"].to_numpy()))
        g = tasks.take(order).reset_index(drop=True)
        s_code, streams = s_code[order], len(texts)
    else:  # texts (device_ops) or values as given
        g = tasks.sort_values(["rank", "stream", "start_ms", "delay_ms"], ascending=[True, True, True, False],
                              kind="stable").reset_index(drop=True)
        s_code, s_uniq = pd.factorize(g["stream"].to_numpy(dtype=object))
        streams = len(s_uniq)
    start, end, delay = (g[c].to_numpy(float) for c in ("start_ms", "end_ms", "delay_ms"))
    # one integer per (rank, stream); a task whose stream is unknown is a stream of its own: it never makes or closes
    # a gap
    r_code, _ = pd.factorize(g["rank"].to_numpy(), use_na_sentinel=False)
    key = r_code.astype(np.int64) * max(streams, 1) + s_code
    unknown = s_code < 0
    if unknown.any():
        key[unknown] = -1 - np.arange(int(unknown.sum()), dtype=np.int64)
    # the latest end so far on the stream before each task (a task that ends inside a longer one leaves no gap)
    prev = pd.Series(end).groupby(key).cummax().groupby(key).shift(1).to_numpy()
    has = ~np.isnan(prev)
    gap = np.where(has, np.maximum(start - np.nan_to_num(prev), 0.0), 0.0)
    host = has & (start - delay > np.nan_to_num(prev, nan=np.inf))  # launched after the stream drained
    t = pd.DataFrame({"rank": g["rank"].to_numpy(), "delay_ms": delay, "gap_ms": gap,
                      "host_gap_ms": np.where(host, gap, 0.0)})
    q = t.groupby("rank")
    per = q.agg(kernels=("delay_ms", "size"), delay_median_ms=("delay_ms", "median"),
                delay_p90_ms=("delay_ms", lambda x: float(np.percentile(x, 90))), delay_max_ms=("delay_ms", "max"),
                idle_ms=("gap_ms", "sum"), host_idle_ms=("host_gap_ms", "sum")).reset_index()
    per["host_idle_ratio"] = per["host_idle_ms"] / per["idle_ms"].where(per["idle_ms"] > 0)
    return per


def alltoall_balance(comm: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(per step: ranks, max / mean MB over ranks, imbalance; per rank: MB per step mean and its ratio to the mean
    rank) of the all-to-all ops with a size, or None without any (module doc)."""
    a = comm[(comm["op_type"] == "alltoall") & comm["size_mb"].notna()]
    if a.empty:
        return None
    rs = a.groupby(["step", "rank"], as_index=False)["size_mb"].sum()
    steps = agg(rs.groupby("step"), ranks=("rank", "nunique"), mean_mb=("size_mb", "mean"),
                max_mb=("size_mb", "max")).reset_index()
    steps["imbalance_ratio"] = steps["max_mb"] / steps["mean_mb"].where(steps["mean_mb"] > 0)
    per = rs.groupby("rank", as_index=False)["size_mb"].mean().rename(columns={"size_mb": "mb_per_step"})
    per["ratio_to_mean"] = per["mb_per_step"] / per["mb_per_step"].mean() if per["mb_per_step"].mean() > 0 \
        else np.nan
    return steps, per


#: PMU columns: (kernels column, label, the core the profiler leaves at 0 for it)
PMU = [("cube_util_ratio", "Cube utilisation", "AI_VECTOR_CORE"), ("aic_mac_ratio", "Cube MAC busy", "AI_VECTOR_CORE"),
       ("aic_mte2_ratio", "Cube MTE2 busy", "AI_VECTOR_CORE"), ("aiv_vec_ratio", "Vector busy", "AI_CORE"),
       ("aiv_mte2_ratio", "Vector MTE2 busy", "AI_CORE")]


def pmu_by_type(k: pd.DataFrame) -> pd.DataFrame | None:
    """Per op type: kernels, total time and the duration-weighted mean of each PMU ratio (module doc)."""
    cols = [c for c, _, _ in PMU if c in k and k[c].notna().any()]
    if not cols:
        return None
    k = k[k[[*cols]].notna().any(axis=1)]
    out = agg(k.groupby("type"), kernels=("dur_ms", "size"), total_ms=("dur_ms", "sum"))
    core = k["core"].astype(str)
    for c, _, other in PMU:
        if c not in cols:
            continue
        ok = k[c].notna() & (core != other)
        w = k["dur_ms"].where(ok, 0.0)
        num = (k[c].fillna(0) * w).groupby(k["type"]).sum()
        den = w.groupby(k["type"]).sum()
        out[c] = num / den.where(den > 0)
    return out.reset_index().sort_values(["total_ms", "type"], ascending=[False, True]).reset_index(drop=True)


#: op types in the L2 table (most tasks first)
TOP_L2_TYPES = 50
#: L2 rates: (l2_cache column, label)
L2 = [("hit_ratio", "L2 hit rate"), ("victim_ratio", "L2 victim rate")]


def l2_by_type(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per op type: tasks, ranks, mean hit / victim rate over its tasks, the spread of the per-rank means of each;
    per rank: tasks and the mean hit / victim rate over its tasks), module doc. An op type the kernels do not name
    is its task's op name."""
    df = df.assign(type=df["type"].where(df["type"].astype(str) != "", df["name"]))
    by = df.groupby("type").agg(tasks=("rank", "size"), ranks=("rank", "nunique"),
                                **{c: (c, "mean") for c, _ in L2})
    per = df.groupby(["type", "rank"])[[c for c, _ in L2]].mean().groupby("type")
    for c, _ in L2:
        by[c + "_spread"] = per[c].max() - per[c].min()
    by = by.reset_index().sort_values(["tasks", "type"], ascending=[False, True]).reset_index(drop=True)
    ranks = df.groupby("rank").agg(tasks=("type", "size"), **{c: (c, "mean") for c, _ in L2}).reset_index()
    return by, ranks


def op_type_steps(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(per step and op type: time per step, mean over ranks; per op type: steps, mean / min / max time per step and
    the spread max / min): how each operator type's time changes from one iteration to the next."""
    per = df.groupby(["step", "op_type"], as_index=False).agg(total_ms=("total_ms", "mean"),
                                                               count=("count", "mean"))
    by = agg(per.groupby("op_type"), steps=("step", "nunique"), mean_ms=("total_ms", "mean"),
             min_ms=("total_ms", "min"), max_ms=("total_ms", "max")).reset_index()
    by["spread_ratio"] = by["max_ms"] / by["min_ms"].where(by["min_ms"] > 0)
    return per, by.sort_values(["mean_ms", "op_type"], ascending=[False, True]).reset_index(drop=True)


def analyze(run: Run, options=None) -> Analysis:
    tables, metrics, data = {}, {}, {"missing": []}
    have = []
    u = run.table("user_ranges")
    if u is not None and not u.empty:
        spans, comm = run.table("user_range_spans"), run.table("comm_ops")
        overlap = None
        if spans is not None and not spans.empty and comm is not None and "elapse_ms" in comm:
            c = comm[comm["elapse_ms"].notna()]
            overlap = comm_overlap(spans, pd.DataFrame({"rank": c["rank"], "start_ms": c["start_ms"],
                                                        "dur_ms": c["elapse_ms"]}))
        per, by = user_ranges(u, overlap)
        data["ranges_own"] = overlap is not None
        d = diagnosis.diagnose(run, options)
        data["diagnosed_ranks"] = sorted({int(r) for c in d.causes for r in c.ranks}) if d is not None else []
        top = by.head(TOP_RANGES)
        tables["ranges"] = top
        keep = per.merge(top[["side", "name"]], on=["side", "name"])
        tables["ranges_per_rank"] = keep.sort_values(["name", "side", "rank"]).head(MAX_RANGE_ROWS) \
            .reset_index(drop=True)
        metrics["user_range_names"] = int(len(by))
        metrics["user_range_spread_ratio_max"] = float(top["spread_ratio"].max()) if top["spread_ratio"].notna().any() \
            else None
        have.append("ranges")
    tasks = launches(run)
    if tasks is not None:
        lp = launch_stats(tasks)
        tables["launch"] = lp
        metrics["launch_delay_median_ms"] = float(lp["delay_median_ms"].median())
        metrics["launch_delay_p90_ms_max"] = float(lp["delay_p90_ms"].max())
        metrics["host_idle_ratio_mean"] = float(lp["host_idle_ratio"].mean()) if lp["host_idle_ratio"].notna().any() \
            else None
        have.append("launch")
    comm = run.table("comm_ops")
    if comm is not None and "size_mb" in comm:
        bal = alltoall_balance(comm)
        if bal is not None:
            tables["alltoall_steps"], tables["alltoall_ranks"] = bal
            metrics["alltoall_imbalance_ratio"] = float(bal[0]["imbalance_ratio"].max())
            have.append("alltoall")
    k = run.table("kernels")
    if k is not None:
        p = pmu_by_type(k)
        if p is not None:
            tables["pmu"] = p
            have.append("pmu")
    l2 = run.table("l2_cache")
    if l2 is not None and not l2.empty and l2[[c for c, _ in L2]].notna().any().any():
        by, per = l2_by_type(l2)
        tables["l2"], tables["l2_ranks"] = by.head(TOP_L2_TYPES), per
        metrics["l2_op_types"] = int(len(by))
        for c, _ in L2:
            metrics[f"l2_{c}_mean"] = float(l2[c].mean()) if l2[c].notna().any() else None
        have.append("l2")
    api = run.table("host_api")
    if api is not None and not api.empty:
        a = api.sort_values(["rank", "total_ms"], ascending=[True, False]).groupby("rank").head(TOP_APIS)
        tables["api"] = a.reset_index(drop=True)
        metrics["host_api_ms_per_rank"] = float(api.groupby("rank")["total_ms"].sum().mean())
        have.append("api")
    dyn = run.table("op_type_steps")
    if dyn is not None and not dyn.empty:
        tables["dynamic_steps"], tables["dynamic"] = op_type_steps(dyn)
        have.append("dynamic")
    cpu = run.table("host_cpu")
    if cpu is not None and not cpu.empty:
        tables["cpu"] = host_cpu_table(cpu)
        busy = tables["cpu"]["user_ratio"] + tables["cpu"]["sys_ratio"]
        if busy.notna().any():
            metrics["host_cpu_busy_ratio_mean"] = float(busy.mean())
        proc = tables["cpu"]["proc_user_ratio"] + tables["cpu"]["proc_sys_ratio"]
        if proc.notna().any():
            metrics["process_cpu_busy_ratio_mean"] = float(proc.mean())
        have.append("cpu")
    bw = memory_bandwidth(run.table("hbm"), run.table("llc"))
    if bw is not None:
        tables["memory_bw"] = bw
        if bw["hbm_mean_gbps"].notna().any():
            metrics["hbm_mean_gbps"] = float(bw["hbm_mean_gbps"].mean())
            metrics["hbm_max_gbps"] = float(bw["hbm_max_gbps"].max())
        if bw["llc_hit_ratio"].notna().any():
            metrics["llc_hit_ratio_mean"] = float(bw["llc_hit_ratio"].mean())
        have.append("memory_bw")
    if not have:
        raise Unavailable(needs_reason(None, [" or ".join(NEEDS[0])], options))
    metrics["parts"] = have
    # the parts the run lacks, with what the run's own profiler would need to give them (none: just the part)
    data["missing"] = [f"{what} ({src})" if (src := " or ".join(x for x in (sources(options, i, own=True)
                                                                           for i in item.split(" or ")) if x))
                       else what for key, item, what in PARTS if key not in have]
    if "alltoall" not in have and comm is not None and "size_mb" in comm and comm["size_mb"].notna().any():
        data["missing"] = [f"{PARTS[2][2]} (the communication has no all-to-all op)" if x.startswith(PARTS[2][2])
                           else x for x in data["missing"]]
    a = Analysis(metrics=metrics, tables=tables, data=data)
    a.findings = _findings(a)
    return a


def _findings(a: Analysis) -> list[Finding]:
    out = []
    s = a.tables.get("alltoall_steps")
    if s is not None and a.metrics.get("alltoall_imbalance_ratio", 0) > ALLTOALL_IMBALANCE:
        ranks = a.tables["alltoall_ranks"].sort_values("ratio_to_mean", ascending=False)
        top = int(ranks.iloc[0]["rank"])
        out.append(Finding(
            "alltoall_imbalance", "medium", ID,
            f"All-to-all traffic is unbalanced: in the worst step the busiest rank moves "
            f"{fmt.number(a.metrics['alltoall_imbalance_ratio'])}x the mean rank's bytes (rank {top} the most over the run); "
            "with expert parallelism, its experts get more tokens than the others.",
            ranks=[top], evidence={"metric": "alltoall_imbalance_ratio", "value": a.metrics["alltoall_imbalance_ratio"],
                                   "reference": ALLTOALL_IMBALANCE},
            suggestion="Balance the expert load (an auxiliary load-balancing loss, a capacity factor, or placing the "
                       "hot experts on more ranks).", figure="host-alltoall"))
    return out


def present(a: Analysis) -> View:
    t, m = a.tables, a.metrics
    figures, tables, parts = [], [], []
    named = vl.named_ranks(a)  # every rank sample keeps them (reportgen/focus.py)
    if "ranges" in t:
        r = t["ranges"]
        worst = r[(r["ranks"] > 1) & (r["excess_ms"] > 0)].sort_values("excess_ms", ascending=False).head(1)
        parts.append(count_text(m['user_range_names'], 'user range name')
                     + ("" if worst.empty else "; " + ranges_headline(worst.iloc[0], a.data.get("ranges_own", False),
                                                                     a.data.get("diagnosed_ranks", []), r)))
        tables.append(Table.from_frame(
            "host-ranges-table", "User ranges: the rank spread of each name", r,
            [Column("name", "Range", "text"), Column("side", "Side", "text"), Column("ranks", "Ranks", "int"),
             Column("count", "Occurrences", "int"), Column("total_ms", "Total (all ranks)", "ms"),
             Column("comm_ms", "Collectives inside (all ranks)", "ms"),
             Column("median_mean_ms", "Own time per occurrence, median rank", "ms"),
             Column("max_mean_ms", "Own time per occurrence, slowest rank", "ms"),
             Column("slowest_rank", "Slowest rank", "rank"), Column("spread_ratio", "Spread (slowest / median)",
                                                                     "float"),
             Column("excess_ms", "Extra own time on the slowest rank (all its occurrences)", "ms")],
            caption=f"record_function / NVTX / mstx ranges, the {TOP_RANGES} names with the most time (the profiler's "
                    "step marks and collective spans left out). Own time = the range's time minus its overlap with "
                    "the rank's collective / p2p spans (a rank waiting inside a collective is not slow; without the "
                    "spans own time = the whole time). Spread = the slowest rank's own mean per occurrence over the "
                    "median rank's (1 = alike); extra own time = its occurrences on the slowest rank x (its mean there "
                    "- the median rank's mean). Host: the CPU span; device: its span on the device's timeline."))
        tables.append(Table.from_frame(
            "host-ranges-ranks", "User ranges per rank", t["ranges_per_rank"],
            [Column("name", "Range", "text"), Column("side", "Side", "text"), Column("rank", "Rank", "rank"),
             Column("count", "Occurrences", "int"), Column("total_ms", "Total", "ms"),
             Column("mean_ms", "Mean per occurrence", "ms"), Column("own_mean_ms", "Own time per occurrence", "ms"),
             Column("comm_ms", "Collectives inside (total)", "ms"), Column("max_ms", "Longest occurrence", "ms")],
            caption="Per rank and name over the profile (HTA's user annotation breakdown per rank); own time = "
                    "without the collective / p2p spans inside."))
        figures.append(_ranges_heatmap(t["ranges_per_rank"], r, named))
    if "launch" in t:
        lp = t["launch"]
        parts.append(f"kernels start {fmt.ms(m['launch_delay_median_ms'])} after their launch call (median over "
                     "ranks of the rank medians)"
                     + (f", {fmt.percent(m['host_idle_ratio_mean'])} of the device's idle time is spent waiting for "
                        "the host to launch" if m.get("host_idle_ratio_mean") is not None else ""))
        tables.append(Table.from_frame(
            "host-launch-table", "Kernel launch delay and host-bound idle time per rank", lp,
            [Column("rank", "Rank", "rank"), Column("kernels", "Kernels with a launch call", "int"),
             Column("delay_median_ms", "Launch delay, median", "ms"), Column("delay_p90_ms", "Launch delay, p90", "ms"),
             Column("delay_max_ms", "Launch delay, largest", "ms"), Column("idle_ms", "Idle between kernels", "ms"),
             Column("host_idle_ms", "Idle waiting for the host", "ms"),
             Column("host_idle_ratio", "Host-bound share of idle", "ratio")],
            caption="Launch delay = kernel start - start of its runtime launch call (the flow lines of a trace "
                    "viewer; HTA subtracts the call's end instead). Host-bound: the gap before a kernel on its stream "
                    "when the launch call came after the stream drained (HTA's host_wait rule)."))
        figures.append(_launch_bars(_sample_rows(lp.sort_values("rank"), named)))
    if "alltoall_steps" in t:
        parts.append(f"all-to-all imbalance (busiest rank / mean rank, worst step) {fmt.number(m['alltoall_imbalance_ratio'])}")
        tables.append(Table.from_frame(
            "host-alltoall-table", "All-to-all bytes per rank", t["alltoall_ranks"],
            [Column("rank", "Rank", "rank"), Column("mb_per_step", "All-to-all bytes per step", "mb"),
             Column("ratio_to_mean", "Ratio to the mean rank", "float")],
            caption="Bytes sent by the all-to-all ops per rank, mean over steps (the expert-parallel load: "
                    "msprof-analyze's ep_load_balance is the peer)."))
        figures.append(_alltoall_bars(_sample_rows(t["alltoall_ranks"].sort_values("rank"), named)))
    if "pmu" in t:
        p = t["pmu"]
        cols = [Column("type", "Op type", "text"), Column("kernels", "Kernels", "int"),
                Column("total_ms", "Total time", "ms")]
        cols += [Column(c, label, "ratio") for c, label, _ in PMU if c in p]
        tables.append(Table.from_frame(
            "host-pmu", "AI Core PMU utilisation per op type", p, cols,
            caption="Duration-weighted mean over the op type's kernels (kernel_details.csv PMU columns); cube ratios "
                    "over kernels on the cube core, vector ratios over kernels on the vector core. Low cube "
                    "utilisation of a matmul/conv type means it waits for data (MTE2) or is too small."))
    if "l2" in t:
        known = [(c, label) for c, label in L2 if m.get(f"l2_{c}_mean") is not None]
        lcols = [Column("type", "Op type", "text"), Column("tasks", "Tasks", "int"), Column("ranks", "Ranks", "int")]
        for c, label in known:
            lcols += [Column(c, label, "ratio"), Column(c + "_spread", label + ": rank spread", "ratio",
                                                        help="largest - smallest per-rank mean of the op type")]
        missing = [label for c, label in L2 if (c, label) not in known]
        note = (f" {' and '.join(missing)}: not measured (the profiler wrote N/A)." if missing else "")
        more = (f" The {TOP_L2_TYPES} op types with the most tasks of {m['l2_op_types']:,}."
                if m["l2_op_types"] > TOP_L2_TYPES else "")
        tables.append(Table.from_frame(
            "host-l2", "L2 cache per op type", t["l2"], lcols,
            caption="Mean over the op type's tasks (l2_cache.csv, the op type from kernel_details.csv); victim rate "
                    "= share of L2 accesses that evicted a line (high: the op's data does not fit L2). Rank spread "
                    "= largest - smallest per-rank mean." + note + more))
        tables.append(Table.from_frame(
            "host-l2-ranks", "L2 cache per rank", t["l2_ranks"],
            [Column("rank", "Rank", "rank"), Column("tasks", "Tasks", "int"),
             *(Column(c, label, "ratio") for c, label in known)],
            caption="Mean over the rank's tasks (l2_cache.csv)." + note))
    if "api" in t:
        parts.append(f"the CANN APIs take {fmt.ms(m['host_api_ms_per_rank'])} of host time per rank")
        tables.append(Table.from_frame(
            "host-api", "Host API time (CANN) per rank", t["api"],
            [Column("rank", "Rank", "rank"), Column("level", "Level", "text"), Column("api", "API", "text"),
             Column("count", "Calls", "int"), Column("total_ms", "Total", "ms"), Column("avg_ms", "Mean", "ms", unit_with="call"),
             Column("max_ms", "Longest", "ms", unit_with="call")],
            caption=f"api_statistic.csv as written: the {TOP_APIS} APIs with the most host time per rank (a "
                    "synchronize call's time is the host waiting for the device)."))
    if "dynamic" in t:
        d = t["dynamic"]
        if d["spread_ratio"].notna().any():
            w = d.loc[d["spread_ratio"].idxmax()]
            parts.append(f"an operator type's time per iteration varies up to {fmt.number(w['spread_ratio'])}x "
                         f"({w['op_type']})")
        tables.append(Table.from_frame(
            "host-dynamic", "Operator time per iteration, by operator type", d,
            [Column("op_type", "Op type", "text"), Column("steps", "Steps", "int"),
             Column("mean_ms", "Per step, mean", "ms", unit_with="step"),
             Column("min_ms", "Per step, least", "ms", unit_with="step"),
             Column("max_ms", "Per step, most", "ms", unit_with="step"), Column("spread_ratio", "Most / least", "float")],
            caption="From the dynamic-shape profile (dynamic_shape_info_<rank>.json): each type's summed time per "
                    "step (mean over ranks). With dynamic shapes an op type whose time changes between steps is "
                    "recompiled or runs on new shapes."))
        figures.append(_dynamic_lines(t["dynamic_steps"], d))
    if "cpu" in t:
        busy = []
        if "host_cpu_busy_ratio_mean" in m:
            busy.append(f"the host CPUs are {fmt.percent(m['host_cpu_busy_ratio_mean'])} busy (user + sys)")
        if "process_cpu_busy_ratio_mean" in m:
            busy.append(f"the training process takes {fmt.percent(m['process_cpu_busy_ratio_mean'])} of them")
        parts.append(", ".join(busy))
        tables.append(Table.from_frame(
            "host-cpu", "Host CPU utilisation per rank", t["cpu"],
            [Column("rank", "Rank", "rank"), Column("samples", "Samples", "int"),
             Column("user_ratio", "User", "ratio"), Column("sys_ratio", "System", "ratio"),
             Column("proc_user_ratio", "Process user", "ratio"), Column("proc_sys_ratio", "Process system", "ratio"),
             Column("io_ratio", "I/O wait", "ratio"), Column("idle_ratio", "Idle", "ratio"),
             Column("processors", "Processors", "int")],
            caption="Mean over the dataset profiler's samples of the whole host's CPU (its device_info; as "
                    "written) and, beside it, the training process's share of the host (its process_info; "
                    "blank when not written). A busy host slows the input pipeline and the launches; a busy host "
                    "whose own process is idle is busy with something else."))
    if "memory_bw" in t:
        bits = []
        if "hbm_mean_gbps" in m:
            bits.append(f"HBM read + write bandwidth averages {fmt.quantity(m['hbm_mean_gbps'], 'gbps')} per rank "
                        f"(at most {fmt.quantity(m['hbm_max_gbps'], 'gbps')})")
        if "llc_hit_ratio_mean" in m:
            bits.append(f"the LLC hit rate averages {fmt.percent(m['llc_hit_ratio_mean'])}")
        parts.append(", ".join(bits))
        tables.append(Table.from_frame(
            "host-memory-bw", "HBM bandwidth and LLC hit rate per rank", t["memory_bw"],
            [Column("rank", "Rank", "rank"), Column("hbm_samples", "HBM samples", "int"),
             Column("hbm_mean_gbps", "HBM read + write, mean", "gbps", unit_with="hbm"),
             Column("hbm_max_gbps", "HBM read + write, most", "gbps", unit_with="hbm"),
             Column("llc_samples", "LLC samples", "int"), Column("llc_hit_ratio", "LLC hit rate, mean", "ratio")],
            caption="From the device's sampled HBM bandwidth (each sample summed over the HBMs and over read and "
                    "write) and its sampled LLC hit rate (mean over the samples and the LLCs; blank where the "
                    "rank has none). Low bandwidth with busy compute points at compute-bound kernels; a low hit "
                    "rate, at traffic the cache does not hold."))
    notes = []
    if a.data.get("missing"):
        notes.append("Not in this run: " + "; ".join(a.data["missing"]) + ".")
    summary = "; ".join(parts)
    return View(summary=(summary[:1].upper() + summary[1:] + ".") if summary else "", figures=figures,
                tables=tables, notes=notes)


def memory_bandwidth(hbm: pd.DataFrame | None, llc: pd.DataFrame | None) -> pd.DataFrame | None:
    """hbm / llc samples -> per rank: hbm_samples, hbm_mean_gbps / hbm_max_gbps (each sample's bandwidth summed over
    the HBMs and both directions, then mean / most over the samples), llc_samples, llc_hit_ratio (mean over samples
    and LLCs); None without either."""
    parts = []
    if hbm is not None and not hbm.empty:
        per = hbm.groupby(["rank", "sample"])["bandwidth_gbps"].sum().groupby(level="rank")
        parts.append(pd.DataFrame({"hbm_samples": per.size(), "hbm_mean_gbps": per.mean(),
                                   "hbm_max_gbps": per.max()}))
    if llc is not None and not llc.empty:
        g = llc.groupby("rank")["hit_ratio"]
        parts.append(pd.DataFrame({"llc_samples": g.size(), "llc_hit_ratio": g.mean()}))
    if not parts:
        return None
    out = pd.concat(parts, axis=1).reset_index().rename(columns={"index": "rank"})
    for col in ("hbm_samples", "hbm_mean_gbps", "hbm_max_gbps", "llc_samples", "llc_hit_ratio"):
        if col not in out:
            out[col] = float("nan")
    return out.sort_values("rank").reset_index(drop=True)


def host_cpu_table(cpu: pd.DataFrame) -> pd.DataFrame:
    """host_cpu rows (scope machine / process) -> one row per rank: the machine's columns, the process's user / sys
    beside them as proc_user_ratio / proc_sys_ratio (NaN where a scope is not written)."""
    scope = cpu["scope"] if "scope" in cpu else pd.Series("machine", index=cpu.index)
    mach = cpu[scope == "machine"].drop(columns=["scope"], errors="ignore")
    proc = cpu[scope == "process"][["rank", "user_ratio", "sys_ratio", "samples", "processors"]].rename(
        columns={"user_ratio": "proc_user_ratio", "sys_ratio": "proc_sys_ratio", "samples": "proc_samples",
                 "processors": "proc_processors"})
    out = mach.merge(proc, on="rank", how="outer").sort_values("rank").reset_index(drop=True)
    out["processors"] = out["processors"].fillna(out.pop("proc_processors"))
    out["samples"] = out["samples"].fillna(out.pop("proc_samples"))
    for col in ("user_ratio", "sys_ratio", "io_ratio", "idle_ratio"):
        if col not in out:
            out[col] = float("nan")
    return out


def ranges_headline(w, own: bool, diagnosed: list[int], by: pd.DataFrame | None = None) -> str:
    """The user range with the most time beyond the median rank, in words: per occurrence and in total, own time
    (collectives left out) when measured; an observation when the diagnosis names other ranks (never contradicts),
    then the range with the most own time beyond the median rank on a diagnosed rank (a range only that rank runs
    counts its whole own time)."""
    rank, n = int(w["slowest_rank"]), int(round(w["excess_ms"] / max(w["max_mean_ms"] - w["median_mean_ms"], 1e-12)))
    what = "own time (collectives inside left out)" if own else "time (collectives and waits inside included)"
    text = (f"the user range with the most {what} beyond the median rank is {w['name']} on rank {rank}: "
            f"{fmt.ms(w['max_mean_ms'])} per occurrence vs {fmt.ms(w['median_mean_ms'])} on the median rank "
            f"({fmt.number(w['spread_ratio'])}x; {fmt.ms(w['excess_ms'])} more over its {n} occurrences in the profile)")
    if diagnosed and rank not in diagnosed:
        text = "an observation: " + text + (
            f"; the diagnosed cause is on rank{'s' if len(diagnosed) > 1 else ''} "
            f"{', '.join(str(x) for x in diagnosed)}")
        if by is not None and not by.empty:
            c = by[by["slowest_rank"].isin(diagnosed)]
            extra = np.where(c["ranks"] > 1, c["excess_ms"], c["total_ms"] - c["comm_ms"])
            c = c.assign(extra=extra)
            c = c[c["extra"] > 0].sort_values("extra", ascending=False).head(1)
            if not c.empty:
                x = c.iloc[0]
                text += (f", where {x['name']} has {fmt.ms(x['max_mean_ms'])} own time per occurrence "
                         + (f"vs {fmt.ms(x['median_mean_ms'])} on the median rank" if x["ranks"] > 1
                            else "and runs on no other rank")
                         + f" ({fmt.ms(x['extra'])} over the profile)")
    return text


def count_text(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _sample_rows(df: pd.DataFrame, named=()) -> pd.DataFrame:
    """The rows of at most :data:`CHART_RANKS` ranks (evenly over the ranks, those findings name always:
    reportgen/focus.py keep_sample)."""
    ranks = sorted(int(r) for r in df["rank"].unique())
    return df[df["rank"].isin(keep_sample(ranks, CHART_RANKS, named))]


def _ranges_heatmap(per: pd.DataFrame, by: pd.DataFrame, named=()) -> Figure:
    names = by.head(20)[["side", "name"]]
    d = _sample_rows(per.merge(names, on=["side", "name"]), named)
    d = d.assign(label=np.where(d["side"] == "device", d["name"] + " (device)", d["name"]),
                 rel=d["own_mean_ms"] / d.groupby(["side", "name"])["own_mean_ms"].transform("median"))
    d = d.assign(mean_ms=d["own_mean_ms"])
    unit, factor = fmt.unit_for("ms", d["mean_ms"])
    chart = vl.in_unit(vl.Chart(d[["rank", "label", "mean_ms", "rel", "count"]]), factor, "mean_ms").mark_rect().encode(
        x=vl.X("rank:O", title="Rank", axis=vl.Axis(labelAngle=0, labelOverlap=True)),
        y=vl.Y("label:N", title=None, sort=list(dict.fromkeys(np.where(names["side"] == "device",
                                                                     names["name"] + " (device)", names["name"])))),
        color=vl.Color("rel:Q", title="Mean / median rank", scale=vl.diverging([0.5, 1, 2])),
        tooltip=[vl.Tooltip("label:N", title="Range"), vl.Tooltip("rank:O", title="Rank"),
                 vl.tip("mean_ms_u", "Own time per occurrence", unit),
                 vl.Tooltip("rel:Q", title="Mean / median rank", format=fmt.D3_FORMAT),
                 vl.Tooltip("count:Q", title="Occurrences")])
    return Figure("host-ranges", "User ranges: own time per occurrence, relative to the median rank",
                  to_spec(vl.fit(chart, max(120, 18 * len(names)))),
                  caption="Each cell is a range's mean own time per occurrence (collectives inside left out) on a rank "
                          "over the median rank's (1 = alike; a range slow on "
                          "one rank stands out in its row). The 20 names with the most time, up to 128 ranks (evenly "
                          "spaced over the rank ids, the ranks findings name always among them).",
                  alt="Heatmap of user range time per rank relative to the median rank")


def _launch_bars(lp: pd.DataFrame) -> Figure:
    d = lp[["rank", "delay_median_ms", "delay_p90_ms", "host_idle_ratio"]]
    unit, factor = fmt.unit_for("ms", d["delay_p90_ms"])
    base = vl.in_unit(vl.Chart(d), factor, "delay_median_ms", "delay_p90_ms")
    x = vl.X("rank:O", title="Rank", axis=vl.Axis(labelAngle=0, labelOverlap=True))
    bars = base.mark_bar(color=palette.ROLE["free"]).encode(
        x=x, y=vl.Y("delay_p90_ms_u:Q", axis=vl.Axis(**vl.axis("Launch delay", unit))),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.tip("delay_median_ms_u", "Median", unit),
                 vl.tip("delay_p90_ms_u", "p90", unit),
                 vl.Tooltip("host_idle_ratio:Q", title="Host-bound share of idle", format=fmt.D3_PCT)])
    ticks = base.mark_tick(color=palette.ROLE["wait"], thickness=2).encode(x=x, y="delay_median_ms_u:Q")
    return Figure("host-launch", "Kernel launch delay per rank", to_spec(vl.fit(bars + ticks, 200)),
                  caption="Bars: p90 of the launch delay; red ticks: median (kernel start - launch call start). The first "
                          "128 ranks; the table has every rank and the host-bound share of idle time.",
                  alt="Bars of the p90 kernel launch delay per rank with the median as ticks")


def _alltoall_bars(per: pd.DataFrame) -> Figure:
    unit, factor = fmt.unit_for("mb", per["mb_per_step"])
    chart = vl.in_unit(vl.Chart(per[["rank", "mb_per_step", "ratio_to_mean"]]), factor, "mb_per_step").mark_bar(
        color=palette.ROLE["comm"]).encode(
        x=vl.X("rank:O", title="Rank", axis=vl.Axis(labelAngle=0, labelOverlap=True)),
        y=vl.Y("mb_per_step_u:Q", axis=vl.Axis(**vl.axis("All-to-all bytes per step", unit))),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.tip("mb_per_step_u", "Per step", unit),
                 vl.Tooltip("ratio_to_mean:Q", title="Ratio to the mean rank", format=fmt.D3_FORMAT)])
    return Figure("host-alltoall", "All-to-all bytes per rank", to_spec(vl.fit(chart, 200)),
                  caption="Mean per step; a balanced expert-parallel run has bars of one height.",
                  alt="Bars of all-to-all bytes per rank")


def _dynamic_lines(per: pd.DataFrame, by: pd.DataFrame) -> Figure:
    types = by["op_type"].head(CHART_TYPES).tolist()
    d = per[per["op_type"].isin(types)][["step", "op_type", "total_ms"]]
    unit, factor = fmt.unit_for("ms", d["total_ms"])
    chart = vl.in_unit(vl.Chart(d), factor, "total_ms").mark_line(point=True).encode(
        x=vl.X("step:O", title="Step", axis=vl.Axis(labelAngle=0, labelOverlap=True)),
        y=vl.Y("total_ms_u:Q", axis=vl.Axis(**vl.axis("Time in the step", unit))),
        color=vl.identity_color("op_type", types, "Op type"),
        tooltip=[vl.Tooltip("op_type:N", title="Op type"), vl.Tooltip("step:O", title="Step"),
                 vl.tip("total_ms_u", "Time in the step", unit)])
    return Figure("host-dynamic-steps", "Operator time per iteration", to_spec(vl.fit(chart, 220)),
                  caption=f"The {CHART_TYPES} op types with the most time; summed per step, mean over ranks.",
                  alt="Lines of operator time per step, one per operator type")
