"""Packaging: templates and assets ship inside the wheel; the progress bar only draws on a terminal."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile

from reportgen.progress import Progress

from conftest import REPO


def test_wheel_contains_templates_and_assets(tmp_path):
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                        "-w", str(tmp_path), str(REPO)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    (wheel,) = tmp_path.glob("reportgen_cluster-*.whl")  # the distribution name (issue 31)
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("reportgen/templates/report.html.j2", "reportgen/assets/charts.js",
                   "reportgen/assets/table.js", "reportgen/assets/report.css", "reportgen/cli.py",
                   "reportgen/sections/trajectory.py", "reportgen/readers/mindinsight.py",
                   "reportgen/synth/mindinsight.py"):
        assert needed in names, needed
    # the malformed-input corpus is test code (tests/malformed_corpus.py), not shipped
    assert not [n for n in names if "malformed" in n], sorted(n for n in names if "malformed" in n)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "reportgen = reportgen.cli:entry" in zipfile.ZipFile(wheel).read(entry).decode()


class FakeTTY(io.StringIO):
    def __init__(self, tty: bool):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def test_progress_draws_only_on_a_terminal_after_a_moment():
    for tty, enabled, expect in ((True, True, True), (False, True, False), (True, False, False)):
        stream = FakeTTY(tty)
        p = Progress(enabled=enabled, stream=stream)
        p.update("quick", 1, 2)  # within the delay: nothing
        assert stream.getvalue() == ""
        p.start -= 10
        p.update("reading files", 3, 4)
        assert ("3/4 reading files" in stream.getvalue()) is expect
        p.close()
        assert stream.getvalue().endswith("\r") is expect
