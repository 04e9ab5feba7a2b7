"""MindSpore dataset pipeline profiles: ``minddata_pipeline_raw_{rank}.csv`` found by the survey of the run directory
(MindSpore Insight's profiler folder, or ``*_ascend_ms/ASCEND_PROFILER_OUTPUT``; written with ``data_process=True``
when the script uses ``mindspore.dataset``) -> table ``minddata_ops``.

Columns of the file (MindSpore's MinddataPipelineParser): op_id, op_type, num_workers, output_queue_size,
output_queue_average_size, output_queue_length, output_queue_usage_rate, sample_interval, parent_id, children_id.
Queue values of -1 (an op without an output queue, the device queue op) are missing, not numbers. The usage rate is
average size / capacity (0..1); a rate written in percent (1 < rate <= 100) is read as percent.

Every file is bounded (:data:`MAX_FILE_BYTES`, :data:`MAX_OPS`), a row that is not usable is counted and named in
the data problems. The files are those the survey's bounded walk found (reportgen/readers/__init__.py), and in
MindInsight's legacy layout those of ``cluster_profiler/<host>/profiler/`` (:func:`legacy_files`: named by
device id, ranked by the rank table).

The other dataset profiles MindSpore writes beside it (format: MindSpore's MinddataProfilingAnalyzer, which writes
the summaries from the raw profiles; no public sample of any of these files exists):

* ``minddata_pipeline_summary_{rank}.json`` (or the same as ``.csv``, one row per key: the key, then its values):
  per operation, lists in op-id order: ``op_ids``, ``op_names``, ``num_workers``, ``queue_average_size``,
  ``queue_utilization_pct`` and ``queue_empty_freq_pct`` (percent, 0..100; -1 = the op has no output queue),
  ``avg_cpu_pct`` (user + sys, percent of one core), ``avg_cpu_pct_per_worker``, ``children_ids``, ``parent_id``;
  per pipeline ``per_batch_time``, ``per_pipeline_time``, ``per_push_queue_time`` (one-element lists, ms; -1 =
  not measured) and MindSpore's own verdict ``bottleneck_warning`` / ``bottleneck_suggestion`` (one-element lists
  of text) and ``cpu_analysis_details`` / ``queue_analysis_details`` (lists of text). -> the CPU columns of
  ``minddata_ops`` (and its rows, for a rank without the raw profile) and table ``minddata_summary``.
* ``device_queue_profiling_{rank}.txt`` (the host-to-device queue; else ``dataset_iterator_profiling_{rank}.txt``,
  the iterator's queue): one record per line, ``type extra batch value timestamp``; type 0 = a time (ms) with
  extra 0 = getting the batch from the pipeline, 1 = pushing it to the device, 2 = the whole batch; type 1 = the
  queue's size (value) and capacity (extra) when the batch was taken. The first batch is left out, as MindSpore
  does (it includes the pipeline's start). -> table ``minddata_queue`` per rank: batches, capacity, mean size,
  the share of batches that found the queue empty (the device waited for the host), mean times.
  Each queue-size record also gives a row of ``minddata_queue_steps`` (queue ``host``: MindInsight's "host queue";
  every batch, the first included, as MindInsight's step-gap chart draws it).
* ``minddata_aicpu_{rank}.txt`` (Ascend; ``minddata_getnext_profiling_{rank}.txt`` on GPU): the device's data queue
  when the training's GetNext took a batch, one line per step: ``GetNext_dequeue_wait start end size`` (GPU:
  ``GetNext ...``); field 4 is the queue's size (MindInsight's MinddataAnalyser.analyse_get_next_info) ->
  ``minddata_queue_steps`` rows of queue ``data`` (step = the line's order, from 1).
* ``dataset.csv`` (``*_ascend_ms/ASCEND_PROFILER_OUTPUT``; ``dataset_{rank}.csv`` in the older layout):
  ``Operation, Stage, Occurrences, Avg. time(us), Custom Info`` -> table ``minddata_stages`` (rank, operation,
  stage, occurrences, avg_ms, total_ms = occurrences x average, info). Without a rank in its name the file's
  rank is the rank directory's ``profiler_info_{rank}.json``.
* ``minddata_cpu_utilization_{rank}.json`` (what MindSpore's analyzer makes the summary's CPU from): per operation
  the mean of user + sys utilisation over the samples; used for a rank without a summary (CPU per worker = CPU /
  the raw profile's workers).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pandas as pd

from .. import limits
from ..errors import InputError
from ..model import Run
from ._files import CONTENT_ERRORS, open_input, read_csv, read_json

NAME = re.compile(r"^minddata_pipeline_raw_(\d{1,7})\.csv$")
#: every dataset profile: kind -> file name (group 1: the rank, absent for dataset.csv)
PATTERNS = {
    "raw": NAME,
    "summary_json": re.compile(r"^minddata_pipeline_summary_(\d{1,7})\.json$"),
    "summary_csv": re.compile(r"^minddata_pipeline_summary_(\d{1,7})\.csv$"),
    "device_queue": re.compile(r"^device_queue_profiling_(\d{1,7})\.txt$"),
    "iterator": re.compile(r"^dataset_iterator_profiling_(\d{1,7})\.txt$"),
    "stages": re.compile(r"^dataset(?:_(\d{1,7}))?\.csv$"),
    "cpu": re.compile(r"^minddata_cpu_utilization_(\d{1,7})\.json$"),
    "getnext": re.compile(r"^minddata_(?:aicpu|getnext_profiling)_(\d{1,7})\.txt$"),
}
_PROFILER_INFO = re.compile(r"^profiler_info_(\d{1,7})\.json$")
#: queue records read per file at the most (one line per batch and kind: a run of 10^5 batches has ~4x that)
MAX_QUEUE_LINES = 2_000_000
#: a queue profile larger than this is skipped unread (a line is ~30 bytes)
MAX_QUEUE_BYTES = 128 << 20
#: steps kept per rank and queue in ``minddata_queue_steps`` (the first ones; a chart draws fewer)
MAX_QUEUE_STEPS = 5_000
#: text kept of MindSpore's own verdicts per rank
MAX_VERDICT_CHARS = 400

COLUMNS = ["rank", "op_id", "op_type", "num_workers", "queue_avg", "queue_capacity", "queue_usage", "parent_id",
           "children"]
#: files read at the most (one per rank)
MAX_FILES = 16_384
#: operations of one pipeline at the most (a real pipeline has a handful to a few dozen)
MAX_OPS = 10_000
#: a profile larger than this is not a pipeline profile (a few dozen rows take a few KB): skipped, not read
MAX_FILE_BYTES = 16 << 20


def kind_of(name: str, rank_dir: bool = False) -> str | None:
    """Which dataset profile a file name is (a key of :data:`PATTERNS`), or None. ``dataset.csv`` without a rank
    in its name only counts inside a rank directory (``rank_dir``): elsewhere it is anybody's data set."""
    kind = next((k for k, pat in PATTERNS.items() if pat.match(name)), None)
    if kind == "stages" and not rank_dir and name == "dataset.csv":
        return None
    return kind


def in_rank_dir(d: Path) -> list[Path]:
    """The profiles of an Ascend / MindSpore rank directory (the survey does not walk into one):
    ``ASCEND_PROFILER_OUTPUT/`` and the directory itself."""
    out = []
    for where in (d / "ASCEND_PROFILER_OUTPUT", d):
        try:
            out += [where / n for n in sorted(os.listdir(where)) if kind_of(n, rank_dir=True)]
        except OSError:
            continue
    return out


def _dir_rank(path: Path) -> int | None:
    """The rank of a file named without one (``dataset.csv``): its rank directory's ``profiler_info_{rank}.json``
    (the directory itself, or the parent of ``ASCEND_PROFILER_OUTPUT``)."""
    d = path.parent.parent if path.parent.name == "ASCEND_PROFILER_OUTPUT" else path.parent
    try:
        ranks = {int(m.group(1)) for n in os.listdir(d) for m in [_PROFILER_INFO.match(n)] if m}
    except OSError:
        return None
    return ranks.pop() if len(ranks) == 1 else None


def _num(text: str):
    x = limits.strict_float(text.strip()) if isinstance(text, str) else None
    return None if x is None or x < 0 else x


def _children(text: str) -> str:
    ids = re.findall(r"-?\d+", text or "")
    return ",".join(i for i in ids if not i.startswith("-"))[:2000]


_UNREAD = object()


def _load(path: Path, run: Run, loader, what: str):
    """``loader(path)`` for a file of at most MAX_FILE_BYTES (a real one takes a few KB); a larger, unreadable or
    broken file is named in the data problems (``what`` it is not) and gives ``_UNREAD``."""
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            run.problem(path, f"{size:,} bytes, more than {what} holds (at most {MAX_FILE_BYTES:,}); file skipped")
            return _UNREAD
        return loader(path)
    except OSError as exc:
        run.problem(path, f"cannot read: {exc.strerror or exc}; file skipped")
    except InputError as exc:
        run.problem(path, f"{exc.problem}; file skipped")
    except CONTENT_ERRORS as exc:
        run.problem(path, f"unexpected content ({type(exc).__name__}); file skipped")
    return _UNREAD


def _columns(t, need: list[str], path: Path, run: Run, what: str) -> dict | None:
    """Column name -> index of a CSV that has every column of ``need``; else the file is named (``what``) and None."""
    missing = [c for c in need if c not in t.header]
    if missing:
        run.problem(path, f"no column {', '.join(missing)} ({what}); file skipped")
        return None
    return {h: i for i, h in enumerate(t.header)}


def _csv_rows(path: Path, run: Run, what: str, need: list[str], row, unusable: str, ours=None) -> list[dict]:
    """The rows ``row(cells, idx)`` makes of a profile CSV (None: the row is unusable): the file loaded and bounded
    (:func:`_load`), its columns checked (``ours(header)`` False: not a profile at all, skipped unnamed), rows of the
    wrong shape or unusable counted in one data problem (``unusable``), rows beyond MAX_OPS named."""
    t = _load(path, run, read_csv, what)
    if t is _UNREAD or (ours is not None and not ours(t.header)):
        return []
    idx = _columns(t, need, path, run, f"not {what}")
    if idx is None:
        return []
    rows, bad = [], 0
    for line, cells in t.rows[:MAX_OPS]:
        got = None if t.shape_problem(line, cells) else row(cells, idx)
        if got is None:
            bad += 1
        else:
            rows.append(got)
    if bad:
        run.problem(path, f"{bad} row(s) {unusable} skipped")
    if len(t.rows) > MAX_OPS:
        run.problem(path, f"{len(t.rows) - MAX_OPS} row(s) beyond the first {MAX_OPS:,} not read")
    return rows


def parse(path: Path, rank: int, run: Run) -> list[dict]:
    """``minddata_pipeline_raw_{rank}.csv`` -> ``minddata_ops`` rows (module doc)."""
    def row(cells, idx):
        op_id = limits.as_int(cells[idx["op_id"]].strip())
        usage = _num(cells[idx["output_queue_usage_rate"]])
        if usage is not None and 1 < usage <= 100:
            usage /= 100.0
        if op_id is None or op_id < 0 or (usage is not None and usage > 1):
            return None
        workers = limits.as_int(cells[idx["num_workers"]].strip())
        parent = limits.as_int(cells[idx["parent_id"]].strip())
        return {"rank": rank, "op_id": op_id, "op_type": limits.cap_text(cells[idx["op_type"]].strip(), 120),
                "num_workers": workers if workers is not None and workers >= 0 else None,
                "queue_avg": _num(cells[idx["output_queue_average_size"]]),
                "queue_capacity": _num(cells[idx["output_queue_length"]]), "queue_usage": usage,
                "parent_id": parent if parent is not None and parent >= 0 else None,
                "children": _children(cells[idx["children_id"]]) if "children_id" in idx else ""}

    return _csv_rows(path, run, "a minddata_pipeline_raw file",
                     ["op_id", "op_type", "num_workers", "output_queue_average_size", "output_queue_length",
                      "output_queue_usage_rate", "parent_id"], row, "without a usable op id or queue usage")


def legacy_files(run: Run, roots: list[Path]) -> dict[Path, int]:
    """The profiles of MindInsight's legacy layout (``<root>/cluster_profiler/<host>/profiler/``, which the survey
    does not walk: the MindInsight reader reads it), with their ranks: the number in such a file's name is the
    device id on its host, and the rank is the one the rank table gave that (host folder, device) — the reader's
    ``run.hosts`` / ``run.devices``. A file whose device has no rank is named and skipped."""
    rank_of = {(run.hosts.get(r), d): r for r, d in run.devices.items()}
    out: dict[Path, int] = {}
    for root in roots:
        try:
            host_dirs = sorted(p for p in (root / "cluster_profiler").iterdir() if p.is_dir())[:MAX_FILES]
        except OSError:
            continue
        for host_dir in host_dirs:
            folder = host_dir / "profiler" if (host_dir / "profiler").is_dir() else host_dir
            try:
                names = sorted(os.listdir(folder))[:MAX_FILES * len(PATTERNS)]
            except OSError:
                continue
            for name in names:
                kind = kind_of(name)
                m = PATTERNS[kind].match(name) if kind else None
                if m is None or m.group(1) is None:
                    continue
                rank = rank_of.get((host_dir.name, int(m.group(1))))
                if rank is None:
                    run.problem(folder / name, f"device {int(m.group(1))} of host folder "
                                               f"{limits.cap_text(host_dir.name, 120)} has no rank in the rank "
                                               "table; file skipped")
                    continue
                out[folder / name] = rank
    return out


def attach(run: Run, paths: list[Path], ranks: dict[Path, int] | None = None) -> None:
    """Add ``minddata_ops`` / ``minddata_summary`` / ``minddata_queue`` / ``minddata_stages`` to ``run`` from the
    profiles the survey found (reportgen/readers/__init__.py: its bounded walk of the run directory, so the tree is
    not walked twice) and those of ``ranks`` (path -> rank: :func:`legacy_files`). A rank's summary in JSON wins
    over the same in CSV; its device queue over its iterator."""
    by_kind: dict[str, dict[int, Path]] = {k: {} for k in PATTERNS}
    ranks = ranks or {}
    for path in sorted(set(paths) | set(ranks))[:MAX_FILES * len(PATTERNS)]:
        kind = kind_of(path.name, rank_dir=True)  # the survey chose the files (dataset.csv only in rank dirs)
        if kind is None:
            continue
        m = PATTERNS[kind].match(path.name)
        rank = ranks[path] if path in ranks else int(m.group(1)) if m.group(1) is not None else _dir_rank(path)
        if rank is None:
            run.problem(path, "no rank in its name and none in its rank directory (profiler_info_<rank>.json); "
                              "file skipped")
            continue
        if rank in by_kind[kind]:
            run.problem(path, f"a second {path.name} for rank {rank} (the first is {by_kind[kind][rank]}); "
                              "file skipped")
            continue
        if len(by_kind[kind]) < MAX_FILES:
            by_kind[kind][rank] = path
    rows = []
    for rank, path in sorted(by_kind["raw"].items()):
        rows.extend(parse(path, rank, run))
    ops = pd.DataFrame(rows, columns=COLUMNS) if rows else None
    summaries, sum_ops = [], []
    for rank in sorted(set(by_kind["summary_json"]) | set(by_kind["summary_csv"])):
        path = by_kind["summary_json"].get(rank) or by_kind["summary_csv"][rank]
        got = parse_summary(path, rank, run)
        if got is not None:
            sum_ops.extend(got[0])
            summaries.append(got[1])
    if sum_ops:
        ops = _merge_summary(ops, pd.DataFrame(sum_ops))
    cpu_rows, summarised = [], {row["rank"] for row in summaries}
    for rank, path in sorted(by_kind["cpu"].items()):
        if rank not in summarised:  # the summary has it, computed the same way
            cpu_rows.extend(parse_cpu(path, rank, run))
    host_cpu = [row for rank, path in sorted(by_kind["cpu"].items()) for row in parse_host_cpu(path, rank, run)]
    if host_cpu:
        run.tables["host_cpu"] = pd.DataFrame(host_cpu)
    if cpu_rows and ops is not None and not ops.empty:
        ops = _merge_cpu(ops, pd.DataFrame(cpu_rows))
    if ops is not None and not ops.empty:
        run.tables["minddata_ops"] = ops
    if summaries:
        run.tables["minddata_summary"] = pd.DataFrame(summaries)
    queues, steps = [], []
    for rank in sorted(set(by_kind["device_queue"]) | set(by_kind["iterator"])):
        kind = "device_queue" if rank in by_kind["device_queue"] else "iterator"
        got: list = []
        q = parse_queue(by_kind[kind][rank], rank, kind, run, steps=got)
        if q is not None:
            queues.append(q)
            steps.extend(got)
    for rank, path in sorted(by_kind["getnext"].items()):
        steps.extend(parse_getnext(path, rank, run))
    if queues:
        run.tables["minddata_queue"] = pd.DataFrame(queues)
    if steps:
        run.tables["minddata_queue_steps"] = pd.DataFrame(steps, columns=STEP_COLUMNS)
    stages = []
    for rank, path in sorted(by_kind["stages"].items()):
        stages.extend(parse_stages(path, rank, run))
    if stages:
        run.tables["minddata_stages"] = pd.DataFrame(stages, columns=STAGE_COLUMNS)


# --------------------------------------------------------------------------- pipeline summary

def _pct(v) -> float | None:
    """A percent value of the summary (-1 = none) -> 0..1; anything else (text, NaN, > 100) is None."""
    x = _value(v)
    return None if x is None or x > 100 else x / 100.0


def _value(v) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, str):
        return _num(v)
    if isinstance(v, (int, float)) and v == v and abs(v) != float("inf") and v >= 0:
        return float(v)
    return None


def _one(doc: dict, key: str):
    v = doc.get(key)
    return v[0] if isinstance(v, list) and v else v


def _text(v) -> str:
    if isinstance(v, list):
        v = " ".join(str(x) for x in v[:20] if isinstance(x, (str, int, float)))
    return limits.cap_text(str(v).strip(), MAX_VERDICT_CHARS) if isinstance(v, (str, int, float)) else ""


def _summary_from_csv(path: Path) -> dict:
    """The CSV form (one row per key: the key, then its values) as the JSON form's dict; ``children_ids`` cells
    such as ``[2, 3]`` become lists."""
    t = read_csv(path)
    doc: dict = {}
    for _line, cells in [(0, t.header)] + t.rows:
        if not cells or not str(cells[0]).strip():
            continue
        key, vals = str(cells[0]).strip(), [c.strip() for c in cells[1:]]
        if key == "children_ids":
            doc[key] = [[int(x) for x in re.findall(r"\d+", c)] for c in vals]
        elif key in ("bottleneck_warning", "bottleneck_suggestion", "cpu_analysis_details",
                     "queue_analysis_details", "op_names", "pipeline_ops"):
            doc[key] = vals
        else:
            doc[key] = [limits.strict_float(c) if c else None for c in vals]
    return doc


def parse_summary(path: Path, rank: int, run: Run) -> tuple[list[dict], dict] | None:
    """One rank's ``minddata_pipeline_summary`` -> (op rows, the rank's row); None when unusable (named)."""
    doc = _load(path, run, read_json if path.suffix == ".json" else _summary_from_csv, "a pipeline summary")
    if doc is _UNREAD:
        return None
    if not isinstance(doc, dict):
        run.problem(path, "not a pipeline summary (the top level is not an object); file skipped")
        return None
    ids = doc.get("op_ids")
    if not isinstance(ids, list) or not ids:
        run.problem(path, "no op_ids list (not a minddata pipeline summary); file skipped")
        return None
    ids = [limits.as_int(i) if not isinstance(i, float) or i.is_integer() else None for i in ids[:MAX_OPS]]
    n = len(ids)
    short = []

    def col(key: str) -> list:
        v = doc.get(key)
        if v is None:
            return [None] * n
        if not isinstance(v, list) or len(v) < n:
            short.append(key)
            return [None] * n
        return v[:n]

    names, workers, q_avg, q_use, q_empty = col("op_names"), col("num_workers"), col("queue_average_size"), \
        col("queue_utilization_pct"), col("queue_empty_freq_pct")
    cpu, per_worker, parents, children = col("avg_cpu_pct"), col("avg_cpu_pct_per_worker"), col("parent_id"), \
        col("children_ids")
    ops, bad = [], 0
    for i, op_id in enumerate(ids):
        if op_id is None or op_id < 0:
            bad += 1
            continue
        w = _value(workers[i])
        parent = limits.as_int(parents[i]) if isinstance(parents[i], (int, float)) and not isinstance(parents[i], bool) \
            and float(parents[i]).is_integer() else None
        kids = children[i] if isinstance(children[i], list) else []
        ops.append({"rank": rank, "op_id": op_id,
                    "op_type": limits.cap_text(str(names[i]), 120) if isinstance(names[i], str) else "",
                    "num_workers": int(w) if w is not None and float(w).is_integer() else None,
                    "queue_avg": _value(q_avg[i]), "queue_usage": _pct(q_use[i]), "queue_empty_ratio": _pct(q_empty[i]),
                    "avg_cpu_pct": _value(cpu[i]), "cpu_per_worker_pct": _value(per_worker[i]),
                    "parent_id": parent if parent is not None and parent >= 0 else None,
                    "children": ",".join(str(k) for k in kids[:100] if isinstance(k, int) and k >= 0)})
    if bad:
        run.problem(path, f"{bad} operation(s) without a usable op id skipped")
    if short:
        run.problem(path, f"{', '.join(short[:5])}: not a list of one value per operation; those values left empty")
    times = {k: _value(_one(doc, k)) for k in ("per_batch_time", "per_pipeline_time", "per_push_queue_time")}
    row = {"rank": rank, "source": path.name,
           "batch_time_ms": times["per_batch_time"], "pipeline_time_ms": times["per_pipeline_time"],
           "push_time_ms": times["per_push_queue_time"],
           "ms_bottleneck": _text(_one(doc, "bottleneck_warning")),
           "ms_suggestion": _text(_one(doc, "bottleneck_suggestion")),
           "ms_details": _text(list(doc.get("cpu_analysis_details") or []) + list(doc.get("queue_analysis_details")
                                                                                  or []))}
    return ops, row


def _merge_summary(ops: pd.DataFrame | None, summary: pd.DataFrame) -> pd.DataFrame:
    """The raw profile's rows with the summary's CPU and empty-queue columns; a rank with only the summary gets its
    rows from it (its queue usage is the summary's, its capacity unknown)."""
    extra = summary[["rank", "op_id", "queue_empty_ratio", "avg_cpu_pct", "cpu_per_worker_pct"]]
    if ops is None or ops.empty:
        return summary.assign(queue_capacity=float("nan"))[COLUMNS + ["queue_empty_ratio", "avg_cpu_pct",
                                                                      "cpu_per_worker_pct"]]
    merged = ops.merge(extra, on=["rank", "op_id"], how="left")
    only = summary[~summary["rank"].isin(set(ops["rank"]))]
    if only.empty:
        return merged
    return pd.concat([merged, only.assign(queue_capacity=float("nan"))[merged.columns]], ignore_index=True)


def parse_host_cpu(path: Path, rank: int, run: Run) -> list[dict]:
    """``minddata_cpu_utilization_{rank}.json``'s ``device_info`` (the whole host's CPU, percent per sample) and
    ``process_info`` (the training process's share of it) -> up to two ``host_cpu`` rows (scope machine / process):
    the mean user / sys (/ io / idle: machine only) share over the samples, the samples and the processors; a scope
    without usable lists gives no row. (The file is read twice, here and in :func:`parse_cpu`: it is small.)"""
    try:  # a broken file is named once, by parse_cpu
        doc = read_json(path) if path.stat().st_size <= MAX_FILE_BYTES else None
    except (OSError, InputError):
        return []
    if not isinstance(doc, dict):
        return []
    procs = _value(doc.get("cpu_processor_num"))
    procs = float(procs) if procs is not None and 0 < procs < 1e6 else float("nan")
    rows = []
    for scope, field, keys in (("machine", "device_info", ("user", "sys", "io", "idle")),
                               ("process", "process_info", ("user", "sys"))):
        info = doc.get(field)
        if not isinstance(info, dict):
            continue
        row = {"rank": rank, "scope": scope}
        for key in ("user", "sys", "io", "idle"):
            vals = info.get(f"{key}_utilization") if key in keys else None
            vals = [_value(v) for v in vals] if isinstance(vals, list) else []
            vals = [v for v in vals if v is not None and 0 <= v <= 100]
            row[f"{key}_ratio"] = sum(vals) / len(vals) / 100.0 if vals else float("nan")
            if key == "user":
                row["samples"] = len(vals)
        row["processors"] = procs
        if row["samples"]:
            rows.append(row)
    return rows


def parse_cpu(path: Path, rank: int, run: Run) -> list[dict]:
    """``minddata_cpu_utilization_{rank}.json`` -> (rank, op_id, avg_cpu_pct): per operation the mean over the samples
    of user + sys utilisation (percent of one core), as MindSpore's analyzer computes the summary's ``avg_cpu_pct``
    from it (op_id -1, the process' own row, left out)."""
    doc = _load(path, run, read_json, "a CPU utilisation file")
    if doc is _UNREAD:
        return []
    info = doc.get("op_info") if isinstance(doc, dict) else None
    if not isinstance(info, list):
        run.problem(path, "no op_info list (not a minddata CPU utilisation file); file skipped")
        return []
    rows, bad = [], 0
    for op in info[:MAX_OPS]:
        m = op.get("metrics") if isinstance(op, dict) else None
        op_id = limits.as_int(op.get("op_id")) if isinstance(op, dict) and not isinstance(op.get("op_id"), bool) \
            else None
        if op_id == -1:
            continue
        user = m.get("user_utilization") if isinstance(m, dict) else None
        sys_ = m.get("sys_utilization") if isinstance(m, dict) else None
        if op_id is None or op_id < 0 or not isinstance(user, list) or not isinstance(sys_, list) \
                or len(user) != len(sys_):
            bad += 1
            continue
        vals = [_value(u) for u in user] + [_value(v) for v in sys_]
        if any(v is None for v in vals):
            bad += 1
            continue
        n = len(user)
        rows.append({"rank": rank, "op_id": op_id, "avg_cpu_pct": sum(vals) / n if n else 0.0})
    if bad:
        run.problem(path, f"{bad} operation(s) without usable user/sys utilisation lists skipped")
    return rows


def _merge_cpu(ops: pd.DataFrame, cpu: pd.DataFrame) -> pd.DataFrame:
    """CPU columns for the ranks that have no summary, from their CPU utilisation file; per worker = CPU / workers
    (MindSpore's avg_cpu_pct_per_worker)."""
    cpu = cpu.drop_duplicates(["rank", "op_id"])
    if "avg_cpu_pct" not in ops:
        ops = ops.assign(queue_empty_ratio=float("nan"), avg_cpu_pct=float("nan"), cpu_per_worker_pct=float("nan"))
    key = pd.MultiIndex.from_frame(ops[["rank", "op_id"]])
    got = cpu.set_index(["rank", "op_id"])["avg_cpu_pct"].reindex(key).to_numpy()
    fill = ops["avg_cpu_pct"].isna().to_numpy() & ~pd.isna(got)
    ops.loc[fill, "avg_cpu_pct"] = got[fill]
    workers = pd.to_numeric(ops["num_workers"], errors="coerce")
    ops.loc[fill, "cpu_per_worker_pct"] = (ops.loc[fill, "avg_cpu_pct"] / workers[fill]).where(workers[fill] > 0)
    return ops


# --------------------------------------------------------------------------- device queue / iterator

def parse_queue(path: Path, rank: int, kind: str, run: Run, steps: list | None = None) -> dict | None:
    """One rank's queue profile -> its row of ``minddata_queue`` (module doc); None when nothing is usable. Each
    queue-size record (every batch, the first included) is appended to ``steps`` as a ``minddata_queue_steps`` row
    (queue ``host``; at most MAX_QUEUE_STEPS)."""
    try:
        size = path.stat().st_size
        if size > MAX_QUEUE_BYTES:
            run.problem(path, f"{size:,} bytes, more than a queue profile of this reader's bound ({MAX_QUEUE_BYTES:,}); "
                              "file skipped")
            return None
        fh = open_input(path, "r", encoding="utf-8", errors="replace")
    except OSError as exc:
        run.problem(path, f"cannot read: {exc.strerror or exc}; file skipped")
        return None
    sizes, caps, times = [], [], {0: [], 1: [], 2: []}
    batches: set = set()
    bad = lines = 0
    with fh:
        for line in fh:
            lines += 1
            if lines > MAX_QUEUE_LINES:
                run.problem(path, f"records beyond the first {MAX_QUEUE_LINES:,} not read")
                break
            parts = line.split()
            if not parts:
                continue
            rec = [limits.as_int(x) for x in parts[:5]]
            if len(parts) < 5 or any(x is None for x in rec) or rec[0] not in (0, 1) or min(rec[1:4]) < 0:
                bad += 1
                continue
            typ, extra, batch, value, _ts = rec
            if typ == 1 and steps is not None and len(steps) < MAX_QUEUE_STEPS:
                steps.append({"rank": rank, "queue": "host", "step": batch, "size": value, "capacity": extra})
            if batch < 2:  # MindSpore leaves the first batch out (it includes the pipeline's start)
                continue
            if typ == 1:
                sizes.append(value)
                caps.append(extra)
                batches.add(batch)
            elif extra in times:
                times[extra].append(value)
    if bad:
        run.problem(path, f"{bad} record(s) that are not 'type extra batch value timestamp' integers skipped")
    if not lines or (bad == lines):
        run.problem(path, "no queue record; file skipped")
        return None

    def mean(v):
        return float(sum(v)) / len(v) if v else None

    # a profile of the first batch only (MindSpore's unit-test run) is a row of 0 batches, not a problem
    return {"rank": rank, "source": "device queue" if kind == "device_queue" else "dataset iterator",
            "batches": len(batches), "capacity": max(caps) if caps else None, "size_mean": mean(sizes),
            "empty_ratio": (sum(1 for x in sizes if x == 0) / len(sizes)) if sizes else None,
            "pipeline_time_ms": mean(times[0]), "push_time_ms": mean(times[1]), "batch_time_ms": mean(times[2])}


def parse_getnext(path: Path, rank: int, run: Run) -> list[dict]:
    """``minddata_aicpu_{rank}.txt`` / ``minddata_getnext_profiling_{rank}.txt`` -> ``minddata_queue_steps`` rows
    of queue ``data`` (module doc): the lines starting with GetNext that have a size (field 4, an integer >= 0)."""
    try:
        size = path.stat().st_size
        if size > MAX_QUEUE_BYTES:
            run.problem(path, f"{size:,} bytes, more than a queue profile of this reader's bound ({MAX_QUEUE_BYTES:,}); "
                              "file skipped")
            return []
        fh = open_input(path, "r", encoding="utf-8", errors="replace")
    except OSError as exc:
        run.problem(path, f"cannot read: {exc.strerror or exc}; file skipped")
        return []
    rows, bad = [], 0
    with fh:
        for n, line in enumerate(fh):
            if n >= MAX_QUEUE_LINES or len(rows) >= MAX_QUEUE_STEPS:
                break
            parts = line.split()
            if not parts or not parts[0].startswith("GetNext"):
                continue
            value = limits.as_int(parts[3]) if len(parts) > 3 else None
            if value is None or value < 0:
                bad += 1
                continue
            rows.append({"rank": rank, "queue": "data", "step": len(rows) + 1, "size": value, "capacity": None})
    if bad:
        run.problem(path, f"{bad} GetNext record(s) without a queue size skipped")
    return rows


# --------------------------------------------------------------------------- dataset.csv

STEP_COLUMNS = ["rank", "queue", "step", "size", "capacity"]
STAGE_COLUMNS = ["rank", "operation", "stage", "occurrences", "avg_ms", "total_ms", "info"]


def parse_stages(path: Path, rank: int, run: Run) -> list[dict]:
    """``dataset.csv`` -> ``minddata_stages`` rows (module doc)."""
    def row(cells, idx):
        occ, avg = _num(cells[idx["Occurrences"]]), _num(cells[idx["Avg. time(us)"]])
        if occ is None or avg is None or not float(occ).is_integer():
            return None
        return {"rank": rank, "operation": limits.cap_text(cells[idx["Operation"]].strip(), 120),
                "stage": limits.cap_text(cells[idx["Stage"]].strip(), 120), "occurrences": int(occ),
                "avg_ms": avg / 1e3, "total_ms": occ * avg / 1e3,
                "info": limits.cap_text(cells[idx["Custom Info"]].strip(), 200) if "Custom Info" in idx else ""}

    # a file named dataset_<n>.csv without an Operation column is somebody's data set, not a profile: not named
    return _csv_rows(path, run, "a dataset.csv", ["Operation", "Stage", "Occurrences", "Avg. time(us)"], row,
                     "without usable occurrences / average time", ours=lambda header: "Operation" in header)
