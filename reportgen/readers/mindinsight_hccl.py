"""``hccl_raw_{rank}.csv`` of the MindSpore Insight cluster layout -> communication tables in reportgen units.

Format facts: ../shared/research/mindinsight-cluster-profiling.md §2.3 (format), §3.3 (producers, MindInsight's
reading), §4 (quirks). One row per step (``step_num`` = the step), then a ``-`` row; columns
``step_num, communication_cost, wait_cost, link_info[, communication_operator_cost]`` (the last is absent in
the 4-column legacy variant). ``link_info`` is JSON ``{"<src>-<dst>": {"SDMA"|"RDMA"|...: [time, size,
bandwidth(, rdma_wait)]}}`` with group-local src/dst; ``communication_operator_cost`` is JSON
``{op: [step, cost, wait, link_info]}`` (some MindSpore versions wrote the ``-`` row's operator cell as a
Python literal with ``[cost, wait, link_info]``: both accepted).

Two unit generations, neither named in the file:

==========  =====================================  ===========================================
            MindSpore <= 2.1 ``HcclParser``        MindSpore 2.2/2.3 ``AscendHCCLGenerator``
==========  =====================================  ===========================================
costs       ms (main thread: Σ its link times)     µs (Σ dur of every non-wait HCCL task)
link time   ms                                     ms
size        KB (10^3 B)                            KB (10^3 B)
bandwidth   KB/s; a step's = Σ of its ops'         GB/s = size/time (KB/ms · 1e-3)
``-`` row   mean over the steps                    copy of the LAST step
==========  =====================================  ===========================================

Generation rule (from the numbers; the first rule that has data decides, the others only check it and a
disagreement is listed in ``problems``):

1. bandwidth against size/time: every link entry with positive time, size and bandwidth gives
   ``r = bandwidth / (size_KB / time_ms)``. <= 2.1 writes KB/s = 1e3 · KB/ms, and a step's bandwidth is a sum
   of per-op ones, so ``r >= 1e3``; 2.2+ writes GB/s, ``r = 1e-3`` exactly. Median of log10 r < 0 -> 2.2+.
2. communication_cost against the step's link times (ms in both): <= 2.1 cost is a main-thread subset of
   them (ratio <= ~1); 2.2+ cost is in µs and includes every non-wait task (ratio >= ~1000).
   Median log10 ratio > 1.5 -> 2.2+.
3. the ``-`` row (needs >= 2 steps that differ): equal to the last step and not the mean -> 2.2+; equal to
   the mean and not the last step -> <= 2.1.
4. bandwidth magnitude: median positive bandwidth >= 1e4 -> <= 2.1 (KB/s values are ~1e6-1e9), else 2.2+
   (GB/s values are ~0.1-1000).

Without any of these (no links and a single step, say) the file is read as <= 2.1 and a problem says so.

Output units: ms, MB (10^6 B), GB/s. Bad input (unreadable, truncated last line, invalid JSON, missing
columns, non-numeric cells) is listed in ``problems``; what could be read is returned; no exception.

Values are strict (issue 14): a cost, wait, link time, size or bandwidth that is not a plain number, is NaN,
infinite, negative or absurd (a cost or time over a day, a size or rate over 1e15 in the file's unit) is
refused and listed with its line and column (a refused cost or wait skips the row's totals, a refused link
entry or operator that entry); a row shorter than the header in the middle of the file is skipped; in a
last line cut short only the cut cell is dropped (the cells before it are complete); step numbers and
group-local ranks are bounded (:data:`reportgen.readers.mindinsight.MAX_STEP`, :data:`reportgen.limits.MAX_RANKS`).
"""

from __future__ import annotations

import ast
import json
import math
import re
import statistics
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from .. import limits
from ..errors import InputError
from ..limits import finite_ms, finite_value, strict_float
from ._files import DuplicateKey, read_text, unique_keys

GEN_OLD = "<=2.1"
GEN_NEW = "2.2+"

#: Output tables and their columns (units in the names: ms, MB = 10^6 B, GB/s).
COLUMNS: dict[str, list[str]] = {
    "comm_rank_step": ["rank", "step", "comm_ms", "wait_ms"],
    "comm_rank_avg": ["rank", "comm_ms", "wait_ms", "avg_kind"],
    "comm_ops": ["rank", "step", "op", "comm_ms", "wait_ms"],
    "links": ["rank", "step", "op", "src_local", "dst_local", "transport", "time_ms", "size_mb",
              "bandwidth_gbps", "bandwidth_sizetime_gbps", "rdma_wait_ms"],
}

#: What the file's ``-`` row is, per generation (column ``avg_kind`` of ``comm_rank_avg``).
AVG_KIND = {GEN_OLD: "mean", GEN_NEW: "last step"}

#: step value of the ``-`` row in the ``links`` table.
AVG_STEP = -1

_REQUIRED = ("step_num", "communication_cost", "wait_cost")
_PAIR = re.compile(r"^\s*([0-9]+)\s*-\s*([0-9]+)\s*$")
#: the highest step number taken as one (as the step trace reader)
MAX_STEP = 2**31 - 1
#: cost / wait bound before the unit is known: one day in µs (the 2.2+ unit; ms values are checked after)
_COST_LIMIT = limits.MAX_DURATION_MS * 1e3
_QUOTED = re.compile(r'"([^"]*(?:""[^"]*)*)(")?')
_PLAIN = re.compile(r"[^,\r\n]*")
_LITERAL_MAX = 50_000_000  # characters; larger Python-literal cells are not evaluated


# --------------------------------------------------------------------------- CSV records


def _records(text: str):
    """Yield ``(line, cells, end)`` per record of a ``csv.writer`` file; ``end`` is ``"newline"``, ``"eof"``
    (last record without a line break) or ``"open_quote"`` (the text ended inside a quoted cell).

    Own splitter instead of :mod:`csv`: operator cells of long runs exceed csv's 128 KiB field limit (a
    process-wide setting), and a cut quoted cell must be told from a complete one.
    """
    pos, n, line = 0, len(text), 1
    while pos < n:
        start, cells = line, []
        while True:
            if text.startswith('"', pos):
                m = _QUOTED.match(text, pos)
                raw = m.group(1)
                line += raw.count("\n")
                cells.append(raw.replace('""', '"'))
                pos = m.end()
                if m.group(2) is None:
                    yield start, cells, "open_quote"
                    return
                tail = _PLAIN.match(text, pos)  # text after a closing quote belongs to the cell (as in csv)
                cells[-1] += tail.group()
                pos = tail.end()
            else:
                m = _PLAIN.match(text, pos)
                cells.append(m.group())
                pos = m.end()
            if pos >= n:
                yield start, cells, "eof"
                return
            if text[pos] == ",":
                pos += 1
                continue
            pos += 2 if text.startswith("\r\n", pos) else 1
            line += 1
            yield start, cells, "newline"
            break


class _Problems:
    """Collects problems of one file, one entry per kind with a count and the first line."""

    def __init__(self, path: Path):
        self.path = str(path)
        self.kinds: dict[str, list[int]] = {}

    def add(self, line: int, what: str) -> None:
        entry = self.kinds.setdefault(what, [0, line])
        entry[0] += 1

    def flush(self, problems: list[tuple[str, str]]) -> None:
        for what, (count, line) in self.kinds.items():
            where = f"line {line}" if count == 1 else f"{count} times, first on line {line}"
            problems.append((self.path, f"{what} ({where})"))


def _cost(text: str | None) -> tuple[float | None, str | None]:
    """A cost / wait cell -> (value, None) or (None, why it is refused)."""
    v = strict_float(text) if text is not None else None
    if v is None:
        return None, "missing" if text is None or not text.strip() else "not a number"
    reason = finite_ms(v, limit=_COST_LIMIT)
    return (None, reason) if reason else (v, None)


def _decodes(text: str) -> bool:
    """True when a last cell is a complete value: JSON / a Python literal, or a plain number."""
    if strict_float(text) is not None:
        return True
    try:
        _decode_cell(text)
        return True
    except ValueError:
        pass
    try:  # complete JSON that is refused (a key given twice): not cut short
        json.loads(text)
        return True
    except (ValueError, RecursionError):
        return False


def _decode_cell(text: str):
    """JSON cell -> object; a Python-literal dict (written by some MindSpore versions) is accepted too."""
    try:
        return json.loads(text, object_pairs_hook=unique_keys)
    except DuplicateKey:  # which value is meant is unknown: never read as a Python literal either
        raise ValueError("invalid JSON") from None
    except (ValueError, RecursionError):
        pass
    stripped = text.strip()
    if stripped.startswith("{") and "'" in stripped and len(stripped) <= _LITERAL_MAX:
        try:
            return ast.literal_eval(stripped)
        except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
            pass
    raise ValueError("invalid JSON")


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _link_values(vals):
    """[time, size, bandwidth(, rdma_wait)] -> tuple of 4 floats (wait NaN); ``()`` for an empty entry;
    ``None`` when malformed; a str saying why when a value is refused (NaN, infinite, negative, absurd).
    2.2+ writes a single RDMA thread as ``[[...]]``: unwrapped."""
    if isinstance(vals, list) and len(vals) == 1 and isinstance(vals[0], list):
        vals = vals[0]
    if isinstance(vals, list) and not vals:
        return ()
    if not isinstance(vals, list) or len(vals) < 3 or not all(_is_num(v) for v in vals[:4]):
        return None
    out = [float(v) for v in vals[:4]]
    if (0.0 <= out[0] <= limits.MAX_DURATION_MS and 0.0 <= out[1] <= limits.MAX_MAGNITUDE and
            0.0 <= out[2] <= limits.MAX_MAGNITUDE and (len(out) < 4 or 0.0 <= out[3] <= limits.MAX_DURATION_MS)):
        return out[0], out[1], out[2], out[3] if len(out) > 3 else math.nan  # the usual entry, fast
    for what, v, reason in (("time", out[0], finite_ms(out[0])), ("size", out[1], finite_value(out[1])),
                            ("bandwidth", out[2], finite_value(out[2])),
                            ("rdma_wait", out[3] if len(out) > 3 else 0.0, finite_ms(out[3]) if len(out) > 3 else None)):
        if reason:
            return f"link {what} {reason}"
    return out[0], out[1], out[2], out[3] if len(out) > 3 else math.nan


#: JSON number types (bool excluded: ``type(True) is bool``)
_NUMBER = (float, int)
_UNSEEN = object()


def _pair(key: str):
    """A link key ``"<src>-<dst>"`` -> (src, dst); None when not of that form; ``False`` when a rank is too high."""
    m = _PAIR.match(key if len(key) <= 64 else key[:64])  # JSON keys are str
    if not m:
        return None
    src, dst = int(m.group(1)), int(m.group(2))
    return (src, dst) if max(src, dst) < limits.MAX_RANKS else False


def _flatten_links(obj, step: int, op: str | None, out: list, bad: _Problems, line: int,
                   column: str = "link_info", pairs: dict | None = None) -> None:
    """Link entries of ``obj`` appended to ``out`` as (step, op, src, dst, transport, time, size, bandwidth, wait).
    ``pairs`` caches parsed keys across the calls of one file (the same few links recur in every step and op)."""
    if not isinstance(obj, dict):
        bad.add(line, "link_info is not a JSON object; ignored")
        return
    if pairs is None:
        pairs = {}
    top_ms, top = limits.MAX_DURATION_MS, limits.MAX_MAGNITUDE
    for key, transports in obj.items():
        pair = pairs.get(key, _UNSEEN)
        if pair is _UNSEEN:
            pair = pairs[key] = _pair(key)
        if pair is None or not isinstance(transports, dict):
            bad.add(line, "link entry not of the form {\"<src>-<dst>\": {<transport>: [...]}}; ignored")
            continue
        if pair is False:
            bad.add(line, f"column '{column}': a link with a rank beyond 0..{limits.MAX_RANKS - 1}; ignored")
            continue
        src, dst = pair
        for transport, raw in transports.items():
            # the usual entry inline ([time, size, bandwidth(, wait)] plain numbers in range); the rest as before
            n = len(raw) if type(raw) is list else 0
            if (n == 3 or n == 4) and type(raw[0]) in _NUMBER and type(raw[1]) in _NUMBER and \
                    type(raw[2]) in _NUMBER and (n == 3 or type(raw[3]) in _NUMBER):
                t, sz, bw = float(raw[0]), float(raw[1]), float(raw[2])
                w = float(raw[3]) if n == 4 else math.nan
                if 0.0 <= t <= top_ms and 0.0 <= sz <= top and 0.0 <= bw <= top and (n == 3 or 0.0 <= w <= top_ms):
                    out.append((step, op, src, dst, sys.intern(transport) if len(transport) <= 64 else
                                limits.cap_text(transport, 64), t, sz, bw, w))
                    continue
            vals = _link_values(raw)
            if vals is None:
                bad.add(line, "link values not [time, size, bandwidth(, rdma_wait)] numbers; ignored")
            elif isinstance(vals, str):
                bad.add(line, f"column '{column}': {vals}; the link entry ignored")
            elif vals:
                out.append((step, op, src, dst, transport if len(transport) <= 64 else limits.cap_text(transport, 64),
                            *vals))


def _read_ops(obj, step: int, step_text: str, ops: list, links: list, bad: _Problems, line: int,
              pairs: dict | None = None) -> None:
    """communication_operator_cost -> per-step operator rows (not for the ``-`` row) and per-op link rows."""
    if not isinstance(obj, dict):
        bad.add(line, "communication_operator_cost is not a JSON object; ignored")
        return
    for op, value in obj.items():
        # interned: the same names recur in every step and rank, one string each instead of one per row
        op = sys.intern(op) if len(op) <= limits.MAX_NAME_CHARS else limits.cap_text(op)
        if isinstance(value, list) and len(value) == 4:
            op_step, op_cost, op_wait, op_links = value
            if str(op_step).strip() != step_text:
                bad.add(line, "an operator's step differs from the row's step_num; the row's was used")
        elif isinstance(value, list) and len(value) == 3:  # first HcclParser's '-' row: [cost, wait, links]
            op_cost, op_wait, op_links = value
        else:
            bad.add(line, "operator entry not [step, cost, wait, link_info]; ignored")
            continue
        if not (_is_num(op_cost) and _is_num(op_wait)):
            bad.add(line, "operator cost/wait not numbers; ignored")
            continue
        reason = None if 0 <= op_cost <= _COST_LIMIT and 0 <= op_wait <= _COST_LIMIT else \
            finite_ms(op_cost, limit=_COST_LIMIT) or finite_ms(op_wait, limit=_COST_LIMIT)
        if reason:
            bad.add(line, f"column 'communication_operator_cost': an operator's cost/wait {reason}; ignored")
            continue
        if step != AVG_STEP:
            ops.append((step, op, float(op_cost), float(op_wait)))
        _flatten_links(op_links, step, op, links, bad, line, "communication_operator_cost", pairs)


# --------------------------------------------------------------------------- generation


def _median_log10(values: list[float]) -> float | None:
    logs = [math.log10(v) for v in values if v > 0 and math.isfinite(v)]
    return statistics.median(logs) if logs else None


def _detect(steps: list[tuple], avg: tuple | None, links: list[tuple]) -> tuple[str, str | None, list[str]]:
    """-> (generation, what decided, what disagreed). See the module docstring for the rules."""
    evidence: list[tuple[str, str]] = []

    med = _median_log10([b / (s / t) for (_st, _op, _a, _b, _tr, t, s, b, _w) in links if t > 0 and s > 0 and b > 0])
    if med is not None:
        evidence.append((GEN_NEW if med < 0 else GEN_OLD,
                         f"bandwidth / (size/time) = 10^{med:.1f} (KB/s gives >= 10^3, GB/s 10^-3)"))

    link_time: dict[int, float] = {}
    for st, op, _a, _b, _tr, t, *_rest in links:
        if op is None and math.isfinite(t):
            link_time[st] = link_time.get(st, 0.0) + t
    rows = list(steps) + ([(AVG_STEP, *avg)] if avg else [])
    med = _median_log10([c / link_time[st] for st, c, _w in rows if link_time.get(st, 0) > 0 and c > 0])
    if med is not None:
        evidence.append((GEN_NEW if med > 1.5 else GEN_OLD,
                         f"communication_cost / Σ link time = 10^{med:.1f} (ms/ms ~1, µs/ms ~1000)"))

    if avg and len(steps) >= 2 and len({(c, w) for _s, c, w in steps}) > 1:
        last = steps[-1][1:]
        mean = (sum(c for _s, c, _w in steps) / len(steps), sum(w for _s, _c, w in steps) / len(steps))
        is_mean = all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(avg, mean))
        if tuple(avg) == tuple(last) and not is_mean:
            evidence.append((GEN_NEW, "the '-' row is a copy of the last step"))
        elif is_mean and tuple(avg) != tuple(last):
            evidence.append((GEN_OLD, "the '-' row is the mean of the steps"))

    med = _median_log10([b for *_x, b, _w in links])
    if med is not None:
        evidence.append((GEN_NEW if med < 4 else GEN_OLD, f"median bandwidth 10^{med:.1f}"))

    if not evidence:
        return GEN_OLD, None, []
    gen, decided = evidence[0]
    return gen, decided, [why for g, why in evidence[1:] if g != gen]


# --------------------------------------------------------------------------- the parser


def _empty(problems: list[tuple[str, str]], path: Path, problem: str) -> dict:
    problems.append((str(path), problem))
    return {"generation": GEN_OLD, "columns": {}}


def _columns(rank: int, **columns) -> dict:
    """One rank's table as columns: ``rank`` first, integer tuples -> int64 arrays, float arrays and text lists
    as given (object arrays stay object: ``op`` holds None)."""
    n = len(next(iter(columns.values())))
    cols = {"rank": np.full(n, rank)}
    for key, values in columns.items():
        cols[key] = np.array(values, dtype=np.int64) if isinstance(values, tuple) else values
    return cols


def frame(name: str, parts: list[dict]) -> pd.DataFrame:
    """Table ``name`` from the column dicts of one or more ranks (:func:`parse_hccl_columns`), in their order:
    the same frame as ``pd.concat`` of each rank's frame, built once (a frame per rank costs ~0.3-1 ms, which is
    seconds at thousands of ranks)."""
    cols = {}
    for key in COLUMNS[name]:
        values = [p[key] for p in parts]
        if isinstance(values[0], list):
            cols[key] = [v for part in values for v in part]
        else:
            cols[key] = values[0] if len(values) == 1 else np.concatenate(values)
            if cols[key].dtype == object:  # kept as objects (pandas would infer text and turn None into NaN)
                cols[key] = pd.Series(cols[key], dtype=object)
    return pd.DataFrame(cols, columns=COLUMNS[name])


def parse_hccl_raw(path: Path, rank: int, problems: list[tuple[str, str]]) -> dict:
    """-> {"generation": "<=2.1" | "2.2+", "tables": {name: DataFrame}} (empty tables omitted): the frames of
    :func:`parse_hccl_columns`."""
    parsed = parse_hccl_columns(path, rank, problems)
    return {"generation": parsed["generation"],
            "tables": {name: frame(name, [cols]) for name, cols in parsed["columns"].items()}}


def parse_hccl_columns(path: Path, rank: int, problems: list[tuple[str, str]]) -> dict:
    """-> {"generation": "<=2.1" | "2.2+", "columns": {name: {column: values}}} (empty tables omitted; one rank's
    file, so a task of its own; :func:`frame` makes the tables of one or many ranks)

    Tables (columns in :data:`COLUMNS`, each with ``rank`` = the given rank, units ms / MB / GB/s):
    ``comm_rank_step`` (per step: communication_cost, wait_cost), ``comm_rank_avg`` (the file's ``-`` row as
    written; ``avg_kind`` "mean" for <= 2.1, "last step" for 2.2+), ``comm_ops`` (per step and operator,
    from communication_operator_cost; the ``-`` row's operators are not included), ``links`` (every link
    entry, step-level ones with ``op`` None, the ``-`` row's with step -1; ``bandwidth_gbps`` as the file
    states it, ``bandwidth_sizetime_gbps`` = size/time — they differ for <= 2.1 step-level rows, whose
    bandwidth is a sum of per-op bandwidths; ``rdma_wait_ms`` NaN unless the entry has a 4th element).
    The generation rule is in the module docstring.
    """
    path = Path(path)
    bad = _Problems(path)
    try:
        text = read_text(path)
    except InputError as exc:
        return _empty(problems, path, exc.problem + "; file skipped")

    records = _records(text)
    header = next(records, None)
    if header is None:
        return _empty(problems, path, "empty file")
    names = [h.strip() for h in header[1]]
    index: dict[str, int] = {}
    for i, h in enumerate(names):
        if h:
            index.setdefault(h, i)
    missing = [c for c in _REQUIRED if c not in index]
    if missing:
        return _empty(problems, path, f"not an hccl_raw file: missing column(s) {', '.join(missing)}")
    dups = sorted({h for h in names if h and names.count(h) > 1})
    if dups:
        return _empty(problems, path, f"column(s) {', '.join(dups)[:200]} named twice in the header (which one holds "
                                      f"the value is unknown); file skipped")
    if header[2] != "newline":
        return _empty(problems, path, "the file ends inside its header line (cut short); file skipped")
    i_link, i_ops = index.get("link_info"), index.get("communication_operator_cost")

    steps: list[tuple[int, float, float]] = []
    avg: tuple[float, float] | None = None
    ops: list[tuple[int, str, float, float]] = []
    links: list[tuple] = []
    seen: set = set()
    step_line: dict[int, int] = {}
    pairs: dict = {}  # link key -> (src, dst), shared by every row of the file
    for line, cells, end in records:
        if not any(c.strip() for c in cells):
            continue
        if end == "open_quote" or (end == "eof" and (len(cells) < len(names) or not cells[-1] or
                                                     not _decodes(cells[-1]))):
            bad.add(line, "last line cut short (truncated file); its last cell was ignored")
            cells = cells[:-1]
        elif len(cells) != len(names):
            bad.add(line, f"row truncated or too long (not the {len(names)} fields of the header); row skipped")
            continue

        def cell(i):
            return cells[i] if i is not None and i < len(cells) else None

        step_text = (cell(index["step_num"]) or "").strip()
        if step_text == "-":
            step = AVG_STEP
        elif step_text.isascii() and step_text.isdigit() and len(step_text) <= 10 and int(step_text) <= MAX_STEP:
            step = int(step_text)
        else:
            bad.add(line, f"column 'step_num' neither a step number (0..{MAX_STEP}) nor '-'; row skipped")
            continue
        if step in seen:
            bad.add(line, "step appears again; the first row was kept")
            continue
        seen.add(step)

        (cost, why_cost), (wait, why_wait) = _cost(cell(index["communication_cost"])), _cost(cell(index["wait_cost"]))
        if cost is None or wait is None:
            col, why = ("communication_cost", why_cost) if cost is None else ("wait_cost", why_wait)
            bad.add(line, f"column '{col}' {why}; the row's totals were skipped")
        elif step == AVG_STEP:
            avg = (cost, wait)
            step_line[step] = line
        else:
            steps.append((step, cost, wait))
            step_line[step] = line

        for col, i in (("link_info", i_link), ("communication_operator_cost", i_ops)):
            raw = cell(i)
            if raw is None or not raw.strip():
                continue
            try:
                obj = _decode_cell(raw)
            except ValueError:
                bad.add(line, f"invalid JSON in {col}; ignored")
                continue
            if col == "link_info":
                _flatten_links(obj, step, None, links, bad, line, pairs=pairs)
            else:
                _read_ops(obj, step, step_text, ops, links, bad, line, pairs)

    if not steps and avg is None and not links:
        problems.append((str(path), "no readable data rows"))
    elif AVG_STEP not in seen:
        problems.append((str(path), "no '-' row (MindSpore always writes one last): the file may be cut short"))

    steps.sort(key=lambda r: r[0])
    gen, decided, disagree = _detect(steps, avg, links)
    if decided is None and (steps or avg or links):
        problems.append((str(path), "the numbers do not tell the MindSpore generation (no link sizes/times and no "
                                    "two distinct steps); read as <= 2.1 (costs in ms)"))
    if disagree:
        problems.append((str(path), f"read as MindSpore {gen} ({decided}), but: {'; '.join(disagree)}"))

    cost_div = 1e3 if gen == GEN_NEW else 1.0  # µs -> ms
    if cost_div == 1.0:  # ms: the one-day bound is 1000 x tighter than the µs one checked on reading
        def fine(s, c, w):
            if finite_ms(c) or finite_ms(w):
                bad.add(step_line.get(s, 0), "column 'communication_cost'/'wait_cost' over one day (ms); the row's "
                                             "totals were skipped")
                return False
            return True

        steps = [r for r in steps if fine(*r)]
        avg = avg if avg is None or fine(AVG_STEP, *avg) else None
        top = limits.MAX_DURATION_MS
        kept = [o for o in ops if o[2] <= top and o[3] <= top]  # checked >= 0 and finite on reading
        for o in ops if len(kept) < len(ops) else ():
            if not (o[2] <= top and o[3] <= top):
                bad.add(step_line.get(o[0], 0), "column 'communication_operator_cost': an operator's cost/wait over "
                                                "one day (ms); ignored")
        ops = kept
    bw_mul = 1.0 if gen == GEN_NEW else 1e-6  # KB/s -> GB/s
    tables: dict[str, dict] = {}
    # columns, not rows (from rows, pandas infers every cell's type: ~4x the cost at thousands of ranks)
    if steps:
        s, c, w = zip(*steps)
        tables["comm_rank_step"] = _columns(rank, step=s, comm_ms=np.array(c) / cost_div,
                                            wait_ms=np.array(w) / cost_div)
    if avg is not None:
        tables["comm_rank_avg"] = _columns(rank, comm_ms=np.array([avg[0] / cost_div]),
                                           wait_ms=np.array([avg[1] / cost_div]), avg_kind=[AVG_KIND[gen]])
    if ops:
        s, op, c, w = zip(*ops)
        tables["comm_ops"] = _columns(rank, step=s, op=list(op), comm_ms=np.array(c) / cost_div,
                                      wait_ms=np.array(w) / cost_div)
    if links:
        s, op, src, dst, tr, time, size, bw, wait = zip(*links)
        size_mb = np.array(size, dtype=float) / 1e3
        time = np.array(time, dtype=float)
        with np.errstate(divide="ignore", invalid="ignore"):
            sizetime = size_mb / np.where(time > 0, time, np.nan)  # MB/ms = GB/s
        tables["links"] = _columns(
            rank, step=s, op=np.array(op, dtype=object),  # None stays None (not NaN)
            src_local=src, dst_local=dst, transport=list(tr), time_ms=time, size_mb=size_mb,
            bandwidth_gbps=np.array(bw, dtype=float) * bw_mul, bandwidth_sizetime_gbps=sizetime,
            rdma_wait_ms=np.array(wait, dtype=float))
    bad.flush(problems)
    return {"generation": gen, "columns": tables}
