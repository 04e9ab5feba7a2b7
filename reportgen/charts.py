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
