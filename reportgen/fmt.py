"""The one number formatter of the report: tables, tooltips, axes, findings and the summary.

People read 3-4 significant digits with an SI-prefixed unit chosen for the quantity (one unit per
table column or chart axis, chosen from its values); machines read the JSON and the CSV, which keep
full precision written as the shortest decimal that round-trips, with arithmetic noise removed
(``clean``). Every quantity kind has a *base unit*, the unit the run model and the metrics JSON use:

============  ==========  ==========================================================
kind          base unit   units offered (factor = how many base units one unit is)
============  ==========  ==========================================================
``ms``        ms          ns, µs, ms, s
``us``        µs          ns, µs, ms, s
``mb``        MB          B, kB, MB, GB, TB          (MB = 10^6 B, as the model)
``bytes``     B           B, kB, MB, GB, TB
``gbps``      GB/s        B/s, kB/s, MB/s, GB/s, TB/s
``flop``      FLOP        FLOP, kFLOP, MFLOP, GFLOP, TFLOP, PFLOP, EFLOP
``flops``     FLOP/s      FLOP/s ... EFLOP/s
``ratio``     1           %  (0.25 -> 25%)
``pct``       %           %
``float``     (none)      plain number, 4 significant digits
``int``       (none)      integer with thousands separators
============  ==========  ==========================================================

Vega side: ``unit_for`` gives the factor to divide a column by before charting (so axes show
plain numbers in one unit named in the title) and ``D3_FORMAT`` is the matching d3-format string.
"""

from __future__ import annotations

import math
import re
from typing import Any, Iterable

SIG = 4  #: significant digits shown to people
D3_FORMAT = ",.4~r"  #: d3-format for a value already divided by its unit's factor (4 significant digits)
D3_PCT = ".3~p"  #: d3-format for ratios (0..1) shown as percent, 3 significant digits (0.56421 -> 56.4%)
#: d3-format for a value written inside a small chart cell (3 significant digits; 9.6e-8 when tiny, to stay short)
D3_SHORT = ",.3~g"
D3_INT = ",d"  #: d3-format for counts
#: d3-format of a signed change of a ratio, as fmt.percent(signed=True) writes it (+3.29%)
D3_PCT_SIGNED = "+" + D3_PCT
#: d3-format of a field with a value below EXPONENT_BELOW or from EXPONENT_FROM: 4 significant digits with an
#: exponent, as :func:`number` writes them (8.272e-25, not 0.000...0008272)
D3_EXP = ".3~e"
#: every d3-format a quantitative tooltip may use (tests/test_labels_units.py walks the specs)
D3_FORMATS = (D3_FORMAT, D3_EXP, D3_PCT, D3_PCT_SIGNED, D3_SHORT, D3_INT)

_SI = [("n", 1e-9), ("µ", 1e-6), ("m", 1e-3), ("", 1.0), ("k", 1e3), ("M", 1e6), ("G", 1e9), ("T", 1e12),
       ("P", 1e15), ("E", 1e18)]

#: kind -> list of (unit label, factor in base units), smallest first
UNITS: dict[str, list[tuple[str, float]]] = {
    "ms": [("ns", 1e-6), ("µs", 1e-3), ("ms", 1.0), ("s", 1e3)],
    "us": [("ns", 1e-3), ("µs", 1.0), ("ms", 1e3), ("s", 1e6)],
    "mb": [("B", 1e-6), ("kB", 1e-3), ("MB", 1.0), ("GB", 1e3), ("TB", 1e6)],
    "bytes": [("B", 1.0), ("kB", 1e3), ("MB", 1e6), ("GB", 1e9), ("TB", 1e12)],
    "gbps": [("B/s", 1e-9), ("kB/s", 1e-6), ("MB/s", 1e-3), ("GB/s", 1.0), ("TB/s", 1e3)],
    "flop": [(p + "FLOP", f) for p, f in _SI if f >= 1],
    "flops": [(p + "FLOP/s", f) for p, f in _SI if f >= 1],
}
BASE_UNIT = {"ms": "ms", "us": "µs", "mb": "MB", "bytes": "B", "gbps": "GB/s", "flop": "FLOP", "flops": "FLOP/s",
             "ratio": "%", "pct": "%"}


def _finite(v: Any) -> float | None:
    if v is None or isinstance(v, (bool, str)):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def clean(v: float) -> float:
    """``v`` without arithmetic noise: 0.04222999999999999 -> 0.04223, 48.3092480000003 -> 48.309248.

    Sums of doubles drift in the last 2-3 of their ~16 significant digits. The shortest decimal of
    13 significant digits is taken when it lies within 1e-14 (relative, ~50 ulps) of ``v``, below any
    measured precision (1 ns in 10^4 s is 1e-13) - else 15 digits, the most a double holds exactly
    for every decimal. Python's repr then writes the shortest round-trip form."""
    if not isinstance(v, float) or not math.isfinite(v) or v == 0:
        return v
    got = _CLEANED.get(v)  # (finite and not zero: equal keys are the same double, whatever its class)
    if got is not None:
        return got
    if v.__class__ is float and len(repr(v)) <= 14:
        # at most 13 significant digits (the shortest round-trip form; "." or "e" is a character): a decimal of at
        # most 15 digits comes back from its double rounded to as many digits (DBL_DIG), so both forms below are v
        return v
    v15 = float(f"{v:.15g}")  # deciding on the 15-digit form makes clean idempotent: clean(clean(v)) == clean(v)
    short = float(f"{v15:.13g}")
    out = short if abs(short - v15) <= abs(v15) * 1e-14 else v15
    if len(_CLEANED) >= CLEANED_MAX:
        _CLEANED.clear()
    _CLEANED[v] = out
    return out


#: values :func:`clean` worked out, by value: a report writes each number several times (the metrics JSON, the
#: page's tables, their CSV): at 1,024 ranks 1.1 M calls for 382 k values, ~1 µs each by the two formattings. At
#: most CLEANED_MAX of them are kept (~25 MB), then it starts again.
_CLEANED: dict[float, float] = {}
CLEANED_MAX = 1 << 18


#: magnitude from which :func:`number` writes an exponent: no measurement has 16 integer digits, so such a value
#: is shown compactly (1.000e+308) instead of as a 100-digit number
EXPONENT_FROM = 1e15
#: magnitude below which :func:`number` writes an exponent (a p-value of 8.272e-25, not 0.000...0008272)
EXPONENT_BELOW = 1e-4
#: the finest time the profilers record, per time kind: a difference below it is float noise and reads 0 (times are
#: exact integer ns in the schema; -8.5e-18 ms is a subtraction's rounding, not a time)
CLOCK = {"ms": 1e-6, "us": 1e-3}


def number(v: Any, sig: int = SIG) -> str:
    """``v`` with at most ``sig`` significant digits (more only for integer parts, no exponent below
    :data:`EXPONENT_FROM`): 187.8737 -> '187.9', 0.0422 -> '0.0422', 12345.6 -> '12,346', 0 -> '0',
    1e308 -> '1e+308'."""
    f = _finite(v)
    if f is None:
        return "–"
    if f == 0:
        return "0"
    if abs(f) >= EXPONENT_FROM or abs(f) < EXPONENT_BELOW:
        return _exponent(f, sig)
    mag = math.floor(math.log10(abs(f)))
    decimals = max(0, sig - 1 - mag)
    text = f"{f:,.{decimals}f}"
    if decimals and "." in text:  # 4 significant digits, not 4 decimals: drop zeros rounding left
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def round_sig(v: float, sig: int = SIG) -> float:
    """``v`` rounded to ``sig`` significant digits, as a number (chart data people read through :func:`number`)."""
    f = _finite(v)
    if not f:
        return f if f is not None else math.nan
    return round(f, sig - 1 - math.floor(math.log10(abs(f))))


def _exponent(f: float, sig: int) -> str:
    """1e308 -> '1e+308', 1.23456e20 -> '1.235e+20'."""
    mantissa, exp = f"{f:.{sig - 1}e}".split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{'+' if int(exp) >= 0 else '-'}{abs(int(exp))}"


def _magnitudes(values: Iterable[Any]) -> Any:
    """The sorted magnitudes of the finite non-zero numbers among ``values`` (bools and text left out); a numpy array
    or pandas column of plain numbers at once (the values as floats, as ``float`` makes them), anything else value
    by value."""
    dtype = getattr(values, "dtype", None)
    if getattr(dtype, "kind", None) in ("i", "u", "f") and type(dtype).__module__.split(".")[0] == "numpy" \
            and getattr(values, "ndim", 0) == 1:
        import numpy as np

        a = np.asarray(values, dtype=float)
        a = np.abs(a[np.isfinite(a) & (a != 0)])
        a.sort()
        return a
    return sorted(abs(f) for f in (_finite(v) for v in values) if f)


def unit_for(kind: str, values: Iterable[Any] = ()) -> tuple[str, float]:
    """(unit label, factor) for a column or axis of ``kind``: the largest unit in which the median of the
    non-zero magnitudes is at least 1. Kinds without units give ('', 1)."""
    units = UNITS.get(kind)
    if not units:
        return (BASE_UNIT.get(kind, ""), 1.0)
    mags = _magnitudes(values)
    if not len(mags):
        base = next(u for u in units if u[1] == 1.0)
        return base
    med = mags[len(mags) // 2]
    chosen = units[0]
    for u in units:
        if med >= u[1] * 0.9995:
            chosen = u
    # never more than 4 integer digits for the largest value (a wide-ranging column reads 0.01 .. 500 ms,
    # not 10 .. 500,000 µs)
    for u in units[units.index(chosen):]:
        chosen = u
        if mags[-1] < u[1] * 9999.5:
            break
    return chosen


#: the time kinds and their base unit in ms: a table shows all its times in one unit (:func:`time_unit`)
TIME_KINDS = {"ms": 1.0, "us": 1e-3}


def time_unit(columns: Iterable[tuple[str, Iterable[Any]]]) -> tuple[str, dict[str, float]]:
    """One unit for every time column of a table: ``columns`` are (kind, values) of its time columns; returns the
    unit label and, per time kind, the factor its values are divided by (a table never reads 'Elapse (µs)' beside
    'Wait (ms)'). The unit is :func:`unit_for`'s choice over all the times, in ms."""
    in_ms = [f * TIME_KINDS[k] for k, vals in columns for f in (_finite(v) for v in vals) if f is not None]
    unit, factor = unit_for("ms", in_ms)
    return unit, {k: factor / base for k, base in TIME_KINDS.items()}


def d3_format(values: Iterable[Any]) -> str:
    """The d3-format of a chart field whose values (already in their unit) are ``values``, by :func:`number`'s rules:
    :data:`D3_EXP` when one of them is below :data:`EXPONENT_BELOW` or from :data:`EXPONENT_FROM` (not 0), else
    :data:`D3_FORMAT`."""
    mags = [abs(f) for f in (_finite(v) for v in values) if f]
    return D3_EXP if any(m < EXPONENT_BELOW or m >= EXPONENT_FROM for m in mags) else D3_FORMAT


def quantity(v: Any, kind: str, sig: int = SIG) -> str:
    """One value with its own unit, for sentences: quantity(329.6e9, 'flop') -> '329.6 GFLOP',
    quantity(0.0125, 'ms') -> '12.5 µs', quantity(0.25, 'ratio') -> '25%'."""
    f = _finite(v)
    if f is None:
        return "–"
    if kind == "ratio":
        return number(f * 100, 3 if abs(f) < 10 else sig) + "%"
    if kind == "pct":
        return number(f, 3 if abs(f) < 1000 else sig) + "%"
    if kind == "int":
        return f"{int(round(f)):,}"
    if abs(f) < CLOCK.get(kind, 0.0):
        f = 0.0
    unit, factor = unit_for(kind, [f])
    text = number(f / factor, sig)
    return f"{text} {unit}" if unit else text


def cell(v: Any, kind: str, factor: float = 1.0, sig: int = SIG) -> str:
    """A table cell of a column whose unit (``factor``) was chosen with ``unit_for``; the unit is in
    the header, not in the cell."""
    if v is None:
        return "–"
    if kind == "text":
        return str(v)
    if kind in ("int", "rank"):
        f = _finite(v)
        if f is None:
            return "–" if isinstance(v, float) else str(v)
        return f"{int(f):,}" if kind == "int" and f == int(f) else (str(int(f)) if f == int(f) else number(f, sig))
    f = _finite(v)
    if f is None:
        return "–" if not isinstance(v, str) else v
    if kind == "ratio":
        return number(f * 100, 3 if abs(f) < 10 else sig)
    if abs(f) < CLOCK.get(kind, 0.0):
        return "0"
    if kind == "float" and abs(f) >= 10 ** sig and abs(f) < EXPONENT_FROM:
        # a unit-less column has no larger unit to move to: its integer part is rounded to ``sig`` digits too
        # (a slowest / fastest of 16831 -> '16,830'), as a column with a unit shows 4 digits in its chosen unit
        f = round(f, sig - 1 - math.floor(math.log10(abs(f))))
    return number(f / factor, sig)


def csv_header(label: str, kind: str) -> str:
    """A CSV / JSON column header: the CSV keeps values in the kind's base unit (ratios as fractions)."""
    if kind == "ratio":
        return f"{label} (fraction)"
    return header(label, kind, BASE_UNIT.get(kind, ""))


def header(label: str, kind: str, unit: str) -> str:
    """A column header or axis title with its unit: header('Step time', 'ms', 'ms') -> 'Step time (ms)'."""
    if kind == "ratio" or kind == "pct":
        unit = "%"
    if unit and label.endswith(")") and "(" in label:  # 'Free (idle device)' -> 'Free (idle device, ms)'
        return f"{label[:-1]}, {unit})"
    return f"{label} ({unit})" if unit else label


def percent(ratio: Any, sig: int = 3, signed: bool = False) -> str:
    """0.0329 -> '3.29%', 3.6002 -> '360%' (ratios are 0..1 in the model); ``signed``: '+3.29%' for a change."""
    text = quantity(ratio, "ratio", sig)
    return "+" + text if signed and (_finite(ratio) or 0) > 0 else text


def ms(v: Any) -> str:
    """A time in ms for sentences, in the unit that reads best: ms(187.8737) -> '187.9 ms'."""
    return quantity(v, "ms")


#: unit words of metric names (the metrics JSON convention: the unit is the last unit word of the name)
_NAME_KIND = {"ms": "ms", "us": "us", "mb": "mb", "gbps": "gbps", "ratio": "ratio", "pct": "pct", "bytes": "bytes",
              "flop": "flop", "flops": "flop", "count": "int"}


def metric_kind(name: Any) -> str:
    """The kind of a metric from its name (the metrics JSON's unit suffixes): 'step_ms_median' -> 'ms',
    'excess_ms_per_step' -> 'ms', 'peak_ratio' -> 'ratio', 'flops_per_rank' -> 'flop', 'flops_per_s_mean' ->
    'flops', 'slow_affect_count' -> 'int'; '' when the name carries no unit."""
    words = re.split(r"[_.]", str(name).lower())
    for i in range(len(words) - 1, -1, -1):
        if words[i] in ("flops", "flop") and words[i + 1:i + 3] == ["per", "s"]:
            return "flops"
        if words[i] in _NAME_KIND:
            return _NAME_KIND[words[i]]
    return ""


def text(v: Any, kind: str = "") -> str:
    """Any value for a sentence or an evidence line: numbers with their kind's unit (``quantity``), integers
    of unit-less kinds as integers, strings as they are, lists and mappings item by item."""
    if v is None:
        return "–"
    if isinstance(v, (bool, str)):
        return str(v)
    if isinstance(v, dict):
        return ", ".join(f"{k} {text(x, metric_kind(k))}" for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return ", ".join(text(x, kind) for x in v)
    if kind in ("", "int", "float") and isinstance(v, int):
        return str(v) if abs(v) < 10000 else f"{v:,}"
    f = _finite(v)
    if f is None:
        return str(v) if not isinstance(v, float) else "–"
    return quantity(f, kind or "float")


def evidence(ev: dict[str, Any], skip: tuple[str, ...] = ("share_of_step_ratio", "kind", "cause")) -> list[tuple[str, str]]:
    """A finding's evidence as (key, text) pairs: value and reference in the unit of the evidence's metric
    (``ev['kind']`` when given, else from the metric's name), every other number in the unit its own key names."""
    kind = ev.get("kind") or metric_kind(ev.get("metric", ""))
    pair = [ev.get(k) for k in ("value", "reference")]
    unit, factor = unit_for(kind, pair) if kind in UNITS and all(_finite(x) is not None for x in pair) else ("", 0)
    out = []
    for k, v in ev.items():
        if k in skip:
            continue
        if k in ("value", "reference") and factor and _finite(v) is not None:
            out.append((str(k), f"{number(_finite(v) / factor)} {unit}"))  # one unit for the pair: comparable
        else:
            out.append((str(k), text(v, kind if k in ("value", "reference") else metric_kind(k))))
    return out


#: key words that only name a unit: the evidence line writes the unit with the value, so the label drops them
_UNIT_WORDS = {"ms", "us", "ns", "mb", "gb", "bytes", "gbps", "ratio", "pct"}
#: evidence keys kept in the metrics JSON for comparison with peers, never on the page (an internal reading)
EVIDENCE_HIDDEN = ("seed_rule_on_written_bandwidth",)


def evidence_label(key: str) -> str:
    """An evidence key as people read it, its unit left to the value: 'peak_mb' -> 'peak', 'excess_ms_per_step' ->
    'excess per step', 'chance_p_value' -> 'chance p value'."""
    words = [w for w in str(key).split("_") if w and w not in _UNIT_WORDS]
    return " ".join(words) or str(key)


__all__ = ["SIG", "evidence_label", "EVIDENCE_HIDDEN", "TIME_KINDS", "time_unit", "d3_format", "D3_EXP", "D3_FORMATS", "D3_FORMAT", "D3_PCT", "D3_SHORT", "D3_INT", "UNITS", "BASE_UNIT", "clean", "number", "unit_for",
           "quantity", "cell",
           "header", "csv_header", "percent", "ms", "metric_kind", "text", "evidence", "rank_ranges", "listed"]


#: names a cell or sentence lists before "and N more" (a list the input names can be of any length)
LISTED = 5


def listed(names: list[str], total: int | None = None, limit: int = LISTED) -> str:
    """The first ``limit`` of ``names``, comma-separated, then "and N more" for the rest (``total``: how many
    there are when ``names`` holds only the first ones). A text cell built from what the input names stays
    bounded however many the input names (issue 29: 10^5 groups of the same members made 10^10 characters)."""
    total = len(names) if total is None else total
    shown = ", ".join(names[:limit])
    return shown if total <= limit else f"{shown} and {total - limit:,} more"


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
