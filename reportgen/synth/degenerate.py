"""Degenerate but valid runs: the odd corners of real profiler output, each built from a regular generated run.

Every case is a small run that a real profiler can write and that a report must survive (every section ok or
unavailable, never error; issue 12). Kineto cases start from :func:`reportgen.synth.kineto.write_kineto_run`
(written uncompressed) and edit the trace events; Ascend and MindInsight cases use their generators' own options
and, for the Ascend run without step ids, blank the step columns as torch_npu does without a schedule.

=====================  ========================================================================================
case                   what the run holds
=====================  ========================================================================================
one_rank               one rank, so no communication at all (its only group has one member)
one_step               one rank, one ProfilerStep
no_communication       two ranks, NCCL kernels and record_param_comms removed
no_compute             two ranks, only NCCL kernels on the device (compute kernels, memcpy and aten ops removed)
one_op                 one rank, one ProfilerStep, one GEMM kernel (and its aten::mm and launch)
tiny_ops               one rank, every GPU op shorter than 0.1% of its step (all below the Marey threshold)
no_markers             two ranks with NCCL, every ProfilerStep removed (HTA's whole-trace case)
zero_length_steps      one rank, every ProfilerStep with dur 0
work_outside_steps     two ranks with NCCL, the first ProfilerStep removed: its work lies outside every step
rocm_no_markers        one MI300X rank: HIP kernel names, ``[memory]`` device type 6, no ProfilerStep, the CPU
                       launching every op in a burst long before the device runs it (FLOP/s must use device time)
cpu_only               one rank, no device event at all (kernels, memcpy, runtime calls removed; memory on CPU)
cpu_only_no_markers    cpu_only without ProfilerStep
empty_steps            one rank, plus two ProfilerStep windows after the last event (nothing runs in them)
ascend_one_rank        Ascend text export: one rank, one step
ascend_no_step_id      Ascend text export of two ranks written without a profiler schedule: empty ``Step``
                       columns, ``step`` keys without a number in communication*.json
mi_one_rank_no_comm    MindInsight: one rank, one step, no hccl_raw / flops / memory files
=====================  ========================================================================================

:func:`write_degenerate_run` returns the ground truth: ``family``, ``case``, ``ranks``, ``step_source`` the
reader must report, and for Kineto cases per rank the device window HTA measures (``gpu_span_us``: first GPU op
start to last GPU op end, from the written events), ``compute_us`` (the union of compute kernels), ``flops``
(Σ 2·M·N·K of the aten::mm written) and ``peak_tflops`` of the device.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

from reportgen.synth.ascend import AscendSpec, write_ascend_run
from reportgen.synth.kineto import KinetoSpec, write_kineto_run
from reportgen.synth.mindinsight import MindInsightSpec, write_mindinsight_run

__all__ = ["CASES", "KINETO_CASES", "write_degenerate_run"]

_GPU_CATS = ("kernel", "gpu_memcpy", "gpu_memset")
#: AMD Instinct MI300X: deviceProperties as the sglang fixture writes them; 1307.4 TFLOP/s dense BF16 (datasheet)
_MI300X = {"id": 0, "name": "AMD Instinct MI300X", "totalGlobalMem": 206141652992, "computeMajor": 9,
           "computeMinor": 4, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
           "regsPerBlock": 131072, "warpSize": 64, "sharedMemPerBlock": 65536, "numSms": 304}
_HIP_GEMM = "Cijk_Alik_Bljk_BBS_BH_MT256x256x64_MI16x16x16x1_SN_1LDSB1_AFC1_AFEM1_GRVW8_K1_PGR2_WG32_8_1"
_PEAK_TFLOPS = {"A100": 312.0, "MI300X": 1307.4}

#: case -> (KinetoSpec overrides, event edits, expected step_source)
KINETO_CASES: dict[str, tuple[dict, tuple[str, ...], str]] = {
    "one_rank": ({}, (), "markers"),
    "one_step": ({"steps": 1}, (), "markers"),
    "no_communication": ({"devices_per_host": 2}, ("drop_comm",), "markers"),
    "no_compute": ({"devices_per_host": 2}, ("drop_compute",), "markers"),
    "one_op": ({"steps": 1}, ("one_op",), "markers"),
    "tiny_ops": ({}, ("tiny_ops",), "markers"),
    "no_markers": ({"devices_per_host": 2}, ("drop_markers",), "whole_trace"),
    "zero_length_steps": ({}, ("zero_steps",), "markers"),
    "work_outside_steps": ({"devices_per_host": 2}, ("drop_first_marker",), "markers"),
    "rocm_no_markers": ({}, ("rocm", "cpu_burst", "drop_markers"), "whole_trace"),
    "cpu_only": ({}, ("drop_device",), "markers"),
    "cpu_only_no_markers": ({}, ("drop_device", "drop_markers"), "whole_trace"),
    "empty_steps": ({}, ("empty_steps",), "markers"),
}
OTHER_CASES = {"ascend_one_rank": "markers", "ascend_no_step_id": "whole_trace", "mi_one_rank_no_comm": "markers"}
CASES = list(KINETO_CASES) + list(OTHER_CASES)


def write_degenerate_run(root: str | Path, case: str) -> dict:
    """Write the run of ``case`` (see the module docstring) under ``root``; return its ground truth."""
    root = Path(root)
    if case in KINETO_CASES:
        return _kineto(root, case)
    if case == "ascend_one_rank":
        t = write_ascend_run(root, AscendSpec(hosts=1, devices_per_host=1, stages=1, steps=1))
        return {"family": "ascend", "case": case, "ranks": t["ranks"], "step_source": "markers"}
    if case == "ascend_no_step_id":
        t = write_ascend_run(root, AscendSpec(hosts=1, devices_per_host=2, stages=1, steps=1))
        for path in root.rglob("*"):
            if path.name in ("step_trace_time.csv", "kernel_details.csv"):
                _blank_csv_column(path, ("Step", "Step Id"))
            elif path.name in ("communication.json", "communication_matrix.json"):
                doc = json.loads(path.read_text())
                path.write_text(json.dumps({re.sub(r"^step\d+$", "step", k): v for k, v in doc.items()}))
        return {"family": "ascend", "case": case, "ranks": t["ranks"], "step_source": "whole_trace"}
    if case == "mi_one_rank_no_comm":
        write_mindinsight_run(root, MindInsightSpec(hosts=1, devices_per_host=1, stages=1, steps=1, with_hccl=False,
                                                    with_flops=False, with_memory=False))
        return {"family": "mindinsight", "case": case, "ranks": [0], "step_source": "markers"}
    raise ValueError(f"unknown degenerate case {case!r}; one of {', '.join(CASES)}")


def _blank_csv_column(path: Path, names: tuple[str, ...]) -> None:
    rows = list(csv.reader(io.StringIO(path.read_text())))
    cols = [i for i, h in enumerate(rows[0]) if h in names]
    for row in rows[1:]:
        for i in cols:
            row[i] = ""
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    path.write_text(out.getvalue())


# --------------------------------------------------------------------------- Kineto


def _kineto(root: Path, case: str) -> dict:
    overrides, edits, step_source = KINETO_CASES[case]
    spec = KinetoSpec(**{"hosts": 1, "devices_per_host": 1, "stages": 1, "steps": 3, "gzip": False, **overrides})
    truth = write_kineto_run(root, spec)
    out = {"family": "kineto", "case": case, "ranks": truth["ranks"], "step_source": step_source,
           "gpu_span_us": {}, "compute_us": {}, "flops": {},
           "peak_tflops": _PEAK_TFLOPS["MI300X" if "rocm" in edits else "A100"]}
    for rank, name in enumerate(truth["files"]):
        path = root / name
        doc = json.loads(path.read_text())
        events = doc["traceEvents"]
        for edit in edits:
            events = _EDITS[edit](doc, events)
        doc["traceEvents"] = events
        path.write_text(json.dumps(doc))
        gpu = [e for e in events if e.get("cat") in _GPU_CATS]
        if gpu:
            out["gpu_span_us"][rank] = max(e["ts"] + e["dur"] for e in gpu) - min(e["ts"] for e in gpu)
            out["compute_us"][rank] = _union_us([(e["ts"], e["ts"] + e["dur"]) for e in gpu
                                                 if e["cat"] == "kernel" and not _is_nccl(e)])
        out["flops"][rank] = sum(2.0 * d[0][0] * d[0][1] * d[1][1] for e in events if e.get("name") == "aten::mm"
                                 for d in [e["args"]["Input Dims"]])
    return out


def _union_us(iv: list[tuple[float, float]]) -> float:
    total, end = 0.0, None
    for s, e in sorted(iv):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def _is_nccl(e: dict) -> bool:
    return e.get("cat") == "kernel" and str(e.get("name", "")).startswith("nccl")


def _is_step(e: dict) -> bool:
    return str(e.get("name", "")).startswith("ProfilerStep#")


def _drop_comm(doc, events):
    return [e for e in events if not _is_nccl(e) and e.get("name") != "record_param_comms"]


def _drop_compute(doc, events):
    return [e for e in events if not (e.get("cat") in _GPU_CATS and not _is_nccl(e))
            and not str(e.get("name", "")).startswith("aten::")]


def _drop_markers(doc, events):
    return [e for e in events if not _is_step(e)]


def _drop_first_marker(doc, events):
    first = min(int(e["name"].split("#")[1]) for e in events if _is_step(e))
    return [e for e in events if e.get("name") != f"ProfilerStep#{first}"]


def _drop_device(doc, events):
    doc.pop("deviceProperties", None)
    for e in events:
        if e.get("name") == "[memory]":
            e["args"].update({"Device Type": 0, "Device Id": -1})
    return [e for e in events if e.get("cat") not in _GPU_CATS + ("cuda_runtime",)]


def _one_op(doc, events):
    kernel = next(e for e in events if e.get("cat") == "kernel" and not _is_nccl(e))
    corr = kernel["args"]["correlation"]
    step = next(e for e in events if _is_step(e))
    launch = next(e for e in events if e.get("cat") == "cuda_runtime" and e["args"].get("correlation") == corr)
    op = next(e for e in events if e.get("name") == "aten::mm" and e["ts"] <= launch["ts"] <= e["ts"] + e["dur"])
    return [e for e in events if e.get("ph") == "M"] + [step, op, launch, kernel]


def _tiny_ops(doc, events):
    steps = [e for e in events if _is_step(e)]
    for e in events:
        if e.get("cat") in _GPU_CATS:
            st = next((s for s in steps if s["ts"] <= e["ts"] < s["ts"] + s["dur"]), steps[0])
            e["dur"] = round(min(e["dur"], st["dur"] * 0.001), 3)
    return events


def _zero_steps(doc, events):
    for e in events:
        if _is_step(e):
            e["dur"] = 0
    return events


def _empty_steps(doc, events):
    end = max(e["ts"] + e.get("dur", 0) for e in events if "ts" in e and e.get("ph") != "M")
    steps = [e for e in events if _is_step(e)]
    n = max(int(e["name"].split("#")[1]) for e in steps)
    pid = steps[0]["pid"]
    return events + [{"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{n + k}", "pid": pid, "tid": pid,
                      "ts": round(end + 100.0 + 1_000.0 * (k - 1), 3), "dur": 900.0, "args": {}} for k in (1, 2)]


def _rocm(doc, events):
    doc["deviceProperties"] = [dict(_MI300X)]
    for key in ("cupti_version", "cuda_runtime_version", "cuda_driver_version"):
        doc.pop(key, None)
    doc.update({"roctracer_version": 4.1, "hip_runtime_version": 70253211, "hip_driver_version": 70253211})
    for e in events:
        if e.get("name") == "[memory]":
            e["args"]["Device Type"] = 6
        elif e.get("cat") == "kernel" and e["name"].startswith("sm80_xmma_gemm"):
            e["name"] = _HIP_GEMM
        elif e.get("cat") == "cuda_runtime":
            e["name"] = e["name"].replace("cuda", "hip")
    return events


def _cpu_burst(doc, events):
    """The CPU enqueues every op at once (CUDA-graph style replay): aten ops and launches 3 µs apart at the start."""
    host = sorted((e for e in events if e.get("cat") in ("cpu_op", "cuda_runtime")), key=lambda e: e["ts"])
    t0 = host[0]["ts"]
    for i, e in enumerate(host):  # an aten op spans the launch that follows it (3 µs later), as in a real trace
        e["ts"], e["dur"] = round(t0 + 3.0 * i, 3), 4.0 if e.get("cat") == "cpu_op" else 2.0
    return events


_EDITS = {"drop_comm": _drop_comm, "drop_compute": _drop_compute, "drop_markers": _drop_markers,
          "drop_first_marker": _drop_first_marker,
          "drop_device": _drop_device, "one_op": _one_op, "tiny_ops": _tiny_ops, "zero_steps": _zero_steps,
          "empty_steps": _empty_steps, "rocm": _rocm, "cpu_burst": _cpu_burst}
