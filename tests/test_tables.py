"""Tables without a browser: empty columns left out, key columns and groups, <wbr> in long names, natural order,
and the template's table block (filters and CSV buttons only with JavaScript). The browser side is in
test_tables_browser.py."""

from __future__ import annotations

import re

import pandas as pd

from reportgen import render
from reportgen.report import KEY, OPTIONAL, SHOWN, Column, Table, natural_key, natural_order


def _table(**kw) -> Table:
    cols = [Column("rank", "Rank", "rank"), Column("host", "Host", "text"), Column("stage", "Stage", "int"),
            Column("op", "Operator", "text"), Column("ms", "Time (ms)", "ms", group="Time"),
            Column("device", "Device", "int"), Column("x", "Extra (ms)", "ms", group="Time", priority=OPTIONAL)]
    rows = [{"rank": r, "host": "-", "stage": None, "op": f"hcom_batchSendRecv__{r}_4_1", "ms": r + 0.5,
             "device": float("nan"), "x": 1.0} for r in range(4)]
    return Table("t", "T", cols, rows, **kw)


def test_empty_columns_are_left_out_and_named():
    ctx = render._table_ctx(_table())
    assert [c["label"] for c in ctx["columns"]] == ["Rank", "Operator", "Time (ms)", "Extra (ms)"]
    assert ctx["empty_columns"] == ["Host", "Stage", "Device"]
    assert all(len(r) == 4 for r in ctx["rows"]), "the JSON rows (and so the CSV) lose the empty columns too"
    # a table without rows keeps its columns (nothing to judge them by)
    empty = render._table_ctx(Table("e", "E", [Column("a", "A")], []))
    assert [c["label"] for c in empty["columns"]] == ["A"] and empty["empty_columns"] == []


def test_key_columns_groups_and_priorities():
    ctx = render._table_ctx(_table())
    got = [(c["label"], c["priority"], c["group"]) for c in ctx["columns"]]
    # leading identifier columns (rank, int, text; at most three) are key columns unless a section says otherwise
    assert got == [("Rank", KEY, ""), ("Operator", KEY, ""), ("Time (ms)", SHOWN, "Time"),
                   ("Extra (ms)", OPTIONAL, "Time")]
    # an explicit key column moves first, the others keep their order
    t = Table("k", "K", [Column("ms", "Time (ms)", "ms"), Column("name", "Name", "text", priority=KEY)],
              [{"ms": 1.0, "name": "a"}])
    ctx = render._table_ctx(t)
    assert [c["label"] for c in ctx["columns"]] == ["Name", "Time (ms)"]
    assert ctx["rows"] == [["a", 1.0]]


def test_breakable_escapes_then_allows_breaks_at_separators():
    assert render.breakable("short_name") == "short_name"  # short values unchanged
    assert render.breakable(12345.678) == 12345.678
    out = render.breakable("hcom_batchSendRecv__764_4_1")
    assert str(out) == "hcom_<wbr>batchSendRecv__<wbr>764_<wbr>4_<wbr>1"
    hostile = render.breakable('</td><img src=x onerror="a.b_c">/x')
    assert "<img" not in str(hostile) and "td&gt;&lt;img src=x onerror=&#34;a." in str(hostile)
    assert set(re.findall(r"<[^>]*>", str(hostile))) == {"<wbr>"}


def test_natural_order():
    names = ["group_name_10", "group_name_2", None, "group_name_0", "group_name_13", "Group_name_3"]
    assert sorted(names, key=natural_key) == ["group_name_0", "group_name_2", "Group_name_3", "group_name_10",
                                              "group_name_13", None]
    assert sorted([10, 2, 1.5, 0], key=natural_key) == [0, 1.5, 2, 10]
    df = pd.DataFrame({"g": ["g10", "g2", "g2", "g1"], "r": [0, 3, 1, 0]})
    assert natural_order(df, ["g", "r"]).values.tolist() == [["g1", 0], ["g2", 1], ["g2", 3], ["g10", 0]]


def _page(static: bool) -> str:
    ctx = {"title": "t", "tool": {"name": "reportgen", "version": "0"}, "generated_at": "now", "is_demo": False,
           "run": {"name": "r", "source_format": "", "source_path": "", "layout": "", "world_size": 4,
                   "ranks": [0, 1, 2, 3], "missing_ranks": [], "hosts": [], "hosts_known": False, "steps": [1],
                   "warmup_steps": [], "step_source": "", "parallel": {}},
           "problems": [], "notes": [], "findings": [], "drill_ranks": [],
           "sections": [{"id": "s", "title": "S", "status": "ok", "reason": "", "summary": "", "notes": [],
                         "controls": [], "figures": [], "findings": [], "tables": [render._table_ctx(_table())]}]}
    return render.render_html(ctx, static=static)


def test_table_block_markup():
    html = _page(static=False)
    block = html[html.index('<div class="rg-table'):html.index('id="t-data"')]
    assert 'data-csv-rows="shown"' in block and 'data-csv-rows="all"' in block and "CSV (all 4)" in block
    assert block.count("<col>") == 4
    assert re.search(r'<th scope="colgroup" colspan="2" class="rg-group-none"></th>\s*'
                     r'<th scope="colgroup" colspan="2">Time</th>', block)
    assert 'data-priority="3"' in block  # the optional column, hidden on screen by table.js
    assert block.count('<tr data-i="') == 4
    assert "hcom_<wbr>batchSendRecv" in block
    assert "Left out, no value in any row: Host, Stage, Device." in html
    assert "data-filter-for" not in html  # the one-box filter over all columns is gone
    static = _page(static=True)
    assert "data-csv-for" not in static and 'id="t-data"' not in static


def test_table_js_builds_no_markup_from_strings():
    js = render.read_asset("table.js")
    for forbidden in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
                      "fetch(", "XMLHttpRequest"):
        assert forbidden not in js, forbidden
