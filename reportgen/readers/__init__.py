"""Readers: one module per input family, each turning a run directory into a :class:`~reportgen.model.Run`.

Which family a directory holds is decided here, once, by :func:`survey`: one bounded walk of the directory
(never following symbolic links, never failing on a directory it cannot list) that records, per family, the
data the family's reader would read:

* **MindSpore Insight**: folders holding ``step_trace_raw_<rank>_detail_time.csv`` or
  ``*_cluster_analyse_*.csv`` (one folder = one run), a legacy ``cluster_profiler/`` layout, or, when neither
  exists, the run folder itself holding other MindInsight files (``parallel_strategy_<rank>.json``, ...).
  ``profiler_info_<rank>.json`` inside an Ascend rank directory belongs to Ascend.
* **Ascend** (and **MindSpore CPU**, the same ``*_ascend_ms`` layout without device data): the rank
  directories (``*_ascend_pt`` / ``*_ascend_ms`` or holding ``ASCEND_PROFILER_OUTPUT/``). Everything inside them
  is Ascend's (their ``trace_view.json`` is not a PyTorch trace).
* **PyTorch Kineto**: ``*.json`` / ``*.json.gz`` files with ``traceEvents`` near the start, outside Ascend rank
  directories and not named like a MindInsight file (MindInsight's timeline JSON).

More than one family, or more than one MindInsight run, is refused with a one-line hint (``pick one:
--format ...``) unless ``--format`` names the family to read; the other data is then listed in the data
problems. Files named like a PyTorch trace that are not one (junk bytes, UTF-16, truncated gzip) are listed in
the data problems, and a directory with nothing but such files is refused naming them.
"""

from __future__ import annotations

import errno
import gzip
import os
import re
import stat as _stat
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ._files import kind_of, open_input
from ..errors import InputError
from ..limits import cap_text
from ..model import Run
from .. import engine, timeline, workers
from . import ascend, kineto, mindinsight, minddata, mindspore_cpu, windows
from .registry import FAMILIES, FORMATS, LABELS, REDUCIBLE, Family, get
from .registry import rel as _rel

#: directory levels searched below the run directory (the Ascend reader's depth; Kineto reads 6)
MAX_DEPTH = 10
#: directory entries looked at by :func:`survey`; a larger tree is searched only this far (and says so)
MAX_ENTRIES = 200_000
#: JSON files whose first 64 KiB :func:`survey` reads to tell a trace from other JSON
MAX_OPENED = 20_000
#: files not read that the data problems name one by one (the rest are counted)
MAX_LISTED = 50
#: MindInsight files that make their folder a run (the reader needs one of them, or a legacy layout)
_MI_RUN_KINDS = {"step_trace", "cluster_analyse"}
#: a file named like a PyTorch trace (``torch.profiler.tensorboard_trace_handler`` writes ``*.pt.trace.json[.gz]``)
_KINETO_NAME = re.compile(r"\.pt\.trace\.json(\.gz)?$", re.I)
#: other JSON whose name says trace / rank / worker: listed only when it is not even UTF-8 text
_TRACE_LIKE = re.compile(r"(?:^|[^a-z])(?:trace|rank|worker)[-_]?\d*(?:[^a-z]|$)", re.I)
_HEAD = 1 << 16
#: Ascend output named outside a rank directory: not read, but named when nothing else is found
_ASCEND_NAMES = re.compile(r"^(?:" + "|".join(re.escape(n) for n in ascend.TEXT_FILES) + r"|communication(?:_matrix)?"
                           r"\.json|trace_view\.json|analysis\.db|ascend_\w*profiler\w*\.db|msprof_\w*\.db)$")


@dataclass
class Survey:
    """What :func:`survey` found below ``root`` (paths absolute as walked)."""

    root: Path
    mi_runs: list[Path] = field(default_factory=list)       # MindInsight run folders (legacy: the layout's root)
    mi_flat: Path | None = None                             # the folder the MindInsight reader reads (flat layout)
    mi_top: Path | None = None                              # ... when it holds no run files (step trace, ...)
    mi_top_info_only: bool = False                          # ... and nothing but profiler_info_<rank>.json
    ascend_dirs: list[Path] = field(default_factory=list)   # Ascend / MindSpore rank directories
    cpu_only: bool = False                                  # every one of them is MindSpore CPU output
    traces: list[Path] = field(default_factory=list)        # PyTorch Kineto traces
    suspects: list[tuple[Path, str]] = field(default_factory=list)  # named like a trace, not one: (file, why)
    special: list[tuple[Path, str]] = field(default_factory=list)  # named like data, not a regular file: (path, what)
    unlisted: list[tuple[Path, str]] = field(default_factory=list)  # sub-directories that could not be listed
    strays: list[Path] = field(default_factory=list)        # Ascend output outside rank directories (first 10)
    dir_named_files: list[Path] = field(default_factory=list)  # directories named like a profiler file
    stopped: bool = False                                   # MAX_ENTRIES reached
    too_deep: list[Path] = field(default_factory=list)      # directories below MAX_DEPTH, not searched
    not_utf8: list[Path] = field(default_factory=list)      # names not UTF-8, matching no reader (first few)
    not_utf8_count: int = 0
    minddata: list[Path] = field(default_factory=list)      # MindSpore dataset pipeline profiles (readers/minddata.py)
    raw_prof: list[Path] = field(default_factory=list)      # raw CANN PROF_* directories (first 10; not readable)

    def families(self) -> dict[str, str]:
        """{family: where} for every family present (the registry's detection order); ``where`` is a short
        description of the data found."""
        first = {f.name: f.found(self, False) for f in FAMILIES}
        out = {}
        for f in FAMILIES:
            found = f.found(self, any(v for k, v in first.items() if k != f.name))
            if found:
                out[f.name] = _where(self.root, found, f.noun[len(found) != 1])
        return out

    def mi_runs_found(self, others: bool = False) -> list[Path]:
        """MindInsight run folders; a folder with nothing but ``profiler_info_<rank>.json`` counts only when
        no other family is present."""
        if self.mi_runs:
            return self.mi_runs
        if self.mi_top is not None and not (others and self.mi_top_info_only):
            return [self.mi_top]
        return []


def _where(root: Path, paths: list[Path], noun: str) -> str:
    """'4 traces in pt/' / 'run in mi/profiler' / '2 runs: a, b'."""
    n = len(paths)
    folders = sorted({p if p.is_dir() else p.parent for p in paths})
    common = Path(os.path.commonpath([str(f) for f in folders])) if folders else root
    count = f"{n} {noun}" if n != 1 or noun != "run" else noun
    if common == root:
        return count
    return f"{count} in {_rel(root, common)}"


def _common_sub(root: Path, paths: list[Path]) -> str | None:
    """The sub-directory of ``root`` holding all ``paths`` (None when that is ``root`` itself)."""
    folders = [p if p.is_dir() else p.parent for p in paths]
    common = Path(os.path.commonpath([str(f) for f in folders])) if folders else root
    return None if common == root else _rel(root, common)


#: a character Python's surrogateescape made of a byte of a file name that is not UTF-8
_UNDECODED = re.compile("[\udc80-\udcff]")


def _not_regular(p: Path) -> str | None:
    """What ``p`` is when it is not a regular file (a FIFO, a socket, a device; a link followed), else None."""
    try:
        mode = p.stat().st_mode
    except OSError:
        return None  # a dangling link or a file gone: its reader says so
    return None if _stat.S_ISREG(mode) else kind_of(mode)


def _head(path: Path) -> tuple[bytes | None, str | None]:
    """The first bytes of a file (decompressed for ``.gz``), or None and why it cannot be read."""
    try:
        if path.name.lower().endswith(".gz"):
            with open_input(path, "rb") as raw, gzip.open(raw, "rb") as fh:
                return fh.read(_HEAD), None
        with open_input(path, "rb") as fh:
            return fh.read(_HEAD), None
    except (gzip.BadGzipFile, EOFError, zlib.error):
        return None, "not a readable gzip file"
    except OSError as exc:
        return None, f"cannot be read ({exc.strerror or exc})"


def _not_trace_reason(head: bytes | None, why: str | None) -> str | None:
    """Why a file named like a PyTorch trace is not one, or None if its start looks like one."""
    if head is None:
        return why
    if b'"traceEvents"' in head or b'"schemaVersion"' in head or b'"deviceProperties"' in head:
        return None
    return _text_problem(head) or ('JSON text without "traceEvents" in its first 64 KiB'
                                   if head.lstrip()[:1] in (b"{", b"[") else "not JSON")


def _text_problem(head: bytes) -> str | None:
    """Why ``head`` is not the start of UTF-8 text (empty, UTF-16 / UTF-32, binary), or None."""
    if not head.strip():
        return "empty file"
    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or (len(head) > 3 and (head[1::2].count(0) > len(head) // 4
                                                                           or head[0::2].count(0) > len(head) // 4)):
        return "UTF-16 text (traces are read as UTF-8 JSON)"
    if b"\x00" in head:
        return "binary data, not JSON text"
    try:
        head.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 4:  # not just a character cut at the end of the head
            return "not UTF-8 text (binary or corrupted)"
    return None


def _is_prof_dir(d: Path, dirnames: list[str]) -> bool:
    return bool(ascend.PROF_DIR.search(d.name)) or ascend.OUTPUT_DIR in dirnames


def _named_like_data(p: Path) -> bool:
    """A name one of the readers would read as a data file (used for directories that carry such a name)."""
    return bool(mindinsight.classify(p) or _KINETO_NAME.search(p.name) or _ASCEND_NAMES.match(p.name))


def survey(root: str | Path) -> Survey:
    """Walk ``root`` (bounded: :data:`MAX_DEPTH` levels, :data:`MAX_ENTRIES` entries, symbolic links to
    directories not followed) and record each family's data (module docstring)."""
    root = Path(root)
    s = Survey(root)
    base = len(root.parts)
    seen = opened = 0

    def onerror(exc: OSError) -> None:
        where = Path(exc.filename) if getattr(exc, "filename", None) else root
        s.unlisted.append((where, exc.strerror or str(exc)))

    for dirpath, dirnames, filenames in os.walk(root, onerror=onerror):
        d = Path(dirpath)
        depth = len(d.parts) - base
        seen += len(dirnames) + len(filenames)
        if seen > MAX_ENTRIES:
            s.stopped = True
            break
        if _is_prof_dir(d, dirnames):
            s.ascend_dirs.append(d)
            dirnames[:] = []  # a rank directory does not nest another one; all inside is Ascend's
            s.minddata.extend(minddata.in_rank_dir(d))
            continue
        dirnames.sort()
        for name in dirnames:
            if len(s.raw_prof) < 10 and _RAW_PROF.match(name):
                s.raw_prof.append(d / name)
            if len(s.dir_named_files) < MAX_LISTED and _named_like_data(d / name):
                s.dir_named_files.append(d / name)
        if "cluster_profiler" in dirnames:  # the legacy MindInsight layout: its files are its own
            s.mi_runs.append(d)
            dirnames.remove("cluster_profiler")
        if depth >= MAX_DEPTH:
            if dirnames and len(s.too_deep) < MAX_LISTED:
                s.too_deep.append(d / dirnames[0])
            dirnames[:] = []
        strong = False
        for name in sorted(filenames):
            p = d / name
            data_kind = minddata.kind_of(name)
            found = None if data_kind else mindinsight.classify(p)
            like = bool(data_kind or found is not None or kineto.TRACE_NAME.search(name) or _ASCEND_NAMES.match(name))
            if not like and _UNDECODED.search(name):  # bytes that are not UTF-8 (os.walk's surrogateescape)
                s.not_utf8_count += 1
                if len(s.not_utf8) < 3:
                    s.not_utf8.append(p)
            if like:  # a FIFO named like a trace would block its reader forever (issue 29)
                what = _not_regular(p)
                if what:
                    if len(s.special) < MAX_LISTED:
                        s.special.append((p, what))
                    continue
            if data_kind:
                s.minddata.append(p)
                continue
            if found is not None:
                strong = strong or found.kind in _MI_RUN_KINDS
                continue
            if len(s.strays) < 10 and _ASCEND_NAMES.match(name):
                s.strays.append(p)
            if depth > kineto.MAX_DEPTH or not kineto.TRACE_NAME.search(name):
                continue
            opened += 1
            if opened > MAX_OPENED:
                s.stopped = True
                break
            head, why = _head(p)
            reason = _not_trace_reason(head, why)
            if reason is None:
                s.traces.append(p)
            elif _KINETO_NAME.search(name):
                s.suspects.append((p, reason))
            elif _TRACE_LIKE.search(name) and (head is None or _text_problem(head)):
                s.suspects.append((p, why if head is None else _text_problem(head)))
        if strong and d not in s.mi_runs:
            s.mi_runs.append(d)
        if s.stopped:
            break
    if s.ascend_dirs:
        s.cpu_only = all(mindspore_cpu.is_cpu_dir(d) for d in s.ascend_dirs)
    if root not in s.ascend_dirs:
        try:
            top = mindinsight.flat_folder(root)  # the reader's own rule (it follows a symlinked profiler*/)
        except OSError:
            top = None
        s.mi_flat = top
        if top is not None and top not in s.mi_runs:
            kinds = {f.kind for f in mindinsight.scan(top)}
            if kinds & _MI_RUN_KINDS:
                s.mi_runs.append(top)
            else:
                s.mi_top, s.mi_top_info_only = top, kinds <= {"profiler_info"}
    return s


# --------------------------------------------------------------------------- choosing


def choose(s: Survey, fmt: str | None = None) -> str:
    """The family to read (a key of :data:`LABELS`), or :class:`InputError` with what to do instead."""
    root = s.root
    found = s.families()
    if fmt is not None:
        if fmt not in LABELS:
            raise InputError(None, f"--format {fmt}: expected one of {', '.join(FORMATS)}")
        if fmt not in found:
            others = ", ".join(f"{LABELS[k]} ({v})" for k, v in found.items())
            raise InputError(root, f"--format {fmt}: no {LABELS[fmt]} output found here"
                                   + (f"; found {others}" if others else "; " + _nothing_hint(s)))
        get(fmt).check_choice(s)
        return fmt
    if len(found) > 1:
        names = [LABELS[k] for k in found]
        subs = [_common_sub(root, _paths_of(s, k)) for k in found]
        where = f" (or give the sub-directory: {', '.join(subs)})" if all(subs) and len(set(subs)) == len(subs) \
            else " (or give the sub-directory)"
        raise InputError(root, f"holds {_and(names)} data; pick one: "
                               + " | ".join(f"--format {k}" for k in found) + where)
    if not found:
        raise InputError(root, _nothing_hint(s))
    family = next(iter(found))
    get(family).check_choice(s)
    return family


def _paths_of(s: Survey, family: str) -> list[Path]:
    f = get(family)
    return f.found(s, True) or f.found(s, False)


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


#: a raw CANN profiling directory (msprof / the framework profiler before its export): PROF_<n>_<time>_<id>
_RAW_PROF = re.compile(r"^PROF_\d+_\d+_\w+$")


def _nothing_hint(s: Survey) -> str:
    if s.raw_prof and not s.suspects and not s.strays:
        names = ", ".join(_rel(s.root, p) for p in s.raw_prof[:3]) + (", …" if len(s.raw_prof) > 3 else "")
        return (f"raw CANN profiling data, not exported: {names}. reportgen reads the exported files, not the raw "
                "binaries: export them first (msprof --export=on --output=<PROF_ directory>, or the framework's "
                "offline analysis: torch_npu.profiler.profiler.analyse(<dir>) / MindSpore "
                "Profiler.offline_analyse(<dir>)), then give reportgen the result")
    parts = ["no profiler output recognised"]
    if s.suspects:
        named = "; ".join(f"{_rel(s.root, p)}: {why}" for p, why in s.suspects[:3])
        more = f"; and {len(s.suspects) - 3} more such files" if len(s.suspects) > 3 else ""
        parts = [f"no profiler output recognised: named like PyTorch traces but not read: {named}{more}"]
    elif s.strays:
        parts = ["no profiler output recognised: Ascend output outside a rank directory (<host>_<pid>_<time>_ascend_pt/"
                 f"ASCEND_PROFILER_OUTPUT/) is not read: {', '.join(_rel(s.root, p) for p in s.strays[:3])}"
                 + (", …" if len(s.strays) > 3 else "")]
    if s.special:
        parts.append("not regular files, not read: " + "; ".join(f"{_rel(s.root, p)} ({what})"
                                                                 for p, what in s.special[:3])
                     + (f"; and {len(s.special) - 3} more" if len(s.special) > 3 else ""))
    if s.unlisted:
        parts.append(f"{len(s.unlisted)} sub-director{'y' if len(s.unlisted) == 1 else 'ies'} could not be "
                     f"listed ({_rel(s.root, s.unlisted[0][0])}: {s.unlisted[0][1]})")
    if s.stopped:
        parts.append(f"searched the first {MAX_ENTRIES:,} entries ({MAX_OPENED:,} JSON files) only")
    if s.too_deep:
        parts.append(f"directories deeper than {MAX_DEPTH} levels are not searched ({_rel(s.root, s.too_deep[0])}"
                     + (f" and {len(s.too_deep) - 1} more" if len(s.too_deep) > 1 else "") + ")")
    if len(parts) == 1 and not s.suspects and not s.strays and not s.special and not s.too_deep:
        parts[0] += (" (MindSpore Insight: step_trace_raw_<rank>_detail_time.csv in the directory or its "
                     "profiler*/ sub-directory, or hccl.json + cluster_profiler/<host>/profiler/; "
                     "Ascend: *_ascend_pt / *_ascend_ms directories with ASCEND_PROFILER_OUTPUT/; "
                     "PyTorch: *.pt.trace.json[.gz] files)")
    return "; ".join(parts)


def _report_unread(run: Run, s: Survey, family: str) -> None:
    """Data problems for what was found and not read: other families (--format), older MindInsight runs,
    files named like traces that are not, sub-directories that could not be listed."""
    root = s.root
    for other, where in s.families().items():
        if other != family and other not in get(family).shares_data_with:
            run.problem(root, f"also holds {LABELS[other]} data ({where}); not read (--format {family})")
    get(family).unread(run, s)
    named = {str(p.path) for p in run.problems}
    listed = 0
    for p, why in s.suspects:
        if str(p) in named:  # the reader said something about it already
            continue
        listed += 1
        if listed <= MAX_LISTED:
            run.problem(p, f"not read: named like a PyTorch trace but {why}")
    if listed > MAX_LISTED:
        run.problem(root, f"{listed - MAX_LISTED} more files named like PyTorch traces but not traces; not read")
    for p, what in s.special:
        run.problem(p, f"{what}, not a regular file, named like profiler data; not read")
    for p in s.too_deep:
        run.problem(p, f"deeper than {MAX_DEPTH} directory levels below the run: not searched for profiler output")
    if s.not_utf8_count:
        shown = ", ".join(repr(_rel(root, p).encode("utf-8", "surrogateescape").decode("utf-8", "replace"))
                          for p in s.not_utf8)
        run.problem(root, f"{s.not_utf8_count} file name{'s are' if s.not_utf8_count > 1 else ' is'} not UTF-8 "
                          f"({shown}{', ...' if s.not_utf8_count > len(s.not_utf8) else ''}) and matches no profiler "
                          "file name: not read (a rank file whose name was damaged is read once renamed)")
    for p in s.dir_named_files:
        if str(p) not in named:
            run.problem(p, "is a directory named like a profiler data file, not a file; not read")
    for p, why in s.unlisted[:MAX_LISTED]:
        run.problem(p, f"cannot list directory ({why}); not searched for profiler output")
    if len(s.unlisted) > MAX_LISTED:
        run.problem(root, f"{len(s.unlisted) - MAX_LISTED} more sub-directories could not be listed")
    if s.stopped:
        run.problem(root, f"the directory tree has more than {MAX_ENTRIES:,} entries or {MAX_OPENED:,} JSON files; "
                          "only the first were searched for other profiler output")


#: tables a reader fills from file names and metadata alone (not measurements)
_LISTINGS = ("files", "groups")


def _refuse_if_empty(run: Run, root: Path) -> None:
    """A run whose every data file was skipped (junk, binary, wrong format) is refused naming them: a report of
    nothing would look like a run without problems."""
    for name, df in run.tables.items():
        if name not in _LISTINGS and df is not None and len(df):
            return
    for name in list(run.loaders):  # only when nothing was read eagerly: these are parsed now, not twice
        if name not in _LISTINGS and run.table(name) is not None:
            return
    if not run.problems:
        return
    first = run.problems[0]
    more = len(run.problems) - 1 + run.problems_unlisted
    raise InputError(root, f"no readable profiler data: {_rel(root, Path(first.path))}: {first.problem}"
                           + (f" (and {more} more data problem{'s' if more != 1 else ''})" if more else ""))


def _check_root(root: Path) -> None:
    try:
        st = os.stat(root)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InputError(root, "symbolic link loop; give the run directory itself") from None
        if exc.errno in (errno.ENOENT, errno.ENOTDIR) and not os.path.lexists(root):
            raise InputError(root, "no such file or directory") from None
        if exc.errno == errno.ENOENT:
            raise InputError(root, "dangling symbolic link (its target does not exist)") from None
        raise InputError(root, f"cannot open: {exc.strerror or exc}") from None
    import stat as _stat

    if not _stat.S_ISDIR(st.st_mode):
        raise InputError(root, "is not a directory; give the run directory holding every rank's profiler output")
    try:
        with os.scandir(root) as it:
            next(it, None)
    except OSError as exc:
        raise InputError(root, f"cannot list directory: {exc.strerror or exc}") from None


def read_run(path: str | Path, progress: Callable[[int, int], None] | None = None, jobs: int | None = None,
             comm_patterns: tuple[str, ...] = (), fmt: str | None = None, dask: str | None = None,
             window: str | None = None) -> Run:
    """Detect the input family of ``path`` (or read the one ``fmt`` names) and read it (the family's registered
    reader, :mod:`.registry`); ``.reduced`` files below it and ``dask`` (a scheduler address) go through
    :mod:`reportgen.engine`. ``window`` (``--window``) picks a profiling window (:mod:`.windows`). Raises
    :class:`InputError` when unusable or ambiguous."""
    token = windows.WANTED.set(window)
    try:
        return _read_run(path, progress, jobs, comm_patterns, fmt, dask, window)
    finally:
        windows.WANTED.reset(token)


def _read_run(path, progress, jobs, comm_patterns, fmt, dask, window) -> Run:
    root = Path(path)
    _check_root(root)
    reduced = engine.find_reduced(root)
    s = survey(root)
    if reduced:
        family = get(engine.family_of_all(reduced, REDUCIBLE, fmt))
    else:
        family = get(choose(s, fmt))
    if reduced or dask:
        if not family.reducible:
            raise InputError(root, f"--dask: {family.label} output is read on this machine only (the engine "
                                   f"runs {', '.join(f.label for f in REDUCIBLE.values())})")
        run = engine.read(root, family, REDUCIBLE, reduced=reduced, jobs=jobs, dask=dask,
                          comm_patterns=comm_patterns, progress=progress)
    else:
        run = family.read(root, progress=progress, jobs=jobs, comm_patterns=comm_patterns)
    _refuse_if_empty(run, root)
    if window is not None and not run.windows:
        run.problem("--window", f"--window {cap_text(str(window), 80)}: this run has one profiling window per rank "
                                f"({family.label}); the option was ignored")
    if not reduced:
        family.after_read(run, s)  # e.g. MindSpore's dataset pipeline
    _report_unread(run, s, family.name)
    timeline.attach(run)  # device_timeline (lazy) and the step breakdown measured on it
    workers.release_free_memory()  # what reading freed (per-rank pieces, parsed text) leaves the heap
    return run


def write_reduced(output: str, sources: list[str], *, fmt: str | None = None, jobs: int | None = None,
                  comm_patterns: tuple[str, ...] = (), progress=None, ranks: str | None = None) -> tuple[int, int]:
    """``reportgen reduce``: reduce every unit under ``sources`` (rank directories or files; a family reduced by
    directory: the run directory, its ranks in ``ranks`` when given) into ``output`` (:mod:`reportgen.engine`).
    Returns (rank parts, bytes written)."""
    wanted = engine.parse_ranks(ranks) if ranks is not None else None
    by_dir = [f for f in REDUCIBLE.values() if f.directory_ranks]
    family, found = None, []
    for src in sources:
        root = Path(src)
        if root.is_file():
            fam = get(fmt) if fmt else next(f for f in REDUCIBLE.values() if f.file_units)
            if fam.directory_ranks:
                raise InputError(root, f"{fam.label} output is reduced by directory: give the directory "
                                       "holding the ranks' files (--ranks for some of them)")
            us = [str(root)]
        else:
            _check_root(root)
            fam = get(choose(survey(root), fmt))
            if not fam.reducible:
                raise InputError(root, f"{fam.name} output cannot be reduced yet (reportgen reduce reads "
                                       f"{', '.join(REDUCIBLE)})")
            us = fam.units(root, wanted if fam.directory_ranks else None)
            if fam.directory_ranks and not any(fam.is_rank_unit(u) for u in us):
                raise InputError(root, f"no files of the ranks {cap_text(ranks, 80)}" if ranks else "no rank files")
        if wanted is not None and not fam.directory_ranks:
            raise InputError(root, f"--ranks picks ranks of a {' or '.join(f.label for f in by_dir)} directory; "
                                   "give the other families' rank directories or trace files")
        if family is not None and fam is not family:
            raise InputError(root, f"holds {fam.name} output, the other inputs {family.name}")
        family = fam
        found.extend(us)
    if not found:
        raise InputError(sources[0], "nothing to reduce")
    parts = engine.run_units(engine.jobs_of(family, found, comm_patterns), jobs=jobs, progress=progress)
    return sum(family.is_rank_unit(u) for u in found), engine.write_parts(output, parts, family.name)
