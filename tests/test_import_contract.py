"""The package's imports run one way (doors -> engine -> rules -> core) and never in a circle.

The layers are the import contract in ``pyproject.toml`` (``[tool.importlinter]``), checked
with ``lint-imports``; this test runs it, so a plain ``pytest`` run fails
on an upward import too, and adds what a layers contract cannot say: no two modules
import each other, directly or through others (docs/DECISIONS.md 481)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp

from conftest import ROOT


def test_the_import_contract_is_kept():
    lint_imports = Path(sys.executable).with_name("lint-imports")  # import-linter's command, beside this Python
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr  # it names each broken contract and its chains
    assert "1 kept, 0 broken" in proc.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The import cycles of ``graph`` (Tarjan's strongly connected components of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_itself_through_others(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT))
    graph = grimp.build_graph("otel_tracefence", cache_dir=None)
    assert _cycles(graph) == []


def test_a_circle_is_found(monkeypatch):
    """The cycle finder itself: a graph with a -> b -> c -> a and d -> a has one cycle."""
    graph = grimp.ImportGraph()
    for importer, imported in (("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")):
        graph.add_import(importer=importer, imported=imported)
    assert _cycles(graph) == [["a", "b", "c"]]
