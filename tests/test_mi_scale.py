"""MindSpore Insight and the family-independent analysis at many ranks (issue 15): the vectorised forms give the
same numbers as the per-rank definitions they replace, the reader's one-frame-per-table assembly equals the
per-rank frames concatenated, and a generated run stays within a memory bound. No timed assertion: speed is
shown by the bench/ scripts."""

from __future__ import annotations

import glob
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from reportgen import timeline
from reportgen.readers import read_run
from reportgen.readers.mindinsight_flops import parse_flops_summary
from reportgen.readers.mindinsight_hccl import COLUMNS, frame, parse_hccl_columns, parse_hccl_raw
from reportgen.readers.mindinsight_memory import parse_memory_summary
from reportgen.sections.trajectory import _leave_one_out_median
from reportgen.synth import MindInsightSpec, write_mindinsight_run


@pytest.fixture(scope="module")
def run32(tmp_path_factory):
    root = tmp_path_factory.mktemp("mi32") / "run"
    write_mindinsight_run(root, MindInsightSpec(hosts=4, devices_per_host=8, steps=4, slow_fp_bp={5: 1.4}))
    return root


def test_leave_one_out_median_is_the_median_of_the_others():
    rng = np.random.default_rng(0)
    for _ in range(500):
        n = int(rng.integers(1, 12))
        v = rng.integers(0, 5, n).astype(float) * rng.choice([1.0, 0.1, 1 / 3])  # ties and inexact floats
        if rng.random() < 0.3:
            v[rng.integers(0, n)] = np.nan
        s = pd.Series(v)
        want = np.array([s.drop(i).median() if not np.isnan(v[i]) else np.nan for i in range(n)])
        np.testing.assert_array_equal(_leave_one_out_median(v), want)


@pytest.mark.parametrize("values", [
    pd.Series(["stream_1_2_Receive-op1", None, "AllReduce-op3", "stream_1_2_Receive-op1", np.nan]),
    pd.Series([3, 1, 3, 2]), pd.Series([1.0, np.nan, 1.0]), pd.Series(["a", "b"], dtype=object), pd.Series([], dtype=str)])
def test_per_value_equals_the_function_on_every_row(values):
    for f in (lambda n: n.astype(str).str.contains("Receive"), lambda v: "stream " + v.astype(str),
              lambda n: n.astype(str).str.replace(r"^stream_\d+_\d+_", "", regex=True)):
        pd.testing.assert_series_equal(timeline.per_value(values, f), f(values))


def test_assign_steps_equals_the_per_rank_search():
    rng = np.random.default_rng(1)
    win = pd.DataFrame([(r, s, s * 10.0 + r, s * 10.0 + r + 8) for r in (5, 0, 3) for s in (3, 1, 2)],
                       columns=timeline.WINDOW_COLUMNS)  # unsorted, rank 7 has no window
    df = pd.DataFrame({"rank": rng.choice([0, 3, 5, 7], 300), "start_ms": rng.uniform(-5, 45, 300)})
    want = np.full(len(df), -1)
    for i, (r, t) in enumerate(zip(df["rank"], df["start_ms"])):
        hit = win[(win["rank"] == r) & (win["start_ms"] <= t) & (t < win["end_ms"])]
        if len(hit):
            want[i] = hit["step"].iloc[0]
    np.testing.assert_array_equal(timeline.assign_steps(df, win), want)


def test_hccl_tables_of_many_ranks_equal_the_per_rank_frames(run32):
    files = sorted(glob.glob(str(run32 / "**" / "hccl_raw_*.csv"), recursive=True))[:6]
    parts = {name: ([], []) for name in COLUMNS}
    for rank, path in enumerate(files):
        cols = parse_hccl_columns(path, rank, [])["columns"]
        for name, df in parse_hccl_raw(path, rank, [])["tables"].items():
            parts[name][0].append(df)
            parts[name][1].append(cols[name])
    for name, (frames, columns) in parts.items():
        pd.testing.assert_frame_equal(frame(name, columns), pd.concat(frames, ignore_index=True), check_exact=True)
    links = frame("links", parts["links"][1])
    assert links["op"].dtype == object and links["op"].isna().any() and links["op"].map(type).eq(str).any()


def test_reader_tables_equal_the_per_rank_parsers(run32):
    run = read_run(run32)
    files = run.tables["files"]

    def each(kind: str):  # (path, rank) in the reader's file order
        f = files[files["kind"] == kind]
        return list(zip(f["path"], f["rank"]))

    for table, kind, parse, name in (("mi_links", "hccl_raw", parse_hccl_raw, "links"),
                                     ("mi_comm_ops", "hccl_raw", parse_hccl_raw, "comm_ops"),
                                     ("mi_flops", "flops_summary", parse_flops_summary, "mi_flops"),
                                     ("mi_memory_summary", "memory_usage_summary", parse_memory_summary,
                                      "mi_memory_summary")):
        frames = [(parse(p, r, [])["tables"] if kind == "hccl_raw" else parse(p, r, []))[name] for p, r in each(kind)]
        assert len(frames) == 32
        pd.testing.assert_frame_equal(run.tables[table], pd.concat(frames, ignore_index=True), check_exact=True)


def test_derived_timeline_equals_the_per_rank_definition(run32):
    from reportgen.intervals import difference, union

    run = read_run(run32)
    tl = run.table("device_timeline")
    got = tl[tl["source"] == "derived"]
    so, st = run.table("step_ops"), run.table("step_trace")
    for rank in (0, 5, 31):
        c = so[so["rank"] == rank]
        s = st[st["rank"] == rank]
        fp = (s["start_ms"] + s["step_interval_ms"]).to_numpy()
        comp = difference(union(fp, fp + s["fp_bp_ms"].to_numpy()), union(c["start_ms"].to_numpy(), c["end_ms"].to_numpy()))
        mine = got[got["rank"] == rank].sort_values("start_ms")
        np.testing.assert_array_equal(mine["start_ms"].to_numpy(), comp[0])
        np.testing.assert_array_equal(mine["end_ms"].to_numpy(), comp[1])


def test_slow_compute_found_at_scale(run32):
    from reportgen.sections import trajectory

    a = trajectory.analyze(read_run(run32))
    assert [d["rank"] for d in a.data["slow_compute"]] == [5]


def test_memory_bound_of_a_generated_run(tmp_path):
    """Reading and analysing 128 generated ranks x 4 steps stays under 1 GB peak RSS (a separate process)."""
    root = tmp_path / "run"
    write_mindinsight_run(root, MindInsightSpec(hosts=16, devices_per_host=8, steps=4))
    code = textwrap.dedent(f"""
        from reportgen.readers import read_run
        from reportgen.sections import run_sections
        run = read_run({str(root)!r})
        assert all(o.status != "error" for o in run_sections(run))
        # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec (a child of a big pytest worker reports its peak)
        print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM")))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert int(out.stdout.split()[-1]) < 1024 * 1024  # kB
