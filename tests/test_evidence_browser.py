"""Evidence one click away, the time overview driving the Marey view, and --static pages, in real Chromium.

* Every finding of the pp2x4, Ascend st/level2 and gloo ddp4 reports: following its "See the chart" link shows the
  chart with the finding's evidence metric selected (the section's controls and the chart's Vega signals, read
  back after the click) and the finding's ranks highlighted where the chart can.
* Clicking a step of the execution time overview selects it in the Marey view.
* ``--static``: every SVG text lies inside its SVG, and no caption speaks of controls, zooming or clicking.

Browser and fixtures as in tests/test_browser.py (skipped without them, failing under CI).
"""

from __future__ import annotations

import json
import re

import pytest

from reportgen.cli import main

from conftest import fixture_dir
from test_browser import _assert_charts_drawn, _assert_drawn_charts_ok, browser, open_report  # noqa: F401

FIXTURES = {
    "pp2x4": ("mindinsight", "mi_cluster_propose_pp2x4"),
    "level2": ("ascend", "msinsight", "test", "st", "level2"),
    "gloo_ddp4": ("generated", "torch_gloo_ddp4_baseline"),
    "demo": None,
}

#: a finding's evidence metric -> the metric its chart must then show (a control's value): a share shows the
#: time it is a share of
SHOWN_METRIC = {
    "between_stage_share_ratio": {"receive_only_ms", "receive_incl_batch_ms"},
    "within_stage_share_ratio": {"comm_not_overlapped_exclude_receive_ms",
                                 "comm_not_overlapped_exclude_receive_incl_batch_ms"},
    "free_share_ratio": {"free_ms"},
    "comm_share_ratio": {"comm_not_overlapped_ms"},
}
#: evidence metrics shown by a chart that has one metric only (no control): that chart
FIXED_CHART = {"small_op_ratio": "communication-sizes", "flops_per_rank": "flops-stages",
               "flops_per_s": "flops-bars",
               # the domain chart shows every part of the chosen group's members (the view chooses the group)
               "exposed_comm_share_ratio": "domains-members", "computation_spread_ratio": "domains-members",
               "free_spread_ratio": "domains-members", "slowest_link_gbps": "domains-members",
               "median_bandwidth_gbps": "domains-members",
               # issue 26: a diagnosed cause opens who-waits-for-whom or the critical path (one metric each)
               # the grid of every rank's peak against its capacity
               "peak_ratio": "memory-grid", "peak_mb": "memory-grid",
               # (an input-bound rank: the heatmap of the run's input wait, every rank: issue 28)
               "stake_ms": ("waits-matrix", "waits-path", "trajectory-heatmap")}

STATE_JS = """(view) => {
  const fig = document.getElementById(view.figure);
  const sec = fig.closest('section');
  const selects = {}, defaults = {};
  sec.querySelectorAll('select[data-signal]').forEach(s => {
    selects[s.dataset.signal] = JSON.parse(s.value);
    const d = Array.from(s.options).find(o => o.defaultSelected) || s.options[0];
    defaults[s.dataset.signal] = d ? JSON.parse(d.value) : null;
  });
  const r = fig.getBoundingClientRect();
  const bar = sec.querySelector('.rg-controls');
  const barBottom = bar && !bar.contains(fig) ? bar.getBoundingClientRect().bottom : 0;
  const rows = fig.classList.contains('rg-table')
    ? Array.from(fig.querySelectorAll('tbody tr[data-i]')).filter(tr => !tr.hidden).map(tr => Number(tr.dataset.i))
    : null;
  return {selects, defaults, signals: window.reportgenCharts.signals(view.figure),
          target: fig.classList.contains('rg-target'), visible: r.top >= 0 && r.top < window.innerHeight,
          covered: r.top < barBottom - 1, hash: location.hash, rows,
          cut: Array.from(fig.querySelectorAll('.rg-chart')).some(c => c.scrollWidth > c.clientWidth + 1
                 || c.getBoundingClientRect().right > r.right + 1)};
}"""
#: the fields of a chart's marks that name a rank, and the pairs that name a link (source, destination)
RANK_FIELDS = ("rank", "src_rank", "dst_rank", "src", "dst")
LINK_FIELDS = (("src_rank", "dst_rank"), ("src", "dst"))


def _drawn(marks: list) -> tuple[set, set, bool]:
    """(ranks, links, has rank fields) of a chart's drawn marks (window.reportgenCharts.marks)."""
    ranks, links, has = set(), set(), False
    for m in marks:
        if not isinstance(m, dict):
            continue
        for k in RANK_FIELDS:
            if isinstance(m.get(k), (int, float)):
                ranks.add(int(m[k]))
                has = True
        if isinstance(m.get("rank"), (int, float)) and isinstance(m.get("rank_last"), (int, float)):
            ranks.update(range(int(m["rank"]), int(m["rank_last"]) + 1))  # a row of grouped ranks (charts.bin_ranks)
        for a, b in LINK_FIELDS:
            if isinstance(m.get(a), (int, float)) and isinstance(m.get(b), (int, float)):
                links.add((int(m[a]), int(m[b])))
    return ranks, links, has


def _assert_proves(page, doc, f, view, state, what):
    """Issue 28 #1: the view shows what the finding names, with its number, under nothing, in the state the finding
    was judged in (controls the view does not set are at their defaults)."""
    assert not state["covered"], f"{what}: under the sticky control bar"
    assert not state["cut"], f"{what}: the chart is wider than its box (what it names may be cut off)"
    for key, default in state["defaults"].items():
        if key not in view["signals"]:
            assert state["selects"][key] == default, f"{what}: control {key} kept from an earlier view"
    if state["rows"] is not None:  # a table's view: filtered to the rows it quotes, each holding the finding's value
        want = view.get("rows") or {}
        assert want and state["rows"], f"{what}: a table view names and shows its rows"
        table = next(t for s in doc["sections"].values() for k, t in (s.get("tables") or {}).items()
                     if isinstance(t, list) and t and all(c in t[0] for c in want)
                     and any(all(r.get(c) == v for c, v in want.items()) for r in t))
        row = next(r for r in table if all(r.get(c) == v for c, v in want.items()))
        metric = f["evidence"]["metric"]
        if metric in row:
            assert row[metric] == pytest.approx(f["evidence"]["value"], rel=1e-9), what
        return
    marks = page.evaluate("(f) => window.reportgenCharts.marks(f, 200000)", view["figure"])
    ranks, links, has = _drawn(marks)
    if has:
        assert set(f["ranks"]) <= ranks, f"{what}: ranks {sorted(set(f['ranks']) - ranks)} not drawn"
    for link in f.get("links") or []:
        if links:
            assert tuple(link) in links, f"{what}: link {link} not drawn"
            metric = f["evidence"]["metric"]
            values = [m[metric] for m in marks if isinstance(m, dict) and metric in m
                      and (m.get("src_rank", m.get("src")), m.get("dst_rank", m.get("dst"))) == tuple(link)]
            if values:
                assert values[0] == pytest.approx(f["evidence"]["value"], rel=1e-9), f"{what}: the link's value"


_GENERATED: dict[str, object] = {}


def _mi1024():
    """A generated MindInsight run of 1024 ranks (128 hosts x 8, 4 stages, 3 steps, one slow rank): the page samples
    ranks, steps and groups, and must keep every one a finding names (issue 28 #4). 3 steps, not 5: the same finding,
    Marey lane sampling and operator-table budget (no step left out in either), a quarter less to build."""
    import tempfile
    from pathlib import Path

    from reportgen.synth.mindinsight import MindInsightSpec, write_mindinsight_run
    if "mi1024" not in _GENERATED:
        import atexit
        import shutil
        tmp = tempfile.mkdtemp(prefix="rg-mi1024-")
        atexit.register(shutil.rmtree, tmp, True)  # 50 MB: not left in /tmp after every suite run
        root = Path(tmp) / "run"
        write_mindinsight_run(root, MindInsightSpec(hosts=128, devices_per_host=8, stages=4, steps=3,
                                                    slow_ranks={300: 1.3}))
        _GENERATED["mi1024"] = root
    return _GENERATED["mi1024"]


FIXTURES["mi1024"] = _mi1024


def _report(cache, name, *extra):
    src = FIXTURES[name]
    out = cache.get("demo" if src is None else src() if callable(src) else fixture_dir(*src), *extra)
    return out, json.loads(out.with_suffix(".json").read_text())


def _expected_metrics(f: dict) -> set[str]:
    ev = f["evidence"]
    metric = ev["metric"]
    if metric == "wait_share_ratio":
        return {ev["wait_metric"]}
    return SHOWN_METRIC.get(metric, {metric})


@pytest.mark.parametrize("name", list(FIXTURES))
def test_each_finding_opens_its_evidence(report_cache, open_report, name):
    out, doc = _report(report_cache, name)
    findings = doc["findings"]
    assert findings or name == "gloo_ddp4", f"{name} raised no finding"  # the clean gloo run: none (issue 26)
    # as a reader who clicks the findings at once: each view's chart is drawn when its link scrolls to it
    page, log = open_report(out, charts="scrolled")
    links = page.locator("#rg-findings a[data-view]:not(.rg-compare-link)")
    assert links.count() == len(findings)
    # findings are listed once: their sections link to the list instead of repeating them
    assert page.locator("section.rg-section .rg-finding").count() == 0
    assert page.locator("section.rg-section .rg-section-findings a[href^='#finding-']").count() >= min(1, len(findings))
    charted = set()
    for i, f in enumerate(findings):
        link = links.nth(i)
        view = json.loads(link.get_attribute("data-view"))
        assert {k: v for k, v in view.items() if k != "row_match"} == f["view"]
        page.evaluate("delete document.documentElement.dataset.viewShown")
        link.click()
        page.wait_for_function("f => document.documentElement.dataset.viewShown === f", arg=view["figure"])
        state = page.evaluate(STATE_JS, view)
        what = f"{name} finding {f['id']} -> {view['figure']}"
        assert state["target"] and state["visible"], what
        assert state["hash"] == f"#evidence-{i + 1}", what
        _assert_proves(page, doc, f, view, state, what)
        if state["rows"] is not None:
            continue
        signals = state["signals"]
        assert signals is not None, f"{what}: the chart was not drawn"
        charted.add(view["figure"] + "-spec")
        # every value the view sets is what the section's control and the chart now hold
        for key, value in view["signals"].items():
            if key in state["selects"]:
                assert state["selects"][key] == value, f"{what}: control {key}"
            if key in signals:
                assert signals[key] == value, f"{what}: signal {key}"
        if f["ranks"] and "focus_ranks" in signals:
            assert sorted(signals["focus_ranks"]) == sorted(f["ranks"]), what
        # the selected metric is the finding's evidence metric
        metric = f["evidence"]["metric"]
        if metric in FIXED_CHART:
            want = FIXED_CHART[metric]
            assert view["figure"] in (want if isinstance(want, tuple) else (want,)), what
        else:
            shown = {v for k, v in view["signals"].items()
                     if isinstance(v, str) and (k in state["selects"] or k in signals)}
            assert _expected_metrics(f) & shown, f"{what}: shows {shown}, evidence {metric}"
    # every chart a view showed is drawn, and none drawn failed
    assert charted <= {c["id"] for c in _assert_drawn_charts_ok(page)}
    assert not log.problems(), log.problems()


def test_the_cause_finding_opens_its_critical_path(tmp_path, open_report):
    """A late rank (issue 26): the report leads with it, and its link opens the critical path of the median step
    (its own work holds the step) with the rank highlighted; the page's first words are the cause."""
    from reportgen.synth.ascend import AscendSpec, write_ascend_run

    run = tmp_path / "run"
    write_ascend_run(run, AscendSpec(hosts=1, devices_per_host=4, stages=1, steps=3, slow_rank=1))
    out, metrics = tmp_path / "r.html", tmp_path / "r.json"
    assert main([str(run), "-o", str(out), "--json", str(metrics), "--quiet"]) == 0
    findings = json.loads(metrics.read_text())["findings"]
    f = findings[0]
    # the generated Ascend text run has kernel_details.csv: since its device timeline is built from it the cause is
    # the slow compute itself (slow_rank_compute, who-waits-for-whom), before it was "arrives late" (critical path)
    assert f["cause"] and f["ranks"] == [1] and f["view"]["figure"] in ("waits-path", "waits-matrix")
    assert any(s["id"] == "slow_device_compute" for s in f["symptoms"])  # the old rule's finding, as its symptom
    page, log = open_report(out, charts="scrolled")  # the link draws the chart of the view it shows
    assert page.locator("#rg-verdict").inner_text().startswith("Cause:")
    page.locator("#rg-verdict a[data-view]").click()
    page.wait_for_function("f => document.documentElement.dataset.viewShown === f", arg=f["view"]["figure"])
    state = page.evaluate(STATE_JS, f["view"])
    assert state["target"] and state["visible"]
    assert not log.problems(), log.problems()


def test_time_overview_click_selects_the_step_of_the_marey_view(report_cache, open_report):
    out, doc = _report(report_cache, "pp2x4")
    page, log = open_report(out, vector=True)  # reads the SVG's step columns
    fig = page.locator("#execution-time-overview")
    fig.scroll_into_view_if_needed()
    select = page.locator("#sec-execution select[data-signal='step']")
    facts = doc["facts"]
    assert json.loads(select.input_value()) == str(doc["sections"]["execution"]["metrics"]["median_step"])
    assert json.loads(select.input_value()) not in [str(s) for s in facts["warmup_steps"]]
    before = page.evaluate("window.reportgenCharts.signals('execution-marey').step")
    assert before == json.loads(select.input_value())
    # the step columns of the top panel (one rect per step, in step order), click another step's column
    columns = page.evaluate("""() => Array.from(document.querySelectorAll(
        '#execution-time-overview svg .mark-rect')[0].querySelectorAll('path')).map(p => {
        const r = p.getBoundingClientRect(); return [r.x, r.y, r.width, r.height]; })""")
    steps = sorted(int(s) for s in facts["steps_listed"])
    target = next(s for s in steps if str(s) != before)
    x, y, w, h = columns[steps.index(target)]
    page.mouse.click(x + w / 2, y + h / 2)
    page.wait_for_function("s => window.reportgenCharts.signals('execution-marey').step === s", arg=str(target))
    assert json.loads(select.input_value()) == str(target)
    assert page.evaluate("window.reportgenCharts.signals('execution-time-overview').step") == str(target)
    # one lane per stage: fewer lanes, a shorter chart
    height = page.locator("#execution-marey svg").first.bounding_box()["height"]
    page.locator("#sec-execution select[data-signal='marey_view']").select_option('"stages"')
    page.wait_for_function("() => window.reportgenCharts.signals('execution-marey').marey_view === 'stages'")
    page.wait_for_timeout(200)
    assert page.locator("#execution-marey svg").first.bounding_box()["height"] < height
    assert not log.problems(), log.problems()


TEXT_OUTSIDE_JS = """() => { const bad = [];
  document.querySelectorAll('details.rg-finding-chart').forEach(d => { d.open = true; });
  document.querySelectorAll('figure svg, .rg-finding-chart svg').forEach(svg => {
    const r = svg.getBoundingClientRect();
    svg.querySelectorAll('text').forEach(t => {
      if (!t.textContent.trim()) return;
      const q = t.getBoundingClientRect();
      if (q.left < r.left - 0.5 || q.right > r.right + 0.5 || q.top < r.top - 0.5 || q.bottom > r.bottom + 0.5)
        bad.push((svg.closest('figure') || svg.closest('li')).id + ': ' + t.textContent);
    });
  });
  return bad; }"""
#: words of captions about the page's interactions ("the selected step" is the default view the static page names)
INTERACTIVE = re.compile(r"\b(controls?|select|selector|switch\w*|sort with|drag|scroll|zoom\w*|\w*click\w*|hover|"
                         r"pick|picks|picked|tooltips?|filters?)\b", re.I)


@pytest.mark.parametrize("name", ["pp2x4", "level2"])
def test_static_svg_text_inside_and_captions_for_paper(report_cache, browser, name):  # noqa: F811
    out, doc = _report(report_cache, name, "--static")
    html = out.read_text()
    assert "<script" not in html.lower()
    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = ctx.new_page()
        page.goto(out.resolve().as_uri())
        # each chart twice (render.static_svg): the light page shows the light one
        assert page.locator("figure .rg-scheme-light svg").count() == page.locator("figure").count() > 0
        assert page.locator("figure .rg-scheme-dark svg").count() == page.locator("figure").count()
        assert page.evaluate(TEXT_OUTSIDE_JS) == []
        # each finding whose view sets a control carries its chart so set (no script can set it up here)
        for i, f in enumerate(doc["findings"]):
            chosen = {k: v for k, v in f["view"]["signals"].items() if not k.startswith("focus_")}
            if chosen and f["view"]["figure"] in ("trajectory-heatmap", "overlap-heatmap"):
                assert page.locator(f"#finding-{i + 1} .rg-finding-chart .rg-scheme-light svg").count() == 1, f["id"]
        captions = page.locator("figcaption .rg-fig-caption, .rg-table-caption").all_inner_texts()
        talk = [c for c in captions if INTERACTIVE.search(c)]
        assert not talk, talk
        # no placeholder box under a static chart: the chart box is as tall as its SVG
        gaps = page.evaluate("""() => Array.from(document.querySelectorAll('.rg-static')).map(el =>
            el.getBoundingClientRect().height - el.querySelector('svg').getBoundingClientRect().height)""")
        assert max(gaps) < 1, gaps
        if name == "pp2x4":  # the static Marey view shows the median step, not the 2.2 s warm-up step
            median = doc["sections"]["execution"]["metrics"]["median_step"]
            assert f"shown first: step {median}" in page.locator("#execution-marey figcaption").inner_text()
            assert median not in doc["facts"]["warmup_steps"]
    finally:
        ctx.close()


def test_straggler_finding_opens_the_rank_comparison(report_cache, open_report, tmp_path_factory):
    """Issue 17: a straggler finding's second link sets the rank comparison's two ranks and shows its chart."""
    from reportgen.synth.kineto import KinetoSpec, write_kineto_run
    run = tmp_path_factory.mktemp("straggler")
    write_kineto_run(run, KinetoSpec(hosts=1, devices_per_host=8, stages=2, steps=3, slow_ranks={5: 1.4}))
    out = report_cache.get(run, "--compare-ranks", "0,1")
    doc = json.loads(out.with_suffix(".json").read_text())
    linked = [f for f in doc["findings"] if f.get("compare")]
    assert linked
    page, log = open_report(out, charts="scrolled")  # the link draws the chart of the view it shows
    link = page.locator("#rg-findings a.rg-compare-link").first
    a, b = linked[0]["compare"]
    assert link.inner_text() == f"Compare rank {a} with rank {b}"
    page.evaluate("delete document.documentElement.dataset.viewShown")
    link.click()
    page.wait_for_function("() => document.documentElement.dataset.viewShown === 'compare-chart'")
    selects = page.evaluate("""() => Object.fromEntries(Array.from(
        document.querySelectorAll('#sec-compare select[data-signal]')).map(s => [s.dataset.signal, JSON.parse(s.value)]))""")
    assert selects == {"rank_a": a, "rank_b": b}
    signals = page.evaluate("window.reportgenCharts.signals('compare-chart')")
    assert (signals["rank_a"], signals["rank_b"]) == (a, b)
    assert not log.problems(), log.problems()


def test_a_1024_rank_page_stays_small_and_keeps_every_rank_a_click_away(report_cache, open_report):
    """Issue 28 #8: a 1,024-rank page was 53-69k elements once drawn (tables listing 100 rows each, one SVG element
    per mark, 1,000-option rank controls). Bounds, never times: at most 20,000 elements with every chart drawn and
    every table built; charts of many marks on a canvas; tables list a page of rows; a rank control writes its
    default and the ranks findings name, and any other rank is still one link away."""
    from reportgen import render, thresholds as th
    out, doc = _report(report_cache, "mi1024")
    page, log = open_report(out)
    assert page.evaluate("document.getElementsByTagName('*').length") <= 20_000
    _assert_charts_drawn(page)
    canvas = page.evaluate("[...document.querySelectorAll('.rg-chart[data-renderer=canvas]')]"
                           ".map(el => !!el.querySelector('canvas') && !el.querySelector('svg.marks'))")
    assert canvas and all(canvas)
    listed = page.evaluate("[...document.querySelectorAll('.rg-table tbody')].map(b => b.querySelectorAll('tr[data-i]').length)")
    assert max(listed) == th.PAGE_TABLE_ROWS
    sel = page.locator("select[data-signal='drill_rank']")
    assert sel.count() == 1 and sel.get_attribute("data-options")
    assert sel.locator("option").count() < render.LAZY_OPTIONS
    written = set(sel.locator("option").evaluate_all("os => os.map(o => JSON.parse(o.value))"))
    rank = next(r for r in range(1023, 0, -1) if r not in written)
    page.evaluate("delete document.documentElement.dataset.viewShown")
    page.evaluate("r => { location.hash = '#rank-' + r; }", rank)
    page.wait_for_function("() => document.documentElement.dataset.viewShown === 'drill-rank-any'")
    assert page.evaluate("window.reportgenCharts.signals('drill-rank-any').drill_rank") == rank
    assert sel.locator("option").count() >= 1024 and sel.get_attribute("data-options") is None  # filled on use
    assert json.loads(sel.input_value()) == rank
    assert not log.problems(), log.problems()
