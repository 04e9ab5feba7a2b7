"""The typed pieces a section hands to the renderer. No HTML anywhere in here.

A section is a module in ``reportgen/sections`` with ``ID``, ``TITLE``,
``analyze(run, options) -> Analysis`` (numbers only; raises ``Unavailable`` when the
run lacks the data) and ``present(analysis) -> View`` (Vega-Lite dicts, typed tables,
findings). The single Jinja template turns Views into HTML; ``metrics.py`` turns
Analyses and findings into the ``--json`` file.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from . import frames
from . import thresholds as th
from .fmt import rank_ranges  # noqa: F401 - the compact rank list, used by the sections from here

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
    objects); ``data`` holds anything else ``present`` needs. ``findings`` are made here, by the analysis, never
    by ``present`` (the runner hands them to the section's view).
    """

    metrics: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    findings: list["Finding"] = field(default_factory=list)
    #: what the page's findings name (reportgen/focus.py), set by the runner before ``present``: every sample a
    #: view draws keeps it
    focus: Any = None


#: Column.priority values: a key column identifies the row (shown first, kept in view while the table
#: scrolls sideways, never hidden); a shown column is on screen until the reader hides it; an optional
#: column starts hidden on screen (listed in the table's column picker) and is always printed.
KEY, SHOWN, OPTIONAL = 1, 2, 3


@dataclass
class Column:
    """A table column. ``label`` names the quantity without its unit: the renderer picks one unit per column
    from its values (fmt.unit_for) and writes it in the header ("Step time" + ms values -> "Step time (ms)")."""

    key: str
    label: str
    kind: ColumnKind = "float"
    help: str = ""
    kind_from: str = ""  # kind "quantity": the key of the row's metric name
    group: str = ""  # header band over adjacent columns with the same group (wide tables)
    priority: int | None = None  # KEY / SHOWN / OPTIONAL; None: the leading identifier columns are KEY
    # columns with the same non-empty tag share one unit, chosen over all their values (statistics of one quantity:
    # mean / min / max side by side read in one unit)
    unit_with: str = ""


_EMPTY_TEXT = {"", "-", "–", "—"}


def empty_cell(v: Any) -> bool:
    """A table cell without a value: None, NaN or a dash (a host or device the run never recorded)."""
    return v is None or (isinstance(v, float) and math.isnan(v)) or (isinstance(v, str) and v.strip() in _EMPTY_TEXT)


def _blank_column(s: pd.Series) -> bool:
    """Every value of the column an :func:`empty_cell` as :func:`frames.records` gives it (numbers read at once:
    an int, bool or complex is never empty, a float only when NaN)."""
    dtype = s.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biufc":
        return dtype.kind == "f" and bool(np.isnan(s.to_numpy()).all())
    return all(empty_cell(v) for v in frames.column_values(s, lazy=True))  # to the first cell with a value


@dataclass
class Table:
    """A sortable table with per-column filters and CSV downloads (of the rows shown, or of all rows).

    Columns without a value in any row are left out of the page (render.arrange_columns)."""

    id: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]
    caption: str = ""
    max_html_rows: int = th.STATIC_TABLE_ROWS  # rows written as HTML (the --static page lists them all, the page
    #   th.PAGE_TABLE_ROWS of them at first); the CSV download has every embedded row
    #: the table's rows when ``rows`` holds only the first of them (:meth:`from_frame`); None: ``rows`` is all
    rows_total: int | None = None
    #: with ``rows_total``: the keys of the columns without a value in any of the rows (:func:`empty_cell`)
    blank_keys: frozenset | None = None

    def __post_init__(self):
        if (self.rows_total is None) != (self.blank_keys is None):
            raise ValueError("Table.rows_total and Table.blank_keys go together (the columns of rows not held)")

    @classmethod
    def from_frame(cls, id: str, title: str, df: pd.DataFrame, columns: list[Column], **kw) -> "Table":
        """The frame's rows, in its order. Of a frame longer than the page ever embeds (:data:`th.PAGE_EMBEDDED_ROWS`,
        or ``max_html_rows``) only the rows the page can use are made (the others were a dict each: 500k of them,
        ~220 MiB, for the operators of 1,024 ranks, issue 30 #1); the row count and the columns empty over every row
        are kept beside them."""
        keys = [c.key for c in columns]
        t = cls(id=id, title=title, columns=columns, rows=[], **kw)
        # what render._table_ctx reads at most (its MAX_EMBEDDED_ROWS is th.PAGE_EMBEDDED_ROWS; tests only lower it)
        keep = max(th.PAGE_EMBEDDED_ROWS + 1, t.max_html_rows)
        if len(df) <= keep or not frames.records_fast(df, keys):
            t.rows = frames.records(df, keys)
        else:
            t.rows, t.rows_total = frames.records(df.iloc[:keep], keys), len(df)
            t.blank_keys = frozenset(k for k in keys if _blank_column(df[k]))
        return t


@dataclass
class TreeNode:
    """One node of a :class:`Tree`: its label, one value per tree column, its children."""

    label: str
    values: list[Any]
    children: list["TreeNode"] = field(default_factory=list)


@dataclass
class Tree:
    """A hierarchy the page shows as nested, collapsible rows (``<details>``: opens and closes without a script,
    the browser's find opens the rows it matches); its numbers are also in a table of the section's analysis."""

    id: str
    title: str
    columns: list[Column]  # the values of each node
    roots: list[TreeNode]
    caption: str = ""
    open_depth: int = 2  # levels open when the page loads


@dataclass
class Control:
    """A page control that sets a Vega signal in every figure of its section that declares it."""

    signal: str
    label: str
    options: list[tuple[Any, str]]  # (value, label)
    default: Any
    #: the values are sets of ranks (lists) or "all": the section's tables also keep only the rows whose rank columns
    #: are all in the chosen set (assets/table.js), and its charts filter on the signal
    rank_sets: bool = False


@dataclass
class Figure:
    id: str
    title: str
    spec: dict[str, Any]  # a complete Vega-Lite spec (the contract, as in Altair)
    caption: str = ""
    alt: str = ""
    static_caption: str | None = None  # the caption of the --static page (None: ``caption`` without its sentences
    # about controls, zooming or clicking; render.static_caption)


@dataclass
class EvidenceView:
    """Where a finding is seen: a figure and the values that set it up to show the finding.

    ``signals`` maps a control's signal (the section's ``<select data-signal>``: a metric, a step, a stage) or a
    chart parameter without a control to its value. ``assets/charts.js`` applies them when the finding's link is
    followed; a chart ignores names it does not declare. ``focus_ranks`` / ``focus_links`` (the ranks and links
    the chart highlights, :func:`reportgen.charts.focusable`) default to the finding's ranks and links."""

    figure: str
    signals: dict[str, Any] = field(default_factory=dict)
    #: a table's view (``figure`` is the table's id): column key -> value of the row(s) the finding quotes; the page
    #: filters the table to them (its column filters, so the reader sees and can clear them)
    rows: dict[str, Any] | None = None

    def as_dict(self, ranks=(), links=()) -> dict[str, Any]:
        signals = {"focus_ranks": [int(r) for r in ranks], "focus_links": [f"{int(s)}>{int(d)}" for s, d in links]}
        signals.update(self.signals)
        out = {"figure": self.figure, "signals": signals}
        if self.rows:
            out["rows"] = {k: (int(v) if isinstance(v, (int, float)) and float(v).is_integer() else v)
                           for k, v in self.rows.items() if v is not None and v == v}
        return out


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
    figure: str | None = None  # element id of the chart that shows it (``view.figure`` when a view is given)
    share_of_step: float | None = None  # share of the step time at stake (set by the advisor; None: not about time)
    view: EvidenceView | None = None  # the chart set up to show it (metric, step, stage); default: ``figure`` as is
    compare: list[int] | None = None  # a straggler finding: [the rank, a normal peer] for the rank comparison
    #: a diagnosed cause (reportgen/diagnosis.py Cause.as_dict: kind, ranks, link, stage, time, confidence); None for
    #: a finding that is not about one
    cause: dict[str, Any] | None = None
    confidence: float | None = None  # share of the steps in which the cause's test held
    #: the other findings this cause explains (their id, section, message, ranks), listed under it
    symptoms: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self):
        if self.view is not None:
            self.figure = self.view.figure
        elif self.figure:
            self.view = EvidenceView(self.figure)

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
            "view": self.view.as_dict(self.ranks, self.links) if self.view is not None else None,
            "share_of_step_ratio": self.share_of_step,
            **({"compare": list(self.compare)} if self.compare else {}),
            "cause": dict(self.cause) if self.cause else None,
            "confidence_ratio": self.confidence,
            "symptoms": [dict(x) for x in self.symptoms],
        }


@dataclass
class View:
    """What ``present`` returns."""

    summary: str = ""
    figures: list[Figure] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    controls: list[Control] = field(default_factory=list)
    trees: list[Tree] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the ranks the per-rank charts draw when they cannot draw every rank (thresholds.ranks_shown): a table the
    #: page must cut keeps these ranks' rows first (render.fit_table_data)
    ranks_drawn: list[int] = field(default_factory=list)


@dataclass
class SectionOutcome:
    """One section after running: status plus, when ok, its analysis and view."""

    id: str
    title: str
    status: Status
    reason: str = ""
    analysis: Analysis | None = None
    view: View | None = None


_DIGIT_RUNS = re.compile(r"(\d+)")


def natural_key(value) -> tuple:
    """Sort key in natural order, as the page's tables sort: numbers by value, text with its digit runs
    compared as numbers ('group_name_2' before 'group_name_10'), empty values last."""
    if value is None or (isinstance(value, float) and value != value):
        return ((2, ""),)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return ((0, value),)
    return tuple((0, int(p)) if p.isdigit() else (1, p.lower()) for p in _DIGIT_RUNS.split(str(value)) if p)


def natural_sorted(values) -> list:
    """``values`` (host names, group names...) without repeats, in natural order (gpu-node-2 before gpu-node-10):
    the one order of host names on every axis, legend, list and table of the page."""
    return sorted(dict.fromkeys(v for v in values if v is not None and v == v), key=natural_key)


def natural_order(df: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``df``'s rows in natural order of ``columns`` (for a table's initial order)."""
    keys = [tuple(natural_key(v) for v in row) for row in df[columns].itertuples(index=False, name=None)]
    return df.iloc[sorted(range(len(df)), key=keys.__getitem__)]
