"""Chart specs of every section but execution's (issue 13): one palette, heatmaps centred on the median with a
minimum span, sizes that fit the figure, units on the axes. The same charts in a real browser are checked in
test_charts_browser.py."""

from __future__ import annotations

import re
import statistics

import numpy as np
import pandas as pd
import pytest
from conftest import fixture_dir

from reportgen import charts, palette
from reportgen import thresholds as th
from reportgen.readers import read_run
from reportgen.sections import run_sections

#: sections whose charts this file checks (the execution section's Marey and overview have their own tests;
#: the drill-down charts it shows are built in drilldown.py and checked here)
SECTIONS = ["trajectory", "overlap", "communication", "memory", "flops", "strategy", "execution"]
OWN_PREFIXES = ("trajectory-", "overlap-", "communication-", "memory-", "flops-", "strategy-", "drill-",
                "execution-rank-blocks")
RUNS = {"pp2x4": ("mindinsight", "mi_cluster_propose_pp2x4"),
        "st_level2": ("ascend", "msinsight", "test", "st", "level2"),
        "gloo_ddp4": ("generated", "torch_gloo_ddp4_baseline")}

HEX = re.compile(r"^#[0-9a-fA-F]{3,8}$")
NAMED = {"black", "white", "gray", "grey", "red", "orange", "blue", "green", "purple", "steelblue", "silver",
         "lightgray", "lightgrey", "darkgray", "darkgrey"}
COLOUR_KEYS = {"color", "fill", "stroke", "value", "symbolFillColor", "symbolStrokeColor", "range"}


@pytest.fixture(scope="module", params=list(RUNS))
def figures(request):
    run = read_run(fixture_dir(*RUNS[request.param]))
    out = run_sections(run, only=SECTIONS)
    figs = [f for o in out if o.status == "ok" for f in o.view.figures if f.id.startswith(OWN_PREFIXES)]
    assert figs, request.param
    return request.param, figs


def _walk(node, path=()):
    """(path, key, value) of every leaf of a spec, without the embedded data."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k in ("datasets", "data"):
                continue
            yield from _walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _walk(v, path + (i,))
    else:
        yield path, node


def _views(spec, inherited_width=None):
    """Every unit or layer view of a spec with its effective width."""
    width = spec.get("width", inherited_width)
    for key in ("layer", "vconcat", "hconcat", "concat"):
        if key in spec:
            for sub in spec[key]:
                yield from _views(sub, width)
            return
    yield spec, width


def test_no_colour_outside_the_palette(figures):
    name, figs = figures
    schemes = {palette.SEQUENTIAL, palette.DIVERGING, repr(palette.SEQUENTIAL_ON_BACKGROUND)}
    for fig in figs:
        for path, value in _walk(fig.spec):
            if not isinstance(value, str):
                continue
            keys = {p for p in path if isinstance(p, str)}
            if path and path[-1] == "scheme" or "scheme" in path:
                scheme = value if path[-1] == "scheme" else None
                if scheme is not None:
                    assert scheme in schemes, (name, fig.id, path, value)
                continue
            if HEX.match(value) or (value.lower() in NAMED and keys & COLOUR_KEYS):
                assert value in palette.ALL, f"{name} {fig.id}: colour {value} at {path} is not in the palette"
        # a scheme given as an object is the palette's one for marks on the page background
        for path, value in _walk(fig.spec):
            if "scheme" in path and path[-1] == "name":
                assert value == palette.SEQUENTIAL_ON_BACKGROUND["name"]


def test_parts_of_a_step_take_their_meaning_colour(figures):
    """The same part has the same colour on every chart: computation blue, exposed communication orange..."""
    name, figs = figures
    seen = {}
    for fig in figs:
        for view, _ in _views(fig.spec):
            scale = ((view.get("encoding") or {}).get("color") or {}).get("scale") or {}
            if "domain" in scale and isinstance(scale.get("range"), list) and isinstance(scale["domain"], list):
                for label, colour in zip(scale["domain"], scale["range"]):
                    seen.setdefault(colour, set()).add(str(label).split(" (")[0].lower())
    compute = palette.ROLE["compute"]
    comm = palette.ROLE["comm"]
    assert compute in seen and comm in seen, (name, seen)
    assert not any("wait" in label or "free" in label for label in seen[compute] | seen[comm]), seen
    assert palette.ROLE["wait"] not in seen or not (seen[palette.ROLE["wait"]] & seen[comm])


def test_widths_fit_the_figure(figures):
    """Every view is as wide as its container or computed with a maximum (PLOT_MAX_WIDTH)."""
    name, figs = figures
    for fig in figs:
        for view, width in _views(fig.spec):
            if width is None or width == "container":
                continue
            if isinstance(width, dict):  # {"step": n} per x value: charts.band keeps them within the maximum
                field = ((view.get("encoding") or {}).get("x") or {}).get("field") or next(
                    (((v.get("encoding") or {}).get("x") or {}).get("field") for v, _ in _views(fig.spec)
                     if ((v.get("encoding") or {}).get("x") or {}).get("field")), None)
                values = {r.get(field) for rows in fig.spec.get("datasets", {}).values() for r in rows
                          if isinstance(r, dict) and field in r}
                assert values, (name, fig.id, field)
                assert width["step"] * len(values) <= charts.PLOT_MAX_WIDTH or width["step"] <= 8, \
                    (name, fig.id, width, len(values))
            else:
                assert width <= charts.PLOT_MAX_WIDTH, (name, fig.id, width)
        if fig.spec.get("width") == "container" or any(w == "container" for _, w in _views(fig.spec)):
            assert fig.spec.get("autosize", {}).get("contains") == "padding", (name, fig.id)
        assert "container" not in str(charts.static_spec(fig.spec)), fig.id


def _groups(spec):
    """Views that share axes: the layers of a layered view, each member of a concatenation."""
    for key in ("vconcat", "hconcat", "concat"):
        if key in spec:
            for sub in spec[key]:
                yield from _groups(sub)
            return
    yield [v for v, _ in _views(spec)]


def test_every_quantitative_axis_has_a_unit(figures):
    name, figs = figures
    unit = re.compile(r"\((ms|s|µs|ns|%|k?B|MB|GB|TB|[kMGTPE]?FLOP(/s)?|[kMGT]?B/s|count)\)|^(Node)")
    for fig in figs:
        for group in _groups(fig.spec):
            for channel in ("x", "y"):
                encs = [(v.get("encoding") or {}).get(channel) or {} for v in group]
                encs = [e for e in encs if e.get("type") == "quantitative"]
                if not encs or any((e.get("axis") or {}).get("labels") is False for e in encs):
                    continue  # no such axis, or a hidden one (graph layout)
                titles = [(e.get("axis") or {}).get("title", e.get("title")) for e in encs]
                if fig.spec.get("title") and all(t is None for t in titles):
                    continue  # the unit is in the chart's title (the metric is switched by a control)
                titled = [t for t in titles if t]
                assert titled, f"{name} {fig.id} {channel}: no axis title"
                for t in titled:
                    assert unit.search(str(t)), f"{name} {fig.id} {channel}: axis title {t!r} has no unit"
                fmts = [(e.get("axis") or {}).get("format") for e in encs if e.get("axis")]
                assert fmts and all(f in (charts.fmt.D3_FORMAT, charts.fmt.D3_PCT) for f in fmts), (name, fig.id)


def test_heatmaps_diverge_around_the_median_with_a_minimum_span(figures):
    name, figs = figures
    heat = {f.id: f for f in figs}.get("trajectory-heatmap")
    assert heat is not None
    (rows,) = heat.spec["datasets"].values()
    params = {p["name"]: p.get("value") for p in heat.spec["params"]}
    domains = params["heat_metric_domains"]
    assert set(domains) >= {"step_ms"}
    scope = [r["step_ms"] for r in rows if not r["warmup"]] or [r["step_ms"] for r in rows]
    lo, mid, hi = domains["step_ms"]
    assert mid == pytest.approx(statistics.median(scope))
    span = hi - mid
    assert span >= th.HEATMAP_MIN_SPAN * mid * (1 - 1e-9)
    assert lo == pytest.approx(max(0.0, mid - span))
    assert span >= max(abs(v - mid) for v in scope) - 1e-9
    color = heat.spec["layer"][0]["encoding"]["color"]
    assert color["scale"]["domain"] == {"expr": "heat_metric_domains[heat_metric]"}
    assert color["scale"]["scheme"] == palette.DIVERGING and color["scale"]["clamp"] is True


def test_heatmap_values_beyond_the_span_take_the_end_colour_and_a_mark():
    """Issue 27 #23: a warm-up step (1,381 ms) was clamped to the largest in-scope value (336.6 ms, inside the
    span) and so painted like step 2; it must take the END colour (the clamped scale) and be marked."""
    import pandas as pd
    rows = [{"rank": r, "step": s, "warmup": s == 1, "step_ms": 1381.0 if s == 1 else 335.0 + 0.5 * r + 0.1 * s}
            for r in range(4) for s in range(1, 5)]
    spec = charts.to_spec(charts.median_heatmap(pd.DataFrame(rows), {"step_ms": "Step time"}, param="hm"))
    (domains,) = [p["value"] for p in spec["params"] if p["name"] == "hm_domains"]
    lo, mid, hi = domains["step_ms"]
    assert hi < 1381.0 and max(r["step_ms"] for r in rows if not r["warmup"]) <= hi
    cells, marks = spec["layer"]
    calc = {t["as"]: t["calculate"] for t in cells["transform"] if "calculate" in t}
    assert calc["shade"] == "datum.value"  # not clamped to the in-scope max: the scale clamps it to its end
    assert cells["encoding"]["color"]["scale"]["clamp"] is True
    assert "hm_domains[hm]" in calc["beyond"]
    # the glyph layer draws only the cells beyond the span, with the glyph of their side
    filters = [t["filter"] for t in marks["transform"] if "filter" in t]
    assert filters == ["datum.beyond != 0"] and marks["mark"]["type"] == "text"
    mcalc = {t["as"]: t["calculate"] for t in marks["transform"] if "calculate" in t}
    assert charts.BEYOND_MARK[1] in mcalc["mark"] and charts.BEYOND_MARK[-1] in mcalc["mark"]
    # evaluate the beyond rule as Vega would, on the rows (Python stand-in for the expression)
    beyond = [1 if r["step_ms"] > hi else -1 if r["step_ms"] < lo else 0 for r in rows]
    assert [b for b, r in zip(beyond, rows) if r["warmup"]] == [1] * 4
    assert not any(b for b, r in zip(beyond, rows) if not r["warmup"])
    assert charts.BEYOND_MARK[1] in charts.WARMUP_CAPTION


def test_median_domain():
    # a one-step Ascend run: 809.4-810.2 ms (0.1% apart) must stay near the median's colour
    lo, mid, hi = charts.median_domain([809.4, 809.7, 809.9, 810.2])
    assert mid == pytest.approx(809.8)
    assert hi - mid == pytest.approx(th.HEATMAP_MIN_SPAN * 809.8)
    assert (810.2 - mid) / (hi - mid) < 0.05  # the slowest rank sits within 5% of the way to the end colour
    # a real straggler sets the span
    assert charts.median_domain([100, 100, 100, 150]) == [50.0, 100.0, 150.0]
    # a part of the step: the minimum span comes from the step time, not from the small part
    assert charts.median_domain([1.0, 1.1, 0.9], reference=800.0)[2] == pytest.approx(1.0 + 16.0)
    assert charts.median_domain([1.0, 1.1, 0.9], reference=800.0)[0] == 0.0
    assert charts.median_domain([None, float("nan")]) is None


def test_ranks_are_never_on_a_sequential_scale(figures):
    name, figs = figures
    for fig in figs:
        for view, _ in _views(fig.spec):
            color = (view.get("encoding") or {}).get("color") or {}
            field = str(color.get("field", ""))
            assert not (field in ("rank", "r") and color.get("type") in ("quantitative", "ordinal")), (name, fig.id)


def test_small_link_matrix_writes_its_values():
    import pandas as pd

    from reportgen.sections.communication import MATRIX_TEXT_MAX_SIDE, _matrix

    links = pd.DataFrame({"src_rank": [0, 1, 2, 3], "dst_rank": [1, 2, 3, 0], "size_mb": 10.0, "time_ms": 2.0})
    spec = _matrix(links, "src_rank", "dst_rank", "Rank").spec
    marks = [v["mark"]["type"] if isinstance(v["mark"], dict) else v["mark"] for v in spec["layer"]]
    assert marks == ["rect", "text"]
    assert spec["title"]["text"] == {"expr": "link_metric_units[link_metric][0]"}
    units = {p["name"]: p.get("value") for p in spec["params"]}["link_metric_units"]
    assert units["bandwidth_gbps"][0] == "Bandwidth (GB/s)" and units["size_mb"][0] == "Size (MB)"
    big = pd.DataFrame({"src_rank": range(MATRIX_TEXT_MAX_SIDE + 1), "dst_rank": 0, "size_mb": 1.0, "time_ms": 1.0})
    import json

    big_spec = _matrix(big, "src_rank", "dst_rank", "Rank").spec  # 0 -> 0 is a self link: a grey layer, no text
    assert "text" not in json.dumps([v.get("mark") for v in big_spec.get("layer", [big_spec])])


def test_comm_and_wait_get_their_own_scale_when_far_apart():
    import pandas as pd

    from reportgen.sections.communication import _rank_bars

    per_rank = pd.DataFrame({"rank": [0, 1], "comm_op_ms": [1000.0, 990.0], "wait_ms": [2.0, 3.0]})
    prs = per_rank.assign(step=1)
    spec = _rank_bars(per_rank, prs).spec
    assert spec["resolve"]["scale"]["y"] == "independent"
    assert [v["encoding"]["y"]["axis"]["title"] for v in spec["vconcat"]] == ["Communication op time (s)", "Wait (ms)"]
    close = per_rank.assign(wait_ms=[500.0, 400.0])
    assert _rank_bars(close, close.assign(step=1)).spec["resolve"]["scale"]["y"] == "shared"


def test_legends_and_tooltips_carry_units_and_the_report_format(figures):
    name, figs = figures
    unit = re.compile(r"\((ms|s|µs|ns|%|k?B|MB|GB|TB|[kMGTPE]?FLOP(/s)?|[kMGT]?B/s)\)")
    formats = {charts.fmt.D3_FORMAT, charts.fmt.D3_PCT, charts.fmt.D3_SHORT, "+" + charts.fmt.D3_PCT, charts.fmt.D3_INT}
    for fig in figs:
        for view, _ in _views(fig.spec):
            enc = view.get("encoding") or {}
            for channel in ("color", "size", "strokeWidth"):
                e = enc.get(channel) or {}
                if e.get("type") != "quantitative" or e.get("legend", {}) is None:
                    continue
                title = (e.get("legend") or {}).get("title", e.get("title"))
                if title is None and fig.spec.get("title"):
                    continue  # the chart's title names the metric and its unit
                assert title and unit.search(title), f"{name} {fig.id} {channel} legend {title!r}"
            tips = enc.get("tooltip") or []
            for t in tips if isinstance(tips, list) else [tips]:
                if t.get("type") == "quantitative":
                    assert t.get("format") in formats, f"{name} {fig.id} tooltip {t}"


def test_meaning_and_identity_colours_stand_out_on_the_dark_page():
    """Every ROLE and IDENTITY colour (bars, symbols, legend swatches) has >= 3:1 contrast with the dark page."""
    from reportgen import palette

    def lum(c):
        ch = [int(c[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        ch = [v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4 for v in ch]
        return 0.2126 * ch[0] + 0.7152 * ch[1] + 0.0722 * ch[2]

    dark = lum("#15181c")
    for c in [*palette.ROLE.values(), *palette.IDENTITY]:
        assert (lum(c) + 0.05) / (dark + 0.05) >= 3.0, c


# --------------------------------------------------------------------------- the dict builders


def test_builders_make_plain_vega_lite():
    df = pd.DataFrame({"rank": np.array([0, 1], dtype=np.int64), "ms": [1.5, float("nan")],
                       "name": ["a", None], "ok": [True, False]})
    base = charts.Chart(df).transform_calculate(ms_u="datum.ms / 1000")
    bars = base.mark_bar(opacity=0.5).encode(
        x=charts.X("rank:O", title="Rank"), x2="ms:Q", y="mean(ms):Q", color=charts.value("red"),
        tooltip=["name:N", charts.Tooltip("ms:Q", title="Time", format=",")])
    df["late"] = [1, 2]  # a column added before the spec is made is part of it (read at to_spec)
    spec = charts.to_spec((bars + base.mark_rule().encode(y="ms:Q"))
                          .add_params(charts.param("step", 1), charts.selection_interval("z", ["x"], bind="scales"))
                          .properties(width=100))
    assert base == charts.Chart(df).transform_calculate(ms_u="datum.ms / 1000")  # builders never change their input
    (rows,) = spec["datasets"].values()  # both layers use one table: stored once
    assert rows == [{"rank": 0, "ms": 1.5, "name": "a", "ok": True, "late": 1},
                    {"rank": 1, "ms": None, "name": None, "ok": False, "late": 2}]
    assert all(type(r["rank"]) is int for r in rows)
    unit = spec["layer"][0]
    assert unit["mark"] == {"type": "bar", "opacity": 0.5}
    assert unit["encoding"]["x"] == {"field": "rank", "type": "ordinal", "title": "Rank"}
    assert unit["encoding"]["x2"] == {"field": "ms"}  # a secondary channel has no type
    assert unit["encoding"]["y"] == {"aggregate": "mean", "field": "ms", "type": "quantitative"}
    assert unit["encoding"]["tooltip"][0] == {"field": "name", "type": "nominal"}
    assert unit["transform"] == [{"calculate": "datum.ms / 1000", "as": "ms_u"}]
    assert spec["params"][0] == {"name": "step", "value": 1} and spec["width"] == 100
    assert spec["autosize"] == charts.PAD and spec["config"]["axis"]["labelOverlap"] is True
    charts.validate(spec)


def test_variable_params_of_inner_views_go_to_the_top():
    unit = charts.Chart([{"a": 1}]).mark_point().encode(x="a:Q")
    inner = unit.add_params(charts.param("metric", "a"))
    zoomed = unit.add_params(charts.param("metric", "a"), charts.selection_interval("zoom", ["x"], bind="scales"))
    spec = charts.to_spec(charts.vconcat(charts.layer(inner), zoomed).add_params(charts.param("step", "1")))
    assert [p["name"] for p in spec["params"]] == ["step", "metric"]  # declared once, where the page looks
    assert spec["vconcat"][1]["params"] == [{"name": "zoom", "select": {"type": "interval", "encodings": ["x"]},
                                            "bind": "scales"}]  # a selection stays in its view
    charts.validate(spec)


def test_records_are_plain_json():
    df = pd.DataFrame({"a": pd.array([1, None], dtype="Int64"), "b": pd.array([1.5, None], dtype="Float64"),
                       "c": pd.Categorical(["x", None]), "d": [np.array([1, 2]), None],
                       "e": pd.to_datetime(["2020-01-01", None]), "f": [np.inf, np.nan]})
    assert charts.records(df) == [{"a": 1, "b": 1.5, "c": "x", "d": [1, 2], "e": "2020-01-01T00:00:00", "f": None},
                                  {"a": None, "b": None, "c": None, "d": None, "e": None, "f": None}]
