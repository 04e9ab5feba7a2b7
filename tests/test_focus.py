"""Issue 28 #4: big runs keep what the findings name. Every rank, step, link and group a finding names is drawn in
the view its link opens and offered by that view's controls, whatever the view samples (reportgen/focus.py); hosts
sort naturally; rank lists in cells are ranges; the Marey view thins without dropping computation."""

from __future__ import annotations

import pandas as pd
import pytest

from reportgen import charts as vl
from reportgen import focus, palette, render
from reportgen import thresholds as th
from reportgen.report import Analysis, Control, EvidenceView, Finding, natural_sorted


# --------------------------------------------------------------------------- the one sampling rule


def test_keep_sample_keeps_named_items_within_the_limit():
    items = list(range(100))
    out = focus.keep_sample(items, 10, keep=[37, 58])
    assert 37 in out and 58 in out and len(out) == 10 and out == sorted(out)
    assert out[0] == 0 and out[-1] == 99  # evenly spaced over the rest, the ends included
    assert focus.keep_sample(items, 200, keep=[3]) == items
    assert focus.keep_sample([str(s) for s in range(20)], 4, keep=[15]).count("15") == 1  # "15" == 15 as text
    assert sorted(focus.keep_sample(items, 2, keep=[5, 6, 7])) == [5, 6, 7]  # more named than the limit: all kept


def test_focus_collects_ranks_steps_links_and_control_values():
    fs = [Finding("a", "high", "x", "m", ranks=[517], view=EvidenceView("f", {"step": "15", "domain": "259"})),
          Finding("b", "medium", "x", "m", ranks=list(range(256)), links=[[261, 5]],
                  evidence={"step": 3}),
          Finding("c", "low", "x", "m", compare=[9, 10])]
    fo = focus.from_findings(fs, default_step=16)
    assert {517, 261, 5, 9, 10} <= set(fo.ranks)
    assert len([r for r in fo.ranks if r < 256]) <= focus.MAX_RANKS_PER_FINDING + 2  # a stage-wide finding: its first
    assert fo.steps_to_keep() == [3, 15, 16] and fo.links == ((261, 5),)
    assert fo.values("domain") == ("259",)


# --------------------------------------------------------------------------- small tables, each view


def _rank_step(n_ranks=40, steps=6, slow=23):
    rows = [{"rank": r, "step": s, "v": 10.0 + (5 if r == slow else 0) + s * 0.01, "warmup": s == 0}
            for r in range(n_ranks) for s in range(steps)]
    return pd.DataFrame(rows)


def test_heatmap_bins_ranks_to_a_height_cap_and_keeps_named_rows():
    df = _rank_step(400)
    out, per_bin = vl.bin_ranks(df, ["v"], max_rows=20, keep=[123, 377])
    assert per_bin > 1 and out["rank"].nunique() <= 20
    assert {123, 377} <= set(out.loc[out["ranks"].isin(["123", "377"]), "rank"])  # rows of their own
    # every rank is in exactly one row, and the grouped cell keeps the slow rank's maximum (contrast)
    cover = sorted(r for _, g in out[out["step"] == 1].iterrows() for r in range(g["rank"], g["rank_last"] + 1)
                   if str(r) == g["ranks"] or "–" in g["ranks"])
    assert set(cover) >= set(range(400)) - {123, 377}
    assert float(out[(out["rank"] <= 23) & (out["rank_last"] >= 23) & (out["step"] == 1)]["v"].iloc[0]) > 14
    chart = vl.median_heatmap(out.assign(step_ms=out["v"]), {"v": "V"}, param="p", reference="step_ms")
    spec = vl.to_spec(chart)
    assert spec["height"]["step"] * out["rank"].nunique() <= 600


def test_overlap_and_trajectory_heatmaps_keep_named_ranks(monkeypatch):
    from reportgen.sections import overlap, trajectory
    monkeypatch.setattr(vl, "HEATMAP_MAX_RANK_ROWS", 12)
    df = _rank_step(200).rename(columns={"v": "comm_not_overlapped_ms"})
    df["step_ms"] = df["comm_not_overlapped_ms"] + 50
    fig = overlap._heat(df, ["comm_not_overlapped_ms"], {"comm_not_overlapped_ms": "Exposed"}, keep=[151])
    rows = [r for rows in fig.spec["datasets"].values() for r in rows]
    assert 151 in {r["rank"] for r in rows if r.get("ranks") == "151"}
    assert len({r["rank"] for r in rows}) <= 12
    tdf = df.rename(columns={"comm_not_overlapped_ms": "fwd_ms"}).assign(host="h")
    fig = trajectory._heatmap(tdf, {"step_ms": "Step", "fwd_ms": "Fwd"}, ["step_ms", "fwd_ms"], keep=[77])
    rows = [r for rows in fig.spec["datasets"].values() for r in rows]
    assert 77 in {r["rank"] for r in rows} and len({r["rank"] for r in rows}) <= 12


def test_marey_thinning_keeps_computation_and_named_lanes():
    from reportgen.sections import execution
    rows = []
    for r in range(64):  # each lane: 30 short kernels around 6 collectives
        t = 0.0
        for i in range(6):
            for k in range(5):
                rows.append({"rank": r, "kind": "computation", "op": f"k{k}", "start": t, "end": t + 0.9})
                t += 1.0
            rows.append({"rank": r, "kind": "communication", "op": f"ar{i}", "start": t, "end": t + 2.0})
            t += 2.0
    s = pd.DataFrame(rows).assign(end_ms=lambda d: d["end"], derived=False)
    trimmed = {"computation_thinned": 0, "lanes_sampled": False}
    out, cost = execution._fit_step(s, 500, trimmed, keep_ranks=[41])
    assert cost <= 500
    kinds = out["kind"].value_counts()
    assert kinds.get("computation", 0) > 0 and kinds.get("communication", 0) > 0  # no class dropped
    assert 41 in set(out["rank"])
    lanes = out["rank"].nunique()
    per_lane = out[out["kind"] == "computation"].groupby("rank").size()
    assert len(per_lane) == lanes  # every drawn lane shows its computation
    merged = out[out["op"].str.contains("merged")]
    assert not merged.empty and trimmed["adjacent_merged"] > 0
    # a merged block never covers a collective of its lane
    for _, b in merged.iterrows():
        c = out[(out["rank"] == b["rank"]) & (out["kind"] == "communication")]
        assert not ((c["start"] < b["end"]) & (c["end"] > b["start"])).any()


def test_domains_control_offers_every_group_findings_name_by_its_id():
    from reportgen.sections import domains
    d = pd.DataFrame({"gi": range(10), "group": [f"g{i * 7}" for i in range(10)], "name": "", "kind": "dp",
                      "size": 4, "verdict": "balanced", "verdict_detail": "", "verdict_metric": "",
                      "worst_rank": [pd.NA] * 10, "same_members": ""})
    mem = pd.DataFrame([{"gi": g, "rank": g * 4 + k, "step_ms": 10.0, "computing_ms": 5.0}
                        for g in range(10) for k in range(4)])
    old = domains.CHART_GROUPS
    try:
        domains.CHART_GROUPS = 3
        fig, control = domains._members_figure(d, mem, [("computing_ms", "Computing", "compute")],
                                               keep_groups=["g56"])
    finally:
        domains.CHART_GROUPS = old
    values = [v for v, _ in control.options]
    assert values == ["g0", "g7", "g14", "g56"]  # the group ids the findings cite, never a row index
    rows = [r for rows in fig.spec["datasets"].values() for r in rows]
    assert "g56" in {r["group"] for r in rows}
    assert "datum.group == domain" in str(fig.spec)
    assert domains._view("g56").signals == {"domain": "g56"}


def test_cut_controls_keep_the_values_findings_set():
    n = render.MAX_OPTIONS + 24
    named = render.MAX_OPTIONS + 17
    c = Control("drill_rank", "Rank", [(r, f"Rank {r}") for r in range(n)], 0)
    f = Finding("x", "high", "s", "m", ranks=[named], view=EvidenceView("fig", {"domain": "g9"}))
    keep = render._control_values_to_keep([f], {named})
    ctx = render._control_ctx(c, keep)
    assert named in [v for v, _ in ctx["later"]] and "named by findings" in ctx["label"]
    assert len(ctx["later"]) == render.MAX_OPTIONS + 1
    # the page writes the default and the named value; the others wait in the control's data until it is used
    assert [o["value"] for o in ctx["options"]] == [0, named]


def test_a_control_of_many_options_writes_the_default_and_the_named_ones():
    c = Control("drill_rank", "Rank", [(r, f"Rank {r}") for r in range(1024)], 5)
    f = Finding("x", "high", "s", "m", ranks=[1017], view=EvidenceView("fig", {}))
    ctx = render._control_ctx(c, render._control_values_to_keep([f], {1017}))
    assert [o["value"] for o in ctx["options"]] == [5, 1017] and len(ctx["later"]) == 1024
    assert ctx["label"] == "Rank"  # nothing cut
    small = render._control_ctx(Control("step", "Step", [(s, str(s)) for s in range(render.LAZY_OPTIONS)], 0), {})
    assert "later" not in small and len(small["options"]) == render.LAZY_OPTIONS


# --------------------------------------------------------------------------- hosts, rank lists


def test_hosts_sort_naturally_everywhere():
    hosts = [f"gpu-node-{i}" for i in (0, 101, 105, 12, 2, 10)]
    assert natural_sorted(hosts) == [f"gpu-node-{i}" for i in (0, 2, 10, 12, 101, 105)]
    from reportgen.model import Run
    run = Run(name="t", source_format="kineto", source_path="/x")
    run.ranks = list(range(6))
    run.hosts = {r: h for r, h in enumerate(hosts)}
    summary = render.run_summary(run)
    assert [h["host"] for h in summary["hosts"]] == natural_sorted(hosts)


def test_memory_grid_orders_hosts_naturally():
    from reportgen.sections import memory
    hosts = [f"gpu-node-{i}" for i in range(12)]
    pr = pd.DataFrame({"rank": range(24), "host": [hosts[r // 2] for r in range(24)], "device": [r % 2 for r in range(24)],
                       "stage": 0, "peak_mb": 100.0, "capacity_mb": 1000.0, "peak_ratio": 0.1})
    spec = memory._grid(pr, True, True).spec
    sorts = [v.get("sort") for v in _walk_channel(spec, "y") if v.get("field") == "host"]
    assert sorts and all(s == natural_sorted(hosts) for s in sorts)


def _walk_channel(spec, channel):
    if isinstance(spec, dict):
        enc = spec.get("encoding") or {}
        if isinstance(enc.get(channel), dict):
            yield enc[channel]
        for v in spec.values():
            yield from _walk_channel(v, channel)
    elif isinstance(spec, list):
        for v in spec:
            yield from _walk_channel(v, channel)


def test_mesh_does_not_encode_many_hosts_by_colour():
    from reportgen.sections import strategy
    n_hosts = len(palette.IDENTITY) * 3
    df = pd.DataFrame({"rank": range(n_hosts * 2), "stage": 0, "column": range(n_hosts * 2),
                       "host": [f"gpu-node-{r // 2}" for r in range(n_hosts * 2)], "groups": "",
                       **{f"{k}_index": pd.NA for k in strategy.DIMS}})
    df["dp_index"] = pd.NA
    spec = strategy._mesh_figure(df, {}, named_ranks=[7]).spec
    scales = [v["scale"] for v in _walk_colors(spec)]
    domains = [s.get("domain") for s in scales if isinstance(s.get("domain"), list)]
    assert domains and all(len(d) <= len(palette.IDENTITY) for d in domains)
    assert ["gpu-node-3", strategy.OTHER_HOSTS] in domains  # only the named rank's host takes a colour


def _walk_colors(spec):
    if isinstance(spec, dict):
        enc = spec.get("encoding") or {}
        if isinstance(enc.get("color"), dict) and "scale" in enc["color"] and enc["color"]["scale"]:
            yield enc["color"]
        for v in spec.values():
            yield from _walk_colors(v)
    elif isinstance(spec, list):
        for v in spec:
            yield from _walk_colors(v)




# --------------------------------------------------------------------------- a generated run, document level


@pytest.fixture(scope="module")
def small_pipeline(tmp_path_factory):
    from reportgen.synth.kineto import KinetoSpec, write_kineto_run
    path = tmp_path_factory.mktemp("focus") / "k32"
    write_kineto_run(str(path), KinetoSpec(hosts=16, devices_per_host=2, stages=4, steps=8, micro_batches=2,
                                           host_names=[f"gpu-node-{i}" for i in range(16)], slow_ranks={21: 1.4}))
    return path


def _rows(spec) -> list[dict]:
    out = [r for rows in (spec.get("datasets") or {}).values() for r in rows if isinstance(r, dict)]
    for k in ("layer", "hconcat", "vconcat", "concat"):
        for sub in spec.get(k) or []:
            if isinstance(sub, dict):
                out += _rows(sub)
    if isinstance((spec.get("data") or {}).get("values"), list):
        out += [r for r in spec["data"]["values"] if isinstance(r, dict)]
    return out


def _drawn(rows, rank) -> bool:
    """Is ``rank`` drawn: a row of its own, or a grouped heatmap row holding it."""
    for r in rows:
        lo = r.get("rank")
        if lo is None:
            continue
        if lo == rank or (r.get("rank_last") is not None and lo <= rank <= r["rank_last"]):
            return True
    return False


def test_findings_ranks_steps_and_groups_are_in_the_views_they_link_to(small_pipeline, monkeypatch):
    """At scale (limits lowered so 32 ranks sample like 1024): every rank and step any finding names, and the
    page's default step, are in every sampled rank / step view's data and step controls; each finding's own link
    finds its ranks in the linked chart's data and its values among the controls' options; the per-stage table
    writes rank ranges and the mesh never repeats host colours."""
    from reportgen import facts
    from reportgen.readers import read_run
    from reportgen.sections import Options, execution, overlap, run_sections, trajectory, waits
    monkeypatch.setattr(th, "PAGE_RANKS_ALL", 8)
    monkeypatch.setattr(th, "PAGE_RANKS_EXTREMES", 2)
    monkeypatch.setattr(vl, "HEATMAP_MAX_RANK_ROWS", 8)
    monkeypatch.setattr(execution, "MAX_LANES", 6)
    monkeypatch.setattr(execution, "MAX_MARKS", 600)
    monkeypatch.setattr(trajectory, "MAX_CHART_ROWS", 1)  # the step selector offers as few steps as it can
    from reportgen.sections import compare
    monkeypatch.setattr(compare, "PAIR_RANKS", 6)
    real = waits.analyze

    def analyze(run, options=None):  # a finding about a rank no sample would pick and a step the selector skips
        a = real(run, options)
        cited = facts.of(run).steps_all[1]
        a.findings.append(Finding("test_named", "low", "overlap", f"rank 13 in step {cited}", ranks=[13],
                                  view=EvidenceView("overlap-heatmap", {"step": str(cited)})))
        return a
    monkeypatch.setattr(waits, "analyze", analyze)
    run = read_run(small_pipeline)
    outcomes = run_sections(run, Options())
    by_fig = {f.id: (o, f) for o in outcomes if o.view is not None for f in o.view.figures}
    findings = [f for o in outcomes if o.view is not None for f in o.view.findings]
    assert any(f.id == "test_named" for f in findings)
    fo = next(o.analysis.focus for o in outcomes if o.status == "ok" and o.id != "advisor")
    default = facts.of(run).median_step()
    assert 13 in fo.ranks and facts.of(run).steps_all[1] in fo.steps and fo.default_step == default
    # every sampled per-rank view draws every focus rank
    for fid in ("trajectory-bars", "trajectory-heatmap", "overlap-bars", "overlap-heatmap", "execution-marey"):
        assert fid in by_fig, fid
        rows = _rows(by_fig[fid][1].spec)
        missing = [r for r in fo.ranks if r in run.ranks and not _drawn(rows, r)]
        assert not missing, (fid, missing)
    # every step selector offers the default step and the cited steps
    for o in outcomes:
        for c in (o.view.controls if o.view is not None else []):
            if c.signal == "step":
                values = {str(v) for v, _ in c.options}
                assert {str(s) for s in fo.steps_to_keep()} <= values, (o.id, values)
    (traj_step,) = [c for c in by_fig["trajectory-bars"][0].view.controls if c.signal == "step"]
    assert len(traj_step.options) < 1 + len(facts.of(run).steps_all)  # it did sample
    # the Marey view opens on the page's default step and draws computation
    marey = by_fig["execution-marey"][1].spec
    assert str(default) in str(marey.get("params")) or default == int(
        next(c.default for c in by_fig["execution-marey"][0].view.controls if c.signal == "step"))
    kinds = {r.get("kind") for r in _rows(marey)}
    assert {"computation", "communication"} <= kinds
    # each finding's own link: its ranks in the chart's data, its values among the section's options
    for f in findings:
        if f.view is None or f.view.figure not in by_fig:
            continue
        o, fig = by_fig[f.view.figure]
        rows = _rows(fig.spec)
        if any("rank" in r for r in rows):
            for r in list(f.ranks)[:focus.MAX_RANKS_PER_FINDING]:
                assert _drawn(rows, int(r)) or any(r2.get(k) == int(r) for r2 in rows
                                                   for k in ("src_rank", "dst_rank")), (f.id, fig.id, r)
        controls = {c.signal: {str(v) for v, _ in c.options} for c in o.view.controls}
        for name, value in f.view.signals.items():
            if name in controls:
                assert str(value) in controls[name], (f.id, name, value)
    # a straggler finding's comparison link: both ranks among the pair controls' options
    cmp_controls = {c.signal: {str(v) for v, _ in c.options}
                    for o in outcomes if o.id == "compare" and o.view is not None for c in o.view.controls}
    assert any(f.compare for f in findings)  # rank 21's straggler finding
    for f in findings:
        if f.compare:
            assert str(f.compare[0]) in cmp_controls["rank_a"] and str(f.compare[1]) in cmp_controls["rank_b"], \
                (f.id, f.compare)
    # the per-stage table writes ranges; the mesh does not colour 16 hosts with 9 colours
    ov = next(o for o in outcomes if o.id == "overlap")
    (st,) = [t for t in ov.view.tables if t.id == "overlap-per-stage"]
    assert st.rows and all("," not in str(r["ranks"]) and "-" in str(r["ranks"]) for r in st.rows)
    mesh = by_fig["strategy-mesh"][1].spec
    assert all(len(c["scale"]["domain"]) <= len(palette.IDENTITY) for c in _walk_colors(mesh)
               if isinstance(c["scale"].get("domain"), list))
