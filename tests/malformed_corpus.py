"""Malformed and hostile input, and hostile arguments: the corpus of issue 14, built at test time.

Each case is a function ``build(tmp_dir, fixture) -> Case`` registered in :data:`CASES`. It writes an input under
``tmp_dir`` - a valid run made by the generators of :mod:`reportgen.synth` (or copied from a fixture) and then
broken in ONE way - and returns the command line to run and what must happen:

* ``exit``: 0 (a report), 2 (refused with one line naming the file and the problem), 3 (``--fail-on``), or for
  the signal cases the code of an interrupted run; a tuple when the issue accepts either of two outcomes;
* ``named``: a regex that one line must match - a line of stderr for a refusal, one ``path: problem`` line of the
  metrics' ``data_problems`` for a report - "the problem named". Regexes are loose on purpose: the file name and
  a key word (:data:`NEG`, :data:`NAN` ...), not the exact phrase;
* ``check``: optional extra conditions on the metrics / HTML (a world size clamped, a script-safe page ...).

The corpus is run by ``tests/test_corpus.py`` (with ``tests/harness.py``), which also checks for every case: no
traceback, the input directory unchanged, peak RSS and wall time bounded, no temp file left, and no output
written on a refusal. Nothing here is committed as data: every input is generated (small specs: one host, two
devices, one stage, three steps) or copied from ``shared/fixtures`` when the case is built.

Owners (who fixes a failing case): ``cli`` (arguments, outputs, signals), ``mindinsight`` (readers/mindinsight*,
mindspore_cpu), ``ascend`` (readers/ascend*), ``kineto`` (readers/kineto*), ``detection`` (family and run
detection, limits of names on the page, charts).
"""

from __future__ import annotations

import csv
import gzip
import io
import itertools
import json
import os
import re
import shutil
import signal
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from reportgen.synth.ascend import AscendSpec, write_ascend_run
from reportgen.synth.kineto import KinetoSpec, write_kineto_run
from reportgen.synth.mindinsight import MindInsightSpec, write_mindinsight_run

OWNERS = ("cli", "mindinsight", "ascend", "kineto", "detection")
#: the issue's "What was seen" classes
CLASSES = {1: "one integer makes memory and time unbounded", 2: "outputs that destroy", 3: "silent garbage",
           4: "duplicate or impossible ranks", 5: "mixed input chosen silently", 6: "internal errors",
           7: "interrupts", 8: "charts broken by names", 9: "misleading messages"}

# --------------------------------------------------------------------------- key words (case-insensitive)

NOT_NUM = r"not a number|non-?numeric|not numeric|invalid|unreadable|cannot parse|could not parse|not understood"
NAN = r"not a number|\bnan\b|non-?finite|not finite|non-?numeric"
INF = r"infinit|\binf\b|non-?finite|not finite|not a number"
NEG = r"negative|below zero|less than zero"
HUGE = (r"over one day|too (large|long|big)|absurd|magnitude|overflow|out of range|exceeds|implausible|"
        r"not finite|1e\+?308|beyond|larger than")
TRUNC = r"truncat|\bcut\b|incomplete|short|unexpected end|ended|fields|partial"
DUP = r"duplicate|also in|twice|more than one|same rank|conflict|both"
WORLD = r"world.?size|rank.?size|rank count|ranks? claimed"
EMPTY = r"empty|0 bytes|no data|no content"
SHAPE = r"expected|not an? |shape|skipped|ignored|invalid|unexpected|unusable|wrong|malformed"
UNREAD = r"cannot read|can't read|permission|unreadable|i/o error|input/output|not readable|empty|cannot open"
ENCODING = r"utf-?16|utf-?8|encoding|decode|binary|not text|not a (json|trace|csv)|could not|not valid"
JUNK = (r"not a |could not|cannot|invalid|unrecogni[sz]ed|junk|corrupt|decode|skipped|ignored|not valid|"
        r"not json|binary")
DIRECTORY = r"directory|not a (regular )?file|is a folder"
LONG = r"too long|longer|large|limit|field|cell|\bcut\b|chars|bytes|kib|capped"
STEPW = r"step"
PICK = r"pick one"


def named(file: str | None, *keywords: str) -> str:
    """A regex for one line naming ``file`` (its base name, as it appears in the line) and matching each keyword
    alternative, in any order."""
    parts = ([re.escape(file)] if file else []) + [k for k in keywords if k]
    return "(?i)" + "".join(f"(?=.*(?:{p}))" for p in parts)


# --------------------------------------------------------------------------- the case record


@dataclass
class Case:
    """What one corpus case runs and what must happen (module doc)."""

    run: str | Path                              # the RUN_DIR argument
    exit: int | tuple[int, ...] = 0
    named: str | None | dict = None              # regex, or {exit code: regex or None}
    not_named: str | None = None                 # regex no line of stderr / data problems may match
    args: list[str] = field(default_factory=list)
    output: Path | str | None = None             # -o; default <tmp>/out/report.html
    json: Path | str | None | bool = True        # --json; True: <tmp>/out/report.json; None/False: no --json
    argv: list[str] | None = None                # the whole command line instead of run/-o/--json/args
    check: Callable[[dict | None, str | None], str | None] | None = None  # (metrics, html) -> failure or None
    protect: list[Path] | None = None            # trees that must not change; default [run] if it is a directory
    previous: str | None = None                  # written to the output before the run (the "old report")
    refuse_early: bool = False                   # an exit 2 must come before the run directory is read
    mode: str = "fork"                           # harness mode: "fork" | "subprocess"
    cwd: Path | None = None
    hooks: list[tuple[str, object]] = field(default_factory=list)
    signal: tuple[int, str, float] | None = None  # harness signal plan (signum, "group" | "leader", delay_s)
    skip: str | None = None                      # reason this case cannot run here (e.g. needs a non-root user)
    # filled by build_case
    name: str = ""
    owner: str = ""
    klass: int = 0
    family: str = ""
    note: str = ""
    tmp: Path | None = None
    out_dir: Path | None = None

    def expected_exits(self) -> tuple[int, ...]:
        return self.exit if isinstance(self.exit, tuple) else (self.exit,)

    def regex_for(self, code: int) -> str | None:
        return self.named.get(code) if isinstance(self.named, dict) else self.named

    def command(self) -> list[str]:
        if self.argv is not None:
            return [str(a) for a in self.argv]
        argv = [str(self.run), "-o", str(self.output)]
        if self.json:
            argv += ["--json", str(self.json)]
        return argv + [str(a) for a in self.args]

    def outputs(self) -> list[Path]:
        """The output files of the command line (-o and --json; relative ones against ``cwd``), empty ones left out."""
        argv, found = self.command(), []
        for i, a in enumerate(argv[:-1]):
            if a in ("-o", "--output", "--json") and argv[i + 1]:
                p = Path(argv[i + 1])
                found.append(p if p.is_absolute() or self.cwd is None else Path(self.cwd) / p)
        return found


@dataclass(frozen=True)
class CaseDef:
    name: str
    owner: str
    klass: int
    family: str
    note: str
    build: Callable


#: every case, by name
CASES: dict[str, CaseDef] = {}


def register(name: str, owner: str, klass: int, family: str, note: str, build: Callable) -> None:
    if name in CASES:
        raise ValueError(f"corpus case {name!r} registered twice")
    if owner not in OWNERS or klass not in CLASSES:
        raise ValueError(f"corpus case {name!r}: bad owner {owner!r} or class {klass!r}")
    CASES[name] = CaseDef(name, owner, klass, family, note, build)


def case(name: str, owner: str, klass: int, family: str, note: str):
    def deco(fn):
        register(name, owner, klass, family, note, fn)
        return fn
    return deco


def default_fixture_root() -> Path:
    env = os.environ.get("REPORTGEN_SHARED")
    return (Path(env) if env else Path(__file__).resolve().parents[2] / "shared") / "fixtures"


def _default_fixture(*parts: str) -> Path:
    p = default_fixture_root().joinpath(*parts)
    if not p.exists():
        raise FileNotFoundError(f"fixture {p} is missing")
    return p


def build_case(name: str, tmp: str | Path, fixture: Callable[..., Path] | None = None) -> Case:
    """Write case ``name``'s input below ``tmp`` (an empty directory) and return its :class:`Case`.
    ``fixture(*parts)`` locates a shared fixture (tests pass conftest's ``fixture_dir``, which skips or fails)."""
    d = CASES[name]
    tmp = Path(tmp)
    out_dir = tmp / "out"
    out_dir.mkdir(parents=True, exist_ok=True)
    c = d.build(tmp, fixture or _default_fixture)
    c.name, c.owner, c.klass, c.family, c.note, c.tmp, c.out_dir = d.name, d.owner, d.klass, d.family, d.note, tmp, out_dir
    if c.argv is not None:  # the outputs are those of the command line
        argv = [str(a) for a in c.argv]
        given = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-o", "--output", "--json")}
        out, js = given.get("-o", given.get("--output")), given.get("--json")
        base = Path(c.cwd) if c.cwd is not None else Path.cwd()
        c.output = (base / out) if out else None
        c.json = (base / js) if js else None
    else:
        if c.output is None:
            c.output = out_dir / "report.html"
        if c.json is True:
            c.json = out_dir / "report.json"
    if c.protect is None:
        c.protect = [Path(c.run)] if isinstance(c.run, Path) and c.run.is_dir() and not c.run.is_symlink() else []
    if c.previous is not None:
        Path(c.output).write_text(c.previous, encoding="utf-8")
    return c


# --------------------------------------------------------------------------- valid runs to break

SMALL = dict(hosts=1, devices_per_host=2, stages=1, steps=3)


def mi_run(tmp: Path, name: str = "mi_run", **spec) -> Path:
    """A flat MindInsight run (files in ``<run>/profiler/``, ranks 0 and 1); legacy layout with layout="legacy"."""
    root = tmp / name
    write_mindinsight_run(root, MindInsightSpec(**{**SMALL, **spec}))
    return root


def mi_file(run: Path, name: str) -> Path:
    return run / "profiler" / name


def asc_run(tmp: Path, name: str = "asc_run", **spec) -> tuple[Path, list[Path]]:
    """An Ascend text export: the run root and the rank directories by rank (ranks 0 and 1)."""
    root = tmp / name
    write_ascend_run(root, AscendSpec(**{**SMALL, **spec}))
    dirs = {}
    for d in root.iterdir():
        info = next(d.glob("profiler_info_*.json"))
        dirs[int(re.search(r"(\d+)\.json$", info.name).group(1))] = d
    return root, [dirs[r] for r in sorted(dirs)]


def asc_out(rank_dir: Path, name: str) -> Path:
    return rank_dir / "ASCEND_PROFILER_OUTPUT" / name


def kin_run(tmp: Path, name: str = "kin_run", **spec) -> tuple[Path, list[Path]]:
    """A Kineto run of uncompressed traces: the run root and the trace files by rank (ranks 0 and 1)."""
    root = tmp / name
    write_kineto_run(root, KinetoSpec(**{**SMALL, "gzip": False, **spec}))
    traces = {}
    for p in root.glob("*.pt.trace.json"):
        traces[json.loads(p.read_text())["distributedInfo"]["rank"]] = p
    return root, [traces[r] for r in sorted(traces)]


def copy_fixture(fixture: Callable[..., Path], tmp: Path, name: str, *parts: str, ignore=None) -> Path:
    """A writable copy of a fixture directory (fixtures are read-only and never written)."""
    dst = tmp / name
    shutil.copytree(fixture(*parts), dst, copy_function=shutil.copyfile, symlinks=True,
                    ignore=shutil.ignore_patterns(*ignore) if ignore else None)
    for dirpath, dirnames, filenames in os.walk(dst):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = os.path.join(dirpath, f)
            if not os.path.islink(p):
                os.chmod(p, 0o644)
    return dst


# --------------------------------------------------------------------------- editing helpers


def read_csv(path: Path) -> tuple[list[list[str]], str]:
    raw = path.read_bytes().decode("utf-8")
    nl = "\r\n" if "\r\n" in raw else "\n"
    return list(csv.reader(io.StringIO(raw, newline=""))), nl


def write_csv(path: Path, rows: list[list[str]], nl: str = "\n") -> None:
    buf = io.StringIO()
    csv.writer(buf, lineterminator=nl).writerows(rows)
    path.write_bytes(buf.getvalue().encode("utf-8"))


def set_cell(path: Path, column: str, value: str, line: int = 3) -> None:
    """Set ``column`` of file line ``line`` (1-based; line 1 is the header) to ``value``."""
    rows, nl = read_csv(path)
    rows[line - 1][rows[0].index(column)] = value
    write_csv(path, rows, nl)


def cut_row(path: Path, line: int, keep: int) -> None:
    """Keep only the first ``keep`` fields of file line ``line`` (a row cut mid-way, as a crash leaves it)."""
    rows, nl = read_csv(path)
    rows[line - 1] = rows[line - 1][:keep]
    write_csv(path, rows, nl)


def cut_tail(path: Path, chars: int) -> None:
    """Cut the file ``chars`` characters before its end and drop the final newline: the last cell is a prefix."""
    text = path.read_bytes().rstrip(b"\r\n")
    path.write_bytes(text[:-chars])


def op_given_twice(path: Path) -> str:
    """Write the first op of an Ascend communication(_matrix).json twice in its step (the same key twice in one
    object, as a merged export would); returns the op's key."""
    doc = json.loads(path.read_text())
    step = next(iter(doc))
    kind = next(k for k, v in doc[step].items() if v)
    op = next(iter(doc[step][kind]))
    text = json.dumps(doc)
    entry = json.dumps({op: doc[step][kind][op]})[1:-1]
    at = text.index(entry)
    path.write_text(text[:at] + entry + ", " + text[at:])
    return op


def edit_json(path: Path, fn: Callable[[object], object | None]) -> None:
    doc = json.loads(path.read_text(encoding="utf-8"))
    new = fn(doc)
    path.write_text(json.dumps(doc if new is None else new), encoding="utf-8")


def events(doc: dict, *, cat: str | None = None, step: bool = False) -> list[dict]:
    out = []
    for e in doc["traceEvents"]:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        if step and not str(e.get("name", "")).startswith("ProfilerStep#"):
            continue
        if cat and e.get("cat") != cat:
            continue
        out.append(e)
    return out


def junk_bytes(n: int = 4096, seed: int = 14) -> bytes:
    import random

    rnd = random.Random(seed)
    return bytes(rnd.getrandbits(8) for _ in range(n))


def make_unreadable(path: Path) -> None:
    """A file that cannot be read: mode 000 for a normal user; as root (who reads anything) a symlink to
    /proc/self/mem, which fails with an I/O error at offset 0."""
    if os.geteuid() != 0:
        os.chmod(path, 0)
    else:
        path.unlink()
        os.symlink("/proc/self/mem", path)


def db_exec(path: Path, *sql: tuple) -> None:
    """Run statements on a copied SQLite file, leaving a single-file (rollback journal) database."""
    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA journal_mode=DELETE")
        for stmt in sql:
            conn.execute(*stmt) if isinstance(stmt, tuple) else conn.execute(stmt)
        conn.commit()
    finally:
        conn.close()


# --------------------------------------------------------------------------- checks of a report (metrics, html)

DAY_MS = 86_400_000.0


def world_at_most(n: int):
    def check(doc, html):
        w = (doc or {}).get("run", {}).get("world_size")
        return None if w is None or w <= n else f"world_size {w} is used (at most {n} expected)"
    return check


def format_is(fmt: str):
    def check(doc, html):
        got = (doc or {}).get("run", {}).get("source_format")
        return None if got == fmt else f"source_format is {got!r}, expected {fmt!r}"
    return check


def ranks_are(ranks: list[int]):
    def check(doc, html):
        got = (doc or {}).get("run", {}).get("ranks")
        return None if got == ranks else f"ranks {got!r}, expected {ranks!r}"
    return check


def unique_rank_steps(doc, html):
    rows = (doc or {}).get("sections", {}).get("trajectory", {}).get("tables", {}).get("per_rank_step") or []
    keys = [(r.get("rank"), r.get("step")) for r in rows]
    dup = len(keys) - len(set(keys))
    return f"{dup} repeated (rank, step) rows in trajectory.per_rank_step" if dup else None


_SCRIPT = re.compile(r"<script\b[^>]*>(.*?)</script\s*>", re.S | re.I)


def script_safe(doc, html):
    """No injected markup reached the page as markup (the payloads of these cases: ``<script>alert(``, ``<img src=x
    onerror``), and no JS-hostile line separator is raw inside a ``<script>`` (split as an HTML parser does: at the
    first ``</script``)."""
    if html is None:
        return "no HTML written"
    for body in _SCRIPT.findall(html):
        if "\u2028" in body or "\u2029" in body:
            return "raw U+2028/U+2029 inside a <script> (breaks JSON-in-JS: 'Unexpected token ILLEGAL')"
    if "<script>alert(" in html or "<img src=x onerror" in html:
        return "a hostile name reached the page as markup"
    return None


def static_complete(doc, html):
    if html is None:
        return "no HTML written"
    for bad in ("left out of the static report", "could not be drawn statically"):
        if bad in html:
            return f"--static dropped a chart ({bad!r})"
    if "<script" in html.lower():
        return "--static page has a <script>"
    return None


def name_capped(doc, html):
    """A long name reached the page cut, with the cut stated (limits.cap_text: "…[+N chars]")."""
    if html is None:
        return "no HTML written"
    probs = " ".join(p.get("problem", "") for p in (doc or {}).get("data_problems", []))
    if "chars]" in html or re.search(LONG, probs, re.I):
        return None
    return "a long name was not cut visibly (no '…[+N chars]' on the page, no data problem)"


#: the clean run of each family (the generators are deterministic), built once per process: (summary, ranks)
_CLEAN: dict = {}
#: headline numbers a valid case must share with its clean base run (issue 29: "the numbers of every case that is in
#: fact valid equal to its clean base run")
CLEAN_KEYS = ("step_ms_median", "computing_share_ratio", "comm_share_ratio", "free_share_ratio")


def _clean(family: str) -> dict:
    if family not in _CLEAN:
        import tempfile

        from reportgen import cli
        with tempfile.TemporaryDirectory(prefix="rg-clean-") as t:
            tmp = Path(t)
            root = {"kineto": lambda: kin_run(tmp)[0], "mindinsight": lambda: mi_run(tmp),
                    "ascend": lambda: asc_run(tmp)[0]}[family]()
            js = tmp / "clean.json"
            if cli.main([str(root), "-o", str(tmp / "clean.html"), "--json", str(js), "--quiet"]) != 0:
                raise RuntimeError(f"the clean {family} run did not report")
            _CLEAN[family] = json.loads(js.read_text())["summary"]
    return _CLEAN[family]


def same_as_clean(family: str):
    """A valid case (a broken detail that is resolved or ignored) reports the clean run's headline numbers."""
    def check(doc, html):
        base, got = _clean(family), (doc or {}).get("summary") or {}
        diff = {k: (got.get(k), base.get(k)) for k in CLEAN_KEYS if got.get(k) != base.get(k)}
        return None if not diff else f"differs from the clean {family} run: {diff}"
    return check


def all_of(*checks):
    def check(doc, html):
        for c in checks:
            r = c(doc, html)
            if r:
                return r
        return None
    return check


# =========================================================================== class 1: one integer, unbounded


@case("mi_world_size_1e9_filename", "mindinsight", 1, "mindinsight",
      "ascend_cluster_analyse_* file names claim world size 10^9")
def _(tmp, fx):
    run = mi_run(tmp)
    for r in (0, 1):
        f = mi_file(run, f"ascend_cluster_analyse_data-parallel_1_2_{r}.csv")
        f.rename(f.with_name(f"ascend_cluster_analyse_data-parallel_1_1000000000_{r}.csv"))
    return Case(run, named=named("1000000000", WORLD), check=world_at_most(2))


@case("mi_world_size_1e7_pipeline_filename", "mindinsight", 1, "mindinsight",
      "pipeline-parallel_2_10000000_N.csv: world size 10^7 (over the 2^20 ceiling)")
def _(tmp, fx):
    run = mi_run(tmp, stages=2)
    for f in run.glob("profiler/ascend_cluster_analyse_pipeline-parallel_2_2_*.csv"):
        f.rename(f.with_name(f.name.replace("_2_2_", "_2_10000000_")))
    return Case(run, named=named("10000000", WORLD), check=world_at_most(2))


@case("mi_world_size_1e6_claim", "mindinsight", 1, "mindinsight",
      "profiler_info rank_size 10^6 (under the ceiling) with 2 ranks found: missing ranks a count, not a list")
def _(tmp, fx):
    run = mi_run(tmp)
    for r in (0, 1):
        edit_json(mi_file(run, f"profiler_info_{r}.json"), lambda d: d.update(rank_size=1_000_000))
    return Case(run, named=named("profiler_info_", r"1\D?000\D?000|" + WORLD), check=None)


@case("mi_rank_size_1e9_profiler_info", "mindinsight", 1, "mindinsight", "profiler_info rank_size 10^9")
def _(tmp, fx):
    run = mi_run(tmp)
    for r in (0, 1):
        edit_json(mi_file(run, f"profiler_info_{r}.json"), lambda d: d.update(rank_size=10 ** 9))
    return Case(run, named=named("profiler_info_", WORLD + "|1000000000"), check=world_at_most(2))


@case("mi_stages_1e9_filename", "mindinsight", 1, "mindinsight",
      "ascend_cluster_analyse_pipeline-parallel_1000000000_2_N.csv: 10^9 pipeline stages")
def _(tmp, fx):
    run = mi_run(tmp)
    for r in (0, 1):
        f = mi_file(run, f"ascend_cluster_analyse_data-parallel_1_2_{r}.csv")
        f.rename(f.with_name(f"ascend_cluster_analyse_pipeline-parallel_1000000000_2_{r}.csv"))
    return Case(run, named=named("1000000000", r"stage"))


@case("asc_world_size_1e9", "ascend", 1, "ascend", "profiler_metadata.json distributed_args.world_size 10^9")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    for d in dirs:
        edit_json(d / "profiler_metadata.json", lambda m: m["distributed_args"].update(world_size=10 ** 9))
    return Case(root, named=named("profiler_metadata.json", WORLD), check=world_at_most(2))


@case("asc_world_size_1e7", "ascend", 1, "ascend", "distributed_args.world_size 10^7 and data_parallel_size 10^7")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    for d in dirs:
        edit_json(d / "profiler_metadata.json",
                  lambda m: m["distributed_args"].update(world_size=10 ** 7, data_parallel_size=10 ** 7))
    return Case(root, named=named("profiler_metadata.json", WORLD + "|size"), check=world_at_most(2))


@case("asc_group_1e6_ranks", "ascend", 1, "ascend",
      "parallel_group_info with a group of 10^6 global_ranks (a 7 MB metadata file)")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    edit_json(dirs[0] / "profiler_metadata.json", lambda m: m["parallel_group_info"].update(
        group_name_9={"group_name": "dp_huge", "group_rank": 0, "global_ranks": list(range(1_000_000))}))
    return Case(root, named=named("profiler_metadata.json", r"group|global_ranks|rank"), check=world_at_most(2))


@case("kin_world_size_1e9", "kineto", 1, "kineto", "distributedInfo.world_size 10^9")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    for t in traces:
        edit_json(t, lambda d: d["distributedInfo"].update(world_size=10 ** 9))
    return Case(root, named=named(".pt.trace.json", WORLD), check=world_at_most(2))


@case("kin_world_size_1e7", "kineto", 1, "kineto", "distributedInfo.world_size 10^7 in one trace only")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    edit_json(traces[1], lambda d: d["distributedInfo"].update(world_size=10 ** 7))
    return Case(root, named=named(traces[1].name, WORLD), check=world_at_most(2))


@case("kin_pg_config_1e6_ranks", "kineto", 1, "kineto", "a pg_config group listing 10^6 ranks (an ~8 MB trace)")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    edit_json(traces[0], lambda d: d["distributedInfo"]["pg_config"].append(
        {"pg_name": "9", "pg_desc": "huge", "backend_config": "cuda:nccl", "pg_size": 1_000_000,
         "ranks": list(range(1_000_000))}))
    return Case(root, named=named(traces[0].name, r"pg_config|group|ranks"), check=world_at_most(2))


def splice(path: Path, after: bytes, pieces) -> None:
    """Write ``pieces`` (an iterable of bytes, streamed: never held whole) into ``path`` right after the first
    ``after``."""
    data = path.read_bytes()
    at = data.index(after) + len(after)
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as fh:
        fh.write(data[:at])
        for piece in pieces:
            fh.write(piece)
        fh.write(data[at:])
    os.replace(tmp, path)


def _many(template: str, n: int, per: int = 10_000):
    """``template.format(i)`` for i < n, comma-terminated, in chunks of ``per``."""
    for lo in range(0, n, per):
        yield "".join(template.format(i) + "," for i in range(lo, min(n, lo + per))).encode()


@case("kin_pg_config_1e6_groups", "kineto", 1, "kineto",
      "one trace's pg_config lists 10^6 groups (a 40 MB distributedInfo; issue 29 #5: 1.1 GB, 57 MB of JSON)")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    splice(traces[0], b'"pg_config": [', _many('{{"pg_name": "x{}", "ranks": [0, 1]}}', 1_000_000))
    return Case(root, named=named(traces[0].name, r"pg_config", r"MB", r"ignored"),
                check=all_of(world_at_most(2), same_as_clean("kineto")))


@case("kin_pg_config_2e5_groups", "kineto", 1, "kineto",
      "one trace's pg_config lists 2*10^5 groups in 8 MB (under the metadata limit: the group cap holds)")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    splice(traces[0], b'"pg_config": [', _many('{{"pg_name": "{}", "ranks": [0, 1]}}', 200_000))
    return Case(root, named=named(traces[0].name, r"more process groups were not kept"),
                check=all_of(world_at_most(2), same_as_clean("kineto")))


@case("kin_unknown_key_64mb", "kineto", 1, "kineto",
      "a top-level key no reader uses holds 64 MB of empty objects (decoded whole, ~1.4 GB, before issue 29)")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    splice(traces[0], b'"schemaVersion": 1,',
           itertools.chain([b' "noise": ['], _many("{{}}", 21_000_000, 1_000_000), [b'{}],']))
    return Case(root, check=all_of(ranks_are([0, 1]), same_as_clean("kineto")))


@case("kin_pg_size_1e9", "kineto", 1, "kineto", "pg_config pg_size 10^9 with ranks [0, 1]")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    for t in traces:
        edit_json(t, lambda d: d["distributedInfo"]["pg_config"][0].update(pg_size=10 ** 9))
    return Case(root, named=named(".pt.trace.json", r"pg_size|group|size"), check=world_at_most(2))


@case("fx_kin_gloo_world_size_1e9", "kineto", 1, "kineto",
      "fixture generated_cpu_gloo_4rank_mesh2x2 with world_size 10^9 in every trace")
def _(tmp, fx):
    root = copy_fixture(fx, tmp, "gloo", "kineto", "generated_cpu_gloo_4rank_mesh2x2")
    for t in sorted(root.glob("rank*.pt.trace.json")):
        edit_json(t, lambda d: d["distributedInfo"].update(world_size=10 ** 9))
    return Case(root, named=named(".pt.trace.json", WORLD), check=world_at_most(4))


@case("kin_kernel_name_1mb_x20", "detection", 1, "kineto",
      "20 GPU kernels named by the same 1 MB string in one trace: names capped, page bounded")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    big = "void at::native::elementwise_kernel<" + "A" * (1 << 20) + ">"

    def edit(d):
        for e in events(d, cat="kernel")[:20]:
            e["name"] = big
    edit_json(traces[1], edit)
    return Case(root, check=all_of(name_capped, same_as_clean("kineto")))


@case("asc_kernel_name_100k_x40", "detection", 1, "ascend",
      "40 kernel_details rows whose Name and Type are the same 100 KB string: names capped, page bounded")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    path = asc_out(dirs[0], "kernel_details.csv")
    rows, nl = read_csv(path)
    big = "MatMulV3_" + "B" * 100_000
    for row in rows[1:41]:
        row[rows[0].index("Name")] = big
        row[rows[0].index("Type")] = big
    write_csv(path, rows, nl)
    return Case(root, check=all_of(name_capped, same_as_clean("ascend")))


@case("mi_op_name_100k", "detection", 1, "mindinsight", "MindInsight op names of 100 KB in every step trace header")
def _(tmp, fx):
    return Case(mi_run(tmp, hostile_name="Op" + "C" * 100_000), check=all_of(name_capped, same_as_clean("mindinsight")))


@case("title_1mb", "cli", 1, "args", "--title of 1 MB: capped, page bounded")
def _(tmp, fx):
    return Case(mi_run(tmp), args=["--title", "T" * (1 << 20)], check=all_of(name_capped, same_as_clean("mindinsight")))


# =========================================================================== class 2: outputs that destroy


@case("out_is_input_file_mi", "cli", 2, "mindinsight", "-o RUN/profiler/step_trace_raw_0_detail_time.csv")
def _(tmp, fx):
    run = mi_run(tmp)
    return Case(run, exit=2, output=mi_file(run, "step_trace_raw_0_detail_time.csv"), json=None,
                named=named("step_trace_raw_0_detail_time.csv", r"input|inside|run director"), refuse_early=True)


@case("json_is_input_file_mi", "cli", 2, "mindinsight", "--json RUN/profiler/profiler_info_0.json")
def _(tmp, fx):
    run = mi_run(tmp)
    return Case(run, exit=2, json=mi_file(run, "profiler_info_0.json"),
                named=named("profiler_info_0.json", r"input|inside|run director"), refuse_early=True)


@case("out_is_input_trace_kin", "cli", 2, "kineto", "-o an existing trace of the run")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    return Case(root, exit=2, output=traces[0], json=None,
                named=named(traces[0].name, r"input|inside|run director"), refuse_early=True)


@case("json_is_input_file_asc", "cli", 2, "ascend", "--json RUN/<rank dir>/profiler_metadata.json")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    return Case(root, exit=2, json=dirs[0] / "profiler_metadata.json",
                named=named("profiler_metadata.json", r"input|inside|run director"), refuse_early=True)


@case("out_new_file_inside_input_asc", "cli", 2, "ascend", "-o a new file inside the run directory")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    return Case(root, exit=2, output=root / "report.html", json=None,
                named=named("report.html", r"input|inside|run director"), refuse_early=True)


@case("out_inside_input_via_symlink", "cli", 2, "mindinsight",
      "-o through a symlinked directory that points into the run directory")
def _(tmp, fx):
    run = mi_run(tmp)
    link = tmp / "outlink"
    os.symlink(run / "profiler", link)
    return Case(run, exit=2, output=link / "report.html", json=None,
                named=named("report.html", r"input|inside|run director"), refuse_early=True)


@case("out_relative_cwd_is_input", "cli", 2, "kineto",
      "'reportgen . -o report.html' run from inside the run directory (a real process, cwd = run)")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    return Case(root, exit=2, argv=[".", "-o", "report.html"], cwd=root, mode="subprocess",
                named=named("report.html", r"input|inside|run director"))


@case("out_equals_json", "cli", 2, "mindinsight", "-o X.html --json X.html")
def _(tmp, fx):
    run = mi_run(tmp)
    x = tmp / "out" / "X.html"
    return Case(run, exit=2, output=x, json=x, named=named("X.html", r"same|both|equal|twice|differ"),
                refuse_early=True)


@case("out_equals_json_other_spelling", "cli", 2, "mindinsight", "-o out/r.html --json out/./sub/../r.html")
def _(tmp, fx):
    run = mi_run(tmp)
    (tmp / "out" / "sub").mkdir()
    return Case(run, exit=2, output=tmp / "out" / "r.html", json=f"{tmp}/out/./sub/../r.html",
                named=named("r.html", r"same|both|equal|twice|differ"), refuse_early=True)


@case("out_equals_baseline", "cli", 2, "mindinsight", "-o m.json --baseline m.json (the report would replace it)")
def _(tmp, fx):
    run = mi_run(tmp)
    base = tmp / "out" / "m.json"
    base.write_text('{"schema": "reportgen.metrics/1"}', encoding="utf-8")
    return Case(run, exit=2, output=base, args=["--baseline", str(base)], protect=[run],
                named=named("m.json", r"baseline"), refuse_early=True)


@case("json_proc", "cli", 2, "mindinsight", "--json /proc/x.json (cannot be created)")
def _(tmp, fx):
    return Case(mi_run(tmp), exit=2, json="/proc/reportgen-corpus-x.json",
                named=named("/proc/reportgen-corpus-x.json", r"writ|create|permission|no such|cannot"),
                refuse_early=True)


@case("out_unwritable_dir", "cli", 2, "mindinsight",
      "-o in a directory that cannot be written (mode 555; as root, where modes do not stop writes: /proc)")
def _(tmp, fx):
    run = mi_run(tmp)
    if os.geteuid() == 0:
        out = Path("/proc/reportgen-corpus-report.html")
    else:
        ro = tmp / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        out = ro / "report.html"
    return Case(run, exit=2, output=out, json=None, named=named(out.name, r"writ|create|permission|cannot"),
                refuse_early=True)


@case("out_parent_is_file", "cli", 2, "mindinsight", "-o FILE/report.html where FILE is a regular file")
def _(tmp, fx):
    run = mi_run(tmp)
    (tmp / "afile").write_text("x")
    return Case(run, exit=2, output=tmp / "afile" / "report.html", json=None,
                named=named("report.html", r"director|not a|exist|cannot"), refuse_early=True)


@case("out_name_249_chars", "cli", 2, "mindinsight",
      "-o with a 249-character file name (legal; its temp file name is not): written, or refused before analysis")
def _(tmp, fx):
    run = mi_run(tmp)
    return Case(run, exit=(0, 2), output=tmp / "out" / ("r" * 244 + ".html"), json=None,
                named={0: None, 2: named("rrrr", r"too long|name")}, refuse_early=True)


@case("out_name_300_chars", "cli", 2, "mindinsight", "-o with a 300-character file name (longer than NAME_MAX)")
def _(tmp, fx):
    run = mi_run(tmp)
    return Case(run, exit=2, output=tmp / "out" / ("r" * 295 + ".html"), json=None,
                named=named("rrrr", r"too long|name"), refuse_early=True)


@case("out_empty_string", "cli", 9, "mindinsight", "-o '' (says what is wrong, not 'is a directory')")
def _(tmp, fx):
    run = mi_run(tmp)
    return Case(run, exit=2, argv=[str(run), "-o", ""], cwd=tmp / "out", named=named(None, r"-o|output|empty|file name"),
                not_named=r"is a directory", refuse_early=True)


@case("out_is_run_dir", "cli", 2, "mindinsight", "-o RUN (the run directory itself)")
def _(tmp, fx):
    run = mi_run(tmp)
    return Case(run, exit=2, output=run, json=None, named=named(run.name, r"director|input"), refuse_early=True)


@case("json_is_fifo", "cli", 2, "mindinsight", "--json names a FIFO (not a regular file; must not be replaced)")
def _(tmp, fx):
    fifo = tmp / "out" / "metrics.json"
    os.mkfifo(fifo)
    return Case(mi_run(tmp), exit=2, json=fifo, named=named("metrics.json", r"regular|not a file|fifo|pipe|special"),
                refuse_early=True)


# =========================================================================== class 3: silent garbage
# one bad value in one numeric column, for each family's numeric files (the CLASS, not just the example)

_MI_STEP = "step_trace_raw_0_detail_time.csv"
_MI_CLUSTER = "ascend_cluster_analyse_data-parallel_1_2_0.csv"
#: (file, column, line, value, key word regex)
MI_CELLS = [
    (_MI_STEP, "total", 3, "abc", NOT_NUM),
    (_MI_STEP, "fp_and_bp", 3, "nan", NAN),
    (_MI_STEP, "iteration_interval", 3, "inf", INF),
    (_MI_STEP, "tail", 3, "-660202", NEG),
    (_MI_STEP, "total", 2, "1e308", HUGE),
    (_MI_STEP, "start_point", 3, "1e308", HUGE),
    (_MI_STEP, "stream_36_0_AllReduce-op4542", 3, "-14418", NEG),
    (_MI_STEP, "stream_36_0_AllReduce-op4542_start_point", 3, "abc", NOT_NUM),
    (_MI_CLUSTER, "computation_time", 3, "abc", NOT_NUM),
    (_MI_CLUSTER, "communication_alone_time", 3, "-6.9", NEG),
    (_MI_CLUSTER, "computation_time", 2, "nan", NAN),
    (_MI_CLUSTER, "communication_alone_time", 4, "1e308", HUGE),
    ("hccl_raw_0.csv", "communication_cost", 2, "nan", NAN),
    ("hccl_raw_0.csv", "wait_cost", 3, "-2.1", NEG),
    ("hccl_raw_0.csv", "communication_cost", 3, "1e308", HUGE),
]


def _short(col: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", col.lower()).strip("_")[:24]


def _value_word(v: str) -> str:
    return {"abc": "abc", "nan": "nan", "inf": "inf", "1e308": "1e308"}.get(v, "negative")


def _mi_cell_target(tmp, file):
    run = mi_run(tmp)
    return run, mi_file(run, file)


_STEMS = {"step_trace_raw_0_detail_time": "step", "ascend_cluster_analyse_data-parallel_1_2_0": "cluster",
          "hccl_raw_0": "hccl", "step_trace_time": "step", "kernel_details": "kernel", "op_statistic": "opstat",
          "memory_record": "memrec", "operator_memory": "opmem", "npu_module_mem": "npumem"}


def _register_cells(prefix, owner, family, target, cells):
    for file, column, line, value, kw in cells:
        def build(tmp, fx, file=file, column=column, line=line, value=value, kw=kw):
            run, path = target(tmp, file)
            set_cell(path, column, value, line)
            return Case(run, named=named(Path(file).name, re.escape(column), kw))
        stem = _STEMS.get(Path(file).stem, _short(Path(file).stem)[:14])
        register(f"{prefix}_{stem}_{_short(column)}_{_value_word(value)}", owner, 3, family,
                 f"{file}: column {column!r}, line {line} = {value}", build)


_register_cells("mi_cell", "mindinsight", "mindinsight", _mi_cell_target, MI_CELLS)


@case("mi_step_row_truncated", "mindinsight", 3, "mindinsight",
      "a step_trace row cut to its first 3 fields (the issue's '0,12,5910')")
def _(tmp, fx):
    run = mi_run(tmp)
    cut_row(mi_file(run, _MI_STEP), 3, 3)
    return Case(run, named=named(_MI_STEP, TRUNC))


@case("mi_step_last_line_cut", "mindinsight", 3, "mindinsight",
      "step_trace cut mid-cell at its end (no final newline; the last cell a prefix: '69' for '69xxx')")
def _(tmp, fx):
    run = mi_run(tmp)
    cut_tail(mi_file(run, _MI_STEP), 5)
    return Case(run, named=named(_MI_STEP, TRUNC))


@case("mi_step_last_row_cut_no_average", "mindinsight", 3, "mindinsight",
      "no average row, and the last step row cut mid-cell without a final newline")
def _(tmp, fx):
    run = mi_run(tmp)
    path = mi_file(run, _MI_STEP)
    rows, nl = read_csv(path)
    write_csv(path, [r for r in rows if r and r[0] != "-"], nl)
    cut_tail(path, 4)
    return Case(run, named=named(_MI_STEP, TRUNC))


@case("mi_cluster_last_line_cut", "mindinsight", 3, "mindinsight",
      "ascend_cluster_analyse cut to '17' of '178.5303' on its last line, no final newline")
def _(tmp, fx):
    run = mi_run(tmp)
    cut_tail(mi_file(run, "ascend_cluster_analyse_data-parallel_1_2_1.csv"), 5)
    return Case(run, named=named("ascend_cluster_analyse_data-parallel_1_2_1.csv", TRUNC))


@case("mi_flops_negative", "mindinsight", 3, "mindinsight", "flops_summary FLOPs negative")
def _(tmp, fx):
    run = mi_run(tmp)
    edit_json(mi_file(run, "flops_summary_0.json"), lambda d: d.update(FLOPs=-11998102.199))
    return Case(run, named=named("flops_summary_0.json", "FLOPs", NEG))


@case("mi_flops_nan", "mindinsight", 3, "mindinsight", "flops_summary FLOPS NaN (a JSON NaN literal)")
def _(tmp, fx):
    run = mi_run(tmp)
    edit_json(mi_file(run, "flops_summary_1.json"), lambda d: d.update(FLOPS=float("nan")))
    return Case(run, named=named("flops_summary_1.json", "FLOPS", NAN))


@case("mi_memory_peak_1e308", "mindinsight", 3, "mindinsight", "memory_usage_summary peak_mem 1e308")
def _(tmp, fx):
    run = mi_run(tmp)
    edit_json(mi_file(run, "memory_usage_summary_0.json"), lambda d: d.update(peak_mem=1e308))
    return Case(run, named=named("memory_usage_summary_0.json", "peak_mem", HUGE))


@case("mi_memory_capacity_text", "mindinsight", 3, "mindinsight", "memory_usage_summary capacity 'abc'")
def _(tmp, fx):
    run = mi_run(tmp)
    edit_json(mi_file(run, "memory_usage_summary_1.json"), lambda d: d.update(capacity="abc"))
    return Case(run, named=named("memory_usage_summary_1.json", "capacity", NOT_NUM))


@case("fx_mi_pp2x4_tail_cut", "mindinsight", 3, "mindinsight",
      "fixture mi_cluster_propose_pp2x4: rank 2's step_trace cut mid-cell at its end")
def _(tmp, fx):
    run = copy_fixture(fx, tmp, "pp2x4", "mindinsight", "mi_cluster_propose_pp2x4",
                       ignore=("variant_*",))
    cut_tail(run / "step_trace_raw_2_detail_time.csv", 3)
    return Case(run, named=named("step_trace_raw_2_detail_time.csv", TRUNC))


@case("fx_mscpu_op_time_text", "mindinsight", 3, "mindspore_cpu",
      "fixture mindspore_cpu_ms_single_new_graph: a cpu_op_execute_timestamp duration 'abc'")
def _(tmp, fx):
    run = copy_fixture(fx, tmp, "mscpu", "generated", "mindspore_cpu_ms_single_new_graph")
    path = next(run.glob("*_ascend_ms/FRAMEWORK/cpu_op_execute_timestamp_0.txt"))
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"(\d{19}),[0-9.]+,", r"\1,abc,", text, count=1)
    path.write_text(text, encoding="utf-8")
    return Case(run, named=named("cpu_op_execute_timestamp_0.txt", NOT_NUM))


@case("fx_mscpu_op_time_negative", "mindinsight", 3, "mindspore_cpu",
      "fixture mindspore_cpu_ms_single_new_graph: cpu_op_execute_timestamp durations negative")
def _(tmp, fx):
    run = copy_fixture(fx, tmp, "mscpu", "generated", "mindspore_cpu_ms_single_new_graph")
    path = next(run.glob("*_ascend_ms/FRAMEWORK/cpu_op_execute_timestamp_0.txt"))
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"(\d{19}),([0-9.]+),", r"\1,-\2,", text, count=5)
    path.write_text(text, encoding="utf-8")
    return Case(run, named=named("cpu_op_execute_timestamp_0.txt", NEG))


@case("fx_mscpu_timestamp_cut", "mindinsight", 3, "mindspore_cpu",
      "fixture mindspore_cpu_ms_single_new_graph: cpu_op_execute_timestamp cut mid-entry at its end")
def _(tmp, fx):
    run = copy_fixture(fx, tmp, "mscpu", "generated", "mindspore_cpu_ms_single_new_graph")
    path = next(run.glob("*_ascend_ms/FRAMEWORK/cpu_op_execute_timestamp_0.txt"))
    cut_tail(path, 12)
    return Case(run, named=named("cpu_op_execute_timestamp_0.txt", TRUNC))


# ---- Ascend text

_ASC_STEP = "step_trace_time.csv"
ASC_CELLS = [
    (_ASC_STEP, "Computing", 3, "abc", NOT_NUM),
    (_ASC_STEP, "Communication(Not Overlapped)", 3, "nan", NAN),
    (_ASC_STEP, "Free", 3, "inf", INF),
    (_ASC_STEP, "Stage", 3, "-607218.852", NEG),
    (_ASC_STEP, "Computing", 2, "1e308", HUGE),
    (_ASC_STEP, "Preparing", 4, "-639.415", NEG),
    ("kernel_details.csv", "Duration(us)", 3, "-2458.373", NEG),
    ("kernel_details.csv", "Start Time(us)", 4, "1e308", HUGE),
    ("kernel_details.csv", "Duration(us)", 5, "nan", NAN),
    ("op_statistic.csv", "Total Time(us)", 2, "abc", NOT_NUM),
    ("op_statistic.csv", "Count", 3, "-60", NEG),
    ("memory_record.csv", "Total Reserved(MB)", 3, "nan", NAN),
    ("operator_memory.csv", "Size(KB)", 2, "1e308", HUGE),
    ("npu_module_mem.csv", "Total Reserved(MB)", 2, "inf", INF),
]


def _asc_cell_target(tmp, file):
    root, dirs = asc_run(tmp)
    return root, asc_out(dirs[1], file)


_register_cells("asc_cell", "ascend", "ascend", _asc_cell_target, ASC_CELLS)


@case("asc_step_row_truncated", "ascend", 3, "ascend", "a step_trace_time row cut to '0,12,5910' (3 fields)")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    path = asc_out(dirs[0], _ASC_STEP)
    rows, nl = read_csv(path)
    rows[2] = [rows[2][0], rows[2][1], rows[2][2][:4]]
    write_csv(path, rows, nl)
    return Case(root, named=named(_ASC_STEP, TRUNC))


@case("asc_step_last_line_cut", "ascend", 3, "ascend", "step_trace_time cut mid-cell at its end, no final newline")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    cut_tail(asc_out(dirs[1], _ASC_STEP), 4)
    return Case(root, named=named(_ASC_STEP, TRUNC))


@case("asc_kernel_row_truncated", "ascend", 3, "ascend", "kernel_details.csv: a row cut after 'Start Time(us)'")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    cut_row(asc_out(dirs[0], "kernel_details.csv"), 4, 10)
    return Case(root, named=named("kernel_details.csv", TRUNC))


def _comm_time(doc, key, value):
    for step in doc.values():
        for op in step.get("collective", {}).values():
            op["Communication Time Info"][key] = value
            return


@case("asc_comm_elapse_text", "ascend", 3, "ascend", "communication.json 'Elapse Time(ms)' = 'abc'")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    edit_json(asc_out(dirs[0], "communication.json"), lambda d: _comm_time(d, "Elapse Time(ms)", "abc"))
    return Case(root, named=named("communication.json", re.escape("Elapse Time(ms)"), NOT_NUM))


@case("asc_comm_elapse_negative", "ascend", 3, "ascend", "communication.json 'Elapse Time(ms)' negative")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    edit_json(asc_out(dirs[0], "communication.json"), lambda d: _comm_time(d, "Elapse Time(ms)", -9.579))
    return Case(root, named=named("communication.json", re.escape("Elapse Time(ms)"), NEG))


@case("asc_comm_wait_nan", "ascend", 3, "ascend", "communication.json 'Wait Time(ms)' NaN")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    edit_json(asc_out(dirs[1], "communication.json"), lambda d: _comm_time(d, "Wait Time(ms)", float("nan")))
    return Case(root, named=named("communication.json", re.escape("Wait Time(ms)"), NAN))


@case("asc_comm_start_1e308", "ascend", 3, "ascend", "communication.json 'Start Timestamp(us)' 1e308")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    edit_json(asc_out(dirs[1], "communication.json"), lambda d: _comm_time(d, "Start Timestamp(us)", 1e308))
    return Case(root, named=named("communication.json", re.escape("Start Timestamp(us)"), HUGE))


def _matrix_link(doc, key, value):
    for step in doc.values():
        for op in step.get("collective", {}).values():
            for link in op.values():
                link[key] = value
                return


@case("asc_matrix_bandwidth_negative", "ascend", 3, "ascend", "communication_matrix.json 'Bandwidth(GB/s)' negative")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    edit_json(asc_out(dirs[0], "communication_matrix.json"), lambda d: _matrix_link(d, "Bandwidth(GB/s)", -28.2))
    return Case(root, named=named("communication_matrix.json", re.escape("Bandwidth(GB/s)"), NEG))


@case("asc_matrix_size_1e308", "ascend", 3, "ascend", "communication_matrix.json 'Transit Size(MB)' 1e308")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    edit_json(asc_out(dirs[0], "communication_matrix.json"), lambda d: _matrix_link(d, "Transit Size(MB)", 1e308))
    return Case(root, named=named("communication_matrix.json", re.escape("Transit Size(MB)"), HUGE))


# ---- Ascend DB export (fixture msinsight test/data/pytorch/db/level1, two ranks)

_DB = ("ascend", "msinsight", "test", "data", "pytorch", "db", "level1")


def _db_run(tmp, fx) -> tuple[Path, Path, Path]:
    root = copy_fixture(fx, tmp, "db_level1", *_DB, ignore=("*-shm", "*-wal"))
    out = root / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    return root, out / "ascend_pytorch_profiler_0.db", out / "analysis.db"


@case("fx_asc_db_step_negative", "ascend", 3, "ascend", "DB STEP_TIME row ending before it starts")
def _(tmp, fx):
    root, prof, _ = _db_run(tmp, fx)
    db_exec(prof, "UPDATE STEP_TIME SET endNs = startNs - 1000000000")
    return Case(root, named=named("ascend_pytorch_profiler_0.db", NEG + r"|ends? before|end.*start"))


@case("fx_asc_db_task_end_huge", "ascend", 3, "ascend", "DB TASK rows ending at int64 max (a 292-year kernel)")
def _(tmp, fx):
    root, prof, _ = _db_run(tmp, fx)
    db_exec(prof, "UPDATE TASK SET endNs = 9223372036854775807 WHERE rowid IN (SELECT rowid FROM TASK LIMIT 3)")
    return Case(root, named=named("ascend_pytorch_profiler_0.db", HUGE))


@case("fx_asc_db_steptrace_text", "ascend", 3, "ascend", "analysis.db StepTraceTime computing = 'abc'")
def _(tmp, fx):
    root, _, analysis = _db_run(tmp, fx)
    db_exec(analysis, "UPDATE StepTraceTime SET computing = 'abc'")
    return Case(root, named=named("analysis.db", r"computing", NOT_NUM))


@case("fx_asc_db_truncated", "ascend", 3, "ascend", "rank 1's profiler DB cut to half its size")
def _(tmp, fx):
    root, _, _ = _db_run(tmp, fx)
    path = root / "rank1_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_1.db"
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    return Case(root, named=named("ascend_pytorch_profiler_1.db", TRUNC + "|corrupt|malformed|not an sqlite"))


# ---- Kineto


@case("kin_negated_durations", "kineto", 3, "kineto",
      "every X event of rank 1 with its duration negated (the issue's step of -117,727 ms)")
def _(tmp, fx):
    root, traces = kin_run(tmp)

    def edit(d):
        for e in events(d):
            e["dur"] = -e["dur"]
    edit_json(traces[1], edit)
    return Case(root, named=named(traces[1].name, r"dur", NEG))


@case("kin_step_dur_negative", "kineto", 3, "kineto", "one ProfilerStep with a negative dur")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    edit_json(traces[0], lambda d: events(d, step=True)[1].update(dur=-75079.849))
    return Case(root, named=named(traces[0].name, r"dur|ProfilerStep|step", NEG))


@case("kin_kernel_dur_1e308", "kineto", 3, "kineto", "one kernel with dur 1e308")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    edit_json(traces[0], lambda d: events(d, cat="kernel")[3].update(dur=1e308))
    return Case(root, named=named(traces[0].name, r"dur", HUGE))


@case("kin_kernel_ts_1e308", "kineto", 3, "kineto", "one kernel with ts 1e308 (overflows int64 ns)")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    edit_json(traces[1], lambda d: events(d, cat="kernel")[2].update(ts=1e308))
    return Case(root, named=named(traces[1].name, r"\bts\b|timestamp", HUGE))


@case("kin_step_ts_1e17", "kineto", 3, "kineto", "a ProfilerStep at ts 1e17 us (1e20 ns: past int64)")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    edit_json(traces[1], lambda d: events(d, step=True)[0].update(ts=1e17))
    return Case(root, named=named(traces[1].name, r"\bts\b|timestamp", HUGE))


@case("kin_kernel_dur_nan", "kineto", 3, "kineto", "kernel durations NaN (JSON NaN literals)")
def _(tmp, fx):
    root, traces = kin_run(tmp)

    def edit(d):
        for e in events(d, cat="kernel")[:3]:
            e["dur"] = float("nan")
    edit_json(traces[0], edit)
    return Case(root, named=named(traces[0].name, r"dur", NAN))


@case("kin_kernel_dur_text", "kineto", 3, "kineto", "kernel dur 'abc' and ts '12x'")
def _(tmp, fx):
    root, traces = kin_run(tmp)

    def edit(d):
        k = events(d, cat="kernel")
        k[0]["dur"] = "abc"
        k[1]["ts"] = "12x"
    edit_json(traces[0], edit)
    return Case(root, named=named(traces[0].name, r"\bts\b|dur", NOT_NUM + "|numeric"))


@case("kin_memory_negative", "kineto", 3, "kineto", "[memory] events with negative Total Reserved")
def _(tmp, fx):
    root, traces = kin_run(tmp)

    def edit(d):
        for e in d["traceEvents"]:
            if isinstance(e, dict) and e.get("name") == "[memory]":
                e["args"]["Total Reserved"] = -abs(e["args"]["Total Reserved"])
    edit_json(traces[1], edit)
    return Case(root, named=named(traces[1].name, r"memory|reserved", NEG))


@case("kin_truncated_trace", "kineto", 3, "kineto", "rank 1's trace cut at 60% of its bytes")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    data = traces[1].read_bytes()
    traces[1].write_bytes(data[: len(data) * 6 // 10])
    return Case(root, named=named(traces[1].name, TRUNC))


@case("fx_kin_gloo_negated_durations", "kineto", 3, "kineto",
      "fixture generated_cpu_gloo_4rank_mesh2x2: rank 2's durations negated")
def _(tmp, fx):
    root = copy_fixture(fx, tmp, "gloo", "kineto", "generated_cpu_gloo_4rank_mesh2x2")

    def edit(d):
        for e in events(d):
            if isinstance(e.get("dur"), (int, float)):
                e["dur"] = -e["dur"] - 1
    edit_json(root / "rank2.pt.trace.json", edit)
    return Case(root, named=named("rank2.pt.trace.json", r"dur", NEG))


@case("fail_on_with_bad_row", "cli", 3, "mindinsight",
      "a row with 'abc' and a --fail-on that holds: exit 3, the data problem still in the metrics")
def _(tmp, fx):
    run = mi_run(tmp)
    set_cell(mi_file(run, _MI_STEP), "total", "abc", 3)
    return Case(run, exit=3, args=["--fail-on", "step_ms.median>0.001"],
                named=named(_MI_STEP, "total", NOT_NUM))


# =========================================================================== class 4: duplicate / impossible ranks


@case("mi_dup_rank_file_00", "mindinsight", 4, "mindinsight", "step_trace_raw_00_* beside step_trace_raw_0_*")
def _(tmp, fx):
    run = mi_run(tmp)
    shutil.copyfile(mi_file(run, _MI_STEP), mi_file(run, "step_trace_raw_00_detail_time.csv"))
    return Case(run, named=named("step_trace_raw_0", DUP), check=unique_rank_steps)


@case("fx_mi_pp2x4_dup_rank_file", "mindinsight", 4, "mindinsight",
      "fixture mi_cluster_propose_pp2x4 with step_trace_raw_03_* beside step_trace_raw_3_*")
def _(tmp, fx):
    run = copy_fixture(fx, tmp, "pp2x4", "mindinsight", "mi_cluster_propose_pp2x4", ignore=("variant_*",))
    shutil.copyfile(run / "step_trace_raw_3_detail_time.csv", run / "step_trace_raw_03_detail_time.csv")
    return Case(run, named=named("step_trace_raw_", DUP), check=unique_rank_steps)


@case("mi_rank_1e9_filename", "mindinsight", 4, "mindinsight", "rank 1's files renamed to rank 10^9")
def _(tmp, fx):
    run = mi_run(tmp)
    for f in list((run / "profiler").iterdir()):
        new = re.sub(r"_1(_detail_time\.csv|\.csv|\.json)$", r"_1000000000\1", f.name)
        if new != f.name:
            f.rename(f.with_name(new))
    return Case(run, named=named("1000000000", r"rank"), check=ranks_are([0]))


@case("mi_rank_1e25_filename", "mindinsight", 4, "mindinsight", "a step trace file named for rank 10^25")
def _(tmp, fx):
    run = mi_run(tmp)
    f = mi_file(run, "step_trace_raw_1_detail_time.csv")
    f.rename(f.with_name("step_trace_raw_10000000000000000000000000_detail_time.csv"))
    return Case(run, named=named("10000000000000000000000000", r"rank"), check=ranks_are([0, 1]))  # rank 1's other files


@case("mi_rank_negative_filename", "mindinsight", 4, "mindinsight", "a step trace file named for rank -1")
def _(tmp, fx):
    run = mi_run(tmp)
    f = mi_file(run, "step_trace_raw_1_detail_time.csv")
    f.rename(f.with_name("step_trace_raw_-1_detail_time.csv"))
    return Case(run, named=named("step_trace_raw_-1_detail_time.csv", r"rank|not|ignored|skipped"))


@case("mi_profiler_info_rank_conflict", "mindinsight", 4, "mindinsight",
      "profiler_info_0.json says rank_id '1' (the file name says 0)")
def _(tmp, fx):
    run = mi_run(tmp)
    edit_json(mi_file(run, "profiler_info_0.json"), lambda d: d.update(rank_id="1"))
    return Case(run, named=named("profiler_info_0.json", r"rank"))


def _legacy(tmp, edit) -> Path:
    run = mi_run(tmp, layout="legacy")
    edit_json(run / "hccl.json", edit)
    return run


@case("mi_legacy_dup_rank_id", "mindinsight", 4, "mindinsight", "hccl.json: two devices with rank_id 0")
def _(tmp, fx):
    run = _legacy(tmp, lambda d: d["server_list"][0]["device"][1].update(rank_id="0"))
    return Case(run, named=named("hccl.json", DUP + r"|rank 0"), exit=(0, 2))


@case("mi_legacy_rank_id_1e9", "mindinsight", 4, "mindinsight", "hccl.json: a device with rank_id 10^9")
def _(tmp, fx):
    run = _legacy(tmp, lambda d: d["server_list"][0]["device"][1].update(rank_id="1000000000"))
    return Case(run, named=named("hccl.json", r"1000000000"), check=ranks_are([0]))


@case("mi_legacy_rank_id_negative", "mindinsight", 4, "mindinsight", "hccl.json: a device with rank_id -1")
def _(tmp, fx):
    run = _legacy(tmp, lambda d: d["server_list"][0]["device"][1].update(rank_id="-1"))
    return Case(run, named=named("hccl.json", r"-1"), check=ranks_are([0]))


def _asc_rank(tmp, value, rename: str | None):
    root, dirs = asc_run(tmp)
    info = dirs[1] / "profiler_info_1.json"
    edit_json(info, lambda d: d.update(rank_id=value))
    if rename is not None:
        info.rename(info.with_name(rename))
    return root


@case("asc_rank_1e9", "ascend", 4, "ascend", "profiler_info_1000000000.json with rank_id 10^9")
def _(tmp, fx):
    return Case(_asc_rank(tmp, 10 ** 9, "profiler_info_1000000000.json"), named=named("1000000000", r"rank"),
                check=ranks_are([0]))


@case("asc_rank_1e25", "ascend", 4, "ascend", "profiler_info.json (no rank in the name) with rank_id '10^25'")
def _(tmp, fx):
    return Case(_asc_rank(tmp, str(10 ** 25), "profiler_info.json"),
                named=named(None, r"10000000000000000000000000", r"rank"), check=ranks_are([0]))


@case("asc_rank_negative", "ascend", 4, "ascend", "profiler_info.json (no rank in the name) with rank_id -1")
def _(tmp, fx):
    return Case(_asc_rank(tmp, -1, "profiler_info.json"), named=named(None, r"rank", r"-1"), check=ranks_are([0]))


@case("asc_rank_name_conflict", "ascend", 4, "ascend", "profiler_info_1.json says rank_id 0")
def _(tmp, fx):
    return Case(_asc_rank(tmp, 0, None), named=named("profiler_info_1.json", r"rank"))


@case("asc_dup_rank_dirs", "ascend", 4, "ascend", "two profiler directories for rank 0")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    shutil.copytree(dirs[0], root / (dirs[0].name.replace("_ascend_pt", "9_ascend_pt")))
    return Case(root, named=named(None, r"rank 0", DUP + r"|newer|skipped"), check=unique_rank_steps)


@case("asc_metadata_rank_conflict", "ascend", 4, "ascend",
      "rank 0's profiler_metadata.json says distributed_args.rank 1")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    edit_json(dirs[0] / "profiler_metadata.json", lambda m: m["distributed_args"].update(rank=1))
    return Case(root, named=named("profiler_metadata.json", r"rank"))


def _kin_rank(tmp, which, value):
    root, traces = kin_run(tmp)
    edit_json(traces[which], lambda d: d["distributedInfo"].update(rank=value))
    return root, traces


@case("kin_dup_rank", "kineto", 4, "kineto", "two traces with distributedInfo.rank 0")
def _(tmp, fx):
    root, traces = _kin_rank(tmp, 1, 0)
    return Case(root, named=named(".pt.trace.json", r"rank 0|rank", DUP), check=unique_rank_steps)


@case("kin_rank_1e9", "kineto", 4, "kineto", "distributedInfo.rank 10^9")
def _(tmp, fx):
    root, traces = _kin_rank(tmp, 1, 10 ** 9)
    return Case(root, named=named(traces[1].name, r"1000000000", r"rank"), check=ranks_are([0]))


@case("kin_rank_1e25", "kineto", 4, "kineto", "distributedInfo.rank 10^25 (a JSON integer)")
def _(tmp, fx):
    root, traces = _kin_rank(tmp, 1, 10 ** 25)
    return Case(root, named=named(traces[1].name, r"10000000000000000000000000", r"rank"), check=ranks_are([0]))


@case("kin_rank_negative", "kineto", 4, "kineto", "distributedInfo.rank -1")
def _(tmp, fx):
    root, traces = _kin_rank(tmp, 1, -1)
    return Case(root, named=named(traces[1].name, r"rank", r"-1"), check=ranks_are([0]))


@case("kin_rank_text", "kineto", 4, "kineto", "distributedInfo.rank 'abc'")
def _(tmp, fx):
    root, traces = _kin_rank(tmp, 1, "abc")
    return Case(root, named=named(traces[1].name, r"rank", r"abc"))


@case("kin_rank_name_conflict", "kineto", 4, "kineto",
      "rank0.pt.trace.json holds distributedInfo.rank 1 and rank1.pt.trace.json rank 0")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    traces[0].rename(root / "rank1.pt.trace.json.tmp")
    traces[1].rename(root / "rank0.pt.trace.json")
    (root / "rank1.pt.trace.json.tmp").rename(root / "rank1.pt.trace.json")
    return Case(root, named=named(r"rank", r"rank\d\.pt\.trace\.json", r"conflict|disagree|but|says|differ|name"))


@case("kin_pg_ranks_out_of_range", "kineto", 4, "kineto", "pg_config ranks [0, 10^9, -1]")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    edit_json(traces[0], lambda d: d["distributedInfo"]["pg_config"][0].update(ranks=[0, 10 ** 9, -1]))
    return Case(root, named=named(traces[0].name, r"1000000000|-1", r"rank"), check=world_at_most(2))


# =========================================================================== class 5: mixed input, junk


def _three_families(tmp) -> Path:
    root = tmp / "mixed"
    root.mkdir()
    mi = mi_run(tmp)
    shutil.move(str(mi / "profiler"), str(root / "profiler"))
    a, dirs = asc_run(tmp)
    for d in dirs:
        shutil.move(str(d), str(root / d.name))
    k, traces = kin_run(tmp)
    for t in traces:
        shutil.move(str(t), str(root / t.name))
    return root


@case("mixed_three_families", "detection", 5, "mixed", "MindInsight, Ascend and Kineto output in one directory")
def _(tmp, fx):
    return Case(_three_families(tmp), exit=2, named=named(None, PICK))


@case("mixed_three_families_format_kineto", "detection", 5, "mixed", "the same with --format kineto")
def _(tmp, fx):
    return Case(_three_families(tmp), args=["--format", "kineto"], check=all_of(format_is("kineto"), same_as_clean("kineto")))


@case("mixed_mi_and_kineto", "detection", 5, "mixed", "MindInsight profiler/ and Kineto traces in one directory")
def _(tmp, fx):
    root = mi_run(tmp)
    _, traces = kin_run(tmp)
    for t in traces:
        shutil.move(str(t), str(root / t.name))
    return Case(root, exit=2, named=named(None, PICK))


@case("mixed_ascend_and_kineto", "detection", 5, "mixed", "Ascend rank directories and Kineto traces together")
def _(tmp, fx):
    root, _ = asc_run(tmp)
    _, traces = kin_run(tmp)
    for t in traces:
        shutil.move(str(t), str(root / t.name))
    return Case(root, exit=2, named=named(None, PICK))


@case("nested_two_families", "detection", 5, "mixed", "run/a/ holds a MindInsight run, run/b/ a Kineto run")
def _(tmp, fx):
    root = tmp / "nested"
    root.mkdir()
    mi_run(root, name="a")
    kin_run(root, name="b")
    return Case(root, exit=2, named=named(None, PICK))


@case("nested_two_mindinsight_runs", "detection", 5, "mindinsight", "run/run1/profiler and run/run2/profiler")
def _(tmp, fx):
    root = tmp / "nested"
    root.mkdir()
    mi_run(root, name="run1")
    mi_run(root, name="run2", seed=1)
    return Case(root, exit=2, named=named(None, PICK))


@case("nested_two_kineto_runs", "detection", 5, "kineto", "run/a/ and run/b/ each hold ranks 0 and 1 of a Kineto run")
def _(tmp, fx):
    root = tmp / "nested"
    root.mkdir()
    kin_run(root, name="a")
    kin_run(root, name="b", seed=1)
    return Case(root, exit=2, named=named(None, PICK))


@case("format_absent_family", "detection", 5, "args", "--format ascend on a Kineto run")
def _(tmp, fx):
    root, _ = kin_run(tmp)
    return Case(root, exit=2, args=["--format", "ascend"], named=named(None, r"ascend"),
                not_named=r"unrecognized arguments|invalid choice")


@case("kin_junk_named_trace", "kineto", 5, "kineto", "junk bytes named rank2.pt.trace.json beside a valid run")
def _(tmp, fx):
    root, _ = kin_run(tmp)
    (root / "rank2.pt.trace.json").write_bytes(junk_bytes())
    return Case(root, named=named("rank2.pt.trace.json", JUNK), check=ranks_are([0, 1]))


@case("kin_junk_with_trace_prefix", "kineto", 5, "kineto",
      "rank2.pt.trace.json: '{\"traceEvents\": [' then junk bytes")
def _(tmp, fx):
    root, _ = kin_run(tmp)
    (root / "rank2.pt.trace.json").write_bytes(b'{"traceEvents": [' + junk_bytes())
    return Case(root, named=named("rank2.pt.trace.json", JUNK + "|" + TRUNC), check=ranks_are([0, 1]))


@case("kin_only_junk", "kineto", 5, "kineto", "a directory with only junk named rank0/rank1.pt.trace.json")
def _(tmp, fx):
    root = tmp / "junk"
    root.mkdir()
    (root / "rank0.pt.trace.json").write_bytes(junk_bytes(seed=1))
    (root / "rank1.pt.trace.json").write_bytes(b'{"traceEvents": [' + junk_bytes(seed=2))
    return Case(root, exit=2, named=named(None, r"rank[01]\.pt\.trace\.json|no (usable|pytorch|profiler)"))


@case("kin_utf16_trace", "kineto", 5, "kineto", "rank 1's trace re-encoded as UTF-16")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    traces[1].write_bytes(traces[1].read_text(encoding="utf-8").encode("utf-16"))
    return Case(root, named=named(traces[1].name, ENCODING))


@case("kin_truncated_gzip", "kineto", 5, "kineto", "rank 1's trace gzipped and the .gz cut at 60%")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    data = gzip.compress(traces[1].read_bytes())
    gz = traces[1].with_name(traces[1].name + ".gz")
    gz.write_bytes(data[: len(data) * 6 // 10])
    traces[1].unlink()
    return Case(root, named=named(gz.name, TRUNC + "|compressed|corrupt|gzip"))


@case("fx_kin_gloo_junk_rank4", "kineto", 5, "kineto",
      "fixture generated_cpu_gloo_4rank_mesh2x2 plus junk named rank4.pt.trace.json")
def _(tmp, fx):
    root = copy_fixture(fx, tmp, "gloo", "kineto", "generated_cpu_gloo_4rank_mesh2x2")
    (root / "rank4.pt.trace.json").write_bytes(junk_bytes())
    return Case(root, named=named("rank4.pt.trace.json", JUNK), check=ranks_are([0, 1, 2, 3]))


@case("asc_junk_step_trace", "ascend", 5, "ascend", "rank 1's step_trace_time.csv is junk bytes")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    asc_out(dirs[1], _ASC_STEP).write_bytes(junk_bytes())
    return Case(root, named=named(_ASC_STEP, JUNK + "|" + ENCODING))


@case("asc_utf16_kernel_details", "ascend", 5, "ascend", "rank 0's kernel_details.csv re-encoded as UTF-16")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    p = asc_out(dirs[0], "kernel_details.csv")
    p.write_bytes(p.read_text(encoding="utf-8").encode("utf-16"))
    return Case(root, named=named("kernel_details.csv", ENCODING))


@case("mi_junk_step_trace", "mindinsight", 5, "mindinsight", "rank 1's step_trace_raw_1_detail_time.csv is junk")
def _(tmp, fx):
    run = mi_run(tmp)
    mi_file(run, "step_trace_raw_1_detail_time.csv").write_bytes(junk_bytes())
    return Case(run, exit=(0, 2), named=named("step_trace_raw_1_detail_time.csv", JUNK + "|" + ENCODING))


@case("mi_utf16_step_trace", "mindinsight", 5, "mindinsight", "rank 1's step trace re-encoded as UTF-16")
def _(tmp, fx):
    run = mi_run(tmp)
    p = mi_file(run, "step_trace_raw_1_detail_time.csv")
    p.write_bytes(p.read_text(encoding="utf-8").encode("utf-16"))
    return Case(run, exit=(0, 2), named=named("step_trace_raw_1_detail_time.csv", ENCODING))


@case("empty_run_dir", "detection", 5, "none", "an empty run directory")
def _(tmp, fx):
    root = tmp / "empty"
    root.mkdir()
    return Case(root, exit=2, named=named("empty", r"no profiler output|nothing|no .*found|empty"))


# =========================================================================== class 6: internal errors


@case("mi_hccl_server_list_junk", "mindinsight", 6, "mindinsight", 'hccl.json {"server_list": ["x", 5, null]}')
def _(tmp, fx):
    run = _legacy(tmp, lambda d: {"server_list": ["x", 5, None]})
    return Case(run, exit=2, named=named("hccl.json", r"server_list|rank table|device|expected|not"),
                not_named=r"without a rank table")


@case("mi_hccl_server_list_text", "mindinsight", 6, "mindinsight", 'hccl.json {"server_list": "abc"}')
def _(tmp, fx):
    run = _legacy(tmp, lambda d: {"server_list": "abc"})
    return Case(run, exit=2, named=named("hccl.json", r"server_list|rank table|expected|not"),
                not_named=r"without a rank table")


@case("mi_hccl_device_junk", "mindinsight", 6, "mindinsight", "hccl.json devices: a list of numbers, device_id {}")
def _(tmp, fx):
    def edit(d):
        d["server_list"][0]["device"] = [5, {"device_id": {}, "rank_id": None}]
    run = _legacy(tmp, edit)
    return Case(run, exit=2, named=named("hccl.json", r"device|rank|expected|not"),
                not_named=r"without a rank table")


@case("mi_step_num_huge", "mindinsight", 6, "mindinsight", "step_num 999999999999999999999")
def _(tmp, fx):
    run = mi_run(tmp)
    set_cell(mi_file(run, _MI_STEP), "step_num", "999999999999999999999", 3)
    return Case(run, named=named(_MI_STEP, STEPW))


@case("mi_csv_cell_200k", "mindinsight", 6, "mindinsight", "a step trace header cell (an op name) of 200 KB")
def _(tmp, fx):
    run = mi_run(tmp)
    path = mi_file(run, "step_trace_raw_1_detail_time.csv")
    rows, nl = read_csv(path)
    i = rows[0].index("stream_36_0_AllReduce-op4542")
    rows[0][i] = "stream_36_0_AllReduce-" + "D" * 200_000
    write_csv(path, rows, nl)
    return Case(run, exit=(0, 2), named=named("step_trace_raw_1_detail_time.csv", LONG))


@case("mi_hccl_raw_link_info_junk", "mindinsight", 6, "mindinsight", "hccl_raw link_info cell is not JSON")
def _(tmp, fx):
    run = mi_run(tmp)
    set_cell(mi_file(run, "hccl_raw_0.csv"), "link_info", '{"1-0": {"SDMA": [5.49, ', 2)
    return Case(run, named=named("hccl_raw_0.csv", r"link_info", JUNK + "|json"))


@case("mi_flops_summary_list", "mindinsight", 6, "mindinsight", "flops_summary_0.json is [1, 2]")
def _(tmp, fx):
    run = mi_run(tmp)
    mi_file(run, "flops_summary_0.json").write_text("[1, 2]")
    return Case(run, named=named("flops_summary_0.json", SHAPE))


@case("mi_flops_summary_key_twice", "mindinsight", 2, "mindinsight",
      "flops_summary_0.json gives a key twice (issue 29 #2 as a class: a JSON parser silently keeps the last)")
def _(tmp, fx):
    run = mi_run(tmp)
    f = mi_file(run, "flops_summary_0.json")
    text = f.read_text()
    key = next(iter(json.loads(text)))
    f.write_text(text.replace("{", '{"%s": 1e9, ' % key, 1))
    return Case(run, named=named("flops_summary_0.json", "appears twice", re.escape(key)))


@case("asc_comm_op_twice", "ascend", 2, "ascend",
      "communication.json gives one op twice in a step (msgspec, the fast path, kept the last: one op lost)")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    op = op_given_twice(asc_out(dirs[0], "communication.json"))
    return Case(root, named=named("communication.json", "appears twice", re.escape(op[:20])))


@case("mi_memory_summary_text_peak", "mindinsight", 6, "mindinsight", "memory_usage_summary peak_mem 'abc'")
def _(tmp, fx):
    run = mi_run(tmp)
    edit_json(mi_file(run, "memory_usage_summary_0.json"), lambda d: d.update(peak_mem="abc"))
    return Case(run, named=named("memory_usage_summary_0.json", "peak_mem", NOT_NUM))


@case("mi_profiler_info_null", "mindinsight", 6, "mindinsight", "profiler_info_0.json is null")
def _(tmp, fx):
    run = mi_run(tmp)
    mi_file(run, "profiler_info_0.json").write_text("null")
    return Case(run, named=named("profiler_info_0.json", SHAPE))


@case("asc_global_ranks_text", "ascend", 6, "ascend", "parallel_group_info global_ranks ['a', null, 1.5]")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    edit_json(dirs[0] / "profiler_metadata.json",
              lambda m: m["parallel_group_info"]["group_name_1"].update(global_ranks=["a", None, 1.5]))
    return Case(root, named=named("profiler_metadata.json", r"global_ranks|group"))


@case("asc_global_ranks_not_list", "ascend", 6, "ascend", "parallel_group_info global_ranks '0,1' (a string)")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    for d in dirs:
        edit_json(d / "profiler_metadata.json",
                  lambda m: m["parallel_group_info"]["group_name_1"].update(global_ranks="0,1"))
    return Case(root, named=named("profiler_metadata.json", r"global_ranks|group"))


@case("asc_group_info_junk", "ascend", 6, "ascend", "parallel_group_info is [5, 'x']; distributed_args is 'x'")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    edit_json(dirs[1] / "profiler_metadata.json",
              lambda m: m.update(parallel_group_info=[5, "x"], distributed_args="x"))
    return Case(root, named=named("profiler_metadata.json", r"parallel_group_info|distributed_args|" + SHAPE))


@case("fx_asc_db_meta_global_ranks_text", "ascend", 6, "ascend",
      "DB META_DATA parallel_group_info with global_ranks ['x', null]")
def _(tmp, fx):
    root, prof, _ = _db_run(tmp, fx)
    value = json.dumps({"group_name_0": {"group_name": "dp", "group_rank": 0, "global_ranks": ["x", None]}})
    db_exec(prof, ("INSERT INTO META_DATA (name, value) VALUES (?, ?)", ("parallel_group_info", value)))
    return Case(root, named=named("ascend_pytorch_profiler_0.db", r"global_ranks|group"))


@case("fx_asc_db_meta_world_size_1e9", "ascend", 1, "ascend", "DB META_DATA distributed_args.world_size 10^9")
def _(tmp, fx):
    root, prof, _ = _db_run(tmp, fx)
    value = json.dumps({"world_size": 10 ** 9, "rank": 0})
    db_exec(prof, ("INSERT INTO META_DATA (name, value) VALUES (?, ?)", ("distributed_args", value)))
    return Case(root, named=named("ascend_pytorch_profiler_0.db", WORLD), check=world_at_most(2))


@case("asc_step_id_huge", "ascend", 6, "ascend", "step_trace_time Step 999999999999999999999")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    set_cell(asc_out(dirs[0], _ASC_STEP), "Step", "999999999999999999999", 3)
    return Case(root, named=named(_ASC_STEP, STEPW))


@case("asc_csv_cell_200k", "ascend", 6, "ascend", "a kernel_details.csv Name cell of 200 KB (over csv's 128 KiB)")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    set_cell(asc_out(dirs[0], "kernel_details.csv"), "Name", "K" * 200_000, 3)
    return Case(root, named=named("kernel_details.csv", LONG))


@case("asc_comm_json_list", "ascend", 6, "ascend", "communication.json is [1, 2]")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    asc_out(dirs[0], "communication.json").write_text("[1, 2]")
    return Case(root, named=named("communication.json", SHAPE))


@case("asc_comm_json_step_number", "ascend", 6, "ascend", 'communication.json {"step11": 5}')
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    asc_out(dirs[1], "communication.json").write_text('{"step11": 5, "step12": {"collective": [1]}}')
    return Case(root, named=named("communication.json", SHAPE))


@case("asc_matrix_shapes", "ascend", 6, "ascend", 'communication_matrix.json {"step11": {"collective": ["x"]}}')
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    asc_out(dirs[0], "communication_matrix.json").write_text('{"step11": {"collective": ["x", {"a": 5}]}}')
    return Case(root, named=named("communication_matrix.json", SHAPE))


@case("asc_profiler_info_list", "ascend", 6, "ascend", "profiler_info_1.json is []")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    (dirs[1] / "profiler_info_1.json").write_text("[]")
    return Case(root, named=named("profiler_info_1.json", SHAPE))


@case("kin_pg_ranks_text", "kineto", 6, "kineto", "pg_config ranks ['a', null, {}]")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    for t in traces:
        edit_json(t, lambda d: d["distributedInfo"]["pg_config"][0].update(ranks=["a", None, {}]))
    return Case(root, named=named(".pt.trace.json", r"pg_config|group|ranks"))


@case("fx_kin_gloo_pg_ranks_text", "kineto", 6, "kineto",
      "fixture generated_cpu_gloo_4rank_mesh2x2 with non-numeric pg_config ranks in rank 0")
def _(tmp, fx):
    root = copy_fixture(fx, tmp, "gloo", "kineto", "generated_cpu_gloo_4rank_mesh2x2")

    def edit(d):
        for pg in d["distributedInfo"]["pg_config"]:
            pg["ranks"] = ["zero", "one"]
    edit_json(root / "rank0.pt.trace.json", edit)
    return Case(root, named=named("rank0.pt.trace.json", r"pg_config|group|ranks"))


@case("kin_pg_config_shapes", "kineto", 6, "kineto", "pg_config is 'abc' in one trace and [5, 'x', null] in the other")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    edit_json(traces[0], lambda d: d["distributedInfo"].update(pg_config="abc"))
    edit_json(traces[1], lambda d: d["distributedInfo"].update(pg_config=[5, "x", None]))
    return Case(root, named=named(".pt.trace.json", r"pg_config"))


@case("kin_profilerstep_huge", "kineto", 6, "kineto", "ProfilerStep#999999999999999999999")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    edit_json(traces[0], lambda d: events(d, step=True)[1].update(name="ProfilerStep#999999999999999999999"))
    return Case(root, named=named(traces[0].name, r"ProfilerStep|step"))


@case("kin_event_shapes", "kineto", 6, "kineto", "events that are numbers, args that are lists, a name that is a dict")
def _(tmp, fx):
    root, traces = kin_run(tmp)

    def edit(d):
        d["traceEvents"][5:5] = [1, "x", None]
        k = events(d, cat="kernel")
        k[0]["args"] = [1, 2]
        k[1]["name"] = {"a": 1}
        d["deviceProperties"] = "x"
    edit_json(traces[1], edit)
    return Case(root, named=named(traces[1].name, SHAPE + "|not (json )?objects"))


@case("kin_trace_events_object", "kineto", 6, "kineto", '"traceEvents" is an object in rank 1')
def _(tmp, fx):
    root, traces = kin_run(tmp)
    edit_json(traces[1], lambda d: d.update(traceEvents={"a": 1}))
    return Case(root, named=named(traces[1].name, r"traceEvents|array|" + SHAPE))


# =========================================================================== class 7: interrupts

_OLD = "<!doctype html><title>previous report</title>OLD REPORT, must survive\n"


@case("sigterm_while_writing", "cli", 7, "mindinsight",
      "SIGTERM while the report is moved into place: handled like SIGINT, no temp file, the old report intact")
def _(tmp, fx):
    return Case(mi_run(tmp), exit=(130, 143), previous=_OLD, named=named(None, r"interrupt|terminat|signal"),
                hooks=[("signal_at_replace", (int(signal.SIGTERM), 1))])


@case("sigint_while_writing_json", "cli", 7, "mindinsight",
      "SIGINT at the second rename (the report already in place): never 'nothing written' after writing")
def _(tmp, fx):
    return Case(mi_run(tmp), exit=130, previous=_OLD, named=named(None, r"interrupt"),
                hooks=[("signal_at_replace", (int(signal.SIGINT), 2))])


def _kin_jobs2(tmp, sig, target, sleep):
    """A Kineto run decoded by 2 workers: rank 0's trace takes ``sleep`` s more, so when the signal comes (1 s
    after the workers exist) one worker decodes and the other waits for work."""
    root, traces = kin_run(tmp)
    return dict(run=root, args=["--jobs", "2"], previous=_OLD,
                hooks=[("slow_parallel_decode", (sleep, traces[0].name))], signal=(int(sig), target, 1.0))


@case("sigint_jobs2_decoding", "cli", 7, "kineto",
      "Ctrl-C (SIGINT to the process group) while --jobs 2 workers decode: no worker traceback, nothing left")
def _(tmp, fx):
    return Case(exit=130, named=named(None, r"interrupt"), **_kin_jobs2(tmp, signal.SIGINT, "group", 3.0))


@case("sigterm_jobs2_decoding", "cli", 7, "kineto",
      "SIGTERM to the process group while --jobs 2 workers decode: handled like SIGINT")
def _(tmp, fx):
    return Case(exit=(130, 143), named=named(None, r"interrupt|terminat|signal"),
                **_kin_jobs2(tmp, signal.SIGTERM, "group", 3.0))


@case("sigkill_parent_jobs2_decoding", "cli", 7, "kineto",
      "SIGKILL of the main process while --jobs 2 workers decode: the workers die with it (within 5 s)")
def _(tmp, fx):
    return Case(exit=-9, **_kin_jobs2(tmp, signal.SIGKILL, "leader", 20.0))


# =========================================================================== class 8: names that break charts


@case("kin_kernel_u2028", "detection", 8, "kineto", "GPU kernel names with U+2028 / U+2029")
def _(tmp, fx):
    root, traces = kin_run(tmp)

    def edit(d):
        for e in events(d, cat="kernel"):
            e["name"] = e["name"][:20] + "\u2028line\u2029para"
    for t in traces:
        edit_json(t, edit)
    return Case(root, check=all_of(script_safe, same_as_clean("kineto")))


@case("asc_kernel_type_u2028", "detection", 8, "ascend", "a kernel Type (and OP Type) containing U+2028")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    for d in dirs:
        for file, col in (("kernel_details.csv", "Type"), ("op_statistic.csv", "OP Type")):
            path = asc_out(d, file)
            rows, nl = read_csv(path)
            i = rows[0].index(col)
            for row in rows[1:]:
                if row[i] == "MatMulV3":
                    row[i] = "MatMul\u2028V3"
            write_csv(path, rows, nl)
    return Case(root, check=all_of(script_safe, same_as_clean("ascend")))


@case("mi_op_name_script", "detection", 8, "mindinsight", "MindInsight op names '</script><script>alert(1)</script>'")
def _(tmp, fx):
    return Case(mi_run(tmp, hostile_name="</script><script>alert(1)</script>\u2028"),
                check=all_of(script_safe, same_as_clean("mindinsight")))


@case("kin_host_and_group_html", "detection", 8, "kineto",
      "host_name '<img src=x onerror=alert(1)>' and a pg_desc '</script>'")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    def edit(d):
        d["host_name"] = "<img src=x onerror=alert(1)>"
        d["distributedInfo"]["pg_config"][0]["pg_desc"] = "</script><script>alert(1)//"
    for t in traces:
        edit_json(t, edit)
    return Case(root, check=all_of(script_safe, same_as_clean("kineto")))


@case("title_script", "detection", 8, "args", "--title '</script><script>alert(1)</script>' with U+2028")
def _(tmp, fx):
    return Case(mi_run(tmp), args=["--title", "</script><script>alert(1)</script>\u2028"],
                check=all_of(script_safe, same_as_clean("mindinsight")))


@case("static_hostile_labels", "detection", 8, "mindinsight",
      "--static with op names holding 'onmouseover=', 'javascript:' and 'href=': charts drawn, text escaped")
def _(tmp, fx):
    run = mi_run(tmp, hostile_name="x onmouseover=alert(1) javascript:alert(2) href=#y")
    return Case(run, args=["--static"], check=all_of(static_complete, same_as_clean("mindinsight")), mode="subprocess")


# =========================================================================== class 9: misleading messages; odd files


@case("mi_hccl_truncated", "mindinsight", 9, "mindinsight", "hccl.json cut in half (not 'without a rank table')")
def _(tmp, fx):
    run = mi_run(tmp, layout="legacy")
    data = (run / "hccl.json").read_bytes()
    (run / "hccl.json").write_bytes(data[: len(data) // 2])
    return Case(run, exit=2, named=named("hccl.json", TRUNC + r"|invalid json|not valid json"),
                not_named=r"without a rank table")


@case("mi_hccl_empty", "mindinsight", 9, "mindinsight", "hccl.json is empty")
def _(tmp, fx):
    run = mi_run(tmp, layout="legacy")
    (run / "hccl.json").write_bytes(b"")
    return Case(run, exit=2, named=named("hccl.json", EMPTY), not_named=r"without a rank table")


@case("symlink_loop_run_dir", "cli", 9, "none", "the run directory is a symlink loop (not 'no such file')")
def _(tmp, fx):
    loop = tmp / "loop"
    os.symlink("loop", loop)
    return Case(loop, exit=2, named=named("loop", r"loop|too many levels"), not_named=r"no such file")


@case("symlink_loop_inside_run", "detection", 9, "kineto", "a symlink loop and a link to the run itself inside it")
def _(tmp, fx):
    root, _ = kin_run(tmp)
    os.symlink("selfloop", root / "selfloop")
    os.symlink(".", root / "again")
    return Case(root, check=all_of(ranks_are([0, 1]), same_as_clean("kineto")))


@case("device_memory_inf", "cli", 9, "args", "--device-memory-gb inf")
def _(tmp, fx):
    return Case(mi_run(tmp), exit=2, args=["--device-memory-gb", "inf"], named=named("--device-memory-gb", ""),
                refuse_early=True)


@case("device_memory_nan", "cli", 9, "args", "--device-memory-gb nan")
def _(tmp, fx):
    return Case(mi_run(tmp), exit=2, args=["--device-memory-gb", "nan"], named=named("--device-memory-gb", ""),
                refuse_early=True)


@case("peak_tflops_1e308", "cli", 9, "args", "--peak-tflops 1e308 (finite, absurd)")
def _(tmp, fx):
    return Case(mi_run(tmp), exit=2, args=["--peak-tflops", "1e308"], named=named("--peak-tflops", ""),
                refuse_early=True)


@case("fail_on_nan", "cli", 9, "args", "--fail-on 'step_ms.median>nan'")
def _(tmp, fx):
    return Case(mi_run(tmp), exit=2, args=["--fail-on", "step_ms.median>nan"],
                named=named("fail-on", r"nan|not a number|number"), refuse_early=True)


@case("fail_on_inf", "cli", 9, "args", "--fail-on 'step_ms.median<inf'")
def _(tmp, fx):
    return Case(mi_run(tmp), exit=2, args=["--fail-on", "step_ms.median<inf"],
                named=named("fail-on", r"inf|finite|number"), refuse_early=True)


@case("ranks_huge_range", "cli", 9, "args", "--ranks 0-1000000000")
def _(tmp, fx):
    return Case(mi_run(tmp), exit=2, args=["--ranks", "0-1000000000"], named=named("--ranks", ""), refuse_early=True)


@case("jobs_1e9", "cli", 1, "args", "--jobs 1000000000 on a Kineto run (refused: at most 1024)")
def _(tmp, fx):
    root, _ = kin_run(tmp)
    return Case(root, exit=2, args=["--jobs", "1000000000"], named=named("--jobs", r"between"), refuse_early=True)


@case("baseline_junk", "cli", 9, "args", "--baseline a file of junk bytes")
def _(tmp, fx):
    base = tmp / "base.json"
    base.write_bytes(junk_bytes())
    return Case(mi_run(tmp), exit=2, args=["--baseline", str(base)], named=named("base.json", ""))


@case("baseline_wrong_shape", "cli", 6, "args", "--baseline a JSON list / metrics whose numbers are text and NaN")
def _(tmp, fx):
    base = tmp / "base.json"
    base.write_text('{"schema": 1, "summary": [1, 2], "facts": {"step_ms_median": "abc", "per_rank": [NaN]}}')
    return Case(mi_run(tmp), exit=(0, 2), args=["--baseline", str(base), "--fail-on", "step_ms.median>1.05*baseline"],
                named={0: None, 2: named("base.json", "")})


# ---- empty files, directories where files are expected, unreadable files


@case("mi_step_trace_empty", "mindinsight", 9, "mindinsight", "rank 1's step trace is an empty file")
def _(tmp, fx):
    run = mi_run(tmp)
    mi_file(run, "step_trace_raw_1_detail_time.csv").write_bytes(b"")
    return Case(run, exit=(0, 2), named=named("step_trace_raw_1_detail_time.csv", EMPTY))


@case("mi_profiler_info_empty", "mindinsight", 9, "mindinsight", "profiler_info_0.json is empty")
def _(tmp, fx):
    run = mi_run(tmp)
    mi_file(run, "profiler_info_0.json").write_bytes(b"")
    return Case(run, named=named("profiler_info_0.json", EMPTY))


@case("asc_comm_json_empty", "ascend", 9, "ascend", "communication.json is empty")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    asc_out(dirs[0], "communication.json").write_bytes(b"")
    return Case(root, named=named("communication.json", EMPTY))


@case("asc_metadata_empty", "ascend", 9, "ascend", "profiler_metadata.json is empty")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    (dirs[1] / "profiler_metadata.json").write_bytes(b"")
    return Case(root, named=named("profiler_metadata.json", EMPTY))


@case("kin_trace_empty", "kineto", 9, "kineto", "an empty rank2.pt.trace.json beside a valid run")
def _(tmp, fx):
    root, _ = kin_run(tmp)
    (root / "rank2.pt.trace.json").write_bytes(b"")
    return Case(root, named=named("rank2.pt.trace.json", EMPTY), check=ranks_are([0, 1]))


@case("mi_step_trace_is_dir", "mindinsight", 9, "mindinsight", "step_trace_raw_1_detail_time.csv is a directory")
def _(tmp, fx):
    run = mi_run(tmp)
    p = mi_file(run, "step_trace_raw_1_detail_time.csv")
    p.unlink()
    p.mkdir()
    return Case(run, exit=(0, 2), named=named("step_trace_raw_1_detail_time.csv", DIRECTORY))


@case("asc_step_trace_is_dir", "ascend", 9, "ascend", "step_trace_time.csv is a directory")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    p = asc_out(dirs[1], _ASC_STEP)
    p.unlink()
    p.mkdir()
    return Case(root, named=named(_ASC_STEP, DIRECTORY))


@case("kin_trace_is_dir", "kineto", 9, "kineto", "a directory named rank2.pt.trace.json beside a valid run")
def _(tmp, fx):
    root, _ = kin_run(tmp)
    (root / "rank2.pt.trace.json").mkdir()
    return Case(root, named=named("rank2.pt.trace.json", DIRECTORY), check=ranks_are([0, 1]))


@case("mi_hccl_json_is_dir", "mindinsight", 9, "mindinsight", "legacy layout whose hccl.json is a directory")
def _(tmp, fx):
    run = mi_run(tmp, layout="legacy")
    (run / "hccl.json").unlink()
    (run / "hccl.json").mkdir()
    return Case(run, exit=2, named=named("hccl.json", DIRECTORY + r"|rank table"))


@case("mi_step_trace_unreadable", "mindinsight", 9, "mindinsight", "rank 1's step trace cannot be read")
def _(tmp, fx):
    run = mi_run(tmp)
    make_unreadable(mi_file(run, "step_trace_raw_1_detail_time.csv"))
    return Case(run, exit=(0, 2), named=named("step_trace_raw_1_detail_time.csv", UNREAD))


@case("asc_kernel_details_unreadable", "ascend", 9, "ascend", "kernel_details.csv cannot be read")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    make_unreadable(asc_out(dirs[0], "kernel_details.csv"))
    return Case(root, named=named("kernel_details.csv", UNREAD))


@case("kin_trace_unreadable", "kineto", 9, "kineto", "rank 1's trace cannot be read")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    make_unreadable(traces[1])
    return Case(root, named=named(traces[1].name, UNREAD), check=ranks_are([0]))


# =========================================================================== controls: valid input, nothing named


# --------------------------------------------------------------------------- issue 29: hostile input, round two

SPECIAL = r"FIFO|named pipe|not a regular file"


@case("kin_fifo_named_like_a_trace", "detection", 9, "kineto",
      "a FIFO named rank8.pt.trace.json beside a valid run: opening it would wait for a writer forever")
def _(tmp, fx):
    root, _traces = kin_run(tmp)
    os.mkfifo(root / "rank8.pt.trace.json")
    return Case(root, named=named("rank8.pt.trace.json", SPECIAL),
                check=all_of(ranks_are([0, 1]), same_as_clean("kineto")))


@case("kin_fifo_alone", "detection", 9, "kineto", "a directory holding only a FIFO named like a trace")
def _(tmp, fx):
    root = tmp / "only_fifo"
    root.mkdir()
    os.mkfifo(root / "rank0.pt.trace.json")
    return Case(root, exit=2, named=named("rank0.pt.trace.json", SPECIAL))


@case("mi_fifo_named_like_a_rank_file", "detection", 9, "mindinsight",
      "a FIFO named step_trace_raw_7_detail_time.csv beside a valid MindInsight run")
def _(tmp, fx):
    run = mi_run(tmp)
    os.mkfifo(mi_file(run, "step_trace_raw_7_detail_time.csv"))
    return Case(run, named=named("step_trace_raw_7_detail_time.csv", SPECIAL),
                check=all_of(ranks_are([0, 1]), same_as_clean("mindinsight")))


@case("asc_fifo_in_a_rank_dir", "ascend", 9, "ascend", "kernel_details.csv of rank 1 replaced by a FIFO")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    k = asc_out(dirs[1], "kernel_details.csv")
    k.unlink()
    os.mkfifo(k)
    return Case(root, named=named("kernel_details.csv", SPECIAL))


def _gzip_with_spaces(src: Path, dst: Path, spaces: int) -> None:
    """``src`` gzipped to ``dst`` with ``spaces`` bytes of spaces after ``"traceEvents": [`` (valid JSON)."""
    text = src.read_bytes()
    at = text.index(b"[", text.index(b'"traceEvents"')) + 1
    block = b" " * (1 << 20)
    with gzip.open(dst, "wb", compresslevel=6) as fh:
        fh.write(text[:at])
        for _ in range(spaces // len(block)):
            fh.write(block)
        fh.write(text[at:])


@case("kin_whitespace_bomb_gz", "kineto", 1, "kineto",
      "rank 1's trace gzipped with 256 MiB of spaces inside traceEvents (a ~260 KB file; valid JSON)")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    _gzip_with_spaces(traces[1], traces[1].with_name(traces[1].name + ".gz"), 256 << 20)
    traces[1].unlink()
    return Case(root, check=all_of(ranks_are([0, 1]), same_as_clean("kineto")))


@case("kin_trace_events_key_twice", "kineto", 3, "kineto",
      "rank 1's trace with a second top-level \"traceEvents\" (its first 50 events) after the first")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    text = traces[1].read_text()
    events = json.loads(text)["traceEvents"][:50]
    traces[1].write_text(text.rstrip()[:-1] + ', "traceEvents": ' + json.dumps(events) + "}")
    return Case(root, named=named(traces[1].name, r"traceEvents.{0,20}twice|twice"), check=ranks_are([0]))


@case("asc_output_folder_empty", "ascend", 3, "ascend", "rank 1's ASCEND_PROFILER_OUTPUT/ emptied")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    out = dirs[1] / "ASCEND_PROFILER_OUTPUT"
    shutil.rmtree(out)
    out.mkdir()
    return Case(root, named=named("ASCEND_PROFILER_OUTPUT", EMPTY))


@case("asc_every_output_folder_empty", "ascend", 9, "ascend", "every ASCEND_PROFILER_OUTPUT/ emptied")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    for d in dirs:
        shutil.rmtree(d / "ASCEND_PROFILER_OUTPUT")
        (d / "ASCEND_PROFILER_OUTPUT").mkdir()
    return Case(root, exit=2, named=named(None, r"ASCEND_PROFILER_OUTPUT.{0,20}empty"))


@case("kin_trace_too_deep", "detection", 9, "kineto", "the only trace 30 directories below the run")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    deep = root.joinpath(*[f"d{i}" for i in range(30)])
    deep.mkdir(parents=True)
    for t in traces:
        t.rename(deep / t.name)
    return Case(root, exit=2, named=named(None, r"deeper than \d+ (directory )?levels"))


@case("cli_comm_pattern_backtracking", "cli", 1, "kineto",
      "--comm-pattern '(a+)+$' (exponential backtracking on a name of a's) on a run with such a kernel name")
def _(tmp, fx):
    root, _traces = kin_run(tmp)
    return Case(root, args=["--comm-pattern", "(a+)+$"], exit=2, named=named(None, r"comm-pattern.*exponential"))


@case("mi_run_and_file_names_not_utf8", "detection", 3, "mindinsight",
      "a MindInsight run in a directory named b'mi_\\xff\\xfe_run' holding a stray b'step_trace_raw_\\xff_...' file")
def _(tmp, fx):
    run = mi_run(tmp)
    odd = Path(os.fsdecode(bytes(tmp) + b"/mi_\xff\xfe_run"))
    run.rename(odd)
    Path(os.fsdecode(bytes(odd / "profiler") + b"/step_trace_raw_\xff_detail_time.csv")).write_bytes(b"x\n")

    def strict_utf8(doc, html):
        raw = json.dumps(doc, ensure_ascii=False)
        return "a lone surrogate in the metrics" if any(0xD800 <= ord(c) <= 0xDFFF for c in raw) else None
    return Case(odd, named=named(None, r"not UTF-8"), check=all_of(strict_utf8, same_as_clean("mindinsight")))


@case("kin_ts_of_5000_digits", "kineto", 1, "kineto", "one kernel's ts written as an integer of 5,000 digits")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    text = traces[1].read_text()
    m = re.compile(r'"ts":\s*([0-9.]+)').search(text, text.index('"cat": "kernel"'))
    traces[1].write_text(text[:m.start(1)] + "9" * 5000 + text[m.end(1):])
    return Case(root, named=named(traces[1].name, r"1 event skipped.*'ts'"), check=ranks_are([0, 1]))


@case("mi_host_mapping_two_ips_one_name", "mindinsight", 4, "mindinsight",
      "host_ips_mapping.txt maps both hosts' IPs to the name host-1 (two hosts, legacy layout)")
def _(tmp, fx):
    run = mi_run(tmp, layout="legacy", hosts=2)
    (run / "host_ips_mapping.txt").write_text("10.0.0.1 host-1\n10.0.0.2 host-1\n")
    return Case(run, exit=2, named=named("host_ips_mapping.txt", r"two IPs"))  # no host folder can be placed


@case("kin_kernels_written_twice", "kineto", 3, "kineto",
      "rank 1's GPU kernels each written twice (a merged trace): repeats on one stream")
def _(tmp, fx):
    root, traces = kin_run(tmp)
    doc = json.loads(traces[1].read_text())
    doc["traceEvents"] += [dict(e) for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    traces[1].write_text(json.dumps(doc))
    return Case(root, named=named(None, r"written twice on one stream"),
                check=all_of(ranks_are([0, 1]), same_as_clean("kineto")))


@case("asc_kernels_written_twice", "ascend", 3, "ascend",
      "rank 1's kernel_details.csv lists every kernel twice (a merged export): repeats on one stream")
def _(tmp, fx):
    root, dirs = asc_run(tmp)
    f = asc_out(dirs[1], "kernel_details.csv")
    head, *rows = f.read_text().splitlines(keepends=True)
    f.write_text(head + "".join(r for r in rows for _ in (0, 1)))
    return Case(root, named=named(None, r"kernels: \d+ items written twice on one stream"),
                check=all_of(ranks_are([0, 1]), same_as_clean("ascend")))


@case("control_mindinsight", "mindinsight", 3, "mindinsight", "a valid generated MindInsight run (control)")
def _(tmp, fx):
    return Case(mi_run(tmp), not_named=r".")


@case("control_ascend", "ascend", 3, "ascend", "a valid generated Ascend run (control)")
def _(tmp, fx):
    return Case(asc_run(tmp)[0], not_named=r".")


@case("control_kineto", "kineto", 3, "kineto", "a valid generated Kineto run (control)")
def _(tmp, fx):
    return Case(kin_run(tmp)[0], not_named=r".")


__all__ = ["CASES", "CLASSES", "OWNERS", "Case", "CaseDef", "build_case", "named"]
