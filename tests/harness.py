"""Run the reportgen CLI in a child process, cheaply and with bounds (the corpus of tests/test_corpus.py).

A child forked from the already-imported test process runs ``reportgen.cli.main(argv)`` with its fds 1/2 sent
to files and leaves with ``os._exit(code)``: no Python start-up, no re-import of numpy/pandas/altair per run.
The parent reaps it with ``os.wait4`` (the child's own peak RSS, ``ru_maxrss``, which on Linux also covers the
grandchildren it waited for, e.g. ``--jobs`` workers), kills its whole process group after :data:`WALL_LIMIT_S`,
and returns a :class:`Result`. :func:`run_jobs` keeps two children running at a time (CI has 2 cores).

The child is put in a process group of its own, so a test can signal it as a terminal would (Ctrl-C reaches the
whole foreground group) and can see whether any worker outlived it. ``mode="subprocess"`` runs
``python -m reportgen`` instead, for the runs that need a real process (a working directory of their own, or a
library that must not be used after ``fork``: vl-convert for ``--static`` starts threads).

Peak RSS of a forked child starts at the pages it shares with the test process (the imports); the value is an
upper bound of what ``reportgen`` alone would use, which is what a bound needs.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
#: a run still going after this is killed (with its process group) and reported as timed out
WALL_LIMIT_S = 60.0
#: how long processes of a run's group may outlive it before they count as left behind
GRACE_S = 5.0
#: a run whose resident memory passes this is killed at once (the tests' bound is 1 GB; the machine is shared)
RSS_KILL_MB = 1536.0
#: modules the forked children should find imported (so no child pays for them); every other module of the
#: packages in :data:`WARM_PACKAGES` too (the sections and readers a run imports lazily: 0.3-0.7 CPU-s a child)
WARM_MODULES = ("numpy", "pandas", "jinja2", "reportgen.cli", "reportgen.readers", "reportgen.sections",
                "reportgen.render", "reportgen.metrics", "reportgen.compare", "reportgen.report")
WARM_PACKAGES = ("reportgen", "reportgen.readers", "reportgen.sections")


@dataclass
class Job:
    """One CLI run. ``hooks`` are names in :data:`HOOKS` with their argument, run in a forked child before
    ``main``; ``signal`` is ``(signum, target, delay_s)``: once the child has a worker process (a second member
    of its process group), wait ``delay_s`` and send ``signum`` to the ``"group"`` or to the ``"leader"`` only."""

    argv: list[str]
    workdir: Path                       # stdout/stderr files are written here
    mode: str = "fork"                  # "fork" | "subprocess"
    cwd: Path | None = None             # default: workdir
    hooks: list[tuple[str, object]] = field(default_factory=list)
    signal: tuple[int, str, float] | None = None
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Result:
    exit: int                 # exit code; -N when the process died of signal N
    stdout: str
    stderr: str
    peak_rss_mb: float        # ru_maxrss of the run (and the children it reaped)
    wall_s: float
    cpu_s: float              # user + system time of the run (and the children it reaped)
    timed_out: bool = False
    rss_killed: bool = False  # killed for passing RSS_KILL_MB
    signal_sent: bool = False
    leftover: list[int] = field(default_factory=list)   # pids of its process group alive GRACE_S after it ended

    @property
    def text(self) -> str:
        return self.stdout + "\n" + self.stderr


def warm_up() -> Callable[[], None]:
    """Prepare the process the children are forked from, once: import what every run needs, compile the report
    template once (``reportgen.render.environment()`` is memoised here, in the test process only: every child
    renders one report, and compiling the template is a third of a small report's time), and freeze the heap so
    the children's garbage collector does not copy it page by page. Returns the function that undoes this."""
    import gc
    import importlib

    import pkgutil

    names = list(WARM_MODULES)
    for package in WARM_PACKAGES:
        try:
            path = importlib.import_module(package).__path__
        except ImportError:
            continue
        names += [f"{package}.{m.name}" for m in pkgutil.iter_modules(path) if not m.name.startswith("__")]
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - an optimisation only: the child that needs it says what is wrong
            pass
    render = sys.modules.get("reportgen.render")
    original = getattr(render, "environment", None)
    if getattr(original, "_harness_memo", False):
        original = None
    if original is not None:
        memo: list = []

        def environment(*args, **kwargs):
            if args or kwargs:
                return original(*args, **kwargs)
            if not memo:
                memo.append(original())
            return memo[0]

        environment._harness_memo = True
        render.environment = environment
        try:
            environment().get_template("report.html.j2")
        except Exception:  # noqa: BLE001 - an optimisation only
            pass
    charts = sys.modules.get("reportgen.charts")
    if charts is not None and os.environ.get("REPORTGEN_VALIDATE_SPECS") == "1":
        # load the Vega-Lite schema validators here, once, not in every child that draws a chart
        try:
            charts.validate({"mark": "point", "data": {"values": [{"a": 1}]},
                             "encoding": {"x": {"field": "a", "type": "quantitative"}}})
        except Exception:  # noqa: BLE001 - an optimisation only (altair missing: the children say so)
            pass
    gc.collect()
    gc.freeze()

    def undo() -> None:
        gc.unfreeze()
        if render is not None and original is not None and getattr(render.environment, "_harness_memo", False):
            render.environment = original
    return undo


# --------------------------------------------------------------------------- hooks (forked child only)


def _wrap_read_run(make: Callable[[Callable], Callable]) -> None:
    """Replace ``reportgen.readers.read_run`` (and the CLI's reference to it) with ``make(the current one)``."""
    import reportgen.readers as readers

    original = readers.read_run
    readers.read_run = wrapped = make(original)
    cli = sys.modules.get("reportgen.cli")
    if cli is not None and getattr(cli, "read_run", None) is original:
        cli.read_run = wrapped


def _hook_mark_analysis(marker) -> None:
    """Create ``marker`` when the run directory starts being read (to prove a refusal came before any analysis)."""
    def make(original):
        def read_run(*args, **kwargs):
            Path(marker).touch()
            return original(*args, **kwargs)
        return read_run

    _wrap_read_run(make)


#: what hooks ask the forked child to do once ``main`` returned (or raised), before it exits
_AFTER: list[Callable[[], None]] = []


def _hook_schema_check(path) -> None:
    """Once the run is over, write to ``path`` (JSON) the problems :func:`reportgen.schema.check` finds in the tables
    of every run the CLI read (a list; null when it read none: a refusal): what a reader keeps of a broken input is
    canonical too. Checked after ``main``, so that the run itself goes as a user's would."""
    import json

    runs: list = []

    def make(original):
        def read_run(*args, **kwargs):
            run = original(*args, **kwargs)
            runs.append(run)
            return run
        return read_run

    _wrap_read_run(make)

    def after() -> None:
        try:
            from reportgen import schema

            found = [p for run in runs for p in schema.check(run)] if runs else None
        except BaseException:  # noqa: BLE001 - the test names it
            found = ["reportgen.schema.check failed: " + traceback.format_exc()[-2000:]]
        Path(path).write_text(json.dumps(found))

    _AFTER.append(after)


def _hook_signal_at_replace(arg) -> None:
    """Send ``signum`` to this process at the ``nth`` call of ``os.replace`` (an output being moved into place),
    before the rename happens: an interrupt that lands while the outputs are written."""
    signum, nth = arg
    original = os.replace
    calls = [0]

    def replace(src, dst, *a, **kw):
        calls[0] += 1
        if calls[0] == nth:
            os.kill(os.getpid(), signum)
            time.sleep(0.2)  # a handled signal raises here, an unhandled SIGTERM ends the process here
        return original(src, dst, *a, **kw)

    os.replace = replace


def _hook_slow_parallel_decode(arg) -> None:
    """Decode every Kineto trace in worker processes (whatever its size); the decode of each trace whose path
    contains ``marker`` takes ``seconds`` longer. With one slow trace of two, one worker is busy and the other
    idle (waiting for work) when a signal sent a moment after the workers exist lands: both states are hit."""
    seconds, marker = arg
    import reportgen.readers.kineto as kineto
    import reportgen.readers.kineto_decode as kdecode

    if not hasattr(kineto, "PARALLEL_MIN_BYTES") or not hasattr(kdecode, "decode_trace"):
        raise RuntimeError("harness hook slow_parallel_decode: reportgen.readers.kineto.PARALLEL_MIN_BYTES or "
                           "kineto_decode.decode_trace is gone; update tests/harness.py")
    kineto.PARALLEL_MIN_BYTES = 0
    original = kdecode.decode_trace

    def decode_trace(path, *args, **kwargs):
        if marker in str(path):
            time.sleep(seconds)
        return original(path, *args, **kwargs)

    kdecode.decode_trace = decode_trace


HOOKS: dict[str, Callable[[object], None]] = {
    "mark_analysis": _hook_mark_analysis,
    "schema_check": _hook_schema_check,
    "signal_at_replace": _hook_signal_at_replace,
    "slow_parallel_decode": _hook_slow_parallel_decode,
}


# --------------------------------------------------------------------------- starting and reaping


def _child(job: Job, out_path: Path, err_path: Path) -> None:
    """Body of the forked child; never returns."""
    code = 1
    try:
        try:
            os.setpgid(0, 0)
        except OSError:
            pass
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        for fd, path in ((1, out_path), (2, err_path)):
            f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.dup2(f, fd)
            os.close(f)
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        # a fresh process as the CLI would have it: Python's start-up signals (SIGPIPE ignored, so a closed pipe
        # is an error the code sees, not a silent death), no pytest logging/warning capture
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGPIPE, signal.SIG_IGN)
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
            signal.signal(sig, signal.SIG_DFL)
        import logging
        import warnings

        for h in list(logging.root.handlers):
            logging.root.removeHandler(h)
        logging.root.setLevel(logging.WARNING)
        warnings.resetwarnings()
        warnings.showwarning = getattr(warnings, "_showwarning_orig", warnings.showwarning)
        os.environ.pop("REPORTGEN_VALIDATE_SPECS", None)  # test-only schema validation; the CLI runs without
        os.environ.update(job.env)
        os.chdir(job.cwd if job.cwd is not None else job.workdir)  # a stray relative write lands in the case's own dir
        for name, arg in job.hooks:
            HOOKS[name](arg)
        from reportgen.cli import main

        code = main(list(job.argv))
    except SystemExit as exc:  # argparse
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - shown as a traceback: the test fails on it
        try:
            traceback.print_exc()
        except BaseException:  # noqa: BLE001
            pass
        code = 1
    finally:
        for after in _AFTER:
            try:
                after()
            except BaseException:  # noqa: BLE001 - an interrupt while checking: the file is missing, the test says so
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except BaseException:  # noqa: BLE001
                pass
        os._exit(code if isinstance(code, int) and 0 <= code < 256 else 1)


class _Running:
    def __init__(self, job: Job, index: int):
        self.job, self.index = job, index
        job.workdir.mkdir(parents=True, exist_ok=True)
        self.out_path, self.err_path = job.workdir / "stdout.txt", job.workdir / "stderr.txt"
        self.t0 = time.monotonic()
        self.signal_at: float | None = None
        self.signal_sent = False
        self.next_rss, self.max_rss = self.t0 + 0.05, 0.0
        self.reaped: tuple | None = None  # (status, rusage, end, timed_out, rss_killed) once reaped
        if job.mode == "fork":
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                _child(job, self.out_path, self.err_path)
            try:
                os.setpgid(pid, pid)
            except OSError:
                pass  # the child did it first (or already exec'd / ended)
            self.pid = pid
        elif job.mode == "subprocess":
            env = dict(os.environ)
            env.pop("REPORTGEN_VALIDATE_SPECS", None)
            env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
            env.update(job.env)
            with open(self.out_path, "wb") as out, open(self.err_path, "wb") as err:
                proc = subprocess.Popen([sys.executable, "-m", "reportgen", *job.argv], stdin=subprocess.DEVNULL,
                                        stdout=out, stderr=err, cwd=job.cwd or job.workdir, env=env,
                                        start_new_session=True)
            self.pid = proc.pid
            proc.returncode = 0  # reaped below with os.wait4; keep Popen from waiting on it again
        else:
            raise ValueError(f"unknown mode {job.mode!r}")

    def poll(self) -> Result | None:
        """The result once the run ended (reaped) and its process group is empty (or :data:`GRACE_S` passed);
        handles the signal plan and the bounds meanwhile. Never blocks: the other runs keep being served."""
        now = time.monotonic()
        if self.reaped is not None:
            return self._drain(now)
        pid, status, usage = os.wait4(self.pid, os.WNOHANG)
        if pid == 0:
            if self.job.signal and not self.signal_sent:
                self._maybe_signal(now)
            over_rss = False
            if now >= self.next_rss:
                self.next_rss = now + 0.05
                rss = _rss_mb(self.pid)
                self.max_rss = max(self.max_rss, rss)
                over_rss = rss > RSS_KILL_MB
            if over_rss or now - self.t0 > WALL_LIMIT_S:
                _killpg(self.pid)
                _, status, usage = os.wait4(self.pid, 0)
                self.reaped = (status, usage, time.monotonic(), not over_rss, over_rss)
                return self._drain(time.monotonic())
            return None
        self.reaped = (status, usage, now, False, False)
        return self._drain(now)

    def _drain(self, now: float) -> Result | None:
        """Wait (without blocking) for the ended run's process group to empty; kill what is left after GRACE_S."""
        status, usage, end, timed_out, rss_killed = self.reaped
        alive = group_members(self.pid)
        if alive and now < end + GRACE_S:
            return None
        if alive:
            _killpg(self.pid)
        return Result(exit=os.waitstatus_to_exitcode(status), stdout=_read(self.out_path), stderr=_read(self.err_path),
                      peak_rss_mb=max(usage.ru_maxrss / 1024.0, self.max_rss), wall_s=end - self.t0,
                      cpu_s=usage.ru_utime + usage.ru_stime, timed_out=timed_out, rss_killed=rss_killed,
                      signal_sent=self.signal_sent, leftover=sorted(alive))

    def _maybe_signal(self, now: float) -> None:
        signum, target, delay = self.job.signal
        if self.signal_at is None:
            if len(group_members(self.pid) - {self.pid}) >= 1:
                self.signal_at = now + delay
            return
        if now >= self.signal_at:
            try:
                if target == "group":
                    os.killpg(self.pid, signum)
                else:
                    os.kill(self.pid, signum)
                self.signal_sent = True
            except ProcessLookupError:
                pass


def _read(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", "replace")
    except OSError:
        return ""


_PAGE_MB = os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def _rss_mb(pid: int) -> float:
    """Current resident memory of ``pid`` (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as fh:
            return int(fh.read().split()[1]) * _PAGE_MB
    except (OSError, IndexError, ValueError):
        return 0.0


def group_members(pgid: int) -> set[int]:
    """Pids whose process group is ``pgid`` (Linux /proc)."""
    found = set()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and fields[0] != b"Z" and int(fields[2]) == pgid:
            found.add(int(entry.name))
    return found


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_jobs(jobs: list[Job], parallel: int = 2, on_done: Callable[[int, Result], None] | None = None) -> list[Result]:
    """Run ``jobs``, ``parallel`` at a time; results in the order of ``jobs``."""
    results: list[Result | None] = [None] * len(jobs)
    pending = list(enumerate(jobs))
    running: list[_Running] = []
    try:
        while pending or running:
            while pending and len(running) < parallel:
                index, job = pending.pop(0)
                running.append(_Running(job, index))
            progressed = False
            for r in list(running):
                res = r.poll()
                if res is not None:
                    running.remove(r)
                    results[r.index] = res
                    progressed = True
                    if on_done:
                        on_done(r.index, res)
            if not progressed:
                time.sleep(0.005)
    finally:
        for r in running:  # interrupted: leave nothing behind
            _killpg(r.pid)
            if r.reaped is None:
                try:
                    os.wait4(r.pid, 0)
                except ChildProcessError:
                    pass
    return results  # type: ignore[return-value]


def run_one(job: Job) -> Result:
    return run_jobs([job], parallel=1)[0]
