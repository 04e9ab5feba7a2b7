"""MindSpore dataset pipeline profiles: ``minddata_pipeline_raw_{rank}.csv`` found by the survey of the run directory
(MindSpore Insight's profiler folder, or ``*_ascend_ms/ASCEND_PROFILER_OUTPUT``; written with ``data_process=True``
when the script uses ``mindspore.dataset``) -> table ``minddata_ops``.

Columns of the file (MindSpore's MinddataPipelineParser): op_id, op_type, num_workers, output_queue_size,
output_queue_average_size, output_queue_length, output_queue_usage_rate, sample_interval, parent_id, children_id.
Queue values of -1 (an op without an output queue, the device queue op) are missing, not numbers. The usage rate is
average size / capacity (0..1); a rate written in percent (1 < rate <= 100) is read as percent.

Every file is bounded (:data:`MAX_FILE_BYTES`, :data:`MAX_OPS`), a row that is not usable is counted and named in
the data problems. The files are those the survey's bounded walk found (reportgen/readers/__init__.py).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from .. import limits
from ..errors import InputError
from ..model import Run
from ._files import read_csv

NAME = re.compile(r"^minddata_pipeline_raw_(\d{1,7})\.csv$")
COLUMNS = ["rank", "op_id", "op_type", "num_workers", "queue_avg", "queue_capacity", "queue_usage", "parent_id",
           "children"]
#: files read at the most (one per rank)
MAX_FILES = 16_384
#: operations of one pipeline at the most (a real pipeline has a handful to a few dozen)
MAX_OPS = 10_000
#: a profile larger than this is not a pipeline profile (a few dozen rows take a few KB): skipped, not read
MAX_FILE_BYTES = 16 << 20


def in_rank_dir(d: Path) -> list[Path]:
    """The profiles of an Ascend / MindSpore rank directory (the survey does not walk into one):
    ``ASCEND_PROFILER_OUTPUT/`` and the directory itself."""
    out = []
    for where in (d / "ASCEND_PROFILER_OUTPUT", d):
        try:
            out += [where / n for n in sorted(os.listdir(where)) if NAME.match(n)]
        except OSError:
            continue
    return out


def _num(text: str):
    x = limits.strict_float(text.strip()) if isinstance(text, str) else None
    return None if x is None or x < 0 else x


def _children(text: str) -> str:
    ids = re.findall(r"-?\d+", text or "")
    return ",".join(i for i in ids if not i.startswith("-"))[:2000]


def parse(path: Path, rank: int, run: Run) -> list[dict]:
    try:
        size = path.stat().st_size
    except OSError as exc:
        run.problem(path, f"cannot read: {exc.strerror or exc}; file skipped")
        return []
    if size > MAX_FILE_BYTES:
        run.problem(path, f"{size:,} bytes, more than a pipeline profile holds (at most {MAX_FILE_BYTES:,}); "
                          "file skipped")
        return []
    try:
        t = read_csv(path)
    except InputError as exc:
        run.problem(path, f"{exc.problem}; file skipped")
        return []
    need = ["op_id", "op_type", "num_workers", "output_queue_average_size", "output_queue_length",
            "output_queue_usage_rate", "parent_id"]
    missing = [c for c in need if c not in t.header]
    if missing:
        run.problem(path, f"no column {', '.join(missing)} (not a minddata_pipeline_raw file); file skipped")
        return []
    idx = {h: i for i, h in enumerate(t.header)}
    rows, bad = [], 0
    for line, cells in t.rows[:MAX_OPS]:
        if t.shape_problem(line, cells):
            bad += 1
            continue
        op_id = limits.as_int(cells[idx["op_id"]].strip())
        if op_id is None or op_id < 0:
            bad += 1
            continue
        usage = _num(cells[idx["output_queue_usage_rate"]])
        if usage is not None and 1 < usage <= 100:
            usage /= 100.0
        if usage is not None and usage > 1:
            bad += 1
            continue
        workers = limits.as_int(cells[idx["num_workers"]].strip())
        parent = limits.as_int(cells[idx["parent_id"]].strip())
        rows.append({"rank": rank, "op_id": op_id,
                     "op_type": limits.cap_text(cells[idx["op_type"]].strip(), 120),
                     "num_workers": workers if workers is not None and workers >= 0 else None,
                     "queue_avg": _num(cells[idx["output_queue_average_size"]]),
                     "queue_capacity": _num(cells[idx["output_queue_length"]]), "queue_usage": usage,
                     "parent_id": parent if parent is not None and parent >= 0 else None,
                     "children": _children(cells[idx["children_id"]]) if "children_id" in idx else ""})
    if bad:
        run.problem(path, f"{bad} row(s) without a usable op id or queue usage skipped")
    if len(t.rows) > MAX_OPS:
        run.problem(path, f"{len(t.rows) - MAX_OPS} row(s) beyond the first {MAX_OPS:,} not read")
    return rows


def attach(run: Run, paths: list[Path]) -> None:
    """Add ``minddata_ops`` to ``run`` from the profiles the survey found (reportgen/readers/__init__.py: its bounded
    walk of the run directory, so the tree is not walked twice)."""
    rows = []
    for path in sorted(set(paths))[:MAX_FILES]:
        m = NAME.match(path.name)
        if m:
            rows.extend(parse(path, int(m.group(1)), run))
    if rows:
        run.tables["minddata_ops"] = pd.DataFrame(rows, columns=COLUMNS)
