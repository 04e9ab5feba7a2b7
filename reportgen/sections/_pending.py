"""Reason text for sections this version does not analyse yet."""

from __future__ import annotations

from ..model import Run


def pending_reason(run: Run, kind: str, sources: str) -> str:
    """Say whether the run has the files, and which files give this section."""
    files = run.tables.get("files")
    count = 0 if files is None or files.empty else int((files["kind"] == kind).sum())
    if count:
        return (f"Found {count} {kind} file(s), but this version of reportgen does not analyse this section yet. "
                f"Sources: {sources}.")
    return f"No data for this section in the run. Sources: {sources}."
