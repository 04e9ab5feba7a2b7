"""Sections analysed in two processes (reportgen/sections/__init__.py, ``run_sections(jobs=2)``) give the report one
process gives: the same metrics JSON, the same page, the same data problems in the same order.

The fake-section tests pin the rules that make this hold (problems recorded by either process, once, in report
order; the first process analysing everything when the second one fails); the fixture tests check it on real runs
of every family."""

from __future__ import annotations

import sys
import types

import pytest

from conftest import fixture_dir

from reportgen import document, metrics, render, sections
from reportgen.cli import section_options
from reportgen.model import Run
from reportgen.readers import read_run
from reportgen.report import Analysis, View

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the second process is forked (Linux)")


# ------------------------------------------------------------------ fake sections: the rules


def _fake_modules(calls: list):
    """Four sections a, b, c, d: b and c in the second process, d after both; each records a data problem, b and d
    load the lazy table ``t`` (its loader records one), b and c check a share the way facts.guard_ratio does (one
    problem per quantity per run), d reads b's analysis."""

    def share(run, quantity):
        seen = run.__dict__.setdefault("_share_problems", set())
        if quantity not in seen:
            seen.add(quantity)
            run.problem(quantity, "outside 0..100 %")

    def module(sid, body):
        m = types.ModuleType(f"fake_{sid}")
        m.ID, m.TITLE, m.NEEDS = sid, sid.upper(), ()

        def analyze(run, options):
            calls.append(sid)
            body(run, options)
            return Analysis(metrics={"id": sid})

        def present(analysis):
            if analysis.metrics["id"] == "b":
                raise ValueError("b cannot be drawn")
            return View(summary=f"{analysis.metrics['id']} {analysis.data.get('kept', '')}")

        m.analyze, m.present = analyze, present
        if sid == "c":  # refocus: changes the analysis, loads a table, records a problem
            def refocus(run, a, options):
                run.table("u")
                run.problem("c", "refocused")
                a.data["kept"] = sorted(a.focus.ranks)
                a.metrics["kept_ranks"] = len(a.focus.ranks)

            m.refocus = refocus
        return m

    def a(run, options):
        run.problem("a", "first")

    def b(run, options):
        run.table("t")
        run.problem("b", "second")
        share(run, "q")

    def c(run, options):
        share(run, "q")
        run.problem("c", "third")

    def d(run, options):
        run.table("t")
        assert sections.analysis_of("b", run, options).metrics["id"] == "b"
        run.problem("d", "fourth")

    return {sid: module(sid, fn) for sid, fn in zip("abcd", (a, b, c, d))}


def _fake_run() -> Run:
    import pandas as pd

    run = Run(name="fake", source_format="fake", source_path="fake")

    def load_t():
        run.problem("t", "loaded")
        return pd.DataFrame({"x": [1]})

    def load_u():
        run.problem("u", "loaded")
        return pd.DataFrame({"x": [2]})

    run.loaders["t"], run.loaders["u"] = load_t, load_u
    return run


class _Focus:
    """A page focus naming rank 1 (picklable: it goes to the second process)."""

    ranks = [1]

    def steps_to_keep(self):
        return []


@pytest.fixture
def fake_sections(monkeypatch):
    calls: list[str] = []
    mods = _fake_modules(calls)
    monkeypatch.setattr(sections, "SECTION_IDS", list("abcd"))
    monkeypatch.setattr(sections, "SECOND_PROCESS", ("b", "c"))
    monkeypatch.setattr(sections, "AFTER_BOTH", ("d",))
    monkeypatch.setattr(sections, "load", lambda sid: mods[sid])
    monkeypatch.setattr("os.cpu_count", lambda: 2)  # two cores wherever the test runs
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0, 1}, raising=False)  # (what Linux asks)
    monkeypatch.setattr("reportgen.focus.from_findings", lambda *a: _Focus())
    return calls


def _run_fake(jobs: int):
    run = _fake_run()
    run.problem("(read)", "before the sections")
    outs = sections.run_sections(run, sections.Options(), jobs=jobs)
    return [(o.id, o.status, o.reason, o.analysis and o.analysis.metrics, o.analysis and o.analysis.data,
             o.view and o.view.summary) for o in outs], [(p.path, p.problem) for p in run.problems]


def test_problems_of_both_processes_come_once_in_report_order(fake_sections):
    serial = _run_fake(1)
    assert serial[1] == [("(read)", "before the sections"), ("a", "first"), ("t", "loaded"), ("b", "second"),
                         ("q", "outside 0..100 %"), ("c", "third"), ("d", "fourth"), ("u", "loaded"),
                         ("c", "refocused")]
    assert [o[:2] for o in serial[0]] == [("a", "ok"), ("b", "error"), ("c", "ok"), ("d", "ok")]
    assert "b cannot be drawn" in serial[0][1][2]
    assert serial[0][2][3:] == ({"id": "c", "kept_ranks": 1}, {"kept": [1]}, "c [1]")
    fake_sections.clear()
    two = _run_fake(2)
    # a and d here, b and c in the forked process (their calls are not seen here)
    assert fake_sections == ["a", "d"]
    assert two == serial


@pytest.mark.parametrize("second", ["unpicklable", "raises"])
def test_the_first_process_analyses_what_the_second_could_not(fake_sections, monkeypatch, second):
    serial = _run_fake(1)

    if second == "unpicklable":  # what _second_process returns when pickle fails
        monkeypatch.setattr(sections, "_second_process", lambda: None)
    else:
        def boom():
            raise RuntimeError("the second process broke")

        monkeypatch.setattr(sections, "_second_process", boom)
    fake_sections.clear()
    two = _run_fake(2)
    assert fake_sections == ["a", "b", "c", "d"]
    assert two == serial


def test_one_process_when_asked_or_for_a_subset_or_a_big_run(fake_sections, monkeypatch):
    class Started(BaseException):  # passes the fallback for failures to start (an Exception)
        pass

    def pool(n):  # where the second process would start
        raise Started

    monkeypatch.setattr("reportgen.workers.pool", pool)
    _run_fake(1)
    sections.run_sections(_fake_run(), sections.Options(), only=["a", "b"], jobs=2)
    # a run whose tables take more than FORK_MAX_TABLE_BYTES: the second process's memory is not worth it
    big = _fake_run()
    big.table("t")
    monkeypatch.setattr(sections, "FORK_MAX_TABLE_BYTES", sections._table_bytes(big) - 1)
    sections.run_sections(big, sections.Options(), jobs=2)
    monkeypatch.setattr(sections, "FORK_MAX_TABLE_BYTES", sections._table_bytes(big))
    with pytest.raises(Started):
        sections.run_sections(big, sections.Options(), jobs=2)


def test_a_fork_that_fails_leaves_one_process(fake_sections, monkeypatch):
    serial = _run_fake(1)

    def pool(n):
        raise OSError(12, "Cannot allocate memory")

    monkeypatch.setattr("reportgen.workers.pool", pool)
    fake_sections.clear()
    assert _run_fake(2) == serial
    assert fake_sections == ["a", "b", "c", "d"]


def test_a_worker_killed_between_its_analyses_and_its_presents(fake_sections, monkeypatch):
    """The OOM killer takes the idle worker while this process runs the advisor: its sections are presented here."""
    import multiprocessing
    import os
    import signal
    import time

    serial = _run_fake(1)
    real = sections.load

    def load(sid):
        m = real(sid)
        if sid == "d" and not getattr(m, "_kills", False):
            analyze = m.analyze

            def killing(run, options):
                for child in multiprocessing.active_children():
                    os.kill(child.pid, signal.SIGKILL)
                time.sleep(0.5)
                return analyze(run, options)

            m.analyze, m._kills = killing, True
        return m

    monkeypatch.setattr(sections, "load", load)
    assert _run_fake(2) == serial
    assert multiprocessing.active_children() == []


def test_problems_past_the_cap_are_counted_as_one_process_counts_them(fake_sections, monkeypatch):
    """Each process applies Run.problem's cap (10 x MAX_PROBLEMS) on its own; merged, the listed problems and the
    count of unlisted ones are those of one process."""
    monkeypatch.setattr("reportgen.limits.MAX_PROBLEMS", 1)

    def run_capped(jobs):
        run = _fake_run()
        for k in range(5):
            run.problem("(read)", f"problem {k}")
        sections.run_sections(run, sections.Options(), jobs=jobs)
        return [(p.path, p.problem) for p in run.problems], run.problems_unlisted

    serial = run_capped(1)
    assert len(serial[0]) == 10 and serial[1] == 3
    assert run_capped(2) == serial


# ------------------------------------------------------------------ real runs of every family


FIXTURES = [
    ("kineto", "hta_tests_data", "tests", "data", "trace_filter"),
    ("kineto", "generated_cpu_gloo_4rank_mesh2x2"),
    ("ascend", "msinsight", "test", "st", "level2"),
    ("mindinsight", "mi_cluster_propose_pp2x4"),
    ("generated", "mindspore_cpu_ms_dp4_graph"),
]


def _report(path, jobs: int):
    run = read_run(path, jobs=1)
    outs = sections.run_sections(run, section_options(run), jobs=jobs)
    report = document.build(run, outs, None)
    ctx = render.build_context(report)
    ctx["generated_at"] = "(the time of writing)"
    return metrics.dumps(metrics.build(report)), render.render_html(ctx), [(p.path, p.problem) for p in run.problems]


def _taken_by(monkeypatch, who: str) -> None:
    """Sections of EITHER_PROCESS taken only by the ``second`` process, or only by the ``first`` one (then after its
    own sections, those after them in report order included): each way, whatever the timing."""
    import os

    first, real = os.getpid(), sections._Claims.take
    monkeypatch.setattr(sections._Claims, "take",
                        lambda self: real(self) if (os.getpid() == first) == (who == "first") else None)


@pytest.mark.parametrize("parts", FIXTURES, ids=lambda p: p[-1])
def test_two_processes_give_the_one_process_report(parts, monkeypatch):
    path = fixture_dir(*parts)
    one = _report(path, 1)
    _taken_by(monkeypatch, "second")
    two = _report(path, 2)
    assert two[2] == one[2]
    assert two[0] == one[0]
    assert two[1] == one[1]


#: broken inputs whose data problems are found when a table the operators section reads is first loaded or checked
LAZY_PROBLEMS = ["asc_cell_kernel_duration_us_nan", "asc_cell_opstat_count_negative", "asc_kernels_written_twice",
                 "kin_kernel_dur_nan", "kin_kernels_written_twice", "fx_mscpu_op_time_negative"]


@pytest.mark.parametrize("name", LAZY_PROBLEMS + ["level2"])
def test_a_section_either_process_may_take_keeps_its_problems_in_report_order(name, monkeypatch, tmp_path):
    """The first process analyses a section of EITHER_PROCESS (operators) after its own sections when it takes it,
    those after it in report order (compare, data, host) included. Its data problems still come where one process
    records them: on these inputs, problems found lazily in the tables operators reads (every such corpus report was
    checked once this way, 2026-11-28: no difference)."""
    from malformed_corpus import build_case

    path = fixture_dir(*FIXTURES[2]) if name == "level2" else build_case(name, tmp_path / name, fixture=fixture_dir).run
    one = _report(path, 1)
    assert one[2] or name == "level2"
    _taken_by(monkeypatch, "first")
    assert _report(path, 2) == one


def _stream_check():
    import sys as _sys

    print("a warning would go here", file=_sys.stderr)  # never waits on a lock taken before the fork
    return id(_sys.stderr), id(_sys.stdout), _sys.stderr.name


def test_a_worker_writes_to_streams_of_its_own(monkeypatch):
    """A forked worker (reportgen/workers.py) gets new stdout / stderr objects on /dev/null: the parent's may have
    been locked by another thread (the progress heartbeat) at the fork, and a warning written there would hang."""
    from reportgen import workers

    with workers.pool(1) as ex:
        err, out, name = ex.submit(_stream_check).result(timeout=60)
    assert name == "/dev/null" and err == out and err != id(sys.stderr)


def test_what_a_section_reads_of_the_other_process_is_added_once_both_are_done(fake_sections, monkeypatch):
    """A section's ``finish`` (compare: the pair's memory peaks) reads a section before it in report order that the
    second process analyses (here a reads b, with b first): right after its analysis in one process, once both are
    done in two; its problems where one process records them, the same report either way; a subset too, in any order."""
    real = sections.load

    def finish(run, analysis, options):
        analysis.metrics["b_seen"] = sections.analysis_of("b", run, options).metrics["id"]
        run.problem("a", "finished")

    def load(sid):
        m = real(sid)
        if sid == "a":
            m.finish = finish
        return m

    monkeypatch.setattr(sections, "load", load)
    monkeypatch.setattr(sections, "SECTION_IDS", list("bacd"))
    serial = _run_fake(1)
    assert serial[0][1][3] == {"id": "a", "b_seen": "b"}
    assert serial[1].index(("a", "finished")) == serial[1].index(("a", "first")) + 1
    assert _run_fake(2) == serial
    for only in (["a", "b"], ["d", "a", "b"]):  # the advisor's stand-in before the section with a finish, too
        outs = {o.id: o for o in sections.run_sections(_fake_run(), sections.Options(), only=only, jobs=2)}
        assert outs["a"].analysis.metrics["b_seen"] == "b"


def test_the_rank_comparison_names_the_pair_memory_peaks():
    run = read_run(fixture_dir("generated", "torch_gloo_ddp4_baseline"), jobs=1)
    m = {o.id: o for o in sections.run_sections(run, section_options(run), jobs=2)}
    c, mem = m["compare"].analysis.metrics, m["memory"].analysis.tables["per_rank"].set_index("rank")
    assert c["peak_mb_a"] == float(mem.at[c["rank_a"], "peak_mb"])
    assert c["peak_mb_b"] == float(mem.at[c["rank_b"], "peak_mb"])
    sub = {o.id: o for o in sections.run_sections(run, section_options(run), only=["advisor", "compare"])}
    assert sub["compare"].analysis.metrics["peak_mb_a"] == c["peak_mb_a"]  # a subset, the advisor first


# ------------------------------------------------------------------ a section either process may analyse


@pytest.fixture
def either_sections(fake_sections, monkeypatch, tmp_path):
    """The fake sections and e, of EITHER_PROCESS (after c in report order, before d, which runs after both): e
    records a data problem, loads the lazy table u and leaves a mark once analysed (in either process); a section
    named in ``busy`` (a or b) waits for that mark (at most 30 s) before its analysis ends, so the other process is
    done first and takes e, whatever the timing."""
    import time

    mods = {sid: sections.load(sid) for sid in "abcd"}
    busy: set[str] = set()
    mark = tmp_path / "e-analysed"
    for sid in "ab":
        def analyze(run, options, _orig=mods[sid].analyze, _sid=sid):
            if _sid in busy:
                until = time.monotonic() + 30
                while not mark.exists() and time.monotonic() < until:
                    time.sleep(0.005)
            return _orig(run, options)

        mods[sid].analyze = analyze
    e = types.ModuleType("fake_e")
    e.ID, e.TITLE, e.NEEDS = "e", "E", ()

    def analyze_e(run, options):
        fake_sections.append("e")
        run.table("u")
        run.problem("e", "either")
        mark.touch()
        return Analysis(metrics={"id": "e"})

    e.analyze, e.present = analyze_e, lambda a: View(summary="e drawn")
    mods["e"] = e
    monkeypatch.setattr(sections, "SECTION_IDS", list("abced"))
    monkeypatch.setattr(sections, "EITHER_PROCESS", ("e",))
    monkeypatch.setattr(sections, "load", lambda sid: mods[sid])
    return fake_sections, busy, mark


#: where _takes_e_then_breaks leaves its mark (set by the test before the fork)
_MARK: dict = {}


def _takes_e_then_breaks():
    """A second process that takes e, then fails (module level: the pool sends it to the worker by name)."""
    if sections._FORKED[3].take() != "e":
        raise AssertionError("e was not there to take")
    _MARK["path"].touch()
    raise RuntimeError("the second process broke")


@pytest.mark.parametrize("busy,here", [("a", ["a", "d"]), ("b", ["a", "e", "d"])],
                         ids=["first-busy", "second-busy"])
def test_a_section_of_either_process_goes_to_the_one_done_first(either_sections, busy, here):
    """e is analysed once, by the process done with its own sections first (the second while a is busy, this one
    while b is), and the report is the one a single process gives, data problems in report order."""
    calls, busy_set, mark = either_sections
    serial = _run_fake(1)
    assert ("e", "either") in serial[1] and serial[0][3][5] == "e drawn"
    mark.unlink()
    calls.clear()
    busy_set.add(busy)
    two = _run_fake(2)
    assert calls == here
    assert two == serial


def test_a_section_taken_by_a_second_process_that_then_fails_is_analysed_here(either_sections, monkeypatch):
    calls, busy, mark = either_sections
    serial = _run_fake(1)
    mark.unlink()
    busy.add("a")  # the second process takes e first
    monkeypatch.setattr(sections, "_second_process", _takes_e_then_breaks)
    monkeypatch.setitem(_MARK, "path", mark)
    calls.clear()
    assert _run_fake(2) == serial
    assert calls == ["a", "b", "c", "e", "d"]


def test_the_operator_rows_are_released_once_their_readers_are_analysed():
    """The operator rows cached on the run (opstats.op_rows) are dropped once execution and operators are both
    analysed in a process (no later section reads them; a reader after that makes them again), never before."""
    from reportgen import opstats

    run = Run(name="r", source_format="x", source_path="/x")
    run.__dict__["_opstats_cache"] = {"rows": "kept"}
    sections._release(run, {"execution": None})
    assert run.__dict__["_opstats_cache"] == {"rows": "kept"}  # operators has not read them yet
    sections._release(run, {"execution": None, "operators": None})
    assert "_opstats_cache" not in run.__dict__
    assert set(sections.RELEASE_AFTER[opstats.ROWS_CACHE]) <= set(sections.SECTION_IDS)
    assert opstats.op_rows(run).empty and "_opstats_cache" in run.__dict__  # read again: made again
    # who reads them: the execution section's drill-down and operators, nothing else (a new reader must be named in
    # RELEASE_AFTER, or it would make the rows again after they were dropped)
    import re
    from pathlib import Path

    root = Path(opstats.__file__).parent
    readers = {str(f.relative_to(root)) for f in root.rglob("*.py")
               if re.search(r"\bop_rows\(", f.read_text(encoding="utf-8")) and f.name != "opstats.py"}
    assert readers == {"sections/drilldown.py", "sections/operators.py"}


@pytest.fixture
def present_sections(fake_sections, monkeypatch, tmp_path):
    """The fake sections, each present logging ``<section>> <pid>`` as it starts and ``<section> <pid>`` once done
    to a file; a section named in ``waits`` waits (at most 30 s) before drawing until the log holds the entry named
    there (either process). b and c (the second process's) are offered in that order."""
    import os
    import time

    mods = {sid: sections.load(sid) for sid in "abcd"}
    log = tmp_path / "presented"
    waits: dict[str, str] = {}

    def note(text: str) -> None:
        with open(log, "a") as fh:
            fh.write(text + "\n")

    for sid in "abcd":
        def present(analysis, _orig=mods[sid].present, _sid=sid):
            note(f"{_sid}> {os.getpid()}")
            if _sid in waits:
                until = time.monotonic() + 30
                while f"\n{waits[_sid]} " not in "\n" + log.read_text() and time.monotonic() < until:
                    time.sleep(0.005)
            try:
                return _orig(analysis)
            finally:
                note(f"{_sid} {os.getpid()}")

        mods[sid].present = present
    monkeypatch.setattr(sections, "PRESENT_FIRST", ())
    return waits, log


@pytest.mark.parametrize("waits,here", [({"a": "c"}, {"a", "d"}), ({"a": "b>", "b": "c"}, {"a", "c", "d"})],
                         ids=["first-busy", "second-busy"])
def test_the_second_processs_sections_are_presented_by_the_process_free_first(present_sections, waits, here):
    """The second process's sections are offered for presenting one at a time; this process takes what is left once
    it has presented its own (a, then d, analysed after both): while this one draws a, the second draws b and c; while
    the second draws b, this one draws c (refocused here; before, the second drew all of its own, and second-busy
    waited 30 s). The report is the one a single process gives."""
    import os

    wait, log = present_sections
    serial = _run_fake(1)
    log.unlink()
    wait.update(waits)
    assert _run_fake(2) == serial
    drawn = dict(line.split() for line in log.read_text().splitlines() if ">" not in line)
    assert set(drawn) == set("abcd")
    assert {sid for sid, pid in drawn.items() if int(pid) == os.getpid()} == here
