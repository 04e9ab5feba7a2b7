"""Worker processes that die with their parent and never speak: the process pool of ``--jobs N``.

A worker of :func:`pool`

* ignores SIGINT (Ctrl-C reaches the whole process group; the parent handles it and stops the workers, so no
  worker prints a ``KeyboardInterrupt`` traceback) and takes SIGTERM's default action (the parent stops
  workers with it), as SIGHUP (the handlers a forked worker inherits from the CLI are reset);
* has stdin, stdout and stderr on ``/dev/null``: it never holds the parent's pipes open (a CI step reading the
  parent's output would otherwise wait for a worker that outlived the parent); results and exceptions reach
  the parent through the pool's own pipes;
* dies when the parent dies, even by SIGKILL: on Linux the kernel sends it SIGKILL (``prctl(PR_SET_PDEATHSIG)``);
  everywhere a watchdog thread exits the worker once its parent process is gone (``os.getppid()`` changes).

Leaving :func:`pool` by an exception (an error, Ctrl-C, SIGTERM turned into :class:`KeyboardInterrupt` by the
CLI) cancels the queued work and stops the workers at once instead of waiting for the running decodes.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Iterator

#: how often a worker's watchdog checks that its parent is alive (s)
WATCHDOG_INTERVAL_S = 0.5
#: how long a stopped pool waits for a worker to exit on SIGTERM before SIGKILL (s)
STOP_GRACE_S = 1.0
_PR_SET_PDEATHSIG = 1
#: held while workers start: a signal reaching a worker before it has set its own handlers would run the
#: parent's (inherited by fork) and print a traceback on the parent's stderr
_HELD = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


_LIBC: list = []  # the C library once loaded (glibc: malloc_trim), [None] where there is none to call


def release_free_memory() -> None:
    """Give the heap's free pages back to the system: glibc's ``malloc_trim(0)``; elsewhere nothing.

    A big run is read as many small pieces (every rank's decoded tables, received from the pool) that are freed
    once stacked into the run's tables. glibc keeps freed small blocks in the heap and the process's resident size
    with them, and the sections' memory then comes on top: 1,024 generated Kineto ranks were 1,119 MiB resident
    after reading, 643 after a trim, the whole report's peak 1,903 -> 1,577 MiB (issue 30 #1). The call costs what
    it gives back (~0.2 CPU-s for 0.8 GB of small blocks; ~30 us on a small heap)."""
    if not _LIBC:
        fn = None
        if sys.platform.startswith("linux"):
            try:
                import ctypes

                fn = getattr(ctypes.CDLL(None), "malloc_trim", None)  # glibc only (musl has none)
                if fn is not None:
                    fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
            except (ImportError, OSError, AttributeError):  # a Python without ctypes, a static binary
                fn = None
        _LIBC.append(fn)
    if _LIBC[0] is not None:
        _LIBC[0](0)


def _die_with_parent_linux() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (ImportError, OSError, AttributeError):  # no ctypes / libc / prctl: the watchdog still works
        pass


def _watchdog(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(1)
        time.sleep(WATCHDOG_INTERVAL_S)


def _silence() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        try:
            os.dup2(devnull, fd)
        except OSError:
            pass
    if devnull > 2:
        os.close(devnull)
    # new stream objects: an inherited one may have been locked by another thread of the parent at the fork (the
    # progress heartbeat writing a line), and a warning written to it would then wait for ever
    sys.stdout = sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (lives as long as the worker)


def _init_worker(parent: int) -> None:
    """Pool initializer: runs first in every worker (see the module doc)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        _die_with_parent_linux()
    _silence()
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)
    threading.Thread(target=_watchdog, args=(parent,), name="reportgen-parent-watchdog", daemon=True).start()
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _HELD)  # held by the parent while it started the workers


def _context():
    """fork where it exists and is safe (Linux): no interpreter start-up per worker, and no fork server left
    behind; elsewhere the platform's default."""
    if sys.platform.startswith("linux"):
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context()


def stop(executor: ProcessPoolExecutor) -> None:
    """Cancel queued work and stop the workers now (SIGTERM, then SIGKILL after :data:`STOP_GRACE_S`).

    A worker stopped while it was sending its result leaves half a message in the result pipe, and the pool's
    manager thread waits for the rest for ever (the interpreter joins that thread at exit: the "hang after
    'interrupted'"). Once every worker is gone the parent closes its own write end of that pipe, so the
    manager thread reads end-of-file, marks the pool broken and exits."""
    procs = list((getattr(executor, "_processes", None) or {}).values())
    manager = getattr(executor, "_executor_manager_thread", None)
    results = getattr(executor, "_result_queue", None)  # shutdown() forgets both
    executor.shutdown(wait=False, cancel_futures=True)
    for p in procs:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            p.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    for p in procs:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            p.join(max(0.0, deadline - time.monotonic()))
            if p.is_alive():
                p.kill()
                p.join(STOP_GRACE_S)
    with contextlib.suppress(Exception):
        results._writer.close()  # noqa: SLF001 - see the doc above
    if manager is not None:
        manager.join(STOP_GRACE_S)


@contextlib.contextmanager
def _held_signals() -> Iterator[None]:
    """SIGINT / SIGTERM / SIGHUP held (not lost) in the calling thread; what arrived is delivered at the end."""
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


@contextlib.contextmanager
def pool(max_workers: int) -> Iterator[ProcessPoolExecutor]:
    """A :class:`ProcessPoolExecutor` of ``max_workers`` workers as described in the module doc, started now."""
    executor = ProcessPoolExecutor(max_workers=max_workers, mp_context=_context(), initializer=_init_worker,
                                   initargs=(os.getpid(),))
    try:
        with _held_signals():  # workers (and the pool's thread) start with the signals held; see _HELD
            for _ in range(max_workers):  # starts the workers (all at the first submit with fork, one per submit else)
                executor.submit(int)
        yield executor
    except BaseException:
        stop(executor)
        raise
    executor.shutdown(wait=True)


__all__ = ["pool", "stop"]
