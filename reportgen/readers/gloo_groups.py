"""Which process group each gloo collective ran in, when the trace does not say.

A gloo CPU trace records each collective twice: a ``c10d::<op>`` CPU op on the calling thread (it enqueues the
work) and a ``gloo:<op>`` span on one of the process group's own worker threads (it does the work). Without
``record_param_comms`` (gloo writes none) neither names the group, so the collectives of a TP group {0,1} and of
{2,3} look alike and matching "the n-th all_reduce" across ranks mixes groups (the who-waited-for-whom facts and
every transit / wait derived from the instance minimum). Facts used (torch ``ProcessGroupGloo``; checked on the
diagnosis benchmark's runs, bench/diagnosis):

* each process group runs its work on threads of its own (``options->threads``, 2 by default), so every
  ``gloo:<op>`` span of one worker thread belongs to one group;
* a collective completes on every member at about the same moment (it cannot end before the last member's data
  arrived), so on ranks that share a clock a worker thread's spans end together with spans of the same collective
  and element count on the other members of its group, and only by chance on other ranks;
* each rank's ``distributedInfo.pg_config`` lists the groups it is in (``groups`` table, global ranks).

:func:`assign` therefore scores, for each worker thread of each rank, every group the rank is in: the share of the
thread's spans matched (same collective and element count, end within :data:`END_TOLERANCE_MS` + 1 % of the span) on
each other member, minus the share matched on ranks outside the group (matches by chance); the best group wins when
its members match at least :data:`MIN_MEMBER_MATCH` of the spans and it beats the next by :data:`MIN_MARGIN`.
Threads it cannot place (clocks of several hosts, a thread with one span) fall back to creation order when that is
unambiguous: ``ProcessGroupGloo`` creates its threads in the order the groups are created, which is ``pg_name``
order, so a rank whose worker threads split evenly over its groups gets them in that order. Threads placed by
neither keep no group (a data problem says how many spans).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

#: a span's end matches a member's span of the same collective within this much (ms) + 5 % of the span
END_TOLERANCE_MS = 0.3
#: a group is taken when its other members matched at least this share of the thread's spans ...
MIN_MEMBER_MATCH = 0.5
#: ... and its score beats the runner-up's by this much
MIN_MARGIN = 0.2
#: ranks beyond which the end-time matching is not tried (it compares each thread with every rank of its groups)
MAX_MATCH_RANKS = 256
#: threads with fewer spans are not judged by their ends (two spans match by chance as often as not)
MIN_SPANS = 4
_P2P = ("send", "recv")


def _ranks_of(value) -> tuple[int, ...] | None:
    if isinstance(value, (list, tuple, np.ndarray)):
        try:
            return tuple(sorted(int(v) for v in value))
        except (TypeError, ValueError):
            return None
    return None


def _numeric(name) -> tuple:
    try:
        return (0, int(str(name)), "")
    except ValueError:
        return (1, 0, str(name))


def assign(coll: pd.DataFrame | None, groups: pd.DataFrame | None, main_tids: dict | None = None
           ) -> tuple[pd.DataFrame | None, int]:
    """``coll`` with ``group_name`` / ``group_desc`` / ``group_ranks`` / ``group_size`` filled for the gloo
    collective spans that had no group (module doc), and how many such spans stayed without one."""
    if coll is None or coll.empty or groups is None or groups.empty or "tid" not in coll:
        return coll, 0
    no_group = coll["group_ranks"].fillna("").astype(str).eq("") & coll["group_name"].fillna("").astype(str).eq("")
    sel = coll[(coll["source"] == "gloo") & no_group & ~coll["collective"].isin(_P2P)]
    if sel.empty:
        return coll, 0
    pgs = []
    for row in groups.itertuples():
        ranks = _ranks_of(row.ranks)
        if ranks and len(ranks) >= 2:
            pgs.append((str(row.group), str(row.name), ranks))
    by_rank: dict[int, list] = {}
    for g in pgs:
        for r in g[2]:
            by_rank.setdefault(r, []).append(g)
    ends = {}
    if sel["rank"].nunique() <= MAX_MATCH_RANKS:
        for (rank, coll_, n), g in sel.groupby(["rank", "collective", "in_nelems"], sort=False):
            ends[(int(rank), coll_, n)] = np.sort(g["end_ms"].to_numpy(float))
    placed: dict[tuple[int, int], tuple] = {}
    pending = []
    for rank, t in sel.groupby("rank", sort=False):
        rank = int(rank)
        cands = sorted(by_rank.get(rank) or [], key=lambda g: _numeric(g[0]))
        threads = {int(x): g for x, g in t.groupby("tid", sort=False) if (main_tids or {}).get(rank) != int(x)}
        if not cands or not threads:
            continue
        others = sorted({r for g in cands for r in g[2]} - {rank})
        scores = {}
        for x, g in threads.items():
            if ends and len(g) >= MIN_SPANS:
                parts = _thread_parts(g)  # split once, matched against every other rank
                match = {s: _match_share(parts, len(g), s, ends) for s in others}
                scores[x] = {c: _score(match, c, rank, others) for c in cands}
        # creation order (module doc), kept when the ends do not contradict it
        tids = sorted(threads)
        if len(tids) % len(cands) == 0:
            k = len(tids) // len(cands)
            order = {x: cands[i // k] for i, x in enumerate(tids)}
            if all(scores[x][order[x]][0] > 0 for x in scores):
                placed.update({(rank, x): order[x] for x in tids})
                continue
        for x, sc in scores.items():  # else the ends alone, where they are clear
            ranked = sorted(sc.items(), key=lambda kv: -kv[1][0])
            (best, (score, member)), runner = ranked[0], ranked[1][1][0] if len(ranked) > 1 else -1.0
            if member >= MIN_MEMBER_MATCH and score - runner >= MIN_MARGIN:
                placed[(rank, x)] = best
        pending.append((rank, tids, cands))
    active = set(placed.values())  # groups with spans placed on some member
    for rank, tids, cands in pending:
        _between_anchors(rank, tids, cands, placed, active)
    if not placed:
        return coll, len(sel)
    key = list(zip(sel["rank"].astype(int), sel["tid"].astype(int)))
    hit = [placed.get(k) for k in key]
    ok = np.array([h is not None for h in hit])
    idx = sel.index[ok]
    out = coll.copy()
    out.loc[idx, "group_name"] = [h[0] for h in hit if h is not None]
    out.loc[idx, "group_desc"] = [h[1] for h in hit if h is not None]
    out.loc[idx, "group_ranks"] = [str(list(h[2])) for h in hit if h is not None]
    out.loc[idx, "group_size"] = [len(h[2]) for h in hit if h is not None]
    return out, int((~ok).sum())


def _between_anchors(rank: int, tids: list[int], cands: list[tuple], placed: dict, active: set) -> None:
    """Threads the ends could not place, by creation order around the placed ones: a group's threads are created
    together, groups in ``pg_name`` order; an unplaced thread lies between the groups of the placed threads just
    below and above it, and is given the one group there that still lacks threads (as many per group as the
    placed groups have; when several do, the group of a placed thread whose id is next to it, else the one group
    among them whose spans were placed on another member (a group running no collective has idle threads))."""
    per = {}
    for x in tids:
        g = placed.get((rank, x))
        if g is not None:
            per[g] = per.get(g, 0) + 1
    if not per:
        return
    k = max(per.values())
    idx = {g: i for i, g in enumerate(cands)}
    for x in tids:
        if (rank, x) in placed:
            continue
        below = [idx[placed[(rank, y)]] for y in tids if y < x and (rank, y) in placed]
        above = [idx[placed[(rank, y)]] for y in tids if y > x and (rank, y) in placed]
        lo, hi = (max(below) if below else 0), (min(above) if above else len(cands) - 1)
        free = [g for g in cands[lo:hi + 1] if per.get(g, 0) < k]
        if len(free) > 1:  # a group's threads are created one after the other: ids next to each other
            near = {placed[(rank, y)] for y in tids if 0 < abs(y - x) <= 2 and (rank, y) in placed} & set(free)
            free = list(near) if len(near) == 1 else [g for g in free if g in active] if len(
                [g for g in free if g in active]) == 1 else free
        if len(free) == 1:
            placed[(rank, x)] = free[0]
            per[free[0]] = per.get(free[0], 0) + 1


def _score(match: dict, group: tuple, rank: int, others: list) -> tuple[float, float]:
    """(members' match share - non-members' match share, members' match share) of one thread for one group."""
    mem = [s for s in group[2] if s != rank]
    non = [s for s in others if s not in group[2]]
    m = float(np.mean([match[s] for s in mem])) if mem else 0.0
    x = float(np.mean([match[s] for s in non])) if non else 0.0
    return m - x, m


def _thread_parts(t: pd.DataFrame) -> list[tuple[tuple, np.ndarray, np.ndarray]]:
    """A thread's spans per (collective, element count): (key, ends, tolerances), for :func:`_match_share`."""
    coll, n = t["collective"].to_numpy(), t["in_nelems"].to_numpy()
    ok = pd.notna(coll) & pd.notna(n)  # as groupby: a span without a key is in no group
    cc, cu = pd.factorize(coll[ok])
    nc, nu = pd.factorize(n[ok])
    code = cc.astype(np.int64) * max(1, len(nu)) + nc
    order = np.argsort(code, kind="stable")
    code = code[order]
    cut = np.flatnonzero(np.diff(code)) + 1
    end = t["end_ms"].to_numpy(float)[ok][order]
    tol = END_TOLERANCE_MS + 0.01 * t["dur_ms"].to_numpy(float)[ok][order]
    return [((cu[code[a] // max(1, len(nu))], nu[code[a] % max(1, len(nu))]), e, d)
            for a, e, d in zip(np.r_[0, cut].astype(int), np.split(end, cut), np.split(tol, cut))] if len(code) else []


def _match_share(parts: list, n: int, s: int, ends: dict) -> float:
    """Share of the thread's ``n`` spans (``parts``: :func:`_thread_parts`) that rank ``s`` has a span of the same
    collective and element count ending within the tolerance of."""
    hits = 0
    for (coll_, n_el), e, tol in parts:
        other = ends.get((s, coll_, n_el))
        if other is None or not len(other):
            continue
        i = np.clip(np.searchsorted(other, e), 1, len(other) - 1) if len(other) > 1 else np.zeros(len(e), int)
        near = np.minimum(np.abs(other[i] - e), np.abs(other[np.maximum(i - 1, 0)] - e))
        hits += int((near <= tol).sum())
    return hits / n
