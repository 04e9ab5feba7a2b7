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
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from . import thresholds as th
from .model import Run

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
        warm-up step (unless --include-warmup)."""
        wall = self.step_time[self.step_time["in_scope"]].groupby("step")["step_ms"].max()
        if wall.empty:
            return None
        order = sorted(wall.items(), key=lambda kv: (kv[1], kv[0]))
        return int(order[(len(order) - 1) // 2][0])

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
    per_rank = scoped.groupby("rank", as_index=False).agg(step_ms=("step_ms", "mean"), steps=("step", "nunique"))
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
