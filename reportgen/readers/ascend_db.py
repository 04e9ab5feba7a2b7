"""Ascend DB exports (``export_type`` db): the same tables as the text files, read from SQLite.

Format facts: ../shared/research/ascend-profiler-output-and-msprof-analyze.md sections 1, 2.1-2.3, 2.11.

Files (under ``<prof_dir>/ASCEND_PROFILER_OUTPUT``; ``.db`` or ``.dat``, told apart by their tables,
not by their names):

* the comm-analysis DB, ``analysis.db`` (torch_npu) / ``communication_analyzer.db`` (MindSpore):
  ``StepTraceTime`` (µs) -> ``step_time``; ``CommAnalyzerTime`` (ms; ``start_timestamp`` µs) ->
  ``comm_ops``; ``CommAnalyzerBandwidth`` (one row per op, transport and packet-size bucket, each row
  repeating the op's transport totals) -> ``comm_bandwidth`` (one row per op and transport);
  ``CommAnalyzerMatrix`` -> ``comm_matrix`` (group-local ``src_rank``/``dst_rank``).
  ``group_name`` there is already the ``@`` hash of the text files.
* the profiler DB, ``ascend_pytorch_profiler_{rank}.db`` / ``ascend_mindspore_profiler_{rank}.db``
  (also a bare ``msprof_*.db``): ns timestamps, bytes, strings interned in ``STRING_IDS``.
  ``TASK`` + ``COMPUTE_TASK_INFO`` (+ ``COMMUNICATION_OP`` as ``HCCL`` rows) -> ``kernels``;
  ``MEMORY_RECORD`` + ``NPU_MEM`` (type ``app`` = the ``APP`` rows) -> ``memory_record``;
  ``NPU_MODULE_MEM`` + ``ENUM_MODULE`` -> ``module_mem``; ``OP_MEMORY`` -> ``operator_memory``;
  ``STEP_TIME`` -> ``trace_steps``; ``OVERLAP_ANALYSIS`` (type 0..3) -> ``overlap_intervals``.

Every output table has exactly the columns, units (ms, MB of 10^6 B, GB/s) and meaning of the text
parsers in :mod:`.ascend` (``trace_steps`` / ``overlap_intervals`` those of :mod:`.ascend_trace`).

When a table is missing, what can be rebuilt exactly from the profiler DB is rebuilt (checked against
the exported tables on the fixtures, to the ns):

* ``overlap_intervals`` without ``OVERLAP_ANALYSIS`` (torch_npu never writes it; msprof and MindStudio
  Insight do): computing = union of the compute tasks, communication = union of the ``COMMUNICATION_OP``
  spans, not-overlapped = communication minus computing, free = the gaps of their union.
* ``step_time`` without ``StepTraceTime``: torch_npu's formulas over those intervals per step (the step's
  device window = first to last task launched inside the ``STEP_TIME`` range; bubble = ``hcom_receive*``).
* ``comm_ops`` without ``CommAnalyzerTime`` (Level0): start and elapse from ``COMMUNICATION_OP``; transit /
  wait / sync / idle stay NaN (they need CANN's master-stream analysis), and a data problem says so.

Extra tables on request (same columns as :mod:`.ascend_trace`): ``hccl_ops`` (``COMMUNICATION_OP``, lane =
the HCCL group name), ``device_ops`` (``TASK`` without synchronisation tasks; ``op_class`` by
:func:`.ascend.op_class`: a COMPUTE_TASK_INFO task is computation, a COMMUNICATION_TASK_INFO task communication, and
so is any other task of a stream that runs HCCL tasks: HCCL's own AI_CORE tasks there have no COMPUTE_TASK_INFO and
last as long as their hcom op), and ``metadata``
(rank, name, value, path: ``META_DATA`` rows such as ``parallel_group_info`` / ``distributed_args`` as JSON
text, plus ``RANK_DEVICE_MAP``).

Opening never changes the input: rollback-journal DBs are opened ``mode=ro``; WAL-mode DBs (profiler
DBs are) would get ``-wal``/``-shm`` files created next to them by a plain read-only open, so they are
opened ``immutable=1`` when no ``-wal`` content exists, and otherwise read from a private copy of the
DB and its ``-wal``. Columns are looked up by name (case and punctuation ignored), never by position.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import sqlite3
import tempfile
from contextlib import ExitStack
from pathlib import Path

import numpy as np
import pandas as pd

from ._files import open_input
from ..limits import MAX_DURATION_MS, MAX_NAME_CHARS, MAX_RANKS, Rejects, as_int, cap_text
from .ascend_values import (MAX_ID, NO_STEP_ID, OUTPUT_DIR, P2P_PREFIXES, STEP_TIME_ORDER, check_numbers,
                            check_times, double_hash, op_class)
from .ascend_values import op_type as _op_type

NS_PER_MS = 1e6
US_PER_MS = 1e3
BYTES_PER_MB = 1e6
SQLITE_MAGIC = b"SQLite format 3\x00"
LOCAL_RANK = 4294967295
OVERLAP_TYPES = {0: "computing", 1: "communication", 2: "comm_not_overlapped", 3: "free"}
OVERLAP_ORDER = ["comm_not_overlapped", "communication", "computing", "free"]

#: Output columns of every table this module can produce.
COLUMNS = {
    "step_time": STEP_TIME_ORDER,
    "comm_ops": ["rank", "step", "kind", "op", "op_type", "group_hash", "start_ns", "elapse_ms", "transit_ms",
                 "wait_ms", "sync_ms", "idle_ms"],
    "comm_bandwidth": ["rank", "step", "kind", "op", "group_hash", "transport", "size_mb", "time_ms",
                       "bandwidth_gbps", "large_packet_ratio"],
    "comm_matrix": ["rank", "step", "kind", "op_type", "stat", "group_hash", "src_local", "dst_local", "transport",
                    "size_mb", "time_ms", "bandwidth_gbps", "op_name"],
    "kernels": ["rank", "step", "name", "type", "core", "stream", "start_ns", "dur_ms", "op_class", "input_shapes",
                "output_shapes", "input_formats", "output_formats"],
    "memory_record": ["rank", "component", "ts_ns", "allocated_mb", "reserved_mb", "active_mb"],
    "module_mem": ["rank", "component", "ts_ns", "reserved_mb"],
    "operator_memory": ["rank", "name", "size_mb", "alloc_ns", "release_ns", "duration_ms"],
    "trace_steps": ["rank", "step", "start_ns", "end_ns"],
    "overlap_intervals": ["rank", "kind", "start_ns", "end_ns"],
    "hccl_ops": ["rank", "op", "lane", "start_ns", "dur_ms"],
    "device_ops": ["rank", "name", "stream", "start_ns", "dur_ms", "op_class"],
    "metadata": ["rank", "name", "value", "path"],
    "dataloader": ["rank", "name", "start_ns", "dur_ms"],
    "hbm": ["rank", "hbm_id", "direction", "sample", "bandwidth_gbps"],
    "llc": ["rank", "llc_id", "mode", "hit_ratio", "throughput_gbps"],
}
#: torch's span around each batch the training loop takes from its DataLoader (as ascend_trace._LOADER_PREFIX)
_LOADER_PREFIX = "enumerate(DataLoader)"

#: StepTraceTime column (normalised) -> step_time column (ms after /1000)
_STEP_TRACE = {
    "computing": "computing_ms",
    "communicationnotoverlapped": "comm_not_overlapped_ms",
    "overlapped": "overlapped_ms",
    "communication": "comm_ms",
    "free": "free_ms",
    "stage": "stage_ms",
    "bubble": "bubble_ms",
    "communicationnotoverlappedandexcludereceive": "comm_not_overlapped_exclude_receive_ms",
    "preparing": "preparing_ms",
}
_STEP_TRACE_REQUIRED = ("computing", "communicationnotoverlapped", "free")
#: CommAnalyzerBandwidth / CommAnalyzerMatrix value column -> .ascend.KINDS kind (as communication.json)
_BANDWIDTH_KINDS = {"transitsize": "mb", "transittime": "ms", "bandwidth": "gbps", "largepacketratio": "ratio"}
_ANALYSIS_TABLES = ("StepTraceTime", "CommAnalyzerTime", "CommAnalyzerBandwidth", "CommAnalyzerMatrix")
_PROFILER_TABLES = ("TASK", "STRING_IDS", "STEP_TIME", "MEMORY_RECORD", "COMPUTE_TASK_INFO", "COMMUNICATION_OP",
                    "OP_MEMORY", "NPU_MODULE_MEM", "OVERLAP_ANALYSIS", "META_DATA")
_STEP_KEY = re.compile(r"^\s*(?:step)?\s*(\d*)\s*$", re.IGNORECASE)
_NAME_RANK = re.compile(r"_(\d+)$")
#: an op or interval longer than this (ns) is not a measurement (limits.MAX_DURATION_MS)
_MAX_SPAN_NS = int(MAX_DURATION_MS * 1_000_000)


def _names(values) -> list[str]:
    """Untrusted text cells (op, kernel, component names): str, capped (limits.cap_text); NULL is ``""``."""
    return [x if len(x) <= MAX_NAME_CHARS else cap_text(x)
            for x in pd.Series(values, dtype=object).fillna("").astype(str)]


def _norm(name: str) -> str:
    return re.sub(r"[^0-9a-z]", "", str(name).lower())


def _q(ident: str) -> str:
    return '"' + str(ident).replace('"', '""') + '"'


# --------------------------------------------------------------------------- opening


class _Db:
    """One open SQLite file: its tables and their columns (looked up case- and punctuation-insensitively)."""

    def __init__(self, path: Path, conn: sqlite3.Connection, tables: dict[str, list[str]]):
        self.path = path
        self.conn = conn
        self.tables = tables
        self._by_norm = {_norm(t): t for t in tables}
        self._rowids: dict[str, bool] = {}

    def table(self, *names: str) -> str | None:
        for n in names:
            t = self._by_norm.get(_norm(n))
            if t is not None:
                return t
        return None

    def col(self, table: str, *names: str) -> str | None:
        cols = {_norm(c): c for c in self.tables.get(table, [])}
        for n in names:
            c = cols.get(_norm(n))
            if c is not None:
                return c
        return None

    def read(self, sql: str, params: tuple = ()) -> pd.DataFrame:
        """Query -> DataFrame; integer columns with NULLs become nullable Int64, not float (ns times stay exact)."""
        cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        df = pd.DataFrame.from_records(rows := cur.fetchall(), columns=names)
        for i, name in enumerate(names):
            if df[name].dtype.kind == "f":
                vals = [r[i] for r in rows]
                if all(v is None or type(v) is int for v in vals):
                    df[name] = pd.array(vals, dtype="Int64")
        return df

    def whole(self, table: str) -> pd.DataFrame:
        """All columns of a table, renamed to their normalised names, and ``_rid`` (the rowid, None without one)."""
        df = self.read(f"SELECT {self.rowid(table)} AS _rid, * FROM {_q(table)}")
        df.columns = ["_rid"] + [_norm(c) for c in df.columns[1:]]
        return df

    def rowid(self, table: str, alias: str = "") -> str:
        """SQL for the rowid of ``table`` (named in data problems), ``NULL`` when it has none."""
        has = self._rowids.get(table)
        if has is None:
            try:
                self.conn.execute(f"SELECT rowid FROM {_q(table)} LIMIT 0")
                has = "rowid" not in {c.lower() for c in self.tables.get(table, [])}
            except sqlite3.Error:
                has = False
            self._rowids[table] = has
        return f"{alias + '.' if alias else ''}rowid" if has else "NULL"

    def string_expr(self, alias: str, col: str, tag: str) -> tuple[str, str]:
        """SQL expression resolving an interned string id (falls back to the stored value) and its join."""
        ref = f"{alias}.{_q(col)}"
        sid = self.table("STRING_IDS")
        if sid is None or not self.col(sid, "id") or not self.col(sid, "value"):
            return f"CAST({ref} AS TEXT)", ""
        return (f"COALESCE({tag}.{_q(self.col(sid, 'value'))}, CAST({ref} AS TEXT))",
                f" LEFT JOIN {_q(sid)} {tag} ON {tag}.{_q(self.col(sid, 'id'))} = {ref}")

    def kind(self) -> str | None:
        if any(self.table(t) for t in _ANALYSIS_TABLES):
            return "analysis"
        if any(self.table(t) for t in _PROFILER_TABLES):
            return "profiler"
        return None


def _open(path: Path, problems: list, stack: ExitStack) -> _Db | None:
    try:
        with open_input(path, "rb") as fh:
            head = fh.read(100)
    except OSError as exc:
        problems.append((str(path), f"cannot read: {exc.strerror or exc}; skipped"))
        return None
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        problems.append((str(path), "not an SQLite database (corrupt, truncated or another format); skipped"))
        return None
    try:
        if head[18] == 2 or head[19] == 2:  # WAL mode: a read-only open would create -wal/-shm beside it
            wal = path.with_name(path.name + "-wal")
            if wal.is_file() and wal.stat().st_size > 0:
                tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="reportgen-db-")))
                shutil.copyfile(path, tmp / path.name)
                shutil.copyfile(wal, tmp / wal.name)
                uri = (tmp / path.name).as_uri()
            else:
                uri = path.resolve().as_uri() + "?mode=ro&immutable=1"
        else:
            uri = path.resolve().as_uri() + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, timeout=1.0)
        stack.callback(conn.close)
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")]
        tables = {n: [r[1] for r in conn.execute(f"PRAGMA table_info({_q(n)})")] for n in names}
    except OSError as exc:
        problems.append((str(path), f"cannot copy the write-ahead log to read it: {exc.strerror or exc}; skipped"))
        return None
    except sqlite3.Error as exc:
        problems.append((str(path), f"unreadable SQLite database ({exc}); skipped"))
        return None
    return _Db(path, conn, tables)


# --------------------------------------------------------------------------- interval arithmetic (int ns)


def _union(s: np.ndarray, e: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Merged, sorted, disjoint intervals (touching ones merge, as torch_npu's merge does)."""
    if len(s) == 0:
        return s.astype(np.int64), e.astype(np.int64)
    o = np.argsort(s, kind="stable")
    s, e = s[o], e[o]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(s), dtype=bool)
    new[1:] = s[1:] > reach[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def _covered(s: np.ndarray, e: np.ndarray, points: np.ndarray) -> np.ndarray:
    """For disjoint sorted intervals: is each point inside one of them (start inclusive, end exclusive)?"""
    return (np.searchsorted(s, points, side="right") - np.searchsorted(e, points, side="right")) > 0


def _minus(a: tuple[np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """a \\ b for two merged interval sets."""
    (as_, ae), (bs, be) = a, b
    if len(as_) == 0 or len(bs) == 0:
        return as_, ae
    pts = np.unique(np.concatenate([as_, ae, bs, be]))
    lo, hi = pts[:-1], pts[1:]
    keep = _covered(as_, ae, lo) & ~_covered(bs, be, lo)
    return _union(lo[keep], hi[keep])


def _gaps(u: tuple[np.ndarray, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    s, e = u
    return e[:-1], s[1:]


def _total(u: tuple[np.ndarray, np.ndarray]) -> int:
    return int((u[1] - u[0]).sum())


# --------------------------------------------------------------------------- per-rank context


def _parse_step(value) -> int | None:
    """``step13`` / ``13`` / ``step`` / None -> 13 / 13 / 0 / 0; anything else, or a step above MAX_ID -> None."""
    if value is None or value is pd.NA or (isinstance(value, float) and math.isnan(value)):
        return 0
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        n = int(value)
    elif isinstance(value, float) and value.is_integer():
        n = int(value)
    else:
        m = _STEP_KEY.match(str(value))
        if not m:
            return None
        n = as_int(m.group(1)) if m.group(1) else 0
    return n if n is not None and 0 <= n <= MAX_ID else None


def _kind(names: pd.Series, types: pd.Series | None = None) -> list[str]:
    out = []
    for i, name in enumerate(names):
        t = str(types.iloc[i]).strip().lower() if types is not None else ""
        if t in ("collective", "p2p"):
            out.append(t)
        else:
            out.append("p2p" if str(name).lower().startswith(P2P_PREFIXES) else "collective")
    return out


def _group_hash(name) -> str:
    text = "" if name is None or name is pd.NA else cap_text(str(name).strip())
    return text if text.isdigit() or not text else str(double_hash(text))


class _Rank:
    """One rank's DBs, the building blocks shared by several tables (cached), and the values refused on the way:
    every number read is checked (:func:`reportgen.readers.ascend.check_numbers` / ``check_times``); a refused
    value skips its row, counted per table and column with the rowids (``rejects``, flushed by
    :func:`read_db_rank`)."""

    def __init__(self, rank: int, analysis: _Db | None, prof: _Db | None, problems: list):
        self.rank = rank
        self.analysis = analysis
        self.prof = prof
        self.problems = problems
        self.rejects = Rejects()
        self._refused: set = set()  # (file, table.column, rowid) already counted
        self._cache: dict[str, object] = {}
        self.steps_refused = 0  # STEP_TIME rows refused (steps)
        if prof is not None and not (prof.table("STRING_IDS") and prof.col(prof.table("STRING_IDS"), "id")
                                     and prof.col(prof.table("STRING_IDS"), "value")):
            self.problem(prof, "no STRING_IDS table (id, value): names are shown as their string ids")
        try:
            self.device = self._device()
        except sqlite3.Error as exc:
            self.problem(prof, f"unreadable RANK_DEVICE_MAP ({exc}); device unknown")
            self.device = None

    def problem(self, db: _Db | None, text: str) -> None:
        self.problems.append((str(db.path) if db is not None else "ASCEND_PROFILER_OUTPUT", text))

    def refuse(self, db: _Db, table: str, df: pd.DataFrame, column: str, bad: np.ndarray, why) -> None:
        """Count the rows of ``df`` (read from ``table``) flagged in ``bad``; ``why(i)`` is the reason of row i."""
        rid = df["_rid"].to_numpy() if "_rid" in df.columns else None
        name = f"{table}.{db.col(table, column) or column}"  # the DB's spelling of a normalised column name
        for i in np.flatnonzero(bad):
            row = rid[i] if rid is not None else None
            row = int(row) if row is not None and pd.notna(row) else None
            if row is not None:  # a row read for two tables (TASK: kernels and device ops) is counted once
                key = (str(db.path), name, row)
                if key in self._refused:
                    continue
                self._refused.add(key)
            self.rejects.add(db.path, row, name, why(i), unit="row")

    def numbers(self, db: _Db, table: str, df: pd.DataFrame, column: str, kind: str, required: bool = False,
                label: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(values in the model's unit, refused mask) of ``df[column]`` as :data:`.ascend.KINDS` ``kind``; NaN and
        not refused when the column is absent. ``label``: the DB's name of the column (default ``column``)."""
        if column not in df.columns:
            return np.full(len(df), np.nan), np.zeros(len(df), dtype=bool)
        v, bad, why = check_numbers(df[column], kind, required)
        self.refuse(db, table, df, label or column, bad, why)
        return v, bad

    def times(self, db: _Db, table: str, df: pd.DataFrame, column: str, unit_ns: int = 1, required: bool = False,
              label: str | None = None) -> tuple[pd.Series, np.ndarray]:
        """(exact int ns as nullable Int64, refused mask) of an absolute time column (DB ns; µs with 1000)."""
        if column not in df.columns:
            return pd.Series(pd.NA, index=range(len(df)), dtype="Int64"), np.zeros(len(df), dtype=bool)
        out, bad, why = check_times(df[column], unit_ns, required)
        self.refuse(db, table, df, label or column, bad, why)
        return out, bad

    def spans(self, db: _Db, table: str, df: pd.DataFrame) -> pd.DataFrame:
        """The rows of ``df`` whose ``s`` / ``e`` (the table's startNs / endNs) are exact int64 ns with
        0 <= s <= e <= s + 1 day (columns made int64); the others are counted as refused rows of ``table``."""
        df = df.reset_index(drop=True)
        start, end = db.col(table, "startNs") or "startNs", db.col(table, "endNs") or "endNs"
        s, bad_s = self.times(db, table, df, "s", required=True, label=start)
        e, bad_e = self.times(db, table, df, "e", required=True, label=end)
        ok = ~bad_s & ~bad_e
        si = s.fillna(0).to_numpy(np.int64)
        ei = e.fillna(0).to_numpy(np.int64)
        with np.errstate(over="ignore"):
            backwards = ok & (ei < si)
            long = ok & ~backwards & ((ei - si) > _MAX_SPAN_NS)
        self.refuse(db, table, df, end, backwards, lambda i: f"before its {start}")
        self.refuse(db, table, df, f"{end} - {start}", long, lambda i: "over one day")
        keep = ok & ~backwards & ~long
        return df[keep].assign(s=si[keep], e=ei[keep]).reset_index(drop=True)

    def _device(self) -> int | None:
        db = self.prof
        t = db.table("RANK_DEVICE_MAP") if db else None
        if not t or not db.col(t, "rankId") or not db.col(t, "deviceId"):
            return None
        rows = db.read(f"SELECT {_q(db.col(t, 'rankId'))}, {_q(db.col(t, 'deviceId'))} FROM {_q(t)} "
                       f"LIMIT 100000").values.tolist()
        pairs = [(as_int(r), as_int(d)) for r, d in rows]
        if any(d is None or not 0 <= d <= MAX_ID for _r, d in pairs):
            self.problem(db, "RANK_DEVICE_MAP holds a deviceId that is not a device number; device unknown")
            return None
        for r, d in pairs:
            if r == self.rank:
                return d
        if len(pairs) == 1:
            r, d = pairs[0]
            if r not in (-1, LOCAL_RANK):  # those say "not distributed"
                said = f"rank {r}" if r is not None and 0 <= r < MAX_RANKS else \
                    f"rankId {cap_text(repr(rows[0][0]), 40)}, not a rank number,"
                self.problem(db, f"RANK_DEVICE_MAP says {said} the directory is rank {self.rank}; "
                                 f"the directory's rank was used")
            return d
        return None

    def pick_device(self, db: _Db, df: pd.DataFrame, col: str, what: str) -> pd.DataFrame:
        """Rows of this rank's device when a table holds several devices (rows whose device is not a device
        number are refused)."""
        if col not in df.columns or df.empty:
            return df
        dev, bad = self.numbers(db, what, df, col, "id", label=db.col(what, "deviceId") or col)
        df = df.assign(**{col: dev})[~bad]
        devs = sorted(int(d) for d in pd.unique(df[col].dropna()))
        if len(devs) <= 1:
            return df
        if self.device is not None and self.device in devs:
            return df[df[col] == self.device]
        self.problem(db, f"{what} holds devices {', '.join(map(str, devs[:20]))}{', …' if len(devs) > 20 else ''} "
                         f"and the DB does not say which is rank {self.rank}; device {devs[0]} was used")
        return df[df[col] == devs[0]]

    # ---- profiler DB building blocks (cached)

    def steps(self) -> list[tuple[int, int, int, int, int]]:
        """(step, host start ns, host end ns, window start ns, window end ns) from STEP_TIME.

        The window is torch_npu's device step range: first start to last end of the tasks launched by
        node-level CANN APIs inside the host range (end at least the host end); the host range if none."""
        if "steps" in self._cache:
            return self._cache["steps"]
        out = []
        db = self.prof
        t = db.table("STEP_TIME") if db else None
        cid, cs, ce = (db.col(t, "id", "step"), db.col(t, "startNs"), db.col(t, "endNs")) if t else (None,) * 3
        if t and cid and cs and ce:
            raw = db.read(f"SELECT {db.rowid(t)} AS _rid, {_q(cid)} AS id, {_q(cs)} AS s, {_q(ce)} AS e FROM {_q(t)}")
            ids = [_parse_step(v) for v in raw["id"]]
            bad = np.array([i is None for i in ids], dtype=bool)
            self.refuse(db, t, raw, cid, bad, lambda i: f"not a step number (0..{MAX_ID})")
            rows = self.spans(db, t, raw.assign(id=[0 if i is None else i for i in ids])[~bad])
            self.steps_refused = len(raw) - len(rows)
            api, task = db.table("CANN_API"), db.table("TASK")
            node_type = 10000
            enum = db.table("ENUM_API_TYPE")
            if enum and db.col(enum, "id") and db.col(enum, "name"):
                hit = db.conn.execute(f"SELECT {_q(db.col(enum, 'id'))} FROM {_q(enum)} "
                                      f"WHERE lower({_q(db.col(enum, 'name'))}) = 'node'").fetchone()
                if hit:
                    node_type = hit[0]
            link = (api and task and all(db.col(api, c) for c in ("connectionId", "type", "startNs", "endNs"))
                    and all(db.col(task, c) for c in ("connectionId", "startNs", "endNs")))
            for step, hs, he in zip(rows["id"].tolist(), rows["s"].tolist(), rows["e"].tolist()):
                lo, hi = hs, he
                if link:
                    dev = db.conn.execute(
                        f"SELECT min(t.{_q(db.col(task, 'startNs'))}), max(t.{_q(db.col(task, 'endNs'))}) "
                        f"FROM {_q(task)} t WHERE t.{_q(db.col(task, 'connectionId'))} IN "
                        f"(SELECT {_q(db.col(api, 'connectionId'))} FROM {_q(api)} WHERE {_q(db.col(api, 'type'))} = ? "
                        f"AND {_q(db.col(api, 'startNs'))} >= ? AND {_q(db.col(api, 'endNs'))} <= ?)",
                        (node_type, hs, he)).fetchone()
                    first, last = (as_int(dev[0]), as_int(dev[1])) if dev else (None, None)
                    if first is not None and last is not None and 0 <= first <= last <= first + _MAX_SPAN_NS:
                        lo, hi = first, max(last, he)  # (tasks with refused times are counted where they are read)
                out.append((int(step), hs, he, lo, hi))
        out.sort(key=lambda r: r[1])
        self._cache["steps"] = out
        return out

    def compute_tasks(self) -> pd.DataFrame:
        """Device compute tasks: s, e (ns), stream, name, type, core."""
        if "compute" in self._cache:
            return self._cache["compute"]
        db = self.prof
        cols = ["s", "e", "stream", "device", "name", "type", "core", "input_shapes", "input_formats", "output_shapes",
                "output_formats"]
        df = pd.DataFrame(columns=cols)
        t, c = (db.table("TASK"), db.table("COMPUTE_TASK_INFO")) if db else (None, None)
        if t and c and db.col(t, "globalTaskId") and db.col(c, "globalTaskId") and db.col(t, "startNs") \
                and db.col(t, "endNs"):
            sel = [f"t.{_q(db.col(t, 'startNs'))} AS s", f"t.{_q(db.col(t, 'endNs'))} AS e"]
            sel.append(f"t.{_q(db.col(t, 'streamId'))} AS stream" if db.col(t, "streamId") else "NULL AS stream")
            sel.append(f"t.{_q(db.col(t, 'deviceId'))} AS device" if db.col(t, "deviceId") else "NULL AS device")
            joins = ""
            # the shapes and formats (strings in STRING_IDS) as kernel_details.csv writes them: FLOPs are counted from
            # them (reportgen/flopcount.py), the same way for both exports
            for out_name, src, tag in (("name", "name", "s1"), ("type", "opType", "s2"), ("core", "taskType", "s3"),
                                       ("input_shapes", "inputShapes", "s4"), ("input_formats", "inputFormats", "s5"),
                                       ("output_shapes", "outputShapes", "s6"),
                                       ("output_formats", "outputFormats", "s7")):
                col = db.col(c, src)
                if col:
                    expr, join = db.string_expr("c", col, tag)
                    sel.append(f"{expr} AS {_q(out_name)}")
                    joins += join
                else:
                    sel.append(f"'' AS {_q(out_name)}")
            sel.insert(0, f"{db.rowid(t, 't')} AS _rid")
            df = self.spans(db, t, db.read(f"SELECT {', '.join(sel)} FROM {_q(c)} c JOIN {_q(t)} t "
                                           f"ON t.{_q(db.col(t, 'globalTaskId'))} = c.{_q(db.col(c, 'globalTaskId'))}"
                                           f"{joins}"))
            df = self.pick_device(db, df, "device", t).reset_index(drop=True)
            stream, bad = self.numbers(db, t, df, "stream", "id", label=db.col(t, "streamId"))
            df = df.assign(stream=stream, name=_names(df["name"]), type=_names(df["type"]), core=_names(df["core"]))
            df = df[~bad].sort_values("s", kind="stable").reset_index(drop=True)
        self._cache["compute"] = df
        return df

    def comm_op_rows(self) -> pd.DataFrame:
        """COMMUNICATION_OP: s, e (ns), op, group, type."""
        if "comm" in self._cache:
            return self._cache["comm"]
        db = self.prof
        df = pd.DataFrame(columns=["s", "e", "op", "group", "type"])
        t = db.table("COMMUNICATION_OP") if db else None
        if t and db.col(t, "startNs") and db.col(t, "endNs") and db.col(t, "opName"):
            sel = [f"o.{_q(db.col(t, 'startNs'))} AS s", f"o.{_q(db.col(t, 'endNs'))} AS e"]
            joins = ""
            for out_name, src, tag in (("op", "opName", "s1"), ("group", "groupName", "s2"), ("type", "opType", "s3")):
                col = db.col(t, src)
                if col:
                    expr, join = db.string_expr("o", col, tag)
                    sel.append(f"{expr} AS {_q(out_name)}")
                    joins += join
                else:
                    sel.append(f"'' AS {_q(out_name)}")
            sel.insert(0, f"{db.rowid(t, 'o')} AS _rid")
            df = self.spans(db, t, db.read(f"SELECT {', '.join(sel)} FROM {_q(t)} o{joins}"))
            df = df.assign(op=_names(df["op"]), group=_names(df["group"]), type=_names(df["type"]))
            df = df.sort_values("s", kind="stable").reset_index(drop=True)
        self._cache["comm"] = df
        return df

    def intervals(self) -> dict[str, tuple[np.ndarray, np.ndarray]] | None:
        """The four overlap interval sets (int ns): from OVERLAP_ANALYSIS, else rebuilt from the tasks."""
        if "intervals" in self._cache:
            return self._cache["intervals"]
        db = self.prof
        res = None
        t = db.table("OVERLAP_ANALYSIS") if db else None
        if t and db.col(t, "startNs") and db.col(t, "endNs") and db.col(t, "type"):
            sel = (f"{db.rowid(t)} AS _rid, {_q(db.col(t, 'startNs'))} AS s, {_q(db.col(t, 'endNs'))} AS e, "
                   f"{_q(db.col(t, 'type'))} AS k")
            sel += f", {_q(db.col(t, 'deviceId'))} AS device" if db.col(t, "deviceId") else ""
            df = self.pick_device(db, self.spans(db, t, db.read(f"SELECT {sel} FROM {_q(t)}")), "device", t)
            if not df.empty:
                res = {}
                for code, kind in OVERLAP_TYPES.items():
                    part = df[pd.to_numeric(df["k"], errors="coerce") == code]
                    res[kind] = _union(part["s"].to_numpy(np.int64), part["e"].to_numpy(np.int64))
        if res is None:
            comp, comm = self.compute_tasks(), self.comm_op_rows()
            if not comp.empty or not comm.empty:
                c = _union(comp["s"].to_numpy(np.int64), comp["e"].to_numpy(np.int64))
                m = _union(comm["s"].to_numpy(np.int64), comm["e"].to_numpy(np.int64))
                both = _union(np.concatenate([c[0], m[0]]), np.concatenate([c[1], m[1]]))
                res = {"computing": c, "communication": m, "comm_not_overlapped": _minus(m, c), "free": _gaps(both)}
        self._cache["intervals"] = res
        return res


# --------------------------------------------------------------------------- analysis DB tables


def _step_time(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.analysis
    t = db.table("StepTraceTime") if db else None
    if t is None:
        return _step_time_from_tasks(ctx)
    df = db.whole(t)
    missing = [c for c in _STEP_TRACE_REQUIRED if c not in df.columns]
    if missing:
        ctx.problem(db, f"StepTraceTime lacks column(s) {', '.join(missing)}; step times not read from it")
        return None
    df = ctx.pick_device(db, df, "deviceid", t).reset_index(drop=True)
    raw = df["step"].tolist() if "step" in df.columns else [None] * len(df)
    no_id = np.array([v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))
                      or str(v).strip().lower() in ("", "step") for v in raw], dtype=bool)
    steps = [NO_STEP_ID if none else _parse_step(v) for v, none in zip(raw, no_id)]
    bad = np.array([x is None for x in steps], dtype=bool)
    ctx.refuse(db, t, df, "step", bad, lambda i: f"not a step number (0..{MAX_ID})")
    out = pd.DataFrame({"rank": np.full(len(df), ctx.rank, dtype=np.int64),
                        "step": np.array([NO_STEP_ID if x is None else x for x in steps], dtype=np.int64)})
    for src, dst in _STEP_TRACE.items():  # as step_trace_time.csv (ascend.parse_step_trace_time)
        kind = "us±" if src == "communicationnotoverlappedandexcludereceive" else "us"
        out[dst], refused = ctx.numbers(db, t, df, src, kind, required=src in _STEP_TRACE_REQUIRED)
        bad |= refused
    out["step_ms"] = out["computing_ms"] + out["comm_not_overlapped_ms"] + out["free_ms"]
    long = ~bad & (out["step_ms"] > MAX_DURATION_MS).to_numpy()
    ctx.refuse(db, t, df, "computing + communication_not_overlapped + free", long, lambda i: "over one day")
    bad |= long
    if (no_id & ~bad).any():
        ctx.problem(db, "StepTraceTime rows without a step number (no profiler schedule) are counted as step 0")
    return out[~bad][STEP_TIME_ORDER].reset_index(drop=True)


def _clip(u: tuple[np.ndarray, np.ndarray], lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
    s, e = np.maximum(u[0], lo), np.minimum(u[1], hi)
    keep = e > s
    return s[keep], e[keep]


def _step_time_from_tasks(ctx: _Rank) -> pd.DataFrame | None:
    """step_trace_time from the profiler DB (no StepTraceTime table): the overlap intervals
    (OVERLAP_ANALYSIS, else rebuilt from the tasks) clipped to each step's device window; bubble =
    ``hcom_receive*`` ops starting in the window, stage = span of all four interval sets - bubble."""
    db = ctx.prof
    iv = ctx.intervals()
    if iv is None:
        return None
    comm = ctx.comm_op_rows()
    ms, me = comm["s"].to_numpy(np.int64), comm["e"].to_numpy(np.int64)
    recv = comm["op"].astype(str).str.lower().str.startswith("hcom_receive").to_numpy()
    steps = ctx.steps()
    windows = [(s, hs, lo, hi) for s, hs, _he, lo, hi in steps]
    if not windows:  # no schedule: one step 0 over everything
        ends = [x for k in OVERLAP_TYPES.values() for x in (iv[k][0], iv[k][1]) if len(x)]
        if not ends:
            return None
        allv = np.concatenate(ends)
        windows = [(NO_STEP_ID, None, int(allv.min()), int(allv.max()))]
    rows = []
    for step, host_start, lo, hi in windows:
        part = {k: _clip(iv[k], lo, hi) for k in OVERLAP_TYPES.values()}
        c, m = part["computing"], part["communication"]
        # span of everything (OVERLAP_ANALYSIS free may reach past the last compute/comm task)
        both = _union(*(np.concatenate([part[k][i] for k in OVERLAP_TYPES.values()]) for i in (0, 1)))
        computing, communication = _total(c), _total(m)
        not_overlapped, free = _total(part["comm_not_overlapped"]), _total(part["free"])
        inside = recv & (ms >= lo) & (ms < hi)
        bubble = int((me[inside] - ms[inside]).sum())
        span = int(both[1][-1] - both[0][0]) if len(both[0]) else 0
        first = int(both[0][0]) if len(both[0]) else None
        preparing = (first - host_start) / NS_PER_MS if (first is not None and host_start is not None) else math.nan
        rows.append((ctx.rank, step, computing / NS_PER_MS, not_overlapped / NS_PER_MS,
                     (communication - not_overlapped) / NS_PER_MS, communication / NS_PER_MS, free / NS_PER_MS,
                     (span - bubble) / NS_PER_MS, bubble / NS_PER_MS,
                     max(not_overlapped - bubble, 0) / NS_PER_MS, preparing))
    out = pd.DataFrame(rows, columns=["rank", "step"] + list(_STEP_TRACE.values()))
    out["step_ms"] = out["computing_ms"] + out["comm_not_overlapped_ms"] + out["free_ms"]
    where = f"{ctx.analysis.path.name} has" if ctx.analysis else "no analysis.db and"
    ctx.problem(db, f"{where} no StepTraceTime table: step times computed from the profiler DB "
                    f"(torch_npu formulas)" + ("" if steps else "; no STEP_TIME either, so one step 0"))
    return out[STEP_TIME_ORDER]


def _comm_ops(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.analysis
    t = db.table("CommAnalyzerTime") if db else None
    if t is None:
        return _comm_ops_from_profiler(ctx)
    df = db.whole(t)
    if "hcclopname" not in df.columns:
        ctx.problem(db, "CommAnalyzerTime has no hccl_op_name column; communication ops not read")
        return None
    steps, bad = _steps_of_rows(ctx, db, t, df)
    start, refused = ctx.times(db, t, df, "starttimestamp", unit_ns=1000)  # µs
    bad |= refused
    values = {}
    for src, dst in (("elapsetime", "elapse_ms"), ("transittime", "transit_ms"), ("waittime", "wait_ms"),
                     ("synchronizationtime", "sync_ms"), ("idletime", "idle_ms")):  # ms, as communication.json
        values[dst], refused = ctx.numbers(db, t, df, src, "ms", required=src == "elapsetime")
        bad |= refused
    ops = _names(df["hcclopname"])
    out = pd.DataFrame({
        "rank": np.full(len(df), ctx.rank, dtype=np.int64), "step": steps,
        "kind": _kind(pd.Series(ops), df["type"] if "type" in df.columns else None),
        "op": ops, "op_type": [_op_type(o) for o in ops],
        "group_hash": [_group_hash(g) for g in df.get("groupname", pd.Series([""] * len(df)))],
        "start_ns": start, **values,
    }, columns=COLUMNS["comm_ops"])
    return out[~bad].reset_index(drop=True)


def _steps_of_rows(ctx: _Rank, db: _Db, table: str, df: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(step of each row, refused mask) from the ``step`` column of an analysis-DB table (``step13``; absent: 0)."""
    steps = [_parse_step(v) for v in (df["step"] if "step" in df.columns else [None] * len(df))]
    bad = np.array([x is None for x in steps], dtype=bool)
    ctx.refuse(db, table, df, "step", bad, lambda i: f"not a step number (0..{MAX_ID})")
    return np.array([0 if x is None else x for x in steps], dtype=np.int64), bad


def _step_of(ctx: _Rank, starts: np.ndarray, end_inclusive: bool) -> np.ndarray:
    """Step number of each start time (ns) by the device step windows; NaN outside every window."""
    out = np.full(len(starts), np.nan)
    for step, _hs, _he, lo, hi in ctx.steps():
        inside = (starts >= lo) & ((starts <= hi) if end_inclusive else (starts < hi)) & np.isnan(out)
        out[inside] = step
    return out


def _comm_ops_from_profiler(ctx: _Rank) -> pd.DataFrame | None:
    comm = ctx.comm_op_rows()
    where = ctx.analysis.path if ctx.analysis else ctx.prof.path if ctx.prof else None
    if comm.empty:
        if ctx.analysis is not None or ctx.prof is not None:
            ctx.problem(ctx.analysis or ctx.prof, "no communication data in the DB export (no CommAnalyzerTime, "
                                                  "no COMMUNICATION_OP rows)")
        return None
    s, e = comm["s"].to_numpy(np.int64), comm["e"].to_numpy(np.int64)
    steps = _step_of(ctx, s, end_inclusive=False)
    ops = comm["op"].astype(str)
    ctx.problems.append((str(where), "no CommAnalyzerTime table (profiler_level Level0?): communication ops have "
                                     "start and elapse time from COMMUNICATION_OP only; transit/wait/sync/idle "
                                     "unknown"))
    nan = np.full(len(comm), math.nan)
    return pd.DataFrame({
        "rank": [ctx.rank] * len(comm), "step": np.nan_to_num(steps, nan=0.0).astype(int),
        "kind": _kind(ops), "op": ops, "op_type": [_op_type(o) for o in ops],
        "group_hash": [_group_hash(g) for g in comm["group"]],
        "start_ns": s, "elapse_ms": (e - s) / NS_PER_MS,
        "transit_ms": nan, "wait_ms": nan, "sync_ms": nan, "idle_ms": nan,
    }, columns=COLUMNS["comm_ops"])


def _comm_bandwidth(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.analysis
    t = db.table("CommAnalyzerBandwidth") if db else None
    if t is None:
        ctx.problem(db or ctx.prof, "no CommAnalyzerBandwidth table: no per-transport communication sizes")
        return None
    df = db.whole(t)
    if "hcclopname" not in df.columns or "transporttype" not in df.columns:
        ctx.problem(db, "CommAnalyzerBandwidth lacks hccl_op_name/transport_type; bandwidth not read")
        return None
    steps, bad = _steps_of_rows(ctx, db, t, df)
    values = {}
    for c, kind in _BANDWIDTH_KINDS.items():
        values[c], refused = ctx.numbers(db, t, df, c, kind)
        bad |= refused
    df = df.assign(_step=steps, hcclopname=_names(df["hcclopname"]), transporttype=_names(df["transporttype"]),
                   **values, **{c: None for c in ("type", "groupname") if c not in df.columns})[~bad]
    rows = []
    mixed = 0
    # one row per packet-size bucket, each carrying the op's totals for that transport: one row per transport
    keys = ["_step", "type", "hcclopname", "groupname", "transporttype"]
    for key, g in df.groupby(keys, sort=False, dropna=False):
        step, kind, op, group, transport = key
        size, time = g["transitsize"], g["transittime"]
        if size.nunique(dropna=False) <= 1 and time.nunique(dropna=False) <= 1:
            size_v, time_v = size.iloc[0], time.iloc[0]
            bw, lpr = g["bandwidth"].iloc[0], g["largepacketratio"].iloc[0]
        else:  # per-bucket values (not seen in real data): add them up
            mixed += 1
            size_v, time_v = size.sum(), time.sum()
            bw = size_v / time_v if time_v else 0.0
            lpr = g["largepacketratio"].max()
        if not (size_v or time_v):
            continue
        rows.append((ctx.rank, int(step), _kind(pd.Series([op]), pd.Series([kind]))[0], op, _group_hash(group),
                     transport, size_v, time_v, bw, lpr))
    if mixed:
        ctx.problem(db, f"{mixed} op/transport pair(s) of CommAnalyzerBandwidth had differing totals per size "
                        f"bucket; the buckets were added up")
    return pd.DataFrame(rows, columns=COLUMNS["comm_bandwidth"])


def _comm_matrix(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.analysis
    t = db.table("CommAnalyzerMatrix") if db else None
    if t is None:
        ctx.problem(db or ctx.prof, "no CommAnalyzerMatrix table: no communication matrix")
        return None
    df = db.whole(t)
    need = [c for c in ("hcclopname", "srcrank", "dstrank") if c not in df.columns]
    if need:
        ctx.problem(db, f"CommAnalyzerMatrix lacks column(s) {', '.join(need)}; matrix not read")
        return None
    rows = []
    steps, bad = _steps_of_rows(ctx, db, t, df)
    get = {c: (_names(df[c]) if c in df.columns else [""] * len(df))
           for c in ("type", "groupname", "transporttype", "opname")}
    sizes, times, bws = (ctx.numbers(db, t, df, c, _BANDWIDTH_KINDS[c]) for c in ("transitsize", "transittime",
                                                                                   "bandwidth"))
    bad |= sizes[1] | times[1] | bws[1]
    ends = []
    for c, local in (("srcrank", False), ("dstrank", True)):  # group-local; a LOCAL_RANK dst: the source itself
        ids = [as_int(x) for x in df[c]]
        wrong = np.array([i is None or not (0 <= i < MAX_RANKS or (local and i == LOCAL_RANK)) for i in ids],
                         dtype=bool)
        ctx.refuse(db, t, df, c, wrong & ~bad, lambda i: f"not a rank index in 0..{MAX_RANKS - 1}")
        bad |= wrong
        ends.append(ids)
    for i, name in enumerate(_names(df["hcclopname"])):
        if bad[i]:
            continue
        op_type, _, stat = name.rpartition("-")
        src_i, dst_i = ends[0][i], ends[1][i]
        if dst_i == LOCAL_RANK:
            dst_i = src_i
        kind = str(get["type"][i]).strip().lower()
        if kind not in ("collective", "p2p"):
            kind = "p2p" if op_type.lower().startswith(("send", "receive", "batchsendrecv")) else "collective"
        rows.append((ctx.rank, int(steps[i]), kind, op_type.lower(), stat, _group_hash(get["groupname"][i]),
                     src_i, dst_i, get["transporttype"][i], sizes[0][i], times[0][i], bws[0][i], get["opname"][i]))
    return pd.DataFrame(rows, columns=COLUMNS["comm_matrix"])


# --------------------------------------------------------------------------- profiler DB tables


def _kernels(ctx: _Rank) -> pd.DataFrame | None:
    comp, comm = ctx.compute_tasks(), ctx.comm_op_rows()
    if comp.empty and comm.empty:
        ctx.problem(ctx.prof, "no TASK/COMPUTE_TASK_INFO rows: no kernels")
        return None
    if comp.empty:
        ctx.problem(ctx.prof, "no TASK/COMPUTE_TASK_INFO rows: the kernels are the communication ops only")
    parts = []
    if not comp.empty:
        parts.append(pd.DataFrame({"s": comp["s"].to_numpy(np.int64), "e": comp["e"].to_numpy(np.int64),
                                   "name": comp["name"], "type": comp["type"], "core": comp["core"],
                                   "stream": comp["stream"].astype(float),
                                   **{c: _shape_text(comp[c]) for c in _SHAPE_COLUMNS}}))
    if not comm.empty:  # kernel_details.csv lists the HCCL ops too, Accelerator Core "HCCL"
        parts.append(pd.DataFrame({"s": comm["s"].to_numpy(np.int64), "e": comm["e"].to_numpy(np.int64),
                                   "name": comm["op"], "type": comm["type"], "core": "HCCL", "stream": math.nan,
                                   **{c: "N/A" for c in _SHAPE_COLUMNS}}))
    df = pd.concat(parts, ignore_index=True).sort_values("s", kind="stable").reset_index(drop=True)
    s = df["s"].to_numpy(np.int64)
    return pd.DataFrame({
        "rank": [ctx.rank] * len(df), "step": _step_of(ctx, s, end_inclusive=True),
        "name": df["name"], "type": df["type"], "core": df["core"], "stream": df["stream"].astype(float),
        "start_ns": s, "dur_ms": (df["e"].to_numpy(np.int64) - s) / NS_PER_MS,
        "op_class": op_class(df["core"], df["type"], df["name"]),  # the COMPUTE_TASK_INFO tasks and the HCCL ops
        **{c: df[c].to_numpy(object) for c in _SHAPE_COLUMNS},
    }, columns=COLUMNS["kernels"])


_SHAPE_COLUMNS = ("input_shapes", "output_shapes", "input_formats", "output_formats")


def _shape_text(col: pd.Series) -> list[str]:
    """Shape / format strings as kernel_details.csv has them (quotes dropped, capped; a NULL is '')."""
    return [cap_text(str(v).strip('"')) if v is not None and v == v else "" for v in col]


def _memory_record(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.prof
    parts = []
    n = db.table("NPU_MEM") if db else None
    if n and db.col(n, "type") and (db.col(n, "timestampNs") or db.col(n, "timestamp")):
        ts = db.col(n, "timestampNs") or db.col(n, "timestamp")
        expr, join = db.string_expr("m", db.col(n, "type"), "s1")
        amounts = [c for c in ("hbm", "ddr") if db.col(n, c)]
        dev = f", m.{_q(db.col(n, 'deviceId'))} AS device" if db.col(n, "deviceId") else ""
        if amounts:
            app = db.read(f"SELECT {db.rowid(n, 'm')} AS _rid, {expr} AS kind, m.{_q(ts)} AS ts"
                          + "".join(f", m.{_q(db.col(n, c))} AS {c}" for c in amounts) + f"{dev} FROM {_q(n)} m{join}")
            app = app[app["kind"].astype(str).str.strip().str.lower() == "app"]
            app = ctx.pick_device(db, app, "device", n).reset_index(drop=True)
            stamp, bad = ctx.times(db, n, app, "ts", required=True, label=ts)
            reserved = np.zeros(len(app))
            for c in amounts:  # hbm + ddr, an absent one counting 0
                v, refused = ctx.numbers(db, n, app, c, "bytes", label=db.col(n, c))
                reserved += np.nan_to_num(v)
                bad |= refused
            parts.append(pd.DataFrame({"component": "APP", "ts_ns": stamp.array, "allocated_mb": math.nan,
                                       "reserved_mb": reserved, "active_mb": math.nan})[~bad])
    t = db.table("MEMORY_RECORD") if db else None
    if t and db.col(t, "component"):
        expr, join = db.string_expr("m", db.col(t, "component"), "s1")
        sel = [f"{db.rowid(t, 'm')} AS _rid", f"{expr} AS component"]
        for out_name, cands in (("ts", ("timestamp", "timestampNs")), ("allocated", ("totalAllocated",)),
                                ("reserved", ("totalReserved",)), ("active", ("totalActive",))):
            col = db.col(t, *cands)
            sel.append(f"m.{_q(col)} AS {_q(out_name)}" if col else f"NULL AS {_q(out_name)}")
        rec = db.read(f"SELECT {', '.join(sel)} FROM {_q(t)} m{join}")
        stamp, bad = ctx.times(db, t, rec, "ts", required=True, label=db.col(t, "timestamp", "timestampNs"))
        sizes = {}
        for c in ("allocated", "reserved", "active"):
            sizes[f"{c}_mb"], refused = ctx.numbers(db, t, rec, c, "bytes", label=db.col(t, f"total{c}"))
            bad |= refused
        parts.append(pd.DataFrame({"component": _names(rec["component"]), "ts_ns": stamp.array, **sizes})[~bad])
    parts = [p for p in parts if not p.empty]
    if not parts:
        ctx.problem(db, "no MEMORY_RECORD / NPU_MEM data (profile_memory off?): no memory records")
        return None
    df = pd.concat(parts, ignore_index=True)
    df.insert(0, "rank", ctx.rank)
    return df[COLUMNS["memory_record"]]


def _module_mem(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.prof
    t = db.table("NPU_MODULE_MEM") if db else None
    mod, ts, res = (db.col(t, "moduleId"), db.col(t, "timestampNs", "timestamp"), db.col(t, "totalReserved")) \
        if t else (None, None, None)
    if not (t and mod and ts and res):
        ctx.problem(db, "no NPU_MODULE_MEM table: no per-module memory")
        return None
    enum = db.table("ENUM_MODULE")
    if enum and db.col(enum, "id") and db.col(enum, "name"):
        comp = f"COALESCE(e.{_q(db.col(enum, 'name'))}, CAST(m.{_q(mod)} AS TEXT))"
        join = f" LEFT JOIN {_q(enum)} e ON e.{_q(db.col(enum, 'id'))} = m.{_q(mod)}"
    else:
        comp, join = db.string_expr("m", mod, "s1")
    dev = f", m.{_q(db.col(t, 'deviceId'))} AS device" if db.col(t, "deviceId") else ""
    df = db.read(f"SELECT {db.rowid(t, 'm')} AS _rid, {comp} AS component, m.{_q(ts)} AS ts, m.{_q(res)} AS reserved"
                 f"{dev} FROM {_q(t)} m{join}")
    df = ctx.pick_device(db, df, "device", t).reset_index(drop=True)
    stamp, bad = ctx.times(db, t, df, "ts", required=True, label=ts)
    reserved, refused = ctx.numbers(db, t, df, "reserved", "bytes", label=res)
    out = pd.DataFrame({"rank": np.full(len(df), ctx.rank, dtype=np.int64), "component": _names(df["component"]),
                        "ts_ns": stamp.array, "reserved_mb": reserved}, columns=COLUMNS["module_mem"])
    return out[~(bad | refused)].reset_index(drop=True)


def _operator_memory(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.prof
    t = db.table("OP_MEMORY") if db else None
    if not (t and db.col(t, "name") and db.col(t, "size")):
        ctx.problem(db, "no OP_MEMORY table: no operator memory")
        return None
    expr, join = db.string_expr("m", db.col(t, "name"), "s1")
    sel = [f"{db.rowid(t, 'm')} AS _rid", f"{expr} AS name", f"m.{_q(db.col(t, 'size'))} AS size"]
    for out_name, cand in (("alloc", "allocationTime"), ("release", "releaseTime"), ("duration", "duration")):
        col = db.col(t, cand)
        sel.append(f"m.{_q(col)} AS {_q(out_name)}" if col else f"NULL AS {_q(out_name)}")
    df = db.read(f"SELECT {', '.join(sel)} FROM {_q(t)} m{join}")
    size, bad = ctx.numbers(db, t, df, "size", "bytes", required=True, label=db.col(t, "size"))
    alloc, refused_a = ctx.times(db, t, df, "alloc", label=db.col(t, "allocationTime"))
    release, refused_r = ctx.times(db, t, df, "release", label=db.col(t, "releaseTime"))
    duration, refused_d = ctx.numbers(db, t, df, "duration", "ns", label=db.col(t, "duration"))
    out = pd.DataFrame({"rank": np.full(len(df), ctx.rank, dtype=np.int64), "name": _names(df["name"]),
                        "size_mb": size, "alloc_ns": alloc.array, "release_ns": release.array,
                        "duration_ms": duration}, columns=COLUMNS["operator_memory"])
    return out[~(bad | refused_a | refused_r | refused_d)].reset_index(drop=True)


def _dataloader(ctx: _Rank) -> pd.DataFrame | None:
    """``enumerate(DataLoader)#...__next__`` spans of the PYTORCH_API table (the Python layer of torch_npu), the
    rows the text export writes into trace_view.json and :mod:`.ascend_trace` reads: rank, name, start_ns, dur_ms
    (the assembly puts them in ProfilerStep windows as the text reader's). None when the DB has no such span."""
    db = ctx.prof
    t = db.table("PYTORCH_API") if db else None
    if not (t and db.col(t, "startNs") and db.col(t, "endNs") and db.col(t, "name")):
        return None
    expr, join = db.string_expr("p", db.col(t, "name"), "s1")
    df = db.read(f"SELECT {db.rowid(t, 'p')} AS _rid, p.{_q(db.col(t, 'startNs'))} AS s, "
                 f"p.{_q(db.col(t, 'endNs'))} AS e, {expr} AS name FROM {_q(t)} p{join} "
                 f"WHERE {expr} LIKE ?", (_LOADER_PREFIX + "%",))
    df = df[df["name"].astype(str).str.startswith(_LOADER_PREFIX)]
    if df.empty:
        return None
    df = ctx.spans(db, t, df).sort_values("s", kind="stable")
    if df.empty:
        return None
    s, e = df["s"].to_numpy(np.int64), df["e"].to_numpy(np.int64)
    return pd.DataFrame({"rank": np.full(len(df), ctx.rank, dtype=np.int64), "name": _names(df["name"]),
                         "start_ns": s, "dur_ms": (e - s) / NS_PER_MS}, columns=COLUMNS["dataloader"])


def _hbm(ctx: _Rank) -> pd.DataFrame | None:
    """The profiler DB's HBM table (bandwidth samples, B/s, per HBM and direction: type, a STRING_IDS id of read /
    write) -> rank, hbm_id, direction, sample (the sample's ordinal: the rows of one timestamp share it),
    bandwidth_gbps (GB/s, 1e9 B). None without the table or its columns."""
    db = ctx.prof
    t = db.table("HBM") if db else None
    if not (t and db.col(t, "timestampNs") and db.col(t, "bandwidth")):
        return None
    hid, typ = db.col(t, "hbmId"), db.col(t, "type")
    expr, join = db.string_expr("h", typ, "s1") if typ else ("''", "")
    df = db.read(f"SELECT h.{_q(db.col(t, 'timestampNs'))} AS ts, h.{_q(db.col(t, 'bandwidth'))} AS bw, "
                 f"{'h.' + _q(hid) if hid else '0'} AS hid, {expr} AS dir FROM {_q(t)} h{join} LIMIT 2000000")
    bw = pd.to_numeric(df["bw"], errors="coerce")
    df = df[bw.notna() & (bw >= 0) & (bw < 1e15)].assign(bw=bw)
    if df.empty:
        return None
    ts = pd.to_numeric(df["ts"], errors="coerce")
    return pd.DataFrame({"rank": np.full(len(df), ctx.rank, dtype=np.int64),
                         "hbm_id": pd.to_numeric(df["hid"], errors="coerce").fillna(-1).astype(np.int64).to_numpy(),
                         "direction": [str(v).strip().lower()[:32] for v in df["dir"]],
                         "sample": ts.rank(method="dense").fillna(0).astype(np.int64).to_numpy(),
                         "bandwidth_gbps": (df["bw"] / 1e9).to_numpy(np.float64)}, columns=COLUMNS["hbm"])


def _llc(ctx: _Rank) -> pd.DataFrame | None:
    """The profiler DB's LLC table (hit rate samples, percent, per LLC; mode a STRING_IDS id of read / write) ->
    rank, llc_id, mode, hit_ratio (0..1), throughput_gbps (GB/s, 1e9 B; NaN when absent). None without it."""
    db = ctx.prof
    t = db.table("LLC") if db else None
    if not (t and db.col(t, "hitRate")):
        return None
    lid, mode, thr = db.col(t, "llcId"), db.col(t, "mode"), db.col(t, "throughput")
    expr, join = db.string_expr("l", mode, "s1") if mode else ("''", "")
    df = db.read(f"SELECT l.{_q(db.col(t, 'hitRate'))} AS hr, {'l.' + _q(thr) if thr else 'NULL'} AS thr, "
                 f"{'l.' + _q(lid) if lid else '0'} AS lid, {expr} AS mode FROM {_q(t)} l{join} LIMIT 2000000")
    hr = pd.to_numeric(df["hr"], errors="coerce")
    df = df[hr.notna() & (hr >= 0) & (hr <= 100)].assign(hr=hr)
    if df.empty:
        return None
    thr = pd.to_numeric(df["thr"], errors="coerce")
    return pd.DataFrame({"rank": np.full(len(df), ctx.rank, dtype=np.int64),
                         "llc_id": pd.to_numeric(df["lid"], errors="coerce").fillna(-1).astype(np.int64).to_numpy(),
                         "mode": [str(v).strip().lower()[:32] for v in df["mode"]],
                         "hit_ratio": (df["hr"] / 100.0).to_numpy(np.float64),
                         "throughput_gbps": (thr.where((thr >= 0) & (thr < 1e15)) / 1e9).to_numpy(np.float64)},
                        columns=COLUMNS["llc"])


def _trace_steps(ctx: _Rank) -> pd.DataFrame | None:
    steps = ctx.steps()
    if not steps:
        if not ctx.steps_refused:  # else the refused rows are the data problem
            ctx.problem(ctx.prof, "no STEP_TIME rows (no profiler schedule?): no step ranges")
        return None
    return pd.DataFrame({"rank": [ctx.rank] * len(steps), "step": [s[0] for s in steps],
                         "start_ns": np.array([s[1] for s in steps], dtype=np.int64),
                         "end_ns": np.array([s[2] for s in steps], dtype=np.int64)},
                        columns=COLUMNS["trace_steps"])


def _overlap_intervals(ctx: _Rank) -> pd.DataFrame | None:
    iv = ctx.intervals()
    if iv is None:
        ctx.problem(ctx.prof, "no OVERLAP_ANALYSIS table and no tasks to rebuild it from: no overlap intervals")
        return None
    kinds, starts, ends = [], [], []
    for kind in OVERLAP_ORDER:
        s, e = iv[kind]
        kinds += [kind] * len(s)
        starts.append(s)
        ends.append(e)
    s, e = np.concatenate(starts), np.concatenate(ends)
    return pd.DataFrame({"rank": np.full(len(s), ctx.rank, dtype=np.int64), "kind": kinds,
                         "start_ns": s.astype(np.int64), "end_ns": e.astype(np.int64)},
                        columns=COLUMNS["overlap_intervals"])


def _hccl_ops(ctx: _Rank) -> pd.DataFrame | None:
    comm = ctx.comm_op_rows()
    if comm.empty:
        return None
    s, e = comm["s"].to_numpy(np.int64), comm["e"].to_numpy(np.int64)
    return pd.DataFrame({"rank": [ctx.rank] * len(comm), "op": comm["op"].astype(str),
                         "lane": comm["group"].fillna("").astype(str), "start_ns": s,
                         "dur_ms": (e - s) / NS_PER_MS}, columns=COLUMNS["hccl_ops"])


def _sync(task_types: pd.Series) -> pd.Series:
    """Synchronisation / marker tasks (as ascend_trace drops them): *WAIT*, *RECORD*, PLACE_HOLDER*,
    PROFILING_ENABLE/DISABLE, Write Value."""
    t = task_types.fillna("").astype(str).str.upper().str.replace(" ", "_", regex=False)
    return (t.str.contains("WAIT", regex=False) | t.str.contains("RECORD", regex=False)
            | t.str.startswith(("PLACE_HOLDER", "PROFILING_")) | (t == "WRITE_VALUE"))


def _device_ops(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.prof
    t = db.table("TASK") if db else None
    if not (t and db.col(t, "startNs") and db.col(t, "endNs") and db.col(t, "globalTaskId")):
        return None
    sel = [f"{db.rowid(t, 't')} AS _rid", f"t.{_q(db.col(t, 'startNs'))} AS s", f"t.{_q(db.col(t, 'endNs'))} AS e",
           f"t.{_q(db.col(t, 'streamId'))} AS stream" if db.col(t, "streamId") else "NULL AS stream",
           f"t.{_q(db.col(t, 'deviceId'))} AS device" if db.col(t, "deviceId") else "NULL AS device"]
    joins = ""
    if db.col(t, "taskType"):
        expr, join = db.string_expr("t", db.col(t, "taskType"), "s1")
        sel.append(f"{expr} AS task_type")
        joins += join
    else:
        sel.append("'' AS task_type")
    gid = f"t.{_q(db.col(t, 'globalTaskId'))}"
    for out_name, table, col, tag in (("cname", "COMPUTE_TASK_INFO", "name", "s2"),
                                      ("hname", "COMMUNICATION_TASK_INFO", "taskType", "s3")):
        tt = db.table(table)
        if tt and db.col(tt, col) and db.col(tt, "globalTaskId"):
            alias = f"x{tag}"
            joins += f" LEFT JOIN {_q(tt)} {alias} ON {alias}.{_q(db.col(tt, 'globalTaskId'))} = {gid}"
            expr, join = db.string_expr(alias, db.col(tt, col), tag)
            sel.append(f"CASE WHEN {alias}.{_q(db.col(tt, col))} IS NULL THEN NULL ELSE {expr} END "
                       f"AS {_q(out_name)}")
            joins += join
        else:
            sel.append(f"NULL AS {_q(out_name)}")
    df = ctx.pick_device(db, ctx.spans(db, t, db.read(f"SELECT {', '.join(sel)} FROM {_q(t)} t{joins}")),
                         "device", t).reset_index(drop=True)
    stream, bad = ctx.numbers(db, t, df, "stream", "id", label=db.col(t, "streamId"))
    df = df.assign(stream=stream)
    name = df["cname"].where(df["cname"].notna(), df["hname"]).where(lambda x: x.notna(), df["task_type"])
    keep = ~(_sync(name) | _sync(df["task_type"])).to_numpy() & ~bad
    # the rank's communication streams: those that run HCCL tasks (COMMUNICATION_TASK_INFO) or HCCL notifies
    hccl = (df["hname"].notna() | df["task_type"].fillna("").astype(str).str.upper().str.startswith("NOTIFY")
            ).to_numpy() & ~bad
    streams = set(df.loc[hccl, "stream"].dropna().tolist())
    on_comm = (df["stream"].isin(streams) & df["cname"].isna()).to_numpy() if streams \
        else np.zeros(len(df), dtype=bool)
    df = df.assign(hccl_task=df["hname"].notna().to_numpy(), on_comm=on_comm)
    df, name = df[keep], _names(name[keep])
    df = df.assign(name=name).sort_values("s", kind="stable")
    s = df["s"].to_numpy(np.int64)
    core = df["task_type"].where(df["cname"].isna(), "AI_CORE")  # a COMPUTE_TASK_INFO task is computation
    return pd.DataFrame({"rank": [ctx.rank] * len(df), "name": df["name"].to_numpy(),
                         "stream": [f"Stream {int(x)}" if pd.notna(x) else "Stream ?" for x in df["stream"]],
                         "start_ns": s, "dur_ms": (df["e"].to_numpy(np.int64) - s) / NS_PER_MS,
                         "op_class": op_class(core, None, df["name"], df["on_comm"].to_numpy(),
                                              df["hccl_task"].to_numpy())},
                        columns=COLUMNS["device_ops"])


def _metadata(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.prof
    rows = []
    t = db.table("META_DATA") if db else None
    if t and db.col(t, "name") and db.col(t, "value"):
        for name, value in db.conn.execute(f"SELECT {_q(db.col(t, 'name'))}, {_q(db.col(t, 'value'))} FROM {_q(t)}"):
            rows.append((ctx.rank, str(name), "" if value is None else str(value), str(db.path)))
    m = db.table("RANK_DEVICE_MAP") if db else None
    if m:
        df = db.read(f"SELECT * FROM {_q(m)}")
        rows.append((ctx.rank, "RANK_DEVICE_MAP", json.dumps(df.astype(object).where(df.notna(), None)
                                                             .to_dict("records"), default=str), str(db.path)))
    return pd.DataFrame(rows, columns=COLUMNS["metadata"]) if rows else None


_READERS = {
    "step_time": _step_time,
    "comm_ops": _comm_ops,
    "comm_bandwidth": _comm_bandwidth,
    "comm_matrix": _comm_matrix,
    "kernels": _kernels,
    "memory_record": _memory_record,
    "module_mem": _module_mem,
    "operator_memory": _operator_memory,
    "trace_steps": _trace_steps,
    "overlap_intervals": _overlap_intervals,
    "hccl_ops": _hccl_ops,
    "device_ops": _device_ops,
    "metadata": _metadata,
    "dataloader": _dataloader,
    "hbm": _hbm,
    "llc": _llc,
}
_NEEDS_PROFILER = {"kernels", "memory_record", "module_mem", "operator_memory", "trace_steps", "overlap_intervals",
                   "hccl_ops", "device_ops", "metadata", "dataloader", "hbm", "llc"}


# --------------------------------------------------------------------------- entry point


def _pick(dbs: list[_Db], rank: int, role: str, problems: list) -> _Db | None:
    if len(dbs) <= 1:
        return dbs[0] if dbs else None

    def score(db: _Db):
        m = _NAME_RANK.search(db.path.stem)
        return (0 if m and int(m.group(1)) == rank else 1, db.path.name)

    dbs = sorted(dbs, key=score)
    problems.append((str(dbs[0].path), f"{len(dbs)} {role} DBs in one directory "
                                       f"({', '.join(d.path.name for d in dbs)}); this one was used"))
    return dbs[0]


def read_db_rank(prof_dir: Path, rank: int, wanted: set[str], problems: list) -> dict[str, pd.DataFrame]:
    """Read the tables in `wanted` (names as above) that the DB files under prof_dir/ASCEND_PROFILER_OUTPUT provide."""
    prof_dir = Path(prof_dir)
    base = prof_dir / OUTPUT_DIR if (prof_dir / OUTPUT_DIR).is_dir() else prof_dir
    unknown = sorted(set(wanted) - set(_READERS))
    if unknown:
        problems.append((str(base), f"table(s) {', '.join(unknown)} cannot come from a DB export"))
    names = [n for n in _READERS if n in wanted]
    out: dict[str, pd.DataFrame] = {}
    if not names:
        return out
    try:
        files = sorted(p for p in base.iterdir() if p.suffix.lower() in (".db", ".dat") and p.is_file())
    except OSError as exc:
        problems.append((str(base), f"cannot list directory: {exc.strerror or exc}"))
        return out
    if not files:
        problems.append((str(base), "no .db / .dat file: nothing read from a DB export"))
        return out
    with ExitStack() as stack:
        analysis, profiler = [], []
        for path in files:
            db = _open(path, problems, stack)
            if db is None:
                continue
            kind = db.kind()
            if kind == "analysis":
                analysis.append(db)
            elif kind == "profiler":
                profiler.append(db)
            else:
                problems.append((str(path), "SQLite file without any known profiler table (empty export?); skipped"))
        a = _pick(analysis, rank, "comm-analysis", problems)
        p = _pick(profiler, rank, "profiler", problems)
        if a is None and p is None:
            return out
        ctx = _Rank(rank, a, p, problems)
        if p is None and _NEEDS_PROFILER & set(names):
            problems.append((str(a.path), f"no profiler DB (ascend_*_profiler_<rank>.db) beside it: "
                                          f"{', '.join(n for n in names if n in _NEEDS_PROFILER)} not available"))
        for name in names:
            if name in _NEEDS_PROFILER and p is None:
                continue
            try:
                df = _READERS[name](ctx)
            except sqlite3.Error as exc:
                src = ctx.prof if name in _NEEDS_PROFILER else (ctx.analysis or ctx.prof)
                problems.append((str(src.path), f"{name}: unreadable table ({str(exc).splitlines()[0][:120]}); "
                                                f"skipped"))
                continue
            except (ValueError, TypeError, KeyError, OverflowError, AttributeError, IndexError) as exc:
                src = ctx.prof if name in _NEEDS_PROFILER else (ctx.analysis or ctx.prof)
                problems.append((str(src.path), f"{name}: unexpected content ({type(exc).__name__}: "
                                                f"{str(exc)[:120]}); skipped"))
                continue
            if df is not None:
                out[name] = df.reset_index(drop=True)
        ctx.rejects.flush(lambda path, text: problems.append((path, text)))
    return out
