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
            ok = t in (".", "./") or t.startswith((".[", "'.[")) or re.fullmatch(r"(dist/)?reportgen_cluster-\S*\.whl", t)
            assert ok, f"{t!r} in {line.strip()!r}: not this checkout or its wheel"


def test_the_distribution_has_a_name_of_its_own():
    """Issue 31 #1: 'reportgen' on PyPI is another project (0.1.8, "library for creating and updating analysis
    report"); ours is reportgen-cluster (free on PyPI when chosen, 2026-11-27), its wheel reportgen_cluster-*.whl."""
    import tomllib

    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert meta["name"] == "reportgen-cluster" and meta["scripts"] == {"reportgen": "reportgen.cli:entry"}
    assert "reportgen-cluster" in (REPO / "README.md").read_text()


def _blocks_after(heading: str) -> list[str]:
    text = (REPO / "README.md").read_text()
    section = text.split(f"\n## {heading}\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", section, re.S)


def test_the_reduce_and_dask_examples_run_as_written(tmp_path, monkeypatch):
    """Issue 31 #7: the 'Past one machine' examples, with their paths mapped into a temporary directory (two
    'nodes', each with its ranks' traces in its own local/prof) and the Dask address of an in-process cluster; the
    reports equal the one of the traces read directly."""
    import json
    import shlex

    from reportgen.cli import main
    from reportgen.synth import KinetoSpec, write_kineto_run

    from conftest import need_module

    run = tmp_path / "run"
    write_kineto_run(run, KinetoSpec(hosts=2, devices_per_host=2, steps=3))
    traces = sorted(run.glob("*.pt.trace.json*"))
    assert len(traces) == 4
    for i, t in enumerate(traces):  # node-0 holds ranks' files 0-1, node-1 the rest
        d = tmp_path / f"node-{i // 2}" / "local" / "prof"
        d.mkdir(parents=True, exist_ok=True)
        (d / t.name).write_bytes(t.read_bytes())
    shared = tmp_path / "shared"
    (shared / "reduced").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)

    def argv(line: str, node: str) -> list[str]:
        line = line.replace("/local/prof", f"{node}/local/prof").replace("/shared/", f"{shared}/")
        line = line.replace("$(hostname)", node)
        words = shlex.split(line.split("#")[0])
        assert words[0] == "reportgen"
        return words[1:]

    reduce_block, dask_block = _blocks_after("Past one machine: reduce on each node, or a Dask cluster")
    srun, report = [l for l in reduce_block.splitlines() if l and not l.startswith("#")]
    inner = shlex.split(srun)[-1]  # srun ... bash -c '<the reduce command>'
    for node in ("node-0", "node-1"):
        assert main(argv(inner, node) + ["-q"]) == 0
    assert sorted(p.name for p in (shared / "reduced").iterdir()) == ["node-0.reduced", "node-1.reduced"]
    assert main(argv(report, "") + ["-q"]) == 0
    assert main([str(run), "-o", "direct.html", "--json", "direct.json", "-q"]) == 0

    def numbers(path):
        doc = json.loads((tmp_path / path).read_text())
        return doc["summary"], doc["run"]["world_size"], doc["run"]["ranks"]

    assert numbers("metrics.json") == numbers("direct.json")
    distributed = need_module("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as c:
        line = [l for l in dask_block.splitlines() if l.startswith("reportgen ")][0]
        words = shlex.split(line.split("#")[0])[1:]
        words = [str(run) if w == "/shared/prof" else (c.scheduler_address if w.startswith("tcp://") else w)
                 for w in words]
        assert main(words + ["--json", "dask.json", "-q"]) == 0
    assert numbers("dask.json") == numbers("direct.json")


def test_the_gitlab_example_report_line_runs_as_written(tmp_path, monkeypatch):
    """The GitLab CI example's reportgen line (its install line is checked by
    test_every_pip_install_line_installs_this_project): a report, the metrics, --static, exit 0 or 3."""
    import shlex

    from reportgen.cli import main
    from reportgen.synth import KinetoSpec, write_kineto_run

    text = (REPO / "README.md").read_text()
    yaml = re.findall(r"```yaml\n(.*?)```", text.split("\n## In CI\n", 1)[1], re.S)[0]
    line = [l.strip()[2:] for l in yaml.splitlines() if l.strip().startswith("- reportgen ")][0]
    words = shlex.split(line)
    write_kineto_run(tmp_path / words[1].rstrip("/"), KinetoSpec(hosts=1, devices_per_host=2, steps=3))
    monkeypatch.chdir(tmp_path)
    assert main(words[1:] + ["-q"]) in (0, 3)
    html = (tmp_path / "report.html").read_text()
    assert (tmp_path / "metrics.json").is_file() and "<script" not in html.split("</head>", 1)[1]
