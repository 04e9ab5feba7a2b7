"""The diagnosis (reportgen/diagnosis.py) on small canonical tables: who waits for whom, the critical path, and
causes named only beyond the run's own jitter; and the advisor's consolidation of symptoms under their cause."""

import numpy as np
import pandas as pd
import pytest

from reportgen import diagnosis as dg
from reportgen.model import Run
from reportgen.report import EvidenceView, Finding, SectionOutcome, View, Analysis
from reportgen.sections import advisor, waits


def make_run(n=4, steps=5, phases=3, work=30.0, jitter=0.15, slow=None, extra=0.0, loader=None, wait_in=0.0,
             launch=None, seed=0, stages=None, scale=None):
    """n ranks, each step ``phases`` times: compute ``work`` ms (x random jitter), then a world all-reduce that
    starts when the last rank enters and takes 2 ms. ``slow`` computes ``extra`` ms more per phase; ``loader``
    waits ``wait_in`` ms for input at the start of each step; ``launch`` runs its work as 20x more, smaller ops.
    ``stages``: rank -> stage (each stage its own group: a pipeline without transfers, enough for the tests)."""
    rng = np.random.default_rng(seed)
    tl, ops, st, ts, dl = [], [], [], [], []
    t = 0.0
    for step in range(1, steps + 1):
        start = {r: t for r in range(n)}
        cur = dict(start)
        for r in range(n):
            if r == loader:
                dl.append({"rank": r, "step": step, "name": "enumerate(DataLoader)#x.__next__", "start_ms": cur[r],
                           "dur_ms": wait_in})
                cur[r] += wait_in
        for ph in range(phases):
            for r in range(n):
                w = work * (scale or {}).get(r, 1.0) * (1 + rng.uniform(-jitter, jitter)) + (extra if r == slow else 0.0)
                k = 20 if r == launch else 1
                for i in range(k):
                    a = cur[r] + i * w / k
                    tl.append({"rank": r, "step": step, "start_ms": a, "end_ms": a + w / k, "kind": "compute",
                               "op_class": "compute", "name": "op", "stream": "thread 1", "source": "test"})
                cur[r] += w
            last = max(cur.values())
            for r in range(n):
                ops.append({"rank": r, "step": step, "kind": "collective", "op": "all_reduce", "op_type": "all_reduce",
                            "group": "[0, 1, 2, 3]", "start_ms": cur[r], "elapse_ms": last + 2.0 - cur[r],
                            "transit_ms": 2.0, "wait_ms": last - cur[r], "size_mb": 0.1})
                tl.append({"rank": r, "step": step, "start_ms": cur[r], "end_ms": last + 2.0, "kind": "comm",
                           "op_class": "communication", "name": "all_reduce", "stream": "thread 2", "source": "test"})
                cur[r] = last + 2.0
        end = max(cur.values())
        for r in range(n):
            st.append({"rank": r, "step": step, "step_ms": end - start[r]})
            ts.append({"rank": r, "step": step, "start_ms": start[r], "end_ms": end})
        t = end
    run = Run(name="t", source_format="test", source_path="/t")
    run.ranks = list(range(n))
    run.world_size = n
    run.tables.update(step_time=pd.DataFrame(st), trace_steps=pd.DataFrame(ts), device_timeline=pd.DataFrame(tl),
                      comm_ops=pd.DataFrame(ops))
    if dl:
        run.tables["dataloader"] = pd.DataFrame(dl)
    if stages:
        run.stage_map = dict(stages)
        run.parallel = {"stages": len(set(stages.values()))}
    return run


def test_a_rank_that_computes_more_is_the_cause_and_its_peers_wait_for_it():
    run = make_run(slow=2, extra=15.0)
    d = dg.diagnose(run)
    assert [(c.kind, c.ranks) for c in d.causes] == [("compute", [2])]
    c = d.causes[0]
    assert c.confidence == 1.0 and c.severity == "high"
    assert 30 <= c.time_ms <= 60  # 3 phases x 15 ms, less the peers' jitter
    m = d.matrix.pivot(index="waiter", columns="cause", values="wait_ms").fillna(0)
    assert m[2].sum() > 5 * (m.sum().sum() - m[2].sum())  # the column of rank 2 lights up
    path = d.path.groupby("rank")["own_ms"].sum()
    assert path.idxmax() == 2


@pytest.mark.parametrize("seed", range(6))
def test_a_clean_run_with_jitter_names_no_cause(seed):
    d = dg.diagnose(make_run(jitter=0.25, seed=seed))
    assert d.causes == []


def test_a_slow_input_pipeline_is_named_as_such():
    d = dg.diagnose(make_run(loader=1, wait_in=40.0))
    assert [(c.kind, c.ranks) for c in d.causes] == [("dataloader", [1])]
    assert d.causes[0].evidence["value"] == pytest.approx(40.0)


def test_many_small_launches_make_a_launch_bound_rank():
    d = dg.diagnose(make_run(launch=3, slow=3, extra=10.0))
    assert d.causes[0].kind == "launch" and d.causes[0].ranks == [3]


def test_launch_stake_is_the_compute_peer_excess_computed_once(monkeypatch):
    """The launch cause's time at stake is the rank's compute (busy) excess over its peers, the frame the compute
    cause was tested on: each column's peer statistics are computed once per diagnosis, and give what a fresh
    computation gives (without collectives nothing caps the stake)."""
    run = make_run(launch=3, slow=3, extra=10.0)
    run.tables.pop("comm_ops")
    calls = []
    real = dg._peer_excess
    monkeypatch.setattr(dg, "_peer_excess", lambda f, col: calls.append(col) or real(f, col))
    d = dg.diagnose(run)
    assert sorted(calls) == sorted(set(calls))  # no column twice
    assert [(c.kind, c.ranks) for c in d.causes] == [("launch", [3])]
    b = real(d.features, "busy_ms")
    assert d.causes[0].time_ms == b.loc[b["rank"] == 3, "excess"].clip(lower=0).mean()


def test_a_heavy_stage_is_one_cause_not_one_per_rank():
    stages = {0: 1, 1: 1, 2: 2, 3: 2}
    d = dg.diagnose(make_run(stages=stages, scale={2: 2.0, 3: 2.0}))
    assert [c.kind for c in d.causes] == ["stage"] and d.causes[0].stage == 2 and d.causes[0].ranks == [2, 3]


def test_union_length_per_key():
    from reportgen.intervals import union_length_by

    df = pd.DataFrame({"rank": [0, 0, 0, 1], "step": 1, "start_ms": [0.0, 5.0, 20.0, 0.0],
                       "end_ms": [10.0, 8.0, 25.0, 3.0]})
    u = union_length_by(df, ["rank", "step"]).set_index("rank")
    assert u.loc[0, "length"] == 15.0 and u.loc[0, "rows"] == 3 and u.loc[1, "length"] == 3.0


def test_the_waits_section_leads_with_the_cause_and_links_the_proof():
    a = waits.analyze(make_run(slow=1, extra=15.0))
    f = a.findings[0]
    assert f.id == "slow_rank_compute" and f.ranks == [1] and f.cause["kind"] == "compute"
    assert f.view.figure == waits.MATRIX_FIGURE
    v = waits.present(a)
    assert {fig.id for fig in v.figures} == {waits.MATRIX_FIGURE, waits.PATH_FIGURE}
    assert a.metrics["judged"] is True


def _outcomes(findings_by_section, waits_judged=True):
    out = [SectionOutcome("waits", "w", "ok", analysis=Analysis(metrics={"judged": waits_judged, "timeline": True}),
                          view=View())]
    for sid, fs in findings_by_section.items():
        out.append(SectionOutcome(sid, sid, "ok", analysis=Analysis(), view=View(findings=list(fs))))
    out.append(SectionOutcome("advisor", "a", "ok", analysis=Analysis(metrics={}, data={}), view=View()))
    return out


def _f(fid, ranks=(), share=0.2, sev="high", cause=None):
    f = Finding(fid, sev, "overlap", f"{fid} message", ranks=list(ranks), view=EvidenceView("x"))
    f.share_of_step = share
    f.cause = cause
    return f


def test_symptoms_go_under_their_cause():
    cause = _f("slow_rank_compute", [2], cause={"kind": "compute", "ranks": [2]})
    outs = _outcomes({"overlap": [cause, _f("slow_rank_spread", [2]), _f("comm_share")]})
    advisor.consolidate(outs)
    listed = [f.id for o in outs for f in o.view.findings]
    assert listed == ["slow_rank_compute"]
    assert [s["id"] for s in cause.symptoms] == ["slow_rank_spread", "comm_share"]


def test_without_a_cause_only_the_largest_level_stays_and_low():
    outs = _outcomes({"overlap": [_f("slow_rank_spread", [2], 0.3), _f("comm_share", (), 0.4),
                                  _f("long_free_time", (), 0.1), _f("memory_imbalance", [1], None, "medium")]})
    advisor.consolidate(outs)
    listed = [(f.id, f.severity) for o in outs for f in o.view.findings]
    assert listed == [("memory_imbalance", "medium"), ("comm_share", "low")]
    assert {x["id"] for x in outs[-1].analysis.data["observations"]} == {"slow_rank_spread", "long_free_time"}


def test_no_consolidation_where_the_diagnosis_could_not_judge():
    outs = _outcomes({"overlap": [_f("slow_rank_spread", [2])]}, waits_judged=False)
    advisor.consolidate(outs)
    assert [f.id for o in outs for f in o.view.findings] == ["slow_rank_spread"]


def test_exposed_communication_is_judged_against_the_baseline():
    from reportgen.sections.advisor import _Ctx, rule_comm_vs_baseline

    done = {"overlap": SectionOutcome("overlap", "o", "ok", analysis=Analysis(metrics={"comm_share_ratio": 0.21}))}
    ctx = _Ctx(make_run(), done, 100.0, 4, None, baseline={"comm_share": 0.09})
    (f,) = rule_comm_vs_baseline(ctx)
    assert f.cause["kind"] == "overlap" and f.share_of_step == pytest.approx(0.12) and f.severity == "high"
    assert "21%" in f.message and "9%" in f.message
    ctx.baseline = {"comm_share": 0.20}  # within the growth threshold: nothing
    assert rule_comm_vs_baseline(ctx) == []
    ctx.baseline = None
    assert rule_comm_vs_baseline(ctx) == []


def test_a_second_cause_of_the_same_kind_goes_under_the_first():
    a = _f("comm_not_overlapped", (), 0.06, "medium", cause={"kind": "overlap", "ranks": []})
    b = _f("comm_grew_vs_baseline", (), 0.03, "medium", cause={"kind": "overlap", "ranks": []})
    outs = _outcomes({"diagnosis": [a], "overlap": [b]})
    advisor.consolidate(outs)
    assert [f.id for o in outs for f in o.view.findings] == ["comm_not_overlapped"]
    assert [s["id"] for s in a.symptoms] == ["comm_grew_vs_baseline"]


def test_a_host_op_holding_a_whole_collective_waits_for_it():
    """reportgen/timeline.py: an autograd function around a blocking all_reduce is cut around the gloo span it
    holds; an op that only overlaps an asynchronous span keeps its time."""
    from reportgen.timeline import _without_waits

    h = pd.DataFrame([{"rank": 0, "name": "ReduceFromTP", "tid": "1", "start_ms": 0.0, "dur_ms": 100.0,
                       "end_ms": 100.0},
                      {"rank": 0, "name": "aten::mm", "tid": "1", "start_ms": 100.0, "dur_ms": 10.0, "end_ms": 110.0}])
    spans = pd.DataFrame([{"rank": 0, "start_ms": 20.0, "dur_ms": 60.0, "end_ms": 80.0},
                          {"rank": 0, "start_ms": 105.0, "dur_ms": 20.0, "end_ms": 125.0}])
    out = _without_waits(h, spans).sort_values("start_ms")
    assert out[["name", "start_ms", "end_ms"]].values.tolist() == [
        ["ReduceFromTP", 0.0, 20.0], ["ReduceFromTP", 80.0, 100.0], ["aten::mm", 100.0, 110.0]]
    assert (out["dur_ms"] == out["end_ms"] - out["start_ms"]).all()


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8])
def test_peer_statistics_leave_the_rank_out(n):
    rng = np.random.default_rng(n)
    f = pd.DataFrame({"step": np.repeat([1, 2], n), "stage": 1, "rank": np.tile(np.arange(n), 2),
                      "busy_ms": rng.uniform(0, 100, 2 * n).round(1)})
    got = dg._peer_excess(f, "busy_ms").set_index(["step", "rank"])
    for (step, rank), row in f.set_index(["step", "rank"]).iterrows():
        peers = f[(f["step"] == step) & (f["rank"] != rank)]["busy_ms"]
        assert got.loc[(step, rank), "peer_median"] == pytest.approx(peers.median())
        assert got.loc[(step, rank), "excess"] == pytest.approx(row["busy_ms"] - peers.median())
        assert got.loc[(step, rank), "spread"] == pytest.approx(peers.max() - peers.min())


def _without_waits_reference(h, spans):
    """The loop the vectorised reportgen.timeline._without_waits replaced (one op, one span at a time)."""
    from reportgen.intervals import union

    out, cut = [h], []
    for rank, hh in h.groupby("rank", sort=False):
        cc = spans[spans["rank"] == rank]
        hh = hh.sort_values("start_ms", kind="stable")
        hs, he = hh["start_ms"].to_numpy(float), hh["end_ms"].to_numpy(float)
        cs, ce = union(cc["start_ms"].to_numpy(float), cc["end_ms"].to_numpy(float))
        i = np.searchsorted(hs, cs, side="right") - 1
        inside = (i >= 0) & (he[np.clip(i, 0, None)] >= ce)
        pieces = []
        for k in np.unique(i[inside]):
            row = hh.iloc[k]
            a = float(row["start_ms"])
            for s0, e0 in zip(cs[inside & (i == k)], ce[inside & (i == k)]):
                if s0 > a:
                    pieces.append({**row.to_dict(), "start_ms": a, "end_ms": float(s0)})
                a = max(a, float(e0))
            if float(row["end_ms"]) > a:
                pieces.append({**row.to_dict(), "start_ms": a, "end_ms": float(row["end_ms"])})
            cut.append(hh.index[k])
        if pieces:
            out.append(pd.DataFrame(pieces))
    out[0] = h.drop(index=cut)
    res = pd.concat(out, ignore_index=True)
    res["dur_ms"] = res["end_ms"] - res["start_ms"]
    return res


@pytest.mark.parametrize("seed", range(6))
def test_cutting_ops_around_held_spans_matches_the_loop(seed):
    """Many ops on several ranks, each holding none, one or several spans (some touching, some at the op's edges,
    some only overlapping): the pieces, their order and their columns are the loop's."""
    from reportgen.timeline import _without_waits

    rng = np.random.default_rng(seed)
    rows, spans = [], []
    for rank in range(3):
        t = 0.0
        for j in range(40):
            start = t + float(rng.integers(0, 3))
            dur = float(rng.integers(1, 30))
            rows.append({"rank": rank, "name": f"op{j % 5}", "tid": str(j % 2), "start_ms": start, "dur_ms": dur,
                         "end_ms": start + dur})
            t = start + dur
        for _ in range(60):
            s = float(rng.integers(0, int(t)))
            spans.append({"rank": rank, "start_ms": s, "end_ms": s + float(rng.integers(0, 6))})
    h, sp = pd.DataFrame(rows), pd.DataFrame(spans)
    got = _without_waits(h, sp)
    want = _without_waits_reference(h, sp)
    assert len(got) > len(h)  # ops were cut
    pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True))


def test_host_gaps_are_the_pandas_least_largest_and_medians_of_each_host_against_the_others():
    """diagnosis._host_gaps (numpy, one pass per host) gives for every host of a group with >= 2 ranks and a rank
    elsewhere what pandas gives for it: its min - the others' max, its median - the others' median, NaN left out;
    for uneven hosts, one-rank hosts, a single host, NaN values and a side of NaN only."""
    import numpy as np
    import pandas as pd

    from reportgen import diagnosis

    rnd = np.random.default_rng(3)
    for case in range(400):
        n = int(rnd.integers(1, 40))
        hosts = np.array([f"h{int(h)}" for h in rnd.integers(0, int(rnd.integers(1, 7)), n)], dtype=object)
        values = rnd.gamma(2.0, 10.0, n).round(int(rnd.integers(0, 4)))
        values[rnd.random(n) < (0.5 if case % 5 == 0 else 0.1)] = np.nan
        g = pd.DataFrame({"host": hosts, "v": values})
        want = []
        for h, gh in g.groupby("host"):
            rest = g[g["host"] != h]["v"]
            if len(gh) < 2 or rest.empty:
                continue
            want.append((7, h, float(gh["v"].min() - rest.max()), float(gh["v"].median() - rest.median())))
        got = diagnosis._host_gaps(7, values, hosts)
        assert [r[:2] for r in got] == [r[:2] for r in want]
        np.testing.assert_array_equal(np.array([r[2:] for r in got], dtype=float).reshape(-1, 2),
                                      np.array([r[2:] for r in want], dtype=float).reshape(-1, 2))


def test_exposed_time_is_each_ranks_ops_outside_its_compute():
    """diagnosis._exposed (ranks as slices of arrays sorted once) equals its definition written rank by rank: per
    rank and step, the summed op time and the part of each op outside the union of that rank's compute intervals
    (ranks' rows interleaved, a rank without compute, zero-length ops, rows without a rank)."""
    from reportgen import intervals as iv

    rng = np.random.default_rng(5)
    for case in range(60):
        n, m = int(rng.integers(1, 40)), int(rng.integers(0, 60))
        o = pd.DataFrame({"rank": rng.integers(0, 5, n).astype(float), "step": rng.integers(1, 4, n),
                          "start_ms": np.round(rng.uniform(0, 50, n), 2),
                          "elapse_ms": np.round(rng.choice([0.0, 0.5, 3.0, 9.0], n) * rng.uniform(0, 2, n), 3)})
        if case % 4 == 0 and n > 1:
            o.loc[0, "rank"] = np.nan
        comp = pd.DataFrame({"rank": rng.integers(0, 4, m), "start_ms": np.round(rng.uniform(0, 50, m), 2)})
        comp["end_ms"] = comp["start_ms"] + np.round(rng.uniform(0, 8, m), 2)
        got = dg._exposed(o, comp)
        parts = []
        for r, g in o.groupby("rank"):
            c = comp[comp["rank"] == r]
            u = iv.union(c["start_ms"].to_numpy(float), c["end_ms"].to_numpy(float))
            s0 = g["start_ms"].to_numpy(float)
            e0 = s0 + g["elapse_ms"].to_numpy(float)
            frac = 1 - np.divide(iv.covered(u, s0, e0), e0 - s0, out=np.zeros(len(g)), where=(e0 - s0) > 0)
            parts.append(g.assign(exposed_ms=g["elapse_ms"] * frac, time_ms=g["elapse_ms"]))
        want = pd.concat(parts).groupby(["rank", "step"], as_index=False)[["exposed_ms", "time_ms"]].sum()
        pd.testing.assert_frame_equal(got.reset_index(drop=True), want.reset_index(drop=True), check_exact=True)
    # ops of no rank only: nothing exposed (the former per-rank concat raised on no rank at all)
    o = pd.DataFrame({"rank": [np.nan], "step": [1], "start_ms": [0.0], "elapse_ms": [1.0]})
    assert dg._exposed(o, pd.DataFrame({"rank": [0], "start_ms": [0.0], "end_ms": [1.0]})).empty
