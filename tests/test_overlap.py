"""Overlap section on the MindInsight layout: equal to MindInsight 2.3.1 for every step and stage, and its rates."""

from __future__ import annotations

import json

import pytest

from reportgen import metrics
from reportgen.readers import read_run
from reportgen.sections import run_sections

from conftest import reference_file

ORDER = ["computation_incl_free_ms", "comm_not_overlapped_ms", "stage_ms", "receive_only_ms",
         "comm_not_overlapped_exclude_receive_ms"]


def _doc(path):
    run = read_run(path)
    return json.loads(metrics.dumps(metrics.build(run, run_sections(run, only=["overlap"]))))


def test_every_step_and_stage_equal_mindinsight(pp2x4):
    ref = json.loads(reference_file("mindinsight", "mi_cluster_propose_pp2x4", "as_shipped.json").read_text())
    sec = _doc(pp2x4)["sections"]["overlap"]
    # the average is MindInsight's file row, kept as the reference table (ours average the steps in scope)
    assert sec["status"] == "ok" and sec["metrics"]["average_source"] == "computed"
    per_rank = {r["rank"]: r for r in sec["tables"]["per_rank_file_average"]}
    per_step = {(r["rank"], r["step"]): r for r in sec["tables"]["per_rank_step"]}
    for step in range(6):
        for item in ref[f"cluster_step_trace.query(step_id={step})"]["result"]["info"]:
            row = per_rank[item["rank_id"]] if step == 0 else per_step[(item["rank_id"], step)]
            assert [round(row[c], 4) for c in ORDER] == item["step_bottleneck_info"][1:]
    for stage in (1, 2):
        ranks = {i["rank_id"] for i in ref[f"cluster_step_trace.query(step_id=0,stage_id={stage})"]["result"]["info"]}
        assert {r for r, row in per_rank.items() if row["stage"] == stage} == ranks


def test_rates_equal_mindinsight_helper(pp2x4):
    """The helper's rates come from the file's average row: kept under file_average_rates."""
    m = _doc(pp2x4)["sections"]["overlap"]["metrics"]["file_average_rates"]
    assert round(m["comm_share_ratio"], 4) == 0.6573
    assert round(m["between_stage_share_ratio"], 4) == 0.2582
    within = {w["stage"]: w["within_stage_share_ratio"] for w in m["within_stage"]}
    assert within[1] == pytest.approx(0.6029851045963494) and within[2] == pytest.approx(0.23437938457647858)


def test_pipeline_findings_match_seed_helper(pp2x4):
    """The seed's findings (between 25.82 %, within stage 1 60.3 %, on the file's average row) hold on the steps in
    scope too: the same findings, stage and order of magnitude; the values are the metrics' own."""
    doc = _doc(pp2x4)
    found = {f["id"]: f for f in doc["findings"]}
    m = doc["sections"]["overlap"]["metrics"]
    assert found["pipeline_between_stage"]["evidence"]["value"] == m["between_stage_share_ratio"]
    # 16.6 % here: the file row's 25.82 % includes the warm-up step, whose 2 s of receive the steps in scope lack
    assert 0.15 < m["between_stage_share_ratio"] < 0.2
    assert found["pipeline_within_stage"]["evidence"]["stage"] == 1
    within = {w["stage"]: w["within_stage_share_ratio"] for w in m["within_stage"]}
    assert found["pipeline_within_stage"]["evidence"]["value"] == within[1] and 0.55 < within[1] < 0.65


def test_model_parallel_view_has_interval_pure_comm_and_computation(pp2x4):
    sec = _doc(pp2x4)["sections"]["overlap"]
    r2 = next(r for r in sec["tables"]["per_rank_file_average"] if r["rank"] == 2)
    # MindInsight step_bottleneck_info for rank 2 (average): [2.4318, 123.1813, 96.4268, ...]
    assert [round(r2[c], 4) for c in ("step_interval_ms", "computation_incl_free_ms", "comm_not_overlapped_ms")] == [
        2.4318, 123.1813, 96.4268]


def test_no_pipeline_words_without_pipeline_stages():
    """Issue 27 #28: gloo DDP 4 ranks (dp 2 x tp 2, one stage) has p2p receives (the tensor-parallel ring): the
    summary and the columns name them p2p receive, never a bubble or a receive between stages."""
    from conftest import fixture_dir
    run = read_run(fixture_dir("generated", "torch_gloo_ddp4_baseline"))
    (out,) = run_sections(run, only=["overlap"])
    assert out.status == "ok" and not out.analysis.data["pipeline"]
    assert out.analysis.metrics["between_stage_share_ratio"] > 0  # there is receive time
    view = out.view
    assert "between stages" not in view.summary and "p2p receive" in view.summary
    titles = [c.label for t in view.tables for c in t.columns] + [c.group or "" for t in view.tables for c in t.columns]
    assert not [t for t in titles if "ubble" in t.replace("profiler's Bubble", "") or "Pipeline" in t], titles
    assert any("P2P receive" in t for t in titles)
    # a pipeline run keeps its pipeline words
    pp = read_run(fixture_dir("mindinsight", "mi_cluster_propose_pp2x4"))
    (po,) = run_sections(pp, only=["overlap"])
    assert "receive between stages" in po.view.summary
    assert any(c.group == "Pipeline: receive and bubble" for t in po.view.tables for c in t.columns)
