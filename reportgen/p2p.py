"""Point-to-point (pipeline) operations of every family in one table, and each Send joined to its Receive.

:func:`ops` converges the families (columns :data:`COLUMNS`; times in ms from the run origin, exact where the reader
has integer ns; ``peer_rank`` = the global rank on the other end, -1 when the data does not say):

* PyTorch (Kineto): the NCCL ``SendRecv`` kernels (``collectives`` rows from GPU kernels) and gloo send / recv spans,
  with the peer from the collective's ``dst_rank`` / ``src_rank``; step = the rank's ProfilerStep window.
* Ascend (and any run whose canonical ``comm_ops`` time its p2p operations): ``comm_ops`` of kind p2p: ``hcom_send``
  -> send, ``hcom_receive`` -> recv, ``hcom_batchSendRecv`` -> sendrecv (it sends and receives at once: Megatron's ``batch_isend_irecv``); the peer is the other member of the
  op's group when the group has two ranks; in a larger group (a pp group of more than two stages) it is found by
  end time (:func:`_peers_by_time`).
* MindSpore Insight: the step trace's ``Send-op`` / ``Receive-op`` operations (``step_ops``); the peer is the rank
  at the same position of the neighbouring stage: the next one for the first stage, the previous one for the last
  (a middle stage's direction is not in these files: its Receives from the previous and the next stage run on two
  streams, and the step's first Receive comes from the previous stage, its first Send goes to the next one).

:func:`pairs` joins them, per step: the n-th send from a to b with the n-th receive on b from a (both in start
order), and the n-th sendrecv of a with b with the n-th sendrecv of b with a. That is how NCCL, HCCL and
MindSpore match point-to-point operations (in issue order per peer pair). Unmatched halves are kept.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .frames import text_where
from .model import Run

COLUMNS = ["rank", "step", "kind", "peer_rank", "name", "start_ms", "end_ms"]
PAIR_COLUMNS = ["step", "src_rank", "dst_rank", "n", "kind", "send_name", "recv_name", "send_order", "recv_order",
                "send_start_ms", "send_end_ms", "recv_start_ms", "recv_end_ms", "matched"]
_MI_P2P = re.compile(r"(?:^|[_/])(Send|Receive)-op", re.IGNORECASE)
_ASCEND_KIND = {"send": "send", "receive": "recv", "batchsendrecv": "sendrecv"}


def _kineto(run: Run) -> pd.DataFrame | None:
    from .timeline import assign_steps

    coll = run.table("collectives")
    if coll is None or "dst_rank" not in coll:
        return None
    k = coll[coll["collective"].isin(["send", "recv"]) & coll["source"].isin(["gpu_kernel", "gloo"])]
    if k.empty:
        return None
    if (k["source"] == "gpu_kernel").any():  # a GPU rank's gloo spans are host-side views of the same transfers
        k = k[k["source"] == "gpu_kernel"]
    send = (k["collective"] == "send").to_numpy()
    peer = np.where(send, k["dst_rank"].to_numpy(), k["src_rank"].to_numpy())
    end = k["end_ms"] if "end_ms" in k else k["start_ms"] + k["dur_ms"]
    out = pd.DataFrame({"rank": k["rank"].to_numpy(), "step": assign_steps(k, run.table("trace_steps")),
                        "kind": text_where(send, "send", "recv"), "peer_rank": np.where(peer >= 0, peer, -1),
                        "name": k["name"].astype(str).to_numpy(), "start_ms": k["start_ms"].to_numpy(),
                        "end_ms": end.to_numpy()})
    return out


def _from_comm_ops(run: Run) -> pd.DataFrame | None:
    """Point-to-point operations of the canonical ``comm_ops`` (those with start times): the peer from the group of
    two, else candidates for :func:`_peers_by_time`."""
    c = run.table("comm_ops")
    if c is None or "start_ms" not in c:  # operations without start times (hccl_raw) cannot be paired
        return None
    c = c[(c["kind"] == "p2p") & c["op_type"].isin(list(_ASCEND_KIND)) & c["start_ms"].notna()]
    if c.empty:
        return None
    groups = run.table("groups")
    members = {}
    if groups is not None:
        members = {str(g): [int(r) for r in rs] for g, rs in zip(groups["group"], groups["ranks"])}
    # per distinct (rank, group): a handful per rank, not per operation
    key = pd.MultiIndex.from_arrays([c["rank"].to_numpy(), c["group"].astype(str).to_numpy()])
    uniq = key.unique()
    u_peer, u_cand = [], []
    for r, g in uniq:
        others = [m for m in members.get(g, []) if m != int(r)]
        u_peer.append(others[0] if len(others) == 1 else -1)
        u_cand.append(others if len(others) > 1 else [])
    pos = uniq.get_indexer(key)
    peer = np.asarray(u_peer, dtype=np.int64)[pos]
    cand = [u_cand[i] for i in pos]
    return pd.DataFrame({"rank": c["rank"].to_numpy(), "step": c["step"].to_numpy(),
                         "kind": c["op_type"].map(_ASCEND_KIND).to_numpy(), "peer_rank": peer,
                         "name": c["op"].astype(str).to_numpy(), "start_ms": c["start_ms"].to_numpy(),
                         "end_ms": (c["start_ms"] + c["elapse_ms"]).to_numpy(), "candidates": cand})


def _mindinsight(run: Run) -> pd.DataFrame | None:
    so = run.table("step_ops")
    if so is None or so.empty:
        return None
    m = so["op"].astype(str).str.extract(_MI_P2P, expand=False)
    so = so[m.notna()]
    if so.empty:
        return None
    kind = text_where(m[m.notna()].str.lower() == "send", "send", "recv")
    blocks: dict[int, list[int]] = {}
    for r in sorted(int(x) for x in run.ranks):
        s = run.stage_of(r)
        if s is not None:
            blocks.setdefault(int(s), []).append(r)
    stages = sorted(blocks)
    peer_of: dict[int, int] = {}
    cand_of: dict[int, list[int]] = {}
    if len(stages) > 1 and len({len(v) for v in blocks.values()}) == 1:
        for i, s in enumerate(stages):
            near = [stages[j] for j in (i - 1, i + 1) if 0 <= j < len(stages)]
            for pos, r in enumerate(blocks[s]):
                if len(near) == 1:
                    peer_of[r] = blocks[near[0]][pos]
                else:
                    cand_of[r] = [blocks[n][pos] for n in near]
    peer = np.array([peer_of.get(int(r), -1) for r in so["rank"]], dtype=np.int64)
    source = text_where(peer >= 0, "neighbour stage", "")
    if cand_of and "stream" in so:
        # a middle stage: its Receives from the previous stage and from the next run on different streams, and its
        # Sends likewise; the step's first Receive comes from the previous stage and its first Send goes to the next
        # one (the forward pass of the first micro-batch, in GPipe and 1F1B alike)
        df = pd.DataFrame({"rank": so["rank"].to_numpy(), "step": so["step"].to_numpy(), "kind": kind,
                           "stream": so["stream"].astype(str).to_numpy(), "start": so["start_ms"].to_numpy()})
        for (r, st, k), g in df[df["rank"].isin(list(cand_of))].groupby(["rank", "step", "kind"]):
            streams = g.sort_values("start")["stream"]
            if streams.nunique() != 2:
                continue
            prev_nb, next_nb = cand_of[int(r)]
            first = streams.iloc[0]
            first_peer, other_peer = (prev_nb, next_nb) if k == "recv" else (next_nb, prev_nb)
            peer[g.index.to_numpy()] = np.where(g["stream"].to_numpy() == first, first_peer, other_peer)
            source[g.index.to_numpy()] = "stream order"
    return pd.DataFrame({"rank": so["rank"].to_numpy(), "step": so["step"].to_numpy(), "kind": kind,
                         "peer_rank": peer, "peer_source": source, "name": so["op"].astype(str).to_numpy(),
                         "start_ms": so["start_ms"].to_numpy(), "end_ms": so["end_ms"].to_numpy(),
                         "candidates": [cand_of.get(int(r), []) for r in so["rank"]]})


def _peers_by_time(df: pd.DataFrame, stage_of) -> pd.DataFrame:
    """Peers the files do not name (a pp group of more than two ranks, a middle stage of MindSpore Insight's files):
    among the op's candidates in a neighbouring stage, the rank with an operation of the other direction (a receive
    for a send, ...) that ends nearest to this one's end, within :data:`PEER_TOLERANCE_MS` (a transfer ends on both
    sides at once). ``peer_source`` says ``files`` or ``end time``; an op left unknown stays -1 and is counted."""
    if "peer_source" not in df:
        df["peer_source"] = text_where(df["peer_rank"] >= 0, "files", "")
    todo = df[(df["peer_rank"] < 0) & df["candidates"].map(len).astype(bool) & (df["kind"] != "sendrecv")]
    if todo.empty:
        return df
    other = {"send": "recv", "recv": "send"}
    best = pd.Series(np.inf, index=todo.index)
    peer = pd.Series(-1, index=todo.index, dtype="int64")
    by_rank_kind = {k: g.sort_values("end_ms") for k, g in df.groupby(["rank", "kind"])}
    pairs = todo.explode("candidates").dropna(subset=["candidates"])
    pairs = pairs[[abs((stage_of(int(c)) or 0) - (stage_of(int(r)) or 0)) == 1
                   for r, c in zip(pairs["rank"], pairs["candidates"])]]
    for (r, k, c), g in pairs.groupby(["rank", "kind", "candidates"]):
        there = by_rank_kind.get((int(c), other[k]))
        if there is None or there.empty:
            continue
        left = g[["end_ms"]].reset_index().sort_values("end_ms")
        m = pd.merge_asof(left, there[["end_ms"]].rename(columns={"end_ms": "their_end"}), left_on="end_ms",
                          right_on="their_end", direction="nearest")
        dist = (m["end_ms"] - m["their_end"]).abs().to_numpy()
        idx = m["index"].to_numpy()
        better = dist < best.loc[idx].to_numpy()
        best.loc[idx[better]] = dist[better]
        peer.loc[idx[better]] = int(c)
    ok = best <= PEER_TOLERANCE_MS
    df.loc[ok[ok].index, "peer_rank"] = peer[ok]
    df.loc[ok[ok].index, "peer_source"] = "end time"
    return df


#: a send and its receive end within this of each other on comparable clocks (ms)
PEER_TOLERANCE_MS = 0.5


def ops(run: Run) -> pd.DataFrame | None:
    """The run's point-to-point operations (module docstring), with ``order``: the op's position among its rank's
    point-to-point operations of the step, in start order, and ``peer_source``."""
    for f in (_kineto, _from_comm_ops, _mindinsight):
        df = f(run)
        if df is not None and not df.empty:
            df = df.astype({"rank": "int64", "step": "int64", "peer_rank": "int64"})
            if "candidates" in df:
                df = _peers_by_time(df, run.stage_of).drop(columns="candidates")
            elif "peer_source" not in df:  # no candidates to search: every peer is the files' (or unknown)
                df["peer_source"] = text_where(df["peer_rank"] >= 0, "files", "")
            df = df.sort_values(["rank", "step", "start_ms"], kind="stable").reset_index(drop=True)
            df["order"] = df.groupby(["rank", "step"]).cumcount()
            return df
    return None


def issue_index(df: pd.DataFrame, keys: list[str]) -> pd.Series:
    """The matching rule of point-to-point operations, in one place: the position of each row among the rows of its
    ``keys`` (a direction, e.g. source, destination and kind; per step where the keys say so) in start order. The
    n-th send from a to b meets the n-th receive on b from a (NCCL / HCCL issue order per peer pair)."""
    start = df["start_ms"].to_numpy()
    if start.dtype.kind not in "fiu":  # (not the tables' float ms): pandas' own calls
        order = df.sort_values("start_ms", kind="stable")
        return order.groupby(keys).cumcount().reindex(df.index)
    # by positions, not by a sorted copy of the frame (0.9 s at 1,024 ranks): the rows of each group in start order
    # (a stable sort, NaN last, as sort_values), numbered 0, 1, ...; a row with a missing key is in no group (NaN)
    group = df.groupby(keys, sort=False).ngroup().to_numpy()
    missing = np.isnan(group) if group.dtype.kind == "f" else None
    code = np.where(missing, -1, group).astype(np.int64) if missing is not None else group.astype(np.int64)
    order = np.argsort(start, kind="stable")
    order = order[code[order] >= 0]
    by_group = order[np.argsort(code[order], kind="stable")]
    c = code[by_group]
    at = np.arange(len(c))
    first = np.maximum.accumulate(np.where(np.r_[True, c[1:] != c[:-1]], at, 0)) if len(c) else at
    out = np.full(len(df), np.nan) if missing is not None and missing.any() else np.zeros(len(df), dtype=np.int64)
    out[by_group] = at - first
    return pd.Series(out, index=df.index)


def pairs(p2p: pd.DataFrame) -> pd.DataFrame:
    """Each send joined to its receive (module docstring); columns :data:`PAIR_COLUMNS`."""
    known = p2p[p2p["peer_rank"] >= 0]
    cols = ["step", "src_rank", "dst_rank"]

    def side(df, src, dst, prefix):
        out = df.assign(src_rank=df[src], dst_rank=df[dst])
        out["n"] = issue_index(out, cols)
        return out[cols + ["n", "name", "order", "start_ms", "end_ms"]].rename(
            columns={"name": f"{prefix}_name", "order": f"{prefix}_order", "start_ms": f"{prefix}_start_ms",
                     "end_ms": f"{prefix}_end_ms"})

    sends = side(known[known["kind"] == "send"], "rank", "peer_rank", "send")
    recvs = side(known[known["kind"] == "recv"], "peer_rank", "rank", "recv")
    directed = sends.merge(recvs, on=cols + ["n"], how="outer").assign(kind="send")
    sr = known[known["kind"] == "sendrecv"]
    lo = sr[sr["rank"] < sr["peer_rank"]]
    hi = sr[sr["rank"] > sr["peer_rank"]]
    exch = side(lo, "rank", "peer_rank", "send").merge(side(hi, "peer_rank", "rank", "recv"), on=cols + ["n"],
                                                        how="outer").assign(kind="sendrecv")
    out = pd.concat([x for x in (directed, exch) if not x.empty], ignore_index=True) if not (
        directed.empty and exch.empty) else pd.DataFrame(columns=PAIR_COLUMNS)
    out["matched"] = out["send_name"].notna() & out["recv_name"].notna()
    return out.reindex(columns=PAIR_COLUMNS).sort_values(["step", "src_rank", "dst_rank", "n"]).reset_index(drop=True)
