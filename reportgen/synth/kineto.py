"""Deterministic synthetic PyTorch Kineto traces (GPU, NCCL) with known ground truth and injected anomalies.

One ``<host>_<pid>.<ns>.pt.trace.json[.gz]`` per rank, as ``torch.profiler.tensorboard_trace_handler`` names
them (``use_gzip`` gives ``.gz``), in the shapes research/kineto-traces-and-hta.md §4 documents (2025-2026
generation: float µs with ns decimals, ``ncclDevKernel_*`` names) and the fixtures under
shared/fixtures/kineto show:

* top level (§4.1, research/generated-runs.md §2 for the torch 2.x key order): ``schemaVersion``,
  ``deviceProperties`` (A100-SXM4-80GB, ``totalGlobalMem`` = the capacity), ``distributedInfo`` (§4.2: backend
  nccl, ``pg_config`` with only the rank's own groups, DeviceMesh names ``mesh_pp`` / ``mesh_dp``, ``pg_count``
  of the world), ``host_name``, ``displayTimeUnit``, ``baseTimeNanoseconds``, ``traceEvents``, ``traceName``;
* ``ProfilerStep#N`` and ``enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__`` ``user_annotation``
  spans (§4.7; the loader first, before any launch), ``aten::mm`` ``cpu_op`` s with ``Input Dims`` /
  ``Input type`` (§4.3, FLOPs §4.6; backward ops on the autograd thread), ``cuda_runtime``
  ``cudaLaunchKernel`` / ``cudaLaunchKernelExC`` / ``cudaMemcpyAsync`` with ``correlation`` = the GPU event's,
  ``kernel`` / ``gpu_memcpy`` events on streams (pid = device, tid = stream);
* NCCL (§4.4): ``record_param_comms`` ``cpu_op`` s and ``ncclDevKernel_AllReduce_Sum_bf16_RING_LL`` /
  ``ncclDevKernel_SendRecv`` kernels carrying ``Collective name``, ``In/Out msg nelems``, ``Group size``,
  ``dtype``, ``In/Out split size``, ``Process Group Name/Description/Ranks``; p2p also ``Dst Rank`` (send) /
  ``Src Rank`` (recv), the GLOBAL peer torch's ``saveNcclMeta`` writes and Kineto copies onto the kernel;
* ``[memory]`` ``cpu_instant_event`` s (§4.5: Total Allocated / Total Reserved / Bytes / Device Type 1).

Model: S pipeline stages (stage-major ranks, so with 2 hosts x 4 devices stage 1 is host 0 and the p2p links
cross hosts), dp = world / S ranks per stage (``mesh_dp``), GPipe schedule of M micro-batches, each layer one
forward GEMM and a backward weight-gradient + input-gradient GEMM; DDP-style gradient all-reduce, one bucket per
layer, launched after the layer's weight gradient of the last micro-batch (overlapping the rest of the
backward). An event-driven simulation places every GPU op: a stream runs its ops in order, compute waits for
the receives it needs, a p2p transfer starts when both the send and the recv kernels run, an all-reduce when
the last rank of its group arrives (so the others wait in it). The CPU runs ahead of the device and ends each
step with ``cudaDeviceSynchronize``, so every kernel of step N lies inside ProfilerStep#N.

Anomalies (off by default; the ground truth lists them under ``anomalies``): ``slow_rank`` (``slow_ranks``:
rank -> compute time factor), ``slow_host_data_loading`` (``slow_hosts``: host index -> added DataLoader time as
a share of the clean step), ``slow_link`` (``slow_links``: (src, dst) p2p link -> bandwidth share; needs
stages >= 2), ``pipeline_bubble`` (fewer, larger micro-batches: the same global batch in 2), ``memory_near_capacity``
(``memory_peaks``: rank -> peak reserved / capacity), ``flops_imbalance`` (``heavy_stages``: stage -> FLOPs and
compute factor; without stages ``light_ranks``: rank -> FLOPs factor < 1).
Everything comes from one seeded ``numpy.random.Generator``: the same spec gives byte-identical files.
"""

from __future__ import annotations

import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["KinetoSpec", "write_kineto_run"]

_T0_US = 4_446_594_000_000.0        # first step start (µs, like the torch 2.x traces' clock)
_BASE_NS = 1_795_303_600_000_000_000  # baseTimeNanoseconds
_CAPACITY = 84_990_623_744           # A100-SXM4-80GB totalGlobalMem (fixture negative_queue_length rank0)
_RATE = 180e12                       # achieved bf16 GEMM FLOP/s
_TOKENS, _HIDDEN, _FFN = 2048, 4096, 16384   # per micro-batch (clean run); GEMM [T,H] x [H,F]
_P2P_BW = {"intra": 150e9, "inter": 25e9}    # bytes/s of one p2p pair
_AR_BUSBW = {"intra": 150e9, "inter": 90e9}  # all-reduce bus bandwidth
_NCCL_LAT_US = 12.0
_LOADER_US, _PREP_GAP_US, _STEP_GAP_US = 1_200.0, 40.0, 60.0
_STATIC_BYTES = 38_000_000_000      # params + grads + optimizer state per rank
_COMPUTE_STREAM, _DP_STREAM = 7, 20
_KERNEL_NAME = ("sm80_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize256x128x32_stage3_warpsize4x2x1_tensor16x8x16"
                "_kernel")
_OPT_KERNEL = ("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)"
               "::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<c10::BFloat16, 4>>")


@dataclass
class KinetoSpec:
    hosts: int = 2
    devices_per_host: int = 4
    stages: int = 2                  # 1 => data parallel (DDP over the world); >1 => pipeline (GPipe)
    steps: int = 4
    seed: int = 0
    micro_batches: int | None = None  # None: 24 with stages, 4 without
    layers: int | None = None         # GEMM layers per stage; None: 1 with stages, 4 without
    gzip: bool = True
    host_names: list[str] | None = None
    # ---- injected anomalies (defaults = off) ------------------------------------------------------
    slow_ranks: dict[int, float] = field(default_factory=dict)   # rank -> compute time factor (1.4)
    slow_hosts: dict[int, float] = field(default_factory=dict)   # host -> added loader time, share of the step
    slow_links: dict[tuple[int, int], float] = field(default_factory=dict)  # (src, dst) -> bandwidth share
    pipeline_bubble: bool = False    # 2 micro-batches of the same global batch (stages >= 2)
    memory_peaks: dict[int, float] = field(default_factory=dict)  # rank -> peak reserved / capacity
    heavy_stages: dict[int, float] = field(default_factory=dict)  # stage (1-based) -> FLOPs and compute x
    light_ranks: dict[int, float] = field(default_factory=dict)   # rank -> FLOPs and compute x (< 1, no stages)


def _validate(spec: KinetoSpec) -> None:
    world = spec.hosts * spec.devices_per_host
    if spec.hosts < 1 or spec.devices_per_host < 1 or spec.steps < 1:
        raise ValueError("hosts, devices_per_host and steps must be >= 1")
    if spec.stages < 1 or world % spec.stages:
        raise ValueError(f"stages ({spec.stages}) must divide the world size ({world})")
    ranks = set(range(world))
    for name in ("slow_ranks", "memory_peaks", "light_ranks"):
        bad = set(getattr(spec, name)) - ranks
        if bad:
            raise ValueError(f"{name}: ranks {sorted(bad)} not in 0..{world - 1}")
    if set(spec.slow_hosts) - set(range(spec.hosts)):
        raise ValueError("slow_hosts: unknown host index")
    if set(spec.heavy_stages) - set(range(1, spec.stages + 1)):
        raise ValueError("heavy_stages: stages are 1-based and need stages >= 2")
    dp = world // spec.stages
    for a, b in spec.slow_links:
        if spec.stages < 2 or abs(a - b) != dp or a not in ranks or b not in ranks:
            raise ValueError(f"slow_links: ({a}, {b}) is not a pipeline p2p link; NCCL traces show per-link "
                             "data only for send/recv between neighbouring stages (stages >= 2)")
    if spec.pipeline_bubble and spec.stages < 2:
        raise ValueError("pipeline_bubble needs stages >= 2")
    if spec.light_ranks and spec.stages > 1:
        raise ValueError("light_ranks is the no-stage form of flops_imbalance; use heavy_stages with stages")


def _r3(x: float) -> float:
    return round(float(x), 3)


class _Sim:
    """Event-driven placement of one step's GPU ops on every rank (see the module docstring)."""

    def __init__(self):
        self.ops: list[dict] = []
        self.by_rank: dict[int, list[int]] = {}
        self.comm: dict[tuple, list[int]] = {}
        self.started: dict[tuple, int] = {}   # comm key -> peers started (not a scan of the group per op)

    def add(self, rank: int, **op) -> int:
        op.update(rank=rank, start=None, end=None)
        i = len(self.ops)
        self.ops.append(op)
        self.by_rank.setdefault(rank, []).append(i)
        if op.get("key") is not None:
            self.comm.setdefault(op["key"], []).append(i)
        return i

    def run(self) -> None:
        queues = {}
        for r, ids in self.by_rank.items():
            for i in ids:
                queues.setdefault((r, self.ops[i]["stream"]), []).append(i)
        heads = {k: 0 for k in queues}
        prev_end = {k: 0.0 for k in queues}
        left = len(self.ops)
        while left:
            moved = False
            for k, q in queues.items():
                if heads[k] >= len(q):
                    continue
                op = self.ops[q[heads[k]]]
                if op["start"] is None:
                    deps = [self.ops[d]["end"] for d in op["deps"]]
                    if any(d is None for d in deps):
                        continue
                    op["start"] = max([op["launch"] + 5.0, prev_end[k]] + deps)
                    if op.get("key") is not None:
                        self.started[op["key"]] = self.started.get(op["key"], 0) + 1
                    moved = True
                if op["end"] is None:
                    if op["kind"] in ("comp", "memcpy"):
                        op["end"] = op["start"] + op["dur"]
                    else:
                        if self.started.get(op["key"], 0) < len(self.comm[op["key"]]):
                            continue
                        peers = [self.ops[j] for j in self.comm[op["key"]]]
                        end = max(p["start"] for p in peers) + op["xfer"]
                        for p in peers:
                            p["end"] = end
                prev_end[k] = op["end"]
                heads[k] += 1
                left -= 1
                moved = True
            if not moved:
                raise RuntimeError("synthetic schedule deadlocked (generator bug)")


def _union_len(iv: list[tuple[float, float]]) -> float:
    tot, cur_s, cur_e = 0.0, None, None
    for s, e in sorted(iv):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                tot += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return tot + (cur_e - cur_s if cur_e is not None else 0.0)


def _breakdown(comp, comm, recv, other, w0, w1) -> dict:
    """Per-step truth in ms, the reader's definitions (readers/kineto.py step_breakdown)."""
    def clip(iv):
        return [(max(s, w0), min(e, w1)) for s, e in iv if e > w0 and s < w1]
    c, m, rv = clip(comp), clip(comm), clip(recv)
    cu, mu = _union_len(c), _union_len(m)
    overlap = cu + mu - _union_len(c + m)
    busy = _union_len(c + m)
    recv_alone = _union_len(rv + c) - cu
    first = min([s for s, _ in comp + comm + other if w0 <= s < w1], default=None)
    w = w1 - w0
    return {"step_ms": w / 1e3, "computing_ms": cu / 1e3, "comm_ms": mu / 1e3,
            "comm_not_overlapped_ms": (mu - overlap) / 1e3, "overlapped_ms": overlap / 1e3,
            "free_ms": (w - busy) / 1e3, "bubble_ms": recv_alone / 1e3,
            "preparing_ms": (first - w0) / 1e3 if first is not None else None}


def write_kineto_run(root: str | Path, spec: KinetoSpec) -> dict:
    """Write one run (one trace file per rank) under ``root``; return the ground truth (JSON-serialisable)."""
    _validate(spec)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(spec.seed)
    S, dph = spec.stages, spec.devices_per_host
    world = spec.hosts * dph
    dp = world // S
    M0 = spec.micro_batches or (24 if S > 1 else 4)
    M = 2 if spec.pipeline_bubble else M0
    L = spec.layers or (1 if S > 1 else 4)
    tokens = _TOKENS * M0 // M                          # the same global batch in fewer micro-batches
    names = spec.host_names or [f"gpu-node-{h}" for h in range(spec.hosts)]
    host_of = {r: r // dph for r in range(world)}
    stage_of = {r: r // dp + 1 for r in range(world)}
    pid_of = {r: 31_000 + 113 * r for r in range(world)}
    tid_bwd = {r: pid_of[r] + 57 for r in range(world)}

    def ffn(r):                                         # GEMM output width (FLOPs factor)
        f = spec.heavy_stages.get(stage_of[r], 1.0) * spec.light_ranks.get(r, 1.0)
        return int(round(_FFN * f / 64)) * 64

    def where(a, b):
        return "intra" if host_of[a] == host_of[b] else "inter"

    # process groups: default, pp groups (one per dp index), dp groups (one per stage): DeviceMesh (pp, dp)
    groups = [("0", "default_pg", list(range(world)))]
    if S > 1:
        groups += [(str(1 + i), "mesh_pp", [i + k * dp for k in range(S)]) for i in range(dp)]
        groups += [(str(1 + dp + k), "mesh_dp", list(range(k * dp, (k + 1) * dp))) for k in range(S)]
    pp_group = {r: g for g in groups if g[1] == "mesh_pp" for r in g[2]}
    dp_group = {r: g for g in groups if g[1] == ("mesh_dp" if S > 1 else "default_pg") for r in g[2]}
    ar_bw: dict[str, float] = {}                          # group -> all-reduce bus bandwidth (slowest pair)
    texts: dict[str, str] = {}
    positions: dict[str, dict[int, int]] = {}

    def ranks_text(g):                                  # "Process Group Ranks", written on every collective
        if g[0] not in texts:
            texts[g[0]] = json.dumps(g[2])
        return texts[g[0]]

    def index_in(g, r):                                 # a rank's position in its group
        if g[0] not in positions:
            positions[g[0]] = {x: i for i, x in enumerate(g[2])}
        return positions[g[0]][r]


    act_bytes = tokens * _HIDDEN * 2
    mb_flops = {r: 2.0 * tokens * _HIDDEN * ffn(r) for r in range(world)}   # one GEMM
    clean_step_us = 3 * M0 * L * 2.0 * _TOKENS * _HIDDEN * _FFN / _RATE * 1e6
    cpu_end = {r: _T0_US + float(rng.uniform(0, 30)) for r in range(world)}
    events = {r: [] for r in range(world)}
    gpu_ev = {r: [] for r in range(world)}
    mem_state = {r: [0.0, 0.0] for r in range(world)}   # allocated, reserved
    ext = {r: 100 for r in range(world)}
    corr = {r: 1000 for r in range(world)}
    seq_p2p: dict[tuple, int] = {}
    seq_ar = {r: 0 for r in range(world)}
    truth_steps, link_acc = [], {}
    mem_peak = {r: 0.0 for r in range(world)}
    flops_total = {r: 0.0 for r in range(world)}
    extra_static = {}
    for r in range(world):
        base_peak = _STATIC_BYTES + M * L * tokens * (_HIDDEN + ffn(r)) * 2
        extra_static[r] = max(0.0, spec.memory_peaks[r] * _CAPACITY / 1.02 - base_peak) if r in spec.memory_peaks \
            else float(rng.uniform(0, 0.01)) * base_peak

    for step_i in range(spec.steps):
        step_no = 10 + step_i
        sim = _Sim()
        cpu = {}                                        # rank -> list of CPU-side records in issue order
        win = {}
        for r in range(world):
            t = cpu_end[r] + (_STEP_GAP_US if step_i else 0.0)
            load = _LOADER_US * (1 + 0.02 * float(rng.standard_normal()))
            load += spec.slow_hosts.get(host_of[r], 0.0) * clean_step_us
            win[r] = [t, None, (t + _PREP_GAP_US, load)]
            p = t + _PREP_GAP_US + load + 25.0
            recs = []
            k = stage_of[r]
            prev, nxt = (r - dp if k > 1 else None), (r + dp if k < S else None)
            slow = spec.slow_ranks.get(r, 1.0)

            def issue(kind, rec, **op):
                nonlocal p
                cdur = float(rng.uniform(18, 34))
                op["launch"] = p + 0.6 * cdur + 6.0
                i = sim.add(r, kind=kind, **op)
                recs.append((i, p, cdur, rec))
                p += cdur + 4.0
                return i

            def comp(flops, dims, rec_kind, deps, tid):
                d = flops / _RATE * 1e6 * slow * (1 + 0.003 * float(rng.standard_normal()))
                return issue("comp", {"type": rec_kind, "dims": dims, "tid": tid, "flops": flops},
                             stream=_COMPUTE_STREAM, dur=d, deps=deps)

            def p2p(kind, peer, m, deps, tid):
                src, dst = (r, peer) if kind == "send" else (peer, r)
                n = seq_p2p.get((src, dst, kind), 0)
                seq_p2p[(src, dst, kind)] = n + 1
                bw = _P2P_BW[where(src, dst)] * spec.slow_links.get((src, dst), 1.0)
                key = ("p2p", step_i, src, dst, n)
                if key not in link_acc:
                    link_acc[key] = bw * (1 + 0.005 * float(rng.standard_normal()))
                return issue(kind, {"type": kind, "peer": peer, "tid": tid, "m": m},
                             stream=40 + 4 * (0 if peer < r else 1), key=key,
                             xfer=act_bytes / link_acc[key] * 1e6 + _NCCL_LAT_US, deps=deps, size=act_bytes)

            mc = issue("memcpy", {"type": "memcpy", "tid": pid_of[r]}, stream=_COMPUTE_STREAM,
                       dur=tokens * M * 8 / 20e9 * 1e6 + 2.0, deps=[])
            fwd_last, recv_act = {}, {}
            for m in range(M):
                deps = [mc]
                if prev is not None:
                    recv_act[m] = p2p("recv", prev, m, [], pid_of[r])
                    deps = deps + [recv_act[m]]
                for layer in range(L):
                    i = comp(mb_flops[r], [[tokens, _HIDDEN], [_HIDDEN, ffn(r)]], ("fwd", m, layer), deps,
                             pid_of[r])
                    deps = [i]
                fwd_last[m] = deps[0]
                if nxt is not None:
                    p2p("send", nxt, m, [fwd_last[m]], pid_of[r])
            ar_ops = []
            for m in reversed(range(M)):
                deps = [fwd_last[m]]
                if nxt is not None:
                    deps = deps + [p2p("recv", nxt, m, [], tid_bwd[r])]
                for layer in reversed(range(L)):
                    wg = comp(mb_flops[r], [[_HIDDEN, tokens], [tokens, ffn(r)]], ("wgrad", m, layer), deps,
                              tid_bwd[r])
                    if m == 0 and len(dp_group[r][2]) > 1:
                        g = dp_group[r]
                        seq_ar[r] += 1
                        nbytes = _HIDDEN * ffn(r) * 2
                        n = len(g[2])
                        if g[0] not in ar_bw:
                            ar_bw[g[0]] = min(_AR_BUSBW[where(a, g[2][0])] for a in g[2])
                        bw = ar_bw[g[0]]
                        xfer = nbytes / (bw / (2 * (n - 1) / n)) * 1e6 * (1 + 0.005 * abs(float(
                            rng.standard_normal()))) + _NCCL_LAT_US
                        ar_ops.append(issue("ar", {"type": "ar", "tid": tid_bwd[r], "group": g, "seq": seq_ar[r],
                                                   "nelems": nbytes // 2},
                                            stream=_DP_STREAM, key=("ar", step_i, g[0], layer), xfer=xfer,
                                            deps=[wg], size=nbytes))
                    dg = comp(mb_flops[r], [[tokens, ffn(r)], [ffn(r), _HIDDEN]], ("dgrad", m, layer), [wg],
                              tid_bwd[r])
                    deps = [dg]
                if prev is not None:
                    p2p("send", prev, m, deps, tid_bwd[r])
            opt_us = 450.0 * (1 + 0.01 * float(rng.standard_normal()))
            issue("comp", {"type": "opt", "tid": pid_of[r]}, stream=_COMPUTE_STREAM, dur=opt_us, deps=ar_ops)
            cpu[r] = (recs, p)
        sim.run()

        for r in range(world):
            recs, p = cpu[r]
            t0 = win[r][0]
            gpu_end = max(sim.ops[i]["end"] for i in sim.by_rank[r])
            sync_end = max(p + 10.0, gpu_end + 8.0)
            t1 = sync_end + 15.0
            cpu_end[r] = t1
            ev = events[r]
            pid = pid_of[r]
            dev = r % dph
            ld_s, ld_d = win[r][2]
            ev.append(_x("user_annotation", f"ProfilerStep#{step_no}", pid, pid, t0, t1 - t0,
                         {"External id": _next(ext, r), "Record function id": 0}))
            ev.append(_x("user_annotation", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", pid, pid,
                         ld_s, ld_d, {"External id": _next(ext, r), "Record function id": 0}))
            comp_iv, comm_iv, recv_iv, other_iv = [], [], [], []
            alloc = mem_state[r]
            if step_i == 0:
                alloc[0] = _STATIC_BYTES + extra_static[r]
            for i, cs, cd, rec in recs:
                op = sim.ops[i]
                gs, gd = _r3(op["start"]), _r3(op["end"] - op["start"])
                x = _next(ext, r)
                c = _next(corr, r)
                tid = rec["tid"]
                kind = rec["type"]
                if kind == "memcpy":
                    ev.append(_x("cuda_runtime", "cudaMemcpyAsync", pid, tid, op["launch"] - 6.0, 5.0,
                                 {"External id": x, "cbid": 41, "correlation": c}))
                    gpu_ev[r].append(_x("gpu_memcpy", "Memcpy HtoD (Pinned -> Device)", dev, _COMPUTE_STREAM, gs, gd,
                                        {"External id": x, "device": dev, "context": 1, "stream": _COMPUTE_STREAM,
                                         "correlation": c, "bytes": tokens * M * 8,
                                         "memory bandwidth (GB/s)": round(tokens * M * 8 / max(gd, 1e-3) / 1e3, 4)}))
                    other_iv.append((gs, gs + gd))
                    continue
                if kind in ("fwd", "wgrad", "dgrad", "opt") or isinstance(kind, tuple):
                    is_opt = kind == "opt"
                    name = "aten::_foreach_add_" if is_opt else "aten::mm"
                    args = {"External id": x, "Record function id": 0}
                    if not is_opt:
                        dims = rec["dims"]
                        args.update({"Concrete Inputs": ["", ""], "Input type": ["c10::BFloat16", "c10::BFloat16"],
                                     "Input Strides": [[dims[0][1], 1], [dims[1][1], 1]], "Input Dims": dims})
                        flops_total[r] += rec["flops"]
                        if kind[0] == "fwd" and kind[2] == 0:
                            _mem(ev, alloc, mem_state, r, pid, tid, cs, L * tokens * (_HIDDEN + ffn(r)) * 2, dev)
                    ev.append(_x("cpu_op", name, pid, tid, cs, cd, args))
                    ev.append(_x("cuda_runtime", "cudaLaunchKernel", pid, tid, op["launch"] - 6.0, 5.0,
                                 {"External id": x, "cbid": 211, "correlation": c}))
                    gpu_ev[r].append(_x("kernel", _OPT_KERNEL if is_opt else _KERNEL_NAME, dev, _COMPUTE_STREAM, gs,
                                        gd, {"External id": x, "queued": 0, "device": dev, "context": 1,
                                             "stream": _COMPUTE_STREAM, "correlation": c, "registers per thread": 232,
                                             "shared memory": 98304, "grid": [128, 4, 1], "block": [256, 1, 1]}))
                    comp_iv.append((gs, gs + gd))
                    if not is_opt and kind[0] == "dgrad" and kind[2] == 0:
                        _mem(ev, alloc, mem_state, r, pid, tid, cs + cd, -L * tokens * (_HIDDEN + ffn(r)) * 2, dev)
                    continue
                # NCCL: record_param_comms + launch + kernel
                if kind == "ar":
                    g = rec["group"]
                    coll = {"Collective name": "allreduce", "In msg nelems": rec["nelems"],
                            "Out msg nelems": rec["nelems"], "Group size": len(g[2]), "dtype": "BFloat16",
                            "In split size": "[]", "Out split size": "[]", "Process Group Name": g[0],
                            "Process Group Description": g[1], "Process Group Ranks": ranks_text(g)}
                    kname = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
                    rpc = {"Rank": index_in(g, r), "Seq": rec["seq"]}
                else:
                    g = pp_group[r]
                    nel = act_bytes // 2
                    coll = {"Collective name": kind, "In msg nelems": nel, "Out msg nelems": nel,
                            "Group size": len(g[2]), "dtype": "BFloat16", "In split size": "[]",
                            "Out split size": "[]", "Process Group Name": g[0], "Process Group Description": g[1],
                            "Process Group Ranks": ranks_text(g)}
                    coll["Dst Rank" if kind == "send" else "Src Rank"] = rec["peer"]
                    kname = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
                    rpc = {"Rank": index_in(g, rec["peer"])}
                    if kind == "recv":
                        recv_iv.append((gs, gs + gd))
                    else:
                        t_min = min(_r3(sim.ops[j]["end"] - sim.ops[j]["start"]) for j in sim.comm[op["key"]])
                        link_acc.setdefault(("link", r, rec["peer"]), []).append((op["size"], t_min))
                ev.append(_x("cpu_op", "record_param_comms", pid, tid, cs, cd,
                             {"External id": x, "Record function id": 0, **coll, **rpc, "Global rank start": 0,
                              "Global rank stride": 1}))
                ev.append(_x("cuda_runtime", "cudaLaunchKernelExC", pid, tid, op["launch"] - 6.0, 5.0,
                             {"External id": x, "cbid": 430, "correlation": c}))
                gpu_ev[r].append(_x("kernel", kname, dev, op["stream"], gs, gd,
                                    {"External id": x, "queued": 0, "device": dev, "context": 1,
                                     "stream": op["stream"], "correlation": c, "registers per thread": 96,
                                     "shared memory": 87568, "grid": [16, 1, 1], "block": [640, 1, 1], **coll}))
                comm_iv.append((gs, gs + gd))
            ev.append(_x("cuda_runtime", "cudaDeviceSynchronize", pid, pid, p, sync_end - p,
                         {"External id": _next(ext, r), "cbid": 165, "correlation": _next(corr, r)}))
            mem_peak[r] = max(mem_peak[r], mem_state[r][1])
            t0r, t1r = _r3(t0), _r3(t0) + _r3(t1 - t0)
            row = _breakdown(comp_iv, comm_iv, recv_iv, other_iv, t0r, t1r)
            row.update(rank=r, step=step_no, dataloader_ms=_r3(ld_d) / 1e3)
            truth_steps.append(row)

    files = []
    for r in range(world):
        files.append(_write_rank(root, spec, r, names, host_of, pid_of, tid_bwd, groups, world, dph,
                                 events[r], gpu_ev[r]))
    links = []
    for key, vals in sorted((k, v) for k, v in link_acc.items() if k[0] == "link"):
        size = sum(v[0] for v in vals) / 1e6
        t = sum(v[1] for v in vals) / 1e3
        links.append({"src_rank": key[1], "dst_rank": key[2], "size_mb": size, "time_ms": t,
                      "bandwidth_gbps": size / t, "transport": f"{where(key[1], key[2])}-host"})
    truth_steps.sort(key=lambda d: (d["rank"], d["step"]))
    return {
        "world_size": world, "ranks": list(range(world)), "steps": [10 + i for i in range(spec.steps)],
        "hosts": {r: names[host_of[r]] for r in range(world)}, "stages": {r: stage_of[r] for r in range(world)},
        "stage_num": S, "micro_batches": M, "layers": L,
        "groups": [{"pg_name": g[0], "pg_desc": g[1], "ranks": g[2]} for g in groups],
        "per_rank_step": truth_steps,
        "flops": {r: flops_total[r] for r in range(world)},
        "memory": {r: {"peak_reserved_mb": mem_peak[r] / 1e6, "capacity_mb": _CAPACITY / 1e6,
                       "peak_ratio": mem_peak[r] / _CAPACITY} for r in range(world)},
        "p2p_links": links,
        "anomalies": _anomalies(spec, world, names, host_of, stage_of),
        "files": sorted(files),
    }


def _next(counter: dict, r: int) -> int:
    counter[r] += 1
    return counter[r]


def _x(cat, name, pid, tid, ts, dur, args) -> dict:
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": _r3(ts), "dur": _r3(dur), "args": args}


def _mem(ev, alloc, mem_state, r, pid, tid, ts, nbytes, dev) -> None:
    alloc[0] += nbytes
    mem_state[r][1] = max(mem_state[r][1], float(np.ceil(alloc[0] * 1.02 / 2**21) * 2**21))
    ev.append({"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": pid, "tid": tid,
               "ts": _r3(ts), "args": {"Total Reserved": int(mem_state[r][1]), "Total Allocated": int(alloc[0]),
                                       "Bytes": int(nbytes), "Addr": 139_900_000_000_000 + int(abs(nbytes)) % 997,
                                       "Device Id": dev, "Device Type": 1}})


def _write_rank(root, spec, r, names, host_of, pid_of, tid_bwd, groups, world, dph, cpu_events, gpu_events) -> str:
    pid = pid_of[r]
    host = names[host_of[r]]
    props = [{"id": d, "name": "NVIDIA A100-SXM4-80GB", "totalGlobalMem": _CAPACITY, "computeMajor": 8,
              "computeMinor": 0, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
              "regsPerBlock": 65536, "warpSize": 32, "sharedMemPerBlock": 49152, "numSms": 108,
              "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 166912,
              "sharedMemPerMultiprocessor": 167936} for d in range(dph)]
    dist = {"backend": "nccl", "rank": r, "world_size": world, "pg_count": len(groups),
            "pg_config": [{"pg_name": g[0], "pg_desc": g[1], "backend_config": "cuda:nccl", "pg_size": len(g[2]),
                           "ranks": g[2]} for g in groups if r in g[2]], "nccl_version": "2.21.5"}
    meta = [{"name": "process_name", "ph": "M", "ts": _T0_US, "pid": pid, "tid": 0, "args": {"name": "python3.11"}},
            {"name": "thread_name", "ph": "M", "ts": _T0_US, "pid": pid, "tid": pid,
             "args": {"name": f"thread {pid} (python3.11)"}},
            {"name": "thread_name", "ph": "M", "ts": _T0_US, "pid": pid, "tid": tid_bwd[r],
             "args": {"name": f"thread {tid_bwd[r]} (pt_autograd_0)"}},
            {"name": "process_name", "ph": "M", "ts": _T0_US, "pid": r % dph, "tid": 0, "args": {"name": ""}},
            {"name": "process_labels", "ph": "M", "ts": _T0_US, "pid": r % dph, "tid": 0,
             "args": {"labels": f"GPU {r % dph}"}}]
    cpu_events = sorted(cpu_events, key=lambda e: e["ts"])
    gpu_events = sorted(gpu_events, key=lambda e: e["ts"])
    end = max(e["ts"] + e.get("dur", 0) for e in cpu_events + gpu_events)
    tail = [{"name": "Record Window End", "ph": "i", "s": "g", "pid": "", "tid": "", "ts": _r3(end + 50)}]
    ns = _BASE_NS + 7_919 * r
    head = {"schemaVersion": 1, "deviceProperties": props, "record_shapes": 1, "profile_memory": 1,
            "distributedInfo": dist, "with_flops": 1, "host_name": host, "cupti_version": 24,
            "cuda_runtime_version": 12040, "cuda_driver_version": 12040, "displayTimeUnit": "ms",
            "baseTimeNanoseconds": _BASE_NS}
    buf = io.StringIO()
    buf.write("{\n")
    for k, v in head.items():
        buf.write(f"  {json.dumps(k)}: {json.dumps(v)},\n")
    buf.write('  "traceEvents": [\n  ')
    buf.write(",\n  ".join(json.dumps(e) for e in meta + cpu_events + gpu_events + tail))
    buf.write(f'\n  ],\n  "traceName": {json.dumps(f"/tmp/{host}_{pid}.{ns}.pt.trace.json")}\n}}\n')
    name = f"{host}_{pid}.{ns}.pt.trace.json" + (".gz" if spec.gzip else "")
    data = buf.getvalue().encode("utf-8")
    if spec.gzip:
        out = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=out, mtime=0, compresslevel=6) as gz:
            gz.write(data)
        data = out.getvalue()
    (root / name).write_bytes(data)
    return name


def _anomalies(spec: KinetoSpec, world: int, names: list[str], host_of: dict, stage_of: dict) -> list[dict]:
    S, out = spec.stages, []

    def one(kind, ranks, links=(), stage=None, host=None, **extra):
        out.append({"kind": kind, "ranks": sorted(int(r) for r in ranks), "links": [list(x) for x in links],
                    "stage": stage, "host": host, **extra})

    for r, f in sorted(spec.slow_ranks.items()):
        one("slow_rank", [r], stage=stage_of[r] if S > 1 else None, host=names[host_of[r]], factor=float(f))
    for h, x in sorted(spec.slow_hosts.items()):
        one("slow_host_data_loading", [r for r in range(world) if host_of[r] == h], host=names[h],
            share_of_step=float(x))
    for (a, b), x in sorted(spec.slow_links.items()):
        one("slow_link", [a, b], links=[(a, b)], bandwidth_share=float(x))
    if spec.pipeline_bubble:
        one("pipeline_bubble", range(world), micro_batches=2)
    for r, x in sorted(spec.memory_peaks.items()):
        one("memory_near_capacity", [r], stage=stage_of[r] if S > 1 else None, host=names[host_of[r]],
            peak_share=float(x))
    for k, f in sorted(spec.heavy_stages.items()):
        one("flops_imbalance", [r for r in range(world) if stage_of[r] == k], stage=int(k), factor=float(f))
    for r, f in sorted(spec.light_ranks.items()):
        one("flops_imbalance", [r], host=names[host_of[r]], factor=float(f))
    return out


def write_nested_ops_run(root: str | Path, ranks: int = 8, steps: int = 3, pairs: int = 16,
                         t0_us: int = 1_700_000_000_000_000, ns_decimals: bool = False, seed: int = 0) -> dict:
    """Identical ranks whose ``aten::linear`` ops each contain an ``aten::addmm`` that ends in the same µs.

    The case of issue 12 (a V100 DLRM run): epoch-µs timestamps (~1.7e15 µs: a float of them in ms resolves only
    0.24 µs), every parent and child ending at one instant, rank clocks a few ms apart. Each rank writes
    ``rank<r>.pt.trace.json`` with ``ProfilerStep#N`` spans, ``pairs`` linear/addmm pairs per step on the main
    thread (``Input Dims`` [[B, K], [N, K], [N]] / [[N], [B, K], [K, N]]) and one GEMM kernel per addmm. Times are
    integer µs, or with ``ns_decimals`` µs with three decimals written as text (``1700000000123456.789``).
    Ground truth: ``flops_per_rank`` = steps · pairs · 2·B·K·N (the innermost ops only), the same on every rank.
    """
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    b, k, n = 512, 1024, 4096
    shapes = [(int(rng.integers(4, 60)), int(rng.integers(1, 4)), int(rng.integers(0, 1000))) for _ in range(pairs)]

    def num(t_ns: int) -> str:  # the exact text of a µs value
        return f"{t_ns // 1000}.{t_ns % 1000:03d}" if ns_decimals else str(t_ns // 1000)

    for r in range(ranks):
        unit = 1 if ns_decimals else 1000  # ns per tick of the written values
        t = (t0_us * 1000 + r * 3_141_593_000 + r * 7 * unit) // unit * unit
        events, corr = [], 0
        for s in range(steps):
            step_start = t
            t += 50_000
            for dur_us, lead_us, extra in shapes:
                dur = dur_us * 1000 + (extra if ns_decimals else 0)
                lead = lead_us * 1000
                events.append(("cpu_op", "aten::linear", t, dur, {"Input Dims": [[b, k], [n, k], [n]],
                                                                  "Input type": ["float", "float", "float"]}))
                events.append(("cpu_op", "aten::addmm", t + lead, dur - lead,
                               {"Input Dims": [[n], [b, k], [k, n]], "Input type": ["float", "float", "float"]}))
                corr += 1
                events.append(("kernel", "volta_sgemm_128x64_tn", t + dur + 5_000, dur - lead,
                               {"stream": 7, "device": 0, "correlation": corr}))
                t += dur + 20_000
            events.append(("user_annotation", f"ProfilerStep#{s + 1}", step_start, t - step_start, {}))
            t += 10_000
        lines = [f'{{"ph": "X", "cat": "{cat}", "name": "{name}", "pid": {r if cat == "kernel" else 100 + r}, '
                 f'"tid": {7 if cat == "kernel" else 1}, "ts": {num(ts)}, "dur": {num(d)}, "args": {json.dumps(a)}}}'
                 for cat, name, ts, d, a in sorted(events, key=lambda e: e[2])]
        head = {"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": r, "world_size": ranks},
                "displayTimeUnit": "ms"}
        text = json.dumps(head)[:-1] + ', "traceEvents": [\n' + ",\n".join(lines) + "\n]}\n"
        (root / f"rank{r}.pt.trace.json").write_text(text)
    return {"ranks": ranks, "flops_per_rank": float(steps * pairs * 2 * b * k * n)}
