"""Tests of the synthetic torch_npu Ascend profiler generator (reportgen.synth.ascend): clean runs report no
finding, each injected anomaly is found and attributed, files are deterministic, ground truth = what is read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reportgen.readers.ascend import double_hash as reader_hash
from reportgen.synth.ascend import ANOMALY_FINDINGS, AscendSpec, double_hash, write_ascend_run

from conftest import generated_report

#: (pipeline_bubble: a run-wide level, listed as low when the diagnosis finds no cause behind it — issue 26)
TIME_KINDS = {"slow_rank", "slow_host_data_loading", "slow_link"}


def _report(tmp_path_factory, spec: AscendSpec) -> tuple[Path, dict, dict]:
    """Run directory, ground truth and metrics of the generated run, reported by the CLI with the ground truth's
    ``cli_args``, once per process (conftest.generated_report: tests/test_advisor_groundtruth.py reports some of the
    same runs). Read only."""
    gt, m, root, _ = generated_report(tmp_path_factory, write_ascend_run, spec)
    return root, gt, m


def _all_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module", params=[2, 1], ids=["pp2", "dp"])
def clean(request, tmp_path_factory):
    return _report(tmp_path_factory, AscendSpec(stages=request.param))


def test_clean_run_has_no_finding(clean):
    root, gt, m = clean
    assert m["findings"] == []
    assert m["data_problems"] == []
    # every section with data is ok; the host section needs host-side data the generator does not write
    assert all(s["status"] == "ok" for k, s in m["sections"].items() if k != "host")
    assert m["sections"]["host"]["status"] in ("ok", "unavailable")
    size = sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
    assert size < 3.5e6


def test_clean_run_noise_limits(clean):
    _, gt, _ = clean
    rows = gt["per_rank_step"]
    step = sum(r["step_ms"] for r in rows) / len(rows)
    for r in rows:  # the device span is partitioned; Stage + Bubble is the same span
        assert r["step_ms"] == pytest.approx(r["stage_ms"] + r["bubble_ms"], abs=1e-6)
        assert r["comm_not_overlapped_ms"] < 0.08 * step
        assert r["bubble_ms"] < 0.08 * step
    by_stage: dict = {}
    for r in rows:
        by_stage.setdefault((gt["stages"][r["rank"]], r["step"]), []).append(r)
    for grp in by_stage.values():
        for k in ("computing_ms", "comm_not_overlapped_ms", "free_ms"):
            vals = [r[k] for r in grp]
            assert max(vals) - min(vals) < 0.02 * step, k
    peaks = [v["peak_ratio"] for v in gt["per_rank"].values()]
    assert max(peaks) < 0.80 and max(peaks) / min(peaks) < 1.10
    flops: dict = {}
    for v in gt["per_rank"].values():
        flops.setdefault(v["stage"], []).append(v["flops"])
    means = [sum(f) / len(f) for f in flops.values()]
    assert max(means) / min(means) < 1.05
    assert gt["anomalies"] == []


def test_ground_truth_equals_read_back(clean):
    root, gt, m = clean
    sec = m["sections"]
    assert m["run"]["world_size"] == gt["world_size"] and m["run"]["ranks"] == gt["ranks"]
    assert m["run"]["steps"] == gt["steps"]
    assert {int(k): v for k, v in m["run"]["hosts"].items()} == gt["hosts"]
    assert m["run"]["parallel"]["pp"] == gt["parallel"]["pp"] and m["run"]["parallel"]["dp"] == gt["parallel"]["dp"]
    got = {(r["rank"], r["step"]): r for r in sec["overlap"]["tables"]["per_rank_step"]}
    comm = {(r["rank"], r["step"]): r for r in sec["communication"]["tables"]["per_rank_step"]}
    assert len(got) == len(gt["per_rank_step"])
    for want in gt["per_rank_step"]:
        key = (want["rank"], want["step"])
        have = got[key]
        for col in ("step_ms", "computing_ms", "comm_not_overlapped_ms", "overlapped_ms", "comm_ms", "free_ms",
                    "stage_ms", "bubble_ms", "comm_not_overlapped_exclude_receive_ms", "preparing_ms"):
            ours = "comm_busy_ms" if col == "comm_ms" else col  # the union, named apart from the op time (sum)
            assert have[ours] == pytest.approx(want[col], abs=1e-6), (key, col)
        assert have["stage"] == gt["stages"][want["rank"]]
        assert comm[key]["comm_op_ms"] == pytest.approx(want["comm_elapse_ms"], abs=1e-6)
        assert comm[key]["wait_ms"] == pytest.approx(want["comm_wait_ms"], abs=1e-6)
        assert comm[key]["transit_ms"] == pytest.approx(want["comm_transit_ms"], abs=1e-6)
    mem = {r["rank"]: r for r in sec["memory"]["tables"]["per_rank"]}
    fl = {r["rank"]: r for r in sec["flops"]["tables"]["per_rank"]}
    for rank, v in gt["per_rank"].items():
        assert mem[rank]["peak_mb"] == pytest.approx(v["peak_mb"], rel=1e-9)
        assert mem[rank]["peak_ratio"] == pytest.approx(v["peak_ratio"], rel=1e-9)
        assert mem[rank]["capacity_source"] == "option device_memory_gb"
        assert fl[rank]["flops"] == pytest.approx(v["flops"], rel=1e-12)
    links = {(x["src_rank"], x["dst_rank"], x["transport"]): x for x in sec["communication"]["tables"]["links"]}
    for want in gt["links"]:
        have = links[(want["src"], want["dst"], want["transport"])]
        assert have["size_mb"] == pytest.approx(want["size_mb"], rel=1e-9)
        assert have["bandwidth_gbps"] == pytest.approx(want["bandwidth_gbps"], rel=1e-6)


def test_format_details(clean):
    root, gt, _ = clean
    rank_dirs = sorted(p for p in root.iterdir() if p.is_dir())
    assert len(rank_dirs) == gt["world_size"]
    for key, g in gt["groups"].items():
        assert int(g["hash"]) == double_hash(key) == reader_hash(key)
    d = root / gt["per_rank"][0]["dir"]
    assert d.name.startswith(gt["hosts"][0] + "_") and d.name.endswith("_ascend_pt")
    out = d / "ASCEND_PROFILER_OUTPUT"
    head = (out / "step_trace_time.csv").read_text().splitlines()[0]
    assert head.startswith("Device_id,Step,Computing,Communication(Not Overlapped),Overlapped,")
    comm = json.loads((out / "communication.json").read_text())
    step = comm[f"step{gt['steps'][0]}"]
    op, info = next((k, v) for k, v in step["collective"].items() if k != "Total Op Info")
    assert op.rsplit("@", 1)[1] in {g["hash"] for g in gt["groups"].values()}
    assert set(info["Communication Bandwidth Info"]) == {"RDMA", "HCCS", "PCIE", "SDMA", "SIO"}
    t = info["Communication Time Info"]
    assert t["Elapse Time(ms)"] == pytest.approx(t["Transit Time(ms)"] + t["Wait Time(ms)"] + t["Idle Time(ms)"])
    matrix = json.loads((out / "communication_matrix.json").read_text())
    keys = list(matrix[f"step{gt['steps'][0]}"]["collective"])
    assert any(k.startswith("allreduce-total@") for k in keys)
    kd = (out / "kernel_details.csv").read_text()
    assert '"""' in kd and "MatMulV3" in kd and "COMMUNICATION" in kd
    meta = json.loads((d / "profiler_metadata.json").read_text())
    assert meta["distributed_args"]["world_size"] == gt["world_size"]
    assert all(0 in g["global_ranks"] for g in meta["parallel_group_info"].values())


def test_deterministic_byte_identical(tmp_path):
    spec = AscendSpec(slow_rank=2, slow_link=(5, 6), memory_near_capacity=3, steps=4)
    gt_a = write_ascend_run(tmp_path / "a", spec)
    gt_b = write_ascend_run(tmp_path / "b", spec)
    a, b = _all_bytes(tmp_path / "a"), _all_bytes(tmp_path / "b")
    assert a.keys() == b.keys() and a == b
    assert json.dumps(gt_a, sort_keys=True) == json.dumps(gt_b, sort_keys=True)
    assert sorted(a) == gt_a["files"]
    write_ascend_run(tmp_path / "c", AscendSpec(seed=7, slow_rank=2, slow_link=(5, 6), memory_near_capacity=3,
                                                steps=4))
    c = _all_bytes(tmp_path / "c")
    assert c.keys() == a.keys() and c != a


ALONE = [
    ("slow_rank", dict(slow_rank=1)),
    ("slow_host_data_loading", dict(slow_host=1)),
    ("slow_link", dict(slow_link=(1, 2))),
    ("pipeline_bubble", dict(pipeline_bubble=True)),
    ("memory_near_capacity", dict(memory_near_capacity=5)),
    ("flops_imbalance", dict(flops_imbalance=2)),
    ("slow_rank", dict(stages=1, slow_rank=6)),
    ("slow_host_data_loading", dict(stages=1, slow_host=0)),
    ("slow_link", dict(stages=1, slow_link=(3, 4))),
    ("flops_imbalance", dict(stages=1, flops_imbalance=3)),
]


def _matches(anom: dict, f: dict) -> bool:
    if f["id"] not in anom["finding_ids"]:
        return False
    if anom["links"]:
        return all(link in f["links"] or set(link) <= set(f["ranks"]) for link in anom["links"])
    if anom["stage"] is not None and len(anom["ranks"]) > 1:
        return f["evidence"].get("stage") == anom["stage"] or set(f["ranks"]) == set(anom["ranks"])
    return set(anom["ranks"]) <= set(f["ranks"])


def _listed(m: dict) -> list[dict]:
    """The findings and, under each, the symptoms it lists (issue 26: one problem, one finding, led by its cause;
    with several injected at once, one can be the other's symptom)."""
    return [x for f in m["findings"] for x in [f] + [dict(s, severity=f["severity"]) for s in f.get("symptoms", [])]]


def _check(gt: dict, m: dict, severity: bool) -> None:
    for anom in gt["anomalies"]:
        hits = [f for f in (_listed(m) if not severity else m["findings"]) if _matches(anom, f)]
        assert hits, (anom, [(f["id"], f["ranks"], f["links"]) for f in m["findings"]])
        if severity and anom["kind"] in TIME_KINDS:
            assert any(f["severity"] != "low" for f in hits), (anom, hits)


@pytest.mark.parametrize("kind,kw", ALONE, ids=[f"{k}-{'dp' if kw.get('stages') == 1 else 'pp2'}" for k, kw in ALONE])
def test_anomaly_alone_is_found(kind, kw, tmp_path_factory):
    _, gt, m = _report(tmp_path_factory, AscendSpec(**kw))
    assert [a["kind"] for a in gt["anomalies"]] == [kind]
    assert gt["anomalies"][0]["finding_ids"] == ANOMALY_FINDINGS[kind]
    _check(gt, m, severity=True)


@pytest.mark.parametrize("kw", [
    dict(slow_rank=1, slow_host=1, slow_link=(2, 3), pipeline_bubble=True, memory_near_capacity=6, flops_imbalance=1),
    dict(slow_rank=1, slow_host=1, slow_link=(2, 3), memory_near_capacity=6, flops_imbalance=2),
    dict(stages=1, slow_rank=1, slow_host=1, slow_link=(2, 3), memory_near_capacity=6, flops_imbalance=5),
], ids=["pp2-all", "pp2-no-bubble", "dp-all"])
def test_several_anomalies_at_once(kw, tmp_path_factory):
    _, gt, m = _report(tmp_path_factory, AscendSpec(**kw))
    assert len(gt["anomalies"]) == sum(1 for k in kw if k != "stages")
    _check(gt, m, severity=False)


def test_anomaly_ground_truth_shape(tmp_path):
    gt = write_ascend_run(tmp_path, AscendSpec(slow_host=0, slow_link=(1, 2), flops_imbalance=2, steps=1,
                                               microbatches=4))
    json.dumps(gt)
    by = {a["kind"]: a for a in gt["anomalies"]}
    assert by["slow_host_data_loading"]["ranks"] == [0, 1, 2, 3] and by["slow_host_data_loading"]["host"] == "host-0"
    assert by["slow_link"]["links"] == [[1, 2]] and by["slow_link"]["ranks"] == [1, 2]
    assert by["flops_imbalance"]["stage"] == 2 and by["flops_imbalance"]["ranks"] == [4, 5, 6, 7]
    assert gt["options"] == {"device_memory_gb": 64.0} and gt["cli_args"] == ["--device-memory-gb", "64.0"]


@pytest.mark.parametrize("bad", [
    dict(stages=3), dict(slow_rank=8), dict(slow_host=2), dict(slow_link=(0, 5)), dict(stages=1, pipeline_bubble=True),
    dict(flops_imbalance=3), dict(host_names=["a", "a"]),
])
def test_invalid_specs(bad, tmp_path):
    with pytest.raises(ValueError):
        write_ascend_run(tmp_path, AscendSpec(**bad))
