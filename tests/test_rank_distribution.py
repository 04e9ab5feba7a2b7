"""Per-rank charts beyond th.PAGE_RANKS_ALL ranks (issue 15, goal 2): the cut bar charts draw th.ranks_shown ranks
only, a histogram beside them counts every rank (charts.rank_distribution), findings add at most
th.PAGE_RANKS_EXTREMES ranks, and runs up to PAGE_RANKS_ALL ranks are unchanged. Every spec made here is validated
against the Vega-Lite schema (tests/conftest.py sets REPORTGEN_VALIDATE_SPECS=1)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from reportgen import charts, cli
from reportgen import thresholds as th
from reportgen.sections import Options, run_sections
from reportgen.synth.mindinsight import MindInsightSpec, write_mindinsight_run

#: section -> (cut bar chart, distribution chart, the per_rank column that orders the ranks)
CUT = {"trajectory": ("trajectory-bars", "trajectory-distribution", "step_ms"),
       "overlap": ("overlap-bars", "overlap-distribution", "step_ms"),
       "communication": ("communication-ranks", "communication-distribution", "comm_op_ms")}


def rows(spec: dict) -> list[dict]:
    return [r for table in spec.get("datasets", {}).values() for r in table]


def test_distribution_counts_every_rank():
    rng = np.random.default_rng(7)
    values = pd.Series(rng.normal(200.0, 3.0, 4096), index=range(4096))
    values[17] = np.nan  # a rank without a value
    shown = th.ranks_shown(values.dropna(), [5])
    fig = charts.rank_distribution("x-distribution", values, shown, "Step time", "average")
    data = rows(fig.spec)
    bins = [r for r in data if "ranks" in r]
    assert sum(r["ranks"] for r in bins) == 4095 and len(bins) <= charts.DIST_BINS[1]
    assert min(r["lo"] for r in bins) == values.min() and max(r["hi"] for r in bins) == values.max()
    assert sorted(r["rank"] for r in data if "rank" in r) == shown  # the rug: the ranks the bar chart draws
    assert len(data) < 120  # a few dozen rows, whatever the rank count
    assert "4,095 ranks" in fig.caption and "1 ranks without a value" in fig.caption
    assert "(ms)" in str(fig.spec)  # the axis names its unit


def test_distribution_of_equal_values():
    values = pd.Series(5.0, index=range(300))
    fig = charts.rank_distribution("x-distribution", values, [0, 1], "Communication time", "average")
    assert sum(r["ranks"] for r in rows(fig.spec) if "ranks" in r) == 300


def test_finding_ranks_capped_and_fair():
    stage = SimpleNamespace(ranks=list(range(128, 256)))  # a finding about a whole stage
    slow = SimpleNamespace(ranks=[7, 3, 7])
    named = charts.finding_ranks([stage, slow])
    assert len(named) == th.PAGE_RANKS_EXTREMES and named[:4] == [128, 7, 129, 3]
    assert charts.finding_ranks([]) == [] and charts.finding_ranks([slow]) == [7, 3]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("dist")
    write_mindinsight_run(root / "run", MindInsightSpec(hosts=4, devices_per_host=8, stages=2, steps=4))
    return root / "run"


def _views(run_dir):
    run = cli.load_run(str(run_dir))
    return {o.id: o for o in run_sections(run, Options(), only=list(CUT)) if o.id in CUT}


def test_cut_charts_hold_ranks_shown_only(run_dir, monkeypatch):
    """32 ranks with the page budget shrunk as if they were thousands (2 ranks at each end)."""
    monkeypatch.setattr(th, "PAGE_RANKS_ALL", 8)
    monkeypatch.setattr(th, "PAGE_RANKS_EXTREMES", 2)
    for sid, out in _views(run_dir).items():
        assert out.status == "ok", (sid, out.reason)
        bars_id, dist_id, col = CUT[sid]
        figs = {f.id: f for f in out.view.figures}
        per_rank = out.analysis.tables["per_rank"].set_index("rank")[col]
        # the ranks any finding of the page names are kept too (issue 28: reportgen/focus.py, charts.named_ranks)
        named = charts.named_ranks(out.analysis)
        shown = th.ranks_shown(per_rank, named)
        assert len(shown) <= 2 * 2 + 1 + len(named)
        assert {r["rank"] for r in rows(figs[bars_id].spec)} == set(shown), sid
        dist = rows(figs[dist_id].spec)
        assert sum(r["ranks"] for r in dist if "ranks" in r) == 32, sid
        assert sorted(r["rank"] for r in dist if "rank" in r) == shown, sid
        order = [f.id for f in out.view.figures]
        assert order.index(dist_id) == order.index(bars_id) + 1, sid  # right below the bars it completes
        assert any("the per-rank charts draw" in n and "Rank filter of the table 'Per rank" in n
                   for n in out.view.notes), sid


def test_small_runs_have_no_distribution(run_dir):
    for sid, out in _views(run_dir).items():
        bars_id, dist_id, _ = CUT[sid]
        ids = [f.id for f in out.view.figures]
        assert bars_id in ids and dist_id not in ids, sid
        assert {r["rank"] for r in rows(out.view.figures[ids.index(bars_id)].spec)} == set(range(32)), sid
        assert not any("the per-rank charts draw" in n for n in out.view.notes), sid
