"""Hostile and broken PyTorch Kineto input (issue 14): every value the reader turns into a time, count, rank or
name is checked at the edge. Each case mutates a small generated run (2 ranks, built at test time) and asserts the
outcome class (data problem naming the file and the field, or exit 2 naming the file) and that the bad value is
not used."""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import math
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from reportgen import limits
from reportgen.cli import main
from reportgen.errors import InputError
from reportgen.readers import kineto
from reportgen.synth import KinetoSpec, write_kineto_run

DAY_MS = limits.MAX_DURATION_MS


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("kineto_base")
    write_kineto_run(root, KinetoSpec(hosts=1, devices_per_host=2, stages=1, steps=3, gzip=False))
    return root


@pytest.fixture(scope="module")
def good(base):
    return kineto.read(base)


@pytest.fixture
def run_dir(base, tmp_path) -> Path:
    d = tmp_path / "run"
    shutil.copytree(base, d)
    return d


def rank_file(d: Path, rank: int = 0) -> Path:
    for p in sorted(d.glob("*.pt.trace.json")):
        if json.loads(p.read_text())["distributedInfo"]["rank"] == rank:
            return p
    raise AssertionError(f"no rank {rank} file")


def mutate(d: Path, fn, rank: int = 0) -> Path:
    p = rank_file(d, rank)
    doc = json.loads(p.read_text())
    fn(doc)
    p.write_text(json.dumps(doc))
    return p


def events(doc, pred):
    return [e for e in doc["traceEvents"] if pred(e)]


def is_kernel(e):
    return e.get("cat") == "kernel"


def is_nccl(e):
    return e.get("cat") == "kernel" and "Collective name" in e.get("args", {})


def is_step(e):
    return str(e.get("name", "")).startswith("ProfilerStep#")


def is_memory(e):
    return e.get("name") == "[memory]"


def is_param_comms(e):
    return e.get("name") == "record_param_comms"


def is_mm(e):
    return e.get("name") == "aten::mm"


def problems_of(run, path: Path) -> list[str]:
    return [p.problem for p in run.problems if Path(p.path).name == path.name]


def one_problem(run, path: Path, *words: str) -> str:
    hits = [t for t in problems_of(run, path) if all(w in t for w in words)]
    assert hits, (words, [(p.path, p.problem) for p in run.problems])
    return hits[0]


def cli(args) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        rc = main([str(a) for a in args] + ["-q", "--jobs", "1"])
    return rc, err.getvalue()


# -- times and durations ------------------------------------------------------------------------------------------

TIME_CASES = [  # (event kind, field, value, words of the problem)
    ("kernel", "dur", -1533.073, ("field 'dur'", "negative", "traceEvents[")),
    ("kernel", "dur", 1e308, ("field 'dur'", "over one day")),
    ("kernel", "dur", "nan", ("field 'dur'", "not a number")),
    ("kernel", "dur", True, ("field 'dur'", "not a number")),
    ("kernel", "dur", 2 * 86_400e6, ("field 'dur'", "over one day", "event at ts")),
    ("kernel", "ts", 1e308, ("field 'ts'", "out of range")),
    ("kernel", "ts", "soon", ("field 'ts'", "not a number")),
    ("kernel", "ts", [1], ("field 'ts'", "not a number")),
    ("kernel", "ts", 0, ("field 'ts'", "more than one day away", "event at ts 0")),
    ("kernel", "ts", 9e15, ("field 'ts'", "out of range")),
    ("step", "dur", "inf", ("field 'dur'", "infinite")),
    ("step", "dur", -75079.849, ("field 'dur'", "negative")),
    ("step", "ts", -5e12, ("field 'ts'", "more than one day away")),
]


@pytest.mark.parametrize("kind,field,value,words", TIME_CASES, ids=lambda v: str(v)[:20])
def test_bad_time_is_refused_and_named(run_dir, good, kind, field, value, words):
    pred = is_kernel if kind == "kernel" else is_step
    path = mutate(run_dir, lambda doc: events(doc, pred)[0].__setitem__(field, value))
    run = kineto.read(run_dir)
    assert one_problem(run, path, *words).startswith("1 event skipped")
    assert run.ranks == [0, 1]
    if kind == "kernel":
        g, g0 = run.tables["gpu_ops"], good.tables["gpu_ops"]
        assert len(g[g["rank"] == 0]) == len(g0[g0["rank"] == 0]) - 1
        assert (g["dur_ms"] >= 0).all() and (g["dur_ms"] <= DAY_MS).all()
        span = g["end_ms"].max() - g["start_ms"].min()
        assert span <= (good.tables["gpu_ops"]["end_ms"].max() - good.tables["gpu_ops"]["start_ms"].min()) + 1
    else:
        st = run.tables["trace_steps"]
        assert len(st[st["rank"] == 0]) == 2  # 3 steps, the bad one refused
    step_ms = run.tables["step_time"]["step_ms"]
    assert (step_ms >= 0).all() and (step_ms <= DAY_MS).all()


def test_negated_durations_never_give_negative_steps(run_dir):
    def negate(doc):
        for e in doc["traceEvents"]:
            if "dur" in e:
                e["dur"] = -e["dur"]

    path = mutate(run_dir, negate)
    run = kineto.read(run_dir)
    text = one_problem(run, path, "events skipped", "field 'dur'", "negative")
    n = int(text.split()[0])  # each refused event counted once (a CPU op is read as an op and as a host span)
    doc = json.loads(path.read_text())
    assert 0 < n <= sum(1 for e in doc["traceEvents"] if e.get("dur", 0) < 0)
    st = run.tables["step_time"]
    assert set(st["rank"]) == {1} and (st["step_ms"] > 0).all()
    for name in ("gpu_ops", "collectives", "cpu_ops", "host_ops"):
        if name in run.tables:
            assert (run.tables[name]["dur_ms"] >= 0).all(), name


@pytest.mark.parametrize("name", ["ProfilerStep#999999999999999999999", "ProfilerStep#-5", "ProfilerStep#abc",
                                  "ProfilerStep#"])
def test_bad_step_number(run_dir, name):
    path = mutate(run_dir, lambda doc: events(doc, is_step)[0].__setitem__("name", name))
    run = kineto.read(run_dir)
    one_problem(run, path, "1 span ignored", "ProfilerStep#N", "not a step number")
    assert run.steps == [10, 11, 12]
    st = run.tables["trace_steps"]
    assert sorted(st.loc[st["rank"] == 0, "step"]) == [11, 12]


# -- ranks, world size, process groups ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", [10 ** 9, 10 ** 7, [1, 2], -3, "many", 0, 2.5, None])
def test_world_size_claim_is_checked(run_dir, value):
    path = mutate(run_dir, lambda doc: doc["distributedInfo"].__setitem__("world_size", value))
    run = kineto.read(run_dir)
    one_problem(run, path, "distributedInfo.world_size", "is not a usable rank count")
    assert run.world_size == 2 and run.missing_ranks == []


def test_large_valid_world_size_is_a_count_not_a_list(run_dir):
    for r in (0, 1):
        mutate(run_dir, lambda doc: doc["distributedInfo"].__setitem__("world_size", 10 ** 6), rank=r)
    run = kineto.read(run_dir)
    assert run.world_size == 10 ** 6
    assert run.missing_ranks == []
    assert any("999998 of its ranks have no trace (not listed" in p.problem for p in run.problems)


def test_conflicting_world_sizes_are_named(run_dir):
    path = mutate(run_dir, lambda doc: doc["distributedInfo"].__setitem__("world_size", 8))
    run = kineto.read(run_dir)
    one_problem(run, path, "world_size differs between files (2, 8)", "the largest, 8")
    assert run.world_size == 8 and run.missing_ranks == [2, 3, 4, 5, 6, 7]


@pytest.mark.parametrize("ranks", [["a", "b"], [None, 1], [[0], [1]], [{"r": 0}, 1], [0, 10 ** 25], [0, -1],
                                   [0, 1.5], [0, True]], ids=repr)
def test_pg_config_ranks_that_are_not_ranks(run_dir, ranks):
    path = mutate(run_dir, lambda doc: doc["distributedInfo"]["pg_config"][0].__setitem__("ranks", ranks))
    run = kineto.read(run_dir)
    one_problem(run, path, "pg_config group '0'", "not a rank number", "group ignored")
    # rank 1 lists the same group correctly: its list is the one used
    g = run.tables["groups"]
    assert list(g["ranks"]) == [[0, 1]]


def test_pg_config_not_a_list_and_entries_not_groups(run_dir):
    p0 = mutate(run_dir, lambda doc: doc["distributedInfo"].__setitem__("pg_config", {"0": {"ranks": [0, 1]}}))
    p1 = mutate(run_dir, lambda doc: doc["distributedInfo"]["pg_config"].extend([5, {"ranks": "x"}]), rank=1)
    run = kineto.read(run_dir)
    one_problem(run, p0, "pg_config is not a list")
    one_problem(run, p1, "2 entries without a 'ranks' list")
    assert list(run.tables["groups"]["ranks"]) == [[0, 1]]


def test_million_rank_group_is_never_expanded(run_dir):
    def big(doc):
        doc["distributedInfo"]["pg_config"][0]["ranks"] = list(range(10 ** 6))
        doc["distributedInfo"]["world_size"] = 10 ** 6

    path = mutate(run_dir, big)
    run = kineto.read(run_dir)
    one_problem(run, path, "lists 1000000 ranks; only the 2 with a trace are kept")
    assert max(len(r) for r in run.tables["groups"]["ranks"]) <= kineto.MAX_LISTED_RANKS
    assert len(run.missing_ranks) <= kineto.MAX_LISTED_RANKS


def test_group_rank_outside_the_world_is_refused(run_dir):
    path = mutate(run_dir, lambda doc: doc["distributedInfo"]["pg_config"][0].__setitem__("ranks", list(range(50))))
    run = kineto.read(run_dir)
    one_problem(run, path, "lists rank 2, outside the world size 2", "group ignored")
    assert run.missing_ranks == []


@pytest.mark.parametrize("value", [10 ** 9, 10 ** 25, -1, 0.5, None, "abc", [0]], ids=repr)
def test_impossible_rank_id_is_named_and_ignored(run_dir, value):
    path = mutate(run_dir, lambda doc: doc["distributedInfo"].__setitem__("rank", value))
    run = kineto.read(run_dir)
    one_problem(run, path, "distributedInfo.rank", "is not a rank number")
    one_problem(run, path, "skipped")
    assert run.ranks == [1]


def test_rank_in_file_name_beyond_the_ceiling(run_dir):
    p = rank_file(run_dir, 0)
    doc = json.loads(p.read_text())
    del doc["distributedInfo"]["rank"]
    p.unlink()
    bad = run_dir / "rank99999999999999999999.pt.trace.json"
    bad.write_text(json.dumps(doc))
    run = kineto.read(run_dir)
    one_problem(run, bad, "rank in the file name", "not a rank number")
    assert run.ranks == [1]


def test_duplicate_rank_says_which_file_wins_and_why(run_dir):
    full = rank_file(run_dir, 0)
    copy = mutate(run_dir, lambda doc: (doc["distributedInfo"].__setitem__("rank", 0),
                                       doc.__setitem__("traceEvents", doc["traceEvents"][:200])), rank=1)
    run = kineto.read(run_dir)
    text = one_problem(run, copy, "rank 0 (from distributedInfo.rank) is also claimed by", "this file was skipped")
    assert full.name in text and "more events read" in text
    assert run.ranks == [0]
    assert dict(run.tables["files"][["rank", "path"]].values)[0] == str(full)


def test_distributed_info_field_types(run_dir):
    def garble(doc):
        doc["distributedInfo"]["backend"] = "b" * 100_000
        doc["host_name"] = ["not", "a", "name"]

    path = mutate(run_dir, garble)
    mutate(run_dir, lambda doc: doc["distributedInfo"].__setitem__("rank", "1"), rank=1)  # a decimal string is a rank
    run = kineto.read(run_dir)
    assert run.ranks == [0, 1]
    assert len(run.layout) < 300
    one_problem(run, path, "host_name ['not', 'a', 'name'] is not a host name; ignored")


# -- collective args -----------------------------------------------------------------------------------------------

NCCL_ARGS = [  # (arg, value, column, words)
    ("Src Rank", "abc", "src_rank", "not an integer in -1..1048575"),
    ("Dst Rank", 10 ** 25, "dst_rank", "not an integer in -1..1048575"),
    ("Dst Rank", 5, "dst_rank", "beyond the world size 2"),
    ("In msg nelems", -100, "in_nelems", "not an integer in 0..2^48"),
    ("In msg nelems", 1e30, "in_nelems", "not an integer in 0..2^48"),
    ("In msg nelems", "12abc", "in_nelems", "not an integer in 0..2^48"),
    ("Out msg nelems", [3], "out_nelems", "not an integer in 0..2^48"),
    ("Group size", 10 ** 9, "group_size", "not an integer in 1..1048576"),
    ("Group size", 64, "group_size", "beyond the world size 2"),
    ("Group size", [1], "group_size", "not an integer in 1..1048576"),
]


@pytest.mark.parametrize("arg,value,column,words", NCCL_ARGS, ids=lambda v: str(v)[:16])
def test_bad_nccl_kernel_args(run_dir, arg, value, column, words):
    def garble(doc):
        for e in events(doc, is_nccl):
            e["args"][arg] = value

    path = mutate(run_dir, garble)
    run = kineto.read(run_dir)
    one_problem(run, path, "values ignored", f"field args[{arg!r}]", words)
    c = run.tables["collectives"]
    k = c[(c["rank"] == 0) & (c["source"] == "gpu_kernel")]
    assert not k.empty and (k[column] == -1).all()
    if column == "in_nelems":
        assert k["in_mb"].isna().all()


def test_bad_record_param_comms_seq_and_dtype(run_dir):
    def garble(doc):
        for e in events(doc, is_param_comms):
            e["args"]["Seq"] = "12x"
            e["args"]["dtype"] = "f" * 100_000
            e["args"]["Process Group Ranks"] = list(range(100_000))

    path = mutate(run_dir, garble)
    run = kineto.read(run_dir)
    one_problem(run, path, "field args['Seq']", "not an integer")
    c = run.tables["collectives"]
    rp = c[(c["rank"] == 0) & (c["source"] == "record_param_comms")]
    assert (rp["seq"] == -1).all()
    assert rp["dtype"].str.len().max() <= limits.MAX_NAME_CHARS + 30
    assert rp["group_ranks"].str.len().max() <= limits.MAX_NAME_CHARS + 30


# -- memory, shapes, device properties ---------------------------------------------------------------------------

@pytest.mark.parametrize("arg,value,words", [("Total Allocated", 1e308, "beyond 2^50 bytes"),
                                             ("Total Allocated", "abc", "not a number"),
                                             ("Total Reserved", -5, "negative"),
                                             ("Bytes", -1e300, "beyond 2^50 bytes")])
def test_bad_memory_counters(run_dir, arg, value, words):
    def garble(doc):
        for e in events(doc, is_memory):
            e["args"][arg] = value

    path = mutate(run_dir, garble)
    run = kineto.read(run_dir)
    one_problem(run, path, "values ignored", f"field args[{arg!r}]", words)
    m = run.tables["memory_events"]
    col = {"Total Allocated": "allocated_mb", "Total Reserved": "reserved_mb"}.get(arg)
    if col:
        assert m.loc[m["rank"] == 0, col].isna().all()
        assert (m[col].dropna() >= 0).all() and (m[col].dropna() < 1e9).all()


@pytest.mark.parametrize("dims", [[[-2048, 4096], [4096, 16384]], [[10 ** 15, 10 ** 15], [10 ** 15, 1]],
                                  [["a", 4096], [4096, "b"]], [[2048.5, 4096], [4096, 16384]], "[[2048, 4096]]"],
                         ids=repr)
def test_bad_input_dims_give_no_flops(run_dir, dims):
    def garble(doc):
        for e in events(doc, is_mm):
            e["args"]["Input Dims"] = dims

    path = mutate(run_dir, garble)
    run = kineto.read(run_dir)
    one_problem(run, path, "field args['Input Dims']", "not shapes")
    ops = run.tables["cpu_ops"]
    mm = ops[(ops["rank"] == 0) & (ops["name"] == "aten::mm")]
    assert not mm.empty and (mm["input_dims"] == "").all()


def test_bad_device_properties(run_dir):
    def garble(doc):
        props = doc["deviceProperties"]
        props[0].update(totalGlobalMem=1e308, numSms=-1, computeMajor="x", name="n" * 100_000)
        props.extend([1, None])

    path = mutate(run_dir, garble)
    p1 = mutate(run_dir, lambda doc: doc.__setitem__("deviceProperties", {"id": 0}), rank=1)
    run = kineto.read(run_dir)
    one_problem(run, p1, "deviceProperties is not a JSON array; ignored")
    one_problem(run, path, "field 'totalGlobalMem'", "deviceProperties[0]")
    one_problem(run, path, "entry not an object", "deviceProperties[2], deviceProperties[3]")
    dp = run.tables["device_properties"]
    row = dp[(dp["rank"] == 0)].iloc[0]
    assert math.isnan(row["total_memory_mb"]) and pd.isna(row["sm_count"]) and len(row["name"]) <= 300


# -- names ---------------------------------------------------------------------------------------------------------

def test_huge_names_are_capped(run_dir):
    name = "k" * (1 << 20)

    def garble(doc):
        for e in events(doc, is_kernel)[:20]:
            e["name"] = name
        doc["host_name"] = "h" * 100_000
        doc["distributedInfo"]["pg_config"][0]["pg_desc"] = "x" * 100_000
        for e in events(doc, lambda e: e.get("cat") == "cpu_op"):
            e["tid"] = "t" * 100_000

    mutate(run_dir, garble)
    run = kineto.read(run_dir)
    cap = limits.MAX_NAME_CHARS + 30
    for table, col in (("gpu_ops", "name"), ("cpu_ops", "tid"), ("host_ops", "name")):
        assert run.tables[table][col].astype(str).str.len().max() <= cap, table
    assert (run.tables["gpu_ops"]["name"].str.contains("chars]", regex=False)).sum() == 20
    assert run.tables["groups"]["name"].str.len().max() <= 300


# -- files that are not traces -------------------------------------------------------------------------------------

def _gzip_truncated(p: Path) -> Path:
    data = gzip.compress(p.read_bytes())
    p.unlink()
    out = p.with_name(p.name + ".gz")
    out.write_bytes(data[: len(data) // 2])
    return out


def _write(data):
    def put(p: Path) -> Path:
        if callable(data):
            p.write_bytes(data(p))
        else:
            p.write_bytes(data)
        return p
    return put


def _not_gzip(p: Path) -> Path:
    out = p.with_name(p.name + ".gz")
    p.rename(out)
    out.write_bytes(b"PK\x03\x04junk")
    return out


JUNK = {
    "binary": _write(b"\x00\x01garbage" * 100),
    "utf16": _write(lambda p: p.read_text().encode("utf-16")),
    "list": _write(b"[1, 2, 3]"),
    "number": _write(b"42"),
    "empty_object": _write(b"{}"),
    "no_events": _write(b'{"schemaVersion": 1, "distributedInfo": {"rank": 0}}'),
    "empty": _write(b""),
    "gz_not_gzip": _not_gzip,
    "gz_truncated": _gzip_truncated,
}
JUNK_WORDS = {"binary": "binary data", "utf16": "UTF-16", "list": "not JSON objects", "number": "a number",
              "empty_object": "without \"traceEvents\"", "no_events": "without \"traceEvents\"", "empty": "empty file",
              "gz_not_gzip": "not JSON", "gz_truncated": "gzip stream ends early"}


@pytest.mark.parametrize("kind", sorted(JUNK))
def test_junk_trace_is_a_data_problem_beside_good_ranks(run_dir, kind):
    path = JUNK[kind](rank_file(run_dir, 0))
    run = kineto.read(run_dir)
    one_problem(run, path, JUNK_WORDS[kind])
    if kind != "gz_truncated":  # a truncated gzip keeps what was read (rank 0's first events)
        one_problem(run, path, "skipped")
        assert run.ranks == [1]


def test_junk_named_like_a_rank_file_is_listed(run_dir, tmp_path):
    junk = run_dir / "rank0.pt.trace.json"
    junk.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4)
    out, js = tmp_path / "r.html", tmp_path / "m.json"
    rc, err = cli([run_dir, "-o", out, "--json", js])
    assert rc == 0, err
    problems = json.loads(js.read_text())["data_problems"]
    assert any(Path(p["path"]).name == junk.name and "skipped" in p["problem"] for p in problems), problems


@pytest.mark.parametrize("kind", ["binary", "list", "empty_object", "utf16"])
def test_directory_of_junk_exits_2_naming_the_files(run_dir, tmp_path, kind):
    paths = [JUNK[kind](p) for p in sorted(run_dir.glob("*.pt.trace.json"))]
    with pytest.raises(InputError) as exc:
        kineto.read(run_dir)
    assert all(p.name in str(exc.value) for p in paths), str(exc.value)
    out = tmp_path / "r.html"
    rc, err = cli([run_dir, "-o", out])
    assert rc == 2 and not out.exists()
    assert paths[0].name in err and "internal error" not in err


def test_lone_junk_file_exits_2_naming_it(tmp_path):
    d = tmp_path / "run"
    d.mkdir()
    junk = d / "rank1.pt.trace.json"
    junk.write_bytes(b"\x00junk")
    rc, err = cli([d, "-o", tmp_path / "r.html"])
    assert rc == 2 and junk.name in err and "binary data" in err


# -- end to end: never an internal error ---------------------------------------------------------------------------

def test_cli_never_exits_1_on_hostile_fields(run_dir, tmp_path):
    def garble(doc):
        info = doc["distributedInfo"]
        info["pg_config"][0]["ranks"] = ["a", None, [0], {"r": 1}]
        info["world_size"] = [1, 2]
        events(doc, is_step)[0]["name"] = "ProfilerStep#999999999999999999999"
        events(doc, is_kernel)[0]["dur"] = 1e308
        for e in events(doc, is_nccl):
            e["args"].update({"Src Rank": {}, "Dst Rank": "x", "In msg nelems": 1e300, "Group size": None})

    mutate(run_dir, garble)
    mutate(run_dir, lambda doc: doc["distributedInfo"].__setitem__("rank", 10 ** 25), rank=1)
    out, js = tmp_path / "r.html", tmp_path / "m.json"
    rc, err = cli([run_dir, "-o", out, "--json", js])
    assert rc == 0, err
    doc = json.loads(js.read_text())
    text = " | ".join(p["problem"] for p in doc["data_problems"])
    for words in ("ProfilerStep#N", "field 'dur' over one day", "distributedInfo.world_size [1, 2]",
                  "pg_config group '0'", "distributedInfo.rank 10000000000000000000000000"):
        assert words in text, words
    assert not re.search(r"\d{25,}", json.dumps(doc["findings"]))  # no absurd number quoted in a finding


# -- time unit, clocks, rank sources -------------------------------------------------------------------------------

def _trace(path: Path, events, **meta) -> Path:
    path.write_text(json.dumps({"traceEvents": events, **meta}))
    return path


def _ev(name, cat, ts, dur, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": args}


def test_ns_trace_durations_are_bounded_after_the_unit_is_known(tmp_path):
    """A trace written in ns is recognised at its end: the one-day bound applies to the converted durations."""
    from reportgen.readers.kineto_decode import decode_trace

    events = [_ev("ProfilerStep#1", "user_annotation", 5_000_000_000, 100 * 10 ** 9),  # 100 s, in ns
              _ev("k", "kernel", 5_000_001_000, 4_000, stream=7),
              _ev("k2", "kernel", 5_000_002_000, 2 * 86_400 * 10 ** 9, stream=7)]  # 2 days, in ns
    problems: list = []
    d = decode_trace(_trace(tmp_path / "ns.json", events, displayTimeUnit="ns"), problems)
    assert d.meta["ts_converted_from_ns"] is True
    assert list(d.tables["steps"]["dur_ns"]) == [100 * 10 ** 9]  # 100 s is kept
    assert list(d.tables["gpu_ops"]["name"]) == ["k"]
    assert problems == [(str(tmp_path / "ns.json"), "1 event skipped: field 'dur' over one day (in traceEvents[2])")]


def test_duplicate_step_spans_merge_only_after_the_checks(tmp_path):
    from reportgen.readers.kineto_decode import decode_trace

    t = 200_000_000_000  # µs; a stray copy of step 1 at ts 0 (2.3 days earlier) would stretch it over days
    events = [_ev("ProfilerStep#1", "user_annotation", t, 500), _ev("ProfilerStep#1", "cpu_op", t + 100, 600),
              _ev("ProfilerStep#1", "user_annotation", 0, 10), _ev("k", "kernel", t + 10, 4, stream=7)]
    problems: list = []
    d = decode_trace(_trace(tmp_path / "t.json", events), problems)
    st = d.tables["steps"]
    assert list(st["ts_ns"]) == [t * 1000] and list(st["dur_ns"]) == [700_000]
    assert d.tables["hta_events"]["ts_ns"].min() == t * 1000  # the stray span's mark row is refused too
    assert any("more than one day away" in t and "ts 0" in t for _, t in problems)


def test_ranks_with_clocks_days_apart_are_named(run_dir):
    def shift(doc):
        for e in doc["traceEvents"]:
            if isinstance(e.get("ts"), (int, float)):
                e["ts"] += 10 * 86_400e6

    path = mutate(run_dir, shift, rank=1)
    run = kineto.read(run_dir)
    one_problem(run, path, "starts 10.0 days after rank 0's", "clocks disagree")
    assert run.ranks == [0, 1]


def test_rank_in_name_conflicting_with_distributed_info(run_dir):
    p = rank_file(run_dir, 0)
    named = p.rename(run_dir / "rank1.pt.trace.json")
    run = kineto.read(run_dir)
    one_problem(run, named, "distributedInfo.rank 0 differs from 'rank1' in the file name",
                "distributedInfo.rank is used")
    assert run.ranks == [0, 1]
