"""Tables without a browser: empty columns left out, key columns and groups, <wbr> in long names, natural order,
and the template's table block (filters and CSV buttons only with JavaScript). The browser side is in
test_tables_browser.py."""

from __future__ import annotations

import re

import pandas as pd
import pytest

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


def test_a_long_frames_table_keeps_only_the_rows_the_page_uses(monkeypatch):
    """Table.from_frame of a frame longer than the page embeds makes only the first rows (the others were a dict
    each: ~220 MiB for 1,024 ranks' operators); the page's table is the one all rows made: the same embedded rows,
    cells, units, row counts and columns left out (empty over every row, also past the rows kept)."""
    import numpy as np

    from reportgen import frames
    from reportgen import thresholds as th

    monkeypatch.setattr(th, "PAGE_EMBEDDED_ROWS", 40)
    monkeypatch.setattr(render, "MAX_EMBEDDED_ROWS", 40)
    rng = np.random.default_rng(7)
    for n in (30, 41, 42, 120, 500):
        late = np.full(n, np.nan)
        late[-1] = 2.5  # the only value of its column: past the rows kept
        df = pd.DataFrame({
            "rank": rng.integers(0, 64, n), "name": rng.choice(["a", "-", " ", "k" * 50, None], n),
            "ms": rng.choice([0.25, np.nan, 1e9, -0.0], n), "none": [None] * n, "dash": ["—"] * n,
            "nan": np.full(n, np.nan), "late": late, "flag": rng.integers(0, 2, n).astype(bool),
            "text_nan": pd.array(rng.choice(["x", None], n), dtype="str")})
        cols = [Column("rank", "Rank", "rank"), Column("name", "Name", "text"), Column("ms", "Time", "ms"),
                Column("none", "None", "text"), Column("dash", "Dash", "text"), Column("nan", "NaN", "ms"),
                Column("late", "Late", "ms"), Column("flag", "Flag", "text"), Column("text_nan", "Text", "text")]
        for html_rows in (25, 100):
            capped = Table.from_frame("t", "T", df, cols, max_html_rows=html_rows)
            whole = Table(id="t", title="T", columns=cols, rows=frames.records(df, [c.key for c in cols]),
                          max_html_rows=html_rows)
            keep = max(41, html_rows)
            assert len(capped.rows) == min(n, keep) and repr(capped.rows) == repr(whole.rows[:keep])  # NaN != NaN
            assert (capped.rows_total is None) == (n <= keep)
            assert repr(render._table_ctx(capped)) == repr(render._table_ctx(whole)), (n, html_rows)
            assert render._table_ctx(capped)["empty_columns"] == ["None", "Dash", "NaN"]
    with pytest.raises(ValueError):  # a count without the empty columns would judge them on the rows held
        Table(id="t", title="T", columns=[], rows=[], rows_total=5)


def test_json_size_of_rows_is_the_sum_over_cells():
    """render._json_size (a row's cells summed in one loop) is its recursive definition: a string its length + 2
    (6 per character + 2 when not ASCII), None 4, any other value 24, a list or tuple 1 + each item's size + 1."""
    import random

    from reportgen import render

    def definition(value):
        if isinstance(value, str):
            return len(value) + 2 if value.isascii() else 6 * len(value) + 2
        if isinstance(value, (list, tuple)):
            return 1 + sum(definition(v) + 1 for v in value)
        return 24 if value is not None else 4

    rng = random.Random(1)
    cells = ["", "ab", "é", "µs" * 3, None, 0, 1.5, True, float("nan"), [], ["x", None], ("a", [1, ["b"]])]
    for _ in range(2000):
        row = [rng.choice(cells) for _ in range(rng.randint(0, 8))]
        value = row if rng.random() < 0.8 else rng.choice(cells)
        assert render._json_size(value) == definition(value)


#: the template's loop over a table's rows before render.table_body (f645410): the reference it must equal
_OLD_TBODY = """<tbody>
          {% if not t.cells %}
          <tr><td colspan="{{ t.columns|length }}" class="rg-muted">No rows.</td></tr>
          {% endif %}
          {% for row in listed_cells %}
          {% set raw = t.rows[loop.index0] %}
          <tr data-i="{{ loop.index0 }}">
            {% for text in row %}
            {% set col = t.columns[loop.index0] %}
            {% set v = raw[loop.index0] %}
            {# one behaviour for every rank cell: with the rank picker, #rank-N sets it (as the rows table.js adds) #}
            {% if col.kind == 'rank' and v is integer and rank_picker is defined and rank_picker and not static %}
            <td class="rg-col-num" data-kind="rank" data-sort="{{ v|sortkey }}"><a href="#rank-{{ v }}" class="rg-rank-link" title="Rank {{ v }}: its detail">{{ text }}</a></td>
            {% elif col.kind == 'rank' and v is integer and v in drill_ranks %}
            <td class="rg-col-num" data-kind="rank" data-sort="{{ v|sortkey }}"><a href="#drill-rank-{{ v }}" title="Rank {{ v }}: top operators">{{ text }}</a></td>
            {% else %}
            <td class="rg-col-{{ 'text' if col.kind == 'text' else 'num' }}"{% if col.kind != 'text' %} data-kind="{{ col.kind }}"{% endif %} data-sort="{{ v|sortkey }}">{{ text|breakable }}</td>
            {% endif %}
            {% endfor %}
          </tr>
          {% endfor %}
        </tbody>"""
_NEW_TBODY = """<tbody>
          {#- the rows -#}
          {{- t|table_body(listed_cells, static, rank_picker is defined and rank_picker, drill_ranks if drill_ranks is defined else []) }}
        </tbody>"""


def _random_table(rng, n_rows: int) -> dict:
    """A table as render._table_ctx makes it, with the values a hostile run can put in cells."""
    from markupsafe import Markup

    texts = ["", "a", "x" * 15, "aten::conv2d/forward_backward.long_name", "<b>&'\"</b>", "r\u202eversed",
             "bad \ud800 half", "名前/長い_名前.は-ここ", "y" * 700, Markup("<i>trusted</i>"), "-"]
    values = [None, float("nan"), float("inf"), -0.0, 1.5, 1e-5, 0, 3, 4095, True, False, "2", "text", -7]
    kinds = ["rank", "text", "int", "ms", "ratio", "bytes", "quantity"]
    cols = [{"kind": rng.choice(kinds), "key": f"c{i}"} for i in range(rng.randint(1, 6))]
    cells, rows = [], []
    for _ in range(n_rows):
        cells.append([rng.choice(texts + [str(v) for v in values]) for _ in cols])
        rows.append([rng.choice(values) for _ in cols])
    t = {"columns": cols, "cells": cells, "rows": rows + [[1] * len(cols)] * rng.randint(0, 2)}
    if rng.random() < 0.7:
        t["listed"] = min(len(cells), rng.randint(1, 4))
    return t


@pytest.mark.parametrize("seed", range(40))
def test_table_body_writes_what_the_template_loop_wrote(seed):
    """render.table_body is the template's per-cell loop in Python: the same text for any table, the
    rank links with and without the picker, the --static page (every row), text cut, escaped, made breakable."""
    import random

    rng = random.Random(seed)
    env = render.environment()
    old, new = env.from_string(_OLD_TBODY), env.from_string(_NEW_TBODY)
    for _ in range(5):
        t = _random_table(rng, rng.choice([0, 1, 3, 6]))
        static = rng.random() < 0.3
        listed = t["cells"] if static or "listed" not in t else t["cells"][:t["listed"]]
        ctx = {"t": t, "static": static, "listed_cells": listed, "drill_ranks": rng.choice([[], [0, 3], [3, 4095]])}
        if rng.random() < 0.8:
            ctx["rank_picker"] = rng.random() < 0.5
        assert new.render(ctx) == old.render(ctx)
