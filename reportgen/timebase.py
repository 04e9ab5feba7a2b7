"""Exact timestamps: profiler text -> integer nanoseconds, and the run origin (model doc, "Time base").

Profilers write absolute times as decimal text whose value a float cannot hold: Kineto ``ts`` in epoch
µs with ns decimals (``1704458676522690.655``, 19 significant digits; a double keeps ~16, i.e. 0.25 µs at
that size), Ascend CSV/trace strings the same way, Ascend DBs integer ns, MindInsight integer 10-ns
system-counter ticks. Everything here works on the digits, never on a float of the absolute value:

* :func:`to_ns` - one value (int, numeric string, or a str handed over by a JSON decoder's float hook)
  -> int ns, exactly. Digits below 1 ns are rounded half up (``floor(x + 1/2)``), which commutes with
  shifting every timestamp by a whole number of ns.
* :func:`column_ns` - the same for a column of strings (CSV cells), vectorised; NaN/empty -> missing.
* :func:`origin` - the earliest of several int64 arrays (the run's ``time_origin_ns``).
* :func:`to_rel_ms` - turn a table's absolute int-ns columns into the documented ``*_ms`` columns via
  :func:`reportgen.model.rel_ms`.

A Python float (JSON decoded without a hook, a DB ``REAL``) is taken through its shortest ``repr``: exact
whenever the float holds the value that was written (durations, relative times), best effort otherwise.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from decimal import ROUND_FLOOR, Decimal, InvalidOperation

import numpy as np
import pandas as pd

from .model import rel_ms

__all__ = ["NS_PER_US", "NS_PER_MS", "ABS_COLUMNS", "to_ns", "column_ns", "origin", "to_rel_ms"]

#: absolute int-ns columns as readers first build them -> the run model's columns relative to the run origin
ABS_COLUMNS = {"start_ns": "start_ms", "end_ns": "end_ms", "ts_ns": "ts_ms", "alloc_ns": "alloc_ms",
               "release_ns": "release_ms"}

NS_PER_US = 1000
NS_PER_MS = 1_000_000
_INT64 = (-(1 << 63), (1 << 63) - 1)
_DIGITS = frozenset("0123456789")
_MAX_NS = _INT64[1]
_DECIMALS_NS = (0, 100, 10, 1)  # ns per unit of the last of 1, 2, 3 µs decimals
#: cells of a column joined by newlines, each ``[spaces]digits.ddd[spaces]`` (epoch µs have 16 whole digits)
_USEC3 = re.compile(r"(?:[ \t]*[0-9]{1,16}\.[0-9]{3}[ \t]*\n)*")


#: characters of the longest time text read as a number ("1704458676522690.655" is 20; a float's repr at most 24)
MAX_TIME_CHARS = 64


def _decimal_ns(text: str, unit_ns: int) -> int | None:
    """General path: any decimal/exponent form, rounded half up to whole ns."""
    try:
        d = Decimal(text)
    except (InvalidOperation, ValueError):
        return None
    if not d.is_finite() or d.adjusted() > 30:  # "1e100000000" would be an int of 10^8 digits: far past int64
        return None
    n = int((d * unit_ns + Decimal("0.5")).to_integral_value(rounding=ROUND_FLOOR))
    return n if _INT64[0] <= n <= _INT64[1] else None


@lru_cache(maxsize=None)
def _scale(unit_ns: int) -> int:
    """Decimal digits below the unit that still are whole ns (1000 -> 3); -1 when unit_ns is not 10^k."""
    t = str(unit_ns)
    return len(t) - 1 if unit_ns > 0 and t.rstrip("0") == "1" else -1


def to_ns(v, unit_ns: int = NS_PER_US) -> int | None:
    """Exact integer ns of one time value written in units of ``unit_ns`` ns (default µs); None if not a number.

    Accepts int (not bool), numeric str (surrounding spaces/tabs allowed, ``-``/``+``, any number of
    decimals, exponent form) and float (through ``repr``). Fast path: plain ``[-]digits[.digits]``
    with at most as many decimals as whole ns allow."""
    c = v.__class__
    if c is str and unit_ns == NS_PER_US:  # the usual profiler text, "1704458676522690.655": no call below
        w, _dot, f = v.partition(".")
        if len(f) <= 3 and len(w) <= 16 and w.isdecimal() and (f.isdecimal() or not f):
            n = int(w) * NS_PER_US + (int(f) * _DECIMALS_NS[len(f)] if f else 0)
            if n <= _MAX_NS:
                return n
    if c is int or (c is not bool and isinstance(v, (int, np.integer))):
        n = int(v) * unit_ns
        return n if _INT64[0] <= n <= _INT64[1] else None
    if c is float or isinstance(v, (float, np.floating)):
        v = float(v)
        if not math.isfinite(v):
            return None
        if v.is_integer() and abs(v) < 2 ** 53:
            return to_ns(int(v), unit_ns)
        v = repr(v)
    elif isinstance(v, Decimal):  # ijson and friends
        v = str(v)
    elif not isinstance(v, str):
        return None
    s = v.strip()
    if len(s) > MAX_TIME_CHARS:  # no time is written this long; int() of 4,300+ digits raises (issue 29)
        return None
    neg = s[:1] == "-"
    body = s[1:] if neg or s[:1] == "+" else s
    whole, _dot, frac = body.partition(".")
    scale = _scale(unit_ns)
    if (whole or frac) and _DIGITS.issuperset(whole) and _DIGITS.issuperset(frac) and len(frac) <= scale:
        n = (int(whole) if whole else 0) * unit_ns + (int(frac) * 10 ** (scale - len(frac)) if frac else 0)
        n = -n if neg else n
        return n if _INT64[0] <= n <= _INT64[1] else None
    return _decimal_ns(s, unit_ns)


def column_ns(values, unit_ns: int = NS_PER_US) -> pd.Series:
    """Exact ns of a column of time values (strings as read from a CSV, or numbers) -> nullable ``Int64``.

    One pass over the cells with a fast path for the usual ``[-]digits[.digits]`` text (pandas string methods
    cost ~20 calls per column, which dominated reading thousands of small per-rank CSVs); cells that are not
    numbers (``N/A``, empty) become missing (``<NA>``); other forms (exponents, more decimals) go through
    :func:`to_ns`."""
    s = values if isinstance(values, pd.Series) else pd.Series(values)
    if s.dtype.kind in "iu":  # int64 or nullable Int64: exact already
        return s.astype("Int64") * unit_ns
    out = pd.Series(pd.NA, index=s.index, dtype="Int64")
    if s.empty:
        return out
    if s.dtype.kind == "f":
        out[:] = [to_ns(x, unit_ns) if pd.notna(x) else None for x in s.tolist()]
        return out
    cells = s.tolist()
    if unit_ns == NS_PER_US:   # the usual Ascend column: every cell "digits.ddd" (+ TAB): checked and parsed in C
        try:
            text = "\n".join(cells)
        except TypeError:      # a missing / non-text cell: the general pass below
            text = None
        if text is not None and _USEC3.fullmatch(text + "\n"):
            words = text.replace(".", "").split()
            if len(words) == len(cells):   # (a cell holding a newline would split in two)
                try:
                    return pd.Series(np.array(words, dtype=np.int64), index=s.index, dtype="Int64")
                except OverflowError:      # beyond int64 ns: the general pass (missing)
                    pass
    scale = max(_scale(unit_ns), 0)
    top = str(_MAX_NS // unit_ns)  # a whole part below this cannot overflow int64 ns (larger ones: to_ns, None)
    nt, pad = len(top), "0" * scale
    vals = np.zeros(len(s), dtype=np.int64)
    ok = np.zeros(len(s), dtype=bool)
    # one pass in Python over the cells (the per-column pandas string methods cost more at profiler sizes)
    for i, x in enumerate(cells):
        if x.__class__ is not str:
            if x is None or x is pd.NA or (x.__class__ is float and x != x):
                continue
            x = str(x)
        x = x.strip()
        if not x:
            continue
        neg = x[0] == "-"
        w, sep, f = (x[1:] if neg else x).partition(".")
        nw = len(w)
        if w.isdigit() and w.isascii() and (nw < nt or (nw == nt and w < top)) and \
                (not sep or (f.isdigit() and f.isascii() and len(f) <= scale)):
            n = int(w) * unit_ns + (int((f + pad)[:scale]) if f else 0)
            vals[i] = -n if neg else n
            ok[i] = True
        else:
            n = to_ns(x, unit_ns)
            if n is not None:
                vals[i] = n
                ok[i] = True
    return pd.Series(pd.arrays.IntegerArray(vals, ~ok), index=s.index)


def abs_columns(df: pd.DataFrame) -> list:
    """The absolute int-ns columns (:data:`ABS_COLUMNS`) a table has."""
    return [df[c] for c in ABS_COLUMNS if c in df.columns]


def origin(*arrays) -> int | None:
    """The earliest value over int ns arrays / Series (missing values ignored); None when all are empty."""
    best = None
    for a in arrays:
        if a is None:
            continue
        if isinstance(a, pd.Series) and isinstance(a.dtype, np.dtype) and a.dtype.kind in "iu":
            a = a.to_numpy()  # no missing value to drop: the array path, without dropna's copy
        if isinstance(a, pd.Series):
            a = a.dropna()
            if a.empty:
                continue
            m = int(a.min())
        else:
            a = np.asarray(a)
            if a.size == 0:
                continue
            m = int(a.min())
        best = m if best is None else min(best, m)
    return best


def to_rel_ms(df: pd.DataFrame, origin_ns: int, columns: dict[str, str] = ABS_COLUMNS) -> pd.DataFrame:
    """Replace absolute int-ns columns by ms relative to the run origin (:func:`reportgen.model.rel_ms`), in place
    of the ns column: ``{"start_ns": "start_ms", ...}``. Missing values (nullable Int64) become NaN."""
    out = df.copy()
    for src, dst in columns.items():
        if src not in out:
            continue
        loc = out.columns.get_loc(src)
        col = out.pop(src)
        if col.dtype.kind == "i" and col.dtype != "Int64":
            ms = rel_ms(col.to_numpy(dtype=np.int64), origin_ns)
        else:  # nullable: missing -> NaN
            col = col.astype("Int64")
            ms = rel_ms(col.fillna(int(origin_ns)).to_numpy(dtype=np.int64), origin_ns)
            ms[col.isna().to_numpy()] = np.nan
        out.insert(loc, dst, ms)
    return out
