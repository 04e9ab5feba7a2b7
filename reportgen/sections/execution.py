"""Execution overview: time overview per step (step time per rank, mean communication and wait) and a
Marey view of one step (one lane per rank, operators from start to end, the same operator joined across ranks).

Sources and definitions (research notes on the seed's cluster pages §3.7):

* Time overview. Step time per rank and step: ``step_time`` (step_ms; step_trace_time.csv, ProfilerStep
  markers of a torch.profiler trace, cpu_op_execute_timestamp_<rank>.txt), else ``step_trace`` (step_ms;
  step_trace_raw_<rank>_detail_time.csv). Communication and wait per rank and step, the first the run has:
  ``comm_rank_step`` (transfer and wait, as the profiler sums them), ``comm_ops`` summed per
  rank and step (:func:`comm_per_rank_step`: a rank and step whose ops carry no wait, e.g. NPU Level0 data from
  trace_view.json, has wait NaN: unknown, never 0), ``step_time`` comm_ms (no wait: NaN). ``comm_ms`` /
  ``wait_ms`` of the table are the per-step means over the ranks that have a value (what the seed plots);
  ``rank_comm_ms`` / ``rank_wait_ms`` are each rank's own values. Unknown waits are said, never drawn as 0.
  **Departure:** the seed plots the step_trace total raw (10 ns ticks); we plot milliseconds.
* Marey view. Operators: the run's ``device_timeline`` (:mod:`reportgen.timeline`: torch.profiler GPU kernels,
  gloo collectives and main-thread CPU ops, NPU HCCL and device ops of trace_view.json, NPU kernels of
  kernel_details.csv with communication.json ops (step windows then derived from step durations), host ops of
  cpu_op_execute_timestamp_<rank>.txt, the seed's timeline display files or the step trace's communication
  ops with the FP/BP span minus them as derived computation), in the
  step windows of :func:`reportgen.timeline.step_windows`. Times are ms relative to each rank's step start, then
  aligned: per step, every rank is shifted so that its first occurrence of the first communication op common to
  all ranks ends when the reference rank's (the first lane's) does (the seed aligns on the first AllReduce). When
  no op is common to all ranks, ranks are aligned within their pipeline stage (or within groups of ranks that share
  op names, as the seed does); when nothing is shared, on the step start.
  The n-th occurrence of the same op name on each rank is one "operator" joined across ranks.
* Classes drawn (:data:`MAREY_CLASS_OF` of the reader's op class, the device timeline's ``kind``): communication
  (with p2p receive), computation (compute and memcpy), wait and other, each its own colour; only communication is
  joined across ranks and used for the alignment.
* Derived computation (no recorded compute ops: the gaps between a step trace's communication ops) is drawn merged
  across gaps shorter than ``MIN_DUR_SHARE`` of the step: those gaps hold only communication ops too short to draw.
* Recorded computation ops shorter than ``MIN_DUR_SHARE`` of the step are merged per rank into blocks across gaps
  shorter than that (kernel-level data: thousands of µs kernels per step would otherwise draw nothing).
* Size: only ops lasting at least ``MIN_DUR_SHARE`` of the step are drawn. Every step is drawn, up to ``MAX_STEPS``
  (the median step first, then the steps in scope, then warm-up); each step has its own share of ``MAX_MARKS``
  (:func:`step_budget`), within which the shortest computation is left out first, then lanes are sampled evenly
  (:func:`_fit_step`). So every step the time overview offers can be shown; steps beyond ``MAX_STEPS`` are not
  clickable there, and the caption says so. The metrics say what was trimmed.
"""

from __future__ import annotations

import json
import math

from .. import charts as vl
import numpy as np
import pandas as pd

from .. import palette
from ..charts import axis, fit, fit_concat, tip, to_spec
from .. import facts, fmt
from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, Column, Control, Figure, Table, View, count
from . import needs_reason
from ..focus import keep_sample
from ..timeline import DERIVED_NAME, DERIVED_WINDOWS, per_value, step_windows

ID = "execution"
TITLE = "Execution overview"
#: step times (time overview) or the device timeline (Marey view)
NEEDS = (("step_time", "step_trace", "device_timeline"),)

#: marks in the Marey figure (bars + polygon vertices), over all steps drawn (shared by the steps: step_budget)
MAX_MARKS = 10_000
#: marks of one step at most
MAX_STEP_MARKS = 6_000
#: ops shorter than this share of their step are not drawn
MIN_DUR_SHARE = 0.005
#: at most this many lanes (ranks) in the Marey figure; beyond, ranks are sampled evenly (keeping each stage)
MAX_LANES = 128
#: at most this many steps are drawn in the Marey figure
MAX_STEPS = 20
#: up to this many ranks every rank can be highlighted in the time overview; beyond, the fastest, median and slowest
MAX_PICK_RANKS = 64

UNAVAILABLE = "No step times or device timeline with step windows in this run: "


def _unavailable(options) -> str:
    """Why the section has nothing to show: the tables it reads, each with the files that give it (the runner's
    provenance)."""
    return UNAVAILABLE + needs_reason(None, ["step_time or step_trace or device_timeline"], options) + "."
#: the reader's op class (device_timeline ``kind``) -> the class drawn in the Marey view
MAREY_CLASS_OF = {"communication": "communication", "receive": "communication", "compute": "computation",
                  "memcpy": "computation", "wait": "wait", "other": "other"}
#: classes of the Marey view in legend order, with their colours
MAREY_CLASSES = {"computation": palette.ROLE["compute"], "communication": palette.ROLE["comm"],
                 "wait": palette.ROLE["wait"], "other": palette.ROLE["other"]}


# --------------------------------------------------------------------------- time overview


def _time_overview(run: Run) -> tuple[pd.DataFrame | None, str]:
    st = run.table("step_time")
    source = "step_time"
    if st is None or st["step_ms"].notna().sum() == 0:
        st, source = run.table("step_trace"), "step_trace"
    if st is None:
        return None, ""
    rows = st[["step", "rank", "step_ms"]].copy()
    comm, comm_source = None, ""
    if run.table("comm_rank_step") is not None:
        comm = comm_per_rank_step(run.table("comm_rank_step"))
        comm_source = "comm_rank_step (transfer and wait time per rank and step, as the profiler sums them)"
    elif run.table("comm_ops") is not None:
        comm = comm_per_rank_step(run.table("comm_ops"))
        known = comm["wait_ms"].notna()
        comm_source = "comm_ops (transfer time " + (
            "and wait summed per rank and step" if known.all() else
            "summed per rank and step; wait summed where the ops carry it, unknown elsewhere" if known.any() else
            "summed per rank and step: the op time, as the ops carry no wait time (unknown)") + ")"
    elif "comm_ms" in st:
        comm = st[["rank", "step", "comm_ms"]].assign(wait_ms=math.nan)
        comm_source = "step_time comm_ms (no wait time in this data: unknown)"
    if comm is not None:
        # the steps are the run's (reportgen/facts.py): communication of a step the step table lacks is left out
        # (the seed takes the steps of its time view from hccl_raw_<rank>.csv; we list the same steps in every section)
        rows = rows.merge(comm.rename(columns={"comm_ms": "rank_comm_ms", "wait_ms": "rank_wait_ms"}),
                          on=["rank", "step"], how="left")
        means = comm.groupby("step")[["comm_ms", "wait_ms"]].mean()
        rows["comm_ms"] = rows["step"].map(means["comm_ms"])
        rows["wait_ms"] = rows["step"].map(means["wait_ms"])
    else:
        rows["rank_comm_ms"], rows["rank_wait_ms"] = math.nan, math.nan
        rows["comm_ms"], rows["wait_ms"] = math.nan, math.nan
    rows = rows.sort_values(["step", "rank"]).reset_index(drop=True)
    rows = rows[["step", "rank", "step_ms", "comm_ms", "wait_ms", "rank_comm_ms", "rank_wait_ms"]]
    return rows, f"{source} step_ms; communication from {comm_source or 'nothing (no communication data)'}"


def comm_per_rank_step(ops: pd.DataFrame) -> pd.DataFrame:
    """rank, step, ``comm_ms``, ``wait_ms`` of the time overview: the two parts of communication the seed's time
    overview draws side by side, so they never count the same time twice.

    * ``comm_ms`` = communication transfer time: the sum of the ops' ``transit_ms`` where the data has it, else their
      ``elapse_ms`` minus ``wait_ms`` where the wait is known, else their ``elapse_ms`` (an op time that includes its
      waiting: Level0, the communication CPU ops of cpu_op_execute_timestamp_<rank>.txt).
    * ``wait_ms`` = the sum of their ``wait_ms``; NaN when none of the rank's ops of the step carries a wait
      (unknown, not 0, which pandas' plain sum of NaNs would give).

    ``ops`` is ``comm_ops`` or ``comm_rank_step`` (both have elapse_ms, transit_ms, wait_ms; transit / wait may be
    absent or NaN)."""
    o = ops
    elapse = o["elapse_ms"] if "elapse_ms" in o else pd.Series(math.nan, index=o.index)
    wait = o["wait_ms"] if "wait_ms" in o else pd.Series(math.nan, index=o.index)
    transit = o["transit_ms"] if "transit_ms" in o else pd.Series(math.nan, index=o.index)
    transfer = transit.where(transit.notna(), (elapse - wait).where(wait.notna(), elapse))
    t = pd.DataFrame({"rank": o["rank"], "step": o["step"], "comm_ms": transfer, "wait_ms": wait})
    g = t.groupby(["rank", "step"])
    return pd.DataFrame({"comm_ms": g["comm_ms"].sum(min_count=1),
                         "wait_ms": g["wait_ms"].sum(min_count=1)}).reset_index()


# --------------------------------------------------------------------------- timeline


def _timeline(run: Run) -> tuple[pd.DataFrame | None, pd.DataFrame | None, str]:
    """(ops: rank, step, op, match, kind, start_ms, end_ms; windows: rank, step, start_ms, end_ms; source) from the
    device timeline (:mod:`reportgen.timeline`), intervals outside every step left out. ``kind`` is the class drawn,
    :data:`MAREY_CLASS_OF` of the reader's op class (communication, computation, wait, other). ``match`` drops the step trace's
    ``stream_<s>_<i>_`` prefix: the stream differs between ranks, the operator (``<Type>-op<N>``) is shared."""
    tl, windows = run.table("device_timeline"), step_windows(run)
    if tl is None or windows is None:
        return None, None, ""
    tl = tl[tl["step"] >= 0]
    if tl.empty:
        return None, None, ""
    ops = pd.DataFrame({"rank": tl["rank"], "step": tl["step"], "op": tl["name"], "match": match_names(tl["name"]),
                        "kind": tl["kind"].map(MAREY_CLASS_OF).fillna("other").to_numpy(),
                        "start_ms": tl["start_ms"], "end_ms": tl["end_ms"], "derived": tl["source"] == "derived"})
    derived = ops["derived"]
    parts = [f"{k} ({n:,})" for k, n in tl.loc[~derived, "kind"].value_counts().sort_index().items()]
    if derived.any():
        parts.append(f"derived compute ({int(derived.sum()):,}: {DERIVED_NAME})")
    source = "device_timeline: " + ", ".join(parts)
    return ops.reset_index(drop=True), windows, source


def match_names(names: pd.Series) -> pd.Series:
    """The op name ranks share: the step trace's ``stream_<s>_<i>_`` prefix dropped (the stream differs between
    ranks, the operator ``<Type>-op<N>`` does not)."""
    return per_value(names, lambda n: n.astype(str).str.replace(r"^stream_\d+_\d+_", "", regex=True))


def occurrence_keys(match: pd.Series, by: list[pd.Series]) -> pd.Series:
    """``<match> #<n>``: the n-th occurrence of the op within its ``by`` group (a rank's step), rows in start order.
    The key :func:`_align_group` matches between ranks (the Marey view and the merged timeline export)."""
    if match.empty:
        return pd.Series([], index=match.index, dtype=object)
    n = match.groupby(by + [match], sort=False).cumcount().add(1).to_numpy()
    if match.isna().any():  # a missing name: as a pair index writes it
        codes, uniq = pd.MultiIndex.from_arrays([match.to_numpy(), n]).factorize()
        return pd.Series(np.array([f"{m} #{k}" for m, k in uniq], dtype=object)[codes], index=match.index)
    # one text per distinct (name, n): the pairs as one integer each (a pair index built a tuple per row)
    names, firsts = pd.factorize(match.to_numpy())
    base = int(n.max()) + 1
    codes, uniq = pd.factorize(names.astype(np.int64) * base + n)
    return pd.Series(np.array([f"{firsts[c // base]} #{c % base}" for c in uniq.tolist()], dtype=object)[codes],
                     index=match.index)


def _groups(ops: pd.DataFrame, ranks: list[int], stage_of: dict) -> list[list[int]]:
    """Alignment groups when no op is common to all ranks: pipeline stages, else ranks sharing op names."""
    if ranks and all(stage_of.get(r) is not None for r in ranks):
        out: dict = {}
        for r in ranks:
            out.setdefault(stage_of[r], []).append(r)
        return [out[k] for k in sorted(out)]
    names = ops[ops["kind"] == "communication"].groupby("rank")["match"].agg(set).to_dict()
    groups: list[list[int]] = []
    seen: set = set()
    for r in ranks:  # the seed's heuristic: a rank joins the first group that shares an op name with it
        if r in seen:
            continue
        grp = [r] + [o for o in ranks if o not in seen and o != r and names.get(r, set()) & names.get(o, set())]
        seen.update(grp)
        groups.append(grp)
    return groups


def _align_group(ops: pd.DataFrame, ranks: list[int]) -> tuple[dict[int, float], str | None]:
    """Shifts (ms) so the first comm op common to ``ranks`` ends together; the op used (None: step start)."""
    c = ops[(ops["kind"] == "communication") & ops["rank"].isin(ranks)]
    if len(ranks) < 2 or c.empty:
        return {r: 0.0 for r in ranks}, None
    counts = c.groupby("key")["rank"].nunique()
    common = counts[counts == len(ranks)].index
    if len(common) == 0:
        return {r: 0.0 for r in ranks}, None
    cc = c[c["key"].isin(common)]
    key = cc.groupby("key")["start"].mean().idxmin()  # the first common op (earliest on average)
    ends = cc[cc["key"] == key].groupby("rank")["end"].min()
    ref = ends[ranks[0]]
    return {r: float(ref - ends[r]) for r in ranks}, str(key)


def _merge_derived(s: pd.DataFrame, gap: float) -> tuple[pd.DataFrame, int]:
    """One step's rows with each rank's derived computation merged across gaps shorter than ``gap`` (module doc);
    and how many derived intervals were merged into others."""
    d = s["derived"].to_numpy(dtype=bool)
    if not d.any():
        return s, 0
    g = s[d].sort_values(["rank", "start"], kind="stable")
    gaps = g["start"].to_numpy()[1:] - g["end"].to_numpy()[:-1]
    new = np.concatenate([[True], (gaps >= gap) | (g["rank"].to_numpy()[1:] != g["rank"].to_numpy()[:-1])])
    first = g[new].copy()
    first["end"], first["end_ms"] = _block_max(g, new, "end"), _block_max(g, new, "end_ms")
    return pd.concat([s[~d], first]), int(len(g) - len(first))


def _block_max(rows: pd.DataFrame, new: np.ndarray, column: str) -> np.ndarray:
    """The largest value of ``column`` in each block of consecutive rows, a block starting at each row where ``new``
    is True (``new[0]`` is): as ``groupby(np.cumsum(new)).max()`` (NaN skipped; a block of NaN only is NaN), without
    pandas' groupby, which tries an array key as a column label first and formats it into an error message on the
    way (a few ms for an array of up to 1,000 values). Values not plain numbers: pandas' groupby."""
    values = rows[column].to_numpy()
    if values.dtype.kind not in "fiu":
        return rows[column].groupby(np.cumsum(new)).max().to_numpy()
    return np.fmax.reduceat(values, np.flatnonzero(new))


def _merge_short(s: pd.DataFrame, gap: float) -> tuple[pd.DataFrame, int]:
    """One step's rows with each rank's recorded computation ops shorter than ``gap`` (too short to draw one by one)
    merged into blocks: consecutive short ops less than ``gap`` apart are one block from the first start to the last
    end, named ``<n> computation ops (each < gap)`` (module doc); and how many ops went into blocks of two or more.
    Longer ops, communication and derived rows are left as they are."""
    short = ((s["kind"] == "computation") & ~s["derived"].to_numpy(dtype=bool)
             & ((s["end"] - s["start"]) < gap)).to_numpy()
    if short.sum() < 2:
        return s, 0
    g = s[short].sort_values(["rank", "start"], kind="stable")
    rank = g["rank"].to_numpy()
    ends = g["end"].to_numpy(dtype=float)
    new_rank = np.concatenate([[True], rank[1:] != rank[:-1]])
    # running max of the ends within a rank (ops on several streams overlap): a block breaks at a gap >= ``gap``
    run_end = pd.Series(ends).groupby(np.cumsum(new_rank)).cummax().to_numpy()
    new = np.concatenate([[True], (g["start"].to_numpy()[1:] - run_end[:-1] >= gap)]) | new_rank
    first = g[new].copy()
    n = np.diff(np.append(np.flatnonzero(new), len(new)))
    first["end"], first["end_ms"] = _block_max(g, new, "end"), _block_max(g, new, "end_ms")
    label = f"computation ops (each < {fmt.quantity(gap, 'ms')}, merged)"
    first["op"] = np.where(n > 1, [f"{k:,} {label}" for k in n], first["op"].to_numpy(dtype=object))
    return pd.concat([s[~short], first]), int(n[n > 1].sum())


#: share of ``MAX_MARKS`` the default step (the one the Marey view opens on, drawn first) may use when it needs more
#: than an even share: at 1024 ranks and 20 steps an even share (500 marks) drew 12 lanes of it
DEFAULT_STEP_SHARE = 0.4


def step_budget(n_steps: int) -> int:
    """Marks each drawn step may use when they share ``MAX_MARKS`` evenly (at most ``MAX_STEP_MARKS``)."""
    return int(min(MAX_STEP_MARKS, MAX_MARKS // max(1, n_steps)))


def first_step_budget(n_steps: int, cost: int) -> int:
    """Marks the default step (drawn first, the one the Marey view opens on) may use when its ``cost`` is above the
    even share: up to :data:`DEFAULT_STEP_SHARE` of ``MAX_MARKS`` (never above ``MAX_STEP_MARKS``); the steps after it
    share what it leaves (:func:`rest_budget`). A step that fits its even share changes nothing."""
    even = step_budget(n_steps)
    if n_steps <= 1:
        return even
    return int(min(MAX_STEP_MARKS, max(even, min(cost, MAX_MARKS * DEFAULT_STEP_SHARE))))


def rest_budget(n_steps: int, first_used: int) -> int:
    """Marks each step after the first may use: what the first used left of ``MAX_MARKS``, evenly (at least the
    even share when the first used no more than its own)."""
    if n_steps <= 1:
        return step_budget(n_steps)
    return int(min(MAX_STEP_MARKS, max(0, MAX_MARKS - first_used) // (n_steps - 1)))


def _cost(s: pd.DataFrame) -> int:
    """Marks of one step's rows: a bar each, and a polygon vertex more per communication op."""
    return len(s) + int((s["kind"] == "communication").sum())


#: share of a step's mark budget kept for the non-communication classes (computation, wait, other) when
#: communication alone would fill it: lanes are sampled rather than a whole class dropped
OTHER_CLASSES_SHARE = 1 / 3


def _merge_adjacent(s: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """One step's rows with each lane's consecutive ops of one non-communication class (in start order, no
    communication op of the lane between them) merged into one block from the first start to the last end, named
    ``<n> computation ops (merged)``; and how many ops went into blocks of two or more."""
    s = s.sort_values(["rank", "start"], kind="stable")
    kind = s["kind"].to_numpy(dtype=object)
    rank = s["rank"].to_numpy()
    comm = kind == "communication"
    new = np.ones(len(s), dtype=bool)
    if len(s) > 1:
        new[1:] = (rank[1:] != rank[:-1]) | (kind[1:] != kind[:-1]) | comm[1:] | comm[:-1]
    if new.all():
        return s, 0
    n = np.diff(np.append(np.flatnonzero(new), len(new)))
    first = s[new].copy()
    first["end"], first["end_ms"] = _block_max(s, new, "end"), _block_max(s, new, "end_ms")
    fk = first["kind"].to_numpy(dtype=object)
    first["op"] = np.where(n > 1, [f"{k:,} {c} ops (merged)" for k, c in zip(n, fk)],
                           first["op"].to_numpy(dtype=object))
    return first, int(n[n > 1].sum())


def _fit_step(s: pd.DataFrame, budget: int, trimmed: dict, keep_ranks=()) -> tuple[pd.DataFrame, int]:
    """One step's rows within ``budget`` marks, never dropping a whole class: (1) each lane's consecutive
    computation (wait, other) ops are merged into blocks (:func:`_merge_adjacent`); (2) when communication would leave
    less than :data:`OTHER_CLASSES_SHARE` of the budget to the other classes, lanes are sampled evenly, keeping
    ``keep_ranks`` (the ranks findings name: reportgen/focus.py; communication is joined across ranks, so it is kept
    or dropped per lane); (3) each lane keeps its longest blocks of the other classes within its share. Counts go to
    ``trimmed``; returns rows, cost."""
    cost = _cost(s)
    if cost <= budget:
        return s, cost
    s, merged = _merge_adjacent(s)
    trimmed["adjacent_merged"] = trimmed.get("adjacent_merged", 0) + merged
    cost = _cost(s)
    if cost <= budget:
        return s, cost
    comm = (s["kind"] == "communication").to_numpy()
    lanes = list(dict.fromkeys(s["rank"].tolist()))
    other_room = max(int(budget * OTHER_CLASSES_SHARE), budget - 2 * int(comm.sum()))
    comm_room = budget - other_room
    if 2 * int(comm.sum()) > comm_room:
        per_lane = 2 * int(comm.sum()) / max(1, len(lanes))
        n_keep = max(2, int(comm_room // max(per_lane, 1)))
        keep = set(keep_sample(lanes, n_keep, keep_ranks))
        s = s[s["rank"].isin(keep)]
        comm = (s["kind"] == "communication").to_numpy()
        lanes = [r for r in lanes if r in keep]
        trimmed["lanes_sampled"] = True
        other_room = max(other_room, budget - 2 * int(comm.sum()))
    other = s[~comm]
    quota = max(1, other_room // max(1, len(lanes)))
    kept = (other.assign(_d=other["end"] - other["start"])
            .sort_values(["rank", "_d"], ascending=[True, False], kind="stable")
            .groupby("rank", sort=False).head(quota).drop(columns="_d"))
    over = _cost(s[comm]) + len(kept) - budget  # one block per lane can still be over: the shortest go
    if over > 0:
        kept = kept.assign(_d=kept["end"] - kept["start"]).nlargest(max(0, len(kept) - over), "_d").drop(columns="_d")
    trimmed["computation_thinned"] += len(other) - len(kept)
    s = pd.concat([s[comm], kept]).sort_values(["rank", "start"], kind="stable")
    return s, _cost(s)


def _marey(run: Run, ops: pd.DataFrame, windows: pd.DataFrame, lane_order: list[int],
           stage_of: dict, F=None, keep_ranks=(), keep_steps=()) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """Rows to draw (aligned, trimmed), per-step alignment table, and metrics. ``keep_ranks`` / ``keep_steps``:
    lanes and steps every sample keeps (the ranks and steps findings name, reportgen/focus.py; the fastest,
    median and slowest ranks are always kept)."""
    if F is not None:
        keep_ranks = list(dict.fromkeys([*keep_ranks, *(r for r in (F.slowest_rank, F.median_rank, F.fastest_rank)
                                                        if r is not None)]))
    windows = windows.drop_duplicates(["rank", "step"]).set_index(["rank", "step"])
    ops = ops.merge(windows.rename(columns={"start_ms": "step_start", "end_ms": "step_end"}),
                    left_on=["rank", "step"], right_index=True, how="inner")
    total_ops = len(ops)
    all_steps = sorted(ops["step"].unique().tolist())
    lanes = list(lane_order)
    lanes_sampled = len(lanes) > MAX_LANES
    if lanes_sampled:  # before the keys: they are per rank, and only the drawn lanes need them
        lanes = keep_sample(lanes, MAX_LANES, keep_ranks)
        ops = ops[ops["rank"].isin(lanes)]
    ops["start"] = ops["start_ms"] - ops["step_start"]
    ops["end"] = ops["end_ms"] - ops["step_start"]
    # step by step (a slice each, keys made per step): one frame of the run's ops, not several (a 2 GB trace has
    # 736k kernels; a key text per row of the whole run cost 100 MB)
    ops = ops.sort_values(["step", "rank", "start_ms"], kind="stable").reset_index(drop=True)
    step_values = ops["step"].to_numpy()
    if F is not None:  # the run's steps: the median step first (the default view), then the others in scope, then
        # warm-up steps; so the default is drawn whatever the mark budget leaves out, and is never a warm-up step
        have = set(all_steps)
        first = [x for x in [F.median_step(), *keep_steps] if x in have]
        first = list(dict.fromkeys(first))
        all_steps = first + [x for x in F.steps if x in have and x not in first] + [
            x for x in F.steps_all if x in have and x not in F.steps and x not in first]
    n_steps_total = len(all_steps)
    if len(all_steps) > MAX_STEPS:  # the first MAX_STEPS in drawing order; the time overview says which
        trimmed_steps = len(all_steps) - MAX_STEPS
        all_steps = all_steps[:MAX_STEPS]
    else:
        trimmed_steps = 0
    budget = step_budget(len(all_steps))
    align_rows, drawn = [], []
    marks = 0
    trimmed = {"below_threshold": 0, "computation_dropped": 0, "lanes_sampled": lanes_sampled,
               "steps_left_out": trimmed_steps, "derived_merged": 0, "short_merged": 0, "computation_thinned": 0,
               "step_budget": budget, "default_step_budget": budget}
    for i, step in enumerate(all_steps):
        s = ops.iloc[np.searchsorted(step_values, step, "left"):np.searchsorted(step_values, step, "right")].copy()
        s["key"] = occurrence_keys(s["match"], [s["rank"]])
        present = set(s["rank"])
        step_ranks = [r for r in lanes if r in present]
        shifts, used = _align_group(s, step_ranks)
        how = "all ranks"
        if used is None and len(step_ranks) > 1:
            shifts, used_by = {}, []
            for grp in _groups(s, step_ranks, stage_of):
                sh, u = _align_group(s, grp)
                shifts.update(sh)
                if u:
                    used_by.append(u)
            if used_by:
                used, how = "; ".join(dict.fromkeys(used_by)), "within stages" if all(
                    stage_of.get(r) is not None for r in step_ranks) else "within groups sharing op names"
        if used is None:
            how = "step start"
        align_rows.append({"step": int(step), "alignment_op": used, "aligned": how})
        s["shift"] = s["rank"].map(shifts).fillna(0.0)
        s["start"] += s["shift"]
        s["end"] += s["shift"]
        step_len = float((s["step_end"] - s["step_start"]).median())
        s, merged = _merge_derived(s, MIN_DUR_SHARE * step_len)
        trimmed["derived_merged"] += merged
        s, merged = _merge_short(s, MIN_DUR_SHARE * step_len)
        trimmed["short_merged"] += merged
        keep = (s["end"] - s["start"]) >= MIN_DUR_SHARE * step_len
        trimmed["below_threshold"] += int((~keep).sum())
        s = s[keep]
        if i == 0:  # the default step: more than the even share when it needs it, the others share the rest
            budget = first_step_budget(len(all_steps), _cost(s))
            trimmed["default_step_budget"] = budget
        s, cost = _fit_step(s, budget, trimmed, keep_ranks)
        if i == 0:
            budget = rest_budget(len(all_steps), cost)
            trimmed["step_budget"] = budget
        marks += cost
        drawn.append(s)
    rows = pd.concat(drawn, ignore_index=True) if drawn else ops.iloc[0:0]
    if rows.empty:
        why = (f"every one of the {total_ops} operators is shorter than {MIN_DUR_SHARE:.1%} of its step, the drawing "
               "threshold (e.g. a decode or graph-replay step of thousands of short kernels)"
               if trimmed["below_threshold"] else "no operator starts inside a step of the run")
        return rows, pd.DataFrame(align_rows), {"marey_unavailable": why + ": nothing to draw"}
    rows["stage"] = rows["rank"].map(stage_of)
    rows["step_key"] = rows["step"].astype(int).astype(str)
    rows["dur_ms"] = rows["end"] - rows["start"]
    rows = rows.rename(columns={"start": "start_rel_ms", "end": "end_rel_ms", "shift": "shift_ms"})
    rows = rows[["step", "step_key", "rank", "stage", "op", "key", "kind", "start_rel_ms", "end_rel_ms", "dur_ms",
                 "shift_ms"]].reset_index(drop=True)
    align = pd.DataFrame(align_rows).sort_values("step", kind="stable").reset_index(drop=True)  # in step order
    steps_shown = list(dict.fromkeys(int(x) for x in rows["step"]))  # drawing order: in scope first
    first_op = next((r["alignment_op"] for r in align_rows if r["step"] == steps_shown[0]), None)
    metrics = {
        "marey_source_ops": int(total_ops), "marey_rows": int(len(rows)), "marey_marks": int(marks),
        "marey_max_marks": MAX_MARKS, "marey_min_dur_share": MIN_DUR_SHARE,
        "marey_trimmed_ops": int(total_ops - len(rows)), "marey_trim": trimmed,
        "marey_steps_shown": steps_shown, "marey_steps_total": n_steps_total,
        "marey_lanes": int(rows["rank"].nunique()), "marey_lanes_total": len(lane_order),
        "alignment_op": first_op, "alignment": align_rows[0]["aligned"] if align_rows else "step start",
        "median_step": F.median_step() if F is not None else None,
    }
    return rows, align, metrics


def _marey_into(run: Run, ops, windows, tl_source: str, stage_of: dict, F, metrics: dict, tables: dict, data: dict,
                keep_ranks=(), keep_steps=()) -> None:
    """The Marey view's rows, alignment table and metrics into the analysis's ``metrics`` / ``tables`` / ``data``."""
    for k in [k for k in metrics if k.startswith("marey_")] + ["alignment_op", "alignment", "median_step"]:
        metrics.pop(k, None)
    ranks = sorted(int(r) for r in ops["rank"].unique())
    lane_order = sorted(ranks, key=lambda r: (stage_of.get(r) is None, stage_of.get(r) or 0, r))
    rows, align, mm = _marey(run, ops, windows, lane_order, stage_of, F, keep_ranks, keep_steps)
    metrics.update(mm)
    if rows.empty:
        return
    tables["marey_alignment"] = align
    metrics["marey_source"] = tl_source
    # lanes without any computation in the data (e.g. a rank whose files time its communication only)
    has_comp = set(ops.loc[ops["kind"] != "communication", "rank"])
    only = [r for r in ranks if r not in has_comp]
    if has_comp and only:
        metrics["marey_comm_only_ranks"] = only
    if step_windows(run, derived=False) is None:
        metrics["marey_windows"] = DERIVED_WINDOWS
    data["marey"] = rows
    drawn_ranks = set(rows["rank"])
    data["lanes"] = [r for r in lane_order if r in drawn_ranks]


def refocus(run: Run, a: Analysis, options=None) -> None:
    """Once the page's findings are known (``a.focus``, reportgen/focus.py): when a rank or step they name is not
    drawn in the Marey view, draw it again keeping them (lanes and steps), so a finding's link finds its rank and
    step there."""
    from .. import focus
    fo = focus.of(a)
    if "marey" not in a.data:
        return
    rows = a.data["marey"]
    F = facts.of(run, options)
    steps = set(F.steps_all) if F is not None else set(int(x) for x in rows["step"])
    want_ranks = [r for r in fo.ranks if r in set(run.ranks)]
    want_steps = [x for x in fo.steps_to_keep() if x in steps]
    drawn_ranks, drawn_steps = set(int(r) for r in rows["rank"]), set(int(x) for x in rows["step"])
    if set(want_ranks) <= drawn_ranks and set(want_steps) <= drawn_steps:
        return
    ops, windows, tl_source = _timeline(run)
    if ops is None or ops.empty:
        return
    stage_of = {r: run.stage_of(r) for r in run.ranks}
    _marey_into(run, ops, windows, tl_source, stage_of, F, a.metrics, a.tables, a.data, want_ranks, want_steps)


def analyze(run: Run, options=None) -> Analysis:
    overview, overview_source = _time_overview(run)
    ops, windows, tl_source = _timeline(run)
    if overview is None and ops is None:
        raise Unavailable(_unavailable(options))
    stage_of = {r: run.stage_of(r) for r in run.ranks}
    metrics: dict = {}
    tables: dict = {}
    data: dict = {}
    F = facts.of(run, options)
    if overview is not None:
        if F is not None:
            overview = F.listed(overview).reset_index(drop=True)
            overview["warmup"] = overview["step"].isin(F.warmup_steps)
        tables["time_overview"] = overview
        if F is not None:  # the ranks the time overview can highlight (all, or fastest / median / slowest)
            roles = {F.fastest_rank: "fastest", F.median_rank: "median", F.slowest_rank: "slowest"}
            ranks = sorted(int(r) for r in overview["rank"].unique())
            pick = ranks if len(ranks) <= MAX_PICK_RANKS else sorted(r for r in roles if r is not None)
            data["overview_ranks"] = [(r, roles.get(r)) for r in pick]
            metrics["overview_rank"] = F.slowest_rank
        metrics.update({"time_overview_source": overview_source,
                        "steps": len(F.steps) if F is not None else int(overview["step"].nunique()),
                        "warmup_steps": list(F.warmup_steps) if F is not None else [],
                        "ranks": int(overview["rank"].nunique()),
                        "step_ms_mean": F.step_ms_mean if F is not None else float(overview["step_ms"].mean())})
    if ops is not None and not ops.empty:
        _marey_into(run, ops, windows, tl_source, stage_of, F, metrics, tables, data)
    if "marey" not in data and "marey_unavailable" not in metrics:
        metrics["marey_unavailable"] = ("no operator timeline: needs device_timeline intervals inside step windows "
                                        "(trace_view.json device and communication ops, a trace's GPU kernels with "
                                        "ProfilerStep, a step_trace_raw_*_detail_time.csv with op columns)")
    if not tables and not data:
        raise Unavailable(_unavailable(options))
    # --- drill-down (reportgen/sections/drilldown.py): rank_blocks, drilldown_ops
    from . import drilldown
    drilldown.extend_analysis(run, options, metrics, tables, data)
    # --- end drill-down
    return Analysis(metrics=metrics, tables=tables, data=data)


# --------------------------------------------------------------------------- present


#: series of the time overview, one colour each (one legend for both panels)
#: (the band in the light blue of a spread of computation; the highlighted rank in the page's text colour, the
#: report's colour of emphasis, as the focus outlines of reportgen/charts.py)
OVERVIEW_SERIES = {"Step time, median over ranks": palette.ROLE["compute"],
                   "Step time, min–max over ranks": palette.ROLE["compute_range"],
                   "Step time, highlighted rank": "currentColor",
                   "Communication transfer (sum over operations), mean over ranks": palette.ROLE["comm"],
                   "Waiting (sum over operations), mean over ranks": palette.ROLE["wait"]}
#: what a wait the data does not record reads as (never "0 ms")
WAIT_UNKNOWN = "unknown"
#: warm-up steps longer than this factor x the largest step in scope are drawn off the scale (the scale covers the
#: steps in scope, as every colour scale does; reportgen/facts.py)
OFF_SCALE_FACTOR = 1.5
#: what clicking a step of the time overview does: it sets the section's ``step`` control (assets/charts.js)
CLICK_SETS_STEP = {"rg_click": {"field": "step", "signal": "step"}}


def _step_columns(stats: pd.DataFrame, tooltip: list) -> vl.Spec:
    """Full-height columns, one per step: the step the Marey view shows is shaded, every column is a click target
    (CLICK_SETS_STEP) and carries the step's numbers as its tooltip. A step the Marey view does not hold (beyond
    ``MAX_STEPS``; ``in_marey`` false) is greyed lightly, and its click finds no such step: nothing happens."""
    if "in_marey" not in stats or stats["in_marey"].all():
        return vl.Chart(stats).mark_rect(color="currentColor").encode(
            x=vl.X("step:O", title="Step"),
            opacity=vl.condition("toString(datum.step) == step", vl.value(0.18), vl.value(0.0)),
            tooltip=tooltip)
    return vl.Chart(stats).transform_calculate(
        col_opacity="toString(datum.step) == step ? 0.18 : (datum.in_marey ? 0 : 0.07)").mark_rect(
        color="currentColor").encode(x=vl.X("step:O", title="Step"), opacity=vl.Opacity("col_opacity:Q", scale=None),
                                     tooltip=tooltip + [vl.Tooltip("in_marey:N", title="In the Marey view")])


def _y_scale(values: pd.Series, in_scope: pd.Series) -> tuple[vl.Scale, float | None]:
    """A y scale over the steps in scope, and its top when warm-up values far above them are left off it (None:
    every value is on the scale)."""
    top = float(values[in_scope].max()) if in_scope.any() else float(values.max())
    if in_scope.any() and float(values.max()) > OFF_SCALE_FACTOR * top:
        lo = float(values[in_scope].min())
        pad = max((top - lo) * 0.1, abs(top) * 0.01)
        return vl.Scale(domain=[lo - pad, top + pad], zero=False, nice=False), top + pad
    return vl.Scale(zero=False), None


def _off_scale(df: pd.DataFrame, field: str, top: float, x: vl.X, y_scale: vl.Scale, color: vl.Color,
               what: str, factor: float = 1.0) -> vl.Spec:
    """Warm-up values of a panel whose scale leaves them off (its lines cover the steps in scope): those above the
    scale as an arrow and the value at the top edge, the others as points, in the series' colour."""
    warm = df[df["warmup"]]
    off = warm[warm[field] > top].assign(y=top)
    off["label"] = ["↑ " + (what + " " if what else "") + fmt.quantity(v * factor, "ms") for v in off[field]]
    text = vl.Chart(off).mark_text(baseline="top", dy=3, fontSize=10).encode(
        x=x, y=vl.Y("y:Q", scale=y_scale), text="label:N", color=color)
    points = vl.Chart(warm[warm[field] <= top]).mark_point(filled=True).encode(
        x=x, y=vl.Y(f"{field}:Q", scale=y_scale), color=color)
    return vl.layer(text, points)


def _overview_chart(ov: pd.DataFrame, pick_ranks: list[int], rank0: int | None, step0: str,
                    marey_steps: list[int] | None = None) -> Figure:
    """Step time per step: median over ranks, the min–max band and one highlighted rank (control ``ov_rank``);
    below, communication and waiting per step (mean over ranks). Clicking a step shows it in the Marey view.
    Warm-up steps far above the steps in scope are left off the scale (lines over the steps in scope, the value
    written at the top), as every colour scale leaves them out."""
    g = ov.groupby("step")
    stats = g["step_ms"].agg(lo="min", median="median", hi="max").join(g[["comm_ms", "wait_ms"]].first()) \
        .join(g["warmup"].first() if "warmup" in ov else pd.Series(False, index=g.size().index, name="warmup")) \
        .reset_index()
    stats["warmup"] = stats["warmup"].fillna(False).astype(bool)
    if marey_steps is not None:
        stats["in_marey"] = stats["step"].isin(set(marey_steps))
    in_scope = ~stats["warmup"]
    # each panel in the unit that reads best for its values (fmt.unit_for); the data is divided here, in the chart
    unit, factor = fmt.unit_for("ms", stats.loc[in_scope, "median"] if in_scope.any() else stats["median"])
    unit2, factor2 = fmt.unit_for("ms", pd.concat([stats["comm_ms"], stats["wait_ms"]]))
    stats[["lo", "median", "hi"]] = stats[["lo", "median", "hi"]] / factor
    stats[["comm_ms", "wait_ms"]] = stats[["comm_ms", "wait_ms"]] / factor2
    # an unknown wait (NaN: the data records none) is said as such, never drawn or written as 0
    wait_known = stats["wait_ms"].notna()
    stats["wait_text"] = [fmt.quantity(v * factor2, "ms") if ok else WAIT_UNKNOWN
                          for v, ok in zip(stats["wait_ms"], wait_known)]
    tooltip = [vl.Tooltip("step:O", title="Step"), tip("median", "Median over ranks", unit),
               tip("lo", "Fastest rank", unit), tip("hi", "Slowest rank", unit),
               tip("comm_ms", "Communication transfer (sum over operations), mean", unit2),
               vl.Tooltip("wait_text:N", title="Waiting (sum over operations), mean"),
               vl.Tooltip("warmup:N", title="Warm-up")]
    shown = {k: v for i, (k, v) in enumerate(OVERVIEW_SERIES.items()) if i != 4 or wait_known.any()}
    color = vl.Color("series:N", title=None, scale=vl.Scale(domain=list(shown), range=list(shown.values())),
                      legend=vl.Legend(orient="top", columns=3, labelLimit=260, symbolType="stroke",
                                        symbolStrokeWidth=4, symbolSize=240, symbolOpacity=1))
    warm = sorted(int(x) for x in stats.loc[stats["warmup"], "step"])
    # warm-up steps are labelled as in every step list (facts.step_label); step ids are integers from the model
    x = vl.X("step:O", title="Step", axis=vl.Axis(labelAngle=0, labelAlign="center", labelExpr=(
        f"indexof({json.dumps(warm)}, datum.value) >= 0 ? datum.label + ' (warm-up)' : datum.label")
        if warm else vl.Undefined))
    y_scale, top_edge = _y_scale(pd.concat([stats["hi"], stats["lo"]]), pd.concat([in_scope, in_scope]))
    series = list(OVERVIEW_SERIES)
    drawn = stats[in_scope] if top_edge is not None else stats
    base = vl.Chart(drawn).encode(x=x)
    band = base.transform_calculate(series=f"'{series[1]}'").mark_area(opacity=0.35).encode(
        y=vl.Y("lo:Q", scale=y_scale, axis=vl.Axis(**axis("Step time", unit))), y2="hi:Q", color=color)
    # the range of each step as a bar too, so that a run of one step shows it
    spread = base.transform_calculate(series=f"'{series[1]}'").mark_rule(strokeWidth=5, opacity=0.6).encode(
        y=vl.Y("lo:Q", scale=y_scale), y2="hi:Q", color=color)
    median = base.transform_calculate(series=f"'{series[0]}'").mark_line(point=True).encode(
        y=vl.Y("median:Q", scale=y_scale), color=color)
    layers = [_step_columns(stats, tooltip), band, spread, median]
    if pick_ranks:
        rr = ov[ov["rank"].isin(pick_ranks)][["step", "rank", "step_ms"]].dropna()
        rr["step_ms"] = rr["step_ms"] / factor
        rr = rr[rr["step"].isin(drawn["step"])]
        layers.append(vl.Chart(rr).transform_filter("datum.rank == ov_rank").transform_calculate(
            series=f"'{series[2]}'").mark_line(point=True, strokeDash=[5, 3]).encode(
            x=x, y=vl.Y("step_ms:Q", scale=y_scale), color=color,
            tooltip=[vl.Tooltip("step:O", title="Step"), vl.Tooltip("rank:O", title="Rank"),
                     tip("step_ms", "Step time", unit)]))
    if top_edge is not None:
        layers.append(_off_scale(stats.assign(series=series[0]), "median", top_edge, x, y_scale, color, "median",
                                 factor))
    parts = [vl.layer(*layers).properties(width="container", height=200)]
    cw = stats.melt(id_vars=["step", "warmup"], value_vars=["comm_ms", "wait_ms"], var_name="what",
                    value_name="ms").dropna(subset=["ms"])
    cw["series"] = cw["what"].map({"comm_ms": series[3], "wait_ms": series[4]})
    off_scale = top_edge is not None
    if not cw.empty:
        y2_scale, top2 = _y_scale(cw["ms"], ~cw["warmup"])
        lines = vl.Chart(cw[~cw["warmup"]] if top2 is not None else cw).mark_line(point=True).encode(
            x=x, y=vl.Y("ms:Q", scale=y2_scale, axis=vl.Axis(**axis("Time", unit2))), color=color,
            tooltip=[vl.Tooltip("step:O", title="Step"), vl.Tooltip("series:N", title="Series"),
                     tip("ms", "Time", unit2)])
        bottom = [_step_columns(stats, tooltip), lines]
        if top2 is not None:
            bottom.append(_off_scale(cw, "ms", top2, x, y2_scale, color, "", factor2))
        parts.append(vl.layer(*bottom).properties(width="container", height=120))
        off_scale = off_scale or top2 is not None
    chart = fit_concat(vl.vconcat(*parts, spacing=8).resolve_scale(color="shared", x="shared").add_params(
        vl.param(name="step", value=step0), vl.param(name="ov_rank", value=rank0)).properties(
        usermeta=CLICK_SETS_STEP))
    # a sum over operations that overlap can exceed the step: said where it does, so the two lines never read as
    # one quantity (the time communication holds the step is the overlap section's exposed communication)
    over = stats[in_scope & wait_known & (stats["wait_ms"] * factor2 > stats["median"] * factor)]
    caption = ("Top: step time, the median over ranks with the range from the fastest to the slowest rank "
               "(band) and the highlighted rank. Bottom: communication transfer and waiting per step, each summed "
               "over the rank's communication operations, mean over ranks." + (
                   f" Operations overlap (several streams or receives waiting at once), so the summed waiting exceeds "
                   f"the step in {count(len(over), 'step')} (up to {fmt.ms(float((over['wait_ms'] * factor2).max()))} "
                   f"in a {fmt.ms(float(over['median'].median() * factor))} step): it counts operations, not wall "
                   "time; the share of the step communication holds is the overlap section's exposed communication."
                   if len(over) else "") + ("" if wait_known.all() else
                           " Waiting is unknown in this data (it records no wait time): not drawn."
                           if not wait_known.any() else
                           f" Waiting is unknown for {count(int((~wait_known).sum()), 'step')} (no wait time "
                           "recorded): no point there.")
               + (" The shaded column is the step of the Marey view below; click a step to show it there."
                  if step0 else ""))
    if "in_marey" in stats and not stats["in_marey"].all():
        out = sorted(int(x) for x in stats.loc[~stats["in_marey"], "step"])
        caption += (f" The Marey view holds {MAX_STEPS} steps at most: {count(len(out), 'step')} ("
                    f"{', '.join(map(str, out[:10]))}{', …' if len(out) > 10 else ''}) are greyed and not "
                    "selectable.")
    if off_scale and warm:
        caption += (f" Warm-up step{'s' if len(warm) > 1 else ''} {', '.join(map(str, warm))} "
                    f"{'are' if len(warm) > 1 else 'is'} off the scale, which covers the steps in scope: "
                    "the arrows give the values.")
    return Figure("execution-time-overview", "Time overview per step", to_spec(chart), caption=caption,
                  alt="Step time per step (median and range over ranks) and mean communication and waiting time")


#: the lines drawn in the lanes of the Marey view (the drill-down's per-rank lines over one step): metric -> legend
#: label, colour (memory in use: the memory colour; cumulative FLOPs: the page's text colour, dashed, since the
#: computation blue of the bars under it would hide it)
MAREY_LINES = {"memory_mb": ("Memory in use (lane: 0 to its step max)", palette.ROLE["memory"]),
               "flops_cumulative": ("Cumulative FLOPs (lane: 0 to the step's total)", "currentColor")}


def marey_lines(rows: pd.DataFrame, lines: pd.DataFrame | None, line_steps: dict) -> pd.DataFrame | None:
    """The drill-down's per-rank memory and cumulative-FLOPs lines (:func:`reportgen.sections.drilldown.
    rank_step_lines`, computed once there) placed on the Marey view: x = the line's time from the rank's step start
    plus the rank's alignment shift in that step (the bars' clock), ``v`` = value / the rank's largest value of that
    line (0..1, the height within the lane). Only ranks and steps the Marey view draws."""
    if lines is None or lines.empty or not line_steps:
        return None
    shift = rows.drop_duplicates(["rank", "step"]).set_index(["rank", "step"])["shift_ms"]
    out = []
    for (rank, metric), g in lines.groupby(["rank", "metric"], sort=True):
        step = line_steps.get(str(int(rank)))
        if step is None or (int(rank), int(step)) not in shift.index or metric not in MAREY_LINES:
            continue
        top = float(g["value"].max())
        out.append(pd.DataFrame({"sk": str(int(step)), "rank": int(rank), "line": MAREY_LINES[metric][0],
                                 "t": (g["t_ms"] + float(shift[(int(rank), int(step))])).round(4).to_numpy(),
                                 "v": (g["value"] / top if top > 0 else g["value"] * 0.0).round(4).to_numpy(),
                                 "value": g["value"].to_numpy(), "metric": metric}))
    return pd.concat(out, ignore_index=True) if out else None


#: the lane of a row is its rank's own lane (one per rank; or its stage is the one expanded), else its stage's union
#: lane: the ``marey_view`` control is ``ranks``, ``stages`` or ``stage:<s>`` (stage s expanded, the others union)
RANK_LANE = ("(marey_view == 'ranks' || !isValid(datum.stage) || "
             "(marey_view != 'stages' && marey_view == 'stage:' + datum.stage))")


def _marey_chart(rows: pd.DataFrame, lanes: list[int], steps: list[int], m: dict,
                 lines: pd.DataFrame | None = None) -> Figure:
    # smaller file: short field names, the stage and lane position looked up per rank, the duration computed in
    # the page, the key kept only where communication is joined by it
    df = rows[["step_key", "rank", "op", "key", "kind"]].rename(columns={"step_key": "sk"})
    df["key"] = df["key"].where(df["kind"] == "communication", "")
    df["t0"], df["t1"] = rows["start_rel_ms"].round(4), rows["end_rel_ms"].round(4)
    per_rank = rows.drop_duplicates("rank")
    staged = bool(per_rank["stage"].notna().any())
    order = {r: i for i, r in enumerate(lanes)}
    lane_of = pd.DataFrame({"rank": per_rank["rank"], "stage": per_rank["stage"],
                            "lane_order": per_rank["rank"].map(order)})
    # lane labels are built in the page (smaller file); the collapsed view puts every rank of a stage on one
    # lane, which then shows the union of their intervals
    lane_sort = vl.EncodingSortField(field="lane_order", op="min")
    tooltip = [vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("op:N", title="Operator"),
               vl.Tooltip("kind:N", title="Kind"), vl.Tooltip("t0:Q", title="Start (ms)", format=fmt.D3_FORMAT),
               vl.Tooltip("t1:Q", title="End (ms)", format=fmt.D3_FORMAT),
               vl.Tooltip("dur_ms:Q", title="Duration (ms)", format=fmt.D3_FORMAT)]
    # no axis title: the labels name their lanes ("stage 1 · rank 0", "stage 1", "rank 3"), in both lane views
    y = vl.Y("lane_shown:O", sort=lane_sort, title=None, axis=vl.Axis(labelOverlap=True))
    base = vl.Chart(df).transform_filter("datum.sk == step").transform_lookup(
        lookup="rank", from_=vl.LookupData(lane_of, key="rank", fields=["stage", "lane_order"])).transform_calculate(
        lane="isValid(datum.stage) ? 'stage ' + datum.stage + ' · rank ' + datum.rank : 'rank ' + datum.rank",
        stage_lane="isValid(datum.stage) ? 'stage ' + datum.stage : 'rank ' + datum.rank",
    ).transform_calculate(lane_shown=f"{RANK_LANE} ? datum.lane : datum.stage_lane",
                          dur_ms="datum.t1 - datum.t0")
    x = vl.X("t0:Q", title="Time from step start, aligned (ms)")
    poly = base.transform_filter("datum.kind == 'communication'").mark_area(
        orient="horizontal", opacity=0.25, color=palette.ROLE["comm"]).encode(
        x=x, x2="t1:Q", y=vl.Y("lane_shown:O", sort=lane_sort, bandPosition=0.5), detail="key:N",
        tooltip=tooltip)
    kinds = [k for k in MAREY_CLASSES if (rows["kind"] == k).any()] or ["computation", "communication"]
    bar_color = vl.Color("kind:N", title="Kind", scale=vl.Scale(domain=kinds, range=[MAREY_CLASSES[k] for k in kinds]))
    zoom = vl.selection_interval(bind="scales", encodings=["x"], name="marey_zoom")  # drag / wheel; double-click resets
    bars = base.mark_bar(height={"band": 0.6}).encode(
        x=x, x2="t1:Q", y=y, color=bar_color, tooltip=tooltip).add_params(zoom)
    layers = [poly, bars]
    if lines is not None:  # in the lane of their rank, one lane per rank only (the union lanes have no one rank)
        shown = [k for k in MAREY_LINES.values() if k[0] in set(lines["line"])]
        ln = lines.assign(shown=[fmt.quantity(v, "mb" if mt == "memory_mb" else "flop")
                                 for v, mt in zip(lines["value"], lines["metric"])]).drop(columns=["value", "metric"])
        line_layer = vl.Chart(ln).transform_lookup(
            lookup="rank", from_=vl.LookupData(lane_of, key="rank", fields=["stage", "lane_order"])
        ).transform_filter(f"datum.sk == step && {RANK_LANE}").transform_calculate(
            lane_shown="isValid(datum.stage) ? 'stage ' + datum.stage + ' · rank ' + datum.rank : 'rank ' + datum.rank",
            up="1 - datum.v").mark_line(strokeWidth=1.5, interpolate="step-after").encode(
            x=vl.X("t:Q"), y=vl.Y("lane_shown:O", sort=lane_sort),
            yOffset=vl.field("up:Q", scale=vl.Scale(domain=[0, 1], nice=False, zero=True)),
            # drawn in time order (with a quantitative yOffset Vega-Lite would sort the path by the offset)
            order=vl.Order("t:Q"), detail="rank:N",
            color=vl.Color("line:N", title="Line (drill-down ranks)", scale=vl.Scale(
                domain=[k[0] for k in shown], range=[k[1] for k in shown]), legend=vl.Legend(orient="bottom",
                                                                                       labelLimit=360)),
            strokeDash=vl.field("line:N", legend=None, scale=vl.Scale(
                domain=[k[0] for k in shown], range=[[1, 0] if k[1] != "currentColor" else [4, 2] for k in shown])),
            tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("line:N", title="Line"),
                     vl.Tooltip("t:Q", title="Time (ms)", format=fmt.D3_FORMAT),
                     vl.Tooltip("shown:N", title="Value")])
        layers.append(line_layer)
    n_lanes = len(lanes)
    chart = (vl.layer(*layers).add_params(vl.param(name="step", value=str(steps[0])),
                                           vl.param(name="marey_view", value="ranks"))
             .resolve_scale(color="independent", yOffset="independent"))
    # (the lines' yOffset scale is linear and their own: shared, the bars' band height is taken on it and Vega-Lite
    # warns "Cannot use the relative band size with linear scale")
    # taller lanes when lines are drawn in them (a line needs the lane's height to read)
    chart = fit(chart, {"step": max(3, min(40 if lines is not None else 22, 640 // max(1, n_lanes)))})
    trims = []
    t = m["marey_trim"]
    if t["below_threshold"]:
        trims.append(f"{t['below_threshold']:,} ops shorter than {fmt.percent(MIN_DUR_SHARE)} of their step left out")
    if t.get("derived_merged"):
        trims.append(f"derived computation merged across {t['derived_merged']:,} communication gaps shorter than "
                     f"{fmt.percent(MIN_DUR_SHARE)} of their step")
    if t.get("short_merged"):
        trims.append(f"{t['short_merged']:,} computation ops shorter than {fmt.percent(MIN_DUR_SHARE)} of their step "
                     "merged into blocks (across gaps shorter than that; a block's tooltip counts its ops)")
    if t["computation_dropped"]:
        trims.append(f"{t['computation_dropped']:,} computation, wait and other ops left out (communication only)")
    if t.get("computation_thinned"):
        trims.append(f"{t['computation_thinned']:,} of the shortest computation, wait and other ops left out "
                     f"(mark budget {t.get('default_step_budget', t['step_budget']):,} for the first step, "
                     f"{t['step_budget']:,} for each other)")
    if t.get("adjacent_merged"):
        trims.append(f"{t['adjacent_merged']:,} ops merged with their lane's neighbours of the same class (no "
                     "communication between them) to fit the mark budget")
    if t["lanes_sampled"]:
        trims.append(f"{m['marey_lanes']} of {m['marey_lanes_total']} ranks drawn (evenly sampled, keeping the "
                     "ranks the findings name and the slowest, median and fastest rank; a third of each step's "
                     "mark budget goes to computation, so no class is left out)")
    if t["steps_left_out"]:
        trims.append(f"{t['steps_left_out']} later steps not drawn (at most {MAX_STEPS} steps)")
    align = (f"aligned so that the first '{m['alignment_op']}' ends at the same time on every rank "
             f"({m['alignment']})" if m.get("alignment_op") else "aligned on each rank's step start (no "
             "communication op common to the ranks)")
    caption = (f"One lane per rank ({'sorted by stage, then rank' if staged else 'in rank order'}); shown first: "
               f"step {steps[0]}" + (", the median step in scope" if m.get("median_step") == steps[0] else "") +
               ". Bars from start to end, coloured by class (" + ", ".join(
                   k + {"wait": " (waiting for a peer)", "other": " (not classified by the profiler)"}.get(k, "")
                   for k in kinds) + "); "
               f"the same communication operator on different ranks is joined by a shaded polygon. Drag or scroll "
               f"to zoom in time, double-click to reset. " + (
                   "The lanes control shows one lane per stage (the union of its ranks) instead, or one stage's "
                   "ranks with the other stages as union lanes. " if staged else "") + "Times are "
               f"{align}. " + ("Trimmed: " + "; ".join(trims) + "." if trims else "Every op is drawn."))
    if lines is not None:
        line_ranks = sorted(set(int(r) for r in lines["rank"]))
        roles = m.get("drilldown_ranks") or {}
        line_steps = sorted(set(lines["sk"]), key=int)
        caption += (f" Lines in the lanes of rank{'s' if len(line_ranks) > 1 else ''} " + ", ".join(
            f"{r}" + (f" ({roles[str(r)]})" if roles.get(str(r)) else "") for r in line_ranks) +
            f" (the drill-down's ranks), step {', '.join(line_steps)} only: " + " and ".join(
                k[0].split(" (")[0].lower() for k in MAREY_LINES.values() if k[0] in set(lines["line"])) +
            ", each from 0 at the bottom of its lane to its largest value at the top (tooltip: the value); "
            "one lane per rank only.")
    only = m.get("marey_comm_only_ranks") or []
    if only:
        caption += (f" {'Ranks' if len(only) > 1 else 'Rank'} {', '.join(map(str, only))}: communication only (the "
                    "data records no computation operations for "
                    f"{'them' if len(only) > 1 else 'it'}; their lanes show their communication ops).")
    if m.get("marey_windows"):
        caption += (" Step windows: each step ends at the end of its last recorded operation and lasts its step "
                    "time (the files give step durations, not step timestamps).")
    return Figure("execution-marey", "Marey view of the selected step", to_spec(chart), caption=caption,
                  alt="Operators per rank over the step, same operator joined across ranks")


def present(a: Analysis) -> View:
    m = a.metrics
    figures, tables, controls, notes = [], [], [], []
    ov = a.tables.get("time_overview")
    step0 = str(m["marey_steps_shown"][0]) if "marey" in a.data else None
    if ov is not None:
        picks = list(a.data.get("overview_ranks") or [])
        if picks and len(picks) < ov["rank"].nunique():  # a few ranks offered: those findings name as well
            from .. import focus
            have = {r for r, _ in picks}
            extra = [r for r in focus.of(a).ranks_in(ov["rank"].unique()) if r not in have]
            picks = sorted(picks + [(r, "named by a finding") for r in extra], key=lambda x: x[0])
        rank0 = m.get("overview_rank")
        if picks:
            controls.append(Control("ov_rank", "Highlighted rank", [
                (r, f"Rank {r}" + (f" ({role})" if role else "")) for r, role in picks], rank0))
        figures.append(_overview_chart(ov, [r for r, _ in picks], rank0, step0 or "",
                                       m.get("marey_steps_shown") if "marey" in a.data else None))
        tables.append(Table.from_frame(
            "execution-steps", "Time overview per step and rank", ov,
            [Column("step", "Step", "int"), Column("rank", "Rank", "rank"), Column("step_ms", "Step time", "ms"),
             Column("comm_ms", "Communication transfer, step mean", "ms"), Column("wait_ms", "Waiting, step mean", "ms"),
             Column("rank_comm_ms", "Communication transfer, this rank", "ms"),
             Column("rank_wait_ms", "Waiting, this rank", "ms")],
            caption=m.get("time_overview_source", "")))
    if "marey" in a.data:
        steps = m["marey_steps_shown"]
        warm = set(m.get("warmup_steps") or [])
        controls.insert(0, Control("step", "Step (Marey view)", [(str(s), facts.step_label(s, warm))
                                                                 for s in sorted(steps)], step0))
        if a.data["marey"]["stage"].notna().any():
            stages = sorted({int(x) for x in a.data["marey"]["stage"].dropna()})
            controls.append(Control("marey_view", "Marey lanes", [("ranks", "One per rank"),
                                                                  ("stages", "One per stage (union of its ranks)")]
                                    + ([(f"stage:{st}", f"Stage {st} per rank, the others one per stage")
                                        for st in stages] if len(stages) > 1 else []), "ranks"))
        figures.append(_marey_chart(a.data["marey"], a.data["lanes"], steps, m, marey_lines(
            a.data["marey"], a.tables.get("rank_step_lines"), m.get("drilldown_line_steps") or {})))
        tables.append(Table.from_frame(
            "execution-alignment", "Alignment per step", a.tables["marey_alignment"],
            [Column("step", "Step", "int"), Column("alignment_op", "Alignment op", "text"),
             Column("aligned", "Aligned", "text")]))
    else:
        notes.append("Marey view: " + m.get("marey_unavailable", "no operator timeline"))
    parts = []
    if ov is not None:
        n = m["steps"]
        warm = m.get("warmup_steps") or []
        parts.append(f"{count(n, 'step')} on {count(m['ranks'], 'rank')}, mean "
                     f"step time {fmt.ms(m['step_ms_mean'])}" + (f" (warm-up step{'s' if len(warm) > 1 else ''} "
                                                               f"{', '.join(map(str, warm))} left out)" if warm else ""))
    if "marey" in a.data:
        parts.append(f"Marey view of {len(m['marey_steps_shown'])} step(s), {m['marey_lanes']} lanes, "
                     f"{m['marey_marks']:,} marks" + (f", aligned on '{m['alignment_op']}'" if m.get("alignment_op")
                                                      else ", aligned on the step start"))
    # --- drill-down (reportgen/sections/drilldown.py): rank-block strips after the Marey figure, per-rank tops
    from . import drilldown
    drilldown.extend_view(a, figures, tables, controls)
    # --- end drill-down
    return View(summary="; ".join(parts) + ".", figures=figures, tables=tables, controls=controls, notes=notes)
