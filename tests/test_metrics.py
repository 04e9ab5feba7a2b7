

def test_every_table_but_a_per_rank_one_has_a_budget_in_the_metrics_file():
    """Issue 29 #5: a pg_config of 10^6 groups made a 43 MB domains table (the budget covered only per-operator and
    per-(rank, step) tables). Any other table keeps its first thresholds.JSON_OP_ROWS rows and says so; a per-rank
    table stays whole."""
    import pandas as pd

    from reportgen import document, thresholds as th

    n = th.JSON_OP_ROWS * 3
    groups = pd.DataFrame({"group": [f"g{i}" for i in range(n)], "size": [8] * n})
    kept, cut = document._budgeted("domains", groups)
    assert len(kept) == th.JSON_OP_ROWS and cut["left_out"] == n - th.JSON_OP_ROWS and "first" in cut["kept"]
    members = pd.DataFrame({"group": [f"g{i // 8}" for i in range(n)], "rank": [i % 8 for i in range(n)]})
    assert len(document._budgeted("members", members)[0]) == th.JSON_OP_ROWS  # ranks repeat: not per-rank
    per_rank = pd.DataFrame({"rank": range(n), "x": [1.0] * n})
    assert document._budgeted("per_rank", per_rank) == (per_rank, None)
    assert document._cuttable("domains", groups) and not document._cuttable("per_rank", per_rank)
