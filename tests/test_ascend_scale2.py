"""The vectorised Ascend hot spots equal their naive (per-cell / per-group loop) references on random data, and the
generator writes realistic link counts (a rank's links do not grow with the group). No timing here (bench/)."""

from __future__ import annotations

import json
import random

import numpy as np
import pandas as pd
import pytest

from reportgen.readers.ascend import memory_samples as ascend_memory_samples
from reportgen.sections.communication import transit_outliers
from reportgen.synth.ascend import AscendSpec, _peers, write_ascend_run
from reportgen.timebase import column_ns, to_ns


def _column_ns_naive(values, unit_ns):
    out = []
    for x in values:
        if x is None or x is pd.NA or (isinstance(x, float) and x != x):
            out.append(None)
            continue
        x = str(x).strip()
        out.append(to_ns(x, unit_ns) if x else None)
    return out


_ODD = ["", " ", "N/A", "nan", "-", ".", "5.", ".5", "-.5", "+5", "1e3", "1.2345", "１２", "²", "9223372036854775.807",
        "9223372036854775.808", "99999999999999999999", "-12.5", "\t17.001\t", "0", "-0", "1.5e-3", "abc", None]


@pytest.mark.parametrize("dtype", [object, "str", "string"])
def test_column_ns_equals_per_cell_reference(dtype):
    rnd = random.Random(3)
    for _ in range(150):
        vals = []
        for _ in range(rnd.randint(0, 25)):
            k = rnd.random()
            if k < 0.5:
                vals.append(f"{rnd.randint(0, 10 ** 16)}.{rnd.randint(0, 999):0{rnd.randint(1, 3)}d}"
                            + rnd.choice(["", "\t", " "]))
            elif k < 0.85:
                vals.append(rnd.choice(_ODD))
            else:
                vals.append(str(rnd.randint(-10 ** 6, 10 ** 6)))
        s = pd.Series(vals, dtype=dtype, index=range(7, 7 + len(vals)))
        for unit in (1000, 1, 10, 7, 1_000_000):
            got = column_ns(s, unit)
            assert str(got.dtype) == "Int64" and got.index.equals(s.index)
            want = _column_ns_naive(s.tolist(), unit)
            assert [None if v is pd.NA else int(v) for v in got.tolist()] == want, (vals, unit)


def test_column_ns_fast_path_for_whole_usec_columns():
    rnd = random.Random(4)
    for _ in range(100):   # every cell "digits.ddd" (the Ascend CSV form), with and without a trailing TAB
        vals = [f"{rnd.randint(0, 10 ** rnd.randint(1, 16))}.{rnd.randint(0, 999):03d}" + rnd.choice(["", "\t", " "])
                for _ in range(rnd.randint(1, 30))]
        if rnd.random() < 0.2:
            vals[0] = rnd.choice(["9223372036854775.807", "9223372036854775.808", "9999999999999999.999",
                                  "1.234\n5.678", "0001.000", "12.5", "N/A"])
        s = pd.Series(vals, dtype=rnd.choice([object, "str"]))
        got = column_ns(s)
        assert [None if v is pd.NA else int(v) for v in got.tolist()] == _column_ns_naive(vals, 1000), vals


def _transit_outliers_naive(ops):
    o = ops.dropna(subset=["transit_ms"])
    out = []
    for (group, step, op), grp in o.groupby(["group", "step", "op"], dropna=False):
        if grp["rank"].nunique() < 3:
            continue
        med = float(grp["transit_ms"].median())
        mad = 1.4826 * float((grp["transit_ms"] - med).abs().median())
        limit = med + max(3 * mad, 0.1)
        for row in grp[grp["transit_ms"] > limit].itertuples():
            out.append({"rank": int(row.rank), "group": group, "step": int(step), "op": op,
                        "value": float(row.transit_ms), "reference": med})
    return out


def test_transit_outliers_equal_per_instance_loop():
    rng = np.random.default_rng(5)
    for trial in range(40):
        n = int(rng.integers(0, 400))
        ops = pd.DataFrame({
            "rank": rng.integers(0, 8, n), "group": rng.choice(["g1", "g2", "dp"], n),
            "step": rng.integers(1, 4, n), "op": rng.choice([f"hcom_allReduce__{i}" for i in range(6)], n),
            "transit_ms": np.where(rng.random(n) < 0.1, np.nan,
                                   rng.choice([1.0, 1.25, 2.0], n) * np.where(rng.random(n) < 0.1, 5.0, 1.0)
                                   + rng.normal(0, 0.05, n) * (trial % 2))})
        ops = ops.sample(frac=1, random_state=trial).reset_index(drop=True)
        assert transit_outliers(ops) == _transit_outliers_naive(ops)
    assert transit_outliers(None) == [] and transit_outliers(ops.iloc[:0]) == []


class _Run:
    def __init__(self, mr):
        self.mr = mr

    def table(self, name):
        return self.mr if name == "memory_record" else None


def _memory_naive(mr):
    mr = mr[mr["reserved_mb"].notna()]
    rows, parts = [], []
    for rank, g in mr.groupby("rank"):
        app = g[g["component"].astype(str).str.upper() == "APP"]
        if not app.empty:
            sel, source = app, "APP reserved (process level)"
        else:
            best = g.groupby("component")["reserved_mb"].max().idxmax()
            sel, source = g[g["component"] == best], f"max over components of reserved ({best})"
        rows.append({"rank": int(rank), "peak_mb": float(sel["reserved_mb"].max()), "source": source})
        parts.append(pd.DataFrame({"rank": int(rank), "ts": sel["ts_ms"].to_numpy(),
                                   "mb": sel["reserved_mb"].to_numpy()}))
    return pd.DataFrame(rows), pd.concat(parts, ignore_index=True)


def test_memory_ascend_equals_per_rank_loop():
    rng = np.random.default_rng(9)
    for _ in range(30):
        n = int(rng.integers(1, 300))
        mr = pd.DataFrame({"rank": rng.integers(0, 6, n), "component": rng.choice(["APP", "app", "PTA", "GE"], n,
                                                                                   p=[0.2, 0.05, 0.5, 0.25]),
                           "ts_ms": rng.random(n) * 100, "reserved_mb": np.where(rng.random(n) < 0.1, np.nan,
                                                                                  rng.random(n) * 1000)})
        if not mr["reserved_mb"].notna().any():
            continue
        mr = mr.assign(allocated_mb=np.nan, active_mb=np.nan)
        samples = ascend_memory_samples(_Run(mr))  # Ascend's rule, written once in its reader
        per, series = _memory_naive(mr)
        got = samples.groupby("rank", as_index=False).agg(peak_mb=("reserved_mb", "max"), source=("series", "first"))
        pd.testing.assert_frame_equal(got, per, check_dtype=False)
        pd.testing.assert_frame_equal(
            samples[["rank", "ts_ms", "reserved_mb"]].rename(columns={"ts_ms": "ts", "reserved_mb": "mb"})
            .sort_values(["rank", "ts", "mb"], kind="stable").reset_index(drop=True),
            series.sort_values(["rank", "ts", "mb"], kind="stable").reset_index(drop=True), check_dtype=False)


def test_generator_links_per_rank_do_not_grow_with_the_group():
    host_of = {r: r // 8 for r in range(512)}
    peers = _peers(list(range(512)), host_of)
    assert max(len(p) for p in peers.values()) <= 8 + 2
    assert peers[7] == [0, 1, 2, 3, 4, 5, 6, 7, 8] and peers[0] == list(range(8)) + [511]
    inside = _peers([0, 1, 2, 3], host_of)   # a group inside one server: full mesh
    assert all(v == [0, 1, 2, 3] for v in inside.values())


def test_generated_matrix_lists_only_used_links(tmp_path):
    gt = write_ascend_run(tmp_path, AscendSpec(hosts=4, devices_per_host=2, stages=1, steps=1, microbatches=2,
                                               slow_link=(1, 2)))
    d = tmp_path / gt["per_rank"][1]["dir"] / "ASCEND_PROFILER_OUTPUT"
    mat = json.loads((d / "communication_matrix.json").read_text())
    links = {k for v in mat.values() for op, e in v["collective"].items() if op.startswith("allreduce-total")
             for k in e}
    assert links == {"1-0", "1-1", "1-2"}   # mesh peer 0 (same server), self, ring neighbour 2 (next server)
    assert {(x["src"], x["dst"]) for x in gt["links"]} >= {(1, 2), (2, 1), (7, 0), (0, 7)}
    with pytest.raises(ValueError):   # same dp group, but no traffic between these ranks
        write_ascend_run(tmp_path / "bad", AscendSpec(hosts=4, devices_per_host=2, stages=1, slow_link=(1, 5)))
