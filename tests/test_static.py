"""--static: every chart as inline SVG, no JavaScript at all, tables still readable, untrusted text escaped."""

from __future__ import annotations

import re

from reportgen import cli


def test_static_report_has_no_script_and_one_svg_per_chart(tmp_path, pp2x4):
    out = tmp_path / "static.html"
    title = '<script>alert(1)</script>{{7*7}}'
    assert cli.main([str(pp2x4), "-o", str(out), "--static", "--title", title, "--quiet"]) == 0
    html = out.read_text()
    assert "<script" not in html.lower()
    figures = html.count('class="rg-figure"')
    in_findings = html.count('<details class="rg-finding-chart">')  # each finding's chart as it reads it
    # each chart twice: for the light and the dark page (render.static_svg)
    assert figures >= 5 and html.count("<svg") == 2 * (figures + in_findings)
    assert html.count('class="rg-scheme-dark"') == figures + in_findings
    assert not re.search(r"\son[a-z]+\s*=", html, re.I)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;{{7*7}}" in html
    assert "<table" in html and "Static report: charts show their default view" in html
    assert "http://" not in re.sub(r'xmlns(:\w+)?="http://[^"]+"', "", html).replace("http://www.w3.org", "")
