#!/usr/bin/env python
"""Diagnosis benchmark: does the report's first finding name the injected problem, at the right place, and do
clean runs stay quiet?

    python bench/diagnosis/make_runs.py RUNS_DIR      # once: real PyTorch CPU + gloo runs with ground truth
    python bench/diagnosis.py RUNS_DIR [NAME ...]      # [--keep DIR] to keep the reports

Per run: the first finding, whether the injected cause is named anywhere ("found"), by the first finding
("first"), the other findings (false positives, by severity). A finding names a cause through its ``cause``
block (kind, ranks, link, stage: reportgen/diagnosis.py); findings without one are matched by their rule id
(:data:`KIND_OF`). Ground truth: bench/diagnosis/runs.py.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

#: findings without a ``cause`` block: the kind of cause their rule names
KIND_OF = {"slow_device_compute": "compute", "slow_rank_spread": "compute", "slow_rank_vote": "compute",
           "group_slow_member": "compute", "slow_dataloader": "dataloader", "data_wait": "dataloader",
           "slow_input_wait": "dataloader", "slow_step_interval": "dataloader", "slow_preparing": "dataloader",
           "slow_link": "link", "slow_link_transit": "link", "comm_share": "overlap",
           "group_exposed_comm": "overlap", "stage_flops_imbalance": "stage", "pipeline_between_stage": "stage",
           "memory_imbalance": "memory", "memory_near_capacity": "memory"}


def cause_of(f: dict) -> dict:
    c = f.get("cause")
    if c:
        return c
    return {"kind": KIND_OF.get(f["id"]), "ranks": f.get("ranks") or [], "link": (f.get("links") or [None])[0],
            "stage": (f.get("evidence") or {}).get("stage")}


def matches(f: dict, truth: dict) -> bool:
    c = cause_of(f)
    if c.get("kind") != truth["cause"]:
        return False
    kind = truth["cause"]
    if kind == "overlap":
        return True
    if kind == "link":
        links = [list(x) for x in (f.get("links") or [])] + ([list(c["link"])] if c.get("link") else [])
        return list(truth["link"]) in links
    if kind == "stage":
        return c.get("stage") == truth["stage"]
    ranks = list(c.get("ranks") or [])
    return bool(ranks) and ranks[0] in truth["ranks"] and len(ranks) <= max(2, len(truth["ranks"]))


def report(run_dir: str, keep: str | None) -> dict:
    out = keep or tempfile.mkdtemp(prefix="diag-")
    name = os.path.basename(run_dir.rstrip("/"))
    js = os.path.join(out, f"{name}.json")
    subprocess.run([sys.executable, "-m", "reportgen", run_dir, "-o", os.path.join(out, f"{name}.html"),
                    "--json", js, "-q"], check=True)
    with open(js) as f:
        return json.load(f)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("runs")
    ap.add_argument("names", nargs="*")
    ap.add_argument("--keep")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args()
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
    names = a.names or sorted(d for d in os.listdir(a.runs) if os.path.exists(os.path.join(a.runs, d, "truth.json")))
    rows = []
    for name in names:
        with open(os.path.join(a.runs, name, "truth.json")) as f:
            truth = json.load(f)["truth"]
        m = report(os.path.join(a.runs, name), a.keep)
        fs = m.get("findings") or []
        sev = {s: sum(1 for f in fs if f["severity"] == s) for s in ("high", "medium", "low")}
        hit = [i for i, f in enumerate(fs) if truth and matches(f, truth)]
        first = fs[0] if fs else None
        fp = [f for i, f in enumerate(fs) if i not in hit[:1]]
        rows.append(dict(run=name, truth=truth, found=bool(hit), first=bool(hit) and hit[0] == 0,
                         first_id=(first["id"] + f" {first['severity']} " + str(cause_of(first).get("ranks") or
                                                                               cause_of(first).get("link") or ""))
                         if first else "-",
                         fp=len(fp), fp_high=sum(1 for f in fp if f["severity"] == "high"), sev=sev))
        if a.verbose:
            for f in fs:
                print(f"   {name}: {f['severity']:6s} {f['id']:24s} {cause_of(f)} {f['message'][:110]}")
    w = max(len(r["run"]) for r in rows)
    print(f"{'run':{w}s}  {'injected':28s} found first  {'first finding':40s} others (high)")
    for r in rows:
        t = r["truth"]
        inj = "clean" if not t else t["cause"] + " " + str(t.get("link") or t.get("stage") if t.get("link") or
                                                              t.get("stage") is not None else t.get("ranks"))
        print(f"{r['run']:{w}s}  {inj:28s} {('yes' if r['found'] else 'no') if t else '-':5s} "
              f"{('yes' if r['first'] else 'no') if t else '-':5s}  {r['first_id'][:40]:40s} {r['fp']} ({r['fp_high']})")
    inj = [r for r in rows if r["truth"]]
    clean = [r for r in rows if not r["truth"]]
    print()
    print(f"injected problem named at the right place: {sum(r['found'] for r in inj)} of {len(inj)}")
    print(f"... as the first finding:                  {sum(r['first'] for r in inj)} of {len(inj)}")
    print(f"findings on {len(clean)} clean runs: {sum(r['fp'] for r in clean)} "
          f"(high {sum(r['sev']['high'] for r in clean)}, medium {sum(r['sev']['medium'] for r in clean)}, "
          f"low {sum(r['sev']['low'] for r in clean)}); most on one clean run: "
          f"{max((r['fp'] for r in clean), default=0)}")
    print(f"other findings on injected runs: {sum(r['fp'] for r in inj)} (high {sum(r['fp_high'] for r in inj)})")
    ok = all(r["first"] for r in inj) and all(r["sev"]["high"] == 0 and r["fp"] <= 1 for r in clean)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
