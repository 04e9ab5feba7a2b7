#!/usr/bin/env python
"""Diagnosis benchmark generator (bench/diagnosis): ../shared/tools/gen/torch_ddp/train_3d.py extended with options
that inject ONE problem each (see ``inject`` below and bench/diagnosis/README.md). Original description:

Tiny 3-D parallel (DP x PP x TP) GPT-style training on CPU with torch.distributed/gloo,
profiled per rank with torch.profiler.  Purpose: generate *real* multi-rank profiler traces
(Kineto chrome-trace JSON) as test inputs for a multi-rank profiling report tool.

Rank layout (Megatron order, TP fastest, then DP, then PP):
    rank = pp_idx * (dp * tp) + dp_idx * tp + tp_idx
  4 ranks, dp=2 tp=2 pp=1 : TP groups {0,1} {2,3}; DP groups {0,2} {1,3}
  8 ranks, dp=2 tp=2 pp=2 : stage0 = ranks 0-3, stage1 = ranks 4-7;
                            TP {0,1}{2,3}{4,5}{6,7}; DP {0,2}{1,3}{4,6}{5,7}; PP {0,4}{1,5}{2,6}{3,7}

Communication exercised (all gloo, all CPU):
  * TP group : broadcast (input tokens from tp-rank 0), all_reduce (row-parallel linear, fwd & bwd of
               the "plain TP" blocks), all_gather_into_tensor + reduce_scatter_tensor (sequence-parallel
               blocks), send/recv ring exchange (P2P between the two TP peers, collective-matmul style,
               only with --tp-ring-exchange)
  * DP group : gradient all_reduce (torch DDP buckets when pp==1, manual flat buckets when pp>1),
               loss all_reduce (averaging for logging)
  * PP group : send/recv of activations (fwd) and activation grads (bwd), GPipe schedule, M microbatches
  * world    : all_reduce of the squared grad norm (global grad-norm clipping)

Launch: python train_3d.py --dp 2 --tp 2 --pp 1 --out OUT   (uses mp.spawn on 127.0.0.1)
   or : torchrun --standalone --nproc-per-node 4 train_3d.py --dp 2 --tp 2 --pp 1 --out OUT
"""
import argparse
import json
import math
import os
import socket
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, record_function


# ----------------------------------------------------------------------------------------------
# process groups
# ----------------------------------------------------------------------------------------------
class Mesh:
    def __init__(self, dp, pp, tp):
        self.dp, self.pp, self.tp = dp, pp, tp
        self.world = dp * pp * tp
        self.rank = dist.get_rank()
        r = self.rank
        self.tp_idx = r % tp
        self.dp_idx = (r // tp) % dp
        self.pp_idx = r // (tp * dp)
        self.tp_group = self.dp_group = self.pp_group = None
        self.tp_ranks = self.dp_ranks = self.pp_ranks = None

        def rk(p, d, t):
            return p * dp * tp + d * tp + t

        # every rank must call new_group for every group, in the same order
        for p in range(pp):
            for d in range(dp):
                ranks = [rk(p, d, t) for t in range(tp)]
                g = dist.new_group(ranks, group_desc=f"tp_pp{p}_dp{d}")
                if r in ranks:
                    self.tp_group, self.tp_ranks = g, ranks
        for p in range(pp):
            for t in range(tp):
                ranks = [rk(p, d, t) for d in range(dp)]
                g = dist.new_group(ranks, group_desc=f"dp_pp{p}_tp{t}")
                if r in ranks:
                    self.dp_group, self.dp_ranks = g, ranks
        if pp > 1:
            for d in range(dp):
                for t in range(tp):
                    ranks = [rk(p, d, t) for p in range(pp)]
                    g = dist.new_group(ranks, group_desc=f"pp_dp{d}_tp{t}")
                    if r in ranks:
                        self.pp_group, self.pp_ranks = g, ranks

    @property
    def first_stage(self):
        return self.pp_idx == 0

    @property
    def last_stage(self):
        return self.pp_idx == self.pp - 1

    def describe(self):
        return dict(rank=self.rank, tp_idx=self.tp_idx, dp_idx=self.dp_idx, pp_idx=self.pp_idx,
                    tp_ranks=self.tp_ranks, dp_ranks=self.dp_ranks, pp_ranks=self.pp_ranks)


MESH = None  # set per process
CFG = None


# ----------------------------------------------------------------------------------------------
# TP / SP communication primitives as autograd functions (Megatron "f"/"g" conjugates)
# ----------------------------------------------------------------------------------------------
def _tp_world():
    return MESH.tp


class CopyToTP(torch.autograd.Function):
    """identity fwd, all_reduce bwd"""
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous()
        dist.all_reduce(g, group=MESH.tp_group)
        return g


class ReduceFromTP(torch.autograd.Function):
    """all_reduce fwd, identity bwd"""
    @staticmethod
    def forward(ctx, x):
        x = x.contiguous()
        dist.all_reduce(x, group=MESH.tp_group)
        return x

    @staticmethod
    def backward(ctx, g):
        return g


def _all_gather_seq(x):
    # x: [B, S/tp, H] -> [B, S, H]  (gather along dim 1)
    tp = _tp_world()
    xt = x.transpose(0, 1).contiguous()  # [S/tp, B, H]
    out = torch.empty((xt.shape[0] * tp,) + tuple(xt.shape[1:]), dtype=x.dtype)
    dist.all_gather_into_tensor(out, xt, group=MESH.tp_group)
    return out.transpose(0, 1).contiguous()


def _reduce_scatter_seq(x):
    # x: [B, S, H] -> [B, S/tp, H] (sum over TP ranks, scatter along dim 1)
    tp = _tp_world()
    xt = x.transpose(0, 1).contiguous()
    out = torch.empty((xt.shape[0] // tp,) + tuple(xt.shape[1:]), dtype=x.dtype)
    dist.reduce_scatter_tensor(out, xt, group=MESH.tp_group)
    return out.transpose(0, 1).contiguous()


class GatherFromSP(torch.autograd.Function):
    """all_gather fwd, reduce_scatter bwd"""
    @staticmethod
    def forward(ctx, x):
        return _all_gather_seq(x)

    @staticmethod
    def backward(ctx, g):
        return _reduce_scatter_seq(g)


class ReduceScatterToSP(torch.autograd.Function):
    """reduce_scatter fwd, all_gather bwd"""
    @staticmethod
    def forward(ctx, x):
        return _reduce_scatter_seq(x)

    @staticmethod
    def backward(ctx, g):
        return _all_gather_seq(g)


class SplitToSP(torch.autograd.Function):
    """local split along seq fwd (no comm), all_gather bwd"""
    @staticmethod
    def forward(ctx, x):
        tp, i = MESH.tp, MESH.tp_idx
        s = x.shape[1] // tp
        return x[:, i * s:(i + 1) * s].contiguous()

    @staticmethod
    def backward(ctx, g):
        return _all_gather_seq(g)


class GatherFromSPNoRS(torch.autograd.Function):
    """all_gather fwd, local split bwd (used to leave the SP region with a replicated tensor)"""
    @staticmethod
    def forward(ctx, x):
        return _all_gather_seq(x)

    @staticmethod
    def backward(ctx, g):
        tp, i = MESH.tp, MESH.tp_idx
        s = g.shape[1] // tp
        return g[:, i * s:(i + 1) * s].contiguous()


def ring_exchange(x):
    """P2P ring exchange within the TP group (collective-matmul style): every TP rank sends its
    shard to the next TP rank and receives from the previous one. Not differentiable (applied to
    detached tensors only, used to emulate an overlapped comm pattern)."""
    tp = MESH.tp
    if tp == 1:
        return x
    me = MESH.tp_idx
    nxt = MESH.tp_ranks[(me + 1) % tp]
    prv = MESH.tp_ranks[(me - 1) % tp]
    buf = torch.empty_like(x)
    reqs = [dist.isend(x.contiguous(), dst=nxt, group=MESH.tp_group),
            dist.irecv(buf, src=prv, group=MESH.tp_group)]
    for q in reqs:
        q.wait()
    return buf


# ----------------------------------------------------------------------------------------------
# model
# ----------------------------------------------------------------------------------------------
class ColumnParallelLinear(nn.Module):
    def __init__(self, inp, out, tp):
        super().__init__()
        assert out % tp == 0
        self.lin = nn.Linear(inp, out // tp)

    def forward(self, x):
        return self.lin(x)


class RowParallelLinear(nn.Module):
    def __init__(self, inp, out, tp):
        super().__init__()
        assert inp % tp == 0
        self.lin = nn.Linear(inp // tp, out, bias=False)
        self.bias = nn.Parameter(torch.zeros(out))

    def forward(self, x):
        return self.lin(x)  # partial sum; caller reduces, then adds bias


class Block(nn.Module):
    """Pre-LN transformer block, TP over heads / MLP hidden. seq_parallel=True uses
    all_gather/reduce_scatter (Megatron sequence parallel) instead of all_reduce."""

    def __init__(self, h, nheads, tp, seq_parallel, layer_id, ring_exchange=False):
        super().__init__()
        assert nheads % tp == 0
        self.h, self.nh_local, self.hd = h, nheads // tp, h // nheads
        self.sp = seq_parallel
        self.layer_id = layer_id
        self.ring = ring_exchange
        self.ln1 = nn.LayerNorm(h)
        self.qkv = ColumnParallelLinear(h, 3 * h, tp)
        self.proj = RowParallelLinear(h, h, tp)
        self.ln2 = nn.LayerNorm(h)
        self.fc1 = ColumnParallelLinear(h, 4 * h, tp)
        self.fc2 = RowParallelLinear(4 * h, h, tp)

    def _enter(self, x):
        return GatherFromSP.apply(x) if self.sp else CopyToTP.apply(x)

    def _exit(self, x):
        return ReduceScatterToSP.apply(x) if self.sp else ReduceFromTP.apply(x)

    def forward(self, x):
        tag = f"layer{self.layer_id}_{'sp' if self.sp else 'tp'}"
        # x: [B, S, H] (replicated) if not sp else [B, S/tp, H]
        with record_function(f"{tag}.attention"):
            hdn = self._enter(self.ln1(x))
            B, S, _ = hdn.shape
            qkv = self.qkv(hdn).view(B, S, 3, self.nh_local, self.hd).permute(2, 0, 3, 1, 4)
            q, k, v = qkv[0], qkv[1], qkv[2]
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            a = a.transpose(1, 2).reshape(B, S, self.nh_local * self.hd)
            if CFG.slow_layer >= 0 and self.layer_id == CFG.slow_layer and MESH.rank == CFG.slow_layer_rank:
                with record_function(f"{tag}.extra_compute"):  # injected: one rank slow inside one TP layer
                    t = torch.randn(CFG.slow_dim, CFG.slow_dim)
                    for _ in range(CFG.slow_layer_iters):
                        t = torch.tanh(t @ t * 1e-3)
            if self.ring:
                with record_function(f"{tag}.tp_ring_exchange"):
                    _ = ring_exchange(a.detach())
            x = x + self._exit(self.proj(a)) + self.proj.bias
        with record_function(f"{tag}.mlp"):
            hdn = self._enter(self.ln2(x))
            hdn = F.gelu(self.fc1(hdn))
            x = x + self._exit(self.fc2(hdn)) + self.fc2.bias
        return x


class Stage(nn.Module):
    """One pipeline stage: (embedding) + its blocks + (final LN + LM head)."""

    def __init__(self, cfg, mesh):
        super().__init__()
        self.first, self.last = mesh.first_stage, mesh.last_stage
        L, pp = cfg.layers, mesh.pp
        if cfg.stage_layers:  # injected: uneven split of layers between pipeline stages
            split = [int(v) for v in cfg.stage_layers.split(",")]
            assert len(split) == pp
            per, lo = split[mesh.pp_idx], sum(split[:mesh.pp_idx])
        else:
            assert L % pp == 0
            per = L // pp
            lo = mesh.pp_idx * per
        if self.first:
            self.tok = nn.Embedding(cfg.vocab, cfg.hidden)
            self.pos = nn.Embedding(cfg.seq, cfg.hidden)
        # alternate plain TP (all_reduce) and sequence-parallel (all_gather/reduce_scatter) blocks
        self.blocks = nn.ModuleList()
        for i in range(lo, lo + per):
            self.blocks.append(Block(cfg.hidden, cfg.heads, mesh.tp, seq_parallel=(i % 2 == 1 and mesh.tp > 1),
                                     layer_id=i, ring_exchange=(cfg.tp_ring_exchange and i == lo)))
        if self.last:
            self.lnf = nn.LayerNorm(cfg.hidden)
            self.head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, x):
        if self.first:
            with record_function("embedding"):
                pos = torch.arange(x.shape[1])
                x = self.tok(x) + self.pos(pos)[None]
        for b in self.blocks:
            if b.sp:
                x = SplitToSP.apply(x)
                x = b(x)
                x = GatherFromSPNoRS.apply(x)
            else:
                x = b(x)
        if self.last:
            with record_function("lm_head"):
                x = self.head(self.lnf(x))
        return x


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------
def make_batch(cfg, step, mb, dp_idx):
    """Learnable synthetic sequences: tokens (a + k*i) mod V, next-token prediction."""
    g = torch.Generator().manual_seed(cfg.seed * 100003 + step * 1009 + mb * 101 + dp_idx)
    a = torch.randint(0, cfg.vocab, (cfg.micro_batch, 1), generator=g)
    k = torch.randint(1, 8, (cfg.micro_batch, 1), generator=g)
    i = torch.arange(cfg.seq + 1)[None]
    seq = (a + k * i) % cfg.vocab
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


class SynthDataset(torch.utils.data.Dataset):
    """Index (step, mb) -> one micro-batch; on the injected loader rank each item sleeps (slow storage / decode)."""

    def __init__(self, cfg, dp_idx):
        self.cfg, self.dp_idx = cfg, dp_idx

    def __len__(self):
        return self.cfg.steps * self.cfg.microbatches

    def __getitem__(self, i):
        cfg = self.cfg
        if MESH.rank == cfg.loader_rank:
            time.sleep(cfg.loader_ms / 1000.0 / cfg.microbatches)
        return make_batch(cfg, i // cfg.microbatches, i % cfg.microbatches, self.dp_idx)


LOADER = None


def get_batch(cfg, step, mb):
    """tp-rank 0 'loads' the batch (a DataLoader), broadcasts to its TP group (Megatron style)."""
    global LOADER
    with record_function("data_loading"):
        if MESH.tp_idx == 0:
            if LOADER is None:
                LOADER = iter(torch.utils.data.DataLoader(SynthDataset(cfg, MESH.dp_idx), batch_size=None,
                                                          shuffle=False, num_workers=0))
            x, y = next(LOADER)
        else:
            x = torch.empty(cfg.micro_batch, cfg.seq, dtype=torch.long)
            y = torch.empty(cfg.micro_batch, cfg.seq, dtype=torch.long)
        if MESH.tp > 1:
            dist.broadcast(x, src=MESH.tp_ranks[0], group=MESH.tp_group)
            dist.broadcast(y, src=MESH.tp_ranks[0], group=MESH.tp_group)
    return x, y


# ----------------------------------------------------------------------------------------------
# straggler emulation
# ----------------------------------------------------------------------------------------------
HOLD = []


def straggle(cfg):
    if MESH.rank == cfg.mem_rank:  # injected: one rank holds an extra buffer through the step
        HOLD.clear()
        with record_function("extra_buffer"):
            HOLD.append(torch.empty(int(cfg.mem_gb * (1 << 30)) // 4, dtype=torch.float32))
    if MESH.rank == cfg.launch_rank:  # injected: many tiny host-side ops (launch-bound rank)
        with record_function("tiny_ops"):
            t = torch.zeros(4)
            for _ in range(cfg.launch_ops):
                t = t.add(1.0).mul(0.5)
    if MESH.rank != cfg.slow_rank:
        return
    if cfg.slow_mode == "sleep":
        with record_function("straggler_sleep"):
            time.sleep(cfg.slow_ms / 1000.0)
    else:
        with record_function("straggler_extra_compute"):
            a = torch.randn(cfg.slow_dim, cfg.slow_dim)
            for _ in range(cfg.slow_iters):
                a = torch.tanh(a @ a * 1e-3)


# ----------------------------------------------------------------------------------------------
# one training step
# ----------------------------------------------------------------------------------------------
def flat_dp_allreduce(params, cfg):
    """Manual bucketed gradient all_reduce over the DP group (used when pp>1)."""
    grads = [p.grad for p in params if p.grad is not None]
    if MESH.dp == 1 or not grads:
        return
    cap = int(cfg.bucket_mb * 1024 * 1024 / 4)
    buckets, cur, n = [], [], 0
    for g_ in reversed(grads):  # reverse order like DDP (last layers first)
        cur.append(g_)
        n += g_.numel()
        if n >= cap:
            buckets.append(cur)
            cur, n = [], 0
    if cur:
        buckets.append(cur)
    works = []
    for bi, b in enumerate(buckets):
        flat = torch.cat([g_.reshape(-1) for g_ in b])
        flat.div_(MESH.dp)
        works.append((b, flat, dist.all_reduce(flat, group=MESH.dp_group, async_op=True)))
    for b, flat, w in works:
        w.wait()
        off = 0
        for g_ in b:
            g_.copy_(flat[off:off + g_.numel()].view_as(g_))
            off += g_.numel()


def sync_dp_allreduce(params, cfg):
    """Bucketed gradient all_reduce over the DP group, each bucket waited before the next (no overlap)."""
    grads = [p.grad for p in params if p.grad is not None]
    if MESH.dp == 1 or not grads:
        return
    cap = int(cfg.bucket_mb * 1024 * 1024 / 4)
    bucket, n = [], 0
    for g_ in list(reversed(grads)) + [None]:
        if g_ is not None:
            bucket.append(g_)
            n += g_.numel()
        if bucket and (g_ is None or n >= cap):
            flat = torch.cat([x.reshape(-1) for x in bucket])
            flat.div_(MESH.dp)
            dist.all_reduce(flat, group=MESH.dp_group)
            off = 0
            for x in bucket:
                x.copy_(flat[off:off + x.numel()].view_as(x))
                off += x.numel()
            bucket, n = [], 0


def train_step(cfg, step, model, raw_model, opt, shapes):
    opt.zero_grad(set_to_none=True)
    straggle(cfg)
    M = cfg.microbatches
    losses = []
    if MESH.pp == 1:
        # DDP path; gradient accumulation over microbatches with no_sync on all but the last
        for mb in range(M):
            x, y = get_batch(cfg, step, mb)
            ctx = model.no_sync() if (hasattr(model, "no_sync") and mb < M - 1) else _nullctx()
            with ctx:
                with record_function("forward"):
                    logits = model(x)
                    loss = F.cross_entropy(logits.view(-1, cfg.vocab), y.view(-1)) / M
                with record_function("backward"):
                    loss.backward()
            losses.append(loss.detach() * M)
        if cfg.sync_grad:  # injected: gradients all-reduced after backward, nothing to overlap with
            with record_function("dp_grad_allreduce"):
                sync_dp_allreduce(list(raw_model.parameters()), cfg)
    else:
        # GPipe: all forwards, then all backwards; P2P on the pp group
        B, S, H = cfg.micro_batch, cfg.seq, cfg.hidden
        prev_rank = MESH.pp_ranks[MESH.pp_idx - 1] if not MESH.first_stage else None
        next_rank = MESH.pp_ranks[MESH.pp_idx + 1] if not MESH.last_stage else None
        saved = []
        for mb in range(M):
            if MESH.first_stage:
                x, y = get_batch(cfg, step, mb)
                inp = x
            else:
                with record_function("pp_recv_activation"):
                    inp = torch.empty(B, S, H)
                    dist.recv(inp, src=prev_rank, group=MESH.pp_group)
                inp.requires_grad_(True)
                if MESH.last_stage:
                    _, y = get_batch(cfg, step, mb)
            with record_function(f"forward_mb{mb}"):
                out = model(inp)
                if MESH.last_stage:
                    out = F.cross_entropy(out.view(-1, cfg.vocab), y.view(-1)) / M
                    losses.append(out.detach() * M)
            if not MESH.last_stage:
                if MESH.rank == cfg.p2p_slow_src:  # injected: the sender stalls before its send
                    with record_function("p2p_stall"):
                        time.sleep(cfg.p2p_ms / 1000.0)
                with record_function("pp_send_activation"):
                    dist.send(out.detach().contiguous(), dst=next_rank, group=MESH.pp_group)
            saved.append((inp, out))
        for mb in range(M):
            inp, out = saved[mb]
            with record_function(f"backward_mb{mb}"):
                if MESH.last_stage:
                    out.backward()
                else:
                    with record_function("pp_recv_grad"):
                        g = torch.empty_like(out)
                        dist.recv(g, src=next_rank, group=MESH.pp_group)
                    out.backward(g)
            if not MESH.first_stage:
                with record_function("pp_send_grad"):
                    dist.send(inp.grad.contiguous(), dst=prev_rank, group=MESH.pp_group)
        with record_function("dp_grad_allreduce"):
            flat_dp_allreduce(list(raw_model.parameters()), cfg)

    with record_function("grad_norm_clip"):
        sq = torch.zeros(1)
        for p in raw_model.parameters():
            if p.grad is not None:
                sq += p.grad.pow(2).sum()
        # (replicated params are counted tp times - fine for a toy)
        dist.all_reduce(sq, group=None)  # world group
        norm = sq.sqrt()
        clip = torch.clamp(cfg.clip / (norm + 1e-6), max=1.0)
        for p in raw_model.parameters():
            if p.grad is not None:
                p.grad.mul_(clip)
    with record_function("optimizer_step"):
        opt.step()
    with record_function("loss_allreduce"):
        if losses:
            l = torch.stack(losses).mean().reshape(1)
        else:
            l = torch.zeros(1)
        dist.all_reduce(l, group=MESH.dp_group)
        l = l / MESH.dp
    return float(l), float(norm)


class _nullctx:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


# ----------------------------------------------------------------------------------------------
# worker
# ----------------------------------------------------------------------------------------------
def worker(rank, cfg):
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(cfg.port))
    world = cfg.dp * cfg.pp * cfg.tp
    torch.set_num_threads(cfg.threads)
    global CFG
    CFG = cfg
    dist.init_process_group("gloo", rank=rank, world_size=world)
    global MESH
    MESH = Mesh(cfg.dp, cfg.pp, cfg.tp)
    # replicated params: identical on all ranks of a stage (seed depends only on pp coordinate);
    # TP-sharded params: re-initialised with a seed that also depends on the tp coordinate.
    torch.manual_seed(cfg.seed + 17 * MESH.pp_idx)
    raw = Stage(cfg, MESH)
    torch.manual_seed(cfg.seed + 17 * MESH.pp_idx + 1000 * (MESH.tp_idx + 1))
    for m in raw.modules():
        if isinstance(m, (ColumnParallelLinear, RowParallelLinear)):
            m.lin.reset_parameters()
    if cfg.pp == 1 and cfg.dp > 1 and not cfg.sync_grad:
        from torch.nn.parallel import DistributedDataParallel as DDP
        model = DDP(raw, process_group=MESH.dp_group, bucket_cap_mb=cfg.bucket_mb)
    else:
        model = raw
    opt = torch.optim.AdamW(raw.parameters(), lr=cfg.lr)

    out = cfg.out
    tdir = os.path.join(out, "traces")
    ldir = os.path.join(out, "logs")
    os.makedirs(tdir, exist_ok=True)
    os.makedirs(ldir, exist_ok=True)
    if cfg.worker_name == "rank":
        tb_handler = torch.profiler.tensorboard_trace_handler(tdir, worker_name=f"rank{rank}", use_gzip=cfg.gzip)
    else:  # default: <hostname>_<pid>.<time_ms>.pt.trace.json (what users get by default)
        tb_handler = torch.profiler.tensorboard_trace_handler(tdir, use_gzip=cfg.gzip)

    def handler(prof):
        tb_handler(prof)
        # The Kineto chrome trace of this torch build carries no per-op "flops" arg (checked), so also
        # dump the profiler's own aggregated op table (which does carry FLOPs) per rank.
        sdir = os.path.join(out, "op_summary")
        os.makedirs(sdir, exist_ok=True)
        ka = prof.key_averages()
        rows = []
        for e in ka:
            rows.append(dict(name=e.key, count=e.count, cpu_time_total_us=e.cpu_time_total,
                             self_cpu_time_total_us=e.self_cpu_time_total,
                             cpu_memory_usage_bytes=e.cpu_memory_usage,
                             self_cpu_memory_usage_bytes=e.self_cpu_memory_usage, flops=e.flops))
        rows.sort(key=lambda r: -r["self_cpu_time_total_us"])
        with open(os.path.join(sdir, f"rank{rank}.key_averages.json"), "w") as f:
            json.dump(dict(rank=rank, profiled_steps=list(range(2, 2 + cfg.active)), ops=rows), f, indent=0)
        with open(os.path.join(sdir, f"rank{rank}.key_averages.txt"), "w") as f:
            f.write(ka.table(sort_by="self_cpu_time_total", row_limit=40, max_name_column_width=60))

    et = None
    if cfg.execution_trace:
        from torch.profiler import ExecutionTraceObserver
        os.makedirs(os.path.join(out, "execution_trace"), exist_ok=True)
        et = ExecutionTraceObserver().register_callback(os.path.join(out, "execution_trace", f"rank{rank}.et.json"))

    sched = torch.profiler.schedule(wait=1, warmup=1, active=cfg.active, repeat=1)
    log = open(os.path.join(ldir, f"rank{rank}.jsonl"), "w")
    log.write(json.dumps(dict(event="mesh", host=socket.gethostname(), pid=os.getpid(), **MESH.describe(),
                              n_params_local=sum(p.numel() for p in raw.parameters()))) + "\n")
    dist.barrier()
    t_start = time.time_ns()
    kwargs = dict(activities=[ProfilerActivity.CPU], schedule=sched, on_trace_ready=handler,
                  record_shapes=True, profile_memory=True, with_flops=True, with_stack=False)
    if et is not None:
        kwargs["execution_trace_observer"] = et
    with torch.profiler.profile(**kwargs) as prof:
        for step in range(cfg.steps):
            t0 = time.time_ns()
            loss, gnorm = train_step(cfg, step, model, raw, opt, None)
            t1 = time.time_ns()
            log.write(json.dumps(dict(event="step", step=step, start_unix_ns=t0, end_unix_ns=t1,
                                      dur_ms=(t1 - t0) / 1e6, loss=round(loss, 5), grad_norm=round(gnorm, 5),
                                      profiled=(2 <= step < 2 + cfg.active))) + "\n")
            log.flush()
            prof.step()
    t_end = time.time_ns()
    log.write(json.dumps(dict(event="done", total_ms=(t_end - t_start) / 1e6)) + "\n")
    log.close()
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--microbatches", type=int, default=2)
    ap.add_argument("--micro-batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--vocab", type=int, default=512)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--bucket-mb", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--port", type=int, default=29500)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-mode", choices=["compute", "sleep"], default="compute")
    ap.add_argument("--slow-ms", type=float, default=100.0)
    ap.add_argument("--slow-dim", type=int, default=256)
    ap.add_argument("--slow-iters", type=int, default=40)
    ap.add_argument("--tp-ring-exchange", action="store_true")
    ap.add_argument("--active", type=int, default=5, help="profiled steps")
    ap.add_argument("--slow-layer", type=int, default=-1, help="layer id with extra compute on --slow-layer-rank")
    ap.add_argument("--slow-layer-rank", type=int, default=-1)
    ap.add_argument("--slow-layer-iters", type=int, default=20)
    ap.add_argument("--loader-rank", type=int, default=-1, help="rank whose DataLoader items sleep")
    ap.add_argument("--loader-ms", type=float, default=400.0, help="sleep per step on --loader-rank")
    ap.add_argument("--p2p-slow-src", type=int, default=-1, help="pipeline sender that sleeps before each send")
    ap.add_argument("--p2p-ms", type=float, default=100.0)
    ap.add_argument("--sync-grad", action="store_true", help="no DDP overlap: all-reduce gradients after backward")
    ap.add_argument("--stage-layers", default="", help="layers per pipeline stage, e.g. 1,5")
    ap.add_argument("--launch-rank", type=int, default=-1, help="rank issuing many tiny host ops")
    ap.add_argument("--launch-ops", type=int, default=4000)
    ap.add_argument("--mem-rank", type=int, default=-1, help="rank holding an extra buffer each step")
    ap.add_argument("--mem-gb", type=float, default=1.5)
    ap.add_argument("--execution-trace", action="store_true")
    ap.add_argument("--gzip", action="store_true")
    ap.add_argument("--worker-name", choices=["default", "rank"], default="default")
    ap.add_argument("--out", required=True)
    cfg = ap.parse_args()
    world = cfg.dp * cfg.pp * cfg.tp
    os.makedirs(cfg.out, exist_ok=True)
    with open(os.path.join(cfg.out, "run_config.json"), "w") as f:
        json.dump(dict(vars(cfg), world_size=world, torch_version=torch.__version__), f, indent=1)
    t0 = time.time()
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # torchrun
        assert int(os.environ["WORLD_SIZE"]) == world
        worker(int(os.environ["RANK"]), cfg)
    else:
        mp.spawn(worker, args=(cfg,), nprocs=world, join=True)
    print(f"done in {time.time() - t0:.1f}s -> {cfg.out}")


if __name__ == "__main__":
    main()
