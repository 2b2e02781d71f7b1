"""No import circles in `voicestream`, read from the source.

The graph holds every import of a `voicestream` module anywhere in a module, a function's
body included: an import deferred into a function still closes a circle, it only hides it
until the function runs. Imports under `if TYPE_CHECKING:` are left out (they never run).
`import a.b` and `from a import b` (b a module) count as an edge to `a.b` alone: the
package `a` that Python imports on the way is not the importer's choice.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"

Graph = Mapping[str, Mapping[str, int]]
"""Each module's imported modules of the same package, with the line of the first import."""


def module_names(root: Path, package: str) -> dict[str, Path]:
    names = {}
    for path in (root / package).rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(tree: ast.Module, modules: Mapping[str, Path]) -> Iterator[tuple[str, int]]:
    """The modules `tree` imports, wherever it imports them, but under `if TYPE_CHECKING:`."""
    pending: list[ast.AST] = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, ast.If) and _type_checking(node.test):
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                yield (submodule if submodule in modules else node.module), node.lineno
        pending.extend(ast.iter_child_nodes(node))


def import_graph(root: Path, package: str) -> dict[str, dict[str, int]]:
    modules = module_names(root, package)
    graph: dict[str, dict[str, int]] = {}
    for name, path in modules.items():
        edges: dict[str, int] = {}
        for imported, line in _imported(ast.parse(path.read_text(), str(path)), modules):
            if imported in modules and imported != name:
                edges[imported] = min(line, edges.get(imported, line))
        graph[name] = edges
    return graph


def tangles(graph: Graph) -> list[set[str]]:
    """The sets of two or more modules that each reach the others (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in graph[module]:
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            members = set(stack[stack.index(module):])
            del stack[stack.index(module):]
            if len(members) > 1:
                found.append(members)

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def circle(graph: Graph, members: set[str]) -> list[str]:
    """The shortest circle inside `members` through the first of them by name (breadth
    first), as the modules in import order, the first repeated at the end."""
    start = min(members)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for module in frontier:
            for imported in sorted(graph[module]):
                if imported not in members or imported in came_from:
                    continue
                came_from[imported] = module
                if imported == start:
                    path = [start, module]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return path[::-1]
                following.append(imported)
        frontier = following
    raise AssertionError(f"no circle through {start}")


def described(graph: Graph, modules: list[str]) -> str:
    return "\n".join(
        f"  {module} imports {imported} (line {graph[module][imported]})"
        for module, imported in itertools.pairwise(modules)
    )


def test_voicestream_has_no_import_circle() -> None:
    graph = import_graph(SRC, "voicestream")
    found = tangles(graph)
    assert not found, "import circles:\n" + "\n\n".join(
        described(graph, circle(graph, members)) for members in found
    )


def test_the_graph_sees_deferred_imports_and_skips_type_checking(tmp_path: Path) -> None:
    """A circle closed by an import inside a function is one; an import only for the type
    checker is none."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.a import A\n")
    (package / "a.py").write_text("import pkg.b\n\nclass A:\n    pass\n")
    (package / "b.py").write_text("def late():\n    from pkg import a\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from pkg.d import D\nelse:\n    from pkg import b\n"
    )
    (package / "d.py").write_text("from pkg.c import x\nD = 1\n")

    graph = import_graph(tmp_path, "pkg")

    assert graph["pkg"] == {"pkg.a": 1}
    assert graph["pkg.c"] == {"pkg.b": 5}  # the else branch runs
    assert tangles(graph) == [{"pkg.a", "pkg.b"}]
    assert circle(graph, {"pkg.a", "pkg.b"}) == ["pkg.a", "pkg.b", "pkg.a"]
    assert described(graph, ["pkg.a", "pkg.b", "pkg.a"]) == (
        "  pkg.a imports pkg.b (line 1)\n  pkg.b imports pkg.a (line 2)"
    )
