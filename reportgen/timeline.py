"""One device timeline per run (``device_timeline``, columns in :mod:`reportgen.schema`), built here and nowhere else
from the tables the readers fill, and the step breakdown measured on it.

:func:`attach` (called at the end of :func:`reportgen.readers.read_run`) registers the table as a lazy loader and
fills ``step_time`` where the family wrote no breakdown of its own (:func:`fill_step_time`).

Every interval carries ``op_class`` (compute | communication | wait | memcpy | other, :data:`reportgen.schema.
OP_CLASSES`), decided once per family where the family's tables say it: the Ascend readers write it on their
device tasks (:func:`reportgen.readers.ascend.op_class`; MindSpore CPU ops:
:func:`reportgen.readers.ascend_trace.cpu_op_class`); for the families whose tables carry the class in their own
words it is mapped here, one documented function or line per family. ``kind`` is ``op_class`` with a p2p receive
told apart from the rest of communication (``receive``: the pipeline bubble of :func:`breakdown`).

Rows per family; a run gets its rows from the first source below that has data (one source per run, so that
every rank's intervals and step windows come from the same kind of file):

* Kineto GPU ``gpu_ops``: :func:`gpu_op_class` (kernel -> compute, comm -> communication, memcpy and memset ->
  memcpy); a comm kernel is a receive when its ``collectives`` row says ``recv`` (without collective args, a name
  with Recv and without Send). stream = ``stream <n>``.
* Kineto CPU (gloo), ranks without GPU ops: the ``gloo:<op>`` spans of ``collectives`` -> communication
  (``gloo:recv`` -> receive), on the thread that ran them; ``host_ops`` (the main thread's top-level CPU ops)
  -> compute, except ``c10d::`` ops (the enqueue of a collective, or a blocking send/recv around its gloo span:
  communication, not computation, left to the gloo spans), and except the time an op holds a whole gloo span
  (:func:`_without_waits`: an autograd function around a blocking all_reduce waits, it does not compute).
  stream = ``thread <tid>``.
* Ascend trace_view.json / DB: ``hccl_ops`` -> communication (``hcom_receive`` -> receive), lane as stream;
  ``device_ops`` with the reader's ``op_class``. On a rank with ``hccl_ops`` its communication device tasks (HCCL's
  copies and stream tasks) are left to ``hccl_ops``, which span them; without (MindSpore CPU: collectives are host
  ops) they are the rank's communication (Receive -> receive).
* Ascend text output without trace_view.json (:func:`_ascend_tables`): ``kernels`` (kernel_details.csv: Start Time,
  Duration) with the reader's ``op_class``, lane = ``stream <id>``; ``comm_ops`` (communication.json: per op start
  timestamp and elapse) -> communication (``hcom_receive`` -> receive), lane ``Communication ops``. On a rank with
  ``comm_ops`` its communication kernels (hcom_* rows of kernel_details.csv) are left to ``comm_ops``, which time the
  same operators. A rank with ``comm_ops`` only (no kernel file) has communication only. Every rank's timestamps are
  the same epoch clock (the run origin); the same collective ends within ~30 µs on every rank of st/level2.
* MindSpore Insight ``mi_timeline_ops`` (timeline display files, the ranks whose file has Steps blocks):
  computation -> compute, communication -> communication (Receive -> receive).
* MindSpore Insight without timeline files: ``step_ops`` (the step trace's communication ops) -> communication
  (Receive -> receive), source trace; and per step the FP/BP span (``step_trace``: forward start = start +
  step interval, backward end = forward start + fp_bp) minus the union of the rank's communication ops ->
  compute, ``source = "derived"`` (name ``FP/BP minus communication``).

Step: the window of the rank the interval starts in (:func:`step_windows`), -1 outside every window. Without step
markers, step trace or Steps blocks, windows are derived from step durations (:func:`derived_windows`).
"""

from __future__ import annotations

import re
import weakref

import numpy as np
import pandas as pd

from .frames import positions_by, text_where
from .intervals import clipped_lengths, difference, intersect, union
from .model import TABLES, ByRank, Run

COLUMNS = list(TABLES["device_timeline"])
WINDOW_COLUMNS = ["rank", "step", "start_ms", "end_ms"]
RECEIVE = re.compile(r"Receive|hcom_receive|^gloo:recv", re.IGNORECASE)
DERIVED_NAME = "FP/BP minus communication"
BREAKDOWN_COLS = ["computing_ms", "comm_not_overlapped_ms", "overlapped_ms", "comm_ms", "free_ms"]
RECEIVE_COLS = ["stage_ms", "bubble_ms", "comm_not_overlapped_exclude_receive_ms"]



def _end(df: pd.DataFrame) -> pd.Series:
    """End times: the reader's exact ``end_ms`` (from integer ns) where it has one, else start + duration."""
    return df["end_ms"] if "end_ms" in df else df["start_ms"] + df["dur_ms"]

def op_type(name: pd.Series) -> pd.Series:
    """``Gradients/Default/Grad_MatMul/MatMul-op3`` -> ``MatMul``; ``MatMul`` stays."""
    return name.astype(str).str.rsplit("/", n=1).str[-1].str.replace(r"-op\d+$", "", regex=True)


def _rows(rank, start, end, kind, name, stream, source="trace") -> pd.DataFrame:
    """Timeline rows; ``op_class`` is ``kind`` with ``receive`` as communication. The source table's arrays are
    shared, not copied (read-only views; a run's tables are never written in place once the reader has made them):
    at 1,024 generated Kineto ranks the device ops' rows kept from the read held 48 MiB of copies, 19 MiB now
    (issue 30)."""
    df = pd.DataFrame(copy=False, data={
        "rank": np.asarray(rank, dtype=np.int64), "start_ms": np.asarray(start, dtype=float),
        "end_ms": np.asarray(end, dtype=float), "kind": kind, "name": np.asarray(name, dtype=object),
        "stream": np.asarray(stream, dtype=object), "source": source})
    df["op_class"] = df["kind"].where(df["kind"] != "receive", "communication")
    return df


def per_value(values: pd.Series, f) -> pd.Series:
    """``f(values)`` for an elementwise ``f`` (string methods), computed once per distinct value: operator names and
    streams repeat in every step of every rank, so this is the number of distinct names, not of rows."""
    codes, uniques = values.factorize(use_na_sentinel=False)
    out = f(pd.Series(uniques, dtype=values.dtype))
    return pd.Series(out.take(codes).to_numpy() if isinstance(out, pd.Series) else np.asarray(out)[codes],
                     index=values.index, dtype=out.dtype)


def labels(mask, if_true: str, if_false: str):
    """``np.where(mask, if_true, if_false)`` as a text array that holds the two strings themselves (same dtype in a
    frame): a numpy text array becomes one Python string per row (~60 bytes each, 120 MB for 2M timeline rows)."""
    return pd.array(np.array([if_false, if_true], dtype=object)[np.asarray(mask, dtype=bool).astype(np.intp)],
                    dtype=pd.Series([if_true]).dtype)


def _is_receive(names: pd.Series) -> pd.Series:
    return per_value(names, lambda n: n.astype(str).str.contains(RECEIVE))


def _comm_kind(names: pd.Series) -> np.ndarray:
    return text_where(_is_receive(names), "receive", "communication")


# --------------------------------------------------------------------------- per family


#: Kineto ``gpu_ops.kind`` -> op class (the reader's kind: ``comm`` = NCCL / RCCL / HCCL kernels, kineto_decode.py)
GPU_OP_CLASS = {"kernel": "compute", "comm": "communication", "memcpy": "memcpy", "memset": "memcpy"}


def gpu_op_class(kind: pd.Series) -> pd.Series:
    """The Kineto rule for the class of a device op: :data:`GPU_OP_CLASS` of its ``gpu_ops.kind`` (an unknown kind
    -> other)."""
    return kind.map(GPU_OP_CLASS).fillna("other").astype(object)


def host_op_class(names: pd.Series) -> np.ndarray:
    """The class of a PyTorch CPU op (``host_ops``, ``cpu_ops``): a ``c10d::`` op is communication (the enqueue of a
    collective, or a blocking send/recv around its gloo span), every other op computation."""
    return text_where(per_value(names.astype(str), lambda n: n.str.startswith("c10d::")).to_numpy(dtype=bool),
                      "communication", "compute").astype(object, copy=False)


def gpu_rows(g: pd.DataFrame, coll: pd.DataFrame | None) -> pd.DataFrame:
    """Kineto ``gpu_ops`` (and the ``collectives`` that say which kernels are p2p receives) -> timeline rows."""
    kind = gpu_op_class(g["kind"])
    comm = (kind == "communication").to_numpy()
    recv, has_args = np.zeros(len(g), bool), set()
    if coll is not None and "collective" in coll:
        rv = coll[(coll["source"] == "gpu_kernel") & (coll["collective"] == "recv")]
        if not rv.empty:
            # (rank, name, start) among the receives': only the rows whose start is one of theirs can be (NaN too)
            start = g["start_ms"].to_numpy(float)
            cand = np.flatnonzero(np.isin(start, rv["start_ms"].to_numpy(float)) | np.isnan(start))
            recv = np.zeros(len(g), bool)
            if len(cand):
                recv[cand] = pd.MultiIndex.from_frame(g[["rank", "name", "start_ms"]].iloc[cand]).isin(
                    pd.MultiIndex.from_frame(rv[["rank", "name", "start_ms"]]))
        has_args = set(coll.loc[coll["source"] == "gpu_kernel", "rank"])
    recv_name = per_value(g["name"], lambda n: n.astype(str).str.lower().str.contains("recv")
                          & ~n.astype(str).str.lower().str.contains("send"))
    by_name = (recv_name & ~g["rank"].isin(has_args)).to_numpy()
    kind = text_where(comm & (recv | by_name), "receive", kind.to_numpy())  # (Series.where: a str per row)
    return _rows(g["rank"], g["start_ms"], _end(g), kind, g["name"],
                 per_value(g["stream"], lambda v: "stream " + v.astype(str)))


def kept_gpu_rows(run: Run, g: pd.DataFrame, coll: pd.DataFrame | None) -> pd.DataFrame:
    """:func:`gpu_rows` of ``g`` and ``coll`` (a reader's step breakdown), kept on the run for the device timeline:
    :func:`_kineto_gpu` takes them while ``g`` and ``coll`` are still the run's tables (weak references, as
    :func:`step_windows`' memo: a table replaced since, gpu_ops without its repeats, is not kept alive)."""
    rows = gpu_rows(g, coll)
    run.__dict__["_gpu_rows"] = (weakref.ref(g), None if coll is None else weakref.ref(coll), rows)
    return rows


def _kineto_gpu(run: Run) -> pd.DataFrame | None:
    g = run.table("gpu_ops")
    if g is None:
        return None
    coll = run.table("collectives")
    kept = run.__dict__.pop("_gpu_rows", None)  # made once (1.4 s at 1,024 ranks): taken if of these same tables
    if kept is not None and kept[0]() is g and (None if kept[1] is None else kept[1]()) is coll:
        return kept[2]
    return gpu_rows(g, coll)


def _gloo(run: Run) -> pd.DataFrame | None:
    coll, host = run.table("collectives"), run.table("host_ops")
    parts = []
    if coll is not None and "source" in coll:
        c = coll[coll["source"] == "gloo"]
        parts.append(_rows(c["rank"], c["start_ms"], _end(c), _comm_kind(c["name"]), c["name"],
                           "thread " + c["tid"].astype(str)))
    if host is not None:
        h = host[host_op_class(host["name"]) == "compute"]  # c10d:: ops: left to the gloo spans
        h = _without_waits(h.assign(end_ms=_end(h)), c if parts else None)
        parts.append(_rows(h["rank"], h["start_ms"], h["end_ms"], "compute", h["name"],
                           "thread " + h["tid"].astype(str)))
    parts = [p for p in parts if not p.empty]
    if not parts or not any((p["kind"] == "compute").any() for p in parts):
        return None  # collectives without the host's compute: nothing to set them against
    return pd.concat(parts, ignore_index=True)


def _without_waits(h: pd.DataFrame, spans: pd.DataFrame | None) -> pd.DataFrame:
    """Top-level host ops without the collectives they wait for: an op (an autograd function or module around a
    blocking ``all_reduce``) that holds a whole gloo span from its start to its end is waiting for it during that
    span, not computing. Such an op is cut into the pieces around the spans it holds (same name); an op that
    merely overlaps a span (backward beside DDP's asynchronous all-reduce) keeps its time."""
    if spans is None or spans.empty or h.empty:
        return h
    out = [h]
    cut_idx = []
    spans_of = ByRank(spans)  # split once: a filter per rank read every rank's spans (ranks x rows)
    for rank, hh in h.groupby("rank", sort=False):
        cc = spans_of[rank]
        if cc.empty:
            continue
        hh = hh.sort_values("start_ms", kind="stable")
        hs, he = hh["start_ms"].to_numpy(float), hh["end_ms"].to_numpy(float)
        cs, ce = union(cc["start_ms"].to_numpy(float), _end(cc).to_numpy(float))
        i = np.searchsorted(hs, cs, side="right") - 1
        inside = (i >= 0) & (he[np.clip(i, 0, None)] >= ce)
        if not inside.any():
            continue
        # each held op k becomes the pieces between the spans it holds (spans: disjoint, in time order):
        # [start, s1], [e1, s2], ..., [em, end], those of positive length, in op then time order
        k, s0, e0 = i[inside], cs[inside], ce[inside]
        order = np.argsort(k, kind="stable")
        k, s0, e0 = k[order], s0[order], e0[order]
        ops, first = np.unique(k, return_index=True)
        last = np.r_[first[1:], len(k)] - 1
        p_op = np.concatenate([k, ops])  # a piece ending at each held span, and each op's last piece
        p_end = np.concatenate([s0, he[ops]])
        prev = np.r_[-1.0, e0[:-1]]  # a piece starts where the op starts or where the span before ends
        prev[first] = hs[ops]
        p_start = np.concatenate([prev, e0[last]])
        p_rank = np.concatenate([np.arange(len(k)), last + 0.5])  # the last piece after the op's spans
        keep = p_end > p_start
        sel = np.lexsort((p_rank[keep], p_op[keep]))
        take = p_op[keep][sel]
        if len(take):
            out.append(hh.iloc[take].assign(start_ms=p_start[keep][sel], end_ms=p_end[keep][sel]))
        cut_idx.extend(hh.index[ops].tolist())
    if not cut_idx:
        return h
    out[0] = h.drop(index=cut_idx)
    res = pd.concat(out, ignore_index=True)
    if "dur_ms" in res:
        res["dur_ms"] = res["end_ms"] - res["start_ms"]
    return res


def _ascend(run: Run) -> pd.DataFrame | None:
    h, d = run.table("hccl_ops"), run.table("device_ops")
    parts = []
    with_hccl = set()
    if h is not None:
        with_hccl = set(h["rank"])
        parts.append(_rows(h["rank"], h["start_ms"], _end(h), _comm_kind(h["op"]), h["op"],
                           h["lane"].astype(str)))
    if d is not None:
        cls = d["op_class"] if "op_class" in d else pd.Series("compute", index=d.index, dtype=object)
        comm = (cls == "communication").to_numpy()
        keep = ~(comm & d["rank"].isin(with_hccl).to_numpy())  # the HCCL op spans its tasks
        d, cls, comm = d[keep], cls[keep], comm[keep]
        kind = np.where(comm, _comm_kind(op_type(d["name"])), cls.astype(object).to_numpy())
        parts.append(_rows(d["rank"], d["start_ms"], _end(d), kind, d["name"], d["stream"].astype(str)))
    return pd.concat(parts, ignore_index=True) if parts else None


COMM_OPS_STREAM = "Communication ops"


def _ascend_tables(run: Run) -> pd.DataFrame | None:
    """Ascend text output without trace_view.json: ``kernels`` and ``comm_ops`` (module doc)."""
    k, c = run.table("kernels"), run.table("comm_ops")
    parts = []
    with_comm = set()
    if c is not None and {"start_ms", "elapse_ms"} <= set(c.columns):
        c = c.dropna(subset=["start_ms", "elapse_ms"])
        if not c.empty:
            with_comm = set(c["rank"])
            parts.append(_rows(c["rank"], c["start_ms"], c["start_ms"] + c["elapse_ms"], _comm_kind(c["op"]),
                               c["op"], COMM_OPS_STREAM))
    if k is not None and {"start_ms", "dur_ms"} <= set(k.columns):
        k = k.dropna(subset=["start_ms", "dur_ms"])
        cls = k["op_class"] if "op_class" in k else pd.Series("compute", index=k.index, dtype=object)
        comm = (cls == "communication").to_numpy()
        keep = ~(comm & k["rank"].isin(with_comm).to_numpy())  # comm_ops time the same operators
        k, cls, comm = k[keep], cls[keep], comm[keep]
        if not k.empty:
            kind = np.where(comm, _comm_kind(op_type(k["name"])), cls.astype(object).to_numpy())
            stream = k["stream"]
            if pd.api.types.is_float_dtype(stream):  # a CSV column with blanks reads as float: "stream 2", not 2.0
                stream = stream.astype("Int64")
            lane = per_value(stream.astype(str), lambda v: "stream " + v).where(stream.notna().to_numpy(),
                                                                                  "stream unknown")
            parts.append(_rows(k["rank"], k["start_ms"], k["start_ms"] + k["dur_ms"], kind, k["name"], lane))
    return pd.concat(parts, ignore_index=True) if parts else None


def _mindinsight(run: Run) -> pd.DataFrame | None:
    mo, ms = run.table("mi_timeline_ops"), run.table("mi_timeline_steps")
    if mo is None or ms is None:
        return None
    mo = mo[mo["rank"].isin(set(ms["rank"]))]  # without Steps blocks the ops are in no step
    if mo.empty:
        return None
    kind = text_where(mo["kind"] == "communication", _comm_kind(mo["name"]), "compute")
    return _rows(mo["rank"], mo["start_ms"], _end(mo), kind, mo["name"],
                 mo["stream"].astype(str))


def _derived(run: Run) -> pd.DataFrame | None:
    """MindInsight step trace: its communication ops, and the FP/BP span minus them as derived compute."""
    so, st = run.table("step_ops"), run.table("step_trace")
    parts = []
    if so is not None:
        parts.append(_rows(so["rank"], so["start_ms"], so["end_ms"], labels(_is_receive(so["op"]), "receive",
                                                                             "communication"), so["op"],
                           per_value(so["stream"], lambda v: "stream " + v.astype(str))))
    if st is not None and {"start_ms", "step_interval_ms", "fp_bp_ms"} <= set(st.columns):
        st = st.dropna(subset=["start_ms", "step_interval_ms", "fp_bp_ms"])
        comm_of = positions_by_rank(so) if so is not None else {}
        fp_all = (st["start_ms"] + st["step_interval_ms"]).to_numpy()
        bp_all = fp_all + st["fp_bp_ms"].to_numpy()
        ranks, starts, ends = [], [], []
        for rank, rows in positions_by_rank(st).items():
            c = comm_of.get(rank)
            comm = union(so["start_ms"].to_numpy()[c], so["end_ms"].to_numpy()[c]) if c is not None \
                else (np.empty(0), np.empty(0))
            fp, bp = fp_all[rows], bp_all[rows]
            ok = bp > fp
            comp = difference(union(fp[ok], bp[ok]), comm)
            if len(comp[0]):
                ranks.append(np.full(len(comp[0]), rank))
                starts.append(comp[0])
                ends.append(comp[1])
        if ranks:  # one frame for every rank's rows (one per rank cost ~1 ms each at thousands of ranks)
            parts.append(_rows(np.concatenate(ranks), np.concatenate(starts), np.concatenate(ends), "compute",
                               DERIVED_NAME, "derived", source="derived"))
    return pd.concat(parts, ignore_index=True) if parts else None


def positions_by_rank(df: pd.DataFrame) -> dict:
    """rank -> the positions of its rows (in table order), ranks ascending (:func:`reportgen.frames.positions_by`: a
    row without a rank is in no rank's): one stable sort instead of a filter of the whole table per rank."""
    return positions_by(df["rank"].to_numpy())


#: in order of preference (the first with data gives the run's timeline)
BUILDERS = (_kineto_gpu, _gloo, _ascend, _mindinsight, _derived, _ascend_tables)


# --------------------------------------------------------------------------- steps


#: the tables :func:`step_windows` reads: its memo on the run holds while each is the same object
WINDOW_INPUTS = ("trace_steps", "mi_timeline_ops", "mi_timeline_steps", "step_trace", "step_time", "comm_ops",
                 "kernels")


def step_windows(run: Run, derived: bool = True) -> pd.DataFrame | None:
    """Step windows (rank, step, start_ms, end_ms): ``trace_steps`` (ProfilerStep, Ascend steps, repeated ops);
    else the MindInsight timeline's Steps blocks when the timeline files give the run's intervals (:func:`build`);
    else the step trace's start / end; else (``derived``) :func:`derived_windows`.

    Computed once per run and ``derived`` (a report asks 6-8 times: the timeline, the operator rows, the memory
    rules, the drill-down, the Marey view, the critical path; :func:`derived_windows` is a group-by and two merges):
    kept on the run while every table of :data:`WINDOW_INPUTS` is the object it was computed from (a table loaded
    later, ``step_time`` refilled by :func:`fill_step_time`, ``kernels`` settled by ``Run.table``: computed again).
    The frame is shared: callers filter or copy it, never write into it."""
    memo = run.__dict__.setdefault("_windows_cache", {})
    hit = memo.get(derived)
    if hit is not None and all(run.tables.get(n) is (ref() if ref is not None else None)
                               for n, ref in zip(WINDOW_INPUTS, hit[0])):
        return hit[1]
    w = _marked_windows(run)
    out = derived_windows(run) if w is None and derived else w
    # weak references: a table replaced since is not kept alive by the memo (a big run's kernels)
    memo[derived] = (tuple(None if run.tables.get(n) is None else weakref.ref(run.tables[n]) for n in WINDOW_INPUTS),
                     out)
    return out


#: how :func:`derived_windows` times a step (said in the merged timeline file and the Marey caption)
DERIVED_WINDOWS = ("derived: each step ends at the end of its last recorded device operation (comm_ops, kernels) "
                   "and lasts its step time (step_time, which has durations only)")


def derived_windows(run: Run) -> pd.DataFrame | None:
    """Step windows when the files time no step (Ascend text output without trace_view.json, whose
    step_trace_time.csv has durations only): per rank and step, end = the end of the step's last operation in
    ``comm_ops`` / ``kernels`` (their own step ids), start = end - ``step_time.step_ms``. A start within 1 µs after
    the step's first operation is moved onto it (Ascend's step time is last end - first start: float rounding must
    not leave the first kernel outside its step)."""
    st = run.table("step_time")
    if st is None or "step_ms" not in st:
        return None
    spans = []
    c = run.table("comm_ops")
    if c is not None and {"start_ms", "elapse_ms", "step"} <= set(c.columns):
        spans.append(pd.DataFrame({"rank": c["rank"], "step": c["step"], "first": c["start_ms"],
                                   "end": c["start_ms"] + c["elapse_ms"]}))
    k = run.table("kernels")
    if k is not None and {"start_ms", "dur_ms", "step"} <= set(k.columns):
        spans.append(pd.DataFrame({"rank": k["rank"], "step": k["step"], "first": k["start_ms"],
                                   "end": k["start_ms"] + k["dur_ms"]}))
    if not spans:
        return None
    g = pd.concat(spans, ignore_index=True).dropna().groupby(["rank", "step"], as_index=False)
    span = g["first"].min().merge(g["end"].max(), on=["rank", "step"])
    w = st[["rank", "step", "step_ms"]].merge(span, on=["rank", "step"], how="inner").dropna()
    if w.empty:
        return None
    start = w["end"] - w["step_ms"]
    start = start.where(~((start > w["first"]) & (start - w["first"] <= 1e-3)), w["first"])
    return pd.DataFrame({"rank": w["rank"].astype(int).to_numpy(), "step": w["step"].astype(int).to_numpy(),
                         "start_ms": start.to_numpy(float), "end_ms": w["end"].to_numpy(float)})


def _marked_windows(run: Run) -> pd.DataFrame | None:
    ts = run.table("trace_steps")
    if ts is not None:
        return ts[WINDOW_COLUMNS]
    if _mindinsight(run) is not None:
        return run.table("mi_timeline_steps")[WINDOW_COLUMNS]
    st = run.table("step_trace")
    if st is not None and {"start_ms", "end_ms"} <= set(st.columns):
        st = st[WINDOW_COLUMNS].dropna()
        return None if st.empty else st
    return None


def assign_steps(df: pd.DataFrame, windows: pd.DataFrame | None, col: str = "start_ms") -> np.ndarray:
    """Per row: the step of the rank's window that contains ``df[col]`` (start <= t < end), -1 outside all."""
    out = np.full(len(df), -1, dtype=np.int64)
    if windows is None or windows.empty or df.empty:
        return out
    t = df[col].to_numpy(dtype=float)
    rows_of = positions_by_rank(df)
    w_rank, w_start = windows["rank"].to_numpy(), windows["start_ms"].to_numpy(dtype=float)
    order = np.lexsort((w_start, w_rank))  # by rank, then start (stable)
    w_start, w_end, w_step = w_start[order], windows["end_ms"].to_numpy()[order], windows["step"].to_numpy()[order]
    keys, first = np.unique(w_rank[order], return_index=True)
    for rank, lo, hi in zip(keys.tolist(), first, np.append(first[1:], len(order))):
        rows = rows_of.get(rank)
        if rows is None:
            continue
        i = np.searchsorted(w_start[lo:hi], t[rows], side="right") - 1
        ic = np.clip(i, 0, None) + lo
        inside = (i >= 0) & (t[rows] < w_end[ic])
        out[rows[inside]] = w_step[ic[inside]]
    return out


def dataloader_rows(df: pd.DataFrame, steps: pd.DataFrame | None) -> pd.DataFrame:
    """``enumerate(DataLoader)`` spans (rank, name, start_ms, dur_ms) -> the ``dataloader`` table: each with the step
    window of its rank that contains its start (-1 if none). One rule for the Kineto and the Ascend trace readers."""
    df = df.assign(step=assign_steps(df, steps))
    return df[["rank", "step", "name", "start_ms", "dur_ms"]].reset_index(drop=True)


def build(run: Run) -> pd.DataFrame | None:
    """The device timeline of the run (module doc), or None when no source has intervals."""
    for builder in BUILDERS:
        tl = builder(run)
        if tl is not None and not tl.empty:
            break
    else:
        return None
    timed = (tl["end_ms"].notna() & tl["start_ms"].notna()).to_numpy()
    if not timed.all():
        tl = tl[timed]
    tl = tl.assign(step=assign_steps(tl, step_windows(run)))
    # by rank, start, end (stable); rows already in that order stay as they are, so their columns remain the source's
    # arrays (a sorted copy of each otherwise)
    order = np.lexsort((tl["end_ms"].to_numpy(), tl["start_ms"].to_numpy(), tl["rank"].to_numpy()))
    if not (order == np.arange(len(order))).all():
        tl = tl.take(order)
    return tl.reset_index(drop=True)[COLUMNS]


# --------------------------------------------------------------------------- breakdown


def breakdown(tl: pd.DataFrame, windows: pd.DataFrame, receive: bool | None = None) -> pd.DataFrame:
    """Per rank and step window W (the definitions of every family's breakdown: Ascend step_trace_time.csv,
    Kineto GPU via :func:`reportgen.readers.kineto.step_breakdown`, gloo and MindSpore CPU via :func:`fill_step_time`):
    computing = |U(compute) ∩ W|, communication = |U(communication ∪ receive) ∩ W|,
    comm not overlapped = |(U(comm) \\ U(compute)) ∩ W|, overlapped = communication - not overlapped,
    free = |W| - |(U(compute) ∪ U(comm)) ∩ W| (memcpy / idle), so step = computing + comm not overlapped + free.
    When ``receive`` (default: the timeline has receive rows): bubble (pure receive) = |(U(receive) \\ U(compute))
    ∩ W|, stage = step - bubble, comm not overlapped excluding receive = comm not overlapped - bubble; else NaN.
    Intervals are clipped to the window they run in."""
    if receive is None:
        receive = bool((tl["kind"] == "receive").any())
    columns = ["rank", "step", "step_ms"] + BREAKDOWN_COLS + RECEIVE_COLS
    windows = windows[windows["rank"].notna()]
    if windows.empty:
        df = pd.DataFrame([], columns=columns)
        df[RECEIVE_COLS] = df[RECEIVE_COLS].astype(float)
        return df
    # every rank's rows by position (each rank's rows in their order; rows of no rank in no window): no frame per rank
    kind = tl["kind"]
    is_comp = (kind == "compute").to_numpy(bool, na_value=False)
    is_recv = (kind == "receive").to_numpy(bool, na_value=False)
    is_comm = kind.isin(["communication", "receive"]).to_numpy(bool, na_value=False)
    start, end = tl["start_ms"].to_numpy(dtype=float), tl["end_ms"].to_numpy(dtype=float)
    rows_of = positions_by_rank(tl)
    none = np.zeros(0, dtype=np.intp)
    w_rank = windows["rank"].to_numpy()
    w_order = np.argsort(w_rank, kind="stable")  # by rank, each rank's windows in their order (groupby's rows)
    w_sorted = w_rank[w_order]
    w_lo = windows["start_ms"].to_numpy()[w_order]
    w_hi = windows["end_ms"].to_numpy()[w_order]
    n = len(w_order)
    cols = {c: np.zeros(n) for c in ("computing", "comm", "over", "both", "bubble")}
    bounds = np.flatnonzero(np.r_[True, w_sorted[1:] != w_sorted[:-1], True])
    for a, b in zip(bounds[:-1], bounds[1:]):
        r = w_sorted[a]
        idx = rows_of.get(r.item() if hasattr(r, "item") else r, none)
        s_r, e_r = start[idx], end[idx]
        m = is_comp[idx]
        comp = union(s_r[m], e_r[m])
        m = is_comm[idx]
        comm = union(s_r[m], e_r[m])
        both = union(np.concatenate([comm[0], comp[0]]), np.concatenate([comm[1], comp[1]]))
        lo, hi = w_lo[a:b].astype(float), w_hi[a:b].astype(float)
        cols["computing"][a:b] = clipped_lengths(comp, lo, hi)
        cols["comm"][a:b] = clipped_lengths(comm, lo, hi)
        cols["over"][a:b] = clipped_lengths(intersect(comm, comp), lo, hi)
        cols["both"][a:b] = clipped_lengths(both, lo, hi)
        if receive:
            m = is_recv[idx]
            cols["bubble"][a:b] = clipped_lengths(difference(union(s_r[m], e_r[m]), comp), lo, hi)
    w = w_hi - w_lo
    comm_w, over = cols["comm"], cols["over"]
    out = {"rank": w_sorted, "step": windows["step"].to_numpy()[w_order], "step_ms": w,
           "computing_ms": cols["computing"], "comm_not_overlapped_ms": comm_w - over, "overlapped_ms": over,
           "comm_ms": comm_w, "free_ms": w - cols["both"]}
    if receive:
        bubble = cols["bubble"]
        out.update(bubble_ms=bubble, stage_ms=w - bubble, comm_not_overlapped_exclude_receive_ms=comm_w - over - bubble)
    # built from one record per window, as pandas lays out such a frame (the sections' per-rank means over a frame
    # laid out otherwise came out an ulp apart: pandas' grouped means depend on the frame's blocks)
    keys = list(out)
    df = pd.DataFrame([dict(zip(keys, row)) for row in zip(*(out[k].tolist() for k in keys))], columns=columns)
    df[RECEIVE_COLS] = df[RECEIVE_COLS].astype(float)
    return df


def fill_step_time(run: Run) -> None:
    """``step_time`` breakdown from the device timeline where the family wrote none (gloo, MindSpore CPU): the
    rows whose computing_ms is NaN, or every ``trace_steps`` window when there is no ``step_time`` at all.
    Only ranks whose timeline has compute intervals are filled (without them nothing is measured against the
    communication). MindSpore Insight runs keep their own ``cluster_overlap`` breakdown."""
    if run.table("cluster_overlap") is not None:
        return
    st, windows = run.table("step_time"), run.table("trace_steps")
    if windows is None:
        return
    todo = windows[WINDOW_COLUMNS]
    if st is not None:
        missing = st.loc[st["computing_ms"].isna(), ["rank", "step"]]
        todo = todo.merge(missing, on=["rank", "step"])
    if todo.empty:
        return
    tl = run.table("device_timeline")
    if tl is None:
        return
    todo = todo[todo["rank"].isin(set(tl.loc[tl["kind"] == "compute", "rank"]))]
    if todo.empty:
        return
    bd = breakdown(tl, todo)
    if st is None:
        run.tables["step_time"] = bd.reindex(columns=list(TABLES["step_time"])).sort_values(["rank", "step"]) \
            .reset_index(drop=True)
        run.steps = sorted(set(run.steps) | set(bd["step"].tolist()))
    else:
        cols = BREAKDOWN_COLS + [c for c in RECEIVE_COLS if bd[c].notna().any()]
        key = ["rank", "step"]
        st = st.set_index(key)
        st.loc[pd.MultiIndex.from_frame(bd[key]), cols] = bd[cols].to_numpy()
        run.tables["step_time"] = st.reset_index()
    run.notes.append("Computing / communication / overlap of rank(s) " +
                     ", ".join(map(str, sorted(int(r) for r in bd["rank"].unique()))) +
                     " were measured on the device timeline (no breakdown was written by the profiler).")


def attach(run: Run) -> None:
    """Register ``device_timeline`` as a lazy table of ``run`` and fill ``step_time`` from it where needed."""
    if "device_timeline" not in run.tables:
        run.loaders["device_timeline"] = lambda: build(run)
    fill_step_time(run)
