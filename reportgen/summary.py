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
    return clean(out)
