"""Ascend trace_view.json reader: real torch_npu and MindSpore CPU traces, broken and odd files."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import pytest

from reportgen.readers import ascend_trace as at
from reportgen.readers.ascend_trace import COLUMNS, rank_from_framework, read_trace_view
from reportgen.timebase import to_ns

from conftest import fixture_dir

TORCH_SETS = [(level, r) for level in ("level0", "level1", "level2") for r in (0, 1)]
KIND_COLUMNS = {
    "computing": "Computing",
    "communication": "Communication",
    "comm_not_overlapped": "Communication(Not Overlapped)",
    "free": "Free",
}


def torch_trace(level: str, rank: int) -> Path:
    d = fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "text", level,
                    f"rank{rank}_ascend_pt", "ASCEND_PROFILER_OUTPUT")
    return d / "trace_view.json"


def ms_prof_dirs() -> list[Path]:
    root = fixture_dir("generated")
    dirs = sorted(p for p in root.glob("mindspore_cpu_*/**/*_ascend_ms") if p.is_dir())
    assert dirs, f"no *_ascend_ms under {root}"
    return dirs


def read(path: Path, rank: int = 0):
    problems: list = []
    return read_trace_view(path, rank, problems), problems


def check_columns(tables: dict):
    for name, df in tables.items():
        assert list(df.columns) == COLUMNS[name], name
        assert len(df) > 0, name
        for col in df.columns:
            if col.endswith("_ms"):
                assert df[col].dtype == "float64", (name, col)


def event_ends(data: bytes) -> list[int]:
    """Byte offset just after each top-level event (independent decoder: json raw_decode, one by one)."""
    text = data.decode("utf-8")
    assert text.isascii()
    dec = json.JSONDecoder()
    pos = text.index("[") + 1
    ends = []
    while True:
        while text[pos] in " \t\r\n,":
            pos += 1
        if text[pos] == "]":
            return ends
        _, pos = dec.raw_decode(text, pos)
        ends.append(pos)


def reference_counts(events: list) -> dict:
    """Rows expected per table, from a whole-file json.load (same selection rules as the reader)."""
    pn = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    tn = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
          if e.get("ph") == "M" and e.get("name") == "thread_name"}
    counts = {"trace_steps": 0, "overlap_intervals": 0, "hccl_ops": 0, "device_ops": 0, "dataloader": 0}
    has_hw = any(v == "Ascend Hardware" for v in pn.values())
    for e in events:
        if e.get("ph") != "X":
            continue
        proc, thread = pn.get(e["pid"]), tn.get((e["pid"], e["tid"]))
        if e["name"].startswith("ProfilerStep#"):
            counts["trace_steps"] += 1
        elif e["name"].startswith("enumerate(DataLoader)"):
            counts["dataloader"] += 1
        elif proc == "Overlap Analysis":
            counts["overlap_intervals"] += 1
        elif proc == "HCCL" and thread and not thread.startswith("Plane"):
            counts["hccl_ops"] += 1
        elif proc == "Ascend Hardware" and not at._is_sync_task(e.get("args", {}).get("Task Type")):
            counts["device_ops"] += 1
        elif proc == "CPU OP" and not has_hw:
            counts["device_ops"] += 1
    return {k: v for k, v in counts.items() if v}


def write(tmp_path: Path, text: str | bytes, name: str = "trace_view.json") -> Path:
    p = tmp_path / name
    p.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return p


# ------------------------------------------------------------------------------------------------
# Real torch_npu traces


@pytest.mark.parametrize("level,rank", TORCH_SETS)
def test_overlap_sums_match_step_trace_time_csv(level, rank):
    """Per kind, Σ dur of the Overlap Analysis intervals starting inside the ProfilerStep window equals
    step_trace_time.csv, within 1 us per interval. Found: the file's own microsecond values sum to the csv
    exactly (checked with Decimal while writing this); through absolute float64 ms (grid 2**-12 ms = 0.24 us
    at 1.7e12 ms) the sums are off by at most 1.3 us over 101-187 intervals. Every interval of these
    one-step traces starts inside the window."""
    path = torch_trace(level, rank)
    tables, problems = read(path, rank)
    assert problems == []
    check_columns(tables)
    row = next(csv.DictReader(open(path.parent / "step_trace_time.csv", newline="")))
    steps = tables["trace_steps"]
    assert steps["rank"].tolist() == [rank]
    assert steps["step"].tolist() == [int(row["Step"])] == [50]
    s0, s1 = steps["start_ns"].iloc[0], steps["end_ns"].iloc[0]
    assert 100 < (s1 - s0) / 1e6 < 200  # ms, one ResNet step
    ov = tables["overlap_intervals"]
    assert set(ov["kind"]) == set(KIND_COLUMNS)
    inside = ov[(ov["start_ns"] >= s0) & (ov["start_ns"] <= s1)]
    assert len(inside) == len(ov)
    for kind, column in KIND_COLUMNS.items():
        part = inside[inside["kind"] == kind]
        total = float((part["end_ns"] - part["start_ns"]).sum()) / 1e6
        expected = float(row[column]) / 1000.0
        assert abs(total - expected) <= 1e-3 * max(1, len(part)), (kind, total, expected)
        assert abs(total - expected) < 2e-3  # what we actually find: <= 1.3 us
    # Identity of the csv: Computing + Comm(Not Overlapped) + Free = device span of the step.
    assert abs(float(row["Communication"]) - float(row["Overlapped"])
               - float(row["Communication(Not Overlapped)"])) < 1e-6


@pytest.mark.parametrize("level,rank", TORCH_SETS)
def test_hccl_ops_and_device_ops(level, rank):
    path = torch_trace(level, rank)
    tables, _ = read(path, rank)
    hccl = tables["hccl_ops"]
    assert len(hccl) == 4
    assert set(hccl["lane"]) == {"Group 0 Communication"}  # the Plane 0..7 lanes (level1/2) are not taken
    assert all(re.fullmatch(r"hcom_allReduce__\d+_\d+_1", op) for op in hccl["op"])
    assert (hccl["rank"] == rank).all()
    assert hccl["start_ns"].is_monotonic_increasing
    # The 4 allReduce ops lie within the Communication overlap intervals' span.
    comm = tables["overlap_intervals"].query("kind == 'communication'")
    assert abs(hccl["dur_ms"].sum() - (comm["end_ns"] - comm["start_ns"]).sum() / 1e6) < 0.01
    dev = tables["device_ops"]
    assert set(dev["stream"]) <= {"Stream 0", "Stream 2", "Stream 3", "Stream 4"}
    assert not dev["name"].isin(["EVENT_WAIT", "EVENT_RECORD", "Notify Wait", "Write Value",
                                 "PROFILING_ENABLE", "PROFILING_DISABLE"]).any()
    assert dev["name"].str.startswith("aclnn").any()
    assert (dev["dur_ms"] >= 0).all()


def test_every_real_trace_matches_whole_file_reference():
    paths = sorted(fixture_dir("ascend").rglob("trace_view.json")) + sorted(fixture_dir("generated").rglob("trace_view.json"))
    assert len(paths) >= 16
    for path in paths:
        tables, problems = read(path)
        assert problems == [], path
        check_columns(tables)
        expected = reference_counts(json.loads(path.read_bytes()))
        assert {k: len(v) for k, v in tables.items()} == expected, path


def test_small_chunks_give_the_same_tables(monkeypatch):
    """Chunk boundaries fall inside numbers, strings and escapes; the result must not change."""
    path = torch_trace("level2", 1)
    ref, _ = read(path)
    for size in (1000, 4099, 1 << 16):
        monkeypatch.setattr(at, "CHUNK", size)
        got, problems = read(path)
        assert problems == []
        for name in ref:
            assert got[name].equals(ref[name]), (size, name)


# ------------------------------------------------------------------------------------------------
# MindSpore 2.10 CPU traces


def test_mindspore_cpu_traces_parse():
    for prof in ms_prof_dirs():
        path = prof / "ASCEND_PROFILER_OUTPUT" / "trace_view.json"
        events = json.loads(path.read_bytes())
        tables, problems = read(path, 7)
        assert problems == []
        assert set(tables) == {"device_ops"}  # no step markers, overlap or HCCL on CPU
        dev = tables["device_ops"]
        check_columns(tables)
        cpu_pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("args", {}).get("name") == "CPU OP"}
        cpu_ops = [e for e in events if e.get("ph") == "X" and e["pid"] in cpu_pids]
        assert len(dev) == len(cpu_ops) > 100
        assert set(dev["stream"]) == {"CPU OP Thread 0"}
        assert (dev["rank"] == 7).all()
        if "dp4" in str(prof):
            assert dev["name"].str.contains("AllReduce").any()
        # ts and dur are strings in these files ("1795304183225386.795", "23916.200" us): exact ns
        e = cpu_ops[0]
        row = dev[(dev["name"] == e["name"]) & (dev["start_ns"] == to_ns(e["ts"]))]
        assert len(row) == 1 and row["dur_ms"].iloc[0] == to_ns(e["dur"]) / 1e6
        assert dev["start_ns"].is_monotonic_increasing  # sorted although the file is grouped by op


def test_rank_from_framework_matches_msrun_logs():
    """The rank per *_ascend_ms dir, checked against msrun's worker_<r>.log ('DISTRIBUTED(<pid>,' ... 'rank id: r')."""
    checked = 0
    for prof in ms_prof_dirs():
        run = prof.parent.parent
        logs = sorted((run / "msrun_logs").glob("worker_*.log"))
        pid = int(prof.name.split("_")[1])
        if not logs:
            assert rank_from_framework(prof) == 0  # single-process run
            continue
        expected = None
        for log in logs:
            m = re.search(rf"DISTRIBUTED\({pid},.*?rank id: (\d+)", log.read_text(errors="replace"))
            if m:
                expected = int(m.group(1))
        assert expected is not None, prof
        assert rank_from_framework(prof) == expected
        assert rank_from_framework(prof / "ASCEND_PROFILER_OUTPUT") == expected
        checked += 1
    assert checked == 8  # dp4 pynative + dp4 graph
    assert sorted(rank_from_framework(p) for p in ms_prof_dirs() if "dp4_graph" in str(p)) == [0, 1, 2, 3]


def test_rank_from_framework_absent_or_ambiguous(tmp_path):
    assert rank_from_framework(tmp_path) is None
    fw = tmp_path / "FRAMEWORK"
    fw.mkdir()
    assert rank_from_framework(tmp_path) is None
    (fw / "cpu_op_detail_info_2.csv").write_text("x")
    (fw / "cpu_framework_2.txt").write_text("x")
    assert rank_from_framework(tmp_path) == 2
    (fw / "cpu_ms_memory_record_3.txt").write_text("x")
    assert rank_from_framework(tmp_path) is None


# ------------------------------------------------------------------------------------------------
# Broken and odd files


@pytest.mark.parametrize("where", ["number", "string", "after_brace", "late"])
def test_truncated_real_trace_keeps_events_before_the_cut(tmp_path, monkeypatch, where):
    src = torch_trace("level1", 0)
    data = src.read_bytes()
    ends = event_ends(data)
    mid = len(data) // 2
    if where == "number":  # inside "dur": 12.34 of some event
        cut = data.index(b'"dur": ', mid) + len(b'"dur": ') + 2
    elif where == "string":  # inside a ts string
        cut = data.index(b'"ts": "', mid) + 12
    elif where == "after_brace":  # right after an event's closing brace
        cut = next(e for e in ends if e > mid)
    else:  # after the metadata, inside the overlap / HCCL events
        cut = int(len(data) * 0.9)
    complete = sum(1 for e in ends if e <= cut)
    expected = reference_counts(json.loads(data[:ends[complete - 1]] + b"]"))
    for chunk in (at.CHUNK, 3000):
        monkeypatch.setattr(at, "CHUNK", chunk)
        tables, problems = read(write(tmp_path, data[:cut]))
        assert problems == [(str(tmp_path / "trace_view.json"),
                             f"truncated after {complete} events; the rest was skipped")]
        assert {k: len(v) for k, v in tables.items()} == expected


def test_trailing_whitespace_in_ts_and_string_dur(tmp_path):
    text = json.dumps([
        {"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "Overlap Analysis"}},
        {"ph": "M", "name": "thread_name", "pid": 9, "tid": 0, "args": {"name": "Free"}},
        {"ph": "X", "name": "Free", "pid": 9, "tid": 0, "ts": "1736408883688177.930\t", "dur": 2.5},
        {"ph": "X", "name": "Free", "pid": 9, "tid": 0, "ts": "1736408883688200.000 \t ", "dur": "1.250\t"},
        {"ph": "X", "name": "ProfilerStep#7", "pid": 1, "tid": 1, "ts": "1736408883688100.000\t", "dur": 500},
    ])
    tables, problems = read(write(tmp_path, text))
    assert problems == []
    ov = tables["overlap_intervals"]
    assert ov["kind"].tolist() == ["free", "free"]
    # exact ns (a float of these µs would resolve only 0.25 µs)
    assert ov["start_ns"].tolist() == [1736408883688177930, 1736408883688200000]
    assert (ov["end_ns"] - ov["start_ns"]).tolist() == [2500, 1250]
    st = tables["trace_steps"]
    assert st["step"].tolist() == [7]
    assert (st["end_ns"] - st["start_ns"]).iloc[0] == 500_000


def test_metadata_after_x_events(tmp_path):
    """Names arrive last (like msinsight's heatMap snippet); unnamed-process events are dropped."""
    events = [
        {"ph": "X", "name": "aten::mm", "pid": 1, "tid": 1, "ts": "100.000", "dur": 5, "args": {"Call stack": "a" * 50}},
        {"ph": "X", "name": "MatMul", "pid": 3, "tid": 5, "ts": "101.000", "dur": 2.0,
         "args": {"Task Type": "AI_CORE"}},
        {"ph": "X", "name": "EVENT_WAIT", "pid": 3, "tid": 5, "ts": "103.000", "dur": 9.0,
         "args": {"Task Type": "EVENT_WAIT_SQE"}},
        {"ph": "X", "name": "hcom_allGather__1_2_1", "pid": 4, "tid": 0, "ts": "102.000", "dur": 3.0},
        {"ph": "X", "name": "Memcpy", "pid": 4, "tid": 1, "ts": "102.500", "dur": 1.0},
        {"ph": "X", "name": "Computing", "pid": 5, "tid": 0, "ts": "101.000", "dur": 2.0},
        {"ph": "X", "name": "orphan", "pid": 6, "tid": 0, "ts": "101.000", "dur": 2.0},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 3, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "thread_name", "pid": 3, "tid": 5, "args": {"name": "Stream 5"}},
        {"ph": "M", "name": "process_name", "pid": 4, "tid": 0, "args": {"name": "HCCL"}},
        {"ph": "M", "name": "thread_name", "pid": 4, "tid": 0, "args": {"name": "Group 0 Communication"}},
        {"ph": "M", "name": "thread_name", "pid": 4, "tid": 1, "args": {"name": "Plane 0"}},
        {"ph": "M", "name": "process_name", "pid": 5, "tid": 0, "args": {"name": "Overlap Analysis"}},
        {"ph": "X", "name": "Free", "pid": 5, "tid": 3, "ts": "104.000", "dur": 1.0},
        {"ph": "X", "name": "aten::add", "pid": 1, "tid": 1, "ts": "105.000", "dur": 5},
    ]
    tables, problems = read(write(tmp_path, json.dumps(events, separators=(",", ":"))), 3)
    assert problems == []
    assert tables["device_ops"][["name", "stream"]].values.tolist() == [["MatMul", "Stream 5"]]
    assert tables["hccl_ops"][["op", "lane"]].values.tolist() == [["hcom_allGather__1_2_1", "Group 0 Communication"]]
    # Overlap lanes without thread names fall back to the event names.
    assert tables["overlap_intervals"]["kind"].tolist() == ["computing", "free"]
    assert set(tables) == {"device_ops", "hccl_ops", "overlap_intervals"}
    # The real snippet: 2 processes named at the very end, Ascend Hardware thread never named.
    snippet = fixture_dir("ascend", "msinsight", "server", "src", "test", "test_data", "heatMap") / "trace_view.json"
    tables, problems = read(snippet)
    assert problems == []
    assert tables["device_ops"][["name", "stream"]].values.tolist() == [
        ["aclnnGroupedMatmulV4_GroupedMatmul_GroupedMatmul", "Stream 383683"]]


def test_trace_events_object_is_accepted(tmp_path):
    events = [{"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "CPU OP"}},
              {"ph": "X", "name": "MatMul", "pid": 2, "tid": 0, "ts": "1000.000", "dur": "3.000"}]
    text = json.dumps({"schemaVersion": 1, "traceEvents": events, "traceName": "x.json", "more": [{"a": 1}, {"b": 2}]})
    tables, problems = read(write(tmp_path, text))
    assert problems == []
    assert tables["device_ops"][["name", "stream", "start_ns", "dur_ms"]].values.tolist() == [
        ["MatMul", "CPU OP Thread 0", 1_000_000, 0.003]]


@pytest.mark.parametrize("content,message", [
    (b"", "empty file"),
    (b"  \n\t ", "empty file"),
    (b'{"a": 1, "b": [1, 2]}', 'a JSON object without a "traceEvents" array, not a trace-event array'),
    (b'"just a string"', "not a JSON array of trace events"),
    (b"42", "not a JSON array of trace events"),
    (b"[1, 2, 3]", "not a JSON array of objects"),
    (b"[]", "no trace events in the array"),
    (b"[" + b"[" * 100_000, "JSON nested too deeply"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)) * 8, "binary data (NUL bytes), not UTF-8 JSON text"),
    (b"\xff\xfe[\x00{\x00", "binary data (NUL bytes)"),  # UTF-16
    ('[{"ph": "X", "name": "caf\u00e9", "pid": 1, "tid": 1, "ts": "1.0", "dur": 1}]'.encode("latin-1"),
     "not UTF-8 text"),
])
def test_unusable_files_give_one_problem_and_no_tables(tmp_path, content, message):
    path = write(tmp_path, content)
    tables, problems = read(path)
    assert tables == {}
    assert len(problems) == 1 and problems[0][0] == str(path)
    assert problems[0][1].startswith(message)


def test_binary_garbage_without_nul_and_missing_file(tmp_path):
    import random
    rnd = random.Random(5)
    garbage = bytes(rnd.randrange(1, 256) for _ in range(100_000))
    for blob in (garbage, b"[" + garbage, b"[{" + garbage):
        tables, problems = read(write(tmp_path, blob))
        assert tables == {} and len(problems) == 1, problems
    tables, problems = read(tmp_path / "nope.json")
    assert tables == {} and problems[0][1].startswith("cannot open")


def test_malformed_event_in_the_middle_keeps_what_came_before(tmp_path):
    good = [{"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "CPU OP"}}]
    good += [{"ph": "X", "name": f"Op{i}", "pid": 2, "tid": 0, "ts": f"{1000 + i}.000", "dur": 1.0} for i in range(50)]
    text = json.dumps(good)[:-1] + ', {"ph": "X", "name": nope}, ' + json.dumps(good[1:])[1:]
    tables, problems = read(write(tmp_path, text))
    assert len(tables["device_ops"]) == 50
    assert len(problems) == 1
    assert problems[0][1].startswith("malformed JSON at byte ") and problems[0][1].endswith(
        "after 51 events; the rest was skipped")


def test_event_larger_than_a_chunk_with_separators_inside_strings(tmp_path, monkeypatch):
    """'}, {' inside a string must not be taken for an event boundary; escapes are kept intact."""
    monkeypatch.setattr(at, "CHUNK", 4096)
    tricky = 'x"}, {"ph": "X", "name": "ProfilerStep#9", "pid": 1}, {\\' * 2000
    events = [
        {"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "Ascend Hardware"}},
        {"ph": "X", "name": "big", "pid": 1, "tid": 1, "ts": "5.0", "dur": 1, "args": {"Call stack": tricky}},
        {"ph": "X", "name": 'k"}, {"q\u00e9', "pid": 2, "tid": 0, "ts": "6.0", "dur": 1.5},
        {"ph": "X", "name": "ProfilerStep#3", "pid": 1, "tid": 1, "ts": "4.0", "dur": 10},
    ]
    tables, problems = read(write(tmp_path, json.dumps(events, ensure_ascii=False)))
    assert problems == []
    assert tables["device_ops"]["name"].tolist() == ['k"}, {"q\u00e9']
    assert tables["trace_steps"]["step"].tolist() == [3]


def test_bad_times_are_counted_not_fatal(tmp_path):
    events = [{"ph": "M", "name": "process_name", "pid": 2, "tid": 0, "args": {"name": "CPU OP"}},
              {"ph": "X", "name": "a", "pid": 2, "tid": 0, "ts": "n/a", "dur": 1},
              {"ph": "X", "name": "b", "pid": 2, "tid": 0, "dur": 1},
              {"ph": "X", "name": "c", "pid": 2, "tid": 0, "ts": "7.000", "dur": 1},
              "stray string", 5]
    tables, problems = read(write(tmp_path, json.dumps(events)))
    assert tables["device_ops"]["name"].tolist() == ["c"]
    assert [p[1] for p in problems] == ["2 array items that are not objects were skipped",
                                        "2 events skipped: 'ts' not a time (not a number, or beyond the int64 ns "
                                        "range) (events 2, 3)"]


def test_standard_json_fallback_gives_the_same_tables(tmp_path, monkeypatch):
    """Without msgspec the json-module path must agree, breakage included."""
    path = torch_trace("level2", 1)
    data = path.read_bytes()
    cut = write(tmp_path, data[: len(data) // 3], "cut.json")
    ref = {p: read(p) for p in (path, cut)}
    monkeypatch.setattr(at, "_msgspec", None)
    monkeypatch.setattr(at, "CHUNK", 5000)
    for p, (tables, problems) in ref.items():
        got, got_problems = read(p)
        assert got_problems == problems
        assert set(got) == set(tables)
        for name in tables:
            assert got[name].equals(tables[name]), (p, name)


@pytest.mark.parametrize("level", ["level0", "level1", "level2"])
def test_dataloader_spans_of_torch_npu_traces(level):
    """torch_npu writes enumerate(DataLoader)#...__next__ in the Python layer, as a Kineto trace does: they become the
    ``dataloader`` table (the data section's input wait and msprof-analyze's slow-dataloader rule), exact times."""
    from reportgen.readers import read_run

    for rank in (0, 1):
        path = torch_trace(level, rank)
        want = sorted((to_ns(e["ts"]), to_ns(e.get("dur", 0))) for e in json.loads(path.read_text())
                      if e.get("ph") == "X" and str(e.get("name", "")).startswith("enumerate(DataLoader)"))
        assert want, path
        got = read_trace_view(path, rank, [])["dataloader"]
        assert list(zip(got["start_ns"], (got["dur_ms"] * 1e6).round().astype("int64"))) == want
    run = read_run(torch_trace(level, 0).parents[2])
    dl = run.table("dataloader")
    assert set(dl["rank"]) == {0, 1} and (dl["step"] >= 0).all()  # each in a ProfilerStep window
    assert list(dl.columns) == ["rank", "step", "name", "start_ms", "dur_ms"]


@pytest.mark.parametrize("chunk", [None, 7])
def test_trace_events_key_twice_stops_the_file(tmp_path, monkeypatch, chunk):
    """Issue 29 #2 for trace_view.json: this reader reads the first list, a JSON parser keeps the second."""
    if chunk:
        monkeypatch.setattr(at, "CHUNK", chunk)
    ev = [{"ph": "M", "name": "process_name", "pid": 9, "tid": 0, "args": {"name": "Overlap Analysis"}},
          {"ph": "X", "name": "Free", "pid": 9, "tid": 0, "ts": "1.000", "dur": 2.5}]
    one = json.dumps({"traceEvents": ev, "note": "x" * 40})
    tables, problems = read(write(tmp_path, one))
    assert problems == [] and len(tables["overlap_intervals"]) == 1
    for tail in (', "meta": {"traceEvents": []}}', ', "from": "traceEvents", "x": ["traceEvents"]}'):  # not keys
        tables, problems = read(write(tmp_path, one[:-1] + tail))  # of the top level: read as before
        assert problems == [] and len(tables["overlap_intervals"]) == 1, tail
    twice = one[:-1] + ', "traceEvents": ' + json.dumps(ev) + "}"
    tables, problems = read(write(tmp_path, twice))
    assert not any(len(t) for t in tables.values())
    assert [p for _, p in problems] == ['the key "traceEvents" appears twice at the top level: which list is the '
                                       'trace is unknown (a JSON parser keeps the second); the file was not read '
                                       '(2 events of the first dropped)']
