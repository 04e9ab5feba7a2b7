"""Quality checks of a rendered report in real Chromium (issue 13, "Done when").

Importable (tests/test_report_quality.py) and runnable on one file::

    python tests/quality.py REPORT.html [--dark] [--print] [--static]

prints every violation on one line (``check: where: detail``) and exits 1 if there is any. ``--static``
is detected by itself (a report whose charts are inline SVG) but may be given to insist on it.

The page is opened from file:// with the network blocked exactly as tests/test_browser.py does (same
launch arguments, same route), one JavaScript pass (``COLLECT_JS``) gathers raw facts (sizes, boxes,
colours, cell texts) and the Python functions below judge them, so the rules can be tested without a
browser. The checks:

``overflow``
    No chart or table container whose content is wider than its box (``scrollWidth > clientWidth + 1``),
    checked on every ``.rg-chart``, ``.rg-figure``, ``.rg-table``, ``.rg-table-scroll``, section, table
    cell and the page itself; only the innermost overflowing container is reported. The one exception is
    an *explicit scroll area*: an element with class ``rg-table-scroll`` whose computed ``overflow-x`` is
    ``auto`` or ``scroll`` and which draws a horizontal scrollbar that takes layout space (its
    offsetHeight minus clientHeight minus its borders is at least ``MIN_SCROLLBAR_PX``; a scrollbar hidden
    with ``scrollbar-width: none`` or ``::-webkit-scrollbar`` does not count). A chart that overflows is
    always a failure, whatever its overflow style. Paper does not scroll: in print media there is no
    scroll area, and the page is laid out ``PRINT_WIDTH_PX`` wide (A4 portrait inside Chromium's default
    margins) without relying on Chromium's shrink-to-fit.
``digits``
    Every visible numeric cell (``td.rg-col-num``, or a cell whose column header is ``rg-col-num``, or
    whose ``data-kind`` (on the td, else on its header) is not ``text``) shows at most ``MAX_SIG`` significant
    digits in every number it holds; integers in ``int``/``rank`` columns (ids, counts) are exempt, and a
    column typed so whose header names a unit is reported (it would dodge the digit rule). The
    column header names a unit when the kind has one (the units of ``reportgen.fmt``: ``ms`` -> ns/µs/ms/s,
    ``flop`` -> FLOP ... EFLOP, ``ratio``/``pct`` -> %, ...). A numeric column without ``data-kind`` is
    reported once (its digits are then checked with no exemption).
``overlap``
    No two non-empty, visible SVG ``<text>`` of one chart overlap by more than ``OVERLAP_TOL_PX``: each
    text's ``getBBox()`` mapped to the screen with ``getScreenCTM()`` (so rotated labels are exact oriented
    boxes, compared with the separating-axis test). Texts hidden by opacity 0 (Vega's label-overlap
    removal), ``visibility``/``display`` or wholly outside their clip path are ignored.
``contrast``
    (dark media) Every visible chart text and line - SVG text, strokes of rules (axis domain and ticks, rule
    marks, whiskers), line/trail/path marks (series, edges) and symbols (legend symbols, points) - has a WCAG
    contrast ratio of at least ``MIN_CONTRAST`` with the background behind it: the chart's background (its
    own full-size background rect, the SVG's background colour, then its ancestors' backgrounds, composited),
    and for a text drawn on a filled rect mark, that rect. Colours are composited with their opacity.
    Grid lines (``role-axis-grid``) and the view frame are decoration and not checked.
``static-text``
    (``--static`` reports) every SVG ``<text>`` lies inside its SVG's box (1 px tolerance).
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

if __name__ == "__main__":  # run as a script: sys.path[0] is tests/ (test_browser); reportgen of this checkout
    sys.path.insert(1, str(Path(__file__).resolve().parent.parent))

from test_browser import ALLOWED, LAUNCH_ARGS, READY, _chromium  # noqa: E402

from reportgen import fmt  # noqa: E402

MEDIA = ("light", "dark", "print")
CHECKS = ("overflow", "digits", "overlap", "contrast", "static-text")
SCREEN_WIDTH_PX = 1400
PRINT_WIDTH_PX = 718  # A4 portrait (793.7 px) less Chromium's default ~1 cm margins
PRINT_LANDSCAPE_WIDTH_PX = 1047  # A4 landscape (1122.5 px) less the same margins: the page of .rg-table-wide
MIN_SCROLLBAR_PX = 4
READY_TIMEOUT_MS = 90_000  # a wait limit, not a timing check: several pages may draw at once on a busy machine
MAX_SIG = 4
OVERLAP_TOL_PX = 1.0
INSIDE_TOL_PX = 1.0
MIN_CONTRAST = 3.0
EXEMPT_INT_KINDS = ("int", "rank")
MAX_EXAMPLES = 3


@dataclass(frozen=True)
class Violation:
    check: str
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.check}: {self.where}: {self.detail}"


def checks_for(medium: str, static: bool) -> tuple[str, ...]:
    """The checks that apply to a report rendered in ``medium``."""
    out = ["overflow", "digits", "overlap"]
    if medium == "dark":
        out.append("contrast")
    if static:
        out.append("static-text")
    return tuple(out)


# --------------------------------------------------------------------------------------------------
# browser side: one pass that gathers raw facts
# --------------------------------------------------------------------------------------------------

COLLECT_JS = r"""
(opts) => {
  const doc = document;
  const shown = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  const ROLES = [['rg-chart', 'chart'], ['rg-figure', 'figure'], ['rg-table-scroll', 'table scroll area'],
                 ['rg-table', 'table']];
  const nameOf = el => {
    if (el === doc.documentElement) return 'page';
    if (el.tagName === 'SECTION') return 'section ' + el.id;
    const host = el.closest('figure[id], .rg-table[id], section[id]');
    const id = host ? host.id : '?';
    if (el.tagName === 'TD' || el.tagName === 'TH') {
      return id + ' cell ' + JSON.stringify(el.innerText.trim().slice(0, 40));
    }
    const role = ROLES.find(([c]) => el.classList.contains(c));
    return id + ' ' + (role ? role[1] : el.tagName.toLowerCase());
  };

  // ---- overflow ----------------------------------------------------------------------------------
  const scrollArea = el => {
    const cs = getComputedStyle(el);
    const bar = el.offsetHeight - el.clientHeight - parseFloat(cs.borderTopWidth) - parseFloat(cs.borderBottomWidth);
    return el.classList.contains('rg-table-scroll') && (cs.overflowX === 'auto' || cs.overflowX === 'scroll')
      && bar >= opts.minScrollbar;
  };
  const boxes = [doc.documentElement].concat(Array.from(doc.querySelectorAll(
    '.rg-chart, .rg-figure, .rg-table, .rg-table-scroll, section, table th, table td')));
  const over = [];
  for (const el of boxes) {
    if (!shown(el)) continue;
    // a wide table prints on its own landscape page (report.css: .rg-table-wide { page: rg-wide }): its box
    // there is wider than the portrait layout by the difference of the printable widths
    // (and so are the section and page around it; their other content is checked box by box)
    const wide = opts.landscapeExtra && (el.closest('.rg-table-wide') || el.querySelector('.rg-table-wide'));
    const cw = el.clientWidth + (wide ? opts.landscapeExtra : 0);
    if (el.scrollWidth > cw + 1) over.push({el, sw: el.scrollWidth, cw, scroll: opts.allowScroll && scrollArea(el)});
  }
  const failing = over.filter(o => !o.scroll);
  const overflow = failing  // the innermost only: a wide chart also widens its figure and section
    .filter(o => !failing.some(p => p !== o && o.el.contains(p.el)))
    .map(o => ({where: nameOf(o.el), content: o.sw, box: o.cw}));

  // ---- numeric cells -----------------------------------------------------------------------------
  const columns = [];
  for (const table of doc.querySelectorAll('table')) {
    if (!shown(table)) continue;
    // leaf header of each column: the lowest header row's cell there (grouped headers span columns)
    const taken = [];
    // the per-column filter row (table.js) holds controls, not column names
    Array.from(table.tHead ? table.tHead.rows : []).filter(tr => !tr.classList.contains('rg-filter-row'))
      .forEach((tr, ri) => {
      let c = 0;
      for (const th of tr.cells) {
        while (taken[ri] && taken[ri][c]) c++;
        for (let dr = 0; dr < th.rowSpan; dr++) for (let dc = 0; dc < th.colSpan; dc++) {
          (taken[ri + dr] = taken[ri + dr] || [])[c + dc] = th;
        }
        c += th.colSpan;
      }
    });
    const leaf = taken.length ? taken[taken.length - 1] : [];
    const tname = (table.closest('.rg-table[id], section[id]') || table).id || table.id || 'table';
    const cols = new Map();
    for (const body of table.tBodies) for (const tr of body.rows) {
      if (!shown(tr)) continue;
      let c = 0;
      for (const td of tr.cells) {
        const th = leaf[c] || null;
        const span = td.colSpan;
        c += span;
        if (td.tagName !== 'TD' || span > 1 || !shown(td)) continue;
        const kind = td.dataset.kind || (th && th.dataset.kind) || null;
        const numeric = td.classList.contains('rg-col-num') || (th && th.classList.contains('rg-col-num'))
          || (kind !== null && kind !== 'text');
        if (!numeric) continue;
        const key = c - span;
        if (!cols.has(key)) cols.set(key, {table: tname, col: key, header: th ? th.innerText.trim() : '',
                                           kinds: [], texts: []});
        const e = cols.get(key);
        if (!e.kinds.includes(kind)) e.kinds.push(kind);
        e.texts.push(td.innerText.trim());
      }
    }
    columns.push(...cols.values());
  }

  // ---- charts ------------------------------------------------------------------------------------
  const painted = c => !!c && c !== 'none' && !c.startsWith('url(') && !/^rgba\(.*,\s*0\)$/.test(c);
  const alphaOf = (el, svg, which) => {
    let a = parseFloat(getComputedStyle(el)[which]);
    for (let n = el; n && n !== svg.parentNode; n = n.parentNode) {
      if (n.nodeType === 1) a *= parseFloat(getComputedStyle(n).opacity);
    }
    return isNaN(a) ? 1 : a;
  };
  const corners = (el, bb) => {
    const m = el.getScreenCTM();
    if (!m) return null;
    return [[bb.x, bb.y], [bb.x + bb.width, bb.y], [bb.x + bb.width, bb.y + bb.height], [bb.x, bb.y + bb.height]]
      .map(([x, y]) => { const p = new DOMPoint(x, y).matrixTransform(m); return [p.x, p.y]; });
  };
  const clipBox = el => {  // screen polygon of the nearest clip-path rect, or null
    const g = el.closest('[clip-path]');
    if (!g) return null;
    const m = /url\(["']?#([^"')]+)["']?\)/.exec(g.getAttribute('clip-path'));
    const cp = m && doc.getElementById(m[1]);
    const shape = cp && cp.querySelector('rect, path');
    if (!shape) return null;
    let bb;
    try { bb = shape.getBBox(); } catch (e) { return null; }
    return corners(g, bb);
  };
  const bgLayers = el => {  // backgrounds from el upwards, stopping at the first opaque one
    const out = [];
    for (let n = el; n && n.nodeType === 1; n = n.parentElement) {
      const c = getComputedStyle(n).backgroundColor;
      out.push(c);
      if (/^rgb\(/.test(c)) break;
    }
    return out;
  };
  const charts = [];
  for (const chart of doc.querySelectorAll('.rg-chart')) {
    if (!shown(chart)) continue;
    const svgs = Array.from(chart.querySelectorAll('svg')).filter(s => !s.parentElement.closest('svg, details')
      && s.getClientRects().length > 0);  // (a --static chart's variant for the other colour scheme is not shown)
    svgs.forEach((svg, si) => {
      const r = svg.getBoundingClientRect();
      const name = nameOf(chart) + (svgs.length > 1 ? ' svg' + si : '');
      const layers = bgLayers(svg);
      const first = svg.firstElementChild;
      if (first && first.tagName === 'rect') {  // a full-size background rect (vl-convert)
        const fr = first.getBoundingClientRect();
        const cs = getComputedStyle(first);
        if (fr.width >= 0.95 * r.width && fr.height >= 0.95 * r.height && cs.fill !== 'none') {
          layers.unshift(cs.fill.replace(/^rgb\((.*)\)$/, (m0, v) => `rgba(${v}, ${parseFloat(cs.fillOpacity)})`));
        }
      }
      const texts = [], lines = [], under = [];
      const walker = doc.createTreeWalker(svg, NodeFilter.SHOW_ELEMENT);
      for (let n = walker.currentNode; n; n = walker.nextNode()) {
        const tag = n.tagName.toLowerCase();
        const g = n.parentElement && n.parentElement.closest('g[class]');
        const cls = g ? g.getAttribute('class') : '';
        const cs = getComputedStyle(n);
        if (tag === 'text') {
          const t = n.textContent.trim();
          if (!t || cs.visibility !== 'visible' || cs.display === 'none') continue;
          let bb;
          try { bb = n.getBBox(); } catch (e) { continue; }
          if (!(bb.width > 0 && bb.height > 0)) continue;
          const poly = corners(n, bb);
          if (!poly) continue;
          const a = alphaOf(n, svg, 'fillOpacity');
          if (!(a > 0.02) || !painted(cs.fill)) continue;
          const cx = poly.reduce((s, p) => s + p[0], 0) / 4, cy = poly.reduce((s, p) => s + p[1], 0) / 4;
          let below = null;
          for (let i = under.length - 1; i >= 0; i--) {
            const u = under[i];
            if (cx >= u.x && cx <= u.x + u.w && cy >= u.y && cy <= u.y + u.h) {
              below = {fill: u.fill, a: u.a};
              break;
            }
          }
          texts.push({t, poly, clip: clipBox(n), fill: cs.fill, a, cls, below});
        } else if ((tag === 'path' || tag === 'rect') && painted(cs.fill) && cs.display !== 'none'
                   && (/\bmark-rect role-mark\b/.test(cls) || n.classList.contains('background'))) {
          // what a later text may sit on: a filled rect mark (a heatmap cell) or a group's filled background
          const a = alphaOf(n, svg, 'fillOpacity');
          const b = n.getBoundingClientRect();
          if (a > 0.02) under.push({x: b.left, y: b.top, w: b.width, h: b.height, fill: cs.fill, a});
        }
        if (['path', 'line', 'polyline', 'polygon', 'rect', 'circle', 'ellipse'].includes(tag)
            && /\bmark-(rule|line|trail|path|symbol)\b/.test(cls) && !/role-axis-grid/.test(cls)
            && !n.classList.contains('background') && cs.display !== 'none' && cs.visibility === 'visible') {
          const b = n.getBoundingClientRect();
          if (b.width === 0 && b.height === 0) continue;
          lines.push({cls: cls.replace(/^mark-(\w+) /, '$1 '), stroke: cs.stroke,
                      sa: alphaOf(n, svg, 'strokeOpacity'), sw: parseFloat(cs.strokeWidth) || 0,
                      fill: /\bmark-symbol\b/.test(cls) ? cs.fill : 'none', fa: alphaOf(n, svg, 'fillOpacity')});
        }
      }
      charts.push({where: name, box: [r.left, r.top, r.width, r.height], bg: layers, texts, lines});
    });
  }
  return {overflow, columns, charts,
          static: !!doc.querySelector('.rg-chart.rg-static') && !doc.querySelector('.rg-chart[data-spec]')};
}
"""

SETTLE_JS = """
async () => {
  const snap = () => Array.from(document.querySelectorAll('.rg-chart svg'))
    .map(s => s.getAttribute('width') + 'x' + s.getAttribute('height') + ':' + s.getBoundingClientRect().width)
    .join('|');
  const frame = () => new Promise(r => requestAnimationFrame(() => setTimeout(r, 60)));
  let prev = null, same = 0;
  for (let i = 0; i < 50; i++) {  // three unchanged frames in a row, at most ~3 s
    await frame();
    const now = snap();
    same = now === prev ? same + 1 : 0;
    if (same === 3) return i;
    prev = now;
  }
  return -1;
}
"""


# --------------------------------------------------------------------------------------------------
# opening a page
# --------------------------------------------------------------------------------------------------

def launch(playwright, executable: str | None = None):
    """Chromium with test_browser's arguments, but with classic scrollbars drawn (Playwright hides them
    by default in headless mode, and the overflow check needs to see them)."""
    exe = executable or _chromium()
    if not exe:
        raise RuntimeError("no Chromium found (set REPORTGEN_CHROMIUM)")
    return playwright.chromium.launch(executable_path=exe, args=LAUNCH_ARGS, ignore_default_args=["--hide-scrollbars"])


class Opening:
    """A report page being opened in ``medium`` (print: opened light, see ``to_print``). The constructor
    returns once the document has loaded; the charts draw in the browser while the caller does other
    work (several pages can draw at once), and ``ready()`` waits for them."""

    def __init__(self, browser, path: Path, medium: str = "light"):
        if medium not in MEDIA:
            raise ValueError(f"medium must be one of {MEDIA}")
        self.medium = medium
        self.blocked: list[str] = []
        self.ctx = browser.new_context(viewport={"width": SCREEN_WIDTH_PX, "height": 1000},
                                       color_scheme="dark" if medium == "dark" else "light")
        self.ctx.route("**/*", self._route)
        self.page = self.ctx.new_page()
        self.page.set_default_timeout(READY_TIMEOUT_MS)
        self.page.goto(Path(path).resolve().as_uri())

    def _route(self, r) -> None:
        if r.request.url.startswith(ALLOWED):
            r.continue_()
        else:
            self.blocked.append(r.request.url)
            r.abort()

    def ready(self):
        """The page with every chart drawn (and, for print, in its printed form)."""
        page = self.page
        if page.locator(".rg-chart[data-spec]").count():
            page.wait_for_function(READY, timeout=READY_TIMEOUT_MS)
        if self.medium == "print":
            to_print(page)
        else:
            page.evaluate(SETTLE_JS)
        if self.blocked:
            raise RuntimeError(f"the report requested {self.blocked[:3]}")
        return page

    def close(self) -> None:
        self.ctx.close()


def open_page(browser, path: Path, medium: str = "light"):
    """(context, page) of ``path`` in ``medium``, charts drawn; the caller closes the context."""
    o = Opening(browser, path, medium)
    try:
        return o.ctx, o.ready()
    except BaseException:
        o.close()
        raise


def to_print(page) -> None:
    """Turn an open light page into its printed form: what the report does before printing
    (``beforeprint``), print media, the page as wide as A4 paper's printable width; wait for charts that
    follow their container's width to redraw."""
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    page.emulate_media(media="print")
    page.set_viewport_size({"width": PRINT_WIDTH_PX, "height": 1000})
    bar = page.evaluate("window.innerWidth - document.documentElement.clientWidth")
    if bar > 0:  # paper has no scrollbar: the layout width must be the printable width itself
        page.set_viewport_size({"width": PRINT_WIDTH_PX + bar, "height": 1000})
    page.evaluate(SETTLE_JS)


def collect(page, medium: str) -> dict:
    """The raw facts of the page as it is now rendered in ``medium``."""
    opts = {"allowScroll": medium != "print", "minScrollbar": MIN_SCROLLBAR_PX,
            "landscapeExtra": PRINT_LANDSCAPE_WIDTH_PX - PRINT_WIDTH_PX if medium == "print" else 0}
    # one JSON string: much faster than Playwright's own serialisation of a large object
    return json.loads(page.evaluate(f"(opts) => JSON.stringify(({COLLECT_JS})(opts))", opts))


# --------------------------------------------------------------------------------------------------
# judging
# --------------------------------------------------------------------------------------------------

def judge(facts: dict, medium: str, static: bool | None = None) -> dict[str, list[Violation]]:
    """Violations per check for the facts of one page in one medium."""
    static = facts.get("static", False) if static is None else static
    return {check: CHECK_FUNCS[check](facts) for check in checks_for(medium, static)}


def check_overflow(facts: dict) -> list[Violation]:
    return [Violation("overflow", o["where"], f"content {o['content']} px wide in a {o['box']} px box")
            for o in facts["overflow"]]


# numbers as they appear in cells: 12,345.6 / 1 234 (narrow no-break space) / 0.0422 / 1.2e+05 / -3
_NUM = re.compile(r"(?<![\w.])[-+\u2212]?(?:\d{1,3}(?:[,\u202f\u00a0]\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?"
                  r"|(?<![\w.])[-+\u2212]?\.\d+")


def numbers_in(text: str) -> list[str]:
    return _NUM.findall(text)


def significant_digits(token: str) -> int:
    """Significant digits a number is written with: '187.8737' -> 7, '0.0422' -> 3, '12,000' -> 2,
    '0.200000' -> 6, '0.000' -> 3 (a zero written with decimals claims their precision), '7' -> 1."""
    mant = re.split(r"[eE]", token.lstrip("+-\u2212"))[0]
    mant = re.sub(r"[,\u202f\u00a0]", "", mant)
    if "." in mant:
        whole, frac = mant.split(".", 1)
        digits = (whole + frac).lstrip("0")
        return len(digits) if digits else max(1, len(frac))
    digits = mant.lstrip("0").rstrip("0")
    return max(1, len(digits))


def is_integer_token(token: str) -> bool:
    return "." not in token and "e" not in token.lower()


def _unit_pattern(kind: str) -> re.Pattern | None:
    if kind in ("ratio", "pct"):
        return re.compile("%")
    units = [u for u, _ in fmt.UNITS.get(kind, [])]
    if not units:
        return None
    if "µs" in units:
        units.append("us")
    alts = "|".join(re.escape(u) for u in sorted(units, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-zµ])(?:{alts})(?![A-Za-z])")


_ALL_UNIT_PATTERNS = [p for p in (_unit_pattern(k) for k in fmt.UNITS) if p is not None]


def check_column(col: dict) -> list[Violation]:
    """One numeric column: the unit in its header and the digits of every cell (a missing data-kind is
    reported per table by ``check_digits``)."""
    where = f"{col['table']} column {col['col'] + 1} {col['header']!r}"
    kinds = [k for k in col["kinds"] if k]
    out = []
    if len(kinds) > 1:
        out.append(Violation("digits", where, f"cells of one column disagree on their kind: {kinds}"))
    kind = kinds[0] if len(kinds) == 1 else None
    if kind in EXEMPT_INT_KINDS and any(p.search(col["header"]) for p in _ALL_UNIT_PATTERNS):
        out.append(Violation("digits", where, f"a quantity with a unit is typed {kind!r} (ids and counts only), "
                             "which would exempt its digits"))
    pat = _unit_pattern(kind) if kind else None
    if pat is not None and not pat.search(col["header"]):
        out.append(Violation("digits", where, f"header names no unit for kind {kind!r} "
                             f"(expected one of {[u for u, _ in fmt.UNITS.get(kind, [('%', 1)])]})"))
    bad = []
    for text in col["texts"]:
        for tok in numbers_in(text):
            if kind in EXEMPT_INT_KINDS and is_integer_token(tok):
                continue
            if significant_digits(tok) > MAX_SIG:
                bad.append(text)
                break
    if bad:
        ex = ", ".join(repr(t) for t in list(dict.fromkeys(bad))[:MAX_EXAMPLES])
        out.append(Violation("digits", where, f"{len(bad)} of {len(col['texts'])} cells show more than {MAX_SIG} "
                             f"significant digits, e.g. {ex}"))
    return out


def check_digits(facts: dict) -> list[Violation]:
    out = []
    untyped: dict[str, list[str]] = {}
    for col in facts["columns"]:
        if not any(col["kinds"]):
            untyped.setdefault(col["table"], []).append(col["header"])
        out.extend(check_column(col))
    for table, headers in untyped.items():
        out.append(Violation("digits", table, f"{len(headers)} numeric column(s) without data-kind (their digits are "
                             f"checked with no int/rank exemption): {', '.join(repr(h) for h in headers)}"))
    return out


# ---- geometry ---------------------------------------------------------------------------------------

Poly = list  # four [x, y] corners


def _axes(poly: Poly) -> Iterable[tuple[float, float]]:
    for i in range(2):  # a parallelogram has two edge directions
        (x0, y0), (x1, y1) = poly[i], poly[i + 1]
        dx, dy = x1 - x0, y1 - y0
        n = math.hypot(dx, dy)
        if n > 0:
            yield (-dy / n, dx / n)


def overlap_depth(a: Poly, b: Poly) -> float:
    """How deep two convex quadrilaterals overlap (separating-axis test): the smallest overlap of their
    projections over the edge normals of both; <= 0 when they are apart."""
    depth = math.inf
    for ax, ay in list(_axes(a)) + list(_axes(b)):
        pa = [x * ax + y * ay for x, y in a]
        pb = [x * ax + y * ay for x, y in b]
        depth = min(depth, min(max(pa), max(pb)) - max(min(pa), min(pb)))
        if depth <= 0:
            return depth
    return depth if depth != math.inf else 0.0


def _aabb(poly: Poly) -> tuple[float, float, float, float]:
    xs = [p[0] for p in poly]
    ys = [p[1] for p in poly]
    return min(xs), min(ys), max(xs), max(ys)


def _visible_texts(chart: dict) -> list[dict]:
    out = []
    for t in chart["texts"]:
        if t.get("clip"):
            x0, y0, x1, y1 = _aabb(t["poly"])
            c0, d0, c1, d1 = _aabb(t["clip"])
            if x1 <= c0 or x0 >= c1 or y1 <= d0 or y0 >= d1:
                continue  # wholly clipped away
        out.append(t)
    return out


def overlapping_pairs(texts: list[dict], tol: float = OVERLAP_TOL_PX) -> list[tuple[dict, dict, float]]:
    items = sorted(((_aabb(t["poly"]), t) for t in texts), key=lambda e: e[0][0])
    out = []
    for i, (ba, ta) in enumerate(items):
        for bb, tb in items[i + 1:]:
            if bb[0] >= ba[2] - tol:
                break
            if bb[1] >= ba[3] - tol or ba[1] >= bb[3] - tol:
                continue
            d = overlap_depth(ta["poly"], tb["poly"])
            if d > tol:
                out.append((ta, tb, d))
    return out


def check_overlap(facts: dict) -> list[Violation]:
    out = []
    for chart in facts["charts"]:
        pairs = overlapping_pairs(_visible_texts(chart))
        if pairs:
            ex = "; ".join(f"{a['t']!r} / {b['t']!r} ({d:.1f} px)" for a, b, d in pairs[:MAX_EXAMPLES])
            out.append(Violation("overlap", chart["where"], f"{len(pairs)} overlapping text pair(s), e.g. {ex}"))
    return out


def check_static_text(facts: dict) -> list[Violation]:
    out = []
    for chart in facts["charts"]:
        x, y, w, h = chart["box"]
        tol = INSIDE_TOL_PX
        outside = []
        for t in _visible_texts(chart):
            x0, y0, x1, y1 = _aabb(t["poly"])
            if x0 < x - tol or y0 < y - tol or x1 > x + w + tol or y1 > y + h + tol:
                sides = [s for s, bad in (("left", x0 < x - tol), ("top", y0 < y - tol), ("right", x1 > x + w + tol),
                                          ("bottom", y1 > y + h + tol)) if bad]
                outside.append(f"{t['t']!r} ({'/'.join(sides)})")
        if outside:
            out.append(Violation("static-text", chart["where"], f"{len(outside)} text(s) outside the {w:.0f}x{h:.0f} "
                                 f"SVG, e.g. {', '.join(outside[:MAX_EXAMPLES])}"))
    return out


# ---- colour -----------------------------------------------------------------------------------------

_RGB = re.compile(r"rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)(?:\s*[,/]\s*([\d.]+%?))?\s*\)")


def parse_color(text: str | None) -> tuple[float, float, float, float] | None:
    """'rgb(1, 2, 3)' / 'rgba(1, 2, 3, 0.5)' / '#abc' / '#aabbcc' -> (r, g, b, alpha); None for none,
    transparent keywords and paint servers."""
    if not text:
        return None
    text = text.strip()
    m = _RGB.fullmatch(text)
    if m:
        a = m.group(4)
        alpha = 1.0 if a is None else (float(a[:-1]) / 100 if a.endswith("%") else float(a))
        return float(m.group(1)), float(m.group(2)), float(m.group(3)), alpha
    if re.fullmatch(r"#[0-9a-fA-F]{3}|#[0-9a-fA-F]{6}", text):
        h = text[1:] if len(text) == 7 else "".join(c * 2 for c in text[1:])
        return float(int(h[0:2], 16)), float(int(h[2:4], 16)), float(int(h[4:6], 16)), 1.0
    return None


def over(fg: tuple, alpha: float, bg: tuple) -> tuple[float, float, float]:
    """``fg`` painted with ``alpha`` over the opaque ``bg``."""
    return tuple(alpha * f + (1 - alpha) * b for f, b in zip(fg[:3], bg[:3]))


def composite(layers: list[str], base: tuple = (255.0, 255.0, 255.0)) -> tuple[float, float, float]:
    """Backgrounds listed top first, composited over ``base`` (the canvas under the last one)."""
    color = base
    for text in reversed(layers):
        c = parse_color(text)
        if c is not None and c[3] > 0:
            color = over(c, c[3], color)
    return color


def luminance(rgb: tuple) -> float:
    def lin(c: float) -> float:
        c /= 255.0
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (lin(c) for c in rgb[:3])
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast(a: tuple, b: tuple) -> float:
    la, lb = luminance(a), luminance(b)
    hi, lo = max(la, lb), min(la, lb)
    return (hi + 0.05) / (lo + 0.05)


def _hex(rgb: tuple) -> str:
    return "#" + "".join(f"{int(round(c)):02x}" for c in rgb[:3])


def check_contrast(facts: dict) -> list[Violation]:
    out = []
    for chart in facts["charts"]:
        bg = composite(chart["bg"])
        bad: list[str] = []
        for t in _visible_texts(chart):
            fg = parse_color(t["fill"])
            if fg is None:
                continue
            back = bg
            if t.get("below"):
                u = parse_color(t["below"]["fill"])
                if u is not None:
                    back = over(u, u[3] * t["below"]["a"], bg)
            seen = over(fg, fg[3] * t["a"], back)
            ratio = contrast(seen, back)
            if ratio < MIN_CONTRAST:
                bad.append(f"text {t['t']!r} {_hex(seen)} on {_hex(back)} ({ratio:.2f}:1)")
        for ln in chart["lines"]:
            paints = []
            s = parse_color(ln["stroke"])
            if s is not None and ln["sw"] > 0 and s[3] * ln["sa"] > 0.02:
                paints.append(over(s, s[3] * ln["sa"], bg))
            f = parse_color(ln["fill"])
            if f is not None and f[3] * ln["fa"] > 0.02:
                paints.append(over(f, f[3] * ln["fa"], bg))
            if not paints:
                continue
            best = max(paints, key=lambda p: contrast(p, bg))
            ratio = contrast(best, bg)
            if ratio < MIN_CONTRAST:
                bad.append(f"{ln['cls'].split()[0]} {ln['cls'].split()[1] if len(ln['cls'].split()) > 1 else ''} "
                           f"{_hex(best)} on {_hex(bg)} ({ratio:.2f}:1)".replace("  ", " "))
        if bad:
            ex = "; ".join(list(dict.fromkeys(bad))[:MAX_EXAMPLES])
            out.append(Violation("contrast", chart["where"], f"{len(bad)} item(s) below {MIN_CONTRAST:g}:1, e.g. {ex}"))
    return out


CHECK_FUNCS = {"overflow": check_overflow, "digits": check_digits, "overlap": check_overlap,
               "contrast": check_contrast, "static-text": check_static_text}


# --------------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------------

def run_file(browser, path: Path, medium: str, static: bool | None = None) -> dict[str, list[Violation]]:
    """Violations per check of one report file in one medium (``static``: insist on a --static report)."""
    ctx, page = open_page(browser, path, medium)
    try:
        facts = collect(page, medium)
    finally:
        ctx.close()
    if static and not facts["static"]:
        raise SystemExit(f"{path}: --static given, but the report draws its charts with JavaScript")
    return judge(facts, medium, static or None)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Browser quality checks of a reportgen HTML report (issue 13).")
    ap.add_argument("report", type=Path)
    ap.add_argument("--dark", action="store_true", help="dark colour scheme (adds the contrast check)")
    ap.add_argument("--print", dest="print_", action="store_true", help="print media at A4 printable width")
    ap.add_argument("--static", action="store_true", help="insist the report is a --static one")
    args = ap.parse_args(argv)
    if args.dark and args.print_:
        ap.error("choose --dark or --print")
    medium = "dark" if args.dark else "print" if args.print_ else "light"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = launch(p)
        try:
            result = run_file(browser, args.report, medium, args.static)
        finally:
            browser.close()
    n = 0
    for check, violations in result.items():
        for v in violations:
            print(v)
            n += 1
    print(f"{args.report} ({medium}): {n} violation(s) in checks {', '.join(result)}", file=sys.stderr)
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())
