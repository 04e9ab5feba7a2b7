"""Streaming reader for Ascend ``trace_view.json`` (torch_npu ``*_ascend_pt`` and MindSpore ``*_ascend_ms``).

Format facts: ../shared/research/ascend-profiler-output-and-msprof-analyze.md section 2.4 and
../shared/research/generated-runs.md section 4. What the real files look like:

* A JSON **array** of Chrome-trace events (a ``{"traceEvents": [...]}`` object is accepted too).
  ``ts`` is a string of absolute microseconds with 3 decimals; ``dur`` is a float, an int, or (MindSpore)
  a string. Strings may carry trailing tabs/spaces; ``float()`` ignores them.
* Metadata events (``ph: "M"``: ``process_name`` / ``thread_name``) sit in the middle of torch_npu files
  (after the Python layer's events) and at the end of some others, so X events are kept per
  (pid, tid) and only named at the end. Some processes have thread names but no ``process_name``
  (torch_npu Level0 writes the CANN layer that way); such processes are not used.
* The events are not sorted by time (MindSpore CPU traces are grouped by operator).

Tables: absolute times are exact int64 ns (``*_ns``, the file's µs text parsed by :func:`reportgen.timebase.to_ns`,
never through a float); durations in ms. The reader makes the ``*_ns`` columns ``*_ms`` relative to the run
origin.

``trace_steps``  rank, step, start_ns, end_ns
    ``ProfilerStep#N`` X events. Taken from the ``Python`` process if it has any, else ``MindSpore``,
    else any other process (one row per step; duplicates within a process are merged to the widest span).
``overlap_intervals``  rank, kind, start_ns, end_ns
    ``Overlap Analysis`` process; thread ``Computing`` -> ``computing``, ``Communication`` ->
    ``communication``, ``Communication(Not Overlapped)`` -> ``comm_not_overlapped``, ``Free`` -> ``free``
    (the event name is used when the thread has no name). torch_npu's step_trace_time.csv columns are the
    sums of these durations over the intervals that START inside the step window.
``hccl_ops``  rank, op, lane, start_ns, dur_ms
    ``HCCL`` process, every lane except ``Plane <k>`` (small tasks); real lanes are
    ``Group <n> Communication``. An HCCL thread without a name is used only for ``hcom_*`` events.
``dataloader``  rank, name, start_ns, dur_ms
    ``enumerate(DataLoader)#...__next__`` X events of any process (torch_npu writes them in the Python layer):
    the time the training loop waited for its next batch, as in a PyTorch Kineto trace. The reader gives each the
    step it starts in (:func:`reportgen.timeline.assign_steps`).
``device_ops``  rank, name, stream, start_ns, dur_ms, op_class (, launch_delay_ms)
    ``Ascend Hardware`` X events (thread name ``Stream <id>``; ``Stream <tid>`` when unnamed), without
    pure synchronisation tasks: ``args["Task Type"]`` containing WAIT or RECORD, PLACE_HOLDER
    (``PROFILING_ENABLE`` markers) and ``Write Value`` (notify writes). Kernels (AI_CORE, MIX_*,
    AI_CPU, DSA, ...) and copies (SDMA, PCIE_DMA / MEMCPY_ASYNC) are kept. ``op_class``:
    :func:`reportgen.readers.ascend.op_class` of the event's ``Task Type`` and name, a stream whose dropped
    synchronisation tasks include HCCL notifies (``Notify Wait`` / ``Notify Record``) being a communication stream
    (its SDMA tasks are HCCL's data movement).
    **CPU-only MindSpore traces** (no ``Ascend Hardware`` process; processes are ``CPU OP`` and
    ``Scope Layer``) use the ``CPU OP`` process instead: one X event per executed kernel
    (``args.type == "HostCpuOps"``, names like ``Default/MatMul-op0`` in graph mode, ``MatMul`` in
    PyNative), collectives included (``Default/AllReduce-op0``). ``stream`` is ``"CPU OP <thread name>"``
    (``"CPU OP Thread 0"``). ``Scope Layer`` spans (``Default``, ``Gradients``, ...) nest those ops
    and are not used. ``op_class``: :func:`cpu_op_class`.
    ``launch_delay_ms``: the ``HostToDevice`` flow events (``s`` on the CANN layer where the task was launched, ``f``
    with the device task's own ``ts``, matched by ``id``; one launch may end on several tasks): device start - host
    launch, negative clock jitter as 0; NaN for a task without a flow (every task of a trace without flows).

Streaming: the file is read in 64 KiB chunks; each chunk's complete events are parsed in ONE call
(msgspec with ``float_hook=str`` when importable, else ``json.loads(parse_float=str)``: float literals stay
text, so times are exact) on the bytes from the first event to
the last ``}`` that is followed by ``, {``; if that cut lands inside a string the parse fails and an
earlier cut (before the reported error position) is tried; the last, incomplete event of a chunk is
finished with ``json.JSONDecoder.raw_decode`` once more data is read. Only (name, ts, dur) of X events
are kept, in arrays per (pid, tid); events of processes (and ``Plane`` lanes) already known to be of no
use are dropped on sight, the others wait for the metadata. Measured (bench/trace_decoders.py, 2 vCPU):
200 MB synthetic torch_npu trace 0.9 s, peak RSS 79 MB (71 MB of it is the interpreter + pandas);
1 GB: 4.0 s, 106 MB. Whole-file ``json.load`` / ``orjson.loads``: 2.9 / 3.0 s and 1150 / 1590 MB for 200 MB.
"""

from __future__ import annotations

import codecs
import json
import re
from array import array
from pathlib import Path

import numpy as np
import pandas as pd

from ._files import open_input
from ..limits import MAX_DURATION_MS, MAX_NAME_CHARS, Rejects, cap_text, json_int
from ..timebase import to_ns
from .ascend_values import op_class

try:  # declared dependency: as fast as orjson here and ~2x the json module, with float literals kept as text
    import msgspec as _msgspec
    _DICTS = _msgspec.json.Decoder(float_hook=str)
except ImportError:  # pragma: no cover - depends on the environment
    _msgspec = None

#: Read size. Small chunks measured fastest (a chunk's decoded dicts stay in the CPU cache): 200 MB
#: synthetic trace with orjson, 16-64 KiB 0.8-0.9 s, 1 MiB 1.2-2.5 s, 4 MiB 1.8 s (bench/trace_decoders.py).
CHUNK = 64 << 10
#: One event larger than this is treated as broken, not as incomplete.
MAX_EVENT = 256 << 20

OVERLAP_KINDS = {
    "Computing": "computing",
    "Communication": "communication",
    "Communication(Not Overlapped)": "comm_not_overlapped",
    "Free": "free",
}
_USED_PROCESSES = frozenset({"Overlap Analysis", "HCCL", "Ascend Hardware", "CPU OP"})
_STEP_PREFIX = "ProfilerStep#"
#: torch's span around each batch the training loop takes from its DataLoader (the Python layer of torch_npu)
_LOADER_PREFIX = "enumerate(DataLoader)"
#: DataLoader spans kept per file at the most (one per step of the run)
MAX_LOADER_SPANS = 1_000_000
_STEP_RE = re.compile(r"ProfilerStep#(\d+)")
_WS = b" \t\r\n"
_TRACE_EVENTS_KEY = re.compile(rb'"traceEvents"\s*:\s*\[')
_RANK_FILE = re.compile(r"^cpu_[a-z_]+?_(\d+)\.(?:csv|txt)$")
#: an event longer than a day is not a measurement (limits.MAX_DURATION_MS), in ns
_MAX_DUR_NS = int(MAX_DURATION_MS * 1_000_000)
_MAX_NS = (1 << 63) - 1
#: step numbers of ProfilerStep#N: 0 .. MAX_STEP
MAX_STEP = (1 << 31) - 1

#: Columns as read: absolute times are exact int ns on the profiler's clock (``*_ns``); the reader turns them into
#: the run model's ``*_ms`` relative to the run origin (:data:`reportgen.timebase.ABS_COLUMNS`).
COLUMNS = {
    "trace_steps": ["rank", "step", "start_ns", "end_ns"],
    "overlap_intervals": ["rank", "kind", "start_ns", "end_ns"],
    "hccl_ops": ["rank", "op", "lane", "start_ns", "dur_ms"],
    "device_ops": ["rank", "name", "stream", "start_ns", "dur_ms", "op_class", "launch_delay_ms"],
    "dataloader": ["rank", "name", "start_ns", "dur_ms"],
}


#: MindSpore collective / p2p op types (``Default/AllReduce-op0`` -> ``AllReduce``; HCCL's ``hcom_*`` names)
MS_COMM_TYPE = re.compile(r"AllReduce|AllGather|ReduceScatter|Send|Receive|Broadcast|AllToAll|Barrier|hcom",
                          re.IGNORECASE)


def cpu_op_class(names: pd.Series) -> np.ndarray:
    """The MindSpore CPU rule for the class of a host-executed kernel (the ``CPU OP`` process here, the
    ``cpu_op_execute_timestamp`` file in :mod:`.mindspore_cpu`): an op whose type (the last ``/`` part of the name
    without ``-op<N>``) is a collective or p2p op (:data:`MS_COMM_TYPE`) is communication, every other op is
    computation (the CPU runs the kernels themselves: there are no copies or waits to tell apart)."""
    codes, uniques = pd.factorize(names.astype(str), use_na_sentinel=False)
    typ = pd.Series(np.asarray(uniques, dtype=object)).astype(str).str.rsplit("/", n=1).str[-1] \
        .str.replace(r"-op\d+$", "", regex=True)
    comm = typ.str.contains(MS_COMM_TYPE).to_numpy(dtype=bool)
    return np.where(comm, "communication", "compute").astype(object)[codes] if len(codes) \
        else np.zeros(0, dtype=object)


def _is_sync_task(task_type) -> bool:
    if not isinstance(task_type, str):
        return False
    t = task_type.upper().replace(" ", "_")
    return "WAIT" in t or "RECORD" in t or t.startswith("PLACE_HOLDER") or t == "WRITE_VALUE"


# --------------------------------------------------------------------------------------------------
# Decoding


class _Stop(Exception):
    """The rest of the file cannot be read; ``message`` is the problem text."""

    def __init__(self, message: str, keep: bool = True):
        super().__init__(message)
        self.message = message
        self.keep = keep  # False: the file is unusable, drop what was parsed


_BYTE_POS = re.compile(r"\(byte (\d+)\)")


def _loads(data: bytes):
    """JSON text -> Python values, float literals as their text (exact times, :mod:`reportgen.timebase`).

    Bad JSON raises ValueError with ``pos`` (the offset of the error, when known)."""
    if _msgspec is not None:
        try:
            return _DICTS.decode(data)
        except _msgspec.DecodeError as exc:
            m = _BYTE_POS.search(str(exc))
            err = ValueError(str(exc))
            err.pos = int(m.group(1)) if m else None
            raise err from None
    return json.loads(data, parse_float=str, parse_int=json_int)


#: runs of JSON whitespace (and of whitespace and commas between array items), matched in C: a gzip of 255 KB can
#: hold 2 GiB of spaces, which a per-byte Python loop took ~190 CPU-s to step over (issue 29)
_RUNS = {_WS: re.compile(rb"[ \t\r\n]*"), b" \t\r\n,": re.compile(rb"[ \t\r\n,]*")}


def _skip(buf: bytes, pos: int, chars: bytes = _WS) -> int:
    """The first position at or after ``pos`` whose byte is not in ``chars`` (``len(buf)`` when none is)."""
    run = _RUNS.get(chars)
    if run is None:
        run = _RUNS[chars] = re.compile(b"[" + re.escape(chars) + b"]*")
    return run.match(buf, pos).end()


def _last_cut(buf: bytes, lo: int, hi: int) -> int:
    """Largest ``e`` in (lo, hi] with ``buf[e-1] == '}'`` followed by optional spaces, ``,``, spaces, ``{``.

    Returns -1 when there is none. ``e`` is a candidate end of a run of complete events starting at ``lo``.
    """
    j = buf.rfind(b"{", lo + 1, hi + 1)
    while j > lo:
        k = j - 1
        while k > lo and buf[k] in _WS:
            k -= 1
        if buf[k] == 0x2C:  # ','
            k -= 1
            while k > lo and buf[k] in _WS:
                k -= 1
            if buf[k] == 0x7D and k + 1 <= hi:  # '}'
                return k + 1
        j = buf.rfind(b"{", lo + 1, j)
    return -1


_decoder = json.JSONDecoder(parse_float=str, parse_int=json_int)  # float literals as their text: times stay exact (timebase.py)
#: Longest number/literal/escape that a cut can leave unfinished at the end of the buffer.
_LAST_TOKEN = 64


def _one_event(buf: bytes, pos: int, eof: bool, decoder: json.JSONDecoder = _decoder):
    """Parse the single value starting at ``buf[pos]``: (value, end byte), or None if it is incomplete.

    Float literals come back as their text (``decoder``'s parse_float), so times stay exact.

    Raises _Stop when the data there is not valid JSON, UnicodeDecodeError when it is not UTF-8.
    Looks at a growing window so that a run of small non-object items stays linear.
    """
    n = len(buf)
    width = 1 << 12
    while True:
        hi = min(n, pos + width)
        last = hi >= n
        text, _used = codecs.utf_8_decode(buf[pos:hi], "strict", eof and last)
        try:
            value, end = decoder.raw_decode(text)
        except RecursionError:
            raise _Stop(f"JSON nested too deeply at byte {pos}") from None
        except json.JSONDecodeError as exc:
            # Data that merely stops early fails inside its last token: an open string, or a number,
            # literal or escape cut short (``1.``, ``tr``, ``\\u12``) within the last few characters.
            if exc.msg.startswith("Unterminated string") or len(text.rstrip()) - exc.pos <= _LAST_TOKEN:
                if not last:
                    width *= 4
                    continue
                return None
            at_byte = pos + len(text[:exc.pos].encode("utf-8"))
            raise _Stop(f"malformed JSON at byte {at_byte} ({exc.msg})") from None
        return value, pos + len(text[:end].encode("utf-8"))


def _parse_run(buf: bytes, pos: int):
    """Parse the longest run of complete events ``buf[pos:cut]`` that ends before a ``}, {`` boundary.

    Returns (items, cut), or None when no such run parses (the event at ``pos`` is the last one in the
    buffer, incomplete, or broken).
    """
    hi = len(buf)
    while True:
        cut = _last_cut(buf, pos, hi)
        if cut < 0:
            return None
        try:
            return _loads(b"[" + buf[pos:cut] + b"]"), cut
        except RecursionError:
            raise _Stop(f"JSON nested too deeply after byte {pos}") from None
        except ValueError as exc:  # msgspec (via _loads), json.JSONDecodeError, UnicodeDecodeError
            if "utf-8" in str(exc).lower():
                raise _Stop("not UTF-8 text", keep=False) from None
            # The boundary was inside a string (or the data is broken). The reported position counts
            # characters, so it is <= the byte position: a cut before it lies before the error.
            err = getattr(exc, "pos", None)
            hi = cut - 1 if err is None else min(cut - 1, pos + max(err - 1, 0))


def _iter_batches(fh, state: dict):
    """Yield lists of decoded items of the trace-event array in ``fh`` (a binary file).

    ``state["count"]`` counts the items yielded. Raises _Stop for anything that ends reading early.
    """
    buf = fh.read(CHUNK)
    eof = not buf
    if buf.startswith(codecs.BOM_UTF8):
        buf = buf[3:]
    pos = _skip(buf, 0)
    while pos >= len(buf) and not eof:  # leading whitespace longer than a chunk
        buf = fh.read(CHUNK)
        eof = not buf
        pos = _skip(buf, 0)
    if pos >= len(buf):
        raise _Stop("empty file", keep=False)
    if b"\x00" in buf[:4096]:
        raise _Stop("binary data (NUL bytes), not UTF-8 JSON text", keep=False)
    first = buf[pos]
    state["object"] = first == 0x7B
    if first == 0x7B:  # '{': accept {"traceEvents": [...]} (keys before it are expected to be small)
        while True:
            m = _TRACE_EVENTS_KEY.search(buf, pos)
            if m:
                pos = m.end()
                break
            if eof or len(buf) > MAX_EVENT:
                raise _Stop('a JSON object without a "traceEvents" array, not a trace-event array', keep=False)
            more = fh.read(CHUNK)
            eof = not more
            buf += more
    elif first == 0x5B:  # '['
        pos += 1
    else:
        raise _Stop(f"not a JSON array of trace events (starts with {bytes(buf[pos:pos + 12])!r})", keep=False)

    want = CHUNK
    while True:
        pos = _skip(buf, pos, b" \t\r\n,")
        if pos < len(buf):
            c = buf[pos]
            if c == 0x5D:  # ']': end of the array; what follows is only looked at for a second "traceEvents"
                if state["object"]:
                    _no_second_events(fh, buf, pos + 1, state)
                return
            # Runs of objects are decoded in one call; anything else (a stray string or number, or
            # an event that is the last one in the buffer) is parsed on its own.
            got = _parse_run(buf, pos) if c == 0x7B else None
            if got is None:  # the event at pos on its own
                try:
                    one = _one_event(buf, pos, eof)
                except UnicodeDecodeError:
                    raise _Stop("not UTF-8 text", keep=False) from None
                except _Stop as stop:
                    raise _Stop(f"{stop.message} after {state['count']} events; the rest was skipped") from None
                if one is not None:
                    got = [one[0]], one[1]
            if got is not None:
                items, pos = got
                state["count"] += len(items)
                yield items
                want = CHUNK
                continue
        # The event at pos is incomplete: read more.
        if eof:
            raise _Stop(f"truncated after {state['count']} events; the rest was skipped")
        if len(buf) - pos > MAX_EVENT:
            raise _Stop(f"an event larger than {MAX_EVENT >> 20} MiB after {state['count']} events; "
                        "the rest was skipped")
        more = fh.read(want)
        eof = not more
        buf = buf[pos:] + more
        pos = 0
        want = min(want * 2, MAX_EVENT)


def _no_second_events(fh, buf: bytes, pos: int, state: dict) -> None:
    """Raise _Stop (file not read) when a later key of the top-level object is ``"traceEvents"`` again: a JSON
    parser keeps the second list, this reader read the first, so which is the trace is unknown (issue 29 #2; the
    Kineto reader says the same). The rest of the object (a few bytes in a real file; at most MAX_EVENT looked at)
    is walked key by key, each value skipped unread by msgspec's validator, so the key inside a nested object or a
    string does not count."""
    import msgspec

    rest = buf[pos:]
    while len(rest) <= MAX_EVENT:
        more = fh.read(CHUNK)
        if not more:
            break
        rest += more
    at, n = 0, len(rest)
    while True:
        at = _skip(rest, at, b" \t\r\n,")
        if at >= n or rest[at] != 0x22:  # '}' (the end), or not a key: nothing more to look at
            return
        m = _KEY.match(rest, at)
        if not m:
            return
        if m.group(1) == b"traceEvents":
            raise _Stop('the key "traceEvents" appears twice at the top level: which list is the trace is unknown '
                        f'(a JSON parser keeps the second); the file was not read ({state["count"]} events of the '
                        'first dropped)', keep=False)
        at = m.end()
        try:
            msgspec.json.decode(memoryview(rest)[at:], type=msgspec.Raw)
            return  # the value runs to the end: no key after it
        except (msgspec.DecodeError, RecursionError) as exc:
            t = re.search(r"trailing characters \(byte (\d+)\)", str(exc))
            if not t:
                return
            at += int(t.group(1)) - 1


#: a top-level key and its colon (``"name" :``)
_KEY = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:\s*')


# --------------------------------------------------------------------------------------------------
# Reading


#: HostToDevice flow ends kept per file (one per launched device task)
MAX_FLOWS = 5_000_000


def read_trace_view(path: Path, rank: int, problems: list[tuple[str, str]]) -> dict[str, pd.DataFrame]:
    """Stream trace_view.json; return the tables found (omit empty ones).

    See the module docstring for the tables and what is taken from where. Problems (truncated file,
    not a JSON array, not UTF-8, events without numeric times) are appended to ``problems`` as
    ``(str(path), description)``; this function does not raise for bad input.
    """
    path = Path(path)
    where = str(path)
    state = {"count": 0}
    try:
        fh = open_input(path, "rb")
    except OSError as exc:
        problems.append((where, f"cannot open: {exc.strerror or exc}"))
        return {}
    with fh:
        return collect_tables(_iter_batches(fh, state), rank, problems, where, state)


def collect_tables(batches, rank: int, problems: list, where: str, state: dict | None = None) -> dict:
    """Build the tables from an iterable of event lists (the decoder's batches, or one whole list).

    ``state["count"]`` is the number of events the iterable produced (used in problem texts).
    """
    if state is None:
        state = {"count": 0}
    pnames: dict = {}      # pid -> process name
    tnames: dict = {}      # (pid, tid) -> thread name
    groups: dict = {}      # (pid, tid) -> (names list, ts array, dur array), exact int ns
    steps: list = []       # (pid, name, start_ns, dur_ns)
    loaders: list = []     # (name, start_ns, dur_ns) of enumerate(DataLoader) spans
    flow_s: dict = {}      # HostToDevice flow id -> host launch ns (its start, on the CANN layer)
    flow_f: list = []      # (pid, tid, device ns, flow id): the device task the flow ends on
    skip_pids: set = set()
    skip_keys: set = set()
    notify_keys: set = set()  # (pid, tid) of lanes with HCCL notify tasks (dropped as synchronisation)
    task_codes: dict = {"": 0}  # args["Task Type"] -> the code kept per event (g[3])
    rejects = Rejects()
    not_objects = 0
    seen = 0
    intern: dict = {}
    stopped = False
    try:
        for batch in batches:
            for i, ev in enumerate(batch, start=seen + 1):
                if type(ev) is not dict:
                    not_objects += 1
                    continue
                ph = ev.get("ph")
                if ph == "X":
                    pid = ev.get("pid")
                    name = ev.get("name")
                    if type(name) is str and name.startswith((_STEP_PREFIX, _LOADER_PREFIX)):
                        t, d = to_ns(ev.get("ts")), to_ns(ev.get("dur", 0))
                        if t is None or d is None or t < 0 or d < 0 or d > _MAX_DUR_NS or t > _MAX_NS - d:
                            _refuse_time(rejects, where, i, t, d)
                        elif name.startswith(_STEP_PREFIX):
                            steps.append((pid, name, t, d))
                        elif len(loaders) < MAX_LOADER_SPANS:
                            loaders.append((cap_text(name, 200), t, d))
                        continue
                    try:
                        if pid in skip_pids:
                            continue
                    except TypeError:  # unhashable pid: not a trace event of any process
                        rejects.add(where, i, "'pid'", "neither a number nor text", "event skipped", unit="event")
                        continue
                    t, d = to_ns(ev.get("ts")), to_ns(ev.get("dur", 0))
                    if t is None or d is None or t < 0 or d < 0 or d > _MAX_DUR_NS or t > _MAX_NS - d:
                        _refuse_time(rejects, where, i, t, d)
                        continue
                    args = ev.get("args")
                    task = args.get("Task Type") if type(args) is dict else None
                    if task is not None and _is_sync_task(task):
                        if isinstance(task, str) and task[:6].upper() == "NOTIFY":  # HCCL's: a communication stream
                            try:
                                notify_keys.add((pid, ev.get("tid")))
                            except TypeError:
                                pass
                        continue
                    key = (pid, ev.get("tid"))
                    try:
                        g = groups.get(key)
                    except TypeError:  # unhashable pid/tid
                        rejects.add(where, i, "'tid'", "neither a number nor text", "event skipped", unit="event")
                        continue
                    if g is None and key in skip_keys:
                        continue
                    if g is None:
                        g = groups[key] = ([], array("q"), array("q"), array("H"))
                    if type(name) is not str or len(name) > MAX_NAME_CHARS:
                        name = cap_text("" if name is None else name)
                    g[0].append(intern.setdefault(name, name))
                    g[1].append(t)
                    g[2].append(d)
                    code = task_codes.get(task) if type(task) is str and len(task) <= 64 else 0
                    if code is None:  # a task type not seen yet (a few dozen exist): its code
                        code = task_codes[task] = len(task_codes) if len(task_codes) < 65535 else 0
                    g[3].append(code)
                elif (ph == "s" or ph == "f") and ev.get("cat") == "HostToDevice":
                    t, fid = to_ns(ev.get("ts")), ev.get("id")
                    if t is None or type(fid) not in (str, int) or len(flow_f) >= MAX_FLOWS:
                        continue
                    if ph == "s":
                        flow_s[fid] = t
                    else:
                        try:
                            flow_f.append((ev.get("pid"), ev.get("tid"), t, fid))
                        except TypeError:
                            continue
                elif ph == "M":
                    args = ev.get("args")
                    label = args.get("name") if type(args) is dict else None
                    if not isinstance(label, str):
                        continue
                    label = cap_text(label, 256)
                    kind = ev.get("name")
                    pid = ev.get("pid")
                    try:
                        if kind == "process_name":
                            pnames[pid] = label
                            if label not in _USED_PROCESSES:
                                skip_pids.add(pid)
                                for key in [k for k in groups if k[0] == pid]:
                                    del groups[key]
                        elif kind == "thread_name":
                            key = (pid, ev.get("tid"))
                            tnames[key] = label
                            if label.startswith("Plane") and pnames.get(pid, "HCCL") == "HCCL":  # small tasks
                                skip_keys.add(key)
                                groups.pop(key, None)
                    except TypeError:
                        continue
            seen += len(batch)
    except _Stop as stop:
        stopped = True
        problems.append((where, stop.message))
        if not stop.keep:
            return {}
    except OSError as exc:
        stopped = True
        problems.append((where, f"read error after {state['count']} events: {exc.strerror or exc}; "
                                "the rest was skipped"))
    if seen == 0:
        if not stopped:
            problems.append((where, "no trace events in the array"))
        return {}
    if not_objects == seen and not stopped:
        problems.append((where, "not a JSON array of objects"))
        return {}
    if not_objects:
        problems.append((where, f"{not_objects} array items that are not objects were skipped"))
    rejects.flush(lambda p, t: problems.append((p, t)))
    launches: dict = {}  # (pid, tid) -> {device ns: host launch ns}
    for pid, tid, t, fid in flow_f:
        h = flow_s.get(fid)
        if h is not None:
            try:
                launches.setdefault((pid, tid), {})[t] = h
            except TypeError:  # unhashable pid / tid
                continue
    out = _tables(rank, pnames, tnames, groups, steps, problems, where, notify_keys,
                  [t for t, _c in sorted(task_codes.items(), key=lambda kv: kv[1])], launches)
    if loaders:
        loaders.sort(key=lambda x: x[1])
        out["dataloader"] = pd.DataFrame({"rank": np.full(len(loaders), rank, dtype=np.int64),
                                          "name": [x[0] for x in loaders],
                                          "start_ns": np.array([x[1] for x in loaders], dtype=np.int64),
                                          "dur_ms": np.array([x[2] for x in loaders], dtype=np.int64) / 1e6})
    return out


def _refuse_time(rejects: Rejects, where: str, index: int, t: int | None, d: int | None) -> None:
    """Count an X event whose ``ts`` / ``dur`` is refused (``index``: its 1-based place in the array)."""
    if t is None:
        column, why = "'ts'", "not a time (not a number, or beyond the int64 ns range)"
    elif d is None:
        column, why = "'dur'", "not a number (or beyond the int64 ns range)"
    elif t < 0:
        column, why = "'ts'", "negative"
    elif d < 0:
        column, why = "'dur'", "negative"
    elif d > _MAX_DUR_NS:
        column, why = "'dur'", "over one day"
    else:
        column, why = "'ts' + 'dur'", "beyond the int64 ns range"
    rejects.add(where, index, column, why, "event skipped", unit="event")


def _tables(rank, pnames, tnames, groups, steps, problems: list | None = None, where: str = "",
            notify_keys: set = frozenset(), task_types: list | None = None, launches: dict | None = None) -> dict:
    out: dict[str, pd.DataFrame] = {}

    # Steps: prefer the Python layer (torch_npu), then MindSpore, then any other process.
    if steps:
        def pref(pid):
            try:
                name = pnames.get(pid)
            except TypeError:  # unhashable pid
                return 3
            return 0 if name == "Python" else 1 if name == "MindSpore" else 2
        best = min(pref(s[0]) for s in steps)
        spans: dict[int, list[int]] = {}
        huge = []
        for pid, name, t, d in steps:
            if pref(pid) != best:
                continue
            m = _STEP_RE.match(name)
            if not m:
                continue
            if len(m.group(1)) > 10 or int(m.group(1)) > MAX_STEP:
                huge.append(cap_text(name, 60))
                continue
            n = int(m.group(1))
            s, e = t, t + d
            if n in spans:
                spans[n] = [min(spans[n][0], s), max(spans[n][1], e)]
            else:
                spans[n] = [s, e]
        if huge and problems is not None:
            problems.append((where, f"{len(huge)} step event(s) with a step number above {MAX_STEP} skipped "
                                    f"({', '.join(huge[:3])})"))
        if spans:
            order = sorted(spans)
            out["trace_steps"] = pd.DataFrame({
                "rank": np.full(len(order), rank, dtype=np.int64),
                "step": np.array(order, dtype=np.int64),
                "start_ns": np.array([spans[n][0] for n in order], dtype=np.int64),
                "end_ns": np.array([spans[n][1] for n in order], dtype=np.int64),
            })

    overlap, hccl, device, cpu = [], [], [], []
    types = np.array(task_types or [""], dtype=object)
    for (pid, tid), (names, ts, dur, codes) in groups.items():
        proc = pnames.get(pid)
        thread = tnames.get((pid, tid))
        if proc == "Overlap Analysis":
            kind = OVERLAP_KINDS.get(thread) if thread else None
            if kind is not None:
                overlap.append(([kind] * len(names), ts, dur))
            else:  # unnamed lane: the event names are the kinds
                keep = [i for i, n in enumerate(names) if n in OVERLAP_KINDS]
                if keep:
                    overlap.append(([OVERLAP_KINDS[names[i]] for i in keep],
                                    array("q", (ts[i] for i in keep)), array("q", (dur[i] for i in keep))))
        elif proc == "HCCL":
            if thread is not None:
                if not thread.startswith("Plane"):
                    hccl.append((names, [thread] * len(names), ts, dur))
            else:
                keep = [i for i, n in enumerate(names) if n.lower().startswith("hcom")]
                if keep:
                    lane = f"Thread {tid}"
                    hccl.append(([names[i] for i in keep], [lane] * len(keep),
                                 array("q", (ts[i] for i in keep)), array("q", (dur[i] for i in keep))))
        elif proc == "Ascend Hardware":
            stream = thread if thread is not None else f"Stream {tid}"
            tasks = types[np.frombuffer(codes, dtype=np.uint16)] if len(codes) else np.zeros(0, dtype=object)
            m = (launches or {}).get((pid, tid)) or {}
            delay = np.array([(t - m[t]) / 1e6 if t in m else np.nan for t in ts], dtype=float) if m else \
                np.full(len(names), np.nan)
            device.append((names, [stream] * len(names), ts, dur,
                           op_class(tasks, None, names, np.full(len(names), (pid, tid) in notify_keys)),
                           np.maximum(delay, 0.0)))
        elif proc == "CPU OP":
            stream = f"CPU OP {thread if thread is not None else f'Thread {tid}'}"
            cpu.append((names, [stream] * len(names), ts, dur, cpu_op_class(pd.Series(names, dtype=object))))
    if not device:
        device = cpu

    def cat(arrays) -> np.ndarray:
        return np.concatenate([np.frombuffer(a, dtype=np.int64) for a in arrays]) if arrays \
            else np.zeros(0, dtype=np.int64)

    if overlap:
        t = cat([g[1] for g in overlap])
        d = cat([g[2] for g in overlap])
        df = pd.DataFrame({"rank": np.full(len(t), rank, dtype=np.int64),
                           "kind": [k for g in overlap for k in g[0]],
                           "start_ns": t, "end_ns": t + d})
        out["overlap_intervals"] = df.sort_values(["kind", "start_ns"], kind="stable").reset_index(drop=True)
    for table, rows, label in (("hccl_ops", hccl, "op"), ("device_ops", device, "name")):
        if not rows:
            continue
        t = cat([g[2] for g in rows])
        d = cat([g[3] for g in rows])
        lane = "lane" if table == "hccl_ops" else "stream"
        df = pd.DataFrame({"rank": np.full(len(t), rank, dtype=np.int64),
                           label: [n for g in rows for n in g[0]],
                           lane: [s for g in rows for s in g[1]],
                           "start_ns": t, "dur_ms": d / 1e6})
        if table == "device_ops":
            df["op_class"] = np.concatenate([g[4] for g in rows])
            df["launch_delay_ms"] = np.concatenate([g[5] if len(g) > 5 else np.full(len(g[0]), np.nan)
                                                    for g in rows])  # HostToDevice flows (module doc)
        out[table] = df.sort_values(["start_ns"], kind="stable").reset_index(drop=True)
    return out


def rank_from_framework(prof_dir: Path) -> int | None:
    """MindSpore CPU output: the rank from FRAMEWORK/ file-name suffixes (cpu_op_detail_info_{rank}.csv, ...); None if absent/ambiguous.

    ``prof_dir`` is the ``*_ascend_ms`` directory (its ``ASCEND_PROFILER_OUTPUT`` is accepted too).
    Files looked at: ``FRAMEWORK/cpu_<what>_<rank>.csv|txt`` (cpu_op_detail_info, cpu_op_type_info,
    cpu_op_execute_timestamp, cpu_framework, cpu_ms_memory_record). The directory name holds the
    process id, not the rank, so it is not used.
    """
    prof_dir = Path(prof_dir)
    fw = prof_dir / "FRAMEWORK"
    if not fw.is_dir() and prof_dir.name == "ASCEND_PROFILER_OUTPUT":
        fw = prof_dir.parent / "FRAMEWORK"
    try:
        names = [p.name for p in fw.iterdir() if p.is_file()]
    except OSError:
        return None
    ranks = {int(m.group(1)) for n in names if (m := _RANK_FILE.match(n))}
    return ranks.pop() if len(ranks) == 1 else None
