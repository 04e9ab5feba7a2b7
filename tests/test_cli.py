"""Command line contract: exit codes, one-line errors, atomic writes, untouched inputs, isolation."""

from __future__ import annotations

import contextlib
import json
import re
import os
import shutil
import subprocess
import textwrap
import sys

import pytest

from reportgen import cli
from reportgen.sections import trajectory

from conftest import REPO, shared_root, tree_digest


def run_cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([sys.executable, "-m", "reportgen", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=120)


def test_report_and_metrics_written(tmp_path, pp2x4):
    before = tree_digest(pp2x4)
    out, js = tmp_path / "r.html", tmp_path / "m.json"
    p = run_cli(pp2x4, "-o", out, "--json", js, "--title", "My run")
    assert p.returncode == 0, p.stderr
    assert tree_digest(pp2x4) == before  # the input is only read
    html = out.read_text()
    assert html.startswith("<!DOCTYPE html>") or html.lower().startswith("<!doctype html>")
    assert "My run" in html
    doc = json.loads(js.read_text())
    assert doc["schema"] == "reportgen.metrics/1"
    assert doc["run"]["ranks"] == [0, 1, 2, 3] and doc["run"]["world_size"] == 4
    assert doc["run"]["parallel"]["mode"] == "pipeline-parallel"
    assert set(doc["sections"]) == {"waits", "trajectory", "overlap", "communication", "domains", "memory", "flops", "strategy",
                                    "execution", "operators", "compare", "data", "host", "advisor"}
    for sid, block in doc["sections"].items():
        assert block["status"] in ("ok", "unavailable", "error")
        if block["status"] != "ok":
            assert block["reason"]
    assert not list(tmp_path.glob(".*tmp"))  # no temp files left behind


@pytest.mark.parametrize("make,needle", [
    (lambda t: t / "nope", "no such file or directory"),
    (lambda t: (t / "f.txt").write_text("x") and t / "f.txt", "is not a directory"),
    (lambda t: (t / "empty").mkdir() or t / "empty", "no profiler output recognised"),  # -o is beside, not inside
])
def test_bad_input_is_one_line_exit_2(tmp_path, make, needle):
    target = make(tmp_path)
    out = tmp_path / "r.html"
    p = run_cli(target, "-o", out)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and str(target) in lines[0], p.stderr
    assert "Traceback" not in p.stderr and not out.exists()


def test_bad_output_directory_is_exit_2(tmp_path, pp2x4):
    p = run_cli(pp2x4, "-o", tmp_path / "missing" / "r.html")
    assert p.returncode == 2 and "output directory does not exist" in p.stderr


def test_usage_error_is_exit_2():
    p = run_cli()
    assert p.returncode == 2 and "usage" in p.stderr


def test_failure_leaves_previous_report_untouched(tmp_path, pp2x4, monkeypatch, capsys):
    out = tmp_path / "r.html"
    out.write_text("previous report")

    def boom(*a, **k):
        raise RuntimeError("renderer exploded")

    monkeypatch.setattr("reportgen.render.render_html", boom)
    rc = cli.main([str(pp2x4), "-o", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 1 and "internal error" in err and "Traceback" not in err
    assert out.read_text() == "previous report"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.html"]


def test_failing_section_is_isolated(tmp_path, pp2x4, monkeypatch):
    def broken(run, options=None):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(trajectory, "analyze", broken)
    js = tmp_path / "m.json"
    rc = cli.main([str(pp2x4), "-o", str(tmp_path / "r.html"), "--json", str(js), "--quiet"])
    assert rc == 0
    doc = json.loads(js.read_text())
    assert doc["sections"]["trajectory"]["status"] == "error"
    assert "ZeroDivisionError" in doc["sections"]["trajectory"]["reason"]
    assert doc["sections"]["communication"]["status"] == "ok" and doc["sections"]["memory"]["status"] == "unavailable"
    assert "error" in (tmp_path / "r.html").read_text()


def test_demo_report(report_cache):
    out = report_cache.get("demo")  # cli.main(["demo", ...]) == 0, once per worker (conftest.ReportCache)
    js = out.with_suffix(".json")
    doc = json.loads(js.read_text())
    assert doc["run"]["is_demo"] is True
    assert len(doc["run"]["ranks"]) == 16 and len(set(doc["run"]["hosts"].values())) == 4  # tests/test_demo.py: the rest
    assert doc["run"]["parallel"]["stages"] == 2
    assert "demo" in out.read_text().lower()
    slow = [f for f in doc["findings"] if f["id"] == "slow_input_pipeline" and f["ranks"] == [11]]
    assert slow


def test_progress_is_quiet_off_a_terminal(tmp_path, pp2x4):
    p = run_cli(pp2x4, "-o", tmp_path / "r.html")
    assert p.returncode == 0
    lines = p.stderr.strip().splitlines()
    assert "\r" not in p.stderr and lines[-1].startswith("reportgen: wrote")
    # a run that took more than LOG_AFTER_S (a loaded machine) prints dated progress lines, never before 10 s
    assert all(re.fullmatch(r"reportgen: .* \((\d+) s\)", ln) and int(ln.rsplit("(", 1)[1].split()[0]) >= 10
               for ln in lines[:-1]), lines
    p = run_cli(pp2x4, "-o", tmp_path / "r.html", "--quiet")
    assert p.stderr == ""


def test_ranks_not_in_the_run_are_named(tmp_path, pp2x4, capsys):
    """Issue 29 #10: --ranks naming ranks the run does not have (a 4-rank run asked for rank 7, an absurd id) says so
    on stderr and in the data problems, and the report is still written."""
    out, js = tmp_path / "r.html", tmp_path / "r.json"
    assert cli.main([str(pp2x4), "-o", str(out), "--json", str(js), "--quiet", "--ranks", "1,97,123456789012"]) == 0
    err = capsys.readouterr().err
    doc = json.loads(js.read_text())
    said = [p["problem"] for p in doc["data_problems"] if p["path"] == "--ranks"]
    assert said and "97" in said[0] and "123456789012" in said[0] and "not in this run" in said[0]
    assert "not in this run" in err and " 1," not in said[0]


@pytest.mark.parametrize("flag", ["-o", "--json"])
def test_dash_as_an_output_is_refused_not_a_file_named_dash(tmp_path, pp2x4, flag):
    """Issue 31 #5: '-o -' wrote a file named '-' in the working directory."""
    argv = [str(pp2x4), "-o", str(tmp_path / "r.html"), flag, "-", "-q"] if flag == "--json" else \
        [str(pp2x4), "-o", "-", "-q"]
    p = run_cli(*argv, cwd=tmp_path)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "standard output is not supported" in p.stderr
    assert sorted(os.listdir(tmp_path)) == []


def test_help_names_the_reduce_subcommand():
    p = run_cli("--help")
    assert p.returncode == 0 and "reportgen reduce RANK_DIR... -o node.reduced" in " ".join(p.stdout.split())


def test_progress_off_a_terminal_prints_phases_after_ten_seconds():
    """Issue 31 #3: a CI log showed nothing for 714 s. Off a terminal: nothing in the first 10 s (short runs stay
    one line), then a line per phase and at most one every 10 s within a phase."""
    import io

    from reportgen.progress import Progress

    t = [0.0]
    out = io.StringIO()
    p = Progress(stream=out, clock=lambda: t[0], heartbeat=False)
    for now, label, done in ((1, "reading files", 1), (9, "reading files", 2), (11, "reading files", 3),
                             (15, "reading files", 4), (22, "reading files", 5), (23, "analysing overlap", 1),
                             (24, "analysing memory", 2), (40, "rendering HTML", None)):
        t[0] = now
        p.update(label, done, 64 if done else None)
    p.close()
    t[0] = 60
    p.update("late", 1, 2)
    assert out.getvalue().splitlines() == [
        "reportgen: reading files 3/64 (11 s)", "reportgen: reading files 5/64 (22 s)",
        "reportgen: analysing overlap 1/64 (23 s)", "reportgen: rendering HTML (40 s)"]
    q = io.StringIO()
    Progress(enabled=False, stream=q, clock=lambda: 99.0, heartbeat=False).update("reading files", 1, 2)
    assert q.getvalue() == ""


def test_progress_heartbeat_says_a_long_silent_phase_again():
    """One big trace decoding reports nothing for minutes: the heartbeat repeats the phase's line."""
    import io
    import time as _t

    from reportgen.progress import Progress

    class Fast(Progress):
        LOG_AFTER_S, LOG_EVERY_S = 0.0, 0.5

    out = io.StringIO()
    p = Fast(stream=out)
    p.update("reading files", 0, 1)
    _t.sleep(2.6)
    p.close()
    lines = out.getvalue().splitlines()
    assert len(lines) >= 2 and all(line.startswith("reportgen: reading files 0/1") for line in lines), lines
    n = len(lines)
    _t.sleep(1.2)
    assert len(out.getvalue().splitlines()) == n  # stopped by close()


_ENTRY = """
import atexit, sys, threading, time
class Late:
    def __del__(self):
        print("torn down", file=sys.stderr)
late = Late()
atexit.register(lambda: print("atexit ran", file=sys.stderr))
print("buffered", end="")
if sys.argv[1] == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3), print("thread done", flush=True))).start()
sys.argv = ["reportgen", *sys.argv[2:]]
from reportgen.cli import entry
entry()
print("not reached")
"""


def test_an_interrupted_command_ends_whatever_thread_still_runs(tmp_path):
    """After "interrupted" (exit 130 / 143) the process ends at once: a thread that is not a daemon and never ends (as
    a process pool's manager thread whose pipe never closed: the interpreter joins it at exit) does not hold it."""
    script = textwrap.dedent("""
        import sys, threading, time
        print("buffered", end="")
        threading.Thread(target=time.sleep, args=(3600,)).start()
        from reportgen import cli
        cli.main = lambda: 130
        cli.entry()
    """)
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert p.returncode == 130 and p.stdout == "buffered", p.stderr


@pytest.mark.parametrize("mode", ["alone", "thread", "stdout-full"])
def test_the_command_ends_without_tearing_the_interpreter_down(tmp_path, mode):
    """cli.entry (the console script and ``python -m reportgen``) ends the process once main returns, with main's exit
    code: the atexit handlers run and stdout (a block-buffered pipe) and stderr are flushed, but the interpreter is not
    torn down (a module global's ``__del__`` does not run), whatever daemon threads still run (the progress
    heartbeat: stderr is not a terminal here). While a thread that is not a daemon runs, the interpreter waits for it
    and exits the usual way. Output that cannot be flushed (stdout on a full disk) ends with the interpreter's 120."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # stdout block-buffered: flushed at the end
    env["PYTHONPATH"] = str(REPO)
    out = tmp_path / "r.html"
    args = ["demo", "-o", str(out)] if mode == "stdout-full" else [str(tmp_path / "missing"), "-o", str(out)]
    with open("/dev/full", "w") if mode == "stdout-full" else contextlib.nullcontext(subprocess.PIPE) as stdout:
        p = subprocess.run([sys.executable, "-c", _ENTRY, mode, *args], stdout=stdout, stderr=subprocess.PIPE,
                           text=True, env=env, timeout=120)
    assert "Traceback" not in p.stderr and "atexit ran" in p.stderr, p.stderr
    if mode != "thread":
        assert "torn down" not in p.stderr, p.stderr
    if mode == "stdout-full":
        assert p.returncode == 120 and out.is_file(), p.stderr
        return
    assert p.returncode == 2, p.stderr
    assert p.stdout.startswith("buffered") and "not reached" not in p.stdout
    assert re.search(r"^reportgen: .*missing", p.stderr, re.M), p.stderr
    assert ("thread done" in p.stdout) == (mode == "thread")
    assert not out.exists()


@pytest.mark.parametrize("user", [None, "4"])
def test_the_command_runs_numpys_blas_on_one_thread_unless_the_user_chose(monkeypatch, user):
    """cli.entry sets OPENBLAS_NUM_THREADS=1 before main imports numpy (no report uses BLAS; its threads spin at import
    on the core the run's second process needs), and keeps a value the user set."""
    if user is None:
        monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", user)
    seen = []
    monkeypatch.setattr(cli, "main", lambda: seen.append(os.environ.get("OPENBLAS_NUM_THREADS")) or 0)
    monkeypatch.setattr(cli, "_exit_now", lambda code: seen.append(code))
    cli.entry()
    assert seen == [user or "1", 0]


def test_the_command_module_loads_no_numpy_before_the_entry():
    """numpy reads OPENBLAS_NUM_THREADS when it is first imported: importing the command's module must not import it."""
    code = "import sys, reportgen.cli; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert out.stdout.strip() == "False", out.stderr
