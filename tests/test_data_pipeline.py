"""Data pipeline (issue 17 part 3): waiting for input per rank, the MindSpore dataset pipeline's operations and the
one that holds it back (generated profiles with a known bottleneck: no public sample exists)."""

from __future__ import annotations

import pytest

from reportgen.readers import read_run
from reportgen.sections import Options, run_sections
from reportgen.synth.kineto import KinetoSpec, write_kineto_run
from reportgen.synth.mindinsight import MindInsightSpec, write_mindinsight_run


def _data(path):
    run = read_run(path)
    outs = {o.id: o for o in run_sections(run, Options())}
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
    assert set(ops["rank"]) == {0} and "Odd" not in set(ops["op_type"])  # 250 % usage is not a usage


def test_a_huge_profile_is_skipped_unread(tmp_path, monkeypatch):
    from reportgen.readers import minddata
    monkeypatch.setattr(minddata, "MAX_FILE_BYTES", 100)
    write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=2,
                                                    minddata_bottleneck="Map"))
    run = read_run(tmp_path)
    assert run.table("minddata_ops") is None
    assert sum("more than a pipeline profile holds" in p.problem for p in run.problems) == 2


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
