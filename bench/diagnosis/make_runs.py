#!/usr/bin/env python
"""Make the diagnosis benchmark's runs (bench/diagnosis/runs.py) with train_diag.py: real PyTorch CPU + gloo
traces, one folder per run with ``traces/`` (gzip Kineto JSON per rank) and ``truth.json``.

    python bench/diagnosis/make_runs.py OUT [NAME ...] [--steps 7 --active 4]

Needs torch (``pip install torch==2.13.0`` takes the CPU build on our machines). Several minutes on 2 cores.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from runs import RUNS  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--steps", type=int, default=7)
    ap.add_argument("--active", type=int, default=4)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--port", type=int, default=29600)
    a = ap.parse_args()
    names = a.names or list(RUNS)
    for i, name in enumerate(names):
        spec = RUNS[name]
        dest = os.path.join(a.out, name)
        if os.path.exists(os.path.join(dest, "truth.json")):
            print(f"{name}: exists, skipped")
            continue
        shutil.rmtree(dest, ignore_errors=True)
        args = ["--steps", str(a.steps), "--active", str(a.active), "--layers", str(a.layers)] + list(spec["args"])
        cmd = [sys.executable, os.path.join(HERE, "train_diag.py"), *args, "--gzip", "--worker-name", "rank",
               "--port", str(a.port + i), "--out", dest]
        t0 = time.time()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(os.path.join(dest, "truth.json"), "w") as f:
            json.dump({"run": name, "args": args, "truth": spec["truth"]}, f, indent=1)
        print(f"{name}: {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
