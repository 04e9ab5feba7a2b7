"""Degenerate but valid runs (issue 12): every section and the advisor are ok or unavailable, never error, and the
report renders. Generated cases from reportgen/synth/degenerate.py plus the real single-rank traces that used to
raise (each file alone in a directory, as a user would point reportgen at it)."""

from __future__ import annotations

import csv
import json
import os

import pytest

from reportgen import metrics, render
from reportgen.intervals import gpu_time_metrics
from reportgen.readers import read_run
from reportgen.cli import section_options
from reportgen.sections import run_sections
from reportgen.synth.degenerate import CASES, write_degenerate_run

from conftest import fixture_dir, reference_file

KINETO = ("kineto",)
TRACES = (*KINETO, "tracelens_selected", "tests", "traces")
HTA_DATA = (*KINETO, "hta_tests_data", "tests", "data")
#: real single-rank traces (one file each); several raised KeyError / IndexError in communication / execution
REAL = {
    "sglang_decode_mi300x": (*TRACES, "inference", "sglang_decode", "capture_traces", "bs_32_rank0.json.gz"),
    "xdit_mi300x": (*TRACES, "inference", "xdit_sd_3.5", "profile_trace_rank_0.json.gz"),
    "h100_qwen": (*TRACES, "h100", "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"),
    "h100_owlv2": (*TRACES, "h100", "google_owlv2-large-patch14-ensemble__1016001.json.gz"),
    "b200_no_markers": (*TRACES, "b200", "eager_trace.json.gz"),
    "torch_compile_triton": (*TRACES, "torch_compile_triton", "trace.json.gz"),
    "amd_mi250": (*HTA_DATA, "amd_trace", "mi250_minitoy_train_ROCm6_2_kineto.json.gz"),
    "triton_example": (*HTA_DATA, "triton_example", "triton_example.json.gz"),
    "cupti_profiler": (*HTA_DATA, "cupti_profiler", "benchmark_result_924719_1679055439_trace.json.gz"),
    "mtia_inference": (*HTA_DATA, "mtia_inference_trace", "mtia_inference_rank_0.json.gz"),
    "param_resnet": (*KINETO, "param_single_rank", "et_replay", "tests", "inputs", "resnet_kineto.json.gz"),
    "param_linear": (*KINETO, "param_single_rank", "et_replay", "tests", "inputs", "linear_kineto.json.gz"),
    "tb_plugin_2021": (*KINETO, "kineto_tb_plugin_samples", "tb_plugin", "samples", "resnet50_num_workers_0",
                       "worker0.1623143089861.pt.trace.json.gz"),
}


def _single(tmp_path, parts):
    """The fixture file alone in a directory (a symlink: fixtures are never copied)."""
    src = fixture_dir(*parts)
    d = tmp_path / "run"
    d.mkdir()
    os.symlink(src, d / src.name)
    return d


def _report(run, options=None):
    """Outcomes by id, after checking the contract: ok or unavailable, metrics serialise, the HTML renders."""
    outcomes = run_sections(run, section_options(run, options))  # as the CLI runs them (the registry's provenance)
    bad = {o.id: o.reason for o in outcomes if o.status not in ("ok", "unavailable")}
    assert not bad, bad
    assert all(o.reason for o in outcomes if o.status == "unavailable")
    json.loads(metrics.dumps(metrics.build(run, outcomes)))
    html = render.render_html(render.build_context(run, outcomes))
    assert "</html>" in html
    return {o.id: o for o in outcomes}


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """case -> (truth, run, outcomes), built once per module."""
    cache = {}

    def get(case):
        if case not in cache:
            root = tmp_path_factory.mktemp(case) / "run"
            truth = write_degenerate_run(root, case)
            run = read_run(root)
            cache[case] = (truth, run, _report(run))
        return cache[case]

    return get


@pytest.mark.parametrize("case", CASES)
def test_generated_case_is_ok_or_unavailable(generated, case):
    truth, run, out = generated(case)
    assert run.step_source == truth["step_source"]
    assert -1 not in run.steps
    if truth["family"] == "kineto" and truth["gpu_span_us"]:  # a device timeline: the step views exist
        for sid in ("trajectory", "overlap", "execution"):
            assert out[sid].status == "ok", (sid, out[sid].reason)


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """name -> (run, outcomes) of a real single-rank trace, read and reported once per module. Read only."""
    cache = {}

    def get(name):
        if name not in cache:
            run = read_run(_single(tmp_path_factory.mktemp(name), REAL[name]))
            cache[name] = (run, _report(run))
        return cache[name]

    return get


@pytest.mark.parametrize("name", sorted(REAL))
def test_real_single_rank_trace_is_ok_or_unavailable(real, name):
    run, out = real(name)
    if run.table("gpu_ops") is not None:
        assert run.step_source in ("markers", "whole_trace")
        assert out["trajectory"].status == "ok" and out["execution"].status == "ok"


def test_no_communication_says_what_would_give_it(generated):
    _, _, out = generated("no_communication")
    c = out["communication"]
    assert c.status == "unavailable" and "NCCL" in c.reason and "gloo" in c.reason


def test_all_ops_tiny_keeps_the_time_overview_and_says_why_no_marey(generated):
    _, _, out = generated("tiny_ops")
    a = out["execution"].analysis
    assert "time_overview" in a.tables and "marey" not in a.data
    assert "shorter than 0.5%" in a.metrics["marey_unavailable"]


def test_work_outside_every_step_is_never_a_step(generated):
    _, run, out = generated("work_outside_steps")
    assert run.steps == [11, 12]
    assert set(run.tables["step_time"]["step"]) == {11, 12}
    ops = out["communication"].analysis.tables["ops"]
    assert (ops["step"] == -1).any()  # the event table keeps it, labelled outside every step
    # ... and no per-rank number averages it in (issue 12: 56.7 vs 98.6 ms per step in one report)
    comm = out["communication"].analysis
    assert -1 not in set(comm.tables["per_rank_step"]["step"]) and comm.metrics["steps_left_out"] == [-1]
    per_comm = comm.tables["per_rank"].set_index("rank")["comm_op_ms"]
    per_overlap = out["overlap"].analysis.tables["per_rank"].set_index("rank")["comm_busy_ms"]
    per_exec = out["execution"].analysis.tables["time_overview"].groupby("rank")["rank_comm_ms"].mean()
    per_transit = comm.tables["per_rank"].set_index("rank")["transit_ms"]
    assert per_comm.to_dict() == pytest.approx(per_overlap.to_dict(), rel=1e-6)  # sum vs union of the same kernels
    assert per_exec.to_dict() == pytest.approx(per_transit.to_dict(), rel=1e-9)  # the overview's transfer time


# --------------------------------------------------------------------------- no step markers: HTA's whole trace


@pytest.mark.parametrize("case", ["no_markers", "rocm_no_markers"])
def test_whole_trace_window_is_htas_kernel_span(generated, case):
    """One window per rank, step 0, first to last GPU op (HTA get_temporal_breakdown: kernel_time = span of the
    GPU events, compute = |U(compute kernels)|, idle = span - |U(GPU events)|)."""
    truth, run, out = generated(case)
    assert run.steps == [0]
    st = run.tables["step_time"].set_index("rank")
    gpu_time = out["overlap"].analysis.tables["gpu_time"].set_index("rank")
    for rank, span_us in truth["gpu_span_us"].items():
        row = st.loc[int(rank)]
        # 0.1 µs: the float-ms columns of epoch-µs times resolve ~1 ns per interval end (exact once they are ns)
        assert row["step_ms"] == pytest.approx(span_us / 1e3, abs=1e-4)
        assert row["computing_ms"] == pytest.approx(truth["compute_us"][rank] / 1e3, abs=1e-4)
        assert row["step_ms"] == pytest.approx(gpu_time.loc[int(rank), "kernel_span_ms"], abs=1e-9)
        assert row["computing_ms"] + row["comm_not_overlapped_ms"] + row["free_ms"] == pytest.approx(row["step_ms"])
    assert out["trajectory"].analysis is not None and out["overlap"].analysis.metrics["steps"] == 1


def test_real_trace_without_markers_matches_hta_kernel_time(real):
    """b200 eager trace (no ProfilerStep): our whole-trace window is HTA 0.5's kernel_time (HTA rounds each event
    to whole µs inwards, so the spans agree within 2 µs) and its computing time is our float-µs compute time."""
    run, _ = real("b200_no_markers")
    assert run.step_source == "whole_trace" and run.steps == [0]
    ref = list(csv.DictReader(reference_file("hta", "single_b200_eager", "temporal_breakdown.csv").open()))[0]
    row = run.tables["step_time"].iloc[0]
    assert row["step_ms"] == pytest.approx(float(ref["kernel_time(us)"]) / 1e3, abs=0.002)
    assert row["computing_ms"] == pytest.approx(gpu_time_metrics(run.tables["gpu_ops"])["compute_ms"], abs=1e-9)


def test_ascend_without_step_ids_is_one_whole_trace_step(generated):
    _, run, out = generated("ascend_no_step_id")
    assert run.step_source == "whole_trace" and run.steps == [0]
    assert set(run.tables["comm_ops"]["step"]) == {0}  # communication.json's "step" key: the same window
    assert out["trajectory"].status == "ok" and out["overlap"].status == "ok"


# --------------------------------------------------------------------------- devices


def test_rocm_memory_events_are_device_memory(generated):
    _, run, out = generated("rocm_no_markers")
    mem = out["memory"]
    assert mem.status == "ok", mem.reason
    pr = mem.analysis.tables["per_rank"].iloc[0]
    assert pr["source"].startswith("HIP device 0")
    assert pr["capacity_mb"] == pytest.approx(206141.652992)
    me = run.table("memory_events")
    assert pr["peak_mb"] == pytest.approx(me["reserved_mb"].max())


def test_real_rocm_trace_memory_is_on_the_device(real):
    """sglang decode on MI300X: 1014 [memory] events, all Device Type 6 (HIP)."""
    run, out = real("sglang_decode_mi300x")
    assert set(run.table("memory_events")["device_type"]) == {6}
    assert out["memory"].status == "ok", out["memory"].reason
    pr = out["memory"].analysis.tables["per_rank"].iloc[0]
    assert pr["source"].startswith("HIP") and 0 < pr["peak_ratio"] < 1


def test_cpu_only_memory_is_host_memory(generated):
    """No device at all: host memory is the run's memory, analysed and named as such (never 'device memory')."""
    _, _, out = generated("cpu_only")
    mem = out["memory"]
    assert mem.status == "ok" and mem.analysis.metrics["memory_kind"] == "host"
    assert (mem.analysis.tables["per_rank"]["source"] == "host (CPU) total reserved").all()
    assert mem.view.summary.startswith("Peak host memory") and "device memory" not in mem.view.summary
    assert all("host memory" in f.title.lower() for f in mem.view.figures)


def test_flops_rate_uses_device_time_not_the_cpu_launch_span(generated):
    """MI300X-like trace: the CPU enqueues every GEMM within ~0.5 ms, the device runs them for ~220 ms. The rate
    is FLOPs over the device window: plausible (below the 1307 TFLOP/s peak), not FLOPs over the CPU span."""
    truth, run, out = generated("rocm_no_markers")
    f = out["flops"].analysis
    pr = f.tables["per_rank"].iloc[0]
    span_s = truth["gpu_span_us"][0] / 1e6
    assert pr["flops"] == pytest.approx(truth["flops"][0])
    assert pr["flops_per_s"] == pytest.approx(truth["flops"][0] / span_s)
    assert 0 < pr["flops_per_s"] < truth["peak_tflops"] * 1e12
    assert f.metrics["peak_flops_per_s"] == pytest.approx(truth["peak_tflops"] * 1e12)
    assert 0 < pr["mfu_ratio"] < 1
    cpu = run.table("cpu_ops")
    cpu_span_s = ((cpu["start_ms"] + cpu["dur_ms"]).max() - cpu["start_ms"].min()) / 1e3
    assert truth["flops"][0] / cpu_span_s > truth["peak_tflops"] * 1e12  # what the CPU span would have claimed


def test_flops_per_step_rate_is_nan_for_zero_length_steps(generated):
    _, _, out = generated("zero_length_steps")
    f = out["flops"]
    assert f.status == "ok"
    assert f.analysis.tables["per_rank"]["flops_per_s"].isna().all()
