"""``flops_summary_{rank}.json`` and ``flops_{rank}.txt`` of the MindSpore Insight layout -> FLOPs tables.

Format facts: ../shared/research/mindinsight-cluster-profiling.md §2.4 (three producer generations), §3.5
(MindInsight's reading), §3.8 (the helper's FLOPS rules).

``flops_summary`` generations (none names itself; told apart by the keys):

=============  ==================================================================  ======================
generation     keys                                                                 written by
=============  ==================================================================  ======================
``ms1``        ``FLOPs`` (MFLOPs), ``FLOPS`` (GFLOPS), ``FLOPS_Utilization`` (%)    MindSpore <= 1.10
``ms2.0``      ``cube_/vec_`` + ``FLOPs``, ``FLOPS``, ``FLOPS_Utilization``         MindSpore 2.0
``ms2.2``      ``cube_/vec_`` + ``FLOPs``, ``FLOPS`` (no utilisation)               MindSpore 2.2/2.3
=============  ==================================================================  ======================

As MindInsight (cluster_analyser.py ClusterFlopsAnalyser / parallel_analyser.py): FLOPs = ``FLOPs`` if truthy
else ``cube_FLOPs + vec_FLOPs``; FLOPS = ``FLOPS`` if truthy else ``cube_FLOPS + vec_FLOPS``.

Output units: ``flops`` plain FLOP counts (MFLOPs x 1e6), ``flops_per_s`` FLOP/s (GFLOPS x 1e9),
``utilization_ratio`` 0..1 (the file's percent / 100; NaN when the file has none; for the cube/vec split the
cube value, the MACs that matter for matmuls, with ``vec_utilization_ratio`` beside it).

``flops_{rank}.txt``: one header line then ``op name, numbers...``. Headers seen:
``full_kernel_name, FLOPs, FLOPS, FLOPS utilization`` (early 1.x), ``op_full_name, MFLOPs(10^6), GFLOPS(10^9),
FLOPS utilization(%)`` (1.x), ``..., MFLOPs(10^6 cube), GFLOPS(10^9 cube), FLOPS utilization(% cube),
MFLOPs(10^6 vec), ...`` (2.0) and ``op_full_name,MFLOPs(10^6 cube),GFLOPS(10^9 cube),MFLOPs(10^6 vector),
GFLOPS(10^9 vector)`` (2.2/2.3). Columns are recognised by name (FLOPs / FLOPS / utilization, cube / vec);
the numbers are taken from the right so an op name with a comma survives.

Bad input (unreadable, not JSON, no FLOPs keys, non-numeric values) -> a ``(path, problem)`` line and ``{}``
(or the rows that could be read); never an exception. Values are strict (issue 14): text that is not a plain
number, NaN, infinite, negative and absurd values (over 1e15 MFLOPs / GFLOPS, over 1000 %) are refused and
named (the summary's key, the detail file's line and column), never used.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import pandas as pd

from .. import limits
from ..errors import InputError
from ..limits import Rejects, finite_value, strict_float
from ._files import read_json, read_text

#: a utilisation in percent above this is not one
MAX_PERCENT = 1000.0


def _read(path: Path, problems: list) -> str | None:
    try:
        return read_text(path)
    except InputError as exc:
        problems.append((str(path), exc.problem + "; file skipped"))
    return None


def _limit(key: str) -> float:
    return MAX_PERCENT if "utili" in key.lower() else limits.MAX_MAGNITUDE


def _check(v, key: str) -> tuple[float, str | None]:
    """A value (JSON number or cell text) for ``key`` -> (float, None), (NaN, None) when absent, or
    (NaN, why it is refused)."""
    if v is None or (isinstance(v, str) and not v.strip()):
        return math.nan, None
    x = strict_float(v)
    reason = "not a number" if x is None else finite_value(x, limit=_limit(key))
    return (math.nan, reason) if reason else (x, None)


def _f(v) -> float:
    """A JSON value as float; NaN when absent or refused (:func:`_check`)."""
    return _check(v, "")[0]


def _truthy(x: float) -> bool:
    return not math.isnan(x) and x != 0


def parse_flops_summary(path, rank: int, problems: list) -> dict[str, pd.DataFrame]:
    """One ``flops_summary_{rank}.json`` -> ``{"mi_flops": one row}`` (see the module docstring; the frame of
    :func:`flops_summary_rows`)."""
    return {name: pd.DataFrame(rows) for name, rows in flops_summary_rows(path, rank, problems).items()}


def flops_summary_rows(path, rank: int, problems: list) -> dict[str, list[dict]]:
    """One ``flops_summary_{rank}.json`` -> ``{"mi_flops": [row]}``, or ``{}`` when unusable (rows: the reader makes
    one frame of every rank's, not a frame per rank)."""
    try:
        d = read_json(path)
    except InputError as exc:
        problems.append((str(path), exc.problem + "; file skipped"))
        return {}
    if not isinstance(d, dict):
        problems.append((str(path), "not a JSON object; file skipped"))
        return {}
    has_split = any(k in d for k in ("cube_FLOPs", "vec_FLOPs", "cube_FLOPS", "vec_FLOPS"))
    if "FLOPs" not in d and "FLOPS" not in d and not has_split:
        problems.append((str(path), "no FLOPs/FLOPS or cube_/vec_ keys; file skipped"))
        return {}
    refused = {k: why for k, v in d.items() if "FLOP" in str(k) for why in [_check(v, str(k))[1]] if why}
    if refused:
        problems.append((str(path), "value(s) refused, read as missing: " + "; ".join(
            f"{limits.cap_text(k, 40)} {why}" for k, why in sorted(refused.items()))[:300]))

    def val(key: str) -> float:
        return _check(d.get(key), key)[0]

    cube_mf, vec_mf = val("cube_FLOPs"), val("vec_FLOPs")
    cube_gf, vec_gf = val("cube_FLOPS"), val("vec_FLOPS")
    mf, gf = val("FLOPs"), val("FLOPS")
    if not _truthy(mf) and has_split:  # MindInsight: FLOPs if truthy else cube + vec
        mf = (0.0 if math.isnan(cube_mf) else cube_mf) + (0.0 if math.isnan(vec_mf) else vec_mf)
        if math.isnan(cube_mf) and math.isnan(vec_mf):
            mf = math.nan
    if not _truthy(gf) and has_split:
        gf = (0.0 if math.isnan(cube_gf) else cube_gf) + (0.0 if math.isnan(vec_gf) else vec_gf)
        if math.isnan(cube_gf) and math.isnan(vec_gf):
            gf = math.nan
    if has_split:
        util = val("cube_FLOPS_Utilization")
        vec_util = val("vec_FLOPS_Utilization")
        generation = "ms2.0" if ("cube_FLOPS_Utilization" in d or "vec_FLOPS_Utilization" in d) else "ms2.2"
    else:
        util, vec_util, generation = val("FLOPS_Utilization"), math.nan, "ms1"
    if math.isnan(mf) and math.isnan(gf):
        problems.append((str(path), "no usable FLOPs/FLOPS value; file skipped"))
        return {}
    row = {"rank": int(rank), "flops": mf * 1e6, "flops_per_s": gf * 1e9, "utilization_ratio": util / 100,
           "cube_flops": cube_mf * 1e6, "vec_flops": vec_mf * 1e6, "vec_utilization_ratio": vec_util / 100,
           "cube_flops_per_s": cube_gf * 1e9, "vec_flops_per_s": vec_gf * 1e9,
           "generation": generation}
    return {"mi_flops": [row]}


_HEAD_NAME = re.compile(r"name", re.I)


def _column_key(head: str) -> str | None:
    """Map a header cell to mflops / gflops / util (+ _cube / _vec)."""
    h = head.strip()
    low = h.lower()
    part = "_cube" if "cube" in low else "_vec" if "vec" in low else ""
    if "utili" in low:
        return "utilization_pct" + part
    if "flops" not in low:
        return None
    # FLOPs (count, MFLOPs) vs FLOPS (rate, GFLOPS): the M/G prefix, else the case of the final s
    if low.startswith("mflops") or (not low.startswith("gflops") and "FLOPs" in h):
        return "mflops" + part
    if low.startswith("gflops") or "FLOPS" in h:
        return "gflops" + part
    return None


def parse_flops_detail(path, rank: int, problems: list) -> dict[str, pd.DataFrame]:
    """One ``flops_{rank}.txt`` -> ``{"mi_flops_ops": rank, op, mflops, gflops, utilization_pct[, *_cube, *_vec]}``.

    ``mflops`` / ``gflops`` are the file's units (MFLOPs, GFLOPS); with a cube/vec split they are cube + vec.
    """
    text = _read(path, problems)
    if text is None:
        return {}
    numbered = [(i, ln) for i, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
    if not numbered:
        problems.append((str(path), "empty file; skipped"))
        return {}
    lines = [ln for _i, ln in numbered]
    head = [c.strip() for c in lines[0].split(",")]
    keys = [_column_key(c) for c in head[1:]]
    if not head or not _HEAD_NAME.search(head[0]) or not any(k and "flops" in k for k in keys):
        problems.append((str(path), f"header {lines[0][:80]!r} not understood (expected op name, FLOPs columns); "
                                    "file skipped"))
        return {}
    n = len(keys)
    rows = []
    rejects = Rejects()
    cut_line = numbered[-1][0] if not text.endswith(("\n", "\r")) else None
    for lineno, ln in numbered[1:]:
        cells = ln.split(",")
        if len(cells) < n + 1:
            rejects.add(path, lineno, "last line" if lineno == cut_line else "row",
                        "truncated (fewer fields than the header)")
            continue
        name = limits.cap_text(",".join(cells[: len(cells) - n]).strip())
        row = {"rank": int(rank), "op": name}
        for k, head_name, c in zip(keys, head[1:], cells[len(cells) - n:]):
            v, reason = _check(c, head_name)
            if reason:
                rejects.add(path, lineno, f"column '{limits.cap_text(head_name, 40)}'", reason)
                break
            if k:
                row[k] = v
        else:
            rows.append(row)
    rejects.flush(lambda p, t: problems.append((p, t)))
    if not rows:
        return {}
    df = pd.DataFrame(rows)
    for base in ("mflops", "gflops"):
        if base not in df:
            parts = [c for c in (base + "_cube", base + "_vec") if c in df]
            df[base] = df[parts].fillna(0).sum(axis=1) if parts else math.nan
    if "utilization_pct" not in df:
        df["utilization_pct"] = df["utilization_pct_cube"] if "utilization_pct_cube" in df else math.nan
    df["flops"] = df["mflops"] * 1e6
    front = ["rank", "op", "mflops", "gflops", "utilization_pct", "flops"]
    return {"mi_flops_ops": df[front + [c for c in df.columns if c not in front]]}


def canonical(run) -> None:
    """The canonical FLOPs tables of a MindSpore Insight run, from the files' tables (parsed lazily on first use):

    * ``rank_flops`` (the profiler's per-rank totals, ``flops_summary``): one row per rank, the first file's when a
      rank has two; ``method`` = "framework summary", ``rate_basis`` = what its FLOPS is (:data:`RATE_BASIS`).
    * ``op_flops`` (``flops_{rank}.txt``): one row per op, ``method`` "framework summary", ``type`` = the last scope
      component without its ``-opN`` suffix, no step / start / duration (the file has none: NaN), and the
      profiler's own per-op rate (``flops_per_s``) and utilisation (``utilization_pct``) beside it.
    """
    if "mi_flops" in run.tables:
        run.loaders["rank_flops"] = lambda: rank_flops(run.tables.get("mi_flops"))
    if "mi_flops_ops" in run.tables:
        run.loaders["op_flops"] = lambda: op_flops(run.tables.get("mi_flops_ops"))


def rank_flops(mi: pd.DataFrame | None) -> pd.DataFrame | None:
    if mi is None or mi.empty:
        return None
    out = mi.drop_duplicates("rank", keep="first").sort_values("rank").reset_index(drop=True)
    return out.assign(method="framework summary", rate_basis=out["generation"].map(RATE_BASIS))


#: what MindSpore's own FLOPS is, by flops_summary generation (research mindinsight-cluster-profiling.md §2.4): not
#: FLOPs per wall-clock second, so no MFU is derived from it
RATE_BASIS = {"ms1": "profiler FLOPS: mean of per-op rates (MindSpore <= 2.0)",
              "ms2.0": "profiler FLOPS: mean of per-op rates (MindSpore <= 2.0)",
              "ms2.2": "profiler FLOPS: Σ op rates / Σ op durations (MindSpore 2.2/2.3)"}


_OP_TYPE = re.compile(r"-op\d+$")


def op_flops(det: pd.DataFrame | None) -> pd.DataFrame | None:
    if det is None or det.empty:
        return None
    types = {n: _OP_TYPE.sub("", str(n).rsplit("/", 1)[-1]) for n in det["op"].unique()}
    nan = math.nan
    return pd.DataFrame({
        "rank": det["rank"].astype("int64"), "step": nan, "name": det["op"], "type": det["op"].map(types),
        "flops": det["mflops"] * 1e6, "method": "framework summary", "note": "", "start_ms": nan, "dur_ms": nan,
        "flops_per_s": det["gflops"] * 1e9, "utilization_pct": det["utilization_pct"]})
