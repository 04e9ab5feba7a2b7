#!/usr/bin/env python3
"""Scale and start-up of reportgen: generated runs of 8..4096 ranks per family, and small reports vs peers.

Everything is a whole process, timed in one run of this script; nothing is asserted (targets are printed
as PASS/FAIL lines). Tables are markdown, like the other benches.

    python bench/scale.py [--quick] [--families mindinsight,ascend,kineto] [--ranks 8,64,256,1024,4096]
                          [--steps 10] [--runs N] [--timeout S] [--no-browser] [--startup-only | --scale-only]
                          [--no-peers] [--no-install] [--reportgen TREE] [--baseline-tree TREE] [--json OUT]

1. **Scale table.** Per family (MindSpore Insight, Ascend, Kineto) and rank count, a run made by
   ``reportgen.synth`` (``hosts = ranks / 8`` x 8 devices, 2 pipeline stages, the spec's defaults otherwise,
   no injected anomaly) is generated once into ``<cache>/scale/<family>-<ranks>r-<steps>s-v<N>/`` (a
   ``.complete.json`` marker beside the dir; generation runs in a child with a time limit, ``--gen-timeout``).
   Each measurement is ``python -m reportgen RUN -o r.html --json m.json --quiet`` with PYTHONPATH = the tree
   (``--reportgen``, default this repo): wall (perf_counter around the child), peak PSS (summed over the process
   tree, sampled from /proc/PID/smaps_rollup: forked workers' shared pages counted once), HTML and JSON size (MB = 10^6 B), then
   the page in headless Chromium (playwright, system Chromium): seconds from ``goto(file://...)`` until
   ``document.documentElement.dataset.chartsReady === '1'``, and the DOM element count. The growth exponent is
   the log-log slope of wall vs ranks against the previous rank count; per family also the least-squares slope
   over all rank counts (and from 64 ranks up). A steps row: Kineto 64 ranks x 10 vs 100 steps.
2. **Start-up table.** ``python -c "import pandas"`` (the floor), ``python -c "import reportgen.cli"``,
   ``reportgen demo``, a 1-rank 34 KB Kineto trace; ratios to the pandas import. Peer rows: the 4-rank Ascend
   set (text mode) vs ``msprof-analyze cluster`` and the small Kineto sets a/b vs HTA (venvs and inputs of
   bench/ascend_vs_msprof.py and bench/kineto_vs_hta.py, in ``<cache>/venv-msprof`` / ``venv-hta``).

``--baseline-tree TREE`` runs every reportgen measurement from a second tree too (interleaved) and adds
ratio columns (this tree / baseline). A run is killed (whole process group) after ``--timeout`` s or when the
tree's RSS passes ``--max-rss-gb``; larger rank counts of that family are then skipped.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import gnu_time_stats  # noqa: E402
from ascend_vs_msprof import DATA_REL as ASCEND_REL  # noqa: E402
from ascend_vs_msprof import check_msprof, msprof_venv, prepare_copies  # noqa: E402
from kineto_vs_hta import HTA_RUNNER, PAGE, SMALL_INPUTS, TreeSampler, copy_input, hta_venv, json_mb  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
GNU_TIME = Path("/usr/bin/time")
CHROMIUM = "/usr/lib/chromium/chromium"
READY_JS = "document.documentElement.dataset.chartsReady === '1'"
#: every chart drawn and every table built (charts below the first screen draw lazily, in idle slices); a page of
#: a tree without lazy drawing has no such flag, and then "all drawn" is the ready time
ALL_DONE_JS = ("document.documentElement.dataset.allDone === '1' || "
               "document.documentElement.dataset.chartsDone === undefined")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
               "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9"]
FAMILIES = ("mindinsight", "ascend", "kineto")
GEN_FORMAT = 2            # bump when the specs below change (invalidates the cache); 2: Ascend MESH-RING links
SMALL_TRACE_REL = Path("fixtures/kineto/hta_tests_data/tests/data/execution_trace/benchmark_simple_add_trace.json.gz")

# targets (printed, not asserted)
T_HTML_MB, T_JSON_MB, T_BROWSER_S = 10.0, 20.0, 3.0
T_1024_WALL, T_1024_RSS_B, T_4096_WALL = 60.0, 2e9, 240.0
T_EXP, EXP_MARGIN = 1.0, 0.15   # +-10 % wall noise at both ends of a 4x rank step moves the slope by ~0.14
T_STARTUP_S, T_STARTUP_X = 1.0, 2.0
T_MSPROF, T_HTA = 0.10, 5.0

GEN_CHILD = r"""
import sys, time
from reportgen.synth import (AscendSpec, KinetoSpec, MindInsightSpec, write_ascend_run, write_kineto_run,
                             write_mindinsight_run)
fam, ranks, steps, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
dph = 8 if ranks % 8 == 0 else ranks
kw = dict(hosts=ranks // dph, devices_per_host=dph, stages=2 if ranks % 2 == 0 else 1, steps=steps)
spec, write = {"mindinsight": (MindInsightSpec, write_mindinsight_run), "ascend": (AscendSpec, write_ascend_run),
               "kineto": (KinetoSpec, write_kineto_run)}[fam]
t = time.perf_counter()
write(out, spec(**kw))
print("GEN-SECONDS", time.perf_counter() - t)
"""


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def fmt(v, spec: str) -> str:
    return "n/a" if v is None else format(v, spec)


def md_table(hdr: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(hdr)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(hdr, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |")
    print()


def slope(xs: list[float], ys: list[float]) -> float | None:
    """Least-squares slope of log(y) on log(x) (the growth exponent); None for < 2 points."""
    pts = [(math.log(x), math.log(y)) for x, y in zip(xs, ys) if x and y]
    if len(pts) < 2:
        return None
    mx = sum(p[0] for p in pts) / len(pts)
    my = sum(p[1] for p in pts) / len(pts)
    den = sum((p[0] - mx) ** 2 for p in pts)
    return sum((p[0] - mx) * (p[1] - my) for p in pts) / den if den else None


# --------------------------------------------------------------------------- measuring one process tree

class LimitSampler(TreeSampler):
    """TreeSampler that kills the process group once the tree's RSS passes ``limit`` bytes (or, with ``disk``,
    once the free space there drops below ``min_free`` bytes); samples every 50 ms for the first 2 s, then
    every 250 ms (a /proc scan per sample costs CPU on long runs)."""

    def __init__(self, root: int, pgid: int, limit: float, disk: Path | None = None, min_free: float = 0):
        super().__init__(root)
        self.pgid, self.limit, self.killed = pgid, limit, ""
        self.disk, self.min_free = disk, min_free

    def run(self) -> None:
        t0 = time.monotonic()
        while not self._halt.is_set():
            self.sample()
            if not self.killed:
                if self.peak > self.limit:
                    self.killed = "rss"
                elif self.disk is not None and shutil.disk_usage(self.disk).free < self.min_free:
                    self.killed = "disk"
                if self.killed:
                    kill_group(self.pgid)
            self._halt.wait(0.05 if time.monotonic() - t0 < 2 else 0.25)


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@dataclass
class Proc:
    rc: int
    wall: float
    cpu: float | None
    rss_mib: float            # PSS summed over the process tree (sampled; kineto_vs_hta.TreeSampler)
    procs: int
    timed_out: bool = False
    killed: str = ""          # "rss" or "disk" when the sampler killed the group
    out: str = ""             # tail of stdout+stderr


def run_proc(cmd: list[str], env: dict, cwd: Path, timeout: float, max_rss: float, disk: Path | None = None,
             min_free: float = 0) -> Proc:
    """Run cmd (under GNU time when present) in its own process group; kill the group on timeout / RSS limit."""
    fd, stats = tempfile.mkstemp(prefix="bench-time-", suffix=".txt")
    os.close(fd)
    logf = tempfile.TemporaryFile()
    try:
        full = [str(GNU_TIME), "-v", "-o", stats, *cmd] if GNU_TIME.exists() else cmd
        t0 = time.perf_counter()
        p = subprocess.Popen(full, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             start_new_session=True)
        # the child is the session leader: sample its descendants and, without GNU time, itself
        sampler = LimitSampler(p.pid if GNU_TIME.exists() else os.getpid(), p.pid, max_rss, disk, min_free)
        sampler.start()
        timed_out = False
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            kill_group(p.pid)
            rc = p.wait()
        wall = time.perf_counter() - t0
        sampler.stop()
        kill_group(p.pid)   # stray grandchildren (a pool worker) must not outlive the measurement
        text = Path(stats).read_text(errors="replace")
        single, cpu = gnu_time_stats(text)
        logf.seek(0)
        out = logf.read().decode(errors="replace")[-2000:]
        return Proc(rc, wall, cpu, sampler.peak / 2**20 or (single or 0.0), sampler.max_procs, timed_out,
                    sampler.killed, out)
    finally:
        logf.close()
        os.unlink(stats)


def tree_env(tree: Path | None) -> dict:
    # PYTHONDONTWRITEBYTECODE (set in some sandboxes) would make every run compile the tree's modules again
    # (~0.8 s): an installed reportgen has its .pyc files, so the bench lets the warm-up run write them
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONDONTWRITEBYTECODE")}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    return env


def tree_version(tree: Path) -> str:
    g = subprocess.run(["git", "-C", str(tree), "describe", "--always", "--dirty"], capture_output=True, text=True)
    b = subprocess.run(["git", "-C", str(tree), "rev-parse", "--abbrev-ref", "HEAD"], capture_output=True, text=True)
    return f"{tree} ({b.stdout.strip() or '?'} {g.stdout.strip() or 'not a git tree'})"


# --------------------------------------------------------------------------- generated runs

def generated_run(args, fam: str, ranks: int, steps: int):
    """The cached run dir (generated now if missing); returns (dir or None, seconds, generated now, MB, note)."""
    limit, max_rss, min_free = args.gen_timeout, args.max_rss_gb * 2**30, args.min_free_gb * 1e9
    d = args.cache_dir / "scale" / f"{fam}-{ranks}r-{steps}s-v{GEN_FORMAT}"
    marker = d.with_name(d.name + ".complete.json")
    if marker.exists() and d.is_dir():
        m = json.loads(marker.read_text())
        return d, m["seconds"], False, m["bytes"] / 1e6, ""
    partial = d.with_name(d.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    shutil.rmtree(d, ignore_errors=True)
    d.parent.mkdir(parents=True, exist_ok=True)
    (d.parent / "README").write_text("Generated runs of bench/scale.py (reportgen); safe to delete.\n")
    log(f"generating {d.name} (once, limit {limit:.0f} s) ...")
    if shutil.disk_usage(d.parent).free < min_free:
        note = f"not generated (less than {args.min_free_gb:g} GB free in {d.parent})"
        log(f"  {note}")
        return None, None, True, None, note
    p = run_proc([sys.executable, "-c", GEN_CHILD, fam, str(ranks), str(steps), str(partial)],
                 tree_env(args.gen_tree), d.parent, limit, max_rss, d.parent, min_free)
    if p.rc != 0 or p.timed_out or p.killed:
        shutil.rmtree(partial, ignore_errors=True)
        if p.timed_out:
            note = f"not generated ({limit:.0f} s limit)"
        elif p.killed == "rss":
            note = f"not generated (RSS limit {max_rss / 2**30:.1f} GiB)"
        elif p.killed == "disk":
            note = f"not generated (free disk fell below {args.min_free_gb:g} GB after {p.wall:.0f} s)"
        else:
            tail = p.out.strip().splitlines()
            note = f"generation failed (exit {p.rc}): {tail[-1][:200] if tail else ''}"
        log(f"  {note}")
        return None, p.wall, True, None, note
    m = re.search(r"GEN-SECONDS ([\d.]+)", p.out)
    secs = float(m.group(1)) if m else p.wall
    nbytes = sum(f.stat().st_size for f in partial.rglob("*") if f.is_file())
    partial.rename(d)
    marker.write_text(json.dumps({"seconds": secs, "bytes": nbytes, "rss_mib": p.rss_mib, "family": fam,
                                  "ranks": ranks, "steps": steps, "generator_tree": str(args.gen_tree)}))
    log(f"  done in {secs:.0f} s, {nbytes / 1e6:.0f} MB, generator peak RSS {p.rss_mib:.0f} MiB")
    return d, secs, True, nbytes / 1e6, ""


# --------------------------------------------------------------------------- browser

class Browser:
    """Headless system Chromium via playwright, started on first use; ``available`` says why not."""

    def __init__(self, enabled: bool, timeout_s: float):
        self.enabled, self.timeout_s = enabled, timeout_s
        self._pw = self._browser = None
        self.info = "off (--no-browser)" if not enabled else "not started"

    def _start(self) -> bool:
        if self._browser is not None:
            return True
        if not self.enabled:
            return False
        try:
            from playwright.sync_api import sync_playwright
        except ImportError:
            self.enabled, self.info = False, "not available (no playwright package)"
            return False
        if not Path(CHROMIUM).exists():
            self.enabled, self.info = False, f"not available (no {CHROMIUM})"
            return False
        self._pw = sync_playwright().start()
        self._browser = self._pw.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
        import importlib.metadata as md
        self.info = f"Chromium {self._browser.version} (headless, playwright {md.version('playwright')})"
        return True

    def ready(self, html: Path) -> tuple[float | None, int | None, float | None, str]:
        """(seconds from goto until the first screen is ready, DOM element count then, seconds until every chart
        is drawn and every table built, note)."""
        if not self._start():
            return None, None, None, ""
        ctx = self._browser.new_context()
        page = ctx.new_page()
        ms = self.timeout_s * 1000
        try:
            t0 = time.perf_counter()
            page.goto(html.as_uri(), timeout=ms)
            page.wait_for_function(READY_JS, timeout=max(1.0, ms - (time.perf_counter() - t0) * 1000), polling=20)
            secs = time.perf_counter() - t0
            nodes = page.evaluate("document.getElementsByTagName('*').length")
            page.wait_for_function(ALL_DONE_JS, timeout=max(1.0, ms - (time.perf_counter() - t0) * 1000),
                                   polling=20)
            return secs, nodes, time.perf_counter() - t0, ""
        except Exception as e:   # a timeout or a crashed page: reported, not fatal
            return None, None, None, f"browser: {type(e).__name__} after {time.perf_counter() - t0:.0f} s"
        finally:
            ctx.close()

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
            self._pw.stop()


# --------------------------------------------------------------------------- reportgen measurements

@dataclass
class Meas:
    wall: float | None = None
    cpu: float | None = None
    rss_mib: float | None = None
    html_mb: float | None = None
    json_mb: float | None = None
    browser_s: float | None = None
    dom_nodes: int | None = None
    all_drawn_s: float | None = None
    ok: bool = False
    why: str = ""


@dataclass
class Cell:
    """The runs of one case (one tree)."""
    runs: list[Meas] = field(default_factory=list)

    @property
    def good(self) -> list[Meas]:
        return [m for m in self.runs if m.ok]

    def med(self, attr: str):
        vals = [getattr(m, attr) for m in self.good if getattr(m, attr) is not None]
        return statistics.median(vals) if vals else None

    def peak(self) -> float | None:
        vals = [m.rss_mib for m in self.runs if m.rss_mib is not None]
        return max(vals) if vals else None

    def status(self) -> str:
        bad = [m for m in self.runs if not m.ok]
        if not self.runs:
            return "not run"
        if not bad:
            notes = sorted({m.why for m in self.runs if m.why})
            return "ok" + (f" ({notes[0]})" if notes else "")
        return (f"{len(bad)}/{len(self.runs)} failed: " if len(self.runs) > 1 else "") + bad[0].why


class Runner:
    def __init__(self, args, tmp: Path, browser: Browser):
        self.args, self.tmp, self.browser = args, tmp, browser
        self.n = 0
        self.done: dict[tuple, Cell] = {}   # (family, ranks, steps) -> this tree's runs in the scale table

    def report(self, tree: Path, run_dir: str, extra: list[str] = (), browser: bool = False,
               timeout: float | None = None) -> Meas:
        """One whole ``python -m reportgen RUN -o r.html --json m.json --quiet`` from ``tree``."""
        self.n += 1
        out = self.tmp / f"out-{self.n}"
        out.mkdir()
        html, mj = out / "r.html", out / "m.json"
        cmd = [sys.executable, "-m", "reportgen", run_dir, "-o", str(html), "--json", str(mj), "--quiet", *extra]
        timeout = timeout or self.args.timeout
        p = run_proc(cmd, tree_env(tree), out, timeout, self.args.max_rss_gb * 2**30)
        m = Meas(wall=p.wall, cpu=p.cpu, rss_mib=p.rss_mib)
        try:
            if p.timed_out:
                m.why = f"timeout after {timeout:.0f} s (RSS reached {p.rss_mib:.0f} MiB)"
            elif p.killed:
                m.why = f"killed at {p.rss_mib:.0f} MiB (--max-rss-gb {self.args.max_rss_gb:g}) after {p.wall:.0f} s"
            elif p.rc != 0:
                tail = p.out.strip().splitlines()
                m.why = f"exit {p.rc}: {tail[-1][:200] if tail else ''}"
            elif not html.is_file() or html.stat().st_size == 0:
                m.why = "no report written"
            else:
                m.html_mb = html.stat().st_size / 1e6
                if mj.is_file():
                    m.json_mb = mj.stat().st_size / 1e6
                m.ok = True
                if browser:
                    m.browser_s, m.dom_nodes, m.all_drawn_s, m.why = self.browser.ready(html)
            return m
        finally:
            shutil.rmtree(out, ignore_errors=True)


def trees(args) -> list[tuple[str, Path]]:
    out = [("new", args.reportgen)]
    if args.baseline_tree:
        out.append(("base", args.baseline_tree))
    return out


def ratio(a, b, spec=".2f") -> str:
    return fmt(a / b, spec) if a is not None and b else "n/a"


# --------------------------------------------------------------------------- 1. scale

def scale(args, runner: Runner, results: dict) -> None:
    fams = [f for f in args.families if f in FAMILIES]
    base = bool(args.baseline_tree)
    rows, table = [], []
    for fam in fams:
        stop = ""
        prev = None
        dead: set[str] = set()   # trees that failed at a smaller rank count of this family
        for ranks in args.ranks:
            for steps in args.steps:
                row = dict(family=fam, ranks=ranks, steps=steps)
                rows.append(row)
                if stop:
                    row["note"] = stop
                    continue
                d, gsecs, gnow, gmb, note = generated_run(args, fam, ranks, steps)
                row.update(gen_s=gsecs, gen_now=gnow, input_mb=gmb)
                if d is None:
                    row["note"] = note
                    continue
                n = args.runs or (3 if ranks <= 64 else 1)
                cells = {k: Cell() for k, _ in trees(args)}
                for i in range(n):
                    for key, tree in trees(args):
                        if key in dead:
                            continue
                        m = runner.report(tree, str(d), browser=not args.no_browser)
                        cells[key].runs.append(m)
                        log(f"[{fam} {ranks}r {steps}s {key} {i + 1}/{n}] wall {fmt(m.wall, '.2f')} s, "
                            f"{fmt(m.rss_mib, '.0f')} MiB, HTML {fmt(m.html_mb, '.1f')} MB, "
                            f"browser {fmt(m.browser_s, '.2f')} s {m.why}")
                row["cells"] = cells
                runner.done[(fam, ranks, steps)] = cells["new"]
                new = cells["new"]
                if not new.good:
                    stop = f"skipped ({ranks} ranks: {new.status()[:60]})"
                dead |= {k for k, c in cells.items() if c.runs and not c.good}
                w = new.med("wall")
                cut = [m.wall for m in new.runs if m.why.startswith(("timeout", "killed"))]
                if w is None and cut:   # killed: its wall is a floor, so the exponent is a lower bound
                    w, row["exp_lower"] = min(cut), True
                exp = None
                if prev and w is not None and prev[1] is not None and steps == args.steps[0]:
                    exp = math.log(w / prev[1]) / math.log(ranks / prev[0])
                row["exp_prev"] = exp
                if steps == args.steps[0]:
                    prev = (ranks, w)
    results["scale"] = [_row_json(r) for r in rows]
    if not rows:
        return

    hdr = ["family", "ranks", "steps", "input MB", "gen s", "wall s", "CPU s", "exp vs prev", "peak PSS MiB", "HTML MB",
           "JSON MB", "browser s", "DOM nodes", "all drawn s"]
    if base:
        hdr += ["wall new/base", "CPU new/base", "RSS new/base", "HTML new/base", "browser new/base"]
    hdr.append("status")
    for r in rows:
        c = r.get("cells")
        gen = "n/a" if r.get("gen_s") is None else f"{r['gen_s']:.0f}" + ("" if r.get("gen_now") else " (cached)")
        if not c:
            cols = [r["family"], str(r["ranks"]), str(r["steps"]), fmt(r.get("input_mb"), ".1f"), gen] + ["n/a"] * 9
            if base:
                cols += ["n/a"] * 5
            table.append(cols + [r.get("note", "")])
            continue
        n = c["new"]
        cut = [m.wall for m in n.runs if m.why.startswith(("timeout", "killed"))]   # killed: wall is a floor
        wall = fmt(n.med("wall"), ".2f") if n.good or not cut else f">{min(cut):.0f}"
        exp = (">=" if r.get("exp_lower") else "") + fmt(r.get("exp_prev"), ".2f")
        cols = [r["family"], str(r["ranks"]), str(r["steps"]), fmt(r.get("input_mb"), ".1f"), gen, wall,
                fmt(n.med("cpu"), ".2f"), exp,
                fmt(n.peak(), ".0f"), fmt(n.med("html_mb"), ".2f"), fmt(n.med("json_mb"), ".2f"),
                fmt(n.med("browser_s"), ".2f"),
                fmt(n.med("dom_nodes"), ".0f"), fmt(n.med("all_drawn_s"), ".2f")]
        if base:
            b = c["base"]
            cols += [ratio(n.med("wall"), b.med("wall")), ratio(n.med("cpu"), b.med("cpu")), ratio(n.peak(), b.peak()),
                     ratio(n.med("html_mb"), b.med("html_mb")), ratio(n.med("browser_s"), b.med("browser_s"))]
        st = n.status()
        if base and c["base"].status() != "ok":
            st += f"; base: {c['base'].status() if c['base'].runs else 'skipped (failed at fewer ranks)'}"
        table.append(cols + [st])
    print("## Scale: generated runs (hosts = ranks/8 x 8 devices, 2 stages)\n")
    md_table(hdr, table)

    # growth exponents per family (main steps only)
    s0 = args.steps[0]
    for fam in fams:
        pts = [(r["ranks"], r["cells"]["new"]) for r in rows if r["family"] == fam and r["steps"] == s0
               and r.get("cells") and r["cells"]["new"].good]
        if len(pts) < 2:
            continue
        parts = []
        for label, attr in (("wall", "wall"), ("peak RSS", "rss"), ("HTML", "html_mb"), ("JSON", "json_mb")):
            ys = [(c.peak() if attr == "rss" else c.med(attr)) for _, c in pts]
            xs = [r for r, _ in pts]
            s_all = slope(xs, ys)
            up = [(x, y) for x, y in zip(xs, ys) if x >= 64]
            s_up = slope([x for x, _ in up], [y for _, y in up]) if len(up) >= 2 else None
            parts.append(f"{label} {fmt(s_all, '.2f')}" + (f" ({fmt(s_up, '.2f')} from 64 up)" if s_up is not None
                                                          and len(up) < len(xs) else ""))
        print(f"growth exponent, {fam} ({pts[0][0]}..{pts[-1][0]} ranks, least squares on log-log): "
              + ", ".join(parts))
    print()

    # targets
    def verdict(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    main = [r for r in rows if r["steps"] == s0]
    for fam in fams:
        fr = [r for r in main if r["family"] == fam]
        done = [r for r in fr if r.get("cells") and r["cells"]["new"].good]
        missing = [str(r["ranks"]) for r in fr if r not in done]
        miss = f"; not measured at {','.join(missing)} ranks" if missing else ""
        for label, attr, lim, unit in (("HTML", "html_mb", T_HTML_MB, "MB"), ("JSON", "json_mb", T_JSON_MB, "MB"),
                                       ("browser ready", "browser_s", T_BROWSER_S, "s")):
            vals = [(r["ranks"], r["cells"]["new"].med(attr)) for r in done]
            vals = [(k, v) for k, v in vals if v is not None]
            if not vals:
                print(f"target {fam}: {label} <= {lim:g} {unit} at every rank count: n/a (no data{miss})")
                continue
            worst = max(vals, key=lambda kv: kv[1])
            over = [k for k, v in vals if v > lim]
            word = "FAIL" if over else ("INCOMPLETE" if missing or len(vals) < len(done) else "PASS")
            print(f"target {fam}: {label} <= {lim:g} {unit} at every rank count: {word} "
                  f"(max {worst[1]:.2f} {unit} at {worst[0]} ranks" + (f"; over at {','.join(map(str, over))}" if over
                                                                      else "") + f"{miss})")
        for rk, lim_w, lim_r in ((1024, T_1024_WALL, T_1024_RSS_B), (4096, T_4096_WALL, None)):
            r = next((r for r in fr if r["ranks"] == rk), None)
            if r is None:
                continue
            c = r.get("cells")
            if not c or not c["new"].good:
                what = f"target {fam}: {rk} ranks wall <= {lim_w:.0f} s" + (" and peak RSS <= 2 GB" if lim_r else "")
                print(what + (f": FAIL ({c['new'].status()})" if c else f": n/a ({r.get('note', 'not measured')})"))
                continue
            w, rss = c["new"].med("wall"), c["new"].peak()
            print(f"target {fam}: {rk} ranks wall <= {lim_w:.0f} s: {verdict(w <= lim_w)} ({w:.1f} s)")
            if lim_r:
                print(f"target {fam}: {rk} ranks peak RSS <= 2 GB: {verdict(rss * 2**20 <= lim_r)} "
                      f"({rss * 2**20 / 1e9:.2f} GB)")
        exps = [(r["ranks"], r["exp_prev"], r.get("exp_lower")) for r in fr
                if r["ranks"] >= 256 and r.get("exp_prev") is not None]
        if exps:
            worst = max(exps, key=lambda kv: kv[1])
            up = [(r["ranks"], r["cells"]["new"].med("wall")) for r in done if r["ranks"] >= 64]
            s_up = slope([x for x, _ in up], [y for _, y in up])
            print(f"target {fam}: wall exponent <= {T_EXP:.1f} (+{EXP_MARGIN} noise margin) at each step from 64 ranks "
                  f"up: {verdict(worst[1] <= T_EXP + EXP_MARGIN)} (max {'>=' if worst[2] else ''}{worst[1]:.2f} at "
                  f"{worst[0]} ranks; least squares from 64 up {fmt(s_up, '.2f')})")
    print()


def _row_json(r: dict) -> dict:
    out = {k: v for k, v in r.items() if k != "cells"}
    for key, c in (r.get("cells") or {}).items():
        out[key] = {"runs": [asdict(m) for m in c.runs], "status": c.status()}
    return out


def steps_row(args, runner: Runner, results: dict) -> None:
    """Kineto 64 ranks x 10 vs 100 steps by default (the issue: 8-9x wall, HTML 10 -> 72 MB)."""
    ranks, steps = args.steps_row
    rows = []
    for s in steps:
        d, gsecs, gnow, gmb, note = generated_run(args, "kineto", ranks, s)
        c = runner.done.get(("kineto", ranks, s)) or Cell()   # measured in the scale table already
        if d is not None and not c.runs:
            for i in range(args.runs or 1):
                m = runner.report(args.reportgen, str(d), browser=not args.no_browser)
                c.runs.append(m)
                log(f"[steps kineto {ranks}r {s}s {i + 1}] wall {fmt(m.wall, '.2f')} s, "
                    f"HTML {fmt(m.html_mb, '.1f')} MB")
        rows.append((s, gsecs, gnow, gmb, note, c))
    results["steps"] = [{"steps": s, "gen_s": g, "input_mb": mb, "note": note, "runs": [asdict(m) for m in c.runs]}
                        for s, g, _, mb, note, c in rows]
    print(f"## Steps: Kineto {ranks} ranks, {steps[0]} vs {steps[1]} steps\n")
    hdr = ["steps", "input MB", "gen s", "wall s", "peak PSS MiB", "HTML MB", "JSON MB", "browser s", "DOM nodes",
           "all drawn s", "status"]
    md_table(hdr, [[str(s), fmt(mb, ".1f"), fmt(g, ".0f") + ("" if now else " (cached)"), fmt(c.med("wall"), ".2f"),
                    fmt(c.peak(), ".0f"), fmt(c.med("html_mb"), ".2f"), fmt(c.med("json_mb"), ".2f"),
                    fmt(c.med("browser_s"), ".2f"), fmt(c.med("dom_nodes"), ".0f"), fmt(c.med("all_drawn_s"), ".2f"),
                    note or c.status()]
                   for s, g, now, mb, note, c in rows])
    a, b = rows[0][5], rows[1][5]
    k = steps[1] / steps[0]
    print(f"{steps[1]} / {steps[0]} steps: wall {ratio(b.med('wall'), a.med('wall'))}x, "
          f"RSS {ratio(b.peak(), a.peak())}x, "
          f"HTML {ratio(b.med('html_mb'), a.med('html_mb'))}x, JSON {ratio(b.med('json_mb'), a.med('json_mb'))}x "
          f"(linear in steps would be {k:.0f}x)")
    h = b.med("html_mb")
    print(f"target: HTML <= {T_HTML_MB:g} MB at {steps[1]} steps: "
          + ("n/a" if h is None else f"{'PASS' if h <= T_HTML_MB else 'FAIL'} ({h:.2f} MB)"))
    print()


# --------------------------------------------------------------------------- 2. start-up and peers

def startup(args, runner: Runner, results: dict, shared: Path) -> None:
    n = args.runs or 3
    small = shared / SMALL_TRACE_REL
    small_dir = runner.tmp / "small-trace"
    small_dir.mkdir()
    if small.is_file():
        shutil.copy(small, small_dir / small.name)
    cases = [("python -c 'import pandas'", "py", ["-c", "import pandas"]),
             ("python -c 'import reportgen.cli'", "py", ["-c", "import reportgen.cli"]),
             ("reportgen demo -o x.html", "demo", []),
             (f"reportgen 1-rank Kineto trace ({small.name}, 34 KB JSON)", "small", [])]
    cells = {(c[0], k): Cell() for c in cases for k, _ in trees(args)}
    log("start-up: warm-up (untimed) ...")
    for key, tree in trees(args):
        runner.report(tree, "demo")
    for i in range(n):
        for label, kind, argv in cases:
            for key, tree in trees(args):
                if kind == "py":
                    if key == "base" and "pandas" in label:
                        continue
                    p = run_proc([sys.executable, *argv], tree_env(tree), runner.tmp, args.timeout,
                                 args.max_rss_gb * 2**30)
                    m = Meas(wall=p.wall, cpu=p.cpu, rss_mib=p.rss_mib, ok=p.rc == 0,
                             why="" if p.rc == 0 else f"exit {p.rc}")
                elif kind == "demo":
                    m = runner.report(tree, "demo")
                elif not small.is_file():
                    m = Meas(why=f"not found: {small}")
                else:
                    m = runner.report(tree, str(small_dir))
                cells[(label, key)].runs.append(m)
        log(f"start-up round {i + 1}/{n} done")
    pandas = cells[(cases[0][0], "new")].med("wall")
    pandas_cpu = cells[(cases[0][0], "new")].med("cpu")
    base = bool(args.baseline_tree)
    hdr = ["case", f"wall s (median of {n})", "CPU s", "peak PSS MiB", "x pandas import", "CPU x pandas"]
    if base:
        hdr += ["base wall s", "new/base", "CPU new/base"]
    hdr.append("status")
    table = []
    for label, _, _ in cases:
        c = cells[(label, "new")]
        cols = [label, fmt(c.med("wall"), ".2f"), fmt(c.med("cpu"), ".2f"), fmt(c.peak(), ".0f"),
                ratio(c.med("wall"), pandas), ratio(c.med("cpu"), pandas_cpu)]
        if base:
            b = cells[(label, "base")]
            cols += ([fmt(b.med("wall"), ".2f"), ratio(c.med("wall"), b.med("wall")), ratio(c.med("cpu"), b.med("cpu"))]
                     if b.runs else ["", "", ""])
        table.append(cols + [c.status()])
    results["startup"] = {f"{label} [{k}]": [asdict(m) for m in c.runs] for (label, k), c in cells.items()}
    print("## Start-up (whole processes; ratio to `python -c 'import pandas'` on the same machine)\n")
    md_table(hdr, table)
    for label, _, _ in cases[2:]:
        w = cells[(label, "new")].med("wall")
        if w is None or pandas is None:
            print(f"target: {label} <= {T_STARTUP_S:g} s and <= {T_STARTUP_X:g}x pandas import: n/a")
            continue
        ok = w <= T_STARTUP_S and w / pandas <= T_STARTUP_X
        c = cells[(label, "new")].med("cpu")
        cpu = f"; CPU {c:.2f} s, {c / pandas_cpu:.1f}x" if c and pandas_cpu else ""
        print(f"target: {label} <= {T_STARTUP_S:g} s and <= {T_STARTUP_X:g}x pandas import: {'PASS' if ok else 'FAIL'} "
              f"({w:.2f} s, {w / pandas:.1f}x{cpu})")
    print()


def peers(args, runner: Runner, results: dict, shared: Path) -> None:
    n = args.runs or 3
    install = not args.no_install
    msprof, msprof_info = msprof_venv(args.cache_dir, install)
    hta_py, hta_info = hta_venv(args.cache_dir, install)
    print(f"msprof-analyze: {msprof_info}")
    print(f"HTA: {hta_info}\n")
    tmp = runner.tmp / "peers"
    tmp.mkdir()
    (tmp / "hta_run.py").write_text(HTA_RUNNER)
    inputs = []   # (key, label, dir, MB, peer)
    asc = shared / ASCEND_REL
    if asc.is_dir():
        d = prepare_copies(asc, tmp, ["text"])["text"]
        inputs.append(("ascend", "Ascend 4 ranks (text)", d, None, "msprof-analyze"))
    for key, (label, rel) in SMALL_INPUTS.items():
        if (shared / rel).is_dir():
            d = copy_input(shared / rel, tmp / key)
            inputs.append((key, f"Kineto {key}: {label}", d, json_mb(d), "HTA"))
    hta_env = tree_env(None)

    def theirs(key: str, d: Path, tag: str) -> Meas:
        if key == "ascend":
            if not msprof:
                return Meas(why=msprof_info)
            out = tmp / f"msprof-{tag}"
            p = run_proc([str(msprof), "cluster", "-d", str(d), "-o", str(out)], hta_env, tmp, args.timeout,
                         args.max_rss_gb * 2**30)
            ok, why = (check_msprof(out, "text", Path("(log not kept)")) if p.rc == 0
                       else (False, f"exit {p.rc}: {p.out.strip()[-200:]}"))
            shutil.rmtree(out, ignore_errors=True)
        else:
            if not hta_py:
                return Meas(why=hta_info)
            p = run_proc([str(hta_py), str(tmp / "hta_run.py"), str(d)], hta_env, tmp, args.timeout,
                         args.max_rss_gb * 2**30)
            res = re.findall(r"^BENCH-RESULT (.*)$", p.out, re.M)
            steps = json.loads(res[-1]).get("steps", {}) if res else {}
            ok = bool(res) and "load" not in steps   # load done: timed; failed analyses only noted
            why = "; ".join(f"{k} failed: {v}" for k, v in steps.items() if v != "ok") or ("" if ok else
                                                                                            f"exit {p.rc}")
        return Meas(wall=p.wall, cpu=p.cpu, rss_mib=p.rss_mib, ok=ok, why=why)

    cells: dict = {}
    t_keys = [k for k, _ in trees(args)]
    for key, label, d, mb, peer in inputs:
        for k in t_keys + ["peer"]:
            cells[(key, k)] = Cell()
        log(f"[{key}] warm-up (untimed) ...")
        for _, tree in trees(args):
            runner.report(tree, str(d))
        theirs(key, d, "warmup")
        for i in range(n):
            for k, tree in trees(args):
                cells[(key, k)].runs.append(runner.report(tree, str(d)))
            cells[(key, "peer")].runs.append(theirs(key, d, str(i)))
            log(f"[{key}] run {i + 1}/{n}: ours {fmt(cells[(key, 'new')].runs[-1].wall, '.2f')} s, "
                f"{peer} {fmt(cells[(key, 'peer')].runs[-1].wall, '.2f')} s")
    results["peers"] = {f"{key} [{k}]": [asdict(m) for m in c.runs] for (key, k), c in cells.items()}
    base = bool(args.baseline_tree)
    hdr = ["input", "tool", "MB JSON", f"wall s (median of {n})", "CPU s", "peak PSS MiB (tree)", "ours/peer wall",
           "peer/ours per MB", "status"]
    table = []
    for key, label, d, mb, peer in inputs:
        pw = cells[(key, "peer")].med("wall")
        for k in t_keys + ["peer"]:
            c = cells[(key, k)]
            tool = peer if k == "peer" else ("reportgen" + (" (base)" if k == "base" else ""))
            w = c.med("wall")
            is_peer = k == "peer"
            table.append([label, tool, fmt(mb, ".1f"), fmt(w, ".2f"), fmt(c.med("cpu"), ".2f"), fmt(c.peak(), ".0f"),
                          "1" if is_peer and pw else ratio(w, pw, ".3f"),
                          "1" if is_peer and pw else ratio(pw, w, ".1f") if mb else "",
                          c.status() if c.runs else "not run"])
    print("## Peers: small sets, same data, interleaved" + (" (the base tree too)" if base else "") + "\n")
    md_table(hdr, table)
    for key, label, d, mb, peer in inputs:
        ow, pw = cells[(key, "new")].med("wall"), cells[(key, "peer")].med("wall")
        oc, pc = cells[(key, "new")].med("cpu"), cells[(key, "peer")].med("cpu")
        cpu = f"; CPU s ours/peer {oc / pc:.3f}" if oc and pc else ""
        if key == "ascend":
            t = f"target: {label}: reportgen wall <= 1/10 of msprof-analyze cluster: "
            print(t + ("n/a (no runs to compare)" if ow is None or pw is None else
                       f"{'PASS' if ow / pw <= T_MSPROF else 'FAIL'} ({ow / pw:.3f}; {pw / ow:.1f}x faster{cpu})"))
        else:
            t = f"target: {label}: >= {T_HTA:g}x HTA's throughput per MB: "
            print(t + ("n/a (no runs to compare)" if ow is None or pw is None else
                       f"{'PASS' if pw / ow >= T_HTA else 'FAIL'} ({pw / ow:.1f}x; "
                       f"{ow / mb:.4f} vs {pw / mb:.4f} s/MB{cpu})"))
    print()


# --------------------------------------------------------------------------- main

def versions(py_env: dict) -> str:
    code = ("import importlib.metadata as m\nout=[]\nfor p in ('pandas','numpy','altair','msgspec','orjson'):\n"
            " try: out.append(p+' '+m.version(p))\n except Exception: pass\nprint(', '.join(out))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=py_env)
    return r.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    shared = Path(os.environ.get("REPORTGEN_SHARED", REPO.parent / "shared"))
    cache_default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "reportgen-bench"
    avail = next((int(line.split()[1]) * 1024 for line in open("/proc/meminfo") if line.startswith("MemAvailable")), 0)
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--families", default=",".join(FAMILIES), help="comma-separated (default %(default)s)")
    ap.add_argument("--ranks", default="8,64,256,1024,4096", help="rank counts (default %(default)s)")
    ap.add_argument("--steps", default="10", help="steps per generated run, comma-separated (default %(default)s)")
    ap.add_argument("--runs", type=int, default=None,
                    help="timed runs per case, median (default: 3 up to 64 ranks and for start-up/peers, 1 above)")
    ap.add_argument("--timeout", type=float, default=900, help="per reportgen run, s (default %(default)s)")
    ap.add_argument("--gen-timeout", type=float, default=1800, help="per generated run, s (default %(default)s)")
    ap.add_argument("--min-free-gb", type=float, default=10,
                    help="stop generating when the cache's disk has less free (default %(default)s GB)")
    ap.add_argument("--max-rss-gb", type=float, default=round(min(16.0, 0.8 * avail / 2**30), 1),
                    help="kill a run whose tree RSS passes this many GiB (default min(16, 80%% of available))")
    ap.add_argument("--no-browser", action="store_true", help="skip the headless Chromium measurement")
    ap.add_argument("--browser-timeout", type=float, default=120, help="s until charts must be ready (default 120)")
    ap.add_argument("--quick", action="store_true", help="8 and 64 ranks only, no steps row")
    ap.add_argument("--startup-only", action="store_true", help="only the start-up table (and peers)")
    ap.add_argument("--scale-only", action="store_true", help="only the scale table (and steps row)")
    ap.add_argument("--no-peers", action="store_true", help="no msprof-analyze / HTA rows")
    ap.add_argument("--no-steps-row", action="store_true", help="skip the Kineto steps row")
    ap.add_argument("--steps-row", default=None, metavar="RANKS:S1,S2",
                    help="Kineto steps row (default 64:10,100; skipped by --quick unless given)")
    ap.add_argument("--no-install", action="store_true", help="do not create the peers' venvs")
    ap.add_argument("--reportgen", type=Path, default=REPO, help="tree to run reportgen from (default this repo)")
    ap.add_argument("--baseline-tree", type=Path, default=None,
                    help="second tree measured interleaved, with new/base ratio columns (e.g. /work/main)")
    ap.add_argument("--gen-tree", type=Path, default=None, help="tree whose reportgen.synth generates the runs "
                                                                "(default: --reportgen)")
    ap.add_argument("--cache-dir", type=Path, default=cache_default,
                    help="venvs and generated runs (default %(default)s)")
    ap.add_argument("--json", type=Path, default=None, help="write the raw results here")
    args = ap.parse_args(argv)
    args.families = [f.strip() for f in args.families.split(",") if f.strip()]
    bad = set(args.families) - set(FAMILIES)
    if bad:
        ap.error(f"unknown families {sorted(bad)}; known: {', '.join(FAMILIES)}")
    args.ranks = sorted({int(x) for x in args.ranks.split(",") if x.strip()})
    if args.quick:
        args.ranks = [r for r in args.ranks if r <= 64] or [8, 64]
    args.steps = [int(x) for x in args.steps.split(",") if x.strip()]
    steps_row_given = args.steps_row is not None
    try:
        r, ss = (args.steps_row or "64:10,100").split(":")
        s1, s2 = (int(x) for x in ss.split(","))
        args.steps_row = (int(r), (s1, s2))
    except ValueError:
        ap.error("--steps-row wants RANKS:S1,S2, e.g. 64:10,100")
    args.reportgen = args.reportgen.resolve()
    args.gen_tree = (args.gen_tree or args.reportgen).resolve()
    if args.baseline_tree:
        args.baseline_tree = args.baseline_tree.resolve()
    for t in filter(None, (args.reportgen, args.baseline_tree, args.gen_tree)):
        if not (t / "reportgen" / "__init__.py").is_file():
            ap.error(f"not a reportgen tree: {t}")

    t_start = time.perf_counter()
    load0 = os.getloadavg()
    results: dict = {"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                     "load_before": load0}
    print(f"# reportgen scale and start-up — {datetime.now():%Y-%m-%d %H:%M}\n")
    print(f"machine: {os.cpu_count()} cores, {os.sysconf('SC_PHYS_PAGES') * PAGE / 2**30:.0f} GiB, "
          f"{platform.system()} {platform.release()} {platform.machine()}, python {platform.python_version()}; "
          f"load avg {load0[0]:.1f} / {load0[1]:.1f} / {load0[2]:.1f} before")
    print(f"reportgen: {tree_version(args.reportgen)}" + (f"; baseline {tree_version(args.baseline_tree)}"
                                                          if args.baseline_tree else ""))
    print(f"versions: {versions(tree_env(args.reportgen))}")
    print("measure: whole processes `python -m reportgen RUN -o r.html --json m.json --quiet`, PYTHONPATH = the tree; "
          "wall = median; peak PSS = max over runs of the process tree's summed PSS (/proc/PID/smaps_rollup "
          "sampled); MB = 10^6 B")
    print(f"limits: --timeout {args.timeout:.0f} s per run, --max-rss-gb {args.max_rss_gb:g} (tree), "
          f"--gen-timeout {args.gen_timeout:.0f} s\n", flush=True)
    browser = Browser(not args.no_browser and not args.startup_only, args.browser_timeout)
    tmp = Path(tempfile.mkdtemp(prefix="reportgen-bench-scale-"))
    try:
        runner = Runner(args, tmp, browser)
        if not args.scale_only:
            startup(args, runner, results, shared)
            if not args.no_peers:
                peers(args, runner, results, shared)
            sys.stdout.flush()
        if not args.startup_only:
            print(f"generator: {tree_version(args.gen_tree)}; cache {args.cache_dir / 'scale'}\n")
            scale(args, runner, results)
            if not args.no_steps_row and "kineto" in args.families and (steps_row_given or not args.quick):
                steps_row(args, runner, results)
            print(f"browser: {browser.info}; browser s = goto(file://) until dataset.chartsReady === '1' "
                  "(the first screen drawn), "
                  "all drawn s = until dataset.allDone === '1' (every chart and table), "
                  f"DOM nodes = elements; timeout {args.browser_timeout:.0f} s\n")
        load1 = os.getloadavg()
        total = time.perf_counter() - t_start
        print(f"load avg {load1[0]:.1f} / {load1[1]:.1f} / {load1[2]:.1f} after; "
              f"bench total {total:.0f} s (incl. generation and installs)")
        if args.json:
            results.update(load_after=load1, total_s=total, browser=browser.info)
            args.json.write_text(json.dumps(results, indent=1, default=str))
            print(f"raw results: {args.json}")
        return 0
    finally:
        browser.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
