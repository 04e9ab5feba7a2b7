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
