"""A quiet-by-default progress bar on stderr: only on a terminal, only after a moment, never with --quiet."""

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
        self.stream.write(text[:100].ljust(100))
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()
            self.drawn = False
