"""Deterministic synthetic torch_npu Ascend profiler output (text export) with known ground truth.

One ``{host}_{pid}_{timestamp}_ascend_pt/`` directory per rank, as torch_npu writes them
(``research/ascend-profiler-output-and-msprof-analyze.md``; section numbers below are that file's):

* ``profiler_info_{rank}.json`` (§2.9, torch_npu 2.7.1 shape, ``rank_id`` as a string) and
  ``profiler_metadata.json`` (§2.10: ``distributed_args`` + ``parallel_group_info`` with the
  ``default_group`` / ``dp`` / ``tp`` / ``pp`` groups this rank belongs to; stages = position in the pp group).
* ``ASCEND_PROFILER_OUTPUT/step_trace_time.csv`` (§2.1, µs, ``Device_id`` first as torch_npu 2.7.1 writes it):
  the four Overlap-Analysis sums are computed from the generated device timeline itself (union of compute
  kernels, union of hcom ops, their difference, and the idle rest of the step span); Bubble = Σ hcom_receive
  durations, Stage = span - Bubble, Preparing = first device op - ProfilerStep start.
* ``communication.json`` (§2.2): per op ``<name>@<double_hash(group key)>``, Time Info of the master plane
  (elapse = transit + wait + idle; sync = the wait before the transfer) and Bandwidth Info for all five
  transports (SDMA = HCCS + PCIE + SIO aggregate), plus ``Total Op Info``.
* ``communication_matrix.json`` (§2.3): ``<optype>-<stat>@<hash>`` with top1/middle/bottom*/total, links
  keyed by GROUP-LOCAL indices (sorted global ranks of the group), LOCAL self links. A rank lists only the
  links it sends on (as the fixtures' files do): the gradient AllReduce is HCCL "MESH-RING" (:func:`_peers`:
  full HCCS mesh inside a server, RDMA to its ring neighbours in the group), so at most
  ``devices_per_host + 2`` links per rank and op whatever the group size (the matrix stays linear in ranks).
* ``kernel_details.csv`` (§2.5; MatMul kernels with Input/Output Shapes so 2·M·N·K is computable; hcom ops as
  COMMUNICATION rows), ``op_statistic.csv`` (§2.6), ``memory_record.csv`` / ``npu_module_mem.csv`` /
  ``operator_memory.csv`` (§2.7; "MB" columns are MiB as torch_npu writes them; timestamps with a trailing TAB).

The files carry no device memory capacity (§2.7): the ground truth names the ``--device-memory-gb`` value.
Model: tp = 1, Megatron rank order (rank = stage·dp + dp index); each pipeline runs a GPipe schedule of
``microbatches`` forward then backward micro-batches with hcom_send / hcom_receive between stages, then
four gradient-bucket AllReduces per dp group (launched during the last backward kernels, the slowest
arrival sets the start), then the optimizer. The clean default (2 stages, 20 micro-batches) keeps the bubble
near 1/(M+1); more stages need more micro-batches to stay clean (bubble (S-1)/(M+S-1)). Everything comes from one seeded ``numpy.random.Generator``;
no clock, no environment: the same spec gives byte-identical files.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from reportgen.readers.ascend import double_hash  # HCCL group hash (research §2.2); one definition

__all__ = ["AscendSpec", "write_ascend_run", "double_hash", "ANOMALY_FINDINGS"]

#: anomaly kind -> finding ids that report it (any one of them)
ANOMALY_FINDINGS = {
    "slow_rank": ["slow_device_compute", "slow_rank_compute", "rank_arrives_late"],
    "slow_host_data_loading": ["slow_host", "slow_input_pipeline"],
    "slow_link": ["slow_link", "slow_link_transit"],
    "pipeline_bubble": ["pipeline_between_stage"],
    "memory_near_capacity": ["memory_near_capacity"],
    "flops_imbalance": ["stage_flops_imbalance", "flops_per_s_low", "heavy_pipeline_stage"],
    "launch_gaps": ["group_slow_member"],
}

_T0 = 1_764_246_877_000_000_000   # ns since the epoch of the first ProfilerStep
_RATE = 150e12                    # effective MatMul FLOP/s of one NPU
_BW = {"HCCS": 28.0, "RDMA": 25.0, "LOCAL": 330.0}   # GB/s = MB/ms
_LARGE = {"HCCS": 32.0, "RDMA": 0.5}                  # large-packet thresholds (MB)
_TOKENS = 8192 * 20               # tokens per step and pipeline
_HID, _FFN = 4096, 16384
_VEC_NS_PER_TOKEN = 300           # FlashAttentionScore forward time per token (ns)
_ACT_BYTES = 4 * 2 ** 20          # activation / gradient sent between stages per micro-batch at 20 micro-batches
_BUCKETS = (256 * 2 ** 20, 256 * 2 ** 20, 256 * 2 ** 20, 192 * 2 ** 20)   # gradient AllReduce buckets
_OPT_NS = 3_000_000
_GAP_NS = 4_000                   # launch gap between kernels
_IDLE_NS = 20_000                 # idle time of a communication op
_HOST_GAP_NS = 300_000            # end of a step's device work -> next ProfilerStep start
_PREP_NS = 600_000                # ProfilerStep start -> first device op (data already prefetched)
_MEM_FRAC = 0.62                  # clean peak / capacity
_APP_PERIOD_NS = 20_000_000
_JIT = 0.003                      # relative jitter of kernel durations


@dataclass
class AscendSpec:
    """A run: ``hosts`` x ``devices_per_host`` ranks, ``stages`` pipeline stages (1 = data parallel).

    Anomalies (all off by default; any combination):
    ``slow_rank`` (rank; compute x ``slow_rank_factor``), ``slow_host`` (host index; preparing
    + ``slow_host_share`` of the clean step), ``slow_link`` ((src, dst) ranks that exchange data: same server or ring
    neighbours in a dp group, or adjacent pipeline stages; bandwidth x ``slow_link_factor``),
    ``pipeline_bubble`` (``bubble_microbatches`` micro-batches for the same tokens), ``memory_near_capacity``
    (rank; peak = ``memory_peak_ratio`` of the capacity), ``flops_imbalance`` (1-based stage with stages > 1,
    FLOPs and compute x ``flops_factor``; a rank with stages = 1, FLOPs and compute x ``flops_rank_factor``),
    ``launch_gaps`` (rank; a host-bound rank: after each kernel its device idles ``launch_gap_share`` of the kernel's
    time before the next one is launched, so its free time grows, not its computation).
    """

    hosts: int = 2
    devices_per_host: int = 4
    stages: int = 2
    steps: int = 4
    microbatches: int = 20
    seed: int = 0
    first_step: int = 11
    device_memory_gb: float = 64.0
    host_names: list[str] | None = None
    device_id_column: bool = True
    slow_rank: int | None = None
    slow_rank_factor: float = 1.4
    launch_gaps: int | None = None
    launch_gap_share: float = 0.3
    slow_host: int | None = None
    slow_host_share: float = 0.15
    slow_link: tuple[int, int] | None = None
    slow_link_factor: float = 0.3
    pipeline_bubble: bool = False
    bubble_microbatches: int = 2
    memory_near_capacity: int | None = None
    memory_peak_ratio: float = 0.96
    flops_imbalance: int | None = None
    flops_factor: float = 1.8
    flops_rank_factor: float = 0.6


# --------------------------------------------------------------------------- intervals (int ns)


def _union(iv: list) -> list:
    out: list = []
    for s, e in sorted(iv):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return out


def _length(iv: list) -> int:
    return sum(e - s for s, e in iv)


def _minus(a: list, b: list) -> list:
    out, j = [], 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append([cur, b[k][0]])
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            out.append([cur, e])
    return out


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}\t"


def _num(x: float) -> str:
    return repr(float(x))


# --------------------------------------------------------------------------- layout


def _peers(ranks: list, host_of: dict) -> dict:
    """Ranks each member of a collective group sends to, in group order (HCCL "MESH-RING", research §2.4
    ``alg_type``): every member on its own server (full HCCS mesh) and its two neighbours in the ring of the
    group's sorted ranks (RDMA when they sit on another server). So a rank lists at most
    ``devices_per_host + 1`` links whatever the group size, as real matrices do (a rank's links, not the
    group's), instead of one per group member. A group inside one server keeps the full mesh."""
    n = len(ranks)
    out = {}
    for i, r in enumerate(ranks):
        ring = {ranks[(i + 1) % n], ranks[i - 1]}
        out[r] = [q for q in ranks if q == r or host_of[q] == host_of[r] or q in ring]
    return out


def _validate(spec: AscendSpec) -> dict:
    if spec.hosts < 1 or spec.devices_per_host < 1 or spec.steps < 1 or spec.microbatches < 1:
        raise ValueError("hosts, devices_per_host, steps and microbatches must be >= 1")
    world = spec.hosts * spec.devices_per_host
    if spec.stages < 1 or world % spec.stages:
        raise ValueError(f"stages={spec.stages} must divide the world size {world}")
    names = list(spec.host_names) if spec.host_names else [f"host-{i}" for i in range(spec.hosts)]
    if len(names) != spec.hosts or len(set(names)) != len(names) or \
            any(not n or "/" in n or n.strip() != n or n in (".", "..") for n in names):
        raise ValueError("host_names must hold one unique, path-safe name per host")
    dp = world // spec.stages
    stage_of = {r: r // dp for r in range(world)}          # 0-based
    host_of = {r: r // spec.devices_per_host for r in range(world)}
    for label, r in (("slow_rank", spec.slow_rank), ("memory_near_capacity", spec.memory_near_capacity),
                     ("launch_gaps", spec.launch_gaps)):
        if r is not None and not 0 <= r < world:
            raise ValueError(f"{label}: rank {r} outside 0..{world - 1}")
    if spec.slow_host is not None and not 0 <= spec.slow_host < spec.hosts:
        raise ValueError(f"slow_host: host index {spec.slow_host} outside 0..{spec.hosts - 1}")
    if spec.pipeline_bubble and spec.stages < 2:
        raise ValueError("pipeline_bubble needs stages >= 2")
    if spec.flops_imbalance is not None:
        lim = spec.stages if spec.stages > 1 else world - 1
        lo = 1 if spec.stages > 1 else 0
        if not lo <= spec.flops_imbalance <= lim:
            raise ValueError(f"flops_imbalance: {'stage' if spec.stages > 1 else 'rank'} {spec.flops_imbalance} "
                             f"outside {lo}..{lim}")
    if spec.slow_link is not None:
        a, b = (int(x) for x in spec.slow_link)
        inside = 0 <= a < world and 0 <= b < world
        same_dp = inside and dp > 1 and stage_of[a] == stage_of[b] and a != b and \
            b in _peers(list(range(stage_of[a] * dp, (stage_of[a] + 1) * dp)), host_of)[a]
        adjacent_pp = inside and a % dp == b % dp and abs(stage_of[a] - stage_of[b]) == 1
        if not (same_dp or adjacent_pp):
            raise ValueError(f"slow_link {spec.slow_link}: no traffic between these ranks (same server or ring "
                             f"neighbours in a dp group, or adjacent pipeline stages needed)")
    for v in (spec.slow_rank_factor, spec.slow_link_factor, spec.flops_factor, spec.flops_rank_factor):
        if not v > 0:
            raise ValueError("factors must be > 0")
    if not 0 < spec.memory_peak_ratio < 1.2 or spec.device_memory_gb <= 0:
        raise ValueError("memory_peak_ratio must be in (0, 1.2) and device_memory_gb > 0")
    groups = {"group_name_0": ("default_group", list(range(world)))}
    n = 1
    for s in range(spec.stages):
        groups[f"group_name_{n}"] = ("dp", list(range(s * dp, (s + 1) * dp)))
        n += 1
    for r in range(world):
        groups[f"group_name_{n}"] = ("tp", [r])
        n += 1
    if spec.stages > 1:
        for d in range(dp):
            groups[f"group_name_{n}"] = ("pp", [s * dp + d for s in range(spec.stages)])
            n += 1
    return {"world": world, "dp": dp, "stage_of": stage_of, "host_of": host_of, "names": names, "groups": groups}


class _Sim:
    """Device timeline of every rank, step by step."""

    def __init__(self, spec: AscendSpec, lay: dict, rng: np.random.Generator):
        self.spec, self.lay, self.rng = spec, lay, rng
        w = lay["world"]
        self.events = {r: [] for r in range(w)}      # kernels and comm ops, dicts
        self.seq: dict = {}
        self._local: dict = {}
        self._peers: dict = {}
        self.hash = {k: double_hash(k) for k in lay["groups"]}
        self.dp_key = {s: k for k, (n, rk) in lay["groups"].items() if n == "dp" for s in [lay["stage_of"][rk[0]]]}
        self.pp_key = {rk[0] % lay["dp"]: k for k, (n, rk) in lay["groups"].items() if n == "pp"}
        self.mb = spec.bubble_microbatches if spec.pipeline_bubble else spec.microbatches
        self.tokens = _TOKENS // self.mb
        self.act_bytes = _ACT_BYTES * spec.microbatches // self.mb
        self.slow = {r: 1.0 for r in range(w)}
        if spec.slow_rank is not None:
            self.slow[spec.slow_rank] = spec.slow_rank_factor
        self.launch_gap = {r: 0.0 for r in range(w)}
        if spec.launch_gaps is not None:
            self.launch_gap[spec.launch_gaps] = spec.launch_gap_share
        self.work = {r: 1.0 for r in range(w)}
        if spec.flops_imbalance is not None:
            for r in range(w):
                if spec.stages > 1 and lay["stage_of"][r] == spec.flops_imbalance - 1:
                    self.work[r] = spec.flops_factor
                elif spec.stages == 1 and r == spec.flops_imbalance:
                    self.work[r] = spec.flops_rank_factor
        self.ffn = {r: max(128, int(round(_FFN * self.work[r] / 128)) * 128) for r in range(w)}
        self.task = {r: 1000 for r in range(w)}
        self.last_send_end = {r: 0 for r in range(w)}

    # ---- helpers
    def transport(self, a: int, b: int) -> str:
        return "LOCAL" if a == b else "HCCS" if self.lay["host_of"][a] == self.lay["host_of"][b] else "RDMA"

    def link_ns(self, a: int, b: int, nbytes: int) -> int:
        bw = _BW[self.transport(a, b)] * (1 + self.rng.normal(0, 0.004))
        if self.spec.slow_link is not None and (a, b) == tuple(self.spec.slow_link):
            bw *= self.spec.slow_link_factor
        return int(round(nbytes / 1e6 / bw * 1e6))

    def kernel(self, r, step, t, name, typ, core, dur, ins="", outs="", flops=0.0, block=20):
        dur = int(round(dur * self.slow[r] * (1 + min(max(float(self.rng.normal(0, _JIT)), -0.01), 0.01))))
        self.task[r] += 1
        self.events[r].append({"k": "kernel", "step": step, "name": name, "type": typ, "core": core, "start": t,
                               "dur": dur, "ins": ins, "outs": outs, "flops": flops, "block": block,
                               "task": self.task[r]})
        return t + dur + _GAP_NS + int(dur * self.launch_gap[r])

    def op_name(self, r: int, key: str, optype: str) -> str:
        n = self.seq.get((r, key), 0) + 1
        self.seq[(r, key)] = n
        return f"hcom_{optype}__{self.hash[key] % 1000:03d}_{n}_1"

    def comm(self, r, step, key, optype, start, end, transit, wait, sync, links):
        kind = "p2p" if optype in ("send", "receive") else "collective"
        self.events[r].append({"k": "comm", "step": step, "name": self.op_name(r, key, optype), "optype": optype,
                               "kind": kind, "group": key, "start": start, "dur": end - start, "transit": transit,
                               "wait": wait, "sync": sync, "idle": end - start - transit - wait, "links": links})

    def at(self, r: int, step: int) -> list:
        """Events of rank ``r`` in ``step``."""
        return self.events[r][self.span[(r, step)]]

    def local(self, key, r):
        idx = self._local.get(key)
        if idx is None:
            idx = self._local[key] = {q: i for i, q in enumerate(self.lay["groups"][key][1])}
        return idx[r]

    def peers(self, key):
        if key not in self._peers:
            self._peers[key] = _peers(self.lay["groups"][key][1], self.lay["host_of"])
        return self._peers[key]

    # ---- one micro-batch of work
    def forward(self, r, step, t):
        m, n = self.tokens, self.ffn[r]
        t = self.kernel(r, step, t, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE",
                        2.0 * m * _HID * n / _RATE * 1e9, f"{m},{_HID};{n},{_HID}", f"{m},{n}", 2.0 * m * _HID * n)
        return self.kernel(r, step, t, "aclnnFlashAttentionScore_FlashAttentionScore_FlashAttentionScore",
                           "FlashAttentionScore", "MIX_AIC", _VEC_NS_PER_TOKEN * m * self.work[r], block=24)

    def backward(self, r, step, t, ends: list):
        m, n = self.tokens, self.ffn[r]
        t = self.kernel(r, step, t, "aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
                        "FlashAttentionScoreGrad", "MIX_AIC", 2 * _VEC_NS_PER_TOKEN * m * self.work[r], block=24)
        ends.append(t)
        t = self.kernel(r, step, t, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE",
                        2.0 * m * n * _HID / _RATE * 1e9, f"{m},{n};{n},{_HID}", f"{m},{_HID}", 2.0 * m * n * _HID)
        ends.append(t)
        t = self.kernel(r, step, t, "aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "AI_CORE",
                        2.0 * m * _HID * n / _RATE * 1e9, f"{m},{_HID};{m},{n}", f"{_HID},{n}", 2.0 * m * _HID * n)
        ends.append(t)
        return t

    def p2p(self, step, a, b, ready, post):
        """a sends to b: send op on a's p2p stream from ``ready``, receive op on b from ``post``."""
        key = self.pp_key[a % self.lay["dp"]]
        start = max(ready, self.last_send_end[a])
        t0 = max(start, post)
        tr = self.link_ns(a, b, self.act_bytes)
        end = t0 + tr + _IDLE_NS
        self.last_send_end[a] = end
        la, lb = self.local(key, a), self.local(key, b)
        mb = self.act_bytes / 1e6
        self.comm(a, step, key, "send", start, end, tr, t0 - start, t0 - start,
                  [(la, lb, self.transport(a, b), mb, tr), (la, la, "LOCAL", mb, self.link_ns(a, a, self.act_bytes))])
        self.comm(b, step, key, "receive", post, end, 0, end - post - _IDLE_NS, end - post - _IDLE_NS, [])
        return end + _GAP_NS

    # ---- one step of every rank
    def step(self, step: int, host_start: dict) -> dict:
        sp, lay = self.spec, self.lay
        S, dp, M = sp.stages, lay["dp"], self.mb
        cur = {r: host_start[r] + self.prep[r] + int(self.rng.integers(0, 40_000)) for r in host_start}
        launch: dict = {}
        for d in range(dp):
            ranks = [s * dp + d for s in range(S)]
            f_end: dict = {}
            for m in range(M):
                for s, r in enumerate(ranks):
                    if s > 0:
                        cur[r] = self.p2p(step, ranks[s - 1], r, f_end[(s - 1, m)], cur[r])
                    cur[r] = self.forward(r, step, cur[r])
                    f_end[(s, m)] = cur[r] - _GAP_NS
            b_end: dict = {}
            ends = {r: [] for r in ranks}
            for m in range(M):
                for s in range(S - 1, -1, -1):
                    r = ranks[s]
                    if s < S - 1:
                        cur[r] = self.p2p(step, ranks[s + 1], r, b_end[(s + 1, m)], cur[r])
                    cur[r] = self.backward(r, step, cur[r], ends[r])
                    b_end[(s, m)] = cur[r] - _GAP_NS
            for r in ranks:
                e = ends[r]
                launch[r] = [e[max(0, len(e) - len(_BUCKETS) + k)] - _GAP_NS for k in range(len(_BUCKETS))]
        coll_end = {r: 0 for r in cur}
        if dp > 1:
            for s in range(S):
                key = self.dp_key[s]
                ranks = lay["groups"][key][1]
                n = len(ranks)
                peers = self.peers(key)
                for k, nbytes in enumerate(_BUCKETS):
                    per = 2 * nbytes // n
                    arrive = {r: max(launch[r][k], coll_end[r]) for r in ranks}
                    links = {r: [(self.local(key, r), self.local(key, q), self.transport(r, q), per / 1e6,
                                  self.link_ns(r, q, per)) for q in peers[r]] for r in ranks}
                    tr = {r: max(x[4] for x in links[r] if x[2] != "LOCAL") for r in ranks}
                    begin, top = max(arrive.values()), max(tr.values())
                    end = begin + top + _IDLE_NS
                    for r in ranks:
                        self.comm(r, step, key, "allReduce", arrive[r], end, tr[r],
                                  begin - arrive[r] + top - tr[r], begin - arrive[r], links[r])
                        coll_end[r] = end
        out = {}
        for r in cur:
            t = max(cur[r], coll_end[r] + _GAP_NS)
            t = self.kernel(r, step, t, "aclnnApplyAdamW_ApplyAdamW_ApplyAdamW", "ApplyAdamW", "AI_VECTOR_CORE",
                            _OPT_NS * self.work[r], block=40)
            out[r] = t
        return out

    def run(self) -> None:
        sp, lay = self.spec, self.lay
        w = lay["world"]
        clean_step = (_TOKENS * (2.0 * 3 * _HID * _FFN / _RATE * 1e9 + 3 * _VEC_NS_PER_TOKEN)) * 1.05
        self.prep = {r: _PREP_NS + (int(sp.slow_host_share * clean_step)
                                    if sp.slow_host is not None and lay["host_of"][r] == sp.slow_host else 0)
                     for r in range(w)}
        self.host_start = {}
        self.span: dict = {}      # (rank, step) -> slice of events[rank] (events are appended step by step)
        start = {r: _T0 + int(self.rng.integers(0, 50_000)) for r in range(w)}
        for i in range(sp.steps):
            step = sp.first_step + i
            for r in range(w):
                self.host_start[(r, step)] = start[r]
            first = {r: len(self.events[r]) for r in range(w)}
            ends = self.step(step, start)
            for r in range(w):
                self.span[(r, step)] = slice(first[r], len(self.events[r]))
            last = {r: max(e["start"] + e["dur"] for e in self.at(r, step)) for r in range(w)}
            start = {r: max(ends[r], last[r]) + _HOST_GAP_NS + int(self.rng.integers(0, 30_000)) for r in range(w)}
        self.end = start


# --------------------------------------------------------------------------- files


def _step_row(sim: _Sim, r: int, step: int) -> dict:
    ev = sim.at(r, step)
    comp = _union([[e["start"], e["start"] + e["dur"]] for e in ev if e["k"] == "kernel"])
    comm = _union([[e["start"], e["start"] + e["dur"]] for e in ev if e["k"] == "comm"])
    first, last = min(e["start"] for e in ev), max(e["start"] + e["dur"] for e in ev)
    cno = _minus(comm, comp)
    free = _minus([[first, last]], _union(comp + comm))
    bubble = sum(e["dur"] for e in ev if e["k"] == "comm" and e["optype"] == "receive")
    first_work = min(e["start"] for e in ev)
    v = {"computing": _length(comp), "cno": _length(cno), "comm": _length(comm), "free": _length(free),
         "bubble": bubble, "span": last - first, "prep": first_work - sim.host_start[(r, step)]}
    v["overlapped"] = v["comm"] - v["cno"]
    v["stage"] = v["span"] - bubble
    v["cno_excl"] = max(v["cno"] - bubble, 0)
    return v


_SDMA_PARTS = ("HCCS", "PCIE", "SIO")
_NO_LINKS: dict = {}


def _bw_info(links: list, with_bw: bool = True) -> dict:
    if not links and with_bw and _NO_LINKS:   # a receive op: the same empty entry every time (only serialised)
        return _NO_LINKS
    out = {}
    for t in ("RDMA", "HCCS", "PCIE", "SDMA", "SIO"):
        sel = [x for x in links if x[2] in _SDMA_PARTS] if t == "SDMA" else [x for x in links if x[2] == t]
        size = sum([x[3] for x in sel])
        time = sum([x[4] for x in sel]) / 1e6
        entry = {"Transit Size(MB)": size, "Transit Time(ms)": time} if with_bw else \
            {"Transit Time(ms)": time, "Transit Size(MB)": size}   # Total Op Info: no bandwidth (torch_npu)
        if with_bw:
            big = sum([1 for x in sel if x[3] > _LARGE.get(t, 32.0)])
            entry["Bandwidth(GB/s)"] = round(size / time, 4) if time else 0
            entry["Large Packet Ratio"] = round(big / len(sel), 4) if sel and t != "SDMA" else 0
        dist: dict = {}
        if t != "SDMA":
            for x in sel:
                key = repr(round(x[3], 6))
                c, ms = dist.get(key, (0, 0.0))
                dist[key] = (c + 1, ms + x[4] / 1e6)
        entry["Size Distribution"] = {k: [c, ms] for k, (c, ms) in dist.items()}
        out[t] = entry
    if not links and with_bw:
        _NO_LINKS.update(out)
    return out


def _time_info(e: dict) -> dict:
    tr, wt, sy, el = e["transit"] / 1e6, e["wait"] / 1e6, e["sync"] / 1e6, e["dur"] / 1e6
    return {"Start Timestamp(us)": e["start"] / 1000, "Elapse Time(ms)": el, "Transit Time(ms)": tr,
            "Wait Time(ms)": wt, "Synchronization Time(ms)": sy, "Idle Time(ms)": e["idle"] / 1e6,
            "Wait Time Ratio": round(wt / (wt + tr), 4) if wt + tr else 0,
            "Synchronization Time Ratio": round(sy / (sy + tr), 4) if sy + tr else 0}


def _communication(sim: _Sim, r: int, steps: list) -> tuple[dict, dict]:
    comm, matrix = {}, {}
    for step in steps:
        ops = [e for e in sim.at(r, step) if e["k"] == "comm"]
        sc, sm = {}, {}
        for kind in ("p2p", "collective"):
            sel = [e for e in ops if e["kind"] == kind]
            if not sel:
                continue
            entries, tot_links = {}, []
            tot = {k: 0.0 for k in ("Elapse Time(ms)", "Transit Time(ms)", "Wait Time(ms)",
                                    "Synchronization Time(ms)", "Idle Time(ms)")}
            per_link: dict = {}
            for e in sel:
                h = sim.hash[e["group"]]
                ti = _time_info(e)
                entries[f"{e['name']}@{h}"] = {"Communication Time Info": ti,
                                               "Communication Bandwidth Info": _bw_info(e["links"])}
                for k in tot:
                    tot[k] += ti[k]
                tot_links += e["links"]
                for src, dst, t, mb, ns in e["links"]:
                    per_link.setdefault((e["optype"].lower(), h), {}).setdefault(f"{src}-{dst}", []).append(
                        (mb, ns / 1e6, t, e["name"]))
            w_, t_, s_ = tot["Wait Time(ms)"], tot["Transit Time(ms)"], tot["Synchronization Time(ms)"]
            tot["Wait Time Ratio"] = round(w_ / (w_ + t_), 4) if w_ + t_ else 0
            tot["Synchronization Time Ratio"] = round(s_ / (s_ + t_), 4) if s_ + t_ else 0
            entries["Total Op Info"] = {"Communication Time Info": tot,
                                        "Communication Bandwidth Info": _bw_info(tot_links, with_bw=False)}
            sc[kind] = entries
            mat = {}
            for (optype, h), links in per_link.items():
                stats: dict = {}
                for lk, items in links.items():
                    items = sorted(items, key=lambda x: -x[0] / x[1])
                    picks = [("top1", items[0]), ("middle", items[len(items) // 2])]
                    picks += [(f"bottom{i}", items[-i]) for i in (1, 2, 3) if len(items) > i]
                    for stat, (mb, ms, t, name) in picks:
                        stats.setdefault(stat, {})[lk] = {"Transport Type": t, "Transit Size(MB)": mb,
                                                          "Transit Time(ms)": ms,
                                                          "Bandwidth(GB/s)": round(mb / ms, 4), "Op Name": name}
                    mb = sum(x[0] for x in items)
                    ms = sum(x[1] for x in items)
                    stats.setdefault("total", {})[lk] = {"Transport Type": items[0][2], "Transit Size(MB)": mb,
                                                         "Transit Time(ms)": ms, "Bandwidth(GB/s)": round(mb / ms, 4)}
                for stat in ("top1", "middle", "bottom1", "total", "bottom2", "bottom3"):
                    if stat in stats:
                        mat[f"{optype}-{stat}@{h}"] = stats[stat]
            sm[kind] = mat
        comm[f"step{step}"] = sc
        matrix[f"step{step}"] = sm
    return comm, matrix


def _csv(header: list[str], rows: list[list[str]]) -> str:
    return ",".join(header) + "\n" + "".join(",".join(r) + "\n" for r in rows)


def _kernel_csv(sim: _Sim, r: int, dev: int, with_dev: bool) -> str:
    header = ["Step Id", "Device_id", "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State",
              "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", "Block Dim", "Mix Block Dim",
              "HF32 Eligible", "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes",
              "Output Data Types", "Output Formats", "Context ID"]
    rows, prev_end = [], None
    for e in sorted(sim.events[r], key=lambda e: (e["start"], e["k"])):
        wait = "0" if prev_end is None else f"{max(0, e['start'] - prev_end) / 1000:.6f}"
        if e["k"] == "kernel":
            prev_end = e["start"] + e["dur"]
            n_in = e["ins"].count(";") + 1 if e["ins"] else 0
            q = (lambda s: f'"""{s}"""' if s else '""""""')
            mix = "24" if e["core"] == "MIX_AIC" else "0"
            rows.append([str(e["step"]), str(dev), "4294967295", str(e["task"]), "2", e["name"], e["type"],
                         "dynamic", e["core"], _us(e["start"]), f"{e['dur'] / 1000:.3f}", wait, str(e["block"]),
                         mix, "NO", q(e["ins"]), ";".join(["DT_BF16"] * max(n_in, 1)),
                         ";".join(["ND"] * max(n_in, 1)), q(e["outs"]), "DT_BF16", "ND", "N/A"])
        else:
            rows.append([str(e["step"]), str(dev), "4294967295", "N/A", "N/A", e["name"], f"hcom_{e['optype']}_",
                         "N/A", "COMMUNICATION", _us(e["start"]), f"{e['dur'] / 1000:.3f}", wait, "0"] +
                        ["N/A"] * 9)
    if not with_dev:
        header.pop(1)
        rows = [x[:1] + x[2:] for x in rows]
    return _csv(header, rows)


def _op_statistic(sim: _Sim, r: int, dev: int, with_dev: bool) -> str:
    agg: dict = {}
    for e in sim.events[r]:
        if e["k"] == "kernel":
            agg.setdefault((e["type"], e["core"]), []).append(e["dur"] / 1000)
    total = sum(sum(v) for v in agg.values())
    rows = []
    for (typ, core), d in sorted(agg.items(), key=lambda kv: -sum(kv[1])):
        rows.append(([str(dev)] if with_dev else []) + [typ, core, str(len(d)), f"{sum(d):.3f}", f"{min(d):.3f}",
                                                        f"{sum(d) / len(d):.3f}", f"{max(d):.3f}",
                                                        f"{100 * sum(d) / total:.3f}"])
    head = (["Device_id"] if with_dev else []) + ["OP Type", "Core Type", "Count", "Total Time(us)",
                                                  "Min Time(us)", "Avg Time(us)", "Max Time(us)", "Ratio(%)"]
    return _csv(head, rows)


def _memory(sim: _Sim, r: int, dev: int, peak_mib: float, with_dev: bool) -> tuple[str, str, str, float]:
    """memory_record (APP every 20 ms, PTA per micro-batch), npu_module_mem, operator_memory; the APP peak."""
    rng = sim.rng
    kern = [e for e in sim.events[r] if e["k"] == "kernel"]
    t0, t1 = kern[0]["start"] - 2_000_000, sim.end[r]
    # activation level: +1 per forward micro-batch, -1 per backward one
    level, marks = 0, []
    for e in kern:
        if e["type"] == "FlashAttentionScore":
            level += 1
        elif e["type"] == "FlashAttentionScoreGrad":
            level -= 1
        marks.append((e["start"] + e["dur"], max(level, 0)))
    top = max(1, max(x[1] for x in marks))
    app_base = peak_mib * 0.86

    mark_t = [tm for tm, _ in marks]
    ordered = all(a <= b for a, b in zip(mark_t, mark_t[1:]))   # kernels of a rank run one after another

    def app_at(t):
        if ordered:
            i = bisect.bisect_right(mark_t, t)
            lv = marks[i - 1][1] if i else 0
        else:
            lv = 0
            for tm, x in marks:
                if tm > t:
                    break
                lv = x
        return app_base + (peak_mib - app_base) * lv / top * (1 + rng.normal(0, 0.002))

    times = list(range(t0, t1, _APP_PERIOD_NS))
    vals = [app_at(t) for t in times]
    peak_t = max(marks, key=lambda x: x[1])[0]
    times.append(peak_t)
    vals.append(peak_mib)
    vals = [min(round(v * 64) / 64, round(peak_mib * 64) / 64) for v in vals]
    app = sorted(zip(times, vals))
    pta_res = round((peak_mib - 1800) * 64) / 64
    recs = [(t, "APP", ["", _num(v), ""]) for t, v in app]
    act_mib = (peak_mib - 1800 - 9000) / top
    for tm, lv in marks[::3]:
        alloc = round((9000 + act_mib * lv * 0.97) * 64) / 64
        recs.append((tm, "PTA", [_num(alloc), _num(pta_res), _num(alloc)]))
        recs.append((tm, "PTA+GE", [_num(alloc), _num(pta_res), _num(alloc)]))
    recs.sort(key=lambda x: (x[0], x[1]))
    mr = _csv(["Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)", "Total Active(MB)",
               "Stream Ptr", "Device Type"],
              [[c, _us(t)] + v + ["" if c == "APP" else "2", f"NPU:{dev}"] for t, c, v in recs])
    mods = [("SLOG", 158.65234375), ("APP", 11.5), ("HCCL", 1024.0 + 64 * dev), ("RUNTIME", 412.25),
            ("DEVMM", 96.0)]
    nrows = []
    for t in range(t0, t1, 250_000_000):
        for name, v in mods:
            nrows.append(([str(dev)] if with_dev else []) + [name, _us(t), _num(v), f"NPU:{dev}"])
    nm = _csv((["Device_id"] if with_dev else []) + ["Component", "Timestamp(us)", "Total Reserved(MB)", "Device"],
              nrows)
    orow = []
    by_step: dict = {}
    for e in kern:
        by_step.setdefault(e["step"], []).append(e)
    for step, ks in sorted(by_step.items()):
        a, b = ks[0]["start"], ks[-1]["start"]
        kb = act_mib * top * 1024 * 0.5
        orow.append(["aten::empty_strided", _num(round(kb, 3)), _us(a), _us(b), _us(b - 2480), f"{(b - a) / 1000:.3f}\t",
                     f"{(b - 2480 - a) / 1000:.3f}\t", _num(9000.0), _num(pta_res), _num(9000.0),
                     _num(9000.0 + kb / 1024), _num(pta_res), _num(9000.0 + kb / 1024), "2", f"NPU:{dev}"])
    om = _csv(["Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Active Release Time(us)",
               "Duration(us)", "Active Duration(us)", "Allocation Total Allocated(MB)",
               "Allocation Total Reserved(MB)", "Allocation Total Active(MB)", "Release Total Allocated(MB)",
               "Release Total Reserved(MB)", "Release Total Active(MB)", "Stream Ptr", "Device Type"], orow)
    return mr, nm, om, max(v for _, v in app)


def _info(spec: AscendSpec, r: int, sim: _Sim) -> dict:
    return {"config": {"common_config": {
        "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
        "schedule": {"wait": 0, "active": spec.steps, "warmup": 1, "repeat": 1, "skip_first": spec.first_step - 2},
        "record_shapes": True, "profile_memory": True, "with_stack": False, "with_flops": False,
        "with_modules": False},
        "experimental_config": {"_profiler_level": "Level1", "_aic_metrics": "ACL_AICORE_NONE", "_l2_cache": False,
                                "_msprof_tx": False, "_mstx": False, "_data_simplification": True,
                                "record_op_args": False, "_export_type": ["text"], "_host_sys": [],
                                "_op_attr": False, "_gc_detect_threshold": None, "_mstx_domain_include": [],
                                "_mstx_domain_exclude": [], "_sys_io": False, "_sys_interconnection": False}},
        "start_info": {"syscnt_enable": True, "freq": 100, "start_cnt": 470002538790308 + 1000 * r,
                       "start_monotonic": 4699801002845430 + 1000 * r},
        "end_info": {"collectionTimeEnd": sim.end[r] + 90_000_000, "MonotonicTimeEnd": 4699802061975030 + 1000 * r},
        "torch_npu_version": "2.7.1", "cann_version": "8.3.RC1", "rank_id": str(r)}


def _write(root: Path, rel: str, text: str, files: list) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    files.append(rel)


def write_ascend_run(root, spec: AscendSpec | None = None) -> dict:
    """Write the run under ``root`` and return its ground truth (JSON-serialisable)."""
    spec = spec or AscendSpec()
    lay = _validate(spec)
    rng = np.random.default_rng(spec.seed)
    sim = _Sim(spec, lay, rng)
    sim.run()
    root = Path(root)
    world, dp = lay["world"], lay["dp"]
    steps = [spec.first_step + i for i in range(spec.steps)]
    cap_mib = spec.device_memory_gb * 1e9 / 2 ** 20
    peaks = {r: cap_mib * (spec.memory_peak_ratio if r == spec.memory_near_capacity
                           else _MEM_FRAC * (1 + float(rng.normal(0, 0.01)))) for r in range(world)}
    files: list[str] = []
    gt_steps, gt_ranks = [], {}
    stage1 = (lambda r: lay["stage_of"][r] + 1) if spec.stages > 1 else (lambda r: None)
    for r in range(world):
        dev = r % spec.devices_per_host
        host = lay["names"][lay["host_of"][r]]
        d = f"{host}_{31000 + 17 * r}_{20251127122757000 + 3 * r}_ascend_pt"
        mine = {k: g for k, g in lay["groups"].items() if r in g[1]}
        meta = {"distributed_args": {"tensor_model_parallel_size": 1, "pipeline_model_parallel_size": spec.stages,
                                     "data_parallel_size": dp, "context_parallel_size": 1,
                                     "expert_model_parallel_size": 1, "sequence_parallel": False, "rank": r,
                                     "world_size": world},
                "ENV_VARIABLES": {"ASCEND_GLOBAL_LOG_LEVEL": "3", "HCCL_RDMA_TC": "", "HCCL_RDMA_SL": "",
                                  "PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "HCCL_ALGO": ""},
                "parallel_group_info": {k: {"group_name": n, "group_rank": rk.index(r), "global_ranks": rk}
                                        for k, (n, rk) in mine.items()}}
        _write(root, f"{d}/profiler_info_{r}.json", json.dumps(_info(spec, r, sim), indent=4), files)
        _write(root, f"{d}/profiler_metadata.json", json.dumps(meta), files)
        out = f"{d}/ASCEND_PROFILER_OUTPUT"
        head = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped", "Communication", "Free", "Stage",
                "Bubble", "Communication(Not Overlapped and Exclude Receive)", "Preparing"]
        rows = []
        for step in steps:
            v = _step_row(sim, r, step)
            rows.append(([str(dev)] if spec.device_id_column else []) + [str(step)] + [
                _num(v[k] / 1000) for k in ("computing", "cno", "overlapped", "comm", "free", "stage", "bubble",
                                            "cno_excl", "prep")])
            ops = [e for e in sim.at(r, step) if e["k"] == "comm"]
            ms = {k: v[k] / 1e6 for k in v}
            gt_steps.append({"rank": r, "step": step, "step_ms": ms["computing"] + ms["cno"] + ms["free"],
                             "computing_ms": ms["computing"], "comm_not_overlapped_ms": ms["cno"],
                             "overlapped_ms": ms["overlapped"], "comm_ms": ms["comm"], "free_ms": ms["free"],
                             "stage_ms": ms["stage"], "bubble_ms": ms["bubble"],
                             "comm_not_overlapped_exclude_receive_ms": ms["cno_excl"], "preparing_ms": ms["prep"],
                             "comm_elapse_ms": sum(e["dur"] for e in ops) / 1e6,
                             "comm_wait_ms": sum(e["wait"] for e in ops) / 1e6,
                             "comm_transit_ms": sum(e["transit"] for e in ops) / 1e6})
        _write(root, f"{out}/step_trace_time.csv",
               _csv((["Device_id"] if spec.device_id_column else []) + head, rows), files)
        comm, matrix = _communication(sim, r, steps)
        _write(root, f"{out}/communication.json", json.dumps(comm), files)
        _write(root, f"{out}/communication_matrix.json", json.dumps(matrix), files)
        _write(root, f"{out}/kernel_details.csv", _kernel_csv(sim, r, dev, spec.device_id_column), files)
        _write(root, f"{out}/op_statistic.csv", _op_statistic(sim, r, dev, spec.device_id_column), files)
        mr, nm, om, app_peak = _memory(sim, r, dev, peaks[r], spec.device_id_column)
        _write(root, f"{out}/memory_record.csv", mr, files)
        _write(root, f"{out}/npu_module_mem.csv", nm, files)
        _write(root, f"{out}/operator_memory.csv", om, files)
        flops = sum(e["flops"] for e in sim.events[r] if e["k"] == "kernel" and e["type"] == "MatMulV3")
        gt_ranks[r] = {"host": host, "device": dev, "stage": stage1(r), "dir": d,
                       "peak_mb": app_peak * 1.048576, "peak_ratio": app_peak * 1.048576 / (spec.device_memory_gb * 1e3),
                       "flops": flops, "compute_factor": sim.slow[r] * sim.work[r]}
    # links: matrix totals summed over steps and reporting ranks, global ranks
    links: dict = {}
    for r in range(world):
        for e in sim.events[r]:
            if e["k"] == "comm":
                g = lay["groups"][e["group"]][1]
                for src, dst, t, mb, ns in e["links"]:
                    if src != dst:
                        x = links.setdefault((g[src], g[dst], t), [0.0, 0.0])
                        x[0] += mb
                        x[1] += ns / 1e6
    anomalies = _anomalies(spec, lay, stage1)
    return {
        "format": "torch_npu Ascend profiler text export (*_ascend_pt)",
        "world_size": world, "ranks": list(range(world)), "steps": steps,
        "hosts": {r: gt_ranks[r]["host"] for r in range(world)},
        "devices": {r: gt_ranks[r]["device"] for r in range(world)},
        "stages": {r: gt_ranks[r]["stage"] for r in range(world)},
        "parallel": {"tp": 1, "pp": spec.stages, "dp": dp, "microbatches": sim.mb},
        "groups": {k: {"name": n, "ranks": rk, "hash": str(double_hash(k))} for k, (n, rk) in lay["groups"].items()},
        "options": {"device_memory_gb": spec.device_memory_gb},
        "cli_args": ["--device-memory-gb", repr(float(spec.device_memory_gb))],
        "capacity_note": "the Ascend files carry no device memory capacity: pass --device-memory-gb "
                         f"{spec.device_memory_gb:g} (options['device_memory_gb'])",
        "per_rank_step": gt_steps,
        "per_rank": gt_ranks,
        "links": [{"src": a, "dst": b, "transport": t, "size_mb": v[0], "time_ms": v[1],
                   "bandwidth_gbps": v[0] / v[1]} for (a, b, t), v in sorted(links.items())],
        "anomalies": anomalies,
        "files": sorted(files),
    }


def _anomalies(spec: AscendSpec, lay: dict, stage1) -> list[dict]:
    out = []

    def add(kind, ranks, links=(), stage=None, host=None):
        out.append({"kind": kind, "ranks": sorted(ranks), "links": [list(x) for x in links], "stage": stage,
                    "host": host, "finding_ids": ANOMALY_FINDINGS[kind]})

    world = lay["world"]
    if spec.slow_rank is not None:
        r = spec.slow_rank
        add("slow_rank", [r], stage=stage1(r), host=lay["names"][lay["host_of"][r]])
    if spec.launch_gaps is not None:
        r = spec.launch_gaps
        add("launch_gaps", [r], stage=stage1(r), host=lay["names"][lay["host_of"][r]])
    if spec.slow_host is not None:
        add("slow_host_data_loading", [r for r in range(world) if lay["host_of"][r] == spec.slow_host],
            host=lay["names"][spec.slow_host])
    if spec.slow_link is not None:
        a, b = (int(x) for x in spec.slow_link)
        same = lay["host_of"][a] == lay["host_of"][b]
        add("slow_link", [a, b], links=[(a, b)], host=lay["names"][lay["host_of"][a]] if same else None)
    if spec.pipeline_bubble:
        add("pipeline_bubble", [])   # run-wide: every stage waits between micro-batches
    if spec.memory_near_capacity is not None:
        r = spec.memory_near_capacity
        add("memory_near_capacity", [r], stage=stage1(r), host=lay["names"][lay["host_of"][r]])
    if spec.flops_imbalance is not None:
        if spec.stages > 1:
            s = spec.flops_imbalance
            add("flops_imbalance", [r for r in range(world) if lay["stage_of"][r] == s - 1], stage=s)
        else:
            r = spec.flops_imbalance
            add("flops_imbalance", [r], host=lay["names"][lay["host_of"][r]])
    return out
