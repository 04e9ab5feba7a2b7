"""JSON-safe values: what the metrics file, the report document's summary and the page's plan all write.

One definition of the cleaning (:func:`clean`) and of a table as row objects (:func:`table_rows`), used by
:mod:`reportgen.summary`, :mod:`reportgen.document` and :mod:`reportgen.metrics`.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from . import fmt, limits


def clean(value: Any) -> Any:
    """JSON-safe: NaN/inf -> null, numpy scalars -> Python, keys -> str; floats without arithmetic noise
    (fmt.clean: the shortest repr that round-trips, 0.04222999999999999 -> 0.04223); text longer than
    :data:`reportgen.limits.MAX_NAME_CHARS` cut with the cut stated."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return limits.cap_text(value) if len(value) > limits.MAX_NAME_CHARS else value
    if isinstance(value, float):
        return None if (math.isnan(value) or math.isinf(value)) else fmt.clean(float(value))
    if isinstance(value, int):
        return value
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return [clean(v) for v in value]
    if isinstance(value, pd.DataFrame):
        return table_rows(value)
    if value is pd.NA or value is pd.NaT:
        return None
    if hasattr(value, "item"):
        try:
            return clean(value.item())
        except (ValueError, AttributeError):
            pass
    return str(value)


def table_rows(df: pd.DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    """A table as a list of row objects with JSON-safe values (the first ``limit`` rows when given): each value
    :func:`clean`, computed column by column (a float, integer or boolean column of numpy's at once)."""
    cols = list(df.columns)
    if limit is not None and len(df) > limit:
        df = df.iloc[:limit]
    if not len(df) or not cols:
        return [{} for _ in range(len(df))]
    values = [_column(s) for _, s in df.items()]  # by position: duplicate names too
    return [dict(zip(cols, row)) for row in zip(*values)]


def _column(s: pd.Series) -> list:
    """:func:`clean` of each value of a column, in order."""
    dtype = s.dtype
    if isinstance(dtype, np.dtype):
        if dtype.kind in "iub":  # Python ints and bools, as clean keeps them
            return s.to_numpy().tolist()
        if dtype.kind == "f":
            a = s.to_numpy()
            finite = np.isfinite(a).tolist()
            c = fmt.clean
            return [c(v) if ok else None for v, ok in zip(a.tolist(), finite)]
    return [clean(v) for v in s]
