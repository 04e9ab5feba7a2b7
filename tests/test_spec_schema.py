"""Every chart spec validates against the Vega-Lite JSON schema (the file Altair ships, read with jsonschema; altair
itself is a test dependency only), and a report never imports altair."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from reportgen import charts

from conftest import REPO, analysed


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    from reportgen.synth import (AscendSpec, KinetoSpec, MindInsightSpec, write_ascend_run, write_kineto_run,
                                 write_mindinsight_run)

    root = tmp_path_factory.mktemp("runs")
    write_mindinsight_run(root / "mi", MindInsightSpec(hosts=2, devices_per_host=4, steps=4, slow_ranks={3: 1.3}))
    write_ascend_run(root / "ascend", AscendSpec(slow_link=(0, 1), memory_near_capacity=3))
    write_kineto_run(root / "kineto", KinetoSpec(slow_ranks={1: 1.3}, memory_peaks={2: 1.5}, pipeline_bubble=True))
    return root


def _specs(source) -> list[tuple[str, dict]]:
    """Every figure's spec of the run, analysed as the CLI does once per process (conftest.analysed: both tests below
    and test_golden.py, of the same SHARED_SCOPES group, use the same analyses). Read only."""
    return [(f.id, f.spec) for o in analysed(source)[1] if o.view for f in o.view.figures]


@pytest.mark.parametrize("source", ["demo", "mi", "ascend", "kineto"])
def test_every_spec_follows_the_vega_lite_schema(source, generated):
    specs = _specs(source if source == "demo" else generated / source)
    assert len(specs) >= 5
    for fid, spec in specs:
        charts.validate(spec)  # raises jsonschema.ValidationError with the path of the first problem
        charts.validate(charts.focusable(spec))
        assert spec["$schema"] == charts.SCHEMA_URL
        json.dumps(spec, allow_nan=False)  # plain JSON: no NaN, no numpy or pandas values
        # the data of every view is a named dataset of the top level
        names = {n["name"] for n in _nodes(spec, "data")}
        assert names <= set(spec.get("datasets", {})), fid


def _nodes(node, key):
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and isinstance(v, dict):
                yield v
            if k != "datasets":
                yield from _nodes(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _nodes(v, key)


def test_schema_rejects_a_broken_spec():
    import jsonschema

    spec = charts.to_spec(charts.Chart([{"a": 1}]).mark_bar().encode(x="a:Q"))
    charts.validate(spec)
    with pytest.raises(jsonschema.ValidationError):
        charts.validate({**spec, "mark": {"type": "nonsense"}})


def test_a_report_does_not_import_altair(tmp_path):
    """Importing the CLI and rendering the demo imports neither altair nor jsonschema(-rs) (nor vl-convert's converter
    beyond what the page's bundle needs): the charts are plain dicts."""
    code = ("import sys\n"
            "from reportgen.cli import main\n"
            "assert 'altair' not in sys.modules\n"
            f"rc = main(['demo', '-o', {str(tmp_path / 'd.html')!r}, '--quiet'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('altair', 'jsonschema', 'jsonschema_rs')))\n"
            "sys.exit(rc)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("REPORTGEN_VALIDATE_SPECS", None)  # the tests' schema check is the one thing that may load jsonschema
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 3), out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "d.html").stat().st_size > 100_000


@pytest.mark.parametrize("source", ["demo", "mi", "ascend", "kineto", "pp2x4", "level2", "gloo"])
def test_no_spec_asks_for_what_vega_lite_drops(source, generated):
    """Issue 28 #3: Vega-Lite warns 'Dropping "fit-y" because spec has discrete height' for a single view with a fit
    autosize and a step height (it checks the fit type, not its axis: fit-x too), and ignores a selection on a
    boxplot; every spec of every section asks for neither (charts.vega_lite_warnings), so a page logs no warning."""
    from conftest import fixture_dir

    fixtures = {"pp2x4": ("mindinsight", "mi_cluster_propose_pp2x4"),
                "level2": ("ascend", "msinsight", "test", "st", "level2"),
                "gloo": ("generated", "torch_gloo_ddp4_baseline")}
    where = ("demo" if source == "demo" else fixture_dir(*fixtures[source]) if source in fixtures
             else generated / source)
    specs = _specs(where)
    assert len(specs) >= 5
    for fid, spec in specs:
        assert charts.vega_lite_warnings(spec) == [], fid
        assert charts.vega_lite_warnings(charts.focusable(spec)) == [], fid


def test_fit_with_a_step_height_is_one_view_in_a_vconcat():
    """The pattern itself: a container-wide chart with one step per row is found, and charts.fit + to_spec make it a
    one-view vconcat that keeps its width, step height, selections and variable parameters."""
    rows = [{"k": "a", "v": 1}, {"k": "b", "v": 2}]
    raw = {"mark": "bar", "encoding": {"y": {"field": "k", "type": "nominal"}, "x": {"field": "v", "type": "quantitative"}},
           "width": "container", "autosize": dict(charts.FIT)}
    assert charts.fit_drops(raw) == ["fit-y (discrete height)"]  # no height: a nominal y is a step height
    assert charts.fit_drops({**raw, "height": 200}) == []
    assert charts.fit_drops({**raw, "height": {"step": 20}}) == ["fit-y (discrete height)"]
    assert charts.fit_drops({**raw, "autosize": dict(charts.PAD)}) == []
    box = {"mark": "boxplot", "params": [{"name": "s", "select": "point"}]}
    assert charts.vega_lite_warnings({"layer": [box]}) == ["Selection not supported for boxplot (/layer/0)"]
    chart = (charts.Chart(rows).mark_bar().encode(y="k:N", x="v:Q")
             .add_params(charts.param("p", 1), charts.selection_interval("zoom", ["x"], bind="scales")))
    spec = charts.to_spec(charts.fit(chart, {"step": 20}))
    charts.validate(spec)
    assert charts.vega_lite_warnings(spec) == []
    view = charts.single_view(spec)
    assert view["width"] == "container" and view["height"] == {"step": 20}
    assert [p["name"] for p in view["params"]] == ["zoom"] and [p["name"] for p in spec["params"]] == ["p"]
    assert spec["autosize"] == charts.FIT


def test_validate_gives_the_full_schemas_verdict():
    """charts.validate skips what cannot change the verdict (rows of a top-level data set whose types the schema
    accepts; a spec already found valid): on valid and broken data sets it agrees with jsonschema on the whole
    spec, also when the same spec was validated before."""
    import jsonschema

    schema = json.loads(open(charts.schema_path(), encoding="utf-8").read())
    full = jsonschema.validators.validator_for(schema)(schema)
    base = charts.to_spec(charts.Chart([{"a": 1}]).mark_bar().encode(x="a:Q"))
    name = next(iter(base["datasets"]))
    rows = [[{"a": 1}, {"a": 2}], [1, 2.5], ["x", "y"], [True, False], [], [{"a": 1}, 5], [1, "x"], [True, 1],
            [[1]], [None], ({"a": 1},), "a,b\n1,2", {"a": 1}, 7]
    for r in rows:
        for spec in ({**base, "datasets": {name: r}}, {**base, "data": {"values": r}}):
            for _ in range(2):  # the second time from the memo
                try:
                    charts.validate(spec)
                    ours = True
                except jsonschema.ValidationError:
                    ours = False
                # the page's JSON of the spec (a tuple of rows is an array there)
                assert ours == full.is_valid(charts._json_form(spec)), (r, spec.get("data"))
    with pytest.raises(jsonschema.ValidationError):  # rows skipped, the rest of the spec still checked
        charts.validate({**base, "datasets": {name: [{"a": i} for i in range(100)]}, "mark": "nonsense"})


def test_the_fast_validator_gives_jsonschemas_verdict():
    """charts.validate takes jsonschema-rs's verdict (the test extra installs it; under CI it must be there): on the
    specs of a report and on 150 seeded random breakages of them (a value replaced by one of another type or a
    wrong name, a key dropped or added, a text or number changed) it agrees with jsonschema on every one, and a
    spec it refuses raises jsonschema's error. (A one-off run of 9,000 such breakages of 231 specs of 9 fixtures
    agreed on all, 5,700 of them invalid.)"""
    import copy
    import random

    import jsonschema

    from conftest import need_module

    need_module("jsonschema_rs")
    fast, full = charts._validators()
    assert fast is not None
    # rows of the data sets left out (checked by the tests above; many, and slow for jsonschema)
    specs = [charts._json_form({**spec, "datasets": {k: [] for k in spec["datasets"]}} if "datasets" in spec else spec)
             for _, spec in _specs("demo")]
    assert len(specs) >= 20 and all(fast.is_valid(s) and full.is_valid(s) for s in specs)
    rnd = random.Random(30)
    values = [None, 0, -1, 1.5, "", "nonsense", "quantitative", "bar", True, [], {}, [1, "a"], {"field": "x"},
              {"type": "nominal"}, "container", {"step": -3}]

    def places(node, at=()):
        out = [at] if at else []
        items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
        for k, v in items:
            out += places(v, at + (k,))
        return out

    invalid = 0
    for _ in range(150):
        spec = copy.deepcopy(rnd.choice(specs))
        for _ in range(rnd.choice([1, 1, 2, 3])):
            at = rnd.choice(places(spec))
            parent = spec
            for k in at[:-1]:
                parent = parent[k]
            k, op = at[-1], rnd.random()
            if op < 0.45:
                parent[k] = copy.deepcopy(rnd.choice(values))
            elif op < 0.7:
                parent.pop(k)
            elif op < 0.85 and isinstance(parent, dict):
                parent[rnd.choice(["foo", "mark", "type", "field", "scale", "sort", "value"])] = rnd.choice(values)
            elif isinstance(parent[k], str):
                parent[k] += "x"
            elif isinstance(parent[k], (int, float)) and not isinstance(parent[k], bool):
                parent[k] = -parent[k] - 1
        verdict = full.is_valid(spec)
        assert fast.is_valid(spec) == verdict, spec
        invalid += not verdict
        if not verdict and invalid <= 10:
            with pytest.raises(jsonschema.ValidationError):
                charts.validate(spec)
    assert invalid >= 50  # the breakages do break
