"""Communication op types: the one vocabulary of ``comm_ops.op_type`` (every family's names mapped onto it by
:func:`canonical_op_type`) and the nccl-tests bus-bandwidth factor of each type (:func:`busbw_factor`). Readers
write the vocabulary, sections read it: it lives below both."""

from __future__ import annotations

import re

#: the canonical op_type vocabulary (lower case, no separators)
OP_TYPES = ("allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "send", "receive",
            "batchsendrecv", "barrier", "other")
#: op types that are point-to-point
P2P_TYPES = ("send", "receive", "batchsendrecv")

BUSBW_FACTOR = {"allreduce": lambda n: 2 * (n - 1) / n, "allgather": lambda n: (n - 1) / n,
                "reducescatter": lambda n: (n - 1) / n, "alltoall": lambda n: (n - 1) / n}


def busbw_factor(collective: str, n: int) -> float:
    """nccl-tests bus bandwidth factor for a collective over n ranks: all_reduce 2(n-1)/n; all_gather,
    reduce_scatter, all_to_all (n-1)/n; others 1."""
    f = BUSBW_FACTOR.get(canonical_op_type(collective))
    return f(n) if f and n > 0 else 1.0


_TYPE_WORDS = [("batchsendrecv", "batchsendrecv"), ("sendrecv", "batchsendrecv"), ("allreduce", "allreduce"),
               ("allgather", "allgather"), ("reducescatter", "reducescatter"), ("alltoall", "alltoall"),
               ("broadcast", "broadcast"), ("barrier", "barrier"), ("receive", "receive"), ("recv", "receive"),
               ("send", "send"), ("reduce", "reduce")]


def canonical_op_type(name) -> str:
    """``all_reduce`` / ``AllReduce`` / ``hcom_allReduce_`` -> ``allreduce``; ``recv`` -> ``receive``; unknown ->
    ``other`` (:data:`OP_TYPES`)."""
    low = re.sub(r"[^a-z]", "", str(name or "").lower())
    for word, t in _TYPE_WORDS:
        if word in low:
            return t
    return "other"
