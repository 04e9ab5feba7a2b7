"""Bits shared by the bench scripts (imported as a sibling module: the scripts run as ``python bench/x.py``)."""
from __future__ import annotations

import re


def gnu_time_stats(text: str) -> tuple[float | None, float | None]:
    """(largest single process's max RSS in MiB, user+sys CPU s of the tree) from ``/usr/bin/time -v`` output."""
    m = re.search(r"Maximum resident set size \(kbytes\): (\d+)", text)
    u = re.search(r"User time \(seconds\): ([\d.]+)", text)
    s = re.search(r"System time \(seconds\): ([\d.]+)", text)
    return (int(m.group(1)) / 1024 if m else None,
            float(u.group(1)) + float(s.group(1)) if u and s else None)
