"""Outputs that can never destroy inputs, and clean interrupts (issue 14, points 2, 7 and 9).

* Every refused output or argument: exit 2, one line naming the problem, nothing created, input tree
  byte-identical, refused before the run is read (in-process: the refusals happen before any analysis).
* The commit of the two outputs: both temp files first, then both renames; a failed second rename says what
  was written; KeyboardInterrupt / SIGTERM while rendering or writing leave the previous report and no temp file.
* Real processes (``python -m reportgen -j 2`` on a Kineto run larger than PARALLEL_MIN_BYTES): SIGINT (to the
  process group, as Ctrl-C), SIGTERM and SIGKILL of the parent while the workers decode leave no worker alive,
  no temp file, the previous report byte-identical, and (SIGKILL) no process holding the parent's stdout/stderr.
"""

from __future__ import annotations

import errno
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from reportgen import cli, render
from reportgen.readers import kineto
from reportgen.synth import KinetoSpec, MindInsightSpec, write_kineto_run, write_mindinsight_run

from conftest import REPO, tree_digest

PREVIOUS = b"previous report \xe2\x9c\x93\n"
TEMP_GLOB = ".*.tmp"  # render.temp_beside: .<name>.<random>.tmp beside the output


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("mi") / "run"
    write_mindinsight_run(root, MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=3))
    return root


@pytest.fixture
def out(tmp_path) -> Path:
    d = tmp_path / "out"
    d.mkdir()
    return d


def _refused(capsys, argv, needle, watch, digest_of) -> str:
    """main(argv) refuses with exit 2 and one line containing needle; nothing new in watch; inputs unchanged."""
    before = {p: tree_digest(p) for p in digest_of}
    listing = {p: sorted(os.listdir(p)) for p in watch}
    rc = cli.main([*map(str, argv), "--quiet"])
    err = capsys.readouterr().err
    lines = err.splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("reportgen: ") and needle in lines[0], err
    assert "Traceback" not in err
    assert {p: sorted(os.listdir(p)) for p in watch} == listing  # nothing created (no report, no temp file)
    assert {p: tree_digest(p) for p in digest_of} == before
    return lines[0]


def _never_read(monkeypatch):
    """Refusals come before any analysis: reading the run fails the test."""
    def boom(*a, **k):
        raise AssertionError("the run was read before the refusal")
    monkeypatch.setattr(cli, "build_report", boom)


# ---------------------------------------------------------------------------------------------- outputs


def _input_file(run: Path) -> Path:
    return next(run.rglob("step_trace_raw_0_detail_time.csv"))


OUTPUT_CASES = {
    # name: (argv builder (run, out) -> args after RUN, needle)
    "report replaces an input file": (lambda r, o: ["-o", _input_file(r)], "would replace a file of the run directory"),
    "json replaces an input file": (lambda r, o: ["-o", o / "r.html", "--json", _input_file(r)],
                                    "--json: would replace a file of the run directory"),
    "report inside the run": (lambda r, o: ["-o", r / "r.html"], "-o: is inside the run directory"),
    "report deep inside the run": (lambda r, o: ["-o", _input_file(r).parent / "new" / ".." / "r.html"],
                                   "is inside the run directory"),
    "report is the run directory": (lambda r, o: ["-o", r], "-o: is the run directory"),
    "report via a link to the run": (lambda r, o: ["-o", _link(o / "ln", r) / "r.html"], "is inside the run directory"),
    "report is a link to the run": (lambda r, o: ["-o", _link(o / "ln", r)], "is the run directory"),
    "report is a link to an input file": (lambda r, o: ["-o", _link(o / "ln.html", _input_file(r))],
                                          "would replace a file of the run directory"),
    "json equals report": (lambda r, o: ["-o", o / "x.html", "--json", o / "x.html"], "same file as the report"),
    "json equals report after resolution": (lambda r, o: ["-o", o / "x.html", "--json", o / ".." / o.name / "x.html"],
                                            "same file as the report"),
    "json is a hard link of the report": (lambda r, o: ["-o", _file(o / "x.html"), "--json", _hard(o / "y", o / "x.html")],
                                          "same file as the report"),
    "output directory missing": (lambda r, o: ["-o", o / "missing" / "r.html"], "output directory does not exist"),
    "output directory is a file": (lambda r, o: ["-o", _file(o / "f") / "r.html"], "f is not a directory"),
    "report is a directory": (lambda r, o: ["-o", o], "-o: is a directory"),
    "json is a directory": (lambda r, o: ["-o", o / "r.html", "--json", str(o) + os.sep], "--json: is a directory"),
    "name too long": (lambda r, o: ["-o", o / ("n" * 256 + ".html")], "file name too long"),
    "json under /proc": (lambda r, o: ["-o", o / "r.html", "--json", "/proc/m.json"], "--json: cannot create a file"),
    "empty report name": (lambda r, o: ["-o", ""], "-o '': the output file name is empty"),
    "empty json name": (lambda r, o: ["-o", o / "r.html", "--json", ""], "--json '': the output file name is empty"),
    "report is a device": (lambda r, o: ["-o", os.devnull], "is not a regular file"),
    "report is a symbolic link": (lambda r, o: ["-o", _link(o / "stdout", "/proc/self/fd/1")], "is a symbolic link"),
}


def _link(path: Path, target) -> Path:
    if not path.is_symlink():
        path.symlink_to(target)
    return path


def _file(path: Path) -> Path:
    if not path.exists():
        path.write_bytes(PREVIOUS)
    return path


def _hard(path: Path, target: Path) -> Path:
    if not path.exists():
        os.link(target, path)
    return path


@pytest.mark.parametrize("case", list(OUTPUT_CASES))
def test_output_refused_before_analysis(case, run, out, capsys, monkeypatch):
    if case == "json under /proc" and not Path("/proc/self").is_dir():
        pytest.skip("no /proc")
    make, needle = OUTPUT_CASES[case]
    args = make(run, out)
    _never_read(monkeypatch)
    _refused(capsys, [run, *args], needle, watch=[out], digest_of=[run])


def test_run_given_through_a_link_is_still_protected(run, out, capsys, monkeypatch):
    link = _link(out / "runlink", run)
    _never_read(monkeypatch)
    _refused(capsys, [link, "-o", run / "r.html"], "is inside the run directory", watch=[out], digest_of=[run])


def test_baseline_is_an_input_too(run, out, tmp_path, capsys, monkeypatch):
    base_json = _file(out / "base.json")
    _never_read(monkeypatch)
    _refused(capsys, [run, "-o", base_json, "--baseline", base_json],
             "is the --baseline file", watch=[out], digest_of=[run])
    base_run = tmp_path / "base"
    base_run.mkdir()
    _refused(capsys, [run, "-o", base_run / "r.html", "--baseline", base_run],
             "is inside the --baseline run directory", watch=[out, base_run], digest_of=[run])
    _refused(capsys, [run, "-o", out / "r.html", "--baseline", out / "nope"], "--baseline: no such file or directory",
             watch=[out], digest_of=[run])


def test_unwritable_output_directory(run, out, capsys, monkeypatch):
    locked = out / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    immutable = False
    try:
        if os.access(locked, os.W_OK):  # root writes anywhere: an immutable directory refuses even root
            immutable = subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode == 0 \
                if _which("chattr") else False
            if not immutable:
                pytest.skip("running as root without chattr: no directory is unwritable")
        _never_read(monkeypatch)
        _refused(capsys, [run, "-o", locked / "r.html"], "output directory is not writable", watch=[out, locked],
                 digest_of=[run])
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(locked)], check=False)
        locked.chmod(0o755)


def _which(cmd: str) -> bool:
    return any(os.access(os.path.join(d, cmd), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep))


# ---------------------------------------------------------------------------------------------- messages


def test_symlink_loop_run_directory_says_so(out, capsys, monkeypatch):
    loop = _link(out / "loop", "loop")
    _never_read(monkeypatch)
    line = _refused(capsys, [loop, "-o", out / "r.html"], "symbolic link loop", watch=[out], digest_of=[])
    assert "no such file" not in line


@pytest.mark.parametrize("args,needle", [
    (["--device-memory-gb", "inf"], "--device-memory-gb inf: must be a positive number"),
    (["--device-memory-gb", "nan"], "--device-memory-gb nan: must be a positive number"),
    (["--device-memory-gb", "1e400"], "--device-memory-gb inf: must be a positive number"),
    (["--peak-tflops", "inf"], "--peak-tflops inf: must be a positive number"),
    (["--peak-tflops", "-1"], "--peak-tflops -1.0: must be a positive number"),
    (["--jobs", str(10 ** 12)], "--jobs 1000000000000: must be between 1 and"),
    (["--jobs", "0"], "--jobs 0: must be between 1 and"),
    (["--fail-on", "step_ms.median>nan"], "'nan' is not a finite number"),
    (["--fail-on", "step_ms.median>inf"], "'inf' is not a finite number"),
    (["--fail-on", "step_ms.median>-1e999"], "'-1e999' is not a finite number"),
    (["--fail-on", "step_ms.median>1e999*baseline", "--baseline", "BASE"], "'1e999' is not a finite number"),
    (["--fail-on", "step_ms.median>1.2.3*baseline", "--baseline", "BASE"], "'1.2.3' is not a number"),
    (["--fail-on", "step_ms.median>baseline"], "give --baseline"),
])
def test_bad_numbers_refused_before_analysis(args, needle, run, out, tmp_path, capsys, monkeypatch):
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"schema": "reportgen.metrics/1"}))
    args = [str(base) if a == "BASE" else a for a in args]
    _never_read(monkeypatch)
    _refused(capsys, [run, "-o", out / "r.html", *args], needle, watch=[out], digest_of=[run])


@pytest.mark.parametrize("argv", [
    ["RUN", "--jobs", "abc"],
    ["RUN", "--jobs", "1\n2"],
    ["RUN", "--bogus\nsecond line"],
    ["RUN", "--device-memory-gb"],
    [],
])
def test_usage_errors_are_usage_and_one_line(argv, run, capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main([str(run) if a == "RUN" else a for a in argv])
    err = capsys.readouterr().err
    assert exc.value.code == 2
    lines = err.rstrip("\n").split("\n")
    assert lines[0].startswith("usage: reportgen") and lines[-1].startswith("reportgen: error: ")
    assert all(line.startswith(" ") for line in lines[1:-1]), err  # the rest is the usage's continuation


# ---------------------------------------------------------------------------------------------- commit


def _fake_report(monkeypatch, during=None):
    """build_report without the analysis (the commit is what is tested): ``during`` runs while 'rendering'."""
    def fake(*a, **k):
        if during:
            during()
        return "<!DOCTYPE html><p>new report</p>", {"findings": []}
    monkeypatch.setattr(cli, "build_report", fake)


def _previous(out: Path) -> tuple[Path, Path]:
    html, js = out / "r.html", out / "m.json"
    html.write_bytes(PREVIOUS)
    js.write_bytes(PREVIOUS)
    return html, js


def test_long_names_are_written_and_temp_names_fit(run, out, capsys, monkeypatch):
    name_max = os.pathconf(out, "PC_NAME_MAX")
    html = out / ("h" * (name_max - 6) + ".html")  # fits, but ".<name>.<8>.tmp" would not
    js = out / ("j" * (name_max - 5) + ".json")
    _fake_report(monkeypatch)
    assert cli.main([str(run), "-o", str(html), "--json", str(js), "--quiet"]) == 0, capsys.readouterr().err
    assert html.read_text().endswith("new report</p>") and json.loads(js.read_text()) == {"findings": []}
    assert sorted(os.listdir(out)) == sorted([html.name, js.name])


def test_second_rename_failing_says_what_was_written(run, out, capsys, monkeypatch):
    html, js = _previous(out)
    real_replace = os.replace

    def replace(src, dst):
        if str(dst) == str(js):
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(src, dst)

    _fake_report(monkeypatch)
    monkeypatch.setattr(os, "replace", replace)
    rc = cli.main([str(run), "-o", str(html), "--json", str(js), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err == (f"reportgen: {js}: could not write: no space left on the device; wrote {html}; "
                               f"{js} not written")
    assert "nothing written" not in err
    assert html.read_text().endswith("new report</p>") and js.read_bytes() == PREVIOUS
    assert sorted(os.listdir(out)) == ["m.json", "r.html"]  # the JSON's temp file was removed


def test_both_temp_files_are_written_before_the_first_rename(run, out, monkeypatch):
    html, js = _previous(out)
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        seen.append(sorted(p for p in os.listdir(out) if p.endswith(".tmp")))
        return real_replace(src, dst)

    _fake_report(monkeypatch)
    monkeypatch.setattr(os, "replace", replace)
    assert cli.main([str(run), "-o", str(html), "--json", str(js), "--quiet"]) == 0
    assert len(seen[0]) == 2 and len(seen[1]) == 1


def _interrupt_with(sig):
    def during():
        if sig is None:
            raise KeyboardInterrupt
        os.kill(os.getpid(), sig)
        time.sleep(5)  # the handler raises at once; never reached
    return during


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt in this process, whatever launched the tests: a suite started in the background
    by a non-interactive shell inherits SIGINT ignored, and main() leaves an ignored signal ignored (as ``nohup`` and
    Python itself do), so without this the Ctrl-C tests fail there (rc 0) and looked like timing flakes."""
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, old)


def _sigint_default() -> None:
    """preexec_fn of a child that must get Ctrl-C as a terminal gives it (see :func:`ctrl_c_raises`)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig,code", [(None, 130), (signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_while_rendering_keeps_the_previous_report(sig, code, run, out, capsys, monkeypatch, ctrl_c_raises):
    html, js = _previous(out)
    _fake_report(monkeypatch, during=_interrupt_with(sig))
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    rc = cli.main([str(run), "-o", str(html), "--json", str(js), "--quiet"])
    assert rc == code and capsys.readouterr().err == "reportgen: interrupted; nothing written\n"
    assert html.read_bytes() == PREVIOUS and js.read_bytes() == PREVIOUS
    assert sorted(os.listdir(out)) == ["m.json", "r.html"]
    assert {s: signal.getsignal(s) for s in handlers} == handlers  # main() restores the handlers


@pytest.mark.parametrize("command", ["report", "reduce"])
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_interrupt_while_the_arguments_load_is_one_line(command, sig, code, run, out, capsys, monkeypatch,
                                                        ctrl_c_raises):
    """A Ctrl-C in the first half second, while the argument parser loads the formats and with them pandas, was a
    traceback and exit 1 (found by signalling a real run at random times): the one line and 130 / 143, as later."""
    def parser():
        os.kill(os.getpid(), sig)
        time.sleep(5)  # the handler raises at once; never reached

    monkeypatch.setattr(cli, "_reduce_parser" if command == "reduce" else "_parser", parser)
    html, js = _previous(out)
    argv = ["reduce", str(run), "-o", str(out / "x.reduced")] if command == "reduce" else \
        [str(run), "-o", str(html), "--json", str(js)]
    assert cli.main(argv) == code
    assert capsys.readouterr().err == "reportgen: interrupted; nothing written\n"
    assert html.read_bytes() == PREVIOUS and sorted(os.listdir(out)) == ["m.json", "r.html"]


def test_an_ignored_ctrl_c_stays_ignored(run, out, capsys, monkeypatch):
    """A launcher that ignores SIGINT (a background job of a script, nohup-like tools) keeps it ignored: a Ctrl-C
    meant for the terminal's foreground job does not stop the report, which is written as usual."""
    html, js = _previous(out)
    _fake_report(monkeypatch, during=lambda: os.kill(os.getpid(), signal.SIGINT))
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        rc = cli.main([str(run), "-o", str(html), "--json", str(js), "--quiet"])
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN  # and left ignored after main()
    finally:
        signal.signal(signal.SIGINT, old)
    assert rc == 0, capsys.readouterr().err
    assert html.read_text().endswith("new report</p>")


@pytest.mark.parametrize("when", ["writing", "first rename"])
def test_interrupt_while_writing_removes_the_temp_files(when, run, out, capsys, monkeypatch):
    html, js = _previous(out)
    _fake_report(monkeypatch)
    if when == "writing":
        real = render.temp_beside

        def temp_beside(path):
            if list(out.glob(TEMP_GLOB)):  # the report's temp file is written: interrupted before the JSON's
                raise KeyboardInterrupt
            return real(path)
        monkeypatch.setattr(render, "temp_beside", temp_beside)
    else:
        def replace(src, dst):
            raise KeyboardInterrupt
        monkeypatch.setattr(os, "replace", replace)
    rc = cli.main([str(run), "-o", str(html), "--json", str(js), "--quiet"])
    assert rc == 130 and capsys.readouterr().err == "reportgen: interrupted; nothing written\n"
    assert html.read_bytes() == PREVIOUS and js.read_bytes() == PREVIOUS
    assert sorted(os.listdir(out)) == ["m.json", "r.html"]


def test_signal_between_the_renames_waits_for_the_second(run, out, capsys, monkeypatch):
    """SIGTERM after the first rename is held until the second: both outputs change, and the message says so."""
    html, js = _previous(out)
    real_replace = os.replace

    def replace(src, dst):
        real_replace(src, dst)
        if str(dst) == str(html):
            os.kill(os.getpid(), signal.SIGTERM)
    _fake_report(monkeypatch)
    monkeypatch.setattr(os, "replace", replace)
    rc = cli.main([str(run), "-o", str(html), "--json", str(js), "--quiet"])
    assert rc == 143 and capsys.readouterr().err == f"reportgen: interrupted; wrote {html} and {js}\n"
    assert html.read_text().endswith("new report</p>") and json.loads(js.read_text()) == {"findings": []}


def test_demo_has_no_input_directory(out, capsys, monkeypatch):
    _fake_report(monkeypatch)
    assert cli.main(["demo", "-o", str(out / "demo.html"), "--quiet"]) == 0, capsys.readouterr().err
    _never_read(monkeypatch)
    _refused(capsys, ["demo", "-o", out / "d.html", "--json", out / "d.html"], "same file as the report",
             watch=[out], digest_of=[])


# ---------------------------------------------------------------------------------------------- processes

LINUX_PROC = Path("/proc/self/task").is_dir()


@pytest.fixture(scope="module")
def big_kineto(tmp_path_factory) -> Path:
    """A 2-rank Kineto run whose traces total more than kineto.PARALLEL_MIN_BYTES (decoded in 2 processes)."""
    probe = tmp_path_factory.mktemp("kprobe")
    write_kineto_run(probe, KinetoSpec(hosts=1, devices_per_host=2, stages=1, steps=10, gzip=False))
    per_step = sum(p.stat().st_size for p in probe.iterdir()) / 10
    steps = math.ceil(kineto.PARALLEL_MIN_BYTES * 1.25 / per_step)
    root = tmp_path_factory.mktemp("kbig")
    write_kineto_run(root, KinetoSpec(hosts=1, devices_per_host=2, stages=1, steps=steps, gzip=False))
    assert sum(p.stat().st_size for p in root.iterdir()) > kineto.PARALLEL_MIN_BYTES
    return root


def _children(pid: int) -> set[int]:
    kids = set()
    for f in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            kids |= {int(k) for k in f.read_text().split()}
        except OSError:
            pass
    return kids


def _alive(pid: int) -> bool:
    """Alive and not a zombie (a dead worker waits to be reaped by whoever adopted it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def _poll(predicate, deadline_s: float):
    end = time.monotonic() + deadline_s
    while True:
        value = predicate()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.05)


WATCHDOG_ONLY = textwrap.dedent("""
    import sys
    from reportgen import workers
    workers._die_with_parent_linux = lambda: None  # as on a platform without prctl: only the watchdog
    from reportgen.cli import main
    sys.exit(main(sys.argv[1:]))
""")


@pytest.mark.skipif(not LINUX_PROC, reason="finds the workers through /proc")
@pytest.mark.parametrize("how", ["SIGINT to the group", "SIGTERM", "SIGKILL", "SIGKILL, watchdog only"])
def test_signal_during_parallel_decoding(how, big_kineto, out):
    html = out / "r.html"
    html.write_bytes(PREVIOUS)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    cmd = ([sys.executable, "-c", WATCHDOG_ONLY] if "watchdog" in how else [sys.executable, "-m", "reportgen"])
    p = subprocess.Popen([*cmd, str(big_kineto), "-o", str(html), "-j", "2"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env, start_new_session=True, preexec_fn=_sigint_default)
    workers: set[int] = set()
    try:
        workers = _poll(lambda: _children(p.pid) if len(_children(p.pid)) >= 2 else None, 120)
        assert workers, f"no 2 workers started (exit {p.poll()}): {p.stderr.read().decode() if p.poll() is not None else ''}"

        def silenced():  # the workers hold neither the parent's stdout nor its stderr
            try:
                return all(os.readlink(f"/proc/{w}/fd/{fd}") == os.devnull for w in workers for fd in (1, 2))
            except OSError:
                return False
        assert _poll(silenced, 60)
        if how.startswith("SIGINT"):
            os.killpg(p.pid, signal.SIGINT)  # Ctrl-C: the whole foreground group
        else:
            os.kill(p.pid, signal.SIGTERM if how == "SIGTERM" else signal.SIGKILL)
        # SIGKILL: communicate() returns only when no process holds the pipes any more
        _, err = p.communicate(timeout=60)
        err = err.decode()
        assert _poll(lambda: not any(_alive(w) for w in workers), 5), "a worker outlived the parent by 5 s"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for w in _children(p.pid) | set(workers or ()):
            if _alive(w):
                os.kill(w, signal.SIGKILL)
    expected = {"SIGINT to the group": 130, "SIGTERM": 143}.get(how, -signal.SIGKILL)
    assert p.returncode == expected, err
    assert err == ("" if "SIGKILL" in how else "reportgen: interrupted; nothing written\n")
    assert html.read_bytes() == PREVIOUS
    assert os.listdir(out) == ["r.html"]  # no temp file


HALF_SENT = textwrap.dedent("""
    import gc, os, struct, sys, time
    import multiprocessing.queues as mq
    from reportgen import workers

    def half_sent(flag):
        # a worker stopped while sending its result: the header promises bytes that never come
        for q in (o for o in gc.get_objects() if isinstance(o, mq.SimpleQueue)):
            os.write(q._writer.fileno(), struct.pack("!i", 1 << 20) + b"x" * 16)
        open(flag, "w").close()
        time.sleep(120)

    flag = sys.argv[1]
    try:
        with workers.pool(2) as pool:
            pool.submit(half_sent, flag)
            while not os.path.exists(flag):
                time.sleep(0.02)
            raise KeyboardInterrupt
    except KeyboardInterrupt:
        print("stopped", flush=True)
""")


def test_pool_stopped_mid_result_does_not_hang_the_exit(tmp_path):
    """The 'hang after interrupted': the pool's manager thread waited for the rest of a half-sent result."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    p = subprocess.Popen([sys.executable, "-c", HALF_SENT, str(tmp_path / "flag")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    try:
        out, err = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("the process did not exit after stopping the pool")
    assert p.returncode == 0 and out.decode() == "stopped\n" and not err, err.decode()



def test_rolling_baseline_json_may_be_replaced(tmp_path):
    """CI's "compare with last time, then keep this run as the next baseline": --baseline m.json --json m.json."""
    from reportgen.cli import main

    base = tmp_path / "m.json"
    assert main(["demo", "-o", str(tmp_path / "a.html"), "--json", str(base), "-q"]) == 0
    first = base.read_bytes()
    assert main(["demo", "-o", str(tmp_path / "b.html"), "--json", str(base), "--baseline", str(base), "-q"]) == 0
    assert base.read_bytes() != first and b'"baseline"' in base.read_bytes()
