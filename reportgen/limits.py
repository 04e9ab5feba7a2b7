"""Bounds that hold whatever the input claims, and the one way readers report values they refuse.

Profiler output is often truncated, edited or hostile. A number or a count written in a file is a *claim*;
memory, time and the size of the report must depend only on what was actually found, never on a claim.
Every reader checks its input at the edge with the functions here, so the rules (and their wording in the
data-problems list) are the same for every family:

* :data:`MAX_RANKS` - ceiling of a world size, a group size and a rank id (2^20; the largest published
  training runs have ~10^5 devices). A larger claim is a data problem and is never allocated.
* :func:`world_size` - a claimed world size checked against the ranks found.
* :func:`rank_id` - a rank id read from a file name or a field, checked.
* :data:`MAX_DURATION_MS` - one op, step or interval longer than a day is not a measurement.
* :func:`finite_ms` / :class:`Rejects` - strict numbers; rows with a bad cell are skipped and counted
  per file, column and reason (one data problem per kind, with the first line numbers), never used.
* :data:`MAX_NAME_CHARS` / :func:`cap_text` - untrusted names (ops, kernels, hosts, groups) are cut to a
  bounded length where they are read; the cut is visible ("…[+N chars]").
* :data:`MAX_PROBLEMS` - the data-problems list keeps the first entries and says how many more there were.
"""

from __future__ import annotations

import math
import re
from typing import Callable, Iterable

#: world size, group size and rank id ceiling (2^20 = 1,048,576 ranks)
MAX_RANKS = 1 << 20
#: one op, one step or one interval longer than this (one day, in ms) is not a measurement
MAX_DURATION_MS = 86_400_000.0
#: one size (memory, a transfer) larger than this (1 PB, in MB of 10^6 B) is not a measurement
MAX_SIZE_MB = 1e9
#: characters of one untrusted name kept (real C++ kernel names reach ~2,000; longer ones are cut)
MAX_NAME_CHARS = 4096
#: entries of the run's data-problems list; more are counted in one last entry
MAX_PROBLEMS = 500
#: line numbers quoted per kind of rejected value
MAX_EXAMPLES = 5
#: ranks listed one by one (missing ranks of a world-size claim, members of one group); more are only counted
MAX_LISTED_RANKS = 4096

ProblemFn = Callable[[str, str], None]  # (path, problem) -> None, e.g. Run.problem or list.append of a tuple


def cap_text(text, limit: int = MAX_NAME_CHARS) -> str:
    """``text`` as str, cut to ``limit`` characters with the cut stated (``…[+N chars]``)."""
    s = text if isinstance(text, str) else str(text)
    if len(s) <= limit:
        return s
    return f"{s[:limit]}…[+{len(s) - limit} chars]"


def as_int(value) -> int | None:
    """An integer from an int, an integral float or a decimal string (spaces allowed); None otherwise.

    Bools, NaN, inf, fractions and text are None: a count or an id is never guessed from them."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) and value.is_integer() else None
    if isinstance(value, str):
        t = value.strip()
        if t[:1] in ("+", "-"):  # ("" in "+-" would be true)
            sign, t = t[0], t[1:]
        else:
            sign = ""
        if t.isdecimal() and t.isascii() and len(t) <= 19:
            return int(sign + t)
        return None
    try:  # numpy integers
        import numpy as np

        if isinstance(value, np.integer):
            return int(value)
        if isinstance(value, np.floating):
            return as_int(float(value))
    except ImportError:  # pragma: no cover
        pass
    return None


def rank_id(value, path, problem: ProblemFn, what: str = "rank id") -> int | None:
    """A global rank id read from ``path``: an int in ``0 .. MAX_RANKS-1``, else None with a data problem."""
    n = as_int(value)
    if n is None or not 0 <= n < MAX_RANKS:
        shown = cap_text(repr(value), 40)
        problem(str(path), f"{what} {shown} is not a rank number in 0..{MAX_RANKS - 1}; ignored")
        return None
    return n


def world_size(claimed, found: Iterable[int], path, problem: ProblemFn, what: str = "world size") -> int | None:
    """The world size to use given a ``claimed`` value (from ``path``) and the ranks ``found`` in the data.

    A claim that is not a whole number, is < 1, is above :data:`MAX_RANKS`, or is not above the highest rank
    found is a data problem: the found ranks' count (highest id + 1) is used instead. A valid claim larger
    than what was found is kept (missing ranks are reported elsewhere)."""
    found = list(found)
    top = max(found) + 1 if found else None
    if claimed is None:
        return top
    n = as_int(claimed)
    if n is None or n < 1 or n > MAX_RANKS:
        problem(str(path), f"{what} {cap_text(repr(claimed), 40)} is not a usable rank count (1..{MAX_RANKS}); "
                           f"{'the ranks found are used' if top else 'ignored'}")
        return top
    if top is not None and n < top:
        problem(str(path), f"{what} {n} is smaller than the ranks found (highest rank {top - 1}); "
                           f"{top} is used")
        return top
    return n


def finite_number(value, *, negative: bool = False, limit: float = math.inf, over: str = "too large") -> str | None:
    """Why a number is refused (``"missing"``, ``"not a number"``, ``"infinite"``, ``"negative"``, ``over`` when
    its magnitude is above ``limit``) or None if fine."""
    if value is None or isinstance(value, bool):
        return "missing"
    try:
        v = float(value)
    except (TypeError, ValueError):
        return "not a number"
    except OverflowError:
        return over
    if math.isnan(v):
        return "not a number"
    if math.isinf(v):
        return "infinite"
    if v < 0 and not negative:
        return "negative"
    if abs(v) > limit:
        return over
    return None


def missing_ranks(world: int | None, found) -> tuple[list[int], int]:
    """Ranks of ``0..world-1`` without data: ``(ids, 0)`` when at most :data:`MAX_LISTED_RANKS` are missing, else
    ``([], how many)`` - a large valid world-size claim is counted, never expanded into a list."""
    if not world:
        return [], 0
    have = {r for r in found if 0 <= r < world}
    absent = world - len(have)
    if absent > MAX_LISTED_RANKS:
        return [], absent
    return [r for r in range(world) if r not in have], 0


def finite_ms(value: float, *, negative: bool = False, limit: float = MAX_DURATION_MS) -> str | None:
    """Why a duration in ms is refused (``"not a number"``, ``"negative"``, ``"over one day"``) or None if fine."""
    return finite_number(value, negative=negative, limit=limit, over="over one day")


def _plural(word: str) -> str:
    return word[:-1] + "ies" if word.endswith("y") else word + "s"


class Rejects:
    """Values refused at the reader edge, counted per (file, column, reason) and reported once per kind.

    ``add(path, line, column, reason)`` for each refused cell or row; ``flush(problem)`` emits one data
    problem per kind: ``"3 rows skipped: column 'total' negative (lines 4, 9, 12)"``. Memory is bounded
    by the number of kinds, not the number of bad rows."""

    def __init__(self) -> None:
        self.kinds: dict[tuple, list] = {}

    def add(self, path, line: int | str | None, column: str, reason: str, action: str = "row skipped",
            unit: str | tuple[str, str] = "line") -> None:
        """``line``: where the value was (a line number, an event index, a JSON entry...), counted in ``unit``:
        ``"line"``, another word (plural: + "s", a final "y" -> "ies", e.g. ``"event"``, ``"entry"``) or a
        (singular, plural) pair."""
        key = (str(path), cap_text(column, 80), reason, action, unit)
        entry = self.kinds.get(key)
        if entry is None:
            entry = self.kinds[key] = [0, []]
        entry[0] += 1
        if line is not None and len(entry[1]) < MAX_EXAMPLES:
            entry[1].append(cap_text(line, 120) if isinstance(line, str) else line)

    def __len__(self) -> int:
        return sum(e[0] for e in self.kinds.values())

    def flush(self, problem: ProblemFn) -> None:
        for (path, column, reason, action, unit), (count, lines) in self.kinds.items():
            word, _, rest = action.partition(" ")  # "row skipped" -> "rows skipped", "entry ..." -> "entries ..."
            plural = f"{_plural(word)} {rest}" if count != 1 and rest else action
            one, many = (unit, _plural(unit)) if isinstance(unit, str) else unit
            where = ""
            if lines:
                more = ", …" if count > len(lines) else ""
                where = f" ({one if len(lines) == 1 and not more else many} {', '.join(map(str, lines))}{more})"
            problem(path, f"{count} {plural}: {column} {reason}{where}")
        self.kinds.clear()


#: a count, size, rate or index larger than this (in the file's own unit) is not a measurement
MAX_MAGNITUDE = 1e15

_DECIMAL_TEXT = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,4})?")


def strict_float(value) -> float | None:
    """A float from a number (int, float; not bool) or a plain decimal text (ASCII digits, optional sign,
    point and exponent; spaces around allowed); None otherwise. ``"nan"``, ``"inf"``, ``"1_000"``,
    ``"0x10"``, other scripts' digits and empty text are None (Python's ``float()`` accepts most of them).
    A NaN or infinite *number* is returned as is: :func:`finite_value` / :func:`finite_ms` refuse it."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        try:
            return float(value)
        except OverflowError:  # an int beyond the float range
            return math.inf if value > 0 else -math.inf
    if isinstance(value, str):
        if value.isascii() and value.isdigit():  # the usual cell, fast
            return float(value)
        t = value.strip()
        if len(t) <= 400 and _DECIMAL_TEXT.fullmatch(t):
            return float(t)
        return None
    f = as_int(value)  # numpy integers
    return float(f) if f is not None else None


def finite_value(value, *, negative: bool = False, limit: float = MAX_MAGNITUDE) -> str | None:
    """Why a count, size, rate or ratio is refused (``"not a number"``, ``"infinite"``, ``"negative"``,
    ``"absurdly large (over 1e+15)"``) or None if fine; :func:`finite_ms` is the same for durations."""
    reason = finite_ms(value, negative=negative, limit=limit)
    return f"absurdly large (over {limit:g})" if reason == "over one day" else reason


#: longest user regular expression (``--comm-pattern``) accepted
MAX_PATTERN_CHARS = 200


def regex_problem(pattern: str) -> str | None:
    """Why a user's regular expression could run without end on a kernel name, or None. Python's ``re`` backtracks
    and has no time limit, so a pattern whose unbounded repeat holds another unbounded repeat or an alternation
    (``(a+)+$``, ``(a|aa)*$``), or one with a back-reference, can take exponential time on one name (issue 29); such
    patterns are refused, as are patterns over :data:`MAX_PATTERN_CHARS` characters. A pattern that does not compile
    is left to ``re.compile`` to describe."""
    try:
        from re import _parser as sre  # Python >= 3.11
    except ImportError:  # pragma: no cover - older Pythons
        import sre_parse as sre  # type: ignore[no-redef]
    if len(pattern) > MAX_PATTERN_CHARS:
        return f"longer than {MAX_PATTERN_CHARS} characters"
    try:
        tree = sre.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    repeats = {sre.MAX_REPEAT, sre.MIN_REPEAT}
    unbounded = sre.MAXREPEAT

    def risky(items, inside: bool) -> str | None:
        for op, av in items:
            if op in repeats:
                lo, hi, body = av
                if inside and hi == unbounded:
                    return "a repeat inside a repeat (such as (a+)+) can take exponential time"
                found = risky(body, inside or hi == unbounded)
                if found:
                    return found
            elif op == sre.BRANCH:
                if inside:
                    return "an alternation inside a repeat (such as (a|ab)*) can take exponential time"
                for branch in av[1]:
                    found = risky(branch, inside)
                    if found:
                        return found
            elif op == sre.SUBPATTERN:
                found = risky(av[-1], inside)
                if found:
                    return found
            elif op in (sre.GROUPREF, getattr(sre, "GROUPREF_EXISTS", None)):
                return "a back-reference can take exponential time"
            elif op in (sre.ASSERT, sre.ASSERT_NOT):
                found = risky(av[1], inside)
                if found:
                    return found
            elif op == sre.IN and inside:
                continue
        return None

    return risky(tree, False)


#: digits of the longest integer literal a JSON reader turns into an int; CPython refuses to convert more than 4,300
#: (a guard against quadratic time) and raised for the whole file, losing a rank for one bad value (issue 29)
MAX_INT_DIGITS = 1000


def json_int(text: str):
    """``parse_int`` of the JSON readers: the int, or the literal's text when it has over :data:`MAX_INT_DIGITS`
    digits (the value checks then refuse that one value as not a number; the rest of the file is read)."""
    return int(text) if len(text) <= MAX_INT_DIGITS + 1 else text

