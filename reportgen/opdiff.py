"""Operator-level run diff (``--baseline``; issue 27 point 5, seed row #94): which op types, operators and
communication op types got slower or more frequent since the baseline run, per step.

Peers: msprof-analyze ``compare_tools`` operator compare (per op: baseline vs current count and total time, diff,
ratio), HTA ``TraceDiff`` (ops added / removed, count and duration deltas per op name), Nsight Systems' diff.

Both runs are read from their metrics documents (the ``--json`` contract), so a baseline given as a run directory
(its document is built by the same code, :func:`reportgen.cli.build_report`'s ``build_metrics``) and one given as a
metrics JSON written earlier give the same diff. The op statistics come from the ``operators`` section's tables,
which :mod:`reportgen.opstats` computes (the one place for op rows and their statistics):

* ``rank_type_ops`` (per rank, op type and engine: count, total_ms, per_step_ms) -> per (rank, type) count and
  total, and each rank's steps = total_ms / per_step_ms (the steps its op rows fall in, opstats.steps_per_rank);
* ``type_name_ops`` (per op type and operator name over the cluster: count, total_ms);
* ``comm_type_ops`` (per rank and communication op type: count, total_ms, per_step_ms; msprof-analyze
  ``hccl_sum``) -> each rank's communication steps = total_ms / per_step_ms (its steps with communication ops).

Both sections count only the steps in scope of their run (reportgen/facts.py: warm-up steps left out unless
``--include-warmup``), so every per-step value here is over the steps in scope, as the rest of the page.

Definitions (:func:`diff`), for a group g (an op type, an operator name, a communication op type) over a set of
ranks R (the cluster, one rank or one pipeline stage):

* ``per_step_ms`` = sum over r in R of total_ms(g, r) / sum over r in R of steps(r): time per step per rank, so
  runs with other step counts or rank counts compare (``baseline_per_step_ms``: the baseline's);
  ``per_step_count`` likewise with count;
* ``delta_per_step_ms`` = this run - baseline (> 0: slower, time lost per step), ``delta_ratio`` = this run /
  baseline - 1 (as the headline rows; None when the baseline is 0), and ``delta_per_step_count``;
* ``status``: ``both``, ``only_now`` (added since the baseline, HTA's "added") or ``only_baseline`` ("removed");
* rows are sorted by |delta_per_step_ms|, largest first (time gained or lost per step).

A rank in one run only is not compared rank by rank (its rows are left out of the per-rank table and counted).
"""

from __future__ import annotations

from typing import Any

#: rows kept per diff table (the largest |delta| first); rows only in one run are kept within the same cut
TOP_ROWS = 30
#: the operator tables the diff reads from a metrics document (``sections.operators.tables``)
SOURCE_TABLES = ("rank_type_ops", "type_name_ops", "comm_type_ops")


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None


def _tables(doc: dict) -> dict[str, list[dict]]:
    sec = (doc.get("sections") or {}).get("operators") or {}
    if sec.get("status") != "ok":
        return {}
    t = sec.get("tables") or {}
    return {k: v for k, v in t.items() if k in SOURCE_TABLES and isinstance(v, list)}


def _stages(doc: dict) -> dict[int, int]:
    """rank -> pipeline stage from any per-rank table of the document that carries ``stage``."""
    out: dict[int, int] = {}
    for sec in (doc.get("sections") or {}).values():
        for rows in ((sec or {}).get("tables") or {}).values():
            if isinstance(rows, list) and rows and isinstance(rows[0], dict) and "stage" in rows[0] \
                    and "rank" in rows[0]:
                for r in rows:
                    if _num(r.get("rank")) is not None and _num(r.get("stage")) is not None:
                        out.setdefault(int(r["rank"]), int(r["stage"]))
        if out:
            return out
    return out


def op_stats(doc: dict) -> dict[str, Any] | None:
    """The op statistics of one metrics document (module doc): ``steps`` rank -> steps, ``rank_type`` (rank,
    type) -> [count, total_ms], ``names`` (type, name) -> [count, total_ms], ``comm`` (rank, op_type) -> [count,
    total_ms], ``stages`` rank -> stage; None when the document has no operators table."""
    t = _tables(doc)
    if not t.get("rank_type_ops"):
        return None
    steps: dict[int, float] = {}
    rank_type: dict[tuple, list] = {}
    for r in t["rank_type_ops"]:
        rank, total, count, per = _num(r.get("rank")), _num(r.get("total_ms")), _num(r.get("count")), \
            _num(r.get("per_step_ms"))
        if rank is None or total is None:
            continue
        rank = int(rank)
        if per and per > 0 and total > 0 and rank not in steps:
            steps[rank] = round(total / per)
        acc = rank_type.setdefault((rank, str(r.get("type"))), [0.0, 0.0])
        acc[0] += count or 0
        acc[1] += total
    run_steps = len((doc.get("run") or {}).get("steps") or []) or 1
    for rank, _type in rank_type:
        steps.setdefault(rank, run_steps)
    names: dict[tuple, list] = {}
    for r in t.get("type_name_ops", []):
        total = _num(r.get("total_ms"))
        if total is None:
            continue
        acc = names.setdefault((str(r.get("type")), str(r.get("name"))), [0.0, 0.0])
        acc[0] += _num(r.get("count")) or 0
        acc[1] += total
    comm: dict[tuple, list] = {}
    comm_steps: dict[int, float] = {}
    for r in t.get("comm_type_ops", []):
        rank, total, per = _num(r.get("rank")), _num(r.get("total_ms")), _num(r.get("per_step_ms"))
        if rank is None or total is None:
            continue
        if per and per > 0 and total > 0 and int(rank) not in comm_steps:
            comm_steps[int(rank)] = round(total / per)
        acc = comm.setdefault((int(rank), str(r.get("op_type"))), [0.0, 0.0])
        acc[0] += _num(r.get("count")) or 0
        acc[1] += total
    for rank, _type in comm:
        comm_steps.setdefault(rank, steps.get(rank, run_steps))
    return {"steps": steps, "rank_type": rank_type, "names": names, "comm": comm, "comm_steps": comm_steps,
            "stages": _stages(doc)}


def _rows(now: dict[tuple, list], base: dict[tuple, list], steps_now: float, steps_base: float,
          keys: tuple[str, ...], group_steps=None) -> list[dict]:
    """Diff rows of two {key: [count, total_ms]} maps (module doc, "Definitions"); ``group_steps(key, which)``
    gives the rank-steps of a key's group when it is not the whole (``steps_now`` / ``steps_base``)."""
    out = []
    for k in set(now) | set(base):
        sn = group_steps(k, "now") if group_steps else steps_now
        sb = group_steps(k, "base") if group_steps else steps_base
        cn, tn = now.get(k, (0.0, 0.0))
        cb, tb = base.get(k, (0.0, 0.0))
        mn = tn / sn if sn else None
        mb = tb / sb if sb else None
        if mn is None or mb is None:
            continue
        row = dict(zip(keys, k if isinstance(k, tuple) else (k,)))
        row.update({"per_step_ms": mn, "baseline_per_step_ms": mb, "delta_per_step_ms": mn - mb,
                    "delta_ratio": mn / mb - 1 if mb else None,
                    "per_step_count": cn / sn, "baseline_per_step_count": cb / sb,
                    "delta_per_step_count": cn / sn - cb / sb,
                    "status": "both" if k in now and k in base else ("only_now" if k in now else "only_baseline")})
        out.append(row)
    out.sort(key=lambda r: (-abs(r["delta_per_step_ms"]), str(r.get(keys[0]))))
    return out


def _by(items: dict[tuple, list], key) -> dict[tuple, list]:
    out: dict[tuple, list] = {}
    for k, (c, t) in items.items():
        kk = key(k)
        if kk is None:
            continue
        acc = out.setdefault(kk, [0.0, 0.0])
        acc[0] += c
        acc[1] += t
    return out


def diff(now_doc: dict, base_doc: dict, top: int = TOP_ROWS) -> dict[str, Any] | None:
    """The operator-level diff of two metrics documents (module doc); None when either has no op statistics.

    Tables: ``types`` (per op type over the cluster), ``rank_types`` (per rank and op type, ranks in both runs),
    ``stage_types`` (per pipeline stage and op type, when both runs have several stages), ``names`` (per operator
    name), ``comm_types`` (per communication op type over the cluster) and ``rank_comm_types``; each the first
    ``top`` rows by |delta_per_step_ms|. ``added`` / ``removed``: the op types and names in one run only."""
    now, base = op_stats(now_doc), op_stats(base_doc)
    if now is None or base is None:
        return None
    rsn, rsb = float(sum(now["steps"].values())), float(sum(base["steps"].values()))
    types = _rows(_by(now["rank_type"], lambda k: k[1]), _by(base["rank_type"], lambda k: k[1]), rsn, rsb,
                  ("type",))
    common = set(now["steps"]) & set(base["steps"])
    rank_types = _rows({k: v for k, v in now["rank_type"].items() if k[0] in common},
                       {k: v for k, v in base["rank_type"].items() if k[0] in common}, 0, 0, ("rank", "type"),
                       lambda k, w: (now if w == "now" else base)["steps"].get(k[0], 0))
    out: dict[str, Any] = {"top": top, "types": types[:top], "rank_types": rank_types[:top]}
    sn_, sb_ = now["stages"], base["stages"]
    if len(set(sn_.values())) > 1 and len(set(sb_.values())) > 1:
        def stage_steps(which: dict, stages: dict):
            acc: dict[int, float] = {}
            for r, s in which["steps"].items():
                if r in stages:
                    acc[stages[r]] = acc.get(stages[r], 0) + s
            return acc

        ssn, ssb = stage_steps(now, sn_), stage_steps(base, sb_)
        out["stage_types"] = _rows(
            _by(now["rank_type"], lambda k: (sn_[k[0]], k[1]) if k[0] in sn_ else None),
            _by(base["rank_type"], lambda k: (sb_[k[0]], k[1]) if k[0] in sb_ else None), 0, 0, ("stage", "type"),
            lambda k, w: (ssn if w == "now" else ssb).get(k[0], 0))[:top]
    names = _rows(now["names"], base["names"], rsn, rsb, ("type", "name"))
    out["names"] = names[:top]
    if now["comm"] or base["comm"]:
        csn = float(sum(now["comm_steps"].values())) or rsn
        csb = float(sum(base["comm_steps"].values())) or rsb
        out["comm_types"] = _rows(_by(now["comm"], lambda k: k[1]), _by(base["comm"], lambda k: k[1]), csn, csb,
                                  ("op_type",))[:top]
        out["rank_comm_types"] = _rows(
            {k: v for k, v in now["comm"].items() if k[0] in common},
            {k: v for k, v in base["comm"].items() if k[0] in common}, 0, 0, ("rank", "op_type"),
            lambda k, w: (now if w == "now" else base)["comm_steps"].get(k[0], 0))[:top]
    out["added"] = {"types": sorted(r["type"] for r in types if r["status"] == "only_now")[:top],
                    "names": sorted(r["name"] for r in names if r["status"] == "only_now")[:top]}
    out["removed"] = {"types": sorted(r["type"] for r in types if r["status"] == "only_baseline")[:top],
                      "names": sorted(r["name"] for r in names if r["status"] == "only_baseline")[:top]}
    out["ranks_not_compared"] = sorted(set(now["steps"]) ^ set(base["steps"]))[:top]
    out["definition"] = ("per step per rank, over the steps in scope of each run: the group's time over the ranks / their steps (opstats rows, the "
                         "operators section's tables); delta = this run - baseline, > 0 = slower; sorted by "
                         "|delta| (reportgen/opdiff.py)")
    return out
