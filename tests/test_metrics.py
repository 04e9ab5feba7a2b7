

def test_every_table_but_a_per_rank_one_has_a_budget_in_the_metrics_file():
    """Issue 29 #5: a pg_config of 10^6 groups made a 43 MB domains table (the budget covered only per-operator and
    per-(rank, step) tables). Any other table keeps its first thresholds.JSON_OP_ROWS rows and says so; a per-rank
    table stays whole."""
    import pandas as pd

    from reportgen import document, thresholds as th

    n = th.JSON_OP_ROWS * 3
    groups = pd.DataFrame({"group": [f"g{i}" for i in range(n)], "size": [8] * n})
    kept, cut = document._budgeted("domains", groups)
    assert len(kept) == th.JSON_OP_ROWS and cut["left_out"] == n - th.JSON_OP_ROWS and "first" in cut["kept"]
    members = pd.DataFrame({"group": [f"g{i // 8}" for i in range(n)], "rank": [i % 8 for i in range(n)]})
    assert len(document._budgeted("members", members)[0]) == th.JSON_OP_ROWS  # ranks repeat: not per-rank
    per_rank = pd.DataFrame({"rank": range(n), "x": [1.0] * n})
    assert document._budgeted("per_rank", per_rank) == (per_rank, None)
    assert document._cuttable("domains", groups) and not document._cuttable("per_rank", per_rank)


def test_table_rows_clean_every_cell_as_clean_does():
    """jsonsafe.table_rows converts numpy columns at once: each value (and its type) is what jsonsafe.clean gives
    for that cell, for every dtype (floats with noise, NaN and inf, -0.0, ints, bools, uint64, float32, nullable
    ints, categoricals, datetimes, mixed objects, long text), duplicate column names and a row limit."""
    import numpy as np
    import pandas as pd

    from reportgen import jsonsafe

    df = pd.DataFrame({"a": [1.0, np.nan, np.inf, -0.0, 0.04222999999999999, 1e300],
                       "b": np.arange(6), "c": [True, False] * 3, "d": ["x", None, np.nan, "y" * 5000, 1, 2.5],
                       "e": pd.array([1, None, 3, 4, 5, 6], dtype="Int64"), "f": np.arange(6, dtype=np.float32) / 3,
                       "g": pd.Categorical(list("aabbcc")), "h": pd.to_datetime(["2020-01-01"] * 6),
                       "i": np.arange(6, dtype=np.uint64) + 2 ** 63})
    dup = df.copy()
    dup.columns = ["a", "a", "b", "c", "d", "e", "f", "g", "h"]
    for frame in (df, dup, df.iloc[0:0]):
        cols = list(frame.columns)
        want = [{c: jsonsafe.clean(v) for c, v in zip(cols, row)} for row in frame.itertuples(index=False, name=None)]
        for limit in (None, 2):
            got = jsonsafe.table_rows(frame, limit)
            assert got == want[:limit]
            assert [[type(v) for v in r.values()] for r in got] == [[type(v) for v in r.values()] for r in want[:limit]]
    assert jsonsafe.table_rows(df)[0]["a"] == 1.0 and jsonsafe.table_rows(df)[1]["a"] is None
    assert jsonsafe.table_rows(df)[4]["a"] == 0.04223


def test_table_rows_of_a_table_without_columns():
    import pandas as pd

    from reportgen import jsonsafe

    assert jsonsafe.table_rows(pd.DataFrame(index=[0, 1])) == [{}, {}]
    assert jsonsafe.table_rows(pd.DataFrame(index=[0, 1]), 1) == [{}]


def test_the_indented_metrics_file_is_what_json_dumps_with_indent_1_writes():
    """metrics.dumps indents with msgspec's formatter (json's C encoder writes no indentation, its Python encoder is
    4-6x slower): the bytes must be json.dumps(doc, indent=1)'s, for any document: empty and nested containers, keys
    and strings holding JSON punctuation, quotes, escapes, control characters, U+2028, non-ASCII, lone surrogates
    (written as U+FFFD), floats in every notation, big integers."""
    import json
    import random

    from reportgen import metrics

    rnd = random.Random(7)
    atoms = [0, -1, 1.5, 1e-05, 1.5e+300, -0.0, 2 ** 70, 5e-324, 0.1 + 0.2, True, False, None, "", " ", 'a"b', "\\",
             "\n\t\r", "\u2028", "é", "日本", "[]{},:", "\x00\x1f", "\ud800", "x\udcff", "😀", "a: b, c", "  [\n]  "]
    texts = [a for a in atoms if isinstance(a, str)]

    def gen(depth):
        r = rnd.random()
        if depth > 4 or r < 0.4:
            return rnd.choice(atoms)
        if r < 0.7:
            return [gen(depth + 1) for _ in range(rnd.randrange(0, 4))]
        return {rnd.choice(texts) + str(rnd.randrange(3)): gen(depth + 1) for _ in range(rnd.randrange(0, 4))}

    for _ in range(3000):
        doc = {"sections": {}, "x": gen(0)}
        want = json.dumps(doc, indent=1, allow_nan=False, ensure_ascii=False) + "\n"
        want = metrics._SURROGATE.sub("\ufffd", want)
        assert metrics.dumps(doc) == want
