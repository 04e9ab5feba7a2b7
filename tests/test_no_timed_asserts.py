"""No test asserts on how long something took (docs/development.md, "No timed assertions": timing belongs in
bench/, a loaded machine fails a timed assertion and proves nothing). Resource *bounds* that kill runaway work (tests/harness.py's wall limit) are
not assertions on a measured duration and are allowed.

The check is static: in every tests/*.py, a name assigned from an expression that reads a clock
(``time.perf_counter()``, ``time.monotonic()``, ``time.time()``, ``*_ns`` variants, ``timeit``) is "timed", and so
is any name assigned from an expression using a timed name; no ``assert`` may use a timed name or read a clock."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CLOCKS = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "process_time",
          "timeit", "default_timer"}
TESTS = sorted(Path(__file__).parent.glob("*.py"))


def _reads_clock(node: ast.AST) -> bool:
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            base = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else None
            if name in CLOCKS and base in (None, "time", "timeit"):
                return True
    return False


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def timed_asserts(source: str) -> list[int]:
    """Line numbers of asserts that use a duration measured by the test."""
    tree = ast.parse(source)
    timed: set[str] = set()
    changed = True
    while changed:  # propagate through assignments (t0 = clock(); dt = clock() - t0; ok = dt < 4)
        changed = False
        for n in ast.walk(tree):
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None:
                if _reads_clock(n.value) or _names(n.value) & timed:
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    new = set().union(*(_names(t) for t in targets)) - timed
                    if new:
                        timed |= new
                        changed = True
    return [n.lineno for n in ast.walk(tree)
            if isinstance(n, ast.Assert) and (_reads_clock(n.test) or _names(n.test) & timed)]


def test_the_check_finds_a_timed_assert():
    assert timed_asserts("import time\nt0 = time.perf_counter()\nx = 1\ns = time.perf_counter() - t0\n"
                         "assert s < 4\n") == [5]
    assert timed_asserts("import time\nassert time.monotonic() > 0\n") == [2]
    assert timed_asserts("x = 3\nassert x < 4\n") == []


@pytest.mark.parametrize("path", TESTS, ids=[p.name for p in TESTS])
def test_no_timed_assertion(path):
    assert timed_asserts(path.read_text()) == [], f"{path.name}: an assert uses a measured duration"
