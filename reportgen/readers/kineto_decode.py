"""Streamed decoder for one PyTorch Kineto trace file (``*.pt.trace.json`` / ``*.json.gz``).

Format facts: ../shared/research/kineto-traces-and-hta.md §4 and ../shared/research/generated-runs.md §2.
The file is read in chunks (``.gz`` through ``gzip.open``, never decompressed as a whole); each chunk's
complete events are decoded in ONE call and only the few events reportgen needs are kept, in typed
arrays. No Python dict per event is kept for the whole file (HTA's whole-file ``json.load`` + DataFrame
costs 6-8 MB RSS per MB of JSON).

Decoding backends, fastest first (the first importable one is used; measured with
bench/kineto_decoders.py, see bench/README.md):

* ``msgspec`` (optional): each chunk is decoded into small ``msgspec.Struct`` s that keep only
  ph/cat/name/ts/dur/pid/tid and leave ``args`` as undecoded raw JSON (``msgspec.Raw``); ``args`` are
  decoded (into typed structs) only for the events that are kept. 2-4x faster than chunked orjson at
  the same memory (62 MB GPU trace: 0.11 s vs 0.37 s; 281 MB synthetic: 1.0 s vs 2.2 s, 150 MB peak
  RSS with the tables, vs 1.6 GB for whole-file json.load).
* ``json`` (stdlib): each chunk becomes dicts (``parse_float=str``), ~5x slower than msgspec.

Both keep every float literal as its text (msgspec ``float_hook=str``, json ``parse_float=str``), so
``ts``/``dur`` become exact integer ns (:func:`reportgen.timebase.to_ns`), never a float of an epoch
time. orjson is not a backend: it has no hook for float literals, and a double keeps ~16 significant
digits where Kineto's epoch µs with ns decimals (``1704458676522690.655``) need 19.
Invalid UTF-8 inside an event becomes U+FFFD instead of ending the file (old Kineto wrote some).

Collecting (issue 30 #1): a batch of msgspec Structs takes a column path (:meth:`_Collector._feed_fast`): one pass
puts the events in buckets by category (GPU ops, CPU ops and annotations, runtime/driver calls, instants, the rest);
then per bucket the times are converted as columns (:func:`_bulk_ns`: ints, or float texts with up to 3 decimals,
parsed exactly by numpy), the args decoded into the typed structs of the few fields used, ids checked as int
columns, and the rows appended as arrays. The per-event handlers (the json backend's path) take any bucket
holding a value that is not plain, and the rare events (steps, collectives, user ranges); refused values and the
rows of the tables that several buckets fill are put back in event order at the end of the batch, so both paths
give the same tables and problems (tests/test_kineto_decode.py, bench/kineto_fast_check.py on every fixture).

Chunking reuses :mod:`.ascend_trace`'s helpers: a chunk is cut at the last ``}, {`` boundary
(``_last_cut``); if that cut lands inside a string the decode fails and an earlier cut is tried; the
last, incomplete event is finished with ``json.JSONDecoder.raw_decode`` once more data is read
(``_one_event``). The top-level object is walked key by key, so metadata is found wherever it is
(Kineto writes ``traceName``/``displayTimeUnit``/``baseTimeNanoseconds`` after ``traceEvents``; some
tools put ``distributedInfo`` or everything there). A bare JSON array of events is accepted too.

Accepted generations: 2021 (capitalised ``Kernel``/``Memcpy``/``Memset``/``Operator`` categories,
string ``tid`` such as ``"stream 7"``, ``[memory]`` events without a category), 2024 (float µs with ns
decimals), 2025-2026 (``ncclDevKernel_*``, Triton ``cpu_op`` launchers). ``ts``/``dur`` may be numbers
or numeric strings.

Tables (empty ones are omitted; ``ts_ns``/``dur_ns`` are the file's values as exact int64 ns on the
file's own clock, sorted by ts):

``steps``        step, ts_ns, dur_ns — ``ProfilerStep#N`` CPU spans (duplicates merged to the widest).
``gpu_ops``      name, kind, ts_ns, dur_ns, stream, device, correlation[, launch_ts_ns] — every event whose category is
                 ``kernel``/``Kernel`` (kind ``kernel``, or ``comm``), ``gpu_memcpy``/``Memcpy``
                 (``memcpy``), ``gpu_memset``/``Memset`` (``memset``). Only the category decides: CPU
                 events that merely carry a ``stream`` arg (Triton launcher ``cpu_op`` s) are NOT GPU
                 ops (HTA counts them). ``stream`` = args.stream, else the number in ``tid``;
                 ``device`` = args.device, else ``pid``; ``correlation`` = args.correlation or -1.
                 ``comm`` = a kernel with a ``Collective name`` arg or whose name matches
                 ``^nccl``, ``ncclDevKernel``, ``ncclKernel``, ``^rccl`` or one of ``comm_patterns``
                 (regexes, ``re.search``). :data:`DEFAULT_COMM_PATTERNS`:
                 ``dpsk::ep::`` (DeepEP dispatch/combine as in DeepSeek's published H800 profile),
                 ``deep_ep::`` (open-source DeepEP), ``cross_device_reduce_`` (vLLM / SGLang / aiter
                 custom all-reduce ``cross_device_reduce_1stage/2stage``),
                 ``quickreduce::`` (vLLM/aiter ROCm quick all-reduce),
                 ``one_shot_all_reduce|two_shot_all_reduce|multimem_(one_shot_)?all_reduce`` (PyTorch
                 symmetric memory), ``oneShotAllReduce|twoShotAllReduce|allreduce_fusion_kernel``
                 (TensorRT-LLM / FlashInfer custom all-reduce), ``mscclpp::`` (MSCCL++),
                 ``userbuffers`` (Transformer Engine comm-GEMM overlap). The fixtures themselves only
                 contain NCCL/RCCL names (``ncclKernel_*``, ``ncclDevKernel_*``, ``ncclDevKernel_Generic``).
``collectives``  source, name, ts_ns, dur_ns, tid, collective, in_nelems, out_nelems, dtype, elem_bytes,
                 in_bytes, out_bytes, group_name, group_desc, group_ranks, group_size, seq, src_rank,
                 dst_rank, peer_local — one row per collective as recorded:
                 ``gpu_kernel``: kernels with a ``Collective name`` arg (NCCL with torch >= ~2.3);
                 ``record_param_comms``: that CPU op (also without args in older torch: collective "");
                 ``gloo``: ``gloo:<op>`` spans (torch CPU/gloo: the real communication interval, on a
                 ``pt_gloo_runloop`` thread per process group, or the main thread for send/recv); sizes from
                 ``Input Dims``/``Input type`` (the input tensor);
                 ``annotation``: ``nccl:<op>`` CPU user annotations (sizes from ``Input Dims`` when present);
                 ``c10d``: ``c10d::<op>`` CPU ops (enqueue time only, but they carry input AND output shapes:
                 all_gather/reduce_scatter/all_to_all output sizes, and gloo runs ``reduce_scatter`` as a
                 full-size ``gloo:all_reduce``, which only the c10d op shows).
                 ``collective`` is normalised to lower case (all_reduce, all_gather, reduce_scatter,
                 all_to_all, broadcast, reduce, gather, scatter, send, recv, barrier). ``wait`` records
                 (``record_param_comms`` with Collective name ``wait``) are not collectives and are dropped.
                 in/out_nelems are -1 when unknown; elem_bytes from dtype (c10 names ``Float`` or C++ names
                 ``float``/``long int``/``c10::BFloat16``); in/out_bytes = nelems x elem_bytes, NaN when
                 unknown; group_* from ``Process Group Name/Description/Ranks`` and ``Group size`` (-1 when
                 absent; older traces: ``Process Group ID`` as the name); seq = ``Seq`` (the collective
                 sequence number, not the autograd ``Sequence number``) or -1; src_rank / dst_rank = the
                 GLOBAL peer of a p2p op from ``Src Rank`` (recv) / ``Dst Rank`` (send), which torch writes
                 on ``record_param_comms`` and Kineto copies onto the NCCL kernel (torch >= ~2.4,
                 ``saveNcclMeta``: ``groupRanks[peer]``), -1 when absent (collectives, older traces, gloo);
                 peer_local = the GROUP-LOCAL peer of a ``c10d::send`` / ``c10d::recv_`` op (``Concrete Inputs``
                 ``["", "", "<peer>", "<tag>"]``: tensors, process group, peer, tag; gloo writes no
                 record_param_comms for them) and of the ``gloo:send`` / ``gloo:recv`` span that the op of the same
                 thread and direction encloses or last precedes (:func:`_gloo_peers`; ``recv_any_source_`` names
                 no peer), else -1. The op does not name its group: the reader maps it to a global rank
                 (:func:`reportgen.readers.kineto.global_peers`).
``cpu_ops``      name, ts_ns, dur_ns, tid, input_dims, input_types — only ``aten::`` mm, addmm, bmm,
                 baddbmm, matmul, linear, conv*, _convolution, cudnn_convolution*, mul, add (for FLOPs
                 estimates); ``Input Dims`` / ``Input type`` as JSON text in Kineto's one-line style
                 (``[[384], [256, 256]]``, ``["float", "float"]``; re-serialised, so pretty-printed files
                 give the same text).
                 ``kernel_launches``: runtime launch calls on the op's thread within its span whose correlation
                 has a device kernel (-1 on every op of a trace without device kernels; :func:`_kernel_launches`).
                 ``profiler_flops``: the op's own ``flops`` arg (``profile(with_flops=True)``), only when some op
                 of the trace has one (NaN on the others; refused above :data:`MAX_OP_FLOPS`).
                 At most :data:`MAX_CPU_OPS` rows (a problem line says when the cap is hit).
``host_ops``     name, ts_ns, dur_ns, tid — the main thread's top-level CPU op spans (category ``cpu_op`` /
                 ``Operator``; the main thread is the one with the ``ProfilerStep#`` spans, else the one with the
                 most ops; top-level = not inside an earlier op of that thread). What the host computes between
                 collectives in CPU-only (gloo) traces. At most :data:`MAX_HOST_OPS` ops are looked at (a problem
                 line says when the cap is hit and the trace has no GPU ops).
``dataloader``   name, ts_ns, dur_ns, tid — ``enumerate(DataLoader)#...__next__`` spans (``user_annotation``
                 in real traces; the time the step waited for its input batch on the host).
``hta_events``   role, name, stream, correlation, ts_ns, dur_ns, launch_ts_ns — what HTA 0.5 sees beyond
                 ``gpu_ops``, for its conventions in :func:`reportgen.intervals.hta_gpu_time_metrics`: ``gpu`` =
                 any complete event other than a GPU op whose ``stream`` arg HTA reads as
                 an int other than -1 (Triton launcher ``cpu_op`` s with ``"stream": 0``, ``cuda_sync`` rows,
                 ``mtia_ccp_events``); ``mark`` = ``ProfilerStep#N`` spans, CPU ones and GPU-side
                 ``gpu_user_annotation`` ones. stream/correlation as HTA reads them (``int()``, else -1).
                 The runtime/driver API calls (categories ``cuda_runtime``, ``cuda_driver``, ``*_runtime``,
                 ``*_driver``) are not rows: HTA's last-step filter only asks, per correlation, when the first
                 one started, which ``launch_ts_ns`` holds on these rows and on ``gpu_ops`` (:func:`_attach_launches`;
                 :data:`NO_LAUNCH` when no call has the row's correlation). Keeping them as rows cost 180 MB for
                 the 3.2 M calls of a 2 GB trace.
``memory``       ts_ns, device_type, device_id, bytes, total_allocated, total_reserved — ``[memory]``
                 instant events, values as written (NaN when absent; 2021 traces have no totals).

``meta``: ``distributedInfo`` (dict or None) and ``deviceProperties`` (list) always; plus whichever of
:data:`META_KEYS` the file has (schemaVersion, baseTimeNanoseconds, displayTimeUnit, traceName,
with_flops, profile_memory, ...). Free-form blocks (``metadata``, ``INFO`` logs, user names, job ids)
are skipped: they can hold secrets (a TraceLens H100 trace had an HF token there). Top-level values
are delimited before anything is decoded (:meth:`_Reader.extent`, msgspec's C validator, no Python object per
item): a value of no :data:`META_KEYS` is skipped unread, and a metadata value over :data:`META_VALUE_BYTES` is
not decoded whole: ``distributedInfo`` keeps its small fields (rank, world size, backend) and drops any field over
that size (a ``pg_config`` of 10^6 groups, 111 MB, took 1 GB and 19 CPU-s to decode; issue 29), other keys are
dropped; each drop is a data problem.

Time unit: Chrome-trace ``ts``/``dur`` are µs whatever ``displayTimeUnit`` says (it only sets the
viewer's display), and Kineto writes µs even with ``"displayTimeUnit": "ns"`` (HTA's ns_resolution
fixture: float µs with ns decimals). Values are read as ns (not µs) only when
``displayTimeUnit == "ns"`` AND every kept ts/dur is an integer AND the median kept duration is at
least 500 (a µs trace has median op/kernel durations of a few µs to tens of µs); ``meta`` then gets
``"ts_converted_from_ns": True``.

Problems are ``(str(path), one line)``: unreadable file, gzip errors (CRC, stream ends early), not
JSON (binary data, UTF-16 text), not a trace object, truncated ("truncated after N events; the rest was
skipped"; what was read is kept), array items that are not objects, and refused values (below). Never
raises on bad input.

Refused values (issue 14; :mod:`reportgen.limits`): every value that becomes a time, count, rank or shape
is checked where it is read, and a refused one is never used. They are counted per (field, reason) in a
:class:`~reportgen.limits.Rejects` and reported once per kind with the first events' positions
(``"2 events skipped: field 'dur' negative (in traceEvents[5], traceEvents[9])"``). The checks cost a few
comparisons per *kept* event, or one numpy pass per table; events that are not kept are never checked.

* ``ts``/``dur`` of a kept event: not a number, NaN/inf, ``|ts|`` >= 2^62 ns (int64 ns would overflow),
  ``dur`` negative or over one day (limits.MAX_DURATION_MS; checked on the tables once the unit is known),
  or ``ts`` more than one day from the median of the trace's kept times (quoted by ts): event skipped.
* ``ProfilerStep#N`` with N not an integer in 0..:data:`MAX_STEP`: span ignored.
* collective args ``In/Out msg nelems`` (0..:data:`MAX_NELEMS`), ``Group size`` (1..MAX_RANKS), ``Seq``,
  ``Src Rank``/``Dst Rank`` (-1..MAX_RANKS-1), parsed strictly (limits.as_int: ``"12abc"``, 1.5, lists
  are refused); GPU ``stream``/``device``/``correlation`` that are not integers: value ignored (-1).
* ``[memory]`` ``Total Allocated``/``Total Reserved`` (0..2^50 bytes) and ``Bytes`` (±2^50): value ignored (NaN).
* ``Input Dims`` that are not nested lists of non-negative integers with at most 2^48 elements per tensor
  (a negative or absurd dimension would give a negative or absurd FLOPs estimate): value ignored ("").
* names, tids, dtypes, group names/ranks text and args texts are cut to limits.MAX_NAME_CHARS (the cut
  stated, ``…[+N chars]``) where they are interned, so a 1 MB kernel name costs 4 KB per distinct name.
"""

from __future__ import annotations

import gzip
import json
import math
import re
import zlib
from array import array
from itertools import compress
from pathlib import Path
from typing import Any, Callable

import msgspec
import numpy as np
import pandas as pd

from ._files import open_input
from ..frames import text_full
from ..limits import (MAX_DURATION_MS, MAX_EXAMPLES, MAX_INT_DIGITS, MAX_NAME_CHARS, MAX_RANKS, Rejects, as_int,
                      cap_text, finite_ms, json_int, regex_problem)
from ..timebase import NS_PER_US, to_ns
from .ascend_trace import MAX_EVENT, _last_cut, _one_event, _skip, _Stop

try:  # declared dependency; the fastest backend (see the module docstring and bench/kineto_decoders.py)
    import msgspec as _msgspec
except ImportError:  # pragma: no cover - depends on the environment
    _msgspec = None

__all__ = ["DecodedTrace", "decode_trace", "DEFAULT_COMM_PATTERNS", "META_KEYS", "BACKENDS"]

#: Bytes read per chunk (bench/kineto_decoders.py: msgspec 64-256 KiB fastest and +3 MB RSS, 1 MiB +12 MB,
#: 4 MiB slower and +45 MB; orjson 64 KiB, 1 MiB is 1.5-4x slower).
CHUNK = {"msgspec": 256 << 10, "json": 64 << 10}
#: cpu_ops rows kept at most (the rest are counted in a problem line).
MAX_CPU_OPS = 2_000_000
#: an op's own ``flops`` arg above this is refused (10^18: a second of 10^6 devices at 1 PFLOP/s)
MAX_OP_FLOPS = 1e18
#: CPU op spans looked at for host_ops at most (every thread, before the main thread's top level is taken).
MAX_HOST_OPS = 1_000_000
#: distinct user range names kept per rank and side (``user_ranges``); the rest are summed into one row
MAX_USER_RANGE_NAMES = 500
#: user range occurrences kept per rank as spans (``user_range_spans``: the ranges' own time without collectives);
#: past it the rank's spans are dropped (its own time is then not measured)
MAX_USER_RANGE_SPANS = 100_000
#: user_annotation names that are not user ranges: the profiler's own step marks and collective spans
_NOT_USER = ("ProfilerStep#", "gloo:", "nccl:")

BUILTIN_COMM_PATTERNS = (r"^nccl", r"ncclDevKernel", r"ncclKernel", r"^rccl")
DEFAULT_COMM_PATTERNS: tuple[str, ...] = (
    r"dpsk::ep::",
    r"deep_ep::",
    r"cross_device_reduce_",
    r"quickreduce::",
    r"one_shot_all_reduce|two_shot_all_reduce|multimem_(?:one_shot_)?all_reduce",
    r"oneShotAllReduce|twoShotAllReduce|allreduce_fusion_kernel",
    r"mscclpp::",
    r"userbuffers",
)

META_KEYS = frozenset({
    "schemaVersion", "deviceProperties", "distributedInfo", "displayTimeUnit", "baseTimeNanoseconds",
    "traceName", "with_flops", "profile_memory", "record_shapes", "with_stack", "with_modules", "trace_id",
    "host_name", "cupti_version", "cuda_runtime_version", "cuda_driver_version", "roctracer_version",
    "hip_runtime_version", "hip_driver_version",
})

_GPU_KIND = {"kernel": "kernel", "Kernel": "kernel", "gpu_memcpy": "memcpy", "Memcpy": "memcpy",
             "gpu_memset": "memset", "Memset": "memset"}
_CPU_CATS = frozenset({"cpu_op", "Operator", "user_annotation"})
_HOST_CATS = frozenset({"cpu_op", "Operator"})
_OP_NAMES = frozenset(f"aten::{n}" for n in (
    "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "_convolution", "convolution", "mul", "add"))
#: (SDPA ops ``aten::_scaled_dot_product_*`` are not kept: flopcount.aten_flops counts them, but cpu_ops is also the
#: drill-down's operator list of CPU-only traces, whose chart does not fit their long names yet)
_OP_PREFIXES = ("aten::conv", "aten::cudnn_convolution")
_DATALOADER_PREFIX = "enumerate(DataLoader)"
_KEEP_PREFIXES = ("ProfilerStep#", "record_param_comms", "gloo:", "nccl:", "c10d::", _DATALOADER_PREFIX) + _OP_PREFIXES
_STEP_PREFIX = "ProfilerStep#"
_STEP_NUMBER = re.compile(r"-?\d+")
#: categories of runtime / driver API calls (the CPU side of a kernel launch; also any ``*_runtime``/``*_driver``)
_LAUNCH_CATS = frozenset({"cuda_runtime", "cuda_driver", "Runtime", "Driver"})
#: categories that never carry a stream arg (skipped when looking for HTA's other GPU rows)
_NO_STREAM_CATS = frozenset({"python_function", "user_annotation", "gpu_user_annotation", "Trace", "ac2g",
                             "fwdbwd", "overhead", "python"})
_INT64 = (-(1 << 63), (1 << 63) - 1)
#: the classes of the values _Collector._coll_row keys a reused row by (exact: True and 1.0 are not 1)
_KEY_CLASSES = frozenset({str, int, type(None)})
#: the characters of text those keys may hold in all (a hostile trace's long names are not kept alive)
_TAILS_MAX_CHARS = 16 * 2 ** 20
_MAX_US = _INT64[1] // NS_PER_US  # larger µs values do not fit int64 ns
#: bounds of one kept event (module doc, "Refused values"): |ts| < 2^62 ns (~146 years from the clock's zero,
#: so differences of two times never overflow int64), 0 <= dur <= one day once the unit is known (the
#: streaming check allows 1000 days: a trace written in ns is only recognised at the end, see "Time unit")
_MAX_TS_NS = 1 << 62
_MAX_DUR_NS = int(MAX_DURATION_MS) * 1_000_000
_MAX_DUR_STREAM_NS = 1000 * _MAX_DUR_NS
#: elements of one tensor or collective message at most (2^48: 281 T elements, 0.5 PB in bf16)
MAX_NELEMS = 1 << 48
#: bytes of one device's memory counters at most (2^50 = 1 PiB)
MAX_MEMORY_BYTES = float(1 << 50)
#: ProfilerStep#N: N in 0..MAX_STEP
MAX_STEP = 10 ** 9
_NS_MEDIAN_DUR = 500.0
#: the collector's fast path for msgspec batches (:meth:`_Collector._feed_fast`); False: every event through the
#: per-event handlers (the stdlib json backend's path; tests compare the two)
_FAST = True

# collective name -> canonical (letters only, lower case; first prefix match wins)
_COLL_PREFIX = (("allreduce", "all_reduce"), ("allgather", "all_gather"), ("reducescatter", "reduce_scatter"),
                ("alltoall", "all_to_all"), ("broadcast", "broadcast"), ("barrier", "barrier"),
                ("monitoredbarrier", "barrier"), ("sendrecv", "send_recv"), ("send", "send"),
                ("recv", "recv"), ("reduce", "reduce"), ("gather", "gather"), ("scatter", "scatter"),
                ("wait", "wait"))
# c10d op (after "c10d::", letters only) -> (index of the output arg, index of the input arg) in Input Dims
_C10D_ARGS = {"allgatherbase": (0, 1), "reducescatterbase": (0, 1), "alltoallbase": (0, 1),
              "allgatherintotensorcoalesced": (0, 1), "reducescattertensorcoalesced": (0, 1),
              "allgather": (0, 1), "allgathercoalesced": (0, 1), "gather": (0, 1), "reducescatter": (0, 1),
              "scatter": (0, 1), "alltoall": (0, 1)}
# c10d point-to-point ops (after "c10d::", letters only) whose Concrete Inputs[2] is the group-local peer;
# recv_any_source_ names none (its [2] is the tag): its rows keep peer_local -1
_C10D_P2P = frozenset({"send", "recv"})
# collectives whose output has the input's size (for rows that only show the input)
_SAME_SIZE = frozenset({"all_reduce", "broadcast", "send", "recv", "reduce", "all_to_all", "barrier"})

_DTYPE_BYTES = {
    "float": 4, "float32": 4, "double": 8, "float64": 8, "half": 2, "float16": 2, "bfloat16": 2,
    "long": 8, "longint": 8, "int64": 8, "int64t": 8, "longlong": 8, "int": 4, "int32": 4, "int32t": 4,
    "short": 2, "shortint": 2, "int16": 2, "int16t": 2, "byte": 1, "unsignedchar": 1, "uint8": 1,
    "uint8t": 1, "char": 1, "signedchar": 1, "int8": 1, "int8t": 1, "bool": 1, "uint16": 2, "uint32": 4,
    "uint64": 8, "unsignedshort": 2, "unsignedint": 4, "unsignedlong": 8, "complexhalf": 4,
    "complexfloat": 8, "complex<float>": 8, "complexdouble": 16, "complex<double>": 16,
    "complex<c10::half>": 4, "qint8": 1, "quint8": 1, "qint32": 4, "quint4x2": 1, "quint2x4": 1,
}


def elem_bytes(dtype) -> float:
    """Bytes per element of a c10 ScalarType name (``Float``) or C++ type name (``long int``); NaN if unknown."""
    if not isinstance(dtype, str) or not dtype:
        return float("nan")
    d = dtype.strip().lower()
    if d.startswith("c10::"):
        d = d[5:]
    d = d.replace(" ", "").replace("_", "")
    n = _DTYPE_BYTES.get(d)
    if n is None and d.startswith("float8"):
        n = 1
    return float(n) if n is not None else float("nan")


def canonical_collective(name) -> str:
    """``allreduce`` / ``_allgather_base`` / ``c10d::alltoall_base_`` / ``gloo:all_reduce`` -> all_reduce, ..."""
    if not isinstance(name, str):
        return ""
    n = name.rpartition(":")[2]
    key = re.sub(r"[^a-z]", "", n.lower())
    for prefix, canon in _COLL_PREFIX:
        if key.startswith(prefix):
            return canon
    return n.strip("_").lower()


# --------------------------------------------------------------------------------------------------
# Event and args containers. Hot path: attribute access on msgspec Structs (args left raw), or on
# _DictEv wrappers of dicts (orjson/json backends, and single events decoded by raw_decode).


class _DictEv:
    __slots__ = ("ph", "cat", "name", "ts", "dur", "pid", "tid", "args")

    def __init__(self, d: dict):
        g = d.get
        self.ph = g("ph")
        self.cat = g("cat")
        self.name = g("name")
        self.ts = g("ts")
        self.dur = g("dur")
        self.pid = g("pid")
        self.tid = g("tid")
        self.args = g("args")


def _wrap(items) -> list:
    return [_DictEv(d) if type(d) is dict else None for d in items]


_COMM_FIELDS = (("stream", "stream"), ("device", "device"), ("correlation", "correlation"),
                ("collective", "Collective name"), ("in_nelems", "In msg nelems"),
                ("out_nelems", "Out msg nelems"), ("dtype", "dtype"), ("group_size", "Group size"),
                ("group_name", "Process Group Name"), ("group_desc", "Process Group Description"),
                ("group_ranks", "Process Group Ranks"), ("group_id", "Process Group ID"), ("seq", "Seq"),
                ("input_dims", "Input Dims"), ("input_types", "Input type"), ("src_rank", "Src Rank"),
                ("dst_rank", "Dst Rank"), ("concrete", "Concrete Inputs"))
_HTA_FIELDS = (("stream", "stream"), ("correlation", "correlation"))
_MEM_FIELDS = (("device_type", "Device Type"), ("device_id", "Device Id"), ("bytes", "Bytes"),
               ("total_allocated", "Total Allocated"), ("total_reserved", "Total Reserved"))


class _Attrs:
    """Plain attribute bag with the same field names as the msgspec arg structs (for dict args)."""

    def __init__(self, d: dict, fields):
        for attr, key in fields:
            setattr(self, attr, d.get(key))


if _msgspec is not None:
    _Raw = _msgspec.Raw
    _EMPTY_RAW = _Raw(b"")

    class _Ev(_msgspec.Struct, gc=False):
        ph: Any = None
        cat: Any = None
        name: Any = None
        ts: Any = None
        dur: Any = None
        pid: Any = None
        tid: Any = None
        args: _Raw = _EMPTY_RAW

    def _struct(name: str, fields, raw: tuple = ()):
        anns = {attr: (_Raw if attr in raw else Any) for attr, _ in fields}
        ns = {attr: _msgspec.field(default=(_EMPTY_RAW if attr in raw else None), name=key)
              for attr, key in fields}
        return _msgspec.defstruct(name, [(a, anns[a], ns[a]) for a, _ in fields], gc=False)

    _CommArgs = _struct("_CommArgs", _COMM_FIELDS)
    _MemArgs = _struct("_MemArgs", _MEM_FIELDS)
    _OpArgs = _struct("_OpArgs", (("input_dims", "Input Dims"), ("input_types", "Input type"), ("flops", "flops")),
                      raw=("input_dims", "input_types"))
    # events: float literals (ts/dur) arrive as their text (float_hook), so times are parsed exactly
    _EV_LIST = _msgspec.json.Decoder(list[_Ev], float_hook=str)
    _ANY_EV_DEC = _msgspec.json.Decoder(float_hook=str)
    _ARG_DEC = {"comm": _msgspec.json.Decoder(_CommArgs), "mem": _msgspec.json.Decoder(_MemArgs),
                "op": _msgspec.json.Decoder(_OpArgs), "hta": _msgspec.json.Decoder(_struct("_HtaArgs", _HTA_FIELDS))}
    _ANY_DEC = _msgspec.json.Decoder()
else:  # pragma: no cover - depends on the environment
    _Raw = None
    _Ev = None

_ARG_FIELDS = {"comm": _COMM_FIELDS, "mem": _MEM_FIELDS,
               "op": (("input_dims", "Input Dims"), ("input_types", "Input type"), ("flops", "flops")),
               "hta": _HTA_FIELDS}


def _args(args, kind: str):
    """Typed view of an event's args (msgspec Raw or dict); attributes None when absent."""
    if type(args) is not dict:
        if _Raw is not None and type(args) is _Raw:
            if not len(args):
                args = {}
            else:
                try:
                    return _ARG_DEC[kind].decode(args)
                except _msgspec.DecodeError:  # args not an object, or odd values: fall back to a dict
                    try:
                        args = _ANY_DEC.decode(args)
                    except (_msgspec.DecodeError, UnicodeDecodeError):
                        args = {}
                except UnicodeDecodeError:
                    try:
                        args = json.loads(bytes(args).decode("utf-8", "replace"))
                    except ValueError:
                        args = {}
        if type(args) is not dict:
            args = {}
    a = _Attrs(args, _ARG_FIELDS[kind])
    if kind == "op":  # as written in the file: re-serialise with the json module's (= Kineto's) separators
        for attr in ("input_dims", "input_types"):
            v = getattr(a, attr)
            setattr(a, attr, "" if v is None else v if isinstance(v, str) else json.dumps(v))
    return a


# --------------------------------------------------------------------------------------------------
# Backends: decode the bytes of a run of complete events (``[`` + events + ``]``) into event objects.


class _RunError(Exception):
    def __init__(self, pos: int | None):
        super().__init__(pos)
        self.pos = pos


_BYTE_POS = re.compile(r"\(byte (\d+)\)")


def _run_msgspec(piece: bytes) -> list:
    try:
        return _EV_LIST.decode(piece)
    except _msgspec.ValidationError:  # items that are not objects (or odd args): decode untyped
        try:
            return _wrap(_ANY_EV_DEC.decode(piece))
        except _msgspec.DecodeError as exc:
            m = _BYTE_POS.search(str(exc))
            raise _RunError(int(m.group(1)) if m else None) from None
    except _msgspec.DecodeError as exc:
        m = _BYTE_POS.search(str(exc))
        raise _RunError(int(m.group(1)) if m else None) from None


def _run_json(piece: bytes) -> list:
    try:
        return _wrap(json.loads(piece, parse_float=str, parse_int=json_int))
    except json.JSONDecodeError as exc:
        raise _RunError(exc.pos) from None


#: Both keep float literals as text (exact times). orjson is not one: it has no hook for float literals,
#: and a double keeps ~16 significant digits where an epoch-µs time with ns decimals has 19.
BACKENDS: dict[str, Callable[[bytes], list]] = {}
if _msgspec is not None:
    BACKENDS["msgspec"] = _run_msgspec
BACKENDS["json"] = _run_json


def default_backend() -> str:
    return next(iter(BACKENDS))


# --------------------------------------------------------------------------------------------------
# Reading the document


class _Reader:
    """A byte buffer over a (possibly gzip) binary file; read errors end the stream and are kept."""

    def __init__(self, fh, chunk: int):
        self.fh = fh
        self.chunk = chunk
        self.buf = b""
        self.pos = 0
        self.base = 0  # offset of buf[0] in the (decompressed) text
        self.eof = False
        self.error: str | None = None

    def more(self, want: int | None = None) -> bool:
        """Append data (dropping what is before pos); False at the end of the stream."""
        if self.eof:
            return False
        try:  # read1: at most one underlying read, so data decompressed before a gzip error is not lost
            data = self.fh.read1(want or self.chunk)
        except EOFError as exc:  # gzip: "Compressed file ended before the end-of-stream marker was reached"
            data = b""
            self.error = f"gzip stream ends early ({exc})"
        except (gzip.BadGzipFile, zlib.error) as exc:
            data = b""
            self.error = f"gzip error ({exc})"
        except OSError as exc:
            data = b""
            self.error = f"read error ({exc.strerror or exc})"
        if not data:
            self.eof = True
            return False
        self.base += self.pos
        self.buf = self.buf[self.pos:] + data
        self.pos = 0
        return True

    def where(self, message: str) -> str:
        """Make ascend_trace's "at byte N" (N relative to the buffer) an offset in the whole text."""
        return re.sub(r"at byte (\d+)", lambda m: f"at byte {int(m.group(1)) + self.base}", message)

    def peek(self) -> int | None:
        """The next non-whitespace byte (reading as needed), or None at the end."""
        while True:
            self.pos = _skip(self.buf, self.pos)
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if not self.more():
                return None

    def value(self):
        """Parse one JSON value at pos (any size); raises _Stop when it is broken or cut off."""
        want = self.chunk
        while True:
            one = _one_lenient(self.buf, self.pos, self.eof)
            # a number/literal that ends exactly at the end of the buffer may continue in the next chunk
            if one is not None and (one[1] < len(self.buf) or self.eof):
                self.pos = one[1]
                return one[0]
            if len(self.buf) - self.pos > MAX_EVENT:
                raise _Stop(f"a value larger than {MAX_EVENT >> 20} MiB", keep=False)
            if not self.more(want):
                if one is not None:
                    self.pos = one[1]
                    return one[0]
                raise _Stop("truncated")
            want = min(want * 2, MAX_EVENT)


    def extent(self) -> int | None:
        """The end (index in ``buf``) of the JSON value at pos, reading as needed, without decoding it: msgspec
        validates the bytes as one ``Raw`` value (no Python object per item) and names where trailing data
        starts. None when the value is malformed (:meth:`value` then says how); raises _Stop past MAX_EVENT."""
        want = self.chunk
        while True:
            view = memoryview(self.buf)[self.pos:]
            try:
                msgspec.json.decode(view, type=msgspec.Raw)
                if self.eof:  # the value is the rest of the text
                    return len(self.buf)
            except RecursionError:
                return None  # value() says "nested too deeply"
            except msgspec.DecodeError as exc:
                msg = str(exc)
                m = _TRAILING.search(msg)
                if m:
                    return self.pos + _value_end(view, int(m.group(1)))
                if self.eof:
                    return None
                # cut by the buffer's end: msgspec says "truncated", or fails in the last token ("1.", "1e+")
                at = _AT_BYTE.search(msg)
                if "truncated" not in msg and not (at and int(at.group(1)) >= len(view) - _LAST_TOKEN):
                    return None
            if len(self.buf) - self.pos > MAX_EVENT:
                raise _Stop(f"a value larger than {MAX_EVENT >> 20} MiB", keep=False)
            if not self.more(want):
                continue  # eof: the loop decides with what the buffer holds
            want = min(want * 2, MAX_EVENT)


#: msgspec's message for data after one complete value ("... trailing characters (byte N)", N 1-based)
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")
_AT_BYTE = re.compile(r"\(byte (\d+)\)")
#: longest number/literal that a chunk's end can cut (as ascend_trace's _LAST_TOKEN)
_LAST_TOKEN = 64
#: a metadata value larger than this (bytes) is not decoded whole (module doc); the largest real one seen is a
#: 4096-rank world group (~25 KB), 2^20 ranks would take ~7.6 MB
META_VALUE_BYTES = 8 << 20


def _value_end(view: memoryview, at: int) -> int:
    """The end of the one value at the start of ``view`` given msgspec's 1-based position ``at`` of the first
    byte after it (whitespace between them skipped)."""
    end = at - 1
    while end > 0 and view[end - 1] in b" \t\r\n":
        end -= 1
    return end


class _InfoFields(msgspec.Struct):
    """The ``distributedInfo`` fields the readers use, each kept as its raw text (an oversized block only)."""
    rank: msgspec.Raw = msgspec.Raw(b"null")
    world_size: msgspec.Raw = msgspec.Raw(b"null")
    backend: msgspec.Raw = msgspec.Raw(b"null")
    pg_count: msgspec.Raw = msgspec.Raw(b"null")
    nccl_version: msgspec.Raw = msgspec.Raw(b"null")
    pg_config: msgspec.Raw = msgspec.Raw(b"null")


def _oversized_info(view: memoryview, state: dict) -> dict | None:
    """An oversized ``distributedInfo`` (module doc): its fields of :class:`_InfoFields` up to
    :data:`META_VALUE_BYTES` each, decoded; larger ones left out and named in ``state["oversized"]``."""
    try:
        fields = msgspec.json.decode(view, type=_InfoFields)
    except (msgspec.DecodeError, RecursionError):  # not an object (a huge list or text): named, dropped
        state.setdefault("oversized", []).append(("distributedInfo", len(view)))
        return None
    out = {}
    for name in _InfoFields.__struct_fields__:
        raw = bytes(getattr(fields, name))
        if raw == b"null":
            continue
        if len(raw) > META_VALUE_BYTES:
            state.setdefault("oversized", []).append((f"distributedInfo.{name}", len(raw)))
            continue
        try:
            out[name] = json.loads(raw.decode("utf-8", "replace"), parse_int=json_int)
        except (ValueError, RecursionError):
            state.setdefault("oversized", []).append((f"distributedInfo.{name}", -1))
    return out


_decoder = json.JSONDecoder(parse_int=json_int)  # metadata values
_ev_decoder = json.JSONDecoder(parse_float=str, parse_int=json_int)  # events: float literals as text (exact times)


def _one_lenient(buf: bytes, pos: int, eof: bool, decoder: json.JSONDecoder = _decoder):
    """``_one_event`` (one JSON value at pos: (value, end) or None if incomplete), tolerating invalid UTF-8.

    ``_one_event`` decodes a window of text after pos strictly, so a bad byte anywhere in that window
    (even after the value) raises. Then: if the value ends before the bad byte, parse just that part;
    otherwise decode with ``surrogateescape`` (one code point per byte, so byte offsets stay exact) and
    turn the bad bytes into U+FFFD in the value.
    """
    try:
        return _one_event(buf, pos, eof, decoder)
    except UnicodeDecodeError as exc:
        lim = pos + exc.start  # every window of _one_event starts at pos
    try:
        one = _one_event(buf[:lim], pos, False, decoder)
    except (UnicodeDecodeError, _Stop):
        one = None
    if one is not None and one[1] < lim:
        return one
    text = buf[pos:].decode("utf-8", "surrogateescape")
    try:
        value, end = decoder.raw_decode(text)
    except RecursionError:
        raise _Stop(f"JSON nested too deeply at byte {pos}") from None
    except json.JSONDecodeError as err:
        if err.msg.startswith("Unterminated string") or len(text.rstrip()) - err.pos <= 64:
            return None  # incomplete
        raise _Stop(f"malformed JSON ({err.msg})") from None
    fixed = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return json.loads(fixed, parse_float=decoder.parse_float, parse_int=json_int), pos + len(text[:end].encode("utf-8", "surrogateescape"))


def _open(path: Path):
    fh = open_input(path, "rb")
    try:
        magic = fh.read(2)
        fh.seek(0)
    except OSError:
        fh.close()
        raise
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=fh, mode="rb"), fh
    return fh, None


def _read_events(r: _Reader, feed, state: dict, run_decode) -> None:
    """Stream the items of the ``traceEvents`` array (r.pos is just after ``[``) into ``feed``."""
    want = r.chunk
    while True:
        buf = r.buf
        pos = _skip(buf, r.pos, b" \t\r\n,")
        r.pos = pos
        if pos < len(buf):
            c = buf[pos]
            if c == 0x5D:  # ']'
                r.pos = pos + 1
                return
            got = _parse_run(buf, pos, run_decode) if c == 0x7B else None
            if got is None:  # the item at pos on its own (the last of the buffer, broken, or not an object)
                try:
                    one = _one_lenient(buf, pos, r.eof, _ev_decoder)
                except _Stop as stop:
                    raise _Stop(f"{r.where(stop.message)} after {state['count']} events; the rest was skipped") from None
                if one is not None and (one[1] < len(buf) or r.eof):
                    got = _wrap([one[0]]), one[1]
            if got is not None:
                items, end = got
                # how many "stream" keys the events have: the collector checks other events' args for a
                # stream (HTA counts them as GPU work) only when there are more than the GPU events hold
                stream_keys = None if _FAST and items and type(items[0]) is _Ev else \
                    buf.count(b'"stream"', pos, end)  # (the fast path finds them itself)
                r.pos = end
                state["count"] += len(items)
                feed(items, stream_keys)
                want = r.chunk
                continue
        if r.eof:
            raise _Stop(f"truncated after {state['count']} events; the rest was skipped")
        if len(buf) - pos > MAX_EVENT:
            raise _Stop(f"an event larger than {MAX_EVENT >> 20} MiB after {state['count']} events; "
                        "the rest was skipped")
        if not r.more(want):
            continue  # eof now set: the loop above parses what is left, then reports the truncation
        want = min(want * 2, MAX_EVENT)


def _parse_run(buf: bytes, pos: int, run_decode):
    """Decode the longest run of complete events ``buf[pos:cut]`` ending at a ``}, {`` boundary.

    Returns (items, cut), or None when no run decodes (the event at pos is the last one, incomplete,
    or broken). Invalid UTF-8 inside a run is replaced (U+FFFD) rather than ending the file.
    """
    hi = len(buf)
    while True:
        cut = _last_cut(buf, pos, hi)
        if cut < 0:
            return None
        piece = b"[" + buf[pos:cut] + b"]"
        try:
            return run_decode(piece), cut
        except RecursionError:
            raise _Stop(f"JSON nested too deeply after byte {pos}") from None
        except UnicodeDecodeError:
            try:
                return _wrap(json.loads(piece.decode("utf-8", "replace"), parse_float=str, parse_int=json_int)), cut
            except (ValueError, RecursionError):
                err = None
        except _RunError as exc:
            err = exc.pos
        # the cut was inside a string (or the data is broken): try an earlier cut, before the error
        hi = cut - 1 if err is None else min(cut - 1, pos + max(err - 1, 0))


def _value(r: _Reader, state: dict):
    try:
        return r.value()
    except _Stop as stop:
        raise _Stop(f"{r.where(stop.message)} after {state['count']} events",
                    keep=stop.keep and state["count"] > 0) from None


#: a run of 20 digits or more (in a number or a string): read by the stdlib path. json_int keeps a literal of over
#: MAX_INT_DIGITS digits as text, msgspec makes it an int; and msgspec before 0.19 decoded some 20-digit integers
#: wrongly (jcrist/msgspec#701)
_LONG_DIGITS = re.compile(rb"[0-9]{20}")
assert MAX_INT_DIGITS >= 20


def _meta_value(r: _Reader, end: int, state: dict):
    """The metadata value at r.pos, which ends at ``end`` (:meth:`_Reader.extent`), as :func:`_value` reads it: by
    msgspec in one call when msgspec reads it the same way (the stdlib decoder calls ``json_int`` per integer:
    ~2,500 a file in a 1,024-rank run's pg_config, 5 % of the decode). What msgspec refuses or may read otherwise
    (NaN, a float beyond the double range, a lone surrogate, invalid UTF-8, a run of 20 digits or more) is read by
    :func:`_value`."""
    view = memoryview(r.buf)[r.pos:end]
    try:
        if not _LONG_DIGITS.search(view):
            value = msgspec.json.decode(view)
            r.pos = end
            return value
    except (msgspec.DecodeError, RecursionError, UnicodeDecodeError):
        pass
    finally:
        del view
    return _value(r, state)


def _read_document(r: _Reader, feed, meta: dict, state: dict, run_decode) -> None:
    c = r.peek()
    if c is None:
        raise _Stop("empty file", keep=False)
    if r.pos == 0 and r.buf[:2] in (b"\xff\xfe", b"\xfe\xff"):
        raise _Stop("UTF-16 text: a Kineto trace is UTF-8 JSON (convert it, e.g. iconv -f UTF-16 -t UTF-8)",
                    keep=False)
    if r.pos == 0 and r.buf.startswith(b"\xef\xbb\xbf"):  # UTF-8 BOM
        r.pos = 3
        c = r.peek()
    if c == 0x5B:  # '[': a bare array of trace events (legal Chrome-trace JSON)
        r.pos += 1
        state["in_events"] = True
        _read_events(r, feed, state, run_decode)
        state["in_events"] = False
        return
    if c != 0x7B:
        head = bytes(r.buf[r.pos:r.pos + 16])
        if b"\x00" in r.buf[:4096]:
            raise _Stop("binary data (NUL bytes), not JSON text", keep=False)
        kind = {0x22: "a string", 0x74: "true", 0x66: "false", 0x6E: "null"}.get(c)
        if kind is None and (c == 0x2D or 0x30 <= c <= 0x39):
            kind = "a number"
        if kind is not None:
            raise _Stop(f"not a trace object: the JSON value is {kind} (starts with {head!r})", keep=False)
        raise _Stop(f"not JSON: a Kineto trace is a JSON object; the file starts with {head!r}", keep=False)
    r.pos += 1
    seen_events = False
    first = True
    seen_keys: set = set()
    while True:
        c = r.peek()
        if c is None:
            raise _Stop(f"truncated after {state['count']} events"
                        + ("; the metadata after the events is missing" if seen_events else ""))
        if c == 0x7D and first:  # '{}'
            r.pos += 1
            break
        if c != 0x22:  # '"'
            raise _Stop(f"malformed JSON at the top level (byte {r.pos} of the text), after {state['count']} events")
        key = _value(r, state)
        if r.peek() != 0x3A:  # ':'
            raise _Stop(f"malformed JSON at the top level after key {key!r}")
        r.pos += 1
        if key in seen_keys:
            if key == "traceEvents":  # a JSON parser keeps the last list, a streaming reader would add both
                raise _Stop('the key "traceEvents" appears twice at the top level: which list is the trace is '
                            'unknown (a JSON parser keeps the second, HTA too); the file was not read', keep=False)
            dups = state.setdefault("duplicate_keys", [])
            if key not in dups and len(dups) < 5:
                dups.append(str(key)[:60])
        elif len(seen_keys) < 10_000:
            seen_keys.add(key)
        c = r.peek()
        if key == "traceEvents" and c == 0x5B:
            r.pos += 1
            seen_events = True
            state["in_events"] = True
            _read_events(r, feed, state, run_decode)
            state["in_events"] = False
        elif c is None:
            raise _Stop(f"truncated after {state['count']} events")
        else:
            end = r.extent() if key != "traceEvents" else None
            if end is not None and key not in META_KEYS:
                r.pos = end  # skipped unread (module doc)
            elif end is not None and end - r.pos > META_VALUE_BYTES:
                view = memoryview(r.buf)[r.pos:end]
                if key == "distributedInfo":
                    meta[key] = _oversized_info(view, state)
                else:
                    state.setdefault("oversized", []).append((str(key), end - r.pos))
                del view
                r.pos = end
            else:
                value = _meta_value(r, end, state) if end is not None and key in META_KEYS else _value(r, state)
                if key == "traceEvents":
                    seen_events = True
                    if isinstance(value, list):
                        state["count"] += len(value)
                        feed(_wrap(value))
                    else:
                        state["bad_events_key"] = True
                elif key in META_KEYS:
                    meta[key] = value
        first = False
        c = r.peek()
        if c == 0x2C:  # ','
            r.pos += 1
            continue
        if c == 0x7D:  # '}'
            r.pos += 1
            break
        if c is None:
            raise _Stop(f"truncated after {state['count']} events"
                        + ("; the metadata after the events is missing" if seen_events else ""))
        raise _Stop(f"malformed JSON at the top level after key {key!r}")
    state["object_without_events"] = not seen_events


# --------------------------------------------------------------------------------------------------
# Collecting the tables


def _num(v):
    """float from a JSON number or numeric string; None otherwise (also for NaN/inf)."""
    c = v.__class__
    if c is float:
        return v if v - v == 0 else None
    if c is int:
        try:
            return float(v)
        except OverflowError:
            return None
    if c is str:
        try:
            f = float(v)
        except ValueError:
            return None
        return f if f - f == 0 else None
    return None


def _ts_reason(v) -> str:
    """Why a ``ts`` was refused (only called for refused values)."""
    if v is None:
        return "missing"
    if isinstance(v, bool):
        return "not a number"
    try:
        f = float(v)
    except OverflowError:
        f = float("inf")
    except (TypeError, ValueError):
        return "not a number"
    if f != f:
        return "not a number"
    if f in (float("inf"), float("-inf")):
        return "infinite"
    return "out of range (more than ~146 years from the clock's zero; int64 ns)"


def _dur_reason(v) -> str:
    """Why a ``dur`` (µs) was refused (only called for refused values): limits.finite_ms's words."""
    if isinstance(v, bool):
        return "not a number"
    try:
        ms = float(v) / 1000.0
    except OverflowError:
        ms = float("inf") if not str(v).lstrip().startswith("-") else float("-inf")
    except (TypeError, ValueError):
        return "not a number"
    if ms == float("-inf"):
        return "negative"
    return finite_ms(ms) or "over one day"


def _int(v, default: int = -1) -> int:
    c = v.__class__
    if c is int:
        return v if _INT64[0] <= v <= _INT64[1] else default
    if c is float and v.is_integer():
        return _int(int(v), default)
    if c is str:
        s = v.strip()
        if s.lstrip("-").isdigit():
            return _int(int(s), default)
        m = re.search(r"-?\d+", s)  # "stream 7"
        if m:
            return _int(int(m.group(0)), default)
    return default


def _hta_int(v) -> int:
    """HTA 0.5's ``stream``/``correlation`` value: ``int(v)``, -1 when absent or when int() refuses it."""
    if v is None:
        return -1
    try:
        n = int(v)
    except (TypeError, ValueError, OverflowError):
        return -1
    return n if _INT64[0] <= n <= _INT64[1] else -1


def _numel(dims) -> int:
    """Elements of one tensor's dims ``[a, b]`` or of a tensor list ``[[a, b], [c]]``; -1 if unknown."""
    if not isinstance(dims, list) or not dims:
        return -1
    if all(type(d) is int for d in dims):
        n = 1
        for d in dims:
            n *= d
        return n if 0 <= n <= _INT64[1] else -1
    total = 0
    for d in dims:
        k = _numel(d)
        if k < 0:
            return -1
        total += k
    return total


_BOUND_TEXT = {MAX_NELEMS: "2^48", _INT64[1]: "2^63-1"}
_BAD_SHAPE = "not shapes of non-negative integers (at most 2^48 elements per tensor)"


def _shapes_ok(v, depth: int = 0) -> bool:
    """``Input Dims`` or one entry of it: nested lists whose innermost lists are non-negative integers with at
    most :data:`MAX_NELEMS` elements (``[]`` for a non-tensor argument is fine)."""
    if v.__class__ is not list or depth > 8:
        return False
    if v and all(d.__class__ is int for d in v):
        n = 1
        for d in v:
            if not 0 <= d <= MAX_NELEMS:
                return False
            n *= d
        return n <= MAX_NELEMS
    return all(_shapes_ok(x, depth + 1) for x in v)


def _text(v) -> str:
    if v is None:
        return ""
    return v if isinstance(v, str) else json.dumps(v)


# --------------------------------------------------------------------------------------------------
# Bulk (columnar) conversions for the fast path of _Collector.feed: each returns None when any value is not
# "plain", and the caller then takes the per-event handlers, which give the same rows and problems.

_COMMA, _DOT, _ZERO = ord(","), ord("."), np.uint8(ord("0"))
_SCALE = np.array([1000, 100, 10, 1], dtype=np.int64)  # ns per unit of the last digit, by number of decimals


def _bulk_ns(vals: list):
    """Exact int64 ns of ``vals`` (µs: ints, or decimal texts ``digits[.d[d[d]]]`` as msgspec's float_hook gives
    them), equal to what :meth:`_Collector._times` computes one by one; None unless every value has one of these
    forms and fits (ints within ±_MAX_US; texts: no sign, at most 16 integer digits and 3 decimals)."""
    n = len(vals)
    if not n:
        return np.zeros(0, dtype=np.int64)
    types = set(map(type, vals))
    if types == {int}:
        try:
            a = np.array(vals, dtype=np.int64)
        except OverflowError:
            return None
        if a.min() < -_MAX_US or a.max() > _MAX_US:
            return None
        return a * NS_PER_US
    if not types <= {int, str}:
        return None
    if n < 64:  # a few values: one by one (what _times does) is faster than the fixed cost of the numpy calls
        out = [to_ns(v) for v in vals]
        return None if None in out else np.array(out, dtype=np.int64)
    text = ",".join(vals) if types == {str} else ",".join(map(str, vals))
    try:
        b = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    except UnicodeEncodeError:
        return None
    marks = np.flatnonzero((b - _ZERO) > 9)  # every byte that is not a digit (uint8: below '0' wraps past 9)
    kinds = b[marks]
    is_comma = kinds == _COMMA
    commas = marks[is_comma]
    if len(commas) != n - 1:
        return None
    dots = marks[~is_comma]
    if len(dots) and (kinds[~is_comma] != _DOT).any():  # a byte other than digits, commas and points
        return None
    # (np.concatenate: np.append / np.insert cost more than the rest of a call of a few hundred values)
    ends = np.concatenate((commas, (len(b),)))
    starts = np.concatenate(((0,), commas + 1))
    if len(dots) == n and (dots < ends).all() and (dots >= starts).all():  # one point in each value (the usual)
        end_of = dots  # where each element's integer digits end
    else:
        end_of = ends.copy()  # (its point, or its end)
        if len(dots):
            elem = np.searchsorted(commas, dots)  # the element of each dot
            if len(elem) > 1 and (elem[1:] == elem[:-1]).any():  # two dots in one element
                return None
            end_of[elem] = dots
    width = end_of - starts
    decimals = ends - end_of
    decimals[decimals > 0] -= 1  # (the point)
    if width.min() < 1 or width.max() > 16 or decimals.max() > 3:
        return None
    # (every value is digits with at most one point now: the parse cannot fail, so it never warns)
    a = np.fromstring(text.replace(".", "") if len(dots) else text, dtype=np.int64, sep=",")
    if len(a) != n:
        return None
    a *= _SCALE[decimals]
    if width.max() >= 16:  # such a text can pass int64 in ns: a wrapped value is far from the float reading, and
        # one just past it is held at int64's bound (9223372036854775.808 µs), which the float cannot tell apart
        f = np.fromstring(text, dtype=np.float64, sep=",")
        if len(f) != n or not (np.abs(a - f * 1000.0) <= np.abs(f) * 1e-6 + 1.0).all() or (a == _INT64[1]).any():
            return None
    return a


def _bulk_ns_pair(events: list) -> tuple:
    """(ts, dur) of the events by :func:`_bulk_ns`, both read in one call (its fixed cost once, not twice); (None,
    None) unless every value of both is plain (the caller then takes the per-event handlers, as when either is)."""
    n = len(events)
    both = _bulk_ns([e.ts for e in events] + [e.dur for e in events])
    return (None, None) if both is None else (both[:n], both[n:])


def _bulk_args(raws: list, kind: str):
    """The typed args of many events (faster one by one than joined into one array); None when one is empty, not
    an object or odd (the caller then reads them with :func:`_args`, as the per-event path)."""
    dec = _ARG_DEC[kind].decode
    try:
        return [dec(r) for r in raws]
    except (_msgspec.DecodeError, UnicodeDecodeError, TypeError, ValueError):
        return None


_STREAM_KEY = re.compile(rb'"stream"')


def _with_stream(events: list) -> list:
    """The events of a list whose raw args text holds ``"stream"`` (in order): the only ones that can be HTA's
    other GPU rows (:meth:`_Collector._hta_streams` decides)."""
    if not events:
        return []
    raws = [e.args for e in events]
    blob = b"\x00".join(raws)
    if blob.find(b'"stream"') < 0:
        return []
    ends = np.cumsum([len(r) + 1 for r in raws])
    hits = [m.start() for m in _STREAM_KEY.finditer(blob)]
    return [events[i] for i in np.unique(np.searchsorted(ends, hits, side="right")).tolist()]


def _only_x(events: list) -> list:
    """The complete ("X") events of a list, in order."""
    phs = [e.ph for e in events]
    if phs.count("X") == len(phs):
        return events
    return [e for e, p in zip(events, phs) if p == "X"]


def _bulk_ints(vals: list, lo: int, hi: int):
    """int64 array of ``vals`` when every one is an int in lo..hi; else None."""
    if not vals:
        return np.zeros(0, dtype=np.int64)
    if set(map(type, vals)) != {int}:
        return None
    try:
        a = np.array(vals, dtype=np.int64)
    except OverflowError:
        return None
    return a if a.min() >= lo and a.max() <= hi else None


def _bulk_bytes(vals: list, lo: float):
    """float64 array of ``[memory]`` byte counts as :meth:`_Collector._memory` reads them (absent: NaN) when every
    one is absent or an int / finite float in lo..MAX_MEMORY_BYTES; else None."""
    types = set(map(type, vals))
    if not types <= {int, float, type(None)}:
        return None
    absent = None
    if type(None) in types:
        absent = np.array([v is None for v in vals])
        vals = [0.0 if v is None else v for v in vals]
    try:
        a = np.array(vals, dtype=np.float64)
    except OverflowError:
        return None
    if not ((a >= lo) & (a <= MAX_MEMORY_BYTES)).all():  # (NaN fails both)
        return None
    if absent is not None:
        a[absent] = math.nan
    return a


def _i64(a) -> bytes:
    return a.astype(np.int64, copy=False).tobytes()


class _Collector:
    def __init__(self, comm_regex, where: str = ""):
        self.comm_re = comm_regex
        self.where = where
        self.comm_cache: dict = {}
        self.intern: dict = {}
        self.canon: dict = {}
        self.dims_ok: dict = {}  # Input Dims text -> valid shapes (module doc, "Refused values")
        # refused values (module doc, "Refused values"): counted per kind, the first events' indices quoted
        self.rejects = Rejects()
        self.reject_n: dict = {}
        self.last_bad = None
        self.n_fed = 0  # events fed before the current batch (its first event's index in traceEvents)
        self.batch: list = []
        # ProfilerStep#N spans as recorded (merged per N in columns(), after the time checks)
        self.step_n = array("q")
        self.step_ts = array("q")
        self.step_dur = array("q")
        # gpu_ops
        self.g_name: list = []
        self.g_kind: list = []
        self.g_ts = array("q")
        self.g_dur = array("q")
        self.g_stream = array("q")
        self.g_dev = array("q")
        self.g_corr = array("q")
        # collectives: tuples
        self.coll: list = []
        # cpu_ops
        self.o_name: list = []
        self.o_ts = array("q")
        self.o_dur = array("q")
        self.o_tid: list = []
        self.o_dims: list = []
        self.o_types: list = []
        self.o_flops = array("d")  # the trace's own ``flops`` arg (profile(with_flops=True)); NaN when absent
        self.o_has_flops = False
        self.o_dropped = 0
        self.u_spans_dropped = False  # user annotation spans past MAX_USER_RANGE_SPANS: none kept (the totals are)
        # host_ops (every thread's CPU op spans; the main thread's top level is taken in columns())
        self.h_name: list = []
        self.h_ts = array("q")
        self.h_dur = array("q")
        self.h_tid: list = []
        self.h_dropped = 0
        self.step_tids: dict = {}
        # dataloader
        self.d_name: list = []
        self.d_ts = array("q")
        self.d_dur = array("q")
        self.d_tid: list = []
        # user_ranges: (side, name) -> [count, total ns, max ns, first start ns]
        self.u_agg: dict = {}
        # user_range_spans: (side, name) key per occurrence, start and duration (dropped past MAX_USER_RANGE_SPANS)
        self.u_key: list = []
        self.u_ts = array("q")
        self.u_dur = array("q")
        # memory
        self.m_ts = array("q")
        self.m_dt = array("q")
        self.m_di = array("q")
        self.m_bytes = array("d")
        self.m_alloc = array("d")
        self.m_res = array("d")
        # hta_events
        self.launch_cat: dict = {}
        self.hta_role: list = []
        self.hta_name: list = []
        self.hta_stream = array("q")
        self.hta_corr = array("q")
        self.hta_ts = array("q")
        self.hta_dur = array("q")
        self.launch_ts = array("q")
        self.launch_corr = array("q")
        self.launch_tid = array("q")  # code of the call's thread (tid_code): which CPU op launched a kernel
        self.tid_code: dict = {}
        # checks
        self.not_objects = 0
        self.all_integral = True
        # fast path (:meth:`_feed_fast`): category -> bucket; while a batch is fed there, the refused values
        # (pending) and the events behind the rows of the tables that several buckets fill (track) are noted, so
        # that both are put in event order at the end of the batch, as the per-event path makes them
        self.fast = _FAST
        self.cat_code: dict = {}
        self.tid_codes: dict = {}  # a launch's raw tid (int or str) -> its tid_code (fast path)
        self.special: dict = {}  # CPU op name -> read by _cpu too (fast path)
        self.coll_cache: dict = {}  # collective name -> canonical_collective
        self.c10d_op: dict = {}  # c10d op name -> its letters
        self.eb_cache: dict = {}  # dtype -> elem_bytes
        self.coll_tails: dict = {}  # _coll_row's key -> the row but its source, times and seq (_coll_row)
        self._tail_chars = 0  # characters of the texts those keys hold
        self._refused = 0  # values refused so far (_reject): a row whose making refused one is never reused
        self._pending: list | None = None
        self._track: tuple | None = None
        self._bucket = 0

    # -- helpers
    def _s(self, v) -> str:
        """Interned text of a name/tid/label, cut to MAX_NAME_CHARS (the cut stated)."""
        if v.__class__ is not str:
            v = "" if v is None else str(v)
        if len(v) > MAX_NAME_CHARS:
            v = cap_text(v)
        return self.intern.setdefault(v, v)

    def _reject(self, e, column: str, reason: str, action: str = "event skipped") -> None:
        """Count a refused value of event ``e`` (of the current batch); the first ones are quoted by their index
        in ``traceEvents`` (found by a scan of the batch: this path is rare, the kept events never pay)."""
        self._refused += 1
        if self._pending is not None:  # fast path: replayed in event order at the end of the batch
            self._pending.append((e, column, reason, action))
            return
        key = (column, reason, action)
        n = self.reject_n.get(key, 0)
        self.reject_n[key] = n + 1
        idx = None
        if n < MAX_EXAMPLES:
            idx = next((f"traceEvents[{self.n_fed + i}]" for i, x in enumerate(self.batch) if x is e), None)
        self.rejects.add(self.where, idx, column, reason, action, unit=("in", "in"))

    def _times(self, e):
        """(ts, dur) in exact integer ns (the file's µs; timebase.to_ns), or None (refused and counted)."""
        t = e.ts
        t = t * NS_PER_US if t.__class__ is int and -_MAX_US <= t <= _MAX_US else to_ns(t)
        d = e.dur
        d = 0 if d is None else (d * NS_PER_US if d.__class__ is int and -_MAX_US <= d <= _MAX_US else to_ns(d))
        if t is None or d is None or not (-_MAX_TS_NS < t < _MAX_TS_NS and 0 <= d <= _MAX_DUR_STREAM_NS):
            self._bad_time(e, t, d)
            return None
        if self.all_integral and (t % NS_PER_US or d % NS_PER_US):
            self.all_integral = False
        return t, d

    def _ts(self, e):
        """Exact int ns of ``e.ts`` alone (instant events), or None (refused and counted)."""
        t = e.ts
        t = t * NS_PER_US if t.__class__ is int and -_MAX_US <= t <= _MAX_US else to_ns(t)
        if t is None or not -_MAX_TS_NS < t < _MAX_TS_NS:
            self._bad_time(e, t, 0)
            return None
        return t

    def _bad_time(self, e, t, d) -> None:
        if e is self.last_bad:  # one event read by two handlers (a CPU op span is also a host op): counted once
            return
        self.last_bad = e
        if t is None or not -_MAX_TS_NS < t < _MAX_TS_NS:
            self._reject(e, "field 'ts'", _ts_reason(e.ts))
        else:
            self._reject(e, "field 'dur'", _dur_reason(e.dur))

    def _canon(self, v) -> str:
        """JSON text of an args value in Kineto's one-line style (``[[384], [256, 256]]``), interned.

        Raw (msgspec) values are keyed by their bytes: shapes repeat, so each distinct text is parsed and
        re-serialised once; files written with other spacing (pretty-printed, compact) give the same text.
        """
        if v.__class__ is str:  # dict path: already json.dumps'ed by _args
            return self._s(v)
        if not len(v):
            return ""
        key = bytes(v)
        s = self.canon.get(key)
        if s is None:
            try:
                s = json.dumps(json.loads(key))
            except (ValueError, RecursionError):
                s = key.decode("utf-8", "replace")
            s = self._s(s)
            if len(self.canon) < 200_000:
                self.canon[key] = s
        return s

    def _op_flops(self, e, v) -> float:
        """The op's own ``flops`` arg as a float; NaN when absent, and refused (named) when it is not a number in
        0..MAX_OP_FLOPS."""
        if v is None:
            return math.nan
        f = _num(v) if v.__class__ is not bool else None
        if f is None or not 0 <= f <= MAX_OP_FLOPS:
            self._reject(e, "field args['flops']", f"not a number in 0..{MAX_OP_FLOPS:.0e}", "value ignored")
            return math.nan
        self.o_has_flops = True
        return f

    def _dims(self, e, v) -> str:
        """``Input Dims`` text of a cpu op (:meth:`_canon`), or "" with the value refused when it is not shapes
        (:func:`_shapes_ok`: a negative or absurd dimension would give a negative or absurd FLOPs estimate)."""
        s = self._canon(v)
        if not s:
            return s
        ok = self.dims_ok.get(s)
        if ok is None:
            try:
                ok = _shapes_ok(json.loads(s))
            except (ValueError, RecursionError):
                ok = False
            if len(self.dims_ok) < 200_000:
                self.dims_ok[s] = ok
        if ok:
            return s
        self._reject(e, "field args['Input Dims']", _BAD_SHAPE, "value ignored")
        return ""

    def _collective(self, name) -> str:
        """:func:`canonical_collective`, cached per name."""
        if name.__class__ is not str:
            return canonical_collective(name)
        c = self.coll_cache.get(name)
        if c is None:
            c = canonical_collective(name)
            if len(self.coll_cache) < 10_000:
                self.coll_cache[name] = c
        return c

    def _is_comm(self, name: str) -> bool:
        hit = self.comm_cache.get(name)
        if hit is None:
            hit = self.comm_cache[name] = bool(self.comm_re.search(name))
        return hit

    # -- the hot loop
    def feed(self, batch, stream_keys: int | None = None) -> None:
        """Keep what reportgen needs from a list of events. ``stream_keys``: occurrences of ``"stream"`` in the
        events' text (None: unknown), see :meth:`_hta_streams`."""
        if self.fast and batch and type(batch[0]) is _Ev:
            buckets = self._route(batch)
            if buckets is not None:
                self._feed_fast(batch, stream_keys, buckets)
                return
        gpu_kind = _GPU_KIND
        cpu_cats = _CPU_CATS
        op_names = _OP_NAMES
        keep = _KEEP_PREFIXES
        launch = self.launch_cat
        seen = 0  # events whose args were decoded here and hold a "stream" key
        host_cats = _HOST_CATS
        self.batch = batch
        for e in batch:
            if e is None:
                self.not_objects += 1
                continue
            cat = e.cat
            if cat.__class__ is str:
                k = gpu_kind.get(cat)
                if k is not None:
                    if e.ph == "X":
                        seen += self._gpu(e, k)
                    continue
                if cat in cpu_cats:
                    name = e.name
                    if e.ph == "X":
                        if cat == "user_annotation":
                            self._user(e, name, "host")
                        if cat in host_cats:
                            self._host(e, name)
                        if name.__class__ is str and (name in op_names or name.startswith(keep)):
                            self._cpu(e, name, cat)
                    continue
                is_launch = launch.get(cat)
                if is_launch is None:
                    is_launch = launch[cat] = cat in _LAUNCH_CATS or cat.endswith(("_runtime", "_driver"))
                if is_launch:
                    if e.ph == "X":
                        seen += self._launch(e)
                    continue
                if cat == "gpu_user_annotation":
                    name = e.name
                    if e.ph == "X":
                        self._user(e, name, "device")
                    if name.__class__ is str and name.startswith(_STEP_PREFIX) and e.ph == "X":
                        self._hta_row("mark", e, name)
                    continue
                if cat != "cpu_instant_event":
                    continue
            if e.name == "[memory]" and (e.ph == "i" or e.ph == "I"):
                self._memory(e)
        if stream_keys is None or stream_keys > seen:
            self._hta_streams(batch, None if stream_keys is None else stream_keys - seen)
        self.n_fed += len(batch)
        self.batch = []

    # -- the fast path: events bucketed by category once, then the common shapes handled column by column
    def _classify(self, cat) -> int:
        """Bucket of a category (:meth:`_route`): 0 GPU op, 1 CPU op / user annotation, 2 runtime/driver call,
        3 maybe a ``[memory]`` event (or no category), 4 not read, 5 not read unless its args have a stream."""
        if cat.__class__ is not str:
            code = 3
        elif cat in _GPU_KIND:
            code = 0
        elif cat in _CPU_CATS or cat == "gpu_user_annotation":
            code = 1
        elif cat in _LAUNCH_CATS or cat.endswith(("_runtime", "_driver")):
            code = 2
        elif cat == "cpu_instant_event":
            code = 3
        elif cat in _NO_STREAM_CATS:
            code = 4
        else:
            code = 5
        if len(self.cat_code) < 10_000:
            self.cat_code[cat] = code
        return code

    def _route(self, batch):
        """The events of a batch of :class:`_Ev` in 6 buckets (in event order each); None when a category is not
        hashable (the per-event path then reads the batch)."""
        out = ([], [], [], [], [], [])
        put = tuple(b.append for b in out)
        get = self.cat_code.get
        try:
            for e in batch:
                c = get(e.cat)
                if c is None:
                    c = self._classify(e.cat)
                put[c](e)
        except TypeError:  # an unhashable category (a list or an object)
            return None
        return out

    def _feed_fast(self, batch, stream_keys, buckets) -> None:
        """:meth:`feed` for a batch of :class:`_Ev` (msgspec): the same rows, in the same order, and the same
        problems as the per-event path, which each bucket falls back to when one of its values is not plain."""
        gpu, cpu, launch, mem, _, other = buckets
        self.batch = batch
        self._pending = []
        self._track = ([], [], set())
        hta0, coll0 = len(self.hta_role), len(self.coll)
        try:
            self._bucket = 0
            self._fast_gpu(gpu)
            self._bucket = 2
            self._fast_launch(launch)
            self._bucket = 1
            host = self._fast_cpu(cpu)
            self._bucket = 3
            self._fast_memory(mem)
        finally:
            pending, track = self._pending, self._track
            self._pending = self._track = None
        pos = None
        multi = len(track[2]) > 1  # rows of hta_events / collectives from more than one bucket: put in event order
        if pending or multi:
            pos = {id(e): i for i, e in enumerate(batch)}
        if multi and len(track[0]) > 1:
            self._reorder_hta(hta0, [pos[id(e)] for e in track[0]])
        if multi and len(track[1]) > 1:
            self._reorder_coll(coll0, [pos[id(e)] for e in track[1]])
        if pending:
            order = sorted(range(len(pending)), key=lambda i: pos[id(pending[i][0])])  # stable
            for i in order:
                self._reject(*pending[i])
        # HTA's other GPU rows (_hta_streams): only events whose args text holds "stream" can be one, and only in
        # the buckets that _hta_streams does not skip by category
        parts = [c for c in (_with_stream(host), _with_stream(_only_x(mem)), _with_stream(_only_x(other))) if c]
        if parts:
            if len(parts) > 1:
                pos = pos or {id(e): i for i, e in enumerate(batch)}
                cands = sorted((e for c in parts for e in c), key=lambda e: pos[id(e)])
            else:
                cands = parts[0]
            self.batch = batch
            self._hta_streams(cands, None)
        self.n_fed += len(batch)
        self.batch = []

    def _reorder_hta(self, start: int, positions: list) -> None:
        if all(a <= b for a, b in zip(positions, positions[1:])):
            return
        order = sorted(range(len(positions)), key=positions.__getitem__)
        for name in ("hta_role", "hta_name", "hta_stream", "hta_corr", "hta_ts", "hta_dur"):
            col = getattr(self, name)
            seg = col[start:]
            col[start:] = (array(col.typecode, [seg[i] for i in order]) if isinstance(col, array)
                           else [seg[i] for i in order])

    def _reorder_coll(self, start: int, positions: list) -> None:
        if all(a <= b for a, b in zip(positions, positions[1:])):
            return
        order = sorted(range(len(positions)), key=positions.__getitem__)
        seg = self.coll[start:]
        self.coll[start:] = [seg[i] for i in order]

    def _fast_gpu(self, events) -> int:
        """Bucket 0 (kernels, memcpy, memset): :meth:`_gpu` by columns. Returns how many have a stream arg."""
        xs = _only_x(events)
        if not xs:
            return 0
        ts, du = _bulk_ns_pair(xs)
        args = _bulk_args([e.args for e in xs], "comm") if du is not None else None
        if args is None or du.min() < 0 or du.max() > _MAX_DUR_STREAM_NS or not (
                (ts > -_MAX_TS_NS) & (ts < _MAX_TS_NS)).all():
            return sum(self._gpu(e, _GPU_KIND[e.cat]) for e in xs)
        if self.all_integral and ((ts % NS_PER_US).any() or (du % NS_PER_US).any()):
            self.all_integral = False
        hi = _INT64[1]
        streams = _bulk_ints([a.stream for a in args], 0, hi)
        devs = _bulk_ints([a.device for a in args], 0, hi)
        corrs = _bulk_ints([a.correlation for a in args], 0, hi)
        seen = len(xs) if streams is not None else sum(a.stream is not None for a in args)
        intern = self.intern.setdefault
        names = [intern(n, n) if n.__class__ is str and len(n) <= MAX_NAME_CHARS else self._s(n)
                 for n in [e.name for e in xs]]
        kinds = [_GPU_KIND[e.cat] for e in xs]
        colls = [a.collective for a in args]
        comm = self.comm_cache
        for n in set(names).difference(comm):
            self._is_comm(n)
        kinds = [("comm" if k == "kernel" and (c is not None or comm[n]) else k)
                 for k, c, n in zip(kinds, colls, names)]
        if streams is None or devs is None or corrs is None:  # some id is absent or odd: _gpu's rules one by one
            ids = [self._gpu_ids(e, a) for e, a in zip(xs, args)]
            streams = np.array([i[0] for i in ids], dtype=np.int64)
            devs = np.array([i[1] for i in ids], dtype=np.int64)
            corrs = np.array([i[2] for i in ids], dtype=np.int64)
        self.g_name.extend(names)
        self.g_kind.extend(kinds)
        self.g_ts.frombytes(_i64(ts))
        self.g_dur.frombytes(_i64(du))
        self.g_stream.frombytes(_i64(streams))
        self.g_dev.frombytes(_i64(devs))
        self.g_corr.frombytes(_i64(corrs))
        if colls.count(None) != len(colls):
            tl, dl = ts.tolist(), du.tolist()
            for i, c in enumerate(colls):
                if c is not None:
                    self._coll_row(xs[i], "gpu_kernel", names[i], (tl[i], dl[i]), xs[i].tid, args[i])
        return seen

    def _gpu_ids(self, e, a) -> tuple:
        """(stream, device, correlation) of a GPU op as :meth:`_gpu` reads them."""
        stream = _int(a.stream)
        if stream < 0:
            stream = _int(e.tid) if a.stream is None else self._lenient_int(e, a.stream, stream,
                                                                            "field args['stream']")
        dev = _int(a.device)
        if dev < 0:
            dev = _int(e.pid) if a.device is None else self._lenient_int(e, a.device, dev, "field args['device']")
        corr = _int(a.correlation)
        if corr < 0 and a.correlation is not None:
            corr = self._lenient_int(e, a.correlation, corr, "field args['correlation']")
        return stream, dev, corr

    def _fast_launch(self, events) -> int:
        """Bucket 2 (runtime/driver calls): :meth:`_launch` by columns. Returns how many have a stream arg."""
        xs = _only_x(events)
        if not xs:
            return 0
        args = _bulk_args([e.args for e in xs], "hta")
        if args is None or [a.stream for a in args].count(None) != len(args):
            return sum(self._launch(e) for e in xs)
        corr = [a.correlation for a in args]
        if corr.count(None):
            keep = [i for i, c in enumerate(corr) if c is not None]
            xs = [xs[i] for i in keep]
            corr = [corr[i] for i in keep]
        ts = _bulk_ns([e.ts for e in xs])
        cs = _bulk_ints(corr, _INT64[0], _INT64[1])
        codes = None
        if ts is not None and cs is not None and ((ts > -_MAX_TS_NS) & (ts < _MAX_TS_NS)).all():
            tids = [e.tid for e in xs]
            if set(map(type, tids)) <= {int, str}:  # (not bools or floats: True == 1.0 == 1 as dict keys)
                get = self.tid_codes.get
                codes = [get(t) for t in tids]
        if codes is None:
            for e in xs:
                self._launch(e)
            return 0
        if None in codes:
            for i, c in enumerate(codes):
                if c is None:
                    t = xs[i].tid
                    tid = self._s(t)
                    c = codes[i] = self.tid_code.setdefault(tid, len(self.tid_code))
                    if len(self.tid_codes) < 100_000:
                        self.tid_codes[t] = c
        self.launch_ts.frombytes(_i64(ts))
        self.launch_corr.frombytes(_i64(cs))
        self.launch_tid.extend(codes)
        return 0

    def _fast_cpu(self, events) -> None:
        """Bucket 1 (CPU ops, user annotations, their GPU-side spans): the host ops by columns, the few other
        events (steps, collectives, aten ops kept for FLOPs, user ranges) by the per-event handlers."""
        hc = _HOST_CATS
        hmask = [p == "X" and c in hc for p, c in zip([e.ph for e in events], [e.cat for e in events])]
        nh = hmask.count(True)
        host = events if nh == len(events) else list(compress(events, hmask))
        ts = du = None
        if host and len(self.h_ts) + len(host) <= MAX_HOST_OPS:
            ts, du = _bulk_ns_pair(host)
            if du is not None and (du.min() < 0 or du.max() > _MAX_DUR_STREAM_NS or not (
                    (ts > -_MAX_TS_NS) & (ts < _MAX_TS_NS)).all()):
                du = None
        if host and du is None:  # the per-event path (feed's), for every event of the bucket
            for e in events:
                self._cpu_event(e, True)
            return host
        names = [e.name for e in host]
        if host:
            if self.all_integral and ((ts % NS_PER_US).any() or (du % NS_PER_US).any()):
                self.all_integral = False
            intern = self.intern.setdefault
            self.h_name.extend([intern(n, n) if n.__class__ is str and len(n) <= MAX_NAME_CHARS else self._s(n)
                                for n in names])
            self.h_ts.frombytes(_i64(ts))
            self.h_dur.frombytes(_i64(du))
            self.h_tid.extend([e.tid for e in host])
        # which host ops _cpu reads too (2: an aten op of cpu_ops, 1: a step, collective, ...), per distinct name
        special = self.special
        if set(map(type, names)) <= {str}:
            for n in set(names).difference(special):
                special[n] = 2 if n in _OP_NAMES or n.startswith(_OP_PREFIXES) else \
                    1 if n.startswith(_KEEP_PREFIXES) else 0
            sp = np.array([special[n] for n in names], dtype=np.int8)
            if len(special) > 100_000:
                special.clear()
        else:
            sp = np.array([(2 if n in _OP_NAMES or n.startswith(_OP_PREFIXES) else 1 if n.startswith(_KEEP_PREFIXES)
                            else 0) if n.__class__ is str else 0 for n in names], dtype=np.int8)
        if nh == len(events):  # only host ops: the special ones in order (their times as converted above)
            for i in np.flatnonzero(sp == 1).tolist():
                self._cpu(host[i], names[i], host[i].cat, (int(ts[i]), int(du[i])))
            if (sp == 2).any():
                self._fast_ops(host, np.flatnonzero(sp == 2).tolist(), ts, du)
            return host
        # other events too (user annotations, their GPU-side spans, instants): those and the special host ops
        # in bucket order, the aten ops by columns (flushed before another event can add a cpu_ops row)
        hm = np.array(hmask, dtype=bool)
        hpos = np.cumsum(hm) - 1  # bucket index -> host index
        hidx = np.flatnonzero(hm)
        visit = np.sort(np.concatenate([hidx[sp != 0], np.flatnonzero(~hm)])).tolist()
        ops: list = []
        for j in visit:
            e = events[j]
            if hmask[j]:
                i = int(hpos[j])
                if sp[i] == 2:
                    ops.append(i)
                else:
                    self._cpu(e, names[i], e.cat, (int(ts[i]), int(du[i])))
                continue
            if ops and e.ph == "X" and e.name.__class__ is str and e.name.startswith("aten::"):
                self._fast_ops(host, ops, ts, du)  # it may add a cpu_ops row: the earlier ones first
                ops = []
            self._cpu_event(e, True)
        if ops:
            self._fast_ops(host, ops, ts, du)
        return host

    def _fast_ops(self, host: list, idx: list, ts, du) -> None:
        """The aten ops of :meth:`_cpu` (cpu_ops rows) by columns: host[i] for i in idx, whose times are ts[i],
        du[i] (checked)."""
        xs = [host[i] for i in idx]
        args = None
        if len(self.o_ts) + len(xs) <= MAX_CPU_OPS:
            args = _bulk_args([e.args for e in xs], "op")
        if args is None:
            for e in xs:
                self._cpu(e, e.name, e.cat)
            return
        sel = np.array(idx, dtype=np.int64)
        s = self._s
        self.o_name.extend([s(e.name) for e in xs])
        self.o_ts.frombytes(_i64(ts[sel]))
        self.o_dur.frombytes(_i64(du[sel]))
        self.o_tid.extend([s(e.tid) for e in xs])
        dims, canon = self._dims, self._canon
        self.o_dims.extend([dims(e, a.input_dims) for e, a in zip(xs, args)])
        self.o_types.extend([canon(a.input_types) for a in args])
        flops = [a.flops for a in args]
        if flops.count(None) == len(flops):
            self.o_flops.frombytes(np.full(len(flops), math.nan).tobytes())
        else:
            self.o_flops.extend([self._op_flops(e, a.flops) for e, a in zip(xs, args)])

    def _cpu_event(self, e, host: bool) -> None:
        """One event of bucket 1 as :meth:`feed` reads it (host: also its host op row)."""
        cat = e.cat
        name = e.name
        if cat == "gpu_user_annotation":
            if e.ph == "X":
                self._user(e, name, "device")
            if name.__class__ is str and name.startswith(_STEP_PREFIX) and e.ph == "X":
                self._hta_row("mark", e, name)
            return
        if e.ph == "X":
            if cat == "user_annotation":
                self._user(e, name, "host")
            if host and cat in _HOST_CATS:
                self._host(e, name)
            if name.__class__ is str and (name in _OP_NAMES or name.startswith(_KEEP_PREFIXES)):
                self._cpu(e, name, cat)

    def _fast_memory(self, events) -> None:
        """Bucket 3 (instant events, events without a category): :meth:`_memory` by columns."""
        xs = [e for e in events if e.name == "[memory]" and (e.ph == "i" or e.ph == "I")]
        if not xs:
            return
        ts = _bulk_ns([e.ts for e in xs])
        args = _bulk_args([e.args for e in xs], "mem") if ts is not None else None
        cols = None
        if args is not None and ((ts > -_MAX_TS_NS) & (ts < _MAX_TS_NS)).all():
            hi = _INT64[1]
            dt = _bulk_ints([a.device_type for a in args], _INT64[0], hi)
            di = _bulk_ints([a.device_id for a in args], _INT64[0], hi)
            vals = [_bulk_bytes([a.bytes for a in args], -MAX_MEMORY_BYTES),
                    _bulk_bytes([a.total_allocated for a in args], 0.0),
                    _bulk_bytes([a.total_reserved for a in args], 0.0)]
            if dt is not None and di is not None and all(v is not None for v in vals):
                cols = (dt, di, *vals)
        if cols is None:
            for e in xs:
                self._memory(e)
            return
        if self.all_integral and (ts % NS_PER_US).any():
            self.all_integral = False
        self.m_ts.frombytes(_i64(ts))
        self.m_dt.frombytes(_i64(cols[0]))
        self.m_di.frombytes(_i64(cols[1]))
        self.m_bytes.frombytes(cols[2].tobytes())
        self.m_alloc.frombytes(cols[3].tobytes())
        self.m_res.frombytes(cols[4].tobytes())

    def _hta_streams(self, batch, extra: int | None) -> None:
        """HTA 0.5 counts every complete event with a ``stream`` arg other than -1 as GPU work (Triton launcher
        ``cpu_op`` s with ``"stream": 0``, ``cuda_sync`` rows, MTIA ``mtia_ccp_events``): keep those as ``gpu``
        rows of ``hta_events``. Only run on batches whose text has more ``"stream"`` keys than the GPU events
        and launches decoded in :meth:`feed` hold (``extra`` = how many more; None: unknown), so traces without
        such events pay nothing, and it stops once it has seen them all."""
        for e in batch:
            if e is None or e.ph != "X":
                continue
            cat = e.cat
            if cat.__class__ is str and (cat in _GPU_KIND or cat in _NO_STREAM_CATS or self.launch_cat.get(cat)):
                continue
            args = e.args
            if args is None or (type(args) is dict and "stream" not in args):
                continue
            a = _args(args, "hta")
            if a.stream is None:
                continue
            if _hta_int(a.stream) != -1:
                self._hta_row("gpu", e, self._s(e.name), a)
            if extra is not None:
                extra -= 1
                if extra <= 0:
                    return

    # -- handlers
    def _host(self, e, name) -> None:
        if len(self.h_ts) >= MAX_HOST_OPS:
            self.h_dropped += 1
            return
        tt = self._times(e)
        if tt is None:
            return
        self.h_name.append(self.intern.setdefault(name, name) if name.__class__ is str and len(name) <= MAX_NAME_CHARS
                           else self._s(name))
        self.h_ts.append(tt[0])
        self.h_dur.append(tt[1])
        self.h_tid.append(e.tid)

    def _user(self, e, name, side: str) -> None:
        """A user range (``record_function`` / NVTX span, category ``user_annotation``; its device-side span
        ``gpu_user_annotation``): count, total, longest and first start per (side, name); the profiler's own
        step marks and collective spans (:data:`_NOT_USER`) are not user ranges."""
        if name.__class__ is not str or name.startswith(_NOT_USER):
            return
        tt = self._times(e)
        if tt is None:
            return
        key = (side, name)
        a = self.u_agg.get(key)
        if a is None:
            if len(self.u_agg) >= 2 * MAX_USER_RANGE_NAMES:
                key = (side, "(other ranges)")
                a = self.u_agg.get(key)
            if a is None:
                a = self.u_agg[(side, self._s(key[1]))] = [0, 0, 0, tt[0]]
        if self.u_key is not None:
            if len(self.u_key) >= MAX_USER_RANGE_SPANS:
                self.u_key = None
                self.u_spans_dropped = True
            else:
                self.u_key.append((side, self._s(key[1])))
                self.u_ts.append(tt[0])
                self.u_dur.append(tt[1])
        a[0] += 1
        a[1] += tt[1]
        if tt[1] > a[2]:
            a[2] = tt[1]
        if tt[0] < a[3]:
            a[3] = tt[0]

    def _hta_row(self, role: str, e, name: str, a=None) -> None:
        """One ``hta_events`` row (module doc); a = the event's decoded hta args (None: no stream/correlation)."""
        tt = self._times(e)
        if tt is None:
            return
        self.hta_role.append(role)
        self.hta_name.append(self._s(name))
        self.hta_stream.append(-1 if a is None else _hta_int(a.stream))
        self.hta_corr.append(-1 if a is None else _hta_int(a.correlation))
        self.hta_ts.append(tt[0])
        self.hta_dur.append(tt[1])
        if self._track is not None:
            self._track[0].append(e)
            self._track[2].add(self._bucket)

    def _launch(self, e) -> int:
        """A runtime/driver API call: its correlation id and time (HTA's last-step filter); 1 if it has a stream."""
        a = _args(e.args, "hta")
        if a.stream is not None and _hta_int(a.stream) != -1:  # HTA: any row with a stream is GPU work
            self._hta_row("gpu", e, self._s(e.name), a)  # (ROCm writes "0x0", which int() refuses: not one)
        elif a.correlation is not None:
            t = self._ts(e)
            if t is not None:
                self.launch_ts.append(t)
                self.launch_corr.append(_hta_int(a.correlation))
                tid = self._s(e.tid)
                self.launch_tid.append(self.tid_code.setdefault(tid, len(self.tid_code)))
        return a.stream is not None

    def _gpu(self, e, kind: str) -> int:
        tt = self._times(e)
        if tt is None:
            return 0
        name = e.name
        name = self._s(name)
        a = _args(e.args, "comm")
        coll = a.collective
        if kind == "kernel" and (coll is not None or self._is_comm(name)):
            kind = "comm"
        stream, dev, corr = self._gpu_ids(e, a)
        self.g_name.append(name)
        self.g_kind.append(kind)
        self.g_ts.append(tt[0])
        self.g_dur.append(tt[1])
        self.g_stream.append(stream)
        self.g_dev.append(dev)
        self.g_corr.append(corr)
        if coll is not None:
            self._coll_row(e, "gpu_kernel", name, tt, e.tid, a)
        return a.stream is not None

    def _cpu(self, e, name: str, cat: str, times: tuple | None = None) -> None:
        """A CPU op or annotation read by name (steps, data loader, collectives, aten ops of cpu_ops); ``times``: its
        (ts, dur) as :meth:`_times` gives them, when the column path converted and checked them already."""
        if name.startswith(_STEP_PREFIX):
            m = _STEP_NUMBER.match(name, len(_STEP_PREFIX))
            n = int(m.group(0)) if m and len(m.group(0)) <= 10 else -1
            if not 0 <= n <= MAX_STEP:
                self._reject(e, "field 'name' (ProfilerStep#N)", f"N is not a step number in 0..{MAX_STEP}",
                             "span ignored")
                return
            tt = self._times(e) if times is None else times
            if tt is None:
                return
            self._hta_row("mark", e, name)
            tid = self._s(e.tid)
            self.step_tids[tid] = self.step_tids.get(tid, 0) + 1
            self.step_n.append(n)  # (ts, dur) exactly as written; merged per step in columns()
            self.step_ts.append(tt[0])
            self.step_dur.append(tt[1])
            return
        if name.startswith(_DATALOADER_PREFIX):
            tt = self._times(e) if times is None else times
            if tt is not None:
                self.d_name.append(self._s(name))  # capped
                self.d_ts.append(tt[0])
                self.d_dur.append(tt[1])
                self.d_tid.append(self._s(e.tid))
            return
        if name == "record_param_comms":
            tt = self._times(e) if times is None else times
            if tt is not None:
                a = _args(e.args, "comm")
                if self._collective(a.collective) != "wait":
                    self._coll_row(e, "record_param_comms", name, tt, e.tid, a)
            return
        if name.startswith("gloo:") or name.startswith("nccl:"):
            tt = self._times(e) if times is None else times
            if tt is not None:
                self._annotation_row(e, "gloo" if name[0] == "g" else "annotation", name, tt, e.tid,
                                     _args(e.args, "comm"))
            return
        if name.startswith("c10d::"):
            tt = self._times(e) if times is None else times
            if tt is not None:
                self._c10d_row(e, name, tt, e.tid, _args(e.args, "comm"))
            return
        if name.startswith("aten::"):
            if name not in _OP_NAMES and not name.startswith(_OP_PREFIXES):
                return
            if len(self.o_ts) >= MAX_CPU_OPS:
                self.o_dropped += 1
                return
            tt = self._times(e) if times is None else times
            if tt is None:
                return
            a = _args(e.args, "op")
            self.o_name.append(self._s(name))
            self.o_ts.append(tt[0])
            self.o_dur.append(tt[1])
            self.o_tid.append(self._s(e.tid))
            self.o_dims.append(self._dims(e, a.input_dims))
            self.o_types.append(self._canon(a.input_types))
            self.o_flops.append(self._op_flops(e, a.flops))

    def _memory(self, e) -> None:
        t = self._ts(e)
        if t is None:
            return
        if self.all_integral and t % NS_PER_US:
            self.all_integral = False
        a = _args(e.args, "mem")
        nan = float("nan")
        self.m_ts.append(t)
        self.m_dt.append(_int(a.device_type))
        self.m_di.append(_int(a.device_id))
        for arr, v, column, lo in ((self.m_bytes, a.bytes, "field args['Bytes']", -MAX_MEMORY_BYTES),
                                   (self.m_alloc, a.total_allocated, "field args['Total Allocated']", 0.0),
                                   (self.m_res, a.total_reserved, "field args['Total Reserved']", 0.0)):
            f = _num(v)
            if f is None or not lo <= f <= MAX_MEMORY_BYTES:
                if v is not None:  # absent (2021 traces): NaN, not a problem
                    self._reject(e, column, "not a number" if f is None else "negative" if f < 0 == lo
                                 else "beyond 2^50 bytes (1 PiB)", "value ignored")
                f = nan
            arr.append(f)

    def _arg_int(self, e, v, column: str, lo: int, hi: int) -> int:
        """A count or id from the args: -1 when absent; the integer when in ``lo..hi``; else -1 and the value is
        refused (named). Strict: ``"12abc"``, 1.5, NaN, bools and lists are not integers."""
        if v is None:
            return -1
        if v.__class__ is int and lo <= v <= hi:
            return v
        n = as_int(v)
        if n is not None and lo <= n <= hi:
            return n
        self._reject(e, column, f"not an integer in {lo}..{_BOUND_TEXT.get(hi, hi)}", "value ignored")
        return -1

    def _lenient_int(self, e, v, n: int, column: str) -> int:
        """``n`` = _int(v) was negative although ``v`` was written: -1 is fine, anything else is named."""
        if n == -1 and as_int(v) != -1:
            self._reject(e, column, "not an integer", "value ignored")
        return n

    def _coll_row(self, e, source, name, tt, tid, a, collective=None, in_n=None, out_n=None, dtype=None,
                  peer_local=-1) -> None:
        """One ``collectives`` row. A collective repeats its metadata call after call (only the times and ``Seq``
        change): the rest of a row made without refusing a value is kept by the values it was made from, each a
        text, an int or None (so 1, 1.0 and True never share a row), and reused."""
        seq = a.seq
        if seq is None or (seq.__class__ is int and 0 <= seq <= _INT64[1]):
            key = (source, name, tid, collective, in_n, out_n, dtype, peer_local, a.collective, a.in_nelems,
                   a.out_nelems, a.dtype, a.group_name, a.group_id, a.group_desc, a.group_ranks, a.group_size,
                   a.src_rank, a.dst_rank)
            for v in key:
                if v.__class__ not in _KEY_CLASSES:
                    key = None
                    break
        else:
            key = None
        if key is not None:
            tail = self.coll_tails.get(key)
            if tail is not None:
                self.coll.append((source, tail[0], tt[0], tt[1], *tail[1], -1 if seq is None else seq, *tail[2]))
                if self._track is not None:
                    self._track[1].append(e)
                    self._track[2].add(self._bucket)
                return
            refused = self._refused
        self._make_coll_row(e, source, name, tt, tid, a, collective, in_n, out_n, dtype, peer_local)
        if key is not None and self._refused == refused and len(self.coll_tails) < 10_000:
            chars = sum(len(v) for v in key if v.__class__ is str)  # the key holds the texts as written (uncut)
            if self._tail_chars + chars <= _TAILS_MAX_CHARS:
                self._tail_chars += chars
                row = self.coll[-1]
                self.coll_tails[key] = (row[1], row[4:16], row[17:])

    def _make_coll_row(self, e, source, name, tt, tid, a, collective=None, in_n=None, out_n=None, dtype=None,
                       peer_local=-1) -> None:
        if collective is None:
            collective = self._collective(a.collective)
        if in_n is None:
            in_n = self._arg_int(e, a.in_nelems, "field args['In msg nelems']", 0, MAX_NELEMS)
        if out_n is None:
            out_n = self._arg_int(e, a.out_nelems, "field args['Out msg nelems']", 0, MAX_NELEMS)
        if dtype is None:
            dtype = a.dtype if isinstance(a.dtype, str) else ""
        eb = self.eb_cache.get(dtype)
        if eb is None:
            eb = elem_bytes(dtype)
            if len(self.eb_cache) < 10_000:
                self.eb_cache[dtype] = eb
        nan = float("nan")
        group_name = a.group_name if a.group_name is not None else a.group_id
        self.coll.append((
            source, self._s(name), tt[0], tt[1], self._s(tid), self._s(collective), in_n, out_n, self._s(dtype), eb,
            in_n * eb if in_n >= 0 else nan, out_n * eb if out_n >= 0 else nan,
            self._s(_text(group_name)), self._s(_text(a.group_desc)), self._s(_text(a.group_ranks)),
            self._arg_int(e, a.group_size, "field args['Group size']", 1, MAX_RANKS),
            self._arg_int(e, a.seq, "field args['Seq']", 0, _INT64[1]),
            self._arg_int(e, a.src_rank, "field args['Src Rank']", -1, MAX_RANKS - 1),
            self._arg_int(e, a.dst_rank, "field args['Dst Rank']", -1, MAX_RANKS - 1), peer_local))
        if self._track is not None:
            self._track[1].append(e)
            self._track[2].add(self._bucket)

    def _annotation_row(self, e, source, name, tt, tid, a) -> None:
        collective = self._collective(name)
        dims = a.input_dims
        in_n = self._numel(e, dims[0]) if isinstance(dims, list) and dims else -1
        types = a.input_types
        dtype = types[0] if isinstance(types, list) and types and isinstance(types[0], str) else ""
        if a.collective is not None:  # newer records may carry the full metadata
            self._coll_row(e, source, name, tt, tid, a, collective=collective)
            return
        out_n = in_n if collective in _SAME_SIZE else -1
        self._coll_row(e, source, name, tt, tid, a, collective, in_n, out_n, dtype)

    def _numel(self, e, dims) -> int:
        """Elements of one tensor's or tensor list's ``Input Dims`` entry (-1 if unknown); a shape that is not
        non-negative integers or has more than MAX_NELEMS elements is refused (named)."""
        if not _shapes_ok(dims):
            self._reject(e, "field args['Input Dims']", _BAD_SHAPE, "value ignored")
            return -1
        return _numel(dims)

    def _c10d_row(self, e, name, tt, tid, a) -> None:
        op = self.c10d_op.get(name)
        if op is None:
            op = re.sub(r"[^a-z]", "", name[6:].lower())
            if len(self.c10d_op) < 10_000:
                self.c10d_op[name] = op
        collective = self._collective(name)
        if not collective or collective == "wait" or op in ("wait", "waitall", "waittensor"):
            return
        dims = a.input_dims if isinstance(a.input_dims, list) else []
        types = a.input_types if isinstance(a.input_types, list) else []
        o, i = _C10D_ARGS.get(op, (0, 0))
        in_n = self._numel(e, dims[i]) if len(dims) > i else -1
        out_n = (in_n if o == i else self._numel(e, dims[o])) if len(dims) > o else -1
        dtype = ""
        for idx in (i, o):
            t = types[idx] if len(types) > idx else None
            if isinstance(t, str) and t and t not in ("TensorList", "Scalar", "ScalarList", "GenericList"):
                dtype = t
                break
        peer_local = -1
        if op in _C10D_P2P:  # send(tensors, pg, dstRank, tag) / recv_(tensors, pg, srcRank, tag): group-local peer
            c = a.concrete
            v = c[2] if isinstance(c, list) and len(c) > 2 else None
            peer_local = self._arg_int(e, None if v == "" else v,
                                       "field args['Concrete Inputs'][2]", 0, MAX_RANKS - 1)
        self._coll_row(e, "c10d", name, tt, tid, a, collective, in_n, out_n, dtype, peer_local)

    # -- tables
    def columns(self, from_ns: bool = False) -> dict[str, dict[str, np.ndarray]]:
        """The tables as columns (:class:`DecodedTrace`), times as exact int64 ns (``ts_ns``/``dur_ns``); ``from_ns``:
        the file wrote ns, not µs. Each table's rows in start order (stable), no empty table."""
        out: dict[str, dict[str, np.ndarray]] = {}

        def ns(a) -> np.ndarray:
            x = np.frombuffer(a, dtype=np.int64).copy() if len(a) else np.zeros(0, dtype=np.int64)
            return x // NS_PER_US if from_ns else x

        def i64(a) -> np.ndarray:
            return np.frombuffer(a, dtype=np.int64).copy() if len(a) else np.zeros(0, dtype=np.int64)

        def f64(a) -> np.ndarray:
            return np.frombuffer(a, dtype=np.float64).copy() if len(a) else np.zeros(0, dtype=np.float64)

        def table(cols: dict, *release: str) -> dict[str, np.ndarray]:
            """The columns (lists made object arrays) in ts_ns order (stable); the collector's lists/arrays named in
            ``release`` are emptied first, so a 2 GB trace's columns are not held twice (collector + table) at once."""
            for name in release:
                v = getattr(self, name)
                setattr(self, name, [] if isinstance(v, list) else array(v.typecode))
            cols = {k: v if isinstance(v, np.ndarray) else objects(v) for k, v in cols.items()}
            ts = cols["ts_ns"]
            if len(ts) > 1 and (ts[1:] < ts[:-1]).any():
                order = np.argsort(ts, kind="stable")
                cols = {k: v[order] for k, v in cols.items()}
            return cols

        if len(self.step_n):  # as recorded; merged per step number below, after the time checks
            out["steps"] = {"step": i64(self.step_n), "ts_ns": ns(self.step_ts), "dur_ns": ns(self.step_dur)}
        if self.g_name:
            out["gpu_ops"] = table({
                "name": self.g_name, "kind": self.g_kind, "ts_ns": ns(self.g_ts), "dur_ns": ns(self.g_dur),
                "stream": i64(self.g_stream), "device": i64(self.g_dev), "correlation": i64(self.g_corr)},
                "g_name", "g_kind", "g_ts", "g_stream", "g_dev", "g_corr")  # g_dur: kept_durations_us
        if self.coll:
            names = ["source", "name", "ts_ns", "dur_ns", "tid", "collective", "in_nelems", "out_nelems", "dtype",
                     "elem_bytes", "in_bytes", "out_bytes", "group_name", "group_desc", "group_ranks",
                     "group_size", "seq", "src_rank", "dst_rank", "peer_local"]
            floats = ("elem_bytes", "in_bytes", "out_bytes")
            ints = ("ts_ns", "dur_ns", "in_nelems", "out_nelems", "group_size", "seq", "src_rank", "dst_rank",
                    "peer_local")
            # column by column (the rows transposed once)
            cols = {c: np.array(v, dtype=np.float64) if c in floats else np.array(v, dtype=np.int64) if c in ints
                    else objects(v) for c, v in zip(names, zip(*self.coll))}
            if from_ns:
                cols["ts_ns"] //= NS_PER_US
                cols["dur_ns"] //= NS_PER_US
            out["collectives"] = _gloo_peers(table(cols))
        if self.o_name:
            out["cpu_ops"] = table({
                "name": self.o_name, "ts_ns": ns(self.o_ts), "dur_ns": ns(self.o_dur), "tid": self.o_tid,
                "input_dims": self.o_dims, "input_types": self.o_types,
                **({"profiler_flops": f64(self.o_flops)} if self.o_has_flops else {})},
                "o_name", "o_ts", "o_tid", "o_dims", "o_types", "o_flops")
        host = self._host_ops(ns)
        if host is not None:
            out["host_ops"] = host
        if self.d_name:
            out["dataloader"] = table({"name": self.d_name, "ts_ns": ns(self.d_ts), "dur_ns": ns(self.d_dur),
                                       "tid": self.d_tid})
        if self.hta_role:
            out["hta_events"] = table({
                "role": self.hta_role, "name": self.hta_name, "stream": i64(self.hta_stream),
                "correlation": i64(self.hta_corr), "ts_ns": ns(self.hta_ts), "dur_ns": ns(self.hta_dur)},
                "hta_role", "hta_name", "hta_stream", "hta_corr", "hta_ts", "hta_dur")
        launches = None
        if len(self.launch_ts):  # checked with the others below, then reduced to launch_ts_ns (_attach_launches)
            launches = {"correlation": i64(self.launch_corr), "ts_ns": ns(self.launch_ts), "tid": i64(self.launch_tid)}
            self.launch_ts, self.launch_corr, self.launch_tid = array("q"), array("q"), array("q")  # 2 GB: 3.2 M calls
        if len(self.m_ts):
            out["memory"] = table({
                "ts_ns": ns(self.m_ts), "device_type": i64(self.m_dt), "device_id": i64(self.m_di),
                "bytes": f64(self.m_bytes), "total_allocated": f64(self.m_alloc), "total_reserved": f64(self.m_res)})
        if launches is not None:
            out["launches"] = launches
        self._check_times(out, from_ns)
        _kernel_launches(out, self.tid_code)
        _attach_launches(out)
        st = out.pop("steps", None)
        if st is not None and len(st["step"]):
            # the same step recorded twice (another thread/process): the widest span
            step, ts = st["step"], st["ts_ns"]
            end = ts + st["dur_ns"]
            order = np.argsort(step, kind="stable")
            step = step[order]
            first = np.flatnonzero(np.r_[True, step[1:] != step[:-1]])
            t_min = np.minimum.reduceat(ts[order], first)
            out["steps"] = {"step": step[first], "ts_ns": t_min,
                            "dur_ns": np.maximum.reduceat(end[order], first) - t_min}
            self._check_times(out, from_ns, only="steps")
        if self.u_agg:  # after the time checks (aggregates, not per-event rows): ts_ns = the first occurrence's
            # start (the run origin leaves this table out: a range that wraps the trace does not move it)
            keys = list(self.u_agg)
            vals = np.array([self.u_agg[k] for k in keys], dtype=np.int64).reshape(-1, 4)
            div = NS_PER_US if from_ns else 1
            order = np.argsort(vals[:, 3], kind="stable")
            vals = vals[order]
            out["user_ranges"] = {
                "side": objects([keys[i][0] for i in order]), "name": objects([keys[i][1] for i in order]),
                "count": vals[:, 0].copy(), "ts_ns": vals[:, 3] // div, "total_ns": vals[:, 1] // div,
                "max_ns": vals[:, 2] // div}
            self.u_agg = {}
            if self.u_key:  # in start order, as every decoded table
                ts = np.frombuffer(self.u_ts, dtype=np.int64) // div
                o = np.argsort(ts, kind="stable")
                out["user_range_spans"] = {
                    "side": objects([self.u_key[i][0] for i in o]), "name": objects([self.u_key[i][1] for i in o]),
                    "ts_ns": ts[o], "dur_ns": (np.frombuffer(self.u_dur, dtype=np.int64) // div)[o]}
            self.u_key, self.u_ts, self.u_dur = [], array("q"), array("q")
        return {k: v for k, v in out.items() if row_count(v)}

    def _check_times(self, out: dict, from_ns: bool, only: str | None = None) -> None:
        """Refuse kept rows whose duration is over one day (the unit is known now) or whose ts is more than one
        day from the median of the trace's kept times (a lone absurd clock value would stretch the timeline).
        One numpy pass per table; refused rows are quoted by their ts as written."""
        parts = [df["ts_ns"] for df in out.values() if len(df["ts_ns"])]
        if not parts:
            return
        ref = int(np.median(np.concatenate(parts)))
        lo, hi = ref - _MAX_DUR_NS, ref + _MAX_DUR_NS
        far, long = [], []
        for name in [only] if only else list(out):
            df = out[name]
            ts = df["ts_ns"]
            bad_ts = (ts < lo) | (ts > hi)
            bad_dur = df["dur_ns"] > _MAX_DUR_NS if "dur_ns" in df else np.zeros(len(ts), dtype=bool)
            if bad_ts.any() or bad_dur.any():
                far.append(ts[bad_ts])
                long.append(ts[bad_dur & ~bad_ts])
                ok = ~(bad_ts | bad_dur)
                out[name] = {k: v[ok] for k, v in df.items()}
        for arrays, column, reason in ((far, "field 'ts'", "more than one day away from the trace's other events"),
                                       (long, "field 'dur'", "over one day")):
            if not arrays:
                continue
            # one event can be in two tables (an NCCL kernel is a GPU op and a collective): count distinct times
            for i, t in enumerate(np.unique(np.concatenate(arrays)).tolist()):
                shown = None
                if i < MAX_EXAMPLES:
                    shown = str(t) if from_ns else f"{t // NS_PER_US}.{t % NS_PER_US:03d}".removesuffix(".000")
                self.rejects.add(self.where, shown, column, reason, "event skipped",
                                 unit=("event at ts", "events at ts"))

    def _host_ops(self, ns) -> dict[str, np.ndarray] | None:
        """The main thread's top-level CPU op spans (module doc, ``host_ops``)."""
        if not self.h_name:
            return None
        raw = self.h_tid
        if set(map(type, raw)) <= {int, str}:  # each distinct tid made text once (not bools: True == 1 as a key)
            text = {t: self._s(t) for t in set(raw)}
            tid = np.array(list(map(text.__getitem__, raw)), dtype=object)
        else:
            tid = np.array([self._s(t) for t in raw], dtype=object)
        h_name, h_ts, h_dur = self.h_name, self.h_ts, self.h_dur  # handed over (emptied in the collector)
        self.h_name, self.h_tid, self.h_ts, self.h_dur = [], [], array("q"), array("q")
        if self.step_tids:
            main = max(self.step_tids, key=self.step_tids.get)
        else:
            names, counts = np.unique(tid.astype(str), return_counts=True)
            main = names[np.argmax(counts)]
        on = tid == main
        if not on.any():
            return None
        ts, dur = ns(h_ts)[on], ns(h_dur)[on]
        del h_ts, h_dur
        order = np.lexsort((-dur, ts))  # by start, the enclosing (longer) span first
        ts, dur = ts[order], dur[order]
        end = ts + dur
        before = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], end[:-1]]))
        top = end > before  # not inside an earlier span of the thread
        names = objects(h_name)[on][order][top]
        return {"name": names, "ts_ns": ts[top], "dur_ns": dur[top], "tid": text_full(len(names), main)}

    def kept_durations_us(self) -> np.ndarray:
        parts = [np.frombuffer(self.g_dur, dtype=np.int64) if len(self.g_dur) else np.zeros(0, dtype=np.int64),
                 np.frombuffer(self.o_dur, dtype=np.int64) if len(self.o_dur) else np.zeros(0, dtype=np.int64),
                 np.array([r[3] for r in self.coll], dtype=np.int64),
                 np.frombuffer(self.d_dur, dtype=np.int64) if len(self.d_dur) else np.zeros(0, dtype=np.int64),
                 np.frombuffer(self.step_dur, dtype=np.int64) if len(self.step_dur) else np.zeros(0, dtype=np.int64)]
        d = np.concatenate(parts) / NS_PER_US
        return d[d > 0]


def _comm_regex(patterns, where: str, problems: list):
    """The one regex of the communication kernel patterns (the built-in ones, then ``patterns``); a pattern that does
    not compile or risks catastrophic backtracking is named in ``problems`` (for ``where``) and left out."""
    regex, refused = _comm_regex_of(tuple(BUILTIN_COMM_PATTERNS) + tuple(patterns or ()))
    problems.extend((where, text) for text in refused)
    return regex


_COMM_REGEXES: dict = {}  # patterns -> (regex, refusals): each pattern checked once per process, not per file


def _comm_regex_of(patterns: tuple):
    texts = all(p.__class__ is str for p in patterns)  # other values are refused below, and not kept (1 == True)
    found = _COMM_REGEXES.get(patterns) if texts else None
    if found is not None:
        return found
    parts, refused = [], []
    for p in patterns:
        try:
            re.compile(p)
        except (re.error, TypeError) as exc:
            refused.append(f"communication kernel pattern {p!r} is not a valid regex ({exc}); ignored")
            continue
        risk = regex_problem(p)
        if risk:
            refused.append(f"communication kernel pattern {p[:80]!r}: {risk}; ignored")
            continue
        parts.append(f"(?:{p})")
    found = (re.compile("|".join(parts)), tuple(refused))
    if texts and len(_COMM_REGEXES) < 64:
        _COMM_REGEXES[patterns] = found
    return found


# --------------------------------------------------------------------------------------------------


#: ``launch_ts_ns`` of a GPU row whose correlation no runtime/driver call has
NO_LAUNCH = np.iinfo(np.int64).max


def _gloo_peers(coll: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``peer_local`` of each ``gloo`` send / recv span: that of the ``c10d::send`` / ``c10d::recv_`` /
    ``c10d::recv_any_source_`` op of the same thread and direction that encloses it or is the last to start before
    it (torch records the c10d op, then gloo's span on the same thread). One c10d op gives its peer to one span
    (the first after it): a span without its own c10d op keeps -1 rather than an earlier op's peer. ``coll``'s
    columns are in ts_ns order; ``peer_local`` is set in place."""
    collective, source = coll["collective"], coll["source"]
    is_p2p = (collective == "send") | (collective == "recv")
    spans = is_p2p & (source == "gloo")
    ops = is_p2p & (source == "c10d")
    if not spans.any() or not ops.any():
        return coll
    s = pd.DataFrame({"index": np.flatnonzero(spans), "ts_ns": coll["ts_ns"][spans], "tid": coll["tid"][spans],
                      "collective": collective[spans]})  # "index": the span's row
    o = pd.DataFrame({"op_row": np.flatnonzero(ops), "ts_ns": coll["ts_ns"][ops], "tid": coll["tid"][ops],
                      "collective": collective[ops], "peer_local": coll["peer_local"][ops]})
    m = pd.merge_asof(s, o, on="ts_ns", by=["tid", "collective"], direction="backward")
    m = m[m["op_row"].notna()].drop_duplicates("op_row", keep="first")
    if not m.empty:
        coll["peer_local"][m["index"].to_numpy()] = m["peer_local"].to_numpy(np.int64)
    return coll


def _kernel_launches(out: dict, tid_code: dict) -> None:
    """``cpu_ops.kernel_launches``: how many runtime launch calls on the op's thread, within its span, have the
    correlation id of a device kernel (the op's subtree launched them). -1 on every op of a trace without device
    kernels (CPU-only, gloo) or whose launch calls link to no kernel (launches not recorded: unknown). An op that
    launched none in a trace whose launches link to kernels ran no device work of its own: under CUDA/HIP graph
    capture the kernels are recorded, not run, and run later under one graph launch, so the op's FLOPs are not its
    own (reportgen/flopcount.py ``NO_KERNEL``)."""
    ops = out.get("cpu_ops")
    if ops is None or not row_count(ops):
        return
    n = row_count(ops)
    g = out.get("gpu_ops")
    kernels = None
    if g is not None and row_count(g):
        kind = g["kind"]
        kernels = g["correlation"][(kind == "kernel") | (kind == "comm")]
    if kernels is None or not len(kernels):
        ops["kernel_launches"] = np.full(n, -1, dtype=np.int64)
        return
    launch = out.get("launches")
    hit = None
    if launch is not None and len(launch["ts_ns"]) and "tid" in launch:
        hit = np.isin(launch["correlation"], kernels) & (launch["correlation"] >= 0)
    if hit is None or not hit.any():  # no launch is linked to a kernel (none recorded): which op launched what is
        ops["kernel_launches"] = np.full(n, -1, dtype=np.int64)  # unknown, so no op is ruled out
        return
    counts = np.zeros(n, dtype=np.int64)
    lt, ltid = launch["ts_ns"][hit], launch["tid"][hit]
    codes = np.array([tid_code.get(t, -1) for t in ops["tid"].tolist()], dtype=np.int64)
    start = ops["ts_ns"]
    end = start + ops["dur_ns"]
    for code in np.unique(codes[codes >= 0]):
        ts = np.sort(lt[ltid == code])
        rows = np.flatnonzero(codes == code)
        counts[rows] = np.searchsorted(ts, end[rows], side="right") - np.searchsorted(ts, start[rows], side="left")
    ops["kernel_launches"] = counts


def _attach_launches(out: dict) -> None:
    """Replace the runtime/driver calls (``launches``: correlation, ts_ns) by ``launch_ts_ns`` on the rows that HTA's
    last-step filter looks up by correlation (``gpu_ops`` and ``hta_events``): the earliest call's ts with the row's
    correlation, :data:`NO_LAUNCH` when there is none. That filter keeps a GPU row when some CPU row with its
    correlation starts before the last ProfilerStep (:func:`reportgen.intervals.hta_gpu_time_metrics`), so the
    earliest call is all it needs of them; a trace has 4-5 calls per kernel (3.2 M rows, 180 MB, in a 2 GB trace)."""
    launch = out.pop("launches", None)
    if launch is None or not len(launch["ts_ns"]):
        return
    lc, lt = launch.pop("correlation"), launch.pop("ts_ns")
    order = np.lexsort((lt, lc))
    lc = lc[order]
    first = np.flatnonzero(np.r_[True, lc[1:] != lc[:-1]])
    corr_u, ts_u = lc[first], lt[order[first]]
    del lc, lt, order
    for name in ("gpu_ops", "hta_events"):
        df = out.get(name)
        if df is None or not row_count(df):
            continue
        corr = df["correlation"]
        pos = np.minimum(np.searchsorted(corr_u, corr), len(corr_u) - 1)
        df["launch_ts_ns"] = np.where(corr_u[pos] == corr, ts_u[pos], NO_LAUNCH)


def objects(values) -> np.ndarray:
    """``values`` (a list) as a 1-D object array: a row that is a list (``input_dims``) stays one value."""
    return np.fromiter(values, dtype=object, count=len(values))


def row_count(table: dict[str, np.ndarray]) -> int:
    """Rows of a table of columns (equal-length arrays)."""
    for v in table.values():
        return len(v)
    return 0


class DecodedTrace:
    """One decoded trace: ``meta`` (distributedInfo (dict or None), deviceProperties (list), schemaVersion, ... see
    the module doc) and ``columns``: each table as a dict of equal-length numpy arrays (text and lists as object
    arrays), what the reader stacks over ranks (it takes them: :func:`reportgen.readers.kineto._stacked` pops each
    table). ``tables``: the same as DataFrames, made once on first use and not updated when ``columns`` change
    (tests, scripts); a pool worker sends the columns, whose pickle is smaller and quicker to load than frames'."""

    __slots__ = ("meta", "columns", "_tables")

    def __init__(self, meta: dict, columns: dict[str, dict[str, np.ndarray]]):
        self.meta = meta
        self.columns = columns
        self._tables = None

    @classmethod
    def from_frames(cls, meta: dict, tables: dict[str, pd.DataFrame]) -> "DecodedTrace":
        """From tables as DataFrames (a ``.reduced`` part): each column's values as an array. The tables are taken
        out of ``tables`` (a frame is dropped once the reader has stacked its columns, as the decoded ones are)."""
        return cls(meta, {name: {str(c): df[c].to_numpy() for c in df.columns}
                          for name, df in ((n, tables.pop(n)) for n in list(tables))})

    def pop_frames(self) -> dict[str, pd.DataFrame]:
        """The tables as DataFrames, each taken out of ``columns`` as it is made (the ``.reduced`` form: one copy of a
        table at a time)."""
        return {name: pd.DataFrame(self.columns.pop(name)) for name in list(self.columns)}

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        if self._tables is None:
            self._tables = {name: pd.DataFrame(cols) for name, cols in self.columns.items()}
        return self._tables

    def __getstate__(self):
        return self.meta, self.columns

    def __setstate__(self, state):
        self.meta, self.columns = state
        self._tables = None


def decode_trace(path: Path, problems: list[tuple[str, str]],
                 comm_patterns: tuple[str, ...] = DEFAULT_COMM_PATTERNS) -> DecodedTrace:
    """Stream one Kineto trace file (``.json`` or ``.json.gz``) into :class:`DecodedTrace`.

    See the module docstring for the tables and rules. Problems are appended to ``problems`` as
    ``(str(path), description)``; bad input never raises.
    """
    return _decode(Path(path), problems, comm_patterns)


def _decode(path: Path, problems: list, comm_patterns=DEFAULT_COMM_PATTERNS, backend: str | None = None,
            chunk: int | None = None) -> DecodedTrace:
    where = str(path)
    backend = backend or default_backend()
    run_decode = BACKENDS[backend]
    meta: dict = {}
    col = _Collector(_comm_regex(comm_patterns, where, problems), where)
    state = {"count": 0, "in_events": False}
    stopped = False
    try:
        fh, raw = _open(path)
    except OSError as exc:
        problems.append((where, f"cannot open: {exc.strerror or exc}"))
        return DecodedTrace(_finish_meta(meta, where, problems), {})
    r = _Reader(fh, chunk or CHUNK.get(backend, 64 << 10))
    try:
        try:
            _read_document(r, col.feed, meta, state, run_decode)
            _drain(r, where, problems, state)
        except _Stop as stop:
            stopped = True
            msg = stop.message
            if r.error:  # the stream ended because of a gzip/read error: say that, not just "truncated"
                msg = f"{r.error} after {state['count']} events; the rest was skipped"
            problems.append((where, msg))
            if not stop.keep:
                return DecodedTrace(_finish_meta(meta, where, problems), {})
        except (OSError, EOFError, zlib.error) as exc:  # pragma: no cover - _Reader catches these
            stopped = True
            problems.append((where, f"read error after {state['count']} events: {exc}; the rest was skipped"))
    finally:
        fh.close()
        if raw is not None:
            raw.close()
    if not stopped and state.get("object_without_events"):
        problems.append((where, 'a JSON object without "traceEvents": not a Kineto trace'))
        return DecodedTrace(_finish_meta(meta, where, problems), {})
    if state.get("bad_events_key"):
        problems.append((where, '"traceEvents" is not an array'))
    if state.get("duplicate_keys"):
        problems.append((where, "top-level key" + ("s " if len(state["duplicate_keys"]) > 1 else " ")
                         + ", ".join(repr(k) for k in state["duplicate_keys"])
                         + " given twice: the last value kept (as a JSON parser does)"))
    for key, size in state.get("oversized", [])[:MAX_EXAMPLES]:
        problems.append((where, f"{key} is not valid JSON; ignored" if size < 0 else
                         f"{key} is {size / 1e6:,.1f} MB, more than the {META_VALUE_BYTES >> 20} MiB a metadata "
                         "value may take; ignored" + (" (its process groups are not read from this file)"
                                                      if key.endswith("pg_config") else "")))
    if col.not_objects:
        problems.append((where, f"{col.not_objects} trace events that are not JSON objects were skipped"))
    if col.h_dropped and not col.g_name:
        problems.append((where, f"host_ops: only the first {MAX_HOST_OPS} CPU ops were looked at; {col.h_dropped} "
                                "more were not (the main thread's compute timeline ends early)"))
    if col.u_spans_dropped:
        problems.append((where, f"user annotations: over {MAX_USER_RANGE_SPANS:,} spans, so none is kept as a span "
                                "(their per-name totals are): the ranges' own time without collectives is not measured for this rank"))
    if col.o_dropped:
        problems.append((where, f"cpu_ops capped at {MAX_CPU_OPS} rows; {col.o_dropped} more matching ops "
                                "were not kept"))
    meta = _finish_meta(meta, where, problems)
    from_ns = False
    if meta.get("displayTimeUnit") == "ns" and col.all_integral:
        d = col.kept_durations_us()
        if len(d) and float(np.median(d)) >= _NS_MEDIAN_DUR:
            # ts/dur written in ns (integers, long durations) although Chrome traces use µs: convert
            from_ns = True
            meta["ts_converted_from_ns"] = True
    columns = col.columns(from_ns)
    col.rejects.flush(lambda p, text: problems.append((p, text)))
    return DecodedTrace(meta, columns)


def _drain(r: _Reader, where: str, problems: list, state: dict) -> None:
    """Read what follows the JSON value: a gzip CRC/length error only shows at the end of the stream."""
    extra = bytes(r.buf[r.pos:]).strip()
    r.pos = len(r.buf)
    seen = len(extra)
    while seen < (1 << 20) and r.more():
        chunk = r.buf.strip()
        extra = extra or chunk
        seen += len(chunk)
        r.pos = len(r.buf)
    if extra:
        problems.append((where, f"data after the end of the JSON ({extra[:16]!r}...) was ignored"))
    if r.error:
        problems.append((where, f"{r.error} after the whole trace was read ({state['count']} events; kept)"))


def _finish_meta(meta: dict, where: str, problems: list) -> dict:
    info = meta.get("distributedInfo")
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except (ValueError, RecursionError):
            pass
    if info is not None and not isinstance(info, dict):
        problems.append((where, "distributedInfo is not a JSON object; ignored"))
        info = None
    meta["distributedInfo"] = info
    props = meta.get("deviceProperties")
    if props is not None and not isinstance(props, list):
        problems.append((where, "deviceProperties is not a JSON array; ignored"))
    meta["deviceProperties"] = props if isinstance(props, list) else []
    return meta
