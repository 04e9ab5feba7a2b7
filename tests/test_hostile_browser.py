"""Reports of runs whose names are hostile, opened in Chromium (issue 14, point 8).

Generated runs of the three families get operator, kernel, kernel-type, host and process-group names holding
U+2028 / U+2029 (which a JavaScript string literal cannot hold: Vega-Lite builds expressions from sort orders),
``</script>``, ``<!--``, event-handler attributes, ``javascript:`` URLs, ``href=``, quotes, RTL marks, template
syntax and a 20,000-character name. Both pages (normal and ``--static``) must draw every chart, show the names as
text, open no dialog, request nothing but the file itself and log no error. Uses test_browser.py's browser.
"""

from __future__ import annotations

import csv
import io
import json
import re
from html import unescape as html_unescape
from pathlib import Path

import pytest

from reportgen import render
from reportgen.cli import main
from reportgen.synth import (AscendSpec, KinetoSpec, MindInsightSpec, write_ascend_run, write_kineto_run,
                             write_mindinsight_run)

from test_browser import CHART_STATE_JS, TIMEOUT_MS, browser, open_report  # noqa: F401 - pytest fixtures
from test_html_safety import parse

#: one name holding every class of hostile text (no comma or line break: it also goes into CSV headers)
HOSTILE = ("\u2028\u2029</script><script>window.__pwned=1</script><!--<img src=x onerror=\"window.__pwned=2\"> "
           "javascript:alert(3) <a href=\"javascript:alert(4)\">x</a> href=x 'q' \"dq\" \u202eRTL\u200f "
           "<svg onload=alert(5)> ${alert(6)} {{7*7}}")
LONG = "L" * 20_000 + HOSTILE
#: what a reader must find as text in the page (the rest of HOSTILE may be cut to a chart's label length)
VISIBLE = 'onerror="window.__pwned=2">'

STATIC_MARKS_JS = """
() => Array.from(document.querySelectorAll('figure.rg-figure')).map(fig => ({
  id: fig.id,
  svg: fig.querySelectorAll('.rg-static .rg-scheme-light svg').length,
  dark: fig.querySelectorAll('.rg-static .rg-scheme-dark svg').length,
  marks: fig.querySelectorAll('.rg-static .rg-scheme-light svg .role-mark > *').length,
  left_out: fig.querySelector('.rg-muted') ? fig.querySelector('.rg-muted').textContent : null,
}))
"""


def _kineto(root: Path) -> None:
    write_kineto_run(root, KinetoSpec(hosts=2, devices_per_host=1, stages=2, steps=3, micro_batches=2, gzip=False))
    for i, p in enumerate(sorted(root.glob("*.json"))):
        doc = json.loads(p.read_text(encoding="utf-8"))
        doc["host_name"] = f"node{i}{HOSTILE}"
        for pg in doc["distributedInfo"]["pg_config"]:
            pg["pg_desc"] = pg["pg_desc"] + HOSTILE
        for n, e in enumerate(doc["traceEvents"]):
            name = e.get("name", "")
            if e.get("cat") == "kernel" and name.startswith("sm80"):
                e["name"] = ("gemm" + HOSTILE) if n % 2 else LONG
            elif e.get("cat") == "cpu_op" and name == "aten::mm":
                e["name"] = "aten::mm" + HOSTILE
        p.write_text(json.dumps(doc), encoding="utf-8")


def _ascend(root: Path) -> None:
    write_ascend_run(root, AscendSpec(hosts=1, devices_per_host=2, stages=1, steps=3, microbatches=4))
    for p in root.rglob("kernel_details.csv"):
        rows = list(csv.reader(p.open(encoding="utf-8", newline="")))
        t, n = rows[0].index("Type"), rows[0].index("Name")
        for i, r in enumerate(rows[1:]):
            if r[t].startswith("MatMul"):
                r[t] = "MatMul" + HOSTILE
                r[n] = LONG if i % 2 else r[n] + HOSTILE
        buf = io.StringIO()
        csv.writer(buf).writerows(rows)
        p.write_text(buf.getvalue(), encoding="utf-8")


def _mindinsight(root: Path) -> None:
    write_mindinsight_run(root, MindInsightSpec(hosts=1, devices_per_host=4, stages=2, steps=3, hostile_name=HOSTILE))


BUILDERS = {"mindinsight": _mindinsight, "ascend": _ascend, "kineto": _kineto}


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[tuple[str, bool], Path]:
    """(family, static) -> report. --static for Kineto (kernel, host and group names)."""
    root = tmp_path_factory.mktemp("hostile")
    out = {}
    for family, build in BUILDERS.items():
        run = root / f"run_{family}"
        build(run)
        for static in (False, True) if family == "kineto" else (False,):
            html = root / f"{family}{'-static' if static else ''}.html"
            assert main([str(run), "-o", str(html), "--quiet", *(["--static"] if static else [])]) == 0
            out[(family, static)] = html
    return out


def _check_log(log, html: Path) -> None:
    assert not log.dialogs, log.dialogs
    assert log.requests == [html.resolve().as_uri()], log.requests
    assert not log.problems(), log.problems()


@pytest.mark.parametrize("family", list(BUILDERS))
def test_hostile_names_every_chart_draws(reports, open_report, family):
    html = reports[(family, False)]
    page, log = open_report(html)
    charts = page.evaluate(CHART_STATE_JS)
    assert len(charts) >= 10
    for c in charts:
        assert c["error"] is None, f"chart {c['id']} failed: {c['error']}"
        assert c["rendered"] == "1", f"chart {c['id']} was not drawn"
        assert c["scene"] > 0 and (c["marks"] > 0 or c["canvas"] > 0), f"chart {c['id']} has no marks"
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("body img").count() == 0 and page.locator("main svg a").count() == 0
    assert VISIBLE in page.evaluate("document.body.innerText"), "the hostile name is not shown as text"
    _check_log(log, html)


@pytest.mark.parametrize("family", ["kineto"])
def test_hostile_names_static_keeps_every_chart(reports, browser, family):  # noqa: F811 - pytest fixture
    html = reports[(family, True)]
    text = html.read_text(encoding="utf-8")
    assert "<script" not in text.lower()
    assert "left out of the static report" not in text and "could not be drawn statically" not in text
    for tag, attrs in parse(text).tags:
        assert tag not in ("script", "a", "image", "use", "foreignobject", "iframe") or (
            tag == "a" and attrs.get("href", "").startswith("#")), (tag, attrs)
        for name, value in attrs.items():
            assert not name.startswith("on"), (tag, name, value)
            assert not (name.endswith("href") and not (value or "").startswith("#")), (tag, name, value)
    svg_markup = "".join(re.findall(r"<svg\b.*?</svg>", text, re.S))
    assert "javascript:alert(3)" in svg_markup  # the label is drawn, as text

    ctx = browser.new_context(java_script_enabled=True)
    try:
        page = ctx.new_page()
        dialogs, requests, errors = [], [], []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        page.on("request", lambda r: requests.append(r.url))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(html.resolve().as_uri(), timeout=TIMEOUT_MS)
        figures = page.evaluate(STATIC_MARKS_JS)
        assert len(figures) >= 10
        for f in figures:
            assert f["svg"] == 1 and f["dark"] == 1 and f["marks"] > 0, f
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert not dialogs and not errors, (dialogs, errors)
        assert requests == [html.resolve().as_uri()], requests
    finally:
        ctx.close()


def test_page_json_and_chart_text_are_safe():
    """The one place JSON enters the page, and the one place chart strings are made drawable."""
    out = str(render.script_json({"a": HOSTILE, "b": ["\u2028", "é"]}))
    assert out.isascii() and not re.search(r"[<>&']", out) and "\\u2028" in out
    assert json.loads(out) == {"a": HOSTILE, "b": ["\u2028", "é"]}
    spec = render.chart_spec({"data": {"values": [{"n": LONG}]}, "encoding": {"y": {"sort": [LONG]}},
                              "transform": [{"calculate": "datum.x + ' \u2028'", "as": "y"}]})
    label = spec["data"]["values"][0]["n"]
    assert label == spec["encoding"]["y"]["sort"][0]  # data and sort order still match
    assert len(label) < render.CHART_TEXT_CHARS + 30 and label.endswith(f"…[+{len(LONG) - render.CHART_TEXT_CHARS} chars]")
    assert "\u2028" not in json.dumps(spec, ensure_ascii=False)
    assert render.chart_spec("a\u2028b") == "a\\u2028b"


def test_chart_data_rows_are_cleaned_as_any_other_object_of_a_spec():
    """chart_spec walks a list's dicts (the data rows) without a call per plain value: each row must come out as the
    same dict does on its own (the general path), for every kind of value and key: non-finite and numpy floats, ints,
    bools, None, long / non-ASCII / bidi / U+2028 text, an expression key, a non-string key, nested lists and dicts."""
    import numpy as np

    values = [1.5, float("nan"), float("inf"), -0.0, np.float64(2.5), np.float64("nan"), np.int64(3), 7, True, None,
              "ok", LONG, "é", "a\u2066b", "x\u2028y", "datum.x + ' \u2028'", [1.0, float("nan"), LONG],
              {"k": LONG, "filter": "a\u2029b"}, (1, 2)]
    keys = ["n", "filter", "calculate", 5, "é"]
    rows = [{k: v for k in keys} for v in values] + [{k: values[(i + j) % len(values)] for j, k in enumerate(keys)}
                                                      for i in range(len(values))]
    got = render.chart_spec({"data": {"values": rows}, "datasets": {"d": rows}})
    want = [render.chart_spec(r) for r in rows]
    assert got["data"]["values"] == got["datasets"]["d"]
    assert json.dumps(got["data"]["values"]) == json.dumps(want)


def test_a_table_cell_is_cleaned_as_json_safe_then_fmt_clean():
    """render._clean's plain-type shortcut gives what _json_safe then fmt.clean give, for every kind of cell."""
    import numpy as np

    from reportgen import fmt

    for v in [0.1 + 0.2, 48.3092480000003, -0.0, 0.0, float("nan"), float("inf"), -float("inf"), 1e308, 5e-324, 7,
              True, None, "x", np.float64(0.1 + 0.2), np.float64("nan"), np.int64(3), np.bool_(True), [1.5, None],
              (0.1 + 0.2,), {"a": float("nan")}, b"x"]:
        want = render._json_safe(v)
        want = fmt.clean(want) if isinstance(want, float) else want
        got = render._clean(v)
        assert json.dumps(got) == json.dumps(want, default=repr) if not isinstance(v, bytes) else got == want
        assert type(got) is type(want)


def test_static_svg_cleaner_keeps_text_drops_active_content():
    svg = ('<svg xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink" onload="x()">'
           '<g class="role-mark" onclick="y()"><path d="M0,0" fill="url(#g1)" clip-path="url(https://e.x/c)"/>'
           '<text aria-label="javascript:alert(1)">javascript:alert(1) href=x onerror=z &lt;script&gt;</text>'
           '<a xlink:href="javascript:alert(2)"><text>link</text></a><script>alert(3)</script>'
           '<foreignObject><div>html</div></foreignObject><use href="#g1"/>'
           '<image href="https://e.x/i.png"/></g></svg>')
    out = render.clean_svg(svg)
    assert out is not None
    assert "javascript:alert(1) href=x onerror=z &lt;script&gt;</text>" in out  # text kept, escaped
    assert 'fill="url(#g1)"' in out
    for gone in ("onload", "onclick", "clip-path", "alert(2)", "alert(3)", "<a", "foreignObject", "<use", "<image",
                 "e.x"):
        assert gone not in out, gone
    assert render.clean_svg("<svg><unclosed></svg>") is None
    assert render.clean_svg('<!DOCTYPE svg [<!ENTITY a "b">]><svg xmlns="http://www.w3.org/2000/svg"/>') is None


def test_page_budgets_hold(monkeypatch):
    """Rows embedded per table, bytes per chart spec and options per control are bounded, with a note."""
    from reportgen.report import Column, Control, Figure, Table
    from test_html_safety import _hostile_context

    monkeypatch.setattr(render, "MAX_EMBEDDED_ROWS", 1000)
    rows = [{"op": f"op{i}", "ms": float(i)} for i in range(1500)]
    t = render._table_ctx(Table("big", "Big", [Column("op", "Op", kind="text"), Column("ms", "Time", kind="ms")], rows))
    assert len(t["rows"]) == 1000 and t["rows_total"] == 1500 and t["rows_left_out"] == 500
    monkeypatch.setattr(render, "MAX_EMBEDDED_BYTES", 20_000)
    t = render._table_ctx(Table("long", "Long", [Column("op", "Op", kind="text")], [{"op": LONG}] * 10,
                                max_html_rows=2))
    assert len(t["rows"]) == 2 and t["rows_left_out"] == 8  # the rows listed as HTML stay in the data
    assert len(t["cells"][0][0]) < render.CELL_TEXT_CHARS + 30  # shown cut, the cut stated
    assert t["cells"][0][0].endswith(" chars]")

    ctx = _hostile_context()
    ctx["sections"][0]["tables"] = [t]
    monkeypatch.setattr(render, "MAX_SPEC_BYTES", 100)
    ctx["sections"][0]["figures"] = [render._figure_ctx(Figure("big-fig", "Big", {"data": {"values": [{"n": LONG}]}}))]
    n = render.MAX_OPTIONS + 5000
    ctx["sections"][0]["controls"] = [render._control_ctx(Control("step", "Step", [(i, str(i)) for i in range(n)],
                                                                  n - 1))]
    html = render.render_html(ctx)
    assert "8 of the 10 rows are left out of this page" in html
    assert "This chart was left out: its data takes" in html and 'id="big-fig-spec"' not in html
    # a control of many options writes its default; the first MAX_OPTIONS (and the default) wait as data
    assert html.count("<option ") == 1 and f"Step (first {render.MAX_OPTIONS:,} of {n:,})" in html
    later = json.loads(html_unescape(re.search(r"data-options='([^']*)'", html).group(1)))
    assert len(later) == render.MAX_OPTIONS + 1 and later[-1] == [n - 1, str(n - 1)]
    assert len(html) < 3_000_000


def test_metrics_json_budget(monkeypatch):
    import pandas as pd

    from reportgen import metrics
    from reportgen.model import Run
    from reportgen.report import SectionOutcome

    class Analysis:
        metrics = {"name": LONG}
        tables = {"ops": pd.DataFrame({"op": [LONG] * 30, "ms": range(30)})}

    from reportgen import document

    monkeypatch.setattr(document, "MAX_TABLE_ROWS", 20)
    monkeypatch.setattr(document, "summary", lambda run, outcomes: {})
    out = SectionOutcome(id="communication", title="C", status="ok", analysis=Analysis())
    doc = metrics.build(Run(name="r", source_format="kineto", source_path="/x"), [out])
    block = doc["sections"]["communication"]
    assert len(block["tables"]["ops"]) == 20 and block["tables_left_out"] == {"ops": {"rows": 30, "left_out": 10}}
    assert block["tables"]["ops"][0]["op"].endswith(f"…[+{len(LONG) - 4096} chars]")
    text = metrics.dumps({"a": "x\ud800"})
    # a lone surrogate is written as U+FFFD, as on the page: every value can be held by a strict UTF-8 reader (issue 29)
    assert json.loads(text) == {"a": "x\ufffd"} and text.encode("utf-8") and "\\ud800" not in text


def test_bidi_controls_are_shown_not_obeyed():
    """A host or op name holding U+202E would reverse the text after it ("(rank 0)" read "(0 knar)"): the page and
    the charts show such controls as text."""
    assert render._finalize("node0\u202eLTR") == "node0\\u202eLTR"
    assert render.chart_spec({"data": {"values": [{"name": "a\u2066b"}]}})["data"]["values"][0]["name"] == "a\\u2066b"
