"""Deterministic synthetic MindInsight cluster-profiler output with known ground truth.

The files follow the formats MindSpore's profiler writes and MindInsight's cluster pages read
(see ``research/mindinsight-cluster-profiling.md`` sections 1-3):

* ``step_trace_raw_{id}_detail_time.csv`` - 10 ns ticks, CRLF, steps 1..N plus a ``-`` average row
  (``np.mean`` of every column over the step rows, cast to int64, as MindSpore >= 2.2 does).
* ``ascend_cluster_analyse_{mode}_{stage_num}_{rank_size}_{id}.csv`` - ms rounded to 4 dp, one row per
  step, then the average row computed like MindSpore 2.0+ (mean over steps 2..N, step 1 excluded; with a
  single step the average row repeats step 1).
* ``hccl_raw_{id}.csv`` - MindSpore <= 2.1 ``HcclParser`` flavour: ms / KB / KB/s, link keys are
  group-local ``"src-dst"``, step link entries are element-wise sums over the operators (bandwidth
  included, as the real parser does), the ``-`` row is the element-wise mean over steps. The legacy
  layout writes the 4-column r1.3 variant (no ``communication_operator_cost``) unless ``hccl_operators``.
* ``flops_summary_{id}.json``, ``memory_usage_summary_{id}.json``, ``profiler_info_{id}.json``.

Everything is derived from one seeded ``numpy.random.Generator``; no clock, no environment, no
dict-order dependence, so the same spec always produces byte-identical files.

Injected anomalies (issue 8; all off by default, none draws random numbers, so runs without them are
byte-identical to the generator before they existed); the ground truth lists them under ``anomalies``:

* ``slow_rank`` (``slow_fp_bp``): the rank's fp+bp is multiplied; the ranks of its gradient group absorb
  the delay as wait in their first gradient AllReduce (its own wait is the shortest); with ``clean`` the
  other pipeline stages wait in their Receives instead (without it, in their AllReduces too).
* ``slow_host_data_loading`` (``slow_hosts``): every rank of the host gets a longer step interval.
* ``slow_link`` (``slow_links``): the link's bandwidth is scaled; ring AllReduces of its group take as
  long as their slowest link (the other ranks wait), a slow p2p link lengthens the receiver's Receive.
  hccl_raw names links by GROUP-LOCAL ranks, so the ground truth also gives ``local_link``.
* ``pipeline_bubble`` (``pipeline_bubble``): extra receive wait inside fp+bp on every rank.
* ``memory_near_capacity`` (``memory_peaks``): the rank's ``peak_mem`` = share x ``capacity``.
* ``flops_imbalance`` (``heavy_stages``): the stage does x FLOPs and x compute; the other stages wait
  for it in their Receives.
* ``exposed_communication`` (``exposed_comm``): the stage's gradient AllReduces move x times the bytes at the
  same bandwidth (larger unsharded layers, unfused gradients), all after backward, so none of it is hidden.

``warmup`` multiplies step 1's fp+bp (graph compilation). reportgen labels a first step that takes more than
2x the later steps warm-up and leaves it out of its averages (the clean preset needs ``warmup`` >= ~2.2); the
default 1.06 is not a warm-up step.

``clean=True`` (see :meth:`MindInsightSpec.clean_run`) balances the stages (equal FLOPs and memory),
halves the fp+bp noise, uses >= 16 MiB collectives (mirror AllReduces included) paced by the ring's
slowest transport, and 4 MiB activations, so that reportgen raises no finding at all.
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["MindInsightSpec", "write_mindinsight_run", "TICKS_PER_MS"]

#: Step-trace ticks per millisecond (system counter at 100 MHz, MindInsight ``PER_MS_SYSCNT``).
TICKS_PER_MS = 100_000

# ---------------------------------------------------------------------------------------------
# Model constants (ticks = 10 ns unless noted)
# ---------------------------------------------------------------------------------------------
_T0 = 1_162_400_000_000          # clock origin, like the real fixture (~1.16e12)
_IV_BASE = 150_000               # step interval (data loading wait): 1.5 ms
_MINDDATA_WAIT = 3_600_000       # added step interval of every rank with a dataset-pipeline bottleneck: 36 ms
_FB_BASE = 16_800_000            # forward + backward: 168 ms
#: the base forward+backward time in ms (shares of it size the injected delays)
FP_BP_BASE_MS = _FB_BASE / TICKS_PER_MS
_LEAD = 20_000                   # bp -> first gradient AllReduce
_GAP = 1_000                     # between gradient AllReduces
_END_GAP = 20_000                # last gradient AllReduce -> step end (optimizer update)
_MICRO = 4                       # pipeline micro-batches
_SDMA_BW = 25e9                  # bytes/s, intra-host link
_RDMA_BW = 12.5e9                # bytes/s, inter-host link
_LOCAL_BW = 100e9                # bytes/s, on-chip copy
_ACT_BYTES = 13_107_200          # activation / gradient tensor sent between stages (12.5 MiB)
_GRAD_BUCKETS = (50_331_648, 33_554_432, 33_554_432, 16_777_216)   # bytes per gradient AllReduce
_MIRROR_OPS = 8
_LATENCY = 200                   # ticks of fixed per-op link latency
_PEAK_GFLOPS = 1000 * 32 * 4096 * 2 / 1e3   # Ascend 910: 1000 MHz x 32 cores x 4096 x 2 -> GFLOPS
_FLOPS_PER_STEP = 12_000_000.0   # MFLOPs per device per step (stage 1)
_CAPACITY_BYTES = 31 * 2**30
_PROFILING_STOP = "2024-05-20 10:17:17"
_ANALYSE_END = "2024-05-20 10:27:17"

# noise slots per (rank, step): recv_prev 0-3, recv_next 4-7, send_next 8-11, send_prev 12-15,
# mirror AllReduce 16-23, gradient AllReduce 24-27
_SLOTS = 28


@dataclass
class MindInsightSpec:
    hosts: int = 2
    devices_per_host: int = 8
    stages: int = 2                 # 1 => data-parallel; >1 => pipeline-parallel
    steps: int = 5
    seed: int = 0
    layout: str = "flat"            # "flat" | "legacy"
    host_names: list[str] | None = None
    slow_ranks: dict[int, float] = field(default_factory=dict)   # rank -> step-interval multiplier
    slow_fp_bp: dict[int, float] = field(default_factory=dict)   # rank -> fp+bp multiplier
    hostile_name: str | None = None
    with_hccl: bool = True
    #: write hccl_raw's communication_operator_cost column (None: the layout's default, absent in the legacy r1.3
    #: 4-column variant); the demo writes it so its report has per-operator links
    hccl_operators: bool | None = None
    with_flops: bool = True
    with_memory: bool = True
    memory_details: bool = False    # memory_usage_details_{id}.json too: memory per graph node (with_memory)
    with_profiler_info: bool = True
    # ---- issue 8: balanced preset and injected anomalies (defaults = off) ----------------------
    clean: bool = False             # balanced preset (see module docstring); use clean_run()
    micro_batches: int = 4          # pipeline micro-batches (Send/Receive ops per direction)
    slow_hosts: dict[int, float] = field(default_factory=dict)    # host index -> added step interval
                                                                   # (share of the base fp+bp, e.g. 0.15)
    slow_links: dict[tuple[int, int], float] = field(default_factory=dict)  # (src, dst) -> bandwidth share
    pipeline_bubble: float = 0.0    # added receive wait per step, share of the base fp+bp (stages >= 2)
    memory_peaks: dict[int, float] = field(default_factory=dict)  # rank -> peak_mem / capacity
    heavy_stages: dict[int, float] = field(default_factory=dict)  # stage (1-based) -> FLOPs/compute x
    exposed_comm: dict[int, float] = field(default_factory=dict)  # stage (1-based) -> gradient AllReduce bytes x
    warmup: float = 1.06            # step 1's fp+bp multiplier (compilation)
    # ---- issue 17: the dataset pipeline profile (minddata_pipeline_raw_<rank>.csv) ------------------------
    with_minddata: bool = False     # write the pipeline profile of every rank
    minddata_bottleneck: str | None = None   # "Map", "Batch", "Shuffle" or "ImageFolder": that op is slow

    @classmethod
    def clean_run(cls, **kw) -> "MindInsightSpec":
        """A run reportgen raises no finding on: 2 hosts x 4 devices, legacy layout (host names known),
        2 stages, 5 steps, 8 micro-batches, balanced; keyword arguments override (e.g. anomalies)."""
        base = dict(hosts=2, devices_per_host=4, stages=2, steps=5, layout="legacy", clean=True, micro_batches=8)
        base.update(kw)
        return cls(**base)


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------
def _host_ip(i: int) -> str:
    n = i + 1
    return f"10.0.{(n >> 8) & 255}.{n & 255}" if n > 254 else f"10.0.0.{n}"


def _device_ip(host: int, dev: int) -> str:
    return f"192.{100 + dev % 100}.{(host // 250) % 256}.{host % 250 + 1}"


def _validate(spec: MindInsightSpec) -> tuple[int, int, list[str]]:
    if spec.hosts < 1 or spec.devices_per_host < 1:
        raise ValueError("hosts and devices_per_host must be >= 1")
    world = spec.hosts * spec.devices_per_host
    if spec.stages < 1 or world % spec.stages:
        raise ValueError(f"stages={spec.stages} must be >= 1 and divide the world size {world}")
    if spec.steps < 1:
        raise ValueError("steps must be >= 1")
    if spec.layout not in ("flat", "legacy"):
        raise ValueError(f"layout must be 'flat' or 'legacy', not {spec.layout!r}")
    names = list(spec.host_names) if spec.host_names is not None else [f"host-{i}" for i in range(spec.hosts)]
    if len(names) != spec.hosts or len(set(names)) != len(names):
        raise ValueError("host_names must hold one unique name per host")
    for n in names:
        if not n or any(c.isspace() for c in n) or "/" in n or "\\" in n or n in (".", ".."):
            raise ValueError(f"host name {n!r} cannot be used as a directory / mapping-file entry")
    for label, d in (("slow_ranks", spec.slow_ranks), ("slow_fp_bp", spec.slow_fp_bp)):
        for r, m in d.items():
            if not (0 <= int(r) < world):
                raise ValueError(f"{label}: rank {r} outside 0..{world - 1}")
            if not m > 0:
                raise ValueError(f"{label}: multiplier for rank {r} must be > 0")
    if not 1 <= spec.micro_batches <= 64:
        raise ValueError("micro_batches must be in 1..64")
    for h, x in spec.slow_hosts.items():
        if not (0 <= int(h) < spec.hosts) or not x > 0:
            raise ValueError(f"slow_hosts: host {h} outside 0..{spec.hosts - 1} or share {x} not > 0")
    for r, x in spec.memory_peaks.items():
        if not (0 <= int(r) < world) or not 0 < x <= 1:
            raise ValueError(f"memory_peaks: rank {r} outside 0..{world - 1} or share {x} not in (0, 1]")
    for k, x in spec.heavy_stages.items():
        if spec.stages < 2 or not (1 <= int(k) <= spec.stages) or not x > 0:
            raise ValueError(f"heavy_stages: needs stages >= 2, stage {k} in 1..{spec.stages} and x > 0")
    for k, x in spec.exposed_comm.items():
        if not (1 <= int(k) <= spec.stages) or not 1 <= x <= 64:
            raise ValueError(f"exposed_comm: stage {k} outside 1..{spec.stages} or bytes multiplier {x} not in [1, 64]")
    if not 1 <= spec.warmup <= 100:
        raise ValueError("warmup must be in [1, 100]")
    if spec.pipeline_bubble < 0 or (spec.pipeline_bubble > 0 and spec.stages < 2):
        raise ValueError("pipeline_bubble must be >= 0 and needs stages >= 2")
    if spec.pipeline_bubble > 1.5:
        raise ValueError("pipeline_bubble must be <= 1.5")
    per = world // spec.stages
    for key, x in spec.slow_links.items():
        src, dst = (int(v) for v in key)
        k = dst // per
        ring = per > 1 and src == k * per + (dst - k * per - 1) % per
        p2p = src in (dst - per, dst + per) and 0 <= src < world
        if not (0 <= dst < world) or not (ring or p2p) or not 0 < x <= 1:
            raise ValueError(f"slow_links: {src}->{dst} is not a ring link of a stage group (predecessor -> "
                             f"rank) nor a pipeline p2p link, or share {x} not in (0, 1]")
    if spec.hostile_name is not None:
        h = spec.hostile_name
        if not h or "," in h or "\r" in h or "\n" in h:
            raise ValueError("hostile_name must be non-empty and contain no comma or line break")
    return world, world // spec.stages, names


def _csv_field(s: str) -> str:
    """Quote like csv.writer (QUOTE_MINIMAL, default dialect)."""
    if any(c in s for c in ',"\r\n'):
        return '"' + s.replace('"', '""') + '"'
    return s


def _csv_line(fields: list[str]) -> str:
    buf = io.StringIO()
    csv.writer(buf).writerow(fields)
    return buf.getvalue()


def _write(root: Path, rel: str, text: str, files: list[str]) -> None:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", encoding="utf-8", newline="") as f:
        f.write(text)
    files.append(rel)


def _stage_ops(stage: int, stages: int, hostile: str | None, micro: int = _MICRO) -> list[tuple[str, str, int]]:
    """Communication ops of one pipeline stage in column order: (name, kind, index)."""
    k = stage
    base = 600 + 3000 * (k - 1)
    ar_stream = 36 + 14 * (k - 1)
    ar_base = 4542 + 12918 * (k - 1)
    ops: list[tuple[str, str, int]] = []
    if stages > 1 and k > 1:
        ops += [(f"stream_11_{i}_Receive-op{base + 2000 + 131 * i}", "recv_prev", i) for i in range(micro)]
    if stages > 1 and k < stages:
        ops += [(f"stream_48_{i}_Receive-op{base + 63 + 131 * i}", "recv_next", i) for i in range(micro)]
    ops += [(f"stream_{ar_stream}_{j}_AllReduce-op{ar_base + j}", "mirror", j) for j in range(_MIRROR_OPS)]
    if stages > 1 and k < stages:
        ops += [(f"stream_49_{i}_Send-op{base + 10 + 127 * i}", "send_next", i) for i in range(micro)]
    if stages > 1 and k > 1:
        ops += [(f"stream_12_{i}_Send-op{base + 2600 + 127 * i}", "send_prev", i) for i in range(micro)]
    grads = [(f"stream_{ar_stream + 1}_{j}_AllReduce-op{ar_base + _MIRROR_OPS + j}", "grad", j)
             for j in range(len(_GRAD_BUCKETS))]
    if hostile is not None:
        grads[0] = (hostile, "grad", 0)
    return ops + grads


_SLOT_BASE = {"recv_prev": 0, "recv_next": 4, "send_next": 8, "send_prev": 12, "mirror": 16, "grad": 24}
_CLEAN_GRAD_BUCKETS = (16_777_216,) * 4   # clean preset: 4 x 16 MiB gradient AllReduces
_CLEAN_MIRROR_BYTES = 16_777_216
_CLEAN_ACT_BYTES = 4_194_304


def _link_entry(kind: str, t_ticks: int, size_bytes: float, rdma_wait_ticks: int = 0) -> list:
    t_ms = t_ticks / TICKS_PER_MS
    kb = size_bytes / 1e3
    bw = kb / (t_ms / 1e3) if t_ms else 0
    if kind == "RDMA":
        return [t_ms, kb, bw, rdma_wait_ticks / TICKS_PER_MS]
    return [t_ms, kb, bw]


def _add_links(acc: dict, links: dict) -> None:
    for key, per_type in links.items():
        dst = acc.setdefault(key, {})
        for typ, vals in per_type.items():
            cur = dst.get(typ)
            dst[typ] = list(vals) if cur is None else [a + b for a, b in zip(cur, vals)]


def _mean_links(rows: list[dict]) -> dict:
    out: dict = {}
    n = len(rows)
    for links in rows:
        _add_links(out, links)
    return {k: {t: [x / n for x in v] for t, v in per.items()} for k, per in out.items()}


# ---------------------------------------------------------------------------------------------
# main entry point
# ---------------------------------------------------------------------------------------------
#: the generated dataset pipeline, root first: (op_id, op_type, workers, children)
_MINDDATA_OPS = [(0, "Batch", 4, [1]), (1, "Map", 8, [2]), (2, "Shuffle", 1, [3]), (3, "ImageFolder", 8, [])]


def _minddata_csv(bottleneck: str | None) -> str:
    """minddata_pipeline_raw_<rank>.csv (MindSpore's MinddataPipelineParser columns). Clean: every queue nearly full
    (the pipeline keeps ahead of the device). With a bottleneck op: the queues below it full, its own and those above
    it nearly empty."""
    names = [o[1] for o in _MINDDATA_OPS]
    if bottleneck is not None and bottleneck not in names:
        raise ValueError(f"minddata_bottleneck: one of {names}")
    at = names.index(bottleneck) if bottleneck else None
    lines = ["op_id,op_type,num_workers,output_queue_size,output_queue_average_size,output_queue_length,"
             "output_queue_usage_rate,sample_interval,parent_id,children_id"]
    for op_id, op_type, workers, children in _MINDDATA_OPS:
        usage = 0.9 if at is None or op_id > at else 0.04
        cap = 64
        avg = round(usage * cap, 3)
        parent = op_id - 1 if op_id > 0 else -1
        lines.append(f'{op_id},{op_type},{workers},"[{avg}, {avg}]",{avg},{cap},{usage},10,{parent},'
                     f'"{children}"')
    return "\r\n".join(lines) + "\r\n"


#: CPU (percent of one core, user + sys) of each pipeline op in a generated summary: the bottleneck op works its
#: workers hard (92% each, above MindSpore's 75% per-worker limit), the others idle at 30% per worker
_MINDDATA_CPU_BUSY, _MINDDATA_CPU_IDLE = 92.0, 30.0
#: batches of a generated device-queue profile, and its capacity
MINDDATA_BATCHES, MINDDATA_QUEUE_CAPACITY = 40, 16


def _minddata_summary(bottleneck: str | None) -> dict:
    """minddata_pipeline_summary_<rank>.json (MindSpore's MinddataProfilingAnalyzer keys), consistent with
    :func:`_minddata_csv`: the bottleneck op's workers are busy, its output queue is empty."""
    names = [o[1] for o in _MINDDATA_OPS]
    at = names.index(bottleneck) if bottleneck else None
    ids = [o[0] for o in _MINDDATA_OPS]
    use = [0.9 if at is None or i > at else 0.04 for i in ids]
    per_worker = [_MINDDATA_CPU_BUSY if i == at else _MINDDATA_CPU_IDLE for i in ids]
    workers = [o[2] for o in _MINDDATA_OPS]
    doc = {"pipeline_ops": [f"{n}(id={i})" for i, n in zip(ids, names)], "op_names": names, "op_ids": ids,
           "num_workers": workers, "queue_average_size": [round(u * 64, 2) for u in use],
           "queue_utilization_pct": [round(100 * u, 2) for u in use],
           "queue_empty_freq_pct": [70.0 if u < 0.5 else 0.0 for u in use],
           "children_ids": [o[3] for o in _MINDDATA_OPS], "parent_id": [i - 1 if i > 0 else -1 for i in ids],
           "avg_cpu_pct": [round(c * w, 2) for c, w in zip(per_worker, workers)],
           "per_batch_time": [12.5 if at is None else 48.0], "per_pipeline_time": [3.1 if at is None else 40.2],
           "per_push_queue_time": [1.2], "avg_cpu_pct_per_worker": per_worker}
    if at is not None:
        doc["cpu_analysis_details"] = [f"{doc['pipeline_ops'][at]} is using {per_worker[at]}% CPU per worker."]
        doc["bottleneck_warning"] = [doc["pipeline_ops"][at]]
        doc["bottleneck_suggestion"] = [f"{doc['pipeline_ops'][at]} has high CPU utilization per worker of "
                                        f"{per_worker[at]}% Try increasing num_parallel_workers above {workers[at]}."]
    return doc


def _summary_csv(doc: dict) -> str:
    """The CSV form MindSpore writes beside the JSON: one row per key, the key then its values."""
    import csv
    import io

    out = io.StringIO()
    w = csv.writer(out)
    for key, vals in doc.items():
        w.writerow([key] + list(vals))
    return out.getvalue()


def minddata_queue_sizes(bottleneck: str | None) -> list[int]:
    """The device queue's size when each batch (2..) was taken: full-ish when the pipeline keeps ahead, empty on 3 of
    4 batches with a bottleneck (the device waits for the host)."""
    cap = MINDDATA_QUEUE_CAPACITY
    return [(0 if b % 4 else 2) if bottleneck else cap - 1 - b % 3 for b in range(2, MINDDATA_BATCHES + 1)]


def _device_queue_txt(bottleneck: str | None) -> str:
    """device_queue_profiling_<rank>.txt: per batch a queue-size record and the three time records (ms), batch 1
    included (the reader leaves it out, as MindSpore)."""
    lines, ts = [], 1_700_000_000_000
    sizes = [MINDDATA_QUEUE_CAPACITY] + minddata_queue_sizes(bottleneck)
    for b, size in enumerate(sizes, start=1):
        ts += 48 if bottleneck else 12
        lines += [f"1 {MINDDATA_QUEUE_CAPACITY} {b} {size} {ts}", f"0 0 {b} {40 if bottleneck else 3} {ts}",
                  f"0 1 {b} 1 {ts}", f"0 2 {b} {48 if bottleneck else 12} {ts}"]
    return "\n".join(lines) + "\n"


def _dataset_csv() -> str:
    """dataset_<rank>.csv (Operation, Stage, Occurrences, Avg. time(us), Custom Info)."""
    return ("Operation,Stage,Occurrences,Avg. time(us),Custom Info\r\n"
            f"Pipeline,GetNext,{MINDDATA_BATCHES},850.5,\r\n"
            f"ImageFolder,Read,{MINDDATA_BATCHES * 32},120.25,num_parallel_workers=8\r\n")


#: nodes of the generated graph's forward and of its backward pass (memory_usage_details)
_DETAIL_NODES = 64


def _memory_details(static_b: int, act_b: int) -> dict:
    """One graph's memory in use per node (GiB, as MindSpore's MemoryUsageParser writes it): static memory, then
    activations kept through the forward pass (rising to the peak at its last node) and freed through the backward
    pass; ``fp_start`` / ``bp_end`` mark the first forward and the last backward node."""
    n = _DETAIL_NODES
    fw = [(static_b + act_b * (i + 1) / n) / 2**30 for i in range(n)]
    bw = [(static_b + act_b * (n - 1 - i) / n) / 2**30 for i in range(n)]
    return {"0": {"lines": [round(v, 9) for v in fw + bw], "fp_start": 0, "bp_end": 2 * n - 1,
                  "static_mem": static_b / 2**30}}


def write_mindinsight_run(root: str | Path, spec: MindInsightSpec) -> dict:
    """Write the run under root (created if needed); return the ground truth."""
    world, per_stage, names = _validate(spec)
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    S, N, dph = spec.stages, spec.steps, spec.devices_per_host
    mode = "pipeline-parallel" if S > 1 else "data-parallel"
    legacy = spec.layout == "legacy"

    host_of = np.arange(world) // dph
    slow_iv = np.ones(world)
    slow_fb = np.ones(world)
    for r, m in spec.slow_ranks.items():
        slow_iv[int(r)] = float(m)
    for r, m in spec.slow_fp_bp.items():
        slow_fb[int(r)] = float(m)
    clean = spec.clean
    micro = spec.micro_batches
    per_stage = world // S
    stage_of = np.arange(world) // per_stage + 1
    heavy = np.ones(world)                                          # FLOPs / compute multiplier
    for k, m in spec.heavy_stages.items():
        heavy[stage_of == int(k)] = float(m)
    rwait = np.rint(spec.pipeline_bubble * _FB_BASE + (heavy.max() - heavy) * _FB_BASE).astype(np.int64)
    iv_extra = np.zeros(world, dtype=np.int64)
    for h, x in spec.slow_hosts.items():
        iv_extra[host_of == int(h)] = int(round(float(x) * _FB_BASE))
    link_fac = {(int(a), int(b)): float(x) for (a, b), x in spec.slow_links.items()}
    mem_peak = {int(r): float(x) for r, x in spec.memory_peaks.items()}
    grad_buckets = _CLEAN_GRAD_BUCKETS if clean else _GRAD_BUCKETS
    comm_mul = {int(k): float(x) for k, x in spec.exposed_comm.items()}
    act_bytes = _CLEAN_ACT_BYTES if clean else _ACT_BYTES

    rng = np.random.default_rng(spec.seed)
    t0 = _T0 + int(rng.integers(0, 50_000_000))
    skew = rng.integers(-1500, 1501, size=world)
    step_jit = np.clip(rng.normal(0.0, 0.008, size=N), -0.025, 0.025)
    n_iv = np.clip(rng.standard_normal((world, N)), -3, 3)
    n_fb = np.clip(rng.standard_normal((world, N)), -3, 3)
    n_flops = np.clip(rng.standard_normal(world), -3, 3)
    n_mem = np.clip(rng.standard_normal(world), -3, 3)

    iv = np.rint(_IV_BASE * (1 + 0.03 * n_iv) * slow_iv[:, None]).astype(np.int64)
    if iv_extra.any():
        iv = iv + iv_extra[:, None]
    if spec.minddata_bottleneck:  # a slow dataset pipeline makes every rank wait for its batch (the queue is empty)
        iv = iv + _MINDDATA_WAIT
    warm = np.ones(N)
    warm[0] = spec.warmup
    fb_sd = 0.002 if clean else 0.004
    fb_mul = slow_fb * heavy if (heavy != 1).any() else slow_fb
    fb = np.rint(_FB_BASE * (1 + step_jit)[None, :] * warm[None, :] * (1 + fb_sd * n_fb)
                 * fb_mul[:, None]).astype(np.int64)
    if rwait.any():
        fb = fb + rwait[:, None]                                    # receive wait inside fp..bp

    # ---- pass 1, per stage: op noise and minimum tail (gradient AllReduce transfer) ----------
    stage_data = []
    for k in range(1, S + 1):
        ranks = np.arange((k - 1) * per_stage, k * per_stage)
        nz = np.clip(rng.standard_normal((per_stage, N, _SLOTS)), -3, 3)
        nz2 = np.clip(rng.standard_normal((per_stage, N, _SLOTS)), -3, 3)
        G = per_stage
        prev = np.roll(ranks, 1)                                    # ring predecessor
        ring_rdma = host_of[prev] != host_of[ranks]
        own_bw = np.where(ring_rdma, _RDMA_BW, _SDMA_BW)
        group_bw = _RDMA_BW if ring_rdma.any() else _SDMA_BW
        if clean:
            own_bw = np.full(G, float(group_bw))                    # the ring moves at its slowest transport's pace
        ring_fac = np.array([link_fac.get((int(a), int(b)), 1.0) for a, b in zip(prev, ranks)]) if G > 1 \
            else np.ones(G)
        slowed = bool((ring_fac != 1).any())
        if slowed:
            own_bw = own_bw * ring_fac
        grad_dur, grad_link, grad_local = [], [], []
        buckets = grad_buckets if k not in comm_mul else tuple(int(round(b * comm_mul[k])) for b in grad_buckets)
        for j, size in enumerate(buckets):
            f = 1 + 0.02 * nz[:, :, _SLOT_BASE["grad"] + j]
            traffic = 2 * (G - 1) / G * size
            local = np.rint((size / G) / (_LOCAL_BW / 1e8) * f + _LATENCY).astype(np.int64)
            if G > 1:
                link = np.rint(traffic / (own_bw[:, None] / 1e8) * f + _LATENCY).astype(np.int64)
                group = np.rint(traffic / (group_bw / 1e8) * f + _LATENCY).astype(np.int64)
                if slowed:                                          # a ring is as slow as its slowest link
                    group = np.maximum(group, link.max(axis=0)[None, :])
            else:
                link = np.zeros((G, N), dtype=np.int64)
                group = link
            grad_dur.append(group + local)
            grad_link.append(link)
            grad_local.append(local)
        tail_min = _LEAD + sum(grad_dur) + _GAP * (len(grad_buckets) - 1) + _END_GAP
        stage_data.append(dict(k=k, ranks=ranks, nz=nz, nz2=nz2, prev=prev, ring_rdma=ring_rdma,
                               grad_dur=grad_dur, grad_link=grad_link, grad_local=grad_local,
                               tail_min=tail_min, own_bw=own_bw, buckets=buckets))

    need = iv + fb + np.concatenate([sd["tail_min"] for sd in stage_data], axis=0)
    D = need.max(axis=0)                                            # synchronous step length
    rw_all = np.broadcast_to(rwait[:, None], (world, N))
    if clean and S > 1:     # a stage that is done early waits in its Receives, not in its own collectives
        add = np.repeat(D[None, :] - need.reshape(S, per_stage, N).max(axis=1), per_stage, axis=0)
        fb, rw_all = fb + add, rw_all + add
    E = np.concatenate([[t0], t0 + np.cumsum(D)])                   # nominal step ends

    # ---- per-rank layout ------------------------------------------------------------------
    if legacy:
        def prof_dir(r: int) -> str:
            return f"cluster_profiler/{names[r // dph]}/profiler"
    else:
        def prof_dir(r: int) -> str:
            return "profiler"

    def file_id(r: int) -> int:
        return r % dph if legacy else r

    files: list[str] = []
    truth_steps: list[dict] = []
    truth_avg: dict[int, dict] = {}
    overlap_steps: list[dict] = []
    overlap_avg: dict[int, dict] = {}
    hccl_avg: dict[int, dict] = {}
    flops_truth: dict[int, dict] = {}
    mem_truth: dict[int, dict] = {}
    ops_by_stage: dict[int, list[str]] = {}
    steps_list = list(range(1, N + 1))

    for sd in stage_data:
        k, ranks, nz, nz2 = sd["k"], sd["ranks"], sd["nz"], sd["nz2"]
        n = len(ranks)
        ops = _stage_ops(k, S, spec.hostile_name, micro)
        ops_by_stage[k] = [o[0] for o in ops]
        sk = skew[ranks][:, None]
        ivk, fbk = iv[ranks], fb[ranks]
        end = E[None, 1:] + sk
        fp = E[None, :-1] + sk + ivk
        start = np.concatenate([fp[:, :1], end[:, :-1]], axis=1)   # step 1 starts at fp
        bp = fp + fbk
        total = end - start
        iv_rec = fp - start
        tail = end - bp
        extra = tail - sd["tail_min"]

        # receive wait (bubble): forward Receives of the last stage, backward ones of the first, halves between
        rw = rw_all[ranks]
        share_prev = 0.0 if k == 1 else (1.0 if k == S else 0.5)
        rw_prev = np.rint(rw * share_prev).astype(np.int64)
        rw_next = rw - rw_prev
        w_prev, w_next = rw_prev // micro, rw_next // micro        # per Receive op
        fbc = fbk - rw                                              # computation part of fp+bp
        fwd = fbc // 3
        bwd = fbc - fwd
        m_fwd = fwd // micro
        m_bwd = bwd // micro
        s_fwd, s_bwd = m_fwd + w_prev, m_bwd + w_next                # micro-batch stride on the timeline
        bwd0 = fwd + rw_prev                                         # backward phase start (from fp)

        # p2p links (pipeline): previous / next stage peer with the same in-stage index
        peer_prev_rdma = host_of[ranks - per_stage] != host_of[ranks] if k > 1 else np.zeros(n, bool)
        peer_next_rdma = (host_of[(ranks + per_stage) % world] != host_of[ranks]) if k < S else np.zeros(n, bool)
        fac_prev = np.array([link_fac.get((int(r) - per_stage, int(r)), 1.0) for r in ranks])
        fac_next = np.array([link_fac.get((int(r) + per_stage, int(r)), 1.0) for r in ranks])
        if clean and n > 1:                                          # mirror AllReduces: 16 MiB each
            m_traffic = 2 * (n - 1) / n * _CLEAN_MIRROR_BYTES
            m_local = (_CLEAN_MIRROR_BYTES / n) / (_LOCAL_BW / 1e8) + _LATENCY

        op_dur: list[np.ndarray] = []
        op_start: list[np.ndarray] = []
        op_cost: list[np.ndarray] = []      # link ticks counted as communication (hccl)
        recv_sum = np.zeros((n, N), dtype=np.int64)
        grad_sum = np.zeros((n, N), dtype=np.int64)
        cursor = bp + _LEAD
        mirror_own: dict[int, np.ndarray] = {}
        for name, kind, i in ops:
            slot = (_SLOT_BASE[kind] + i) % _SLOTS
            f = 1 + 0.02 * nz[:, :, slot]
            if kind in ("recv_prev", "recv_next"):
                rdma = peer_prev_rdma if kind == "recv_prev" else peer_next_rdma
                bw = np.where(rdma, _RDMA_BW, _SDMA_BW)[:, None] / 1e8
                fac = fac_prev if kind == "recv_prev" else fac_next
                if (fac != 1).any():
                    bw = bw * fac[:, None]
                xfer = np.rint(act_bytes / bw * f + _LATENCY).astype(np.int64)
                if kind == "recv_prev" and i == 0:
                    wait = 0.5 * m_fwd * (k - 1) / (S - 1) * (1 + 0.03 * nz2[:, :, slot])
                elif kind == "recv_prev":
                    wait = np.maximum(8_000 * (1 + 0.3 * nz2[:, :, slot]), 500)
                else:
                    wait = np.maximum(20_000 * (1 + 0.3 * nz2[:, :, slot]), 500)
                dur = xfer + np.rint(wait).astype(np.int64) + (w_prev if kind == "recv_prev" else w_next)
                st = (fp + i * s_fwd + 1_000) if kind == "recv_prev" else (fp + bwd0 + i * s_bwd + 1_000)
                cost = xfer
                recv_sum += dur
            elif kind in ("send_next", "send_prev"):
                dur = np.rint(np.maximum(6_000 * (1 + 0.2 * nz[:, :, slot]), 1_000)).astype(np.int64)
                st = (fp + (i + 1) * s_fwd - 60_000) if kind == "send_next" else (fp + bwd0 + (i + 1) * s_bwd - 60_000)
                cost = np.zeros((n, N), dtype=np.int64)
            elif kind == "mirror" and clean:
                if n > 1:
                    own = np.rint(m_traffic / (sd["own_bw"][:, None] / 1e8) * f + _LATENCY).astype(np.int64)
                    loc_t = np.rint(m_local * f).astype(np.int64)
                    cost = own + loc_t
                    dur = cost.max(axis=0)[None, :] \
                        + np.rint(np.maximum(2_000 * (1 + 0.15 * nz2[:, :, slot]), 500)).astype(np.int64)
                else:
                    own = np.zeros((n, N), dtype=np.int64)
                    cost = np.rint(_CLEAN_MIRROR_BYTES / (_LOCAL_BW / 1e8) * f + _LATENCY).astype(np.int64)
                    dur = cost + 500
                mirror_own[i] = own
                st = np.rint(fp + 0.02 * fbk + i * (0.9 / _MIRROR_OPS) * fbk).astype(np.int64)
            elif kind == "mirror":
                dur = np.rint(np.maximum(15_000 * (1 + 0.15 * nz[:, :, slot]), 2_000)).astype(np.int64)
                st = fp + 0.02 * fbk + i * 60_000
                st = np.rint(st).astype(np.int64)
                cost = np.minimum(np.int64(2 * _LATENCY + 60), dur)
                cost = np.broadcast_to(cost, (n, N))
            else:  # grad
                dur = sd["grad_dur"][i] + (extra if i == 0 else 0)
                st = cursor
                cursor = st + dur + _GAP
                cost = np.minimum(sd["grad_link"][i] + sd["grad_local"][i], dur)
                grad_sum += dur
            op_dur.append(np.asarray(dur, dtype=np.int64))
            op_start.append(np.asarray(st, dtype=np.int64))
            op_cost.append(np.asarray(cost, dtype=np.int64))

        # ---- step trace -------------------------------------------------------------------
        cols = [start, end, total, fp, bp, iv_rec, fbk, tail]
        for d, s0 in zip(op_dur, op_start):
            cols += [d, s0, s0 + d]
        arr = np.stack(cols, axis=2)                               # (n, N, C)
        avg = arr.mean(axis=1).astype(np.int64)                    # (n, C)
        header_fields = ["step_num", "start_point", "end_point", "total", "fp_point", "bp_point",
                         "iteration_interval", "fp_and_bp", "tail"]
        for name, _, _ in ops:
            header_fields += [name, f"{name}_start_point", f"{name}_end_point"]
        header = _csv_line(header_fields)
        arr_l = arr.tolist()
        avg_l = avg.tolist()
        for li, r in enumerate(ranks.tolist()):
            lines = [header]
            for s in range(N):
                lines.append(f"{s + 1}," + ",".join(map(str, arr_l[li][s])) + "\r\n")
            lines.append("-," + ",".join(map(str, avg_l[li])) + "\r\n")
            _write(root, f"{prof_dir(r)}/step_trace_raw_{file_id(r)}_detail_time.csv", "".join(lines), files)
            for s in range(N):
                row = arr_l[li][s]
                truth_steps.append({"rank": r, "step": s + 1, "step_ms": row[2] / TICKS_PER_MS,
                                    "step_interval_ms": row[5] / TICKS_PER_MS,
                                    "fp_bp_ms": row[6] / TICKS_PER_MS, "tail_ms": row[7] / TICKS_PER_MS})
            a = avg_l[li]
            truth_avg[r] = {"step_ms": a[2] / TICKS_PER_MS, "step_interval_ms": a[5] / TICKS_PER_MS,
                            "fp_bp_ms": a[6] / TICKS_PER_MS, "tail_ms": a[7] / TICKS_PER_MS}

        # ---- cluster analyse (overlap) -------------------------------------------------------
        comm_alone = recv_sum + grad_sum
        m_comm = comm_alone / TICKS_PER_MS
        m_recv = recv_sum / TICKS_PER_MS
        m_coll = grad_sum / TICKS_PER_MS
        m_comp = (total - comm_alone) / TICKS_PER_MS
        m_stage = (total - recv_sum) / TICKS_PER_MS
        if S > 1:
            metrics = [m_comp, m_comm, m_stage, m_recv, m_coll]
            keys = ["computation_ms", "comm_alone_ms", "stage_ms", "receive_alone_ms", "collective_comm_alone_ms"]
            ca_header = ("computation_time,communication_alone_time,stage_time,receive_alone_time,"
                         "collective_communication_alone_time\r\n")
        else:
            metrics = [m_comp, m_comm]
            keys = ["computation_ms", "comm_alone_ms"]
            ca_header = "computation_time,communication_alone_time\r\n"
        met = np.stack(metrics, axis=2)                            # (n, N, M)
        met_avg = met[:, 1:, :].mean(axis=1) if N > 1 else met[:, 0, :]
        met_l = met.tolist()
        met_avg_l = met_avg.tolist()
        for li, r in enumerate(ranks.tolist()):
            lines = [ca_header]
            for s in range(N):
                vals = [round(v, 4) for v in met_l[li][s]]
                lines.append(",".join(map(str, vals)) + "\r\n")
                overlap_steps.append({"rank": r, "step": s + 1, **dict(zip(keys, vals))})
            vals = [round(v, 4) for v in met_avg_l[li]]
            lines.append(",".join(map(str, vals)) + "\r\n")
            overlap_avg[r] = dict(zip(keys, vals))
            _write(root, f"{prof_dir(r)}/ascend_cluster_analyse_{mode}_{S}_{world}_{file_id(r)}.csv",
                   "".join(lines), files)

        # ---- hccl_raw -----------------------------------------------------------------------
        if spec.with_hccl:
            dur_l = [d.tolist() for d in op_dur]
            cost_l = [c.tolist() for c in op_cost]
            glink_l = [g.tolist() for g in sd["grad_link"]]
            mirror_l = {i: m.tolist() for i, m in mirror_own.items()}
            ring_rdma = sd["ring_rdma"].tolist()
            hdr = "step_num,communication_cost,wait_cost,link_info"
            op_col = (not legacy) if spec.hccl_operators is None else spec.hccl_operators
            hdr += ",communication_operator_cost\r\n" if op_col else "\r\n"
            for li, r in enumerate(ranks.tolist()):
                loc = li                                            # group-local index in the stage group
                ring_key = f"{(loc - 1) % n}-{loc}"
                self_key = f"{loc}-{loc}"
                ring_type = "RDMA" if ring_rdma[li] else "SDMA"
                step_rows = []
                for s in range(N):
                    op_costs: dict = {}
                    step_links: dict = {}
                    c_sum = 0.0
                    w_sum = 0.0
                    for oi, (name, kind, i) in enumerate(ops):
                        d_t = dur_l[oi][li][s]
                        c_t = cost_l[oi][li][s]
                        if kind in ("send_next", "send_prev"):
                            cost, wait, links = 0, d_t / TICKS_PER_MS, {}
                        elif kind in ("recv_prev", "recv_next"):
                            rdma = bool(peer_prev_rdma[li] if kind == "recv_prev" else peer_next_rdma[li])
                            key = "0-1" if kind == "recv_prev" else "1-0"
                            typ = "RDMA" if rdma else "SDMA"
                            links = {key: {typ: _link_entry(typ, c_t, act_bytes, c_t // 20)}}
                            cost = c_t / TICKS_PER_MS
                            wait = (d_t - c_t) / TICKS_PER_MS
                        elif kind == "mirror" and clean:
                            size = _CLEAN_MIRROR_BYTES
                            lt = mirror_l[i][li][s]
                            links = {}
                            if n > 1:
                                links[ring_key] = {ring_type: _link_entry(ring_type, lt, 2 * (n - 1) / n * size, lt // 20)}
                            links[self_key] = {"SDMA": _link_entry("SDMA", c_t - lt, size / n)}
                            cost = c_t / TICKS_PER_MS
                            wait = (d_t - c_t) / TICKS_PER_MS
                        elif kind == "mirror":
                            size = 4096 * (1 + i % 3)
                            if n > 1:
                                lt = min(_LATENCY + 30, c_t)
                                links = {ring_key: {ring_type: _link_entry(ring_type, lt, 2 * (n - 1) / n * size, lt // 20)},
                                         self_key: {"SDMA": _link_entry("SDMA", c_t - lt, size / n)}}
                            else:
                                links = {self_key: {"SDMA": _link_entry("SDMA", c_t, size)}}
                            cost = c_t / TICKS_PER_MS
                            wait = (d_t - c_t) / TICKS_PER_MS
                        else:  # grad
                            size = sd["buckets"][i]
                            lt = min(glink_l[i][li][s], c_t)
                            lo = c_t - lt
                            links = {}
                            if n > 1:
                                links[ring_key] = {ring_type: _link_entry(ring_type, lt, 2 * (n - 1) / n * size, lt // 20)}
                            links[self_key] = {"SDMA": _link_entry("SDMA", lo, size / n)}
                            cost = c_t / TICKS_PER_MS
                            wait = (d_t - c_t) / TICKS_PER_MS
                        op_costs[name] = [str(s + 1), cost, wait, links]
                        _add_links(step_links, links)
                        c_sum += cost
                        w_sum += wait
                    step_rows.append((c_sum, w_sum, step_links, op_costs))
                # '-' row: element-wise mean over the steps
                m_c = sum(x[0] for x in step_rows) / N
                m_w = sum(x[1] for x in step_rows) / N
                m_links = _mean_links([x[2] for x in step_rows])
                m_ops = {}
                for name, _, _ in ops:
                    per = [x[3][name] for x in step_rows]
                    m_ops[name] = ["-", sum(p[1] for p in per) / N, sum(p[2] for p in per) / N,
                                   _mean_links([p[3] for p in per])]
                lines = [hdr]
                for s, (c, w, lk, oc) in enumerate(step_rows + [(m_c, m_w, m_links, m_ops)]):
                    tag = str(s + 1) if s < N else "-"
                    row = f"{tag},{c!r},{w!r},{_csv_field(json.dumps(lk))}"
                    if op_col:
                        row += "," + _csv_field(json.dumps(oc))
                    lines.append(row + "\r\n")
                hccl_avg[r] = {"communication_cost_ms": m_c, "wait_cost_ms": m_w}
                _write(root, f"{prof_dir(r)}/hccl_raw_{file_id(r)}.csv", "".join(lines), files)

        # ---- flops / memory / profiler_info ----------------------------------------------------
        for li, r in enumerate(ranks.tolist()):
            if spec.with_flops:
                stage_w = 1.0 if clean else 1 + 0.06 * (k - 1)
                mflops = _FLOPS_PER_STEP * stage_w * (1 + 0.0005 * float(n_flops[r]))
                if heavy[r] != 1:
                    mflops *= float(heavy[r])
                busy_ms = truth_avg[r]["fp_bp_ms"]
                if rw_all[r].any():                                 # op rates: waiting is not computing
                    busy_ms -= float(rw_all[r].mean()) / TICKS_PER_MS
                gflops = mflops / busy_ms
                fl = {"FLOPs": round(mflops, 3), "FLOPS": round(gflops, 3),
                      "FLOPS_Utilization": round(gflops / _PEAK_GFLOPS * 100, 3)}
                flops_truth[r] = fl
                _write(root, f"{prof_dir(r)}/flops_summary_{file_id(r)}.json", json.dumps(fl), files)
            if spec.with_memory:
                if clean:
                    static_b = int(5.5 * 2**30)
                    act_b = int(9.0 * 2**30 * (1 + 0.002 * float(n_mem[r])))
                else:
                    static_b = int((5.5 + 0.3 * (k - 1)) * 2**30)
                    act_b = int(12.0 * 2**30 * (S - k + 1) / S * (1 + 0.002 * float(n_mem[r])))
                if r in mem_peak:                                   # near capacity: activations fill the rest
                    act_b = int(mem_peak[r] * _CAPACITY_BYTES) - static_b
                n_alloc = 4211 + 173 * (k - 1)
                mem = {"capacity": _CAPACITY_BYTES / 2**30, "allocations": n_alloc, "deallocations": n_alloc,
                       "peak_mem": (static_b + act_b) / 2**30, "static_mem": static_b / 2**30}
                mem_truth[r] = mem
                _write(root, f"{prof_dir(r)}/memory_usage_summary_{file_id(r)}.json", json.dumps(mem), files)
                if spec.memory_details:
                    _write(root, f"{prof_dir(r)}/memory_usage_details_{file_id(r)}.json",
                           json.dumps(_memory_details(static_b, act_b)), files)
            if spec.with_minddata or spec.minddata_bottleneck:
                _write(root, f"{prof_dir(r)}/minddata_pipeline_raw_{file_id(r)}.csv",
                       _minddata_csv(spec.minddata_bottleneck), files)
                summary = _minddata_summary(spec.minddata_bottleneck)
                _write(root, f"{prof_dir(r)}/minddata_pipeline_summary_{file_id(r)}.json", json.dumps(summary), files)
                _write(root, f"{prof_dir(r)}/minddata_pipeline_summary_{file_id(r)}.csv", _summary_csv(summary), files)
                _write(root, f"{prof_dir(r)}/device_queue_profiling_{file_id(r)}.txt",
                       _device_queue_txt(spec.minddata_bottleneck), files)
                _write(root, f"{prof_dir(r)}/dataset_{file_id(r)}.csv", _dataset_csv(), files)
            if spec.with_profiler_info:
                info = {"context_mode": "graph", "rank_id": str(r), "rank_size": world,
                        "parallel_mode": "semi_auto_parallel" if S > 1 else "data_parallel",
                        "stage_num": S, "profiling_stop_time": _PROFILING_STOP, "graph_ids": [0],
                        "analyse_end_time": _ANALYSE_END, "ms_version": "2.1.0"}
                _write(root, f"{prof_dir(r)}/profiler_info_{file_id(r)}.json", json.dumps(info), files)

    # ---- legacy run-wide files ----------------------------------------------------------------
    host_ips = {names[h]: _host_ip(h) for h in range(spec.hosts)}
    if legacy:
        table = {"version": "1.0", "server_count": str(spec.hosts), "server_list": [
            {"server_id": _host_ip(h), "device": [
                {"device_id": str(d), "device_ip": _device_ip(h, d), "rank_id": str(h * dph + d)}
                for d in range(dph)]}
            for h in range(spec.hosts)], "status": "completed"}
        _write(root, "hccl.json", json.dumps(table, indent=4) + "\n", files)
        _write(root, "host_ips_mapping.txt",
               "".join(f"{_host_ip(h)} {names[h]}\n" for h in range(spec.hosts)), files)

    ranks_all = list(range(world))
    truth_steps.sort(key=lambda d: (d["rank"], d["step"]))
    overlap_steps.sort(key=lambda d: (d["rank"], d["step"]))
    return {
        "world_size": world,
        "ranks": ranks_all,
        "hosts": {r: names[r // dph] for r in ranks_all},
        "host_ips": host_ips,
        "devices": {r: r % dph for r in ranks_all},
        "stages": {r: r // per_stage + 1 for r in ranks_all},
        "stage_num": S,
        "steps": steps_list,
        "parallel_mode": mode,
        "layout": spec.layout,
        "file_ids": {r: file_id(r) for r in ranks_all},
        "profiler_dirs": sorted({prof_dir(r) for r in ranks_all}),
        "per_rank_step": truth_steps,
        "per_rank_avg": {r: truth_avg[r] for r in ranks_all},
        "overlap_per_rank_step": overlap_steps,
        "overlap_per_rank_avg": {r: overlap_avg[r] for r in ranks_all},
        "hccl_per_rank_avg": {r: hccl_avg[r] for r in ranks_all} if spec.with_hccl else {},
        "flops": {r: flops_truth[r] for r in ranks_all} if spec.with_flops else {},
        "memory": {r: mem_truth[r] for r in ranks_all} if spec.with_memory else {},
        "comm_ops": {k: v for k, v in sorted(ops_by_stage.items())},
        "hostile_name": spec.hostile_name,
        "slow_ranks": sorted(int(r) for r in spec.slow_ranks),
        "slow_fp_bp": sorted(int(r) for r in spec.slow_fp_bp),
        "clean": clean,
        "micro_batches": micro,
        "anomalies": _anomalies(spec, world, per_stage, names, host_of, stage_of),
        "files": sorted(files),
    }


def _anomalies(spec: MindInsightSpec, world: int, per_stage: int, names: list[str], host_of, stage_of) -> list[dict]:
    """The injected anomalies, as the report can know them (hosts by name, stages 1-based)."""
    S, out = spec.stages, []

    def one(kind: str, ranks, links=(), stage=None, host=None, **extra) -> None:
        out.append({"kind": kind, "ranks": sorted(int(r) for r in ranks), "links": [list(x) for x in links],
                    "stage": stage, "host": host, **extra})

    def at(r) -> dict:      # stage (pipeline only) and host of one rank
        return {"stage": int(stage_of[int(r)]) if S > 1 else None, "host": names[host_of[int(r)]]}

    for r, m in sorted(spec.slow_fp_bp.items()):
        one("slow_rank", [r], **at(r), factor=float(m))
    for r, m in sorted(spec.slow_ranks.items()):   # pre-issue-8 knob: one rank's step interval (not one of the six)
        one("slow_rank_data_loading", [r], **at(r), factor=float(m))
    for h, x in sorted(spec.slow_hosts.items()):
        one("slow_host_data_loading", np.flatnonzero(host_of == int(h)), host=names[int(h)],
            share_of_fp_bp=float(x))
    for (a, b), x in sorted(spec.slow_links.items()):
        a, b = int(a), int(b)
        k = b // per_stage
        if per_stage > 1 and a == k * per_stage + (b - k * per_stage - 1) % per_stage:
            local = {"src_local": (b - k * per_stage - 1) % per_stage, "dst_local": b - k * per_stage,
                     "group": f"stage {k + 1} gradient ring" if S > 1 else "data-parallel ring"}
        else:   # p2p group of 2: the earlier stage's rank is local 0
            local = {"src_local": 0 if a < b else 1, "dst_local": 1 if a < b else 0, "group": "pipeline p2p"}
        local.update(reported_by=b, transport="RDMA" if host_of[a] != host_of[b] else "SDMA")
        one("slow_link", [a, b], links=[(a, b)], stage=int(stage_of[b]) if S > 1 and local["group"] != "pipeline p2p"
            else None, bandwidth_share=float(x), local_link=local)
    if spec.pipeline_bubble > 0:
        one("pipeline_bubble", range(world), share_of_fp_bp=float(spec.pipeline_bubble))
    for r, x in sorted(spec.memory_peaks.items()):
        one("memory_near_capacity", [r], **at(r), peak_share=float(x))
    for k, m in sorted(spec.heavy_stages.items()):
        one("flops_imbalance", np.flatnonzero(stage_of == int(k)), stage=int(k), factor=float(m))
    for k, m in sorted(spec.exposed_comm.items()):
        one("exposed_communication", np.flatnonzero(stage_of == int(k)), stage=int(k) if S > 1 else None,
            bytes_factor=float(m))
    return out
