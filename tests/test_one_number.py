"""One quantity, one number (issue 28 #2): a quantity shown in two places of a page has one value there.

* The run-wide shares of the step (computing, exposed communication, free) come from one formula
  (``overlap.comm_shares``): the summary, the overlap section and every finding that quotes one read the same value,
  and the page writes the same text for it in the first paragraph and in the overlap section.
* A finding's evidence value for a metric its section also reports is that metric's value.
* Summed waiting that exceeds the step is said to be a sum over overlapping operations wherever it is shown next to
  the step (time overview, communication summary).
"""

from __future__ import annotations

import html
import json
import re

import pytest

from conftest import fixture_dir
from reportgen import fmt

PAGES = {
    "demo": None,
    "pp2x4": ("mindinsight", "mi_cluster_propose_pp2x4"),
    "level2": ("ascend", "msinsight", "test", "st", "level2"),
    "gloo_ddp4": ("generated", "torch_gloo_ddp4_baseline"),
}
#: summary key -> the overlap section's metric it copies
SHARES = {"exposed_comm_share_ratio": "comm_share_ratio", "computing_share_ratio": "computing_share_ratio",
          "free_share_ratio": "free_share_ratio"}


def _page(report_cache, name):
    src = "demo" if PAGES[name] is None else fixture_dir(*PAGES[name])
    out = report_cache.get(src)
    return out, json.loads(out.with_suffix(".json").read_text())


def _text(path) -> str:
    s = path.read_text()
    s = re.sub(r"<script.*?</script>", " ", s, flags=re.S)
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", s)))


@pytest.mark.parametrize("name", list(PAGES))
def test_run_wide_shares_have_one_value(report_cache, name):
    out, doc = _page(report_cache, name)
    summary, ov = doc["summary"], doc["sections"]["overlap"]["metrics"]
    for key, metric in SHARES.items():
        if key == "computing_share_ratio" and summary.get("computing_includes_free"):
            metric = "computation_incl_free_share_ratio"
        if key in summary or metric in ov:
            assert summary.get(key) == ov.get(metric), f"{name}: summary {key} vs overlap {metric}"
    # the page writes it once: the first paragraph's exposed communication = the overlap section's
    text = _text(out)
    first = re.search(r"exposed communication (\d[\d.]*%)", text)
    assert first, "the summary names the exposed communication share"
    assert first.group(1) == fmt.percent(summary["exposed_comm_share_ratio"])
    assert f"Pure (exposed) communication is {first.group(1)}" in text, name
    # every finding quoting a run-wide share quotes that value
    for f in doc["findings"]:
        ev = f.get("evidence") or {}
        if ev.get("metric") in ("comm_share_ratio", "free_share_ratio"):
            assert ev["value"] == ov[ev["metric"]], f"{name}: finding {f['id']}"


@pytest.mark.parametrize("name", list(PAGES))
def test_finding_evidence_equals_its_sections_metric(report_cache, name):
    _, doc = _page(report_cache, name)
    checked = 0
    for f in doc["findings"] + [s for f in doc["findings"] for s in f.get("symptoms", [])]:
        ev = f.get("evidence") or {}
        sec = doc["sections"].get(f.get("section"), {}).get("metrics", {})
        v = sec.get(ev.get("metric"))
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            assert ev["value"] == pytest.approx(v, rel=1e-12), f"{name}: {f['id']} {ev['metric']}"
            checked += 1
    assert checked or not doc["findings"] or name != "gloo_ddp4"


def test_summed_waiting_above_the_step_says_why(report_cache):
    """pp2x4: ranks 0 and 1 wait 267 ms summed over their operations in a 179 ms step. The time overview and the
    communication summary say that the sum counts overlapping operations, and where the step's share is."""
    out, doc = _page(report_cache, "pp2x4")
    text = _text(out)
    step = doc["facts"]["step_ms_median"] if "step_ms_median" in doc["facts"] else doc["summary"]["step_ms_median"]
    pr = doc["sections"]["communication"]["tables"]["per_rank"]
    assert max(r["comm_op_ms"] for r in pr) > step  # the case: a sum above the step
    assert "so the summed waiting exceeds the step" in text
    assert "These are sums over operations, which overlap" in text
    assert "exposed communication" in text.split("These are sums over operations")[1][:400]
    # the legend names the sum, not "Waiting, mean over ranks"
    html_s = out.read_text()
    assert "Waiting (sum over operations), mean over ranks" in html_s and "Waiting, mean over ranks" not in html_s
