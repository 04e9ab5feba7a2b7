"""FLOPs section: MindInsight FLOPs_norm and helper rules on pp2x4 (both key generations), the Kineto shape-based
estimate against torch's own key_averages FLOPs, the readers' tolerance, and unavailability."""

from __future__ import annotations

import json
import re
import shutil

import pandas as pd
import pytest

from reportgen import metrics
from reportgen.model import Run
from reportgen.readers import read_run
from reportgen.readers.mindinsight_flops import parse_flops_detail, parse_flops_summary
from reportgen.cli import section_options
from reportgen.sections import Options, run_sections
from reportgen import flopcount as fc
from reportgen.sections import flops as fl

from conftest import fixture_dir, reference_file

GLOO = ("generated", "torch_gloo_ddp4_baseline")
#: The estimate counts matmuls only; torch's key_averages also gives mul/add one FLOP per element (0.07% of the
#: total on this run). Stated tolerance: 0.5% of torch's total, and the matmul ops must match exactly.
KINETO_TOLERANCE = 0.005


def _flops(run, options=None):
    out = run_sections(run, options or Options(), only=["flops"])[0]
    return out


def _doc(run, options=None):
    outcomes = run_sections(run, options or Options(), only=["flops"])
    return json.loads(metrics.dumps(metrics.build(run, outcomes)))


def _norm_reference():
    ref = json.loads(reference_file("mindinsight", "mi_cluster_propose_pp2x4", "cube_vec_flops_variant.json")
                     .read_text())
    return ref, {r["rank_id"]: r["FLOPs_norm"] for r in ref["cluster_flops.get_flops()"]["result"]}


def _check_pp2x4(run):
    ref, norm = _norm_reference()
    doc = _doc(run)
    sec = doc["sections"]["flops"]
    assert sec["status"] == "ok"
    rows = {r["rank"]: r for r in sec["tables"]["per_rank"]}
    assert sorted(rows) == [0, 1, 2, 3]
    for rank, value in norm.items():
        assert rows[rank]["ratio_to_max"] == pytest.approx(value, abs=1e-9)
    # SUMMARY.md §A, rounded as there
    assert [round(rows[r]["ratio_to_max"], 6) for r in range(4)] == [0.325069, 0.325064, 0.999988, 1.0]
    flops_ref = {r["rank_id"]: r["FLOPs"] for r in ref["parallel.get_rank_flops()"]["result"]}
    fps_ref = {r["rank_id"]: r["FLOPS"] for r in ref["parallel.get_rank_flops_per_second()"]["result"]}
    for rank in range(4):
        assert rows[rank]["flops"] == pytest.approx(flops_ref[rank] * 1e6, rel=1e-12)  # MFLOPs -> FLOPs
        assert rows[rank]["flops_per_s"] == pytest.approx(fps_ref[rank] * 1e9, rel=1e-12)  # GFLOPS -> FLOP/s
        assert rows[rank]["stage"] == (1 if rank < 2 else 2)
    # stage rule: MindInsight's pipeline_parallel_flops = stage 2, 329610.3845 MFLOPs, +50.94%
    seed = ref["ParallelProposer.analyze()"]["result"]["parallel_strategy"]["pipeline_parallel_flops"]
    stage = [f for f in doc["findings"] if f["id"] == "stage_flops_imbalance"]
    assert len(stage) == 1
    ev = stage[0]["evidence"]
    assert ev["stage"] == seed["stage"] == 2
    assert ev["value"] / 1e6 == pytest.approx(seed["val"], abs=5e-5)
    assert round(ev["above_mean_ratio"] * 100, 2) == seed["percent"] == 50.94
    assert stage[0]["ranks"] == [2, 3]
    per_stage = {r["stage"]: r for r in sec["tables"]["per_stage"]}
    assert per_stage[2]["flops_sum"] == pytest.approx((329608.369 + 329612.4) * 1e6)
    assert per_stage[2]["flops_per_rank"] / 1e6 == pytest.approx(329610.3845)
    # FLOPS rule: mean 5132.21 GFLOPS, slowest rank 2 at 5.32% below -> below 20%, and the seed emits nothing
    assert "flops_per_second" not in ref["ParallelProposer.analyze()"]["result"]
    assert not [f for f in doc["findings"] if f["id"] == "flops_per_s_low"]
    assert max(r["below_mean_flops_per_s_ratio"] for r in rows.values()) == pytest.approx(
        (5132.21125 - 4859.39) / 5132.21125)
    return sec


def test_pp2x4_ratio_to_max_and_stage_rule(pp2x4):
    sec = _check_pp2x4(read_run(pp2x4))
    assert sec["metrics"]["generations"] == ["ms1"]
    assert {r["rank"]: r["utilization_ratio"] for r in sec["tables"]["per_rank"]}[2] == pytest.approx(0.00725)


def test_pp2x4_cube_vec_variant(pp2x4, tmp_path):
    work = tmp_path / "pp2x4"
    shutil.copytree(pp2x4, work, ignore=shutil.ignore_patterns("variant_*"))
    for f in (pp2x4 / "variant_r2.0_flops_summary").glob("flops_summary_*.json"):
        shutil.copy(f, work / f.name)
    sec = _check_pp2x4(read_run(work))
    assert sec["metrics"]["generations"] == ["ms2.0"]
    row0 = sec["tables"]["per_rank"][0]
    assert row0["cube_flops"] == pytest.approx(107146.763e6) and row0["vec_flops"] == 0
    # seed row 46: the cube / vector split and the profiler's cube / vector rates per rank, on the page too
    ref, _ = _norm_reference()
    for r in ref["cluster_flops.get_flops()"]["result"]:
        row = sec["tables"]["per_rank"][r["rank_id"]]
        assert row["cube_flops_per_s"] == pytest.approx(r["cube_FLOPS"] * 1e9)
        assert row["vec_flops_per_s"] == r["vec_FLOPS"] == 0
        assert row["vec_utilization_ratio"] == pytest.approx(r["vec_FLOPS_Utilization"] / 100)
    (o,) = run_sections(read_run(work), only=["flops"])
    figs = {f.id: f for f in o.view.figures}
    data = [v for v in figs["flops-cube-vec"].spec["datasets"].values()][0]
    cube = {d["rank"]: d["flops"] for d in data if d["unit"] == "Cube"}
    assert cube[2] == pytest.approx(329608.369e6) and {d["flops"] for d in data if d["unit"] == "Vector"} == {0}
    labels = {c.label for t in o.view.tables if t.id == "flops-per-rank" for c in t.columns}
    assert {"Cube FLOPs", "Vector FLOPs", "Cube rate", "Vector rate", "Vector utilisation"} <= labels
    assert any("no vector FLOPs" in n for n in o.view.notes)
    assert any("MFU not computed" in n for n in o.view.notes)  # the profiler's rate is not per second


def test_rank_top_ops_keeps_n_per_rank_and_sums_the_rest():
    ops = pd.DataFrame({"rank": [0, 0, 0, 0, 1, 1], "op": ["a", "b", "c", "d", "a", "b"],
                        "flops": [5.0, 40.0, 3.0, 2.0, 1.0, float("nan")], "calls": [1, 2, 3, 4, 5, 6]})
    top = fl.rank_top_ops(ops, n=2)
    r0 = top[top["rank"] == 0]
    assert r0["op"].tolist() == ["b", "a", fl.OTHER_OPS]
    assert r0["flops"].tolist() == [40.0, 5.0, 5.0] and r0["others"].tolist() == [0, 0, 2]
    assert r0["calls"].tolist() == [2, 1, 7]
    assert top[top["rank"] == 1]["op"].tolist() == ["a"]  # a NaN (not counted) op is not drawn
    assert fl.rank_top_ops(ops, ranks=[1], n=2)["rank"].unique().tolist() == [1]
    assert top["flops"].sum() == ops["flops"].sum()  # nothing lost: the rest is in "other operators"


def test_every_ranks_operators_are_reachable_from_the_grid():
    """Seed row 45 (S0: click a device of the FLOPs grid -> its operators' FLOPs): the grid's click sets the rank
    control, and the per-operator chart holds every rank's top operators (Ascend st/level2: ranks 0 and 2)."""
    run = read_run(fixture_dir("ascend", "msinsight", "test", "st", "level2"))
    (o,) = run_sections(run, only=["flops"])
    figs = {f.id: f for f in o.view.figures}
    assert figs["flops-grid"].spec["usermeta"]["rg_click"] == {"field": "rank", "signal": "flops_rank"}
    (ctl,) = [c for c in o.view.controls if c.signal == "flops_rank"]
    assert [v for v, _ in ctl.options] == [0, 2]
    spec = figs["flops-rank-ops"].spec
    assert {"name": "flops_rank", "value": ctl.default} in spec["params"]
    data = [v for v in spec["datasets"].values()][0]
    ops = o.analysis.tables["ops"]
    for rank in (0, 2):
        mine = {d["op"]: d["flops"] for d in data if d["rank"] == rank}
        assert mine["FlashAttentionScoreGrad"] == pytest.approx(
            ops[(ops["rank"] == rank) & (ops["op"] == "FlashAttentionScoreGrad")]["flops"].iloc[0])
        assert sum(mine.values()) == pytest.approx(o.analysis.tables["per_rank"].set_index("rank").loc[rank, "flops"])


def test_flops_rule_fires_on_a_slow_rank():
    per = pd.DataFrame({"rank": [0, 1, 2, 3], "flops": [1e12] * 4, "flops_per_s": [100e12, 100e12, 100e12, 60e12],
                        "utilization_ratio": 0.5, "generation": "ms1"})
    run = Run(name="t", source_format="mindinsight", source_path="-", ranks=[0, 1, 2, 3], tables={"rank_flops": per})
    out = _flops(run)
    assert out.status == "ok"
    found = [f for f in out.view.findings if f.id == "flops_per_s_low"]
    # mean 90e12, rank 3 (90-60)/90 = 33.3% below > 20%; the others are 11.1% above
    assert len(found) == 1 and found[0].ranks == [3]
    assert found[0].evidence["below_mean_ratio"] == pytest.approx(1 / 3)
    assert not [f for f in out.view.findings if f.id == "stage_flops_imbalance"]  # no stages
    # just at the limit: 20% below exactly does not fire (seed: p > 0.2)
    per["flops_per_s"] = [105e12, 105e12, 105e12, 75e12]  # mean 97.5, (97.5-75)/97.5 = 23% -> fires
    assert [f.ranks for f in _flops(run).view.findings if f.id == "flops_per_s_low"] == [[3]]
    per["flops_per_s"] = [104e12, 104e12, 104e12, 88e12]  # mean 100, 12% -> quiet
    assert not _flops(run).view.findings


def test_kineto_gloo_estimate_matches_torch_key_averages():
    root = fixture_dir(*GLOO)
    run = read_run(root)
    doc = _doc(run)
    sec = doc["sections"]["flops"]
    assert sec["status"] == "ok"
    m = sec["metrics"]
    assert m["flops_estimate"] is True and m["ops_counted"] == ["aten::addmm", "aten::mm"]
    assert m["ops_not_counted"] == {fc.NESTED: {"aten::linear": 360, "aten::matmul": 200}}  # no double counting
    ops = pd.DataFrame(sec["tables"]["ops"])
    for row in sec["tables"]["per_rank"]:
        rank = row["rank"]
        ka = json.loads((root / "op_summary" / f"rank{rank}.key_averages.json").read_text())
        items = ka["ops"]
        torch_flops = {e["name"]: e["flops"] for e in items if e.get("flops")}
        total = sum(torch_flops.values())
        assert total == pytest.approx(14.10e9, rel=1e-3)  # research: 14.10 GFLOP per rank
        assert abs(row["flops"] - total) <= KINETO_TOLERANCE * total
        mine = ops[ops["rank"] == rank].set_index("op")["flops"].to_dict()
        for op in ("aten::mm", "aten::addmm"):
            assert mine[op] == torch_flops[op]  # exact per matmul op
        assert row["ratio_to_max"] == pytest.approx(1.0)
        assert row["mfu_ratio"] is None  # no peak known: not computed
    assert m["peak_flops_per_s"] is None and "peak unknown" in m["mfu_note"]
    # steps: 5 profiled steps per rank
    steps = pd.DataFrame(sec["tables"]["per_rank_step"])
    assert steps.groupby("rank").size().tolist() == [5, 5, 5, 5]


def test_kineto_mfu_from_option_and_from_device_name():
    root = fixture_dir(*GLOO)
    run = read_run(root)
    a = _flops(run, Options({"peak_tflops": 2})).analysis
    pr = a.tables["per_rank"]
    assert (pr["mfu_ratio"] == pr["flops_per_s"] / 2e12).all()
    run.tables["device_properties"] = pd.DataFrame({"rank": [0, 1, 2, 3], "name": ["NVIDIA A100-SXM4-80GB"] * 4})
    a = _flops(run).analysis
    assert a.metrics["peak_flops_per_s"] == 312e12
    assert a.tables["per_rank"]["mfu_ratio"].iloc[0] == pytest.approx(a.tables["per_rank"]["flops_per_s"].iloc[0] / 312e12)


def test_nested_ops_counted_once_and_shape_formulas():
    rows = [  # linear -> addmm on one thread; a bare bmm; matmul broadcasting on another thread
        ("aten::linear", 1, "[[4, 64, 256], [384, 256], [384]]", 0.0, 1.0),
        ("aten::addmm", 1, "[[384], [256, 256], [256, 384], [], []]", 0.1, 0.8),
        ("aten::bmm", 1, "[[8, 16, 32], [8, 32, 4]]", 2.0, 0.5),
        ("aten::matmul", 2, "[[2, 1, 5, 6], [3, 6, 7]]", 0.0, 1.0),
        ("aten::mul", 2, "[[5], [5]]", 1.5, 0.1),
    ]
    cpu = pd.DataFrame(rows, columns=["name", "tid", "input_dims", "start_ms", "dur_ms"]).assign(rank=0)
    est = fc.estimate_aten_ops(cpu)
    inner = est[est["innermost"]].set_index("name")["flops"]
    assert "aten::linear" not in inner and "aten::mul" not in inner
    assert inner["aten::addmm"] == 2 * 256 * 256 * 384
    assert inner["aten::bmm"] == 2 * 8 * 16 * 32 * 4
    assert inner["aten::matmul"] == 2 * (2 * 3) * 5 * 6 * 7
    assert fc.aten_flops("aten::linear", [[4, 64, 256], [384, 256], [384]]) == 2 * 256 * 256 * 384
    assert fc.aten_flops("aten::conv2d", [[2, 3, 8, 8], [16, 3, 3, 3], [16]]) == 2 * 2 * 16 * 64 * 27
    assert fc.aten_flops("aten::convolution_backward", [[2, 16, 8, 8], [2, 3, 8, 8], [16, 3, 3, 3]]) == \
        2 * 2 * 2 * 16 * 64 * 27
    assert fc.aten_flops("aten::mm", [[3], [4]]) != fc.aten_flops("aten::mm", [[3], [4]])  # NaN, not an exception
    # attention (torch's sdpa_flop_count): QK^T + PV, backward twice the forward; q/k/v [B, H, S, D]
    q, k = [2, 4, 16, 8], [2, 4, 32, 8]
    assert fc.aten_flops("aten::_scaled_dot_product_flash_attention", [q, k, k]) == 2 * 2 * 4 * 16 * 32 * (8 + 8)
    assert fc.aten_flops("aten::_scaled_dot_product_efficient_attention_backward", [q, q, k, k]) == \
        2 * 2 * 2 * 4 * 16 * 32 * (8 + 8)


def test_each_ops_flops_are_its_own_dims_formula():
    """estimate_aten_ops computes each distinct (name, dims) once: every op's FLOPs still equal aten_flops of its
    own name and parsed Input Dims (ops repeated across ranks and steps, in any order; dims missing, not JSON, or
    lists instead of text)."""
    import json
    import math

    import numpy as np

    rng = np.random.default_rng(3)
    kinds = [("aten::mm", "[[4, 8], [8, 16]]"), ("aten::mm", "[[2, 8], [8, 16]]"), ("aten::bmm", "[[2, 3, 4], [2, 4, 5]]"),
             ("aten::addmm", "[[5], [3, 4], [4, 5], [], []]"), ("aten::mm", None), ("aten::mm", "not json"),
             ("aten::conv2d", "[[2, 3, 8, 8], [16, 3, 3, 3], [16]]"), ("aten::mul", "[[5], [5]]"),
             ("aten::linear", "[[4, 64, 256], [384, 256], [384]]")]
    for case in range(3):
        pick = rng.integers(0, len(kinds), 300)
        cpu = pd.DataFrame({"name": [kinds[i][0] for i in pick], "input_dims": [kinds[i][1] for i in pick],
                            "rank": rng.integers(0, 4, 300), "tid": 1, "start_ms": np.arange(300) * 2.0,
                            "dur_ms": 1.0})
        if case == 2:  # dims as lists, not text: computed row by row
            cpu["input_dims"] = [json.loads(t) if isinstance(t, str) and t != "not json" else t for t in cpu["input_dims"]]
        calls = []
        real = fc.aten_flops
        fc.aten_flops = lambda name, dims: calls.append(name) or real(name, dims)
        try:
            est = fc.estimate_aten_ops(cpu)
        finally:
            fc.aten_flops = real
        assert len(est) == int(sum(kinds[i][0] != "aten::mul" for i in pick))
        parsed = {(n, str(d)) for n, d in zip(est["name"], est["input_dims"])
                  if isinstance(d, list) or (isinstance(d, str) and d != "not json")}
        assert len(calls) == len(parsed)  # once per distinct (name, dims) whose dims parse
        for name, dims, flops in zip(est["name"], est["input_dims"], est["flops"]):
            parsed = json.loads(dims) if isinstance(dims, str) and dims != "not json" else dims
            want = fc.aten_flops(name, parsed) if isinstance(parsed, list) else math.nan
            assert flops == want or (math.isnan(flops) and math.isnan(want)), (name, dims)


def test_unknown_sources_are_unavailable():
    ascend = read_run(fixture_dir("ascend", "msinsight", "test", "st", "level2"))
    ascend.loaders.pop("kernels", None)  # no kernel_details.csv: nothing to estimate from
    ascend.loaders.pop("op_flops", None)
    out = _flops(ascend, section_options(ascend))  # with the registry's provenance, as the CLI runs it
    assert out.status == "unavailable"
    assert out.reason.startswith("needs op_flops (Ascend: kernel_details.csv")  # the run's family first
    assert "kernel_details" in out.reason and "record_shapes" in out.reason
    assert _flops(ascend).reason == "needs op_flops or rank_flops"  # stated from what the run lacks
    empty = Run(name="t", source_format="kineto", source_path="-", ranks=[0])
    out = _flops(empty, section_options(empty))
    assert out.status == "unavailable" and "record_shapes" in out.reason
    no_shapes = Run(name="t", source_format="kineto", source_path="-", ranks=[0], tables={"cpu_ops": pd.DataFrame(
        {"rank": [0], "name": ["aten::add"], "tid": [1], "input_dims": ["[]"], "input_types": ["[]"],
         "start_ms": [0.0], "dur_ms": [1.0]})})
    assert _flops(no_shapes).status == "unavailable"


def test_readers_tolerate_bad_files(tmp_path):
    problems = []
    bad = tmp_path / "flops_summary_0.json"
    for text in ("{not json", "[1, 2]", '{"other": 1}', '{"FLOPs": "x", "FLOPS": null}'):
        bad.write_text(text)
        assert parse_flops_summary(bad, 0, problems) == {}
    assert len(problems) >= 4
    assert parse_flops_summary(tmp_path / "missing.json", 0, problems) == {}
    bad.write_bytes(b"\xff\xfe\x00garbage")
    assert parse_flops_summary(bad, 0, problems) == {}
    # 2.2/2.3 generation: cube/vec, no utilisation
    bad.write_text('{"cube_FLOPs": 10, "cube_FLOPS": 2, "vec_FLOPs": 5, "vec_FLOPS": 1}')
    row = parse_flops_summary(bad, 7, problems)["mi_flops"].iloc[0]
    assert (row["rank"], row["flops"], row["flops_per_s"], row["generation"]) == (7, 15e6, 3e9, "ms2.2")
    txt = tmp_path / "flops_0.txt"
    txt.write_text("op_full_name,MFLOPs(10^6 cube),GFLOPS(10^9 cube),MFLOPs(10^6 vector),GFLOPS(10^9 vector)\n"
                   "Default/a-op1,1,2,3,4\nDefault/b, with comma-op2,5,6,7,8\ntruncated,1\nDefault/c-op3,x,1,1,1\n")
    n = len(problems)
    df = parse_flops_detail(txt, 0, problems)["mi_flops_ops"]
    assert df["op"].tolist() == ["Default/a-op1", "Default/b, with comma-op2"]
    assert df["mflops"].tolist() == [4, 12] and df["gflops"].tolist() == [6, 14]
    assert len(problems) == n + 2  # one per kind (file, column, reason): the truncated row, the non-number
    txt.write_text("garbage header\n1,2\n")
    assert parse_flops_detail(txt, 0, problems) == {}
    txt.write_text("")
    assert parse_flops_detail(txt, 0, problems) == {}


def test_flops_detail_fixture_headers():
    root = fixture_dir("mindinsight", "mi_profiler_single")
    problems = []
    old = parse_flops_detail(root / "flops_0.txt", 0, problems)["mi_flops_ops"]  # FLOPs, FLOPS, FLOPS utilization
    assert len(old) == 4 and (old["mflops"] == 333.0).all() and (old["utilization_pct"] == 33.0).all()
    new = parse_flops_detail(root / "flops_1.txt", 1, problems)["mi_flops_ops"]  # cube/vec split
    assert len(new) == 10 and (new["mflops"] == 666.0).all() and (new["mflops_cube"] == 333.0).all()
    assert problems == []
    summ = parse_flops_summary(root / "flops_summary_0.json", 0, problems)["mi_flops"].iloc[0]
    assert summ["flops"] == pytest.approx(8167.743e6) and summ["utilization_ratio"] == pytest.approx(0.03765)


def test_grid_uses_hosts_and_devices_when_known_else_a_rank_strip(pp2x4):
    run = read_run(pp2x4)
    strip = _flops(run).view.figures[0]
    assert strip.id == "flops-grid" and "ranks" in strip.title
    run.hosts = {0: "node-a", 1: "node-a", 2: "node-b", 3: "node-b"}
    run.devices = {0: 0, 1: 1, 2: 0, 3: 1}
    out = _flops(run)
    grid = out.view.figures[0]
    assert "hosts × devices" in grid.title
    assert "device_id" in json.dumps(grid.spec) and "node-b" in json.dumps(grid.spec)
    assert out.analysis.tables["per_rank"]["host"].tolist() == ["node-a", "node-a", "node-b", "node-b"]


def test_ascend_flops_estimated_from_matmul_shapes():
    def mm(i, o, fi="ND;ND", fo="ND", t="MatMulV2"):
        return fc.ascend_flops(t, i, fi, o, fo)

    assert mm("4096,1024;4096,1024", "4096,4096") == (2 * 4096 * 1024 * 4096, "")
    assert mm("8,4096,1024;1024,2048", "8,4096,2048", t="BatchMatMulV2") == (2 * 8 * 4096 * 1024 * 2048, "")
    assert mm("32,4096;32,9216", "4096,9216", "FORMAT_ND;FORMAT_ND", "FORMAT_ND")[0] == 2 * 4096 * 32 * 9216  # A^T
    assert mm("1024;8,1024,64", "8,1,64")[0] != mm("1024;8,1024,64", "8,1,64")[0]  # a vector A: not read as one
    assert mm("64,1024;2,1024,32;2", "64,32", t="GroupedMatmul")[0] == 2 * 64 * 1024 * 32
    f, note = mm("2,8,16,16;8,2,16,16", "8,8,16,16", "FRACTAL_NZ;FRACTAL_NZ", "FRACTAL_NZ")
    assert f != f and note.startswith("ambiguous") and "FRACTAL_NZ" in note  # padded, blocked: counts nothing
    f, note = mm("8,128,4096;8,128,4096;8,128,4096", "8,128,4096", t="FlashAttentionScore")
    assert f != f and "softmax statistics" in note  # no [B, N, S, 8] shape: the heads are unknown
    run = read_run(fixture_dir("ascend", "msinsight", "test", "st", "level2"))
    (o,) = run_sections(run, only=["flops"])
    assert o.status == "ok"
    pr = o.analysis.tables["per_rank"].set_index("rank")
    assert set(pr.index) == {0, 2}  # ranks 1 and 3 shipped no kernel_details.csv
    assert pr.loc[0, "flops"] > 1e12 and o.analysis.metrics["flops_estimate"] is True
    assert "matmul" in o.analysis.metrics["flops_source"]
    # the format leaves two MatMulV2 ambiguous (FRACTAL_NZ): nothing counted for them, and the metrics say so
    nc = o.analysis.metrics["ops_not_counted"]
    assert nc["ambiguous: matmul in format FRACTAL_NZ"] == {"MatMulV2": 2}
    # FlashAttention is counted from its shapes (SBH: q [S=4096, B=1, H=2048], softmax_max [B, N=16, S, 8]: D = 128)
    assert o.analysis.metrics["ops_counted"] == ["FlashAttentionScore", "FlashAttentionScoreGrad", "MatMulV2",
                                                 "MatMulV3"]
    assert set(o.analysis.metrics["ops_counted_with_caveat"][fc.ATTENTION_DENSE]) == {"FlashAttentionScore",
                                                                                       "FlashAttentionScoreGrad"}
    ops = o.analysis.tables["ops"].set_index(["rank", "op"])
    assert ops.loc[(0, "FlashAttentionScore"), "flops"] == ops.loc[(0, "FlashAttentionScore"), "calls"] * FA_FWD


#: one FlashAttentionScore kernel of the st/level2 fixture (rank 0's kernel_details.csv): layout SBH, GQA (8 kv heads)
FA_IN = "4096,1,2048;4096,1,1024;4096,1,1024;;;;2048,2048;;;;;;;;"
FA_OUT = "1,16,4096,8;1,16,4096,8;;4096,1,2048"
FA_FWD = 4 * 1 * 16 * 4096 * 4096 * 128  # 4·B·N·S_q·S_kv·D


def test_flash_attention_counted_from_its_shapes_in_every_layout():
    f, note = fc.ascend_flops("FlashAttentionScore", f'"{FA_IN}"', "NCL;NCL;NCL", f'"{FA_OUT}"', "ND")
    assert (f, note) == (FA_FWD, fc.ATTENTION_DENSE)
    grad_in = "4096,1,2048;4096,1,1024;4096,1,1024;4096,1,2048;2048,2048;1,16,4096,8;1,16,4096,8;;4096,1,2048"
    assert fc.ascend_flops("FlashAttentionScoreGrad", grad_in, "", "4096,1,2048;4096,1,1024;4096,1,1024", "")[0] \
        == 2.5 * FA_FWD == fc.FLASH_BACKWARD_FACTOR * FA_FWD
    # BSH [B, S, H] with a different key length; BNSD / BSND [.., D]
    bsh = fc.ascend_flops("FlashAttentionScore", "2,512,1024;2,256,1024;2,256,1024", "", "2,8,512,8;2,8,512,8;;"
                          "2,512,1024", "")[0]
    assert bsh == 4 * 2 * 8 * 512 * 256 * 128
    assert fc.ascend_flops("FlashAttentionScore", "2,8,512,64;2,8,256,64;2,8,256,64", "", "2,8,512,8", "")[0] == \
        4 * 2 * 8 * 512 * 256 * 64
    assert fc.ascend_flops("FlashAttentionScore", "2,512,8,64;2,256,8,64;2,256,8,64", "", "2,8,512,8", "")[0] == \
        4 * 2 * 8 * 512 * 256 * 64
    # TND: the packed sequences' lengths are attributes: nothing counted, and why
    f, note = fc.ascend_flops("FlashAttentionScore", "1024,8,64;1024,8,64;1024,8,64", "", "1024,8,8;1024,8,8", "")
    assert f != f and "TND" in note


# --------------------------------------------------------------------------- issue 25: one canonical table


ALEXNET = ("ascend", "msinsight", "test", "data", "pytorch")


def test_ascend_convolutions_and_their_backprops_are_counted():
    # AlexNet's first conv, as torch_npu writes it (float32: C0 = 8; 3 input channels computed as 8)
    shapes = ("32,1,224,224,8;121,4,16,8;64", "NC1HWC0;FRACTAL_Z;NCHW", "32,8,55,55,8", "NC1HWC0")
    fwd = 2 * 32 * 64 * 55 * 55 * 8 * 11 * 11
    assert fc.ascend_flops("Conv2D", *shapes[:2], *shapes[2:]) == (fwd, fc.PADDED)
    # grad-input [input_size, filter, out_backprop] -> dx; grad-weight [x, filter_size, out_backprop] -> dw: the same
    assert fc.ascend_flops("Conv2DBackpropInput", "4;288,16,16,8;32,32,13,13,8", "NCHW;FRACTAL_Z;NC1HWC0",
                           "32,32,13,13,8", "NC1HWC0")[0] == 2 * 32 * 256 * 13 * 13 * 256 * 9
    assert fc.ascend_flops("Conv2DBackpropFilter", "32,1,224,224,8;4;32,8,55,55,8", "NC1HWC0;NCHW;NC1HWC0",
                           "121,4,16,8", "FRACTAL_Z")[0] == fwd
    # logical formats: exact, groups from C_in / the weight's C_in per group
    assert fc.ascend_flops("Conv2D", "1,3,224,224;64,3,7,7", "NCHW;NCHW", "1,64,112,112", "NCHW") == \
        (2 * 1 * 64 * 112 * 112 * 3 * 7 * 7, "")
    assert fc.ascend_flops("Conv2D", "2,56,56,64;32,16,3,3", "NHWC;NCHW", "2,56,56,32", "NHWC")[0] == \
        2 * 2 * 32 * 56 * 56 * 16 * 9  # groups = 4
    # shapes that do not agree, unknown formats: nothing counted, and why
    for args in (("Conv2D", "32,1,224,224,8;121,4,16,16", "NC1HWC0;FRACTAL_Z", "32,8,55,55,8", "NC1HWC0"),
                 ("Conv2D", "1,3,224,224;64,3,7,7", "NC1HWC0_C04;FRACTAL_Z_C04", "1,64,112,112", "NCHW"),
                 ("Conv2D", "1,3,x,224", "NCHW", "1,64,112,112", "NCHW")):
        f, note = fc.ascend_flops(*args)
        assert f != f and note


def test_ascend_cnn_counts_its_convolutions_per_step():
    run = read_run(fixture_dir(*ALEXNET, "text", "level1"))
    ops = run.table("op_flops")
    r0 = ops[ops["rank"] == 0]
    conv = r0[r0["type"] == "Conv2D"]
    # AlexNet at batch 32, channels as computed by the cube (conv1's 3 input channels padded to C0 = 8)
    expected = 2 * 32 * (64 * 55 * 55 * 8 * 121 + 192 * 27 * 27 * 64 * 25 + 384 * 13 * 13 * 192 * 9
                         + 256 * 13 * 13 * 384 * 9 + 256 * 13 * 13 * 256 * 9)
    assert len(conv) == 5 and conv["flops"].sum() == expected  # 49.4 GFLOP; the matmuls alone were 11.3
    assert (conv["method"] == fc.CONVOLUTION).all() and (conv["note"] == fc.PADDED).all()
    (o,) = run_sections(run, only=["flops"])
    assert o.status == "ok"
    m = o.analysis.metrics
    assert m["ops_padded_channels"] == 2 * 14 and 0 < m["flops_padded_channels_ratio"] < 1
    step = o.analysis.tables["per_rank_step"].set_index("rank")
    assert step.loc[0, "flops"] == pytest.approx(r0["flops"].sum()) and step.loc[0, "flops"] > 60e9 + 11e9
    assert step.loc[0, "flops_per_s"] == pytest.approx(step.loc[0, "flops"] / (step.loc[0, "step_ms"] / 1e3))


@pytest.mark.parametrize("level", ["level0", "level1", "level2"])
def test_ascend_db_export_counts_the_same_flops_as_the_text_export(level):
    text = read_run(fixture_dir(*ALEXNET, "text", level))
    db = read_run(fixture_dir(*ALEXNET, "db", level))
    t, d = text.table("op_flops"), db.table("op_flops")
    if t is None or fc.empty_op_flops().columns.tolist() != t.columns.tolist() or t["flops"].notna().sum() == 0:
        # no shapes in this export level: both say so the same way
        assert (d is None or d["flops"].notna().sum() == 0)
        return
    key = ["rank", "type", "method", "note"]
    pd.testing.assert_frame_equal(t.groupby(key)["flops"].agg(["size", "sum"]),
                                  d.groupby(key)["flops"].agg(["size", "sum"]))
    (a,), (b,) = run_sections(text, only=["flops"]), run_sections(db, only=["flops"])
    assert a.status == b.status == "ok"
    assert a.analysis.metrics["flops_total"] == b.analysis.metrics["flops_total"] > 0


def _trace(path, events, kernels=True):
    """A small Kineto trace: one ProfilerStep, the given CPU events, and (``kernels``) one GPU kernel per launch
    correlation listed in ``kernels`` (an iterable of ints) or none at all."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#1", "pid": 1, "tid": 1, "ts": 1000, "dur": 1000,
           "args": {}}] + events
    for corr in (kernels or ()):
        ev.append({"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_nn", "pid": 0, "tid": 7,
                   "ts": 1500 + corr, "dur": 10, "args": {"stream": 7, "device": 0, "correlation": corr}})
    path.write_text(json.dumps({"traceEvents": ev, "distributedInfo": {"rank": 0, "world_size": 1}}))


def _mm(ts, dur=50):
    return {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts, "dur": dur,
            "args": {"Input Dims": [[64, 128], [128, 256]], "Input type": ["float", "float"]}}


def _launch(ts, corr, name="cudaLaunchKernel"):
    return {"ph": "X", "cat": "cuda_runtime", "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": 5,
            "args": {"correlation": corr}}


def test_graph_captured_ops_count_no_flops(tmp_path):
    one = 2.0 * 64 * 128 * 256
    # an mm that launched kernel 1 (counted), and one recorded under graph capture: its launch (correlation 2) ran
    # no kernel of its own (the graph replays it later under cudaGraphLaunch, correlation 3)
    _trace(tmp_path / "rank0.pt.trace.json",
           [_mm(1100), _launch(1110, 1),
            _launch(1200, 90, "cudaStreamBeginCapture"), _mm(1210), _launch(1220, 2),
            _launch(1300, 91, "cudaStreamEndCapture"), _launch(1400, 3, "cudaGraphLaunch")],
           kernels=[1, 3])
    run = read_run(tmp_path)
    ops = run.table("op_flops").sort_values("start_ms")
    assert ops["flops"].tolist() == [one, 0.0]
    assert ops["note"].tolist() == ["", fc.NO_KERNEL]
    (o,) = run_sections(run, only=["flops"])
    assert o.analysis.tables["per_rank"]["flops"].tolist() == [one]
    assert o.analysis.metrics["ops_no_kernel"] == 1
    assert o.analysis.metrics["ops_not_counted"] == {fc.NO_KERNEL: {"aten::mm": 1}}


def test_cpu_only_traces_keep_counting_cpu_ops(tmp_path):
    _trace(tmp_path / "rank0.pt.trace.json", [_mm(1100), _mm(1210)], kernels=None)
    run = read_run(tmp_path)
    assert run.table("op_flops")["flops"].tolist() == [2.0 * 64 * 128 * 256] * 2


def test_a_rate_above_a_plausible_peak_is_a_data_problem():
    def run_of(flops_per_op):
        ops = fc.empty_op_flops()
        ops = pd.DataFrame({"rank": [0, 1], "step": [1.0, 1.0], "name": "mm", "type": "MatMulV2",
                            "flops": flops_per_op, "method": fc.MATMUL, "note": "", "start_ms": [0.0, 0.0],
                            "dur_ms": [1.0, 1.0]})[list(ops.columns)]
        st = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "step_ms": [10.0, 10.0]})
        return Run(name="t", source_format="x", source_path="-", ranks=[0, 1],
                   tables={"op_flops": ops, "step_time": st})

    run = run_of([1e12, 1e12])  # 100 TFLOP/s
    (o,) = run_sections(run, only=["flops"])
    assert o.analysis.tables["per_rank"]["flops_per_s"].tolist() == [1e14, 1e14] and not run.problems
    run = run_of([1e12, 1e15])  # 100 PFLOP/s on rank 1: no device does that
    (o,) = run_sections(run, only=["flops"])
    pr = o.analysis.tables["per_rank"]
    assert pr["flops_per_s"].iloc[0] == 1e14 and pr["flops_per_s"].isna().iloc[1]
    assert o.analysis.metrics["flops_per_s_refused"] == {"1": 1e17}
    assert any("plausible" in p.problem for p in run.problems)
    assert not [f for f in o.analysis.findings if f.id == "flops_per_s_low"]  # never a fact
    # a known peak is the bound
    (o,) = run_sections(run_of([1e12, 1e12]), Options({"peak_tflops": 50}), only=["flops"])
    assert o.analysis.tables["per_rank"]["flops_per_s"].isna().all()


def test_section_reads_no_family():
    import inspect

    assert "source_format" not in inspect.getsource(fl)
    code = "".join(inspect.getsource(f) for f in (fl.analyze, fl._from_ops, fl._from_ranks, fl.present,
                                                    fl.counted_ops, fl.findings)).lower()
    for word in ("kineto", "ascend", "mindinsight", "mindspore", "torch", "cpu_ops", "\"kernels\"", "mi_flops",
                 "family"):
        assert not re.search(rf"\b{re.escape(word)}\b", code), word
    assert fl.NEEDS == (("op_flops", "rank_flops"),)


def test_the_traces_own_flops_count_and_win_over_the_ops_inside(tmp_path):
    conv = {"ph": "X", "cat": "cpu_op", "name": "aten::conv2d", "pid": 1, "tid": 1, "ts": 1100, "dur": 80,
            "args": {"Input Dims": [[2, 3, 8, 8], [16, 3, 3, 3], [16]], "flops": 12345}}
    inner = {"ph": "X", "cat": "cpu_op", "name": "aten::cudnn_convolution", "pid": 1, "tid": 1, "ts": 1110,
             "dur": 50, "args": {"Input Dims": [[2, 3, 8, 8], [16, 3, 3, 3]]}}
    mul = {"ph": "X", "cat": "cpu_op", "name": "aten::mul", "pid": 1, "tid": 1, "ts": 1300, "dur": 10,
           "args": {"Input Dims": [[4, 5], [4, 5]], "flops": 20}}
    bad = {**mul, "ts": 1400, "args": {"Input Dims": [[4, 5], [4, 5]], "flops": -3}}
    _trace(tmp_path / "rank0.pt.trace.json", [conv, inner, _launch(1120, 1), mul, _launch(1305, 2), bad,
                                              _launch(1405, 4)], kernels=[1, 2, 4])
    run = read_run(tmp_path)
    ops = run.table("op_flops").set_index("name")
    assert ops.loc["aten::conv2d", "flops"] == 12345 and ops.loc["aten::conv2d", "method"] == fc.PROFILER
    assert ops.loc["aten::cudnn_convolution", "note"] == fc.NESTED  # counted in the op with its own count
    mul_rows = run.table("op_flops")[run.table("op_flops")["name"] == "aten::mul"]
    assert mul_rows["flops"].tolist() == [20.0]  # the refused (negative) one is not a counted op
    assert any("args['flops']" in p.problem for p in run.problems)


def test_kernels_without_recorded_launches_rule_out_no_op(tmp_path):
    # kernels but no runtime launch calls at all: which op launched what is unknown, so every op counts
    _trace(tmp_path / "rank0.pt.trace.json", [_mm(1100), _mm(1210)], kernels=[1, 2])
    run = read_run(tmp_path)
    assert run.table("cpu_ops")["kernel_launches"].tolist() == [-1, -1]
    assert run.table("op_flops")["flops"].tolist() == [2.0 * 64 * 128 * 256] * 2
