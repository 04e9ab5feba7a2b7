"""The report in a real browser (system Chromium through Playwright), with the network blocked.

Chromium: $REPORTGEN_CHROMIUM, else /usr/lib/chromium/chromium (the real binary; /usr/bin/chromium
is a wrapper script), else whatever ``chromium`` is on PATH. Without a browser or the playwright
package these tests are skipped, and fail when $CI is set. ``playwright install`` is never needed.

Every page is opened from a file:// URL with DNS mapped to nothing, a proxy on a dead port and a
route that aborts anything that is not file:, data: or blob:, so a report that tried to load
anything would show it in the request log.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from reportgen.cli import main

from conftest import unavailable as _unavailable  # fail under CI, else skip with why

REPO = Path(__file__).resolve().parent.parent
ALLOWED = ("file:", "data:", "blob:")
LAUNCH_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--disable-default-apps", "--disable-extensions",
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
]
#: every chart drawn and every table built (charts.js / table.js); data-charts-ready alone means the first screen
READY = "document.documentElement.dataset.allDone === '1'"
#: the first screen's charts drawn and every table built (a page opened with ?draw=scrolled)
READY_SCROLLED = ("document.documentElement.dataset.chartsReady === '1' && "
                  "document.documentElement.dataset.tablesDone === '1'")
TIMEOUT_MS = 20_000

#: every chart: its state and how many data marks its SVG (or canvas) holds
CHART_STATE_JS = """
() => Array.from(document.querySelectorAll('.rg-chart')).map(el => ({
  id: el.getAttribute('data-spec'),
  rendered: el.getAttribute('data-rendered'),
  error: el.getAttribute('data-error'),
  marks: el.querySelectorAll('svg .role-mark > *').length,
  canvas: Array.from(el.querySelectorAll('canvas')).filter(c => c.width > 0 && c.height > 0).length,
  scene: window.reportgenCharts.marksOf(el, 1).length,  // data marks in the drawing, SVG or canvas
}))
"""


def _chromium() -> str | None:
    env = os.environ.get("REPORTGEN_CHROMIUM")
    if env:
        return env if Path(env).exists() else None
    if Path("/usr/lib/chromium/chromium").exists():
        return "/usr/lib/chromium/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _shared() -> Path:
    return Path(os.environ.get("REPORTGEN_SHARED") or (REPO.parent / "shared"))


def launch_chromium(playwright):
    """Chromium launched from ``playwright`` (a Playwright driver), or :func:`_unavailable` saying why not."""
    exe = _chromium()
    if not exe:
        where = os.environ.get("REPORTGEN_CHROMIUM")
        _unavailable(f"REPORTGEN_CHROMIUM={where} does not exist" if where else
                     "no Chromium found: set REPORTGEN_CHROMIUM, or install Debian's chromium "
                     "(/usr/lib/chromium/chromium)")
    try:
        return playwright.chromium.launch(executable_path=exe, args=LAUNCH_ARGS)
    except Exception as exc:  # noqa: BLE001 - any launch failure means "no usable browser"
        _unavailable(f"Chromium at {exe} did not start: {exc}")


@pytest.fixture(scope="module")
def browser():
    """The Chromium of this test process (conftest._Driver: one for consecutive browser files; each page is opened
    in a context of its own)."""
    import conftest

    return conftest._DRIVER.browser()


class PageLog:
    def __init__(self):
        self.requests: list[str] = []
        self.blocked: list[str] = []
        self.console_errors: list[str] = []
        self.console_warnings: list[str] = []  # not problems(): tests that want none assert it themselves
        self.page_errors: list[str] = []
        self.dialogs: list[str] = []

    def problems(self) -> list[str]:
        return ([f"console error: {m}" for m in self.console_errors]
                + [f"page error: {m}" for m in self.page_errors]
                + [f"dialog opened: {m}" for m in self.dialogs]
                + [f"blocked request: {u}" for u in self.blocked])


@pytest.fixture
def open_report(browser):
    contexts = []

    def _open(path: Path, *, width: int = 1400, color_scheme: str = "light", vector: bool = False,
              charts: str = "all", query: str = "", fragment: str = ""):
        """``vector``: every chart drawn as SVG (?renderer=svg), for checks that read the chart's SVG text and
        marks (the page draws charts of many marks on a canvas; the layout is the same). ``charts="scrolled"``
        (?draw=scrolled): the charts of the first screen drawn, then only a chart scrolled to, and the page ready
        when those and the tables are (:data:`READY_SCROLLED`): for checks of tables and layout, which then do not
        wait for, nor share the CPU with, the drawing of every chart (3-6 CPU-s of Chromium for the demo).
        ``query`` (more of the address's query, e.g. ``data=whole``) and ``fragment`` (e.g. ``rank-2``): the page is
        opened at that address, so it is not drawn once first without them."""
        query = [q for q, on in (("renderer=svg", vector), ("draw=scrolled", charts == "scrolled"), (query, query))
                 if on]
        ctx = browser.new_context(viewport={"width": width, "height": 1000}, color_scheme=color_scheme,
                                  accept_downloads=True)
        contexts.append(ctx)
        log = PageLog()

        def route(r):
            if r.request.url.startswith(ALLOWED):
                r.continue_()
            else:
                log.blocked.append(r.request.url)
                r.abort()

        ctx.route("**/*", route)
        page = ctx.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.on("request", lambda req: log.requests.append(req.url))
        page.on("console", lambda m: log.console_errors.append(m.text) if m.type == "error"
                else log.console_warnings.append(m.text) if m.type == "warning" else None)
        page.on("pageerror", lambda e: log.page_errors.append(str(e)))
        page.on("dialog", lambda d: (log.dialogs.append(d.message), d.dismiss()))
        page.goto(path.resolve().as_uri() + ("?" + "&".join(query) if query else "")
                  + (f"#{fragment}" if fragment else ""))
        page.wait_for_function(READY_SCROLLED if charts == "scrolled" else READY, timeout=TIMEOUT_MS)
        return page, log

    yield _open
    for c in contexts:
        c.close()


def _assert_charts_drawn(page) -> list[dict]:
    charts = page.evaluate(CHART_STATE_JS)
    assert charts, "the report has no charts"
    for c in charts:
        assert c["error"] is None, f"chart {c['id']} failed: {c['error']}"
        assert c["rendered"] == "1", f"chart {c['id']} was not drawn"
        assert c["scene"] > 0 and (c["marks"] > 0 or c["canvas"] > 0), f"chart {c['id']} has no marks"
    return charts


def _assert_drawn_charts_ok(page) -> list[dict]:
    """The charts drawn so far (a page opened with ``charts="scrolled"``) have marks, and no chart failed."""
    charts = page.evaluate(CHART_STATE_JS)
    for c in charts:
        assert c["error"] is None, f"chart {c['id']} failed: {c['error']}"
    drawn = [c for c in charts if c["rendered"] == "1"]
    for c in drawn:
        assert c["scene"] > 0 and (c["marks"] > 0 or c["canvas"] > 0), f"chart {c['id']} has no marks"
    return drawn


def test_demo_report_offline(tmp_path, report_cache, open_report):
    out = report_cache.get("demo")
    page, log = open_report(out)
    try:
        _assert_charts_drawn(page)
        assert log.requests == [out.resolve().as_uri()], f"the page requested more than itself: {log.requests}"

        # a control sets its signal in the charts of its section, and the drawing changes
        selects = page.locator("select[data-signal]")
        assert selects.count() > 0, "the demo report has no chart controls"
        first = selects.first
        section = first.evaluate("el => el.closest('section').id")
        drawing = ("el => { const c = el.querySelector('canvas'); "  # the drawing, SVG or canvas
                   "return c ? c.toDataURL() : el.innerHTML; }")
        page.evaluate("([s, d]) => { const f = eval(d); window.__rgDrawing = f; window.__rgBefore = "
                      "Array.from(document.querySelectorAll('#' + s + ' .rg-chart')).map(f); }", [section, drawing])
        values = first.locator("option").evaluate_all("os => os.map(o => o.value)")
        assert len(values) > 1
        for v in values:  # option values are JSON, so numbers stay numbers and strings stay strings
            json.loads(v)
        current = first.input_value()
        first.select_option(next(v for v in reversed(values) if v != current))
        page.wait_for_function(
            "s => Array.from(document.querySelectorAll('#' + s + ' .rg-chart'))"
            ".some((el, i) => window.__rgDrawing(el) !== window.__rgBefore[i])", arg=section, timeout=5000)
        _assert_charts_drawn(page)

        # every other control, once each, must not break a chart
        for i in range(1, selects.count()):
            sel = selects.nth(i)
            opts = sel.locator("option").evaluate_all("os => os.map(o => o.value)")
            sel.select_option(opts[-1])
        page.wait_for_timeout(300)
        _assert_charts_drawn(page)

        # tables: sort by a header (numbers numerically), filter a column, download every row as CSV
        table = page.locator("table.rg-sortable").first
        table_id = table.get_attribute("id")
        header = table.locator("thead th").first
        header.locator("button").click()
        assert header.get_attribute("aria-sort") == "ascending"
        header.locator("button").press("Enter")
        assert header.get_attribute("aria-sort") == "descending"
        keys = table.locator("tbody tr td:first-child").evaluate_all("tds => tds.map(td => td.dataset.sort)")
        nums = [float(k) for k in keys if k != ""]
        if len(nums) == len(keys):
            assert nums == sorted(nums, reverse=True)

        n_rows = table.locator("tbody tr").count()
        box = page.locator(f"#{table_id}").evaluate("t => t.closest('.rg-table').id")
        control = page.locator(f"#{box} .rg-filter-row .rg-col-filter").first  # per-column filters
        if control.evaluate("el => el.tagName") == "SELECT":
            control.select_option(index=1)
        else:
            control.fill(table.locator("tbody tr").first.locator("td").first.inner_text().strip())
        visible = table.locator("tbody tr:not([hidden])").count()
        assert 1 <= visible < n_rows

        button = page.locator("button[data-csv-rows='all']").first
        data = json.loads(page.locator(f"#{button.get_attribute('data-csv-for')}-data").text_content())
        with page.expect_download() as dl:
            button.click()
        text = Path(dl.value.path()).read_text(encoding="utf-8-sig")
        lines = text.splitlines()
        assert len(lines) == len(data["rows"]) + 1  # no cell here holds a newline
        assert lines[0].split(",")[0] == data["columns"][0]

        cells = page.evaluate("""() => ['=1+1', '+A1', '-2+3', '@SUM(A1)', -3.5, '-3.5', 'plain', 'a,"b"', null]
                                 .map(window.reportgenTables.csvCell)""")
        assert cells == ["'=1+1", "'+A1", "'-2+3", "'@SUM(A1)", "-3.5", "-3.5", "plain", '"a,""b"""', ""]

        assert not log.problems(), log.problems()
        assert all(u.startswith(ALLOWED) for u in log.requests), log.requests
    finally:
        page.screenshot(path=str(tmp_path / "demo.png"))  # the first screen, kept with the test's files


def test_dark_and_narrow(tmp_path, open_report, report_cache):
    out = report_cache.get("demo")
    page, log = open_report(out, width=420, color_scheme="dark")
    _assert_charts_drawn(page)
    bg = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert bg != "rgb(255, 255, 255)", "dark mode did not apply"
    overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the page is {overflow}px wider than a narrow screen"
    assert not log.problems(), log.problems()
    page.screenshot(path=str(tmp_path / "demo-dark-narrow.png"))


HOSTILE_DIR = "run_<img src=x onerror=window.__pwned=1>"
HOSTILE_OP = '</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
HOSTILE_TITLE = "<script>window.__pwned=3</script>{{7*7}}"


def test_hostile_names_stay_text(tmp_path, open_report):
    src = _shared() / "fixtures" / "mindinsight" / "mi_cluster_propose_pp2x4"
    if not src.is_dir():
        _unavailable(f"fixture {src} is missing (set REPORTGEN_SHARED to the shared/ folder)")
    run = tmp_path / HOSTILE_DIR
    shutil.copytree(src, run)
    trace = run / "step_trace_raw_0_detail_time.csv"
    header, sep, rest = trace.read_text(encoding="utf-8").partition("\n")
    op = "stream_48_0_Receive-op663"
    assert header.count(op) == 3  # the op, its _start_point and its _end_point columns
    trace.write_text(header.replace(op, op + HOSTILE_OP) + sep + rest, encoding="utf-8")

    out = tmp_path / "report.html"
    assert main([str(run), "-o", str(out), "--title", HOSTILE_TITLE, "--quiet"]) == 0
    page, log = open_report(out)
    try:
        _assert_charts_drawn(page)
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert not log.dialogs
        assert log.requests == [out.resolve().as_uri()], log.requests
        assert not log.problems(), log.problems()

        assert page.locator("h1").text_content().strip() == HOSTILE_TITLE  # {{7*7}} stays literal
        assert page.title().endswith(HOSTILE_TITLE)
        body = page.evaluate("document.body.innerText")
        assert "onerror=window.__pwned=1>" in body, "the hostile directory name is not shown as text"
        assert 'onerror="window.__pwned=2">' in body, "the hostile op name is not shown as text"
        assert page.get_by_text(HOSTILE_OP, exact=False).count() > 0
        # nothing from the payloads became an element
        assert page.locator("body img").count() == 0
        scripts = page.evaluate("Array.from(document.scripts).map(s => s.type || 'classic')")
        assert scripts.count("classic") == 3, scripts  # the bundle, charts.js, table.js
    finally:
        page.screenshot(path=str(tmp_path / "hostile.png"))
