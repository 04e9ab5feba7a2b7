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
from typing import Any, Iterable

SIG = 4  #: significant digits shown to people
D3_FORMAT = ",.4~r"  #: d3-format for a value already divided by its unit's factor (4 significant digits)
D3_PCT = ".3~p"  #: d3-format for ratios (0..1) shown as percent, 3 significant digits (0.56421 -> 56.4%)
#: d3-format for a value written inside a small chart cell (3 significant digits; 9.6e-8 when tiny, to stay short)
D3_SHORT = ",.3~g"
D3_INT = ",d"  #: d3-format for counts

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
    """``v`` without arithmetic noise: 0.04222999999999999 -> 0.04223 (15 significant digits, the
    most a double holds exactly for every decimal; Python's repr then writes the shortest form)."""
    if not isinstance(v, float) or not math.isfinite(v) or v == 0:
        return v
    return float(f"{v:.15g}")


def number(v: Any, sig: int = SIG) -> str:
    """``v`` with at most ``sig`` significant digits (more only for integer parts, never an exponent):
    187.8737 -> '187.9', 0.0422 -> '0.0422', 12345.6 -> '12,346', 0 -> '0'."""
    f = _finite(v)
    if f is None:
        return "–"
    if f == 0:
        return "0"
    mag = math.floor(math.log10(abs(f)))
    decimals = max(0, sig - 1 - mag)
    text = f"{f:,.{decimals}f}"
    if decimals and "." in text:  # 4 significant digits, not 4 decimals: drop zeros rounding left
        text = text.rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def unit_for(kind: str, values: Iterable[Any] = ()) -> tuple[str, float]:
    """(unit label, factor) for a column or axis of ``kind``: the largest unit in which the median of the
    non-zero magnitudes is at least 1. Kinds without units give ('', 1)."""
    units = UNITS.get(kind)
    if not units:
        return (BASE_UNIT.get(kind, ""), 1.0)
    mags = sorted(abs(f) for f in (_finite(v) for v in values) if f)
    if not mags:
        base = next(u for u in units if u[1] == 1.0)
        return base
    med = mags[len(mags) // 2]
    chosen = units[0]
    for u in units:
        if med >= u[1] * 0.9995:
            chosen = u
    return chosen


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
    return number(f / factor, sig)


def header(label: str, kind: str, unit: str) -> str:
    """A column header or axis title with its unit: header('Step time', 'ms', 'ms') -> 'Step time (ms)'."""
    if kind == "ratio" or kind == "pct":
        unit = "%"
    return f"{label} ({unit})" if unit else label


def percent(ratio: Any, sig: int = 3) -> str:
    """0.0329 -> '3.29%', 3.6002 -> '360%' (ratios are 0..1 in the model)."""
    return quantity(ratio, "ratio", sig)


def ms(v: Any) -> str:
    """A time in ms for sentences, in the unit that reads best: ms(187.8737) -> '187.9 ms'."""
    return quantity(v, "ms")


__all__ = ["SIG", "D3_FORMAT", "D3_PCT", "D3_SHORT", "D3_INT", "UNITS", "BASE_UNIT", "clean", "number", "unit_for",
           "quantity", "cell", "header", "percent", "ms"]
