"""Command line: ``reportgen RUN_DIR -o report.html [--json metrics.json] [--title TEXT]`` and ``reportgen demo``.

Exit codes: 0 ok; 2 bad usage or unusable input (one line naming the file and the problem);
1 unexpected failure. Outputs are written to a temp file and renamed, so a failed run never
leaves a half-written report; the input directory is only ever read.
"""

from __future__ import annotations

import argparse
import json
import re
import logging
import os
import sys
import tempfile
import traceback
from pathlib import Path

from . import __version__
from .errors import InputError

EXIT_OK, EXIT_FAILURE, EXIT_INPUT, EXIT_FAIL_ON = 0, 1, 2, 3

def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="reportgen",
        description="Turn the profiler output of one distributed training run (every rank) into one "
                    "self-contained, offline HTML report.",
        epilog="'reportgen demo -o demo.html' writes a report of a generated demo run "
               "(use ./demo for a run directory that is really named demo).",
    )
    p.add_argument("run", metavar="RUN_DIR", help="run directory with every rank's profiler output, or 'demo'")
    p.add_argument("-o", "--output", default="report.html", help="HTML report to write (default: report.html)")
    p.add_argument("--json", dest="json_path", metavar="METRICS_JSON", help="also write every number as JSON")
    p.add_argument("--title", help="report title (default: the run directory name)")
    p.add_argument("-j", "--jobs", type=int, default=None, metavar="N",
                   help="decode ranks in N parallel processes (default: the number of cores)")
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
    p.add_argument("--include-warmup", action="store_true",
                   help="keep warm-up steps (leading steps far slower than the rest) in averages, rankings and "
                        "colour scales; by default they are listed, labelled and left out")
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


def _parse_ranks(text: str) -> list[int]:
    """'0,3,8-11' -> [0, 3, 8, 9, 10, 11]."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = re.fullmatch(r"(\d+)(?:-(\d+))?", part)
        if not m:
            raise InputError(None, f"--ranks {text!r}: expected numbers and ranges such as 0,3,8-11")
        lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
        if hi < lo or hi - lo > 100_000:
            raise InputError(None, f"--ranks {text!r}: range {part} is not valid")
        out.extend(range(lo, hi + 1))
    return sorted(set(out))


def _check_output(path: str) -> None:
    parent = Path(path).resolve().parent
    if not parent.is_dir():
        raise InputError(path, "output directory does not exist")
    if Path(path).is_dir():
        raise InputError(path, "is a directory; give a file name for the report")
    if not os.access(parent, os.W_OK):
        raise InputError(path, "output directory is not writable")


def load_run(run_arg: str, progress=None, jobs: int | None = None, comm_patterns: tuple[str, ...] = ()):
    """The run of ``run_arg``: a run directory, or ``demo`` for the embedded generated demo run."""
    from .readers import read_run

    def read_progress(done: int, total: int) -> None:
        if progress:
            progress.update("reading files", done, total)

    if run_arg != "demo":
        return read_run(run_arg, progress=read_progress, jobs=jobs, comm_patterns=comm_patterns)
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


def build_report(run_arg: str, title: str | None, progress, jobs: int | None = None,
                 comm_patterns: tuple[str, ...] = (), options: dict | None = None,
                 static: bool = False, baseline: str | None = None) -> tuple[str, dict]:
    """Read the run, analyse every section, return (html, metrics)."""
    from . import metrics, render
    from .sections import run_sections

    run = load_run(run_arg, progress, jobs, comm_patterns)
    from .sections import SECTION_IDS

    def section_progress(sid: str) -> None:
        progress.update(f"analysing {sid}", SECTION_IDS.index(sid) + 1, len(SECTION_IDS))

    from .sections import Options

    outcomes = run_sections(run, Options(dict(options or {})), progress=section_progress)
    doc = metrics.build(run, outcomes)
    comp = None
    if baseline:
        from . import compare

        def build_metrics(path: str) -> dict:
            base_run = load_run(path, None, jobs, comm_patterns)
            return json.loads(metrics.dumps(metrics.build(base_run, run_sections(base_run, Options(dict(options or {}))))))

        base_doc = compare.load_baseline(baseline, build_metrics)
        comp = compare.comparison(json.loads(metrics.dumps(doc)), base_doc, baseline)
        doc["baseline"] = comp
        doc["_baseline_doc"] = base_doc
    progress.update("rendering HTML")
    ctx = render.build_context(run, outcomes, title=title)
    ctx["baseline"] = comp
    html = render.render_html(ctx, static=static)
    return html, doc


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.WARNING, format="reportgen: %(message)s")
    from .progress import Progress

    progress = Progress(enabled=not args.quiet)
    failed: list[str] = []
    try:
        _check_output(args.output)
        if args.json_path:
            _check_output(args.json_path)
        if args.jobs is not None and args.jobs < 1:
            raise InputError(None, "--jobs must be at least 1")
        for pattern in args.comm_pattern:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise InputError(None, f"--comm-pattern {pattern!r}: not a regular expression ({exc})") from None
        for name in ("device_memory_gb", "peak_tflops"):
            value = getattr(args, name)
            if value is not None and not value > 0:
                raise InputError(None, f"--{name.replace('_', '-')} must be a positive number")
        options = {"device_memory_gb": args.device_memory_gb, "peak_tflops": args.peak_tflops,
                   "ranks": _parse_ranks(args.ranks) if args.ranks else [],
                   "include_warmup": args.include_warmup}
        if args.fail_on and any("baseline" in e for e in args.fail_on) and not args.baseline:
            raise InputError(None, "--fail-on compares with the baseline: give --baseline")
        html, doc = build_report(args.run, args.title, progress, args.jobs, tuple(args.comm_pattern), options,
                                 static=args.static, baseline=args.baseline)
        from . import compare, metrics, render

        base_doc = doc.pop("_baseline_doc", None)
        failed = [r for r in (compare.check_fail_on(e, json.loads(metrics.dumps(doc)), base_doc)
                              for e in args.fail_on) if r]
        if failed:
            doc["fail_on"] = failed
        json_text = metrics.dumps(doc) if args.json_path else None
        render.write_atomic(args.output, html)
        if json_text is not None:
            render.write_atomic(args.json_path, json_text)
    except InputError as exc:
        progress.close()
        print(f"reportgen: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        progress.close()
        print("reportgen: interrupted; nothing written", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - the contract is one line, not a traceback
        progress.close()
        if args.debug:
            traceback.print_exc()
        print(f"reportgen: internal error: {type(exc).__name__}: {exc} (nothing written; rerun with --debug "
              f"for the traceback)", file=sys.stderr)
        return EXIT_FAILURE
    progress.close()
    if failed:
        for reason in failed:
            print(f"reportgen: fail-on: {reason}", file=sys.stderr)
        return EXIT_FAIL_ON
    if not args.quiet:
        n = len(doc["findings"])
        print(f"reportgen: wrote {args.output}" + (f" and {args.json_path}" if args.json_path else "")
              + f" ({n} finding{'s' if n != 1 else ''})", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
