"""CI use: --baseline (run directory or metrics JSON) and --fail-on (exit code 3, report still written)."""

from __future__ import annotations

import json

import pytest

from reportgen import cli


def test_baseline_from_metrics_json_and_fail_on(tmp_path, pp2x4, report_cache):
    base = report_cache.get(pp2x4).with_suffix(".json")  # pp2x4's metrics, built once per worker (conftest.ReportCache)
    out, js = tmp_path / "r.html", tmp_path / "r.json"
    rc = cli.main(["demo", "-o", str(out), "--json", str(js), "--baseline", str(base),
                   "--fail-on", "step_ms.median>1.01*baseline", "--fail-on", "step_ms.median>1e9", "--quiet"])
    assert rc == 3 and out.exists()  # the report is still written for the CI artifact
    doc = json.loads(js.read_text())
    rows = {r["metric"]: r for r in doc["baseline"]["headline"]}
    assert rows["step_ms.median"]["delta_ratio"] == pytest.approx(
        rows["step_ms.median"]["value"] / rows["step_ms.median"]["baseline"] - 1)
    assert doc["fail_on"] == [f"step_ms.median>1.01*baseline: step_ms.median = "
                              f"{rows['step_ms.median']['value']:.6g} vs {1.01 * rows['step_ms.median']['baseline']:.6g}"]
    assert "Compared with the baseline" in out.read_text()


def test_baseline_from_a_run_directory_and_per_rank_deltas(tmp_path, pp2x4):
    js = tmp_path / "r.json"
    rc = cli.main([str(pp2x4), "-o", str(tmp_path / "r.html"), "--json", str(js), "--baseline", str(pp2x4),
                   "--fail-on", "step_ms.median>1.0001*baseline", "--quiet"])
    assert rc == 0
    doc = json.loads(js.read_text())
    assert all(r["delta_ratio"] == 0 for r in doc["baseline"]["per_rank_step_ms"])
    assert len(doc["baseline"]["per_rank_step_ms"]) == 4


def test_severity_condition(tmp_path, pp2x4):
    rc = cli.main([str(pp2x4), "-o", str(tmp_path / "r.html"), "--fail-on", "finding.severity>=high", "--quiet"])
    assert rc == 3  # pp2x4 has high findings (pipeline between/within stage, slow link, stage FLOPs)


@pytest.mark.parametrize("expr", ["nonsense", "step_ms.median>abc", "unknown_metric>1", "finding.severity>=huge"])
def test_bad_fail_on_is_a_usage_error(tmp_path, pp2x4, expr):
    rc = cli.main([str(pp2x4), "-o", str(tmp_path / "r.html"), "--fail-on", expr, "--quiet"])
    assert rc == 2


def test_baseline_expression_needs_a_baseline(tmp_path, pp2x4, capsys):
    rc = cli.main([str(pp2x4), "-o", str(tmp_path / "r.html"), "--fail-on", "step_ms.median>baseline", "--quiet"])
    assert rc == 2 and "--baseline" in capsys.readouterr().err and not (tmp_path / "r.html").exists()


def test_run_summary_paragraph_and_metrics(report_cache):
    out = report_cache.get("demo")  # cli.main(["demo", ...]) == 0, once per worker (conftest.ReportCache)
    js = out.with_suffix(".json")
    s = json.loads(js.read_text())["summary"]
    assert s["ranks"] == 16 and s["hosts"] == 4 and s["stages"] == 2
    assert s["computing_share_ratio"] + s["exposed_comm_share_ratio"] == pytest.approx(1.0, abs=1e-9)
    html = out.read_text()
    assert "16 ranks on 4 hosts (pipeline-parallel, 2 stages). Median step time" in html


def test_fail_on_reason_names_the_first_finding_whole_or_cut_at_a_word():
    """Issue 31 #4: the reason was cut at 160 characters mid-word ("...groups' ope")."""
    from reportgen.compare import check_fail_on

    long = ("Rank 7 is the straggler: every collective of the data-parallel groups waits " + "for it " * 60).strip()
    doc = {"findings": [{"severity": "high", "message": long}, {"severity": "medium", "message": "later"}]}
    reason = check_fail_on("finding.severity>=medium", doc, None)
    assert reason.startswith("finding.severity>=medium: 2 finding(s), first: Rank 7 is the straggler: every")
    assert reason.endswith("for it…") and len(reason) < 460
    short = {"findings": [{"severity": "high", "message": "Data loader wait 31% of the step on rank 3."}]}
    assert check_fail_on("finding.severity>=high", short, None).endswith("on rank 3.")
