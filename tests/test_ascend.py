"""Ascend reader and its sections: discovery, metadata, units, global ranks; agreement with msprof-analyze."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from reportgen import metrics
from reportgen.errors import InputError
from reportgen.readers import read_run
from reportgen.readers.ascend import double_hash
from reportgen.sections import run_sections

from conftest import fixture_dir, reference_file, tree_digest

ST4 = ("ascend", "msinsight", "test", "st", "level2")
COLS = {"Computing": "computing_ms", "Communication(Not Overlapped)": "comm_not_overlapped_ms",
        "Overlapped": "overlapped_ms", "Communication": "comm_busy_ms", "Free": "free_ms", "Stage": "stage_ms",
        "Bubble": "bubble_ms", "Communication(Not Overlapped and Exclude Receive)":
        "comm_not_overlapped_exclude_receive_ms", "Preparing": "preparing_ms"}


def _msprof_rows(ref: str) -> list[dict]:
    path = reference_file("msprof-analyze", ref, "cluster_analysis_output", "cluster_step_trace_time.csv")
    return list(csv.DictReader(path.open()))


def _overlap(path):
    run = read_run(path)
    doc = json.loads(metrics.dumps(metrics.build(run, run_sections(run, only=["overlap", "trajectory"]))))
    return run, doc


def test_double_hash_matches_hccl():
    assert double_hash("group_name_19") == 3985310405473756128


def test_four_rank_mindspeed_set_facts():
    run = read_run(fixture_dir(*ST4))
    assert run.source_format == "ascend"
    assert run.ranks == [0, 1, 2, 3] and run.world_size == 4 and run.missing_ranks == []
    assert run.parallel == {"tp": 1, "pp": 2, "dp": 2, "cp": 1, "ep": 1, "stages": 2, "mode": "pipeline-parallel"}
    assert run.stage_map == {0: 1, 1: 1, 2: 2, 3: 2}  # from the pp groups [0, 2] and [1, 3]
    groups = run.tables["groups"].set_index("group")
    assert groups.loc["group_name_19", "ranks"] == [0, 2] and groups.loc["group_name_19", "kind"] == "pp"
    m = run.tables["comm_matrix"]
    assert set(m["src_rank"]) | set(m["dst_rank"]) <= {0, 1, 2, 3}
    # rank 2 writes its pp link as group-local "1-0": globally that is 2 -> 0
    hccs = m[(m["rank"] == 2) & (m["group"] == "group_name_19") & (m["transport"] == "HCCS")]
    assert set(zip(hccs["src_rank"], hccs["dst_rank"])) == {(2, 0)}
    ops = run.tables["comm_ops"]
    assert {"p2p", "collective"} == set(ops["kind"]) and "group_name_19" in set(ops["group"])


@pytest.mark.parametrize("fixture,ref", [
    (ST4, "st_level2_4rank_text"),
    (("ascend", "msinsight", "test", "data", "pytorch", "text", "level1"), "text_level1_2rank"),
    (("ascend", "msinsight", "test", "data", "pytorch", "text", "level2"), "text_level2_2rank"),
])
def test_rank_and_stage_rows_equal_msprof_analyze(fixture, ref):
    """cluster_step_trace_time.csv: rank rows = our per-rank steps; stage rows = element-wise max per stage."""
    _, doc = _overlap(fixture_dir(*fixture))
    sec = doc["sections"]["overlap"]
    assert sec["status"] == "ok"
    ours = {(r["rank"], r["step"]): r for r in sec["tables"]["per_rank_step"]}
    stages = {(r["ranks"], r["step"]): r for r in sec["tables"].get("per_stage_step", [])}
    rows = _msprof_rows(ref)
    assert rows
    for row in rows:
        key_step = int(row["Step"])
        if row["Type"] == "rank":
            mine = ours[(int(row["Index"]), key_step)]
        else:
            ranks = ", ".join(x.strip() for x in row["Index"].strip("()").split(",") if x.strip())
            mine = stages[(ranks, key_step)]
        for col, key in COLS.items():
            if col in row and row[col] not in ("", "NA"):
                assert mine[key] * 1000 == pytest.approx(float(row[col]), abs=1e-6), (row["Type"], row["Index"], col)
    n_stage = sum(r["Type"] == "stage" for r in rows)
    assert len(stages) == n_stage


def test_bubble_departure_is_shown_with_both_values():
    _, doc = _overlap(fixture_dir(*ST4))
    sec = doc["sections"]["overlap"]
    r0 = next(r for r in sec["tables"]["per_rank"] if r["rank"] == 0)
    assert r0["bubble_ms"] == 0.0  # torch_npu misses hcom_batchSendRecv
    assert r0["receive_incl_batch_ms"] > 100  # ours counts it
    assert "batched send/receive" in sec["metrics"]["bubble_source"]
    assert sec["metrics"]["between_stage_receive_column"] == "receive_incl_batch_ms"


def test_trajectory_from_step_trace_time():
    _, doc = _overlap(fixture_dir(*ST4))
    sec = doc["sections"]["trajectory"]
    assert sec["status"] == "ok" and sec["metrics"]["wait_metric"] == "preparing_ms"
    r0 = next(r for r in sec["tables"]["per_rank_step"] if r["rank"] == 0)
    assert r0["step_ms"] == pytest.approx(231.29010 + 420.17426 + 158.558, abs=1e-6)


def _copy_rank(src: Path, dst: Path):
    shutil.copytree(src, dst)
    return dst


def test_duplicate_rank_newest_wins_and_missing_rank(tmp_path):
    base = fixture_dir(*ST4)
    root = tmp_path / "run"
    _copy_rank(base / "rank_0_ascend_pt", root / "a" / "node_11_20250101000000000_ascend_pt")
    _copy_rank(base / "rank_0_ascend_pt", root / "b" / "node_12_20250102000000000_ascend_pt")
    _copy_rank(base / "rank_1_ascend_pt", root / "node_13_20250101000000000_ascend_pt")
    before = tree_digest(root)
    run = read_run(root)
    assert tree_digest(root) == before
    assert run.ranks == [0, 1] and run.missing_ranks == [2, 3]
    assert any("newer" in p.problem and "node_11" in p.path for p in run.problems)
    assert run.hosts == {0: "node", 1: "node"}
    files = run.tables["files"]
    assert all("node_11" not in p for p in files["path"])


def test_rank_id_inside_profiler_info_as_string(tmp_path):
    base = fixture_dir(*ST4)
    d = _copy_rank(base / "rank_2_ascend_pt", tmp_path / "x_ascend_pt")
    info = json.loads((d / "profiler_info_2.json").read_text())
    info["rank_id"] = "2"
    (d / "profiler_info_2.json").unlink()
    (d / "profiler_info.json").write_text(json.dumps(info))
    _copy_rank(base / "rank_0_ascend_pt", tmp_path / "y_ascend_pt")
    run = read_run(tmp_path)
    assert run.ranks == [0, 2]


def test_broken_files_are_data_problems(tmp_path):
    base = fixture_dir(*ST4)
    d = _copy_rank(base / "rank_0_ascend_pt", tmp_path / "r0_ascend_pt")
    out = d / "ASCEND_PROFILER_OUTPUT"
    text = (out / "communication.json").read_text()
    (out / "communication.json").write_text(text[: len(text) // 2])
    (out / "communication_matrix.json").write_bytes(b"\x00\xff garbage")
    (out / "op_statistic.csv").write_text("a,b\n1,2\n")
    run = read_run(tmp_path)
    assert run.table("op_stats") is None  # parsed on first use; its problem is recorded then
    probs = {Path(p.path).name: p.problem for p in run.problems}
    assert "not valid JSON" in probs["communication.json"]
    assert "not UTF-8" in probs["communication_matrix.json"]
    assert "op_statistic" in probs["op_statistic.csv"]
    assert "step_time" in run.tables  # the rest still works


def test_no_rank_anywhere_is_an_input_error(tmp_path):
    for name in ("a_ascend_pt", "b_ascend_pt"):
        (tmp_path / name / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    with pytest.raises(InputError) as exc:
        read_run(tmp_path)
    assert "rank" in str(exc.value)


@pytest.mark.parametrize("level", ["level0", "level1", "level2"])
def test_step_time_derived_from_trace_equals_step_trace_time(level):
    """Where both exist, the trace-derived step times equal the profiler's step_trace_time.csv."""
    from reportgen.readers.ascend import derive_step_time

    run = read_run(fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "text", level))
    derived = derive_step_time(run.tables["trace_steps"], run.tables["overlap_intervals"], run.tables.get("hccl_ops"))
    written = run.tables["step_time"]
    assert len(derived) == len(written) == 2
    for (_, d), (_, w) in zip(derived.sort_values("rank").iterrows(), written.sort_values("rank").iterrows()):
        for col in ("computing_ms", "comm_not_overlapped_ms", "comm_ms", "free_ms", "overlapped_ms"):
            assert d[col] == pytest.approx(w[col], abs=0.01), (level, col)


def test_large_tables_are_parsed_on_first_use():
    run = read_run(fixture_dir(*ST4))
    assert "kernels" not in run.tables and "kernels" in run.loaders
    k = run.table("kernels")
    assert len(k) == 5050 and set(k["rank"]) == {0, 2} and k["dur_ms"].notna().all()
    mem = run.table("memory_record")
    app = mem[(mem["rank"] == 0) & (mem["component"] == "APP")]
    assert app["reserved_mb"].max() == pytest.approx(11925.015625 * 1.048576, rel=1e-6)  # MiB as written -> MB


def test_sdma_is_never_counted_twice():
    """communication.json repeats HCCS traffic under SDMA; the run model keeps each byte once."""
    run = read_run(fixture_dir(*ST4))
    bw = run.tables["comm_bandwidth"]
    op = bw[(bw["rank"] == 0) & (bw["op"] == "hcom_allGather__097_6_1")]
    assert list(op["transport"]) == ["HCCS"] and op["size_mb"].sum() == pytest.approx(220.233216)
    assert not (bw["transport"] == "SDMA").any()  # all SDMA traffic of this set went over HCCS


def test_cli_report_on_the_four_rank_set(tmp_path):
    from reportgen import cli

    out, js = tmp_path / "r.html", tmp_path / "m.json"
    assert cli.main([str(fixture_dir(*ST4)), "-o", str(out), "--json", str(js), "--quiet"]) == 0
    doc = json.loads(js.read_text())
    assert doc["run"]["source_format"] == "ascend" and doc["run"]["parallel"]["pp"] == 2
    assert {s for s, b in doc["sections"].items() if b["status"] == "ok"} >= {"trajectory", "overlap", "communication"}
    assert not [s for s, b in doc["sections"].items() if b["status"] == "error"]
    html = out.read_text()
    assert "batchSendRecv" in html and "overlap-bars" in html


def test_loose_files_without_profiler_directories_are_refused():
    with pytest.raises(InputError) as exc:
        read_run(fixture_dir("ascend", "msprof-analyze"))
    assert "no profiler output recognised" in str(exc.value)
