#!/usr/bin/env python
"""A compact copy of a benchmark run for the test suite (tests/data/diagnosis): the same events with the same
times, without the arguments the diagnosis does not read (strides, autograd ids, event indices, the shapes of
compute ops: FLOP estimates of these copies are not meaningful), and without the allocator's [memory] events
unless ``--memory``; gzip level 9.

    python bench/diagnosis/trim.py RUN_DIR OUT_DIR [--memory]
"""
import argparse
import gzip
import json
import os
import shutil

DROP_ARGS = ("Input Strides", "Ev Idx", "Record function id", "Fwd thread id", "Sequence number", "External id")


def trim(src: str, dst: str, memory: bool) -> None:
    with gzip.open(src, "rt") as f:
        d = json.load(f)
    ev = []
    for e in d["traceEvents"]:
        if not memory and e.get("name") == "[memory]":
            continue
        a = e.get("args")
        if isinstance(a, dict):
            for k in DROP_ARGS:
                a.pop(k, None)
            name = str(e.get("name", ""))
            if not name.startswith(("c10d::", "gloo:", "record_param_comms")):
                # shapes of the compute ops only feed FLOP estimates, which the diagnosis does not read
                for k in ("Concrete Inputs", "Input Dims", "Input type"):
                    a.pop(k, None)
        ev.append(e)
    d["traceEvents"] = ev
    with gzip.open(dst, "wt", compresslevel=9) as f:
        json.dump(d, f, separators=(",", ":"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("run")
    ap.add_argument("out")
    ap.add_argument("--memory", action="store_true")
    a = ap.parse_args()
    os.makedirs(os.path.join(a.out, "traces"), exist_ok=True)
    for name in sorted(os.listdir(os.path.join(a.run, "traces"))):
        trim(os.path.join(a.run, "traces", name), os.path.join(a.out, "traces", name), a.memory)
    if os.path.exists(os.path.join(a.run, "truth.json")):
        shutil.copy(os.path.join(a.run, "truth.json"), os.path.join(a.out, "truth.json"))


if __name__ == "__main__":
    main()
