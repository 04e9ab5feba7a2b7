"""Seed #2: MindInsight's GPU cluster files ``gpu_cluster_analyse_{mode}_{stages}_{size}_{rank}.csv``. No real one is
public (fixtures MANIFEST: not found anywhere); the research notes (mindinsight-cluster-profiling.md §2.2) give the
format: the Ascend file's header and rows, values already in ms (MindSpore divides the GPU µs by 1e3 on writing).
So a generated run with its cluster files renamed gpu_* must read exactly like the ascend_* one."""

from __future__ import annotations

import pandas as pd

from reportgen.readers import read_run
from reportgen.synth import MindInsightSpec, write_mindinsight_run


def test_gpu_cluster_analyse_files_read_like_the_ascend_ones(tmp_path):
    asc, gpu = tmp_path / "ascend", tmp_path / "gpu"
    spec = MindInsightSpec(hosts=1, devices_per_host=4, stages=2, steps=3)
    write_mindinsight_run(asc, spec)
    write_mindinsight_run(gpu, spec)
    moved = 0
    for f in sorted(gpu.rglob("ascend_cluster_analyse_*.csv")):
        f.rename(f.with_name("gpu_" + f.name[len("ascend_"):]))
        moved += 1
    assert moved == 4
    a, g = read_run(asc), read_run(gpu)
    ta, tg = a.table("cluster_overlap"), g.table("cluster_overlap")
    assert ta is not None and tg is not None and len(tg) == len(ta)
    pd.testing.assert_frame_equal(tg.reset_index(drop=True), ta.reset_index(drop=True))
    assert g.parallel == a.parallel and g.parallel.get("stages") == 2
