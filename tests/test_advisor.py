"""Advisor: time at stake, ranking, the msprof-analyze rule families, the rule table (issue 8)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from conftest import analysed, fixture_dir
from reportgen import metrics, thresholds as th
from reportgen.model import Run
from reportgen.readers import read_run
from reportgen.report import Analysis, Finding, SectionOutcome, View
from reportgen.sections import Options, run_sections
from reportgen.sections import advisor

SLOW_RANK_IDS = {"slow_device_compute", "slow_rank_spread", "slow_rank_vote", "slow_step_interval",
                 "slow_preparing", "slow_host", "flops_per_s_low"}


def _doc(path) -> dict:
    """The metrics JSON of the run directory, analysed as the CLI does, once per process (conftest.analysed: the
    analysis test_golden.py makes, of the same SHARED_SCOPES group); a fresh copy each time."""
    return json.loads(metrics.dumps(analysed(path)[2]))


# --------------------------------------------------------------------------------------------- statistics
def test_dixon_smallest_outlier():
    assert advisor.smallest_is_outlier([10.0, 20.0, 20.1, 20.2])
    assert not advisor.smallest_is_outlier([10.0, 10.1, 10.2, 10.3])
    assert not advisor.smallest_is_outlier([5.0, 5.0, 5.0, 5.0])  # no spread: no outlier
    assert not advisor.smallest_is_outlier([1.0, 2.0])  # too few values
    # r11 (n = 8..10) ignores the largest value: one high straggler does not hide a low one
    assert advisor.smallest_is_outlier([1.0, 9.0, 9.1, 9.2, 9.3, 9.4, 9.5, 50.0])
    # r21/r22 beyond 10 values; 3σ beyond 25
    rng = np.random.default_rng(0)
    for n in (12, 20, 25, 64):
        vals = list(10 + rng.normal(0, 0.05, n - 1)) + [5.0]
        assert advisor.smallest_is_outlier(vals), n
        assert not advisor.smallest_is_outlier(list(10 + rng.normal(0, 0.05, n))), n


def test_order_and_severity_from_time_at_stake():
    fs = [{"severity": "low", "share_of_step_ratio": 0.01}, {"severity": "high", "share_of_step_ratio": 0.06},
          {"severity": "high", "share_of_step_ratio": 0.30}, {"severity": "medium", "share_of_step_ratio": None},
          {"severity": "medium", "share_of_step_ratio": 0.04}]
    got = sorted(fs, key=advisor.order_key)
    assert [(f["severity"], f["share_of_step_ratio"]) for f in got] == [
        ("high", 0.30), ("high", 0.06), ("medium", 0.04), ("medium", None), ("low", 0.01)]
    assert th.severity(0.05) == "high" and th.severity(0.0499) == "medium" and th.severity(0.03) == "medium" \
        and th.severity(0.0299) == "low"


def _ctx_with_ops(ops: pd.DataFrame, step_ms: float = 100.0, steps: int = 1):
    run = Run(name="t", source_format="ascend", source_path="/x")
    done = {"communication": SectionOutcome("communication", "C", "ok", analysis=Analysis(tables={"ops": ops}),
                                            view=View())}
    return advisor._Ctx(run, done, step_ms, steps, None)


def test_vote_names_the_rank_that_arrived_last():
    rows = []
    rng = np.random.default_rng(1)
    for step in range(4):
        for i in range(5):  # 5 all-reduces per step, 8 ranks; rank 5 arrives 20 ms late each time
            for r in range(8):
                wait = 0.0 if r == 5 else 20.0 + rng.normal(0, 0.3)
                rows.append({"rank": r, "op": f"hcom_allReduce__{i}", "group": "dp", "step": step, "kind": "collective",
                             "op_type": "allreduce", "elapse_ms": 3.0 + wait})
    found = advisor.rule_slow_rank_vote(_ctx_with_ops(pd.DataFrame(rows), step_ms=200.0, steps=4))
    assert [f.ranks for f in found] == [[5]]
    f = found[0]
    assert f.evidence["value"] == 20 and f.evidence["reference"] == 20
    assert f.evidence["waited_ms_per_step"] == pytest.approx(100.0, rel=0.02)  # 5 ops x 20 ms
    assert f.evidence["share_of_step_ratio"] == pytest.approx(0.5, rel=0.02)


def test_vote_silent_on_random_arrival_and_ignores_p2p():
    rows = []
    rng = np.random.default_rng(2)
    for step in range(4):
        for i in range(6):
            late = rng.integers(0, 8)  # a different rank arrives last each time: nobody is slow
            for r in range(8):
                wait = 0.0 if r == late else 5.0 + rng.normal(0, 0.2)
                rows.append({"rank": r, "op": f"op{i}", "group": "dp", "step": step, "kind": "collective",
                             "op_type": "allreduce", "elapse_ms": 1.0 + wait})
            for r in range(8):  # p2p receive: rank 3 always shortest, but p2p is not voted on
                rows.append({"rank": r, "op": f"recv{i}", "group": "pp", "step": step, "kind": "p2p",
                             "op_type": "receive", "elapse_ms": 1.0 if r == 3 else 9.0})
    assert advisor.rule_slow_rank_vote(_ctx_with_ops(pd.DataFrame(rows), steps=4)) == []


# --------------------------------------------------------------------------------------------- real fixtures
@pytest.fixture(scope="module")
def st4():
    return _doc(fixture_dir("ascend", "msinsight", "test", "st", "level2"))


def test_spread_equals_msprof_advisor(st4):
    """msprof-analyze advisor on the st level2 4-rank set: 'max difference of Computing time has reached
    170.228ms', 'Communication ... 180.21ms' (reference/msprof-analyze/adv_st_level2_4rank_text)."""
    sp = st4["sections"]["advisor"]["tables"]["spread"]
    assert len(sp) == 1 and sp[0]["step"] == 13
    assert round(sp[0]["computing_spread_ms"], 3) == 170.228
    assert round(sp[0]["comm_not_overlapped_spread_ms"], 2) == 180.21
    # ... but within each stage the ranks agree: no slow-rank-spread finding (documented departure)
    assert not [f for f in st4["findings"] if f["id"] == "slow_rank_spread"]


def test_every_finding_has_time_at_stake_and_order(st4):
    fs = st4["findings"]
    assert fs and all(f["share_of_step_ratio"] is not None for f in fs)
    assert fs == sorted(fs, key=advisor.order_key)
    for f in fs:
        assert f["severity"] == th.severity(f["share_of_step_ratio"])
    # the diagnosis names stage 2's heavier compute as the cause (it sees the kernels' timeline); the pipeline
    # receive on stage 1 is its symptom, with its own time at stake
    assert fs[0]["id"] == "heavy_pipeline_stage"
    between = next(f for f in fs[0]["symptoms"] if f["id"] == "pipeline_between_stage")
    assert between["share_of_step_ratio"] == pytest.approx(0.2422, abs=1e-4)


def test_rule_table_and_thresholds(st4):
    adv = st4["sections"]["advisor"]
    assert adv["status"] == "ok"
    assert adv["metrics"]["thresholds"] == th.as_dict()
    rules = {r["rule"]: r for r in adv["tables"]["rules"]}
    assert {"step_interval", "flops_per_second", "cluster_link", "comm_share", "pipeline_between_stage",
            "pipeline_within_stage", "pipeline_parallel_flops",  # the seed's seven
            "slow_rank_spread", "slow_rank_vote", "slow_link_transit", "small_packets", "data_wait",
            "slow_dataloader", "long_free_time", "memory_near_capacity", "bandwidth_contention"} <= set(rules)
    assert rules["pipeline_between_stage"]["result"] == "raised"
    assert rules["comm_share"]["result"] == "not applicable"  # pipelines use the between/within rules
    assert rules["bandwidth_contention"]["result"] == "not applicable"  # no device timeline in this set
    assert "trace_view" in rules["bandwidth_contention"]["reason"]  # the registry's provenance of its tables
    assert all(r["result"] != "error" for r in rules.values())
    raised = {f["id"] for f in st4["findings"]} | {s["id"] for f in st4["findings"] for s in f.get("symptoms") or ()}
    for r in rules.values():
        assert (r["result"] == "raised") == (r["findings"] > 0)
    assert "pipeline_between_stage" in raised  # a symptom of the heavy stage 2 (the cause)


def test_gloo_ddp4_baseline_has_no_slow_rank():
    doc = _doc(fixture_dir("generated", "torch_gloo_ddp4_baseline"))
    assert not [f for f in doc["findings"] if f["id"] in SLOW_RANK_IDS], doc["findings"]
    assert doc["sections"]["advisor"]["status"] == "ok"


def test_report_shows_rules_and_time_at_stake(tmp_path):
    from reportgen.cli import main

    out = tmp_path / "r.html"
    assert main([str(fixture_dir("ascend", "msinsight", "test", "st", "level2")), "-o", str(out), "-q"]) == 0
    html = out.read_text()
    assert 'id="sec-advisor"' in html and "Rules checked" in html and "At stake:" in html
    assert "slow_rank_vote" in html and "Dixon" in html


def test_advisor_isolated_when_a_rule_fails(monkeypatch):
    run = read_run(fixture_dir("ascend", "msinsight", "test", "st", "level2"))

    def boom(ctx):
        raise RuntimeError("broken rule")

    monkeypatch.setattr(advisor, "rule_small_packets", boom)
    outcomes = run_sections(run, Options())
    adv = next(o for o in outcomes if o.id == "advisor")
    assert adv.status == "ok"
    rules = {r["rule"]: r for r in adv.analysis.tables["rules"].to_dict("records")}
    assert rules["small_packets"]["result"] == "error" and "broken rule" in rules["small_packets"]["reason"]


def test_finding_dict_carries_share():
    f = Finding("x", "low", "overlap", "m", share_of_step=0.02)
    assert f.as_dict()["share_of_step_ratio"] == 0.02


def _dixon_reference(values) -> bool:
    """Textbook Dixon (r10 n<=7, r11 n<=10, r21 n<=13, r22 n<=25; 99.5 % table) and 3σ beyond, one sample."""
    x = np.sort(np.asarray(values, dtype=float))
    n = len(x)
    if n > 25:
        return x.std() > 0 and x[0] < x.mean() - 3 * x.std()
    num = x[1] - x[0] if n <= 10 else x[2] - x[0]
    den = x[-1] - x[0] if n <= 7 else x[-2] - x[0] if n <= 13 else x[-3] - x[0]
    return den > 0 and num / den > advisor._DIXON_Q995[n]


def test_vectorised_outliers_equal_the_textbook_test():
    rng = np.random.default_rng(5)
    rows, expect = [], {}
    for inst in range(300):
        n = int(rng.integers(3, 40))
        vals = 10 + rng.normal(0, 0.1, n)
        if inst % 3 == 0:
            vals[int(rng.integers(0, n))] = 10 - rng.uniform(0.05, 3)
        for r, v in enumerate(vals):
            rows.append({"group": "g", "step": 0, "op": f"op{inst}", "occ": 0, "rank": r, "elapse_ms": float(v)})
        expect[("g", 0, f"op{inst}", 0)] = bool(_dixon_reference(vals))
    got = advisor.instance_outliers(pd.DataFrame(rows), ["group", "step", "op", "occ"])
    assert {k: bool(v) for k, v in got["outlier"].items()} == expect
    assert 50 < sum(expect.values()) < 200


def test_binomial_tail():
    from math import comb

    for k, n, p in ((3, 10, 0.125), (6, 24, 0.125), (10, 40, 0.1), (30, 200, 0.05)):
        exact = sum(comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(k, n + 1))
        assert advisor.binomial_tail(k, n, p) == pytest.approx(exact, rel=1e-9)
    assert advisor.binomial_tail(2, 24, 0.125) == 1.0  # below the expected count
    assert advisor.binomial_tail(500, 100_000, 0.001) < 1e-100


def test_bandwidth_contention_from_overlap_with_computation():
    """Four 64 MB HCCS ops per rank: two run alone at 20 GB/s, two under computation at 8 GB/s."""
    run = Run(name="t", source_format="ascend", source_path="/x")
    bw, ops, ov = [], [], []
    for r in range(2):
        t = 0.0
        for i, (contended, gbps) in enumerate([(False, 20.0), (True, 8.0), (False, 20.5), (True, 8.2),
                                               (False, 19.5)]):
            dur = 64.0 / gbps
            bw.append({"rank": r, "step": 1, "op": f"hcom_allGather__{i}", "transport": "HCCS", "size_mb": 64.0,
                       "time_ms": dur})
            ops.append({"rank": r, "step": 1, "op": f"hcom_allGather__{i}", "start_ms": t, "elapse_ms": dur})
            if contended:
                ov.append({"rank": r, "kind": "computing", "start_ms": t - 1, "end_ms": t + dur + 1})
            t += dur + 5
    run.tables.update(comm_bandwidth=pd.DataFrame(bw), comm_ops=pd.DataFrame(ops), overlap_intervals=pd.DataFrame(ov))
    ctx = advisor._Ctx(run, {}, 100.0, 1, None)
    (f,) = advisor.rule_bandwidth_contention(ctx)
    assert f.ranks == [0, 1] and f.evidence["operators"] == 4
    assert f.evidence["reference"] == pytest.approx(20.0)
    # per rank: 2 ops x (8 ms - 3.2 ms) and (7.80 - 3.2) -> ~9.4 ms of 100 ms
    assert f.evidence["share_of_step_ratio"] == pytest.approx((64 / 8 + 64 / 8.2 - 2 * 3.2) / 100, rel=1e-6)
    # without computation around them the same ops are not contended
    run.tables["overlap_intervals"] = pd.DataFrame([{"rank": 0, "kind": "computing", "start_ms": -10.0,
                                                     "end_ms": -5.0}])
    assert advisor.rule_bandwidth_contention(ctx) == []


def test_every_finding_rule_has_a_suggestion_and_a_figure():
    """Each Finding(...) built in the sections names a suggestion and the chart (or table) that shows it: a figure, or
    a view (the figure set up to show it)."""
    import re
    from pathlib import Path

    import reportgen.sections as pkg

    for path in Path(pkg.__file__).parent.glob("*.py"):
        src = path.read_text(encoding="utf-8")
        for m in re.finditer(r"Finding\(", src):
            i, depth = m.end(), 1
            while depth:
                depth += (src[i] == "(") - (src[i] == ")")
                i += 1
            body = src[m.start():i]
            where = f"{path.name}:{src[:m.start()].count(chr(10)) + 1}"
            assert "suggestion=" in body and ("figure=" in body or "view=" in body), where


def test_covered_equals_intersection_length():
    from reportgen import intervals as iv

    rng = np.random.default_rng(0)
    s = rng.uniform(0, 100, 50)
    merged = iv.union(s, s + rng.uniform(0, 5, 50))
    ws = rng.uniform(-5, 105, 300)
    we = ws + rng.uniform(0, 20, 300)
    ref = [iv.length(*iv.intersect((np.array([a]), np.array([b])), merged)) for a, b in zip(ws, we)]
    assert np.allclose(iv.covered(merged, ws, we), ref)
    assert iv.covered((np.empty(0), np.empty(0)), ws, we).tolist() == [0.0] * 300
