"""Hostile and broken Ascend input (issue 14): every refused value is named, never used, never an internal error.

Inputs are built at test time: a small generated run (reportgen.synth.write_ascend_run), a small trace_view.json and
small SQLite exports written here, each then damaged one way. Each case checks the outcome class (a data problem
naming the file, line/row and column, or exit 2 naming the file; never exit 1) and that the bad number is not used.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest

from reportgen.cli import main
from reportgen.errors import InputError
from reportgen.limits import MAX_RANKS
from reportgen.readers import ascend
from reportgen.readers.ascend import (parse_communication, parse_kernel_details, parse_matrix, parse_memory_record,
                                      parse_npu_module_mem, parse_op_statistic, parse_operator_memory,
                                      parse_step_trace_time)
from reportgen.readers.ascend_db import read_db_rank
from reportgen.readers.ascend_trace import read_trace_view
from reportgen.synth import AscendSpec, write_ascend_run

OUT = "ASCEND_PROFILER_OUTPUT"
#: file -> (parser, numeric columns the parser reads, columns where a negative value is a valid measurement)
CSVS = {
    "step_trace_time.csv": (parse_step_trace_time, ["Step", "Computing", "Communication(Not Overlapped)",
                                                    "Overlapped", "Communication", "Free", "Stage", "Bubble",
                                                    "Communication(Not Overlapped and Exclude Receive)",
                                                    "Preparing"],
                            {"Communication(Not Overlapped and Exclude Receive)"}),
    "kernel_details.csv": (parse_kernel_details, ["Step Id", "Stream ID", "Start Time(us)", "Duration(us)"], set()),
    "op_statistic.csv": (parse_op_statistic, ["Count", "Total Time(us)", "Avg Time(us)", "Min Time(us)",
                                              "Max Time(us)"], set()),
    "memory_record.csv": (parse_memory_record, ["Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                                                "Total Active(MB)"], set()),
    "npu_module_mem.csv": (parse_npu_module_mem, ["Timestamp(us)", "Total Reserved(MB)"], set()),
    "operator_memory.csv": (parse_operator_memory, ["Size(KB)", "Allocation Time(us)", "Release Time(us)",
                                                    "Duration(us)"], set()),
}
BAD = ["abc", "nan", "inf", "-inf", "1e308", "1e400", "-5"]


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("ascend") / "run"
    write_ascend_run(root, AscendSpec(hosts=1, devices_per_host=2, stages=1, steps=3))
    return root


@pytest.fixture
def run(base, tmp_path) -> Path:
    """A private copy of the generated run, to damage."""
    shutil.copytree(base, tmp_path / "run")
    return tmp_path / "run"


def rank_dir(root: Path, rank: int = 0) -> Path:
    return next(d for d in root.iterdir() if (d / f"profiler_info_{rank}.json").exists())


def parse(parser, path: Path):
    problems: list = []
    return parser(path, 0, problems), problems


def texts(problems) -> str:
    return "\n".join(f"{Path(p).name}: {t}" for p, t in problems)


def cli(root: Path, tmp_path: Path) -> tuple[int, str, dict | None]:
    """reportgen in-process: (exit code, stderr, the --json document when written)."""
    err = io.StringIO()
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([str(root), "-o", str(out / "r.html"), "--json", str(out / "m.json"), "-q"])
    doc = json.loads((out / "m.json").read_text()) if code in (0, 3) else None
    return code, err.getvalue(), doc


def numbers(doc):
    """Every number in a JSON document."""
    if isinstance(doc, dict):
        for v in doc.values():
            yield from numbers(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from numbers(v)
    elif isinstance(doc, (int, float)) and not isinstance(doc, bool):
        yield doc


def set_cell(path: Path, column: str, value: str, row: int = 1) -> None:
    rows = list(csv.reader(path.read_text().splitlines()))
    rows[row][[c.strip() for c in rows[0]].index(column)] = value
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    path.write_text(buf.getvalue())


def row_set(df: pd.DataFrame) -> set:
    return set(df.astype(str).itertuples(index=False, name=None))


# --------------------------------------------------------------------------- CSV values


@pytest.mark.parametrize("value", BAD)
@pytest.mark.parametrize("fname,column", [(f, c) for f, (_p, cols, _n) in CSVS.items() for c in cols])
def test_every_numeric_csv_cell_is_checked(run, fname, column, value):
    parser, _cols, signed = CSVS[fname]
    path = rank_dir(run) / OUT / fname
    full, _ = parse(parser, path)
    set_cell(path, column, value)
    got, problems = parse(parser, path)
    if value == "-5" and column in signed:
        assert len(got) == len(full)
        return
    assert len(got) == len(full) - 1, texts(problems)
    assert row_set(got) <= row_set(full)  # the damaged row is gone, every other row is as it was
    assert any(p == str(path) and f"column '{column}'" in t and "(line 2)" in t for p, t in problems), texts(problems)


def test_issue_example_cut_step_row_is_not_computing_5_91_ms(run):
    path = rank_dir(run) / OUT / "step_trace_time.csv"
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines[:-1] + ["0,12,5910"]))  # the last row cut, no newline at the end
    got, problems = parse(parse_step_trace_time, path)
    assert len(got) == len(lines) - 2
    assert not (got["computing_ms"] - 5.91).abs().lt(1e-9).any()
    assert "row has 3 fields, the header 11; the file ends inside it without a newline (truncated?) (line 4)" \
        in texts(problems)


@pytest.mark.parametrize("fname", sorted(CSVS))
def test_a_file_cut_anywhere_never_yields_a_cut_value(run, fname):
    parser = CSVS[fname][0]
    path = rank_dir(run) / OUT / fname
    data = path.read_bytes()
    full, _ = parse(parser, path)
    cuts = {len(data) * k // 7 for k in range(1, 7)} | {len(data) - 1, len(data) - 2, len(data) - 4,
                                                        data.rfind(b",") + 1}
    for cut in sorted(cuts):
        path.write_bytes(data[:cut])
        try:
            got, problems = parse(parser, path)
        except InputError as exc:  # cut inside the header
            assert exc.path == str(path)
            continue
        assert row_set(got) <= row_set(full), f"cut at {cut}"
        if len(got) < len(full) - (data[cut:].count(b"\n") - 1):
            assert problems, f"cut at {cut}: rows lost without a data problem"


def test_last_cell_cut_without_newline_is_refused(run):
    path = rank_dir(run) / OUT / "step_trace_time.csv"
    text = path.read_text().rstrip("\n")
    path.write_text(text[:-2])  # "...,633.764" -> "...,633.7"
    got, problems = parse(parse_step_trace_time, path)
    assert len(got) == text.count("\n") - 1
    assert "column 'Preparing' may be cut: the last line does not end in a newline" in texts(problems)


def test_an_unused_last_column_may_lack_its_newline(run):
    """Real files (kernel_details of msprof-analyze's tests) end without a newline; a last column no parser reads
    cannot mislead, so that row is kept."""
    path = rank_dir(run) / OUT / "memory_record.csv"  # last column: Device Type
    full, _ = parse(parse_memory_record, path)
    path.write_text(path.read_text().rstrip("\n"))
    got, problems = parse(parse_memory_record, path)
    assert len(got) == len(full) and problems == []


@pytest.mark.parametrize("damage,expected", [
    (lambda b: b"", "empty file"),
    (lambda b: b"\n\n  \n", "empty file"),
    (lambda b: bytes(range(256)) * 20, "not UTF-8"),
    (lambda b: b.decode().encode("utf-16"), "not UTF-8 text (binary, UTF-16"),
    (lambda b: b.decode().encode("utf-16-le"), "not UTF-8 text (binary, UTF-16"),
    (lambda b: b[:40] + b"\xff\xfe\xfa" + b[40:], "not UTF-8"),
    (lambda b: b.replace(b"Computing,", b"Computing,Computing,", 1), "column 'Computing' appears twice in the header"),
    (lambda b: b.replace(b"Free,", b"Fre,", 1), "missing column(s) Free"),
])
def test_unusable_csv_is_one_error_naming_the_file(run, damage, expected):
    path = rank_dir(run) / OUT / "step_trace_time.csv"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(InputError) as exc:
        parse(parse_step_trace_time, path)
    assert exc.value.path == str(path) and expected in exc.value.problem


def test_header_only_says_so(run):
    path = rank_dir(run) / OUT / "step_trace_time.csv"
    path.write_text(path.read_text().splitlines()[0] + "\n")
    got, problems = parse(parse_step_trace_time, path)
    assert got.empty and texts(problems) == "step_trace_time.csv: no data rows (only the header)"


@pytest.mark.parametrize("fname", sorted(CSVS))
def test_repeated_header_long_row_and_huge_cell(run, fname):
    parser = CSVS[fname][0]
    path = rank_dir(run) / OUT / fname
    full, _ = parse(parser, path)
    lines = path.read_text().splitlines()
    lines.insert(2, lines[0])                           # line 3: the header again (two files concatenated)
    lines.insert(4, lines[1] + ",extra")                 # line 5: one field too many
    lines.insert(6, "x" * 200_000 + "," + lines[1])       # line 7: a cell over the csv field limit (128 KiB)
    path.write_text("\n".join(lines) + "\n")
    got, problems = parse(parser, path)
    assert len(got) == len(full) + 0 and row_set(got) <= row_set(full)
    text = texts(problems)
    assert "the row repeats the header (files concatenated?) (line 3)" in text
    assert "fields, the header" in text and "(line 5)" in text
    assert "a cell longer than 131072 characters (line 7)" in text


def test_names_are_capped(run):
    path = rank_dir(run) / OUT / "kernel_details.csv"
    set_cell(path, "Name", "K" * 100_000)
    got, _ = parse(parse_kernel_details, path)
    assert got["name"].str.len().max() < 4200 and "…[+" in got["name"].iloc[0]


# --------------------------------------------------------------------------- JSON shapes and values


def comm_op(doc: dict) -> dict:
    step = next(iter(doc.values()))
    kind = next(iter(step.values()))
    return kind[next(iter(kind))]


@pytest.mark.parametrize("value,reason", [("abc", "not a number"), (-5, "negative"), (1e308, "over one day"),
                                          ("NaN", "not a number"), ("1e400", "infinite"), ([1], "not a number"),
                                          (True, "not a number"), (None, "missing")])
def test_communication_time_values(run, value, reason):
    path = rank_dir(run) / OUT / "communication.json"
    full, _ = parse(parse_communication, path)
    doc = json.loads(path.read_text())
    comm_op(doc)["Communication Time Info"]["Elapse Time(ms)"] = value
    text = json.dumps(doc)
    if value == "NaN":
        text = text.replace('"NaN"', "NaN")  # the JSON literal, as Python's json writes a float nan
    if value == "1e400":
        text = text.replace('"1e400"', "1e400")
    path.write_text(text)
    (ops, bws), problems = parse(parse_communication, path)
    assert len(ops) == len(full[0]) - 1
    assert ops["elapse_ms"].between(0, 86_400_000).all()
    assert f"1 entry skipped: 'Elapse Time(ms)' {reason} (entry step11/collective/" in texts(problems)


@pytest.mark.parametrize("field,value,reason", [
    ("Transit Size(MB)", -1, "negative"), ("Transit Size(MB)", 1e308, "larger than 1 PB"),
    ("Bandwidth(GB/s)", "x", "not a number"), ("Large Packet Ratio", 7, "larger than 1"),
    ("Transit Time(ms)", 1e300, "over one day")])
def test_communication_bandwidth_values(run, field, value, reason):
    path = rank_dir(run) / OUT / "communication.json"
    doc = json.loads(path.read_text())
    comm_op(doc)["Communication Bandwidth Info"]["HCCS"][field] = value
    path.write_text(json.dumps(doc))
    (_ops, bws), problems = parse(parse_communication, path)
    assert f"'{field}' {reason}" in texts(problems) and "/HCCS)" in texts(problems)
    assert bws["size_mb"].max() < 1e9 and bws["time_ms"].max() < 86_400_000


def test_communication_start_times(run):
    path = rank_dir(run) / OUT / "communication.json"
    (full, _bws), _ = parse(parse_communication, path)
    doc = json.loads(path.read_text())
    ops = [op for step in doc.values() for kind in step.values() for key, op in kind.items()
           if not key.startswith("Total Op Info")]
    ops[0]["Communication Time Info"]["Start Timestamp(us)"] = 1e308
    ops[1]["Communication Time Info"]["Start Timestamp(us)"] = -3
    path.write_text(json.dumps(doc))
    (got, _bws), problems = parse(parse_communication, path)
    assert len(got) == len(full) - 2
    assert "'Start Timestamp(us)' not a time" in texts(problems) and "'Start Timestamp(us)' negative" in texts(problems)


SHAPES = [[1], None, "text", 5]


@pytest.mark.parametrize("level", ["top", "step", "kind", "op", "time_info", "bandwidth_info", "transport"])
@pytest.mark.parametrize("wrong", SHAPES, ids=["list", "null", "str", "number"])
def test_communication_shapes(run, level, wrong):
    path = rank_dir(run) / OUT / "communication.json"
    doc = json.loads(path.read_text())
    first_step = next(iter(doc))
    if level == "top":
        doc = wrong
    elif level == "step":
        doc[first_step] = wrong
    elif level == "kind":
        doc[first_step]["collective"] = wrong
    else:
        op = comm_op(doc)
        if level == "op":
            kind = doc[first_step]["collective"]
            kind[next(iter(kind))] = wrong
        elif level == "time_info":
            op["Communication Time Info"] = wrong
        elif level == "bandwidth_info":
            op["Communication Bandwidth Info"] = wrong
        else:
            op["Communication Bandwidth Info"]["HCCS"] = wrong
    path.write_text(json.dumps(doc))
    if level == "top":
        with pytest.raises(InputError) as exc:
            parse(parse_communication, path)
        assert exc.value.path == str(path)
        return
    (_ops, _bws), problems = parse(parse_communication, path)
    assert "not an object" in texts(problems) or "missing" in texts(problems), texts(problems)


@pytest.mark.parametrize("mutate,expected", [
    (lambda links: links.update({"0-" + "9" * 25: next(iter(links.values()))}), "the link key is not <src>-<dst>"),
    (lambda links: links.update({"a-b": next(iter(links.values()))}), "the link key is not <src>-<dst>"),
    (lambda links: links.update({"-1-0": next(iter(links.values()))}), "the link key is not <src>-<dst>"),
    (lambda links: next(iter(links.values())).update({"Transit Size(MB)": -2}), "'Transit Size(MB)' negative"),
    (lambda links: next(iter(links.values())).update({"Bandwidth(GB/s)": 1e30}), "'Bandwidth(GB/s)' larger than 10^6"),
    (lambda links: links.update({k: [1] for k in links}), "is a list, not an object"),
])
def test_matrix_links(run, mutate, expected):
    path = rank_dir(run) / OUT / "communication_matrix.json"
    doc = json.loads(path.read_text())
    mutate(comm_op(doc))
    path.write_text(json.dumps(doc))
    got, problems = parse(parse_matrix, path)
    assert expected in texts(problems)
    assert got["src_local"].max() < MAX_RANKS and got["size_mb"].min() >= 0 and got["bandwidth_gbps"].max() < 1e6


@pytest.mark.parametrize("fname", ["communication.json", "communication_matrix.json"])
@pytest.mark.parametrize("damage,expected", [
    (lambda b: b[: len(b) // 2], "not valid JSON"), (lambda b: b"", "empty file"),
    (lambda b: bytes(range(256)) * 8, "not UTF-8"), (lambda b: b.decode().encode("utf-16"), "not UTF-8"),
    (lambda b: b"[" * 100_000, "nested too deeply"), (lambda b: b'{"step' + b"9" * 40 + b'": {}}', "is not step<N>"),
])
def test_communication_files_damaged(run, fname, damage, expected):
    path = rank_dir(run) / OUT / fname
    path.write_bytes(damage(path.read_bytes()))
    parser = parse_communication if fname == "communication.json" else parse_matrix
    try:
        _got, problems = parse(parser, path)
    except InputError as exc:
        assert exc.path == str(path) and expected in exc.problem
    else:
        assert expected in texts(problems)


# --------------------------------------------------------------------------- ranks and world size


def read_run(root: Path):
    return ascend.read(root)


def problem_texts(run_model) -> str:
    return "\n".join(f"{Path(p.path).name}: {p.problem}" for p in run_model.problems)


@pytest.mark.parametrize("claim,expected", [
    (10**9, "distributed_args.world_size 1000000000 is not a usable rank count (1..1048576); the ranks found"),
    (10**25, "is not a usable rank count"), (-1, "-1 is not a usable rank count"),
    ("abc", "'abc' is not a usable rank count"), (1.5, "1.5 is not a usable rank count"),
    (1, "distributed_args.world_size 1 is smaller than the ranks found (highest rank 1); 2 is used"),
])
def test_world_size_claims_checked(run, claim, expected):
    for d in run.iterdir():
        meta = json.loads((d / "profiler_metadata.json").read_text())
        meta["distributed_args"]["world_size"] = claim
        (d / "profiler_metadata.json").write_text(json.dumps(meta))
    got = read_run(run)
    assert got.world_size == 2 and got.missing_ranks == [] and got.ranks == [0, 1]
    assert expected in problem_texts(got)


def test_a_large_valid_claim_is_counted_not_listed(run):
    d = rank_dir(run, 1)
    meta = json.loads((d / "profiler_metadata.json").read_text())
    meta["distributed_args"]["world_size"] = MAX_RANKS
    (d / "profiler_metadata.json").write_text(json.dumps(meta))
    got = read_run(run)
    text = problem_texts(got)
    assert "distributed_args.world_size differs between files" in text and "2 (the smallest) was used" in text
    assert got.world_size == 2
    for d in run.iterdir():  # every file says so: the claim holds, the missing ranks are a count
        meta = json.loads((d / "profiler_metadata.json").read_text())
        meta["distributed_args"]["world_size"] = MAX_RANKS
        (d / "profiler_metadata.json").write_text(json.dumps(meta))
    got = read_run(run)
    assert got.world_size == MAX_RANKS and got.missing_ranks == []
    assert f"{MAX_RANKS - 2} of the {MAX_RANKS} ranks have no profiler directory (too many to list)" \
        in problem_texts(got)


@pytest.mark.parametrize("members,expected", [
    (["a", "b"], "member 'a' is not a rank number in 0..1048575; group ignored"),
    ([0, None], "member None is not a rank number"), ([0, 10**25], "member 10000000000000000000000000 is not"),
    ([0, -1], "member -1 is not a rank number"), ([0, 1.5], "member 1.5 is not"), ([0, 0], "lists a rank twice"),
    ({"a": 1}, "no global_ranks list; group ignored"), ("0,1", "no global_ranks list"),
    (list(range(MAX_RANKS + 1)), f"lists {MAX_RANKS + 1} ranks, more than {MAX_RANKS}; group ignored"),
    ([0, 1, 7], "lists rank 7, beyond the world size 2 (distributed_args.world_size); group ignored"),
])
def test_global_ranks_checked(run, members, expected):
    d = rank_dir(run)
    meta = json.loads((d / "profiler_metadata.json").read_text())
    meta["parallel_group_info"]["group_name_1"]["global_ranks"] = members
    (d / "profiler_metadata.json").write_text(json.dumps(meta))
    got = read_run(run)
    assert expected in problem_texts(got)
    groups = got.tables["groups"]
    assert all(0 <= r < 2 for ranks in groups["ranks"] for r in ranks)


@pytest.mark.parametrize("where,wrong", [("distributed_args", [1]), ("parallel_group_info", [1, 2]),
                                         ("parallel_group_info", "x"), ("distributed_args", None),
                                         ("top", [1]), ("top", None), ("top", "x")])
def test_metadata_shapes(run, where, wrong):
    d = rank_dir(run)
    meta = json.loads((d / "profiler_metadata.json").read_text())
    if where == "top":
        meta = wrong
    else:
        meta[where] = wrong
    (d / "profiler_metadata.json").write_text(json.dumps(meta))
    got = read_run(run)  # no exception; rank 1's metadata still tells the world size
    assert got.world_size == 2
    if wrong is not None or where == "top":
        assert "profiler_metadata.json" in problem_texts(got)


@pytest.mark.parametrize("name,expected", [
    ("profiler_info_1000000000.json", "rank id in the file name '1000000000' is not a rank number in 0..1048575"),
    ("profiler_info_" + "9" * 25 + ".json", "is not a rank number in 0..1048575; ignored"),
    ("profiler_info_-1.json", "rank id in the file name '-1' is not a rank number"),
])
def test_impossible_rank_ids_in_file_names(run, name, expected):
    d = rank_dir(run, 1)
    info = json.loads((d / "profiler_info_1.json").read_text())
    (d / "profiler_info_1.json").unlink()
    info.pop("rank_id", None)
    (d / name).write_text(json.dumps(info))
    got = read_run(run)
    assert expected in problem_texts(got)
    assert got.ranks == [0] and "no rank found" in problem_texts(got)


@pytest.mark.parametrize("value", [-1, 10**9, 10**25, "x", None])
def test_impossible_rank_id_fields(run, value):
    d = rank_dir(run, 1)
    info = json.loads((d / "profiler_info_1.json").read_text())
    (d / "profiler_info_1.json").unlink()
    info["rank_id"] = value
    (d / "profiler_info.json").write_text(json.dumps(info))
    got = read_run(run)
    assert got.ranks == [0]
    assert f"rank_id {value!r} is not a rank number" in problem_texts(got)


def test_duplicate_rank_directories_say_which_wins_and_why(run):
    older, newer = rank_dir(run, 0), rank_dir(run, 1)  # the directory names' time stamps: ...000 < ...003
    (older / "profiler_info_0.json").rename(older / "profiler_info_1.json")
    got = read_run(run)
    assert got.ranks == [1]
    assert (f"rank 1 also in {newer.name}, which was used (newer by the time stamp in its name); this directory "
            f"was skipped") in problem_texts(got)


def test_two_rank_files_in_one_directory(run):
    d = rank_dir(run, 0)
    shutil.copy(d / "profiler_info_0.json", d / "profiler_info_5.json")
    got = read_run(run)
    assert "profiler_info files name ranks 0, 5; rank 0 (profiler_info_0.json, the lowest) was used" \
        in problem_texts(got)


def test_metadata_rank_disagreeing(run):
    d = rank_dir(run, 0)
    meta = json.loads((d / "profiler_metadata.json").read_text())
    meta["distributed_args"]["rank"] = 1
    (d / "profiler_metadata.json").write_text(json.dumps(meta))
    got = read_run(run)
    assert got.ranks == [0, 1]
    assert "distributed_args.rank 1 disagrees with profiler_info_0.json (rank 0); rank 0 was used" \
        in problem_texts(got)


@pytest.mark.parametrize("key,value", [("pipeline_model_parallel_size", 10**9), ("tensor_model_parallel_size", -1),
                                       ("data_parallel_size", "x")])
def test_parallel_sizes_checked(run, key, value):
    for d in run.iterdir():
        meta = json.loads((d / "profiler_metadata.json").read_text())
        meta["distributed_args"][key] = value
        (d / "profiler_metadata.json").write_text(json.dumps(meta))
    got = read_run(run)
    assert f"distributed_args.{key} {value!r} is not a size in 1..2; ignored" in problem_texts(got)
    assert all(v is None or isinstance(v, str) or v <= 2 for v in got.parallel.values())


# --------------------------------------------------------------------------- trace_view.json


def trace_events(t0_us: int = 1_700_000_000_000_000) -> list:
    """A small torch_npu-like trace: 3 ProfilerSteps, Overlap Analysis lanes, HCCL and Ascend Hardware ops."""
    ev = [{"ph": "M", "name": "process_name", "pid": p, "tid": 0, "args": {"name": n}}
          for p, n in ((1, "Python"), (2, "Overlap Analysis"), (3, "HCCL"), (4, "Ascend Hardware"))]
    ev += [{"ph": "M", "name": "thread_name", "pid": 2, "tid": t, "args": {"name": n}}
           for t, n in ((0, "Computing"), (1, "Communication"), (2, "Communication(Not Overlapped)"), (3, "Free"))]
    ev += [{"ph": "M", "name": "thread_name", "pid": 3, "tid": 0, "args": {"name": "Group 0 Communication"}},
           {"ph": "M", "name": "thread_name", "pid": 4, "tid": 7, "args": {"name": "Stream 7"}}]
    for i in range(3):
        s = t0_us + i * 10_000
        ev += [{"ph": "X", "name": f"ProfilerStep#{i + 1}", "pid": 1, "tid": 0, "ts": f"{s}.000", "dur": 9_000},
               {"ph": "X", "name": "Computing", "pid": 2, "tid": 0, "ts": f"{s + 100}.000", "dur": 6_000},
               {"ph": "X", "name": "Communication", "pid": 2, "tid": 1, "ts": f"{s + 5_000}.000", "dur": 3_000},
               {"ph": "X", "name": "Communication(Not Overlapped)", "pid": 2, "tid": 2, "ts": f"{s + 6_100}.000",
                "dur": 1_900},
               {"ph": "X", "name": "Free", "pid": 2, "tid": 3, "ts": f"{s + 8_000}.000", "dur": 1_000},
               {"ph": "X", "name": "hcom_allReduce__1_1", "pid": 3, "tid": 0, "ts": f"{s + 5_000}.000", "dur": 3_000},
               {"ph": "X", "name": "MatMul", "pid": 4, "tid": 7, "ts": f"{s + 100}.000", "dur": 6_000,
                "args": {"Task Type": "AI_CORE"}}]
    return ev


@pytest.mark.parametrize("field,value,reason", [
    ("dur", -5, "'dur' negative"), ("dur", 1e308, "'dur' not a number (or beyond the int64 ns range)"),
    ("dur", 90_000_000_000, "'dur' over one day"), ("ts", 1e308, "'ts' not a time"), ("ts", "-7.000", "'ts' negative"),
    ("ts", "9223372036854775.000", "'ts' + 'dur' beyond the int64 ns range"), ("ts", "abc", "'ts' not a time"),
    ("pid", [1], "'pid' neither a number nor text"),
])
def test_trace_view_times(tmp_path, field, value, reason):
    events = trace_events()
    bad = [i for i, e in enumerate(events) if e.get("name") == "MatMul"][1]
    events[bad][field] = value
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))
    problems: list = []
    tables = read_trace_view(path, 0, problems)
    assert f"1 event skipped: {reason}" in texts(problems) and f"(event {bad + 1})" in texts(problems)
    ops = tables["device_ops"]
    assert len(ops) == 2 and ops["dur_ms"].between(0, 86_400_000).all() and ops["start_ns"].min() >= 0


def test_trace_view_step_numbers_bounded(tmp_path):
    events = trace_events()
    next(e for e in events if e["name"] == "ProfilerStep#2")["name"] = "ProfilerStep#999999999999999999999"
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(events))
    problems: list = []
    tables = read_trace_view(path, 0, problems)
    assert tables["trace_steps"]["step"].tolist() == [1, 3]
    assert "1 step event(s) with a step number above 2147483647 skipped" in texts(problems)


def test_trace_view_in_a_run_derives_steps_without_bad_events(run, tmp_path):
    """step_trace_time.csv absent: the step times come from the trace; a negative Overlap Analysis duration is
    refused, not subtracted."""
    for d in run.iterdir():
        (d / OUT / "step_trace_time.csv").unlink()
        events = trace_events()
        if d == rank_dir(run):
            next(e for e in events if e.get("name") == "Free")["dur"] = -1_000_000
        (d / OUT / "trace_view.json").write_text(json.dumps(events))
    got = read_run(run)
    st = got.tables["step_time"]
    assert (st["free_ms"] >= 0).all() and (st["step_ms"] > 0).all()
    assert "1 event skipped: 'dur' negative" in problem_texts(got)


# --------------------------------------------------------------------------- DB exports


T0 = 1_700_000_000_000_000_000


def write_dbs(out: Path) -> None:
    """A tiny analysis.db and ascend_pytorch_profiler_0.db with the tables the reader uses (3 steps)."""
    a = sqlite3.connect(out / "analysis.db")
    a.execute("CREATE TABLE StepTraceTime (deviceId INTEGER, step TEXT, computing NUMERIC, "
              "communication_not_overlapped NUMERIC, overlapped NUMERIC, communication NUMERIC, free NUMERIC, "
              "stage NUMERIC, bubble NUMERIC, communication_not_overlapped_and_exclude_receive NUMERIC, "
              "preparing NUMERIC)")
    a.executemany("INSERT INTO StepTraceTime VALUES (0, ?, 6000, 1900, 1100, 3000, 1000, 8900, 0, 1900, 100)",
                  [(str(i),) for i in (1, 2, 3)])
    a.execute("CREATE TABLE CommAnalyzerTime (hccl_op_name TEXT, group_name TEXT, start_timestamp NUMERIC, "
              "elapse_time NUMERIC, transit_time NUMERIC, wait_time NUMERIC, synchronization_time NUMERIC, "
              "idle_time NUMERIC, step TEXT, type TEXT)")
    a.executemany("INSERT INTO CommAnalyzerTime VALUES ('hcom_allReduce__1_1', '123', ?, 3.0, 2.5, 0.5, 0, 0, "
                  "?, 'collective')", [(1_700_000_000_000_000 + i * 10_000 + 5_000, f"step{i}") for i in (1, 2, 3)])
    a.execute("CREATE TABLE CommAnalyzerBandwidth (hccl_op_name TEXT, group_name TEXT, transport_type TEXT, "
              "transit_size NUMERIC, transit_time NUMERIC, bandwidth NUMERIC, large_packet_ratio NUMERIC, "
              "package_size NUMERIC, count NUMERIC, total_duration NUMERIC, step TEXT, type TEXT)")
    a.executemany("INSERT INTO CommAnalyzerBandwidth VALUES ('hcom_allReduce__1_1', '123', 'HCCS', 64, 2.5, 25.6, "
                  "1, 64, 1, 2.5, ?, 'collective')", [(f"step{i}",) for i in (1, 2, 3)])
    a.execute("CREATE TABLE CommAnalyzerMatrix (hccl_op_name TEXT, group_name TEXT, src_rank TEXT, dst_rank TEXT, "
              "transport_type TEXT, transit_size NUMERIC, transit_time NUMERIC, bandwidth NUMERIC, step TEXT, "
              "type TEXT, op_name TEXT)")
    a.executemany("INSERT INTO CommAnalyzerMatrix VALUES ('allreduce-top1', '123', '0', '1', 'HCCS', 64, 2.5, "
                  "25.6, ?, 'collective', 'hcom_allReduce__1_1')", [(f"step{i}",) for i in (1, 2, 3)])
    a.commit()
    a.close()
    p = sqlite3.connect(out / "ascend_pytorch_profiler_0.db")
    p.executescript("""
        CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
        INSERT INTO STRING_IDS VALUES (1, 'MatMul'), (2, 'AI_CORE'), (3, 'hcom_allReduce__1_1'), (4, 'group'),
            (5, 'APP'), (6, 'aten::empty');
        CREATE TABLE TASK (startNs INTEGER, endNs INTEGER, deviceId INTEGER, connectionId INTEGER,
            globalTaskId INTEGER, globalPid INTEGER, taskType INTEGER, contextId INTEGER, streamId INTEGER,
            taskId INTEGER, modelId INTEGER);
        CREATE TABLE COMPUTE_TASK_INFO (name INTEGER, globalTaskId INTEGER PRIMARY KEY, blockDim INTEGER,
            mixBlockDim INTEGER, taskType INTEGER, opType INTEGER);
        CREATE TABLE COMMUNICATION_OP (opName INTEGER, startNs INTEGER, endNs INTEGER, connectionId INTEGER,
            groupName INTEGER, opId INTEGER PRIMARY KEY, relay INTEGER, retry INTEGER, dataType INTEGER,
            algType INTEGER, count NUMERIC, opType INTEGER);
        CREATE TABLE STEP_TIME (id INTEGER, startNs INTEGER, endNs INTEGER);
        CREATE TABLE MEMORY_RECORD (component INTEGER, timestamp INTEGER, totalAllocated INTEGER,
            totalReserved INTEGER, totalActive INTEGER, streamPtr INTEGER, deviceId INTEGER);
        CREATE TABLE ENUM_MODULE (id INTEGER PRIMARY KEY, name TEXT);
        INSERT INTO ENUM_MODULE VALUES (1, 'SLOG');
        CREATE TABLE NPU_MODULE_MEM (moduleId INTEGER, timestampNs INTEGER, totalReserved NUMERIC,
            deviceId INTEGER);
        CREATE TABLE OP_MEMORY (name INTEGER, size INTEGER, allocationTime INTEGER, releaseTime INTEGER,
            activeReleaseTime INTEGER, duration INTEGER, activeDuration INTEGER, deviceId INTEGER);
        CREATE TABLE META_DATA (name TEXT, value TEXT);
        CREATE TABLE RANK_DEVICE_MAP (rankId INTEGER, deviceId INTEGER);
        INSERT INTO RANK_DEVICE_MAP VALUES (0, 0);
    """)
    for i in range(3):
        s = T0 + i * 10_000_000
        p.execute("INSERT INTO STEP_TIME VALUES (?, ?, ?)", (i + 1, s, s + 9_000_000))
        p.execute("INSERT INTO TASK VALUES (?, ?, 0, ?, ?, 0, 2, 0, 7, ?, 0)",
                  (s + 100_000, s + 6_100_000, i, 10 + i, i))
        p.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (1, ?, 8, 0, 2, 1)", (10 + i,))
        p.execute("INSERT INTO COMMUNICATION_OP VALUES (3, ?, ?, ?, 4, ?, 0, 0, 0, 0, 1, 3)",
                  (s + 5_000_000, s + 8_000_000, 100 + i, i))
        p.execute("INSERT INTO MEMORY_RECORD VALUES (5, ?, 1000000, 2000000, 1500000, 0, 0)", (s,))
        p.execute("INSERT INTO NPU_MODULE_MEM VALUES (1, ?, 3000000, 0)", (s,))
        p.execute("INSERT INTO OP_MEMORY VALUES (6, 4096, ?, ?, ?, 1000, 1000, 0)", (s, s + 1000, s + 1000))
    p.execute("INSERT INTO META_DATA VALUES ('distributed_args', ?)", (json.dumps({"world_size": 2}),))
    p.execute("INSERT INTO META_DATA VALUES ('parallel_group_info', ?)",
              (json.dumps({"group_name_1": {"group_name": "dp", "group_rank": 0, "global_ranks": [0, 1]}}),))
    p.commit()
    p.close()


ALL_DB_TABLES = {"step_time", "comm_ops", "comm_bandwidth", "comm_matrix", "kernels", "memory_record", "module_mem",
                 "operator_memory", "trace_steps", "overlap_intervals", "hccl_ops", "device_ops", "metadata"}


@pytest.fixture
def db_dir(tmp_path) -> Path:
    d = tmp_path / "rank0_ascend_pt"
    (d / OUT).mkdir(parents=True)
    write_dbs(d / OUT)
    return d


def read_db(d: Path):
    problems: list = []
    return read_db_rank(d, 0, ALL_DB_TABLES, problems), problems


def test_the_tiny_db_reads_clean(db_dir):
    got, problems = read_db(db_dir)
    assert {"step_time", "comm_ops", "comm_bandwidth", "comm_matrix", "kernels", "memory_record", "module_mem",
            "operator_memory", "trace_steps", "hccl_ops", "device_ops", "metadata"} <= set(got)
    assert len(got["step_time"]) == 3 and len(got["kernels"]) == 6
    assert not [t for _p, t in problems if "skipped" in t], texts(problems)


DB_CASES = [  # (file, table, column, value, the table read from it, its column, the reason)
    ("analysis.db", "StepTraceTime", "computing", "'abc'", "step_time", "computing_ms", "not a number"),
    ("analysis.db", "StepTraceTime", "free", "-5", "step_time", "free_ms", "negative"),
    ("analysis.db", "StepTraceTime", "communication_not_overlapped", "9e999", "step_time", "comm_not_overlapped_ms",
     "infinite"),
    ("analysis.db", "StepTraceTime", "computing", "1e300", "step_time", "computing_ms", "over one day"),
    ("analysis.db", "StepTraceTime", "step", "'step99999999999999999999'", "step_time", "step", "not a step number"),
    ("analysis.db", "CommAnalyzerTime", "elapse_time", "'x'", "comm_ops", "elapse_ms", "not a number"),
    ("analysis.db", "CommAnalyzerTime", "wait_time", "-1", "comm_ops", "wait_ms", "negative"),
    ("analysis.db", "CommAnalyzerTime", "start_timestamp", "1e308", "comm_ops", "start_ns", "not a time"),
    ("analysis.db", "CommAnalyzerBandwidth", "transit_size", "-1", "comm_bandwidth", "size_mb", "negative"),
    ("analysis.db", "CommAnalyzerBandwidth", "bandwidth", "9e999", "comm_bandwidth", "bandwidth_gbps", "infinite"),
    ("analysis.db", "CommAnalyzerMatrix", "src_rank", "'99999999999'", "comm_matrix", "src_local",
     "not a rank index"),
    ("analysis.db", "CommAnalyzerMatrix", "transit_time", "'abc'", "comm_matrix", "time_ms", "not a number"),
    ("ascend_pytorch_profiler_0.db", "TASK", "endNs", "'abc'", "kernels", "dur_ms", "not a time"),
    ("ascend_pytorch_profiler_0.db", "TASK", "endNs", "startNs - 5", "kernels", "dur_ms", "before its startNs"),
    ("ascend_pytorch_profiler_0.db", "TASK", "endNs", "startNs + 100000000000000", "kernels", "dur_ms",
     "over one day"),
    ("ascend_pytorch_profiler_0.db", "TASK", "startNs", "-3", "device_ops", "start_ns", "negative"),
    ("ascend_pytorch_profiler_0.db", "TASK", "streamId", "'s'", "device_ops", "stream", "not a number"),
    ("ascend_pytorch_profiler_0.db", "TASK", "deviceId", "'d'", "device_ops", "stream", "not a number"),
    ("ascend_pytorch_profiler_0.db", "COMMUNICATION_OP", "startNs", "1.5e300", "hccl_ops", "start_ns", "not a time"),
    ("ascend_pytorch_profiler_0.db", "STEP_TIME", "startNs", "'abc'", "trace_steps", "start_ns", "not a time"),
    ("ascend_pytorch_profiler_0.db", "STEP_TIME", "id", "'x'", "trace_steps", "step", "not a step number"),
    ("ascend_pytorch_profiler_0.db", "MEMORY_RECORD", "totalReserved", "'abc'", "memory_record", "reserved_mb",
     "not a number"),
    ("ascend_pytorch_profiler_0.db", "MEMORY_RECORD", "totalAllocated", "9e999", "memory_record", "allocated_mb",
     "infinite"),
    ("ascend_pytorch_profiler_0.db", "MEMORY_RECORD", "timestamp", "'t'", "memory_record", "ts_ns", "not a time"),
    ("ascend_pytorch_profiler_0.db", "NPU_MODULE_MEM", "totalReserved", "-1", "module_mem", "reserved_mb",
     "negative"),
    ("ascend_pytorch_profiler_0.db", "OP_MEMORY", "size", "'abc'", "operator_memory", "size_mb", "not a number"),
    ("ascend_pytorch_profiler_0.db", "OP_MEMORY", "duration", "-4", "operator_memory", "duration_ms", "negative"),
]


@pytest.mark.parametrize("fname,table,column,value,out,out_col,reason", DB_CASES,
                         ids=[f"{c[1]}.{c[2]}={c[3]}" for c in DB_CASES])
def test_every_db_value_is_checked(db_dir, fname, table, column, value, out, out_col, reason):
    full, _ = read_db(db_dir)
    c = sqlite3.connect(db_dir / OUT / fname)
    c.execute(f'UPDATE "{table}" SET "{column}" = {value} WHERE rowid = 2')
    c.commit()
    c.close()
    got, problems = read_db(db_dir)
    assert len(got[out]) == len(full[out]) - 1, texts(problems)
    text = texts(problems)
    assert f"1 row skipped: {table}.{column}" in text and reason in text and "(row 2)" in text, text
    values = got[out][out_col]
    if values.dtype.kind == "f":
        assert values.dropna().between(-1e15, 1e15).all()


@pytest.mark.parametrize("statement,expected", [
    ("UPDATE RANK_DEVICE_MAP SET deviceId = 'abc'", "RANK_DEVICE_MAP holds a deviceId that is not a device number"),
    ("UPDATE RANK_DEVICE_MAP SET rankId = 99999999999999", "RANK_DEVICE_MAP says rankId 99999999999999, not a rank"),
    ("DROP TABLE STRING_IDS", "no STRING_IDS table (id, value): names are shown as their string ids"),
    ("DROP TABLE TASK", "the kernels are the communication ops only"),
    ("DROP TABLE STEP_TIME", "no STEP_TIME rows"),
    ("ALTER TABLE NPU_MODULE_MEM DROP COLUMN totalReserved", "no NPU_MODULE_MEM table"),
])
def test_db_missing_or_garbage_tables(db_dir, statement, expected):
    c = sqlite3.connect(db_dir / OUT / "ascend_pytorch_profiler_0.db")
    c.execute(statement)
    c.commit()
    c.close()
    _got, problems = read_db(db_dir)
    assert expected in texts(problems)


@pytest.mark.parametrize("fname", ["analysis.db", "ascend_pytorch_profiler_0.db"])
@pytest.mark.parametrize("damage,expected", [
    (lambda b: b[: len(b) // 2], "unreadable SQLite database"), (lambda b: b"", "not an SQLite database"),
    (lambda b: bytes(range(256)) * 40, "not an SQLite database"),
    (lambda b: b[:100] + bytes(range(256)) * ((len(b) - 100) // 256 + 1), "unreadable SQLite database"),
])
def test_db_files_damaged(db_dir, fname, damage, expected):
    path = db_dir / OUT / fname
    path.write_bytes(damage(path.read_bytes()))
    _got, problems = read_db(db_dir)
    assert any(p == str(path) and expected in t for p, t in problems), texts(problems)


def db_run(run: Path) -> Path:
    """The generated run with rank 0's text files replaced by the tiny DB export (its metadata in META_DATA)."""
    d = rank_dir(run)
    for f in (d / OUT).iterdir():
        f.unlink()
    (d / "profiler_metadata.json").unlink()
    write_dbs(d / OUT)
    return d / OUT / "ascend_pytorch_profiler_0.db"


@pytest.mark.parametrize("name,value,expected", [
    ("parallel_group_info", {"g": {"group_name": "dp", "global_ranks": ["a", 1]}},
     "parallel_group_info group 'g': member 'a' is not a rank number"),
    ("parallel_group_info", [1, 2], "parallel_group_info is a list, not an object; ignored"),
    ("parallel_group_info", "[[[", "META_DATA parallel_group_info: not JSON; ignored"),
    ("distributed_args", {"world_size": 10**9}, "distributed_args.world_size 1000000000 is not a usable rank count"),
])
def test_db_meta_data_claims_checked(run, name, value, expected):
    db = db_run(run)
    c = sqlite3.connect(db)
    c.execute("DELETE FROM META_DATA WHERE name = ?", (name,))
    c.execute("INSERT INTO META_DATA VALUES (?, ?)", (name, value if isinstance(value, str) else json.dumps(value)))
    c.commit()
    c.close()
    got = read_run(run)
    assert expected in problem_texts(got) and got.world_size == 2


# --------------------------------------------------------------------------- end to end: the outcome class


def damage_csv_cell(fname, column, value):
    return lambda run: set_cell(rank_dir(run) / OUT / fname, column, value)


E2E = {
    "step cell 1e308": (damage_csv_cell("step_trace_time.csv", "Computing", "1e308"),
                        "step_trace_time.csv", "column 'Computing' over one day"),
    "kernel duration inf": (damage_csv_cell("kernel_details.csv", "Duration(us)", "inf"),
                            "kernel_details.csv", "column 'Duration(us)' infinite"),
    "memory -5": (damage_csv_cell("memory_record.csv", "Total Reserved(MB)", "-5"),
                  "memory_record.csv", "column 'Total Reserved(MB)' negative"),
    "world size 10^9": (lambda run: [(d / "profiler_metadata.json").write_text(
        (d / "profiler_metadata.json").read_text().replace('"world_size": 2', '"world_size": 1000000000'))
        for d in run.iterdir()], "profiler_metadata.json", "is not a usable rank count"),
    "global ranks text": (lambda run: (rank_dir(run) / "profiler_metadata.json").write_text(
        (rank_dir(run) / "profiler_metadata.json").read_text().replace('"global_ranks": [0, 1]',
                                                                        '"global_ranks": ["a", "b"]')),
        "profiler_metadata.json", "is not a rank number"),
    "communication op a list": (lambda run: (rank_dir(run) / OUT / "communication.json").write_text(
        json.dumps({"step11": {"collective": [1, 2]}})), "communication.json", "is a list, not an object"),
    "matrix null": (lambda run: (rank_dir(run) / OUT / "communication_matrix.json").write_text("null"),
                    "communication_matrix.json", "found null; file skipped"),
    "op_statistic junk": (lambda run: (rank_dir(run) / OUT / "op_statistic.csv").write_bytes(bytes(range(256)) * 9),
                          "op_statistic.csv", "not UTF-8"),
    "huge cell": (lambda run: (rank_dir(run) / OUT / "step_trace_time.csv").write_text(
        (rank_dir(run) / OUT / "step_trace_time.csv").read_text() + "0,14," + "9" * 200_000 + "\n"),
        "step_trace_time.csv", "a cell longer than 131072 characters"),
}


@pytest.mark.parametrize("name", sorted(E2E))
def test_end_to_end_a_data_problem_and_no_bad_number(run, tmp_path, name):
    damage, fname, expected = E2E[name]
    damage(run)
    code, err, doc = cli(run, tmp_path)
    assert code in (0, 2, 3), err  # never an internal error
    assert "Traceback" not in err
    if code == 2:
        assert fname in err
        return
    problems = [p for p in doc["data_problems"] if Path(p["path"]).name == fname]
    assert any(expected in p["problem"] for p in problems), doc["data_problems"]
    assert all(math.isfinite(x) and abs(x) < 1e15 for x in numbers(doc["sections"])
               if isinstance(x, float)), "a refused number reached the report"
    assert doc["run"]["world_size"] == 2 and len(doc["run"]["missing_ranks"]) <= 2


@pytest.mark.parametrize("fname", ["communication.json", "communication_matrix.json"])
def test_a_key_twice_is_refused_by_the_fast_path_too(run, fname):
    """Issue 29 #2 as a class: msgspec (the fast path) keeps the last value of a key given twice, silently; the
    key counts send such a file to the checked path, which names it. An op given twice in one step lost one op."""
    from malformed_corpus import op_given_twice

    path = rank_dir(run) / OUT / fname
    op = op_given_twice(path)
    parser = parse_communication if fname == "communication.json" else parse_matrix
    with pytest.raises(InputError) as exc:
        parse(parser, path)
    assert "appears twice in one object" in exc.value.problem and op[:20] in exc.value.problem


def _csv_both_ways(path, want, monkeypatch):
    """(cols, lines, rejects, header) or the InputError text of ``ascend.Csv`` on ``path``: by its plain-file path
    where it applies, and by csv.reader alone (the plain path switched off)."""
    def read():
        rejects = ascend.Rejects()
        try:
            t = ascend.Csv(path, rejects, want)
        except InputError as exc:
            return str(exc)
        return t.cols, t.lines, t.header, t.bad.tolist(), {k: [v[0], list(v[1])] for k, v in rejects.kinds.items()}

    fast = read()
    with monkeypatch.context() as m:
        m.setattr(ascend.Csv, "_read_plain", lambda self, want, ends_nl: False)
        slow = read()
    return fast, slow


@pytest.mark.parametrize("seed", range(12))
def test_a_csv_read_without_a_step_per_row_is_the_csv_module_read(tmp_path, monkeypatch, request, seed):
    """Csv reads a plain file (no quote, CR or NUL, every line the header's field count) by splitting its lines,
    in blocks; anything else by csv.reader. Both give the same cells, line numbers and refusals on random files
    with the damage real exports have (short and long rows, a repeated header, blank lines, quotes, CRLF, a BOM, a
    cut last line, non-ASCII and undecodable bytes), and across block boundaries (a small block here)."""
    import random

    monkeypatch.setattr(ascend, "PLAIN_BLOCK", 64)
    if seed % 2:  # a field limit under the longest cell (70) and under many lines: csv.reader refuses those cells
        old_limit = csv.field_size_limit(60)
        request.addfinalizer(lambda: csv.field_size_limit(old_limit))
    limit = csv.field_size_limit()
    took = []
    real = ascend.Csv._read_plain
    monkeypatch.setattr(ascend.Csv, "_read_plain", lambda self, *a: took.append(real(self, *a)) or took[-1])
    rng = random.Random(seed)
    header = ["Name", "Type", "Start Time(us)", "Duration(us)", "Extra"]
    cells = ["a", "b c", "1.5", "-2", "", "1e308", "ü", "x" * 70, " 7 ", "nan", "N/A"]
    for case in range(40):
        rows = [",".join(rng.choice(cells) for _ in header) for _ in range(rng.randrange(0, 30))]
        damage = rng.choice(["none", "none", "none", "short", "long", "header", "blank", "quote", "crlf", "bom",
                             "cut", "bytes", "one column"])
        lines = [",".join(header), *rows]
        if damage == "short" and rows:
            lines[rng.randrange(1, len(lines))] = "a,b"
        elif damage == "long" and rows:
            lines[rng.randrange(1, len(lines))] += ",extra"
        elif damage == "header" and rows:
            lines.insert(rng.randrange(1, len(lines)), lines[0])
        elif damage == "blank":
            lines.insert(rng.randrange(0, len(lines) + 1), "")
        elif damage == "quote" and rows:
            lines[-1] = '"a,b",' + lines[-1].split(",", 1)[1]
        elif damage == "one column":
            lines = ["Name", *(r.split(",")[0] for r in rows)]
        text = ("\r\n" if damage == "crlf" else "\n").join(lines) + ("" if damage == "cut" else "\n")
        data = text.encode()
        if damage == "bom":
            data = b"\xef\xbb\xbf" + data
        elif damage == "bytes":
            data = data[:-1] + b"\xff\n"  # the last cell not UTF-8
        p = tmp_path / f"{seed}-{case}.csv"
        p.write_bytes(data)
        for want in (None, {"Name", "Duration(us)", "Extra"}, {"Type"}):
            fast, slow = _csv_both_ways(p, want, monkeypatch)
            assert fast == slow, (damage, want)
        if damage in ("none", "cut", "bom"):  # the plain path read them (a line over the block size too)
            assert took[-3:] == [max(map(len, lines)) <= limit] * 3
        elif damage in ("short", "long", "header", "quote", "crlf", "bytes", "one column") and len(lines) > 1:
            assert not any(took[-3:])


def test_a_header_cell_over_the_field_limit_is_named(tmp_path, monkeypatch):
    """A header cell longer than the csv module's field limit was an internal error (csv.Error out of the header
    read); it is the file's one-line refusal, by either read, naming the header's line."""
    p = tmp_path / "kernel_details.csv"
    p.write_text("x" * (csv.field_size_limit() + 10) + ",Duration(us)\n1,2\n")
    fast, slow = _csv_both_ways(p, None, monkeypatch)
    assert fast == slow and "line 1: the header row cannot be read (field larger than field limit" in fast
    p.write_text("\n\n" + p.read_text())  # after two blank lines
    fast, slow = _csv_both_ways(p, None, monkeypatch)
    assert fast == slow and "line 3: the header row cannot be read" in fast
