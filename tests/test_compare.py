"""Rank-vs-rank comparison (issue 17 part 2): the default pair, the side-by-side tables whose deltas explain the
step difference, --compare-ranks, and the straggler findings' link to the comparison."""

from __future__ import annotations

import json

import pytest

from conftest import fixture_dir
from reportgen import cli
from reportgen.readers import read_run
from reportgen.sections import Options, run_sections
from reportgen.synth.kineto import KinetoSpec, write_kineto_run


def _compare(path, **opts):
    run = read_run(path)
    outs = {o.id: o for o in run_sections(run, Options(dict(opts)))}
    o = outs["compare"]
    assert o.status == "ok", o.reason
    return run, o, outs


def test_straggler_beside_its_stage_median(tmp_path):
    """A rank whose compute takes 1.4x: paired with the median of its stage; its GEMMs explain most of the
    difference; the straggler finding links to the pair."""
    write_kineto_run(tmp_path, KinetoSpec(hosts=1, devices_per_host=8, stages=2, steps=3, slow_ranks={5: 1.4}))
    run, o, outs = _compare(tmp_path)
    m = o.analysis.metrics
    assert m["rank_a"] == 5 and run.stage_of(m["rank_b"]) == run.stage_of(5) and m["rank_b"] != 5
    t = o.analysis.tables["types"]
    # synchronous steps (they end together): no share of a step difference; the straggler computes ~40 % more and
    # its peer waits that long in the all-reduce
    assert m["synchronous"] and t["explained_ratio"].isna().all()
    top = t.iloc[0]
    assert top["kind"] == "compute" and top["a_count"] == top["b_count"] and top["a_mean_ms"] > 1.3 * top["b_mean_ms"]
    kinds = m["delta_by_kind_ms"]
    assert kinds["compute"] > 0 > kinds["communication"]
    assert abs(kinds["compute"] + kinds["communication"]) < 0.1 * kinds["compute"]
    assert "end together" in o.view.summary and "more compute" in o.view.summary
    linked = [f for oo in outs.values() if oo.view for f in oo.view.findings if f.compare]
    assert linked and all(f.compare[0] == f.ranks[0] and f.compare[1] != f.compare[0] for f in linked)


def test_share_of_a_real_step_difference(tmp_path):
    """Steps that differ (a rank slow at loading data: its step is longer): the shares are delta / the difference."""
    from reportgen.sections.compare import pair_table
    import pandas as pd
    per = pd.DataFrame({"rank": [0, 0, 1, 1], "kind": ["compute"] * 4, "type": ["A", "B", "A", "B"],
                        "count": [2.0, 1.0, 2.0, 1.0], "total_ms": [30.0, 10.0, 20.0, 10.0],
                        "mean_ms": [15.0, 10.0, 10.0, 10.0]})
    t = pair_table(per, 0, 1, ["kind", "type"], 20.0)
    assert t["type"].tolist() == ["A", "B"] and t["delta_ms"].tolist() == [10.0, 0.0]
    assert t["explained_ratio"].tolist() == [0.5, 0.0]


def test_compare_ranks_option_and_bad_values(tmp_path, capsys):
    run_dir = fixture_dir("ascend", "msinsight", "test", "st", "level2")
    _, o, _ = _compare(run_dir, compare_ranks=[2, 0])
    m = o.analysis.metrics
    assert (m["rank_a"], m["rank_b"], m["pair_source"]) == (2, 0, "--compare-ranks")
    # Ascend text output without trace_view.json: kernel_details.csv (ranks 0 and 2) gives the operators
    assert {"a_total_ms", "b_total_ms"} <= set(o.analysis.tables["types"].columns)
    assert "comm" in o.analysis.tables  # communication.json per op type, with transit and wait
    out = tmp_path / "r.html"
    assert cli.main([str(run_dir), "-o", str(out), "--json", str(tmp_path / "m.json"), "--compare-ranks", "2,0",
                     "-q"]) == 0
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["sections"]["compare"]["metrics"]["rank_a"] == 2
    for bad in ("3", "1,1", "a,b", "1,2,3"):
        assert cli.main([str(run_dir), "-o", str(out), "--compare-ranks", bad, "-q"]) == 2
    assert "--compare-ranks" in capsys.readouterr().err


def test_unknown_pair_is_unavailable_not_an_error(tmp_path):
    run = read_run(fixture_dir("ascend", "msinsight", "test", "st", "level2"))
    (o,) = [x for x in run_sections(run, Options({"compare_ranks": [0, 99]})) if x.id == "compare"]
    assert o.status == "unavailable" and "99" in o.reason


def test_chart_offers_any_pair_within_the_page(tmp_path, monkeypatch):
    from reportgen.sections import compare
    monkeypatch.setattr(compare, "PAIR_RANKS", 6)
    write_kineto_run(tmp_path, KinetoSpec(hosts=2, devices_per_host=8, stages=2, steps=2, slow_ranks={9: 1.3}))
    _, o, _ = _compare(tmp_path)
    (fig,) = o.view.figures
    ctl = {c.signal: c for c in o.view.controls}
    embedded = [v for v, _ in ctl["rank_a"].options]
    assert len(embedded) == 6 and o.analysis.metrics["rank_a"] in embedded and o.analysis.metrics["rank_b"] in embedded
    rows = [r for rows in fig.spec["datasets"].values() for r in rows]
    assert {r["rank"] for r in rows} <= set(embedded)
    assert "holds 6 of the 16 ranks" in fig.caption


@pytest.mark.parametrize("name", ["demo"])
def test_demo_has_a_comparison(name, report_cache):
    out = report_cache.get(name)  # cli.main(["demo", ...]) == 0, once per worker (conftest.ReportCache)
    doc = json.loads(out.with_suffix(".json").read_text())
    assert doc["sections"]["compare"]["status"] == "ok"
    assert 'id="compare-chart"' in out.read_text()


def test_default_pair_stays_in_a_stage_when_only_one_rank_of_it_has_operations():
    """Issue 27 #87: Ascend level2 has kernels on ranks 0 (stage 1) and 2 (stage 2) only; the default pair was 2 vs 0
    (two stages: other layers). It is now 2 vs 3 (stage 2), and the page says rank 3 has no computation times (its
    device timeline, from communication.json, holds communication only)."""
    run = read_run(fixture_dir("ascend", "msinsight", "test", "st", "level2"))
    (o,) = run_sections(run, only=["compare"])
    m = o.analysis.metrics
    assert (m["rank_a"], m["rank_b"]) == (2, 3) and m["stage_a"] == m["stage_b"] == 2
    assert m["b_has_operations"] is False and m["explained_ratio"] is None
    assert o.analysis.tables["types"]["explained_ratio"].isna().all()
    assert "pipeline stage (2)" in m["pair_source"] and "no computation operator times" in o.view.summary
    assert any("Rank 3 has no computation operator times" in n for n in o.view.notes)


def test_default_pair_starts_from_the_diagnosis_cause():
    """A = the rank of the diagnosis' first cause (not a stage cause), B = the median of its stage; why is said."""
    from types import SimpleNamespace
    import pandas as pd
    from reportgen.sections.compare import default_pair
    stages = {0: 0, 1: 0, 2: 0, 3: 1, 4: 1, 5: 1}
    run = SimpleNamespace(stage_of=lambda r: stages.get(int(r)))
    per = pd.DataFrame({"rank": list(stages), "step_ms": [100.0, 101, 102, 100, 100, 103]})
    F = SimpleNamespace(per_rank=per, slowest_rank=5)
    compute = pd.Series({0: 50.0, 1: 52.0, 2: 51.0, 3: 40.0, 4: 45.0, 5: 60.0})
    # no cause: the rank with the most computation (5) and the median of stage 1 by computation (3: 40, 4: 45 -> 3)
    a, b, why = default_pair(run, F, None, compute, [])
    assert (a, b) == (5, 3) and "most computation" in why and "stage (1)" in why
    # a rank cause on rank 1 (stage 0): paired with the median of stage 0 by computation (0: 50, 2: 51 -> 0)
    causes = [{"kind": "stage", "ranks": [3, 4, 5], "stage": 1, "link": None},
              {"kind": "dataloader", "ranks": [1], "stage": None, "link": None}]
    a, b, why = default_pair(run, F, None, compute, causes)
    assert (a, b) == (1, 0) and "diagnosis' first cause (dataloader)" in why and "stage (0)" in why
    # a link cause: its first rank (the sender, late at the link), the link named
    a, b, why = default_pair(run, F, None, compute, [{"kind": "link", "ranks": [2, 4], "link": [2, 4]}])
    assert a == 2 and run.stage_of(b) == 0 and "link 2→4" in why
    # never across stages while the stage has another rank
    for c in ([], causes):
        a, b, _ = default_pair(run, F, None, compute, c)
        assert run.stage_of(a) == run.stage_of(b)
