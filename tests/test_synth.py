"""Tests of the synthetic MindInsight cluster-profiler generator (reportgen.synth)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from reportgen.synth import MindInsightSpec, write_mindinsight_run

BASE_COLS = ["step_num", "start_point", "end_point", "total", "fp_point", "bp_point",
             "iteration_interval", "fp_and_bp", "tail"]
PP_HEADER = ["computation_time", "communication_alone_time", "stage_time", "receive_alone_time",
             "collective_communication_alone_time"]


def _read_csv(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


def _all_bytes(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    root = tmp_path_factory.mktemp("demo")
    return root, write_mindinsight_run(root, MindInsightSpec(slow_ranks={5: 4.0}))


def test_deterministic_byte_identical(tmp_path):
    spec = MindInsightSpec(slow_ranks={3: 3.0}, slow_fp_bp={9: 1.3}, hostile_name='x"<y>')
    gt_a = write_mindinsight_run(tmp_path / "a", spec)
    gt_b = write_mindinsight_run(tmp_path / "b", spec)
    a, b = _all_bytes(tmp_path / "a"), _all_bytes(tmp_path / "b")
    assert a.keys() == b.keys() and a == b
    assert json.dumps(gt_a, sort_keys=True) == json.dumps(gt_b, sort_keys=True)
    assert sorted(a) == gt_a["files"]
    # another seed changes the numbers but not the file set
    write_mindinsight_run(tmp_path / "c", MindInsightSpec(seed=1, slow_ranks={3: 3.0}, slow_fp_bp={9: 1.3},
                                                          hostile_name='x"<y>'))
    c = _all_bytes(tmp_path / "c")
    assert c.keys() == a.keys() and c != a


def test_ground_truth_shape(demo):
    root, gt = demo
    json.dumps(gt)  # JSON-serialisable
    assert gt["world_size"] == 16 and gt["ranks"] == list(range(16))
    assert gt["parallel_mode"] == "pipeline-parallel" and gt["steps"] == [1, 2, 3, 4, 5]
    assert gt["hosts"][7] == "host-0" and gt["hosts"][8] == "host-1"
    assert gt["devices"][9] == 1 and gt["stages"][7] == 1 and gt["stages"][8] == 2
    assert len(gt["per_rank_step"]) == 16 * 5 and len(gt["overlap_per_rank_step"]) == 16 * 5
    assert set(gt["per_rank_avg"]) == set(range(16))
    assert gt["slow_ranks"] == [5] and gt["slow_fp_bp"] == []
    for rel in gt["files"]:
        assert (root / rel).is_file()
    kinds = {"step_trace_raw", "ascend_cluster_analyse", "hccl_raw", "flops_summary",
             "memory_usage_summary", "profiler_info"}
    for k in kinds:
        assert sum(Path(f).name.startswith(k) for f in gt["files"]) == 16, k


def test_step_trace_format(demo):
    root, gt = demo
    by_rank_step = {(d["rank"], d["step"]): d for d in gt["per_rank_step"]}
    for rank in (0, 5, 8, 15):
        path = root / "profiler" / f"step_trace_raw_{rank}_detail_time.csv"
        raw = path.read_bytes()
        assert raw.endswith(b"\r\n") and raw.count(b"\r\n") == raw.count(b"\n") == 7
        rows = _read_csv(path)
        header = rows[0]
        assert header[:9] == BASE_COLS
        ops = header[9:]
        assert len(ops) % 3 == 0 and len(ops) > 0
        for i in range(0, len(ops), 3):
            assert ops[i + 1] == ops[i] + "_start_point" and ops[i + 2] == ops[i] + "_end_point"
        assert any("Receive-op" in h for h in ops) and any("AllReduce-op" in h for h in ops)
        assert [r[0] for r in rows[1:]] == ["1", "2", "3", "4", "5", "-"]
        assert all(len(r) == len(header) for r in rows)
        data = np.array([[int(v) for v in r[1:]] for r in rows[1:-1]], dtype=np.int64)
        avg = np.array([int(v) for v in rows[-1][1:]], dtype=np.int64)
        assert (avg == data.mean(axis=0).astype(np.int64)).all()
        start, end, total, fp, bp, iv, fb, tail = (data[:, i] for i in range(8))
        assert (total == end - start).all() and (iv == fp - start).all()
        assert (fb == bp - fp).all() and (tail == end - bp).all()
        assert iv[0] == 0 and start[0] == fp[0] and (start[1:] == end[:-1]).all()
        assert 1.0e12 < start[0] < 1.3e12
        for j in range(8, data.shape[1], 3):   # op triples: duration, start, end
            assert (data[:, j] == data[:, j + 2] - data[:, j + 1]).all()
            assert (data[:, j + 1] >= start).all() and (data[:, j + 2] <= end).all()
        for s in range(5):
            d = by_rank_step[(rank, s + 1)]
            assert d["step_ms"] == total[s] / 1e5 and d["step_interval_ms"] == iv[s] / 1e5
            assert d["fp_bp_ms"] == fb[s] / 1e5 and d["tail_ms"] == tail[s] / 1e5
            assert 150 < d["step_ms"] < 230
        a = gt["per_rank_avg"][rank]
        assert a["step_ms"] == avg[2] / 1e5 and a["step_interval_ms"] == avg[5] / 1e5
        assert a["fp_bp_ms"] == avg[6] / 1e5 and a["tail_ms"] == avg[7] / 1e5


def test_cluster_analyse_consistent(demo):
    root, gt = demo
    ov = {(d["rank"], d["step"]): d for d in gt["overlap_per_rank_step"]}
    st = {(d["rank"], d["step"]): d for d in gt["per_rank_step"]}
    for rank in range(16):
        path = root / "profiler" / f"ascend_cluster_analyse_pipeline-parallel_2_16_{rank}.csv"
        assert path.read_bytes().count(b"\r\n") == 7
        rows = _read_csv(path)
        assert rows[0] == PP_HEADER and len(rows) == 7
        vals = np.array([[float(v) for v in r] for r in rows[1:]])
        for v in vals.ravel():
            assert round(v, 4) == v
        comp, comm, stage, recv, coll = vals.T
        assert np.allclose(comm, recv + coll, atol=2.5e-4)
        for s in range(5):
            step_ms = st[(rank, s + 1)]["step_ms"]
            assert abs(comp[s] - (step_ms - comm[s])) < 2.5e-4
            assert abs(stage[s] - (step_ms - recv[s])) < 2.5e-4
            assert ov[(rank, s + 1)]["receive_alone_ms"] == recv[s]
        # average row = MindSpore 2.0+: mean over steps 2..N
        assert np.allclose(vals[-1], vals[1:-1].mean(axis=0), atol=1e-3)
        assert gt["overlap_per_rank_avg"][rank]["computation_ms"] == comp[-1]
    # stage-1 ranks receive less than stage-2 ranks
    recv_avg = {r: gt["overlap_per_rank_avg"][r]["receive_alone_ms"] for r in range(16)}
    assert max(recv_avg[r] for r in range(8)) < min(recv_avg[r] for r in range(8, 16))


def test_data_parallel_header(tmp_path):
    gt = write_mindinsight_run(tmp_path, MindInsightSpec(stages=1, steps=3))
    assert gt["parallel_mode"] == "data-parallel"
    rows = _read_csv(tmp_path / "profiler" / "ascend_cluster_analyse_data-parallel_1_16_4.csv")
    assert rows[0] == ["computation_time", "communication_alone_time"] and len(rows) == 5
    header = _read_csv(tmp_path / "profiler" / "step_trace_raw_4_detail_time.csv")[0]
    assert not any("Receive" in h or "Send" in h for h in header)
    info = json.loads((tmp_path / "profiler" / "profiler_info_4.json").read_text())
    assert info["rank_id"] == "4" and info["rank_size"] == 16 and info["stage_num"] == 1


def test_hccl_raw_format(demo):
    root, gt = demo
    for rank in (0, 12):
        rows = _read_csv(root / "profiler" / f"hccl_raw_{rank}.csv")
        assert rows[0] == ["step_num", "communication_cost", "wait_cost", "link_info",
                           "communication_operator_cost"]
        assert [r[0] for r in rows[1:]] == ["1", "2", "3", "4", "5", "-"]
        st_header = _read_csv(root / "profiler" / f"step_trace_raw_{rank}_detail_time.csv")[0]
        op_names = st_header[9::3]
        costs = []
        for r in rows[1:]:
            links = json.loads(r[3])
            ops = json.loads(r[4])
            assert list(ops) == op_names
            for key, per_type in links.items():
                src, dst = key.split("-")
                assert int(src) < 8 and int(dst) < 8          # group-local ids
                for typ, v in per_type.items():
                    assert typ in ("SDMA", "RDMA") and len(v) == (4 if typ == "RDMA" else 3)
            for name, (step, cost, wait, op_links) in ops.items():
                assert step == r[0] and cost >= 0 and wait >= 0
            assert abs(float(r[1]) - sum(o[1] for o in ops.values())) < 1e-9
            costs.append(float(r[1]))
        assert abs(costs[-1] - np.mean(costs[:-1])) < 1e-9
        assert gt["hccl_per_rank_avg"][rank]["communication_cost_ms"] == costs[-1]
        # p2p between stages crosses the hosts -> RDMA
        assert "RDMA" in json.dumps(json.loads(rows[1][3]))


def test_small_json_files(demo):
    root, gt = demo
    for rank in (0, 8):
        fl = json.loads((root / "profiler" / f"flops_summary_{rank}.json").read_text())
        assert list(fl) == ["FLOPs", "FLOPS", "FLOPS_Utilization"] and fl == gt["flops"][rank]
        mem = json.loads((root / "profiler" / f"memory_usage_summary_{rank}.json").read_text())
        assert list(mem) == ["capacity", "allocations", "deallocations", "peak_mem", "static_mem"]
        assert 0 < mem["static_mem"] < mem["peak_mem"] < mem["capacity"]
        info = json.loads((root / "profiler" / f"profiler_info_{rank}.json").read_text())
        assert info["rank_id"] == str(rank) and info["stage_num"] == 2 and info["rank_size"] == 16


def test_optional_files_off(tmp_path):
    gt = write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=4, stages=2, with_hccl=False,
                                                         with_flops=False, with_memory=False,
                                                         with_profiler_info=False))
    names = {Path(f).name.split("_")[0] for f in gt["files"]}
    assert names == {"step", "ascend"}
    assert gt["hccl_per_rank_avg"] == {} and gt["flops"] == {} and gt["memory"] == {}


def test_legacy_layout(tmp_path):
    spec = MindInsightSpec(layout="legacy", host_names=["node-a", "node-b"], stages=2, steps=3)
    gt = write_mindinsight_run(tmp_path, spec)
    table = json.loads((tmp_path / "hccl.json").read_text())
    assert table["version"] == "1.0" and table["status"] == "completed" and table["server_count"] == "2"
    assert [s["server_id"] for s in table["server_list"]] == ["10.0.0.1", "10.0.0.2"]
    mapping = dict(line.split() for line in (tmp_path / "host_ips_mapping.txt").read_text().splitlines())
    assert mapping == {"10.0.0.1": "node-a", "10.0.0.2": "node-b"}
    seen = set()
    for server in table["server_list"]:
        name = mapping[server["server_id"]]
        for dev in server["device"]:
            did, rank = int(dev["device_id"]), int(dev["rank_id"])
            seen.add(rank)
            assert gt["devices"][rank] == did and gt["hosts"][rank] == name
            assert rank == table["server_list"].index(server) * 8 + did
            d = tmp_path / "cluster_profiler" / name / "profiler"
            assert (d / f"step_trace_raw_{did}_detail_time.csv").is_file()
            assert (d / f"ascend_cluster_analyse_pipeline-parallel_2_16_{did}.csv").is_file()
            info = json.loads((d / f"profiler_info_{did}.json").read_text())
            assert info["rank_id"] == str(rank)
    assert seen == set(range(16))
    assert not (tmp_path / "profiler").exists()
    # files are keyed by device id: no id >= 8 anywhere
    assert not list(tmp_path.rglob("step_trace_raw_1[0-9]_*"))
    # r1.3 hccl_raw: 4 columns
    rows = _read_csv(tmp_path / "cluster_profiler" / "node-b" / "profiler" / "hccl_raw_3.csv")
    assert rows[0] == ["step_num", "communication_cost", "wait_cost", "link_info"]
    assert all(len(r) == 4 for r in rows) and rows[-1][0] == "-"
    # the ground truth step of rank 11 is what device 3 of node-b says
    st = _read_csv(tmp_path / "cluster_profiler" / "node-b" / "profiler" / "step_trace_raw_3_detail_time.csv")
    assert gt["per_rank_avg"][11]["step_ms"] == int(st[-1][3]) / 1e5


def test_slow_rank_in_ground_truth(tmp_path):
    gt = write_mindinsight_run(tmp_path, MindInsightSpec(slow_ranks={5: 3.0}, slow_fp_bp={10: 1.25}))
    iv = {r: a["step_interval_ms"] for r, a in gt["per_rank_avg"].items()}
    mean_iv = sum(iv.values()) / len(iv)
    assert iv[5] > 1.2 * mean_iv
    assert max(iv, key=iv.get) == 5
    fb = {r: a["fp_bp_ms"] for r, a in gt["per_rank_avg"].items()}
    assert fb[10] > 1.2 * (sum(fb.values()) / len(fb)) and max(fb, key=fb.get) == 10
    # the others wait for it: steps stay synchronous, so the step time is about the same everywhere
    step = [a["step_ms"] for a in gt["per_rank_avg"].values()]
    assert max(step) - min(step) < 1.0
    assert gt["flops"][10]["FLOPS"] < 0.85 * gt["flops"][11]["FLOPS"]


def test_hostile_name(tmp_path):
    with pytest.raises(ValueError):
        write_mindinsight_run(tmp_path / "bad", MindInsightSpec(hostile_name="a,b"))
    name = '<img src=x onerror=alert(1)> "q" ü'
    gt = write_mindinsight_run(tmp_path / "ok", MindInsightSpec(hosts=1, devices_per_host=4, stages=2,
                                                                hostile_name=name))
    header = _read_csv(tmp_path / "ok" / "profiler" / "step_trace_raw_0_detail_time.csv")[0]
    assert header.count(name) == 1 and f"{name}_start_point" in header
    ops = json.loads(_read_csv(tmp_path / "ok" / "profiler" / "hccl_raw_2.csv")[1][4])
    assert name in ops
    assert all(name in v for v in gt["comm_ops"].values())


def test_invalid_specs(tmp_path):
    for bad in (MindInsightSpec(stages=3), MindInsightSpec(layout="nested"), MindInsightSpec(steps=0),
                MindInsightSpec(host_names=["a"]), MindInsightSpec(slow_ranks={16: 2.0}),
                MindInsightSpec(slow_links={(3, 9): 0.5}), MindInsightSpec(heavy_stages={3: 1.5}),
                MindInsightSpec(stages=1, pipeline_bubble=0.2), MindInsightSpec(memory_peaks={0: 0.0})):
        with pytest.raises(ValueError):
            write_mindinsight_run(tmp_path, bad)


def test_1024_ranks(tmp_path):
    spec = MindInsightSpec(hosts=128, devices_per_host=8, stages=2, steps=5, slow_ranks={700: 3.0},
                           with_memory=False, with_profiler_info=False)
    gt = write_mindinsight_run(tmp_path, spec)
    assert gt["world_size"] == 1024 and len(gt["per_rank_avg"]) == 1024
    assert gt["stages"][511] == 1 and gt["stages"][512] == 2 and gt["hosts"][1023] == "host-127"
    assert len(list((tmp_path / "profiler").glob("step_trace_raw_*_detail_time.csv"))) == 1024
    rows = _read_csv(tmp_path / "profiler" / "step_trace_raw_1023_detail_time.csv")
    assert rows[-1][0] == "-" and len(rows) == 7
    assert (tmp_path / "profiler" / "ascend_cluster_analyse_pipeline-parallel_2_1024_1023.csv").is_file()
    iv = {r: a["step_interval_ms"] for r, a in gt["per_rank_avg"].items()}
    assert max(iv, key=iv.get) == 700
    # ends of step 3 are aligned on a common clock (within a few microseconds)
    ends = [int(_read_csv(tmp_path / "profiler" / f"step_trace_raw_{r}_detail_time.csv")[3][2])
            for r in (0, 300, 600, 1023)]
    assert max(ends) - min(ends) < 5_000


def _tree_sha(root: Path) -> str:
    import hashlib

    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(p.relative_to(root).as_posix().encode())
            h.update(p.read_bytes())
    return h.hexdigest()


def test_default_and_legacy_knob_runs_unchanged(tmp_path):
    """Issue 8 added anomaly knobs; with them off the files are byte-identical to the generator before them
    (digests taken from the generator as it was; the demo is covered by golden/demo.json too)."""
    write_mindinsight_run(tmp_path / "a", MindInsightSpec())
    assert _tree_sha(tmp_path / "a") == "e56e1cfad9fd2977782a090475be5e13080db4b7d42835fbbc27cd86ed0864e8"
    write_mindinsight_run(tmp_path / "b", MindInsightSpec(slow_ranks={3: 3.0}, slow_fp_bp={9: 1.3},
                                                          hostile_name='x"<y>'))
    assert _tree_sha(tmp_path / "b") == "f064e297dfc352752096e1a998aa07095f4805036a8d39ee743c8d470d3a003c"


def test_anomalies_in_ground_truth(tmp_path):
    gt = write_mindinsight_run(tmp_path / "a", MindInsightSpec(hosts=1, devices_per_host=4, stages=2, steps=3))
    assert gt["anomalies"] == [] and gt["clean"] is False and gt["micro_batches"] == 4
    from reportgen.demo import DEMO_SLOW_FACTOR, DEMO_SLOW_RANK, demo_spec

    gt = write_mindinsight_run(tmp_path / "demo", demo_spec())
    assert gt["anomalies"][0] == {"kind": "slow_rank_data_loading", "ranks": [DEMO_SLOW_RANK], "links": [],
                                  "stage": 2, "host": "node-c", "factor": DEMO_SLOW_FACTOR}  # the rest: test_demo.py
    gt = write_mindinsight_run(tmp_path / "b", MindInsightSpec(slow_fp_bp={9: 1.3}, slow_links={(8, 9): 0.5},
                                                               memory_peaks={2: 0.95}))
    kinds = [a["kind"] for a in gt["anomalies"]]
    assert kinds == ["slow_rank", "slow_link", "memory_near_capacity"]
    assert gt["anomalies"][1]["local_link"]["src_local"] == 0 and gt["anomalies"][1]["local_link"]["dst_local"] == 1


def test_micro_batches_and_clean_preset(tmp_path):
    gt = write_mindinsight_run(tmp_path, MindInsightSpec.clean_run())
    assert gt["clean"] and gt["micro_batches"] == 8 and gt["layout"] == "legacy" and gt["world_size"] == 8
    ops = gt["comm_ops"]
    assert sum("Receive" in o for o in ops[1]) == 8 and sum("Receive" in o for o in ops[2]) == 8
    assert sum("Send" in o for o in ops[1]) == 8
    mem = [gt["memory"][r]["peak_mem"] for r in range(8)]
    assert max(mem) < 1.01 * min(mem)
    fl = [gt["flops"][r]["FLOPs"] for r in range(8)]
    assert max(fl) < 1.01 * min(fl)
