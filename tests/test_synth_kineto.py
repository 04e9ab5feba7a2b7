"""Tests of the synthetic PyTorch Kineto generator (reportgen.synth.kineto): clean runs raise no finding, each
injected anomaly is found and named, same spec -> same bytes, and the ground truth equals what reportgen reads."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from reportgen.readers import read_run
from reportgen.synth.kineto import KinetoSpec, write_kineto_run

from conftest import generated_report


def _bytes(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


def _report(tmp_path_factory, spec: KinetoSpec) -> tuple[dict, dict]:
    """Ground truth and metrics of the generated run, reported by the CLI once per process (conftest.generated_report:
    tests/test_advisor_groundtruth.py reports some of the same runs). Read only."""
    return generated_report(tmp_path_factory, write_kineto_run, spec)[:2]


def _table(m: dict, section: str, name: str) -> list[dict]:
    return m["sections"][section]["tables"][name]


@pytest.fixture(scope="module", params=[2, 1], ids=["pp2", "dp"])
def clean(request, tmp_path_factory):
    truth, m, root, _ = generated_report(tmp_path_factory, write_kineto_run, KinetoSpec(stages=request.param))
    return request.param, truth, m, root.parent  # the run is <tmp>/run


# ------------------------------------------------------------------------------------------ 1. clean
def test_clean_run_has_no_finding(clean):
    stages, truth, m, tmp = clean
    assert m["findings"] == []
    assert all(s["status"] == "ok" for s in m["sections"].values()), {k: s.get("reason") for k, s in
                                                                       m["sections"].items()}
    assert m["run"]["ranks"] == list(range(8)) and len(set(m["run"]["hosts"].values())) == 2
    assert (m["run"]["parallel"].get("stages") or 1) == stages
    assert sum(p.stat().st_size for p in (tmp / "run").iterdir()) < 1_000_000
    assert truth["anomalies"] == []


def test_clean_run_noise_is_small(clean):
    stages, truth, m, _ = clean
    pr = _table(m, "overlap", "per_rank")
    step = sum(r["step_ms"] for r in pr) / len(pr)
    by_stage: dict = {}
    for r in pr:
        by_stage.setdefault(r["stage"], []).append(r)
    for rows in by_stage.values():
        for col in ("computing_ms", "comm_not_overlapped_ms", "free_ms"):
            vals = [r[col] for r in rows]
            assert (max(vals) - min(vals)) / step < 0.02, col
    assert max(r["comm_not_overlapped_ms"] / r["step_ms"] for r in pr) < 0.08
    if stages > 1:
        assert m["sections"]["overlap"]["metrics"]["between_stage_share_ratio"] < 0.08
        assert max(r["receive_only_ms"] / r["step_ms"] for r in pr) < 0.08
    mem = _table(m, "memory", "per_rank")
    peaks = [r["peak_mb"] for r in mem]
    assert max(r["peak_ratio"] for r in mem) < 0.80 and (max(peaks) - min(peaks)) / min(peaks) < 0.10
    fl = _table(m, "flops", "per_rank")
    for k in {r["stage"] for r in fl}:
        vals = [r["flops"] for r in fl if r["stage"] == k]
        assert (max(vals) - min(vals)) / min(vals) < 0.05
    if stages > 1:
        per_stage = [sum(r["flops"] for r in fl if r["stage"] == k) for k in (1, 2)]
        assert abs(per_stage[0] - per_stage[1]) / per_stage[0] < 0.05


# ------------------------------------------------------------------------------------------ 2. anomalies
def _named(f: dict, a: dict) -> bool:
    if a["links"]:
        return any(list(x) in [list(y) for y in f.get("links") or []] for x in a["links"]) or \
            set(a["links"][0]) <= set(f["ranks"])
    if a["stage"] is not None and (f.get("evidence") or {}).get("stage") == a["stage"]:
        return True
    if a["kind"] in ("slow_host_data_loading", "flops_imbalance"):
        return set(a["ranks"]) <= set(f["ranks"])
    return bool(set(a["ranks"]) & set(f["ranks"]))  # pipeline_bubble: every stage; the finding names the worst


EXPECTED = {
    "slow_rank": ({"slow_device_compute", "slow_rank_compute", "rank_arrives_late"}, True),
    "slow_host_data_loading": ({"slow_host", "slow_input_pipeline"}, True),
    "slow_link": ({"slow_link", "slow_link_transit"}, True),
    "pipeline_bubble": ({"pipeline_between_stage"}, False),  # a run-wide level: low without a cause behind it
    "memory_near_capacity": ({"memory_near_capacity"}, False),
    "flops_imbalance": ({"stage_flops_imbalance", "flops_per_s_low", "heavy_pipeline_stage"}, False),
}

CASES = {
    "slow_rank_pp": dict(slow_ranks={1: 1.4}),
    "slow_rank_dp": dict(stages=1, slow_ranks={3: 1.4}),
    "slow_host_pp": dict(slow_hosts={1: 0.15}),
    "slow_host_dp": dict(stages=1, slow_hosts={0: 0.15}),
    "pipeline_bubble": dict(pipeline_bubble=True),
    "memory_pp": dict(memory_peaks={6: 0.96}),
    "memory_dp": dict(stages=1, memory_peaks={2: 0.96}),
    "flops_stage": dict(heavy_stages={2: 1.6}),
    "flops_rank_dp": dict(stages=1, light_ranks={5: 0.6}),
    "several": dict(slow_ranks={6: 1.4}, slow_hosts={0: 0.15}, memory_peaks={2: 0.97}, heavy_stages={1: 1.6}),
}


def _check_found(truth: dict, m: dict) -> None:
    for a in truth["anomalies"]:
        ids, timed = EXPECTED[a["kind"]]
        hits = [f for f in m["findings"] if f["id"] in ids and _named(f, a)]
        assert hits, (a, [(f["id"], f["ranks"]) for f in m["findings"]])
        if timed:
            assert any(f["severity"] != "low" for f in hits), (a, hits)


@pytest.mark.parametrize("case", sorted(CASES))
def test_anomaly_is_found_and_named(case, tmp_path_factory):
    truth, m = _report(tmp_path_factory, KinetoSpec(**CASES[case]))
    assert truth["anomalies"]
    _check_found(truth, m)


def test_slow_link_in_the_reader_table(tmp_path):
    """The reader's p2p_links table (matched NCCL send/recv kernels) names the slow link."""
    truth = write_kineto_run(tmp_path, KinetoSpec(slow_links={(1, 5): 0.3}))
    links = read_run(tmp_path).tables["p2p_links"]
    inter = links[links["transport"] == "inter-host"]
    assert len(inter) == 8 and (inter["matched"] == inter["ops"]).all()
    worst = inter.loc[inter["bandwidth_gbps"].idxmin()]
    assert (int(worst["src_rank"]), int(worst["dst_rank"])) == (1, 5)
    assert worst["bandwidth_gbps"] < 0.8 * inter["bandwidth_gbps"].mean()
    assert truth["anomalies"][0]["links"] == [[1, 5]]


def test_slow_link_found(tmp_path_factory):
    truth, m = _report(tmp_path_factory, KinetoSpec(slow_links={(1, 5): 0.3}))
    assert "links" in m["sections"]["communication"]["tables"]  # per-pair p2p links from Dst/Src Rank
    _check_found(truth, m)


# ------------------------------------------------------------------------------------------ 3. determinism
def test_deterministic(tmp_path):
    spec = KinetoSpec(slow_ranks={2: 1.4}, slow_links={(0, 4): 0.3})
    ga, gb = write_kineto_run(tmp_path / "a", spec), write_kineto_run(tmp_path / "b", spec)
    a, b = _bytes(tmp_path / "a"), _bytes(tmp_path / "b")
    assert a == b and json.dumps(ga, sort_keys=True) == json.dumps(gb, sort_keys=True)
    assert sorted(a) == ga["files"] and len(a) == 8
    write_kineto_run(tmp_path / "c", KinetoSpec(seed=1, slow_ranks={2: 1.4}, slow_links={(0, 4): 0.3}))
    c = _bytes(tmp_path / "c")
    assert c.keys() == a.keys() and all(c[k] != a[k] for k in a)


# ------------------------------------------------------------------------------------------ 4. truth = read back
def test_ground_truth_equals_report(clean):
    stages, truth, m, tmp = clean
    got = {(r["rank"], r["step"]): r for r in _table(m, "overlap", "per_rank_step")}
    assert len(got) == len(truth["per_rank_step"]) == 8 * 4
    pairs = [("step_ms", "step_ms"), ("computing_ms", "computing_ms"), ("comm_ms", "comm_busy_ms"),
             ("comm_not_overlapped_ms", "comm_not_overlapped_ms"), ("free_ms", "free_ms"),
             ("preparing_ms", "preparing_ms"), ("bubble_ms", "receive_only_ms" if stages > 1 else None)]
    for row in truth["per_rank_step"]:
        g = got[(row["rank"], row["step"])]
        for ours, theirs in pairs:
            if theirs:
                assert g[theirs] == pytest.approx(row[ours], abs=1e-4), (row["rank"], row["step"], ours)
    fl = {r["rank"]: r["flops"] for r in _table(m, "flops", "per_rank")}
    mem = {r["rank"]: r for r in _table(m, "memory", "per_rank")}
    for r in range(8):
        assert fl[r] == pytest.approx(truth["flops"][r], rel=1e-9)
        assert mem[r]["peak_mb"] == pytest.approx(truth["memory"][r]["peak_reserved_mb"], rel=1e-12)
        assert mem[r]["capacity_mb"] == pytest.approx(truth["memory"][r]["capacity_mb"], rel=1e-12)
        assert m["run"]["hosts"][str(r)] == truth["hosts"][r]
    if stages > 1:
        run = read_run(tmp / "run")
        assert run.stage_map == truth["stages"]
        lk = {(int(x.src_rank), int(x.dst_rank)): x for x in run.tables["p2p_links"].itertuples()}
        assert len(lk) == len(truth["p2p_links"]) == 8
        for t in truth["p2p_links"]:
            x = lk[(t["src_rank"], t["dst_rank"])]
            assert x.size_mb == pytest.approx(t["size_mb"]) and x.time_ms == pytest.approx(t["time_ms"], abs=1e-6)
            assert x.transport == t["transport"]


# ------------------------------------------------------------------------------------------ 5. format
def test_trace_format(tmp_path):
    truth = write_kineto_run(tmp_path, KinetoSpec(gzip=False, steps=2))
    path = tmp_path / truth["files"][0]
    assert path.name.endswith(".pt.trace.json") and path.name.startswith("gpu-node-0_")
    doc = json.loads(path.read_text())
    assert list(doc)[:2] == ["schemaVersion", "deviceProperties"] and list(doc)[-1] == "traceName"
    info = doc["distributedInfo"]
    assert info["backend"] == "nccl" and info["world_size"] == 8 and info["pg_count"] == 7
    assert {g["pg_desc"] for g in info["pg_config"]} == {"default_pg", "mesh_pp", "mesh_dp"}
    assert doc["deviceProperties"][0]["totalGlobalMem"] == 84_990_623_744
    ev = doc["traceEvents"]
    steps = [e for e in ev if e.get("name", "").startswith("ProfilerStep#")]
    loaders = [e for e in ev if e.get("name", "").startswith("enumerate(DataLoader)")]
    launches = [e for e in ev if e.get("cat") == "cuda_runtime" and "Launch" in e["name"]]
    kernels = {e["args"]["correlation"]: e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy")}
    assert len(steps) == len(loaders) == 2
    for s, d in zip(steps, loaders):
        inside = [x for x in launches if s["ts"] <= x["ts"] < s["ts"] + s["dur"]]
        assert d["ts"] + d["dur"] < min(x["ts"] for x in inside)
        for k in kernels.values():
            if s["ts"] <= k["ts"] < s["ts"] + s["dur"]:
                assert k["ts"] + k["dur"] <= s["ts"] + s["dur"]
    assert all(x["args"]["correlation"] in kernels for x in launches)
    send = next(e for e in ev if e.get("cat") == "kernel" and e["args"].get("Collective name") == "send")
    for key in ("In msg nelems", "Out msg nelems", "Group size", "dtype", "Process Group Name",
                "Process Group Description", "Process Group Ranks", "Dst Rank"):
        assert key in send["args"]
    assert send["name"].startswith("ncclDevKernel_SendRecv") and send["args"]["Dst Rank"] == 4
    mm = next(e for e in ev if e.get("name") == "aten::mm")
    assert mm["args"]["Input Dims"] == [[2048, 4096], [4096, 16384]]
    mem = [e for e in ev if e.get("name") == "[memory]"]
    assert mem and all(e["ph"] == "i" and e["args"]["Device Type"] == 1 for e in mem)
    gz = write_kineto_run(tmp_path / "gz", KinetoSpec(steps=2))
    one = gzip.decompress((tmp_path / "gz" / gz["files"][0]).read_bytes())
    assert json.loads(one)["distributedInfo"]["rank"] == 0


def test_invalid_specs(tmp_path):
    for bad in (dict(stages=3), dict(slow_links={(0, 1): 0.3}), dict(stages=1, slow_links={(0, 4): 0.3}),
                dict(stages=1, pipeline_bubble=True), dict(heavy_stages={3: 1.6}), dict(light_ranks={1: 0.5}),
                dict(slow_ranks={9: 1.4})):
        with pytest.raises(ValueError):
            write_kineto_run(tmp_path, KinetoSpec(**bad))
