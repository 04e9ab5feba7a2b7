"""The code's shape (README "How the code is shaped"): sections and the engine never name an input family, and
findings are made by the analysis, never by ``present``."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "reportgen"
#: the families' names and their labels: only readers/ and the registry may say them in code
#: ("ascending", a sort order, is not the family)
FAMILY_WORDS = re.compile(r"kineto|ascend(?!ing)|mindinsight|mindspore|torch_npu|source_format", re.I)


def _code_strings_and_names(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every identifier, attribute and string constant of ``path`` that is code, not a docstring
    or a comment: a section may cite a family's documents in its docs, never decide on a family."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(getattr(first, "value", None), ast.Constant):
                docstrings.add(id(first.value))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            out.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute):
            out.append((node.lineno, node.attr))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out.append((node.lineno, node.name))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            out.append((node.lineno, node.value))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            mod = getattr(node, "module", None) or ""
            out.append((node.lineno, " ".join([mod] + [a.name for a in node.names])))
    return out


CODE = sorted([*PKG.joinpath("sections").glob("*.py"), PKG / "engine.py"])


@pytest.mark.parametrize("path", CODE, ids=lambda p: p.relative_to(PKG).as_posix())
def test_no_family_decides_in_sections_or_engine(path):
    hits = [(line, text) for line, text in _code_strings_and_names(path) if FAMILY_WORDS.search(text)]
    assert not hits, f"{path.name} names an input family in code: " + "; ".join(
        f"line {line}: {text[:80]!r}" for line, text in hits[:10])


SECTIONS = sorted(p for p in PKG.joinpath("sections").glob("*.py") if not p.name.startswith("_"))


@pytest.mark.parametrize("path", SECTIONS, ids=lambda p: p.stem)
def test_present_makes_no_finding(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    present = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "present"]
    made = [n.lineno for p in present for n in ast.walk(p)
            if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", "")) == "Finding"]
    assert not made, f"{path.name}: present() makes findings at lines {made}; the analysis makes them"


#: a table name with a family prefix (MindInsight's ``mi_``): readers fill canonical tables, sections read those
FAMILY_TABLE = re.compile(r"^mi_")


@pytest.mark.parametrize("path", CODE, ids=lambda p: p.relative_to(PKG).as_posix())
def test_no_section_reads_a_family_table(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    hits = [(n.lineno, n.args[0].value) for n in ast.walk(tree)
            if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "table" and n.args
            and isinstance(n.args[0], ast.Constant) and isinstance(n.args[0].value, str)
            and FAMILY_TABLE.search(n.args[0].value)]
    assert not hits, f"{path.name} reads family tables: {hits[:10]}"
