"""Parallel strategy section and the MindSpore parallel_strategy reader."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from conftest import fixture_dir, reference_file
from reportgen.model import Run
from reportgen.readers import read_run
from reportgen.readers.mindinsight_strategy import parse_parallel_strategy
from reportgen.cli import section_options
from reportgen.sections import run_sections
from reportgen.sections.strategy import merge_stage_ops
from reportgen import charts


def _strategy(run):
    (o,) = run_sections(run, section_options(run), only=["strategy"])  # the registry's provenance, as the CLI
    return o


def _ok(run):
    o = _strategy(run)
    assert o.status == "ok", o.reason
    return o


# --------------------------------------------------------------------------- MindSpore Insight


def test_mindinsight_equals_parallel_strategy_analyser():
    run = read_run(fixture_dir("mindinsight", "mi_parallel_strategy"))
    ref = json.loads(reference_file("mindinsight", "mi_parallel_strategy", "parallel_strategy.json").read_text())
    ref = next(iter(ref.values()))["result"]
    o = _ok(run)
    m = o.analysis.metrics
    assert m["mode"] == ref["metadata"]["data"]["parallel_type"] == "auto_parallel"
    assert m["stages"] == 1
    assert m["stage_devices"] == ref["metadata"]["data"]["stage_devices"] == {"0": [0, 1]}
    merged = merge_stage_ops(run.table("strategy_ops"), {0: [0, 1]})
    want = ref["stage0"]["data"]
    assert want["rank_ids"] == [0, 1]
    assert m["op_nodes_per_stage"] == {"0": len(want["op_nodes"])} == {"0": 2}
    for got, exp in zip(merged.to_dict(orient="records"), want["op_nodes"]):
        assert got["node_id"] == exp["node_id"]
        assert got["name"] == exp["name"]
        assert got["scope"] == exp["scope"]
        assert got["type"] == exp["type"]
        assert got["instance_type"] == exp["instance_type"]
        assert got["input"] == exp["input"]
        assert got["parallel_group"] == exp["parallel_group"]
        assert (got["parallel_shard"] or []) == exp["parallel_shard"]
    # what the section tables show: only Conv2D has a group; no shard, no special operators
    so = o.analysis.tables["strategy_ops"]
    assert so["name"].tolist() == ["Default/conv1-Conv2d/Conv2D-op2"]
    assert so["parallel_group"].tolist() == [["0", "1"]]
    assert m["ops_with_strategy"] == m["redistribution_ops"] == m["gradient_aggregation_ops"] == 0
    groups = o.analysis.tables["groups"]
    assert groups["ranks"].tolist() == [[0, 1]]
    assert {"name", "kind", "ranks"} <= set(groups.columns)
    mesh = o.analysis.tables["mesh"]
    assert mesh["stage"].tolist() == [1, 1]


def _proto(rank, nodes, stage=0):
    return {"config": {"rankId": rank, "stageId": stage, "parallelType": "semi_auto_parallel",
                       "stageDevices": [{"dim": [{"size": "0"}]}, {"dim": [{"size": "1"}]}]},
            "graph": {"node": nodes, "parameters": [{"name": "w"}], "constVals": [{"key": "cst1"}]}}


def _attr(name, v):
    if isinstance(v, int):
        return {"name": name, "value": {"dtype": "DT_INT64", "intVal": str(v)}}
    if isinstance(v, str):
        return {"name": name, "value": {"dtype": "DT_STRING", "strVal": v}}
    return {"name": name, "value": {"dtype": "DT_TUPLE", "values": [
        {"dtype": "DT_TUPLE", "values": [{"dtype": "DT_INT64", "intVal": str(x)} for x in row]} for row in v]}}


def test_reader_rules_and_pipeline_pairs(tmp_path):
    nodes0 = [
        {"name": "5", "opType": "MatMul", "scope": "Default/net", "fullName": "Default/net/MatMul-op5",
         "instanceName": "", "input": [{"name": "w"}, {"name": "cst1"}, {"name": "404"}],
         "attribute": [_attr("in_strategy", [[2, 1], [1, 1]]), _attr("gen_strategy", [[2, 1], [1, 1]])]},
        {"name": "6", "opType": "AllReduce", "scope": "Default/net", "fullName": "Default/net/AllReduce-op6",
         "instanceName": "grad_mirror_x", "input": [{"name": "5"}], "attribute": [_attr("group", "g-1")]},
        {"name": "7", "opType": "Load", "scope": "Default", "fullName": "Default/Load-op7", "instanceName": "",
         "attribute": []},
        {"name": "8", "opType": "AllGather", "scope": "Default/net", "fullName": "x",
         "instanceName": "redistribution_op", "attribute": []},
        {"name": "9", "opType": "Send", "scope": "Default", "fullName": "Default/Send-op9",
         "attribute": [_attr("dest_rank", 1), _attr("sr_tag", 0)]},
        {"name": "", "opType": "Dropped", "fullName": "nope"},
    ]
    nodes1 = [{"name": "3", "opType": "Receive", "scope": "Default", "fullName": "Default/Receive-op3",
               "attribute": [_attr("src_rank", 0), _attr("sr_tag", 0)]}]
    (tmp_path / "parallel_strategy_0.json").write_text(json.dumps(_proto(0, nodes0)))
    (tmp_path / "parallel_strategy_1.json").write_text(json.dumps(_proto(1, nodes1, stage=1)))
    problems = []
    t0 = parse_parallel_strategy(tmp_path / "parallel_strategy_0.json", 0, problems)
    ops = t0["strategy_ops"].set_index("node")
    assert ops.loc["5", "parallel_shard"] == "[[2, 1], [1, 1]]"
    assert ops.loc["5", "inputs"] == "w,cst1"  # unknown input 404 dropped, const/parameter kept by name
    assert ops.loc["6", "inputs"] == "1" and ops.loc["6", "instance_type"] == "GradientAggregation"
    assert ops.loc["6", "parallel_group"] == "g-1"
    assert ops.loc["7", "name"] == "Default/Load-op7"
    assert ops.loc["8", "instance_type"] == "Redistribution"
    assert len(ops) == 5 and any("without name" in p for _, p in problems)
    t1 = parse_parallel_strategy(tmp_path / "parallel_strategy_1.json", 1, problems)
    pairs = pd.concat([t0["strategy_pairs"], t1["strategy_pairs"]], ignore_index=True)
    run = Run(name="t", source_format="mindinsight", source_path=str(tmp_path), ranks=[0, 1], world_size=2,
              parallel={"stages": 2, "framework_mode": "semi_auto_parallel"}, stage_map={0: 1, 1: 2},
              tables={"strategy_ops": pd.concat([t0["strategy_ops"], t1["strategy_ops"]], ignore_index=True),
                      "strategy_pairs": pairs})
    o = _ok(run)
    m = o.analysis.metrics
    assert m["stages"] == 2 and m["stage_devices"] == {"0": [0], "1": [1]}
    assert m["redistribution_ops"] == 1 and m["gradient_aggregation_ops"] == 1 and m["ops_with_strategy"] == 1
    pp = o.analysis.tables["pipeline_pairs"]
    assert pp[["send_rank", "recv_rank", "send_stage", "recv_stage"]].astype(int).values.tolist() == [[0, 1, 1, 2]]
    assert m["pipeline_pairs"] == 1 and m["pipeline_unmatched"] == 0
    assert "strategy-pairs" in [f.id for f in o.view.figures]
    sp = o.analysis.tables["special_ops"]
    assert int(sp["redistribution"].sum()) == 1 and int(sp["gradient_aggregation"].sum()) == 1


@pytest.mark.parametrize("content", [b"{not json", b"[]", b'{"config": {}, "graph": {"node": 5}}', b"\xff\xfe"])
def test_reader_bad_files(tmp_path, content):
    p = tmp_path / "parallel_strategy_0.json"
    p.write_bytes(content)
    problems = []
    assert parse_parallel_strategy(p, 0, problems) == {}
    assert problems


# --------------------------------------------------------------------------- Ascend and Kineto


def test_ascend_level2_groups_and_mesh():
    run = read_run(fixture_dir("ascend", "msinsight", "test", "st", "level2"))
    o = _ok(run)
    m = o.analysis.metrics
    assert (m["tp_size"], m["pp_size"], m["dp_size"]) == (1, 2, 2)
    assert m["stages"] == 2 and m["world_size"] == 4 and m["product_of_dims"] == 4
    mesh = o.analysis.tables["mesh"].set_index("rank")
    assert mesh["stage"].to_dict() == {0: 1, 1: 1, 2: 2, 3: 2}
    assert mesh["pp_index"].to_dict() == {0: 0, 1: 0, 2: 1, 3: 1}
    assert mesh["dp_index"].to_dict() == {0: 0, 1: 1, 2: 0, 3: 1}
    g = o.analysis.tables["groups"]
    assert g.loc[g["name"] == "pp", "ranks"].tolist() == [[0, 2], [1, 3]]
    assert not o.view.findings


@pytest.mark.parametrize("parts,tp,dp", [
    (("kineto", "generated_cpu_gloo_4rank_mesh2x2"), {"mesh_tp": [[0, 1], [2, 3]]}, {"mesh_dp": [[0, 2], [1, 3]]}),
    (("generated", "torch_gloo_ddp4_baseline"), None, None),
])
def test_kineto_groups_and_mesh(parts, tp, dp):
    run = read_run(fixture_dir(*parts))
    o = _ok(run)
    g = o.analysis.tables["groups"]
    if tp:
        for name, ranks in {**tp, **dp}.items():
            assert g.loc[g["name"] == name, "ranks"].tolist() == ranks
    assert o.analysis.metrics["dp_size"] == 2 and o.analysis.metrics["tp_size"] == 2
    mesh = o.analysis.tables["mesh"].set_index("rank")
    assert mesh["tp_index"].to_dict() == {0: 0, 1: 1, 2: 0, 3: 1}
    assert mesh["dp_index"].to_dict() == {0: 0, 1: 0, 2: 1, 3: 1}
    assert mesh["column"].to_dict() == {0: 0, 1: 1, 2: 2, 3: 3}
    assert not o.view.findings


# --------------------------------------------------------------------------- edge cases


def test_no_group_data_is_unavailable():
    run = Run(name="x", source_format="kineto", source_path="/nowhere", ranks=[0, 1])
    o = _strategy(run)
    assert o.status == "unavailable"
    assert "pg_config" in o.reason and "parallel_strategy_<rank>.json" in o.reason


def _groups(rows):
    return pd.DataFrame(rows, columns=["group", "name", "kind", "ranks", "hash"])


def test_1024_ranks_chart_stays_small():
    tp, pp, dp = 8, 4, 32
    world = tp * pp * dp
    rows = [("0", "world", "world", list(range(world)), "")]
    rank = lambda p, d, t: (p * dp + d) * tp + t  # noqa: E731
    for p in range(pp):
        for d in range(dp):
            rows.append((f"tp{p}_{d}", "tp", "tp", [rank(p, d, t) for t in range(tp)], ""))
        for t in range(tp):
            rows.append((f"dp{p}_{t}", "dp", "dp", [rank(p, d, t) for d in range(dp)], ""))
    for d in range(dp):
        for t in range(tp):
            rows.append((f"pp{d}_{t}", "pp", "pp", [rank(p, d, t) for p in range(pp)], ""))
    run = Run(name="big", source_format="ascend", source_path="/x", ranks=list(range(world)), world_size=world,
              tables={"groups": _groups(rows)})
    o = _ok(run)
    m = o.analysis.metrics
    assert (m["tp_size"], m["pp_size"], m["dp_size"], m["stages"]) == (8, 4, 32, 4)
    mesh = o.analysis.tables["mesh"]
    assert not mesh.duplicated(["stage", "column"]).any()
    assert mesh.loc[mesh["rank"] == rank(2, 5, 3), ["stage", "column"]].values.tolist() == [[3, 5 * tp + 3]]
    spec = o.view.figures[0].spec
    size = len(json.dumps(spec))
    assert size < 400_000, size
    datasets = spec.get("datasets", {})
    assert sum(len(v) for v in datasets.values()) <= world  # one row per rank, no per-pair edges
    assert not o.view.findings


def test_inconsistent_layout_is_a_low_finding():
    rows = [("0", "world", "world", [0, 1, 2, 3, 4], ""), ("1", "dp", "dp", [0, 1], ""), ("2", "dp", "dp", [2, 3], ""),
            ("3", "tp", "tp", [0, 2], ""), ("4", "tp", "tp", [1, 3], "")]
    run = Run(name="odd", source_format="kineto", source_path="/x", ranks=[0, 1, 2, 3, 4], world_size=5,
              tables={"groups": _groups(rows)})
    o = _ok(run)
    ids = {f.id: f for f in o.view.findings}
    assert set(ids) == {"layout_inconsistent", "rank_without_group"}
    assert all(f.severity == "low" for f in ids.values())
    assert ids["rank_without_group"].ranks == [4]
    assert ids["layout_inconsistent"].evidence == {"metric": "product_of_dims", "value": 4, "reference": 5}


# --------------------------------------------------------------------------- issue 16: matrices, namespaces, view


def _generated_strategy(tmp_path, **kw):
    from reportgen.synth.mindinsight_strategy import write_strategy_files
    truth = write_strategy_files(tmp_path, **kw)
    return truth, _ok(read_run(tmp_path))


def test_generated_strategy_counts_pairs_and_matrices(tmp_path):
    truth, o = _generated_strategy(tmp_path, stages=3, dp=2, mp=2, layers=2, micro=4)
    m, t = o.analysis.metrics, o.analysis.tables
    # per stage: operators, with strategy, redistribution and gradient aggregation of the stage's first rank
    ns = t["namespaces"]
    for s, want in truth["per_stage"].items():
        assert m["op_nodes_per_stage"][s] == want["ops"]
        sp = t["special_ops"][t["special_ops"]["stage"] == int(s) + 1].sum()
        assert (sp["with_strategy"], sp["redistribution"], sp["gradient_aggregation"]) == \
            (want["with_strategy"], want["redistribution"], want["gradient_aggregation"])
        top = ns[(ns["stage"] == int(s) + 1) & (ns["depth"] == 1)][["ops", "with_strategy"]].sum()
        assert (top["ops"], top["with_strategy"]) == (want["ops"], want["with_strategy"])
    # every Send has its Receive (sr_tag), the same pairs the files describe
    pp = t["pipeline_pairs"]
    assert pp["matched"].all() and len(pp) == len(truth["pairs"])
    got = sorted(zip(pp["send_rank"].astype(int), pp["recv_rank"].astype(int), pp["sr_tag"].astype(int)))
    assert got == sorted(tuple(p) for p in truth["pairs"])
    # the strategy matrices of three named operators equal the file's in_strategy, input by input
    mat = t["strategy_matrices"]
    names = ["Default/network/model/layers.0/attention/MatMul-op1000",
             "Default/network/model/layers.2/attention/Softmax-op2005",
             "Default/network/model/layers.5/attention/MatMul-op3017"]
    for name in names:
        rows = mat[mat["name"] == name].sort_values("input")
        want = truth["strategies"][name][str(next(iter(truth["strategies"][name])))]
        got = [[int(r[f"d{k}"]) for k in range(1, 9) if pd.notna(r[f"d{k}"])] for _, r in rows.iterrows()]
        assert got == want, name
    assert {f.id for f in o.view.figures} >= {"strategy-view", "strategy-mesh"}
    assert "strategy_disagreements" not in t and m["strategy_disagreements"] == 0


def test_strategy_disagreement_is_flagged(tmp_path):
    name = "Default/network/model/layers.0/mlp/Gelu-op1007"
    truth, o = _generated_strategy(tmp_path, stages=2, dp=2, mp=2, layers=2, micro=2, disagree={1: name})
    assert truth["strategies"][name]["1"] != truth["strategies"][name]["0"]
    dis = o.analysis.tables["strategy_disagreements"]
    assert set(dis["name"]) == {name}
    assert sorted(map(tuple, dis["ranks"])) == [(0, 2, 3), (1,)]
    (f,) = [f for f in o.view.findings if f.id == "strategy_disagreement"]
    assert f.ranks == [1] and name in f.message


def test_parse_shard_rejects_what_is_not_a_matrix():
    from reportgen.sections.strategy_graph import parse_shard
    assert parse_shard("[[2, 1], [1, 4]]") == [[2, 1], [1, 4]]
    for bad in ("", "2", "[2, 1]", "[[2, 'x']]", "[[true]]", "{", None, "[[1.5]]"):
        assert parse_shard(bad) is None, bad


def test_strategy_view_aligns_stages_on_send_receive(tmp_path):
    truth, o = _generated_strategy(tmp_path, stages=2, dp=1, mp=2, layers=2, micro=3)
    (fig,) = [f for f in o.view.figures if f.id == "strategy-view"]
    layers = charts.single_view(fig.spec)["layer"]
    lines = next(rows for rows in fig.spec["datasets"].values() if rows and "pair" in rows[0])
    by_pair = {}
    for r in lines:
        by_pair.setdefault(r["pair"], {})[r["stage"]] = r["pos"]
    # forward pairs (sr_tag < 1000: stage 1 Send -> stage 2 Receive) line up after the shift: the same x
    pp = o.analysis.tables["pipeline_pairs"]
    fw = [i for i, tag in enumerate(pp[pp["matched"]]["sr_tag"].astype(int)) if tag < 1000]
    offsets = {by_pair[i][1] - by_pair[i][2] for i in fw}
    assert len(layers) == 2 and offsets <= {-1, 0, 1} and 0 in offsets
    assert "stage 2 shifted by" in fig.caption


def test_namespace_tree_nests_every_scope(tmp_path):
    from reportgen.render import _tree_ctx
    truth, o = _generated_strategy(tmp_path, stages=2, dp=2, mp=2, layers=2, micro=2)
    (tree,) = o.view.trees
    ctx = _tree_ctx(tree)
    assert [r["label"] for r in ctx["roots"]] == ["Stage 1", "Stage 2"]
    assert [int(v) for v in ctx["roots"][0]["values"]] == [truth["per_stage"]["0"][k] for k in
                                                           ("ops", "with_strategy", "redistribution",
                                                            "gradient_aggregation")]

    def find(nodes, path):
        for n in nodes:
            if n["label"] == path[0]:
                return n if len(path) == 1 else find(n["children"], path[1:])
        return None

    layer = find(ctx["roots"][0]["children"], ["Default", "network", "model", "layers.0"])
    assert layer is not None and [c["label"] for c in layer["children"]] == ["attention", "mlp"]
    assert ctx["roots"][0]["open"] and not layer["open"]  # two levels open when the page loads


def test_mesh_and_flops_grid_wrap_thousands_of_ranks():
    """4096 ranks in 2 stages: the mesh was one row of 2048 cells per stage (6,000 px wide) and the FLOPs grid one row
    of 4096 cells (16,500 px). Both now draw every rank in rows of 64: 64 columns, every rank once."""
    from reportgen.sections import flops, strategy

    n = 4096
    ranks = list(range(n))
    mesh = pd.DataFrame({"rank": ranks, "stage": [1 + r // 2048 for r in ranks], "column": [r % 2048 for r in ranks],
                         "host": [f"h{r // 8}" for r in ranks], "groups": "g", **{f"{k}_index": None
                                                                                     for k in strategy.DIMS}})
    mesh["dp_index"] = [r % 2048 for r in ranks]
    fig = strategy._mesh_figure(mesh, {"tp_size": 1})
    spec = json.dumps(fig.spec, ensure_ascii=False)
    data = [v for v in fig.spec["datasets"].values() if isinstance(v, list) and v and "column" in v[0]][0]
    assert len(data) == n and max(d["column"] for d in data) == strategy.MESH_ROW_CELLS - 1
    assert len({d["stage_label"] for d in data}) == 2 * 2048 // strategy.MESH_ROW_CELLS
    assert "rows of 64 positions" in fig.caption and "stage 1 · 1984" in spec
    pr = pd.DataFrame({"rank": ranks, "flops": [1e12 + r for r in ranks], "flops_per_s": 1e14,
                       "ratio_to_max": [0.9] * n, "stage": [1 + r // 2048 for r in ranks],
                       "host": [f"h{r // 8}" for r in ranks], "device_id": None})
    fig = flops._grid(pr, hosts_known=False)
    data = [v for v in fig.spec["datasets"].values() if isinstance(v, list) and v and "col" in v[0]][0]
    assert len(data) == n and {d["col"] for d in data} == set(range(flops.GRID_ROW_RANKS))
    assert {d["row"] for d in data} == set(range(0, n, flops.GRID_ROW_RANKS)) and "64 to a row" in fig.caption
    small = flops._grid(pr.iloc[:100], hosts_known=False)  # up to PAGE_RANKS_ALL: one row, as before
    assert "rows of" not in small.title and "col" not in json.dumps(small.spec["datasets"])


# --------------------------------------------------------------------------- canonical tables (issue 25)


def test_reader_writes_canonical_tables_with_op_class(tmp_path):
    """The strategy tables have canonical names (schema), and the reader, not the section, decides which graph
    operators are communication (op_class) and which are the pipeline's Send / Receive (p2p)."""
    from reportgen import schema

    nodes = [{"name": "1", "opType": "MatMul", "scope": "Default", "fullName": "Default/MatMul-op1"},
             {"name": "2", "opType": "AllReduce", "scope": "Default", "fullName": "Default/AllReduce-op2"},
             {"name": "3", "opType": "Send", "scope": "Default", "fullName": "Default/Send-op3",
              "attribute": [_attr("dest_rank", 1), _attr("sr_tag", 0)]}]
    (tmp_path / "parallel_strategy_0.json").write_text(json.dumps(_proto(0, nodes)))
    t = parse_parallel_strategy(tmp_path / "parallel_strategy_0.json", 0, [])
    assert set(t) == {"strategy_ops", "strategy_pairs"}
    assert {"strategy_ops", "strategy_pairs", "comm_rank_step"} <= set(schema.BY_NAME)
    assert {"op_class", "p2p"} <= {c.name for c in schema.BY_NAME["strategy_ops"].columns}
    assert not {"mi_strategy_ops", "mi_strategy_pairs"} & set(schema.BY_NAME)
    ops = t["strategy_ops"].set_index("type")
    assert ops["op_class"].to_dict() == {"MatMul": "compute", "AllReduce": "communication", "Send": "communication"}
    assert ops["p2p"].to_dict() == {"MatMul": "", "AllReduce": "", "Send": "send"}
    assert set(ops["op_class"]) <= set(schema.OP_CLASSES)


def test_strategy_view_roles_come_from_the_op_class():
    """The section colours by the reader's op_class: an operator type it has never heard of is communication when
    the reader says so, and a type named like a collective is computation when the reader says that."""
    from reportgen.sections.strategy import role_of_ops

    ops = pd.DataFrame({"type": ["MyVendorCollective", "AllReduce", "MatMul", "MatMul"],
                        "op_class": ["communication", "compute", "compute", "compute"],
                        "instance_type": ["", "", "Redistribution", ""]})
    assert role_of_ops(ops) == ["communication", "computation", "redistribution", "computation"]


def test_mindinsight_fixture_reads_canonical_strategy_tables():
    run = read_run(fixture_dir("mindinsight", "mi_parallel_strategy"))
    assert run.table("strategy_ops") is not None and run.table("mi_strategy_ops") is None
    o = _ok(run)
    assert o.analysis.metrics["groups_source"] == "derived from the strategy's stage devices"


def test_reduced_parts_carry_the_canonical_tables():
    """A rank's part (the .reduced file's unit) holds the canonical strategy / comm_rank_step tables, and the part
    check accepts them (and still refuses a table of no reader)."""
    from pathlib import Path

    from reportgen.readers import mindinsight as mi

    d = mi.discover(Path(fixture_dir("mindinsight", "mi_parallel_strategy")))
    meta, tables, _ = mi.rank_part(*mi.rank_units(d)[0])
    assert {k.split(".", 1)[1] for k in tables} == {"t.strategy_ops"}
    mi.check_part(meta, tables)
    with pytest.raises(ValueError):
        mi.check_part(meta, {**tables, "0.t.bogus": pd.DataFrame()})
    # hccl_raw's tables keep the family prefix: readers/comm.py makes their canonical forms (comm_rank_step, ...)
    assert mi._hccl_table("comm_rank_step") == "mi_comm_rank_step" and mi._hccl_table("comm_ops") == "mi_comm_ops"
    assert mi._hccl_name("mi_comm_rank_step") == "comm_rank_step" and mi._hccl_name("mi_links") == "links"


# --------------------------------------------------------------------------- issue 27: the strategy graph


def _row_starts(xy):
    """The top y of each row of a placed graph (rows are 1.5 apart at least, a column's nodes 1 or less)."""
    ys = sorted({y for _, y in xy.values()})
    starts = [ys[0]]
    for a, b in zip(ys, ys[1:]):
        if b - a >= 1.5:
            starts.append(b)
    return starts


def _random_dag(n, seed):
    import random
    rnd = random.Random(seed)
    order = {f"n{i}": i for i in range(n)}
    edges = [(f"n{rnd.randrange(v)}", f"n{v}") for v in range(1, n) for _ in range(rnd.randint(1, 3))]
    return order, edges


@pytest.mark.parametrize("n,seed", [(2, 0), (12, 1), (60, 2), (200, 3)])
def test_layered_layout_puts_every_edge_forward_and_no_two_nodes_on_one_point(n, seed):
    from reportgen.sections.strategy_graph import COLUMN_NODES, WRAP_LAYERS, layered_layout, place

    order, edges = _random_dag(n, seed)
    lay = layered_layout(order, edges)
    assert set(lay) == set(order)
    assert all(lay[u][0] < lay[v][0] for u, v in edges)  # every edge from a lower to a higher layer
    # longest path: a node's layer is one more than its deepest predecessor
    for v in order:
        preds = [lay[u][0] for u, w in edges if w == v]
        assert lay[v][0] == (max(preds) + 1 if preds else 0)
    xy = place(lay)
    assert len(set(xy.values())) == len(xy)  # no overlap
    assert all(0 <= x < WRAP_LAYERS for x, _ in xy.values())
    # a column holds at most COLUMN_NODES nodes, of one layer; the columns follow the layers (x, then the row)
    starts = _row_starts(xy)
    row_of = {k: max(i for i, lo in enumerate(starts) if xy[k][1] >= lo) for k in xy}
    col_of = {}
    for k, (x, _) in xy.items():
        col_of.setdefault((row_of[k], x), []).append(k)
    assert all(len(v) <= COLUMN_NODES for v in col_of.values())
    assert all(len({lay[k][0] for k in v}) == 1 for v in col_of.values())  # one layer per column
    assert all((row_of[u], xy[u][0]) < (row_of[v], xy[v][0]) for u, v in edges)  # reading order follows the edges


def test_wide_layer_takes_several_columns_shifted():
    from reportgen.sections.strategy_graph import COLUMN_NODES, layered_layout, place

    order = {"src": 0, **{f"m{i}": i + 1 for i in range(2 * COLUMN_NODES + 1)}}
    edges = [("src", f"m{i}") for i in range(2 * COLUMN_NODES + 1)]
    xy = place(layered_layout(order, edges))
    xs = sorted({xy[f"m{i}"][0] for i in range(2 * COLUMN_NODES + 1)})
    assert xs == [1, 2, 3] and xy["src"][0] == 0  # 13 nodes of one layer in 3 columns after the source
    ys = {x: sorted(y for k, (xx, y) in xy.items() if xx == x and k != "src") for x in xs}
    assert all(len(v) <= COLUMN_NODES for v in ys.values())
    assert set(ys[1]).isdisjoint(ys[2])  # the second column is shifted: a straight edge misses its nodes


def test_back_edges_between_namespaces_do_not_set_layers():
    from reportgen.sections.strategy_graph import layered_layout

    lay = layered_layout({"A": 1, "B": 2}, [("A", "B"), ("B", "A")])  # A holds ops 1 and 10, B op 5
    assert lay["A"][0] == 0 and lay["B"][0] == 1


def test_aggregate_opens_namespaces_level_by_level_within_the_bound():
    from reportgen.sections.strategy_graph import aggregate

    rows = []
    for L in range(6):
        for part, n in (("attention", 5), ("mlp", 4)):
            for _ in range(n):
                rows.append({"node_id": str(len(rows) + 1), "scope": f"Default/net/layers.{L}/{part}"})
    ops = pd.DataFrame(rows)
    unit, cut = aggregate(ops, limit=100)
    assert set(unit.values()) == {f"op:{i}" for i in range(1, 55)} and not cut  # everything fits: every operator
    unit, cut = aggregate(ops, limit=20)  # 12 namespaces fit, 54 operators do not: layers.L/attention, .../mlp
    assert sorted(set(unit.values())) == sorted(f"ns:Default/net/layers.{L}/{p}" for L in range(6)
                                                for p in ("attention", "mlp"))
    unit, _ = aggregate(ops, limit=8)  # one level up: the six layers (Default and net open for free)
    assert len(set(unit.values())) == 6 and all(u.startswith("ns:Default/net/layers.") for u in unit.values())
    assert len(unit) == len(ops)  # every operator belongs to one node


def test_strategy_graph_on_the_fixture_has_stage_and_part_params():
    run = read_run(fixture_dir("mindinsight", "mi_parallel_strategy"))
    assert set(run.table("strategy_ops")["phase"]) == {"forward"}
    o = _ok(run)
    (fig,) = [f for f in o.view.figures if f.id == "strategy-graph"]
    names = {p["name"] for p in fig.spec["params"]}
    assert {"sg_stage", "sg_phase"} <= names
    assert {c.signal for c in o.view.controls} >= {"sg_stage", "sg_phase"}
    rows = {k: v for k, v in fig.spec["datasets"].items() if v and "uid" in v[0] and "role" in v[0]}
    (nodes,) = rows.values()
    assert sorted(r["type"] for r in nodes) == ["Conv2D", "GetNext"]
    # GetNext feeds Conv2D: one edge, keyed by both ends for the hover highlight
    edge_sets = [v for v in fig.spec["datasets"].values() if v and "x1" in v[0]]
    assert any({e["end"] for e in v} == {"source", "target"} and len(v) == 2 for v in edge_sets)
    (tab,) = [t for t in o.view.tables if t.id == "strategy-graph-nodes"]
    by_type = {r["type"]: r for r in tab.rows}
    assert by_type["Conv2D"]["inputs"].startswith(f"{by_type['GetNext']['node_id']} GetNext")
    assert by_type["GetNext"]["outputs"] == f"{by_type['Conv2D']['node_id']} Conv2D"


def test_strategy_graph_parts_matrix_and_click_through(tmp_path):
    """Forward / backward / recompute parts from the reader's phase (scopes Gradients/..., recompute_...); the
    strategy matrix rows of a drawn operator equal its in_strategy; the strategy view's click sets the graph's
    stage and part; the page budget bounds the nodes of a big graph."""
    from reportgen.sections.strategy_graph import GRAPH_NODES

    truth, o = _generated_strategy(tmp_path, stages=2, dp=2, mp=2, layers=12, micro=4, recompute=True)
    gd = o.analysis.data["graph"]
    parts = {(s["stage"], s["phase"]): s for s in gd["stats"]}
    assert set(parts) == {(s, p) for s in (1, 2) for p in ("forward", "backward", "recompute")}
    assert all(s["nodes"] <= GRAPH_NODES for s in parts.values())
    assert parts[(1, "forward")]["nodes"] < parts[(1, "forward")]["ops"]  # 124 operators: namespaces closed
    assert parts[(1, "recompute")]["nodes"] == parts[(1, "recompute")]["ops"] == 24  # 2 per layer, all drawn
    nodes, mat = gd["nodes"], gd["matrix"]
    op = nodes[(nodes["stage"] == 1) & (nodes["phase"] == "recompute") & (nodes["type"] == "MatMul")].iloc[0]
    got = mat[mat["uid"] == op["uid"]]
    want = json.loads(op["strategy"])
    assert [[int(x) for x in g["slices"]] for _, g in got.groupby("input", sort=False)] == want
    assert op["inputs"].endswith(" Add")  # the recompute MatMul reads its layer's forward Add (another part)
    (view,) = [f for f in o.view.figures if f.id == "strategy-view"]
    assert view.spec["usermeta"]["rg_click"] == [{"field": "stage", "signal": "sg_stage"},
                                                 {"field": "phase", "signal": "sg_phase"}]
    pts = next(v for v in view.spec["datasets"].values() if v and "role" in v[0])
    assert {r["phase"] for r in pts} == {"forward", "backward", "recompute"}
    # the node table: every operator of every stage, its outputs are the operators that name it as an input
    tab = o.analysis.tables["graph_ops"]
    assert len(tab) == sum(v["ops"] for v in truth["per_stage"].values())


def test_strategy_view_namespace_control_highlights_its_operators(tmp_path):
    """Seed S0 row 59: choosing a namespace highlights its operators in the strategy view (a page control that
    sets the view's sv_namespace param; the test is a prefix of the operator's full name)."""
    from reportgen.sections.strategy import NS_OPTIONS, namespace_control

    truth, o = _generated_strategy(tmp_path, stages=2, dp=1, mp=2, layers=2, micro=2)
    (ctl,) = [c for c in o.view.controls if c.signal == "sv_namespace"]
    values = [v for v, _ in ctl.options]
    assert values[0] == "" and "Default/network/model" in values and "Gradients" in values
    (view,) = [f for f in o.view.figures if f.id == "strategy-view"]
    assert {"name": "sv_namespace", "value": ""} in view.spec["params"]
    layer = next(x for x in charts.single_view(view.spec)["layer"] if x["mark"]["type"] == "tick")
    assert "sv_namespace + '/'" in layer["encoding"]["opacity"]["condition"]["test"]
    # many namespaces: the options stop at the deepest level that fits
    ns = pd.DataFrame({"namespace": [f"a/b{i}/c{j}" for i in range(10) for j in range(10)], "depth": 3})
    ns = pd.concat([ns, pd.DataFrame({"namespace": ["a"] + [f"a/b{i}" for i in range(10)],
                                      "depth": [1] + [2] * 10})])
    opts = [v for v, _ in namespace_control(ns).options]
    assert len(opts) - 1 <= NS_OPTIONS and opts[1:] == ["a"] + [f"a/b{i}" for i in range(10)]
