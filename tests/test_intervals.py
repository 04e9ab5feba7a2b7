

def test_work_written_twice_on_one_stream_is_dropped_once():
    """Issue 29 #3: the same kernel written twice on one stream (a broken or merged trace) is dropped, the same way
    for every family, and named; items that only overlap are kept as written (programmatic dependent launch on
    Hopper/Blackwell: a real B200 trace has them, and HTA counts them), as are rows without a stream."""
    import pandas as pd

    from reportgen.intervals import repeats_on_one_stream
    from reportgen.model import Run

    df = pd.DataFrame({"rank": [0, 0, 0, 0, 1, 0], "stream": [7, 7, 7, 7, 7, None],
                       "name": ["a", "a", "b", "c", "a", "a"],
                       "start_ms": [0.0, 0.0, 5.0, 6.0, 0.0, 0.0], "dur_ms": [10.0, 10.0, 10.0, 2.0, 10.0, 10.0]})
    out, stats = repeats_on_one_stream(df)
    assert stats == {0: 1} and list(out.index) == [0, 2, 3, 4, 5]  # b and c overlap a: kept as written
    run = Run(name="r", source_format="kineto", source_path="/x")
    run.ranks = [0, 1]
    run.tables["gpu_ops"] = df
    assert len(run.table("gpu_ops")) == 5 and len(run.table("gpu_ops")) == 5  # settled once
    assert [p.path for p in run.problems] == ["rank 0"] and "written twice" in run.problems[0].problem


def test_ascend_device_ops_written_twice_are_dropped_once():
    """The same class on the Ascend device-task table (start in ns): the third one-stream table."""
    import pandas as pd

    from reportgen.model import Run

    df = pd.DataFrame({"rank": [0, 0, 0], "name": ["MatMul", "MatMul", "Add"], "stream": [5, 5, 5],
                       "start_ns": [1000, 1000, 1500], "dur_ms": [0.002, 0.002, 0.001], "op_class": ["c"] * 3})
    run = Run(name="r", source_format="ascend", source_path="/x")
    run.ranks = [0]
    run.tables["device_ops"] = df
    assert run.table("device_ops")["name"].tolist() == ["MatMul", "Add"]
    assert "device_ops: 1 item written twice on one stream" in run.problems[0].problem
