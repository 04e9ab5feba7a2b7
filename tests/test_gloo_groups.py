"""gloo collectives get their process group from their worker thread (reportgen/readers/gloo_groups.py)."""

import numpy as np
import pandas as pd

from reportgen.readers.gloo_groups import assign

GROUPS = pd.DataFrame({"group": ["0", "1", "2", "3", "4"], "name": ["default_pg", "tp0", "tp1", "dp0", "dp1"],
                       "ranks": [[0, 1, 2, 3], [0, 1], [2, 3], [0, 2], [1, 3]]})
#: each rank's worker threads: 2 per group it is in, created in pg_name order (ids ascending)
THREADS = {0: {"0": (10, 11), "1": (20, 21), "3": (30, 31)}, 1: {"0": (12, 13), "1": (22, 23), "4": (32, 33)},
           2: {"0": (14, 15), "2": (24, 25), "3": (34, 35)}, 3: {"0": (16, 17), "2": (26, 27), "4": (36, 37)}}


def _spans(drop=None, seed=0):
    """Lockstep replicas: the two TP groups (and the two DP groups) run the same collectives at about the same
    time, as data-parallel replicas do; a collective ends within 0.05 ms on its members."""
    rng = np.random.default_rng(seed)
    rows = []
    plan = {"0": (2, 1), "1": (40, 65536), "2": (40, 65536), "3": (8, 262144), "4": (8, 262144)}
    for g, (count, n) in plan.items():
        members = [int(r) for r in GROUPS.set_index("group").at[g, "ranks"]]
        for i in range(count):
            end = 5.0 * i + (0.7 if g in ("2", "4") else 0.0) + rng.uniform(0, 0.5)
            for r in members:
                tid = THREADS[r][g][i % 2]
                if drop and (r, tid) in drop:
                    continue
                e = end + rng.uniform(0, 0.05)
                rows.append({"rank": r, "source": "gloo", "tid": str(tid), "collective": "all_reduce",
                             "in_nelems": n, "start_ms": e - 1.0, "dur_ms": 1.0, "end_ms": e, "group_name": "",
                             "group_desc": "", "group_ranks": "", "group_size": -1})
    return pd.DataFrame(rows)


def _placed(out):
    g = out[out["source"] == "gloo"]
    return g.groupby(["rank", "tid"])["group_name"].agg(lambda x: "/".join(sorted(set(x)))).to_dict()


def test_every_thread_gets_its_group_even_when_replicas_run_in_lockstep():
    out, unplaced = assign(_spans(), GROUPS)
    assert unplaced == 0
    for r, gs in THREADS.items():
        for g, tids in gs.items():
            for t in tids:
                assert _placed(out)[(r, str(t))] == g
    row = out[(out["rank"] == 3) & (out["tid"] == "26")].iloc[0]
    assert row["group_ranks"] == "[2, 3]" and row["group_size"] == 2 and row["group_desc"] == "tp1"


def test_a_group_whose_threads_are_missing_does_not_shift_the_others():
    # rank 0 shows no span of its world-group threads: creation order alone would shift every group by one
    out, unplaced = assign(_spans(drop={(0, 10), (0, 11)}), GROUPS)
    assert unplaced == 0
    assert _placed(out)[(0, "20")] == "1" and _placed(out)[(0, "31")] == "3"


def test_spans_that_already_name_a_group_are_kept():
    s = _spans()
    s.loc[:, "group_name"] = "x"
    out, unplaced = assign(s, GROUPS)
    assert unplaced == 0 and set(out["group_name"]) == {"x"}
