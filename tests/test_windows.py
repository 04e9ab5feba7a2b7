"""Several profiling windows per rank (issue 27 point 8, readers/windows.py): every window is found, the
newest complete one is read by default, ``--window`` picks another, and two windows are never mixed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from reportgen import cli
from reportgen.readers import read_run, windows
from reportgen.errors import InputError

from conftest import fixture_dir


def _copy(src: Path, dst: Path, rank: int, shift_s: int, step: int) -> None:
    """``src`` (one rank directory of the fixture) as ``dst``, its collection ``shift_s`` later and its step
    renumbered to ``step``."""
    shutil.copytree(src, dst)
    for p in dst.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    dst.chmod(0o755)
    info = dst / f"profiler_info_{rank}.json"
    doc = json.loads(info.read_text())
    doc["end_info"]["collectionTimeEnd"] += shift_s * 10**9
    info.write_text(json.dumps(doc))
    st = dst / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    lines = st.read_text().splitlines()
    st.write_text("\n".join(lines[:1] + [ln.replace(",13,", f",{step},", 1) for ln in lines[1:]]) + "\n")


@pytest.fixture(scope="module")
def two_windows(tmp_path_factory) -> Path:
    """The 4-rank st/level2 fixture (step 13) as window 1, the same ranks 1000 s later (step 23) as window 2 and
    rank 0 alone 2000 s later (step 33) as window 3 (an incomplete, newest window)."""
    src = fixture_dir("ascend", "msinsight", "test", "st", "level2")
    root = tmp_path_factory.mktemp("windows") / "run"
    for r in range(4):
        _copy(src / f"rank_{r}_ascend_pt", root / "w1" / f"rank_{r}_ascend_pt", r, 0, 13)
        _copy(src / f"rank_{r}_ascend_pt", root / "w2" / f"rank_{r}_ascend_pt", r, 1000, 23)
    _copy(src / "rank_0_ascend_pt", root / "w3" / "rank_0_ascend_pt", 0, 2000, 33)
    return root


def test_group_and_default_choice_on_members():
    m = [windows.Member(r, Path(f"/x/rank{r}_start{a}_stop{b}"), None, t * 10**9, None, ())
         for r in range(2) for (a, b, t) in ((8, 10, 0), (20, 22, 100))]
    m.append(windows.Member(0, Path("/x/rank0_start30_stop32"), None, 200 * 10**9, None, ()))
    found = windows.group(m)
    assert [(w.name, w.ranks, w.steps) for w in found] == [
        ("start8_stop10", [0, 1], [8, 9, 10]), ("start20_stop22", [0, 1], [20, 21, 22]),
        ("start30_stop32", [0], [30, 31, 32])]
    w, why = windows.choose(found, None, Path("/x"))
    assert w.name == "start20_stop22" and "newest complete window" in why  # window 3 lacks rank 1
    assert windows.choose(found, "1", Path("/x"))[0].number == 1
    assert windows.choose(found, "start30_stop32", Path("/x"))[0].number == 3
    assert windows.choose(found, "rank1_start8_stop10", Path("/x"))[0].number == 1  # a directory name
    with pytest.raises(InputError, match="no such profiling window"):
        windows.choose(found, "7", Path("/x"))


def test_same_rank_without_steps_splits_by_time():
    m = [windows.Member(r, Path(f"/x/a{r}_{t}"), None, t * 10**9 + r, None, ()) for r in range(3) for t in (0, 500)]
    found = windows.group(m)
    assert [w.ranks for w in found] == [[0, 1, 2], [0, 1, 2]]


def test_default_window_is_newest_complete(two_windows):
    run = read_run(two_windows)
    assert run.ranks == [0, 1, 2, 3]
    assert sorted(set(run.tables["step_time"]["step"])) == [23]  # window 2 only: never mixed with 13 or 33
    assert [(w["number"], w["ranks"], w["steps"], w["read"]) for w in run.windows] == [
        (1, [0, 1, 2, 3], [13], False), (2, [0, 1, 2, 3], [23], True), (3, [0], [33], False)]
    note = next(n for n in run.notes if "profiling windows found" in n)
    assert "reads window 2" in note and "newest complete window" in note and "--window 3" in note
    skipped = [p.problem for p in run.problems if "not read, another window was" in p.problem]
    assert len(skipped) == 2 and any("--window 1" in p and "steps 13" in p for p in skipped)


def test_window_option_picks_and_reports(two_windows, tmp_path):
    out, js = tmp_path / "r.html", tmp_path / "m.json"
    assert cli.main([str(two_windows), "-o", str(out), "--json", str(js), "-q", "--window", "step13"]) == 0
    doc = json.loads(js.read_text())
    assert doc["run"]["steps"] == [13]
    read = [w for w in doc["run"]["windows"] if w["read"]]
    assert [w["number"] for w in read] == [1] and read[0]["why"] == "picked with --window step13"
    html = out.read_text()
    assert "Profiling windows" in html and "--window 2 or --window step23" in html
    assert cli.main([str(two_windows), "-o", str(out), "-q", "--window", "9"]) == 2


def test_kineto_two_windows_per_rank(tmp_path):
    """clean4's traces (steps 2-5) beside slowrank4's renumbered to steps 102-105 (later): two windows of ranks
    0-3 in one folder; the later one is read, --window 1 reads the other, never both."""
    import gzip
    import re

    data = Path(__file__).parent / "data" / "diagnosis"
    for p in (data / "clean4" / "traces").glob("*.gz"):
        shutil.copy(p, tmp_path / p.name)
    for p in (data / "slowrank4" / "traces").glob("*.gz"):
        t = gzip.decompress(p.read_bytes()).decode()
        t = re.sub(r"ProfilerStep#(\d+)", lambda m: f"ProfilerStep#{int(m.group(1)) + 100}", t)
        (tmp_path / p.name).write_bytes(gzip.compress(t.encode()))
    run = read_run(tmp_path)
    assert sorted(set(run.tables["step_time"]["step"])) == [102, 103, 104, 105]
    assert [(w["name"], w["ranks"], w["read"]) for w in run.windows] == [
        ("steps2-5", [0, 1, 2, 3], False), ("steps102-105", [0, 1, 2, 3], True)]
    run1 = read_run(tmp_path, window="1")
    assert sorted(set(run1.tables["step_time"]["step"])) == [2, 3, 4, 5]
    assert any("--window 2" in p.problem for p in run1.problems)


def test_dynamic_profiler_folder_names(tmp_path):
    """DynamicProfilerMonitor's ``rank<N>_start<A>_stop<B>`` folder names say the window, whatever the times."""
    src = fixture_dir("ascend", "msinsight", "test", "st", "level2")
    for r in range(4):
        _copy(src / f"rank_{r}_ascend_pt", tmp_path / f"rank{r}_start13_stop13_ascend_pt", r, 0, 13)
    for r in (0, 1):
        _copy(src / f"rank_{r}_ascend_pt", tmp_path / f"rank{r}_start8_stop10_ascend_pt", r, -500, 9)
    run = read_run(tmp_path)
    assert [(w["name"], w["ranks"], w["read"]) for w in run.windows] == [
        ("start8_stop10", [0, 1], False), ("start13_stop13", [0, 1, 2, 3], True)]
    run = read_run(tmp_path, window="start8_stop10")
    assert run.ranks == [0, 1] and sorted(set(run.tables["step_time"]["step"])) == [9]
