"""Chart helpers shared by the sections: Altair chart -> Vega-Lite dict (the contract)."""

from __future__ import annotations

from typing import Any

import altair as alt


def to_spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The Vega-Lite dict of ``chart``, validated by Altair.

    Altair's 5,000-row guard is off here because every section enforces its own, larger
    budget (MAX_CHART_ROWS, see ../shared/research/offline-html-report.md §2.2).
    """
    with alt.data_transformers.disable_max_rows():
        return chart.to_dict()
