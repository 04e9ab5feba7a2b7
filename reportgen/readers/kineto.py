"""Reader for PyTorch Kineto traces (``*.pt.trace.json[.gz]``): GPU with NCCL/RCCL, CPU with gloo.

Format facts and the peer's formulas: ../shared/research/kineto-traces-and-hta.md. Each file is
decoded by :mod:`.kineto_decode` (streamed; only the events reportgen needs). This module finds the
files, gives each its global rank, unions the process groups, and turns the decoded events into the
run model (ms, MB = 10^6 B, global ranks).

* Rank: ``distributedInfo.rank``; else ``rank<N>`` / ``worker<N>`` in the file name; a lone file
  without either is rank 0. World size: ``distributedInfo.world_size``.
* Bad input (issue 14, :mod:`reportgen.limits`; values inside events: :mod:`.kineto_decode`, "Refused values").
  Every file named ``*.pt.trace.json[.gz]`` is read whatever it holds, so junk, UTF-16, non-gzip or truncated
  files and JSON that is not a trace are named in the data problems ("file skipped"); when no file is usable
  the run is refused (exit 2) naming the files and why. A rank id that is not in 0..MAX_RANKS-1 (10^9, 10^25,
  -1, 0.5, null, text) is named and ignored (the file name's rank, if any, is used instead). Two files with one
  rank: the one whose rank comes from ``distributedInfo.rank`` wins over one named ``rank<N>``, then the one
  with more events read, then the first in path order; the loser is named with the reason. The world size
  claims go through :func:`reportgen.limits.world_size` (a claim above MAX_RANKS, < 1, not an integer or
  below the highest rank found is named and the ranks found are used; different claims are named and the
  largest is used). ``pg_config`` rank lists must be rank ids below the world size, else the group is
  ignored (named); a group of more than :data:`MAX_LISTED_RANKS` ranks keeps only the ranks with a trace and
  missing ranks beyond that many are counted in a data problem, not listed: nothing is allocated per claimed
  rank. p2p peers and ``Group size`` beyond the world size are named and ignored. Host, group, device and
  backend names are capped; implausible ``deviceProperties`` values are named and left empty.
* Process groups: the union of every rank's ``distributedInfo.pg_config`` (each rank lists only the
  groups it belongs to). Kinds from ``pg_desc`` (``default_pg`` -> world, ``mesh_dp`` / ``dp`` -> dp, ...).
* Times (model doc, "Time base"): the decoder's exact int ns; the run origin is the earliest timestamp of any
  rank, every ``start_ms`` / ``end_ms`` / ``ts_ms`` is :func:`~reportgen.model.rel_ms` of it, and ``end_ms`` comes
  from ``ts + dur`` in integers (so a child ending with its parent ends at the same float). ``gpu_ops`` keeps
  ``ts_ns`` / ``dur_ns`` on the file's clock (and ``launch_ts_ns``, the earliest runtime call with its correlation)
  and ``hta_events`` (rank, role, name, stream, correlation, ts_ns, dur_ns, launch_ts_ns) holds what else HTA 0.5
  reads, both only for its whole-µs conventions
  (:func:`reportgen.intervals.hta_gpu_time_metrics`).
* Ranks are independent: with ``jobs > 1`` they are decoded in parallel processes.
* Hosts: the top-level ``host_name`` key torch writes (2.x; ``socket.gethostname()``), only when the files
  name at least two different hosts (one host says nothing about placement, and the run model then keeps
  ``hosts`` empty as before).
* ``memory_events`` (rank, ts_ms, device_type, device_id, allocated_mb, reserved_mb): the ``[memory]`` events;
  device memory is every :data:`reportgen.model.ACCELERATOR_DEVICE_TYPES` entry (CUDA 1, HIP 6 on ROCm, XPU, HPU, MTIA,
  PrivateUse1 such as torch_npu, ...), host memory is CPU 0.
* Steps: ``trace_steps`` from the ``ProfilerStep#N`` spans (``run.step_source = "markers"``); without any marker,
  one whole-trace window per rank, step 0 (:func:`whole_trace_windows`, ``"whole_trace"``). GPU work outside every
  ProfilerStep belongs to no step (tables that carry a step give it -1).
* ``op_flops`` (the canonical FLOPs table, model.TABLES; parsed on first use): the counted aten ops of ``cpu_ops``
  with their FLOPs and the PyTorch counting rules, written down once in :func:`op_flops` (nesting, the trace's own
  ``flops`` arg, graph capture: no kernel launched -> no FLOPs, step by ProfilerStep window).
* ``host_ops`` (rank, name, tid, start_ms, dur_ms): the main thread's top-level CPU op spans
  (:mod:`.kineto_decode`), the host compute of CPU-only (gloo) traces in the device timeline.
* ``dataloader`` (rank, step, name, start_ms, dur_ms): the ``enumerate(DataLoader)#...__next__`` spans, with
  the ProfilerStep they start in (-1 outside every step).
* p2p peers: NCCL kernels carry the GLOBAL peer (``Dst Rank`` / ``Src Rank``, torch >= ~2.4); gloo send / recv
  carry only the group-local one (``collectives.peer_local``, from the c10d op) and not their process group.
  :func:`global_peers` maps it with the ranks' ``pg_config`` groups: the one global rank the rank's groups give,
  else the group whose counterpart rank has the matching opposite ops (same local index back, as many per step,
  same size). Ops it cannot map keep -1 and are counted in one data problem line.
* ``p2p_links`` (group, src_rank, dst_rank, transport, ops, matched, size_mb, time_ms, bandwidth_gbps): one row
  per directed pair of GLOBAL ranks that exchanged send/recv NCCL kernels carrying ``Dst Rank`` / ``Src Rank``
  (torch >= ~2.4; older traces have no peer and give no table), or, in CPU-only traces, gloo send / recv spans
  with a mapped peer: ops, matched and size only, time_ms and bandwidth NaN (a blocking gloo send ends once its
  data is handed to the transport, a receive includes the wait for its sender: neither span, nor the shorter of
  the two, is the transfer time; on clean runs their "bandwidth" varied 100x between pipeline links). The n-th send a->b is matched with the n-th
  recv at b from a (NCCL keeps p2p order per peer); both kernels end when the data has arrived, so the
  transfer time of the pair is the shorter of the two durations (the later one started when both were
  ready). size = the send's message bytes; bandwidth = Σ size / Σ time over the matched pairs (MB/ms =
  GB/s). transport = ``intra-host`` / ``inter-host`` when hosts are known, else ``p2p``. Real NCCL traces
  carry no per-link (NVLink/IB) data: this is the only per-link view they allow.
"""

from __future__ import annotations

import gzip
import math
import os
import re
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from .. import limits, workers
from ._files import open_input
from ..errors import InputError
from ..frames import own_columns, text_where
from ..intervals import clip, length, union
from ..limits import MAX_LISTED_RANKS, MAX_RANKS, Rejects, as_int, cap_text, rank_id
from ..model import ACCELERATOR_DEVICE_TYPES, ByRank, Run, rel_ms
from ..timebase import origin
from . import windows
from .kineto_decode import NO_LAUNCH, row_count

TRACE_NAME = re.compile(r"\.json(\.gz)?$", re.I)
_RANK_IN_NAME = re.compile(r"(?:rank|worker)[-_]?(\d+)", re.I)
MAX_DEPTH = 6
#: decode in parallel processes only when there is enough JSON to read (uncompressed; process start-up ~0.2 s)
PARALLEL_MIN_BYTES = 16 * 1024 * 1024
#: the shortest pg_config rank list that share_group_lists shares between ranks
SHARED_LIST_MIN = 16
_DAY_NS = 86_400 * 10 ** 9


def memory_samples(events: pd.DataFrame | None, props: pd.DataFrame | None) -> pd.DataFrame | None:
    """The canonical ``memory_samples`` (model.TABLES) from the ``[memory]`` events. PyTorch's rule, written down once
    here: device memory is every :data:`ACCELERATOR_DEVICE_TYPES` entry (CUDA 1, HIP 6 on ROCm, XPU, HPU, ...), its
    reserved the caching allocator's "Total Reserved" (the figure nvidia-smi / amd-smi is closest to); CPU (0) and
    the other types are host memory. The CPU allocator caches nothing, so its "Total Reserved" stays 0 and the host
    memory in use is its "Total Allocated": a host series (per rank and device) whose reserved is never above 0 is
    named "host (CPU) total allocated" (the memory section takes that series' peak from ``allocated_mb``). Capacity:
    ``deviceProperties.totalGlobalMem`` of the device with that id, else (a rank whose devices are all the same
    model) that one value; host memory has none (the machine's RAM is not in the trace)."""
    if events is None or events.empty:
        return None
    types = events["device_type"]
    accel = types.isin(list(ACCELERATOR_DEVICE_TYPES)).to_numpy()
    dev = pd.to_numeric(events["device_id"], errors="coerce")
    # one text per distinct (rank, type, device), not per sample (millions of [memory] events at thousands of ranks)
    # (a key per column, combined as one integer: a MultiIndex factorised per row took 5% of an 8-rank report)
    parts = [pd.factorize(a, use_na_sentinel=False) for a in (events["rank"].to_numpy(), types.to_numpy(),
                                                                dev.fillna(-1).to_numpy())]
    nt, nd = len(parts[1][1]), len(parts[2][1])
    codes, uk = pd.factorize((parts[0][0].astype(np.int64) * nt + parts[1][0]) * nd + parts[2][0])
    uniq = [(parts[0][1][k // (nt * nd)], parts[1][1][k // nd % nt], parts[2][1][k % nd]) for k in uk.tolist()]
    reserves = pd.Series(events["reserved_mb"].to_numpy(dtype=float)).groupby(codes).max().reindex(
        range(len(uniq))).to_numpy()  # NaN max: the series has no reserved at all
    text = np.array([f"{ACCELERATOR_DEVICE_TYPES[int(t)]} device {int(d)} total reserved"
                     if pd.notna(t) and int(t) in ACCELERATOR_DEVICE_TYPES else
                     "host (CPU) total reserved" if res > 0 else "host (CPU) total allocated"
                     for (_, t, d), res in zip(uniq, reserves)], dtype=object)
    series = text[codes]
    cap = np.full(len(events), np.nan)
    if props is not None and "total_memory_mb" in props:
        p = props[props["total_memory_mb"].notna()]
        exact = p.dropna(subset=["device_id"]).assign(rank=lambda x: x["rank"].astype(int),
                                                      dev=lambda x: x["device_id"].astype(float))
        exact = exact.drop_duplicates(["rank", "dev"]).set_index(["rank", "dev"])["total_memory_mb"]
        same = p.groupby("rank")["total_memory_mb"].agg(["nunique", "first"])
        same = same.loc[same["nunique"] == 1, "first"]
        idx = pd.MultiIndex.from_arrays([events["rank"].astype(int).to_numpy(), dev.to_numpy(dtype=float)])
        cap = exact.reindex(idx).to_numpy(dtype=float)
        fallback = events["rank"].astype(int).map(same).to_numpy(dtype=float)
        cap = np.where(np.isnan(cap), fallback, cap)
        cap = np.where(accel, cap, np.nan)
    # the texts as object arrays of two shared strings (np.where makes a fixed-width array, which the frame turns
    # into one string object per row: ~110 B a sample, 0.2 GB at 4,096 ranks)
    return pd.DataFrame({"rank": events["rank"].astype(int).to_numpy(), "ts_ms": events["ts_ms"].to_numpy(),
                         "kind": np.array(["host", "device"], dtype=object)[accel.astype(np.intp)],
                         "device_id": dev.to_numpy(dtype=float),
                         "series": series, "allocated_mb": events["allocated_mb"].to_numpy(dtype=float),
                         "reserved_mb": events["reserved_mb"].to_numpy(dtype=float), "active_mb": np.nan,
                         "capacity_mb": cap,
                         "capacity_source": np.array([None, "deviceProperties totalGlobalMem"],
                                                     dtype=object)[(~np.isnan(cap)).astype(np.intp)]})


_NAMED_TRACE = (".pt.trace.json", ".pt.trace.json.gz")
_TRACE_KEYS = (b'"traceEvents"', b'"schemaVersion"', b'"deviceProperties"')


def _looks_like_trace(path: Path) -> bool:
    """A Kineto trace has a ``traceEvents`` key near the start (metadata may also come after it). A file named
    ``*.pt.trace.json[.gz]`` is taken whatever it holds, so that a broken one is named in the data problems
    (or in the error when no trace is usable) instead of being passed over; so is a UTF-16 trace."""
    if path.name.lower().endswith(_NAMED_TRACE):
        return True
    try:
        opener = gzip.open if path.name.lower().endswith(".gz") else open
        with opener(path, "rb") as fh:
            head = fh.read(1 << 16)
    except (OSError, EOFError, gzip.BadGzipFile):
        return False
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):  # UTF-16 (the decoder says so)
        head = head.decode("utf-16", "replace").encode("utf-8", "replace")
    return any(k in head for k in _TRACE_KEYS)


def find_traces(root: Path) -> list[Path]:
    found = []
    base = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root):
        if len(Path(dirpath).parts) - base >= MAX_DEPTH:
            dirnames[:] = []
        dirnames.sort()
        for name in sorted(filenames):
            p = Path(dirpath) / name
            if TRACE_NAME.search(name) and p.is_file() and _looks_like_trace(p):
                found.append(p)
    return found


def detect(root: Path) -> bool:
    return bool(find_traces(root))


def decode_job(job: tuple[str, tuple[str, ...]]):
    from .kineto_decode import DEFAULT_COMM_PATTERNS, decode_trace

    path, extra = job
    problems: list = []
    try:
        decoded = decode_trace(Path(path), problems, comm_patterns=tuple(DEFAULT_COMM_PATTERNS) + tuple(extra))
    except Exception as exc:  # noqa: BLE001 - the decoder should not raise; one bad file never ends the run
        problems.append((path, f"could not decode ({type(exc).__name__}: {str(exc)[:120]}); file skipped"))
        decoded = None
    return path, decoded, problems


_KIND_WORDS = {"tp": "tp", "tensor": "tp", "dp": "dp", "data": "dp", "fsdp": "dp", "ddp": "dp", "shard": "dp",
               "replicate": "dp", "pp": "pp", "pipe": "pp", "pipeline": "pp", "cp": "cp", "context": "cp",
               "ep": "ep", "expert": "ep", "moe": "ep"}


def group_kind(desc: str, name: str = "") -> str:
    """Kind of a process group from its ``pg_desc``: the leading word names the dimension
    (``tp_pp0_dp0`` is a tp group; ``mesh_dp`` a DeviceMesh dp dimension; ``default_pg`` the world)."""
    d = (desc or "").lower()
    if not d or d.startswith(("default", "world")):
        return "world" if d else "other"
    tokens = [t for t in re.split(r"[_\-:/.\s]+", d) if t]
    if tokens and tokens[0] == "mesh" and len(tokens) > 1:
        tokens = tokens[1:]
    m = re.match(r"[a-z]+", tokens[0]) if tokens else None
    return _KIND_WORDS.get(m.group(0), "other") if m else "other"


# -- input checks (issue 14: every claim checked against what was found; module doc, "Bad input")

#: rank ids listed at most for one process group and as missing ranks; a larger claim stays a number (the
#: group keeps only the ranks that have a trace; missing ranks are counted in a data problem, not listed)
#: rank ids listed over all process groups at most (later large groups keep only the ranks with a trace)
MAX_LISTED_TOTAL = 1 << 18
#: distinct process groups kept at most, and their members (summed over the groups) at most. A real job has a
#: few groups per rank (Megatron at 4096 GPUs: tp, pp, dp, cp, ep, embedding... ~5-10k groups; the generated
#: 4096-rank run 2,051): a cap at 1,024 groups once left half the ranks of such a run without a pipeline stage.
#: 2^15, 3x that estimate: every kept group is a row of the strategy and domains tables (2^16 groups of a hostile
#: pg_config took 15 CPU-s and 400 MB in those tables, issue 29)
MAX_GROUPS = 1 << 15
MAX_GROUP_MEMBERS = 1 << 22
#: names of the groups not kept that are told apart (beyond, further ones are counted per file and shown as "N+")
_DROPPED_NAMES = 1 << 16
#: deviceProperties entries kept per file
MAX_DEVICES = 1024
#: a device's totalGlobalMem at most (1 PiB)
MAX_DEVICE_BYTES = float(1 << 50)


def _size(p: Path) -> int:
    """Bytes of JSON to decode: a ``.gz`` file's ISIZE trailer (its uncompressed size mod 2^32, RFC 1952; at
    least the compressed size), else the size on disk. Deciding on the compressed size kept a 1024-rank run of
    ~85 KB .gz files (1.5 MB of JSON each) out of the process pool below 200 ranks."""
    try:
        size = p.stat().st_size
        if p.name.lower().endswith(".gz") and size >= 18:
            with open_input(p, "rb") as fh:
                fh.seek(-4, os.SEEK_END)
                return max(size, int.from_bytes(fh.read(4), "little"))
        return size
    except OSError:
        return 0


def _adder(problems: list):
    return lambda path, text: problems.append((str(path), text))


def _assign_ranks(results, problems: list):
    """Usable decoded files by global rank (module doc, "Rank"), their hosts, backends and world-size claims.

    A file without any event reportgen reads is skipped. Rank: ``distributedInfo.rank`` if the file has the key
    (a value that is not a rank id in 0..MAX_RANKS-1 is named and ignored), else ``rank<N>``/``worker<N>`` in the
    file name, else (a lone file) rank 0. Two files with one rank: the one whose rank comes from
    ``distributedInfo`` wins over one named so; then the one with more events read; then the first in path order.
    """
    problem = _adder(problems)
    cands: dict[int, list] = {}
    unranked = []
    for path, decoded, probs in results:
        problems.extend(probs)
        if decoded is None:
            continue
        path = Path(path)
        n_rows = sum(row_count(t) for t in decoded.columns.values())
        if not n_rows:
            problem(path, "no trace event that reportgen reads (GPU kernels, memcpy/memset, CPU ops, ProfilerStep "
                          "spans, collectives, [memory]); file skipped")
            continue
        meta = decoded.meta if isinstance(decoded.meta, dict) else {}
        info = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
        rank, source = None, ""
        if "rank" in info:
            rank, source = rank_id(info["rank"], path, problem, "distributedInfo.rank"), "distributedInfo.rank"
        m = _RANK_IN_NAME.search(path.name)
        if m and rank is None:
            rank, source = rank_id(m.group(1), path, problem, f"rank in the file name ({m.group(0)!r})"), "name"
        elif m and m.group(0).lower().startswith("rank") and as_int(m.group(1)) not in (None, rank):
            problem(path, f"distributedInfo.rank {rank} differs from {m.group(0)!r} in the file name; "
                          "distributedInfo.rank is used (the profiler wrote it)")
        if rank is None:
            unranked.append((path, decoded, info))
            continue
        cands.setdefault(rank, []).append((0 if source != "name" else 1, -n_rows, str(path), path, decoded, info))
    _refuse_several_runs(cands)
    described, note = _windows(cands, problems)
    chosen: dict[int, tuple] = {}
    for rank, cs in cands.items():
        cs.sort(key=lambda c: c[:3])
        win = cs[0]
        chosen[rank] = (win[3], win[4], win[5])
        for c in cs[1:]:
            how = "from distributedInfo.rank" if c[0] == 0 else "from the file name"
            why = ("its rank comes from distributedInfo.rank, this file's only from its name" if c[0] != win[0]
                   else f"it has more events read ({-win[1]} vs {-c[1]})" if c[1] != win[1]
                   else "the same rank source and as many events: the first in path order")
            problem(c[3], f"rank {rank} ({how}) is also claimed by {win[3].name}, which is used ({why}); "
                          "this file was skipped")
    if unranked:
        if not chosen and len(unranked) == 1:
            chosen[0] = unranked[0]
            problem(unranked[0][0], "no distributedInfo.rank and no rank in the file name: taken as rank 0")
        else:
            for p, _, _ in unranked:
                problem(p, "no usable distributedInfo.rank and no rank<N>/worker<N> in the file name; skipped")
    by_rank, hosts, backends, claims = {}, {}, set(), []
    for rank, (path, decoded, info) in sorted(chosen.items()):
        by_rank[rank] = (path, decoded)
        host = decoded.meta.get("host_name") if isinstance(decoded.meta, dict) else None
        if isinstance(host, str) and host:
            hosts[rank] = cap_text(host, 256)
        elif host is not None:
            problem(path, f"host_name {cap_text(repr(host), 40)} is not a host name; ignored")
        if isinstance(info.get("backend"), str) and info["backend"]:
            backends.add(cap_text(info["backend"], 64))
        if "world_size" in info:
            claims.append((path, info["world_size"]))
    return by_rank, hosts, backends, claims, (described, note)


def _windows(cands: dict[int, list], problems: list) -> tuple[list, str]:
    """Several traces of one rank (a ``torch.profiler`` schedule with ``repeat`` > 1, dynamic profiling): keep only
    the traces of one profiling window in ``cands`` (:mod:`.windows`: grouped by their ProfilerStep numbers,
    else their first event's time; the newest complete window or ``--window``). Returns the windows described
    and their run note (empty when each rank has one trace and ``--window`` is not given)."""
    if all(len(cs) < 2 for cs in cands.values()) and windows.WANTED.get() is None:
        return [], ""
    members = []
    for rank, cs in cands.items():
        for c in cs:
            columns = c[4].columns
            st = columns.get("steps")
            steps = tuple(sorted({int(x) for x in st["step"]})) if st is not None and row_count(st) else ()
            ts = [t["ts_ns"] for t in columns.values() if "ts_ns" in t and row_count(t)]
            start = min(int(t.min()) for t in ts) if ts else None
            end = max(int(t.max()) for t in ts) if ts else None
            members.append(windows.Member(rank, c[3], c, start, end, steps, c[2]))
    found = windows.group(members)
    if len(found) < 2 and windows.WANTED.get() is None:
        return [], ""
    root = Path(os.path.commonpath([str(m.path.parent) for m in members]))
    win, why = windows.choose(found, windows.WANTED.get(), root)
    described = windows.describe(found, win, why, root)
    problems.extend(windows.problems(described, root))
    keep = {id(k) for k in win.keys}
    for rank in list(cands):
        cands[rank] = [c for c in cands[rank] if id(c) in keep]
        if not cands[rank]:
            del cands[rank]
    return described, windows.note(described, len(found))


def _no_usable_trace(root: Path, paths: list[Path], problems: list) -> InputError:
    """Exit 2 naming the file(s) and why none was usable (never a report made of nothing)."""
    why: dict[str, str] = {}
    for p, text in problems:  # the first problem of each file: the decoder's reason comes before "file skipped"
        why.setdefault(p, text)
    if len(paths) == 1:
        return InputError(paths[0], cap_text(why.get(str(paths[0]), "no usable trace"), 600))
    parts = [f"{Path(p).name}: {cap_text(text, 300)}" for p, text in list(why.items())[:3]]
    more = f"; and {len(why) - 3} more" if len(why) > 3 else ""
    return InputError(root, f"no usable PyTorch trace among {len(paths)} files: {'; '.join(parts)}{more}")


def _world(claims: list, found: list[int], problems: list) -> int | None:
    """The world size: the ``distributedInfo.world_size`` claims checked (limits.world_size); None without any."""
    problem = _adder(problems)
    valid = []
    for path, value in claims:
        n = as_int(value)
        if value is None:  # limits.world_size takes None for "no claim"; a null in the file is a bad value
            problem(path, f"distributedInfo.world_size null is not a usable rank count (1..{MAX_RANKS}); "
                          "the ranks found are used")
        elif n is None or not 1 <= n <= MAX_RANKS:
            limits.world_size(value, found, path, problem, "distributedInfo.world_size")  # states why
        else:
            valid.append((n, str(path)))
    if not valid:
        return max(found) + 1 if claims else None
    n, path = max(valid)
    sizes = sorted({v for v, _ in valid})
    if len(sizes) > 1:
        problem(path, f"distributedInfo.world_size differs between files ({', '.join(map(str, sizes[:6]))}); "
                      f"the largest, {n}, is used")
    return limits.world_size(n, found, path, problem, "distributedInfo.world_size")


def _pg_ranks(values: list, world: int | None):
    """(sorted rank ids, None) of one pg_config ``ranks`` list, or (None, why it is refused)."""
    if len(values) > MAX_RANKS:
        return None, f"lists {len(values)} ranks (more than {MAX_RANKS})"
    out = set()
    for v in values:
        n = as_int(v)
        if n is None or not 0 <= n < MAX_RANKS:
            return None, f"lists {cap_text(repr(v), 40)}, not a rank number in 0..{MAX_RANKS - 1}"
        if world is not None and n >= world:
            return None, f"lists rank {n}, outside the world size {world}"
        out.add(n)
    return sorted(out), None


def _pg_configs(files: list, world: int | None, problems: list) -> dict[str, dict]:
    """The union of the files' ``distributedInfo.pg_config`` groups, each checked (module doc, "Process groups")."""
    problem = _adder(problems)
    out: dict[str, dict] = {}
    dropped: set = set()  # names of the groups not kept (a group is listed by each of its ranks: counted once)
    more, members = 0, 0
    for path, decoded in files:
        meta = decoded.meta if isinstance(decoded.meta, dict) else {}
        info = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
        cfg = info.get("pg_config")
        if cfg is None:
            continue
        if not isinstance(cfg, list):
            problem(path, f"distributedInfo.pg_config is not a list ({type(cfg).__name__}); process groups ignored")
            continue
        not_groups = 0
        for i, pg in enumerate(cfg):
            if not isinstance(pg, dict) or not isinstance(pg.get("ranks"), list):
                not_groups += 1
                continue
            key = cap_text(str(pg.get("pg_name", pg.get("uid", i))), 256)
            desc = pg.get("pg_desc", "")
            desc = cap_text(desc if isinstance(desc, str) else str(desc), 256)
            have = out.get(key)
            if have is not None and (have["listed"] is pg["ranks"] or (  # one list object: share_group_lists
                    have["listed"] == pg["ranks"] and set(map(type, pg["ranks"])) <= {int})):
                continue  # every rank lists the world group: checked once, not once per file (O(ranks^2))
            ranks, why = _pg_ranks(pg["ranks"], world)
            if ranks is None:
                problem(path, f"distributedInfo.pg_config group {key!r} {why}; group ignored")
                continue
            if have is not None:
                if have["ranks"] != ranks:
                    problem(path, f"process group {key!r} lists other ranks than in {Path(have['path']).name}; "
                                  "the first file's list is used")
                continue
            if len(out) >= MAX_GROUPS or members + len(ranks) > MAX_GROUP_MEMBERS:
                if key in dropped or len(dropped) < _DROPPED_NAMES:
                    dropped.add(key)
                else:
                    more += 1
                continue
            members += len(ranks)
            size = pg.get("pg_size")
            if size is not None and as_int(size) != len(ranks) and len(ranks):
                problem(path, f"distributedInfo.pg_config group {key!r}: pg_size {cap_text(repr(size), 40)} is not "
                              f"the {len(ranks)} ranks it lists; the list is used")
            out[key] = {"desc": desc, "ranks": ranks, "path": str(path), "listed": pg["ranks"] if set(map(type, pg["ranks"])) <= {int} else None}
        if not_groups:
            problem(path, f"distributedInfo.pg_config: {not_groups} entries without a 'ranks' list were ignored")
    if dropped:
        problem(files[0][0], f"{len(dropped) + more:,}{'+' if more else ''} more process groups were not kept (at "
                             f"most {MAX_GROUPS:,} groups and {MAX_GROUP_MEMBERS:,} members in all); ranks only in "
                             "those groups have no stage or group from them")
    return out


def _groups_table(pgs: dict[str, dict], found: list[int], problems: list) -> pd.DataFrame:
    """The ``groups`` table. A group listing more than MAX_LISTED_RANKS ranks keeps only those with a trace
    (its claimed size is stated in a data problem, never expanded into rows)."""
    rows = []
    budget = MAX_LISTED_TOTAL
    have = set(found)
    for key, g in sorted(pgs.items()):
        ranks = g["ranks"]
        if len(ranks) > min(MAX_LISTED_RANKS, budget):
            kept = [r for r in ranks if r in have]
            problems.append((g["path"], f"process group {key!r} lists {len(ranks)} ranks; only the {len(kept)} with "
                                        f"a trace are kept (groups of more than {MAX_LISTED_RANKS} ranks are not "
                                        "listed in full)"))
            ranks = kept
            if not ranks:
                continue
        budget -= len(ranks)
        rows.append({"group": key, "name": g["desc"], "kind": group_kind(g["desc"], key), "ranks": ranks,
                     "hash": ""})
    return pd.DataFrame(rows, columns=["group", "name", "kind", "ranks", "hash"])


def _missing_ranks(world: int | None, groups: pd.DataFrame, found: list[int], claims: list,
                   problems: list) -> list[int]:
    """Ranks of the world or of a group without a trace; counted, not listed, when there are many."""
    have = set(found)
    members = {r for rs in groups["ranks"] for r in rs} - have
    if world:
        absent = world - sum(1 for r in have if r < world)
        if absent > MAX_LISTED_RANKS:
            problems.append((str(claims[0][0]) if claims else "(run)",
                             f"distributedInfo.world_size {world}: {absent} of its ranks have no trace (not listed: "
                             f"more than {MAX_LISTED_RANKS})"))
            return sorted(r for r in members if r >= world)
        members |= set(range(world)) - have
    return sorted(members)


def _refuse_several_runs(cands: dict[int, list]) -> None:
    """Traces of one rank in two different directories are two runs side by side (run/a/, run/b/), not one
    run's duplicate: refuse with a hint rather than mix them. Duplicates within one directory (two sessions of
    one worker) are left to the rank choice, which names them."""
    for rank, cs in sorted(cands.items()):
        dirs = sorted({c[3].parent for c in cs})
        if len(dirs) < 2:
            continue
        every = sorted({c[3].parent for group in cands.values() for c in group})
        common = Path(os.path.commonpath([str(d) for d in every]))
        names = ", ".join(str(d.relative_to(common)) if d != common else "." for d in every[:6])
        more = f" and {len(every) - 6} more" if len(every) > 6 else ""
        raise InputError(common, f"holds PyTorch traces of more than one run (rank {rank} is in "
                                 f"{dirs[0].relative_to(common) if dirs[0] != common else '.'} and "
                                 f"{dirs[1].relative_to(common) if dirs[1] != common else '.'}); pick one: give its "
                                 f"sub-directory ({names}{more})")


def _check_clocks(by_rank: dict, problems: list) -> dict:
    """Ranks whose first events are more than a day apart: their clocks disagree (named; times kept as written).
    Returns each rank's first exact timestamp (``timebase.origin`` of its tables but the user ranges' aggregates: a
    range that wraps the trace does not move it)."""
    starts = {}
    for rank, (path, decoded) in by_rank.items():
        t = origin(*(cols["ts_ns"] for name, cols in decoded.columns.items()
                   if name not in ("user_ranges", "user_range_spans")))
        if t is not None:
            starts[rank] = t
    if len(starts) < 2:
        return starts
    first = min(starts, key=starts.get)
    for rank, t in sorted(starts.items()):
        if t - starts[first] > _DAY_NS:
            problems.append((str(by_rank[rank][0]), f"this trace starts {(t - starts[first]) / 86_400e9:,.1f} days "
                                                    f"after rank {first}'s: the ranks' clocks disagree; the "
                                                    "timeline places them as written"))
    return starts


def _device_props(rank: int, path: Path, meta, problems: list) -> list[dict]:
    """``device_properties`` rows of one file; values that are not plausible are named and left empty."""
    props = meta.get("deviceProperties") if isinstance(meta, dict) else None
    if not isinstance(props, list):
        return []
    rej = Rejects()
    if len(props) > MAX_DEVICES:
        problems.append((str(path), f"deviceProperties lists {len(props)} devices; the first {MAX_DEVICES} are kept"))

    def num(dp, i, key, lo, hi, integer=True, hi_text=None):
        v = dp.get(key)
        if v is None:
            return None
        n = as_int(v) if integer else (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None)
        if n is None or not (lo <= n <= hi):  # NaN fails too
            rej.add(path, f"deviceProperties[{i}]", f"field {key!r}", f"not a number in {lo}..{hi_text or hi}",
                    "value ignored", unit=("in", "in"))
            return None
        return n

    rows = []
    for i, dp in enumerate(props[:MAX_DEVICES]):
        if not isinstance(dp, dict):
            rej.add(path, f"deviceProperties[{i}]", "entry", "not an object", "value ignored", unit=("in", "in"))
            continue
        mem = num(dp, i, "totalGlobalMem", 1, MAX_DEVICE_BYTES, integer=False, hi_text="2^50 (1 PiB)")
        major, minor = num(dp, i, "computeMajor", 0, 99), num(dp, i, "computeMinor", 0, 99)
        rows.append({"rank": rank, "device_id": num(dp, i, "id", 0, 65535),
                     "name": cap_text(str(dp.get("name", "")), 256),
                     "total_memory_mb": mem / 1e6 if mem is not None else math.nan,
                     "sm_count": num(dp, i, "numSms", 1, 1_000_000),
                     "compute_capability": f"{'' if major is None else major}.{'' if minor is None else minor}"})
    rej.flush(_adder(problems))
    return rows


def _check_peers(path: Path, tables: dict, world: int | None, problems: list) -> None:
    """p2p peers (``Src Rank``/``Dst Rank``) and ``Group size`` beyond the world size: named and ignored (-1)."""
    c = tables.get("collectives")
    if c is None or not row_count(c) or world is None:
        return
    for col, field_name, limit in (("src_rank", "Src Rank", world - 1), ("dst_rank", "Dst Rank", world - 1),
                                   ("group_size", "Group size", world)):
        v = c[col]
        bad = v > limit
        n = int(bad.sum())
        if n:
            first = int(v[bad][0])
            problems.append((str(path), f"{n} value{'s' if n != 1 else ''} ignored: field args[{field_name!r}] "
                                        f"beyond the world size {world} (e.g. {first})"))
            c[col] = np.where(bad, -1, v)


def read(root: Path, progress: Callable[[int, int], None] | None = None, jobs: int | None = None,
         comm_patterns: tuple[str, ...] = ()) -> Run:
    root = Path(root)
    paths = find_traces(root)
    if not paths:
        raise InputError(root, "no PyTorch trace (*.json / *.json.gz with traceEvents) found")
    total_bytes = sum(_size(p) for p in paths)
    jobs = jobs or os.cpu_count() or 1
    results = []
    lists: dict = {}  # share_group_lists: one list object per distinct pg_config rank list of the run
    if jobs > 1 and len(paths) > 1 and total_bytes >= PARALLEL_MIN_BYTES:
        with workers.pool(min(jobs, len(paths))) as pool:
            for n, res in enumerate(pool.map(decode_job, [(str(p), comm_patterns) for p in paths]), start=1):
                share_group_lists(res[1], lists)
                results.append(res)
                if progress:
                    progress(n, len(paths))
    else:
        for n, p in enumerate(paths, start=1):
            res = decode_job((str(p), comm_patterns))
            share_group_lists(res[1], lists)
            results.append(res)
            if progress:
                progress(n, len(paths))
    del lists
    return assemble(root, paths, results)


def share_group_lists(decoded, lists: dict) -> None:
    """Each ``distributedInfo.pg_config`` rank list of a decoded trace (None: nothing) replaced by the equal list
    met first in the run (``lists``: tuple of ranks -> that list, one dict per run). :func:`read` calls it as each
    trace is decoded; parts of ``reportgen reduce`` / Dask are shared once all are loaded, at their assembly.

    Every rank lists the world's group and the groups it belongs to, O(world) rank ids each: a run's lists are
    O(world^2) Python ints, 25 M objects (~0.8 GB) at 4,096 ranks, held until the read ends, and the small-object
    arenas they were spread over (~0.9 GB) stayed with the process for the rest of the run. Only lists of at least
    :data:`SHARED_LIST_MIN` plain ints are shared (``1``, ``1.0`` and ``True`` are equal as keys; a short list costs
    more to look up than it holds); anything else stays as the file wrote it, for :func:`_pg_configs` to check.
    Nothing changes a list afterwards."""
    meta = getattr(decoded, "meta", None)
    info = meta.get("distributedInfo") if isinstance(meta, dict) else None
    cfg = info.get("pg_config") if isinstance(info, dict) else None
    if not isinstance(cfg, list):
        return
    for pg in cfg:
        ranks = pg.get("ranks") if isinstance(pg, dict) else None
        if isinstance(ranks, list) and len(ranks) >= SHARED_LIST_MIN and set(map(type, ranks)) == {int}:
            pg["ranks"] = lists.setdefault(tuple(ranks), ranks)


def assemble(root: Path, paths: list, results: list) -> Run:
    """The run from every file's :func:`decode_job` result ``(path, DecodedTrace or None, problems)``, in ``paths``
    order: what :func:`read` does after the per-file part (also used by :mod:`reportgen.engine` for results
    computed on a Dask cluster or loaded from ``.reduced`` files)."""
    root = Path(root)
    problems: list[tuple[str, str]] = []
    by_rank, host_names, backends, claims, (described, note) = _assign_ranks(results, problems)
    if not by_rank:
        raise _no_usable_trace(root, paths, problems)
    found = sorted(by_rank)
    world = _world(claims, found, problems)
    pgs = _pg_configs([(path, decoded) for path, decoded in by_rank.values()], world, problems)

    run = Run(name=root.resolve().name or str(root), source_format="kineto", source_path=str(root), framework="pytorch",
              layout=f"PyTorch Kineto traces: {len(by_rank)} file{'s' if len(by_rank) != 1 else ''}"
                     + (f", backend {'/'.join(sorted(backends))}" if backends else ""))
    run.ranks = found
    run.world_size = world
    if described:  # several profiling windows (readers/windows.py)
        run.windows = list(described)
        run.notes.append(note)
    if len(set(host_names.values())) >= 2:
        run.hosts = {r: h for r, h in host_names.items() if r in by_rank}
    groups = _groups_table(pgs, found, problems)
    run.tables["groups"] = groups
    run.missing_ranks = _missing_ranks(world, groups, found, claims, problems)
    _parallel_layout(run, groups)
    starts = _check_clocks(by_rank, problems)

    # one origin for the whole run: the earliest exact timestamp of any rank (model doc, "Time base")
    run.time_origin_ns = min(starts.values()) if starts else 0
    files = []
    props = []
    for rank, (path, decoded) in sorted(by_rank.items()):
        files.append((rank, "trace", str(path)))
        props.extend(_device_props(rank, path, decoded.meta, problems))
        _check_peers(path, decoded.columns, world, problems)
    if props:
        run.tables["device_properties"] = pd.DataFrame(props)
    run.tables.update(_run_tables(by_rank, run.time_origin_ns))
    _gloo_groups(run, problems)
    samples = memory_samples(run.tables.get("memory_events"), run.tables.get("device_properties"))
    if samples is not None:
        run.tables["memory_samples"] = samples
    if "trace_steps" in run.tables:
        run.step_source = "markers"
    else:
        windows = whole_trace_windows(run.tables)
        if windows is not None:
            run.tables["trace_steps"] = windows
            run.step_source = "whole_trace"
            run.notes.append("No ProfilerStep markers in the trace: each rank is one whole-trace window (step 0), "
                             "from its first to its last GPU op (HTA's default; CPU-only ranks: first to last event "
                             "read).")
    gpu_ops = run.tables.get("gpu_ops")  # kernels, memcpy / memset on a device: a GPU run; none: gloo on CPU
    run.device = "gpu" if gpu_ops is not None and len(gpu_ops) else "cpu"
    if "dataloader" in run.tables:
        from ..timeline import dataloader_rows

        run.tables["dataloader"] = dataloader_rows(run.tables["dataloader"], run.tables.get("trace_steps"))
    if "trace_steps" in run.tables:
        gpu, coll = run.tables.get("gpu_ops"), run.tables.get("collectives")
        rows = None
        if gpu is not None and not gpu.empty:  # the device timeline is made of the same rows: kept for it
            from ..timeline import kept_gpu_rows

            rows = kept_gpu_rows(run, gpu, coll)
        run.tables["step_time"] = step_breakdown(run.tables["trace_steps"], gpu, coll, run.tables.get("dataloader"),
                                                 rows)
        del rows
        run.step_definition = (
            "Step time is the ProfilerStep span; computing, communication not overlapped and free partition it (GPU "
            "kernels clipped to the window they run in; memcpy/memset count as free)." if "gpu_ops" in run.tables else
            "CPU-only trace: step time is the ProfilerStep span; computing, communication not overlapped and free "
            "partition it on the CPU operator timeline (gloo collectives on any thread count as communication).")
        run.steps = sorted(run.tables["trace_steps"]["step"].unique().tolist())
    if "cpu_ops" in run.tables:
        run.loaders["op_flops"] = lambda: op_flops(run.tables.get("cpu_ops"), run.tables.get("trace_steps"),
                                                   run.step_source == "whole_trace")
    lost = global_peers(run.tables.get("collectives"), pgs, run.tables.get("trace_steps"))
    if lost:
        problems.append((str(root), lost))
    links = p2p_links(run.tables.get("collectives"), run.hosts)
    if links is not None:
        run.tables["p2p_links"] = links
    from .comm import kineto_ops

    run.loaders["comm_ops"] = lambda: kineto_ops(run)  # canonical communication ops, built when first asked for
    run.tables["files"] = pd.DataFrame(files, columns=["rank", "kind", "path"])
    for path, problem in problems:
        run.problem(path, problem)
    return run


def _gloo_groups(run: Run, problems: list) -> None:
    """gloo collectives carry no group: place each by its worker thread (reportgen/readers/gloo_groups.py)."""
    from .gloo_groups import assign

    coll = run.tables.get("collectives")
    if coll is None or coll.empty or "tid" not in coll:
        return
    main = coll[coll["source"] == "c10d"].groupby("rank")["tid"].agg(lambda t: t.mode().iloc[0]).to_dict()
    out, unplaced = assign(coll, run.tables.get("groups"), main)
    if out is not None:
        run.tables["collectives"] = out
    if unplaced:
        problems.append(("(run)", f"{unplaced} gloo collective span(s) could not be placed in a process group (the "
                                  "trace names none and neither their end times nor their worker threads told it); "
                                  "they are matched across ranks without a group"))


def op_flops(cpu_ops: pd.DataFrame | None, steps: pd.DataFrame | None, whole_trace: bool) -> pd.DataFrame | None:
    """The canonical ``op_flops`` rows of a PyTorch trace: the innermost counted aten ops of ``cpu_ops``
    (:func:`reportgen.flopcount.estimate_aten_ops`: an op containing another counted op on its thread is not counted
    again), FLOPs from their ``Input Dims``.

    PyTorch rules, written down once here:

    * An op containing another counted op on its thread (aten::linear -> aten::addmm) is a row with FLOPs NaN and
      ``note`` = ``flopcount.NESTED``: only the innermost op counts.
    * ``start_ms`` is the CPU op's start: the FLOPs count at the host launch (the device time of one op is not
      known); ``dur_ms`` (device duration) is NaN.
    * ``step``: the ProfilerStep window the op starts in (-1 outside every window); with one whole-trace window
      (no markers) every op is in it (step 0), even one launched before the first kernel.
    * In a trace that has device kernels, an op whose span launched no kernel on its thread
      (``cpu_ops.kernel_launches`` == 0: e.g. recorded under CUDA/HIP graph capture, where the kernels run later
      under one graph launch) counts no FLOPs: 0, ``note`` = ``flopcount.NO_KERNEL``. CPU-only traces (no device
      kernels, ``kernel_launches`` -1) count their CPU ops.
    * ``note`` "shapes not readable" (FLOPs NaN) for a counted op whose Input Dims do not fit its formula; a forward
      convolution is counted with the note that its output size is assumed equal to its input's.
    """
    from ..flopcount import CONVOLUTION, NESTED, NO_KERNEL, estimate_aten_ops

    #: a forward convolution's output size is not in the trace (aten_flops assumes it)
    SAME_SIZE_CONV = "output size assumed = input size (stride 1, 'same' padding)"

    if cpu_ops is None or cpu_ops.empty:
        return None
    ops = estimate_aten_ops(cpu_ops)
    if ops.empty:
        return None
    note = text_where(ops["flops"].isna(), "shapes not readable", "").astype(object, copy=False)
    flops = ops["flops"].to_numpy(dtype=float).copy()
    if "kernel_launches" in ops:
        none = (ops["kernel_launches"] == 0).to_numpy()
        flops[none] = 0.0
        note[none] = NO_KERNEL
    conv = (ops["method"] == CONVOLUTION).to_numpy()
    backward = np.zeros(len(ops), dtype=bool)
    if conv.any():  # the names of the convolutions only (a text search per op was 1.4 s of 738k ops)
        backward[conv] = ops["name"][conv].str.contains("backward").to_numpy()
    same_size = conv & ~backward & ~np.isnan(flops)
    note[same_size & (note == "")] = SAME_SIZE_CONV
    nested = ~ops["innermost"].to_numpy(dtype=bool)
    flops[nested] = np.nan
    note[nested] = NESTED
    step = np.full(len(ops), -1, dtype=np.int64)
    if steps is not None and not steps.empty:
        rows_of = ops.groupby("rank").indices  # rank -> positions: one pass, not one per rank
        for rank, st in steps.groupby("rank"):
            rows = rows_of.get(rank)
            if rows is None:
                continue
            if whole_trace:
                step[rows] = int(st["step"].iloc[0])
                continue
            st = st.sort_values("start_ms")
            start = ops["start_ms"].to_numpy()[rows]
            idx = np.searchsorted(st["start_ms"].to_numpy(), start, side="right") - 1
            ok = idx >= 0
            ok[ok] &= start[ok] < st["end_ms"].to_numpy()[idx[ok]]
            step[rows[ok]] = st["step"].to_numpy()[idx[ok]]
    # each column an array of its own, the text ones the ops' (name and type one array): no copy of a block of ops
    return own_columns({"rank": ops["rank"].astype(np.int64).to_numpy(), "step": step.astype(float),
                        "name": ops["name"], "type": ops["name"], "flops": flops, "method": ops["method"],
                        "note": note, "start_ms": ops["start_ms"].to_numpy(dtype=float), "dur_ms": math.nan})


def whole_trace_windows(tables: dict[str, pd.DataFrame]) -> pd.DataFrame | None:
    """``trace_steps`` rows for a trace without ProfilerStep markers: per rank one window, step 0, from the first
    GPU op's start to the last GPU op's end (HTA's whole-trace span, research/kineto-traces-and-hta.md §1.1); a rank
    without GPU ops: from the first to the last event read (collectives, aten ops, DataLoader spans, [memory])."""
    spans = []
    gpu = tables.get("gpu_ops")
    if gpu is not None and not gpu.empty:
        spans.append(gpu.groupby("rank").agg(start_ms=("start_ms", "min"), end_ms=("end_ms", "max")))
    gpu_ranks = set(spans[0].index) if spans else set()
    host = [(df if "end_ms" in df else df.assign(end_ms=df["start_ms"] + df["dur_ms"]))[["rank", "start_ms", "end_ms"]]
            for df in (tables.get(n) for n in ("collectives", "cpu_ops", "host_ops", "dataloader")) if df is not None]
    mem = tables.get("memory_events")
    if mem is not None:
        host.append(pd.DataFrame({"rank": mem["rank"], "start_ms": mem["ts_ms"], "end_ms": mem["ts_ms"]}))
    host = [df[~df["rank"].isin(gpu_ranks)] for df in host]
    if any(not df.empty for df in host):
        spans.append(pd.concat(host).groupby("rank").agg(start_ms=("start_ms", "min"), end_ms=("end_ms", "max")))
    if not spans:
        return None
    out = pd.concat(spans).reset_index()
    out.insert(1, "step", 0)
    return out[["rank", "step", "start_ms", "end_ms"]].sort_values("rank", ignore_index=True)


def _parallel_layout(run: Run, groups: pd.DataFrame) -> None:
    par = {}
    for kind in ("dp", "tp", "pp", "cp", "ep"):
        sizes = groups.loc[groups["kind"] == kind, "ranks"].map(len)
        if not sizes.empty:
            par[kind] = int(sizes.max())
    stage_of = {}
    for row in groups[groups["kind"] == "pp"].itertuples():
        if len(row.ranks) > 1:
            for i, r in enumerate(row.ranks):
                stage_of[r] = i + 1
    if par.get("pp", 1) > 1:
        par["stages"] = par["pp"]
        par["mode"] = "pipeline-parallel"
    elif par:
        par["mode"] = "model-parallel" if par.get("tp", 1) > 1 else "data-parallel"
    run.parallel = par
    run.stage_map = stage_of


def _stacked(by_rank: dict, name: str) -> dict[str, np.ndarray] | None:
    """One decoded table of every rank, stacked in rank order: its columns (in the order the ranks first have them),
    then ``rank`` (None if no rank has rows). A column that some ranks lack is NaN on their rows (float, or object
    next to text), as pandas' concat fills it.

    The workers send columns (:class:`DecodedTrace`) and each column is concatenated once: at 1024 ranks a frame per
    rank (made in the worker, pickled, stacked by ``pd.concat``) was most of the serial read."""
    parts, ranks = [], []
    for rank, (_, decoded) in sorted(by_rank.items()):
        t = decoded.columns.pop(name, None)  # handed over: the decoded copy is not kept beside the run's
        if t is not None and row_count(t):
            parts.append(t)
            ranks.append(np.full(row_count(t), rank, dtype=np.int64))
    if not parts:
        return None
    out = {}
    for c in dict.fromkeys(c for t in parts for c in t):
        cols = [t.get(c) for t in parts]
        if any(v is None for v in cols):
            fill = object if any(v.dtype == object for v in cols if v is not None) else np.float64
            cols = [np.full(len(r), np.nan, dtype=fill) if v is None else v for v, r in zip(cols, ranks)]
        out[c] = np.concatenate(cols) if len(cols) > 1 else cols[0]
    out["rank"] = np.concatenate(ranks)
    del parts, ranks, cols, t
    workers.release_free_memory()  # every rank's piece of it (small blocks the heap would keep)
    return out


def _ms(t: dict, t0: int, keep: list[str] | None = None) -> pd.DataFrame:
    """A stacked table (:func:`_stacked`) with int-ns ts/dur turned into start_ms/dur_ms/end_ms (relative to t0):
    ``rank`` first, the other columns as decoded (``keep``: only those), then start_ms, dur_ms, end_ms."""
    ts, dur = t["ts_ns"], t["dur_ns"]
    cols = keep if keep is not None else [c for c in t if c not in ("rank", "ts_ns", "dur_ns")]
    return pd.DataFrame({"rank": t["rank"], **{c: t[c] for c in cols}, "start_ms": rel_ms(ts, t0),
                         "dur_ms": dur / 1e6, "end_ms": rel_ms(ts + dur, t0)})


def _run_tables(by_rank: dict, t0: int) -> dict[str, pd.DataFrame]:
    """Every rank's decoded tables (exact int ns) -> run-model tables in ms relative to the run origin ``t0``,
    rows in rank order (each rank's rows in the decoder's order; ``gpu_ops`` in time order within a rank)."""
    out = {}
    # the tables in the order a rank-by-rank pass first meets them (as the former per-rank conversion did);
    # taken before _stacked, which hands each decoded table over to the run (and drops it from the decoded trace)
    met = {name: i for i, (_, (_, d)) in reversed(list(enumerate(sorted(by_rank.items()))))
           for name, t in d.columns.items() if row_count(t)}
    steps = _stacked(by_rank, "steps")
    if steps is not None:
        out["trace_steps"] = pd.DataFrame({"rank": steps["rank"], "step": steps["step"].astype(int),
                                           "start_ms": rel_ms(steps["ts_ns"], t0),
                                           "end_ms": rel_ms(steps["ts_ns"] + steps["dur_ns"], t0)})
    del steps  # each stacked table is dropped once its frame is made: the tables are never all held twice
    launches = any("launch_ts_ns" in d.columns.get(n, ()) for _, d in by_rank.values()
                   for n in ("gpu_ops", "hta_events"))
    for rank, (_, decoded) in by_rank.items():
        g = decoded.columns.get("gpu_ops")
        if g is not None and "correlation" not in g:
            g["correlation"] = np.full(row_count(g), -1, dtype=np.int64)
        for name in ("gpu_ops", "hta_events"):  # one dtype when stacked: a rank without calls has none
            t = decoded.columns.get(name)
            if launches and t is not None and "launch_ts_ns" not in t:
                t["launch_ts_ns"] = np.full(row_count(t), NO_LAUNCH, dtype=np.int64)
    g = _stacked(by_rank, "gpu_ops")
    if g is not None:
        # each rank's device ops in time order (start, then end; stable), not the writer's (by stream, by kind): the
        # device timeline is in this order (timeline.build), so it shares these arrays instead of a sorted copy
        order = np.lexsort((g["ts_ns"] + g["dur_ns"], g["ts_ns"], g["rank"]))
        if not (order == np.arange(len(order))).all():
            g = {k: v[order] for k, v in g.items()}
        del order
        # ts_ns/dur_ns: the file's exact times on its own clock, for HTA's whole-µs convention (intervals.py)
        out["gpu_ops"] = pd.DataFrame({"rank": g["rank"], "name": g["name"], "kind": g["kind"],
                                       "stream": g["stream"], "start_ms": rel_ms(g["ts_ns"], t0),
                                       "dur_ms": g["dur_ns"] / 1e6, "end_ms": rel_ms(g["ts_ns"] + g["dur_ns"], t0),
                                       "correlation": g["correlation"], "ts_ns": g["ts_ns"], "dur_ns": g["dur_ns"],
                                       **({"launch_ts_ns": g["launch_ts_ns"].astype(np.int64)} if launches else {})})
    del g
    c = _stacked(by_rank, "collectives")
    if c is not None:
        df = _ms(c, t0)
        for col in ("in_bytes", "out_bytes"):
            if col in df:
                df[col.replace("_bytes", "_mb")] = df.pop(col) / 1e6
        out["collectives"] = df
    del c
    m = _stacked(by_rank, "memory")
    if m is not None:
        out["memory_events"] = pd.DataFrame({
            "rank": m["rank"], "ts_ms": rel_ms(m["ts_ns"], t0), "device_type": m["device_type"],
            "device_id": m["device_id"], "allocated_mb": m["total_allocated"] / 1e6,
            "reserved_mb": m["total_reserved"] / 1e6})
    del m
    ops = _stacked(by_rank, "cpu_ops")
    if ops is not None:
        out["cpu_ops"] = _ms(ops, t0)
    del ops
    h = _stacked(by_rank, "hta_events")
    if h is not None:  # file clock ns, only for HTA's conventions (intervals.hta_gpu_time_metrics)
        out["hta_events"] = pd.DataFrame(h)
    del h
    h = _stacked(by_rank, "host_ops")
    if h is not None:
        out["host_ops"] = _ms(h, t0)
    dl = _stacked(by_rank, "dataloader")
    if dl is not None:
        out["dataloader"] = _ms(dl, t0, keep=["name"])[["rank", "name", "start_ms", "dur_ms"]]
    u = _stacked(by_rank, "user_ranges")
    if u is not None:
        out["user_ranges"] = pd.DataFrame({
            "rank": u["rank"], "side": u["side"], "name": u["name"], "count": u["count"].astype(np.int64),
            "total_ms": u["total_ns"] / 1e6, "max_ms": u["max_ns"] / 1e6, "first_ms": rel_ms(u["ts_ns"], t0)})
    u = _stacked(by_rank, "user_range_spans")
    if u is not None:
        out["user_range_spans"] = pd.DataFrame({
            "rank": u["rank"], "side": u["side"], "name": u["name"], "start_ms": rel_ms(u["ts_ns"], t0),
            "dur_ms": u["dur_ns"] / 1e6})
    source = {"trace_steps": "steps", "memory_events": "memory"}
    fixed = list(out)
    return {name: out[name] for name in sorted(out, key=lambda n: (met[source.get(n, n)], fixed.index(n)))}


_P2P = ("send", "recv")


def global_peers(coll: pd.DataFrame | None, groups: dict[str, dict], steps: pd.DataFrame | None) -> str | None:
    """Fill ``dst_rank`` (send) / ``src_rank`` (recv) of the p2p rows that name only a group-local peer
    (``peer_local``: gloo spans and c10d ops, whose Concrete Inputs say neither the process group nor a global
    rank; module doc, "p2p peers"). In place; returns the data problem line when some ops kept no peer, else None.

    The candidates of an op on rank r with local peer p are the groups g of ``groups`` (pg_config union) holding r
    with more than p ranks and g[p] != r (the group the row names, when it names one of them). One global peer among
    them: taken. Several: the group whose counterpart exists: rank q = g[p] has ops of the other direction whose
    local peer is r's index in g, as many in each step, of the same message size. Ops are taken together per
    class (source, rank, direction, local peer, elements); a class whose counterpart class is settled takes no
    other class's counterpart (propagated until nothing changes), which settles e.g. a TP ring exchange (rank 2
    sends to local 1: rank 3 in TP {2,3} or rank 0 in DP {0,2}, whose own sends to local 1 are settled to rank 1).
    """
    if coll is None or "peer_local" not in coll or coll.empty:
        return None
    is_send, is_recv = coll["collective"] == "send", coll["collective"] == "recv"
    known = np.where(is_send, coll["dst_rank"], np.where(is_recv, coll["src_rank"], -1)) >= 0
    todo = (is_send | is_recv).to_numpy() & ~known & (coll["peer_local"] >= 0).to_numpy()
    if not todo.any():
        return None
    from ..timeline import assign_steps

    rows = coll[todo]
    step = assign_steps(rows, steps) if "start_ms" in rows else np.full(len(rows), -1)
    names = list(groups)
    members = [list(groups[k]["ranks"]) for k in names]
    index = [{r: i for i, r in enumerate(m)} for m in members]
    of_rank: dict[int, list[int]] = {}
    for gi, m in enumerate(members):
        for r in m:
            of_rank.setdefault(r, []).append(gi)
    named = {k: gi for gi, k in enumerate(names)}
    gname = rows["group_name"].astype(str).to_numpy() if "group_name" in rows else np.full(len(rows), "")
    key_cols = pd.DataFrame({"source": rows["source"].astype(str).to_numpy(), "rank": rows["rank"].to_numpy(np.int64),
                             "coll": rows["collective"].astype(str).to_numpy(),
                             "peer": rows["peer_local"].to_numpy(np.int64),
                             "n": rows["in_nelems"].to_numpy(np.int64), "g": gname, "step": step})
    classes = key_cols.groupby(["source", "rank", "coll", "peer", "n", "g"], sort=False).indices
    counts = {}  # (source, rank, coll, peer, n) -> per-step counts (one class over every named group)
    for (src, r, c, p, n, _), pos in classes.items():
        k = (src, int(r), c, int(p), int(n))
        st, cnt = np.unique(key_cols["step"].to_numpy()[pos], return_counts=True)
        have = counts.get(k, {})
        for a, b in zip(st.tolist(), cnt.tolist()):
            have[a] = have.get(a, 0) + b
        counts[k] = have
    other = {"send": "recv", "recv": "send"}
    cand: dict[tuple, dict[tuple, set]] = {}  # class -> counterpart class -> groups
    single: dict[tuple, int] = {}  # classes whose groups give one global peer
    reason: dict[tuple, str] = {}
    for (src, r, c, p, n, g) in classes:
        k = (src, int(r), c, int(p), int(n))
        gis = [named[g]] if g in named and int(r) in index[named[g]] else of_rank.get(int(r), [])
        peers: dict[int, list[int]] = {}
        for gi in gis:
            m = members[gi]
            if p < len(m) and m[p] != r:
                peers.setdefault(m[p], []).append(gi)
        if not peers:
            reason[k] = "its local peer index is beyond every process group of its rank (distributedInfo.pg_config)"
            continue
        if len(peers) == 1:
            single[k] = next(iter(peers))
        cc = cand.setdefault(k, {})
        for q, gl in peers.items():
            for gi in gl:
                ck = (src, q, other[c], index[gi][int(r)], int(n))
                if counts.get(ck) == counts[k]:
                    cc.setdefault(ck, set()).add(gi)
    # a class bound to one counterpart class binds it back and takes it from every other class (symmetric relation)
    queue = [k for k, cc in cand.items() if len(cc) == 1]
    while queue:
        k = queue.pop()
        cc = cand.get(k)
        if not cc or len(cc) != 1:
            continue
        (d,) = cc
        back = cand.get(d)
        if back is None or k not in back:
            continue
        for e in list(back):
            if e != k:
                del back[e]
                ce = cand.get(e)
                if ce is not None and d in ce:
                    del ce[d]
                    if len(ce) == 1:
                        queue.append(e)
    peer_of: dict[tuple, tuple[int]] = {}
    for k in counts:
        cc = cand.get(k, {})
        qs = {d[1] for d in cc}
        if k in single:
            q = single[k]
        elif len(qs) == 1:
            q = next(iter(qs))
        else:
            reason.setdefault(k, "no rank it could mean has the matching opposite ops (as many per step, same size)"
                              if not qs else "several process groups fit it equally")
            continue
        peer_of[k] = (q,)
    q = np.full(len(rows), -1, dtype=np.int64)
    lost: dict[str, int] = {}
    # an op is a c10d row and the gloo span after it: counted once (its gloo span), c10d rows only without spans
    counted = "gloo" if (key_cols["source"] == "gloo").any() else None
    for (src, r, c, p, n, g), pos in classes.items():
        k = (src, int(r), c, int(p), int(n))
        hit = peer_of.get(k)
        if hit is None:
            why = reason.get(k, "several process groups fit it equally")
            if counted is None or src == counted:
                lost[why] = lost.get(why, 0) + len(pos)
            continue
        q[pos] = hit[0]
    idx = rows.index
    send = rows["collective"].to_numpy() == "send"
    coll.loc[idx[send], "dst_rank"] = q[send]
    coll.loc[idx[~send], "src_rank"] = q[~send]
    if not lost:
        return None
    n_lost = sum(lost.values())
    why = "; ".join(f"{v:,}: {k}" for k, v in sorted(lost.items(), key=lambda kv: -kv[1]))
    n_all = int((key_cols["source"] == counted).sum()) if counted else len(rows)
    return (f"{n_lost:,} of {n_all:,} point-to-point ops that name only a group-local peer kept no global peer "
            f"(the trace does not say their process group) — {why}")


def p2p_links(coll: pd.DataFrame | None, hosts: dict[int, str]) -> pd.DataFrame | None:
    """Per directed pair of global ranks: bytes and transfer time of matched send/recv kernels (module doc)."""
    joined = _p2p_joined(coll)
    if joined is None:
        return None
    both, timed = joined
    rows = []
    # each (src, dst) pair's rows as slices of arrays sorted once (in their order); sums as a pandas sum of the
    # pair's column makes them (NaN as 0, then one numpy sum): a frame per pair cost ~1.5 ms, seconds at 1,024 ranks
    both = both[both["src"].notna() & both["dst"].notna()]
    order = np.lexsort((both["dst"].to_numpy(), both["src"].to_numpy()))
    src_a, dst_a = both["src"].to_numpy()[order], both["dst"].to_numpy()[order]
    group_a, matched_a = both["group"].to_numpy()[order], both["matched"].to_numpy(dtype=bool)[order]
    size_a = np.nan_to_num(both["size_mb"].to_numpy(float)[order], nan=0.0)
    time_a = np.nan_to_num(both["time_ms"].to_numpy(float)[order], nan=0.0)
    cut = np.r_[np.flatnonzero(np.r_[True, (src_a[1:] != src_a[:-1]) | (dst_a[1:] != dst_a[:-1])]), len(order)]
    for a, b in zip(cut[:-1], cut[1:]) if len(order) else ():
        src, dst = int(src_a[a]), int(dst_a[a])
        hs, hd = hosts.get(src), hosts.get(dst)
        transport = "p2p" if not (hs and hd) else "intra-host" if hs == hd else "inter-host"
        size_mb, time_ms = float(size_a[a:b].sum()), float(time_a[a:b].sum()) if timed else math.nan
        rows.append({"group": group_a[a], "src_rank": src, "dst_rank": dst, "transport": transport,
                     "ops": int(b - a), "matched": int(matched_a[a:b].sum()), "size_mb": size_mb, "time_ms": time_ms,
                     "bandwidth_gbps": size_mb / time_ms if time_ms > 0 else math.nan})
    return pd.DataFrame(rows, columns=["group", "src_rank", "dst_rank", "transport", "ops", "matched", "size_mb",
                                       "time_ms", "bandwidth_gbps"])


def _take(s: pd.Series, at: np.ndarray) -> pd.Series:
    """``s.iloc[at]`` on a new RangeIndex: only those rows copied, the dtype kept (objects stay objects)."""
    return pd.Series(s.to_numpy()[at] if isinstance(s.dtype, np.dtype) else s.array.take(at), dtype=s.dtype,
                     copy=False)


def _p2p_joined(coll: pd.DataFrame | None) -> tuple[pd.DataFrame, bool] | None:
    """The send and receive halves of :func:`p2p_links`, joined: the n-th send from a to b with the n-th receive on b
    from a (src, dst, n, the halves' columns with suffixes _s / _r, matched, time_ms, size_mb, group), and whether
    their durations are transfer times (kernels: yes; gloo spans: no); None without any."""
    if coll is None or "dst_rank" not in coll:
        return None
    p2p = coll["collective"].isin(_P2P)
    rows, timed = (coll["source"] == "gpu_kernel") & p2p, True
    if not rows.any():  # CPU-only (gloo) traces: the gloo send / recv spans, whose durations are no transfer time
        rows, timed = (coll["source"] == "gloo") & p2p, False
    # the send / receive rows of the columns read here, column by column: those rows copied whole (22 columns) were
    # the peak of a big run's read (issue 30 #1), and columns selected first copy every row's (pandas 2)
    at = np.flatnonzero(rows.to_numpy(dtype=bool, na_value=False))
    k = pd.DataFrame({c: _take(coll[c], at) for c in ("rank", "collective", "src_rank", "dst_rank", "start_ms",
                                                      "dur_ms", "in_mb", "out_mb", "group_ranks", "group_name")},
                     copy=False)
    k.index = coll.index.take(at)
    sends = k[(k["collective"] == "send") & (k["dst_rank"] >= 0)].copy()
    recvs = k[(k["collective"] == "recv") & (k["src_rank"] >= 0)].copy()
    if sends.empty and recvs.empty:
        return None
    sends["src"], sends["dst"] = sends["rank"], sends["dst_rank"]
    recvs["src"], recvs["dst"] = recvs["src_rank"], recvs["rank"]
    sends, recvs = (df.sort_values("start_ms", kind="stable") for df in (sends, recvs))
    for df in (sends, recvs):
        df["n"] = df.groupby(["src", "dst"]).cumcount()
    both = sends[["src", "dst", "n", "group_ranks", "group_name", "in_mb", "out_mb", "dur_ms"]].merge(
        recvs[["src", "dst", "n", "group_ranks", "group_name", "in_mb", "out_mb", "dur_ms"]],
        on=["src", "dst", "n"], how="outer", suffixes=("_s", "_r"))
    both["matched"] = both["dur_ms_s"].notna() & both["dur_ms_r"].notna()
    both["time_ms"] = both[["dur_ms_s", "dur_ms_r"]].min(axis=1).where(both["matched"] & timed)
    size = both[["in_mb_s", "out_mb_s"]].max(axis=1)
    both["size_mb"] = size.where(size.notna(), both[["in_mb_r", "out_mb_r"]].max(axis=1)).where(both["matched"])
    ranks = both["group_ranks_s"].where(both["group_ranks_s"].notna(), both["group_ranks_r"]).fillna("")
    names = both["group_name_s"].where(both["group_name_s"].notna(), both["group_name_r"]).fillna("")
    both["group"] = ranks.where(ranks != "", names).astype(str)
    return both, timed


def step_breakdown(steps: pd.DataFrame, gpu: pd.DataFrame | None, coll: pd.DataFrame | None,
                   dataloader: pd.DataFrame | None = None, gpu_timeline: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per rank and step: the step window is the ProfilerStep span (the step time users log).

    GPU traces: computing, communication, comm not overlapped, overlapped and free (memcpy / memset / idle) are
    measured on the ranks' device timeline by :func:`reportgen.timeline.breakdown` (the definitions, the same as
    the Ascend family's: step = computing + comm not overlapped + free; kernels clipped to the window they run in,
    not to the step that launched them). Pipelines (only when some rank has send/recv NCCL kernels with
    ``Collective name``): bubble (pure receive), stage and comm not overlapped excluding receive, likewise;
    otherwise these stay NaN.
    Preparing = the first GPU op (kernel, comm, memcpy, memset) starting in W minus the step start, for the ranks
    whose trace shows the input loading (``enumerate(DataLoader)`` spans; NaN for the others and when no GPU
    op starts in W) — the same "step start to first device op" as Ascend's Preparing.
    CPU-only traces (gloo): communication = |U(gloo collectives on any thread) ∩ W| and the rest of the step is
    ``other_ms``; computing / free are NaN here and measured afterwards on the device timeline (main-thread CPU
    ops against the gloo spans, :func:`reportgen.timeline.fill_step_time`) when the trace has those ops.
    ``gpu_timeline``: :func:`reportgen.timeline.gpu_rows` of ``gpu`` and ``coll``, when the caller made them.
    """
    from ..timeline import breakdown, gpu_rows

    p2p = coll is not None and not coll.empty and "collective" in coll and \
        (coll["source"].eq("gpu_kernel") & coll["collective"].isin(_P2P)).any()
    loaders = set(dataloader["rank"].unique()) if dataloader is not None and not dataloader.empty else set()
    gpu_ranks = set(gpu["rank"]) if gpu is not None else set()
    parts = []
    if gpu_ranks:
        tl = gpu_rows(gpu, coll) if gpu_timeline is None else gpu_timeline
        bd = breakdown(tl, steps[steps["rank"].isin(gpu_ranks)], receive=bool(p2p))
        del tl
        bd["other_ms"] = math.nan
        bd["preparing_ms"] = math.nan
        if loaders & gpu_ranks:
            bd["preparing_ms"] = _preparing(bd, steps, gpu, loaders & gpu_ranks)
        parts.append(bd)
    rows = []
    gloo = ByRank(coll[coll["source"] == "gloo"] if coll is not None and not coll.empty else None)
    for rank, st in steps[~steps["rank"].isin(gpu_ranks)].groupby("rank"):
        c = gloo[rank]
        comm = union(c["start_ms"].to_numpy(), c["end_ms"].to_numpy()) if c is not None \
            and not c.empty else (np.empty(0), np.empty(0))
        for s in st.itertuples():
            w = s.end_ms - s.start_ms
            comm_w = length(*clip(comm, s.start_ms, s.end_ms))
            rows.append({"rank": rank, "step": s.step, "step_ms": w, "comm_ms": comm_w, "computing_ms": math.nan,
                         "comm_not_overlapped_ms": math.nan, "overlapped_ms": math.nan, "free_ms": math.nan,
                         "other_ms": w - comm_w})
    if rows:
        parts.append(pd.DataFrame(rows))
    cols = ["rank", "step", "step_ms", "computing_ms", "comm_not_overlapped_ms", "overlapped_ms", "comm_ms",
            "free_ms", "other_ms"]
    extra = ["stage_ms", "bubble_ms", "comm_not_overlapped_exclude_receive_ms", "preparing_ms"]
    df = pd.concat(parts, ignore_index=True).reindex(columns=cols + extra) if parts \
        else pd.DataFrame(columns=cols + extra)
    df[extra] = df[extra].astype(float)
    return df.sort_values(["rank", "step"], kind="stable").reset_index(drop=True)


def _preparing(bd: pd.DataFrame, steps: pd.DataFrame, gpu: pd.DataFrame, ranks: set) -> np.ndarray:
    """``preparing_ms`` of the rows of ``bd`` (rank, step) whose rank is in ``ranks``: the first GPU op starting
    in the step window W minus W's start, NaN when none starts in W (step_breakdown's doc). One sort of all GPU
    op starts by (rank, start); each rank's windows search only its own slice."""
    win = bd[["rank", "step"]].merge(steps, on=["rank", "step"], how="left")
    out = np.full(len(bd), math.nan)
    gr, gs = gpu["rank"].to_numpy(), gpu["start_ms"].to_numpy()
    order = np.lexsort((gs, gr))
    gr, gs = gr[order], gs[order]
    wr, w0s, w1s = win["rank"].to_numpy(), win["start_ms"].to_numpy(), win["end_ms"].to_numpy()
    by_rank = pd.Series(np.arange(len(win))).groupby(wr).indices
    for rank in ranks:
        rows = by_rank.get(rank)
        if rows is None:
            continue
        lo, hi = np.searchsorted(gr, rank, side="left"), np.searchsorted(gr, rank, side="right")
        first = gs[lo:hi]
        w0, w1 = w0s[rows], w1s[rows]
        i = np.searchsorted(first, w0, side="left")
        f = first[np.minimum(i, len(first) - 1)]
        out[rows] = np.where((i < len(first)) & (f < w1), f - w0, math.nan)
    return out
