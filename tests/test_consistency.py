"""One report never contradicts itself (issue 12): every section lists the same steps, names the same slowest /
median / fastest rank, averages the same steps, and the text says the counts the tables have.

Runs over every fixture report of the golden suite plus the demo and generated runs with a warm-up step."""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd
import pytest

from reportgen import facts, metrics
from reportgen.readers import read_run
from reportgen.sections import Options, run_sections
from reportgen.render import summary_text
from reportgen.synth import mindinsight as synth_mi

from conftest import analysed, fixture_dir
from test_golden import FIXTURES

#: sections whose per-step tables list steps: section -> tables with a ``step`` column
STEP_TABLES = {"trajectory": ["per_rank_step"], "overlap": ["per_rank_step"], "communication": ["per_rank_step"],
               "execution": ["time_overview"]}
#: sections whose per-rank table has a per-rank communication time over the steps in scope
STEP_CONTROLS = ("step",)


def _build(run, options=None):
    outcomes = run_sections(run, Options(dict(options or {})))
    return outcomes, metrics.build(run, outcomes)


def _warmup_run(tmp_path):
    """A generated MindInsight pp2 run whose first step is 10x the others on every rank (a warm-up)."""
    path = tmp_path / "warm"
    synth_mi.write_mindinsight_run(path, synth_mi.MindInsightSpec.clean_run())
    for f in sorted(path.rglob("step_trace_raw_*_detail_time.csv")):
        lines = f.read_text().splitlines()
        head = lines[0].split(",")
        i_total, i_start, i_fp = head.index("total"), head.index("start_point"), head.index("fp_point")
        first = lines[1].split(",")
        extra = 9 * int(first[i_total])
        first[i_total] = str(int(first[i_total]) + extra)
        first[i_start] = str(int(first[i_start]) - extra)
        first[i_fp] = str(int(first[i_fp]) - extra)
        if "fp_and_bp" in head:
            i_fb = head.index("fp_and_bp")
            first[i_fb] = str(int(first[i_fb]) + extra)
        lines[1] = ",".join(first)
        f.write_text("\n".join(lines) + "\n")
    return path


CASES = ["demo"] + sorted(FIXTURES) + ["warmup"]


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            if name == "warmup":
                run = read_run(_warmup_run(tmp_path_factory.mktemp("warm")))
                cache[name] = (run, *_build(run))
            else:  # analysed as the CLI does, once per process (test_golden.py uses the same analyses)
                cache[name] = analysed("demo" if name == "demo" else fixture_dir(*FIXTURES[name]))
        return cache[name]
    return get


@pytest.mark.parametrize("name", CASES)
def test_one_report_never_contradicts_itself(name, reports):
    run, outcomes, doc = reports(name)
    F = facts.of(run)
    by_id = {o.id: o for o in outcomes}
    if F is None:
        assert doc["facts"] is None
        return
    listed, in_scope = set(F.steps_all), set(F.steps)
    assert -1 not in listed, "work outside every step is never a step"
    assert doc["run"]["steps"] == list(F.steps_all)
    # 1. every section that lists steps lists the run's steps (a subset when its data has fewer)
    for sid, tables in STEP_TABLES.items():
        o = by_id.get(sid)
        if o is None or o.status != "ok":
            continue
        for t in tables:
            df = o.analysis.tables.get(t)
            if df is not None and not df.empty:
                assert set(df["step"].dropna().astype(int)) <= listed, (sid, t)
        for c in o.view.controls:
            if c.signal in STEP_CONTROLS:
                offered = {int(v) for v, _ in c.options if v != "avg"}
                assert offered <= listed, (sid, offered, listed)
                for v, label in c.options:
                    if v != "avg" and int(v) in F.warmup_steps:
                        assert "warm-up" in label
    # 2. one slowest / median / fastest rank everywhere it appears
    tr = by_id["trajectory"]
    if tr.status == "ok":
        m = tr.analysis.metrics
        assert (m["slowest_rank"], m["fastest_rank"], m["median_rank"]) == \
            (F.slowest_rank, F.fastest_rank, F.median_rank)
        assert m["steps"] == len(F.steps)
        assert m["step_ms_median"] == pytest.approx(F.step_ms_median, rel=1e-12)
        per_rank = tr.analysis.tables["per_rank"].set_index("rank")["step_ms"]
        assert per_rank.to_dict() == pytest.approx(F.per_rank.set_index("rank")["step_ms"].to_dict(), rel=1e-12)
    s = doc["summary"]
    assert (s["slowest_rank"], s["fastest_rank"], s["median_rank"], s["steps"]) == \
        (F.slowest_rank, F.fastest_rank, F.median_rank, len(F.steps))
    ex = by_id["execution"]
    if ex.status == "ok":
        assert ex.analysis.metrics.get("steps", len(F.steps)) == len(F.steps)
        if "step_ms_mean" in ex.analysis.metrics:
            assert ex.analysis.metrics["step_ms_mean"] == pytest.approx(F.step_ms_mean, rel=1e-12)
        chosen = ex.analysis.metrics.get("drilldown_ranks") or {}
        roles = {role: int(r) for r, rs in chosen.items() for role in str(rs).split(", ")}
        for role, rank in (("slowest", F.slowest_rank), ("fastest", F.fastest_rank), ("median", F.median_rank)):
            if role in roles:
                assert roles[role] == rank, role
        if "marey" in ex.analysis.data and F.steps:
            assert ex.analysis.metrics["marey_steps_shown"][0] in in_scope, "the default Marey step is in scope"
    # 3. per-rank communication time: the same steps in communication, overlap and execution
    co, ov = by_id["communication"], by_id["overlap"]
    if co.status == "ok" and ex.status == "ok" and "time_overview" in ex.analysis.tables:
        tov = ex.analysis.tables["time_overview"]
        if tov["rank_comm_ms"].notna().any():
            exec_rank = F.per_rank_mean(tov, ["rank_comm_ms"]).set_index("rank")["rank_comm_ms"].dropna()
            # execution's per-rank communication is the transfer time beside the wait
            # (execution.comm_per_rank_step): the communication section's transit where the data has it, else its
            # op time minus the known wait, else its op time
            per = co.analysis.tables["per_rank"].set_index("rank")
            wait = per["wait_ms"] if "wait_ms" in per else pd.Series(np.nan, index=per.index)
            transit = per["transit_ms"] if "transit_ms" in per else pd.Series(np.nan, index=per.index)
            comm_rank = transit.where(transit.notna(), (per["comm_op_ms"] - wait).where(wait.notna(), per["comm_op_ms"]))
            common = exec_rank.index.intersection(comm_rank.index)
            assert exec_rank[common].to_dict() == pytest.approx(comm_rank[common].to_dict(), rel=1e-9)
    # 4. counts in the text agree with the tables
    text = summary_text(s, doc["findings"])
    m = re.search(r"over (\d+) steps?", text)
    if m:
        assert int(m.group(1)) == len(F.steps)
    assert "1 steps" not in text
    for o in outcomes:
        if o.status == "ok" and o.view is not None:
            assert not re.search(r"\b1 (steps|ranks)\b", o.view.summary or ""), (o.id, o.view.summary)


def test_warmup_step_is_labelled_and_left_out(reports):
    run, outcomes, doc = reports("warmup")
    F = facts.of(run)
    assert F.warmup_steps == (F.steps_all[0],)
    assert F.steps == F.steps_all[1:]
    tr = {o.id: o for o in outcomes}["trajectory"]
    assert tr.analysis.metrics["warmup_steps"] == [F.steps_all[0]]
    # headline numbers leave it out: every rank's average is the mean of the other steps
    st = tr.analysis.tables["per_rank_step"]
    later = st[~st["warmup"]].groupby("rank")["step_ms"].mean()
    assert tr.analysis.tables["per_rank"].set_index("rank")["step_ms"].to_dict() == pytest.approx(later.to_dict())
    # and with the switch, they count
    run2 = read_run(run.source_path)
    _, doc2 = _build(run2, {"include_warmup": True})
    assert doc2["facts"]["steps_in_scope"] == list(F.steps_all)
    assert doc2["summary"]["step_ms_median"] > 2 * doc["summary"]["step_ms_median"]


def test_pp2x4_one_story():
    """The contradictions seen on the pp2x4 fixture (issue 12 point 3) are gone."""
    run, outcomes, doc = analysed(fixture_dir(*FIXTURES["mi_cluster_propose_pp2x4"]))
    by_id = {o.id: o for o in outcomes}
    assert doc["facts"]["warmup_steps"] == [1]
    assert doc["facts"]["steps_listed"] == [1, 2, 3, 4, 5]
    # hccl_raw has a step 6 that the step trace lacks: not offered anywhere
    assert by_id["communication"].analysis.metrics["steps_left_out"] == [6]
    assert by_id["execution"].analysis.metrics["steps"] == by_id["trajectory"].analysis.metrics["steps"] == 4
    assert math.isclose(by_id["execution"].analysis.metrics["step_ms_mean"], doc["facts"]["step_ms_mean"])


def test_warmup_detection_rule():
    st = pd.DataFrame({"rank": [0] * 5 + [1] * 5, "step": list(range(1, 6)) * 2,
                       "step_ms": [900, 100, 101, 99, 100, 120, 100, 100, 102, 98]})
    assert facts.warmup_steps(st) == [1]
    # a slow LAST step or a modest first step is not warm-up; never every step
    st2 = st.assign(step_ms=[150, 100, 101, 99, 900, 120, 100, 100, 102, 98])
    assert facts.warmup_steps(st2) == []
    assert facts.warmup_steps(pd.DataFrame({"rank": [0], "step": [1], "step_ms": [5.0]})) == []
    two = pd.DataFrame({"rank": [0, 0], "step": [1, 2], "step_ms": [500.0, 100.0]})
    assert facts.warmup_steps(two) == [1]
    order = facts.rank_order(pd.DataFrame({"rank": [3, 1, 2], "step_ms": [5.0, 5.0, 1.0]}))
    assert order == [2, 1, 3]  # ties by rank id


def test_operator_tables_average_the_steps_in_scope():
    """The trajectory's operator table averages the steps in scope (warm-up out), like every other average: on
    pp2x4 (warm-up step 1 of ~2 s) no operator's mean is longer than the slowest step in scope."""
    run, outcomes, _ = analysed(fixture_dir("mindinsight", "mi_cluster_propose_pp2x4"))
    F = facts.of(run)
    assert F.warmup_steps, "pp2x4 has a warm-up step"
    ops = next(o for o in outcomes if o.id == "trajectory").analysis.data["step_ops"]
    raw = F.in_scope(run.table("step_ops"))
    want = raw.groupby(["op", "rank"])["dur_ms"].mean().groupby("op").mean()
    got = ops.set_index("op")["mean_ms"]
    assert got.to_dict() == pytest.approx(want.loc[got.index].to_dict())
    in_scope = F.step_time[F.step_time["in_scope"]]
    assert float(ops["max_ms"].max()) <= float(in_scope["step_ms"].max())


def test_summary_names_no_straggler_below_the_noise_floor():
    """A synchronous run (every rank the same step time) has no slowest rank worth naming: the summary says so
    instead of calling a tie-break 'slowest' and 'fastest' (issue 13 review)."""
    base = {"ranks": 16, "step_ms_median": 335.6, "steps": 7, "slowest_rank": 15, "fastest_rank": 0}
    tied = summary_text({**base, "step_ms_spread_ratio": 0.0}, [])
    assert "no rank stands out" in tied and "fastest" not in tied
    spread = summary_text({**base, "step_ms_spread_ratio": 0.05}, [])
    assert "slowest rank 15, fastest 0" in spread
