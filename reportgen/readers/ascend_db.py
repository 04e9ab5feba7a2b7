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
the HCCL group name), ``device_ops`` (``TASK`` without synchronisation tasks), and ``metadata``
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

from ..timebase import column_ns
from .ascend import NO_STEP_ID, OUTPUT_DIR, P2P_PREFIXES, STEP_TIME_ORDER, _op_type, double_hash

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
    "kernels": ["rank", "step", "name", "type", "core", "stream", "start_ns", "dur_ms"],
    "memory_record": ["rank", "component", "ts_ns", "allocated_mb", "reserved_mb", "active_mb"],
    "module_mem": ["rank", "component", "ts_ns", "reserved_mb"],
    "operator_memory": ["rank", "name", "size_mb", "alloc_ns", "release_ns", "duration_ms"],
    "trace_steps": ["rank", "step", "start_ns", "end_ns"],
    "overlap_intervals": ["rank", "kind", "start_ns", "end_ns"],
    "hccl_ops": ["rank", "op", "lane", "start_ns", "dur_ms"],
    "device_ops": ["rank", "name", "stream", "start_ns", "dur_ms"],
    "metadata": ["rank", "name", "value", "path"],
}

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
_ANALYSIS_TABLES = ("StepTraceTime", "CommAnalyzerTime", "CommAnalyzerBandwidth", "CommAnalyzerMatrix")
_PROFILER_TABLES = ("TASK", "STRING_IDS", "STEP_TIME", "MEMORY_RECORD", "COMPUTE_TASK_INFO", "COMMUNICATION_OP",
                    "OP_MEMORY", "NPU_MODULE_MEM", "OVERLAP_ANALYSIS", "META_DATA")
_STEP_KEY = re.compile(r"^\s*(?:step)?\s*(\d*)\s*$", re.IGNORECASE)
_NAME_RANK = re.compile(r"_(\d+)$")


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
        """All columns of a table, renamed to their normalised names."""
        df = self.read(f"SELECT * FROM {_q(table)}")
        df.columns = [_norm(c) for c in df.columns]
        return df

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
        with open(path, "rb") as fh:
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
    """``step13`` / ``13`` / ``step`` / None -> 13 / 13 / 0 / 0; anything else -> None."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return 0
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    m = _STEP_KEY.match(str(value))
    if not m:
        return None
    return int(m.group(1)) if m.group(1) else 0


def _exact_se(df: pd.DataFrame) -> pd.DataFrame:
    """Rows with both ``s`` and ``e`` (ns) as exact int64 (INTEGER, TEXT or NUMERIC cells; timebase.column_ns)."""
    s, e = column_ns(df["s"], 1), column_ns(df["e"], 1)
    keep = (s.notna() & e.notna()).to_numpy()
    return df[keep].assign(s=s[keep].astype("int64"), e=e[keep].astype("int64"))


def _nums(series) -> pd.Series:
    return pd.to_numeric(pd.Series(series), errors="coerce").astype(float)


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
    text = "" if name is None else str(name).strip()
    return text if text.isdigit() or not text else str(double_hash(text))


class _Rank:
    def __init__(self, rank: int, analysis: _Db | None, prof: _Db | None, problems: list):
        self.rank = rank
        self.analysis = analysis
        self.prof = prof
        self.problems = problems
        self._cache: dict[str, object] = {}
        try:
            self.device = self._device()
        except sqlite3.Error as exc:
            self.problem(prof, f"unreadable RANK_DEVICE_MAP ({exc}); device unknown")
            self.device = None

    def problem(self, db: _Db | None, text: str) -> None:
        self.problems.append((str(db.path) if db is not None else "ASCEND_PROFILER_OUTPUT", text))

    def _device(self) -> int | None:
        db = self.prof
        t = db.table("RANK_DEVICE_MAP") if db else None
        if not t or not db.col(t, "rankId") or not db.col(t, "deviceId"):
            return None
        rows = db.read(f"SELECT {_q(db.col(t, 'rankId'))}, {_q(db.col(t, 'deviceId'))} FROM {_q(t)}").values.tolist()
        for r, d in rows:
            if r == self.rank:
                return int(d)
        if len(rows) == 1:
            r, d = rows[0]
            if isinstance(r, int) and 0 <= r < LOCAL_RANK:
                self.problem(db, f"RANK_DEVICE_MAP says rank {r}, the directory is rank {self.rank}; "
                                 f"the directory's rank was used")
            return int(d)
        return None

    def pick_device(self, db: _Db, df: pd.DataFrame, col: str, what: str) -> pd.DataFrame:
        """Rows of this rank's device when a table holds several devices."""
        if col not in df.columns or df.empty:
            return df
        devs = sorted(pd.unique(df[col].dropna()))
        if len(devs) <= 1:
            return df
        if self.device is not None and self.device in devs:
            return df[df[col] == self.device]
        self.problem(db, f"{what} holds devices {', '.join(str(int(d)) for d in devs)} and the DB does not say "
                         f"which is rank {self.rank}; device {int(devs[0])} was used")
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
            rows = db.read(f"SELECT {_q(cid)}, {_q(cs)}, {_q(ce)} FROM {_q(t)}").values.tolist()
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
            bad = 0
            for sid, hs, he in rows:
                step = _parse_step(sid)
                if step is None or hs is None or he is None:
                    bad += 1
                    continue
                hs, he = int(hs), int(he)
                lo, hi = hs, he
                if link:
                    dev = db.conn.execute(
                        f"SELECT min(t.{_q(db.col(task, 'startNs'))}), max(t.{_q(db.col(task, 'endNs'))}) "
                        f"FROM {_q(task)} t WHERE t.{_q(db.col(task, 'connectionId'))} IN "
                        f"(SELECT {_q(db.col(api, 'connectionId'))} FROM {_q(api)} WHERE {_q(db.col(api, 'type'))} = ? "
                        f"AND {_q(db.col(api, 'startNs'))} >= ? AND {_q(db.col(api, 'endNs'))} <= ?)",
                        (node_type, hs, he)).fetchone()
                    if dev and dev[0] is not None:
                        lo, hi = int(dev[0]), max(int(dev[1]), he)
                out.append((step, hs, he, lo, hi))
            if bad:
                self.problem(db, f"{bad} STEP_TIME row(s) without a step number or time skipped")
        out.sort(key=lambda r: r[1])
        self._cache["steps"] = out
        return out

    def compute_tasks(self) -> pd.DataFrame:
        """Device compute tasks: s, e (ns), stream, name, type, core."""
        if "compute" in self._cache:
            return self._cache["compute"]
        db = self.prof
        cols = ["s", "e", "stream", "device", "name", "type", "core"]
        df = pd.DataFrame(columns=cols)
        t, c = (db.table("TASK"), db.table("COMPUTE_TASK_INFO")) if db else (None, None)
        if t and c and db.col(t, "globalTaskId") and db.col(c, "globalTaskId") and db.col(t, "startNs") \
                and db.col(t, "endNs"):
            sel = [f"t.{_q(db.col(t, 'startNs'))} AS s", f"t.{_q(db.col(t, 'endNs'))} AS e"]
            sel.append(f"t.{_q(db.col(t, 'streamId'))} AS stream" if db.col(t, "streamId") else "NULL AS stream")
            sel.append(f"t.{_q(db.col(t, 'deviceId'))} AS device" if db.col(t, "deviceId") else "NULL AS device")
            joins = ""
            for out_name, src, tag in (("name", "name", "s1"), ("type", "opType", "s2"), ("core", "taskType", "s3")):
                col = db.col(c, src)
                if col:
                    expr, join = db.string_expr("c", col, tag)
                    sel.append(f"{expr} AS {_q(out_name)}")
                    joins += join
                else:
                    sel.append(f"'' AS {_q(out_name)}")
            df = _exact_se(db.read(f"SELECT {', '.join(sel)} FROM {_q(c)} c JOIN {_q(t)} t "
                                   f"ON t.{_q(db.col(t, 'globalTaskId'))} = c.{_q(db.col(c, 'globalTaskId'))}{joins}"))
            df = self.pick_device(db, df, "device", "TASK")
            df = df.sort_values("s", kind="stable").reset_index(drop=True)
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
            df = _exact_se(db.read(f"SELECT {', '.join(sel)} FROM {_q(t)} o{joins}"))
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
            sel = f"{_q(db.col(t, 'startNs'))} AS s, {_q(db.col(t, 'endNs'))} AS e, {_q(db.col(t, 'type'))} AS k"
            sel += f", {_q(db.col(t, 'deviceId'))} AS device" if db.col(t, "deviceId") else ""
            df = self.pick_device(db, _exact_se(db.read(f"SELECT {sel} FROM {_q(t)}")), "device", "OVERLAP_ANALYSIS")
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
    missing = [c for c in ("computing", "communicationnotoverlapped", "free") if c not in df.columns]
    if missing:
        ctx.problem(db, f"StepTraceTime lacks column(s) {', '.join(missing)}; step times not read from it")
        return None
    df = ctx.pick_device(db, df, "deviceid", "StepTraceTime")
    raw = df["step"].tolist() if "step" in df.columns else [None] * len(df)
    no_id = [v is None or (isinstance(v, float) and math.isnan(v)) or str(v).strip().lower() in ("", "step")
             for v in raw]
    if any(no_id):
        ctx.problem(db, "StepTraceTime rows without a step number (no profiler schedule) are counted as step 0")
    steps = [NO_STEP_ID if none else _parse_step(v) for v, none in zip(raw, no_id)]
    keep = [s is not None for s in steps]
    if not all(keep):
        ctx.problem(db, f"{keep.count(False)} StepTraceTime row(s) with an unreadable step skipped")
    df = df[keep]
    out = pd.DataFrame({"rank": [ctx.rank] * len(df), "step": [s for s in steps if s is not None]})
    for src, dst in _STEP_TRACE.items():
        out[dst] = _nums(df[src]).to_numpy() / US_PER_MS if src in df.columns else math.nan
    out["step_ms"] = out["computing_ms"] + out["comm_not_overlapped_ms"] + out["free_ms"]
    return out[STEP_TIME_ORDER].reset_index(drop=True)


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
    steps = [_parse_step(v) for v in df.get("step", pd.Series([None] * len(df)))]
    keep = np.array([s is not None for s in steps], dtype=bool)
    if not keep.all():
        ctx.problem(db, f"{int((~keep).sum())} CommAnalyzerTime row(s) with an unreadable step skipped")
    df = df[keep].reset_index(drop=True)
    ops = df["hcclopname"].astype(str)

    def col(name, scale=1.0):
        return _nums(df[name]).to_numpy() / scale if name in df.columns else np.full(len(df), math.nan)

    return pd.DataFrame({
        "rank": [ctx.rank] * len(df), "step": [s for s in steps if s is not None],
        "kind": _kind(ops, df["type"] if "type" in df.columns else None),
        "op": ops, "op_type": [_op_type(o) for o in ops],
        "group_hash": [_group_hash(g) for g in df.get("groupname", pd.Series([""] * len(df)))],
        "start_ns": column_ns(df["starttimestamp"]) if "starttimestamp" in df.columns else pd.NA,
        "elapse_ms": col("elapsetime"),
        "transit_ms": col("transittime"), "wait_ms": col("waittime"),
        "sync_ms": col("synchronizationtime"), "idle_ms": col("idletime"),
    }, columns=COLUMNS["comm_ops"])


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
    for c in ("transitsize", "transittime", "bandwidth", "largepacketratio"):
        df[c] = _nums(df[c]) if c in df.columns else math.nan
    for c in ("step", "type", "groupname"):
        if c not in df.columns:
            df[c] = None
    df["_step"] = [_parse_step(v) for v in df["step"]]
    bad = int(df["_step"].isna().sum())
    if bad:
        ctx.problem(db, f"{bad} CommAnalyzerBandwidth row(s) with an unreadable step skipped")
    df = df[df["_step"].notna()]
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
        rows.append((ctx.rank, int(step), _kind(pd.Series([op]), pd.Series([kind]))[0], str(op), _group_hash(group),
                     str(transport), size_v, time_v, bw, lpr))
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
    skipped = 0
    get = {c: (df[c].tolist() if c in df.columns else [None] * len(df))
           for c in ("step", "type", "groupname", "transporttype", "opname")}
    sizes, times, bws = (_nums(df[c]) if c in df.columns else pd.Series([math.nan] * len(df))
                         for c in ("transitsize", "transittime", "bandwidth"))
    for i, (name, src, dst) in enumerate(zip(df["hcclopname"], df["srcrank"], df["dstrank"])):
        step = _parse_step(get["step"][i])
        src_s, dst_s = str(src).strip(), str(dst).strip()
        if step is None or not src_s.isdigit() or not dst_s.isdigit():
            skipped += 1
            continue
        op_type, _, stat = str(name).rpartition("-")
        src_i, dst_i = int(src_s), int(dst_s)
        if dst_i == LOCAL_RANK:
            dst_i = src_i
        kind = str(get["type"][i]).strip().lower()
        if kind not in ("collective", "p2p"):
            kind = "p2p" if op_type.lower().startswith(("send", "receive", "batchsendrecv")) else "collective"
        rows.append((ctx.rank, step, kind,
                     op_type.lower(), stat, _group_hash(get["groupname"][i]),
                     src_i, dst_i, "" if get["transporttype"][i] is None else str(get["transporttype"][i]),
                     sizes.iloc[i], times.iloc[i], bws.iloc[i],
                     "" if get["opname"][i] is None else str(get["opname"][i])))
    if skipped:
        ctx.problem(db, f"{skipped} CommAnalyzerMatrix row(s) with an unreadable step or rank skipped")
    return pd.DataFrame(rows, columns=COLUMNS["comm_matrix"])


# --------------------------------------------------------------------------- profiler DB tables


def _kernels(ctx: _Rank) -> pd.DataFrame | None:
    comp, comm = ctx.compute_tasks(), ctx.comm_op_rows()
    if comp.empty and comm.empty:
        ctx.problem(ctx.prof, "no TASK/COMPUTE_TASK_INFO rows: no kernels")
        return None
    def text(series: pd.Series) -> pd.Series:
        return series.fillna("").astype(str)

    parts = []
    if not comp.empty:
        parts.append(pd.DataFrame({"s": comp["s"].to_numpy(np.int64), "e": comp["e"].to_numpy(np.int64),
                                   "name": text(comp["name"]), "type": text(comp["type"]),
                                   "core": text(comp["core"]), "stream": _nums(comp["stream"])}))
    if not comm.empty:  # kernel_details.csv lists the HCCL ops too, Accelerator Core "HCCL"
        parts.append(pd.DataFrame({"s": comm["s"].to_numpy(np.int64), "e": comm["e"].to_numpy(np.int64),
                                   "name": text(comm["op"]), "type": text(comm["type"]),
                                   "core": "HCCL", "stream": math.nan}))
    df = pd.concat(parts, ignore_index=True).sort_values("s", kind="stable").reset_index(drop=True)
    s = df["s"].to_numpy(np.int64)
    return pd.DataFrame({
        "rank": [ctx.rank] * len(df), "step": _step_of(ctx, s, end_inclusive=True),
        "name": df["name"], "type": df["type"], "core": df["core"], "stream": df["stream"].astype(float),
        "start_ns": s, "dur_ms": (df["e"].to_numpy(np.int64) - s) / NS_PER_MS,
    }, columns=COLUMNS["kernels"])


def _memory_record(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.prof
    parts = []
    n = db.table("NPU_MEM") if db else None
    if n and db.col(n, "type") and (db.col(n, "timestampNs") or db.col(n, "timestamp")):
        ts = db.col(n, "timestampNs") or db.col(n, "timestamp")
        expr, join = db.string_expr("m", db.col(n, "type"), "s1")
        amounts = [f"COALESCE(m.{_q(db.col(n, c))}, 0)" for c in ("hbm", "ddr") if db.col(n, c)]
        dev = f", m.{_q(db.col(n, 'deviceId'))} AS device" if db.col(n, "deviceId") else ""
        if amounts:
            app = db.read(f"SELECT {expr} AS kind, m.{_q(ts)} AS ts, ({' + '.join(amounts)}) AS reserved{dev} "
                          f"FROM {_q(n)} m{join}")
            app = app[app["kind"].astype(str).str.strip().str.lower() == "app"]
            app = ctx.pick_device(db, app, "device", "NPU_MEM")
            parts.append(pd.DataFrame({"component": "APP", "ts_ns": column_ns(app["ts"], 1).array,
                                       "allocated_mb": math.nan,
                                       "reserved_mb": _nums(app["reserved"]).to_numpy() / BYTES_PER_MB,
                                       "active_mb": math.nan}))
    t = db.table("MEMORY_RECORD") if db else None
    if t and db.col(t, "component"):
        expr, join = db.string_expr("m", db.col(t, "component"), "s1")
        sel = [f"{expr} AS component"]
        for out_name, cands in (("ts", ("timestamp", "timestampNs")), ("allocated", ("totalAllocated",)),
                                ("reserved", ("totalReserved",)), ("active", ("totalActive",))):
            col = db.col(t, *cands)
            sel.append(f"m.{_q(col)} AS {_q(out_name)}" if col else f"NULL AS {_q(out_name)}")
        rec = db.read(f"SELECT {', '.join(sel)} FROM {_q(t)} m{join}")
        parts.append(pd.DataFrame({"component": rec["component"].astype(str),
                                   "ts_ns": column_ns(rec["ts"], 1).array,
                                   "allocated_mb": _nums(rec["allocated"]).to_numpy() / BYTES_PER_MB,
                                   "reserved_mb": _nums(rec["reserved"]).to_numpy() / BYTES_PER_MB,
                                   "active_mb": _nums(rec["active"]).to_numpy() / BYTES_PER_MB}))
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
    df = db.read(f"SELECT {comp} AS component, m.{_q(ts)} AS ts, m.{_q(res)} AS reserved{dev} FROM {_q(t)} m{join}")
    df = ctx.pick_device(db, df, "device", "NPU_MODULE_MEM")
    return pd.DataFrame({"rank": [ctx.rank] * len(df), "component": df["component"].astype(str).to_numpy(),
                         "ts_ns": column_ns(df["ts"], 1).array,
                         "reserved_mb": _nums(df["reserved"]).to_numpy() / BYTES_PER_MB},
                        columns=COLUMNS["module_mem"])


def _operator_memory(ctx: _Rank) -> pd.DataFrame | None:
    db = ctx.prof
    t = db.table("OP_MEMORY") if db else None
    if not (t and db.col(t, "name") and db.col(t, "size")):
        ctx.problem(db, "no OP_MEMORY table: no operator memory")
        return None
    expr, join = db.string_expr("m", db.col(t, "name"), "s1")
    sel = [f"{expr} AS name", f"m.{_q(db.col(t, 'size'))} AS size"]
    for out_name, cand in (("alloc", "allocationTime"), ("release", "releaseTime"), ("duration", "duration")):
        col = db.col(t, cand)
        sel.append(f"m.{_q(col)} AS {_q(out_name)}" if col else f"NULL AS {_q(out_name)}")
    df = db.read(f"SELECT {', '.join(sel)} FROM {_q(t)} m{join}")
    return pd.DataFrame({"rank": [ctx.rank] * len(df), "name": df["name"].astype(str).to_numpy(),
                         "size_mb": _nums(df["size"]).to_numpy() / BYTES_PER_MB,
                         "alloc_ns": column_ns(df["alloc"], 1).array,
                         "release_ns": column_ns(df["release"], 1).array,
                         "duration_ms": _nums(df["duration"]).to_numpy() / NS_PER_MS},
                        columns=COLUMNS["operator_memory"])


def _trace_steps(ctx: _Rank) -> pd.DataFrame | None:
    steps = ctx.steps()
    if not steps:
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
    sel = [f"t.{_q(db.col(t, 'startNs'))} AS s", f"t.{_q(db.col(t, 'endNs'))} AS e",
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
    df = _exact_se(db.read(f"SELECT {', '.join(sel)} FROM {_q(t)} t{joins}"))
    df = ctx.pick_device(db, df, "device", "TASK")
    name = df["cname"].where(df["cname"].notna(), df["hname"]).where(lambda x: x.notna(), df["task_type"])
    keep = ~(_sync(name) | _sync(df["task_type"]))
    df, name = df[keep], name[keep].astype(str)
    df = df.assign(name=name).sort_values("s", kind="stable")
    s = df["s"].to_numpy(np.int64)
    return pd.DataFrame({"rank": [ctx.rank] * len(df), "name": df["name"].to_numpy(),
                         "stream": [f"Stream {int(x)}" if pd.notna(x) else "Stream ?" for x in df["stream"]],
                         "start_ns": s, "dur_ms": (df["e"].to_numpy(np.int64) - s) / NS_PER_MS},
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
                                                             .to_dict("records")), str(db.path)))
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
}
_NEEDS_PROFILER = {"kernels", "memory_record", "module_mem", "operator_memory", "trace_steps", "overlap_intervals",
                   "hccl_ops", "device_ops", "metadata"}


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
            except (ValueError, TypeError, KeyError, OverflowError) as exc:
                src = ctx.prof if name in _NEEDS_PROFILER else (ctx.analysis or ctx.prof)
                problems.append((str(src.path), f"{name}: unexpected content ({type(exc).__name__}: "
                                                f"{str(exc)[:120]}); skipped"))
                continue
            if df is not None:
                out[name] = df.reset_index(drop=True)
    return out
