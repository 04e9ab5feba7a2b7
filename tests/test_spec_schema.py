"""Every chart spec validates against the Vega-Lite JSON schema (the file Altair ships, read with jsonschema; altair
itself is a test dependency only), and a report never imports altair."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from reportgen import charts
from reportgen.cli import load_run
from reportgen.sections import run_sections

from conftest import REPO


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
    run = load_run(str(source))
    return [(f.id, f.spec) for o in run_sections(run) if o.view for f in o.view.figures]


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
    """Importing the CLI and rendering the demo imports neither altair nor jsonschema (nor vl-convert's converter
    beyond what the page's bundle needs): the charts are plain dicts."""
    code = ("import sys\n"
            "from reportgen.cli import main\n"
            "assert 'altair' not in sys.modules\n"
            f"rc = main(['demo', '-o', {str(tmp_path / 'd.html')!r}, '--quiet'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('altair', 'jsonschema')))\n"
            "sys.exit(rc)\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("REPORTGEN_VALIDATE_SPECS", None)  # the tests' schema check is the one thing that may load jsonschema
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode in (0, 3), out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"
    assert (tmp_path / "d.html").stat().st_size > 100_000
