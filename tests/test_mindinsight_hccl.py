"""hccl_raw_{rank}.csv: both unit generations against MindInsight 2.3.1 / MindSpore, and bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from reportgen.readers.mindinsight_hccl import COLUMNS, parse_hccl_raw

from conftest import fixture_dir, reference_file

TOL = 1e-9
HEADER = "step_num,communication_cost,wait_cost,link_info,communication_operator_cost"


def _parse(path: Path, rank: int = 0) -> tuple[dict, list]:
    problems: list = []
    return parse_hccl_raw(path, rank, problems), problems


def _cell(obj) -> str:
    return '"' + json.dumps(obj).replace('"', '""') + '"'


def _write(tmp_path: Path, text: str, name: str = "hccl_raw_0.csv") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


def _links_at(tables: dict, step: int) -> list[list]:
    """Step-level link rows of one step, in file order, as MindInsight lists them (KB, bandwidth as written)."""
    lk = tables["links"]
    lk = lk[(lk["step"] == step) & lk["op"].isna()]
    return [[f"{a}-{b}", t, ms, mb, bw] for a, b, t, ms, mb, bw in
            zip(lk["src_local"], lk["dst_local"], lk["transport"], lk["time_ms"], lk["size_mb"], lk["bandwidth_gbps"])]


def _same_links(ours: list[list], theirs: list[list], bw_to_gbps: float) -> None:
    assert len(ours) == len(theirs)
    for (pair, tr, t, mb, gbps), (r_pair, r_tr, r_t, r_kb, r_bw) in zip(ours, theirs):
        assert (pair, tr) == (r_pair, r_tr)
        assert t == pytest.approx(r_t, rel=TOL, abs=TOL)
        assert mb == pytest.approx(r_kb / 1e3, rel=TOL, abs=TOL)
        assert gbps == pytest.approx(r_bw * bw_to_gbps, rel=TOL, abs=TOL)


# --------------------------------------------------------------------------- <= 2.1: pp2x4 vs MindInsight


@pytest.fixture(scope="module")
def pp2x4_parsed() -> dict[int, dict]:
    root = fixture_dir("mindinsight", "mi_cluster_propose_pp2x4")
    out = {}
    for rank in range(4):
        res, problems = _parse(root / f"hccl_raw_{rank}.csv", rank)
        assert problems == []
        out[rank] = res
    return out


@pytest.fixture(scope="module")
def pp2x4_ref() -> dict:
    return json.loads(reference_file("mindinsight", "mi_cluster_propose_pp2x4", "as_shipped.json").read_text())


def test_pp2x4_generation_and_shapes(pp2x4_parsed):
    for rank, res in pp2x4_parsed.items():
        assert res["generation"] == "<=2.1"
        t = res["tables"]
        assert set(t) == set(COLUMNS)
        for name, df in t.items():
            assert list(df.columns) == COLUMNS[name] and (df["rank"] == rank).all()
        assert t["comm_rank_step"]["step"].tolist() == ([1, 2, 3, 4, 5, 6] if rank < 2 else [1, 2])
        assert t["comm_rank_avg"]["avg_kind"].tolist() == ["mean"]
        # 97 operators in steps 1-5, 15 in the partial step 6 (ranks 0/1)
        if rank < 2:
            assert t["comm_ops"].groupby("step").size().tolist() == [97] * 5 + [15]


def test_pp2x4_costs_equal_mindinsight(pp2x4_parsed, pp2x4_ref):
    for step in (0, 1, 2):
        comm = pp2x4_ref[f"cluster_hccl.query(step_id={step})"]["result"]["communication"]
        assert sorted(c["rank_id"] for c in comm) == [0, 1, 2, 3]
        for c in comm:
            t = pp2x4_parsed[c["rank_id"]]["tables"]
            if step == 0:
                row = t["comm_rank_avg"].iloc[0]
            else:
                df = t["comm_rank_step"]
                row = df[df["step"] == step].iloc[0]
            cost, wait = c["communication_info"][:2]
            assert abs(row["comm_ms"] - cost) <= TOL and abs(row["wait_ms"] - wait) <= TOL, (step, c["rank_id"])


def test_pp2x4_links_equal_mindinsight(pp2x4_parsed, pp2x4_ref):
    """get_cluster_link_info = every rank's link_info flattened in the query's rank order (no de-duplication)."""
    for step in (0, 1, 2):
        order = [c["rank_id"] for c in pp2x4_ref[f"cluster_hccl.query(step_id={step})"]["result"]["communication"]]
        theirs = pp2x4_ref[f"cluster_hccl.get_cluster_link_info(step_id={step})"]["result"]["cluster_link_info"]
        ours = [row for r in order for row in _links_at(pp2x4_parsed[r]["tables"], -1 if step == 0 else step)]
        _same_links(ours, theirs, 1e-6)


def test_pp2x4_step_bandwidth_is_a_sum_of_op_bandwidths(pp2x4_parsed):
    lk = pp2x4_parsed[0]["tables"]["links"]
    row = lk[(lk["step"] == 1) & lk["op"].isna() & (lk["src_local"] == 1) & (lk["dst_local"] == 0)].iloc[0]
    assert row["bandwidth_gbps"] == pytest.approx(217.03115047579023)  # 217031150.5 KB/s as written
    assert row["bandwidth_sizetime_gbps"] == pytest.approx(52.70681599999999 / 2.5209099999999998)  # ~20.9
    per_op = lk[(lk["step"] == 1) & lk["op"].notna() & (lk["src_local"] == 1) & (lk["dst_local"] == 0)]
    assert per_op["bandwidth_gbps"].sum() == pytest.approx(row["bandwidth_gbps"], rel=1e-9)
    assert per_op["bandwidth_gbps"].to_numpy() == pytest.approx(per_op["bandwidth_sizetime_gbps"].to_numpy(), rel=1e-9)
    ops = pp2x4_parsed[0]["tables"]["comm_ops"]
    op = ops[(ops["step"] == 1) & (ops["op"] == "stream_41_0_AllReduce-op4582")].iloc[0]
    assert (op["comm_ms"], op["wait_ms"]) == (0.00322, 0.01035)


# --------------------------------------------------------------------------- <= 2.1: MindSpore's UT expectation


def test_ms_ut_hccl_dev6_expected():
    path = fixture_dir("mindinsight", "ms_ut_hccl_dev6", "profiler", "expected") / "hccl_raw_6.csv"
    res, problems = _parse(path, 6)
    assert problems == [] and res["generation"] == "<=2.1"
    t = res["tables"]
    s1 = t["comm_rank_step"].set_index("step").loc[1]
    assert abs(s1["comm_ms"] - 4.51637) <= TOL and abs(s1["wait_ms"] - 4e-05) <= TOL
    lk = t["links"]
    l10 = lk[(lk["step"] == 1) & lk["op"].isna() & (lk["src_local"] == 1) & (lk["dst_local"] == 0)]
    assert len(l10) == 1
    l10 = l10.iloc[0]
    assert l10["transport"] == "SDMA" and math.isnan(l10["rdma_wait_ms"])
    assert abs(l10["time_ms"] - 4.36566) <= TOL and abs(l10["size_mb"] - 94.356992) <= TOL
    assert l10["bandwidth_gbps"] == pytest.approx(21.61345409399724, rel=1e-12)
    assert t["comm_ops"]["op"].tolist() == ["stream_24_0_AllReduce-op3143"] * 2
    assert t["comm_rank_avg"].iloc[0]["comm_ms"] == pytest.approx(4.517815, rel=1e-12)


# --------------------------------------------------------------------------- 2.2+: AscendHCCLGenerator output


def test_prof_2dev_dp_is_2_2_plus_and_equals_mindinsight_over_1e3():
    root = reference_file("mindinsight", "prof_2dev_dp", "cluster_dir")
    ref = json.loads(reference_file("mindinsight", "prof_2dev_dp", "mindinsight_results.json").read_text())
    parsed = {}
    for rank in (0, 1):
        res, problems = _parse(root / f"hccl_raw_{rank}.csv", rank)
        assert problems == [] and res["generation"] == "2.2+"
        parsed[rank] = res["tables"]
        steps = res["tables"]["comm_rank_step"]
        assert steps["step"].tolist() == list(range(1, 11))
        avg = res["tables"]["comm_rank_avg"].iloc[0]
        last = steps.iloc[-1]
        assert avg["avg_kind"] == "last step"
        assert (avg["comm_ms"], avg["wait_ms"]) == (last["comm_ms"], last["wait_ms"])
        assert _links_at(res["tables"], -1) == _links_at(res["tables"], 10)
    for step in range(0, 11):
        for c in ref[f"cluster_hccl.query(step_id={step})"]["result"]["communication"]:
            t = parsed[c["rank_id"]]
            row = t["comm_rank_avg"].iloc[0] if step == 0 else t["comm_rank_step"].set_index("step").loc[step]
            cost_us, wait_us = c["communication_info"][:2]  # MindInsight prints the µs as they are
            assert abs(row["comm_ms"] - cost_us / 1e3) <= TOL and abs(row["wait_ms"] - wait_us / 1e3) <= TOL
        order = [c["rank_id"] for c in ref[f"cluster_hccl.query(step_id={step})"]["result"]["communication"]]
        theirs = ref[f"cluster_hccl.get_cluster_link_info(step_id={step})"]["result"]["cluster_link_info"]
        ours = [row for r in order for row in _links_at(parsed[r], -1 if step == 0 else step)]
        _same_links(ours, theirs, 1.0)  # already GB/s
    # op costs are µs too
    ops = parsed[0]["comm_ops"].set_index("step")
    assert ops.loc[1, "op"] == "AllReduce-op534_0" and abs(ops.loc[1, "comm_ms"] - 27.026050000000003) <= TOL


# --------------------------------------------------------------------------- variants and bad input


LINKS_OLD = {"1-0": {"SDMA": [2.0, 40000.0, 20000000.0]}, "0-0": {"SDMA": [0.1, 500.0, 5000000.0]}}


def _old_file(rows: int = 2, ops: bool = True, avg_cell: str | None = None) -> str:
    lines = [HEADER if ops else HEADER.rsplit(",", 1)[0]]
    for s in range(1, rows + 1):
        cells = [str(s), "2.1", str(10.0 * s), _cell(LINKS_OLD)]
        if ops:
            cells.append(_cell({"stream_1_0_AllReduce-op1": [str(s), 2.1, 10.0 * s, LINKS_OLD]}))
        lines.append(",".join(cells))
    avg = ["-", "2.1", str(5.0 * (rows + 1)), _cell(LINKS_OLD)]
    if ops:
        avg.append(avg_cell or _cell({"stream_1_0_AllReduce-op1": ["-", 2.1, 5.0 * (rows + 1), LINKS_OLD]}))
    lines.append(",".join(avg))
    return "\r\n".join(lines) + "\r\n"


def test_legacy_four_columns(tmp_path):
    res, problems = _parse(_write(tmp_path, _old_file(ops=False)))
    assert problems == [] and res["generation"] == "<=2.1"
    assert set(res["tables"]) == {"comm_rank_step", "comm_rank_avg", "links"}
    assert res["tables"]["links"]["op"].isna().all()


def test_python_literal_average_operator_cell(tmp_path):
    """MindSpore's first HcclParser wrote the '-' row's operator cell with str(dict): [cost, wait, links]."""
    literal = '"' + str({"stream_1_0_AllReduce-op1": [2.1, 15.0, LINKS_OLD]}).replace('"', '""') + '"'
    res, problems = _parse(_write(tmp_path, _old_file(avg_cell=literal)))
    assert problems == []
    lk = res["tables"]["links"]
    assert len(lk[(lk["step"] == -1) & (lk["op"] == "stream_1_0_AllReduce-op1")]) == 2
    assert res["tables"]["comm_ops"]["step"].tolist() == [1, 2]  # the '-' row's operators are not per-step rows


def test_rdma_wait_and_nested_rdma_list(tmp_path):
    links = {"0-8": {"RDMA": [3.0, 3000.0, 1000000.0, 0.5]}, "0-0": {"SDMA": [1.0, 2000.0, 2000000.0]}}
    nested = {"0-8": {"RDMA": [[3.0, 3000.0, 1.0, 0.5]]}, "0-0": {"SDMA": [1.0, 2000.0, 2.0]}, "9-0": {}}
    text = "\n".join([HEADER.rsplit(",", 1)[0], "1,4.0,0.5," + _cell(links), "-,4.0,0.5," + _cell(links)]) + "\n"
    res, problems = _parse(_write(tmp_path, text))
    assert problems == [] and res["generation"] == "<=2.1"
    rdma = res["tables"]["links"].query("transport == 'RDMA'")
    assert rdma["rdma_wait_ms"].tolist() == [0.5, 0.5] and rdma["bandwidth_gbps"].tolist() == [1.0, 1.0]
    # 2.2+ writes one RDMA thread as [[...]]; costs in µs
    text = "\n".join([HEADER.rsplit(",", 1)[0], "1,4000.0,500.0," + _cell(nested), "-,4000.0,500.0,{}"]) + "\n"
    res, problems = _parse(_write(tmp_path, text, "n.csv"))
    assert problems == [] and res["generation"] == "2.2+"
    assert res["tables"]["comm_rank_step"]["comm_ms"].tolist() == [4.0]
    rdma = res["tables"]["links"].query("transport == 'RDMA'").iloc[0]
    assert (rdma["time_ms"], rdma["size_mb"], rdma["bandwidth_gbps"], rdma["rdma_wait_ms"]) == (3.0, 3.0, 1.0, 0.5)


def test_cells_beyond_the_csv_field_limit(tmp_path):
    ops = {f"stream_1_{i}_AllReduce-op{i}": ["1", 0.01, 0.0, LINKS_OLD] for i in range(2000)}
    text = HEADER + "\n1,20.0,0.0," + _cell(LINKS_OLD) + "," + _cell(ops) + "\n-,20.0,0.0,{},{}\n"
    assert len(text) > 131072
    res, problems = _parse(_write(tmp_path, text))
    assert problems == [] and len(res["tables"]["comm_ops"]) == 2000


def test_truncated_last_line(tmp_path):
    full = _old_file(rows=3)
    cut_in_ops = full[: full.rindex("stream_1_0") + 5]  # inside the '-' row's operator JSON
    res, problems = _parse(_write(tmp_path, cut_in_ops))
    assert res["tables"]["comm_rank_step"]["step"].tolist() == [1, 2, 3]
    assert res["tables"]["comm_rank_avg"]["wait_ms"].tolist() == [20.0]
    assert len(problems) == 1 and "truncated" in problems[0][1]
    cut_in_wait = full[: full.rindex("-,2.1,2") + 6]  # "-,2.1,2" of "-,2.1,20.0,...": a cut number
    res, problems = _parse(_write(tmp_path, cut_in_wait, "b.csv"))
    assert "comm_rank_avg" not in res["tables"] and len(res["tables"]["comm_rank_step"]) == 3
    assert any("truncated" in p for _, p in problems)


def test_every_cut_of_a_real_file_is_safe(tmp_path):
    text = (fixture_dir("mindinsight", "ms_ut_hccl_dev6", "profiler", "expected") / "hccl_raw_6.csv").read_bytes()
    p = tmp_path / "cut.csv"
    for n in range(0, len(text), 3):
        p.write_bytes(text[:n])
        problems: list = []
        res = parse_hccl_raw(p, 6, problems)
        assert res["generation"] in ("<=2.1", "2.2+")
        if n < len(text) - 2:
            assert problems, n
        steps = res["tables"].get("comm_rank_step")
        if steps is not None:  # never a cut number: whatever is kept is the file's value
            assert set(steps["comm_ms"]) <= {4.51637, 4.519260000000001}


def test_invalid_json_and_non_numeric_cells(tmp_path):
    lines = _old_file(rows=3).split("\r\n")
    lines[1] = "1,2.1,10.0,{not json},\"[1, 2]\""
    lines[2] = lines[2].replace("2,2.1,20.0", "2,fast,20.0", 1)
    lines[3] = "x" + lines[3]
    res, problems = _parse(_write(tmp_path, "\r\n".join(lines)))
    t = res["tables"]
    assert t["comm_rank_step"]["step"].tolist() == [1]  # 2 has a non-numeric cost, "x3" is no step
    assert sorted(t["links"]["step"].unique().tolist()) == [-1, 2]  # step 2's links are still fine
    text = " | ".join(p for _, p in problems)
    for what in ("invalid JSON in link_info", "not a JSON object", "not a number", "step_num"):
        assert what in text


def test_missing_columns_empty_and_garbage(tmp_path):
    cases = {
        "nocol.csv": "step_num,communication_cost,link_info\n1,2.0,{}\n",
        "empty.csv": "",
        "header.csv": HEADER + "\n",
    }
    for name, text in cases.items():
        res, problems = _parse(_write(tmp_path, text, name))
        assert res["tables"] == {} and problems, name
    (tmp_path / "bin.csv").write_bytes(b"\x00\xff\xfe" * 100 + b"\n\x89PNG,\x00")
    res, problems = _parse(tmp_path / "bin.csv")
    assert res["tables"] == {} and problems
    res, problems = _parse(tmp_path / "missing.csv")
    assert res["tables"] == {} and "cannot read" in problems[0][1]


def test_undetermined_generation_is_said(tmp_path):
    res, problems = _parse(_write(tmp_path, HEADER + "\n1,2.0,3.0,{},{}\n-,2.0,3.0,{},{}\n"))
    assert res["generation"] == "<=2.1" and res["tables"]["comm_rank_step"]["comm_ms"].tolist() == [2.0]
    assert len(problems) == 1 and "do not tell" in problems[0][1]


def test_conflicting_evidence_is_said(tmp_path):
    """GB/s bandwidths (2.2+) but a cost of ms size (<= 2.1): the bandwidth relation decides, the conflict is listed."""
    links = {"0-1": {"SDMA": [2.0, 40000.0, 20.0]}}
    text = "\n".join([HEADER.rsplit(",", 1)[0], "1,2.0,1.0," + _cell(links), "-,2.0,1.0," + _cell(links)]) + "\n"
    res, problems = _parse(_write(tmp_path, text))
    assert res["generation"] == "2.2+" and res["tables"]["comm_rank_step"]["comm_ms"].tolist() == [0.002]
    assert len(problems) == 1 and "bandwidth / (size/time)" in problems[0][1] and "communication_cost" in problems[0][1]
