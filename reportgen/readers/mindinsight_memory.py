"""MindSpore Insight memory files (../shared/research/mindinsight-cluster-profiling.md §2.5, §3.4).

* ``memory_usage_summary_{rank}.json`` = ``{"capacity": GiB, "allocations": n, "deallocations": n,
  "peak_mem": GiB, "static_mem": GiB}`` -> table ``mi_memory_summary`` (rank, capacity_mb, peak_mb,
  static_mb, allocations). GiB (2^30 B) -> MB (10^6 B): × 2^30 / 1e6.
* ``memory_usage_details_{rank}.json`` = ``{graph_id: {"lines": [GiB per node], "nodes": [...],
  "static_mem": GiB, ...}}`` -> table ``mi_memory_lines`` (rank, graph, node_index, mb): the memory in
  use at each node of each graph, in execution order.

No public sample of either file exists; the parsers follow the MindSpore writer (MemoryUsageParser) and
are tolerant: a bad file gives one line in ``problems`` and ``{}``, never an exception. Values are strict
(issue 14): text that is not a plain number, NaN, infinite, negative and absurd values (over
:data:`MAX_GIB` GiB, a count over 1e15, a node index beyond the graph) are refused and named, never used.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from .. import limits
from ..errors import InputError
from ..limits import Rejects, finite_value, strict_float
from ._files import read_json

GIB_TO_MB = 2**30 / 1e6

#: refuse to load absurdly large JSON files (the real ones are a few kB / MB)
MAX_BYTES = 256 * 2**20
#: one device's memory above this many GiB (about 1 PB) is not a measurement
MAX_GIB = 1e6


def _load(path: Path, problems: list) -> Any:
    try:
        if Path(path).stat().st_size > MAX_BYTES:
            problems.append((str(path), f"larger than {MAX_BYTES // 2**20} MiB; file skipped"))
            return None
        return read_json(path)
    except OSError as exc:
        problems.append((str(path), f"cannot read: {exc.strerror or exc}; file skipped"))
    except InputError as exc:
        problems.append((str(path), exc.problem + "; file skipped"))
    return None


def _check(v: Any, limit: float = MAX_GIB) -> tuple[float, str | None]:
    """(value, None) for a finite, non-negative number (or plain-number text) up to ``limit``; (NaN, None)
    when absent; (NaN, why) when refused."""
    if v is None:
        return math.nan, None
    x = strict_float(v)
    reason = "not a number" if x is None else finite_value(x, limit=limit)
    return (math.nan, reason) if reason else (x, None)


def _num(v: Any, limit: float = MAX_GIB) -> float:
    """A finite, non-negative float up to ``limit``, else NaN (bools and non-numbers included)."""
    return _check(v, limit)[0]


def parse_memory_summary(path, rank, problems: list) -> dict[str, pd.DataFrame]:
    """One ``memory_usage_summary_{rank}.json`` -> ``{"mi_memory_summary": one row}`` (the frame of
    :func:`memory_summary_rows`)."""
    return {name: pd.DataFrame(rows) for name, rows in memory_summary_rows(path, rank, problems).items()}


def memory_summary_rows(path, rank, problems: list) -> dict[str, list[dict]]:
    """One ``memory_usage_summary_{rank}.json`` -> ``{"mi_memory_summary": [row]}``, or ``{}`` when unusable (rows:
    the reader makes one frame of every rank's, not a frame per rank)."""
    data = _load(path, problems)
    if data is None:
        return {}
    if not isinstance(data, dict):
        problems.append((str(path), "expected a JSON object with peak_mem; file skipped"))
        return {}
    if rank is None:
        problems.append((str(path), "rank unknown for this memory summary; file skipped"))
        return {}
    peak, why = _check(data.get("peak_mem"))
    if math.isnan(peak):
        problems.append((str(path), f"no valid peak_mem (GiB) in the memory summary{f' (peak_mem {why})' if why else ''}; "
                                    f"file skipped"))
        return {}
    fields = {k: _check(data.get(k), limits.MAX_MAGNITUDE if k == "allocations" else MAX_GIB)
              for k in ("capacity", "static_mem", "allocations")}
    refused = [f"{k} {why}" for k, (_v, why) in fields.items() if why]
    if refused:
        problems.append((str(path), f"value(s) refused, read as missing: {'; '.join(refused)}"))
    cap, static, alloc = (fields[k][0] for k in ("capacity", "static_mem", "allocations"))
    if cap == 0:
        cap = math.nan  # 0 means "not known" to the writer, never a real capacity
    return {"mi_memory_summary": [{
        "rank": int(rank), "capacity_mb": cap * GIB_TO_MB, "peak_mb": peak * GIB_TO_MB,
        "static_mb": static * GIB_TO_MB, "allocations": alloc}]}


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
    rejects = Rejects()
    for gid, g in graphs:
        gid = limits.cap_text(gid, 80)
        for key, label in (("fp_start", "forward start"), ("bp_end", "backward end")):
            x, why = _check(g.get(key), float(len(g["lines"])))
            if why or (not math.isnan(x) and not x.is_integer()):
                why = f"beyond the graph's {len(g['lines'])} nodes" if why and why.startswith("absurdly") else why
                rejects.add(path, None, f"'{key}'", why or "not a node index", action="value skipped")
            elif not math.isnan(x):
                marks.append({"rank": int(rank), "graph": gid, "mark": label, "node_index": int(x)})
        for i, v in enumerate(g["lines"]):
            x, why = _check(v)
            if math.isnan(x):
                rejects.add(path, None, "memory 'lines'", why or "missing", action="value skipped")
                continue
            g_col.append(gid)
            i_col.append(i)
            v_col.append(x * GIB_TO_MB)
    rejects.flush(lambda p, t: problems.append((p, t)))
    if not v_col:
        return {}
    out = {"mi_memory_lines": pd.DataFrame({"rank": int(rank), "graph": g_col, "node_index": i_col, "mb": v_col})}
    if marks:  # forward start / backward end node of each graph (MindSpore memory_usage_details)
        out["mi_memory_marks"] = pd.DataFrame(marks)
    return out
