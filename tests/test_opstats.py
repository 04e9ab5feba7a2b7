"""reportgen/opstats.py: operator rows of every rank and their statistics, on small tables built here."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from reportgen import opstats
from reportgen.model import Run


def _run(ranks, **tables) -> Run:
    run = Run(name="t", source_format="test", source_path="/x", ranks=list(ranks))
    for k, v in tables.items():
        run.tables[k] = v
    return run


def _kernels():
    # rank 0: MatMul x3 (AI_CORE), Add x1 (AI_VECTOR_CORE), one HCCL comm kernel; rank 1: MatMul x1, Add x2
    return pd.DataFrame({
        "rank": [0, 0, 0, 0, 0, 1, 1, 1],
        "step": [1.0, 1.0, 2.0, 2.0, 2.0, 1.0, 1.0, float("nan")],
        "name": ["mm1", "mm2", "mm1", "add1", "hcom_allReduce_1", "mm1", "add1", "add2"],
        "type": ["MatMul", "MatMul", "MatMul", "Add", "hcom_allReduce_", "MatMul", "Add", "Add"],
        "core": ["AI_CORE", "AI_CORE", "AI_CORE", "AI_VECTOR_CORE", "HCCL", "AI_CORE", "AI_VECTOR_CORE",
                 "AI_VECTOR_CORE"],
        "stream": [1.0] * 8,
        "start_ms": [0.0, 2.0, 10.0, 14.0, 15.0, 0.0, 4.0, 6.0],
        "dur_ms": [1.0, 2.0, 3.0, 4.0, 10.0, 6.0, 1.0, 3.0],
        "op_class": ["compute"] * 4 + ["communication"] + ["compute"] * 3,
    })


def test_rows_every_rank_and_source_per_rank():
    """kernels serve ranks 0 and 1; rank 2 has only op_stats (pre-aggregated rows), rank 3 only gpu_ops: each rank
    gets the first source that has its rows."""
    ops = pd.DataFrame({"rank": [2, 2], "op_type": ["Conv2D", "Cast"], "core": ["AI_CORE", "AI_CPU"],
                        "count": [4.0, 2.0], "total_ms": [8.0, 1.0], "avg_ms": [2.0, 0.5], "min_ms": [1.0, 0.25],
                        "max_ms": [3.0, 0.75], "op_class": ["compute", "compute"]})
    ops_dup = ops.assign(rank=0)  # rank 0 has kernels too: op_stats must not double it
    gpu = pd.DataFrame({"rank": [3, 3], "name": ["gemm", "ncclAllReduce"], "kind": ["kernel", "comm"],
                        "stream": [7, 7], "start_ms": [0.0, 5.0], "dur_ms": [2.0, 1.0], "end_ms": [2.0, 6.0],
                        "correlation": [1, 2]})
    run = _run([0, 1, 2, 3], kernels=_kernels(), op_stats=pd.concat([ops, ops_dup]), gpu_ops=gpu,
               trace_steps=pd.DataFrame({"rank": [3], "step": [5], "start_ms": [0.0], "end_ms": [4.0]}))
    rows = opstats.op_rows(run)
    assert list(rows.columns) == opstats.ROW_COLUMNS
    assert rows.groupby("rank")["source"].unique().map(list).to_dict() == {
        0: ["kernels"], 1: ["kernels"], 2: ["op_stats"], 3: ["gpu_ops"]}
    assert opstats.op_rows(run) is rows  # cached
    r3 = rows[rows["rank"] == 3]
    assert r3["engine"].tolist() == ["kernel", "comm"] and r3["step"].tolist() == [5, -1]
    assert r3["op_class"].tolist() == ["compute", "communication"]
    assert rows[rows["rank"] == 1]["step"].tolist() == [1, 1, -1]


def test_summary_count_total_min_max_std_share():
    run = _run([0, 1], kernels=_kernels())
    s = opstats.op_summary(run, by=("rank", "type"))
    mm0 = s[(s["rank"] == 0) & (s["type"] == "MatMul")].iloc[0]
    assert mm0["count"] == 3 and mm0["total_ms"] == 6.0 and mm0["min_ms"] == 1.0 and mm0["max_ms"] == 3.0
    assert mm0["mean_ms"] == 2.0
    assert mm0["std_ms"] == pytest.approx(np.std([1.0, 2.0, 3.0], ddof=1))  # sample std, as HTA
    # communication is left out of the work rows: rank 0's total is 6 + 4
    assert mm0["share_ratio"] == pytest.approx(0.6)
    assert "hcom_allReduce_" not in set(s["type"])
    one = s[(s["rank"] == 0) & (s["type"] == "Add")].iloc[0]
    assert math.isnan(one["std_ms"])  # one call: no sample std
    allrows = opstats.op_summary(run, by=("rank", "engine"), work_only=False)
    assert allrows[(allrows["rank"] == 0) & (allrows["engine"] == "HCCL")]["total_ms"].iloc[0] == 10.0


def test_summary_by_key_codes_is_the_summary_by_the_keys():
    """summarize given key_codes (each text key factorised once for several tables) gives the frame it gives by the
    keys themselves: the same groups in the same order, values and dtypes, a missing name or type grouped as ''."""
    rng = np.random.default_rng(8)
    n = 400
    names = np.array(["gemm", "relu", None, "nccl:all_reduce", "copy"], dtype=object)
    rows = pd.DataFrame({"rank": rng.integers(0, 4, n), "type": pd.array(rng.choice(names, n), dtype="str"),
                         "name": rng.choice(names, n), "engine": rng.choice(["kernel", "comm"], n),
                         "source": rng.choice(["gpu_ops", "op_stats"], n), "count": rng.integers(1, 3, n),
                         "dur_ms": rng.random(n), "min_ms": rng.random(n), "max_ms": rng.random(n)})
    codes = opstats.key_codes(rows, ("type", "name", "engine", "source"))
    assert set(codes) == {"type", "name", "engine", "source"}
    flags = rows.assign(engine=pd.Series([True, False] * (n // 2), dtype=object))  # not texts: pandas' own keys
    assert "engine" not in opstats.key_codes(flags, ("engine",))
    with pytest.raises(ValueError):  # codes of other rows are refused, not misread
        opstats.summarize(rows.head(10), ("rank", "type"), codes)
    for by in (("rank", "type", "engine"), ("rank", "type"), ("rank", "name"), ("type", "name"), ("engine",)):
        want, got = opstats.summarize(rows, by), opstats.summarize(rows, by, codes)
        assert list(got.dtypes) == list(want.dtypes), by
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_ranks_per_type_and_name_from_codes_is_pandas_nunique():
    """The operators section counts the ranks of each (type, name) from the key codes: pandas' nunique of the rank
    per (type, name) group, where a row missing its type or name counts for no group ('' and missing are not one)."""
    from reportgen.sections import operators

    rng = np.random.default_rng(12)
    for trial in range(40):
        n = int(rng.integers(1, 300))
        vals = np.array(["gemm", "", None, "relu"], dtype=object)
        w = pd.DataFrame({"rank": rng.integers(0, 5, n), "type": pd.array(rng.choice(vals, n), dtype="str"),
                          "name": rng.choice(vals, n), "engine": "kernel", "source": "gpu_ops",
                          "count": 1, "dur_ms": rng.random(n), "min_ms": 0.0, "max_ms": 1.0})
        codes = opstats.key_codes(w, ("type", "name", "engine", "source"))
        type_names = opstats.summarize(w, ("type", "name"), codes)
        nr = w.groupby(["type", "name"])["rank"].nunique()
        want = [int(nr.get((t, n), 0)) for t, n in zip(type_names["type"], type_names["name"])]
        assert operators._ranks_per_type_name(w, type_names, codes) == want
        assert operators._ranks_per_type_name(w, type_names, {}) == want
        w.loc[w.index[::7], "rank"] = np.nan  # a row without its rank counts for no rank, as nunique skips it
        nr = w.groupby(["type", "name"])["rank"].nunique()
        want = [int(nr.get((t, n), 0)) for t, n in zip(type_names["type"], type_names["name"])]
        assert operators._ranks_per_type_name(w, type_names, codes) == want


def test_op_stats_rows_keep_the_files_min_max_and_no_std():
    ops = pd.DataFrame({"rank": [0, 0], "op_type": ["Conv2D", "Conv2D"], "core": ["AI_CORE", "MIX_AIC"],
                        "count": [4.0, 2.0], "total_ms": [8.0, 1.0], "avg_ms": [2.0, 0.5], "min_ms": [1.0, 0.25],
                        "max_ms": [3.0, 0.75], "op_class": ["compute", "compute"]})
    s = opstats.op_summary(_run([0], op_stats=ops), by=("rank", "type"))
    r = s.iloc[0]
    assert (r["count"], r["total_ms"], r["min_ms"], r["max_ms"]) == (6, 9.0, 0.25, 3.0)
    assert r["mean_ms"] == 1.5 and math.isnan(r["std_ms"])


def test_cluster_summary_outlier_rank_and_absent_is_zero():
    k = pd.DataFrame({"rank": [0, 1, 2, 2], "step": [1.0] * 4, "name": ["a", "a", "a", "b"],
                      "type": ["MatMul", "MatMul", "MatMul", "Cast"], "core": ["AI_CORE"] * 3 + ["AI_CPU"],
                      "stream": [1.0] * 4, "start_ms": [0.0] * 4, "dur_ms": [2.0, 2.0, 8.0, 1.0],
                      "op_class": ["compute"] * 4})
    c = opstats.cluster_summary(_run([0, 1, 2], kernels=k), by="type").set_index("type")
    mm = c.loc["MatMul"]
    assert (mm["total_ms"], mm["rank_min_ms"], mm["rank_median_ms"], mm["rank_max_ms"]) == (12.0, 2.0, 2.0, 8.0)
    assert mm["max_rank"] == 2 and mm["spread_ratio"] == pytest.approx(3.0) and mm["ranks"] == 3
    cast = c.loc["Cast"]
    assert cast["rank_min_ms"] == 0.0 and cast["rank_median_ms"] == 0.0 and cast["ranks"] == 1
    assert math.isnan(cast["spread_ratio"])
    assert c["share_ratio"].sum() == pytest.approx(1.0)


def test_comm_summary_is_hccl_sum_like():
    c = pd.DataFrame({"rank": [0, 0, 0, 1], "step": [1, 1, 2, 1], "kind": ["collective"] * 4,
                      "op": ["hcom_allReduce_1", "hcom_allReduce_2", "hcom_broadcast_1", "hcom_allReduce_1"],
                      "op_type": ["allreduce", "allreduce", "broadcast", "allreduce"], "group": ["g"] * 4,
                      "elapse_ms": [1.0, 3.0, 0.5, 2.0]})
    s = opstats.comm_summary(_run([0, 1], comm_ops=c))
    a0 = s[(s["rank"] == 0) & (s["op_type"] == "allreduce")].iloc[0]
    assert (a0["count"], a0["total_ms"], a0["mean_ms"], a0["min_ms"], a0["max_ms"]) == (2, 4.0, 2.0, 1.0, 3.0)
    assert a0["share_ratio"] == pytest.approx(4.0 / 4.5)
    assert opstats.comm_summary(_run([0])) is None


def test_rank_with_only_left_out_rows_keeps_them():
    so = pd.DataFrame({"rank": [0, 0], "step": [1, 1], "op": ["x/AllReduce-op1", "x/AllReduce-op2"],
                       "stream": [1, 1], "start_ms": [0.0, 1.0], "end_ms": [1.0, 3.0], "dur_ms": [1.0, 2.0],
                       "op_type": ["AllReduce", "AllReduce"]})
    s = opstats.op_summary(_run([0], step_ops=so), by=("rank", "type"))
    assert s["total_ms"].tolist() == [3.0] and s["count"].tolist() == [2]


# --------------------------------------------------------------------------- peers on fixtures

ASCEND_ST = ("ascend", "msinsight", "test", "st", "level2")


def test_ascend_per_type_and_core_equal_op_statistic():
    """Per (rank, type, core) from kernel_details.csv == the profiler's own op_statistic.csv of that rank (ranks 0
    and 2 write one): count, total, min, max exactly (same µs values summed), mean and ratio to the file's 3
    decimals. The file has no communication rows (its COMMUNICATION hcom_* kernels are not operators), which is
    what the work rows leave out; its Ratio(%) is the share of the rank's compute total = our share_ratio."""
    from reportgen.readers import read_run
    from conftest import fixture_dir

    root = fixture_dir(*ASCEND_ST)
    run = read_run(root)
    s = opstats.op_summary(run, by=("rank", "type", "engine"))
    for r in (0, 2):
        ref = pd.read_csv(root / f"rank_{r}_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "op_statistic.csv")
        ours = s[s["rank"] == r].set_index(["type", "engine"])
        assert set(ours.index) == set(zip(ref["OP Type"], ref["Core Type"]))
        o = ours.loc[list(zip(ref["OP Type"], ref["Core Type"]))]
        assert (o["count"].to_numpy() == ref["Count"].to_numpy()).all()
        for col, theirs in (("total_ms", "Total Time(us)"), ("min_ms", "Min Time(us)"), ("max_ms", "Max Time(us)")):
            assert np.allclose(o[col].to_numpy() * 1e3, ref[theirs].to_numpy(), rtol=0, atol=1e-6), col
        assert np.allclose((o["mean_ms"] * 1e3).round(3), ref["Avg Time(us)"], rtol=0, atol=1.5e-3)
        assert np.allclose((o["share_ratio"] * 100).round(3), ref["Ratio(%)"], rtol=0, atol=1.5e-3)


HTA_DATA = ("kineto", "hta_tests_data", "tests", "data")
HTA_KERNEL_CASES = {
    "single_negq_rank0": [(*HTA_DATA, "negative_queue_length_values_check", "rank0.json.gz")],
    "trace_filter2": [(*HTA_DATA, "trace_filter", f"sampled_rank-{r}.json.gz") for r in (0, 1)],
}


@pytest.mark.parametrize("case", sorted(HTA_KERNEL_CASES))
def test_per_name_stats_equal_hta_kernel_breakdown(tmp_path, case):
    """Per (rank, kernel name) sum / max / min / mean / stddev == HTA 0.5's kernel_breakdown_per_rank.csv (run with
    num_kernels=1000, duration_ratio=1.0: every kernel), over HTA's window and in its units:

    * window: HTA drops the last ProfilerStep when the trace has >= 2 (research kineto-traces-and-hta.md §1.3/§6):
      a kernel stays when its launch (the earliest runtime call with its correlation, ``gpu_ops.launch_ts_ns``)
      starts before the rank's last ProfilerStep start, both in whole µs (ceil) — as
      :func:`reportgen.intervals.hta_gpu_time_metrics`;
    * units: HTA's whole µs per kernel, floor(end) - ceil(start);
    * stddev: both sample (ddof 1); HTA writes 0 for a kernel called once where ours is NaN (no sample spread).
    Our own stats keep the exact float durations: their totals differ from HTA's by less than 1 µs per call."""
    import shutil

    from conftest import fixture_dir, reference_file
    from reportgen.intervals import hta_profiler_steps
    from reportgen.readers import read_run

    for parts in HTA_KERNEL_CASES[case]:
        f = fixture_dir(*parts)
        shutil.copy(f, tmp_path / f.name)
    run = read_run(tmp_path)
    g = run.tables["gpu_ops"].dropna(subset=["dur_ms"])
    rows = opstats.op_rows(run)
    assert (rows["source"] == "gpu_ops").all() and len(rows) == len(g)
    ev = run.tables["hta_events"]
    marks = ev[ev["role"] == "mark"]
    assert hta_profiler_steps(marks["name"]) >= 2  # both cases: HTA drops the last step
    last = marks.groupby("rank")["ts_ns"].max().map(lambda v: -((-v) // 1000))
    keep = (-((-g["launch_ts_ns"]) // 1000) < g["rank"].map(last)).to_numpy()
    whole_us = ((g["ts_ns"] + g["dur_ns"]) // 1000 - (-((-g["ts_ns"]) // 1000))).to_numpy()
    kept = rows[keep]
    hta_units = kept.assign(dur_ms=whole_us[keep] / 1e3, min_ms=whole_us[keep] / 1e3, max_ms=whole_us[keep] / 1e3)
    s = opstats.summarize(hta_units, ("rank", "name"))
    ref = pd.read_csv(reference_file("hta", case, "kernel_breakdown_per_rank.csv"))
    j = ref.merge(s, on=["rank", "name"], how="outer", indicator=True)
    assert (j["_merge"] == "both").all()
    for ours, theirs in (("total_ms", "sum (us)"), ("max_ms", "max (us)"), ("min_ms", "min (us)"),
                         ("mean_ms", "mean (us)"), ("std_ms", "stddev")):
        assert np.allclose(j[ours].fillna(0) * (1 if ours == "std_ms" else 1e3) * (1e3 if ours == "std_ms" else 1),
                           j[theirs], rtol=1e-9, atol=1e-6), ours
    exact = opstats.summarize(kept, ("rank", "name")).merge(s, on=["rank", "name"], suffixes=("", "_hta"))
    assert ((exact["total_ms"] - exact["total_ms_hta"]).abs() * 1e3 <= exact["count"] + 1e-6).all()


# msprof-analyze 26.2.0 (pip install msprof-analyze), on a copy of the DB fixture pytorch/db/level1:
#   msprof-analyze cluster -d /tmp/msp/in -m compute_op_sum -o /tmp/msp/out_compute_op_sum
#   msprof-analyze cluster -d /tmp/msp/in -m hccl_sum -o /tmp/msp/out_hccl_sum
# rows of cluster_analysis.db ComputeOpPerRankStatsByOpType (the 6 largest SumNs; all 66 rows matched when checked)
# and HcclPerRankStats: (Rank, OpType, TaskType, Count, SumNs, MinNs, MaxNs, StdNs) / (Rank, OpType, Count, SumNs,
# MinNs, MaxNs). Its StdNs is the sample std (NULL for one call), as ours.
MSPROF_COMPUTE_OP_SUM = [
    (1, "ForeachAddList", "AI_VECTOR_CORE", 3, 1952238.0, 623392.0, 698074.0, 41153.01675454668),
    (0, "ForeachAddList", "AI_VECTOR_CORE", 3, 1947618.0, 624512.0, 695074.0, 39761.824253924766),
    (0, "TransData", "AI_VECTOR_CORE", 57, 1408147.0, 6460.0, 71701.0, 13011.276727644112),
    (1, "TransData", "AI_VECTOR_CORE", 57, 1407924.0, 6320.0, 71641.0, 12816.84882564934),
    (1, "MatMulV2", "AI_CORE", 8, 976560.0, 18020.0, 372648.0, 138710.63716137377),
    (0, "MatMulV2", "AI_CORE", 8, 957979.0, 16540.0, 358247.0, 134442.84868505862),
]
MSPROF_HCCL_SUM = [(0, "hcom_allReduce_", 4, 102108100.0, 2180324.0, 88750993.0),
                   (1, "hcom_allReduce_", 4, 98590190.0, 2179243.0, 85233843.0)]


def test_compute_op_sum_and_hccl_sum_equal_msprof_analyze():
    """op_summary per (rank, type, core) == msprof-analyze compute_op_sum; comm_summary per (rank, op type) ==
    hccl_sum (its OpType is the op name's prefix, hcom_allReduce_; ours the canonical allreduce). Durations agree
    to 1 ns (our reader keeps µs floats; hccl_sum's 2179243 ns is our 2.179244 ms)."""
    from conftest import fixture_dir
    from reportgen.readers import read_run

    run = read_run(fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "db", "level1"))
    s = opstats.op_summary(run, by=("rank", "type", "engine")).set_index(["rank", "type", "engine"])
    for rank, typ, core, count, sum_ns, min_ns, max_ns, std_ns in MSPROF_COMPUTE_OP_SUM:
        o = s.loc[(rank, typ, core)]
        assert o["count"] == count
        assert [o["total_ms"] * 1e6, o["min_ms"] * 1e6, o["max_ms"] * 1e6, o["std_ms"] * 1e6] == pytest.approx(
            [sum_ns, min_ns, max_ns, std_ns], abs=1.0)
    c = opstats.comm_summary(run).set_index(["rank", "op_type"])
    assert len(c) == len(MSPROF_HCCL_SUM)
    for rank, _, count, sum_ns, min_ns, max_ns in MSPROF_HCCL_SUM:
        o = c.loc[(rank, "allreduce")]
        assert o["count"] == count
        assert [o["total_ms"] * 1e6, o["min_ms"] * 1e6, o["max_ms"] * 1e6] == pytest.approx([sum_ns, min_ns, max_ns],
                                                                                            abs=4.0)


# --------------------------------------------------------------------------- the operators section


def _many_ranks_run(n_ranks: int = 300) -> Run:
    """n_ranks ranks x (MatMul AI_CORE, Add AI_VECTOR_CORE, Cast AI_CPU, 30 distinct Add kernels); rank 7 is 3x
    slower in MatMul."""
    r = np.repeat(np.arange(n_ranks), 33)
    kind = np.tile(np.arange(33), n_ranks)
    typ = np.where(kind == 0, "MatMul", np.where(kind == 1, "Cast", "Add"))
    core = np.where(kind == 0, "AI_CORE", np.where(kind == 1, "AI_CPU", "AI_VECTOR_CORE"))
    dur = np.where(kind == 0, 10.0, np.where(kind == 1, 0.5, 0.1)) * np.where((r == 7) & (kind == 0), 3.0, 1.0)
    k = pd.DataFrame({"rank": r, "step": 1.0, "name": [f"k{i}" for i in kind], "type": typ, "core": core,
                      "stream": 1.0, "start_ms": kind.astype(float), "dur_ms": dur, "op_class": "compute"})
    return _run(range(n_ranks), kernels=k)


def test_operators_section_every_rank_outlier_and_cuts():
    """The section over 300 ranks: per-type cluster stats name rank 7 in MatMul; the per-rank operator table keeps
    TOP_NAMES + others per rank (others sums the rest exactly); the per-rank charts draw only the ranks_shown ranks
    (rank 7 among them); every spec validates (conftest sets REPORTGEN_VALIDATE_SPECS)."""
    from reportgen.sections import operators

    run = _many_ranks_run()
    a = operators.analyze(run)
    types = a.tables["types"].set_index("type")
    mm = types.loc["MatMul"]
    assert mm["max_rank"] == 7 and mm["rank_max_ms"] == 30.0 and mm["rank_median_ms"] == 10.0
    assert mm["spread_ratio"] == pytest.approx(2.0) and mm["engine"] == "AI_CORE"
    names = a.tables["rank_name_ops"]
    assert names.groupby("rank").size().eq(operators.TOP_NAMES + 1).all()
    o = names[(names["rank"] == 0) & (names["name"] == "others")].iloc[0]
    assert o["count"] == 33 - operators.TOP_NAMES and o["total_ms"] == pytest.approx(0.1 * (33 - operators.TOP_NAMES))
    eng = a.tables["rank_engine_ops"]
    assert set(eng["engine"]) == {"AI_CORE", "AI_VECTOR_CORE", "AI_CPU"} and eng["rank"].nunique() == 300
    v = operators.present(a)
    assert 7 in v.ranks_drawn and len(v.ranks_drawn) < 300
    heat = next(f for f in v.figures if f.id == "operators-rank-heat")
    rows = next(iter(heat.spec["datasets"].values()))
    assert {r["rank"] for r in rows} == set(v.ranks_drawn)
    assert {t.id for t in v.tables} >= {"operators-types-table", "operators-rank-types", "operators-rank-names"}


def test_operators_section_on_ascend_fixture():
    """Whole pipeline on the 4-rank text fixture: the section is ok, its per (rank, type) rows are opstats'."""
    from conftest import fixture_dir
    from reportgen.readers import read_run
    from reportgen.sections import run_sections

    run = read_run(fixture_dir(*ASCEND_ST))
    (out,) = run_sections(run, only=["operators"])
    assert out.status == "ok", out
    rt = out.analysis.tables["rank_type_ops"]
    assert len(rt) == len(opstats.op_summary(run, by=("rank", "type", "engine")))
    assert "comm_type_ops" in out.analysis.tables and "flops_types" in out.analysis.tables
    assert {f.id for f in out.view.figures} == {"operators-types", "operators-rank-heat", "operators-engines"}


# --------------------------------------------------------------------------- honest section (review of issue 27)


def test_operators_unavailable_with_only_communication_ops():
    """The MindInsight step trace's ops are all communication: no operator view (never Receive as the 'top type' or
    in the which-rank-is-slow heatmap); the reason names the tables that give operator data."""
    from reportgen.errors import Unavailable
    from reportgen.sections import operators

    so = pd.DataFrame({"rank": [0, 0, 1], "step": [1, 1, 1], "op": ["x/Receive-op1", "x/AllReduce-op2", "x/Send-op3"],
                       "stream": [1, 1, 1], "start_ms": [0.0, 1.0, 0.0], "end_ms": [1.0, 3.0, 2.0],
                       "dur_ms": [1.0, 2.0, 2.0], "op_type": ["Receive", "AllReduce", "Send"]})
    with pytest.raises(Unavailable) as e:
        operators.analyze(_run([0, 1], step_ops=so))
    assert "only communication ops" in str(e.value) and "kernels" in str(e.value)
    assert opstats.compute_rows(opstats.op_rows(_run([0, 1], step_ops=so))).empty


def test_heatmap_never_draws_communication_types():
    """CPU-only trace: c10d:: ops stay in the tables (the drill-down's rule) but not in the heatmap."""
    from reportgen.sections import operators

    cpu = pd.DataFrame({"rank": [0, 0, 1, 1], "name": ["aten::mm", "c10d::allreduce_", "aten::mm", "c10d::allreduce_"],
                        "start_ms": [0.0, 5.0, 0.0, 5.0], "dur_ms": [2.0, 50.0, 3.0, 1.0]})
    a = operators.analyze(_run([0, 1], cpu_ops=cpu))
    assert "c10d::allreduce_" in set(a.tables["types"]["type"]) and a.data["comm_types"] == ["c10d::allreduce_"]
    heat = next(f for f in operators.present(a).figures if f.id == "operators-rank-heat")
    assert {r["type"] for r in next(iter(heat.spec["datasets"].values()))} == {"aten::mm"}


def _scoped_run():
    # steps 1..3; step 1 is a warm-up step (10x the others); each step: 2 ms MatMul and 1 ms / 4 ms allreduce
    st = pd.DataFrame({"rank": [0, 0, 0, 1, 1, 1], "step": [1, 2, 3] * 2, "step_ms": [100.0, 10.0, 10.0] * 2})
    k = pd.DataFrame({"rank": [0, 0, 0, 1, 1, 1], "step": [1.0, 2.0, 3.0] * 2, "name": "mm1", "type": "MatMul",
                      "core": "AI_CORE", "stream": 1.0, "start_ms": [0.0, 100.0, 110.0] * 2,
                      "dur_ms": [50.0, 2.0, 2.0, 50.0, 2.0, 4.0], "op_class": "compute"})
    c = pd.DataFrame({"rank": [0, 0, 0, 1, 1, 1], "step": [1, 2, 3] * 2, "kind": "collective",
                      "op": ["ar1", "ar2", "ar3"] * 2, "op_type": "allreduce", "group": "g",
                      "start_ms": [60.0, 103.0, 113.0] * 2, "elapse_ms": [30.0, 1.0, 1.0, 30.0, 4.0, 4.0]})
    return _run([0, 1], step_time=st, kernels=k, comm_ops=c)


def test_per_step_values_use_the_steps_in_scope_and_equal_communication():
    """Per-step values leave the warm-up step out, as the rest of the page (reportgen/facts.py); a rank's
    communication op time per step in the operators section equals the communication section's for that rank."""
    from reportgen import facts
    from reportgen.sections import communication, operators

    run = _scoped_run()
    assert facts.of(run).warmup_steps == (1,)
    a = operators.analyze(run)
    rt = a.tables["rank_type_ops"].set_index("rank")
    assert rt.loc[0, "per_step_ms"] == pytest.approx(2.0) and rt.loc[1, "per_step_ms"] == pytest.approx(3.0)
    assert a.metrics["steps_in_scope"] == [2, 3]
    ops_comm = a.tables["comm_type_ops"].groupby("rank")["per_step_ms"].sum()
    comm = communication.analyze(run).tables["per_rank"].set_index("rank")["comm_op_ms"]
    assert ops_comm.to_dict() == pytest.approx(comm.to_dict()) and ops_comm.to_dict() == pytest.approx({0: 1.0, 1: 4.0})


def test_summarize_on_a_small_table():
    """Per group: count (summed), total, min, max, sample std (empty for op_statistic rows), mean, share of the
    rank's total; groups in first-appearance order within the sort (rank, then total descending)."""
    rows = pd.DataFrame({
        "rank": [1, 0, 0, 1, 0, 0],
        "type": ["mm", "mm", "conv", "mm", "mm", None],
        "source": ["gpu_ops", "gpu_ops", "gpu_ops", "gpu_ops", "gpu_ops", "op_stats"],
        "count": [1, 1, 1, 1, 1, 4],
        "dur_ms": [2.0, 1.0, 5.0, 4.0, 3.0, 8.0],
        "min_ms": [2.0, 1.0, 5.0, 4.0, 3.0, 1.5],
        "max_ms": [2.0, 1.0, 5.0, 4.0, 3.0, 3.0]})
    out = opstats.summarize(rows, ("rank", "type"))
    assert out[["rank", "type", "count", "total_ms", "min_ms", "max_ms"]].values.tolist() == [
        [0, "", 4, 8.0, 1.5, 3.0], [0, "conv", 1, 5.0, 5.0, 5.0], [0, "mm", 2, 4.0, 1.0, 3.0],
        [1, "mm", 2, 6.0, 2.0, 4.0]]
    assert out["count"].dtype == np.int64
    assert np.isnan(out.loc[0, "std_ms"]) and np.isnan(out.loc[1, "std_ms"])  # op_statistic rows; one call
    assert out.loc[2, "std_ms"] == pytest.approx(np.std([1.0, 3.0], ddof=1))
    assert out["mean_ms"].tolist() == [2.0, 5.0, 2.0, 3.0]
    assert out["share_ratio"].tolist() == pytest.approx([8 / 17, 5 / 17, 4 / 17, 1.0])


def test_key_by_rank_is_the_pivot_table():
    """opstats._key_by_rank: the keys x ranks matrix of total_ms the pivot table gives (0 where a rank has no row, a
    NaN total as 0, ranks outside the list dropped), placed directly or, with repeated (key, rank) rows, summed."""
    from reportgen.opstats import _key_by_rank
    per = pd.DataFrame({"rank": [2, 0, 0, 5], "type": ["mm", "mm", "conv", "conv"], "total_ms": [1.5, 2.0, np.nan, 4.0]})
    ranks = np.array([0, 1, 2])

    def pivot(df):
        p = df.pivot_table(index="type", columns="rank", values="total_ms", aggfunc="sum", fill_value=0.0)
        return p.index.to_numpy(), p.reindex(columns=ranks, fill_value=0.0).to_numpy(dtype=float)

    for df in (per, pd.concat([per, per.iloc[:1]])):  # placed; summed
        keys, v = _key_by_rank(df, "type", ranks)
        want_keys, want = pivot(df)
        assert keys.tolist() == want_keys.tolist() == ["conv", "mm"]
        np.testing.assert_array_equal(v, want)
    assert _key_by_rank(per, "type", ranks)[1].tolist() == [[0.0, 0.0, 0.0], [2.0, 0.0, 1.5]]


def _gpu_run(n: int = 6):
    gpu = pd.DataFrame({"rank": np.repeat([0, 1], n // 2), "name": ["gemm", "ncclAllReduce", "copy"] * (n // 3),
                        "kind": ["kernel", "comm", "memcpy"] * (n // 3), "stream": [7] * n,
                        "start_ms": np.arange(n, dtype=float), "dur_ms": np.linspace(0.5, 1.5, n),
                        "end_ms": np.arange(n, dtype=float) + np.linspace(0.5, 1.5, n), "correlation": np.arange(n)})
    return _run([0, 1], gpu_ops=gpu), gpu


@pytest.mark.skipif(int(pd.__version__.split('.')[0]) < 3,
                    reason="pandas 2 copies the columns a frame selects (no copy-on-write): the sharing is pandas 3's")
def test_event_rows_share_the_source_arrays_and_hold_no_count_per_row():
    """The operator rows of one event source are a frame over its arrays (rank, start, duration; min and max are the
    duration), count 1 a broadcast: at 1,024 generated Kineto ranks the rows held 86 MiB beside the device ops, 28
    MiB after (issue 30 #1). The values are those of a copy."""
    run, gpu = _gpu_run()
    rows = opstats.op_rows(run)
    for col, src in (("rank", "rank"), ("start_ms", "start_ms"), ("dur_ms", "dur_ms"), ("min_ms", "dur_ms"),
                     ("max_ms", "dur_ms")):
        assert np.shares_memory(rows[col].to_numpy(), gpu[src].to_numpy()), col
    count = rows["count"].to_numpy()
    assert count.strides == (0,) and count.tolist() == [1] * len(gpu)
    assert rows["dur_ms"].tolist() == rows["min_ms"].tolist() == rows["max_ms"].tolist() == gpu["dur_ms"].tolist()
    # the statistics over them are those of ordinary arrays, and the source table stays as it was
    before = gpu.copy()
    stats = opstats.op_summary(run, ("rank", "type"), work_only=False)
    assert stats["count"].sum() == len(gpu) and stats["total_ms"].sum() == pytest.approx(gpu["dur_ms"].sum())
    pd.testing.assert_frame_equal(gpu, before)


def test_rows_of_several_sources_are_one_frame():
    """Two sources (gpu_ops for one rank, cpu_ops for another): the rows concatenated, index 0..n-1, as one source's."""
    run, gpu = _gpu_run()
    cpu = pd.DataFrame({"rank": [2, 2], "name": ["aten::mm", "c10d::allreduce_"], "start_ms": [0.0, 1.0],
                        "dur_ms": [1.0, 2.0], "tid": [1, 1]})
    run = _run([0, 1, 2], gpu_ops=gpu, cpu_ops=cpu)
    rows = opstats.op_rows(run)
    assert rows["source"].tolist() == ["gpu_ops"] * len(gpu) + ["cpu_ops"] * 2
    assert list(rows.index) == list(range(len(gpu) + 2)) and rows["count"].tolist() == [1] * (len(gpu) + 2)
