"""The page's first screen is ready before the rest is drawn (issue 15, goal 2), and nothing is lost by that: charts
below it are drawn when scrolled to, in idle time, and before printing; tables below it are built when used. Behaviour
only: no timing is asserted (load times are bench/ numbers)."""

from __future__ import annotations

import pytest

from reportgen.cli import main
from test_browser import ALLOWED, browser  # noqa: F401 - pytest fixture

FIRST = "document.documentElement.dataset.chartsReady === '1'"
ALL = "document.documentElement.dataset.allDone === '1'"
UNDRAWN = "document.querySelectorAll('.rg-chart[data-spec]:not([data-rendered])').length"


@pytest.fixture(scope="module")
def demo_page(tmp_path_factory):
    out = tmp_path_factory.mktemp("pb") / "demo.html"
    assert main(["demo", "-o", str(out), "--quiet"]) == 0
    return out


@pytest.fixture
def first_screen(browser, demo_page):  # noqa: F811 - the fixture imported above
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    try:  # closed even when the page fails to load (the browser is shared by the test process's browser files)
        ctx.route("**/*", lambda r: r.continue_() if r.request.url.startswith(ALLOWED) else r.abort())
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(demo_page.resolve().as_uri())
        page.wait_for_function(FIRST, timeout=30_000)
        yield page
        assert not errors
    finally:
        ctx.close()


def test_everything_drawn_after_the_first_screen(first_screen):
    page = first_screen
    charts = page.evaluate("document.querySelectorAll('.rg-chart[data-spec]').length")
    assert charts > 5
    page.wait_for_function(ALL, timeout=60_000)
    assert page.evaluate(UNDRAWN) == 0
    assert page.evaluate("document.querySelectorAll('[data-error]').length") == 0
    tables = page.evaluate("[...document.querySelectorAll('.rg-table')].filter(b => document.getElementById(b.id + '-data'))"
                           ".map(b => b.querySelector('table.rg-sortable').classList.contains('rg-live'))")
    assert tables and all(tables)  # every table built: filters, column picker


def test_a_chart_scrolled_to_is_drawn(first_screen):
    page = first_screen
    last = page.locator(".rg-chart[data-spec]").last
    last.scroll_into_view_if_needed()
    page.wait_for_function("el => el.getAttribute('data-rendered') === '1'", arg=last.element_handle(),
                           timeout=30_000)


def test_printing_draws_every_chart(first_screen):
    page = first_screen
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    page.wait_for_function("document.documentElement.dataset.chartsDone === '1'", timeout=60_000)
    assert page.evaluate(UNDRAWN) == 0
    assert page.evaluate("document.querySelectorAll('details.rg-details:not([open])').length") == 0


def test_a_table_used_before_it_is_built_is_built_first(first_screen):
    page = first_screen
    tid = page.evaluate("[...document.querySelectorAll('.rg-table')].filter(b => document.getElementById(b.id + '-data'))"
                        ".pop().id")
    csv = page.evaluate("id => window.reportgenTables.csv(id, 'all')", tid)
    assert csv and csv.count("\r\n") > 1
    assert page.evaluate("id => document.getElementById(id).querySelector('table').classList.contains('rg-live')", tid)


def test_a_chart_scrolled_to_is_drawn_before_the_ones_between(browser, demo_page):  # noqa: F811
    """With no idle time at all, scrolling to the last chart draws it (and its neighbours) without drawing the charts
    between the first screen and it: one chart at a time, the one scrolled to first (issue 28 #8)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = ctx.new_page()
        page.add_init_script("window.requestIdleCallback = function () { return 0; };")
        page.goto(demo_page.resolve().as_uri())
        page.wait_for_function(FIRST, timeout=30_000)
        undrawn = page.evaluate(UNDRAWN)
        assert undrawn > 5
        last = page.locator(".rg-chart[data-spec]").last
        last.scroll_into_view_if_needed()
        page.wait_for_function("el => el.getAttribute('data-rendered') === '1'", arg=last.element_handle(),
                               timeout=30_000)
        page.wait_for_timeout(500)
        assert page.evaluate(UNDRAWN) > undrawn // 2, "the charts between were drawn too"
    finally:
        ctx.close()


def test_renderer_svg_draws_every_chart_as_svg(browser, demo_page):  # noqa: F811
    """The page draws charts of many marks on a canvas (render.share_chart_data); ?renderer=svg draws every chart as
    SVG (vector printing, and the tests that read the charts' SVG)."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        page = ctx.new_page()
        page.goto(demo_page.resolve().as_uri())
        page.wait_for_function(ALL, timeout=60_000)
        assert page.evaluate("document.querySelectorAll('.rg-chart canvas').length") > 0
        page.goto(demo_page.resolve().as_uri() + "?renderer=svg")
        page.wait_for_function(ALL, timeout=60_000)
        assert page.evaluate("document.querySelectorAll('.rg-chart canvas').length") == 0
        assert page.evaluate("document.querySelectorAll('.rg-chart svg.marks').length") == \
            page.evaluate("document.querySelectorAll('.rg-chart[data-spec]').length")
    finally:
        ctx.close()
