"""What the page's findings name, and the one way every view that thins its data keeps it (issue 28 #4).

A big run cannot draw every rank, step or group: charts sample them. Whatever a finding names (its ranks, the
ranks it outlines, the step and the control values its link sets, its links) must be drawn in the view the
finding links to and offered by that view's controls. The sections therefore present after every finding is
known (:func:`reportgen.sections.run_sections`: analyse all, the advisor, then present): each analysis carries the
page's :class:`Focus` (``analysis.focus``) and every sample on the page goes through :func:`keep_sample`.

* :func:`keep_sample` - at most ``limit`` items evenly spaced over ``items`` (their order kept), plus every item of
  ``keep`` that is among them (kept items count against the limit first; more kept items than the limit are all
  kept).
* :class:`Focus` - ranks / steps / links / control values the findings name, and the page's one default step
  (the median step in scope: the Marey view opens on it and every step selector offers it).
* :func:`of` - the focus an analysis carries (an empty one in unit tests that call ``present`` directly).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

#: ranks one finding adds to the page's focus: a finding about a whole stage or host names hundreds of ranks (1024
#: ranks in 4 stages: 256); it is shown by its stage / host control, and its first ranks are drawn
MAX_RANKS_PER_FINDING = 16


def keep_sample(items: Sequence, limit: int, keep: Iterable = ()) -> list:
    """``items`` thinned to ``limit`` (order kept): every item of ``keep`` that is in ``items``, then evenly
    spaced others up to ``limit`` in all (first and last included when there is room). ``limit`` <= 0 keeps only
    the ``keep`` items. Items equal to a ``keep`` value as text count as kept (a step 3 and a step "3")."""
    items = list(items)
    if len(items) <= limit:
        return items
    keys = {str(k) for k in keep}
    kept = [i for i, x in enumerate(items) if str(x) in keys]
    room = max(0, limit - len(kept))
    chosen = set(kept)
    if room:
        rest = [i for i in range(len(items)) if i not in chosen]
        if room == 1:
            picks = [rest[len(rest) // 2]]
        else:
            picks = [rest[round(j * (len(rest) - 1) / (room - 1))] for j in range(room)]
        chosen.update(picks)
    return [items[i] for i in sorted(chosen)]


def _int(v) -> int | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if f == f and f == int(f) else None


@dataclass(frozen=True)
class Focus:
    """What the page's findings name (:func:`from_findings`)."""

    ranks: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()
    links: tuple[tuple[int, int], ...] = ()
    #: control signal -> the values finding links set it to (``domain`` -> group option values, ``stage_sel``...)
    signals: dict[str, tuple] = field(default_factory=dict)
    #: the page's one default step (the median step in scope; None: unknown)
    default_step: int | None = None

    def steps_to_keep(self) -> list[int]:
        """The steps every step sample keeps: the default step and the steps findings cite."""
        return sorted(set(self.steps) | ({self.default_step} if self.default_step is not None else set()))

    def values(self, signal: str) -> tuple:
        """The values finding links set ``signal`` to."""
        return self.signals.get(signal, ())

    def ranks_in(self, ranks: Iterable) -> list[int]:
        """The focus ranks among ``ranks``."""
        have = {int(r) for r in ranks}
        return [r for r in self.ranks if r in have]


EMPTY = Focus()


def from_findings(findings: Iterable, default_step: int | None = None) -> Focus:
    """The focus of ``findings`` (:class:`reportgen.report.Finding` objects): each one's ranks (up to
    :data:`MAX_RANKS_PER_FINDING`), the ranks its view outlines, its rank comparison pair, its links (both ends are
    ranks too), the step its view or evidence names and every other value its view sets."""
    ranks: dict[int, None] = {}
    steps: set[int] = set()
    links: dict[tuple[int, int], None] = {}
    signals: dict[str, dict] = {}
    for f in findings:
        for r in list(f.ranks)[:MAX_RANKS_PER_FINDING] + list(f.compare or []):
            if _int(r) is not None:
                ranks.setdefault(_int(r))
        for lk in f.links or []:
            if len(lk) == 2 and _int(lk[0]) is not None and _int(lk[1]) is not None:
                links.setdefault((_int(lk[0]), _int(lk[1])))
                ranks.setdefault(_int(lk[0]))
                ranks.setdefault(_int(lk[1]))
        ev = f.evidence or {}
        if _int(ev.get("step")) is not None and not isinstance(ev.get("step"), bool):
            steps.add(_int(ev["step"]))
        view = f.view
        for name, value in ((view.signals if view is not None else {}) or {}).items():
            if name == "focus_ranks":
                for r in list(value or [])[:MAX_RANKS_PER_FINDING]:
                    if _int(r) is not None:
                        ranks.setdefault(_int(r))
                continue
            if name == "step" and _int(value) is not None:
                steps.add(_int(value))
            if isinstance(value, (list, dict)):
                continue
            signals.setdefault(name, {}).setdefault(value, None)
    return Focus(ranks=tuple(ranks), steps=tuple(sorted(steps)), links=tuple(links),
                 signals={k: tuple(v) for k, v in signals.items()}, default_step=default_step)


def of(analysis: Any) -> Focus:
    """The page's focus an analysis carries (set by the runner before ``present``), else :data:`EMPTY`."""
    return getattr(analysis, "focus", None) or EMPTY
