"""Turn the run and the section outcomes into one self-contained HTML file.

Everything the page needs is inlined: the vl-convert JavaScript bundle (once), our CSS
and JS, every chart spec as a JSON script tag written with ``tojson``. Jinja autoescape
is on, so untrusted strings (op names, paths, host names, titles) are only ever text.

Hostile input (names holding markup, script, line separators, or megabytes of text; tables of millions of
rows) is made harmless and bounded in one place each:

* JSON in the page (:func:`script_json`, the ``tojson`` filter): ASCII only, with ``< > & '`` and U+2028 /
  U+2029 escaped, so no string can end its ``<script>`` element or attribute, or break a JavaScript parser.
* Chart specs (:func:`chart_spec`): every string drawn (data, sort orders, domains, titles) is cut to
  :data:`CHART_TEXT_CHARS` with the cut stated, and U+2028 / U+2029 are shown as the text ``\u2028`` /
  ``\u2029`` (Vega-Lite builds expressions from sort orders and filters, and its expression parser rejects
  those characters inside a string). A spec larger than :data:`MAX_SPEC_BYTES` is left out with a note.
* Text: every string printed into the page is cut to :data:`PAGE_TEXT_CHARS` (:func:`_finalize`), a table
  cell to :data:`CELL_TEXT_CHARS`; lone surrogates (possible in JSON input) become U+FFFD.
* Tables: the rows embedded for the CSV download and the filters stop at :data:`MAX_EMBEDDED_ROWS` rows or
  :data:`MAX_EMBEDDED_BYTES` of JSON per table, and all tables' rows share what the rest of the page leaves of
  thresholds.PAGE_BYTES (:func:`fit_table_data`, per-rank tables first); the page says how many were left out.
* Chart data: the store shared by the specs keeps to thresholds.PAGE_CHART_BYTES (:func:`share_chart_data`); a
  chart beyond it is left out with a note.
* ``--static`` SVG (:func:`clean_svg`): parsed as XML and rebuilt with known SVG elements only, without event
  handlers, links or external ``url()`` references; text stays text, so a label reading ``javascript:`` or
  ``onload=`` is drawn, escaped, and the chart is kept.

Budgets, measured on a 1024-rank MindInsight synth run (128 hosts x 8, 4 stages, 10 steps): a 32 MB page whose
largest table (communication ops) embeds 245,760 rows in 12.8 MB and whose largest chart spec is 4.1 MB; the
budgets are 2x (rows), 4x (bytes per table, bytes per spec) above that.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
from dataclasses import replace
import hashlib
import json
import math
import os
import re
import signal
import tempfile
import threading
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2
from markupsafe import Markup, escape

from . import __version__, charts, document, facts, fmt, limits
from . import thresholds as th
from . import labels as L
from .model import Run
from .report import KEY, SHOWN, Column, SectionOutcome, Table, count, empty_cell, natural_sorted

_PKG_DIR = Path(__file__).resolve().parent

#: characters of one string drawn in a chart (axis label, legend, tooltip, title); the cut is stated
CHART_TEXT_CHARS = 300
#: characters of one table cell shown as HTML (the CSV download keeps the value as read, up to limits.MAX_NAME_CHARS)
CELL_TEXT_CHARS = 1000
#: characters of any one string printed into the page (a sentence may quote a few names)
PAGE_TEXT_CHARS = 2 * limits.MAX_NAME_CHARS
#: rows of one table embedded in the page (CSV download, filters, row counts; thresholds.PAGE_EMBEDDED_ROWS) ...
MAX_EMBEDDED_ROWS = th.PAGE_EMBEDDED_ROWS
#: ... and their JSON size (approximate, in characters)
MAX_EMBEDDED_BYTES = 50_000_000
#: JSON size of one chart spec; a larger chart is left out of the page with a note
MAX_SPEC_BYTES = 16_000_000
#: options of one page control (a step selector of a run with more steps lists the first ones); a control of more
#: than :data:`LAZY_OPTIONS` keeps them as data until it is used, so this bounds bytes, not elements
MAX_OPTIONS = 10_000
#: a control with more options than this lists them in the page only when it is used (charts.js ``fill``): the 1,024
#: options of a rank control are 1,024 elements of the page before anyone opens it
LAZY_OPTIONS = 100
#: spec keys whose string value is a Vega expression (never cut: it is code, not data)
_EXPRESSION_KEYS = frozenset({"calculate", "filter", "test", "expr", "labelExpr", "signal", "update"})
_SEPARATORS = {"\u2028": "\\u2028", "\u2029": "\\u2029"}
_SURROGATE = re.compile("[\ud800-\udfff]")


def _resource_dir(name: str) -> Path:
    """``templates`` / ``assets``: inside the installed package, or at the source tree top."""
    installed = _PKG_DIR / name
    if installed.is_dir():
        return installed
    source = _PKG_DIR.parent / name
    if source.is_dir():
        return source
    try:  # zipped or unusual installs
        return Path(str(resources.files(f"reportgen.{name}")))
    except (ModuleNotFoundError, TypeError):
        raise FileNotFoundError(f"reportgen {name} directory not found next to {_PKG_DIR}")


def read_asset(name: str) -> str:
    return (_resource_dir("assets") / name).read_text(encoding="utf-8")


def _safe_script(text: str, what: str) -> Markup:
    """Mark trusted JS/CSS safe for inlining after checking it cannot break out of its element."""
    low = text.lower()
    if "</script" in low or "<!--" in low or "</style" in low:
        raise ValueError(f"{what} contains a sequence that would end its element early")
    return Markup(text)


def cache_dir() -> Path:
    """reportgen's user cache (``$REPORTGEN_CACHE``, else ``$XDG_CACHE_HOME/reportgen``, else
    ``~/.cache/reportgen``): the Vega bundle and the compiled page template. Only ever an optimisation: a cache that
    cannot be read or written is ignored."""
    return Path(os.environ.get("REPORTGEN_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "reportgen"))


def _template_cache() -> jinja2.BytecodeCache | None:
    """The compiled page template, kept across runs (compiling report.html.j2 costs ~0.15 s of a ~1 s report);
    Jinja keys it by the template's source checksum, so a changed template is compiled again."""
    directory = cache_dir() / "templates"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        if not os.access(directory, os.W_OK | os.X_OK):
            return None
    except OSError:
        return None
    return _QuietBytecodeCache(str(directory))


class _QuietBytecodeCache(jinja2.FileSystemBytecodeCache):
    """A template cache that never fails a report: an unreadable, damaged or unwritable entry (disk full, another
    user's file, garbage) is compiled afresh (load) or left unwritten (dump)."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().load_bytecode(bucket)
        except Exception:  # noqa: BLE001 - a damaged cache entry is a miss
            bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            super().dump_bytecode(bucket)
        except OSError:
            pass


def _vl_convert_version() -> str:
    """vl-convert's version without importing it (its native module is loaded only for --static or a cache miss):
    from the name of its ``*.dist-info`` folder beside the package (a glob; ``importlib.metadata`` scans every
    installed distribution and took ~0.05-0.25 s of a small report), else from the metadata, else the module."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("vl_convert")
        if spec is not None and spec.origin:
            site = Path(spec.origin).resolve().parent.parent
            names = sorted(site.glob("vl_convert_python-*.dist-info"))
            if len(names) == 1:
                return names[0].name[len("vl_convert_python-"):-len(".dist-info")]
    except (ImportError, OSError, ValueError):
        pass
    from importlib.metadata import PackageNotFoundError, version as dist_version

    try:
        return dist_version("vl-convert-python")
    except PackageNotFoundError:
        import vl_convert

        return getattr(vl_convert, "__version__", "unknown")


def vega_bundle() -> str:
    """The vl-convert JavaScript bundle (Vega, Vega-Lite, vega-embed), cached on disk.

    The first call of ``vl_convert.javascript_bundle()`` starts vl-convert's JS runtime
    (seconds); the result is cached per vl-convert version in the user cache directory.
    """
    version = _vl_convert_version()
    cache = cache_dir() / f"vl-convert-{version}-bundle.js"
    try:
        text = cache.read_text(encoding="utf-8")
        if len(text) > 100_000 and text.endswith(("\n", ";", "}", ")")):
            return text
    except OSError:
        pass
    import vl_convert as vlc

    text = vlc.javascript_bundle()
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=".bundle-", suffix=".js")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, cache)
    except OSError:
        pass  # caching is an optimisation only
    return text


def format_value(value: Any, kind: str = "float") -> str:
    """One value for people, in its kind's base unit without the unit (a table cell of a column in that unit);
    sentences use fmt.quantity, tables fmt.cell with the column's unit (:func:`_table_ctx`)."""
    return fmt.cell(value, kind)


def sort_key(value: Any) -> Any:
    """Raw value for the ``data-sort`` attribute (numbers sort numerically in table.js)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return value


_BREAK_AFTER = re.compile(r"([/_.\-]+)(?=[^/_.\-])")


def breakable(value: Any) -> Any:
    """Long names (operators, paths) may wrap after ``/ _ - .`` instead of mid-word: the text is escaped
    first, then ``<wbr>`` goes after each separator. Short values are returned unchanged."""
    if not isinstance(value, str) or len(value) < 16:
        return value
    return Markup(_BREAK_AFTER.sub(r"\1<wbr>", str(escape(value))))


def _out(value: Any) -> str:
    """What the template writes for ``{{ value }}``: :func:`_finalize`, then escaped (autoescape). An int or float
    (its ``str``: nothing to escape) and short ASCII text (no cut, no bidi control, no surrogate) skip the finalize."""
    cls = value.__class__
    if cls is int or cls is float:
        return str(value)
    if cls is str and len(value) <= PAGE_TEXT_CHARS and value.isascii():
        return escape(value)
    return escape(_finalize(value))


def table_body(t: dict[str, Any], listed: list, static: bool, rank_picker: bool, drill_ranks) -> Markup:
    """The rows of a table's ``<tbody>`` (``t``: :func:`_table_ctx`), as the template's loop over its cells wrote them:
    the rows ``listed`` (the template's ``listed_cells``: every row on the --static page), each cell with its kind
    and ``data-sort`` key, a rank cell a link to the rank's detail (``#rank-N`` with the rank picker) or its top
    operators (``#drill-rank-N``), text that may wrap after separators (:func:`breakable`); one expression's value as
    the template writes it (:func:`_out`).
    In Python rather than the template: Jinja's attribute lookups and finalize calls per cell made the page of a
    small report take ~1.4x as long (render_html of a 2-rank Kineto run's 2,252 cells, in process: 81 -> 57 ms)."""
    cells = t["cells"]
    pad = "          "
    if not cells:
        out = [f'{pad}<tr><td colspan="{_out(len(t["columns"]))}" class="rg-muted">No rows.</td></tr>']
    else:
        out = []
    kinds = [c["kind"] for c in t["columns"]]
    # the cell's opening tag up to data-sort, per column, for cells that are no link
    opens = [f'{pad}  <td class="rg-col-{_out("text" if k == "text" else "num")}"'
             + (f' data-kind="{_out(k)}"' if k != "text" else "") + ' data-sort="' for k in kinds]
    links = rank_picker and not static
    drill = drill_ranks or ()
    rows = t["rows"]
    for i, row in enumerate(listed):
        raw = rows[i]
        out.append(f'{pad}<tr data-i="{i}">')
        for j, text in enumerate(row):
            v = raw[j]
            if kinds[j] == "rank" and isinstance(v, int) and v is not True and v is not False:  # Jinja's "integer"
                if links:
                    out.append(f'{pad}  <td class="rg-col-num" data-kind="rank" data-sort="{_out(sort_key(v))}">'
                               f'<a href="#rank-{_out(v)}" class="rg-rank-link" title="Rank {_out(v)}: its detail">'
                               f'{_out(text)}</a></td>')
                    continue
                if v in drill:
                    out.append(f'{pad}  <td class="rg-col-num" data-kind="rank" data-sort="{_out(sort_key(v))}">'
                               f'<a href="#drill-rank-{_out(v)}" title="Rank {_out(v)}: top operators">{_out(text)}'
                               f'</a></td>')
                    continue
            out.append(f'{opens[j]}{_out(sort_key(v))}">{_out(breakable(text))}</td>')
        out.append(f"{pad}</tr>")
    return Markup("\n" + "\n".join(out) if out else "")  # each line after a newline: see the template


def _json_safe(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        try:
            return _json_safe(value.item())
        except (ValueError, AttributeError):
            return value
    return value


_JSON_ESCAPES = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026", ord("'"): "\\u0027",
                 0x2028: "\\u2028", 0x2029: "\\u2029"}


def script_json(value: Any) -> Markup:
    """``value`` as JSON that is safe inside ``<script type="application/json">`` and inside a single-quoted
    attribute: ASCII only (every other character escaped, U+2028 / U+2029 included), ``< > & '`` escaped, so no
    string can end the element (``</script``, ``<!--``) or the attribute. NaN / infinity are refused (callers
    pass :func:`_json_safe` data)."""
    text = json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"), sort_keys=False)
    # ASCII text (U+2028 / U+2029 are already escapes): four replaces, not a table lookup per character (several
    # times the dumps itself on a page's chart data); the same text as ``text.translate(_JSON_ESCAPES)``
    for ch in "<>&'":
        if ch in text:
            text = text.replace(ch, _JSON_ESCAPES[ord(ch)])
    return Markup(text)


#: bidirectional controls (embedding / override / isolate, the LRM/RLM/ALM marks) and line/paragraph separators: a
#: name holding U+202E would reverse what follows it, so the page shows them all as text (``\u202e``, ``\u2028``)
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\u2028\u2029]")


def _visible_bidi(text: str) -> str:
    return _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if _BIDI.search(text) else text


def _chart_text(text: str) -> str:
    text = _visible_bidi(limits.cap_text(text, CHART_TEXT_CHARS))
    if "\u2028" in text or "\u2029" in text:
        text = text.replace("\u2028", _SEPARATORS["\u2028"]).replace("\u2029", _SEPARATORS["\u2029"])
    return text


def chart_spec(spec: Any, key: str = "") -> Any:
    """A chart spec for the page (and the --static SVG): JSON-safe (:func:`_json_safe`), every string but the
    expressions cut to :data:`CHART_TEXT_CHARS` and U+2028 / U+2029 shown as text (module docstring). Data and
    sort orders go through the same function, so a cut or replaced name still matches itself."""
    cls = spec.__class__
    if cls is float:  # most leaves are data values: the plain types first
        return spec if math.isfinite(spec) else None
    if cls is int or cls is bool or spec is None:
        return spec
    if cls is str and spec.isascii() and len(spec) <= CHART_TEXT_CHARS and key not in _EXPRESSION_KEYS:
        return spec  # nothing to cut and no bidi control or line separator in it: _chart_text's identity
    if isinstance(spec, str):
        if key in _EXPRESSION_KEYS:
            return spec.replace("\u2028", " ").replace("\u2029", " ")
        return _chart_text(spec)
    if isinstance(spec, dict):
        return {str(k): chart_spec(v, str(k)) for k, v in spec.items()}
    if isinstance(spec, (list, tuple)):
        return [_chart_row(v) if v.__class__ is dict else chart_spec(v, key) for v in spec]
    return _json_safe(spec)


def _chart_row(row: dict) -> dict:
    """``chart_spec(row)`` of one dict in a list (a data row, most of a spec's values), without a call per value for
    the plain ones: a finite float, an int, a bool, None, a short ASCII string under a key that is no expression."""
    out = {}
    for k, v in row.items():
        if k.__class__ is not str:
            k = str(k)
        cls = v.__class__
        if cls is float:
            out[k] = v if math.isfinite(v) else None
        elif cls is int or cls is bool or v is None or (
                cls is str and v.isascii() and len(v) <= CHART_TEXT_CHARS and k not in _EXPRESSION_KEYS):
            out[k] = v
        else:
            out[k] = chart_spec(v, k)
    return out


def _spec_or_note(spec: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """(the page's spec, "") or (None, why it was left out) when its JSON passes :data:`MAX_SPEC_BYTES`."""
    safe = chart_spec(spec)
    size = len(json.dumps(safe, ensure_ascii=True, allow_nan=False, separators=(",", ":")))
    if size <= MAX_SPEC_BYTES:
        return safe, ""
    return None, (f"This chart was left out: its data takes {size / 1e6:.0f} MB, above the page's budget of "
                  f"{MAX_SPEC_BYTES / 1e6:.0f} MB per chart. The tables and the metrics JSON (--json) have the numbers.")


def _finalize(value: Any) -> Any:
    """Every ``{{ ... }}`` of the template: untrusted text is cut to :data:`PAGE_TEXT_CHARS` (the cut stated), bidi
    controls are shown as text (:data:`_BIDI`) and lone surrogates become U+FFFD (they cannot be written as UTF-8). Markup (escaped or trusted) is left alone."""
    if isinstance(value, str) and not isinstance(value, Markup):
        value = _visible_bidi(limits.cap_text(value, PAGE_TEXT_CHARS))
        if _SURROGATE.search(value):
            value = _SURROGATE.sub("\ufffd", value)
    return value


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(_resource_dir("templates"))),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=_finalize,
        bytecode_cache=_template_cache(),
    )
    env.policies["json.dumps_kwargs"] = {"sort_keys": False, "separators": (",", ":"), "allow_nan": False}
    env.filters["tojson"] = script_json
    env.filters["fmt"] = format_value
    env.filters["quantity"] = fmt.quantity
    # one unit per column of a table the template writes (rows: dicts): (unit, factor) of fmt.unit_for, and its cells
    env.filters["static_caption"] = static_caption  # a table caption on the --static page
    env.filters["col_unit"] = lambda rows, kind, *cols: fmt.unit_for(kind, [r.get(c) for r in rows for c in cols])
    env.filters["cell"] = fmt.cell
    env.filters["text"] = fmt.text
    env.filters["evidence"] = lambda ev: [(fmt.evidence_label(k), v) for k, v in fmt.evidence(ev)
                                          if k not in fmt.EVIDENCE_HIDDEN]
    env.filters["sortkey"] = sort_key
    env.filters["jsonsafe"] = _json_safe
    env.filters["breakable"] = breakable
    env.filters["table_body"] = table_body
    env.globals["ranges"] = ranges_text
    return env


#: parts of a list of ranks / steps written out (``0–3, 7, 9–10``); the rest are counted
RANGES_SHOWN = 200
#: hosts listed in the run summary; the rest are counted
HOSTS_SHOWN = 1000


def ranges_text(values, limit: int = RANGES_SHOWN) -> str:
    """0,1,2,3,7,9,10 -> ``0–3, 7, 9–10`` (integers in runs, anything else listed first as is); at most
    ``limit`` parts, then ``… and N more``."""
    ints, parts = [], []
    for v in values or ():
        if isinstance(v, int) and not isinstance(v, bool):
            ints.append(v)
        else:
            parts.append(str(v))
    ints.sort()
    more = 0
    start = prev = None
    for v in ints + [None]:
        if v is not None and start is not None and v in (prev, prev + 1):
            prev = v
            continue
        if start is not None:
            if len(parts) < limit:
                parts.append(str(start) if start == prev else f"{start}–{prev}")
            else:
                more += 1
        start = prev = v
    more += max(0, len(parts) - limit)
    return ", ".join(parts[:limit]) + (f" … and {more} more" if more else "")


STEP_SOURCE_TEXT = {"markers": "", "repeated_ops": "steps from the repeated operator sequence (no step markers)",
                    "whole_trace": "one window over the whole trace (no step markers)"}


def run_summary(run: Run) -> dict[str, Any]:
    F = facts.of(run)
    hosts: dict[str, list[int]] = {}
    for r in run.ranks:
        h = run.hosts.get(r)
        if h is not None:
            hosts.setdefault(h, []).append(r)
    return {
        "name": run.name,
        "source_format": run.source_format,
        "source_path": run.source_path,
        "layout": run.layout,
        "world_size": run.world_size,
        "ranks": list(run.ranks),
        "missing_ranks": list(run.missing_ranks),
        "hosts": [{"host": h, "ranks": hosts[h]} for h in natural_sorted(hosts)[:HOSTS_SHOWN]],
        "hosts_total": len(hosts),
        "hosts_known": bool(hosts),
        "steps": list(F.steps_all) if F is not None else list(run.steps),
        "warmup_steps": list(F.warmup_steps) if F is not None else [],
        "step_source": STEP_SOURCE_TEXT.get(F.step_source if F is not None else "", ""),
        "parallel": dict(run.parallel),
        "windows": list(getattr(run, "windows", []) or []),
    }


def build_context(doc: "document.Document | Run", outcomes: list[SectionOutcome] | None = None,
                  title: str | None = None) -> dict[str, Any]:
    """The whole page as plain data, rendered from the report :class:`~reportgen.document.Document` (given a run
    and its outcomes instead, their document is built here). The template receives exactly this dict."""
    if not isinstance(doc, document.Document):
        doc = document.build(doc, outcomes, title)
    run = doc.run
    sections = []
    by_finding: dict[int, dict[str, Any]] = {}
    named = _named_ranks(run, doc.outcomes)
    keep = _control_values_to_keep(doc.findings, named)
    for o in doc.outcomes:
        view = o.view
        found = []
        for f in (view.findings if view else []):
            found.append(f.as_dict())
            by_finding[id(f)] = found[-1]
        sec = {
            "id": o.id,
            "title": o.title,
            "status": o.status,
            "reason": o.reason,
            "summary": view.summary if view else "",
            "notes": (list(view.notes) if view else []) + doc.cut_notes.get(o.id, []),
            "controls": [_control_ctx(c, keep) for c in (view.controls if view else [])],
            "figures": [_figure_ctx(f) for f in (view.figures if view else [])],
            "tables": [_table_ctx(t) for t in (view.tables if view else [])],
            "trees": [_tree_ctx(t) for t in (getattr(view, "trees", None) or [])] if view else [],
            "findings": found,
            # rows a cut per-rank table keeps first (fit_table_data)
            "keep_ranks": sorted(named | set(int(r) for r in (view.ranks_drawn if view else ()))),
        }
        sections.append(sec)
    findings = [by_finding[id(f)] for f in doc.findings]  # the document's one order
    columns = {t["id"]: [c["key"] for c in t["columns"]] for sec in sections for t in sec["tables"]}
    for n, f in enumerate(findings, 1):  # the one list of findings; sections link to their entries (finding-<n>)
        f["n"] = n
        f["view_text"] = view_text(f.get("view"), sections)
        v = f.get("view")
        if v and v.get("rows"):  # a table's view: the rows as (column index, value) pairs the page filters on
            keys = columns.get(v["figure"], [])
            v["row_match"] = [[keys.index(k), val] for k, val in v["rows"].items() if k in keys]
    # ranks with a drill-down figure (id drill-rank-<r>): rank cells anywhere link to it
    drill_ranks = sorted({int(f["id"].split("-")[2]) for sec in sections for f in sec["figures"]
                          if f["id"].startswith("drill-rank-") and f["id"].split("-")[2].isdigit()})
    # a rank picker (figure drill-rank-any, reportgen/sections/drilldown.py): every other rank cell links to #rank-<r>,
    # which sets the picker (assets/charts.js)
    rank_picker = any(f["id"] == "drill-rank-any" for sec in sections for f in sec["figures"])
    return {
        "summary_text": summary_text(doc.summary, findings),
        "baseline": None,
        "drill_ranks": drill_ranks,
        "rank_picker": rank_picker,
        "title": doc.title,
        "tool": {"name": "reportgen", "version": __version__},
        "generated_at": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "is_demo": run.is_demo,
        "run": run_summary(run),
        "problems": [p.as_dict() for p in doc.problems],
        "notes": list(run.notes),
        "sections": sections,
        "findings": findings,
        "verdict_quiet": _quiet(doc.outcomes, findings),
    }


def _quiet(outcomes, findings: list[dict]) -> str:
    """The first words of a run whose diagnosis found no cause (section ``waits`` judged it): say so."""
    w = next((o for o in outcomes if o.id == "waits" and o.status == "ok"), None)
    if w is None or not w.analysis.metrics.get("judged") or any(f.get("cause") for f in findings):
        return ""
    return ("No cause found: no rank, link, pipeline stage or input pipeline holds the others back beyond the run's "
            "own step-to-step jitter (see 'Diagnosis: who waits for whom').")


def _control_values_to_keep(findings, named: set[int]) -> dict[str, set[str]]:
    """Per control signal, the option values (as text) a cut control keeps: every value a finding's link sets it to,
    and for any control (rank pickers) the ranks the page names (``named``, :func:`_named_ranks`). Key ``""``: the
    values any control keeps."""
    out: dict[str, set[str]] = {"": {str(r) for r in named}}
    for f in findings:
        sig = f.view.signals if f.view is not None else {}
        for k, v in (sig or {}).items():
            if not isinstance(v, (list, dict)):
                out.setdefault(k, set()).add(str(v))
        for pair in ([f.compare] if f.compare else []):
            out[""].update(str(int(r)) for r in pair)
    return out


def _control_ctx(c, keep: dict[str, set[str]] | None = None) -> dict[str, Any]:
    """A control for the template: at most :data:`MAX_OPTIONS` options, the cut in its label; a cut keeps the default
    and every option ``keep`` names (the values findings' links set, the ranks findings name: a finding's link
    always finds its option)."""
    options = list(c.options)
    label = c.label
    if len(options) > MAX_OPTIONS:
        want = (keep or {}).get(c.signal, set()) | (keep or {}).get("", set()) | {str(c.default)}
        extra = [o for o in options[MAX_OPTIONS:] if str(o[0]) in want]
        named = [o for o in extra if o[0] != c.default]
        label = f"{c.label} (first {MAX_OPTIONS:,} of {len(options):,}" + (
            f", and {len(named)} named by findings)" if named else ")")
        options = options[:MAX_OPTIONS] + extra
    out = {"signal": c.signal, "label": label, "options": [{"value": v, "label": l} for v, l in options],
           "default": c.default, "rank_sets": bool(getattr(c, "rank_sets", False))}
    if len(options) > LAZY_OPTIONS:  # the page writes the default and the named ones; charts.js adds the rest on use
        want = (keep or {}).get(c.signal, set()) | (keep or {}).get("", set())
        out["later"] = [[v, l] for v, l in options]
        out["options"] = [{"value": v, "label": l} for v, l in options if v == c.default or str(v) in want]
    return out


#: nodes of a tree the page lists (beyond: the deeper levels are left out, and said; the table has every node)
TREE_MAX_NODES = 2000


def _tree_ctx(t) -> dict[str, Any]:
    """A tree for the template: nodes breadth-first up to :data:`TREE_MAX_NODES`, each value formatted in its
    column's unit (the unit chosen over every node's value, named in the legend)."""
    flat: list = []
    level = [(n, 0) for n in t.roots]
    while level and len(flat) < TREE_MAX_NODES:
        flat.extend(level)
        level = [(c, d + 1) for n, d in level for c in n.children]
    kept = {id(n) for n, _ in flat[:TREE_MAX_NODES]}
    left = sum(1 for _ in _walk(t.roots)) - len(kept)
    cols = []
    times = [i for i, c in enumerate(t.columns) if c.kind in fmt.TIME_KINDS]  # one time unit per tree, as tables
    time_unit, time_factor = fmt.time_unit((t.columns[i].kind, [n.values[i] for n, _ in flat]) for i in times)
    for i, c in enumerate(t.columns):
        unit, factor = ((time_unit, time_factor[c.kind]) if c.kind in fmt.TIME_KINDS
                        else fmt.unit_for(c.kind, [n.values[i] for n, _ in flat]))
        cols.append({"label": fmt.header(c.label, c.kind, unit), "kind": c.kind, "factor": factor})

    def node(n, depth):
        return {"label": n.label, "depth": depth, "open": depth < t.open_depth,
                "values": [fmt.cell(v, col["kind"], col["factor"]) for v, col in zip(n.values, cols)],
                "children": [node(c, depth + 1) for c in n.children if id(c) in kept]}

    return {"id": t.id, "title": t.title, "caption": t.caption, "columns": cols,
            "roots": [node(n, 0) for n in t.roots if id(n) in kept],
            "left_out": (f"{left:,} deeper nodes are not listed here (the page lists {TREE_MAX_NODES:,}); the table "
                         "below has every one." if left > 0 else "")}


def _walk(nodes):
    for n in nodes:
        yield n
        yield from _walk(n.children)


def _figure_ctx(f) -> dict[str, Any]:
    spec, left_out = _spec_or_note(charts.focusable(f.spec))
    if spec is not None:
        spec = charts.tooltip_formats(spec)  # a tooltip writes tiny values as the tables do (fmt.d3_format)
    return {"id": f.id, "title": f.title, "caption": f.caption, "alt": f.alt or f.title,
            # a section's own static caption names what the static page shows; its sentences about interactions
            # are left out all the same
            "static_caption": static_caption(f.static_caption if f.static_caption is not None else f.caption),
            "spec": spec, "left_out": left_out}


def view_text(view: dict | None, sections: list[dict]) -> str:
    """What a finding's view selects, in the words of its section's controls: 'Heatmap shows: Computing'."""
    if not view:
        return ""
    sec = next((s for s in sections if any(f["id"] == view["figure"] for f in s["figures"])), None)
    if sec is None:
        return ""
    parts = []
    for c in sec["controls"]:
        value = view["signals"].get(c["signal"])
        label = next((o["label"] for o in c["options"] if o["value"] == value), None)
        if label is not None and value != c["default"]:
            parts.append(f"{c['label']}: {label}")
    return "; ".join(parts)


#: sentences of a caption that speak of the page's interactions; the static page has none (static_caption)
_INTERACTIVE = re.compile(r"\b(control|controls|select|selector|switch|sort with|drag|scroll|zoom|click|"
                          r"double-click|hover|pick|picks|picked|the metric above|tooltips?|filters?|filter by)\b", re.I)
#: a parenthesis (no nested one) in a caption
_PAREN = re.compile(r"\s*\([^()]*\)")


def static_caption(caption: str) -> str:
    """``caption`` for the --static page: its parentheses, clauses and sentences about controls, zooming, clicking,
    tooltips or filters left out (a parenthesis alone when it is the part that speaks of them)."""
    caption = _PAREN.sub(lambda m: "" if _INTERACTIVE.search(m.group(0)) else m.group(0), caption or "")
    out = []
    for sentence in re.split(r"(?<=[.!?])\s+(?=[A-Z'])", caption):
        clauses = [c for c in re.split(r";\s+", sentence.rstrip(".")) if c and not _INTERACTIVE.search(c)]
        if clauses:
            text = "; ".join(clauses)
            out.append(text if text.endswith((".", "!", "?")) else text + ".")
    return " ".join(out)


def summary_text(facts: dict[str, Any], findings: list[dict]) -> str:
    """The run in one paragraph (numbers from the document's summary, which --json also carries)."""
    parts = []
    who = count(facts['ranks'], 'rank')
    if facts.get("hosts"):
        who += ' on ' + count(facts['hosts'], 'host')
    layout = ", ".join(x for x in (facts.get("mode"), f"{facts['stages']} stages" if facts.get("stages") else None) if x)
    parts.append(who + (f" ({layout})" if layout else "") + ".")
    if facts.get("step_ms_median") is not None:
        n, warm = facts.get("steps") or 0, facts.get("warmup_steps") or []
        parts.append(f"Median step time {fmt.ms(facts['step_ms_median'])} over {count(n, 'step')}"
                     + (f" (warm-up step{'s' if len(warm) > 1 else ''} {', '.join(map(str, warm))} left out)"
                        if warm else "")
                     + f", spread {fmt.percent(facts.get('step_ms_spread_ratio') or 0)} across ranks; "
                     + (f"slowest rank {facts.get('slowest_rank')}, fastest {facts.get('fastest_rank')}."
                        if (facts.get('step_ms_spread_ratio') or 0) >= th.MIN_EXCESS_SHARE else
                        f"no rank stands out (below the {fmt.percent(th.MIN_EXCESS_SHARE)} noise floor; rank "
                        f"{facts.get('slowest_rank')} is the slowest only by a hair)."))
    shares = [(k, label) for k, label in (("computing_share_ratio", (
                                           L.COMPUTATION_INCL_FREE.lower() if facts.get("computing_includes_free")
                                           else "computation")),
                                          ("exposed_comm_share_ratio", "exposed communication"),
                                          ("free_share_ratio", "free")) if facts.get(k) is not None]
    if shares:
        parts.append("Of the step: " + ", ".join(f"{label} {fmt.percent(facts[k])}" for k, label in shares) + ".")
    counts = {lvl: sum(1 for f in findings if f["severity"] == lvl) for lvl in ("high", "medium", "low")}
    total = sum(counts.values())
    parts.append(f"{total} finding{'s' if total != 1 else ''}" + (": " + ", ".join(
        f"{n} {lvl}" for lvl, n in counts.items() if n) if total else "") + ".")
    return " ".join(parts)


def _clean(value: Any) -> Any:
    """JSON-safe and without float noise (fmt.clean): the CSV's cells."""
    cls = value.__class__
    if cls is float:  # most cells: _json_safe's None for NaN / infinity, else fmt.clean
        return fmt.clean(value) if math.isfinite(value) else None
    if cls is int or cls is str or cls is bool or value is None:
        return value
    value = _json_safe(value)
    return fmt.clean(value) if isinstance(value, float) else value


_ID_KINDS = ("rank", "int", "text")


def arrange_columns(t: Table) -> tuple[Table, list[str]]:
    """``t`` without the columns that hold no value in any row (all None / NaN / "-": a host or device the
    run never recorded), key columns first; and the labels of the columns left out."""
    if not t.rows:
        return t, []
    if t.blank_keys is not None:  # rows holds the first of the table's rows: judged on all of them when made
        blank = [c.key in t.blank_keys for c in t.columns]
    else:
        blank = [all(empty_cell(r.get(c.key)) for r in t.rows) for c in t.columns]
    kept = [c for c, b in zip(t.columns, blank) if not b]
    dropped = [c.label for c, b in zip(t.columns, blank) if b]
    kept.sort(key=lambda c: c.priority != KEY)  # stable: explicit key columns move first, the rest keep their order
    return (t if kept == t.columns else replace(t, columns=kept)), dropped


def _column_layout(cols: list[dict[str, Any]], columns: list[Column]) -> None:
    """Add ``group`` and ``priority`` to the column dicts; the leading identifier columns (up to three of
    rank / int / text kind) are key columns unless the section said otherwise."""
    lead = True
    for i, (d, c) in enumerate(zip(cols, columns)):
        lead = lead and i < 3 and c.kind in _ID_KINDS
        d["group"] = c.group
        d["priority"] = c.priority if c.priority is not None else (KEY if lead else SHOWN)


def _table_ctx(t) -> dict[str, Any]:
    """A table for the template: columns empty in every row left out and key columns first
    (``arrange_columns``), one unit per column chosen from its shown values (fmt.unit_for), the header
    naming it, every HTML cell formatted by fmt.cell in that unit; ``rows`` keep the raw values (base units,
    no float noise) for the CSV download, the filters and data-sort."""
    t, empty_columns = arrange_columns(t)
    total = t.rows_total if t.rows_total is not None else len(t.rows)
    # embedded_rows never looks past MAX_EMBEDDED_ROWS + 1 rows: the rest are not cleaned (4096 ranks: millions)
    rows = [[_clean(r.get(c.key)) for c in t.columns] for r in t.rows[: max(MAX_EMBEDDED_ROWS + 1, t.max_html_rows)]]
    shown = rows[: t.max_html_rows]
    embedded = embedded_rows(rows)
    if len(embedded) < len(shown):  # the rows listed as HTML are always in the data (sorting, filters)
        embedded = shown
    cols = []
    shared = {}  # Column.unit_with tag -> (unit, factor) over every value of its columns
    for tag in {c.unit_with for c in t.columns if c.unit_with}:
        idx = [i for i, c in enumerate(t.columns) if c.unit_with == tag]
        shared[tag] = fmt.unit_for(t.columns[idx[0]].kind, [row[i] for row in shown for i in idx])
    # every time column of a table reads in one unit (issue 28: 'Elapse (µs)' beside 'Wait (ms)')
    times = [i for i, c in enumerate(t.columns) if c.kind in fmt.TIME_KINDS]
    time_unit, time_factor = fmt.time_unit((t.columns[i].kind, [row[i] for row in shown]) for i in times)
    for i, c in enumerate(t.columns):
        # the unit of what people read
        if c.kind in fmt.TIME_KINDS:
            unit, factor = time_unit, time_factor[c.kind]
        else:
            unit, factor = shared.get(c.unit_with) or fmt.unit_for(c.kind, [row[i] for row in shown])
        cols.append({"key": c.key, "label": c.label, "kind": c.kind, "help": c.help, "unit": unit, "factor": factor,
                     "header": fmt.header(c.label, c.kind, unit), "csv_header": fmt.csv_header(c.label, c.kind)})
    _column_layout(cols, t.columns)
    cells = [[_cell_text(fmt.quantity(v, fmt.metric_kind(r.get(c.kind_from))) if c.kind == "quantity"
                         else fmt.cell(v, c.kind, col["factor"])) for c, col, v in zip(t.columns, cols, row)]
             for r, row in zip(t.rows, shown)]
    return {
        "id": t.id,
        "title": t.title,
        "caption": t.caption,
        "columns": cols,
        "rows": embedded,  # every row (up to the page's budget), raw, for the CSV download (JSON script tag)
        "cells": cells,  # the first max_html_rows rows as people read them (the --static page's HTML table)
        "listed": min(len(cells), th.PAGE_TABLE_ROWS),  # of them, the rows the page lists at first (table.js: more)
        "truncated": max(0, len(embedded) - t.max_html_rows),
        "rows_total": total,
        "rows_left_out": total - len(embedded),  # beyond MAX_EMBEDDED_ROWS / MAX_EMBEDDED_BYTES
        "empty_columns": empty_columns,
    }


def _cell_text(text: Any) -> Any:
    """A cell as people read it: cut to :data:`CELL_TEXT_CHARS` (the cut stated), lone surrogates replaced."""
    if isinstance(text, str) and (len(text) > CELL_TEXT_CHARS or not text.isascii()):
        return _finalize(limits.cap_text(text, CELL_TEXT_CHARS))
    return text


def _json_size(value: Any) -> int:
    """Characters ``value`` takes in :func:`script_json` (strings: an upper bound for non-ASCII text)."""
    if isinstance(value, str):
        return len(value) + 2 if value.isascii() else 6 * len(value) + 2
    if isinstance(value, (list, tuple)):
        n = 1 + len(value)  # the brackets' and commas' characters (one more than JSON writes, as always)
        for v in value:  # a row's cells here, a call only for a nested list (a call per cell was ~1 M at 1,024 ranks)
            if isinstance(v, str):
                n += len(v) + 2 if v.isascii() else 6 * len(v) + 2
            elif isinstance(v, (list, tuple)):
                n += _json_size(v)
            else:
                n += 24 if v is not None else 4
        return n
    return 24 if value is not None else 4


def embedded_rows(rows: list) -> list:
    """The rows the page embeds: all of them, or the first ones within :data:`MAX_EMBEDDED_ROWS` rows and
    :data:`MAX_EMBEDDED_BYTES` characters of JSON."""
    if len(rows) <= 1000 and sum(_json_size(r) for r in rows) <= MAX_EMBEDDED_BYTES:
        return rows
    total = 0
    for i, row in enumerate(rows[:MAX_EMBEDDED_ROWS + 1]):
        total += _json_size(row) + 1
        if total > MAX_EMBEDDED_BYTES or i == MAX_EMBEDDED_ROWS:
            return rows[:i]
    return rows


_SVG_NS, _XLINK_NS = "http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"
#: the SVG elements a chart may hold (vl-convert writes svg, g, path, line, rect, text, defs, gradients, clip
#: paths); anything else (script, foreignObject, a, image, use, animate, style, ...) is removed with its content
_SVG_ELEMENTS = frozenset({"svg", "g", "path", "line", "rect", "circle", "ellipse", "polyline", "polygon", "text",
                           "tspan", "defs", "linearGradient", "radialGradient", "stop", "clipPath", "title", "desc"})
#: attributes whose value is a URL: kept only as a same-document reference (#id)
_URL_ATTRS = frozenset({"href", "src", "action", "formaction", "xml:base", "base"})
_EXTERNAL_URL = re.compile(r"url\(\s*(?!['\"]?#)", re.I)


def clean_svg(svg: str) -> str | None:
    """``svg`` rebuilt from its parsed XML with nothing that could run or load: only :data:`_SVG_ELEMENTS`, no
    ``on*`` attribute, no link (``href`` / ``xlink:href`` other than ``#id``), no external ``url(...)``; text
    content and other attribute values stay as they are (escaped on output), so a label reading
    ``javascript:`` is drawn as text. None when the SVG cannot be parsed (or declares a DTD or entities)."""
    import xml.etree.ElementTree as ET

    if "<!DOCTYPE" in svg or "<!ENTITY" in svg:
        return None
    try:
        root = ET.fromstring(svg)
    except ET.ParseError:
        return None

    def local(name: str) -> str:
        return name.rsplit("}", 1)[-1]

    def clean(el) -> bool:
        if not el.tag.startswith("{" + _SVG_NS + "}") or local(el.tag) not in _SVG_ELEMENTS:
            return False
        for name in list(el.attrib):
            ln, value = local(name).lower(), el.attrib[name]
            if (ln.startswith("on") or (ln in _URL_ATTRS and not value.strip().startswith("#"))
                    or _EXTERNAL_URL.search(value) or (ln == "style" and ("url(" in value.lower()
                                                                          or "expression" in value.lower()))):
                del el.attrib[name]
        for child in list(el):
            if not clean(child):
                tail = child.tail
                el.remove(child)
                if tail and tail.strip():  # keep the text that followed the removed element
                    el.text = (el.text or "") + tail
        return True

    if not clean(root):
        return None
    ET.register_namespace("", _SVG_NS)
    ET.register_namespace("xlink", _XLINK_NS)
    return ET.tostring(root, encoding="unicode")


#: the page's colours in dark mode (report.css, ``@media (prefers-color-scheme: dark)``) a dark --static chart takes
_DARK_NAMES = ("--bg", "--fg", "--muted", "--border")


def dark_colours() -> dict[str, str]:
    """The custom properties of report.css's dark block (``--bg``, ``--fg``...): one place for the page's colours."""
    css = read_asset("report.css")
    m = re.search(r"@media \(prefers-color-scheme: dark\)\s*\{\s*:root\s*\{(.*?)\}", css, re.S)
    found = dict(re.findall(r"(--[\w-]+)\s*:\s*([^;]+);", m.group(1))) if m else {}
    missing = [n for n in _DARK_NAMES if n not in found]
    if missing:
        raise ValueError(f"report.css has no dark value for {', '.join(missing)}")
    return {k: v.strip() for k, v in found.items()}


def dark_chart_config() -> dict[str, Any]:
    """The Vega-Lite config of a chart drawn for the dark page (the --static twin of charts.js darkConfig): the page's
    background, text and axes in its text colours; data colours (reportgen/palette.py) do not change."""
    c = dark_colours()
    fg, muted, faint = c["--fg"], c["--muted"], c["--border"]
    line = {"color": fg}
    return {
        "background": c["--bg"],
        "title": {"color": fg, "subtitleColor": muted},
        "style": {"guide-label": {"fill": fg}, "guide-title": {"fill": fg}},
        "axis": {"domainColor": muted, "tickColor": muted, "gridColor": faint, "labelColor": fg, "titleColor": fg},
        "legend": {"labelColor": fg, "titleColor": fg},
        "view": {"stroke": muted},
        "text": {"color": fg},
        "rule": line, "tick": line,
        "boxplot": {"rule": line, "ticks": line}, "errorbar": {"rule": line, "ticks": line},
    }


def _one_svg(spec: dict[str, Any], dark: bool) -> str:
    """One chart as cleaned SVG text (:func:`clean_svg`), or a sentence saying why there is none."""
    import vl_convert as vlc

    try:
        svg = vlc.vegalite_to_svg(charts.static_spec(spec), **({"theme": "dark", "config": dark_chart_config()}
                                                               if dark else {}))
    except Exception as exc:  # noqa: BLE001 - one chart must not break the static report
        return str(Markup('<p class="rg-muted">{}</p>').format(
            f"This chart could not be drawn statically ({type(exc).__name__})."))
    cleaned = clean_svg(svg)
    if cleaned is None:
        return ('<p class="rg-muted">This chart was left out of the static report (its SVG could not be '
                'read).</p>')
    return cleaned


def static_svg(spec: dict[str, Any] | None) -> Markup:
    """A chart pre-rendered to inline SVG by vl-convert (no JavaScript in the page), twice: for the light page and
    for the dark one (report.css shows the one of the reader's colour scheme, and the light one on paper), so a
    chart is never a white panel on the dark page.

    vl-convert escapes text and writes presentation attributes only; the SVG is still rebuilt by
    :func:`clean_svg` so nothing in it can run or load (script, event handlers, links, images). Its ids (clip
    paths, gradients) are numbered across the whole conversion, so the two copies never share one.
    """
    if spec is None:
        return Markup("")
    light, dark = _one_svg(spec, False), _one_svg(spec, True)
    return Markup(f'<div class="rg-scheme-light">{light}</div>'
                  f'<div class="rg-scheme-dark" aria-hidden="true">{dark}</div>')


def with_params(spec: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with the values of the top-level parameters it declares set from ``values`` (what the page's controls
    and a finding's link set); ``spec`` itself when none changes."""
    params = spec.get("params") or []
    new = [{**p, "value": values[p["name"]]} if p.get("name") in values and "select" not in p
           and p.get("value") != values[p["name"]] else p for p in params]
    if all(a is b for a, b in zip(new, params)):
        return spec
    return {**spec, "params": new}


#: a chart data block (a ``datasets`` entry or ``data.values``) of at least this many characters of JSON goes to the
#: page's shared data store (:func:`share_chart_data`); smaller ones stay in their spec
SHARED_DATA_MIN_CHARS = 2_000
#: a text column whose distinct values are at most this share of its rows is stored as a dictionary + indices
_DICT_SHARE = 0.5


def _columnar(rows: list) -> Any:
    """``rows`` (a list of objects with the same keys) as ``{"n": rows, "c": [[key, column], ...]}``; a column of
    strings repeating enough as ``{"d": [distinct], "i": [indices]}``; floats without arithmetic noise (fmt.clean,
    as in the metrics JSON). Anything else (mixed keys, non-object rows) is returned as is."""
    if not rows or not all(isinstance(r, dict) for r in rows):
        return rows
    keys = list(rows[0])
    if any(len(r) != len(keys) or list(r) != keys for r in rows):
        return rows
    cols = []
    for k in keys:
        col = [r[k] for r in rows]
        if all(isinstance(v, str) for v in col):
            distinct = list(dict.fromkeys(col))
            if len(distinct) <= _DICT_SHARE * len(col):
                index = {v: i for i, v in enumerate(distinct)}
                cols.append([k, {"d": distinct, "i": [index[v] for v in col]}])
                continue
        cols.append([k, [fmt.clean(v) if type(v) is float else v for v in col]])
    return {"n": len(rows), "c": cols}


def share_chart_data(figures: list[dict[str, Any]]) -> dict[str, Any]:
    """Move the chart data out of the specs into one page-level store keyed by content hash: identical data in two
    charts is written once, and each block is written column by column (:func:`_columnar`). A spec's ``datasets``
    entry or ``data.values`` list of at least :data:`SHARED_DATA_MIN_CHARS` becomes ``{"$rg": key}``; charts.js
    puts the rows back before drawing. Returns the store (empty when nothing was moved); ``figures`` get the new
    specs (a spec is never changed in place) and their ``renderer``: canvas above thresholds.PAGE_CANVAS_ROWS rows."""
    store: dict[str, Any] = {}
    counted = [0]

    def move(values: Any) -> Any:
        if not isinstance(values, list) or not values:
            return values
        counted[0] += len(values)
        text = json.dumps(values, separators=(",", ":"), allow_nan=False)
        if len(text) < SHARED_DATA_MIN_CHARS:
            return values
        key = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
        if key not in store:
            store[key] = _columnar(values)
        return {"$rg": key}

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k == "datasets" and isinstance(v, dict):
                    out[k] = {name: move(vals) for name, vals in v.items()}
                elif k == "data" and isinstance(v, dict) and isinstance(v.get("values"), list):
                    out[k] = {**v, "values": move(v["values"])}
                else:
                    out[k] = walk(v)
            return out
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    for fig in figures:
        if fig.get("spec") is not None:
            counted[0] = 0
            fig["spec"] = walk(fig["spec"])
            # many marks: drawn on a canvas (one element) instead of one SVG element per mark
            fig["renderer"] = "canvas" if counted[0] > th.PAGE_CANVAS_ROWS else "svg"
    return _store_within_budget(store, figures)


def _store_within_budget(store: dict[str, Any], figures: list[dict[str, Any]]) -> dict[str, Any]:
    """The chart store within thresholds.PAGE_CHART_BYTES: while it is larger, the chart holding the most data
    of its own (blocks no other chart uses) is left out of the page with a note, and its data with it."""
    sizes = {k: len(script_json(v)) for k, v in store.items()}
    if sum(sizes.values()) <= th.PAGE_CHART_BYTES:
        return store
    refs = {id(f): set(re.findall(r'"\$rg": ?"([0-9a-f]+)"', json.dumps(f["spec"])))
            for f in figures if f.get("spec") is not None}
    while sum(sizes.values()) > th.PAGE_CHART_BYTES and refs:
        users: dict[str, int] = {}
        for keys in refs.values():
            for k in keys:
                users[k] = users.get(k, 0) + 1
        fig = max((f for f in figures if id(f) in refs),
                  key=lambda f: sum(sizes[k] for k in refs[id(f)] if users[k] == 1))
        own = [k for k in refs.pop(id(fig)) if users[k] == 1]
        size = sum(sizes[k] for k in own)
        for k in own:
            del sizes[k], store[k]
        fig["spec"] = None
        fig["left_out"] = (f"This chart was left out: its data takes {size / 1e6:.1f} MB, and the charts' data "
                           f"in this page keeps to {th.PAGE_CHART_BYTES / 1e6:.0f} MB (the largest charts are left out "
                           f"first). The tables and the metrics JSON (--json) have the numbers.")
    return store


def _rank_column(t: dict[str, Any]) -> int | None:
    """The index of the table's (first) rank column, or None."""
    return next((i for i, c in enumerate(t["columns"]) if c["kind"] == "rank"), None)


def _is_per_rank(t: dict[str, Any]) -> bool:
    """A table with one row per rank: a rank column whose values are all different."""
    i = _rank_column(t)
    if i is None or len(t["rows"]) < 2:
        return False
    ranks = [r[i] for r in t["rows"]]
    return len(set(map(repr, ranks))) == len(ranks)


def _row_chars(rows: list) -> float:
    """Characters one of ``rows`` takes in the page's JSON (:func:`script_json`): the mean over up to 200 rows."""
    if not rows:
        return 0.0
    sample = rows[::max(1, len(rows) // 200)][:200]
    return len(script_json(sample)) / len(sample)


#: the estimated size of a row (from a sample) times this: rows vary in size
_ROW_MARGIN = 1.05


def _named_ranks(run: Run, outcomes: list[SectionOutcome]) -> set[int]:
    """The ranks a reader looks for first: the slowest, median and fastest rank (facts) and up to
    thresholds.PAGE_RANKS_EXTREMES ranks of each finding."""
    F = facts.of(run)
    out = {int(r) for r in (F.slowest_rank, F.median_rank, F.fastest_rank) if r is not None} if F is not None else set()
    for o in outcomes:
        for f in (o.view.findings if o.view is not None else ()):
            out.update(int(r) for r in list(f.ranks)[:th.PAGE_RANKS_EXTREMES])
    return out


def _rows_to_keep(t: dict[str, Any], rows: list, k: int, ranks: set[int]) -> list:
    """``k`` of a per-rank table's ``rows``, in their order: the rows listed as HTML, the rows of ``ranks``, then
    the first others."""
    i = _rank_column(t)
    first = len(t.get("cells") or ())
    chosen = set(range(min(first, k)))
    for j, row in enumerate(rows):
        if len(chosen) >= k:
            break
        v = row[i]
        if isinstance(v, (int, float)) and v == v and int(v) in ranks:
            chosen.add(j)
    j = 0
    while len(chosen) < k and j < len(rows):
        chosen.add(j)
        j += 1
    return [rows[j] for j in sorted(chosen)]


def fit_table_data(context: dict[str, Any], page_chars, budget: int | None = None) -> None:
    """Cut the rows the page embeds per table so the page stays within thresholds.PAGE_BYTES at any rank and step
    count. ``page_chars()``: the page's size when each table embeds only the rows it lists as HTML (always kept);
    what the rest of the budget allows beyond them goes first to the per-rank tables (one row per rank: any rank a
    filter away), then to the other tables, each set by thresholds.fair_shares of their sizes; each table keeps its
    first rows (the section's order) and says how many it left out; a per-rank table keeps the rows of its section's
    ``keep_ranks`` first (the ranks its charts draw, the slowest / median / fastest rank, the ranks findings name:
    :func:`_rows_to_keep`). ``context``'s tables are changed in place."""
    tables = [t for sec in context["sections"] for t in sec.get("tables") or ()]
    ranks = [set(sec.get("keep_ranks") or ()) for sec in context["sections"] for _t in sec.get("tables") or ()]
    full = [t["rows"] for t in tables]
    shown = [len(t.get("cells") or ()) for t in tables]
    for t, n in zip(tables, shown):
        t["rows"] = t["rows"][:n]
    budget = th.PAGE_BYTES if budget is None else budget
    room = budget - page_chars() - 1_000 * len(tables)  # a note per table saying what it left out
    widths = [_ROW_MARGIN * _row_chars(rows[n:]) for rows, n in zip(full, shown)]
    sizes = [w * (len(rows) - n) for w, rows, n in zip(widths, full, shown)]
    per_rank = [False] * len(tables)  # (only asked when a table is cut)
    if sum(sizes) <= room:
        keep = [len(rows) for rows in full]
    else:
        per_rank = [_is_per_rank({**t, "rows": rows}) for t, rows in zip(tables, full)]
        shares = [0.0] * len(tables)
        for tier in (True, False):
            idx = [i for i, f in enumerate(per_rank) if f is tier]
            for i, share in zip(idx, th.fair_shares([sizes[i] for i in idx], room)):
                shares[i] = share
            room -= sum(shares[i] for i in idx)
        keep = [n + (min(len(rows) - n, int(share / w + 1e-6)) if w else 0)  # a whole share: every row
                for rows, n, share, w in zip(full, shown, shares, widths)]
    for t, rows, k, named, is_per_rank in zip(tables, full, keep, ranks, per_rank):
        if k < len(rows) and is_per_rank and named:  # the ranks the charts draw and the findings name stay
            t["rows"], t["keeps_ranks"] = _rows_to_keep(t, rows, k, named), True
        else:
            t["rows"] = rows[:k]
        if k < len(rows):  # a table built elsewhere (tests) may lack the counts: set only when cut here
            t["truncated"] = max(0, k - len(t.get("cells") or ()))
            t["rows_left_out"] = t.get("rows_total", len(rows)) - k


def render_html(context: dict[str, Any], static: bool = False) -> str:
    """The page. ``static``: every chart as inline SVG and no JavaScript at all (for viewers whose
    Content-Security-Policy blocks scripts, e.g. Jenkins artifacts, and for mail bodies)."""
    env = environment()
    assets = {"css": _safe_script(read_asset("report.css"), "report.css")}
    if static:
        figures = {}
        for sec in context["sections"]:
            for fig in sec["figures"]:
                fig["svg"] = static_svg(fig["spec"])
                figures[fig["id"]] = fig
        for f in context["findings"]:  # no script can set a chart up: the chart as each finding reads it
            view = f.get("view") or {}
            fig = figures.get(view.get("figure"))
            spec = with_params(fig["spec"], view.get("signals") or {}) if fig and fig["spec"] else None
            if spec is not None and spec is not fig["spec"]:
                f["svg"] = static_svg(spec)
    else:
        sections = [{**sec, "figures": [dict(fig) for fig in sec["figures"]],
                     "tables": [dict(t) for t in sec.get("tables") or ()]} for sec in context["sections"]]
        context = {**context, "sections": sections,
                   "chart_data": share_chart_data([fig for sec in sections for fig in sec["figures"]])}
        assets.update(charts_js=_safe_script(read_asset("charts.js"), "charts.js"),
                      table_js=_safe_script(read_asset("table.js"), "table.js"),
                      vega_bundle=_safe_script(vega_bundle(), "vl-convert bundle"))
    budget = {"rows": MAX_EMBEDDED_ROWS, "bytes": MAX_EMBEDDED_BYTES, "page": th.PAGE_BYTES}
    template = env.get_template("report.html.j2")

    def page() -> str:
        return template.render(**context, assets=assets, static=static, budget=budget)

    if not static:
        rows = sum(len(t.get("rows") or ()) for sec in context["sections"] for t in sec.get("tables") or ())
        if rows <= FIT_AFTER_ROWS:  # a small run: the whole page at once (one render), cut only if it is too big
            html = page()
            if len(html.encode("utf-8")) <= th.PAGE_BYTES:
                return html
        size = lambda: len(page().encode("utf-8"))  # noqa: E731 - bytes of the file
        fit_table_data(context, size)
        # the fit estimates each table's rows from a sample; a page still over the budget (rows of a table vary:
        # long names sorted first) is fitted again, from the rows it kept, to the budget less what it was over
        budget_now = th.PAGE_BYTES
        for _ in range(FIT_RETRIES):
            html = page()
            over = len(html.encode("utf-8")) - th.PAGE_BYTES
            if over <= 0:
                return html
            budget_now -= int(over * 1.1) + 10_000
            fit_table_data(context, size, budget_now)
    return page()


#: embedded table rows up to which the page is first rendered whole (one render; a report of a few ranks) and cut by
#: :func:`fit_table_data` only if it is over thresholds.PAGE_BYTES; above it the fit comes first (two renders)
FIT_AFTER_ROWS = 20_000
#: times :func:`render_html` fits the tables again when the page is still over thresholds.PAGE_BYTES
FIT_RETRIES = 3


def temp_beside(path: str | os.PathLike) -> tuple[int, str]:
    """Create (mode 0600, exclusively) the temp file :func:`write_atomic` renames onto ``path``:
    ``.<name>.<random>.tmp`` in the same directory, the name shortened to fit the file system's name limit."""
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    try:
        name_max = os.pathconf(directory, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    stem = path.name
    while stem and len(os.fsencode(f".{stem}.")) + 8 + len(".tmp") > name_max:  # mkstemp adds 8 characters
        stem = stem[:-1]
    return tempfile.mkstemp(dir=directory, prefix=f".{stem}.", suffix=".tmp")


@contextlib.contextmanager
def _signals_deferred():
    """SIGINT / SIGTERM / SIGHUP received inside the block are delivered when it ends (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    saved = {}
    for sig in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        handler = signal.getsignal(sig) if sig is not None else None
        if handler not in (signal.SIG_IGN, None):
            saved[sig] = signal.signal(sig, lambda signum, _frame: pending.append(signum))
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        if pending:
            signal.raise_signal(pending[0])


@contextlib.contextmanager
def atomic_binary(path: str | os.PathLike):
    """A binary file handle on a temp file beside ``path``, renamed onto it (mode 0644) when the block ends; removed
    when the block raises (the old file stays until the rename). For outputs written in pieces (the merged
    timeline, a .reduced file)."""
    fd, tmp = temp_beside(str(path))
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_atomic(outputs: dict[str | os.PathLike, str] | str | os.PathLike, text: str | None = None, *,
                 written: list[str] | None = None) -> None:
    """Write each text to a temp file beside its path, then rename them all into place.

    ``write_atomic(path, text)`` or ``write_atomic({path: text, ...})``. Every temp file is complete before the
    first rename, and the renames run back to back with SIGINT / SIGTERM / SIGHUP held until the last one, so the
    outputs change together or not at all (short of a failing rename or SIGKILL). ``written`` receives each
    path as its rename succeeds: when a later one fails the caller can say exactly what was written. Temp
    files not renamed are removed whatever ends the call (an exception, KeyboardInterrupt, SIGTERM turned
    into one); an existing output is never touched before its rename.
    """
    if not isinstance(outputs, dict):
        outputs = {outputs: text}
    written = [] if written is None else written
    staged: list[tuple[str, str]] = []
    try:
        for path, body in outputs.items():
            with _signals_deferred():  # no temp file exists that `staged` does not list
                fd, tmp = temp_beside(path)
                staged.append((str(path), tmp))
                fh = os.fdopen(fd, "w", encoding="utf-8")
            with fh:
                fh.write(body)
            os.chmod(tmp, 0o644)
        with _signals_deferred():
            for path, tmp in staged:
                os.replace(tmp, path)
                written.append(path)
    finally:
        for path, tmp in staged:
            if path not in written:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def content_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


__all__ = ["build_context", "render_html", "write_atomic", "temp_beside", "format_value", "Column"]
