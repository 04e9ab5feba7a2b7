"""The page and the metrics JSON stay within their budgets at any rank / step count (issue 15, goal 2).

Budgets live in reportgen/thresholds.py ("Page budget"). These tests shrink them on a small generated run, so the
cuts happen without a 1024-rank run: the cuts are stated in the page and in the JSON, every per-rank number stays in
the JSON, and any rank stays reachable in the page (the per-rank tables embed every rank). Sizes and browser time
at 1024 / 4096 ranks are bench/ numbers, not tests.
"""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest

from reportgen import cli, document, metrics, render
from reportgen import thresholds as th
from reportgen.synth.mindinsight import MindInsightSpec, write_mindinsight_run


def decode(block):
    """Python twin of charts.js rows(): the rows of one store block."""
    if isinstance(block, list):
        return block
    out = [{} for _ in range(block["n"])]
    for name, col in block["c"]:
        values = col if isinstance(col, list) else [col["d"][i] for i in col["i"]]
        for row, v in zip(out, values):
            row[name] = v
    return out


def test_chart_data_shared_once_and_restored():
    rows = [{"rank": r, "phase": "Computation" if r % 2 else "Wait", "ms": r + 0.1 + 0.2} for r in range(400)]
    small = [{"a": 1}]
    figures = [{"id": "a", "spec": {"datasets": {"d1": rows}, "data": {"name": "d1"}}},
               {"id": "b", "spec": {"data": {"values": rows}, "layer": [{"data": {"values": small}}]}},
               {"id": "c", "spec": None}]
    original = json.loads(json.dumps(figures))
    store = render.share_chart_data(figures)
    assert len(store) == 1  # the same rows in two charts: written once
    key = next(iter(store))
    assert figures[0]["spec"]["datasets"]["d1"] == {"$rg": key} and figures[1]["spec"]["data"]["values"] == {"$rg": key}
    assert figures[1]["spec"]["layer"][0]["data"]["values"] == small  # small data stays in its spec
    phase = dict(store[key]["c"])["phase"]
    assert phase["d"] == ["Wait", "Computation"] and len(phase["i"]) == 400  # repeated text: dictionary + indices
    back = decode(store[key])
    assert [r["rank"] for r in back] == [r["rank"] for r in original[0]["spec"]["datasets"]["d1"]]
    assert back[3]["ms"] == pytest.approx(3.3) and back[3]["phase"] == "Computation"
    # rows with different keys are kept as they are
    mixed = [{"a": i} if i % 2 else {"b": i} for i in range(500)]
    assert decode(render._columnar(mixed)) == mixed


def test_ranks_shown():
    few = {r: float(r) for r in range(th.PAGE_RANKS_ALL)}
    assert th.ranks_shown(few) is None
    many = pd.Series({r: float((r * 37) % 1000) for r in range(1000)})
    shown = th.ranks_shown(many, named=[500, 5000])
    order = many.sort_values(kind="stable").index.tolist()
    n = th.PAGE_RANKS_EXTREMES
    assert set(order[:n]) <= set(shown) and set(order[-n:]) <= set(shown) and 500 in shown and 5000 not in shown
    assert len(shown) <= 2 * n + 2 and shown == sorted(shown)
    assert "every rank" in th.ranks_shown_note(shown, 1000, "step time")


def test_metrics_budget_cuts_op_rows_and_whole_steps(monkeypatch):
    monkeypatch.setattr(th, "JSON_OP_ROWS", 100)
    monkeypatch.setattr(th, "JSON_STEP_ROWS", 250)
    ops = pd.DataFrame({"rank": [r % 50 for r in range(1000)], "elapse_ms": [float(r) for r in range(1000)]})
    kept, cut = document._budgeted("ops", ops)
    assert len(kept) == 100 and kept["elapse_ms"].min() == 900.0 and cut["left_out"] == 900 and "longest" in cut["kept"]
    prs = pd.DataFrame([{"rank": r, "step": s, "ms": 1.0} for s in range(1, 11) for r in range(100)])
    kept, cut = document._budgeted("per_rank_step", prs)
    assert sorted(kept["step"].unique()) == [1, 2] and len(kept) == 200  # whole steps, every rank of each
    assert cut == {"rows": 1000, "left_out": 800, "kept": cut["kept"]} and "2 of 10 steps (1-2" in cut["kept"]
    per_rank = pd.DataFrame({"rank": range(5000), "ms": 1.0})
    assert document._budgeted("per_rank", per_rank)[1] is None  # per-rank tables are whole


@pytest.fixture(scope="module")
def budget_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("budget")
    write_mindinsight_run(root / "run", MindInsightSpec(hosts=4, devices_per_host=8, stages=2, steps=4))
    return root


def test_generated_run_within_shrunk_budget(budget_run, monkeypatch):
    """32 ranks with budgets shrunk as if they were thousands: the per-rank bar charts draw a subset and say so,
    the JSON cuts operators and steps and says so (in the JSON and the page), every rank stays in the per-rank
    tables of the JSON and of the page."""
    monkeypatch.setattr(th, "PAGE_RANKS_ALL", 8)
    monkeypatch.setattr(th, "PAGE_RANKS_EXTREMES", 2)
    monkeypatch.setattr(th, "JSON_OP_ROWS", 200)
    monkeypatch.setattr(th, "JSON_STEP_ROWS", 70)
    monkeypatch.setattr(th, "JSON_INDENT_ROWS", 100)
    monkeypatch.setattr(render, "MAX_EMBEDDED_ROWS", 60)
    out, js = budget_run / "r.html", budget_run / "m.json"
    assert cli.main([str(budget_run / "run"), "-o", str(out), "--json", str(js), "--quiet"]) == 0
    html, text = out.read_text(encoding="utf-8"), js.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert "\n " not in text  # many rows: written compact
    comm = doc["sections"]["communication"]
    assert len(comm["tables"]["ops"]) == 200 and comm["tables_left_out"]["ops"]["left_out"] > 0
    assert "longest" in comm["tables_left_out"]["ops"]["kept"]
    traj = doc["sections"]["trajectory"]
    assert traj["tables_left_out"]["per_rank_step"]["kept"].startswith("every rank in 2 of 4 steps")
    for sec in ("trajectory", "overlap", "communication", "memory", "flops"):
        assert sorted(r["rank"] for r in doc["sections"][sec]["tables"]["per_rank"]) == list(range(32)), sec
    # the page says what the JSON cut and which ranks the charts draw
    assert "The metrics JSON (--json) keeps the 200 rows with the longest elapse_ms" in html
    assert "the per-rank charts draw" in html and "32 ranks" in html
    store = json.loads(re.search(r'<script type="application/json" id="rg-chart-store">(.*?)</script>', html,
                                 re.S).group(1))
    bars = json.loads(re.search(r'id="trajectory-bars-spec">(.*?)</script>', html, re.S).group(1))
    refs = [v["$rg"] for v in bars.get("datasets", {}).values() if isinstance(v, dict)]
    drawn = {r["rank"] for key in refs for r in decode(store[key])}
    assert 2 * 2 <= len(drawn) < 32
    # any rank is reachable: the page's per-rank tables embed every rank; a long table says what it left out
    for tid in ("trajectory-per-rank", "overlap-per-rank", "communication-per-rank"):
        data = json.loads(re.search(rf'id="{tid}-data">(.*?)</script>', html, re.S).group(1))
        assert sorted(r[data["keys"].index("rank")] for r in data["rows"]) == list(range(32)), tid
    assert "rows are left out of this page" in html


def test_small_runs_unchanged(budget_run):
    """Below the budgets nothing is cut or noted; the JSON keeps its indentation."""
    out, js = budget_run / "s.html", budget_run / "s.json"
    assert cli.main([str(budget_run / "run"), "-o", str(out), "--json", str(js), "--quiet"]) == 0
    doc = json.loads(js.read_text(encoding="utf-8"))
    assert not any("tables_left_out" in b for b in doc["sections"].values())
    html = out.read_text(encoding="utf-8")
    assert "the per-rank charts draw" not in html and "The metrics JSON (--json) keeps" not in html


def test_fair_shares():
    assert th.fair_shares([1, 2, 10, 20], 20) == [1, 2, 8.5, 8.5]  # small items whole, big ones split the rest
    assert th.fair_shares([1, 2], 100) == [1, 2] and th.fair_shares([], 5) == []
    assert sum(th.fair_shares([5, 7, 9], 6)) == pytest.approx(6) and th.fair_shares([3], -1) == [0]


def test_budgets_by_rule_on_a_generated_run(budget_run, monkeypatch):
    """The byte budgets shrunk to the size of a 32-rank run: the JSON's per-(rank, step) and per-operator tables
    share what the per-rank tables leave (whole steps, the longest operators, every per-rank row kept), the page's
    table data is cut to its budget, per-rank tables first, and both say so."""
    out, js = budget_run / "b.html", budget_run / "b.json"
    assert cli.main([str(budget_run / "run"), "-o", str(out), "--json", str(js), "--quiet"]) == 0
    full_html, full_json = out.stat().st_size, js.stat().st_size
    monkeypatch.setattr(document, "_JSON_OTHER_CHARS", 10_000)
    monkeypatch.setattr(th, "JSON_BYTES", full_json // 2)
    monkeypatch.setattr(th, "PAGE_BYTES", full_html - 60_000)  # the rows listed as HTML alone take all but ~130 kB
    assert cli.main([str(budget_run / "run"), "-o", str(out), "--json", str(js), "--quiet"]) == 0
    html, text = out.read_text(encoding="utf-8"), js.read_text(encoding="utf-8")
    doc = json.loads(text)
    assert len(text) <= th.JSON_BYTES and len(html) <= th.PAGE_BYTES
    left = {(sid, name): cut for sid, b in doc["sections"].items() for name, cut in b.get("tables_left_out", {}).items()}
    assert left and all(name.endswith("ops") or name.endswith("step") for _, name in left), left
    assert any("share of the file's" in c["kept"] for c in left.values())
    for sec in ("trajectory", "overlap", "communication", "memory", "flops"):
        assert sorted(r["rank"] for r in doc["sections"][sec]["tables"]["per_rank"]) == list(range(32)), sec
    traj = doc["sections"]["trajectory"]["tables"]["per_rank_step"]
    steps = {r["step"] for r in traj}
    assert all(sum(r["step"] == s for r in traj) == 32 for s in steps)  # whole steps, every rank of each
    assert "the tables other than the per-rank ones split" in html  # the page states the JSON cuts
    assert "rows are left out of this page (the page keeps to" in html
    for tid in ("trajectory-per-rank", "overlap-per-rank", "communication-per-rank"):  # per-rank tables first
        data = json.loads(re.search(rf'id="{tid}-data">(.*?)</script>', html, re.S).group(1))
        assert sorted(r[data["keys"].index("rank")] for r in data["rows"]) == list(range(32)), tid


def test_chart_store_within_budget(monkeypatch):
    """Above PAGE_CHART_BYTES the chart with the most data of its own is left out with a note; shared data stays."""
    big = [{"rank": r, "ms": r * 1.5} for r in range(3000)]
    mid = [{"rank": r, "x": r * 2.5} for r in range(1000)]
    figures = [{"id": "a", "spec": {"data": {"values": big}}}, {"id": "b", "spec": {"data": {"values": mid}}},
               {"id": "c", "spec": {"layer": [{"data": {"values": mid}}]}}]
    monkeypatch.setattr(th, "PAGE_CHART_BYTES", 40_000)
    store = render.share_chart_data(figures)
    assert figures[0]["spec"] is None and "This chart was left out" in figures[0]["left_out"]
    assert figures[1]["spec"] is not None and figures[2]["spec"] is not None and len(store) == 1


def test_fit_table_data_per_rank_tables_first(monkeypatch):
    """The page's table data within PAGE_BYTES: a per-rank table keeps every rank, the other table is cut to what is
    left, the rows listed as HTML always stay."""
    def table(tid, rows, kind):
        return {"id": tid, "columns": [{"kind": kind}, {"kind": "ms"}], "rows": rows, "cells": rows[:10],
                "rows_total": len(rows), "truncated": len(rows) - 10, "rows_left_out": 0}
    per_rank = table("pr", [[r, r * 0.1] for r in range(3000)], "rank")
    other = table("ops", [[r % 7, r * 0.3] for r in range(30_000)], "rank")  # ranks repeat: not per rank
    ctx = {"sections": [{"tables": [per_rank, other]}]}
    size = len(render.script_json(per_rank["rows"]))
    monkeypatch.setattr(th, "PAGE_BYTES", 100_000 + 2_000 + int(1.2 * size) + 50_000)
    render.fit_table_data(ctx, lambda: 100_000)
    assert len(per_rank["rows"]) == 3000 and per_rank["rows_left_out"] == 0
    assert 10 < len(other["rows"]) < 30_000 and other["rows_left_out"] == 30_000 - len(other["rows"])
    assert len(render.script_json(other["rows"])) < 60_000
    monkeypatch.setattr(th, "PAGE_BYTES", 100_000)  # no room at all: the listed rows only
    render.fit_table_data(ctx, lambda: 100_000)
    assert len(per_rank["rows"]) == 10 and len(other["rows"]) == 10


def test_plan_measures_and_replans_when_the_estimate_is_short(monkeypatch):
    """A per-operator table whose sampled rows are short and whose other rows are long: the estimate is short, so
    the plan measures what it kept and plans again; the kept tables then fit the budget."""
    from reportgen.model import Run
    from reportgen.report import Analysis, SectionOutcome

    n = 20_000
    long_name = "x" * 400
    ops = pd.DataFrame({"rank": [i % 8 for i in range(n)], "op": [long_name if i % 200 else "a" for i in range(n)],
                        "elapse_ms": [float(i) for i in range(n)]})
    per_rank = pd.DataFrame({"rank": range(8), "step_ms": [1.0] * 8})
    outs = [SectionOutcome("communication", "C", "ok", analysis=Analysis(tables={"ops": ops, "per_rank": per_rank}))]
    monkeypatch.setattr(document, "_JSON_OTHER_CHARS", 0)
    monkeypatch.setattr(th, "JSON_BYTES", 1_000_000)
    est, _, cut = document._plan(None, outs, th.JSON_BYTES)
    assert cut and document._tables_bytes(est) > th.JSON_BYTES  # the sample missed the long rows
    plan = document.plan_cuts(None, outs)
    assert document._tables_bytes(plan) <= th.JSON_BYTES
    assert plan[("communication", "per_rank")][1] is None  # per-rank rows are whole

    # one document per report: its plan is what the metrics file keeps and what the page's notes state
    run = Run(name="r", source_format="x", source_path="/x")
    doc = document.build(run, outs)
    assert metrics.build(doc)["sections"]["communication"]["tables_left_out"]["ops"] == doc.plan[
        ("communication", "ops")][1]
    assert doc.cut_notes["communication"] == document.cuts_text(outs[0], doc.plan) != []


def test_cut_per_rank_table_keeps_the_ranks_drawn_and_named_first(monkeypatch):
    """A 4096-rank page cannot hold every per-rank row: a cut per-rank table keeps the rows listed as HTML, then the
    rows of its section's keep_ranks (the ranks its charts draw, the slowest / median / fastest, the ranks findings
    name), then the first others, in the table's order; the CSV button says how many of how many rows it holds."""
    rows = [[r, r * 0.1] for r in range(4096)]
    t = {"id": "pr", "title": "Per rank", "caption": "", "columns": [{"kind": "rank"}, {"kind": "ms"}], "rows": rows,
         "cells": rows[:10], "rows_total": 4096, "truncated": 4086, "rows_left_out": 0}
    ctx = {"sections": [{"tables": [t], "keep_ranks": [1522, 3738, 5000, 12]}]}
    size = len(render.script_json(rows))
    monkeypatch.setattr(th, "PAGE_BYTES", 100_000 + 2_000 + size // 4)
    render.fit_table_data(ctx, lambda: 100_000)
    kept = [r[0] for r in t["rows"]]
    assert 20 < len(kept) < 4096 and t["rows_left_out"] == 4096 - len(kept) and t["keeps_ranks"]
    assert kept[:10] == list(range(10)) and {1522, 3738, 12} <= set(kept) and kept == sorted(kept)
    assert kept[-2:] == [1522, 3738] and kept[10:-2] == list(range(10, len(kept) - 2))
    # without ranks to keep: the first rows, as before
    t.update(rows=rows, rows_left_out=0)
    t.pop("keeps_ranks")
    ctx["sections"][0]["keep_ranks"] = []
    render.fit_table_data(ctx, lambda: 100_000)
    assert [r[0] for r in t["rows"]] == list(range(len(t["rows"]))) and "keeps_ranks" not in t


def test_large_links_table_lists_the_slowest_for_their_transport_first():
    """41,984 links of which the page keeps 100: ordered by group they were all of one group. Above a page of rows
    the links table goes by bandwidth relative to its transport's median, lowest first (an RDMA link at half the
    RDMA median before every HCCS link, though HCCS links are faster in absolute terms)."""
    from reportgen.sections import communication

    rows = [{"group": f"g{i % 3}", "src_rank": i, "dst_rank": i + 1, "transport": "HCCS" if i % 2 else "RDMA",
             "size_mb": 1.0, "time_ms": 1.0, "bandwidth_gbps": 100.0 if i % 2 else 20.0} for i in range(300)]
    rows[40]["bandwidth_gbps"] = 10.0  # RDMA at half its median
    rows[41]["bandwidth_gbps"] = 80.0  # HCCS at 0.8 of its median
    rows[42]["bandwidth_gbps"] = float("nan")
    out = communication._slowest_first(pd.DataFrame(rows))
    assert out["src_rank"].tolist()[:2] == [40, 41] and out["src_rank"].iloc[-1] == 42
    assert list(out.columns) == list(pd.DataFrame(rows).columns) and len(out) == 300


def test_page_fitted_again_when_the_row_estimate_is_short(budget_run, monkeypatch, tmp_path):
    """The table fit estimates each table's rows from a sample; when the estimate is short (rows of a table vary,
    long ones sorted first), render_html fits again from the rows it kept until the page is within the budget."""
    plain = tmp_path / "plain.html"
    assert cli.main([str(budget_run / "run"), "-o", str(plain), "--quiet"]) == 0
    text = plain.read_text(encoding="utf-8")
    size = len(text.encode("utf-8"))
    rows = sum(len(m.group(1).encode("utf-8"))
               for m in re.finditer(r'<script type="application/json" id="[^"]+-data">(.*?)</script>', text, re.S))
    monkeypatch.setattr(render, "_ROW_MARGIN", 0.2)  # a row estimate 5x short
    monkeypatch.setattr(render, "FIT_AFTER_ROWS", 0)  # fit first, as a big run does
    monkeypatch.setattr(th, "PAGE_BYTES", size - rows // 2)  # half of the tables' embedded rows must go
    out = tmp_path / "r.html"
    assert cli.main([str(budget_run / "run"), "-o", str(out), "--quiet"]) == 0
    assert len(out.read_bytes()) <= th.PAGE_BYTES
    assert "rows are left out of this page" in out.read_text(encoding="utf-8")
