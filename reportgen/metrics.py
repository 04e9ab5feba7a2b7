"""The ``--json`` metrics file (contract: ../shared/docs/metrics-json.md, schema ``reportgen.metrics/1``).

Every number the HTML shows comes from the same Analysis objects serialised here.

Size budget (whatever the input says; reportgen/thresholds.py, "Page budget"): per-operator tables keep
``JSON_OP_ROWS`` rows (the longest), per-(rank, step) tables whole steps up to ``JSON_STEP_ROWS`` rows, any table
:data:`MAX_TABLE_ROWS` rows; then the per-operator and per-(rank, step) tables share what the rest of the file
leaves of ``JSON_BYTES`` (:func:`plan_cuts`); a section's ``tables_left_out`` says how many rows of which table were
left out and which were kept. Per-rank tables are whole. Every string is cut to
:data:`reportgen.limits.MAX_NAME_CHARS` with the cut stated. A file with more than ``JSON_INDENT_ROWS`` table rows,
or larger than ``JSON_BYTES`` indented, is written without indentation. A 1024-rank synth run's largest table has 245,760 rows.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

from . import __version__, facts, fmt, limits
from . import thresholds as th
from .model import Run
from .report import SectionOutcome

SCHEMA = "reportgen.metrics/1"
#: rows of one table in the metrics file (4x the largest table of a 1024-rank synth run)
MAX_TABLE_ROWS = 1_000_000


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf -> null, numpy scalars -> Python, keys -> str; floats without arithmetic noise
    (fmt.clean: the shortest repr that round-trips, 0.04222999999999999 -> 0.04223)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return limits.cap_text(value) if len(value) > limits.MAX_NAME_CHARS else value
    if isinstance(value, float):
        return None if (math.isnan(value) or math.isinf(value)) else fmt.clean(float(value))
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [_clean(v) for v in value]
    if isinstance(value, pd.DataFrame):
        return table_rows(value)
    if value is pd.NA or value is pd.NaT:
        return None
    if hasattr(value, "item"):
        try:
            return _clean(value.item())
        except (ValueError, AttributeError):
            pass
    return str(value)


def table_rows(df: pd.DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    """A table as a list of row objects with JSON-safe values (the first ``limit`` rows when given)."""
    out = []
    cols = list(df.columns)
    if limit is not None and len(df) > limit:
        df = df.iloc[:limit]
    for row in df.itertuples(index=False, name=None):
        out.append({c: _clean(v) for c, v in zip(cols, row)})
    return out


def run_block(run: Run) -> dict[str, Any]:
    return _clean({
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
    })


def facts_block(run: Run) -> dict[str, Any] | None:
    """The run facts every section used (reportgen/facts.py): steps listed / in scope / warm-up, rank order."""
    F = facts.of(run)
    if F is None:
        return None
    return _clean({**F.as_dict(), "per_rank": table_rows(F.per_rank)})


def summary(run: Run, outcomes: list[SectionOutcome]) -> dict[str, Any]:
    """The run in a few numbers: layout, step time median and spread, and the shares of the step spent
    computing, in exposed (not overlapped) communication and free — means over ranks of the overlap
    section's per-rank table, each divided by that rank's step time."""
    by_id = {o.id: o for o in outcomes}
    out: dict[str, Any] = {"ranks": len(run.ranks), "hosts": len(set(run.hosts.values())) or None,
                           "mode": run.parallel.get("mode"), "stages": run.parallel.get("stages")}
    F = facts.of(run)
    if F is not None:
        pr = F.per_rank["step_ms"]
        out.update(steps=len(F.steps), steps_listed=len(F.steps_all), warmup_steps=list(F.warmup_steps),
                   step_ms_median=F.step_ms_median,
                   step_ms_spread_ratio=float((pr.max() - pr.min()) / F.step_ms_median) if F.step_ms_median > 0
                   else 0.0,
                   slowest_rank=F.slowest_rank, median_rank=F.median_rank, fastest_rank=F.fastest_rank)
    ov = by_id.get("overlap")
    if ov is not None and ov.status == "ok":
        pr = ov.analysis.tables["per_rank"]
        step = pr["step_ms"] if "step_ms" in pr else None
        if step is not None and (step > 0).all():
            comp = pr["computing_ms"] if pr["computing_ms"].notna().any() else pr.get("computation_incl_free_ms")
            parts = {"computing_share_ratio": comp, "exposed_comm_share_ratio": pr["comm_not_overlapped_ms"],
                     "free_share_ratio": pr["free_ms"] if pr["free_ms"].notna().any() else None}
            for key, col in parts.items():
                if col is not None and col.notna().any():  # one share guard (facts.share): never -100 % or 200 %
                    share = facts.share_mean(col, step, key.replace("_ratio", "").replace("_", " "), run)
                    if share == share:
                        out[key] = share
            if not pr["computing_ms"].notna().any():
                out["computing_includes_free"] = True
    return _clean(out)


def _budgeted(name: str, df: pd.DataFrame, rows: int | None = None) -> tuple[pd.DataFrame, dict[str, Any] | None]:
    """``df`` as the metrics file keeps it, and what was cut (None: nothing). Budgets (reportgen/thresholds.py):

    * a per-operator or per-link table (name ending in ``ops`` or ``links``: one row per operation or per pair of
      ranks, which grows with the ranks times their peers) keeps :data:`~reportgen.thresholds.JSON_OP_ROWS` rows: the
      longest first when it has a time column (``elapse_ms``, ``time_ms``, ``total_ms``), else its first rows;
    * a per-(rank, step) table keeps whole steps, every rank of each, up to
      :data:`~reportgen.thresholds.JSON_STEP_ROWS` rows: the first steps in its order (at least one step);
    * ``rows``, when given, is a smaller budget for either kind: its share of the file's (:func:`plan_cuts`);
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
    if n > MAX_TABLE_ROWS:
        return df.iloc[:MAX_TABLE_ROWS], {"rows": n, "left_out": n - MAX_TABLE_ROWS}
    return df, None


def _budget_words(limit: int, shared: bool, kind: str) -> str:
    if shared:
        return (f"budget for this table: {limit:,} rows, its share of the file's {th.JSON_BYTES / 1e6:.0f} MB that "
                f"the per-operator and per-(rank, step) tables split")
    return f"budget per {kind} table: {limit:,} rows"


def _cuttable(name: str, df: pd.DataFrame) -> bool:
    return name.endswith(("ops", "links")) or {"rank", "step"} <= set(df.columns)


def _row_chars(df: pd.DataFrame) -> float:
    """Characters one row of ``df`` takes in the compact file: the mean over up to 200 rows spread over it."""
    if not len(df):
        return 0.0
    sample = df.iloc[::max(1, len(df) // 200)].iloc[:200]
    text = json.dumps(table_rows(sample), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return 1.05 * len(text) / len(sample)  # rows vary in size: a margin over the sample's mean


#: characters of the metrics file outside its tables (run, summary, facts other than per-rank rows, metrics,
#: findings, data problems): an allowance, above what a 4096-rank run takes
_JSON_OTHER_CHARS = 1_000_000


def _plan(run: Run | None, outcomes: list[SectionOutcome], budget: float) -> tuple[dict, float, bool]:
    """(the plan for ``budget`` bytes, the estimate of the file outside its tables, whether anything was cut)."""
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
            width = _row_chars(kept)
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


def _tables_bytes(plan: dict) -> int:
    """Bytes the plan's tables take in the compact file (UTF-8), measured."""
    return sum(len(json.dumps(table_rows(kept), separators=(",", ":"), ensure_ascii=False, allow_nan=False)
                   .encode("utf-8")) for kept, _ in plan.values())


#: the last plan (its outcomes list and the plan): the page and the metrics file ask for the same one
_LAST_PLAN: list = [None, None]


def plan_cuts(run: Run | None, outcomes: list[SectionOutcome]) -> dict[tuple[str, str], tuple[pd.DataFrame, Any]]:
    """Every table of ``outcomes`` as the metrics file keeps it: (section id, table name) -> (rows kept, cut or
    None). Each table first gets its own budget (:func:`_budgeted`); then the per-operator, per-link and
    per-(rank, step) tables split what the other tables, the facts and an allowance leave of
    :data:`~reportgen.thresholds.JSON_BYTES` (:func:`~reportgen.thresholds.fair_shares` of their sizes, estimated
    from a sample of rows), so the file stays within it at any rank and step count while per-rank tables are
    whole. When anything is cut, the kept tables are measured and, if the estimate was short, planned once more
    with the budget reduced by the overshoot. The page states the same cuts (:func:`cuts_text`)."""
    if _LAST_PLAN[0] is outcomes:
        return _LAST_PLAN[1]
    plan, other, any_cut = _plan(run, outcomes, th.JSON_BYTES)
    if any_cut:
        over = _tables_bytes(plan) + other - th.JSON_BYTES
        if over > 0:
            plan, _, _ = _plan(run, outcomes, th.JSON_BYTES - 1.1 * over)
    _LAST_PLAN[0], _LAST_PLAN[1] = outcomes, plan
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


def build(run: Run, outcomes: list[SectionOutcome]) -> dict[str, Any]:
    sections: dict[str, Any] = {}
    findings: list[dict[str, Any]] = []
    plan = plan_cuts(run, outcomes)
    for o in outcomes:
        block: dict[str, Any] = {"status": o.status}
        if o.status == "ok" and o.analysis is not None:
            block["metrics"] = _clean(o.analysis.metrics)
            block["tables"], left = {}, {}
            for name in o.analysis.tables:
                kept, cut = plan[(o.id, name)]
                block["tables"][name] = table_rows(kept)
                if cut:
                    left[name] = cut
            if left:
                block["tables_left_out"] = left
        else:
            block["reason"] = o.reason
        sections[o.id] = block
        if o.view is not None:
            findings.extend(_clean(f.as_dict()) for f in o.view.findings)
    from .sections.advisor import order_key

    findings.sort(key=order_key)
    return {
        "schema": SCHEMA,
        "tool": {"name": "reportgen", "version": __version__},
        "run": run_block(run),
        "summary": summary(run, outcomes),
        "facts": facts_block(run),
        "data_problems": [p.as_dict() for p in limits.bounded_problems(run)],
        "sections": sections,
        "findings": findings,
    }


_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(doc: dict[str, Any]) -> str:
    """The file's text: UTF-8 JSON; a lone surrogate (possible in JSON input) is written as its ``\\uXXXX``
    escape, so the text can be encoded and the value reads back unchanged."""
    rows = sum(len(t) for b in (doc.get("sections") or {}).values() if isinstance(b, dict)
               for t in (b.get("tables") or {}).values())
    compact = rows > th.JSON_INDENT_ROWS  # indentation adds a third to a large file

    def text_of(compact: bool) -> str:
        return json.dumps(doc, indent=None if compact else 1, separators=(",", ":") if compact else None,
                          allow_nan=False, ensure_ascii=False) + "\n"

    text = text_of(compact)
    if not compact and len(text) > th.JSON_BYTES:  # plan_cuts sized the tables compact
        text = text_of(True)
    if _SURROGATE.search(text):
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text
