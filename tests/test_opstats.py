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
