"""The seven sections and the advisor (last: it reads their analyses), in report order, and the runner
that isolates each one.

Every section module has ``ID``, ``TITLE``, ``analyze(run, options) -> Analysis`` (numbers and findings;
raises :class:`~reportgen.errors.Unavailable` when the run lacks its data) and ``present(analysis) -> View``
(figures, tables; never HTML, never a finding of its own: the runner puts ``analysis.findings`` on the view).

A section declares the canonical tables it reads in ``NEEDS``: a tuple of requirements, each a table name or a
tuple of alternative table names (any one of them will do). The runner checks them before ``analyze``: a
requirement that no table of the run meets makes the section ``unavailable`` with the reason
``needs <tables>``, each table followed by the files or profiler options that give it, by family, when the caller
gave ``Options.provenance`` (the family registry's declarations, reportgen/readers/registry.py: sections never
import readers; without it, as in unit tests, the plain ``needs <tables>``). A requirement may name a column,
``table.column`` (the table has it with a value). ``analyze`` may still raise
``Unavailable`` for finer reasons. The advisor's rules declare their inputs the same way (``Rule.inputs``).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable

from ..errors import Unavailable
from ..model import Run
from ..report import SectionOutcome

log = logging.getLogger(__name__)

#: Report order. Each id is a module in this package.
SECTION_IDS = ["waits", "trajectory", "overlap", "communication", "domains", "memory", "flops", "strategy", "execution",
               "operators", "compare", "data", "host", "advisor"]


@dataclass
class Options:
    """User options that sections may read (thresholds live in :mod:`reportgen.thresholds`)."""

    values: dict[str, Any] = field(default_factory=dict)
    #: outcomes of the sections already run, so a later section reuses them instead of analysing twice
    done: dict[str, SectionOutcome] = field(default_factory=dict)
    #: analyses another section asked for before their own turn (run_sections uses them instead of a second run)
    early: dict[str, Any] = field(default_factory=dict)
    #: the files / profiler options that give a table (or ``table.column``), by family, the run's own first; set by
    #: the code that runs the sections, from the family registry (``registry.section_context``); None: unknown
    provenance: Callable[[str], str] | None = None
    #: the same from the run's own family alone, without its name ("" when it gives none): for notes about the run
    own_provenance: Callable[[str], str] | None = None
    #: the words that name the run's framework's API, keyed by what a section says (``registry.FRAMEWORK_HINTS``)
    hints: dict[str, str] = field(default_factory=dict)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)


def hint(options, key: str, default: str = "") -> str:
    """The framework's text for ``key`` (:attr:`Options.hints`), else ``default`` (no options, another framework)."""
    hints = getattr(options, "hints", None) or {}
    return hints.get(key) or default


def sources(options, item: str, own: bool = False) -> str:
    """The files / profiler options that give ``item`` (a table or ``table.column``), by family (``own``: the run's
    own family's alone), or ""."""
    give = getattr(options, "own_provenance" if own else "provenance", None)
    if give is None:
        return ""
    try:
        return give(item) or ""
    except Exception:  # a broken provenance never takes a reason down
        log.debug("provenance of %s failed", item, exc_info=True)
        return ""


def with_sources(options, items) -> str:
    """``a (Family: files; ...) or b (...)``: each of ``items`` followed by what gives it (:func:`sources`)."""
    out = []
    for it in items:
        src = sources(options, it)
        out.append(f"{it} ({src})" if src else it)
    return " or ".join(out)


def analysis_of(section_id: str, run: Run, options: "Options | None"):
    """Another section's analysis: the one already computed in this report, else computed now.
    A section that was unavailable or failed is ``Unavailable`` here too (never a second traceback)."""
    done = options.done.get(section_id) if isinstance(options, Options) else None
    if done is not None:
        if done.status != "ok":
            raise Unavailable(done.reason)
        return done.analysis
    if isinstance(options, Options) and section_id in options.early:
        return options.early[section_id]
    module = load(section_id)
    missing = missing_needs(run, getattr(module, "NEEDS", ()))
    if missing:
        raise Unavailable(needs_reason(module, missing, options))
    analysis = module.analyze(run, options)
    if isinstance(options, Options):
        options.early[section_id] = analysis
    return analysis


def load(section_id: str):
    return importlib.import_module(f"{__name__}.{section_id}")


def has_input(run: Run, item: str) -> bool:
    """Does the run have ``item``: a table (``step_time``: present and not empty) or a column of a table
    (``step_time.preparing_ms``: the table has the column with at least one value)?"""
    table, _, col = item.partition(".")
    df = run.table(table)
    if df is None:
        return False
    return not col or (col in df.columns and bool(df[col].notna().any()))


def missing_needs(run: Run, needs) -> list[str]:
    """The requirements of ``needs`` (see the module doc; an item may name a column, ``table.column``, see
    :func:`has_input`) that the run does not meet, each as text."""
    out = []
    for req in needs or ():
        alts = (req,) if isinstance(req, str) else tuple(req)
        if not any(has_input(run, t) for t in alts):
            out.append(" or ".join(alts))
    return out


def needs_reason(module, missing: list[str], options=None) -> str:
    """``needs step_time (<family>: step_trace_time.csv ...; ...) or step_trace (...)``: each missing requirement
    (:func:`missing_needs`), each of its tables followed by the files that give it (:func:`with_sources`: the
    family registry's declarations handed over in ``options``; the plain table names without them)."""
    return "needs " + "; ".join(with_sources(options, m.split(" or ")) for m in missing)


#: Analysed in a second process when the run is analysed in two (:func:`run_sections` with ``jobs`` > 1): sections
#: whose analyses only ask for one another (``execution`` reads ``flops``, ``memory`` and ``trajectory``) and that no
#: section of the first process asks for (``compare`` and the advisor, which read both sides, run once both are
#: done). Each process then holds about half of the work (measured on 2-8-rank runs: ``execution`` alone is about as
#: much as ``waits``, ``communication``, ``domains`` and ``host`` together); :data:`EITHER_PROCESS` evens it out.
SECOND_PROCESS = ("trajectory", "memory", "flops", "execution")
#: Analysed (and presented) by whichever process is done with its own sections first, when there are two: sections
#: that ask for no other section's analysis and that none asks for. How the work splits depends on the run (on 2-8-rank
#: runs ``memory`` was 16-36 % of the sections' time, ``execution`` 12-25 %, ``operators`` 7-15 %): a fixed list left
#: one process waiting for the other for up to a quarter of the sections' wall time. The first process takes them
#: after its own sections, those after them in report order included: a data problem that such a section and a later
#: one could both find first (a table loaded lazily, a check made once per run) would then come at the later one's
#: place. tests/test_sections_parallel.py checks that it does not on every family and on broken inputs of the tables
#: operators reads.
EITHER_PROCESS = ("operators",)
#: The second process's sections in the order they are offered for presenting, when there are two: each process takes
#: the next one when it is free (:class:`_Claims`), the second as soon as the page's focus is known, this one once it
#: has presented its own sections. ``execution`` (the drill-down and the Marey view: 40-60 % of the presenting on
#: 2-8-rank runs) first, so what is left to share out is small pieces; then report order. A data problem recorded
#: while presenting (a ``refocus`` that loads a table) may so come from either process: it is tagged with its
#: section's place and merged as the analyses' are (:func:`_merge_problems`). Presented by the second
#: process alone, its sections kept this one waiting 50-110 ms of a 2-rank report's ~1.5 s (trace_filter; shared:
#: the sections' wall 556 -> 507 ms, median of 30 alternations; where this one's own take longer, nothing changes).
PRESENT_FIRST = ("execution",)
#: the run's tables (their columns' bytes, strings counted as pointers) above which the sections stay in one process:
#: the second process's copy-on-write pages and working set raised the peak memory of a generated 1024-rank run of
#: GPU traces from 1.94 to 2.67 GB (PSS of the process tree, x1.37) for 0.72x the wall time, while memory at 4096
#: ranks is over its goal (issue 30); 2-8-rank runs take 0.3-10 MB, another generated 1024-rank run 58 MB
FORK_MAX_TABLE_BYTES = 32 * 2**20
#: analysed after both processes are done (it reads analyses of both)
AFTER_BOTH = ("advisor",)
#: what a process keeps on the run for some sections' analyses only, released once it has analysed all of them (a
#: later reader would make it again): the operator rows (opstats.op_rows under opstats.ROWS_CACHE, the device ops as
#: operator rows: 28 MiB of their own at 1,024 ranks, the rest the device ops' arrays) were held through host and the
#: advisor, where a large run's memory peaks (a string here: importing opstats would bring pandas into every start-up)
RELEASE_AFTER = {"_opstats_cache": ("execution", "operators")}
#: what the second process analyses: (run, options, ids, claims, present claims), set just before the fork and
#: inherited by it
_FORKED: tuple | None = None


def _release(run: Run, analysed) -> None:
    """Drop the run's caches of :data:`RELEASE_AFTER` whose readers this process has all analysed."""
    for key, readers in RELEASE_AFTER.items():
        if key in run.__dict__ and all(r in analysed for r in readers):
            del run.__dict__[key]


def run_sections(run: Run, options: Options | None = None,
                 progress: Callable[[str], None] | None = None,
                 only: list[str] | None = None, jobs: int = 1) -> list[SectionOutcome]:
    """Analyse and present every section; a failing section becomes ``error`` and the rest go on.

    Every section is analysed first (its findings on a view of findings only, which the advisor reads), then the
    advisor merges the findings, and only then does each section present, knowing what the page's findings name
    (:mod:`reportgen.focus`: ``analysis.focus``), so every sample it draws keeps those ranks, steps and groups.

    ``jobs`` > 1 (and every section asked for, on a system that forks): the sections of :data:`SECOND_PROCESS`
    are analysed in a forked process while this one analyses the others (:func:`_two_processes`), those of
    :data:`EITHER_PROCESS` by the process done first with its own, and the second process's sections presented by
    whichever process is free (:data:`PRESENT_FIRST`); a section's
    ``finish`` (what it reads of the other process's sections) runs once both are done, then :data:`AFTER_BOTH`;
    the outcome, data problems included, is the one a single process gives (tests/test_sections_parallel.py)."""
    options = options or Options()
    ids = list(only or SECTION_IDS)
    if only is None:  # the step facts first, in one process or two alike (their data problems come before any section's)
        _step_facts(run, options)
    base = len(run.problems)
    modules = {sid: load(sid) for sid in ids}  # imported once, before the fork
    second = _two_processes(run, options, ids, jobs)
    try:
        return _sections(run, options, progress, ids, base, second, modules)
    except BaseException as exc:  # Ctrl-C, SIGTERM: the second process is stopped at once
        if second is not None:
            second.stop(exc)
        raise


def _sections(run: Run, options: Options, progress, ids: list[str], base: int, second,
              modules: dict) -> list[SectionOutcome]:
    """:func:`run_sections` once the second process (or None) is started."""
    spans: list[tuple[tuple, int, int]] = []  # (tag, first, end) of run.problems recorded during each call
    analysed: dict[str, SectionOutcome] = {}

    def analyse(sid: str) -> None:
        if progress:
            progress(sid)
        first = len(run.problems)
        analysed[sid] = options.done[sid] = _analyse_one(run, options, sid, modules[sid])
        spans.append(((0, ids.index(sid)), first, len(run.problems)))
        _release(run, analysed)

    def finish(sid: str) -> None:
        """The section's ``finish(run, analysis, options)``: what it reads of sections the second process may analyse
        (``compare``: the memory peaks), which come before it in report order. One process: right after its analysis;
        two: once both are done, its data problems tagged as its analysis's, so they are merged where one process
        records them."""
        o, hook = analysed.get(sid), getattr(modules[sid], "finish", None)
        if hook is None or o is None or o.status != "ok":
            return
        first = len(run.problems)
        try:
            hook(run, o.analysis, options)
        except Exception as exc:  # isolate, as an analysis
            analysed[sid] = options.done[sid] = _failed(sid, modules[sid], exc)
        spans.append(((0, ids.index(sid)), first, len(run.problems)))

    shipped: list[tuple[tuple, Any]] = []  # problems the second process recorded, tagged like spans
    unlisted = 0  # problems the second process only counted (past the cap)
    if second is not None:
        for sid in ids:
            if sid not in SECOND_PROCESS and sid not in AFTER_BOTH and sid not in EITHER_PROCESS:
                analyse(sid)
        for sid in second.claim_all():  # the sections either process may analyse that the second has not taken
            analyse(sid)
        got = second.result()  # {"outcomes": {sid: (outcome, problems)}, ...}, or None: analysed here
        if got is not None:
            unlisted += got["unlisted"]
            got = got["outcomes"]
        for sid in (s for s in ids if s in SECOND_PROCESS or s in EITHER_PROCESS):
            if got is None or sid not in got:
                if sid not in analysed:  # the second process failed (a section this one took is analysed)
                    analyse(sid)
                continue
            outcome, problems = got[sid]
            if progress:
                progress(sid)
            analysed[sid] = options.done[sid] = outcome
            shipped.extend(((0, ids.index(sid)), p) for p in problems)
        for sid in ids:
            finish(sid)
        for sid in (s for s in ids if s in AFTER_BOTH):
            analyse(sid)
            finish(sid)
    else:
        got = None
        for sid in ids:
            analyse(sid)
            finish(sid)
    outcomes = [analysed[sid] for sid in ids]
    if any(o.id == "advisor" for o in outcomes):
        first = len(run.problems)
        load("advisor").merge(outcomes)
        spans.append(((0, len(ids)), first, len(run.problems)))
    from .. import focus as _focus
    first = len(run.problems)
    page_focus = _focus.from_findings([f for o in outcomes if o.view is not None for f in o.view.findings],
                                      _default_step(run, options))
    spans.append(((1, 0), first, len(run.problems)))
    presented: dict[int, tuple] = {}

    def present(i: int) -> None:
        first = len(run.problems)
        presented[i] = _present_one(run, options, outcomes[i], modules[outcomes[i].id], page_focus)
        spans.append(((2, i), first, len(run.problems)))

    there = second.present(page_focus) if second is not None and got is not None else None
    theirs = set(got) if there is not None else set()  # the sections the second process analysed (offered to both)
    at = {o.id: i for i, o in enumerate(outcomes)}
    for i, o in enumerate(outcomes):
        if o.status != "ok" or o.id == "advisor" or o.id in theirs:
            continue
        present(i)
    if there is not None:
        while (sid := there.claim_present()) is not None:  # one at a time, as the second process takes them
            if sid in theirs and outcomes[at[sid]].status == "ok":
                present(at[sid])
        views = second.result()  # {"views": {sid: (result, problems)}, ...} or None: present them here
        if views is not None:
            unlisted += views["unlisted"]
            views = views["views"]
        for i, o in enumerate(outcomes):
            if o.status != "ok" or o.id not in theirs or i in presented:
                continue
            if views is None or o.id not in views:
                present(i)
            else:
                presented[i], problems = views[o.id]
                shipped.extend(((2, i), p) for p in problems)
    for i in sorted(presented):
        o, (kind, *rest) = outcomes[i], presented[i]
        if kind == "ok":
            refocused, view = rest
            o.analysis.focus = page_focus
            if refocused is not None:  # what refocus changed in the other process (findings stay this process's)
                o.analysis.metrics, o.analysis.tables, o.analysis.data = refocused
            view.findings = [*o.view.findings, *view.findings]
            o.view = view
            options.done[o.id] = o
        else:
            outcomes[i] = SectionOutcome(o.id, o.title, "unavailable", reason=rest[0]) if kind == "unavailable" \
                else rest[0]
            _rehome(outcomes, o.view.findings)
    if second is not None:
        _merge_problems(run, base, spans, shipped, unlisted)
    return outcomes


def _present_one(run: Run, options: Options, o: SectionOutcome, module, page_focus, ship: bool = False) -> tuple:
    """One analysed section presented, knowing the page's focus: ``("ok", refocused, view)`` (``refocused``: the
    analysis' metrics, tables and data after ``refocus`` when ``ship`` and it ran, else None), ``("unavailable",
    reason)`` or ``("error", outcome)``; never an exception."""
    o.analysis.focus = page_focus
    try:
        refocus = getattr(module, "refocus", None)
        refocused = None
        if refocus is not None and (page_focus.ranks or page_focus.steps_to_keep()):
            refocus(run, o.analysis, options)  # a section whose analysis samples: keep what findings name
            if ship:
                refocused = (o.analysis.metrics, o.analysis.tables, o.analysis.data)
        return "ok", refocused, module.present(o.analysis)
    except Unavailable as exc:
        return "unavailable", exc.reason
    except Exception as exc:  # isolate: one broken section must not take the report down
        return "error", _failed(o.id, module, exc)


def _step_facts(run: Run, options: Options) -> None:
    """The run's step facts (:func:`reportgen.facts.of`, cached on the run), computed before the sections."""
    from .. import facts

    try:
        facts.of(run, options)
    except Exception:  # the sections that need them say what is wrong
        log.debug("no step facts", exc_info=True)


def _analyse_one(run: Run, options: Options, sid: str, module) -> SectionOutcome:
    """One section analysed: ``ok`` with its analysis (and a view holding its findings), ``unavailable`` or
    ``error``; never an exception."""
    try:
        missing = missing_needs(run, getattr(module, "NEEDS", ()))
        if missing:
            raise Unavailable(needs_reason(module, missing, options))
        analysis = options.early.pop(sid, None) or module.analyze(run, options)
        if sid == "advisor":  # its view holds its own tables; merge() adds to it
            view = module.present(analysis)
            if analysis.findings:
                view.findings = [*analysis.findings, *view.findings]
        else:  # presented later, once every finding is known
            from ..report import View
            view = View(findings=list(analysis.findings))
        return SectionOutcome(sid, module.TITLE, "ok", analysis=analysis, view=view)
    except Unavailable as exc:
        return SectionOutcome(sid, module.TITLE, "unavailable", reason=exc.reason)
    except Exception as exc:  # isolate: one broken section must not take the report down
        return _failed(sid, module, exc)


def _two_processes(run: Run, options: Options, ids: list[str], jobs: int):
    """The second process (:class:`_Second`, analysing :data:`SECOND_PROCESS` and what it takes of
    :data:`EITHER_PROCESS`), or None: one process (``jobs`` 1,
    one core, a subset of the sections, no fork, or a run whose tables take more than :data:`FORK_MAX_TABLE_BYTES`).
    The second process sends back each outcome with the data problems recorded while it was analysed, or None when
    an outcome cannot be sent (this process then analyses those sections itself)."""
    import os
    import sys

    global _FORKED
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if jobs <= 1 or ids != SECTION_IDS or cores < 2 or not sys.platform.startswith("linux"):
        return None
    if _table_bytes(run) > FORK_MAX_TABLE_BYTES:
        return None
    from .. import workers

    either = [s for s in ids if s in EITHER_PROCESS]
    theirs = [s for s in ids if s in SECOND_PROCESS or s in EITHER_PROCESS]
    pool = claims = presents = None
    try:
        claims = _Claims(either)
        presents = _Claims([s for s in PRESENT_FIRST if s in theirs] + [s for s in theirs if s not in PRESENT_FIRST])
        _FORKED = (run, options, [s for s in ids if s in SECOND_PROCESS], claims, presents)
        pool = workers.pool(1)
        executor = pool.__enter__()
        future = executor.submit(_second_process)
        _hand_over()
        return _Second(pool, executor, future, claims, presents)
    except BaseException as exc:  # no fork (ENOMEM, a process limit): one process; Ctrl-C: the worker stopped first
        if pool is not None:
            with contextlib.suppress(Exception):
                pool.__exit__(type(exc), exc, exc.__traceback__)
        for c in (claims, presents):
            if c is not None:
                c.close()
        if not isinstance(exc, Exception):
            raise
        log.debug("no second process", exc_info=True)
        return None
    finally:
        _FORKED = None


def _table_bytes(run: Run) -> int:
    """Bytes of the run's loaded tables: each column's buffer (object columns as pointers), cheap at any size."""
    total = 0
    for df in run.tables.values():
        if df is not None:
            total += int(df.memory_usage(index=True, deep=False).sum())
    return total


def _hand_over() -> None:
    """Let the pool's threads send the task just submitted: they need this thread's GIL, which busy pandas work holds
    for 5 ms switch intervals at a time (the task reached the worker 16-60 ms late; a nap of 0.5 ms: 0.8 ms)."""
    import time

    time.sleep(0.0005)
    time.sleep(0.0005)


class _Claims:
    """Which process analyses each section of :data:`EITHER_PROCESS`: a pipe made before the fork holds one byte per
    section (its index); a process takes the next by reading one byte without waiting (a pipe hands each byte to
    one reader), so each section goes to exactly one process, in order, and to none once the pipe is empty."""

    def __init__(self, ids: list[str]):
        import os

        self.ids = list(ids)
        self.read_fd, write_fd = os.pipe()
        try:
            os.write(write_fd, bytes(range(len(self.ids))))
            os.set_blocking(self.read_fd, False)
        except BaseException:
            os.close(self.read_fd)
            raise
        finally:
            os.close(write_fd)

    def take(self) -> str | None:
        """The next section not yet taken by either process (it is this one's now), or None."""
        import os

        if self.read_fd < 0:
            return None
        try:
            got = os.read(self.read_fd, 1)
        except BlockingIOError:
            return None
        return self.ids[got[0]] if got else None

    def close(self) -> None:
        import os

        if self.read_fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.read_fd)
            self.read_fd = -1


class _Second:
    """The second process: the result of its analyses, then (:meth:`present`) of its presents; the pool is closed
    after the last one, after a failure (None: this process does the work), or by :meth:`stop`."""

    def __init__(self, pool, executor, future, claims: _Claims, presents: _Claims):
        self.pool, self.executor, self.future, self.claims, self.presents = pool, executor, future, claims, presents
        self.open, self.last = True, False

    def claim_all(self) -> list[str]:
        """The sections of :data:`EITHER_PROCESS` the second process has not taken, now this one's (in order): all
        that are left at once, which balances the work while there is one such section."""
        out = []
        while (sid := self.claims.take()) is not None:
            out.append(sid)
        self.claims.close()
        return out

    def claim_present(self) -> str | None:
        """The next section offered for presenting (:data:`PRESENT_FIRST`) that the second process has not taken, now
        this one's; None (and the claims closed) once none is left."""
        sid = self.presents.take()
        if sid is None:
            self.presents.close()
        return sid

    def result(self):
        try:
            got = self.future.result()
        except BaseException as exc:
            self.stop(exc)
            if not isinstance(exc, Exception):
                raise
            log.debug("the second process failed; this one does its work", exc_info=True)
            return None
        if got is None or self.last:
            self.close()
        return got

    def present(self, page_focus) -> "_Second | None":
        """The worker presents its sections; None when it cannot (it died meanwhile: this process presents them)."""
        try:
            self.future, self.last = self.executor.submit(_second_present, page_focus), True
        except Exception as exc:  # BrokenProcessPool: the worker was killed (the OOM killer) after its analyses
            log.debug("the second process is gone; presenting its sections here", exc_info=True)
            self.stop(exc)
            return None
        _hand_over()
        return self

    def close(self) -> None:
        self.claims.close()
        self.presents.close()
        if self.open:
            self.open = False
            self.pool.__exit__(None, None, None)

    def stop(self, exc: BaseException) -> None:
        self.claims.close()
        self.presents.close()
        if self.open:
            self.open = False
            self.pool.__exit__(type(exc), exc, exc.__traceback__)


def _second_process():
    """In the forked process: the sections of :data:`SECOND_PROCESS`, then those of :data:`EITHER_PROCESS` the first
    process has not taken (:class:`_Claims`), each with the data problems recorded while it was analysed, and how many
    problems it only counted (past the cap); an outcome that cannot be pickled fails the task (the first process then
    analyses them). The outcomes stay here for :func:`_second_present`."""
    global _FORKED
    run, options, ids, claims, presents = _FORKED
    out, unlisted = {}, run.problems_unlisted

    def analyse(sid: str) -> None:
        first = len(run.problems)
        outcome = options.done[sid] = _analyse_one(run, options, sid, load(sid))
        out[sid] = (outcome, run.problems[first:])
        _release(run, out)

    for sid in ids:
        analyse(sid)
    while (sid := claims.take()) is not None:  # then what the first process has not taken yet
        analyse(sid)
    claims.close()
    _FORKED = (run, options, list(out), None, presents)  # _second_present presents what was analysed here
    return {"outcomes": out, "unlisted": run.problems_unlisted - unlisted}  # not picklable: an error there, None here


def _second_present(page_focus):
    """In the forked process, once the page's focus is known: the sections it analysed that it takes from the
    offered ones (:data:`PRESENT_FIRST`; the first process takes the rest once it has presented its own) presented
    (:func:`_present_one`), by id, each with the data problems recorded meanwhile, and how many problems it only
    counted."""
    run, options, ids, _, presents = _FORKED
    out, unlisted = {}, run.problems_unlisted
    while (sid := presents.take()) is not None:
        o = options.done.get(sid) if sid in ids else None  # one the first process analysed: it presents it
        if o is not None and o.status == "ok":
            first = len(run.problems)
            out[sid] = (_present_one(run, options, o, load(sid), page_focus, ship=True), run.problems[first:])
    presents.close()
    return {"views": out, "unlisted": run.problems_unlisted - unlisted}


def _merge_problems(run: Run, base: int, spans: list, shipped: list, unlisted: int = 0) -> None:
    """The data problems of a run analysed in two processes, in the order one process records them: by section
    (report order; analyses, then the page focus, then each section's present), each recorded once (a table both
    processes loaded, a share both checked: the earlier section keeps it). The cap of :meth:`Run.problem` holds for
    the merged list: past it, problems are only counted, with those the second process only counted (``unlisted``)."""
    tagged = []
    own = run.problems[base:]
    tag_of = [(9, 0)] * len(own)
    for tag, first, end in spans:
        for k in range(first - base, end - base):
            tag_of[k] = tag
    tagged = [(tag_of[k], 0, k, p) for k, p in enumerate(own)] + [(t, 1, k, p) for k, (t, p) in enumerate(shipped)]
    tagged.sort(key=lambda x: (x[0], x[1], x[2]))
    seen: dict[tuple, int] = {}
    keep = []
    for tag, side, _k, p in tagged:
        key = (p.path, p.problem)
        if key in seen and seen[key] != side:
            continue
        seen.setdefault(key, side)
        keep.append(p)
    del run.problems[base:]
    run.problems.extend(keep)
    from ..limits import MAX_PROBLEMS

    over = len(run.problems) - 10 * MAX_PROBLEMS
    if over > 0:
        del run.problems[10 * MAX_PROBLEMS:]
    run.problems_unlisted += max(0, over) + unlisted


def _default_step(run: Run, options) -> int | None:
    """The page's one default step: the median step in scope (the Marey view opens on it)."""
    from .. import facts
    try:
        F = facts.of(run, options)
    except Exception:  # no facts (a run without steps): no default step
        log.debug("no facts for the default step", exc_info=True)
        return None
    return F.median_step() if F is not None else None


def _failed(sid: str, module, exc: Exception) -> SectionOutcome:
    log.debug("section %s failed:\n%s", sid, traceback.format_exc())
    where = traceback.extract_tb(exc.__traceback__)[-1]
    reason = f"{type(exc).__name__}: {str(exc)[:200]} (at {where.name}, line {where.lineno}); " \
             f"the other sections are unaffected"
    return SectionOutcome(sid, module.TITLE, "error", reason=reason)


def _rehome(outcomes: list[SectionOutcome], findings: list) -> None:
    """Findings of a section that failed to present go to the advisor's list (never lost)."""
    adv = next((o for o in outcomes if o.id == "advisor" and o.view is not None), None)
    if adv is not None:
        adv.view.findings.extend(findings)
