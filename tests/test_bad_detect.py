"""Family detection on mixed, nested and junk input (issue 14, point 5).

A directory holding more than one family (or more than one MindInsight run) is refused with a one-line hint
naming ``--format``; ``--format`` reads the named one and lists the rest as data problems. Files named like
PyTorch traces that are not (junk bytes, UTF-16, a cut gzip, a symlink loop) are listed in the data problems, and
a directory with nothing else is refused naming them. Every fixture directory is still detected as exactly one
family. Inputs are generated at test time (reportgen.synth) or copied from the shared fixtures.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from reportgen import cli
from reportgen.errors import InputError
from reportgen.readers import FORMATS, choose, read_run, survey
from reportgen.synth import (AscendSpec, KinetoSpec, MindInsightSpec, write_ascend_run, write_kineto_run,
                             write_mindinsight_run)

from conftest import fixture_dir, tree_digest
from test_golden import FIXTURES

ALL_HINT = ("holds MindSpore Insight, Ascend and PyTorch Kineto data; pick one: --format mindinsight | "
            "--format ascend | --format kineto")


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> dict[str, Path]:
    """One small run of each family: mindinsight (a run folder with profiler/), ascend (rank dirs), kineto."""
    root = tmp_path_factory.mktemp("families")
    write_mindinsight_run(root / "mi", MindInsightSpec(hosts=1, devices_per_host=2, stages=1, steps=3))
    write_ascend_run(root / "ascend", AscendSpec(hosts=1, devices_per_host=2, stages=1, steps=3, microbatches=4))
    write_kineto_run(root / "kineto", KinetoSpec(hosts=1, devices_per_host=2, stages=1, steps=3, micro_batches=2))
    return {"mindinsight": root / "mi", "ascend": root / "ascend", "kineto": root / "kineto"}


def _copy_into(src: Path, dst: Path) -> None:
    dst.mkdir(parents=True, exist_ok=True)
    for p in src.iterdir():
        (shutil.copytree if p.is_dir() else shutil.copy2)(p, dst / p.name)


def _cli(tmp_path: Path, run: Path, *args: str):
    out, js = tmp_path / "r.html", tmp_path / "m.json"
    code = cli.main([str(run), "-o", str(out), "--json", str(js), "--quiet", *args])
    doc = json.loads(js.read_text()) if js.exists() else None
    return code, out, doc


def _problems(doc) -> list[tuple[str, str]]:
    return [(p["path"], p["problem"]) for p in doc["data_problems"]]


@pytest.fixture
def mixed(tmp_path, base) -> Path:
    root = tmp_path / "mixed"
    for fam in ("mindinsight", "ascend", "kineto"):
        _copy_into(base[fam], root)
    return root


def test_three_families_refused_with_hint(tmp_path, mixed, capsys):
    before = tree_digest(mixed)
    code, out, doc = _cli(tmp_path, mixed)
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists() and doc is None
    assert len(err.splitlines()) == 1
    assert err.startswith(f"reportgen: {mixed}: {ALL_HINT}"), err
    assert "(or give the sub-directory" in err
    assert tree_digest(mixed) == before


@pytest.mark.parametrize("fmt", ["mindinsight", "ascend", "kineto"])
def test_format_reads_the_named_family(tmp_path, mixed, fmt):
    code, out, doc = _cli(tmp_path, mixed, "--format", fmt)
    assert code == 0 and out.exists()
    assert doc["run"]["source_format"] == ("mindinsight" if fmt == "mindinsight" else fmt)
    assert doc["run"]["ranks"] == [0, 1]
    found = {"mindinsight": "MindSpore Insight data (run in profiler)", "ascend": "Ascend data (2 rank directories)",
             "kineto": "PyTorch Kineto data (2 traces)"}
    said = sorted(p for _, p in _problems(doc) if p.startswith("also holds"))
    assert said == sorted(f"also holds {what}; not read (--format {fmt})" for key, what in found.items() if key != fmt)


def test_format_names_a_family_not_present(base):
    with pytest.raises(InputError) as exc:
        read_run(base["kineto"], fmt="mindinsight")
    assert exc.value.problem == "--format mindinsight: no MindSpore Insight output found here; found PyTorch Kineto (2 traces)"
    assert set(FORMATS) == {"mindinsight", "mindspore_cpu", "ascend", "kineto"}


def test_nested_runs_of_two_families(tmp_path, base, capsys):
    root = tmp_path / "nested"
    shutil.copytree(base["mindinsight"], root / "a")
    shutil.copytree(base["kineto"], root / "b")
    code, out, _ = _cli(tmp_path, root)
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists()
    assert err == (f"reportgen: {root}: holds MindSpore Insight and PyTorch Kineto data; pick one: --format "
                   "mindinsight | --format kineto (or give the sub-directory: a/profiler, b)")
    # the MindInsight reader looks only at the directory and its profiler*/: deeper output is pointed at
    with pytest.raises(InputError, match=r"the MindSpore Insight output is in the sub-directory a/profiler; give "
                                         r"that directory"):
        read_run(root, fmt="mindinsight")
    assert read_run(root, fmt="kineto").ranks == [0, 1]
    assert read_run(root / "b").ranks == [0, 1]  # the sub-directory alone is one family


def test_two_nested_runs_of_one_family(tmp_path, base):
    root = tmp_path / "two"
    shutil.copytree(base["mindinsight"], root / "x")
    shutil.copytree(base["mindinsight"], root / "y")
    with pytest.raises(InputError) as exc:
        read_run(root)
    assert exc.value.problem == ("holds 2 MindSpore Insight runs (x/profiler, y/profiler); pick one: give its "
                                 "sub-directory")
    with pytest.raises(InputError, match="holds 2 MindSpore Insight runs"):
        read_run(root, fmt="mindinsight")
    # a run's own files below another run folder are a second run too
    inner = tmp_path / "inner"
    shutil.copytree(base["mindinsight"] / "profiler", inner)
    shutil.copytree(base["mindinsight"] / "profiler", inner / "old_copy")
    with pytest.raises(InputError, match=r"holds 2 MindSpore Insight runs \(\., old_copy\)"):
        read_run(inner)


def test_newest_profiler_dir_read_and_the_other_listed(tmp_path, base):
    root = tmp_path / "prof"
    shutil.copytree(base["mindinsight"] / "profiler", root / "profiler")
    shutil.copytree(base["mindinsight"] / "profiler", root / "profiler_2")
    run = read_run(root)
    assert run.ranks == [0, 1]
    assert [(Path(p.path).name, p.problem.split(";")[0]) for p in run.problems] == [
        ("profiler", "another MindSpore Insight run")]


def _junk_files(d: Path, good_trace: Path) -> dict[str, str]:
    """Files named like traces that are not, and the reason each must be listed with."""
    d.mkdir(parents=True, exist_ok=True)
    (d / "rank5.pt.trace.json").write_bytes(bytes(range(256)) * 8)
    text = gzip.decompress(good_trace.read_bytes()).decode("utf-8")
    (d / "rank6.pt.trace.json").write_text(text, encoding="utf-16")
    (d / "rank7.pt.trace.json.gz").write_bytes(good_trace.read_bytes()[:60])
    (d / "rank8.pt.trace.json").write_text('{"not": "a trace"}', encoding="utf-8")
    (d / "rank9.json").write_text(text[:5000], encoding="utf-16-le")  # no BOM, not named .pt.trace: still listed
    os.symlink("rank10.pt.trace.json", d / "rank10.pt.trace.json")  # a symlink loop
    return {"rank5.pt.trace.json": "binary data, not JSON text",
            "rank6.pt.trace.json": "UTF-16 text (traces are read as UTF-8 JSON)",
            "rank7.pt.trace.json.gz": "not a readable gzip file",
            "rank8.pt.trace.json": 'JSON text without "traceEvents" in its first 64 KiB',
            "rank9.json": "UTF-16 text (traces are read as UTF-8 JSON)",
            "rank10.pt.trace.json": "cannot be read (Too many levels of symbolic links)"}


def test_junk_only_directory_refused_naming_the_files(tmp_path, base, capsys):
    root = tmp_path / "junk"
    good = sorted(base["kineto"].glob("*.gz"))[0]
    expected = _junk_files(root, good)
    code, out, doc = _cli(tmp_path, root)
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists() and doc is None
    assert len(err.splitlines()) == 1
    assert err.startswith(f"reportgen: {root}: no profiler output recognised: named like PyTorch traces but not "
                          "read: "), err
    named = [name for name in expected if name in err]
    assert len(named) == 3 and err.endswith(f"and {len(expected) - 3} more such files")
    for name in named:
        assert f"{name}: {expected[name]}" in err


@pytest.mark.parametrize("rel", ["step_trace_raw_0_detail_time.csv",
                                 "r0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
                                 "r0_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"])
def test_junk_named_like_a_family_file_is_refused(tmp_path, rel, capsys):
    """Detected by its name, skipped by its reader: with nothing else readable, no report of nothing."""
    root = tmp_path / "junk"
    (root / rel).parent.mkdir(parents=True)
    (root / rel).write_bytes(bytes(range(256)) * 8)
    code, out, doc = _cli(tmp_path, root)
    err = capsys.readouterr().err.strip()
    assert code == 2 and not out.exists() and doc is None
    assert err.startswith(f"reportgen: {root}: no readable profiler data: {rel}: "), err
    assert len(err.splitlines()) == 1


def test_junk_beside_good_traces_listed(tmp_path, base):
    root = tmp_path / "run"
    shutil.copytree(base["kineto"], root)
    expected = _junk_files(root / "more", sorted(base["kineto"].glob("*.gz"))[0])
    (root / "more" / "rank7.pt.trace.json.gz").unlink()  # a cut gzip is the Kineto reader's to report (it opens it)
    del expected["rank7.pt.trace.json.gz"]
    run = read_run(root)
    assert run.ranks == [0, 1]
    listed = {Path(p.path).name: p.problem for p in run.problems}
    assert set(listed) == set(expected)  # each junk file named once: by the Kineto reader (it opened it) or the survey
    for name, why in expected.items():
        assert listed[name] in (f"not read: named like a PyTorch trace but {why}",
                                "no trace event that reportgen reads (GPU kernels, memcpy/memset, CPU ops, ProfilerStep "
                                "spans, collectives, [memory]); file skipped"), (name, listed[name])


def test_symlink_loops_and_unlistable_directories(tmp_path, base, monkeypatch):
    loop = tmp_path / "loop"
    os.symlink("loop", loop)
    with pytest.raises(InputError, match="symbolic link loop"):
        read_run(loop)
    root = tmp_path / "run"
    shutil.copytree(base["kineto"], root)
    os.symlink(".", root / "self")           # a directory loop: never followed
    os.symlink("nowhere", root / "dangling")
    (root / "locked").mkdir()
    real = os.scandir

    def scandir(path="."):
        if Path(path).name == "locked":
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)
    run = read_run(root)
    assert run.ranks == [0, 1]
    assert [(Path(p.path).name, p.problem) for p in run.problems] == [
        ("locked", "cannot list directory (Permission denied); not searched for profiler output")]


def test_ascend_trace_view_and_mindinsight_timeline_are_not_kineto(tmp_path, base):
    """Normal runs: an Ascend rank directory's trace_view.json (even one shaped like a Chrome trace) and a
    MindInsight timeline JSON belong to their family; neither makes the run 'mixed'."""
    a = tmp_path / "ascend"
    shutil.copytree(base["ascend"], a)
    for d in a.glob("*_ascend_pt"):
        (d / "ASCEND_PROFILER_OUTPUT" / "trace_view.json").write_text('{"traceEvents": []}', encoding="utf-8")
    assert set(survey(a).families()) == {"ascend"}
    m = tmp_path / "mi"
    shutil.copytree(base["mindinsight"], m)
    (m / "profiler" / "ascend_timeline_display_0.json").write_text('{"traceEvents": []}', encoding="utf-8")
    assert set(survey(m).families()) == {"mindinsight"}
    s = survey(m)
    assert choose(s) == "mindinsight" and not s.suspects


#: fixture directories (MANIFESTs of shared/fixtures) read as one run, besides the golden ones
EXTRA_FIXTURES = {
    "mi_cluster_propose_pp2x4_r2.0": (("mindinsight", "mi_cluster_propose_pp2x4", "variant_r2.0_flops_summary"),
                                      "mindinsight"),
    "kineto_param_single_rank": (("kineto", "param_single_rank"), "kineto"),
    "kineto_tb_plugin_worker0": (("kineto", "kineto_tb_plugin_samples", "tb_plugin", "samples",
                                  "resnet50_num_workers_0"), "kineto"),
    "kineto_tracelens_b200": (("kineto", "tracelens_selected", "tests", "traces", "b200"), "kineto"),
    "kineto_hta_cpu_only": (("kineto", "hta_tests_data", "tests", "data", "cpu_only"), "kineto"),
    "ascend_server_test_rank_0": (("ascend", "msinsight", "server", "src", "test", "test_data", "test_rank_0"),
                                  "ascend"),
    "ascend_db_level0_rank0": (("ascend", "msinsight", "test", "data", "pytorch", "db", "level0",
                                "rank0_ascend_pt"), "ascend"),
}


def _family_of(name: str) -> str:
    return ("mindinsight" if name.startswith(("mi_", "ms_ut")) else "mindspore_cpu" if name.startswith("mindspore_cpu")
            else name.split("_")[0])


CASES = {**{name: (parts, _family_of(name)) for name, parts in FIXTURES.items()}, **EXTRA_FIXTURES}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_fixture_is_one_family(name):
    parts, family = CASES[name]
    s = survey(fixture_dir(*parts))
    assert list(s.families()) == [family], s.families()
    assert choose(s) == family
    assert not s.suspects and not s.unlisted and not s.stopped


def test_fixture_collections_are_refused_as_mixed():
    """The folders that hold several fixtures are several runs: said, never read as one."""
    with pytest.raises(InputError, match=r"holds MindSpore CPU and PyTorch Kineto data; pick one: --format "
                                         r"mindspore_cpu \| --format kineto"):
        choose(survey(fixture_dir("generated")))
    with pytest.raises(InputError, match=r"holds 7 MindSpore Insight runs \(mi_cluster_propose_pp2x4, "):
        choose(survey(fixture_dir("mindinsight")))
