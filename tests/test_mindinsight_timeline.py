"""ascend_timeline_display_{rank}.json: parsing (both generations, exclusions, ms units) and the Marey view using it."""

from __future__ import annotations

import json
import shutil

import pytest

from reportgen.readers import read_run
from reportgen.readers.mindinsight_timeline import parse_timeline_display
from reportgen.sections import run_sections

from conftest import fixture_dir


def _x(name, pid, tid, ts, dur, **extra):
    return {"name": name, "ph": "X", "pid": pid, "tid": tid, "ts": ts, "dur": dur, **extra}


def _timeline_21(shift_us: float) -> list:
    """A <=2.1 timeline: two steps, AI Core + AI CPU + comm ops, excluded ops, overlap block, metadata."""
    s = shift_us
    return [
        _x("1", 0, 100000, s + 0.0, 1000.0),
        _x("2", 0, 100000, s + 1000.0, 1000.0),
        _x("Conv2D-op1", 0, 5, s + 10.0, 200.0),
        _x("MatMul-op2", 0, 5, s + 300.0, 100.0),
        _x("GetNext-op3", 9000, 0, s + 5.0, 4.0),
        _x("AllReduce-op10", 10000, 0, s + 500.0, 50.0),
        _x("Conv2D-op1", 0, 5, s + 1010.0, 200.0),
        _x("AllReduce-op10", 10000, 0, s + 1500.0, 60.0),
        _x("AtomicAddrClean-op7", 0, 5, s + 20.0, 1.0),
        _x("StreamSend-op8", 0, 5, s + 30.0, 1.0),
        _x("StreamReceive-op9", 0, 5, s + 40.0, 1.0),
        _x("Merged Computation", 12000, 7999, s + 10.0, 300.0),
        _x("Default/network-op0", 11000, 3, s + 0.0, 900.0, args={"scope_level": 0}),
        _x("InitData", 9000, 0, s + 0.0, 1.0),
        {"name": "process_name", "ph": "M", "pid": 10000, "args": {"name": "Communication"}},
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": 100000, "args": {"name": "Steps"}},
    ]


def test_parse_21_steps_ops_units_exclusions(tmp_path):
    p = tmp_path / "ascend_timeline_display_0.json"
    p.write_text(json.dumps(_timeline_21(2000.0)))
    problems = []
    out = parse_timeline_display(p, 0, problems)
    assert problems == []
    steps = out["mi_timeline_steps"]
    assert steps[["step", "start_ns", "end_ns"]].values.tolist() == [[1, 2_000_000, 3_000_000], [2, 3_000_000, 4_000_000]]
    ops = out["mi_timeline_ops"]
    assert list(ops.columns) == ["rank", "name", "kind", "stream", "start_ns", "dur_ms"]
    assert set(ops["name"]) == {"Conv2D-op1", "MatMul-op2", "GetNext-op3", "AllReduce-op10"}
    conv = ops[ops["name"] == "Conv2D-op1"].iloc[0]
    assert conv["start_ns"] == 2_010_000 and conv["dur_ms"] == pytest.approx(0.2)
    assert conv["kind"] == "computation" and conv["stream"] == 5
    assert set(ops.loc[ops["name"] == "AllReduce-op10", "kind"]) == {"communication"}


def test_parse_23_trace_events_dict(tmp_path):
    doc = {"traceEvents": [
        {"name": "process_name", "ph": "M", "pid": 7, "args": {"name": "HCCL"}},
        {"name": "process_name", "ph": "M", "pid": 8, "args": {"name": "Steps"}},
        _x("1", 8, 1, "1000.0", "500.0"),
        _x("Default/net/hcom_broadcast-op3", 7, 2, "1100.0", "10.0"),
        _x("Default/net/Add-op4", 3, 2, "1200.0", "20.0"),
    ]}
    p = tmp_path / "ascend_timeline_display_3.json"
    p.write_text(json.dumps(doc))
    problems = []
    out = parse_timeline_display(p, 3, problems)
    ops = out["mi_timeline_ops"].set_index("name")
    assert ops.loc["hcom_broadcast-op3", "kind"] == "communication"
    assert ops.loc["Add-op4", "kind"] == "computation" and ops.loc["Add-op4", "start_ns"] == 1_200_000
    assert out["mi_timeline_steps"].values.tolist() == [[3, 1, 1_000_000, 1_500_000]]


def test_truncated_file_is_a_problem(tmp_path):
    p = tmp_path / "ascend_timeline_display_0.json"
    p.write_text(json.dumps(_timeline_21(0.0))[:-40])
    problems = []
    assert parse_timeline_display(p, 0, problems) == {}
    assert problems and problems[0][0] == str(p)


def test_profiler_single_fixture_parses():
    p = fixture_dir("mindinsight", "mi_profiler_single") / "ascend_timeline_display_0.json"
    problems = []
    out = parse_timeline_display(p, 0, problems)
    assert problems == []
    assert out["mi_timeline_ops"]["name"].tolist() == ["AssignAdd-op142"]


def timeline_run(pp2x4, tmp_path):
    """pp2x4 with timeline display files of ranks 0 and 1 (rank 1 shifted by 7 µs), read."""
    root = tmp_path / "run"
    shutil.copytree(pp2x4, root)
    for rank, shift in ((0, 0.0), (1, 7.0)):
        (root / f"ascend_timeline_display_{rank}.json").write_text(json.dumps(_timeline_21(shift)))
    return read_run(root)


def test_marey_uses_timeline_display(tmp_path, pp2x4):
    run = timeline_run(pp2x4, tmp_path)
    assert set(run.table("mi_timeline_ops")["rank"]) == {0, 1}
    assert len(run.table("mi_timeline_steps")) == 4
    (out,) = run_sections(run, only=["execution"])
    assert out.status == "ok", out.reason
    m = out.analysis.metrics
    assert m["marey_source"].startswith("device_timeline") and "derived" not in m["marey_source"]
    rows = out.analysis.data["marey"]
    assert set(rows["kind"]) == {"computation", "communication"}
    assert "Conv2D-op1" in set(rows["op"]) and not rows["op"].str.contains("AtomicAddrClean").any()
    assert set(rows["rank"]) == {0, 1}
    assert m["alignment_op"].startswith("AllReduce-op10")


def test_without_timeline_step_ops_still_used(pp2x4):
    run = read_run(pp2x4)
    (out,) = run_sections(run, only=["execution"])
    assert out.analysis.metrics["marey_source"].startswith("device_timeline: communication")
    assert "derived compute" in out.analysis.metrics["marey_source"]
