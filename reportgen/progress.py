"""Progress on stderr, never with --quiet: a bar on a terminal; off a terminal (a CI log), short lines.

* On a terminal: a bar redrawn in place, shown only after :data:`Progress.DELAY_S`.
* Off a terminal: nothing for a run shorter than :data:`Progress.LOG_AFTER_S`; then one line when a phase starts
  (reading, analysing, rendering ...) and one every :data:`Progress.LOG_EVERY_S` within a long phase, as pip and
  cargo print in a log (a 256-rank run on a loaded machine was silent for 714 s until its last line; issue 31).
  A phase that reports nothing for that long (one big trace decoding) still gets its line from a heartbeat
  thread.
  Short runs stay quiet, so a refusal or a report is still the one line it was.

Progress never fails the run: when stderr goes away (closed, EPIPE) it stops writing."""

from __future__ import annotations

import sys
import threading
import time


class Progress:
    DELAY_S = 0.4  # terminal: work shorter than this shows nothing
    LOG_AFTER_S = 10.0  # off a terminal: a run shorter than this prints no progress line
    LOG_EVERY_S = 10.0  # off a terminal: a line at most this often within one phase

    def __init__(self, enabled: bool = True, stream=None, clock=time.monotonic, heartbeat: bool = True):
        self.stream = stream or sys.stderr
        self.clock = clock
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.enabled = enabled
        self.start = clock()
        self.drawn = False
        self.phase: str | None = None
        self.logged_at: float | None = None
        self.last: tuple = ("starting", None, None)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._beat = None
        if enabled and not self.tty and heartbeat:
            self._beat = threading.Thread(target=self._heartbeat, name="reportgen-progress", daemon=True)
            self._beat.start()

    def _heartbeat(self) -> None:
        while not self._stop.wait(1.0):
            with self._lock:
                if not self.enabled:
                    return
                now = self.clock() - self.start
                if now >= self.LOG_AFTER_S and (self.logged_at is None or now - self.logged_at >= self.LOG_EVERY_S):
                    self.phase = None  # the same phase, said again
                    self._log(now, *self.last)

    def update(self, label: str, done: int | None = None, total: int | None = None) -> None:
        if not self.enabled:
            return
        now = self.clock() - self.start
        if not self.tty:
            with self._lock:
                self.last = (label, done, total)
                self._log(now, label, done, total)
            return
        if now < self.DELAY_S:
            return
        if done is not None and total:
            width = 24
            fill = int(width * done / total)
            text = f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} {label}"
        else:
            text = f"\r{label}"
        if self._write(text[:100].ljust(100)):
            self.drawn = True

    def _log(self, now: float, label: str, done: int | None, total: int | None) -> None:
        phase = label.split()[0] if label.split() else label
        if now < self.LOG_AFTER_S:
            self.phase = phase
            return
        if phase == self.phase and self.logged_at is not None and now - self.logged_at < self.LOG_EVERY_S:
            return
        self.phase, self.logged_at = phase, now
        count = f" {done}/{total}" if done is not None and total else ""
        self._write(f"reportgen: {label[:80]}{count} ({now:.0f} s)\n")

    def close(self) -> None:
        """Clear the bar and stop the heartbeat (before any message, so the message starts a clean line)."""
        self._stop.set()
        beat = getattr(self, "_beat", None)
        if beat is not None and beat is not threading.current_thread() and beat.is_alive():
            beat.join(timeout=1.0)  # it writes nothing more once stopped (it waits on _stop between beats)
        with self._lock:
            self.enabled = self.enabled and self.tty  # off a terminal: nothing more after close
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
