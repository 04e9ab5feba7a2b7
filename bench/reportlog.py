"""pytest plugin (scratch, not committed): log every build_report: input digest, CPU, test."""
import os, time, json, hashlib
from pathlib import Path
import pytest
_cur = {"id": None}
LOG = os.environ.get("RLOG", "/tmp/rlog/log.jsonl")

def _digest(p):
    p = Path(p)
    if not p.exists():
        return str(p)
    h = hashlib.sha1()
    try:
        files = sorted(x for x in p.rglob("*") if x.is_file()) if p.is_dir() else [p]
        for f in files[:5000]:
            h.update(f"{f.relative_to(p) if p.is_dir() else f.name}:{f.stat().st_size}".encode())
    except OSError:
        return str(p)
    return h.hexdigest()[:12]

def pytest_configure(config):
    from reportgen import cli
    orig = cli.build_report
    def wrapped(run_arg, *a, **k):
        t = time.process_time(); w = time.perf_counter()
        try:
            return orig(run_arg, *a, **k)
        finally:
            rec = {"test": _cur["id"], "pid": os.getpid(), "arg": str(run_arg), "dig": _digest(run_arg),
                   "cpu": time.process_time() - t, "wall": time.perf_counter() - w,
                   "static": k.get("static"), "opts": sorted((k.get("options") or {}).keys())}
            with open(LOG, "a") as f:
                f.write(json.dumps(rec) + "\n")
    cli.build_report = wrapped

@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    _cur["id"] = item.nodeid
