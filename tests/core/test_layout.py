"""The layout rules of the developers' guide, read from the source with ``ast``: no module over 500
lines, no function over 60 lines, no private (leading underscore) name used across modules, no
import cycle among the modules' top-level imports, and the layers: the core, the spec and the
scenarios import neither panes.spark nor pyspark.

``CHECKED``, what the size and private-name rules cover, is all of ``panes/``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PANES = ROOT / "panes"

MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 60


def _sources(*parts: str) -> list[Path]:
    out: list[Path] = []
    for part in parts:
        p = PANES / part
        out += sorted(p.rglob("*.py")) if p.is_dir() else [p.with_suffix(".py")] if not p.exists() else [p]
    return [p for p in out if p.exists()]


#: the size and private-name rules
CHECKED = sorted(PANES.rglob("*.py"))
#: the layer rule: below panes.spark
BELOW_SPARK = _sources("core", "spec", "spec.py", "scenario.py", "stage_spec.py", "stage_scenario.py")
FORBIDDEN_IMPORTS = ("panes.spark", "pyspark", "py4j")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _package(path: Path) -> str:
    name = module_name(path)
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def _resolve(path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``from ... import`` reads from."""
    if not node.level:
        return node.module or ""
    base = _package(path).split(".")
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _is_module(name: str) -> bool:
    p = ROOT.joinpath(*name.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def imported_modules(path: Path, tree: ast.AST) -> list[str]:
    """Every module the source imports (at the top or inside functions), resolved."""
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            mod = _resolve(path, node)
            out.append(mod)
            out += [f"{mod}.{a.name}" for a in node.names if _is_module(f"{mod}.{a.name}")]
    return out


def long_functions(tree: ast.AST) -> list[tuple[str, int]]:
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    sizes = [(n.name, n.end_lineno - n.lineno + 1) for n in functions]
    return [(name, lines) for name, lines in sizes if lines > MAX_FUNCTION_LINES]


def private_names_across_modules(path: Path, tree: ast.AST) -> list[str]:
    """Private names taken from another module: ``from m import _x`` and ``m._x`` where ``m`` names
    an imported panes module."""
    out = []
    module_aliases = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _resolve(path, node)
            for a in node.names:
                if _private(a.name):
                    out.append(f"from {mod} import {a.name}")
                elif _is_module(f"{mod}.{a.name}"):
                    module_aliases.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("panes"):
                    module_aliases.add(a.asname or a.name.split(".")[0])
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in module_aliases
            and _private(node.attr)
        ):
            out.append(f"{node.value.id}.{node.attr}")
    return out


def top_level_imports(path: Path, tree: ast.AST) -> set[str]:
    """The panes modules a module imports as it is imported: its imports outside functions and
    outside ``if TYPE_CHECKING:`` (an import inside a function runs when it is called)."""
    out: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                visit(ast.Module(body=child.orelse, type_ignores=[]))
                continue
            if isinstance(child, ast.Import):
                out.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                mod = _resolve(path, child)
                out.update(f"{mod}.{a.name}" if _is_module(f"{mod}.{a.name}") else mod for a in child.names)
            visit(child)

    visit(tree)
    return {m for m in out if m.split(".")[0] == "panes" and m != module_name(path)}


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles of an import graph (module -> the modules it imports): its strongly connected
    components of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return cycles


def _parse(path: Path) -> ast.AST:
    return ast.parse(path.read_text(), filename=str(path))


def _id(path: Path) -> str:
    return str(path.relative_to(ROOT))


def test_the_rules_cover_the_core_spec_and_scenarios():
    names = {module_name(p) for p in CHECKED}
    assert {
        "panes.core.engine.engine",
        "panes.core.triggers.machine",
        "panes.core.windows.registry",
        "panes.core.aggregates.registry",
        "panes.core.rules",
        "panes.scenario",
        "panes.replay",
        "panes.spark.native.store",
        "panes.cli",
    } <= names
    assert "panes.spec" in names
    assert set(BELOW_SPARK) < set(CHECKED)


@pytest.mark.parametrize("path", CHECKED, ids=_id)
def test_module_size(path):
    n = len(path.read_text().splitlines())
    assert n <= MAX_MODULE_LINES, f"{_id(path)}: {n} lines"


@pytest.mark.parametrize("path", CHECKED, ids=_id)
def test_function_size(path):
    assert long_functions(_parse(path)) == []


@pytest.mark.parametrize("path", CHECKED, ids=_id)
def test_no_private_name_across_modules(path):
    assert private_names_across_modules(path, _parse(path)) == []


@pytest.mark.parametrize("path", BELOW_SPARK, ids=_id)
def test_no_spark_below_the_spark_layer(path):
    bad = [
        m
        for m in imported_modules(path, _parse(path))
        if m.split(".")[0] in ("pyspark", "py4j") or m == "panes.spark" or m.startswith("panes.spark.")
    ]
    assert bad == []


def test_no_import_cycle():
    graph = {module_name(p): top_level_imports(p, _parse(p)) for p in CHECKED}
    assert import_cycles(graph) == []


# -- the checks themselves find what they look for ----------------------------------------------------


def test_the_checks_find_violations():
    path = PANES / "core" / "engine" / "engine.py"
    src = (
        "from ...spark.native import stream_unsupported\n"
        "from .state import _hidden\n"
        "from .. import rules\n"
        "import pyspark.sql\n"
        "def f():\n"
        "    from ...spark import planner\n"
        "    return rules._secret + 1\n"
        "def g():\n" + "    x = 1\n" * MAX_FUNCTION_LINES
    )
    tree = ast.parse(src)
    mods = imported_modules(path, tree)
    assert "panes.spark.native" in mods and "pyspark.sql" in mods and "panes.spark.planner" in mods
    assert private_names_across_modules(path, tree) == ["from panes.core.engine.state import _hidden", "rules._secret"]
    assert long_functions(tree) == [("g", MAX_FUNCTION_LINES + 1)]


def test_the_cycle_check_finds_cycles_at_the_top_level_only():
    path = PANES / "core" / "engine" / "engine.py"
    src = (
        "from typing import TYPE_CHECKING\n"
        "from . import state\n"
        "from ..rules import Reason\n"
        "if TYPE_CHECKING:\n"
        "    from ...spark import planner\n"
        "def f():\n"
        "    from ... import replay\n"
    )
    assert top_level_imports(path, ast.parse(src)) == {"panes.core.engine.state", "panes.core.rules"}
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_test_modules_have_unique_names():
    # pytest's default import mode keys test modules by basename: two test_x.py in different
    # folders fail collection from a fresh clone (no __pycache__ hides it there).
    root = Path(__file__).resolve().parents[1]
    names = [p.name for p in root.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
