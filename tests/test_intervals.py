

def test_one_stream_runs_one_item_at_a_time():
    """Issue 29 #3: work overlapping on one stream (a broken or merged trace) is resolved once for every family:
    exact repeats and wholly covered items dropped, others clipped to start when the stream's earlier work ended;
    overlaps under STREAM_OVERLAP_NOISE_MS (timestamp rounding in real Ascend files) and rows without a stream kept."""
    import pandas as pd

    from reportgen.intervals import STREAM_OVERLAP_NOISE_MS, one_stream_at_a_time
    from reportgen.model import Run

    df = pd.DataFrame({"rank": [0, 0, 0, 0, 1, 0, 2, 2], "stream": [7, 7, 7, 7, 7, None, 3, 3],
                       "name": ["a", "a", "b", "c", "a", "x", "p", "q"],
                       "start_ms": [0.0, 0.0, 5.0, 6.0, 0.0, 1.0, 0.0, 1.0 - STREAM_OVERLAP_NOISE_MS / 2],
                       "dur_ms": [10.0, 10.0, 10.0, 2.0, 10.0, 100.0, 1.0, 1.0]})
    out, stats = one_stream_at_a_time(df)
    assert stats == {0: (2, 1)}
    assert out.loc[2, "start_ms"] == 10.0 and out.loc[2, "dur_ms"] == 5.0  # b clipped, its end kept
    assert set(out.index) == {0, 2, 4, 5, 6, 7}
    run = Run(name="r", source_format="kineto", source_path="/x")
    run.ranks = [0, 1, 2]
    run.tables["gpu_ops"] = df
    assert len(run.table("gpu_ops")) == 6 and len(run.table("gpu_ops")) == 6  # settled once
    assert any("overlapping on one stream" in p.problem and p.path == "rank 0" for p in run.problems)
