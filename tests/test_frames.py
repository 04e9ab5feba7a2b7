"""reportgen/frames.py: the same frames as pandas' own calls."""

import numpy as np
import pandas as pd
import pytest

from reportgen.frames import agg

NAMED = dict(count=("c", "sum"), total=("x", "sum"), hi=("x", "max"), lo=("x", "min"), sd=("x", "std"),
             n=("x", "size"), mean=("x", "mean"), median=("x", "median"), first=("s", "first"), ranks=("r", "nunique"),
             flagged=("b", "any"), every=("b", "all"), timed=("y", "count"))


@pytest.mark.parametrize("keys, kw", [(["k"], {"dropna": False}), (["r", "k"], {"sort": False, "dropna": False}),
                                      (["r"], {}), ("k", {})])
def test_agg_is_the_named_aggregation(keys, kw):
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"k": rng.choice(["a", "b", None], 60), "r": rng.integers(0, 4, 60), "x": rng.normal(size=60),
                       "c": rng.integers(0, 5, 60), "s": rng.choice(["p", "q"], 60), "b": rng.random(60) > .5,
                       "y": np.where(rng.random(60) > .3, rng.normal(size=60), np.nan)})
    for d in (df, df.iloc[0:0]):
        pd.testing.assert_frame_equal(agg(d.groupby(keys, **kw), **NAMED), d.groupby(keys, **kw).agg(**NAMED))
        # as_index=False: the same frame with the keys as columns
        pd.testing.assert_frame_equal(agg(d.groupby(keys, **kw), **NAMED).reset_index(),
                                      d.groupby(keys, as_index=False, **kw).agg(**NAMED))


@pytest.mark.filterwarnings("ignore:DataFrame columns are not unique")
def test_records_are_to_dict_records():
    from reportgen.frames import records
    df = pd.DataFrame({
        "i": [1, 2, 3], "f": [1.5, np.nan, np.inf], "b": [True, False, True], "s": pd.array(["a", None, "c"], "str"),
        "o": pd.Series([np.int64(4), "x", None], dtype=object), "n": pd.array([1, None, 3], dtype="Int64"),
        "nb": pd.array([True, None, False], dtype="boolean"), "c": pd.Categorical(["p", "q", "p"]),
        "t": pd.to_datetime(["2024-01-01", None, "2024-01-03"]), "d": pd.to_timedelta([1, 2, None], unit="s"),
        "z": pd.to_datetime(["2024-01-01", None, "2024-01-03"]).tz_localize("UTC"), "u": np.array([1, 2, 3], "uint8")})

    def same(a, b):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert list(x) == list(y)
            for k in x:
                u, v = x[k], y[k]
                assert type(u) is type(v), (k, u, v)
                assert u is v or u == v or (u != u and v != v), (k, u, v)

    for keys in (list(df.columns), ["f", "i"], ["s"], ["o", "n", "nb"]):
        for d in (df, df.iloc[0:0], df.iloc[[2, 0]]):
            same(records(d, keys), d[keys].to_dict(orient="records"))
    dup = pd.DataFrame([[1, 2]], columns=["a", "a"])
    same(records(dup, ["a"]), dup[["a"]].to_dict(orient="records"))
    same(records(df, ["i", "i"]), df[["i", "i"]].to_dict(orient="records"))
    with pytest.raises(KeyError):
        records(df, ["missing"])


def test_column_cells_are_the_cells_itertuples_gives():
    """readers/mindinsight.assemble reads a part's operator rows column by column: the same cells, of the same types,
    as ``itertuples`` (nullable and object cells as pandas iterates them: ``<NA>`` stays ``<NA>``, a numpy number in
    an object column stays one), for every dtype a ``.reduced`` file may hold."""
    from reportgen.frames import column_cells
    df = pd.DataFrame({
        "i": [1, 2, 3], "f": [1.5, np.nan, np.inf], "b": [True, False, True], "s": pd.array(["a", None, "c"], "str"),
        "o": pd.Series([np.int64(4), pd.NA, None], dtype=object), "n": pd.array([1, None, 3], dtype="Int64"),
        "nb": pd.array([True, None, False], dtype="boolean"), "ps": pd.array(["a", None, "c"], dtype="string"),
        "c": pd.Categorical(["p", "q", "p"]), "t": pd.to_datetime(["2024-01-01", None, "2024-01-03"]),
        "u": np.array([1, 2, 2 ** 63], "uint64"), "x": np.array([1 + 2j, 0, 3], "complex128")})
    for d in (df, df.iloc[0:0], df.iloc[[2, 0]]):
        want = list(d.itertuples(index=False, name=None))
        got = list(zip(*(column_cells(d[c]) for c in d.columns)))
        assert len(got) == len(want)
        for row, expected in zip(got, want):
            for u, v in zip(row, expected):
                assert type(u) is type(v) and (u is v or u == v or (u != u and v != v)), (u, v)


def _rows_frame(parts: list, columns) -> pd.DataFrame | None:
    """What readers/mindinsight.assemble made of a row list's per-rank frames before stack_rows: their rows (dicts
    of ``to_dict("records")`` or tuples of ``itertuples``), then one frame of them all."""
    from reportgen.frames import column_cells, records
    if columns is None:
        rows = [r for p in parts for r in records(p, list(p.columns))]
        return pd.DataFrame(rows) if rows else None
    rows = [t for p in parts for t in zip(*(column_cells(p[c]) for c in columns))]
    return pd.DataFrame(rows, columns=columns) if rows else None


def test_stack_rows_is_the_frame_of_every_parts_rows():
    """stack_rows concatenates per-rank frames made from Python rows only when that is the frame their rows make
    together; any other parts (dtypes that differ between them, or that values of several types inferred) give None.
    A seeded sweep of row lists of mixed values, as dicts and as tuples, several parts each."""
    import random
    import warnings

    from reportgen.frames import stack_rows
    rnd = random.Random(7)
    pools = {"int": [0, 1, -5, 2 ** 62], "float": [1.5, -0.0, float("nan"), 1e308, 3.0], "intfloat": [1, 2.5, None],
             "str": ["a", "", "ß", "nan"], "strnone": ["a", None, float("nan")], "bool": [True, False],
             "mixed": [1, "a", None, True, 2 ** 64, np.int64(3), pd.NA], "none": [None], "bigint": [2 ** 63, 1]}
    stacked = 0
    for _ in range(1500):
        names = list(dict.fromkeys(rnd.choice("abcd") for _ in range(rnd.randint(1, 3))))
        kinds = {c: rnd.choice(list(pools)) for c in names}
        lists = []
        for _ in range(rnd.randint(1, 4)):
            kk = dict(kinds)
            if rnd.random() < 0.3:  # a part whose values are of another kind
                kk[rnd.choice(names)] = rnd.choice(list(pools))
            rows = [{c: rnd.choice(pools[kk[c]]) for c in names} for _ in range(rnd.randint(0, 5))]
            if rows and rnd.random() < 0.1:
                rows[0].pop(names[0])
            lists.append(rows)
        tuples = rnd.random() < 0.5
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                if tuples:
                    parts = [pd.DataFrame([tuple(r.get(c) for c in names) for r in rows], columns=names)
                             for rows in lists if rows]
                else:
                    parts = [pd.DataFrame(rows) for rows in lists if rows]
                want = _rows_frame(parts, names if tuples else None)
            except (OverflowError, ValueError, TypeError):
                continue
        got = stack_rows(parts, names if tuples else None)
        if got is None:
            continue
        stacked += 1
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        assert list(got.dtypes) == list(want.dtypes) and isinstance(got.index, pd.RangeIndex)
    assert stacked > 200  # the sweep reaches the concatenation, not only the fallback

    a = pd.DataFrame({"x": [1, 2]})
    assert stack_rows([a, pd.DataFrame({"x": [1.5]})]) is None  # int64 and float64: the rows infer float64
    assert stack_rows([a, pd.DataFrame({"y": [1]})]) is None
    assert stack_rows([pd.DataFrame({"x": [1, "a"]})]) is None  # object
    assert stack_rows([a], ["y"]) is None
    assert stack_rows([]) is None and stack_rows([a.iloc[0:0]]) is None
    got = stack_rows([a.iloc[[1]], a.iloc[0:0], a])
    assert got["x"].tolist() == [2, 1, 2] and isinstance(got.index, pd.RangeIndex)
    # what a .reduced file's frames may be: no columns; a text column missing in every row (the rows make it
    # float64); names that are not texts; an Index of objects (the rows make one of texts)
    assert stack_rows([pd.DataFrame(index=pd.RangeIndex(2))]) is None
    empty_text = pd.DataFrame({"a": pd.array([np.nan], dtype="str")})
    assert stack_rows([empty_text, empty_text]) is None
    assert _rows_frame([empty_text, empty_text], None)["a"].dtype == np.float64
    assert stack_rows([pd.DataFrame({0: [1]})]) is None
    objects = pd.DataFrame({"a": [1]})
    objects.columns = pd.Index(["a"], dtype=object)
    pd.testing.assert_frame_equal(stack_rows([objects, objects]), _rows_frame([objects, objects], None),
                                  check_exact=True, check_column_type=True)


def test_frame_of_plain_rows_is_the_stacked_frame_of_each_lists_frame():
    """frame_of_plain_rows makes at once the frame that a frame per row list, stacked (or their rows made one frame),
    gives; only from dicts with the first row's keys, tuples as long as the columns, and columns whose values are all
    ints within int64, all floats or all texts. A seeded sweep of lists of such and of other values."""
    import random
    import warnings

    from reportgen.frames import frame_of_plain_rows, stack_rows
    rnd = random.Random(3)
    pool = [0, 1, -5, 2 ** 62, 2 ** 63, -2 ** 63, 1.5, -0.0, float("nan"), float("inf"), "a", "", "ß", "nan", None,
            True, np.int64(3), np.float64(2.5), pd.NA, type("S", (str,), {})("s")]
    plain = {"int": [0, 1, -5, 2 ** 62], "float": [1.5, -0.0, float("nan"), 1e308], "str": ["a", "", "ß"]}
    built = 0
    for _ in range(2000):
        names = list(dict.fromkeys(rnd.choice(["a", "b", "c", 0]) for _ in range(rnd.randint(1, 4))))
        kinds = [rnd.choice(["int", "float", "str", "any"]) for _ in names]
        tuples = rnd.random() < 0.5
        lists = []
        for _ in range(rnd.randint(1, 4)):
            rows = []
            for _ in range(rnd.randint(0, 5)):
                vals = [rnd.choice(plain[k] if k in plain and rnd.random() < 0.98 else pool) for k in kinds]
                if tuples:
                    rows.append(tuple(vals) if rnd.random() > 0.02 else tuple(vals[:-1]))
                else:
                    d = dict(zip(names, vals))
                    if rnd.random() < 0.03:
                        d = dict(reversed(list(d.items())))
                    rows.append(d)
            lists.append(rows)
        columns = names if tuples else None
        got = frame_of_plain_rows(lists, columns)
        if got is None:
            continue
        built += 1
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parts = [pd.DataFrame(rows, columns=columns) for rows in lists if rows]
        want = stack_rows(parts, columns)
        if want is None:
            want = _rows_frame(parts, columns)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        assert list(got.dtypes) == list(want.dtypes) and got.columns.dtype == want.columns.dtype
        assert [type(c) for c in got.columns] == [type(c) for c in want.columns]
        assert isinstance(got.index, pd.RangeIndex)
    assert built > 300
    assert frame_of_plain_rows([[]]) is None and frame_of_plain_rows([[{}]]) is None
    assert frame_of_plain_rows([[{"a": 1}], [{"a": 2.0}]]) is None  # int and float: the frames differ
    assert frame_of_plain_rows([[(2 ** 63,)]], ["a"]) is None  # beyond int64
    assert frame_of_plain_rows([[(1, 2)]], ["a", "a"]) is None
    assert frame_of_plain_rows([[{0: 1}]]) is None and frame_of_plain_rows([[(1,)]], [0]) is None


def _objects(a) -> int:
    """How many distinct objects an array (or a pandas column's values) holds."""
    a = getattr(getattr(a, "array", a), "_ndarray", a)
    return len({id(v) for v in np.asarray(a, dtype=object)})


def test_text_columns_hold_one_object_per_text_given():
    from reportgen.frames import text_full, text_select, text_where
    rng = np.random.default_rng(3)
    for n in (0, 1, 7, 1000):
        c, d = rng.random(n) > .5, rng.random(n) > .7
        own = np.array(["op0", "op1", "op2"], dtype=object)[np.arange(n) % 3]  # three objects
        cases = [(text_where(c, "p2p", "collective"), np.where(c, "p2p", "collective"), 2),
                 (text_where(c, own, "compute"), np.where(c, own, "compute"), 4),
                 (text_where(c, "x", None), np.where(c, "x", None), 2),
                 (text_select([c, d], ["wait", "memcpy"], "other"), np.select([c, d], ["wait", "memcpy"], "other"), 3),
                 (text_full(n, "main"), np.full(n, "main", dtype=object), 1)]
        for got, want, most in cases:
            assert got.dtype == (object if n else want.dtype) and got.shape == (n,)  # no rows: numpy's own array
            assert got.tolist() == want.tolist()
            assert _objects(got) <= most  # numpy's own calls make a str per row
            # pandas keeps the objects: a column of them is the column numpy's array gives, as few objects
            col, ref = pd.Series(got), pd.Series(want)
            pd.testing.assert_series_equal(col, ref)
            assert _objects(col) <= most
    assert _objects(np.full(50, "main", dtype=object)) == 50  # why: the call text_full replaces


@pytest.mark.skipif(int(pd.__version__.split('.')[0]) < 3,
                    reason="pandas 2 copies the columns a frame selects (no copy-on-write): the sharing is pandas 3's")
def test_own_columns_gives_each_column_its_own_array_and_selections_share_them():
    """frames.own_columns: a view of a bigger frame's block is copied (the block is not kept alive), a standalone array
    is the frame's column itself, columns are not consolidated, and a selection of columns shares them (issue 30: a
    table read by several sections, selected by each)."""
    from reportgen.frames import own_columns

    big = pd.DataFrame({"a": np.arange(5.0), "b": np.arange(5.0) * 2, "c": np.arange(5.0) * 3})  # one 2D float block
    view = big["b"].to_numpy()
    assert view.base is not None
    mine = np.arange(5, dtype=np.int64)
    df = own_columns({"b": view, "n": mine, "t": ["x"] * 5, "k": 1.5})
    assert not np.shares_memory(df["b"].to_numpy(), big.to_numpy())
    assert np.shares_memory(df["n"].to_numpy(), mine)
    assert df._mgr.nblocks == 4
    picked = df[["n", "b"]]
    assert np.shares_memory(picked["b"].to_numpy(), df["b"].to_numpy())
    pd.testing.assert_frame_equal(df, pd.DataFrame({"b": view, "n": mine, "t": ["x"] * 5, "k": 1.5}))
