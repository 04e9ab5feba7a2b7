"""Small file helpers shared by the readers: whole-file text, JSON and CSV with one wording for what is wrong."""

from __future__ import annotations

import csv
import errno
import io
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..limits import cap_text, json_int

#: exceptions a parser may raise on content it did not expect (wrong JSON types, odd cells); a reader's
#: per-file guard turns them into a data problem naming the file instead of an internal error
CONTENT_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError, OverflowError, RecursionError,
                  csv.Error)


class NotRegularFile(OSError):
    """A path named like a profiler file that is a FIFO, a socket or a device: reading it would wait for a writer
    forever or never end (issue 29). An OSError, so every reader's ``except OSError`` names the file and skips it."""


def kind_of(mode: int) -> str:
    """What a non-regular file is, for people."""
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def open_input(path, mode: str = "rb", **kwargs):
    """Open a file of the run for reading, a regular file only: every reader opens its files here. The file is opened
    without blocking (a FIFO with no writer would wait forever) and refused, with :class:`NotRegularFile`, unless
    ``fstat`` says it is a regular file; a symbolic link to a regular file is followed."""
    if any(c in mode for c in "wax+"):
        raise ValueError("open_input opens files for reading only")
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = kind_of(st.st_mode)
            raise NotRegularFile(errno.EINVAL, f"{what}, not a regular file", str(path))
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return open(fd, mode, closefd=True, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def read_bytes(path) -> bytes:
    """A whole regular file's bytes (:func:`open_input`)."""
    with open_input(path, "rb") as fh:
        return fh.read()


def read_text(path: Path) -> str:
    """A whole file as text (UTF-8, BOM allowed); unreadable or binary files raise :class:`InputError`."""
    try:
        data = read_bytes(path)
    except OSError as exc:
        raise InputError(path, f"cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
            raise InputError(path, "UTF-16 text, not UTF-8 (re-saved by an editor?)") from None
        raise InputError(path, "not UTF-8 text (binary or corrupted file?)") from None


def json_problem(exc: Exception, text: str) -> str:
    """What is wrong with a JSON text that did not decode, with where it broke (and whether the text ends there)."""
    if isinstance(exc, RecursionError):
        return "not readable JSON: nested too deeply"
    if isinstance(exc, json.JSONDecodeError):
        # the decoder stops at the end of the text, or on the last characters of a number cut there ("31.", "1e")
        ends = (exc.pos >= len(text.rstrip()) - 2 and not exc.msg.startswith("Extra data")) or \
            exc.msg.startswith("Unterminated string")
        cut = "; the file ends there: cut short?" if ends and text.strip() else ""
        what = "empty file" if not text.strip() else f"{exc.msg}: line {exc.lineno} column {exc.colno}{cut}"
        return f"not valid JSON ({what})"
    return f"not valid JSON ({exc})"


class DuplicateKey(ValueError):
    """One JSON object gives a key twice."""


def unique_keys(pairs: list) -> dict:
    """``object_pairs_hook`` that refuses an object giving a key twice: which value is meant is unknown (a JSON
    parser keeps the last, a streaming reader may keep both; issue 29 #2). As fast as the default (measured: 80 MB
    of communication.json-shaped JSON, 3.9 vs 4.0 CPU-s)."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set = set()
        key = next(k for k, _ in pairs if k in seen or seen.add(k))
        raise DuplicateKey(f"the key {cap_text(repr(key), 80)} appears twice in one object: which value is meant is "
                           "unknown (a JSON parser keeps the last)")
    return d


def loads(text: str, path: Path, exact: bool = False):
    """Whole-file JSON ``text`` of ``path`` decoded, as every whole-file JSON reader decodes it: integers bounded
    (:func:`~reportgen.limits.json_int`), ``exact``: float literals as their text (times parsed with
    timebase.to_ns), a key given twice in one object refused; :class:`InputError` saying what broke and where.
    ``NaN`` / ``Infinity`` literals decode as floats: the value checks (:mod:`reportgen.limits`) refuse them."""
    try:
        return json.loads(text, parse_int=json_int, parse_float=str if exact else None, object_pairs_hook=unique_keys)
    except DuplicateKey as exc:
        raise InputError(path, f"not read: {exc}") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(path, json_problem(exc, text)) from None


def read_json(path: Path, exact: bool = False):
    """A whole JSON file decoded (:func:`loads`); unreadable or non-UTF-8 text raises :class:`InputError` too."""
    return loads(read_text(path), path, exact)


def _csv_problem(exc: csv.Error) -> str:
    if "field larger than field limit" in str(exc):
        return f"a cell longer than {csv.field_size_limit() // 1024} KiB (not a value of this table)"
    return f"not readable as CSV ({exc})"


@dataclass
class CsvTable:
    header: list[str]  # stripped names
    rows: list[tuple[int, list[str]]]  # (line number of the row's start, cells); blank rows left out
    complete: bool  # the file ends with a line break (every writer of these files ends each row with one)

    def duplicates(self) -> list[str]:
        """Header names given more than once (which column holds the value is then unknown)."""
        seen, dup = set(), []
        for h in self.header:
            if h and h in seen and h not in dup:
                dup.append(h)
            seen.add(h)
        return dup

    def cut_at_end(self, line: int, cells: list[str]) -> bool:
        """True when ``cells`` (on ``line``) is the last row, the file does not end with a line break and the
        row is shorter than the header: the file was cut in this row. A full-length last row without a line
        break may still end in a cut cell; parsers that can check a row's cells against each other do."""
        return not self.complete and bool(self.rows) and self.rows[-1][0] == line and len(cells) < len(self.header)

    def shape_problem(self, line: int, cells: list[str]) -> tuple[str, str] | None:
        """``(column, reason)`` for :meth:`reportgen.limits.Rejects.add` when a row has not the header's number of
        fields (a last line cut short is told apart), else None."""
        width = len(self.header)
        if len(cells) == width:
            return None
        if self.cut_at_end(line, cells):
            return "last line", "truncated (the file ends inside it, without a line break)"
        return "row", f"{'truncated' if len(cells) < width else 'too long'} (not the {width} fields of the header)"


def read_csv(path: Path) -> CsvTable:
    """A CSV file as header and rows. Unreadable, empty or non-CSV content (a cell over the csv module's field
    limit, say) raises :class:`InputError` naming the line."""
    text = read_text(path)
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, list[str]]] = []
    header = None
    start = 1
    try:
        for cells in reader:
            if header is None:
                header = [h.strip() for h in cells]
            elif any(c.strip() for c in cells):
                rows.append((start, cells))
            start = reader.line_num + 1
    except csv.Error as exc:
        raise InputError(path, f"line {start}: {_csv_problem(exc)}") from None
    if header is None or not any(header):
        raise InputError(path, "empty file" if not text.strip() else "no header line")
    complete = text.endswith(("\n", "\r"))
    if not rows and not complete:
        raise InputError(path, "the file ends inside its header line (cut short)")
    return CsvTable(header, rows, complete)
