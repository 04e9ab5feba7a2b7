"""Kineto at scale (issue 15): the batched forms give what the per-rank forms gave, on random data.

The reader once built a DataFrame per rank and table, filtered all GPU ops per rank for the preparing time and
masked every row per rank to assign steps; these tests keep those per-rank forms as naive references and check
that the batched code gives identical tables. No timing here (bench/ measures speed); one resource bound.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from reportgen.model import rel_ms
from reportgen.readers import kineto
from reportgen.readers.kineto_decode import DecodedTrace
from reportgen.timeline import assign_steps

from conftest import traced_peak

ROOT = Path(__file__).resolve().parents[1]


def _windows(rng, ranks, steps):
    rows = []
    for r in ranks:
        t = float(rng.uniform(0, 5))
        for s in range(steps):
            w = float(rng.uniform(1, 3))
            rows.append({"rank": r, "step": 10 + s, "start_ms": t, "end_ms": t + w})
            t += w + float(rng.uniform(0, 0.5))  # gaps between steps: some ops fall outside every step
    return pd.DataFrame(rows)


def _naive_assign(df, windows, col="start_ms"):
    out = np.full(len(df), -1, dtype=np.int64)
    for i, (r, t) in enumerate(zip(df["rank"], df[col])):
        w = windows[(windows["rank"] == r) & (windows["start_ms"] <= t) & (t < windows["end_ms"])]
        if len(w):
            out[i] = w.sort_values("start_ms")["step"].iloc[-1]
    return out


@pytest.mark.parametrize("seed", range(5))
def test_assign_steps_matches_a_per_row_search(seed):
    rng = np.random.default_rng(seed)
    ranks = rng.permutation(12)[:9]
    win = _windows(rng, ranks[:7], 4)  # two ranks without windows
    n = 400
    df = pd.DataFrame({"rank": rng.choice(ranks, n), "start_ms": rng.uniform(-1, 20, n)}).sample(frac=1,
                                                                                                 random_state=seed)
    assert assign_steps(df, win).tolist() == _naive_assign(df, win).tolist()


def _naive_preparing(bd, steps, gpu, ranks):
    """The former per-rank loop of step_breakdown (a filter of every GPU op per rank)."""
    bd = bd.copy()
    bd["preparing_ms"] = math.nan
    win = bd[["rank", "step"]].merge(steps, on=["rank", "step"], how="left")
    for rank in ranks:
        m = (win["rank"] == rank).to_numpy()
        first = np.sort(gpu.loc[gpu["rank"] == rank, "start_ms"].to_numpy())
        w0, w1 = win.loc[m, "start_ms"].to_numpy(), win.loc[m, "end_ms"].to_numpy()
        i = np.searchsorted(first, w0, side="left")
        f = first[np.minimum(i, len(first) - 1)]
        bd.loc[m, "preparing_ms"] = np.where((i < len(first)) & (f < w1), f - w0, math.nan)
    return bd["preparing_ms"].to_numpy()


@pytest.mark.parametrize("seed", range(5))
def test_preparing_matches_the_per_rank_loop(seed):
    rng = np.random.default_rng(100 + seed)
    steps = _windows(rng, list(range(8)), 5)
    bd = steps[["rank", "step"]].sample(frac=1, random_state=seed).reset_index(drop=True)
    n = 300
    gpu = pd.DataFrame({"rank": rng.choice(np.arange(8), n), "start_ms": rng.uniform(0, 25, n)})
    gpu.loc[rng.random(n) < 0.05, "start_ms"] = math.nan  # an op without a start sorts last, as before
    ranks = {0, 2, 3, 5, 7, 11}  # 11: a loader rank without windows
    got = kineto._preparing(bd, steps, gpu, ranks)
    np.testing.assert_array_equal(got, _naive_preparing(bd, steps, gpu, ranks))


# ---- the run-model tables: stacked and converted once vs the former DataFrame per rank and table

def _naive_ranked_ms(df, rank, t0):
    df = df.copy()
    df.insert(0, "rank", rank)
    ts, dur = df.pop("ts_ns"), df.pop("dur_ns")
    df["start_ms"] = rel_ms(ts, t0)
    df["dur_ms"] = dur / 1e6
    df["end_ms"] = rel_ms(ts + dur, t0)
    return df


def _naive_rank_tables(rank, t, t0):
    out = {}
    steps = t.get("steps")
    if steps is not None:
        out["trace_steps"] = pd.DataFrame({"rank": rank, "step": steps["step"].astype(int),
                                           "start_ms": rel_ms(steps["ts_ns"], t0),
                                           "end_ms": rel_ms(steps["ts_ns"] + steps["dur_ns"], t0)})
    g = t.get("gpu_ops")
    if g is not None:
        out["gpu_ops"] = pd.DataFrame({"rank": rank, "name": g["name"], "kind": g["kind"], "stream": g["stream"],
                                       "start_ms": rel_ms(g["ts_ns"], t0), "dur_ms": g["dur_ns"] / 1e6,
                                       "end_ms": rel_ms(g["ts_ns"] + g["dur_ns"], t0),
                                       "correlation": g.get("correlation", -1),
                                       "ts_ns": g["ts_ns"], "dur_ns": g["dur_ns"]})
    c = t.get("collectives")
    if c is not None:
        df = _naive_ranked_ms(c, rank, t0)
        for col in ("in_bytes", "out_bytes"):
            df[col.replace("_bytes", "_mb")] = df.pop(col) / 1e6
        out["collectives"] = df
    m = t.get("memory")
    if m is not None:
        out["memory_events"] = pd.DataFrame({
            "rank": rank, "ts_ms": rel_ms(m["ts_ns"], t0), "device_type": m["device_type"],
            "device_id": m["device_id"], "allocated_mb": m["total_allocated"] / 1e6,
            "reserved_mb": m["total_reserved"] / 1e6})
    if t.get("cpu_ops") is not None:
        out["cpu_ops"] = _naive_ranked_ms(t["cpu_ops"], rank, t0)
    if t.get("hta_events") is not None:
        out["hta_events"] = t["hta_events"].assign(rank=rank)
    if t.get("host_ops") is not None:
        out["host_ops"] = _naive_ranked_ms(t["host_ops"], rank, t0)
    if t.get("dataloader") is not None:
        out["dataloader"] = _naive_ranked_ms(t["dataloader"], rank, t0)[["rank", "name", "start_ms", "dur_ms"]]
    return out


def _random_decoded(rng, n_ops):
    def times(n):
        ts = 1_795_303_600_000_000_000 + np.sort(rng.integers(0, 10 ** 10, n))
        return ts, rng.integers(0, 10 ** 7, n)

    tables = {}
    ts, dur = times(n_ops)
    tables["gpu_ops"] = pd.DataFrame({"name": rng.choice(["gemm", "nccl_ar", "memcpy"], n_ops),
                                      "kind": rng.choice(["kernel", "comm", "memcpy"], n_ops), "ts_ns": ts,
                                      "dur_ns": dur, "stream": rng.integers(0, 30, n_ops),
                                      "device": 0, "correlation": rng.integers(-1, 999, n_ops)})
    if rng.random() < 0.3:
        tables["gpu_ops"] = tables["gpu_ops"].drop(columns="correlation")  # filled with -1, as before
    k = int(rng.integers(1, 20))
    ts, dur = times(k)
    tables["collectives"] = pd.DataFrame({"source": "gpu_kernel", "name": "nccl", "ts_ns": ts, "dur_ns": dur,
                                          "tid": 7, "collective": "all_reduce", "in_nelems": 4, "out_nelems": 4,
                                          "dtype": "Float", "elem_bytes": 4.0,
                                          "in_bytes": rng.uniform(0, 1e9, k), "out_bytes": rng.uniform(0, 1e9, k),
                                          "group_name": "0", "group_desc": "default_pg", "group_ranks": "[0]",
                                          "group_size": 8, "seq": np.arange(k), "src_rank": -1, "dst_rank": -1})
    ts, dur = times(3)
    tables["steps"] = pd.DataFrame({"step": [1, 2, 3], "ts_ns": ts, "dur_ns": dur})
    ts, _ = times(5)
    tables["memory"] = pd.DataFrame({"ts_ns": ts, "device_type": 1, "device_id": 0, "bytes": 1.0,
                                     "total_allocated": rng.uniform(0, 1e10, 5), "total_reserved": 2e10})
    for name in ("cpu_ops", "host_ops", "dataloader"):
        if rng.random() < 0.7:
            ts, dur = times(4)
            tables[name] = pd.DataFrame({"name": "aten::mm", "ts_ns": ts, "dur_ns": dur, "tid": 1})
    ts, dur = times(6)
    tables["hta_events"] = pd.DataFrame({"role": "launch", "name": "", "stream": -1, "correlation": np.arange(6),
                                         "ts_ns": ts, "dur_ns": 0})
    return tables


@pytest.mark.parametrize("seed", range(4))
def test_run_tables_match_the_per_rank_conversion(seed):
    rng = np.random.default_rng(200 + seed)
    ranks = sorted(rng.choice(64, 6, replace=False).tolist())
    decoded = {r: _random_decoded(rng, int(rng.integers(1, 50))) for r in ranks}
    t0 = min(int(df["ts_ns"].min()) for t in decoded.values() for df in t.values())
    frames: dict[str, list] = {}
    for r in ranks:
        for name, df in _naive_rank_tables(r, {k: v.copy() for k, v in decoded[r].items()}, t0).items():
            frames.setdefault(name, []).append(df)
    want = {name: pd.concat(parts, ignore_index=True) for name, parts in frames.items()}
    by_rank = {r: (Path(f"rank{r}.json"), DecodedTrace.from_frames({}, decoded[r])) for r in reversed(ranks)}
    got = kineto._run_tables(by_rank, t0)
    assert list(got) == list(want)
    for name in want:
        pd.testing.assert_frame_equal(got[name], want[name], check_exact=True, obj=name)


@pytest.mark.parametrize("seed", range(3))
def test_each_ranks_device_ops_are_in_time_order_whatever_the_files_order(seed):
    """gpu_ops: each rank's rows by start, then end (stable), not in the order the trace lists them (by stream, by
    kind): the same rows as the per-rank conversion, and the device timeline, in that order too, shares their
    arrays instead of holding a sorted copy (issue 30 #1: ~38 MiB at 1,024 generated ranks)."""
    from reportgen import timeline
    from reportgen.model import Run

    rng = np.random.default_rng(300 + seed)
    ranks = [0, 1, 2]
    decoded = {r: _random_decoded(rng, 40) for r in ranks}
    for t in decoded.values():  # ties of start (two streams at once) and the writer's order, not time's
        g = t["gpu_ops"]
        g.loc[g.index[1::3], "ts_ns"] = g["ts_ns"].to_numpy()[0::3][: len(g.index[1::3])]
        t["gpu_ops"] = g.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    t0 = min(int(df["ts_ns"].min()) for t in decoded.values() for df in t.values())
    want = pd.concat([_naive_rank_tables(r, {k: v.copy() for k, v in decoded[r].items()}, t0)["gpu_ops"]
                      for r in ranks], ignore_index=True)
    by_rank = {r: (Path(f"rank{r}.json"), DecodedTrace.from_frames({}, decoded[r])) for r in ranks}
    got = kineto._run_tables(by_rank, t0)["gpu_ops"]
    order = np.lexsort((want["ts_ns"] + want["dur_ns"], want["ts_ns"], want["rank"]))
    pd.testing.assert_frame_equal(got, want.iloc[order].reset_index(drop=True), check_exact=True)
    run = Run(name="t", source_format="test", source_path="/x", ranks=ranks)
    run.tables["gpu_ops"] = got
    tl = timeline.build(run)
    assert len(tl) == len(got)
    if int(pd.__version__.split(".")[0]) >= 3:  # pandas 2 copies the columns a frame selects
        for c in ("rank", "start_ms", "end_ms"):
            assert np.shares_memory(tl[c].to_numpy(), got[c].to_numpy()), c


@pytest.mark.skipif(int(pd.__version__.split(".")[0]) < 3, reason="pandas 2 copies a frame twice while making it "
                    "(its blocks consolidated): the bound is pandas 3's")
def test_run_tables_hold_a_stacked_table_only_while_its_frame_is_made():
    """Every stacked table kept until the last frame was made held the run's tables twice (issue 30 #1: at 1,024
    generated ranks the step's peak RSS fell 813 -> 694 MiB when each is dropped after its frame): the traced
    allocation peak of _run_tables stays under 1.6x the frames it returns (1.85x when every stacked table is kept,
    1.32x when each is dropped)."""
    rng = np.random.default_rng(7)
    n = 20_000
    decoded = {}
    for r in range(8):
        t = _random_decoded(rng, n)
        ts = 1_795_303_600_000_000_000 + np.sort(rng.integers(0, 10 ** 10, n))
        t["collectives"] = pd.DataFrame({"source": "gpu_kernel", "name": "nccl", "ts_ns": ts, "dur_ns": 5,
                                         "collective": "all_reduce", "in_nelems": 4, "out_nelems": 4,
                                         "elem_bytes": 4.0, "in_bytes": 16.0, "out_bytes": 16.0, "group_size": 8,
                                         "seq": np.arange(n), "src_rank": -1, "dst_rank": -1})
        t["cpu_ops"] = pd.DataFrame({"name": "aten::mm", "ts_ns": ts, "dur_ns": 3, "tid": 1, "flops": 1.0,
                                     "kernel_launches": 1})
        decoded[r] = t
    t0 = min(int(df["ts_ns"].min()) for t in decoded.values() for df in t.values())
    by_rank = {r: (Path(f"rank{r}.json"), DecodedTrace.from_frames({}, t)) for r, t in decoded.items()}
    del decoded
    got, peak = traced_peak(lambda: kineto._run_tables(by_rank, t0))
    frames = sum(int(df.memory_usage(deep=False).sum()) for df in got.values())
    assert len(got["gpu_ops"]) == len(got["collectives"]) == len(got["cpu_ops"]) == 8 * n
    assert peak < 1.6 * frames, (peak, frames)


def test_reading_a_16_rank_run_stays_small(tmp_path):
    """Resource bound (not a timing): the reader holds a 16-rank, 10-step run in well under 1 GB."""
    code = ("from reportgen.synth.kineto import KinetoSpec, write_kineto_run\n"
            "from reportgen.readers import kineto\n"
            f"write_kineto_run({str(tmp_path)!r}, KinetoSpec(hosts=2, devices_per_host=8, steps=10, seed=3))\n"
            f"run = kineto.read({str(tmp_path)!r}, jobs=1)\n"
            "assert len(run.ranks) == 16 and len(run.steps) == 10\n"
            # VmHWM, not ru_maxrss: Linux keeps ru_maxrss across exec, so a child of a big pytest worker would
            # report the worker's peak (590 MB seen in CI for a 140 MB child)
            "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    rss_mb = int(out.stdout.split()[-1]) / 1024
    assert rss_mb < 500, rss_mb  # VmHWM is in kB


def test_thousands_of_process_groups_are_kept(monkeypatch):
    """A 4096-rank job has thousands of process groups (the generated one 2,051: a pp group per dp index); a cap at
    1,024 once left half its ranks without a pipeline stage. A capped group is counted once, however many ranks
    list it, and the problem says what the ranks lose."""
    from types import SimpleNamespace

    from reportgen.readers import kineto

    world = 6000
    files = [(f"r{r}.json", SimpleNamespace(meta={"distributedInfo": {"pg_config": [
        {"pg_name": str(1 + r // 2), "pg_desc": "mesh_pp", "ranks": [r - r % 2, r - r % 2 + 1]}]}}))
        for r in range(world)]
    problems: list = []
    out = kineto._pg_configs(files, world, problems)
    assert len(out) == 3000 and problems == []
    monkeypatch.setattr(kineto, "MAX_GROUPS", 1000)
    out = kineto._pg_configs(files, world, problems)
    assert len(out) == 1000 and len(problems) == 1
    assert problems[0][1].startswith("2,000 more process groups were not kept (at most 1,000 groups")
    assert "no stage" in problems[0][1]
    monkeypatch.setattr(kineto, "MAX_GROUPS", 1 << 16)
    monkeypatch.setattr(kineto, "MAX_GROUP_MEMBERS", 10)  # the members' bound: 5 groups of 2
    problems.clear()
    assert len(kineto._pg_configs(files, world, problems)) == 5 and problems[0][1].startswith("2,995 more")


def test_equal_rank_lists_of_process_groups_become_one_list():
    """kineto.share_group_lists: an equal list of plain ints is the first one met; lists of other values (``True``
    and ``1.0`` equal ``1`` as keys), lists shorter than SHARED_LIST_MIN, empty lists and what is not a list are
    left as the file wrote them."""
    n = kineto.SHARED_LIST_MIN
    first, again = list(range(n)), list(range(n))
    short_a, short_b = list(range(n - 1)), list(range(n - 1))
    odd = [[0] * (n - 1) + [True], [0] * (n - 1) + [1.0], [], [[0], [1]] * n, ["0", "1"] * n]
    lists: dict = {}
    a = DecodedTrace({"distributedInfo": {"pg_config": [
        {"ranks": first}, {"ranks": list(range(1, n + 1))}, {"ranks": short_a}, "x", {"ranks": 3}]}}, {})
    b = DecodedTrace({"distributedInfo": {"pg_config": [
        {"ranks": again}, {"ranks": list(range(1, n + 1))}, {"ranks": short_b}] + [{"ranks": r} for r in odd]}}, {})
    for d in (a, b, None, DecodedTrace({"distributedInfo": {"pg_config": {"ranks": again}}}, {}),
              DecodedTrace({"distributedInfo": None}, {}), DecodedTrace([], {})):
        kineto.share_group_lists(d, lists)
    cfg_a, cfg_b = a.meta["distributedInfo"]["pg_config"], b.meta["distributedInfo"]["pg_config"]
    assert cfg_b[0]["ranks"] is first and cfg_b[1]["ranks"] is cfg_a[1]["ranks"] and cfg_a[4] == {"ranks": 3}
    assert cfg_a[2]["ranks"] is short_a and cfg_b[2]["ranks"] is short_b
    assert [pg["ranks"] for pg in cfg_b[3:]] == odd and all(pg["ranks"] is o for pg, o in zip(cfg_b[3:], odd))


@pytest.mark.parametrize("how", ["serial", "pool", "parts"])
def test_a_run_holds_one_list_per_process_group_not_one_per_rank(tmp_path, monkeypatch, how):
    """Every rank lists the world's group and its own, O(world) rank ids each: the read keeps one list object per
    distinct list, shared as each trace is decoded (the pool's results, the serial read) or, for the parts of
    ``reportgen reduce`` / Dask, at their assembly; not one per rank. At 4,096 ranks the lists were 25 M Python
    ints (~0.8 GB) held through the read, and the small-object arenas they were spread over (~0.9 GB) stayed with
    the process for the sections. (Lists of 2 shared here: 8 ranks have no list of SHARED_LIST_MIN.)"""
    from reportgen.readers import registry
    from reportgen.synth.kineto import KinetoSpec, write_kineto_run

    write_kineto_run(tmp_path, KinetoSpec(hosts=2, devices_per_host=4, steps=2, seed=5))
    got = {}
    assemble = kineto.assemble

    def spy(root, paths, results):
        got["results"] = results
        return assemble(root, paths, results)

    monkeypatch.setattr(kineto, "assemble", spy)
    monkeypatch.setattr(kineto, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(kineto, "SHARED_LIST_MIN", 2)
    if how == "parts":
        parts = [registry._kineto_reduce(str(p), ()) for p in kineto.find_traces(tmp_path)]
        run = registry._kineto_assemble(tmp_path, parts)
    else:
        run = kineto.read(tmp_path, jobs=1 if how == "serial" else 2)
    lists = [pg["ranks"] for _, d, _ in got["results"] for pg in d.meta["distributedInfo"]["pg_config"]]
    assert len(run.ranks) == 8 and len(lists) == 24  # the world, a dp and a pp group of each of 8 ranks
    assert len({id(x) for x in lists}) == len({tuple(x) for x in lists}) == 1 + 4 + 2, \
        sorted({tuple(x) for x in lists})


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim: Linux only")
def test_freed_small_blocks_go_back_to_the_system(tmp_path):
    """workers.release_free_memory: ~160 MB freed in blocks too small for their own mapping (the heap keeps them,
    pinned by one block allocated after them, as the per-rank pieces of a read are) leave the resident size on the
    call. A resource bound, not a timing."""
    code = ("import numpy as np\n"
            "from reportgen import workers\n"
            "def rss(): return next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS'))\n"
            "pieces = [np.ones(1000) for _ in range(20000)]\n"
            "pin = np.ones(1000)\n"
            "del pieces\n"
            "before = rss()\n"
            "workers.release_free_memory()\n"
            "print(before, rss())\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    before, after = (int(x) / 1024 for x in out.stdout.split())
    if before - after < 1 and "musl" in subprocess.run(["ldd", "--version"], capture_output=True, text=True).stderr:
        pytest.skip("musl has no malloc_trim")
    assert before - after > 100, (before, after)  # MB


def test_a_read_gives_its_freed_pieces_back(monkeypatch):
    """Every stacked table (its per-rank pieces just freed) and the end of a read call release_free_memory."""
    from reportgen import workers
    from reportgen.readers import read_run
    from conftest import fixture_dir

    calls = []
    monkeypatch.setattr(workers, "release_free_memory", lambda: calls.append(sys._getframe(1).f_code.co_name))
    run = read_run(fixture_dir("kineto", "hta_tests_data", "tests", "data", "trace_filter"))
    stacked = sum(1 for n in ("gpu_ops", "collectives", "cpu_ops", "host_ops") if n in run.tables)
    assert stacked and calls.count("_stacked") >= stacked and calls[-1] == "_read_run", calls


def test_stacked_columns_equal_pandas_concat_of_the_ranks_frames():
    """The reader stacks each decoded column over ranks (kineto._stacked): the frame pandas' concat of the ranks'
    frames gave (column order of first appearance, ``rank`` last; a column some ranks lack: NaN, ints made floats,
    text kept text), for ranks with and without rows."""
    rng = np.random.default_rng(3)
    for _ in range(60):
        by_rank, frames, ranks = {}, [], []
        for r in sorted(rng.choice(20, 4, replace=False).tolist()):
            n = int(rng.integers(0, 6))
            cols = {"name": np.array([f"op{i}" for i in rng.integers(0, 3, n)], dtype=object),
                    "ts_ns": rng.integers(0, 10 ** 12, n), "dur_ns": rng.integers(0, 10 ** 6, n),
                    "profiler_flops": rng.uniform(0, 1e9, n), "tid": np.array(["7"] * n, dtype=object),
                    "stream": rng.integers(0, 9, n)}
            for c in ("profiler_flops", "tid", "stream"):
                if rng.random() < 0.4:
                    del cols[c]
            by_rank[r] = (Path(f"rank{r}.json"), DecodedTrace({}, {"cpu_ops": {k: v.copy() for k, v in cols.items()}}))
            if n:
                frames.append(pd.DataFrame(cols))
                ranks.append(np.full(n, r, dtype=np.int64))
        got = kineto._stacked(by_rank, "cpu_ops")
        if not frames:
            assert got is None
            continue
        want = pd.concat(frames, ignore_index=True).assign(rank=np.concatenate(ranks))
        pd.testing.assert_frame_equal(pd.DataFrame(got), want, check_exact=True)



def _text_objects_over(df, what: str) -> list[str]:
    """The text columns of ``df`` holding more objects than distinct texts times ranks, each as a line."""
    over = []
    ranks = df["rank"].nunique() if "rank" in df else 1
    for c in df.columns:
        s = df[c]
        if not (s.dtype == object or pd.api.types.is_string_dtype(s.dtype)):
            continue
        values = getattr(s.array, "_ndarray", None)
        values = s.to_numpy(dtype=object) if values is None else values
        texts = {v for v in values.tolist() if isinstance(v, str)}
        objects = len({id(v) for v in values if isinstance(v, str)})
        if objects > len(texts) * ranks:
            over.append(f"{what}.{c}: {objects} objects for {len(texts)} texts on {ranks} ranks")
    return over


@pytest.mark.parametrize("family", ["kineto", "mindinsight", "ascend"])
def test_text_columns_share_one_object_per_text_and_rank(tmp_path, family):
    """Every text column of the run's tables (the readers' and the ones sections build: comm_ops, device_timeline,
    op_flops, memory_samples...) and of the p2p operations holds at most one object per distinct text and rank: a
    text made per row (numpy's np.where / np.full / Series.where with a text give a new str per row) costs ~50 bytes
    and its own hash each, ~300 MB at 4,096 generated Kineto ranks (frames.text_where and its kind). A generated
    pipeline run of each family, analysed whole."""
    from reportgen import p2p
    from reportgen.readers import read_run
    from reportgen.sections import Options, run_sections
    if family == "kineto":
        from reportgen.synth.kineto import KinetoSpec, write_kineto_run
        write_kineto_run(tmp_path, KinetoSpec(hosts=2, devices_per_host=4, stages=2, steps=2, gzip=False))
        made = {"comm_ops.kind", "device_timeline.kind", "host_ops.tid", "op_flops.note", "p2p.kind"}
    elif family == "mindinsight":
        from reportgen.synth.mindinsight import MindInsightSpec, write_mindinsight_run
        write_mindinsight_run(tmp_path, MindInsightSpec())
        made = {"comm_ops.kind", "p2p.kind", "p2p.peer_source"}
    else:
        from reportgen.synth.ascend import write_ascend_run
        write_ascend_run(tmp_path)
        made = {"device_timeline.kind", "device_timeline.op_class", "memory_samples.series", "p2p.peer_source"}
    run = read_run(tmp_path, jobs=1)
    run_sections(run, Options(), jobs=1)
    frames = {name: df for name, df in run.tables.items() if isinstance(df, pd.DataFrame)}
    frames["p2p"] = p2p.ops(run)
    checked = {f"{name}.{c}" for name, df in frames.items() if df is not None for c in df.columns}
    assert made <= checked
    over = [line for name, df in frames.items() if df is not None and len(df) >= 200
            for line in _text_objects_over(df, name)]
    assert not over, over
