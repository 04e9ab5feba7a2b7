"""Execution overview: time overview per step and rank, Marey view within its size budget, alignment named."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from reportgen import charts, facts, metrics
from reportgen.model import Run
from reportgen.readers import read_run
from reportgen.cli import section_options
from reportgen.sections import execution, run_sections
from reportgen.synth import MindInsightSpec, write_mindinsight_run

from conftest import fixture_dir
from test_browser import browser, open_report  # noqa: F401 - pytest fixtures (the #69 click test)

ASCEND = ("ascend", "msinsight", "test", "data", "pytorch", "text", "level1")
KINETO = ("kineto", "hta_tests_data", "tests", "data", "trace_filter")


def _outcome(path):
    run = read_run(path)
    (out,) = run_sections(run, only=["execution"])
    assert out.status == "ok", out.reason
    return run, out


def _marey_step_param(fig):
    return [p for p in fig.spec.get("params", []) if p["name"] == "step"]


def test_mindinsight_time_overview_equals_hccl_means(pp2x4):
    run, out = _outcome(pp2x4)
    ov = out.analysis.tables["time_overview"]
    assert list(ov.columns[:5]) == ["step", "rank", "step_ms", "comm_ms", "wait_ms"]
    st = run.table("step_trace")
    assert len(ov) == len(st)  # the run's steps only: hccl_raw's step 6 has no step time and is left out
    merged = ov.merge(st[["rank", "step", "step_ms"]], on=["rank", "step"], suffixes=("", "_st"))
    assert (merged["step_ms"] == merged["step_ms_st"]).all()
    # the overview's communication is the transfer time (hccl_raw communication_cost), its wait the wait_cost
    means = run.table("mi_comm_rank_step").groupby("step")[["comm_ms", "wait_ms"]].mean()
    assert 6 in means.index and 6 not in set(ov["step"])
    for step, row in means.drop(index=6).iterrows():
        got = ov[ov["step"] == step]
        assert got["comm_ms"].nunique() == 1
        assert got["comm_ms"].iloc[0] == pytest.approx(row["comm_ms"])
        assert got["wait_ms"].iloc[0] == pytest.approx(row["wait_ms"])
    # metrics JSON contract
    doc = json.loads(metrics.dumps(metrics.build(run, [out])))
    rows = doc["sections"]["execution"]["tables"]["time_overview"]
    assert {"step", "rank", "step_ms", "comm_ms", "wait_ms"} <= set(rows[0])


def test_mindinsight_marey_stages_and_controls(pp2x4):
    run, out = _outcome(pp2x4)
    m = out.analysis.metrics
    assert m["alignment_op"] and m["alignment"] == "within stages"
    assert m["marey_marks"] <= execution.MAX_MARKS
    lanes = out.analysis.data["lanes"]
    assert lanes == sorted(lanes, key=lambda r: (run.stage_of(r), r))
    ctrl = next(c for c in out.view.controls if c.signal == "step")
    assert ctrl.signal == "step" and ctrl.default == str(m["marey_steps_shown"][0])
    assert all(isinstance(v, str) for v, _ in ctrl.options)
    marey = next(f for f in out.view.figures if f.id == "execution-marey")
    assert _marey_step_param(marey)[0]["value"] == ctrl.default
    assert m["alignment_op"] in marey.caption
    overview = next(f for f in out.view.figures if f.id == "execution-time-overview")
    # clicking a step of the time overview sets the step control, which the Marey view follows (assets/charts.js)
    assert overview.spec["usermeta"]["rg_click"] == {"field": "step", "signal": "step"}
    assert {p["name"]: p["value"] for p in overview.spec["params"]}["step"] == ctrl.default


def test_default_step_is_the_median_step_in_scope_never_warmup(pp2x4):
    run, out = _outcome(pp2x4)
    F = facts.of(run)
    assert F.warmup_steps == (1,) and F.median_step() not in F.warmup_steps
    # the median of the in-scope steps' slowest-rank times (lower middle one)
    wall = F.step_time[F.step_time["in_scope"]].groupby("step")["step_ms"].max().sort_values()
    assert F.median_step() == int(wall.index[(len(wall) - 1) // 2])
    ctrl = next(c for c in out.view.controls if c.signal == "step")
    assert ctrl.default == str(F.median_step())
    marey = next(f for f in out.view.figures if f.id == "execution-marey")
    assert _marey_step_param(marey)[0]["value"] == str(F.median_step())
    assert f"step {F.median_step()}, the median step in scope" in marey.caption


def test_time_overview_is_median_band_and_one_highlighted_rank(pp2x4):
    run, out = _outcome(pp2x4)
    F = facts.of(run)
    fig = next(f for f in out.view.figures if f.id == "execution-time-overview")
    spec = json.dumps(fig.spec, ensure_ascii=False)
    # no line per rank: the per-rank rows are drawn only for the rank the control picks
    assert '"detail"' not in spec and "datum.rank == ov_rank" in spec
    ctrl = next(c for c in out.view.controls if c.signal == "ov_rank")
    assert ctrl.default == F.slowest_rank and {v for v, _ in ctrl.options} == set(run.ranks)
    series = execution.OVERVIEW_SERIES
    assert all(name in spec for name in series)
    top = fig.spec["vconcat"][0]["layer"]
    assert any(layer.get("mark", {}).get("type") == "area" for layer in top)  # the min-max band
    # the warm-up step (2.2 s) is off the scale, which covers the steps in scope, and labelled
    domain = next(layer["encoding"]["y"]["scale"]["domain"] for layer in top if layer.get("mark", {}).get("type")
                  == "area")
    in_scope_max = F.step_time[F.step_time["in_scope"]]["step_ms"].max()
    assert in_scope_max < domain[1] < 1.5 * in_scope_max
    assert "(warm-up)" in spec and "Warm-up step 1 is off the scale" in fig.caption and "↑ median" in spec


def test_stage_lanes_have_no_rank_axis_title(pp2x4):
    run, out = _outcome(pp2x4)
    marey = next(f for f in out.view.figures if f.id == "execution-marey")
    view = charts.single_view(marey.spec)  # (in a one-view vconcat: a fit-x chart with a step height)
    ys = [layer["encoding"]["y"] for layer in view["layer"]]
    assert all(y.get("title", "missing") is None for y in ys if "axis" in y)
    # the lane height is a step per lane, so one lane per stage is a shorter chart
    assert "step" in view["height"]
    assert not charts.fit_drops(marey.spec)


def test_ascend_time_overview_and_alignment_on_allreduce():
    run, out = _outcome(fixture_dir(*ASCEND))
    ov = out.analysis.tables["time_overview"]
    ops = run.table("comm_ops").groupby(["rank", "step"])[["transit_ms", "wait_ms"]].sum()
    assert ov["comm_ms"].iloc[0] == pytest.approx(ops["transit_ms"].mean())  # transfer beside the wait
    assert ov["wait_ms"].iloc[0] == pytest.approx(ops["wait_ms"].mean())
    m = out.analysis.metrics
    assert m["alignment_op"].startswith("hcom_allReduce") and m["alignment"] == "all ranks"
    rows = out.analysis.data["marey"]
    assert set(rows["kind"]) == {"computation", "communication"}
    # the alignment op ends at the same aligned time on every rank
    first = rows[rows["key"] == m["alignment_op"]]
    assert first["rank"].nunique() == 2 and first["end_rel_ms"].max() - first["end_rel_ms"].min() < 1e-6


def test_kineto_comm_from_the_canonical_comm_ops():
    """Every family fills comm_ops (readers/comm.py): a PyTorch run's time overview sums its operations' transfer
    time per rank and step, beside the waits the matched collectives give (issue 25; it used step_time's union and
    no wait)."""
    run, out = _outcome(fixture_dir(*KINETO))
    ov = out.analysis.tables["time_overview"]
    ops = run.table("comm_ops")
    sums = ops.groupby(["rank", "step"])[["transit_ms"]].sum().groupby("step")["transit_ms"].mean()
    got = ov.groupby("step")["comm_ms"].first()
    assert got.to_dict() == pytest.approx(sums.reindex(got.index).to_dict())
    assert out.analysis.metrics["alignment_op"].startswith("ncclKernel")


def test_overview_communication_and_wait_never_count_one_time_twice():
    """comm_per_rank_step: transfer = transit where known, else op time minus the known wait, else the op time."""
    ops = pd.DataFrame({"rank": [0, 0, 1, 1, 2], "step": [1, 1, 1, 1, 1],
                        "elapse_ms": [10.0, 4.0, 10.0, 6.0, 5.0], "transit_ms": [3.0, np.nan, np.nan, np.nan, np.nan],
                        "wait_ms": [7.0, 1.0, 2.0, np.nan, np.nan]})
    got = execution.comm_per_rank_step(ops).set_index("rank")
    assert got.loc[0, "comm_ms"] == pytest.approx(3.0 + 3.0) and got.loc[0, "wait_ms"] == pytest.approx(8.0)
    assert got.loc[1, "comm_ms"] == pytest.approx(8.0 + 6.0) and got.loc[1, "wait_ms"] == pytest.approx(2.0)
    assert got.loc[2, "comm_ms"] == pytest.approx(5.0) and np.isnan(got.loc[2, "wait_ms"])


def test_1024_ranks_stays_within_budget(tmp_path):
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=128, devices_per_host=8, steps=3, with_hccl=False))
    run, out = _outcome(tmp_path)
    m = out.analysis.metrics
    assert len(out.analysis.tables["time_overview"]) == 1024 * 3
    assert m["marey_marks"] <= execution.MAX_MARKS
    assert m["marey_lanes"] <= execution.MAX_LANES and m["marey_trim"]["lanes_sampled"]
    assert m["alignment_op"]
    marey = next(f for f in out.view.figures if f.id == "execution-marey")
    assert "ranks drawn" in marey.caption  # says it was trimmed
    sizes = [len(json.dumps(f.spec)) for f in out.view.figures if f.id != "drill-rank-any"]
    # the Marey figure is bounded by MAX_MARKS (10,000 marks of ~90 bytes: every step drawn, each its share)
    assert sum(sizes) < 1_000_000, sizes
    # the rank picker holds every rank (issue 27 #21): its own budget, short rows (drilldown.py "Page budget")
    picker = next(f for f in out.view.figures if f.id == "drill-rank-any")
    assert len(json.dumps(picker.spec)) < 400_000


def test_unavailable_names_the_files():
    run = Run(name="empty", source_format="kineto", source_path="/nowhere", ranks=[0])
    (out,) = run_sections(run, section_options(run), only=["execution"])  # the registry's provenance, as the CLI
    assert out.status == "unavailable"
    assert "step_trace" in out.reason and "trace_view.json" in out.reason


def test_marey_zoom_and_stage_collapse(pp2x4):
    run = read_run(pp2x4)
    (o,) = run_sections(run, only=["execution"])
    fig = next(f for f in o.view.figures if f.id.startswith("execution-marey") or "marey" in f.id)
    spec = json.dumps(fig.spec)
    assert '"bind": "scales"' in spec and "marey_view" in spec
    assert {c.signal for c in o.view.controls} >= {"step", "marey_view"}
    rows = [r for v in fig.spec["datasets"].values() for r in v if "lane_order" in r]
    assert {r["stage"] for r in rows} == {1, 2} and "stage_lane" in spec


def test_occurrence_keys_number_each_op_per_rank_in_start_order():
    """The key the Marey alignment and the merged timeline export match between ranks: ``<op> #<n>``, the n-th
    occurrence within the rank's step, with the step trace's stream prefix dropped (one rule, execution.py)."""
    from reportgen.sections.execution import match_names, occurrence_keys

    names = pd.Series(["stream_3_1_AllReduce-op1", "MatMul-op2", "stream_5_9_AllReduce-op1", "AllReduce-op1",
                       "MatMul-op2"])
    rank = pd.Series([0, 0, 0, 1, 1])
    assert occurrence_keys(match_names(names), [rank]).tolist() == [
        "AllReduce-op1 #1", "MatMul-op2 #1", "AllReduce-op1 #2", "AllReduce-op1 #1", "MatMul-op2 #1"]
    assert occurrence_keys(pd.Series([], dtype=object), [pd.Series([], dtype="int64")]).empty
    rng = np.random.default_rng(0)  # the keys as texts of (name, n) pairs, whatever the index
    match = pd.Series(rng.choice(["a", "b", "c-op1"], 200), index=rng.permutation(200) + 9)
    by = pd.Series(rng.integers(0, 3, 200), index=match.index)
    n = match.groupby([by, match], sort=False).cumcount().add(1)
    pd.testing.assert_series_equal(occurrence_keys(match, [by]), match + " #" + n.astype(str), check_dtype=False)


# --------------------------------------------------------------------------- op classes and unknown waits (issue 25)


def _tiny_run(classes: list[str], comm_ops: pd.DataFrame | None = None) -> Run:
    """Two ranks, one step of 10 ms; on each rank one interval per class in ``classes`` (2 ms each, in turn)."""
    rows = []
    for r in (0, 1):
        for i, k in enumerate(classes):
            rows.append({"rank": r, "step": 1, "start_ms": 2.0 * i, "end_ms": 2.0 * i + 2.0, "kind": k,
                         "op_class": "communication" if k == "receive" else k, "name": f"{k}-op{i}",
                         "stream": "s", "source": "trace"})
    run = Run(name="t", source_format="test", source_path="/x", ranks=[0, 1], steps=[1])
    run.tables["device_timeline"] = pd.DataFrame(rows)
    run.tables["trace_steps"] = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "start_ms": [0.0, 0.0],
                                              "end_ms": [10.0, 10.0]})
    run.tables["step_time"] = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "step_ms": [10.0, 10.0]})
    if comm_ops is not None:
        run.tables["comm_ops"] = comm_ops
    return run


def test_marey_draws_wait_and_other_as_their_own_class():
    run = _tiny_run(["compute", "communication", "wait", "other", "memcpy"])
    a = execution.analyze(run)
    rows = a.data["marey"]
    kinds = rows.groupby("op")["kind"].first().to_dict()
    assert kinds == {"compute-op0": "computation", "communication-op1": "communication", "wait-op2": "wait",
                     "other-op3": "other", "memcpy-op4": "computation"}
    fig = next(f for f in execution.present(a).figures if f.id == "execution-marey")
    assert "wait (waiting for a peer)" in fig.caption and "other (not classified" in fig.caption
    spec = json.dumps(fig.spec)
    assert '"domain": ["computation", "communication", "wait", "other"]' in spec


def test_unknown_wait_is_never_zero():
    """comm_ops whose ops carry no wait (Level0 from trace_view): the step's wait is unknown (NaN), said so, never
    0 ms; a rank and step with a recorded wait keeps its sum."""
    ops = pd.DataFrame({"rank": [0, 0, 1], "step": [1, 1, 1], "elapse_ms": [1.0, 2.0, 4.0],
                        "wait_ms": [float("nan"), float("nan"), 0.5]})
    per = execution.comm_per_rank_step(ops).set_index("rank")
    assert per.loc[0, "comm_ms"] == 3.0 and pd.isna(per.loc[0, "wait_ms"]) and per.loc[1, "wait_ms"] == 0.5
    run = _tiny_run(["compute", "communication"], ops.assign(wait_ms=float("nan")))
    a = execution.analyze(run)
    ov = a.tables["time_overview"]
    assert ov["wait_ms"].isna().all() and ov["rank_wait_ms"].isna().all()
    assert "communication.json" not in a.metrics["time_overview_source"]
    assert "unknown" in a.metrics["time_overview_source"]
    fig = next(f for f in execution.present(a).figures if f.id == "execution-time-overview")
    assert "Waiting is unknown in this data" in fig.caption
    spec = json.dumps(fig.spec)
    assert '"wait_text": "unknown"' in spec and "Waiting (sum over operations), mean over ranks" not in spec


def test_every_demo_step_is_drawn_and_selectable(tmp_path):
    """#69: the demo's 8 steps (~800 marks each) used to stop at the 6,000-mark budget after 6 steps, so a click on
    step 8 in the time overview found no such step in the Marey view. Each step now has its share of the budget."""
    from reportgen.demo import demo_spec
    write_mindinsight_run(tmp_path / "demo", demo_spec())
    run, out = _outcome(tmp_path / "demo")
    m = out.analysis.metrics
    overview_steps = {int(s) for s in out.analysis.tables["time_overview"]["step"]}
    assert set(m["marey_steps_shown"]) == overview_steps and len(overview_steps) == 8
    assert m["marey_trim"]["steps_left_out"] == 0 and m["marey_marks"] <= execution.MAX_MARKS
    per_step = out.analysis.data["marey"].groupby("step").size()
    assert (per_step > 0).all() and len(per_step) == 8
    control = next(c for c in out.view.controls if c.signal == "step")
    assert {int(v) for v, _ in control.options} == overview_steps  # the overview offers what the Marey view holds


def test_step_budget_merges_then_samples_lanes_keeping_computation():
    s = pd.DataFrame({"rank": [0, 0, 0, 1, 1], "kind": ["communication", "computation", "computation",
                                                         "communication", "computation"],
                      "start": [0.0, 1.0, 3.0, 0.0, 1.0], "end": [1.0, 2.0, 6.0, 1.0, 1.5]})
    s = s.assign(op="x", end_ms=s["end"])
    trimmed = {"computation_thinned": 0, "lanes_sampled": False}
    got, cost = execution._fit_step(s, 6, trimmed)  # rank 0's two adjacent kernels become one block: it fits
    assert cost == 6 and trimmed["computation_thinned"] == 0 and trimmed["adjacent_merged"] == 2
    comp = got[got["kind"] == "computation"]
    assert sorted(comp["rank"]) == [0, 1] and float(comp.loc[comp["rank"] == 0, "end"].iloc[0]) == 6.0
    three = pd.concat([s, pd.DataFrame({"rank": [2], "kind": ["communication"], "start": [0.0], "end": [1.0],
                                        "op": "x", "end_ms": [1.0]})])
    got, cost = execution._fit_step(three, 4, trimmed)  # communication alone is over: two lanes of three
    assert trimmed["lanes_sampled"] and sorted(got["rank"].unique()) == [0, 2] and cost <= 4
    assert execution.step_budget(8) == execution.MAX_MARKS // 8
    assert execution.step_budget(1) == execution.MAX_STEP_MARKS
    # the default step takes more than its even share only when it needs it; the others share what it leaves
    even = execution.step_budget(20)
    assert execution.first_step_budget(20, even - 10) == even
    big = execution.first_step_budget(20, 10**6)
    assert big == int(execution.MAX_MARKS * execution.DEFAULT_STEP_SHARE)
    assert big + 19 * execution.rest_budget(20, big) <= execution.MAX_MARKS
    assert execution.rest_budget(8, execution.MAX_MARKS // 8 - 100) >= execution.MAX_MARKS // 8


def _groupby_merge(s: pd.DataFrame, new: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(sizes, max end, max end_ms) of each block of ``s`` starting where ``new`` is True: the groupby form the merges
    once took."""
    g = s.reset_index(drop=True).groupby(pd.Series(np.cumsum(new)))
    return g.size().to_numpy(), g["end"].max().to_numpy(), g["end_ms"].max().to_numpy()


@pytest.mark.parametrize("seed", range(6))
def test_marey_merges_take_block_maxima_as_groupby_did_without_an_array_key(seed, monkeypatch):
    """The Marey view's merges (_merge_derived, _merge_short, _merge_adjacent) take each block's largest end as
    ``groupby(np.cumsum(new)).max()`` did (NaN skipped, a block of NaN only NaN, ints kept ints), on random steps.
    They never hand pandas an array as a groupby key: pandas tries it as a column label first and formats an array
    of up to 1,000 values into the error message (2.6 ms a call at 900 rows against 0.04 ms; 50 calls a run of
    pp2x4)."""
    import pandas.core.indexes.base as base

    get_loc = base.Index.get_loc

    def no_array(self, key):
        assert not isinstance(key, np.ndarray), "an array key reached Index.get_loc"
        return get_loc(self, key)

    monkeypatch.setattr(base.Index, "get_loc", no_array)
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 400))
    start = np.round(rng.uniform(0, 50, n), 1)
    end = start + np.round(rng.exponential(0.3, n), 1)
    if seed % 2:
        end[rng.random(n) < 0.2] = np.nan
    s = pd.DataFrame({"rank": rng.integers(0, 3, n), "step": 1, "op": [f"op{i}" for i in range(n)],
                      "kind": rng.choice(["computation", "communication", "wait"], n), "start": start, "end": end,
                      "derived": rng.random(n) < 0.3})
    s["end_ms"] = s["end"] if seed % 3 else s["end"].fillna(-1).astype(np.int64)  # ints: kept ints
    got, merged = execution._merge_derived(s, 0.5)
    g = s[s["derived"]].sort_values(["rank", "start"], kind="stable")
    if len(g):
        new = np.r_[True, (g["start"].to_numpy()[1:] - g["end"].to_numpy()[:-1] >= 0.5)
                    | (g["rank"].to_numpy()[1:] != g["rank"].to_numpy()[:-1])]
        size, end_max, end_ms_max = _groupby_merge(g, new)
        blocks = got.iloc[len(s) - len(g):]
        np.testing.assert_array_equal(blocks["end"].to_numpy(), end_max)
        np.testing.assert_array_equal(blocks["end_ms"].to_numpy(), end_ms_max)
        assert blocks["end_ms"].dtype == s["end_ms"].dtype and merged == len(g) - len(blocks)
    got, merged = execution._merge_adjacent(s)
    o = s.sort_values(["rank", "start"], kind="stable")
    kind, rank = o["kind"].to_numpy(dtype=object), o["rank"].to_numpy()
    comm = kind == "communication"
    new = np.r_[True, (rank[1:] != rank[:-1]) | (kind[1:] != kind[:-1]) | comm[1:] | comm[:-1]]
    size, end_max, end_ms_max = _groupby_merge(o, new)
    if not new.all():
        np.testing.assert_array_equal(got["end"].to_numpy(), end_max)
        np.testing.assert_array_equal(got["end_ms"].to_numpy(), end_ms_max)
        assert merged == int(size[size > 1].sum())
    short = s.assign(kind="computation", derived=False, end=s["end"].fillna(s["start"]))
    got, merged = execution._merge_short(short, 0.4)
    g = short[(short["end"] - short["start"]) < 0.4].sort_values(["rank", "start"], kind="stable")
    if len(g) >= 2:
        rank, ends = g["rank"].to_numpy(), g["end"].to_numpy()
        new_rank = np.r_[True, rank[1:] != rank[:-1]]
        run_end = pd.Series(ends).groupby(pd.Series(np.cumsum(new_rank))).cummax().to_numpy()
        new = np.r_[True, g["start"].to_numpy()[1:] - run_end[:-1] >= 0.4] | new_rank
        size, end_max, end_ms_max = _groupby_merge(g, new)
        blocks = got.iloc[len(short) - len(g):]
        np.testing.assert_array_equal(blocks["end"].to_numpy(), end_max)
        np.testing.assert_array_equal(blocks["end_ms"].to_numpy(), end_ms_max)
        assert merged == int(size[size > 1].sum())


def test_steps_beyond_the_marey_limit_are_greyed_in_the_overview(tmp_path):
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=2, steps=execution.MAX_STEPS + 3,
                                                    with_hccl=False))
    run, out = _outcome(tmp_path)
    m = out.analysis.metrics
    assert len(m["marey_steps_shown"]) == execution.MAX_STEPS and m["marey_trim"]["steps_left_out"] == 3
    ov = next(f for f in out.view.figures if f.id == "execution-time-overview")
    assert "greyed and not selectable" in ov.caption and "3 steps" in ov.caption
    assert "in_marey" in json.dumps(ov.spec)


def test_demo_click_on_the_last_step_shows_it_in_the_marey_view(tmp_path, open_report):
    """#69 in Chromium: clicking the last step's column in the time overview selects it in the Marey view."""
    import subprocess
    import sys
    out = tmp_path / "d.html"
    subprocess.run([sys.executable, "-m", "reportgen", "demo", "-o", str(out), "-q"], check=True)
    page, log = open_report(out, vector=True)  # reads the SVG's step columns
    drawing = "() => document.querySelector('#execution-marey .rg-chart svg.marks').innerHTML"
    page.locator("#execution-marey").scroll_into_view_if_needed()
    page.wait_for_selector("#execution-marey .rg-chart[data-rendered]", state="attached")
    before = page.evaluate(drawing)
    page.locator("#execution-time-overview").scroll_into_view_if_needed()
    columns = page.evaluate("""() => Array.from(document.querySelectorAll(
        '#execution-time-overview svg .mark-rect')[0].querySelectorAll('path')).map(p => {
        const r = p.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })""")
    assert len(columns) == 8
    x, y, w, h = columns[-1]
    page.mouse.click(x + w / 2, y + h / 2)
    page.wait_for_function("() => window.reportgenCharts.signals('execution-marey').step === '8'")
    assert json.loads(page.locator("#sec-execution select[data-signal='step']").input_value()) == "8"
    assert page.evaluate("window.reportgenCharts.signals('execution-time-overview').step") == "8"
    # the Marey view draws another picture: step 8's bars (tested in Python above)
    page.wait_for_function("b => document.querySelector('#execution-marey .rg-chart svg.marks').innerHTML !== b",
                           arg=before)
    assert not log.problems(), log.problems()


def test_marey_lines_reuse_the_drilldown_lines_on_the_aligned_clock():
    """#67: the drill-down's per-rank memory / cumulative FLOPs lines (rank_step_lines) drawn in the Marey lanes: x =
    time from the rank's step start + the rank's alignment shift in that step; height = value / the line's max."""
    rows = pd.DataFrame({"rank": [0, 0, 1], "step": [5, 6, 5], "shift_ms": [2.0, 3.0, -1.0]})
    lines = pd.DataFrame({"rank": [0, 0, 1, 1, 2], "metric": ["flops_cumulative"] * 2 + ["memory_mb"] * 2 + ["x"],
                          "t_ms": [0.0, 4.0, 0.0, 1.0, 0.0], "value": [0.0, 8.0, 5.0, 10.0, 1.0]})
    got = execution.marey_lines(rows, lines, {"0": 5, "1": 5, "2": 5})
    f = got[got["rank"] == 0]
    assert f["t"].tolist() == [2.0, 6.0] and f["v"].tolist() == [0.0, 1.0] and set(f["sk"]) == {"5"}
    m = got[got["rank"] == 1]
    assert m["t"].tolist() == [-1.0, 0.0] and m["v"].tolist() == [0.5, 1.0]
    assert set(got["rank"]) == {0, 1}  # rank 2: not drawn in the Marey view
    assert execution.marey_lines(rows, lines, {"0": 6})["t"].tolist() == [3.0, 7.0]  # the shift of the lines' step
    assert execution.marey_lines(rows, None, {"0": 5}) is None


def test_ascend_marey_draws_memory_and_flops_lines():
    from reportgen import charts
    run = read_run(fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "text", "level1"))
    (out,) = run_sections(run, only=["execution"])
    fig = next(f for f in out.view.figures if f.id == "execution-marey")
    text = json.dumps(fig.spec)
    assert "Memory in use (lane" in text and "Cumulative FLOPs (lane" in text and '"yOffset"' in text
    assert "Lines in the lanes of ranks 0" in fig.caption
    charts.validate(fig.spec)


def test_one_stage_expanded_among_union_lanes(report_cache, open_report, pp2x4):
    """#66: 'Stage s per rank, the others one per stage': that stage's ranks get their own lanes, the other stage one
    union lane (so the chart's height lies between one lane per rank and one lane per stage)."""
    run = read_run(pp2x4)
    (o,) = run_sections(run, only=["execution"])
    control = next(c for c in o.view.controls if c.signal == "marey_view")
    assert [v for v, _ in control.options] == ["ranks", "stages", "stage:1", "stage:2"]
    page, log = open_report(report_cache.get(pp2x4), charts="scrolled")  # the Marey view drawn when scrolled to
    page.locator("#execution-marey").scroll_into_view_if_needed()
    page.wait_for_selector("#execution-marey .rg-chart[data-rendered]", state="attached")  # drawn once scrolled to
    select = page.locator("#sec-execution select[data-signal='marey_view']")
    heights = {}
    for view in ("ranks", "stage:1", "stages"):
        select.select_option(json.dumps(view))
        page.wait_for_function("v => window.reportgenCharts.signals('execution-marey').marey_view === v", arg=view)
        page.wait_for_function("() => document.querySelector('#execution-marey canvas, #execution-marey svg')")
        page.wait_for_timeout(200)
        box = page.locator("#execution-marey canvas, #execution-marey svg").first.bounding_box()
        heights[view] = box["height"]
    assert heights["ranks"] > heights["stage:1"] > heights["stages"], heights
    assert not log.problems(), log.problems()
