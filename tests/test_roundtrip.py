"""Generator -> reader round trip: what the reader finds equals the generator's ground truth."""

from __future__ import annotations

import pytest

from reportgen.readers import read_run
from reportgen.synth import MindInsightSpec, write_mindinsight_run


@pytest.mark.parametrize("layout", ["flat", "legacy"])
@pytest.mark.parametrize("stages", [1, 2, 4])
def test_reader_recovers_ground_truth(tmp_path, layout, stages):
    spec = MindInsightSpec(hosts=2, devices_per_host=4, stages=stages, steps=4, layout=layout, seed=stages,
                           slow_ranks={3: 3.0})
    truth = write_mindinsight_run(tmp_path, spec)
    run = read_run(tmp_path)
    assert run.ranks == truth["ranks"] and run.world_size == truth["world_size"] and run.missing_ranks == []
    assert run.steps == truth["steps"]
    assert run.parallel["mode"] == truth["parallel_mode"] and run.parallel["stages"] == stages
    assert {r: run.stage_of(r) for r in run.ranks} == {int(k): v for k, v in truth["stages"].items()}
    if layout == "legacy":
        assert run.hosts == {int(k): v for k, v in truth["hosts"].items()}
        assert run.devices == {int(k): v for k, v in truth["devices"].items()}
    else:
        assert run.hosts == {}  # the flat layout does not record hosts; never guessed
    cols = ["step_ms", "step_interval_ms", "fp_bp_ms", "tail_ms"]
    st = run.tables["step_trace"].set_index(["rank", "step"])
    for row in truth["per_rank_step"]:
        got = st.loc[(row["rank"], row["step"]), cols]
        assert [float(v) for v in got] == pytest.approx([row[c] for c in cols], abs=1e-9)
    avg = run.tables["step_trace_avg"].set_index("rank")
    for rank, row in truth["per_rank_avg"].items():
        assert [float(v) for v in avg.loc[int(rank), cols]] == pytest.approx([row[c] for c in cols], abs=1e-9)
    assert run.problems == []


def test_missing_rank_files_are_reported(tmp_path):
    truth = write_mindinsight_run(tmp_path, MindInsightSpec(hosts=1, devices_per_host=4))
    for p in tmp_path.rglob("*_2*"):
        if p.name.endswith(("_2_detail_time.csv", "_2.csv", "_2.json", "_2.txt")):
            p.unlink()
    run = read_run(tmp_path)
    assert run.missing_ranks == [2] and run.ranks == [0, 1, 3]
    assert truth["world_size"] == 4
