"""The report document: everything the page and the metrics file say, built once per report.

:func:`build` makes one :class:`Document` from the run and its section outcomes: the run block, the facts block,
the summary (:mod:`reportgen.summary`), the data problems as listed, the table cuts plan of the metrics file
(:func:`plan_cuts`, which the page states in each section's notes: :func:`cuts_text`), the findings in their one
order (:func:`reportgen.sections.advisor.order_key`) and the sections. The JSON writer
(:func:`reportgen.metrics.build`) and the HTML renderer (:func:`reportgen.render.build_context`) both render
from it; nothing is cached between reports.

Size budget of the metrics file (whatever the input says; reportgen/thresholds.py, "Page budget"): per-operator
tables keep ``JSON_OP_ROWS`` rows (the longest), per-(rank, step) tables whole steps up to ``JSON_STEP_ROWS``
rows, any table :data:`MAX_TABLE_ROWS` rows; then the per-operator and per-(rank, step) tables share what the rest
of the file leaves of ``JSON_BYTES`` (:func:`plan_cuts`); a section's ``tables_left_out`` says how many rows of
which table were left out and which were kept. Per-rank tables are whole.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from . import facts
from . import thresholds as th
from .jsonsafe import clean, table_rows
from .limits import MAX_PROBLEMS
from .model import DataProblem, Run
from .report import Finding, SectionOutcome
from .summary import summary

#: rows of one table in the metrics file (4x the largest table of a 1024-rank synth run)
MAX_TABLE_ROWS = 1_000_000


def run_block(run: Run) -> dict[str, Any]:
    """The run as the metrics file names it (``run``)."""
    return clean({
        "name": run.name,
        "source_format": run.source_format,
        "framework": run.framework,
        "source_path": run.source_path,
        "layout": run.layout,
        "world_size": run.world_size,
        "ranks": run.ranks,
        "missing_ranks": run.missing_ranks,
        "steps": list(facts.of(run).steps_all) if facts.of(run) is not None else run.steps,
        "hosts": {str(r): h for r, h in sorted(run.hosts.items())},
        "parallel": run.parallel,
        "is_demo": run.is_demo,
        **({"windows": list(run.windows)} if getattr(run, "windows", None) else {}),
    })


def facts_block(run: Run) -> dict[str, Any] | None:
    """The run facts every section used (reportgen/facts.py): steps listed / in scope / warm-up, rank order."""
    F = facts.of(run)
    if F is None:
        return None
    return clean({**F.as_dict(), "per_rank": table_rows(F.per_rank)})


def bounded_problems(run: Run) -> list[DataProblem]:
    """The run's data problems as shown (page and JSON): the first :data:`~reportgen.limits.MAX_PROBLEMS`, then
    one entry counting the rest (including those :meth:`Run.problem` only counted)."""
    problems, unlisted = run.problems, getattr(run, "problems_unlisted", 0)
    if len(problems) <= MAX_PROBLEMS and not unlisted:
        return problems
    keep = problems[: MAX_PROBLEMS - 1]
    rest = len(problems) - len(keep) + unlisted
    return keep + [DataProblem("(run)", f"{rest} more data problems not listed")]


def _budgeted(name: str, df: pd.DataFrame, rows: int | None = None) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """``df`` as the metrics file keeps it, and what was cut (None: nothing). Budgets (reportgen/thresholds.py):

    * a per-operator or per-link table (name ending in ``ops`` or ``links``: one row per operation or per pair of
      ranks, which grows with the ranks times their peers) keeps :data:`~reportgen.thresholds.JSON_OP_ROWS` rows: the
      longest first when it has a time column (``elapse_ms``, ``time_ms``, ``total_ms``), else its first rows;
    * a per-(rank, step) table keeps whole steps, every rank of each, up to
      :data:`~reportgen.thresholds.JSON_STEP_ROWS` rows: the first steps in its order (at least one step);
    * any other table but a per-rank one keeps its first :data:`~reportgen.thresholds.JSON_OP_ROWS` rows;
    * ``rows``, when given, is a smaller budget for any of these: its share of the file's (:func:`plan_cuts`);
    * any table keeps :data:`MAX_TABLE_ROWS` rows.

    Per-rank tables (one row per rank) are never cut below :data:`MAX_TABLE_ROWS`."""
    n = len(df)
    shared = rows is not None
    if name.endswith(("ops", "links")):
        limit = min(th.JSON_OP_ROWS, rows) if shared else th.JSON_OP_ROWS
        if n > limit:
            by = next((c for c in ("elapse_ms", "time_ms", "total_ms") if c in df.columns), None)
            kept = (df.sort_values(by, ascending=False, kind="stable") if by else df).iloc[:limit]
            return kept, {"rows": n, "left_out": n - len(kept),
                          "kept": f"the {len(kept):,} {'rows with the longest ' + by if by else 'first rows'} "
                                  f"({_budget_words(limit, shared, 'operator' if name.endswith('ops') else 'link')})"}
    elif {"rank", "step"} <= set(df.columns):
        limit = min(th.JSON_STEP_ROWS, rows) if shared else th.JSON_STEP_ROWS
        if n > limit:
            steps = list(dict.fromkeys(df["step"].tolist()))
            per_step = df.groupby("step", sort=False).size()
            kept_steps, total = [], 0
            for st in steps:
                if kept_steps and total + per_step[st] > limit:
                    break
                kept_steps.append(st)
                total += per_step[st]
            kept = df[df["step"].isin(kept_steps)]
            return kept, {"rows": n, "left_out": n - len(kept),
                          "kept": f"every rank in {len(kept_steps)} of {len(steps)} steps ({kept_steps[0]}"
                                  f"{'' if len(kept_steps) == 1 else '-' + str(kept_steps[-1])}; "
                                  f"{_budget_words(limit, shared, '(rank, step)')})"}
    elif not _per_rank(df):  # any other table (one row per group, per (group, rank) ...): whatever the input claims
        limit = min(th.JSON_OP_ROWS, rows) if shared else th.JSON_OP_ROWS
        if n > limit:  # a pg_config of 10^6 groups made a 43 MB domains table (issue 29)
            return df.iloc[:limit], {"rows": n, "left_out": n - limit,
                                     "kept": f"the first {limit:,} rows ({_budget_words(limit, shared, 'such')})"}
    if n > MAX_TABLE_ROWS:
        return df.iloc[:MAX_TABLE_ROWS], {"rows": n, "left_out": n - MAX_TABLE_ROWS}
    return df, None


def _per_rank(df: pd.DataFrame) -> bool:
    """One row per rank (a ``rank`` column without repeats, no ``step``): never cut below MAX_TABLE_ROWS."""
    return "rank" in df.columns and "step" not in df.columns and bool(df["rank"].is_unique)


def _budget_words(limit: int, shared: bool, kind: str) -> str:
    if shared:
        return (f"budget for this table: {limit:,} rows, its share of the file's {th.JSON_BYTES / 1e6:.0f} MB that "
                f"the tables other than the per-rank ones split")
    return f"budget per {'table of this kind' if kind == 'such' else kind + ' table'}: {limit:,} rows"


def _cuttable(name: str, df: pd.DataFrame) -> bool:
    """Every table but a per-rank one shares what the file leaves (before: only per-operator, per-link and
    per-(rank, step) tables, so a table of 10^6 process groups was written whole)."""
    return name.endswith(("ops", "links")) or {"rank", "step"} <= set(df.columns) or not _per_rank(df)


#: rows :func:`_row_chars` measures: a table of at most this many is measured whole
ROW_SAMPLE = 200


def _row_chars(df: pd.DataFrame, made: dict | None = None) -> float:
    """Characters one row of ``df`` takes in the compact file: the mean over up to :data:`ROW_SAMPLE` rows spread
    over it. A table of at most that many rows is measured whole: its :func:`table_rows` go into ``made`` (id(df) ->
    (df, rows), :attr:`Document.rows`), the rows the metrics file writes (most tables of a small run: made once,
    not twice)."""
    if not len(df):
        return 0.0
    if made is not None and len(df) <= ROW_SAMPLE:  # the sample below would be every row, in order
        rows = table_rows(df)
        made[id(df)] = (df, rows)
    else:
        rows = table_rows(df.iloc[::max(1, len(df) // ROW_SAMPLE)].iloc[:ROW_SAMPLE])
    text = json.dumps(rows, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return 1.05 * len(text) / len(rows)  # rows vary in size: a margin over the sample's mean


#: characters of the metrics file outside its tables (run, summary, facts other than per-rank rows, metrics,
#: findings, data problems): an allowance, above what a 4096-rank run takes
_JSON_OTHER_CHARS = 1_000_000


def _plan(run: Run | None, outcomes: list[SectionOutcome], budget: float,
          made: dict | None = None) -> tuple[dict, float, bool]:
    """(the plan for ``budget`` bytes, the estimate of the file outside its tables, whether anything was cut);
    ``made``: the rows of the tables measured whole (:func:`_row_chars`)."""
    plan: dict[tuple[str, str], tuple[pd.DataFrame, Any]] = {}
    other = float(_JSON_OTHER_CHARS)
    F = facts.of(run) if run is not None else None
    if F is not None:
        other += _row_chars(F.per_rank) * len(F.per_rank)
    fixed = other
    cut_keys, sizes, widths = [], [], []
    for o in outcomes:
        if o.status != "ok" or o.analysis is None:
            continue
        for name, df in o.analysis.tables.items():
            kept, cut = _budgeted(name, df)
            plan[(o.id, name)] = (kept, cut)
            width = _row_chars(kept, made)
            if _cuttable(name, df):
                cut_keys.append((o.id, name))
                sizes.append(width * len(kept))
                widths.append(width)
            else:
                fixed += width * len(kept)
    any_cut = any(c is not None for _, c in plan.values())
    if sum(sizes) <= budget - fixed:
        return plan, other, any_cut
    for key, size, width, share in zip(cut_keys, sizes, widths, th.fair_shares(sizes, max(0.0, budget - fixed))):
        if share < size * (1 - 1e-9):  # not a whole share (float rounding aside)
            o = next(o for o in outcomes if o.id == key[0])
            plan[key] = _budgeted(key[1], o.analysis.tables[key[1]], rows=max(1, int(share // width)))
    return plan, other, True


def _tables_bytes(plan: dict, made: dict | None = None) -> int:
    """Bytes the plan's tables take in the compact file (UTF-8), measured; ``made``: the rows made so far, which
    those made here join (the metrics file writes them: made once, not twice)."""
    total = 0
    for kept, _ in plan.values():
        hit = made.get(id(kept)) if made is not None else None
        rows = hit[1] if hit is not None and hit[0] is kept else table_rows(kept)
        if made is not None:
            made[id(kept)] = (kept, rows)
        total += len(json.dumps(rows, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8"))
    return total


def plan_cuts(run: Run | None, outcomes: list[SectionOutcome],
              made: dict | None = None) -> dict[tuple[str, str], tuple[pd.DataFrame, Any]]:
    """Every table of ``outcomes`` as the metrics file keeps it: (section id, table name) -> (rows kept, cut or
    None). Each table first gets its own budget (:func:`_budgeted`); then the per-operator, per-link and
    per-(rank, step) tables split what the other tables, the facts and an allowance leave of
    :data:`~reportgen.thresholds.JSON_BYTES` (:func:`~reportgen.thresholds.fair_shares` of their sizes, estimated
    from a sample of rows), so the file stays within it at any rank and step count while per-rank tables are
    whole. When anything is cut, the kept tables are measured and, if the estimate was short, planned once more
    with the budget reduced by the overshoot. The page states the same cuts (:func:`cuts_text`). Made once per
    report, by :func:`build`: the page and the metrics file read the same plan from the :class:`Document`.
    ``made``: the rows of the kept tables measured whole (:attr:`Document.rows`)."""
    plan, other, any_cut = _plan(run, outcomes, th.JSON_BYTES, made)
    if any_cut:
        over = _tables_bytes(plan, made) + other - th.JSON_BYTES
        if over > 0:
            plan, _, _ = _plan(run, outcomes, th.JSON_BYTES - 1.1 * over, made)
            if made is not None:  # the rows of frames the second plan no longer keeps: not held
                kept = {id(k) for k, _ in plan.values()}
                for key in [k for k in made if k not in kept]:
                    del made[key]
    return plan


def cuts_text(outcome: SectionOutcome, plan: dict | None = None) -> list[str]:
    """What the metrics file leaves out of ``outcome``'s tables, in words, for the page (its section's notes).
    ``plan``: :func:`plan_cuts` of the run (without it, each table's own budget only)."""
    if outcome.status != "ok" or outcome.analysis is None:
        return []
    out = []
    for name, df in outcome.analysis.tables.items():
        _, cut = plan[(outcome.id, name)] if plan is not None else _budgeted(name, df)
        if cut:
            out.append(f"The metrics JSON (--json) keeps {cut.get('kept') or f'the first {MAX_TABLE_ROWS:,} rows'} "
                       f"of the {cut['rows']:,} rows of its table '{name}'; {cut['left_out']:,} rows are left out "
                       f"(listed under tables_left_out).")
    return out


def ordered_findings(outcomes: list[SectionOutcome]) -> list[Finding]:
    """Every section's findings in the report's one order: :func:`~reportgen.sections.advisor.order_key` of the
    finding as the metrics file writes it (severity, then the share of the step at stake), sections' order
    within a tie."""
    from .sections.advisor import order_key

    found = [f for o in outcomes if o.view is not None for f in o.view.findings]
    keys = [order_key(clean(f.as_dict())) for f in found]
    return [found[i] for i in sorted(range(len(found)), key=keys.__getitem__)]


@dataclass
class Document:
    """One report (module doc). ``plan``: (section id, table name) -> (rows kept, cut or None);
    ``cut_notes``: per section id, the cuts of ``plan`` in words for the page; ``rows``: the :func:`table_rows`
    already made of kept tables while planning (id(frame) -> (frame, rows); :meth:`table_rows`)."""

    run: Run
    outcomes: list[SectionOutcome]
    title: str
    run_block: dict[str, Any]
    facts: dict[str, Any] | None
    summary: dict[str, Any]
    problems: list[DataProblem]
    plan: dict[tuple[str, str], tuple[pd.DataFrame, Any]]
    findings: list[Finding]
    cut_notes: dict[str, list[str]] = field(default_factory=dict)
    rows: dict[int, tuple[pd.DataFrame, list]] = field(default_factory=dict, repr=False)

    def table_rows(self, df: pd.DataFrame) -> list[dict[str, Any]]:
        """:func:`~reportgen.jsonsafe.table_rows` of ``df``: the rows the plan made of this very frame when it
        measured it whole, else made now. The list is shared: written, never changed."""
        hit = self.rows.get(id(df))
        return hit[1] if hit is not None and hit[0] is df else table_rows(df)


def build(run: Run, outcomes: list[SectionOutcome], title: str | None = None) -> Document:
    """The :class:`Document` of ``run`` and its section outcomes (module doc)."""
    made: dict = {}
    plan = plan_cuts(run, outcomes, made)
    return Document(run=run, outcomes=list(outcomes), title=title or f"reportgen — {run.name}",
                    run_block=run_block(run), facts=facts_block(run), summary=summary(run, outcomes),
                    problems=bounded_problems(run), plan=plan, findings=ordered_findings(outcomes),
                    cut_notes={o.id: cuts_text(o, plan) for o in outcomes}, rows=made)
