"""Readers: one module per input family, each turning a run directory into a :class:`~reportgen.model.Run`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from ..errors import InputError
from ..model import Run
from .. import timeline
from . import ascend, kineto, mindinsight, mindspore_cpu

#: (family name, module) in detection order.
FAMILIES = [("mindinsight", mindinsight), ("mindspore_cpu", mindspore_cpu), ("ascend", ascend), ("kineto", kineto)]


def read_run(path: str | Path, progress: Callable[[int, int], None] | None = None, jobs: int | None = None,
             comm_patterns: tuple[str, ...] = ()) -> Run:
    """Detect the input family of ``path`` and read it. Raises :class:`InputError` when unusable."""
    root = Path(path)
    if not root.exists():
        raise InputError(root, "no such file or directory")
    if not root.is_dir():
        raise InputError(root, "is not a directory; give the run directory holding every rank's profiler output")
    try:
        next(root.iterdir(), None)
    except OSError as exc:
        raise InputError(root, f"cannot list directory: {exc.strerror or exc}") from None
    for _name, module in FAMILIES:
        if module.detect(root):
            if module is kineto:
                run = module.read(root, progress=progress, jobs=jobs, comm_patterns=comm_patterns)
            else:
                run = module.read(root, progress=progress)
            timeline.attach(run)  # device_timeline (lazy) and the step breakdown measured on it
            return run
    raise InputError(
        root,
        "no profiler output recognised (MindSpore Insight: step_trace_raw_<rank>_detail_time.csv in the "
        "directory or its profiler*/ sub-directory, or hccl.json + cluster_profiler/<host>/profiler/; "
        "Ascend: *_ascend_pt / *_ascend_ms directories with ASCEND_PROFILER_OUTPUT/; "
        "PyTorch: *.pt.trace.json[.gz] files)",
    )
