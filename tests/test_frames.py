"""reportgen/frames.py: the same frames as pandas' own calls."""

import numpy as np
import pandas as pd
import pytest

from reportgen.frames import agg

NAMED = dict(count=("c", "sum"), total=("x", "sum"), hi=("x", "max"), lo=("x", "min"), sd=("x", "std"),
             n=("x", "size"), mean=("x", "mean"), median=("x", "median"), first=("s", "first"), ranks=("r", "nunique"),
             flagged=("b", "any"))


@pytest.mark.parametrize("keys, kw", [(["k"], {"dropna": False}), (["r", "k"], {"sort": False, "dropna": False}),
                                      (["r"], {}), ("k", {})])
def test_agg_is_the_named_aggregation(keys, kw):
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"k": rng.choice(["a", "b", None], 60), "r": rng.integers(0, 4, 60), "x": rng.normal(size=60),
                       "c": rng.integers(0, 5, 60), "s": rng.choice(["p", "q"], 60), "b": rng.random(60) > .5})
    for d in (df, df.iloc[0:0]):
        pd.testing.assert_frame_equal(agg(d.groupby(keys, **kw), **NAMED), d.groupby(keys, **kw).agg(**NAMED))
