"""The metrics file's contract (../shared/docs/metrics-json.md): the keys it fixes stay, whatever the sections add
(issue 25 named the two communication quantities apart; the contract's ``comm_ms`` keys stay beside them)."""

from __future__ import annotations

import json

import pytest

from test_golden import FIXTURES, GOLDEN

#: (section, table) -> the columns the contract requires when the section is ok (the ones every source has)
REQUIRED = {
    ("overlap", "per_rank"): ["rank", "computing_ms", "comm_ms", "comm_not_overlapped_ms"],
    ("communication", "per_rank"): ["rank", "comm_ms", "wait_ms", "wait_ratio"],
    ("execution", "time_overview"): ["step", "rank", "step_ms", "comm_ms", "wait_ms"],
    ("trajectory", "per_rank_step"): ["rank", "step", "step_ms"],
    ("memory", "per_rank"): ["rank", "peak_mb", "capacity_mb", "peak_ratio"],
}


@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_contract_keys_stay(name):
    doc = json.loads((GOLDEN / f"{name}.json").read_text())
    assert set(doc) >= {"schema", "tool", "run", "sections", "findings"}
    for (sid, table), cols in REQUIRED.items():
        sec = doc["sections"].get(sid, {})
        rows = sec.get("tables", {}).get(table) if sec.get("status") == "ok" else None
        if isinstance(rows, dict) and "digest" in rows:  # a big table kept as its digest (test_golden.table_digest)
            rows = [dict.fromkeys(rows["digest"]["columns"])]
        if rows:
            missing = [c for c in cols if c not in rows[0]]
            assert not missing, f"{name}: sections.{sid}.tables.{table} lacks {missing}"


def test_contract_comm_ms_is_the_named_quantity():
    doc = json.loads((GOLDEN / "kineto_gloo_ddp4.json").read_text())
    ov = doc["sections"]["overlap"]["tables"]["per_rank"]
    co = doc["sections"]["communication"]["tables"]["per_rank"]
    assert all(r["comm_ms"] == r["comm_busy_ms"] for r in ov)
    assert all(r["comm_ms"] == r["comm_op_ms"] for r in co)
