"""The communication normalisation of every family, written once: what each reader puts in the canonical
communication tables (reportgen/model.py ``TABLES``) so that no section needs to know which family a run came from.

Canonical tables filled here (columns in :data:`reportgen.model.TABLES`):

* ``comm_ops``: one row per communication operation on one rank: ``rank`` (GLOBAL), ``step``, ``kind``
  (collective | p2p), ``op``, ``op_type`` (:data:`reportgen.commtypes.OP_TYPES` vocabulary), ``group`` (a key shared by the ranks of
  the process group, "" / None when the files do not say), ``start_ms`` (absent when the files give no start),
  ``elapse_ms``, ``transit_ms`` / ``wait_ms`` / ``sync_ms`` / ``idle_ms`` (NaN where the family has none) and, where
  the family has them per operation, ``size_mb``, ``bandwidth_gbps``, ``busbw_gbps``. The frame's ``attrs`` carry
  ``source`` (where the operations come from) and ``note`` (what the times mean for this family), shown as they
  are by the communication section.
* ``comm_rank_step`` (only where the profiler writes its own per-step totals): rank, step, elapse_ms, transit_ms,
  wait_ms; ``comm_rank_avg``: the same per rank from the file's own average row (a reference).
* ``comm_links_local``: links whose ends the files give only as group-local indices (columns of MindSpore's
  hccl_raw link table: rank, step, op, src_local, dst_local, transport, time_ms, size_mb, bandwidth_gbps).

Per family:

* **Ascend** (``communication.json``, DB ``COMMUNICATION_OP``): ``comm_ops`` as the reader parses it; times are the
  master plane's (:data:`ASCEND_NOTE`).
* **MindSpore CPU**: ``comm_ops`` from the communication CPU ops (elapse only: no transit, no wait).
* **MindSpore Insight** (``hccl_raw_<rank>.csv``, :func:`mindinsight_tables`): per operation and step
  ``communication_cost`` (Σ of the op's non-wait task time, every plane) is the transit time and ``wait_cost`` the
  wait time; the files give no op duration, so ``elapse_ms`` = transit + wait (then wait / (wait + transit) is
  MindInsight's own ratio wait / (communication + wait)). No start times, no groups.
* **PyTorch Kineto** (:func:`kineto_ops`, a lazy loader): NCCL kernels with collective args (else communication
  kernels by name, else gloo spans, else record_param_comms ops); collectives matched across the ranks of their
  group by order (the n-th collective of the same kind in the same group); transit = the shortest duration among
  the group's ranks (the time the transfer itself needs once every rank has arrived), wait = own duration -
  transit; point-to-point transit = the shorter of the send and its matching receive (:func:`_p2p_transit`).
  algbw = bytes / duration; busbw = algbw x factor (:func:`busbw_factor`, the nccl-tests convention).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..commtypes import P2P_TYPES, busbw_factor, canonical_op_type
from ..frames import own_columns, text_where
from ..timeline import per_value

#: what Ascend's per-operation times mean (the communication section shows it)
ASCEND_NOTE = ("Operation times (elapse, transit, wait) come from each operator's master plane only, while sizes "
               "count every plane: a wait ratio near 100% with data moved means the master stream only waited while "
               "other planes transferred.")
MINDINSIGHT_NOTE = ("hccl_raw gives per operation a communication cost (Σ of its non-wait task time, every plane) and "
                    "a wait cost, no duration: transit = communication cost, operation time = communication + wait.")

def _types(names: pd.Series) -> np.ndarray:
    uniq = pd.unique(names.astype(str))
    m = {u: canonical_op_type(u) for u in uniq}
    return names.astype(str).map(m).to_numpy(dtype=object)


# --------------------------------------------------------------------------- Ascend


def ascend_attrs(run) -> None:
    """Ascend ``comm_ops`` are canonical as parsed; say what their times mean."""
    ops = run.tables.get("comm_ops")
    if ops is not None:
        ops.attrs.update(source="communication.json / the profiler DB", note=ASCEND_NOTE)


# --------------------------------------------------------------------------- MindSpore Insight


def mindinsight_tables(run) -> None:
    """``comm_ops``, ``comm_rank_step``, ``comm_rank_avg`` and ``comm_links_local`` from the hccl_raw tables
    (module doc). The ``mi_*`` tables stay as they are."""
    t = run.tables
    ops = t.get("mi_comm_ops")
    if ops is not None and not ops.empty:
        c, w = ops["comm_ms"].astype(float), ops["wait_ms"].astype(float)
        op_type = _types(ops["op"])
        out = pd.DataFrame({
            "rank": ops["rank"].to_numpy(), "step": ops["step"].to_numpy(),
            "kind": text_where(pd.Series(op_type).isin(P2P_TYPES), "p2p", "collective"),
            "op": ops["op"].to_numpy(), "op_type": op_type, "group": None,  # no start_ms: the files give none
            "elapse_ms": (c + w).to_numpy(), "transit_ms": c.to_numpy(), "wait_ms": w.to_numpy(),
            "sync_ms": math.nan, "idle_ms": math.nan})
        out.attrs.update(source="hccl_raw communication_operator_cost", note=MINDINSIGHT_NOTE)
        t["comm_ops"] = out
    for src, dst in (("mi_comm_rank_step", "comm_rank_step"), ("mi_comm_rank_avg", "comm_rank_avg")):
        df = t.get(src)
        if df is not None and not df.empty:
            c, w = df["comm_ms"].astype(float), df["wait_ms"].astype(float)
            out = df.drop(columns=["comm_ms", "wait_ms", "avg_kind"], errors="ignore").assign(
                elapse_ms=c + w, transit_ms=c, wait_ms=w)
            out.attrs.update(source="hccl_raw communication_cost / wait_cost", note=MINDINSIGHT_NOTE)
            t[dst] = out
    links = t.get("mi_links")
    if links is not None and not links.empty:
        t["comm_links_local"] = links


# --------------------------------------------------------------------------- PyTorch Kineto

_NCCL_OP = [("allreduce", "allreduce"), ("allgather", "allgather"), ("reducescatter", "reducescatter"),
            ("alltoall", "alltoall"), ("sendrecv", "batchsendrecv"), ("broadcast", "broadcast"), ("reduce", "reduce"),
            ("send", "send"), ("recv", "receive")]

#: the trace's collective names (``collectives.collective``) in the canonical vocabulary
_KINETO_TYPE = {"all_reduce": "allreduce", "all_gather": "allgather", "reduce_scatter": "reducescatter",
                "all_to_all": "alltoall", "send_recv": "batchsendrecv", "recv": "receive", "send": "send",
                "broadcast": "broadcast", "reduce": "reduce", "barrier": "barrier"}


def _kernel_collectives(gpu: pd.DataFrame | None) -> pd.DataFrame:
    """Communication kernels as collectives when the trace has no collective args on them (older PyTorch, ROCm)."""
    if gpu is None:
        return pd.DataFrame()
    k = gpu[gpu["kind"] == "comm"]
    coll = per_value(k["name"], lambda names: pd.Series(  # per distinct kernel name; no name: 'other'
        [next((op for key, op in _NCCL_OP if key in n.lower().replace("_", "")), "other") if isinstance(n, str)
         else "other" for n in names], dtype=pd.Series("other").dtype))
    return pd.DataFrame({"rank": k["rank"], "source": "gpu_kernel", "name": k["name"], "collective": coll,
                         "group_ranks": "", "group_name": "stream " + k["stream"].astype(str), "group_size": -1,
                         "in_mb": math.nan, "out_mb": math.nan, "start_ms": k["start_ms"], "dur_ms": k["dur_ms"]})


def _p2p_transit(sel: pd.DataFrame) -> None:
    """Point-to-point kernels with known peers: transit = the shorter of the send kernel and its matching receive
    kernel (the n-th send from a to b with the n-th receive on b from a, :func:`reportgen.p2p.issue_index`), so a
    receive that waited for a late sender is not counted as transfer time. The n-th receives of the two ranks of a
    pipeline pair are transfers in opposite directions: their minimum (the collectives' rule) says nothing. In place;
    a send or receive without its other half keeps no transit (NaN)."""
    if "dst_rank" not in sel or "src_rank" not in sel:
        return
    is_send, is_recv = sel["op_type"] == "send", sel["op_type"] == "receive"
    known = (is_send & (sel["dst_rank"] >= 0)) | (is_recv & (sel["src_rank"] >= 0))
    if not known.any():
        return
    p = sel[known]
    src = np.where(p["op_type"] == "send", p["rank"], p["src_rank"]).astype(np.int64)
    dst = np.where(p["op_type"] == "send", p["dst_rank"], p["rank"]).astype(np.int64)
    from ..p2p import issue_index

    p = p.assign(_src=src, _dst=dst)
    p["_n"] = issue_index(p, ["_src", "_dst", "op_type"])
    both = p.groupby(["_src", "_dst", "_n"])["dur_ms"].agg(["min", "count"])
    p = p.join(both, on=["_src", "_dst", "_n"])
    sel.loc[p.index, "transit_ms"] = p["min"].where(p["count"] == 2)


def kineto_ops(run) -> pd.DataFrame | None:
    """The canonical ``comm_ops`` of a PyTorch trace (module doc); None when the trace records no communication."""
    from ..timeline import assign_steps

    coll = run.table("collectives")
    coll = coll if coll is not None else pd.DataFrame(columns=["source"])
    sel = coll[coll["source"] == "gpu_kernel"]
    source = "NCCL kernels with collective args"
    if sel.empty:
        sel, source = _kernel_collectives(run.table("gpu_ops")), "communication kernels (no collective args in " \
                                                                   "this trace)"
    if sel.empty:
        for src, label in (("gloo", "gloo operations"), ("record_param_comms", "record_param_comms CPU ops")):
            sel = coll[coll["source"] == src]
            if not sel.empty:
                source = label
                break
    if sel.empty:
        return None
    sel = sel.copy()
    sel["op_type"] = per_value(sel["collective"], lambda cs: pd.Series(  # a few names over every op of every rank
        [_KINETO_TYPE.get(str(c), canonical_op_type(c)) for c in cs]))
    if "in_mb" not in sel or sel["in_mb"].isna().all():
        sel["in_mb"] = math.nan
        sel["out_mb"] = math.nan
    key = sel["group_ranks"].where(sel["group_ranks"].astype(str) != "", sel.get("group_name", ""))
    sel["group"] = key.astype(str)
    # the n-th op of a (group, type) on each rank is one instance: ops of a rank in start order; ops that start
    # together by the communicator's sequence number, then tid (a kernel's stream, the same on every rank in the
    # usual set-up; a CPU span's thread), the duration last, so the numbers do not depend on the order the trace
    # lists them in
    ties = [c for c in ("seq", "tid") if c in sel]
    sel = sel.sort_values(["rank", "start_ms", *ties, "dur_ms"], kind="stable")
    sel["n"] = sel.groupby(["rank", "group", "op_type"]).cumcount()
    inst = sel.groupby(["group", "op_type", "n"])["dur_ms"].agg(["min", "count"]).rename(
        columns={"min": "transit_ms", "count": "ranks_seen"})
    sel = sel.join(inst, on=["group", "op_type", "n"])
    partial = (sel["group_size"] > 0) & (sel["ranks_seen"] < sel["group_size"])
    sel.loc[partial, "transit_ms"] = math.nan  # not every rank of the group is in the run: no fair minimum
    _p2p_transit(sel)
    sel["wait_ms"] = sel["dur_ms"] - sel["transit_ms"]
    sel["size_mb"] = sel[["in_mb", "out_mb"]].max(axis=1)
    n = sel["group_size"].where(sel["group_size"] > 0, sel["ranks_seen"])
    sel["bandwidth_gbps"] = (sel["size_mb"] / sel["dur_ms"]).where(sel["dur_ms"] > 0)  # MB/ms = GB/s
    pairs = pd.DataFrame({"t": sel["op_type"].to_numpy(), "n": n.to_numpy()})  # a handful of (type, size) pairs
    code = pairs.groupby(["t", "n"], sort=False, dropna=False).ngroup().to_numpy()
    first = pairs.drop_duplicates()
    factor = np.array([busbw_factor(t, int(k)) for t, k in zip(first["t"], first["n"])], dtype=np.float64)
    sel["busbw_gbps"] = sel["bandwidth_gbps"] * factor[code]
    sel["step"] = assign_steps(sel, run.table("trace_steps"))  # the rank's window holding the op's start; -1 outside
    peer = np.full(len(sel), -1, dtype=np.int64)
    if "dst_rank" in sel and "src_rank" in sel:
        peer = np.where(sel["op_type"] == "send", sel["dst_rank"],
                        np.where(sel["op_type"] == "receive", sel["src_rank"], -1)).astype(np.int64)
    out = own_columns({  # each column its own array: the communication section's selections of them are no copies
        "rank": sel["rank"].to_numpy(), "step": sel["step"].to_numpy(),
        "kind": text_where(sel["op_type"].isin(P2P_TYPES), "p2p", "collective"),
        "op": sel["name"].to_numpy(), "op_type": sel["op_type"].to_numpy(), "group": sel["group"].to_numpy(),
        "start_ms": sel["start_ms"].to_numpy(), "elapse_ms": sel["dur_ms"].to_numpy(),
        "transit_ms": sel["transit_ms"].to_numpy(), "wait_ms": sel["wait_ms"].to_numpy(),
        "sync_ms": math.nan, "idle_ms": math.nan, "size_mb": sel["size_mb"].to_numpy(),
        "bandwidth_gbps": sel["bandwidth_gbps"].to_numpy(), "busbw_gbps": sel["busbw_gbps"].to_numpy(),
        "peer_rank": peer})
    out.attrs.update(source=source, note=f"Collectives from {source}, matched across the ranks of their group by "
                                         "order; transit = the shortest duration among those ranks, wait = the rest.")
    return out
