"""The ``--json`` metrics file (contract: ../shared/docs/metrics-json.md, schema ``reportgen.metrics/1``).

Every number the HTML shows comes from the same Analysis objects serialised here: both render one
:class:`reportgen.document.Document` (built once per report), this file as JSON.

Size budget (whatever the input says; reportgen/thresholds.py, "Page budget"): the document's table cuts plan
(:func:`reportgen.document.plan_cuts`): per-operator tables keep ``JSON_OP_ROWS`` rows (the longest), per-(rank,
step) tables whole steps up to ``JSON_STEP_ROWS`` rows, any table :data:`MAX_TABLE_ROWS` rows; then the
per-operator and per-(rank, step) tables share what the rest of the file leaves of ``JSON_BYTES``; a section's
``tables_left_out`` says how many rows of which table were left out and which were kept. Per-rank tables are whole.
Every string is cut to :data:`reportgen.limits.MAX_NAME_CHARS` with the cut stated. A file with more than
``JSON_INDENT_ROWS`` table rows, or larger than ``JSON_BYTES`` indented, is written without indentation. A
1024-rank synth run's largest table has 245,760 rows.
"""

from __future__ import annotations

import json
import re
from typing import Any

import msgspec

from . import __version__, document
from . import thresholds as th
from .document import MAX_TABLE_ROWS, Document, facts_block, plan_cuts, run_block  # noqa: F401 - public names
from .jsonsafe import clean as _clean, table_rows  # noqa: F401 - public names
from .model import Run
from .report import SectionOutcome

SCHEMA = "reportgen.metrics/1"
#: keys of the metrics contract (../shared/docs/metrics-json.md: "must not rename or re-unit") that issue 25 gave a
#: name of their own: (section, table) -> {contract key: the column it is}. The file keeps the contract key, with the
#: same values, beside the named column; the sections and the page know only the named one.
CONTRACT_ALIASES = {("overlap", "per_rank"): {"comm_ms": "comm_busy_ms"},
                    ("communication", "per_rank"): {"comm_ms": "comm_op_ms"}}


def with_contract_keys(section: str, table: str, df):
    """``df`` with the contract keys of :data:`CONTRACT_ALIASES` inserted before the column each one is."""
    aliases = {k: v for k, v in CONTRACT_ALIASES.get((section, table), {}).items() if v in df and k not in df}
    if not aliases:
        return df
    df = df.copy()
    for key, col in aliases.items():
        df.insert(df.columns.get_loc(col), key, df[col])
    return df


def build(doc: Document | Run, outcomes: list[SectionOutcome] | None = None) -> dict[str, Any]:
    """The metrics file's content, rendered from the report :class:`~reportgen.document.Document` (given a run
    and its outcomes instead, their document is built here)."""
    if not isinstance(doc, Document):
        doc = document.build(doc, outcomes)
    sections: dict[str, Any] = {}
    for o in doc.outcomes:
        block: dict[str, Any] = {"status": o.status}
        if o.status == "ok" and o.analysis is not None:
            block["metrics"] = _clean(o.analysis.metrics)
            block["tables"], left = {}, {}
            for name in o.analysis.tables:
                kept, cut = doc.plan[(o.id, name)]
                block["tables"][name] = doc.table_rows(with_contract_keys(o.id, name, kept))
                if cut:
                    left[name] = cut
            if left:
                block["tables_left_out"] = left
        else:
            block["reason"] = o.reason
        sections[o.id] = block
    return {
        "schema": SCHEMA,
        "tool": {"name": "reportgen", "version": __version__},
        "run": doc.run_block,
        "summary": doc.summary,
        "facts": doc.facts,
        "data_problems": [p.as_dict() for p in doc.problems],
        "sections": sections,
        "findings": [_clean(f.as_dict()) for f in doc.findings],
    }


_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(doc: dict[str, Any]) -> str:
    """The file's text: UTF-8 JSON that a strict reader accepts. A lone surrogate (a file or directory name that is
    not UTF-8, read with Python's surrogateescape, or a ``\\udcff`` escape in JSON input) is written as U+FFFD, the
    replacement character the page shows too: as a ``\\uXXXX`` escape it was valid JSON text whose value no strict
    UTF-8 consumer can hold (issue 29)."""
    rows = sum(len(t) for b in (doc.get("sections") or {}).values() if isinstance(b, dict)
               for t in (b.get("tables") or {}).values())
    compact = rows > th.JSON_INDENT_ROWS  # indentation adds a third to a large file

    def text_of(compact: bool) -> str:
        # json's C encoder runs only without indentation (with it, the pure-Python one: 4-6x slower); msgspec's
        # formatter indents the compact text token by token, leaving every string and number as written: the
        # same bytes as json.dumps(doc, indent=1) (tests/test_metrics.py compares them on random documents)
        text = json.dumps(doc, separators=(",", ":"), allow_nan=False, ensure_ascii=False)
        if not compact:
            text = msgspec.json.format(text.encode("utf-8", "surrogatepass"), indent=1).decode("utf-8", "surrogatepass")
        return text + "\n"

    text = text_of(compact)
    if not compact and len(text) > th.JSON_BYTES:  # plan_cuts sized the tables compact
        text = text_of(True)
    if _SURROGATE.search(text):
        text = _SURROGATE.sub("\ufffd", text)
    return text
