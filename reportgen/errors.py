"""Exceptions with a contract: what the user sees is one line, never a traceback."""

from __future__ import annotations

import os


class InputError(Exception):
    """The input cannot be used at all. Shown as one line ``<file>: <problem>``; exit code 2."""

    def __init__(self, path: str | os.PathLike | None, problem: str):
        self.path = str(path) if path is not None else None
        self.problem = problem
        super().__init__(str(self))

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}" if self.path else self.problem


class Unavailable(Exception):
    """Raised by a section's ``analyze`` when the run has no data for it.

    ``reason`` says what is missing and which files or profiler options provide it.
    """

    def __init__(self, reason: str):
        self.reason = reason
        super().__init__(reason)
