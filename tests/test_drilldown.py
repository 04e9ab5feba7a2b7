"""Per-rank drill-down in the execution section: rank blocks, chosen ranks, top operators per rank."""

from __future__ import annotations

import pandas as pd
import pytest

from reportgen.model import Run
from reportgen.readers import read_run
from reportgen.sections import Options, drilldown, memory, run_sections

from conftest import fixture_dir

ASCEND = ("ascend", "msinsight", "test", "st", "level2")
KINETO = ("kineto", "hta_tests_data", "tests", "data", "trace_filter")
MINDINSIGHT = ("mindinsight", "mi_cluster_propose_pp2x4")


def _execution(run, options=None):
    (out,) = run_sections(run, options, only=["execution"])
    assert out.status == "ok", out.reason
    return out


def _check_ids(out):
    ops = out.analysis.tables["drilldown_ops"]
    assert list(ops.columns) == drilldown.OPS_COLUMNS
    fig_ids = [f.id for f in out.view.figures]
    tab_ids = [t.id for t in out.view.tables]
    for r in ops["rank"].unique():
        assert f"drill-rank-{r}" in fig_ids
        assert f"drill-rank-{r}-table" in tab_ids
        fig = next(f for f in out.view.figures if f.id == f"drill-rank-{r}")
        role = ops.loc[ops["rank"] == r, "role"].iloc[0]
        assert fig.title == f"Rank {r} ({role}): top operators"
    assert (ops.groupby(["rank", "level"]).size() <= drilldown.TOP_N + 1).all()
    return ops


def test_ascend_top_operators_match_kernels_groupby():
    run = read_run(fixture_dir(*ASCEND))
    k = run.table("kernels")
    for rank in (0, 2):
        t = drilldown.top_operators(run, rank)
        assert t is not None
        types = t[t["level"] == "type"].reset_index(drop=True)
        assert types.loc[0, "name"] in ("FlashAttentionScoreGrad", "MatMulV3")
        x = k[(k["rank"] == rank) & (k["core"] != "COMMUNICATION") & ~k["type"].str.lower().str.startswith("hcom")]
        for level, col in (("type", "type"), ("operator", "name")):
            g = x.groupby(col)["dur_ms"].agg(["count", "sum", "max"])
            rows = t[(t["level"] == level) & (t["name"] != "others")].set_index("name")
            assert len(rows) == min(drilldown.TOP_N, len(g))
            assert (rows["count"] == g.loc[rows.index, "count"]).all()
            assert rows["total_ms"].to_numpy() == pytest.approx(g.loc[rows.index, "sum"].to_numpy())
            assert rows["max_ms"].to_numpy() == pytest.approx(g.loc[rows.index, "max"].to_numpy())
            # top + others covers every kernel, shares add up to one
            lv = t[t["level"] == level]
            assert lv["count"].sum() == len(x)
            assert lv["total_ms"].sum() == pytest.approx(x["dur_ms"].sum())
            assert lv["share_ratio"].sum() == pytest.approx(1.0)


def test_ascend_section_drilldown_and_asked_rank():
    run = read_run(fixture_dir(*ASCEND))
    out = _execution(run, Options({"ranks": [0, 99]}))
    chosen = out.analysis.metrics["drilldown_ranks"]
    assert "asked for" in chosen["0"] and "99" not in chosen
    ops = _check_ids(out)
    assert {0, 2} <= set(ops["rank"])
    blocks = out.analysis.tables["rank_blocks"]
    assert blocks["peak_memory_ratio"].isna().all()  # capacity unknown in this fixture
    assert blocks.set_index("rank").loc[2, "flops_ratio"] == pytest.approx(1.0)


def test_kineto_gpu_ops_drilldown():
    run = read_run(fixture_dir(*KINETO))
    out = _execution(run)
    ops = _check_ids(out)
    chosen = out.analysis.metrics["drilldown_ranks"]
    roles = ", ".join(chosen.values())
    assert "slowest" in roles and "fastest" in roles and "median" in roles
    g = run.table("gpu_ops")
    for r in ops["rank"].unique():
        x = g[(g["rank"] == r) & (g["kind"] != "comm")]
        lv = ops[(ops["rank"] == r) & (ops["level"] == "operator")]
        assert lv["count"].sum() == len(x)
        assert lv["total_ms"].sum() == pytest.approx(x["dur_ms"].sum())
        assert set(ops[(ops["rank"] == r) & (ops["level"] == "type")]["name"]) <= set(x["kind"])


def test_mindinsight_rank_blocks_and_chosen_ranks():
    run = read_run(fixture_dir(*MINDINSIGHT))
    blocks = drilldown.rank_blocks(run, Options())
    fr = blocks.set_index("rank")["flops_ratio"]
    assert fr.loc[[0, 1, 2, 3]].to_numpy() == pytest.approx([0.325069, 0.325064, 0.999988, 1.0], abs=1e-6)
    assert list(blocks["stage"]) == [1, 1, 2, 2]

    out = _execution(run, Options({"ranks": [1]}))
    ov = out.analysis.tables["time_overview"]
    # the run's one ranking (reportgen/facts.py): mean step time over the steps in scope (warm-up step 1 left out)
    means = ov[~ov["warmup"]].dropna(subset=["step_ms"]).groupby("rank")["step_ms"].mean()
    chosen = drilldown.chosen_ranks(run, ov, Options({"ranks": [1, 42]}))
    assert "slowest" in chosen[int(means.idxmax())] and "fastest" in chosen[int(means.idxmin())]
    assert "asked for" in chosen[1] and 42 not in chosen
    assert out.analysis.metrics["drilldown_ranks"]["1"] == chosen[1]
    ops = _check_ids(out)
    assert 1 in set(ops["rank"])
    assert set(ops.loc[ops["level"] == "type", "name"]) <= {"Send", "Receive", "AllReduce", "AllGather",
                                                             "ReduceScatter", "Broadcast", "others"} | set(
        ops.loc[ops["level"] == "type", "name"])
    # the rank-block strips come right after the Marey figure and carry the shares
    ids = [f.id for f in out.view.figures]
    assert ids[ids.index("execution-marey") + 1] == "execution-rank-blocks"
    spec = out.view.figures[ids.index("execution-rank-blocks")].spec
    vals = [v for d in spec.get("datasets", {}).values() for v in d]
    assert {v["r"] for v in vals} == {0, 1, 2, 3}


def test_chosen_ranks_capped_and_top_operators_absent():
    run = read_run(fixture_dir(*MINDINSIGHT))
    chosen = drilldown.chosen_ranks(run, None, Options({"ranks": list(range(40))}))
    assert len(chosen) <= drilldown.MAX_CHOSEN
    assert drilldown.top_operators(run, 77) is None


def test_rank_cells_link_to_the_drill_down(report_cache, pp2x4):
    html = report_cache.get(pp2x4).read_text()  # built once per worker (conftest.ReportCache), read only
    # one behaviour for every rank cell of the interactive page: #rank-N sets the rank picker, the drilled ranks'
    # cells too (they linked to their own figure, and the picker kept showing another rank)
    assert 'id="drill-rank-' in html and 'href="#rank-' in html and 'href="#drill-rank-' not in html
    # the static page has no picker: a drilled rank's cell links to its figure
    static = report_cache.get(pp2x4, "--static")
    assert 'href="#drill-rank-' in static.read_text()


# --------------------------------------------------------------------------- lines over one step

HTA_MEMORY = ("kineto", "hta_tests_data", "tests", "data", "df_index_resolver")
GLOO = ("generated", "torch_gloo_ddp4_baseline")


def _lines_checks(out):
    lines = out.analysis.tables["rank_step_lines"]
    assert list(lines.columns) == drilldown.LINE_COLUMNS
    assert (lines.groupby(["rank", "metric"]).size() <= drilldown.MAX_LINE_POINTS).all()
    assert len(lines) <= drilldown.MAX_CHOSEN * 2 * drilldown.MAX_LINE_POINTS
    ids = [f.id for f in out.view.figures]
    for r in lines["rank"].unique():
        assert f"drill-rank-{r}-lines" in ids
    return lines


def test_kineto_memory_line_inside_the_step_window():
    run = read_run(fixture_dir(*HTA_MEMORY))
    out = _execution(run)
    lines = _lines_checks(out)
    mem = lines[lines["metric"] == "memory_mb"]
    assert not mem.empty
    r = int(mem["rank"].iloc[0])
    step = out.analysis.metrics["drilldown_line_steps"][str(r)]
    assert step == out.analysis.metrics["marey_steps_shown"][0]
    ts = run.table("trace_steps")
    w = ts[(ts["rank"] == r) & (ts["step"] == step)].iloc[0]
    span = w["end_ms"] - w["start_ms"]
    m = mem[mem["rank"] == r]
    assert (m["t_ms"] >= 0).all() and (m["t_ms"] <= span).all()
    assert m["t_ms"].iloc[-1] == pytest.approx(span)  # the level is held to the step end
    # the memory section's in-use line of the rank (memory_samples, the device series' allocated)
    g = memory.in_use_series(run.table("memory_samples"))
    assert (g["counter"] == "allocated").all()
    g = g[g["rank"] == r]
    inside = g[(g["ts_ms"] >= w["start_ms"]) & (g["ts_ms"] < w["end_ms"])]
    assert m["value"].max() == pytest.approx(inside["mb"].max())  # the max survives downsampling
    fig = next(f for f in out.view.figures if f.id == f"drill-rank-{r}-lines")
    assert fig.title.endswith(f"over step {step}")


def test_kineto_cumulative_flops_end_at_the_step_flops():
    from reportgen.sections import flops

    run = read_run(fixture_dir(*GLOO))
    out = _execution(run)
    lines = _lines_checks(out)
    fl = lines[lines["metric"] == "flops_cumulative"]
    assert not fl.empty
    ops = flops.counted_ops(run.table("op_flops"))  # the canonical table the FLOPs section reads too
    ts = run.table("trace_steps")
    per_step = flops.analyze(run).tables.get("per_rank_step")
    for r, f in fl.groupby("rank"):
        step = out.analysis.metrics["drilldown_line_steps"][str(r)]
        w = ts[(ts["rank"] == r) & (ts["step"] == step)].iloc[0]
        o = ops[(ops["rank"] == r) & (ops["start_ms"] >= w["start_ms"]) & (ops["start_ms"] < w["end_ms"])]
        f = f.sort_values("t_ms")
        assert f["value"].is_monotonic_increasing
        assert f["value"].iloc[-1] == pytest.approx(o["flops"].sum())
        # held to the step end: the x-axis is the whole step, not the time of the last launch
        assert f["t_ms"].iloc[-1] == pytest.approx(w["end_ms"] - w["start_ms"])
        if per_step is not None:
            ref = per_step[(per_step["rank"] == r) & (per_step["step"] == step)]["flops"]
            assert f["value"].iloc[-1] == pytest.approx(float(ref.iloc[0]))


def test_downsample_budget_keeps_max_and_last():
    t = pd.Series(range(10_000), dtype=float) / 10
    v = pd.Series([(i * 37) % 1001 for i in range(10_000)], dtype=float)
    d = drilldown.downsample(t, v, "max", 1000.0)
    assert len(d) <= drilldown.MAX_LINE_POINTS and d["value"].max() == v.max()
    c = v.cumsum()
    d = drilldown.downsample(t, c, "last", 1000.0)
    assert len(d) <= drilldown.MAX_LINE_POINTS and d["value"].iloc[-1] == c.iloc[-1]
    assert d["t_ms"].is_monotonic_increasing


def test_no_lines_without_data():
    # MindInsight: node-indexed memory only, no trace steps (Ascend level2 has step windows derived from its step
    # durations since the Marey view reads kernel_details.csv: tests/test_timeline.py)
    for parts in (MINDINSIGHT,):
        run = read_run(fixture_dir(*parts))
        out = _execution(run)
        assert "rank_step_lines" not in out.analysis.tables
        assert not any(f.id.endswith("-lines") for f in out.view.figures)
    assert drilldown.rank_step_lines(read_run(fixture_dir(*MINDINSIGHT)), [0, 1])[0] is None


def test_ascend_lines_over_the_step():
    run = read_run(fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "text", "level1"))
    (o,) = run_sections(run, only=["execution"])
    lines = o.analysis.tables["rank_step_lines"]
    assert set(lines["metric"]) == {"memory_mb", "flops_cumulative"}
    f = lines[lines["metric"] == "flops_cumulative"]
    for _, g in f.groupby("rank"):
        assert g.sort_values("t_ms")["value"].is_monotonic_increasing
    assert {"drill-rank-0-lines", "drill-rank-1-lines"} <= {x.id for x in o.view.figures}


def _memory_run(samples: pd.DataFrame, windows: list[tuple[int, int, float, float]]) -> Run:
    """A run of memory_samples and trace_steps built here (no fixture)."""
    run = Run(name="t", source_format="test", source_path="/x", ranks=sorted({int(r) for r in samples["rank"]}))
    run.tables["memory_samples"] = samples
    run.tables["trace_steps"] = pd.DataFrame(windows, columns=["rank", "step", "start_ms", "end_ms"])
    return run


def _samples(rank, series, kind, ts, allocated, reserved, device=0.0):
    n = len(ts)
    return pd.DataFrame({"rank": [rank] * n, "ts_ms": ts, "kind": [kind] * n, "device_id": [device] * n,
                         "series": [series] * n, "allocated_mb": allocated, "reserved_mb": reserved,
                         "active_mb": [float("nan")] * n, "capacity_mb": [16000.0] * n})


def test_memory_line_is_the_memory_sections_series():
    """The drill-down's memory line is the memory section's in-use line per rank (memory.in_use_series: the allocated
    of the device series whose allocated peaks highest), so over a step holding every sample its highest point is
    the section's allocated peak: not the reserved (the section's reserved peak), not the host series, not a lower
    device series."""
    samples = pd.concat([
        _samples(0, "device 0 total reserved", "device", [1.0, 2.0, 3.0], [100.0, 300.0, 200.0], [400.0, 900.0, 500.0]),
        _samples(0, "host", "host", [1.0, 2.0], [5000.0, 6000.0], [7000.0, 8000.0], device=float("nan")),
        _samples(0, "device 1 total reserved", "device", [1.5, 2.5], [10.0, 20.0], [30.0, 40.0], device=1.0),
        _samples(1, "device 0 total reserved", "device", [1.0, 2.0], [50.0, 60.0], [700.0, 650.0]),
    ], ignore_index=True)
    run = _memory_run(samples, [(0, 1, 0.0, 10.0), (1, 1, 0.0, 10.0)])
    (mo,) = run_sections(run, only=["memory"])
    pr = mo.analysis.tables["per_rank"].set_index("rank")
    assert pr["peak_mb"].to_dict() == {0: 900.0, 1: 700.0}  # the reserved peak stays the section's peak
    lines, used = drilldown.rank_step_lines(run, [0, 1])
    assert used == {"0": 1, "1": 1}
    mem = lines[lines["metric"] == "memory_mb"].groupby("rank")["value"].max()
    assert mem.to_dict() == pytest.approx(pr["alloc_peak_mb"].to_dict()) == {0: 300.0, 1: 60.0}


def test_memory_line_from_host_samples_only():
    """A run with host memory only (a CPU run): host memory is its memory, its allocated the drill-down's line
    (whether the allocator reserves or not)."""
    run = _memory_run(_samples(0, "host", "host", [1.0, 2.0], [1.0, 2.0], [3.0, 4.0], device=float("nan")),
                      [(0, 1, 0.0, 10.0)])
    assert drilldown.memory_series(run)["mb"].tolist() == [1.0, 2.0]
    lines = drilldown.rank_step_lines(run, [0])[0]
    assert lines[lines["metric"] == "memory_mb"]["value"].max() == 2.0
    run = _memory_run(_samples(0, "host", "host", [1.0, 2.0], [1.0, 2.0], [0.0, 0.0], device=float("nan")),
                      [(0, 1, 0.0, 10.0)])
    assert drilldown.memory_series(run)["mb"].tolist() == [1.0, 2.0]
    # no allocated at all: the reserved series of the section's peak
    run = _memory_run(_samples(0, "dev", "device", [1.0, 2.0], [float("nan")] * 2, [3.0, 4.0]), [(0, 1, 0.0, 10.0)])
    assert drilldown.memory_series(run)["mb"].tolist() == [3.0, 4.0]


def test_step_trace_op_types_come_from_the_reader():
    """The step trace's naming rule (stream_<s>_<i>_<Type>-op<N>) is the reader's (step_ops.op_type); the drill-down
    takes its types from that column."""
    from reportgen.readers.mindinsight import step_op_type

    assert step_op_type(pd.Series(["stream_3_1_AllReduce-op12", "Send-op4", "x"])).tolist() == \
        ["AllReduce", "Send", "x"]
    run = Run(name="t", source_format="test", source_path="/x", ranks=[0])
    run.tables["step_ops"] = pd.DataFrame({"rank": [0, 0], "step": [1, 1], "op": ["a-op1", "b-op2"],
                                           "stream": [1, 1], "start_ms": [0.0, 1.0], "end_ms": [1.0, 3.0],
                                           "dur_ms": [1.0, 2.0], "op_type": ["Collective", "Collective"]})
    top = drilldown.top_operators(run, 0)
    types = top[top["level"] == "type"]
    assert types["name"].tolist() == ["Collective"] and types["total_ms"].tolist() == [3.0]


# --------------------------------------------------------------------------- every rank: the rank picker


def test_every_rank_ops_top_and_others_cover_each_rank():
    """The picker's operation types of every rank: top + others add up to the rank's work (op_rows without
    communication and waits), shares to 1, the top types equal the chosen ranks' type-level tops."""
    from reportgen import opstats
    run = read_run(fixture_dir(*ASCEND))
    ops, classes = drilldown.every_rank_ops(run)
    work = opstats.work_rows(opstats.op_rows(run))
    assert set(ops["rank"]) == set(work["rank"])
    for r, g in ops.groupby("rank"):
        w = work[work["rank"] == r]
        assert g["total_ms"].sum() == pytest.approx(w["dur_ms"].sum())
        assert g["share_ratio"].sum() == pytest.approx(1.0)
        assert (g["name"] != "others").sum() <= drilldown.PICK_TOP
        full = drilldown.top_operators(run, r)
        types = full[(full["level"] == "type") & (full["name"] != "others")].head(drilldown.PICK_TOP)
        mine = g[g["name"] != "others"]
        assert mine["name"].tolist() == types["name"].tolist()
        assert mine["total_ms"].to_numpy() == pytest.approx(types["total_ms"].to_numpy())
    assert set(classes.values()) <= {"compute", "memcpy", "other", "communication", "wait"}


def test_picker_budget_shrinks_with_the_rank_count():
    assert drilldown.top_per_rank(4) == drilldown.PICK_TOP
    assert drilldown.top_per_rank(4096) == drilldown.PICK_MIN_TOP
    assert (drilldown.top_per_rank(4096) + 1) * 4096 <= 2 * drilldown.PICK_OPS_BUDGET
    assert drilldown.points_per_line(4) == drilldown.MAX_LINE_POINTS
    n = drilldown.points_per_line(1000)
    assert 0 < n < drilldown.MAX_LINE_POINTS and 2 * 1000 * n <= drilldown.PICK_LINE_BUDGET
    assert drilldown.points_per_line(4096) == 0  # no lines for every rank: the chosen ranks keep theirs


def test_picker_holds_every_rank_and_sets_from_the_control():
    """gloo DDP 4 ranks: the picker figure holds every rank's step breakdown, types and lines; its control lists every
    rank and starts on the slowest; each chart filters on the picked rank; a chosen rank's lines equal the drill-down's
    (same points at this rank count)."""
    run = read_run(fixture_dir(*GLOO))
    out = _execution(run)
    a = out.analysis
    ranks = set(int(r) for r in run.ranks)
    for key in ("rank_detail_ops", "rank_detail_parts", "rank_detail_lines"):
        assert set(a.data[key]["rank"]) == ranks, key
    (ctl,) = [c for c in out.view.controls if c.signal == drilldown.PICK_SIGNAL]
    assert [v for v, _ in ctl.options] == sorted(ranks)
    from reportgen import facts
    assert ctl.default == facts.of(run).slowest_rank
    (fig,) = [f for f in out.view.figures if f.id == drilldown.PICK_FIGURE]
    assert {"name": "drill_rank", "value": ctl.default} in fig.spec["params"]
    subs = fig.spec["vconcat"]
    assert len(subs) == 4  # breakdown, types, memory, FLOPs
    for sub in subs:
        assert any("datum.r == drill_rank" in str(t.get("filter", "")) for t in sub["transform"])
    # the breakdown's parts add up to the rank's mean step time
    parts = a.data["rank_detail_parts"].set_index("rank")
    per_rank = facts.of(run).per_rank.set_index("rank")["step_ms"]
    assert parts.sum(axis=1).to_numpy() == pytest.approx(per_rank.loc[parts.index].to_numpy(), rel=1e-6)
    chosen = a.tables["rank_step_lines"]
    r = int(chosen["rank"].iloc[0])
    mine = a.data["rank_detail_lines"]
    for metric in ("memory_mb", "flops_cumulative"):
        x = mine[(mine["rank"] == r) & (mine["metric"] == metric)]["value"].to_numpy()
        y = chosen[(chosen["rank"] == r) & (chosen["metric"] == metric)]["value"].to_numpy()
        assert x == pytest.approx(y)


def test_every_rank_cell_links_to_its_detail(report_cache, pp2x4):
    """MindInsight pp2x4: ranks 0-2 have a full drill-down; rank 3 (no link before, issue 27 #21) links to the
    picker, and so does every rank cell of every table."""
    html = report_cache.get(pp2x4).read_text()
    assert 'id="drill-rank-any"' in html and 'href="#rank-3"' in html
    assert 'data-signal="drill_rank"' in html


def test_picker_opens_on_a_rank_it_can_show():
    """The any-rank figure opens on the slowest rank; when that rank has no operation rows (its files hold its
    communication only, as st/level2's ranks 1 and 3) it opens on the slowest rank that has them."""
    from types import SimpleNamespace

    import pandas as pd

    F = SimpleNamespace(slowest_rank=3, per_rank=pd.DataFrame({"rank": [0, 1, 2, 3],
                                                              "step_ms": [809.0, 809.5, 809.2, 809.7]}))
    ops = pd.DataFrame({"rank": [0, 0, 2], "name": ["MatMul", "Add", "MatMul"]})
    assert drilldown.picker_default(F, [0, 1, 2, 3], ops) == 2
    assert drilldown.picker_default(F, [0, 1, 2, 3], None) == 3
    assert drilldown.picker_default(SimpleNamespace(slowest_rank=0, per_rank=F.per_rank), [0, 1, 2, 3], ops) == 0
    assert drilldown.picker_default(None, [0, 1, 2, 3], ops) == 0


def test_main_class_is_the_class_of_most_time():
    """drilldown._main_class: per key, the class with the largest summed time; ties: the first class in sort order;
    NaN totals only when nothing else."""
    import numpy as np
    import pandas as pd
    from reportgen.sections.drilldown import _main_class
    df = pd.DataFrame({"k": ["a", "a", "a", "b", "b", "c", "c"],
                       "c": ["wait", "compute", "compute", "wait", "compute", "wait", "compute"],
                       "ms": [3.0, 1.0, 1.5, 2.0, 2.0, np.nan, np.nan]})
    got = _main_class(df["k"], df["c"], df["ms"])
    assert got == {"a": "wait", "b": "compute", "c": "compute"} and list(got) == ["a", "b", "c"]
    df.loc[5, "ms"] = 0.5
    assert _main_class(df["k"], df["c"], df["ms"])["c"] == "wait"


@pytest.mark.parametrize("where", [("kineto", "hta_tests_data", "tests", "data", "df_index_resolver"),
                                   ("generated", "torch_gloo_ddp4_baseline"), ASCEND])
def test_the_pickers_lines_of_every_rank_are_each_ranks_own_lines(where):
    """every_rank_lines (each table split once, arrays per rank) gives, at the full points per line of a few ranks,
    the rows rank_step_lines gives rank by rank (pandas per rank): memory and cumulative FLOPs, the step used."""
    run = read_run(fixture_dir(*where), jobs=1)
    lines, used, n = drilldown.every_rank_lines(run, run.ranks)
    assert n == drilldown.MAX_LINE_POINTS and lines is not None and len(lines)
    want, want_used = drilldown.rank_step_lines(run, run.ranks)
    pd.testing.assert_frame_equal(lines, want)
    assert used == want_used


def test_a_line_downsampled_on_arrays_is_what_downsample_keeps():
    """_line_arrays = _to_step_end(downsample(...)) for both kinds of bin (the row of the largest value, ties to the
    first; the last row), unsorted times, ties, a span of 0, fewer points than bins, and non-finite values (the
    pandas path itself)."""
    import numpy as np

    rnd = np.random.default_rng(5)
    for case in range(300):
        size = int(rnd.integers(1, 60))
        t = rnd.integers(0, 30, size).astype(float) * float(rnd.choice([0.5, 1.0, 3.25]))
        if case % 3:
            t.sort()
        v = rnd.integers(0, 5, size).astype(float)
        if case % 17 == 0:
            v[int(rnd.integers(0, size))] = np.nan
        span = float(rnd.choice([0.0, 10.0, 100.0, t.max() + 1]))
        n = int(rnd.integers(1, 20))
        for how in ("max", "last"):
            cols = {"rank": [], "metric": [], "t_ms": [], "value": []}
            assert drilldown._line_arrays(cols, 3, "m", t, v, how, span, n)
            want = drilldown._to_step_end(drilldown.downsample(pd.Series(t), pd.Series(v), how, span, n), span)
            np.testing.assert_array_equal(cols["t_ms"][0], want["t_ms"].to_numpy(float))
            np.testing.assert_array_equal(cols["value"][0], want["value"].to_numpy(float))


def test_rows_without_a_rank_are_in_no_ranks_columns():
    """_columns_by_rank: each rank's rows in table order; a row without a rank (NaN) is in none of them (as a
    groupby by rank leaves it out); float ranks are found by their integer."""
    import numpy as np

    got = drilldown._columns_by_rank(pd.DataFrame({"rank": [0.0, 2.0, 0.0, np.nan], "step": [1, 3, 2, 4],
                                                   "t": [0.5, 2.5, 1.5, 3.5]}), "step", "t")
    assert got[0][0].tolist() == [1, 2] and got[2][1].tolist() == [2.5]
    assert sorted(r for r in got if r == r) == [0, 2]


def test_cumulative_flops_line_sums_as_pandas_does():
    """The picker's cumulative-FLOPs line sums on arrays (drilldown._cumsum): bit for bit pandas' ``cumsum`` (NaN
    stays NaN and adds nothing; inf + -inf is NaN)."""
    import numpy as np

    from reportgen.sections.drilldown import _cumsum

    rng = np.random.default_rng(7)
    cases = [np.array([]), np.array([np.nan]), np.array([np.inf, -np.inf, 1.0, np.nan]), np.array([1e308, 1e308, -1.0])]
    for n, share in ((5, 0.0), (1000, 0.3), (50, 1.0)):
        x = rng.uniform(-1e12, 1e15, n)
        x[rng.random(n) < share] = np.nan
        cases.append(x)
    for x in cases:
        with np.errstate(all="ignore"):
            want = pd.Series(x, dtype=float).cumsum().to_numpy(float)
        assert _cumsum(x).tobytes() == want.tobytes()
