"""Benchmark: ways of decoding one PyTorch Kineto trace into reportgen's tables (reportgen/readers/kineto_decode.py).

Usage:  python bench/kineto_decoders.py [--mb 300] [--shared ../shared] [--quick] [--methods a,b,...]
                                       [--baseline-tree TREE]

Every method runs in its own subprocess (``python this_file --one METHOD FILE REPEAT``) and ends with
the same tables (the script checks that they agree). Reported per method: wall seconds (best of the
repeats, decoding only, after imports), CPU seconds (process time of the same run), MB/s of JSON text by wall
and by CPU time, the ratio of the CPU MB/s to the parser's limit (``limit-whole``, same file, same run), and the
peak RSS of that child. On a shared machine the CPU columns are the ones to compare.
Peak RSS is the child's ``VmHWM`` (Linux, the high-water mark of the exec'd process image);
``ru_maxrss`` is printed too but a child's ru_maxrss can start at its parent's RSS at fork time, so
this parent stays small (no pandas, the synthetic file is written by another child).

Inputs:
  * the largest real Kineto fixture under <shared>/fixtures/kineto (by JSON size; gunzipped to a temp
    .json first), and the largest one with GPU kernels if that is another file;
  * a synthetic trace of about --mb MB: the events of HTA's ``df_index_resolver`` trace (V100, NCCL
    kernels, 28k ``[memory]`` events, 5 ProfilerSteps, 216k events, 54 MB) repeated with shifted ``ts``
    and step numbers, metadata before and after ``traceEvents`` as Kineto writes it; also gzipped
    (level 1) to time the ``.json.gz`` path.

Methods:
  limit-whole     the parser's limit: the whole file decoded by msgspec into the same Structs as stream-msgspec
                  (``list[_Ev]``, args raw, float_hook=str), nothing collected (not bounded: all events alive)
  limit-chunks    the same, over the chunks stream-msgspec reads (its reader and cuts), nothing collected
  stream-msgspec[-64K|-1M|-4M]  kineto_decode with the msgspec backend (default chunk 256 KiB): chunk
                  decoded into Structs keeping ph/cat/name/ts/dur/pid/tid, ``args`` left as msgspec.Raw and
                  decoded only for kept events
  stream-json     kineto_decode with the stdlib json backend (what runs with neither installed)
  stream-simdjson pysimdjson: each chunk parsed by simdjson.Parser, fields read lazily from its proxies
  ijson           ijson.items(fh, "traceEvents.item", use_float=True) (yajl2_c backend), batches of 4096
                  (events only; the metadata would need a second pass)
  json.load       whole file with json.load, then the same collector (not bounded; what HTA does)
  msgspec-whole   whole file decoded by msgspec into the same Structs (not bounded: every Struct and the
                  whole input stay alive)
  (import only)   the interpreter + pandas + numpy + the decoder module: the RSS floor of every method
  stream-msgspec (baseline)  stream-msgspec of another checkout (``--baseline-tree``), before/after in one run
A method whose package is missing is reported as "not installed".
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# orjson is not a method any more: it has no hook for float literals, so it cannot give exact times
# (reportgen/readers/kineto_decode.py module doc); every method here keeps float literals as text.
METHODS = ["(import only)", "limit-whole", "limit-chunks", "stream-msgspec", "stream-msgspec-64K", "stream-msgspec-1M", "stream-msgspec-4M",
           "stream-json", "stream-simdjson", "ijson", "json.load", "msgspec-whole"]
QUICK = ["(import only)", "limit-whole", "limit-chunks", "stream-msgspec", "stream-json", "stream-simdjson", "ijson", "json.load"]
GZ_METHODS = ["stream-msgspec", "stream-json"]


# ------------------------------------------------------------------------------------------------
# Methods (run in a child process)

def _summary(d) -> dict:
    out = {}
    for name, df in sorted(d.tables.items()):
        out[name] = [len(df), int(df["ts_ns"].min()), int(df["ts_ns"].max()), int((df["ts_ns"] - df["ts_ns"].min()).sum())]
        if name == "collectives":
            out[name].append(round(float(df["in_bytes"].sum()), 1))
    return out


def _sizes(text: str) -> int:
    m = re.search(r"(\d+)([KM])$", text)
    if not m:
        return 0
    return int(m.group(1)) << (10 if m.group(2) == "K" else 20)


def _simdjson_backend():
    import simdjson

    from reportgen.readers import kineto_decode as kd

    class LazyEv:
        __slots__ = ("o",)

        def __init__(self, o):
            self.o = o

        ph = property(lambda self: self.o.get("ph"))
        cat = property(lambda self: self.o.get("cat"))
        name = property(lambda self: self.o.get("name"))
        ts = property(lambda self: self.o.get("ts"))
        dur = property(lambda self: self.o.get("dur"))
        pid = property(lambda self: self.o.get("pid"))
        tid = property(lambda self: self.o.get("tid"))

        @property
        def args(self):
            a = self.o.get("args")
            return a.as_dict() if isinstance(a, simdjson.Object) else (a if isinstance(a, dict) else {})

    def run(piece: bytes) -> list:
        try:  # a new parser per chunk: a parser cannot be reused while proxies of its last document live
            doc = simdjson.Parser().parse(piece)
        except ValueError as exc:
            raise kd._RunError(None) from exc
        return [LazyEv(o) if isinstance(o, simdjson.Object) else None for o in doc]

    return run


def _whole(path: str, loader) -> tuple:
    """Whole-file decode; returns (DecodedTrace, problems) built by the same collector."""
    from reportgen.readers import kineto_decode as kd

    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        doc = loader(fh)
    problems: list = []
    col = kd._Collector(kd._comm_regex(kd.DEFAULT_COMM_PATTERNS, path, problems))
    if isinstance(doc, dict):
        events = doc.get("traceEvents", [])
        meta = {k: v for k, v in doc.items() if k in kd.META_KEYS}
    else:  # msgspec Struct
        events, meta = doc.traceEvents, {}
    del doc
    col.feed(events if not events or not isinstance(events[0], dict) else kd._wrap(events))
    del events
    return kd.DecodedTrace(kd._finish_meta(meta, path, problems), col.columns()), problems


def run_method(method: str, path: str, repeat: int) -> dict:
    import numpy  # import cost is outside the timing, as for every method
    import pandas
    del numpy, pandas

    from reportgen.readers import kineto_decode as kd

    best = None
    d = None
    problems: list = []
    best_cpu = None
    for _ in range(repeat):
        problems = []
        t0 = time.perf_counter()
        c0 = time.process_time()
        if method == "(import only)":
            d = None
        elif method == "limit-whole":
            import msgspec

            Top = msgspec.defstruct("Top", [("traceEvents", list[kd._Ev], [])])
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as fh:
                doc = msgspec.json.Decoder(Top, float_hook=str).decode(fh.read())
            del doc
            d = None
        elif method == "limit-chunks":
            fh, raw = kd._open(Path(path))
            try:
                r = kd._Reader(fh, kd.CHUNK["msgspec"])
                kd._read_document(r, lambda items, keys=None: None, {}, {"count": 0, "in_events": False},
                                  kd.BACKENDS["msgspec"])
            finally:
                fh.close()
                if raw is not None:
                    raw.close()
            d = None
        elif method.startswith("stream-"):
            backend = method.split("-")[1]
            chunk = _sizes(method) or None
            if backend == "simdjson":
                kd.BACKENDS["simdjson"] = _simdjson_backend()
                chunk = chunk or (1 << 20)
            elif backend not in kd.BACKENDS:
                return {"missing": backend}
            d = kd._decode(Path(path), problems, backend=backend, chunk=chunk)
        elif method == "ijson":
            import ijson

            opener = gzip.open if path.endswith(".gz") else open
            col = kd._Collector(kd._comm_regex(kd.DEFAULT_COMM_PATTERNS, path, problems))
            with opener(path, "rb") as fh:
                batch = []
                for ev in ijson.items(fh, "traceEvents.item"):  # numbers as Decimal: exact
                    batch.append(ev)
                    if len(batch) >= 4096:
                        col.feed(kd._wrap(batch))
                        batch = []
                col.feed(kd._wrap(batch))
            d = kd.DecodedTrace({}, col.columns())
        elif method == "json.load":
            d, problems = _whole(path, lambda fh: json.load(fh, parse_float=str))
        elif method == "msgspec-whole":
            import msgspec

            Top = msgspec.defstruct("Top", [("traceEvents", list[kd._Ev], [])])
            d, problems = _whole(path, lambda fh: msgspec.json.Decoder(Top, float_hook=str).decode(fh.read()))
        else:
            raise SystemExit(f"unknown method {method}")
        dt = time.perf_counter() - t0
        dc = time.process_time() - c0
        best = dt if best is None else min(best, dt)
        best_cpu = dc if best_cpu is None else min(best_cpu, dc)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    hwm_mb = None
    try:  # the peak of this process image alone (Linux)
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                hwm_mb = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return {"wall_s": best, "cpu_s": best_cpu, "rss_mb": rss_mb, "hwm_mb": hwm_mb, "summary": _summary(d) if d else {},
            "problems": problems}


# ------------------------------------------------------------------------------------------------
# Inputs

def shared_root(arg: str | None) -> Path:
    return Path(arg or os.environ.get("REPORTGEN_SHARED") or (REPO.parent / "shared"))


def _json_size(p: Path) -> int:
    if p.name.endswith(".gz"):
        n = 0
        with gzip.open(p, "rb") as fh:
            while True:
                b = fh.read(1 << 20)
                if not b:
                    return n
                n += len(b)
    return p.stat().st_size


def _has_kernels(p: Path) -> bool:
    opener = gzip.open if p.name.endswith(".gz") else open
    with opener(p, "rb") as fh:
        while True:
            b = fh.read(1 << 22)
            if not b:
                return False
            if b'"cat": "kernel"' in b or b'"cat":"kernel"' in b:
                return True


def real_inputs(shared: Path) -> list[Path]:
    root = shared / "fixtures" / "kineto"
    files = [p for p in root.rglob("*") if p.is_file() and re.search(r"\.json(\.gz)?$", p.name)
             and "execution_trace" not in str(p)]
    if not files:
        raise SystemExit(f"no Kineto traces under {root}")
    by_size = sorted(files, key=_json_size, reverse=True)
    chosen = [by_size[0]]
    for p in by_size[1:]:
        if _has_kernels(chosen[0]):
            break
        if _has_kernels(p):
            chosen.append(p)
            break
    return chosen


_TS = re.compile(rb'"ts": (\d+)')
_STEP = re.compile(rb"ProfilerStep#(\d+)")


def write_synthetic(base: Path, out: Path, target_mb: float) -> int:
    """Repeat ``base``'s events with shifted ts/steps until about target_mb; returns the event count."""
    with gzip.open(base, "rb") if base.name.endswith(".gz") else open(base, "rb") as fh:
        doc = json.load(fh)
    events = doc.pop("traceEvents")
    ts = [e["ts"] for e in events if isinstance(e.get("ts"), int)]
    period = max(ts) - min(ts) + 1000
    steps = [int(m) for e in events for m in re.findall(r"ProfilerStep#(\d+)", str(e.get("name", "")))]
    nsteps = (max(steps) - min(steps) + 1) if steps else 0
    text = json.dumps(events)[1:-1].encode()
    reps = max(1, round(target_mb * 1e6 / len(text)))
    head = {k: v for k, v in doc.items() if k != "traceName"}
    with open(out, "wb") as fh:
        fh.write(json.dumps(head)[:-1].encode() + b', "traceEvents": [')
        for k in range(reps):
            shift = k * period
            part = _TS.sub(lambda m: b'"ts": %d' % (int(m.group(1)) + shift), text) if k else text
            if k and nsteps:
                part = _STEP.sub(lambda m: b"ProfilerStep#%d" % (int(m.group(1)) + k * nsteps), part)
            fh.write(b", " + part if k else part)
        fh.write(b'], "traceName": "synthetic", "displayTimeUnit": "ms"}')
    with open(out, "rb") as src, gzip.open(str(out) + ".gz", "wb", compresslevel=1) as dst:
        while True:
            b = src.read(1 << 22)
            if not b:
                break
            dst.write(b)
    return reps * len(events)


# ------------------------------------------------------------------------------------------------

def _child(args: list[str], tree: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, REPORTGEN_BENCH_TREE=tree) if tree else None
    return subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=300.0, help="size of the synthetic trace (MB)")
    ap.add_argument("--shared", help="the shared/ folder (default: $REPORTGEN_SHARED or ../shared)")
    ap.add_argument("--quick", action="store_true", help="fewer methods (no chunk-size variants)")
    ap.add_argument("--methods", help="comma-separated subset of the methods")
    ap.add_argument("--baseline-tree", help="another checkout: its stream-msgspec is run too, as "
                    "'stream-msgspec (baseline)', right after this tree's")
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "FILE", "REPEAT"), help=argparse.SUPPRESS)
    ap.add_argument("--write", nargs=3, metavar=("BASE", "OUT", "MB"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        sys.path.insert(0, os.environ.get("REPORTGEN_BENCH_TREE") or str(REPO))
        method, path, repeat = args.one
        print(json.dumps(run_method(method, path, int(repeat))))
        return 0
    if args.write:
        base, out, mb = args.write
        print(write_synthetic(Path(base), Path(out), float(mb)))
        return 0

    methods = args.methods.split(",") if args.methods else (QUICK if args.quick else METHODS)
    if args.baseline_tree and "stream-msgspec" in methods:
        methods.insert(methods.index("stream-msgspec") + 1, "stream-msgspec (baseline)")
    shared = shared_root(args.shared)
    t0 = time.perf_counter()
    versions = _child(["--one", "(import only)", os.devnull, "1"])  # warms the import cache
    del versions
    pkgs = subprocess.run([sys.executable, "-c", (
        "import importlib.metadata as m\n"
        "for p in ('msgspec','orjson','pysimdjson','ijson','pandas'):\n"
        "    try: print(p, m.version(p))\n"
        "    except Exception: print(p, 'not installed')")], capture_output=True, text=True).stdout.split("\n")
    print(f"python {sys.version.split()[0]}; " + "; ".join(x for x in pkgs if x) + f"; {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="kineto_bench_") as tmp:
        inputs = []
        for p in real_inputs(shared):
            plain = Path(tmp) / (p.name[:-3] if p.name.endswith(".gz") else p.name)
            with (gzip.open(p, "rb") if p.name.endswith(".gz") else open(p, "rb")) as src, open(plain, "wb") as dst:
                while True:
                    b = src.read(1 << 22)
                    if not b:
                        break
                    dst.write(b)
            inputs.append((f"real {p.name[:28]}", plain, 3))
        base = shared / "fixtures/kineto/hta_tests_data/tests/data/df_index_resolver/df_index_resolver.json.gz"
        synth = Path(tmp) / "synthetic.pt.trace.json"
        cp = _child(["--write", str(base), str(synth), str(args.mb)])
        if cp.returncode != 0:
            raise SystemExit(f"could not write the synthetic trace: {cp.stderr.strip()[-400:]}")
        n_events = int(cp.stdout)
        print(f"synthetic: {synth.stat().st_size / 1e6:.1f} MB JSON ({Path(str(synth) + '.gz').stat().st_size / 1e6:.1f} MB"
              f" gzipped), {n_events} events, from {base.name} (written in {time.perf_counter() - t0:.1f} s)")
        for label, path, _ in inputs:
            print(f"{label}: {path.name} {path.stat().st_size / 1e6:.1f} MB JSON")
        inputs.append(("synthetic", synth, 1))
        inputs.append(("synthetic.gz", Path(str(synth) + ".gz"), 1))
        print()
        print(f"| {'input':<34} | {'method':<26} | {'wall s':>7} | {'CPU s':>6} | {'MB/s':>6} | {'CPU MB/s':>8} | "
              f"{'/ limit':>7} | {'peak RSS MB':>11} | {'ru_maxrss MB':>12} | tables |")
        print(f"|{'-' * 36}|{'-' * 28}|{'-' * 9}|{'-' * 8}|{'-' * 8}|{'-' * 10}|{'-' * 9}|{'-' * 13}|{'-' * 14}"
              "|--------|")
        reference = None
        for label, path, repeat in inputs:
            json_mb = (synth.stat().st_size if label == "synthetic.gz" else path.stat().st_size) / 1e6
            if label != "synthetic.gz":  # the .gz run must give the same tables as the plain synthetic file
                reference = None
                limit = None  # CPU MB/s of limit-whole on this input
            for method in methods:
                if label == "synthetic.gz" and method not in GZ_METHODS:
                    continue
                if method == "(import only)" and label.startswith("synthetic"):
                    continue
                tree = args.baseline_tree if method.endswith("(baseline)") else None
                cp = _child(["--one", method.split(" ")[0], str(path), str(repeat)], tree)
                if cp.returncode != 0:
                    err = (cp.stderr.strip().splitlines() or ["?"])[-1][:80]
                    print(f"| {label:<34} | {method:<26} | FAILED: {err} |")
                    continue
                r = json.loads(cp.stdout)
                if "missing" in r:
                    print(f"| {label:<34} | {method:<26} | not installed |")
                    continue
                hwm = r["hwm_mb"] or r["rss_mb"]
                if method == "(import only)":
                    print(f"| {label:<34} | {method:<26} | {'':>7} | {'':>6} | {'':>6} | {'':>8} | {'':>7} | "
                          f"{hwm:>11.0f} | {r['rss_mb']:>12.0f} | |")
                    continue
                cpu_mbs = json_mb / max(r["cpu_s"], 1e-9)
                if method == "limit-whole":
                    limit = cpu_mbs
                ratio = f"{cpu_mbs / limit:.2f}" if limit else ""
                if method.startswith("limit-"):
                    agree = "(none)"
                else:
                    if reference is None:
                        reference = r["summary"]
                    agree = "same" if r["summary"] == reference else "DIFFERENT"
                if r["problems"]:
                    agree += f" problems: {r['problems'][:2]}"
                print(f"| {label:<34} | {method:<26} | {r['wall_s']:>7.2f} | {r['cpu_s']:>6.2f} | "
                      f"{json_mb / r['wall_s']:>6.0f} | {cpu_mbs:>8.0f} | {ratio:>7} | "
                      f"{hwm:>11.0f} | {r['rss_mb']:>12.0f} | {agree} |")
                if agree.startswith("DIFFERENT"):
                    print(f"    {method}: {r['summary']}\n    reference: {reference}")
            print(f"    tables: {reference}")
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
