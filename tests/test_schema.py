"""The canonical schema (reportgen/schema.py) and one op class per device interval (issue 25).

* Every family is canonical: every fixture of tests/test_golden.py, the demo, a small run of each synth generator and
  every degenerate case, read (readers only, no sections) and held to the schema (lazy tables included).
* :func:`reportgen.schema.check` finds each kind of violation.
* op_class is decided once per family at the reader edge, and the rank comparison / drill-down read it: the Ascend
  waits, HCCL tasks and communication-stream tasks are never computation; at Level0 the HCCL ops are communication
  (left out of the drill-down's tops) and fill ``comm_ops`` for the communication section.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from conftest import fixture_dir
from reportgen import demo, schema
from reportgen.model import TABLES, Run
from reportgen.readers import read_run
from reportgen.readers.ascend import STEP_TIME_ORDER, level0_comm_ops, op_class, parse_kernel_details
from reportgen.readers.ascend_trace import read_trace_view
from reportgen.synth import (AscendSpec, KinetoSpec, MindInsightSpec, write_ascend_run, write_kineto_run,
                             write_mindinsight_run)
from reportgen.synth.degenerate import CASES, write_degenerate_run
from reportgen.synth.mindinsight_strategy import write_strategy_files
from reportgen.timebase import to_rel_ms
from test_golden import FIXTURES

LEVEL0_TEXT = ("ascend", "msinsight", "test", "data", "pytorch", "text", "level0")


def _canonical(run: Run) -> None:
    problems = schema.check(run)
    assert problems == [], "\n".join(problems)
    crashed = [p.problem for p in run.problems if "unexpected content" in p.problem]
    assert not crashed, crashed  # a reader's own failure would hide its table from the check


# --------------------------------------------------------------------------- every family is canonical


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_fixture_is_canonical(name):
    _canonical(read_run(fixture_dir(*FIXTURES[name])))


@pytest.mark.parametrize("family", ["kineto", "ascend", "mindinsight", "demo", "strategy"])
def test_synthetic_run_is_canonical(family, tmp_path):
    if family == "kineto":  # two stages: p2p_links too
        write_kineto_run(tmp_path, KinetoSpec(hosts=2, devices_per_host=2, stages=2, steps=2))
    elif family == "ascend":
        write_ascend_run(tmp_path, AscendSpec(hosts=1, devices_per_host=2, stages=2, steps=2, microbatches=2))
    elif family == "mindinsight":  # with the dataset pipeline and the memory details: minddata_*, mi_memory_*
        write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=2,
                                                        minddata_bottleneck="Map"))
        for p in tmp_path.rglob("memory_usage_summary_*.json"):
            rid = p.stem.rsplit("_", 1)[1]
            (p.parent / f"memory_usage_details_{rid}.json").write_text(
                json.dumps({"0": {"lines": [0.5, 1.0, 2.0], "fp_start": 1, "bp_end": 2}}))
    elif family == "strategy":  # strategy_ops, strategy_pairs
        write_strategy_files(tmp_path)
    else:
        write_mindinsight_run(tmp_path, demo.demo_spec())
    _canonical(read_run(tmp_path))


def test_mindinsight_timeline_run_is_canonical(tmp_path, pp2x4):
    """MindInsight timeline display files with Steps blocks: mi_timeline_ops, mi_timeline_steps."""
    from test_mindinsight_timeline import timeline_run

    run = timeline_run(pp2x4, tmp_path)
    assert run.table("mi_timeline_steps") is not None
    _canonical(run)


@pytest.mark.parametrize("case", sorted(CASES))
def test_degenerate_run_is_canonical(case, tmp_path):
    write_degenerate_run(tmp_path, case)
    _canonical(read_run(tmp_path))


# --------------------------------------------------------------------------- the schema and its check


def test_model_tables_are_derived_from_the_schema():
    assert set(TABLES) == set(schema.BY_NAME)
    for t in schema.SCHEMA:
        assert list(TABLES[t.name]) == [c.name for c in t.columns]
        for c in t.columns:
            assert c.doc and c.unit in schema.UNITS and c.dtype in schema.DTYPES
    assert "op_class" in TABLES["device_timeline"] and "op_class" in TABLES["kernels"]


def _run(**tables) -> Run:
    run = Run(name="t", source_format="test", source_path="t", ranks=[0, 1])
    run.tables.update(tables)
    return run


def test_check_finds_every_kind_of_violation():
    ok = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "start_ms": [0.0, 1.0], "end_ms": [2.0, 3.0]})
    assert schema.check(_run(trace_steps=ok)) == []
    cases = {
        "unknown table": _run(my_table=ok),
        "missing required column": _run(trace_steps=ok.drop(columns="end_ms")),
        "dtype": _run(trace_steps=ok.assign(step=["a", "b"])),
        "null value": _run(trace_steps=ok.assign(start_ms=[0.0, math.nan])),
        "negative duration": _run(hccl_ops=pd.DataFrame({"rank": [0], "op": ["hcom_x"], "lane": ["g"],
                                                          "start_ms": [0.0], "dur_ms": [-1.0]})),
        "end_ms < start_ms": _run(trace_steps=ok.assign(end_ms=[-1.0, 3.0])),
        "not among run.ranks": _run(trace_steps=ok.assign(rank=[0, 7])),
        "unknown column": _run(trace_steps=ok.assign(extra=1)),
    }
    for what, run in cases.items():
        problems = schema.check(run)
        assert len(problems) == 1, (what, problems)
    assert "unknown table" in schema.check(cases["unknown table"])[0]
    assert "missing required column" in schema.check(cases["missing required column"])[0]
    assert "expected int64" in schema.check(cases["dtype"])[0]
    assert "non-nullable" in schema.check(cases["null value"])[0]
    assert "negative" in schema.check(cases["negative duration"])[0]
    assert "end_ms < start_ms" in schema.check(cases["end_ms < start_ms"])[0]
    assert "[7]" in schema.check(cases["not among run.ranks"])[0]


def test_check_loads_lazy_tables_and_holds_op_class_to_its_vocabulary():
    bad = pd.DataFrame({"rank": [0], "name": ["k"], "stream": ["Stream 1"], "start_ms": [0.0], "dur_ms": [1.0],
                        "op_class": ["kernel"]})
    run = _run()
    run.loaders["device_ops"] = lambda: bad
    problems = schema.check(run)
    assert len(problems) == 1 and "op_class" in problems[0] and "kernel" in problems[0]
    # a nullable int column stored as float (pandas' NaN) is int64 when its values are whole
    k = pd.DataFrame({"rank": [0, 0], "step": [3.0, math.nan], "name": ["a", "b"], "type": ["t", "t"],
                      "core": ["AI_CORE"] * 2, "stream": [2.0, math.nan], "start_ms": [0.0, 1.0], "dur_ms": [1.0, 1.0],
                      "op_class": ["compute", "compute"]})
    assert schema.check(_run(kernels=k)) == []


# --------------------------------------------------------------------------- Ascend: one op class per task


def test_ascend_op_class_rule():
    rows = [  # core, type, name, on a communication stream, expected
        ("AI_CORE", "MatMulV2", "aclnnMm_MatMulV2", False, "compute"),
        ("N/A", "N/A", "trans_TransData_0", False, "compute"),          # Level0 writes no core
        ("MIX_AIV", "FlashAttentionScore", "fa", False, "compute"),
        ("HCCL", "N/A", "hcom_allReduce__868_0_1", False, "communication"),  # Level0 HCCL row
        ("COMMUNICATION", "hcom_allGather_", "hcom_allGather__1", False, "communication"),
        ("AI_CPU", "NOTIFY_WAIT", "Notify_Wait", True, "wait"),
        ("N/A", "EVENT_WAIT", "EVENT_WAIT", False, "wait"),
        ("", "Notify Wait", "Notify Wait", True, "wait"),
        ("Other", "Other", "Other", True, "communication"),            # an "Other" task of a communication stream
        ("SDMA", "", "SDMA", True, "communication"),                    # HCCL's copy on its stream
        ("SDMA_SQE", "", "MEMCPY_ASYNC", False, "memcpy"),
        ("Other", "Other", "Other", False, "other"),
    ]
    got = op_class(pd.Series([r[0] for r in rows]), pd.Series([r[1] for r in rows]), pd.Series([r[2] for r in rows]),
                   np.array([r[3] for r in rows]))
    assert list(got) == [r[4] for r in rows]


def test_ascend_op_class_reads_each_text_as_written_whatever_its_form():
    """The rule is asked once per distinct text (readers/ascend_values._where): missing cells, numbers, spaces, lower
    case and a text repeated on rows of different classes give what each row's own text gives; comm_streams marks
    every row of a stream that runs an HCCL row or a notify task (its index need not start at 0)."""
    from reportgen.readers.ascend_values import comm_streams, upper_texts
    core = pd.Series([" hccl ", None, np.nan, 3, "ai core", "AI_CORE", "SDMA", "SDMA", "", "cube"],
                     index=range(10, 20), dtype=object)
    type_ = pd.Series(["x", "Notify Wait", "hcom_broadcast_", "t", "MatMul", "record x", "", "", "Other", "y"],
                      index=range(10, 20), dtype=object)
    name = pd.Series(["a", "b", "c", "d", "e", "f", "g", "MEMCPY_ASYNC", "Other", "h"], dtype=object)
    stream = pd.Series([7, 8, 8, 9, None, 5, 7, 9, 9, 6])
    on = comm_streams(stream, core, type_, name)
    assert on.tolist() == [True, True, True, False, False, False, True, False, False, False]
    got = op_class(core, type_, name, on)
    assert got.tolist() == ["communication", "wait", "communication", "other", "compute", "wait", "communication",
                            "memcpy", "compute", "compute"]
    coded = [upper_texts(x) for x in (core, type_, name)]  # each column coded once, as the kernel reader asks both
    assert comm_streams(stream, *coded).tolist() == on.tolist() and op_class(*coded, on).tolist() == got.tolist()
    assert op_class(pd.Series([], dtype=object)).tolist() == []
    assert op_class(pd.Series(["n/a", "nan", "HCCL"], dtype=object)).tolist() == ["compute", "compute", "communication"]


KERNEL_HEADER = "Step Id,Name,Type,Accelerator Core,Stream ID,Start Time(us),Duration(us)\n"


def _kernel_csv(path: Path, rows) -> Path:
    path.write_text(KERNEL_HEADER + "".join(f"1,{n},{t},{c},{s},{ts},{d}\n" for n, t, c, s, ts, d in rows))
    return path


def test_kernel_details_waits_and_communication_stream_tasks_are_not_compute(tmp_path):
    """The shape of the defect: a rank whose kernel_details.csv holds HCCL stream tasks and long waits (one of
    15.6 ms) besides little computation; the waits and the communication stream's tasks are not compute."""
    rows = [("aclnnMm", "MatMulV2", "AI_CORE", 2, 1000 + 100 * i, 50) for i in range(10)]
    rows += [("Notify_Wait", "NOTIFY_WAIT", "AI_CPU", 7, 3000 + 100 * i, 15600 if i == 0 else 900) for i in range(20)]
    rows += [("Other", "Other", "N/A", 7, 5000 + 10 * i, 400) for i in range(20)]
    rows += [("hcom_allReduce__1_0_1", "hcom_allReduce_", "HCCL", "", 3000, 40000)]
    k = parse_kernel_details(_kernel_csv(tmp_path / "kernel_details.csv", rows), 0, [])
    by = k.groupby("op_class")["dur_ms"].sum()
    assert by["compute"] == pytest.approx(0.5)
    assert by["wait"] == pytest.approx(15.6 + 19 * 0.9)
    assert by["communication"] == pytest.approx(40.0 + 20 * 0.4)


def _kernels_run(tmp_path) -> Run:
    """Two Ascend ranks from kernel_details.csv only (the rank comparison's kernels path): rank 0 computes 40 ms
    per step, rank 1 computes 30 ms and waits / moves HCCL data on its communication stream for 284 ms (counted as
    compute, rank 1 was "the rank with the most computation", with 284 ms of compute in an 83.6 ms step)."""
    parts = []
    for rank, n_mm in ((0, 40), (1, 30)):
        rows = [("aclnnMm", "MatMulV2", "AI_CORE", 2, 1000 + 1000 * i, 1000) for i in range(n_mm)]
        if rank == 1:  # HCCL's stream tasks, inside the allreduce
            rows += [("Notify_Wait", "NOTIFY_WAIT", "N/A", 9, 50000 + 10 * i, 2000) for i in range(132)]
            rows += [("Other", "Other", "N/A", 9, 50000 + 10 * i, 100) for i in range(200)]
        rows += [("hcom_allReduce__1_0_1", "hcom_allReduce_", "HCCL", "", 50000, 20000)]
        df = parse_kernel_details(_kernel_csv(tmp_path / f"k{rank}.csv", rows), rank, [])
        parts.append(df)
    k = pd.concat(parts, ignore_index=True)
    k = to_rel_ms(k, int(k["start_ns"].min()))
    st = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "step_ms": [83.0, 83.6], "computing_ms": [40.0, 30.0],
                       "comm_not_overlapped_ms": [20.0, 20.0], "overlapped_ms": [0.0, 0.0], "comm_ms": [20.0, 20.0],
                       "free_ms": [23.0, 33.6]}).reindex(columns=STEP_TIME_ORDER)
    run = Run(name="k", source_format="ascend", source_path=str(tmp_path), ranks=[0, 1], steps=[1])
    run.tables.update(kernels=k, step_time=st)
    run.step_source = "markers"
    return run


def test_compare_counts_only_computation_as_compute(tmp_path):
    from reportgen.sections import compare

    run = _kernels_run(tmp_path)
    _canonical(run)
    a = compare.analyze(run, None)
    m = a.metrics
    assert m["rank_a"] == 0 and "most computation" in m["pair_source"]  # the rank that computes more
    types = a.tables["types"].set_index(["kind", "type"])
    assert types.loc[("compute", "aclnnMm"), "a_total_ms"] == pytest.approx(40.0)
    assert types.loc[("compute", "aclnnMm"), "b_total_ms"] == pytest.approx(30.0)
    assert set(a.tables["types"]["kind"]) == {"compute", "communication", "wait"}
    assert m["delta_by_kind_ms"]["compute"] == pytest.approx(10.0)
    # the stream's tasks are inside the allreduce: its time is counted once, in the op
    assert m["delta_by_kind_ms"]["communication"] == pytest.approx(0.0)


def test_compare_on_the_device_timeline_leaves_hccl_stream_tasks_to_the_hccl_ops():
    """Ascend trace / DB: the HCCL op spans its stream's tasks (SDMA copies, Reduce_Inline, 'N/A' tasks): those are
    communication and left to the op, never compute or memcpy of the timeline."""
    from reportgen import timeline

    h = pd.DataFrame({"rank": [0], "op": ["hcom_allReduce__1_0_1"], "lane": ["Group 0 Communication"],
                      "start_ms": [10.0], "dur_ms": [20.0]})
    d = pd.DataFrame({"rank": [0] * 4, "name": ["aclnnMm", "N/A", "Reduce_Inline", "MEMCPY_ASYNC"],
                      "stream": ["Stream 2", "Stream 4", "Stream 4", "Stream 2"],
                      "start_ms": [0.0, 11.0, 15.0, 40.0], "dur_ms": [5.0, 3.0, 2.0, 1.0],
                      "op_class": ["compute", "communication", "communication", "memcpy"]})
    run = _run(hccl_ops=h, device_ops=d)
    tl = timeline.build(run)
    assert list(tl["name"]) == ["aclnnMm", "hcom_allReduce__1_0_1", "MEMCPY_ASYNC"]
    assert list(tl["op_class"]) == ["compute", "communication", "memcpy"]
    assert "Stream 4" not in set(tl["stream"])


def test_trace_view_notify_stream_is_a_communication_stream(tmp_path):
    """trace_view.json: Notify Wait tasks (dropped as synchronisation) make their stream a communication stream, so
    HCCL's SDMA copies there are communication; MEMCPY_ASYNC on the compute stream is a copy."""
    meta = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "Ascend Hardware"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2, "args": {"name": "Stream 2"}},
            {"ph": "M", "name": "thread_name", "pid": 1, "tid": 4, "args": {"name": "Stream 4"}}]

    def x(tid, name, task, ts):
        return {"ph": "X", "pid": 1, "tid": tid, "name": name, "ts": f"{ts}.000", "dur": 5.0,
                "args": {"Task Type": task}}

    events = meta + [x(2, "aclnnMm_MatMulV2", "AI_CORE", 100), x(2, "MEMCPY_ASYNC", "SDMA_SQE", 200),
                     x(4, "Notify Wait", "Notify Wait", 150), x(4, "SDMA", "SDMA", 160),
                     x(2, "EVENT_WAIT", "EVENT_WAIT_SQE", 170)]
    p = tmp_path / "trace_view.json"
    p.write_text(json.dumps(events))
    problems = []
    d = read_trace_view(p, 0, problems)["device_ops"]
    assert dict(zip(d["name"], d["op_class"])) == {"aclnnMm_MatMulV2": "compute", "MEMCPY_ASYNC": "memcpy",
                                                  "SDMA": "communication"}


def test_db_hccl_tasks_are_communication():
    run = read_run(fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "db", "level1"))
    d = run.table("device_ops")
    cls = d.groupby("name")["op_class"].agg(set)
    assert cls["Reduce_Inline"] == {"communication"} and cls["Memcpy"] == {"communication"}
    assert cls["MEMCPY_ASYNC"] == {"memcpy"}
    tl = run.table("device_timeline")
    assert not tl["name"].isin(["Reduce_Inline", "Memcpy"]).any()  # left to the HCCL ops that span them


# --------------------------------------------------------------------------- Level0


def test_level0_drilldown_leaves_the_hccl_ops_out():
    from reportgen.sections import drilldown

    run = read_run(fixture_dir(*LEVEL0_TEXT))
    for rank in run.ranks:
        top = drilldown.top_operators(run, rank)
        assert not top["name"].str.startswith("hcom").any(), top
        assert "communication kernels left out" in top.attrs["source"]


def test_level0_communication_from_the_hccl_ops():
    from reportgen.sections import run_sections

    run = read_run(fixture_dir(*LEVEL0_TEXT))
    c = run.table("comm_ops")
    assert c is not None and len(c) == 8 and set(c["op_type"]) == {"allreduce"}
    assert c["transit_ms"].isna().all() and c["wait_ms"].isna().all() and (c["elapse_ms"] > 0).all()
    assert (c["step"] == 50).all()
    (out,) = run_sections(run, only=["communication"])
    assert out.status == "ok", out.reason


def test_level0_comm_ops_rule():
    h = pd.DataFrame({"rank": [3, 3, 3], "op": ["hcom_allReduce__1_0_1@123", "hcom_receive__2_0_1", "hcom_send__9"],
                      "lane": ["g"] * 3, "start_ns": np.array([100, 250, 999], dtype=np.int64),
                      "dur_ms": [1.0, 2.0, 3.0]})
    steps = pd.DataFrame({"rank": [3, 3], "step": [7, 8], "start_ns": np.array([50, 200], dtype=np.int64),
                          "end_ns": np.array([200, 300], dtype=np.int64)})
    c = level0_comm_ops(h, steps)
    assert list(c["op"]) == ["hcom_allReduce__1_0_1", "hcom_receive__2_0_1", "hcom_send__9"]
    assert list(c["group_hash"]) == ["123", "", ""]
    assert list(c["step"]) == [7, 8, -1]
    assert list(c["kind"]) == ["collective", "p2p", "p2p"] and list(c["op_type"]) == ["allreduce", "receive", "send"]
    assert list(level0_comm_ops(h, None)["step"]) == [0, 0, 0]


# --------------------------------------------------------------------------- bad input stays canonical
# The readers' cases of the issue 14 corpus (tests/malformed_corpus.py): what the reader keeps of a broken input is
# canonical too (a refused value is NaN in a column the schema says is nullable, and why). Checked by
# tests/test_corpus.py on the run its CLI run read (harness hook schema_check), not by reading every case again here.


def test_drilldown_colours_bars_by_the_readers_op_class():
    """The drill-down's bars take the class the reader decided (not a pattern on the name): an Ascend copy named
    like a collective stays a copy; a CPU-only trace's c10d:: op is communication."""
    from reportgen.sections import drilldown

    k = pd.DataFrame({"rank": [0, 0, 0], "step": [1.0] * 3, "name": ["AllReduceLikeCopy", "aclnnMm", "hcom_x"],
                      "type": ["MEMCPY_ASYNC", "MatMulV2", "hcom_allReduce_"], "core": ["N/A", "AI_CORE", "HCCL"],
                      "stream": [2.0, 2.0, math.nan], "start_ms": [0.0, 1.0, 2.0], "dur_ms": [1.0, 2.0, 3.0]})
    k["op_class"] = op_class(k["core"], k["type"], k["name"])
    top = drilldown.top_operators(_run(kernels=k), 0)
    assert top.attrs["classes"]["operator"] == {"AllReduceLikeCopy": "memcpy", "aclnnMm": "compute"}
    c = pd.DataFrame({"rank": [0, 0], "name": ["aten::mm", "c10d::allreduce_"], "tid": ["1", "1"],
                      "input_dims": ["", ""], "input_types": ["", ""], "start_ms": [0.0, 1.0], "dur_ms": [1.0, 1.0],
                      "end_ms": [1.0, 2.0]})
    top = drilldown.top_operators(_run(cpu_ops=c), 0)
    assert top.attrs["classes"]["operator"] == {"aten::mm": "compute", "c10d::allreduce_": "communication"}
