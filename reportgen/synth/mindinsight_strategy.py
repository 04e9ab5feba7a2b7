"""Synthetic MindSpore ``parallel_strategy_{rank}.json`` (the ``ProfilingParallel`` proto as JSON,
../shared/research/mindinsight-cluster-profiling.md §2.6) with known ground truth: no public sample has more than two
operator nodes, so the strategy matrices, namespaces, redistribution / gradient-aggregation operators and pipeline
Send/Receive pairs are tested on these.

A transformer-like graph per stage, semi_auto_parallel, ``dp`` x ``mp`` devices per stage: ``layers`` layers per
stage under ``Default/network/model/layers.<L>/{attention,mlp}``, each with MatMul / Softmax / Gelu / Add operators
whose ``in_strategy`` shards the batch by dp and the weights by mp, an ``AllReduce`` redistribution operator after the
row-parallel MatMuls (``instanceName`` ``redistribution_op_*``, group = the stage's mp group), and in
``Gradients/Default/...`` the weight-gradient MatMuls with their ``grad_mirror`` AllReduce (gradient aggregation,
group = the dp group). Stages exchange activations and gradients: per micro-batch a forward ``Send`` (``dest_rank``) /
``Receive`` (``src_rank``) and a backward pair, ``sr_tag`` = the micro-batch (forward) or 1000 + the micro-batch
(backward). ``recompute`` adds each layer's recomputed mlp operators (scope ``recompute_Default/...``) before the
backward graph. ``disagree`` (rank -> operator full name) gives that rank's operator another strategy than its stage
peers (the report must flag it).
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["write_strategy_files"]


def _i(v: int) -> dict:
    return {"dtype": "DT_INT64", "intVal": str(v)}


def _tuple(values) -> dict:
    return {"dtype": "DT_TUPLE", "values": [_tuple(v) if isinstance(v, (list, tuple)) else _i(v) for v in values]}


def _s(v: str) -> dict:
    return {"dtype": "DT_STRING", "strVal": v}


def _graph(rank: int, stage: int, stages: int, dp: int, mp: int, layers: int, micro: int, per_stage: int,
           disagree: str | None, recompute: bool = False) -> tuple[list[dict], list[dict]]:
    nodes: list[dict] = []
    truth_ops: list[dict] = []
    pos = rank - stage * per_stage
    mp_group = f"mp_group_stage{stage}_{pos // mp}"
    dp_group = f"dp_group_stage{stage}_{pos % mp}"

    def add(op_type, scope, strategy=None, instance="", group="", extra=None, inputs=None):
        nid = str(len(nodes) + 1)
        full = f"{scope}/{op_type}-op{1000 * (stage + 1) + len(nodes)}"
        attrs = []
        if strategy is not None:
            if disagree == full:
                strategy = [[x * 2 if j == 0 else x for j, x in enumerate(row)] for row in strategy]
            attrs.append({"name": "in_strategy", "value": _tuple(strategy)})
            attrs.append({"name": "gen_strategy", "value": _tuple(strategy)})
        if group:
            attrs.append({"name": "group", "value": _s(group)})
        for k, v in (extra or {}).items():
            attrs.append({"name": k, "value": v})
        prev = inputs if inputs is not None else ([nodes[-1]["name"]] if nodes else [])
        nodes.append({"name": nid, "opType": op_type, "scope": scope, "fullName": full, "instanceName": instance,
                      "input": [{"name": p, "type": "DATA_EDGE"} for p in prev], "attribute": attrs,
                      "outputType": {"dataType": "DT_TENSOR"}})
        truth_ops.append({"name": full, "type": op_type, "scope": scope, "strategy": strategy,
                          "instance": "GradientAggregation" if "grad_mirror" in instance else
                          "Redistribution" if "redistribution" in instance else ""})
        return nid

    prev_rank = rank - per_stage if stage > 0 else None
    next_rank = rank + per_stage if stage < stages - 1 else None
    if prev_rank is not None:
        for m in range(micro):
            add("Receive", "Default/network/pipeline", extra={"src_rank": _i(prev_rank), "sr_tag": _i(m)})
    adds: dict[int, str] = {}
    for L in range(stage * layers, (stage + 1) * layers):
        base = f"Default/network/model/layers.{L}"
        a = f"{base}/attention"
        x = nodes[-1]["name"] if nodes else None            # the layer's input (residual branch)
        add("MatMul", a, [[dp, 1], [1, mp]])               # q / k / v: column parallel
        add("Softmax", a, [[dp, mp, 1, 1]])
        add("BatchMatMul", a, [[dp, mp, 1, 1], [dp, mp, 1, 1]],
            inputs=[nodes[-1]["name"]] + ([x] if x else []))  # scores x values: two inputs
        add("MatMul", a, [[dp, mp], [mp, 1]])              # output projection: row parallel
        add("AllReduce", a, instance=f"redistribution_op_{L}_attn", group=mp_group)
        adds[L] = add("Add", base, [[dp, 1, 1], [dp, 1, 1]],
                      inputs=[nodes[-1]["name"]] + ([x] if x else []))  # residual
        f = f"{base}/mlp"
        add("MatMul", f, [[dp, 1], [1, mp]])
        add("Gelu", f, [[dp, mp]])
        add("MatMul", f, [[dp, mp], [mp, 1]])
        add("AllReduce", f, instance=f"redistribution_op_{L}_mlp", group=mp_group)
    if next_rank is not None:
        for m in range(micro):
            add("Send", "Default/network/pipeline", extra={"dest_rank": _i(next_rank), "sr_tag": _i(m)})
    if recompute:  # the recompute pass duplicates each layer's mlp activation before the backward graph
        for L in range(stage * layers, (stage + 1) * layers):
            r = f"recompute_Default/network/model/layers.{L}/mlp"
            add("MatMul", r, [[dp, 1], [1, mp]], inputs=[adds[L]])  # from the layer's forward residual
            add("Gelu", r, [[dp, mp]])
    if next_rank is not None:
        for m in range(micro):
            add("Receive", "Gradients/Default/network/pipeline", extra={"src_rank": _i(next_rank),
                                                                         "sr_tag": _i(1000 + m)})
    for L in reversed(range(stage * layers, (stage + 1) * layers)):
        g = f"Gradients/Default/network/model/layers.{L}"
        for part in ("mlp", "attention"):
            add("MatMul", f"{g}/{part}", [[dp, 1], [1, mp]])
            add("AllReduce", f"{g}/{part}", instance=f"grad_mirror_layers.{L}.{part}.weight", group=dp_group)
    if prev_rank is not None:
        for m in range(micro):
            add("Send", "Gradients/Default/network/pipeline", extra={"dest_rank": _i(prev_rank),
                                                                      "sr_tag": _i(1000 + m)})
    return nodes, truth_ops


def write_strategy_files(root: str | Path, *, stages: int = 2, dp: int = 2, mp: int = 2, layers: int = 2,
                         micro: int = 4, disagree: dict[int, str] | None = None, profiler_info: bool = True,
                         recompute: bool = False) -> dict:
    """Write ``parallel_strategy_{rank}.json`` (and ``profiler_info_{rank}.json``) for ``stages`` x dp x mp ranks
    under ``root``; return the ground truth: per stage the operator count, operators with a strategy,
    redistribution and gradient-aggregation operators, the pipeline pairs, and every operator's strategy."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    per_stage = dp * mp
    world = stages * per_stage
    disagree = disagree or {}
    truth: dict = {"world": world, "stages": stages, "per_stage": {}, "pairs": [], "strategies": {},
                   "disagree": {str(r): n for r, n in disagree.items()}}
    for rank in range(world):
        stage = rank // per_stage
        nodes, ops = _graph(rank, stage, stages, dp, mp, layers, micro, per_stage, disagree.get(rank), recompute)
        doc = {"config": {"rankId": rank, "stageId": stage, "parallelType": "semi_auto_parallel",
                          "stageDevices": [{"dim": [{"size": str(r)} for r in range(world)]}]},
               "graph": {"node": nodes, "parameters": [], "constVals": []}}
        (root / f"parallel_strategy_{rank}.json").write_text(json.dumps(doc), encoding="utf-8")
        if profiler_info:
            info = {"context_mode": "graph", "rank_id": str(rank), "rank_size": world,
                    "parallel_mode": "semi_auto_parallel", "stage_num": stages, "graph_ids": [0]}
            (root / f"profiler_info_{rank}.json").write_text(json.dumps(info), encoding="utf-8")
        if rank == stage * per_stage:  # the stage's first rank: what MindInsight's merged graph shows
            truth["per_stage"][str(stage)] = {
                "ops": len(ops), "with_strategy": sum(o["strategy"] is not None for o in ops),
                "redistribution": sum(o["instance"] == "Redistribution" for o in ops),
                "gradient_aggregation": sum(o["instance"] == "GradientAggregation" for o in ops)}
        for o in ops:
            if o["strategy"] is not None:
                truth["strategies"].setdefault(o["name"], {})[str(rank)] = o["strategy"]
    for rank in range(world):
        stage = rank // per_stage
        if stage < stages - 1:
            nxt = rank + per_stage
            truth["pairs"] += [[rank, nxt, m] for m in range(micro)] + [[nxt, rank, 1000 + m] for m in range(micro)]
    return truth
