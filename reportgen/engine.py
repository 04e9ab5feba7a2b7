"""The per-rank engine: units of work, their reduction to small tables, and the run assembled from them.

A run is read in three steps, whatever runs them:

1. **units** - the files that belong to one rank: a Kineto trace file; an Ascend rank directory
   (``*_ascend_pt`` / ``*_ascend_ms``); a MindInsight rank's files (one folder holds every rank's files, so a
   directory is split by rank after ``mindinsight.discover``; its layout, the problems found and the legacy
   rank table's text are one more, cluster-wide part).
2. **reduce(unit) -> Part** - the part linear in data (decoding, parsing, per-rank checks): plain tables with
   exact int-ns times, the data problems found, and JSON metadata; no open file, no callable.
3. **assemble(root, parts) -> Run** - what needs every rank (rank choice, world size, groups, the run origin,
   cross-rank tables): the reader's own code (``kineto.assemble``, ``ascend.assemble``, ``mindinsight.assemble``).

Step 2 runs in-process, in the ``--jobs`` process pool (:mod:`reportgen.workers`), on a Dask distributed cluster
(``--dask SCHEDULER``; the workers open the paths as given, so they must see the files at the same paths), or
on each node by ``reportgen reduce`` which writes the parts to a ``.reduced`` file. The readers' own ``read()``
is the same two functions in one process, so every path gives the same run (tests/test_distributed.py).

The ``.reduced`` format (:data:`FORMAT`, :data:`VERSION`) is read from machines that are not trusted, so it holds
no pickle and nothing executable: a zip archive with ``manifest.json`` (format name and version, reportgen
version, family, and per part its source path, rank, JSON metadata, data problems and table schemas) and one
entry per column: the raw little-endian bytes of a numeric column (dtypes from :data:`NUMERIC`), or the int32
codes of a text column with its distinct values in a JSON entry. Loading (:func:`load`) checks everything
against the manifest and the bounds below; anything else is one line naming the file (exit 2).
"""

from __future__ import annotations

import io
import json
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from . import __version__
from .errors import InputError
from .limits import MAX_NAME_CHARS, cap_text

FORMAT = "reportgen-reduced"
VERSION = 1
SUFFIX = ".reduced"
#: families that can be reduced and assembled from parts (not MindSpore's CPU output)
FAMILIES = ("kineto", "ascend", "mindinsight")
#: bounds of one .reduced file: its entries, their total (uncompressed) size, the manifest, rows of one table
MAX_ENTRIES = 200_000
MAX_TOTAL_BYTES = 1 << 30
MAX_MANIFEST_BYTES = 64 << 20
MAX_ROWS = 1 << 27
#: one text value longer than this is cut on loading (readers cut names at MAX_NAME_CHARS, paths at 1024)
MAX_TEXT = 4 * MAX_NAME_CHARS
#: numeric dtypes a column may have (stored little-endian)
NUMERIC = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")
#: .reduced files looked for below a run directory (levels) and at most (files)
MAX_DEPTH = 3
MAX_FILES = 1 << 16
#: seconds to wait for the Dask scheduler
CONNECT_TIMEOUT_S = 20


@dataclass
class Part:
    """One unit reduced: ``tables`` of plain columns, ``meta`` JSON values, ``problems`` (path, text) pairs."""

    family: str
    source: str
    meta: dict = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    problems: list = field(default_factory=list)


# --------------------------------------------------------------------------- families


def units(family: str, root: Path, ranks: set[int] | None = None) -> list:
    """The units of ``root`` (paths as strings, in the reader's order; MindInsight: the cluster part, then one
    unit per rank, of ``ranks`` when given)."""
    if family == "kineto":
        from .readers.kineto import find_traces

        return [str(p) for p in find_traces(Path(root))]
    if family == "ascend":
        from .readers.ascend import _walk_prof_dirs

        return [str(p) for p in _walk_prof_dirs(Path(root))]
    if family == "mindinsight":
        from .readers import mindinsight

        if not mindinsight.detect(Path(root)):  # a directory of .reduced files only
            return []
        d = mindinsight.discover(Path(root))
        return [("cluster", str(root), *mindinsight.cluster_part(d))] + [
            ("rank", *u) for u in mindinsight.rank_units(d, ranks)]
    raise InputError(root, f"{family} output cannot be reduced yet (reportgen reduce: {', '.join(FAMILIES)})")


def reduce(job: tuple) -> Part:
    """``(family, unit path, comm_patterns)`` -> :class:`Part` (runs on a worker; never raises for bad input)."""
    family, unit, comm_patterns = job
    if family == "kineto":
        from .readers.kineto import _decode

        path, decoded, problems = _decode((unit, tuple(comm_patterns)))
        if decoded is None:
            return Part(family, path, {"decoded": False}, {}, problems)
        return Part(family, path, {"decoded": True, "meta": decoded.meta}, dict(decoded.tables), problems)
    if family == "ascend":
        from .readers.ascend import reduce_dir

        meta, tables = reduce_dir(Path(unit))
        return Part(family, unit, meta, tables, [])
    if family == "mindinsight":
        if unit[0] == "cluster":  # found by units(): carried as it is
            return Part(family, *unit[1:])
        from .readers.mindinsight import rank_part

        files, host, device = unit[1:]
        return Part(family, str(files[0].path), *rank_part(files, host, device))
    raise InputError(_name(unit), f"{family} output cannot be reduced yet")


def _name(unit) -> str:
    """A unit as a path for messages (a MindInsight rank unit: its first file)."""
    if isinstance(unit, tuple):
        return unit[1] if unit[0] == "cluster" else str(unit[1][0].path)
    return unit


def assemble(family: str, root: Path, parts: list[Part]):
    """The run from every unit's part (the reader's own assembly)."""
    if family == "kineto":
        from .readers.kineto import assemble as kineto_assemble
        from .readers.kineto_decode import DecodedTrace

        results = [(p.source, DecodedTrace(p.meta.get("meta") or {}, p.tables) if p.meta.get("decoded") else None,
                    [tuple(x) for x in p.problems]) for p in parts]
        return kineto_assemble(Path(root), [Path(p.source) for p in parts], results)
    if family == "mindinsight":
        from .readers.mindinsight import assemble as mi_assemble

        return mi_assemble(Path(root), [(p.source, p.meta, p.tables, p.problems) for p in parts])
    from .readers.ascend import assemble_parts

    return assemble_parts(Path(root), [(p.meta, p.tables) for p in parts])


# --------------------------------------------------------------------------- running the units


def _dask_client(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise InputError(None, f"--dask {address}: dask is not installed; install reportgen[dask] "
                               "(dask and distributed)") from None
    try:
        return Client(address, timeout=f"{CONNECT_TIMEOUT_S}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise InputError(None, f"--dask {address}: cannot connect to the Dask scheduler ({exc})") from None


def run_units(jobs_list: list[tuple], *, jobs: int | None = None, dask: str | None = None, progress=None) -> list:
    """:func:`reduce` of every job, in order: on the Dask cluster at ``dask``, else in ``jobs`` processes, else
    here."""
    total = len(jobs_list)
    if dask:
        client = _dask_client(dask)
        try:
            futures = client.map(reduce, jobs_list, pure=False)
            out = []
            for n, (job, fut) in enumerate(zip(jobs_list, futures), start=1):
                try:
                    out.append(fut.result())
                except (InputError, KeyboardInterrupt):
                    raise
                except Exception as exc:  # noqa: BLE001 - a worker without reportgen, a lost worker...
                    raise InputError(_name(job[1]), f"--dask {dask}: the task failed on the cluster ({type(exc).__name__}: "
                                             f"{cap_text(str(exc), 200)}; is reportgen[dask] installed on every "
                                             "worker?)") from None
                if progress:
                    progress(n, total)
            return out
        finally:
            client.close()
    jobs = jobs or os.cpu_count() or 1
    out = []
    if jobs > 1 and total > 1:
        from . import workers

        with workers.pool(min(jobs, total)) as pool:
            for n, part in enumerate(pool.map(reduce, jobs_list), start=1):
                out.append(part)
                if progress:
                    progress(n, total)
        return out
    for n, job in enumerate(jobs_list, start=1):
        out.append(reduce(job))
        if progress:
            progress(n, total)
    return out


def read(root: Path, family: str, *, reduced: list[Path] = (), jobs: int | None = None, dask: str | None = None,
         comm_patterns: tuple[str, ...] = (), progress=None):
    """The run of ``root``: its raw units reduced (:func:`run_units`) and the parts of the ``reduced`` files."""
    root = Path(root)
    loaded = [part for path in reduced for part in load(path, family)]
    raw = units(family, root)
    parts = run_units([(family, u, tuple(comm_patterns)) for u in raw], jobs=jobs, dask=dask, progress=progress)
    parts = sorted(loaded + list(parts), key=lambda p: Path(p.source))
    if not loaded:
        return assemble(family, root, parts)
    try:
        return assemble(family, root, parts)
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:  # a .reduced file's tables
        raise InputError(reduced[0] if len(reduced) == 1 else root,
                         f"the .reduced data is not what this reportgen {__version__} reads ({type(exc).__name__}: "
                         f"{cap_text(str(exc), 120)}); reduce the ranks again with it") from None


def find_reduced(root: Path) -> list[Path]:
    """The ``.reduced`` files below ``root`` (bounded: :data:`MAX_DEPTH` levels, :data:`MAX_FILES` files)."""
    found = []
    base = len(Path(root).parts)
    for dirpath, dirnames, filenames in os.walk(root):
        if len(Path(dirpath).parts) - base >= MAX_DEPTH:
            dirnames[:] = []
        dirnames.sort()
        found.extend(Path(dirpath) / n for n in sorted(filenames) if n.endswith(SUFFIX))
        if len(found) > MAX_FILES:
            raise InputError(root, f"more than {MAX_FILES} {SUFFIX} files")
    return found


def family_of_all(paths: list[Path], fmt: str | None = None) -> str:
    """The one family the .reduced files hold (their manifests checked); InputError when they differ."""
    seen: dict[str, Path] = {}
    for path in paths:
        with _open(path) as (_zf, manifest):
            seen.setdefault(manifest["family"], path)
    if len(seen) > 1:
        (a, pa), (b, pb) = list(seen.items())[:2]
        raise InputError(pb, f"holds {b} output, {pa.name} holds {a}: one run is one family")
    family = next(iter(seen))
    if fmt is not None and fmt != family:
        raise InputError(seen[family], f"--format {fmt}: this .reduced file holds {family} output")
    return family


# --------------------------------------------------------------------------- the .reduced file


def _encode_column(s: pd.Series, key: str, entries: dict) -> dict:
    dtype = s.dtype
    if str(dtype) in NUMERIC:
        entries[key] = np.ascontiguousarray(s.to_numpy()).astype(str(dtype)).astype(
            np.dtype(str(dtype)).newbyteorder("<")).tobytes()
        return {"dtype": str(dtype), "entry": key}
    if str(dtype) in ("Int64", "boolean"):
        mask = s.isna().to_numpy()
        base = "int64" if str(dtype) == "Int64" else "bool"
        entries[key] = s.fillna(0).to_numpy(dtype=base).astype(np.dtype(base).newbyteorder("<")).tobytes()
        entries[key + ".mask"] = mask.tobytes()
        return {"dtype": str(dtype), "entry": key}
    values = s.tolist()
    if all(v is None or isinstance(v, str) or (isinstance(v, float) and v != v) for v in values):
        codes, uniques = pd.factorize(s, use_na_sentinel=True)
        entries[key] = codes.astype("<i4").tobytes()
        entries[key + ".json"] = json.dumps(list(uniques), ensure_ascii=False).encode()
        na = "nan" if any(isinstance(v, float) for v in values) or str(dtype) == "str" else "none"
        return {"dtype": "str" if str(dtype) == "str" else "object-str", "entry": key, "na": na}
    entries[key + ".json"] = json.dumps(values, ensure_ascii=False, allow_nan=True).encode()
    return {"dtype": "object-json", "entry": key}


def dumps(parts: list[Part], family: str) -> bytes:
    """The ``.reduced`` bytes of ``parts`` (see the module doc)."""
    entries: dict[str, bytes] = {}
    out_parts = []
    for i, part in enumerate(parts):
        tables = {}
        for name, df in part.tables.items():
            if not isinstance(df.index, pd.RangeIndex) or df.index.start != 0 or df.index.step != 1:
                df = df.reset_index(drop=True)
            cols = []
            for j, col in enumerate(df.columns):
                spec = _encode_column(df[col], f"p{i}/t{len(tables)}/c{j}", entries)
                cols.append({"name": str(col), **spec})
            tables[name] = {"rows": len(df), "columns": cols}
        out_parts.append({"source": part.source, "meta": part.meta, "problems": [list(p) for p in part.problems],
                          "tables": tables})
    manifest = {"format": FORMAT, "version": VERSION, "reportgen": __version__, "family": family,
                "parts": out_parts}
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zf:
        zf.writestr("manifest.json", json.dumps(manifest, ensure_ascii=False, allow_nan=True))
        for key, data in entries.items():
            zf.writestr(key, data)
    return buf.getvalue()


class _Bad(Exception):
    pass


class _open:
    """Context manager: the checked zip and its checked manifest (raises InputError naming the file)."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def __enter__(self):
        try:
            self.zf = zipfile.ZipFile(self.path)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, ValueError, NotImplementedError):
            raise InputError(self.path, "not a reportgen .reduced file (not a readable zip archive)") from None
        except OSError as exc:
            raise InputError(self.path, f"cannot read: {exc.strerror or exc}") from None
        try:
            infos = self.zf.infolist()
            if len(infos) > MAX_ENTRIES:
                raise _Bad(f"{len(infos)} entries (at most {MAX_ENTRIES})")
            total = sum(i.file_size for i in infos)
            if total > MAX_TOTAL_BYTES:
                raise _Bad(f"claims {total:,} bytes uncompressed (at most {MAX_TOTAL_BYTES:,})")
            self.sizes = {i.filename: i.file_size for i in infos}
            raw = self.entry("manifest.json", MAX_MANIFEST_BYTES)
            try:
                manifest = json.loads(raw)
            except (ValueError, RecursionError):
                raise _Bad("manifest.json is not JSON") from None
            if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
                raise _Bad(f"manifest.json does not name the format {FORMAT!r}")
            if manifest.get("version") != VERSION:
                raise _Bad(f"format version {cap_text(repr(manifest.get('version')), 20)}; this reportgen "
                           f"{__version__} reads version {VERSION} (reduce the rank again with it)")
            if manifest.get("family") not in FAMILIES:
                raise _Bad(f"family {cap_text(repr(manifest.get('family')), 40)} is not one of {', '.join(FAMILIES)}")
            if not isinstance(manifest.get("parts"), list):
                raise _Bad("manifest.json has no list of parts")
        except _Bad as exc:
            self.zf.close()
            raise InputError(self.path, f"broken .reduced file: {exc}") from None
        except InputError:
            self.zf.close()
            raise
        return self.zf, manifest

    def entry(self, name: str, limit: int = MAX_TOTAL_BYTES) -> bytes:
        if not isinstance(name, str) or name not in self.sizes:
            raise _Bad(f"entry {cap_text(repr(name), 80)} is missing")
        if self.sizes[name] > limit:
            raise _Bad(f"entry {cap_text(name, 80)} is larger than {limit:,} bytes")
        try:
            return self.zf.read(name)
        except (zipfile.BadZipFile, EOFError, OSError, ValueError, NotImplementedError, RuntimeError) as exc:
            raise _Bad(f"entry {cap_text(name, 80)} cannot be read ({cap_text(str(exc), 80)})") from None

    def __exit__(self, *exc):
        self.zf.close()


def _text(v) -> str | None:
    if v is None:
        return None
    if not isinstance(v, str):
        raise _Bad("a text column holds a value that is not text")
    return cap_text(v, MAX_TEXT)


def _decode_column(opener: _open, spec, rows: int) -> pd.Series | np.ndarray | list:
    if not isinstance(spec, dict):
        raise _Bad("a column is not described by an object")
    dtype, key = spec.get("dtype"), spec.get("entry")
    if dtype in NUMERIC or dtype in ("Int64", "boolean"):
        base = "int64" if dtype == "Int64" else "bool" if dtype == "boolean" else dtype
        dt = np.dtype(base).newbyteorder("<")
        data = opener.entry(key)
        if len(data) != rows * dt.itemsize:
            raise _Bad(f"entry {cap_text(str(key), 80)}: {len(data)} bytes for {rows} {dtype} values")
        arr = np.frombuffer(data, dtype=dt).astype(base)
        if dtype in NUMERIC:
            return arr
        mask = opener.entry(key + ".mask")
        if len(mask) != rows:
            raise _Bad(f"entry {cap_text(str(key), 80)}.mask: {len(mask)} bytes for {rows} values")
        return pd.array(arr, dtype=dtype).copy() if not rows else pd.arrays.IntegerArray(
            arr, np.frombuffer(mask, dtype=bool).copy()) if dtype == "Int64" else pd.arrays.BooleanArray(
            arr, np.frombuffer(mask, dtype=bool).copy())
    if dtype in ("str", "object-str"):
        codes = np.frombuffer(opener.entry(key), dtype="<i4")
        if len(codes) != rows:
            raise _Bad(f"entry {cap_text(str(key), 80)}: {len(codes)} codes for {rows} rows")
        values = _json_entry(opener, key + ".json")
        if not isinstance(values, list):
            raise _Bad(f"entry {cap_text(str(key), 80)}.json is not a list")
        if len(codes) and (codes.min() < -1 or codes.max() >= len(values)):
            raise _Bad(f"entry {cap_text(str(key), 80)}: a code outside its {len(values)} values")
        na = None if spec.get("na") == "none" else np.nan
        table = np.array([_text(v) for v in values] + [na], dtype=object)
        out = table[codes]  # code -1 picks the missing value
        # object columns stay object (pandas would infer text and turn None into NaN)
        return pd.array(out, dtype="str") if dtype == "str" else pd.Series(out, dtype=object)
    if dtype == "object-json":
        values = _json_entry(opener, key + ".json")
        if not isinstance(values, list) or len(values) != rows:
            raise _Bad(f"entry {cap_text(str(key), 80)}.json is not a list of {rows} values")
        out = np.empty(rows, dtype=object)
        out[:] = [cap_text(v, MAX_TEXT) if isinstance(v, str) else v for v in values]
        return pd.Series(out, dtype=object)
    raise _Bad(f"column dtype {cap_text(repr(dtype), 40)} is not one of {', '.join(NUMERIC)}, Int64, boolean, str")


def _json_entry(opener: _open, key: str):
    try:
        return json.loads(opener.entry(key))
    except (ValueError, RecursionError):
        raise _Bad(f"entry {cap_text(key, 80)} is not JSON") from None


def load(path: Path, family: str | None = None) -> list[Part]:
    """The parts of one ``.reduced`` file, every entry checked (module doc); InputError naming the file."""
    path = Path(path)
    opener = _open(path)
    with opener as (_zf, manifest):
        try:
            if family is not None and manifest["family"] != family:
                raise _Bad(f"holds {manifest['family']} output, the run is {family}")
            parts = []
            for p in manifest["parts"]:
                if not isinstance(p, dict) or not isinstance(p.get("source"), str) \
                        or not isinstance(p.get("meta"), dict) or not isinstance(p.get("problems"), list) \
                        or not isinstance(p.get("tables"), dict):
                    raise _Bad("a part lacks its source, meta, problems or tables")
                problems = []
                for x in p["problems"]:
                    if not (isinstance(x, list) and len(x) == 2 and all(isinstance(y, str) for y in x)):
                        raise _Bad("a data problem is not a (path, text) pair")
                    problems.append((cap_text(x[0], 1024), cap_text(x[1], 2048)))
                tables = {}
                for name, t in p["tables"].items():
                    rows = t.get("rows") if isinstance(t, dict) else None
                    if not isinstance(rows, int) or isinstance(rows, bool) or not 0 <= rows <= MAX_ROWS:
                        raise _Bad(f"table {cap_text(name, 80)}: row count {cap_text(repr(rows), 40)} is not in "
                                   f"0..{MAX_ROWS}")
                    cols = t.get("columns")
                    if not isinstance(cols, list):
                        raise _Bad(f"table {cap_text(name, 80)} has no column list")
                    data = {}
                    for spec in cols:
                        col = spec.get("name") if isinstance(spec, dict) else None
                        if not isinstance(col, str) or col in data:
                            raise _Bad(f"table {cap_text(name, 80)}: a column without a name, or named twice")
                        data[col] = _decode_column(opener, spec, rows)
                    tables[name] = pd.DataFrame(data, index=pd.RangeIndex(rows)) if data \
                        else pd.DataFrame(index=pd.RangeIndex(rows))
                if manifest["family"] == "mindinsight":
                    from .readers.mindinsight import check_part

                    try:
                        check_part(p["meta"], tables)
                    except ValueError as exc:
                        raise _Bad(str(exc)) from None
                parts.append(Part(manifest["family"], cap_text(p["source"], 1024), p["meta"], tables, problems))
        except _Bad as exc:
            raise InputError(path, f"broken .reduced file: {exc}") from None
        except (TypeError, ValueError, KeyError, AttributeError, MemoryError, OverflowError) as exc:
            raise InputError(path, f"broken .reduced file: {type(exc).__name__}: {cap_text(str(exc), 120)}") from None
    return parts


def parse_ranks(text: str) -> set[int]:
    """``--ranks 0-15,32``: the rank ids it names (InputError when it is not such a list)."""
    from .limits import MAX_RANKS

    out: set[int] = set()
    for item in text.split(","):
        a, sep, b = item.strip().partition("-")
        if not (a.isascii() and a.isdigit() and (not sep or b.isascii() and b.isdigit())) \
                or int(b or a) >= MAX_RANKS or int(b or a) < int(a):
            raise InputError(None, f"--ranks {cap_text(text, 80)}: expected rank ids and ranges below {MAX_RANKS}, "
                                   "e.g. 0-15,32")
        out.update(range(int(a), int(b or a) + 1))
    return out


def write(output: str, sources: list[str], *, fmt: str | None = None, jobs: int | None = None,
          comm_patterns: tuple[str, ...] = (), progress=None, ranks: str | None = None) -> tuple[int, int]:
    """``reportgen reduce``: reduce every unit under ``sources`` (rank directories or files; MindInsight: the
    run directory, its ranks in ``ranks`` when given) into ``output``. Returns (parts, bytes written)."""
    from .readers import choose, survey

    wanted = parse_ranks(ranks) if ranks is not None else None
    family, found = None, []
    for src in sources:
        root = Path(src)
        if root.is_file():
            fam = fmt or "kineto"
            if fam == "mindinsight":
                raise InputError(root, "MindSpore Insight output is reduced by directory: give the directory "
                                       "holding the ranks' files (--ranks for some of them)")
            us = [str(root)]
        else:
            from .readers import _check_root

            _check_root(root)
            fam = choose(survey(root), fmt)
            if fam not in FAMILIES:
                raise InputError(root, f"{fam} output cannot be reduced yet (reportgen reduce reads "
                                       f"{', '.join(FAMILIES)})")
            us = units(fam, root, wanted if fam == "mindinsight" else None)
            if fam == "mindinsight" and not any(u[0] == "rank" for u in us):
                raise InputError(root, f"no files of the ranks {cap_text(ranks, 80)}" if ranks else "no rank files")
        if wanted is not None and fam != "mindinsight":
            raise InputError(root, "--ranks picks ranks of a MindSpore Insight directory; give the other "
                                   "families' rank directories or trace files")
        if family is not None and fam != family:
            raise InputError(root, f"holds {fam} output, the other inputs {family}")
        family = fam
        found.extend(us)
    if not found:
        raise InputError(sources[0], "nothing to reduce")
    parts = run_units([(family, u, tuple(comm_patterns)) for u in found], jobs=jobs, progress=progress)
    data = dumps(parts, family)
    _write_bytes(output, data)
    return sum(p.meta.get("mi") != "cluster" for p in parts), len(data)


def _write_bytes(path: str, data: bytes) -> None:
    """``data`` to a temp file beside ``path``, renamed onto it (the old file stays until then)."""
    from .render import atomic_binary

    with atomic_binary(path) as fh:
        fh.write(data)


__all__ = ["Part", "units", "reduce", "assemble", "read", "load", "dumps", "write", "find_reduced", "run_units"]
