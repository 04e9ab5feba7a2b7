"""The charts of test_charts.py drawn by Chromium (issue 13): in light and dark, for every choice of the page's
controls, each fits its figure, no text is drawn over another text or cut at the chart's edge, and in dark mode
every chart text and line (axes, rules, whiskers, graph edges, legend symbols) has a contrast of at least 3:1
with what is behind it. Uses test_browser.py's browser."""

from __future__ import annotations

import json

import pytest
from conftest import fixture_dir
from test_browser import browser, open_report  # noqa: F401 - pytest fixtures


from test_charts import OWN_PREFIXES

#: Per figure: its box and content widths, overlapping text pairs, and texts / lines below 3:1 contrast. The
#: colour behind a text is the topmost data mark under its centre (a value written on a cell), else the chart
#: background. Grid lines are exempt (meant to be faint), and so are the outlines of filled marks. ``within``: the id
#: of a section to measure only its figures (a control's signal reaches the charts of its own section only:
#: assets/charts.js ``broadcast``), or null for the whole page.
MEASURE_JS = r"""
([prefixes, within]) => {
  const rgb = s => { const m = (s || '').match(/rgba?\(([^)]+)\)/); if (!m) return null;
    const p = m[1].split(',').map(Number); return {r: p[0], g: p[1], b: p[2], a: p.length > 3 ? p[3] : 1}; };
  const lum = c => { const f = v => { v /= 255; return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b); };
  const contrast = (a, b) => { const x = lum(a), y = lum(b);
    return (Math.max(x, y) + 0.05) / (Math.min(x, y) + 0.05); };
  const blend = (c, bg, a) => ({r: c.r * a + bg.r * (1 - a), g: c.g * a + bg.g * (1 - a), b: c.b * a + bg.b * (1 - a)});
  const alpha = (el, svg) => { let o = 1;
    for (let e = el; e && e !== svg; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity || '1');
    return o; };
  const out = [];
  const root = within ? document.getElementById(within) : document;
  for (const fig of root.querySelectorAll('figure.rg-figure')) {
    if (!prefixes.some(p => fig.id.startsWith(p))) continue;
    const el = fig.querySelector('.rg-chart'); const svg = el && el.querySelector('svg');
    const r = {id: fig.id, box: el.clientWidth, content: el.scrollWidth, overlaps: [], low: [], outside: []};
    out.push(r);
    if (!svg) continue;
    const bgEl = svg.querySelector('.background');
    let bg = bgEl ? rgb(getComputedStyle(bgEl).fill) : null;
    if (!bg || bg.a === 0) bg = rgb(getComputedStyle(document.body).backgroundColor);
    const texts = Array.from(svg.querySelectorAll('text')).filter(t => t.textContent.trim() && alpha(t, svg) > 0.05);
    const boxes = texts.map(t => t.getBoundingClientRect());
    const frame = svg.getBoundingClientRect();
    texts.forEach((t, i) => { const b = boxes[i];
      if (b.left < frame.left - 1 || b.right > frame.right + 1 || b.top < frame.top - 1 || b.bottom > frame.bottom + 1)
        r.outside.push(t.textContent); });
    for (let i = 0; i < texts.length; i++) for (let j = i + 1; j < texts.length; j++) {
      const a = boxes[i], b = boxes[j];
      const w = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (w > 1 && h > 1) r.overlaps.push([texts[i].textContent, texts[j].textContent]);
    }
    const cells = Array.from(svg.querySelectorAll('g.role-mark path, g.role-mark rect')).map(e => {
      const cs = getComputedStyle(e), f = rgb(cs.fill);
      return f && f.a > 0 && cs.fill !== 'none'
        ? {b: e.getBoundingClientRect(), c: blend(f, bg, f.a * parseFloat(cs.fillOpacity || '1') * alpha(e, svg))}
        : null;
    }).filter(x => x && x.b.width > 0);
    const behind = t => { const b = t.getBoundingClientRect(), x = b.left + b.width / 2, y = b.top + b.height / 2;
      let under = bg;
      for (const c of cells) if (x > c.b.left && x < c.b.right && y > c.b.top && y < c.b.bottom) under = c.c;
      return under; };
    for (const t of texts) {
      const c = rgb(getComputedStyle(t).fill); if (!c) continue;
      const under = behind(t), k = contrast(blend(c, under, c.a * alpha(t, svg)), under);
      if (k < 3) r.low.push(['text', t.textContent, getComputedStyle(t).fill, +k.toFixed(2)]);
    }
    for (const p of svg.querySelectorAll('line, path')) {
      const g = p.closest('g[class*="role-"]'), cls = g ? g.getAttribute('class') : '';
      if (/role-axis-grid|background|role-frame/.test(cls)) continue;
      const cs = getComputedStyle(p), s = rgb(cs.stroke), f = rgb(cs.fill);
      if (!s || s.a === 0 || cs.stroke === 'none' || !(parseFloat(cs.strokeWidth) > 0)) continue;
      if (f && f.a > 0 && cs.fill !== 'none') continue;  // the outline of a filled mark
      const k = contrast(blend(s, bg, s.a * parseFloat(cs.strokeOpacity || '1') * alpha(p, svg)), bg);
      if (k < 3) r.low.push(['line', cls, cs.stroke, +k.toFixed(2)]);
    }
  }
  return out;
}
"""


@pytest.fixture(scope="module")
def level2_report(report_cache):
    return report_cache.get(fixture_dir("ascend", "msinsight", "test", "st", "level2"))


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_charts_fit_do_not_overlap_and_read_in_dark(level2_report, open_report, scheme):  # noqa: F811
    page, log = open_report(level2_report, color_scheme=scheme, vector=True)  # reads the charts' SVG
    figs = page.evaluate(MEASURE_JS, [list(OWN_PREFIXES), None])
    assert {"communication-graph", "communication-matrix", "communication-link-boxes", "trajectory-heatmap",
            "memory-grid", "flops-bars", "strategy-mesh"} <= {f["id"] for f in figs}
    _check(figs, scheme, "as drawn")
    if scheme == "light":
        # the controls' choices are checked in dark only, which asserts what light does (fit, overlap, cut) and
        # contrast: the themes differ in colours alone (charts.js darkConfig, vega's "dark"), so every choice lays
        # out the same in both (measured on this page: every chart's size and every text's box, in all 72 states)
        assert not log.problems(), log.problems()
        # the reader's system turns dark while the page is open: every chart is drawn again in dark (charts.js
        # retheme; before, the drawn charts kept their light colours: white panels, dark text on the dark page)
        page.emulate_media(color_scheme="dark")
        page.wait_for_function("document.documentElement.dataset.chartsTheme === 'dark' && "
                               "document.documentElement.dataset.allDone === '1'")
        _check(page.evaluate(MEASURE_JS, [list(OWN_PREFIXES), None]), "dark", "after the system turned dark")
        assert page.evaluate("document.querySelectorAll('.rg-chart[data-spec]:not([data-rendered])').length") == 0
        assert not log.problems(), log.problems()
        return
    # every choice of every control (metric, step, sort) keeps the charts of its section inside their box and legible
    selects = page.locator("select[data-signal]")
    for i in range(selects.count()):
        sel = selects.nth(i)
        section = sel.evaluate("s => s.closest('section').id")
        for value in sel.locator("option").evaluate_all("os => os.map(o => o.value)"):
            sel.select_option(value)
            page.wait_for_timeout(150)
            _check(page.evaluate(MEASURE_JS, [list(OWN_PREFIXES), section]), scheme,
                   f"with {sel.get_attribute('data-signal')} = {value}")
    assert not log.problems(), log.problems()


def _check(figs: list[dict], scheme: str, when: str) -> None:
    for f in figs:
        assert f["content"] <= f["box"] + 1, f"{f['id']} {when} is {f['content']} px wide in a {f['box']} px box"
        assert not f["overlaps"], f"{f['id']} {when}: text drawn over text: {f['overlaps'][:5]}"
        assert not f["outside"], f"{f['id']} {when}: text cut at the chart's edge: {f['outside'][:5]}"
        if scheme == "dark":
            assert not f["low"], f"{f['id']} {when}: below 3:1 on the dark page: {f['low'][:5]}"


def test_demo_console_has_no_vega_lite_warning(report_cache, browser):  # noqa: F811
    """Vega-Lite logs "Selection not supported for boxplot yet" for ANY params on a boxplot unit (the per-link box
    plots' link_metric switch): the params sit on a layer around it. The demo's console has no such warning, and the
    box plot still follows the 'Link metric' control."""
    from test_browser import READY, TIMEOUT_MS

    ctx = browser.new_context(viewport={"width": 1400, "height": 1000})
    try:
        page = ctx.new_page()
        messages: list[str] = []
        page.on("console", lambda m: messages.append(f"{m.type}: {m.text}"))
        page.goto(report_cache.get("demo").resolve().as_uri() + "?renderer=svg")  # its title read from the SVG
        page.wait_for_function(READY, timeout=TIMEOUT_MS)
        assert page.locator("#communication-link-boxes .rg-chart svg.marks").count() == 1
        sel = page.locator("select[data-signal='link_metric']").first
        title = page.locator("#communication-link-boxes .rg-chart svg.marks g.role-title text")
        before = title.first.text_content()
        values = sel.locator("option").evaluate_all("os => os.map(o => o.value)")
        sel.select_option(next(v for v in values if "time_ms" in v))
        page.wait_for_timeout(200)
        assert title.first.text_content() != before  # the box plot follows the control
        bad = [m for m in messages if "not supported" in m.lower()]
        assert not bad, bad
    finally:
        ctx.close()
#: Vega / Vega-Lite warnings of an empty chart or a wrong spec (console "warning"s, which open_report does not keep)
BAD_WARNINGS = ("Infinite extent", "Cannot use the relative band size")


def test_level2_charts_warn_of_no_empty_chart_or_bad_band(level2_report, open_report):  # noqa: F811
    """The picker's panels for a rank without their data say so (they were empty: "Infinite extent for field
    t_start / t_end / x / y"), the link box plot's empty outlier layer no longer sets its domain ("value"), and the
    Marey bars' band height is not taken on the lines' linear offset scale."""
    page, log = open_report(level2_report, vector=True)  # the picker's texts read from the SVG
    sel = page.locator("select[data-signal='drill_rank']")
    assert sel.count() == 1
    for value in sel.first.locator("option").evaluate_all("os => os.map(o => o.value)"):
        sel.first.select_option(value)  # ranks 1 and 3 have no operation types or lines in this fixture
        page.wait_for_timeout(150)
    texts = page.locator("#drill-rank-any svg text").all_text_contents()
    assert "(no data for this rank)" in texts
    bad = [w for w in log.console_warnings if any(b in w for b in BAD_WARNINGS)]  # kept from the page's start
    assert not bad, bad
    assert not log.problems(), log.problems()


PICKED_JS = """() => {
  const out = {};
  document.querySelectorAll('.rg-chart[data-spec]').forEach(c => {
    const fig = c.closest('figure'), parts = fig && window.reportgenCharts.partitioned(fig.id);
    if (!parts || !Object.keys(parts).length) return;
    const spec = JSON.parse(document.getElementById(c.getAttribute('data-spec')).textContent);
    const store = JSON.parse(document.getElementById('rg-chart-store').textContent);
    out[fig.id] = Object.entries(parts).map(([name, p]) => {
      const ref = spec.datasets[name], block = ref && ref.$rg ? store[ref.$rg] : ref;
      return {signal: p.signal, rows: p.rows, whole: Array.isArray(block) ? block.length : block.n};
    });
  });
  return out;
}"""


def _marks(page, figure: str) -> list[str]:
    """The figure's marks once two reads 100 ms apart agree (a control's change runs the view asynchronously)."""
    last = None
    for _ in range(50):
        marks = page.evaluate("(f) => window.reportgenCharts.marks(f, 100000)", figure)
        now = sorted(json.dumps(m, sort_keys=True, default=str) for m in marks)
        if now == last:
            return now
        last = now
        page.wait_for_timeout(100)
    return last


def test_a_picker_charts_rows_of_the_value_picked_show_what_all_rows_show(level2_report, open_report):  # noqa: F811
    """A chart whose data every layer filters first on a picker's value ("datum.r == drill_rank") is given only the
    rows of the value picked (charts.js partitions): fewer rows, and for every value of every picker the same marks
    as the page drawing all rows (?data=whole)."""
    page, log = open_report(level2_report)
    page.wait_for_function("document.documentElement.dataset.allDone === '1'")
    picked = page.evaluate(PICKED_JS)
    assert {"drill-rank-any", "execution-marey", "trajectory-bars"} <= set(picked), picked
    for fig, parts in picked.items():
        assert all(p["rows"] <= p["whole"] for p in parts), (fig, parts)
    assert all(p["rows"] < p["whole"] for p in picked["drill-rank-any"]), picked["drill-rank-any"]  # 4 ranks
    whole, _ = open_report(level2_report, query="data=whole")
    assert whole.evaluate(PICKED_JS) == {}
    compared = 0
    for fig, parts in picked.items():
        for signal in sorted({p["signal"] for p in parts}):
            pick = f"section:has(#{fig}) select[data-signal='{signal}']"
            if not page.locator(pick).count():
                continue
            for value in page.locator(pick).first.locator("option").evaluate_all("os => os.map(o => o.value)")[:6]:
                for p in (page, whole):
                    p.locator(pick).first.select_option(value)
                assert _marks(page, fig) == _marks(whole, fig), (fig, signal, value)
                compared += 1
    assert compared >= 10, compared
    assert not log.problems(), log.problems()


def _view(filt: str, *before: dict, data: str = "D", **extra) -> dict:
    return {"data": {"name": data, **extra}, "transform": [*before, {"filter": filt}], "mark": "point",
            "encoding": {"x": {"field": "v", "type": "quantitative"}}}


#: (spec's views, params, the datasets partitioned) - what charts.js' partitions accepts and refuses
PARTITION_CASES = [
    ([_view("datum.r == pick")], [{"name": "pick", "value": 1}], {"D": ["r", "pick", None]}),
    ([_view("datum.r == pick || datum.r == -1")], [{"name": "pick", "value": 1}], {"D": ["r", "pick", -1]}),
    ([_view("datum.r == pick && (datum.v > 0)")], [{"name": "pick", "value": 1}], {"D": ["r", "pick", None]}),
    # a calculate or a lookup before the filter that does not write the field
    ([_view("datum.r == pick", {"calculate": "datum.v * 2", "as": "w"},
            {"lookup": "r", "from": {"data": {"name": "L"}, "key": "r", "fields": ["g"]}})],
     [{"name": "pick", "value": 1}], {"D": ["r", "pick", None]}),
    ([_view("datum.r == pick"), _view("datum.v > 0")], [{"name": "pick", "value": 1}], {}),  # one use unfiltered
    ([_view("datum.r == pick"), _view("datum.r == other")],
     [{"name": "pick", "value": 1}, {"name": "other", "value": 2}], {}),  # two pickers on one dataset
    ([_view("datum.r == pick", {"calculate": "datum.q", "as": "r"})], [{"name": "pick", "value": 1}], {}),  # writes r
    ([_view("datum.g == pick", {"lookup": "r", "from": {"data": {"name": "L"}, "key": "r", "fields": ["g"]}})],
     [{"name": "pick", "value": 1}], {}),  # the lookup brings the field
    ([_view("datum.r == pick", {"lookup": "r", "from": {"data": {"name": "L"}, "key": "r"}})],
     [{"name": "pick", "value": 1}], {}),  # a lookup naming neither fields nor "as"
    ([_view("datum.r == pick", {"filter": "datum.v > 0"})], [{"name": "pick", "value": 1}], {}),  # a filter first
    ([_view("datum.r == pick && (datum.v > 0) || (datum.v < 0)")], [{"name": "pick", "value": 1}], {}),
    ([_view("datum.r == pick && (test(/[(]/, datum.s))")], [{"name": "pick", "value": 1}], {}),
    ([_view("datum.r == pick")], [{"name": "pick", "value": 1, "bind": {"input": "range"}}], {}),
    ([_view("datum.r == pick")], [{"name": "pick", "expr": "1"}], {}),
    ([_view("datum.r == pick", data="D", format={"parse": {"r": "number"}})], [{"name": "pick", "value": 1}], {}),
    ([{**_view("datum.r == pick"), "encoding": {"x": {"field": "t", "type": "temporal"}}}],
     [{"name": "pick", "value": 1}], {}),
    ([_view("datum.r == pick", {"calculate": "length(data('D'))", "as": "n"})], [{"name": "pick", "value": 1}], {}),
    ([_view("datum.r == pick"), {**_view("datum.v > 0", data="L"),
                                 "transform": [{"lookup": "r", "from": {"data": {"name": "D"}, "key": "r",
                                                                        "fields": ["v"]}}]}],
     [{"name": "pick", "value": 1}], {}),  # D is another view's lookup source
]


def test_which_datasets_a_picker_partitions(level2_report, open_report):  # noqa: F811
    """charts.js gives a dataset only the picked rows when nothing but the picker's filter can tell them apart, and
    keeps all rows for every other use (reportgenCharts.partitionsOf on hand-written specs)."""
    page, _ = open_report(level2_report, charts="scrolled")  # no chart of the page is read
    for views, params, want in PARTITION_CASES:
        spec = {"params": params, "layer": views, "datasets": {"D": [], "L": []}}
        got = page.evaluate("(s) => window.reportgenCharts.partitionsOf(s)", spec)
        assert {k: [v["field"], v["signal"], v["keep"]] for k, v in got.items()} == want, (views, params)


def test_a_rank_picked_before_its_chart_is_drawn_shows_that_ranks_rows(level2_report, open_report):  # noqa: F811
    """#rank-N opens the rank picker's figure with rank N set before the chart is drawn (applyChosen): its
    partitioned rows are rank N's, the marks those of the page drawing all rows."""
    marks = []
    for query in ("", "data=whole"):  # the page opened at #rank-2, drawing no chart but those it shows
        page, _ = open_report(level2_report, charts="scrolled", query=query, fragment="rank-2")
        page.wait_for_function("() => !!document.querySelector('#drill-rank-any .rg-chart[data-rendered]')")
        assert page.evaluate("window.reportgenCharts.signals('drill-rank-any').drill_rank") == 2
        marks.append(_marks(page, "drill-rank-any"))
    assert marks[0] == marks[1] and any('"r": 2' in m for m in marks[0]), marks[0][:5]


def test_draw_scrolled_draws_the_first_screen_then_only_what_is_scrolled_to(level2_report, open_report):  # noqa: F811
    """?draw=scrolled (the tests of tables and layout open pages so): the first screen's charts are drawn, no other
    in idle time, and a chart scrolled to is drawn; printing still draws them all."""
    page, log = open_report(level2_report, charts="scrolled")
    drawn = "() => document.querySelectorAll('.rg-chart[data-spec][data-rendered]').length"
    total = page.evaluate("() => document.querySelectorAll('.rg-chart[data-spec]').length")
    first = page.evaluate(drawn)
    assert first < total - 1, (first, total)  # (none when the first screen shows no chart)
    page.wait_for_timeout(1500)  # idle time: the default page draws the rest in it
    assert page.evaluate(drawn) == first
    last = page.locator(".rg-chart[data-spec]").last
    assert last.get_attribute("data-rendered") is None
    last.scroll_into_view_if_needed()
    page.wait_for_function("el => el.hasAttribute('data-rendered')", arg=last.element_handle())
    assert page.evaluate(drawn) < total
    page.emulate_media(media="print")
    page.evaluate("() => window.dispatchEvent(new Event('beforeprint'))")
    page.wait_for_function(f"() => document.querySelectorAll('.rg-chart[data-spec][data-rendered]').length === {total}")
    assert not log.problems(), log.problems()
