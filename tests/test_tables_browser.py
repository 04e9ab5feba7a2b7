"""Tables in a real browser (system Chromium, see test_browser.py): per-column filters, natural sort, the CSV of
what is shown and of every row, layout that never hides data, and print (all columns, real repeated headers).

The reports are the demo, the Ascend st/level2 run (18-column overlap table, global link table with group /
source / destination / transport) and the MindInsight pp2x4 run (a 2000-row operator table, 100 rows listed).
A test that reads no chart and does not print opens its page with ``charts="scrolled"`` (?draw=scrolled: the
charts of the first screen drawn, then only one scrolled to; test_charts_browser.py checks that mode).
"""

from __future__ import annotations

import csv
import io
import json
import subprocess
from pathlib import Path

import pytest


from conftest import fixture_dir, need_tool
from test_browser import browser, open_report  # noqa: F401 - pytest fixtures

REPORTS = {
    "demo": None,
    "level2": ("ascend", "msinsight", "test", "st", "level2"),
    "pp2x4": ("mindinsight", "mi_cluster_propose_pp2x4"),
}
A4_PORTRAIT_PX = 718  # 190 mm of content at 96 px per inch
A4_LANDSCAPE_PX = 1047  # 277 mm


@pytest.fixture(scope="module")
def reports(report_cache):
    def build(name):
        return report_cache.get("demo" if REPORTS[name] is None else fixture_dir(*REPORTS[name]))

    return build


def _data(page, table_id: str) -> dict:
    return json.loads(page.locator(f"#{table_id}-data").text_content())


def _listed(page, table_id: str) -> list[int]:
    """JSON row indices of the rows on screen, in screen order."""
    return page.eval_on_selector_all(f"#{table_id} tbody tr[data-i]:not([hidden])",
                                     "trs => trs.map(tr => Number(tr.dataset.i))")


def _page(page, table_id: str) -> int:
    """Rows the page lists at once (thresholds.PAGE_TABLE_ROWS, or fewer for a short table)."""
    return int(page.locator(f"#{table_id}").get_attribute("data-page"))


def _first(page, table_id: str, want: list[int]) -> list[int]:
    """What the table lists when ``want`` pass the filters, in order: the first page of them."""
    return want[: _page(page, table_id)]


def _filter(page, table_id: str, label: str):
    cols = _data(page, table_id)["columns"]
    return page.locator(f"#{table_id} .rg-filter-row td").nth(cols.index(label)).locator(".rg-col-filter")


def _header(page, table_id: str, label: str):
    cols = _data(page, table_id)["columns"]
    return page.locator(f"#{table_id} thead tr.rg-label-row th").nth(cols.index(label))


def _count(page, table_id: str) -> str:
    return page.locator(f"#{table_id} .rg-filter-count").inner_text().strip()


def _csv(page, table_id: str, which: str) -> list[list[str]]:
    with page.expect_download() as dl:
        page.locator(f"#{table_id} button[data-csv-rows='{which}']").click()
    return list(csv.reader(io.StringIO(Path(dl.value.path()).read_text(encoding="utf-8-sig"))))


def _same(cell: str, value) -> bool:
    """A CSV cell holds the JSON value at full precision (JS and Python both write the shortest round trip)."""
    if value is None:
        return cell == ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(cell) == value
    return cell == str(value)


def test_column_filters_narrow_rows(reports, open_report):
    page, log = open_report(reports("level2"), charts="scrolled")
    tid = "communication-links"
    data = _data(page, tid)
    cols, rows = data["columns"], data["rows"]
    kinds = page.eval_on_selector_all(f"#{tid} .rg-filter-row td", "tds => tds.map(td => "
                                      "(td.querySelector('.rg-col-filter') || {tagName: ''}).tagName.toLowerCase())")
    for label in ("Group", "Source", "Destination", "Transport"):  # the seed's link-page choices
        assert kinds[cols.index(label)] == "select", (label, kinds)
    assert kinds[cols.index("Time (ms)")] == "input"
    assert _count(page, tid) == (f"{len(rows)} rows" if len(rows) <= _page(page, tid)
                                 else f"{len(rows)} rows · {_page(page, tid)} listed here")

    ti, si = cols.index("Transport"), cols.index("Source")
    _filter(page, tid, "Transport").select_option("=HCCS")
    want = [i for i, r in enumerate(rows) if r[ti] == "HCCS"]
    assert 0 < len(want) < len(rows)
    assert _listed(page, tid) == _first(page, tid, want)
    assert _count(page, tid).startswith(f"{len(want)} of {len(rows)} rows")
    _filter(page, tid, "Source").select_option("=1")  # filters combine
    want = [i for i in want if rows[i][si] == 1]
    assert _listed(page, tid) == _first(page, tid, want) and want

    # numbers in the header's unit: a threshold between two shown values
    page.locator(f"#{tid} .rg-filter-clear").click()
    assert _listed(page, tid) == _first(page, tid, list(range(len(rows))))
    col = cols.index("Time (ms)")
    scale = float(_header(page, tid, "Time (ms)").get_attribute("data-scale"))
    shown = sorted({r[col] / scale for r in rows})
    cut = (shown[len(shown) // 2] + shown[len(shown) // 2 + 1]) / 2
    _filter(page, tid, "Time (ms)").fill(f">{cut!r}")
    assert _listed(page, tid) == _first(page, tid, [i for i, r in enumerate(rows) if r[col] / scale > cut])

    # "1" in a rank column is rank 1, not every row with a 1 somewhere (the old one-box filter matched 16 of 16)
    page2, _ = open_report(reports("demo"), charts="scrolled")
    tid = "overlap-per-rank"
    d2 = _data(page2, tid)
    ranks = [r[0] for r in d2["rows"]]
    assert len(ranks) == 16
    box = _filter(page2, tid, "Rank")
    for text, want_ranks in (("1", {1}), ("3-7", {3, 4, 5, 6, 7}), (">=14", {14, 15}), ("<2", {0, 1}),
                             ("> 2 <= 4", {3, 4})):
        box.fill(text)
        assert {ranks[i] for i in _listed(page2, tid)} == want_ranks, text
        assert box.get_attribute("aria-invalid") == "false"
    box.fill("abc")
    assert box.get_attribute("aria-invalid") == "true"
    assert len(_listed(page2, tid)) == 16  # an expression that does not parse filters nothing

    # a text column with many values: substring of that column only
    tid = "communication-ops"
    d3 = _data(page, tid)
    oi = d3["columns"].index("Operator")
    assert _filter(page, tid, "Operator").evaluate("el => el.tagName") == "INPUT"
    _filter(page, tid, "Operator").fill("allreduce")
    want = [i for i, r in enumerate(d3["rows"]) if "allreduce" in r[oi].lower()]
    assert _listed(page, tid) == _first(page, tid, want) and 0 < len(want) < len(d3["rows"])
    assert not log.problems(), log.problems()


def test_natural_sort(reports, open_report):
    page, log = open_report(reports("level2"), charts="scrolled")
    tid = "strategy-groups"
    rows = _data(page, tid)["rows"]
    groups = [r[0] for r in rows]

    def natural(s):
        import re
        return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", s)]

    assert groups == sorted(groups, key=natural), "the section lists groups in natural order"
    header = _header(page, tid, "Group")
    header.locator("button").click()
    assert header.get_attribute("aria-sort") == "ascending"
    on_screen = [rows[i][0] for i in _listed(page, tid)]
    assert on_screen == sorted(groups, key=natural)[: _page(page, tid)]  # group_name_3 before group_name_13
    header.locator("button").click()
    assert [rows[i][0] for i in _listed(page, tid)] == sorted(groups, key=natural, reverse=True)[: _page(page, tid)]

    # numbers by raw value, empty cells last in both directions
    tid = "communication-ops"
    d = _data(page, tid)
    col = d["columns"].index("Size (MB)")
    head = _header(page, tid, "Size (MB)")
    for direction in ("ascending", "descending"):
        head.locator("button").click()
        assert head.get_attribute("aria-sort") == direction
        vals = [d["rows"][i][col] for i in _listed(page, tid)]
        nums = [v for v in vals if v is not None]
        assert nums == sorted(nums, reverse=direction == "descending")
        assert vals == nums + [None] * (len(vals) - len(nums))
    assert not log.problems(), log.problems()


def test_csv_shown_and_all(reports, open_report):
    page, log = open_report(reports("level2"), charts="scrolled")
    tid = "communication-ops"
    data = _data(page, tid)
    cols, rows = data["columns"], data["rows"]
    oi, wi = cols.index("Operator"), cols.index("Wait (ms)")

    _filter(page, tid, "Operator").fill("batchSendRecv")
    head = _header(page, tid, "Wait (ms)")
    head.locator("button").click()
    head.locator("button").click()  # descending
    # hide one column with the column picker
    page.locator(f"#{tid} .rg-colpick summary").click()
    page.locator(f"#{tid} .rg-colpick label", has_text="Transit (ms)").locator("input").uncheck()
    assert page.locator(f"#{tid} .rg-colpick summary").inner_text().startswith(f"Columns {len(cols) - 1} of {len(cols)}")

    shown = _csv(page, tid, "shown")
    keep = [i for i, c in enumerate(cols) if c != "Transit (ms)"]
    assert shown[0] == [cols[i] for i in keep]
    want = [i for i in range(len(rows)) if "batchsendrecv" in rows[i][oi].lower()]
    want.sort(key=lambda i: (rows[i][wi] is None, -(rows[i][wi] or 0), i))
    assert len(shown) - 1 == len(want) > 0
    assert _listed(page, tid) == _first(page, tid, want)  # the CSV: the rows on screen (and more), in their order
    for line, i in zip(shown[1:], want):
        assert len(line) == len(keep)
        assert all(_same(cell, rows[i][k]) for cell, k in zip(line, keep)), (line, rows[i])

    every = _csv(page, tid, "all")
    assert every[0] == cols
    assert len(every) - 1 == len(rows)
    for line, row in zip(every[1:], rows):
        assert all(_same(cell, v) for cell, v in zip(line, row)), (line, row)
    assert not log.problems(), log.problems()


def test_csv_all_rows_of_a_long_table(reports, open_report):
    page, log = open_report(reports("pp2x4"), charts="scrolled")
    tid = "communication-ops"
    rows = _data(page, tid)["rows"]
    listed = page.locator(f"#{tid} tbody tr[data-i]").count()
    assert listed < len(rows), "this table lists only its first rows"
    assert _count(page, tid) == f"{len(rows)} rows · {listed} listed here"
    assert len(_csv(page, tid, "all")) - 1 == len(rows)
    # a filter counts every row, listed or not; CSV (shown) has them all
    col = _data(page, tid)["columns"].index("Rank")
    _filter(page, tid, "Rank").select_option("=3")
    n = sum(1 for r in rows if r[col] == 3)
    assert _count(page, tid).startswith(f"{n} of {len(rows)} rows")
    assert len(_csv(page, tid, "shown")) - 1 == n
    assert not log.problems(), log.problems()


def test_the_page_lists_a_page_of_rows_and_more_on_demand(reports, open_report):
    """A long table lists thresholds.PAGE_TABLE_ROWS rows; "List N more" lists the next ones from the JSON; sorting
    orders every row, not only the listed ones; a filter lists the first matching rows (issue 28 #8: a 1,024-rank
    page listed 100 rows of ~30 tables, 35k of its 69k elements)."""
    from reportgen import thresholds as th
    page, log = open_report(reports("pp2x4"), charts="scrolled")
    tid = "communication-ops"
    d = _data(page, tid)
    rows, cols = d["rows"], d["columns"]
    step = _page(page, tid)
    assert step == th.PAGE_TABLE_ROWS < len(rows)
    assert _listed(page, tid) == list(range(step))
    more = page.locator(f"#{tid} .rg-list-more")
    assert more.inner_text() == f"List {step} more"
    more.click()
    assert _listed(page, tid) == list(range(2 * step))
    assert _count(page, tid) == f"{len(rows)} rows · {2 * step} listed here"
    # rows made from the JSON read as the page's own: same cells as the HTML rows of the --static page's kind
    made = page.eval_on_selector(f"#{tid} tbody tr[data-i='{step}']", "tr => [...tr.cells].map(td => td.textContent)")
    assert len(made) == len(cols) and all(isinstance(c, str) for c in made)
    # sorting covers every row: the smallest size of all rows comes first, wherever its row was
    col = cols.index("Duration (ms)")
    head = _header(page, tid, "Duration (ms)")
    head.locator("button").click()  # ascending: the rows come longest first, so the shortest were never listed
    order = sorted((i for i, r in enumerate(rows) if r[col] is not None), key=lambda i: (rows[i][col], i))
    assert _listed(page, tid) == order[: 2 * step]
    assert min(order[: 2 * step]) >= 2 * step, "the shortest operators were not among the rows listed before"
    # a filter: the first matching rows, and "List more" while more match
    ri = cols.index("Rank")
    _filter(page, tid, "Rank").select_option("=3")
    want = [i for i in order if rows[i][ri] == 3]
    assert _listed(page, tid) == want[: 2 * step]
    assert more.is_hidden() == (len(want) <= 2 * step)
    assert not log.problems(), log.problems()


OVERFLOW_JS = """() => {
  const out = [];
  for (const box of document.querySelectorAll('.rg-table')) {
    const scroll = box.querySelector('.rg-table-scroll');
    const ox = getComputedStyle(scroll).overflowX;
    if (box.scrollWidth > box.clientWidth + 1) out.push([box.id, 'box', box.scrollWidth, box.clientWidth]);
    if (!['auto', 'scroll'].includes(ox)) out.push([box.id, 'scroll area overflow-x ' + ox]);
    if (scroll.getBoundingClientRect().right > box.getBoundingClientRect().right + 1) out.push([box.id, 'scroll area']);
  }
  for (const box of document.querySelectorAll('.rg-table, .rg-table-head, .rg-table-tools')) {
    if (box.getBoundingClientRect().right > window.innerWidth + 1) out.push([box.id || box.className, 'past the window']);
  }
  return out;
}"""


@pytest.mark.parametrize("name", list(REPORTS))
def test_no_table_wider_than_its_box(name, reports, open_report, tmp_path):
    for width, scheme in ((1400, "light"), (420, "dark")):
        page, log = open_report(reports(name), width=width, color_scheme=scheme, charts="scrolled")
        assert page.evaluate(OVERFLOW_JS) == [], (name, width)
        assert page.evaluate("getComputedStyle(document.querySelector('.rg-sortable thead')).position") == "sticky"
        assert not log.problems(), log.problems()
    if name == "level2":  # the 18-column overlap table: key columns stay in view, groups over the header
        page, _ = open_report(reports(name), charts="scrolled")
        tid = "overlap-per-rank"
        assert len(_data(page, tid)["columns"]) >= 18
        pinned = page.eval_on_selector_all(f"#{tid} thead tr.rg-label-row th.rg-pin", "ths => ths.map(th => th.innerText.trim())")
        assert pinned == ["Rank", "Stage"]
        page.locator(f"#{tid} .rg-table-scroll").evaluate("el => { el.scrollLeft = el.scrollWidth; }")
        page.wait_for_timeout(50)
        left = page.locator(f"#{tid} .rg-table-scroll").evaluate("el => el.getBoundingClientRect().left")
        rank = _header(page, tid, "Rank").evaluate("el => el.getBoundingClientRect().left")
        assert abs(rank - left) <= 2, "the Rank column scrolled out of view"
        bands = page.eval_on_selector_all(f"#{tid} tr.rg-group-row th", "ths => ths.map(th => th.innerText.trim())")
        assert "Pipeline: receive and bubble" in bands
        page.locator(f"#{tid}").screenshot(path=str(tmp_path / "overlap-scrolled.png"))


PRINT_JS = """() => Array.from(document.querySelectorAll('.rg-table')).map(box => {
  const t = box.querySelector('table');
  const thead = t.tHead, cs = el => getComputedStyle(el);
  const filter = t.querySelector('.rg-filter-row');
  return {
    id: box.id, wide: box.classList.contains('rg-table-wide'), page: cs(box).page,
    boxWidth: box.clientWidth, tableWidth: t.getBoundingClientRect().width,
    thead: [cs(thead).display, cs(thead).position],
    thPositions: Array.from(thead.querySelectorAll('th')).map(th => cs(th).position),
    sortButtons: Array.from(thead.querySelectorAll('.rg-sort')).map(b => cs(b).display),
    cols: Array.from(t.querySelectorAll('col')).map(c => cs(c).visibility),
    headerWidths: Array.from(thead.querySelectorAll('tr.rg-label-row th')).map(th => th.getBoundingClientRect().width),
    filterRow: filter ? cs(filter).display : 'none',
  };
})"""


def test_print_keeps_every_column_and_repeats_headers(reports, open_report, tmp_path):
    page, log = open_report(reports("level2"), width=A4_PORTRAIT_PX)
    tid = "overlap-per-rank"
    page.locator(f"#{tid} .rg-colpick summary").click()
    page.locator(f"#{tid} .rg-colpick button", has_text="Key columns only").click()
    assert page.locator(f"#{tid} col").evaluate_all("cs => cs.filter(c => c.style.visibility === 'collapse').length") > 10
    _filter(page, "communication-links", "Transport").select_option("=HCCS")
    page.emulate_media(media="print")
    # rows filtered out on screen stay out on paper, and the paper says so
    count = page.locator("#communication-links .rg-filter-count")
    assert count.is_visible() and " of 51 rows" in count.inner_text()
    assert not page.locator("#strategy-groups .rg-filter-count").is_visible()
    tables = page.evaluate(PRINT_JS)
    assert tables
    for t in tables:
        assert t["thead"] == ["table-header-group", "static"], t["id"]
        assert set(t["thPositions"]) == {"static"}, t["id"]
        assert set(t["sortButtons"]) == {"contents"}, t["id"]  # a button is not painted in a repeated header
        assert set(t["cols"]) == {"visible"}, t["id"]  # hidden on screen, printed all the same
        assert min(t["headerWidths"]) > 0, t["id"]
        assert t["filterRow"] == "none", t["id"]
        if t["wide"]:
            assert t["page"] == "rg-wide", t["id"]  # landscape pages
        else:
            assert t["tableWidth"] <= t["boxWidth"] + 1, t
    page.set_viewport_size({"width": A4_LANDSCAPE_PX, "height": 1000})
    for t in page.evaluate(PRINT_JS):
        assert t["tableWidth"] <= t["boxWidth"] + 1, t  # every column on the page, none clipped
    page.locator(f"#{tid}").screenshot(path=str(tmp_path / "overlap-print.png"))
    assert not log.problems(), log.problems()


def test_pdf_repeats_real_header_rows(reports, open_report, tmp_path):
    need_tool("pdftotext", "poppler-utils")
    page, log = open_report(reports("pp2x4"))
    for _ in range(3):  # the page prints the rows it lists: 100 of them run over pages
        page.locator("#communication-ops .rg-list-more").click()
    pdf = tmp_path / "pp2x4.pdf"
    page.pdf(path=str(pdf), format="A4", margin={"top": "12mm", "bottom": "12mm", "left": "10mm", "right": "10mm"})
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    pages = text.split("\f")
    start = next(i for i, p in enumerate(pages) if "Operators (longest first)" in p)
    end = next(i for i in range(start, len(pages)) if "more rows in the CSV" in pages[i])
    assert end > start, "the operator table should run over more than one page"
    for i in range(start, end + 1):
        assert "Duration (" in pages[i] and "Operator" in pages[i], f"page {i + 1} has no header row"
    assert not log.problems(), log.problems()


def test_process_group_control_filters_the_communication_section(reports, open_report):
    """Issue 16: choosing a process group keeps the section's tables to its ranks (a link: both ends) and its
    per-rank chart to its ranks; "All ranks" brings every row back."""
    page, log = open_report(reports("level2"))
    sel = page.locator("#sec-communication select[data-rank-set]")
    assert sel.count() == 1
    per_rank = "communication-per-rank"
    before = len(_listed(page, per_rank))
    sel.select_option(value="[0,1]")
    page.wait_for_timeout(300)
    data = _data(page, per_rank)
    rank_col = data["columns"].index("Rank")
    shown = {data["rows"][i][rank_col] for i in _listed(page, per_rank)}
    assert shown == {0, 1} and before == 4
    links = "communication-links"
    ld = _data(page, links)
    ends = [ld["columns"].index(c) for c in ("Source", "Destination")]
    rows = [ld["rows"][i] for i in _listed(page, links)]
    assert rows and all(r[e] in (0, 1) for r in rows for e in ends)
    for fig in ("communication-ranks", "communication-matrix", "communication-graph"):
        assert page.evaluate(f"window.reportgenCharts.signals('{fig}').comm_group") == [0, 1], fig
    sel.select_option(value='"all"')
    page.wait_for_timeout(300)
    assert len(_listed(page, per_rank)) == before
    assert not log.problems(), log.problems()


def test_namespace_tree_opens_closes_and_prints_open(report_cache, open_report, tmp_path_factory):
    """Issue 16: the namespace tree opens and closes on a click (no script needed: <details>), and printing opens
    every node."""
    from reportgen.synth.mindinsight_strategy import write_strategy_files
    run = tmp_path_factory.mktemp("strategy_run")
    write_strategy_files(run, stages=2, dp=2, mp=2, layers=2, micro=2)
    page, log = open_report(report_cache.get(run), charts="scrolled")
    tree = page.locator("#strategy-namespace-tree")
    assert tree.count() == 1
    closed = tree.locator("details.rg-tree-node:not([open])")
    n_closed = closed.count()
    assert n_closed > 0
    first = closed.first.element_handle()  # the element, not the selector (which matches closed nodes only)
    summary = first.query_selector(":scope > summary")
    summary.click()
    assert first.evaluate("d => d.open") is True
    summary.click()
    assert first.evaluate("d => d.open") is False
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    assert tree.locator("details.rg-tree-node:not([open])").count() == 0
    page.evaluate("window.dispatchEvent(new Event('afterprint'))")
    assert tree.locator("details.rg-tree-node:not([open])").count() == n_closed
    assert not log.problems(), log.problems()


def test_rank_cell_sets_the_rank_picker(reports, open_report):
    """Issue 27 #21: a rank cell of any table links to #rank-N; following it sets the execution section's rank picker
    (its control and its figure's signal) to that rank and shows the figure; the address keeps #rank-N."""
    page, log = open_report(reports("pp2x4"), charts="scrolled")  # following a link draws the chart it shows
    link = page.locator("a[href='#rank-3']").first
    assert link.count() == 1
    link.scroll_into_view_if_needed()
    link.click()
    page.wait_for_function("document.documentElement.dataset.viewShown === 'drill-rank-any'", timeout=30000)
    assert page.evaluate("window.reportgenCharts.signals('drill-rank-any').drill_rank") == 3
    assert page.locator("select[data-signal='drill_rank']").input_value() == "3"
    assert page.evaluate("location.hash") == "#rank-3"
    # a chart with the rank on an axis: clicking one of its marks opens that rank's detail the same way
    fig = page.locator("#trajectory-heatmap .rg-chart")
    fig.scroll_into_view_if_needed()
    page.wait_for_selector("#trajectory-heatmap .rg-chart[data-rendered]", state="attached")
    assert "rg-clickable" in (fig.get_attribute("class") or "")
    page.evaluate("delete document.documentElement.dataset.viewShown")
    box = fig.bounding_box()
    page.mouse.click(box["x"] + 90, box["y"] + 25)  # the first rank's row (rank 0), a step's cell
    page.wait_for_function("document.documentElement.dataset.viewShown === 'drill-rank-any'", timeout=30000)
    assert page.evaluate("location.hash") == "#rank-0"
    assert page.evaluate("window.reportgenCharts.signals('drill-rank-any').drill_rank") == 0
    assert not log.problems(), log.problems()


def test_fuzzy_text_filter(reports, open_report):
    """A text filter starting with ~ keeps the rows whose value has its letters in that order (seed row #73, the
    operator search's fuzzy match); without ~ it is the substring filter."""
    page, log = open_report(reports("level2"), charts="scrolled")
    tid = "operators-type-names"
    d = _data(page, tid)
    oi = d["columns"].index("Operator")
    box = _filter(page, tid, "Operator")
    if box.evaluate("el => el.tagName") != "INPUT":
        pytest.skip("few operators: the column has a value list")

    def fuzzy(s, sub):
        it = iter(s.lower())
        return all(ch in it for ch in sub)

    box.fill("~mmv3")
    want = [i for i, r in enumerate(d["rows"]) if fuzzy(r[oi], "mmv3")]
    assert _listed(page, tid) == _first(page, tid, want) and 0 < len(want) < len(d["rows"])
    box.fill("mmv3")  # substring: no operator name holds "mmv3"
    assert _listed(page, tid) == _first(page, tid, [i for i, r in enumerate(d["rows"]) if "mmv3" in r[oi].lower()])
    box.fill("~")  # the fuzzy filter being typed: no filter yet (it listed 0 rows)
    assert len(_listed(page, tid)) == min(len(d["rows"]), len(page.locator(f"#{tid} tbody tr[data-i]").all()))
    assert _listed(page, tid)
    assert not log.problems(), log.problems()


def test_an_open_column_picker_stays_above_what_follows(reports, open_report):
    """On screen every figure and table box is laid out on its own (report.css: contain + will-change, so a chart
    drawn above the viewport does not repaint the page below it; issue 30 #3). The column picker of the shortest
    table still overflows its box and covers the figure or table after it."""
    page, log = open_report(reports("demo"), charts="scrolled")
    contain, will = page.evaluate("""() => [getComputedStyle(document.querySelector('.rg-figure')).contain,
                                           getComputedStyle(document.querySelector('.rg-table')).willChange]""")
    assert "layout" in contain and will == "transform"
    tid = page.evaluate("""() => { let best = null, n = 1e9;
        document.querySelectorAll('.rg-table').forEach(t => {
          const rows = t.querySelectorAll('tbody tr').length;
          if (t.querySelector('.rg-colpick summary') && rows && rows < n) { n = rows; best = t.id; } });
        return best; }""")
    assert tid
    page.locator(f"#{tid}").scroll_into_view_if_needed()
    page.locator(f"#{tid} .rg-colpick summary").click()
    panel = page.locator(f"#{tid} .rg-colpick-panel")
    panel.wait_for(state="visible")
    p, t = panel.bounding_box(), page.locator(f"#{tid}").bounding_box()
    assert p["y"] + p["height"] > t["y"] + t["height"], "the panel is expected to overflow this short table's box"
    # a point of the panel below the table's box: the panel is what is there, not the box after the table
    y = (max(p["y"], t["y"] + t["height"]) + p["y"] + p["height"]) / 2
    on_top = page.evaluate("([id, x, y]) => !!document.elementFromPoint(x, y).closest('#' + id + ' .rg-colpick-panel')",
                           [tid, p["x"] + p["width"] / 2, y])
    assert on_top
    assert not log.page_errors
