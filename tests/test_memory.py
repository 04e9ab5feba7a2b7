"""Memory section and the MindInsight memory readers."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from reportgen import metrics
from reportgen.model import Run
from reportgen.readers import read_run
from reportgen.readers.mindinsight_memory import parse_memory_details, parse_memory_summary
from reportgen.cli import section_options
from reportgen.sections import Options, run_sections
from reportgen.sections import memory as mem
from reportgen.synth import MindInsightSpec, write_mindinsight_run

from conftest import fixture_dir

GIB = 2**30 / 1e6


def _memory(run, options=None):
    (out,) = run_sections(run, options or Options(), only=["memory"])
    return out


def _rows(spec: dict) -> int:
    return sum(len(v) for v in (spec.get("datasets") or {}).values())


# --------------------------------------------------------------------------- readers


def test_summary_reader_units_and_bad_files(tmp_path):
    p = tmp_path / "memory_usage_summary_3.json"
    p.write_text(json.dumps({"capacity": 32, "allocations": 10, "deallocations": 10, "peak_mem": 8.5,
                             "static_mem": 2}))
    problems = []
    df = parse_memory_summary(p, 3, problems)["mi_memory_summary"]
    assert problems == []
    row = df.iloc[0]
    assert row["rank"] == 3 and row["peak_mb"] == pytest.approx(8.5 * 2**30 / 1e6)
    assert row["capacity_mb"] == pytest.approx(32 * 2**30 / 1e6) and row["static_mb"] == pytest.approx(2 * GIB)
    for text in ("{not json", "[1, 2]", json.dumps({"capacity": 32}), json.dumps({"peak_mem": "x"})):
        p.write_text(text)
        problems = []
        assert parse_memory_summary(p, 3, problems) == {}
        assert len(problems) == 1 and problems[0][0] == str(p)
    assert parse_memory_summary(tmp_path / "missing.json", 1, problems) == {}
    p.write_text(json.dumps({"peak_mem": 4, "capacity": 0}))  # capacity 0 = unknown
    assert math.isnan(parse_memory_summary(p, 0, [])["mi_memory_summary"]["capacity_mb"].iloc[0])


def test_details_reader(tmp_path):
    p = tmp_path / "memory_usage_details_1.json"
    p.write_text(json.dumps({"0": {"lines": [1.0, 2.0, "bad", 1.5], "nodes": [], "static_mem": 0.5},
                             "1": {"lines": [0.25]}, "meta": 3}))
    problems = []
    df = parse_memory_details(p, 1, problems)["mi_memory_lines"]
    assert list(df["graph"]) == ["0", "0", "0", "1"] and list(df["node_index"]) == [0, 1, 3, 0]
    assert df["mb"].tolist() == pytest.approx([1.0 * GIB, 2.0 * GIB, 1.5 * GIB, 0.25 * GIB])
    assert len(problems) == 1
    p.write_text(json.dumps({"x": 1}))
    problems = []
    assert parse_memory_details(p, 1, problems) == {} and len(problems) == 1


# --------------------------------------------------------------------------- MindInsight


def _mi_run(tmp_path, **kw):
    spec = MindInsightSpec(hosts=2, devices_per_host=4, stages=2, steps=3, **kw)
    truth = write_mindinsight_run(tmp_path, spec)
    return truth


def test_mindinsight_matches_truth(tmp_path):
    truth = _mi_run(tmp_path, layout="legacy")
    out = _memory(read_run(tmp_path))
    assert out.status == "ok", out.reason
    pr = out.analysis.tables["per_rank"].set_index("rank")
    assert sorted(pr.index) == truth["ranks"]
    for r, m in truth["memory"].items():
        assert pr.loc[r, "peak_mb"] == pytest.approx(m["peak_mem"] * 2**30 / 1e6, rel=1e-9)
        assert pr.loc[r, "capacity_mb"] == pytest.approx(m["capacity"] * 2**30 / 1e6, rel=1e-9)
        assert pr.loc[r, "peak_ratio"] == pytest.approx(m["peak_mem"] / m["capacity"], rel=1e-9)
        assert pr.loc[r, "stage"] == truth["stages"][r]
        assert pr.loc[r, "host"] == truth["hosts"][r] and pr.loc[r, "device"] == truth["devices"][r]
    # stages differ in activation memory by design; stage medians keep that from being an imbalance
    assert out.view.findings == []
    grid = out.view.figures[0]
    assert grid.id == "memory-grid" and "hosts as rows" in grid.caption


def test_near_capacity_rank_is_found(tmp_path):
    truth = _mi_run(tmp_path)
    (path,) = [p for p in tmp_path.rglob("memory_usage_summary_*.json") if p.name.endswith("_3.json")]
    data = json.loads(path.read_text())
    data["peak_mem"] = data["capacity"] * 0.95
    path.write_text(json.dumps(data))
    out = _memory(read_run(tmp_path))
    assert out.status == "ok", out.reason
    by_id = {f.id: f for f in out.view.findings}
    near = by_id["memory_near_capacity"]
    assert near.ranks == [3] and near.evidence["value"] == pytest.approx(0.95)
    assert near.evidence["reference"] == mem.NEAR_CAPACITY_RATIO
    imb = by_id["memory_imbalance"]  # far above the other ranks of stage 1
    assert imb.ranks == [3] and imb.evidence["stage"] == truth["stages"][3]
    # no host info in the flat layout: a rank strip
    assert "one cell per rank" in out.view.figures[0].caption


# --------------------------------------------------------------------------- Ascend


def test_ascend_level2_capacity_unknown_then_option():
    root = fixture_dir("ascend", "msinsight", "test", "st", "level2")
    run = read_run(root)
    out = _memory(run)
    assert out.status == "ok", out.reason
    pr = out.analysis.tables["per_rank"].set_index("rank")
    assert list(pr.index) == [0, 2]
    assert pr.loc[0, "peak_mb"] == pytest.approx(12504.285184)
    assert pr.loc[2, "peak_mb"] == pytest.approx(13291.08992)
    assert pr["source"].str.startswith("APP").all()
    assert pr["capacity_mb"].isna().all() and pr["peak_ratio"].isna().all()
    assert out.analysis.metrics["ranks_without_data"] == [1, 3]
    assert out.analysis.metrics["peak_ratio_max"] is None
    assert not any(f.id == "memory_near_capacity" for f in out.view.findings)
    doc = metrics.build(run, [out])
    rows = doc["sections"]["memory"]["tables"]["per_rank"]
    assert {"rank", "peak_mb", "capacity_mb", "peak_ratio"} <= set(rows[0])
    assert rows[0]["capacity_mb"] is None and rows[0]["peak_ratio"] is None
    metrics.dumps(doc)  # strict JSON (no NaN)

    out = _memory(read_run(root), Options({"device_memory_gb": 64}))
    pr = out.analysis.tables["per_rank"].set_index("rank")
    assert pr.loc[0, "capacity_mb"] == 64000.0
    assert pr.loc[0, "peak_ratio"] == pytest.approx(12504.285184 / 64000)
    assert pr.loc[2, "peak_ratio"] == pytest.approx(13291.08992 / 64000)
    assert (pr["capacity_source"] == "option device_memory_gb").all()


# --------------------------------------------------------------------------- Kineto


def test_kineto_capacity_from_device_properties():
    run = read_run(fixture_dir("kineto", "hta_tests_data", "tests", "data", "df_index_resolver"))
    assert len(run.table("memory_events")) == 28010
    out = _memory(run)
    assert out.status == "ok", out.reason
    pr = out.analysis.tables["per_rank"]
    assert len(pr) == 1
    row = pr.iloc[0]
    cap = run.table("device_properties")["total_memory_mb"].iloc[0]
    assert cap == pytest.approx(34089.730048)  # V100-SXM2-32GB: 31.75 GiB
    assert row["capacity_mb"] == pytest.approx(cap) and row["capacity_source"].startswith("deviceProperties")
    me = run.table("memory_events")
    peak = me[me["device_type"] == 1]["reserved_mb"].max()
    assert row["peak_mb"] == pytest.approx(peak) and row["peak_ratio"] == pytest.approx(peak / cap)
    tl = out.analysis.data["timeline"]
    # the timeline draws the memory in use (allocated), and its peak survives downsampling
    alloc = mem.in_use_series(run.table("memory_samples"))["mb"].max()
    assert alloc == pytest.approx(me[me["device_type"] == 1]["allocated_mb"].max()) and alloc < peak
    assert len(tl) <= mem.MAX_POINTS_PER_RANK and tl["mb"].max() == pytest.approx(alloc)
    assert out.analysis.metrics["timeline_trimmed"]


# --------------------------------------------------------------------------- scale, absence


def test_chart_budget_at_1024_ranks():
    n, k = 1024, 400
    rng = np.random.default_rng(0)
    ranks = np.repeat(np.arange(n), k)
    rec = pd.DataFrame({"rank": ranks, "component": "APP", "ts_ms": np.tile(np.arange(k, dtype=float), n),
                        "allocated_mb": np.nan, "reserved_mb": 1000 + rng.random(n * k) * 100, "active_mb": np.nan})
    rec.loc[rec["rank"] == 77, "reserved_mb"] *= 1.5  # one outlier
    run = Run(name="big", source_format="ascend", source_path="-", ranks=list(range(n)),
              stage_map={r: r // 512 + 1 for r in range(n)}, tables={"memory_record": rec})
    from reportgen.readers import ascend as ascend_reader

    run.tables["memory_samples"] = ascend_reader.memory_samples(run)  # the reader's APP rule -> canonical samples
    # 40 steps of 10 ms per rank: step starts drawn on the detail chart within their own budget
    run.tables["trace_steps"] = pd.DataFrame({"rank": np.repeat(np.arange(n), 40), "step": np.tile(np.arange(40), n),
                                              "start_ms": np.tile(np.arange(40) * 10.0, n),
                                              "end_ms": np.tile(np.arange(40) * 10.0 + 10, n)})
    out = _memory(run, Options({"device_memory_gb": 64}))
    assert out.status == "ok", out.reason
    assert len(out.analysis.tables["per_rank"]) == n
    figs = {f.id: f for f in out.view.figures}
    grid, line = figs["memory-grid"], figs["memory-timeline"]
    assert _rows(grid.spec) == n
    steps = out.analysis.data["detail"]["steps"]
    assert steps["rank"].nunique() == mem.MAX_DETAIL_RANKS and len(steps) <= mem.STEP_RULES_TOTAL
    # every rank selectable, within budget (lines + peak marks + step rules)
    assert _rows(figs["memory-detail"].spec) <= mem.MAX_DETAIL_ROWS + mem.MAX_DETAIL_RANKS + mem.STEP_RULES_TOTAL
    assert out.analysis.data["detail"]["detail"]["rank"].nunique() == mem.MAX_DETAIL_RANKS
    assert _rows(line.spec) <= mem.MAX_CHART_ROWS
    tl = out.analysis.data["timeline"]
    assert tl["rank"].nunique() <= mem.MAX_LINE_RANKS and 77 in set(tl["rank"])
    assert tl.groupby("rank").size().max() <= mem.MAX_POINTS_PER_RANK
    assert "Trimmed" in line.caption
    imb = [f for f in out.view.findings if f.id == "memory_imbalance"]
    assert imb and imb[0].ranks == [77]


def test_unavailable_names_sources():
    run = Run(name="x", source_format="kineto", source_path="-", ranks=[0])
    out = _memory(run, section_options(run))  # the registry's provenance, as the CLI hands it over
    assert out.status == "unavailable"
    for word in ("memory_usage_summary", "memory_record", "profile_memory"):
        assert word in out.reason


def test_downsample_keeps_peaks():
    s = pd.DataFrame({"rank": np.repeat([0, 1], 1000), "x": np.tile(np.arange(1000.0), 2),
                      "mb": np.concatenate([np.sin(np.arange(1000)), np.arange(1000.0)])})
    d = mem.downsample(s, 50)
    assert d.groupby("rank").size().max() <= 50
    assert d.groupby("rank")["mb"].max().tolist() == pytest.approx(s.groupby("rank")["mb"].max().tolist())
    small = s[s["x"] < 10]
    assert len(mem.downsample(small, 50)) == len(small)


def test_downsampled_lines_keep_their_keys():
    """downsample_lines takes each line's (rank, series, counter) by level: the rows, order and dtypes the keys gave
    one by one (ranks as ints, also from floats; text and numeric series as they were); a rank that is not a finite
    number raises as int() does."""
    rng = np.random.default_rng(6)
    for ranks, counters in (([0, 1, 2], ["allocated", "reserved"]), ([0.0, 3.0], [1, 2])):
        n = 600
        lines = pd.DataFrame({"rank": rng.choice(ranks, n), "x": rng.uniform(0, 100, n),
                              "series": rng.choice(["cuda:0", "cuda:1"], n), "counter": rng.choice(counters, n),
                              "mb": rng.uniform(0, 10, n)})
        got = mem.downsample_lines(lines, 20)
        gid, uniq = pd.factorize(pd.MultiIndex.from_arrays([lines["rank"].to_numpy(), lines["series"].to_numpy(),
                                                            lines["counter"].to_numpy()]))
        d = mem.downsample(pd.DataFrame({"rank": gid, "x": lines["x"].to_numpy(), "mb": lines["mb"].to_numpy()}), 20)
        keys = uniq[d["rank"].to_numpy()]
        want = pd.DataFrame({"rank": [int(k[0]) for k in keys], "x": d["x"].to_numpy(), "series": [k[1] for k in keys],
                             "counter": [k[2] for k in keys], "mb": d["mb"].to_numpy()})
        pd.testing.assert_frame_equal(got, want, check_exact=True)
    for bad in (np.nan, np.inf):
        lines = pd.DataFrame({"rank": [0.0, bad], "x": [1.0, 2.0], "series": "s", "counter": "c", "mb": [1.0, 2.0]})
        with pytest.raises((ValueError, OverflowError)):
            mem.downsample_lines(lines, 20)


def test_line_ids_number_the_lines_pandas_groups():
    """line_ids: one id per (rank, series, counter), in order of first appearance, as pandas groups them; the lines
    with every key named are pandas' groups (count and sizes), and the ids downsample as the keys do."""
    rng = np.random.default_rng(9)
    n = 500
    lines = pd.DataFrame({"rank": rng.choice([0, 1, 5], n), "x": rng.uniform(0, 100, n),
                          "series": pd.array(rng.choice(["cuda:0", "cuda:1", None], n), dtype="str"),
                          "counter": rng.choice(["allocated", "reserved"], n), "mb": rng.uniform(0, 10, n)})
    gid = mem.line_ids(lines)
    by = ["rank", "series", "counter"]
    want = lines.groupby(by, sort=False, dropna=False).ngroup().to_numpy()
    assert (gid == want).all()
    named = lines[by].notna().all(axis=1).to_numpy()
    sizes = np.bincount(gid[named])
    assert sorted(sizes[sizes > 0].tolist()) == sorted(lines.groupby(by).size().tolist())
    pd.testing.assert_frame_equal(mem.downsample_lines(lines, 20, gid), mem.downsample_lines(lines, 20),
                                  check_exact=True)


def test_mindinsight_details_give_a_line_per_rank(tmp_path):
    _mi_run(tmp_path)
    for p in tmp_path.rglob("memory_usage_summary_*.json"):
        rid = p.stem.rsplit("_", 1)[1]
        lines = [0.5 + 0.01 * i for i in range(700)]
        (p.parent / f"memory_usage_details_{rid}.json").write_text(
            json.dumps({"0": {"lines": lines, "nodes": [], "static_mem": 0.5}, "1": {"lines": [1.0, 2.0]}}))
    run = read_run(tmp_path)
    assert len(run.table("mi_memory_lines")) == 8 * 702
    out = _memory(run)
    assert out.status == "ok", out.reason
    tl = out.analysis.data["timeline"]
    assert tl["rank"].nunique() == 8 and tl.groupby("rank").size().max() <= mem.MAX_POINTS_PER_RANK
    assert tl["mb"].max() == pytest.approx((0.5 + 0.01 * 699) * GIB)
    assert out.view.figures[1].id == "memory-timeline" and "node" in out.analysis.metrics["timeline_x"]


def test_forward_backward_marks_on_the_memory_line(tmp_path):
    _mi_run(tmp_path)
    for p in tmp_path.rglob("memory_usage_summary_*.json"):
        rid = p.stem.rsplit("_", 1)[1]
        (p.parent / f"memory_usage_details_{rid}.json").write_text(json.dumps(
            {"0": {"lines": [0.5, 1.0, 2.0, 1.0], "fp_start": 1, "bp_end": 3},
             "1": {"lines": [0.5, 0.7], "fp_start": 0, "bp_end": 1}}))
    out = _memory(read_run(tmp_path))
    marks = out.analysis.data["marks"]
    r0 = marks[marks["rank"] == 0].sort_values("x")
    # graph 1 follows graph 0's four nodes
    assert list(zip(r0["x"], r0["mark"])) == [(1.0, "forward start"), (3.0, "backward end"),
                                              (4.0, "forward start"), (5.0, "backward end")]
    fig = next(f for f in out.view.figures if f.id == "memory-timeline")
    assert "layer" in fig.spec and "forward start" in fig.caption.lower().replace("marks ", "")


# --------------------------------------------------------------------------- host memory (a CPU run)


def _host_samples(peaks: dict[int, float], kind: str = "host", series: str = "host (CPU) total allocated",
                  n: int = 50, reserved: float = 0.0, device_id: float = float("nan")) -> pd.DataFrame:
    """A rank's running total allocated rising to ``peak`` and back, in steps (reserved 0: the CPU allocator)."""
    parts = []
    for r, peak in peaks.items():
        mb = peak * np.concatenate([np.linspace(0.5, 1.0, n // 2), np.linspace(1.0, 0.5, n - n // 2)])
        parts.append(pd.DataFrame({"rank": r, "ts_ms": np.arange(n, dtype=float) * 10 + r, "kind": kind,
                                   "device_id": device_id, "series": series, "allocated_mb": mb,
                                   "reserved_mb": reserved if reserved == 0 else mb + reserved,
                                   "active_mb": np.nan, "capacity_mb": np.nan, "capacity_source": None}))
    return pd.concat(parts, ignore_index=True)


def _samples_run(samples: pd.DataFrame, stages: dict | None = None) -> Run:
    ranks = sorted(int(r) for r in samples["rank"].unique())
    return Run(name="t", source_format="", source_path="-", ranks=ranks, stage_map=stages or {},
               tables={"memory_samples": samples})


def _texts(out) -> list[str]:
    """Every text a reader of the section sees: summary, notes, titles, captions, axis titles, finding messages."""
    v = out.view
    texts = [v.summary, *v.notes, *(f.message for f in v.findings)]
    for fig in v.figures:
        texts += [fig.title, fig.caption or "", fig.alt or "", json.dumps(fig.spec, default=str)]
    for t in v.tables:
        texts += [t.title, t.caption or ""]
    return texts


CLEAN_HOST = {0: 23.603724, 1: 25.96302, 2: 23.865868, 3: 25.700876}  # clean 4-rank CPU run's host peaks (MB)


def test_host_only_run_is_analysed_as_host_memory():
    extra = 1.5 * 2**30 / 1e6  # rank 3 holds an extra 1.5 GiB through each step
    run = _samples_run(_host_samples({**CLEAN_HOST, 3: CLEAN_HOST[3] + extra}))
    out = _memory(run)
    assert out.status == "ok", out.reason
    m, pr = out.analysis.metrics, out.analysis.tables["per_rank"].set_index("rank")
    assert m["memory_kind"] == "host" and "host memory" in m["peak_definition"]
    assert pr.loc[3, "peak_mb"] == pytest.approx(CLEAN_HOST[3] + extra)  # the peak of total allocated
    assert pr.loc[0, "peak_mb"] == pytest.approx(CLEAN_HOST[0])
    assert (pr["source"] == "host (CPU) total allocated").all()
    assert pr["capacity_mb"].isna().all() and pr["peak_ratio"].isna().all()  # the machine's RAM is not invented
    (imb,) = out.view.findings  # no capacity: no headroom finding
    assert imb.id == "memory_imbalance" and imb.ranks == [3]
    ref = float(np.median(list(CLEAN_HOST.values())[:3] + [CLEAN_HOST[3] + extra]))
    ev = imb.evidence
    assert ev["metric"] == "peak_mb" and ev["memory"] == "host"
    assert ev["value"] == pytest.approx(CLEAN_HOST[3] + extra) and ev["reference"] == pytest.approx(ref)
    assert ev["cause"] == {"kind": "memory", "ranks": [3], "link": None, "stage": None}
    assert "rank 3" in imb.message and "host memory" in imb.message
    assert "1.636 GB" in imb.message and "24.91 MB" in imb.message  # the peak and the median
    # every title, axis, caption and finding says host memory; none says device memory
    texts = _texts(out)
    assert not any("device memory" in t.lower() for t in texts), [t for t in texts if "device memory" in t.lower()]
    figs = {f.id: f for f in out.view.figures}
    grid, line = figs["memory-grid"], figs["memory-timeline"]
    assert "host memory" in figs["memory-detail"].title.lower()
    assert "host memory" in grid.title.lower() and "host memory" in line.title.lower()
    assert "Host memory" in json.dumps(line.spec, default=str) and "host memory" in out.view.summary.lower()
    assert "host memory" in out.view.tables[0].title.lower()
    tl = out.analysis.data["timeline"]
    assert tl.groupby("rank")["mb"].max().loc[3] == pytest.approx(CLEAN_HOST[3] + extra)
    metrics.dumps(metrics.build(run, [out]))  # strict JSON, the nested cause included

    # a capacity only from the option; the headroom rule then speaks of host memory
    out = _memory(run, Options({"device_memory_gb": 1.7}))
    near = next(f for f in out.view.findings if f.id == "memory_near_capacity")
    assert near.ranks == [3] and "of host memory" in near.message and near.evidence["memory"] == "host"
    assert (out.analysis.tables["per_rank"]["capacity_source"] == "option device_memory_gb").all()


def test_host_imbalance_within_stage_peers():
    peaks = {0: 100.0, 1: 104.0, 2: 98.0, 3: 101.0, 4: 300.0, 5: 310.0, 6: 295.0, 7: 900.0}
    out = _memory(_samples_run(_host_samples(peaks), stages={r: r // 4 for r in peaks}))
    (imb,) = out.view.findings  # stage 1 legitimately holds 3x stage 0: only rank 7 is out of line
    assert imb.ranks == [7] and imb.evidence["stage"] == 1 and imb.evidence["reference"] == pytest.approx(305.0)
    assert imb.evidence["cause"]["ranks"] == [7]


def test_clean_host_spread_raises_nothing():
    # the spread of the clean CPU runs (up to 11.8 % from the median) stays under the 20 % threshold
    out = _memory(_samples_run(_host_samples({0: 26.487308, 1: 24.652304, 2: 21.637648, 3: 24.39016})))
    assert out.status == "ok" and out.view.findings == []
    # 40 % off but 4 MB: a few MB are no memory problem whatever the ratio
    out = _memory(_samples_run(_host_samples({0: 10.0, 1: 10.2, 2: 9.9, 3: 14.0})))
    assert out.analysis.tables["per_rank"]["peak_mb"].max() == pytest.approx(14.0)
    assert out.view.findings == []
    assert mem.IMBALANCE_MIN_MB == 64.0 and mem.IMBALANCE_RATIO == 0.2


def test_host_series_with_reserved_peaks_at_reserved():
    out = _memory(_samples_run(_host_samples({0: 100.0, 1: 100.0}, series="host (CPU) total reserved",
                                             reserved=50.0)))
    assert out.analysis.tables["per_rank"]["peak_mb"].tolist() == pytest.approx([150.0, 150.0])
    assert "total reserved" in out.analysis.metrics["peak_definition"]


def test_device_stays_the_subject_beside_host():
    dev = _host_samples({0: 1000.0, 1: 1010.0, 2: 990.0, 3: 1005.0}, kind="device",
                        series="CUDA device 0 total reserved", reserved=200.0, device_id=0.0)
    host = _host_samples({0: 50.0, 1: 50.0, 2: 50.0, 3: 5000.0})  # a host outlier: not the subject
    out = _memory(_samples_run(pd.concat([host, dev], ignore_index=True)))
    assert out.status == "ok", out.reason
    pr = out.analysis.tables["per_rank"]
    assert out.analysis.metrics["memory_kind"] == "device"
    assert (pr["source"] == "CUDA device 0 total reserved").all()
    assert pr["peak_mb"].tolist() == pytest.approx([1200.0, 1210.0, 1190.0, 1205.0])
    assert out.view.findings == []
    assert out.view.summary.startswith("Peak device memory") and "host" not in out.view.figures[0].title.lower()
    # a device outlier is the finding, and says device memory
    dev.loc[dev["rank"] == 2, "reserved_mb"] *= 3
    out = _memory(_samples_run(pd.concat([host, dev], ignore_index=True)))
    (imb,) = out.view.findings
    assert imb.ranks == [2] and imb.evidence["memory"] == "device" and "device memory" in imb.message
    assert imb.evidence["cause"] == {"kind": "memory", "ranks": [2], "link": None, "stage": None}


def test_host_samples_without_any_total_are_unavailable():
    s = _host_samples({0: 10.0, 1: 12.0}).assign(allocated_mb=np.nan, reserved_mb=np.nan)
    out = _memory(_samples_run(s))
    assert out.status == "unavailable" and "host memory only" in out.reason


def test_cpu_memory_events_name_their_total():
    """The reader's rule: the CPU allocator caches nothing (Total Reserved stays 0), its memory in use is Total
    Allocated, and the series says so."""
    from reportgen.readers import kineto

    ev = pd.DataFrame({"rank": [0, 0, 1, 1, 1], "ts_ms": [0.0, 1.0, 0.0, 1.0, 2.0], "device_type": [0, 0, 0, 0, 1],
                       "device_id": [-1, -1, -1, -1, 0], "allocated_mb": [5.0, 7.0, 5.0, 6.0, 1.0],
                       "reserved_mb": [0.0, 0.0, 0.0, 8.0, 2.0]})
    ms = kineto.memory_samples(ev, None)
    assert ms["series"].tolist() == ["host (CPU) total allocated"] * 2 + ["host (CPU) total reserved"] * 2 + [
        "CUDA device 0 total reserved"]
    assert ms["capacity_mb"].isna().all()
    assert ms["kind"].tolist() == ["host"] * 4 + ["device"] and ms["capacity_source"].isna().all()
    # one text object per distinct value, not one per sample (millions of samples at thousands of ranks); a column
    # that pandas stores in Arrow is compact by itself (and makes new objects on every read)
    if "pyarrow" not in str(getattr(ms["kind"].dtype, "storage", "")):
        assert len({id(x) for x in ms["kind"].to_numpy()}) == 2 and len({id(x) for x in ms["series"].to_numpy()}) == 3


# --------------------------------------------------------------------------- memory detail: operators, peak holders


def _ops(rows):
    return pd.DataFrame(rows, columns=["rank", "name", "size_mb", "alloc_ms", "release_ms", "duration_ms"])


def test_allocations_alive_at_the_peak():
    nan = float("nan")
    ops = _ops([(0, "a", 10.0, 0.0, 5.0, 5.0),     # released before the peak at 6
                (0, "b", 30.0, 1.0, 9.0, 8.0),     # alive
                (0, "c", 20.0, 6.0, nan, nan),     # allocated at the peak, never released: alive
                (0, "d", 5.0, 2.0, 6.0, 4.0),      # released exactly at the peak: gone
                (0, "e", 50.0, 7.0, 8.0, 1.0),     # after the peak
                (1, "x", 7.0, 0.0, 1.0, 1.0)])
    times = pd.DataFrame({"rank": [0, 1], "peak_ms": [6.0, 0.5]})
    alive = mem.alive_at(ops, times)
    r0 = alive[alive["rank"] == 0]
    assert r0["name"].tolist() == ["b", "c"]  # largest first
    assert r0["share"].tolist() == pytest.approx([0.6, 0.4])
    assert alive[alive["rank"] == 1]["name"].tolist() == ["x"]


def test_holders_add_up_to_the_memory_at_the_peak():
    """The holders chart lists the top operators, then the other operators summed and the memory no operator
    allocation accounts for: each rank's bars add up to its memory in use at the peak (st/level2 rank 2 listed
    6.83 of 11.34 GB and said nothing of the rest)."""
    held = pd.DataFrame({"rank": [0, 0, 0, 1], "name": ["a", "b", "c", "x"], "mb": [50.0, 30.0, 20.0, 7.0],
                         "n": [2, 1, 1, 1]})
    shown = held.groupby("rank").head(2)
    times = pd.DataFrame({"rank": [0, 1], "peak_ms": [6.0, 0.5], "peak_at_mb": [130.0, 7.0]})
    out = mem.with_unlisted(shown, held, times)
    r0 = out[out["rank"] == 0].set_index("name")["mb"]
    assert r0.to_dict() == {"a": 50.0, "b": 30.0, mem.OTHER_HOLDERS: 20.0, mem.UNATTRIBUTED: 30.0}
    assert r0.sum() == 130.0
    assert out[out["rank"] == 1]["name"].tolist() == ["x"]  # all listed, nothing unaccounted


def test_peak_time_from_allocated_samples_else_from_the_allocations():
    nan = float("nan")
    ms = pd.DataFrame({"rank": [0, 0, 0, 0], "ts_ms": [0.0, 1.0, 2.0, 3.0], "kind": "device",
                       "series": ["APP", "APP", "PTA", "PTA"], "allocated_mb": [nan, nan, 40.0, 90.0],
                       "reserved_mb": [100.0, 100.0, 95.0, 95.0]})
    # rank 1 has no samples: the sweep over its allocations finds where most is alive together
    ops = _ops([(1, "a", 10.0, 0.0, 4.0, 4.0), (1, "b", 30.0, 1.0, 3.0, 2.0), (1, "c", 25.0, 3.0, 5.0, 2.0),
                (1, "d", 1.0, 4.0, nan, nan)])
    t = mem.peak_times(ms, ops).set_index("rank")
    assert t.loc[0, "peak_ms"] == 3.0 and t.loc[0, "peak_at_mb"] == 90.0 and "PTA" in t.loc[0, "peak_from"]
    # live: t0 10, t1 40, t3 (b released first) 35, t4 26 -> peak at 1 ms holding 40 MB
    assert t.loc[1, "peak_ms"] == 1.0 and t.loc[1, "peak_at_mb"] == pytest.approx(40.0)


def test_operator_aggregation_top_n_and_rest():
    ops = _ops([(0, "mm", 10.0, 0.0, 2.0, 2.0), (0, "mm", 30.0, 1.0, 9.0, 8.0), (0, "add", 5.0, 0.0, 1.0, 1.0),
                (0, "cat", 4.0, 0.0, 1.0, 1.0), (0, "cast", 1.0, 0.0, float("nan"), float("nan"))])
    s = mem.operator_summary(ops).set_index("name")
    assert s.loc["mm", "allocations"] == 2 and s.loc["mm", "total_mb"] == 40.0 and s.loc["mm", "max_mb"] == 30.0
    assert s.loc["mm", "longest_ms"] == 8.0 and s.loc["mm", "mean_ms"] == 5.0
    top = mem.top_with_rest(s.reset_index(), "total_mb", 2, {"allocations": "sum", "total_mb": "sum",
                                                            "max_mb": "max", "longest_ms": "max", "mean_ms": "mean"})
    assert top["name"].tolist() == ["mm", "add", "(other 2 operators)"]
    rest = top.iloc[-1]
    assert rest["allocations"] == 2 and rest["total_mb"] == 5.0 and rest["max_mb"] == 4.0
    assert top["total_mb"].sum() == pytest.approx(ops["size_mb"].sum())  # nothing lost


def test_ascend_allocator_is_detail_only_and_the_peak_stays_app():
    from reportgen.readers import ascend as ascend_reader

    nan = float("nan")
    rec = pd.DataFrame({"rank": [0] * 5, "component": ["APP", "APP", "PTA", "PTA", "PTA+GE"],
                        "ts_ms": [0.0, 20.0, 1.0, 2.0, 1.0], "allocated_mb": [nan, nan, 10.0, 500.0, 10.0],
                        "reserved_mb": [1000.0, 1000.0, 2000.0, 2000.0, 2000.0],  # allocator above APP: not the peak
                        "active_mb": [nan, nan, 10.0, 500.0, 10.0]})
    run = Run(name="a", source_format="ascend", source_path="-", ranks=[0], tables={"memory_record": rec})
    ms = ascend_reader.memory_samples(run)
    assert ms["detail_only"].tolist() == [False, False, True]
    assert set(ms.loc[ms["detail_only"], "series"]) == {"PTA+GE allocator (framework)"}  # PTA+GE before PTA
    run.tables["memory_samples"] = ms
    out = _memory(run)
    assert out.status == "ok", out.reason
    assert out.analysis.tables["per_rank"]["peak_mb"].tolist() == [1000.0]
    lines = out.analysis.data["detail"]["detail"]
    assert set(lines["counter"]) == {"allocated", "reserved"}  # active = allocated: one line


def test_level2_memory_detail_and_operator_tables():
    root = fixture_dir("ascend", "msinsight", "test", "st", "level2")
    run = read_run(root)
    out = _memory(run)
    assert out.status == "ok", out.reason
    csv = pd.read_csv(root / "rank_0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv")
    ops = run.table("operator_memory")
    assert (ops["rank"] == 0).sum() == len(csv) == 3103
    largest = csv["Size(KB)"].max() * 1024 / 1e6  # KB = KiB in the file, MB = 10^6 B
    t = out.analysis.tables
    r0 = t["operator_memory"][t["operator_memory"]["rank"] == 0]
    assert r0["max_mb"].max() == pytest.approx(largest)
    assert r0.loc[r0["max_mb"].idxmax(), "name"] == csv.loc[csv["Size(KB)"].idxmax(), "Name"]
    assert r0["total_mb"].sum() == pytest.approx(csv["Size(KB)"].sum() * 1024 / 1e6)  # top-N + rest = all
    # the curve is the framework allocator's, not the flat APP line: it rises and falls by gigabytes
    det = out.analysis.data["detail"]["detail"]
    alloc = det[(det["rank"] == 0) & (det["counter"] == "allocated")]
    assert alloc["mb"].max() - alloc["mb"].min() > 5000
    app = det[(det["rank"] == 0) & det["series"].str.startswith("APP")]
    assert app["mb"].max() - app["mb"].min() < 1  # why the old line was flat
    # what holds memory at rank 0's peak: the allocations alive then, largest first, inside the allocated total
    pr = t["per_rank"].set_index("rank")
    alive = t["alive_at_peak"][t["alive_at_peak"]["rank"] == 0]
    assert alive["size_mb"].is_monotonic_decreasing and len(alive) == mem.MAX_OPS_PER_RANK
    peak_at = float(out.analysis.data["detail"]["peak_times"].set_index("rank").loc[0, "peak_at_mb"])
    assert 0 < pr.loc[0, "alive_mb"] <= peak_at
    held = mem.alive_at(ops[ops["size_mb"].notna()], pd.DataFrame({"rank": [0], "peak_ms": [pr.loc[0, "alloc_peak_ms"]]}))
    by_name = held.groupby("name")["size_mb"].sum()
    assert pr.loc[0, "top_holder"] == by_name.idxmax() and pr.loc[0, "top_holder_mb"] == pytest.approx(by_name.max())
    assert alive.iloc[0]["name"] == "npu::npu_fusion_attention_grad"  # the largest single one: the peak's own
    assert ((alive["alloc_ms"] <= pr.loc[0, "alloc_peak_ms"]) & (alive["release_ms"] > pr.loc[0, "alloc_peak_ms"])).all()
    figs = {f.id: f for f in out.view.figures}
    assert {"memory-detail", "memory-holders"} <= set(figs)
    assert out.view.controls[0].signal == "mem_rank" and {o[0] for o in out.view.controls[0].options} == {0, 2}
    assert {tb.id for tb in out.view.tables} >= {"memory-alive", "memory-operators"}
    # every memory-over-time line draws the memory in use (the allocator's allocated), not the flat APP reserved:
    # the timeline on the run clock (the detail's clock) and the drill-down / Marey line of rank 2
    m = out.analysis.metrics
    assert m["timeline_series"] == ["PTA+GE allocator (framework) · allocated"] and "run clock" in m["timeline_x"]
    tl = out.analysis.data["timeline"]
    for r, g in tl.groupby("rank"):
        assert g["mb"].max() - g["mb"].min() > 1000
        assert g["mb"].max() == pytest.approx(pr.loc[r, "alloc_peak_mb"])
        d = det[(det["rank"] == r) & (det["counter"] == "allocated")]
        assert g["x"].min() == pytest.approx(d["x"].min(), abs=5)  # one clock for both charts
    from reportgen.sections import drilldown
    lines, used = drilldown.rank_step_lines(run, [2])
    line = lines[(lines["rank"] == 2) & (lines["metric"] == "memory_mb")]["value"]
    assert line.max() - line.min() > 1000
    # the table names both peaks: the reserved peak of the process (capacity-relevant) and the allocated peak
    assert m["peak_label"] == "Reserved peak (process)"
    cols = {c.key: c.label for c in out.view.tables[0].columns}
    assert cols["peak_mb"] == "Reserved peak (process)" and cols["alloc_peak_mb"] == "Allocated peak"
    assert pr.loc[2, "peak_mb"] == pytest.approx(13291.08992)
    assert pr.loc[2, "alloc_peak_mb"] == pytest.approx(11343.561216)
    assert "held by operators at the allocated peak" in cols["alive_mb"].lower()


def test_demo_memory_per_graph_node_with_marks_for_every_rank(tmp_path):
    """The generated MindSpore run with memory_usage_details: the detail chart draws each rank's node curve (static,
    rising through the forward pass to the summary's peak, falling through the backward pass) with its marks."""
    spec = MindInsightSpec(hosts=1, devices_per_host=4, stages=2, steps=2, memory_details=True)
    truth = write_mindinsight_run(tmp_path, spec)
    out = _memory(read_run(tmp_path))
    assert out.status == "ok", out.reason
    det = out.analysis.data["detail"]
    lines = det["detail"]
    assert sorted(lines["rank"].unique()) == [0, 1, 2, 3]
    for r, g in lines.groupby("rank"):
        g = g.sort_values("x")
        top = int(g["mb"].to_numpy().argmax())
        assert 0 < top < len(g) - 1  # rises, then falls
        assert g["mb"].max() == pytest.approx(truth["memory"][r]["peak_mem"] * GIB, rel=1e-6)
    figs = {f.id: f for f in out.view.figures}
    spec_text = json.dumps(figs["memory-detail"].spec)
    assert "mem_rank" in spec_text and "forward start" in spec_text
    assert out.view.controls[0].signal == "mem_rank" and len(out.view.controls[0].options) == 4


def test_step_rules_overlap_the_drawn_samples_and_are_evenly_sampled():
    lines = pd.DataFrame({"rank": [0, 0, 1, 1], "x": [10.0, 50.0, 0.0, 5000.0], "series": "s", "counter": "allocated",
                          "mb": 1.0})
    win = pd.DataFrame({"rank": [0, 0, 0, 0, 3], "step": [1, 2, 3, 4, 1], "start_ms": [0.0, 20.0, 40.0, 60.0, 0.0],
                        "end_ms": [9.0, 40.0, 60.0, 80.0, 9.0]})
    # rank 0: step 1 ends before the first sample, step 4 starts after the last; rank 3 is not a detail rank
    rules, sampled = mem.step_rules(win, lines, [0, 1])
    assert rules[["rank", "step", "x"]].values.tolist() == [[0, "2", 20.0], [0, "3", 40.0]] and not sampled
    many = pd.DataFrame({"rank": 1, "step": range(1000), "start_ms": np.arange(1000) * 5.0,
                         "end_ms": np.arange(1000) * 5.0 + 5})
    rules, sampled = mem.step_rules(many, lines, [0, 1])
    assert sampled and len(rules) == mem.MAX_STEP_RULES_PER_RANK and rules["x"].iloc[0] == 0.0
    assert rules["x"].diff().dropna().nunique() == 1  # evenly spaced: every 5th step
    assert mem.step_rules(None, lines, [0]) == (None, False)


def test_memory_detail_zooms_in_x_and_marks_step_starts():
    from reportgen import charts

    run = read_run(fixture_dir("generated", "torch_gloo_ddp4_baseline"))
    out = _memory(run)
    fig = next(f for f in out.view.figures if f.id == "memory-detail")
    charts.validate(fig.spec)
    layers = fig.spec["layer"]
    zoom = [p for p in layers[0].get("params", []) if p["name"] == "memory_detail_zoom"]
    assert zoom and zoom[0]["bind"] == "scales" and zoom[0]["select"]["encodings"] == ["x"]
    rules = [ly for ly in layers if ly["mark"].get("type") == "rule" and any(
        t.get("title") == "Step starts" for t in ly["encoding"]["tooltip"])]
    assert len(rules) == 1
    steps = out.analysis.data["detail"]["steps"]
    assert set(steps["rank"]) == set(out.analysis.data["detail"]["detail_ranks"])
    assert steps.groupby("rank").size().min() >= 2  # several steps per rank in this run
    assert "double-click to reset" in fig.caption


def test_line_names_per_series_keep_a_missing_series_missing():
    import pandas as pd

    from reportgen.sections.memory import _line_name

    out = _line_name(pd.Series(["PTA memory pool total reserved", "host (CPU) total allocated", "x", None, "x"]),
                     "allocated")
    assert list(out[:3]) == ["PTA memory pool · allocated", "host (CPU) total allocated", "x · allocated"]
    assert pd.isna(out[3]) and out[4] == "x · allocated"
