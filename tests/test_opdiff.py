"""Operator-level run diff (``--baseline``; reportgen/opdiff.py): per step, largest change first, ops in one run
listed, the same diff from a baseline directory and from its metrics JSON."""

from __future__ import annotations

import json
from pathlib import Path

from reportgen import cli, opdiff

DIAG = Path(__file__).parent / "data" / "diagnosis"


def _doc(rank_type, names=(), comm=(), steps=(1, 2, 3, 4)):
    """A metrics document holding only what the diff reads: the operators section's tables."""
    return {"run": {"steps": list(steps)}, "sections": {"operators": {"status": "ok", "tables": {
        "rank_type_ops": [{"rank": r, "type": t, "engine": "AI_CORE", "count": c, "total_ms": ms,
                           "per_step_ms": ms / n} for r, t, c, ms, n in rank_type],
        "type_name_ops": [{"type": t, "name": nm, "count": c, "total_ms": ms} for t, nm, c, ms in names],
        "comm_type_ops": [{"rank": r, "op_type": t, "count": c, "total_ms": ms} for r, t, c, ms in comm]}}}}


def test_slower_type_first_per_step_and_added_removed():
    # baseline: 4 steps per rank; this run: 2 steps per rank (per step compares)
    base = _doc([(0, "MatMul", 8, 40.0, 4), (1, "MatMul", 8, 40.0, 4), (0, "Add", 4, 8.0, 4), (1, "Add", 4, 8.0, 4),
                 (0, "Cast", 4, 4.0, 4), (1, "Cast", 4, 4.0, 4)],
                names=[("MatMul", "mm_1", 16, 80.0), ("Cast", "cast_1", 8, 8.0)],
                comm=[(0, "allreduce", 4, 20.0), (1, "allreduce", 4, 20.0)])
    now = _doc([(0, "MatMul", 4, 20.0, 2), (1, "MatMul", 6, 50.0, 2), (0, "Add", 2, 4.0, 2), (1, "Add", 2, 4.0, 2),
                (0, "Gelu", 2, 3.0, 2), (1, "Gelu", 2, 3.0, 2)],
               names=[("MatMul", "mm_1", 10, 70.0), ("Gelu", "gelu_1", 4, 6.0)],
               comm=[(0, "allreduce", 2, 10.0), (1, "allreduce", 4, 30.0)], steps=(1, 2))
    d = opdiff.diff(now, base)
    top = d["types"][0]
    # MatMul: now (20 + 50) / (2 + 2) = 17.5 ms per step per rank, baseline 80 / 8 = 10 -> +7.5
    assert top["type"] == "MatMul" and abs(top["delta_per_step_ms"] - 7.5) < 1e-9
    assert abs(top["delta_ratio"] - 0.75) < 1e-9 and abs(top["delta_per_step_count"] - (10 / 4 - 16 / 8)) < 1e-9
    add = next(r for r in d["types"] if r["type"] == "Add")
    assert abs(add["delta_per_step_ms"]) < 1e-9  # 2 ms per step in both: no change although totals halved
    r0 = d["rank_types"][0]
    assert (r0["rank"], r0["type"]) == (1, "MatMul") and abs(r0["delta_per_step_ms"] - 15.0) < 1e-9  # 25 - 10
    assert d["added"]["types"] == ["Gelu"] and d["removed"]["types"] == ["Cast"]
    assert d["added"]["names"] == ["gelu_1"] and d["removed"]["names"] == ["cast_1"]
    assert {r["status"] for r in d["types"]} == {"both", "only_now", "only_baseline"}
    comm = d["comm_types"][0]
    assert comm["op_type"] == "allreduce" and abs(comm["delta_per_step_ms"] - (40 / 4 - 40 / 8)) < 1e-9
    assert [abs(r["delta_per_step_ms"]) for r in d["rank_types"]] == sorted(
        (abs(r["delta_per_step_ms"]) for r in d["rank_types"]), reverse=True)


def test_no_operator_tables_no_diff():
    assert opdiff.diff({"sections": {}}, _doc([(0, "A", 1, 1.0, 1)])) is None


def test_slowrank4_vs_clean4_names_the_slow_ranks_compute(tmp_path):
    """slowrank4 injects extra compute on rank 3 (truth.json): its compute op types are the top increases. A
    baseline given as the --json of the baseline run gives the same diff as its directory."""
    truth = json.loads((DIAG / "slowrank4" / "truth.json").read_text())["truth"]
    base_json = tmp_path / "clean4.json"
    assert cli.main([str(DIAG / "clean4"), "-o", str(tmp_path / "c.html"), "--json", str(base_json), "-q"]) == 0
    out = {}
    for how, base in (("dir", DIAG / "clean4"), ("json", base_json)):
        js = tmp_path / f"{how}.json"
        assert cli.main([str(DIAG / "slowrank4"), "-o", str(tmp_path / f"{how}.html"), "--json", str(js), "-q",
                         "--baseline", str(base)]) == 0
        out[how] = json.loads(js.read_text())["baseline"]["ops"]
    assert out["dir"] == out["json"]
    ops = out["dir"]
    first = ops["rank_types"][0]
    assert [first["rank"]] == truth["ranks"] and first["delta_per_step_ms"] > 0
    assert first["type"] in ("aten::matmul", "aten::mm", "aten::mul")  # the injected compute
    assert all(r["rank"] == truth["ranks"][0] for r in ops["rank_types"][:3])
    html = (tmp_path / "json.html").read_text()
    assert "Operators: what changed since the baseline" in html and 'data-opdiff="rank_types"' in html
    # one unit per column: in the header, never in a cell (no row in µs beside a row in ms)
    import re
    for table in re.findall(r'<table class="rg-data rg-opdiff".*?</table>', html, flags=re.S):
        head = re.search(r"<thead>(.*?)</thead>", table, flags=re.S).group(1)
        assert re.search(r"Δ time per step \((ns|µs|ms|s|min|h)\)", head), head
        body = re.search(r"<tbody>(.*?)</tbody>", table, flags=re.S).group(1)
        assert not re.search(r"\d (ns|µs|ms|s)<", body), body[:300]


def test_comm_per_step_uses_the_communication_steps():
    """comm_type_ops' own per_step_ms (steps in scope with communication ops) gives the comm diff's steps, not the
    compute rows' steps."""
    def doc(comm_ms, comm_steps):
        d = _doc([(0, "MatMul", 4, 40.0, 4)])
        d["sections"]["operators"]["tables"]["comm_type_ops"] = [
            {"rank": 0, "op_type": "allreduce", "count": 2, "total_ms": comm_ms, "per_step_ms": comm_ms / comm_steps}]
        return d

    d = opdiff.diff(doc(30.0, 2), doc(20.0, 2))
    assert abs(d["comm_types"][0]["per_step_ms"] - 15.0) < 1e-9 and abs(d["comm_types"][0]["delta_per_step_ms"]
                                                                           - 5.0) < 1e-9
