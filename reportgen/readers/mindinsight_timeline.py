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
and ``{}``; never an exception. Values are strict (issue 14): an event whose ``ts`` / ``dur`` is not a plain
number, is negative, beyond the int64 ns range or (``dur``) over a day is skipped and counted per reason; a
step name that is not a step number in ``0..MAX_STEP`` is not a step; names are capped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd

from .. import limits
from ..limits import MAX_DURATION_MS, Rejects, as_int, strict_float
from ..timebase import to_ns
from ..errors import InputError
from ._files import json_problem, read_text

OPS_COLUMNS = ["rank", "name", "kind", "stream", "start_ns", "dur_ms"]
STEPS_COLUMNS = ["rank", "step", "start_ns", "end_ns"]

STEPS_TID = 100000
COMM_PID = 10000
OVERLAP_PID = 12000
_EXCLUDED = ("AtomicAddrClean", "StreamSend", "StreamReceive")
_COMM = re.compile(r"AllReduce|AllGather|ReduceScatter|Send|Receive|Broadcast|AllToAll|hcom", re.IGNORECASE)
_COMM_PROCESS = re.compile(r"hccl|communication", re.IGNORECASE)
#: the highest step number taken as one (as the step trace reader)
MAX_STEP = 2**31 - 1


def _int_or_str(v):
    n = as_int(v)
    return n if n is not None else limits.cap_text(v, 256)


def _time(v, what: str) -> tuple[int | None, str | None]:
    """An event's ``ts`` / ``dur`` (µs; JSON numbers arrive as text) -> (exact ns, None) or (None, why)."""
    if v is None:
        return None, "missing"
    if strict_float(v) is None:
        return None, "not a number"
    ns = to_ns(v)
    if ns is None:
        return None, "beyond the int64 ns range"
    if ns < 0:
        return None, "negative"
    if what == "dur" and ns > MAX_DURATION_MS * 1e6:
        return None, "over one day"
    return ns, None


def parse_timeline_display(path, rank, problems) -> dict:
    path = Path(path)
    try:
        text = read_text(path)
    except InputError as exc:
        problems.append((str(path), f"timeline display: {exc.problem}; file skipped"))
        return {}
    try:
        doc = json.loads(text, parse_float=str)  # float literals as text: exact times (timebase.to_ns)
    except (ValueError, RecursionError) as exc:
        problems.append((str(path), f"timeline display {json_problem(exc, text)}; file skipped"))
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
    rejects = Rejects()
    for e in events:
        if not isinstance(e, dict) or e.get("ph", "X") != "X":
            continue
        name = e.get("name")
        if not isinstance(name, str) or "tid" not in e:
            continue
        (ts, why_ts), (dur, why_dur) = _time(e.get("ts"), "ts"), _time(e.get("dur"), "dur")
        if ts is None or dur is None:
            rejects.add(path, None, "event 'ts'" if ts is None else "event 'dur'", why_ts or why_dur,
                        action="value skipped")
            continue
        name = limits.cap_text(name)
        pid, tid = str(e.get("pid")), str(e.get("tid"))
        pname = pnames.get(pid, "")
        tname = tnames.get((pid, tid), "")
        on_steps = tid == str(STEPS_TID) or tname.strip().lower() == "steps" or pname.strip().lower() == "steps"
        if on_steps:
            step = as_int(name) if name.strip().isdigit() else None
            if step is not None and step <= MAX_STEP:
                steps.append((rank, step, ts, ts + dur))
            elif name.strip().isdigit():
                rejects.add(path, None, "Steps event name", f"not a step number (0..{MAX_STEP})", action="value skipped")
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
    rejects.flush(lambda p, t: problems.append((p, t)))
    out = {}
    if ops:
        out["mi_timeline_ops"] = pd.DataFrame(ops, columns=OPS_COLUMNS)
    if steps:
        out["mi_timeline_steps"] = (pd.DataFrame(steps, columns=STEPS_COLUMNS)
                                    .drop_duplicates(["rank", "step"]).reset_index(drop=True))
    return out
