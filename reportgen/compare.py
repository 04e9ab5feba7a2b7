"""CI use: headline metrics, comparison with a baseline run, and ``--fail-on`` conditions.

Headline metrics are read from the metrics document (the ``--json`` contract), so a baseline may be
another run directory or a metrics file written earlier.
"""

from __future__ import annotations

import json
import math
import operator
import re
from pathlib import Path
from typing import Any

from . import fmt
from .errors import InputError

#: headline name -> (section, metric key); the names --fail-on accepts
HEADLINE = {
    "step_ms.median": ("trajectory", "step_ms_median"),
    "step_ms.mean": ("trajectory", "step_ms_mean"),
    "step_ms.max": ("trajectory", "step_ms_max"),
    "comm_share": ("overlap", "comm_share_ratio"),
    "comm_op_ms": ("communication", "comm_op_ms_mean"),
    "comm_busy_ms": ("communication", "comm_busy_ms_mean"),
    "wait_ms": ("communication", "wait_ms_mean"),
    "peak_memory_ratio": ("memory", "peak_ratio_max"),
    "flops_total": ("flops", "flops_total"),
}
SEVERITY = {"low": 1, "medium": 2, "high": 3}
_OPS = {">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
        "<": operator.lt}


def headline(doc: dict) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for name, (sec, key) in HEADLINE.items():
        block = doc.get("sections", {}).get(sec, {})
        value = block.get("metrics", {}).get(key) if block.get("status") == "ok" else None
        out[name] = float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None
    for level in SEVERITY:
        out[f"findings.{level}"] = float(sum(1 for f in doc.get("findings", []) if f.get("severity") == level))
    return out


def _per_rank_step_ms(doc: dict) -> dict[int, float]:
    block = doc.get("sections", {}).get("trajectory", {})
    rows = block.get("tables", {}).get("per_rank", []) if block.get("status") == "ok" else []
    return {int(r["rank"]): float(r["step_ms"]) for r in rows if isinstance(r.get("step_ms"), (int, float))}


def load_baseline(path: str, build_metrics) -> dict:
    """A metrics document from a ``--json`` file, or built from a run directory with ``build_metrics(path)``."""
    p = Path(path)
    if p.is_file():
        try:
            doc = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            raise InputError(p, f"baseline is not a readable metrics JSON ({exc})") from None
        if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("reportgen.metrics/"):
            raise InputError(p, "baseline JSON is not a reportgen metrics file (schema reportgen.metrics/1)")
        return doc
    if p.is_dir():
        return build_metrics(str(p))
    raise InputError(p, "baseline: no such file or directory")


def comparison(doc: dict, base: dict, source: str) -> dict[str, Any]:
    """Deltas of every headline metric and of per-rank step time (delta_ratio = value / baseline - 1), and the
    operator-level diff (``ops``, :func:`reportgen.opdiff.diff`) when both documents have op statistics."""
    now, then = headline(doc), headline(base)
    rows = []
    for name in now:
        v, b = now[name], then.get(name)
        delta = v - b if v is not None and b is not None else None
        ratio = (v / b - 1) if v is not None and b not in (None, 0) else None
        kind = fmt.metric_kind(HEADLINE[name][1]) if name in HEADLINE else "int"  # findings.*: counts
        rows.append({"metric": name, "value": v, "baseline": b, "delta": delta, "delta_ratio": ratio,
                     "kind": kind or "float"})
    ranks_now, ranks_then = _per_rank_step_ms(doc), _per_rank_step_ms(base)
    per_rank = [{"rank": r, "step_ms": ranks_now[r], "baseline_step_ms": ranks_then[r],
                 "delta_ratio": ranks_now[r] / ranks_then[r] - 1 if ranks_then[r] else None}
                for r in sorted(set(ranks_now) & set(ranks_then))]
    out = {"source": source, "baseline_run": base.get("run", {}).get("name"), "headline": rows,
           "per_rank_step_ms": per_rank}
    from . import opdiff

    ops = opdiff.diff(doc, base)  # operator-level diff (issue 27 point 5): both sides from their metrics documents
    if ops is not None:
        out["ops"] = ops
    return out


def _finite(expr: str, text: str) -> float:
    """The number ``text`` of a --fail-on condition; a usage error unless it is a finite number."""
    try:
        number = float(text)
    except ValueError:
        raise InputError(None, f"--fail-on {expr!r}: {text!r} is not a number or [factor*]baseline") from None
    if not math.isfinite(number):
        raise InputError(None, f"--fail-on {expr!r}: {text!r} is not a finite number")
    return number


def _at_word(text: str, limit: int = 400) -> str:
    """``text`` whole when it fits ``limit`` characters, else cut at the last word boundary before it with "…"
    (a reason cut mid-word at 160 characters, "...groups' ope", said nothing: issue 31)."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0].rstrip(",;:")
    return (cut if len(cut) > limit // 2 else text[:limit]) + "…"


_EXPR = re.compile(r"^\s*([A-Za-z_.]+)\s*(>=|<=|==|!=|>|<)\s*(.+?)\s*$")


def check_fail_on(expr: str, doc: dict, base: dict | None) -> str | None:
    """Evaluate one ``--fail-on`` condition; the reason when it holds, else None.

    Forms: ``finding.severity>=high`` (any finding at or above a level); ``NAME OP NUMBER``;
    ``NAME OP [NUMBER*]baseline`` (needs --baseline). NAME is a key of :data:`HEADLINE` or
    findings.high / findings.medium / findings.low (counts).
    """
    m = _EXPR.match(expr)
    if not m:
        raise InputError(None, f"--fail-on {expr!r}: expected NAME OP VALUE, e.g. step_ms.median>1.05*baseline")
    name, op, rhs = m.groups()
    cmp = _OPS[op]
    if name == "finding.severity":
        level = SEVERITY.get(rhs.lower())
        if level is None:
            raise InputError(None, f"--fail-on {expr!r}: severity is one of high, medium, low")
        hits = [f for f in doc.get("findings", []) if cmp(SEVERITY.get(f.get("severity"), 0), level)]
        # the findings in the report's order: the first is the one the report leads with (the cause)
        return f"{expr}: {len(hits)} finding(s), first: {_at_word(hits[0]['message'])}" if hits else None
    values = headline(doc)
    if name not in values:
        raise InputError(None, f"--fail-on {expr!r}: unknown metric {name!r} (known: {', '.join(values)})")
    value = values[name]
    rm = re.fullmatch(r"(?:(.+?)\s*\*\s*)?baseline", rhs)
    number = _finite(expr, (rm.group(1) or "1") if rm else rhs)
    if rm:
        if base is None:
            raise InputError(None, f"--fail-on {expr!r}: compares with the baseline, give --baseline")
        b = headline(base).get(name)
        if b is None:
            return None
        target = number * b
    else:
        target = number
    if value is None or math.isnan(value):
        return None
    return f"{expr}: {name} = {value:.6g} vs {target:.6g}" if cmp(value, target) else None
