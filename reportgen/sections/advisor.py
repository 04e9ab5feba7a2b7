"""Advisor: one ranked list of findings across the sections, the cross-section rules, and the rule table.

It runs after the seven sections and works only on their analyses (never on files):

* **Time at stake.** Every finding gets ``share_of_step_ratio``: the share of the step time the problem costs
  (what fixing it could give back). Time findings take their severity from it with the convention of
  msprof-analyze's advisor (high >= 5 % of the step, medium >= 3 %, else low; ``thresholds.severity``);
  findings that are not about time (memory headroom, layout) keep their own severity. The report and the
  metrics list findings high -> medium -> low and, within a level, by time at stake.
* **Rules of msprof-analyze's families** where the data allows (research notes on msprof-analyze §3.4 and §4):
  slow rank by the spread of computing / exposed communication / free time, slow rank by collective vote
  (Dixon's Q / 3σ on each collective's durations: the rank that waited least arrived last), small packets, data
  waiting (preparing / step interval), slow data loader, long free time. Their findings are added to the section
  whose chart shows the evidence.
* **Rule table.** Every rule with its source, threshold and result (raised / passed / not applicable and why),
  so a reader sees what was checked, not only what fired.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd

from .. import facts, fmt
from .. import thresholds as th
from ..errors import Unavailable
from ..model import ByRank, Run
from ..report import Analysis, Column, EvidenceView, Finding, SectionOutcome, Table, View, count, rank_ranges
from . import missing_needs, sources, with_sources
from .communication import SIZE_CLASS_OPS, SIZE_CLASSES, SIZES_FIGURE
from .trajectory import metric_view

log = logging.getLogger(__name__)

ID = "advisor"
TITLE = "Advisor rules and thresholds"

SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


# --------------------------------------------------------------------------------------------- statistics
#: Dixon's Q critical values at alpha = 0.005 (99.5 %, the level msprof-analyze's slow_rank recipe uses), for the
#: smallest value of a sample of n, with the ratio that suits n: r10 for n 3-7, r11 for 8-10, r21 for 11-13, r22
#: for 14-25 (Dixon 1950/1951 as corrected by Rorabacher 1991; published tables). Beyond 25 ranks the 3σ rule.
_DIXON_Q995 = {3: 0.994, 4: 0.926, 5: 0.821, 6: 0.740, 7: 0.680, 8: 0.725, 9: 0.677, 10: 0.639, 11: 0.713,
               12: 0.675, 13: 0.649, 14: 0.674, 15: 0.647, 16: 0.624, 17: 0.605, 18: 0.589, 19: 0.575, 20: 0.562,
               21: 0.551, 22: 0.541, 23: 0.532, 24: 0.524, 25: 0.516}


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p): how likely k or more votes are by chance."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if p <= 0:
        return 0.0
    if p >= 1 or k <= n * p:
        return 1.0  # at or below the expected count: not significant (upper bound)
    lp, lq = math.log(p), math.log1p(-p)
    total = 0.0
    for i in range(k, n + 1):  # terms fall from i = k on (k above the mode); stop when they no longer count
        term = math.exp(math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq)
        total += term
        if term < 1e-15 * total:
            break
    return min(1.0, total)


def instance_outliers(o: pd.DataFrame, key: list[str]) -> pd.DataFrame:
    """Is the smallest value of each instance (rows sharing ``key``) an outlier? Dixon's Q test at 99.5 % for
    3..25 values (ratio r10 / r11 / r21 / r22 by sample size), the 3σ rule beyond (smallest < mean - 3σ).
    Definition: msprof-analyze ``slow_rank`` recipe (research §3.4); it switches to 3σ at 100 values, we at 25
    where the published Q tables end. One row per instance: n, the rank with the smallest value ``min_rank``,
    ``x1``, ``outlier``, ``waited_ms`` = median of the others - x1. Vectorised: a 1,000-rank run has ~10^5
    instances."""
    o2 = o.sort_values(key + ["elapse_ms"])
    g = o2.groupby(key, sort=False)["elapse_ms"]
    pos = g.cumcount()
    n = g.transform("size")
    o2 = o2.assign(pos=pos, rpos=n - 1 - pos)
    inst = g.agg(["size", "mean", "std"]).rename(columns={"size": "n", "std": "sd"})
    inst["sd"] = inst["sd"] * np.sqrt((inst["n"] - 1) / inst["n"])  # population σ (ddof 0)

    def at(col: str, idx: int) -> pd.Series:
        return o2[o2[col] == idx].set_index(key)["elapse_ms"]
    inst["x1"], inst["x2"], inst["x3"] = at("pos", 0), at("pos", 1), at("pos", 2)
    inst["xn"], inst["xn1"], inst["xn2"] = at("rpos", 0), at("rpos", 1), at("rpos", 2)
    inst["min_rank"] = o2[o2["pos"] == 0].set_index(key)["rank"]
    n = inst["n"]
    num = np.where(n <= 10, inst["x2"] - inst["x1"], inst["x3"] - inst["x1"])
    den = np.select([n <= 7, n <= 13], [inst["xn"] - inst["x1"], inst["xn1"] - inst["x1"]],
                    inst["xn2"] - inst["x1"])
    crit = n.map(_DIXON_Q995).to_numpy(dtype=float)
    ok = (den > 1e-9 * np.maximum(1.0, inst["xn"].abs())).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        dixon = ok & (num / np.where(ok, den, 1.0) > crit)
    sigma = (inst["sd"] > 0) & (inst["x1"] < inst["mean"] - 3 * inst["sd"])
    inst["outlier"] = np.where(n > 25, sigma, dixon) & (n >= 3)
    inst["waited_ms"] = o2[o2["pos"] > 0].groupby(key, sort=False)["elapse_ms"].median() - inst["x1"]
    return inst


def smallest_is_outlier(values) -> bool:
    """:func:`instance_outliers` for one list of values."""
    x = pd.DataFrame({"i": 0, "rank": range(len(values)), "elapse_ms": np.asarray(values, dtype=float)})
    return len(x) >= 3 and bool(instance_outliers(x, ["i"])["outlier"].iloc[0])


# --------------------------------------------------------------------------------------------- context
@dataclass
class _Ctx:
    run: Run
    done: dict[str, SectionOutcome]
    step_ms: float | None  # median step time over ranks and steps
    steps: int
    computing_share: float | None  # the run-wide computing share (summary, from overlap.comm_shares)
    baseline: dict | None = None  # the --baseline's headline metrics (reportgen/compare.py headline), if given

    def analysis(self, sid: str) -> Analysis | None:
        o = self.done.get(sid)
        return o.analysis if o is not None and o.status == "ok" else None

    def in_scope(self, df: pd.DataFrame) -> pd.DataFrame:
        """Rows of the run's steps in scope (reportgen/facts.py); rows outside every step (-1) never count."""
        F = facts.of(self.run)
        if F is None or "step" not in df:
            return df
        return F.in_scope(df)


def _context(run: Run, done: dict[str, SectionOutcome]) -> _Ctx:
    from ..summary import summary

    s = summary(run, list(done.values()))
    step = s.get("step_ms_median")
    steps = s.get("steps") or len(run.steps) or 1
    return _Ctx(run, done, float(step) if step else None, int(steps), s.get("computing_share_ratio"))


def rule_comm_vs_baseline(ctx: _Ctx) -> list[Finding]:
    """Exposed communication against the baseline run (``--baseline``): the share of the step spent in communication
    not overlapped with computation (section overlap, ``comm_share_ratio``, the headline ``comm_share``) grew by at
    least ``th.BASELINE_COMM_GROWTH`` of the step. Time at stake: the growth. A change of the run (bucket sizes,
    overlap switched off, a new collective after backward) shows here even where the run alone looks normal."""
    a = ctx.analysis("overlap")
    base = (ctx.baseline or {}).get("comm_share")
    now = a.metrics.get("comm_share_ratio") if a is not None else None
    if base is None or now is None or not (now - base >= th.BASELINE_COMM_GROWTH):
        return []
    growth = float(now - base)
    f = Finding("comm_grew_vs_baseline", "low", "overlap",
                f"Exposed communication takes {fmt.percent(now)} of the step, {fmt.percent(base)} in the baseline: "
                f"{fmt.percent(growth)} of the step more communication is not hidden behind computation.",
                evidence={"metric": "comm_share_ratio", "value": float(now), "reference": float(base),
                          "share_of_step_ratio": growth},
                suggestion="Compare what changed since the baseline: gradient bucket size, overlap settings, "
                           "collectives issued after backward, the placement of the ranks.",
                view=EvidenceView("overlap-heatmap", {"overlap_metric": "comm_not_overlapped_ms"}))
    f.cause = {"kind": "overlap", "ranks": [], "link": None, "stage": None, "stake_ms":
               growth * (ctx.step_ms or 0.0), "share_of_step_ratio": growth, "confidence_ratio": 1.0,
               "steps": ctx.steps, "against": "baseline"}
    f.confidence = 1.0
    f.share_of_step = growth
    f.severity = "high" if growth >= 0.10 else "medium" if growth >= 0.03 else "low"
    return [f]


# --------------------------------------------------------------------------------------------- time at stake
def share_of_step(f: Finding, ctx: _Ctx) -> float | None:
    """The share of the step time a finding puts at stake (None when it is not about time).

    * waiting / compute stragglers: the rule's own (value - reference) / step (evidence ``share_of_step_ratio``);
    * exposed communication, receive between stages, collectives inside a stage: the share itself (all of that
      time could be hidden or removed);
    * slow link: time beyond what its bytes take at its transport's mean bandwidth, per step / step;
    * transit outliers: Σ (transit - group median) per step / step;
    * FLOP/s below the mean by p: p x the computing share (the computing time that a rank at the mean rate saves);
      a stage p above the mean FLOPs: p / (1 + p) x the computing share.
    """
    ev = f.evidence or {}
    if ev.get("share_of_step_ratio") is not None:
        return float(ev["share_of_step_ratio"])
    if f.id in ("comm_share", "pipeline_between_stage", "pipeline_within_stage"):
        return float(ev["value"])
    step = ctx.step_ms
    if ev.get("excess_ms_per_step") is not None and step:
        return float(ev["excess_ms_per_step"]) / step
    comp = ctx.computing_share
    if f.id == "flops_per_s_low" and comp is not None:
        return float(ev.get("below_mean_ratio", 0.0)) * comp
    if f.id == "stage_flops_imbalance" and comp is not None:
        p = float(ev.get("above_mean_ratio", 0.0))
        return p / (1 + p) * comp
    return None


def order_key(f: dict) -> tuple:
    """High -> medium -> low; within a level the largest time at stake first; findings without one last."""
    share = f.get("share_of_step_ratio")
    return SEVERITY_ORDER.get(f.get("severity"), 3), -(share if share is not None else -1.0)


# --------------------------------------------------------------------------------------------- rules
def _per_rank(ctx: _Ctx) -> pd.DataFrame | None:
    a = ctx.analysis("overlap")
    if a is None:
        return None
    pr = a.tables.get("per_rank")
    return None if pr is None or pr.empty or "step_ms" not in pr else pr


def rule_slow_rank_spread(ctx: _Ctx) -> list[Finding]:
    """msprof-analyze advisor ``SlowRankAnalyzer``: for computing, exposed communication and free time, the spread
    (max - min) across ranks over the mean step time; above 5 % the metric is flagged.

    Departure: ranks are compared within their pipeline stage (all ranks without stages). Across stages the
    difference is the layer split, which the pipeline and stage-FLOPs rules judge; msprof-analyze compares every
    rank (its 170.228 ms computing spread on the st_level2 4-rank set is stage 2 vs stage 1). The all-rank spread
    is kept in the advisor's metrics (``spread``) for comparison. Per-rank means over the steps."""
    pr = _per_rank(ctx)
    if pr is None:
        return []
    out = []
    metrics = [("computing_ms", "computing"), ("comm_not_overlapped_ms", "exposed communication"),
               ("free_ms", "free (idle device)")]
    stages = pr["stage"] if "stage" in pr and pr["stage"].notna().all() else pd.Series(0, index=pr.index)
    flagged = _flagged_compute_ranks(ctx)
    for col, label in metrics:
        if col not in pr or not pr[col].notna().all():
            continue
        best = None
        for stage, g in pr.groupby(stages):
            if len(g) < 2:
                continue
            diff = float(g[col].max() - g[col].min())
            ratio = diff / float(g["step_ms"].mean()) if g["step_ms"].mean() > 0 else 0.0
            if ratio > th.SLOW_RANK_SPREAD and (best is None or ratio > best[0]):
                best = (ratio, diff, stage, g)
        if best is None:
            continue
        ratio, diff, stage, g = best
        hi, lo = g.loc[g[col].idxmax()], g.loc[g[col].idxmin()]
        # the rank farthest from the stage's median is the odd one (one light rank makes the others "the most")
        if len(g) >= 3:
            rank = int(g.loc[(g[col] - g[col].median()).abs().idxmax(), "rank"])
        else:  # two ranks: the one others wait for has the least exposed communication, else the most time
            rank = int(lo["rank"] if col == "comm_not_overlapped_ms" else hi["rank"])
        if rank in flagged:
            continue  # the trajectory's compute-straggler finding already names this rank (same straggler)
        where = f" among the ranks of stage {int(stage)}" if stages.nunique() > 1 or stage != 0 else ""
        low = rank == int(lo["rank"])
        why = (f"rank {rank} " + ("is farthest from the median, with the " if len(g) >= 3 else "has the ")
               + ("least" if low else "most"))
        if low and col == "comm_not_overlapped_ms":
            # the least exposed communication: it arrives last at the collectives, the others wait for it. That is
            # not "slowest" (facts.slowest_rank: mean step time), which the summary names: say both when they differ
            F = facts.of(ctx.run)
            why += " (it arrives last at the collectives: the others wait for it"
            if F is not None and F.slowest_rank is not None and F.slowest_rank != rank:
                why += f"; by mean step time the slowest rank is {F.slowest_rank}"
            why += ")"
        out.append(Finding(
            "slow_rank_spread", "low", "overlap",
            f"{label.capitalize()} time differs by {fmt.ms(diff)} between ranks{where} ({int(hi['rank'])}: "
            f"{fmt.ms(hi[col])}, {int(lo['rank'])}: {fmt.ms(lo[col])}), {fmt.percent(ratio)} of the mean step; "
            f"{why}.",
            ranks=[rank], evidence={"metric": col, "value": float(hi[col]), "reference": float(lo[col]),
                                    "spread_ms": diff, "share_of_step_ratio": ratio,
                                    "stage": None if stage == 0 and stages.nunique() == 1 else int(stage)},
            suggestion="Open the slow rank in the execution drill-down: compare its operators with a peer's "
                       "(slower device, uneven work, host-side stalls).",
            view=EvidenceView("overlap-heatmap", {"overlap_metric": col, **(
                {"stage_sel": str(int(stage))} if stages.nunique() > 1 else {})})))
    return out


def _flagged_compute_ranks(ctx: _Ctx) -> set[int]:
    o = ctx.done.get("trajectory")
    if o is None or o.view is None:
        return set()
    return {r for f in o.view.findings if f.id == "slow_device_compute" for r in f.ranks}


def spread_table(ctx: _Ctx) -> pd.DataFrame | None:
    """Per step, the all-rank spread (max - min) of computing / exposed communication / free time in ms, as
    msprof-analyze's advisor prints it (for comparison; the rule itself compares within stages)."""
    a = ctx.analysis("overlap")
    prs = a.tables.get("per_rank_step") if a is not None else None
    if prs is None or prs.empty:
        return None
    rows = []
    for step, g in prs.groupby("step"):
        row = {"step": int(step), "step_ms_mean": float(g["step_ms"].mean())}
        for col in ("computing_ms", "comm_not_overlapped_ms", "free_ms"):
            if col in g and g[col].notna().all():
                row[col.replace("_ms", "_spread_ms")] = float(g[col].max() - g[col].min())
        rows.append(row)
    return pd.DataFrame(rows)


def rule_slow_rank_vote(ctx: _Ctx) -> list[Finding]:
    """msprof-analyze ``slow_rank`` recipe: for each collective instance (same group, step, operator and
    occurrence on every rank of the group; send / receive left out), the rank with the shortest duration arrived
    last — the others waited for it — and gets a vote when that shortest duration is an outlier
    (:func:`smallest_is_outlier`). Someone always arrives last, so a rank is reported only when its votes are
    more than chance gives (:func:`binomial_tail` below ``VOTE_P_VALUE`` with p = 1 / group size per instance)
    and at least ``VOTE_MIN_COUNT``. Time at stake: per step, the median of what the other ranks spent beyond it."""
    a = ctx.analysis("communication")
    ops = a.tables.get("ops") if a is not None else None
    if ops is None or ops.empty or "elapse_ms" not in ops:
        return []
    o = ctx.in_scope(ops).dropna(subset=["elapse_ms"])
    if "kind" in o:
        o = o[o["kind"] != "p2p"]
    if "op_type" in o:
        o = o[~o["op_type"].fillna("").astype(str).str.lower().isin(
            ["send", "receive", "recv", "batchsendrecv", "send_recv", "sendrecv"])]
    if o.empty:
        return []
    o = o.assign(group=o["group"].fillna("").astype(str) if "group" in o else "")
    key = ["group", "step", "op", "occ"]
    o = o.assign(occ=facts.call_index(o))  # one collective instance identity (reportgen/facts.py)
    o = o[o.groupby(key)["rank"].transform("size") >= 3]
    if o.empty:
        return []
    inst = instance_outliers(o, key)
    per = o.merge(inst[["n"]], left_on=key, right_index=True)
    chance = (1.0 / per["n"]).groupby(per["rank"]).agg(["size", "sum"])  # instances per rank, expected votes
    voted = inst[inst["outlier"]]
    votes: dict[int, list] = {}
    for row in voted.itertuples():
        votes.setdefault(int(row.min_rank), []).append((row.Index, float(row.waited_ms), float(row.x1)))
    step = ctx.step_ms
    slow = []
    for rank, vs in sorted(votes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        n_inst = int(chance.at[rank, "size"])
        p_chance = binomial_tail(len(vs), n_inst, float(chance.at[rank, "sum"]) / n_inst)
        if len(vs) >= th.VOTE_MIN_COUNT and p_chance < th.VOTE_P_VALUE:
            slow.append((rank, vs, n_inst, p_chance))
    if not slow:
        return []
    rank, vs, n_inst, p_chance = slow[0]
    waited = sum(v[1] for v in vs) / max(1, ctx.steps)
    share = waited / step if step else None
    worst = max(vs, key=lambda v: v[1])
    others = [r for r, *_ in slow[1:]]
    extra = (f" Also arrived last more often than chance: rank{'s' if len(others) > 1 else ''} "
             f"{rank_ranges(others)}.") if others else ""
    return [Finding(
        "slow_rank_vote", "low", "communication",
        f"Rank {rank} arrived last at {len(vs)} of its {n_inst} collective operations: it had the outlying "
        f"shortest duration while the other ranks waited (about {fmt.ms(waited)} per step; worst "
        f"{worst[0][2]} in step {worst[0][1]}: the others took {fmt.ms(worst[1])} longer).{extra}",
        ranks=[r for r, *_ in slow], evidence={"metric": "slow_affect_count", "value": len(vs), "reference": n_inst,
                                               "chance_p_value": p_chance, "waited_ms_per_step": waited,
                                               "share_of_step_ratio": share},
        suggestion="This rank reaches the collectives late: look at its computation and host activity before "
                   "them (execution drill-down), not at the links.",
        figure="communication-ranks")]


def rule_small_packets(ctx: _Ctx) -> list[Finding]:
    """msprof-analyze advisor *Packet Analysis*: communication moved in small packets is latency-bound. Share of
    data-carrying operations below 16 MB on intra-node transports (HCCS / PCIE / SIO / SDMA) or below 1 MB on RDMA;
    above 20 % of the operations it is flagged. Departure: per operator and transport (what the run model keeps),
    not per packet-size bucket. PyTorch traces: message size of each collective against 1 MB (no transport
    known). Time at stake: the time of those operations per step and rank."""
    a = ctx.analysis("communication")
    sizes = a.data.get("op_sizes") if a is not None else None
    if sizes is None:
        return []
    rows = [(kind, limit, g["size_mb"], g["time_ms"], int(g["rank"].nunique()))
            for kind, limit in SIZE_CLASSES for g in [sizes[sizes["cls"] == kind]] if not g.empty]
    out = []
    for kind, limit, size, time, nranks in rows:
        small = size < limit
        ratio = float(small.mean())
        if ratio <= th.SMALL_PACKET_SHARE:
            continue
        t = float(time[small].sum()) / max(1, ctx.steps) / max(1, nranks)
        share = t / ctx.step_ms if ctx.step_ms else None
        if share is not None and share < th.MIN_EXCESS_SHARE:
            continue
        out.append(Finding(
            "small_packets", "low", "communication",
            f"{fmt.percent(ratio)} of the {SIZE_CLASS_OPS[kind]} move less than {fmt.quantity(limit, 'mb')} "
            f"({int(small.sum())} of {len(small)}), {fmt.ms(t)} per step and rank.",
            evidence={"metric": "small_op_ratio", "value": ratio, "reference": th.SMALL_PACKET_SHARE,
                      "limit_mb": limit, "share_of_step_ratio": share},
            suggestion="Fewer, larger messages: raise the gradient bucket / fusion size, the batch size or "
                       "gradient accumulation; fused optimizers reduce the number of collectives.",
            view=EvidenceView(SIZES_FIGURE)))
    return out


def _wait(ctx: _Ctx) -> facts.InputWait | None:
    """The run's input-wait measure (reportgen/facts.py input_wait), what the data section and the trajectory show."""
    return facts.input_wait(ctx.run)


def rule_data_wait(ctx: _Ctx) -> list[Finding]:
    """Data loading / preparing (msprof-analyze's dataloader family; the seed's step interval): the mean over
    ranks of the run's input-wait share (reportgen/facts.py input_wait: DataLoader wait, else preparing time, else
    step interval; the one the data section shows); above 5 % the whole run waits for input. Time at stake: that
    share."""
    W = _wait(ctx)
    if W is None or not W.share_mean > th.DATA_WAIT_SHARE:
        return []
    share, col, label = W.share_mean, W.column, W.measure
    top = W.per_rank.dropna(subset=["wait_share_ratio"]).sort_values(["wait_ms", "rank"], ascending=[False, True])
    return [Finding(
        "data_wait", "low", "trajectory",
        f"Ranks spend {fmt.percent(share)} of the step in the {label} (mean {fmt.ms(top['wait_ms'].mean())}), "
        f"waiting for input; most: rank {int(top['rank'].iloc[0])} ({fmt.ms(top['wait_ms'].iloc[0])}).",
        ranks=[int(r) for r in top["rank"].head(8)],
        evidence={"metric": "wait_share_ratio", "value": share, "reference": th.DATA_WAIT_SHARE,
                  "wait_metric": col, "wait_measure": label, "mean_ms": float(top["wait_ms"].mean()),
                  "share_of_step_ratio": share},
        suggestion="Prefetch and load data in parallel (more dataset / DataLoader workers, pinned memory, "
                   "prefetch_factor), move preprocessing off the training step, check storage throughput.",
        view=metric_view(col))]


def rule_slow_dataloader(ctx: _Ctx) -> list[Finding]:
    """msprof-analyze advisor *slow dataloader*: ``enumerate(DataLoader)...__next__`` over 10 ms in a step (needs
    the trace's CPU ops: table ``dataloader``). Time at stake: the mean per step and rank beyond 10 ms."""
    dl = ctx.run.table("dataloader")
    if dl is None or dl.empty:
        return []
    per = ctx.in_scope(dl).groupby(["rank", "step"], as_index=False)["dur_ms"].sum()
    slow = per[per["dur_ms"] > th.DATALOADER_MS]
    if slow.empty:
        return []
    excess = float((per["dur_ms"] - th.DATALOADER_MS).clip(lower=0).mean())
    share = excess / ctx.step_ms if ctx.step_ms else None
    worst = slow.loc[slow["dur_ms"].idxmax()]
    ranks = sorted(int(r) for r in slow["rank"].unique())
    wait = _wait(ctx)
    return [Finding(
        "slow_dataloader", "low", "trajectory",
        f"The DataLoader's __next__ takes more than {fmt.ms(th.DATALOADER_MS)} in {len(slow)} step(s) on rank(s) "
        f"{rank_ranges(ranks)}; longest {fmt.ms(worst['dur_ms'])} (rank {int(worst['rank'])}, step "
        f"{int(worst['step'])}).",
        ranks=ranks, evidence={"metric": "dataloader_ms", "value": float(worst["dur_ms"]),
                               "reference": th.DATALOADER_MS, "share_of_step_ratio": share},
        suggestion="Use more DataLoader workers (num_workers), persistent_workers and pin_memory; prefetch.",
        # no chart has the DataLoader's own time: the time before the step's device work, which holds it
        view=metric_view(wait.column) if wait is not None else EvidenceView("trajectory-bars"))]


def rule_long_free(ctx: _Ctx) -> list[Finding]:
    """Long free time (msprof-analyze's free_analysis / schedule family): the device is idle — neither computing
    nor communicating — for more than 10 % of the step, the run-wide free share (the overlap section's
    ``free_share_ratio``, :func:`reportgen.sections.overlap.comm_shares`: the number the summary shows). Time at
    stake: the free share."""
    pr, a = _per_rank(ctx), ctx.analysis("overlap")
    share = a.metrics.get("free_share_ratio") if a is not None else None
    if pr is None or "free_ms" not in pr or share is None or not share > th.LONG_FREE_SHARE:
        return []
    share = float(share)
    top = pr.dropna(subset=["free_ms"]).sort_values(["free_ms", "rank"], ascending=[False, True])
    return [Finding(
        "long_free_time", "low", "overlap",
        f"The devices are idle {fmt.percent(share)} of the step on average (neither computing nor communicating); "
        f"most idle: rank {int(top['rank'].iloc[0])} ({fmt.ms(top['free_ms'].iloc[0])} per step).",
        ranks=[int(r) for r in top["rank"].head(8)],
        evidence={"metric": "free_share_ratio", "value": share, "reference": th.LONG_FREE_SHARE,
                  "free_ms_mean": float(top["free_ms"].mean()), "share_of_step_ratio": share},
        suggestion="The host does not feed the device fast enough: look for synchronisations (.item(), "
                   "prints, logging), Python overhead, small kernels, data loading; "
                   + platform_text(ctx.run, GRAPH_ADVICE),
        view=EvidenceView("overlap-heatmap", {"overlap_metric": "free_ms"}))]


#: advice naming a platform's feature, per device kind (Run.device): chosen by platform_text, never by reader family
GRAPH_ADVICE = {"gpu": "CUDA graphs / graph mode help.",
                "npu": "graph mode (GRAPH_MODE, torchair / aclgraph) helps.",
                "": "graph mode (capturing the step as one graph) helps."}


def platform_text(run: Run, texts: dict[str, str]) -> str:
    """The text of ``texts`` for the run's device kind (``Run.device``: npu / gpu / cpu / ""), else its "" entry: a
    feature of one platform (CUDA graphs) is advised only on that platform."""
    return texts.get(getattr(run, "device", "") or "", texts[""])


def contention_ops(run: Run) -> pd.DataFrame | None:
    """Per operator instance on an intra-node transport: bandwidth (Σ size / Σ time over its SDMA-class rows) and
    the share of its duration that overlaps computation (trace / DB computing intervals of its rank)."""
    from .. import intervals as iv

    bw, ops, ov = run.table("comm_bandwidth"), run.table("comm_ops"), run.table("overlap_intervals")
    if bw is None or ops is None or ov is None or bw.empty or ops.empty:
        return None
    comp = ov[ov["kind"] == "computing"]
    if comp.empty:
        return None
    x = bw[bw["transport"].isin(["HCCS", "PCIE", "SIO", "SDMA"]) & (bw["time_ms"] > 0)]
    x = x.groupby(["rank", "step", "op"], as_index=False)[["size_mb", "time_ms"]].sum()
    x = x[x["size_mb"] >= th.LINK_MIN_MB]
    o = ops.drop_duplicates(["rank", "step", "op"])[["rank", "step", "op", "start_ms", "elapse_ms"]]
    x = x.merge(o, on=["rank", "step", "op"])
    if x.empty:
        return None
    parts = []
    comp_of = ByRank(comp)
    for rank, g in x.groupby("rank"):
        c = comp_of[rank]
        cu = iv.union(c["start_ms"].to_numpy(float), c["end_ms"].to_numpy(float))
        start, dur = g["start_ms"].to_numpy(float), g["elapse_ms"].to_numpy(float)
        cov = iv.covered(cu, start, start + dur)
        parts.append(g.assign(overlap_ratio=np.divide(cov, dur, out=np.zeros_like(cov), where=dur > 0)))
    out = pd.concat(parts, ignore_index=True)
    out["bandwidth_gbps"] = out["size_mb"] / out["time_ms"]
    return out


def rule_bandwidth_contention(ctx: _Ctx) -> list[Finding]:
    """msprof-analyze advisor *Bandwidth Contention*: intra-node communication slowed down by computation running
    at the same time (both compete for HBM and the SDMA engines). An operation that overlaps computation for at
    least ``CONTENTION_OVERLAP`` of its duration and runs below ``CONTENTION_BELOW`` x the median bandwidth of the
    operations that do not overlap computation (< 10 %) is contended. Departure: the peer's reference is a fixed
    18 GB/s (one chip's HCCS); ours is the run's own uncontended bandwidth, so it holds on any chip. Time at stake:
    the time those operations took beyond their bytes at the reference bandwidth, per step and rank."""
    x = contention_ops(ctx.run)
    if x is None:
        return []
    free = x[x["overlap_ratio"] < 0.1]
    if len(free) < 3:
        return []
    ref = float(free["bandwidth_gbps"].median())
    hit = x[(x["overlap_ratio"] >= th.CONTENTION_OVERLAP) & (x["bandwidth_gbps"] < th.CONTENTION_BELOW * ref)]
    if hit.empty:
        return []
    excess = float((hit["time_ms"] - hit["size_mb"] / ref).clip(lower=0).sum())
    per = excess / max(1, ctx.steps) / max(1, x["rank"].nunique())
    share = per / ctx.step_ms if ctx.step_ms else None
    if share is not None and share < th.MIN_EXCESS_SHARE:
        return []
    worst = hit.loc[hit["bandwidth_gbps"].idxmin()]
    return [Finding(
        "bandwidth_contention", "low", "communication",
        f"{len(hit)} intra-node communication operation(s) overlapping computation ran below "
        f"{fmt.percent(th.CONTENTION_BELOW)} of the {fmt.quantity(ref, 'gbps')} the same transport reaches without "
        f"computation; "
        f"worst {worst['op']} on rank {int(worst['rank'])}: {fmt.quantity(worst['bandwidth_gbps'], 'gbps')}.",
        ranks=sorted(int(r) for r in hit["rank"].unique()),
        evidence={"metric": "bandwidth_gbps", "value": float(worst["bandwidth_gbps"]), "reference": ref,
                  "operators": int(len(hit)), "excess_ms_per_step": per, "share_of_step_ratio": share},
        suggestion="Computation and communication compete for memory bandwidth: move the overlapped collectives "
                   "next to lighter kernels, or reduce the overlap (communication stream priority, bucket order).",
        view=EvidenceView("communication-link-boxes", {"link_metric": "bandwidth_gbps"})
        if "link_ops" in getattr(ctx.analysis("communication"), "tables", {}) else EvidenceView("communication-ranks"))]


# --------------------------------------------------------------------------------------------- rule table
@dataclass(frozen=True)
class Rule:
    id: str
    title: str
    source: str  # seed | msprof-analyze | reportgen
    section: str
    threshold: str
    finding_ids: tuple[str, ...]
    check: Callable[[_Ctx], list[Finding]] | None = None  # advisor rules; None = raised by the section
    needs: str = ""  # what data the rule needs, shown when it cannot run
    applies: Callable[[_Ctx], bool] | None = None
    #: the canonical tables / columns the rule reads, as a section's NEEDS (each item a table, ``table.column``, or
    #: a tuple of alternatives): a rule whose inputs the run lacks is "not applicable: needs X", never "passed"
    inputs: tuple = ()
    #: tables whose provenance (the files that give them, ``Options.provenance``) a "not applicable" reason names
    sources: tuple = ()


#: the input-wait measure (reportgen/facts.py input_wait): DataLoader spans, else preparing time, else step interval
WAIT_INPUTS = ("dataloader", "step_time.preparing_ms", "step_trace.step_interval_ms")
#: the device-work part of a step compared with stage peers (the trajectory's compute metric)
COMPUTE_INPUTS = ("step_trace.fp_bp_ms", "step_time.computing_ms", "step_time.other_ms")


def _capacity_known(ctx: _Ctx) -> bool:
    a = ctx.analysis("memory")
    return a is not None and (a.metrics.get("capacity_known_ranks") or 0) > 0


def _pipeline(ctx: _Ctx) -> bool:
    return (ctx.run.parallel.get("stages") or 0) > 1


def _has_free(ctx: _Ctx) -> bool:
    pr = _per_rank(ctx)
    return pr is not None and "free_ms" in pr and bool(pr["free_ms"].notna().any())


def _has_links(ctx: _Ctx) -> bool:
    a = ctx.analysis("communication")
    return a is not None and ("links" in a.tables or "links_local" in a.tables)


def _has_transit(ctx: _Ctx) -> bool:
    """The transit outlier rule runs where the operations have per-rank transit times and groups (the communication
    section's ``transit_applicable``), whatever the family."""
    a = ctx.analysis("communication")
    return a is not None and bool(a.data.get("transit_applicable"))


def rules() -> list[Rule]:
    pct = fmt.percent
    return [
        Rule("step_interval", "Slow data loading / preparing per rank and host", "seed", "trajectory",
             f"> {pct(th.STEP_INTERVAL_ABOVE_MEAN)} above the mean of ranks",
             ("slow_step_interval", "slow_preparing", "slow_input_wait", "slow_host"),
             needs="an input-wait measure: DataLoader spans, preparing time or step interval", inputs=(WAIT_INPUTS,)),
        Rule("slow_device_compute", "Compute straggler within its stage", "reportgen", "trajectory",
             f"> {pct(th.FP_BP_ABOVE_STAGE_PEERS)} above the stage peers' median", ("slow_device_compute",),
             needs="per-step device work (forward+backward or computing time)", inputs=(COMPUTE_INPUTS,)),
        Rule("comm_share", "Exposed communication share", "seed", "overlap", f"> {pct(th.COMM_SHARE)} of the step",
             ("comm_share",), needs="a run without pipeline stages (pipelines: the two rules below)",
             applies=lambda c: not _pipeline(c)),
        Rule("pipeline_between_stage", "Receive between pipeline stages (bubble)", "seed", "overlap",
             f"> {pct(th.COMM_SHARE)} of the step", ("pipeline_between_stage",), needs="pipeline stages",
             applies=_pipeline),
        Rule("pipeline_within_stage", "Collectives inside a pipeline stage", "seed", "overlap",
             f"> {pct(th.COMM_SHARE)} of the stage time", ("pipeline_within_stage",), needs="pipeline stages",
             applies=_pipeline),
        Rule("cluster_link", "Slow link (bandwidth below its transport's mean)", "seed", "communication",
             f"> {pct(th.LINK_BELOW_TYPE_MEAN)} below the mean; links moving >= {fmt.quantity(th.LINK_MIN_MB, 'mb')}",
             ("slow_link",), needs="per-link data (communication matrix / hccl_raw)", applies=_has_links),
        Rule("slow_link_transit", "Slow link by per-operator transit outliers", "msprof-analyze", "communication",
             "transit > group median + 3 MAD and + 0.1 ms", ("slow_link_transit",),
             needs="per-rank transit times of each operator and its process group", sources=("comm_ops",),
             applies=_has_transit),
        Rule("flops_per_second", "FLOP/s below the mean of ranks", "seed", "flops",
             f"> {pct(th.FLOPS_BELOW_MEAN)} below the mean", ("flops_per_s_low",), needs="FLOPs data"),
        Rule("pipeline_parallel_flops", "Stage FLOPs imbalance", "seed", "flops",
             f"> {pct(th.STAGE_FLOPS_ABOVE_MEAN)} above the stage mean", ("stage_flops_imbalance",),
             needs="FLOPs data and pipeline stages", applies=_pipeline),
        Rule("memory_near_capacity", "Peak memory near device capacity", "msprof-analyze", "memory",
             f"> {pct(th.MEMORY_NEAR_CAPACITY)} of capacity", ("memory_near_capacity",),
             needs="memory data and the device capacity (--device-memory-gb)", applies=_capacity_known),
        Rule("memory_imbalance", "Peak memory far from the stage median", "reportgen", "memory",
             f"> {pct(th.MEMORY_IMBALANCE)} from the median", ("memory_imbalance",), needs="memory data"),
        Rule("slow_rank_spread", "Slow rank by computing / communication / free spread", "msprof-analyze", "overlap",
             f"(max - min) > {pct(th.SLOW_RANK_SPREAD)} of the mean step, within a stage", ("slow_rank_spread",),
             check=rule_slow_rank_spread, needs="per-rank computing / communication / free time"),
        Rule("slow_rank_vote", "Slow rank by collective vote (Dixon's Q 99.5% / 3σ)", "msprof-analyze",
             "communication",
             f">= {th.VOTE_MIN_COUNT} votes, more than chance (binomial p < {fmt.number(th.VOTE_P_VALUE)})",
             ("slow_rank_vote",), check=rule_slow_rank_vote, needs="per-rank durations of each collective"),
        Rule("small_packets", "Small communication packets", "msprof-analyze", "communication",
             f"> {pct(th.SMALL_PACKET_SHARE)} of operations below {fmt.quantity(th.SMALL_PACKET_SDMA_MB, 'mb')} "
             f"(intra-node) / {fmt.quantity(th.SMALL_PACKET_RDMA_MB, 'mb')} (RDMA, PyTorch)", ("small_packets",),
             check=rule_small_packets,
             needs="operator sizes"),
        Rule("data_wait", "Time waiting for input before the step's device work", "msprof-analyze", "trajectory",
             f"> {pct(th.DATA_WAIT_SHARE)} of the step", ("data_wait",), check=rule_data_wait,
             needs="an input-wait measure: DataLoader spans, preparing time or step interval", inputs=(WAIT_INPUTS,)),
        Rule("slow_dataloader", "Slow DataLoader __next__", "msprof-analyze", "trajectory",
             f"> {fmt.ms(th.DATALOADER_MS)} per step", ("slow_dataloader",), check=rule_slow_dataloader,
             needs="enumerate(DataLoader) spans (the trace's CPU activity)", inputs=("dataloader",)),
        Rule("long_free_time", "Long free (idle device) time", "msprof-analyze", "overlap",
             f"> {pct(th.LONG_FREE_SHARE)} of the step", ("long_free_time",), check=rule_long_free,
             needs="a device timeline with free time (a per-step breakdown that counts idle time as computation, "
                   "as the seed's cluster analysis does, has none)", sources=("step_time.free_ms",),
             applies=lambda c: _has_free(c)),
        Rule("diagnosis_rank", "A rank or host the others wait for (compute, input, launches, late)", "reportgen",
             "waits", "excess over the stage peers >= 5% of the step (input: 2%), beyond 2x their spread or on the "
             "critical path, in >= 75% of the steps",
             ("slow_rank_compute", "slow_input_pipeline", "launch_bound_rank", "rank_arrives_late"),
             needs="entry times of collective / point-to-point operations (who waited for whom)"),
        Rule("diagnosis_link", "A point-to-point link whose receiver waits", "reportgen", "waits",
             "wait beyond 2x the spread of the other links between the same stages, >= 5% of the step",
             ("slow_p2p_link",), needs="matched send / receive pairs with entry times"),
        Rule("diagnosis_stage", "A pipeline stage with more work", "reportgen", "waits",
             ">= 1.3x the other stages' compute and >= 5% of the step", ("heavy_pipeline_stage",),
             needs="pipeline stages and a compute timeline", applies=_pipeline),
        Rule("diagnosis_overlap", "Large collectives not overlapped with compute", "reportgen", "waits",
             ">= 1 MB, >= 90% exposed on every rank, >= 3% of the step", ("comm_not_overlapped",),
             needs="communication sizes and a compute timeline"),
        Rule("comm_vs_baseline", "Exposed communication grew since the baseline run", "reportgen", "overlap",
             f"+{pct(th.BASELINE_COMM_GROWTH)} of the step or more", ("comm_grew_vs_baseline",),
             check=rule_comm_vs_baseline, needs="--baseline and a computation / communication breakdown",
             applies=lambda c: bool(c.baseline) and c.baseline.get("comm_share") is not None),
        Rule("bandwidth_contention", "Bandwidth contention while computing", "msprof-analyze", "communication",
             f"intra-node op overlapping computation >= {pct(th.CONTENTION_OVERLAP)} of its time and below "
             f"{pct(th.CONTENTION_BELOW)} of the uncontended bandwidth", ("bandwidth_contention",),
             check=rule_bandwidth_contention,
             needs="per-operator intra-node bandwidth and a device timeline",
             sources=("comm_bandwidth", "overlap_intervals"),
             applies=lambda c: all(c.run.table(t) is not None
                                   for t in ("comm_bandwidth", "comm_ops", "overlap_intervals"))),
    ]


def _sources_text(options, tables: tuple) -> str:
    """``: table (Family: files; ...); ...``: what gives the rule's source tables (the runner's provenance), as the
    reason of a rule whose inputs are missing says it; "" without provenance."""
    text = "; ".join(with_sources(options, [t]) for t in tables if sources(options, t))
    return f": {text}" if text else ""


# --------------------------------------------------------------------------------------------- section API
def analyze(run: Run, options=None) -> Analysis:
    done = dict(getattr(options, "done", {}) or {})
    if not any(o.status == "ok" for o in done.values()):
        raise Unavailable("No section produced data, so no rule could be checked.")
    ctx = _context(run, done)
    ctx.baseline = (options.get("baseline_headline") if options is not None and hasattr(options, "get") else None)
    new: list[Finding] = []
    status_rows = []
    existing = [f for o in done.values() if o.view is not None for f in o.view.findings]
    raised_all: dict[int, Finding] = {}  # every finding a rule raised, once (merge says where each went)
    for rule in rules():
        sec = done.get(rule.section)
        result, reason, raised = "passed", "", []
        missing = missing_needs(run, rule.inputs)
        if missing:
            # what the rule needs in words, then the tables the run lacks and the files that give them
            tables = "; ".join(with_sources(options, m.split(" or ")) for m in missing)
            result, reason = "not applicable", f"needs {rule.needs}: {tables}" if rule.needs else f"needs {tables}"
        elif sec is None or sec.status != "ok":
            result = "not applicable"
            reason = f"section {rule.section} is {sec.status if sec else 'not run'}; needs {rule.needs}" \
                + _sources_text(options, rule.sources)
        elif rule.applies is not None and not rule.applies(ctx):
            result, reason = "not applicable", f"needs {rule.needs}" + _sources_text(options, rule.sources)
        elif rule.check is not None:
            try:
                raised = rule.check(ctx)
            except Exception as exc:  # one broken rule must not take the advisor down
                log.debug("advisor rule %s failed", rule.id, exc_info=True)
                result, reason = "error", f"{type(exc).__name__}: {str(exc)[:160]}"
            new.extend(raised)
        else:
            raised = [f for f in existing if f.id in rule.finding_ids]
        if raised:
            result = "raised"
            raised_all.update((id(f), f) for f in raised)
        status_rows.append({"rule": rule.id, "title": rule.title, "source": rule.source, "section": rule.section,
                            "threshold": rule.threshold, "result": result, "findings": len(raised),
                            "reason": reason})
    for f in existing + new:
        if f.cause is not None:
            continue  # a diagnosed cause: its severity is time at stake x confidence (reportgen/diagnosis.py)
        share = share_of_step(f, ctx)
        f.share_of_step = share
        if share is not None:
            f.severity = th.severity(share)
    table = pd.DataFrame(status_rows)
    tables = {"rules": table}
    spread = spread_table(ctx)
    if spread is not None:
        tables["spread"] = spread
    metrics = {"thresholds": th.as_dict(), "rules": int(len(table)),
               "rules_checked": int((table["result"] != "not applicable").sum()),
               "rules_not_applicable": int((table["result"] == "not applicable").sum()),
               "rules_raised": int((table["result"] == "raised").sum()),
               "rule_findings": int(table["findings"].sum()),
               "step_ms_reference": ctx.step_ms}
    return Analysis(metrics=metrics, tables=tables, data={"new": new, "raised": list(raised_all.values())})


def present(a: Analysis) -> View:
    t = a.tables["rules"]
    tables = [Table.from_frame(
        "advisor-rules", "Rules checked", t,
        [Column("rule", "Rule", "text"), Column("title", "What it checks", "text"), Column("source", "Source", "text"),
         Column("section", "Section", "text"), Column("threshold", "Threshold", "text"),
         Column("result", "Result", "text"), Column("findings", "Findings", "int"),
         Column("reason", "Why not applicable", "text")],
        caption="seed = the seed's cluster helper (version 2.3.1); msprof-analyze = its advisor and cluster recipes; "
                "reportgen = our own rules (docs/departures.md names the peers' tools and versions). Thresholds live in "
                "reportgen/thresholds.py.")]
    th_rows = pd.DataFrame([{"name": k, "value": v} for k, v in a.metrics["thresholds"].items()])
    tables.append(Table.from_frame("advisor-thresholds", "Thresholds", th_rows,
                                   [Column("name", "Name", "text"),
                                    Column("value", "Value", "quantity", kind_from="name")]))
    if "spread" in a.tables:
        sp = a.tables["spread"]
        cols = [Column("step", "Step", "int"), Column("step_ms_mean", "Mean step time", "ms")] + [
            Column(c, label, "ms") for c, label in (("computing_spread_ms", "Computing spread"),
                                                    ("comm_not_overlapped_spread_ms", "Exposed comm spread"),
                                                    ("free_spread_ms", "Free spread")) if c in sp]
        tables.append(Table.from_frame(
            "advisor-spread", "Spread (max - min) across all ranks per step", sp, cols,
            caption="As msprof-analyze's slow-rank analyser prints it (all ranks together); the slow_rank_spread "
                    "rule compares ranks within their pipeline stage."))
    return View(summary=summary_text(a.metrics), tables=tables)


def summary_text(m: dict) -> str:
    """What the advisor's counts count: rules (checked / not applicable / raising), the findings those rules raised,
    and (once :func:`merge` has counted the page) every finding the report lists, the sections' own included."""
    listed = m.get("findings_listed")
    text = (f"{m['rules']} rules: {m['rules_checked']} checked, {m['rules_not_applicable']} not applicable (the run "
            f"lacks what they need; the table says what). {m['rules_raised']} of the rules checked raised "
            f"{count(m['rule_findings'], 'finding')}")
    if listed is not None:
        on_own = m.get("rule_findings_listed", m["rule_findings"])
        went = [count(n, w, p) for n, w, p in (
            (on_own, "listed on its own", "listed on their own"),
            (m.get("rule_findings_symptoms", 0), "listed under a cause as its symptom",
             "listed under a cause as its symptoms"),
            (m.get("rule_findings_observed", 0), "an observation (table below)", "observations (table below)")) if n]
        if went and went[0] != count(m["rule_findings"], "listed on its own", "listed on their own"):
            text += ": " + ", ".join(went)
        own = listed - on_own
        text += (f"; the report lists {count(listed, 'finding')} in all"
                 + (f" ({own} from the diagnosis and the sections' own checks, which have no rule in this table)"
                    if own > 0 else ""))
    return text + (f". Severity: high at >= {fmt.percent(th.SEVERITY_HIGH_SHARE)} of the step time at stake, medium "
                   f"at >= {fmt.percent(th.SEVERITY_MEDIUM_SHARE)}, otherwise low (findings not about time keep their "
                   f"rule's severity).")


#: findings about one slow rank: they link to the rank comparison with the rank beside a normal peer
STRAGGLER_FINDINGS = ("slow_device_compute", "slow_rank_spread", "slow_rank_vote", "group_slow_member",
                      "slow_step_interval", "slow_rank_compute", "rank_arrives_late", "launch_bound_rank",
                      "slow_input_pipeline")


def _link_compare(outcomes: list[SectionOutcome]) -> None:
    """Straggler findings naming one rank get ``compare`` = [that rank, the median rank of its stage by the
    comparison's measure] when the rank comparison's chart holds both (its controls then choose the pair)."""
    cmp = next((o for o in outcomes if o.id == "compare" and o.status == "ok"), None)
    if cmp is None:
        return
    embed = set(cmp.analysis.data.get("embed") or [])
    pr = cmp.analysis.data["measure"]  # the measure the default pair uses (compute time, else step time)
    stage = {int(r): s for r, s in (cmp.analysis.data.get("stages") or {}).items()}
    for o in outcomes:
        for f in (o.view.findings if o.view is not None else []):
            if f.id not in STRAGGLER_FINDINGS or len(f.ranks) != 1 or int(f.ranks[0]) not in embed:
                continue
            r = int(f.ranks[0])
            peers = [p for p in embed if p != r and stage.get(p) == stage.get(r)] or [p for p in embed if p != r]
            if not peers:
                continue
            peers.sort(key=lambda p: (float(pr[p]), p))
            f.compare = [r, peers[(len(peers) - 1) // 2]]


#: findings about time shares and rank spreads that the diagnosis (reportgen/diagnosis.py) supersedes where it could
#: judge who waited for whom: symptoms of a cause (listed under it), else observations below the run's noise
SYMPTOM_IDS = frozenset({
    "slow_rank_spread", "slow_rank_vote", "small_packets", "data_wait", "slow_dataloader", "long_free_time",
    "slow_link_transit", "group_slow_member", "group_slow_link", "group_exposed_comm", "group_slow_fabric",
    "comm_share", "pipeline_between_stage", "pipeline_within_stage", "slow_input_wait", "slow_step_interval",
    "slow_preparing", "slow_host", "slow_device_compute"})
#: FLOPs findings: under a cause where there is one (the ranks that wait for it run fewer FLOP/s), else left as
#: they are (FLOP counts are not jitter)
ATTACH_IDS = frozenset({"flops_per_s_low", "stage_flops_imbalance"})


#: run-wide levels among them (not differences between ranks): the largest stays listed, low, when no cause is found
LEVEL_IDS = frozenset({"comm_share", "long_free_time", "pipeline_between_stage", "pipeline_within_stage"})


def _symptom(f: Finding) -> dict:
    """A finding as a symptom listed under its cause."""
    return {"id": f.id, "section": f.section, "severity": f.severity, "ranks": [int(r) for r in f.ranks],
            "links": [list(x) for x in f.links], "message": f.message, "share_of_step_ratio": f.share_of_step,
            "evidence": {k: v for k, v in (f.evidence or {}).items() if k != "cause"}}


def _cause_of(f: Finding) -> dict | None:
    return f.cause or (f.evidence or {}).get("cause")


def _host_cause(f: Finding, causes: list[Finding]) -> Finding | None:
    """The cause a symptom belongs to: the cause about time whose ranks match its own best, else the first (most
    severe) cause about time (the ranks that wait do so for someone else: a stage's collectives and receives wait
    for the heavy stage). A memory cause explains no time."""
    ranks = set(int(r) for r in f.ranks)
    timed = [c for c in causes if (_cause_of(c) or {}).get("kind") != "memory"]
    # among the causes that share ranks with it, the one whose ranks match its own best (Jaccard; the most severe
    # on a tie): a host's input wait goes to the input cause of that host, not to the stage the host is part of
    best, best_j = None, 0.0
    for c in timed:
        cr = set(int(r) for r in (_cause_of(c) or {}).get("ranks") or c.ranks)
        j = len(ranks & cr) / len(ranks | cr) if ranks | cr else 0.0
        if j > best_j:
            best, best_j = c, j
    if best is not None:
        return best
    return timed[0] if timed else None


def consolidate(outcomes: list[SectionOutcome]) -> None:
    """One problem, one finding, led by its cause: where the diagnosis judged the run (section ``waits``), the
    findings of :data:`SYMPTOM_IDS` leave the list: each goes under the cause it belongs to (``symptoms``) or, when
    no cause was found beyond the run's noise, into the advisor's observations table (the rule table still says
    which rules raised them), except the largest run-wide level of :data:`LEVEL_IDS`, which stays listed: as low
    where the diagnosis saw every rank's compute timeline (nothing it could name is behind the level), else with its
    own severity."""
    by_id = {o.id: o for o in outcomes}
    w = by_id.get("waits")
    if w is None or w.status != "ok" or not w.analysis.metrics.get("judged"):
        return
    views = [o.view for o in outcomes if o.view is not None]
    causes = [f for v in views for f in v.findings if _cause_of(f)]
    causes.sort(key=lambda f: order_key({"severity": f.severity, "share_of_step_ratio": f.share_of_step}))
    # one problem, one finding: a second cause of the same kind at the same place (the diagnosis's and the
    # baseline comparison's view of communication that is not overlapped) goes under the first
    seen, dup = {}, set()
    for c in causes:
        k = _cause_of(c)
        key = (k.get("kind"), tuple(sorted(k.get("ranks") or [])), tuple(k.get("link") or ()))
        if key in seen and k.get("kind") != "memory":
            seen[key].symptoms.append(_symptom(c))
            dup.add(id(c))
        else:
            seen.setdefault(key, c)
    causes = [c for c in causes if id(c) not in dup]
    for v in views:
        v.findings[:] = [f for f in v.findings if id(f) not in dup]
    observed = []
    for v in views:
        keep = []
        for f in v.findings:
            if f.id in ATTACH_IDS and not _cause_of(f):
                # ranks computing fewer FLOP/s while they wait are a cause's symptom; a stage with more FLOPs is
                # the heavy stage's evidence (and a problem of its own where no stage cause was found)
                if f.id == "stage_flops_imbalance":  # a heavy stage, or a rank of it with extra work
                    host = next((c for c in causes if (_cause_of(c) or {}).get("kind") == "stage"), None) or next(
                        (c for c in causes if (_cause_of(c) or {}).get("kind") in ("compute", "launch")
                         and set((_cause_of(c) or {}).get("ranks") or []) & set(int(r) for r in f.ranks)), None)
                else:
                    host = _host_cause(f, causes)
                if host is None:
                    keep.append(f)
                else:
                    host.symptoms.append(_symptom(f))
                continue
            if f.id not in SYMPTOM_IDS or _cause_of(f):
                keep.append(f)
                continue
            entry = _symptom(f)
            host = _host_cause(f, causes)
            if host is not None:
                host.symptoms.append(entry)
            else:
                observed.append((entry, f, v))
        v.findings[:] = keep
    # without a cause, the largest run-wide level (exposed communication, idle, pipeline receive) stays listed, low:
    # it is a level of the whole run, not a difference between ranks that jitter could make
    level = [x for x in observed if x[1].id in LEVEL_IDS and x[1].share_of_step is not None]
    if level and not causes:
        entry, f, v = max(level, key=lambda x: x[1].share_of_step)
        if w.analysis.metrics.get("timeline"):  # the diagnosis saw each rank's compute and found nothing behind it
            f.severity = "low"
        v.findings.append(f)
        observed.remove((entry, f, v))
    adv = by_id.get(ID)
    if adv is not None and adv.status == "ok":
        adv.analysis.data["observed_ids"] = {id(x[1]) for x in observed}
    observed = [x[0] for x in observed]
    if adv is not None and adv.status == "ok":
        adv.analysis.data["observations"] = observed
        adv.analysis.metrics["observations"] = len(observed)
        if observed:
            t = pd.DataFrame(observed)[["id", "section", "ranks", "message"]]
            t["ranks"] = t["ranks"].map(lambda r: rank_ranges(r) if r else "")
            adv.analysis.tables["observations"] = t
            adv.view.tables.append(Table.from_frame(
                "advisor-observations", "Observations not raised as findings", t,
                [Column("id", "Rule", "text"), Column("section", "Section", "text"), Column("ranks", "Ranks", "text"),
                 Column("message", "What the rule saw", "text")],
                caption="Rules that fired where the diagnosis found no rank, link, stage or input pipeline that the "
                        "others wait for beyond the run's own jitter (section 'Diagnosis: who waits for whom'): "
                        "differences of this size come and go between steps and runs."))


def merge(outcomes: list[SectionOutcome]) -> None:
    """Put the advisor's new findings into the section whose chart shows them (or the advisor's own list when that
    section is not ok) and order every section's findings (:func:`order_key`)."""
    _link_compare(outcomes)
    by_id = {o.id: o for o in outcomes}
    adv = by_id.get(ID)
    if adv is not None and adv.status == "ok":
        for f in adv.analysis.data.get("new", []):
            home = by_id.get(f.section)
            (home.view if home is not None and home.view is not None else adv.view).findings.append(f)
    consolidate(outcomes)
    for o in outcomes:
        if o.view is not None:
            o.view.findings.sort(key=lambda f: order_key({"severity": f.severity, "share_of_step_ratio":
                                                          f.share_of_step}))
    if adv is not None and adv.status == "ok":  # the summary counts what the page lists
        listed = {id(f) for o in outcomes if o.view is not None for f in o.view.findings}
        adv.analysis.metrics["findings_listed"] = len(listed)
        # where the rules' findings went: listed on their own, an observation, or a cause's symptom (consolidate)
        raised = {id(f) for f in adv.analysis.data.get("raised", [])}
        observed = adv.analysis.data.get("observed_ids", set()) & raised
        adv.analysis.metrics["rule_findings_listed"] = len(raised & listed)
        adv.analysis.metrics["rule_findings_observed"] = len(observed - listed)
        adv.analysis.metrics["rule_findings_symptoms"] = len(raised - listed - observed)
        adv.view.summary = summary_text(adv.analysis.metrics)
