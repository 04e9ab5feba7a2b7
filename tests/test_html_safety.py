"""Static safety checks of the HTML (no browser): one bundle, inert JSON, no external URLs, escaping.

Scripts are split the way a browser's tokenizer does it: a script element ends at the first
``</script``. So a JSON body that is cut short, a classic script that is not one of our three
trusted assets, or a tag built from trace text shows up here as a failure.
"""

from __future__ import annotations

import json
from collections import Counter
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from reportgen import render
from reportgen.cli import main

HOSTILE_TITLE = "<script>window.__pwned=3</script>{{7*7}}"
PAYLOAD = ('</script><script>window.__pwned=1</script><img src=x onerror="window.__pwned=2"> '
           "<!--<script> {{ 7*7 }} {% raw %} \"><svg onload=alert(1)> 'q' & \u2028 end")
SCRIPT_RE = re.compile(r"<script\b([^>]*)>(.*?)</script\s*>", re.S | re.I)
URL_ATTRS = {"src", "href", "action", "formaction", "poster", "srcset", "data", "xlink:href", "background"}
ALLOWED_TAGS = {
    "html", "head", "meta", "title", "style", "body", "a", "div", "nav", "p", "ol", "ul", "li", "span", "main",
    "header", "h1", "h2", "h3", "noscript", "dl", "dt", "dd", "code", "section", "details", "summary", "strong",
    "label", "select", "option", "figure", "figcaption", "script", "input", "button", "table", "thead", "tbody",
    "tr", "th", "td", "footer", "colgroup", "col", "wbr",
}


class Tags(HTMLParser):
    """Every start tag with its attributes (script and style bodies are not parsed as markup)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self._raw: str | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._raw = tag

    def handle_endtag(self, tag):
        if tag == self._raw:
            self._raw = None

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        if self._raw is None:  # visible text only, not script or style bodies
            self.text.append(data)


def parse(html: str) -> Tags:
    t = Tags()
    t.feed(html)
    t.close()
    return t


def scripts(html: str) -> list[tuple[str, str]]:
    """(attributes, body) of every script element, split at the first </script as a browser does."""
    return [(m.group(1), m.group(2)) for m in SCRIPT_RE.finditer(html)]


def check_page(html: str, n_json: int | None = None) -> None:
    """Every structural safety property of a rendered report."""
    trusted = [render.vega_bundle(), render.read_asset("charts.js"), render.read_asset("table.js")]

    # the bundle is inlined exactly once, and it is the only copy of its first 2,000 characters
    assert html.count(trusted[0][:2000]) == 1
    assert html.count(trusted[0]) == 1

    found = scripts(html)
    assert "<script" not in SCRIPT_RE.sub("", html).lower(), "a <script opening is not followed by its own end"
    classic = [body for attrs, body in found if "application/json" not in attrs]
    json_bodies = [(attrs, body) for attrs, body in found if "application/json" in attrs]
    # exactly our three trusted scripts run, in this order, byte for byte
    assert classic == trusted
    if n_json is not None:
        assert len(json_bodies) == n_json
    for attrs, body in json_bodies:
        assert re.fullmatch(r'\s*type="application/json" id="[A-Za-z0-9_.:-]+"\s*', attrs), attrs
        assert "<" not in body and ">" not in body and "&" not in body, f"raw markup character in {attrs}"
        assert "\u2028" not in body and "\u2029" not in body
        json.loads(body)  # a body cut short by an early </script would not parse
    for body in classic:
        assert "</script" not in body.lower() and "<!--" not in body

    tags = parse(html).tags
    for tag, attrs in tags:
        assert tag in ALLOWED_TAGS, f"unexpected element <{tag}> {attrs}"
        for name, value in attrs.items():
            assert not name.startswith("on"), f"event handler attribute {name} on <{tag}>"
            if name in URL_ATTRS and value:
                v = value.strip().lower()
                assert not v.startswith(("http://", "https://", "//", "javascript:")), f"<{tag} {name}={value}>"
                if tag in ("a",) and name == "href":
                    assert v.startswith("#"), f"link out of the page: {value}"
    assert ("meta", {"name": "referrer", "content": "no-referrer"}) in tags
    # every id once: links (#finding-n, "see the chart") and the scripts find their element by it (a figure and a
    # table of the strategy section once shared "strategy-mesh")
    ids = Counter(attrs["id"] for _tag, attrs in tags if "id" in attrs)
    assert not [i for i, n in ids.items() if n > 1], f"ids used twice: {[i for i, n in ids.items() if n > 1][:5]}"
    # nothing in the CSS loads anything
    css = render.read_asset("report.css").lower()
    assert "@import" not in css and "url(" not in css


@pytest.fixture(scope="module")
def demo_html(tmp_path_factory) -> str:
    out = tmp_path_factory.mktemp("safety") / "demo.html"
    assert main(["demo", "-o", str(out), "--title", HOSTILE_TITLE, "--quiet"]) == 0
    return out.read_text(encoding="utf-8")


def test_demo_page_structure(demo_html):
    check_page(demo_html)
    n_figures = demo_html.count('<figure class="rg-figure"')
    n_tables = demo_html.count('<table class="rg-sortable"')
    assert n_figures > 0 and n_tables > 0
    n_store = demo_html.count('id="rg-chart-store"')  # the chart data the specs share (render.share_chart_data)
    assert n_store <= 1
    assert len([a for a, _ in scripts(demo_html) if "application/json" in a]) == n_figures + n_tables + n_store


def test_no_network_urls_in_attributes(demo_html):
    # also as a plain text search, independent of the parser
    markup = SCRIPT_RE.sub("", demo_html)
    for m in re.finditer(r"\b(src|href|action)\s*=\s*([\"']?)([^\"'\s>]*)", markup):
        assert not m.group(3).lower().startswith(("http:", "https:", "//")), m.group(0)


def test_charts_js_disables_editor_and_never_fetches():
    js = render.read_asset("charts.js")
    assert re.search(r"\beditor\s*:\s*false\b", js)
    assert not re.search(r"\beditor\s*:\s*true\b", js)
    assert re.search(r"\bsource\s*:\s*false\b", js) and re.search(r"\bcompiled\s*:\s*false\b", js)
    for forbidden in ("fetch(", "XMLHttpRequest", "innerHTML", "outerHTML", "insertAdjacentHTML",
                      "document.write", "eval(", "new Function", "import("):
        assert forbidden not in js, forbidden
    table_js = render.read_asset("table.js")
    for forbidden in ("fetch(", "XMLHttpRequest", "innerHTML", "outerHTML", "insertAdjacentHTML",
                      "document.write", "eval(", "new Function"):
        assert forbidden not in table_js, forbidden


def test_hostile_title_is_escaped(demo_html):
    assert HOSTILE_TITLE not in demo_html
    assert "<script>window.__pwned" not in demo_html
    escaped = "&lt;script&gt;window.__pwned=3&lt;/script&gt;{{7*7}}"
    assert f"<h1>{escaped}</h1>" in demo_html
    assert re.search(r"<title>[^<]*" + re.escape(escaped) + "</title>", demo_html)
    assert "{{7*7}}" in demo_html  # Jinja never evaluates data


# ---- every field of the context, filled with the payload ------------------------------------

def _hostile_context() -> dict:
    spec = {
        "$schema": "https://vega.github.io/schema/vega-lite/v6.json",
        "params": [{"name": "step", "value": 1}],
        "data": {"values": [{"op": PAYLOAD, "step": 1, "ms": 1.5}, {"op": "x", "step": 2, "ms": 2.0}]},
        "transform": [{"filter": "datum.step == step"}],
        "mark": "bar",
        "encoding": {"x": {"field": "op", "type": "nominal"}, "y": {"field": "ms", "type": "quantitative"}},
        "title": PAYLOAD,
    }
    finding = {"id": "slow_rank", "severity": "high", "section": "sec1", "ranks": [1], "links": [[0, 1]],
               "message": PAYLOAD, "suggestion": PAYLOAD, "evidence": {"metric": PAYLOAD, "value": 1.5},
               "figure": "sec1-fig", "view": {"figure": "sec1-fig", "signals": {"step": PAYLOAD, "focus_ranks": [1]}},
               "view_text": PAYLOAD}
    cols = [{"key": "op", "label": PAYLOAD, "kind": "text", "help": PAYLOAD, "unit": "", "factor": 1.0,
             "header": PAYLOAD, "csv_header": PAYLOAD},
            {"key": "ms", "label": "Time", "kind": "ms", "help": "", "unit": PAYLOAD, "factor": 1.0,
             "header": f"Time ({PAYLOAD})", "csv_header": "Time (ms)"}]
    rows = [[PAYLOAD, 1.5], ["=cmd|' /C calc'!A0", None], ["y", -2.0]]
    cells = [[PAYLOAD, "1.5"], ["=cmd|' /C calc'!A0", "–"]]
    return {
        "title": PAYLOAD, "tool": {"name": "reportgen", "version": "0"}, "generated_at": PAYLOAD, "is_demo": True,
        "run": {"name": PAYLOAD, "source_format": PAYLOAD, "source_path": PAYLOAD, "layout": PAYLOAD,
                "world_size": 2, "ranks": [0, 1], "missing_ranks": [2], "hosts": [{"host": PAYLOAD, "ranks": [0, 1]}],
                "hosts_known": True, "steps": [1, 2], "warmup_steps": [1], "step_source": PAYLOAD, "parallel": {"mode": PAYLOAD, "stages": 2, PAYLOAD: PAYLOAD}},
        "problems": [{"path": PAYLOAD, "problem": PAYLOAD}], "notes": [PAYLOAD],
        "findings": [finding],
        "sections": [
            {"id": "sec1", "title": PAYLOAD, "status": "ok", "reason": "", "summary": PAYLOAD, "notes": [PAYLOAD],
             "controls": [{"signal": "step", "label": PAYLOAD,
                           "options": [{"value": 1, "label": PAYLOAD}, {"value": PAYLOAD, "label": "p"}],
                           "default": 1}],
             "figures": [{"id": "sec1-fig", "title": PAYLOAD, "caption": PAYLOAD, "alt": PAYLOAD, "spec": spec}],
             "tables": [{"id": "sec1-t", "title": PAYLOAD, "caption": PAYLOAD, "columns": cols, "rows": rows,
                         "cells": cells, "truncated": 1}],
             "findings": [finding]},
            {"id": "sec2", "title": PAYLOAD, "status": "unavailable", "reason": PAYLOAD, "summary": "", "notes": [],
             "controls": [], "figures": [], "tables": [], "findings": []},
            {"id": "sec3", "title": PAYLOAD, "status": "error", "reason": PAYLOAD, "summary": "", "notes": [],
             "controls": [], "figures": [], "tables": [], "findings": []},
        ],
    }


def test_payload_in_every_field_stays_text():
    ctx = _hostile_context()
    html = render.render_html(ctx)
    check_page(html, n_json=2)  # one spec, one table
    page = parse(html)
    text = "".join(page.text)
    # the payload reaches the reader as text (in the heading, and elsewhere); the line separator shown as "\u2028"
    assert text.count(PAYLOAD.replace("\u2028", "\\u2028")) >= 10
    assert "<img" not in SCRIPT_RE.sub("", html)
    assert "{{ 7*7 }}" in html and "49" not in text
    # the JSON round-trips: the spec and the table data come back unchanged
    bodies = {re.search(r'id="([^"]+)"', a).group(1): json.loads(b) for a, b in scripts(html) if "json" in a}
    assert bodies["sec1-fig-spec"] == ctx["sections"][0]["figures"][0]["spec"]
    assert bodies["sec1-t-data"]["rows"] == ctx["sections"][0]["tables"][0]["rows"]
    # control values are JSON of the right type inside single-quoted attributes
    # a finding's view is JSON inside a single-quoted attribute: it round-trips and stays data
    views = [a["data-view"] for tag, a in page.tags if tag == "a" and "data-view" in a]
    assert [json.loads(v) for v in views] == [ctx["findings"][0]["view"]]
    options = [a["value"] for tag, a in page.tags if tag == "option"]
    assert [json.loads(v) for v in options] == [1, PAYLOAD]
    assert "1 more row in the CSV" in text
