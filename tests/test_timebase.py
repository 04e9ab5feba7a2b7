"""Exact time base (model doc, "Time base"): the parser, shift-invariance of every report, exact nesting.

(a) Every Kineto and Ascend fixture of tests/test_golden.py (plus the single-rank TraceLens MI300X and SGLang
    traces), copied with every timestamp shifted by +1.7e15 µs (+1.7e18 ns where the file writes ns) using exact
    text / integer arithmetic, gives the same metrics JSON as the original, up to float formatting: the copies are
    made here (:func:`shifted_copy`), the test is test_golden.py's test_shifting_every_timestamp_changes_no_number
    (the original's metrics are those its golden test computed already).
(b) Eight identical ranks with epoch-µs times whose aten::linear and aten::addmm end in the same µs get the same
    FLOPs (issue 12: one rank got +8.7% when the nesting test compared rounded float ms).
(c) timebase.to_ns / column_ns on every form a profiler writes.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
import shutil
import sqlite3
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reportgen import metrics
from reportgen.model import rel_ms
from reportgen.readers import read_run
from reportgen.sections import run_sections
from reportgen.synth.kineto import write_nested_ops_run
from reportgen.timebase import column_ns, origin, to_ns, to_rel_ms

from conftest import fixture_dir
from test_golden import SHIFT_CASES

SHIFT_US = 1_700_000_000_000_000
SHIFT_NS = SHIFT_US * 1000

# ------------------------------------------------------------------------------------------------ (c) parser


@pytest.mark.parametrize("value,unit,expected", [
    (1704458676522690, 1000, 1704458676522690000),          # integer epoch µs
    ("1704458676522690.655", 1000, 1704458676522690655),    # Kineto / Ascend: 3 decimals (a float keeps .75)
    (" 1736408883688177.930\t", 1000, 1736408883688177930),  # Ascend: trailing tab
    ("12.5", 1000, 12500), ("5.", 1000, 5000), (".5", 1000, 500), ("+3.1", 1000, 3100),  # fewer decimals
    ("1.2345678", 1000, 1235), ("1704458676522690.6555", 1000, 1704458676522690656),  # more: half up
    ("0.0005", 1000, 1), ("-0.0005", 1000, 0), ("-0.0015", 1000, -1),  # half up = floor(x + 1/2) under shifts too
    ("-1.5", 1000, -1500), (-7, 1000, -7000),                # negative
    ("1e3", 1000, 1_000_000), ("-1.2345e2", 1000, -123450), ("1.7045E+15", 1000, 1704500000000000000),  # exponent
    (12.5, 1000, 12500), (4458676522690.655, 1000, 4458676522690655),  # floats: through their shortest repr
    (1162412079349, 10, 11624120793490),                     # MindInsight 10-ns ticks
    (1736410576284680000, 1, 1736410576284680000),           # DB ns
    ("abc", 1000, None), ("", 1000, None), (None, 1000, None), (True, 1000, None), (float("nan"), 1000, None),
    ("N/A", 1000, None), ([1], 1000, None), ("1" * 30, 1000, None),  # beyond int64 ns
])
def test_to_ns(value, unit, expected):
    assert to_ns(value, unit) == expected


def test_column_ns_matches_to_ns_and_keeps_missing():
    cells = ["1700000000000000.123", "N/A", "", "5", "-1.5", "1e1", "1.23456", "+2", " 7.25 ", "x", "0.000"]
    got = column_ns(pd.Series(cells, dtype=str))
    assert got.dtype == "Int64"
    assert [None if v is pd.NA else int(v) for v in got] == [to_ns(c) for c in cells]
    ints = column_ns(pd.Series([1, 2], dtype="int64"), 1)
    assert ints.tolist() == [1, 2] and ints.dtype == "Int64"
    assert column_ns(pd.Series([1.5, np.nan])).tolist()[0] == 1500 and column_ns(pd.Series([np.nan])).isna().all()


def test_rel_ms_and_origin_are_exact_under_shifts():
    t = np.array([1704458676522690655, 1704458676522690656, 1704458676522791000], dtype=np.int64)
    for shift in (0, SHIFT_NS):
        ms = rel_ms(t + shift, origin(t + shift))
        assert ms.tolist() == [0.0, 1e-6, (1704458676522791000 - 1704458676522690655) / 1e6]
    df = pd.DataFrame({"start_ns": pd.array([5, None], dtype="Int64"), "x": [1, 2]})
    out = to_rel_ms(df, 5)
    assert list(out.columns) == ["start_ms", "x"] and out["start_ms"].iloc[0] == 0.0 and math.isnan(out["start_ms"].iloc[1])


# ------------------------------------------------------------------------------------------------ (a) shifts

_NUM = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_JSON_TIME = re.compile(r'("(?:ts|Start Timestamp\(us\))"\s*:\s*"?\s*)(' + _NUM + ")")
_CSV_TIME = re.compile(r"(?i)^(timestamp|start time|end time|allocation time|release time)\s*\((us|ns)\)$")
_DB_TIME = re.compile(r"(?i)^(startNs|endNs|timestampNs|timestamp|startTimeNs|endTimeNs|allocationTime|releaseTime|"
                      r"activeReleaseTime|start_timestamp)$")


def _plus(text: str, shift: int) -> str:
    """Exact decimal text + an integer, keeping the written decimals (Decimal arithmetic, never a float)."""
    return format(Decimal(text) + shift, "f")


def _shift_json(text: str) -> str:
    return _JSON_TIME.sub(lambda m: m.group(1) + _plus(m.group(2), SHIFT_US), text)


def _shift_csv(text: str) -> str:
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows:
        return text
    cols = {i: (SHIFT_US if m.group(2).lower() == "us" else SHIFT_NS)
            for i, h in enumerate(rows[0]) if (m := _CSV_TIME.match(h.strip().lstrip("\ufeff")))}
    if not cols:
        return text
    for r in rows[1:]:
        for i, shift in cols.items():
            if i < len(r) and re.fullmatch(r"\s*" + _NUM + r"\s*", r[i]):
                r[i] = r[i].replace(r[i].strip(), _plus(r[i].strip(), shift))
    out = io.StringIO(newline="")
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def _shift_db(path: Path) -> None:
    """Every time column shifted (ns by 1.7e18, analysis.db's µs start_timestamp by 1.7e15). A REAL value is
    shifted as the decimal text of the double and stored as TEXT (SQLite would round it back to a float)."""
    con = sqlite3.connect(path)
    try:
        for (table,) in con.execute("SELECT name FROM sqlite_master WHERE type='table'").fetchall():
            info = con.execute(f'PRAGMA table_info("{table}")').fetchall()
            cols = [c[1] for c in info if _DB_TIME.match(c[1])]
            if not cols:
                continue
            shift = {c: SHIFT_US if c.lower() == "start_timestamp" else SHIFT_NS for c in cols}
            names = [c[1] for c in info]
            rows = con.execute(f'SELECT rowid, * FROM "{table}"').fetchall()
            new = []
            for row in rows:
                vals = list(row[1:])
                for i, n in enumerate(names):
                    v = vals[i]
                    if n in shift and v is not None and not (isinstance(v, str) and not v.strip()):
                        vals[i] = v + shift[n] if type(v) is int else _plus(repr(v) if isinstance(v, float) else v,
                                                                            shift[n])
                new.append(vals)
            decl = ", ".join(f'"{n}" {"" if n in shift else (c[2] or "")}' for n, c in zip(names, info))
            con.execute(f'ALTER TABLE "{table}" RENAME TO "{table}__old"')
            con.execute(f'CREATE TABLE "{table}" ({decl})')  # time columns without type: values kept as given
            con.executemany(f'INSERT INTO "{table}" VALUES ({", ".join("?" * len(names))})', new)
            con.execute(f'DROP TABLE "{table}__old"')
        con.commit()
    finally:
        con.close()


def shifted_copy(src: Path, dst: Path) -> Path:
    """A copy of a fixture tree with every timestamp the readers use shifted by +1.7e15 µs."""
    shutil.copytree(src, dst)
    for p in sorted(dst.rglob("*")):
        if not p.is_file():
            continue
        name = p.name.lower()
        if name.endswith((".json", ".json.gz")):
            gz = name.endswith(".gz")
            data = gzip.decompress(p.read_bytes()) if gz else p.read_bytes()
            text = _shift_json(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
            p.write_bytes(gzip.compress(text, mtime=0) if gz else text)
        elif name.endswith(".csv"):
            p.write_text(_shift_csv(p.read_text(encoding="utf-8", errors="surrogateescape")),
                         encoding="utf-8", errors="surrogateescape")
        elif name.endswith((".db", ".dat")) and p.read_bytes()[:16] == b"SQLite format 3\x00":
            _shift_db(p)
    return dst


def _doc(root: Path) -> dict:
    run = read_run(root)
    text = metrics.dumps(metrics.build(run, run_sections(run)))
    return json.loads(text.replace(json.dumps(str(root))[1:-1], "<root>"))


def diff(a, b, path="$"):
    if isinstance(a, float) or isinstance(b, float):
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float)) and math.isclose(a, b, rel_tol=1e-12)):
            yield f"{path}: {a!r} != {b!r}"
    elif isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                yield f"{path}.{k}: only in one"
            else:
                yield from diff(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            yield from diff(x, y, f"{path}[{i}]")
    elif a != b:
        yield f"{path}: {str(a)[:80]!r} != {str(b)[:80]!r}"


def test_the_shifted_copies_really_are_shifted(tmp_path):
    """The shift helper moves every reader-visible time (not a vacuous pass): the run origins differ by 1.7e18 ns."""
    for parts in (SHIFT_CASES["kineto_hta_nccl_data"], SHIFT_CASES["ascend_db_level1_2rank"],
                  SHIFT_CASES["ascend_text_level2_2rank"]):
        src = fixture_dir(*parts)
        a, b = read_run(src), read_run(shifted_copy(src, tmp_path / parts[-1]))
        assert b.time_origin_ns - a.time_origin_ns == SHIFT_NS
        for name in ("kernels", "memory_record", "operator_memory", "comm_ops"):  # lazily parsed tables too
            ta, tb = a.table(name), b.table(name)
            if ta is not None:
                pd.testing.assert_frame_equal(ta, tb, check_exact=True)


# ------------------------------------------------------------------------------------------------ (b) nesting


@pytest.mark.parametrize("ns_decimals", [False, True])
def test_identical_ranks_get_the_same_flops(tmp_path, ns_decimals):
    truth = write_nested_ops_run(tmp_path, ns_decimals=ns_decimals)
    run = read_run(tmp_path)
    doc = json.loads(metrics.dumps(metrics.build(run, run_sections(run, only=["flops"]))))
    per_rank = doc["sections"]["flops"]["tables"]["per_rank"]
    assert [r["rank"] for r in per_rank] == list(range(truth["ranks"]))
    assert {r["flops"] for r in per_rank} == {truth["flops_per_rank"]}
    from reportgen.flopcount import NESTED  # nested ops: op_flops rows noted NESTED (issue 25)

    assert doc["sections"]["flops"]["metrics"]["ops_not_counted"][NESTED] == {"aten::linear": 3 * 16 * 8}


def test_origin_from_lazy_files_only(tmp_path):
    """Ascend text output without trace_view.json / communication.json: only the lazily parsed CSVs carry times; the
    origin comes from their first rows, and the report is still shift-invariant."""
    src = tmp_path / "src" / "level0"
    shutil.copytree(fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "text", "level0"), src)
    for p in src.rglob("trace_view.json"):
        p.unlink()
    run = read_run(src)
    assert "trace_steps" not in run.tables
    firsts = []
    for name, col in (("kernel_details.csv", "Start Time(us)"), ("memory_record.csv", "Timestamp(us)"),
                      ("npu_module_mem.csv", "Timestamp(us)"), ("operator_memory.csv", "Allocation Time(us)")):
        for p in src.rglob(name):
            rows = list(csv.DictReader(p.open(encoding="utf-8-sig")))[:64]
            firsts += [to_ns(r[col]) for r in rows if to_ns(r[col]) is not None]
    assert run.time_origin_ns == min(firsts)
    assert run.table("kernels")["start_ms"].notna().all()
    ref = _doc(src)
    got = _doc(shifted_copy(src, tmp_path / "shifted" / "level0"))
    assert not list(diff(got, ref))
