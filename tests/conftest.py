"""Shared test helpers: locating ../shared fixtures (a missing fixture fails under CI, skips elsewhere)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# every Vega-Lite spec made during the tests is validated against the schema (reportgen/charts.py)
os.environ.setdefault("REPORTGEN_VALIDATE_SPECS", "1")
# numpy's OpenBLAS on one thread in the test processes and every command they start, as the reportgen command does
# (cli.one_blas_thread): its threads spin at import, ~0.1-0.25 CPU-s a process on two cores
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def shared_root() -> Path:
    return Path(os.environ.get("REPORTGEN_SHARED") or (REPO.parent / "shared"))


def need(path: Path) -> Path:
    """Return ``path`` if it exists; otherwise fail under CI (CI is set) or skip with the reason."""
    if path.exists():
        return path
    unavailable(f"fixture {path} is missing (set REPORTGEN_SHARED to the shared/ folder with fixtures/ and "
                f"reference/)")


def unavailable(reason: str):
    """A prerequisite is missing: fail under CI (CI is set: .ci/run installs every one), else skip with why."""
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def need_module(name: str):
    """The module ``name`` imported, or :func:`unavailable` (pytest.importorskip skipped under CI too)."""
    try:
        return __import__(name)
    except ImportError:
        unavailable(f"the Python module {name!r} is not installed (pip install -e '.[test]')")


def need_tool(name: str, package: str) -> str:
    """The path of the command ``name``, or :func:`unavailable` naming the Debian ``package`` that has it."""
    import shutil

    found = shutil.which(name)
    if not found:
        unavailable(f"{name} is not installed (apt-get install {package}; .ci/run installs it)")
    return found


def fixture_dir(*parts: str) -> Path:
    return need(shared_root().joinpath("fixtures", *parts))


def reference_file(*parts: str) -> Path:
    return need(shared_root().joinpath("reference", *parts))


def traced_peak(call):
    """``call()``'s result and the peak of Python's traced allocations while it ran, above those at its start
    (tracemalloc started for the call unless it is already running): a resource bound, not a timing."""
    import tracemalloc

    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        result = call()
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        if started:
            tracemalloc.stop()


def tree_digest(root: Path) -> str:
    """Digest of every file name, size, mode and content below root (to prove inputs are untouched)."""
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        st = p.lstat()
        h.update(os.fsencode(p.relative_to(root)))  # a name that is not UTF-8 too
        h.update(f"{st.st_mode}:{st.st_size}:{st.st_mtime_ns}".encode())
        if p.is_file():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def pp2x4() -> Path:
    return fixture_dir("mindinsight", "mi_cluster_propose_pp2x4")


class ReportCache:
    """Reports built once per test session and shared by the test files that only read them (browser and HTML
    checks): ``get(source, *args)`` -> the HTML path, with the metrics JSON beside it (``.json``). ``source`` is a
    run directory or "demo". ``-j N`` is not part of the key: the output does not depend on it (built with ``-j 1``
    unless ``args`` say otherwise: one process, no second one for the sections). A test that
    changes its output file must not use this cache."""

    def __init__(self, root: Path):
        self.root = root
        self.built: dict[tuple, Path] = {}

    @staticmethod
    def key(source, args) -> tuple:
        args, out, skip = list(args), [], False
        for a in args:
            if skip:
                skip = False
            elif a in ("-j", "--jobs"):
                skip = True
            else:
                out.append(a)
        return (str(source), tuple(out))

    def peek(self, source, *args) -> Path | None:
        return self.built.get(self.key(source, args))

    def put(self, source, args, path: Path) -> None:
        self.built.setdefault(self.key(source, args), path)

    def get(self, source, *args) -> Path:
        k = self.key(source, args)
        if k not in self.built:
            from reportgen.cli import main

            out = self.root / f"report{len(self.built)}.html"
            given = any(a in ("-j", "--jobs") or str(a).startswith(("-j", "--jobs=")) for a in args)
            # pools are not tested here: one process unless the caller asks (then its own arguments, -j included)
            argv = [str(source), "-o", str(out), "--json", str(out.with_suffix(".json")), "--quiet",
                    *(args if given else (*k[1], "-j", "1"))]
            assert main(argv) in (0, 3), f"reportgen {' '.join(argv)} failed"
            self.built[k] = out
        return self.built[k]


@pytest.fixture(scope="session")
def report_cache(tmp_path_factory) -> ReportCache:
    return ReportCache(tmp_path_factory.mktemp("reports"))


class _Driver:
    """The Playwright driver of this test process and the Chromium launched from it, shared by consecutive test
    files that use a browser (a driver and a Chromium per file cost ~1.4 CPU-s each; module-scoped fixtures hold
    them, tests open pages in contexts of their own). Closed as soon as the next test is in a file that uses none
    (:func:`pytest_runtest_teardown`): while a sync Playwright driver lives, the main thread's asyncio loop
    counts as running, which a test that runs asyncio itself (dask) must not find."""

    def __init__(self):
        self.cm = self.p = self.chromium = None

    def playwright(self):
        if self.p is None:
            try:
                from playwright.sync_api import sync_playwright
            except ImportError:
                unavailable("the playwright Python package is not installed (pip install playwright; "
                            "no 'playwright install' needed, the system Chromium is used)")
            cm = sync_playwright()
            self.p, self.cm = cm.__enter__(), cm
        return self.p

    def browser(self):
        if self.chromium is not None and not self.chromium.is_connected():  # crashed: the next file gets a new one
            self.chromium = None
        if self.chromium is None:
            from test_browser import launch_chromium

            self.chromium = launch_chromium(self.playwright())
        return self.chromium

    def close(self) -> None:
        chromium, cm = self.chromium, self.cm
        self.cm = self.p = self.chromium = None
        try:
            if chromium is not None:
                chromium.close()
        finally:
            if cm is not None:
                cm.__exit__(None, None, None)


_DRIVER = _Driver()
#: fixtures that use the driver (test_browser's ``browser``, test_report_quality's ``qbrowser``)
_DRIVER_FIXTURES = {"browser", "qbrowser"}
_BROWSER_FILES: dict[int, set] = {}


def _browser_files(session) -> set:
    """The test files of which a selected test uses the driver."""
    if id(session) not in _BROWSER_FILES:
        _BROWSER_FILES[id(session)] = {str(i.path) for i in session.items
                                       if _DRIVER_FIXTURES & set(getattr(i, "fixturenames", ()))}
    return _BROWSER_FILES[id(session)]


@pytest.hookimpl(hookwrapper=True, trylast=True)
def pytest_runtest_teardown(item, nextitem):
    """After a test's fixtures are torn down: close the shared driver when the next test is in a file that uses no
    browser (or there is none). Within a file, and from one browser file to the next, it stays open. ``trylast``:
    inside other wrappers of the teardown, so bench/suite_cpu.py counts the driver's and Chromium's CPU (reaped
    here) in the test's teardown."""
    yield
    if _DRIVER.p is not None and (nextitem is None or (nextitem.path != item.path
                                                       and str(nextitem.path) not in _browser_files(item.session))):
        _DRIVER.close()


# ------------------------------------------------------------------------------------------ shared across files
#: test files run on the same xdist worker as another file (``--dist loadfile`` schedules by file; this maps a file to
#: the file whose group it joins), so that what they build once per process (:func:`analysed`) serves them all
SHARED_SCOPES = {
    "tests/test_consistency.py": "tests/test_golden.py",
    "tests/test_spec_schema.py": "tests/test_golden.py",
    "tests/test_advisor.py": "tests/test_golden.py",
    "tests/test_evidence.py": "tests/test_golden.py",
    "tests/test_synth_ascend.py": "tests/test_advisor_groundtruth.py",
    "tests/test_synth_kineto.py": "tests/test_advisor_groundtruth.py",
    "tests/test_synth_mindinsight_anomalies.py": "tests/test_advisor_groundtruth.py",
    # the browser files: one Playwright driver and Chromium (_Driver) and one ReportCache for them all
    "tests/test_charts_browser.py": "tests/test_browser.py",
    "tests/test_evidence_browser.py": "tests/test_browser.py",
    "tests/test_execution.py": "tests/test_browser.py",
    "tests/test_hostile_browser.py": "tests/test_browser.py",
    "tests/test_narrow_browser.py": "tests/test_browser.py",
    "tests/test_page_budget_browser.py": "tests/test_browser.py",
    "tests/test_report_quality.py": "tests/test_browser.py",
    "tests/test_tables_browser.py": "tests/test_browser.py",
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """``--dist loadfile`` with the groups of :data:`SHARED_SCOPES` (each group is one unit of work)."""
    if getattr(config.option, "dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class GroupedFiles(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            name = nodeid.split("::", 1)[0]
            return SHARED_SCOPES.get(name, name)

    return GroupedFiles(config, log)


_ANALYSED: dict[str, tuple] = {}


def analysed(source, keep: bool = True) -> tuple:
    """``(run, outcomes, metrics)`` of a run directory or "demo", analysed as the CLI does (every section, the
    registry's section options), once per process: the files of one :data:`SHARED_SCOPES` group share them. Read
    only: a test that changes the run, an outcome or the metrics must analyse its own. ``keep=False``: not kept."""
    key = str(source)
    if key in _ANALYSED:
        return _ANALYSED[key]
    from reportgen import metrics
    from reportgen.cli import load_run, section_options
    from reportgen.readers import read_run
    from reportgen.sections import run_sections

    run = load_run("demo") if key == "demo" else read_run(Path(source))
    outcomes = run_sections(run, section_options(run))
    out = (run, outcomes, metrics.build(run, outcomes))
    if keep:
        _ANALYSED[key] = out
    return out


_GENERATED: dict[tuple, tuple] = {}


def generated_report(tmp_path_factory, write, spec) -> tuple[dict, dict, Path, Path]:
    """``(ground truth, metrics, run directory, HTML report)`` of the run ``write(root, spec)`` generates (a writer
    of reportgen.synth), reported by the CLI (``-q -j 1`` and the ground truth's ``cli_args``); once per process for the
    same writer and spec: the generator tests and tests/test_advisor_groundtruth.py (one SHARED_SCOPES group) report
    the same clean and anomalous runs. Read only: a test that changes the run or the outputs makes its own."""
    key = (write.__module__, write.__qualname__, repr(spec))
    if key not in _GENERATED:
        import json

        from reportgen.cli import main

        tmp = tmp_path_factory.mktemp("generated")
        root, html, out = tmp / "run", tmp / "r.html", tmp / "m.json"
        gt = write(root, spec)
        # -j 1: the sections in one process (the report is the one two give: tests/test_sections_parallel.py)
        assert main([str(root), "-o", str(html), "--json", str(out), "-q", "-j", "1", *gt.get("cli_args", [])]) == 0
        _GENERATED[key] = (gt, json.loads(out.read_text(encoding="utf-8")), root, html)
    return _GENERATED[key]
