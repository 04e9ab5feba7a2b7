"""Start-up cost (issue 15): what a report does not load or redo. Speed itself is measured by bench/scale.py."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import jinja2

from reportgen import render


def _env_with_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("REPORTGEN_CACHE", str(tmp_path / "cache"))
    return render.environment()


def test_compiled_template_is_cached_and_reused(tmp_path, monkeypatch):
    _env_with_cache(tmp_path, monkeypatch).get_template("report.html.j2")
    files = list((tmp_path / "cache" / "templates").iterdir())
    assert len(files) == 1 and files[0].stat().st_size > 10_000
    compiled = []
    real = jinja2.Environment.compile

    def spy(self, *a, **k):
        compiled.append(a)
        return real(self, *a, **k)

    monkeypatch.setattr(jinja2.Environment, "compile", spy)
    render.environment().get_template("report.html.j2")
    assert compiled == []  # loaded from the cache, not compiled


def test_a_damaged_cache_entry_is_a_miss(tmp_path, monkeypatch):
    ref = _env_with_cache(tmp_path, monkeypatch).get_template("report.html.j2")
    (entry,) = (tmp_path / "cache" / "templates").iterdir()
    for junk in (b"", b"j2\x00garbage", entry.read_bytes()[:200], os.urandom(4096)):
        entry.write_bytes(junk)
        t = render.environment().get_template("report.html.j2")
        # compiled afresh from the source: the same code as the first compile, not the junk
        assert t.root_render_func.__code__.co_code == ref.root_render_func.__code__.co_code
        assert t.blocks.keys() == ref.blocks.keys()


def test_an_unwritable_cache_never_fails_a_report(tmp_path, monkeypatch):
    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tempfile, "NamedTemporaryFile", full)
    assert _env_with_cache(tmp_path, monkeypatch).get_template("report.html.j2")
    monkeypatch.setenv("REPORTGEN_CACHE", "/proc/reportgen-cache")  # cannot be made
    assert render.environment().get_template("report.html.j2")


def test_a_report_loads_no_chart_compiler(tmp_path, monkeypatch):
    """vl-convert (a native JS runtime) is loaded only for --static or to build the Vega bundle the first time;
    nor is importlib.metadata (it scans every installed distribution: 0.05-0.25 s of a small report, issue 30)."""
    env = {k: v for k, v in os.environ.items() if k != "REPORTGEN_VALIDATE_SPECS"}  # the tests validate specs
    env["REPORTGEN_CACHE"] = str(tmp_path / "cache")
    code = ("import sys; from reportgen.cli import main; "
            "main(['demo', '-o', sys.argv[1], '--quiet']); "
            "main(['demo', '-o', sys.argv[1], '--quiet']) if 'vl_convert' in sys.modules else None; "
            "print(sorted(m for m in ('vl_convert', 'altair', 'jsonschema', 'importlib.metadata') "
            "if m in sys.modules))")
    # a fresh process with its cache warm must not: the bundle this process has and the compiled page template,
    # written where the child looks (a first child building them would cost ~4 CPU-s and two more reports)
    cache = Path(env["REPORTGEN_CACHE"])
    cache.mkdir()
    (cache / f"vl-convert-{render._vl_convert_version()}-bundle.js").write_text(render.vega_bundle(), encoding="utf-8")
    monkeypatch.setenv("REPORTGEN_CACHE", str(cache))
    render.environment().get_template("report.html.j2")  # compiled into cache/templates
    assert any((cache / "templates").iterdir())
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "b.html")], env=env, check=True,
                         capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_a_small_page_is_rendered_once(monkeypatch):
    """A page within its budget is rendered whole, once (the fit to thresholds.PAGE_BYTES renders it twice)."""
    from reportgen import cli, thresholds as th
    from reportgen.sections import Options, run_sections

    run = cli.load_run("demo")
    ctx = render.build_context(run, run_sections(run, Options({})))
    calls = []
    real = jinja2.Template.render

    def spy(self, *a, **k):
        calls.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(jinja2.Template, "render", spy)
    html = render.render_html(ctx)
    assert len(calls) == 1 and len(html.encode()) <= th.PAGE_BYTES


def test_the_bundle_is_named_by_the_installed_vl_convert():
    """The cached bundle's name carries vl-convert's version, read from its dist-info folder's name: the same
    version the package metadata gives (a new vl-convert is a cache miss)."""
    from importlib.metadata import version

    assert render._vl_convert_version() == version("vl-convert-python")
