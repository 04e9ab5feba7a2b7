"""Run facts, computed once per report and read by every section, the advisor and the summary.

If two sections could disagree about one of these, the design is wrong: no section derives them its own way.

* **Step times.** One row per (rank, step) with ``step_ms``: the family's per-step table — ``step_time``
  (Ascend ``step_trace_time.csv`` / DB, PyTorch ProfilerStep windows, MindSpore CPU op repetitions) or, failing
  that, ``step_trace`` (MindSpore Insight). Rows with step ``-1`` (work outside every step) are never a step.
  Where the steps come from is ``Run.step_source`` (markers | repeated_ops | whole_trace; see reportgen/model.py).
* **Steps listed** (``steps_all``): every step with a step time, in order. Every section that lists steps lists
  exactly these (warm-up steps labelled); per-step data of other steps (e.g. an hccl_raw row for a step the
  step trace lacks) is left out and said so by the section.
* **Warm-up steps** (:func:`warmup_steps`): leading steps whose slowest rank took more than
  :data:`reportgen.thresholds.WARMUP_STEP_FACTOR` times the median of the later steps' slowest-rank times
  (graph compilation, allocator and communicator set-up, first data load). Only leading steps, never all of
  them. They are listed and labelled, and left out of every headline number and colour scale unless the user
  asks for them (``--include-warmup``).
* **Steps in scope** (``steps``): ``steps_all`` minus warm-up steps (all of them with ``--include-warmup``).
* **Per-rank step time**: the mean of the rank's step times over the steps in scope.
* **Slowest / median / fastest rank**: ranks ordered by per-rank step time (ties: lower rank id first); the
  fastest is the first, the slowest the last, the median the one at position ``(n - 1) // 2``.
* **Headline step time**: the median and mean over ranks of the per-rank step time.
* **Median step** (:meth:`RunFacts.median_step`): the step in scope of median time, what one-step views show first.
* **Input wait** (:func:`input_wait`): one measure per run, per rank and step — the DataLoader wait where the run has
  DataLoader spans, else the preparing time, else the step interval — named by what it is, read by the data
  section, the trajectory and the advisor's data rules.
* **Shares** (:func:`share`): every part / whole shown as a percentage goes through one guard; a share outside
  0..1 beyond rounding is NaN (never shown) and a data problem naming the quantity.
* **Slowest rank**: the word "slowest" means :attr:`RunFacts.slowest_rank` (mean step time) everywhere; a finding
  about the rank the others wait for at collectives names that quantity ("arrives last"), never "slowest".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import thresholds as th
from .model import Run
from .frames import agg

#: how the user can bring warm-up steps back (CLI flag and Options key)
INCLUDE_WARMUP_OPTION = "include_warmup"


def step_label(step, warmup_steps) -> str:
    """How a step is named wherever steps are listed (page controls): ``Step 1 (warm-up)``, ``Step 2``."""
    return f"Step {step} (warm-up)" if step in set(warmup_steps or ()) else f"Step {step}"


@dataclass(frozen=True)
class RunFacts:
    step_source: str
    step_table: str  # the run table the step times come from
    steps_all: tuple[int, ...]
    warmup_steps: tuple[int, ...]
    include_warmup: bool
    steps: tuple[int, ...]  # in scope
    step_time: pd.DataFrame  # rank, step, step_ms, warmup, in_scope
    per_rank: pd.DataFrame  # rank, step_ms (mean over steps in scope), steps (count in scope)
    slowest_rank: int | None
    median_rank: int | None
    fastest_rank: int | None
    step_ms_median: float
    step_ms_mean: float
    notes: tuple[str, ...] = field(default=())

    def in_scope(self, df: pd.DataFrame, step_col: str = "step") -> pd.DataFrame:
        """The rows of a per-step table whose step is in scope (never -1, never a warm-up step by default)."""
        return df[df[step_col].isin(self.steps)]

    def listed(self, df: pd.DataFrame, step_col: str = "step") -> pd.DataFrame:
        """The rows of a per-step table whose step is one of the steps listed (warm-up included, -1 never)."""
        return df[df[step_col].isin(self.steps_all)]

    def per_rank_mean(self, df: pd.DataFrame, cols: list[str], step_col: str = "step") -> pd.DataFrame:
        """Per rank: the mean of ``cols`` over the steps in scope (the one way every section averages steps)."""
        return self.in_scope(df, step_col).groupby("rank", as_index=False)[cols].mean()

    def median_step(self) -> int | None:
        """The representative step: the step in scope whose time (its slowest rank's, as for warm-up) is the median
        of the steps in scope (the lower middle one; ties by step id). Views of one step show it by default, never a
        warm-up step (unless --include-warmup). Computed once per facts (a report asks 3-4 times: the Marey view, the
        critical path, the default step of the page), kept beside the frozen fields."""
        memo = self.__dict__
        if "_median_step" not in memo:
            wall = self.step_time[self.step_time["in_scope"]].groupby("step")["step_ms"].max()
            if wall.empty:
                memo["_median_step"] = None
            else:
                order = sorted(wall.items(), key=lambda kv: (kv[1], kv[0]))
                memo["_median_step"] = int(order[(len(order) - 1) // 2][0])
        return memo["_median_step"]

    def as_dict(self) -> dict:
        return {
            "step_source": self.step_source, "step_table": self.step_table,
            "steps_listed": list(self.steps_all), "warmup_steps": list(self.warmup_steps),
            "include_warmup": self.include_warmup, "steps_in_scope": list(self.steps),
            "slowest_rank": self.slowest_rank, "median_rank": self.median_rank, "fastest_rank": self.fastest_rank,
            "step_ms_median": self.step_ms_median, "step_ms_mean": self.step_ms_mean,
            "rank_order_definition": "mean step time over the steps in scope; ties by rank id",
            "warmup_definition": f"leading steps whose slowest rank took more than {th.WARMUP_STEP_FACTOR:g} x the "
                                 f"median of the later steps' slowest-rank times",
            "notes": list(self.notes),
        }


def _step_times(run: Run) -> tuple[pd.DataFrame | None, str]:
    for name in ("step_time", "step_trace"):
        df = run.table(name)
        if df is not None and "step_ms" in df and df["step_ms"].notna().any():
            rows = df[["rank", "step", "step_ms"]].dropna(subset=["step_ms"])
            inside = rows[rows["step"] != -1]
            # a run whose only rows are step -1 (the profiler wrote no step id) is one whole-trace window
            return (inside if not inside.empty else rows).reset_index(drop=True), name
    return None, ""


def warmup_steps(step_time: pd.DataFrame, factor: float | None = None) -> list[int]:
    """Leading steps whose slowest rank took more than ``factor`` x the median of the later steps' slowest-rank
    times (module doc). Never every step: at least the last one stays."""
    factor = th.WARMUP_STEP_FACTOR if factor is None else factor
    wall = step_time.groupby("step")["step_ms"].max().sort_index()
    values = wall.to_numpy()
    out = []
    for i, step in enumerate(wall.index):
        rest = values[i + 1:]
        if len(rest) == 0 or not values[i] > factor * float(np.median(rest)):
            break
        out.append(int(step))
    return out


def rank_order(per_rank: pd.DataFrame, col: str = "step_ms") -> list[int]:
    """Ranks from fastest to slowest by ``col`` (ties: lower rank id first)."""
    d = per_rank.dropna(subset=[col]).sort_values([col, "rank"], kind="stable")
    return [int(r) for r in d["rank"]]


def compute(run: Run, include_warmup: bool = False) -> RunFacts | None:
    """The facts of a run (module doc); ``None`` when the run has no per-step times at all."""
    st, table = _step_times(run)
    if st is None:
        return None
    steps_all = tuple(sorted(int(s) for s in st["step"].unique()))
    warm = tuple(warmup_steps(st))
    steps = steps_all if include_warmup else tuple(s for s in steps_all if s not in warm)
    st = st.assign(warmup=st["step"].isin(warm), in_scope=st["step"].isin(steps))
    scoped = st[st["in_scope"]]
    per_rank = agg(scoped.groupby("rank"), step_ms=("step_ms", "mean"), steps=("step", "nunique")).reset_index()
    order = rank_order(per_rank)
    notes = []
    if warm and not include_warmup:
        notes.append(f"{len(warm)} warm-up step{'s' if len(warm) > 1 else ''} ({', '.join(map(str, warm))}) left out "
                     f"of every average and colour scale (--include-warmup keeps them)")
    return RunFacts(
        step_source=run.step_source or ("markers" if table else ""), step_table=table,
        steps_all=steps_all, warmup_steps=warm, include_warmup=include_warmup, steps=steps,
        step_time=st, per_rank=per_rank,
        slowest_rank=order[-1] if order else None, fastest_rank=order[0] if order else None,
        median_rank=order[(len(order) - 1) // 2] if order else None,
        step_ms_median=float(per_rank["step_ms"].median()) if len(per_rank) else math.nan,
        step_ms_mean=float(per_rank["step_ms"].mean()) if len(per_rank) else math.nan,
        notes=tuple(notes))


#: How far outside 0..1 a share may fall and still count as rounding (clipped to 0..1, not a data problem):
#: profilers write times to the µs or 0.1 µs, so a part that should equal its whole can exceed it by that much.
SHARE_ROUNDING = 1e-3


def share(part, whole, quantity: str, run: Run | None = None):
    """``part / whole`` as a ratio 0..1 (a whole that is not > 0 gives NaN silently: no share exists), through
    :func:`guard_ratio`, the one guard of every share of the report. Scalars give a float; arrays and Series give the
    same shape."""
    p = np.asarray(part, dtype=float)
    w = np.asarray(whole, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(w > 0, p / np.where(w > 0, w, 1.0), np.nan)
    if np.ndim(part) == 0 and np.ndim(whole) == 0:
        return float(guard_ratio(r, quantity, run))
    index = part.index if isinstance(part, pd.Series) else whole.index if isinstance(whole, pd.Series) else None
    out = guard_ratio(r, quantity, run)
    if index is None:
        return out
    return pd.Series(out, index=index, name=part.name if isinstance(part, pd.Series) else None)


def guard_ratio(ratio, quantity: str, run: Run | None = None):
    """The one guard of every share (ratio 0..1) the report shows.

    A share is a part of a whole (wait of a step, idle of a step, peak of a capacity), so it lies in 0..1. Within
    :data:`SHARE_ROUNDING` outside it is rounding and clipped; beyond that the inputs contradict each other (a
    kernel of 0.02 µs gave idle -100 % and compute 200 %): the value is NaN, never shown as a percentage, and
    ``run`` records one data problem naming ``quantity`` and how many values were out of range. NaN stays NaN.
    A Series gives a Series (same index), anything else a numpy array (a 0-d one for a scalar)."""
    series = ratio if isinstance(ratio, pd.Series) else None
    r = np.asarray(ratio, dtype=float)
    bad = (r < -SHARE_ROUNDING) | (r > 1 + SHARE_ROUNDING)
    if bad.any():
        worst = float(r[bad].flat[int(np.argmax(np.abs(r[bad] - 0.5)))])
        if run is not None:
            seen = run.__dict__.setdefault("_share_problems", set())
            if quantity not in seen:
                seen.add(quantity)
                run.problem(quantity, f"{int(bad.sum())} value(s) of {quantity} outside 0..100 % (e.g. "
                                      f"{worst * 100:.4g} %): the part and the whole contradict each other; "
                                      "not shown")
        r = np.where(bad, np.nan, r)
    r = np.clip(r, 0.0, 1.0)
    return pd.Series(r, index=series.index, name=series.name) if series is not None else r


def share_mean(part, whole, quantity: str, run: Run | None = None) -> float:
    """The mean over ranks of :func:`share` (NaN values left out; NaN when none is left)."""
    r = np.asarray(share(part, whole, quantity, run), dtype=float)
    r = r[~np.isnan(r)]
    return float(r.mean()) if len(r) else math.nan


# ----------------------------------------------------------------------------------------------- input wait
#: The input-wait measures, the first the run has being THE measure of the run: (name, column, definition).
WAIT_MEASURES = (
    ("DataLoader wait", "dataloader_wait_ms",
     "per rank and step, the summed duration of the main thread's enumerate(DataLoader)...__next__ spans that start "
     "in the step (0 in a step without one; table dataloader)"),
    ("preparing time", "preparing_ms",
     "per rank and step, the time from the step start to its first device operation (table step_time, preparing_ms: "
     "the profiler's Preparing column)"),
    ("step interval", "step_interval_ms",
     "per rank and step, the time from the step start to the forward start, reading data from the data queue "
     "(table step_trace, step_interval_ms)"),
)


@dataclass(frozen=True)
class InputWait:
    """THE input-wait measure of a run (:func:`input_wait`): what the data section, the trajectory and the advisor's
    data rules read, under its name."""

    measure: str  # DataLoader wait | preparing time | step interval
    column: str  # dataloader_wait_ms | preparing_ms | step_interval_ms
    definition: str
    per_rank_step: pd.DataFrame  # rank, step, wait_ms, step_ms, warmup, in_scope (the steps listed)
    per_rank: pd.DataFrame  # rank, wait_ms, step_ms (means over the steps in scope), wait_share_ratio
    share_mean: float  # mean over ranks of wait_share_ratio

    def as_dict(self) -> dict:
        return {"measure": self.measure, "column": self.column, "definition": self.definition,
                "wait_ms_mean": float(self.per_rank["wait_ms"].mean()) if len(self.per_rank) else math.nan,
                "wait_share_ratio_mean": self.share_mean,
                "share_definition": "per rank, mean wait over the steps in scope / mean step time (facts.share)"}


def _wait_rows(run: Run, F: RunFacts) -> tuple[pd.DataFrame, tuple[str, str, str]] | None:
    """rank, step, wait_ms of the run's measure (:data:`WAIT_MEASURES`, the first the data has)."""
    dl = run.table("dataloader")
    if dl is not None and {"rank", "step", "dur_ms"} <= set(dl.columns) and (dl["step"] != -1).any():
        spans = dl[dl["step"] != -1].groupby(["rank", "step"], as_index=False)["dur_ms"].sum()
        grid = F.step_time[F.step_time["rank"].isin(set(dl["rank"]))][["rank", "step"]]
        rows = grid.merge(spans, on=["rank", "step"], how="left").rename(columns={"dur_ms": "wait_ms"})
        rows["wait_ms"] = rows["wait_ms"].fillna(0.0)
        return rows, WAIT_MEASURES[0]
    for (name, col, definition), table in zip(WAIT_MEASURES[1:], ("step_time", "step_trace")):
        df = run.table(table)
        if df is not None and col in df and df[col].notna().any():
            rows = df[["rank", "step", col]].dropna().rename(columns={col: "wait_ms"})
            return rows[rows["step"] != -1], (name, col, definition)
    return None


def input_wait(run: Run, options=None) -> InputWait | None:
    """The run's input-wait measure, per rank and step, computed once (cached on the run per warm-up choice).

    Definition: the DataLoader wait where the run has DataLoader spans, else the preparing time, else the step
    interval (:data:`WAIT_MEASURES`); its name says which. Per rank: the mean wait over the steps in scope, the mean
    step time (facts) and their share (:func:`share`). None when the run has none of the three or no step times."""
    F = of(run, options)
    if F is None:
        return None
    cache = run.__dict__.setdefault("_wait_cache", {})
    if F.include_warmup in cache:
        return cache[F.include_warmup]
    got = _wait_rows(run, F)
    out = None
    if got is not None:
        rows, (name, col, definition) = got
        prs = F.step_time.merge(rows, on=["rank", "step"], how="inner")
        prs = prs[["rank", "step", "wait_ms", "step_ms", "warmup", "in_scope"]].reset_index(drop=True)
        scoped = prs[prs["in_scope"]]
        if not scoped.empty:
            per = scoped.groupby("rank", as_index=False)[["wait_ms", "step_ms"]].mean()
            per["wait_share_ratio"] = share(per["wait_ms"], per["step_ms"], f"{name} / step time", run)
            out = InputWait(name, col, definition, prs, per,
                            share_mean(per["wait_ms"], per["step_ms"], f"{name} / step time"))
    cache[F.include_warmup] = out
    return out


def of(run: Run, options=None) -> RunFacts | None:
    """The run's facts for this report, computed once and cached on the run.

    With ``options`` (what sections receive) the ``--include-warmup`` choice is read from them and becomes the
    report's; without, the report's facts are returned (the summary and the metrics file use that)."""
    cache = run.__dict__.setdefault("_facts_cache", {})
    if options is None or not hasattr(options, "get"):
        include = cache.get("current", False)
    else:
        include = bool(options.get(INCLUDE_WARMUP_OPTION, False))
        cache["current"] = include
    if include not in cache:
        cache[include] = compute(run, include)
    return cache[include]


# =============================================================================================================
# Communication facts (issue 25): the two communication quantities, per-rank shares held to 0..1, and who waited
# for whom. Built on the canonical ``comm_ops`` table (reportgen/readers/comm.py fills it for every family), cached
# on the run; every section reads them from here.
# =============================================================================================================

#: per-call entry table (:func:`entries`)
ENTRY_COLUMNS = ["step", "group", "op", "op_type", "call", "rank", "ranks", "enter_ms", "end_ms", "last_rank",
                 "wait_ms"]
#: per point-to-point pair (:func:`p2p_entries`)
P2P_ENTRY_COLUMNS = ["step", "src_rank", "dst_rank", "n", "kind", "send_enter_ms", "recv_enter_ms", "late_rank",
                     "wait_ms"]
#: collective ends more spread than this (median over calls, beyond the calls' shortest duration) say that the
#: ranks' clocks are not comparable (ms)
CLOCK_SPREAD_TOLERANCE_MS = 1.0


#: the two communication quantities, as the metrics file states them
COMM_OP_DEFINITION = "communication op time: the sum of the communication operations' durations"
COMM_BUSY_DEFINITION = ("communication busy time: the length of the union of the communication operations' intervals "
                        "on the rank's timeline")


def comm_op_ms(ops: pd.DataFrame, keys=("rank", "step")) -> pd.DataFrame:
    """**Communication op time** per ``keys``: the sum of the communication operations' durations (``elapse_ms``).
    Over several streams (or planes) operations run at once, so it can exceed the time the rank communicated
    (:func:`comm_busy_ms`). Column ``comm_op_ms``; NaN where no operation has a duration."""
    return ops.groupby(list(keys), as_index=False)["elapse_ms"].sum(min_count=1).rename(
        columns={"elapse_ms": "comm_op_ms"})


def comm_busy_ms(ops: pd.DataFrame, keys=("rank", "step")) -> pd.DataFrame | None:
    """**Communication busy time** per ``keys``: the length of the union of the communication intervals
    ``[start_ms, start_ms + elapse_ms]`` on the rank's timeline (time during which at least one communication
    operation ran; :func:`reportgen.intervals.union_length_by`). Column ``comm_busy_ms``; None when the operations
    have no start times (MindSpore hccl_raw)."""
    if "start_ms" not in ops:
        return None
    o = ops.dropna(subset=["start_ms", "elapse_ms"])
    if o.empty:
        return None
    from .intervals import union_length_by

    u = union_length_by(o.assign(_end=o["start_ms"] + o["elapse_ms"].clip(lower=0)), list(keys), end="_end")
    return u.drop(columns="rows").rename(columns={"length": "comm_busy_ms"})


def _comm_cache(run: Run) -> dict:
    return run.__dict__.setdefault("_comm_facts_cache", {})


def entries(run: Run) -> pd.DataFrame | None:
    """**Who entered each collective call when** (cached on the run): one row per participating rank of every
    collective call, columns :data:`ENTRY_COLUMNS`.

    A call is identified as the communication sections identify one operation instance across ranks: the same
    ``group``, ``step`` and ``op``, and ``call`` = its position among that rank's calls of that op in that group and
    step (start order). ``enter_ms`` = the op's start on this rank, ``end_ms`` = start + elapse, ``ranks`` = the
    ranks seen in the call, ``last_rank`` = the rank that entered last (ties: the lower rank id), ``wait_ms`` = the
    last entry - this rank's entry (the time this rank waited for the last one; 0 for the last rank).
    Start times are on each rank's clock: where those clocks are not comparable (:func:`entry_clocks`) the waits
    say so. Needs ``comm_ops`` with start times and a group key; calls seen on one rank only are left out.
    None when the run has none."""
    cache = _comm_cache(run)
    if "entries" in cache:
        return cache["entries"]
    cache["entries"] = out = _entries(run.table("comm_ops"))
    return out


def call_index(ops: pd.DataFrame) -> pd.Series:
    """Which call of its collective each operation row is: its position among the same rank's operations of the same
    step, ``group`` and ``op``, in start order where ``start_ms`` exists (else in table order). The n-th call of one
    collective on every rank of its group is one collective instance: the one identity that who-waited-for-whom
    (:func:`entries`) and the advisor's slow-rank vote both use."""
    keys = [k for k in ("rank", "step", "group", "op") if k in ops]
    order = ops.sort_values(keys + ["start_ms"], kind="stable") if "start_ms" in ops else ops
    return order.groupby(keys, sort=False).cumcount().reindex(ops.index)


def _entries(ops: pd.DataFrame | None) -> pd.DataFrame | None:
    if ops is None or ops.empty or "start_ms" not in ops or "group" not in ops:
        return None
    o = ops[(ops["kind"] != "p2p") if "kind" in ops else slice(None)]
    o = o.dropna(subset=["start_ms"])
    o = o[o["group"].notna()]
    if o.empty:
        return None
    o = o.assign(group=o["group"].astype(str), op=o["op"].astype(str),
                 end_ms=o["start_ms"] + o["elapse_ms"].astype(float))
    o = o.sort_values(["rank", "step", "group", "op", "start_ms"], kind="stable")
    o = o.assign(call=call_index(o))
    key = ["step", "group", "op", "call"]
    g = o.groupby(key, sort=False)
    o["ranks"] = g["rank"].transform("size")
    o = o[o["ranks"] >= 2]
    if o.empty:
        return None
    # the last entry (ties: the lower rank id): sort by entry descending, then rank ascending, take the first
    last = o.sort_values(["start_ms", "rank"], ascending=[False, True], kind="stable").drop_duplicates(key)
    last = last.set_index(key)[["rank", "start_ms"]].rename(columns={"rank": "last_rank", "start_ms": "_last"})
    o = o.join(last, on=key)
    out = pd.DataFrame({"step": o["step"].astype("int64"), "group": o["group"], "op": o["op"],
                        "op_type": o["op_type"] if "op_type" in o else "", "call": o["call"].astype("int64"),
                        "rank": o["rank"].astype("int64"), "ranks": o["ranks"].astype("int64"),
                        "enter_ms": o["start_ms"].astype(float), "end_ms": o["end_ms"],
                        "last_rank": o["last_rank"].astype("int64"), "wait_ms": o["_last"] - o["start_ms"]})
    return out.sort_values(["step", "group", "op", "call", "rank"], kind="stable").reset_index(drop=True)


def entry_clocks(e: pd.DataFrame | None, hosts: dict | None = None) -> dict:
    """Are the ranks' clocks comparable for the entries? Ranks of one host share its clock: comparable
    (``basis`` "one host"). Across hosts: a collective completes on every rank at about the same moment, so on
    comparable clocks the spread of a call's end times stays within the transfer once every rank is in; when the
    median over calls of (end spread - that transfer) exceeds :data:`CLOCK_SPREAD_TOLERANCE_MS`, the clocks are
    taken as not comparable (offsets between hosts, clocks never synchronised) and the waits as unreliable
    (``basis`` "collective ends"). -> {"comparable": bool | None, "basis", "end_spread_ms": median end spread,
    "calls": n}; None without calls (or hosts) to judge by."""
    if e is None or e.empty:
        return {"comparable": None, "basis": "", "end_spread_ms": None, "calls": 0}
    g = e.groupby(["step", "group", "op", "call"], sort=False)
    spread = g["end_ms"].max() - g["end_ms"].min()
    out = {"end_spread_ms": float(spread.median()), "calls": int(len(spread))}
    ranks = {int(r) for r in e["rank"].unique()}
    on = {hosts.get(r) for r in ranks} if hosts else {None}
    if None not in on and len(on) == 1:
        return {"comparable": True, "basis": "one host", **out}
    shortest = (g["end_ms"].min() - g["enter_ms"].max()).clip(lower=0)  # the transfer once all are in
    excess = float((spread - shortest).median())
    return {"comparable": bool(excess <= CLOCK_SPREAD_TOLERANCE_MS), "basis": "collective ends", **out}


def clocks(run: Run) -> dict:
    """:func:`entry_clocks` of the run's :func:`entries` and hosts, judged once per run (cached on the run: the
    communication section and the diagnosis both state it); a copy each call."""
    cache = _comm_cache(run)
    if "clocks" not in cache:
        cache["clocks"] = entry_clocks(entries(run), run.hosts)
    return dict(cache["clocks"])


def p2p_entries(run: Run) -> pd.DataFrame | None:
    """**Who waited for whom at each point-to-point transfer** (cached on the run), columns
    :data:`P2P_ENTRY_COLUMNS`: each send joined to its receive (:func:`reportgen.p2p.pairs`: the n-th send from a to
    b with the n-th receive on b from a, per step), ``send_enter_ms`` / ``recv_enter_ms`` = the two starts,
    ``late_rank`` = the side that entered later, ``wait_ms`` = |recv entry - send entry| (what the early side
    waited). Matched pairs only; None when the run has none."""
    cache = _comm_cache(run)
    if "p2p" in cache:
        return cache["p2p"]
    from . import p2p

    out = None
    ops = p2p.ops(run)
    if ops is not None and not ops.empty:
        pr = p2p.pairs(ops)
        pr = pr[pr["matched"]]
        if not pr.empty:
            send, recv = pr["send_start_ms"].astype(float), pr["recv_start_ms"].astype(float)
            out = pd.DataFrame({"step": pr["step"].astype("int64"), "src_rank": pr["src_rank"].astype("int64"),
                                "dst_rank": pr["dst_rank"].astype("int64"), "n": pr["n"].astype("int64"),
                                "kind": pr["kind"], "send_enter_ms": send, "recv_enter_ms": recv,
                                "late_rank": np.where(recv > send, pr["dst_rank"], pr["src_rank"]).astype("int64"),
                                "wait_ms": (recv - send).abs()}).reset_index(drop=True)
    cache["p2p"] = out
    return out


def rank_waits(run: Run, options=None) -> pd.DataFrame | None:
    """Per rank, over the steps in scope (every step when the run has no step facts): ``waited_ms`` = the time this
    rank waited for others (Σ of its collective entries' ``wait_ms`` and of the point-to-point transfers it entered
    first), ``late_ms`` = the time others waited for this rank (Σ of the other ranks' waits at the calls it entered
    last, and of the transfers it entered last), ``calls`` (collective calls joined), ``last_calls`` (calls it
    entered last, ties to the lower rank id). Totals, not per step. None without entries."""
    e, p = entries(run), p2p_entries(run)
    F = of(run, options)

    def scoped(df):
        if df is None or df.empty:
            return None
        return F.in_scope(df) if F is not None else df[df["step"] != -1]

    e, p = scoped(e), scoped(p)
    if (e is None or e.empty) and (p is None or p.empty):
        return None
    parts_w, parts_l = [], []
    calls = last_calls = None
    if e is not None and not e.empty:
        parts_w.append(e.groupby("rank")["wait_ms"].sum())
        parts_l.append(e.groupby("last_rank")["wait_ms"].sum())
        calls = e.groupby("rank").size()
        last_calls = e[e["rank"] == e["last_rank"]].groupby("rank").size()
    if p is not None and not p.empty:
        early = np.where(p["late_rank"] == p["src_rank"], p["dst_rank"], p["src_rank"])
        parts_w.append(p["wait_ms"].groupby(early).sum())
        parts_l.append(p.groupby("late_rank")["wait_ms"].sum())
    ranks = sorted({int(r) for s in parts_w + parts_l for r in s.index})
    out = pd.DataFrame({"rank": ranks})
    out["waited_ms"] = sum(s.reindex(ranks).fillna(0.0).to_numpy() for s in parts_w)
    out["late_ms"] = sum(s.reindex(ranks).fillna(0.0).to_numpy() for s in parts_l)
    out["calls"] = (calls.reindex(ranks).fillna(0) if calls is not None else pd.Series(0, index=ranks)).astype(
        "int64").to_numpy()
    out["last_calls"] = (last_calls.reindex(ranks).fillna(0) if last_calls is not None
                         else pd.Series(0, index=ranks)).astype("int64").to_numpy()
    return out
