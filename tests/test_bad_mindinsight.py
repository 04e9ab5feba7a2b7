"""Issue 14, MindSpore Insight family: hostile and broken input never gives a traceback, an internal error or a
silently wrong number. Every input is a small generated run (or a fixture copy) mutated at test time.

Outcome classes asserted per case: exit 2 naming the file (the run cannot be read: a broken rank table), or a
report whose data problems name the file (and line / column) while the refused value is absent from the tables.
"""

from __future__ import annotations

import contextlib
import json
import random
import resource
import shutil
from pathlib import Path

import pandas as pd
import pytest

from reportgen import cli, limits
from reportgen.readers import read_run
from reportgen.readers.mindinsight import parse_step_trace
from reportgen.readers.mindinsight_hccl import parse_hccl_raw
from reportgen.synth import MindInsightSpec, write_mindinsight_run

from conftest import fixture_dir

SPEC = dict(hosts=1, devices_per_host=2, steps=3, stages=1)
ST0 = "step_trace_raw_0_detail_time.csv"


@pytest.fixture(scope="module")
def bases(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("mi_bases")
    out = {}
    for layout in ("flat", "legacy"):
        write_mindinsight_run(root / layout, MindInsightSpec(layout=layout, **SPEC))
        out[layout] = root / layout
    return out


def _copy(bases, tmp_path, layout="flat") -> tuple[Path, Path]:
    """(run root, folder of rank 0's files) of a fresh copy."""
    run = tmp_path / "run"
    shutil.copytree(bases[layout], run)
    return run, (run / "profiler" if layout == "flat" else run / "cluster_profiler" / "host-0" / "profiler")


def _set_cell(path: Path, line: int, column: str, value: str) -> None:
    lines = path.read_bytes().decode().split("\r\n")
    head = lines[0].split(",")
    cells = lines[line - 1].split(",")
    cells[head.index(column)] = value
    lines[line - 1] = ",".join(cells)
    path.write_bytes("\r\n".join(lines).encode())


def _problems(run, name: str) -> list[str]:
    return [p.problem for p in run.problems if Path(p.path).name == name]


def _cli(root: Path, tmp_path: Path, capsys) -> tuple[int, str, dict | None]:
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    rc = cli.main([str(root), "-o", str(out / "r.html"), "--json", str(out / "m.json"), "-q"])
    err = capsys.readouterr().err
    doc = json.loads((out / "m.json").read_text()) if (out / "m.json").exists() else None
    return rc, err, doc


@contextlib.contextmanager
def _memory_bound(extra_bytes: int = 2 << 30):
    """Address space capped at the current size + ``extra_bytes`` while the block runs: a reader that allocates
    from a claimed size fails with MemoryError instead of taking the machine (Linux; no cap elsewhere)."""
    try:
        vm = next(int(ln.split()[1]) * 1024 for ln in Path("/proc/self/status").read_text().splitlines()
                  if ln.startswith("VmSize:"))
    except (OSError, StopIteration):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = vm + extra_bytes if hard == resource.RLIM_INFINITY else min(hard, vm + extra_bytes)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _rank0_steps(run) -> list[int]:
    st = run.tables.get("step_trace")
    return [] if st is None else sorted(st[st["rank"] == 0]["step"].tolist())


# --------------------------------------------------------------------------- strict numbers


def test_strict_float_refuses_what_float_accepts():
    for text in ("nan", "NaN", "inf", "-Infinity", "1_000", "0x10", "\u0661\u0662", "\u00b2", "", " ", "1e99999", "abc"):
        assert limits.strict_float(text) is None, text
    assert [limits.strict_float(t) for t in ("12", " 12 ", "1.5", "-3", "1e3", ".5")] == [12, 12, 1.5, -3, 1000, .5]
    assert limits.finite_value(1e308) == "absurdly large (over 1e+15)"
    assert limits.finite_value(-1.0) == "negative" and limits.finite_value(float("nan")) == "not a number"


BAD_CELLS = ["abc", "nan", "inf", "-5", "1e308", "1_000", "\u0661\u0662", ""]


@pytest.mark.parametrize("column", ["total", "start_point", "tail"])
@pytest.mark.parametrize("value", BAD_CELLS)
def test_step_trace_bad_cell_drops_the_row_and_names_it(bases, tmp_path, column, value):
    run_dir, prof = _copy(bases, tmp_path)
    _set_cell(prof / ST0, 2, column, value)
    run = read_run(run_dir)
    assert _rank0_steps(run) == [2, 3]  # step 1 of rank 0 is not used, whatever the value would have read as
    text = " | ".join(_problems(run, ST0))
    assert f"column '{column}'" in text and "(line 2)" in text and "row skipped" in text


@pytest.mark.parametrize("value", ["nan", "-5", "1e308", "abc"])
def test_step_trace_bad_op_cell_drops_that_op_only(bases, tmp_path, value):
    run_dir, prof = _copy(bases, tmp_path)
    op = "stream_36_0_AllReduce-op4542"
    _set_cell(prof / ST0, 2, op, value)
    run = read_run(run_dir)
    ops = run.tables["step_ops"]
    assert ops[(ops["rank"] == 0) & (ops["step"] == 1) & (ops["op"] == op)].empty
    assert not ops[(ops["rank"] == 0) & (ops["step"] == 2) & (ops["op"] == op)].empty
    assert _rank0_steps(run) == [1, 2, 3]
    assert any(f"column '{op}'" in p and "value skipped" in p for p in _problems(run, ST0))


def test_step_number_that_is_no_step(bases, tmp_path):
    for i, value in enumerate(["\u00b2", "999999999999999999999", "-1", "1.5"]):
        run_dir, prof = _copy(bases, tmp_path / str(i))
        _set_cell(prof / ST0, 2, "step_num", value)
        run = read_run(run_dir)
        assert _rank0_steps(run) == [2, 3], value
        assert any("column 'step_num'" in p for p in _problems(run, ST0)), value


# --------------------------------------------------------------------------- truncation


def _steps_of(path: Path) -> pd.DataFrame:
    st = parse_step_trace(path, [])
    return pd.DataFrame(st.rows + ([dict(st.average, step=-1)] if st.average else []))


def test_tail_cut_to_69_is_not_a_value(bases, tmp_path):
    """The issue's case: the last line cut inside 'tail' (file without its final line break)."""
    run_dir, prof = _copy(bases, tmp_path)
    lines = (prof / ST0).read_bytes().decode().rstrip("\r\n").split("\r\n")
    lines[-1] = ",".join(lines[-1].split(",")[:8] + ["69"])
    (prof / ST0).write_bytes("\r\n".join(lines).encode())
    run = read_run(run_dir)
    assert 0 not in run.tables["step_trace_avg"]["rank"].tolist()
    assert 0.00069 not in run.tables["step_trace"]["tail_ms"].tolist()
    assert any("last line truncated" in p for p in _problems(run, ST0))


def test_full_length_last_row_with_a_cut_last_cell(bases, tmp_path):
    """Base columns only, the last cell cut to a prefix: the row's cells disagree (tail != end - bp)."""
    run_dir, prof = _copy(bases, tmp_path)
    rows = [r.split(",")[:9] for r in (prof / ST0).read_bytes().decode().split("\r\n") if r]
    full_tail = rows[-1][-1]
    rows[-1][-1] = full_tail[:2]
    (prof / ST0).write_bytes("\r\n".join(",".join(r) for r in rows).encode())
    run = read_run(run_dir)
    assert 0 not in run.tables["step_trace_avg"]["rank"].tolist()
    assert any("cells disagree" in p for p in _problems(run, ST0))
    # the same file with its line break is complete and read as written
    (prof / ST0).write_bytes(("\r\n".join(",".join(r) for r in rows[:-1] + [rows[-1][:-1] + [full_tail]]) + "\r\n").encode())
    assert 0 in read_run(run_dir).tables["step_trace_avg"]["rank"].tolist()


def test_row_cut_to_three_cells(bases, tmp_path):
    run_dir, prof = _copy(bases, tmp_path)
    head = (prof / ST0).read_bytes().decode().split("\r\n")[0]
    (prof / ST0).write_bytes((head + "\r\n0,12,5910").encode())
    run = read_run(run_dir)
    assert _rank0_steps(run) == []
    assert 5910 / 1e5 not in run.tables["step_trace"]["fp_bp_ms"].tolist()
    assert any("last line truncated" in p for p in _problems(run, ST0))


def test_every_cut_of_a_step_trace_keeps_only_whole_rows(bases, tmp_path):
    src = bases["flat"] / "profiler" / ST0
    data = src.read_bytes()
    intact = _steps_of(src).set_index("step")
    p = tmp_path / ST0
    for n in range(0, len(data), 53):
        p.write_bytes(data[:n])
        problems: list = []
        try:
            st = parse_step_trace(p, problems)
        except Exception as exc:  # noqa: BLE001 - only InputError is allowed
            assert type(exc).__name__ == "InputError", (n, exc)
            continue
        kept = pd.DataFrame(st.rows + ([dict(st.average, step=-1)] if st.average else [])).set_index("step")
        for step, row in kept.iterrows():
            assert row.equals(intact.loc[step]), (n, step)  # never a cut number
        if n < len(data) - 2:
            assert problems or len(kept) < len(intact), n


def test_cluster_analyse_cuts_and_bad_cells(bases, tmp_path):
    run_dir, prof = _copy(bases, tmp_path)
    ca = next(prof.glob("ascend_cluster_analyse_*_0.csv"))
    text = ca.read_bytes().decode()
    ca.write_bytes(text.rstrip("\r\n")[:-5].encode())  # average row cut inside its last cell
    run = read_run(run_dir)
    assert 0 not in run.tables["cluster_overlap_avg"]["rank"].tolist()
    assert any("last line truncated" in p for p in _problems(run, ca.name))
    ov = run.tables["cluster_overlap"]
    assert sorted(ov[ov["rank"] == 0]["step"]) == [1, 2, 3]
    # a bad cell in the middle drops that step only; the steps after it keep their numbers
    lines = text.split("\r\n")
    lines[2] = "nan," + lines[2].split(",", 1)[1]
    ca.write_bytes("\r\n".join(lines).encode())
    run = read_run(run_dir)
    ov = run.tables["cluster_overlap"]
    assert sorted(ov[ov["rank"] == 0]["step"]) == [1, 3]
    assert any("column 'computation_time' not a number (line 3)" in p for p in _problems(run, ca.name))


# --------------------------------------------------------------------------- whole files: empty, junk, encodings


KINDS = {
    "step_trace": ST0,
    "cluster_analyse": "ascend_cluster_analyse_data-parallel_1_2_0.csv",
    "hccl_raw": "hccl_raw_0.csv",
    "flops_summary": "flops_summary_0.json",
    "memory_usage_summary": "memory_usage_summary_0.json",
    "profiler_info": "profiler_info_0.json",
}


@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest.mark.parametrize("how", ["empty", "junk", "utf16", "cut_early", "deep"])
def test_broken_file_is_a_named_data_problem(bases, tmp_path, kind, how):
    run_dir, prof = _copy(bases, tmp_path)
    p = prof / KINDS[kind]
    data = p.read_bytes()
    p.write_bytes({"empty": b"", "junk": random.Random(1).randbytes(3000), "utf16": data.decode().encode("utf-16"),
                   "cut_early": data[:len(data) // 7], "deep": b"[" * 100_000}[how])
    run = read_run(run_dir)
    assert run.ranks == [0, 1]
    text = " | ".join(_problems(run, p.name))
    json_kind = p.suffix == ".json"
    expected = {"empty": "not valid JSON (empty file)" if json_kind else "empty file", "junk": "not UTF-8",
                "utf16": "UTF-16", "deep": "nested too deeply" if json_kind else "",
                "cut_early": "cut short"}[how]
    assert text and (expected in text or (how == "cut_early" and "truncated" in text)), (kind, how, text)


def test_cell_over_the_csv_field_limit_is_a_data_problem_not_an_internal_error(bases, tmp_path, capsys):
    run_dir, prof = _copy(bases, tmp_path)
    _set_cell(prof / ST0, 2, "total", "9" * 200_000)
    ca = next(prof.glob("ascend_cluster_analyse_*_1.csv"))
    ca.write_bytes(ca.read_bytes().replace(b"\r\n", b"\r\n" + b"1" * 200_000 + b",", 1))
    rc, err, doc = _cli(run_dir, tmp_path, capsys)
    assert rc == 0, err
    text = {Path(p["path"]).name: p["problem"] for p in doc["data_problems"]}
    assert "longer than 128 KiB" in text[ST0] and "line 2" in text[ST0]
    assert "longer than 128 KiB" in text[ca.name]


@pytest.mark.parametrize("name,column", [(ST0, "total"), ("hccl_raw_0.csv", "wait_cost"),
                                         ("ascend_cluster_analyse_data-parallel_1_2_0.csv", "computation")])
def test_duplicate_header_column_skips_the_file(bases, tmp_path, name, column):
    run_dir, prof = _copy(bases, tmp_path)
    p = prof / name
    lines = p.read_bytes().decode().split("\r\n")
    p.write_bytes("\r\n".join(ln + ("," + (column if i == 0 else "1")) if ln else ln
                              for i, ln in enumerate(lines)).encode())
    run = read_run(run_dir)
    assert any("twice in the header" in t or "same value twice" in t for t in _problems(run, name))
    if name == ST0:
        assert _rank0_steps(run) == []


# --------------------------------------------------------------------------- ranks and world size


def test_rank_00_beside_rank_0_one_file_wins(bases, tmp_path):
    run_dir, prof = _copy(bases, tmp_path)
    shutil.copy(prof / ST0, prof / "step_trace_raw_00_detail_time.csv")
    run = read_run(run_dir)
    assert _rank0_steps(run) == [1, 2, 3]  # one row per step, not two
    (text,) = _problems(run, "step_trace_raw_00_detail_time.csv")
    assert f"{ST0} is read" in text and "without leading zeros" in text and "file skipped" in text


@pytest.mark.parametrize("rank", ["1000000000", "1" + "0" * 25, "-1", "\u0663"])
def test_impossible_rank_ids_in_file_names_are_named_and_ignored(bases, tmp_path, rank):
    run_dir, prof = _copy(bases, tmp_path)
    for src, dst in ((ST0, f"step_trace_raw_{rank}_detail_time.csv"), ("hccl_raw_0.csv", f"hccl_raw_{rank}.csv")):
        shutil.copy(prof / src, prof / dst)
    run = read_run(run_dir)
    assert run.ranks == [0, 1] and run.world_size == 2
    for name in (f"step_trace_raw_{rank}_detail_time.csv", f"hccl_raw_{rank}.csv"):
        (text,) = _problems(run, name)
        assert "is not a rank number" in text and "ignored" in text


def _rename_cluster_files(prof: Path, stages: str, size: str) -> str:
    for f in sorted(prof.glob("ascend_cluster_analyse_*.csv")):
        rank = f.stem.rsplit("_", 1)[1]
        f.rename(prof / f"ascend_cluster_analyse_pipeline-parallel_{stages}_{size}_{rank}.csv")
    return f"ascend_cluster_analyse_pipeline-parallel_{stages}_{size}_0.csv"


@pytest.mark.parametrize("size", ["1000000000", "1" + "0" * 25, "0"])
def test_world_size_claim_in_a_file_name_is_checked_not_allocated(bases, tmp_path, size):
    run_dir, prof = _copy(bases, tmp_path)
    name = _rename_cluster_files(prof, "2", size)
    with _memory_bound():
        run = read_run(run_dir)
    assert run.world_size == 2 and run.missing_ranks == []
    assert any("is not a usable rank count" in p for p in _problems(run, name))
    assert run.stage_of(0) == 1 and run.stage_of(1) == 2


def test_large_valid_world_size_claim_gives_a_count_not_a_list(bases, tmp_path):
    run_dir, prof = _copy(bases, tmp_path)
    name = _rename_cluster_files(prof, "2", "1000000")
    with _memory_bound():
        run = read_run(run_dir)
    assert run.world_size == 1_000_000 and run.missing_ranks == []
    assert any("999998 of the 1000000 ranks have no files" in p for p in _problems(run, name))
    assert any("differs from the world size 1000000" in p for p in _problems(run, "profiler_info_1.json"))


def test_large_valid_world_size_with_a_parallel_strategy_stays_small(bases, tmp_path, capsys):
    """The strategy section derives stage devices from the world size: a claim of 10^6 ranks with 2 found must
    not list 10^6 ranks (it took 3.9 GB and wrote a 390 MB page)."""
    run_dir, prof = _copy(bases, tmp_path)
    _rename_cluster_files(prof, "2", "1000000")
    for f in fixture_dir("mindinsight", "mi_parallel_strategy").glob("parallel_strategy_*.json"):
        shutil.copy(f, prof / f.name)
    with _memory_bound(1 << 30):
        rc, err, doc = _cli(run_dir, tmp_path, capsys)
    assert rc == 0, err
    assert (tmp_path / "out" / "r.html").stat().st_size < 20_000_000
    assert doc["sections"]["strategy"]["status"] == "ok"


@pytest.mark.parametrize("stages", ["0", "3", "1000000000"])
def test_stage_count_that_does_not_divide_the_world_is_ignored(bases, tmp_path, stages):
    run_dir, prof = _copy(bases, tmp_path)
    name = _rename_cluster_files(prof, stages, "2")
    run = read_run(run_dir)
    assert "stages" not in run.parallel and run.stage_map == {}
    assert any("is not a whole divisor of the world size 2" in p for p in _problems(run, name))


@pytest.mark.parametrize("value", [10**9, "\u00b2", -1, "abc", 10**25, 1e308])
def test_profiler_info_rank_size_claim(bases, tmp_path, value):
    run_dir, prof = _copy(bases, tmp_path)
    for f in prof.glob("ascend_cluster_analyse_*.csv"):
        f.unlink()  # profiler_info is then the only claim
    for rank in (0, 1):
        p = prof / f"profiler_info_{rank}.json"
        doc = json.loads(p.read_text())
        doc["rank_size"] = value
        p.write_text(json.dumps(doc))
    with _memory_bound():
        run = read_run(run_dir)
    assert run.world_size == 2 and run.missing_ranks == []
    assert any("not a usable rank count" in p for p in _problems(run, "profiler_info_0.json"))


# --------------------------------------------------------------------------- the legacy rank table


@pytest.mark.parametrize("text,says", [
    ('{"server_list":["x",5,null]}', "server_list[0] is a string, not a server object"),
    ('{"server_list":"x"}', "server_list is a string, not a list of servers"),
    ('{"server_list":{}}', "server_list is an object"),
    ('{"server_list":[{"server_id":"10.0.0.1","device":"x"}]}', "server_list[0].device is a string"),
    ('{"server_list":[{"server_id":"10.0.0.1","device":[5,"x",null]}]}', "device[0] is a number"),
    ('{"server_list":[{"server_id":"10.0.0.1","device":[{"device_id":"0"}]}]}', "rank_id None is not a rank number"),
    ('{"server_list":[{"server_id":{"a":1},"device":[]}]}', "server_id is an object"),
    ('{"server_list":[{"server_id":"10.0.0.1","device":[{"device_id":"x","rank_id":"0"}]}]}', "device_id 'x'"),
    ("[1,2]", "not a rank table: a list without a server_list"),
    ("null", "not a rank table"),
    ("", "not valid JSON (empty file)"),
    ("[" * 100_000, "nested too deeply"),
], ids=lambda v: v[:30] if isinstance(v, str) else None)
def test_rank_table_of_the_wrong_shape_is_exit_2_naming_it(bases, tmp_path, capsys, text, says):
    run_dir, _prof = _copy(bases, tmp_path, "legacy")
    (run_dir / "hccl.json").write_text(text)
    rc, err, _doc = _cli(run_dir, tmp_path, capsys)
    assert rc == 2, err
    assert "hccl.json" in err and says in err and "internal error" not in err


@pytest.mark.parametrize("frac", [0.02, 0.3, 0.6, 0.97])
def test_cut_rank_table_says_not_valid_json(bases, tmp_path, capsys, frac):
    run_dir, _prof = _copy(bases, tmp_path, "legacy")
    p = run_dir / "hccl.json"
    text = p.read_text()
    p.write_text(text[: int(len(text) * frac)])
    rc, err, _doc = _cli(run_dir, tmp_path, capsys)
    assert rc == 2 and "hccl.json: not valid JSON" in err and "cut short?" in err
    assert "without a rank table" not in err


def test_rank_table_binary_and_utf16(bases, tmp_path, capsys):
    run_dir, _prof = _copy(bases, tmp_path, "legacy")
    p = run_dir / "hccl.json"
    good = p.read_text()
    for data, says in ((good.encode("utf-16"), "UTF-16"), (random.Random(2).randbytes(600), "not UTF-8")):
        p.write_bytes(data)
        rc, err, _doc = _cli(run_dir, tmp_path, capsys)
        assert rc == 2 and "hccl.json" in err and says in err


def _table(devices: list[dict]) -> str:
    return json.dumps({"server_list": [{"server_id": "10.0.0.1", "device": devices}]})


@pytest.mark.parametrize("bad,says", [
    ({"device_id": "0", "rank_id": "abc"}, "rank_id 'abc' is not a rank number"),
    ({"device_id": "0", "rank_id": "1" + "0" * 25}, "is not a rank number"),
    ({"device_id": "0", "rank_id": -1}, "rank_id -1 is not a rank number"),
    ({"device_id": "0", "rank_id": 1000000}, "rank_id 1000000 is outside 0..1"),
])
def test_bad_rank_table_entry_is_named_and_its_device_skipped(bases, tmp_path, bad, says):
    run_dir, _prof = _copy(bases, tmp_path, "legacy")
    (run_dir / "hccl.json").write_text(_table([bad, {"device_id": "1", "rank_id": "1"}]))
    run = read_run(run_dir)
    assert run.ranks == [1] and run.world_size == 2 and run.missing_ranks == [0]
    assert any(says in p for p in _problems(run, "hccl.json"))
    assert any("not in the rank table" in p for p in _problems(run, ST0))


def test_two_devices_with_one_rank_id(bases, tmp_path):
    run_dir, _prof = _copy(bases, tmp_path, "legacy")
    (run_dir / "hccl.json").write_text(_table([{"device_id": "0", "rank_id": "0"}, {"device_id": "1", "rank_id": "0"}]))
    run = read_run(run_dir)
    assert run.ranks == [0] and _rank0_steps(run) == [1, 2, 3]
    (text,) = [p for p in _problems(run, "hccl.json") if "rank 0" in p]
    assert "again to device 1" in text and "the first is used" in text


# --------------------------------------------------------------------------- hccl_raw, flops, memory


@pytest.mark.parametrize("value", ["abc", "nan", "inf", "-5", "1e308"])
def test_hccl_cost_refused(bases, tmp_path, value):
    run_dir, prof = _copy(bases, tmp_path)
    p = prof / "hccl_raw_0.csv"
    p.write_bytes(p.read_bytes().replace(b"\n1,6.20882,", f"\n1,{value},".encode(), 1))
    run = read_run(run_dir)
    steps = run.tables["comm_rank_step"]
    assert sorted(steps[steps["rank"] == 0]["step"]) == [2, 3]
    assert any("column 'communication_cost'" in t and "(line 2)" in t for t in _problems(run, p.name))


@pytest.mark.parametrize("value", ["NaN", "Infinity", "-5", "1e308"])
def test_hccl_link_value_refused(bases, tmp_path, value):
    src = bases["flat"] / "profiler" / "hccl_raw_0.csv"
    p = tmp_path / "hccl_raw_0.csv"
    p.write_bytes(src.read_bytes().replace(b"[5.498419999999999,", f"[{value},".encode(), 1))
    problems: list = []
    links = parse_hccl_raw(p, 0, problems)["tables"]["links"]
    assert links[["time_ms", "size_mb", "bandwidth_gbps"]].apply(lambda c: c.between(0, 1e15)).all().all()
    assert any("link time" in t and "line 2" in t for _p, t in problems)


@pytest.mark.parametrize("value", ['"abc"', "NaN", "Infinity", "-5", "1e308", "[1]", "true"])
def test_flops_and_memory_values_refused(bases, tmp_path, value):
    run_dir, prof = _copy(bases, tmp_path)
    (prof / "flops_summary_0.json").write_text('{"FLOPs": %s, "FLOPS": 70200.898, "FLOPS_Utilization": %s}'
                                               % (value, value))
    (prof / "memory_usage_summary_0.json").write_text('{"capacity": 31.0, "peak_mem": %s}' % value)
    run = read_run(run_dir)
    fl = run.tables["mi_flops"].set_index("rank")
    assert pd.isna(fl.loc[0, "flops"]) and pd.isna(fl.loc[0, "utilization_ratio"])
    assert fl.loc[0, "flops_per_s"] == pytest.approx(70200.898e9)
    assert 0 not in run.tables["mi_memory_summary"]["rank"].tolist()
    assert any("refused" in t and "FLOPs" in t for t in _problems(run, "flops_summary_0.json"))
    assert any("peak_mem" in t and "file skipped" in t for t in _problems(run, "memory_usage_summary_0.json"))


def test_flops_detail_and_memory_details(bases, tmp_path):
    run_dir, prof = _copy(bases, tmp_path)
    (prof / "flops_0.txt").write_text("op_full_name, MFLOPs(10^6), GFLOPS(10^9), FLOPS utilization(%)\n"
                                      "Default/MatMul-op1, 333, 333, 33\nDefault/MatMul-op2, nan, 333, 33\n"
                                      "Default/Add-op3, 12, 3, 1e308\nDefault/Add-op4, 12")
    (prof / "memory_usage_details_0.json").write_text(
        '{"0": {"lines": [1.0, NaN, 1e308, -1, 2.0], "fp_start": 1e308, "bp_end": 2}}')
    run = read_run(run_dir)
    ops = run.tables["mi_flops_ops"]
    assert ops[ops["rank"] == 0]["op"].tolist() == ["Default/MatMul-op1"]
    text = " | ".join(_problems(run, "flops_0.txt"))
    assert "column 'MFLOPs(10^6)' not a number (line 3)" in text
    assert "column 'FLOPS utilization(%)' absurdly large" in text and "last line truncated" in text
    lines = run.tables["mi_memory_lines"]
    assert lines[lines["rank"] == 0]["node_index"].tolist() == [0, 4]
    marks = run.tables["mi_memory_marks"]
    assert marks[marks["rank"] == 0]["mark"].tolist() == ["backward end"]


# --------------------------------------------------------------------------- strategy and timeline (fixture copies)


def test_parallel_strategy_bad_ids(bases, tmp_path):
    src = json.loads(fixture_dir("mindinsight", "mi_parallel_strategy", "parallel_strategy_0.json").read_text())
    for i, (key, value, says) in enumerate([("rankId", 10**25, "config.rankId"), ("rankId", -1, "config.rankId"),
                                            ("stageId", "abc", "config.stageId")]):
        run_dir, prof = _copy(bases, tmp_path / str(i))
        doc = json.loads(json.dumps(src))
        doc["config"][key] = value
        (prof / "parallel_strategy_0.json").write_text(json.dumps(doc))
        run = read_run(run_dir)
        assert any(says in p for p in _problems(run, "parallel_strategy_0.json")), key
        ops = run.tables["strategy_ops"]
        assert set(ops["rank"]) == {0}  # the file name's rank, never the bad one
    (prof / "parallel_strategy_0.json").write_text('{"config":{},"graph":{"node":[{"name":"1","fullName":"a",'
                                                   '"attribute":[{"name":"x","value":' + '[' * 50_000 + '}]}]}}')
    assert _problems(read_run(run_dir), "parallel_strategy_0.json")


@pytest.mark.parametrize("key,value,says", [("ts", "abc", "not a number"), ("dur", -5, "negative"),
                                            ("dur", 1e308, "beyond the int64 ns range"),
                                            ("dur", 9e10, "over one day"), ("ts", None, "missing")])
def test_timeline_event_values(bases, tmp_path, key, value, says):
    src = fixture_dir("mindinsight", "mi_run_2_dp_rank1", "profiler", "ascend_timeline_display_1.json")
    events = json.loads(src.read_text())
    target = next(e for e in events if "-op" in e.get("name", "") and e.get("ph") == "X")
    target[key] = value
    events.append({"name": "\u00b2", "ph": "X", "tid": 100000, "ts": 1, "dur": 1, "pid": 1})
    run_dir, prof = _copy(bases, tmp_path)
    (prof / "ascend_timeline_display_0.json").write_text(json.dumps(events))
    run = read_run(run_dir)
    text = " | ".join(_problems(run, "ascend_timeline_display_0.json"))
    assert f"event '{key}' {says}" in text
    ops = run.tables["mi_timeline_ops"]
    assert ops["dur_ms"].between(0, limits.MAX_DURATION_MS).all()


# --------------------------------------------------------------------------- MindSpore CPU profiler files


@pytest.fixture
def cpu_run(tmp_path) -> tuple[Path, Path]:
    root = tmp_path / "cpu"
    shutil.copytree(fixture_dir("generated", "mindspore_cpu_ms_single_new_graph"), root)
    ops = next(root.rglob("cpu_op_execute_timestamp_*.txt"))
    return root, ops


@pytest.mark.parametrize("value,says", [("nan", "not a number"), ("inf", "not a number"), ("-0.5", "negative"),
                                        ("1e308", "over one day"), ("99999999", "over one day")])
def test_cpu_op_duration_refused(cpu_run, value, says):
    root, ops = cpu_run
    text = ops.read_text()
    first = text.split(";", 3)[2].split()[0]  # start,dur,tid of the first execution
    start, dur, tid = first.split(",")
    ops.write_text(text.replace(first, f"{start},{value},{tid}", 1))
    run = read_run(root)
    assert run.tables["device_ops"]["dur_ms"].between(0, limits.MAX_DURATION_MS).all()
    assert any(f"execution duration {says}" in p for p in _problems(run, ops.name))


def test_cpu_files_cut_and_bad_start(cpu_run):
    root, ops = cpu_run
    text = ops.read_text()
    ops.write_text(text.replace(text.split(";", 3)[2].split(",")[0], "abc", 1).rstrip()[:-3])
    mem = next(root.rglob("cpu_ms_memory_record_*.txt"))
    mem.write_text(mem.read_text().rstrip()[:-3])
    run = read_run(root)
    problems = " | ".join(_problems(run, ops.name))
    assert "execution start not a whole number" in problems and "last entry cut short" in problems
    assert any("last line truncated" in p for p in _problems(run, mem.name))


# --------------------------------------------------------------------------- never an internal error


def test_former_internal_errors_end_in_a_report(bases, tmp_path, capsys):
    """Each of these was exit 1 (an internal error) before: a superscript step number, a JSON Infinity in
    link_info, a deeply nested profiler_info."""
    run_dir, prof = _copy(bases, tmp_path)
    _set_cell(prof / ST0, 2, "step_num", "\u00b2")
    p = prof / "hccl_raw_1.csv"
    p.write_bytes(p.read_bytes().replace(b"[", b"[Infinity, ", 1))
    (prof / "profiler_info_1.json").write_text("[" * 100_000)
    rc, err, doc = _cli(run_dir, tmp_path, capsys)
    assert rc == 0, err
    named = {Path(p["path"]).name for p in doc["data_problems"]}
    assert {ST0, "hccl_raw_1.csv", "profiler_info_1.json"} <= named
