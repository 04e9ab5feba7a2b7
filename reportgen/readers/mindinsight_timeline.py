"""``ascend_timeline_display_{rank}.json`` / ``gpu_timeline_display_{rank}.json`` -> operator timeline tables.

Format facts: ../shared/research/mindinsight-cluster-profiling.md §2.7 (the file) and §3.7 (MindInsight's Marey
service, which reads it).

Generations:

* MindSpore <= 2.1: a JSON list of Chrome-trace ``X`` events ``{name, ph, tid, ts (µs), dur (µs), pid}``;
  pid = device id for AI Core ops (tid = stream id), 9000 AI CPU, 10000 communication ops, 11000 host CPU,
  12000 "Op Overlap Analyse"; step blocks on tid 100000 ("Steps") named "1", "2", ...; scope blocks carry
  ``scope_level``; then ``M`` metadata events.
* MindSpore 2.3: msprof Chrome-trace events, as a list or ``{"traceEvents": [...]}``, with ``process_name`` /
  ``thread_name`` metadata; ``ts`` may be a string.

Operators, as MindInsight's TimelineService: ``X`` events with tid, ts, dur and ``-op`` in the name, except
AtomicAddrClean / StreamSend / StreamReceive (and except the Steps block, scope blocks and the 12000
"Op Overlap Analyse" process). A scope prefix (``Default/.../AllReduce-op5``) is dropped from the name so the
same operator matches across ranks. ``kind`` = "communication" when the name names a collective / p2p op
(AllReduce, AllGather, ReduceScatter, Send, Receive, Broadcast, AllToAll, hcom) or pid == 10000 (or the
process is named as communication / HCCL), else "computation".

Steps: the events named by a step number on the Steps block (tid 100000, or a thread / process named
"Steps") -> one window per step.

Output: ``mi_timeline_ops`` (rank, name, kind, stream, start_ns, dur_ms) and ``mi_timeline_steps``
(rank, step, start_ns, end_ns), absolute times as exact int ns (the reader makes them ms relative to the run
origin). Bad input (unreadable, truncated or not a trace) -> a ``(path, problem)`` line
and ``{}``; never an exception.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from ..timebase import to_ns

OPS_COLUMNS = ["rank", "name", "kind", "stream", "start_ns", "dur_ms"]
STEPS_COLUMNS = ["rank", "step", "start_ns", "end_ns"]

STEPS_TID = 100000
COMM_PID = 10000
OVERLAP_PID = 12000
_EXCLUDED = ("AtomicAddrClean", "StreamSend", "StreamReceive")
_COMM = re.compile(r"AllReduce|AllGather|ReduceScatter|Send|Receive|Broadcast|AllToAll|hcom", re.IGNORECASE)
_COMM_PROCESS = re.compile(r"hccl|communication", re.IGNORECASE)




def _int_or_str(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return v


def parse_timeline_display(path, rank, problems) -> dict:
    path = Path(path)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            doc = json.load(fh, parse_float=str)  # float literals as text: exact times (timebase.to_ns)
    except (OSError, ValueError) as exc:
        problems.append((str(path), f"timeline display not readable as JSON ({type(exc).__name__}: {exc}); "
                                    f"file skipped"))
        return {}
    events = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(events, list):
        problems.append((str(path), "timeline display is not a list of trace events; file skipped"))
        return {}

    pnames: dict = {}
    tnames: dict = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M" and isinstance(e.get("args"), dict):
            n = str(e["args"].get("name", ""))
            if e.get("name") == "process_name":
                pnames[str(e.get("pid"))] = n
            elif e.get("name") == "thread_name":
                tnames[(str(e.get("pid")), str(e.get("tid")))] = n

    ops, steps = [], []
    bad = 0
    for e in events:
        if not isinstance(e, dict) or e.get("ph", "X") != "X":
            continue
        name = e.get("name")
        if not isinstance(name, str) or "tid" not in e:
            continue
        ts, dur = to_ns(e.get("ts")), to_ns(e.get("dur"))
        if ts is None or dur is None:
            bad += 1
            continue
        pid, tid = str(e.get("pid")), str(e.get("tid"))
        pname = pnames.get(pid, "")
        tname = tnames.get((pid, tid), "")
        on_steps = tid == str(STEPS_TID) or tname.strip().lower() == "steps" or pname.strip().lower() == "steps"
        if on_steps:
            if name.strip().isdigit():
                steps.append((rank, int(name), ts, ts + dur))
            continue
        if "-op" not in name or any(x in name for x in _EXCLUDED):
            continue
        if pid == str(OVERLAP_PID) or "overlap" in pname.lower():
            continue
        args = e.get("args")
        if isinstance(args, dict) and "scope_level" in args:
            continue
        short = name.rsplit("/", 1)[-1]
        comm = bool(_COMM.search(short)) or pid == str(COMM_PID) or bool(_COMM_PROCESS.search(pname))
        ops.append((rank, short, "communication" if comm else "computation", _int_or_str(e.get("tid")),
                    ts, dur / 1e6))
    if bad:
        problems.append((str(path), f"{bad} timeline event(s) without numeric ts/dur ignored"))
    out = {}
    if ops:
        out["mi_timeline_ops"] = pd.DataFrame(ops, columns=OPS_COLUMNS)
    if steps:
        out["mi_timeline_steps"] = (pd.DataFrame(steps, columns=STEPS_COLUMNS)
                                    .drop_duplicates(["rank", "step"]).reset_index(drop=True))
    return out
