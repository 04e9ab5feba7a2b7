"""The device timeline (reportgen/timeline.py) per family, the step breakdown measured on it, and the MindSpore CPU
reader (reportgen/readers/mindspore_cpu.py)."""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest

from reportgen import timeline
from reportgen.intervals import clip, intersect, length, union
from reportgen.model import TABLES, Run
from reportgen.readers import mindspore_cpu, read_run
from reportgen.readers.ascend_trace import rank_from_framework
from reportgen.sections import run_sections
from reportgen.synth import KinetoSpec, write_kineto_run

from conftest import fixture_dir

GLOO = ("generated", "torch_gloo_ddp4_baseline")
MESH = ("kineto", "generated_cpu_gloo_4rank_mesh2x2")
MS_GRAPH = ("generated", "mindspore_cpu_ms_dp4_graph")
MS_OTHERS = [("generated", "mindspore_cpu_ms_dp4_pynative"), ("generated", "mindspore_cpu_ms_single_new_graph")]
ASCEND = [("ascend", "msinsight", "test", "data", "pytorch", "text", "level1"),
          ("ascend", "msinsight", "test", "data", "pytorch", "db", "level1")]
KINETO_GPU = ("kineto", "hta_tests_data", "tests", "data", "nccl_parser_config")


def _status(run: Run) -> dict:
    return {o.id: o.status for o in run_sections(run)}


def _iv(df: pd.DataFrame):
    return union(df["start_ms"].to_numpy(float), df["end_ms"].to_numpy(float))


def _check_table(tl: pd.DataFrame, run: Run) -> None:
    assert list(tl.columns) == list(TABLES["device_timeline"])
    assert set(tl["kind"]) <= {"compute", "communication", "receive", "memcpy"}
    assert set(tl["source"]) <= {"trace", "derived"}
    assert (tl["end_ms"] >= tl["start_ms"]).all()
    # the step is the window the interval starts in, -1 outside every window
    w = timeline.step_windows(run)
    for row in tl.sample(min(len(tl), 300), random_state=0).itertuples():
        inside = w[(w["rank"] == row.rank) & (w["start_ms"] <= row.start_ms) & (row.start_ms < w["end_ms"])]
        assert row.step == (int(inside["step"].iloc[0]) if len(inside) else -1)


def test_kineto_gpu_timeline_is_the_gpu_ops():
    run = read_run(fixture_dir(*KINETO_GPU))
    tl, g = run.table("device_timeline"), run.table("gpu_ops")
    _check_table(tl, run)
    assert len(tl) == len(g) and set(tl["source"]) == {"trace"}
    kinds = tl["kind"].value_counts()
    assert kinds["compute"] == (g["kind"] == "kernel").sum()
    assert kinds.get("memcpy", 0) == g["kind"].isin(["memcpy", "memset"]).sum()
    assert kinds["communication"] + kinds.get("receive", 0) == (g["kind"] == "comm").sum()


def test_breakdown_on_the_timeline_equals_the_kineto_reader(tmp_path):
    """Same definitions as readers/kineto.py step_breakdown, receive (bubble) included: a GPU pipeline."""
    truth = write_kineto_run(tmp_path, KinetoSpec(hosts=1, devices_per_host=4, stages=2, steps=2))
    run = read_run(tmp_path)
    tl = run.table("device_timeline")
    assert (tl["kind"] == "receive").any()
    bd = timeline.breakdown(tl, run.table("trace_steps")).set_index(["rank", "step"]).sort_index()
    st = run.table("step_time").set_index(["rank", "step"]).sort_index()
    for col in timeline.BREAKDOWN_COLS + ["bubble_ms", "stage_ms", "step_ms"]:
        assert np.allclose(bd[col], st.loc[bd.index, col], atol=1e-9), col
    assert truth  # the generator's own truth is checked against the reader in test_synth_kineto


@pytest.mark.parametrize("parts", [GLOO, MESH], ids=["ddp4", "mesh2x2"])
def test_gloo_timeline_and_overlap_ok(parts):
    run = read_run(fixture_dir(*parts))
    tl = run.table("device_timeline")
    _check_table(tl, run)
    comp = tl[tl["kind"] == "compute"]
    assert not comp.empty and not comp["name"].str.startswith("c10d::").any()
    comm = tl[tl["kind"].isin(["communication", "receive"])]
    assert comm["name"].str.startswith("gloo:").all()
    st = run.table("step_time")
    assert st["computing_ms"].notna().all() and st["comm_not_overlapped_ms"].notna().all()
    assert np.allclose(st["computing_ms"] + st["comm_not_overlapped_ms"] + st["free_ms"], st["step_ms"])
    assert np.allclose(st["overlapped_ms"] + st["comm_not_overlapped_ms"], st["comm_ms"])
    assert _status(run)["overlap"] == "ok"


def test_gloo_breakdown_matches_the_step_summary():
    """step_summary.txt (the generator's check, ../shared/tools/gen/torch_ddp/summarize_run.py): per rank and
    ProfilerStep, the union of gloo spans and of the main thread's cpu_op spans (both: spans starting in the step).
    Communication = the gloo union. Computing leaves out the c10d:: ops (the enqueue of a collective, or a blocking
    send/recv around its gloo span) and the time an op holds a whole gloo span (waiting), so computing together with
    those c10d spans is the main-thread union less time spent waiting inside gloo spans."""
    root = fixture_dir(*GLOO)
    run = read_run(root)
    st = run.table("step_time").set_index(["rank", "step"])
    host = run.table("host_ops")
    lines = [l.split() for l in (root / "step_summary.txt").read_text().splitlines()[1:] if "ProfilerStep#" in l]
    assert len(lines) == 20
    for rank, step, _dur, gloo, main_ops, _ in lines:
        key = (int(rank), int(step.split("#")[1]))
        row = st.loc[key]
        assert row["comm_ms"] == pytest.approx(float(gloo), abs=0.11), key
        h = host[host["rank"] == key[0]]
        all_ops = union(h["start_ms"].to_numpy(), (h["start_ms"] + h["dur_ms"]).to_numpy())
        ts = run.table("trace_steps").set_index(["rank", "step"]).loc[key]
        main = length(*clip(all_ops, ts["start_ms"], ts["end_ms"]))
        assert main == pytest.approx(float(main_ops), abs=0.11), key
        assert row["computing_ms"] <= main + 1e-9
        c10d = h[h["name"].str.startswith("c10d::")]
        c10d_iv = clip(union(c10d["start_ms"].to_numpy(), (c10d["start_ms"] + c10d["dur_ms"]).to_numpy()),
                       ts["start_ms"], ts["end_ms"])
        # the rest of the main thread's time is waiting: host ops that hold a whole gloo span (an autograd function
        # around a blocking all_reduce) are cut around it (reportgen/timeline.py _without_waits; issue 26)
        waiting = main - row["computing_ms"] - length(*c10d_iv)
        assert -1e-6 <= waiting <= row["comm_ms"] + 1e-6, key


@pytest.mark.parametrize("parts", ASCEND, ids=["text", "db"])
def test_ascend_timeline_hccl_and_device_ops(parts):
    run = read_run(fixture_dir(*parts))
    tl = run.table("device_timeline")
    _check_table(tl, run)
    h = run.table("hccl_ops")
    comm = tl[tl["kind"].isin(["communication", "receive"])]
    assert len(comm) == len(h)
    comp = tl[tl["kind"] == "compute"]
    assert not comp["name"].str.lower().str.startswith("hcom").any()
    copies = tl[tl["kind"] == "memcpy"]
    assert not copies.empty and copies["name"].str.contains("MEMCPY|Memcpy|SDMA", regex=True).all()


def test_mindinsight_derived_compute_is_fp_bp_minus_communication(pp2x4):
    run = read_run(pp2x4)
    tl = run.table("device_timeline")
    _check_table(tl, run)
    derived = tl[tl["source"] == "derived"]
    assert set(derived["kind"]) == {"compute"} and set(derived["name"]) == {timeline.DERIVED_NAME}
    assert set(tl.loc[tl["source"] == "trace", "kind"]) == {"communication", "receive"}
    assert (tl.loc[tl["kind"] == "receive", "name"].str.contains("Receive")).all()
    st = run.table("step_trace")
    for rank in run.ranks:
        d, c = derived[derived["rank"] == rank], tl[(tl["rank"] == rank) & (tl["source"] == "trace")]
        assert not d.empty
        assert length(*intersect(_iv(d), _iv(c))) == pytest.approx(0.0, abs=1e-9)  # never under a comm op
        s = st[st["rank"] == rank]
        fp = s["start_ms"] + s["step_interval_ms"]
        fpbp = union(fp.to_numpy(), (fp + s["fp_bp_ms"]).to_numpy())
        assert length(*intersect(_iv(d), fpbp)) == pytest.approx(length(*_iv(d)))  # inside the FP/BP spans
        # FP/BP = derived compute + the communication inside FP/BP
        assert length(*_iv(d)) + length(*intersect(_iv(c), fpbp)) == pytest.approx(length(*fpbp))


def test_pp2x4_marey_draws_computation_on_every_stage(pp2x4):
    run = read_run(pp2x4)
    (out,) = run_sections(run, only=["execution"])
    rows = out.analysis.data["marey"]
    comp = rows[rows["kind"] == "computation"]
    assert set(comp["stage"]) == {1, 2}
    for stage in (1, 2):
        assert (comp.loc[comp["stage"] == stage, "step"] >= 2).any()  # not only the warm-up step
    assert "derived compute" in out.analysis.metrics["marey_source"]


def _type_info(d) -> dict[str, tuple[int, int]]:
    path = next((d / "FRAMEWORK").glob("cpu_op_type_info_*.csv"))
    with open(path, newline="") as fh:
        return {r["op_type"]: (int(r["type_occurrences"]), int(r["execution_frequency(per-step)"]))
                for r in csv.DictReader(fh)}


def test_mindspore_cpu_dp4_graph_sections_and_steps():
    root = fixture_dir(*MS_GRAPH)
    run = read_run(root)
    assert run.source_format == "mindspore_cpu" and run.framework == "mindspore" and "MindSpore CPU" in run.layout
    assert run.ranks == [0, 1, 2, 3] and run.step_source == "repeated_ops" and run.steps == [1, 2, 3, 4, 5]
    status = _status(run)
    for sec in ("trajectory", "overlap", "communication", "execution"):
        assert status[sec] == "ok", sec
    assert "error" not in status.values()
    # the profiler's own per-type counts: occurrences / executions per step = the step count; the comm ops per step
    for d in sorted(root.glob("prof/*_ascend_ms")):
        info = _type_info(d)
        assert {occ // per for occ, per in info.values()} == {5}
        rank = rank_from_framework(d)
        ops = run.table("comm_ops")
        ops = ops[ops["rank"] == rank]
        per_step = ops.groupby("step").size()
        want = sum(info[t][1] for t in ("AllReduce", "AllGather", "Broadcast"))
        assert per_step.to_dict() == {s: want for s in range(1, 6)}
        assert (ops.loc[ops["op"].str.contains("AllReduce"), "op_type"] == "allreduce").all()
    tl = run.table("device_timeline")
    _check_table(tl, run)
    allreduce = tl[tl["name"].str.contains("AllReduce")]
    assert len(allreduce) == 4 * 5 * 7 and (allreduce["kind"] == "communication").all()
    assert (tl["step"] >= 1).all()  # graph mode: every op execution belongs to a step
    st = run.table("step_time")
    assert np.allclose(st["computing_ms"] + st["comm_not_overlapped_ms"] + st["free_ms"], st["step_ms"])
    tr = run.table("trace_steps")
    assert np.allclose(st.sort_values(["rank", "step"])["step_ms"].to_numpy(),
                       (tr["end_ms"] - tr["start_ms"]).to_numpy())


@pytest.mark.parametrize("parts", MS_OTHERS, ids=["dp4_pynative", "single_new_graph"])
def test_mindspore_cpu_other_runs_every_section_ok_or_unavailable(parts):
    run = read_run(fixture_dir(*parts))
    assert run.steps == [1, 2, 3, 4, 5]
    outs = run_sections(run)
    for o in outs:
        assert o.status in ("ok", "unavailable"), (o.id, o.status, o.reason)
        if o.status == "unavailable":
            assert o.reason
    assert {o.id: o.status for o in outs}["overlap"] == "ok"


def test_mindspore_cpu_exact_times():
    assert mindspore_cpu.decimal_ns("0.005537", 1_000_000) == 5537
    assert mindspore_cpu.decimal_ns("21.2912", 1_000_000) == 21_291_200
    assert mindspore_cpu.decimal_ns("1795304183225386.795", 1_000) == 1795304183225386795
    run = read_run(fixture_dir(*MS_GRAPH))
    assert isinstance(run.time_origin_ns, int) and run.time_origin_ns > 1_700_000_000 * 10**9
    assert run.table("device_ops")["start_ms"].min() == 0.0 or run.table("memory_record")["ts_ms"].min() == 0.0


def test_repeated_steps_counts_and_whole_trace():
    def ops(names):
        rows = [(0, n, i * 10, 5) for i, n in enumerate(names)]
        return pd.DataFrame(rows, columns=["rank", "name", "start_ns", "dur_ns"])

    # A once per step, B twice per step, C once in the whole trace: 3 steps
    n, w = mindspore_cpu.repeated_steps(ops(["A", "B", "B", "C"] + ["A", "B", "B"] * 2))
    assert n == 3 and w["step"].tolist() == [1, 2, 3]
    assert w["start_ns"].tolist() == [0, 40, 70] and w["end_ns"].tolist() == [25, 65, 95]
    n, w = mindspore_cpu.repeated_steps(ops(["A", "B", "C"]))
    assert n == 1 and w[["step", "start_ns", "end_ns"]].values.tolist() == [[0, 0, 25]]


def test_no_tables_no_timeline():
    run = Run(name="empty", source_format="kineto", source_path="/nowhere", ranks=[0])
    timeline.attach(run)
    assert run.table("device_timeline") is None and run.table("step_time") is None


def _ascend_text_run(kernels: pd.DataFrame | None, comm: pd.DataFrame | None, step_ms: dict) -> Run:
    """A run as the Ascend text reader leaves it without trace_view.json: kernels, comm_ops, step_time (durations)."""
    run = Run(name="t", source_format="ascend", source_path="/nowhere", ranks=sorted(step_ms))
    if kernels is not None:
        run.tables["kernels"] = kernels
    if comm is not None:
        run.tables["comm_ops"] = comm
    run.tables["step_time"] = pd.DataFrame({"rank": list(step_ms), "step": 1, "step_ms": list(step_ms.values()),
                                            "computing_ms": 1.0})
    timeline.attach(run)
    return run


def test_ascend_text_timeline_from_kernels_and_comm_ops():
    """kernel_details.csv + communication.json (no trace_view.json): compute from the kernels, communication from
    comm_ops (the hcom kernel of a rank with comm_ops is left to them), a rank with comm_ops only has communication;
    windows end at the step's last op and last its step time."""
    k = pd.DataFrame({"rank": [0, 0, 0], "step": 1, "name": ["MatMul_1", "hcom_allReduce_1", "Add_1"],
                      "stream": [2.0, 3.0, 2.0], "start_ms": [0.0, 5.0, 7.0], "dur_ms": [4.0, 2.0, 3.0],
                      "op_class": ["compute", "communication", "compute"]})
    c = pd.DataFrame({"rank": [0, 1, 1], "step": 1, "op": ["hcom_allReduce_1", "hcom_allReduce_1", "hcom_receive_2"],
                      "start_ms": [4.5, 4.0, 8.0], "elapse_ms": [2.5, 3.0, 1.0]})
    run = _ascend_text_run(k, c, {0: 10.0, 1: 9.5})
    tl = run.table("device_timeline")
    _check_table(tl, run)
    r0, r1 = tl[tl["rank"] == 0], tl[tl["rank"] == 1]
    assert sorted(r0["name"]) == ["Add_1", "MatMul_1", "hcom_allReduce_1"]
    assert r0.loc[r0["name"] == "hcom_allReduce_1", "stream"].tolist() == [timeline.COMM_OPS_STREAM]
    assert r0.loc[r0["name"] == "hcom_allReduce_1", "end_ms"].tolist() == [7.0]
    assert set(r0.loc[r0["kind"] == "compute", "stream"]) == {"stream 2"}
    assert set(r1["kind"]) == {"communication", "receive"}  # communication only
    w = timeline.step_windows(run).set_index("rank")
    assert w.loc[0, "end_ms"] == 10.0 and w.loc[0, "start_ms"] == 0.0  # last end 10, step 10 ms
    assert w.loc[1, "end_ms"] == 9.0 and w.loc[1, "start_ms"] == pytest.approx(-0.5)
    assert (tl["step"] == 1).all()
    assert timeline.step_windows(run, derived=False) is None


def test_derived_window_start_snaps_onto_the_first_op_within_1us():
    k = pd.DataFrame({"rank": [0, 0], "step": 1, "name": ["A", "B"], "stream": ["1", "1"],
                      "start_ms": [-3.12016, 100.0], "dur_ms": [1.0, 706.9022 + 0.1],
                      "op_class": ["compute", "compute"]})
    run = _ascend_text_run(k, None, {0: 810.12236 - 0.0000004})
    w = timeline.step_windows(run)
    assert w["start_ms"].iloc[0] == -3.12016
    assert (run.table("device_timeline")["step"] == 1).all()


def test_step_windows_memo_gives_what_a_fresh_computation_gives():
    """step_windows is computed once per run and kept while the tables it reads are the same objects: a second call
    gives the same frame as a computation on a fresh run, and a replaced step_time (fill_step_time, a lazy load)
    computes it again from the new table."""
    k = pd.DataFrame({"rank": [0, 0, 1], "step": [1, 2, 1], "name": ["A", "B", "C"], "stream": ["1", "1", "1"],
                      "start_ms": [0.0, 12.0, 1.0], "dur_ms": [4.0, 3.0, 5.0], "op_class": "compute"})
    c = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "op": ["hcom_allReduce_1"] * 2, "start_ms": [5.0, 6.5],
                      "elapse_ms": [2.0, 1.0]})

    def fresh():
        run = _ascend_text_run(k, c, {0: 10.0, 1: 9.0})
        run.tables["step_time"] = pd.DataFrame({"rank": [0, 0, 1], "step": [1, 2, 1], "step_ms": [8.0, 3.5, 7.0],
                                                "computing_ms": 1.0})
        return run

    import gc
    import weakref

    run = fresh()
    first = timeline.step_windows(run)
    assert timeline.step_windows(run) is first  # memoised
    pd.testing.assert_frame_equal(first, timeline.derived_windows(fresh()))
    assert timeline.step_windows(run, derived=False) is None
    # a new step_time: the memo no longer holds, the windows follow the new durations; the memo does not keep the
    # replaced table alive
    old = weakref.ref(run.tables["step_time"])
    run.tables["step_time"] = run.tables["step_time"].assign(step_ms=[9.0, 3.0, 7.5])
    gc.collect()
    assert old() is None
    again = timeline.step_windows(run)
    assert again is not first
    expected = fresh()
    expected.tables["step_time"] = run.tables["step_time"]
    pd.testing.assert_frame_equal(again, timeline.derived_windows(expected))
    assert again["start_ms"].tolist() != first["start_ms"].tolist()


def test_st_level2_marey_has_compute_on_ranks_0_2_and_comm_on_1_3():
    """Ascend text without trace_view.json: the Marey view draws ranks 0 and 2 (kernel_details.csv) with computation
    and ranks 1 and 3 (communication.json only) with communication, and says so; the clocks agree between ranks (the
    same collective ends within 0.1 ms on every rank, before any alignment)."""
    from reportgen.sections import execution
    run = read_run(fixture_dir("ascend", "msinsight", "test", "st", "level2"))
    tl = run.table("device_timeline")
    comm = tl[tl["kind"] != "compute"]
    spread = comm.groupby("name")["end_ms"].agg(lambda e: e.max() - e.min())
    both = comm.groupby("name")["rank"].nunique() > 1
    assert both.sum() >= 10 and spread[both].max() < 0.1
    a = execution.analyze(run)
    m = a.data["marey"]
    kinds = m.groupby("rank")["kind"].agg(set).to_dict()
    assert "computation" in kinds[0] and "computation" in kinds[2]
    assert kinds[1] == {"communication"} and kinds[3] == {"communication"}
    assert a.metrics["marey_comm_only_ranks"] == [1, 3]
    cap = next(f.caption for f in execution.present(a).figures if f.id == "execution-marey")
    assert "Ranks 1, 3: communication only" in cap and "Step windows" in cap
    assert a.metrics["marey_trim"]["short_merged"] > 1000  # µs kernels merged into blocks


def test_gpu_receive_kernels_are_the_receives_collectives():
    """gpu_rows marks a communication kernel ``receive`` when its (rank, name, start) is one of the recv collectives'
    (the same kernel as a collective row) — looked up only among the rows starting when a receive does — or, on a
    rank without collective args, by its name: the same rows as the lookup over every row (NaN starts, the same
    start on another rank or under another name)."""
    rng = np.random.default_rng(8)
    for case in range(30):
        n = int(rng.integers(1, 200))
        g = pd.DataFrame({"rank": rng.integers(0, 4, n), "kind": rng.choice(["kernel", "comm", "memcpy"], n),
                          "name": rng.choice(["gemm", "ncclKernel_SendRecv", "ncclDevKernel_Recv", "x"], n),
                          "stream": rng.integers(0, 3, n), "start_ms": np.round(rng.uniform(0, 20, n), 1)})
        g.loc[rng.random(n) < 0.05, "start_ms"] = np.nan
        g["end_ms"] = g["start_ms"] + 0.5
        rv = g.sample(min(n, int(rng.integers(1, 20))), random_state=case)
        rv = pd.concat([rv, rv.assign(rank=rv["rank"] + 1)]).assign(source="gpu_kernel", collective="recv")
        coll = pd.concat([rv, g.head(3).assign(source="gpu_kernel", collective="send", rank=9)], ignore_index=True)
        rows = timeline.gpu_rows(g, coll)
        recv = pd.MultiIndex.from_frame(g[["rank", "name", "start_ms"]]).isin(
            pd.MultiIndex.from_frame(rv[["rank", "name", "start_ms"]]))
        comm = (g["kind"] == "comm").to_numpy()
        low = g["name"].str.lower()
        by_name = (low.str.contains("recv") & ~low.str.contains("send") & ~g["rank"].isin(set(coll["rank"]))).to_numpy()
        assert ((rows["kind"] == "receive").to_numpy() == (comm & (recv | by_name))).all()
        assert recv.any() or case % 10


def test_kineto_device_timeline_reuses_the_step_breakdowns_rows_only_while_the_tables_are_the_same():
    """The Kineto reader's step breakdown makes the GPU timeline rows; the device timeline takes them (not made twice)
    when gpu_ops and collectives are still the run's tables, the same timeline as one made anew; a gpu_ops that lost
    repeats (another table object) gets rows made again."""
    from conftest import fixture_dir

    root = fixture_dir("kineto", "hta_tests_data", "tests", "data", "trace_filter")
    run = read_run(root)
    assert "_gpu_rows" in run.__dict__
    shared = run.table("device_timeline")
    assert "_gpu_rows" not in run.__dict__
    fresh = read_run(root)
    del fresh.__dict__["_gpu_rows"]
    pd.testing.assert_frame_equal(shared, fresh.table("device_timeline"), check_exact=True)
    again = read_run(root)
    g = again.tables["gpu_ops"]
    changed = g.copy()
    changed.loc[0, "name"] = "renamed_kernel"
    again.tables["gpu_ops"] = pd.concat([changed, changed.iloc[[0]]], ignore_index=True)  # one written twice
    assert again.__dict__["_gpu_rows"][0]() is g
    tl = again.table("device_timeline")
    assert (tl["name"] == "renamed_kernel").sum() == 1 and len(tl) == len(shared)
    assert any("written twice" in p.problem for p in again.problems)


def _gpu_ops(order):
    n = len(order)
    start = np.array([0.0, 0.0, 1.0, 2.0, 2.0, 3.0])[order]
    end = np.array([0.5, 0.8, 1.5, 2.2, 2.6, 3.5])[order]
    rank = np.array([0, 0, 0, 1, 1, 1])[order]
    return pd.DataFrame({"rank": rank, "name": ["gemm", "ncclAllReduce", "copy", "gemm", "gemm", "copy"],
                         "kind": ["kernel", "comm", "memcpy", "kernel", "kernel", "memcpy"], "stream": [7] * n,
                         "start_ms": start, "dur_ms": end - start, "end_ms": end, "correlation": np.arange(n)})


@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4, 5], [5, 3, 0, 4, 2, 1], [1, 0, 2, 4, 3, 5]],
                         ids=["sorted", "shuffled", "ties-by-end"])
def test_device_timeline_is_sorted_and_shares_a_sorted_sources_arrays(order):
    """The Kineto device timeline: rows by rank, start, end (stable), as sort_values gave them; when the device ops
    are already in that order, its rank / start / end columns are theirs, not copies (issue 30 #1: a copy of every
    device op beside the reader's table)."""
    g = _gpu_ops(order)
    run = Run(name="t", source_format="test", source_path="/x", ranks=[0, 1])
    run.tables["gpu_ops"] = g
    tl = timeline.build(run)
    rows = timeline.gpu_rows(g, None)
    want = rows.assign(step=-1).sort_values(["rank", "start_ms", "end_ms"], kind="stable").reset_index(drop=True)
    pd.testing.assert_frame_equal(tl, want[list(TABLES["device_timeline"])], check_dtype=False)
    if int(pd.__version__.split(".")[0]) >= 3:  # pandas 2 copies the columns a frame selects (no copy-on-write)
        shared = all(np.shares_memory(tl[c].to_numpy(), g[c].to_numpy()) for c in ("rank", "start_ms", "end_ms"))
        assert shared == (order == [0, 1, 2, 3, 4, 5])
