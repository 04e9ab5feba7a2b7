"""The run in a few numbers (the report document's ``summary``: the page's first paragraph, the metrics file's
``summary`` block, and the advisor's step time and computing share)."""

from __future__ import annotations

from typing import Any

from . import facts
from .jsonsafe import clean
from .model import Run
from .report import SectionOutcome


def summary(run: Run, outcomes: list[SectionOutcome]) -> dict[str, Any]:
    """The run in a few numbers: layout, step time median and spread, and the shares of the step spent
    computing, in exposed (not overlapped) communication and free — the overlap section's run-wide shares
    (:func:`reportgen.sections.overlap.comm_shares`), copied, never re-derived."""
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
        # THE run-wide shares of the step, as the overlap section computes them (overlap.comm_shares): one number
        # per quantity on the page
        m = ov.analysis.metrics
        parts = {"computing_share_ratio": m.get("computing_share_ratio"),
                 "exposed_comm_share_ratio": m.get("comm_share_ratio"), "free_share_ratio": m.get("free_share_ratio")}
        pr = ov.analysis.tables.get("per_rank")
        if pr is not None and not ("computing_ms" in pr and pr["computing_ms"].notna().any()):
            # a breakdown without computing time on its own (MindInsight's): computation including idle time
            parts["computing_share_ratio"] = m.get("computation_incl_free_share_ratio")
            out["computing_includes_free"] = True
        for key, v in parts.items():
            if v is not None and v == v:
                out[key] = float(v)
    return clean(out)
