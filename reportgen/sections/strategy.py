"""Parallel strategy: the process groups and the rank mesh they imply, and (parallel_strategy files) the operators'
shard strategies, redistribution / gradient-aggregation operators and pipeline send/receive pairs.

Sources and definitions:

* Groups (every family): the ``groups`` table. NPU: ``profiler_metadata.json`` parallel_group_info;
  torch.profiler: the union of the ranks' ``distributedInfo`` pg_config, kinds from pg_desc. The seed's files
  have no group ranks: the stages' device blocks are shown instead (the seed's ParallelStrategyAnalyser:
  ``group_num = rank_size // stage_num``, stage s = ranks ``[s·group_num, (s+1)·group_num)``, 0-based),
  and with several stages the pipeline groups (same position in every stage), marked as derived.
* Mesh coordinates of a rank: its position in its sorted pp / dp / tp / cp / ep group (when a rank is in
  several groups of a kind, the one named exactly like the kind wins, then the smallest). Stage = the
  reader's stage map (1-based) when known, else pp position + 1.
* Sizes: ``run.parallel`` where the data states them, else the most common size of the kind's groups.
* ``parallel_strategy_<rank>.json`` (research notes on the seed's cluster pages §3.6),
  merged per stage as the seed's MergedGraph: op nodes of the stage's first rank (in stage-device
  order), ``parallel_group`` = sorted union of the ``group`` attribute over the stage's ranks,
  ``parallel_shard`` = attr ``in_strategy`` (string). Send/Receive pairs matched by ``sr_tag`` between
  the sender (attr ``dest_rank``) and the receiver (attr ``src_rank``), as the seed's UI.
* Layout check (low findings): world size ≠ product of the known tp·pp·dp·cp sizes; a rank in no group
  besides the world group.
"""

from __future__ import annotations

import math
from collections import Counter

from .. import charts as vl
import pandas as pd

from .. import fmt, limits, palette
from ..charts import band, cell_labels, natural_key, scale_position, sequential, to_spec
from .. import facts
from ..errors import Unavailable
from ..model import Run
from ..report import (Analysis, Column, Control, Figure, Finding, Table, Tree, TreeNode, View, count,
                      natural_order, natural_sorted, rank_ranges)
from . import missing_needs, needs_reason, pipeline, strategy_graph
from .strategy_graph import parse_shard

ID = "strategy"
TITLE = "Parallel strategy"
#: No table is required: a run whose readers know each rank's pipeline stage (``run.stage_map``, not a table the
#: runner can check) gets the stage blocks and pipeline chains; ``analyze`` says unavailable when it has neither
#: ``groups``, ``strategy_ops`` nor stages. Tables read: ``groups``, ``strategy_ops``, ``strategy_pairs``.
NEEDS: tuple = ()

DIMS = ["pp", "dp", "tp", "cp", "ep"]
#: cells of the mesh chart that still get their rank written in them
MESH_TEXT_MAX = 256
#: positions of a stage per row of the mesh chart once a stage has more than twice as many (4096 ranks in 2 stages:
#: 32 rows of 64 per stage instead of one row of 2048 cells 3 px wide)
MESH_ROW_CELLS = 64


# --------------------------------------------------------------------------- groups and mesh


def _stage_devices(run: Run, ops: pd.DataFrame | None) -> dict[int, list[int]]:
    """0-based stage -> ranks, as the seed's metadata."""
    stages, world = run.parallel.get("stages"), run.world_size
    # a claimed world far beyond the ranks found is not listed rank by rank (issue 14): the ranks' own stage ids
    if stages and world and stages >= 1 and world >= stages and world - len(run.ranks) <= limits.MAX_LISTED_RANKS:
        g = world // stages
        return {s: list(range(s * g, (s + 1) * g)) for s in range(stages)}
    if ops is not None:
        by = ops.groupby("stage_id")["rank"].apply(lambda r: sorted({int(x) for x in r}))
        return {int(s): v for s, v in by.items()}
    return {}


def _stage_groups(stage_devices: dict[int, list[int]]) -> pd.DataFrame:
    rows = []
    for s, ranks in sorted(stage_devices.items()):
        rows.append({"group": f"stage{s}", "name": f"stage {s} devices",
                     "kind": "world" if len(stage_devices) == 1 else "other", "ranks": list(ranks), "hash": ""})
    if len(stage_devices) > 1 and len({len(v) for v in stage_devices.values()}) == 1:
        blocks = [stage_devices[s] for s in sorted(stage_devices)]
        for i in range(len(blocks[0])):
            rows.append({"group": f"pp{i}", "name": "pp (derived: same position in every stage)", "kind": "pp",
                         "ranks": [b[i] for b in blocks], "hash": ""})
    return pd.DataFrame(rows, columns=["group", "name", "kind", "ranks", "hash"])


def _membership(groups: pd.DataFrame, kind: str) -> dict[int, tuple]:
    """rank -> (group key, sorted ranks) of its group of ``kind`` (exact name first, then the smallest)."""
    best: dict[int, tuple] = {}
    sel = groups[groups["kind"] == kind]
    for g in sel.itertuples():
        ranks = sorted(int(r) for r in g.ranks)
        pref = (0 if str(g.name).lower() == kind else 1, len(ranks))
        for r in ranks:
            if r not in best or pref < best[r][0]:
                best[r] = (pref, str(g.group), ranks)
    return {r: (v[1], v[2]) for r, v in best.items()}


def _sizes(run: Run, groups: pd.DataFrame) -> dict[str, int]:
    out = {}
    for kind in DIMS:
        sizes = [len(r) for r in groups.loc[groups["kind"] == kind, "ranks"]]
        if sizes:
            out[kind] = Counter(sizes).most_common(1)[0][0]
    return out


def mesh(run: Run, groups: pd.DataFrame, ranks: list[int]) -> pd.DataFrame:
    """One row per rank: stage, position in its pp/dp/tp/cp/ep group, the mesh column, its groups."""
    members = {k: _membership(groups, k) for k in DIMS}
    sizes = {k: max((len(v[1]) for v in members[k].values()), default=1) for k in DIMS}
    in_groups: dict[int, list[str]] = {r: [] for r in ranks}
    for g in groups.itertuples():
        for r in g.ranks:
            if int(r) in in_groups:
                in_groups[int(r)].append(f"{g.name} ({len(g.ranks)})")
    rows = []
    for r in ranks:
        row = {"rank": r, "host": run.host_of(r)}
        for k in DIMS:
            m = members[k].get(r)
            row[f"{k}_index"] = m[1].index(r) if m else None
        st = run.stage_of(r)
        if st is None and row["pp_index"] is not None:
            st = row["pp_index"] + 1
        if st is None and not members["pp"]:
            st = 1  # no pipeline: every rank is in the one stage
        row["stage"] = st
        row["groups"] = ", ".join(in_groups[r])
        rows.append(row)
    df = pd.DataFrame(rows)
    # mesh column: tp fastest, then cp, then dp (Megatron's order); a rank with none of them by its position
    col = pd.Series(0, index=df.index, dtype="int64")
    known = False
    for k in ("dp", "cp", "tp"):
        idx = df[f"{k}_index"]
        if idx.notna().any() and sizes[k] > 1:
            known = True
            col = col * sizes[k] + idx.fillna(0).astype("int64")
    stage_key = df["stage"].fillna(0)
    if not known or df.assign(c=col, s=stage_key).duplicated(["s", "c"]).any():
        col = df.assign(s=stage_key).groupby("s")["rank"].rank(method="first").astype("int64") - 1
    df["column"] = col.to_numpy()
    return df


# --------------------------------------------------------------------------- parallel_strategy files


def merge_stage_ops(ops: pd.DataFrame, stage_devices: dict[int, list[int]]) -> pd.DataFrame:
    """The seed's MergedGraph per stage: op nodes of the first rank, parallel_group = sorted union."""
    out = []
    have = set(ops["rank"].unique().tolist())
    for s, ranks in sorted(stage_devices.items()):
        present = [r for r in ranks if r in have]
        if not present:
            continue
        first = ops[ops["rank"] == present[0]]
        st = ops[ops["rank"].isin(present)]
        union = st.groupby("node")["parallel_group"].apply(lambda g: sorted({str(x) for x in g if str(x)}))
        m = first.copy()
        m["stage_id"] = s
        m["stage"] = s + 1
        m["parallel_group"] = [union.get(n, []) for n in m["node"]]
        m["group"] = [", ".join(g) for g in m["parallel_group"]]
        m["input"] = [[x for x in str(i).split(",") if x] for i in m["inputs"]]
        out.append(m)
    cols = ["stage", "stage_id", "node_id", "name", "type", "scope", "instance_type", "parallel_shard",
            "parallel_group", "group", "parallel_group_rank", "input", "op_class", "p2p"]
    if "phase" in ops:
        cols.append("phase")
    if not out:
        return pd.DataFrame(columns=cols)
    return pd.concat(out, ignore_index=True)[cols]


#: dimensions of a strategy matrix shown as columns (a tensor of more dimensions keeps the rest in ``dims``)
MATRIX_DIMS = 8


def strategy_matrices(merged: pd.DataFrame) -> pd.DataFrame:
    """One row per input of every operator with a shard strategy (seed figure 14): slices per dimension in
    ``d1..d8`` and the whole row as ``dims`` ("2 × 1 × 4"), ``devices`` = the product (how many devices share the
    input)."""
    rows = []
    for r in merged.itertuples():
        m = parse_shard(r.parallel_shard)
        if not m:
            continue
        for i, dims in enumerate(m, start=1):
            row = {"stage": r.stage, "name": r.name, "scope": r.scope, "type": r.type, "input": i,
                   "dims": " × ".join(map(str, dims)), "devices": int(math.prod(dims)) if dims else 1}
            row.update({f"d{k + 1}": (dims[k] if k < len(dims) else None) for k in range(MATRIX_DIMS)})
            rows.append(row)
    cols = ["stage", "name", "scope", "type", "input", "dims", "devices"] + [f"d{k + 1}" for k in range(MATRIX_DIMS)]
    return pd.DataFrame(rows, columns=cols).astype({f"d{k + 1}": "Int64" for k in range(MATRIX_DIMS)})


def namespace_counts(merged: pd.DataFrame) -> pd.DataFrame:
    """Per stage and namespace (every prefix of the operators' scopes, the seed's aggregation nodes): operators
    below it, those with a strategy, redistribution and gradient-aggregation operators."""
    m = merged.assign(with_strategy=merged["parallel_shard"].astype(str) != "",
                      redistribution=merged["instance_type"] == "Redistribution",
                      gradient_aggregation=merged["instance_type"] == "GradientAggregation", ops=1)
    parts = []
    scopes = m["scope"].astype(str).str.split("/")
    depth = scopes.map(len).max() if len(m) else 0
    for d in range(1, int(depth) + 1):
        ns = scopes.map(lambda p: "/".join(p[:d]) if len(p) >= d and p[0] else None)
        x = m.assign(namespace=ns, depth=d).dropna(subset=["namespace"])
        parts.append(x.groupby(["stage", "namespace", "depth"], as_index=False)[
            ["ops", "with_strategy", "redistribution", "gradient_aggregation"]].sum())
    cols = ["stage", "namespace", "depth", "ops", "with_strategy", "redistribution", "gradient_aggregation"]
    if not parts:
        return pd.DataFrame(columns=cols)
    out = pd.concat(parts, ignore_index=True)[cols]
    return out.sort_values(["stage", "namespace"], key=lambda c: c.map(natural_key) if c.name == "namespace" else c,
                           kind="stable").reset_index(drop=True)


def disagreements(ops: pd.DataFrame, stage_devices: dict[int, list[int]]) -> pd.DataFrame:
    """Operators whose shard strategy is not the same on every rank of their stage, or differs between stages for
    the same operator name: one row per operator and strategy, with the ranks that have it."""
    o = ops[ops["parallel_shard"].astype(str) != ""]
    if o.empty:
        return pd.DataFrame(columns=["scope_of_check", "name", "parallel_shard", "ranks", "stage_ids"])
    rows = []
    for name, g in o.groupby("name", sort=False):
        if g["parallel_shard"].nunique() < 2:
            continue
        within = any(x["parallel_shard"].nunique() > 1 for _, x in g.groupby("stage_id"))
        for shard, x in g.groupby("parallel_shard", sort=False):
            rows.append({"scope_of_check": "within a stage" if within else "between stages", "name": name,
                         "parallel_shard": shard, "ranks": sorted(int(r) for r in x["rank"]),
                         "stage_ids": sorted({int(s) for s in x["stage_id"].dropna()})})
    return pd.DataFrame(rows, columns=["scope_of_check", "name", "parallel_shard", "ranks", "stage_ids"])


def _special_counts(merged: pd.DataFrame) -> pd.DataFrame:
    m = merged.assign(with_strategy=merged["parallel_shard"].astype(str) != "",
                      redistribution=merged["instance_type"] == "Redistribution",
                      gradient_aggregation=merged["instance_type"] == "GradientAggregation",
                      in_group=merged["group"] != "", ops=1)
    return m.groupby(["stage", "scope"], as_index=False)[
        ["ops", "with_strategy", "in_group", "redistribution", "gradient_aggregation"]].sum()


def match_pairs(pairs: pd.DataFrame, stage_of) -> pd.DataFrame:
    """Send/Receive matched by (sender, receiver, sr_tag); unmatched halves are kept with the other side empty."""
    s = pairs[pairs["kind"] == "send"].rename(columns={"rank": "send_rank", "peer_rank": "recv_rank",
                                                      "node": "send_node", "name": "send_name"})
    r = pairs[pairs["kind"] == "receive"].rename(columns={"rank": "recv_rank", "peer_rank": "send_rank",
                                                         "node": "recv_node", "name": "recv_name"})
    keys = ["send_rank", "recv_rank", "sr_tag"]
    for df in (s, r):
        df["send_rank"] = pd.to_numeric(df["send_rank"], errors="coerce").astype("Int64")
        df["recv_rank"] = pd.to_numeric(df["recv_rank"], errors="coerce").astype("Int64")
    out = s[keys + ["send_node", "send_name"]].merge(r[keys + ["recv_node", "recv_name"]], on=keys, how="outer")
    out["matched"] = out["send_node"].notna() & out["recv_node"].notna()
    out["send_stage"] = [stage_of(int(x)) if pd.notna(x) else None for x in out["send_rank"]]
    out["recv_stage"] = [stage_of(int(x)) if pd.notna(x) else None for x in out["recv_rank"]]
    return out.sort_values(keys).reset_index(drop=True)


# --------------------------------------------------------------------------- analyze


def _mode(run: Run, sizes: dict) -> str:
    if run.parallel.get("mode"):
        return str(run.parallel["mode"])
    if run.parallel.get("framework_mode"):
        return str(run.parallel["framework_mode"])
    if sizes.get("pp", 1) > 1:
        return "pipeline-parallel"
    if sizes.get("tp", 1) > 1 or sizes.get("cp", 1) > 1 or sizes.get("ep", 1) > 1:
        return "model-parallel"
    if sizes.get("dp", 1) > 1:
        return "data-parallel"
    return "unknown"


def analyze(run: Run, options=None) -> Analysis:
    groups, ops, pairs = run.table("groups"), run.table("strategy_ops"), run.table("strategy_pairs")
    stage_devices = _stage_devices(run, ops) if ops is not None else {}
    derived, derived_from = False, ""
    if groups is None and stage_devices:
        groups, derived, derived_from = _stage_groups(stage_devices), True, "derived from the strategy's stage devices"
    elif groups is None and len(set(run.stage_map.values())) > 1:
        # no group data, but the files state each rank's stage (the seed's cluster analysis files): stage blocks
        # and the pipeline chains (same position in every stage), derived as the seed's strategy view does
        blocks: dict[int, list[int]] = {}
        for r, st in sorted(run.stage_map.items()):
            blocks.setdefault(int(st) - 1, []).append(int(r))
        stage_devices = blocks
        groups, derived, derived_from = _stage_groups(blocks), True, "derived from the run's pipeline stages"
        stage_rows = groups["group"].str.match(r"stage\d+$")  # named by the 1-based stage the report shows
        groups.loc[stage_rows, "name"] = [f"stage {int(g[5:]) + 1} ranks" for g in groups.loc[stage_rows, "group"]]
        groups.loc[stage_rows, "group"] = [f"stage{int(g[5:]) + 1}" for g in groups.loc[stage_rows, "group"]]
    if groups is None:
        raise Unavailable(
            "No process-group or parallel-strategy data in this run: " + needs_reason(None, ["groups or strategy_ops"],
                                                                                       options)
            + " or the ranks' pipeline stages.")
    groups = groups.copy()
    groups["ranks"] = [sorted(int(r) for r in rs) for rs in groups["ranks"]]
    groups["size"] = [len(r) for r in groups["ranks"]]
    ranks = sorted(set(run.ranks) | {r for rs in groups["ranks"] for r in rs})
    sizes = _sizes(run, groups)
    declared = {k: int(run.parallel[k]) for k in DIMS if isinstance(run.parallel.get(k), (int, float))}
    dims = {**sizes, **declared}
    if derived:
        dims.setdefault("pp", len(stage_devices))
    stages = run.parallel.get("stages") or (len(stage_devices) if stage_devices else None) or dims.get("pp") or 1
    if derived and stage_devices:
        by_rank = {r: s + 1 for s, rs in stage_devices.items() for r in rs}
        stage_of = lambda r: run.stage_of(r) or by_rank.get(r)  # noqa: E731
    else:
        stage_of = run.stage_of
    world = run.world_size or len(ranks)
    metrics = {"mode": _mode(run, dims), "stages": int(stages), "world_size": int(world),
               **{f"{k}_size": int(v) for k, v in dims.items()}, "groups": int(len(groups)),
               "groups_source": derived_from if derived else "groups table"}
    if run.parallel.get("framework_mode") and metrics["mode"] != run.parallel["framework_mode"]:
        metrics["framework_mode"] = str(run.parallel["framework_mode"])
    mrun = run if not derived else _StageRun(run, stage_of)
    mesh_df = mesh(mrun, groups, ranks)
    tables = {"groups": groups[["group", "name", "kind", "ranks", "size"]], "mesh": mesh_df}
    data = {"derived": derived, "mismatch": None, "ungrouped": [], "declared": declared, "group_sizes": sizes}
    # layout checks
    prod_dims = [k for k in ("tp", "pp", "dp", "cp") if k in dims]
    if "dp" in dims and prod_dims:
        prod = math.prod(dims[k] for k in prod_dims)
        metrics["product_of_dims"] = int(prod)
        if prod != world:
            data["mismatch"] = {"product": prod, "world": world, "dims": {k: dims[k] for k in prod_dims}}
    non_world = groups[groups["kind"] != "world"]
    if not non_world.empty:
        grouped = {r for rs in non_world["ranks"] for r in rs}
        data["ungrouped"] = [r for r in ranks if r not in grouped]
    for k in DIMS:
        if k in declared and k in sizes and declared[k] != sizes[k]:
            data.setdefault("size_conflicts", []).append({"kind": k, "declared": declared[k], "groups": sizes[k]})
    if ops is not None:
        merged = merge_stage_ops(ops, stage_devices)
        metrics["stage_devices"] = {str(s): list(r) for s, r in stage_devices.items()}
        metrics["op_nodes_per_stage"] = {str(int(s)): int(n) for s, n in merged.groupby("stage_id").size().items()}
        metrics["ops_with_strategy"] = int((merged["parallel_shard"].astype(str) != "").sum())
        metrics["redistribution_ops"] = int((merged["instance_type"] == "Redistribution").sum())
        metrics["gradient_aggregation_ops"] = int((merged["instance_type"] == "GradientAggregation").sum())
        interesting = (merged["parallel_shard"].astype(str) != "") | (merged["group"] != "") | \
            (merged["instance_type"] != "") | (merged["p2p"] != "")
        tables["strategy_ops"] = merged[interesting].reset_index(drop=True)
        tables["special_ops"] = _special_counts(merged)
        data["all_ops"] = merged
        mat = strategy_matrices(merged)
        if not mat.empty:
            tables["strategy_matrices"] = mat
        tables["namespaces"] = namespace_counts(merged)
        # the computational graph (strategy_graph: aggregation, layout) and its node attribute table
        data["graph"] = strategy_graph.graph_data(merged)
        tables["graph_ops"] = strategy_graph.node_table(merged)
        data["graph_ops_total"] = int(len(merged))
        metrics["graph_nodes_drawn"] = {f"{r['stage']}:{r['phase']}": r["nodes"] for r in data["graph"]["stats"]}
        dis = disagreements(ops, stage_devices)
        if not dis.empty:
            tables["strategy_disagreements"] = dis
        metrics["strategy_disagreements"] = int(len(dis))
    F = facts.of(run, options)
    pipe = None if missing_needs(run, pipeline.NEEDS) else pipeline.analyze(run, groups, stage_of, F)
    if pipe is not None:
        metrics["pipeline"] = pipe["metrics"]
        tables["pipeline_stages"] = pipe["stages"]
        tables["pipeline_links"] = pipe["links"]
        data["pipeline"] = pipe
    if pairs is not None:
        matched = match_pairs(pairs, stage_of)
        tables["pipeline_pairs"] = matched
        metrics["pipeline_pairs"] = int(matched["matched"].sum())
        metrics["pipeline_unmatched"] = int((~matched["matched"]).sum())
    a = Analysis(metrics=metrics, tables=tables, data=data)
    a.findings = _findings(a)
    return a


class _StageRun:
    """A view of the run whose stage_of comes from the strategy's stage devices."""

    def __init__(self, run: Run, stage_of):
        self._run, self.stage_of = run, stage_of

    def host_of(self, rank):
        return self._run.host_of(rank)


# --------------------------------------------------------------------------- present


def present(a: Analysis) -> View:
    m, t = a.metrics, a.tables
    figures = [_mesh_figure(t["mesh"], m, vl.named_ranks(a))]
    trees: list[Tree] = []
    dims = " × ".join(f"{k} {m[f'{k}_size']}" for k in DIMS if f"{k}_size" in m)
    summary = (f"Mode {m['mode']}, {count(m['stages'] or 1, 'pipeline stage')}, {count(m['world_size'], 'rank')}"
               + (f" ({dims})" if dims else "") + f"; {count(m['groups'], 'process group')}.")
    groups = natural_order(t["groups"], ["group"])
    tables = [Table.from_frame(
        "strategy-groups", "Process groups", groups.assign(ranks_text=[_ranks_text(r) for r in groups["ranks"]]),
        [Column("group", "Group", "text"), Column("name", "Name", "text"), Column("kind", "Kind", "text"),
         Column("size", "Size", "int"), Column("ranks_text", "Ranks", "text")],
        caption=(m["groups_source"][0].upper() + m["groups_source"][1:] + " (the files name no group ranks).")
        if a.data["derived"] else ""),
        Table.from_frame(
        "strategy-coordinates", "Rank coordinates", t["mesh"],
        [Column("rank", "Rank", "rank"), Column("host", "Host", "text"), Column("stage", "Stage", "int")] +
        [Column(f"{k}_index", f"{k} index", "int") for k in DIMS if t["mesh"][f"{k}_index"].notna().any()] +
        [Column("groups", "Groups (size)", "text")],
        caption="Index = position of the rank in its sorted group of that kind.")]
    if "strategy_ops" in t:
        so = t["strategy_ops"]
        tables.append(Table.from_frame(
            "strategy-ops", "Operators with a shard strategy, a group or a parallel role", so,
            [Column("stage", "Stage", "int"), Column("name", "Operator", "text"), Column("type", "Type", "text"),
             Column("scope", "Scope", "text"), Column("instance_type", "Role", "text"),
             Column("parallel_shard", "Strategy (in_strategy)", "text"), Column("group", "Group", "text")],
            caption="One row per operator of each stage's first rank; Group = union over the stage's ranks "
                    "(the stage's merged graph). Strategy row i is the split of input i."))
        tables.append(Table.from_frame(
            "strategy-special", "Redistribution and gradient-aggregation operators per stage and scope",
            t["special_ops"],
            [Column("stage", "Stage", "int"), Column("scope", "Scope", "text"), Column("ops", "Operators", "int"),
             Column("with_strategy", "With strategy", "int"), Column("in_group", "In a group", "int"),
             Column("redistribution", "Redistribution", "int"),
             Column("gradient_aggregation", "Gradient aggregation", "int")]))
    if "strategy_matrices" in t:
        mat = t["strategy_matrices"]
        width = max((k for k in range(1, MATRIX_DIMS + 1) if mat[f"d{k}"].notna().any()), default=1)
        tables.append(Table.from_frame(
            "strategy-matrices", "Strategy matrices: slices per input dimension", mat,
            [Column("stage", "Stage", "int"), Column("name", "Operator", "text"), Column("type", "Type", "text"),
             Column("scope", "Namespace", "text"), Column("input", "Input", "int")] +
            [Column(f"d{k}", f"Dim {k}", "int") for k in range(1, width + 1)] +
            [Column("devices", "Devices per input", "int", help="product of the slices")],
            caption="One row per input of every operator with a shard strategy (in_strategy), from each stage's first "
                    "rank: the number of slices of each dimension (the strategy matrix). Filter by operator "
                    "or namespace."))
    if "namespaces" in t and not t["namespaces"].empty:
        ns = t["namespaces"].assign(label=["· " * (int(d) - 1) + str(n).rsplit("/", 1)[-1]
                                           for d, n in zip(t["namespaces"]["depth"], t["namespaces"]["namespace"])])
        tables.append(Table.from_frame(
            "strategy-namespaces", "Namespaces: operators, strategies and parallel roles below each", ns,
            [Column("stage", "Stage", "int"), Column("label", "Namespace (tree)", "text"),
             Column("namespace", "Full namespace", "text"), Column("depth", "Depth", "int"),
             Column("ops", "Operators", "int"), Column("with_strategy", "With strategy", "int"),
             Column("redistribution", "Redistribution", "int"),
             Column("gradient_aggregation", "Gradient aggregation", "int")],
            caption="Every prefix of the operators' scopes (the graph's aggregation nodes), in tree order; filter "
                    "'Full namespace' to open a subtree or 'Depth' (e.g. <= 3) to close the deeper levels."))
    if "namespaces" in t and not t["namespaces"].empty:
        trees.append(_namespace_tree(t["namespaces"]))
    if "strategy_disagreements" in t:
        dis = t["strategy_disagreements"].assign(ranks_text=[_ranks_text(r) for r in t["strategy_disagreements"]["ranks"]])
        tables.append(Table.from_frame(
            "strategy-disagreements", "Operators whose strategy differs between ranks or stages", dis,
            [Column("name", "Operator", "text"), Column("scope_of_check", "Where", "text"),
             Column("parallel_shard", "Strategy", "text"), Column("ranks_text", "Ranks", "text")]))
    view = _strategy_view(a)
    controls = []
    graph = strategy_graph.figure(a.data["graph"]) if "graph" in a.data else None
    if view is not None:
        if graph is not None:  # a Send / Receive (any operator) leads to its stage's graph, in its part
            view.spec["usermeta"] = {**view.spec.get("usermeta", {}), "rg_click": GRAPH_CLICK}
            view.caption += " Click an operator to show its stage's graph (and part) below."
        figures.append(view)
        ns_control = namespace_control(t.get("namespaces"))
        if ns_control is not None:
            controls.append(ns_control)
    if graph is not None:
        figures.append(graph[0])
        controls += graph[1]
        tables.append(strategy_graph.table(t["graph_ops"], a.data["graph_ops_total"]))
    if "pipeline" in a.data:
        pfigs, ptables, pcontrols, psummary = pipeline.present(a.data["pipeline"])
        for f in pfigs:
            if graph is not None and f.id == "strategy-pipeline":  # the panel's sends / receives lead to the graph
                f.spec["usermeta"] = {**f.spec.get("usermeta", {}), "rg_click": [GRAPH_CLICK[0]]}
                f.caption += " Click a send or receive to show its stage's graph."
        figures += pfigs
        tables += ptables
        controls += pcontrols
        summary += " Pipeline: " + psummary
    if "pipeline_pairs" in t:
        pp = t["pipeline_pairs"]
        tables.append(Table.from_frame(
            "strategy-pairs", "Pipeline send / receive pairs", pp,
            [Column("send_rank", "Sender", "rank"), Column("send_stage", "Sender stage", "int"),
             Column("recv_rank", "Receiver", "rank"), Column("recv_stage", "Receiver stage", "int"),
             Column("sr_tag", "sr_tag", "text"), Column("send_name", "Send op", "text"),
             Column("recv_name", "Receive op", "text")],
            caption="Matched by sender, receiver and sr_tag; an empty side had no counterpart in the files."))
        fig = _pairs_figure(pp)
        if fig is not None:
            figures.append(fig)
    return View(summary=summary, figures=figures, tables=tables, controls=controls, trees=trees)


_ranks_text = rank_ranges


#: the colour of the hosts a finding does not name, when there are too many hosts to colour each
OTHER_HOSTS = "other hosts"


def _mesh_figure(df: pd.DataFrame, m: dict, named_ranks=()) -> Figure:
    """Ranks as cells (row = stage). Colour = an identity, never the rank id: the host when there are several (and
    few enough for a colour each, ``palette.distinguishable``; beyond, only the hosts of ``named_ranks``, the ranks
    findings name, take a colour and the others one grey: the tooltip names every host), else the dp index when
    tp > 1 (ranks of one tp group share it, again only when distinguishable), else the stage; one colour
    otherwise."""
    d = df.copy()
    d["stage_label"] = ["stage " + str(int(s)) if pd.notna(s) else "no stage" for s in d["stage"]]
    ncols = int(d["column"].max()) + 1 if len(d) else 1
    hosts = d["host"].dropna().nunique()
    named_hosts = natural_sorted(d.loc[d["rank"].isin([int(r) for r in named_ranks]), "host"].dropna())
    dp_many = d["dp_index"].notna().any() and not palette.distinguishable(int(d["dp_index"].nunique()))
    if hosts > 1 and palette.distinguishable(hosts):
        values = natural_sorted(d["host"].dropna().unique())
        d["colour_key"], title = d["host"], "Host"
    elif hosts > 1 and named_hosts and palette.distinguishable(len(named_hosts) + 1):
        d["colour_key"] = d["host"].where(d["host"].isin(named_hosts), OTHER_HOSTS)
        values, title = named_hosts + [OTHER_HOSTS], "Host (named by a finding)"
    elif d["dp_index"].notna().any() and m.get("tp_size", 1) > 1 and not dp_many:
        d["colour_key"] = d["dp_index"].map(lambda v: "" if pd.isna(v) else str(int(v)))
        values, title = sorted(d["colour_key"].unique(), key=natural_key), "dp index"
    elif d["stage"].nunique() > 1:
        d["colour_key"] = d["stage"].map(lambda v: "" if pd.isna(v) else str(int(v)))
        values, title = sorted(d["colour_key"].unique(), key=natural_key), "Stage"
    else:
        d["colour_key"], values, title = "", [""], None
    colours = {v: palette.identity(i) for i, v in enumerate(values)}
    if OTHER_HOSTS in colours:
        colours[OTHER_HOSTS] = palette.ROLE["other"]
    if title == "Stage":  # a stage keeps its colour of every other chart
        colours = {v: palette.identity(int(v)) if v.isdigit() else palette.ROLE["other"] for v in values}
    d["ink"] = d["colour_key"].map(lambda v: palette.ink(colours.get(v, palette.IDENTITY[0])))
    color = vl.Color("colour_key:N", title=title, scale=vl.Scale(domain=values, range=[colours[v] for v in values]),
                      legend=vl.Legend(orient="top", columns=10) if title and len(values) <= 20 else None)
    tips = [vl.Tooltip("rank:O", title="Rank"), vl.Tooltip("stage_label:N", title="Stage")]
    for k in DIMS:
        if d[f"{k}_index"].notna().any():
            tips.append(vl.Tooltip(f"{k}_index:O", title=f"{k} index"))
    if d["host"].notna().any():
        tips.append(vl.Tooltip("host:N", title="Host"))
    tips.append(vl.Tooltip("groups:N", title="Groups"))
    wrapped = ncols > MESH_ROW_CELLS * 2  # a stage of 2048 positions was one row 6,000 px wide: rows of 64
    if wrapped:
        first = d["column"].astype(int) // MESH_ROW_CELLS * MESH_ROW_CELLS
        d["stage_label"] = d["stage_label"] + " · " + first.astype(str)
        d["column"] = d["column"].astype(int) % MESH_ROW_CELLS
        order = d.assign(_s=d["stage"].fillna(1e9), _f=first).sort_values(["_s", "_f"])["stage_label"]
        rows_order = list(dict.fromkeys(order.tolist()))
        ncols = MESH_ROW_CELLS
    keep = ["rank", "stage_label", "column", "host", "groups", "colour_key", "ink"] + [f"{k}_index" for k in DIMS]
    d = d[keep]
    step = band(ncols, 36, 3)
    axis_labels = ncols <= 64
    gap = vl.Scale(paddingInner=0.08 if step > 6 else 0)
    base = vl.Chart(d).encode(
        x=vl.X("column:O", title="Position in the stage (dp-major, tp fastest)", scale=gap,
                axis=vl.Axis(labels=axis_labels, ticks=axis_labels, labelAngle=0, labelOverlap=True)),
        y=vl.Y("stage_label:O", title="Stage · first position of the row" if wrapped else None, scale=gap,
               sort=rows_order if wrapped else "ascending"))
    chart = base.mark_rect().encode(color=color, tooltip=tips)
    written = len(d) <= MESH_TEXT_MAX and step >= 18
    if written:
        chart = chart + base.mark_text(fontSize=10).encode(text="rank:O", color=vl.Color("ink:N", scale=None),
                                                           tooltip=tips)
    rows = d["stage_label"].nunique()
    chart = chart.properties(width={"step": step},
                             height={"step": max(6, min(16, 900 // rows)) if wrapped else band(rows, 36, 12, 400)})
    how = {"Host": "colour = host", "Host (named by a finding)":
           f"colour = the host of a rank a finding names, the other {hosts - len(named_hosts):,} hosts grey (too many "
           "hosts for a colour each; hover for the host)", "dp index": "colour = dp index (the ranks of one tp group share it)",
           "Stage": "colour = pipeline stage"}.get(title, "")
    return Figure("strategy-mesh", "Rank mesh: where each rank sits", to_spec(chart),
                  caption=f"One cell per rank{' (its rank id written in it)' if written else ''}: row = pipeline "
                          "stage, column = position in "
                          "the stage from its dp/tp group indices"
                          + (f" ({len(d):,} ranks: each stage in rows of {MESH_ROW_CELLS} positions)" if wrapped else "")
                          + (f"; {how}" if how else "")
                          + "; hover for its groups.",
                  alt="Grid of ranks by pipeline stage and position in the stage")


def _pairs_figure(pp: pd.DataFrame) -> Figure | None:
    x = pp[pp["matched"] & pp["send_stage"].notna() & pp["recv_stage"].notna()]
    if x.empty:
        return None
    c = x.groupby(["send_stage", "recv_stage"], as_index=False).size().rename(columns={"size": "pairs"})
    c["from"] = "stage " + c["send_stage"].astype(int).astype(str)
    c["to"] = "stage " + c["recv_stage"].astype(int).astype(str)
    c = c[["from", "to", "pairs"]]
    tips = [vl.Tooltip("from:N", title="From"), vl.Tooltip("to:N", title="To"),
            vl.Tooltip("pairs:Q", title="Pairs", format=fmt.D3_INT)]
    base = scale_position(vl.Chart(c), "pairs").encode(
        x=vl.X("to:O", title="Receiving stage", axis=vl.Axis(labelAngle=0)), y=vl.Y("from:O", title="Sending stage"))
    chart = (base.mark_rect().encode(color=vl.Color("pairs:Q", title="Pairs", scale=sequential()), tooltip=tips)
             + cell_labels(base, vl.Text("pairs:Q", format=fmt.D3_INT), tips)).properties(
        width={"step": band(c["to"].nunique(), 60, 8)}, height={"step": 30})
    return Figure("strategy-pairs", "Pipeline send/receive pairs between stages", to_spec(chart),
                  caption="Matched send/receive operator pairs from each sending stage to each receiving stage.",
                  alt="Matrix of send/receive pairs between pipeline stages")


#: clicking an operator of the strategy view (or a send / receive of the pipeline panel) sets the graph's controls
GRAPH_CLICK = [{"field": "stage", "signal": strategy_graph.STAGE_SIGNAL},
               {"field": "phase", "signal": strategy_graph.PHASE_SIGNAL}]
#: the strategy view's namespace highlight (seed S0: the namespace selector highlights its operators); options = the
#: namespaces of the deepest level (at most 3) that keeps them within NS_OPTIONS
NS_SIGNAL, NS_OPTIONS = strategy_graph.NS_SIGNAL, 60


def namespace_control(ns: pd.DataFrame) -> Control | None:
    """The strategy view's namespace control from the namespaces table (every scope prefix): "every operator" and
    the namespaces of depth <= d, d the deepest of 3, 2, 1 with at most :data:`NS_OPTIONS` of them."""
    if ns is None or ns.empty:
        return None
    for d in (3, 2, 1):
        names = sorted(set(ns.loc[ns["depth"] <= d, "namespace"].astype(str)), key=natural_key)
        if len(names) <= NS_OPTIONS:
            break
    names = names[:NS_OPTIONS]
    return Control(NS_SIGNAL, "Strategy view: namespace", [("", "every operator")] + [(n, n) for n in names], "")


#: operators drawn per stage in the strategy view (beyond: the first ones in execution order, and said)
VIEW_OPS = 4000
_ROLE_OF_OP = {"Redistribution": "redistribution", "GradientAggregation": "gradient aggregation"}


_NS_COLUMNS = [Column("ops", "Operators", "int"), Column("with_strategy", "With strategy", "int"),
               Column("redistribution", "Redistribution", "int"),
               Column("gradient_aggregation", "Gradient aggregation", "int")]


def role_of_ops(ops: pd.DataFrame) -> list[str]:
    """Role of each operator in the strategy view: its parallel role (``instance_type``: redistribution, gradient
    aggregation) when it has one, else communication or computation from the reader's ``op_class``
    (the reader of parallel_strategy_<rank>.json decides it from the operator type)."""
    cls = ops["op_class"] if "op_class" in ops else pd.Series("compute", index=ops.index)
    return [_ROLE_OF_OP.get(i) or ("communication" if c == "communication" else "computation")
            for i, c in zip(ops["instance_type"], cls)]


def _namespace_tree(ns: pd.DataFrame) -> Tree:
    """The namespaces table as a tree: a root per stage, a node per scope prefix under its parent."""
    roots = []
    vals = [c.key for c in _NS_COLUMNS]
    for st, g in ns.groupby("stage", sort=True):
        top = g[g["depth"] == 1]
        root = TreeNode(f"Stage {int(st)}", [int(top[v].sum()) for v in vals])
        nodes = {}
        for r in g.sort_values("depth", kind="stable").itertuples():
            node = TreeNode(str(r.namespace).rsplit("/", 1)[-1], [int(getattr(r, v)) for v in vals])
            nodes[r.namespace] = node
            parent = nodes.get(str(r.namespace).rsplit("/", 1)[0]) if "/" in str(r.namespace) else None
            (parent.children if parent is not None else root.children).append(node)
        roots.append(root)
    return Tree("strategy-namespace-tree", "Namespace tree", _NS_COLUMNS, roots,
                caption="Operators below each namespace, per stage (the graph's aggregation nodes): open and close a "
                        "namespace to see its children; the browser's find opens the rows it matches.")


def _strategy_view(a: Analysis) -> Figure | None:
    """Seed figure 19: each stage's operators left to right in execution order, coloured by role (computation,
    communication, redistribution, gradient aggregation), stages stacked; a line joins each Send to its Receive in
    the other stage. Zoom with the wheel, pan by dragging (both axes' scales are bound)."""
    ops = a.data.get("all_ops")
    if ops is None or ops.empty:
        return None
    rows, cut = [], False
    for st, g in ops.groupby("stage"):
        g = g.assign(pos=pd.to_numeric(g["node_id"], errors="coerce")).dropna(subset=["pos"]).sort_values("pos")
        if len(g) > VIEW_OPS:
            g, cut = g.head(VIEW_OPS), True
        role = role_of_ops(g)
        rows.append(pd.DataFrame({"stage": int(st), "pos": g["pos"].astype(int), "role": role,
                                  "name": [limits.cap_text(str(n), 120) for n in g["name"]],
                                  "type": g["type"].astype(str), "strategy": g["parallel_shard"].astype(str),
                                  "phase": strategy_graph.phases(g).to_numpy()}))
    pts = pd.concat(rows, ignore_index=True)
    lines = []
    pp = a.tables.get("pipeline_pairs")
    offset = {st: 0 for st in pts["stage"].unique()}
    if pp is not None:
        m = pp[pp["matched"] & pp["send_stage"].notna() & pp["recv_stage"].notna()]
        m = m.assign(send_pos=pd.to_numeric(m["send_node"], errors="coerce"),
                     recv_pos=pd.to_numeric(m["recv_node"], errors="coerce")).dropna(subset=["send_pos", "recv_pos"])
        # stages aligned on their Send/Receive pairs: each stage shifted so that the median of its Receives from the
        # previous stage sits under the matching Sends (the first stage stays; a stage without such pairs too)
        for st in sorted(offset)[1:]:
            fw = m[(m["recv_stage"] == st) & (m["send_stage"] == st - 1)]
            if not fw.empty and st - 1 in offset:
                offset[st] = offset[st - 1] + int(round(float((fw["send_pos"] - fw["recv_pos"]).median())))
        for i, r in enumerate(m.itertuples()):
            lines.append({"pair": i, "stage": int(r.send_stage), "pos": int(r.send_pos) + offset.get(int(r.send_stage), 0)})
            lines.append({"pair": i, "stage": int(r.recv_stage), "pos": int(r.recv_pos) + offset.get(int(r.recv_stage), 0)})
    pts["pos"] = pts["pos"] + pts["stage"].map(offset).fillna(0).astype(int)
    roles = ["computation", "communication", "redistribution", "gradient aggregation"]
    colors = [palette.ROLE["compute"], palette.ROLE["comm"], palette.ROLE["receive"], palette.ROLE["tail"]]
    stages = sorted(pts["stage"].unique().tolist())
    x = vl.X("pos:Q", title="Node position (execution order, stages aligned)", axis=vl.Axis(format=fmt.D3_FORMAT))
    y = vl.Y("stage:O", title="Stage", scale=vl.Scale(domain=stages))
    zoom = vl.selection_interval("strategy_zoom", encodings=["x"], bind="scales")
    # the namespace control: the operators below the chosen namespace stay, the others fade ("" = every operator)
    ns_test = f"{NS_SIGNAL} == '' || indexof(datum.name, {NS_SIGNAL} + '/') == 0"
    marks = vl.Chart(pts).mark_tick(thickness=2, size=18).encode(
        opacity=vl.condition(ns_test, vl.value(1), vl.value(0.12)),
        x=x, y=y, color=vl.Color("role:N", title="Role", scale=vl.Scale(domain=roles, range=colors)),
        tooltip=[vl.Tooltip("name:N", title="Operator"), vl.Tooltip("type:N", title="Type"),
                 vl.Tooltip("role:N", title="Role"), vl.Tooltip("strategy:N", title="Strategy"),
                 vl.Tooltip("pos:Q", title="Position", format=fmt.D3_INT)]).add_params(zoom)
    layers = [marks]
    if lines:
        layers.insert(0, vl.Chart(pd.DataFrame(lines)).mark_line(color=palette.ROLE["free"], strokeWidth=1).encode(
            x=x, y=y, detail=vl.Detail("pair:N")))
    chart = vl.fit(vl.layer(*layers), {"step": 36}).add_params(vl.param(NS_SIGNAL, ""))
    shifted = {int(k): int(v) for k, v in offset.items() if v}
    caption = ("Each stage's operators (its first rank) left to right in execution order, coloured by role; a line "
               "joins each Send to its Receive. Stages are aligned on their Send/Receive pairs"
               + (" (" + ", ".join(f"stage {k} shifted by {v:+d}" for k, v in sorted(shifted.items())) + ")"
                  if shifted else "") + ". Scroll to zoom, drag to pan, double-click to reset."
               + (f" Stages of more than {VIEW_OPS:,} operators show their first {VIEW_OPS:,}." if cut else "")
               + " Choose a namespace above to highlight its operators.")
    return Figure("strategy-view", "Parallel strategy view: operators by stage and role", to_spec(chart),
                  caption=caption, static_caption=caption.replace(" Scroll to zoom, drag to pan, double-click to "
                                                                  "reset.", "").replace(
                      " Choose a namespace above to highlight its operators.", ""),
                  alt="Operators of each stage in execution order coloured by computation, communication, "
                      "redistribution and gradient aggregation")


def _findings(a: Analysis) -> list[Finding]:
    out, d = [], a.data
    dis = a.tables.get("strategy_disagreements")
    if dis is not None and not dis.empty:
        names = list(dict.fromkeys(dis["name"]))
        first = dis[dis["name"] == names[0]]
        out.append(Finding(
            "strategy_disagreement", "medium", ID,
            f"{count(len(names), 'operator')} {'has' if len(names) == 1 else 'have'} a shard strategy that differs "
            f"between ranks or stages, e.g. {names[0][:160]}: "
            + "; ".join(f"{x.parallel_shard} on ranks {_ranks_text(x.ranks)[:60]}" for x in first.head(3).itertuples())
            + ".",
            ranks=sorted(min(first["ranks"], key=len))[:1000],  # the rank(s) with the least common strategy
            evidence={"metric": "strategy_disagreements", "value": len(names), "reference": 0},
            suggestion="Ranks of one stage must shard an operator the same way; a different strategy on one rank "
                       "means a different graph or configuration there (check the launch of those ranks and the "
                       "set_strategy / shard calls of that operator).",
            figure="strategy-view"))
    if d.get("mismatch"):
        mm = d["mismatch"]
        expr = " × ".join(f"{k} {v}" for k, v in mm["dims"].items())
        out.append(Finding(
            "layout_inconsistent", "low", ID,
            f"The parallel sizes do not multiply to the world size: {expr} = {mm['product']}, world size {mm['world']}.",
            evidence={"metric": "product_of_dims", "value": mm["product"], "reference": mm["world"]},
            suggestion="Check the group data (missing or extra groups in the profile) or the parallel configuration.",
            figure="strategy-mesh"))
    if d.get("ungrouped"):
        r = d["ungrouped"]
        out.append(Finding(
            "rank_without_group", "low", ID,
            f"{len(r)} rank(s) belong to no process group besides the world group: {_ranks_text(r)[:200]}.",
            ranks=r[:1000], evidence={"metric": "ranks_without_group", "value": len(r), "reference": 0},
            suggestion="Their profiles may lack the group data (e.g. profiled before the groups were created).",
            figure="strategy-mesh"))
    for c in d.get("size_conflicts", []):
        out.append(Finding(
            "layout_size_conflict", "low", ID,
            f"The run states {c['kind']} size {c['declared']}, but its {c['kind']} groups have {c['groups']} ranks.",
            evidence={"metric": f"{c['kind']}_size", "value": c["groups"], "reference": c["declared"]},
            suggestion="Check which is right: the launch configuration (parallel sizes) or the groups the profile "
                       "recorded (ranks profiled before every group existed, or a group left out).",
            figure="strategy-mesh"))
    return out
