"""Command line: ``reportgen RUN_DIR -o report.html [--json metrics.json] [--title TEXT]`` and ``reportgen demo``.

Exit codes: 0 ok; 2 bad usage, unusable input or an output that cannot be written (one line naming the
file and the problem); 3 a --fail-on condition held; 1 unexpected failure; 130 / 143 interrupted by SIGINT /
SIGTERM. Every argument and output path is checked before the run is read (:func:`preflight`): an output
inside an input, two outputs naming one file or an output that cannot be created is refused before any
analysis. Outputs are written to temp files and renamed together at the end, so a failed or interrupted run
leaves the previous report as it was; the input directory is only ever read.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import json
import math
import re
import logging
import os
import signal
import stat
import sys
import tempfile
import threading
import traceback
from pathlib import Path

from . import __version__, limits
from .errors import InputError

EXIT_OK, EXIT_FAILURE, EXIT_INPUT, EXIT_FAIL_ON = 0, 1, 2, 3
#: --jobs ceiling (one process per rank file at most; more is never useful on one machine)
MAX_JOBS = 1024
#: --device-memory-gb / --peak-tflops ceilings: larger values are typing errors, not devices
MAX_DEVICE_MEMORY_GB = 1e6
MAX_PEAK_TFLOPS = 1e7


def one_line(text: str) -> str:
    """``text`` with control and other unprintable characters escaped: a message is always one line."""
    return "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in str(text))


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # usage + one line, whatever the user typed
        super().error(one_line(message))


def _parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="reportgen",
        description="Turn the profiler output of one distributed training run (every rank) into one "
                    "self-contained, offline HTML report.",
        epilog="'reportgen demo -o demo.html' writes a report of a generated demo run "
               "(use ./demo for a run directory that is really named demo). "
               "Subcommand: 'reportgen reduce RANK_DIR... -o node.reduced' reduces the ranks a node holds to one "
               "compact file; 'reportgen DIR' reads the .reduced files found in DIR ('reportgen reduce --help').",
    )
    p.add_argument("run", metavar="RUN_DIR", help="run directory with every rank's profiler output, or 'demo'")
    p.add_argument("-o", "--output", default="report.html", help="HTML report to write (default: report.html)")
    p.add_argument("--json", dest="json_path", metavar="METRICS_JSON", help="also write every number as JSON")
    p.add_argument("--title", help="report title (default: the run directory name)")
    from .readers.registry import FORMATS

    p.add_argument("--format", dest="fmt", choices=list(FORMATS),
                   help="read this input family when the directory holds more than one (default: detect; "
                        "a directory with several is refused with a hint)")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="decode ranks in N parallel processes (default: the number of cores; Kineto traces and Ascend "
                        "rank directories, from 16 MiB of input); N > 1 also analyses the sections of a run of up to 32 "
                        "MiB of tables in two processes (the same report as -j 1)")
    p.add_argument("--dask", metavar="SCHEDULER_ADDRESS",
                   help="decode the ranks on this Dask distributed cluster (e.g. tcp://head:8786; needs the dask "
                        "extra, pip install '.[dask]', here and on the workers, which must see the files at the same "
                        "paths)")
    p.add_argument("--dask-timeout", type=float, default=None, metavar="S",
                   help="seconds to wait for the Dask scheduler to answer (default 10)")
    p.add_argument("--comm-pattern", action="append", default=[], metavar="REGEX",
                   help="PyTorch traces: also count GPU kernels whose name matches REGEX as communication "
                        "(repeatable; NCCL/RCCL, DeepEP and common custom all-reduce kernels are built in)")
    p.add_argument("--device-memory-gb", type=float, default=None, metavar="GB",
                   help="device memory capacity (GB = 10^9 B) when the data does not record it")
    p.add_argument("--peak-tflops", type=float, default=None, metavar="TFLOPS",
                   help="peak TFLOP/s of one device, for MFU (overrides the peak known for the device the data names)")
    p.add_argument("--ranks", default=None, metavar="LIST",
                   help="ranks to show in the per-rank drill-down besides the slowest, fastest and median "
                        "(e.g. 0,3,8-11)")
    p.add_argument("--compare-ranks", metavar="A,B", default=None,
                   help="the pair of the rank comparison (default: the slowest rank and the median rank of its stage)")
    p.add_argument("--timeline", metavar="MERGED_JSON",
                   help="also write every rank's timeline merged into one Chrome trace event file (.json or .json.gz) "
                        "that Perfetto and chrome://tracing open; --ranks picks the ranks (default: all)")
    p.add_argument("--timeline-detail", choices=["summary", "detail"], default="summary",
                   help="summary: steps and the overlap analysis (computation / exposed communication / free) per "
                        "rank; detail: steps and every device operation per stream / communication plane")
    p.add_argument("--timeline-steps", default=None, metavar="LIST",
                   help="steps to write into the merged timeline, e.g. 5,8-10 (default: every step)")
    p.add_argument("--include-warmup", action="store_true",
                   help="keep warm-up steps (leading steps far slower than the rest) in averages, rankings and "
                        "colour scales; by default they are listed, labelled and left out")
    p.add_argument("--window", metavar="N|NAME", default=None,
                   help="several profiling windows per rank (dynamic profiling): read window N (1 = the earliest, "
                        "as the run summary lists them) or the one named NAME (default: the newest complete one)")
    p.add_argument("--baseline", metavar="RUN_OR_METRICS_JSON",
                   help="compare with another run directory or a metrics JSON written by --json")
    p.add_argument("--fail-on", action="append", default=[], metavar="EXPR",
                   help="exit with code 3 when EXPR holds, e.g. 'step_ms.median>1.05*baseline' or "
                        "'finding.severity>=high' (repeatable; the report is still written)")
    p.add_argument("--static", action="store_true",
                   help="pre-render every chart to inline SVG and use no JavaScript (for CI servers whose "
                        "Content-Security-Policy blocks scripts, and for mail bodies)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    p.add_argument("--version", action="version", version=f"reportgen {__version__}")
    return p


def _compare_pair(text: str) -> list[int]:
    """``--compare-ranks A,B``: two different ranks."""
    parts = [p.strip() for p in text.split(",")]
    ranks = [int(p) for p in parts if re.fullmatch(r"\d{1,7}", p)] if len(parts) == 2 else []
    if len(ranks) != 2 or ranks[0] == ranks[1]:
        raise InputError(None, f"--compare-ranks {one_line(text)}: give two different ranks, e.g. 5,3")
    return ranks


def _name_ranks_not_in_run(run, options) -> None:
    """``--ranks`` naming ranks the run does not have: said on stderr and in the data problems (they were dropped
    without a word: issue 29)."""
    asked = list((options or {}).get("ranks") or [])
    have = set(int(r) for r in run.ranks)
    missing = [r for r in asked if r not in have]
    if not missing or not have:
        return
    from .fmt import rank_ranges

    text = (f"--ranks: rank{'s' if len(missing) > 1 else ''} {rank_ranges(missing[:1000])} not in this run (it has "
            f"ranks {rank_ranges(sorted(have))}); not drawn")
    run.problem("--ranks", text)
    with contextlib.suppress(OSError, ValueError):
        print(f"reportgen: {text}", file=sys.stderr, flush=True)


def _parse_ranks(text: str, flag: str = "--ranks") -> list[int]:
    """'0,3,8-11' -> [0, 3, 8, 9, 10, 11] (``flag``: the option named in errors)."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise InputError(None, f"{flag} {text!r}: expected numbers and ranges such as 0,3,8-11")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo or hi - lo > 100_000:
            raise InputError(None, f"{flag} {text!r}: range {part} is not valid")
        out.extend(range(lo, hi + 1))
    return sorted(set(out))


_OS_PROBLEMS = {
    errno.ELOOP: "symbolic link loop (a link in the path leads back to itself)",
    errno.ENOENT: "no such file or directory",
    errno.ENOTDIR: "no such file or directory (a part of the path is not a directory)",
    errno.ENAMETOOLONG: "file name too long",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EROFS: "read-only file system",
    errno.ENOSPC: "no space left on the device",
}


def _os_problem(exc: OSError) -> str:
    return _OS_PROBLEMS.get(exc.errno) or (exc.strerror or str(exc)).lower()


def _stat(path: str, what: str) -> os.stat_result:
    """``os.stat`` of an input; a missing or looping path is a one-line InputError."""
    try:
        return os.stat(path)
    except OSError as exc:
        problem = _os_problem(exc)
        if exc.errno == errno.ENOENT and os.path.islink(path):
            problem = "broken symbolic link (its target does not exist)"
        raise InputError(path, f"{what}: {problem}" if what else problem) from None
    except ValueError as exc:  # NUL in the path
        raise InputError(one_line(path), f"{what or 'path'}: {exc}") from None


def _inputs(args) -> list[tuple[str, str, os.stat_result]]:
    """(what, path, stat) of every input: the run directory (not for ``demo``) and the --baseline."""
    found = []
    if args.run != "demo":
        found.append(("the run directory", args.run, _stat(args.run, "")))
    if args.baseline is not None:
        st = _stat(args.baseline, "--baseline")
        found.append((f"the --baseline {'run directory' if stat.S_ISDIR(st.st_mode) else 'file'}", args.baseline,
                      st))
    return found


def _ident(st: os.stat_result) -> tuple[int, int]:
    return st.st_dev, st.st_ino


def _refuse_inside_inputs(flag: str, path: str, inputs) -> None:
    """Refuse an output that is an input or lies below one: the output with every symbolic link resolved and
    each directory above it are compared with the inputs by device and inode (so bind mounts and links count)."""
    real = Path(os.path.realpath(path))
    for what, where, ist in inputs:
        for n, candidate in enumerate([real, *real.parents]):
            try:
                if _ident(os.stat(candidate)) != _ident(ist):
                    continue
            except OSError:
                continue
            if n == 0:
                problem = f"is {what} ({where})"
            elif os.path.isfile(real):
                problem = f"would replace a file of {what} {where}"
            else:
                problem = f"is inside {what} {where}"
            raise InputError(path, f"{flag}: {problem}; reportgen never changes its input, write the output "
                                   "elsewhere")


def _check_output(flag: str, path: str, inputs: list[tuple[str, str, os.stat_result]]) -> None:
    """Refuse an output that would destroy an input or that cannot be written (see the module doc)."""
    if path == "":
        raise InputError(None, f"{flag} '': the output file name is empty; give a file name such as report.html")
    if "\0" in path:
        raise InputError(one_line(path), f"{flag}: not a valid file name (it contains a NUL character)")
    if path == "-":  # the usual "standard output": never silently a file named '-' (issue 31)
        raise InputError(None, f"{flag} -: writing to standard output is not supported (the report is written whole "
                               "to a file, then renamed onto it); give a file name (./- for a file named '-')")
    _refuse_inside_inputs(flag, path, inputs)
    name = os.path.basename(path)
    parent = os.path.dirname(path) or "."
    if name in ("", ".", ".."):
        raise InputError(path, f"{flag}: is a directory; give a file name for the report")
    try:
        pst = os.stat(parent)
    except OSError as exc:
        problem = {errno.ENOENT: "output directory does not exist",
                   errno.ENOTDIR: "output directory does not exist (a part of it is a file)"}.get(exc.errno)
        raise InputError(path, f"{flag}: {problem or 'output directory: ' + _os_problem(exc)}") from None
    if not stat.S_ISDIR(pst.st_mode):
        raise InputError(path, f"{flag}: output directory {parent} is not a directory")
    try:
        name_max = os.pathconf(parent, "PC_NAME_MAX")
    except (OSError, ValueError):
        name_max = 255
    size = len(os.fsencode(name))
    if size > name_max:
        raise InputError(path, f"{flag}: file name too long ({size} bytes; this file system allows {name_max})")
    try:
        lst = os.lstat(path)
    except FileNotFoundError:
        lst = None
    except OSError as exc:
        raise InputError(path, f"{flag}: {_os_problem(exc)}") from None
    if lst is not None and stat.S_ISLNK(lst.st_mode):  # os.replace would replace the link, not its target
        raise InputError(path, f"{flag}: is a symbolic link (to {os.readlink(path)}); the report would replace "
                               "the link: give its target or another name")
    if lst is not None and stat.S_ISDIR(lst.st_mode):
        raise InputError(path, f"{flag}: is a directory; give a file name for the report")
    if lst is not None and not stat.S_ISREG(lst.st_mode):
        raise InputError(path, f"{flag}: is not a regular file (a device, pipe or socket); give a file name")
    from .render import temp_beside  # the very temp file the write will use, created and removed now

    try:
        fd, tmp = temp_beside(path)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM):
            problem = "output directory is not writable"
        else:
            problem = f"cannot create a file in {parent}: {_os_problem(exc)}"
        raise InputError(path, f"{flag}: {problem}") from None
    os.close(fd)
    os.unlink(tmp)


def _same_file(a: str, b: str) -> bool:
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def preflight(args) -> None:
    """Refuse bad arguments and outputs (see the module doc) before the run is read."""
    if args.jobs is not None and not 1 <= args.jobs <= MAX_JOBS:
        raise InputError(None, f"--jobs {args.jobs}: must be between 1 and {MAX_JOBS}")
    if args.dask is not None and not args.dask.strip():
        raise InputError(None, "--dask '': give the Dask scheduler's address, e.g. tcp://head-node:8786")
    if args.dask is not None:
        from .engine import dask_address_problem

        why = dask_address_problem(args.dask)
        if why:
            raise InputError(None, f"--dask {one_line(args.dask)[:200]}: {why}")
    if args.dask_timeout is not None:
        if not (math.isfinite(args.dask_timeout) and 0 < args.dask_timeout <= 3600):
            raise InputError(None, f"--dask-timeout {args.dask_timeout}: seconds between 0 and 3600")
        from . import engine

        engine.CONNECT_TIMEOUT_S = args.dask_timeout
    for pattern in args.comm_pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise InputError(None, f"--comm-pattern {pattern!r}: not a regular expression ({exc})") from None
        risk = limits.regex_problem(pattern)
        if risk:
            raise InputError(None, f"--comm-pattern {one_line(pattern)[:80]!r}: {risk}; write it without nested "
                                   "repeats (a plain name, or names joined with |)")
    for name, ceiling in (("device_memory_gb", MAX_DEVICE_MEMORY_GB), ("peak_tflops", MAX_PEAK_TFLOPS)):
        value = getattr(args, name)
        if value is not None and not (math.isfinite(value) and 0 < value <= ceiling):
            raise InputError(None, f"--{name.replace('_', '-')} {value}: must be a positive number up to "
                                   f"{ceiling:g}")
    from . import compare

    for expr in args.fail_on:  # the syntax and the numbers now; whether it holds after the analysis
        compare.check_fail_on(expr, {}, {})
    inputs = _inputs(args)
    _check_output("-o", args.output, inputs)
    if getattr(args, "timeline", None) is not None:
        _check_output("--timeline", args.timeline, inputs)
        for flag, other in (("-o", args.output), ("--json", args.json_path)):
            if other is not None and _same_file(args.timeline, other):
                raise InputError(args.timeline, f"--timeline: is the same file as {flag}; give it another name")
    if args.json_path is not None:
        # a rolling baseline (--baseline m.json --json m.json: compare with last time, then replace it) is allowed:
        # the baseline file is read whole before anything is written, and the new one replaces it atomically
        _check_output("--json", args.json_path, [i for i in inputs if i[0] != "the --baseline file"])
        if _same_file(args.output, args.json_path):
            raise InputError(args.json_path, "--json: is the same file as the report (-o); give it another name")


def load_run(run_arg: str, progress=None, jobs: int | None = None, comm_patterns: tuple[str, ...] = (),
             fmt: str | None = None, dask: str | None = None, window: str | None = None):
    """The run of ``run_arg``: a run directory, or ``demo`` for the embedded generated demo run."""
    from .readers import read_run

    def read_progress(done: int, total: int) -> None:
        if progress:
            progress.update("reading files", done, total)

    if run_arg != "demo":
        return read_run(run_arg, progress=read_progress, jobs=jobs, comm_patterns=comm_patterns, fmt=fmt,
                        dask=dask, window=window)
    from .demo import demo_note, demo_spec
    from .synth import write_mindinsight_run

    with tempfile.TemporaryDirectory(prefix="reportgen-demo-") as tmp:
        root = Path(tmp) / "demo_run"
        write_mindinsight_run(root, demo_spec())
        run = read_run(root, progress=read_progress)
    run.is_demo = True
    run.name = "demo"
    run.source_path = "(generated demo data)"
    run.notes.insert(0, demo_note())
    return run


def section_options(run, values: dict | None = None):
    """The sections' options for ``run``: the user's values, and from the family registry the provenance of each
    table and the framework's hint texts (sections never import readers: the caller hands these over)."""
    from .readers import registry
    from .sections import Options

    return Options(dict(values or {}), **registry.section_context(run))


def build_report(run_arg: str, title: str | None, progress, jobs: int | None = None,
                 comm_patterns: tuple[str, ...] = (), options: dict | None = None,
                 static: bool = False, baseline: str | None = None, fmt: str | None = None,
                 dask: str | None = None, timeline: tuple | None = None,
                 window: str | None = None) -> tuple[str, dict]:
    """Read the run, analyse every section, return (html, metrics). ``timeline`` = (path, detail, ranks): also
    write the merged timeline (reportgen/export_timeline.py), named in the metrics (``exports``) and the page;
    ``written`` gets its path once it is in place."""
    from . import document, metrics, render
    from .sections import run_sections

    run = load_run(run_arg, progress, jobs, comm_patterns, fmt, dask, window)
    _name_ranks_not_in_run(run, options)
    from .sections import SECTION_IDS

    analysed = []  # sections may be analysed out of report order (two processes): the count says how far

    def section_progress(sid: str) -> None:
        analysed.append(sid)
        progress.update(f"analysing {sid}", len(analysed), len(SECTION_IDS))

    base_doc = None
    if baseline:  # read first: the advisor judges exposed communication against it (issue 26)
        from . import compare

        def build_metrics(path: str) -> dict:
            base_run = load_run(path, None, jobs, comm_patterns, fmt)
            outs = run_sections(base_run, section_options(base_run, options), jobs=jobs or os.cpu_count() or 1)
            return json.loads(metrics.dumps(metrics.build(base_run, outs)))

        base_doc = compare.load_baseline(baseline, build_metrics)
        options = {**(options or {}), "baseline_headline": compare.headline(base_doc),
                   "baseline_source": baseline}
    outcomes = run_sections(run, section_options(run, options), progress=section_progress,
                            jobs=jobs or os.cpu_count() or 1)
    exported = None
    if timeline is not None:
        from . import export_timeline

        path, detail, ranks, written, *more = timeline
        progress.update("writing the merged timeline")
        try:
            exported = export_timeline.write(run, path, ranks, detail, steps=more[0] if more else None)
        except LookupError as exc:
            raise InputError(path, f"--timeline: {exc}; nothing to write") from None
        written.append(path)
        note = (f"The merged timeline of {exported['ranks']:,} rank(s) ({detail}, {exported['events']:,} events) was "
                f"written to {exported['file']} (Chrome trace event format: open it in Perfetto or chrome://tracing; "
                "each rank's clock is aligned per step, the shifts are in the file's otherData.alignment_ms).")
        for o in outcomes:
            if o.id == "execution" and o.view is not None:
                o.view.notes.append(note)
    report = document.build(run, outcomes, title)  # the one document the JSON and the page render
    doc = metrics.build(report)
    if exported is not None:
        doc["exports"] = {"timeline": {k: v for k, v in exported.items() if k != "path"}}
    comp = None
    if base_doc is not None:
        from . import compare

        comp = compare.comparison(json.loads(metrics.dumps(doc)), base_doc, baseline)
        doc["baseline"] = comp
        doc["_baseline_doc"] = base_doc
    progress.update("rendering HTML")
    ctx = render.build_context(report)
    ctx["baseline"] = comp
    html = render.render_html(ctx, static=static)
    return html, doc


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP: unwinds like Ctrl-C, so every cleanup written for KeyboardInterrupt runs."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def _interrupts():
    """SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` in the main thread while the block runs (a signal
    ignored at start, as under nohup, stays ignored). After the first one the others are ignored: the cleanup
    it starts (stopping workers, removing temp files) is not itself interrupted. Handlers are restored on exit
    (``main`` is also called in-process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved: dict[int, object] = {}

    def handler(signum, _frame):
        for sig in saved:
            signal.signal(sig, signal.SIG_IGN)
        raise Interrupted(signum)

    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            saved[sig] = signal.signal(sig, handler)
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)


def _handling_interrupts(fn):
    """``fn`` runs inside :func:`_interrupts`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _interrupts():
            try:
                return fn(*args, **kwargs)
            except KeyboardInterrupt as exc:  # before the command handles it: while its arguments (and with them
                # pandas) load; the commands handle it themselves from before their first output is written
                with contextlib.suppress(OSError, ValueError):
                    print("reportgen: interrupted; nothing written", file=sys.stderr, flush=True)
                return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    return wrapper


def _written(outputs: list[str], written: list[str]) -> str:
    """What a failed or interrupted run leaves: 'nothing written' or exactly which outputs were written."""
    if not written:
        return "nothing written"
    missing = [p for p in outputs if p not in written]
    return f"wrote {' and '.join(written)}" + (f"; {' and '.join(missing)} not written" if missing else "")


def _reduce_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="reportgen reduce",
                description="Decode and reduce the ranks under RANK_DIR (on the node that holds them) into one "
                            "small .reduced file; 'reportgen DIR' reports a directory of such files (and raw "
                            "ranks beside them) as one run.")
    p.add_argument("inputs", nargs="+", metavar="RANK_DIR", help="rank directory, trace file or directory of them")
    p.add_argument("-o", "--output", required=True, help="the .reduced file to write")
    from .readers.registry import REDUCIBLE

    p.add_argument("--format", dest="fmt", choices=sorted(REDUCIBLE),
                   help="input family (default: detect)")
    p.add_argument("--ranks", metavar="LIST", help="MindSpore Insight: reduce only these ranks of the directory "
                                                   "(e.g. 0-7,16; default: every rank found)")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N", help="reduce in N processes")
    p.add_argument("--comm-pattern", action="append", default=[], metavar="REGEX",
                   help="as for the report (applied here, when the traces are decoded)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress output")
    p.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    return p


def reduce_main(argv: list[str]) -> int:
    """``reportgen reduce RANK_DIR... -o rankN.reduced`` (same exit codes as the report)."""
    from . import engine
    from .progress import Progress

    args = _reduce_parser().parse_args(argv)
    progress = Progress(enabled=not args.quiet)
    written: list[str] = []

    def say(text: str) -> None:
        progress.close()
        with contextlib.suppress(OSError, ValueError):
            print(f"reportgen: {one_line(text)}", file=sys.stderr, flush=True)

    try:
        if args.jobs is not None and not 1 <= args.jobs <= MAX_JOBS:
            raise InputError(None, f"--jobs {args.jobs}: must be between 1 and {MAX_JOBS}")
        inputs = [("the input", path, _stat(path, "")) for path in args.inputs]
        _check_output("-o", args.output, inputs)
        if not args.output.endswith(engine.SUFFIX):
            raise InputError(args.output, f"-o: a reduced file is named *{engine.SUFFIX} (reportgen finds it so)")
        from .readers import write_reduced

        n, size = write_reduced(args.output, args.inputs, fmt=args.fmt, jobs=args.jobs,
                                comm_patterns=tuple(args.comm_pattern), ranks=args.ranks,
                                progress=lambda d, t: progress.update("reducing", d, t))
        written.append(args.output)
        progress.close()
        if not args.quiet:
            say(f"wrote {args.output} ({n} unit{'s' if n != 1 else ''}, {size:,} bytes)")
        return EXIT_OK
    except InputError as exc:
        say(str(exc))
        return EXIT_INPUT
    except KeyboardInterrupt as exc:
        say(f"interrupted; {_written([args.output], written)}")
        return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    except OSError as exc:
        say(f"{args.output}: could not write: {_os_problem(exc)}")
        return EXIT_INPUT
    except Exception as exc:  # noqa: BLE001 - one line, not a traceback
        progress.close()
        if args.debug:
            traceback.print_exc()
        say(f"internal error: {type(exc).__name__}: {exc} (nothing written; rerun with --debug for the traceback)")
        return EXIT_FAILURE


def entry() -> None:
    """The ``reportgen`` command (the console script and ``python -m reportgen``): :func:`main`, then the process ends
    at once (:func:`_exit_now`). :func:`main` itself returns, for callers in a process of their own (the tests)."""
    one_blas_thread()
    _exit_now(main())


def one_blas_thread() -> None:
    """numpy's OpenBLAS to one thread unless the user chose (``OPENBLAS_NUM_THREADS``), set before numpy is imported.
    No report calls BLAS (no matrix product, no linear algebra), yet at import OpenBLAS starts a thread per core that
    spins while the import goes on: 0.11 CPU-s of ``import numpy``'s 0.24 on two cores, ~0.25 CPU-s of a 2-rank
    report's 2.4 (bench/README, stop 57), taken from the core the run's second process works on. OpenBLAS reads this
    variable before ``OMP_NUM_THREADS``, so a cluster-wide ``OMP_NUM_THREADS`` does not bring the threads back."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def _exit_now(code) -> None:
    """End the process with ``code`` without tearing the interpreter down: a report's run leaves pandas, numpy and
    their modules in memory, and freeing them object by object took ~0.1 s of a 2-rank report's ~1.3 s of wall
    (0.16 s at 1,024 ranks) for memory the system takes back anyway. What an orderly exit does that matters is done
    first: the atexit handlers (logging's flush, multiprocessing's and Dask's shutdown, weakref finalizers) and
    stdout and stderr flushed (a flush that fails for want of space: exit code 120, as the interpreter's own exit).
    While a thread that is not a daemon still runs, the interpreter waits for it as usual (daemon threads, as the
    progress heartbeat, end with the process either way), except after an interrupt (130, 143, 129): then only the
    streams are flushed, and nothing can keep the process once it said "interrupted"."""
    code = code if isinstance(code, int) else (0 if code is None else 1)
    interrupted = code in {128 + signal.SIGINT, 128 + signal.SIGTERM, 128 + getattr(signal, "SIGHUP", signal.SIGINT)}
    if not interrupted and any(t.is_alive() and not t.daemon for t in threading.enumerate()
                               if t is not threading.current_thread()):
        sys.exit(code)
    import atexit

    try:
        if not interrupted:  # an interrupted run stopped its workers and settled its outputs: nothing is waited for
            # (a process pool's manager thread or queue feeder that did not end would hold an orderly exit for ever)
            atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (BrokenPipeError, ValueError):  # a reader that closed the pipe, a closed stream: nothing to tell
                pass
            except OSError:  # not written (a full disk)
                code = code or 120
        os._exit(code)


@_handling_interrupts
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["reduce"]:
        return reduce_main(argv[1:])
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="reportgen: %(message)s")
    from .progress import Progress

    progress = Progress(enabled=not args.quiet)
    failed: list[str] = []
    outputs = [args.output] + ([args.json_path] if args.json_path is not None else []) + \
        ([args.timeline] if args.timeline is not None else [])
    written: list[str] = []  # outputs renamed into place, for messages that say exactly what was written

    def say(text: str) -> None:
        progress.close()
        with contextlib.suppress(OSError, ValueError):  # stderr closed by the reader: nothing to tell
            print(f"reportgen: {one_line(text)}", file=sys.stderr, flush=True)

    try:
        preflight(args)
        options = {"device_memory_gb": args.device_memory_gb, "peak_tflops": args.peak_tflops,
                   "ranks": _parse_ranks(args.ranks) if args.ranks else [],
                   "include_warmup": args.include_warmup,
                   "compare_ranks": _compare_pair(args.compare_ranks) if args.compare_ranks else None}
        if args.fail_on and any("baseline" in e for e in args.fail_on) and not args.baseline:
            raise InputError(None, "--fail-on compares with the baseline: give --baseline")
        timeline = (args.timeline, args.timeline_detail, options["ranks"], written,
                    _parse_ranks(args.timeline_steps, "--timeline-steps") if args.timeline_steps else None) \
            if args.timeline is not None else None
        html, doc = build_report(args.run, args.title, progress, args.jobs, tuple(args.comm_pattern), options,
                                 static=args.static, baseline=args.baseline, fmt=args.fmt, dask=args.dask,
                                 timeline=timeline, window=args.window)
        from . import compare, metrics, render

        base_doc = doc.pop("_baseline_doc", None)
        failed = [r for r in (compare.check_fail_on(e, json.loads(metrics.dumps(doc)), base_doc)
                              for e in args.fail_on) if r]
        if failed:
            doc["fail_on"] = failed
        texts = {args.output: html, **({args.json_path: metrics.dumps(doc)} if args.json_path is not None else {})}
        try:
            render.write_atomic(texts, written=written)  # both temp files, then both renames
        except OSError as exc:
            path = next((p for p in outputs if p not in written), outputs[-1])
            raise InputError(path, f"could not write: {_os_problem(exc)}; {_written(outputs, written)}") from None
        progress.close()
        if failed:
            for reason in failed:
                say(f"fail-on: {reason}")
            return EXIT_FAIL_ON
        if not args.quiet:
            n = len(doc["findings"])
            say(f"wrote {' and '.join(outputs)} ({n} finding{'s' if n != 1 else ''})")
        return EXIT_OK
    except InputError as exc:
        say(str(exc))
        return EXIT_INPUT
    except KeyboardInterrupt as exc:
        say(f"interrupted; {_written(outputs, written)}")
        return 128 + (exc.signum if isinstance(exc, Interrupted) else signal.SIGINT)
    except Exception as exc:  # noqa: BLE001 - the contract is one line, not a traceback
        progress.close()
        if args.debug:
            traceback.print_exc()
        say(f"internal error: {type(exc).__name__}: {exc} ({_written(outputs, written)}; rerun with --debug "
            f"for the traceback)")
        return EXIT_FAILURE


if __name__ == "__main__":  # pragma: no cover
    entry()
