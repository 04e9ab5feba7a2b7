"""Host side and scheduling (reportgen/sections/host.py): the math of each part on small tables, the readers that
fill its tables (user ranges, HostToDevice flows, api_statistic, PMU columns, dynamic shape, host CPU), the raw
PROF_* message, and one whole run (the Ascend level2 text fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reportgen import schema
from reportgen.errors import InputError
from reportgen.model import Run
from reportgen.readers import read_run
from reportgen.readers.ascend import parse_api_statistic, parse_kernel_details, parse_l2_cache
from reportgen.readers.ascend_trace import collect_tables
from reportgen.readers.kineto_decode import decode_trace
from reportgen.readers.mindinsight import parse_dynamic_shape
from reportgen.sections import host, run_sections

from conftest import fixture_dir, reference_file


def _run(**tables) -> Run:
    run = Run(name="t", source_format="test", source_path="t", ranks=sorted({int(r) for t in tables.values() for r in t["rank"]}))
    run.tables.update(tables)
    return run


# --------------------------------------------------------------------------- user ranges


def test_user_range_spread_names_the_slow_rank():
    rows = [(r, "host", "layer1", 4, 4 * (30.0 if r == 3 else 10.0), 31.0) for r in range(4)]
    rows += [(r, "host", "embed", 2, 2.0, 1.0) for r in range(4)]
    df = pd.DataFrame(rows, columns=["rank", "side", "name", "count", "total_ms", "max_ms"])
    per, by = host.user_ranges(df)
    row = by.set_index("name").loc["layer1"]
    assert row["slowest_rank"] == 3 and row["max_mean_ms"] == pytest.approx(30.0)
    assert row["median_mean_ms"] == pytest.approx(10.0) and row["spread_ratio"] == pytest.approx(3.0)
    assert by.set_index("name").loc["embed", "spread_ratio"] == pytest.approx(1.0)
    assert per.set_index(["name", "rank"]).loc[("layer1", 3), "mean_ms"] == pytest.approx(30.0)
    assert list(by["name"]) == ["layer1", "embed"]  # most total time first


def test_comm_overlap_subtracts_the_union_of_collective_spans():
    spans = pd.DataFrame({"rank": [0, 0, 1], "side": "host", "name": ["fwd", "fwd", "fwd"],
                          "start_ms": [0.0, 100.0, 0.0], "dur_ms": [50.0, 10.0, 50.0]})
    # rank 0: two overlapping collectives [10, 30] and [20, 40] (union 30 ms inside the first span), one past it
    comm = pd.DataFrame({"rank": [0, 0, 0], "start_ms": [10.0, 20.0, 45.0], "dur_ms": [20.0, 20.0, 60.0]})
    ov = host.comm_overlap(spans, comm).set_index(["name", "rank"])["comm_ms"]
    assert ov[("fwd", 0)] == pytest.approx(30.0 + 5.0 + 5.0)  # [10, 40] + [45, 50] + [100, 105] of the second
    assert ov[("fwd", 1)] == 0.0  # no collectives on rank 1


def test_comm_overlap_is_its_definition_rank_by_rank():
    """comm_overlap (every rank's rows as slices of arrays sorted once) gives the rows, order and floats that its
    definition computed a frame per rank gave (each occurrence's overlap with the union of its rank's collective
    spans, summed per side, name and rank in order of appearance), and those sums agree with the spans merged one
    by one (ranks interleaved, a rank without collectives, negative durations, rows without a rank)."""
    rng = np.random.default_rng(9)

    def by_rank(spans, comm):  # the definition as the former code computed it, a frame per rank
        out, cg = [], {r: g for r, g in comm.groupby("rank", sort=False)}
        for r, s in spans.groupby("rank", sort=False):
            a = s["start_ms"].to_numpy(float)
            b = a + s["dur_ms"].to_numpy(float)
            ov = np.zeros(len(s))
            c = cg.get(r)
            if c is not None and len(c):
                cs = c["start_ms"].to_numpy(float)
                ce = cs + np.maximum(c["dur_ms"].to_numpy(float), 0.0)
                o = np.argsort(cs, kind="stable")
                cs, ce = cs[o], np.maximum.accumulate(ce[o])
                new = np.r_[True, cs[1:] > ce[:-1]]
                ms, me = cs[new], np.r_[ce[np.flatnonzero(new)[1:] - 1], ce[-1]]
                cum = np.r_[0.0, np.cumsum(me - ms)]

                def covered(t):
                    i = np.searchsorted(ms, t, side="right")
                    part = np.where(i > 0, np.minimum(t, me[np.maximum(i - 1, 0)]) - ms[np.maximum(i - 1, 0)], 0.0)
                    return cum[np.maximum(i - 1, 0)] * (i > 0) + np.maximum(part, 0.0)
                ov = np.maximum(covered(b) - covered(a), 0.0)
            out.append(pd.DataFrame({"rank": r, "side": s["side"].to_numpy(), "name": s["name"].to_numpy(),
                                     "comm_ms": ov}))
        return pd.concat(out, ignore_index=True).groupby(["side", "name", "rank"], sort=False, as_index=False)[
            "comm_ms"].sum()

    def merged(spans, comm):  # and, independently, each occurrence against the merged spans written out
        total = {}
        for r, side, name, x, d in zip(spans["rank"], spans["side"], spans["name"], spans["start_ms"],
                                       spans["dur_ms"]):
            if r != r:
                continue
            c = comm[comm["rank"] == r]
            blocks = []
            for p, q in sorted(zip(c["start_ms"], c["start_ms"] + np.maximum(c["dur_ms"], 0.0))):
                if blocks and p <= blocks[-1][1]:
                    blocks[-1][1] = max(blocks[-1][1], q)
                else:
                    blocks.append([p, q])
            t = sum(max(0.0, min(x + d, q) - max(x, p)) for p, q in blocks)
            total[(side, name, r)] = total.get((side, name, r), 0.0) + t
        return total

    for case in range(40):
        n, m = int(rng.integers(1, 40)), int(rng.integers(0, 30))
        spans = pd.DataFrame({"rank": rng.integers(0, 5, n).astype(float), "side": rng.choice(["host", "device"], n),
                              "name": rng.choice(["fwd", "bwd", "opt"], n),
                              "start_ms": np.round(rng.uniform(0, 100, n), 1), "dur_ms": np.round(rng.uniform(0, 30, n), 1)})
        if case % 5 == 0:
            spans.loc[0, "rank"] = np.nan
        comm = pd.DataFrame({"rank": rng.integers(0, 4, m).astype(float), "start_ms": np.round(rng.uniform(0, 100, m), 1),
                             "dur_ms": np.round(rng.uniform(-5, 25, m), 1)})
        got = host.comm_overlap(spans, comm)
        pd.testing.assert_frame_equal(got, by_rank(spans, comm), check_exact=True)
        ref = merged(spans, comm)
        assert len(ref) == len(got)
        for side, name, r, v in zip(got["side"], got["name"], got["rank"], got["comm_ms"]):
            assert v == pytest.approx(ref[(side, name, r)], abs=1e-9)


def test_user_range_spread_ranks_own_time_not_the_waiting_rank():
    # rank 0 waits 120 ms per occurrence inside a collective in "backward": its whole time is the longest, its own
    # time is not; rank 3 is slow in its own compute
    rows = [(r, "host", "backward", 4, 4 * {0: 220.0, 3: 150.0}.get(r, 100.0), 250.0) for r in range(4)]
    df = pd.DataFrame(rows, columns=["rank", "side", "name", "count", "total_ms", "max_ms"])
    _, whole = host.user_ranges(df)
    assert whole.iloc[0]["slowest_rank"] == 0  # the old rule: names the waiting rank
    ov = pd.DataFrame({"side": "host", "name": "backward", "rank": [0, 1, 2, 3], "comm_ms": [4 * 120.0, 0, 0, 0]})
    per, by = host.user_ranges(df, ov)
    row = by.iloc[0]
    assert row["slowest_rank"] == 3 and row["max_mean_ms"] == pytest.approx(150.0)
    assert row["median_mean_ms"] == pytest.approx(100.0) and row["excess_ms"] == pytest.approx(4 * 50.0)
    assert per.set_index("rank").loc[0, "own_mean_ms"] == pytest.approx(100.0)
    text = host.ranges_headline(row, True, [3], by)
    assert "rank 3" in text and "per occurrence" in text and "observation" not in text
    # a diagnosis on another rank: said as an observation, then the diagnosed rank's range (one only it runs)
    by2 = pd.concat([by, pd.DataFrame([{"side": "host", "name": "extra", "ranks": 1, "count": 4, "total_ms": 80.0,
                                        "comm_ms": 0.0, "median_mean_ms": 20.0, "max_mean_ms": 20.0,
                                        "slowest_rank": 5, "spread_ratio": 1.0, "excess_ms": 0.0}])],
                    ignore_index=True)
    text = host.ranges_headline(row, True, [5], by2)
    assert text.startswith("an observation") and "diagnosed cause is on rank 5, where extra" in text
    assert "runs on no other rank" in text


def test_slow_rank_run_user_ranges_do_not_contradict_the_diagnosis():
    run = read_run(Path(__file__).parent / "data" / "diagnosis" / "slowrank4")  # truth: compute on rank 3
    assert schema.check(run) == []
    assert len(run.table("user_range_spans")) > 0
    out = {o.id: o for o in run_sections(run, only=["host"])}["host"]
    assert out.status == "ok", out.reason
    a = out.analysis
    assert a.data["ranges_own"] and a.data["diagnosed_ranks"] == [3]
    per = a.tables["ranges_per_rank"]
    assert (per["own_ms"] <= per["total_ms"] + 1e-9).all() and per["comm_ms"].max() > 0
    s = out.view.summary
    assert "per occurrence" in s and "rank 3, where straggler_extra_compute" in s
    worst = a.tables["ranges"].sort_values("excess_ms", ascending=False).iloc[0]
    assert int(worst["slowest_rank"]) == 3 or "an observation" in s


def test_kineto_user_annotations_become_user_ranges(tmp_path):
    def ev(name, cat, ts, dur, **kw):
        return {"ph": "X", "cat": cat, "name": name, "pid": kw.get("pid", 1), "tid": kw.get("tid", 1), "ts": ts,
                "dur": dur, "args": kw.get("args", {})}
    events = [ev("ProfilerStep#1", "user_annotation", 100, 100), ev("## forward ##", "user_annotation", 101, 10),
              ev("## forward ##", "user_annotation", 150, 30), ev("gloo:all_reduce", "user_annotation", 190, 5),
              ev("## forward ##", "gpu_user_annotation", 105, 12, pid=0, tid=7),
              ev("aten::mm", "cpu_op", 102, 2)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    problems: list = []
    tables = decode_trace(p, problems).tables
    sp = tables["user_range_spans"]  # each occurrence's span (own time without collectives)
    assert sorted(zip(sp["side"], sp["ts_ns"], sp["dur_ns"])) == [("device", 105_000, 12_000), ("host", 101_000, 10_000),
                                                                  ("host", 150_000, 30_000)]
    u = tables["user_ranges"].set_index(["side", "name"])
    assert set(u.index) == {("host", "## forward ##"), ("device", "## forward ##")}  # no step mark, no gloo span
    h = u.loc[("host", "## forward ##")]
    assert h["count"] == 2 and h["total_ns"] == 40_000 and h["max_ns"] == 30_000 and h["ts_ns"] == 101_000
    assert u.loc[("device", "## forward ##"), "total_ns"] == 12_000


def test_user_range_names_past_the_cap_are_summed(tmp_path, monkeypatch):
    from reportgen.readers import kineto_decode as kd

    monkeypatch.setattr(kd, "MAX_USER_RANGE_NAMES", 1)  # 2 (side, name) keys, then one "(other ranges)" row
    events = [{"ph": "X", "cat": "user_annotation", "name": f"r{i}", "pid": 1, "tid": 1, "ts": 10 * i, "dur": 2}
              for i in range(5)]
    p = tmp_path / "t.json"
    p.write_text(json.dumps({"traceEvents": events}))
    u = decode_trace(p, []).tables["user_ranges"].set_index("name")
    assert list(u.index) == ["r0", "r1", "(other ranges)"]
    assert u.loc["(other ranges)", "count"] == 3 and u.loc["(other ranges)", "total_ns"] == 6000


# --------------------------------------------------------------------------- launch delay and host-bound idle


def test_launch_stats_host_bound_gaps():
    # one stream: k1 [0, 10); k2 launched at 12 (after k1 ended), starts 15: gap 5 host-bound;
    # k3 launched at 11 (before k2 ended), starts 25 after k2 ends at 20: gap 5 not host-bound
    tasks = pd.DataFrame({"rank": [0, 0, 0], "stream": ["7", "7", "7"], "start_ms": [0.0, 15.0, 25.0],
                          "end_ms": [10.0, 20.0, 30.0], "delay_ms": [1.0, 3.0, 14.0]})
    per = host.launch_stats(tasks).iloc[0]
    assert per["kernels"] == 3 and per["delay_median_ms"] == pytest.approx(3.0)
    assert per["delay_p90_ms"] == pytest.approx(np.percentile([1, 3, 14], 90))
    assert per["idle_ms"] == pytest.approx(10.0) and per["host_idle_ms"] == pytest.approx(5.0)
    assert per["host_idle_ratio"] == pytest.approx(0.5)


def test_launch_stats_streams_are_separate_and_nested_tasks_leave_no_gap():
    tasks = pd.DataFrame({"rank": [0, 0, 0, 0], "stream": ["a", "a", "a", "b"],
                          "start_ms": [0.0, 1.0, 12.0, 5.0], "end_ms": [10.0, 2.0, 13.0, 6.0],
                          "delay_ms": [0.0, 0.0, 0.5, 0.0]})
    per = host.launch_stats(tasks).iloc[0]
    # stream a: gap before the task at 12 counts from 10 (the longer task's end), launched at 11.5: host-bound 2
    assert per["idle_ms"] == pytest.approx(2.0) and per["host_idle_ms"] == pytest.approx(2.0)


def test_launch_stats_a_task_of_unknown_stream_makes_no_gap():
    # the second and third tasks have no stream: neither is a gap after the first, nor is the fourth after them
    tasks = pd.DataFrame({"rank": [0, 0, 0, 0], "stream": [2.0, np.nan, np.nan, 2.0],
                          "start_ms": [0.0, 4.0, 6.0, 12.0], "end_ms": [1.0, 5.0, 7.0, 13.0],
                          "delay_ms": [0.0, 0.0, 0.0, 0.0]})
    per = host.launch_stats(tasks).iloc[0]
    assert per["kernels"] == 4 and per["idle_ms"] == pytest.approx(11.0)  # only 1 -> 12 on stream 2


def test_launch_stats_of_tasks_that_start_together_do_not_depend_on_their_order():
    """Two kernels start together after a gap on one stream: the gap (5 ms) is host-bound only when even the earlier
    of their launches came after the stream drained; the trace's order of the two (the first was the one asked)
    decided before. The numbers are the same for every order of the rows, numeric streams or texts."""
    drained = pd.DataFrame({"rank": 0, "stream": [7, 7, 7], "start_ms": [0.0, 15.0, 15.0],
                            "end_ms": [10.0, 16.0, 20.0], "delay_ms": [0.0, 2.0, 4.0]})  # launched 13, 11: after 10
    waiting = drained.assign(delay_ms=[0.0, 2.0, 6.0])  # one launched at 9, before the stream drained
    for tasks, host_idle in ((drained, 5.0), (waiting, 0.0)):
        for order in ([0, 1, 2], [0, 2, 1], [2, 1, 0]):
            for t in (tasks, tasks.assign(stream=tasks["stream"].astype(str))):
                per = host.launch_stats(t.iloc[order].reset_index(drop=True)).iloc[0]
                assert per["idle_ms"] == pytest.approx(5.0) and per["host_idle_ms"] == pytest.approx(host_idle)


def test_launch_stats_of_stream_numbers_is_that_of_their_texts():
    """launches() hands gpu_ops' stream numbers as they are (a text per row of a million-row table cost more than
    the rest): launch_stats orders them by their texts ("10" before "7"), so numbers give the table their texts give,
    exactly."""
    rng = np.random.default_rng(11)
    for trial in range(60):
        n = int(rng.integers(1, 200))
        tasks = pd.DataFrame({"rank": rng.integers(0, 3, n), "stream": rng.choice([7, 10, 2, 13, 100], n),
                              "start_ms": np.round(rng.random(n) * 50, 1), "delay_ms": rng.random(n)})
        tasks["end_ms"] = tasks["start_ms"] + rng.random(n) * 5
        want = host.launch_stats(tasks.assign(stream=tasks["stream"].astype(str)))
        pd.testing.assert_frame_equal(host.launch_stats(tasks), want, check_exact=True)


def test_ascend_hostdevice_flows_give_launch_delay():
    hw, cann = 2, 1
    events = [
        {"ph": "M", "name": "process_name", "pid": hw, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_name", "pid": cann, "args": {"name": "CANN"}},
        {"ph": "M", "name": "thread_name", "pid": hw, "tid": 3, "args": {"name": "Stream 3"}},
        {"ph": "X", "name": "MatMul", "pid": hw, "tid": 3, "ts": "1000.000", "dur": 5, "args": {"Task Type": "AI_CORE"}},
        {"ph": "X", "name": "Add", "pid": hw, "tid": 3, "ts": "1010.500", "dur": 1, "args": {"Task Type": "AI_CORE"}},
        {"ph": "s", "cat": "HostToDevice", "name": "HostToDevice9", "id": "9", "pid": cann, "tid": 4, "ts": "998.000"},
        {"ph": "f", "cat": "HostToDevice", "name": "HostToDevice9", "id": "9", "pid": hw, "tid": 3, "ts": "1000.000",
         "bp": "e"},
    ]
    out = collect_tables([events], 0, [], "t.json")
    d = out["device_ops"].set_index("name")
    assert d.loc["MatMul", "launch_delay_ms"] == pytest.approx(0.002)
    assert np.isnan(d.loc["Add", "launch_delay_ms"])


def test_level2_fixture_launch_delay_and_section():
    root = fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "text", "level2")
    run = read_run(root)
    assert schema.check(run) == []
    dev = run.table("device_ops")
    assert dev["launch_delay_ms"].notna().sum() == 2 * 211  # every HostToDevice flow end on the hardware lanes
    out = {o.id: o for o in run_sections(run, only=["host"])}["host"]
    assert out.status == "ok", out.reason
    a = out.analysis
    assert set(a.metrics["parts"]) == {"launch", "pmu", "l2", "api"}
    # L2 per op type from l2_cache.csv, typed through kernel_details.csv; the fixture has no hit rate (N/A)
    csv = pd.read_csv(root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "l2_cache.csv")
    l2 = a.tables["l2"].set_index("type")
    assert l2["tasks"].sum() == 2 * len(csv) and l2.loc["TransData", "ranks"] == 2
    r0 = a.tables["l2_ranks"].set_index("rank")
    assert r0.loc[0, "victim_ratio"] == pytest.approx(csv["Victim Rate"].mean())
    assert a.metrics["l2_hit_ratio_mean"] is None and l2["hit_ratio"].isna().all()
    t = {tb.id: tb for tb in out.view.tables}
    assert "not measured" in t["host-l2"].caption and "L2 hit rate" not in [c.label for c in t["host-l2"].columns]
    lp = a.tables["launch"].set_index("rank")
    assert lp.loc[0, "delay_median_ms"] == pytest.approx(0.659268, rel=1e-6)
    pmu = a.tables["pmu"].set_index("type")
    assert 0.6 < pmu.loc["Conv2D", "cube_util_ratio"] < 0.7 and np.isnan(pmu.loc["TransData", "cube_util_ratio"])
    api = a.tables["api"]
    assert api.groupby("rank").size().max() <= host.TOP_APIS
    assert api.iloc[0]["api"] and a.metrics["host_api_ms_per_rank"] > 0
    notes = " ".join(out.view.notes)
    assert "Not in this run" in notes and "user ranges" in notes  # parts without data said, never "passed"


def test_launches_are_the_gpu_ops_with_a_launch():
    """launches(): the kernels with a launch (the row left out has a rank and stream of its own), their columns as
    in the table and the delay from launch to start (0 for a launch after the start); a table without any launch
    gives None."""
    gpu = pd.DataFrame({"rank": [0, 2, 1, 1], "stream": [7, 13, 10, 7], "name": ["a", "b", "c", "d"],
                        "ts_ns": [1_000_000, 2_000_000, 3_000_000, 4_000_000],
                        "launch_ts_ns": [900_000, host.NO_LAUNCH, 3_500_000, 3_999_000],
                        "start_ms": [1.0, 2.0, 3.0, 4.0], "end_ms": [1.5, 2.5, 3.5, 4.5]})
    got = host.launches(_run(gpu_ops=gpu))
    want = gpu[gpu["launch_ts_ns"] != host.NO_LAUNCH].reset_index(drop=True)
    pd.testing.assert_frame_equal(got, pd.DataFrame({
        "rank": want["rank"], "stream": want["stream"], "start_ms": want["start_ms"], "end_ms": want["end_ms"],
        "delay_ms": [0.1, 0.0, 0.001]}))  # (a launch after its kernel's start: 0)
    assert host.launches(_run(gpu_ops=gpu.assign(launch_ts_ns=host.NO_LAUNCH))) is None


def test_launch_delay_against_hta_launch_stats():
    """HTA's launch_delay is kernel start - the launch call's END; ours from its start: ours = HTA's + cpu_duration
    (HTA writes whole µs). Its idle-time breakdown calls the same gaps host_wait (HTA drops the last step)."""
    run = read_run(fixture_dir("kineto", "hta_tests_data", "tests", "data", "nccl_parser_config"))
    hta = pd.read_csv(reference_file("hta", "single_nccl_data", "cuda_kernel_launch_stats.csv"))
    g = run.table("gpu_ops")
    g = g[g["launch_ts_ns"] != host.NO_LAUNCH]
    m = g[["correlation", "ts_ns", "launch_ts_ns"]].merge(hta, on="correlation")
    assert len(m) == len(hta) == 2516
    ours_us = (m["ts_ns"] - m["launch_ts_ns"]) / 1e3
    assert ((ours_us - (m["launch_delay"] + m["cpu_duration"])).abs() <= 1.5).mean() > 0.995
    per = host.launch_stats(host.launches(run)).iloc[0]
    idle = pd.read_csv(reference_file("hta", "single_nccl_data", "idle_time_breakdown.csv"))
    hta_share = idle.loc[idle["idle_category"] == "host_wait", "idle_time"].sum() / idle["idle_time"].sum()
    assert per["host_idle_ratio"] == pytest.approx(hta_share, abs=0.01)


# --------------------------------------------------------------------------- all-to-all balance


def _comm(sizes: dict[int, list[float]]) -> pd.DataFrame:
    rows = [(r, s, "collective", "alltoall", "alltoall", "g", 1.0, mb) for r, v in sizes.items()
            for s, mb in enumerate(v, start=1)]
    rows += [(r, 1, "collective", "allreduce", "allreduce", "g", 1.0, 999.0) for r in sizes]  # not all-to-all
    return pd.DataFrame(rows, columns=["rank", "step", "kind", "op", "op_type", "group", "elapse_ms", "size_mb"])


def test_alltoall_imbalance_and_finding():
    comm = _comm({0: [10, 10], 1: [10, 10], 2: [10, 10], 3: [30, 10]})
    steps, per = host.alltoall_balance(comm)
    s = steps.set_index("step")
    assert s.loc[1, "imbalance_ratio"] == pytest.approx(30 / 15) and s.loc[2, "imbalance_ratio"] == pytest.approx(1)
    assert per.set_index("rank").loc[3, "mb_per_step"] == pytest.approx(20)
    a = host.analyze(_run(comm_ops=comm))
    assert a.metrics["alltoall_imbalance_ratio"] == pytest.approx(2.0)
    f = [x for x in a.findings if x.id == "alltoall_imbalance"]
    assert len(f) == 1 and f[0].ranks == [3]
    balanced = host.analyze(_run(comm_ops=_comm({r: [10, 10] for r in range(4)})))
    assert balanced.findings == [] and balanced.metrics["alltoall_imbalance_ratio"] == pytest.approx(1.0)


def test_no_part_is_unavailable_and_no_alltoall_is_not_a_part():
    comm = _comm({0: [], 1: []})
    out = {o.id: o for o in run_sections(_run(comm_ops=comm), only=["host"])}["host"]
    assert out.status == "unavailable" and "needs" in out.reason


# --------------------------------------------------------------------------- PMU, host API


def test_pmu_by_type_weights_by_duration_and_skips_the_other_core():
    k = pd.DataFrame({"type": ["MatMul", "MatMul", "Add"], "core": ["AI_CORE", "AI_CORE", "AI_VECTOR_CORE"],
                      "dur_ms": [1.0, 3.0, 2.0], "cube_util_ratio": [0.2, 0.6, 0.0],
                      "aiv_vec_ratio": [0.0, 0.0, 0.4]})
    p = host.pmu_by_type(k).set_index("type")
    assert p.loc["MatMul", "cube_util_ratio"] == pytest.approx((0.2 * 1 + 0.6 * 3) / 4)
    assert np.isnan(p.loc["Add", "cube_util_ratio"])  # the vector core's 0 is "not measured"
    assert p.loc["Add", "aiv_vec_ratio"] == pytest.approx(0.4) and np.isnan(p.loc["MatMul", "aiv_vec_ratio"])


def test_kernel_details_pmu_cells_out_of_range_are_nan_not_dropped(tmp_path):
    p = tmp_path / "kernel_details.csv"
    p.write_text("Name,Type,Accelerator Core,Start Time(us),Duration(us),aic_mac_ratio,cube_utilization(%)\n"
                 "a,MatMul,AI_CORE,1000.0,5,0.5,80\n"
                 "b,MatMul,AI_CORE,1010.0,5,7,abc\n")
    df = parse_kernel_details(p, 0, [])
    assert len(df) == 2
    assert df["aic_mac_ratio"].tolist()[0] == 0.5 and np.isnan(df["aic_mac_ratio"].iloc[1])
    assert df["cube_util_ratio"].iloc[0] == pytest.approx(0.8) and np.isnan(df["cube_util_ratio"].iloc[1])


def test_l2_cache_reader_types_by_stream_and_task(tmp_path):
    (tmp_path / "kernel_details.csv").write_text(
        "Task ID,Stream ID,Name,Type,Duration(us)\n5,2,mm,MatMulV2,3\n5,2,dup,Other,1\n6,2,add,Add,1\n")
    p = tmp_path / "l2_cache.csv"
    p.write_text("Stream Id,Task Id,Hit Rate,Victim Rate,Op Name\n2,5,0.9,0.1,mm\n2,6,N/A,0.3,add\n"
                 "2,7,0.5,0.2,lonely\n2,8,0.5,7,bad\n")
    problems = []
    df = parse_l2_cache(p, 1, problems)
    assert df["type"].tolist() == ["MatMulV2", "Add", ""]  # the first kernel of a pair; '' when none
    assert np.isnan(df["hit_ratio"].iloc[1]) and df["victim_ratio"].tolist() == [0.1, 0.3, 0.2]
    assert problems  # the victim rate 7 is no ratio: its row is refused and said


def test_l2_by_type_means_and_rank_spread():
    df = pd.DataFrame({"rank": [0, 0, 1, 1], "type": ["MatMul", "MatMul", "MatMul", ""], "name": ["a", "b", "c", "x"],
                       "hit_ratio": [0.8, np.nan, 0.4, 0.5], "victim_ratio": [0.1, 0.3, 0.5, 0.0]})
    by, ranks = host.l2_by_type(df)
    mm = by.set_index("type").loc["MatMul"]
    assert mm["tasks"] == 3 and mm["ranks"] == 2
    assert mm["hit_ratio"] == pytest.approx(0.6)  # over the measured tasks only
    assert mm["victim_ratio"] == pytest.approx(0.3) and mm["victim_ratio_spread"] == pytest.approx(0.5 - 0.2)
    assert "x" in set(by["type"])  # an untyped task goes by its op name
    assert ranks.set_index("rank").loc[1, "victim_ratio"] == pytest.approx(0.25)


def test_api_statistic(tmp_path):
    p = tmp_path / "api_statistic.csv"
    p.write_text("Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance\n"
                 "runtime,DeviceSynchronize,330.09,1,330.09,330.09,330.09,0.0\n"
                 "acl,aclrtMalloc,20,4,5,1,9,1\n")
    df = parse_api_statistic(p, 3, [])
    assert df["total_ms"].tolist() == pytest.approx([0.33009, 0.02]) and (df["rank"] == 3).all()
    assert df["count"].tolist() == [1, 4]


# --------------------------------------------------------------------------- dynamic shape, host CPU


def test_dynamic_shape_per_step_types(tmp_path):
    p = tmp_path / "dynamic_shape_info_0.json"
    p.write_text(json.dumps({"operator": {
        "1": [{"step": 1, "op_type": "Add", "dur": 100.0}, {"step": 1, "op_type": "Add", "dur": 50.0}],
        "2": [{"step": 2, "op_type": "Add", "dur": 300.0}, {"step": 2, "op_type": "MatMul", "dur": "x"}]}}))
    problems: list = []
    t = parse_dynamic_shape(p, 0, problems)["op_type_steps"]
    assert t[["step", "op_type", "count"]].values.tolist() == [[1, "Add", 2], [2, "Add", 1]]
    assert t["total_ms"].tolist() == pytest.approx([0.15, 0.3]) and len(problems) == 1
    per, by = host.op_type_steps(t)
    assert by.set_index("op_type").loc["Add", "spread_ratio"] == pytest.approx(2.0)


def test_single_device_fixture_dynamic_shape_and_cpu():
    run = read_run(fixture_dir("mindinsight", "mi_profiler_single"))
    assert schema.check(run) == []
    out = {o.id: o for o in run_sections(run, only=["host"])}["host"]
    assert out.status == "ok", out.reason
    assert set(out.analysis.metrics["parts"]) == {"dynamic", "cpu"}
    dyn = out.analysis.tables["dynamic"].set_index("op_type")
    assert dyn.loc["Add", "steps"] == 9
    cpu = out.analysis.tables["cpu"].iloc[0]
    assert cpu["user_ratio"] == pytest.approx(0.2) and cpu["samples"] == 3
    # the training process (process_info) beside the machine (device_info): one row each in host_cpu
    raw = run.table("host_cpu").set_index("scope")
    assert set(raw.index) == {"machine", "process"}
    assert raw.loc["process", "user_ratio"] == pytest.approx(0.2) and raw.loc["process", "sys_ratio"] == \
        pytest.approx(0.2) and raw.loc["process", "samples"] == 3 and pd.isna(raw.loc["process", "idle_ratio"])
    assert cpu["proc_user_ratio"] == pytest.approx(0.2) and cpu["proc_sys_ratio"] == pytest.approx(0.2)
    assert out.analysis.metrics["process_cpu_busy_ratio_mean"] == pytest.approx(0.4)
    assert "training process takes" in out.view.summary


def test_host_cpu_table_machine_only_and_process_only():
    mach = pd.DataFrame([{"rank": 0, "scope": "machine", "samples": 2, "user_ratio": 0.5, "sys_ratio": 0.1,
                          "io_ratio": 0.0, "idle_ratio": 0.4, "processors": 8.0},
                         {"rank": 1, "scope": "process", "samples": 3, "user_ratio": 0.3, "sys_ratio": 0.1,
                          "io_ratio": float("nan"), "idle_ratio": float("nan"), "processors": 8.0}])
    t = host.host_cpu_table(mach).set_index("rank")
    assert pd.isna(t.loc[0, "proc_user_ratio"]) and t.loc[0, "user_ratio"] == 0.5
    assert pd.isna(t.loc[1, "user_ratio"]) and t.loc[1, "proc_user_ratio"] == 0.3 and t.loc[1, "samples"] == 3


# --------------------------------------------------------------------------- raw PROF_* directories


def test_raw_prof_directory_names_the_export(tmp_path):
    d = tmp_path / "PROF_000001_20230818142704322_COJGGGCANRMICFBC" / "device_0"
    d.mkdir(parents=True)
    (d / "info.json.0").write_text("{}")
    with pytest.raises(InputError) as exc:
        read_run(tmp_path)
    msg = exc.value.problem
    assert "PROF_000001_20230818142704322_COJGGGCANRMICFBC" in msg and "msprof --export" in msg


def test_db_fixture_hbm_bandwidth_and_llc_hit_rate():
    """The Level2 DB export's HBM and LLC tables: per rank each sample's bandwidth summed over the 4 HBMs and read +
    write, mean / most over the 13 samples, and the mean LLC hit rate (as averaged straight from the DB)."""
    run = read_run(fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "db", "level2"))
    assert schema.check(run) == []
    hbm, llc = run.table("hbm"), run.table("llc")
    assert len(hbm) == 208 and set(hbm["direction"]) == {"read", "write"} and hbm["hbm_id"].nunique() == 4
    assert len(llc) == 52 and set(llc["mode"]) == {"read"}
    out = {o.id: o for o in run_sections(run, only=["host"])}["host"]
    assert out.status == "ok", out.reason
    assert "memory_bw" in out.analysis.metrics["parts"]
    bw = out.analysis.tables["memory_bw"].set_index("rank")
    assert list(bw.index) == [0, 1] and (bw["hbm_samples"] == 13).all() and (bw["llc_samples"] == 26).all()
    # rank 0: mean read 3.6037 GB/s and write 2.6355 GB/s per row, 4 HBMs each -> 24.957 GB/s per sample
    assert bw.loc[0, "hbm_mean_gbps"] == pytest.approx(4 * (3.6037238188846154 + 2.63546327575), rel=1e-6)
    assert bw.loc[0, "hbm_max_gbps"] == pytest.approx(144.25, abs=0.01)
    assert bw.loc[0, "llc_hit_ratio"] == pytest.approx(0.4920384615, rel=1e-6)
    assert "LLC hit rate averages" in out.view.summary
    assert "host-memory-bw" in {tb.id for tb in out.view.tables}


def test_memory_bandwidth_missing_parts():
    assert host.memory_bandwidth(None, None) is None
    llc = pd.DataFrame({"rank": [0, 0], "llc_id": [0, 1], "mode": ["read"] * 2, "hit_ratio": [0.5, 0.7],
                        "throughput_gbps": [1.0, 2.0]})
    t = host.memory_bandwidth(None, llc)
    assert t.loc[0, "llc_hit_ratio"] == pytest.approx(0.6) and pd.isna(t.loc[0, "hbm_mean_gbps"])
    # a run without them lists the part as not in this run
    run = read_run(fixture_dir("mindinsight", "mi_profiler_single"))
    out = {o.id: o for o in run_sections(run, only=["host"])}["host"]
    assert "HBM bandwidth and LLC hit rate per rank" in " ".join(out.view.notes)
