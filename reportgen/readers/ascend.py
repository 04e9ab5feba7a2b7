"""Reader for Ascend profiler output of torch_npu (``*_ascend_pt``) and MindSpore 2.x (``*_ascend_ms``).

Format facts, formulas and traps: ../shared/research/ascend-profiler-output-and-msprof-analyze.md.

* Discovery: every directory at any depth whose name ends in ``ascend_pt`` / ``ascend_ms`` (or that
  holds an ``ASCEND_PROFILER_OUTPUT`` folder). The rank comes from ``profiler_info_{rank}.json``
  (the device id is NOT the rank); MindSpore CPU output carries it only in ``FRAMEWORK/*_{rank}``
  file suffixes. Every rank id is checked (:func:`reportgen.limits.rank_id`: 0..MAX_RANKS-1, else named and
  ignored). Two folders for one rank: they are grouped into profiling windows (:mod:`.windows`: by the steps
  ``step_trace_time.csv`` lists, else the start time from ``profiler_info`` ``start_info`` / ``end_info``), one
  window is read (newest complete, or ``--window``) and every window is named; within a window the newest folder
  (time stamp in the name, else modification time; the first in path order on a tie) wins, and a data problem
  says which and why.
* World size and expected ranks: ``profiler_metadata.json`` ``distributed_args.world_size`` (MindSpore <= 2.4:
  ``rank_size``), each file's claim checked against the ranks found (:func:`reportgen.limits.world_size`; the
  smallest usable claim wins), else the union of every rank's ``parallel_group_info``, whose ``global_ranks``
  are checked (a group with a member that is not a rank, a repeat, or a rank beyond the world size is ignored).
  Nothing is allocated from a claim: missing ranks are listed up to :data:`reportgen.limits.MAX_LISTED_RANKS`, else counted.
* Everything is parsed by header name, never by position. Units become ms / MB (10^6 B) / GB/s.
* Values are checked where they are read (issue 14): CSVs through :class:`Csv` (rows with another field count,
  a cell over the csv field limit, a last row cut by a missing newline are refused), numbers through
  :func:`check_numbers` / :func:`check_times` with the bounds of :data:`KINDS` (text, NaN, inf, negative,
  over a day per op or step, larger than 1 PB, beyond the int64 ns range), JSON entries of the wrong shape or with a
  refused number skipped. Every refusal is a data problem naming the file, the line / entry / row and the
  column (:class:`reportgen.limits.Rejects`); a refused value is never used.
* Times (model doc, "Time base"): parsers give absolute times as exact int ns (``*_ns``: CSV / JSON µs text via
  :mod:`reportgen.timebase`, DB ns integers); the run origin is the earliest of them over the tables read at once
  (trace_view.json, communication.json, the DB), or, when only the lazily parsed CSVs carry times, the earliest
  of their first rows; every table, lazy ones when parsed, gets ``*_ms`` relative to it.
* Communication op names end in ``@<hash>`` where hash = HCCL ``double_hash`` of the group key; the
  map back to the group comes from hashing every ``parallel_group_info`` key. Matrix links use
  group-local indices; they are mapped to global ranks through the group's sorted ``global_ranks``.
* When the text files are absent the same facts come from the DB export (:mod:`.ascend_db`).
* One op class per device task (``op_class`` of ``kernels``, ``op_stats`` and ``device_ops``, text, trace and DB
  alike): :func:`op_class`, the family's one rule (waits, HCCL rows and the tasks of HCCL's streams, copies,
  computation, other), so that no section classifies an Ascend task by its name.
* Level0 (no communication.json, no analysis DB): ``comm_ops`` from trace_view.json's HCCL ops
  (:func:`level0_comm_ops`; transit / wait / sync / idle NaN), as the DB export gives them from COMMUNICATION_OP.
* ``op_flops`` (the canonical FLOPs table, parsed on first use): one row per cube kernel of ``kernels`` (text
  kernel_details.csv or the DB's COMPUTE_TASK_INFO, the same shape and format strings), FLOPs from its device
  shapes and formats (:func:`reportgen.flopcount.ascend_op_flops`; the Ascend formats are read there, once).
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
from dataclasses import dataclass, field
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from ..flopcount import ascend_op_flops
from ..errors import InputError
from ..frames import text_where
from .. import limits
from ..limits import (MAX_DURATION_MS, MAX_NAME_CHARS, MAX_RANKS, MAX_SIZE_MB, Rejects, as_int, cap_text,
                      finite_number, rank_id, world_size)
from . import _files
from ._files import open_input, read_text as _read_text
from . import windows
from .windows import WANTED
from ..model import Run, share_text
from ..timebase import abs_columns, column_ns, origin, to_ns, to_rel_ms
from ..timeline import per_value

try:  # the fast JSON decoder the Kineto reader uses (optional): typed decoding of the communication files
    import msgspec as _msgspec
except ImportError:  # pragma: no cover - the stdlib path reads the same files, slower
    _msgspec = None

from .ascend_values import (  # noqa: F401 - shared with ascend_db; ascend.X names kept
    US_PER_MS, MIB_TO_MB, KIB_TO_MB, OUTPUT_DIR, PROF_DIR, _INFO, _MAX_DEPTH, NO_STEP_ID, STEP_TIME_COLUMNS, STEP_TIME_ORDER, TRANSPORTS, P2P_PREFIXES, double_hash, group_kind, MISSING_CELLS, MAX_GBPS, MAX_COUNT, MAX_ID, KINDS, _NUMBER, refused, json_float, json_time_ns, _absent, check_numbers, check_times, _text, op_type as _op_type,
    op_class, comm_streams, upper_texts, _COMPUTE_CORES, _COMM_CORES, _SYNC_PREFIXES, _COPY_PREFIXES)


# --------------------------------------------------------------------------- files


def _read_json(path: Path, exact: bool = False):
    """A JSON file (:func:`~reportgen.readers._files.loads`); ``exact``: float literals come back as their text
    (times parsed with timebase.to_ns)."""
    return _files.loads(_read_text(path), path, exact)


def _expect_dict(value, path: Path, where: str, rejects: Rejects) -> dict | None:
    """``value`` if it is a JSON object, else None with the entry refused (``where`` names it)."""
    if isinstance(value, dict):
        return value
    rejects.add(path, where, "an entry", f"is {_json_type(value)}, not an object", "entry skipped", unit="entry")
    return None


def _json_type(value) -> str:
    return {dict: "an object", list: "a list", str: "text", bool: "true/false", type(None): "null"}.get(
        type(value), "a number")


#: :meth:`Csv._read_plain` reads this many bytes at a time (then up to the last line end in them); a block's cells are
#: Python strings while it is split (~17 times its size at most), so blocks are small: 256 KiB read a 1.4 MB file in
#: 14 ms, 4 MiB blocks in 21 ms
PLAIN_BLOCK = 256 << 10


class Csv:
    """A CSV read strictly and in one pass: the header and the used columns of the rows that have as many fields
    as the header, each with its line number.

    Refused at once (a :class:`Rejects` entry naming the line): a row with another field count (a truncated or
    merged line), a row with a cell longer than the csv module's field limit (128 KiB), and the last row of a
    file that does not end in a newline when its last cell is a used column (the file was cut: the cell may be a
    prefix of its value, ``388.0`` cut to ``38``). Cells are then checked column by column (:meth:`num`,
    :meth:`ns`): a refused cell drops its row (:meth:`keep`). Unusable files raise :class:`InputError`: not
    UTF-8 (binary, UTF-16), NUL bytes, no header, a used column twice in the header.
    """

    def __init__(self, path: Path, rejects: Rejects, want=None, max_rows: int | None = None):
        self.path, self.rejects = Path(path), rejects
        try:
            with open_input(self.path, "rb") as fh:
                head = fh.read(4096)
                fh.seek(0, os.SEEK_END)
                if fh.tell():
                    fh.seek(-1, os.SEEK_END)
                ends_nl = fh.read(1) in (b"\n", b"\r")
        except OSError as exc:
            raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
        if not head.strip():
            raise InputError(path, "empty file")
        if head.startswith((b"\xff\xfe", b"\xfe\xff")) or b"\x00" in head:
            raise InputError(path, "not UTF-8 text (binary, UTF-16 or corrupted file?)")
        self.header: list[str] = []
        self.cols: dict[str, list[str]] = {}
        self.lines: list[int] = []
        self._at = 0  # the last line read
        try:
            if max_rows is None and self._read_plain(want, ends_nl):
                self.bad = np.zeros(len(self.lines), dtype=bool)
                return
            with open_input(self.path, "r", encoding="utf-8-sig", newline="") as fh:
                self._read(csv.reader(fh), want, max_rows, ends_nl)
        except UnicodeDecodeError:
            raise InputError(path, f"not UTF-8 text after line {self._at} (binary or corrupted file?)") from None
        except OSError as exc:
            raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
        self.bad = np.zeros(len(self.lines), dtype=bool)

    def _read_plain(self, want, ends_nl: bool) -> bool:
        """The whole file read as :meth:`_read` reads it, without a Python step per row, when it is plain: UTF-8 with
        the header on its first line, every line ``\\n``-terminated (the last one may not be) with the header's
        field count, no quote, carriage return or NUL, no blank line, no line longer than the csv module's field
        limit, no row that repeats the header. Then csv.reader's row is ``line.split(",")`` and nothing is refused
        but a cut last cell, as :meth:`_read` refuses it. False (nothing kept) for any other file: :meth:`_read`
        reads it, rejects and their line numbers as always (a file found not plain in a late block is read twice).
        Read in blocks of whole lines (:data:`PLAIN_BLOCK`): a big file is never held whole, only the used cells, as
        :meth:`_read` holds them, and one block's cells while it is split."""
        limit = csv.field_size_limit()
        cols: list[list[str]] | None = None
        header_line = ""
        rows = 0
        with open_input(self.path, "rb") as fh:
            rest = b""
            first = True
            while True:
                chunk = fh.read(PLAIN_BLOCK)
                if chunk:  # the whole lines read so far; the rest waits for its line end
                    block = rest + chunk
                    cut = block.rfind(b"\n") + 1
                    if cut == 0:
                        if len(block) > limit:
                            return False
                        rest = block
                        continue
                    block, rest = block[:cut], block[cut:]
                elif rest:  # the last line, without a line end
                    block, rest = rest, b""
                else:
                    break
                if b'"' in block or b"\r" in block or b"\x00" in block:
                    return False
                try:
                    text = block.decode("utf-8-sig" if first else "utf-8")
                except UnicodeDecodeError:
                    return False
                lines = text.split("\n")
                if lines[-1] == "":
                    lines.pop()  # (the block ends a line)
                if not lines or max(map(len, lines)) > limit:
                    return False
                if first:
                    first = False
                    header_line = lines[0]
                    header = [c.strip() for c in header_line.split(",")]
                    n = len(header)
                    used = [i for i, c in enumerate(header) if want is None or c in want]
                    names = [header[i] for i in used]
                    if n < 2 or not header_line.strip() or len(set(names)) < len(names):
                        return False  # one column (a blank line is a row of it), an empty header, a used column twice
                    cols = [[] for _ in used]
                    lines = lines[1:]
                    if not lines:
                        continue
                if header_line in lines or set(map(str.count, lines, repeat(","))) != {n - 1}:
                    return False
                cells = ",".join(lines).split(",")
                for col, i in zip(cols, used):
                    col.extend(cells[i::n])
                rows += len(lines)
        if cols is None:
            return False  # empty: _read says so
        self.header = header
        self._at = rows + 1
        self.lines = list(range(2, rows + 2))
        if not ends_nl and rows and (n - 1) in used:  # the file was cut inside its last row's last cell, or after it
            self.lines.pop()
            for col in cols:
                col.pop()
            self._cut_last_row(rows + 1)
        self.cols = dict(zip(names, cols))
        return True

    def _cut_last_row(self, line: int) -> None:
        """Both reads' rule for a file that does not end in a newline when its last column is used: its last row (on
        ``line``, already dropped by the caller) may hold a prefix of its value (``388.0`` cut to ``38``)."""
        self.rejects.add(self.path, line, f"column '{self.header[-1]}'",
                         "may be cut: the last line does not end in a newline (file truncated?)")

    def _read(self, reader, want, max_rows, ends_nl) -> None:
        try:
            for row in reader:
                self._at = reader.line_num
                if row:
                    break
            else:
                raise InputError(self.path, "empty file")
        except csv.Error as exc:  # a header cell over the field limit (or a NUL, with Python 3.10's csv)
            raise InputError(self.path, f"line {self._at + 1}: the header row cannot be read ({exc})") from None
        raw_header, first = row, row[0]
        header = [c.strip() for c in row]
        used = [i for i, c in enumerate(header) if want is None or c in want]
        names = [header[i] for i in used]
        twice = sorted({c for c in names if names.count(c) > 1})
        if twice:
            raise InputError(self.path, f"column {twice[0]!r} appears twice in the header")
        self.header = header
        pick = itemgetter(*used) if used else (lambda r: ())
        kept: list[tuple] = []  # the used cells of each kept row
        lines = self.lines
        n = len(header)
        short = None  # (line, reason) of a row refused for its field count, reported once it is known if it is last
        last_kept = False
        start = self._at + 1
        while max_rows is None or len(lines) < max_rows:
            try:
                row = next(reader)
            except StopIteration:
                break
            except csv.Error:  # a cell over the field limit (the rest of its line is dropped)
                self.rejects.add(self.path, start, "a cell", f"longer than {csv.field_size_limit()} characters")
                start = self._at = reader.line_num + 1
                last_kept = False
                continue
            line, start = start, reader.line_num + 1
            self._at = start - 1
            if not row:
                continue
            if short:
                self.rejects.add(self.path, short[0], "the row", short[1])
                short = None
            last_kept = False
            if len(row) != n:
                short = (line, f"has {len(row)} fields, the header {n}")
            elif row[0] == first and row == raw_header:
                self.rejects.add(self.path, line, "the row", "repeats the header (files concatenated?)")
            else:
                last_kept = True
                lines.append(line)
                kept.append(pick(row))
        else:  # max_rows reached (no break): the rows read are complete lines
            ends_nl = True
        if short:
            cut = "" if ends_nl else "; the file ends inside it without a newline (truncated?)"
            self.rejects.add(self.path, short[0], "the row", short[1] + cut)
        elif not ends_nl and last_kept and (n - 1) in used:
            # the file was cut inside its last row's last cell, or right after it: the value may be a prefix
            lines.pop()
            kept.pop()
            self._cut_last_row(reader.line_num)
        if len(used) == 1:
            kept = [(c,) for c in kept]  # itemgetter of one index gives the cell, not a tuple
        columns = list(zip(*kept)) if kept else [() for _ in used]
        self.cols = {name: list(col) for name, col in zip(names, columns)}

    def __len__(self) -> int:
        return len(self.lines)

    def has(self, name: str) -> bool:
        return name in self.cols

    def require(self, *names: str, what: str) -> None:
        missing = [c for c in names if c not in self.cols]
        if missing:
            raise InputError(self.path, f"not {what}: missing column(s) {', '.join(missing)}")

    def text(self, name: str, default: str = "") -> list[str]:
        """An untrusted text column, each cell capped (:func:`reportgen.limits.cap_text`)."""
        if name not in self.cols:
            return [default] * len(self)
        col = self.cols[name]
        if not col or max(map(len, col)) <= MAX_NAME_CHARS:
            return col
        return [c if len(c) <= MAX_NAME_CHARS else cap_text(c) for c in col]

    def _refuse(self, name: str, idx, why) -> None:
        for i in idx:
            self.bad[i] = True
            self.rejects.add(self.path, self.lines[i], f"column '{name}'", why(i))

    def num(self, name: str, kind: str, required: bool = False) -> np.ndarray:
        """A numeric column (:func:`check_numbers`); a refused cell drops its row and is counted."""
        if name not in self.cols:
            return np.full(len(self), np.nan)
        v, bad, why = check_numbers(pd.Series(self.cols[name], dtype=object), kind, required)
        self._refuse(name, np.flatnonzero(bad), why)
        return v

    def ns(self, name: str, required: bool = False) -> pd.Series:
        """An absolute time column in µs (:func:`check_times`); a refused cell drops its row and is counted."""
        if name not in self.cols:
            return pd.Series(pd.NA, index=range(len(self)), dtype="Int64")
        out, bad, why = check_times(pd.Series(self.cols[name], dtype=object), required=required)
        self._refuse(name, np.flatnonzero(bad), why)
        return out

    def keep(self, df: pd.DataFrame) -> pd.DataFrame:
        """``df`` (one row per CSV row) without the rows a refused cell dropped."""
        return df[~self.bad].reset_index(drop=True) if self.bad.any() else df


def _csv(path: Path, want: set) -> tuple[Csv, Rejects]:
    """The columns ``want`` of a CSV (the ones the parser reads: a cut in any other column does not matter)."""
    rejects = Rejects()
    return Csv(path, rejects, want), rejects


def _done(df: pd.DataFrame, table: Csv, rejects: Rejects, problems: list) -> pd.DataFrame:
    """The parsed rows without the refused ones; the refusals become data problems."""
    out = table.keep(df)
    if not len(table) and not len(rejects):
        problems.append((str(table.path), "no data rows (only the header)"))
    rejects.flush(lambda p, t: problems.append((p, t)))
    return out


# --------------------------------------------------------------------------- text parsers


def parse_step_trace_time(path: Path, rank: int, problems: list) -> pd.DataFrame:
    """``step_trace_time.csv``: one row per step (µs) -> step_time rows (ms).

    Optional ``Device_id`` and ``Preparing`` columns; ``Step`` may be empty (no schedule): step
    :data:`NO_STEP_ID` here, made the whole-trace step 0 by :func:`whole_trace_steps` once every rank is read.
    ``step_ms`` = Computing + Communication(Not Overlapped) + Free, the device end-to-end time
    (identity verified on the fixtures: equals Stage + Bubble to < 1 µs). Every cell is checked (:class:`Csv`):
    the three of step_ms are required; only the exclude-receive column may be negative (MindSpore writes
    CommNotOverlapped - Bubble unclipped); a step longer than a day is refused.
    """
    t, rejects = _csv(path, {"Step", "Step Id", *STEP_TIME_COLUMNS})
    t.require("Computing", "Communication(Not Overlapped)", "Free", what="a step_trace_time.csv")
    step_col = "Step" if t.has("Step") else "Step Id" if t.has("Step Id") else None
    steps = t.num(step_col, "id") if step_col else np.full(len(t), np.nan)
    raw_steps = t.cols.get(step_col, [""] * len(t))
    no_id = np.isnan(steps) & np.array([c.strip() in MISSING_CELLS for c in raw_steps], dtype=bool)
    if (no_id & ~t.bad).any():
        problems.append((str(path), "rows without a step number (no profiler schedule) are counted as step 0"))
    out = pd.DataFrame({"rank": np.full(len(t), rank, dtype=np.int64),
                        "step": np.where(no_id, NO_STEP_ID, np.nan_to_num(steps, nan=NO_STEP_ID)).astype(np.int64)})
    required = ("Computing", "Communication(Not Overlapped)", "Free")
    for src, dst in STEP_TIME_COLUMNS.items():
        signed = src == "Communication(Not Overlapped and Exclude Receive)"
        out[dst] = t.num(src, "us±" if signed else "us", required=src in required)
    out["step_ms"] = out["computing_ms"] + out["comm_not_overlapped_ms"] + out["free_ms"]
    long = np.flatnonzero((out["step_ms"] > MAX_DURATION_MS).to_numpy())
    t._refuse("Computing + Communication(Not Overlapped) + Free", long, lambda i: "over one day")
    return _done(out[STEP_TIME_ORDER], t, rejects, problems)




def _step_entries(doc, path: Path, rejects: Rejects):
    """(step, kind, key, value) of the three outer levels of communication(_matrix).json:
    ``{"step<N>": {"collective"|"p2p": {"<op>@<hash>": value}}}``; entries of another shape are refused."""
    if not isinstance(doc, dict):
        raise InputError(path, f"expected a JSON object keyed by step, found {_json_type(doc)}")
    for step_key, kinds in doc.items():
        m = re.fullmatch(r"step(\d*)", str(step_key))
        step = (as_int(m.group(1)) if m.group(1) else 0) if m else None
        if step is None or step > MAX_ID:
            rejects.add(path, _text(step_key, 40), "the key", f"is not step<N> (N in 0..{MAX_ID})",
                        "entry skipped", unit="entry")
            continue
        kinds = _expect_dict(kinds, path, step_key, rejects)
        for kind, entries in (kinds or {}).items():
            entries = _expect_dict(entries, path, f"{step_key}/{_text(kind, 40)}", rejects)
            for key, value in (entries or {}).items():
                yield step, _text(kind, 40), _text(key), value


#: communication.json "Communication Time Info" field -> (comm_ops column, kind); the elapse time is required
_TIME_FIELDS = {"Elapse Time(ms)": ("elapse_ms", "ms"), "Transit Time(ms)": ("transit_ms", "ms"),
                "Wait Time(ms)": ("wait_ms", "ms"), "Synchronization Time(ms)": ("sync_ms", "ms"),
                "Idle Time(ms)": ("idle_ms", "ms")}
#: "Communication Bandwidth Info" / matrix link field -> (column, kind)
_BW_FIELDS = {"Transit Size(MB)": ("size_mb", "mb"), "Transit Time(ms)": ("time_ms", "ms"),
              "Bandwidth(GB/s)": ("bandwidth_gbps", "gbps"), "Large Packet Ratio": ("large_packet_ratio", "ratio")}


def _json_fields(obj: dict, fields: dict, path: Path, where: str, rejects: Rejects,
                 required: tuple = ()) -> dict | None:
    """The numeric fields of one JSON entry checked (:data:`KINDS`): {column: float (NaN when absent)}, or None
    when a value is refused (the entry is skipped and counted)."""
    out = {}
    for name, (column, kind) in fields.items():
        v = json_float(obj.get(name))
        if v is None:
            if name in required:
                rejects.add(path, where, f"'{name}'", "missing", "entry skipped", unit="entry")
                return None
            out[column] = math.nan
            continue
        why = refused(v, kind)
        if why is not None:
            rejects.add(path, where, f"'{name}'", why, "entry skipped", unit="entry")
            return None
        out[column] = v
    return out


if _msgspec is not None:
    def _fields(name: str, fields: dict, extra=()):
        """A msgspec Struct of optional float fields named as in the file (any other shape: the checked path)."""
        return _msgspec.defstruct(name, [*extra, *((col, float | None, _msgspec.field(default=None, name=key))
                                                   for key, (col, _k) in fields.items())], gc=False,
                                  forbid_unknown_fields=True)

    # every key the profiler writes is a field (a key the fast path does not know sends the file to the checked
    # path), so each one is counted against the text (_keys_once); the ratios and the size distribution are
    # not read
    _TimeInfo = _fields("_TimeInfo", _TIME_FIELDS, [
        ("start", object, _msgspec.field(default=None, name="Start Timestamp(us)")),
        ("wait_ratio", object, _msgspec.field(default=None, name="Wait Time Ratio")),
        ("sync_ratio", object, _msgspec.field(default=None, name="Synchronization Time Ratio"))])
    _BwInfo = _fields("_BwInfo", _BW_FIELDS, [("size_dist", object, _msgspec.field(default=None,
                                                                                   name="Size Distribution"))])

    class _CommOp(_msgspec.Struct, gc=False, forbid_unknown_fields=True):
        time: _TimeInfo | None = _msgspec.field(default=None, name="Communication Time Info")
        bw: dict[str, _BwInfo] | None = _msgspec.field(default=None, name="Communication Bandwidth Info")

    # float literals of untyped fields (the start time) arrive as their text: exact ns (timebase.to_ns)
    _COMM_DEC = _msgspec.json.Decoder(dict[str, dict[str, dict[str, _CommOp]]], float_hook=str)


def _numbers_fine(values: list, kind: str) -> bool:
    """Whether every value (None = absent) passes :func:`refused` for ``kind`` (non-negative kinds only)."""
    v = np.array(values, dtype=float)
    with np.errstate(invalid="ignore"):
        return bool((np.isnan(v) | ((v >= 0) & (v <= KINDS[kind][2]))).all())


def _keys_once(text: str, decoded: dict[str, int], steps: int, kinds: dict[str, int]) -> bool:
    """Whether each key name occurs in ``text`` exactly as often as a fast path decoded a value under it
    (``decoded``: field key -> count; ``steps``: step keys; ``kinds``: kind key -> steps holding it). msgspec keeps
    the last value of a key given twice in one object, silently; such a file shows one occurrence more and goes to
    the checked path, which refuses it (:func:`~reportgen.readers._files.loads`). A key name inside a string also
    sends the file there, where it reads the same; so does any ``\\u`` escape (a key may be spelled with one).
    Op names are not counted one by one: an op given twice loses its fields, which are. Not seen: a key twice
    inside the size distribution (read by neither path), or an op given twice whose dropped value is ``{}``."""
    if "\\u" in text or len(_STEP_KEY_TEXT.findall(text)) != steps:
        return False
    return all(text.count(f'"{k}"') == n for k, n in (*decoded.items(), *kinds.items()))


_STEP_KEY_TEXT = re.compile(r'"step\d*"\s*:')
_TIME_ATTRS = [("Start Timestamp(us)", "start"), ("Wait Time Ratio", "wait_ratio"),
               ("Synchronization Time Ratio", "sync_ratio"), *((k, c) for k, (c, _) in _TIME_FIELDS.items())]
_BW_ATTRS = [("Size Distribution", "size_dist"), *((k, c) for k, (c, _) in _BW_FIELDS.items())]


def _communication_fast(text: str, rank: int):
    """(ops rows, bandwidth rows) of a clean ``communication.json`` (msgspec, typed), or None when the file needs
    the checked path: same rows, order and values as :func:`_communication_checked` for the files it accepts."""
    if _msgspec is None:
        return None
    try:
        doc = _COMM_DEC.decode(text)
    except _msgspec.DecodeError:  # ValidationError included
        return None
    ops, bws, times, sizes = [], [], [], {}
    seen = dict.fromkeys(["Communication Time Info", "Communication Bandwidth Info", *(k for k, _ in _TIME_ATTRS),
                          *(k for k, _ in _BW_ATTRS)], 0)
    kind_keys: dict[str, int] = {}
    for step_key, kinds in doc.items():
        m = _STEP_KEY.fullmatch(step_key)
        step = (as_int(m.group(1)) if m.group(1) else 0) if m else None
        if step is None or step > MAX_ID:
            return None
        for kind, entries in kinds.items():
            if len(kind) > 40:
                return None
            kind_keys[kind] = kind_keys.get(kind, 0) + 1
            for key, info in entries.items():
                if len(key) > MAX_NAME_CHARS:
                    return None
                t = info.time
                if t is not None:
                    seen["Communication Time Info"] += 1
                    for name, attr in _TIME_ATTRS:
                        seen[name] += getattr(t, attr) is not None
                if info.bw is None:
                    info.bw = {}
                else:
                    seen["Communication Bandwidth Info"] += 1
                for b in info.bw.values():
                    for name, attr in _BW_ATTRS:
                        seen[name] += getattr(b, attr) is not None
                if key.startswith("Total Op Info"):
                    continue
                if t is None or t.elapse_ms is None:
                    return None
                start, why = json_time_ns(t.start)
                if why is not None:
                    return None
                op, _, ghash = key.partition("@")
                vals = (t.elapse_ms, t.transit_ms, t.wait_ms, t.sync_ms, t.idle_ms)
                times.append(vals)
                ops.append((rank, step, kind, op, _op_type(op), ghash, start,
                            *(math.nan if x is None else x for x in vals)))
                for transport, b in info.bw.items():
                    if len(transport) > 40:
                        return None
                    got = [b.size_mb, b.time_ms, b.bandwidth_gbps, b.large_packet_ratio]
                    for col, x in zip(("size_mb", "time_ms", "bandwidth_gbps", "large_packet_ratio"), got):
                        sizes.setdefault(col, []).append(x)
                    got = [math.nan if x is None else x for x in got]
                    if not (got[0] or got[1]):
                        continue
                    bws.append((rank, step, kind, op, ghash, transport, *got))
    if not _keys_once(text, seen, len(doc), kind_keys) or (times and not _numbers_fine(times, "ms")):
        return None
    for col, (_name, kind) in zip(("size_mb", "time_ms", "bandwidth_gbps", "large_packet_ratio"), _BW_FIELDS.values()):
        if sizes.get(col) and not _numbers_fine(sizes[col], kind):
            return None
    return ops, bws


def parse_communication(path: Path, rank: int, problems: list) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``communication.json`` -> (comm_ops_raw, comm_bandwidth_raw) with ``group_hash`` columns.

    Times are in ms already; sizes in MB (10^6 B); ``Total Op Info`` entries are skipped (they are
    sums we recompute). SDMA is HCCS+PCIE+SIO aggregated: kept as its own transport row. Every level must be
    an object and every number a finite, non-negative value within :data:`KINDS`; an entry that is not is
    skipped and counted (data problem naming the step and op). A clean file is decoded by msgspec into typed
    entries (start times as text, exact); any doubt sends the whole file through the checked stdlib path.
    """
    text = _read_text(path)
    got = _communication_fast(text, rank) if text.strip() else None
    ops, bws = got if got is not None else _communication_checked(path, rank, problems)
    ops_df = pd.DataFrame(ops, columns=["rank", "step", "kind", "op", "op_type", "group_hash", "start_ns",
                                        *(c for c, _k in _TIME_FIELDS.values())])
    ops_df["start_ns"] = ops_df["start_ns"].astype("Int64")
    bw_df = pd.DataFrame(bws, columns=["rank", "step", "kind", "op", "group_hash", "transport",
                                       *(c for c, _k in _BW_FIELDS.values())])
    return ops_df, bw_df


def _communication_checked(path: Path, rank: int, problems: list) -> tuple[list, list]:
    """The stdlib path of :func:`parse_communication`: every level, key and value checked, refusals named."""
    doc = _read_json(path, exact=True)
    rejects = Rejects()
    ops, bws = [], []
    for step, kind, key, info in _step_entries(doc, path, rejects):
        if key.startswith("Total Op Info"):
            continue
        where = f"step{step}/{kind}/{key}"
        info = _expect_dict(info, path, where, rejects)
        t = _expect_dict(info.get("Communication Time Info", {}), path, f"{where}/Communication Time Info",
                         rejects) if info is not None else None
        if t is None:
            continue
        times = _json_fields(t, _TIME_FIELDS, path, where, rejects, required=("Elapse Time(ms)",))
        start, why = json_time_ns(t.get("Start Timestamp(us)"))
        if why is not None:
            rejects.add(path, where, "'Start Timestamp(us)'", why, "entry skipped", unit="entry")
            continue
        if times is None:
            continue
        op, _, ghash = key.partition("@")
        ops.append((rank, step, kind, op, _op_type(op), ghash, start, *times.values()))
        bw_info = _expect_dict(info.get("Communication Bandwidth Info", {}), path,
                               f"{where}/Communication Bandwidth Info", rejects) or {}
        for transport, b in bw_info.items():
            at = f"{where}/{_text(transport, 40)}"
            b = _expect_dict(b, path, at, rejects)
            vals = _json_fields(b, _BW_FIELDS, path, at, rejects) if b is not None else None
            if vals is None or not (vals["size_mb"] or vals["time_ms"]):
                continue
            bws.append((rank, step, kind, op, ghash, _text(transport, 40), *vals.values()))
    rejects.flush(lambda p, t: problems.append((p, t)))
    return ops, bws


#: matrix link field -> (column, kind)
_LINK_FIELDS = {k: _BW_FIELDS[k] for k in ("Transit Size(MB)", "Transit Time(ms)", "Bandwidth(GB/s)")}


MATRIX_COLUMNS = ["rank", "step", "kind", "op_type", "stat", "group_hash", "src_local", "dst_local", "transport",
                  "size_mb", "time_ms", "bandwidth_gbps", "op_name"]
_STEP_KEY = re.compile(r"step(\d*)")

if _msgspec is not None:
    class _Link(_msgspec.Struct, gc=False, forbid_unknown_fields=True):
        """One matrix link as the fast path decodes it (any other shape: the checked stdlib path)."""
        transport: str = _msgspec.field(default="", name="Transport Type")
        size: float | None = _msgspec.field(default=None, name="Transit Size(MB)")
        time: float | None = _msgspec.field(default=None, name="Transit Time(ms)")
        bw: float | None = _msgspec.field(default=None, name="Bandwidth(GB/s)")
        op: str = _msgspec.field(default="", name="Op Name")

    _MATRIX_DEC = _msgspec.json.Decoder(dict[str, dict[str, dict[str, dict[str, _Link]]]])


class _LinkEnds(dict):
    """``"<src>-<dst>"`` -> (src, dst) group-local indices (``4294967295`` = the local end), None when refused;
    each distinct key parsed once (they repeat over steps and stats)."""

    def __missing__(self, link):
        src, _, dst = link.partition("-")
        src_i, dst_i = as_int(src), as_int(dst)
        if dst_i == 4294967295:  # "local": the other end is the source
            dst_i = src_i
        ok = src_i is not None and dst_i is not None and 0 <= src_i < MAX_RANKS and 0 <= dst_i < MAX_RANKS
        self[link] = out = (src_i, dst_i) if ok else None
        return out


def _matrix_fast(text: str, rank: int) -> dict | None:
    """The columns of a clean ``communication_matrix.json`` (msgspec, typed), or None when the file needs the
    checked path (:func:`_matrix_checked`): another shape, a refused key or value, text where a number belongs, a
    name over its cap. Same rows, same order and same values as the checked path for the files it accepts."""
    if _msgspec is None:
        return None
    try:
        doc = _MATRIX_DEC.decode(text)
    except _msgspec.DecodeError:  # ValidationError included
        return None
    entry: list[tuple] = []
    counts: list[int] = []
    keys: list[str] = []
    vals: list = []
    kind_keys: dict[str, int] = {}
    for step_key, kinds in doc.items():
        m = _STEP_KEY.fullmatch(step_key)
        step = (as_int(m.group(1)) if m.group(1) else 0) if m else None
        if step is None or step > MAX_ID:
            return None
        for kind, entries in kinds.items():
            if len(kind) > 40:
                return None
            kind_keys[kind] = kind_keys.get(kind, 0) + 1
            for key, links in entries.items():
                if len(key) > MAX_NAME_CHARS:
                    return None
                name, _, ghash = key.partition("@")
                op_type, _, stat = name.rpartition("-")
                entry.append((step, kind, op_type.lower(), stat, ghash))
                counts.append(len(links))
                keys.extend(links)
                vals.extend(links.values())
    ends = list(map(_LinkEnds().__getitem__, keys))
    if None in ends:
        return None
    seen = {"Transport Type": sum(x.transport != "" for x in vals), "Op Name": sum(x.op != "" for x in vals),
            **{k: sum(getattr(x, a) is not None for x in vals) for k, a in
               (("Transit Size(MB)", "size"), ("Transit Time(ms)", "time"), ("Bandwidth(GB/s)", "bw"))}}
    if not _keys_once(text, seen, len(doc), kind_keys):
        return None
    cols = {}
    for name, kind, attr in (("size_mb", "mb", "size"), ("time_ms", "ms", "time"), ("bandwidth_gbps", "gbps", "bw")):
        v = np.array([getattr(x, attr) for x in vals], dtype=float)  # None (absent) -> NaN, as the checked path
        limit = KINDS[kind][2]
        with np.errstate(invalid="ignore"):
            if not (np.isnan(v) | ((v >= 0) & (v <= limit))).all():
                return None
        cols[name] = v
    transport = [x.transport for x in vals]
    op_name = [x.op for x in vals]
    if any(len(t) > 40 for t in set(transport)) or (op_name and max(map(len, op_name)) > MAX_NAME_CHARS):
        return None
    n = len(vals)
    counts_a = np.array(counts, dtype=np.int64)
    e = list(zip(*entry)) if entry else [()] * 5
    ends_a = np.array(ends, dtype=np.int64).reshape(n, 2)
    out = {"rank": np.full(n, rank, dtype=np.int64), "step": np.repeat(np.array(e[0], dtype=np.int64), counts_a)}
    for i, c in enumerate(("kind", "op_type", "stat", "group_hash"), start=1):
        out[c] = np.repeat(np.array(e[i], dtype=object), counts_a)
    out.update(src_local=ends_a[:, 0], dst_local=ends_a[:, 1], transport=np.array(transport, dtype=object), **cols,
               op_name=np.array(op_name, dtype=object))
    return out


def _matrix_checked(path: Path, rank: int, problems: list) -> pd.DataFrame:
    """The stdlib path of :func:`parse_matrix`: every level, key and value checked, refusals named."""
    doc = _read_json(path)
    rejects = Rejects()
    rows = []
    ends = _LinkEnds()
    for step, kind, key, links in _step_entries(doc, path, rejects):
        where = f"step{step}/{kind}/{key}"
        links = _expect_dict(links, path, where, rejects)
        name, _, ghash = key.partition("@")
        op_type, _, stat = name.rpartition("-")
        for link, v in (links or {}).items():
            at = f"{where}/{_text(link, 40)}"
            got = ends[str(link)]
            if got is None:
                rejects.add(path, at, "the link key", f"is not <src>-<dst> of ranks in 0..{MAX_RANKS - 1}",
                            "entry skipped", unit="entry")
                continue
            v = _expect_dict(v, path, at, rejects)
            vals = _json_fields(v, _LINK_FIELDS, path, at, rejects) if v is not None else None
            if vals is None:
                continue
            rows.append((rank, step, kind, op_type.lower(), stat, ghash, *got,
                         _text(v.get("Transport Type", ""), 40), *vals.values(), _text(v.get("Op Name", ""))))
    rejects.flush(lambda p, t: problems.append((p, t)))
    return pd.DataFrame(rows, columns=MATRIX_COLUMNS)


def parse_matrix(path: Path, rank: int, problems: list) -> pd.DataFrame:
    """``communication_matrix.json`` -> comm_matrix_raw rows with GROUP-LOCAL ``src_local``/``dst_local``.

    A link key is ``<src>-<dst>`` of group-local indices below :data:`reportgen.limits.MAX_RANKS` (``4294967295``
    = the local end); other keys, other shapes and refused numbers skip the link and are counted. A clean file is
    decoded by msgspec into typed links (:func:`_matrix_fast`, ~10x faster); any doubt sends the whole file through
    the checked stdlib path, which names every refusal."""
    text = _read_text(path)
    cols = _matrix_fast(text, rank) if text.strip() else None
    if cols is None:
        return _matrix_checked(path, rank, problems)
    return pd.DataFrame(cols, columns=MATRIX_COLUMNS)


#: per-op matrix rows (top1 / middle / bottom*) are kept for this many links of each rank (the busiest by the
#: summed per-op time) and, once every rank is read, for the run's this-many busiest links: the communication
#: section draws the BOX_LINKS (30) busiest (tests/test_ascend_scale.py checks that this is no fewer)
MATRIX_OP_LINKS = 64
_LINK_KEY = ["group_hash", "src_local", "dst_local", "transport"]


def reduce_matrix(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One rank's comm_matrix rows -> (the rows kept, per-link sums of what was left out).

    A per-pair matrix holds one link per group member, per step, per stat: at 1024 ranks a run holds ~30M such
    rows, of which the report uses the ``total`` rows (links) and the per-op rows of the busiest links (the
    communication section's per-link box plots). Kept: every ``total`` row, every self link (they map group-local
    indices to ranks), the per-op rows of this rank's :data:`MATRIX_OP_LINKS` busiest links (by the summed
    ``time_ms`` > 0 of their per-op rows, ties kept) and of steps that have no ``total`` row. The sums table gives
    every other link's summed per-op time, its row count and whether its rows were kept, so that the run-wide
    choice (:func:`_busiest_links`) is exact: the sums table holds the links whose per-op rows were left out
    (``op_time_ms``, ``rows`` left out)."""
    nt = (df["stat"] != "total").to_numpy()
    self_link = (df["src_local"] == df["dst_local"]).to_numpy()
    cand = nt & ~self_link
    if not cand.any():
        return df, pd.DataFrame()
    c = df[cand]
    timed = c["time_ms"].where(c["time_ms"] > 0)
    sums = c.assign(time_ms=timed).groupby(_LINK_KEY, sort=False, dropna=False).agg(
        op_time_ms=("time_ms", "sum"), rows=("time_ms", "size")).reset_index()
    if len(sums) > MATRIX_OP_LINKS:
        cut = sums["op_time_ms"].nlargest(MATRIX_OP_LINKS).iloc[-1]
        sums["kept"] = sums["op_time_ms"] >= cut
    else:
        sums["kept"] = True
    if sums["kept"].all():
        return df, pd.DataFrame()
    chosen = sums.loc[sums["kept"], _LINK_KEY]
    keep = ~cand | pd.MultiIndex.from_frame(df[_LINK_KEY]).isin(pd.MultiIndex.from_frame(chosen))
    keep |= ~df["step"].isin(set(df.loc[~nt, "step"])).to_numpy()
    left = df.loc[~keep, _LINK_KEY].groupby(_LINK_KEY, sort=False).size().rename("left")
    sums = sums.drop(columns="rows").join(left, on=_LINK_KEY).rename(columns={"left": "rows"})
    sums["rows"] = sums["rows"].fillna(0).astype(np.int64)
    return df[keep].reset_index(drop=True), sums[~sums["kept"]].drop(columns="kept").reset_index(drop=True)


#: kernel_details.csv's AI Core PMU columns (written with aic_metrics=PipeUtilization) -> ``kernels`` ext column and
#: the divisor that makes it a ratio 0..1; a cell that is no number in 0..1 after it is NaN (never drops the kernel)
PMU_COLUMNS = {"aic_mac_ratio": ("aic_mac_ratio", 1.0), "aic_mte2_ratio": ("aic_mte2_ratio", 1.0),
               "aiv_vec_ratio": ("aiv_vec_ratio", 1.0), "aiv_mte2_ratio": ("aiv_mte2_ratio", 1.0),
               "cube_utilization(%)": ("cube_util_ratio", 100.0)}


def _pmu(t: "Csv") -> dict:
    """The PMU columns the file has (:data:`PMU_COLUMNS`), as ratios; out-of-range or non-numeric cells NaN."""
    out = {}
    for col, (name, div) in PMU_COLUMNS.items():
        if t.has(col):
            v = pd.to_numeric(pd.Series(t.cols[col], dtype=object), errors="coerce").to_numpy(float) / div
            out[name] = np.where((v >= 0) & (v <= 1), v, np.nan)
    return out


def parse_kernel_details(path: Path, rank: int, problems: list) -> pd.DataFrame:
    wanted = {"Step Id", "Name", "Type", "Accelerator Core", "Stream ID", "Start Time(us)", "Duration(us)",
              "Input Shapes", "Output Shapes", "Input Formats", "Output Formats", *PMU_COLUMNS}
    t, rejects = _csv(path, wanted)
    t.require("Name", "Duration(us)", what="a kernel_details.csv")
    df = pd.DataFrame({
        "rank": np.full(len(t), rank, dtype=np.int64),
        "step": t.num("Step Id", "id"),
        "name": t.text("Name"),
        "type": t.text("Type"),
        "core": t.text("Accelerator Core"),
        "stream": t.num("Stream ID", "id"),
        "start_ns": t.ns("Start Time(us)"),
        "dur_ms": t.num("Duration(us)", "us", required=True),
        "input_shapes": [s.strip('"') for s in t.text("Input Shapes")],
        "output_shapes": [s.strip('"') for s in t.text("Output Shapes")],
        # the device formats of those shapes (NC1HWC0, FRACTAL_Z, FORMAT_ND, ...): FLOPs read the shapes through them
        "input_formats": t.text("Input Formats"),
        "output_formats": t.text("Output Formats"),
        **_pmu(t),
    })
    df = _done(df, t, rejects, problems)
    # one class per task, the rank's communication streams from this file (op_class); each text column coded once
    core, type_, name = (upper_texts(df[c]) for c in ("core", "type", "name"))
    df.insert(8, "op_class", op_class(core, type_, name, comm_streams(df["stream"], core, type_, name)))
    return df


def parse_op_statistic(path: Path, rank: int, problems: list) -> pd.DataFrame:
    t, rejects = _csv(path, {"OP Type", "Core Type", "Count", "Total Time(us)", "Avg Time(us)", "Min Time(us)",
                             "Max Time(us)"})
    t.require("OP Type", "Count", "Total Time(us)", what="an op_statistic.csv")
    df = pd.DataFrame({
        "rank": np.full(len(t), rank, dtype=np.int64),
        "op_type": t.text("OP Type"),
        "core": t.text("Core Type"),
        "count": t.num("Count", "count", required=True),
        "total_ms": t.num("Total Time(us)", "us", required=True),
        "avg_ms": t.num("Avg Time(us)", "us"),
        "min_ms": t.num("Min Time(us)", "us"),
        "max_ms": t.num("Max Time(us)", "us"),
    })
    df = _done(df, t, rejects, problems)
    df["op_class"] = op_class(df["core"], df["op_type"])
    return df


def parse_api_statistic(path: Path, rank: int, problems: list) -> pd.DataFrame:
    """api_statistic.csv: the host time of each CANN API (runtime / acl / node / model level), per rank."""
    t, rejects = _csv(path, {"Level", "API Name", "Time(us)", "Count", "Avg(us)", "Max(us)"})
    t.require("API Name", "Time(us)", "Count", what="an api_statistic.csv")
    df = pd.DataFrame({
        "rank": np.full(len(t), rank, dtype=np.int64), "level": t.text("Level"), "api": t.text("API Name"),
        "count": t.num("Count", "count", required=True), "total_ms": t.num("Time(us)", "us", required=True),
        "avg_ms": t.num("Avg(us)", "us"), "max_ms": t.num("Max(us)", "us"),
    })
    return _done(df, t, rejects, problems)


def parse_memory_record(path: Path, rank: int, problems: list) -> pd.DataFrame:
    t, rejects = _csv(path, {"Component", "Timestamp(us)", "Total Allocated(MB)", "Total Reserved(MB)",
                             "Total Active(MB)"})
    t.require("Component", "Timestamp(us)", "Total Reserved(MB)", what="a memory_record.csv")
    df = pd.DataFrame({
        "rank": np.full(len(t), rank, dtype=np.int64), "component": t.text("Component"),
        "ts_ns": t.ns("Timestamp(us)", required=True),
        "allocated_mb": t.num("Total Allocated(MB)", "mib"), "reserved_mb": t.num("Total Reserved(MB)", "mib"),
        "active_mb": t.num("Total Active(MB)", "mib"),
    })
    return _done(df, t, rejects, problems)


def parse_npu_module_mem(path: Path, rank: int, problems: list) -> pd.DataFrame:
    t, rejects = _csv(path, {"Component", "Timestamp(us)", "Total Reserved(MB)"})
    t.require("Component", "Timestamp(us)", "Total Reserved(MB)", what="an npu_module_mem.csv")
    df = pd.DataFrame({"rank": np.full(len(t), rank, dtype=np.int64), "component": t.text("Component"),
                       "ts_ns": t.ns("Timestamp(us)", required=True),
                       "reserved_mb": t.num("Total Reserved(MB)", "mib")})
    return _done(df, t, rejects, problems)


def parse_operator_memory(path: Path, rank: int, problems: list) -> pd.DataFrame:
    t, rejects = _csv(path, {"Name", "Size(KB)", "Allocation Time(us)", "Release Time(us)", "Duration(us)"})
    t.require("Name", "Size(KB)", what="an operator_memory.csv")
    df = pd.DataFrame({
        "rank": np.full(len(t), rank, dtype=np.int64), "name": t.text("Name"),
        "size_mb": t.num("Size(KB)", "kib", required=True),
        "alloc_ns": t.ns("Allocation Time(us)"),
        "release_ns": t.ns("Release Time(us)"),
        "duration_ms": t.num("Duration(us)", "us"),
    })
    return _done(df, t, rejects, problems)


def parse_l2_cache(path: Path, rank: int, problems: list) -> pd.DataFrame:
    """l2_cache.csv (l2_cache=True): per device task its L2 hit rate and victim rate (ratios 0..1; "N/A" where the
    profiler did not measure, NaN here). The op type comes from kernel_details.csv in the same folder, joined on
    (Stream ID, Task ID) (the first kernel of a pair; '' when the file or the pair is missing)."""
    t, rejects = _csv(path, {"Stream Id", "Task Id", "Hit Rate", "Victim Rate", "Op Name"})
    t.require("Op Name", "Victim Rate", what="an l2_cache.csv")
    df = pd.DataFrame({
        "rank": np.full(len(t), rank, dtype=np.int64), "stream": t.num("Stream Id", "id"),
        "task": t.num("Task Id", "id"), "name": t.text("Op Name"),
        "hit_ratio": t.num("Hit Rate", "ratio"), "victim_ratio": t.num("Victim Rate", "ratio"),
    })
    df = _done(df, t, rejects, problems)
    df["type"] = ""
    kd = path.with_name("kernel_details.csv")
    if kd.is_file() and len(df):
        try:  # the kernels' own problems are reported by their parser
            k, _ = _csv(kd, {"Stream ID", "Task ID", "Type"})
        except InputError:
            k = None
        if k is not None and k.has("Type") and k.has("Task ID") and k.has("Stream ID"):
            types = pd.DataFrame({"stream": k.num("Stream ID", "id"), "task": k.num("Task ID", "id"),
                                  "type": k.text("Type")}).dropna(subset=["stream", "task"])
            types = types.drop_duplicates(["stream", "task"]).set_index(["stream", "task"])["type"]
            df["type"] = types.reindex(pd.MultiIndex.from_frame(df[["stream", "task"]])).fillna("").to_numpy()
    return df


#: Tables parsed only when a section asks for them (large per-rank CSVs).
LAZY_TABLES = {"kernels", "op_stats", "memory_record", "module_mem", "operator_memory"}
#: Lazy tables that sections often never ask for (op_stats when kernel_details is there, module_mem when
#: memory_record is, operator_memory): their (small) files are checked when the run is read, so that their refused
#: values are data problems whatever the sections; they still stay out of the run origin and become tables lazily.
CHECKED_NOW = {"op_stats", "module_mem", "operator_memory"}
#: the absolute-time column of each lazily parsed file (its first rows fix the run origin when nothing else has one)
LAZY_TIME_COLUMNS = {"kernels": "Start Time(us)", "memory_record": "Timestamp(us)", "module_mem": "Timestamp(us)",
                     "operator_memory": "Allocation Time(us)"}


def _first_times_ns(path: Path, table: str, rows: int = 64) -> pd.Series | None:
    """Exact ns of the time column in the first rows of a lazily parsed CSV (None if it has none or is unreadable;
    refused cells are left out, the full parse reports them)."""
    col = LAZY_TIME_COLUMNS.get(table)
    if col is None:
        return None
    try:
        t = Csv(path, Rejects(), {col}, max_rows=rows)
    except InputError:
        return None
    return t.ns(col).dropna() if t.has(col) else None

#: ASCEND_PROFILER_OUTPUT file -> (table, parser). communication files are handled separately.
TEXT_FILES = {
    "step_trace_time.csv": ("step_time", parse_step_trace_time),
    "kernel_details.csv": ("kernels", parse_kernel_details),
    "op_statistic.csv": ("op_stats", parse_op_statistic),
    "memory_record.csv": ("memory_record", parse_memory_record),
    "npu_module_mem.csv": ("module_mem", parse_npu_module_mem),
    "operator_memory.csv": ("operator_memory", parse_operator_memory),
    "api_statistic.csv": ("host_api", parse_api_statistic),
    "l2_cache.csv": ("l2_cache", parse_l2_cache),
}


# --------------------------------------------------------------------------- discovery


@dataclass
class RankDir:
    path: Path
    rank: int | None
    rank_source: str
    framework: str  # torch_npu | mindspore
    stamp: str = ""
    info: dict = field(default_factory=dict)
    info_path: str = ""

    @property
    def output(self) -> Path:
        return self.path / OUTPUT_DIR


def walk_prof_dirs(root: Path) -> list[Path]:
    found = []
    root_depth = len(root.parts)
    for dirpath, dirnames, _files in os.walk(root):
        p = Path(dirpath)
        if len(p.parts) - root_depth > _MAX_DEPTH:
            dirnames[:] = []
            continue
        if PROF_DIR.search(p.name) or OUTPUT_DIR in dirnames:
            found.append(p)
            dirnames[:] = []  # a profiler dir does not nest another one
        else:
            dirnames.sort()
    return sorted(found)


def detect(root: Path) -> bool:
    return bool(walk_prof_dirs(root))


def _host_from_name(path: Path) -> str | None:
    """torch_npu / MindSpore name their directory ``{hostname}_{pid}_{timestamp}_ascend_{pt|ms}``."""
    parts = path.name.split("_")
    if len(parts) >= 5 and parts[-3].isdigit() and len(parts[-3]) >= 8 and parts[-4].isdigit():
        return cap_text("_".join(parts[:-4]), 256) or None
    return None


def _stamp(path: Path) -> str:
    """The directory's time: ``name:<digits>`` from its name (``..._{timestamp}_ascend_pt``), else
    ``mtime:<ns>``; zero-padded so that two stamps of one kind compare as strings."""
    parts = path.name.split("_")
    if len(parts) >= 3 and parts[-3].isdigit() and len(parts[-3]) >= 8:
        return f"name:{parts[-3]:0>24}"
    try:
        return f"mtime:{int(path.stat().st_mtime_ns):024d}"
    except OSError:
        return ""


def _newer(a: RankDir, b: RankDir) -> tuple[RankDir, RankDir, str]:
    """(winner, loser, why) of two directories for one rank: the newer by the time stamp in their names, else by
    modification time; the first in path order on a tie or when only one has a stamp in its name."""
    ka, _, va = a.stamp.partition(":")
    kb, _, vb = b.stamp.partition(":")
    how = "the time stamp in its name" if ka == "name" else "its modification time"
    if ka == kb and va != vb:
        return (a, b, f"newer by {how}") if va > vb else (b, a, f"newer by {how}")
    first, second = (a, b) if str(a.path) <= str(b.path) else (b, a)
    return first, second, "first in path order (the time stamps do not tell which is newer)"


def _rank_dir(path: Path, problems: list) -> RankDir:
    """A profiler directory and its rank (module doc, "Discovery"); every rank id is checked (limits.rank_id)."""
    framework = "mindspore" if path.name.endswith("ascend_ms") else "torch_npu"

    def problem(p, text):
        problems.append((p, text))

    info, info_path, rank, source = {}, "", None, ""
    infos = sorted(p for p in path.glob("profiler_info*.json") if p.is_file())
    for p in infos:
        try:
            doc = _read_json(p)
        except InputError as exc:
            problems.append((exc.path, exc.problem + "; ignored"))
            continue
        if isinstance(doc, dict):
            info, info_path = doc, str(p)
            break
        problems.append((str(p), f"expected a JSON object, found {_json_type(doc)}; ignored"))
    named = {}
    for p in infos:
        m = _INFO.match(p.name)
        if m:
            r = rank_id(m.group(1), p, problem, "rank id in the file name")
            if r is not None:
                named.setdefault(r, p)
    if named:
        rank = min(named)
        source = named[rank].name
        if len(named) > 1:
            problems.append((str(path), f"profiler_info files name ranks {', '.join(map(str, sorted(named)))}; "
                                        f"rank {rank} ({source}, the lowest) was used"))
    if "rank_id" in info:
        r = rank_id(info["rank_id"], info_path, problem, "rank_id")
        if r is not None and rank is None:
            rank, source = r, "rank_id in profiler_info.json"
        elif r is not None and r != rank:
            problems.append((info_path, f"rank_id {r} disagrees with the file name (rank {rank}); the file name "
                                        f"was used"))
    if rank is None:
        from .ascend_trace import rank_from_framework

        value = rank_from_framework(path)
        if value is not None:
            rank = rank_id(value, path / "FRAMEWORK", problem, "rank id in the FRAMEWORK file names")
            source = "FRAMEWORK/ file suffix"
    if info and "MindSpore" in json.dumps(info)[:4000]:
        framework = "mindspore"
    return RankDir(path, rank, source, framework, _stamp(path), info, info_path)


# --------------------------------------------------------------------------- the reader


def choose_rank_dirs(root: Path, problems: list) -> dict[int, RankDir]:
    """One profiler directory per rank (module doc, "Discovery"); raises :class:`InputError` when none is usable."""
    return choose_among([_rank_dir(p, problems) for p in walk_prof_dirs(root)], root, problems)


def choose_among(dirs: list[RankDir], root: Path, problems: list) -> dict[int, RankDir]:
    """One of ``dirs`` (in path order) per rank; see :func:`choose_rank_dirs`."""
    if not dirs:
        raise InputError(root, "no *_ascend_pt / *_ascend_ms profiler directory found")
    if len(dirs) == 1 and dirs[0].rank is None:
        dirs[0].rank, dirs[0].rank_source = 0, "single profiler directory without a rank (taken as rank 0)"
    chosen: dict[int, RankDir] = Chosen()
    ranked = [d for d in dirs if d.rank is not None]
    if len({d.rank for d in ranked}) < len(ranked) or WANTED.get() is not None:
        ranked = _window_of(ranked, root, problems, chosen)
        dirs = [d for d in dirs if d.rank is None] + ranked
    for d in dirs:
        if d.rank is None:
            problems.append((str(d.path), "no rank found (no profiler_info_<rank>.json, no rank_id, no FRAMEWORK "
                                          "suffix); directory skipped"))
            continue
        other = chosen.get(d.rank)
        if other is None:
            chosen[d.rank] = d
            continue
        winner, loser, why = _newer(d, other)
        chosen[d.rank] = winner
        problems.append((str(loser.path), f"rank {d.rank} also in {winner.path.name}, which was used ({why}); "
                                          f"this directory was skipped"))
    if not chosen:
        raise InputError(root, "profiler directories found, but none says which rank it is")
    return chosen


class Chosen(dict):
    """The rank directories read (rank -> :class:`RankDir`), with ``windows``: the profiling windows found
    (:func:`reportgen.readers.windows.describe`; empty when each rank has one directory) and their run ``note``."""

    windows: list = []
    note: str = ""


def _window_span(d: RankDir) -> tuple[int | None, int | None]:
    """(start, end) wall-clock ns of a directory's collection from profiler_info.json: ``end_info.collectionTimeEnd``,
    and the start that many monotonic ns earlier (``end_info.MonotonicTimeEnd - start_info.start_monotonic``)."""
    end_info = d.info.get("end_info") if isinstance(d.info.get("end_info"), dict) else {}
    start_info = d.info.get("start_info") if isinstance(d.info.get("start_info"), dict) else {}
    end, mono_end, mono_start = (as_int(end_info.get("collectionTimeEnd")), as_int(end_info.get("MonotonicTimeEnd")),
                                 as_int(start_info.get("start_monotonic")))
    if end is None or end <= 0:
        return None, None
    if mono_end is not None and mono_start is not None and 0 <= mono_end - mono_start <= 86_400 * 10**9:
        return end - (mono_end - mono_start), end
    return end, end


def _window_steps(d: RankDir) -> tuple[int, ...]:
    """The step ids ``step_trace_time.csv`` lists (its ``Step`` column; at most 100,000 lines read), else ()."""
    p = d.output / "step_trace_time.csv"
    steps = set()
    try:
        with open_input(p, "r", newline="", encoding="utf-8-sig", errors="replace") as fh:
            rows = csv.reader(fh)
            head = next(rows, [])
            col = next((i for i, h in enumerate(head) if h.strip().lower() == "step"), None)
            if col is None:
                return ()
            for n, row in enumerate(rows):
                if n >= 100_000:
                    break
                v = as_int(row[col]) if col < len(row) else None
                if v is not None and 0 <= v < 10**12:
                    steps.add(v)
    except (OSError, csv.Error, StopIteration):
        return ()
    return tuple(sorted(steps))


def _window_of(dirs: list[RankDir], root: Path, problems: list, chosen: "Chosen") -> list[RankDir]:
    """The directories of one profiling window (:mod:`.windows`: grouped by steps / start time, the default or
    ``--window`` choice); the others are named in ``problems`` and the windows kept on ``chosen``."""
    members = []
    for d in dirs:
        start, end = _window_span(d)
        members.append(windows.Member(d.rank, d.path, d, start, end, _window_steps(d), d.stamp))
    found = windows.group(members)
    if len(found) < 2 and WANTED.get() is None:
        return dirs
    win, why = windows.choose(found, WANTED.get(), root)
    described = windows.describe(found, win, why, root)
    problems.extend(windows.problems(described, root))
    chosen.windows, chosen.note = described, windows.note(described, len(found))
    return win.keys


class _Meta:
    """What the ranks' profiler_metadata.json (or the DB's META_DATA) claim: ``distributed_args`` (the first
    rank's; each distinct ``world_size`` claim is kept with the file that makes it, :func:`_layout` checks them)
    and the union of the process groups, each group's ``global_ranks`` checked (whole numbers in
    0..MAX_RANKS-1, no repeats; else the group is ignored)."""

    def __init__(self, problems: list):
        self.problems = problems
        self.args: dict = {}
        self.args_path = ""
        self.world_claims: dict[str, tuple[str, object]] = {}  # repr(claim) -> (path, claim), first file first
        self.groups: dict[str, dict] = {}  # key -> {"group_name": str, "ranks": sorted list of int, "path": str}

    def add(self, path: str, args, groups) -> None:
        if args is not None:
            if not isinstance(args, dict):
                self.problems.append((path, f"distributed_args is {_json_type(args)}, not an object; ignored"))
            else:
                if not self.args:
                    self.args, self.args_path = args, path
                claim = args.get("world_size")
                if claim is not None and len(self.world_claims) < 16:
                    self.world_claims.setdefault(_text(repr(claim), 40), (path, claim))
        if groups is None:
            return
        if not isinstance(groups, dict):
            self.problems.append((path, f"parallel_group_info is {_json_type(groups)}, not an object; ignored"))
            return
        for key, g in groups.items():
            key = _text(key, 200)
            members = g.get("global_ranks") if isinstance(g, dict) else None
            if not isinstance(members, list):
                self.problems.append((path, f"parallel_group_info group {key!r}: no global_ranks list; "
                                            f"group ignored"))
                continue
            ranks = self._ranks(path, key, members)
            if ranks is None:
                continue
            name = g.get("group_name", "")
            got = {"group_name": _text(name if isinstance(name, str) else "", 200), "ranks": ranks, "path": path}
            old = self.groups.setdefault(key, got)
            if old["ranks"] != ranks:
                self.problems.append((path, f"parallel_group_info group {key!r} lists other ranks than in "
                                            f"{old['path']}; that one was used"))

    def _ranks(self, path: str, key: str, members: list) -> list[int] | None:
        if len(members) > MAX_RANKS:
            self.problems.append((path, f"parallel_group_info group {key!r} lists {len(members)} ranks, more than "
                                        f"{MAX_RANKS}; group ignored"))
            return None
        out = []
        for x in members:
            n = as_int(x)
            if n is None or not 0 <= n < MAX_RANKS:
                rank_id(x, path, lambda p, t: self.problems.append(
                    (p, f"parallel_group_info group {key!r}: {t.replace('; ignored', '; group ignored')}")),
                    "member")
                return None
            out.append(n)
        if len(set(out)) != len(out):
            self.problems.append((path, f"parallel_group_info group {key!r} lists a rank twice; group ignored"))
            return None
        return sorted(out)

    def add_text(self, path: str, name: str, value) -> None:
        """One META_DATA row of a DB export (``distributed_args`` / ``parallel_group_info`` as JSON text)."""
        if name not in ("distributed_args", "parallel_group_info"):
            return
        try:
            doc = json.loads(value) if isinstance(value, str) else value
        except (ValueError, RecursionError):
            self.problems.append((path, f"META_DATA {name}: not JSON; ignored"))
            return
        if name == "distributed_args":
            self.add(path, doc, None)
        elif name == "parallel_group_info":
            self.add(path, None, doc)


#: read the rank directories in the ``--jobs`` process pool only when their files hold this many bytes (the pool's
#: start-up, ~0.2 s, and sending the parsed tables back cost more than they save on a small run)
PARALLEL_MIN_BYTES = 16 * 1024 * 1024


def read(root: Path, progress: Callable[[int, int], None] | None = None, jobs: int | None = None) -> Run:
    """The run of ``root``. With ``jobs`` > 1 (default: the cores) and at least :data:`PARALLEL_MIN_BYTES` of
    files, the rank directories are read in a process pool (:func:`_read_rank_job`: the same parts, their lazily
    parsed files parsed there); the run is the same either way."""
    root = Path(root)
    problems: list[tuple[str, str]] = []
    picked = choose_rank_dirs(root, problems)
    chosen = sorted(picked.items())
    parts = {}
    jobs = jobs or os.cpu_count() or 1
    if jobs > 1 and len(chosen) > 1 and _files_bytes(chosen) >= PARALLEL_MIN_BYTES:
        from .. import workers

        with workers.pool(min(jobs, len(chosen))) as pool:
            for n, ((rank, _d), part) in enumerate(zip(chosen, pool.map(_read_rank_job, chosen)), start=1):
                parts[rank] = part
                if progress:
                    progress(n, len(chosen))
    else:
        for n, (rank, d) in enumerate(chosen, start=1):
            if progress:
                progress(n, len(chosen))
            parts[rank] = read_rank_dir(d, rank)
    return assemble(root, picked, parts, problems)


def _files_bytes(chosen: list) -> int:
    """Bytes of the files in the chosen rank directories' output folders (stops counting at the threshold)."""
    total = 0
    for _rank, d in chosen:
        try:
            for e in os.scandir(d.output):
                if e.is_file():
                    total += e.stat().st_size
        except OSError:
            continue
        if total >= PARALLEL_MIN_BYTES:
            break
    return total


def _read_rank_job(job: tuple) -> dict:
    """:func:`read_rank_dir` of one ``(rank, RankDir)`` on a worker of the pool, its lazily parsed files parsed
    there (:func:`_parsed`): the parent receives tables, not parsers to run."""
    rank, d = job
    part = read_rank_dir(d, rank)
    lazy = part["tables"].get("_lazy")
    if lazy:
        part["tables"]["_lazy"] = [(table, p, _parsed(table, p, parser, r), r) for table, p, parser, r in lazy]
    return part


def read_rank_dir(d: RankDir, rank: int, reduce: bool = True) -> dict:
    """One rank directory's part (the per-rank half of :func:`read`): its profiler_metadata.json claims, its
    tables (absolute int ns), its lazily parsed files, file list, host and data problems. ``reduce=False`` keeps
    every communication-matrix row (:func:`reduce_matrix` is not applied): a part reduced elsewhere
    (reportgen.engine) cannot have its file read again for a link chosen later."""
    part: dict = {"meta_pre": [], "meta_doc": None, "meta_post": [], "tables": {}, "files": [], "problems": [],
                  "host": _host_from_name(d.path)}
    meta_path = d.path / "profiler_metadata.json"
    if meta_path.is_file():
        unread = object()
        try:
            doc = _read_json(meta_path)
        except InputError as exc:
            part["meta_pre"].append((exc.path, exc.problem + "; metadata ignored"))
            doc = unread
        if doc is not unread and not isinstance(doc, dict):
            part["meta_pre"].append((str(meta_path), f"expected a JSON object, found {_json_type(doc)}; metadata "
                                                     "ignored"))
        elif doc is not unread:
            part["meta_doc"] = (str(meta_path), doc.get("distributed_args"), doc.get("parallel_group_info"))
            said = as_int(doc["distributed_args"].get("rank")) if isinstance(doc.get("distributed_args"), dict) \
                else None
            if said is not None and said != rank:
                part["meta_post"].append((str(meta_path), f"distributed_args.rank {said} disagrees with "
                                                          f"{d.rank_source} (rank {rank}); rank {rank} was used"))
    _read_rank(d, rank, part["tables"], part["files"], part["problems"], reduce)
    try:
        empty = d.output.is_dir() and next(os.scandir(d.output), None) is None
    except OSError:
        empty = False
    if empty:  # issue 29: a run of empty output folders was a report of unavailable sections and no word why
        part["problems"].append((str(d.output), f"empty: the export wrote no file here (not run, or failed); "
                                                f"rank {rank} has no data"))
    return part


def assemble(root: Path, chosen: dict[int, RankDir], parts: dict[int, dict], problems: list) -> Run:
    """The run from the chosen rank directories and their :func:`read_rank_dir` parts (the cross-rank half of
    :func:`read`; also used by :mod:`reportgen.engine` for parts reduced elsewhere)."""
    empty = [d.output for rank, d in sorted(chosen.items())
             if any(p == str(d.output) and t.startswith("empty: the export wrote no file") for p, t in
                    (tuple(x) for x in parts.get(rank, {}).get("problems", ())))]
    if chosen and len(empty) == len(chosen):
        where = empty[0] if len(empty) == 1 else root
        raise InputError(where, f"every {OUTPUT_DIR}/ folder is empty ({len(empty)} rank director"
                                f"{'y' if len(empty) == 1 else 'ies'}): the profiler's export wrote no data; "
                                "export it first (torch_npu.profiler.profiler.analyse / MindSpore "
                                "Profiler.offline_analyse), then give reportgen the result")
    frameworks = {d.framework for d in chosen.values()}
    # torch_npu writes *_ascend_pt (PyTorch), MindSpore *_ascend_ms: the framework of the training script
    fw = {"pytorch" if f == "torch_npu" else "mindspore" for f in frameworks}
    run = Run(name=root.resolve().name or str(root), source_format="ascend", source_path=str(root),
              framework=fw.pop() if len(fw) == 1 else ("mixed" if fw else ""), device="npu",
              layout=f"{'/'.join(sorted(frameworks))} Ascend profiler output: {len(chosen)} rank director"
                     f"{'y' if len(chosen) == 1 else 'ies'} (*_ascend_pt / *_ascend_ms)")
    if getattr(chosen, "windows", None):  # several profiling windows: which one this is (readers/windows.py)
        run.windows = list(chosen.windows)
        run.notes.append(chosen.note)

    # metadata: distributed args and the union of every rank's process groups
    meta = _Meta(problems)
    for rank in sorted(chosen):
        part = parts[rank]
        problems.extend(part["meta_pre"])
        if part["meta_doc"] is not None:
            meta.add(*part["meta_doc"])
        problems.extend(part["meta_post"])

    # per-rank files
    tables: dict[str, list] = {}
    files = []
    matrix_paths: dict = {}  # rank -> its communication_matrix.json, when reduce_matrix left rows out
    for rank in sorted(chosen):
        part = parts[rank]
        for name, dfs in part["tables"].items():
            if name == "_matrix_paths":
                matrix_paths.update(dfs)
            else:
                tables.setdefault(name, []).extend(dfs)
        files.extend(part["files"])
        problems.extend(part["problems"])
        if part["host"]:
            run.hosts[rank] = part["host"]
    lazy: dict[str, list] = {}
    left = tables.pop("_matrix_left", [])
    left = pd.concat(left, ignore_index=True) if left else None
    for table, path, parser, rank in tables.pop("_lazy", []):
        lazy.setdefault(table, []).append((path, parser, rank))
    eager = [df for parts in tables.values() for df in parts if df is not None]
    # the origin is the earliest time of the run: the lazily parsed files (kernel_details, memory_record, ...) count
    # with their first rows (or their whole table when already parsed), or their times would fall before it
    t0 = origin(*(c for df in eager for c in abs_columns(df)),
                *(_first_ns(parser, path, table) for table, items in lazy.items() for path, parser, _r in items))
    run.time_origin_ns = t0 if t0 is not None else 0
    for name, parts in tables.items():
        tables[name] = [to_rel_ms(df, run.time_origin_ns) if df is not None else None for df in parts]
    for table, items in lazy.items():
        run.loaders[table] = _lazy_loader(run, items, tables.pop(table, []))
    for name, parts in tables.items():
        parts = [p for p in parts if p is not None and not p.empty]
        if parts:
            run.tables[name] = pd.concat(parts, ignore_index=True)
    meta_rows = run.tables.pop("metadata", None)
    if meta_rows is not None:  # DB exports keep profiler_metadata.json in their META_DATA table
        for row in meta_rows.itertuples():
            meta.add_text(row.path, row.name, row.value)

    if "comm_bandwidth" in run.tables:
        run.tables["comm_bandwidth"] = sdma_remainder(run.tables["comm_bandwidth"])
    by_hash = _layout(run, chosen, meta, problems, root)
    left, self_map = _resolve_groups(run, by_hash, problems, left)
    _busiest_links(run, left, matrix_paths, by_hash, self_map)
    have = set(run.tables["step_time"]["rank"]) if "step_time" in run.tables else set()
    if "trace_steps" in run.tables and "overlap_intervals" in run.tables:
        todo = run.tables["trace_steps"][~run.tables["trace_steps"]["rank"].isin(have)]
        if not todo.empty:
            derived = derive_step_time(todo, run.tables["overlap_intervals"], run.tables.get("hccl_ops"))
            if not derived.empty:
                run.tables["step_time"] = pd.concat([run.tables.get("step_time"), derived], ignore_index=True) \
                    if have else derived
                run.notes.append("Step times of rank(s) " + ", ".join(map(str, sorted(derived["rank"].unique()))) +
                                 " were derived from trace_view.json (Overlap Analysis), as torch_npu derives "
                                 "step_trace_time.csv; that file was absent.")
    if "step_time" in run.tables:
        whole_trace_steps(run)
        run.step_definition = ("Step time here is the device's end-to-end time of the step: computing + communication "
                               "not overlapped + free, as the profiler's step_trace_time (csv or DB) writes it; "
                               "Preparing (step start to the first device op) is outside it.")
        st = run.tables["step_time"].sort_values(["rank", "step"]).reset_index(drop=True)
        run.tables["step_time"] = st
        run.steps = sorted(st["step"].unique().tolist())
    if any(t in run.tables or t in run.loaders for t in ("memory_record", "module_mem")):
        run.loaders["memory_samples"] = lambda: memory_samples(run)  # parsed when the memory section asks
    if "dataloader" in run.tables:  # torch_npu's enumerate(DataLoader) spans (ascend_trace.py), as Kineto's
        from ..timeline import dataloader_rows

        run.tables["dataloader"] = dataloader_rows(run.tables["dataloader"], run.tables.get("trace_steps"))
    if "kernels" in run.tables or "kernels" in run.loaders:
        run.loaders["op_flops"] = lambda: ascend_op_flops(run.table("kernels"))
    from .comm import ascend_attrs

    ascend_attrs(run)  # the canonical communication tables (readers/comm.py)
    run.tables["files"] = pd.DataFrame(files, columns=["rank", "kind", "path"])
    for path, problem in problems:
        run.problem(path, problem)
    return run


def memory_samples(run: Run) -> pd.DataFrame | None:
    """The canonical ``memory_samples`` of an Ascend run (model.TABLES), from ``memory_record`` or, failing it,
    ``npu_module_mem``. Ascend's rule, written down once here (research/ascend-profiler-output-and-msprof-analyze.md
    §2.7): the memory in use of a rank is the APP component's total reserved (the process-level figure npu-smi shows)
    when the rank has APP rows, else the component with the largest total reserved (the series names it);
    ``npu_module_mem.csv`` alone: the sum over CANN modules at each sample time. The files carry no capacity."""
    mr = run.table("memory_record")
    if mr is not None and mr["reserved_mb"].notna().any():
        mr = mr[mr["reserved_mb"].notna() & mr["rank"].notna()].reset_index(drop=True)
        chosen = (_upper(mr["component"]) == "APP").to_numpy().copy()
        has_app = pd.Series(chosen).groupby(mr["rank"].to_numpy()).transform("any").to_numpy()
        series = text_where(chosen, "APP reserved (process level)", None).astype(object, copy=False)
        for _rank, g in mr[~has_app].groupby("rank"):
            best = g.groupby("component")["reserved_mb"].max().idxmax()
            pick = g.index[(g["component"] == best).to_numpy()]
            chosen[pick] = True
            series[pick] = f"max over components of reserved ({best})"
        sel = mr[chosen]
        peak = pd.DataFrame({"rank": sel["rank"].to_numpy().astype(int), "ts_ms": sel["ts_ms"].to_numpy(),
                             "kind": "device", "device_id": np.nan, "series": series[chosen],
                             "allocated_mb": sel["allocated_mb"].to_numpy(dtype=float),
                             "reserved_mb": sel["reserved_mb"].to_numpy(dtype=float),
                             "active_mb": sel["active_mb"].to_numpy(dtype=float), "capacity_mb": np.nan,
                             "detail_only": False})
        alloc = allocator_rows(mr[~chosen])
        return peak if alloc is None else pd.concat([peak, alloc], ignore_index=True)
    mm = run.table("module_mem")
    if mm is None:
        return None
    tot = mm.groupby(["rank", "ts_ms"], as_index=False)["reserved_mb"].sum()
    return pd.DataFrame({"rank": tot["rank"].astype(int), "ts_ms": tot["ts_ms"], "kind": "device", "device_id": np.nan,
                         "series": "npu_module_mem (sum of modules)", "allocated_mb": np.nan,
                         "reserved_mb": tot["reserved_mb"], "active_mb": np.nan, "capacity_mb": np.nan})


def _upper(components: pd.Series) -> pd.Series:
    """``components.astype(str).str.upper()``, once per distinct name (:func:`reportgen.timeline.per_value`): a name
    repeats on every sample of memory_record.csv (38k rows: 13 ms per row, 1.7 ms per distinct name)."""
    return per_value(components, lambda u: u.astype(str).str.upper())


#: the framework allocator's component of memory_record.csv, first present wins (research/ascend-profiler-output-and-
#: msprof-analyze.md §2.7: PTA = torch_npu's caching allocator, GE = the graph engine, PTA+GE = both together)
ALLOCATOR_COMPONENTS = ("PTA+GE", "PTA", "GE", "MINDSPORE", "MS")


def allocator_rows(mr: pd.DataFrame) -> pd.DataFrame | None:
    """The framework allocator's own counters (allocated / reserved / active over time), detail rows of
    ``memory_samples`` (``detail_only``): the process-level APP reserved is sampled every 20 ms and stays flat while
    the allocator's total allocated rises through the forward pass and falls through the backward one (one sample per
    allocation / release). Per rank the first of :data:`ALLOCATOR_COMPONENTS` the rank has with an allocated value;
    never a peak candidate (the peak stays the APP rule of :func:`memory_samples`)."""
    if mr.empty or mr["allocated_mb"].isna().all():
        return None
    comp = _upper(mr["component"])
    has = mr["allocated_mb"].notna()
    parts = []
    for rank, g in mr[has].groupby("rank"):
        cg = comp[g.index]
        pick = next((c for c in ALLOCATOR_COMPONENTS if (cg == c).any()), None)
        if pick is None:
            continue
        s = g[(cg == pick).to_numpy()]
        name = str(s["component"].iloc[0])
        parts.append(pd.DataFrame({"rank": int(rank), "ts_ms": s["ts_ms"].to_numpy(), "kind": "device",
                                   "device_id": np.nan, "series": f"{name} allocator (framework)",
                                   "allocated_mb": s["allocated_mb"].to_numpy(dtype=float),
                                   "reserved_mb": s["reserved_mb"].to_numpy(dtype=float),
                                   "active_mb": s["active_mb"].to_numpy(dtype=float), "capacity_mb": np.nan,
                                   "detail_only": True}))
    return pd.concat(parts, ignore_index=True) if parts else None


def whole_trace_steps(run: Run) -> None:
    """Step ids of ``step_time``: rows the profiler wrote without a step id (no schedule; :data:`NO_STEP_ID`) are the
    whole-trace window, step 0 (the key communication.json gives them too). ``run.step_source`` is ``whole_trace``
    when no row has an id, else ``markers``."""
    st = run.tables["step_time"]
    none = st["step"] == NO_STEP_ID
    run.step_source = "whole_trace" if none.all() else "markers"
    if none.any():
        run.tables["step_time"] = st.assign(step=st["step"].where(~none, 0))


def _layout(run: Run, chosen: dict, meta: _Meta, problems: list, root: Path) -> dict:
    """Groups, world size, missing ranks, parallel sizes and pipeline stages; returns {hash: group row}.

    World size: ``distributed_args.world_size`` (else MindSpore's ``rank_size`` in profiler_info) checked
    against the ranks found (:func:`reportgen.limits.world_size`); a group listing a rank beyond a usable claim
    is ignored; without a usable claim the ranks found and the groups' members set it. Nothing is allocated from
    a claim: missing ranks are listed up to :data:`reportgen.limits.MAX_LISTED_RANKS`, beyond that only counted."""
    found = sorted(chosen)
    what = "distributed_args.world_size"
    claims = list(meta.world_claims.values())
    if not claims:  # MindSpore <= 2.4
        what = "rank_size"
        claims = [(d.info_path, d.info["rank_size"]) for _r, d in sorted(chosen.items())
                  if d.info.get("rank_size") is not None][:1]

    def problem(p, text):
        problems.append((p, text))

    usable = {}  # claim -> its first file, for the claims that hold (limits.world_size)
    for path, claim in claims:
        n = world_size(claim, found, path, problem, what)
        if n == as_int(claim):
            usable.setdefault(n, path)
    world, claim_path = min(usable.items(), default=(None, ""))
    if len(usable) > 1:
        problems.append((str(root), f"{what} differs between files: " + ", ".join(
            f"{n} ({p})" for n, p in usable.items()) + f"; {world} (the smallest) was used"))
    if world is not None:
        for key in [k for k, g in meta.groups.items() if g["ranks"] and g["ranks"][-1] >= world]:
            g = meta.groups.pop(key)
            problems.append((g["path"], f"parallel_group_info group {key!r} lists rank {g['ranks'][-1]}, beyond "
                                        f"the world size {world} ({what}); group ignored"))
    else:  # no usable claim: the groups' members and the ranks found; unknown when nothing claims a world
        tops = [g["ranks"][-1] + 1 for g in meta.groups.values() if g["ranks"]]
        world = max(tops + [found[-1] + 1]) if tops or claims else None
    groups = pd.DataFrame(
        [{"group": k, "name": g["group_name"], "kind": group_kind(g["group_name"]), "ranks": g["ranks"],
          "hash": str(double_hash(k))} for k, g in sorted(meta.groups.items())],
        columns=["group", "name", "kind", "ranks", "hash"])
    run.tables["groups"] = groups
    run.ranks = found
    run.world_size = world
    run.missing_ranks, missing = limits.missing_ranks(world, found)
    if missing:
        problems.append((claim_path or str(root), f"{missing} of the {world} ranks have no profiler directory "
                                                  f"(too many to list)"))

    par = {}
    for short, key in (("tp", "tensor_model"), ("pp", "pipeline_model"), ("dp", "data"), ("cp", "context"),
                       ("ep", "expert_model")):
        value = meta.args.get(f"{key}_parallel_size")
        if value is None:
            continue
        n = as_int(value)
        if n is None or not 1 <= n <= (world or MAX_RANKS):
            problems.append((meta.args_path, f"distributed_args.{key}_parallel_size {_text(repr(value), 40)} is not "
                                             f"a size in 1..{world or MAX_RANKS}; ignored"))
            continue
        par[short] = n
    stage_of: dict[int, int] = {}
    for row in groups.itertuples():
        if row.kind == "pp" and len(row.ranks) > 1:
            for i, r in enumerate(row.ranks):  # a rank's position in its pp group is its stage
                stage_of[r] = i + 1
    pp = par.get("pp") or (max(stage_of.values()) if stage_of else None)
    if pp:
        par["stages"] = pp
    if par:
        par["mode"] = "pipeline-parallel" if (pp or 1) > 1 else ("model-parallel" if par.get("tp", 1) > 1
                                                                  else "data-parallel")
    run.parallel = par
    run.stage_map = stage_of if stage_of and (pp or 1) > 1 else {}
    if (pp or 1) > 1 and not stage_of:
        problems.append((str(root), f"pipeline size {pp} but no pp groups in profiler_metadata.json: stages unknown"))
    return {row.hash: row for row in groups.itertuples()}


def _lazy_loader(run: Run, items: list, eager_parts: list):
    """Parse these files when first asked for; their problems join the run's data problems."""

    def load() -> pd.DataFrame | None:
        problems: list = []
        parts = [p for p in eager_parts if p is not None and not p.empty]
        for path, parser, rank in items:
            df = _guarded(path, problems, parser, rank, problems)
            if df is not None and not df.empty:  # one object per distinct text of the file, as _read_rank's
                parts.append(share_text(to_rel_ms(df, run.time_origin_ns)))
        for path, problem in problems:
            run.problem(path, problem)
        return pd.concat(parts, ignore_index=True) if parts else None

    return load


def _guarded(path: Path, problems: list, fn, *args):
    """Run one file's parser; bad content becomes a data problem, never a crash of the whole run."""
    try:
        return fn(path, *args)
    except InputError as exc:
        problems.append((exc.path or str(path), exc.problem + "; file skipped"))
    except (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError) as exc:
        problems.append((str(path), f"unexpected content ({type(exc).__name__}: {str(exc)[:120]}); file skipped"))
    return None


def _read_rank(d: RankDir, rank: int, tables: dict, files: list, problems: list, reduce: bool = True) -> None:
    out = d.output
    present = {p.name: p for p in out.iterdir()} if out.is_dir() else {}

    def add(name, df):
        if df is not None:  # one object per distinct text of the rank (sent so to the parent: pickle keeps it)
            tables.setdefault(name, []).append(share_text(df))

    for fname, (table, parser) in TEXT_FILES.items():
        p = present.get(fname)
        if p is None:
            continue
        files.append((rank, table, str(p)))
        if table in LAZY_TABLES:
            try:  # parsed when a section asks; a file that is not CSV text at all is named now
                Csv(p, Rejects(), set(), max_rows=0)
            except InputError as exc:
                problems.append((exc.path or str(p), exc.problem + "; file skipped"))
                continue
            if table in CHECKED_NOW:  # a section may never ask: read now, so that its damage is named anyway
                df = _guarded(p, problems, parser, rank, problems)
                if df is None:
                    continue
                # the loader's parser; the earliest time of the whole table joins the run origin
                parser = Parsed(df, [], origin(*abs_columns(df)))
            tables.setdefault("_lazy", []).append((table, p, parser, rank))
        else:
            add(table, _guarded(p, problems, parser, rank, problems))
    p = present.get("communication.json")
    if p is not None:
        files.append((rank, "communication", str(p)))
        both = _guarded(p, problems, parse_communication, rank, problems)
        if both is not None:
            add("comm_ops", both[0])
            add("comm_bandwidth", both[1])
    p = present.get("communication_matrix.json")
    if p is not None:
        files.append((rank, "communication_matrix", str(p)))
        df = _guarded(p, problems, parse_matrix, rank, problems)
        if df is not None:  # one rank's matrix, reduced before the next is read (reduce_matrix)
            df = df.assign(_row=np.arange(len(df)))
            df, left = reduce_matrix(df) if reduce else (df, pd.DataFrame())
            add("comm_matrix", df)
            if not left.empty:
                add("_matrix_left", left.assign(rank=rank))
                tables.setdefault("_matrix_paths", {})[rank] = p
    p = present.get("trace_view.json")
    if p is not None:
        files.append((rank, "trace_view", str(p)))
        from .ascend_trace import read_trace_view

        for name, df in (_guarded(p, problems, read_trace_view, rank, problems) or {}).items():
            add(name, df)
    dbs = [q for n, q in present.items() if n.endswith(".db") or n.endswith(".dat")]
    if dbs:
        for q in dbs:
            files.append((rank, "db", str(q)))
        # what the DB export provides when the text file that carries it is absent
        counterpart = {"step_time": "step_trace_time.csv", "comm_ops": "communication.json",
                       "comm_bandwidth": "communication.json", "comm_matrix": "communication_matrix.json",
                       "kernels": "kernel_details.csv", "memory_record": "memory_record.csv",
                       "module_mem": "npu_module_mem.csv", "operator_memory": "operator_memory.csv",
                       "trace_steps": "trace_view.json", "overlap_intervals": "trace_view.json",
                       "hccl_ops": "trace_view.json", "device_ops": "trace_view.json",
                       "metadata": "../profiler_metadata.json", "dataloader": "trace_view.json"}
        wanted = {t for t, f in counterpart.items() if not (out / f).exists()}
        wanted |= {"hbm", "llc"}  # HBM / LLC samples: read from the DB only (the text export has them as counters)
        # the trace-level tables and the metadata live only in the profiler DB (ascend_*_profiler_N.db,
        # msprof_*.db): without one, asking for them would only list them as missing
        if not any("profiler" in q.name or q.name.startswith("msprof") for q in dbs):
            wanted -= {"trace_steps", "overlap_intervals", "hccl_ops", "device_ops", "metadata", "kernels",
                       "memory_record", "module_mem", "operator_memory", "dataloader", "hbm", "llc"}
        if wanted:
            from .ascend_db import read_db_rank

            for name, df in read_db_rank(d.path, rank, wanted, problems).items():
                add(name, df)
    if not tables.get("comm_ops") and tables.get("hccl_ops"):  # Level0: no communication.json, no analysis DB
        ops = level0_comm_ops(pd.concat(tables["hccl_ops"], ignore_index=True),
                              pd.concat(tables["trace_steps"], ignore_index=True) if tables.get("trace_steps")
                              else None)
        if not ops.empty:
            add("comm_ops", ops)
            problems.append((str(out / "trace_view.json"), "no communication.json (profiler_level Level0?): "
                             "communication ops have start and elapse time from the HCCL ops of trace_view.json "
                             "only; transit/wait/sync/idle and the group are unknown"))


#: columns of the raw ``comm_ops`` of one rank (before the group hashes become group keys: :func:`_resolve_groups`)
COMM_OPS_RAW = ["rank", "step", "kind", "op", "op_type", "group_hash", "start_ns", "elapse_ms", "transit_ms",
                "wait_ms", "sync_ms", "idle_ms"]


def level0_comm_ops(hccl: pd.DataFrame, steps: pd.DataFrame | None) -> pd.DataFrame:
    """``comm_ops`` of a rank whose profiler wrote no communication analysis (Level0: no communication.json, no
    CommAnalyzerTime), from its HCCL ops (``hccl_ops``: trace_view.json's ``Group N Communication`` lanes; absolute
    ``start_ns``): op = the name without an ``@group`` suffix, op_type / kind as communication.json's
    (:func:`_op_type`, :data:`P2P_PREFIXES`), start and elapse = the op's span, step = the ``trace_steps`` window the op
    starts in (-1 outside every window; 0, the whole trace, when the rank has no windows), group = the ``@`` hash when
    the name has one, else "" (the trace does not say; as MindSpore CPU's); transit / wait / sync / idle NaN (CANN's master-stream
    analysis is not in the data). The same as the DB's COMMUNICATION_OP rows give (ascend_db._comm_ops_from_profiler)."""
    if hccl is None or hccl.empty:
        return pd.DataFrame(columns=COMM_OPS_RAW)
    names = hccl["op"].astype(str)
    split = names.str.partition("@")
    op, ghash = split[0], split[2].astype(str).to_numpy(dtype=object)
    start = hccl["start_ns"].to_numpy(np.int64)
    step = np.full(len(hccl), 0 if steps is None or steps.empty else -1, dtype=np.int64)
    if steps is not None and not steps.empty:
        w = steps.sort_values("start_ns", kind="stable")
        ws, we, wn = (w[c].to_numpy(np.int64) for c in ("start_ns", "end_ns", "step"))
        i = np.searchsorted(ws, start, side="right") - 1
        ic = np.clip(i, 0, None)
        inside = (i >= 0) & (start < we[ic])
        step[inside] = wn[ic[inside]]
    nan = np.full(len(hccl), math.nan)
    return pd.DataFrame({
        "rank": hccl["rank"].to_numpy(np.int64), "step": step,
        "kind": ["p2p" if o.lower().startswith(P2P_PREFIXES) else "collective" for o in op],
        "op": op.to_numpy(dtype=object), "op_type": [_op_type(o) for o in op],
        "group_hash": ghash, "start_ns": start,
        "elapse_ms": hccl["dur_ms"].to_numpy(dtype=float),
        "transit_ms": nan, "wait_ms": nan, "sync_ms": nan, "idle_ms": nan}, columns=COMM_OPS_RAW)


def derive_step_time(steps: pd.DataFrame, intervals: pd.DataFrame, hccl: pd.DataFrame | None) -> pd.DataFrame:
    """step_time rows from the trace's Overlap Analysis intervals, torch_npu's way
    (``_trace_step_time_parser.py``): an interval belongs to the step in which it starts; each column is
    the sum of its kind's durations; Overlapped = Communication - Not Overlapped; Bubble = Σ hcom_receive
    ops; Stage = (last end - first start of the step's intervals) - Bubble; Preparing = first computing or
    communication start - step start. Used when step_trace_time.csv is absent."""
    rows = []
    kinds = {"computing": "computing_ms", "communication": "comm_ms", "comm_not_overlapped": "comm_not_overlapped_ms",
             "free": "free_ms"}
    for st in steps.itertuples():
        iv = intervals[(intervals["rank"] == st.rank) & (intervals["start_ms"] >= st.start_ms)
                       & (intervals["start_ms"] < st.end_ms)]
        if iv.empty:
            continue
        dur = (iv["end_ms"] - iv["start_ms"]).groupby(iv["kind"]).sum()
        row = {"rank": st.rank, "step": st.step, **{col: float(dur.get(k, 0.0)) for k, col in kinds.items()}}
        bubble = 0.0
        if hccl is not None:
            h = hccl[(hccl["rank"] == st.rank) & (hccl["start_ms"] >= st.start_ms) & (hccl["start_ms"] < st.end_ms)]
            bubble = float(h.loc[h["op"].str.lower().str.startswith("hcom_receive"), "dur_ms"].sum())
        work = iv[iv["kind"].isin(["computing", "communication"])]
        row.update(
            overlapped_ms=row["comm_ms"] - row["comm_not_overlapped_ms"], bubble_ms=bubble,
            stage_ms=float(iv["end_ms"].max() - iv["start_ms"].min()) - bubble,
            comm_not_overlapped_exclude_receive_ms=max(row["comm_not_overlapped_ms"] - bubble, 0.0),
            preparing_ms=float(work["start_ms"].min() - st.start_ms) if not work.empty else math.nan)
        row["step_ms"] = row["computing_ms"] + row["comm_not_overlapped_ms"] + row["free_ms"]
        rows.append(row)
    return pd.DataFrame(rows, columns=STEP_TIME_ORDER)


def sdma_remainder(bw: pd.DataFrame) -> pd.DataFrame:
    """Keep each byte once: the profiler's SDMA entry is the aggregate of HCCS + PCIE + SIO (+ links of
    unknown type), so it is replaced by what it holds beyond those three, and dropped when that is nothing.
    Afterwards the transports of one op can be summed."""
    if bw.empty:
        return bw
    keys = ["rank", "step", "kind", "op", "group_hash" if "group_hash" in bw.columns else "group"]
    links = (bw[bw["transport"].isin(["HCCS", "PCIE", "SIO"])].groupby(keys)[["size_mb", "time_ms"]].sum()
             .rename(columns={"size_mb": "size_mb_links", "time_ms": "time_ms_links"}).reset_index())
    sdma = bw[bw["transport"] == "SDMA"].merge(links, on=keys, how="left")
    sdma[["size_mb_links", "time_ms_links"]] = sdma[["size_mb_links", "time_ms_links"]].fillna(0.0)
    sdma["size_mb"] = sdma["size_mb"] - sdma["size_mb_links"]
    sdma["time_ms"] = sdma["time_ms"] - sdma["time_ms_links"]
    sdma = sdma[sdma["size_mb"] > 1e-9 * (sdma["size_mb"] + sdma["size_mb_links"]).clip(lower=1e-12)]
    sdma = sdma.assign(bandwidth_gbps=(sdma["size_mb"] / sdma["time_ms"]).where(sdma["time_ms"] > 0))
    rest = bw[bw["transport"] != "SDMA"]
    return pd.concat([rest, sdma[bw.columns]], ignore_index=True)


def _self_map(m: pd.DataFrame) -> dict:
    """Self links i-i reported by rank R tell that local i is R in that group (msprof-analyze's fallback):
    {(group hash, local index): rank}, the first report of each."""
    own = m.loc[m["src_local"] == m["dst_local"], ["group_hash", "src_local", "rank"]]
    own = own.drop_duplicates(["group_hash", "src_local"])
    return {(h, int(i)): int(r) for h, i, r in zip(own["group_hash"], own["src_local"], own["rank"])}


def _global_ends(m: pd.DataFrame, by_hash: dict, self_map: dict) -> tuple[np.ndarray, np.ndarray]:
    """Group-local link ends -> global ranks through the group's sorted ``global_ranks`` (else :func:`_self_map`);
    -1 where neither tells."""
    n = len(m)
    src, dst = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    sl, dl = m["src_local"].to_numpy(np.int64), m["dst_local"].to_numpy(np.int64)
    for h, idx in pd.Series(np.arange(n)).groupby(m["group_hash"].to_numpy(), sort=False).indices.items():
        g = by_hash.get(h)
        rest = idx
        if g is not None:
            ranks = np.asarray(g.ranks, dtype=np.int64)
            ok = (sl[idx] < len(ranks)) & (dl[idx] < len(ranks))
            src[idx[ok]], dst[idx[ok]] = ranks[sl[idx[ok]]], ranks[dl[idx[ok]]]
            rest = idx[~ok]
        for i in rest:
            s, t = self_map.get((h, int(sl[i]))), self_map.get((h, int(dl[i])))
            if s is not None and t is not None:
                src[i], dst[i] = s, t
    return src, dst


def _resolve_groups(run: Run, by_hash: dict, problems: list, left: pd.DataFrame | None = None):
    """Group hashes -> group keys; matrix links group-local -> global ranks. ``left``: the per-link sums of the
    per-op rows :func:`reduce_matrix` left out, returned with global ``src_rank``/``dst_rank`` (their unmapped
    rows are counted with the others), with the self-link map (:func:`_self_map`)."""
    for name in ("comm_ops", "comm_bandwidth"):
        df = run.tables.get(name)
        if df is not None:
            df["group"] = [by_hash[h].group if h in by_hash else h for h in df["group_hash"]]
            run.tables[name] = df.drop(columns=["group_hash"])
    m = run.tables.get("comm_matrix")
    if m is None:
        return None, {}
    self_map = _self_map(m)
    src, dst = _global_ends(m, by_hash, self_map)
    keep = src >= 0
    dropped = m.loc[~keep, "group_hash"].value_counts(sort=False).to_dict()
    if left is not None and not left.empty:
        s, t = _global_ends(left, by_hash, self_map)
        left = left.assign(src_rank=s, dst_rank=t)
        for h, count in left.loc[s < 0].groupby("group_hash", sort=False)["rows"].sum().items():
            dropped[h] = dropped.get(h, 0) + int(count)
        left = left[s >= 0]
    m = m.assign(src_rank=src, dst_rank=dst)[keep]
    for h, count in dropped.items():
        if not count:
            continue
        problems.append(("communication_matrix.json", f"{count} link entr{'y' if count == 1 else 'ies'} of group "
                         f"{h} dropped: the group's members are not in profiler_metadata.json and no rank "
                         f"reported a self-link for those indices"))
    names = {h: by_hash[h].group if h in by_hash else h for h in m["group_hash"].unique()}
    m["group"] = m["group_hash"].map(names)
    run.tables["comm_matrix"] = m.drop(columns=["group_hash", "src_local", "dst_local"])[
        ["rank", "step", "kind", "op_type", "stat", "group", "src_rank", "dst_rank", "transport", "size_mb",
         "time_ms", "bandwidth_gbps", "op_name"] + (["_row"] if "_row" in m.columns else [])].reset_index(drop=True)
    return left, self_map


_GLOBAL_LINK = ["src_rank", "dst_rank", "transport"]


def _busiest_links(run: Run, left: pd.DataFrame | None, paths: dict, by_hash: dict, self_map: dict) -> None:
    """The per-op matrix rows of the run's :data:`MATRIX_OP_LINKS` busiest links (by their summed per-op time > 0,
    self links apart, ties and 1e-9 relative kept), every one of them complete: per rank, :func:`reduce_matrix`
    kept its own busiest; a rank that left out rows of a link chosen here is read again for them. Other links keep
    their ``total`` rows (and per-op rows of steps that have no other row, so that the set of steps stays)."""
    m = run.tables.get("comm_matrix")
    if m is None:
        return
    if left is None or left.empty:
        run.tables["comm_matrix"] = m.drop(columns="_row", errors="ignore")
        return
    nt = (m["stat"] != "total").to_numpy()
    op_rows = nt & (m["src_rank"] != m["dst_rank"]).to_numpy()
    timed = op_rows & (m["time_ms"] > 0).to_numpy()
    total = m[timed].groupby(_GLOBAL_LINK)["time_ms"].sum()
    lo = left[left["src_rank"] != left["dst_rank"]]
    total = total.add(lo.groupby(_GLOBAL_LINK)["op_time_ms"].sum(), fill_value=0)
    if len(total) > MATRIX_OP_LINKS:
        cut = total.nlargest(MATRIX_OP_LINKS).iloc[-1]
        total = total[total >= cut * (1 - 1e-9)]
    chosen = total.index
    key = pd.MultiIndex.from_frame(m[_GLOBAL_LINK])
    in_chosen = key.isin(chosen)
    again = sorted(set(lo.loc[pd.MultiIndex.from_frame(lo[_GLOBAL_LINK]).isin(chosen), "rank"]))
    extra = []
    for rank in again:  # rows of a chosen link this rank left out: read its file again for them
        df = parse_matrix(paths[rank], rank, [])
        df["_row"] = np.arange(len(df))
        df = df[(df["stat"] != "total") & (df["src_local"] != df["dst_local"])]
        s, t = _global_ends(df, by_hash, self_map)
        df = df.assign(src_rank=s, dst_rank=t)
        df = df[pd.MultiIndex.from_frame(df[_GLOBAL_LINK]).isin(chosen)]
        names = {h: by_hash[h].group if h in by_hash else h for h in df["group_hash"].unique()}
        extra.append(df.assign(group=df["group_hash"].map(names))[m.columns])
    keep = ~op_rows | in_chosen
    if again:
        keep &= ~(op_rows & in_chosen & m["rank"].isin(again).to_numpy())
    keep |= ~m["step"].isin(set(m.loc[keep, "step"])).to_numpy()
    m = m[keep]
    if extra:
        m = pd.concat([m, *extra], ignore_index=True).sort_values(["rank", "_row"], kind="stable")
    run.tables["comm_matrix"] = m.drop(columns="_row").reset_index(drop=True)



# --------------------------------------------------------------------------- parts reduced elsewhere (reportgen.engine)


class Parsed:
    """A lazily parsed file already parsed (on a worker or a node): the loader's parser returning its table and its
    data problems, and the earliest exact time of its first rows (the run origin when nothing else has one)."""

    def __init__(self, df: pd.DataFrame | None, problems: list, first_ns: int | None):
        self.df, self.problems, self.first_ns = df, problems, first_ns

    def __call__(self, _path, _rank, problems: list):
        problems.extend(self.problems)
        df, self.df = self.df, None  # the loader runs once: the table is not held twice while it is assembled
        return df


def _parsed(table: str, path: Path, parser, rank: int) -> Parsed:
    """A lazily parsed file parsed now, as the loader would (:func:`_lazy_loader`), with its first exact time."""
    problems: list = []
    df = _guarded(path, problems, parser, rank, problems)
    t = _first_ns(parser, path, table)
    if df is not None:  # the whole table is at hand: its earliest time, not only its first rows'
        t = origin(t, *abs_columns(df))
        t = pd.Series([t], dtype="int64") if t is not None else None
    # one object per distinct text before it is sent to the parent (pickle keeps shared objects shared)
    return Parsed(share_text(df) if df is not None else None, problems, origin(t) if t is not None else None)


def _first_ns(parser, path: Path, table: str) -> pd.Series | None:
    if not isinstance(parser, Parsed):
        return _first_times_ns(path, table)
    return pd.Series([parser.first_ns], dtype="int64") if parser.first_ns is not None else None


def reduce_dir(path: Path) -> tuple[dict, dict[str, pd.DataFrame]]:
    """One profiler directory as JSON metadata and plain tables (lazily parsed files parsed now): what
    :func:`assemble_parts` needs, without open files or callables."""
    discovery: list = []
    d = _rank_dir(Path(path), discovery)
    rank = d.rank if d.rank is not None else 0  # a lone directory without a rank is rank 0 (choose_among)
    part = read_rank_dir(d, rank, reduce=False)
    frames: dict[str, pd.DataFrame] = {}
    tables = []
    for name, dfs in part["tables"].items():
        if name == "_lazy":
            continue
        for df in dfs:
            if df is not None:
                frames[f"t{len(frames)}"] = df
                tables.append([name, f"t{len(frames) - 1}"])
    lazy = []
    for table, p, parser, r in part["tables"].get("_lazy", []):
        done = _parsed(table, p, parser, r)
        key = None
        if done.df is not None:
            key = f"t{len(frames)}"
            frames[key] = done.df
        lazy.append([table, str(p), key, [list(x) for x in done.problems], done.first_ns])
    meta = {"dir": {"path": str(d.path), "rank": d.rank, "rank_source": d.rank_source, "framework": d.framework,
                    "stamp": d.stamp, "info": d.info, "info_path": d.info_path},
            "discovery": [list(x) for x in discovery], "rank": rank,
            "meta_pre": [list(x) for x in part["meta_pre"]], "meta_doc": part["meta_doc"],
            "meta_post": [list(x) for x in part["meta_post"]], "files": [list(x) for x in part["files"]],
            "problems": [list(x) for x in part["problems"]], "host": part["host"], "tables": tables, "lazy": lazy}
    return meta, frames


def _pairs(items) -> list[tuple]:
    return [tuple(x) for x in items]


def assemble_parts(root: Path, items: list[tuple[dict, dict]]) -> Run:
    """The run from :func:`reduce_dir` results (in path order), as :func:`read` makes it from the directories."""
    problems: list = []
    dirs, by_path = [], {}
    for meta, frames in items:
        m = meta["dir"]
        problems.extend(_pairs(meta["discovery"]))
        d = RankDir(Path(m["path"]), m["rank"], m["rank_source"], m["framework"], m["stamp"], m["info"] or {},
                    m["info_path"])
        dirs.append(d)
        by_path[str(d.path)] = (meta, frames)
    chosen = choose_among(dirs, root, problems)
    parts = {}
    for rank, d in chosen.items():
        meta, frames = by_path[str(d.path)]
        tables: dict[str, list] = {}
        for name, key in meta["tables"]:
            tables.setdefault(name, []).append(frames[key])
        for table, p, key, probs, first in meta["lazy"]:
            tables.setdefault("_lazy", []).append(
                (table, Path(p), Parsed(frames[key] if key is not None else None, _pairs(probs), first), rank))
        parts[rank] = {"meta_pre": _pairs(meta["meta_pre"]),
                       "meta_doc": tuple(meta["meta_doc"]) if meta["meta_doc"] is not None else None,
                       "meta_post": _pairs(meta["meta_post"]), "tables": tables, "files": _pairs(meta["files"]),
                       "problems": _pairs(meta["problems"]), "host": meta["host"]}
    return assemble(root, chosen, parts, problems)
