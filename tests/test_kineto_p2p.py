"""gloo point-to-point peers: the c10d op's GROUP-LOCAL peer (Concrete Inputs[2]) mapped to a GLOBAL rank with the
ranks' pg_config groups (readers/kineto.global_peers), on tiny CPU traces written here."""

import json

import numpy as np
import pytest

from reportgen import facts, p2p
from reportgen.readers import kineto
from reportgen.readers.kineto_decode import decode_trace

from conftest import traced_peak

TID = 100
DIMS = [4, 8]  # float: 128 B per message


def _op(name, ts, dur, peer=None, cat="cpu_op"):
    if name.startswith("c10d::"):
        concrete = ["", "", str(peer), "0"] if peer is not None else ["", "", "0"]
        args = {"Concrete Inputs": concrete, "Input Dims": [[DIMS], [], [], []],
                "Input type": ["TensorList", "", "Scalar", "Scalar"]}
    else:
        args = {"Concrete Inputs": [""], "Input Dims": [DIMS], "Input type": ["float"]}
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": TID, "ts": ts, "dur": dur, "args": args}


def _p2p(kind, ts, peer, wait=50.0):
    """c10d op (with the local peer) then the gloo span that follows it on the same thread, as torch records them."""
    c10d = "c10d::send" if kind == "send" else "c10d::recv_"
    return [_op(c10d, ts, 5.0, peer), _op(f"gloo:{kind}", ts + 6.0, wait, cat="user_annotation")]


def _write(tmp_path, rank, world, groups, events):
    info = {"backend": "gloo", "rank": rank, "world_size": world,
            "pg_config": [{"pg_name": name, "pg_desc": name, "pg_size": len(ranks), "ranks": ranks}
                          for name, ranks in groups.items() if rank in ranks]}
    steps = [{"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{s}", "pid": 1, "tid": TID,
              "ts": 1_000_000.0 + 1000.0 * s, "dur": 900.0} for s in (1, 2)]
    path = tmp_path / f"rank{rank}.pt.trace.json"
    path.write_text(json.dumps({"distributedInfo": info, "traceEvents": steps + events}))
    return path


def _peers(run, source="gloo"):
    c = run.tables["collectives"]
    c = c[(c["source"] == source) & c["collective"].isin(["send", "recv"])]
    peer = np.where(c["collective"] == "send", c["dst_rank"], c["src_rank"])
    return {(int(r), k, int(p)) for r, k, p in zip(c["rank"], c["collective"], peer)}


# 4 ranks, dp2 x pp2 (rank = pp*2 + dp): pipeline pairs {0,2} {1,3}; world, pp and dp groups. Rank 0's local
# peer 1 is rank 1 in the world group and in dp {0,1}, rank 2 in pp {0,2}: only rank 2 has the opposite ops back.
PIPE = {"0": [0, 1, 2, 3], "1": [0, 2], "2": [1, 3], "3": [0, 1], "4": [2, 3]}


def _pipeline_run(tmp_path, ranks=(0, 1, 2, 3)):
    for r in ranks:
        stage0 = r < 2
        ev = []
        for s in (1, 2):
            t = 1_000_000.0 + 1000.0 * s + 100.0
            if stage0:  # send the activation to local 1 of {r, r+2}, receive its gradient back
                ev += _p2p("send", t, 1) + _p2p("recv", t + 400.0, 1)
            else:
                ev += _p2p("recv", t, 0) + _p2p("send", t + 400.0, 0)
        _write(tmp_path, r, 4, PIPE, ev)
    return kineto.read(tmp_path, jobs=1)


def test_decoder_keeps_the_local_peer_on_the_c10d_op_and_the_gloo_span_after_it(tmp_path):
    ev = (_p2p("send", 1_001_100.0, 3)
          + [_op("c10d::recv_any_source_", 1_001_200.0, 5.0), _op("gloo:recv", 1_001_206.0, 5.0, cat="user_annotation")]
          + [_op("gloo:send", 1_001_300.0, 5.0, cat="user_annotation")])  # no c10d op of its own: no peer
    path = _write(tmp_path, 0, 4, PIPE, ev)
    problems = []
    c = decode_trace(path, problems).tables["collectives"]
    assert not problems
    got = list(zip(c["source"], c["collective"], c["peer_local"]))
    assert got == [("c10d", "send", 3), ("gloo", "send", 3), ("c10d", "recv", -1), ("gloo", "recv", -1),
                   ("gloo", "send", -1)]
    assert (c["dst_rank"] == -1).all() and (c["src_rank"] == -1).all()  # global peers come at run assembly


def test_local_peers_become_global_through_the_group_whose_counterpart_exists(tmp_path):
    run = _pipeline_run(tmp_path)
    assert _peers(run) == {(0, "send", 2), (0, "recv", 2), (2, "recv", 0), (2, "send", 0),
                           (1, "send", 3), (1, "recv", 3), (3, "recv", 1), (3, "send", 1)}
    assert _peers(run, "c10d") == _peers(run)
    assert not [p for p in run.problems if "peer" in p.problem]
    links = run.tables["p2p_links"]
    assert sorted(zip(links["src_rank"], links["dst_rank"])) == [(0, 2), (1, 3), (2, 0), (3, 1)]
    assert (links["matched"] == links["ops"]).all() and (links["ops"] == 2).all()
    assert links["size_mb"].tolist() == [256e-6] * 4  # 2 x 128 B
    assert links["time_ms"].isna().all() and links["bandwidth_gbps"].isna().all()  # gloo spans: no transfer time
    ops = run.table("comm_ops")
    pp = ops[ops["kind"] == "p2p"]
    assert set(zip(pp["rank"], pp["peer_rank"])) == {(0, 2), (1, 3), (2, 0), (3, 1)}
    pairs = p2p.pairs(p2p.ops(run))
    assert pairs["matched"].all() and len(pairs) == 8
    assert facts.p2p_entries(run) is not None and len(facts.p2p_entries(run)) == 8


def test_ring_exchange_is_settled_by_the_counterpart_already_taken(tmp_path):
    """clean4_c's TP ring exchange (dp2 x tp2, rank = dp*2 + tp): rank 2's local peer 1 is rank 3 in TP {2,3} but
    also rank 0 in DP {0,2}, and rank 0 does have sends and receives with local peer 1 (its own TP exchange with
    rank 1). Rank 0's ops can only mean rank 1 (its groups give no other rank with the ops back), so rank 2's mean
    rank 3."""
    groups = {"0": [0, 1, 2, 3], "1": [0, 1], "2": [2, 3], "3": [0, 2], "4": [1, 3]}
    for r in range(4):
        local = 1 - r % 2
        ev = []
        for s in (1, 2):
            t = 1_000_000.0 + 1000.0 * s + 100.0
            ev += _p2p("send", t, local) + _p2p("recv", t + 20.0, local)
        _write(tmp_path, r, 4, groups, ev)
    run = kineto.read(tmp_path, jobs=1)
    assert _peers(run) == {(0, "send", 1), (0, "recv", 1), (1, "send", 0), (1, "recv", 0),
                           (2, "send", 3), (2, "recv", 3), (3, "send", 2), (3, "recv", 2)}
    links = run.tables["p2p_links"]
    assert sorted(zip(links["src_rank"], links["dst_rank"])) == [(0, 1), (1, 0), (2, 3), (3, 2)]


def test_an_op_no_group_settles_keeps_no_peer_and_is_counted_once(tmp_path):
    run = _pipeline_run(tmp_path, ranks=(0, 2, 3))  # rank 1's trace is missing: rank 3's local 0 is 0, 1 or 2
    peers = _peers(run)
    assert {(0, "send", 2), (2, "recv", 0)} <= peers
    assert {p for r, _, p in peers if r == 3} == {-1}
    lines = [p.problem for p in run.problems if "kept no global peer" in p.problem]
    assert len(lines) == 1
    assert lines[0].startswith("4 of 12 point-to-point ops") and "matching opposite ops" in lines[0]


@pytest.mark.parametrize("local", [4, 9])
def test_a_local_peer_beyond_every_group_is_named(tmp_path, local):
    _write(tmp_path, 0, 4, PIPE, _p2p("send", 1_001_100.0, local))
    _write(tmp_path, 1, 4, PIPE, [])
    run = kineto.read(tmp_path, jobs=1)
    assert _peers(run) == {(0, "send", -1)}
    lines = [p.problem for p in run.problems if "kept no global peer" in p.problem]
    assert len(lines) == 1 and "beyond every process group" in lines[0]


def test_p2p_links_are_their_definition_pair_by_pair():
    """p2p_links (each rank pair's rows as slices of arrays sorted once) gives the rows and floats of its definition
    written pair by pair with pandas (sends and receives joined by issue order, sizes and times summed per pair with
    NaN as 0; hosts make the transport; unmatched halves, gloo spans without transfer time)."""
    import math

    import numpy as np
    import pandas as pd

    from reportgen.readers.kineto import p2p_links

    def by_pair(both, hosts, timed):
        rows = []
        for (src, dst), g in both.groupby(["src", "dst"], sort=True):
            src, dst = int(src), int(dst)
            hs, hd = hosts.get(src), hosts.get(dst)
            transport = "p2p" if not (hs and hd) else "intra-host" if hs == hd else "inter-host"
            size_mb, time_ms = float(g["size_mb"].sum()), float(g["time_ms"].sum()) if timed else math.nan
            rows.append({"group": g["group"].iloc[0], "src_rank": src, "dst_rank": dst, "transport": transport,
                         "ops": len(g), "matched": int(g["matched"].sum()), "size_mb": size_mb, "time_ms": time_ms,
                         "bandwidth_gbps": size_mb / time_ms if time_ms > 0 else math.nan})
        return pd.DataFrame(rows, columns=["group", "src_rank", "dst_rank", "transport", "ops", "matched", "size_mb",
                                           "time_ms", "bandwidth_gbps"])

    rng = np.random.default_rng(4)
    for case in range(30):
        n = int(rng.integers(1, 80))
        kind = rng.choice(["send", "recv", "all_reduce"], n)
        rank = rng.integers(0, 6, n)
        peer = rng.integers(-1, 6, n)
        coll = pd.DataFrame({"rank": rank, "source": "gpu_kernel" if case % 4 else "gloo", "collective": kind,
                             "dst_rank": np.where(kind == "send", peer, -1), "src_rank": np.where(kind == "recv", peer, -1),
                             "start_ms": np.round(rng.uniform(0, 50, n), 2), "dur_ms": np.round(rng.uniform(0, 3, n), 3),
                             "in_mb": np.where(rng.random(n) < 0.2, np.nan, np.round(rng.uniform(0, 64, n), 3)),
                             "out_mb": np.round(rng.uniform(0, 64, n), 3),
                             "group_ranks": rng.choice(["[0, 1]", "[2, 3]", None], n),
                             "group_name": rng.choice(["pp0", "pp1"], n)})
        hosts = {r: f"h{r // 2}" for r in range(6)} if case % 3 else {}
        got = p2p_links(coll, hosts)
        if got is None:
            continue
        both, timed = kineto._p2p_joined(coll)  # the joined halves the table is made of
        want = by_pair(both, hosts, timed)
        pd.testing.assert_frame_equal(got.reset_index(drop=True), want, check_exact=True)


def test_p2p_links_copies_only_the_columns_it_reads():
    """A run's collectives table has 22 columns; p2p_links reads 10. Copying the send / receive rows whole was the
    peak of a 4,096-rank read (issue 30 #1: 4.45 -> 3.82 GB): with 70 columns the traced allocation peak of the call
    stays under the bytes of those rows' whole width (pandas 2 and 3)."""
    import pandas as pd

    from reportgen.readers.kineto import p2p_links

    n = 100_000
    rng = np.random.default_rng(5)
    kind = np.where(np.arange(n) % 2 == 0, "send", "recv")
    rank = rng.integers(0, 8, n)
    coll = pd.DataFrame({"rank": rank, "source": "gpu_kernel", "collective": kind,
                         "dst_rank": np.where(kind == "send", (rank + 1) % 8, -1),
                         "src_rank": np.where(kind == "recv", (rank + 7) % 8, -1),
                         "start_ms": np.arange(n) / 10, "dur_ms": 0.5, "in_mb": 1.0, "out_mb": 1.0,
                         "group_ranks": "[0, 1, 2, 3, 4, 5, 6, 7]", "group_name": "pp0",
                         **{f"other_{i}": np.zeros(n) for i in range(60)}})
    whole = int(coll.memory_usage(deep=False, index=False).sum())
    links, peak = traced_peak(lambda: p2p_links(coll, {}))
    assert links is not None and len(links) == 8 and links["matched"].sum() > 0
    assert peak < whole, (peak, whole)


def test_issue_index_is_the_position_in_start_order_among_the_rows_of_its_keys():
    """p2p.issue_index (by positions) is pandas' definition: a stable sort by start (NaN last), then the count of
    the rows before it among its keys' rows; a row with a missing key has none (NaN), the index kept as given."""
    import pandas as pd

    rng = np.random.default_rng(3)
    for trial in range(400):
        n = int(rng.integers(0, 40))
        df = pd.DataFrame({"src": rng.integers(0, 3, n), "kind": rng.choice(["send", "receive", "x"], n),
                           "step": rng.integers(0, 2, n).astype(float),
                           "start_ms": rng.choice([0.0, -0.0, 1.0, 2.5, np.nan, 3.0], n)},
                          index=rng.permutation(np.arange(50, 50 + n)) if trial % 2 else None)
        if n and trial % 3 == 0:
            df.loc[df.index[rng.integers(0, n, 3)], "step"] = np.nan
        if n and trial % 5 == 0:
            df.loc[df.index[rng.integers(0, n, 2)], "kind"] = None
        for keys in (["src", "kind"], ["src", "step"], ["kind"], ["src", "kind", "step"]):
            want = df.sort_values("start_ms", kind="stable").groupby(keys).cumcount().reindex(df.index)
            got = p2p.issue_index(df, keys)
            assert got.dtype == want.dtype and got.index.equals(want.index) and got.equals(want), (trial, keys)
