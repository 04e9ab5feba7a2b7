"""Diagnosis: which rank, link, stage or input pipeline the others wait for, how much time that costs per step,
and how sure we are — computed once per report from the facts layer (reportgen/facts.py) and read by the
"who waits for whom" section, the advisor and the summary.

Definitions (all per step in scope, then summarised over the steps):

* **Wait** (who waits for whom): at every collective call, each rank waits from its own entry to the last
  entry (:func:`reportgen.facts.entries`); that wait is charged to the rank that entered last. At every
  point-to-point transfer, the side that entered first waits for the other (:func:`reportgen.facts.p2p_entries`).
  ``matrix``: waiter x cause, mean ms per step.
* **Held time** of a rank: at the calls it entered last, the time between the next-to-last entry and its own — how
  much later the call started because of it alone.
* **Critical path** of a step (:func:`critical_path`): from the call that ends last, back through the rank that
  entered each call last to that rank's previous call, to the step's start. Each hop is that rank's own work
  (compute, data loading, host activity, idle) between two calls; the rest is transfer once every rank was in.
  Per step and rank: the own work on the path (``path``); the path's segments of the median step draw the chart.
* **Per rank and step features** (:func:`features`): compute busy time (the union of the rank's compute intervals
  on its timeline, ``device_timeline`` op_class compute, where an op that holds a whole collective is already cut
  around it: reportgen/timeline.py), operations launched (those intervals),
  input wait (:func:`reportgen.facts.input_wait`), held time, waited time.

**Causes** (:func:`diagnose`): a candidate is named only when its effect is beyond the run's own jitter:

* *rank* causes (compute, input pipeline, host launch): a feature of one rank exceeds the median of its stage
  peers by at least ``MIN_EFFECT_SHARE`` of the step and either by more than ``NOISE_K`` times the peers' own
  spread (max - min of the peers that step) or while the rank's own work is the longest on that step's critical
  path (ranks sharing a loaded machine slow each other down, which widens the peers' spread), in at least
  ``MIN_STEP_SHARE`` of the steps (input wait: from ``MIN_INPUT_SHARE`` of the step and only beyond the peers'
  spread); and the others waited for that rank (its held time above its peers' median, or
  the most own work on the critical path, in at least half the steps). The kind is the feature whose excess is largest (launch: operations launched at least
  ``LAUNCH_RATIO`` x the peers'). Time at stake per step: the smaller of the excess and the rank's held time.
* *link* causes: one point-to-point direction whose receiver (or sender) waits more than ``NOISE_K`` x the
  spread of the other links of the same stage pair, by at least ``MIN_EFFECT_SHARE`` of the step, in most steps.
* *stage* causes (pipelines): one stage's median compute busy time exceeds the others' by ``STAGE_RATIO`` and by
  ``MIN_EFFECT_SHARE`` of the step in most steps.
* Confidence = the share of the steps in which the test holds; severity = time at stake x confidence:
  ``high`` from ``HIGH_SCORE`` of the step (fix this first), ``medium`` from ``MEDIUM_SCORE``, else ``low``.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import facts, fmt, frames
from .intervals import union_length_by
from .model import Run
from .frames import agg

#: how many times the peers' own spread a rank's excess must reach
NOISE_K = 2.0
#: smallest effect worth naming, as a share of the step
MIN_EFFECT_SHARE = 0.05
#: ... for input wait, which barely varies between steps on a healthy rank (named only beyond NOISE_K x the peers'
#: spread, never on the critical path alone)
MIN_INPUT_SHARE = 0.02
#: share of the steps in which a cause's test must hold
MIN_STEP_SHARE = 0.75
#: operations launched per step, against the stage peers' median, that make a rank launch-bound
LAUNCH_RATIO = 3.0
#: a stage's compute busy time against the other stages' median that makes it the heavy stage
STAGE_RATIO = 1.3
#: collectives of at least this many MB are bandwidth-bound messages (gradient buckets) worth overlapping
LARGE_MB = 1.0
#: ... and count as not overlapped when at least this share of their time lies outside compute on every rank
EXPOSED_FRACTION = 0.9
#: smallest exposed time of such messages worth naming, as a share of the step
MIN_OVERLAP_SHARE = 0.03
#: severity by score = time at stake (share of the step) x confidence
HIGH_SCORE = 0.10
MEDIUM_SCORE = 0.03
#: entries beyond which the critical path is not walked (a 4096-rank run: the matrix and features still are)
MAX_PATH_ENTRIES = 2_000_000


@dataclass
class Cause:
    kind: str  # compute | dataloader | launch | link | stage | overlap | memory
    ranks: list[int]
    time_ms: float  # per step at stake
    share: float  # time_ms / median step
    confidence: float  # share of steps in which the test held
    steps: int  # steps tested
    link: list[int] | None = None
    stage: int | None = None
    evidence: dict = field(default_factory=dict)

    @property
    def score(self) -> float:
        return self.share * self.confidence

    @property
    def severity(self) -> str:
        return "high" if self.score >= HIGH_SCORE else "medium" if self.score >= MEDIUM_SCORE else "low"

    def as_dict(self) -> dict:
        """The cause as findings carry it (``cause``): ``stake_ms`` = time at stake per step (ms), its share of the
        median step, the share of steps in which the test held; metrics-json units (``_ms``, ``_ratio``)."""
        return {"kind": self.kind, "ranks": list(self.ranks), "link": self.link, "stage": self.stage,
                "stake_ms": self.time_ms, "share_of_step_ratio": self.share,
                "confidence_ratio": self.confidence, "steps": self.steps}


@dataclass
class Diagnosis:
    waits: pd.DataFrame  # step, waiter, cause, wait_ms, via (collective | p2p)
    matrix: pd.DataFrame  # waiter, cause, wait_ms (mean per step in scope)
    features: pd.DataFrame  # rank, step, stage, step_ms, busy_ms, ops, input_ms, held_ms, waited_ms
    path: pd.DataFrame | None  # step, rank, own_ms (critical path's own work per rank and step)
    segments: pd.DataFrame | None  # step, rank, start_ms, end_ms, kind (own | transfer) of the median step's path
    causes: list[Cause]
    step_ms: float
    steps: int
    clocks: dict
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------------------------- waits
def _call_table(run: Run, F) -> pd.DataFrame | None:
    """One row per (call, member): cid, step, rank, enter_ms, end_ms, via; collectives and p2p transfers."""
    parts = []
    e = facts.entries(run)
    if e is not None and not e.empty:
        e = F.in_scope(e)
        cid = e.groupby(["step", "group", "op", "call"], sort=False).ngroup()
        parts.append(pd.DataFrame({"cid": cid.to_numpy(), "step": e["step"].to_numpy(), "rank": e["rank"].to_numpy(),
                                   "enter_ms": e["enter_ms"].to_numpy(), "end_ms": e["end_ms"].to_numpy(),
                                   "via": "collective"}))
    p = facts.p2p_entries(run)
    if p is not None and not p.empty:
        p = F.in_scope(p).reset_index(drop=True)
        base = (int(parts[0]["cid"].max()) + 1) if parts else 0
        ids = np.arange(len(p)) + base
        send_enter = p["send_enter_ms"].to_numpy(float)
        # the end of a transfer: the later entry (the data has no transfer end of its own)
        end = np.maximum(p["send_enter_ms"].to_numpy(float), p["recv_enter_ms"].to_numpy(float))
        parts.append(pd.DataFrame({"cid": ids, "step": p["step"].to_numpy(), "rank": p["src_rank"].to_numpy(),
                                   "enter_ms": send_enter, "end_ms": end, "via": "p2p"}))
        parts.append(pd.DataFrame({"cid": ids, "step": p["step"].to_numpy(), "rank": p["dst_rank"].to_numpy(),
                                   "enter_ms": p["recv_enter_ms"].to_numpy(float), "end_ms": end, "via": "p2p"}))
    if not parts:
        return None
    c = pd.concat(parts, ignore_index=True)
    c["rank"] = c["rank"].astype("int64")
    c["step"] = c["step"].astype("int64")
    c = c.sort_values(["cid", "enter_ms", "rank"], ascending=[True, False, True], kind="stable")
    first = ~c["cid"].duplicated()
    last = c[first].set_index("cid")
    c["last_rank"] = c["cid"].map(last["rank"])
    c["last_enter_ms"] = c["cid"].map(last["enter_ms"])
    pos = c.groupby("cid", sort=False).cumcount()
    second = c[pos == 1].set_index("cid")["enter_ms"]
    c["held_ms"] = np.where(first, c["enter_ms"] - c["cid"].map(second).fillna(c["enter_ms"]), 0.0)
    c["wait_ms"] = c["last_enter_ms"] - c["enter_ms"]
    c["call_end_ms"] = c.groupby("cid")["end_ms"].transform("max")
    return c


def features(run: Run, F, calls: pd.DataFrame | None) -> pd.DataFrame:
    """Per rank and step in scope (module doc)."""
    st = F.in_scope(F.step_time)[["rank", "step", "step_ms"]].copy()
    st["stage"] = [run.stage_of(int(r)) for r in st["rank"]]
    st["stage"] = st["stage"].fillna(0).astype("int64")
    tl = run.table("device_timeline")
    if tl is not None and not tl.empty and "op_class" in tl:
        comp = F.in_scope(tl[tl["op_class"] == "compute"])
        if not comp.empty:
            busy = union_length_by(comp, ["rank", "step"]).rename(columns={"length": "busy_ms", "rows": "ops"})
            st = st.merge(busy, on=["rank", "step"], how="left")
    for col in ("busy_ms", "ops"):
        if col not in st:
            st[col] = math.nan
    W = facts.input_wait(run)
    if W is not None:
        st = st.merge(W.per_rank_step[["rank", "step", "wait_ms"]].rename(columns={"wait_ms": "input_ms"}),
                      on=["rank", "step"], how="left")
        st["input_ms"] = st["input_ms"].fillna(0.0)  # a rank that loads nothing (its input is sent to it) waits 0
    else:
        st["input_ms"] = math.nan
    if calls is not None:
        h = agg(calls.groupby(["rank", "step"]), held_ms=("held_ms", "sum"), waited_ms=("wait_ms", "sum")).reset_index()
        st = st.merge(h, on=["rank", "step"], how="left")
        st[["held_ms", "waited_ms"]] = st[["held_ms", "waited_ms"]].fillna(0.0)
    else:
        st["held_ms"] = st["waited_ms"] = math.nan
    return st.sort_values(["step", "rank"]).reset_index(drop=True)


# --------------------------------------------------------------------------------------------- critical path
def critical_path(calls: pd.DataFrame, step: int, st_start: dict) -> list[tuple[int, float, float, str]]:
    """The critical path of one step (module doc): segments (rank, start_ms, end_ms, "own" | "transfer");
    ``st_start``: rank -> the start of its window of this step (else its first entry in the step)."""
    c = calls[calls["step"] == step]
    if c.empty:
        return []
    rows_of = {int(r): pos for r, pos in c.groupby("rank").indices.items()}
    col = {k: c[k].to_numpy() for k in ("end_ms", "cid", "last_rank", "last_enter_ms")}
    by_rank: dict[int, tuple] = {}  # a rank's rows by end (end_ms, cid, last_rank, last_enter_ms), made when the
    #   path first reaches the rank; walked as arrays (a row of a frame per hop cost 5 pandas calls)

    def rank_rows(r: int) -> tuple | None:
        if r not in by_rank and r in rows_of:
            pos = rows_of[r]
            ends = col["end_ms"][pos].astype(float)
            if np.isnan(ends).any():  # pandas' order (NaN last)
                order = pd.Series(ends).sort_values().index.to_numpy()
            else:  # what sort_values("end_ms") does: quicksort
                order = np.argsort(ends, kind="quicksort")
            pos = pos[order]
            by_rank[r] = (ends[order], col["cid"][pos].tolist(), col["last_rank"][pos].tolist(),
                          col["last_enter_ms"][pos].tolist())
        return by_rank.get(r)

    last = c.loc[c["call_end_ms"].idxmax()]
    cid = int(last["cid"])
    rank = int(last["last_rank"])
    t = float(last["last_enter_ms"])
    segs = [(rank, t, float(last["call_end_ms"]), "transfer")]
    seen = {cid}
    for _ in range(100_000):
        g = rank_rows(rank)
        prev = None
        if g is not None:
            ends, cids, last_ranks, last_enters = g
            i = int(np.searchsorted(ends, t, side="right")) - 1
            while i >= 0 and int(cids[i]) in seen:
                i -= 1
            if i >= 0:
                prev = i
        if prev is None:
            s0 = st_start.get(rank)
            if s0 is None:
                s0 = float(c[c["rank"] == rank]["enter_ms"].min()) if g is not None else t
            segs.append((rank, min(float(s0), t), t, "own"))
            break
        end = float(ends[prev])
        segs.append((rank, end, t, "own"))
        seen.add(int(cids[prev]))
        nxt = int(last_ranks[prev])
        segs.append((nxt, float(last_enters[prev]), end, "transfer"))
        rank, t = nxt, float(last_enters[prev])
    return segs[::-1]


def _path_table(calls: pd.DataFrame, F, run: Run) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    if calls is None or len(calls) > MAX_PATH_ENTRIES:
        return None, None
    from .timeline import step_windows

    win = step_windows(run)
    starts = {} if win is None else {(int(s_), int(r)): float(t) for s_, r, t in
                                     zip(win["step"], win["rank"], win["start_ms"])}
    rows, median_segs = [], None
    med = F.median_step()
    for step in sorted(calls["step"].unique()):
        segs = critical_path(calls, int(step), {r: t for (s_, r), t in starts.items() if s_ == int(step)})
        for r, a, b, kind in segs:
            if kind == "own":
                rows.append((int(step), r, max(0.0, b - a)))
        if med is not None and int(step) == int(med):
            median_segs = pd.DataFrame(segs, columns=["rank", "start_ms", "end_ms", "kind"]).assign(step=int(step))
    if not rows:
        return None, None
    path = pd.DataFrame(rows, columns=["step", "rank", "own_ms"]).groupby(["step", "rank"], as_index=False).sum()
    return path, median_segs


# --------------------------------------------------------------------------------------------- causes
def _peer_excess(f: pd.DataFrame, col: str) -> pd.DataFrame:
    """Per rank and step: value - median of the stage peers (the other ranks of its stage that step), and the
    peers' spread (max - min). Leave-one-out statistics from each group's sorted values, vectorised: a 4,096-rank
    run is ~10^4 rows per step."""
    cols = ["step", "stage", "rank", "value", "excess", "spread", "peer_median"]
    x = f[["step", "stage", "rank", col]].dropna(subset=[col])
    parts = []
    for (step, stage), g in x.groupby(["step", "stage"], sort=False):
        n = len(g)
        if n < 2:
            continue
        order = np.argsort(g[col].to_numpy(float), kind="stable")
        v = g[col].to_numpy(float)[order]
        k = np.arange(n)  # position of each rank in the sorted values
        m = n - 1  # peers

        def without(j):  # the j-th smallest of the values without the k-th
            return v[np.where(j < k, j, j + 1)]

        if m % 2:
            med = without(np.full(n, (m - 1) // 2))
        else:
            med = (without(np.full(n, m // 2 - 1)) + without(np.full(n, m // 2))) / 2
        hi = np.where(k == n - 1, v[n - 2], v[n - 1])
        lo = np.where(k == 0, v[1], v[0])
        parts.append(pd.DataFrame({"step": int(step), "stage": int(stage),
                                   "rank": g["rank"].to_numpy()[order].astype("int64"), "value": v,
                                   "excess": v - med, "spread": hi - lo, "peer_median": med}))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=cols)


def _rank_causes(d: Diagnosis, exclude: set | None = None) -> list[Cause]:
    """Rank causes (module doc); ``exclude``: ranks already named by a host cause, left out of every peer group."""
    f = d.features
    if exclude:
        f = f[~f["rank"].isin(exclude)]
    out = []
    steps = f["step"].nunique()
    if steps == 0:
        return out
    step_ms = d.step_ms
    excess: dict[str, pd.DataFrame] = {}

    def peer_excess(col: str) -> pd.DataFrame:
        """:func:`_peer_excess` of ``f`` and ``col``, once per column (the launch cause reads the compute one)."""
        if col not in excess:
            excess[col] = _peer_excess(f, col)
        return excess[col]

    held = _peer_excess(f, "held_ms") if f["held_ms"].notna().any() else None
    top = set()  # (step, rank) of the rank with the most own work on the step's critical path
    if d.path is not None and not d.path.empty:
        p = d.path.sort_values(["step", "own_ms", "rank"], ascending=[True, False, True]).drop_duplicates("step")
        top = set(zip(p["step"].astype(int), p["rank"].astype(int)))
    cands: dict[int, list] = {}
    for col, kind in (("input_ms", "dataloader"), ("busy_ms", "compute"), ("ops", "launch")):
        if f[col].isna().all():
            continue
        x = peer_excess(col).copy()  # its own columns (hit, effect_ms) added below
        if x.empty:
            continue
        if kind == "launch":
            ratio = x["value"] / x["peer_median"].where(x["peer_median"] > 0)
            x["hit"] = (ratio >= LAUNCH_RATIO) & (x["excess"] > NOISE_K * x["spread"])
            # time at stake: the rank's compute busy time beyond its peers' (the launches' cost)
            b = peer_excess("busy_ms").set_index(["step", "rank"])["excess"]
            v = b.reindex(pd.MultiIndex.from_arrays([x["step"], x["rank"]])).to_numpy(float)
            x["effect_ms"] = np.where(v > 0, v, 0.0)  # a rank without a busy excess (or NaN): 0
        else:
            on_path = np.array([(int(a), int(b)) in top for a, b in zip(x["step"], x["rank"])], dtype=bool)
            big = x["excess"] >= MIN_EFFECT_SHARE * step_ms
            # beyond the peers' own spread, or (where the peers share a loaded machine and their spread is wide)
            # above them while its own work set the step's end on the critical path
            if kind == "dataloader":
                x["hit"] = (x["excess"] >= MIN_INPUT_SHARE * step_ms) & (x["excess"] > NOISE_K * x["spread"])
            else:
                x["hit"] = big & ((x["excess"] > NOISE_K * x["spread"]) | on_path)
            x["effect_ms"] = x["excess"].clip(lower=0)
        for r, g in x.groupby("rank"):
            conf = float(g["hit"].sum()) / steps
            if conf < MIN_STEP_SHARE:
                continue
            effect = float(g["effect_ms"].mean())
            cands.setdefault(int(r), []).append((kind, effect, conf, g))
    if held is not None and not held.empty and f["busy_ms"].isna().all():
        # no compute timeline: a rank that holds its calls beyond its peers' spread is late for reasons the data
        # does not show; named as such
        held = held.assign(hit=(held["excess"] > NOISE_K * held["spread"]) & (held["excess"] >= MIN_EFFECT_SHARE
                                                                              * step_ms),
                           effect_ms=held["excess"].clip(lower=0))
        for r, g in held.groupby("rank"):
            conf = float(g["hit"].sum()) / steps
            if conf >= MIN_STEP_SHARE and int(r) not in cands:
                cands[int(r)] = [("late", float(g["effect_ms"].mean()), conf, g)]
    for r, lst in cands.items():
        # the kind whose effect is largest (launch first when it holds: many launches also make compute long)
        lst.sort(key=lambda v: (v[0] != "launch", -v[1]))
        kind, effect, conf, g = lst[0]
        # the others waited for it: its held time is above its stage peers' in most steps
        held_ms = float(f[f["rank"] == r]["held_ms"].mean()) if f["held_ms"].notna().any() else math.nan
        if held is not None and not held.empty:
            hr = held[held["rank"] == r]
            waited_for = float((hr["excess"] > 0).sum()) / steps if not hr.empty else 0.0
            on_top = sum(1 for (s_, r_) in top if r_ == r) / steps
            if max(waited_for, on_top) < 0.5:
                continue
            stake = min(effect, held_ms) if held_ms == held_ms else effect
        else:
            stake = effect
        if stake < (MIN_INPUT_SHARE if kind == "dataloader" else MIN_EFFECT_SHARE) * step_ms and kind != "launch":
            continue
        stage = int(f[f["rank"] == r]["stage"].iloc[0])
        out.append(Cause(kind, [r], stake, stake / step_ms, conf, steps, stage=stage if f["stage"].nunique() > 1
                         else None, evidence={
                             "value": float(g["value"].mean()), "peer_median": float(g["peer_median"].mean()),
                             "peer_spread": float(g["spread"].mean()), "excess": float(g["excess"].mean()),
                             "held_ms": held_ms, "metric": {"input_ms": "input", "busy_ms": "compute",
                                                            "ops": "ops"}.get(kind, kind)}))
    return out


def _host_causes(d: Diagnosis, run: Run) -> list[Cause]:
    """A host whose every rank waits longer for input (or computes longer) than every rank of the other hosts,
    by at least ``MIN_EFFECT_SHARE`` of the step, in most steps (compute: and whose ranks hold most of the critical
    path):
    the host is the place (its storage, CPU or data loading), named once for its ranks. Compute is compared within
    each pipeline stage (a host that holds a whole stage has no peer host to compare with); input wait across all
    ranks (no stage is meant to wait longer for input)."""
    f = d.features
    hosts = {int(r): run.hosts.get(int(r)) for r in f["rank"].unique()}
    if len({h for h in hosts.values() if h}) < 2 or any(h is None for h in hosts.values()):
        return []
    f = f.assign(host=f["rank"].map(hosts))
    path_share = None
    if d.path is not None and not d.path.empty:
        own = d.path.groupby("rank")["own_ms"].sum()
        path_share = own.groupby(own.index.map(hosts)).sum() / max(1e-9, float(own.sum()))
    for col, kind in (("input_ms", "dataloader"), ("busy_ms", "compute")):
        if f[col].isna().all():
            continue
        rows = []
        # compute is compared within a stage (stages hold different layers); input wait across the run
        for _, g in f.groupby(["step", "stage"] if col == "busy_ms" else ["step"]):
            rows += _host_gaps(int(g["step"].iloc[0]), g[col].to_numpy(dtype=float), g["host"].to_numpy())
        x = pd.DataFrame(rows, columns=["step", "host", "gap", "excess"])
        if x.empty:
            continue
        least = MIN_INPUT_SHARE if col == "input_ms" else MIN_EFFECT_SHARE
        x["hit"] = (x["gap"] > 0) & (x["excess"] >= least * d.step_ms)
        for h, g in x.groupby("host"):
            conf = float(g["hit"].sum()) / d.steps
            # compute: the host's ranks must also hold most of the critical path (input wait is its own proof)
            if conf < MIN_STEP_SHARE or (col == "busy_ms" and path_share is not None
                                         and float(path_share.get(h, 0.0)) < 0.5):
                continue
            ranks = sorted(r for r, hh in hosts.items() if hh == h)
            stake = float(g["excess"].clip(lower=0).mean())
            return [Cause(kind, ranks, stake, stake / d.step_ms, conf, d.steps,
                          evidence={"host": h, "value": float(f[f["host"] == h][col].mean()),
                                    "peer_median": float(f[f["host"] != h][col].median()), "excess": stake,
                                    "metric": "input" if kind == "dataloader" else "compute"})]
    return []


def _host_gaps(step: int, values: np.ndarray, hosts: np.ndarray) -> list[tuple]:
    """``(step, host, gap, excess)`` for each host of one group of ranks (a step, or a step and stage) with at least
    two ranks in it and a rank elsewhere, hosts in sorted order: ``gap`` = the host's least value - the largest of the
    others', ``excess`` = the host's median - the others' median; NaN values left out (NaN when a side has none).
    Arrays, not a pandas filter per host: that was ranks x hosts per step, minutes at 4,096 ranks."""
    names, inv = np.unique(hosts, return_inverse=True)
    counts = np.bincount(inv, minlength=len(names))
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a side of NaN only: NaN (its "All-NaN slice" warning)
        for j in np.flatnonzero((counts >= 2) & (counts < len(values))):
            mine = inv == j
            own, rest = values[mine], values[~mine]
            out.append((step, names[j], float(np.nanmin(own) - np.nanmax(rest)),
                        float(np.nanmedian(own) - np.nanmedian(rest))))
    return out


def _link_causes(d: Diagnosis, run: Run) -> list[Cause]:
    p = facts.p2p_entries(run)
    F = facts.of(run)
    if p is None or p.empty or F is None:
        return []
    p = F.in_scope(p)
    if p.empty:
        return []
    steps = p["step"].nunique()
    # per step and direction: the receiver's wait for a late sender (and the sender's wait for a late receiver)
    per = p.assign(recv_wait=np.where(p["late_rank"] == p["src_rank"], p["wait_ms"], 0.0)).groupby(
        ["step", "src_rank", "dst_rank"], as_index=False)["recv_wait"].sum()
    st = {int(r): (run.stage_of(int(r)) or 0) for r in set(per["src_rank"]) | set(per["dst_rank"])}
    per["pair"] = [(st[int(a)], st[int(b)]) for a, b in zip(per["src_rank"], per["dst_rank"])]
    # each direction against the other directions between the same stages, that step (leave-one-out, vectorised)
    width = int(max(per["src_rank"].max(), per["dst_rank"].max())) + 1
    per["stage"] = pd.Series([a * 1_000_003 + b for a, b in per["pair"]], index=per.index, dtype="int64")
    per["rank"] = (per["src_rank"].astype("int64") * width + per["dst_rank"].astype("int64"))
    x = _peer_excess(per[["step", "stage", "rank", "recv_wait"]], "recv_wait")
    if x.empty:
        return []
    per = per.merge(x[["step", "rank", "excess", "spread"]], on=["step", "rank"], how="inner")
    per["hit"] = (per["excess"] > NOISE_K * per["spread"]) & (per["excess"] >= MIN_EFFECT_SHARE * d.step_ms)
    out = []
    for (a, b), g in per.groupby(["src_rank", "dst_rank"]):
        conf = float(g["hit"].sum()) / steps
        if conf < MIN_STEP_SHARE:
            continue
        stake = float(g["excess"].clip(lower=0).mean())
        out.append(Cause("link", [int(a), int(b)], stake, stake / d.step_ms, conf, steps, link=[int(a), int(b)],
                         evidence={"wait_ms": float(g["recv_wait"].mean()), "excess": stake,
                                   "peer_links_ms": float((g["recv_wait"] - g["excess"]).mean())}))
    return out


def _stage_causes(d: Diagnosis) -> list[Cause]:
    f = d.features
    if f["stage"].nunique() < 2 or f["busy_ms"].isna().all():
        return []
    s = f.groupby(["step", "stage"])["busy_ms"].median().unstack()
    heavy = s.mean().idxmax()
    others = s.drop(columns=[heavy]).median(axis=1)
    diff = s[heavy] - others
    hit = (s[heavy] >= STAGE_RATIO * others) & (diff >= MIN_EFFECT_SHARE * d.step_ms)
    conf = float(hit.mean())
    if conf < MIN_STEP_SHARE:
        return []
    stake = float(diff.clip(lower=0).mean())
    ranks = sorted(int(r) for r in f[f["stage"] == heavy]["rank"].unique())
    return [Cause("stage", ranks, stake, stake / d.step_ms, conf, len(s), stage=int(heavy),
                  evidence={"stage_busy_ms": float(s[heavy].mean()), "other_stages_busy_ms": float(others.mean()),
                            "ratio": float(s[heavy].mean() / others.mean()) if others.mean() > 0 else None})]


def _exposed(o: pd.DataFrame, comp: pd.DataFrame) -> pd.DataFrame:
    """Per rank and step: ``time_ms`` = the summed ``elapse_ms`` of the communication ops ``o`` (rank, step,
    start_ms, elapse_ms), ``exposed_ms`` = the part of it outside the union of the rank's ``comp`` intervals (rank,
    start_ms, end_ms); each op's share outside compute times its time, summed in the ops' order. Rows without a rank
    are left out."""
    from . import intervals as iv

    on = o[o["rank"].notna()]
    if on.empty:
        return pd.DataFrame(columns=["rank", "step", "exposed_ms", "time_ms"])
    dur = on["elapse_ms"].to_numpy(float)
    # each rank's rows by position from one stable sort (ranks ascending, each rank's rows in their order: the union's
    # and the sums' inputs as a split per rank gives them); a frame per rank cost ~1 ms, seconds at 1,024 ranks
    comp_of = frames.positions_by(comp["rank"].to_numpy())
    cs, ce = comp["start_ms"].to_numpy(float), comp["end_ms"].to_numpy(float)
    s_all = on["start_ms"].to_numpy(float)
    e_all = s_all + dur
    frac = np.empty(len(on))
    none = np.zeros(0, dtype=np.intp)
    for r, rows in frames.positions_by(on["rank"].to_numpy()).items():
        c = comp_of.get(r, none)
        u = iv.union(cs[c], ce[c])
        s0, e0 = s_all[rows], e_all[rows]
        frac[rows] = 1 - np.divide(iv.covered(u, s0, e0), e0 - s0, out=np.zeros(len(rows)), where=(e0 - s0) > 0)
    return on.assign(exposed_ms=dur * frac, time_ms=dur).groupby(["rank", "step"], as_index=False)[
        ["exposed_ms", "time_ms"]].sum()


def _overlap_causes(d: Diagnosis, run: Run, F) -> list[Cause]:
    """Communication that could hide behind compute and does not: collectives of at least ``LARGE_MB`` (gradient
    buckets, bandwidth-bound) whose time on every rank lies almost entirely outside compute (at least
    ``EXPOSED_FRACTION`` of it, median over the steps), costing at least ``MIN_OVERLAP_SHARE`` of the step. Such
    messages are issued after the compute they could have overlapped (all-reduce after backward instead of per
    bucket during it). Time at stake: their exposed time per step (the rank's time in them outside compute, waits
    included: overlapped, those would hide behind compute too; mean over ranks)."""
    ops, tl = run.table("comm_ops"), run.table("device_timeline")
    if ops is None or tl is None or ops.empty or "start_ms" not in ops or "size_mb" not in ops:
        return []
    o = F.in_scope(ops[(ops["kind"] == "collective") & (ops["size_mb"] >= LARGE_MB)].dropna(
        subset=["start_ms", "elapse_ms"]))
    if o.empty:
        return []
    x = _exposed(o, F.in_scope(tl[tl["op_class"] == "compute"]))
    if x.empty:
        return []
    x["fraction"] = x["exposed_ms"] / x["time_ms"].where(x["time_ms"] > 0)
    per_step = agg(x.groupby("step"), fraction=("fraction", "min"), exposed=("exposed_ms", "mean"))
    hit = (per_step["fraction"] >= EXPOSED_FRACTION) & (per_step["exposed"] >= MIN_OVERLAP_SHARE * d.step_ms)
    conf = float(hit.mean())
    if conf < MIN_STEP_SHARE:
        return []
    stake = float(per_step["exposed"].mean())
    return [Cause("overlap", [], stake, stake / d.step_ms, conf, len(per_step),
                  evidence={"exposed_ms": stake, "fraction": float(per_step["fraction"].median()),
                            "ops_per_step": float(len(o) / max(1, len(per_step)) / max(1, o["rank"].nunique())),
                            "large_mb": LARGE_MB})]


def diagnose(run: Run, options=None) -> Diagnosis | None:
    """The run's diagnosis, computed once (cached on the run); None without step facts."""
    cache = run.__dict__.setdefault("_diagnosis_cache", {})
    F = facts.of(run, options)
    if F is None or not F.steps:
        return None
    if F.include_warmup in cache:
        return cache[F.include_warmup]
    calls = _call_table(run, F)
    waits = matrix = None
    if calls is not None:
        w = calls[(calls["wait_ms"] > 0) & (calls["rank"] != calls["last_rank"])]
        waits = w.groupby(["step", "rank", "last_rank", "via"], as_index=False)["wait_ms"].sum().rename(
            columns={"rank": "waiter", "last_rank": "cause"})
        matrix = waits.groupby(["waiter", "cause"], as_index=False)["wait_ms"].sum()
        matrix["wait_ms"] = matrix["wait_ms"] / max(1, len(F.steps))
    feats = features(run, F, calls)
    path, segs = _path_table(calls, F, run) if calls is not None else (None, None)
    clocks = facts.clocks(run)
    d = Diagnosis(waits if waits is not None else pd.DataFrame(columns=["step", "waiter", "cause", "via", "wait_ms"]),
                  matrix if matrix is not None else pd.DataFrame(columns=["waiter", "cause", "wait_ms"]),
                  feats, path, segs, [], float(F.step_ms_median), len(F.steps), clocks)
    if clocks.get("comparable") is False:
        d.notes.append("The ranks' clocks are not comparable (collective ends spread beyond the transfer): who waited "
                       "for whom is not judged.")
    else:
        hosts = _host_causes(d, run)
        ranks = _rank_causes(d, {r for h in hosts for r in h.ranks})
        d.causes = hosts + ranks + _link_causes(d, run) + _stage_causes(d) + _overlap_causes(d, run, F)
        _dedupe(d)
    d.causes.sort(key=lambda c: -c.score)
    cache[F.include_warmup] = d
    return d


def _dedupe(d: Diagnosis) -> None:
    """One problem, one cause: a stage cause absorbs rank causes of its own ranks that say compute; a link cause
    absorbs the rank cause of its late end (the rank is late at that link: the link names where)."""
    stages = [c for c in d.causes if c.kind == "stage"]
    links = [c for c in d.causes if c.kind == "link"]
    keep = []
    for c in d.causes:
        if c.kind == "compute" and any(c.ranks[0] in s.ranks for s in stages):
            continue
        keep.append(c)
    if links:
        # a link whose late end is a rank with a cause of its own (it computes / loads / launches more) is that
        # rank's symptom; else the link is the place (the sender stalls before it, or the transfer is slow)
        ranked = {c.ranks[0] for c in keep if c.kind in ("compute", "dataloader", "launch", "late") and c.ranks}
        left = [c for c in links if c.link[0] not in ranked]
        top = max(left, key=lambda c: c.score) if left else None
        keep = [c for c in keep if c.kind != "link" or c is top]
        if top is not None:
            keep = [c for c in keep if not (c.kind == "late" and c.ranks[0] == top.link[0])]
    d.causes = keep


def describe(c: Cause) -> str:
    """The cause in words, with its number."""
    ev = c.evidence
    per = fmt.ms(c.time_ms)
    if ev.get("host") is not None and c.kind == "dataloader":
        return (f"Host {ev['host']} (ranks {fmt.rank_ranges(c.ranks)}) waits for input: {fmt.ms(ev['value'])} per "
                f"step per rank vs {fmt.ms(ev['peer_median'])} on the other hosts; the others wait for it: about "
                f"{per} per step at stake.")
    if ev.get("host") is not None:
        return (f"Host {ev['host']} (ranks {fmt.rank_ranges(c.ranks)}) computes longer: {fmt.ms(ev['value'])} "
                f"busy per step per rank vs {fmt.ms(ev['peer_median'])} on the other hosts; about {per} per step.")
    if c.kind == "late":
        return (f"Rank {c.ranks[0]} arrives last at its collectives: the others wait about {per} per step for it "
                f"beyond their own spread (the data has no compute timeline to say what it was doing).")
    if c.kind == "dataloader":
        return (f"Rank {c.ranks[0]} waits for its input pipeline: {fmt.ms(ev['value'])} per step vs "
                f"{fmt.ms(ev['peer_median'])} on its peers; the others wait for it: about {per} per step at stake.")
    if c.kind == "launch":
        return (f"Rank {c.ranks[0]} is host-bound: it launches {fmt.number(ev['value'])} operations per step vs "
                f"{fmt.number(ev['peer_median'])} on its peers, and computes {per} per step longer than they do "
                f"while the others wait for it.")
    if c.kind == "compute":
        where = f" (stage {c.stage})" if c.stage is not None else ""
        return (f"Rank {c.ranks[0]}{where} computes longer than its peers: {fmt.ms(ev['value'])} busy per step vs "
                f"{fmt.ms(ev['peer_median'])}; the others wait for it: about {per} per step at stake.")
    if c.kind == "link":
        return (f"Transfers {c.link[0]} → {c.link[1]} arrive late: rank {c.link[1]} waits {fmt.ms(ev['wait_ms'])} "
                f"per step for rank {c.link[0]}'s sends, {per} more than on the other links of these stages.")
    if c.kind == "stage":
        return (f"Pipeline stage {c.stage} (ranks {fmt.rank_ranges(c.ranks)}) has the most work: "
                f"{fmt.ms(ev['stage_busy_ms'])} busy per step vs {fmt.ms(ev['other_stages_busy_ms'])} on the other "
                f"stages; the other stages wait for it: about {per} per step at stake.")
    if c.kind == "overlap":
        return (f"Large collectives (at least {fmt.quantity(ev['large_mb'], 'mb')}, {fmt.number(ev['ops_per_step'])} per "
                f"step and rank) run after the compute instead of behind it: {fmt.percent(ev['fraction'])} of their "
                f"time is exposed, {per} per step that overlapping could hide.")
    return f"{c.kind}: {per} per step."
