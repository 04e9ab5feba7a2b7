"""The per-rank engine: units of work, their reduction to small tables, and the run assembled from them.

A run is read in three steps, whatever runs them; each input family that can be read so registers them
(:mod:`reportgen.readers.registry`; the engine is given the family object and never names a family):

1. **units** - ``family.units(root, ranks)``: the files that belong to one rank (a trace file, a rank directory,
   or one rank's files of a folder that holds every rank's; a family may add one cluster-wide unit, such as its
   layout and the problems found discovering it).
2. **reduce(unit) -> Part** - the part linear in data (decoding, parsing, per-rank checks): plain tables with
   exact int-ns times, the data problems found, and JSON metadata; no open file, no callable.
3. **assemble(root, parts) -> Run** - what needs every rank (rank choice, world size, groups, the run origin,
   cross-rank tables): the reader's own code.

Step 2 runs in-process, in the ``--jobs`` process pool (:mod:`reportgen.workers`), on a Dask distributed cluster
(``--dask SCHEDULER``; the workers open the paths as given, so they must see the files at the same paths), or
on each node by ``reportgen reduce`` which writes the parts to a ``.reduced`` file. The readers' own ``read()``
is the same two functions in one process, so every path gives the same run (tests/test_distributed.py).

The ``.reduced`` format (:data:`FORMAT`, :data:`VERSION`) is read from machines that are not trusted, so it holds
no pickle and nothing executable: a zip archive with ``manifest.json`` (format name and version, reportgen
version, family, and per part its source path, rank, JSON metadata, data problems and table schemas) and one
entry per column: the raw little-endian bytes of a numeric column (dtypes from :data:`NUMERIC`), or the int32
codes of a text column with its distinct values in a JSON entry. Loading (:func:`load`) checks everything
against the manifest, the families given (their names and their own check of a part) and the bounds below;
anything else is one line naming the file (exit 2).
"""

from __future__ import annotations

import io
import json
import os
import re
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import pandas as pd

from . import __version__
from .errors import InputError
from .limits import MAX_NAME_CHARS, cap_text

FORMAT = "reportgen-reduced"
VERSION = 1
SUFFIX = ".reduced"
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
#: seconds to wait for the Dask scheduler (``--dask-timeout``)
CONNECT_TIMEOUT_S = 10


@dataclass
class Part:
    """One unit reduced: ``tables`` of plain columns, ``meta`` JSON values, ``problems`` (path, text) pairs."""

    family: str
    source: str
    meta: dict = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    problems: list = field(default_factory=list)


# --------------------------------------------------------------------------- jobs

#: one unit of work: (the family's reduce function, the unit, extra communication name patterns, the unit's
#: path for messages); functions travel to the workers by reference (module-level functions of the registry)
Job = tuple


def jobs_of(family: Any, units: list, comm_patterns: tuple[str, ...] = ()) -> list[Job]:
    """The jobs that reduce ``units`` of ``family`` (a registered family: ``reduce``, ``unit_name``)."""
    return [(family.reduce, u, tuple(comm_patterns), family.unit_name(u)) for u in units]


def reduce(job: Job) -> Part:
    """One job -> :class:`Part` (runs on a worker; the family's reduce never raises for bad input)."""
    fn, unit, comm_patterns, _name = job
    return fn(unit, comm_patterns)


def _visible(job: Job) -> None:
    """Raise FileNotFoundError naming the worker when the unit (its path: the job's name) is not where the client
    saw it: a Dask worker on a machine without the run, or with it mounted elsewhere."""
    if not os.path.exists(job[3]):
        import socket

        raise FileNotFoundError(f"worker {socket.gethostname()} cannot see {cap_text(str(job[3]), 300)}: every "
                                "worker must see the run at the same absolute path")


def reduce_compact(job: Job, family: str) -> bytes:
    """One job -> the ``.reduced`` bytes of its :class:`Part` (what ``reportgen reduce`` writes): what a Dask worker
    sends back. A pickled Part was 3-7x larger on real traces (290 vs 47 KB for one H100 rank; issue 30), and bytes
    are what Dask's ``sizeof`` measures exactly, so the scheduler knows each result's size (a Part counted as 56)."""
    _visible(job)
    return dumps([reduce(job)], family)


# --------------------------------------------------------------------------- running the units


#: a scheduler address: [tcp:// | tls://]HOST:PORT (IPv6 in brackets), or inproc:// (an in-process cluster)
_DASK_ADDRESS = re.compile(r"(?:(tcp|tls)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(\d{1,5})|inproc://\S+")


def dask_address_problem(address: str) -> str | None:
    """Why ``address`` is not a Dask scheduler address, or None (checked before anything is read: a Client built
    on ``nonsense`` printed a traceback from its destructor and hung 40 s; issue 31)."""
    m = _DASK_ADDRESS.fullmatch(address.strip())
    if not m or (m.group(3) and not 0 < int(m.group(3)) < 65536):
        return "not a scheduler address: expected tcp://HOST:PORT (e.g. tcp://head:8786)"
    return None


def _dask_client(address: str):
    try:
        from distributed import Client
    except ImportError:
        raise InputError(None, f"--dask {address}: dask is not installed; pip install '.[dask]' from the reportgen "
                               "checkout (dask and distributed)") from None
    why = dask_address_problem(address)
    if why:
        raise InputError(None, f"--dask {address}: {why}")
    m = _DASK_ADDRESS.fullmatch(address.strip())
    if m.group(2):  # reach the port first: a Client that fails to connect hangs in its destructor
        import socket

        try:
            socket.create_connection((m.group(2).strip("[]"), int(m.group(3))), timeout=CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            raise InputError(None, f"--dask {address}: cannot reach the Dask scheduler ({exc.strerror or exc}; "
                                   f"waited at most {CONNECT_TIMEOUT_S} s)") from None
    import sys

    def quiet(unraisable, previous=sys.unraisablehook):
        """A Client that failed to connect closes itself in its destructor and prints that it timed out: the one
        line below says what happened."""
        if "Client.__del__" in repr(getattr(unraisable, "object", "")):
            return
        previous(unraisable)

    sys.unraisablehook = quiet
    try:
        return Client(address, timeout=f"{CONNECT_TIMEOUT_S}s", set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as exc:
        raise InputError(None, f"--dask {address}: cannot connect to the Dask scheduler ({exc})") from None
    except Exception as exc:  # noqa: BLE001 - something answers at the port, but not a Dask scheduler
        raise InputError(None, f"--dask {address}: what answers there is not a Dask scheduler ({type(exc).__name__}: "
                               f"{cap_text(str(exc), 120)})") from None


def run_units(jobs_list: list[tuple], *, jobs: int | None = None, dask: str | None = None, progress=None,
              family: Any = None, families: Mapping[str, Any] | None = None) -> list:
    """:func:`reduce` of every job, in order: on the Dask cluster at ``dask``, else in ``jobs`` processes, else
    here. On Dask each worker sends the compact ``.reduced`` form (:func:`reduce_compact`; ``family``, the
    registered family, names it), checked on arrival as a ``.reduced`` file is (:func:`load`, ``families``)."""
    total = len(jobs_list)
    if dask:
        if family is None or families is None:
            raise ValueError("run_units: Dask needs the family and the families to check what workers send")
        client = _dask_client(dask)
        try:
            futures = client.map(reduce_compact, jobs_list, family=family.name, pure=False)
            out = []
            for n, (job, fut) in enumerate(zip(jobs_list, futures), start=1):
                try:
                    data = fut.result()
                except KeyboardInterrupt:
                    raise
                except FileNotFoundError as exc:  # _visible: the worker lacks the files
                    raise InputError(job[3], f"--dask {dask}: {exc}") from None
                except Exception as exc:  # noqa: BLE001 - a worker without reportgen, a lost worker...
                    raise InputError(job[3], f"--dask {dask}: the task failed on the cluster ({type(exc).__name__}: "
                                             f"{cap_text(str(exc), 200)}; is reportgen with its dask extra installed on every "
                                             "worker?)") from None
                try:
                    out.extend(load(data, families, family.name, name=job[3]))
                except InputError as exc:
                    raise InputError(job[3], f"--dask {dask}: what the worker sent back is not this reportgen's "
                                             f"compact form ({exc.problem}); is the same reportgen {__version__} "
                                             "installed on every worker?") from None
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


def read(root: Path, family: Any, families: Mapping[str, Any], *, reduced: list[Path] = (), jobs: int | None = None,
         dask: str | None = None, comm_patterns: tuple[str, ...] = (), progress=None):
    """The run of ``root`` (``family``: a registered family): its raw units reduced (:func:`run_units`) and the
    parts of the ``reduced`` files (checked against ``families``, the registry's by name), assembled. For Dask the
    paths are made absolute: a worker resolves a relative path against its own working directory."""
    root = Path(root).absolute() if dask else Path(root)
    loaded = [part for path in reduced for part in load(path, families, family.name)]
    raw = family.units(root, None)
    parts = run_units(jobs_of(family, raw, comm_patterns), jobs=jobs, dask=dask, progress=progress, family=family,
                      families=families)
    parts = sorted(loaded + list(parts), key=lambda p: Path(p.source))
    if not loaded:
        return family.assemble(root, parts)
    try:
        return family.assemble(root, parts)
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


def family_of_all(paths: list[Path], families: Mapping[str, Any], fmt: str | None = None) -> str:
    """The name of the one family the .reduced files hold (their manifests checked: a family of ``families``);
    InputError when they differ."""
    seen: dict[str, Path] = {}
    for path in paths:
        with _open(path, families) as (_zf, manifest):
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

    def __init__(self, path: Path | bytes, families: Mapping[str, Any], name: str | None = None):
        self.data = path if isinstance(path, bytes) else None
        self.path = Path(name if self.data is not None else path)
        self.families = families

    def __enter__(self):
        try:
            self.zf = zipfile.ZipFile(io.BytesIO(self.data) if self.data is not None else self.path)
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
            if not isinstance(manifest.get("family"), str) or manifest["family"] not in self.families:
                raise _Bad(f"family {cap_text(repr(manifest.get('family')), 40)} is not one of "
                           f"{', '.join(self.families)}")
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


def load(path: Path | bytes, families: Mapping[str, Any], family: str | None = None,
         name: str | None = None) -> list[Part]:
    """The parts of one ``.reduced`` file, every entry checked (module doc; ``families``: the registry's families
    by name, each part checked by its family's ``check_part``; ``family``: the name the file must hold);
    InputError naming the file. ``path`` may be the bytes themselves (what a Dask worker sent), ``name`` then
    naming them."""
    opener = _open(path, families, name)
    path = opener.path
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
                try:
                    families[manifest["family"]].check_part(p["meta"], tables)
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


def write_parts(output: str, parts: list[Part], family: str) -> int:
    """``reportgen reduce``'s file: ``parts`` of ``family`` (its name) into ``output`` (written whole, then renamed
    onto it). Returns the bytes written."""
    data = dumps(parts, family)
    _write_bytes(output, data)
    return len(data)


def _write_bytes(path: str, data: bytes) -> None:
    """``data`` to a temp file beside ``path``, renamed onto it (the old file stays until then)."""
    from .render import atomic_binary

    with atomic_binary(path) as fh:
        fh.write(data)


__all__ = ["Part", "jobs_of", "reduce", "read", "load", "dumps", "write_parts", "find_reduced", "run_units",
           "family_of_all", "parse_ranks"]
