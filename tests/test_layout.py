"""The package's layout: the modules of ``trizk`` import each other without a cycle.

Every ``import`` and ``from ... import`` statement counts wherever it stands: at module level,
inside a function (an import moved into a function to dodge a cycle is still a cycle) and under
``if TYPE_CHECKING:`` (an annotation that needs the other module is a dependency on it). The
modules are read with :mod:`ast` from the folders that pyproject.toml installs as the
``trizk`` namespace (``[tool.setuptools] packages`` placed by ``package-dir``); nothing is
imported.

``from package import name`` depends on the module ``package.name`` when there is one, else on
``package`` itself. A module does not depend on its parent packages by this count (Python runs
their ``__init__`` first, but those import nothing that imports back).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Cycles known and being removed elsewhere, each as the set of its modules (none left).
KNOWN_CYCLES: list[frozenset[str]] = []


def modules() -> dict[str, Path]:
    """Every module of the installed ``trizk`` namespace: dotted name -> source file."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        setuptools = tomllib.load(f)["tool"]["setuptools"]
    dirs: dict[str, str] = setuptools["package-dir"]
    out: dict[str, Path] = {}
    for package in setuptools["packages"]:
        # the longest package-dir entry that is the package or one of its parents places it
        base = max((p for p in dirs if package == p or package.startswith(p + ".")), key=len)
        folder = ROOT / dirs[base] / Path(*package[len(base) :].split(".")[1:])
        for path in sorted(folder.glob("*.py")):
            out[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return out


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that ``module`` (the file ``path``) imports, anywhere in it."""
    is_package = path.name == "__init__.py"
    package = module if is_package else module.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                out.add(sub if sub in known else source)
    return {m for m in out if m in known and m != module}


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    component.add(m)
                    if m == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_layout_finds_the_modules() -> None:
    found = modules()
    assert "trizk" in found and "trizk.server.ops.fourlw" in found
    assert found["trizk.server.frontend.core"] == ROOT / "server" / "frontend" / "core.py"
    graph = import_graph()
    assert "trizk.server.frontend.core" in graph["trizk.server.roles.standalone"]
    # an import inside a function counts (TrizkServer.run imports the AdminServer on demand)
    assert "trizk.server.ops.admin" in graph["trizk.server.shell.app"]
    # so does one under TYPE_CHECKING (the status view names ServerMetrics in annotations)
    assert "trizk.server.common.servermetrics" in graph["trizk.server.ops.status"]
    # "from package import module" depends on the module
    assert "trizk.server.ops.http" in graph["trizk.server.ops.metrics"]


def test_the_cycle_finder() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert cycles(graph) == [frozenset({"a", "b", "c"})]


def test_no_import_cycles() -> None:
    found = [c for c in cycles(import_graph()) if c not in KNOWN_CYCLES]
    assert not found, "import cycles: " + "; ".join(" <-> ".join(sorted(c)) for c in found)
