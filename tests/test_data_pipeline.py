"""Data pipeline (issue 17 part 3): waiting for input per rank, the MindSpore dataset pipeline's operations and the
one that holds it back (generated profiles with a known bottleneck: no public sample exists)."""

from __future__ import annotations

import pytest

from reportgen.readers import read_run
from reportgen.cli import section_options
from reportgen.sections import run_sections
from reportgen.synth.kineto import KinetoSpec, write_kineto_run
from reportgen.synth.mindinsight import MindInsightSpec, write_mindinsight_run


def _data(path):
    run = read_run(path)
    outs = {o.id: o for o in run_sections(run, section_options(run))}  # with the registry's hints
    o = outs["data"]
    assert o.status == "ok", o.reason
    return run, o, outs


@pytest.mark.parametrize("op", ["Map", "Batch", "Shuffle", "ImageFolder"])
def test_the_bottleneck_op_is_found(op, tmp_path):
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=4, stages=1, steps=3,
                                                    minddata_bottleneck=op))
    run, o, _ = _data(tmp_path)
    ops = o.analysis.tables["pipeline_ops"]
    assert len(ops) == 4 * len(run.ranks)
    assert set(ops.loc[ops["bottleneck"], "op_type"]) == {op}
    (f,) = [f for f in o.view.findings if f.id == "data_pipeline_bottleneck"]
    assert f.ranks == sorted(run.ranks) and op in f.message
    want = {"Map": "num_parallel_workers", "Batch": "num_parallel_workers", "Shuffle": "buffer_size",
            "ImageFolder": "MindRecord"}[op]
    assert want in f.suggestion and "prefetch" in f.suggestion


def test_clean_pipeline_has_no_bottleneck(tmp_path):
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=4, stages=1, steps=3,
                                                    with_minddata=True))
    _, o, outs = _data(tmp_path)
    assert o.analysis.metrics["bottleneck_ops"] == 0
    assert not [f for oo in outs.values() if oo.view for f in oo.view.findings if f.id == "data_pipeline_bottleneck"]
    # the waiting per rank is the step interval the trajectory shows
    tr = outs["trajectory"].analysis.tables["per_rank_step"]
    pr = o.analysis.tables["per_rank"].set_index("rank")["wait_ms"]
    for r, g in tr.groupby("rank"):
        assert pr[r] == pytest.approx(g[g["step"].isin(o.analysis.tables["per_rank_step"]["step"])]
                                      ["step_interval_ms"].mean())


def test_pytorch_dataloader_waits(tmp_path):
    write_kineto_run(tmp_path, KinetoSpec(hosts=2, devices_per_host=2, stages=1, steps=3, slow_hosts={1: 0.2}))
    run, o, _ = _data(tmp_path)
    assert o.analysis.metrics["wait_measure"].startswith("DataLoader")
    pr = o.analysis.tables["per_rank"]
    slow = {r for r in run.ranks if run.host_of(r) == sorted(set(run.hosts.values()))[1]}
    assert set(pr.head(len(slow))["rank"]) == slow  # the slow host's ranks wait longest


def test_broken_profile_rows_are_named_not_fatal(tmp_path):
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=2,
                                                    minddata_bottleneck="Map"))
    f = next(tmp_path.rglob("minddata_pipeline_raw_0.csv"))
    text = f.read_text()
    f.write_text(text.replace("\r\n1,Map,", "\r\nx,Map,", 1) + "9,Odd,1,[],5,10,250,1,0,\"\"\r\n")
    g = next(tmp_path.rglob("minddata_pipeline_raw_1.csv"))
    g.write_text("no,header,here\r\n1,2,3\r\n")
    run, o, _ = _data(tmp_path)
    probs = [p.problem for p in run.problems if "minddata" in p.path]
    assert any("row(s)" in p for p in probs) and any("not a minddata_pipeline_raw" in p for p in probs)
    ops = o.analysis.tables["pipeline_ops"]
    assert "Odd" not in set(ops["op_type"])  # 250 % usage is not a usage
    # rank 1's raw profile is unusable: its operations come from its pipeline summary (no queue capacity there)
    r1 = ops[ops["rank"] == 1]
    assert list(r1["op_type"]) == ["Batch", "Map", "Shuffle", "ImageFolder"] and r1["queue_capacity"].isna().all()
    assert ops[ops["rank"] == 0]["queue_capacity"].notna().all()


def test_a_huge_profile_is_skipped_unread(tmp_path, monkeypatch):
    from reportgen.readers import minddata
    monkeypatch.setattr(minddata, "MAX_FILE_BYTES", 100)
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=2,
                                                    minddata_bottleneck="Map"))
    run = read_run(tmp_path)
    assert run.table("minddata_ops") is None
    assert sum("more than a minddata_pipeline_raw file holds" in p.problem for p in run.problems) == 2


def test_ascend_rank_directories_are_searched(tmp_path):
    """A MindSpore *_ascend_ms rank directory keeps the profile in ASCEND_PROFILER_OUTPUT: the survey, which does not
    walk into rank directories, looks there."""
    from reportgen.synth.ascend import AscendSpec, write_ascend_run
    from reportgen.synth.mindinsight import _minddata_csv
    write_ascend_run(tmp_path, AscendSpec(hosts=1, devices_per_host=2, stages=1, steps=2))
    outs = sorted(tmp_path.rglob("ASCEND_PROFILER_OUTPUT"))
    assert outs
    (outs[0] / "minddata_pipeline_raw_0.csv").write_text(_minddata_csv("Batch"))
    run = read_run(tmp_path)
    ops = run.table("minddata_ops")
    assert ops is not None and set(ops["rank"]) == {0} and len(ops) == 4


# ---- issue 17 part 3, the rest: pipeline summary, device queue, dataset.csv, CPU utilisation


def _findings(outs) -> dict:
    return {f.id: f for o in outs.values() if o.view is not None for f in o.view.findings}


def test_summary_queue_and_stages_with_a_cpu_bound_map(tmp_path):
    """Generated run with a Map bottleneck: the summary's CPU per worker (92% > 75%) joins the raw profile's rows,
    the device queue was empty on 3 of 4 batches (the first batch left out), dataset.csv is read as written, and the
    findings say it once per cause with the parameter to change."""
    from reportgen.synth.mindinsight import MINDDATA_QUEUE_CAPACITY, minddata_queue_sizes

    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=4, stages=1, steps=3,
                                                    minddata_bottleneck="Map"))
    run, o, outs = _data(tmp_path)
    ops = o.analysis.tables["pipeline_ops"]
    m = ops[ops["op_type"] == "Map"]
    assert len(m) == 4 and (m["cpu_per_worker_ratio"] == 0.92).all() and m["cpu_bound"].all()
    assert m["queue_capacity"].notna().all()  # the raw profile's rows, with the summary's columns
    assert not ops.loc[ops["op_type"] == "Shuffle", "cpu_bound"].any()  # single-threaded by design
    q = o.analysis.tables["device_queue"]
    sizes = minddata_queue_sizes("Map")
    assert len(q) == 4 and (q["batches"] == len(sizes)).all() and (q["capacity"] == MINDDATA_QUEUE_CAPACITY).all()
    assert q["empty_ratio"].tolist() == pytest.approx([sum(s == 0 for s in sizes) / len(sizes)] * 4)
    assert q["batch_time_ms"].tolist() == [48.0] * 4 and q["pipeline_time_ms"].tolist() == [40.0] * 4
    st = o.analysis.tables["stages"]
    assert len(st) == 8 and st.loc[st["operation"] == "ImageFolder", "total_ms"].iloc[0] == pytest.approx(
        1280 * 120.25 / 1e3)
    ms = o.analysis.tables["profiler_summary"]
    assert set(ms["ms_bottleneck"]) == {"Map(id=1)"} and (ms["batch_time_ms"] == 48.0).all()
    f = _findings(outs)
    assert "data_queue_empty" in f and set(f["data_queue_empty"].ranks) == {0, 1, 2, 3}
    assert "Map" in f["data_queue_empty"].suggestion
    b = f["data_pipeline_bottleneck"]
    assert "92% of a core (CPU-bound" in b.message and "num_parallel_workers" in b.suggestion
    assert "data_op_cpu_bound" not in f  # the same operation is not named twice
    doc = __import__("reportgen.metrics", fromlist=["build"]).build(run, list(outs.values()))
    data = doc["sections"]["data"]
    assert {"device_queue", "profiler_summary", "stages", "pipeline_ops"} <= set(data["tables"])
    assert data["metrics"]["threshold_device_queue_empty_ratio"] == 0.6


def test_clean_pipeline_summary_raises_nothing(tmp_path):
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=3,
                                                    with_minddata=True))
    run, o, outs = _data(tmp_path)
    f = _findings(outs)
    assert not {"data_queue_empty", "data_op_cpu_bound", "data_pipeline_bottleneck"} & set(f)
    assert (o.analysis.tables["device_queue"]["empty_ratio"] == 0).all()
    assert not o.view.notes or "Not in the run" not in " ".join(o.view.notes)


def test_summary_csv_equals_the_json(tmp_path):
    """The CSV form (one row per key) gives the same rows as the JSON form."""
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=2,
                                                    minddata_bottleneck="Batch"))
    a = read_run(tmp_path)
    for f in tmp_path.rglob("minddata_pipeline_summary_*.json"):
        f.unlink()
    b = read_run(tmp_path)
    cols = ["rank", "op_id", "op_type", "queue_empty_ratio", "avg_cpu_pct", "cpu_per_worker_pct"]
    assert a.table("minddata_ops")[cols].equals(b.table("minddata_ops")[cols])
    sa, sb = a.table("minddata_summary"), b.table("minddata_summary")
    assert sa.drop(columns="source").equals(sb.drop(columns="source"))
    assert set(sb["source"].str[-4:]) == {".csv"}


def test_cpu_utilisation_file_gives_the_cpu_of_a_real_profile():
    """MindInsight's public unit-test profile has minddata_cpu_utilization_0.json but no summary: the CPU of op 1 is
    the mean of user + sys over its samples ([10,20,30] + [10,20,30] -> 40%), as MindSpore's analyzer computes it,
    and its device queue profile holds the first batch only (0 batches after it: a row, not a problem)."""
    from conftest import fixture_dir

    run = read_run(fixture_dir("mindinsight", "mi_profiler_single"))
    ops = run.table("minddata_ops").set_index("op_id")
    assert ops.loc[1, "avg_cpu_pct"] == 40.0 and ops.loc[1, "cpu_per_worker_pct"] == 40.0
    assert ops.loc[[0, 2, 3], "avg_cpu_pct"].isna().all()
    q = run.table("minddata_queue")
    assert q["batches"].tolist() == [0]
    assert not [p for p in run.problems if "device_queue" in p.path]


@pytest.mark.parametrize("damage", ["truncated", "types", "not_object", "lengths", "queue_junk", "queue_binary",
                                    "stages_columns"])
def test_broken_summary_queue_and_stages_files_are_named_not_fatal(tmp_path, damage):
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=2,
                                                    minddata_bottleneck="Map"))
    js = next(tmp_path.rglob("minddata_pipeline_summary_0.json"))
    q = next(tmp_path.rglob("device_queue_profiling_0.txt"))
    st = next(tmp_path.rglob("dataset_0.csv"))
    if damage == "truncated":
        js.write_text(js.read_text()[:150])
    elif damage == "types":
        js.write_text('{"op_ids": [0, "x", -4, 1e300], "op_names": 5, "avg_cpu_pct_per_worker": ["a", null, -1, '
                      '1e999], "per_batch_time": "fast", "bottleneck_warning": [{"x": 1}]}')
    elif damage == "not_object":
        js.write_text("[1, 2, 3]")
    elif damage == "lengths":
        js.write_text('{"op_ids": [0, 1, 2], "num_workers": [1], "queue_utilization_pct": [250, 10, 20]}')
    elif damage == "queue_junk":
        q.write_text("1 16 2 x 5\n1 16 3 -4 5\n\n1 16 4 2 9\nhello\n")
    elif damage == "queue_binary":
        q.write_bytes(b"\x00\xff\xfe" * 100)
    elif damage == "stages_columns":
        st.write_text("Operation,Stage\r\nPipeline,GetNext\r\n")
    run, o, outs = _data(tmp_path)
    probs = [p for p in run.problems if p.path.endswith((js.name, q.name, st.name))]
    assert probs, [p.problem for p in run.problems]
    assert all("\n" not in p.problem for p in probs)
    if damage == "queue_junk":
        row = run.table("minddata_queue").set_index("rank").loc[0]
        assert row["batches"] == 1 and row["size_mean"] == 2  # the one good record after the first batch
    if damage == "lengths":  # 250% is not a usage; a list shorter than op_ids leaves its values empty
        ops = run.table("minddata_ops")
        r0 = ops[ops["rank"] == 0]
        assert r0["queue_empty_ratio"].isna().all() and r0["num_workers"].notna().all()  # workers: the raw profile


def test_dataset_csv_of_an_ascend_ms_rank_dir_takes_the_rank_of_its_directory(tmp_path):
    """*_ascend_ms/ASCEND_PROFILER_OUTPUT/dataset.csv has no rank in its name: it takes the rank directory's
    profiler_info_<rank>.json; elsewhere a file named dataset.csv is somebody's data set and not read."""
    from reportgen.readers import minddata
    from reportgen.model import Run

    d = tmp_path / "host_1_20250101_ascend_ms"
    (d / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (d / "profiler_info_5.json").write_text("{}")
    f = d / "ASCEND_PROFILER_OUTPUT" / "dataset.csv"
    f.write_text("Operation,Stage,Occurrences,Avg. time(us),Custom Info\n,GetNext,10,1000,\n")
    assert minddata.in_rank_dir(d) == [f]
    assert minddata.kind_of("dataset.csv") is None and minddata.kind_of("dataset_3.csv") == "stages"
    run = Run(name="x", source_format="ascend", source_path=str(tmp_path))
    minddata.attach(run, [f])
    st = run.table("minddata_stages")
    assert st["rank"].tolist() == [5] and st["total_ms"].tolist() == [10.0]


def test_legacy_layout_profiles_take_the_rank_of_their_host_and_device(tmp_path):
    """MindInsight's legacy layout keeps the profiles in cluster_profiler/<host>/profiler/ named by device id: the
    rank is the rank table's for (host folder, device), every rank gets its pipeline, and a device the table does not
    know is named, not guessed."""
    truth = write_mindinsight_run(tmp_path, MindInsightSpec.clean_run(minddata_bottleneck="Map"))
    assert truth["layout"] == "legacy"
    stray = next(tmp_path.rglob("device_queue_profiling_0.txt")).with_name("device_queue_profiling_9.txt")
    stray.write_text("1 16 2 0 5\n")
    run, o, outs = _data(tmp_path)
    world = len(run.ranks)
    b = o.analysis.tables["pipeline_ops"]
    assert sorted(b.loc[b["bottleneck"], "rank"]) == list(range(world))
    assert set(b.loc[b["bottleneck"], "op_type"]) == {"Map"}
    assert sorted(o.analysis.tables["device_queue"]["rank"]) == list(range(world))
    assert [p.problem for p in run.problems if p.path.endswith(stray.name)] == [
        f"device 9 of host folder {stray.parent.parent.name} has no rank in the rank table; file skipped"]
    assert "data_queue_empty" in _findings(outs)


def test_one_input_wait_measure_for_data_trajectory_and_advisor():
    """torch_npu run with DataLoader spans and a Preparing column: the run's input-wait measure (facts.input_wait) is
    the DataLoader wait, and the data section, the trajectory and the advisor's data_wait rule all read that one
    measure under that name (a data_wait finding once said 17.6 % of the step waits for input, from the preparing
    time, while the data section measured the DataLoader wait at 2.9 %)."""
    from conftest import fixture_dir

    from reportgen import facts

    run, o, outs = _data(fixture_dir("ascend", "msinsight", "test", "data", "pytorch", "text", "level2"))
    W = facts.input_wait(run)
    assert W.measure == "DataLoader wait" and W.column == "dataloader_wait_ms"
    m, pr = o.analysis.metrics, o.analysis.tables["per_rank"].set_index("rank")
    assert m["wait_measure"] == "DataLoader wait" and "before_device_measure" not in m
    F = facts.of(run)
    dl = F.in_scope(run.table("dataloader")).groupby("rank")["dur_ms"].sum() / len(F.steps)
    for rank in pr.index:
        assert pr.loc[rank, "wait_ms"] == pytest.approx(dl[rank])
    assert m["wait_share_ratio_mean"] == pytest.approx(W.share_mean)
    tr = outs["trajectory"].analysis
    assert tr.metrics["wait_metric"] == "dataloader_wait_ms" and tr.metrics["wait_measure"] == "DataLoader wait"
    got = tr.tables["per_rank"].set_index("rank")["dataloader_wait_ms"]
    for rank in pr.index:
        assert got[rank] == pytest.approx(pr.loc[rank, "wait_ms"])
    waits = [f for f in outs["trajectory"].view.findings if f.id == "data_wait"]
    for f in waits:  # raised or not, a data_wait finding speaks of that measure and its share
        assert f.evidence["wait_measure"] == "DataLoader wait"
        assert f.evidence["value"] == pytest.approx(W.share_mean)
    rules = outs["advisor"].analysis.tables["rules"].set_index("rule")
    assert rules.loc["data_wait", "result"] == ("raised" if waits else "passed")
    assert m["framework"] == "pytorch" and not any("minddata" in n for n in o.view.notes)  # no MindSpore files asked
    assert any("DataLoader worker processes" in n for n in o.view.notes)


def _qsteps(data, host):
    """minddata_queue_steps rows of one rank (rank 0) from two size lists."""
    import pandas as pd
    rows = [{"rank": 0, "queue": "data", "step": i + 1, "size": x, "capacity": None} for i, x in enumerate(data)]
    rows += [{"rank": 0, "queue": "host", "step": i + 1, "size": x, "capacity": 64} for i, x in enumerate(host)]
    return pd.DataFrame(rows, columns=["rank", "queue", "step", "size", "capacity"])


@pytest.mark.parametrize("data, host, verdict", [
    ([0, 0, 0, 1], [0, 0, 0, 0], "data processing"),   # data queue empty, host queue empty: processing too slow
    ([0, 0, 0, 1], [30, 40, 50, 60], "transfer"),       # host queue large, data queue empty: the transfer
    ([0, 3, 2, 1], [0, 0, 0, 0], "none"),               # data queue empty on one step only (the start): no wait
    ([], [0, 0, 0, 5], "data processing"),              # host queue only: 75% empty > 70%
    ([], [0, 5, 5, 5], "none"),
    ([], [0], "none"),                                  # the first batch only (includes the pipeline's start)
    ([0, 0, 1], [], "data queue empties (no host queue to tell why)"),
])
def test_step_gap_verdict(data, host, verdict):
    """The seed's three-way step-gap verdict (MindInsight's analyse_queue_summary rule) on small tables."""
    from reportgen.sections.data import queue_verdicts

    v = queue_verdicts(_qsteps(data, host)).iloc[0]
    assert v["verdict"] == verdict
    assert v["data_empty_steps"] == sum(x == 0 for x in data) and v["host_steps"] == len(host)


def test_step_gap_reader_and_chart(tmp_path):
    """minddata_aicpu_<rank>.txt gives the data queue per step, device_queue_profiling the host queue (every batch);
    the section states the verdict per rank and draws the step chart with a rank control for several ranks."""
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=2))
    prof = tmp_path / "profiler"
    for r, (data, host) in {0: ([0, 0, 0, 2], [0, 0, 0, 0]), 1: ([0, 0, 1, 0], [20, 30, 30, 30])}.items():
        (prof / f"minddata_aicpu_{r}.txt").write_text(
            "".join(f"GetNext_dequeue_wait {100 + i} {105 + i} {x}\n" for i, x in enumerate(data)) + "garbage\n")
        (prof / f"device_queue_profiling_{r}.txt").write_text(
            "".join(f"1 64 {i + 1} {x} {1000 + i}\n0 2 {i + 1} 5 {1000 + i}\n" for i, x in enumerate(host)))
    run, o, _ = _data(tmp_path)
    st = run.table("minddata_queue_steps")
    assert sorted(st.loc[(st["rank"] == 1) & (st["queue"] == "data"), "size"]) == [0, 0, 0, 1]
    assert len(st[st["queue"] == "host"]) == 8  # the first batch included, as MindInsight's chart
    v = o.analysis.tables["queue_verdict"].set_index("rank")["verdict"]
    assert v.to_dict() == {0: "data processing", 1: "transfer"}
    assert o.analysis.metrics["queue_transfer_ranks"] == 1
    assert "data-queue-steps" in {f.id for f in o.view.figures}
    assert [c.signal for c in o.view.controls] == ["queue_rank"]
    assert "transfer on 1 rank" in o.view.summary


def test_step_gap_on_the_mindinsight_fixture():
    """mi_run_2_dp_rank1: the data queue 3, 2, 1 (minddata_aicpu_1.txt) never empty: verdict none; host queue 1 step."""
    from conftest import fixture_dir

    root = fixture_dir("mindinsight", "mi_run_2_dp_rank1")
    run, o, _ = _data(root)
    st = run.table("minddata_queue_steps")
    assert st[st["queue"] == "data"]["size"].tolist() == [3, 2, 1]
    assert o.analysis.tables["queue_verdict"]["verdict"].tolist() == ["none"]
