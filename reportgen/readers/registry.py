"""The input families, one registered :class:`Family` object each: the only place that names them.

A family says

* ``name`` (the ``--format`` value, the ``.reduced`` manifest's ``family``) and ``label`` (for messages);
* ``found(survey, others)``: the data :func:`reportgen.readers.survey` recorded for it (paths; empty: absent),
  ``noun``: what one / several of them are called ("2 runs: ..."); ``others`` says whether another family was
  found too (a family whose only evidence is weak may then step back);
* ``read(root, progress, jobs, comm_patterns)``: the reader's own one-process read;
* when it can be read in parts (:mod:`reportgen.engine`: a process pool, Dask, ``.reduced`` files):
  ``units(root, ranks)`` (the units of work of a run directory, in the reader's order), ``reduce(unit,
  comm_patterns) -> Part`` (runs on a worker), ``assemble(root, parts) -> Run``, ``unit_name(unit)`` (a path for
  messages), ``is_rank_unit(unit)`` (not a cluster-wide unit) and ``check_part(meta, tables)`` (a part loaded from an untrusted file has the reader's shape);
* ``file_units``: a single file given to ``reportgen reduce`` is one of its units; ``directory_ranks``: a run
  directory is reduced whole, ``--ranks`` picking its ranks;
* ``shares_data_with``: families detected from the same data (never reported as "also holds" one another);
* hooks run by :func:`reportgen.readers.read_run`: ``check_choice(survey)`` (refuse an ambiguous choice),
  ``after_read(run, survey)`` (data read beside the family's own, e.g. the dataset pipeline) and
  ``unread(run, survey)`` (its own data found and not read).

Every family-specific rule of the engine and of the dispatch lives here or in the family's reader.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..engine import Part
from ..errors import InputError
from ..limits import cap_text
from ..model import Run
from . import ascend, kineto, minddata, mindinsight, mindspore_cpu
from .kineto_decode import DecodedTrace


def _none(*_args) -> None:
    return None


def _always(*_args) -> bool:
    return True


@dataclass(frozen=True)
class Family:
    """One input family (module doc)."""

    name: str
    label: str
    found: Callable[[Any, bool], list[Path]]
    noun: tuple[str, str]
    read: Callable[..., Run]
    units: Callable[[Path, set[int] | None], list] | None = None
    reduce: Callable[[Any, tuple[str, ...]], Part] | None = None
    assemble: Callable[[Path, list[Part]], Run] | None = None
    unit_name: Callable[[Any], str] = str
    is_rank_unit: Callable[[Any], bool] = _always  # a unit of one rank (not a cluster-wide unit)
    check_part: Callable[[dict, dict], None] = _none
    file_units: bool = False
    directory_ranks: bool = False
    check_choice: Callable[[Any], None] = _none
    after_read: Callable[[Run, Any], None] = _none
    unread: Callable[[Run, Any], None] = _none
    #: families found from the same data (the same rank directories): never "also holds" one another
    shares_data_with: tuple[str, ...] = ()

    @property
    def reducible(self) -> bool:
        """Read in parts by the engine (the pool, Dask, ``.reduced`` files)."""
        return self.units is not None


# --------------------------------------------------------------------------- PyTorch Kineto


def _kineto_read(root: Path, progress=None, jobs=None, comm_patterns=()) -> Run:
    return kineto.read(root, progress=progress, jobs=jobs, comm_patterns=comm_patterns)


def _kineto_units(root: Path, ranks=None) -> list[str]:
    return [str(p) for p in kineto.find_traces(Path(root))]


def _kineto_reduce(unit: str, comm_patterns: tuple[str, ...]) -> Part:
    path, decoded, problems = kineto.decode_job((unit, tuple(comm_patterns)))
    if decoded is None:
        return Part("kineto", path, {"decoded": False}, {}, problems)
    return Part("kineto", path, {"decoded": True, "meta": decoded.meta}, dict(decoded.tables), problems)


def _kineto_assemble(root: Path, parts: list[Part]) -> Run:
    results = [(p.source, DecodedTrace(p.meta.get("meta") or {}, p.tables) if p.meta.get("decoded") else None,
                [tuple(x) for x in p.problems]) for p in parts]
    return kineto.assemble(Path(root), [Path(p.source) for p in parts], results)


def _kineto_found(s, others: bool) -> list[Path]:
    return s.traces


# --------------------------------------------------------------------------- Ascend (and MindSpore CPU)


def _ascend_read(root: Path, progress=None, jobs=None, comm_patterns=()) -> Run:
    return ascend.read(root, progress=progress, jobs=jobs)


def _ascend_units(root: Path, ranks=None) -> list[str]:
    return [str(p) for p in ascend.walk_prof_dirs(Path(root))]


def _ascend_reduce(unit: str, comm_patterns: tuple[str, ...]) -> Part:
    meta, tables = ascend.reduce_dir(Path(unit))
    return Part("ascend", unit, meta, tables, [])


def _ascend_assemble(root: Path, parts: list[Part]) -> Run:
    return ascend.assemble_parts(Path(root), [(p.meta, p.tables) for p in parts])


def _ascend_found(s, others: bool) -> list[Path]:
    return s.ascend_dirs if s.ascend_dirs and not s.cpu_only else []


def _cpu_found(s, others: bool) -> list[Path]:
    return s.ascend_dirs if s.ascend_dirs and s.cpu_only else []


def _cpu_read(root: Path, progress=None, jobs=None, comm_patterns=()) -> Run:
    return mindspore_cpu.read(root, progress=progress)


def _dataset_pipeline(run: Run, s) -> None:
    """MindSpore's dataset pipeline profiles found in and beside the rank directories (readers/minddata.py)."""
    minddata.attach(run, s.minddata, None)


# --------------------------------------------------------------------------- MindSpore Insight


def _mi_read(root: Path, progress=None, jobs=None, comm_patterns=()) -> Run:
    return mindinsight.read(root, progress=progress)


def _mi_units(root: Path, ranks=None) -> list[tuple]:
    """The cluster part (layout, problems, the legacy rank table's text: found by discovery, carried as it is),
    then one unit per rank (of ``ranks`` when given); none for a directory of .reduced files only."""
    if not mindinsight.detect(Path(root)):
        return []
    d = mindinsight.discover(Path(root))
    return [("cluster", str(root), *mindinsight.cluster_part(d))] + [
        ("rank", *u) for u in mindinsight.rank_units(d, ranks)]


def _mi_reduce(unit: tuple, comm_patterns: tuple[str, ...]) -> Part:
    if unit[0] == "cluster":
        return Part("mindinsight", *unit[1:])
    files, host, device = unit[1:]
    return Part("mindinsight", str(files[0].path), *mindinsight.rank_part(files, host, device))


def _mi_assemble(root: Path, parts: list[Part]) -> Run:
    return mindinsight.assemble(Path(root), [(p.source, p.meta, p.tables, p.problems) for p in parts])


def _mi_is_rank_unit(unit: tuple) -> bool:
    return unit[0] == "rank"


def _mi_unit_name(unit: tuple) -> str:
    return unit[1] if unit[0] == "cluster" else str(unit[1][0].path)


def _mi_found(s, others: bool) -> list[Path]:
    return s.mi_runs_found(others)


def rel(root: Path, p: Path) -> str:
    """``p`` relative to ``root`` for messages ("." for the root itself), bounded."""
    try:
        out = p.relative_to(root).as_posix()
    except ValueError:
        out = str(p)
    return cap_text(out or ".", 200)


def _mi_default_runs(s) -> list[Path] | None:
    """The MindInsight run the reader reads from the root (the root itself, or its newest ``profiler*``
    sub-directory by name, as MindInsight does; or the legacy layout at the root), as a one-item list, when
    every other run found is also the root or one of its ``profiler*`` sub-directories; None otherwise
    (runs nested elsewhere: the user has to pick one)."""
    root, runs = s.root, s.mi_runs
    if not runs:
        return [s.mi_top] if s.mi_top is not None else None
    if any(p != root and not (p.parent == root and p.name.startswith("profiler")) for p in runs):
        return None
    if root in runs:
        return [root]
    return [s.mi_flat] if s.mi_flat is not None else [max(runs, key=lambda p: p.name)]


def _mi_check_choice(s) -> None:
    """MindInsight reads one run folder: refuse when several are found (except the documented newest
    ``profiler*`` rule) or when the only one is deeper than the reader looks."""
    if _mi_default_runs(s) is not None:
        return
    runs = s.mi_runs
    listed = ", ".join(rel(s.root, p) for p in runs[:5]) + (f", … ({len(runs)} in all)" if len(runs) > 5 else "")
    if len(runs) == 1:
        raise InputError(s.root, f"the MindSpore Insight output is in the sub-directory {listed}; give that "
                                 "directory")
    raise InputError(s.root, f"holds {len(runs)} MindSpore Insight runs ({listed}); pick one: give its "
                             "sub-directory")


def _mi_after_read(run: Run, s) -> None:
    """The dataset pipeline profiles, and those of a legacy layout's rank folders."""
    legacy = [r for r in s.mi_runs if (r / "cluster_profiler").is_dir()]
    minddata.attach(run, s.minddata, minddata.legacy_files(run, legacy) if legacy else None)


def _mi_unread(run: Run, s) -> None:
    chosen = _mi_default_runs(s) or []
    for p in (p for p in s.mi_runs if p not in chosen):
        run.problem(p, "another MindSpore Insight run; not read (reportgen reads the run directory itself, "
                       "else its newest profiler*/ sub-directory by name, as MindInsight does; give this "
                       "directory to read it)")


# --------------------------------------------------------------------------- the registry

#: every family, in detection order
FAMILIES: tuple[Family, ...] = (
    Family("mindinsight", "MindSpore Insight", _mi_found, ("run", "runs"), _mi_read, units=_mi_units,
           reduce=_mi_reduce, assemble=_mi_assemble, unit_name=_mi_unit_name, is_rank_unit=_mi_is_rank_unit, check_part=mindinsight.check_part,
           directory_ranks=True, check_choice=_mi_check_choice, after_read=_mi_after_read, unread=_mi_unread),
    Family("mindspore_cpu", "MindSpore CPU", _cpu_found, ("rank directories", "rank directories"), _cpu_read,
           after_read=_dataset_pipeline, shares_data_with=("ascend",)),
    Family("ascend", "Ascend", _ascend_found, ("rank directories", "rank directories"), _ascend_read,
           units=_ascend_units, reduce=_ascend_reduce, assemble=_ascend_assemble, after_read=_dataset_pipeline,
           shares_data_with=("mindspore_cpu",)),
    Family("kineto", "PyTorch Kineto", _kineto_found, ("traces", "traces"), _kineto_read, units=_kineto_units,
           reduce=_kineto_reduce, assemble=_kineto_assemble, file_units=True),
)
BY_NAME: dict[str, Family] = {f.name: f for f in FAMILIES}
#: the families the engine reads in parts, by name
REDUCIBLE: dict[str, Family] = {f.name: f for f in FAMILIES if f.reducible}
#: the values of ``--format``
FORMATS: tuple[str, ...] = tuple(BY_NAME)
LABELS: dict[str, str] = {f.name: f.label for f in FAMILIES}


def get(name: str) -> Family:
    """The family called ``name`` (KeyError when none is)."""
    return BY_NAME[name]
