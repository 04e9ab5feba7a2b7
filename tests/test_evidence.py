"""Evidence views and the --static page, without a browser (tests/test_evidence_browser.py drives Chromium)."""

from __future__ import annotations

import copy
import json

import pandas as pd

from reportgen import charts, facts, render
from reportgen.report import EvidenceView, Finding

from conftest import analysed, fixture_dir


def test_finding_view_defaults_and_json():
    f = Finding("x", "low", "trajectory", "m", ranks=[3, 1], links=[[1, 5]], figure="trajectory-bars")
    assert f.view == EvidenceView("trajectory-bars")  # a figure alone is a view with no values to set
    g = Finding("x", "low", "trajectory", "m", ranks=[2],
                view=EvidenceView("trajectory-heatmap", {"heat_metric": "computing_ms"}))
    assert g.figure == "trajectory-heatmap"
    d = g.as_dict()["view"]
    assert d == {"figure": "trajectory-heatmap",
                 "signals": {"focus_ranks": [2], "focus_links": [], "heat_metric": "computing_ms"}}
    assert f.as_dict()["view"]["signals"]["focus_links"] == ["1>5"]
    json.dumps(d)


def test_focusable_highlights_ranks_and_links_and_stays_valid():
    df = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "ms": [1.0, 2.0]})
    heat = charts.to_spec(charts.Chart(df).mark_rect(stroke="white").encode(x="step:O", y="rank:O", color="ms:Q"))
    before = copy.deepcopy(heat)
    out = charts.focusable(heat)
    assert heat == before  # the section's spec is not changed
    assert [p["name"] for p in out["params"]] == ["focus_ranks"]
    enc = out["encoding"]
    assert "focus_ranks" in enc["stroke"]["condition"]["test"] and enc["stroke"]["value"] == "white"
    charts.validate(out)

    links = pd.DataFrame({"src_rank": [0, 1], "dst_rank": [1, 0], "bw": [1.0, 2.0]})
    matrix = charts.to_spec(charts.layer(charts.Chart(links).mark_rect().encode(x="dst_rank:O", y="src_rank:O",
                                                                          color="bw:Q")))
    out = charts.focusable(matrix)
    assert {p["name"] for p in out["params"]} == {"focus_links", "focus_ranks"}
    assert "focus_links" in out["layer"][0]["encoding"]["stroke"]["condition"]["test"]
    charts.validate(out)

    lines = charts.to_spec(charts.Chart(df).mark_line().encode(x="step:O", y="ms:Q", detail="rank:N"))
    assert charts.focusable(lines) is lines  # nothing to outline


def test_every_figure_of_a_report_stays_valid_with_focus(pp2x4):
    for o in analysed(pp2x4)[1]:  # conftest.analysed: the analysis test_golden.py makes (one SHARED_SCOPES group)
        for f in (o.view.figures if o.view else []):
            charts.validate(charts.focusable(f.spec))


def test_static_caption_drops_what_speaks_of_the_page():
    c = render.static_caption
    assert c("Stacked per rank. Sort with the control above.") == "Stacked per rank."
    assert c("Rows to columns; switch the metric above.") == "Rows to columns."
    assert c("One lane per rank. Drag or scroll to zoom in time, double-click to reset. Trimmed: 1.5 ms.") == \
        "One lane per rank. Trimmed: 1.5 ms."
    assert c("") == ""


def test_static_spec_measures_with_the_drawn_font_and_fixes_container_widths():
    spec = {"hconcat": [{"mark": "bar", "width": "container"}], "width": "container",
            "data": {"values": [{"width": "container"}]}, "config": {"axis": {"grid": False}}}
    out = charts.static_spec(spec)
    assert out["config"] == {"font": charts.STATIC_FONT, "axis": {"grid": False}}
    assert out["width"] == charts.STATIC_WIDTH and out["hconcat"][0]["width"] == charts.STATIC_WIDTH
    assert out["data"] == spec["data"] and spec["width"] == "container"  # data as is; the spec not changed
    mine = charts.static_spec({"config": {"font": "Serif"}})
    assert mine["config"]["font"] == "Serif"


def test_view_text_names_the_controls_a_finding_sets():
    sections = [{"figures": [{"id": "h"}], "controls": [
        {"signal": "heat_metric", "label": "Heatmap shows", "default": "step_ms",
         "options": [{"value": "step_ms", "label": "Step time"}, {"value": "computing_ms", "label": "Computing"}]},
        {"signal": "step", "label": "Step", "default": "avg", "options": [{"value": "avg", "label": "Average"}]}]}]
    view = {"figure": "h", "signals": {"heat_metric": "computing_ms", "step": "avg", "focus_ranks": [1]}}
    assert render.view_text(view, sections) == "Heatmap shows: Computing"
    assert render.view_text({"figure": "other", "signals": {}}, sections) == ""


def test_median_step_is_in_scope():
    st = pd.DataFrame({"rank": [0, 1] * 5, "step": [1, 1, 2, 2, 3, 3, 4, 4, 5, 5],
                       "step_ms": [900, 950, 100, 101, 120, 99, 98, 97, 105, 104]})
    F = facts.RunFacts(step_source="markers", step_table="step_time", steps_all=(1, 2, 3, 4, 5), warmup_steps=(1,),
                       include_warmup=False, steps=(2, 3, 4, 5),
                       step_time=st.assign(warmup=st["step"] == 1, in_scope=st["step"] != 1),
                       per_rank=pd.DataFrame(), slowest_rank=None, median_rank=None, fastest_rank=None,
                       step_ms_median=0.0, step_ms_mean=0.0)
    # slowest-rank times in scope: 2: 101, 3: 120, 4: 98, 5: 105 -> ordered 4, 2, 5, 3 -> the lower middle is 2
    assert F.median_step() == 2


def test_median_step_once_per_facts_is_the_definition():
    """median_step is kept on the facts after its first call: on random step tables (ties included) every call
    gives the lower middle of the in-scope steps by slowest-rank time, ties by step id, as computed afresh."""
    import numpy as np

    rng = np.random.default_rng(7)
    for _ in range(30):
        n_steps, n_ranks = int(rng.integers(1, 7)), int(rng.integers(1, 4))
        st = pd.DataFrame({"rank": np.tile(np.arange(n_ranks), n_steps), "step": np.repeat(np.arange(n_steps), n_ranks),
                           "step_ms": rng.integers(1, 5, n_steps * n_ranks).astype(float)})
        scope = st["step"] != 0 if n_steps > 1 else st["step"] >= 0
        F = facts.RunFacts(step_source="markers", step_table="step_time", steps_all=tuple(range(n_steps)),
                           warmup_steps=(), include_warmup=False, steps=tuple(sorted(set(st.loc[scope, "step"]))),
                           step_time=st.assign(warmup=~scope, in_scope=scope), per_rank=pd.DataFrame(),
                           slowest_rank=None, median_rank=None, fastest_rank=None, step_ms_median=0.0,
                           step_ms_mean=0.0)
        wall = st[scope].groupby("step")["step_ms"].max()
        order = sorted(wall.items(), key=lambda kv: (kv[1], kv[0]))
        want = int(order[(len(order) - 1) // 2][0])
        assert F.median_step() == want and F.median_step() == want


CAUSE_VIEWS = ("waits-path", "waits-matrix", "trajectory-heatmap")


def test_evidence_views_of_the_reference_runs():
    """Each finding's view on the three reference runs of the issue (the browser test follows the links)."""
    expect = {  # finding id -> (figure, the metric the view selects)
        "pipeline_between_stage": ("overlap-heatmap", {"receive_only_ms", "receive_incl_batch_ms"}),
        "pipeline_within_stage": ("overlap-heatmap", {"comm_not_overlapped_exclude_receive_ms",
                                                      "comm_not_overlapped_exclude_receive_incl_batch_ms"}),
        "long_free_time": ("overlap-heatmap", {"free_ms"}),
        "comm_share": ("overlap-heatmap", {"comm_not_overlapped_ms"}),
        "slow_step_interval": ("trajectory-heatmap", {"step_interval_ms"}),
        "small_packets": ("communication-sizes", set()),
        "stage_flops_imbalance": ("flops-stages", set()),
        # a link judged on the files' own rows (pp2x4) opens their table filtered to its row (issue 28); a global
        # link the matrix, or the links table where the matrix draws blocks of ranks
        "slow_link": (("communication-matrix", "communication-links-local", "communication-links"),
                      {"bandwidth_gbps"}),
        "group_exposed_comm": ("domains-members", set()),
        "group_slow_member": ("domains-members", set()),
        "group_slow_link": ("domains-members", set()),
        # issue 26: the diagnosis's causes open who-waits-for-whom or the critical path; issue 28: the one of them
        # that draws every rank the cause names (else the step heatmap), an input-bound rank its input wait
        **{k: (CAUSE_VIEWS, set()) for k in ("heavy_pipeline_stage", "comm_not_overlapped", "slow_rank_compute",
                                            "launch_bound_rank", "slow_p2p_link", "rank_arrives_late")},
        "slow_input_pipeline": (CAUSE_VIEWS, {"step_interval_ms", "preparing_ms", "dataloader_wait_ms"}),
    }
    for parts in (("mindinsight", "mi_cluster_propose_pp2x4"), ("ascend", "msinsight", "test", "st", "level2"),
                  ("generated", "torch_gloo_ddp4_baseline")):
        outs = analysed(fixture_dir(*parts))[1]  # as the CLI analyses it, once per process (test_golden's too)
        figures = {f.id for o in outs if o.view for f in o.view.figures}
        tables = {t.id for o in outs if o.view for t in o.view.tables}
        found = [f for o in outs if o.view for f in o.view.findings]
        assert found or parts[0] == "generated", parts  # the clean gloo run raises nothing (issue 26)
        for f in found:
            figure, metrics = expect[f.id]
            allowed = figure if isinstance(figure, tuple) else (figure,)
            assert f.view.figure in allowed, (parts, f.id, f.view.figure)
            if f.view.rows:  # a table's view: the table is on the page, its rows named
                assert f.view.figure in tables, (parts, f.id)
                continue
            assert f.view.figure in figures, (parts, f.id)
            chosen = {v for k, v in f.view.signals.items() if k.endswith("metric")}
            assert chosen == ({next(iter(chosen & metrics))} if metrics else set()), (parts, f.id, chosen)


def test_with_params_sets_declared_values_only():
    spec = {"params": [{"name": "heat_metric", "value": "step_ms"}, {"name": "pick", "select": "point"}],
            "mark": "rect"}
    out = render.with_params(spec, {"heat_metric": "computing_ms", "pick": 1, "other": 2})
    assert out["params"] == [{"name": "heat_metric", "value": "computing_ms"}, {"name": "pick", "select": "point"}]
    assert spec["params"][0]["value"] == "step_ms"  # not changed in place
    assert render.with_params(spec, {"heat_metric": "step_ms"}) is spec  # nothing to change: the same chart
