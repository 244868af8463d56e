"""The import graph of ``src/changefeed``: no cycles, and layers that depend one way.

How imports are counted: every ``import changefeed.x`` and ``from changefeed.x import y`` anywhere
in a module's source counts, at module level, inside functions (lazy imports) and under
``if TYPE_CHECKING:`` alike, for the package graph: a lazy or type-only import still ties two
packages' designs together, and hiding a cycle inside a function is how cycles creep back in.
Between modules of one package, type-only imports (under ``if TYPE_CHECKING:``) are left out:
two classes of a package may name each other in annotations; runtime imports (lazy ones too)
still may not form a cycle. ``from pkg import
name`` counts as an import of the module ``pkg.name`` when that is a module, else of ``pkg``.
Importing a submodule is not counted as importing its parent package's ``__init__`` (Python runs
the parent first, so a package may list its own submodules without forming a cycle).

Modules are grouped into units, listed from the bottom layer up in :data:`LAYERS`; a unit may
import only units of a lower layer. ``sql`` is the language (AST, parser, functions, expression
evaluator, results), below ``pipeline`` so the pipeline may compile SQL expressions;
``statements`` is statement execution (``sql.session`` and the families in
``sql.statements``), above ``pipeline`` so a statement may start a feed.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parent.parent / "src"
ROOT = SRC / "changefeed"

#: Units from the bottom layer up; units in one tuple are one layer (they may not import each other).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("wal_syncer",),  # the process that syncs a WAL for an event loop: imports nothing of ours
    ("exceptions", "observe", "durable_files", "stop_signals"),
    ("sqlite_wal",),  # WAL switching and group commit: raises the exceptions of the layer below
    ("engine", "topics"),
    ("feeds",),
    ("formats",),
    ("sql",),
    ("pipeline",),
    ("statements",),
    ("connection",),
    ("changefeed",),  # the package itself: the public API (connect, Result, ChangefeedError)
    ("server", "testing"),
    ("cli",),
)
RANK = {unit: i for i, layer in enumerate(LAYERS) for unit in layer}


def _modules() -> dict[str, Path]:
    out = {}
    for p in ROOT.rglob("*.py"):
        parts = p.relative_to(SRC).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


def _unit(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 1:
        return "changefeed"
    if parts[1] == "sql" and (len(parts) > 2 and parts[2] in ("session", "statements")):
        return "statements"
    return parts[1]


def _type_only(tree: ast.Module) -> set[int]:
    """ids of the import nodes under ``if TYPE_CHECKING:``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
    return out


def _graph(*, type_checking: bool = True) -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        skip = set() if type_checking else _type_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    targets.append(full if full in mods else node.module)
            for t in targets:
                if not t.startswith("changefeed"):
                    continue
                while t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != mod:
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            v, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[v] = min(low[v], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_every_unit_has_a_layer() -> None:
    units = {_unit(m) for m in _modules()}
    assert not units - RANK.keys(), f"add these packages to LAYERS: {sorted(units - RANK.keys())}"


def test_no_module_import_cycle() -> None:
    assert _cycles(_graph(type_checking=False)) == []


def test_no_package_import_cycle() -> None:
    units: dict[str, set[str]] = defaultdict(set)
    for mod, targets in _graph().items():
        for t in targets:
            if _unit(t) != _unit(mod):
                units[_unit(mod)].add(_unit(t))
    assert _cycles(dict(units)) == []


def test_layers_depend_one_way() -> None:
    wrong = sorted(
        f"{mod} imports {t} ({_unit(mod)} may import only layers below it)"
        for mod, targets in _graph().items()
        for t in targets
        if _unit(t) != _unit(mod) and RANK[_unit(t)] >= RANK[_unit(mod)]
    )
    assert wrong == []


@pytest.mark.parametrize("unit", ["engine", "feeds"])
def test_lower_layers_know_nothing_of_sql(unit: str) -> None:
    above = {"sql", "statements", "pipeline", "connection", "server", "cli"}
    bad = sorted(
        f"{mod} imports {t}"
        for mod, targets in _graph().items()
        if _unit(mod) == unit
        for t in targets
        if _unit(t) in above
    )
    assert bad == []


def test_the_detector_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_each_statement_node_has_one_family() -> None:
    from changefeed.sql import ast as sql_ast
    from changefeed.sql.statements import STATEMENTS

    handled = set(STATEMENTS.statements)
    control = {
        sql_ast.Begin,
        sql_ast.Commit,
        sql_ast.Rollback,
        sql_ast.Savepoint,
        sql_ast.ReleaseSavepoint,
        sql_ast.RollbackToSavepoint,
    }
    statement_types = set(getattr(sql_ast.Statement, "__args__", ()))
    assert statement_types, "changefeed.sql.ast.Statement is expected to be a union of node types"
    missing = statement_types - handled - control
    assert not missing, f"statements no family handles: {sorted(t.__name__ for t in missing)}"


def _sub_unit(module: str) -> str:
    """``changefeed.pipeline.<role>`` for a pipeline module (its role subpackage or module)."""
    return ".".join(module.split(".")[:3])


def test_pipeline_roles_import_one_way() -> None:
    """The pipeline's role subpackages (spark, sources, delivery, snapshot, stream, sinks, ...) form
    no cycle, annotations included: a micro-batch's way crosses each role once."""
    roles: dict[str, set[str]] = defaultdict(set)
    for mod, targets in _graph().items():
        if _unit(mod) != "pipeline":
            continue
        for t in targets:
            if _unit(t) == "pipeline" and _sub_unit(t) != _sub_unit(mod) and t != "changefeed.pipeline":
                roles[_sub_unit(mod)].add(_sub_unit(t))
    assert _cycles(dict(roles)) == []


def _module_aliases(tree: ast.Module, mods: dict[str, Path]) -> set[str]:
    """Local names bound to one of our modules (``from changefeed.x import mod``, ``import ... as m``)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("changefeed"):
            names.update(a.asname or a.name for a in node.names if f"{node.module}.{a.name}" in mods)
        elif isinstance(node, ast.Import):
            names.update(a.asname for a in node.names if a.asname and a.name in mods)
    return names


def test_no_private_name_crosses_modules() -> None:
    """No ``from changefeed.x import _name`` and no ``module._name`` of another of our modules."""
    mods = _modules()
    bad: list[str] = []
    for mod, path in mods.items():
        tree = ast.parse(path.read_text(), str(path))
        aliases = _module_aliases(tree, mods)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("changefeed"):
                bad += [
                    f"{mod}: from {node.module} import {a.name}" for a in node.names if a.name.startswith("_")
                ]
            elif (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                bad.append(f"{mod}: {node.value.id}.{node.attr}")
    assert sorted(bad) == []


def test_no_fixed_scratch_path() -> None:
    """No string constant of the package names a fixed place under ``/tmp`` (a leftover of a
    measurement once wrote there on every worker's shutdown, failing where it did not exist):
    scratch space comes from ``tempfile`` or from the caller."""
    bad: list[str] = []
    for mod, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and "/tmp/" in node.value:
                bad.append(f"{mod}:{node.lineno}: {node.value!r}")
            elif isinstance(node, ast.JoinedStr):
                text = "".join(
                    v.value for v in node.values if isinstance(v, ast.Constant) and isinstance(v.value, str)
                )
                if "/tmp/" in text:
                    bad.append(f"{mod}:{node.lineno}: f-string {text!r}")
    assert bad == []
