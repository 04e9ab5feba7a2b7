"""The hostile-input corpus of issue 14: every case of tests/malformed_corpus.py, run as a user would run it.

Each case is built at test time (generators and shared fixtures; nothing committed) and run through the CLI in a
forked child (tests/harness.py), two at a time. One test per case asserts, and lists every condition it broke:

* no Python traceback on stdout/stderr; the exit code specified (0 report, 2 refused, 3 fail-on, or the code of
  an interrupted run);
* the problem named: the case's regex matches a line of stderr (refusal) or a ``path: problem`` line of the
  metrics' ``data_problems`` (report);
* the input directory byte-identical before and after (conftest.tree_digest);
* peak RSS under 1 GB, wall time under 60 s (the harness kills the run then): bounds, not benchmarks;
* no temp file left next to the outputs; on a refusal no output written (a file that existed is unchanged), and
  for the argument cases no input read before the refusal; after an interrupt the previous report intact (or a
  complete new one) and no process of the run alive 5 s later;
* on a report: the HTML within 10 MB and the JSON within 20 MB (issue 29), no non-finite number in the metrics, no negative or
  longer-than-a-day duration (``*_ms``) in them, and the case's own check (world size clamped, script-safe page...);
* for the readers' cases (owner ascend, mindinsight, kineto): what the reader kept of the broken input is canonical
  (``reportgen.schema.check`` on every run the CLI read, in the child once the run is over; a refusal reads none).

``REPORTGEN_CORPUS_RESULTS=FILE`` writes what every case did (exit, stderr, data problems, RSS, wall, CPU) as JSON.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from pathlib import Path

import pytest

from reportgen.readers import ascend as _ascend_reader
from reportgen.readers import kineto as _kineto_reader

from conftest import fixture_dir, tree_digest
from harness import RSS_KILL_MB, WALL_LIMIT_S, Job, run_jobs, warm_up
from malformed_corpus import CASES, DAY_MS, build_case

RSS_LIMIT_MB = 1024.0
#: issue 29: the page within 10 MB and the metrics JSON within 20 MB for every case, whatever the input claims
HTML_BUDGET = 10 * 10 ** 6
JSON_BUDGET = 20 * 10 ** 6
MARKER = "analysis-started"
#: the readers' cases: the tables the run read are checked against reportgen.schema in the forked child, after the
#: run (harness hook schema_check), and the problems written to this file in the harness's directory
READERS = ("ascend", "mindinsight", "kineto")
SCHEMA_FILE = "schema.json"
INTERRUPTED = (130, 143, -2, -9, -15)
_EXEMPT_MS = re.compile(r"delta|diff|change|vs|ratio|share|offset", re.I)
_MS_KEY = re.compile(r"(^|_)ms($|_)")


def _digest(root: Path) -> str:
    """tree_digest, or - when a file of the tree cannot be read (the unreadable-file cases) - the same digest with
    that file's content replaced by its error."""
    try:
        return tree_digest(root)
    except OSError:
        h = hashlib.sha256()
        for p in sorted(root.rglob("*")):
            st = p.lstat()
            h.update(f"{p.relative_to(root)}:{st.st_mode}:{st.st_size}:{st.st_mtime_ns}".encode())
            if p.is_symlink():
                h.update(os.readlink(p).encode())
            elif p.is_file():
                try:
                    h.update(p.read_bytes())
                except OSError as exc:
                    h.update(f"unreadable:{exc.errno}".encode())
        return h.hexdigest()


def _file_state(path: Path):
    """A file's content hash, "dir" for a directory, None when absent (or unreadable / not a regular file)."""
    try:
        if path.is_dir():
            return "dir"
        if path.is_file():
            return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"
    return None


def _listing(d: Path) -> set[str] | None:
    try:
        return set(os.listdir(d))
    except OSError:
        return None


def _watched_dirs(c) -> list[Path]:
    """Directories next to the outputs that the test may list: inside the case's tmp, not inside an input."""
    dirs = []
    for out in c.outputs():
        if not str(out):
            continue
        parent = Path(os.path.abspath(out)).parent
        try:
            inside_tmp = Path(os.path.realpath(parent)).is_relative_to(os.path.realpath(c.tmp))
        except OSError:
            inside_tmp = False
        if inside_tmp and parent not in dirs:
            dirs.append(parent)
    if c.out_dir not in dirs:
        dirs.append(c.out_dir)
    return dirs


#: the input size from which the readers decode in worker processes; below it only the sections' second process
#: depends on ``--jobs``
POOL_MIN_BYTES = min(_ascend_reader.PARALLEL_MIN_BYTES, _kineto_reader.PARALLEL_MIN_BYTES)


def _tree_bytes(root: Path) -> int:
    """The bytes the readers would size the input by (a symlinked file counts as the file it names)."""
    total = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            try:
                total += os.stat(os.path.join(dirpath, f)).st_size
            except OSError:
                pass
    return total


def _one_process(c) -> bool:
    """Run the case with ``-j 1`` (no second process for the sections: ~15 % of a small run's CPU): a generated run
    given as RUN_DIR only, with no command line of its own, no ``--jobs``, no signal or hook of its own, and an input
    too small for the readers' worker pools. Every other case - the shared fixtures' (fx_*) and the controls, the
    argument, output, signal and pool cases - runs as a user's default does (two processes for the sections of a
    small run: tests/test_sections_parallel.py checks that both give one report)."""
    if c.mode != "fork" or c.argv is not None or c.signal or c.hooks or c.name.startswith(("fx_", "control_")):
        return False
    if any(a in ("-j", "--jobs") or a.startswith(("-j", "--jobs=")) for a in map(str, c.args)):
        return False
    run = Path(c.run)
    return run.is_dir() and not run.is_symlink() and _tree_bytes(run) < POOL_MIN_BYTES


def _selected(session) -> list[str]:
    names = []
    for item in session.items:
        if getattr(item, "originalname", None) == "test_corpus_case" and Path(str(item.fspath)) == Path(__file__):
            names.append(item.callspec.params["name"])
    return names


@pytest.fixture(scope="session")
def corpus(request, tmp_path_factory):
    """Build and run every selected case (two at a time); name -> record of what happened."""
    root = tmp_path_factory.mktemp("corpus")
    records: dict[str, dict] = {}
    jobs, order = [], []
    t_build = time.monotonic()
    for name in _selected(request.session):
        rec = records[name] = {"name": name}
        try:
            c = build_case(name, root / name, fixture=fixture_dir)
        except BaseException as exc:  # noqa: BLE001 - pytest's skip/fail outcomes too: re-raised by the test
            rec["build_error"] = exc
            continue
        rec["case"] = c
        if c.skip:
            continue
        (c.tmp / "_run").mkdir(exist_ok=True)  # the harness's stdout/stderr files, before any listing
        rec["digest_before"] = {str(p): _digest(p) for p in c.protect}
        rec["outputs_before"] = {str(p): _file_state(Path(p)) for p in c.outputs() if str(p)}
        rec["dirs_before"] = {str(d): _listing(d) for d in _watched_dirs(c)}
        hooks = list(c.hooks)
        if c.mode == "fork":
            hooks.insert(0, ("mark_analysis", str(c.tmp / MARKER)))
            if c.owner in READERS:
                hooks.append(("schema_check", str(c.tmp / "_run" / SCHEMA_FILE)))
        jobs.append(Job(argv=c.command() + (["-j", "1"] if _one_process(c) else []), workdir=c.tmp / "_run",
                        mode=c.mode, cwd=c.cwd, hooks=hooks, signal=c.signal))
        order.append(name)
    build_s = time.monotonic() - t_build
    undo = warm_up()
    t_run = time.monotonic()
    try:
        results = run_jobs(jobs, parallel=2)
    finally:
        undo()
    run_s = time.monotonic() - t_run
    for name, res in zip(order, results):
        rec = records[name]
        c = rec["case"]
        rec["result"] = res
        rec["digest_after"] = {str(p): _digest(p) for p in c.protect}
        rec["outputs_after"] = {str(p): _file_state(Path(p)) for p in c.outputs() if str(p)}
        rec["dirs_after"] = {str(d): _listing(d) for d in _watched_dirs(c)}
        rec["marker"] = (c.tmp / MARKER).exists()
    cpu = sum(r.cpu_s for r in results)
    tr = request.config.pluginmanager.get_plugin("terminalreporter")
    capman = request.config.pluginmanager.get_plugin("capturemanager")
    if tr is not None and capman is not None and results:
        with capman.global_and_fixture_disabled():
            tr.write_line(f"\ncorpus: {len(results)} cases built in {build_s:.1f} s, run in {run_s:.1f} s wall "
                          f"(2 at a time), {cpu:.1f} s CPU in the runs; slowest "
                          + ", ".join(f"{n} {r.wall_s:.1f} s" for n, r in
                                      sorted(zip(order, results), key=lambda x: -x[1].wall_s)[:3]))
    out = os.environ.get("REPORTGEN_CORPUS_RESULTS")
    if out:
        _dump(out, records, build_s, run_s)
    return records


def _dump(path: str, records: dict, build_s: float, run_s: float) -> None:
    rows = []
    for name, rec in records.items():
        c, res = rec.get("case"), rec.get("result")
        row = {"name": name}
        if c is not None:
            row.update(owner=c.owner, klass=c.klass, family=c.family, note=c.note, expected=list(c.expected_exits()))
        if res is not None:
            row.update(exit=res.exit, stderr=res.stderr[-4000:], rss_mb=round(res.peak_rss_mb, 1),
                       wall_s=round(res.wall_s, 2), cpu_s=round(res.cpu_s, 2), timed_out=res.timed_out,
                       rss_killed=res.rss_killed, leftover=res.leftover)
            for key, p in (("html_mb", c.output), ("json_mb", c.json)):
                try:
                    row[key] = round(Path(p).stat().st_size / 1e6, 2) if p and Path(p).is_file() else None
                except OSError:
                    row[key] = None
            doc = _metrics(c) if res.exit in (0, 3) else None
            if doc:
                row["data_problems"] = [f"{p.get('path')}: {p.get('problem')}" for p in doc.get("data_problems", [])]
        if "build_error" in rec:
            row["build_error"] = repr(rec["build_error"])
        rows.append(row)
    Path(path).write_text(json.dumps({"build_s": build_s, "run_s": run_s, "cases": rows}, indent=1))


def _metrics(c) -> dict | None:
    if not c.json:
        return None
    try:
        p = Path(c.json)
        if not p.is_file() or p.stat().st_size > JSON_BUDGET:  # never open a FIFO (it would block)
            return None
        return json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _problem_lines(doc: dict | None) -> list[str]:
    return [f"{p.get('path')}: {p.get('problem')}" for p in (doc or {}).get("data_problems", [])
            if isinstance(p, dict)]


def _number_problems(doc) -> list[str]:
    """Non-finite numbers anywhere; negative or longer-than-a-day ``*_ms`` values (never a silently wrong number)."""
    found: list[str] = []

    def walk(x, path, key):
        if len(found) >= 5:
            return
        if isinstance(x, dict):
            for k, v in x.items():
                walk(v, f"{path}.{k}", str(k))
        elif isinstance(x, list):
            for v in x:
                walk(v, f"{path}[]", key)
        elif isinstance(x, float) and not math.isfinite(x):
            found.append(f"{path} = {x}")
        elif isinstance(x, (int, float)) and not isinstance(x, bool) and _MS_KEY.search(key) \
                and not _EXEMPT_MS.search(key) and not 0 <= x <= DAY_MS:
            found.append(f"{path} = {x!r} ms")
    walk(doc, "", "")
    return found


def _short(text: str, n: int = 300) -> str:
    text = text.strip().replace("\n", " | ")
    return text if len(text) <= n else text[:n] + "…"


@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_case(name, corpus):
    rec = corpus[name]
    if "build_error" in rec:
        raise rec["build_error"]
    c = rec["case"]
    if c.skip:
        pytest.skip(c.skip)
    res = rec["result"]
    bad: list[str] = []
    code = res.exit
    if res.timed_out:
        bad.append(f"still running after {WALL_LIMIT_S:.0f} s (killed)")
    if res.rss_killed:
        bad.append(f"resident memory passed {RSS_KILL_MB:.0f} MB (killed at once)")
    if "Traceback" in res.stdout or "Traceback" in res.stderr:
        bad.append("a traceback was printed: " + _short(res.stderr[res.stderr.find("Traceback"):], 400))
    if code not in c.expected_exits():
        bad.append(f"exit {code}, expected {' or '.join(map(str, c.expected_exits()))}")
    doc = _metrics(c) if code in (0, 3) else None
    problems = _problem_lines(doc)
    if code == 0:
        lines = problems
    elif code == 3:
        lines = problems + res.stderr.splitlines()
    else:
        lines = res.stderr.splitlines()
    # the case's own directory is in every path and its name holds the case's key words: match without it
    prefixes = {str(c.tmp) + os.sep, os.path.realpath(c.tmp) + os.sep}
    for prefix in prefixes:
        lines = [line.replace(prefix, "") for line in lines]
    regex = c.regex_for(code) if code in c.expected_exits() else c.regex_for(c.expected_exits()[0])
    if regex and not any(re.search(regex, line) for line in lines):
        where = {0: "data_problems", 3: "data_problems or stderr"}.get(code, "stderr")
        bad.append(f"problem not named: no line of {where} matches {regex!r}")
    if c.not_named:
        hit = [line for line in lines if re.search(c.not_named, line)]
        if hit:
            bad.append(f"says what it must not ({c.not_named!r}): {_short(hit[0], 200)}")
    for p, before in rec["digest_before"].items():
        if rec["digest_after"][p] != before:
            bad.append(f"the input {p} changed")
    if res.peak_rss_mb > RSS_LIMIT_MB:
        bad.append(f"peak RSS {res.peak_rss_mb:.0f} MB > {RSS_LIMIT_MB:.0f} MB")
    if c.owner in READERS and c.mode == "fork":
        try:
            schema_problems = json.loads((c.tmp / "_run" / SCHEMA_FILE).read_text())
        except (OSError, ValueError) as exc:
            schema_problems = None if code in INTERRUPTED else [f"no schema check written ({exc})"]
        if schema_problems:
            bad.append("tables not canonical (reportgen.schema): " + _short("; ".join(schema_problems), 600))
    if c.signal and not res.signal_sent:
        bad.append("the signal was never sent: no worker process appeared while the run lasted")
    if res.leftover:
        bad.append(f"{len(res.leftover)} process(es) of the run still alive 5 s after it ended")
    outputs = {str(p) for p in c.outputs()}
    names = {Path(p).name for p in outputs}
    for d, before in rec["dirs_before"].items():
        after = rec["dirs_after"][d]
        if before is None or after is None:
            continue
        extra = sorted(after - before - names)
        if extra:
            bad.append(f"left next to the output in {d}: {', '.join(extra[:5])}")
    before_out, after_out = rec["outputs_before"], rec["outputs_after"]
    if code not in (0, 3):
        said_nothing = "nothing written" in res.stderr
        for p in outputs:
            if after_out.get(p) == before_out.get(p):
                continue
            if code == 2 or said_nothing:
                bad.append(f"{p} was written although " + ("the run was refused" if code == 2 else
                                                          "it says 'nothing written'"))
            elif code in INTERRUPTED and c.previous is not None and p == str(c.output):
                try:
                    text = Path(p).read_text(encoding="utf-8", errors="replace")
                except OSError:
                    text = ""
                if not text.rstrip().endswith("</html>"):
                    bad.append(f"{p}: the previous report is neither intact nor replaced by a complete one")
        if code == 2 and c.refuse_early and rec["marker"]:
            bad.append("refused only after reading the input (must be refused before any analysis)")
    else:
        for p in (c.output, c.json):
            if p and not Path(p).is_file():
                bad.append(f"exit {code} but {p} was not written")
        html = None
        try:
            size = Path(c.output or "").stat().st_size
            if not Path(c.output).is_file():
                pass
            elif size > HTML_BUDGET:
                bad.append(f"HTML of {size / 1e6:.0f} MB > {HTML_BUDGET / 1e6:.0f} MB")
            else:
                html = Path(c.output).read_text(encoding="utf-8", errors="replace")
        except OSError:
            pass
        if c.json:
            try:
                size = Path(c.json).stat().st_size
                if size > JSON_BUDGET:
                    bad.append(f"metrics JSON of {size / 1e6:.0f} MB > {JSON_BUDGET / 1e6:.0f} MB")
            except OSError:
                pass
            if doc is None and Path(c.json).is_file():
                bad.append("the metrics JSON does not parse")
        if doc is not None:
            nums = _number_problems(doc)
            if nums:
                bad.append("metrics hold impossible numbers: " + "; ".join(nums))
        if c.check is not None:
            why = c.check(doc, html)
            if why:
                bad.append(why)
    if bad:
        seen = (" | data_problems: " + _short(" || ".join(problems), 600)) if problems else ""
        pytest.fail(f"[{c.owner}] {c.note}\n  - " + "\n  - ".join(bad)
                    + f"\n  observed: exit {code}; stderr: {_short(res.stderr, 500)}{seen}", pytrace=False)
