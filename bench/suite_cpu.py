"""CPU time of the test suite per file (issue 30 #6): a pytest plugin that records, per test phase, the CPU
seconds of the worker and of the children it reaped, and a summary comparing two such records.

Record (the README's test command, this plugin added; one JSON-lines file per xdist worker, written as it goes,
so a run stopped half way still tells which files it finished):

    PYTHONPATH=$PWD:$PWD/bench SUITE_CPU_OUT=/tmp/suite/after /usr/bin/time -v -o /tmp/suite/after-time.txt \
        python -m pytest -q -p suite_cpu --durations=25

Compare (a baseline recorded the same way from a clean tree of the same commit before the change):

    python bench/suite_cpu.py /tmp/suite/before /tmp/suite/after [--top 25]

prints a markdown table: per file the tests run and CPU seconds before / after (worker plus reaped children: the
corpus' forked cases, ``--jobs`` pools), the sum over the files both runs finished, the collection CPU seconds per
worker, and the whole process tree's user+sys from ``time -v`` (``<dir>-time.txt``) when the run finished. CPU
seconds, not wall: the machine is shared. Never an assertion.

Chromium's CPU is in none of these: its processes end as orphans that no process of the suite waits for, so no
``RUSAGE_CHILDREN`` counts them (the demo page's charts are 3.5-4.6 CPU-s of its renderer). The whole suite's CPU,
Chromium included, is measured by running the command under this script as a child subreaper (Linux
``PR_SET_CHILD_SUBREAPER``: every orphan of the run becomes its child, and it waits for each):

    python bench/suite_cpu.py --run /tmp/suite/after -- python -m pytest -q -p suite_cpu --durations=25

writes ``<dir>-reaped.txt`` (user+sys of every process of the run, and wall), which the comparison prints too.
"""

from __future__ import annotations

import json
import os
import re
import resource
import sys
import time
from collections import Counter
from pathlib import Path

try:
    import pytest
except ImportError:  # the summary alone needs no pytest
    pytest = None

_OUT = os.environ.get("SUITE_CPU_OUT", "suite-cpu")
_fh = None


def _write(rec: dict) -> None:
    global _fh
    if _fh is None:
        os.makedirs(_OUT, exist_ok=True)
        _fh = open(os.path.join(_OUT, os.environ.get("PYTEST_XDIST_WORKER", "main") + ".jsonl"), "a")
    _fh.write(json.dumps(rec) + "\n")
    _fh.flush()


def _cpu() -> tuple[float, float]:
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime, c.ru_utime + c.ru_stime


def _measure(nodeid: str, phase: str):
    s0, c0 = _cpu()
    w0 = time.perf_counter()
    yield
    s1, c1 = _cpu()
    _write({"id": nodeid, "ph": phase, "self": s1 - s0, "child": c1 - c0, "wall": time.perf_counter() - w0})


if pytest is not None:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(item):
        yield from _measure(item.nodeid, "setup")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        yield from _measure(item.nodeid, "call")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(item):
        yield from _measure(item.nodeid, "teardown")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_collection(session):
        yield from _measure("<collect>", "collect")

    def pytest_sessionfinish(session):
        s, c = _cpu()
        _write({"id": "<total>", "ph": "total", "self": s, "child": c, "wall": 0.0})


def load(directory: str) -> tuple[Counter, list[float], Counter, set[str]]:
    """Per file: CPU seconds, tests called; the collection CPU per worker; the files finished (the worker went on
    to another file, or to the end of the session)."""
    per, collect, tests, done = Counter(), [], Counter(), set()
    for f in sorted(Path(directory).glob("*.jsonl")):
        current = None
        for line in f.read_text().splitlines():
            try:
                r = json.loads(line)
            except ValueError:
                continue  # a line cut by a stopped run
            cpu = r["self"] + r["child"]
            if r["ph"] == "collect":
                collect.append(cpu)
                continue
            name = r["id"].split("::")[0] if r["ph"] != "total" else None
            if current is not None and name != current:
                done.add(current)
            current = name
            if name is not None:
                per[name] += cpu
                tests[name] += r["ph"] == "call"
    return per, collect, tests, done


def tree(directory: str) -> str:
    p = Path(str(directory).rstrip("/") + "-time.txt")
    t = p.read_text() if p.is_file() else ""
    u, s = re.search(r"User time \(seconds\): ([\d.]+)", t), re.search(r"System time \(seconds\): ([\d.]+)", t)
    w = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t)
    if not (u and s):
        return "not finished"
    return f"{float(u.group(1)) + float(s.group(1)):.0f} CPU-s, {w.group(1) if w else '?'} wall"


def reaped(directory: str) -> str:
    p = Path(str(directory).rstrip("/") + "-reaped.txt")
    return p.read_text().strip() if p.is_file() else "not measured"


def run(directory: str, cmd: list[str]) -> int:
    """Run ``cmd`` as the child of a child subreaper (this process): wait for it and for every orphan of its tree,
    then write the CPU seconds of all of them to ``<directory>-reaped.txt``. Returns the command's exit code."""
    import ctypes
    import subprocess

    if ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER) failed")
    env = {**os.environ, "SUITE_CPU_OUT": directory}
    w0 = time.perf_counter()
    main_pid = subprocess.Popen(cmd, env=env).pid
    code, late = None, None
    while True:
        try:
            pid, status = os.waitpid(-1, 0 if code is None else os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:  # the command ended; orphans still running get 30 s
            late = late or time.perf_counter()
            if time.perf_counter() - late > 30:
                break
            time.sleep(0.2)
            continue
        if pid == main_pid:
            code = os.waitstatus_to_exitcode(status)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter() - w0
    text = f"{c.ru_utime + c.ru_stime:.0f} CPU-s, {wall / 60:.1f} min wall (every process of the run, Chromium too)"
    Path(str(directory).rstrip("/") + "-reaped.txt").write_text(text + "\n")
    print(text)
    return code if code is not None else 1


def main(argv: list[str]) -> None:
    if argv[:1] == ["--run"]:
        sys.exit(run(argv[1], argv[argv.index("--") + 1:]))
    top = 25
    if "--top" in argv:
        i = argv.index("--top")
        top = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    before, after = argv
    b, bc, bt, bd = load(before)
    a, ac, at, ad = load(after)
    files = sorted(set(b) | set(a), key=lambda f: -max(b.get(f, 0.0), a.get(f, 0.0)))
    both = [f for f in files if f in bd and f in ad]
    print("| file | tests | CPU-s before | CPU-s after | after / before |\n|---|---:|---:|---:|---:|")
    for f in files[:top]:
        bb, aa = b.get(f), a.get(f)
        ratio = f"{aa / bb:.2f}" if bb and aa and f in both else "-"
        print(f"| {f.replace('tests/', '')} | {at.get(f) or bt.get(f)} | {bb or 0:.1f} | {aa or 0:.1f} | {ratio} |")
    sb, sa = sum(b[f] for f in both), sum(a[f] for f in both)
    print(f"| **{len(both)} files finished in both runs** | {sum(at[f] for f in both)} | **{sb:.0f}** | "
          f"**{sa:.0f}** | **{sa / sb if sb else float('nan'):.2f}** |")
    print(f"\ncollection, CPU-s per worker: before {', '.join(f'{x:.1f}' for x in bc if x > 0.01)}; "
          f"after {', '.join(f'{x:.1f}' for x in ac if x > 0.01)}")
    print(f"whole pytest process tree (time -v): before {tree(before)}; after {tree(after)}")
    print(f"every process of the run, reaped (--run): before {reaped(before)}; after {reaped(after)}")


if __name__ == "__main__":
    main(sys.argv[1:])
