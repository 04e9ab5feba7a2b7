"""Sections this version does not analyse yet: they say whether the run has the files, and which give them."""

from __future__ import annotations

from ..errors import Unavailable
from ..model import Run
from ..report import Analysis, View


def pending_reason(run: Run, kinds: tuple[str, ...], sources: str) -> str:
    files = run.tables.get("files")
    found = {} if files is None or files.empty else files[files["kind"].isin(kinds)].groupby("kind").size().to_dict()
    if found:
        what = ", ".join(f"{n} {k}" for k, n in sorted(found.items()))
        return (f"Found {what} file(s), but this version of reportgen does not analyse this section yet. "
                f"Sources: {sources}.")
    return f"No data for this section in the run. Sources: {sources}."


def pending(kinds: tuple[str, ...], sources: str):
    """(analyze, present) of a section that always reports ``unavailable`` with the reason above."""

    def analyze(run: Run, options=None) -> Analysis:
        raise Unavailable(pending_reason(run, kinds, sources))

    def present(analysis: Analysis) -> View:  # pragma: no cover - analyze always raises
        return View()

    return analyze, present
