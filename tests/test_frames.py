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
