"""Issue 28 #1-#3 in a real browser: a phone-wide page (390 px) never scrolls sideways and cuts no legend; the
--static page's charts are dark on the dark page; no page logs a warning or an error.

Every check runs after every chart is drawn (``data-all-done``) and is about a class of things (every chart, every
legend label, every kind of prose), not one chart."""

from __future__ import annotations

import pytest
from conftest import fixture_dir

from test_browser import browser, open_report  # noqa: F401 - pytest fixtures

PHONE = 390
RUNS = {"demo": None,
        "pp2x4": ("mindinsight", "mi_cluster_propose_pp2x4"),
        "level2": ("ascend", "msinsight", "test", "st", "level2"),
        "gloo_ddp4": ("generated", "torch_gloo_ddp4_baseline")}


def _report(report_cache, name):
    return report_cache.get("demo" if RUNS[name] is None else fixture_dir(*RUNS[name]))


#: the page's width, each drawn chart's SVG (or canvas) against its box, and every legend label or title that is cut
#: (drawn past its SVG's edge, or shortened by Vega with "…")
PHONE_JS = r"""
() => {
  const de = document.documentElement;
  const out = {scroll: de.scrollWidth, client: de.clientWidth, wide: [], cut: [], charts: 0, legends: 0};
  for (const chart of document.querySelectorAll('.rg-chart[data-spec]')) {
    const id = chart.getAttribute('data-spec');
    const node = chart.querySelector('svg.marks, canvas.marks');
    if (!node) continue;
    out.charts += 1;
    const fig = chart.closest('figure') || chart;
    const cs = getComputedStyle(fig);
    const room = fig.getBoundingClientRect().width - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight)
      - parseFloat(cs.borderLeftWidth) - parseFloat(cs.borderRightWidth);
    const w = node.getBoundingClientRect().width;
    if (w > room + 1) out.wide.push([id, Math.round(w), Math.round(room)]);
    if (node.tagName.toLowerCase() !== 'svg') continue;
    const frame = node.getBoundingClientRect();
    for (const t of node.querySelectorAll('.role-legend-label text, .role-legend-title text')) {
      const b = t.getBoundingClientRect(), text = t.textContent;
      if (!text.trim()) continue;
      out.legends += 1;
      if (b.left < frame.left - 1 || b.right > frame.right + 1 || /…$/.test(text.trim()))
        out.cut.push([id, text, Math.round(b.left - frame.left), Math.round(b.right - frame.left), Math.round(frame.width)]);
    }
  }
  return out;
}
"""


@pytest.mark.parametrize("name", ["demo", "pp2x4", "level2"])
def test_phone_page_does_not_scroll_sideways_and_cuts_no_legend(name, report_cache, open_report):  # noqa: F811
    """At 390 px: no sideways scroll, every chart within its figure's box, every legend label and title whole and
    inside its SVG (legends go below the plot, one entry per line, wrapped; charts.js narrowLegends / fitNarrow)."""
    page, log = open_report(_report(report_cache, name), width=PHONE, vector=True)  # reads the legends' SVG text
    m = page.evaluate(PHONE_JS)
    assert m["scroll"] <= m["client"] + 1, f"{name}: the page is {m['scroll']} px wide at {m['client']} px"
    assert m["charts"] >= 5 and m["legends"] >= 5, m
    assert not m["wide"], f"{name}: charts wider than their figure: {m['wide']}"
    assert not m["cut"], f"{name}: legend text cut: {m['cut'][:8]}"
    assert not log.problems(), log.problems()
    assert not log.console_warnings, log.console_warnings[:5]


#: each kind of element that holds a run's names (summaries, captions, list items, table cells, definitions...)
PROSE = [".rg-summary", "section p", "li", "figcaption", "td", "th", "dd", "dt", "summary", "h3", "code", "label"]


def test_phone_page_breaks_an_unbreakable_name(report_cache, open_report):  # noqa: F811
    """A 230-character kernel name without a break opportunity, put in each kind of text element in turn, never
    makes the page wider than the phone: prose breaks it, tables scroll inside their own box."""
    page, _ = open_report(_report(report_cache, "demo"), width=PHONE, charts="scrolled")
    name = "aclnnFlashAttentionScoreGrad_" + "FlashAttentionScoreGradAiCore" * 7
    for sel in PROSE:
        assert page.evaluate("([sel, name]) => { const e = document.querySelector(sel); if (!e) return false;"
                             " e.append(' ' + name); return true; }", [sel, name]), sel
        width = page.evaluate("() => document.documentElement.scrollWidth")
        assert width <= PHONE + 1, f"a long name in {sel} makes the page {width} px wide"


def test_static_charts_are_dark_on_the_dark_page(report_cache, pp2x4, browser):  # noqa: F811
    """--static draws each chart for both schemes; with prefers-color-scheme: dark every visible chart is the dark
    one (its background the page's), none a white panel; in light mode the light one. The page stays small: 1.36 MB
    for pp2x4 with both (0.93 MB with one)."""
    out = report_cache.get(pp2x4, "--static")  # cli.main(...) in (0, 3), once per worker (conftest.ReportCache)
    assert out.stat().st_size < 4_000_000
    visible = """() => Array.from(document.querySelectorAll('.rg-figure .rg-static svg'))
      .filter(s => s.getBoundingClientRect().width > 0)
      .map(s => { const r = s.querySelector(':scope > rect');
                  return {bg: r ? getComputedStyle(r).fill : 'none', page: getComputedStyle(document.body).backgroundColor}; })"""

    def level(c: str) -> float:
        return sum(float(x) for x in c[c.index("(") + 1:c.index(")")].split(",")[:3]) / 3

    for scheme in ("dark", "light"):
        ctx = browser.new_context(viewport={"width": 1400, "height": 1000}, color_scheme=scheme)
        try:
            page = ctx.new_page()
            page.goto(out.resolve().as_uri())
            charts = page.evaluate(visible)
            figures = page.locator(".rg-figure .rg-static").count()
            assert len(charts) == figures >= 5, (scheme, len(charts), figures)  # one visible SVG per chart
            for c in charts:
                assert c["bg"] != "none", c
                if scheme == "dark":
                    assert c["bg"] == c["page"] and level(c["bg"]) < 60, c
                else:
                    assert level(c["bg"]) > 240, c
        finally:
            ctx.close()


@pytest.mark.parametrize("name", list(RUNS))
def test_no_page_logs_a_warning_or_an_error(name, report_cache, open_report):  # noqa: F811
    """Every page, at the reference width, logs no console warning and no error once every chart is drawn (Vega-Lite's
    'Dropping "fit-y" because spec has discrete height' was logged 7 times on each); charts.js keeps what was logged
    (reportgenCharts.logged) and the browser's console agrees."""
    page, log = open_report(_report(report_cache, name))
    logged = page.evaluate("() => window.reportgenCharts.logged()")
    assert logged == [], logged[:5]
    assert not log.console_warnings, log.console_warnings[:5]
    assert not log.problems(), log.problems()
