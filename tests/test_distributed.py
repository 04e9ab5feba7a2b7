"""The per-rank engine (reportgen/engine.py): a 64-rank run through a Dask LocalCluster and through
``reportgen reduce`` then ``reportgen DIR`` gives the run of the local read (every field and table the sections see,
so the same metrics JSON); hostile .reduced files are one line and exit 2."""

from __future__ import annotations

import dataclasses
import io
import json
import pickle
import shutil
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from reportgen import engine
from reportgen.cli import main
from reportgen.readers.registry import REDUCIBLE
from reportgen.synth.ascend import AscendSpec, write_ascend_run
from reportgen.synth.kineto import KinetoSpec, write_kineto_run
from reportgen.synth.mindinsight import MindInsightSpec, write_mindinsight_run

from conftest import need_module


def _read(root: Path, dask: str | None = None, jobs: int = 1) -> dict:
    """What the sections see of the run read from ``root``: every field of the Run but its name and source path, with
    every table (lazily parsed ones parsed, repeats on one stream dropped, as Run.table does). The sections are
    functions of the run, so two equal states give the same metrics JSON; comparing them costs a quarter of the CPU
    of analysing every section of a 64-rank run each time (the README's reduce and Dask examples, run by
    tests/test_readme.py, compare the metrics themselves)."""
    from reportgen.readers import read_run

    run = read_run(root, jobs=jobs, dask=dask)
    for name in list(run.loaders) + list(run.tables):
        run.table(name)
    files = run.tables.get("files")
    if files is not None and "path" in files:  # where a unit was read (or reduced) from: its name is what counts
        run.tables["files"] = files.assign(path=files["path"].map(lambda p: Path(p).name, na_action="ignore"))
    return {f.name: getattr(run, f.name) for f in dataclasses.fields(run)
            if f.name not in ("name", "source_path", "loaders", "settled")}


def _assert_same(got: dict, want: dict) -> None:
    assert {k: v for k, v in got.items() if k != "tables"} == {k: v for k, v in want.items() if k != "tables"}
    assert sorted(got["tables"]) == sorted(want["tables"])
    for name, df in want["tables"].items():
        if df is None:
            assert got["tables"][name] is None, name
        else:
            pd.testing.assert_frame_equal(got["tables"][name], df, check_exact=True, obj=f"table {name}")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("dist")
    out = {"kineto": base / "kineto", "ascend": base / "ascend", "mindinsight": base / "mindinsight",
           "mindinsight-legacy": base / "mindinsight-legacy"}
    write_kineto_run(out["kineto"], KinetoSpec(hosts=8, devices_per_host=8, steps=2, micro_batches=2))
    write_ascend_run(out["ascend"], AscendSpec(hosts=8, devices_per_host=8, steps=2, microbatches=2))
    write_mindinsight_run(out["mindinsight"], MindInsightSpec(hosts=8, devices_per_host=8, steps=3))
    write_mindinsight_run(out["mindinsight-legacy"], MindInsightSpec(hosts=8, devices_per_host=8, steps=3,
                                                                     layout="legacy"))
    return out


@pytest.fixture(scope="module")
def local(runs) -> dict[str, dict]:
    """The local read of each family's run (:func:`_read`), once."""
    return {family: _read(root) for family, root in runs.items()}


@pytest.fixture(scope="module")
def cluster():
    distributed = need_module("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False,
                                  dashboard_address=":0", scheduler_kwargs={"dashboard": False}) as c:
        yield c.scheduler_address


@pytest.mark.parametrize("family", ["kineto", "ascend", "mindinsight", "mindinsight-legacy"])
def test_64_ranks_dask_and_reduced_equal_local(runs, local, cluster, family, tmp_path):
    root, local = runs[family], local[family]
    assert local["world_size"] == 64 and len(local["ranks"]) == 64
    _assert_same(_read(root, dask=cluster), local)
    # each "node" reduces its ranks; the report reads only the reduced files
    units = REDUCIBLE[family].units(root, None) if family in REDUCIBLE else []
    for i in range(0, 64, 16):
        given = [str(root), "--ranks", f"{i}-{i + 15}"] if family.startswith("mindinsight") else units[i:i + 16]
        assert main(["reduce", *given, "-o", str(tmp_path / f"node{i // 16}.reduced"), "-q",
                     *(["--format", family] if family == "kineto" else [])]) == 0
    red = tmp_path / "reduced"
    red.mkdir()
    for f in tmp_path.glob("*.reduced"):
        f.rename(red / f.name)
    _assert_same(_read(red), local)


def test_reduce_directory_of_several_ranks_and_mix_with_raw(runs, local, tmp_path, capsys):
    """One .reduced of a directory holding 32 ranks, beside the other 32 ranks' raw traces."""
    src = runs["kineto"]
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    node = tmp_path / "node0"
    node.mkdir()
    for n, p in enumerate(sorted(src.glob("*.pt.trace.json*"))):
        shutil.copy(p, (node if n < 32 else mixed) / p.name)
    assert main(["reduce", str(node), "-o", str(mixed / "node0.reduced")]) == 0
    assert "32 units" in capsys.readouterr().err
    _assert_same(_read(mixed), local["kineto"])


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> bytes:
    base = tmp_path_factory.mktemp("small")
    write_kineto_run(base / "run", KinetoSpec(hosts=1, devices_per_host=2, steps=2, stages=1))
    fam = REDUCIBLE["kineto"]
    parts = engine.run_units(engine.jobs_of(fam, fam.units(base / "run", None)), jobs=1)
    return engine.dumps(parts, "kineto")


def _rezip(data: bytes, change) -> bytes:
    src = zipfile.ZipFile(io.BytesIO(data))
    entries = {i.filename: src.read(i.filename) for i in src.infolist()}
    change(entries)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for k, v in entries.items():
            zf.writestr(k, v)
    return buf.getvalue()


def _manifest(change):
    def edit(entries):
        m = json.loads(entries["manifest.json"])
        change(m)
        entries["manifest.json"] = json.dumps(m).encode()
    return edit


def _first_col(m) -> dict:
    return next(iter(m["parts"][0]["tables"].values()))["columns"][0]


def _huge_claim(data: bytes) -> bytes:
    """A central directory entry claiming 2^40 bytes uncompressed (a zip bomb's header)."""
    i = data.rfind(b"PK\x01\x02")
    return data[:i + 24] + (1 << 40 & 0xFFFFFFFF | 0xFFFFFFF0).to_bytes(4, "little") + data[i + 28:]


HOSTILE = {
    "truncated zip": lambda d: d[: len(d) // 2],
    "not a zip": lambda d: b"hello world\n" * 10,
    "empty file": lambda d: b"",
    "wrong version": lambda d: _rezip(d, _manifest(lambda m: m.update(version=99))),
    "wrong format": lambda d: _rezip(d, _manifest(lambda m: m.update(format="other"))),
    "manifest not JSON": lambda d: _rezip(d, lambda e: e.update({"manifest.json": b"{\x00"})),
    "pickle inside": lambda d: _rezip(d, lambda e: e.update({"manifest.json": pickle.dumps({"format": 1})})),
    "pickle as a column": lambda d: _rezip(d, _manifest(lambda m: _first_col(m).update(dtype="object"))),
    "wrong dtype": lambda d: _rezip(d, _manifest(lambda m: _first_col(m).update(dtype="complex128"))),
    "huge claimed rows": lambda d: _rezip(d, _manifest(
        lambda m: next(iter(m["parts"][0]["tables"].values())).update(rows=10 ** 12))),
    "rows not matching": lambda d: _rezip(d, _manifest(
        lambda m: next(iter(m["parts"][0]["tables"].values())).update(rows=3))),
    "huge claimed size": _huge_claim,
    "missing entry": lambda d: _rezip(d, lambda e: e.pop(next(k for k in e if k.startswith("p0/")))),
    "parts not a list": lambda d: _rezip(d, _manifest(lambda m: m.update(parts={"a": 1}))),
    "table without its columns": lambda d: _rezip(d, _manifest(
        lambda m: [c.update(name=c["name"] + "_x") for t in m["parts"][0]["tables"].values() for c in t["columns"]])),
    "meta of another shape": lambda d: _rezip(d, _manifest(lambda m: m["parts"][0].update(meta=[1]))),
    "unknown family": lambda d: _rezip(d, _manifest(lambda m: m.update(family="other"))),
    "kineto tables as mindinsight": lambda d: _rezip(d, _manifest(lambda m: m.update(family="mindinsight"))),
}


def _mi_reduced(tmp_path_factory, layout: str) -> bytes:
    base = tmp_path_factory.mktemp("mi-" + layout)
    write_mindinsight_run(base / "run", MindInsightSpec(hosts=1, devices_per_host=2, steps=2, layout=layout))
    fam = REDUCIBLE["mindinsight"]
    parts = engine.run_units(engine.jobs_of(fam, fam.units(base / "run", None)), jobs=1)
    return engine.dumps(parts, "mindinsight")


@pytest.fixture(scope="module")
def good_mi(tmp_path_factory) -> bytes:
    """A legacy-layout MindInsight run of 2 ranks reduced (it carries the rank table)."""
    return _mi_reduced(tmp_path_factory, "legacy")


def _oversized_rank_table(entries):
    m = json.loads(entries["manifest.json"])
    cluster = next(p for p in m["parts"] if p["meta"].get("mi") == "cluster")
    table = cluster["tables"]["rank_table"]
    size = (16 << 20) + 1
    table["rows"] = size
    entries[table["columns"][0]["entry"]] = b" " * size
    entries["manifest.json"] = json.dumps(m).encode()


def _rank_part(m) -> dict:
    return next(p for p in m["parts"] if p["meta"].get("mi") == "rank")


HOSTILE_MI = {
    "oversized rank table": lambda d: _rezip(d, _oversized_rank_table),
    "rank part of another family's tables": lambda d: _rezip(d, _manifest(lambda m: _rank_part(m).update(
        tables={"ops": next(iter(_rank_part(m)["tables"].values()))}))),
    "part neither rank nor cluster": lambda d: _rezip(d, _manifest(lambda m: _rank_part(m)["meta"].update(mi="x"))),
    "file of an unknown kind": lambda d: _rezip(d, _manifest(
        lambda m: _rank_part(m)["meta"]["files"][0].update(kind="pickle"))),
    "rank out of range": lambda d: _rezip(d, _manifest(lambda m: _rank_part(m)["meta"].update(rank=-1))),
    "files not a list": lambda d: _rezip(d, _manifest(lambda m: _rank_part(m)["meta"].update(files={"a": 1}))),
}


@pytest.mark.parametrize("case", sorted(HOSTILE) + [f"mindinsight: {c}" for c in sorted(HOSTILE_MI)])
def test_hostile_reduced_file_is_one_line_exit_2(good, good_mi, tmp_path, capsys, case):
    run = tmp_path / "run"
    run.mkdir()
    bad = run / "rank0.reduced"
    bad.write_bytes(HOSTILE[case](good) if case in HOSTILE else HOSTILE_MI[case.split(": ", 1)[1]](good_mi))
    assert main([str(run), "-o", str(tmp_path / "r.html"), "-q"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "rank0.reduced" in err, err


@pytest.mark.parametrize("which", ["good", "good_mi"])
def test_good_reduced_file_reports(request, which, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "r.reduced").write_bytes(request.getfixturevalue(which))
    assert main([str(run), "-o", str(tmp_path / "r.html"), "-q"]) == 0


def test_reduce_refuses_output_inside_input_and_wrong_suffix(runs, tmp_path, capsys):
    src = runs["kineto"]
    assert main(["reduce", str(src), "-o", str(src / "x.reduced"), "-q"]) == 2
    assert main(["reduce", str(src), "-o", str(tmp_path / "x.zip"), "-q"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "never changes its input" in err[0] and ".reduced" in err[1]


def test_dask_unreachable_is_one_line(runs, tmp_path, capsys, monkeypatch):
    need_module("distributed")
    monkeypatch.setattr(engine, "CONNECT_TIMEOUT_S", 1)
    assert main([str(runs["kineto"]), "-o", str(tmp_path / "r.html"), "-q", "--dask", "tcp://127.0.0.1:9"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--dask" in err


@pytest.mark.parametrize("argv,said", [
    (["--dask", "nonsense"], "not a scheduler address: expected tcp://HOST:PORT"),
    (["--dask", "tcp://head:99999"], "not a scheduler address"),
    (["--dask", "tcp://127.0.0.1:9", "--dask-timeout", "inf"], "--dask-timeout inf: seconds between 0 and 3600"),
    (["--dask", "tcp://127.0.0.1:9", "--dask-timeout", "0"], "seconds between 0 and 3600"),
])
def test_a_bad_dask_address_is_refused_before_anything_is_read(runs, tmp_path, capsys, argv, said):
    """Issue 31 #2: '--dask nonsense' printed a traceback from a Client's destructor and hung 40 s."""
    assert main([str(runs["kineto"]), "-o", str(tmp_path / "r.html"), "-q", *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_mindinsight_reduce_refuses_ranks_it_does_not_hold_and_files(runs, tmp_path, capsys):
    root = runs["mindinsight"]
    assert main(["reduce", str(root), "--ranks", "100-101", "-o", str(tmp_path / "x.reduced"), "-q"]) == 2
    assert main(["reduce", str(root), "--ranks", "3-x", "-o", str(tmp_path / "x.reduced"), "-q"]) == 2
    one = next((root / "profiler").glob("step_trace_raw_0_*"))
    assert main(["reduce", str(one), "--format", "mindinsight", "-o", str(tmp_path / "x.reduced"), "-q"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and "no files of the ranks" in err[0] and "--ranks" in err[1] and "directory" in err[2], err


def test_ascend_rank_pool_equals_serial(runs, local, monkeypatch, tmp_path):
    """``--jobs 2`` reads the Ascend rank directories in the process pool, their lazily parsed files parsed there:
    the run (data problems included) is that of the serial read."""
    from reportgen import workers
    from reportgen.readers import ascend

    entered = []
    real_pool = workers.pool

    def pool(n):
        entered.append(n)
        return real_pool(n)

    monkeypatch.setattr(workers, "pool", pool)
    monkeypatch.setattr(ascend, "PARALLEL_MIN_BYTES", 0)
    _assert_same(_read(runs["ascend"], jobs=2), local["ascend"])
    assert entered == [2]
    # a damaged lazily parsed file (kernel_details.csv) and an eagerly checked one (op_statistic.csv): the same
    # data problems, whichever process parsed them
    root = tmp_path / "ascend"
    shutil.copytree(runs["ascend"], root)
    out = sorted(root.glob("*/ASCEND_PROFILER_OUTPUT"))
    for name, at in (("kernel_details.csv", out[3]), ("op_statistic.csv", out[5])):
        f = at / name
        lines = f.read_text().splitlines(keepends=True)
        f.write_text("".join(lines[:2] + ["x," * 3 + "\n"] + lines[2:]))
    monkeypatch.setattr(ascend, "PARALLEL_MIN_BYTES", 1 << 60)
    serial = _read(root, jobs=2)
    assert len(entered) == 1  # below the threshold: read here
    named = " ".join(p.path for p in serial["problems"])
    assert "kernel_details.csv" in named and "op_statistic.csv" in named
    monkeypatch.setattr(ascend, "PARALLEL_MIN_BYTES", 0)
    _assert_same(_read(root, jobs=2), serial)
    assert len(entered) == 2


def test_dask_workers_send_the_compact_form():
    """Issue 30 #4: a Dask worker sends what ``reportgen reduce`` writes (bytes, which Dask sizes exactly), not a
    pickled Part; the client checks it as a .reduced file and gets the same part. A real H100 trace: 290 KB pickled,
    47 KB compact (3.4-7.4x on the tracelens traces; ~1.1x on the small generated ranks, where zip headers count)."""
    from conftest import fixture_dir

    trace = fixture_dir("kineto", "tracelens_selected", "tests", "traces", "h100")
    trace = next(trace.glob("Qwen_Qwen1.5-0.5B-Chat__*.json.gz"))
    fam = REDUCIBLE["kineto"]
    job = engine.jobs_of(fam, [str(trace)])[0]
    part = engine.reduce(job)
    data = engine.reduce_compact(job, "kineto")
    assert isinstance(data, bytes) and len(data) * 4 < len(pickle.dumps(part))
    (back,) = engine.load(data, REDUCIBLE, "kineto", name=job[3])
    assert back.source == part.source and back.problems == part.problems and back.tables.keys() == part.tables.keys()
    for name, df in part.tables.items():
        assert back.tables[name].equals(df.reset_index(drop=True)), name
    with pytest.raises(engine.InputError, match="not a reportgen .reduced file") as exc:
        engine.load(data[:-30], REDUCIBLE, "kineto", name=job[3])
    assert exc.value.path == job[3]


def test_dask_sends_absolute_paths_and_names_a_worker_without_the_files(runs, monkeypatch, tmp_path):
    """Issue 31 #2: workers resolve a relative RUN_DIR against their own directory, so the units are absolute; a
    worker that cannot see a unit says so (not "cannot open: No such file")."""
    seen = []
    monkeypatch.setattr(engine, "run_units", lambda jobs_list, **kw: seen.extend(jobs_list) or
                        [engine.reduce(j) for j in jobs_list])
    monkeypatch.chdir(runs["kineto"].parent)
    engine.read(Path("kineto"), REDUCIBLE["kineto"], REDUCIBLE, dask="tcp://unused:1")
    assert seen and all(Path(j[3]).is_absolute() for j in seen)
    gone = (seen[0][0], str(tmp_path / "gone.pt.trace.json"), (), str(tmp_path / "gone.pt.trace.json"))
    with pytest.raises(FileNotFoundError, match="cannot see .*gone.pt.trace.json: every worker must see the run"):
        engine.reduce_compact(gone, "kineto")


def test_dask_with_a_relative_run_dir_and_workers_elsewhere(tmp_path, monkeypatch, capsys):
    """Issue 31 #2: worker processes started in another directory resolve a relative RUN_DIR there ("cannot open:
    No such file or directory" in all four families before). Workers start in tmp_path; the run is given relative to
    its parent, which is not tmp_path. The run is small (4 ranks): the paths matter here, not the size."""
    distributed = need_module("distributed")
    data = tmp_path / "data"
    write_kineto_run(data / "kineto", KinetoSpec(hosts=2, devices_per_host=2, steps=2, stages=1))
    monkeypatch.chdir(tmp_path)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=":0",
                                  scheduler_kwargs={"dashboard": False},
                                  silence_logs=50) as c:
        monkeypatch.chdir(data)
        out = tmp_path / "r.html"
        assert main(["kineto", "-o", str(out), "--json", str(tmp_path / "m.json"), "-q", "--dask",
                     c.scheduler_address]) == 0, capsys.readouterr().err
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["run"]["world_size"] == 4 and doc["run"]["ranks"] == [0, 1, 2, 3]
    assert not any("cannot open" in p["problem"] for p in doc["data_problems"])
