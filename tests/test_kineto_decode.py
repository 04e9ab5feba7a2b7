"""reportgen.readers.kineto_decode: streamed Kineto trace decoding, checked against whole-file json.load counts."""

from __future__ import annotations

import gzip
import json
import math
import re
from functools import lru_cache
from pathlib import Path

import pandas as pd
import pytest

from reportgen.readers import kineto_decode as kd
from reportgen.readers.kineto_decode import DEFAULT_COMM_PATTERNS, DecodedTrace, decode_trace
from reportgen.timebase import to_ns

from conftest import fixture_dir

GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}


def kineto(*parts: str) -> Path:
    return fixture_dir("kineto", *parts)


HTA = ("hta_tests_data", "tests", "data")
NCCL_DATA = (*HTA, "nccl_parser_config", "nccl_data.json.gz")
DF_INDEX = (*HTA, "df_index_resolver", "df_index_resolver.json.gz")
XDIT = ("tracelens_selected", "tests", "traces", "inference", "xdit_sd_3.5", "profile_trace_rank_0.json.gz")
MI300 = ("tracelens_selected", "tests", "traces", "mi300", "resnet_act_checkpoint.json.gz")
B200 = ("tracelens_selected", "tests", "traces", "b200", "eager_trace.json.gz")
TB2021 = ("kineto_tb_plugin_samples", "tb_plugin", "samples", "resnet50_num_workers_0",
          "worker0.1623143089861.pt.trace.json.gz")
NS_RES = (*HTA, "ns_resolution_trace", "rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz")
NOT_A_TRACE = "benchmark_simple_add_et.json.gz"  # a PyTorch execution trace (ET), not a Kineto trace


@lru_cache(maxsize=None)
def decoded(path: Path) -> tuple[DecodedTrace, tuple]:
    problems: list = []
    d = decode_trace(path, problems)
    return d, tuple(problems)


@lru_cache(maxsize=None)
def reference(path: Path) -> dict:
    """Independent counts from a whole-file json.load."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rb") as fh:
        doc = json.load(fh, parse_float=str)  # float literals as text: ts/dur compared exactly (to_ns)
    ev = [e for e in doc["traceEvents"] if isinstance(e, dict)]
    steps = set()
    for e in ev:
        m = re.fullmatch(r"ProfilerStep#(\d+)", str(e.get("name", "")))
        if m and e.get("ph") == "X" and e.get("cat") in ("user_annotation", "Operator", "cpu_op"):
            steps.add(int(m.group(1)))
    gpu = [e for e in ev if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    nccl = [e for e in gpu if e["cat"] in ("kernel", "Kernel") and re.match(r"nccl", e["name"])]
    mem = [e for e in ev if e.get("ph") == "i" and e.get("name") == "[memory]"]
    with_stream = [e for e in ev if isinstance(e.get("args"), dict) and "stream" in e["args"]
                   and e.get("cat") not in GPU_CATS and e.get("cat") != "cuda_sync"]
    return {"doc_keys": [k for k in doc if k != "traceEvents"], "steps": steps, "gpu": len(gpu),
            "nccl": [e["name"].split("(")[0] for e in nccl],
            "nccl_with_args": sum("Collective name" in e.get("args", {}) for e in nccl),
            "memory": len(mem), "mem_alloc_sum": sum(e["args"].get("Total Allocated", 0) for e in mem),
            "cpu_with_stream": with_stream,
            "gloo": [e for e in ev if e.get("ph") == "X" and str(e.get("name", "")).startswith("gloo:")]}


def all_fixture_files() -> list[Path]:
    root = kineto()
    files = sorted(p for p in root.rglob("*") if p.is_file() and re.search(r"\.json(\.gz)?$", p.name))
    return files + gloo_files()


def gloo_files() -> list[Path]:
    return sorted(fixture_dir("generated", "torch_gloo_ddp4_baseline", "traces").glob("*.pt.trace.json.gz"))


# ------------------------------------------------------------------------------------------------
# Real fixtures


def test_every_real_fixture_decodes_without_problems():
    files = all_fixture_files()
    assert len(files) >= 40
    for p in files:
        d, problems = decoded(p)
        if p.name == NOT_A_TRACE:
            assert problems and "not a Kineto trace" in problems[0][1] and not d.tables
            continue
        assert problems == (), (p, problems)
        assert d.tables or p.name == "mtia_inference_rank_0.json.gz", p  # MTIA inference: no step, no GPU op
        assert "distributedInfo" in d.meta and isinstance(d.meta["deviceProperties"], list)
        for name, df in d.tables.items():
            assert len(df), (p, name)
            assert df["ts_ns"].is_monotonic_increasing, (p, name)
            assert df["ts_ns"].dtype == "int64" and df.get("dur_ns", df["ts_ns"]).dtype == "int64"


def test_nccl_data_counts_match_json_load():
    p = kineto(*NCCL_DATA)
    d, problems = decoded(p)
    ref = reference(p)
    assert problems == ()
    assert list(d.tables["steps"]["step"]) == sorted(ref["steps"]) and len(ref["steps"]) == 3
    g = d.tables["gpu_ops"]
    assert len(g) == ref["gpu"]
    assert (g["kind"] == "comm").sum() == len(ref["nccl"]) == 21
    c = d.tables["collectives"]
    k = c[c["source"] == "gpu_kernel"]
    assert len(k) == ref["nccl_with_args"] == 21
    assert k["in_bytes"].notna().all() and (k["in_bytes"] > 0).all()
    ar = k[k["collective"] == "all_reduce"].iloc[0]
    assert ar["dtype"] == "Float" and ar["elem_bytes"] == 4 and ar["in_bytes"] == ar["in_nelems"] * 4
    assert ar["group_desc"] == "default_pg" and ar["group_ranks"] == "[0, 1]" and ar["group_size"] == 2
    assert set(k["collective"]) == {"all_reduce", "broadcast"}
    # record_param_comms rows carry the same metadata; "wait" records are dropped
    rpc = c[c["source"] == "record_param_comms"]
    assert len(rpc) == 21 and rpc["in_bytes"].notna().all()
    assert set(c["source"]) == {"gpu_kernel", "record_param_comms", "annotation", "c10d"}
    # float µs with ns decimals kept exactly as written
    with gzip.open(p, "rb") as fh:
        first_kernel = next(e for e in json.load(fh, parse_float=str)["traceEvents"] if e.get("cat") == "kernel")
    row = g[g["correlation"] == first_kernel["args"]["correlation"]].iloc[0]
    assert "." in first_kernel["ts"] and row["ts_ns"] == to_ns(first_kernel["ts"])
    assert row["dur_ns"] == to_ns(first_kernel["dur"])
    assert row["stream"] == first_kernel["args"]["stream"] and row["device"] == first_kernel["args"]["device"]
    # metadata written after traceEvents by Kineto
    assert {"traceName", "displayTimeUnit", "baseTimeNanoseconds"} <= set(d.meta)
    assert ref["doc_keys"].index("baseTimeNanoseconds") > ref["doc_keys"].index("distributedInfo")
    assert d.meta["distributedInfo"]["pg_config"][0]["pg_desc"] == "default_pg"
    assert "INFO" not in d.meta and d.meta["baseTimeNanoseconds"] == 1711964646000000000


def test_df_index_resolver_memory_and_nccl_counts():
    p = kineto(*DF_INDEX)
    d, problems = decoded(p)
    ref = reference(p)
    assert problems == ()
    m = d.tables["memory"]
    assert len(m) == ref["memory"] == 28010
    assert m["total_allocated"].sum() == ref["mem_alloc_sum"]
    assert set(m["device_type"]) <= {0, 1}
    assert len(d.tables["steps"]) == len(ref["steps"]) == 5
    g = d.tables["gpu_ops"]
    assert len(g) == ref["gpu"]
    assert (g["kind"] == "comm").sum() == len(ref["nccl"]) == 2020
    assert d.meta["profile_memory"] == 1


def test_trace_filter_pair_ranks_of_128():
    for rank in (0, 1):
        p = kineto(*HTA, "trace_filter", f"sampled_rank-{rank}.json.gz")
        d, problems = decoded(p)
        assert problems == ()
        assert d.meta["distributedInfo"] == {"backend": "nccl", "rank": rank, "world_size": 128}
        assert list(d.tables["steps"]["step"]) == [551, 552]
        g = d.tables["gpu_ops"]
        assert (g["kind"] == "comm").sum() == len(reference(p)["nccl"]) == 10
        ann = d.tables["collectives"].query("source == 'annotation'")
        assert {"all_to_all", "all_reduce", "all_gather"} <= set(ann["collective"])
        assert ann["in_bytes"].notna().all()


def test_triton_launchers_with_stream_arg_are_not_gpu_ops():
    p = kineto(*XDIT)
    d, problems = decoded(p)
    ref = reference(p)
    assert problems == ()
    launchers = ref["cpu_with_stream"]  # Triton cpu_op launchers carrying "stream": 0 (HTA counts them as GPU)
    assert len(launchers) >= 2000
    g = d.tables["gpu_ops"]
    assert len(g) == ref["gpu"] == 8066  # kernel + gpu_memcpy + gpu_memset events only
    gpu_spans = set(zip(g["ts_ns"], g["dur_ns"]))
    assert not any((to_ns(e["ts"]), to_ns(e["dur"])) in gpu_spans for e in launchers)
    # ... but HTA does: they are its "gpu" rows
    h = d.tables["hta_events"]
    assert (h["role"] == "gpu").sum() == len(launchers) and set(h.loc[h["role"] == "gpu", "stream"]) == {0}
    assert set(g["kind"]) <= {"kernel", "memcpy", "memset", "comm"}


def test_2021_capitalised_categories_and_string_tids():
    p = kineto(*TB2021)
    d, problems = decoded(p)
    ref = reference(p)
    assert problems == ()
    g = d.tables["gpu_ops"]
    assert len(g) == ref["gpu"] and set(g["kind"]) == {"kernel", "memcpy", "memset"}
    assert set(g["stream"]) == {7}  # args.stream; the tid is the string "stream 7"
    assert len(d.tables["steps"]) == len(ref["steps"]) == 6
    m = d.tables["memory"]
    assert len(m) == ref["memory"] and m["total_allocated"].isna().all()  # 2021: no totals, no category


def test_rocm_rccl_kernels_and_b200_nccl_dev_kernel():
    d, problems = decoded(kineto(*MI300))
    assert problems == ()
    g = d.tables["gpu_ops"]
    assert (g["kind"] == "comm").sum() == 17  # ncclDevKernel_Generic, 12 with collective args, 5 without
    c = d.tables["collectives"]
    assert (c["source"] == "gpu_kernel").sum() == 12
    assert set(c.loc[c["source"] == "record_param_comms", "dtype"]) == {"BFloat16", "Long"}
    d, problems = decoded(kineto(*B200))
    assert problems == ()
    k = d.tables["collectives"].query("source == 'gpu_kernel'").iloc[0]
    assert k["name"].startswith("ncclDevKernel_AllGather") and k["collective"] == "all_gather"
    assert (k["in_nelems"], k["out_nelems"], k["in_bytes"], k["out_bytes"]) == (25136, 201088, 50272.0, 402176.0)
    assert k["group_name"] == "3" and k["group_size"] == 8


def test_ns_display_unit_with_microsecond_values_is_not_rescaled():
    p = kineto(*NS_RES)
    d, problems = decoded(p)
    assert problems == () and d.meta["displayTimeUnit"] == "ns" and "ts_converted_from_ns" not in d.meta
    steps = d.tables["steps"]
    assert steps["ts_ns"].iloc[0] == 1712195495502094_565 and steps["dur_ns"].iloc[0] == 35115_869


def test_gloo_cpu_traces_give_collectives_with_sizes():
    files = gloo_files()
    assert len(files) == 4
    ranks = set()
    for p in files:
        d, problems = decoded(p)
        ref = reference(p)
        assert problems == ()
        info = d.meta["distributedInfo"]
        ranks.add(info["rank"])
        assert info["backend"] == "gloo" and info["pg_count"] == 5 and d.meta["with_flops"] == 1
        assert "gpu_ops" not in d.tables
        c = d.tables["collectives"]
        gloo = c[c["source"] == "gloo"]
        assert len(gloo) == len(ref["gloo"]) == 210
        assert (gloo["in_bytes"] > 0).all()
        same = gloo[gloo["collective"].isin(["all_reduce", "broadcast", "send", "recv"])]
        assert (same["out_bytes"] == same["in_bytes"]).all()
        ag = gloo[gloo["collective"] == "all_gather"]
        assert len(ag) == 60 and ag["out_bytes"].isna().all()  # group size is not in the event
        bc = gloo[gloo["collective"] == "broadcast"]
        assert set(bc["dtype"]) == {"long int"} and set(bc["elem_bytes"]) == {8.0}
        # every gloo event is kept with its ts/dur and thread exactly as written
        first = min(ref["gloo"], key=lambda e: e["ts"])
        row = gloo.iloc[0]
        assert (row["ts_ns"], row["dur_ns"], row["tid"], row["name"]) == (
            to_ns(first["ts"]), to_ns(first["dur"]), str(first["tid"]), first["name"])
        # the c10d ops show what gloo's events cannot: reduce_scatter (run by gloo as a full all_reduce)
        rs = c[(c["source"] == "c10d") & (c["collective"] == "reduce_scatter")]
        assert len(rs) == 40 and (rs["out_nelems"] * 2 == rs["in_nelems"]).all()
        agc = c[(c["source"] == "c10d") & (c["collective"] == "all_gather")]
        assert (agc["out_nelems"] == 2 * agc["in_nelems"]).all() and agc["out_bytes"].notna().all()
        assert len(d.tables["memory"]) == ref["memory"]
        assert len(d.tables["steps"]) == 5
        ops = d.tables["cpu_ops"]
        assert set(ops["name"]) <= {"aten::mm", "aten::addmm", "aten::linear", "aten::matmul", "aten::mul", "aten::add"}
        addmm = ops[ops["name"] == "aten::addmm"].iloc[0]
        assert json.loads(addmm["input_dims"])[0] and addmm["input_types"].startswith('["float"')
    assert ranks == {0, 1, 2, 3}


# ------------------------------------------------------------------------------------------------
# Constructed files


def ev(name, cat, ts, dur=1.0, tid=1, pid=1, args=None, ph="X"):
    e = {"ph": ph, "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts}
    if ph == "X":
        e["dur"] = dur
    if args is not None:
        e["args"] = args
    return e


def sample_events():
    return [
        ev("ProfilerStep#7", "user_annotation", 100.5, 50.25),
        ev("aten::mm", "cpu_op", 101, 2, args={"Input Dims": [[4, 8], [8, 16]], "Input type": ["float", "float"]}),
        ev("aten::relu", "cpu_op", 102, 1),
        ev("ncclDevKernel_AllReduce_RING_LL(x)", "kernel", 110.125, 5, tid=7, pid=0,
           args={"stream": 7, "device": 0, "correlation": 42, "Collective name": "allreduce", "In msg nelems": 10,
                 "Out msg nelems": 10, "dtype": "BFloat16", "Group size": 4, "Process Group Name": "0",
                 "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3]", "Seq": 3}),
        ev("void dpsk::ep::internode::dispatch<1>(x)", "kernel", 111, 2, tid=9, pid=0, args={"stream": 9, "device": 0}),
        ev("gemm says }, { and \\\"quotes\\\"", "kernel", 112, 1, tid=7, pid=0, args={"stream": 7, "device": 0}),
        ev("Memcpy HtoD", "gpu_memcpy", 113, 1, tid=7, pid=0, args={"stream": 7, "device": 0, "correlation": 43}),
        ev("[memory]", "cpu_instant_event", 114, ph="i",
           args={"Total Reserved": 2048, "Total Allocated": 1024, "Bytes": 512, "Device Id": 0, "Device Type": 1}),
        ev("gloo:all_reduce", "user_annotation", 115, 3, tid=55,
           args={"Input Dims": [[2, 3]], "Input type": ["float"]}),
    ]


def write_trace(path: Path, events, before=None, after=None, indent=None, gz=False) -> Path:
    doc = dict(before or {})
    doc["traceEvents"] = events
    doc.update(after or {})
    text = json.dumps(doc, indent=indent).encode()
    if gz:
        path.write_bytes(gzip.compress(text))
    else:
        path.write_bytes(text)
    return path


def decode(path: Path, **kw) -> tuple[DecodedTrace, list]:
    problems: list = []
    return decode_trace(path, problems, **kw), problems


@pytest.fixture(params=["default", "tiny-chunks"])
def chunking(request, monkeypatch):
    if request.param == "tiny-chunks":  # every chunk boundary falls inside events, strings and numbers
        monkeypatch.setattr(kd, "CHUNK", {b: 37 for b in kd.CHUNK})
    return request.param


def test_metadata_after_trace_events_and_all_tables(tmp_path, chunking):
    after = {"distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4}, "displayTimeUnit": "ms",
             "baseTimeNanoseconds": 1700000000000000000, "traceName": "x.json",
             "metadata": {"HF_TOKEN": "secret"}, "INFO": ["log line"]}
    p = write_trace(tmp_path / "t.json", sample_events(), before={"schemaVersion": 1}, after=after)
    d, problems = decode(p)
    assert problems == []
    assert d.meta["distributedInfo"] == after["distributedInfo"]
    assert d.meta["baseTimeNanoseconds"] == 1700000000000000000 and d.meta["schemaVersion"] == 1
    assert d.meta["deviceProperties"] == [] and "metadata" not in d.meta and "INFO" not in d.meta
    t = d.tables
    assert t["steps"].to_dict("records") == [{"step": 7, "ts_ns": 100_500, "dur_ns": 50_250}]
    g = t["gpu_ops"]
    assert list(g["kind"]) == ["comm", "comm", "kernel", "memcpy"]
    assert list(g["stream"]) == [7, 9, 7, 7] and list(g["correlation"]) == [42, -1, -1, 43]
    assert g["name"].iloc[2] == 'gemm says }, { and \\"quotes\\"'
    c = t["collectives"].set_index("source")
    k = c.loc["gpu_kernel"]
    assert (k["collective"], k["in_bytes"], k["out_bytes"], k["elem_bytes"], k["group_size"], k["seq"],
            k["group_ranks"], k["tid"]) == ("all_reduce", 20.0, 20.0, 2.0, 4, 3, "[0, 1, 2, 3]", "7")
    gl = c.loc["gloo"]
    assert (gl["collective"], gl["in_nelems"], gl["in_bytes"], gl["group_size"], gl["seq"], gl["group_name"]) == \
        ("all_reduce", 6, 24.0, -1, -1, "")
    ops = t["cpu_ops"]
    assert ops.to_dict("records") == [{"name": "aten::mm", "ts_ns": 101_000, "dur_ns": 2_000, "tid": "1",
                                       "input_dims": "[[4, 8], [8, 16]]", "input_types": '["float", "float"]',
                                       "kernel_launches": -1}]  # no launch linked to a kernel: unknown
    assert t["memory"].to_dict("records") == [{"ts_ns": 114_000, "device_type": 1, "device_id": 0, "bytes": 512.0,
                                               "total_allocated": 1024.0, "total_reserved": 2048.0}]


def test_pretty_printed_gz_and_backends_agree(tmp_path, chunking):
    p = write_trace(tmp_path / "t.json.gz", sample_events(), after={"displayTimeUnit": "ms"}, indent=2, gz=True)
    d, problems = decode(p)
    assert problems == []
    for backend in kd.BACKENDS:
        probs: list = []
        other = kd._decode(p, probs, backend=backend)
        assert probs == [] and other.meta == d.meta and set(other.tables) == set(d.tables)
        for name in d.tables:
            pd.testing.assert_frame_equal(other.tables[name], d.tables[name])
    assert d.tables["cpu_ops"]["input_dims"].iloc[0] == "[[4, 8], [8, 16]]"  # same text as the one-line file


def test_backends_agree_on_a_real_file(monkeypatch):
    p = kineto(*NCCL_DATA)
    d, _ = decoded(p)
    monkeypatch.setattr(kd, "CHUNK", {b: 4096 for b in kd.CHUNK})
    for backend in kd.BACKENDS:
        probs: list = []
        other = kd._decode(p, probs, backend=backend)
        assert probs == []
        for name in d.tables:
            pd.testing.assert_frame_equal(other.tables[name], d.tables[name])


def test_float_ns_ts_strings_and_bad_ts(tmp_path, chunking):
    events = [ev("ProfilerStep#1", "user_annotation", "1000.125", "20.5"),
              ev("k1", "kernel", 1001.333, 0.001, args={"stream": 7}),
              ev("k2", "kernel", " 1002.5\t", "3", args={"stream": 7}),
              ev("k3", "kernel", "soon", 1, args={"stream": 7}),
              ev("k4", "kernel", None, 1, args={"stream": 7}),
              ev("k5", "kernel", {"ts": 1}, 1, args={"stream": 7})]
    d, problems = decode(write_trace(tmp_path / "t.json", events))
    path = str(tmp_path / "t.json")  # the field and the events (index in traceEvents) are named
    assert sorted(problems) == [(path, "1 event skipped: field 'ts' missing (in traceEvents[4])"),
                                (path, "2 events skipped: field 'ts' not a number (in traceEvents[3], traceEvents[5])")]
    g = d.tables["gpu_ops"]
    assert list(g["name"]) == ["k1", "k2"] and list(g["ts_ns"]) == [1001_333, 1002_500] and list(g["dur_ns"]) == [1, 3000]
    assert d.tables["steps"]["ts_ns"].iloc[0] == 1000_125


def test_ns_values_are_converted_only_when_they_look_like_ns(tmp_path):
    ns = [ev("ProfilerStep#1", "user_annotation", 5_000_000_000, 20_000_000),
          ev("k", "kernel", 5_000_001_000, 4_000, args={"stream": 7})]
    d, problems = decode(write_trace(tmp_path / "ns.json", ns, after={"displayTimeUnit": "ns"}))
    assert problems == [] and d.meta["ts_converted_from_ns"] is True
    assert d.tables["gpu_ops"]["ts_ns"].iloc[0] == 5_000_001_000 and d.tables["gpu_ops"]["dur_ns"].iloc[0] == 4_000
    assert d.tables["steps"]["dur_ns"].iloc[0] == 20_000_000
    us = [ev("k", "kernel", 5_000_001, 4, args={"stream": 7})]  # integer µs, short: not ns
    d, _ = decode(write_trace(tmp_path / "us.json", us, after={"displayTimeUnit": "ns"}))
    assert "ts_converted_from_ns" not in d.meta and d.tables["gpu_ops"]["ts_ns"].iloc[0] == 5_000_001_000


def test_truncated_gz_keeps_what_was_read(tmp_path):
    src = kineto(*NCCL_DATA)
    full, _ = decoded(src)
    data = src.read_bytes()
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(data[: len(data) // 2])
    d, problems = decode(cut)
    assert len(problems) == 1
    msg = problems[0][1]
    assert problems[0][0] == str(cut) and "gzip stream ends early" in msg
    n = int(re.search(r"after (\d+) events", msg).group(1))
    assert 0 < n < 40573
    assert 0 < len(d.tables["gpu_ops"]) < len(full.tables["gpu_ops"])
    assert d.meta["distributedInfo"]["rank"] == 0  # written before traceEvents: read
    assert "baseTimeNanoseconds" not in d.meta  # written after traceEvents: lost with the tail
    # the rows that were read are exactly the full file's first rows
    pd.testing.assert_frame_equal(d.tables["steps"], full.tables["steps"].iloc[: len(d.tables["steps"])])


def test_truncated_plain_json_and_bad_gzip_crc(tmp_path):
    p = write_trace(tmp_path / "t.json", sample_events(), after={"traceName": "x"})
    text = p.read_bytes()
    short = tmp_path / "short.json"
    short.write_bytes(text[: text.index(b"Memcpy HtoD") + 5])
    d, problems = decode(short)
    assert problems == [(str(short), "truncated after 6 events; the rest was skipped")]
    assert len(d.tables["gpu_ops"]) == 3 and len(d.tables["steps"]) == 1
    # complete JSON but a broken gzip trailer (CRC): everything is kept, the error is reported
    gz = bytearray(gzip.compress(text))
    gz[-8] ^= 0xFF
    bad = tmp_path / "crc.json.gz"
    bad.write_bytes(bytes(gz))
    d, problems = decode(bad)
    assert len(problems) == 1 and "gzip error" in problems[0][1] and "CRC" in problems[0][1]
    assert len(d.tables["gpu_ops"]) == 4
    # metadata after the events cut off
    tail = tmp_path / "tail.json"
    tail.write_bytes(text[: text.index(b'"traceName"')])
    d, problems = decode(tail)
    assert len(problems) == 1 and "the metadata after the events is missing" in problems[0][1]
    assert len(d.tables["gpu_ops"]) == 4


@pytest.mark.parametrize("content, expect", [
    (b"", "empty file"),
    (b"hello world", "not JSON"),
    (b"\x00\x01\x02binary", "binary data"),
    (b'{"schemaVersion": 1, "deviceProperties": []}', "not a Kineto trace"),
    (b"42", "not a trace object"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": NaN, "dur": 1}]}',
     "1 event skipped: field 'ts' not a number"),
    (b'{"traceEvents": 5}', "traceEvents\" is not an array"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}, {"ph": "X", "ts": ]}, '
     + json.dumps([{"ph": "X", "name": "filler", "ts": i} for i in range(5)])[1:].encode() + b"}",
     "malformed JSON"),
    (b'{"traceEvents": [1, 2, {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}]}',
     "2 trace events that are not JSON objects"),
    (b'{"traceEvents": [], "distributedInfo": [1]}', "distributedInfo is not a JSON object"),
])
def test_bad_input_never_raises(tmp_path, content, expect):
    p = tmp_path / "bad.json"
    p.write_bytes(content)
    d, problems = decode(p)
    assert isinstance(d, DecodedTrace)
    assert any(expect in msg for _, msg in problems), problems
    assert all(where == str(p) for where, _ in problems)


def test_missing_file_and_gzip_garbage(tmp_path):
    d, problems = decode(tmp_path / "nope.json")
    assert d.tables == {} and "cannot open" in problems[0][1]
    p = tmp_path / "g.json.gz"
    p.write_bytes(b"\x1f\x8b" + b"garbage" * 10)
    d, problems = decode(p)
    assert d.tables == {} and "gzip" in problems[0][1]


def test_invalid_utf8_inside_a_name_is_replaced(tmp_path):
    p = write_trace(tmp_path / "t.json", sample_events() * 3)
    text = p.read_bytes().replace(b"Memcpy HtoD", b"Memcpy \xff\xfe", 1)
    p.write_bytes(text)
    d, problems = decode(p)
    assert problems == []
    assert "Memcpy \ufffd\ufffd" in set(d.tables["gpu_ops"]["name"])


def test_comm_patterns(tmp_path):
    p = write_trace(tmp_path / "t.json", sample_events())
    d, _ = decode(p)
    assert "dpsk::ep::" in DEFAULT_COMM_PATTERNS
    assert d.tables["gpu_ops"].set_index("name").loc["void dpsk::ep::internode::dispatch<1>(x)", "kind"] == "comm"
    d, problems = decode(p, comm_patterns=())
    assert problems == []
    assert d.tables["gpu_ops"].set_index("name").loc["void dpsk::ep::internode::dispatch<1>(x)", "kind"] == "kernel"
    d, problems = decode(p, comm_patterns=("(unclosed", r"gemm says"))
    assert len(problems) == 1 and "not a valid regex" in problems[0][1]
    assert d.tables["gpu_ops"].set_index("name").loc['gemm says }, { and \\"quotes\\"', "kind"] == "comm"


def test_bare_event_array_and_bom(tmp_path):
    p = tmp_path / "arr.json"
    p.write_bytes(b"\xef\xbb\xbf" + json.dumps(sample_events()).encode())
    d, problems = decode(p)
    assert problems == [] and len(d.tables["gpu_ops"]) == 4 and d.meta["distributedInfo"] is None


def test_dtype_sizes_and_collective_names():
    assert kd.elem_bytes("Float") == 4 and kd.elem_bytes("float") == 4 and kd.elem_bytes("c10::BFloat16") == 2
    assert kd.elem_bytes("Half") == 2 and kd.elem_bytes("Double") == 8 and kd.elem_bytes("Long") == 8
    assert kd.elem_bytes("long int") == 8 and kd.elem_bytes("Int") == 4 and kd.elem_bytes("Byte") == 1
    assert kd.elem_bytes("Char") == 1 and kd.elem_bytes("Bool") == 1 and kd.elem_bytes("unsigned char") == 1
    assert kd.elem_bytes("Float8_e4m3fn") == 1 and math.isnan(kd.elem_bytes("TensorList"))
    names = {"allreduce": "all_reduce", "_allgather_base": "all_gather", "allgather_into_tensor_coalesced": "all_gather",
             "_reduce_scatter_base": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
             "all_to_allv": "all_to_all", "c10d::alltoall_base_": "all_to_all", "gloo:all_reduce": "all_reduce",
             "nccl:_all_gather_base": "all_gather", "broadcast": "broadcast", "c10d::recv_": "recv",
             "send": "send", "c10d::barrier": "barrier", "reduce": "reduce", "gather": "gather"}
    assert {k: kd.canonical_collective(k) for k in names} == names


def _trace(tmp_path: Path, events: list) -> Path:
    p = tmp_path / "rank0.pt.trace.json"
    p.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    return p


def test_runtime_calls_are_reduced_to_the_earliest_call_per_correlation(tmp_path):
    """Issue 15 (a 2 GB trace in <= 500 MB): the runtime/driver calls (4-5 per kernel) are not kept as rows; each
    GPU row and hta row gets ``launch_ts_ns``, the earliest call's ts with its correlation (HTA's last-step filter
    asks nothing else of them), NO_LAUNCH when there is none. A call whose ts is a day away is still refused."""
    ev = [{"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{i}", "ts": 1000 * i, "dur": 900, "pid": 1, "tid": 1}
          for i in (1, 2)]
    ev += [{"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": ts, "dur": 5, "pid": 1, "tid": 1,
            "args": {"correlation": corr}} for ts, corr in ((1500, 5), (1100, 5), (1200, 6), (2100, 7))]
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1000 + 86_400 * 10 ** 6 * 2,
               "dur": 5, "pid": 1, "tid": 1, "args": {"correlation": 9}})  # two days away: refused
    ev += [{"ph": "X", "cat": "kernel", "name": f"k{corr}", "ts": ts, "dur": 50, "pid": 0, "tid": 7,
            "args": {"correlation": corr, "stream": 7, "device": 0}}
           for ts, corr in ((1300, 5), (1250, 6), (2200, 7), (2300, 8), (2400, 9))]
    ev.append({"ph": "X", "cat": "cpu_op", "name": "triton_launcher", "ts": 2050, "dur": 10, "pid": 1, "tid": 1,
               "args": {"stream": 0, "correlation": 7}})  # an hta "gpu" row
    problems: list = []
    d = decode_trace(_trace(tmp_path, ev), problems)
    g = d.tables["gpu_ops"].set_index("name")["launch_ts_ns"]
    assert g.to_dict() == {"k6": 1_200_000, "k5": 1_100_000, "k7": 2_100_000, "k8": kd.NO_LAUNCH,
                           "k9": kd.NO_LAUNCH}
    h = d.tables["hta_events"]
    assert set(h["role"]) == {"gpu", "mark"}  # no "launch" rows
    assert h.loc[h["role"] == "gpu", "launch_ts_ns"].tolist() == [2_100_000]
    assert any("field 'ts'" in text and "one day" in text for _, text in problems)


def test_hta_metrics_from_launch_ts_equal_those_from_launch_rows():
    """intervals.hta_gpu_time_metrics gives the same numbers from the reduced form (launch_ts_ns) as from the
    runtime calls as rows (what the decoder kept before): random kernels, calls and steps, with and without the
    last-step filter."""
    import numpy as np

    from reportgen.intervals import hta_gpu_time_metrics

    rng = np.random.default_rng(7)
    for _ in range(25):
        n, m = int(rng.integers(1, 60)), int(rng.integers(0, 120))
        gpu = pd.DataFrame({"name": rng.choice(["gemm", "ncclKernel_AllReduce", "Memcpy DtoD", "Event Sync"], n),
                            "stream": rng.choice([-1, 7, 8], n, p=[0.1, 0.45, 0.45]),
                            "correlation": rng.integers(-1, 40, n), "ts_ns": rng.integers(0, 10 ** 7, n),
                            "dur_ns": rng.integers(0, 10 ** 5, n)})
        calls = pd.DataFrame({"role": "launch", "name": "", "stream": -1, "correlation": rng.integers(-1, 40, m),
                              "ts_ns": rng.integers(0, 10 ** 7, m), "dur_ns": 0})
        marks = pd.DataFrame({"role": "mark", "name": ["ProfilerStep#1", "ProfilerStep#2"], "stream": -1,
                              "correlation": -1, "ts_ns": np.sort(rng.integers(0, 10 ** 7, 2)), "dur_ns": 10})
        rows_form = pd.concat([marks, calls], ignore_index=True)
        first = calls.groupby("correlation")["ts_ns"].min()
        reduced_gpu = gpu.assign(launch_ts_ns=gpu["correlation"].map(first).fillna(kd.NO_LAUNCH).astype("int64"))
        reduced_events = marks.assign(launch_ts_ns=kd.NO_LAUNCH)
        for drop in (False, True):
            a = hta_gpu_time_metrics(gpu, rows_form, drop)
            b = hta_gpu_time_metrics(reduced_gpu, reduced_events, drop)
            assert a.keys() == b.keys()
            assert all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)


def test_top_level_values_are_delimited_before_any_is_decoded(tmp_path, chunking, monkeypatch):
    """Issue 29 #5: a key no reader uses is skipped unread (also with bytes that are not UTF-8 in it); a metadata
    value over META_VALUE_BYTES is not decoded whole: distributedInfo keeps its small fields, drops the big ones
    and names them; another big metadata value is dropped and named."""
    monkeypatch.setattr(kd, "META_VALUE_BYTES", 400)
    groups = [{"pg_name": str(i), "ranks": [0, 1]} for i in range(40)]  # ~1.2 KB
    info = {"rank": 1, "world_size": 2, "backend": "nccl", "pg_config": groups, "extra": list(range(500))}
    raw = json.dumps({"schemaVersion": 1, "noise": [{}] * 2000, "distributedInfo": info,
                      "deviceProperties": [{"id": 0, "name": "x" * 500}], "traceEvents": sample_events()[:3],
                      "baseTimeNanoseconds": 5}).encode()
    p = tmp_path / "t.json"
    p.write_bytes(raw.replace(b'"noise": [{}', b'"noise": ["\xff\xfe", {}'))
    d, problems = decode(p)
    assert d.meta["distributedInfo"] == {"rank": 1, "world_size": 2, "backend": "nccl"}
    assert d.meta["deviceProperties"] == [] and d.meta["baseTimeNanoseconds"] == 5 and "noise" not in d.meta
    texts = [t for _, t in problems]
    assert any(t.startswith("distributedInfo.pg_config is 0.0 MB, more than") and "process groups are not read"
               in t for t in texts), texts
    assert any(t.startswith("deviceProperties is ") and t.endswith("; ignored") for t in texts), texts
    assert len(texts) == 2 and len(d.tables["steps"]) == 1
    monkeypatch.setattr(kd, "META_VALUE_BYTES", 8 << 20)  # under the limit: decoded as before
    d, problems = decode(p)
    assert d.meta["distributedInfo"] == info and len(d.meta["deviceProperties"]) == 1 and problems == []


def test_a_malformed_value_of_an_unused_key_still_stops_the_file(tmp_path, chunking):
    p = tmp_path / "t.json"
    p.write_bytes(b'{"schemaVersion": 1, "noise": [1, 2,, 3], "traceEvents": ['
                  + b'{"ph": "i", "name": "x", "ts": 1},' * 20 + b'{}]}')
    d, problems = decode(p)
    assert [t for _, t in problems] == ["malformed JSON at byte 36 (Expecting value) after 0 events"]


def test_metadata_limits_hold_at_any_chunk_boundary_and_depth(tmp_path, monkeypatch):
    """A number cut by a chunk's end ("-12.", "1e+") is read on, not decoded whole (the limit held for 1 padding
    of 6 before); a value nested deeper than msgspec goes is named, not raised (found by review)."""
    monkeypatch.setattr(kd, "META_VALUE_BYTES", 400)
    for chunk in (5, 6, 7, 8, 37, 1001):
        monkeypatch.setattr(kd, "CHUNK", {b: chunk for b in kd.CHUNK})
        for pad in range(3):
            raw = ("{" + " " * pad + '"distributedInfo": {"rank": 0, "pg_config": [' + ", ".join(["-12.5e+1"] * 200)
                   + ']}, "traceEvents": ' + json.dumps(sample_events()[:2]) + "}")
            p = tmp_path / "t.json"
            p.write_text(raw)
            d, problems = decode(p)
            assert d.meta["distributedInfo"] == {"rank": 0}, (chunk, pad)
            assert [t for _, t in problems][0].startswith("distributedInfo.pg_config is"), (chunk, pad, problems)
    monkeypatch.setattr(kd, "CHUNK", {b: 64 << 10 for b in kd.CHUNK})
    p = tmp_path / "deep.json"
    p.write_text('{"traceEvents": ' + json.dumps(sample_events()[:2]) + ', "metadata": ' + "[" * 5000 + "]" * 5000
                 + "}")
    d, problems = decode(p)
    assert [t for _, t in problems] == [problems[0][1]] and "nested too deeply" in problems[0][1]


# ------------------------------------------------------------------------------------------------
# The fast path (columns, _Collector._feed_fast) against the per-event path: same tables, rows, order, problems
# (bench/kineto_fast_check.py runs the same comparison on every Kineto fixture)


def _both_paths(path: Path, monkeypatch) -> tuple:
    out = []
    for fast in (True, False):
        monkeypatch.setattr(kd, "_FAST", fast)
        problems: list = []
        d = kd._decode(path, problems)
        out.append((d.meta, d.tables, problems))
    return out


def _assert_same(a, b) -> None:
    assert a[2] == b[2]
    assert a[0] == b[0]
    assert sorted(a[1]) == sorted(b[1])
    for k in a[1]:
        pd.testing.assert_frame_equal(a[1][k], b[1][k], check_exact=True)


@pytest.mark.parametrize("parts", [XDIT, DF_INDEX, TB2021, NS_RES, MI300],
                         ids=["xdit", "df_index", "tb2021", "ns_res", "mi300"])
def test_fast_path_gives_the_per_event_tables_on_real_traces(parts, monkeypatch):
    fast, slow = _both_paths(kineto(*parts), monkeypatch)
    assert fast[1]
    _assert_same(fast, slow)


def mixed_events(n: int = 150) -> list:
    """Plain events in numbers (so the column paths run) with odd ones among them: refused times, odd ids and
    args, rows of one table from several buckets in one batch, float texts and ints mixed."""
    out = []
    for i in range(n):
        t = 1000 + 10 * i
        ts = t if i % 3 else f"{t}.{i % 1000:03d}"  # ints and texts in one column
        out.append(ev("aten::linear" if i % 7 == 0 else "aten::relu", "cpu_op", ts, 2, tid=1 + i % 3,
                      args={"Input Dims": [[4, 8], [8, i % 5]], "Input type": ["float", "float"]}))
        out.append(ev("cudaLaunchKernel", "cuda_runtime", t + 1, 1, tid=1, args={"correlation": i}))
        out.append(ev(f"gemm_{i % 4}", "kernel", t + 2, 3, tid=7, pid=0,
                      args={"stream": 7, "device": 0, "correlation": i}))
        out.append(ev("[memory]", "cpu_instant_event", t + 3, ph="i",
                      args={"Total Reserved": 2048, "Total Allocated": 1024 + i, "Bytes": 512, "Device Id": 0,
                            "Device Type": 1}))
        out.append(ev("python_fn", "python_function", t + 4, 1))
    odd = [
        ev("aten::mm", "cpu_op", -1, 2),  # refused ts (negative is fine for ints) ...
        ev("aten::mm", "cpu_op", 1500, -5),  # refused dur
        ev("aten::mm", "cpu_op", "x1", 2),  # not a number
        ev("gemm_bad", "kernel", 1501, 1, tid=7, pid=0, args={"stream": "abc", "device": 0, "correlation": 5}),
        ev("gemm_bad2", "kernel", 1502, -1, tid=7, pid=0, args={"stream": 1, "device": 0}),
        ev("[memory]", "cpu_instant_event", 1503, ph="i", args={"Bytes": True, "Total Allocated": -4}),
        ev("triton_launcher", "cpu_op", 1504, 1, args={"stream": 0, "correlation": 9}),
        ev("ProfilerStep#3", "cpu_op", 1505, 100),
        ev("cudaStreamSync", "cuda_runtime", 1505, 1, args={"stream": 3, "correlation": 10}),
        ev("record_param_comms", "cpu_op", 1506, 1, args={"Collective name": "allreduce", "In msg nelems": "12abc"}),
        ev("ncclDevKernel_AllReduce", "kernel", 1506, 1, tid=7, pid=0,
           args={"stream": 7, "Collective name": "allreduce", "In msg nelems": 10, "Seq": -3}),
        ev("aten::mm", "user_annotation", 1507, 1, args={"Input Dims": [[-1, 2]]}),
        ev("aten::addmm", "cpu_op", 1508, 1, args={"Input Dims": [[2, 2]], "flops": "many"}),
        ev("cudaLaunchKernel", "cuda_runtime", 1509, 1, tid=True, args={"correlation": 11}),
        ev("cudaLaunchKernel", "cuda_runtime", 1510, 1, tid="1", args={"correlation": 12}),
        ev("cudaLaunchKernel", "cuda_runtime", "1511.5", 1, tid=1, args={"correlation": 1.0}),
        ev("odd", "mtia_ccp_events", 1512, 1, args={"stream": 4}),
        ev("gpu_step", "gpu_user_annotation", 1513, 1, args={}),
        ev("ProfilerStep#4", "gpu_user_annotation", 1514, 1),
    ]
    for k, e in enumerate(odd):  # spread over the first fifth (the later batches are plain)
        out.insert(11 * (k + 1) % (len(out) // 5), e)
    return out


@pytest.mark.parametrize("chunk", [None, 37, 64 << 10], ids=["default", "tiny", "64K"])
def test_fast_path_gives_the_per_event_tables_on_odd_values(tmp_path, chunk, monkeypatch):
    if chunk:
        monkeypatch.setattr(kd, "CHUNK", {b: chunk for b in kd.CHUNK})
    path = write_trace(tmp_path / "mixed.json", mixed_events(700))
    columns = []  # sizes of the time columns converted as columns (the column path itself, not only its fallbacks)
    bulk = kd._bulk_ns

    def counted(vals):
        out = bulk(vals)
        if out is not None:
            columns.append(len(vals))
        return out

    monkeypatch.setattr(kd, "_bulk_ns", counted)
    fast, slow = _both_paths(path, monkeypatch)
    assert {"gpu_ops", "host_ops", "cpu_ops", "memory", "hta_events", "collectives"} <= set(fast[1])
    assert any("skipped" in p for _, p in fast[2])
    if chunk == 64 << 10:
        assert max(columns) >= 64
    _assert_same(fast, slow)


def test_bulk_times_are_the_per_value_times_or_none():
    """_bulk_ns (a time column at once) gives exactly what to_ns gives value by value, or None (the caller then reads
    the values one by one): never another number. Plain columns (digits, at most 3 decimals) are read at once."""
    import random

    rng = random.Random(5)
    odd = ["0", "12", "123.4", "5.", ".5", "1.2.3", "", "1e5", "-3", "+3", "\u0661\u0662", "12345678901234567",
           "1234567890123456", "9999999999999999.999", " 1", "1,2", "0000000000000001.5", "3.000", "7.01", "\u00e4",
           "1\x00", "..", ",", "/", ":", "4446594000000.1234", 5, -4, 10**17, 0,
           "9223372036854775.808", "9223372036854775.807", "-9223372036854775.808"]  # (past int64 in ns: no wrap)
    plain = ["4446594000000.0", "4446594000000.123", "12.5", "100", "7.01"]
    read_at_once = 0
    for trial in range(3000):
        n = rng.choice([1, 63, 64, 65, 100, 300])
        vals = [rng.choice(plain) for _ in range(n)]
        for _ in range(rng.choice([0, 0, 1, 3])):
            vals[rng.randrange(n)] = rng.choice(odd)
        got = kd._bulk_ns(vals)
        if got is not None:
            assert str(got.dtype) == "int64" and got.tolist() == [to_ns(v) for v in vals], vals
            read_at_once += 1
        elif all(isinstance(v, str) and v in plain for v in vals):
            raise AssertionError(f"a plain column was not read at once: {vals[:3]}")
    assert read_at_once > 1000


def test_a_step_recorded_twice_is_one_row_with_the_widest_span(tmp_path):
    """ProfilerStep#N on two threads (another process's copy, or the optimizer thread), written out of order: one
    row per step, in step order, from the earliest start to the latest end of its copies."""
    events = [ev("ProfilerStep#2", "user_annotation", 2000, 100, tid=1),
              ev("ProfilerStep#1", "user_annotation", 1000, 500, tid=1),
              ev("ProfilerStep#1", "user_annotation", 900, 200, tid=2),
              ev("ProfilerStep#2", "user_annotation", 2050, 200, tid=2),
              ev("ProfilerStep#3", "user_annotation", 3000, 10, tid=1)]
    d, problems = decode(write_trace(tmp_path / "t.json", events))
    st = d.tables["steps"]
    assert problems == []
    assert list(st.columns) == ["step", "ts_ns", "dur_ns"] and all(str(t) == "int64" for t in st.dtypes)
    assert st.values.tolist() == [[1, 900_000, 600_000], [2, 2_000_000, 250_000], [3, 3_000_000, 10_000]]


def test_a_collectives_repeated_metadata_gives_the_rows_and_problems_made_afresh(tmp_path, monkeypatch):
    """The decoder reuses a collective row's metadata when the values it is made from repeat (only times and Seq
    change): the tables and data problems must be those of making every row afresh, whatever the values: 1 beside
    True, 1.0 and "1", a list of ranks, out-of-range and refused values (which are named each time), Seq absent, a
    bool or out of range, record_param_comms and c10d rows beside kernels."""
    base = {"stream": 7, "device": 0, "Collective name": "allreduce", "In msg nelems": 10, "Out msg nelems": 10,
            "dtype": "Float", "Group size": 4, "Process Group Name": "0", "Process Group Description": "default_pg",
            "Process Group Ranks": "[0, 1, 2, 3]"}
    variants = [{}, {"Group size": True}, {"Group size": 1.0}, {"Group size": "1"}, {"Group size": 1},
                 {"In msg nelems": True}, {"In msg nelems": 1}, {"In msg nelems": 2 ** 60}, {"In msg nelems": -3},
                 {"Process Group Ranks": [0, 1, 2, 3]}, {"Src Rank": 5}, {"Src Rank": 5.0}, {"Dst Rank": 10 ** 9},
                 {"dtype": 3}, {"Process Group Name": 1}, {"Process Group Name": True}]
    events, t = [ev("ProfilerStep#1", "user_annotation", 0, 100_000)], 1.0
    for rep in range(3):
        for i, extra in enumerate(variants):
            for seq in (i * 10 + rep, None, True, -1, 2 ** 70):
                args = {**base, **extra} if seq is None else {**base, **extra, "Seq": seq}
                events.append(ev("ncclDevKernel_AllReduce_RING_LL(x)", "kernel", t, 2, tid=7, pid=0, args=args))
                events.append(ev("record_param_comms", "cpu_op", t, 1, tid=3, args=args))
                t += 3.0
    path = write_trace(tmp_path / "t.json", events)
    d, problems = decode(path)
    monkeypatch.setattr(kd, "_TAILS_MAX_CHARS", 300)  # the texts the reused rows' keys may hold: a few keys
    bounded, bounded_problems = decode(path)
    monkeypatch.setattr(kd, "_KEY_CLASSES", frozenset())  # no row reused
    fresh, fresh_problems = decode(path)
    assert len(d.tables["collectives"]) == 2 * 3 * 5 * len(variants)
    for name, table in fresh.tables.items():
        pd.testing.assert_frame_equal(d.tables[name], table)
        pd.testing.assert_frame_equal(bounded.tables[name], table)
    assert problems == fresh_problems == bounded_problems and problems


@pytest.mark.parametrize("text", [
    b'{"rank": 3, "world_size": 8, "pg_config": [{"pg_name": "0", "ranks": [0, 1, 2, 3]}]}',
    b'[{"id": 0, "totalGlobalMem": 85899345920, "computeMajor": 8, "clock": 1.41e3}]',
    b'"ns"', b'1795303600000000000', b'-0', b'-0.0', b'0.1', b'1E2', b'true', b'null', b'{"a": 1, "a": 2}',
    b'NaN', b'[Infinity, -Infinity]', b'1e400', b'"\\ud800"', b'"x\xffy"', b'["\xc3\xa9", "\\u00e9"]',
    b'9' * 1001, b'9' * 1002, b'-' + b'9' * 1001, b'-' + b'9' * 1000, b'"' + b'7' * 1500 + b'"',
    b'19933688932870350000', b'[18446744073709551617, -18446744073709551617]',
    b'1' * 1200 + b'.5', b'[' * 100 + b']' * 100], ids=lambda t: f"{len(t)}B:{t[:12]!r}")
def test_metadata_values_read_by_msgspec_equal_the_stdlib_reading(text):
    """A metadata value goes through msgspec when msgspec reads it as the stdlib decoder (json_int) does; the
    value must be the same object either way, whatever the value (what msgspec reads otherwise falls back)."""
    import io

    def read(fast):
        r = kd._Reader(io.BytesIO(text + b"}"), 64 << 10)
        r.more()
        end = r.extent()
        state = {"count": 0}
        value = kd._meta_value(r, end, state) if fast and end is not None else kd._value(r, state)
        return value, r.pos

    want, got = read(False), read(True)
    assert repr(got) == repr(want) and type(got[0]) is type(want[0])


def test_decoded_trace_hands_its_tables_over_once():
    """A decoded trace is columns; the frames made from them equal ``.tables``, and the ``.reduced`` path takes each
    table out as it converts it (one copy of a rank's tables at a time: ``pop_frames`` to frames, ``from_frames``
    back to columns), which gives the same columns again."""
    import pickle

    path = fixture_dir("kineto", "hta_tests_data", "tests", "data", "trace_filter")
    trace = sorted(p for p in path.iterdir() if p.name.endswith((".json", ".json.gz")))[0]
    d = decode_trace(trace, [])
    want = {name: df.copy() for name, df in d.tables.items()}
    d = pickle.loads(pickle.dumps(d))  # what a pool worker sends: columns only
    assert d._tables is None and set(d.columns) == set(want)
    frames = d.pop_frames()
    assert d.columns == {} and list(frames) == list(want)
    for name, df in want.items():
        pd.testing.assert_frame_equal(frames[name], df, check_exact=True)
    back = DecodedTrace.from_frames({}, frames)
    assert frames == {}
    for name, df in want.items():
        pd.testing.assert_frame_equal(pd.DataFrame(back.columns[name]), df, check_exact=True)
