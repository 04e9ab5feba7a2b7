"""The strategy section's computational graph (seed S0 "Strategy Perception" / graph exploration, research notes on
the seed's cluster pages §3.6): each stage's merged graph, one figure per page with a stage and a forward /
backward / recompute selector, namespaces aggregated as the seed's aggregation nodes, and the node attribute table.

Definitions (every formula of the graph lives here):

* Subgraph = the operators of one stage's merged graph (``merge_stage_ops``) in one ``phase`` (the reader's column:
  forward | backward | recompute). Edges = the operators' ``inputs`` that name another operator of the same
  subgraph (constants and parameters are not drawn, as in the seed; an input from another phase is listed in the
  attribute table, not drawn).
* Aggregation (:func:`aggregate`): at most :data:`GRAPH_NODES` nodes per subgraph. The namespaces (scope prefixes)
  start closed and open level by level (each replaced by its child namespaces and its own operators) while the
  whole next level fits in the bound, so every part of the graph is shown at the same depth; a namespace with one
  child and no operator of its own opens for free. A closed namespace is the seed's aggregation node: its operators and special operators (strategy, redistribution, gradient
  aggregation, communication) are counted.
* Layout (:func:`layered_layout`): a node's order = the smallest execution position (``node_id``) of its operators.
  An edge from a lower to a higher order is a forward edge; layer(v) = 0 without forward in-edges, else
  1 + max layer of its forward predecessors (longest path), so every forward edge goes to a higher layer. An edge
  against the order (possible between aggregation nodes only, never between operators: ``node_id`` is the
  topological index) is a back edge: drawn dashed, not used for the layers. Inside a layer nodes are ordered by the
  mean position of their forward predecessors (one barycentre sweep), then by order; position = index centred on 0.
  A layer of more than :data:`COLUMN_NODES` nodes takes several columns; columns are wrapped in rows of
  :data:`WRAP_LAYERS` so that a long chain stays readable (:func:`place`).
* Edges between the same two nodes are drawn once with their count; beyond :data:`GRAPH_EDGES` per subgraph the
  ones with the smallest count are hidden (said in the caption).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict

import pandas as pd

from .. import charts as vl
from .. import limits, palette
from ..charts import to_spec
from ..report import Column, Control, Figure, Table

#: a part of the strategy section (which runs it when the run has ``strategy_ops``)
NEEDS = ("strategy_ops",)
#: nodes drawn per (stage, phase) subgraph: namespaces beyond it stay closed (aggregation nodes)
GRAPH_NODES = 80
#: edges drawn per subgraph (the ones joining most operators first)
GRAPH_EDGES = 400
#: nodes in the graph figure over every stage and part (page budget): the first stages whose graphs fit are drawn
#: (always the first one); the attribute table keeps every stage it has room for
GRAPH_TOTAL_NODES = 1_500
#: columns per row of the drawing (a longer chain continues on the next row)
WRAP_LAYERS = 16
#: nodes per column: a wider layer takes several columns side by side
COLUMN_NODES = 6
#: operators listed in the node attribute table (every stage; beyond it the first in stage and execution order)
TABLE_OPS = 20_000
#: input / output names listed per operator in the attribute table and in the graph's tooltip
LISTED_NEIGHBOURS = 12
TIP_NEIGHBOURS = 6
#: dimensions of a strategy matrix drawn under the graph
MATRIX_DIMS = 8
PHASES = ["forward", "backward", "recompute"]
ROLES = ["computation", "communication", "redistribution", "gradient aggregation", "namespace"]
_ROLE_COLORS = [palette.ROLE["compute"], palette.ROLE["comm"], palette.ROLE["receive"], palette.ROLE["tail"],
                palette.ROLE["other"]]
_ROLE_OF_OP = {"Redistribution": "redistribution", "GradientAggregation": "gradient aggregation"}


def parse_shard(text) -> list[list[int]] | None:
    """``in_strategy`` as the seed's UI reads it (``JSON.parse(parallel_shard)``): one list per input, one
    number of slices per dimension; None when it is not such a list."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list) or not all(isinstance(row, list) for row in value):
        return None
    out = []
    for row in value:
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in row):
            return None
        out.append([int(x) for x in row])
    return out


def role_of(instance_type: str, op_class: str) -> str:
    """The strategy view's role of one operator (the same rule as ``strategy.role_of_ops``)."""
    return _ROLE_OF_OP.get(instance_type) or ("communication" if op_class == "communication" else "computation")


def phases(merged: pd.DataFrame) -> pd.Series:
    """The reader's ``phase`` column ("forward" where the reader has none)."""
    if "phase" in merged:
        return merged["phase"].fillna("forward").astype(str).replace("", "forward")
    return pd.Series("forward", index=merged.index)


# --------------------------------------------------------------------------- aggregation


def aggregate(ops: pd.DataFrame, limit: int = GRAPH_NODES) -> tuple[dict[str, str], bool]:
    """node_id -> node key for the operators of one subgraph (columns node_id, scope): ``op:<node_id>`` for an
    operator drawn on its own, ``ns:<namespace>`` for a closed namespace (module docstring). The flag says the
    bound cut operators that are in no namespace (more top-level operators than ``limit``)."""
    children: dict[str, set[str]] = defaultdict(set)  # namespace -> child namespaces ("" = the root)
    direct: dict[str, list[str]] = defaultdict(list)  # namespace -> its own operators
    size: dict[str, int] = defaultdict(int)           # namespace -> operators below it
    for nid, scope in zip(ops["node_id"].astype(str), ops["scope"].astype(str)):
        parts = [p for p in scope.split("/") if p] if scope else []
        direct["/".join(parts)].append(nid)
        for d in range(len(parts)):
            ns, parent = "/".join(parts[:d + 1]), "/".join(parts[:d])
            children[parent].add(ns)
            size[ns] += 1
    open_: set[str] = {""}
    count = len(children[""]) + len(direct[""])
    frontier = sorted(children[""])
    while frontier:
        # a namespace with one child namespace and no operator of its own opens for free (a chain of scopes)
        free = [ns for ns in frontier if len(children[ns]) + len(direct[ns]) == 1]
        if free:
            open_.update(free)
            frontier = sorted(set(frontier) - set(free) | {c for ns in free for c in children[ns]})
            continue
        grow = sum(len(children[ns]) + len(direct[ns]) - 1 for ns in frontier)
        if count + grow > limit:  # the next level does not fit: every namespace of the frontier stays closed
            break
        open_.update(frontier)
        count += grow
        frontier = sorted({c for ns in frontier for c in children[ns]})
    out, cut = {}, False
    for nid, scope in zip(ops["node_id"].astype(str), ops["scope"].astype(str)):
        parts = [p for p in scope.split("/") if p] if scope else []
        key = f"op:{nid}"
        for d in range(len(parts)):
            ns = "/".join(parts[:d + 1])
            if ns not in open_:
                key = f"ns:{ns}"
                break
        out[nid] = key
    keys = list(dict.fromkeys(out.values()))
    if len(keys) > limit:  # more top-level operators than the bound: the first ones in execution order
        keep = set(keys[:limit])
        out, cut = {k: v for k, v in out.items() if v in keep}, True
    return out, cut


# --------------------------------------------------------------------------- layout


def layered_layout(order: dict[str, int], edges: list[tuple[str, str]]) -> dict[str, tuple[int, float]]:
    """node -> (layer, position in the layer) for nodes with an execution ``order`` and directed ``edges``
    (module docstring: longest-path layers over the forward edges, barycentre order inside a layer)."""
    preds: dict[str, list[str]] = defaultdict(list)
    for u, v in edges:
        if u in order and v in order and order[u] < order[v]:
            preds[v].append(u)
    nodes = sorted(order, key=lambda n: order[n])
    layer: dict[str, int] = {}
    for n in nodes:  # execution order is a topological order of the forward edges
        layer[n] = 1 + max((layer[u] for u in preds[n]), default=-1)
    by_layer: dict[int, list[str]] = defaultdict(list)
    for n in nodes:
        by_layer[layer[n]].append(n)
    pos: dict[str, float] = {}
    for L in sorted(by_layer):
        members = by_layer[L]

        def bary(n):
            p = [pos[u] for u in preds[n] if u in pos]
            return sum(p) / len(p) if p else 0.0
        members.sort(key=lambda n: (bary(n), order[n]))
        mid = (len(members) - 1) / 2
        for i, n in enumerate(members):
            pos[n] = i - mid
    return {n: (layer[n], pos[n]) for n in nodes}


def place(lay: dict[str, tuple[int, float]]) -> dict[str, tuple[int, float]]:
    """node -> (x, y) on the drawing's grid from :func:`layered_layout`: a layer of more than :data:`COLUMN_NODES`
    nodes takes several adjacent columns (in its order), the columns are wrapped in rows of :data:`WRAP_LAYERS`,
    the columns of one layer shifted down by a fraction of a step each, each row as tall as its tallest column, rows
    1.5 apart; every node has its own point, and a later layer never sits left of an earlier one in the same row."""
    by_layer: dict[int, list[str]] = defaultdict(list)
    for k, (L, p) in sorted(lay.items(), key=lambda kv: (kv[1][0], kv[1][1])):
        by_layer[L].append(k)
    col: dict[str, tuple[int, float]] = {}
    c = 0
    for L in sorted(by_layer):
        members = by_layer[L]
        chunks = [members[i:i + COLUMN_NODES] for i in range(0, len(members), COLUMN_NODES)]
        for ci, chunk in enumerate(chunks):
            # the columns of one layer are shifted by a fraction of a step: an edge never runs through a node
            mid = (len(chunk) - 1) / 2 - ci / len(chunks)
            for j, k in enumerate(chunk):
                col[k] = (c, j - mid)
            c += 1
    half: dict[int, float] = defaultdict(float)
    for cx, p in col.values():
        half[cx // WRAP_LAYERS] = max(half[cx // WRAP_LAYERS], abs(p))
    row_y, y0 = {}, 0.0
    for r in sorted(half):
        y0 += half[r]
        row_y[r] = y0
        y0 += half[r] + 1.5
    return {k: (cx % WRAP_LAYERS, row_y[cx // WRAP_LAYERS] + p) for k, (cx, p) in col.items()}


# --------------------------------------------------------------------------- data

#: characters of a node's label in the graph (the tooltip and the attribute table have the whole name)
LABEL_CHARS = 18


def _label(ns: str, twins: set[str]) -> str:
    """A closed namespace's label: its last scope component, with its parent's when another node of the graph has
    the same last component ("layers.3/mlp"); the end is kept when it is too long."""
    parts = ns.split("/")
    text = "/".join(parts[-2:]) if parts[-1] in twins else parts[-1]
    return text if len(text) <= LABEL_CHARS else "…" + text[-(LABEL_CHARS - 1):]



def _inputs(merged: pd.DataFrame) -> list[list[str]]:
    col = merged["input"] if "input" in merged else merged["inputs"].map(lambda s: [x for x in str(s).split(",") if x])
    return [[str(x) for x in xs] for xs in col]


def graph_data(merged: pd.DataFrame, limit: int = GRAPH_NODES) -> dict:
    """Nodes and edges of every (stage, phase) subgraph, laid out: ``nodes`` / ``edges`` DataFrames, per-subgraph
    ``stats`` and the notes of what was bounded."""

    m = merged.assign(phase=phases(merged).to_numpy(), ins_=_inputs(merged))
    m["node_id"] = m["node_id"].astype(str)
    m["_pos"] = pd.to_numeric(m["node_id"], errors="coerce")
    m["role_"] = [role_of(i, c) for i, c in zip(m["instance_type"], m["op_class"])]
    m["strat_"] = m["parallel_shard"].astype(str) != ""
    for r, col in (("redistribution", "redis_"), ("gradient aggregation", "grad_"), ("communication", "comm_")):
        m[col] = m["role_"] == r
    m = m.sort_values(["stage", "_pos"], kind="stable")
    stages = sorted(int(s) for s in m["stage"].dropna().unique())
    node_rows, edge_rows, matrix_rows, stats = [], [], [], []
    hidden_edges, aggregated, cut_ops = 0, 0, 0
    cut_stages: list[int] = []
    for st in stages:
        before = (len(node_rows), len(edge_rows), len(matrix_rows), len(stats), hidden_edges, aggregated, cut_ops)
        if before[0] >= GRAPH_TOTAL_NODES:
            cut_stages = [x for x in stages if x >= st]
            break
        s_ops = m[m["stage"] == st]
        typ = dict(zip(s_ops["node_id"], s_ops["type"].astype(str)))
        outs: dict[str, list[str]] = defaultdict(list)
        for v, ins in zip(s_ops["node_id"], s_ops["ins_"]):
            for u in ins:
                if u in typ:
                    outs[u].append(v)
        for ph in PHASES:
            g = s_ops[s_ops["phase"] == ph]
            if g.empty:
                continue
            unit, cut = aggregate(g, limit)
            cut_ops += len(g) - len(unit)
            g = g[g["node_id"].isin(unit)]
            g = g.assign(_unit=g["node_id"].map(unit))
            order = g.groupby("_unit")["_pos"].min().rank(method="first").astype(int).to_dict()
            counts: dict[tuple[str, str], int] = defaultdict(int)
            for v, ins in zip(g["_unit"], g["ins_"]):
                for u_id in ins:
                    u = unit.get(u_id)
                    if u is not None and u != v:
                        counts[(u, v)] += 1
            kept = sorted(counts.items(), key=lambda kv: (-kv[1], order[kv[0][0]], order[kv[0][1]]))
            hidden_edges += max(0, len(kept) - GRAPH_EDGES)
            kept = kept[:GRAPH_EDGES]
            lay = layered_layout(order, [e for e, _ in kept])
            n_layers = max((L for L, _ in lay.values()), default=0) + 1
            xy = place(lay)
            sg = f"{st}:{ph}"
            aggregated += sum(1 for k in order if k.startswith("ns:"))
            leaf = Counter(k[3:].rsplit("/", 1)[-1] for k in order if k.startswith("ns:"))
            twins = {n for n, c in leaf.items() if c > 1}  # namespaces named alike: labelled with their parent
            agg = g.groupby("_unit", sort=False).agg(
                ops=("node_id", "size"), with_strategy=("strat_", "sum"), redistribution=("redis_", "sum"),
                gradient_aggregation=("grad_", "sum"), communication=("comm_", "sum"))
            firsts = g.drop_duplicates("_unit").set_index("_unit")  # g is in execution order
            for key, a in zip(agg.index, agg.itertuples(index=False)):
                first = firsts.loc[key]
                row = {"uid": f"{sg}:{key}", "stage": int(st), "phase": ph, "layer": lay[key][0],
                       "x": xy[key][0], "y": round(float(xy[key][1]), 3), "ops": int(a.ops),
                       "with_strategy": int(a.with_strategy), "redistribution": int(a.redistribution),
                       "gradient_aggregation": int(a.gradient_aggregation), "communication": int(a.communication)}
                if key.startswith("ns:"):
                    ns = key[3:]
                    row.update(role="namespace", name=limits.cap_text(ns, 160), label=_label(ns, twins),
                               type="namespace", strategy="", node_id="", shape="namespace")
                else:
                    nid = str(first["node_id"])
                    row.update(role=first["role_"], name=limits.cap_text(str(first["name"]), 160),
                               label=limits.cap_text(str(first["type"]), 12), type=str(first["type"]),
                               strategy=str(first["parallel_shard"]), node_id=nid,
                               shape="operator with strategy" if bool(first["strat_"]) else "operator",
                               inputs=neighbours(list(first["ins_"]), typ, TIP_NEIGHBOURS),
                               outputs=neighbours(outs.get(nid, []), typ, TIP_NEIGHBOURS))
                    for i, dims in enumerate(parse_shard(first["parallel_shard"]) or [], start=1):
                        for k, n in enumerate(dims[:MATRIX_DIMS], start=1):
                            matrix_rows.append({"uid": row["uid"], "input": f"input {i}", "dim": f"dim {k}",
                                                "slices": int(n)})
                node_rows.append(row)
            for (u, v), c in kept:
                (lu, _), (lv, _) = lay[u], lay[v]
                back = order[u] > order[v]
                base = {"stage": int(st), "phase": ph, "x1": xy[u][0], "y1": round(float(xy[u][1]), 3),
                        "x2": xy[v][0], "y2": round(float(xy[v][1]), 3), "edges": int(c), "back": back,
                        "from_layer": lu, "to_layer": lv}
                # each edge twice, keyed by either end: the hover highlight selects the rows of the hovered node
                edge_rows.append({**base, "uid": f"{sg}:{u}", "end": "source"})
                edge_rows.append({**base, "uid": f"{sg}:{v}", "end": "target"})
            stats.append({"stage": int(st), "phase": ph, "ops": int(len(g)), "nodes": len(order),
                          "edges": len(kept), "layers": n_layers, "cut": cut})
        if len(node_rows) > GRAPH_TOTAL_NODES and before[0]:  # this stage does not fit: it and the next are left out
            del node_rows[before[0]:], edge_rows[before[1]:], matrix_rows[before[2]:], stats[before[3]:]
            hidden_edges, aggregated, cut_ops = before[4:]
            cut_stages = [x for x in stages if x >= st]
            break
    nodes = pd.DataFrame(node_rows)
    edges = pd.DataFrame(edge_rows, columns=["stage", "phase", "x1", "y1", "x2", "y2", "edges", "back", "from_layer",
                                             "to_layer", "uid", "end"])
    matrix = pd.DataFrame(matrix_rows, columns=["uid", "input", "dim", "slices"])
    return {"nodes": nodes, "edges": edges, "matrix": matrix, "stats": stats, "hidden_edges": hidden_edges,
            "cut_stages": cut_stages,
            "cut_ops": cut_ops, "aggregated": aggregated}


def neighbours(ids: list[str], typ: dict[str, str], most: int) -> str:
    """Inputs or outputs as text: "<node_id> <type>" of an operator of the stage, a constant by its name; the first
    ``most`` and how many more."""
    shown = [f"{i} {typ[i]}" if i in typ else limits.cap_text(i, 60) for i in ids[:most]]
    more = len(ids) - most
    return "; ".join(shown) + (f"; … {more} more" if more > 0 else "")


def node_table(merged: pd.DataFrame) -> pd.DataFrame:
    """Node attributes (the seed's attribute panel): every operator of each stage's merged graph with its phase,
    role, strategy, group, inputs and outputs ("<node_id> <type>", constants by name; outputs = the operators of
    the stage that name it as an input)."""
    m = merged.assign(phase=phases(merged).to_numpy(), ins_=_inputs(merged)).reset_index(drop=True)
    m["node_id"] = m["node_id"].astype(str)
    rows = []
    for st, g in m.groupby("stage", sort=True):
        typ = dict(zip(g["node_id"], g["type"].astype(str)))
        outs: dict[str, list[str]] = defaultdict(list)
        for v, ins in zip(g["node_id"], g["ins_"]):
            for u in ins:
                if u in typ:
                    outs[u].append(v)

        def names(ids):
            return neighbours(ids, typ, LISTED_NEIGHBOURS)
        for r in g.itertuples():
            rows.append({"stage": int(st), "phase": r.phase, "node_id": int(r.node_id) if r.node_id.isdigit() else None,
                         "name": r.name, "type": r.type, "scope": r.scope,
                         "role": role_of(r.instance_type, r.op_class), "parallel_shard": r.parallel_shard,
                         "group": r.group, "inputs": names(list(r.ins_)), "outputs": names(outs.get(r.node_id, [])),
                         "n_inputs": len(r.ins_), "n_outputs": len(outs.get(r.node_id, []))})
    cols = ["stage", "phase", "node_id", "name", "type", "scope", "role", "parallel_shard", "group", "inputs",
            "outputs", "n_inputs", "n_outputs"]
    out = pd.DataFrame(rows, columns=cols)
    out["node_id"] = out["node_id"].astype("Int64")
    return out.head(TABLE_OPS)


# --------------------------------------------------------------------------- present

STAGE_SIGNAL, PHASE_SIGNAL, HOVER, PICK = "sg_stage", "sg_phase", "sg_hover", "sg_pick"
#: the strategy view's namespace control (strategy.NS_SIGNAL), declared here too
NS_SIGNAL = "sv_namespace"


def figure(gd: dict) -> tuple[Figure, list[Control]] | None:
    """The graph figure with its stage and phase controls (page-level selects that set ``sg_stage`` /
    ``sg_phase``), hover highlight of a node's edges (``sg_hover``)."""
    nodes, edges = gd["nodes"], gd["edges"]
    if nodes.empty:
        return None
    stages = sorted(int(s) for s in nodes["stage"].unique())
    have = [p for p in PHASES if (nodes["phase"] == p).any()]
    first_phase = have[0]
    filt = f"datum.stage == {STAGE_SIGNAL} && datum.phase == {PHASE_SIGNAL}"
    # one grid for every stage and part (the same spacing whatever the graph shown): x = layer in its row
    ymax = float(max(nodes["y"].max(), 0.0))
    xs = vl.Scale(domain=[-0.6, WRAP_LAYERS - 0.4], nice=False, zero=False)
    ys = vl.Scale(domain=[-0.9, ymax + 0.9], nice=False, zero=False, reverse=True)
    x = vl.X("x:Q", axis=None, scale=xs)
    y = vl.Y("y:Q", axis=None, scale=ys)
    hover = {"name": HOVER, "select": {"type": "point", "fields": ["uid"], "on": "pointerover",
                                       "clear": "pointerout"}}
    e_plain = edges[edges["end"] == "source"]
    edge_base = dict(x=vl.X("x1:Q", axis=None, scale=xs), y=vl.Y("y1:Q", axis=None, scale=ys),
                     x2=vl.X2("x2:Q"), y2=vl.Y2("y2:Q"))
    dash = vl.condition("datum.back", vl.value([4, 3]), vl.value([1, 0]))
    rule = vl.Chart(e_plain).transform_filter(filt).mark_rule(color=palette.ROLE["free"], opacity=0.55).encode(
        **edge_base, strokeDash=dash,
        strokeWidth=vl.StrokeWidth("edges:Q", scale=vl.Scale(type="sqrt", range=[0.8, 4]), legend=None))
    lit = vl.Chart(edges).transform_filter(filt).transform_filter({"param": HOVER, "empty": False}).mark_rule(
        color=palette.ROLE["wait"], opacity=1, strokeWidth=2.5).encode(**edge_base, strokeDash=dash)
    # the clicked node's input edges (what feeds it), as the seed's strategy matrix highlights them
    fed = vl.Chart(edges[edges["end"] == "target"]).transform_filter(filt).transform_filter(
        {"param": PICK, "empty": False}).mark_rule(color=palette.ROLE["comm"], opacity=1, strokeWidth=3.5).encode(
        **edge_base, strokeDash=dash)
    pick = {"name": PICK, "select": {"type": "point", "fields": ["uid"], "on": "click", "clear": "dblclick"}}
    tips = [vl.Tooltip("name:N", title="Node"), vl.Tooltip("type:N", title="Type"),
            vl.Tooltip("role:N", title="Role"), vl.Tooltip("strategy:N", title="Strategy (in_strategy)"),
            vl.Tooltip("node_id:N", title="Id (attribute table)"), vl.Tooltip("ops:Q", title="Operators"),
            vl.Tooltip("with_strategy:Q", title="With strategy"),
            vl.Tooltip("redistribution:Q", title="Redistribution"),
            vl.Tooltip("gradient_aggregation:Q", title="Gradient aggregation"),
            vl.Tooltip("communication:Q", title="Communication"), vl.Tooltip("inputs:N", title="Inputs (id type)"),
            vl.Tooltip("outputs:N", title="Outputs (id type)"), vl.Tooltip("layer:Q", title="Layer")]
    shapes = ["operator", "operator with strategy", "namespace"]
    # the strategy view's namespace control fades the nodes outside the chosen namespace here too
    ns_test = f"{NS_SIGNAL} == '' || indexof(datum.name + '/', {NS_SIGNAL} + '/') == 0"
    points = vl.Chart(nodes).transform_filter(filt).mark_point(filled=True, strokeWidth=1.2).encode(
        opacity=vl.condition(ns_test, vl.value(1), vl.value(0.15)), x=x, y=y, color=vl.Color("role:N", title="Role", scale=vl.Scale(domain=ROLES, range=_ROLE_COLORS),
                                 legend=vl.Legend(orient="top")),
        shape=vl.Shape("shape:N", title="Node", scale=vl.Scale(domain=shapes, range=["circle", "diamond", "square"]),
                       legend=vl.Legend(orient="top", symbolFillColor=palette.ROLE["free"],
                                        symbolStrokeColor=palette.ROLE["free"])),
        size=vl.Size("ops:Q", title="Operators", scale=vl.Scale(type="sqrt", range=[70, 520]), legend=None),
        stroke={"condition": [{"param": HOVER, "empty": False, "value": palette.ROLE["wait"]},
                              {"param": PICK, "empty": False, "value": palette.ROLE["comm"]}], "value": None},
        strokeWidth={"condition": {"param": PICK, "empty": False, "value": 3}, "value": 1.2},
        tooltip=tips).add_params(hover, pick)
    # labels above the nodes of even layers and below those of odd layers: neighbours do not overwrite each other
    text = [vl.Chart(nodes).transform_filter(filt + f" && datum.layer % 2 == {k}").mark_text(
        fontSize=9, dy=-10 if k == 0 else 10, baseline="bottom" if k == 0 else "top").encode(
        x=x, y=y, text=vl.Text("label:N"), tooltip=tips) for k in (0, 1)]
    height = int(min(900, max(120, 44 * (ymax + 1.8))))
    graph = vl.layer(rule, lit, fed, points, *text).properties(width=vl.PLOT_MAX_WIDTH - 60, height=height)
    mat = gd["matrix"]
    if not mat.empty:  # the clicked operator's strategy matrix under the graph (seed figure 14)
        hi = int(mat["slices"].max())
        base = vl.scale_position(vl.Chart(mat), "slices", [0, hi]).transform_filter(
            {"param": PICK, "empty": False}).encode(
            x=vl.X("dim:O", title=None, sort=None, axis=vl.Axis(orient="top", labelAngle=0)),
            y=vl.Y("input:O", title=None, sort=None))
        tip = [vl.Tooltip("input:N", title="Input"), vl.Tooltip("dim:N", title="Dimension"),
               vl.Tooltip("slices:Q", title="Slices")]
        cells = (base.mark_rect().encode(color=vl.Color("slices:Q", title="Slices", legend=None,
                                                         scale=vl.sequential([0, hi])), tooltip=tip)
                 + vl.cell_labels(base, vl.Text("slices:Q"), tip)).properties(
            width={"step": 44}, height={"step": 24},
            title=vl.TitleParams(text="Strategy matrix of the clicked operator (slices per dimension of each input)",
                                 anchor="start", fontSize=11))
        chart = vl.vconcat(graph, cells, spacing=8).resolve_scale(color="independent")
    else:
        chart = graph
    chart = chart.add_params(vl.param(STAGE_SIGNAL, stages[0]), vl.param(PHASE_SIGNAL, first_phase),
                             vl.param(NS_SIGNAL, ""))
    controls = [Control(STAGE_SIGNAL, "Graph: stage", [(s, f"stage {s}") for s in stages], stages[0]),
                Control(PHASE_SIGNAL, "Graph: part", [(p, {"forward": "forward graph", "backward": "backward graph",
                                                          "recompute": "recompute graph"}[p]) for p in have],
                        first_phase)]
    bounded = []
    if gd["aggregated"]:
        bounded.append(f"namespaces stay closed (square, size = operators) beyond {GRAPH_NODES} nodes per graph")
    if gd["hidden_edges"]:
        bounded.append(f"{gd['hidden_edges']:,} edges joining the fewest operators are hidden (beyond {GRAPH_EDGES} "
                       "per graph)")
    if gd["cut_ops"]:
        bounded.append(f"{gd['cut_ops']:,} operators outside any namespace beyond {GRAPH_NODES} are left out")
    if gd["cut_stages"]:
        bounded.append(f"{len(gd['cut_stages'])} stages from stage {gd['cut_stages'][0]} on are not drawn (beyond "
                       f"{GRAPH_TOTAL_NODES:,} nodes in the figure)")
    caption = ("Each stage's merged graph (its first rank), one part at a time: left to right by dependency layer "
               f"(rows of {WRAP_LAYERS} columns; a wide layer takes several), an edge per input between nodes of the part (constants and inputs "
               "from another part are not drawn; dashed = an edge against the execution order between namespaces). "
               "Circles are operators, diamonds operators with a shard strategy, squares closed namespaces "
               "(aggregation nodes: hover for their special operators). Choose the stage and the part above; hover a "
               "node to highlight its edges and list its inputs and outputs; click an operator to mark its input "
               "edges and show its strategy matrix below (double-click to clear); find it by Id in the node "
               "attribute table."
               + (" Bounded: " + "; ".join(bounded) + "." if bounded else ""))
    static = ("Each stage's merged graph (its first rank), one part shown: left to right by dependency layer "
              f"(rows of {WRAP_LAYERS} columns; a wide layer takes several), an edge per input; circles are operators, diamonds operators with a "
              "shard strategy, squares closed namespaces; the node attribute table lists every node with its inputs "
              "and outputs." + (" Bounded: " + "; ".join(bounded) + "." if bounded else ""))
    fig = Figure("strategy-graph", "Computational graph of a stage: where the strategy and communication operators "
                 "sit", to_spec(chart), caption=caption, static_caption=static,
                 alt="Layered graph of one stage's operators and namespaces coloured by computation, communication, "
                     "redistribution and gradient aggregation")
    return fig, controls


def table(nt: pd.DataFrame, total: int) -> Table:
    cut = total - len(nt)
    return Table.from_frame(
        "strategy-graph-nodes", "Node attributes: every operator with its strategy, inputs and outputs", nt,
        [Column("stage", "Stage", "int"), Column("phase", "Part", "text"), Column("node_id", "Id", "int"),
         Column("name", "Operator", "text"), Column("type", "Type", "text"), Column("scope", "Namespace", "text"),
         Column("role", "Role", "text"), Column("parallel_shard", "Strategy (in_strategy)", "text"),
         Column("group", "Group", "text"),
         Column("inputs", "Inputs", "text", help="Id and type of each input operator (constants by name)"),
         Column("outputs", "Outputs", "text", help="Id and type of each operator of the stage that reads it"),
         Column("n_inputs", "Input count", "int"), Column("n_outputs", "Output count", "int")],
        caption="The graph's node attribute panel as a table: to follow an input or output, filter Id by its number "
                "(and Stage by the stage). Strategy row i is the split of input i (the strategy matrix table lists "
                "it dimension by dimension)."
                + (f" The first {len(nt):,} of {total:,} operators (stage and execution order)." if cut > 0 else ""))
