#!/usr/bin/env python3
"""Time reportgen's whole report against ``msprof-analyze cluster`` on the 4-rank Ascend set.

Both tools are timed as whole processes, in one run of this script, on the same copy of
the data, interleaved (ours, theirs, ours, theirs, ...) so that load from other work on
the machine hits both alike.

    python bench/ascend_vs_msprof.py [--data DIR] [--runs N] [--no-install] [--mode text|db|both]

Data: ``$REPORTGEN_SHARED/fixtures/ascend/msinsight/test/st/level2`` (default shared root
``<repo>/../shared``): 4 ranks ``rank_{0..3}_ascend_pt``, torch_npu text output plus
``analysis.db``. The input is copied once to a temp dir (outside the timed region) and
never written to; msprof-analyze gets ``-o`` so it writes nothing into ``-d``.

Modes (one table row pair each):
  text  the copy with every ``*.db`` removed -> msprof-analyze text mode (as the research
        notes' ``st_level2_4rank_text`` run);
  db    the as-shipped copy (``analysis.db`` present) -> msprof-analyze DB mode.
reportgen runs on the very same copy in each mode.

msprof-analyze lives in this bench's own venv, created once under the cache dir
(default ``~/.cache/reportgen-bench/venv-msprof``) with ``pip install msprof-analyze``
and reused afterwards. ``--no-install`` skips creating it (then it is reported as not
available unless the venv already exists). Its ``-V`` output is never printed: it embeds
credentials in the PyPI build; the version is read from the package metadata instead.

Each tool gets one untimed warm-up run per mode (reportgen fetches its vl-convert bundle
on the first run on a machine, msprof-analyze compiles its .pyc files), then N timed runs.
Wall time is measured with ``time.perf_counter`` around the child; peak RSS and user+sys
CPU come from ``/usr/bin/time -v`` when present, else from ``resource.getrusage
(RUSAGE_CHILDREN)`` in a fresh wrapper process per measurement. Peak RSS is the largest
single process of the tree (what the kernel reports for waited-for children), not the sum
of concurrently running workers.

Target (printed, not asserted): reportgen wall <= 1/5 of msprof-analyze's wall.
The exit code is 0 when every run of both tools succeeded and produced its output,
1 otherwise (a missing msprof-analyze is not a failure: it is reported as not available).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from _common import gnu_time_stats

REPO = Path(__file__).resolve().parent.parent
DATA_REL = Path("fixtures/ascend/msinsight/test/st/level2")
TARGET_RATIO = 1 / 5
TEXT_OUTPUTS = ("cluster_step_trace_time.csv", "cluster_communication.json",
                "cluster_communication_matrix.json", "communication_group.json")
DB_OUTPUTS = ("cluster_analysis.db",)
GNU_TIME = Path("/usr/bin/time")

# Fallback when /usr/bin/time is missing: a fresh process runs the command and prints the
# RUSAGE_CHILDREN numbers of that single child (its only child, so no delta is needed,
# but we subtract the before-values anyway in case of a changed wrapper).
RUSAGE_WRAPPER = r"""
import json, resource, subprocess, sys
before = resource.getrusage(resource.RUSAGE_CHILDREN)
p = subprocess.run(sys.argv[2:], stdin=subprocess.DEVNULL)
after = resource.getrusage(resource.RUSAGE_CHILDREN)
with open(sys.argv[1], "w") as f:
    json.dump({"maxrss_kb": after.ru_maxrss,
               "user": after.ru_utime - before.ru_utime,
               "sys": after.ru_stime - before.ru_stime}, f)
sys.exit(p.returncode)
"""


@dataclass
class Run:
    rc: int
    wall: float
    maxrss_mib: float | None
    cpu: float | None
    ok: bool
    why: str = ""


@dataclass
class Row:
    tool: str
    mode: str
    runs: list[Run] = field(default_factory=list)
    note: str = ""

    @property
    def good(self) -> list[Run]:
        return [r for r in self.runs if r.ok]

    @property
    def all_ok(self) -> bool:
        return bool(self.runs) and all(r.ok for r in self.runs)

    def median(self, attr: str) -> float | None:
        vals = [getattr(r, attr) for r in self.good if getattr(r, attr) is not None]
        return statistics.median(vals) if vals else None

    def peak(self) -> float | None:
        vals = [r.maxrss_mib for r in self.good if r.maxrss_mib is not None]
        return max(vals) if vals else None


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def measure(cmd: list[str], cwd: Path, stdout_path: Path, env: dict | None = None) -> tuple[int, float, float | None, float | None]:
    """Run cmd as a whole process; return (rc, wall s, peak RSS MiB, user+sys s)."""
    fd, stats = tempfile.mkstemp(prefix="bench-rusage-", suffix=".txt")
    os.close(fd)
    try:
        gnu_time = GNU_TIME
        if gnu_time.exists():
            full = [str(gnu_time), "-v", "-o", stats, *cmd]
        else:
            full = [sys.executable, "-c", RUSAGE_WRAPPER, stats, *cmd]
        with open(stdout_path, "wb") as out:
            t0 = time.perf_counter()
            p = subprocess.run(full, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT, env=env)
            wall = time.perf_counter() - t0
        text = Path(stats).read_text(errors="replace")
        rss = cpu = None
        if gnu_time.exists():
            rss, cpu = gnu_time_stats(text)
            # GNU time exits with the child's code, 127/126 if it could not run it
        elif text.strip():
            d = json.loads(text)
            rss, cpu = d["maxrss_kb"] / 1024, d["user"] + d["sys"]
        return p.returncode, wall, rss, cpu
    finally:
        os.unlink(stats)


def msprof_venv(cache: Path, install: bool) -> tuple[Path | None, str]:
    venv = cache / "venv-msprof"
    exe = venv / "bin" / "msprof-analyze"
    if not exe.exists():
        if not install:
            return None, f"not available (--no-install and no venv at {venv})"
        log(f"creating {venv} and installing msprof-analyze from PyPI (once) ...")
        cache.mkdir(parents=True, exist_ok=True)
        logf = cache / "install.log"
        with open(logf, "wb") as f:
            rc = subprocess.run([sys.executable, "-m", "venv", str(venv)], stdout=f, stderr=subprocess.STDOUT).returncode
            if rc == 0:
                rc = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "msprof-analyze"],
                                    stdout=f, stderr=subprocess.STDOUT).returncode
        if rc != 0 or not exe.exists():
            return None, f"not available (install failed, rc={rc}; see {logf})"
    # Version from metadata; never from `msprof-analyze -V` (it prints credentials).
    v = subprocess.run([str(venv / "bin" / "python"), "-c",
                        "import importlib.metadata as m; print(m.version('msprof-analyze'))"],
                       capture_output=True, text=True)
    return exe, (v.stdout.strip() if v.returncode == 0 else "unknown version")


def prepare_copies(data: Path, tmp: Path, modes: list[str]) -> dict[str, Path]:
    copies = {}
    for mode in modes:
        dst = tmp / f"data-{mode}"
        shutil.copytree(data, dst)
        for dirpath, dirnames, filenames in os.walk(dst):  # fixtures are read-only; make the copy writable
            os.chmod(dirpath, 0o755)
            for fn in filenames:
                os.chmod(os.path.join(dirpath, fn), 0o644)
        if mode == "text":
            for db in dst.rglob("*.db"):
                db.unlink()
        copies[mode] = dst
    return copies


def check_ours(out: Path) -> tuple[bool, str]:
    html, mj = out / "r.html", out / "m.json"
    if not html.is_file() or html.stat().st_size == 0:
        return False, "report missing or empty"
    try:
        json.loads(mj.read_text())
    except (OSError, ValueError) as e:
        return False, f"metrics json unreadable: {e}"
    return True, ""


def check_msprof(out: Path, mode: str, log_path: Path) -> tuple[bool, str]:
    res = out / "cluster_analysis_output"
    want = TEXT_OUTPUTS if mode == "text" else DB_OUTPUTS
    missing = [f for f in want if not (res / f).is_file()]
    if missing:
        return False, f"missing outputs {missing} (log {log_path})"
    return True, ""


def fmt(v: float | None, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def main(argv: list[str] | None = None) -> int:
    shared = Path(os.environ.get("REPORTGEN_SHARED", REPO.parent / "shared"))
    cache_default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "reportgen-bench"
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, default=shared / DATA_REL, help="4-rank Ascend run (default: %(default)s)")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per tool and mode (default: 3)")
    ap.add_argument("--mode", choices=("text", "db", "both"), default="both",
                    help="text: *.db removed in the copy; db: as shipped (default: both)")
    ap.add_argument("--cache-dir", type=Path, default=cache_default, help="where the msprof-analyze venv lives")
    ap.add_argument("--no-install", action="store_true", help="do not create the msprof-analyze venv")
    ap.add_argument("--msprof-force", action="store_true", help="pass --force to msprof-analyze (skip owner/size checks)")
    ap.add_argument("--python", default=sys.executable, help="python that runs reportgen (default: this one)")
    ap.add_argument("--keep", action="store_true", help="keep the temp dir and print its path")
    args = ap.parse_args(argv)

    data = args.data.resolve()
    if not data.is_dir():
        log(f"bench: data not found: {data}")
        return 2
    modes = ["text", "db"] if args.mode == "both" else [args.mode]
    exe, msprof_info = msprof_venv(args.cache_dir, not args.no_install)

    tmp = Path(tempfile.mkdtemp(prefix="reportgen-bench-"))
    try:
        copies = prepare_copies(data, tmp, modes)
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        (tmp / "out").mkdir()
        (tmp / "logs").mkdir()

        rows: dict[tuple[str, str], Row] = {}
        for mode in modes:
            rows[("reportgen", mode)] = Row("reportgen", mode)
            rows[("msprof-analyze", mode)] = Row("msprof-analyze", mode, note="" if exe else msprof_info)

        def run_ours(mode: str, tag: str) -> Run:
            out = tmp / "out" / f"reportgen-{mode}-{tag}"
            out.mkdir()
            lp = tmp / "logs" / f"reportgen-{mode}-{tag}.txt"
            cmd = [args.python, "-m", "reportgen", str(copies[mode]), "-o", str(out / "r.html"),
                   "--json", str(out / "m.json"), "--quiet"]
            rc, wall, rss, cpu = measure(cmd, tmp, lp, env)
            ok, why = check_ours(out) if rc == 0 else (False, f"exit {rc}: {lp.read_text(errors='replace')[-300:].strip()}")
            return Run(rc, wall, rss, cpu, ok, why)

        def run_theirs(mode: str, tag: str) -> Run:
            out = tmp / "out" / f"msprof-{mode}-{tag}"
            lp = tmp / "logs" / f"msprof-{mode}-{tag}.txt"
            cmd = [str(exe), "cluster", "-d", str(copies[mode]), "-o", str(out)]
            if args.msprof_force:
                cmd.append("--force")
            rc, wall, rss, cpu = measure(cmd, tmp, lp)
            ok, why = check_msprof(out, mode, lp) if rc == 0 else (False, f"exit {rc}: {lp.read_text(errors='replace')[-300:].strip()}")
            return Run(rc, wall, rss, cpu, ok, why)

        t_start = time.perf_counter()
        load0 = os.getloadavg()
        for mode in modes:
            log(f"[{mode}] warm-up (untimed) ...")
            warm = {"reportgen": run_ours(mode, "warmup")}
            if exe:
                warm["msprof-analyze"] = run_theirs(mode, "warmup")
            for tool, r in warm.items():
                if not r.ok:
                    log(f"[{mode}] warm-up of {tool} failed: {r.why}")
            for i in range(1, args.runs + 1):
                r = run_ours(mode, str(i))
                rows[("reportgen", mode)].runs.append(r)
                line = f"[{mode}] run {i}/{args.runs}: reportgen {r.wall:.2f} s rc={r.rc}"
                if exe:
                    t = run_theirs(mode, str(i))
                    rows[("msprof-analyze", mode)].runs.append(t)
                    line += f", msprof-analyze {t.wall:.2f} s rc={t.rc}"
                log(line)
        load1 = os.getloadavg()
        total = time.perf_counter() - t_start

        # ---- report
        print(f"reportgen vs msprof-analyze cluster — {datetime.now():%Y-%m-%d %H:%M}")
        print(f"data: {data} (copied to a temp dir; text = *.db removed, db = as shipped)")
        print(f"machine: {os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
              f"python {platform.python_version()}; load avg {load0[0]:.1f} before, {load1[0]:.1f} after")
        print(f"msprof-analyze: {msprof_info}; runs: 1 warm-up + {args.runs} timed per tool and mode, interleaved")
        rss_src = "/usr/bin/time -v" if GNU_TIME.exists() else "getrusage(RUSAGE_CHILDREN)"
        print(f"peak RSS: largest single process ({rss_src}); CPU = user+sys of the process tree")
        print()
        hdr = ("tool", "mode", f"wall s (median of {args.runs})", "CPU s (median)", "peak RSS MiB", "ratio to msprof-analyze", "status")
        table = []
        for mode in modes:
            ours, theirs = rows[("reportgen", mode)], rows[("msprof-analyze", mode)]
            tw = theirs.median("wall")
            for row in (ours, theirs):
                w = row.median("wall")
                ratio = fmt(w / tw, ".3f") if (w is not None and tw) else "n/a"
                if not exe and row is theirs:
                    status = row.note
                elif row.all_ok:
                    status = "ok"
                else:
                    bad = [r for r in row.runs if not r.ok]
                    status = f"{len(bad)}/{len(row.runs)} failed: {bad[0].why}" if bad else "no runs"
                table.append((row.tool, mode, fmt(w, ".2f"), fmt(row.median("cpu"), ".2f"),
                              fmt(row.peak(), ".0f"), ratio, status))
        widths = [max(len(h), *(len(r[i]) for r in table)) for i, h in enumerate(hdr)]
        print("| " + " | ".join(h.ljust(w) for h, w in zip(hdr, widths)) + " |")
        print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
        for r in table:
            print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
        print()
        for mode in modes:
            ow, tw = rows[("reportgen", mode)].median("wall"), rows[("msprof-analyze", mode)].median("wall")
            if ow is None or tw is None:
                print(f"target ({mode}): reportgen wall <= 1/5 msprof-analyze: n/a (no successful runs to compare)")
                continue
            ratio = ow / tw
            verdict = "PASS" if ratio <= TARGET_RATIO else "FAIL"
            print(f"target ({mode}): reportgen wall <= 1/5 msprof-analyze: {verdict} ({ratio:.3f}; "
                  f"{tw / ow:.1f}x faster)")
        print(f"\nbench total {total:.0f} s (timed region, excluding copy and install)")
        if args.keep:
            print(f"kept: {tmp}")

        failed = [r for row in rows.values() for r in row.runs if not r.ok]
        if failed and not args.keep:
            print("some runs failed; rerun with --keep to keep the logs and outputs")
        return 1 if failed else 0
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
