"""A quiet-by-default progress bar on stderr: only on a terminal, only after a moment, never with --quiet.

A progress bar never fails the run: when the terminal goes away (stderr closed, EPIPE) it stops drawing."""

from __future__ import annotations

import sys
import time


class Progress:
    DELAY_S = 0.4  # work shorter than this shows nothing

    def __init__(self, enabled: bool = True, stream=None):
        self.stream = stream or sys.stderr
        self.enabled = enabled and hasattr(self.stream, "isatty") and self.stream.isatty()
        self.start = time.monotonic()
        self.drawn = False

    def update(self, label: str, done: int | None = None, total: int | None = None) -> None:
        if not self.enabled or time.monotonic() - self.start < self.DELAY_S:
            return
        if done is not None and total:
            width = 24
            fill = int(width * done / total)
            text = f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} {label}"
        else:
            text = f"\r{label}"
        if self._write(text[:100].ljust(100)):
            self.drawn = True

    def close(self) -> None:
        """Clear the bar (before any message, so the message starts a clean line)."""
        if self.drawn:
            self._write("\r" + " " * 100 + "\r")
            self.drawn = False

    def _write(self, text: str) -> bool:
        try:
            self.stream.write(text)
            self.stream.flush()
            return True
        except (OSError, ValueError):  # closed or broken stderr
            self.enabled = False
            return False
