"""The shape of the code, held by its import graph (docs/architecture.md).

The graph is read from the source (module-level imports and imports inside functions alike), so
an import hidden in a function to dodge a cycle still counts. No exception is listed: no import
cycle, no ``app`` → ``adapters`` import outside the composition root, no source file over the
limit.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "adapters", "toolkits")
MAX_LINES = 600

#: The composition root: the one module of ``app`` that imports adapters (it chooses what
#: implements each port); only the entry points, the app factory and the command line, import it.
COMPOSITION_ROOT = "app.compose"
ENTRY_POINTS = {"app.main", "app.cli"}

#: Where routes live: an adapter imports none of them.
ROUTES = ("app.api", "app.cds.routes")

#: Where SQL is written: the store. Elsewhere a module may name a connection or a session it
#: passes on, and catch the database's errors, nothing more.
STORE = "app.store"
SQLALCHEMY_TYPES = {"sqlalchemy": {"Connection", "Engine"}, "sqlalchemy.orm": {"Session"}}


def modules(root: Path) -> dict[str, Path]:
    """Every module under the packages, by dotted name (a package by its own name)."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _owner(name: str, known: dict[str, Path]) -> str | None:
    """The module ``name`` is, or is in (``pkg.mod.attr`` → ``pkg.mod``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _imports(name: str, path: Path) -> Iterator[tuple[str, list[str]]]:
    """``(module, names)`` for each import of a module, anywhere in its source: ``import m``
    as ``(m, [])``, ``from m import a, b`` as ``(m, [a, b])``, relative imports resolved."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            yield base, [alias.name for alias in node.names]


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module → the modules it imports, anywhere in its source, relative imports resolved."""
    known = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for base, names in _imports(name, path):
            # ``from pkg import mod`` imports the module; ``from mod import name`` the module
            targets = [f"{base}.{n}" if f"{base}.{n}" in known else base for n in names]
            for target in targets or [base]:
                owner = _owner(target, known)
                if owner is not None and owner != name:
                    graph[name].add(owner)
    return graph


def cycles(graph: dict[str, set[str]]) -> set[tuple[str, ...]]:
    """The import cycles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[tuple[str, ...]] = set()

    def visit(start: str) -> None:
        # iterative, so a deep graph cannot hit the recursion limit
        work: list[tuple[str, Iterable[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.add(tuple(sorted(component)))

    for name in sorted(graph):
        if name not in index:
            visit(name)
    return found


GRAPH = import_graph(ROOT)


def test_no_import_cycle() -> None:
    found = sorted(cycles(GRAPH))
    assert not found, "import cycles (imports inside functions count): " + "; ".join(
        " ↔ ".join(c) for c in found
    )


def test_no_adapter_imports_a_route() -> None:
    bad = sorted(
        (m, t)
        for m, targets in GRAPH.items()
        if m.startswith("adapters")
        for t in targets
        if any(t == r or t.startswith(r + ".") for r in ROUTES)
    )
    assert not bad, f"adapters importing routes: {bad}"


def test_no_import_from_app_into_adapters_but_the_composition_root() -> None:
    found = {
        (m, t)
        for m, targets in GRAPH.items()
        if (m.startswith("app.") or m == "app") and m != COMPOSITION_ROOT
        for t in targets
        if t.startswith("adapters")
    }
    assert not found, (
        f"imports from app into adapters: {sorted(found)}; the core depends on a port declared "
        f"in app, implemented in adapters and chosen at the composition root ({COMPOSITION_ROOT})"
    )


def test_only_the_entry_points_import_the_composition_root() -> None:
    importers = {m for m, targets in GRAPH.items() if COMPOSITION_ROOT in targets}
    assert importers <= ENTRY_POINTS, (
        f"{sorted(importers - ENTRY_POINTS)} import {COMPOSITION_ROOT}: the core names the "
        "ports of app.ports, and the entry points hand it what implements them"
    )
    assert any(t.startswith("adapters") for t in GRAPH[COMPOSITION_ROOT])


def test_no_source_file_over_the_limit() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in modules(ROOT).values()
    }
    too_long = sorted(
        f"{name} ({lines} lines)" for name, lines in sizes.items() if lines > MAX_LINES
    )
    assert not too_long, f"over {MAX_LINES} lines: {too_long}"


def package_two_way_imports(root: Path) -> list[str]:
    """``package ↔ module`` for each package whose ``__init__`` imports one of its modules that
    imports from the package itself (``from package import …``, which runs the package's
    ``__init__`` first: the two need each other to load)."""
    known = modules(root)
    graph = import_graph(root)
    found: list[str] = []
    for package, path in known.items():
        if path.name != "__init__.py":
            continue
        for module in sorted(graph[package]):
            bases = {base for base, _names in _imports(module, known[module])}
            if module.startswith(package + ".") and package in bases:
                found.append(f"{package} ↔ {module}")
    return found


def test_no_package_and_its_module_import_each_other() -> None:
    found = package_two_way_imports(ROOT)
    assert not found, f"a package and its module import each other: {found}"


def test_a_package_and_its_module_importing_each_other_are_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "app/p/__init__.py": "from app.p.control import C\n",
            "app/p/control.py": "from app.p import policy\nC = 1\n",
            "app/p/policy.py": "",
            "app/q/__init__.py": "",
            "app/q/control.py": "from app.q import policy\n",
            "app/q/policy.py": "",
        },
    )
    assert package_two_way_imports(root) == ["app.p ↔ app.p.control"]


#: the one module that writes the ``runs`` table
RUN_STORE = "app.store.runs"
_RUN_TABLE = {"Run", "_RUNS", "Run.__table__", "runs"}
_WRITES = {"insert", "update", "delete", "insert_for", "dialect_insert"}
_RUN_SQL = re.compile(r"\b(INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+runs\b", re.IGNORECASE)


def run_writes_outside_the_store(root: Path) -> list[str]:
    """``module:line`` of each write to the ``runs`` table outside the run store: an INSERT,
    UPDATE or DELETE built on the table, one written as SQL text, or a ``Run`` row made."""
    found: list[str] = []
    for name, path in modules(root).items():
        if name in (RUN_STORE, "app.store.models"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                if _RUN_SQL.search(node.value):
                    found.append(f"{name}:{node.lineno}")
            elif isinstance(node, ast.Call):
                func = node.func
                called = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                if called == "Run" or (
                    called in _WRITES and any(ast.unparse(arg) in _RUN_TABLE for arg in node.args)
                ):
                    found.append(f"{name}:{node.lineno}")
    return sorted(found)


def test_runs_are_written_by_the_run_store_only() -> None:
    found = run_writes_outside_the_store(ROOT)
    assert not found, f"the runs table is written in {RUN_STORE} only: {found}"


def test_a_write_to_the_runs_table_elsewhere_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "app/store/__init__.py": "",
            "app/store/runs.py": "update(_RUNS)\n",
            "app/store/other.py": (
                "update(_RUNS).values(a=1)\n"
                "delete(Run).where(x)\n"
                "text('UPDATE runs SET status = 1')\n"
                "session.add(Run(id='1'))\n"
                "select(_RUNS)\n"
                "update(_TRACE)\n"
                "text('SELECT id FROM runs')\n"
            ),
        },
    )
    assert run_writes_outside_the_store(root) == [
        "app.store.other:1",
        "app.store.other:2",
        "app.store.other:3",
        "app.store.other:4",
    ]


def sql_outside_the_store(root: Path) -> list[str]:
    """``module: import`` for each SQLAlchemy import outside the store that could build SQL."""
    found: list[str] = []
    for name, path in modules(root).items():
        if name == STORE or name.startswith(STORE + "."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                found += [
                    f"{name}: import {a.name}"
                    for a in node.names
                    if a.name.split(".")[0] == "sqlalchemy"
                ]
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                if node.module.split(".")[0] != "sqlalchemy" or node.module == "sqlalchemy.exc":
                    continue
                allowed = SQLALCHEMY_TYPES.get(node.module, set())
                found += [
                    f"{name}: from {node.module} import {a.name}"
                    for a in node.names
                    if a.name not in allowed
                ]
    return sorted(found)


def test_no_sql_outside_the_store() -> None:
    found = sql_outside_the_store(ROOT)
    assert not found, f"SQL is written in app/store only: {found}"


def test_sql_outside_the_store_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "app/store/__init__.py": "from sqlalchemy import select\n",
            "app/cds.py": (
                "from sqlalchemy import Engine, text\nfrom sqlalchemy.exc import DBAPIError\n"
            ),
            "app/page.py": "def f():\n    from sqlalchemy.orm import Session, aliased\n",
            "adapters/log.py": "import sqlalchemy.dialects.postgresql\n",
        },
    )
    assert sql_outside_the_store(root) == [
        "adapters.log: import sqlalchemy.dialects.postgresql",
        "app.cds: from sqlalchemy import text",
        "app.page: from sqlalchemy.orm import aliased",
    ]


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in {"app/__init__.py": "", **files}.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for package in PACKAGES[1:]:
        (tmp_path / package).mkdir(exist_ok=True)
    return tmp_path


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "app/a.py": "from app.b import thing\n",
            "app/b.py": "def thing():\n    from . import c\n",
            "app/c.py": "import app.a\n",
            "app/d.py": "from app import a\n",
        },
    )
    assert cycles(import_graph(root)) == {("app.a", "app.b", "app.c")}


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from app.b import x\n", {"app.b"}),
        ("from .b import x\n", {"app.b"}),
        ("from . import b\n", {"app.b"}),
        ("import app.b\n", {"app.b"}),
        ("def f():\n    from app.b import x\n", {"app.b"}),
        ("import os\n", set()),
    ],
)
def test_the_graph_reads_every_form_of_import(
    tmp_path: Path, source: str, expected: set[str]
) -> None:
    root = _tree(tmp_path, {"app/a.py": source, "app/b.py": ""})
    assert import_graph(root)["app.a"] == expected
