"""reportgen/fmt.py: the one number formatter (issue 13, "Numbers")."""

from __future__ import annotations

import json
import math

import pytest

from reportgen import fmt


# ---- significant digits ----------------------------------------------------------------------

@pytest.mark.parametrize("v, text", [
    (187.8737, "187.9"), (0.04222999999999999, "0.04223"), (1.7156, "1.716"), (0.2, "0.2"), (0.200000, "0.2"),
    (12.5, "12.5"), (0, "0"), (-3.5, "-3.5"), (9.9996, "10"), (0.000123456, "0.0001235"), (1234.4, "1,234"),
    (None, "–"), (float("nan"), "–"), (float("inf"), "–"), ("abc", "–"),
])
def test_number_has_at_most_4_significant_digits(v, text):
    assert fmt.number(v) == text


# ---- unit choice --------------------------------------------------------------------------------

@pytest.mark.parametrize("kind, values, unit", [
    ("ms", [187.8, 190.1, 2200.0], "ms"),  # the warm-up step does not move the unit of a column
    ("ms", [0.004, 0.012, 0.02], "µs"),
    ("ms", [1500.0, 2500.0], "s"),
    ("ms", [0.0000005], "ns"),
    ("mb", [18780.4464, 18000.0], "GB"),
    ("mb", [0.5], "kB"),
    ("bytes", [3e9], "GB"),
    ("gbps", [0.02], "MB/s"),
    ("flop", [12008762441000.0], "TFLOP"),
    ("flops", [13361751626115.6, 1.2e13], "TFLOP/s"),
    ("flops", [5e6], "MFLOP/s"),
    ("us", [1500.0], "ms"),
])
def test_unit_for_picks_the_unit_of_the_median(kind, values, unit):
    assert fmt.unit_for(kind, values)[0] == unit


def test_unit_for_a_wide_column_keeps_the_largest_value_under_10000_units():
    # median 10 µs, largest 4.5 s: µs would print 4,500,000; the column goes up until the largest fits
    unit, factor = fmt.unit_for("ms", [0.01, 0.012, 0.02, 4500.0])
    assert unit == "ms" and factor == 1.0
    assert all(len(fmt.cell(v, "ms", factor).replace(",", "").split(".")[0]) <= 4 for v in (0.01, 4500.0))


def test_unit_for_without_values_and_unitless_kinds():
    assert fmt.unit_for("ms", []) == ("ms", 1.0)
    assert fmt.unit_for("ms", [0, None, float("nan")]) == ("ms", 1.0)
    assert fmt.unit_for("flop", []) == ("FLOP", 1.0)
    assert fmt.unit_for("float", [1e9]) == ("", 1.0)
    assert fmt.unit_for("ratio", [0.5]) == ("%", 1.0)
    assert fmt.unit_for("text", ["a"]) == ("", 1.0)


# ---- cells, headers, quantities -----------------------------------------------------------------

def test_unit_for_a_numeric_column_is_its_values_one_by_one():
    """unit_for reads a numpy array or a pandas column of plain numbers at once: the same unit as the same values
    read one by one (NaN, infinities, zeros, negatives, ints; bools and nullable columns go value by value)."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(11)
    pool = [0.0, math.nan, math.inf, -math.inf, 1e-9, 0.3, 0.9995, 9999.4, 9999.6, 5e5, -2e7]
    for _ in range(400):
        v = np.array([rng.choice(pool) if rng.random() < 0.5 else rng.uniform(-1, 1) * 10.0 ** rng.integers(-9, 12)
                      for _ in range(int(rng.integers(0, 25)))])
        ints = np.nan_to_num(v, posinf=0, neginf=0).astype(np.int64)
        for kind in ("ms", "mb", "bytes", "gbps", "flops"):
            assert fmt.unit_for(kind, pd.Series(v)) == fmt.unit_for(kind, v) == fmt.unit_for(kind, v.tolist())
            assert fmt.unit_for(kind, pd.Series(ints)) == fmt.unit_for(kind, ints.tolist())
    assert fmt.unit_for("ms", pd.Series([True, True])) == fmt.unit_for("ms", [True, True]) == ("ms", 1.0)
    assert fmt.unit_for("ms", pd.Series([2e4, None], dtype="Float64")) == ("s", 1000.0)
    grid = np.array([[1.0, 2e4], [3e4, 5e4]])  # not one column: value by value (its rows), as before
    assert fmt.unit_for("ms", grid) == fmt.unit_for("ms", list(grid))


def test_clean_of_a_short_number_is_the_number_and_else_its_definition():
    """fmt.clean returns a float whose shortest form has at most 13 significant digits unchanged (without formatting
    it twice), which is what its definition gives: 15 significant digits, then 13 when within 1e-14. Checked bit for
    bit against the definition on sums, quotients and random doubles of every magnitude, negative too."""
    import random
    import struct

    def definition(v):
        if not isinstance(v, float) or not math.isfinite(v) or v == 0:
            return v
        v15 = float(f"{v:.15g}")
        short = float(f"{v15:.13g}")
        return short if abs(short - v15) <= abs(v15) * 1e-14 else v15

    rng = random.Random(2)
    values = [0.1 + 0.2, 48.3092480000003, 0.04222999999999999, 1e-300, 5e-324, 1.7976931348623157e308, 1 / 3,
              2.0 ** -1074, 9007199254740993.0, 123456789012.5, 0.1234567890123]
    for _ in range(30000):
        kind = rng.random()
        if kind < 0.3:
            v = rng.randint(0, 10**rng.randint(1, 16)) / 10 ** rng.randint(0, 12)
        elif kind < 0.6:
            v = sum(rng.randint(0, 10**6) / 1e6 for _ in range(rng.randint(2, 5)))
        else:
            v = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        values.append(v if rng.random() < 0.8 else -v)
    short = 0
    for v in values:
        got, want = fmt.clean(v), definition(v)
        assert got == want or (got != got and want != want), v
        if isinstance(v, float) and math.isfinite(v) and len(repr(v)) <= 14:
            short += 1
            assert got == v
    assert short > 5000
    import numpy as np

    assert type(fmt.clean(np.float64(0.25))) is float  # a float subclass comes back a float, as it always did


def test_clean_remembers_values_without_changing_them(monkeypatch):
    """fmt.clean keeps what it worked out by value (a report writes each number several times): a value asked again,
    as a float or as a numpy float64, gives its definition's result, a float, and the memory stays bounded."""
    import random

    import numpy as np

    monkeypatch.setattr(fmt, "_CLEANED", {})
    monkeypatch.setattr(fmt, "CLEANED_MAX", 500)
    rng = random.Random(4)
    values = [rng.random() * 10 ** rng.randint(-8, 12) for _ in range(400)]
    values += [v * 3 for v in values] + [0.1 + 0.2, 48.3092480000003, -1 / 3]
    for attempt in range(3):
        for v in rng.sample(values, len(values)):
            v15 = float(f"{v:.15g}")
            short = float(f"{v15:.13g}")
            want = short if abs(short - v15) <= abs(v15) * 1e-14 else v15
            for x in (v, np.float64(v)):
                got = fmt.clean(x)
                assert got == want and type(got) is float, (v, attempt)
            assert len(fmt._CLEANED) <= 500
    assert fmt._CLEANED  # the long forms were kept


def test_cell_in_the_column_unit():
    unit, factor = fmt.unit_for("flop", [12008762441000.0, 3.3e12])
    assert unit == "TFLOP" and fmt.cell(12008762441000.0, "flop", factor) == "12.01"
    assert fmt.cell(0.04222999999999999, "ratio") == "4.22"
    assert fmt.cell(3.6002, "ratio") == "360"
    assert fmt.cell(12345, "int") == "12,345" and fmt.cell(12, "rank") == "12" and fmt.cell(3.0, "rank") == "3"
    assert fmt.cell(None, "ms") == "–" and fmt.cell(float("nan"), "ms") == "–"
    assert fmt.cell("HCCS", "text") == "HCCS"


def test_header_names_the_unit():
    assert fmt.header("Step time", "ms", "ms") == "Step time (ms)"
    assert fmt.header("Wait ratio", "ratio", "") == "Wait ratio (%)"
    assert fmt.header("Utilisation", "pct", "") == "Utilisation (%)"
    assert fmt.header("Free (idle device)", "ms", "µs") == "Free (idle device, µs)"
    assert fmt.header("Rank", "rank", "") == "Rank"


def test_csv_header_names_the_base_unit_of_the_raw_values():
    assert fmt.csv_header("Step time", "ms") == "Step time (ms)"
    assert fmt.csv_header("Peak", "mb") == "Peak (MB)"
    assert fmt.csv_header("Wait ratio", "ratio") == "Wait ratio (fraction)"
    assert fmt.csv_header("Rank", "rank") == "Rank"


@pytest.mark.parametrize("v, kind, text", [
    (329.61e9, "flop", "329.6 GFLOP"), (13361751626115.6, "flops", "13.36 TFLOP/s"), (0.0125, "ms", "12.5 µs"),
    (187.8737, "ms", "187.9 ms"), (2200.0, "ms", "2.2 s"), (18780.4464, "mb", "18.78 GB"), (0.25, "ratio", "25%"),
    (3.6002, "ratio", "360%"), (74.26, "pct", "74.3%"), (107.9105, "gbps", "107.9 GB/s"), (1234567, "int", "1,234,567"),
    (0.2, "float", "0.2"),
])
def test_quantity(v, kind, text):
    assert fmt.quantity(v, kind) == text


def test_percent_and_ms():
    assert fmt.percent(0.0329) == "3.29%"
    assert fmt.percent(0.2) == "20%"
    assert fmt.percent(0.123, signed=True) == "+12.3%" and fmt.percent(-0.123, signed=True) == "-12.3%"
    assert fmt.percent(0, signed=True) == "0%"
    assert fmt.ms(187.8737) == "187.9 ms"


# ---- metric names, evidence ---------------------------------------------------------------------

@pytest.mark.parametrize("name, kind", [
    ("step_ms_median", "ms"), ("excess_ms_per_step", "ms"), ("transit_ms", "ms"), ("peak_ratio", "ratio"),
    ("share_of_step_ratio", "ratio"), ("flops_per_rank", "flop"), ("flops", "flop"), ("flops_total", "flop"),
    ("flops_per_s", "flops"), ("flops_per_s_mean", "flops"), ("bandwidth_gbps", "gbps"), ("limit_mb", "mb"),
    ("utilization_pct", "pct"), ("slow_affect_count", "int"), ("step_ms.median", "ms"), ("chance_p_value", ""),
    ("operators", ""), ("group", ""),
])
def test_metric_kind_from_the_name(name, kind):
    assert fmt.metric_kind(name) == kind


def test_evidence_shows_value_and_reference_in_one_unit():
    ev = {"metric": "transit_ms", "value": 12.3456, "reference": 0.0123, "operators": 3, "group": "g1",
          "excess_ms_per_step": 1234.5, "share_of_step_ratio": 0.1}
    items = dict(fmt.evidence(ev))
    assert items == {"metric": "transit_ms", "value": "12.35 ms", "reference": "0.0123 ms", "operators": "3",
                     "group": "g1", "excess_ms_per_step": "1.234 s"}  # share_of_step is shown as "At stake"
    assert dict(fmt.evidence({"metric": "small_op_ratio", "value": 0.6, "reference": 0.2, "limit_mb": 16.0})) == \
        {"metric": "small_op_ratio", "value": "60%", "reference": "20%", "limit_mb": "16 MB"}
    assert dict(fmt.evidence({"metric": "slow_affect_count", "value": 12, "reference": 40,
                              "chance_p_value": 0.000123456})) == \
        {"metric": "slow_affect_count", "value": "12", "reference": "40", "chance_p_value": "0.0001235"}
    # an explicit kind wins over the name; None stays a dash
    assert dict(fmt.evidence({"metric": "x", "kind": "mb", "value": 2048.0, "reference": None})) == \
        {"metric": "x", "value": "2.048 GB", "reference": "–"}


def test_text_of_any_value():
    assert fmt.text(None) == "–" and fmt.text(True) == "True" and fmt.text("a<b") == "a<b"
    assert fmt.text(3) == "3" and fmt.text(123456) == "123,456" and fmt.text(0.123456) == "0.1235"
    assert fmt.text([1, 2.5]) == "1, 2.5" and fmt.text({"size_mb": 2048.0}) == "size_mb 2.048 GB"


# ---- clean: JSON / CSV precision ----------------------------------------------------------------

@pytest.mark.parametrize("v, out", [
    (0.04222999999999999, 0.04223), (0.1 + 0.2, 0.3), (187.8737, 187.8737), (1 / 3, 0.333333333333333),
    (16535907799258.898, 16535907799258.9), (0.0, 0.0), (5, 5), (None, None),
])
def test_clean_removes_float_noise(v, out):
    assert fmt.clean(v) == out


def test_clean_keeps_what_a_double_means():
    for v in (187.8737, 1e-12, 123456789.123, 2.5e300, 1 / 7):
        c = fmt.clean(v)
        assert math.isclose(c, v, rel_tol=1e-14) and json.loads(json.dumps(c)) == c
    assert json.dumps(fmt.clean(0.04222999999999999)) == "0.04223"
    assert math.isnan(fmt.clean(float("nan")))


def test_clean_drops_accumulated_noise_but_keeps_real_digits():
    """Noise from sums (a few ulps) goes; a real 15-digit value (1/3, a FLOP count) keeps its digits."""
    assert fmt.clean(48.3092480000003) == 48.309248
    assert fmt.clean(0.1 + 0.2) == 0.3
    assert fmt.clean(1 / 3) == 0.333333333333333
    assert fmt.clean(16535907799258.898) == 16535907799258.9


def test_clean_is_idempotent():
    import random
    rng = random.Random(1)
    for _ in range(20000):
        v = rng.random() * 10 ** rng.randint(-8, 14)
        assert fmt.clean(fmt.clean(v)) == fmt.clean(v)
    assert fmt.clean(fmt.clean(0.120597327120001)) == fmt.clean(0.120597327120001)


def test_absurd_magnitudes_read_as_exponents():
    """A corrupt value that slipped past the readers never prints as a 100-digit number (issue 14)."""
    assert fmt.number(1e308) == "1e+308"
    assert fmt.number(-1.23456e20) == "-1.235e+20"
    assert fmt.number(123456789012.5) == "123,456,789,012"
    assert len(fmt.cell(1e308, "ms")) < 12


def test_columns_tagged_together_share_one_unit():
    """Mean / min / max of one quantity read in one unit (the operators table showed Mean and Min in µs beside
    Max in ms); an untagged column keeps its own."""
    from reportgen.render import _table_ctx
    from reportgen.report import Column, Table

    rows = [{"mean_ms": 0.05, "min_ms": 0.04, "max_ms": 25.0, "total_ms": 0.01},
            {"mean_ms": 0.06, "min_ms": 0.03, "max_ms": 30.0, "total_ms": 0.02}]
    cols = [Column("mean_ms", "Mean", "ms", unit_with="call"), Column("min_ms", "Min", "ms", unit_with="call"),
            Column("max_ms", "Max", "ms", unit_with="call"), Column("total_ms", "Total", "ms")]
    ctx = _table_ctx(Table("t", "T", cols, rows))
    units = {c["key"]: c["unit"] for c in ctx["columns"]}
    assert units["mean_ms"] == units["min_ms"] == units["max_ms"]
    # issue 28: every time column of a table reads in one unit (render._table_ctx, fmt.time_unit)
    assert units["total_ms"] == units["max_ms"]


def test_tiny_numbers_read_as_people_write_them():
    """Issue 28 #3: a p-value of 8.272e-25 is written with an exponent (it read 0.000...0008272), and a time below
    the clock's resolution (1 ns; the schema's times are integer ns) is float noise that reads 0 (a delta of
    -8.504e-18 ms was listed as such). table.js writes the rows it adds the same way."""
    assert fmt.number(8.272e-25) == "8.272e-25" and fmt.number(5e-5) == "5e-5" and fmt.number(0.000123456) == "0.0001235"
    assert dict(fmt.evidence({"metric": "x", "chance_p_value": 8.272e-25}))["chance_p_value"] == "8.272e-25"
    assert fmt.cell(-8.504e-18, "ms") == "0" and fmt.quantity(-8.504e-18, "ms") == "0 ms"
    assert fmt.cell(2e-6, "ms", 1e-6) == "2"  # 2 ns in a column shown in ns stays 2
    assert fmt.cell(-8.504e-18, "float") == "-8.504e-18"  # not a time: the number as it is
