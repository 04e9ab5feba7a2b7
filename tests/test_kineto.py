"""Kineto reader: ranks, groups, steps; GPU time metrics against HTA 0.5.0; CPU gloo run against its own logs."""

from __future__ import annotations

import csv
import json
import shutil

import pytest

from reportgen import metrics
from reportgen.intervals import gpu_time_metrics
from reportgen.readers import read_run
from reportgen.sections import run_sections

from conftest import fixture_dir, reference_file

GLOO = ("generated", "torch_gloo_ddp4_baseline")
HTA_DATA = ("kineto", "hta_tests_data", "tests", "data")


def _copy(tmp_path, *files):
    for f in files:
        shutil.copy(f, tmp_path / f.name)
    return tmp_path


def test_gloo_run_facts_and_groups():
    run = read_run(fixture_dir(*GLOO))
    assert run.source_format == "kineto"
    assert run.ranks == [0, 1, 2, 3] and run.world_size == 4 and run.missing_ranks == []
    kinds = dict(zip(run.tables["groups"]["name"], run.tables["groups"]["kind"]))
    assert kinds.get("default_pg") == "world"
    assert run.steps == [2, 3, 4, 5, 6]


def test_gloo_step_times_match_the_training_logs():
    """ProfilerStep#N spans equal the step durations the training script logged (profiled steps)."""
    root = fixture_dir(*GLOO)
    run = read_run(root)
    st = run.tables["step_time"].set_index(["rank", "step"])
    for rank in range(4):
        logged = [json.loads(l) for l in (root / "logs" / f"rank{rank}.jsonl").read_text().splitlines()]
        steps = {e["step"]: e["dur_ms"] for e in logged if e.get("event") == "step" and e.get("profiled")}
        assert steps, "the log marks profiled steps"
        for step, dur in steps.items():
            if (rank, step) in st.index:
                assert st.loc[(rank, step), "step_ms"] == pytest.approx(dur, rel=0.01, abs=1.0), (rank, step)


def test_gloo_collective_time_matches_step_summary():
    """step_summary.txt: union of gloo-thread busy time per rank and step (ms, 1 decimal)."""
    root = fixture_dir(*GLOO)
    run = read_run(root)
    st = run.tables["step_time"].set_index(["rank", "step"])
    lines = [l.split() for l in (root / "step_summary.txt").read_text().splitlines()[1:] if "ProfilerStep#" in l]
    assert lines
    for rank, step, _dur, gloo, *_ in lines:
        key = (int(rank), int(step.split("#")[1]))
        assert st.loc[key, "comm_ms"] == pytest.approx(float(gloo), abs=0.11), key


def test_gloo_report_has_no_slow_rank_finding(tmp_path):
    run = read_run(fixture_dir(*GLOO))
    doc = json.loads(metrics.dumps(metrics.build(run, run_sections(run))))
    assert doc["sections"]["trajectory"]["status"] == "ok"
    assert not [f for f in doc["findings"] if f["id"] in ("slow_step_interval", "slow_preparing", "slow_host")]


HTA_CASES = {
    # case: (fixture file, our whole-trace float-µs numbers = the research's independent re-implementation
    #        of HTA's formulas without its conventions (research §6.4 "--exact"): idle, compute, non-compute, overlap)
    "single_nccl_data": ((*HTA_DATA, "nccl_parser_config", "nccl_data.json.gz"), (76.16, 17.51, 6.33, 15.61)),
    "single_negq_rank0": ((*HTA_DATA, "negative_queue_length_values_check", "rank0.json.gz"),
                          (64.40, 17.13, 18.47, None)),
}


def _hta_rows(case: str):
    rows = list(csv.DictReader(reference_file("hta", case, "temporal_breakdown.csv").open()))
    over = {r["rank"]: r["comp_comm_overlap_pctg"] for r in
            csv.DictReader(reference_file("hta", case, "comm_comp_overlap.csv").open())}
    return rows, over


def _pct(m, key):
    return round(m[key] * 100, 2)


@pytest.mark.parametrize("case", sorted(HTA_CASES))
def test_gpu_time_metrics_equal_the_reference_formulas(tmp_path, case):
    """Our default (float µs, whole trace) equals the research's re-implementation of HTA's formulas."""
    parts, (idle, compute, non_compute, overlap) = HTA_CASES[case]
    run = read_run(_copy(tmp_path, fixture_dir(*parts)))
    m = gpu_time_metrics(run.tables["gpu_ops"])
    assert _pct(m, "idle_ratio") == pytest.approx(idle, abs=0.05)
    assert _pct(m, "compute_ratio") == pytest.approx(compute, abs=0.05)
    assert _pct(m, "non_compute_ratio") == pytest.approx(non_compute, abs=0.05)
    if overlap is not None:
        assert _pct(m, "comm_comp_overlap_ratio") == pytest.approx(overlap, abs=0.05)


#: every Kineto fixture with HTA 0.5 numbers in shared/reference/hta: case -> trace files
HTA_REFERENCES = {
    "single_nccl_data": [(*HTA_DATA, "nccl_parser_config", "nccl_data.json.gz")],
    "single_negq_rank0": [(*HTA_DATA, "negative_queue_length_values_check", "rank0.json.gz")],
    "single_b200_eager": [("kineto", "tracelens_selected", "tests", "traces", "b200", "eager_trace.json.gz")],
    "trace_filter2": [(*HTA_DATA, "trace_filter", f"sampled_rank-{r}.json.gz") for r in (0, 1)],
}


@pytest.mark.parametrize("case", sorted(HTA_REFERENCES))
def test_hta_columns_reproduce_hta(tmp_path, case):
    """The overlap section's *_hta columns are HTA 0.5's printed temporal breakdown and overlap to the digit, and
    the times behind them equal HTA's whole-µs values exactly (b200: HTA counts the 73 multimem all-reduce kernels
    and a Triton launcher cpu_op as compute; negq: 5 steps, work launched in the last one dropped by correlation)."""
    from reportgen.intervals import hta_gpu_time_metrics, hta_profiler_steps

    from reportgen.sections.overlap import _gpu_time

    run = read_run(_copy(tmp_path, *(fixture_dir(*parts) for parts in HTA_REFERENCES[case])))
    gpu = {r["rank"]: r for r in _gpu_time(run).to_dict("records")}  # the section's gpu_time table
    rows, over = _hta_rows(case)
    ev = run.tables["hta_events"]
    drop = hta_profiler_steps(ev.loc[ev["role"] == "mark", "name"]) >= 2
    for ref in rows:
        rank = int(ref["rank"])
        g = gpu[rank]
        assert round(g["idle_hta_ratio"] * 100, 2) == float(ref["idle_time_pctg"])
        assert round(g["compute_hta_ratio"] * 100, 2) == float(ref["compute_time_pctg"])
        assert round(g["non_compute_hta_ratio"] * 100, 2) == float(ref["non_compute_time_pctg"])
        assert round(g["comm_comp_overlap_hta_ratio"] * 100, 2) == float(over[ref["rank"]])
        ops = run.tables["gpu_ops"]
        m = hta_gpu_time_metrics(ops[ops["rank"] == rank], ev[ev["rank"] == rank], drop)
        assert [round(m[f"{k}_ms"] * 1e3, 6) for k in ("idle", "compute", "non_compute", "kernel_span")] == \
            [float(ref[k]) for k in ("idle_time(us)", "compute_time(us)", "non_compute_time(us)", "kernel_time(us)")]


def test_custom_all_reduce_kernels_count_as_communication(tmp_path):
    """Departure from HTA (documented): PyTorch symmetric-memory multimem all-reduce kernels are communication."""
    run = read_run(_copy(tmp_path, fixture_dir("kineto", "tracelens_selected", "tests", "traces", "b200",
                                               "eager_trace.json.gz")))
    g = run.tables["gpu_ops"]
    comm = g[g["kind"] == "comm"]
    assert (comm["name"].str.contains("multimem_all_reduce")).sum() == 73
    assert (comm["name"].str.startswith("ncclDevKernel")).sum() == 1


def test_two_of_128_ranks_pair(tmp_path):
    d = fixture_dir(*HTA_DATA, "trace_filter")
    run = read_run(_copy(tmp_path, d / "sampled_rank-0.json.gz", d / "sampled_rank-1.json.gz"))
    assert run.ranks == [0, 1] and run.world_size == 128 and len(run.missing_ranks) == 126
    rows, over = _hta_rows("trace_filter2")
    g = run.tables["gpu_ops"]
    r0 = gpu_time_metrics(g[g["rank"] == 0])
    assert _pct(r0, "comm_comp_overlap_ratio") == pytest.approx(14.95, abs=0.05)  # research §6.4, whole trace
    assert float(over["0"]) == 11.81  # HTA drops the last of the two steps


def test_user_comm_pattern_and_parallel_jobs_give_the_same_tables(tmp_path, monkeypatch):
    from reportgen.readers import kineto

    d = fixture_dir(*HTA_DATA, "trace_filter")
    serial = read_run(d, jobs=1)
    monkeypatch.setattr(kineto, "PARALLEL_MIN_BYTES", 0)
    parallel = read_run(d, jobs=2)
    assert serial.tables["gpu_ops"].equals(parallel.tables["gpu_ops"])
    custom = read_run(d, jobs=1, comm_patterns=("^void at::native::",))
    assert (custom.tables["gpu_ops"]["kind"] == "comm").sum() > (serial.tables["gpu_ops"]["kind"] == "comm").sum()


def test_bad_comm_pattern_is_a_usage_error(tmp_path):
    from reportgen import cli

    rc = cli.main([str(fixture_dir(*GLOO)), "-o", str(tmp_path / "r.html"), "--comm-pattern", "(", "--quiet"])
    assert rc == 2 and not (tmp_path / "r.html").exists()


def test_interval_intersection_matches_brute_force():
    import numpy as np

    from reportgen.intervals import intersect, length, union

    rng = np.random.default_rng(3)
    for _ in range(50):
        a = union(*(lambda s: (s, s + rng.uniform(0, 5, len(s))))(rng.uniform(0, 100, rng.integers(0, 40))))
        b = union(*(lambda s: (s, s + rng.uniform(0, 5, len(s))))(rng.uniform(0, 100, rng.integers(0, 40))))
        grid = np.linspace(0, 110, 22001)[:-1] + 110 / 22000 / 2
        inside = lambda iv: np.any((grid[:, None] >= iv[0]) & (grid[:, None] < iv[1]), axis=1) if len(iv[0]) else \
            np.zeros(len(grid), bool)
        expect = (inside(a) & inside(b)).sum() * 110 / 22000
        assert length(*intersect(a, b)) == pytest.approx(expect, abs=0.05)
