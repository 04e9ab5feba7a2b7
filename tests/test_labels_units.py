"""Issue 28: one label per quantity, one unit per table, numbers for people everywhere.

The report *documents* (not the HTML) of the demo, MindInsight pp2x4, Ascend level2 and a Kineto gloo run are built
once; every table of each is walked: no table mixes time units across its time columns, no header says "below" /
"above" over a value of the other sign, one metric key has one label across the sections, a column holding CUDA
streams says so; the advisor's counts meet the page's; advice naming one platform's feature is given on that
platform only. Findings (message, suggestion, evidence, symptoms), summaries, notes and captions write numbers as
reportgen/fmt.py does; every quantitative tooltip of every chart uses one of the project's d3 formats, in exponent
form where its field holds a value below 1e-4 (as the tables write it).
"""

from __future__ import annotations

import re

import pytest

from reportgen import charts, cli, document, fmt, labels, render
from reportgen.model import Run
from reportgen.sections import run_sections

from conftest import fixture_dir

PAGES = {
    "demo": lambda: "demo",
    "pp2x4": lambda: str(fixture_dir("mindinsight", "mi_cluster_propose_pp2x4")),
    "level2": lambda: str(fixture_dir("ascend", "msinsight", "test", "st", "level2")),
    "kineto_mesh": lambda: str(fixture_dir("kineto", "generated_cpu_gloo_4rank_mesh2x2")),
    # GPU ranks whose communication kernels carry no collective record: the group column holds CUDA streams
    "kineto_gpu": lambda: str(fixture_dir("kineto", "hta_tests_data", "tests", "data", "trace_filter")),
}

#: metric keys that name a per-table statistic or role, not one quantity (a table's "Total", "Mean", "Calls", its
#: ids; a wait_ms of a collective vs of the input pipeline; a FLOPs column says whether reportgen estimated it; the
#: memory peak names which peak the data has; a group column says "or stream" where it holds CUDA streams): their
#: labels say what they are in that table
PER_TABLE_KEYS = {"rank", "name", "count", "ops", "calls", "mean_ms", "max_ms", "median_ms", "total_ms", "max_rank",
                  "type", "op_type", "source", "share_ratio", "spread_ratio", "time_ms", "comm_ms", "wait_ms",
                  "wait_vs_mean_ratio", "peak_mb", "flops", "group"}


@pytest.fixture(scope="module", params=list(PAGES))
def page(request):
    run = cli.load_run(PAGES[request.param]())
    outs = run_sections(run, cli.section_options(run, {}))
    doc = document.build(run, outs)
    return request.param, doc, render.build_context(doc)


def _tables(ctx):
    for s in ctx["sections"]:
        for t in s["tables"]:
            yield s["id"], t


def test_one_time_unit_per_table(page):
    name, _, ctx = page
    for sid, t in _tables(ctx):
        units = {c["unit"] for c in t["columns"] if c["kind"] in fmt.TIME_KINDS}
        assert len(units) <= 1, f"{name}: table {t['id']} mixes time units {units}: " + \
            ", ".join(c["header"] for c in t["columns"] if c["kind"] in fmt.TIME_KINDS)


def test_below_above_headers_hold_values_of_their_sign(page):
    name, _, ctx = page
    for sid, t in _tables(ctx):
        for i, c in enumerate(t["columns"]):
            if not re.search(r"\b(below|above)\b", c["label"], re.I) or c["kind"] == "text":
                continue
            vals = [r[i] for r in t["rows"] if isinstance(r[i], (int, float)) and r[i] == r[i]]
            assert all(v >= 0 for v in vals), f"{name}: {t['id']} '{c['header']}' holds {min(vals)}"


def test_one_label_per_metric_key(page):
    name, _, ctx = page
    seen: dict[str, tuple[str, str]] = {}
    for sid, t in _tables(ctx):
        for c in t["columns"]:
            if c["key"] in labels.LABELS:
                assert c["label"] == labels.LABELS[c["key"]], f"{name}: {t['id']} labels {c['key']} {c['label']!r}"
            if c["key"] in PER_TABLE_KEYS:
                continue
            first = seen.setdefault(c["key"], (c["label"], t["id"]))
            assert c["label"] == first[0], (f"{name}: {c['key']} is {first[0]!r} in {first[1]} but {c['label']!r} "
                                            f"in {t['id']}")
    # the computation that includes the device's idle time has one name on the page (not 'incl. idle' elsewhere)
    words = {c["label"].removesuffix(" share") for _, t in _tables(ctx) for c in t["columns"] if re.search(r"incl\.? (idle|free)", c["label"])
             and c["label"].lower().startswith("computation")}
    assert words <= {labels.COMPUTATION_INCL_FREE}, words
    assert "incl. idle" not in ctx.get("summary_text", "")


def test_stream_columns_say_stream(page):
    name, _, ctx = page
    streams = 0
    for sid, t in _tables(ctx):
        for i, c in enumerate(t["columns"]):
            if any(isinstance(r[i], str) and re.fullmatch(r"stream \d+", r[i]) for r in t["rows"]):
                assert "stream" in c["label"].lower(), f"{name}: {t['id']} '{c['label']}' holds CUDA streams"
                streams += 1
    assert streams or name != "kineto_gpu"  # the page that has them is walked


def test_group_label_names_streams():
    assert labels.group_label(["stream 84", "stream 7"]) == "Group or stream"
    assert labels.group_label(["dp-0", None]) == "Group"
    import pandas as pd  # a column: each distinct value read once, the same label

    for values in (["dp-0"] * 5 + ["stream 3"], ["dp-0", None, float("nan")], [["a"], "stream 1"], []):
        df = pd.DataFrame({"group": pd.Series(values, dtype=object)})
        assert labels.group_column(df).label == labels.group_label(values)


def test_advisor_counts_meet_the_page(page):
    name, doc, ctx = page
    adv = next((o for o in doc.outcomes if o.id == "advisor" and o.status == "ok"), None)
    if adv is None:
        pytest.skip("no advisor")
    m = adv.analysis.metrics
    assert m["findings_listed"] == len(ctx["findings"])
    assert m["rule_findings"] == m["rule_findings_listed"] + m["rule_findings_symptoms"] + m["rule_findings_observed"]
    assert m["rule_findings_listed"] <= len(ctx["findings"])
    s = adv.view.summary
    assert f"lists {len(ctx['findings'])} finding" in s
    if m["rule_findings"] != m["rule_findings_listed"]:  # what differs is said
        assert "listed under a cause" in s or "observation" in s, s


def test_no_label_joined_into_a_wording_bug(page):
    name, _, ctx = page
    for f in ctx["findings"]:
        for text in [f["message"]] + [x["message"] for x in f.get("symptoms") or []]:
            assert not re.search(r"\b(\w+) \1\b", text), text
            assert "messages communication operations" not in text, text


def test_platform_advice_follows_the_run_device(page):
    name, doc, ctx = page
    texts = [t for f in ctx["findings"] for t in [f["message"], f.get("suggestion") or ""]
             + [x["message"] for x in f.get("symptoms") or []]]
    if doc.run.device != "gpu":
        assert not any("CUDA" in t for t in texts), [t for t in texts if "CUDA" in t]
    assert {"pp2x4": "npu", "level2": "npu", "kineto_mesh": "cpu", "kineto_gpu": "gpu"}.get(name, doc.run.device) \
        == doc.run.device


def test_platform_text_is_chosen_by_device_never_by_family():
    from reportgen.sections.advisor import GRAPH_ADVICE, platform_text

    def run(device, family):
        return Run(name="r", source_format=family, source_path="/x", device=device)

    assert "CUDA" in platform_text(run("gpu", "mindinsight"), GRAPH_ADVICE)  # MindSpore on GPU: CUDA graphs apply
    for device in ("npu", "cpu", ""):
        assert "CUDA" not in platform_text(run(device, "kineto"), GRAPH_ADVICE)


# ------------------------------------------------------------------------------------------ numbers for people
#: a decimal number in a sentence (not part of a word, an id or a version)
_DECIMAL = re.compile(r"(?<![\w.#-])-?\d[\d,]*\.(\d+)(?![\w.])")


def _texts(ctx):
    for f in ctx["findings"]:
        yield f"finding {f['id']}", f["message"]
        yield f"suggestion {f['id']}", f.get("suggestion") or ""
        for k, v in fmt.evidence(f.get("evidence") or {}):
            yield f"evidence {f['id']}", f"{k} {v}"
        for x in f.get("symptoms") or []:
            yield f"symptom {x.get('id')}", x.get("message") or ""
            for k, v in fmt.evidence(x.get("evidence") or {}):
                yield f"symptom evidence {x.get('id')}", f"{k} {v}"
    yield "summary", ctx.get("summary_text") or ""
    for s in ctx["sections"]:
        yield f"{s['id']} summary", s["summary"] or ""
        for n in s["notes"]:
            yield f"{s['id']} note", str(n)
        for fg in s["figures"]:
            yield f"{s['id']} figure {fg['id']}", fg["caption"] or ""
        for t in s["tables"]:
            yield f"{s['id']} table {t['id']}", t["caption"] or ""
        for t in s["trees"]:
            yield f"{s['id']} tree {t['id']}", t["caption"] or ""


def test_sentences_write_numbers_as_fmt_does(page):
    name, _, ctx = page
    for where, text in _texts(ctx):
        for m in _DECIMAL.finditer(text):
            dec = m.group(1)
            zeros = len(dec) - len(dec.lstrip("0"))
            assert zeros <= 6, f"{name} {where}: {m.group(0)} (fmt writes an exponent below 1e-4)"
            assert len(dec.lstrip("0")) <= fmt.SIG, f"{name} {where}: {m.group(0)} has more digits than fmt gives"


def test_evidence_writes_tiny_numbers_with_an_exponent():
    pairs = dict(fmt.evidence({"metric": "imbalance_ratio", "value": 0.5, "reference": 0.2,
                               "chance_p_value": 8.272e-25}))
    assert pairs["chance_p_value"] == "8.272e-25"


def _tooltips(node):
    if isinstance(node, dict):
        tips = node.get("tooltip")
        for t in (tips if isinstance(tips, list) else [tips] if isinstance(tips, dict) else []):
            if isinstance(t, dict):
                yield t
        for k, v in node.items():
            if k not in ("datasets", "data"):
                yield from _tooltips(v)
    elif isinstance(node, list):
        for v in node:
            yield from _tooltips(v)


def test_tooltips_use_the_project_formats(page):
    name, _, ctx = page
    n = 0
    for s in ctx["sections"]:
        for fg in s["figures"]:
            spec = fg["spec"]
            if spec is None:
                continue
            values = charts._inline_values(spec, {})
            for t in _tooltips(spec):
                if t.get("type") != "quantitative":
                    continue
                n += 1
                assert t.get("format") in fmt.D3_FORMATS, f"{name} {fg['id']}: tooltip {t.get('field')} {t}"
                if t["format"] == fmt.D3_FORMAT and t.get("field") in values:
                    assert fmt.d3_format(values[t["field"]]) == fmt.D3_FORMAT, \
                        f"{name} {fg['id']}: {t['field']} has values below 1e-4 shown with {fmt.D3_FORMAT}"
    assert n > 0


def test_tooltip_format_follows_fmt_rules():
    spec = {"datasets": {"d": [{"p": 8.272e-25, "t": 12.5}, {"p": 0.5, "t": 3.0}]},
            "encoding": {"tooltip": [{"field": "p", "type": "quantitative", "format": fmt.D3_FORMAT},
                                     {"field": "t", "type": "quantitative", "format": fmt.D3_FORMAT}]}}
    charts.tooltip_formats(spec)
    assert [t["format"] for t in spec["encoding"]["tooltip"]] == [fmt.D3_EXP, fmt.D3_FORMAT]
    assert fmt.number(8.272e-25) == "8.272e-25"  # what d3's .3~e writes


def test_time_unit_is_shared():
    unit, factors = fmt.time_unit([("ms", [500.0, 20.0]), ("us", [5.0])])
    assert unit == "ms" and factors == {"ms": 1.0, "us": 1000.0}


def test_framework_options_follow_the_run_framework(page):
    """Advice names the run's own framework's option (DDP bucket_cap_mb on PyTorch, all_reduce_fusion_config on
    MindSpore), not the other's."""
    name, doc, ctx = page
    other = {"pytorch": "all_reduce_fusion_config", "mindspore": "bucket_cap_mb"}.get(doc.run.framework)
    for f in ctx["findings"]:
        for text in [f.get("suggestion") or ""] + [x.get("suggestion") or "" for x in f.get("symptoms") or []]:
            assert other is None or other not in text, f"{name} ({doc.run.framework}): {text}"


def test_mindinsight_device_from_its_file_names(tmp_path):
    """A MindInsight run says its device in its file names (ascend_* / gpu_*): Ascend runs are npu, a run with
    gpu_* files is never taken for Ascend (its advice would name Ascend's features)."""
    from reportgen.readers import read_run
    from reportgen.synth import MindInsightSpec, write_mindinsight_run

    asc, gpu = tmp_path / "ascend", tmp_path / "gpu"
    spec = MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=2)
    write_mindinsight_run(asc, spec)
    write_mindinsight_run(gpu, spec)
    for f in list(gpu.rglob("*")):  # MindSpore on GPU: gpu_* files, no HCCL
        if f.name.startswith("ascend_"):
            f.rename(f.with_name("gpu_" + f.name[len("ascend_"):]))
        elif f.name.startswith("hccl_raw_"):
            f.unlink()
    assert read_run(asc).device == "npu"
    assert read_run(gpu).device == "gpu"


def test_sentences_format_measured_numbers_with_fmt():
    """Every number a section or the diagnosis writes into a sentence goes through reportgen/fmt.py: an f-string's own
    format spec ({x:.3g}, {x:.2f}, {x:.0%}) is allowed only on counts ({n:,}) and constants (thresholds: th.X, UPPER_CASE names), whose
    digits are written by hand; a measured value printed that way reads 1e-05 GB/s or 0.00x where fmt says 1e-5."""
    import ast
    from pathlib import Path

    import reportgen

    root = Path(reportgen.__file__).parent
    bad = []
    for path in sorted(root.glob("sections/*.py")) + [root / "diagnosis.py", root / "summary.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.FormattedValue) or node.format_spec is None:
                continue
            spec = "".join(v.value for v in node.format_spec.values if isinstance(v, ast.Constant))
            if spec in (",", ",d", "d", "+d"):  # a count with thousands separators, as fmt.text writes integers
                continue
            names = [n for n in ast.walk(node.value) if isinstance(n, ast.Name)]
            attrs = [n for n in ast.walk(node.value) if isinstance(n, ast.Attribute)]
            constant = all(n.id.isupper() or n.id in ("th", "fc") for n in names) and \
                all(a.attr.isupper() for a in attrs)
            if not constant:
                bad.append(f"{path.name}:{node.lineno}: {ast.unparse(node.value)}")
    assert not bad, "format these with reportgen.fmt: " + "; ".join(bad)
