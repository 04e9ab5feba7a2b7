"""Every FLOP-counting formula, once: the readers fill the canonical ``op_flops`` table with them, the FLOPs section
and the drill-down read only that table.

A FLOP is one floating-point multiply or add: a multiply-accumulate is 2 FLOPs (the convention of
``torch.utils.flop_counter``, fvcore and MindSpore's flops_summary). Bias adds, activations and element-wise ops
are not counted (torch's counter does not count them either).

Formulas (each in one function below, with its source):

* matmul ``2·batch·M·N·K`` (:func:`matmul_flops`; torch ``mm_flop``/``bmm_flop``),
* convolution forward ``2·N·C_out·∏out_spatial·(C_in/groups)·∏kernel`` (:func:`conv_flops`; torch
  ``conv_flop_count``), and each of its two backprops (grad-input, grad-weight) the same count
  (torch ``conv_backward_flop``: each is one convolution of the same size),
* attention (scaled dot product) forward ``2·B·H·S_q·S_kv·(D_qk + D_v)`` = the two matmuls QKᵀ and PV, backward
  twice that (:func:`attention_flops`; torch ``sdpa_flop_count`` / ``sdpa_backward_flop_count``: the mask and
  causality are not taken off, as there).

Two ways shapes reach these formulas:

* PyTorch ``Input Dims`` of aten ops (:func:`aten_flops`): logical shapes, fixed layouts (NCHW, BHSD).
* Ascend kernel shapes (kernel_details.csv ``Input Shapes``/``Input Formats``/``Output Shapes``/``Output Formats``,
  or the DB's ``COMPUTE_TASK_INFO`` columns of the same names; :func:`ascend_flops`): the shapes are the DEVICE
  tensors, in the device format. ``ND``/``NCHW``/``NHWC``/``HWCN``/``NCDHW``/``NDHWC`` are logical. The blocked
  formats are read as CANN defines them: ``NC1HWC0`` = [N, C1, H, W, C0] with C = C1·C0 (channels rounded up to a
  multiple of C0: 8 for float32, 16 for float16), ``FRACTAL_Z`` weight = [C1·Kh·Kw, ⌈C_out/16⌉, 16, C0]. The
  channels read from a blocked format are the channels the cube computes, padding included: exact when the model's
  channel counts are multiples of C0 (C0 = 8 or 16), an upper bound otherwise (AlexNet's first conv: 3 input
  channels computed as 8). Such kernels are counted and listed (``note`` = :data:`PADDED`). A shape the format
  leaves ambiguous (``FRACTAL_NZ`` matmuls, formats not listed here, shapes that do not agree with each other,
  attention in the packed layout TND or other attention kernels) counts nothing: FLOPs NaN and the reason in
  ``note``. FlashAttentionScore(Grad) is counted from its shapes (:func:`_ascend_attention`: the layout BSH / SBH /
  BNSD / BSND is read from the query and the softmax statistics), dense (note :data:`ATTENTION_DENSE`), backward
  :data:`FLASH_BACKWARD_FACTOR` forwards.
"""

from __future__ import annotations

import json
import math
import re

import numpy as np
import pandas as pd

#: ``op_flops.method`` values
MATMUL, CONVOLUTION, ATTENTION, PROFILER, FRAMEWORK = "matmul", "convolution", "attention", "profiler", \
    "framework summary"
#: ``op_flops.note`` of a kernel counted with channels read from a blocked (C0-padded) format
PADDED = "channels from a C0-padded format (counted as the cube computes them: an upper bound)"
#: ``op_flops.note`` of an op that contains another counted op on its thread (counted in the inner op)
NESTED = "contains a counted op (counted there)"
#: ``op_flops.note`` of a PyTorch op that launched no device kernel in a trace that has device kernels
NO_KERNEL = "no device kernel launched (e.g. CUDA/HIP graph capture): counts no FLOPs"

#: A per-rank FLOP rate above this is not a measurement but a data problem (never shown as a fact). 10 PFLOP/s per
#: device: above every datasheet's dense peak (NVIDIA B200 dense FP8 4.5 PFLOP/s, FP4 9 PFLOP/s; AMD MI355X dense
#: FP8 5.0 PFLOP/s); a known device's own peak is the bound when it is known.
MAX_PLAUSIBLE_FLOPS_PER_S = 1e16


def prod(xs) -> int:
    out = 1
    for x in xs:
        out *= int(x)
    return out


# --------------------------------------------------------------------------- the formulas


def matmul_flops(batch: int, m: int, n: int, k: int) -> float:
    """2·batch·M·N·K: one multiply and one add per (batch, m, n, k) (torch.utils.flop_counter ``bmm_flop``)."""
    return 2.0 * batch * m * n * k


def conv_flops(n: int, c_out: int, out_spatial, c_in_per_group: int, kernel) -> float:
    """2·N·C_out·∏out_spatial·(C_in/groups)·∏kernel: every output element is a dot product of C_in/groups·∏kernel
    inputs (torch.utils.flop_counter ``conv_flop_count``, non-transposed). The grad-input and grad-weight
    convolutions of the backward pass are each this same count (``conv_backward_flop``)."""
    return 2.0 * n * c_out * prod(out_spatial) * c_in_per_group * prod(kernel)


def attention_flops(b: int, h: int, s_q: int, s_kv: int, d_qk: int, d_v: int, backward: bool = False) -> float:
    """Scaled dot-product attention: forward QKᵀ (2·B·H·S_q·S_kv·D_qk) + PV (2·B·H·S_q·S_kv·D_v); backward the four
    matmuls of grad-V, grad-P, grad-Q, grad-K = twice the forward (torch.utils.flop_counter ``sdpa_flop_count``,
    ``sdpa_backward_flop_count``; a causal mask is not taken off, as there)."""
    fwd = 2.0 * b * h * s_q * s_kv * (d_qk + d_v)
    return 2 * fwd if backward else fwd


#: FlashAttention's backward kernel = this many forward passes: the four matmuls of the gradients (grad-V, grad-P,
#: grad-Q, grad-K = 2 forwards) plus the recomputed QKᵀ (0.5 forward), as the FlashAttention authors count it
#: (Dao-AILab/flash-attention ``benchmarks/benchmark_flash_attention.py``: "1 for fwd, 2.5 for bwd (2.0 for bwd + 0.5
#: for recompute)"; FlashAttention-2 paper, Dao 2023, §4.1). torch's ``sdpa_backward_flop_count`` (2 forwards, no
#: recompute) stays the count of the PyTorch aten ops.
FLASH_BACKWARD_FACTOR = 2.5
#: ``op_flops.note`` of a counted FlashAttention kernel: the mask is an op attribute, so the count is dense
ATTENTION_DENSE = ("attention counted dense (4·B·N·S_q·S_kv·D): a causal / sparse mask (sparse_mode, an op "
                   "attribute) is not taken off, so a causal model computes about half of it")


def flash_attention_flops(b: int, n: int, s_q: int, s_kv: int, d: int, backward: bool = False) -> float:
    """FlashAttention (Ascend ``FlashAttentionScore`` / ``FlashAttentionScoreGrad``): forward 4·B·N·S_q·S_kv·D = the
    two matmuls QKᵀ and PV (:func:`attention_flops` with D_qk = D_v = D; N = the query heads, GQA's fewer key/value
    heads change no FLOP); backward :data:`FLASH_BACKWARD_FACTOR` × the forward (its recompute included)."""
    fwd = attention_flops(b, n, s_q, s_kv, d, d)
    return FLASH_BACKWARD_FACTOR * fwd if backward else fwd


def device_rate(flops: float, device_ms: float) -> float:
    """FLOP/s = FLOPs / device time in seconds; NaN without device time. The time is the DEVICE step time, never a
    CPU span: the host enqueues work long before the device runs it (asynchronous launches, CUDA-graph replay)."""
    return flops / (device_ms / 1e3) if device_ms and device_ms > 0 else math.nan


# --------------------------------------------------------------------------- PyTorch aten ops

_MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear"}
_CONV = re.compile(r"^aten::(conv|_conv|convolution|cudnn_conv|mkldnn_conv|miopen_conv|slow_conv|thnn_conv)")
_SDPA = re.compile(r"^aten::_scaled_dot_product_(flash|efficient|cudnn)_attention(_for_cpu)?(_backward)?$")


def aten_method(name: str) -> str | None:
    """The counting method of an aten op, None for ops that are not counted."""
    if name in _MATMUL_OPS:
        return MATMUL
    if _CONV.match(name):
        return CONVOLUTION
    if _SDPA.match(name):
        return ATTENTION
    return None


def aten_flops(name: str, dims) -> float:
    """FLOPs of one aten op from its ``Input Dims`` (list of shapes); NaN when not computable.

    mm / addmm / bmm / baddbmm / matmul / linear: :func:`matmul_flops` (the bias add of addmm is not counted, as in
    torch). Convolutions: :func:`conv_flops`; the output size is not in the trace, so the forward assumes stride 1
    and "same" padding (out_spatial = in_spatial); ``convolution_backward`` is exact from grad_output and counts
    grad-input + grad-weight = 2 forward convolutions. Attention (flash / efficient / cudnn SDPA kernels, q k v as
    [B, H, S, D]): :func:`attention_flops`; their backward's dims start with grad_out, then q, k, v."""
    try:
        d = [x if isinstance(x, list) else [] for x in dims]
        if name == "aten::mm" and len(d[0]) == 2 and len(d[1]) == 2:
            return matmul_flops(1, d[0][0], d[1][1], d[0][1])
        if name == "aten::addmm" and len(d[1]) == 2 and len(d[2]) == 2:
            return matmul_flops(1, d[1][0], d[2][1], d[1][1])
        if name == "aten::bmm" and len(d[0]) == 3 and len(d[1]) == 3:
            return matmul_flops(d[0][0], d[0][1], d[1][2], d[0][2])
        if name == "aten::baddbmm" and len(d[1]) == 3 and len(d[2]) == 3:
            return matmul_flops(d[1][0], d[1][1], d[2][2], d[1][2])
        if name == "aten::linear" and len(d[0]) >= 1 and len(d[1]) == 2:
            return matmul_flops(prod(d[0][:-1]), 1, d[1][0], d[1][1])
        if name == "aten::matmul" and d[0] and d[1]:
            a, b = d[0], d[1]
            m, k = (1, a[0]) if len(a) == 1 else (a[-2], a[-1])
            n = 1 if len(b) == 1 else b[-1]
            ba, bb = a[:-2], b[:-2]
            width = max(len(ba), len(bb))
            ba, bb = [1] * (width - len(ba)) + list(ba), [1] * (width - len(bb)) + list(bb)
            return matmul_flops(prod(max(x, y) for x, y in zip(ba, bb)), m, n, k)
        if _CONV.match(name):
            if "backward" in name:  # [grad_output, input, weight, ...]: grad-input + grad-weight
                go, w = d[0], d[2]
                if len(go) >= 3 and len(w) == len(go):
                    return 2 * conv_flops(go[0], go[1], go[2:], w[1], w[2:])
                return math.nan
            x, w = d[0], d[1]
            if len(x) >= 3 and len(w) == len(x):
                # assumes spatial_out = spatial_in; a transposed conv's weight is [C_in, C_out/groups, *k] and its
                # work per INPUT position is the same product
                return conv_flops(x[0], w[0], x[2:], w[1], w[2:])
            return math.nan
        m = _SDPA.match(name)
        if m:
            backward = bool(m.group(3))  # dims of a backward: grad_out, q, k, v, ...
            q, k, v = (d[1], d[2], d[3]) if backward else (d[0], d[1], d[2])
            if len(q) == 4 and len(k) == 4 and len(v) == 4:
                return attention_flops(q[0], q[1], q[2], k[2], q[3], v[3], backward)
            return math.nan
    except (IndexError, TypeError, ValueError):
        return math.nan
    return math.nan


def estimate_aten_ops(cpu_ops: pd.DataFrame) -> pd.DataFrame:
    """The counted aten ops of ``cpu_ops`` with ``method``, ``flops`` and ``innermost``.

    An op with the trace's own ``flops`` arg (column ``profiler_flops``, ``profile(with_flops=True)``) counts that
    value (method ``profiler``: torch's own count, which also gives mul/add one FLOP per element and knows a
    convolution's real output size); any other op counts :func:`aten_flops` of its ``Input Dims``. Nested ops are
    counted once: an op containing another counted op on its thread (aten::linear -> aten::addmm,
    aten::matmul -> aten::mm) has ``innermost`` False and only the innermost op counts, except that an op with
    its own ``flops`` arg counts and every counted op inside it does not (torch puts it on aten::conv2d, not on
    the cudnn_convolution inside)."""
    methods = {n: aten_method(n) for n in cpu_ops["name"].unique()}
    own = cpu_ops["profiler_flops"].notna() if "profiler_flops" in cpu_ops else pd.Series(False, index=cpu_ops.index)
    ops = cpu_ops[cpu_ops["name"].map(methods).notna() | own].copy()
    if ops.empty:
        return ops.assign(method=[], flops=[], innermost=[])
    ops["method"] = ops["name"].map(methods)
    cache: dict[tuple[str, str], float] = {}

    def flops_of(name: str, text) -> float:
        key = (name, str(text))
        if key not in cache:
            try:
                dims = json.loads(text) if isinstance(text, str) else text
            except ValueError:
                dims = None
            cache[key] = aten_flops(name, dims) if isinstance(dims, list) else math.nan
        return cache[key]

    try:  # once per distinct (name, dims) pair, in the order of first appearance: ops repeat every step of every rank
        names, n_uniq = pd.factorize(ops["name"], use_na_sentinel=False)
        dims, d_uniq = pd.factorize(ops["input_dims"], use_na_sentinel=False)
        codes, pairs = pd.factorize(names.astype(np.int64) * len(d_uniq) + dims)
        values = np.array([flops_of(n_uniq[p // len(d_uniq)], d_uniq[p % len(d_uniq)]) for p in pairs], dtype=float)
        ops["flops"] = values[codes]
    except TypeError:  # unhashable dims (lists): row by row
        ops["flops"] = [flops_of(n, t) for n, t in zip(ops["name"], ops["input_dims"])]
    mine = own[ops.index].to_numpy(dtype=bool)
    if mine.any():
        ops.loc[mine, "flops"] = ops.loc[mine, "profiler_flops"].astype(float)
        ops.loc[mine, "method"] = PROFILER
    if "end_ms" not in ops:
        ops["end_ms"] = ops["start_ms"] + ops["dur_ms"]
    # start/end come from exact integer times through one monotone map (model.rel_ms), so equal instants are
    # equal floats and the nesting test needs no tolerance: a child ending in the same ns as its parent nests
    ops = ops.sort_values(["rank", "tid", "start_ms", "end_ms"], ascending=[True, True, True, False])
    end = ops["end_ms"].to_numpy()
    start = ops["start_ms"].to_numpy()
    rank, tid = ops["rank"].to_numpy(), ops["tid"].astype(str).to_numpy()
    same = (rank[1:] == rank[:-1]) & (tid[1:] == tid[:-1])
    contains_next = same & (start[1:] < end[:-1]) & (end[1:] <= end[:-1])
    inner = ~np.append(contains_next, False)
    if mine.any():  # an op with its own count wins over the counted ops inside it
        pf = (ops["method"] == PROFILER).to_numpy()
        key, open_end = None, -math.inf
        for i in range(len(ops)):
            if (rank[i], tid[i]) != key:
                key, open_end = (rank[i], tid[i]), -math.inf
            if start[i] < open_end and end[i] <= open_end:
                inner[i] = False
            elif pf[i]:
                inner[i], open_end = True, end[i]
    ops["innermost"] = inner
    return ops.reset_index(drop=True)


# --------------------------------------------------------------------------- Ascend kernels


class Ambiguous(ValueError):
    """The shapes do not determine the count (the message says why)."""


_LOGICAL = {"ND", "NCHW", "NHWC", "HWCN", "NCDHW", "NDHWC", "DHWCN", ""}
_BLOCKED = {"NC1HWC0", "FRACTAL_Z", "NDC1HWC0", "FRACTAL_Z_3D"}


def parse_shapes(text) -> list[list[int]] | None:
    """'32,3,224,224;64,3,7,7' -> [[32, 3, 224, 224], [64, 3, 7, 7]] (an empty part = a scalar []); None when a
    dimension is not a non-negative integer."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return None
    s = str(text).strip().strip('"').strip()
    if not s or s.upper() == "N/A":
        return None
    out = []
    for part in s.split(";"):
        dims = [x.strip() for x in part.split(",") if x.strip()]
        if not all(x.isdigit() for x in dims):
            return None
        out.append([int(x) for x in dims])
    if out and not out[-1] and s.endswith(";"):
        out.pop()  # "32,1000;" : a trailing separator
    return out


def parse_formats(text) -> list[str]:
    """'NC1HWC0;FRACTAL_Z;FORMAT_ND' -> ['NC1HWC0', 'FRACTAL_Z', 'ND'] ('FORMAT_' and a ':n' sub-format dropped)."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return []
    out = []
    for f in str(text).strip().strip('"').split(";"):
        f = f.strip().upper().split(":")[0]
        out.append(f[len("FORMAT_"):] if f.startswith("FORMAT_") else f)
    return out


def _fmt(formats: list[str], i: int) -> str:
    return formats[i] if i < len(formats) else ""


_TYPE_MATMUL = re.compile(r"matmul", re.I)
_TYPE_GROUPED = re.compile(r"grouped_?matmul", re.I)
_TYPE_CONV = re.compile(r"^Conv(2D|3D)(BackpropInput|BackpropFilter)?(D|V2)?$")
_TYPE_ATTENTION = re.compile(r"(flash|fused\w*|prompt|incre)_?attention", re.I)


def ascend_method(op_type: str) -> str | None:
    """The counting method of an Ascend op type, None for types that are not counted."""
    t = str(op_type)
    if _TYPE_CONV.match(t):
        return CONVOLUTION
    if _TYPE_MATMUL.search(t):
        return MATMUL
    if _TYPE_ATTENTION.search(t):
        return ATTENTION
    return None


def _ascend_matmul(op_type: str, ins, in_f, outs, out_f) -> float:
    """MatMul / BatchMatMul (+V2, V3, transposes, broadcast batch) from ND shapes: out = [..batch, M, N]; K is A's
    other dim (A = [..., M, K] or, transposed, [..., K, M]), checked against B; FLOPs = 2·|out|·K
    (:func:`matmul_flops` with batch·M·N = |out|). GroupedMatmul: x [M, K] -> out [M, N], 2·M·N·K."""
    if not ins or not outs:
        raise Ambiguous("no shapes")
    for f in (_fmt(in_f, 0), _fmt(in_f, 1), _fmt(out_f, 0)):
        if f not in _LOGICAL:
            raise Ambiguous(f"matmul in format {f}")
    a, out = ins[0], outs[0]
    if len(a) < 2 or len(out) < 2:
        raise Ambiguous("matmul operand is not a matrix")
    m, n = out[-2], out[-1]
    if _TYPE_GROUPED.search(op_type):
        if len(outs) != 1 or len(a) != 2 or a[0] != m:
            raise Ambiguous("grouped matmul with several x tensors or outputs")
        return matmul_flops(1, m, n, a[1])
    if a[-2] == m:
        k = a[-1]
    elif a[-1] == m:
        k = a[-2]
    else:
        raise Ambiguous("A does not have the output's M")
    if len(ins) > 1 and len(ins[1]) >= 2:
        b = ins[1]
        if not ((b[-1] == n and b[-2] == k) or (b[-2] == n and b[-1] == k)):
            raise Ambiguous("B does not have the K and N of A and the output")
    return matmul_flops(prod(out[:-2]), m, n, k)


def _axes(shape: list[int], fmt: str) -> dict[str, int] | None:
    """{N, C, [D,] H, W} of a logical-format activation, None when the format is not one."""
    if fmt in ("NCHW", "NHWC", "NCDHW", "NDHWC") and len(shape) == len(fmt):
        return dict(zip(fmt, shape))
    return None


def _conv(x, xf, w, wf, y, yf) -> tuple[float, bool]:
    """(FLOPs, channels padded) of a convolution of input x, weight w and output y (any of the forward, grad-input
    and grad-weight kernels: the same count, :func:`conv_flops`)."""
    if xf == "NC1HWC0" and yf == "NC1HWC0" and wf == "FRACTAL_Z":
        if len(x) != 5 or len(y) != 5 or len(w) != 4 or x[0] != y[0] or x[1] == 0:
            raise Ambiguous("NC1HWC0/FRACTAL_Z shapes of unexpected rank")
        if w[3] != x[4] or w[0] % x[1]:
            raise Ambiguous("FRACTAL_Z weight does not match the NC1HWC0 input (groups > 1?)")
        khkw = w[0] // x[1]
        return conv_flops(x[0], y[1] * y[4], y[2:4], x[1] * x[4], [khkw]), True
    xa, ya = _axes(x, xf), _axes(y, yf)
    if xa is None or ya is None or wf not in ("NCHW", "NHWC", "HWCN", "NCDHW", "NDHWC", "DHWCN") \
            or len(w) != len(wf):
        raise Ambiguous(f"convolution in formats {xf}/{wf}/{yf}")
    wa = dict(zip(wf, w))  # weight: N = C_out, C = C_in / groups
    spatial = [c for c in "DHW" if c in xa]
    if xa["N"] != ya["N"] or wa["N"] != ya["C"] or wa["C"] == 0 or xa["C"] % wa["C"]:
        raise Ambiguous("convolution shapes do not agree")
    return conv_flops(ya["N"], ya["C"], [ya[c] for c in spatial], wa["C"], [wa[c] for c in spatial]), False


def _ascend_conv(op_type: str, ins, in_f, outs, out_f) -> tuple[float, bool]:
    """Conv2D/Conv3D: inputs x, filter[, bias] -> y. Conv*BackpropInput: [input_size,] filter, out_backprop -> dx.
    Conv*BackpropFilter: x, [filter_size,] out_backprop -> dw. The size vectors (1-D) are skipped."""
    tensors = [(s, _fmt(in_f, i)) for i, s in enumerate(ins) if len(s) > 1]
    if not outs:
        raise Ambiguous("no output shape")
    out = (outs[0], _fmt(out_f, 0))
    if len(tensors) < 2:
        raise Ambiguous("convolution without input and weight shapes")
    if "BackpropInput" in op_type:
        (w, wf), (y, yf) = tensors[0], tensors[1]
        (x, xf) = out
    elif "BackpropFilter" in op_type:
        (x, xf), (y, yf) = tensors[0], tensors[1]
        (w, wf) = out
    else:
        (x, xf), (w, wf) = tensors[0], tensors[1]
        (y, yf) = out
    return _conv(x, xf, w, wf, y, yf)


def _ascend_attention(op_type: str, ins, outs) -> float:
    """FlashAttentionScore(Grad) from its shapes (:func:`flash_attention_flops`). The softmax statistics
    (softmax_max: an output of the forward, an input of the backward) are [B, N, S_q, 8] (layouts BSH, SBH, BNSD,
    BSND) or [T, N, 8] (TND). They give B, N and S_q; the query (the first input) then tells the layout: 3-D
    [B, S, H] = BSH or [S, B, H] = SBH with D = H / N; 4-D [B, N, S, D] = BNSD or [B, S, N, D] = BSND; the key's
    sequence axis is S_kv. TND (packed variable-length sequences: their lengths are op attributes) counts nothing.
    Shapes that fit no layout, or fit two with different counts, count nothing."""
    backward = "grad" in op_type.lower()
    stats = [s for s in ((ins[4:] if backward else outs) or []) if len(s) in (3, 4) and s[-1] == 8]
    if len(ins) < 2 or not stats:
        raise Ambiguous("attention without the softmax statistics shape [B, N, S, 8]")
    q, k, st = ins[0], ins[1], stats[0]
    if len(st) == 3:
        raise Ambiguous("attention in layout TND: the sequence lengths are op attributes")
    b, n, s_q = st[0], st[1], st[2]
    if n <= 0 or len(k) != len(q):
        raise Ambiguous("attention shapes do not agree")
    counts = set()
    if len(q) == 3:
        if q[2] % n:
            raise Ambiguous("query hidden size is not a multiple of the heads")
        d = q[2] // n
        if q[0] == b and q[1] == s_q:  # BSH
            counts.add(flash_attention_flops(b, n, s_q, k[1], d, backward))
        if q[0] == s_q and q[1] == b:  # SBH
            counts.add(flash_attention_flops(b, n, s_q, k[0], d, backward))
    elif len(q) == 4:
        if q[0] == b and q[1] == n and q[2] == s_q:  # BNSD
            counts.add(flash_attention_flops(b, n, s_q, k[2], q[3], backward))
        if q[0] == b and q[1] == s_q and q[2] == n:  # BSND
            counts.add(flash_attention_flops(b, n, s_q, k[1], q[3], backward))
    if len(counts) != 1:
        raise Ambiguous("attention shapes fit no layout (BSH/SBH/BNSD/BSND)" if not counts
                        else "attention shapes fit two layouts with different counts")
    return counts.pop()


def ascend_flops(op_type, input_shapes, input_formats, output_shapes, output_formats) -> tuple[float, str]:
    """(FLOPs, note) of one Ascend kernel from its device shapes and formats (module doc). FLOPs NaN when not
    counted, and ``note`` says why; a counted kernel's note is "" or :data:`PADDED`."""
    t = str(op_type)
    method = ascend_method(t)
    if method is None:
        return math.nan, "not a counted op type"
    ins, outs = parse_shapes(input_shapes), parse_shapes(output_shapes)
    if ins is None or outs is None:
        return math.nan, "shapes not readable"
    in_f = parse_formats(input_formats) if input_formats is not None else []
    out_f = parse_formats(output_formats) if output_formats is not None else []
    try:
        if method == ATTENTION:
            if not re.match(r"^FlashAttentionScore(Grad)?(V\d)?$", t):
                raise Ambiguous(f"attention kernel {t}: its layout and sequence lengths are op attributes")
            return _ascend_attention(t, ins, outs), ATTENTION_DENSE
        if method == MATMUL:
            f, padded = _ascend_matmul(t, ins, in_f, outs, out_f), False
        else:
            f, padded = _ascend_conv(t, ins, in_f, outs, out_f)
    except Ambiguous as exc:
        return math.nan, f"ambiguous: {exc}"
    except (IndexError, TypeError, ValueError):
        return math.nan, "shapes not readable"
    return f, PADDED if padded else ""


def ascend_op_flops(kernels: pd.DataFrame | None) -> pd.DataFrame | None:
    """The ``op_flops`` rows of an Ascend ``kernels`` table (kernel_details.csv or the DB's COMPUTE_TASK_INFO): one row
    per kernel of a counted type (:func:`ascend_method`), FLOPs from :func:`ascend_flops` (memoised per distinct
    shape: a model repeats a few shapes thousands of times). None when the kernels have no shapes."""
    if kernels is None or "input_shapes" not in kernels or "type" not in kernels:
        return None
    types = kernels["type"].astype(str)
    methods = {t: ascend_method(t) for t in types.unique()}
    k = kernels[types.map(methods).notna().to_numpy()]
    if "core" in k:
        k = k[k["core"].astype(str) != "COMMUNICATION"]
    if k.empty:
        return empty_op_flops()
    cols = [k["type"].astype(str), k["input_shapes"], k.get("input_formats", pd.Series(None, index=k.index)),
            k["output_shapes"] if "output_shapes" in k else pd.Series(None, index=k.index),
            k.get("output_formats", pd.Series(None, index=k.index))]
    memo: dict = {}
    got = [memo[key] if key in memo else memo.setdefault(key, ascend_flops(*key)) for key in zip(*cols)]
    return pd.DataFrame({
        "rank": k["rank"].astype(np.int64).to_numpy(), "step": k["step"].to_numpy(dtype=float),
        "name": k["name"].to_numpy(object), "type": k["type"].astype(str).to_numpy(object),
        "flops": np.array([g[0] for g in got], dtype=float),
        "method": k["type"].astype(str).map(methods).to_numpy(object),
        "note": np.array([g[1] for g in got], dtype=object),
        "start_ms": k["start_ms"].to_numpy(dtype=float), "dur_ms": k["dur_ms"].to_numpy(dtype=float)})


OP_FLOPS_COLUMNS = ["rank", "step", "name", "type", "flops", "method", "note", "start_ms", "dur_ms"]


def empty_op_flops() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype=float if c in ("step", "flops", "start_ms", "dur_ms") else
                                      np.int64 if c == "rank" else object) for c in OP_FLOPS_COLUMNS})
