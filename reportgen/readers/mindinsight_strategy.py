"""MindSpore ``parallel_strategy_{rank}.json`` (the ``ProfilingParallel`` proto as JSON) -> operator and
pipeline send/receive tables, following MindSpore Insight's ``profiler/analyser/graph.py``
(../shared/research/mindinsight-cluster-profiling.md §2.6, §3.6):

* op nodes come from ``graph.node`` in file order; nodes without ``name`` or ``fullName`` are skipped
  (as MindInsight does). ``node_id`` is the 1-based topological index (MindInsight's ``topo_index``),
  ``node`` the proto's own name.
* name = ``fullName``; ``<scope>/<opType>-op<name>`` for ``Load`` ops and summary ops (fullName ending in
  ``[:scalar]``, ``[:image]``, ...).
* attributes are stringified as MindInsight does (``str`` of the parsed value; ``gen_strategy`` skipped,
  values whose dict is larger than 1024 bytes dropped).
* ``parallel_shard`` = attr ``in_strategy`` (string, "" when absent), ``parallel_group`` = attr ``group``
  ("" when absent; the section takes the sorted union over a stage's ranks, as MindInsight's MergedGraph),
  ``parallel_group_rank`` = attr ``group_ranks``.
* ``instance_type`` = ``GradientAggregation`` if ``instanceName`` contains ``grad_mirror``,
  ``Redistribution`` if it contains ``redistribution``, else "".
* inputs: op inputs remapped to topological indices, constants and parameters kept by name, unknown
  names dropped; stored comma-separated.
* pairs: ``Send`` nodes (attr ``dest_rank``) and ``Receive`` nodes (attr ``src_rank``) with attr ``sr_tag``;
  the section matches them as MindInsight's UI (build-graph.js) does.
* ``op_class`` (the schema's op-class vocabulary, :data:`reportgen.schema.OP_CLASSES`): ``communication`` for the
  graph's collective and point-to-point operator types (:data:`COMM_TYPES`: MindSpore's communication primitives,
  ``mindspore.ops.AllReduce`` ... ``Send`` / ``Receive``), else ``compute``. This is the family's rule, written
  once here: the strategy section colours the operators by this column and never by a type name.
* ``p2p`` (``send`` | ``receive`` | ""): the node is a pipeline Send / Receive (the pairs' halves).
* ``phase`` (:func:`phase_of_scope`): which part of the training graph the node is in, from its scope as
  MindSpore names it: ``recompute`` when a scope component starts with ``recompute_`` (the recompute pass prefixes
  the scopes of the nodes it duplicates), else ``backward`` when the scope's root is ``Gradients`` (the autodiff
  graph), else ``forward`` (MindInsight's graph selector: feed-forward, back-propagation, recompute graph).

The tables are the canonical ``strategy_ops`` and ``strategy_pairs`` (:mod:`reportgen.schema`).

A file that cannot be used adds a problem and returns ``{}``; it never raises. Ids are checked (issue 14):
``config.rankId`` and a Send/Receive peer rank outside ``0..MAX_RANKS-1`` are named and not used, a
``stageId`` that is not a whole number in that range is named and left empty; names are capped
(:func:`reportgen.limits.cap_text`); an attribute value that is not a number where the proto says so is
kept as its text.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

from .. import limits
from ..errors import InputError
from ..limits import as_int
from ._files import read_json

OP_COLUMNS = ["rank", "stage_id", "node_id", "node", "name", "type", "scope", "instance_type", "parallel_shard",
              "parallel_group", "parallel_group_rank", "inputs", "op_class", "p2p", "phase"]
PAIR_COLUMNS = ["rank", "kind", "node", "name", "peer_rank", "sr_tag"]

MAX_ATTR_BYTES = 1024  # MindInsight Graph.MAX_NODE_ATTRIBUTE_VALUE_BYTES (sys.getsizeof of the value dict)
_SUMMARY_SUFFIXES = tuple(f"[:{p}]" for p in ("image", "scalar", "graph", "optimized_graph", "histogram",
                                               "tensor", "loss_landscape"))
_INT = {"DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64"}
_UINT = {"DT_UINT8", "DT_UINT16", "DT_UINT32", "DT_UINT64"}
_FLOAT = {"DT_FLOAT16", "DT_FLOAT32", "DT_FLOAT64"}
#: graph operator types that are communication (MindSpore's collective and point-to-point primitives)
COMM_TYPES = frozenset({"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "AllToAll", "AlltoAll", "Send",
                        "Receive", "NeighborExchange", "Barrier"})
#: the pipeline's point-to-point operator types -> ``p2p``
P2P_TYPES = {"Send": "send", "Receive": "receive"}


def _value(v):
    """MindInsight ``Graph._parse_value_proto``."""
    if not isinstance(v, dict):
        return v
    dt = v.get("dtype")
    if dt == "DT_STRING":
        return v.get("strVal", "")
    if dt in _INT or dt in _UINT:
        raw = v.get("intVal" if dt in _INT else "uintVal", 0)
        n = as_int(raw)
        return n if n is not None else limits.cap_text(str(raw), 80)  # not a number: kept as its text
    if dt == "DT_BOOL":
        n = as_int(v.get("boolVal", 0))
        return bool(n) if n is not None else limits.cap_text(str(v.get("boolVal")), 80)
    if dt in _FLOAT:
        raw = v.get("floatVal") or v.get("doubleVal")
        x = limits.strict_float(raw)
        return x if x is not None else raw
    if dt in ("DT_TUPLE", "DT_LIST"):
        return [_value(x) for x in v.get("values", [])]
    if dt == "DT_NONE":
        return v.get("strVal")
    if dt == "DT_TYPE":
        return (v.get("typeVal") or {}).get("dataType", "")
    return v


def _attrs(attributes) -> dict[str, str]:
    out = {}
    for a in attributes or []:
        if not isinstance(a, dict) or "name" not in a or "value" not in a:
            continue
        if sys.getsizeof(a["value"]) > MAX_ATTR_BYTES or a["name"] == "gen_strategy":
            continue
        out[limits.cap_text(a["name"], 256)] = limits.cap_text(_value(a["value"]))
    return out


def _node_name(scope: str, op_type: str, node: str, full_name: str) -> str:
    """MindInsight ``Graph._process_node_name``."""
    if op_type == "Load" or not full_name or full_name.lower().endswith(_SUMMARY_SUFFIXES):
        return f"{scope}/{op_type}-op{node}"
    return full_name


def phase_of_scope(scope: str) -> str:
    """``forward`` | ``backward`` | ``recompute`` of a node from its scope (module docstring, ``phase``)."""
    parts = str(scope or "").split("/")
    if any(p.startswith("recompute_") for p in parts):
        return "recompute"
    return "backward" if parts[0] == "Gradients" else "forward"


def _int_or_none(text):
    return as_int(text)


def parse_parallel_strategy(path, rank, problems) -> dict:
    path = Path(path)
    try:
        doc = read_json(path)
    except InputError as exc:
        problems.append((str(path), exc.problem + "; file skipped"))
        return {}
    try:
        return _parse(doc, path, rank, problems)
    except (TypeError, ValueError, KeyError, AttributeError, RecursionError) as exc:  # malformed proto JSON
        problems.append((str(path), f"unexpected parallel_strategy structure ({type(exc).__name__}: "
                                    f"{str(exc)[:120]}); file skipped"))
        return {}


def _parse(doc, path: Path, rank, problems) -> dict:
    if not isinstance(doc, dict) or not isinstance(doc.get("config"), dict) or not isinstance(doc.get("graph"), dict):
        problems.append((str(path), "no 'config' / 'graph' object (not a ProfilingParallel JSON); file skipped"))
        return {}
    config, graph = doc["config"], doc["graph"]

    def add(p, text):
        problems.append((str(p), text))

    file_rank = limits.rank_id(config.get("rankId", 0) or 0, path, add, what="config.rankId")
    if rank is None:
        rank = file_rank
    elif file_rank is not None and file_rank != rank:
        problems.append((str(path), f"config.rankId {file_rank} differs from the rank {rank} of the file name; "
                                    "the file name's rank is used"))
    if rank is None:
        problems.append((str(path), "no usable rank for this file; file skipped"))
        return {}
    stage_id = _int_or_none(config.get("stageId", 0) or 0)
    if stage_id is None or not 0 <= stage_id < limits.MAX_RANKS:
        problems.append((str(path), f"config.stageId {limits.cap_text(repr(config.get('stageId')), 40)} is not a "
                                    f"stage number; left empty"))
        stage_id = None
    consts = {limits.cap_text(c["key"]) for c in graph.get("constVals") or [] if isinstance(c, dict) and c.get("key")}
    consts |= {limits.cap_text(p["name"]) for p in graph.get("parameters") or [] if isinstance(p, dict) and p.get("name")}

    nodes, skipped = [], 0
    for n in graph.get("node") or []:
        if not isinstance(n, dict) or not n.get("name") or not n.get("fullName"):
            skipped += 1
            continue
        nodes.append(n)
    if skipped:
        problems.append((str(path), f"{skipped} graph node(s) without name or fullName skipped (as MindInsight)"))
    topo = {}
    for i, n in enumerate(nodes, start=1):
        if str(n.get("opType", "")) in ("Const", "Parameter"):
            consts.add(limits.cap_text(n["name"]))
        else:
            topo[limits.cap_text(n["name"])] = i
    rows, pairs = [], []
    for i, n in enumerate(nodes, start=1):
        op_type, scope, node = (limits.cap_text(n.get("opType", ""), 256), limits.cap_text(n.get("scope", "")),
                                limits.cap_text(n["name"]))
        if op_type in ("Const", "Parameter"):
            continue
        attr = _attrs(n.get("attribute"))
        inputs = []
        for inp in n.get("input") or []:
            src = limits.cap_text(inp.get("name", "")) if isinstance(inp, dict) else ""
            if not src:
                continue
            if src in consts:
                inputs.append(src)
            elif src in topo:
                inputs.append(str(topo[src]))
        inst = limits.cap_text(n.get("instanceName", "") or "")
        instance_type = "GradientAggregation" if "grad_mirror" in inst else \
            "Redistribution" if "redistribution" in inst else ""
        name = _node_name(scope, op_type, node, limits.cap_text(n.get("fullName", "")))
        rows.append({"rank": rank, "stage_id": stage_id, "node_id": str(i), "node": node, "name": name,
                     "type": op_type, "scope": scope, "instance_type": instance_type,
                     "parallel_shard": attr.get("in_strategy", ""), "parallel_group": attr.get("group", ""),
                     "parallel_group_rank": attr.get("group_ranks", ""), "inputs": ",".join(inputs),
                     "op_class": "communication" if op_type in COMM_TYPES else "compute",
                     "p2p": P2P_TYPES.get(op_type, ""), "phase": phase_of_scope(scope)})
        if op_type in ("Send", "Receive"):
            key = "dest_rank" if op_type == "Send" else "src_rank"
            peer = attr.get(key)
            peer = limits.rank_id(peer, path, add, what=f"{op_type} node {node} attribute {key}") if peer is not None \
                else None
            pairs.append({"rank": rank, "kind": "send" if op_type == "Send" else "receive", "node": str(i),
                          "name": name, "peer_rank": peer, "sr_tag": attr.get("sr_tag", "")})
    out = {"strategy_ops": pd.DataFrame(rows, columns=OP_COLUMNS)}
    if pairs:
        out["strategy_pairs"] = pd.DataFrame(pairs, columns=PAIR_COLUMNS)
    return out
