"""Communication section: Ascend agrees with msprof-analyze; Kineto matching, busbw; slow-link rule."""

from __future__ import annotations

import json

import pytest

from reportgen import metrics
from reportgen.readers import read_run
from reportgen.readers.ascend import double_hash
from reportgen.sections import run_sections
from reportgen.sections.communication import busbw_factor

from conftest import fixture_dir, reference_file

ST4 = ("ascend", "msinsight", "test", "st", "level2")


def _section(path):
    run = read_run(path)
    doc = json.loads(metrics.dumps(metrics.build(run, run_sections(run, only=["communication"]))))
    return run, doc["sections"]["communication"], doc["findings"]


def test_ascend_per_group_and_rank_sums_equal_msprof_total_op_info():
    run, sec, _ = _section(fixture_dir(*ST4))
    assert sec["status"] == "ok"
    ref = json.loads(reference_file("msprof-analyze", "st_level2_4rank_text", "cluster_analysis_output",
                                    "cluster_communication.json").read_text())
    groups = {row.hash: row.group for row in run.tables["groups"].itertuples()}
    ops = sec["tables"]["ops"]
    checked = 0
    for _rank_set, steps in ref.items():
        for step, entries in steps.items():
            for key, per_rank in entries.items():
                if not key.startswith("Total Op Info@"):
                    continue
                group = groups[key.split("@")[1]]
                for rank, info in per_rank.items():
                    mine = [o for o in ops if o["rank"] == int(rank) and o["group"] == group
                            and o["step"] == int(step[4:])]
                    t = info["Communication Time Info"]
                    for ours, theirs in (("elapse_ms", "Elapse Time(ms)"), ("transit_ms", "Transit Time(ms)"),
                                         ("wait_ms", "Wait Time(ms)"), ("sync_ms", "Synchronization Time(ms)"),
                                         ("idle_ms", "Idle Time(ms)")):
                        assert sum(o[ours] for o in mine) == pytest.approx(t[theirs], abs=1e-6), (group, rank, ours)
                    checked += 1
    assert checked >= 14


def test_ascend_links_equal_msprof_matrix_totals():
    run, sec, _ = _section(fixture_dir(*ST4))
    ref = json.loads(reference_file("msprof-analyze", "st_level2_4rank_text", "cluster_analysis_output",
                                    "cluster_communication_matrix.json").read_text())
    groups = {row.hash: row.group for row in run.tables["groups"].itertuples()}
    links = {(l["group"], l["src_rank"], l["dst_rank"]): l for l in sec["tables"]["links"]}
    checked = 0
    for _rank_set, steps in ref.items():
        for _step, entries in steps.items():
            for key, per_link in entries.items():
                if not key.startswith("Total Op Info@"):
                    continue
                group = groups[key.split("@")[1]]
                for link, v in per_link.items():
                    src, dst = map(int, link.split("-"))
                    mine = links[(group, src, dst)]
                    assert mine["size_mb"] == pytest.approx(v["Transit Size(MB)"], rel=1e-9, abs=1e-12)
                    assert mine["time_ms"] == pytest.approx(v["Transit Time(ms)"], rel=1e-9, abs=1e-12)
                    checked += 1
    assert checked >= 30


def test_busbw_factors():
    assert busbw_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert busbw_factor("all_gather", 4) == pytest.approx(3 / 4)
    assert busbw_factor("reduce_scatter", 2) == pytest.approx(1 / 2)
    assert busbw_factor("broadcast", 8) == 1.0


def test_gloo_collectives_are_matched_across_ranks():
    _, sec, _ = _section(fixture_dir("generated", "torch_gloo_ddp4_baseline"))
    ops = sec["tables"]["ops"]
    assert sec["metrics"]["collective_source"] == "gloo operations"
    for o in ops:
        if o["transit_ms"] is not None:
            assert o["transit_ms"] <= o["elapse_ms"] + 1e-9
            assert o["wait_ms"] == pytest.approx(o["elapse_ms"] - o["transit_ms"], abs=1e-9)
    # every matched instance has one rank that did not wait
    by_inst = {}
    for o in ops:
        by_inst.setdefault((o["group"], o["op_type"], o["op"]), []).append(o)
    assert any(min(x["wait_ms"] for x in v) == 0 for v in by_inst.values())


def test_slow_link_rule_on_a_synthetic_matrix():
    import pandas as pd

    from reportgen.sections.communication import _slow_links

    links = pd.DataFrame({"group": "g", "src_rank": [0, 1, 2, 3], "dst_rank": [1, 2, 3, 0], "transport": "HCCS",
                          "size_mb": 100.0, "time_ms": [5.0, 5.0, 5.0, 20.0]})
    links["bandwidth_gbps"] = links["size_mb"] / links["time_ms"]
    (slow,) = _slow_links(links)
    assert (slow["src"], slow["dst"]) == (3, 0) and slow["percent"] == pytest.approx((16.25 - 5) / 16.25 * 100)
    links["time_ms"] = 5.0
    links["bandwidth_gbps"] = 20.0
    assert _slow_links(links) == []


def test_mindinsight_comm_wait_and_slow_link_equal_the_seed(pp2x4):
    ref = json.loads(reference_file("mindinsight", "mi_cluster_propose_pp2x4", "as_shipped.json").read_text())
    _, sec, findings = _section(pp2x4)
    # our averages are over the run's steps in scope (reportgen/facts.py); the profiler's average row is kept as a
    # reference table, and it is what MindInsight shows
    assert sec["status"] == "ok" and sec["metrics"]["avg_source"] == "computed"
    per_rank = {r["rank"]: r for r in sec["tables"]["per_rank_file_average"]}
    per_step = {(r["rank"], r["step"]): r for r in sec["tables"]["per_rank_step"]}
    for step in (0, 1, 2):
        for item in ref[f"cluster_hccl.query(step_id={step})"]["result"]["communication"]:
            comm, wait = item["communication_info"][:2]
            row = per_rank[item["rank_id"]] if step == 0 else per_step[(item["rank_id"], step)]
            # MindInsight's communication cost is our transit; the op time is communication + wait
            assert row["transit_ms"] == pytest.approx(comm, abs=1e-9) and row["wait_ms"] == pytest.approx(wait, abs=1e-9)
            assert row["comm_op_ms"] == pytest.approx(comm + wait, abs=1e-9)
    (slow,) = [f for f in findings if f["id"] == "slow_link"]
    # seed helper: cluster_link 0 -> 1 SDMA 107910491.8874 KB/s, 74.26 % below the SDMA mean
    assert round(slow["evidence"]["value"] * 1e6, 4) == 107910491.8874
    ev = slow["evidence"]
    assert round((1 - ev["value"] / ev["reference"]) * 100, 2) == 74.26
    # people read 3 significant digits (reportgen/fmt.py); the JSON evidence above keeps the seed's precision
    assert "74.3% below" in slow["message"] and "group-local" in slow["message"]


def test_transit_outlier_rule():
    import pandas as pd

    from reportgen.sections.communication import transit_outliers

    ops = pd.DataFrame({"rank": [0, 1, 2, 3, 0, 1, 2, 3], "group": "g", "step": 1,
                        "op": ["a"] * 4 + ["b"] * 4, "transit_ms": [1.0, 1.02, 0.98, 3.0, 2.0, 2.0, 2.01, 2.0]})
    (x,) = transit_outliers(ops)
    assert x["rank"] == 3 and x["op"] == "a" and x["reference"] == pytest.approx(1.01)
    assert transit_outliers(ops[ops["rank"] < 2]) == []  # fewer than 3 ranks: no verdict


def test_per_link_operator_distributions(pp2x4):
    run = read_run(pp2x4)
    (o,) = run_sections(run, only=["communication"])
    lo = o.analysis.tables["link_ops"]
    # hccl_raw's group-local ends placed on global ranks through the run's groups (issue 27): the AllReduces in each
    # stage (0-1, 2-3), the Receives in the pipeline groups (2->0, 1->3)
    assert set(lo["link"]) == {"0→1 SDMA", "1→0 SDMA", "2→3 SDMA", "3→2 SDMA", "2→0 SDMA", "1→3 SDMA"}
    assert set(lo.loc[lo["op"].str.contains("Receive"), "group"]) == {"pp0", "pp1"}
    assert (lo["bandwidth_gbps"] == lo["size_mb"] / lo["time_ms"]).all()
    figs = {f.id: f for f in o.view.figures}
    assert {"communication-link-boxes", "communication-matrix", "communication-graph"} <= set(figs)
    links = o.analysis.tables["links"]
    assert {(2, 0), (1, 3), (0, 1), (3, 2)} <= set(zip(links["src_rank"], links["dst_rank"]))
    assert {"communication-link-ops", "communication-link-extremes"} <= {t.id for t in o.view.tables}
    # the step-level entries keep the seed's numbers and get global ends only through their rank's operators
    loc = o.analysis.tables["links_local"].set_index(["rank", "src_local", "dst_local"])
    assert loc.loc[(1, 0, 1), ["global_src", "global_dst"]].tolist() == [0, 1]


def test_link_matrix_stays_small_at_1024_ranks():
    import pandas as pd

    from reportgen.sections.communication import MATRIX_MAX_SIDE, _matrix

    n = 1024
    src = [r for r in range(n) for _ in range(2)]
    dst = [(r + k) % n for r in range(n) for k in (1, 8)]
    links = pd.DataFrame({"src_rank": src, "dst_rank": dst, "size_mb": 10.0, "time_ms": 1.0})
    fig = _matrix(links, "src_rank", "dst_rank", "Rank")
    (rows,) = fig.spec["datasets"].values()
    assert len(rows) <= MATRIX_MAX_SIDE ** 2 and "blocks of 8" in fig.caption


def test_p2p_transit_is_the_shorter_kernel_of_the_matched_pair(tmp_path):
    """A receive that waits for a late sender (a 1.4x compute straggler upstream) is wait, not transit: transit of
    both halves = the shorter of the send and its matching receive (issue 16 review)."""
    from reportgen.sections import Options, run_sections
    from reportgen.synth.kineto import KinetoSpec, write_kineto_run
    write_kineto_run(tmp_path, KinetoSpec(hosts=1, devices_per_host=8, stages=2, steps=2, slow_ranks={5: 1.4}))
    run = read_run(tmp_path)
    (o,) = [x for x in run_sections(run, Options()) if x.id == "communication"]
    ops = o.analysis.tables["ops"]
    p2p = ops[ops["op_type"].isin(["send", "receive"])]
    assert not p2p.empty
    send_transit = p2p.loc[p2p["op_type"] == "send", "transit_ms"].mean()
    recv = p2p[p2p["op_type"] == "receive"]
    assert recv["transit_ms"].mean() == pytest.approx(send_transit, rel=1e-6)  # the sends are the shorter halves
    assert (recv["elapse_ms"] >= recv["transit_ms"] - 1e-9).all() and recv["wait_ms"].sum() > 0
