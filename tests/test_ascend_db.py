"""Ascend DB exports (reportgen.readers.ascend_db): same tables as the text parsers, input never changed."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reportgen.readers.ascend import NO_STEP_ID, parse_communication, parse_matrix, parse_step_trace_time
from reportgen.readers.ascend_db import COLUMNS, read_db_rank

from conftest import fixture_dir, tree_digest

ALL = set(COLUMNS)
#: the text export's Stage/Preparing come from µs-rounded trace events, the DB's from ns: they differ by
#: up to 0.16 µs on the fixture; everything else is equal to the float.
STEP_ATOL_MS = 1e-3


def _sorted(df: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return df.sort_values(keys, kind="stable").reset_index(drop=True)


# --------------------------------------------------------------------------- analysis.db == text files


@pytest.mark.parametrize("rank", [0, 1, 2, 3])
def test_analysis_db_equals_text_files(rank):
    root = fixture_dir("ascend", "msinsight", "test", "st", "level2")
    before = tree_digest(root)
    d = root / f"rank_{rank}_ascend_pt"
    out = d / "ASCEND_PROFILER_OUTPUT"
    problems: list = []
    got = read_db_rank(d, rank, {"step_time", "comm_ops", "comm_bandwidth", "comm_matrix"}, problems)
    assert problems == []

    text_problems: list = []
    step = parse_step_trace_time(out / "step_trace_time.csv", rank, text_problems)
    ops, bw = parse_communication(out / "communication.json", rank, text_problems)
    matrix = parse_matrix(out / "communication_matrix.json", rank, text_problems)

    cases = [
        ("step_time", step, ["step"], STEP_ATOL_MS),
        ("comm_ops", ops, ["op"], 1e-9),
        ("comm_bandwidth", bw, ["op", "transport"], 1e-9),
        ("comm_matrix", matrix, ["kind", "op_type", "stat", "group_hash", "src_local", "dst_local"], 1e-9),
    ]
    for name, ref, keys, atol in cases:
        df = got[name]
        assert list(df.columns) == list(ref.columns), name
        assert len(df) == len(ref) > 0, name
        pd.testing.assert_frame_equal(_sorted(df, keys), _sorted(ref, keys), check_dtype=False, rtol=1e-12,
                                      atol=atol, obj=name)
    assert tree_digest(root) == before


# --------------------------------------------------------------------------- DB-only exports


def _clipped_sums(intervals: pd.DataFrame, lo: int, hi: int) -> dict[str, float]:
    """ms per kind inside [lo, hi) (exact int ns)."""
    s, e = intervals["start_ns"].clip(lo, hi), intervals["end_ns"].clip(lo, hi)
    return ((e - s).groupby(intervals["kind"]).sum() / 1e6).to_dict()


@pytest.mark.parametrize("level", ["level0", "level1", "level2"])
@pytest.mark.parametrize("rank", [0, 1])
def test_db_only_export_tables(level, rank):
    root = fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "db", level)
    before = tree_digest(root)
    problems: list = []
    got = read_db_rank(root / f"rank{rank}_ascend_pt", rank, ALL, problems)
    assert tree_digest(root) == before  # nothing written: no -journal, -wal or -shm beside the DBs

    for name, df in got.items():
        assert list(df.columns) == COLUMNS[name], name
        assert (df["rank"] == rank).all(), name
    expected = ALL if level != "level0" else ALL - {"comm_bandwidth", "comm_matrix"}
    assert set(got) == expected
    if level == "level0":  # no comm analysis at Level0: said once per missing table, ops from COMMUNICATION_OP
        assert len(problems) == 3 and all("CommAnalyzer" in p[1] for p in problems)
        assert got["comm_ops"]["transit_ms"].isna().all() and (got["comm_ops"]["elapse_ms"] > 0).all()
    else:
        assert problems == []

    st = got["step_time"]
    assert len(st) == 1 and st["step"].iloc[0] == 50
    row = st.iloc[0]
    assert row["step_ms"] == pytest.approx(row["stage_ms"] + row["bubble_ms"], abs=1e-6)
    assert row["comm_ms"] == pytest.approx(row["comm_not_overlapped_ms"] + row["overlapped_ms"], abs=1e-6)
    assert 100 < row["step_ms"] < 200 and 5 < row["computing_ms"] < 20

    steps = got["trace_steps"]
    assert steps["step"].tolist() == [50]
    lo, hi = steps["start_ns"].iloc[0], steps["end_ns"].iloc[0]
    assert 100 < (hi - lo) / 1e6 < 200
    # the overlap intervals inside the step add up to StepTraceTime (which uses the device step window)
    sums = _clipped_sums(got["overlap_intervals"], lo, hi)
    assert sums["computing"] == pytest.approx(row["computing_ms"], abs=0.01)
    assert sums["communication"] == pytest.approx(row["comm_ms"], abs=0.01)
    assert sums["comm_not_overlapped"] == pytest.approx(row["comm_not_overlapped_ms"], abs=0.01)
    assert sums["free"] == pytest.approx(row["free_ms"], abs=0.01)

    ops = got["comm_ops"]
    assert len(ops) == 4 and set(ops["kind"]) == {"collective"} and set(ops["op_type"]) == {"allreduce"}
    assert ops["group_hash"].str.fullmatch(r"\d+").all() and (ops["step"] == 50).all()
    assert ((ops["start_ns"] >= lo) & (ops["start_ns"] <= hi)).all()
    if level != "level0":
        assert (ops["elapse_ms"] >= ops["transit_ms"] + ops["wait_ms"] - 1e-9).all()
        bw = got["comm_bandwidth"]
        assert set(bw["transport"]) == {"HCCS", "SDMA"} and (bw["size_mb"] > 0).all()
        hccs = bw[bw["transport"] == "HCCS"]
        assert (hccs["bandwidth_gbps"] - hccs["size_mb"] / hccs["time_ms"]).abs().max() < 1e-3
        m = got["comm_matrix"]
        assert set(m["stat"]) >= {"top1", "middle", "total"} and (m["src_local"] == rank).all()
        assert set(m["dst_local"]) == set(range(8))

    k = got["kernels"]
    assert len(k) == 191 and (k["step"] == 50).all() and (k["dur_ms"] > 0).all()
    cores = {"AI_VECTOR_CORE": 149, "AI_CORE": 23, "MIX_AIV": 13, "HCCL": 4, "DSA_SQE": 2}
    if level == "level0":  # Level0 records no core/op type: "N/A", exactly as kernel_details.csv then says
        cores = {"N/A": 187, "HCCL": 4}
    assert k["core"].value_counts().to_dict() == cores
    assert k.loc[k["core"] == "HCCL", "type"].eq("N/A" if level == "level0" else "hcom_allReduce_").all()
    assert ((k["start_ns"] >= lo) & (k["start_ns"] <= hi)).all()

    mem = got["memory_record"]
    assert {"APP", "PTA", "GE", "PTA+GE"} == set(mem["component"])
    app = mem[mem["component"] == "APP"]
    assert app["allocated_mb"].isna().all() and app["reserved_mb"].between(1000, 5000).all()
    pta = mem[mem["component"] == "PTA"]
    assert (pta["allocated_mb"] <= pta["reserved_mb"]).all() and pta["reserved_mb"].between(100, 5000).all()
    mod = got["module_mem"]
    assert {"APP", "HCCL", "RUNTIME"} <= set(mod["component"]) and (mod["reserved_mb"] >= 0).all()
    opm = got["operator_memory"]
    assert len(opm) == 184 and (opm["size_mb"] > 0).all()
    done = opm.dropna(subset=["release_ns"])
    assert ((done["release_ns"] - done["alloc_ns"]) / 1e6 == done["duration_ms"]).all()  # exact ns

    assert len(got["hccl_ops"]) == 4
    dev = got["device_ops"]
    assert not dev["name"].str.contains("Notify|EVENT_|PROFILING", regex=True).any()
    meta = got["metadata"]
    assert "SCHEMA_VERSION" in set(meta["name"]) and "RANK_DEVICE_MAP" in set(meta["name"])


def test_step_time_rebuilt_from_profiler_db_matches_step_trace_time(tmp_path):
    """Without analysis.db the step times come from the profiler DB's tasks: equal to StepTraceTime."""
    for level in ("level0", "level1", "level2"):
        src = fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "db", level, "rank1_ascend_pt")
        ref = read_db_rank(src, 1, {"step_time"}, [])["step_time"]
        dst = tmp_path / level / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        dst.mkdir(parents=True)
        shutil.copy(src / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_1.db", dst)
        problems: list = []
        got = read_db_rank(dst.parent, 1, {"step_time"}, problems)["step_time"]
        assert len(problems) == 1 and "StepTraceTime" in problems[0][1]
        pd.testing.assert_frame_equal(got, ref, check_dtype=False, rtol=0, atol=1e-9)


def test_msprof_db_fixtures():
    """``.dat`` SQLite files, a multi-device analysis file, an empty profiler file, a bare msprof_0.db."""
    base = fixture_dir("ascend", "msinsight", "server", "src", "test", "test_data")
    before = tree_digest(base / "multiDevice"), tree_digest(base / "full_db")
    problems: list = []
    got = read_db_rank(base / "multiDevice" / "msprof_db", 0, ALL, problems)
    st = got["step_time"]
    # no STEP_TIME: the rank reader marks the row "no step id"; read_run makes it the whole-trace step 0
    assert len(st) == 1 and st["step"].iloc[0] == NO_STEP_ID and st["computing_ms"].iloc[0] == pytest.approx(0.07572)
    text = " | ".join(p[1] for p in problems)
    assert "devices 0, 1, 2, 3" in text and "without any known profiler table" in text
    assert "no profiler DB" in text

    problems = []
    got = read_db_rank(base / "full_db", 0, ALL, problems)
    assert {"step_time", "kernels", "overlap_intervals", "device_ops"} <= set(got)
    iv = got["overlap_intervals"]
    assert set(iv["kind"]) == {"computing", "free"}  # msprof's own OVERLAP_ANALYSIS: no communication here
    row = got["step_time"].iloc[0]
    assert row["computing_ms"] == pytest.approx(0.663872) and row["free_ms"] == pytest.approx(140.864736)
    assert (tree_digest(base / "multiDevice"), tree_digest(base / "full_db")) == before


# --------------------------------------------------------------------------- robustness


def test_garbage_and_corrupt_db_give_problems(tmp_path):
    out = tmp_path / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "analysis.db").write_bytes(bytes(range(256)) * 40)
    (out / "ascend_pytorch_profiler_0.db").write_bytes(b"SQLite format 3\x00" + b"\xff" * 5000)
    before = tree_digest(tmp_path)
    problems: list = []
    got = read_db_rank(out.parent, 0, ALL, problems)
    assert got == {}
    paths = {Path(p[0]).name for p in problems}
    assert paths == {"analysis.db", "ascend_pytorch_profiler_0.db"}
    assert tree_digest(tmp_path) == before


def test_corrupt_pages_in_a_valid_header(tmp_path):
    out = tmp_path / "r_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    db = out / "analysis.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE StepTraceTime (step TEXT, computing REAL, communication_not_overlapped REAL, free REAL)")
    con.executemany("INSERT INTO StepTraceTime VALUES (?, ?, ?, ?)", [(str(i), 1.0, 2.0, 3.0) for i in range(3000)])
    con.commit()
    con.close()
    data = bytearray(db.read_bytes())
    data[4096 * 2:4096 * 2 + 2000] = b"\xa5" * 2000  # trash a data page, keep header and schema
    db.write_bytes(bytes(data))
    problems: list = []
    got = read_db_rank(out.parent, 0, {"step_time"}, problems)
    assert "step_time" not in got and problems and "analysis.db" in problems[0][0]


def test_locked_db_gives_problem(tmp_path):
    out = tmp_path / "r_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    db = out / "analysis.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE StepTraceTime (step TEXT, computing REAL, communication_not_overlapped REAL, free REAL)")
    con.commit()
    con.execute("BEGIN EXCLUSIVE")
    try:
        problems: list = []
        got = read_db_rank(out.parent, 0, {"step_time"}, problems)
    finally:
        con.rollback()
        con.close()
    assert got == {} and len(problems) == 1 and "locked" in problems[0][1]


def _wal_db(path: Path, rows: list) -> sqlite3.Connection:
    con = sqlite3.connect(path)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE StepTraceTime (Step TEXT, Free NUMERIC, Computing NUMERIC, "
                "Communication_Not_Overlapped NUMERIC)")
    con.executemany("INSERT INTO StepTraceTime VALUES (?, ?, ?, ?)", rows)
    con.commit()
    return con


def test_wal_mode_db_is_read_without_creating_files(tmp_path):
    """Profiler DBs are WAL-mode: a plain ``mode=ro`` open creates -wal/-shm beside them."""
    out = tmp_path / "r_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    _wal_db(out / "analysis.db", [("step7", 3000.0, 1000.0, 2000.0)]).close()
    assert sorted(p.name for p in out.iterdir()) == ["analysis.db"]
    before = tree_digest(tmp_path)
    problems: list = []
    got = read_db_rank(out.parent, 0, {"step_time"}, problems)
    assert problems == [] and tree_digest(tmp_path) == before
    row = got["step_time"].iloc[0]  # columns found by name, whatever their case and order
    assert (row["step"], row["computing_ms"], row["comm_not_overlapped_ms"], row["free_ms"], row["step_ms"]) == \
        (7, 1.0, 2.0, 3.0, 6.0)


def test_uncheckpointed_wal_is_read_from_a_copy(tmp_path):
    live = tmp_path / "live"
    live.mkdir()
    con = _wal_db(live / "analysis.db", [("step1", 1000.0, 1000.0, 1000.0), ("step2", 2000.0, 2000.0, 2000.0)])
    try:  # snapshot while the writer still holds its rows in the -wal (as after a crash)
        out = tmp_path / "r_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True)
        for p in live.iterdir():
            shutil.copy(p, out / p.name)
    finally:
        con.close()
    assert (out / "analysis.db-wal").stat().st_size > 0
    before = tree_digest(tmp_path / "r_ascend_pt")
    problems: list = []
    got = read_db_rank(out.parent, 0, {"step_time"}, problems)
    assert problems == [] and got["step_time"]["step"].tolist() == [1, 2]
    assert np.allclose(got["step_time"]["step_ms"], [3.0, 6.0])
    assert tree_digest(tmp_path / "r_ascend_pt") == before


def test_nothing_wanted_or_nothing_there(tmp_path):
    problems: list = []
    assert read_db_rank(tmp_path, 0, set(), problems) == {} and problems == []
    assert read_db_rank(tmp_path, 0, {"step_time"}, problems) == {}
    assert len(problems) == 1 and "no .db" in problems[0][1]
