"""The package's import graph has no circle, and the sections never import a reader.

Every module of ``reportgen`` is parsed (nothing is imported): every ``import`` / ``from ... import`` statement
counts, at any level (inside functions too), relative or absolute. ``from .x import y`` is an edge to ``x`` (and
to ``x.y`` when that is a module); importing ``a.b.c`` also imports the packages ``a.b`` and ``a`` (their
``__init__``), so that is an edge to each of them too.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = "reportgen"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _with_parents(name: str, modules: dict[str, Path]) -> set[str]:
    """``name`` and every package above it that is a module of ours (importing a.b.c runs a/__init__, a/b/__init__)."""
    parts = name.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in modules}


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The modules of the package that ``module`` imports (module doc)."""
    is_pkg = path.name == "__init__.py"
    package = module if is_pkg else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                out |= _with_parents(alias.name, modules)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out |= _with_parents(target, modules)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in modules:
                    out.add(sub)
    out.discard(module)
    # a package's own __init__ runs before its sub-module: that edge is no circle of this module's making
    return {m for m in out if not module.startswith(m + ".")}


def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {m: imports_of(m, p, modules) for m, p in modules.items()}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    counter = [0]

    def visit(v: str) -> None:
        work = [(v, iter(sorted(g[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            for w in it:
                if w not in g:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(g[w]))))
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        w = stack.pop()
                        on.discard(w)
                        comp.append(w)
                        if w == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def _a_cycle(g: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One closed path through the component (for the message): a -> b -> ... -> a."""
    members = set(comp)
    start = comp[0]
    prev = {start: None}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(g[v] & members):
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return comp


def test_the_walk_sees_function_level_relative_and_parent_imports():
    g = graph()
    assert "reportgen.sections" in g["reportgen.sections.advisor"] or "reportgen.sections" in g
    assert g["reportgen.cli"], "cli imports something of the package"
    # the parent-package edge: importing reportgen.readers.kineto runs reportgen/readers/__init__.py
    modules = _modules()
    assert _with_parents("reportgen.readers.kineto", modules) >= {"reportgen", "reportgen.readers",
                                                                   "reportgen.readers.kineto"}


def test_circles_are_found():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(g) == [["a", "b", "c"]]
    assert _a_cycle(g, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_circles():
    g = graph()
    found = circles(g)
    assert not found, "import circles:\n" + "\n".join(
        f"{len(c)} modules {', '.join(c)}; e.g. {' -> '.join(_a_cycle(g, c))}" for c in found)


def test_sections_never_import_a_reader():
    g = graph()
    bad = {m: sorted(x for x in deps if x == "reportgen.readers" or x.startswith("reportgen.readers."))
           for m, deps in g.items() if m == "reportgen.sections" or m.startswith("reportgen.sections.")}
    bad = {m: v for m, v in bad.items() if v}
    assert not bad, f"sections import readers: {bad}"


def test_page_and_json_render_one_document():
    """The page does not import the metrics writer (both render reportgen.document), and the advisor does not
    import the writer it feeds."""
    g = graph()
    assert "reportgen.metrics" not in g["reportgen.render"]
    assert "reportgen.metrics" not in g["reportgen.sections.advisor"]
    assert {"reportgen.document"} <= g["reportgen.render"] & g["reportgen.metrics"]
