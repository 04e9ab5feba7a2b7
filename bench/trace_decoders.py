"""Benchmark: ways of decoding an Ascend trace_view.json into reportgen's trace tables.

Usage:  python bench/trace_decoders.py [--mb 200] [--shared ../shared]

Runs every method in its own subprocess (so peak RSS is per method, measured with
``resource.getrusage``) on:
  * the largest real trace_view.json under <shared>/fixtures (REPORTGEN_SHARED overrides <shared>),
  * a synthetic trace of about --mb MB written to a temp dir: the real torch_npu Level2 trace repeated
    with shifted timestamps, laid out like torch_npu does it at scale (all Python-layer events first,
    then the metadata, then the CANN/NPU events), so nothing can be dropped before the metadata arrives.
Every method ends with the same tables; the script checks that they agree.

Methods:
  stream-orjson   reportgen.readers.ascend_trace.read_trace_view (64 KiB chunks, one orjson.loads per chunk)
  stream-orjson-16K / -1M / -4M   the same with other chunk sizes
  stream-json     the same with the standard json module (what runs when orjson is not installed)
  raw_decode      1 MiB chunks of text, json.JSONDecoder().raw_decode one event at a time
  pid-prefilter   raw_decode, but an event's "pid": is read from the text first and events of
                  processes already known to be unused are skipped by scanning to the next '}, {' candidate
  json.load       whole file with json.load (not bounded)
  orjson.loads    whole file with orjson.loads (not bounded)
  (import only)   the interpreter + pandas + reportgen import, the RSS floor of every method
"""

from __future__ import annotations

import argparse
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
sys.path.insert(0, str(REPO))

METHODS = ["(import only)", "stream-orjson", "stream-orjson-16K", "stream-orjson-1M", "stream-orjson-4M",
           "stream-json", "raw_decode", "pid-prefilter", "json.load", "orjson.loads"]


# ------------------------------------------------------------------------------------------------
# Methods (run in a child process)

def _summary(tables) -> dict:
    return {name: [len(df), round(float(df["start_ms"].sum()), 3)] for name, df in sorted(tables.items())}


def _raw_decode_batches(path, prefilter: bool):
    """Per-event decoding with json raw_decode; optionally skip events of unused pids unparsed."""
    from reportgen.readers import ascend_trace as at

    dec = json.JSONDecoder()
    raw = dec.raw_decode
    ws = " \t\r\n,"
    pid_re = re.compile(r'"pid"\s*:\s*(-?\d+)')
    used = at._USED_PROCESSES
    skip: set[int] = set()
    with open(path, "r", encoding="utf-8") as fh:
        buf = fh.read(1 << 20)
        pos = buf.index("[") + 1
        eof = False
        batch: list = []
        while True:
            n = len(buf)
            while pos < n and buf[pos] in ws:
                pos += 1
            if pos < n and buf[pos] == "]":
                break
            if prefilter and pos < n:
                # Pre-filter: read the pid as text; if that process is known to be unused and the event
                # is not a step marker or metadata, jump to the next '}, {' candidate and check that the
                # jump did not land inside a string (even number of unescaped quotes in the skipped text).
                m = pid_re.search(buf, pos, min(n, pos + 400))
                if m and int(m.group(1)) in skip:
                    j = buf.find("}, {", pos)
                    if j > 0:
                        piece = buf[pos:j + 1]
                        if ("ProfilerStep#" not in piece and '"M"' not in piece and
                                (piece.count('"') - piece.count('\\"')) % 2 == 0 and "\\\\" not in piece):
                            pos = j + 2
                            continue
            try:
                ev, end = raw(buf, pos)
            except json.JSONDecodeError:
                if eof:
                    break
                more = fh.read(1 << 20)
                eof = not more
                buf = buf[pos:] + more
                pos = 0
                continue
            pos = end
            if prefilter and ev.get("ph") == "M" and ev.get("name") == "process_name":
                if ev.get("args", {}).get("name") not in used:
                    skip.add(ev.get("pid"))
            batch.append(ev)
            if len(batch) >= 4096:
                yield batch
                batch = []
        if batch:
            yield batch


def run_method(method: str, path: str, repeat: int) -> dict:
    from reportgen.readers import ascend_trace as at

    best = None
    tables = {}
    for _ in range(repeat):
        problems: list = []
        t0 = time.perf_counter()
        if method == "(import only)":
            tables = {}
        elif method.startswith("stream-orjson"):
            size = method.rpartition("-")[2]
            if size.endswith("K"):
                at.CHUNK = int(size[:-1]) << 10
            elif size.endswith("M"):
                at.CHUNK = int(size[:-1]) << 20
            tables = at.read_trace_view(Path(path), 0, problems)
        elif method == "stream-json":
            at._orjson = None
            tables = at.read_trace_view(Path(path), 0, problems)
        elif method in ("raw_decode", "pid-prefilter"):
            tables = at.collect_tables(_raw_decode_batches(path, method == "pid-prefilter"), 0, problems, path)
        elif method == "json.load":
            with open(path, "rb") as fh:
                events = json.load(fh)
            tables = at.collect_tables([events], 0, problems, path)
            del events
        elif method == "orjson.loads":  # a peer's whole-file decoder, not a reportgen dependency
            try:
                import orjson
            except ImportError:
                raise SystemExit("orjson.loads: pip install orjson to measure this peer") from None
            with open(path, "rb") as fh:
                events = orjson.loads(fh.read())
            tables = at.collect_tables([events], 0, problems, path)
            del events
        else:
            raise SystemExit(f"unknown method {method}")
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    hwm_mb = None
    try:  # the peak of this process image alone (Linux); ru_maxrss also counts the parent at fork
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                hwm_mb = int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return {"wall_s": best, "rss_mb": rss_mb, "hwm_mb": hwm_mb, "summary": _summary(tables), "problems": problems}


# ------------------------------------------------------------------------------------------------
# Inputs

def shared_root(arg: str | None) -> Path:
    return Path(arg or os.environ.get("REPORTGEN_SHARED") or (REPO.parent / "shared"))


def largest_trace(shared: Path) -> Path:
    files = sorted((shared / "fixtures").rglob("trace_view.json"), key=lambda p: p.stat().st_size)
    if not files:
        raise SystemExit(f"no trace_view.json under {shared / 'fixtures'}")
    return files[-1]


_TS = re.compile(r'"ts": "(\d+)\.(\d{3})"')
_STEP = re.compile(r"ProfilerStep#(\d+)")


def write_synthetic(base: Path, out: Path, target_mb: float) -> int:
    """Repeat ``base`` (a torch_npu trace) until about target_mb; returns the number of events."""
    events = json.loads(base.read_bytes())
    meta = [e for e in events if e.get("ph") == "M"]
    names = {e["pid"]: e["args"]["name"] for e in meta if e.get("name") == "process_name"}
    python = [e for e in events if e.get("ph") != "M" and names.get(e.get("pid")) == "Python"]
    other = [e for e in events if e.get("ph") != "M" and names.get(e.get("pid")) != "Python"]
    ts = [float(e["ts"]) for e in events if "ts" in e]
    period_ns = int((max(ts) - min(ts) + 1000.0) * 1000)
    py_text = json.dumps(python)[1:-1]
    other_text = json.dumps(other)[1:-1]
    reps = max(1, int(target_mb * 1e6 / (len(py_text) + len(other_text))))

    def shifted(text: str, k: int) -> str:
        shift = k * period_ns

        def ts_sub(m):
            ns = int(m.group(1)) * 1000 + int(m.group(2)) + shift
            return f'"ts": "{ns // 1000}.{ns % 1000:03d}"'
        text = _TS.sub(ts_sub, text)
        return _STEP.sub(lambda m: f"ProfilerStep#{int(m.group(1)) + k}", text)

    def parts():
        for k in range(reps):
            yield shifted(py_text, k)
        yield json.dumps(meta)[1:-1]
        for k in range(reps):
            yield shifted(other_text, k)

    with open(out, "w", encoding="utf-8") as fh:
        fh.write("[")
        for i, part in enumerate(parts()):
            fh.write(", " + part if i else part)
        fh.write("]")
    return reps * (len(python) + len(other)) + len(meta)


# ------------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=float, default=200.0, help="size of the synthetic trace (MB)")
    ap.add_argument("--shared", help="the shared/ folder (default: $REPORTGEN_SHARED or ../shared)")
    ap.add_argument("--one", nargs=3, metavar=("METHOD", "FILE", "REPEAT"), help=argparse.SUPPRESS)
    ap.add_argument("--write", nargs=3, metavar=("BASE", "OUT", "MB"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        method, path, repeat = args.one
        print(json.dumps(run_method(method, path, int(repeat))))
        return 0
    if args.write:
        base, out, mb = args.write
        print(write_synthetic(Path(base), Path(out), float(mb)))
        return 0

    real = largest_trace(shared_root(args.shared))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="trace_bench_") as tmp:
        synth = Path(tmp) / "trace_view.json"
        # Written by a child process: ru_maxrss of a child starts at its parent's RSS at fork time
        # (Linux keeps the high-water mark across fork+exec), so this process must stay small.
        n_events = int(subprocess.run([sys.executable, __file__, "--write", str(real), str(synth), str(args.mb)],
                                      capture_output=True, text=True, check=True).stdout)
        print(f"synthetic: {synth.stat().st_size / 1e6:.1f} MB, {n_events} events "
              f"(written in {time.perf_counter() - t0:.1f} s)")
        print(f"real:      {real} ({real.stat().st_size / 1e6:.2f} MB)\n")
        print(f"{'input':<10} {'method':<18} {'wall s':>8} {'ms/MB':>8} {'MB/s':>7} {'peak RSS MB':>12} {'VmHWM MB':>9}  tables")
        for label, path, repeat in (("real", real, 5), ("synthetic", synth, 1)):
            size_mb = path.stat().st_size / 1e6
            reference = None
            for method in METHODS:
                if method == "(import only)" and label != "real":
                    continue
                cp = subprocess.run([sys.executable, __file__, "--one", method, str(path), str(repeat)],
                                    capture_output=True, text=True)
                if cp.returncode != 0:
                    print(f"{label:<10} {method:<18} FAILED: {cp.stderr.strip().splitlines()[-1:]}")
                    continue
                r = json.loads(cp.stdout)
                agree = ""
                if method != "(import only)":
                    if reference is None:
                        reference = r["summary"]
                    agree = "same" if r["summary"] == reference else f"DIFFERENT {r['summary']}"
                    if r["problems"]:
                        agree += f" problems: {r['problems']}"
                if method == "(import only)":
                    print(f"{label:<10} {method:<18} {'':>8} {'':>8} {'':>7} {r['rss_mb']:>12.0f} {r['hwm_mb'] or 0:>9.0f}")
                    continue
                print(f"{label:<10} {method:<18} {r['wall_s']:>8.3f} {1000 * r['wall_s'] / size_mb:>8.1f} "
                      f"{size_mb / r['wall_s']:>7.0f} {r['rss_mb']:>12.0f} {r['hwm_mb'] or 0:>9.0f}  {agree}")
            print(f"{'':<10} tables: {reference}")
    print(f"\ntotal {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
