"""Issue 13 "Done when": every reference report in real Chromium, light, dark and print media and --static,
judged by the checks of tests/quality.py (overflow, digits, overlap, contrast in dark, static text inside
its SVG). One test per report x rendering x check, so a failure names exactly what is wrong where.

Each report (and its --static twin) is generated once per module, by a worker process while the browser
checks the previous one; each rendering is drawn once (print reuses the light page: ``beforeprint``, print
media, A4 printable width). Without a browser these tests skip, and fail under CI (as tests/test_browser.py).

Cost: generating the reports (--static ones above all) and drawing the pages; measured ~70-77 s wall on
the shared 2-core machine at load 8-12 (~35 s CPU). Only what the selected tests need is generated and drawn,
so ``-k "demo or st-level2"`` or ``-k "dark"`` runs a subset for less.

The 8-rank gloo 2x2x2 run of the issue is not here: reportgen/synth/kineto.py (KinetoSpec) writes GPU/NCCL
traces only (no CPU/gloo backend, no tp dimension), so it cannot make that layout.
"""

from __future__ import annotations

import multiprocessing
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

import pytest

import quality
from conftest import fixture_dir
from reportgen.cli import main
from test_browser import _chromium, _unavailable

#: report name -> its run argument
REPORTS = {
    "demo": lambda: "demo",
    "pp2x4": lambda: str(fixture_dir("mindinsight", "mi_cluster_propose_pp2x4")),
    "st-level2": lambda: str(fixture_dir("ascend", "msinsight", "test", "st", "level2")),
    "gloo-ddp4": lambda: str(fixture_dir("generated", "torch_gloo_ddp4_baseline")),
    "gloo-mesh": lambda: str(fixture_dir("kineto", "generated_cpu_gloo_4rank_mesh2x2")),
    "hta-trace-filter": lambda: str(fixture_dir("kineto", "hta_tests_data", "tests", "data", "trace_filter")),
}
#: the renderings of a report: the three media of the JS report, and the --static report (light)
RENDERINGS = ("light", "print", "dark", "static")


def _medium(rendering: str) -> str:
    return "light" if rendering == "static" else rendering


CASES = [(r, m, c) for r in REPORTS for m in RENDERINGS for c in quality.checks_for(_medium(m), m == "static")]


class _Reports:
    """The reports the selected tests need, generated once each, in the order the tests need them, by one
    worker process (spawned: it shares neither the GIL nor any state with the browser driver; ``-j 1``: no
    process pool of its own); ``path`` waits for the one asked for. A missing fixture's skip (or failure
    under CI) is raised again in the tests that need it."""

    def __init__(self, tmp: Path, wanted: list[tuple[str, bool]], cache=None):
        self.pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn"))
        self.jobs: dict[tuple[str, bool], tuple[Future, Path, list[str], list[str]]] = {}
        self.cache = cache  # conftest.ReportCache: reports other test files built already, and shared back
        self.missing: dict[str, BaseException] = {}
        runs: dict[str, str] = {}
        for name, static in wanted:
            if name not in runs and name not in self.missing:
                try:
                    runs[name] = REPORTS[name]()
                except (pytest.skip.Exception, pytest.fail.Exception) as exc:
                    self.missing[name] = exc
            if name in runs:
                extra = ["--static"] if static else []
                known = self.cache.peek(runs[name], *extra) if self.cache is not None else None
                if known is not None:
                    done: Future = Future()
                    done.set_result(0)
                    self.jobs[(name, static)] = (done, known, [runs[name], *extra], extra)
                    continue
                out = tmp / f"{name}{'-static' if static else ''}.html"
                argv = [runs[name], "-o", str(out), "--json", str(out.with_suffix(".json")), "--quiet", "-j", "1"] + extra
                self.jobs[(name, static)] = (self.pool.submit(main, argv), out, argv, extra)

    def path(self, name: str, static: bool) -> Path:
        if name in self.missing:
            raise self.missing[name]
        future, out, argv, extra = self.jobs[(name, static)]
        assert future.result() == 0, f"reportgen {' '.join(argv)} failed"
        if self.cache is not None:
            self.cache.put(argv[0], extra, out)
        return out

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture(scope="module")
def selected(request) -> list[tuple[str, str]]:
    """(report, rendering) of the selected report tests (-k may pick a few), in run order; print needs light."""
    out: list[tuple[str, str]] = []
    for item in request.session.items:
        params = item.callspec.params if getattr(item, "module", None) is request.module and hasattr(
            item, "callspec") else {}
        if "rendering" in params:
            r = params["report"]
            for rendering in ("light", "print") if params["rendering"] == "print" else (params["rendering"],):
                if (r, rendering) not in out:
                    out.append((r, rendering))
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory, selected, report_cache):
    wanted = list(dict.fromkeys((r, rendering == "static") for r, rendering in selected))
    r = _Reports(tmp_path_factory.mktemp("quality"), wanted, report_cache)
    yield r
    r.close()


@pytest.fixture(scope="module")
def qbrowser():
    """Chromium with its scrollbars drawn (quality.launch), from the process's Playwright driver (conftest._Driver)."""
    import conftest

    exe = _chromium()
    if not exe:
        _unavailable("no Chromium found: set REPORTGEN_CHROMIUM, or install Debian's chromium")
    try:
        b = quality.launch(conftest._DRIVER.playwright(), exe)
    except Exception as exc:  # noqa: BLE001 - any launch failure means "no usable browser"
        _unavailable(f"Chromium at {exe} did not start: {exc}")
    yield b
    b.close()


@pytest.fixture(scope="module")
def facts(reports, qbrowser, selected):
    """facts(report, rendering) -> the raw facts of that rendering. The first call for a report opens all
    its selected renderings at once (their charts draw in parallel), then collects each; print is the light
    page turned to print after its light facts are taken."""
    cache: dict[tuple[str, str], dict] = {}

    def load(name: str) -> None:
        opened = {}
        try:
            for rendering in RENDERINGS:
                if rendering != "print" and (name, rendering) in selected:
                    path = reports.path(name, rendering == "static")
                    opened[rendering] = quality.Opening(qbrowser, path, _medium(rendering))
            for rendering, o in opened.items():
                page = o.ready()
                cache[(name, rendering)] = quality.collect(page, _medium(rendering))
                if rendering == "light" and (name, "print") in selected:
                    quality.to_print(page)
                    cache[(name, "print")] = quality.collect(page, "print")
        finally:
            for o in opened.values():
                o.close()

    def get(name: str, rendering: str) -> dict:
        if (name, rendering) not in cache:
            load(name)
        return cache[(name, rendering)]

    return get


@pytest.mark.parametrize("report,rendering,check", CASES, ids=["-".join(c) for c in CASES])
def test_report_quality(facts, report, rendering, check):
    f = facts(report, rendering)
    if rendering == "static":
        assert f["static"], "the --static report still draws charts with JavaScript"
    else:
        assert not f["static"]
    assert f["charts"], "no chart was found on the page"
    violations = quality.CHECK_FUNCS[check](f)
    assert not violations, f"{len(violations)} {check} violation(s) in {report} ({rendering}):\n" + "\n".join(
        map(str, violations))


# ---- the checks themselves: they must catch what they are for, and nothing else -------------------------

PLANTED = """<!DOCTYPE html><html><head><style>
body { margin: 0; font: 14px sans-serif; background: #15181c; color: #eee; }
.box { width: 300px; }
.rg-table-scroll { overflow-x: auto; }
.hidden-bar { scrollbar-width: none; }
</style></head><body>
<figure id="wide-chart" class="rg-figure box"><div class="rg-chart" style="overflow-x:auto">
  <svg width="600" height="100" style="background-color: rgb(21, 24, 28)">
    <text x="10" y="20" fill="#fff">one label</text><text x="40" y="22" fill="#fff">other label</text>
    <text x="10" y="90" fill="#000">black on dark</text>
    <text x="200" y="60" fill="#fff" opacity="0">hidden</text><text x="205" y="62" fill="#fff">shown</text>
    <g class="mark-rule role-axis-domain"><line x1="0" x2="300" y1="95" y2="95" stroke="#000"></line></g>
    <g class="mark-rule role-axis-grid"><line x1="0" x2="300" y1="50" y2="50" stroke="#222"></line></g>
  </svg></div></figure>
<figure id="fine-chart" class="rg-figure box"><div class="rg-chart">
  <svg width="280" height="120" style="background-color: rgb(21, 24, 28)">
    <g class="mark-rect role-mark"><path d="M0,0h100v40h-100Z" fill="#ffffff"></path></g>
    <text x="10" y="25" fill="#000">dark on a white cell</text>
    <g class="mark-rect role-mark"><path d="M150,0h60v40h-60Z" fill="#0a4a90"></path></g>
    <text x="170" y="25" fill="#000">3</text>
    <text transform="translate(120,115) rotate(-45)" fill="#ddd">rotated label one</text>
    <text transform="translate(150,115) rotate(-45)" fill="#ddd">rotated label two</text>
    <text x="150" y="100" fill="#fff">  </text>
  </svg></div></figure>
<figure id="static-chart" class="rg-figure box"><div class="rg-chart rg-static">
  <svg width="200" height="60"><rect width="200" height="60" fill="white"></rect>
    <text x="-8" y="20" fill="#000">cut on the left</text><text x="20" y="40" fill="#000">inside</text>
  </svg></div></figure>
<div id="tbl-ok" class="rg-table box"><div class="rg-table-scroll"><table style="width:900px">
  <thead><tr><th class="rg-col-text">Name</th><th class="rg-col-num" data-kind="ms">Step (ms)</th>
    <th class="rg-col-num" data-kind="flop">FLOPs</th><th class="rg-col-num" data-kind="int">Calls</th>
    <th class="rg-col-num">Value</th><th class="rg-col-num" data-kind="int">Size (MB)</th></tr></thead>
  <tbody><tr><td class="rg-col-text">a</td><td class="rg-col-num">187.9</td><td class="rg-col-num">12.01</td>
    <td class="rg-col-num">1,234,567</td><td class="rg-col-num">0.200000</td>
    <td class="rg-col-num">18,780</td></tr>
  <tr><td class="rg-col-text">b</td><td class="rg-col-num">187.8737</td><td class="rg-col-num">12,008,762,441,000</td>
    <td class="rg-col-num">3.14159</td><td class="rg-col-num">1</td>
    <td class="rg-col-num">1</td></tr>
  <tr hidden><td class="rg-col-text">c</td><td class="rg-col-num">1.23456789</td><td class="rg-col-num">1</td>
    <td class="rg-col-num">1</td><td class="rg-col-num">1</td></tr></tbody></table></div></div>
<div id="tbl-hidden-bar" class="rg-table box"><div class="rg-table-scroll hidden-bar"><table style="width:900px">
  <tbody><tr><td>x</td></tr></tbody></table></div></div>
<div id="tbl-no-scroll" class="rg-table box"><div class="rg-table-scroll" style="overflow:visible">
  <table style="width:900px">
  <tbody><tr><td>x</td></tr></tbody></table></div></div>
</body></html>"""


@pytest.fixture(scope="module")
def planted(qbrowser, tmp_path_factory):
    path = tmp_path_factory.mktemp("planted") / "planted.html"
    path.write_text(PLANTED, encoding="utf-8")
    out = {}
    for medium in ("light", "print"):
        ctx, page = quality.open_page(qbrowser, path, "light")
        try:
            if medium == "print":
                quality.to_print(page)
            out[medium] = quality.collect(page, medium)
        finally:
            ctx.close()
    return out


def _by_where(violations):
    return {v.where: v.detail for v in violations}


def test_planted_overflow(planted):
    light = _by_where(quality.check_overflow(planted["light"]))
    assert set(light) == {"wide-chart chart", "tbl-hidden-bar table scroll area",
                          "tbl-no-scroll table scroll area"}, light  # not tbl-ok: a real scroll area
    assert "600 px wide in a 300 px box" in light["wide-chart chart"]
    # paper does not scroll: the table in a real scroll area fails in print too
    assert "tbl-ok table scroll area" in _by_where(quality.check_overflow(planted["print"]))


def test_planted_digits(planted):
    got = [str(v) for v in quality.check_digits(planted["light"])]
    text = "\n".join(got)
    assert "'Step (ms)'" in text and "1 of 2 cells" in text and "'187.8737'" in text  # the hidden row is not read
    assert "'FLOPs': header names no unit for kind 'flop'" in text
    assert "'12,008,762,441,000'" in text
    assert "'3.14159'" in text and "'1,234,567'" not in text  # int column: integers exempt, decimals not
    assert "'Value'" in text and "'0.200000'" in text and "without data-kind" in text
    assert "'Calls': header" not in text and "'Step (ms)': header" not in text
    assert "'Size (MB)': a quantity with a unit is typed 'int'" in text


def test_planted_overlap_contrast_static(planted):
    f = planted["light"]
    overlap = _by_where(quality.check_overlap(f))
    assert set(overlap) == {"wide-chart chart"}, overlap  # rotated neighbours whose boxes' AABBs meet: no overlap
    assert "'one label' / 'other label'" in overlap["wide-chart chart"] and "hidden" not in overlap["wide-chart chart"]
    contrast = _by_where(quality.check_contrast(f))
    assert set(contrast) == {"wide-chart chart", "fine-chart chart"}, contrast
    assert contrast["fine-chart chart"].startswith("1 item(s)") and "text '3' #000000 on #0a4a90" in contrast[
        "fine-chart chart"]  # judged on its cell, like the black text on the white cell (which passes)
    assert "'black on dark'" in contrast["wide-chart chart"] and "rule role-axis-domain" in contrast["wide-chart chart"]
    assert "2 item(s)" in contrast["wide-chart chart"]  # not the grid line, not the white texts
    static = _by_where(quality.check_static_text(f))
    assert list(static) == ["static-chart chart"] and "'cut on the left' (left)" in static["static-chart chart"]


def test_significant_digits():
    sd = quality.significant_digits
    assert [sd(t) for t in ("187.8737", "187.9", "0.0422", "12,000", "12,346", "0.200000", "0.000", "7", "-3.5e+05",
                            "1,234.5")] == [7, 4, 3, 2, 5, 6, 3, 1, 2, 5]
    assert quality.numbers_in("1.2 / 3,456 ms, 25%") == ["1.2", "3,456", "25"]
    assert quality.numbers_in("rank 0: 1→0 SDMA") == ["0", "1", "0"]


def test_overlap_geometry_and_contrast_maths():
    a = [[0, 0], [10, 0], [10, 5], [0, 5]]
    assert quality.overlap_depth(a, [[9.5, 0], [20, 0], [20, 5], [9.5, 5]]) == pytest.approx(0.5)
    assert quality.overlap_depth(a, [[11, 0], [20, 0], [20, 5], [11, 5]]) < 0
    # two 45-degree strips side by side: their axis-aligned boxes overlap, the strips do not
    s1 = [[0, 10], [10, 0], [12, 2], [2, 12]]
    s2 = [[5, 10], [15, 0], [17, 2], [7, 12]]
    assert quality.overlap_depth(s1, s2) < 0
    assert quality.contrast((0, 0, 0), (255, 255, 255)) == pytest.approx(21.0)
    assert quality.contrast((21, 24, 28), (0, 0, 0)) == pytest.approx(1.18, abs=0.01)
    assert quality.composite(["rgba(0, 0, 0, 0)", "rgba(255, 255, 255, 0.5)", "rgb(0, 0, 0)"]) == (127.5, 127.5, 127.5)
    assert quality.parse_color("none") is None and quality.parse_color("#abc") == (170, 187, 204, 1.0)
