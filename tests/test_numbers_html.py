"""Every number a person reads in the report goes through reportgen/fmt.py (issue 13, "Numbers").

The rendered HTML (demo and fixture reports) is parsed with the stdlib parser, no browser: every numeric table
cell has at most 4 significant digits, its header names a unit when its kind has one, the visible text quotes
no number with more than 4 significant digits (integers excepted), and the CSV data keeps the raw values in the
base unit its header names, without float noise.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest

from reportgen import fmt

from conftest import fixture_dir

#: kinds whose cells are integers (ids, counts) or not numbers
NOT_MEASURED = {"text", "int", "rank"}
NUM = re.compile(r"(?<![\w.#-])-?\d[\d,]*(?:\.\d+)?")


def significant_digits(token: str) -> int:
    t = token.lstrip("+-").replace(",", "")
    if "." in t:
        return len(t.replace(".", "").lstrip("0"))
    return len(t.strip("0")) or 1  # 1,200 -> 2: trailing zeros of an integer part are not claimed digits


class Page(HTMLParser):
    """Tables (header kinds, units and texts; cells with their kind) and the visible text of a report."""

    def __init__(self):
        super().__init__()
        self.tables: list[dict] = []
        self.text: list[str] = []
        self.scripts: dict[str, str] = {}
        self._script: str | None = None
        self._skip = 0
        self._cell: dict | None = None
        self._table: dict | None = None

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "style"):
            self._skip += 1
            self._script = a.get("id") if tag == "script" else None
        elif tag == "table":
            self._table = {"id": a.get("id"), "headers": [], "rows": []}
            self.tables.append(self._table)
        elif tag == "tr" and self._table is not None:
            self._table["rows"].append([])
        elif tag in ("th", "td") and self._table is not None:
            self._cell = {"kind": a.get("data-kind"), "unit": a.get("data-unit"), "text": ""}
            if a.get("scope") == "colgroup":  # a column-group band over the header: not a column
                return
            (self._table["headers"] if tag == "th" else self._table["rows"][-1]).append(self._cell)

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._skip -= 1
            self._script = None
        elif tag in ("th", "td"):
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        if self._script:
            self.scripts[self._script] = self.scripts.get(self._script, "") + data
        if self._skip:
            return
        if self._cell is not None:
            self._cell["text"] += data.strip()
        if data.strip():
            self.text.append(data.strip())


def parse(html: str) -> Page:
    p = Page()
    p.feed(html)
    for t in p.tables:
        t["rows"] = [r for r in t["rows"] if r]
    return p


def check_report(html: str) -> Page:
    page = parse(html)
    assert page.tables, "no table in the report"
    numeric_cells = 0
    for t in page.tables:
        kinds = [h["kind"] for h in t["headers"]]
        assert all(kinds), f"{t['id']}: a header without data-kind"
        for h in t["headers"]:
            if h["kind"] in fmt.UNITS or h["kind"] in ("ratio", "pct"):
                unit = "%" if h["kind"] in ("ratio", "pct") else h["unit"]
                assert unit and h["text"].endswith((f"({unit})", f", {unit})")), f"{t['id']}: header {h['text']!r}"
                assert unit == "%" or unit in dict(fmt.UNITS[h["kind"]])
        for row in t["rows"]:
            if len(row) == 1:  # "No rows."
                continue
            assert len(row) == len(kinds), t["id"]
            for cell, kind in zip(row, kinds):
                if kind in NOT_MEASURED or cell["text"] == "–":
                    continue
                numeric_cells += 1
                assert cell["kind"] == kind, (t["id"], cell)
                tokens = NUM.findall(cell["text"])
                assert tokens, f"{t['id']}: {kind} cell {cell['text']!r} is not a number"
                for tok in tokens:
                    assert significant_digits(tok) <= 4, f"{t['id']}: {kind} cell {cell['text']!r}"
    assert numeric_cells > 20
    # running text (summaries, findings, evidence, notes, captions): no number with more than 4 significant
    # digits, except integers (counts, ranks, ids)
    for chunk in page.text:
        for tok in NUM.findall(chunk):
            if "." in tok:
                assert significant_digits(tok) <= 4, f"{tok} in {chunk[:160]!r}"
    # the CSV data: headers name the base unit of the raw values, which carry no float noise
    datas = {k: json.loads(v) for k, v in page.scripts.items() if k.endswith("-data")}
    assert datas
    for key, data in datas.items():
        assert len(data["columns"]) == len(data["kinds"]) == len(data["keys"])
        for label, kind in zip(data["columns"], data["kinds"]):
            if kind in fmt.UNITS:
                assert label.endswith((f"({fmt.BASE_UNIT[kind]})", f", {fmt.BASE_UNIT[kind]})")), (key, label)
            elif kind == "ratio":
                assert label.endswith(("(fraction)", ", fraction)")), (key, label)
        for row in data["rows"]:
            for v in row:
                if isinstance(v, float):
                    assert fmt.clean(v) == v, (key, v)
    return page


@pytest.fixture(scope="module")
def demo_html_text(report_cache) -> str:
    return report_cache.get("demo").read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def demo_page(demo_html_text) -> Page:
    return check_report(demo_html_text)


def test_demo_numbers_are_readable(demo_page):
    headers = {h["text"] for t in demo_page.tables for h in t["headers"]}
    assert "Step time (ms)" in headers
    assert not any(re.search(r"\(ms\) \(ms\)|\(MB\) \(", h) for h in headers)  # no unit twice
    text = " ".join(demo_page.text)
    assert re.search(r"Median step time \d[\d.]* (ms|s)\b", text)


EVIDENCE = re.compile(r'<span class="rg-ev"><span class="rg-ev-key">(value|reference)</span> ([^<]*)</span>')
WITH_UNIT = re.compile(r"-?[\d.,]+(%| (ns|µs|ms|s|B|kB|MB|GB|TB|[kMGTPE]?FLOP(/s)?|[kMGT]?B/s))")


def test_findings_evidence_has_units(demo_html_text):
    """The evidence line quotes value and reference with the unit of the finding's metric."""
    pairs = EVIDENCE.findall(demo_html_text)
    assert pairs
    for key, text in pairs:
        assert WITH_UNIT.fullmatch(text) or re.fullmatch(r"\d[\d,]*", text), (key, text)  # or a count


@pytest.mark.parametrize("parts", [("mindinsight", "mi_cluster_propose_pp2x4"),
                                   ("ascend", "msinsight", "test", "st", "level2")],
                         ids=["pp2x4", "ascend-st-level2"])
def test_fixture_report_numbers_are_readable(report_cache, parts):
    html = report_cache.get(fixture_dir(*parts)).read_text(encoding="utf-8")
    page = check_report(html)
    for key, text in EVIDENCE.findall(html):
        assert WITH_UNIT.fullmatch(text) or re.fullmatch(r"\d[\d,]*", text), (key, text)
    kinds = {h["kind"] for t in page.tables for h in t["headers"]}
    assert {"ms", "ratio"} <= kinds
    if parts[0] == "mindinsight":  # FLOPs and FLOP/s in SI units, not 12,008,762,441,000.000000
        assert {"flop", "flops"} <= kinds
        headers = {h["text"] for t in page.tables for h in t["headers"]}
        assert any(re.fullmatch(r"FLOPs \([kMGTPE]?FLOP\)", h) for h in headers), headers
