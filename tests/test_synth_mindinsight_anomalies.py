"""Issue 8: the MindInsight generator's clean preset and its injected anomalies, checked end to end
against reportgen's findings (reportgen.synth.mindinsight, MindInsightSpec.clean_run)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from reportgen.readers import read_run
from reportgen.synth import MindInsightSpec, write_mindinsight_run

from conftest import generated_report

KINDS = {"slow_rank", "slow_host_data_loading", "slow_link", "pipeline_bubble", "memory_near_capacity",
         "flops_imbalance", "exposed_communication"}


def _run(tmp_path_factory, spec: MindInsightSpec) -> tuple[dict, dict, Path]:
    """Ground truth, metrics and run directory of the generated run, reported by the CLI once per process
    (conftest.generated_report: tests/test_advisor_groundtruth.py reports some of the same runs). Read only."""
    gt, m, root, _ = generated_report(tmp_path_factory, write_mindinsight_run, spec)
    return gt, m, root


def _table(m: dict, section: str, name: str) -> pd.DataFrame:
    return pd.DataFrame(m["sections"][section]["tables"][name])


def _all_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module", params=[2, 1], ids=["pp2", "dp"])
def clean(request, tmp_path_factory):
    return _run(tmp_path_factory, MindInsightSpec.clean_run(stages=request.param))


# --------------------------------------------------------------------------- 1. clean runs


def test_clean_run_has_no_finding(clean):
    gt, m, root = clean
    assert m["findings"] == []
    assert gt["anomalies"] == [] and gt["clean"] is True
    assert len(set(gt["hosts"].values())) == 2 and gt["world_size"] == 8
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert size < 5_000_000


def test_clean_run_noise_is_small(clean):
    gt, m, root = clean
    t = _table(m, "trajectory", "per_rank_step")
    o = _table(m, "overlap", "per_rank_step")
    x = t.merge(o, on=["rank", "step", "stage"], suffixes=("", "_o"))
    step = float(x["step_ms"].median())
    for col in ("fp_bp_ms", "step_interval_ms", "computation_incl_free_ms", "comm_not_overlapped_ms"):
        spread = x.groupby(["stage", "step"])[col].agg(lambda v: v.max() - v.min()).max()
        assert spread < 0.02 * step, col
    assert m["summary"]["exposed_comm_share_ratio"] < 0.08
    between = m["sections"]["overlap"]["metrics"].get("between_stage_share_ratio")
    if gt["stage_num"] > 1:
        assert between < 0.08
    mem = _table(m, "memory", "per_rank")
    assert mem["peak_ratio"].max() < 0.80
    assert mem["peak_mb"].max() < 1.10 * mem["peak_mb"].min()
    fl = _table(m, "flops", "per_rank")
    per_stage = fl.groupby(fl["stage"].fillna(1))["flops"].mean()
    assert per_stage.max() < 1.05 * per_stage.min()
    # large messages: every collective / p2p link entry of an operator moves >= 1 MB (>= 16 MB intra-host)
    # (the legacy layout's 4-column hccl_raw has no per-operator links: look at the same run, flat layout)
    flat = root.parent / "flat"
    write_mindinsight_run(flat, MindInsightSpec.clean_run(stages=gt["stage_num"], layout="flat"))
    lk = read_run(flat).table("mi_links")
    lk = lk[lk["op"].notna() & (lk["step"] >= 0) & (lk["src_local"] != lk["dst_local"])]
    assert len(lk) and (lk["size_mb"] >= 1.0).all()
    assert (lk[lk["transport"] == "SDMA"]["size_mb"] >= 16.0).all()


# --------------------------------------------------------------------------- 2. anomalies alone

CASES = {
    "slow_rank": (dict(slow_fp_bp={5: 1.4}), ["slow_device_compute", "slow_rank_compute", "rank_arrives_late"]),
    "slow_rank_dp": (dict(stages=1, slow_fp_bp={2: 1.4}), ["slow_device_compute", "slow_rank_compute", "rank_arrives_late"]),
    "slow_host": (dict(slow_hosts={1: 0.15}), ["slow_host", "slow_input_pipeline"]),
    "slow_host_dp": (dict(stages=1, slow_hosts={0: 0.15}), ["slow_host", "slow_input_pipeline"]),
    "slow_link_ring": (dict(slow_links={(1, 2): 0.3}), ["slow_link", "slow_link_transit"]),
    "slow_link_p2p": (dict(slow_links={(1, 5): 0.3}), ["slow_link", "slow_link_transit"]),
    "slow_link_dp_rdma": (dict(stages=1, slow_links={(7, 0): 0.3}), ["slow_link", "slow_link_transit"]),
    "pipeline_bubble": (dict(pipeline_bubble=0.3), ["pipeline_between_stage"]),
    "memory": (dict(memory_peaks={6: 0.96}), ["memory_near_capacity"]),
    "memory_dp": (dict(stages=1, memory_peaks={1: 0.96}), ["memory_near_capacity"]),
    "flops_stage2": (dict(heavy_stages={2: 1.6}), ["stage_flops_imbalance", "flops_per_s_low", "heavy_pipeline_stage"]),
    "flops_stage1": (dict(heavy_stages={1: 1.6}), ["stage_flops_imbalance", "flops_per_s_low", "heavy_pipeline_stage"]),
    "exposed_comm": (dict(exposed_comm={2: 5.0}), ["pipeline_within_stage"]),
    "exposed_comm_dp": (dict(stages=1, exposed_comm={1: 5.0}), ["comm_share"]),
}


def _names_anomaly(f: dict, a: dict, gt: dict) -> bool:
    """The finding points at the injected rank / host / link / stage, the way the report can know it."""
    kind = a["kind"]
    if kind == "slow_link":
        if f["links"]:
            return a["links"][0] in f["links"]
        loc = a["local_link"]   # hccl_raw links are group-local: the finding names local ends + reporting rank
        return (f["evidence"].get("reported_by_rank") == loc["reported_by"] and f["ranks"] == [loc["reported_by"]]
                and f"{loc['src_local']} → {loc['dst_local']}" in f["message"]
                and f["evidence"].get("transport") == loc["transport"])
    if kind == "pipeline_bubble":
        return True     # a run-wide finding
    if kind == "exposed_communication" and a["stage"] is None:
        return True     # data-parallel: a run-wide finding
    if kind in ("flops_imbalance", "exposed_communication"):
        return f["evidence"].get("stage") == a["stage"] or set(f["ranks"]) == set(a["ranks"])
    if kind == "slow_host_data_loading" and f["id"] == "slow_host":
        return f["ranks"] == a["ranks"] and f["evidence"].get("host") == a["host"]
    return set(a["ranks"]) <= set(f["ranks"]) and f["ranks"][0] in a["ranks"]


@pytest.mark.parametrize("case", list(CASES))
def test_anomaly_alone_is_found(tmp_path_factory, case):
    kw, expected = CASES[case]
    gt, m, _, = _run(tmp_path_factory, MindInsightSpec.clean_run(**kw))[:3]
    assert len(gt["anomalies"]) == 1
    a = gt["anomalies"][0]
    assert a["kind"] in KINDS and set(a) >= {"kind", "ranks", "links", "stage", "host"}
    hits = [f for f in m["findings"] if f["id"] in expected and _names_anomaly(f, a, gt)]
    assert hits, [(f["id"], f["ranks"], f["message"]) for f in m["findings"]]
    if a["kind"] not in ("memory_near_capacity", "pipeline_bubble", "exposed_communication"):  # run-wide levels:
        # low where the diagnosis saw every rank's compute and found no rank, link, stage or host behind them (issue 26)
        assert all(f["severity"] != "low" for f in hits)


def test_anomaly_ground_truth_fields(tmp_path):
    gt = write_mindinsight_run(tmp_path, MindInsightSpec.clean_run(
        slow_fp_bp={1: 1.4}, slow_hosts={1: 0.15}, slow_links={(2, 3): 0.3, (0, 4): 0.5}, pipeline_bubble=0.25,
        memory_peaks={6: 0.96}, heavy_stages={2: 1.6}, exposed_comm={1: 3.0}))
    json.dumps(gt)
    by = {a["kind"]: a for a in gt["anomalies"] if a["kind"] != "slow_link"}
    assert by["slow_rank"] == {"kind": "slow_rank", "ranks": [1], "links": [], "stage": 1, "host": "host-0",
                               "factor": 1.4}
    assert by["slow_host_data_loading"]["ranks"] == [4, 5, 6, 7] and by["slow_host_data_loading"]["host"] == "host-1"
    assert by["pipeline_bubble"]["ranks"] == list(range(8)) and by["pipeline_bubble"]["stage"] is None
    assert by["memory_near_capacity"]["ranks"] == [6] and by["memory_near_capacity"]["stage"] == 2
    assert by["flops_imbalance"]["ranks"] == [4, 5, 6, 7] and by["flops_imbalance"]["stage"] == 2
    assert by["exposed_communication"] == {"kind": "exposed_communication", "ranks": [0, 1, 2, 3], "links": [],
                                           "stage": 1, "host": None, "bytes_factor": 3.0}
    links = [a for a in gt["anomalies"] if a["kind"] == "slow_link"]
    assert [a["links"] for a in links] == [[[0, 4]], [[2, 3]]]
    assert links[0]["local_link"] == {"src_local": 0, "dst_local": 1, "group": "pipeline p2p", "reported_by": 4,
                                      "transport": "RDMA"}
    assert links[1]["local_link"] == {"src_local": 2, "dst_local": 3, "group": "stage 1 gradient ring",
                                      "reported_by": 3, "transport": "SDMA"}
    assert gt["memory"][6]["peak_mem"] == pytest.approx(0.96 * gt["memory"][6]["capacity"], rel=1e-6)


def test_all_anomalies_at_once(tmp_path_factory):
    spec = MindInsightSpec.clean_run(slow_fp_bp={1: 1.6}, slow_hosts={1: 0.3}, slow_links={(2, 3): 0.3},
                                     pipeline_bubble=0.3, memory_peaks={6: 0.96}, heavy_stages={2: 1.6},
                                     exposed_comm={1: 5.0})
    gt, m, _ = _run(tmp_path_factory, spec)
    assert {a["kind"] for a in gt["anomalies"]} == KINDS
    expect = {"slow_rank": ["slow_device_compute", "slow_rank_compute", "rank_arrives_late"],
              "slow_host_data_loading": ["slow_host", "slow_input_pipeline"],
              "slow_link": ["slow_link", "slow_link_transit"], "pipeline_bubble": ["pipeline_between_stage"],
              "memory_near_capacity": ["memory_near_capacity"],
              "flops_imbalance": ["stage_flops_imbalance", "flops_per_s_low", "heavy_pipeline_stage"],
              "exposed_communication": ["pipeline_within_stage"]}
    listed = [x for f in m["findings"] for x in [f] + list(f.get("symptoms", []))]  # causes and their symptoms
    for a in gt["anomalies"]:
        assert any(f["id"] in expect[a["kind"]] and _names_anomaly(f, a, gt) for f in listed), a["kind"]


def test_invalid_anomalies(tmp_path):
    for bad in (dict(stages=1, heavy_stages={1: 1.6}), dict(stages=1, pipeline_bubble=0.3),
                dict(slow_links={(0, 2): 0.3}), dict(slow_links={(1, 2): 1.5}), dict(slow_hosts={2: 0.1}),
                dict(memory_peaks={8: 0.9}), dict(memory_peaks={1: 1.2}), dict(micro_batches=0),
                dict(exposed_comm={3: 2.0}), dict(exposed_comm={1: 0.5}), dict(warmup=0.5)):
        with pytest.raises(ValueError):
            write_mindinsight_run(tmp_path, MindInsightSpec.clean_run(**bad))


# --------------------------------------------------------------------------- 3. determinism


def test_deterministic_with_anomalies(tmp_path):
    kw = dict(slow_fp_bp={1: 1.4}, slow_links={(2, 3): 0.3}, pipeline_bubble=0.2, memory_peaks={6: 0.96},
              heavy_stages={2: 1.6}, slow_hosts={0: 0.1}, exposed_comm={1: 3.0}, warmup=4.0)
    gt_a = write_mindinsight_run(tmp_path / "a", MindInsightSpec.clean_run(**kw))
    gt_b = write_mindinsight_run(tmp_path / "b", MindInsightSpec.clean_run(**kw))
    a, b = _all_bytes(tmp_path / "a"), _all_bytes(tmp_path / "b")
    assert a == b and json.dumps(gt_a, sort_keys=True) == json.dumps(gt_b, sort_keys=True)
    assert sorted(a) == gt_a["files"]
    write_mindinsight_run(tmp_path / "c", MindInsightSpec.clean_run(seed=5, **kw))
    c = _all_bytes(tmp_path / "c")
    assert c.keys() == a.keys() and c != a
    # anomalies draw no random numbers: the clean run's noise is the same with and without them
    clean = write_mindinsight_run(tmp_path / "d", MindInsightSpec.clean_run())
    mem = write_mindinsight_run(tmp_path / "e", MindInsightSpec.clean_run(memory_peaks={6: 0.96}))
    assert clean["per_rank_step"] == mem["per_rank_step"] and clean["flops"] == mem["flops"]


# --------------------------------------------------------------------------- 4. ground truth = read back


def _check_readback(gt: dict, m: dict) -> None:
    t = _table(m, "trajectory", "per_rank_step").set_index(["rank", "step"])
    for row in gt["per_rank_step"]:
        got = t.loc[(row["rank"], row["step"])]
        for c in ("step_ms", "step_interval_ms", "fp_bp_ms", "tail_ms"):
            assert got[c] == pytest.approx(row[c], abs=1e-6), c
    # the profiler's average row is kept as a reference table; our per-rank numbers average the steps in scope
    avg = _table(m, "trajectory", "per_rank_file_average").set_index("rank")
    for r, row in gt["per_rank_avg"].items():
        assert avg.loc[int(r), "step_ms"] == pytest.approx(row["step_ms"], abs=1e-6)
        assert avg.loc[int(r), "fp_bp_ms"] == pytest.approx(row["fp_bp_ms"], abs=1e-6)
    steps = pd.DataFrame(gt["per_rank_step"])
    steps = steps[steps["step"].isin(m["facts"]["steps_in_scope"])].groupby("rank")[["step_ms", "fp_bp_ms"]].mean()
    mine = _table(m, "trajectory", "per_rank").set_index("rank")
    for r, row in steps.iterrows():
        assert mine.loc[int(r), "step_ms"] == pytest.approx(row["step_ms"], abs=1e-6)
        assert mine.loc[int(r), "fp_bp_ms"] == pytest.approx(row["fp_bp_ms"], abs=1e-6)
    o = _table(m, "overlap", "per_rank_step").set_index(["rank", "step"])
    cols = {"computation_ms": "computation_incl_free_ms", "comm_alone_ms": "comm_not_overlapped_ms",
            "stage_ms": "stage_ms", "receive_alone_ms": "receive_only_ms"}
    for row in gt["overlap_per_rank_step"]:
        got = o.loc[(row["rank"], row["step"])]
        for k, c in cols.items():
            if k in row:
                assert got[c] == pytest.approx(row[k], abs=1e-4), c
    comm = _table(m, "communication", "per_rank_file_average").set_index("rank")
    for r, row in gt["hccl_per_rank_avg"].items():
        assert comm.loc[int(r), "transit_ms"] == pytest.approx(row["communication_cost_ms"], rel=1e-9)  # its transit
        assert comm.loc[int(r), "wait_ms"] == pytest.approx(row["wait_cost_ms"], rel=1e-9, abs=1e-12)
    mem = _table(m, "memory", "per_rank").set_index("rank")
    for r, row in gt["memory"].items():
        assert mem.loc[int(r), "peak_mb"] == pytest.approx(row["peak_mem"] * 2**30 / 1e6, abs=1e-5)
        assert mem.loc[int(r), "capacity_mb"] == pytest.approx(row["capacity"] * 2**30 / 1e6, abs=1e-5)
    fl = _table(m, "flops", "per_rank").set_index("rank")
    for r, row in gt["flops"].items():
        assert fl.loc[int(r), "flops"] == pytest.approx(row["FLOPs"] * 1e6, rel=1e-9)
        assert fl.loc[int(r), "flops_per_s"] == pytest.approx(row["FLOPS"] * 1e9, rel=1e-9)
    assert isinstance(m["run"]["hosts"], dict) and {int(r): h for r, h in m["run"]["hosts"].items()} == gt["hosts"]


def test_ground_truth_equals_report_clean(clean):
    gt, m, _ = clean
    _check_readback(gt, m)


def test_ground_truth_equals_report_with_anomalies(tmp_path_factory):
    gt, m, _ = _run(tmp_path_factory, MindInsightSpec.clean_run(
        slow_fp_bp={1: 1.4}, slow_links={(2, 3): 0.3}, pipeline_bubble=0.25, memory_peaks={6: 0.96},
        heavy_stages={2: 1.6}, slow_hosts={1: 0.15}, exposed_comm={1: 3.0}))
    _check_readback(gt, m)
