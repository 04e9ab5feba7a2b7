"""FLOPs section: MindInsight FLOPs_norm and helper rules on pp2x4 (both key generations), the Kineto shape-based
estimate against torch's own key_averages FLOPs, the readers' tolerance, and unavailability."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from reportgen import metrics
from reportgen.model import Run
from reportgen.readers import read_run
from reportgen.readers.mindinsight_flops import parse_flops_detail, parse_flops_summary
from reportgen.sections import Options, run_sections
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


def test_flops_rule_fires_on_a_slow_rank():
    per = pd.DataFrame({"rank": [0, 1, 2, 3], "flops": [1e12] * 4, "flops_per_s": [100e12, 100e12, 100e12, 60e12],
                        "utilization_ratio": 0.5, "generation": "ms1"})
    run = Run(name="t", source_format="mindinsight", source_path="-", ranks=[0, 1, 2, 3], tables={"mi_flops": per})
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
    assert m["ops_skipped_as_nested"] == {"aten::linear": 360, "aten::matmul": 200}  # no double counting
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
    est = fl.estimate_ops(cpu)
    inner = est[est["innermost"]].set_index("name")["flops"]
    assert "aten::linear" not in inner and "aten::mul" not in inner
    assert inner["aten::addmm"] == 2 * 256 * 256 * 384
    assert inner["aten::bmm"] == 2 * 8 * 16 * 32 * 4
    assert inner["aten::matmul"] == 2 * (2 * 3) * 5 * 6 * 7
    assert fl.op_flops("aten::linear", [[4, 64, 256], [384, 256], [384]]) == 2 * 256 * 256 * 384
    assert fl.op_flops("aten::conv2d", [[2, 3, 8, 8], [16, 3, 3, 3], [16]]) == 2 * 2 * 16 * 64 * 27
    assert fl.op_flops("aten::convolution_backward", [[2, 16, 8, 8], [2, 3, 8, 8], [16, 3, 3, 3]]) == \
        2 * 2 * 2 * 16 * 64 * 27
    assert fl.op_flops("aten::mm", [[3], [4]]) != fl.op_flops("aten::mm", [[3], [4]])  # NaN, not an exception


def test_unknown_sources_are_unavailable():
    ascend = read_run(fixture_dir("ascend", "msinsight", "test", "st", "level2"))
    ascend.loaders.pop("kernels", None)  # no kernel_details.csv: nothing to estimate from
    out = _flops(ascend)
    assert out.status == "unavailable"
    assert "kernel_details" in out.reason and "record_shapes" in out.reason
    empty = Run(name="t", source_format="kineto", source_path="-", ranks=[0])
    out = _flops(empty)
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
    from reportgen.sections.flops import ascend_matmul_flops

    assert ascend_matmul_flops("4096,1024;4096,1024", "4096,4096") == 2 * 4096 * 1024 * 4096
    assert ascend_matmul_flops("8,4096,1024;1024,2048", "8,4096,2048") == 2 * 8 * 4096 * 1024 * 2048
    run = read_run(fixture_dir("ascend", "msinsight", "test", "st", "level2"))
    (o,) = run_sections(run, only=["flops"])
    assert o.status == "ok"
    pr = o.analysis.tables["per_rank"].set_index("rank")
    assert set(pr.index) == {0, 2}  # ranks 1 and 3 shipped no kernel_details.csv
    assert pr.loc[0, "flops"] > 1e12 and o.analysis.metrics["flops_estimate"] is True
    assert "MatMul" in o.analysis.metrics["flops_source"]
