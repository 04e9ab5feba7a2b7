"""The merged timeline export (issue 17 part 1): ``reportgen RUN --timeline merged.json[.gz]``.

The Perfetto trace processor needs a binary it downloads on first use (no network in CI), so the file is checked
against the Trace Event Format instead: the JSON object form, "X" / "M" events with the fields each phase needs, one
process per rank. The step spans equal the trajectory's, the summary threads partition each step, and the clocks are
aligned per step on the first common communication op.
"""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import pytest

from conftest import fixture_dir
from reportgen import cli, export_timeline, facts
from reportgen.readers import read_run
from reportgen.synth.kineto import KinetoSpec, write_kineto_run

LEVEL2 = ("ascend", "msinsight", "test", "st", "level2")
GLOO = ("generated", "torch_gloo_ddp4_baseline")


def _load(path):
    raw = path.read_bytes()
    if path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return json.loads(raw)


def _check_format(doc):
    """The Trace Event Format's JSON object form, as Perfetto and chrome://tracing read it."""
    assert set(doc) == {"traceEvents", "displayTimeUnit", "otherData"} and doc["displayTimeUnit"] == "ms"
    names = defaultdict(dict)
    for e in doc["traceEvents"]:
        assert e["ph"] in ("X", "M") and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["name"], str) and e["name"]
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float))
            assert e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["cat"], str)
        else:
            assert e["name"] in ("process_name", "process_sort_index", "thread_name")
            if e["name"].endswith("_name"):
                names[e["pid"]][(e["name"], e["tid"])] = e["args"]["name"]
    for pid, n in names.items():
        assert n[("process_name", 0)].startswith(f"rank {pid}")
        used = {e["tid"] for e in doc["traceEvents"] if e["ph"] == "X" and e["pid"] == pid}
        assert used <= {tid for kind, tid in n if kind == "thread_name"}, pid  # every thread is named
    return names


def _steps(doc):
    return {(e["pid"], e["args"]["step"]): e["dur"] / 1000.0 for e in doc["traceEvents"]
            if e["ph"] == "X" and e["cat"] == "step"}


@pytest.mark.parametrize("parts", [LEVEL2, GLOO])
def test_fixture_timelines_follow_the_format_and_the_trajectory(parts, tmp_path):
    run = read_run(fixture_dir(*parts))
    info = export_timeline.write(run, tmp_path / "merged.json.gz", None, "summary")
    doc = _load(tmp_path / "merged.json.gz")
    names = _check_format(doc)
    assert sorted(names) == sorted(run.ranks) and info["ranks"] == len(run.ranks)
    # per-rank step spans equal the trajectory's step times (the facts' per-rank, per-step table)
    F = facts.of(run)
    want = {(int(r), int(s)): float(v) for r, s, v in zip(F.step_time["rank"], F.step_time["step"],
                                                          F.step_time["step_ms"])}
    got = _steps(doc)
    assert got.keys() == want.keys()
    for k, v in want.items():
        assert got[k] == pytest.approx(v, abs=2e-6), k
    if run.table("device_timeline") is None:  # Ascend text without trace_view.json: steps and communication ops
        assert "derived" in doc["otherData"]["steps"] and "communication operations only" in \
            doc["otherData"]["operations"]
        comm = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "communication"]
        assert len(comm) == len(run.table("comm_ops"))
        return
    # the summary threads partition each step: computation + exposed communication + free = the step
    parts_sum = defaultdict(float)
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["cat"] in ("compute", "communication", "free"):
            parts_sum[e["pid"]] += e["dur"] / 1000.0
    for r in run.ranks:
        assert parts_sum[r] == pytest.approx(sum(v for (rr, _), v in got.items() if rr == r), rel=1e-6)


def test_kineto_summary_equals_the_overlap_numbers_and_clocks_align(tmp_path):
    write_kineto_run(tmp_path / "run", KinetoSpec(hosts=1, devices_per_host=4, stages=1, steps=3))
    run = read_run(tmp_path / "run")
    export_timeline.write(run, tmp_path / "m.json", None, "summary")
    doc = _load(tmp_path / "m.json")
    _check_format(doc)
    st = run.table("step_time").set_index(["rank", "step"])
    sums = defaultdict(float)
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["cat"] != "step":
            sums[(e["pid"], e["cat"])] += e["dur"] / 1000.0
    for r in run.ranks:
        rows = st.loc[r]
        assert sums[(r, "compute")] == pytest.approx(rows["computing_ms"].sum(), rel=1e-6)
        assert sums[(r, "communication")] == pytest.approx(rows["comm_not_overlapped_ms"].sum(), rel=1e-6)
        assert sums[(r, "free")] == pytest.approx(rows["free_ms"].sum(), rel=1e-6)
    assert set(doc["otherData"]["alignment_ms"]) == {str(r) for r in run.ranks}
    # aligned: per step, the first communication op all ranks share ends at the same time on every rank
    export_timeline.write(run, tmp_path / "d.json", None, "detail")
    det = _load(tmp_path / "d.json")
    ops = defaultdict(list)
    for e in det["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == "communication":
            ops[e["pid"]].append(e)
    steps = sorted({e["args"]["step"] for e in det["traceEvents"] if e["ph"] == "X" and e["cat"] == "step"})
    spans = {(e["pid"], e["args"]["step"]): (e["ts"], e["ts"] + e["dur"]) for e in det["traceEvents"]
             if e["ph"] == "X" and e["cat"] == "step"}
    for step in steps:
        firsts = {}
        for r, evs in ops.items():
            lo, hi = spans[(r, step)]
            inside = sorted((e for e in evs if lo <= e["ts"] < hi), key=lambda e: e["ts"])
            firsts[r] = inside[0]["ts"] + inside[0]["dur"] if inside else None
        ends = [v for v in firsts.values() if v is not None]
        assert len(ends) == len(run.ranks) and max(ends) - min(ends) < 0.01, (step, firsts)


def test_detail_has_a_thread_per_stream_and_every_op(tmp_path):
    write_kineto_run(tmp_path / "run", KinetoSpec(hosts=1, devices_per_host=2, stages=2, steps=2))
    run = read_run(tmp_path / "run")
    export_timeline.write(run, tmp_path / "d.json", [1], "detail")
    doc = _load(tmp_path / "d.json")
    names = _check_format(doc)
    assert list(names) == [1]
    tl = run.table("device_timeline")
    mine = tl[tl["rank"] == 1]
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "step"]
    assert len(ops) == len(mine)
    threads = {v for (kind, _), v in names[1].items() if kind == "thread_name"} - {"Steps"}
    assert threads == set(mine["stream"].astype(str))


def test_cli_writes_it_names_it_and_refuses_bad_targets(tmp_path, capsys):
    run = fixture_dir(*GLOO)
    out = tmp_path / "r.html"
    assert cli.main([str(run), "-o", str(out), "--json", str(tmp_path / "m.json"), "--timeline",
                     str(tmp_path / "t.json.gz"), "--ranks", "0,2", "-q"]) == 0
    doc = _load(tmp_path / "t.json.gz")
    assert sorted(_check_format(doc)) == [0, 2]
    metrics = json.loads((tmp_path / "m.json").read_text())
    assert metrics["exports"]["timeline"]["file"] == "t.json.gz" and metrics["exports"]["timeline"]["ranks"] == 2
    assert "t.json.gz" in out.read_text()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".") or "tmp" in p.name]
    # inside the run directory, or the same file as the report: exit 2 before anything is read
    assert cli.main([str(run), "-o", str(tmp_path / "x.html"), "--timeline", str(run / "t.json"), "-q"]) == 2
    assert cli.main([str(run), "-o", str(tmp_path / "x.html"), "--timeline", str(tmp_path / "x.html"), "-q"]) == 2
    err = capsys.readouterr().err
    assert "--timeline" in err and "Traceback" not in err


def test_level2_export_has_computation_on_ranks_with_kernels(tmp_path):
    """Ascend text without trace_view.json: the device timeline from kernel_details.csv + communication.json, so the
    summary has Computation on ranks 0 and 2 (kernels) and none on 1 and 3 (communication.json only); detail has
    the kernels (was 96 events: communication only)."""
    run = read_run(fixture_dir(*LEVEL2))
    export_timeline.write(run, tmp_path / "s.json", None, "summary")
    doc = _load(tmp_path / "s.json")
    comp = {e["pid"] for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "compute"}
    assert comp == {0, 2}
    assert "derived" in doc["otherData"]["steps"] and doc["otherData"]["operations"] == "the run's device timeline"
    info = export_timeline.write(run, tmp_path / "d.json", None, "detail")
    doc = _load(tmp_path / "d.json")
    _check_format(doc)
    kinds = {(e["pid"], e["cat"]) for e in doc["traceEvents"] if e["ph"] == "X"}
    assert {(0, "compute"), (2, "compute"), (1, "communication"), (3, "communication")} <= kinds
    assert not {(1, "compute"), (3, "compute")} & kinds
    assert info["events"] > 5000


def test_timeline_steps_and_ranks_filter(tmp_path, capsys):
    run = fixture_dir(*GLOO)
    out = tmp_path / "r.html"
    steps = sorted(facts.of(read_run(run)).steps_all)
    pick = steps[1:3]
    assert cli.main([str(run), "-o", str(out), "--json", str(tmp_path / "m.json"), "--timeline", str(tmp_path / "t.json"),
                     "--ranks", "1", "--timeline-steps", ",".join(map(str, pick)), "--timeline-detail", "detail",
                     "-q"]) == 0
    doc = _load(tmp_path / "t.json")
    assert sorted(_check_format(doc)) == [1]
    assert {s for _, s in _steps(doc)} == set(pick) and doc["otherData"]["steps_selected"] == pick
    assert json.loads((tmp_path / "m.json").read_text())["exports"]["timeline"]["steps"] == pick
    # every operation lies in a chosen step's window (after the same shift)
    spans = [(e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "step"]
    ops = [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] != "step"]
    assert ops and all(any(a - 1e-3 <= e["ts"] <= b + 1e-3 for a, b in spans) for e in ops)
    assert cli.main([str(run), "-o", str(out), "--timeline", str(tmp_path / "u.json"), "--timeline-steps", "99999",
                     "-q"]) == 2
    assert cli.main([str(run), "-o", str(out), "--timeline", str(tmp_path / "u.json"), "--timeline-steps", "x",
                     "-q"]) == 2
    err = capsys.readouterr().err
    assert "--timeline-steps" in err and "Traceback" not in err
