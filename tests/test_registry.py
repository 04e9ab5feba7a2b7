"""The family registry (reportgen/readers/registry.py): the engine and the dispatch know a family only through its
registered object. Small tables and fake families built here; the real families' runs: tests/test_distributed.py."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from reportgen import engine
from reportgen.errors import InputError
from reportgen.model import Run
from reportgen.readers import Survey, registry

ENGINE = Path(engine.__file__)


def test_the_engine_names_no_family():
    text = ENGINE.read_text(encoding="utf-8")
    assert not re.findall(r"kineto|ascend|mindinsight|mindspore", text, re.I)


def test_registry_lists_every_family_once():
    assert registry.FORMATS == ("mindinsight", "mindspore_cpu", "ascend", "kineto")
    assert set(registry.REDUCIBLE) == {"mindinsight", "ascend", "kineto"}
    assert registry.LABELS["kineto"] == "PyTorch Kineto" and registry.get("ascend").label == "Ascend"
    for f in registry.FAMILIES:
        assert callable(f.read) and f.found(Survey(Path("/nowhere")), False) == []
        if f.reducible:
            assert f.reduce and f.assemble and f.units
    with pytest.raises(KeyError):
        registry.get("nope")


def test_detection_is_the_registry_s(tmp_path):
    s = Survey(tmp_path, traces=[tmp_path / "a.json", tmp_path / "b.json"], ascend_dirs=[tmp_path / "r_ascend_pt"])
    assert s.families() == {"ascend": "1 rank directories", "kineto": "2 traces"}
    s.cpu_only = True
    assert list(s.families()) == ["mindspore_cpu", "kineto"]
    # a folder with nothing but profiler_info_<rank>.json counts as a MindInsight run only when alone
    s = Survey(tmp_path, mi_top=tmp_path, mi_top_info_only=True)
    assert s.families() == {"mindinsight": "run"}
    s.traces = [tmp_path / "a.json"]
    assert s.families() == {"kineto": "1 traces"}


# --------------------------------------------------------------------------- a fake family through the engine


def _units(root, ranks=None):
    return [f"{root}/u{i}" for i in range(3)]


def _reduce(unit, comm_patterns):
    i = int(unit.rsplit("u", 1)[1])
    return engine.Part("fake", unit, {"rank": i, "patterns": list(comm_patterns)},
                       {"t": pd.DataFrame({"rank": [i], "x_ms": [i * 1.5], "name": [f"op{i}"]})}, [])


def _assemble(root, parts):
    run = Run(name="fake", source_format="fake", source_path=str(root))
    run.tables["t"] = pd.concat([p.tables["t"] for p in parts], ignore_index=True)
    run.ranks = [p.meta["rank"] for p in parts]
    return run


def _check_part(meta, tables):
    if "rank" not in meta:
        raise ValueError("a fake part without its rank")


FAKE = registry.Family("fake", "Fake", lambda s, others: [], ("unit", "units"), lambda *a, **k: None,
                       units=_units, reduce=_reduce, assemble=_assemble, check_part=_check_part)


def test_engine_runs_any_registered_family(tmp_path):
    run = engine.read(tmp_path, FAKE, {"fake": FAKE}, comm_patterns=("x",), jobs=1)
    assert run.ranks == [0, 1, 2] and run.table("t")["x_ms"].tolist() == [0.0, 1.5, 3.0]
    jobs = engine.jobs_of(FAKE, ["a/u7"], ("p",))
    assert engine.reduce(jobs[0]).meta == {"rank": 7, "patterns": ["p"]} and jobs[0][3] == "a/u7"


def test_reduced_files_are_checked_against_the_families_given(tmp_path):
    parts = [_reduce(u, ()) for u in _units(tmp_path)]
    f = tmp_path / "node.reduced"
    f.write_bytes(engine.dumps(parts, "fake"))
    assert engine.family_of_all([f], {"fake": FAKE}) == "fake"
    loaded = engine.load(f, {"fake": FAKE}, "fake")
    assert [p.meta["rank"] for p in loaded] == [0, 1, 2]
    pd.testing.assert_frame_equal(loaded[1].tables["t"], parts[1].tables["t"])
    with pytest.raises(InputError, match="family 'fake' is not one of kineto"):
        engine.load(f, {"kineto": registry.get("kineto")})
    # the family's own check of a part from an untrusted file
    bad = tmp_path / "bad.reduced"
    bad.write_bytes(engine.dumps([replace(parts[0], meta={})], "fake"))
    with pytest.raises(InputError, match="broken .reduced file: a fake part without its rank"):
        engine.load(bad, {"fake": FAKE})
    run = engine.read(tmp_path / "empty", replace(FAKE, units=lambda root, ranks=None: []), {"fake": FAKE},
                      reduced=[f])
    assert run.ranks == [0, 1, 2]
