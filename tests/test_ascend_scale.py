"""The Ascend reader at scale (issue 15): fast decoding gives the checked path's rows, and a per-pair
communication matrix is reduced rank by rank without changing what the report shows."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from reportgen.readers import ascend as A
from reportgen.readers import read_run
from reportgen.sections import communication
from reportgen.synth.ascend import AscendSpec, write_ascend_run


@pytest.fixture(scope="module")
def run8(tmp_path_factory):
    root = tmp_path_factory.mktemp("asc8")
    write_ascend_run(root, AscendSpec(hosts=2, devices_per_host=4, stages=1, steps=3))
    return root


def _outputs(root: Path, name: str) -> list[Path]:
    return sorted(root.glob(f"*/ASCEND_PROFILER_OUTPUT/{name}"))


def test_fast_paths_give_the_checked_rows(run8):
    for p in _outputs(run8, "communication_matrix.json"):
        assert A._matrix_fast(p.read_text(), 5) is not None  # a clean file takes the fast path
        pd.testing.assert_frame_equal(A.parse_matrix(p, 5, []), A._matrix_checked(p, 5, []))
    for p in _outputs(run8, "communication.json"):
        assert A._communication_fast(p.read_text(), 5) is not None
        ops, bws = A.parse_communication(p, 5, [])
        o, b = A._communication_checked(p, 5, [])
        assert A._communication_fast(p.read_text(), 5) == (o, b)
        assert len(ops) == len(o) and len(bws) == len(b)


def test_a_doubtful_file_takes_the_checked_path(tmp_path):
    p = tmp_path / "communication_matrix.json"
    p.write_text(json.dumps({"step1": {"collective": {"allreduce-total@9": {
        "0-1": {"Transport Type": "HCCS", "Transit Size(MB)": "4.0", "Transit Time(ms)": -1.0}}}}}))
    assert A._matrix_fast(p.read_text(), 0) is None
    problems = []
    assert A.parse_matrix(p, 0, problems).empty and "negative" in problems[0][1]


def _matrix(links: int, steps: int = 2, group: str = "7") -> dict:
    """One rank's per-pair matrix: ``links`` peers, per step top1 + total entries; link i's per-op time is i."""
    doc = {}
    for s in range(steps):
        top = {f"0-{i}": {"Transport Type": "HCCS", "Transit Size(MB)": 1.0, "Transit Time(ms)": float(i),
                          "Bandwidth(GB/s)": 1.0 / i, "Op Name": f"op{s}"} for i in range(1, links + 1)}
        tot = {k: {**v, "Op Name": ""} for k, v in top.items()}
        doc[f"step{s}"] = {"collective": {f"allreduce-top1@{group}": top, f"allreduce-total@{group}": tot}}
    return doc


def test_per_pair_matrix_is_reduced_per_rank(tmp_path):
    p = tmp_path / "communication_matrix.json"
    p.write_text(json.dumps(_matrix(3 * A.MATRIX_OP_LINKS)))
    full = A.parse_matrix(p, 0, [])
    kept, left = A.reduce_matrix(full)
    assert (kept["stat"] == "total").sum() == (full["stat"] == "total").sum()  # every link total stays
    ops = kept[kept["stat"] != "total"]
    assert ops["dst_local"].nunique() == A.MATRIX_OP_LINKS  # per-op rows only of the busiest links
    assert set(ops["dst_local"]) == set(range(2 * A.MATRIX_OP_LINKS + 1, 3 * A.MATRIX_OP_LINKS + 1))
    assert len(left) == 2 * A.MATRIX_OP_LINKS and (left["rows"] == 2).all()
    assert left["op_time_ms"].sum() == 2 * sum(range(1, 2 * A.MATRIX_OP_LINKS + 1))
    assert set(kept["step"]) == set(full["step"])


def test_enough_links_are_kept_for_the_section():
    assert A.MATRIX_OP_LINKS >= communication.BOX_LINKS


def _comm(root, opts=None):
    run = read_run(root)
    a = communication.analyze(run, opts)
    return run, a


def test_reduction_changes_no_number(run8, monkeypatch):
    """The communication section's links, per-link op rows and metrics are the same with the matrix reduced to
    a few links per rank as with all of it (exact choice, no re-read needed when each link has one reporter)."""
    monkeypatch.setattr(A, "MATRIX_OP_LINKS", 10 ** 6)
    run_all, whole = _comm(run8)
    monkeypatch.setattr(A, "MATRIX_OP_LINKS", 3)
    monkeypatch.setattr(communication, "BOX_LINKS", 2)
    whole_box, whole_extremes = communication._link_ops(run_all)
    run_cut, cut = _comm(run8)
    assert len(run_cut.tables["comm_matrix"]) < len(run_all.tables["comm_matrix"])
    pd.testing.assert_frame_equal(cut.tables["links"], whole.tables["links"])
    cut_box, cut_extremes = communication._link_ops(run_cut)
    pd.testing.assert_frame_equal(cut_box, whole_box)
    # the extremes table covers the links whose per-op rows the reader keeps: fewer links, the same numbers for each
    assert 0 < len(cut_extremes) < len(whole_extremes)
    keys = ["op_type", "link"]
    same = whole_extremes.merge(cut_extremes[keys], on=keys)
    pd.testing.assert_frame_equal(cut_extremes.sort_values(keys).reset_index(drop=True),
                                  same.sort_values(keys).reset_index(drop=True))
    assert cut.metrics == whole.metrics


def test_a_link_left_out_by_one_rank_is_read_again(tmp_path, monkeypatch):
    """Two ranks report the same links; rank 1 alone would keep other ones: the run-wide choice reads it again."""
    for rank, weight in ((0, 1.0), (1, -1.0)):
        d = tmp_path / f"h_{rank}_2025112712000000{rank}_ascend_pt"
        (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
        (d / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}))
        (d / "profiler_metadata.json").write_text(json.dumps({"parallel_group_info": {
            "g": {"group_name": "dp", "global_ranks": list(range(9))}}}))
        doc = _matrix(8, group=str(A.double_hash("g")))
        for s in doc.values():  # rank 0: link i costs i; rank 1: 9 - i (+ a bit)
            for e in s["collective"].values():
                for k, v in e.items():
                    i = int(k.split("-")[1])
                    v["Transit Time(ms)"] = float(i) if weight > 0 else 9.0 - i + 0.25
        (d / "ASCEND_PROFILER_OUTPUT" / "communication_matrix.json").write_text(json.dumps(doc))
    monkeypatch.setattr(A, "MATRIX_OP_LINKS", 10 ** 6)
    whole = read_run(tmp_path).tables["comm_matrix"]
    monkeypatch.setattr(A, "MATRIX_OP_LINKS", 2)
    cut = read_run(tmp_path).tables["comm_matrix"]
    ops = whole[whole["stat"] != "total"]
    per_link = ops.groupby(["src_rank", "dst_rank", "transport"])["time_ms"].sum()
    busiest = per_link.nlargest(2).index
    pick = lambda m: m[(m["stat"] != "total") & pd.MultiIndex.from_frame(  # noqa: E731
        m[["src_rank", "dst_rank", "transport"]]).isin(busiest)].reset_index(drop=True)
    pd.testing.assert_frame_equal(pick(cut), pick(whole))


@pytest.mark.parametrize("pool", [False, True], ids=["here", "pool"])
def test_text_columns_hold_one_object_per_distinct_value_per_rank(run8, pool, monkeypatch):
    """Issue 15 (Ascend 1024 ranks within 2 GB): the csv module and the JSON decoders make a string per cell; the
    reader keeps one object per distinct text per rank (model.share_text on each per-rank frame), so a kernel name or a
    communication op repeated every step costs a pointer, not a string (1024 ranks: 1983 -> 1414 MiB). So it does
    when the ranks are read in the --jobs pool (the worker shares the text before the part is sent back)."""
    if pool:
        from reportgen.readers import ascend

        monkeypatch.setattr(ascend, "PARALLEL_MIN_BYTES", 0)
    run = read_run(run8, jobs=2 if pool else 1)
    ranks = len(run.ranks)
    for name, cols in (("kernels", ["name", "type", "input_shapes"]), ("comm_ops", ["op", "op_type", "group"]),
                       ("comm_matrix", ["op_type", "transport", "op_name"])):
        t = run.table(name)
        assert t is not None and len(t) > 10 * ranks, name
        for col in cols:
            objects = len({id(v) for v in t[col]})
            assert objects <= t[col].nunique(dropna=False) * ranks, (name, col, objects)


def test_share_text_keeps_values_dtypes_and_order():
    import numpy as np

    from reportgen.model import share_text

    words = ["".join(["ab", str(i % 3)]) for i in range(30)]  # 30 objects, 3 values
    df = pd.DataFrame({"s": pd.array(words, dtype=pd.Series(["x"]).dtype),
                       "o": pd.Series([w.upper() for w in words] + [], dtype=object),
                       "n": np.arange(30), "na": [None if i % 4 == 0 else w for i, w in enumerate(words)]})
    before = df.copy()
    share_text(df)
    pd.testing.assert_frame_equal(df, before)
    assert {c: len({id(v) for v in df[c]}) for c in ("s", "o")} == {"s": 3, "o": 3}


def test_by_rank_gives_the_rows_of_the_filter():
    """model.ByRank splits a table by rank once (a filter per rank inside a loop over 4096 ranks read every row 4096
    times): each rank's rows, order and index are those of ``df[df["rank"] == r]``; a rank without rows gets an
    empty frame with the columns; None stays None."""
    import numpy as np

    from reportgen.model import ByRank

    rng = np.random.default_rng(3)
    df = pd.DataFrame({"rank": rng.integers(0, 7, 200), "v": rng.random(200)}, index=rng.permutation(1000)[:200])
    by = ByRank(df)
    for r in range(9):
        pd.testing.assert_frame_equal(by[r], df[df["rank"] == r])
        pd.testing.assert_frame_equal(by[np.int64(r)], df[df["rank"] == r])
    assert list(by[99].columns) == ["rank", "v"] and by[99].empty
    assert ByRank(None)[0] is None
    assert ByRank(df.iloc[:0])[1].empty
