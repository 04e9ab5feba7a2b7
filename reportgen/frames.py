"""Small-table pandas helpers: the same frames as pandas' own calls, with less fixed cost per call.

A report runs a few thousand pandas calls on tables of tens to thousands of rows, where pandas' fixed cost per call,
not the rows, is the time (issue 30: small runs ahead of HTA)."""

from __future__ import annotations

import numpy as np
import pandas as pd

try:  # how DataFrame.to_dict boxes a value of an object or extension column
    from pandas.core.dtypes.cast import maybe_box_native
except ImportError:  # a pandas without it: records() goes by to_dict itself
    maybe_box_native = None


def agg(grouped, **named) -> pd.DataFrame:
    """``grouped.agg(**named)``: pandas' named aggregation (``out=(column, "sum" | "min" | "max" | "mean" | "median"
    | "std" | "size" | "first" | "nunique" | "any" | ...)``) of a ``DataFrame.groupby(..., as_index=True)``, computed
    as one reduction per output column on the one grouping; the same frame (index: the group keys, in the grouping's
    order; columns in the order named), at about a sixth of the cost on small tables."""
    cols: dict = {}
    index = None
    for name, (column, how) in named.items():
        s = getattr(grouped[column], how)()
        if index is None:
            index = s.index
        cols[name] = s.array if cols else s  # every reduction of one grouping lists the groups in the same order
    return pd.DataFrame(cols, index=index)  # one frame at once (a column set at a time cost ~0.1 ms each)


def own_columns(data: dict) -> pd.DataFrame:
    """``pd.DataFrame(data)`` without a copy of each column into one 2D block per dtype (pandas' default for a dict):
    a numpy array that is a view of another (a column of a bigger frame) is copied, so it keeps no bigger block alive;
    a standalone array, a Series (shared as it is, its references known to pandas) or a scalar is taken as it is.
    With pandas 3 (copy-on-write) a later selection of the columns (``df[cols]``, ``drop``) then shares them, where
    from a 2D block it copies the columns selected. For a big table made once and read by several sections (issue 30:
    the run's memory)."""
    cols = {k: (v.copy() if isinstance(v, np.ndarray) and v.base is not None else v) for k, v in data.items()}
    return pd.DataFrame(cols, copy=False)


def records(df: pd.DataFrame, keys: list) -> list[dict]:
    """``df[keys].to_dict(orient="records")``: the same rows (numpy numbers as Python ones, ``<NA>`` as None, other
    values as pandas gives them), read column by column instead of row by row (a page table: tens of rows, a
    fifth of the cost). Keys that repeat or that name a missing or repeated column go by pandas' own call."""
    if not records_fast(df, keys):
        return df[keys].to_dict(orient="records")
    values = [column_values(df[k]) for k in keys]
    return [dict(zip(keys, row)) for row in zip(*values)]


def records_fast(df: pd.DataFrame, keys: list) -> bool:
    """Whether :func:`records` reads ``df[keys]`` column by column (:func:`column_values`), not by pandas' call."""
    return (maybe_box_native is not None and bool(keys) and len(set(keys)) == len(keys) and df.columns.is_unique
            and all(k in df.columns for k in keys))


def column_values(s: pd.Series, lazy: bool = False):
    """The values of one column as :func:`records` gives them in its rows (a list; ``lazy``: an iterator over them
    where they are made one by one, for a reader that may stop early)."""
    dtype = s.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biufc":  # what .item() gives, at once
        return s.to_numpy().tolist()
    if isinstance(dtype, np.dtype) and dtype.kind != "O":  # datetimes, timedeltas: pandas' scalars as they are
        return list(s)
    boxed = map(maybe_box_native, s)  # object and extension columns: each value boxed as to_dict boxes it
    return boxed if lazy else list(boxed)


def column_cells(s: pd.Series) -> list:
    """The values of one column as iterating it gives them (the cells of ``itertuples``): a numpy number column's
    values as Python numbers at once (``tolist``: what iterating gives, one ``.item()`` each), any other column's as
    pandas iterates it (nullable and object cells unboxed: ``<NA>`` stays ``<NA>``, unlike :func:`column_values`)."""
    dtype = s.dtype
    if isinstance(dtype, np.dtype) and dtype.kind in "biufc":
        return s.to_numpy().tolist()
    return list(s)


def _row_dtype(dtype) -> bool:
    """A dtype that a column made from Python values infers from those values alone, and that any values which
    each infer it infer together: int64, float64, bool, and pandas' default text dtype."""
    if isinstance(dtype, np.dtype):
        return dtype in (np.dtype("int64"), np.dtype("float64"), np.dtype("bool"))
    return dtype == pd.StringDtype(na_value=np.nan)


def frame_of_plain_rows(lists: list[list], columns: list | None = None) -> pd.DataFrame | None:
    """:func:`stack_rows` of ``pd.DataFrame(rows)`` (``columns``: ``pd.DataFrame(rows, columns=columns)``) of each
    list, made at once from the rows, without a frame per list, when every column's values over all the lists are
    all ints within int64, all floats or all texts: then each list's frame has those int64 / float64 / text columns
    and they concatenate to this one. Rows are dicts with the first row's keys in its order, or tuples as long as
    ``columns``; the names are texts. None otherwise (the caller makes a frame of each list). A frame per rank and
    file was ~30 % of a 1,024-rank MindInsight read."""
    rows = [r for rs in lists for r in rs]
    if not rows:
        return None
    first = rows[0]
    if columns is None:
        if type(first) is not dict or not first:
            return None
        names = tuple(first)
        if not all(type(r) is dict and tuple(r) == names for r in rows):
            return None
        values = [[r[k] for r in rows] for k in names]
    else:
        names = tuple(columns)
        if not names or len(set(names)) != len(names) or not all(type(r) is tuple and len(r) == len(names)
                                                                 for r in rows):
            return None
        values = [list(v) for v in zip(*rows)]
    if not all(type(n) is str for n in names):  # (the readers' names; other keys make other column indexes)
        return None
    cols = {}
    for name, vals in zip(names, values):
        kinds = set(map(type, vals))
        if kinds == {int}:
            try:
                cols[name] = np.array(vals, dtype=np.int64)
            except OverflowError:
                return None
        elif kinds == {float}:
            cols[name] = np.array(vals, dtype=np.float64)
        elif kinds == {str}:
            cols[name] = vals
        else:
            return None
    return pd.DataFrame(cols)


def stack_rows(parts: list, columns: list | None = None) -> pd.DataFrame | None:
    """The frame that ``pd.DataFrame`` makes of the rows of ``parts`` (frames made from Python rows), in order,
    made by one ``pd.concat``: when every part that has rows has the same unique text-named columns (``columns``,
    when given) with the same dtypes, each one :func:`_row_dtype` names, and no text column is missing in every
    row. Then the values of all the parts infer the dtypes that the values of each part inferred, and the
    concatenated frame is the one the rows would make (a RangeIndex, the columns in their order). None when they
    do not, or no part has rows: the caller makes the frame from the rows (:func:`records` /
    :func:`column_cells`). A rank's rows turned back into Python rows and made into one frame again cost ~30 % of a
    1,024-rank MindInsight read."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return None
    first = parts[0]
    cols = list(first.columns)
    if (not cols or not all(type(c) is str for c in cols) or not first.columns.is_unique
            or (columns is not None and cols != list(columns)) or not all(_row_dtype(d) for d in first.dtypes)):
        return None
    dtypes = list(first.dtypes)
    for p in parts[1:]:
        if list(p.columns) != cols or list(p.dtypes) != dtypes:
            return None
    out = first.reset_index(drop=True) if len(parts) == 1 else pd.concat(parts, ignore_index=True)
    # a text column missing in every row: the rows make it float64 (only a .reduced file's frames can hold one)
    if any(not isinstance(d, np.dtype) and out[c].isna().all() for c, d in zip(cols, dtypes)):
        return None
    out.columns = pd.Index(cols)  # the rows' keys as pandas makes them (a part's own Index may be of objects)
    return out


def positions_by(keys) -> dict:
    """key -> the positions of its rows (in their order), keys ascending; rows whose key is NaN are in no key's. One
    stable sort for a split of a table by key (rank) that a loop then reads as slices of its arrays: a frame or a
    filter per key cost ~1 ms, seconds at 1,024 ranks. Keys are looked up by equality (3 and 3.0 are one key)."""
    keys = np.asarray(keys)
    pos = np.flatnonzero(~pd.isna(keys)) if keys.dtype.kind in "fO" else np.arange(len(keys))
    order = pos[np.argsort(keys[pos], kind="stable")]
    k = keys[order]
    if not len(k):
        return {}
    cut = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    return {k[a].item() if hasattr(k[a], "item") else k[a]: order[a:b] for a, b in zip(cut, np.r_[cut[1:], len(k)])}


# Text columns of many rows whose equal texts are one object. numpy makes a fixed-width unicode array of texts
# (``np.where(c, "p2p", "collective")``, ``np.select``, ``np.full(n, "main", dtype=object)`` too), and each of its rows
# becomes a new str in the column pandas makes (~50 bytes and a hash of its own each, computed again by every groupby
# on it): at 1,024 generated Kineto ranks 75 MB of the run's tables were such copies of a few words. (What readers stack
# from csv cells and JSON texts is made one object per value afterwards: model.share_text.)


def _text(value):
    """A text as a 0-d object array of a plain str (numpy broadcasts the one object; a str subclass such as
    ``np.str_`` made plain, as numpy's own calls do); anything else as it is."""
    if not isinstance(value, str):
        return value
    return np.array(value if type(value) is str else str(value), dtype=object)


def text_where(cond, yes, no) -> np.ndarray:
    """``np.where(cond, yes, no)`` as objects, each text given once one object in every row it fills. ``yes`` and
    ``no``: a text, None, or an array (of objects: its own objects are kept). No rows: numpy's own array (pandas
    makes an empty text column of it, and an empty column of objects of this one)."""
    if not np.size(cond):
        return np.where(cond, yes, no)
    return np.where(cond, _text(yes), _text(no))


def text_select(conds: list, choices: list, default) -> np.ndarray:
    """``np.select(conds, choices, default)`` as objects, each text one object in every row it fills (no rows:
    numpy's own array, as :func:`text_where`)."""
    if not conds or not np.size(conds[0]):
        return np.select(conds, choices, default=default)
    return np.select(conds, [_text(c) for c in choices], default=_text(default))


def text_full(n: int, value: str) -> np.ndarray:
    """``n`` rows of one text: one object in each (``np.full(n, value, dtype=object)`` makes a str per row)."""
    return np.full(n, _text(value), dtype=object)
