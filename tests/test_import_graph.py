"""The layers' one direction of dependency (DESIGN.md), checked on the source.

* formats imports nothing of plog's above it (no engine, cli, spark_tasks);
* engine never imports cli, typer, rich or pyspark;
* engine's concept folders depend one way: storage imports no other engine folder; nothing in
  storage, maintenance, cluster, clients or groups imports inspect; maintenance imports no
  cluster, clients or groups module;
* no import cycle among engine modules.

Every import counts, the ones inside functions too: a lazy import is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"formats": "formats", "engine": "engine", "cli": "cli", "spark_tasks": "spark_tasks"}


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["plog", *parts])


def _modules(layer: str) -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / layer).rglob("*.py")) if "__pycache__" not in p.parts}


ALL = {name: path for layer in LAYERS for name, path in _modules(layer).items()}
ALL["plog"] = ROOT / "__init__.py"


def _imports(name: str, path: Path) -> set[str]:
    """The modules ``name`` imports (absolute names; ``from pkg import mod`` counts as
    ``pkg.mod`` when that is a module, else as ``pkg``)."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                full = f"{module}.{alias.name}"
                out.add(full if full in ALL else module)
    return out


GRAPH = {name: _imports(name, path) for name, path in ALL.items()}


def _under(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def test_formats_imports_nothing_above_it():
    bad = sorted((m, i) for m, deps in GRAPH.items() if _under(m, "plog.formats") for i in deps
                 if any(_under(i, f"plog.{layer}") for layer in ("engine", "cli", "spark_tasks")))
    assert bad == []


@pytest.mark.parametrize("forbidden", ["plog.cli", "typer", "rich", "pyspark"])
def test_engine_never_imports(forbidden):
    bad = sorted((m, i) for m, deps in GRAPH.items() if _under(m, "plog.engine") for i in deps
                 if _under(i, forbidden))
    assert bad == []


# (importing folder, folders it must not import)
FOLDER_RULES = [
    ("plog.engine.storage", ["plog.engine.maintenance", "plog.engine.cluster", "plog.engine.clients",
                             "plog.engine.groups", "plog.engine.inspect"]),
    ("plog.engine.maintenance", ["plog.engine.cluster", "plog.engine.clients", "plog.engine.groups",
                                 "plog.engine.inspect"]),
    ("plog.engine.cluster", ["plog.engine.inspect"]),
    ("plog.engine.clients", ["plog.engine.inspect"]),
    ("plog.engine.groups", ["plog.engine.inspect"]),
]


@pytest.mark.parametrize("folder,forbidden", FOLDER_RULES, ids=[f for f, _ in FOLDER_RULES])
def test_engine_folders_depend_one_way(folder, forbidden):
    bad = sorted((m, i) for m, deps in GRAPH.items() if _under(m, folder) for i in deps
                 if any(_under(i, f) for f in forbidden))
    assert bad == []


def _cycles(nodes: set[str]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), or a module importing
    itself."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def edges(n: str):
        for d in GRAPH.get(n, ()):
            # An import of a package runs its __init__ only; an import of a module inside it
            # is an edge to that module.
            if d in nodes:
                yield d

    def visit(n: str) -> None:
        index[n] = low[n] = counter[0]
        counter[0] += 1
        stack.append(n)
        on_stack.add(n)
        for d in edges(n):
            if d not in index:
                visit(d)
                low[n] = min(low[n], low[d])
            elif d in on_stack:
                low[n] = min(low[n], index[d])
        if low[n] == index[n]:
            component = []
            while True:
                d = stack.pop()
                on_stack.discard(d)
                component.append(d)
                if d == n:
                    break
            if len(component) > 1 or n in GRAPH.get(n, ()):
                found.append(sorted(component))

    for n in sorted(nodes):
        if n not in index:
            visit(n)
    return found


def test_no_import_cycle_among_engine_modules():
    engine = {m for m in ALL if _under(m, "plog.engine")}
    assert _cycles(engine) == []


def test_the_checker_sees_imports_inside_functions():
    # The lazy import of the recovery module inside the maintenance runner is an edge.
    assert "plog.engine.maintenance.recovery" in GRAPH["plog.engine.maintenance.runner"] \
        or "plog.engine.maintenance" in GRAPH["plog.engine.maintenance.runner"]
