"""Sections this version does not analyse yet: they say whether the run has the files, and which give them."""

from __future__ import annotations

from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, View


def pending_reason(run: Run, kind: str, sources: str) -> str:
    files = run.tables.get("files")
    count = 0 if files is None or files.empty else int((files["kind"] == kind).sum())
    if count:
        return (f"Found {count} {kind} file(s), but this version of reportgen does not analyse this section yet. "
                f"Sources: {sources}.")
    return f"No data for this section in the run. Sources: {sources}."


def pending(kind: str, sources: str):
    """(analyze, present) of a section that always reports ``unavailable`` with the reason above."""

    def analyze(run: Run, options=None) -> Analysis:
        raise Unavailable(pending_reason(run, kind, sources))

    def present(analysis: Analysis) -> View:  # pragma: no cover - analyze always raises
        return View()

    return analyze, present
