"""Profiling windows: several profiler outputs of one rank in one run directory (issue 27 point 8).

Dynamic profiling (torch_npu ``dynamic_profile``, MindSpore ``DynamicProfilerMonitor``, a ``torch.profiler``
schedule with ``repeat`` > 1) writes one output per rank per *window* (a span of steps), e.g.
``rank0_start8_stop10/..._ascend_ms`` beside ``rank0_start20_stop22/...``. Two windows of one rank must never
be mixed into one table, so the readers hand every rank's outputs to :func:`group`, which forms the windows,
and :func:`choose`, which keeps one:

* **Grouping** (:func:`group`): the outputs, in order of their start time, join the current window unless the
  rank is already in it (an output of that rank whose collection overlaps the one there is a copy of the same
  window: the reader's own duplicate rule picks one), or both name their steps (a ``start<N>_stop<M>`` label in the path, else the steps the
  output records) and the steps differ, or, when steps are not known, it starts more than
  :data:`SAME_WINDOW_S` seconds after the window's first output. Windows are numbered 1, 2, ... by start time.
* **Default choice** (:data:`RULE`): the newest complete window, i.e. the one with every rank found in any
  window, latest start; when no window is complete, the one with the most ranks, latest start.
* ``--window N|NAME`` (:data:`WANTED`, set by :func:`reportgen.readers.read_run`) picks window N (1-based, as
  listed) or the window whose name, or one of whose directory / file names, is NAME.

The windows found are described by :func:`describe` (the run's ``windows``: the summary and the metrics JSON)
and :func:`problems` (one data problem per window not read, naming its ranks, steps and how to pick it).
"""

from __future__ import annotations

import contextvars
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..fmt import rank_ranges
from ..limits import cap_text

#: the ``--window`` value of the report being read (None: the default choice); a context variable so that
#: concurrent in-process reads do not see each other's
WANTED: contextvars.ContextVar[str | None] = contextvars.ContextVar("reportgen_window", default=None)
#: outputs without step numbers that start within this many seconds of a window's first output belong to it
SAME_WINDOW_S = 60.0
#: the default choice, as the summary states it
RULE = ("the newest complete window (every rank found, latest start; when no window has every rank, the one "
        "with the most ranks, latest start)")
#: ``start8_stop10`` (MindSpore DynamicProfilerMonitor's ``rank0_start8_stop10`` folders)
_LABEL = re.compile(r"start_?(\d+)_stop_?(\d+)", re.I)
#: windows described one by one (the rest are counted)
MAX_LISTED = 20


@dataclass
class Member:
    """One profiler output of one rank: ``key`` is what the reader needs back (its directory object)."""

    rank: int
    path: Path
    key: Any
    start_ns: int | None = None
    end_ns: int | None = None
    steps: tuple[int, ...] = ()
    order: str = ""  # tie-breaker / fallback order (a time stamp string)


@dataclass
class Window:
    number: int
    members: dict[int, Member] = field(default_factory=dict)
    label: str = ""
    #: further copies of a member's window (same rank, same steps): the reader chooses among them
    extra: list[Member] = field(default_factory=list)

    @property
    def keys(self) -> list:
        """What the reader gave for every member and copy (its directory objects)."""
        return [m.key for m in self.members.values()] + [m.key for m in self.extra]

    @property
    def ranks(self) -> list[int]:
        return sorted(self.members)

    @property
    def start_ns(self) -> int | None:
        s = [m.start_ns for m in self.members.values() if m.start_ns is not None]
        return min(s) if s else None

    @property
    def end_ns(self) -> int | None:
        s = [m.end_ns for m in self.members.values() if m.end_ns is not None]
        return max(s) if s else None

    @property
    def steps(self) -> list[int]:
        return sorted({s for m in self.members.values() for s in m.steps})

    @property
    def name(self) -> str:
        """The label (``start8_stop10``) when the paths carry one, else ``steps8-10`` when the steps are known,
        else ``window<N>``."""
        if self.label:
            return self.label
        steps = self.steps
        if steps:
            return f"steps{steps[0]}-{steps[-1]}" if len(steps) > 1 else f"step{steps[0]}"
        return f"window{self.number}"


def label_of(path: Path) -> str:
    """``start<N>_stop<M>`` named in the path (the last such part), else ""."""
    for part in reversed(Path(path).parts):
        m = _LABEL.search(part)
        if m:
            return f"start{int(m.group(1))}_stop{int(m.group(2))}"
    return ""


def _label_steps(label: str) -> tuple[int, ...]:
    m = _LABEL.search(label)
    if not m:
        return ()
    a, b = int(m.group(1)), int(m.group(2))
    return tuple(range(a, b + 1)) if 0 <= b - a <= 100_000 else ()


def _duplicate(a: Member, b: Member, label: str, steps: tuple[int, ...]) -> bool:
    """``b`` holds the same window of the same rank as ``a`` (a copy, or a cut copy): the same label, else
    overlapping collection times (one rank is never profiled twice at once), else the same known steps, else the
    same start time."""
    la = label_of(a.path)
    if la and label:
        return la == label
    if None not in (a.start_ns, a.end_ns, b.start_ns, b.end_ns):
        return a.start_ns <= b.end_ns and b.start_ns <= a.end_ns
    if a.steps and steps:
        return tuple(sorted(a.steps)) == tuple(sorted(steps))
    return a.start_ns is not None and a.start_ns == b.start_ns


def _sort_key(m: Member):
    return (m.start_ns is None, m.start_ns or 0, m.order, str(m.path))


def group(members: list[Member]) -> list[Window]:
    """The windows of ``members`` (module doc, "Grouping"), numbered by start time."""
    windows: list[Window] = []
    cur: Window | None = None
    first: Member | None = None
    for m in sorted(members, key=_sort_key):
        label = label_of(m.path)
        steps = m.steps or _label_steps(label)
        if cur is not None and m.rank in cur.members and _duplicate(cur.members[m.rank], m, label, steps):
            cur.extra.append(m)  # a second copy of the same window: the reader's own rule picks one
            continue
        join = cur is not None and m.rank not in cur.members
        if join and label and cur.label:
            join = label == cur.label
        elif join and steps and cur.steps:
            join = tuple(sorted(steps)) == tuple(cur.steps)
        elif join and m.start_ns is not None and first.start_ns is not None:
            join = (m.start_ns - first.start_ns) <= SAME_WINDOW_S * 1e9
        if not join:
            cur = Window(len(windows) + 1, label=label)
            first = m
            windows.append(cur)
        if steps and not m.steps:
            m.steps = steps
        cur.members[m.rank] = m
    return windows


def _matches(w: Window, wanted: str) -> bool:
    if wanted == w.name or wanted == w.label:
        return True
    return any(wanted in (m.path.name, str(m.path)) or wanted in m.path.parts for m in w.members.values())


def choose(windows: list[Window], wanted: str | None, where: Path) -> tuple[Window, str]:
    """(the window read, why): ``wanted`` (``--window``) when given, else the default :data:`RULE`. An unknown
    ``wanted`` raises :class:`InputError` listing the windows."""
    if wanted is not None and str(wanted).strip():
        wanted = str(wanted).strip()
        hit = None
        if wanted.isdigit() and 1 <= int(wanted) <= len(windows):
            hit = windows[int(wanted) - 1]
        else:
            hit = next((w for w in windows if _matches(w, wanted)), None)
        if hit is None:
            listed = "; ".join(f"{w.number} = {w.name}" for w in windows[:MAX_LISTED])
            raise InputError(where, f"--window {cap_text(wanted, 80)}: no such profiling window (found "
                                    f"{len(windows)}: {listed})")
        return hit, f"picked with --window {cap_text(wanted, 80)}"
    every = set().union(*(w.members for w in windows)) if windows else set()
    complete = [w for w in windows if set(w.members) == every]
    pool = complete or [w for w in windows if len(w.members) == max(len(x.members) for x in windows)]
    best = max(pool, key=lambda w: (w.start_ns if w.start_ns is not None else -1, w.number))
    return best, f"chosen by the default rule: {RULE}"


def _rel(p: Path, root: Path) -> str:
    try:
        return Path(p).relative_to(root).as_posix() or "."
    except ValueError:
        return str(p)


def _where(w: Window, root: Path) -> str:
    """The folder (or file) holding a window's outputs, relative to ``root``."""
    import os

    paths = sorted(str(m.path) for m in w.members.values())
    if not paths:
        return ""
    return _rel(Path(os.path.commonpath(paths)) if len(paths) > 1 else Path(paths[0]), root)


def describe(windows: list[Window], chosen: Window, why: str, root: Path) -> list[dict]:
    """The run's ``windows``: one dict per window (number, name, ranks, steps, start / end, where, read)."""
    out = []
    origin = min((w.start_ns for w in windows if w.start_ns is not None), default=None)
    wheres = {w.number: _where(w, root) for w in windows[:MAX_LISTED]}
    shared = {x for x in wheres.values() if list(wheres.values()).count(x) > 1}
    for w in windows[:MAX_LISTED]:
        where = wheres[w.number]
        if where in shared:  # windows side by side in one folder: name their files
            paths = sorted(m.path for m in w.members.values())
            where = _rel(paths[0], root) + (f" and {len(paths) - 1} more" if len(paths) > 1 else "")
        d = {"number": w.number, "name": w.name, "ranks": w.ranks, "steps": w.steps,
             "start_ms": (w.start_ns - origin) / 1e6 if w.start_ns is not None and origin is not None else None,
             "duration_ms": (w.end_ns - w.start_ns) / 1e6 if w.start_ns is not None and w.end_ns is not None
             else None,
             "where": cap_text(where, 300), "read": w is chosen,
             "how_to_pick": f"--window {w.number}" + (f" or --window {w.name}" if w.name != f"window{w.number}"
                                                      else "")}
        if w is chosen:
            d["why"] = why
        out.append(d)
    return out


def text(d: dict) -> str:
    """One window in words (summary, data problems)."""
    steps = f"steps {rank_ranges(d['steps'])}" if d["steps"] else "steps not recorded"
    when = f", starts {d['start_ms'] / 1e3:.1f} s after the first window" if d.get("start_ms") else ""
    span = f", {d['duration_ms'] / 1e3:.2f} s long" if d.get("duration_ms") is not None else ""
    ranks = f"rank{'s' if len(d['ranks']) != 1 else ''} {rank_ranges(d['ranks'])}"
    return f"window {d['number']} '{d['name']}': {ranks}, {steps}{when}{span}, in {d['where']} ({d['how_to_pick']})"


def note(described: list[dict], total: int) -> str:
    """The run note naming every window and the one read."""
    read = next(d for d in described if d["read"]) if any(d["read"] for d in described) else None
    head = (f"{total} profiling window{'s' if total != 1 else ''} found (several profiler outputs per rank; two "
            "windows are never mixed). " if total != 1 else "1 profiling window found. ")
    if read is not None:
        head += f"This report reads window {read['number']} '{read['name']}', {read['why']}. "
    listed = "; ".join(text(d) for d in described)
    more = f"; and {total - len(described)} more" if total > len(described) else ""
    return head + "Windows: " + listed + more + "."


def problems(described: list[dict], root: Path) -> list[tuple[str, str]]:
    """One data problem per window not read: its directory (``root`` / where) and what it holds."""
    return [(str(Path(root) / d["where"]), f"profiling {text(d)}: not read, another window was") for d in described if not d["read"]]
