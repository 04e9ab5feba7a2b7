"""Diagnosis: who waits for whom, the critical path of a step, and the causes the report leads with.

Reads the run's diagnosis (reportgen/diagnosis.py: computed once from the facts layer's per-call entry times,
the step facts and the canonical timeline); this section only turns it into findings, charts and tables:

* one finding per cause (rank compute / input pipeline / host launches, point-to-point link, pipeline stage,
  communication not overlapped), with its time at stake per step, its confidence (share of the steps in which its
  test held) and its severity (time at stake x confidence, reportgen/diagnosis.py); the other sections' findings
  that are its symptoms are listed under it by the advisor (``advisor.merge``);
* the "who waits for whom" matrix: waiting rank x the rank it waited for, mean ms per step;
* the critical path of the median step across ranks: whose own work, and which transfers, set the step's end;
* per rank: compute busy time, operations launched, input wait, held time (how much later its calls started
  because of it alone), waited time, own work on the critical path.
"""

from __future__ import annotations

from .. import labels as L

import pandas as pd

from .. import charts as vl
from .. import diagnosis as dg
from .. import facts, fmt, palette
from ..charts import band, fit, sequential, tip, to_spec
from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, Column, EvidenceView, Figure, Finding, Table, View

ID = "waits"
TITLE = "Diagnosis: who waits for whom"
NEEDS = (("step_time", "step_trace"),)

MATRIX_FIGURE = "waits-matrix"
PATH_FIGURE = "waits-path"
#: ranks a side of the matrix draws at most (the ranks waited for most, and the ranks waiting most)
MATRIX_MAX_SIDE = 48

#: finding id, suggestion and evidence view of each kind of cause
KINDS = {
    "compute": ("slow_rank_compute", "Compare its operators with a peer's in the rank comparison (uneven work, a "
                "slower device or core, extra work on this rank only).", MATRIX_FIGURE),
    "dataloader": ("slow_input_pipeline", "Load input in parallel on this rank (more DataLoader workers, "
                   "prefetching, pinned memory) or fix its storage / preprocessing.", PATH_FIGURE),
    "launch": ("launch_bound_rank", "Fewer, larger operations on this rank: fuse small ops (torch.compile, fused "
               "kernels), remove per-element Python loops, batch small tensors.", PATH_FIGURE),
    "link": ("slow_p2p_link", "Look at what the sending rank does before its send (a stall, extra work) and at the "
             "link itself (placement across hosts, the transport).", MATRIX_FIGURE),
    "late": ("rank_arrives_late", "Open this rank in the execution drill-down: what it does before the collectives it "
             "enters last (a slower device, extra work, host stalls).", PATH_FIGURE),
    "stage": ("heavy_pipeline_stage", "Rebalance the layers between pipeline stages (fewer layers on the heavy "
              "stage), or use more micro-batches / an interleaved schedule.", PATH_FIGURE),
    "overlap": ("comm_not_overlapped", "Overlap gradient communication with backward (DDP buckets / async "
                "all-reduce per bucket, Megatron overlap_grad_reduce) instead of reducing after it.", PATH_FIGURE),
}


def evidence_view(c: dg.Cause, figure: str, drawn: dict[str, set[int]], wait_column: str | None) -> EvidenceView:
    """The view that proves a cause, drawing every rank it names (issue 28 #1): an input-bound rank opens the
    per-rank heatmap of the run's input wait (the quantity its sentence quotes); a cause whose chart is the critical
    path opens it when the path runs through every rank named, else who-waits-for-whom when that draws them, else
    the per-rank step heatmap (every rank). ``drawn``: figure -> the ranks it draws."""
    named = {int(r) for r in c.ranks}
    if c.kind == "dataloader" and wait_column:
        from .trajectory import metric_view
        return metric_view(wait_column)
    for fig in (figure, MATRIX_FIGURE):
        if named <= drawn.get(fig, set()):
            return EvidenceView(fig)
    return EvidenceView("trajectory-heatmap")


def finding(c: dg.Cause, view: EvidenceView | None = None) -> Finding:
    fid, suggestion, figure = KINDS.get(c.kind, (f"cause_{c.kind}", "", MATRIX_FIGURE))
    ev = {"metric": "stake_ms", "value": c.time_ms, "confidence_ratio": c.confidence,
          "steps_tested": c.steps, "share_of_step_ratio": c.share, "cause": c.as_dict()}
    ev.update({k: v for k, v in c.evidence.items() if k in ("wait_ms", "exposed_ms", "host")})
    if "peer_median" in c.evidence:  # in the unit of the feature compared
        ev["peer_median_ops" if c.kind == "launch" else "peer_median_ms"] = c.evidence["peer_median"]
    if c.stage is not None:
        ev["stage"] = c.stage
    held = round(c.confidence * c.steps)
    f = Finding(fid, c.severity, ID, dg.describe(c).rstrip(".") + f", in {held} of the {c.steps} steps.",
                ranks=list(c.ranks), links=[list(c.link)] if c.link else [], evidence=ev, suggestion=suggestion,
                view=view or EvidenceView(figure))
    f.share_of_step = c.share
    f.cause = c.as_dict()
    f.confidence = c.confidence
    return f


def analyze(run: Run, options=None) -> Analysis:
    d = dg.diagnose(run, options)
    if d is None:
        raise Unavailable("The run has no step times, so no step can be diagnosed.")
    judged = not d.waits.empty and d.clocks.get("comparable") is not False
    if d.waits.empty and d.path is None:
        raise Unavailable("The run has no entry times of collective or point-to-point operations (comm_ops with start "
                          "times and process groups), so who waited for whom cannot be told.")
    per = d.features.groupby("rank", as_index=False)[["busy_ms", "ops", "input_ms", "held_ms", "waited_ms"]].mean()
    per["stage"] = per["rank"].map(d.features.groupby("rank")["stage"].first())
    if d.path is not None:
        own = d.path.groupby("rank")["own_ms"].sum() / max(1, d.steps)
        per["path_own_ms"] = per["rank"].map(own).fillna(0.0)
    tables = {"ranks": per, "matrix": d.matrix}
    if d.segments is not None:
        tables["path"] = d.segments
    metrics = {"judged": bool(judged), "timeline": bool(d.features["busy_ms"].notna().any()), "causes": [c.as_dict() for c in d.causes], "steps": d.steps,
               "step_ms": d.step_ms, "clocks": d.clocks,
               "thresholds": {"noise_k": dg.NOISE_K, "min_effect_share": dg.MIN_EFFECT_SHARE,
                              "min_step_share": dg.MIN_STEP_SHARE, "launch_ratio": dg.LAUNCH_RATIO,
                              "stage_ratio": dg.STAGE_RATIO, "high_score": dg.HIGH_SCORE,
                              "medium_score": dg.MEDIUM_SCORE}}
    named = {int(r) for c in d.causes for r in c.ranks}
    drawn = {MATRIX_FIGURE: _matrix_drawn(d.matrix, named),
             PATH_FIGURE: {int(r) for r in d.segments["rank"]} if d.segments is not None else set()}
    W = facts.input_wait(run)
    wait_col = W.column if W is not None else None
    causes = [finding(c, evidence_view(c, KINDS.get(c.kind, ("", "", MATRIX_FIGURE))[2], drawn, wait_col))
              for c in d.causes]
    return Analysis(metrics=metrics, tables=tables, findings=causes,
                    data={"notes": list(d.notes)})


def _matrix_ranks(m: pd.DataFrame, named: set[int]) -> tuple[list[int], list[int]]:
    """The columns (ranks waited for) and rows (waiting ranks) the matrix draws: the MATRIX_MAX_SIDE waited for most
    and waiting most, plus every rank a finding names that has a cell (a cause is never cut from its proof)."""
    side = []
    for key in ("cause", "waiter"):
        tot = m.groupby(key)["wait_ms"].sum()
        keep = set(tot.nlargest(MATRIX_MAX_SIDE).index) | (named & set(tot.index))
        side.append(sorted(int(r) for r in keep))
    return side[0], side[1]


def _matrix_drawn(m: pd.DataFrame, named: set[int]) -> set[int]:
    """Ranks with a drawn cell of the matrix (either side)."""
    if m is None or m.empty:
        return set()
    cols, rows = _matrix_ranks(m, named)
    x = m[m["cause"].isin(cols) & m["waiter"].isin(rows)]
    return {int(r) for r in x["cause"]} | {int(r) for r in x["waiter"]}


def _matrix_figure(m: pd.DataFrame, step_ms: float, named: set[int] = frozenset()) -> Figure:
    top_c, top_w = _matrix_ranks(m, set(named))
    # the rank waited for is the link's source, the waiting rank its destination: a finding's focus_links ("3>7")
    # and focus_ranks outline its cells (charts.focusable)
    x = m[m["cause"].isin(top_c) & m["waiter"].isin(top_w)].rename(columns={"cause": "src_rank", "waiter": "dst_rank"})
    x = x.assign(share=x["wait_ms"] / step_ms if step_ms and step_ms > 0 else float("nan"))
    side = max(1, len(top_c), len(top_w))
    cell = band(side, 40, 6, 560)
    chart = vl.Chart(x).mark_rect().encode(
        x=vl.X("src_rank:O", title="Rank waited for", axis=vl.Axis(labelAngle=0, labelOverlap=True)),
        y=vl.Y("dst_rank:O", title="Waiting rank", axis=vl.Axis(labelOverlap=True)),
        # one fixed scale, the share of the step (0 to 100 %): a quiet run looks quiet, whatever its largest cell
        color=vl.Color("share:Q", scale=vl.Scale(scheme=palette.SEQUENTIAL, domain=[0, 1], clamp=True),
                       legend=vl.Legend(title="waited (sum) / step", format=fmt.D3_PCT)),
        tooltip=[vl.Tooltip("dst_rank:O", title="Waiting rank"), vl.Tooltip("src_rank:O", title="Waited for"),
                 tip("wait_ms", "Wait per step", "ms"), tip("share", "Of the step", kind="ratio")],
    ).properties(width={"step": cell}, height={"step": cell})
    cut = "" if side <= MATRIX_MAX_SIDE and len(m["cause"].unique()) <= MATRIX_MAX_SIDE and \
        len(m["waiter"].unique()) <= MATRIX_MAX_SIDE else \
        f" The {MATRIX_MAX_SIDE} ranks waited for most and waiting most are drawn, and every rank a finding names."
    return Figure(MATRIX_FIGURE, "Who waits for whom", to_spec(chart),
                  caption="Each cell: the time the row's rank waited per step (mean over the steps in scope, as a share "
                          "of the median step on one fixed scale) for the "
                          "column's rank, at the collectives the column's rank entered last and the point-to-point "
                          "transfers it entered after its peer. A column that lights up is a rank the others wait "
                          "for. A cell sums the waits of every call, and calls on several streams or micro-batches "
                          "wait at the same time, so a cell can pass 100 % of the step (drawn at the top colour; "
                          "the tooltip has its time): it says who waits for whom, not how much of the step is lost; "
                          "a finding's time at stake is that." + cut,
                  alt="Heatmap of waiting rank against the rank waited for")


def _path_figure(seg: pd.DataFrame) -> Figure:
    s = seg.copy()
    t0 = float(s["start_ms"].min())
    s["from_ms"] = s["start_ms"] - t0
    s["to_ms"] = s["end_ms"] - t0
    s["dur_ms"] = s["end_ms"] - s["start_ms"]
    s["part"] = s["kind"].map({"own": "own work of the rank", "transfer": "transfer (every rank in)"})
    step = int(s["step"].iloc[0])
    ranks = sorted(int(r) for r in s["rank"].unique())
    chart = vl.Chart(s).mark_bar(height={"band": 0.7}).encode(
        x=vl.X("from_ms:Q", title=f"ms from the start of step {step}"), x2="to_ms:Q",
        y=vl.Y("rank:O", title="Rank", sort=ranks),
        color=vl.Color("part:N", title=None, scale=vl.Scale(domain=["own work of the rank", "transfer (every rank in)"],
                                                             range=[palette.ROLE["compute"], palette.ROLE["comm"]])),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("part:N", title="Part"),
                 tip("dur_ms", "Duration", "ms"), tip("from_ms", "From", "ms")])
    return Figure(PATH_FIGURE, f"Critical path of step {step} (the median step)", to_spec(fit(chart, {"step": 22})),
                  caption="From the call that ends the step back to its start: at each collective or transfer, the "
                          "rank that entered last, and that rank's own work since its previous call. The ranks whose "
                          "bars are long set the step's length; shortening anything else does not shorten the step.",
                  alt="Bars of the critical path across ranks over the median step")


def present(a: Analysis) -> View:
    t = a.tables
    figures = []
    if not t["matrix"].empty:
        # every rank its own causes name (as evidence_view judged in analyze) and those any finding of the page
        # names (charts.named_ranks)
        named = {int(r) for f in a.findings for r in f.ranks} | set(vl.named_ranks(a))
        figures.append(_matrix_figure(t["matrix"], a.metrics.get("step_ms"), named))
    if "path" in t and not t["path"].empty:
        figures.append(_path_figure(t["path"]))
    cols = [Column("rank", "Rank", "rank"), Column("stage", "Stage", "int"),
            Column("busy_ms", "Compute busy", "ms"), Column("ops", "Operations launched", "float"),
            Column("input_ms", "Input wait", "ms"), Column("held_ms", "Held its calls (sum over calls)", "ms"),
            Column("waited_ms", L.label("waited_ms"), "ms")]
    if "path_own_ms" in t["ranks"]:
        cols.append(Column("path_own_ms", "Own work on the critical path", "ms"))
    tables = [Table.from_frame("waits-ranks", "Per rank, mean per step", t["ranks"], cols,
                               caption="Compute busy: the union of the rank's innermost compute operations (an "
                                       "operation that wraps a whole collective is waiting, not computing). Held its "
                                       "calls: at the calls it entered last, the time between the next-to-last "
                                       "entry and its own. Waited: its waits at collectives and transfers. Both are "
                                       "sums over calls, and calls on several threads overlap (asynchronous "
                                       "gradient all-reduce runs beside backward), so they can exceed the step: "
                                       "the critical path says what the step lost.")]
    m = a.metrics
    if m["causes"]:
        summary = (f"{len(m['causes'])} cause{'s' if len(m['causes']) != 1 else ''} beyond the run's own jitter; "
                   "the findings at the top lead with them and list what they cause elsewhere.")
    elif m["judged"]:
        summary = ("No rank, host, link, stage or input pipeline holds the others back beyond the run's own jitter: "
                   "the waiting below is spread over the ranks, not caused by one place.")
    else:
        summary = "Who waited for whom is shown, but not judged: " + " ".join(a.data.get("notes") or [])
    return View(summary=summary, figures=figures, tables=tables, notes=list(a.data.get("notes") or []))
