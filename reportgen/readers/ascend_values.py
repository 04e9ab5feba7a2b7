"""Ascend values at the edge: the units and layout names of the Ascend profiler output and the strict checks of its
numbers, shared by the text reader (:mod:`.ascend`) and the DB reader (:mod:`.ascend_db`), neither of which
imports the other's module for them."""

from __future__ import annotations

import math
import re
from typing import NamedTuple

import numpy as np
import pandas as pd

from ..frames import text_select
from ..limits import MAX_DURATION_MS, MAX_NAME_CHARS, MAX_SIZE_MB, cap_text, finite_number
from ..timebase import column_ns, to_ns

US_PER_MS = 1000.0
#: torch_npu writes memory "MB" as bytes / 1024**2 (values are multiples of 1/64 MiB): to MB of 10^6 B.
MIB_TO_MB = 1.048576
#: operator_memory "Size(KB)" is bytes / 1024 (KiB): to MB of 10^6 B.
KIB_TO_MB = 1.024e-3

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
PROF_DIR = re.compile(r"ascend_(pt|ms)$")
_INFO = re.compile(r"^profiler_info_(-?\d+)\.json$")
_MAX_DEPTH = 10
#: missing ranks (world size minus the ranks found) are listed up to this many; more are only counted

#: step id of step_trace_time rows written without one (no profiler schedule); never left in the run model
NO_STEP_ID = -1
#: step_trace_time.csv header -> step_time column (ms after /1000)
STEP_TIME_COLUMNS = {
    "Computing": "computing_ms",
    "Communication(Not Overlapped)": "comm_not_overlapped_ms",
    "Overlapped": "overlapped_ms",
    "Communication": "comm_ms",
    "Free": "free_ms",
    "Stage": "stage_ms",
    "Bubble": "bubble_ms",
    "Communication(Not Overlapped and Exclude Receive)": "comm_not_overlapped_exclude_receive_ms",
    "Preparing": "preparing_ms",
}
STEP_TIME_ORDER = ["rank", "step", "step_ms"] + list(STEP_TIME_COLUMNS.values())

TRANSPORTS = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
P2P_PREFIXES = ("hcom_send", "hcom_receive", "hcom_batchsendrecv")


def double_hash(text: str) -> int:
    """HCCL's group hash (the ``@`` suffix of op names): two 32-bit polynomial rolling hashes
    over the code points (multipliers 29 and 131), the first in the high 32 bits.
    Verified: ``group_name_19`` -> 3985310405473756128 on the 4-rank MindSpeed fixture."""
    h1 = h2 = 0
    for ch in text:
        h1 = (h1 * 29 + ord(ch)) & 0xFFFFFFFF
        h2 = (h2 * 131 + ord(ch)) & 0xFFFFFFFF
    return (h1 << 32) | h2


def group_kind(name: str) -> str:
    """Group kind from the framework's group name (MindSpeed/Megatron ``parallel_group_info``)."""
    n = (name or "").lower()
    if n in ("default_group", "hccl_world_group", "world"):
        return "world"
    if n.startswith("pp") or n == "pipeline":
        return "pp"
    if n.startswith("tp") or n == "tensor":
        return "tp"
    if n in ("cp",) or n.startswith("cp_"):
        return "cp"
    if n.startswith(("ep", "exp", "moe")):
        return "ep"
    if n.startswith("dp"):
        return "dp"
    return "other"


# --------------------------------------------------------------------------- values: strict numbers at the edge

#: cells that mean "no value" in the Ascend CSVs (after stripping spaces and tabs)
MISSING_CELLS = frozenset(("", "N/A", "NA", "None", "-"))
#: a bandwidth above this (GB/s) is not a measurement (on-chip copies reach ~10^3)
MAX_GBPS = 1e6
#: an op count above this is not a measurement
MAX_COUNT = 1e12
#: step ids and stream ids: 0 .. MAX_ID
MAX_ID = (1 << 31) - 1
#: value kind -> (multiplier, divisor: the value in the run model's unit is ``raw * multiplier / divisor``, exactly as
#: the parsers always converted; upper bound of that value, its reason, negatives allowed)
KINDS = {
    "us": (1.0, US_PER_MS, MAX_DURATION_MS, "over one day", False),       # a duration in µs -> ms
    "us±": (1.0, US_PER_MS, MAX_DURATION_MS, "over one day", True),       # a signed difference in µs -> ms
    "ms": (1.0, 1.0, MAX_DURATION_MS, "over one day", False),
    "ns": (1.0, 1e6, MAX_DURATION_MS, "over one day", False),             # a duration in ns -> ms (DB exports)
    "mib": (MIB_TO_MB, 1.0, MAX_SIZE_MB, "larger than 1 PB", False),      # MiB -> MB
    "kib": (KIB_TO_MB, 1.0, MAX_SIZE_MB, "larger than 1 PB", False),      # KiB -> MB
    "mb": (1.0, 1.0, MAX_SIZE_MB, "larger than 1 PB", False),
    "bytes": (1.0, 1e6, MAX_SIZE_MB, "larger than 1 PB", False),          # B -> MB (DB exports)
    "gbps": (1.0, 1.0, MAX_GBPS, "larger than 10^6 GB/s", False),
    "ratio": (1.0, 1.0, 1.0, "larger than 1", False),
    "count": (1.0, 1.0, MAX_COUNT, "larger than 10^12", False),
    "id": (1.0, 1.0, MAX_ID, f"larger than {MAX_ID}", False),
}
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def refused(value: float, kind: str) -> str | None:
    """Why a value (already scaled to the run model's unit) of this :data:`KINDS` kind is refused, or None."""
    _mul, _div, limit, over, negative = KINDS[kind]
    why = finite_number(value, negative=negative, limit=limit, over=over)
    if why is None and kind in ("id", "count") and not float(value).is_integer():
        return "not a whole number"
    return why


def json_float(value) -> float | None:
    """A number as JSON gives it (float literals arrive as text, :func:`_read_json`): float, NaN when it is not a
    number (text, a list, true), None when absent (null, ``""``, ``N/A``). ``1e400`` is inf."""
    if value is None:
        return None
    if isinstance(value, bool):
        return math.nan
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:
            return math.inf
    if isinstance(value, str):
        t = value.strip()
        if t in MISSING_CELLS:
            return None
        return float(t) if _NUMBER.fullmatch(t) else math.nan
    return math.nan


def json_time_ns(value) -> tuple[int | None, str | None]:
    """(exact ns, None) of an absolute µs time from JSON, (None, None) when absent, (None, reason) when refused."""
    if value is None or (isinstance(value, str) and value.strip() in MISSING_CELLS):
        return None, None
    n = to_ns(value) if not isinstance(value, bool) else None
    if n is None:
        return None, "not a time (not a number, or beyond the int64 ns range)"
    if n < 0:
        return None, "negative"
    return n, None


def _absent(values: pd.Series, unparsed: np.ndarray) -> np.ndarray:
    """Which cells hold no value (null, or text that is empty / ``N/A``... once stripped); only the ``unparsed``
    ones (a mask: the cells that did not parse as a number) are looked at, so a clean column costs nothing."""
    out = np.zeros(len(values), dtype=bool)
    if unparsed.any():
        cells = values.to_numpy(dtype=object)
        for i in np.flatnonzero(unparsed):
            v = cells[i]
            out[i] = (v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
                      or (isinstance(v, str) and v.strip() in MISSING_CELLS))
    return out


def check_numbers(values: pd.Series, kind: str, required: bool = False):
    """A column of numbers (text as read from a CSV, or DB cells) checked as :data:`KINDS` ``kind``:
    (floats scaled to the run model's unit, NaN where absent or refused; mask of refused cells; reason of
    refused cell i). Refused: text that is not a number, NaN, inf, a sign or magnitude out of bounds, a fraction
    for ids and counts, and an absent value when ``required``."""
    raw = values.reset_index(drop=True)
    mul, div, limit, _over, negative = KINDS[kind]
    v = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float, na_value=np.nan, copy=True)
    missing = _absent(raw, np.isnan(v))
    if mul != 1.0:
        v = v * mul
    if div != 1.0:
        v = v / div
    with np.errstate(invalid="ignore"):
        fine = np.isfinite(v) & (np.abs(v) <= limit) & ((v >= 0) | negative)
        if kind in ("id", "count"):
            fine &= np.floor(v) == v
    bad = ~fine & (~missing | required)
    seen = v.copy() if bad.any() else v  # the refused values, for the reasons
    v[~fine] = np.nan
    return v, bad, lambda i: "missing" if missing[i] else refused(seen[i], kind)


def check_times(values: pd.Series, unit_ns: int = 1000, required: bool = False):
    """A column of absolute times (µs text from a CSV, ``unit_ns`` 1000; DB ns, 1) as exact int ns (nullable Int64,
    :func:`reportgen.timebase.column_ns`): (times, NA where absent or refused; mask of refused cells; reason of
    refused cell i). Refused: not a number, negative, beyond the int64 ns range, absent when ``required``."""
    raw = values.reset_index(drop=True)
    out = column_ns(raw, unit_ns)
    got = out.notna().to_numpy()
    missing = _absent(raw, ~got)
    neg = got & (out.fillna(0) < 0).to_numpy()
    bad = (~got & (~missing | required)) | neg
    if bad.any():
        out[bad] = pd.NA
    return out, bad, lambda i: ("missing" if missing[i] else "negative" if neg[i]
                                else "not a time (not a number, or beyond the int64 ns range)")


def _text(value, limit: int = MAX_NAME_CHARS) -> str:
    """An untrusted name: str, capped (limits.cap_text)."""
    return cap_text("" if value is None else value, limit)

def op_type(op: str) -> str:
    m = re.match(r"^hcom_([A-Za-z]+)", op)
    return (m.group(1) if m else op.split("-")[0]).lower()


# --------------------------------------------------------------------------- one op class per device task

#: accelerator cores / task types of computation (msprof's Computing: the COMPUTE_TASK_INFO tasks, AI Core, AI Vector,
#: MIX, AI CPU, DSA kernels); a core the profiler does not write (Level0 kernel_details: ``N/A``) is computation too
_COMPUTE_CORES = ("AI_CORE", "AI_VECTOR", "AIC", "AIV", "AI_CPU", "MIX_", "DSA", "KERNEL_AI", "FFTS", "CUBE",
                  "VECTOR")
#: cores of HCCL's rows (kernel_details ``HCCL`` at Level0-2, ``COMMUNICATION`` in some versions)
_COMM_CORES = ("HCCL", "COMMUNICATION")
#: synchronisation tasks: stream events and HCCL notifies (type, core or name)
_SYNC_PREFIXES = ("NOTIFY", "EVENT_", "WRITE_VALUE", "PLACE_HOLDER", "PROFILING_")
#: copies outside HCCL (MEMCPY_ASYNC, SDMA, PCIE DMA tasks)
_COPY_PREFIXES = ("MEMCPY", "SDMA", "PCIE_DMA", "ASYNC_MEMCPY")


class Texts(NamedTuple):
    """A text column as :func:`upper_texts` gives it: per row a code into ``texts``."""
    codes: np.ndarray
    texts: np.ndarray


def upper_texts(values) -> Texts:
    """A column's texts upper-cased with spaces as underscores (missing values as ""), each distinct value worked out
    once (names repeat every step); a :class:`Texts` is given back as it is. :func:`op_class` and
    :func:`comm_streams` take either, so a reader that asks both codes each column once."""
    if isinstance(values, Texts):
        return values
    s = pd.Series(values, dtype=object) if not isinstance(values, pd.Series) else values
    s = s.reset_index(drop=True)
    codes, uniques = pd.factorize(s.fillna("").astype(str), use_na_sentinel=False)
    up = pd.Series(np.asarray(uniques, dtype=object)).astype(str).str.strip().str.upper() \
        .str.replace(" ", "_", regex=False)
    return Texts(codes, up.to_numpy(dtype=object))


def _where(coded: Texts, test) -> np.ndarray:
    """Per row of a :class:`Texts` column: ``test(text)``, asked once per distinct text."""
    codes, texts = coded
    return np.array([bool(test(u)) for u in texts], dtype=bool)[codes] if len(codes) else np.zeros(0, dtype=bool)


def op_class(core, type_=None, name=None, comm_stream=None, hccl_task=None) -> np.ndarray:
    """The Ascend family's one rule for the class of a device task (schema.OP_CLASSES), used for ``kernels``,
    ``op_stats`` and ``device_ops`` of the text export, the trace and the DB alike. In this order:

    1. **wait**: synchronisation tasks: a type, core or name containing ``WAIT`` or ``RECORD``, or starting with
       ``NOTIFY`` / ``EVENT_`` / ``Write Value`` / ``PLACE_HOLDER`` / ``PROFILING_`` (stream events and HCCL's
       notify tasks: ``NOTIFY_WAIT``, ``EVENT_WAIT_SQE``, ``Notify Wait`` ...).
    2. **communication**: accelerator core ``HCCL`` / ``COMMUNICATION``, a type or name ``hcom_*``, an HCCL task
       (``hccl_task``: the DB's COMMUNICATION_TASK_INFO rows), or any other task of a communication stream
       (``comm_stream``: a stream of the rank that runs HCCL notify tasks or HCCL rows; its SDMA copies, Reduce_Inline
       and "Other" tasks are HCCL's data movement, not computation).
    3. **memcpy**: ``MEMCPY*`` / ``SDMA*`` / ``PCIE_DMA*`` tasks of the other streams.
    4. **compute**: the compute cores (:data:`_COMPUTE_CORES`) and a core the profiler left empty (Level0 writes
       ``N/A`` for every kernel).
    5. **other**: the rest (any other task type).

    msprof-analyze counts only the COMPUTE_TASK_INFO tasks as Computing and only the HCCL ops as Communication
    (../shared/research/ascend-profiler-output-and-msprof-analyze.md, "Where the numbers come from"): this rule keeps
    waits, copies and HCCL's stream tasks out of computation the same way."""
    core_u = upper_texts(core)
    n = len(core_u.codes)
    blank = Texts(np.zeros(n, dtype=np.intp), np.array([""], dtype=object))
    texts = (core_u, upper_texts(type_) if type_ is not None else blank,
             upper_texts(name) if name is not None else blank)

    def any_text(test) -> np.ndarray:
        out = np.zeros(n, dtype=bool)
        for t in texts:
            out |= _where(t, test)
        return out

    sync = any_text(lambda u: "WAIT" in u or "RECORD" in u or u.startswith(_SYNC_PREFIXES))
    comm = any_text(lambda u: u.startswith("HCOM")) | _where(core_u, lambda u: u in _COMM_CORES)
    for flag in (comm_stream, hccl_task):
        if flag is not None:
            comm |= np.asarray(flag, dtype=bool)
    copy = any_text(lambda u: u.startswith(_COPY_PREFIXES))
    missing_cells = {m.upper() for m in MISSING_CELLS} | {"NAN", "NONE"}
    compute = _where(core_u, lambda u: u in missing_cells or u.startswith(_COMPUTE_CORES))
    return text_select([sync, comm, copy, compute], ["wait", "communication", "memcpy", "compute"],
                       "other").astype(object, copy=False)


def comm_streams(stream, core, type_=None, name=None) -> np.ndarray:
    """Per row: whether its stream is a communication stream of the rank (:func:`op_class` rule 2): a stream that runs
    an HCCL row (core ``HCCL`` / ``COMMUNICATION``, ``hcom_*``) or an HCCL notify task (``NOTIFY*`` / ``Notify*``).
    Rows without a stream are on none."""
    s = pd.Series(stream).reset_index(drop=True)
    hccl = _where(upper_texts(core), lambda u: u in _COMM_CORES)
    for t in (type_, name):
        if t is not None:
            hccl |= _where(upper_texts(t), lambda u: u.startswith(("HCOM", "NOTIFY")))
    streams = set(s[hccl & s.notna().to_numpy()].tolist())
    return s.isin(streams).to_numpy() & s.notna().to_numpy() if streams else np.zeros(len(s), dtype=bool)
