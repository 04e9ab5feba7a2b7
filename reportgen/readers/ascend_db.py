"""Ascend DB exports (placeholder until the DB reader lands)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def read_db_rank(prof_dir: Path, rank: int, wanted: set[str], problems: list) -> dict[str, pd.DataFrame]:
    problems.append((str(prof_dir), "DB export found but not read by this version (text files were used where present)"))
    return {}
