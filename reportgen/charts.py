"""Chart helpers shared by the sections: Altair chart -> Vega-Lite dict (the contract)."""

from __future__ import annotations

import os
from typing import Any

import altair as alt


def to_spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The Vega-Lite dict of ``chart``.

    Schema validation costs ~70 ms a report, so it runs only when ``REPORTGEN_VALIDATE_SPECS=1``;
    the test suite sets it (tests/conftest.py), so every spec the tests produce is validated.
    Altair's 5,000-row guard is off here because every section enforces its own, larger
    budget (MAX_CHART_ROWS, see ../shared/research/offline-html-report.md §2.2).
    """
    with alt.data_transformers.disable_max_rows():
        return chart.to_dict(validate=os.environ.get("REPORTGEN_VALIDATE_SPECS") == "1")


def shade_in_scope(chart: alt.Chart, value_expr: str) -> alt.Chart:
    """Colour value ``shade`` for heatmaps: ``value_expr`` (a Vega expression over the row, e.g. ``datum.x``)
    clamped to the largest value of the rows that are not warm-up steps (``datum.warmup``), so a warm-up step
    (reportgen/facts.py) does not saturate the scale. Rows keep ``value`` for their tooltip."""
    return (chart.transform_calculate(value=value_expr)
            .transform_calculate(scoped="datum.warmup ? null : datum.value")
            .transform_joinaggregate(scale_max="max(scoped)")
            .transform_calculate(shade="datum.scale_max == null ? datum.value : min(datum.value, datum.scale_max)"))


WARMUP_CAPTION = " Warm-up steps are drawn in the darkest colour; the scale covers the other steps."


#: chart parameters a finding's view sets to highlight what it is about (report.EvidenceView)
FOCUS_RANKS, FOCUS_LINKS = "focus_ranks", "focus_links"
_FOCUS_MARKS = {"bar", "rect", "square", "circle", "point", "tick", "arc"}
_FOCUS_TESTS = {FOCUS_RANKS: "indexof(focus_ranks, datum.rank) >= 0",
                # the finding's links; a finding about ranks only (no link): the links those ranks send on
                FOCUS_LINKS: "length(focus_links) ? indexof(focus_links, datum.src_rank + '>' + datum.dst_rank) >= 0"
                             " : indexof(focus_ranks, datum.src_rank) >= 0"}


def _field(enc: dict, channel: str) -> str | None:
    d = enc.get(channel)
    return d.get("field") if isinstance(d, dict) else None


def _focus_unit(unit: dict[str, Any], used: set[str]) -> dict[str, Any]:
    mark = unit["mark"] if isinstance(unit["mark"], dict) else {"type": unit["mark"]}
    enc = unit.get("encoding") or {}
    if mark.get("type") not in _FOCUS_MARKS or "stroke" in enc or "strokeWidth" in enc:
        return unit
    xy = {_field(enc, "x"), _field(enc, "y")}
    name = FOCUS_LINKS if {"src_rank", "dst_rank"} <= xy else FOCUS_RANKS if "rank" in xy else None
    if name is None:
        return unit
    used.update({name, FOCUS_RANKS})
    test = _FOCUS_TESTS[name]
    return {**unit, "encoding": {
        **enc, "stroke": {"condition": {"test": test, "value": "currentColor"}, "value": mark.get("stroke")},
        "strokeWidth": {"condition": {"test": test, "value": 2.5},
                        "value": mark.get("strokeWidth", 1 if mark.get("stroke") else 0)}}}


def _focus(spec: dict[str, Any], used: set[str]) -> dict[str, Any]:
    out = _focus_unit(spec, used) if "mark" in spec else dict(spec)
    for key in ("layer", "hconcat", "vconcat", "concat"):
        if isinstance(spec.get(key), list):
            out[key] = [_focus(sub, used) if isinstance(sub, dict) else sub for sub in spec[key]]
    if isinstance(spec.get("spec"), dict):
        out["spec"] = _focus(spec["spec"], used)
    return out


def focusable(spec: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``spec`` with the highlight a finding's link switches on (report.EvidenceView): bars, cells and
    points whose x or y is the rank (``focus_ranks``), or whose x / y are a link's destination / source rank
    (``focus_links``, "src>dst"; without links, those the focused ranks send on), get an outline in the page's text colour while the parameter lists them. Both
    start empty, so the chart looks the same until a finding sets them; ``spec`` itself is not changed."""
    used: set[str] = set()
    out = _focus(spec, used)
    if not used:
        return spec
    out["params"] = list(spec.get("params") or []) + [{"name": n, "value": []} for n in sorted(used)]
    return out
