"""MindSpore Insight memory files (../shared/research/mindinsight-cluster-profiling.md §2.5, §3.4).

* ``memory_usage_summary_{rank}.json`` = ``{"capacity": GiB, "allocations": n, "deallocations": n,
  "peak_mem": GiB, "static_mem": GiB}`` -> table ``mi_memory_summary`` (rank, capacity_mb, peak_mb,
  static_mb, allocations). GiB (2^30 B) -> MB (10^6 B): × 2^30 / 1e6.
* ``memory_usage_details_{rank}.json`` = ``{graph_id: {"lines": [GiB per node], "nodes": [...],
  "static_mem": GiB, ...}}`` -> table ``mi_memory_lines`` (rank, graph, node_index, mb): the memory in
  use at each node of each graph, in execution order.

No public sample of either file exists; the parsers follow the MindSpore writer (MemoryUsageParser) and
are tolerant: a bad file gives one line in ``problems`` and ``{}``, never an exception.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

GIB_TO_MB = 2**30 / 1e6

#: refuse to load absurdly large JSON files (the real ones are a few kB / MB)
MAX_BYTES = 256 * 2**20


def _load(path: Path, problems: list) -> Any:
    try:
        p = Path(path)
        if p.stat().st_size > MAX_BYTES:
            problems.append((str(path), f"larger than {MAX_BYTES // 2**20} MiB; file skipped"))
            return None
        with open(p, "rb") as fh:
            return json.loads(fh.read().decode("utf-8-sig"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        problems.append((str(path), f"not readable as JSON ({type(exc).__name__}); file skipped"))
        return None


def _num(v: Any) -> float:
    """A finite, non-negative float, else NaN (bools and non-numbers included)."""
    if isinstance(v, bool) or v is None:
        return math.nan
    try:
        x = float(v)
    except (TypeError, ValueError):
        return math.nan
    return x if math.isfinite(x) and x >= 0 else math.nan


def parse_memory_summary(path, rank, problems: list) -> dict[str, pd.DataFrame]:
    data = _load(path, problems)
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append((str(path), "expected a JSON object with peak_mem; file skipped"))
        return {}
    if rank is None:
        problems.append((str(path), "rank unknown for this memory summary; file skipped"))
        return {}
    peak = _num(data.get("peak_mem"))
    if math.isnan(peak):
        problems.append((str(path), "no valid peak_mem (GiB) in the memory summary; file skipped"))
        return {}
    cap = _num(data.get("capacity"))
    if cap == 0:
        cap = math.nan  # 0 means "not known" to the writer, never a real capacity
    static = _num(data.get("static_mem"))
    alloc = _num(data.get("allocations"))
    return {"mi_memory_summary": pd.DataFrame({
        "rank": [int(rank)], "capacity_mb": [cap * GIB_TO_MB], "peak_mb": [peak * GIB_TO_MB],
        "static_mb": [static * GIB_TO_MB], "allocations": [alloc]})}


def _graphs(data: Any) -> list[tuple[str, dict]]:
    if isinstance(data, dict) and isinstance(data.get("lines"), list):
        return [("0", data)]
    if isinstance(data, dict):
        return [(str(k), v) for k, v in data.items() if isinstance(v, dict) and isinstance(v.get("lines"), list)]
    if isinstance(data, list):
        return [(str(v.get("graph_id", i)), v) for i, v in enumerate(data)
                if isinstance(v, dict) and isinstance(v.get("lines"), list)]
    return []


def parse_memory_details(path, rank, problems: list) -> dict[str, pd.DataFrame]:
    data = _load(path, problems)
    if data is None:
        return {}
    if rank is None:
        problems.append((str(path), "rank unknown for this memory details file; file skipped"))
        return {}
    graphs = _graphs(data)
    if not graphs:
        problems.append((str(path), "no graph with a 'lines' list in the memory details; file skipped"))
        return {}
    g_col, i_col, v_col = [], [], []
    marks = []
    bad = 0
    for gid, g in graphs:
        for key, label in (("fp_start", "forward start"), ("bp_end", "backward end")):
            x = _num(g.get(key)) if isinstance(g, dict) else math.nan
            if not math.isnan(x):
                marks.append({"rank": int(rank), "graph": gid, "mark": label, "node_index": int(x)})
        for i, v in enumerate(g["lines"]):
            x = _num(v)
            if math.isnan(x):
                bad += 1
                continue
            g_col.append(gid)
            i_col.append(i)
            v_col.append(x * GIB_TO_MB)
    if bad:
        problems.append((str(path), f"{bad} non-numeric or negative memory line value(s) skipped"))
    if not v_col:
        return {}
    out = {"mi_memory_lines": pd.DataFrame({"rank": int(rank), "graph": g_col, "node_index": i_col, "mb": v_col})}
    if marks:  # forward start / backward end node of each graph (MindSpore memory_usage_details)
        out["mi_memory_marks"] = pd.DataFrame(marks)
    return out
