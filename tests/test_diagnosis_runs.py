"""Issue 26, the compact subset of the diagnosis benchmark (bench/diagnosis): real PyTorch CPU + gloo runs made by
bench/diagnosis/train_diag.py (small model, 4 profiled steps) and trimmed by bench/diagnosis/trim.py, with their
ground truth. The first finding names the injected cause at its place; the clean run raises no high finding and at
most one low one. The full benchmark (more runs, both layouts, holdout runs) is bench/diagnosis.py."""

import json
from pathlib import Path

import pytest

from reportgen.cli import main

DATA = Path(__file__).parent / "data" / "diagnosis"
RUNS = sorted(p.name for p in DATA.iterdir() if (p / "truth.json").exists())


def _report(tmp_path: Path, name: str) -> dict:
    out = tmp_path / "m.json"
    assert main([str(DATA / name), "-o", str(tmp_path / "r.html"), "--json", str(out), "-q"]) == 0
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", RUNS)
def test_first_finding_is_the_injected_cause(tmp_path, name):
    truth = json.loads((DATA / name / "truth.json").read_text())["truth"]
    m = _report(tmp_path, name)
    fs = m["findings"]
    if truth is None:
        assert not [f for f in fs if f["severity"] != "low"], [(f["id"], f["severity"]) for f in fs]
        assert len(fs) <= 1
        assert m["sections"]["waits"]["metrics"]["causes"] == []
        return
    first = fs[0]
    cause = first["cause"]
    assert cause["kind"] == truth["cause"], (first["id"], first["message"])
    if truth.get("link"):
        assert cause["link"] == truth["link"] and first["links"] == [truth["link"]]
    else:
        assert cause["ranks"] == truth["ranks"] and first["ranks"] == truth["ranks"]
    assert first["severity"] == "high" and cause["confidence_ratio"] >= 0.75
    # the page's first words are the cause, with the link to the view that proves it
    html = (tmp_path / "r.html").read_text()
    top = html[html.index('<header id="rg-top"'):html.index("</header>")]
    assert 'id="rg-verdict"' in top and "Cause:" in top and "See the proof" in top
    assert f'href="#{first["figure"]}"' in top
