import numpy as np
import pandas as pd
import pytest


def test_work_written_twice_on_one_stream_is_dropped_once():
    """Issue 29 #3: the same kernel written twice on one stream (a broken or merged trace) is dropped, the same way
    for every family, and named; items that only overlap are kept as written (programmatic dependent launch on
    Hopper/Blackwell: a real B200 trace has them, and HTA counts them), as are rows without a stream."""
    import pandas as pd

    from reportgen.intervals import repeats_on_one_stream
    from reportgen.model import Run

    df = pd.DataFrame({"rank": [0, 0, 0, 0, 1, 0], "stream": [7, 7, 7, 7, 7, None],
                       "name": ["a", "a", "b", "c", "a", "a"],
                       "start_ms": [0.0, 0.0, 5.0, 6.0, 0.0, 0.0], "dur_ms": [10.0, 10.0, 10.0, 2.0, 10.0, 10.0]})
    out, stats = repeats_on_one_stream(df)
    assert stats == {0: 1} and list(out.index) == [0, 2, 3, 4, 5]  # b and c overlap a: kept as written
    run = Run(name="r", source_format="kineto", source_path="/x")
    run.ranks = [0, 1]
    run.tables["gpu_ops"] = df
    assert len(run.table("gpu_ops")) == 5 and len(run.table("gpu_ops")) == 5  # settled once
    assert [p.path for p in run.problems] == ["rank 0"] and "written twice" in run.problems[0].problem


def test_ascend_device_ops_written_twice_are_dropped_once():
    """The same class on the Ascend device-task table (start in ns): the third one-stream table."""
    import pandas as pd

    from reportgen.model import Run

    df = pd.DataFrame({"rank": [0, 0, 0], "name": ["MatMul", "MatMul", "Add"], "stream": [5, 5, 5],
                       "start_ns": [1000, 1000, 1500], "dur_ms": [0.002, 0.002, 0.001], "op_class": ["c"] * 3})
    run = Run(name="r", source_format="ascend", source_path="/x")
    run.ranks = [0]
    run.tables["device_ops"] = df
    assert run.table("device_ops")["name"].tolist() == ["MatMul", "Add"]
    assert "device_ops: 1 item written twice on one stream" in run.problems[0].problem


def _random_intervals(rng, n):
    import numpy as np

    s = np.round(rng.uniform(0, 100, n), rng.integers(0, 7))
    e = s + np.round(rng.choice([0.0, 0.5, 1.0, 3.7, 10.0], n) * rng.uniform(0, 2, n), 5)
    return s, e


def test_clipped_lengths_are_clip_then_length_of_each_window():
    """intervals.clipped_lengths gives, bit for bit, ``length(*clip(iv, lo, hi))`` of every window: merged lists from
    union, intersect and difference (touching and zero-length rows among the inputs), windows on interval ends,
    outside every interval, empty, inverted, with NaN or infinite ends; and lists that are not merged (unsorted, NaN
    times, an end before its start), which go window by window."""
    import numpy as np

    from reportgen.intervals import clip, clipped_lengths, difference, intersect, length, union

    rng = np.random.default_rng(30)
    checked = 0
    for _ in range(300):
        a = union(*_random_intervals(rng, int(rng.integers(0, 40))))
        b = union(*_random_intervals(rng, int(rng.integers(0, 40))))
        ends = np.concatenate([a[0], a[1], b[0], [0.0, 50.0, 120.0]])
        lo = np.concatenate([rng.uniform(-10, 110, 30), rng.choice(ends, 10), [np.nan, 5.0, -np.inf, 7.0, 60.0]])
        hi = np.concatenate([lo[:30] + rng.uniform(0, 40, 30), rng.choice(ends, 10), [9.0, np.nan, 20.0, np.inf, 50.0]])
        for iv in (a, intersect(a, b), difference(a, b), (np.array([5.0, 1.0, np.nan]), np.array([6.0, 3.0, 2.0])),
                   (np.array([4.0]), np.array([2.0]))):
            want = np.array([length(*clip(iv, l, h)) for l, h in zip(lo, hi)])
            got = clipped_lengths(iv, lo, hi)
            assert got.tobytes() == want.tobytes(), (iv, lo, hi, got, want)
            checked += int((got > 0).sum())
    assert checked > 1000  # windows that kept something


def _breakdown_by_definition(tl, windows, receive):
    """Per rank and window, the breakdown written as its definition (timeline.breakdown's doc): union, clip, length."""
    import numpy as np
    import pandas as pd

    from reportgen.intervals import clip, difference, intersect, length, union
    from reportgen.timeline import BREAKDOWN_COLS, RECEIVE_COLS

    def iv(df):
        return union(df["start_ms"].to_numpy(dtype=float), df["end_ms"].to_numpy(dtype=float))

    rows = []
    for rank, win in windows.groupby("rank"):
        t = tl[tl["rank"] == rank]
        comp, comm = iv(t[t["kind"] == "compute"]), iv(t[t["kind"].isin(["communication", "receive"])])
        both = union(np.concatenate([comm[0], comp[0]]), np.concatenate([comm[1], comp[1]]))
        overlap = intersect(comm, comp)
        bubble_iv = difference(iv(t[t["kind"] == "receive"]), comp)
        for s in win.itertuples():
            w = s.end_ms - s.start_ms
            comm_w, over = length(*clip(comm, s.start_ms, s.end_ms)), length(*clip(overlap, s.start_ms, s.end_ms))
            row = {"rank": rank, "step": s.step, "step_ms": w, "computing_ms": length(*clip(comp, s.start_ms, s.end_ms)),
                   "comm_not_overlapped_ms": comm_w - over, "overlapped_ms": over, "comm_ms": comm_w,
                   "free_ms": w - length(*clip(both, s.start_ms, s.end_ms))}
            if receive:
                bubble = length(*clip(bubble_iv, s.start_ms, s.end_ms))
                row.update(bubble_ms=bubble, stage_ms=w - bubble, comm_not_overlapped_exclude_receive_ms=comm_w - over - bubble)
            rows.append(row)
    df = pd.DataFrame(rows, columns=["rank", "step", "step_ms"] + BREAKDOWN_COLS + RECEIVE_COLS)
    df[RECEIVE_COLS] = df[RECEIVE_COLS].astype(float)
    return df


def test_breakdown_is_its_definition_per_rank_and_window():
    """timeline.breakdown (every rank's rows as array slices, windows measured together) equals, bit for bit and
    dtype for dtype, the breakdown computed rank by rank and window by window from its definition: ranks and windows
    in any order, a rank with windows and no rows, a row without a kind, windows outside the rows, with and without
    receive."""
    import numpy as np
    import pandas as pd

    from reportgen.timeline import breakdown

    rng = np.random.default_rng(7)
    n = 600
    s, e = _random_intervals(rng, n)
    kind = rng.choice(["compute", "communication", "receive", "memcpy"], n).astype(object)
    kind[5] = None
    tl = pd.DataFrame({"rank": rng.choice([3, 0, 1], n), "kind": pd.array(kind, dtype="str"), "start_ms": s,
                       "end_ms": e})
    windows = pd.DataFrame({"rank": [1, 0, 3, 0, 1, 9, 3, 0], "step": [2, 1, 1, 2, 1, 1, 2, 3],
                            "start_ms": [30.0, 0.0, 10.5, 40.25, 0.0, 0.0, 55.0, 200.0],
                            "end_ms": [80.0, 40.25, 55.0, 90.0, 30.0, 10.0, 130.0, 210.0]})
    for receive in (True, False):
        got, want = breakdown(tl, windows, receive=receive), _breakdown_by_definition(tl, windows, receive)
        pd.testing.assert_frame_equal(got, want, check_exact=True)
        assert got["computing_ms"].gt(0).sum() >= 5
    empty = breakdown(tl, windows.iloc[:0], receive=True)
    pd.testing.assert_frame_equal(empty, _breakdown_by_definition(tl, windows.iloc[:0], True))


def _gpu_run(rng, ranks, launch_col, with_events):
    """Random ``gpu_ops`` and ``hta_events`` of several ranks, rows of the ranks interleaved: kernels, NCCL kernels,
    memcpy, syncs without a stream, ns times that round differently to whole µs."""
    names = ["sgemm_kernel", "ncclDevKernel_AllReduce", "Memcpy HtoD", "Event Sync", "elementwise_kernel",
             "ncclKernel_SendRecv"]
    kinds = {"sgemm_kernel": "kernel", "elementwise_kernel": "kernel", "Memcpy HtoD": "memcpy",
             "Event Sync": "kernel", "ncclDevKernel_AllReduce": "comm", "ncclKernel_SendRecv": "comm"}
    n = int(rng.integers(1, 60)) * len(ranks)
    name = rng.choice(names, n)
    ts = rng.integers(10**12, 10**12 + 5_000_000, n)
    dur = rng.integers(0, 400_000, n)
    gpu = pd.DataFrame({"rank": rng.choice(ranks, n), "name": name, "kind": [kinds[x] for x in name],
                        "stream": np.where(name == "Event Sync", -1, rng.integers(0, 3, n)),
                        "correlation": rng.integers(-1, 40, n), "ts_ns": ts, "dur_ns": dur})
    gpu["start_ms"] = (gpu["ts_ns"] - 10**12) / 1e6
    gpu["end_ms"] = (gpu["ts_ns"] + gpu["dur_ns"] - 10**12) / 1e6
    if launch_col:
        gpu["launch_ts_ns"] = np.where(rng.random(n) < 0.2, np.iinfo(np.int64).max, ts - rng.integers(0, 9000, n))
    if not with_events:
        return gpu, None
    m = int(rng.integers(0, 30)) * len(ranks)
    role = rng.choice(["gpu", "mark", "launch", "cpu"], m)
    ev = pd.DataFrame({"rank": rng.choice(ranks + [max(ranks) + 1], m), "role": role,
                       "name": np.where(role == "mark", rng.choice(["ProfilerStep#1", "ProfilerStep#2"], m),
                                        rng.choice(names, m)),
                       "stream": np.where(role == "gpu", rng.integers(-1, 3, m), -1),
                       "correlation": rng.integers(-1, 40, m), "ts_ns": rng.integers(10**12, 10**12 + 5_000_000, m),
                       "dur_ns": rng.integers(0, 100_000, m)})
    if launch_col and rng.random() < 0.5:
        ev["launch_ts_ns"] = np.iinfo(np.int64).max
    return gpu, ev


def _hta_reference(gpu, events, drop_last_step):
    """HTA 0.5's per-rank temporal breakdown as reportgen computed it from one rank's frames before the per-rank
    arrays (written out here: the reference the by-rank pass and the one-rank function are checked against)."""
    from reportgen.intervals import HTA_COMM, HTA_DEVICE_SYNC, HTA_NOT_COMPUTE, _hta_numbers

    no_launch = np.iinfo(np.int64).max
    cols = ["name", "stream", "correlation", "ts_ns", "dur_ns"]
    launch_col = "launch_ts_ns" in gpu or (events is not None and "launch_ts_ns" in events)

    def pick(df):
        out = df[cols]
        if launch_col:
            out = out.assign(launch_ts_ns=df["launch_ts_ns"].to_numpy(np.int64) if "launch_ts_ns" in df
                             else np.full(len(df), no_launch, dtype=np.int64))
        return out

    parts = [pick(gpu)]
    h = events if events is not None else pd.DataFrame(columns=["role"] + cols)
    if (h["role"] == "gpu").any():
        parts.append(pick(h.loc[h["role"] == "gpu"]))
    rows = pd.concat(parts, ignore_index=True)
    ts = -((-rows["ts_ns"].to_numpy(np.int64)) // 1000)
    end = (rows["ts_ns"] + rows["dur_ns"]).to_numpy(np.int64) // 1000
    stream, corr = rows["stream"].to_numpy(np.int64), rows["correlation"].to_numpy(np.int64)
    keep = np.ones(len(rows), dtype=bool)
    if drop_last_step:
        marks = h[h["role"] == "mark"]
        if marks.empty:
            return {}
        last = int((-((-marks["ts_ns"].to_numpy(np.int64)) // 1000)).max())
        gpu_row = ((stream >= 0) & (corr >= 0)) | rows["name"].isin(HTA_DEVICE_SYNC).to_numpy()
        other = h[h["role"] != "gpu"]
        cpu_ts = np.concatenate([ts[~gpu_row], -((-other["ts_ns"].to_numpy(np.int64)) // 1000)])
        cpu_corr = np.concatenate([corr[~gpu_row], np.where(other["role"] == "mark", -1,
                                                            other["correlation"].to_numpy(np.int64))])
        kept = np.isin(corr, np.unique(cpu_corr[cpu_ts < last]))
        if launch_col:
            kept |= -((-rows["launch_ts_ns"].to_numpy(np.int64)) // 1000) < last
        keep = np.where(gpu_row, kept, ts < last)
    keep &= stream != -1
    if not keep.any():
        return {}
    names = rows["name"].to_numpy()[keep]
    comm_mask = np.array([bool(HTA_COMM.match(n)) for n in names], dtype=bool)
    comp_mask = np.array([not HTA_NOT_COMPUTE.match(n) for n in names], dtype=bool)
    return _hta_numbers(ts[keep], end[keep], comp_mask, comm_mask)  # the rows kept and their classes: the numbers


def test_gpu_time_by_rank_is_each_ranks_metrics():
    """The overlap section's per-rank GPU time (one pass over the columns, ranks as slices) gives, for every rank,
    exactly what gpu_time_metrics gives on that rank's rows and what HTA's rules (written out in _hta_reference, as
    they were computed from each rank's frames) give on its rows and events; so does hta_gpu_time_metrics of one
    rank (rows of the ranks interleaved, a rank without events, events of a rank without GPU ops, with and without
    launch times and the last-step rule)."""
    from reportgen.intervals import gpu_time_by_rank, gpu_time_metrics, hta_gpu_time_metrics

    rng = np.random.default_rng(7)
    checked = 0
    for case in range(120):
        ranks = sorted(rng.choice(np.arange(9), int(rng.integers(1, 5)), replace=False).tolist())
        gpu, ev = _gpu_run(rng, ranks, launch_col=bool(case % 2), with_events=case % 3 != 0)
        drop = ev is not None and bool(case % 5)
        got = gpu_time_by_rank(gpu, ev, drop)
        assert [r for r, _, _ in got] == sorted(set(gpu["rank"]))
        for r, ours, hta in got:
            g = gpu[gpu["rank"] == r]
            e = None if ev is None else ev[ev["rank"] == r]
            assert ours == gpu_time_metrics(g)  # == on dicts of floats: the same floats (NaN aside)
            want = _hta_reference(g, e, drop)
            for one in (hta, hta_gpu_time_metrics(g, e, drop)):
                assert one.keys() == want.keys()
                for k in want:
                    assert one[k] == want[k] or (one[k] != one[k] and want[k] != want[k]), (case, r, k)
            checked += bool(want)
    assert checked > 100


def test_repeats_found_among_the_rows_that_share_their_numbers():
    """repeats_on_one_stream looks at names only among the rows that share rank, stream, start and duration with
    another row: the same rows dropped as a duplicated() over all five columns (NaN equal to NaN, text streams)."""
    import numpy as np
    import pandas as pd

    from reportgen.intervals import repeats_on_one_stream

    rng = np.random.default_rng(11)
    for trial in range(30):
        n = int(rng.integers(1, 300))
        df = pd.DataFrame({"rank": rng.integers(0, 3, n), "stream": rng.choice([7, 8, None] if trial % 2 else
                                                                               ["s1", "s2", None], n),
                           "name": rng.choice(["a", "b", "c"], n), "start_ms": rng.choice([0.0, 1.5, np.nan, 3.0], n),
                           "dur_ms": rng.choice([1.0, 2.0, np.nan], n)})
        has = df["stream"].notna()
        d = df.loc[has, ["rank", "stream", "name", "start_ms", "dur_ms"]]
        rep = d.duplicated(keep="first")
        out, stats = repeats_on_one_stream(df)
        want = df.drop(index=d.index[rep]) if rep.any() else df
        pd.testing.assert_frame_equal(out, want)
        assert stats == ({int(r): int(c) for r, c in d.loc[rep, "rank"].value_counts().items()} if rep.any() else {})


def test_repeats_on_numeric_streams_are_found_through_their_hash():
    """On numeric columns the rows that may repeat are found by one 64-bit hash of rank, stream, start and duration
    (intervals._maybe_same_rows): the same rows dropped as pandas' duplicated(), -0.0 equal to 0.0 and NaN to NaN."""
    import numpy as np
    import pandas as pd

    from reportgen.intervals import _maybe_same_rows, repeats_on_one_stream

    rng = np.random.default_rng(13)
    for trial in range(60):
        n = int(rng.integers(1, 300))
        df = pd.DataFrame({"rank": rng.integers(0, 3, n), "stream": rng.integers(6, 9, n).astype(float if trial % 2
                                                                                                  else np.int64),
                           "name": rng.choice(["a", "b"], n), "start_ns": rng.integers(0, 5, n),
                           "dur_ms": rng.choice([0.0, -0.0, 1.0, np.nan], n)})
        if trial % 2:
            df.loc[rng.integers(0, n, 3), "stream"] = np.nan
        cols = ["rank", "stream", "start_ns", "dur_ms"]
        d = df.loc[df["stream"].notna()]
        assert not (d[cols].duplicated(keep=False).to_numpy() & ~_maybe_same_rows(d, cols)).any()
        d = d[["rank", "stream", "name", "start_ns", "dur_ms"]]
        rep = d.duplicated(keep="first")
        out, stats = repeats_on_one_stream(df)
        pd.testing.assert_frame_equal(out, df.drop(index=d.index[rep]) if rep.any() else df)
        assert stats == ({int(r): int(c) for r, c in d.loc[rep, "rank"].value_counts().items()} if rep.any() else {})


def test_union_is_the_same_whatever_the_order_of_the_rows():
    """HTA's whole-µs rounding makes a sub-µs op an interval that ends before it starts (ceil(ts) > floor(ts + dur));
    with another interval starting in the same µs, the merge by start alone depended on which of the two came first
    (HTA leaves it to an unstable sort; we took the trace's order). Now equal starts go the longest first: such an op
    inside a longer one adds nothing, one alone stays a negative interval (HTA's), and any order gives one union."""
    from reportgen.intervals import hta_gpu_time_metrics, union

    s, e = np.array([6, 6, 0, 10]), np.array([5, 20, 3, 9])  # [6, 5] inside [6, 20]; [10, 9] inside it too
    for order in ([0, 1, 2, 3], [1, 0, 3, 2], [3, 2, 1, 0]):
        ms, me = union(s[order], e[order])
        assert ms.tolist() == [0, 6] and me.tolist() == [3, 20]
    ms, me = union(np.array([6, 0]), np.array([5, 3]))  # alone: a negative interval, as HTA's merge gives
    assert ms.tolist() == [0, 6] and me.tolist() == [3, 5]
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(1, 30))
        starts = rng.integers(0, 12, n)
        ends = starts + rng.integers(-1, 4, n)  # some end a µs before they start
        want = union(starts, ends)
        p = rng.permutation(n)
        got = union(starts[p], ends[p])
        assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    # the same through HTA's numbers: a 0.5 µs kernel at 5.2 µs and a 14 µs one at 5.9 µs both start at µs 6
    gpu = pd.DataFrame({"name": ["k_short", "k_long", "k_first"], "stream": 7, "correlation": [2, 3, 1],
                        "ts_ns": [5_200, 5_900, 0], "dur_ns": [500, 14_100, 2_000]})
    m = hta_gpu_time_metrics(gpu)
    assert hta_gpu_time_metrics(gpu.iloc[[1, 0, 2]]) == m and hta_gpu_time_metrics(gpu.iloc[[2, 1, 0]]) == m
    assert m["idle_ms"] * 1e3 == pytest.approx(4.0) and m["kernel_span_ms"] * 1e3 == pytest.approx(20.0)
