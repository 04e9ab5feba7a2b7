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


def _block_after(heading: str) -> str:
    text = (REPO / "README.md").read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, re.S)[0]


def test_the_ci_example_runs_as_written(tmp_path):
    """Issue 31 #6: the example kept the baseline inside a run directory, where --json is refused. Run it as
    written (reportgen -> python -m reportgen), after yesterday's run wrote its metrics the same way."""
    import shlex
    import subprocess
    import sys

    from reportgen.synth import KinetoSpec, write_kineto_run

    for day in ("yesterday", "today"):
        write_kineto_run(tmp_path / "runs" / day, KinetoSpec(hosts=1, devices_per_host=2, steps=3))
    (tmp_path / "metrics").mkdir()
    cmd = shlex.split(_block_after("In CI").replace("\\\n", " "))
    assert cmd[0] == "reportgen" and "metrics/yesterday.json" in cmd
    py = [sys.executable, "-m", "reportgen"]
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}
    first = [a.replace("today", "yesterday") for a in cmd[1:cmd.index("--baseline")]]
    assert subprocess.run(py + first, cwd=tmp_path, env=env, capture_output=True).returncode == 0
    p = subprocess.run(py + cmd[1:], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert p.returncode in (0, 3), p.stderr  # 3: a --fail-on condition held (the report is still written)
    assert (tmp_path / "report.html").is_file() and (tmp_path / "metrics" / "today.json").is_file()


def test_every_pip_install_line_installs_this_project():
    """Issue 31 #1: 'pip install reportgen' fetched an unrelated PyPI project of that name (dependency confusion).
    Every install line of the README and docs/ installs this checkout, an extra of it, or a wheel built from it."""
    import shlex

    texts = [(REPO / "README.md").read_text()] + [p.read_text() for p in sorted((REPO / "docs").glob("*.md"))]
    blocks = [b for t in texts for b in re.findall(r"```[a-z]*\n(.*?)```", t, re.S)]  # commands, not prose
    lines = [line for b in blocks for line in b.splitlines() if "pip install" in line]
    assert lines
    for line in lines:
        cmd = line.split("pip install", 1)[1].split("&&")[0].split("#")[0]
        targets = [a for a in shlex.split(cmd) if not a.startswith("-")]
        assert targets, line
        for t in targets:
            assert t.startswith((".", "./", "dist/")) or t.endswith(".whl"), f"{t!r} in {line.strip()!r}"
