"""The README's two commands stay true: the test command is exactly what .ci/run runs."""

from __future__ import annotations

import re

from conftest import REPO


def _commands() -> list[str]:
    text = (REPO / "README.md").read_text()
    head = text.split("\n## ", 1)[0]
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", head, re.S)][:2]


def test_readme_starts_with_demo_and_test_commands():
    demo, tests = _commands()
    assert "reportgen demo -o demo.html" in demo and demo.startswith("pip install")
    assert "pytest" in tests and tests.startswith("pip install")


def test_ci_runs_exactly_the_readme_test_command():
    _, tests = _commands()
    ci = (REPO / ".ci" / "run").read_text().splitlines()
    assert tests in ci, f"{tests!r} not a line of .ci/run"
