"""MindSpore Insight reader: layouts, columns, units, odd files; numbers against MindInsight 2.3.1."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reportgen.errors import InputError
from reportgen.readers import read_run
from reportgen.readers.mindinsight import parse_step_trace

from conftest import fixture_dir, reference_file


def _ref(name: str) -> dict:
    return json.loads(reference_file("mindinsight", "mi_cluster_propose_pp2x4", name).read_text())


def test_flat_layout_run_facts(pp2x4):
    run = read_run(pp2x4)
    assert run.source_format == "mindinsight"
    assert run.ranks == [0, 1, 2, 3]
    assert run.world_size == 4 and run.missing_ranks == []
    assert run.parallel == {"mode": "pipeline-parallel", "stages": 2, "pp": 2}
    assert run.steps == [1, 2, 3, 4, 5]
    assert [run.stage_of(r) for r in run.ranks] == [1, 1, 2, 2]
    assert run.problems == []
    kinds = run.tables["files"].groupby("kind").size().to_dict()
    assert kinds == {"step_trace": 4, "cluster_analyse": 4, "hccl_raw": 4, "flops_summary": 4}


def test_step_trace_equals_mindinsight_every_step(pp2x4):
    """[iteration_interval, fp_and_bp, tail, total] per rank for the average row and steps 1-5, 4 dp."""
    ref = _ref("as_shipped.json")
    run = read_run(pp2x4)
    st = run.tables["step_trace"].set_index(["rank", "step"])
    avg = run.tables["step_trace_avg"].set_index("rank")
    cols = ["step_interval_ms", "fp_bp_ms", "tail_ms", "step_ms"]
    for step in range(0, 6):
        rows = ref[f"cluster_step_trace._get_cluster_step_trace_info({step}) [private; dp-style columns]"]["result"]
        for *values, rank in rows:
            ours = avg.loc[rank, cols] if step == 0 else st.loc[(rank, step), cols]
            assert [round(float(v), 4) for v in ours] == values, (step, rank)


def test_cluster_analyse_equals_mindinsight_every_step(pp2x4):
    """step_bottleneck_info = [interval, computation, comm_alone, stage, receive_alone, collective_alone]."""
    ref = _ref("as_shipped.json")
    run = read_run(pp2x4)
    ov = run.tables["cluster_overlap"].set_index(["rank", "step"])
    ov_avg = run.tables["cluster_overlap_avg"].set_index("rank")
    cols = ["computation_ms", "comm_alone_ms", "stage_ms", "receive_alone_ms", "collective_comm_alone_ms"]
    for step in range(0, 6):
        for item in ref[f"cluster_step_trace.query(step_id={step})"]["result"]["info"]:
            rank = item["rank_id"]
            ours = ov_avg.loc[rank, cols] if step == 0 else ov.loc[(rank, step), cols]
            assert [round(float(v), 4) for v in ours] == item["step_bottleneck_info"][1:], (step, rank)


def test_old_column_generation_and_op_triples():
    root = fixture_dir("mindinsight", "mi_profiler_single")
    problems = []
    st = parse_step_trace(root / "step_trace_raw_0_detail_time.csv", problems)
    assert len(st.rows) == 20 and st.average is not None
    # old naming: stream_10_parallel_0_start_point, _end_point, then the duration column
    first = [o for o in st.ops if o[0] == 1 and o[1] == "stream_10_parallel_0"]
    assert first == [(1, "stream_10_parallel_0", 10, 450000426790, 450000602750, 0.17596)]  # ticks x 10 ns, exact


def test_new_column_generation_ops(pp2x4):
    st = parse_step_trace(pp2x4 / "step_trace_raw_0_detail_time.csv", [])
    names = {o[1] for o in st.ops}
    assert "stream_48_0_Receive-op663" in names and "stream_36_0_AllReduce-op4542" in names
    op = next(o for o in st.ops if o[0] == 5 and o[1] == "stream_48_0_Receive-op663")
    assert op[2] == 48 and op[5] == pytest.approx(47.15406)
    assert (op[4] - op[3]) / 1e6 == pytest.approx(op[5])


def test_average_row_with_step_zero():
    """Old files end with a '0' row instead of '-'; MindInsight shows it as the average."""
    run = read_run(fixture_dir("mindinsight", "mi_run_2_dp_rank1"))
    avg = run.tables["step_trace_avg"].iloc[0]
    assert round(avg["step_interval_ms"], 4) == 12.4321
    assert run.steps == [1]
    ref = json.loads(reference_file("mindinsight", "mi_run_2_dp_rank1", "cluster_step_trace.json").read_text())
    step1 = ref["cluster_step_trace.query(step_id=1) device_id=1"]["result"]["info"][0]["step_trace_info"]
    row = run.tables["step_trace"].iloc[0]
    assert [round(float(row[c]), 4) for c in ("step_interval_ms", "fp_bp_ms", "tail_ms", "step_ms")] == step1


def test_profiler_subdirectory_newest_by_name(tmp_path, pp2x4):
    shutil.copytree(pp2x4, tmp_path / "profiler_old")
    shutil.copytree(pp2x4, tmp_path / "profiler_z")
    (tmp_path / "profiler_z" / "step_trace_raw_3_detail_time.csv").unlink()
    run = read_run(tmp_path)
    assert "profiler_z" in run.layout
    assert sorted(run.tables["step_trace"]["rank"].unique()) == [0, 1, 2]


def _legacy_copy(tmp_path: Path, pp2x4: Path) -> Path:
    """The r1.3 layout built from the rank-table format: 2 servers x 2 devices, files keyed by device id."""
    root = tmp_path / "legacy"
    (root).mkdir()
    servers = [("10.1.0.1", "hostA", [0, 1]), ("10.1.0.2", "hostB", [2, 3])]
    table = {"version": "1.0", "server_count": "2", "status": "completed", "server_list": []}
    lines = []
    for ip, name, ranks in servers:
        devs = []
        folder = root / "cluster_profiler" / name / "profiler"
        folder.mkdir(parents=True)
        for device_id, rank in enumerate(ranks):
            devs.append({"device_id": str(device_id), "device_ip": f"192.168.{rank}.1", "rank_id": str(rank)})
            shutil.copy(pp2x4 / f"step_trace_raw_{rank}_detail_time.csv",
                        folder / f"step_trace_raw_{device_id}_detail_time.csv")
            shutil.copy(pp2x4 / f"ascend_cluster_analyse_pipeline-parallel_2_4_{rank}.csv",
                        folder / f"ascend_cluster_analyse_pipeline-parallel_2_4_{device_id}.csv")
        table["server_list"].append({"server_id": ip, "device": devs})
        lines.append(f"{ip} {name}")
    (root / "hccl_4p.json").write_text(json.dumps(table))
    (root / "host_ips_mapping.txt").write_text("\n".join(lines) + "\n")
    return root


def test_legacy_layout_maps_device_ids_to_ranks(tmp_path, pp2x4):
    run = read_run(_legacy_copy(tmp_path, pp2x4))
    flat = read_run(pp2x4)
    assert run.ranks == [0, 1, 2, 3] and run.world_size == 4
    assert run.hosts == {0: "hostA", 1: "hostA", 2: "hostB", 3: "hostB"}
    assert run.devices == {0: 0, 1: 1, 2: 0, 3: 1}
    assert "legacy" in run.layout
    cols = ["rank", "step", "step_ms", "fp_bp_ms"]
    assert run.tables["step_trace"][cols].equals(flat.tables["step_trace"][cols])


def test_legacy_layout_unknown_device_is_a_problem(tmp_path, pp2x4):
    root = _legacy_copy(tmp_path, pp2x4)
    shutil.copy(pp2x4 / "step_trace_raw_0_detail_time.csv",
                root / "cluster_profiler" / "hostB" / "profiler" / "step_trace_raw_7_detail_time.csv")
    run = read_run(root)
    assert run.ranks == [0, 1, 2, 3]
    assert any("device 7" in p.problem for p in run.problems)


def test_crlf_and_missing_ranks(tmp_path, pp2x4):
    for src in [*pp2x4.glob("step_trace_raw_[012]_*.csv"), *pp2x4.glob("ascend_cluster_analyse_*_[012].csv")]:
        (tmp_path / src.name).write_bytes(src.read_bytes().replace(b"\n", b"\r\n"))
    run = read_run(tmp_path)
    assert run.ranks == [0, 1, 2] and run.missing_ranks == [3]
    flat = read_run(pp2x4).tables["step_trace_avg"]
    assert run.tables["step_trace_avg"].equals(flat[flat["rank"] < 3].reset_index(drop=True))


def test_truncated_and_odd_rows_are_problems_not_failures(tmp_path, pp2x4):
    for src in pp2x4.glob("step_trace_raw_*"):
        shutil.copy(src, tmp_path / src.name)
    p = tmp_path / "step_trace_raw_1_detail_time.csv"
    lines = p.read_text().splitlines()
    # duplicate step 2, a non-numeric row, and a truncated last line (no average row)
    lines = lines[:3] + [lines[2]] + ["3,abc,1,2,3,4,5,6,7"] + lines[4:6] + [lines[6][:30]]
    p.write_text("\n".join(lines))
    run = read_run(tmp_path)
    text = " | ".join(pr.problem for pr in run.problems)
    assert "step 2 appears again" in text and "not a number" in text and "truncated" in text
    assert "no average row" in text
    assert sorted(run.tables["step_trace"].query("rank == 1")["step"]) == [1, 2, 4, 5]


def test_unreadable_files_are_skipped_with_a_problem(tmp_path, pp2x4):
    for src in pp2x4.glob("step_trace_raw_*"):
        shutil.copy(src, tmp_path / src.name)
    (tmp_path / "step_trace_raw_2_detail_time.csv").write_bytes(b"\xff\xfe\x00garbage")
    (tmp_path / "step_trace_raw_3_detail_time.csv").write_text("a,b,c\n1,2,3\n")
    run = read_run(tmp_path)
    assert sorted(run.tables["step_trace"]["rank"].unique()) == [0, 1]
    msgs = {Path(p.path).name: p.problem for p in run.problems}
    assert "not UTF-8" in msgs["step_trace_raw_2_detail_time.csv"]
    assert "missing column" in msgs["step_trace_raw_3_detail_time.csv"]


@pytest.mark.parametrize("content", [None, "notes.txt"])
def test_unrecognised_directory_is_an_input_error(tmp_path, content):
    if content:
        (tmp_path / content).write_text("hello")
    with pytest.raises(InputError) as exc:
        read_run(tmp_path)
    assert str(tmp_path) in str(exc.value) and "no profiler output recognised" in str(exc.value)


def test_strategy_only_run_is_readable():
    run = read_run(fixture_dir("mindinsight", "mi_parallel_strategy"))
    assert run.ranks == [0, 1] and run.world_size == 2
    assert run.parallel.get("framework_mode") == "auto_parallel"
    assert "step_trace" not in run.tables


def test_legacy_layout_without_rank_table_says_so(tmp_path, pp2x4):
    root = _legacy_copy(tmp_path, pp2x4)
    (root / "hccl_4p.json").write_text("{ truncated")
    with pytest.raises(InputError) as exc:
        read_run(root)
    assert "cluster_profiler" in str(exc.value) and "rank table" in str(exc.value)


def test_step_op_type_reads_each_name_by_the_rule():
    """``stream_<s>_<i>_<Type>-op<N>`` -> ``<Type>``, each distinct name rewritten once: the same Series (values,
    missing names, dtype, index, name) as the rule applied to every row."""
    import numpy as np
    import pandas as pd

    from reportgen.readers.mindinsight import step_op_type
    ops = pd.Series(["stream_1_2_AllReduce-op3", None, np.nan, "x", 5, "stream_10_0_Send-op12", "stream_a_1_B-op2",
                     "stream_1_2_AllReduce-op3", "stream_1_2_A-op3-op4", ""], name="op", index=range(10, 20))
    for s in (ops, ops.astype(str), ops.iloc[0:0], ops.iloc[[7, 0]]):
        want = s.astype(str).str.replace(r"^stream_\d+_\d+_", "", regex=True).str.replace(r"-op\d+$", "", regex=True)
        pd.testing.assert_series_equal(step_op_type(s), want, check_exact=True)


def _tables_equal(a, b) -> None:
    import pandas as pd

    assert a.keys() == b.keys()
    for k in a:
        pd.testing.assert_frame_equal(a[k], b[k], check_exact=True)
        assert list(a[k].dtypes) == list(b[k].dtypes), k


def test_a_read_keeps_rows_and_gives_the_run_the_parts_give(pp2x4, tmp_path):
    """read() hands each rank's rows to assemble without a frame per rank and file (rank_part(frames=False)); the
    run is the one the shipped parts (frames, as Dask and ``reportgen reduce`` send them) give: a real run, a
    generated one with its memory files, and rows that are not plain (a rank whose op stream is missing)."""
    from reportgen.readers import mindinsight as mi
    from reportgen.synth import MindInsightSpec, write_mindinsight_run

    gen = tmp_path / "gen"
    write_mindinsight_run(gen, MindInsightSpec(hosts=1, devices_per_host=4, stages=2, steps=3))
    for root in (pp2x4, gen):
        d = mi.discover(root)
        parts = [(str(root), *mi.cluster_part(d))] + [(str(u[0][0].path), *mi.rank_part(*u)) for u in mi.rank_units(d)]
        _tables_equal(mi.read(root).tables, mi.assemble(root, parts).tables)

    import pandas as pd
    cols = mi._OP_COLUMNS
    plain = [(0, 1, "stream_1_2_A-op1", 1, 10, 20, 0.5)]
    odd = [(1, 1, "stream_1_2_A-op1", None, 10, 20, 0.5)]  # the stream missing: that rank's column is float64
    flag = [(2, 1, "stream_1_2_A-op1", True, 10, 20, 1)]  # a bool stream, an int duration
    for lists in ([plain, plain], [plain, odd], [odd, plain, flag], [flag]):
        as_rows = mi._row_table([mi._RowList(rows, cols) for rows in lists], True)
        as_frames = mi._row_table([pd.DataFrame(rows, columns=cols) for rows in lists], True)
        pd.testing.assert_frame_equal(as_rows, as_frames, check_exact=True)
        assert list(as_rows.dtypes) == list(as_frames.dtypes)
    dicts = [[{"rank": 0, "step_ms": 1.5}], [{"rank": 1, "step_ms": None}], [{"step_ms": 2.0, "rank": 2}]]
    for lists in (dicts, dicts[:1], dicts[::2]):
        pd.testing.assert_frame_equal(mi._row_table([mi._RowList(r) for r in lists]),
                                      mi._row_table([pd.DataFrame(r) for r in lists]), check_exact=True)


def test_one_row_tables_of_mixed_parts_are_refused_as_before(tmp_path):
    """A one-row summary table that one rank's part lists among its rows and another's does not (a crafted or an
    older .reduced file): the rows were always read by iterating each part as it is, and a frame iterated gives its
    column names, not rows: refused (ValueError, which the engine reports as the file's problem), as before."""
    from reportgen.readers import mindinsight as mi
    from reportgen.synth import MindInsightSpec, write_mindinsight_run

    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=2, steps=2))
    d = mi.discover(tmp_path)
    parts = [(str(tmp_path), *mi.cluster_part(d))] + [(str(u[0][0].path), *mi.rank_part(*u)) for u in mi.rank_units(d)]
    listed = [fm for _s, meta, _t, _p in parts[2:] for fm in meta.get("files", ()) if fm["rows"]]
    assert listed, "the generated run has no one-row summary table"
    mi.assemble(tmp_path, parts)  # as shipped: read
    listed[0]["rows"] = []  # the second rank's part no longer lists its summary among its rows
    with pytest.raises(ValueError):
        mi.assemble(tmp_path, parts)
