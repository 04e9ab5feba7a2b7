"""The training pipeline panel of the strategy section (the seed's strategy perception, its figure 15:
research notes on the seed's cluster pages §3.6), from the run's point-to-point operations
(reportgen/p2p.py) for every family.

* Chains: the pp process groups (the ranks at one position of every stage), ordered by stage. The panel draws
  one step (the facts' median step) of at most :data:`CHAINS` chains: the chain of the slowest rank first.
* Per stage (every rank, the steps in scope, per rank and step): sends to a later stage (forward: activations),
  sends to an earlier stage (backward: gradients), receives, send+receive exchanges (``batch_isend_irecv``), the
  time in receives (receive and exchange operations, the pipeline's waiting), and the pairs matched.
* Micro-batches: forward sends per rank and step of the first stage, where the direction of the sends is known
  (one forward send per micro-batch in GPipe and 1F1B); not read from exchanges, which carry both directions.
"""

from __future__ import annotations

from .. import labels as L

import pandas as pd

from .. import charts as vl
from .. import fmt, limits, p2p, palette
from ..charts import to_spec
from ..report import Column, Control, Figure, Table, count
from ..timeline import per_value

#: the point-to-point operations (reportgen/p2p.py :func:`~reportgen.p2p.ops`): a trace's collectives, the
#: communication operations or the step trace's operators; the strategy section draws the panel only with one
NEEDS = (("collectives", "comm_ops", "step_ops"),)
#: pipeline chains the panel offers (the tables count every rank)
CHAINS = 8
#: characters of an operation name in the panel's tooltip
NAME_CHARS = 80


def analyze(run, groups: pd.DataFrame, stage_of, F) -> dict | None:
    """Tables and metrics of the panel, or None when the run has no point-to-point operations."""
    ops = p2p.ops(run)  # not kept on the run: ~60 MB at 1,024 ranks for ~0.4 s computed a second time
    if ops is None:
        return None
    steps = list(F.steps) if F is not None else sorted(s for s in ops["step"].unique() if s != -1)
    ops = ops[ops["step"].isin(steps)]
    if ops.empty:
        return None
    pairs = p2p.pairs(ops)
    # once per distinct rank (a call per operation: ~1 M calls at 1,024 ranks)
    ops = ops.assign(stage=per_value(ops["rank"], lambda r: r.map(stage_of)),
                     peer_stage=per_value(ops["peer_rank"], lambda r: r.map(stage_of)))
    if len({s for s in ops["stage"] if s is not None and s == s}) < 2:
        return None  # point-to-point operations without pipeline stages (a ring, a barrier): no pipeline to draw
    # the direction data flows: to a later stage = forward (activations), to an earlier one = backward (gradients);
    # a receive's data comes from its peer, a send's goes to it
    direction = pd.Series("unknown", index=ops.index)
    known = ops["stage"].notna() & ops["peer_stage"].notna()
    later = (ops["peer_stage"] > ops["stage"]).where(ops["kind"] != "recv", ops["peer_stage"] < ops["stage"])
    earlier = (ops["peer_stage"] < ops["stage"]).where(ops["kind"] != "recv", ops["peer_stage"] > ops["stage"])
    direction[known & later] = "forward"
    direction[known & earlier] = "backward"
    direction[known & (ops["peer_stage"] == ops["stage"])] = "same stage"
    direction[known & (ops["kind"] == "sendrecv") & (ops["peer_stage"] != ops["stage"])] = "both"
    ops = ops.assign(direction=direction, dur_ms=ops["end_ms"] - ops["start_ms"])
    n_steps = max(1, len(steps))
    rows = []
    for st, g in ops.groupby("stage"):
        ranks = g["rank"].nunique()
        per = ranks * n_steps
        send, recv, sr = g["kind"] == "send", g["kind"] == "recv", g["kind"] == "sendrecv"
        rows.append({"stage": int(st), "ranks": int(ranks),
                     "sends_forward": float((send & (g["direction"] == "forward")).sum()) / per,
                     "sends_backward": float((send & (g["direction"] == "backward")).sum()) / per,
                     "receives": float(recv.sum()) / per, "exchanges": float(sr.sum()) / per,
                     "receive_ms": float(g.loc[recv | sr, "dur_ms"].sum()) / per})
    stages = pd.DataFrame(rows, columns=["stage", "ranks", "sends_forward", "sends_backward", "receives", "exchanges",
                                         "receive_ms"])
    first = stages["stage"].min() if not stages.empty else None
    micro = None
    if first is not None:
        fw = stages.loc[stages["stage"] == first, "sends_forward"]
        micro = float(fw.iloc[0]) if len(fw) and fw.iloc[0] > 0 else None
    links = pairs.groupby(["src_rank", "dst_rank", "kind"], as_index=False).agg(
        pairs=("matched", "size"), matched=("matched", "sum"))
    links["pairs"] = links["pairs"] / n_steps
    links["unmatched"] = links["pairs"] * n_steps - links["matched"]
    links["matched"] = links["matched"] / n_steps
    links["src_stage"] = links["src_rank"].map(stage_of)
    links["dst_stage"] = links["dst_rank"].map(stage_of)
    metrics = {"p2p_ops": int(len(ops)), "p2p_pairs": int(len(pairs)), "p2p_matched": int(pairs["matched"].sum()),
               "p2p_unmatched": int((~pairs["matched"]).sum()), "p2p_peer_unknown": int((ops["peer_rank"] < 0).sum()),
               "micro_batches": micro, "panel_step": None, "steps": n_steps,
               "p2p_peer_source": {str(k): int(v) for k, v in ops["peer_source"].value_counts().items() if k}}
    chains = _chains(groups, stage_of, F)
    panel_step = F.median_step() if F is not None else None
    if panel_step not in set(ops["step"]):
        panel_step = int(ops["step"].iloc[0])
    metrics["panel_step"] = int(panel_step)
    return {"metrics": metrics, "stages": stages, "links": links, "chains": chains,
            "panel_ops": ops[ops["step"] == panel_step], "panel_pairs": pairs[pairs["step"] == panel_step]}


def _chains(groups: pd.DataFrame, stage_of, F) -> list[list[int]]:
    """pp groups ordered by stage; the slowest rank's chain first, then by their first rank; at most CHAINS."""
    pp = [sorted((int(r) for r in rs), key=lambda r: (stage_of(r) or 0, r))
          for rs, k in zip(groups["ranks"], groups["kind"]) if k == "pp" and len(rs) > 1]
    uniq = sorted({tuple(c) for c in pp}, key=lambda c: c[0])
    slow = F.slowest_rank if F is not None else None
    uniq.sort(key=lambda c: (slow not in c, c[0]))
    return [list(c) for c in uniq[:CHAINS]]


def present(d: dict) -> tuple[list[Figure], list[Table], list[Control], str]:
    m = d["metrics"]
    tables = [Table.from_frame(
        "strategy-pipeline-stages", "Pipeline stages: point-to-point operations per rank and step", d["stages"],
        [Column("stage", "Stage", "int"), Column("ranks", "Ranks", "int"),
         Column("sends_forward", "Sends forward", "float", help="to a later stage (activations)"),
         Column("sends_backward", "Sends backward", "float", help="to an earlier stage (gradients)"),
         Column("receives", "Receives", "float"),
         Column("exchanges", "Send+receive", "float", help="batch_isend_irecv: sends and receives at once"),
         Column("receive_ms", "Receive op time", "ms",
                help="the whole duration of receive and send+receive operations (waiting included, overlapped or "
                     "not); the overlap section's receive time counts only when nothing else runs")],
        caption="Means per rank and step over the steps in scope." + (
            f" Micro-batches: {fmt.number(m['micro_batches'])} (forward sends of the first stage per rank and step)."
            if m["micro_batches"] else " The micro-batch count cannot be read from these operations.")),
        Table.from_frame(
        "strategy-pipeline-links", "Send → receive pairs per rank pair", d["links"],
        [Column("src_rank", L.label("src_rank"), "rank"), Column("src_stage", "From stage", "int"),
         Column("dst_rank", L.label("dst_rank"), "rank"), Column("dst_stage", "To stage", "int"),
         Column("kind", "Kind", "text"), Column("pairs", "Pairs per step", "float"),
         Column("matched", "Matched per step", "float"), Column("unmatched", "Unmatched (all steps)", "int")],
        caption="A send is joined to the receive of the same peer pair in the same position (issue order), as the "
                "collective libraries (NCCL, HCCL) and the frameworks match point-to-point operations; send+receive "
                "exchanges are joined the same way.")]
    figures, controls = [], []
    fig = _panel(d)
    if fig is not None:
        figures.append(fig[0])
        controls.append(fig[1])
    summary = (f"{m['p2p_matched']:,} of {m['p2p_pairs']:,} point-to-point pairs matched over "
               f"{count(m['steps'], 'step')}"
               + (f", {fmt.number(m['micro_batches'])} micro-batches" if m["micro_batches"] else "") + ".")
    return figures, tables, controls, summary


def _panel(d: dict):
    ops, pairs, chains = d["panel_ops"], d["panel_pairs"], d["chains"]
    if not chains:
        chains = [sorted(set(ops["rank"]))[:16]]  # no pp groups: the ranks themselves, a few
    pts, lines = [], []
    label = {"send": "Send", "recv": "Receive", "sendrecv": "Send+receive"}
    for ci, chain in enumerate(chains):
        c = ops[ops["rank"].isin(chain)]
        t0 = c.groupby("rank")["start_ms"].transform("min")
        pts.append(pd.DataFrame({"chain": ci, "rank": c["rank"], "stage": c["stage"], "order": c["order"],
                                 "kind": c["kind"].map(label), "direction": c["direction"],
                                 "name": [limits.cap_text(x, NAME_CHARS) for x in c["name"]],
                                 "at_ms": c["start_ms"] - t0, "dur_ms": c["dur_ms"]}))
        pr = pairs[pairs["matched"] & pairs["src_rank"].isin(chain) & pairs["dst_rank"].isin(chain)]
        st = ops.drop_duplicates("rank").set_index("rank")["stage"]
        pid = [f"{ci}:{i}" for i in range(len(pr))]
        for rank_col, order_col in (("src_rank", "send_order"), ("dst_rank", "recv_order")):
            lines.append(pd.DataFrame({"chain": ci, "pair": pid, "stage": pr[rank_col].map(st).to_numpy(),
                                       "order": pr[order_col].to_numpy(), "from_rank": pr["src_rank"].to_numpy(),
                                       "to_rank": pr["dst_rank"].to_numpy()}))
    pts = pd.concat(pts, ignore_index=True).dropna(subset=["stage"])
    lines = pd.concat(lines, ignore_index=True).dropna(subset=["stage"])
    if pts.empty:
        return None
    pts["stage"] = pts["stage"].astype(int)
    lines["stage"] = lines["stage"].astype(int)
    stages = sorted(int(s) for s in pts["stage"].unique())
    # both axes are positions, not amounts: point scales (a stage column; the order of the rank's operations)
    x = vl.X("stage:O", title="Pipeline stage", scale=vl.Scale(type="point", domain=stages, padding=0.6),
             axis=vl.Axis(labelAngle=0, grid=False))
    orders = list(range(int(pts["order"].max()) + 1))
    y = vl.Y("order:O", title="Order in the step", scale=vl.Scale(type="point", domain=orders, padding=0.5),
             axis=vl.Axis(values=[o for o in orders if o % max(1, len(orders) // 20) == 0]))
    filt = "datum.chain == pp_chain"
    unit, factor = fmt.unit_for("ms", pts["dur_ms"])
    dirs = ["forward", "backward", "both", "same stage", "unknown"]
    colors = [palette.ROLE["compute"], palette.ROLE["comm"], palette.ROLE["receive"], palette.ROLE["other"],
              palette.ROLE["free"]]
    rule = vl.Chart(lines).transform_filter(filt).mark_line(strokeWidth=1.2,
                                                             color=palette.ROLE["free"]).encode(
        x=x, y=y, detail=vl.Detail("pair:N"),
        tooltip=[vl.Tooltip("from_rank:O", title="From rank"), vl.Tooltip("to_rank:O", title="To rank")])
    points = vl.in_unit(vl.Chart(pts).transform_filter(filt), factor, "at_ms", "dur_ms").mark_point(
        filled=True, size=70, opacity=0.95).encode(
        x=x, y=y,
        shape=vl.Shape("kind:N", title="Operation", scale=vl.Scale(domain=["Send", "Receive", "Send+receive"],
                                                                    range=["triangle-right", "circle", "diamond"]),
                       # a mid grey reads on the light and the dark page (the default symbol is black)
                       legend=vl.Legend(symbolFillColor=palette.ROLE["free"], symbolStrokeColor=palette.ROLE["free"])),
        color=vl.Color("direction:N", title="Direction", scale=vl.Scale(domain=dirs, range=colors)),
        tooltip=[vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("stage:O", title="Stage"),
                 vl.Tooltip("kind:N", title="Operation"), vl.Tooltip("name:N", title="Name"),
                 vl.Tooltip("order:O", title="Position"), vl.Tooltip("direction:N", title="Direction"),
                 vl.tip("at_ms_u", "Start after the rank's first", unit), vl.tip("dur_ms_u", "Duration", unit)])
    height = int(min(640, max(220, 9 * (pts["order"].max() + 1))))
    width = int(min(vl.PLOT_MAX_WIDTH, max(240, 150 * len(stages))))
    chart = vl.layer(rule, points).properties(width=width, height=height).add_params(
        vl.param(name="pp_chain", value=0))
    options = [(i, "ranks " + " → ".join(str(r) for r in ch[:8]) + (" …" if len(ch) > 8 else ""))
               for i, ch in enumerate(chains)]
    control = Control("pp_chain", "Pipeline chain", options, 0)
    m = d["metrics"]
    caption = (f"Step {m['panel_step']}: each stage's point-to-point operations of one pipeline chain (its pp group) "
               "top to bottom in the order they ran; a line joins each send to its receive. Triangles send, circles "
               "receive, diamonds do both (batch_isend_irecv).")
    return Figure("strategy-pipeline", "Training pipeline: sends and receives between stages", to_spec(chart),
                  caption=caption, alt="Pipeline panel: stages as columns, send and receive operations joined by lines"), control
