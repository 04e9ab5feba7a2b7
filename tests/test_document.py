"""One report document (reportgen/document.py), built once: the metrics file and the page render the same plan,
summary, data problems and findings order; nothing is cached between reports."""

from __future__ import annotations

import pandas as pd

from reportgen import document, metrics, render
from reportgen import thresholds as th
from reportgen.model import Run
from reportgen.report import Analysis, Finding, SectionOutcome, View


def _outcomes(n_ops: int) -> list[SectionOutcome]:
    ops = pd.DataFrame({"rank": [i % 4 for i in range(n_ops)], "op": ["a"] * n_ops,
                        "elapse_ms": [float(i) for i in range(n_ops)]})
    per_rank = pd.DataFrame({"rank": range(4), "step_ms": [1.0] * 4})
    view = View(findings=[
        Finding("low_one", "low", "communication", "low"),
        Finding("high_small", "high", "communication", "high, small", share_of_step=0.1),
        Finding("high_large", "high", "communication", "high, large", share_of_step=0.3),
    ])
    return [SectionOutcome("communication", "Communication", "ok",
                           analysis=Analysis(tables={"ops": ops, "per_rank": per_rank}), view=view)]


def _run() -> Run:
    run = Run(name="r", source_format="x", source_path="/x")
    for i in range(3):
        run.problem(f"/x/{i}", "bad")
    return run


def test_json_and_page_render_the_same_document():
    run, outs = _run(), _outcomes(10)
    doc = document.build(run, outs, "T")
    js, ctx = metrics.build(doc), render.build_context(doc)
    assert [f["id"] for f in js["findings"]] == [f["id"] for f in ctx["findings"]] == [
        "high_large", "high_small", "low_one"]
    assert [f["n"] for f in ctx["findings"]] == [1, 2, 3]
    # a section's findings are the very entries of the one list (numbered there)
    assert {f["id"]: f["n"] for f in ctx["sections"][0]["findings"]} == {"high_large": 1, "high_small": 2,
                                                                         "low_one": 3}
    assert js["summary"] == doc.summary and ctx["title"] == "T"
    assert js["data_problems"] == [p.as_dict() for p in doc.problems] == ctx["problems"]
    # the old entry points build the same document
    assert metrics.build(run, outs)["findings"] == js["findings"]


def test_no_plan_is_kept_between_reports(monkeypatch):
    """The cut plan belongs to its document: the same outcomes list, its table grown, is planned again (a
    module-level cache keyed on the list once returned the old plan)."""
    monkeypatch.setattr(th, "JSON_OP_ROWS", 50)
    run, outs = _run(), _outcomes(10)
    first = document.build(run, outs)
    assert first.plan[("communication", "ops")][1] is None and first.cut_notes["communication"] == []
    outs[0].analysis.tables["ops"] = _outcomes(200)[0].analysis.tables["ops"]
    second = document.build(run, outs)
    kept, cut = second.plan[("communication", "ops")]
    assert len(kept) == 50 and cut["left_out"] == 150
    assert metrics.build(second)["sections"]["communication"]["tables_left_out"]["ops"] == cut
    notes = render.build_context(second)["sections"][0]["notes"]
    assert any("150 rows are left out" in n for n in notes)


def test_data_problems_listed_are_bounded(monkeypatch):
    monkeypatch.setattr(document, "MAX_PROBLEMS", 2)
    doc = document.build(_run(), [])
    assert [p.path for p in doc.problems] == ["/x/0", "(run)"]
    assert doc.problems[-1].problem == "2 more data problems not listed"


def test_table_rows_made_while_planning_are_the_rows_written(monkeypatch):
    """The plan measures a table of at most ROW_SAMPLE rows whole and keeps its rows for the metrics file, which
    writes them instead of making them again: the file's tables are the rows jsonsafe.table_rows makes of each kept
    frame (NaN, numpy ints, long text), for tables measured whole and for sampled ones, and each small table's rows
    were made once."""
    from reportgen import jsonsafe

    n = document.ROW_SAMPLE
    small = pd.DataFrame({"rank": [0, 1, 2], "step": [1, 1, 1], "wait_ms": [0.1 + 0.2, float("nan"), 3.0],
                          "name": ["a", "x" * 5000, None]})
    edge = pd.DataFrame({"rank": range(n), "op": ["b"] * n, "elapse_ms": [i / 3 for i in range(n)]})
    big = pd.DataFrame({"rank": range(n + 1), "op": ["c"] * (n + 1), "elapse_ms": [i / 7 for i in range(n + 1)]})
    outs = [SectionOutcome("communication", "C", "ok", analysis=Analysis(
        tables={"per_rank_step": small, "ops": edge, "links": big}))]
    made = []
    real = document.table_rows
    monkeypatch.setattr(document, "table_rows", lambda df, *a: made.append(len(df)) or real(df, *a))
    doc = document.build(_run(), outs, "T")
    js = metrics.build(doc)
    for name, df in (("per_rank_step", small), ("ops", edge), ("links", big)):
        kept, cut = doc.plan[("communication", name)]
        assert cut is None
        assert js["sections"]["communication"]["tables"][name] == jsonsafe.table_rows(kept)
    # planning: small and edge whole, a sample of big (n rows); the file: big's rows only
    assert made == [3, n, n, n + 1]
    assert set(doc.rows) == {id(small), id(edge)}


def test_rows_measured_for_a_cut_are_the_rows_written(monkeypatch):
    """When the plan cuts a table, it measures every kept table's rows (JSON bytes) and the metrics file writes those
    same rows instead of making them again; when that measure says the estimate was short and the tables are planned
    once more, no rows of frames the final plan does not keep are held, and the file has each kept frame's rows."""
    from reportgen import jsonsafe

    monkeypatch.setattr(th, "JSON_OP_ROWS", 300)
    monkeypatch.setattr(document, "_JSON_OTHER_CHARS", 0)
    n = document.ROW_SAMPLE
    # the longest ops come first in the file; those ranked 200-299 (outside the first plan's sample) are wide
    ops = pd.DataFrame({"rank": [i % 4 for i in range(3 * n)], "op": ["x" * 300 if 300 <= i < 400 else "a"
                                                                      for i in range(3 * n)],
                        "elapse_ms": [i / 3 for i in range(3 * n)]})
    links = pd.DataFrame({"rank": range(n + 5), "op": ["c"] * (n + 5), "elapse_ms": [i / 7 for i in range(n + 5)]})
    real, plans = document.table_rows, []
    real_plan = document._plan
    monkeypatch.setattr(document, "_plan", lambda *a, **k: plans.append(1) or real_plan(*a, **k))
    for budget, replanned in ((th.JSON_BYTES, False), (20_000, True)):
        monkeypatch.setattr(th, "JSON_BYTES", budget)
        outs = [SectionOutcome("communication", "C", "ok", analysis=Analysis(tables={"ops": ops, "links": links}))]
        made, plans[:] = [], []
        monkeypatch.setattr(document, "table_rows", lambda df, *a: made.append(id(df)) or real(df, *a))
        doc = document.build(_run(), outs, "T")
        assert (len(plans) == 2) == replanned
        kept = {name: doc.plan[("communication", name)][0] for name in ("ops", "links")}
        assert doc.plan[("communication", "ops")][1] is not None  # cut
        assert set(doc.rows) <= {id(df) for df in kept.values()}
        planned = list(made)
        js = metrics.build(doc)
        if not replanned:
            assert made == planned and set(doc.rows) == {id(df) for df in kept.values()}  # nothing made again
        for name, df in kept.items():
            assert js["sections"]["communication"]["tables"][name] == jsonsafe.table_rows(df)
        monkeypatch.setattr(document, "table_rows", real)
