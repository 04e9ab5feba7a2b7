"""The ``--json`` metrics file (contract: ../shared/docs/metrics-json.md, schema ``reportgen.metrics/1``).

Every number the HTML shows comes from the same Analysis objects serialised here.

Size budget (whatever the input says): a table keeps at most :data:`MAX_TABLE_ROWS` rows (a section's
``tables_left_out`` says how many rows of which table were left out) and every string is cut to
:data:`reportgen.limits.MAX_NAME_CHARS` with the cut stated. A 1024-rank synth run's largest table has 245,760 rows.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import pandas as pd

from . import __version__, facts, fmt, limits
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
                if col is not None and col.notna().any():
                    out[key] = float((col / step).mean())
            if not pr["computing_ms"].notna().any():
                out["computing_includes_free"] = True
    return _clean(out)


def build(run: Run, outcomes: list[SectionOutcome]) -> dict[str, Any]:
    sections: dict[str, Any] = {}
    findings: list[dict[str, Any]] = []
    for o in outcomes:
        block: dict[str, Any] = {"status": o.status}
        if o.status == "ok" and o.analysis is not None:
            block["metrics"] = _clean(o.analysis.metrics)
            block["tables"] = {name: table_rows(df, MAX_TABLE_ROWS) for name, df in o.analysis.tables.items()}
            left = {name: {"rows": len(df), "left_out": len(df) - MAX_TABLE_ROWS}
                    for name, df in o.analysis.tables.items() if len(df) > MAX_TABLE_ROWS}
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
    text = json.dumps(doc, indent=1, allow_nan=False, ensure_ascii=False) + "\n"
    if _SURROGATE.search(text):
        text = _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
    return text
