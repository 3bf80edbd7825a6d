"""No import cycle among toolsearch's modules, counting every import: at module level, inside
functions (lazy imports) and under ``TYPE_CHECKING``. A cycle means two modules each need the
other: the shared piece belongs in a lower module both import."""

from __future__ import annotations

import ast
import graphlib
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "setuptools"
]


def package_modules() -> dict[str, Path]:
    """Every module of the installed package by its dotted name (``backends/`` is
    ``toolsearch.backends``, as the wheel lays it out)."""
    modules: dict[str, Path] = {}
    for package, folder in SETUPTOOLS["package-dir"].items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if all(p.isidentifier() for p in parts):
                modules[".".join((package, *parts))] = path
    return modules


def imported_names(module: str, path: Path) -> set[str]:
    """Every dotted name ``module`` imports, and each ``from X import y`` as ``X`` and
    ``X.y`` (``y`` may be a submodule)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    modules = package_modules()
    return {
        module: {name for name in imported_names(module, path) if name in modules} - {module}
        for module, path in modules.items()
    }


def test_the_graph_sees_the_package() -> None:
    graph = import_graph()
    assert "toolsearch.backends.embedding" in graph and "toolsearch.agent.mode" in graph
    assert "toolsearch.backends.embedding_cache" in graph["toolsearch.backends.embedding"]
    assert "toolsearch.config" in graph["toolsearch.agent.mode"]


def test_no_import_cycles() -> None:
    try:
        graphlib.TopologicalSorter(import_graph()).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_the_core_does_not_import_the_agent_layer() -> None:
    graph = import_graph()
    core = {"toolsearch.config", "toolsearch.engine", "toolsearch.catalog", "toolsearch.tool"}
    for module in core:
        assert not {m for m in graph[module] if m.startswith("toolsearch.agent")}, module
