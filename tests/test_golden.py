"""Golden metrics: the --json output of every fixture, compared with tolerance.

Refresh on purpose (and say why in the commit):
    REPORTGEN_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import pytest

from reportgen import metrics

from conftest import REPO, analysed, fixture_dir, shared_root

GOLDEN = REPO / "golden"
UPDATE = os.environ.get("REPORTGEN_UPDATE_GOLDEN") == "1"

#: golden name -> fixture path below shared/fixtures
FIXTURES = {
    "mi_cluster_propose_pp2x4": ("mindinsight", "mi_cluster_propose_pp2x4"),
    "mi_profiler_single": ("mindinsight", "mi_profiler_single"),
    "mi_run_1_single_r1x": ("mindinsight", "mi_run_1_single_r1x"),
    "mi_run_2_dp_rank1": ("mindinsight", "mi_run_2_dp_rank1"),
    "mi_run_3_mp_rank1": ("mindinsight", "mi_run_3_mp_rank1"),
    "mi_run_4_pp_rank1": ("mindinsight", "mi_run_4_pp_rank1"),
    "ms_ut_hccl_dev6": ("mindinsight", "ms_ut_hccl_dev6"),
    "mi_parallel_strategy": ("mindinsight", "mi_parallel_strategy"),
    "ascend_st_level2_4rank": ("ascend", "msinsight", "test", "st", "level2"),
    "ascend_text_level0_2rank": ("ascend", "msinsight", "test", "data", "pytorch", "text", "level0"),
    "ascend_text_level1_2rank": ("ascend", "msinsight", "test", "data", "pytorch", "text", "level1"),
    "ascend_text_level2_2rank": ("ascend", "msinsight", "test", "data", "pytorch", "text", "level2"),
    "ascend_db_level0_2rank": ("ascend", "msinsight", "test", "data", "pytorch", "db", "level0"),
    "ascend_db_level1_2rank": ("ascend", "msinsight", "test", "data", "pytorch", "db", "level1"),
    "ascend_db_level2_2rank": ("ascend", "msinsight", "test", "data", "pytorch", "db", "level2"),
    "ascend_server_test_data": ("ascend", "msinsight", "server", "src", "test", "test_data"),
    "mindspore_cpu_dp4_graph": ("generated", "mindspore_cpu_ms_dp4_graph"),
    "mindspore_cpu_dp4_pynative": ("generated", "mindspore_cpu_ms_dp4_pynative"),
    "mindspore_cpu_single_new_graph": ("generated", "mindspore_cpu_ms_single_new_graph"),
    "kineto_gloo_ddp4": ("generated", "torch_gloo_ddp4_baseline"),
    "kineto_gloo_mesh2x2": ("kineto", "generated_cpu_gloo_4rank_mesh2x2"),
    "kineto_hta_trace_filter_2of128": ("kineto", "hta_tests_data", "tests", "data", "trace_filter"),
    "kineto_hta_nccl_data": ("kineto", "hta_tests_data", "tests", "data", "nccl_parser_config"),
}


#: a section table longer than this is kept in the golden file as its shape and checksums (table_digest), so that
#: the files stay reviewable: headline metrics, facts and findings in full, big tables by rows, sums and hashes
TABLE_ROWS_KEPT = 30


def table_digest(rows: list) -> dict:
    """A big table as a reviewer can read it and a test can check it: its row count, its first three rows, and per
    column the count of values, the sum / min / max of numbers (bools counted as 0/1) and, for text, the number of
    distinct values and a hash of them in row order. Numbers are compared with the golden tolerance."""
    cols: dict[str, list] = {}
    for r in rows:
        for k, v in (r.items() if isinstance(r, dict) else [("value", r)]):
            cols.setdefault(k, []).append(v)
    digest = {}
    for k, vs in cols.items():
        present = [v for v in vs if v is not None]
        nums = [float(v) for v in present if isinstance(v, (int, float))]
        entry: dict = {"values": len(present)}
        if nums and len(nums) == len(present):
            finite = [x for x in nums if math.isfinite(x)]
            entry.update(sum=math.fsum(finite), min=min(finite, default=None), max=max(finite, default=None))
        else:
            text = [json.dumps(v, sort_keys=True, ensure_ascii=False) for v in present]
            entry.update(distinct=len(set(text)),
                         sha256=hashlib.sha256("\n".join(text).encode("utf-8", "surrogatepass")).hexdigest()[:16])
        digest[k] = entry
    return {"rows": len(rows), "first_rows": rows[:3], "columns": digest}


def normalise(doc: dict, root: Path) -> dict:
    """Machine-independent: paths relative to the shared folder; big section tables as :func:`table_digest`."""
    text = json.dumps(doc)
    text = text.replace(json.dumps(str(root))[1:-1], "<shared>")
    out = json.loads(text)
    for block in out.get("sections", {}).values():
        tables = block.get("tables") or {}
        for name, rows in tables.items():
            if isinstance(rows, list) and len(rows) > TABLE_ROWS_KEPT:
                tables[name] = {"digest": table_digest(rows)}
    return out


def compare(actual, expected, path="$"):
    """Yield differences; floats compared with a relative tolerance of 1e-9."""
    if isinstance(expected, float) or isinstance(actual, float):
        if actual is None or expected is None or not math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-9):
            yield f"{path}: {actual!r} != {expected!r}"
    elif isinstance(expected, dict) and isinstance(actual, dict):
        for k in sorted(set(expected) | set(actual)):
            if k not in actual:
                yield f"{path}.{k}: missing"
            elif k not in expected:
                yield f"{path}.{k}: unexpected (refresh the golden file if intended)"
            else:
                yield from compare(actual[k], expected[k], f"{path}.{k}")
    elif isinstance(expected, list) and isinstance(actual, list):
        if len(actual) != len(expected):
            yield f"{path}: length {len(actual)} != {len(expected)}"
        for i, (a, e) in enumerate(zip(actual, expected)):
            yield from compare(a, e, f"{path}[{i}]")
    elif actual != expected:
        yield f"{path}: {actual!r} != {expected!r}"


def metrics_text(source, keep: bool = True) -> str:
    """The metrics JSON text of a run directory or "demo" as the CLI builds it, from conftest.analysed (once per
    process: the shift test below and tests/test_consistency.py use the same analyses)."""
    return metrics.dumps(analysed(source, keep)[2])


@pytest.mark.parametrize("name", ["demo"] + sorted(FIXTURES))
def test_golden_metrics(name):
    doc = normalise(json.loads(metrics_text("demo" if name == "demo" else fixture_dir(*FIXTURES[name]))),
                    shared_root())
    golden = GOLDEN / f"{name}.json"
    if UPDATE:
        golden.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    assert golden.exists(), f"{golden} missing: run REPORTGEN_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py"
    diffs = list(compare(doc, json.loads(golden.read_text())))
    assert not diffs, "\n".join(diffs[:30])
    assert not [s for s, b in doc["sections"].items() if b["status"] == "error"], "a section failed"


# ------------------------------------------------------------------------------------------------ shift invariance
# tests/test_timebase.py (a), here so that the original's metrics are those test_golden_metrics computed: every
# Kineto, Ascend and MindSpore CPU fixture above (plus the single-rank TraceLens MI300X and SGLang traces), copied
# with every timestamp shifted by +1.7e15 µs (+1.7e18 ns where the file writes ns), gives the same metrics JSON as the
# original, up to float formatting (rel_tol 1e-12).

SHIFT_CASES = {name: parts for name, parts in FIXTURES.items() if name.startswith(("kineto", "ascend", "mindspore"))}
SHIFT_CASES.update({
    "tracelens_mi300": ("kineto", "tracelens_selected", "tests", "traces", "mi300"),
    "tracelens_sglang": ("kineto", "tracelens_selected", "tests", "traces", "inference", "sglang_decode"),
})


def _root_free(text: str, root: Path) -> dict:
    return json.loads(text.replace(json.dumps(str(root))[1:-1], "<root>"))


@pytest.mark.parametrize("name", sorted(SHIFT_CASES))
def test_shifting_every_timestamp_changes_no_number(tmp_path, name):
    from test_timebase import diff, shifted_copy

    src = fixture_dir(*SHIFT_CASES[name])
    ref = _root_free(metrics_text(src), src)
    dst = shifted_copy(src, tmp_path / src.name)
    got = _root_free(metrics_text(dst, keep=False), dst)
    diffs = list(diff(got, ref))
    assert not diffs, "\n".join(diffs[:20])


# ------------------------------------------------------------------------------------------------ order invariance
# A Kineto trace lists its device events in the writer's order (by stream, by kind), which no number may depend on:
# the device events of each file shuffled give the same metrics JSON. The first fixture has communication kernels of
# two streams that start together (their instances, transits and order in the tables went with the file's order
# before). CPU ops keep the file's order where two have the same start and end: written parent first, it is all that
# tells which contains which (aten::matmul and its aten::mm in trace_filter, at µs resolution).

ORDER_CASES = {
    "kineto_hta_negative_queue": ("kineto", "hta_tests_data", "tests", "data", "negative_queue_length_values_check"),
    "kineto_hta_trace_filter_2of128": FIXTURES["kineto_hta_trace_filter_2of128"],
}
DEVICE_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def _shuffled_copy(src: Path, dst: Path, seed: int) -> int:
    """Writes to ``dst`` a copy of ``src`` with the device events of each trace in a random order among themselves
    (the numbers as written: a float kept as its text, not rounded to a double); returns how many events moved."""
    import gzip
    import random
    import shutil

    shutil.copytree(src, dst)
    rng = random.Random(seed)
    moved_events = 0
    for p in sorted(dst.rglob("*.json*")):
        gz = p.name.endswith(".gz")
        doc = json.loads(gzip.decompress(p.read_bytes()) if gz else p.read_bytes(),
                         parse_float=lambda t: f"<float>{t}</float>")
        events = doc.get("traceEvents") if isinstance(doc, dict) else None
        if not isinstance(events, list):
            continue
        at = [i for i, e in enumerate(events) if isinstance(e, dict) and e.get("cat") in DEVICE_CATS]
        moved = [events[i] for i in at]
        rng.shuffle(moved)
        moved_events += sum(events[i] is not e for i, e in zip(at, moved))
        for i, e in zip(at, moved):
            events[i] = e
        text = json.dumps(doc).replace('"<float>', "").replace('</float>"', "").encode()
        p.chmod(0o644)
        p.write_bytes(gzip.compress(text, mtime=0) if gz else text)
    return moved_events


@pytest.mark.parametrize("name", sorted(ORDER_CASES))
def test_shuffling_a_traces_device_events_changes_no_number(tmp_path, name):
    from test_timebase import diff

    src = fixture_dir(*ORDER_CASES[name])
    ref = _root_free(metrics_text(src), src)
    dst = tmp_path / src.name
    assert _shuffled_copy(src, dst, seed=len(name)) > 100
    got = _root_free(metrics_text(dst, keep=False), dst)
    diffs = list(diff(got, ref))
    assert not diffs, "\n".join(diffs[:20])


def test_device_ops_that_start_together_in_another_order_change_no_number():
    """The read puts each rank's device ops in time order (start, then end), so the shuffle above cannot tell whether
    what reads them depends on the order of ops that start together: here each group of ops with one rank and start
    is reversed after the read, and the metrics are the same. The fixture's ties are kernels of two streams (one rank,
    no collective args): this covers the tables listed from them (the communication ops: their order moved on
    51eb04b) and what spans streams; the rules within one stream or group have their own tests (test_host,
    test_communication, test_intervals)."""
    import numpy as np

    from reportgen.cli import section_options
    from reportgen.readers import read_run
    from reportgen.sections import run_sections
    from test_timebase import diff

    src = fixture_dir(*ORDER_CASES["kineto_hta_negative_queue"])
    ref = json.loads(metrics_text(src))
    run = read_run(src)
    g = run.tables["gpu_ops"]
    order = np.lexsort((-np.arange(len(g)), g["ts_ns"].to_numpy(), g["rank"].to_numpy()))
    assert (order != np.arange(len(g))).sum() >= 10
    run.tables["gpu_ops"] = g.take(order).reset_index(drop=True)
    got = json.loads(metrics.dumps(metrics.build(run, run_sections(run, section_options(run)))))
    diffs = list(diff(got, ref))
    assert not diffs, "\n".join(diffs[:20])
