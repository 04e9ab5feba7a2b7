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
    # seed helper: cluster_link 0 -> 1 SDMA 107910491.8874 KB/s, 74.26 % below the SDMA mean. That number is the
    # file's written bandwidth (MindSpore <= 2.1: a step's SUM of per-operator bandwidths), kept under its own name
    seed = slow["evidence"]["seed_rule_on_written_bandwidth"]
    assert (seed["src"], seed["dst"]) == (0, 1)
    assert round(seed["profiler_bandwidth_gbps"] * 1e6, 4) == 107910491.8874
    assert round(seed["percent"], 2) == 74.26
    assert slow["evidence"]["profiler_bandwidth_gbps"] == seed["profiler_bandwidth_gbps"]
    # the finding's own bandwidth is size / time, the number the links tables and the matrix show for that link
    ev = slow["evidence"]
    (row,) = [r for r in sec["tables"]["links_local"] if (r["rank"], r["src_local"], r["dst_local"]) == (1, 0, 1)]
    assert ev["value"] == pytest.approx(row["size_mb"] / row["time_ms"]) == pytest.approx(row["bandwidth_gbps"])
    assert row["profiler_bandwidth_gbps"] == pytest.approx(seed["profiler_bandwidth_gbps"])
    # people read 3 significant digits (reportgen/fmt.py)
    assert f"{(1 - ev['value'] / ev['reference']) * 100:.1f}% below" in slow["message"]
    assert "(size / time)" in slow["message"] and "group-local" in slow["message"]


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


def _groups(rows):
    import pandas as pd
    return pd.DataFrame([{"group": g, "name": g, "kind": k, "ranks": r} for g, k, r in rows])


def test_map_local_links_places_each_operator_in_the_one_group_that_fits():
    """hccl_raw's group-local ends -> global ranks: collectives through the stage group, Send/Receive through the pp
    group, the rank at its own local index; several fitting groups or none -> kept local (issue 27)."""
    import pandas as pd
    from reportgen.sections.communication import MAP_AMBIGUOUS, MAP_NONE, map_local_links

    groups = _groups([("stage1", "other", [0, 1, 2, 3]), ("stage2", "other", [4, 5, 6, 7]),
                      ("pp1", "pp", [1, 5]), ("other5", "other", [5, 6])])
    local = pd.DataFrame({
        "rank": [5, 5, 5, 2, 6, 6],
        "step": [1, 1, 1, 1, 1, 1],
        "op": ["AllReduce-op1", "AllReduce-op1", "Receive-op2", "AllReduce-op1", "AllReduce-op9", None],
        # rank 5 is local 1 of stage2 (ring 0->1, self 1-1); its Receive comes from local 0 of pp1 = rank 1;
        # rank 2 (local 2 of stage1) 1->2; rank 6 local 0 fits other5 and... stage2 local 2 does not: one group
        "src_local": [0, 1, 0, 1, 0, 0], "dst_local": [1, 1, 1, 2, 0, 1],
        "transport": "HCCS", "time_ms": 1.0, "size_mb": 2.0, "bandwidth_gbps": 2.0})
    out, info = map_local_links(local, groups)
    got = list(zip(out["src_rank"], out["dst_rank"], out["group"].fillna("-")))
    assert got[:4] == [(4, 5, "stage2"), (5, 5, "stage2"), (1, 5, "pp1"), (1, 2, "stage1")]
    # rank 6's AllReduce-op9 has only a self link 0-0: local 0 of other5 is rank 5, not 6; of stage2 rank 4: none fit
    assert not out["mapped"].iloc[4] and out["map_status"].iloc[4] == MAP_NONE
    assert info["mapped"] == 4 and info["local"] == 1
    # two groups of different members that both fit -> ambiguous, kept local
    amb = _groups([("a", "other", [3, 9]), ("b", "other", [3, 7])])
    one = pd.DataFrame({"rank": [3], "step": [1], "op": ["AllGather-op1"], "src_local": [1], "dst_local": [0],
                        "transport": "RDMA", "time_ms": 1.0, "size_mb": 1.0, "bandwidth_gbps": 1.0})
    out, info = map_local_links(one, amb)
    assert not out["mapped"].any() and info["reasons"] == {MAP_AMBIGUOUS: 1}
    # the same members under two names count once
    out, _ = map_local_links(one, _groups([("a", "other", [3, 9]), ("a2", "other", [9, 3])]))
    assert out["mapped"].all() and (out["src_rank"].iloc[0], out["dst_rank"].iloc[0]) == (9, 3)


def test_link_op_extremes_fastest_median_slowest_per_type_and_link():
    import pandas as pd
    from reportgen.sections.communication import link_op_extremes

    df = pd.DataFrame({"link": ["0→1 HCCS"] * 3 + ["1→0 HCCS"], "op": ["a", "b", "c", "d"],
                       "op_type": ["allreduce"] * 4, "step": [1, 2, 3, 1], "time_ms": [2.0, 1.0, 9.0, 4.0],
                       "size_mb": [2.0, 2.0, 9.0, 2.0]})
    df["bandwidth_gbps"] = df["size_mb"] / df["time_ms"]
    x = link_op_extremes(df).set_index("link")
    r = x.loc["0→1 HCCS"]
    assert (r["instances"], r["fastest_op"], r["fastest_ms"], r["median_ms"], r["slowest_op"], r["slowest_step"]) == \
        (3, "b", 1.0, 2.0, "c", 3)
    assert r["slowest_over_fastest"] == 9.0 and x.index[0] == "0→1 HCCS"  # slowest first


def test_large_packets_take_the_transport_that_moved_most():
    import pandas as pd
    from reportgen.sections.communication import large_packets

    bw = pd.DataFrame({"rank": 0, "step": 1, "op": ["x", "x", "x"], "transport": ["HCCS", "RDMA", "LOCAL"],
                       "size_mb": [10.0, 30.0, 99.0], "time_ms": 1.0, "bandwidth_gbps": 1.0,
                       "large_packet_ratio": [0.9, 0.2, 1.0]})
    lp = large_packets(bw)
    assert lp.to_dict("records") == [{"rank": 0, "step": 1, "op": "x", "large_packet_ratio": 0.2,
                                      "large_packet_transport": "RDMA"}]
    assert large_packets(bw.assign(large_packet_ratio=float("nan"))) is None


def test_group_control_names_every_group_of_the_same_members(monkeypatch):
    """Seed #89: a pp and an embedding group of the same ranks are both named, not merged into the first."""
    from reportgen.sections import communication as c

    monkeypatch.setattr(c, "_strategy_groups", lambda run, options: _groups(
        [("g13", "other", [0, 2]), ("g19", "pp", [0, 2]), ("g20", "other", [2, 0]), ("g5", "dp", [0, 1])]))
    run = type("R", (), {"ranks": [0, 1, 2, 3]})()
    labels = [label for ranks, label in c._group_options(run, None) if ranks == [0, 2]]
    assert len(labels) == 1 and all(g in labels[0] for g in ("g13", "g19", "g20")) and "other / pp" in labels[0]


def test_small_collectives_count_calls_below_the_limit_per_rank_and_step():
    """Seed #64 (all_reduce_fusion_config): calls per rank and step below SMALL_COLLECTIVE_MB and their time."""
    import pandas as pd
    from reportgen.sections.communication import SMALL_COLLECTIVE_MB, small_collectives

    ops = pd.DataFrame({"rank": [0, 0, 0, 1, 1, 1, 0], "step": [1, 1, 1, 1, 1, 1, 2], "kind": "collective",
                        "op": ["a", "b", "c", "a", "b", "c", "a"], "op_type": "allreduce",
                        "elapse_ms": [1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 5.0]})
    ops.loc[2, "kind"] = ops.loc[5, "kind"] = "p2p"
    sizes = pd.DataFrame({"rank": [0, 0, 1, 1], "step": 1, "op": ["a", "b", "a", "b"],
                          "size_mb": [SMALL_COLLECTIVE_MB / 2, SMALL_COLLECTIVE_MB * 2, 0.1, 64.0]})
    (row,) = small_collectives(ops, sizes, steps=[1]).to_dict("records")
    # 2 collectives per (rank, step), one of them small (1 ms each)
    assert (row["calls_per_step"], row["small_calls_per_step"], row["small_ms_per_step"], row["ms_per_step"]) == \
        (2.0, 1.0, 1.0, 3.0)
    # step 2's call has no size: counted, never small
    (row,) = small_collectives(ops, sizes).to_dict("records")
    assert row["calls_per_step"] == 5 / 3 and row["small_calls_per_step"] == 2 / 3


def test_matrix_cells_per_transport_and_all():
    """Seed #89's transport view: one set of cells per transport and one over all of them."""
    import pandas as pd
    from reportgen.sections.communication import _matrix_cells, matrix_transports

    links = pd.DataFrame({"src_rank": [0, 0, 1], "dst_rank": [1, 1, 0], "transport": ["HCCS", "RDMA", "HCCS"],
                          "size_mb": [4.0, 1.0, 2.0], "time_ms": [1.0, 1.0, 2.0]})
    assert matrix_transports(links) == ["HCCS", "RDMA"] and matrix_transports(links[links["transport"] == "HCCS"]) == []
    cells = _matrix_cells(links, "src_rank", "dst_rank", 1, ["HCCS", "RDMA"]).set_index(
        ["transport", "src_rank", "dst_rank"])
    assert cells.loc[("all", 0, 1), "bandwidth_gbps"] == 2.5 and cells.loc[("RDMA", 0, 1), "size_mb"] == 1.0
    assert len(cells) == 2 + 3


def _spread_ops():
    """Two ranks x 3 steps of one all_reduce in group g (rank 1's calls 4x slower) and one broadcast in g2."""
    import pandas as pd
    rows = []
    for step in (1, 2, 3):
        for rank in (0, 1, 2, 3):
            rows.append({"rank": rank, "step": step, "kind": "collective", "op": "ar", "op_type": "allreduce",
                         "group": "g", "start_ms": 10.0 * step + (2.0 if rank == 2 else 0.0),
                         "elapse_ms": 8.0 if rank == 1 else 2.0})
        rows.append({"rank": 0, "step": step, "kind": "collective", "op": "bc", "op_type": "broadcast", "group": "g2",
                     "start_ms": 100.0 * step, "elapse_ms": 1.0 + step})
    return pd.DataFrame(rows)


def test_op_rank_spread_names_the_slow_rank_and_the_last_to_enter():
    """Seed #90: per op type and group the ranks' median call durations; the slowest rank and who entered last (from
    facts' per-call entries, not recomputed)."""
    from reportgen.facts import _entries
    from reportgen.sections.communication import op_rank_spread

    ops = _spread_ops()
    sp = op_rank_spread(ops, _entries(ops)).set_index("op_type")
    ar = sp.loc["allreduce"]
    assert ar["ranks"] == 4 and ar["calls"] == 12
    assert ar["median_ms"] == 2.0 and ar["max_ms"] == 8.0 and ar["slowest_rank"] == 1 and ar["slow_ratio"] == 4.0
    assert ar["max_call_rank"] == 1 and ar["max_call_ms"] == 8.0
    assert ar["last_rank"] == 2 and ar["last_share_ratio"] == 1.0 and ar["last_wait_ms_mean"] == 2.0
    bc = sp.loc["broadcast"]
    assert bc["ranks"] == 1 and bc["median_ms"] == 3.0 and bc["slow_ratio"] == 1.0 and pd_isna(bc["last_rank"])
    assert list(sp.index) == ["allreduce", "broadcast"]  # the most uneven first
    assert op_rank_spread(None, None) is None


def pd_isna(x):
    import pandas as pd
    return pd.isna(x)


def test_op_rank_spread_on_the_st_fixture():
    """Ascend st/level2 (4 ranks, pp2): every (op type, group) of comm_ops has a row; the figure and table show."""
    run = read_run(fixture_dir(*ST4))
    sec = next(o for o in run_sections(run, only=["communication"]))
    sp = sec.analysis.tables["op_rank_spread"]
    ops = run.table("comm_ops")
    assert len(sp) == ops.groupby(["op_type", "group"]).ngroups
    row = sp[(sp["op_type"] == "allreduce") & (sp["group"] == "group_name_0")].iloc[0]
    mine = ops[(ops["op_type"] == "allreduce") & (ops["group"] == "group_name_0")].groupby("rank")["elapse_ms"].median()
    assert row["max_ms"] == pytest.approx(mine.max()) and row["slowest_rank"] == int(mine.idxmax())
    assert row["last_rank"] == 3  # facts.entries: rank 3 entered each call of it last
    assert "communication-op-spread" in {f.id for f in sec.view.figures}
    assert "communication-op-spread-table" in {t.id for t in sec.view.tables}
def test_demo_slow_link_bandwidth_is_the_links_tables(report_cache):
    """One quantity, one value (issue 27 review): the slow-link finding quotes size / time, the bandwidth the links
    table, the group-local links table and the matrix show for that link; the file's written bandwidth (MindSpore
    <= 2.1: a step's sum of per-operator bandwidths, ~8x here) has its own name."""
    doc = json.loads(report_cache.get("demo").with_suffix(".json").read_text())
    sec = doc["sections"]["communication"]["tables"]
    (slow,) = [f for f in doc["findings"] if f["id"] == "slow_link"]
    (src, dst), = slow["links"]
    (row,) = [r for r in sec["links"] if (r["src_rank"], r["dst_rank"]) == (src, dst)]
    assert slow["evidence"]["value"] == pytest.approx(row["bandwidth_gbps"])
    assert row["bandwidth_gbps"] == pytest.approx(row["size_mb"] / row["time_ms"])
    local = [r for r in sec["links_local"] if (r.get("global_src"), r.get("global_dst")) == (src, dst)]
    assert local and all(r["bandwidth_gbps"] == pytest.approx(row["bandwidth_gbps"]) for r in local)
    # the written figure differs (a sum over the step's operators) and is never called "bandwidth_gbps"
    assert all(r["profiler_bandwidth_gbps"] > 2 * r["bandwidth_gbps"] for r in local)
    assert slow["evidence"]["profiler_bandwidth_gbps"] == pytest.approx(local[0]["profiler_bandwidth_gbps"])
    assert f"{row['bandwidth_gbps']:.4g} GB/s" in slow["message"]


def test_self_links_are_in_the_files_and_kept_off_the_matrix_colour_scale(pp2x4):
    """hccl_raw writes "i-i" SDMA entries itself (a rank's copies within its memory): they are data, not a mapping
    artefact; the matrix draws them grey on the diagonal, outside the colour scale, and its caption says so."""
    import pandas as pd

    from reportgen.palette import ROLE
    from reportgen.sections.communication import _matrix, self_links

    run = read_run(pp2x4)
    lk = run.table("comm_links_local")
    assert (lk["src_local"] == lk["dst_local"]).any()  # in the file as written
    links = pd.DataFrame({"group": "g", "src_rank": [0, 0, 1, 1], "dst_rank": [0, 1, 1, 0], "transport": "SDMA",
                          "size_mb": [50.0, 10.0, 50.0, 10.0], "time_ms": [0.5, 1.0, 0.5, 1.0]})
    links["bandwidth_gbps"] = links["size_mb"] / links["time_ms"]
    assert self_links(links, "src_rank", "dst_rank").tolist() == [True, False, True, False]
    fig = _matrix(links, "src_rank", "dst_rank", "Rank")
    spec = json.dumps(fig.spec)
    layers = fig.spec["layer"]
    coloured = [x for x in layers if x.get("mark") == "rect" or (x.get("mark") or {}).get("type") == "rect"]
    assert len(coloured) == 2
    scale, grey = coloured
    assert {"filter": "!datum.self_link"} in scale["transform"] and "color" in scale["encoding"]
    assert {"filter": "datum.self_link"} in grey["transform"] and grey["mark"]["color"] == ROLE["other"]
    # the colour scale's extent (and the ink on it) comes from the rank-to-rank cells only
    assert "datum.self_link ? null : datum.value" in spec
    assert "grey diagonal" in fig.caption


def test_communication_kernels_named_per_kernel_name():
    """Kernels without collective args: the collective from the kernel's name (first match of reportgen.readers.comm
    _NCCL_OP), 'other' for an unknown or missing name."""
    import pandas as pd

    from reportgen.readers.comm import _kernel_collectives

    names = ["ncclKernel_AllReduce_RING_LL_Sum_float", "ncclDevKernel_SendRecv", "ncclKernel_Reduce_Scatter_x",
             "ncclKernel_Broadcast", "nccl_other", None, "ncclKernel_AllReduce_RING_LL_Sum_float"]
    gpu = pd.DataFrame({"rank": 0, "kind": "comm", "name": pd.array(names, dtype="str"), "stream": 7,
                        "start_ms": range(7), "dur_ms": 1.0})
    out = _kernel_collectives(gpu)
    assert out["collective"].tolist() == ["allreduce", "batchsendrecv", "reducescatter", "broadcast", "other",
                                          "other", "allreduce"]


@pytest.mark.parametrize("n,texts", [(8, 1), (65, 0)])
def test_graph_draws_each_node_once_with_labels_up_to_64_ranks(n, texts):
    """The node-link graph: links, one layer of nodes, and the rank labels up to 64 ranks (above, they overlap; the
    nodes' layer was drawn a second time in their place)."""
    import pandas as pd

    from reportgen.sections.communication import _graph

    per_rank = pd.DataFrame({"rank": range(n), "comm_op_ms": 1.0, "wait_ms": 0.5, "wait_ratio": 0.5})
    links = pd.DataFrame({"src_rank": range(n), "dst_rank": [(r + 1) % n for r in range(n)], "size_mb": 1.0,
                          "time_ms": 1.0})
    layers = _graph(per_rank, links).spec["layer"]
    marks = [(lay["mark"]["type"] if isinstance(lay["mark"], dict) else lay["mark"]) for lay in layers]
    assert marks.count("circle") == 1 and marks.count("rule") == 1 and marks.count("text") == texts, marks
    assert len({json.dumps(lay, sort_keys=True) for lay in layers}) == len(layers)


@pytest.mark.skipif(int(__import__('pandas').__version__.split('.')[0]) < 3,
                    reason="pandas 2 copies the columns a frame selects (no copy-on-write): the sharing is pandas 3's")
def test_the_sections_ops_and_sizes_are_the_runs_comm_ops_arrays():
    """The communication section's every-op table and the op sizes read the run's comm_ops arrays, not a copy of
    them, and leave the table as it was (issue 30 #1: 1,024 Kineto ranks held 53 MiB of copies)."""
    import numpy as np
    import pandas as pd

    from reportgen.frames import own_columns
    from reportgen.model import Run
    from reportgen.sections import communication as C

    n = 6
    ops = own_columns({"rank": np.repeat([0, 1], 3), "step": np.ones(n, dtype=np.int64), "kind": ["collective"] * n,
                       "op": ["allreduce"] * n, "op_type": ["all_reduce"] * n, "group": ["[0, 1]"] * n,
                       "start_ms": np.arange(n, dtype=float), "elapse_ms": np.full(n, 2.0),
                       "transit_ms": np.full(n, 1.0), "wait_ms": np.full(n, 1.0), "size_mb": np.full(n, 4.0),
                       "bandwidth_gbps": np.full(n, 2.0), "busbw_gbps": np.full(n, 2.0)})
    before = ops.copy()
    run = Run(name="t", source_format="test", source_path="/x", ranks=[0, 1])
    run.tables["comm_ops"] = ops
    got = C._ops_with_sizes(run, ops)
    sizes = C.operation_sizes(run, got)
    for col in ("rank", "elapse_ms", "wait_ms", "size_mb"):
        assert np.shares_memory(got[col].to_numpy(), ops[col].to_numpy()), col
    assert np.shares_memory(sizes["size_mb"].to_numpy(), ops["size_mb"].to_numpy())
    assert np.shares_memory(sizes["time_ms"].to_numpy(), ops["elapse_ms"].to_numpy())
    assert sizes["cls"].tolist() == ["collective messages"] * n and len(sizes) == n
    pd.testing.assert_frame_equal(ops, before)
    # an op that moves nothing is left out of the sizes (a copy then)
    ops2 = ops.assign(size_mb=[4.0, 0.0, 4.0, 4.0, np.nan, 4.0])
    assert len(C.operation_sizes(run, C._ops_with_sizes(run, ops2))) == 4


def test_collective_instances_do_not_depend_on_the_order_of_ops_that_start_together():
    """The n-th op of a group and type on each rank is one instance, its transit the shortest of them. Two all-reduces
    of one group that start together on a rank (two streams) were numbered in the trace's order, so their transits
    and waits moved with it; now by the communicator's sequence number, then the stream (tid), then the duration,
    whatever the order the rows are listed in."""
    import pandas as pd

    from reportgen.model import Run
    from reportgen.readers.comm import kineto_ops

    coll = pd.DataFrame({"rank": [0, 0, 1, 1], "source": "gpu_kernel", "name": "ncclKernel_AllReduce",
                         "collective": "allreduce", "group_ranks": "[0, 1]", "group_name": "0", "group_size": 2,
                         "start_ms": [1.0, 1.0, 1.0, 1.0], "dur_ms": [3.0, 1.0, 1.2, 3.5],
                         "in_mb": 1.0, "out_mb": 1.0})
    coll["end_ms"] = coll["start_ms"] + coll["dur_ms"]
    got = []
    for order in ([0, 1, 2, 3], [1, 0, 2, 3], [3, 2, 0, 1]):
        run = Run(name="t", source_format="test", source_path="/x", ranks=[0, 1])
        run.tables["collectives"] = coll.iloc[order].reset_index(drop=True)
        ops = kineto_ops(run)
        got.append(sorted(zip(ops["rank"], ops["elapse_ms"], ops["transit_ms"])))
    assert got[0] == got[1] == got[2] == [(0, 1.0, 1.0), (0, 3.0, 3.0), (1, 1.2, 1.0), (1, 3.5, 3.0)]
    # the sequence number, where the trace writes it, pairs rank 0's long op with rank 1's short one; the stream
    # (tid) where it does not
    for extra, want in (({"seq": [5, 6, 5, 6]}, [(0, 1.0, 1.0), (0, 3.0, 1.2), (1, 1.2, 1.2), (1, 3.5, 1.0)]),
                        ({"seq": -1, "tid": ["7", "10", "7", "10"]},
                         [(0, 1.0, 1.0), (0, 3.0, 1.2), (1, 1.2, 1.2), (1, 3.5, 1.0)])):
        got = []
        for order in ([0, 1, 2, 3], [1, 0, 2, 3], [3, 2, 0, 1]):
            run = Run(name="t", source_format="test", source_path="/x", ranks=[0, 1])
            run.tables["collectives"] = coll.assign(**extra).iloc[order].reset_index(drop=True)
            ops = kineto_ops(run)
            got.append(sorted(zip(ops["rank"], ops["elapse_ms"], ops["transit_ms"])))
        assert got[0] == got[1] == got[2] == want, extra
