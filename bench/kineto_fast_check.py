"""Check: the Kineto decoder's fast path (columns, reportgen/readers/kineto_decode.py ``_feed_fast``) gives the
same tables, meta and problems as the per-event path, on every Kineto trace of the shared fixtures.

Usage:  PYTHONPATH=$PWD python bench/kineto_fast_check.py [--shared ../shared] [--baseline-tree TREE] [FILE...]

Each file is decoded three ways in this process: msgspec with the fast path, msgspec with the per-event path
(``kineto_decode._FAST = False``) and the stdlib json backend; with ``--baseline-tree`` also by that tree's
decoder (another checkout, in a subprocess). Prints one line per difference and a summary; exit 1 if any.
"""

from __future__ import annotations

import argparse
import os
import pickle
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def traces(shared: Path) -> list[Path]:
    roots = [shared / "fixtures" / "kineto"] + sorted((shared / "fixtures" / "generated").glob("torch_*"))
    out = []
    for root in roots:
        out += [p for p in root.rglob("*") if p.is_file() and re.search(r"\.json(\.gz)?$", p.name)
                and "execution_trace" not in p.name and not p.name.startswith("et_")]
    return sorted(out)


def decode(path: Path, fast: bool = True, backend: str | None = None):
    from reportgen.readers import kineto_decode as kd
    kd._FAST = fast
    problems: list = []
    d = kd._decode(path, problems, backend=backend)
    kd._FAST = True
    return d.meta, d.tables, problems


def diff(a, b) -> str | None:
    import pandas as pd
    ma, ta, pa = a
    mb, tb, pb = b
    if pa != pb:
        return f"problems differ: {pa[:3]} vs {pb[:3]}"
    if ma != mb:
        return "meta differs"
    if sorted(ta) != sorted(tb):
        return f"tables differ: {sorted(ta)} vs {sorted(tb)}"
    for k in ta:
        try:
            pd.testing.assert_frame_equal(ta[k], tb[k], check_exact=True)
        except AssertionError as exc:
            return f"table {k}: {str(exc).splitlines()[0:3]}"
    return None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=os.environ.get("REPORTGEN_SHARED") or str(REPO.parent / "shared"))
    ap.add_argument("--baseline-tree", help="another checkout whose decoder gives the reference (subprocess)")
    ap.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("files", nargs="*")
    args = ap.parse_args()
    if args.one:  # child: decode with this interpreter's reportgen, pickle to a file
        path, out = args.one
        with open(out, "wb") as fh:
            pickle.dump(decode(Path(path)), fh)
        return 0
    sys.path.insert(0, str(REPO))
    files = [Path(f) for f in args.files] or traces(Path(args.shared))
    bad = 0
    for p in files:
        fast = decode(p)
        ref = [("per-event", decode(p, fast=False)), ("json", decode(p, backend="json"))]
        if args.baseline_tree:
            with tempfile.NamedTemporaryFile(suffix=".pkl") as tmp:
                env = dict(os.environ, PYTHONPATH=args.baseline_tree)
                subprocess.run([sys.executable, __file__, "--one", str(p), tmp.name], env=env, check=True)
                with open(tmp.name, "rb") as fh:
                    ref.append(("baseline", pickle.load(fh)))
        for label, r in ref:
            d = diff(fast, r)
            if d:
                bad += 1
                print(f"DIFF {p} fast vs {label}: {d}")
    print(f"{len(files)} traces, {bad} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
