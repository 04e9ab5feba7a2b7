"""The typed pieces a section hands to the renderer. No HTML anywhere in here.

A section is a module in ``reportgen/sections`` with ``ID``, ``TITLE``,
``analyze(run, options) -> Analysis`` (numbers only; raises ``Unavailable`` when the
run lacks the data) and ``present(analysis) -> View`` (Vega-Lite dicts, typed tables,
findings). The single Jinja template turns Views into HTML; ``metrics.py`` turns
Analyses and findings into the ``--json`` file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

#: how a column's values read (reportgen/fmt.py): text; int / rank (integers); float (4 significant digits, no unit);
#: a quantity kind of fmt.UNITS (ms, us, mb, bytes, gbps, flop, flops: one unit per column, named in the header);
#: ratio (0..1, shown in %) / pct (already in %); quantity (each cell with its own unit: the kind comes from the
#: metric name in the row's ``kind_from`` column, fmt.metric_kind)
ColumnKind = Literal["text", "int", "rank", "float", "ms", "us", "mb", "bytes", "gbps", "flop", "flops", "ratio",
                     "pct", "quantity"]
Severity = Literal["high", "medium", "low"]
Status = Literal["ok", "unavailable", "error"]


def count(n, noun: str, plural: str | None = None) -> str:
    """``1 step``, ``4 steps``: the one way a count is written in page text."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


@dataclass
class Analysis:
    """What ``analyze`` returns: numbers only.

    ``metrics`` and ``tables`` go to the metrics JSON verbatim (tables as lists of row
    objects); ``data`` holds anything else ``present`` needs.
    """

    metrics: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class Column:
    """A table column. ``label`` names the quantity without its unit: the renderer picks one unit per column
    from its values (fmt.unit_for) and writes it in the header ("Step time" + ms values -> "Step time (ms)")."""

    key: str
    label: str
    kind: ColumnKind = "float"
    help: str = ""
    kind_from: str = ""  # kind "quantity": the key of the row's metric name


@dataclass
class Table:
    """A sortable, filterable table with a CSV download of all its rows."""

    id: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    caption: str = ""
    max_html_rows: int = 300  # rows shown as HTML; the CSV download always has every row

    @classmethod
    def from_frame(cls, id: str, title: str, df: pd.DataFrame, columns: list[Column], **kw) -> "Table":
        keys = [c.key for c in columns]
        rows = df[keys].to_dict(orient="records")
        return cls(id=id, title=title, columns=columns, rows=rows, **kw)


@dataclass
class Control:
    """A page control that sets a Vega signal in every figure of its section that declares it."""

    signal: str
    label: str
    options: list[tuple[Any, str]]  # (value, label)
    default: Any


@dataclass
class Figure:
    id: str
    title: str
    spec: dict[str, Any]  # a complete Vega-Lite spec (the contract, as in Altair)
    caption: str = ""
    alt: str = ""


@dataclass
class Finding:
    """One thing the user should look at, with the number that proves it."""

    id: str  # rule id, e.g. "slow_rank"
    severity: Severity
    section: str
    message: str
    ranks: list[int] = field(default_factory=list)
    links: list[list[int]] = field(default_factory=list)
    evidence: dict[str, Any] = field(default_factory=dict)  # {"metric", "value", "reference", ...}
    suggestion: str = ""
    figure: str | None = None  # element id of the chart that shows it
    share_of_step: float | None = None  # share of the step time at stake (set by the advisor; None: not about time)

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "severity": self.severity,
            "section": self.section,
            "ranks": list(self.ranks),
            "links": [list(x) for x in self.links],
            "message": self.message,
            "suggestion": self.suggestion,
            "evidence": dict(self.evidence),
            "figure": self.figure,
            "share_of_step_ratio": self.share_of_step,
        }


@dataclass
class View:
    """What ``present`` returns."""

    summary: str = ""
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    controls: list[Control] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass
class SectionOutcome:
    """One section after running: status plus, when ok, its analysis and view."""

    id: str
    title: str
    status: Status
    reason: str = ""
    analysis: Analysis | None = None
    view: View | None = None


def rank_ranges(ranks) -> str:
    """[0, 1, 2, 5] -> '0-2, 5' (compact rank lists in texts and tooltips)."""
    rs = sorted(set(int(r) for r in ranks))
    out, i = [], 0
    while i < len(rs):
        j = i
        while j + 1 < len(rs) and rs[j + 1] == rs[j] + 1:
            j += 1
        out.append(str(rs[i]) if i == j else f"{rs[i]}-{rs[j]}")
        i = j + 1
    return ", ".join(out)
